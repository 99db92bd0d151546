#!/usr/bin/env bash
# Runs a SkyPilot task on the Capacity Block capblock bought for a rule: waits until EC2 shows
# the block active with room for the nodes, launches the task into it, and takes the cluster
# down ahead of the block's termination time. docs/handoff.md ("Launching into the block")
# explains each step; infra/handoff/test_skypilot_recipe.py checks the config it writes and its
# sky commands against SkyPilot's own schema and CLI.
#
# Usage: launch-on-block.sh RULE TASK_YAML [STACK]
#   RULE       the capblock rule whose block to use; it needs a publish_parameter action
#              (the block is read from the SSM parameter /capblock/RULE/current)
#   TASK_YAML  the SkyPilot task, e.g. infra/examples/skypilot/task.yaml
#   STACK      the capblock stack's name (default capblock): the instances are tagged
#              capblock:handoff=STACK, which capblock's run_command actions need
# Environment:
#   NUM_NODES          nodes to launch (default: the block's instance count)
#   DOWN_LEAD_MINUTES  take the cluster down this long before the termination time (default 10:
#                      less than the lead of the rule's run_command action, so that the
#                      checkpoint capblock sends the instances has run by then)
#   POLL_SECONDS       how often to look at the block (default 60)
# Needs: the aws CLI (ssm:GetParameter, ec2:DescribeCapacityReservations), jq, GNU date, and
# SkyPilot 0.14 (infra/handoff/skypilot-requirements.txt) with AWS enabled (`sky check aws`).
set -euo pipefail

rule="${1:?usage: launch-on-block.sh RULE TASK_YAML [STACK]}"
task="${2:?usage: launch-on-block.sh RULE TASK_YAML [STACK]}"
stack="${3:-capblock}"
lead="${DOWN_LEAD_MINUTES:-10}"
poll="${POLL_SECONDS:-60}"
param="/capblock/$rule/current"
cluster="capblock-$rule"

# The block as capblock published it (JSON: reservation_id, region, availability_zone,
# instance_type, instance_count, start, end, termination_time), or nothing yet.
block() {
	aws ssm get-parameter --name "$param" --query Parameter.Value --output text 2>/dev/null
}
field() { jq -r ".$1" <<<"$current"; }

# 1. Wait until EC2 shows the block active with room for the nodes. SkyPilot uses a reservation
#    only then: before the start, or when it is full, it would launch ordinary on-demand
#    instances of the same type instead, so this wrapper (not SkyPilot) does the waiting.
while :; do
	if current="$(block)"; then
		id="$(field reservation_id)"
		region="$(field region)"
		nodes="${NUM_NODES:-$(field instance_count)}"
		read -r state free < <(aws ec2 describe-capacity-reservations --region "$region" \
			--capacity-reservation-ids "$id" \
			--query 'CapacityReservations[0].[State,AvailableInstanceCount]' --output text)
		if [[ $state == active && $free -ge $nodes ]]; then
			break
		fi
		echo "block $id is $state with $free free instance(s), $nodes needed; waiting" >&2
	else
		echo "no block published at $param yet; waiting" >&2
	fi
	sleep "$poll"
done

# 2. The block's reservation and the hand-off tag, as a config layered onto this launch only
#    (infra/examples/skypilot/config.yaml has the same shape).
cfg="$(mktemp --suffix=.yaml)"
trap 'rm -f "$cfg"' EXIT
cat >"$cfg" <<YAML
aws:
  specific_reservations: [$id]
  labels:
    capblock:handoff: $stack
YAML

# 3. Launch in the block's zone, with its instance type (a plain cluster, not a managed job: a
#    managed job would be recovered onto on-demand instances when the block ends).
sky launch --yes --detach-run --cluster "$cluster" --config "$cfg" \
	--infra "aws/$region/$(field availability_zone)" --instance-type "$(field instance_type)" \
	--num-nodes "$nodes" "$task"

# 4. Until the termination time less the lead (read again each time: an extension moves it,
#    and the parameter goes when the block ends), then take the cluster down. The checkpoint
#    itself is the rule's run_command action: capblock sends it to the block's instances
#    (they carry capblock:handoff) its lead_minutes before the termination time.
while current="$(block)" && [[ $(field reservation_id) == "$id" ]]; do
	down_at=$(($(date -u -d "$(field termination_time)" +%s) - lead * 60))
	if (($(date -u +%s) >= down_at)); then
		break
	fi
	sleep "$poll"
done
sky down --yes "$cluster"
