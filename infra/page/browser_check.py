"""The team page in headless Chromium: no console message, no request leaving the file, each
section holding the demo story's facts, its geometry at a laptop's and a phone's width, and a
screenshot at each.

The geometry is read from the rendered page, not the HTML: a copy of the page with a measuring
script (the page itself forbids scripts) in a frame of the width checked reports where each
section starts, each chart text's rendered size, each table's right edge and the box it scrolls
in, and where each calendar bar lies beside the lane names (each bar's block named by its
tooltip, its lane by the calendar's table). Each check was seen to fail with its bug put back:
lanes drawn upside down, charts shrunk below 10 px on a phone, scroll boxes without a shadow,
the approvals below the prices.

Why this verifies what it claims: the page carries a Content-Security-Policy (`default-src 'none'`)
that blocks every fetch (script, style sheet, font, image, frame, connection) and Chromium logs
each refusal on the console, which `--enable-logging=stderr` prints as a CONSOLE line. So one
check, no console line at all, catches both a script error and any request the page would have
made. The check is first run on a control page that does make a request (an <img> from a URL):
if that page passes, the detector is blind and the check fails rather than pass vacuously.

Usage: browser_check.py PAGE.html SCREENSHOT.png
"""

import html
import html.parser
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

CONSOLE = re.compile(r"CONSOLE|Content Security Policy|Refused to", re.IGNORECASE)

# The widths the page is checked at: a laptop's window and a phone's (390 CSS pixels).
WIDTHS = (1400, 390)

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
    "requests": [
        "rq-waiting1",
        "@ada (AROAEXAMPLE:ada)",
        "capblock requests approve rq-waiting1",
        "Bought cr-request0003",
    ],
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

# The page's geometry, measured in the browser by a script added to a copy of the page (the page
# itself forbids scripts): its JSON is written into the DOM, which --dump-dom prints.
MEASURE = r"""
<script>
(function () {
  const vw = window.innerWidth;
  const out = {width: vw, page: document.documentElement.scrollWidth,
               height: Math.ceil(document.querySelector("footer").getBoundingClientRect().bottom) + 16,
               texts: [], tables: [], overflow: [], bars: [],
               order: [...document.querySelectorAll("main > section")].map(s => s.id),
               tops: {}};
  for (const s of document.querySelectorAll("main > section")) out.tops[s.id] = s.getBoundingClientRect().top;
  // Every chart text's rendered size: its font size in the chart's units times the chart's scale.
  for (const t of document.querySelectorAll("svg text")) {
    if (!t.textContent.trim()) continue;
    const m = t.getScreenCTM();
    const size = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    const chart = t.closest("svg").getBoundingClientRect().width;
    out.texts.push([Math.round(size * 100) / 100, t.textContent.trim().slice(0, 40), Math.round(chart)]);
  }
  const scroller = el => el.closest(".scroll");
  const cue = el => getComputedStyle(el).backgroundImage.includes("radial-gradient");
  for (const t of document.querySelectorAll("table")) {
    const r = t.getBoundingClientRect(), box = scroller(t);
    const b = box && box.getBoundingClientRect();
    out.tables.push({caption: t.caption ? t.caption.textContent : "", right: r.right,
                     boxed: !!box, boxRight: b ? b.right : null,
                     scrolls: box ? box.scrollWidth > box.clientWidth : false, cue: box ? cue(box) : false});
  }
  // Anything that overflows its own box sideways (content cut off) and whether it says so.
  for (const el of document.querySelectorAll("body *")) {
    const st = getComputedStyle(el);
    if (el.scrollWidth > el.clientWidth + 1 && st.overflowX !== "visible" && el.clientWidth > 0)
      out.overflow.push({tag: el.tagName, cls: el.className.baseVal ?? el.className, scrolls: st.overflowX, cue: cue(el)});
  }
  // Each calendar bar's block, read from its tooltip, beside the lane name nearest its centre;
  // the block's lane as the calendar table gives it.
  const laneOf = {};
  const cal = document.querySelector("#calendar");
  for (const row of cal.querySelectorAll("tbody tr")) laneOf[row.cells[1].textContent.trim()] = row.cells[0].textContent.trim();
  const svg = cal.querySelector("svg.chart");
  const names = [...svg.querySelectorAll("text")].filter(t => t.getAttribute("class") !== "tick" && t.textContent.trim())
    .map(t => { const r = t.getBoundingClientRect(); return [t.textContent.trim(), (r.top + r.bottom) / 2, r.right]; });
  for (const bar of svg.querySelectorAll("rect.bar")) {
    const r = bar.getBoundingClientRect(), y = (r.top + r.bottom) / 2;
    const block = bar.querySelector("title").textContent.split(" ")[0];
    const left = names.filter(n => n[2] <= r.left + 1);
    left.sort((a, b) => Math.abs(a[1] - y) - Math.abs(b[1] - y));
    out.bars.push({block: block, lane: laneOf[block], beside: left.length ? left[0][0] : null, y: y});
  }
  window.parent.document.getElementById("geometry").textContent = JSON.stringify(out);
})();
</script>
"""

# No chart text under this many CSS pixels at any width.
MIN_TEXT_PX = 9.9


