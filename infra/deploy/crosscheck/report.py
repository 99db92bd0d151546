"""The check report: one line per check, problems under it, `N passed, M failed` at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Report:
    passed: int = 0
    failed: int = 0
    lines: list[str] = field(default_factory=list)

    def check(self, scope: str, name: str, problems: list[str], notes: list[str] | None = None):
        if problems:
            self.failed += 1
            self.lines.append(f"  FAIL {name}")
            self.lines += [f"       - {p}" for p in problems]
        else:
            self.passed += 1
            self.lines.append(f"  ok   {name}")
        self.lines += [f"       note: {x}" for x in notes or []]



def rel(p: Path, repo: Path) -> str:
    return str(p.relative_to(repo)) if p.is_relative_to(repo) else str(p)
