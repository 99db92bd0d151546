#!/usr/bin/env bash
# Runs the crosscheck package (infra/deploy/crosscheck/) with the deploy venv's Python (PyYAML,
# cfn-lint's IAM data). -B: no __pycache__ in the source tree.
# Usage: infra/deploy/crosscheck.sh [--repo DIR] [--template FILE] [--registry DIR] [-v]
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
deploy_venv
PYTHONPATH="$DEPLOY_DIR${PYTHONPATH:+:$PYTHONPATH}" exec "$DEPLOY_VENV/bin/python" -B -m crosscheck "$@"
