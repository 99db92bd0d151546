# shellcheck shell=bash
# Sourced by the scripts that need a Python tool venv (lint.sh, crosscheck.sh, unit.sh,
# package.sh, infra/lint/check.sh, infra/handoff/test.sh). cached_venv keeps a venv per
# requirements file, rebuilt from scratch whenever the sha256 of that file changes; deploy_venv
# is the deploy tooling's (cfn-lint, sam, cargo-lambda, PyYAML), exported as DEPLOY_VENV with its
# bin/ first on PATH; skypilot_venv is SkyPilot's, for the hand-off recipe's check, exported as
# SKYPILOT_VENV and left off PATH (its `sky` is only ever called by path).
#
#   CAPBLOCK_CACHE   cache folder (default $HOME/.cache/capblock); the deploy venv is
#                    $CAPBLOCK_CACHE/deploy-venv, SkyPilot's $CAPBLOCK_CACHE/skypilot-venv
#   PYTHON           interpreter used to create a venv (default python3)

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck disable=SC2034 # read by the scripts that source this file
REPO_DIR="$(cd "$DEPLOY_DIR/../.." && pwd)"
CAPBLOCK_CACHE="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}"
DEPLOY_VENV="$CAPBLOCK_CACHE/deploy-venv"
SKYPILOT_VENV="$CAPBLOCK_CACHE/skypilot-venv"
export CAPBLOCK_CACHE DEPLOY_VENV SKYPILOT_VENV

# cached_venv VENV REQUIREMENTS: makes sure VENV exists and was installed from exactly
# REQUIREMENTS. Parallel runs (several worktrees share CAPBLOCK_CACHE) take a lock, so one
# installs and the others wait instead of deleting the venv under each other.
cached_venv() {
	local venv="$1" req="$2" stamp="$1/.requirements.sha256" want have=""
	want="$(sha256sum "$req" | cut -d' ' -f1)"
	[[ -f $stamp ]] && have="$(cat "$stamp")"
	[[ $want == "$have" && -x $venv/bin/python ]] && return 0
	mkdir -p "$CAPBLOCK_CACHE"
	exec 9>"$venv.lock"
	flock -w 900 9 || {
		echo "venv: timed out waiting for another install into $venv" >&2
		return 1
	}
	have=""
	[[ -f $stamp ]] && have="$(cat "$stamp")"
	if [[ $want != "$have" || ! -x $venv/bin/python ]]; then
		echo "venv: installing $req into $venv" >&2
		rm -rf "$venv"
		"${PYTHON:-python3}" -m venv "$venv" >&2
		"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2 || {
			echo "venv: pip install -r $req failed" >&2
			rm -rf "$venv"
			exec 9>&-
			return 1
		}
		echo "$want" >"$stamp"
	fi
	exec 9>&-
}

deploy_venv() {
	cached_venv "$DEPLOY_VENV" "$DEPLOY_DIR/requirements.txt" || return 1
	export PATH="$DEPLOY_VENV/bin:$PATH"
}

# SkyPilot pinned in infra/handoff/skypilot-requirements.txt (no extras: its config schema and
# CLI parser, no cloud SDK). About a minute to install the first time.
skypilot_venv() {
	cached_venv "$SKYPILOT_VENV" "$REPO_DIR/infra/handoff/skypilot-requirements.txt"
}
