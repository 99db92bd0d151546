#!/usr/bin/env bash
# Builds the Lambda zips with cargo-lambda (release, provided.al2023 layout:
# one `bootstrap` per zip), one package at a time, and prints their sizes.
#
# Usage: infra/deploy/package.sh [x86_64|arm64] [PACKAGE...]
#   arch      default arm64 (must match the stack's Architecture parameter)
#   PACKAGE   function packages to build (default: every functions/*/ crate)
#
# Environment: CARGO_TARGET_DIR (honoured; zips land in $CARGO_TARGET_DIR/lambda),
# CAPBLOCK_CACHE (default $HOME/.cache/capblock: deploy venv, zig and XDG caches).
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

arch="${1:-arm64}"
[[ $# -gt 0 ]] && shift
case "$arch" in
x86_64 | x86-64 | amd64) arch=x86_64 flag=--x86-64 triple=x86_64-unknown-linux-gnu ;;
arm64 | aarch64) arch=arm64 flag=--arm64 triple=aarch64-unknown-linux-gnu ;;
-h | --help)
	sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "package.sh: unknown architecture '$arch' (x86_64 or arm64)" >&2
	exit 2
	;;
esac

deploy_venv # cargo-lambda and zig (ziglang) come from PyPI into the venv
export XDG_CACHE_HOME="$CAPBLOCK_CACHE/xdg-cache"
export ZIG_GLOBAL_CACHE_DIR="$CAPBLOCK_CACHE/zig-cache"
export ZIG_LOCAL_CACHE_DIR="$CAPBLOCK_CACHE/zig-cache"
mkdir -p "$XDG_CACHE_HOME" "$ZIG_GLOBAL_CACHE_DIR"
cd "$REPO_DIR"

if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
	echo "package.sh: Rust target $triple missing; trying: rustup target add $triple" >&2
	if ! rustup target add "$triple" >&2; then
		cat >&2 <<MSG
package.sh: error: could not install the Rust standard library for $triple
  (rustup needs to download it; this machine may not reach the Rust toolchain
  server). Either install it where you can (rustup target add $triple) or build
  for x86_64 instead and deploy with the matching parameter:
    infra/deploy/package.sh x86_64
    sam deploy --parameter-overrides Architecture=x86_64 ...
MSG
		exit 1
	fi
fi

if [[ $# -gt 0 ]]; then
	packages=("$@")
else
	packages=()
	for manifest in functions/*/Cargo.toml; do
		[[ -f $manifest ]] || continue
		packages+=("$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$manifest" | head -1)")
	done
fi
[[ ${#packages[@]} -gt 0 ]] || {
	echo "package.sh: no function packages under functions/" >&2
	exit 1
}

target_dir="${CARGO_TARGET_DIR:-$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')}"
echo "package.sh: cargo-lambda $(cargo lambda --version | awk '{print $2}'), $arch, target dir $target_dir" >&2

zips=()
for pkg in "${packages[@]}"; do
	echo "== cargo lambda build --release $flag --output-format zip --package $pkg" >&2
	start=$SECONDS
	cargo lambda build --release "$flag" --output-format zip --package "$pkg" >&2
	echo "   built $pkg in $((SECONDS - start)) s" >&2
	# one zip per binary of the package; the function binary has the package's name
	zips+=("$target_dir/lambda/$pkg/bootstrap.zip")
done

printf '%-70s %12s %9s\n' zip bytes MiB
for z in "${zips[@]}"; do
	if [[ -f $z ]]; then
		bytes=$(stat -c %s "$z")
		printf '%-70s %12d %9s\n' "$z" "$bytes" "$(awk -v b="$bytes" 'BEGIN{printf "%.2f", b/1048576}')"
	else
		printf '%-70s %12s\n' "$z" missing
		status=1
	fi
done
exit "${status:-0}"
