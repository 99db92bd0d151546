"""The repository's Markdown is true to the tree it describes.

Part of `make test` (infra/lint/check.sh). Three checks:

- Every relative link and image in the Markdown resolves inside the repository. A link is
  `[text](target)`, an image `![alt](target)`; a target that is a URL (`http:`, `https:`,
  `mailto:`) is left alone, since the machines here reach no web. Any other target must name a
  file or folder inside the repository (never beside it, as `../shared/...` would from the
  root), and a `#fragment` must name a heading of that page as GitHub spells its anchors (lower
  case, punctuation dropped, spaces to hyphens).
- Every path and name ARCHITECTURE.md cites exists (`architecture_problems`): a path (`a/b.rs`,
  `a/b/`, `<x>` standing for any one name) from the repository's root or from a crate's source
  folder; a backticked Rust name (`ActionRunner`, `RunTime::for_stack`, `ask_spread`, `MAX_REGION_CLAIM`)
  defined in the Rust sources (an item, an enum variant, a field), a backticked AWS name in a
  template or an SDK call's string; a Rust name cited with a file (`domain/bus_event.rs` (`BusStep`))
  or with a module of the layer picture's lists is named in that module's code; and the layer
  picture lists every module of its folders, and only modules (`file_list_problems`).
- ARCHITECTURE.md's table of the DynamoDB items ("The data model") names exactly the keys the
  DynamoDB adapter writes (`data_model_problems`): each pk, sk and gsi1 key of the table (a
  `<placeholder>` standing for a value) is a key the adapter's strings make, whole or as a prefix
  ending in `#` that a value closes; each key-shaped string the adapter gives `key`, `s`,
  `AttributeValue::S`, `format!` or a `const` (capitals, digits, `_`, `#`, `{..}` for a value) is
  a key of the table, or a prefix ending in `#` of one.

Usage: python3 infra/lint/check_docs.py [REPO]   (exit 1 and one line per problem)
"""

import pathlib
import re
import subprocess
import sys

# A link `[text](target)` or an image `![alt](target)`.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, drop what is not a word, space or hyphen."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
    found, in_code = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(anchor(line.lstrip("#")))
    return found


def links(page: pathlib.Path):
    in_code = False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield n, m.group(1)


def problems(repo: pathlib.Path, pages: list[pathlib.Path]) -> list[str]:
    out = []
    root = repo.resolve()
    for page in pages:
        for n, target in links(page):
            if target.startswith(EXTERNAL):
                continue
            path, _, frag = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            where = f"{page.relative_to(repo)}:{n}: {target}"
            if root != dest and root not in dest.parents:
                out.append(f"{where}: points outside the repository")
            elif not dest.exists():
                out.append(f"{where}: no such file")
            elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                out.append(f"{where}: no heading #{frag} in {dest.relative_to(root)}")
    return out


# Where a path ARCHITECTURE.md cites may start: the repository's root, or a crate's source folder
# (`app/scan.rs` is core/src/app/scan.rs, `aws/ec2/` shared/src/aws/ec2/, `sim/` verify/src/sim/).
PATH_ROOTS = [".", "core/src", "shared/src", "shared/src/aws", "cli/src", "verify", "verify/src", "infra"]
PATH = re.compile(
    r"(?<![\w<>/.@:-])((?:[a-z_.<][\w.<>-]*/)+(?:[\w.<>-]+)?|[\w-]+\.(?:rs|py|sh|toml|yaml|md|json))(?![\w/(])"
)
TICKED = re.compile(r"`([^`\n]+)`")
RUST_NAME = re.compile(r"^(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*(?:\(\))?$")
# A definition of a name in Rust: an item, an enum variant (a capitalised word opening a line,
# then `,`, `(`, `{` or nothing) or a field (`name:` opening a line).
RUST_DEF = re.compile(
    r"\b(?:struct|enum|trait|type|union|fn|const|static|mod|macro_rules!)\s+(\w+)"
    r"|^\s+(?:#\[[^\]]*\]\s*)?([A-Z]\w*)\s*(?:[,({]|$)"
    r"|^\s+(?:pub(?:\([\w:]+\))?\s+)?([a-z_]\w*)\s*:(?!:)",
    re.MULTILINE,
)
RUST_STRING = re.compile(r'"((?:\\.|[^"\\\n])*)"')


