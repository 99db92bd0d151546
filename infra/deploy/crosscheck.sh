#!/usr/bin/env bash
# Runs crosscheck.py with the deploy venv's Python (PyYAML, cfn-lint's IAM data).
# Usage: infra/deploy/crosscheck.sh [--repo DIR] [--template FILE] [--registry DIR]
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
deploy_venv
exec "$DEPLOY_VENV/bin/python" "$DEPLOY_DIR/crosscheck.py" "$@"
