"""How long the production Rust functions are: a report, and with --check a gate.

No production function may run over 80 lines without a reason in its doc. This lists each production function over the limit (its lines from `fn` to its closing brace), then
the five largest files and the five largest functions, so a split can be measured before and
after. A function whose doc comment says "Long because" is listed apart, as excused.

Production code is every `*.rs` under the workspace's crates except tests: files under a
`tests/` folder or a crate named `tests`, files named `tests.rs`, and the body of any
`#[cfg(test)]` item (its module or function). It reads Rust as text: it finds `fn` headers at a
line's start (after visibility and qualifiers) and matches braces, skipping strings, chars and
comments (with the IAM cross-check's reader), which is enough for rustfmt-shaped code.

Usage: python3 infra/lint/fn_lengths.py [REPO] [--limit N] [--check]
  --check: exit 1 when an unexcused function is over the limit (infra/lint/check.sh runs it).
"""

import pathlib
import re
import sys

# The crosscheck's Rust reader (infra/deploy/crosscheck/rust.py), shared rather than copied.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "deploy"))
from crosscheck.rust import lex_rust

LIMIT = 80
EXCUSE = "Long because"
SKIP_DIRS = {"target", ".git", "node_modules", "tests"}

FN_HEADER = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern\s+\"[^\"]*\")\s+)*fn\s+(\w+)"
)
CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]")


def production_files(repo):
    """Each production `.rs` file below `repo`, as a path relative to it."""
    for path in sorted(repo.rglob("*.rs")):
        rel = path.relative_to(repo)
        if any(part in SKIP_DIRS for part in rel.parts[:-1]):
            continue
        if rel.name == "tests.rs":
            continue
        yield rel


def block_end(lines, start):
    """The index of the line closing the first brace block opened at or after `start`."""
    depth, opened = 0, False
    for k in range(start, len(lines)):
        for ch in lines[k]:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
            elif ch == ";" and not opened and depth == 0:
                return None  # a declaration without a body (a trait's method)
        if opened and depth == 0:
            return k
    return None


def doc_above(raw_lines, index):
    """The doc comment and attributes directly above line `index`."""
    k, doc = index - 1, []
    while k >= 0 and re.match(r"^\s*(///|#\[|//!)", raw_lines[k]):
        doc.append(raw_lines[k])
        k -= 1
    return "\n".join(reversed(doc))


def functions(repo, rel):
    """(name, first line, length, excused) for each production function of one file."""
    raw = (repo / rel).read_text(encoding="utf-8")
    raw_lines = raw.split("\n")
    # Comments dropped and literals blanked, lines kept: the braces left are the code's.
    lines = lex_rust(raw).code.split("\n")
    skip_until = -1
    found = []
    for i, line in enumerate(lines):
        if i <= skip_until:
            continue
        if CFG_TEST.match(raw_lines[i]):
            # The test item that follows (a module or function) is not production code.
            end = block_end(lines, i + 1)
            skip_until = end if end is not None else i
            continue
        m = FN_HEADER.match(line)
        if not m:
            continue
        end = block_end(lines, i)
        if end is None:
            continue
        doc = doc_above(raw_lines, i)
        found.append((m.group(1), i + 1, end - i + 1, EXCUSE in doc))
        # Nested functions are counted inside their parent, not again.
        skip_until = end
    return found


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    limit = LIMIT
    if "--limit" in argv:
        limit = int(argv[argv.index("--limit") + 1])
        args = [a for a in args if a != str(limit)]
    repo = pathlib.Path(args[0] if args else ".").resolve()
    files, fns = [], []
    for rel in production_files(repo):
        text = (repo / rel).read_text(encoding="utf-8")
        files.append((text.count("\n"), str(rel)))
        for name, line, length, excused in functions(repo, rel):
            fns.append((length, f"{rel}:{line}", name, excused))
    over = sorted((f for f in fns if f[0] > limit), reverse=True)
    unexcused = [f for f in over if not f[3]]
    print(
        f"production functions over {limit} lines: {len(over)} ({len(unexcused)} without a reason)"
    )
    for length, where, name, excused in over:
        print(
            f"  {length:5}  {where}  {name}{'  (long because: see its doc)' if excused else ''}"
        )
    print("five largest files:")
    for length, where in sorted(files, reverse=True)[:5]:
        print(f"  {length:5}  {where}")
    print("five largest functions:")
    for length, where, name, _ in sorted(fns, reverse=True)[:5]:
        print(f"  {length:5}  {where}  {name}")
    if "--check" in argv and unexcused:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
