#!/usr/bin/env bash
# `make demo`: the main job, locally, over two simulated weeks. Builds the simulator, the CLI,
# the three Lambda functions and capblock-local-lambda (a local Lambda Runtime API), starts a
# private local stack (moto + the simulated market from infra/examples/market.toml), plays
# infra/demo-steps.sh (the real function binaries driven by infra/demo/driver.py), and stops the
# stack and the function processes again whatever happens. Exits non-zero if the story's
# invariants fail.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/capblock/target}"
export CAPBLOCK_CACHE="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}"
# A stack of its own, so the demo never stops a stack a developer has running.
export CAPBLOCK_STATE="${DEMO_STATE:-$CAPBLOCK_CACHE/demo-stack}"
export CAPBLOCK_SCENARIO="$REPO/infra/examples/market.toml"

# The driver records the capblock-local-lambda processes it starts here; it stops them itself,
# this is the backstop if it is killed. Only pids still running capblock-local-lambda are signalled.
# shellcheck disable=SC2329 # run by the EXIT trap below, which shellcheck does not follow
stop_lambdas() {
	local pids="$CAPBLOCK_STATE/lambdas.pids" pid
	[[ -f $pids ]] || return 0
	while read -r pid; do
		[[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || continue
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q capblock-local-lambda; then
			kill "$pid" 2>/dev/null || true
		fi
	done <"$pids"
	rm -f "$pids"
}
trap stop_lambdas EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "==> building the market simulator, the capblock CLI, the functions and the local Lambda runtime (first build: several minutes)"
# The same build as `make test` (`--all-targets`): `--bins` alone would resolve the AWS SDK
# crates without the features the test targets' dev-dependencies turn on (aws-smithy-mocks,
# test-util), a second feature set that `make test` then compiled all over again. One feature
# set, so either command reuses everything the other built.
cargo build --quiet --workspace --all-targets
echo "==> starting the local stack (moto + simulated market)"
started=$SECONDS
status=0
bash infra/local/stack.sh run -- bash infra/demo-steps.sh || status=$?
echo "==> demo done in $((SECONDS - started)) s after the build"
exit "$status"
