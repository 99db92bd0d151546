#!/usr/bin/env bash
# Every Rust test twice at once (`make test-rust`, run by `make test`): today, and with the
# machine's date CAPBLOCK_FUTURE_DAYS (400) ahead under libfaketime (infra/local/future.sh),
# each run against a local stack of its own. The integration tests spend their time waiting on
# the simulated network and moto, not on the CPU (measured: 76 s of CPU in 145 s), so the two
# runs together take little longer than one. Today's output streams; the future run's goes to
# its state folder's test.log, summarized at the end and printed whole if it fails.
#
# Usage: infra/local/test-days.sh STATE_DIR TEST_THREADS
set -euo pipefail

state="${1:?usage: infra/local/test-days.sh STATE_DIR TEST_THREADS}"
threads="${2:?usage: infra/local/test-days.sh STATE_DIR TEST_THREADS}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
future_state="$state-future"
mkdir -p "$future_state"
log="$future_state/test.log"

CAPBLOCK_STATE="$future_state" bash "$here/future.sh" \
	bash "$here/stack.sh" run -- cargo test --workspace -- --test-threads "$threads" >"$log" 2>&1 &
future=$!
# Never leave the future run behind (Ctrl-C, a failed today run): its stack.sh stops its stack.
trap 'kill "$future" 2>/dev/null || true' EXIT

today=0
CAPBLOCK_STATE="$state" bash "$here/stack.sh" run -- cargo test --workspace -- --test-threads "$threads" || today=$?

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
	exit "$today"
fi
exit "$ahead"
