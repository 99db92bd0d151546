#!/usr/bin/env python3
"""Checks the import rules of ARCHITECTURE.md on the Rust sources, by their `use` lines.

- No module cycle among the files of core/src/app, core/src/domain, cli/src and
  infra/market-sim/src (a module is a file; `foo/bar.rs` belongs to module `foo`).
- core/src/domain imports nothing else of capblock's (no app, ports, aws, config, lambda).
- core/src/app imports domain, ports and app only (never aws, config or lambda).
- core/src/ports/ imports domain only.
- Each CLI command (cli/src/cmd/*.rs) is a module of its own and imports no other command:
  what two commands share lives in cli/src/table.rs or cli/src/context.rs.
- The CLI never imports the Lambda glue (capblock_shared::lambda).
- The core crate (core/src) has no AWS SDK to import: Cargo enforces that, `make test`
  checks it with `cargo tree`.
- Every public type name in core/src and shared/src is used once (two `Step`s read the same in a `use`
  line and mean different things).
- infra/market-sim shares no code with capblock (no capblock_shared anywhere in it).

Usage: check_layers.py [REPO]   (exit 1 and one line per problem when a rule is broken)
"""

import re
import sys
from pathlib import Path

PUB_TYPE = re.compile(r"^\s*pub\s+(?:struct|enum|trait|type)\s+([A-Z]\w*)", re.MULTILINE)
USE = re.compile(r"\buse\s+(crate|super|capblock_shared)::([\w:]+|\{)")
# `crate::x::y` or `super::y` anywhere in code (paths written inline, not only in `use`).
PATH = re.compile(r"\b(crate|super|capblock_shared)::([a-z_][\w]*)(?:::([a-z_][\w]*))?")


def strip(text: str) -> str:
    """Source without comments or #[cfg(test)] modules (tests may import freely)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    i = text.find("#[cfg(test)]\nmod tests {")
    return text[:i] if i >= 0 else text


def module_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0].removesuffix(".rs")


def edges(root: Path, crate_prefix: str) -> dict[str, set[str]]:
    """module -> modules of the same directory it refers to (by `super::m` from a top-level
    file, `crate::<crate_prefix>::m`, or `super::super::m` from a child)."""
    out: dict[str, set[str]] = {}
    siblings = {p.stem for p in root.glob("*.rs")} | {p.name for p in root.iterdir() if p.is_dir()}
    for p in sorted(root.rglob("*.rs")):
        if p.name == "tests.rs" or "tests" in p.relative_to(root).parts[:-1]:
            continue
        m = module_of(p, root)
        if m in ("mod", "lib", "main"):
            continue
        depth = len(p.relative_to(root).parts) - 1  # 0 for top-level files
        if p.name == "mod.rs":
            depth -= 1
        code = strip(p.read_text())
        refs = out.setdefault(m, set())
        for pre, first, second in PATH.findall(code):
            target = None
            if pre == "super":
                # `super::x` from a top-level file names a sibling; from a child, its parent's item.
                if depth == 0:
                    target = first
                elif first == "super" and depth == 1:
                    target = second
            elif crate_prefix and pre == "crate" and first == crate_prefix:
                target = second
            elif not crate_prefix and pre == "crate":
                target = first
            if target and target in siblings and target != m:
                refs.add(target)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                found.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return found


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;")


def test_only(files: list[Path]) -> set[Path]:
    """Files that are test modules: `tests.rs`, and any a parent declares `#[cfg(test)] mod x;`
    (tests may import freely, e.g. the in-memory adapters)."""
    out = {p for p in files if p.name == "tests.rs"}
    for p in files:
        here = p.parent if p.name in ("mod.rs", "lib.rs", "main.rs") else p.parent / p.stem
        for name in TEST_MOD.findall(p.read_text()):
            out.add(here / f"{name}.rs")
            out.add(here / name / "mod.rs")
    return out


def layer_refs(path: Path) -> set[str]:
    """The top-level modules of its crate a file refers to through `crate::`."""
    return {first for pre, first, _ in PATH.findall(strip(path.read_text())) if pre == "crate"}


def main(argv: list[str]) -> int:
    repo = Path(argv[1] if len(argv) > 1 else ".").resolve()
    problems: list[str] = []
    for root, prefix in [
        (repo / "core/src/app", "app"),
        (repo / "core/src/domain", "domain"),
        (repo / "cli/src", ""),
        (repo / "infra/market-sim/src", ""),
    ]:
        for c in cycles(edges(root, prefix)):
            problems.append(f"{root.relative_to(repo)}: module cycle {' -> '.join(c)}")
    cmd = repo / "cli/src/cmd"
    if cmd.is_dir():
        for m, refs in sorted(edges(cmd, "cmd").items()):
            for other in sorted(refs):
                problems.append(f"cli/src/cmd/{m}.rs: imports the command {other} (shared code goes to table.rs or context.rs)")
    for p in sorted((repo / "cli/src").rglob("*.rs")):
        if re.search(r"\bcapblock_shared::lambda\b", strip(p.read_text())):
            problems.append(f"{p.relative_to(repo)}: imports capblock_shared::lambda (the functions' edge, not the CLI's)")
    owners: dict[str, list[str]] = {}
    for p in sorted([*(repo / "core/src").rglob("*.rs"), *(repo / "shared/src").rglob("*.rs")]):
        if p.name == "tests.rs" or "tests" in p.parts:
            continue
        for name in PUB_TYPE.findall(strip(p.read_text())):
            owners.setdefault(name, []).append(str(p.relative_to(repo)))
    for name, where in sorted(owners.items()):
        if len(where) > 1:
            problems.append(f"public type {name} is declared {len(where)} times: {', '.join(where)} (one name per type)")
    allowed = {
        "domain": {"domain"},
        "app": {"app", "domain", "ports"},
        "ports": {"domain", "ports"},
        "memory": {"domain", "ports", "memory"},
    }
    core_files = sorted((repo / "core/src").rglob("*.rs"))
    tests_only = test_only(core_files)
    for layer, ok in allowed.items():
        base = repo / "core/src" / layer
        files = [base] if base.is_file() else sorted(base.rglob("*.rs"))
        for p in files:
            if p in tests_only:
                continue
            bad = layer_refs(p) - ok
            if bad:
                problems.append(f"{p.relative_to(repo)}: imports {', '.join(sorted(bad))} (allowed: {', '.join(sorted(ok))})")
    for p in sorted((repo / "infra/market-sim").rglob("*.rs")):
        if "capblock_shared" in p.read_text():
            problems.append(f"{p.relative_to(repo)}: the simulator uses capblock_shared")
    for line in problems:
        print(line)
    print(f"check_layers: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
