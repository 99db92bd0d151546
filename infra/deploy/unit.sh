#!/usr/bin/env bash
# Offline self-tests of the deployment side (every infra/deploy/test_*.py), with the deploy
# venv's Python (PyYAML). Part of `make test-template`; a few seconds.
#   test_crosscheck.py the crosscheck package on a small fake repository
#   test_lock.py       Cargo.lock holds none of the AWS SDK's legacy HTTP stack
#   test_member.py     what member.yaml promises (the hand-off role and its trust, bus policy),
#                      alone and against template.yaml
#   test_template.py   what template.yaml promises (alarms, live budget rule, IAM guards, dashboard,
#                      what it may do in other accounts of its Organization)
# Usage: infra/deploy/unit.sh
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
deploy_venv
status=0
for t in "$DEPLOY_DIR"/test_*.py; do
	echo "== ${t#"$REPO_DIR"/}"
	"$DEPLOY_VENV/bin/python" "$t" || status=1
done
exit "$status"
