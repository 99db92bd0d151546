"""The demo's hand-off side (docs/handoff.md): what a workload sees of capblock.

- An EventBridge rule on the default bus sends every `capblock` event to an SQS queue, as the
  docs/handoff.md shows; the story drains it each step and prints the events (each checked against its
  JSON Schema at the end with infra/local/validate_events.py).
- p5-weekly's actions (infra/examples/rules/p5-weekly.toml) act on moto: the SSM parameter
  /capblock/p5-weekly/current, the Auto Scaling group `p5-trainers` (made here in each of the
  rule's regions, with desired capacity 0) and the Run Command document `capblock-checkpoint`.
  Each step the story reads the group's desired capacity and the commands sent to a block's
  instances, with the simulated time they were first seen.
"""

import datetime as dt
import json
import os
import subprocess

import boto3

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUEUE = "capblock-demo-events"
RULE = "capblock-events-to-queue"
RULE_ID = "p5-weekly"
GROUP = "p5-trainers"
DOCUMENT = "capblock-checkpoint"
# trn2-ultra's capacity reservation group, as capblock names it: capblock-<stack>-<rule> (only
# UltraServer blocks can join a group: the EC2 user guide).
GROUP_RULE = "trn2-ultra"
RESERVATION_GROUP = f"capblock-{os.environ.get('CAPBLOCK_STACK', 'capblock-local')}-{GROUP_RULE}"
ALL_DETAIL_TYPES = {
    "Block Purchased", "Payment Failed", "Block Active", "Block Ending", "Block Extended", "Block Ended", "Health Changed", "Block Idle",
    "Block Shared",
}
REGIONS = ["us-east-1", "us-west-2", "eu-north-1"]
# p5-weekly's leads: the group goes to 0 an hour before termination, the command 30 minutes
# before it; termination is 30 minutes before the end.
DOWN_BEFORE_END = dt.timedelta(minutes=60 + 30)
COMMAND_BEFORE_END = dt.timedelta(minutes=30 + 30)


def setup():
    """The EventBridge rule of docs/handoff.md to a queue, the group and the document (before the rules
    are validated: `rules validate` asks Auto Scaling whether the group exists)."""
    sqs, events = boto3.client("sqs"), boto3.client("events")
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=RULE, EventPattern=json.dumps({"source": ["capblock"]}))
    events.put_targets(Rule=RULE, Targets=[{"Id": "queue", "Arn": arn}])
    for region in REGIONS:
        asg = boto3.client("autoscaling", region_name=region)
        # A launch template for the Capacity Block market. An instance block cannot join a
        # reservation group, so the launch script names the block by its id (p5-weekly's
        # publish_parameter); the template carries the market. The simulated EC2 holds what
        # capblock reads; moto's Auto Scaling only accepts a template its own EC2 knows, so moto
        # gets one of the same name.
        data = {"ImageId": "ami-12c6146b", "InstanceType": "p5.48xlarge"}
        boto3.client("ec2", region_name=region, endpoint_url=os.environ["CAPBLOCK_MOTO_URL"]).create_launch_template(
            LaunchTemplateName=GROUP, LaunchTemplateData=data,
        )
        boto3.client("ec2", region_name=region).create_launch_template(
            LaunchTemplateName=GROUP,
            LaunchTemplateData={**data, "InstanceMarketOptions": {"MarketType": "capacity-block"}},
        )
        asg.create_auto_scaling_group(
            AutoScalingGroupName=GROUP,
            LaunchTemplate={"LaunchTemplateName": GROUP, "Version": "$Latest"},
            MinSize=0,
            MaxSize=2,
            DesiredCapacity=0,
            AvailabilityZones=[f"{region}a"],
            Tags=[{"Key": "capblock:handoff", "Value": "capblock-local", "PropagateAtLaunch": True}],
        )
        boto3.client("ssm", region_name=region).create_document(
            Name=DOCUMENT,
            DocumentType="Command",
            Content=json.dumps({
                "schemaVersion": "2.2",
                "description": "Ask the training job to checkpoint now.",
                "mainSteps": [{
                    "action": "aws:runShellScript",
                    "name": "checkpoint",
                    "inputs": {"runCommand": ["pkill -USR1 -f train.py || true"]},
                }],
            }),
        )
    return url


def reservation_group_members(region):
    """The reservations in trn2-ultra's capacity reservation group (none before capblock makes it)."""
    rg = boto3.client("resource-groups", region_name=region)
    try:
        out = rg.list_group_resources(Group=RESERVATION_GROUP)
    except rg.exceptions.NotFoundException:
        return frozenset()
    return frozenset(r["Identifier"]["ResourceArn"].rsplit("/", 1)[-1] for r in out["Resources"])


def block_instances(r):
    """The block's running instances, as the simulated EC2 reports them (capblock's own question)."""
    ec2 = boto3.client("ec2", region_name=r["region"])
    filters = [{"Name": "capacity-reservation-id", "Values": [r["reservation_id"]]}]
    pages = ec2.describe_instances(Filters=filters)["Reservations"]
    return {i["InstanceId"] for page in pages for i in page["Instances"]}


