"""Turns the table `make bench` prints into the Markdown table docs/benchmarks.md keeps.

A row whose value, target and ratio are all "-" is a section heading (bold, nothing else).
A count that must be 0 (target "= 0") shows the count itself as its ratio.

Usage: python3 infra/bench/table_md.py ~/.cache/capblock/bench-logs/run-HHMM.log
"""

import sys


def main(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("figure ") and "target" in l)
    head = lines[start]
    target_at, value_at = head.index("target"), head.index("value")
    ratio_end = head.index("ratio") + len("ratio")
    print("| figure | value | target | ratio |")
    print("|---|---|---|---|")
    for line in lines[start + 1:]:
        if line.startswith("ratio = "):
            break
        figure = line[:target_at].rstrip()
        target = line[target_at:ratio_end - 7].strip()
        ratio = line[ratio_end - 7:ratio_end].strip()
        verdict = line[ratio_end:value_at].strip()
        value = line[value_at:].strip()
        if value == "-" and target == "-" and ratio == "-":
            # A section heading, e.g. "secondary figures (issue 8)".
            print(f"| **{figure.strip()}** | | | |")
            continue
        if figure.startswith("  "):
            figure = "&nbsp;&nbsp;" + figure.strip()
        shown = f"{ratio} {verdict}".strip() if ratio != "-" else "-"
        if verdict == "MISS":
            shown = f"**{shown}**"
        print(f"| {figure} | {value} | {target} | {shown} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
