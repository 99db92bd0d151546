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
echo "==> the workloads' side (docs/handoff.md): an EventBridge rule sending every"
echo "    capblock event to an SQS queue, and in each of p5-weekly's regions the Auto Scaling group"
echo "    p5-trainers (desired 0, on a launch template for the Capacity Block market) and the Run Command document"
echo "    capblock-checkpoint its actions name"
"$PY" infra/demo/handoff.py

echo
echo "==> validate the example rules (invalid-rule.toml is wrong on purpose)"
"$CAPBLOCK" rules validate infra/examples/rules/starter.toml infra/examples/rules/p5-weekly.toml infra/examples/rules/a100-daily.toml infra/examples/rules/trn2-weekly.toml infra/examples/rules/trn2-ultra.toml infra/examples/invalid-rule.toml || true


echo
echo "==> store starter (the README's first rule: 1 x p5.48xlarge for a day at today's list, 5.97/GPU-h),"
echo "    p5-weekly (2 x p5.48xlarge for 7 days at <= 5.80), a100-daily (1 x p4d.24xlarge for 1 day at <= 1.70)"
echo "    trn2-weekly (dry-run; this account's Trainium2 quota is 0) and trn2-ultra (one u-trn2x64"
echo "    UltraServer for 2 days at <= 2.00/chip-h)"
"$CAPBLOCK" rules put infra/examples/rules/starter.toml infra/examples/rules/p5-weekly.toml infra/examples/rules/a100-daily.toml infra/examples/rules/trn2-weekly.toml infra/examples/rules/trn2-ultra.toml
echo
echo "    The market (infra/examples/market.toml), at 2026's published rates: p5 is 6.20-6.55 until"
echo "    day 3, when us-west-2 dips to 5.74 for three days; p4d is 1.64-1.69 until day 9. Payments clear 3 h after purchase, except that the demo"
echo "    tells the market (POST /_sim/payment) to fail the first A100 purchase, so a100-daily"
echo "    (rebuy_on_payment_failure = true) buys a replacement. EC2's describe limit is on (80 times"
echo "    faster, and the scan's pace with it); the account's quota for trn2 Capacity Blocks is 0."
echo "    Trn2 UltraServers sell at 1.80; six hours into a block the market impairs its interconnect"
echo "    and takes one instance out, twelve hours later it recovers."
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
DASHBOARD="$CAPBLOCK_CACHE/demo-dashboard.json"
"$PY" infra/deploy/dashboard.py --stack "${CAPBLOCK_STACK:-capblock}" --region "${AWS_REGION:-us-east-1}" --out "$DASHBOARD"
echo "  the CloudWatch dashboard body template.yaml would deploy: $DASHBOARD"

TEAM_PAGE="$CAPBLOCK_CACHE/demo-team.html"
echo
echo "==> the team page: calendar, budgets, prices with what was bought, approvals, use, market"
"$CAPBLOCK" page --out "$TEAM_PAGE" || status=$?
echo "  team page: $TEAM_PAGE (one file, no request: open it in any browser)"

echo
echo "==> backtest: what p5-weekly would have bought from that history"
"$CAPBLOCK" backtest --rule infra/examples/rules/p5-weekly.toml

SOON="${NOW:0:10}T04:25:00Z"
"$PY" -c 'import json,sys,urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/_sim/clock", data=json.dumps({"set": sys.argv[2]}).encode(), method="POST"))' "$CAPBLOCK_SIM_URL" "$SOON"
echo
echo "==> blocks starting soon, asked at $SOON for one day: every block ends at 11:30 UTC, so EC2 offers"
echo "    the closest matches (6 h 35 min and 30 h 35 min), priced here from their minutes"
CAPBLOCK_DESCRIBE_REFILL_SECONDS=0.05 "$CAPBLOCK" offerings --types p5.48xlarge --regions us-east-1 --days 1 \
	--from "$SOON" --to "${NOW:0:10}T06:00:00Z" || true


echo
echo "==> capblock status: the operator's one screen"
"$CAPBLOCK" status --time "$NOW" || status=$?

if [[ $status -ne 0 ]]; then
	echo
	echo "demo: the story's invariants failed (see above; function logs: $CAPBLOCK_STATE/lambda-*.log)" >&2
fi
exit "$status"
