#!/usr/bin/env bash
# The demo's steps, run by infra/demo.sh inside a started local stack (its env is loaded).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CAPBLOCK="$CARGO_TARGET_DIR/debug/capblock"
PY="$CAPBLOCK_CACHE/venv/bin/python"

sim_now() { "$PY" -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "/_sim/state"))["now"])' "$CAPBLOCK_SIM_URL"; }
advance_days() { "$PY" -c 'import sys,urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/_sim/clock", data=("{\"advance_secs\": %d}" % (int(sys.argv[2]) * 86400)).encode(), method="POST"))' "$CAPBLOCK_SIM_URL" "$1" >/dev/null; }
slack() {
	# Reads what capblock published to the alerts topic (an SQS queue subscribed to it) and
	# prints each message the way Slack shows it.
	"$PY" - "$CAPBLOCK_ALERTS_TAP_URL" <<'PY'
import json, sys, boto3
q = boto3.client("sqs")
while True:
    r = q.receive_message(QueueUrl=sys.argv[1], MaxNumberOfMessages=10, WaitTimeSeconds=0)
    msgs = r.get("Messages", [])
    if not msgs:
        break
    for m in msgs:
        body = json.loads(json.loads(m["Body"])["Message"])
        c = body["content"]
        print("  ┌─ Slack #capacity ── thread " + body["metadata"]["threadId"])
        print("  │ " + c["title"])
        for line in c["description"].splitlines():
            print("  │ " + line)
        for step in c.get("nextSteps", []):
            print("  │ → " + step)
        print("  └─")
        q.delete_message(QueueUrl=sys.argv[1], ReceiptHandle=m["ReceiptHandle"])
PY
}

echo
echo "==> 1. validate the example rules (invalid.toml is wrong on purpose)"
"$CAPBLOCK" rules validate infra/examples/rules/p5-weekly.toml infra/examples/rules/a100-daily.toml infra/examples/rules/invalid.toml || true

echo
echo "==> 2. store the p5-weekly rule"
"$CAPBLOCK" rules put infra/examples/rules/p5-weekly.toml

NOW="$(sim_now)"
echo
echo "==> 3. the market at $NOW: 2 x p5.48xlarge for 7 days, cheapest per GPU-hour first"
"$CAPBLOCK" offerings --types p5.48xlarge --counts 2 --days 7 --regions us-east-1,us-west-2,eu-north-1 --from "$NOW"

echo
echo "==> 4. scan at $NOW (stack mode live against the simulated market): prices are above the rule's 2.95"
"$CAPBLOCK" scan --time "$NOW" --mode live --stack capblock-demo

advance_days 2
NOW="$(sim_now)"
echo
echo "==> 5. two days later ($NOW) the us-west-2 price has dropped: scan again"
"$CAPBLOCK" scan --time "$NOW" --mode live --stack capblock-demo

echo
echo "==> 6. a third scan buys nothing more (the rule holds its one block)"
"$CAPBLOCK" scan --time "$NOW" --mode live --stack capblock-demo | grep -E "decision|action" || true

echo
echo "==> 7. what Slack shows (read back from the alerts topic)"
slack

echo
echo "==> 8. what the market recorded: exactly one purchase"
"$PY" -c 'import json,sys,urllib.request; s=json.load(urllib.request.urlopen(sys.argv[1] + "/_sim/state")); [print("  %s  %s x %s  %s  %s -> %s  fee %s  tags %s" % (p["reservation_id"], p["instance_count"], p["instance_type"], p["region"], p["start"], p["end"], p["upfront_fee"], p["tags"])) for p in s["purchases"]]; print("  purchases: %d" % len(s["purchases"]))' "$CAPBLOCK_SIM_URL"

echo
echo "==> 9. the blocks capblock tracks, as of the market's clock"
"$CAPBLOCK" blocks --all --time "$NOW"

CHART="$CAPBLOCK_CACHE/demo-prices.svg"
echo
echo "==> 10. the prices every scan stored, and a chart with the rule's threshold"
"$CAPBLOCK" history --region us-east-1,us-west-2 --type p5.48xlarge --chart "$CHART" --rule infra/examples/rules/p5-weekly.toml | tail -n 4
echo "  chart: $CHART"

echo
echo "==> 11. backtest: what p5-weekly would have bought from that history"
"$CAPBLOCK" backtest --rule infra/examples/rules/p5-weekly.toml
