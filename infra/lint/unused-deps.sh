#!/usr/bin/env bash
# Every dependency a crate declares is used by it (`make check`, `make test`): cargo-machete
# reads each crate's sources for the names its Cargo.toml declares, so a dependency left behind
# by a refactor (it still compiles, still costs build time and audit surface) fails the check.
# A well-kept crate for a generic job rather than a script of our own; pinned, and built once
# into the cache (about a minute on 2 cores) since the machines reach crates.io but not GitHub's
# release binaries.
# Usage: infra/lint/unused-deps.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION=0.9.2
tools="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/tools/cargo-machete-$VERSION"
if [[ ! -x $tools/bin/cargo-machete ]]; then
	echo "unused-deps: building cargo-machete $VERSION into $tools (once)" >&2
	# Its own target directory: never the clone's, whose build lock a long test run may hold.
	CARGO_TARGET_DIR="$tools/build" cargo install --quiet --locked --root "$tools" cargo-machete --version "$VERSION"
	rm -rf "$tools/build"
fi
cd "$REPO"
"$tools/bin/cargo-machete" --skip-target-dir
