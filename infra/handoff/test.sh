#!/usr/bin/env bash
# Checks docs/handoff.md's SkyPilot recipe against SkyPilot itself (infra/handoff/
# test_skypilot_recipe.py): its config and task against SkyPilot's schemas, its commands against
# SkyPilot's CLI. Offline once the venv exists (SkyPilot pinned in skypilot-requirements.txt,
# installed by skypilot_venv from infra/deploy/venv.sh: about a minute the first time); the check
# itself takes a few seconds. Part of `make test-template`.
# Usage: infra/handoff/test.sh
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../deploy/venv.sh"
skypilot_venv
echo "== infra/handoff/test_skypilot_recipe.py (skypilot $("$SKYPILOT_VENV/bin/python" -c 'import sky; print(sky.__version__)' 2>/dev/null))"
exec "$SKYPILOT_VENV/bin/python" "$REPO_DIR/infra/handoff/test_skypilot_recipe.py"
