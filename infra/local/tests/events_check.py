#!/usr/bin/env python3
"""boto3 check of PutEvents onto another account's bus, which the local stack serves in front of moto.

Starts infra/local/moto_serial.py (moto plus moto_events.py) on a free loopback port with this
interpreter, which must have the stack's requirements (moto, boto3, PyYAML), and plays both
sides of capblock's cross-account events through boto3: member account 111111111111 (reached by
sts:AssumeRole, whose keys moto gives that account) gets a queue, rules on its default bus and
the bus policy member.yaml's CapblockEventsBusPolicy makes (rendered from member.yaml itself,
for capacity account 123456789012); then the capacity account puts events on the member's bus
by ARN. Prints `N passed, M failed` last and exits non-zero on any mismatch.

    ~/.cache/capblock/venv/bin/python infra/local/tests/events_check.py
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import boto3
import yaml
from botocore.exceptions import ClientError
from moto_server import start

LOCAL = Path(__file__).resolve().parent.parent
MEMBER_YAML = LOCAL.parent.parent / "member.yaml"
CAPACITY = "123456789012"  # moto's account for the access key "test": capblock's own
MEMBER = "111111111111"
STRANGER = "222222222222"  # a member account whose bus has no policy
PICKY = "333333333333"  # a member account whose policy names detail-types
REGION = "us-east-1"
ORG = "o-capblock01"
STACK = "capblock"
PASSED = 0
FAILED = 0


def bus_arn(account: str, name: str = "default") -> str:
    return f"arn:aws:events:{REGION}:{account}:event-bus/{name}"


MEMBER_BUS = bus_arn(MEMBER)


def check(name: str, cond: bool, detail: str = "") -> None:
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print(f"FAIL: {name}" + (f" -- {detail}" if detail else ""), file=sys.stderr)


def eq(name: str, got, want) -> None:
    check(name, got == want, f"got {got!r}, want {want!r}")


# ---------------------------------------------------------------- member.yaml, rendered


class Tagged:
    def __init__(self, tag: str, value) -> None:
        self.tag, self.value = tag, value


def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Tagged:
    if isinstance(node, yaml.ScalarNode):
        return Tagged(suffix, loader.construct_scalar(node))
    if isinstance(node, yaml.SequenceNode):
        return Tagged(suffix, loader.construct_sequence(node, deep=True))
    return Tagged(suffix, loader.construct_mapping(node, deep=True))


class TemplateLoader(yaml.SafeLoader):
    pass


TemplateLoader.add_multi_constructor("!", tagged)


def render(node, params: dict[str, str]):
    """The value CloudFormation gives a template node: !Ref and !Sub (string form) only."""
    if isinstance(node, Tagged):
        if node.tag == "Ref":
            return params[node.value]
        if node.tag == "Sub" and isinstance(node.value, str):
            return re.sub(r"\$\{([^}!]+)\}", lambda m: params[m.group(1)], node.value)
        raise ValueError(f"member.yaml: !{node.tag} is not rendered by this check")
    if isinstance(node, dict):
        return {k: render(v, params) for k, v in node.items()}
    if isinstance(node, list):
        return [render(v, params) for v in node]
    return node


def member_stack(account: str, organization: str = ORG) -> dict:
    """member.yaml's resources as CloudFormation would make them in `account`."""
    params = {
        "AWS::Partition": "aws",
        "AWS::Region": REGION,
        "AWS::AccountId": account,
        "CapacityAccountId": CAPACITY,
        "OrganizationId": organization,
        "CapacityStackName": STACK,
    }
    resources = yaml.load(MEMBER_YAML.read_text(), Loader=TemplateLoader)["Resources"]
    policy = resources["CapblockEventsBusPolicy"]["Properties"]
    rule = resources["CapblockEventsRule"]["Properties"]
    return {
        # AWS::Events::EventBusPolicy's StatementId becomes the statement's Sid.
        "statement": {"Sid": render(policy["StatementId"], params), **render(policy["Statement"], params)},
        "bus": policy["EventBusName"],
        "pattern": render(rule["EventPattern"], params),
    }


