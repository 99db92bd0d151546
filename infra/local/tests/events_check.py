#!/usr/bin/env python3
"""boto3 check of PutEvents onto another account's bus, which the local stack serves in front of moto.

Starts infra/local/moto_serial.py (moto plus moto_events.py) on a free loopback port with this
interpreter, which must have the stack's requirements (moto, boto3, PyYAML), and plays both
sides of capblock's cross-account events through boto3: member account 111111111111 (reached by
sts:AssumeRole, whose keys moto gives that account) gets a queue, rules on its default bus and
the bus policy member.yaml's CapblockEventsBusPolicy makes (rendered from member.yaml itself,
for capacity account 123456789012); then the capacity account puts events on the member's bus
by ARN. A unittest test: each check a subtest, every failure reported, exit non-zero on any.

    ~/.cache/capblock/venv/bin/python infra/local/tests/events_check.py
"""

import json
import re
import unittest
from pathlib import Path

import boto3
import yaml
from botocore.exceptions import ClientError
from moto_server import MotoTestCase

LOCAL = Path(__file__).resolve().parent.parent
MEMBER_YAML = LOCAL.parent.parent / "member.yaml"
CAPACITY = "123456789012"  # moto's account for the access key "test": capblock's own
MEMBER = "111111111111"
STRANGER = "222222222222"  # a member account whose bus has no policy
PICKY = "333333333333"  # a member account whose policy names detail-types
REGION = "us-east-1"
ORG = "o-capblock01"
STACK = "capblock"


def bus_arn(account: str, name: str = "default") -> str:
    return f"arn:aws:events:{REGION}:{account}:event-bus/{name}"


MEMBER_BUS = bus_arn(MEMBER)


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


