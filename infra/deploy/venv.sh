# shellcheck shell=bash
# Sourced by lint.sh, crosscheck.sh and package.sh: makes sure the deploy venv
# exists and matches requirements.txt, then exports DEPLOY_VENV and puts its
# bin/ first on PATH.
#
#   CAPBLOCK_CACHE   cache folder (default $HOME/.cache/capblock); the venv is
#                    $CAPBLOCK_CACHE/deploy-venv and is rebuilt from scratch
#                    whenever the sha256 of requirements.txt changes.
#   PYTHON           interpreter used to create the venv (default python3)

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$DEPLOY_DIR/../.." && pwd)"
CAPBLOCK_CACHE="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}"
DEPLOY_VENV="$CAPBLOCK_CACHE/deploy-venv"
export CAPBLOCK_CACHE DEPLOY_VENV

deploy_venv() {
	local req="$DEPLOY_DIR/requirements.txt" stamp="$DEPLOY_VENV/.requirements.sha256" want have=""
	want="$(sha256sum "$req" | cut -d' ' -f1)"
	[[ -f $stamp ]] && have="$(cat "$stamp")"
	if [[ $want != "$have" || ! -x $DEPLOY_VENV/bin/python ]]; then
		echo "deploy venv: installing $req into $DEPLOY_VENV" >&2
		rm -rf "$DEPLOY_VENV"
		mkdir -p "$CAPBLOCK_CACHE"
		"${PYTHON:-python3}" -m venv "$DEPLOY_VENV" >&2
		"$DEPLOY_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2 || {
			echo "deploy venv: pip install failed" >&2
			rm -rf "$DEPLOY_VENV"
			return 1
		}
		echo "$want" >"$stamp"
	fi
	export PATH="$DEPLOY_VENV/bin:$PATH"
}
