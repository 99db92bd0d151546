#!/usr/bin/env bash
# `make demo`: the main job, locally. Builds the simulator and the CLI, starts a private local
# stack (moto + the simulated market from infra/examples/market.toml), plays the demo steps,
# and stops the stack again whatever happens.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/capblock/target}"
export CAPBLOCK_CACHE="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}"
# A stack of its own, so the demo never stops a stack a developer has running.
export CAPBLOCK_STATE="$CAPBLOCK_CACHE/demo-stack"
export CAPBLOCK_SCENARIO="$REPO/infra/examples/market.toml"

echo "==> building the market simulator and the capblock CLI (first build: several minutes)"
cargo build --quiet -p capblock-market-sim -p capblock-cli
echo "==> starting the local stack (moto + simulated market)"
bash infra/local/stack.sh run -- bash infra/demo-steps.sh
