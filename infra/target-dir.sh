#!/usr/bin/env bash
# Seeds a clone's own Cargo target directory (`make toolchain` runs it before any build).
#
# Each clone builds into a target directory of its own under the cache, keyed by the clone's
# path (the Makefile's CARGO_TARGET_DIR), because path crates of two clones get the same
# artifact names: two clones building at once into one directory overwrote each other's
# rlibs (a doctest then failed, unable to find one). A directory of its own is safe, but cold:
# the AWS SDK crates take minutes. So the first time, it starts as a copy of the most recently
# used target directory in the cache: the dependencies are reused and only the workspace's own
# crates rebuild. The copy goes to a temporary name and is renamed into place, so a clone
# interrupted while seeding never builds in half a directory.
#
# Usage: infra/target-dir.sh TARGET_DIR
set -euo pipefail
target="${1:?usage: infra/target-dir.sh TARGET_DIR}"
[[ -d $target ]] && exit 0
cache="$(dirname "$target")"
mkdir -p "$cache"
# The most recently built other target directory (debug builds only: a release tree would not
# help). A directory's own mtime does not move when a build writes inside it, so the build's
# fingerprints say when it was last built.
seed="$(
	for d in "$cache"/target*; do
		[[ $d == "$target" || $d == *-release || $d == *.seeding.* || ! -d $d/debug/.fingerprint ]] && continue
		printf '%s %s\n' "$(stat -c %Y "$d/debug/.fingerprint")" "$d"
	done | sort -rn | head -n 1 | cut -d' ' -f2-
)"
if [[ -z $seed || ! -d $seed/debug ]]; then
	exit 0
fi
# The copy leaves out the incremental caches (about half of a debug tree): they belong to the
# workspace's own crates, which rebuild anyway. It needs the seed's size again plus room for the
# build (10 GiB); short of that, the least recently built other target directories are removed
# (they are caches: a clone that used one rebuilds), and if that is still not enough the clone
# builds cold rather than failing on a full disk.
kib() { du -sk --exclude=incremental "$1" 2>/dev/null | cut -f1; }
free_kib() { df -Pk "$cache" | awk 'NR == 2 { print $4 }'; }
need=$(($(kib "$seed") + 10 * 1024 * 1024))
while (($(free_kib) < need)); do
	oldest="$(
		for d in "$cache"/target*; do
			[[ $d == "$target" || $d == "$seed" || $d == *.seeding.* || ! -d $d/debug/.fingerprint ]] && continue
			printf '%s %s
' "$(stat -c %Y "$d/debug/.fingerprint")" "$d"
		done | sort -n | head -n 1 | cut -d' ' -f2-
	)"
	[[ -z $oldest ]] && break
	echo "target-dir: removing $oldest (least recently built) to make room" >&2
	rm -rf "$oldest"
done
if (($(free_kib) < need)); then
	echo "target-dir: not enough disk to seed $target from $seed; building cold" >&2
	exit 0
fi
echo "target-dir: seeding $target from $seed (dependencies reused; the workspace rebuilds)" >&2
tmp="$target.seeding.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
if ! tar -C "$seed" --exclude='./*/incremental' -cf - . | tar -C "$tmp" -xf -; then
	echo "target-dir: seeding failed; building cold" >&2
	exit 0
fi
mv -T "$tmp" "$target" 2>/dev/null || true
