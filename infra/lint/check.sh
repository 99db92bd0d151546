#!/usr/bin/env bash
# The gates on the scripts under infra/ (part of `make test`): shellcheck on every *.sh, ruff
# (rules in <repo>/ruff.toml) on every *.py, the docs check (links and images resolve;
# ARCHITECTURE.md true to the code) and the function-length gate (fn_lengths.py --check). Any
# finding fails. The tools come pinned from infra/lint/requirements.txt into a cached venv.
# Usage: infra/lint/check.sh
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../deploy/venv.sh"
LINT_VENV="$CAPBLOCK_CACHE/lint-venv"
cached_venv "$LINT_VENV" "$REPO_DIR/infra/lint/requirements.txt"
cd "$REPO_DIR"

status=0
mapfile -t scripts < <(find infra -name '*.sh' -type f | sort)
echo "== shellcheck $("$LINT_VENV/bin/shellcheck" --version | awk '/^version:/ {print $2}'): ${#scripts[@]} scripts"
# -x follows the `source` lines, so a variable set in venv.sh counts as set where it is used.
"$LINT_VENV/bin/shellcheck" -x "${scripts[@]}" || status=1

echo "== $("$LINT_VENV/bin/ruff" --version): infra/**/*.py"
"$LINT_VENV/bin/ruff" check --no-cache --output-format concise infra || status=1

# The docs check (infra/lint/check_docs.py: links and images resolve, ARCHITECTURE.md's paths,
# names, file lists and data model table hold) and the checker's self-test.
python3 -m unittest discover -s infra/lint -p 'test_check_docs.py' -q || status=1
python3 infra/lint/check_docs.py "$REPO_DIR" || status=1
# No production function over 80 lines without a reason in its doc (fn_lengths.py --check),
# and the checker's self-test.
python3 -m unittest discover -s infra/lint -p 'test_fn_lengths.py' -q || status=1
if report=$(python3 infra/lint/fn_lengths.py "$REPO_DIR" --check); then
  echo "== fn_lengths: ${report%%$'\n'*}"
else
  echo "$report"
  status=1
fi

exit "$status"
