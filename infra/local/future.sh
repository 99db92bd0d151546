#!/usr/bin/env bash
# Runs a command with the machine's date moved ahead (`make test-future`, which `make test`
# runs): every process it starts, cargo's test binaries, moto, the market simulator, the local
# Lambda runtime and the capblock binaries, reads a wall clock CAPBLOCK_FUTURE_DAYS (default
# 400: more than a year, across a new year and a leap day) after today's. A test that compares
# a fixed calendar date with the wall clock fails here the day it is written, not a year later.
#
# libfaketime (Debian's `faketime`, installed here when missing and run as root) preloads
# itself into every dynamically linked process of the command, the multi-threaded library (-m),
# as the servers and test binaries are. By default only the wall clock moves: monotonic clocks
# (tokio's timers, every timeout) stay real (FAKETIME_DONT_FAKE_MONOTONIC). With
# CAPBLOCK_FAKE_MONOTONIC=1 they move by the same offset: Python's time.sleep (an absolute
# clock_nanosleep on the monotonic clock) fails with EINVAL under libfaketime 0.9.10 otherwise,
# so the boto3 checks, which sleep, run that way.
#
# Usage: infra/local/future.sh COMMAND [ARGS...]
set -euo pipefail

DAYS="${CAPBLOCK_FUTURE_DAYS:-400}"
[[ $DAYS =~ ^[0-9]+$ ]] || { echo "future.sh: CAPBLOCK_FUTURE_DAYS=$DAYS is not a number of days" >&2; exit 2; }
[[ $# -gt 0 ]] || { echo "usage: infra/local/future.sh COMMAND [ARGS...]" >&2; exit 2; }

if ! command -v faketime >/dev/null; then
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "future.sh: installing Debian's faketime (libfaketime)" >&2
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q faketime >&2; then
			apt-get update -q >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q faketime >&2
		fi
	else
		echo "future.sh: faketime is not installed; install it (Debian: apt-get install faketime)" >&2
		exit 1
	fi
fi

if [[ ${CAPBLOCK_FAKE_MONOTONIC:-0} != 1 ]]; then
	export FAKETIME_DONT_FAKE_MONOTONIC=1
fi
today="$(date -u +%Y-%m-%d)"
ahead="$(faketime -m -f "+${DAYS}d" date -u +%Y-%m-%d)"
want="$(date -u -d "$today + $DAYS days" +%Y-%m-%d)"
if [[ $ahead != "$want" ]]; then
	echo "future.sh: faketime did not move the date (got $ahead, expected $want)" >&2
	exit 1
fi
echo "future.sh: running with the wall clock at $ahead ($DAYS days after $today): $*" >&2
exec faketime -m -f "+${DAYS}d" "$@"