def rust_names(repo: pathlib.Path) -> tuple[set[str], set[str]]:
    """The names the Rust sources define (items, variants, fields, and every crate's name as code
    spells it), and every word of the strings they hold (AWS actions, errors, conditions)."""
    defined: set[str] = set()
    words: set[str] = set()
    for path in repo.rglob("*.rs"):
        if "target" in path.relative_to(repo).parts[:1]:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in RUST_DEF.finditer(text):
            defined.add(next(g for g in m.groups() if g))
        for string in RUST_STRING.findall(text):
            words.update(re.findall(r"[A-Za-z_]\w*", string))
    for manifest in repo.rglob("Cargo.toml"):
        for m in re.finditer(r'^name\s*=\s*"([\w-]+)"', manifest.read_text(encoding="utf-8"), re.MULTILINE):
            defined.add(m.group(1).replace("-", "_"))
    return defined, words


def template_names(repo: pathlib.Path) -> set[str]:
    """The words of the CloudFormation templates (resources, parameters, outputs)."""
    words: set[str] = set()
    for name in ("template.yaml", "member.yaml"):
        if (repo / name).is_file():
            words.update(re.findall(r"\w+", (repo / name).read_text(encoding="utf-8")))
    return words


def path_exists(repo: pathlib.Path, cited: str) -> bool:
    """A path from the root or a crate's source folder; a bare file name (`budget.rs`, beside the
    folder the sentence names) anywhere in the tree."""
    if "/" not in cited:
        return any(repo.rglob(cited))
    pattern = re.sub(r"<[^>]*>", "*", cited.rstrip("/"))
    for root in PATH_ROOTS:
        found = list((repo / root).glob(pattern)) if pattern else [repo / root]
        if any(f.is_dir() for f in found) if cited.endswith("/") else found:
            return True
    return False


def cited_paths(text: str):
    """(line, path) for each path the page cites, in prose, tables and code blocks alike, but
    not inside a link's target (the link check has those) or a URL."""
    for n, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"\]\([^)]*\)|https?://\S+", "]", line)
        for m in PATH.finditer(line):
            yield n, m.group(1)


def cited_names(text: str):
    """(line, name) for each backticked Rust or AWS name: a CamelCase word, a path with `::`, a
    snake_case word with `_`, a CONSTANT; not a path, a key pattern, a command or a literal."""
    for n, line in enumerate(text.splitlines(), 1):
        for m in TICKED.finditer(line):
            span = m.group(1)
            if not RUST_NAME.match(span):
                continue
            span = span.removesuffix("()")
            if "::" in span or re.match(r"^[A-Z][a-z]", span) or "_" in span.strip("_"):
                yield n, span


# The entries of ARCHITECTURE.md's layer picture ("The layers") whose files are listed, and the
# folder each lists. In the five listing entries the modules follow the description's colon,
# separated by `,` or `;`, each its name then what it holds (in parentheses or after a colon);
# `ec2/ (..)` and `dynamo/ (..)` inside the adapters' entry list theirs the same way. Every
# module of such a folder is listed, and everything listed is a module of it. The other entries
# name each file of their folder somewhere in their text.
LISTS = {
    "core/src/app/": "core/src/app",
    "core/src/ports/": "core/src/ports",
    "core/src/memory/": "core/src/memory",
    "core/src/domain/": "core/src/domain",
    "shared/src/aws/": "shared/src/aws",
}
NESTED = {"shared/src/aws/": {"ec2/": "shared/src/aws/ec2", "dynamo/": "shared/src/aws/dynamo"}}
NAMED = {"cli/": ("cli/src", set()), "verify/": ("verify/src", set()), "shared/src/lambda.rs,": ("shared/src", {"aws"})}
# Modules no entry need name: crate roots, a folder's mod.rs and test modules.
UNLISTED = {"mod", "lib", "main", "tests"}
TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;")


