"""Where each function's code is (CodeUri -> functions/<binary>/, a workspace member that
declares that binary), and the environment it reads against the one the template sets."""

from __future__ import annotations

import tomllib
from pathlib import Path

from .cfn import deep_get


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

