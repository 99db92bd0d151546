#!/usr/bin/env bash
# `make audit`: cargo-audit on Cargo.lock against a local copy of the RustSec advisory
# database (a clone of RustSec's advisory-db repository), without any network (--no-fetch).
# Usage: infra/deploy/audit.sh ADVISORY_DB [cargo-audit options, e.g. --stale]
#   make audit ADVISORY_DB=/path/to/advisory-db [AUDIT_FLAGS=--stale]
# infra/deploy/audit-fixture holds two stand-in advisories (h2 0.3, rustls-webpki 0.101): with it
# the target passes on a lock file without the SDK's legacy HTTP stack and fails on one with it.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
db="${1:-}"
if [[ -z $db ]]; then
	echo "usage: make audit ADVISORY_DB=/path/to/advisory-db (a clone of RustSec's advisory-db; nothing is fetched)" >&2
	exit 2
fi
shift
if [[ ! -d $db/crates ]]; then
	echo "$db is not an advisory database (it has no crates/ folder): clone RustSec's advisory-db there" >&2
	exit 2
fi
db="$(cd "$db" && pwd)"
if ! cargo audit --version >/dev/null 2>&1; then
	echo "cargo-audit is not installed: cargo install cargo-audit --locked (a few minutes of CPU)" >&2
	exit 2
fi
cd "$REPO_DIR"
lock=(--file Cargo.lock)
for a in "$@"; do [[ $a == -f || $a == --file* ]] && lock=(); done
echo "== cargo-audit $(cargo audit --version | awk '{print $NF}'), advisory database $db (no fetch)"
exec cargo audit --db "$db" --no-fetch "${lock[@]}" "$@"
