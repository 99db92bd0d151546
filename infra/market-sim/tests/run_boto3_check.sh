#!/usr/bin/env bash
# Builds capblock-market-sim, starts it on a free loopback port, runs boto3_check.py against it
# and stops it again. Usage: tests/run_boto3_check.sh [PYTHON]  (PYTHON must have boto3).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-python3}"
: "${CARGO_TARGET_DIR:=$HOME/.cache/capblock/target}"
export CARGO_TARGET_DIR
cargo build -q -p capblock-market-sim
tmp="$(mktemp -d)"
"$CARGO_TARGET_DIR/debug/capblock-market-sim" --listen 127.0.0.1:0 --port-file "$tmp/port" \
    >"$tmp/stdout" 2>"$tmp/stderr" &
sim_pid=$!
trap 'kill "$sim_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "simulator did not start:"; cat "$tmp/stderr"; exit 1; }
AWS_ENDPOINT_URL_EC2="http://127.0.0.1:$(cat "$tmp/port")" "$py" "$here/tests/boto3_check.py" \
    --scenario "$here/examples/basic.toml"