class HandOff:
    def __init__(self, say):
        self.say = say
        self.sqs = boto3.client("sqs")
        self.url = self.sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]  # made by setup()
        self.events = []  # whole EventBridge events, in arrival order
        self.desired = {}  # region -> last desired capacity seen
        self.scaled = []  # (now, region, desired)
        self.commands = {}  # reservation id -> (now, instances)
        self.grouped = []  # (now, state of p5-weekly's block, reservation ids in its group)

    def due(self, state):
        """Times the story must step at: the group's scale-down and the command's lead."""
        out = []
        for r in state["reservations"]:
            end = dt.datetime.fromisoformat(r["end"])
            out += [end - DOWN_BEFORE_END, end - COMMAND_BEFORE_END]
        return out

    def observe(self, now, state):
        for region in REGIONS:
            g = boto3.client("autoscaling", region_name=region).describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])
            desired = g["AutoScalingGroups"][0]["DesiredCapacity"]
            if desired != self.desired.get(region, 0):
                self.say(now, f"HAND-OFF   {GROUP} in {region}: desired capacity {self.desired.get(region, 0)} -> {desired}")
                self.scaled.append((now, region, desired))
            self.desired[region] = desired
        for r in state["reservations"]:
            if (r.get("tags") or {}).get("capblock:rule") != GROUP_RULE:
                continue
            members = reservation_group_members(r["region"])
            if not self.grouped or self.grouped[-1][2] != members:
                self.say(now, f"HAND-OFF   {RESERVATION_GROUP} in {r['region']}: {', '.join(sorted(members)) or 'empty'}")
            self.grouped.append((now, r["state"], members))
        for r in state["reservations"]:
            rid = r["reservation_id"]
            if rid in self.commands or r["state"] != "active":
                continue
            ssm = boto3.client("ssm", region_name=r["region"])
            sent = [c for c in ssm.list_commands()["Commands"] if rid in (c.get("Comment") or "")]
            if sent:
                # moto's SendCommand also lists every instance of its own EC2 (the group's) as a
                # target when none are given; the block's instances are what capblock sent to.
                instances = sorted(set(sent[0]["InstanceIds"]) & block_instances(r))
                self.commands[rid] = (now, instances, len(sent))
                self.say(now, f"HAND-OFF   Run Command {sent[0]['DocumentName']} {sent[0]['CommandId']} sent to {len(instances)} instance(s) of {rid}")
        while True:
            msgs = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
            if not msgs:
                break
            for m in msgs:
                e = json.loads(m["Body"])
                self.events.append(e)
                d = e["detail"]
                extra = "".join(f" {k}={d[k]}" for k in ("minutes_left", "outcome", "previous_end", "status") if k in d)
                self.say(now, f"EVENT      {e['detail-type']:<15} {d['reservation_id']}{extra}  (capblock -> rule -> SQS)")
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"])

    def schema_check(self):
        """Every event against its JSON Schema (infra/local/validate_events.py)."""
        text = "".join(json.dumps(e) + "\n" for e in self.events)
        out = subprocess.run(
            [os.path.join(os.environ["CAPBLOCK_CACHE"], "venv/bin/python"),
             os.path.join(REPO, "infra/local/validate_events.py"), os.path.join(REPO, "core/schemas/events")],
            input=text, capture_output=True, text=True, check=False,
        )
        if out.returncode != 0:
            print(out.stdout)
        return out.returncode == 0

    def checks(self, state):
        p5 = [r for r in state["reservations"] if (r.get("tags") or {}).get("capblock:rule") == RULE_ID]
        keys = [e["detail"]["event_key"] for e in self.events]
        types = {(e["detail"]["reservation_id"], e["detail-type"]) for e in self.events}
        up_ok = down_ok = command_ok = False
        if len(p5) == 1:
            r = p5[0]
            start, end = dt.datetime.fromisoformat(r["start"]), dt.datetime.fromisoformat(r["end"])
            termination = end - dt.timedelta(minutes=30)
            mine = [(t, d) for t, region, d in self.scaled if region == r["region"]]
            up_ok = any(d == 2 and start <= t < start + dt.timedelta(hours=3) for t, d in mine)
            down_ok = any(d == 0 and end - DOWN_BEFORE_END <= t < termination for t, d in mine)
            sent = self.commands.get(r["reservation_id"])
            command_ok = bool(sent) and end - COMMAND_BEFORE_END <= sent[0] < termination and sent[2] == 1
            print()
            print("==> the hand-off, for p5-weekly's block " + r["reservation_id"])
            for t, d in mine:
                print(f"  {t:%a %m-%d %H:%M}  {GROUP} desired capacity -> {d}")
            if sent:
                print(f"  {sent[0]:%a %m-%d %H:%M}  Run Command {DOCUMENT} to {', '.join(sent[1])}")
            print(f"  termination {termination:%a %m-%d %H:%M}; events: "
                  + ", ".join(sorted(t for rid, t in types if rid == r["reservation_id"])))
        ultra_ids = {r["reservation_id"] for r in state["reservations"]
                     if (r.get("tags") or {}).get("capblock:rule") == GROUP_RULE}
        in_group = any(st == "active" and ultra_ids <= members for _, st, members in self.grouped) if ultra_ids else False
        out_at_end = bool(self.grouped) and not (self.grouped[-1][2] & ultra_ids)
        return [
            ("trn2-ultra's reservation in its capacity reservation group while it ran", in_group),
            ("and out of it once the block ended", out_at_end),
            ("p5-trainers scaled up at the block's start", up_ok),
            ("p5-trainers back to 0 before the end", down_ok),
            ("Run Command sent once, 30 min before termination", command_ok),
            ("each capblock event on the queue once per (block, step)", bool(keys) and len(keys) == len(set(keys))),
            ("all nine detail-types went out", ALL_DETAIL_TYPES <= {t for _, t in types}),
            ("every event matches its JSON Schema", self.schema_check()),
        ]


if __name__ == "__main__":
    setup()
