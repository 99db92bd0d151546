"""The team page in headless Chromium: no console message, no request leaving the file, each
section holding the demo story's facts, and a screenshot.

Why this verifies what it claims: the page carries a Content-Security-Policy (`default-src 'none'`)
that blocks every fetch (script, style sheet, font, image, frame, connection) and Chromium logs
each refusal on the console, which `--enable-logging=stderr` prints as a CONSOLE line. So one
check, no console line at all, catches both a script error and any request the page would have
made. The check is first run on a control page that does make a request (an <img> from a URL):
if that page passes, the detector is blind and the check fails rather than pass vacuously.

Usage: browser_check.py PAGE.html SCREENSHOT.png
"""

import html.parser
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

CONSOLE = re.compile(r"CONSOLE|Content Security Policy|Refused to", re.IGNORECASE)

# What each section must hold for the demo story (page/examples/demo_page.rs).
EXPECTED = {
    "calendar": [
        "cr-active0001",
        "cr-pending0002",
        "ml-research / p5-weekly",
        "payment deadline",
    ],
    "budgets": ["Account", "Team ml-research", "Rule p5-weekly", "Month-end forecast"],
    "prices": ["Rule p5-weekly", "us-east-1 p5.48xlarge", "bought cr-active0001"],
    "approvals": ["capblock approve p5-weekly/cb-0123456789abcdef0"],
    "use": ["cr-active0001", "The month per rule"],
    "market": ["p5.48xlarge us-west-2"],
}


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("browser_check: no chromium on PATH")


def run(browser, page, *extra):
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
            *extra,
            pathlib.Path(page).resolve().as_uri(),
        ]
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=120, check=False
        )


def console_lines(stderr):
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


class Sections(html.parser.HTMLParser):
    """The text of each <section id=...>, tooltips (<title>) included."""

    def __init__(self):
        super().__init__()
        self.current = None
        self.text = {}

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.current = dict(attrs).get("id")
            self.text[self.current] = []

    def handle_endtag(self, tag):
        if tag == "section":
            self.current = None

    def handle_data(self, data):
        if self.current:
            self.text[self.current].append(data)


def main():
    page, shot = sys.argv[1], sys.argv[2]
    browser = chromium()
    problems = []

    # The control: the same policy, one request. The detector must see it.
    control = pathlib.Path(shot).with_name("control.html")
    policy = re.search(
        r'<meta http-equiv="Content-Security-Policy"[^>]*>',
        pathlib.Path(page).read_text(),
    )
    if not policy:
        problems.append("the page has no Content-Security-Policy meta tag")
    else:
        control.write_text(
            f"<!doctype html><html><head>{policy.group(0)}</head>"
            '<body><img src="https://example.invalid/x.png" alt="x"></body></html>'
        )
        if not console_lines(run(browser, control, "--dump-dom").stderr):
            problems.append(
                "the control page's request was not reported: the console check is blind"
            )

    dom = run(browser, page, "--dump-dom")
    if dom.returncode != 0:
        problems.append(f"chromium exited {dom.returncode}: {dom.stderr[-2000:]}")
    for line in console_lines(dom.stderr):
        problems.append(f"console: {line}")
    parser = Sections()
    parser.feed(dom.stdout)
    for section, needles in EXPECTED.items():
        text = " ".join(parser.text.get(section, []))
        if section not in parser.text:
            problems.append(f"section {section} missing from the rendered DOM")
        for needle in needles:
            if needle not in text:
                problems.append(f"section {section}: {needle!r} missing")

    pathlib.Path(shot).unlink(missing_ok=True)
    run(
        browser,
        page,
        f"--screenshot={pathlib.Path(shot).resolve()}",
        "--window-size=1280,4200",
        "--hide-scrollbars",
    )
    if not pathlib.Path(shot).exists() or pathlib.Path(shot).stat().st_size == 0:
        problems.append("no screenshot written")

    if problems:
        print(
            "browser_check: the page fails in Chromium:",
            *problems,
            sep="\n  ",
            file=sys.stderr,
        )
        sys.exit(1)
    print(
        f"browser_check: {page} loads in Chromium with no console message and no request; "
        f"every section holds the story; screenshot {shot}"
    )


if __name__ == "__main__":
    main()