def measure(browser, page, width, workdir):
    """The page's geometry in a viewport `width` CSS pixels wide.

    Headless Chromium's window is at least 500 pixels wide, so the page is measured inside an
    iframe of the width asked for (its own viewport: its media queries apply), the page given as
    the frame's srcdoc so the measuring script inside may write to the frame's parent."""
    text = pathlib.Path(page).read_text()
    text = re.sub(
        r'<meta http-equiv="Content-Security-Policy"[^>]*>',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        text,
    )
    inner = text.replace("</body>", MEASURE + "</body>")
    probe = pathlib.Path(workdir) / f"measure-{width}.html"
    probe.write_text(
        "<!doctype html><html><head><style>body{margin:0}iframe{border:0;display:block}</style></head><body>"
        f'<iframe width="{width}" height="{FRAME_HEIGHT}" srcdoc="{html.escape(inner, quote=True)}"></iframe>'
        '<pre id="geometry"></pre></body></html>'
    )
    dom = run(browser, probe, "--dump-dom", f"--window-size={max(width, 500)},1200")
    found = re.search(r'<pre id="geometry">(.+?)</pre>', dom.stdout, re.DOTALL)
    if not found:
        return None, [f"{width} px: the measuring script wrote nothing: {dom.stderr[-1500:]}"]
    return json.loads(html.unescape(found.group(1))), []


# Taller than the page at any width, so the frame never scrolls (a scroll bar would narrow it).
FRAME_HEIGHT = 20000


def lane_name_matches(label, lane):
    """A lane's name as drawn: whole, or cut with an ellipsis (page/src/chart.rs, `short`)."""
    if label is None or lane is None:
        return False
    return label == lane or (label.endswith("…") and lane.startswith(label[:-1]))


def geometry_problems(g):
    """What a person would see wrong at this width."""
    w = g["width"]
    problems = []
    if g["order"][:2] != ["glance", "approvals"]:
        problems.append(f"{w} px: the page opens with {g['order'][:2]}, not the summary then the approvals")
    tops = g["tops"]
    if not tops["glance"] < tops["approvals"] < tops["calendar"]:
        problems.append(f"{w} px: sections drawn out of order: {tops}")
    smallest = min(g["texts"], default=[99, ""])
    if smallest[0] < MIN_TEXT_PX:
        problems.append(
            f"{w} px: chart text of {smallest[0]} px ({smallest[1]!r} in a chart {smallest[2]} px wide), "
            f"under {MIN_TEXT_PX}"
        )
    if g["page"] > w + 1:
        problems.append(f"{w} px: the page is {g['page']} px wide: something sticks out")
    for t in g["tables"]:
        if t["right"] > w + 1 and not (t["boxed"] and t["boxRight"] <= w + 1):
            problems.append(f"{w} px: table {t['caption']!r} ends at {t['right']:.0f} px outside a scroll box")
        if t["scrolls"] and not t["cue"]:
            problems.append(f"{w} px: table {t['caption']!r} scrolls with no cue")
    for o in g["overflow"]:
        if not o["cue"]:
            problems.append(f"{w} px: a {o['tag']} {o['cls']!r} cuts its content off with no cue")
    if not g["bars"]:
        problems.append(f"{w} px: no calendar bar found")
    for b in g["bars"]:
        if not lane_name_matches(b["beside"], b["lane"]):
            problems.append(
                f"{w} px: block {b['block']} of lane {b['lane']!r} is drawn beside {b['beside']!r}"
            )
    return problems


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

    # A laptop and a phone: the screenshot at each, the whole page tall.
    heights = {}
    with tempfile.TemporaryDirectory() as work:
        for width in WIDTHS:
            g, failed = measure(browser, page, width, work)
            problems.extend(failed)
            if g:
                problems.extend(geometry_problems(g))
                heights[width] = g["height"]
                print(
                    f"browser_check: {width} px: smallest chart text {min(g['texts'])[0]} px, "
                    f"page {g['page']} px wide, {g['height']} px tall, {len(g['bars'])} calendar bar(s)"
                )
    for width in WIDTHS:
        target = pathlib.Path(shot) if width == WIDTHS[0] else pathlib.Path(shot).with_name(f"team-{width}.png")
        target.unlink(missing_ok=True)
        height = heights.get(width, 4200)
        shown = page
        if width < 500:
            # A phone's width only fits in a frame (the window is at least 500 pixels wide).
            shown = pathlib.Path(shot).with_name(f"frame-{width}.html")
            shown.write_text(
                "<!doctype html><html><head><style>body{margin:0}iframe{border:0;display:block}</style></head>"
                f'<body><iframe width="{width}" height="{height}" '
                f'srcdoc="{html.escape(pathlib.Path(page).read_text(), quote=True)}"></iframe></body></html>'
            )
        run(
            browser,
            shown,
            f"--screenshot={target.resolve()}",
            f"--window-size={max(width, 500)},{height}",
            "--hide-scrollbars",
        )
        if not target.exists() or target.stat().st_size == 0:
            problems.append(f"no screenshot written at {width} px")

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
        f"every section holds the story; at {WIDTHS} px its charts' text is readable, wide tables "
        f"scroll with a cue, each calendar bar lies in its lane; screenshots {shot} and team-390.png"
    )


if __name__ == "__main__":
    main()
