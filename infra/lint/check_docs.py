"""Every relative link in the repository's Markdown resolves inside the repository.

Part of `make test` (infra/lint/check.sh). A link is `[text](target)`; a target that is a URL
(`http:`, `https:`, `mailto:`) is left alone, since the machines here reach no web. Any other
target must name a file or folder inside the repository (never beside it, as `../shared/...`
would from the root), and a `#fragment` must name a heading of that page as GitHub spells its
anchors (lower case, punctuation dropped, spaces to hyphens).

Usage: python3 infra/lint/check_docs.py [REPO]   (exit 1 and one line per broken link)
"""

import pathlib
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
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


def tracked_pages(repo: pathlib.Path) -> list[pathlib.Path]:
    names = subprocess.run(["git", "-C", str(repo), "ls-files", "*.md"], capture_output=True, text=True, check=True)
    return [repo / n for n in names.stdout.split()]


def main() -> int:
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found = problems(repo, tracked_pages(repo))
    for p in found:
        print(p)
    print(f"== doc links: {len(found)} broken")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
