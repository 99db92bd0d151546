#!/usr/bin/env bash
# Makes the toolchain rust-toolchain.toml pins available to rustup (`make toolchain`, run first
# by the make targets that build). rustup does not install a pinned toolchain by itself, and the
# machines here reach no rustup server, so: if it is installed, nothing to do; else, if the
# installed stable toolchain is exactly that version, register it under the pinned name; else
# ask rustup to install it (works where its server is reachable) and fail with a hint if not.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want="$(sed -n 's/^channel *= *"\([^"]*\)".*/\1/p' "$REPO/rust-toolchain.toml")"
[[ -n $want ]] || { echo "toolchain: no channel in $REPO/rust-toolchain.toml" >&2; exit 1; }
command -v rustup >/dev/null || { echo "toolchain: rustup not found" >&2; exit 1; }
# Outside the repo, so rustup does not resolve the pinned (maybe missing) toolchain itself.
cd /
if rustup toolchain list | grep -q "^$want-"; then
	exit 0
fi
stable="$(rustup run stable rustc -vV 2>/dev/null || true)"
if [[ $stable == *"release: $want"* ]]; then
	host="$(sed -n 's/^host: //p' <<<"$stable")"
	toolchains="${RUSTUP_HOME:-$HOME/.rustup}/toolchains"
	# `rustup toolchain link` refuses a version as a name; a toolchain is a folder named
	# CHANNEL-HOST in rustup's home, so the stable folder under the pinned name is that toolchain.
	ln -sfn "$toolchains/stable-$host" "$toolchains/$want-$host"
	echo "toolchain: the installed stable is $want; registered it as $want-$host" >&2
	exit 0
fi
echo "toolchain: installing $want with rustup" >&2
rustup toolchain install "$want" --profile minimal --component rustfmt,clippy || {
	echo "toolchain: rust $want is not installed and could not be fetched; install it, or change" \
		"rust-toolchain.toml to the installed version ($(rustup run stable rustc --version 2>/dev/null || echo none))" >&2
	exit 1
}
