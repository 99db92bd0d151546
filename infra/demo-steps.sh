#!/usr/bin/env bash
# The demo's steps, run by infra/demo.sh inside a started local stack (its env is loaded):
# store the example rules, play two simulated weeks with the real functions (infra/demo/driver.py),
# then chart the prices and backtest the rule.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CAPBLOCK="$CARGO_TARGET_DIR/debug/capblock"
PY="$CAPBLOCK_CACHE/venv/bin/python"

echo
echo "==> validate the example rules (invalid.toml is wrong on purpose)"
"$CAPBLOCK" rules validate infra/examples/rules/p5-weekly.toml infra/examples/rules/a100-daily.toml infra/examples/rules/invalid.toml || true

echo
echo "==> store p5-weekly (2 x p5.48xlarge for 7 days at <= 2.95/GPU-h) and a100-daily (1 x p4d.24xlarge for 1 day at <= 2.10)"
"$CAPBLOCK" rules put infra/examples/rules/p5-weekly.toml infra/examples/rules/a100-daily.toml
echo
echo "    The market (infra/examples/market.toml): p5 is 4.10-4.35 until day 3, when us-west-2 drops"
echo "    to 2.89; p4d is 2.05 all along. Payments clear 3 h after purchase, except that the demo"
echo "    tells the market (POST /_sim/payment) to fail the first A100 purchase, so a100-daily"
echo "    (rebuy_on_payment_failure = true) buys a replacement."
echo

status=0
"$PY" infra/demo/driver.py || status=$?

NOW="$("$PY" -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "/_sim/state"))["now"])' "$CAPBLOCK_SIM_URL")"
echo
echo "==> the blocks capblock tracks, as of $NOW"
"$CAPBLOCK" blocks --all --time "$NOW"

CHART="$CAPBLOCK_CACHE/demo-prices.svg"
echo
echo "==> the prices every scan stored, and a chart with p5-weekly's threshold"
"$CAPBLOCK" history --region us-east-1,us-west-2 --type p5.48xlarge --chart "$CHART" --rule infra/examples/rules/p5-weekly.toml | tail -n 2
echo "  chart: $CHART"

echo
echo "==> backtest: what p5-weekly would have bought from that history"
"$CAPBLOCK" backtest --rule infra/examples/rules/p5-weekly.toml |
	awk '/: held back: / { n++; next } { print } END { if (n) printf "  (and %d scan(s) held back: the rule already held its one block)\n", n }'

if [[ $status -ne 0 ]]; then
	echo
	echo "demo: the story's invariants failed (see above; function logs: $CAPBLOCK_STATE/lambda-*.log)" >&2
fi
exit "$status"