def policy(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


# ---------------------------------------------------------------- clients and queues


def keys(credentials: dict) -> dict:
    return {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
    }


TEST_KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


def entry(source: str = "capblock", detail_type: str = "Block Active", bus: str = MEMBER_BUS, **more) -> dict:
    return {
        "Source": source,
        "DetailType": detail_type,
        "Detail": json.dumps({"reservation": "cr-0123456789abcdef0"}),
        "EventBusName": bus,
        **more,
    }


def answer(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def codes(response: dict) -> list[str]:
    """Each entry's ErrorCode, or "ok" for one with an EventId."""
    return [e.get("ErrorCode", "ok" if e.get("EventId") else "?") for e in response["Entries"]]


class Account:
    def __init__(self, url: str, account: str, credentials: dict) -> None:
        self.account = account

        def client(service: str):
            return boto3.client(service, endpoint_url=url, region_name=REGION, **credentials)

        self.events, self.sqs, self.logs, self.sts = (
            client("events"),
            client("sqs"),
            client("logs"),
            client("sts"),
        )

    def queue(self, name: str) -> tuple[str, str]:
        url = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        return url, arn

    def rule_to_queue(self, name: str, pattern: dict, transformer: dict | None = None) -> str:
        """A rule on the default bus whose one target is a new queue of the same name."""
        url, arn = self.queue(name)
        self.events.put_rule(Name=name, EventPattern=json.dumps(pattern))
        target = {"Id": "queue", "Arn": arn, **({"InputTransformer": transformer} if transformer else {})}
        self.events.put_targets(Rule=name, Targets=[target])
        return url

    def drain(self, url: str) -> list[dict]:
        """Every message in the queue, as JSON, taken out."""
        bodies = []
        while True:
            got = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = got.get("Messages", [])
            if not messages:
                return bodies
            for m in messages:
                bodies.append(json.loads(m["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def assumed(sts, role_arn: str) -> dict:
    credentials = sts.assume_role(RoleArn=role_arn, RoleSessionName="events-check")["Credentials"]
    return keys(credentials)


# ---------------------------------------------------------------- the server


def run(url: str) -> None:
    capacity = Account(url, CAPACITY, TEST_KEYS)
    member = Account(url, MEMBER, assumed(capacity.sts, f"arn:aws:iam::{MEMBER}:role/anything"))
    eq(
        "AssumeRole: the member's keys are the member account's",
        member.sts.get_caller_identity()["Account"],
        MEMBER,
    )

    # The member stack: the bus policy and rule member.yaml makes, plus a queue for a consumer's
    # rule, a catch-all for the capacity account's events and one for the member's own.
    stack = member_stack(MEMBER)
    eq(
        "member.yaml: CapblockEventsBusPolicy's statement",
        stack["statement"],
        {
            "Sid": "capblock-capblock",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{CAPACITY}:root"},
            "Action": "events:PutEvents",
            "Resource": MEMBER_BUS,
            "Condition": {
                "StringEquals": {"aws:PrincipalOrgID": ORG},
                "ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{CAPACITY}:role/{STACK}-*"},
                "ForAllValues:StringEquals": {"events:source": ["capblock"]},
            },
        },
    )
    eq("member.yaml: the policy is on the default bus", stack["bus"], "default")
    member.events.put_permission(EventBusName=stack["bus"], Policy=policy(stack["statement"]))
    stored = json.loads(member.events.describe_event_bus(Name="default").get("Policy", "{}"))
    eq("PutPermission: moto keeps the member's policy", stored.get("Statement"), [stack["statement"]])

    consumer = member.rule_to_queue("capblock-consumer", {"source": ["capblock"]})
    from_capacity = member.rule_to_queue("from-capacity", {"account": [CAPACITY]})
    from_member = member.rule_to_queue("from-member", {"account": [MEMBER]})
    envelope = member.rule_to_queue(
        "capblock-envelope",
        {"source": ["capblock"]},
        {"InputPathsMap": {"id": "$.id"}, "InputTemplate": '{"event": <aws.events.event.json>}'},
    )
    log_group = f"/aws/events/capblock-{STACK}"
    member.logs.create_log_group(logGroupName=log_group)
    member.events.put_rule(Name=f"capblock-{STACK}-events", EventPattern=json.dumps(stack["pattern"]))
    member.events.put_targets(
        Rule=f"capblock-{STACK}-events",
        Targets=[{"Id": "log", "Arn": f"arn:aws:logs:{REGION}:{MEMBER}:log-group:{log_group}"}],
    )
    # The capacity account's own default bus: every event put on it lands here.
    own = capacity.rule_to_queue("capacity-own", {"account": [CAPACITY]})

    def logged() -> list[str]:
        found = member.logs.filter_log_events(logGroupName=log_group)["events"]
        return [json.loads(e["message"])["id"] for e in found]

    def nothing_arrives(name: str) -> None:
        for queue_name, url_ in (
            ("the consumer's queue", consumer),
            ("the member's catch-all", from_capacity),
        ):
            eq(f"{name}: nothing in {queue_name}", member.drain(url_), [])
        eq(f"{name}: nothing on the capacity account's own bus", capacity.drain(own), [])

    # 1. Delivered: the capacity account (key "test") puts an event on the member's bus.
    put = capacity.events.put_events(Entries=[entry()])
    eq("PutEvents to the member's bus: accepted", codes(put), ["ok"])
    eq("PutEvents to the member's bus: FailedEntryCount", put["FailedEntryCount"], 0)
    event_id = put["Entries"][0].get("EventId")
    got = member.drain(consumer)
    eq(
        "the member's consumer queue: the event",
        [(e.get("id"), e.get("source"), e.get("detail-type"), e.get("detail")) for e in got],
        [(event_id, "capblock", "Block Active", {"reservation": "cr-0123456789abcdef0"})],
    )
    whole = [e.get("event", {}) for e in member.drain(envelope)]
    eq(
        "the event carries the sender's account (and the region)",
        [(e.get("id"), e.get("account"), e.get("region")) for e in whole],
        [(event_id, CAPACITY, REGION)],
    )
    eq("member.yaml's rule (account = the capacity account) matched it", logged(), [event_id])
    eq(
        "the member's catch-all for the capacity account: the event",
        [e.get("id") for e in member.drain(from_capacity)],
        [event_id],
    )
    eq("the member's rule for its own account's events: nothing", member.drain(from_member), [])
    eq("the capacity account's own bus: nothing", capacity.drain(own), [])

    # 2. A source the policy does not allow: refused, per entry, and it reaches nothing.
    put = capacity.events.put_events(Entries=[entry(source="not-capblock")])
    eq("a source not allowed: AccessDeniedException", codes(put), ["AccessDeniedException"])
    eq("a source not allowed: FailedEntryCount", put["FailedEntryCount"], 1)
    message = put["Entries"][0].get("ErrorMessage", "")
    check(
        "a source not allowed: the message names the caller, the bus and the policy",
        f"arn:aws:sts::{CAPACITY}:" in message
        and MEMBER_BUS in message
        and "no resource-based policy allows" in message,
        repr(message),
    )
    nothing_arrives("a source not allowed")

    # 3. aws:PrincipalArn: a capacity-stack role (<stack>-*) may, another role may not.
    stack_role = Account(
        url,
        CAPACITY,
        assumed(capacity.sts, f"arn:aws:iam::{CAPACITY}:role/{STACK}-TrackBlocksRole-1A2B3C4D5E6F"),
    )
    other_role = Account(
        url,
        CAPACITY,
        assumed(capacity.sts, f"arn:aws:iam::{CAPACITY}:role/other-TrackBlocksRole-1A2B3C4D5E6F"),
    )
    put = stack_role.events.put_events(Entries=[entry(detail_type="Block Ending")])
    eq("a capacity-stack role: accepted", codes(put), ["ok"])
    eq(
        "a capacity-stack role: the event reaches the consumer",
        [(e.get("id"), e.get("detail-type")) for e in member.drain(consumer)],
        [(put["Entries"][0].get("EventId"), "Block Ending")],
    )
    member.drain(from_capacity)
    put = other_role.events.put_events(Entries=[entry()])
    eq("a role outside the capacity stack: AccessDeniedException", codes(put), ["AccessDeniedException"])
    check(
        "a role outside the capacity stack: the message names the role's session",
        "assumed-role/other-TrackBlocksRole-1A2B3C4D5E6F/events-check"
        in put["Entries"][0].get("ErrorMessage", ""),
        repr(put["Entries"]),
    )
    nothing_arrives("a role outside the capacity stack")

    # 4. An account whose bus has no policy.
    stranger = Account(url, STRANGER, assumed(capacity.sts, f"arn:aws:iam::{STRANGER}:role/anything"))
    stranger_queue = stranger.rule_to_queue("everything", {"source": ["capblock"]})
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(STRANGER))])
    eq("a bus with no policy: AccessDeniedException", codes(put), ["AccessDeniedException"])
    eq("a bus with no policy: FailedEntryCount", put["FailedEntryCount"], 1)
    eq("a bus with no policy: nothing in its queue", stranger.drain(stranger_queue), [])
    nothing_arrives("a bus with no policy")
    other = {
        **stack["statement"],
        "Principal": {"AWS": "arn:aws:iam::444444444444:root"},
        "Resource": bus_arn(STRANGER),
    }
    stranger.events.put_permission(EventBusName="default", Policy=policy(other))
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(STRANGER))])
    eq("a policy for another account only: AccessDeniedException", codes(put), ["AccessDeniedException"])
    eq("a policy for another account only: nothing in its queue", stranger.drain(stranger_queue), [])

    # 5. A bus that does not exist in the member account.
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(MEMBER, "capblock-missing"))])
    eq(
        "a bus that does not exist: ResourceNotFoundException",
        [(e.get("ErrorCode"), e.get("ErrorMessage")) for e in put["Entries"]],
        [("ResourceNotFoundException", "Event bus capblock-missing does not exist.")],
    )
    eq("a bus that does not exist: FailedEntryCount", put["FailedEntryCount"], 1)
    nothing_arrives("a bus that does not exist")
    put = capacity.events.put_events(Entries=[entry(bus=MEMBER_BUS.replace(REGION, "xx-nowhere-1"))])
    eq(
        "a bus in a region that does not exist: ResourceNotFoundException",
        codes(put),
        ["ResourceNotFoundException"],
    )

    # 6. One request, the capacity account's own bus and the member's mixed: order and counts.
    put = capacity.events.put_events(
        Entries=[
            entry(bus="default", detail_type="Own One"),
            entry(detail_type="Member One"),
            entry(source="not-capblock"),
            entry(bus=bus_arn(MEMBER, "capblock-missing")),
            entry(bus=bus_arn(CAPACITY), detail_type="Own Two"),
            {**entry(), "Detail": "{not json"},
            entry(detail_type="Member Two"),
            {k: v for k, v in entry(bus="default").items() if k != "Source"},
        ]
    )
    eq(
        "a mixed request: each entry's answer in its place",
        codes(put),
        [
            "ok",
            "ok",
            "AccessDeniedException",
            "ResourceNotFoundException",
            "ok",
            "MalformedDetail",
            "ok",
            "InvalidArgument",
        ],
    )
    eq("a mixed request: FailedEntryCount (moto's and the layer's)", put["FailedEntryCount"], 4)
    ids = [e.get("EventId") for e in put["Entries"]]
    eq(
        "a mixed request: the capacity account's own bus got its two",
        sorted((e.get("id"), e.get("detail-type")) for e in capacity.drain(own)),
        sorted([(ids[0], "Own One"), (ids[4], "Own Two")]),
    )
    eq(
        "a mixed request: the member got its two",
        sorted((e.get("id"), e.get("detail-type")) for e in member.drain(consumer)),
        sorted([(ids[1], "Member One"), (ids[6], "Member Two")]),
    )
    eq("a mixed request: the event ids are distinct", len(set(ids) - {None}), 4)
    member.drain(from_capacity)

    # 7. What stays moto's: a request with no other account's bus, and moto's whole-request errors.
    put = capacity.events.put_events(Entries=[entry(bus="default"), entry(bus=bus_arn(CAPACITY))])
    eq("only the caller's own bus: moto answers", (codes(put), put["FailedEntryCount"]), (["ok", "ok"], 0))
    eq("only the caller's own bus: both on its own bus", len(capacity.drain(own)), 2)
    for name, entries, code in (
        (
            "a bus of the caller's own that does not exist",
            [entry(bus="capblock-missing"), entry()],
            "ResourceNotFoundException",
        ),
        ("eleven entries", [entry(bus="default")] * 5 + [entry()] * 6, "ValidationException"),
    ):
        try:
            got = capacity.events.put_events(Entries=entries)
            check(f"{name}: moto refuses the request", False, f"answered {got!r}")
        except ClientError as e:
            eq(f"{name}: moto refuses the request", e.response["Error"]["Code"], code)
        nothing_arrives(name)

    # 8. A policy on detail-types, with a Deny: put through PutPermission's own parameters too.
    picky = Account(url, PICKY, assumed(capacity.sts, f"arn:aws:iam::{PICKY}:role/anything"))
    picky_queue = picky.rule_to_queue("everything", {"source": ["capblock"]})
    picky.events.put_permission(
        EventBusName="default",
        Policy=policy(
            {
                "Sid": "capacity-block-events",
                "Effect": "Allow",
                "Principal": {"AWS": CAPACITY},
                "Action": ["events:PutEvents"],
                "Resource": bus_arn(PICKY),
                "Condition": {"StringEquals": {"events:detail-type": ["Block Active", "Block Ending"]}},
            },
            {
                "Sid": "no-ending",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "events:*",
                "Resource": bus_arn(PICKY),
                "Condition": {"StringLike": {"events:detail-type": "*Ending"}},
            },
        ),
    )
    put = capacity.events.put_events(
        Entries=[
            entry(bus=bus_arn(PICKY)),
            entry(bus=bus_arn(PICKY), detail_type="Block Ending"),
            entry(bus=bus_arn(PICKY), detail_type="Block Expired"),
        ]
    )
    eq(
        "events:detail-type: allowed, denied explicitly, not allowed",
        codes(put),
        ["ok", "AccessDeniedException", "AccessDeniedException"],
    )
    check(
        "events:detail-type: the explicit deny says so",
        "explicit deny" in put["Entries"][1].get("ErrorMessage", ""),
        repr(put["Entries"][1]),
    )
    eq(
        "events:detail-type: only the allowed one arrives",
        [e.get("detail-type") for e in picky.drain(picky_queue)],
        ["Block Active"],
    )
    picky.events.remove_permission(EventBusName="default", RemoveAllPermissions=True)
    picky.events.put_permission(
        EventBusName="default", Action="events:PutEvents", Principal=CAPACITY, StatementId="capacity"
    )
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(PICKY), detail_type="Block Expired")])
    eq("PutPermission with Principal = the capacity account: accepted", codes(put), ["ok"])
    eq("PutPermission with Principal = the capacity account: it arrives", len(picky.drain(picky_queue)), 1)
    # With no Organization in moto, the sender is taken to be in the one a condition names.
    picky.events.put_permission(
        EventBusName="default",
        Policy=policy(
            {
                "Sid": "organization-only",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "events:PutEvents",
                "Resource": bus_arn(PICKY),
                "Condition": {"StringNotEquals": {"aws:PrincipalOrgID": ORG}},
            }
        ),
    )
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(PICKY))])
    eq("a Deny outside the Organization, no Organization in moto: accepted", codes(put), ["ok"])
    eq(
        "a Deny outside the Organization, no Organization in moto: it arrives",
        len(picky.drain(picky_queue)),
        1,
    )

    # 9. Once moto has an Organization for the capacity account, aws:PrincipalOrgID must name it.
    organization = boto3.client("organizations", endpoint_url=url, region_name=REGION, **TEST_KEYS)
    org_id = organization.create_organization(FeatureSet="ALL")["Organization"]["Id"]
    put = capacity.events.put_events(Entries=[entry()])
    eq(
        f"an Organization ({org_id}) other than the policy's ({ORG}): AccessDeniedException",
        codes(put),
        ["AccessDeniedException"],
    )
    nothing_arrives("an Organization other than the policy's")
    member.events.put_permission(
        EventBusName="default", Policy=policy(member_stack(MEMBER, org_id)["statement"])
    )
    put = capacity.events.put_events(Entries=[entry()])
    eq("the policy names the capacity account's Organization: accepted", codes(put), ["ok"])
    eq(
        "the policy names the capacity account's Organization: it arrives",
        [e.get("id") for e in member.drain(consumer)],
        [put["Entries"][0].get("EventId")],
    )
    eq("moto's answer shape throughout", sorted(answer(put)), ["Entries", "FailedEntryCount"])


def main() -> int:
    with tempfile.TemporaryFile() as log:
        server, url = start(log)
        try:
            run(url)
        except Exception as e:  # noqa: BLE001 - any crash is a failed check, with moto's log
            check("the check ran to its end", False, f"{type(e).__name__}: {e}")
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if FAILED:
            log.seek(0)
            print("moto_serial.py's log (last 40 lines):", file=sys.stderr)
            for line in log.read().decode(errors="replace").splitlines()[-40:]:
                print("  " + line, file=sys.stderr)
    print(f"events_check: {PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