def layer_lines(text: str) -> set[int]:
    """The line numbers of the layer picture (the code block of "The layers")."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## The layers")), None)
    if start is None:
        return set()
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return set(range(opening + 2, closing + 1))


def layer_entries(text: str) -> dict[str, str]:
    """The layer picture's entries: the token opening a line at column 0 -> the entry's text."""
    parts = text.split("## The layers", 1)[-1].split("```", 2)
    if "## The layers" not in text or len(parts) < 3:
        return {}
    section = parts[1]
    entries: dict[str, str] = {}
    key = None
    for line in section.splitlines():
        if line[:1].strip():
            key, _, rest = line.partition(" ")
            entries[key] = rest
        elif key and line.strip() and line.strip() != "|" and line.strip() != "v":
            entries[key] += " " + line.strip()
    return entries


def split_top(text: str, seps: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch in seps:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur]


def listed_items(description: str, lead: bool = True) -> list[tuple[str, str]]:
    """The modules an entry lists, each with its item's text: after the description's first
    colon (in a nested list, only a colon before its first comma), each `,`/`;` item outside
    parentheses, named by its first word."""
    head = split_top(description, ":")
    if len(head) > 1 and (lead or "," not in head[0]):
        description = description[len(head[0]) + 1 :]
    items = []
    for item in split_top(description, ",;"):
        m = re.match(r"\s*(?:and\s+)?`?([\w]+)(/?)`?", item)
        if m:
            items.append((m.group(1) + m.group(2), item))
    return items


def listed(description: str, lead: bool = True) -> list[str]:
    """The module names an entry lists (`listed_items`)."""
    return [name.rstrip("/") for name, _ in listed_items(description, lead)]


def nested(description: str, name: str) -> str:
    """The text in the parentheses after `name` (e.g. `ec2/ (..)`)."""
    start = description.find(name + " (")
    if start < 0:
        return ""
    depth, i = 0, start + len(name) + 1
    for j in range(i, len(description)):
        depth += {"(": 1, ")": -1}.get(description[j], 0)
        if depth == 0:
            return description[i + 1 : j]
    return ""


def modules(folder: pathlib.Path) -> set[str]:
    """A folder's modules: its `.rs` files and subfolders, less mod.rs, tests and test modules."""
    found = {p.stem for p in folder.glob("*.rs")} | {p.name for p in folder.iterdir() if p.is_dir()}
    for p in [folder / "mod.rs", folder.with_suffix(".rs"), folder / "lib.rs"]:
        if p.is_file():
            found -= set(TEST_MOD.findall(p.read_text(encoding="utf-8")))
    return found - UNLISTED


def file_list_problems(
    repo: pathlib.Path, text: str, page: str = "ARCHITECTURE.md", lists=None, nested_lists=None, named=None
) -> list[str]:
    lists = LISTS if lists is None else lists
    nested_lists = NESTED if nested_lists is None else nested_lists
    named = NAMED if named is None else named
    entries = layer_entries(text)
    out = []
    checks = []
    for key, folder in lists.items():
        checks.append((key, folder, entries.get(key), True))
        for name, sub in nested_lists.get(key, {}).items():
            checks.append((f"{key} {name}", sub, nested(entries.get(key, ""), name) or None, False))
    for key, folder, description, lead in checks:
        if description is None:
            out.append(f"{page}: the layer picture has no entry {key}")
            continue
        names, have = listed(description, lead), modules(repo / folder)
        for name in names:
            if name not in have and name not in UNLISTED:
                out.append(f"{page}: {key} lists {name}, which is no module of {folder}")
        for name in sorted(have - set(names)):
            out.append(f"{page}: {key} does not list {folder}/{name}")
    for key, (folder, elsewhere) in named.items():
        description = entries.get(key)
        if description is None:
            out.append(f"{page}: the layer picture has no entry {key}")
            continue
        words = set(re.findall(r"\w+", description))
        for name in sorted(modules(repo / folder) - words - elsewhere):
            out.append(f"{page}: {key} does not name {folder}/{name}")
    return out


