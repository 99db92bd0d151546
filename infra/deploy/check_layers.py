#!/usr/bin/env python3
"""Checks the import rules of ARCHITECTURE.md on the Rust sources, by their `use` lines.

- No module cycle in any crate of the workspace (core/src, shared/src, cli/src, the functions,
  verify/src, tests/src, the simulator and the other tools under infra/), in any folder: a
  module is a file or a subfolder, and the modules of one folder may not refer to each other in
  a cycle (`ram/associations.rs` -> `ram/shares.rs` -> `ram/associations.rs` is one; in the
  root, `market.rs` -> `ram/shares.rs` is an edge market -> ram). A child using its parent's
  items, or the parent calling its children, is no edge: the parent holds what they share.
- core/src/domain imports nothing else of capblock's but the known bugs' switches (sabotage;
  no app, ports, aws, config, lambda).
- core/src/app imports domain, ports, app and sabotage only (never aws, config or lambda).
- core/src/ports/ imports domain only.
- Each CLI command (cli/src/cmd/*.rs) is a module of its own and imports no other command:
  what two commands share lives in cli/src/table.rs or cli/src/context.rs.
- The CLI never imports the Lambda glue (capblock_shared::lambda).
- The core crate (core/src) has no AWS SDK to import: Cargo enforces that, `make test`
  checks it with `cargo tree`.
- Every public type name in core/src and shared/src is used once (two `Step`s read the same in a `use`
  line and mean different things).
- infra/market-sim shares no code with capblock (no capblock_shared anywhere in it).
- In Cargo: core depends on no capblock crate; shared on core; cli and each function on shared
  (so no function crate on another); verify on core only; the simulator on http1 only.

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


def module_path(path: Path, src: Path) -> tuple[str, ...]:
    """The module a file is, from its crate's src/: `ram/shares.rs` is (ram, shares), `ram/mod.rs`
    (ram), `lib.rs` and `main.rs` the crate root ()."""
    parts = path.relative_to(src).with_suffix("").parts
    if parts[-1] == "mod" or parts in (("lib",), ("main",)):
        parts = parts[:-1]
    return tuple(parts)


def is_module(src: Path, parts: tuple[str, ...]) -> bool:
    if not parts:
        return True
    base = src.joinpath(*parts)
    return base.with_suffix(".rs").is_file() or base.is_dir()


def use_paths(code: str) -> list[str]:
    """Every path a `use` item names, its `{..}` groups expanded: `use super::{a::b, c};` gives
    `super::a::b` and `super::c`."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        tree = re.sub(r"\s+as\s+\w+", "", m.group(1))
        out.extend(expand(re.sub(r"\s+", "", tree)))
    return out