def run(test: unittest.TestCase, url: str) -> None:
    capacity = Account(url, CAPACITY, TEST_KEYS)
    member = Account(url, MEMBER, assumed(capacity.sts, f"arn:aws:iam::{MEMBER}:role/anything"))
    with test.subTest("AssumeRole: the member's keys are the member account's"):
        test.assertEqual(member.sts.get_caller_identity()["Account"], MEMBER)

    # The member stack: the bus policy and rule member.yaml makes, plus a queue for a consumer's
    # rule, a catch-all for the capacity account's events and one for the member's own.
    stack = member_stack(MEMBER)
    with test.subTest("member.yaml: CapblockEventsBusPolicy's statement"):
        test.assertEqual(
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
    with test.subTest("member.yaml: the policy is on the default bus"):
        test.assertEqual(stack["bus"], "default")
    member.events.put_permission(EventBusName=stack["bus"], Policy=policy(stack["statement"]))
    stored = json.loads(member.events.describe_event_bus(Name="default").get("Policy", "{}"))
    with test.subTest("PutPermission: moto keeps the member's policy"):
        test.assertEqual(stored.get("Statement"), [stack["statement"]])

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
            with test.subTest(f"{name}: nothing in {queue_name}"):
                test.assertEqual(member.drain(url_), [])
        with test.subTest(f"{name}: nothing on the capacity account's own bus"):
            test.assertEqual(capacity.drain(own), [])

    # 1. Delivered: the capacity account (key "test") puts an event on the member's bus.
    put = capacity.events.put_events(Entries=[entry()])
    with test.subTest("PutEvents to the member's bus: accepted"):
        test.assertEqual(codes(put), ["ok"])
    with test.subTest("PutEvents to the member's bus: FailedEntryCount"):
        test.assertEqual(put["FailedEntryCount"], 0)
    event_id = put["Entries"][0].get("EventId")
    got = member.drain(consumer)
    with test.subTest("the member's consumer queue: the event"):
        test.assertEqual(
            [(e.get("id"), e.get("source"), e.get("detail-type"), e.get("detail")) for e in got],
            [(event_id, "capblock", "Block Active", {"reservation": "cr-0123456789abcdef0"})],
        )
    whole = [e.get("event", {}) for e in member.drain(envelope)]
    with test.subTest("the event carries the sender's account (and the region)"):
        test.assertEqual(
            [(e.get("id"), e.get("account"), e.get("region")) for e in whole], [(event_id, CAPACITY, REGION)]
        )
    with test.subTest("member.yaml's rule (account = the capacity account) matched it"):
        test.assertEqual(logged(), [event_id])
    with test.subTest("the member's catch-all for the capacity account: the event"):
        test.assertEqual([e.get("id") for e in member.drain(from_capacity)], [event_id])
    with test.subTest("the member's rule for its own account's events: nothing"):
        test.assertEqual(member.drain(from_member), [])
    with test.subTest("the capacity account's own bus: nothing"):
        test.assertEqual(capacity.drain(own), [])

    # 2. A source the policy does not allow: refused, per entry, and it reaches nothing.
    put = capacity.events.put_events(Entries=[entry(source="not-capblock")])
    with test.subTest("a source not allowed: AccessDeniedException"):
        test.assertEqual(codes(put), ["AccessDeniedException"])
    with test.subTest("a source not allowed: FailedEntryCount"):
        test.assertEqual(put["FailedEntryCount"], 1)
    message = put["Entries"][0].get("ErrorMessage", "")
    with test.subTest("a source not allowed: the message names the caller, the bus and the policy"):
        test.assertTrue(
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
    with test.subTest("a capacity-stack role: accepted"):
        test.assertEqual(codes(put), ["ok"])
    with test.subTest("a capacity-stack role: the event reaches the consumer"):
        test.assertEqual(
            [(e.get("id"), e.get("detail-type")) for e in member.drain(consumer)],
            [(put["Entries"][0].get("EventId"), "Block Ending")],
        )
    member.drain(from_capacity)
    put = other_role.events.put_events(Entries=[entry()])
    with test.subTest("a role outside the capacity stack: AccessDeniedException"):
        test.assertEqual(codes(put), ["AccessDeniedException"])
    with test.subTest("a role outside the capacity stack: the message names the role's session"):
        test.assertTrue(
            "assumed-role/other-TrackBlocksRole-1A2B3C4D5E6F/events-check"
            in put["Entries"][0].get("ErrorMessage", ""),
            repr(put["Entries"]),
        )
    nothing_arrives("a role outside the capacity stack")

    # 4. An account whose bus has no policy.
    stranger = Account(url, STRANGER, assumed(capacity.sts, f"arn:aws:iam::{STRANGER}:role/anything"))
    stranger_queue = stranger.rule_to_queue("everything", {"source": ["capblock"]})
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(STRANGER))])
    with test.subTest("a bus with no policy: AccessDeniedException"):
        test.assertEqual(codes(put), ["AccessDeniedException"])
    with test.subTest("a bus with no policy: FailedEntryCount"):
        test.assertEqual(put["FailedEntryCount"], 1)
    with test.subTest("a bus with no policy: nothing in its queue"):
        test.assertEqual(stranger.drain(stranger_queue), [])
    nothing_arrives("a bus with no policy")
    other = {
        **stack["statement"],
        "Principal": {"AWS": "arn:aws:iam::444444444444:root"},
        "Resource": bus_arn(STRANGER),
    }
    stranger.events.put_permission(EventBusName="default", Policy=policy(other))
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(STRANGER))])
    with test.subTest("a policy for another account only: AccessDeniedException"):
        test.assertEqual(codes(put), ["AccessDeniedException"])
    with test.subTest("a policy for another account only: nothing in its queue"):
        test.assertEqual(stranger.drain(stranger_queue), [])

    # 5. A bus that does not exist in the member account.
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(MEMBER, "capblock-missing"))])
    with test.subTest("a bus that does not exist: ResourceNotFoundException"):
        test.assertEqual(
            [(e.get("ErrorCode"), e.get("ErrorMessage")) for e in put["Entries"]],
            [("ResourceNotFoundException", "Event bus capblock-missing does not exist.")],
        )
    with test.subTest("a bus that does not exist: FailedEntryCount"):
        test.assertEqual(put["FailedEntryCount"], 1)
    nothing_arrives("a bus that does not exist")
    put = capacity.events.put_events(Entries=[entry(bus=MEMBER_BUS.replace(REGION, "xx-nowhere-1"))])
    with test.subTest("a bus in a region that does not exist: ResourceNotFoundException"):
        test.assertEqual(codes(put), ["ResourceNotFoundException"])

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
    with test.subTest("a mixed request: each entry's answer in its place"):
        test.assertEqual(
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
    with test.subTest("a mixed request: FailedEntryCount (moto's and the layer's)"):
        test.assertEqual(put["FailedEntryCount"], 4)
    ids = [e.get("EventId") for e in put["Entries"]]
    with test.subTest("a mixed request: the capacity account's own bus got its two"):
        test.assertEqual(
            sorted((e.get("id"), e.get("detail-type")) for e in capacity.drain(own)),
            sorted([(ids[0], "Own One"), (ids[4], "Own Two")]),
        )
    with test.subTest("a mixed request: the member got its two"):
        test.assertEqual(
            sorted((e.get("id"), e.get("detail-type")) for e in member.drain(consumer)),
            sorted([(ids[1], "Member One"), (ids[6], "Member Two")]),
        )
    with test.subTest("a mixed request: the event ids are distinct"):
        test.assertEqual(len(set(ids) - {None}), 4)
    member.drain(from_capacity)

    # 7. What stays moto's: a request with no other account's bus, and moto's whole-request errors.
    put = capacity.events.put_events(Entries=[entry(bus="default"), entry(bus=bus_arn(CAPACITY))])
    with test.subTest("only the caller's own bus: moto answers"):
        test.assertEqual((codes(put), put["FailedEntryCount"]), (["ok", "ok"], 0))
    with test.subTest("only the caller's own bus: both on its own bus"):
        test.assertEqual(len(capacity.drain(own)), 2)
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
            with test.subTest(f"{name}: moto refuses the request"):
                test.fail(f"answered {got!r}")
        except ClientError as e:
            with test.subTest(f"{name}: moto refuses the request"):
                test.assertEqual(e.response["Error"]["Code"], code)
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
    with test.subTest("events:detail-type: allowed, denied explicitly, not allowed"):
        test.assertEqual(codes(put), ["ok", "AccessDeniedException", "AccessDeniedException"])
    with test.subTest("events:detail-type: the explicit deny says so"):
        test.assertTrue("explicit deny" in put["Entries"][1].get("ErrorMessage", ""), repr(put["Entries"][1]))
    with test.subTest("events:detail-type: only the allowed one arrives"):
        test.assertEqual([e.get("detail-type") for e in picky.drain(picky_queue)], ["Block Active"])
    picky.events.remove_permission(EventBusName="default", RemoveAllPermissions=True)
    picky.events.put_permission(
        EventBusName="default", Action="events:PutEvents", Principal=CAPACITY, StatementId="capacity"
    )
    put = capacity.events.put_events(Entries=[entry(bus=bus_arn(PICKY), detail_type="Block Expired")])
    with test.subTest("PutPermission with Principal = the capacity account: accepted"):
        test.assertEqual(codes(put), ["ok"])
    with test.subTest("PutPermission with Principal = the capacity account: it arrives"):
        test.assertEqual(len(picky.drain(picky_queue)), 1)
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
    with test.subTest("a Deny outside the Organization, no Organization in moto: accepted"):
        test.assertEqual(codes(put), ["ok"])
    with test.subTest("a Deny outside the Organization, no Organization in moto: it arrives"):
        test.assertEqual(len(picky.drain(picky_queue)), 1)

    # 9. Once moto has an Organization for the capacity account, aws:PrincipalOrgID must name it.
    organization = boto3.client("organizations", endpoint_url=url, region_name=REGION, **TEST_KEYS)
    org_id = organization.create_organization(FeatureSet="ALL")["Organization"]["Id"]
    put = capacity.events.put_events(Entries=[entry()])
    with test.subTest(f"an Organization ({org_id}) other than the policy's ({ORG}): AccessDeniedException"):
        test.assertEqual(codes(put), ["AccessDeniedException"])
    nothing_arrives("an Organization other than the policy's")
    member.events.put_permission(
        EventBusName="default", Policy=policy(member_stack(MEMBER, org_id)["statement"])
    )
    put = capacity.events.put_events(Entries=[entry()])
    with test.subTest("the policy names the capacity account's Organization: accepted"):
        test.assertEqual(codes(put), ["ok"])
    with test.subTest("the policy names the capacity account's Organization: it arrives"):
        test.assertEqual([e.get("id") for e in member.drain(consumer)], [put["Entries"][0].get("EventId")])
    with test.subTest("moto's answer shape throughout"):
        test.assertEqual(sorted(answer(put)), ["Entries", "FailedEntryCount"])


class EventsCheck(MotoTestCase):
    def test_put_events_onto_member_buses(self) -> None:
        """PutEvents onto member accounts' buses, as member.yaml's policy allows, through the layer."""
        run(self, self.url)


if __name__ == "__main__":
    unittest.main()
