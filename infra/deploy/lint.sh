#!/usr/bin/env bash
# Lints the templates with cfn-lint and `sam validate --lint`, and the capacity stack's dashboard
# body. Any finding (error, warning or informational) fails. Offline: uses dummy credentials.
# Usage: infra/deploy/lint.sh [TEMPLATE...]
#   (default: <repo>/template.yaml, the capacity stack, and <repo>/member.yaml, the member stack)
set -euo pipefail
# shellcheck source=infra/deploy/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
deploy_venv

if [[ $# -gt 0 ]]; then
	TEMPLATES=("$@")
else
	TEMPLATES=("$REPO_DIR/template.yaml" "$REPO_DIR/member.yaml")
fi
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 \
	AWS_REGION=us-east-1 SAM_CLI_TELEMETRY=0 AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_SESSION_TOKEN

status=0
cd "$REPO_DIR"

for TEMPLATE in "${TEMPLATES[@]}"; do
	echo "== cfn-lint $(cfn-lint --version | awk '{print $2}'): $TEMPLATE (errors, warnings and informational)"
	# --non-zero-exit-code informational: exit non-zero on any level of finding.
	if cfn-lint --include-checks I --non-zero-exit-code informational --format parseable -- "$TEMPLATE"; then
		echo "cfn-lint: no findings"
	else
		echo "cfn-lint: FAILED (findings above)"
		status=1
	fi

	# Only the capacity stack has a dashboard.
	if grep -q 'DashboardBody:' "$TEMPLATE"; then
		echo "== the dashboard body as CloudFormation would deploy it: JSON with widgets"
		if python3 infra/deploy/dashboard.py --template "$TEMPLATE" --out /dev/null; then
			echo "dashboard body: valid JSON"
		else
			echo "dashboard body: FAILED"
			status=1
		fi
	fi

	echo "== sam validate --lint (aws-sam-cli $(sam --version | awk '{print $NF}')): $TEMPLATE"
	out="$(sam validate --lint --template "$TEMPLATE" --region us-east-1 2>&1)" && rc=0 || rc=$?
	printf '%s\n' "$out"
	# sam prints exactly one "... is a valid SAM Template" line when clean; anything
	# else (lint warnings it does not fail on, deprecation notes) counts as a finding.
	extra="$(printf '%s\n' "$out" | grep -v -e 'is a valid SAM Template$' -e '^[[:space:]]*$' || true)"
	if [[ $rc -ne 0 || -n $extra ]]; then
		echo "sam validate: FAILED (rc=$rc)"
		status=1
	else
		echo "sam validate: no findings"
	fi
done

exit "$status"