def expand(tree: str) -> list[str]:
    i = tree.find("{")
    if i < 0:
        return [tree.removesuffix("::self")]
    prefix, inner = tree[:i], tree[i + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(inner):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(inner[start:j])
            start = j + 1
    parts.append(inner[start:])
    return [path for part in parts if part for path in expand(prefix + part)]


INLINE = re.compile(r"\b(?:crate|super|self)(?:::\w+)+")


def targets(code: str, here: tuple[str, ...], src: Path) -> set[tuple[str, ...]]:
    """The modules of its crate a file at module `here` refers to (`crate::`, `super::`, `self::`,
    in `use` items and written inline), each as far as its segments name modules."""
    out = set()
    for path in {*use_paths(code), *INLINE.findall(code)}:
        segs = path.split("::")
        if segs[0] == "crate":
            base, segs = (), segs[1:]
        elif segs[0] in ("super", "self"):
            base = here
            while segs and segs[0] in ("super", "self"):
                base = base[:-1] if segs[0] == "super" else base
                segs = segs[1:]
        else:
            continue
        while segs and is_module(src, (*base, segs[0])):
            base, segs = (*base, segs[0]), segs[1:]
        out.add(base)
    return out


def crate_edges(src: Path) -> dict[tuple[str, ...], dict[str, set[str]]]:
    """For each folder of a crate (its module path), the graph among the modules in it: files and
    subfolders. A file refers to a module of the folder it shares with that module's file, so
    `ram/associations.rs` -> `ram/shares.rs` is an edge in folder `ram`, and `market.rs` ->
    `ram/shares.rs` one in the root (market -> ram). A module referring to its own parent's or
    child's items is no edge: a parent holds what its children share and dispatches to them.
    Test modules are left out (tests may import freely)."""
    files = sorted(src.rglob("*.rs"))
    tests_only = test_only(files)
    out: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for p in files:
        rel = p.relative_to(src).parts
        if p in tests_only or "tests" in rel[:-1] or rel[0] == "bin":
            continue
        here = module_path(p, src)
        if here:
            out.setdefault(here[:-1], {}).setdefault(here[-1], set())
        for there in targets(strip(p.read_text()), here, src):
            n = 0
            while n < min(len(here), len(there)) and here[n] == there[n]:
                n += 1
            if n < len(here) and n < len(there):
                out.setdefault(here[:n], {}).setdefault(here[n], set()).add(there[n])
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


# The crates whose modules may form no cycle, in any folder: every crate of the workspace.
CRATES = [
    "core/src",
    "shared/src",
    "cli/src",
    "functions/*/src",
    "verify/src",
    "tests/src",
    "infra/market-sim/src",
    "infra/local-lambda/src",
    "infra/http1/src",
    "infra/bench/src",
]

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


# Which of capblock's crates each crate may depend on (normal, dev and build dependencies):
# ARCHITECTURE.md's "What may import what" at the level of Cargo.
CRATE_DEPS = {
    "core": set(),
    "shared": {"capblock-core"},
    "cli": {"capblock-shared", "capblock-page"},
    "page": {"capblock-core"},
    # The tracker publishes the team page: the renderer is pure (core's types in, a string out).
    "functions/*": {"capblock-shared", "capblock-page"},
    "verify": {"capblock-core"},
    "infra/market-sim": {"capblock-http1"},
}
DEP_SECTION = re.compile(r"^\[(?:target\.[^\]]+\.)?(?:dev-|build-)?dependencies\]$")


def capblock_deps(manifest: Path) -> set[str]:
    """The capblock-* crates a Cargo.toml depends on, in any dependency section."""
    deps, inside = set(), False
    for line in manifest.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            inside = bool(DEP_SECTION.match(line))
        elif inside and (m := re.match(r"(capblock-[\w-]+)\s*[=.]", line)):
            deps.add(m.group(1))
    return deps


def dependency_problems(repo: Path) -> list[str]:
    out = []
    for pattern, allowed in CRATE_DEPS.items():
        for crate in sorted(repo.glob(pattern)):
            manifest = crate / "Cargo.toml"
            if not manifest.is_file():
                continue
            for dep in sorted(capblock_deps(manifest) - allowed):
                rel = manifest.relative_to(repo)
                out.append(f"{rel}: depends on {dep} (allowed: {', '.join(sorted(allowed)) or 'no capblock crate'})")
    return out


def main(argv: list[str]) -> int:
    repo = Path(argv[1] if len(argv) > 1 else ".").resolve()
    problems: list[str] = []
    for src in sorted(d for pattern in CRATES for d in repo.glob(pattern) if d.is_dir()):
        crate = str(src.relative_to(repo))
        graphs = crate_edges(src)
        for folder, graph in sorted(graphs.items()):
            where = "/".join([crate, *folder])
            for c in cycles(graph):
                problems.append(f"{where}: module cycle {' -> '.join(c)}")
        if crate == "cli/src":
            for m, refs in sorted(graphs.get(("cmd",), {}).items()):
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
        "domain": {"domain", "sabotage"},
        # sabotage: the known bugs' switches (off in every shipped build), read where each bug
        # would be; it imports nothing of capblock's.
        "app": {"app", "domain", "ports", "sabotage"},
        "ports": {"domain", "ports"},
        "memory": {"domain", "ports", "memory"},
    }
    core_files = sorted((repo / "core/src").rglob("*.rs"))
    tests_only = test_only(core_files)
    for layer, ok in allowed.items():
        base = repo / "core/src" / layer
        files = [base] if base.is_file() else sorted(base.rglob("*.rs"))
        for p in files:
            # A test module's file, or one under a `tests/` folder (app/scan/tests/), is a test.
            if p in tests_only or "tests" in p.relative_to(repo).parts[:-1]:
                continue
            bad = layer_refs(p) - ok
            if bad:
                problems.append(f"{p.relative_to(repo)}: imports {', '.join(sorted(bad))} (allowed: {', '.join(sorted(ok))})")
    problems.extend(dependency_problems(repo))
    for p in sorted((repo / "infra/market-sim").rglob("*.rs")):
        if "capblock_shared" in p.read_text():
            problems.append(f"{p.relative_to(repo)}: the simulator uses capblock_shared")
    for line in problems:
        print(line)
    print(f"check_layers: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
