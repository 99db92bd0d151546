"""Just enough Rust reading for the checks: comments dropped and string literals set apart
(`lex_rust`), test code removed (`strip_tests`), the declared tables: an adapter's
`ACTIONS` and a function's `AWS_PORTS` (`declared_actions`, `declared_ports`), and an adapter's
free functions that build a port's value (`port_builders`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RustSource:
    code: str  # comments removed, string/char literal contents blanked
    strings: list[str]  # string literal contents (in order)


def lex_rust(text: str) -> RustSource:
    """Splits Rust source into code (no comments, literals emptied) and string literals.

    Handles line and nested block comments, "..." with escapes, raw strings r#"..."#,
    byte strings, char literals and lifetimes well enough for grepping.
    """
    out: list[str] = []
    strings: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
            out.append(" ")
            continue
        m = re.match(r'(b|c)?r(#*)"', text[i:i + 300]) if c in "brc" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = m.group(2)
            start = i + m.end()
            end = text.find('"' + hashes, start)
            end = n if end < 0 else end
            strings.append(text[start:end])
            out.append('""' + "\n" * text.count("\n", start, end))
            i = end + 1 + len(hashes)
            continue
        if c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (1 if c == '"' else 2)
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            s = "".join(buf)
            strings.append(s)
            out.append('""' + "\n" * s.count("\n"))
            i = j + 1
            continue
        if c == "'":
            # char literal ('a', '\n', '\u{..}') or a lifetime ('a)
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", text[i:i + 16])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return RustSource("".join(out), strings)


def read_rust(path: Path) -> RustSource:
    return lex_rust(path.read_text(encoding="utf-8"))


def strip_items(code: str, pattern: str) -> str:
    """Removes every item whose header matches `pattern` up to its matching closing brace
    (or its terminating semicolon when it has no body)."""
    rx = re.compile(pattern)
    while True:
        m = rx.search(code)
        if not m:
            return code
        j = m.end()
        while j < len(code) and code[j] not in "{;":
            j += 1
        if j >= len(code) or code[j] == ";":
            code = code[:m.start()] + code[j + 1:]
            continue
        depth = 0
        k = j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        code = code[:m.start()] + code[k + 1:]


def strip_tests(code: str) -> str:
    return strip_items(code, r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?(mod|fn|impl|use)\b")



def rust_files(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs if d.is_dir() for p in d.rglob("*.rs"))


def deployed_code(paths: list[Path]) -> str:
    """The code of `paths` as deployed: comments and test items removed, literals emptied."""
    return "\n".join(strip_tests(read_rust(p).code) for p in paths)


def _const_body(text: str, name: str) -> str | None:
    """The text between `const NAME: ... = &[` and its `];`, line comments removed."""
    m = re.search(r"\bconst\s+" + name + r"\s*:[^=]*=\s*&\[(.*?)\]\s*;", text, re.DOTALL)
    return re.sub(r"//[^\n]*", "", m.group(1)) if m else None


def declared_actions(text: str) -> dict[str, list[str]] | None:
    """An adapter's `pub const ACTIONS: &[(&str, &[&str])] = &[("Port", &["svc:Action", ..]), ..];`
    as port -> actions; None when the source declares no table."""
    body = _const_body(text, "ACTIONS")
    if body is None:
        return None
    out: dict[str, list[str]] = {}
    for port, actions in re.findall(r'\(\s*"(\w+)"\s*,\s*&\[([^\]]*)\]\s*,?\s*\)', body):
        out.setdefault(port, []).extend(re.findall(r'"([^"]+)"', actions))
    return out


def declared_ports(text: str) -> list[str] | None:
    """A function's `pub const AWS_PORTS: &[&str] = &["Port", ..];`; None when not declared."""
    body = _const_body(text, "AWS_PORTS")
    return None if body is None else re.findall(r'"(\w+)"', body)


def _ports_imported(code: str) -> set[str]:
    """The types an adapter imports from `crate::ports` (`use crate::ports::{A, B};`, `use
    crate::ports::A;`), less the errors (`StoreError`, `ActionResult`): a helper that fails with a
    port's error builds nothing."""
    names: set[str] = set()
    for m in re.finditer(r"\buse\s+crate::ports::(\{[^;]*\}|\w+)\s*;", code):
        names |= set(re.findall(r"\b([A-Z]\w*)\b", m.group(1)))
    return {n for n in names if not n.endswith(("Error", "Result"))}


def port_builders(code: str) -> set[str]:
    """The free `pub fn`s of an adapter's code (comments removed) whose return type names a type
    the code imports from `crate::ports` (`-> Vec<MemberMarket>`): a function that calls one
    (`accounts::member_markets(..)`) builds the adapter as surely as one that names its struct.
    Methods are left out (they are reached through a value of the adapter's type, which names
    the type)."""
    ports = _ports_imported(code)
    out: set[str] = set()
    depth = 0
    i = 0
    rx = re.compile(r"\bpub\s+(?:async\s+)?fn\s+(\w+)\s*(?:<[^(){};]*>)?\s*\(")
    while i < len(code):
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 and c == "p":
            m = rx.match(code, i)
            if m:
                # The parameters' closing parenthesis, then the return type up to the body.
                j, level = m.end(), 1
                while j < len(code) and level:
                    level += {"(": 1, ")": -1}.get(code[j], 0)
                    j += 1
                head = re.match(r"[^{;]*", code[j:]).group(0)
                ret = head.split("->", 1)[1] if "->" in head else ""
                ret = re.split(r"\bwhere\b", ret)[0]
                if set(re.findall(r"\b([A-Z]\w*)\b", ret)) & ports:
                    out.add(m.group(1))
                i = j
                continue
        i += 1
    return out
