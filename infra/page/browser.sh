#!/usr/bin/env bash
# `make test-page`: the team page in a real browser. Renders the demo story's page
# (page/examples/demo_page.rs, the story of `make demo` in small), loads it in headless Chromium
# (Debian's `chromium`, installed here as infra/local/future.sh installs faketime) and checks it
# with infra/page/browser_check.py: no console message (the page's Content-Security-Policy blocks
# any request and Chromium reports each block on the console), each section holding the story's
# blocks, budgets and approval; its geometry at 1,400 and 390 CSS pixels (the summary first and
# the approvals second, no chart text under 10 px, wide tables scrolling inside a box with a cue,
# each calendar bar beside its own lane's name); and screenshots at both widths (team.png,
# team-390.png; docs/team-page.png is team.png).
# Usage: infra/page/browser.sh [OUTDIR]   (default: $CAPBLOCK_CACHE/page)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
OUT="${1:-${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/page}"
mkdir -p "$OUT"

if ! command -v chromium >/dev/null; then
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "browser.sh: installing Debian's chromium" >&2
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2; then
			apt-get update -q >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
		fi
	else
		echo "browser.sh: chromium is not installed; install it (Debian: apt-get install chromium)" >&2
		exit 1
	fi
fi

cargo run --quiet -p capblock-page --example demo_page -- "$OUT/team.html"
python3 infra/page/browser_check.py "$OUT/team.html" "$OUT/team.png"
