#!/usr/bin/env bash
# Every Rust test twice at once (`make test-rust`, run by `make test`): today, and with the
# machine's date CAPBLOCK_FUTURE_DAYS (400) ahead under libfaketime (infra/local/future.sh),
# each run against a local stack of its own. The integration tests spend their time waiting on
# the simulated network and moto, not on the CPU (measured: 76 s of CPU in 145 s), so the two
# runs together take little longer than one. Today's output streams; the future run's goes to
# its state folder's test.log, summarized at the end and printed whole if it fails.
#
# `--no-fail-fast`: cargo otherwise stops at the first test binary that fails, and the proof
# (verify/tests/bounded.rs, simulation.rs) runs last, so one failure anywhere would skip it.
# Every binary runs; the exit status still fails, and the end names each failed test and binary
# of both runs (today's output is kept in the state folder's test.log too, to name them).
#
# Usage: infra/local/test-days.sh STATE_DIR TEST_THREADS
set -euo pipefail

state="${1:?usage: infra/local/test-days.sh STATE_DIR TEST_THREADS}"
threads="${2:?usage: infra/local/test-days.sh STATE_DIR TEST_THREADS}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
future_state="$state-future"
mkdir -p "$future_state"
log="$future_state/test.log"
today_log="$state/test.log"
mkdir -p "$state"

# The failed tests and test binaries a run's log names: libtest's `test NAME ... FAILED` lines
# and the list cargo prints after `error: N targets failed:`.
failures() {
	grep -E '^test .* \.\.\. FAILED$' "$1" | sed "s/^/  ($2) /" || true
	sed -n '/^error: [0-9]* targets\? failed:/,/^[^ ]/p' "$1" | grep -E '^ ' | sed "s/^ */  ($2) failed binary: /" || true
}

CAPBLOCK_STATE="$future_state" bash "$here/future.sh" \
	bash "$here/stack.sh" run -- cargo test --workspace --no-fail-fast -- --test-threads "$threads" >"$log" 2>&1 &
future=$!
# Never leave the future run behind (Ctrl-C, a failed today run): its stack.sh stops its stack.
trap 'kill "$future" 2>/dev/null || true' EXIT

today=0
CAPBLOCK_STATE="$state" bash "$here/stack.sh" run -- cargo test --workspace --no-fail-fast -- --test-threads "$threads" \
	2>&1 | tee "$today_log" || today=$?

ahead=0
wait "$future" || ahead=$?
trap - EXIT
if [[ $ahead -ne 0 ]]; then
	cat "$log"
	echo "test-days.sh: the tests FAILED with the date ${CAPBLOCK_FUTURE_DAYS:-400} days ahead (exit $ahead; log above, kept in $log)" >&2
else
	grep -E '^future.sh:|^test result:' "$log" | sed 's/^/  (date ahead) /'
	echo "test-days.sh: the tests passed with the date ${CAPBLOCK_FUTURE_DAYS:-400} days ahead too (log: $log)"
fi
if [[ $today -ne 0 ]]; then
	echo "test-days.sh: the tests FAILED today (exit $today; log: $today_log):" >&2
	failures "$today_log" today >&2
fi
if [[ $ahead -ne 0 ]]; then
	echo "test-days.sh: the tests FAILED with the date ahead:" >&2
	failures "$log" "date ahead" >&2
fi
if [[ $today -ne 0 ]]; then
	exit "$today"
fi
exit "$ahead"
