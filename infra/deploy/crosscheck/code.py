"""Where each function's code is (CodeUri -> functions/<binary>/, a workspace member that
declares that binary), and which CAPBLOCK_* variables it reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from .cfn import deep_get
from .rust import RustSource


def crate_binaries(crate: Path) -> tuple[str | None, set[str]]:
    data = tomllib.loads((crate / "Cargo.toml").read_text(encoding="utf-8"))
    pkg = deep_get(data, "package", "name")
    explicit = [b for b in data.get("bin", []) if isinstance(b, dict) and b.get("name")]
    bins = {b["name"] for b in explicit}
    # paths the explicit [[bin]] targets take (cargo's defaults when `path` is absent)
    taken = {Path(b.get("path") or ("src/main.rs" if b["name"] == pkg else f"src/bin/{b['name']}.rs")).as_posix()
             for b in explicit}
    if data.get("package", {}).get("autobins", True):
        if (crate / "src" / "main.rs").is_file() and pkg and "src/main.rs" not in taken:
            bins.add(pkg)
        bins |= {p.stem for p in (crate / "src" / "bin").glob("*.rs") if f"src/bin/{p.name}" not in taken}
    return pkg, {b for b in bins if b}


def workspace_members(repo: Path) -> set[Path]:
    p = repo / "Cargo.toml"
    if not p.is_file():
        return set()
    data = tomllib.loads(p.read_text(encoding="utf-8"))
    out = set()
    for m in deep_get(data, "workspace", "members", default=[]):
        out |= {d.resolve() for d in repo.glob(m)}
    return out



def config_readers(repo: Path) -> dict[str, set[str]]:
    """The CAPBLOCK_* variables each public reader in shared/src/config.rs reads, by name."""
    # Literals are blanked in a lexed RustSource's code; read them from the text, fn by fn.
    path = repo / "shared" / "src" / "config.rs"
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8").split("#[cfg(test)]")[0]
    out: dict[str, set[str]] = {}
    for m in re.finditer(r"pub fn (\w+)", text):
        start = m.end()
        nxt = re.search(r"\n(pub fn |/// )", text[start:])
        body = text[start : start + nxt.start()] if nxt else text[start:]
        out[m.group(1)] = set(re.findall(r'"(CAPBLOCK_[A-Z0-9_]+)"', body))
    return {k: v for k, v in out.items() if v}


def env_read(repo: Path, srcs: list[RustSource]) -> set[str]:
    """The CAPBLOCK_* variables a function reads: the literals in its crate, and those of each
    shared reader it calls (settings several functions share are read in shared/src/config.rs)."""
    names = {m for s in srcs for lit in s.strings for m in re.findall(r"^(CAPBLOCK_[A-Z0-9_]+)$", lit)}
    for reader, read in config_readers(repo).items():
        if any(re.search(rf"\bconfig::{reader}\(", s.code) for s in srcs):
            names |= read
    return names