def words_of_code(paths: list[pathlib.Path]) -> set[str]:
    """The words of the files' code, comments left out."""
    words: set[str] = set()
    for path in paths:
        code = re.sub(r"//[^\n]*", "", path.read_text(encoding="utf-8", errors="replace"))
        words.update(re.findall(r"\w+", code))
    return words


def module_files(repo: pathlib.Path, cited: str) -> list[pathlib.Path]:
    """The files of the module a cited `.rs` path names (from the root or a crate's src/): the
    file and the files of its folder (`bus.rs` and `bus/**`)."""
    for root in PATH_ROOTS:
        file = repo / root / cited
        if file.is_file():
            folder = file.with_suffix("")
            return [file, *(sorted(folder.rglob("*.rs")) if folder.is_dir() else [])]
    return []


FILE_THEN_NAMES = re.compile(r"`?((?:[\w.-]+/)*[\w-]+\.rs)`?\s+\(")


def closing(text: str, opening: int) -> int:
    depth = 0
    for i in range(opening, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return len(text)


def names_in_their_files(repo: pathlib.Path, text: str, defined: set[str], page: str, lists=None, nested_lists=None) -> list[str]:
    """A Rust name cited in the parentheses after a file (`domain/bus_event.rs` (`DetailType`, ..)), or
    in a listed module's item of the layer picture (`paced_asker (.. `ask_spread`)`), is named in that
    module's code (its file or its folder, comments left out): defined or used there. `A::B`
    counts by `A`. Names the Rust sources define
    nowhere (an SDK's condition, a template's parameter) are the other check's."""
    lists = LISTS if lists is None else lists
    nested_lists = NESTED if nested_lists is None else nested_lists
    out = []
    groups: list[tuple[str, list[pathlib.Path], str]] = []
    for line in text.splitlines():
        for m in FILE_THEN_NAMES.finditer(line):
            files = module_files(repo, m.group(1))
            if files:
                end = closing(line, m.end() - 1)
                groups.append((m.group(1), files, line[m.end() : end]))
    entries = layer_entries(text)
    for key, folder in lists.items():
        description = entries.get(key, "")
        subs = nested_lists.get(key, {})
        sources = [(folder, description, True)] + [(sub, nested(description, name), False) for name, sub in subs.items()]
        for base, desc, lead in sources:
            for name, item in listed_items(desc, lead):
                if name.endswith("/"):
                    continue
                files = module_files(repo, f"{base}/{name}.rs")
                if files:
                    groups.append((f"{base}/{name}.rs", files, item))
    for cited, files, inner in groups:
        here = words_of_code(files)
        for _, name in cited_names(inner):
            first = name.split("::")[0]
            if first in defined and first not in here:
                out.append(f"{page}: `{name}` is cited with {cited}, whose code never names {first}")
    return out


def architecture_problems(repo: pathlib.Path, page: str = "ARCHITECTURE.md", **lists) -> list[str]:
    """The paths, names and file lists of the page (`lists`: file_list_problems' own, for tests)."""
    path = repo / page
    text = path.read_text(encoding="utf-8")
    out = []
    for n, cited in cited_paths(text):
        if not path_exists(repo, cited):
            out.append(f"{page}:{n}: {cited}: no such file or folder (from the root or a crate's src/)")
    out.extend(file_list_problems(repo, text, page, **lists))
    (defined, strings), templates = rust_names(repo), template_names(repo)
    out.extend(
        names_in_their_files(repo, text, defined, page, lists.get("lists"), lists.get("nested_lists"))
    )
    picture = layer_lines(text)
    for n, name in cited_names(text):
        # The layer picture names code; prose may also name a template's resource or parameter,
        # or what an SDK call sends (an action, a condition).
        known = defined if n in picture else defined | templates | strings
        missing = [seg for seg in name.split("::") if seg not in known and seg not in ("crate", "self", "super")]
        if missing:
            where = "the Rust sources" if n in picture else "the Rust sources, templates or SDK calls' strings"
            out.append(f"{page}:{n}: `{name}`: {', '.join(missing)} is defined nowhere in {where}")
    return out


# The code that writes the table's items: the DynamoDB adapter, and the role probe's item.
DYNAMO_CODE = ["shared/src/aws/dynamo/*.rs", "shared/src/aws/probe.rs"]
KEY_COLUMNS = ("pk", "sk", "gsi1pk / gsi1sk")
# A key as the adapter spells it: capitals, `_` and `#`, `*` where a value goes.
KEY_SHAPE = re.compile(r"^[A-Z][A-Z0-9_]*(?:#(?:[A-Z0-9_]+|\*)?)*$")
CODE_TOKEN = re.compile(r'//[^\n]*|"((?:\\.|[^"\\])*)"', re.DOTALL)


def table_keys(text: str) -> dict[str, int]:
    """The key shapes of ARCHITECTURE.md's data model table (`RULE#<id>` is `RULE#*`), each with
    the line it is on; keys starting with a value (`<seen-at>#<offering>`) name no prefix."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## The data model")), None)
    if start is None:
        return {}
    out: dict[str, int] = {}
    columns: list[str] = []
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not columns:
            columns = cells
            continue
        for name, cell in zip(columns, cells):
            if name in KEY_COLUMNS:
                for span in TICKED.findall(cell):
                    shape = re.sub(r"<[^>]*>", "*", span)
                    if KEY_SHAPE.match(shape):
                        out.setdefault(shape, i + 1)
    return out


# Where a string is a key or a key's value: an argument of `key(..)`, `s(..)` (an attribute
# value), `AttributeValue::S(..)` or `format!(..)`, or a constant's value.
KEY_CALLS = {"key", "s", "S", "format"}


def in_key_context(code: str, at: int) -> bool:
    """Whether the string literal starting at `at` is an argument of one of KEY_CALLS, or the
    value of a `const`."""
    depth = 0
    for i in range(at - 1, -1, -1):
        ch = code[i]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            if depth == 0:
                name = re.search(r"(\w+)!?\s*$", code[:i])
                return bool(ch == "(" and name and name.group(1) in KEY_CALLS)
            depth -= 1
        elif ch in ";{}" and depth == 0:
            return is_const(code[i + 1 : at])
    return is_const(code[:at])


def is_const(statement: str) -> bool:
    return bool(re.search(r"\bconst\s+\w+\s*:\s*&(?:'static\s+)?str\s*=\s*$", statement))


def code_keys(repo: pathlib.Path) -> dict[str, str]:
    """The key shapes the adapter's string literals write or look up (`format!("RULE#{id}")` is
    `RULE#*`, a prefix it queries `"EXT#"`), each with the file it is in; tests left out. A
    literal counts where it makes a key or an attribute value (`in_key_context`): a currency
    code passed to `unwrap_or` is no key."""
    out: dict[str, str] = {}
    for pattern in DYNAMO_CODE:
        for path in sorted(repo.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            text = text.split("#[cfg(test)]", 1)[0]
            for m in CODE_TOKEN.finditer(text):
                if m.group(1) is None:
                    continue
                shape = re.sub(r"\{[^}]*\}", "*", m.group(1))
                if KEY_SHAPE.match(shape) and in_key_context(text, m.start()):
                    out.setdefault(shape, str(path.relative_to(repo)))
    return out


def data_model_problems(repo: pathlib.Path, page: str = "ARCHITECTURE.md") -> list[str]:
    """The data model table names exactly the keys the adapter writes. A key in the table is
    written as it is, or by a prefix the code closes with `#` and a value (`FUNCTION#` and a
    kind); a key in the code is in the table as it is, or (one ending in `#`, a prefix it
    queries) opens one there."""
    table = table_keys((repo / page).read_text(encoding="utf-8"))
    code = code_keys(repo)
    if not table:
        return [f"{page}: no data model table (## The data model) with key columns {', '.join(KEY_COLUMNS)}"]
    out = []
    for shape, line in sorted(table.items(), key=lambda kv: kv[1]):
        if shape not in code and not any(c.endswith("#") and shape.startswith(c) for c in code):
            out.append(f"{page}:{line}: the data model's key {shape} is written nowhere in {', '.join(DYNAMO_CODE)}")
    for shape, where in sorted(code.items()):
        if shape not in table and not (shape.endswith("#") and any(t.startswith(shape) for t in table)):
            out.append(f"{where}: writes the key {shape}, which {page}'s data model table lacks")
    return out


def tracked_pages(repo: pathlib.Path) -> list[pathlib.Path]:
    names = subprocess.run(["git", "-C", str(repo), "ls-files", "*.md"], capture_output=True, text=True, check=True)
    return [repo / n for n in names.stdout.split()]


BEHAVIOURS = "infra/market-sim/behaviours.md"
# A picture's cell: "`path`: `name`" (the name must be in the file), or "not played: why".
CITED = re.compile(r"`([^`]+)`: `([^`]+)`")


def behaviour_problems(repo: pathlib.Path, page: str = BEHAVIOURS) -> list[str]:
    """The EC2 behaviours table: each picture's cell cites a file and a name in it, or says
    "not played:" with a reason; a cited file that is gone or no longer holds the name is a
    problem (a picture lost a behaviour the table says it plays)."""
    path = repo / page
    if not path.exists():
        return [f"{page}: missing"]
    found = []
    rows = [line for line in path.read_text().splitlines() if line.startswith("| ") and not line.startswith("| behaviour")]
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5:
            found.append(f"{page}: a row without 5 cells: {line[:60]}")
            continue
        for picture, cell in zip(("simulator", "in-memory EC2", "model"), cells[2:]):
            if cell.startswith("not played:"):
                if len(cell) < len("not played:") + 10:
                    found.append(f"{page}: {cells[0][:40]}: {picture} not played, with no reason")
                continue
            cited = CITED.findall(cell)
            if not cited:
                found.append(f"{page}: {cells[0][:40]}: {picture} cites no `file`: `name`")
            for file, name in cited:
                target = repo / file
                if not target.is_file():
                    found.append(f"{page}: {cells[0][:40]}: {picture}: no file {file}")
                elif name not in target.read_text():
                    found.append(f"{page}: {cells[0][:40]}: {picture}: {file} no longer names {name}")
    if not rows:
        found.append(f"{page}: no behaviour rows")
    return found


def main() -> int:
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    # Each check's problems, one a line, then its summary line; any problem fails the run.
    checks = [
        (lambda: problems(repo, tracked_pages(repo)), "doc links: {} broken"),
        (lambda: architecture_problems(repo), "ARCHITECTURE.md's paths and names: {} missing"),
        (lambda: data_model_problems(repo), "the data model table against the DynamoDB adapter: {} problem(s)"),
        (lambda: behaviour_problems(repo), f"EC2's behaviours in each picture ({BEHAVIOURS}): {{}} problem(s)"),
    ]
    failed = False
    for check, summary in checks:
        found = check()
        for p in found:
            print(p)
        print("== " + summary.format(len(found)))
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
