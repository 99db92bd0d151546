"""EventBridge PutEvents onto another account's event bus, in front of moto.

capblock puts the events of a Capacity Block shared with a member account on that account's
default bus: PutEvents with `EventBusName` = `arn:aws:events:REGION:MEMBER:event-bus/default`.
moto 5.2.5 keeps only the bus name of such an ARN (`EventsBackend._normalize_event_bus_arn`) and
puts the event on the caller's own bus of that name, so the member's rules never see it. This
WSGI layer takes PutEvents (JSON 1.1, `X-Amz-Target: AWSEvents.PutEvents`) apart: an entry whose
`EventBusName` is an event-bus ARN naming an account other than the caller's is delivered here,
into the backend of the account and region the ARN names; every other entry goes to moto as it
came, and a request with none of the first kind reaches moto untouched. moto_serial.py runs it
under its one lock.

What it follows:
- The caller is who moto says it is: the account moto serves the request from (moto's own
  `get_current_account`: the access key, so an `sts:AssumeRole` key is the role's account), and
  for messages the ARN moto's GetCallerIdentity gives that key.
- A bus in another account takes PutEvents only as its resource-based policy allows
  (EventBridge user guide, "Permissions for Amazon EventBridge event buses" and "Sending and
  receiving Amazon EventBridge events between AWS accounts"). moto keeps a bus's policy from
  PutPermission, with or without `Policy` (`EventBus._statements`, read through `EventBus.policy`).
  The statements are evaluated as IAM evaluates a resource-based policy: an applying `Deny`
  refuses, else an applying `Allow` admits, else the entry is refused. A statement applies when
  its `Principal` names the caller (`*`, `{"AWS": "*"}`, the account id, the account's `root`
  ARN, the caller's role or user ARN, or moto's `arn:aws:iam::*:root`, which is how moto stores
  PutPermission's `Principal: "*"`), its `Action` covers `events:PutEvents` (wildcards, any
  case), its `Resource` covers the bus ARN, and each condition holds (`NotPrincipal`,
  `NotAction`, `NotResource` are their negations).
- Conditions: the String* and Arn* operators (`StringEquals`, `StringNotEquals`,
  `StringEqualsIgnoreCase`, `StringNotEqualsIgnoreCase`, `StringLike`, `StringNotLike`,
  `ArnEquals`, `ArnLike`, `ArnNotEquals`, `ArnNotLike`), each also with `IfExists` and with the
  `ForAllValues:` / `ForAnyValue:` qualifiers, on the keys `events:source` and
  `events:detail-type` (the entry's Source and DetailType), `aws:PrincipalAccount`,
  `aws:PrincipalArn` and `aws:PrincipalOrgID`; a key the request does not carry behaves as IAM
  says (no match, except with `IfExists`, a negated operator or `ForAllValues:`).
- A refused entry fails on its own, inside a 200 answer: ErrorCode `AccessDeniedException`
  (PutEventsResultEntry's "You do not have sufficient access to perform this action"), with
  IAM's message form "User: ARN is not authorized to perform: events:PutEvents on resource: BUS
  because no resource-based policy allows the events:PutEvents action" (or "with an explicit
  deny in a resource-based policy"), and `FailedEntryCount` counts it.
- An admitted entry is put on the target bus the way moto puts its own events
  (`EventsBackend.put_events`): the same checks of Source, DetailType and Detail with moto's
  codes and messages, the same event, and every rule of the bus given it
  (`Rule.send_to_targets`), so a rule's SQS queue, log group or archive in the member account
  receives it. Its `account` is the sender's (the user guide: a rule with `account` in its
  pattern does not match "events sent from accounts that are not listed"; member.yaml's rule
  matches `account: [CapacityAccountId]`) and its `region` the caller's ("the AWS Region where
  the event originated").
- The answer keeps the request's order: `Entries` holds moto's answers and this layer's at
  their entries' places, `FailedEntryCount` is the sum. A request of more than ten entries goes
  to moto untouched, which refuses it; when moto refuses its part of a request as a whole (a bus
  of the caller's own that moto does not have), that refusal is the answer and no entry of
  another account is delivered.

Where the record is silent, or disagrees, this layer reads it one way (infra/local/README.md
lists them):
- A bus that does not exist in the account and region the ARN names fails the entry with
  ErrorCode `ResourceNotFoundException` and moto's message "Event bus NAME does not exist.".
  PutEventsResultEntry lists no such code, and AWS has been reported answering success for a
  missing bus of the caller's own (aws/aws-cli#9186, aws/aws-sdk#186): this reading makes a
  wrong ARN show here rather than vanish.
- `aws:PrincipalOrgID` is the caller's organization when moto's Organizations backend has one
  for the caller's account (as management or member account); when it has none, the local
  stack's Organization is read as "every account": the key is taken to be the value the
  condition names (`StringEquals` holds, `StringNotEquals` does not).
- `aws:PrincipalArn` is the role of an assumed-role key (`arn:aws:iam::ACCOUNT:role/NAME`) or
  the IAM user of a user key; a key moto does not know (the stack's `test`) stands for the
  capacity stack's own roles, and the key is taken to be the value the condition names.
- An operator outside the list above (Bool, Numeric*, Date*, IpAddress, Null, ...) is not
  evaluated: it fails an `Allow` and keeps a `Deny`, so the layer errs on refusing. A key outside
  the list (`aws:SourceArn`, ...) is one the request does not carry, and policy variables
  (`${aws:PrincipalAccount}`) are compared as plain text.

Not modelled: the sender's own IAM policies (moto checks none), a bus's KMS key, `aws:SourceArn`
of events forwarded by rules (those go through moto's own rule targets), and the event bus
endpoints of global endpoints. Within a request, moto delivers its entries before this layer
delivers the others.
"""

import copy
import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from io import BytesIO
from typing import Any

from moto.core.utils import unix_time
from moto.events.models import EventBus, events_backends
from moto.events.responses import EventsHandler
from moto.events.utils import _BASE_EVENT_MESSAGE
from moto.iam.models import iam_backends
from moto.moto_api._internal import mock_random
from moto.organizations.models import organizations_backends
from moto.sts.models import sts_backends
from moto.utilities.utils import get_partition
from werkzeug.wrappers import Request

Json = dict[str, Any]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

TARGET = "AWSEvents.PutEvents"
ACTION = "events:PutEvents"
MAX_ENTRIES = 10  # moto refuses more, for the whole request; it keeps that answer
BUS_ARN = re.compile(r"arn:(aws[a-z-]*):events:([a-z0-9-]+):(\d{12}):event-bus/([^/]+)")


# A request-context value the layer cannot know: read as the value each condition names.
ANY = object()


@dataclass(frozen=True)
class Caller:
    account: str
    region: str
    partition: str
    identity: str  # the ARN moto's GetCallerIdentity gives the key, for messages
    principal: str | None  # aws:PrincipalArn, when moto knows the key
    organization: str | None  # aws:PrincipalOrgID, when moto has an organization for the account


def organization(account: str, partition: str) -> str | None:
    """The id of the organization moto's Organizations backend has the account in, if any."""
    owner, owner_partition = organizations_backends.master_accounts.get(account, (account, partition))
    org = organizations_backends[owner][owner_partition].org
    return org.id if org else None


def principal_arn(account: str, partition: str, access_key: str) -> str | None:
    """aws:PrincipalArn of an access key moto issued: the role it was assumed from, or its user."""
    iam = iam_backends[account][partition]
    key = iam.access_keys.get(access_key)
    if key is not None and key.role_arn:
        return key.role_arn
    if key is not None and key.user_name in iam.users:
        return iam.users[key.user_name].arn
    return None


def caller(request: Request) -> Caller:
    """Who moto itself would say sends this request, and from which region."""
    probe = EventsHandler()
    probe.headers = request.headers
    probe.querystring = {}
    account = probe.get_current_account()
    region = probe.get_region_from_url(request, request.url)
    partition = get_partition(region)
    access_key = probe.get_access_key()
    _, identity, _ = sts_backends[account][partition].get_caller_identity(access_key, region)
    return Caller(
        account=account,
        region=region,
        partition=partition,
        identity=identity,
        principal=principal_arn(account, partition, access_key),
        organization=organization(account, partition),
    )


def other_account_bus(entry: Any, account: str) -> re.Match[str] | None:
    """The bus ARN of an entry meant for another account's bus, else None (moto's entry)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("EventBusName"), str):
        return None
    arn = BUS_ARN.fullmatch(entry["EventBusName"])
    return arn if arn and arn.group(3) != account else None


# ---------------------------------------------------------------- the bus's policy


def wildcard(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """IAM's matching: `*` any run of characters, `?` any one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL | (re.IGNORECASE if ignore_case else 0)) is not None


def arn_like(pattern: str, value: str) -> bool:
    """ArnLike / ArnEquals: each of the six colon-separated parts matched on its own."""
    wanted, got = pattern.split(":", 5), value.split(":", 5)
    return len(wanted) == len(got) == 6 and all(wildcard(w, g) for w, g in zip(wanted, got, strict=True))


# Operator -> (negated, match(policy value, request value)).
OPERATORS: dict[str, tuple[bool, Callable[[str, str], bool]]] = {
    "StringEquals": (False, lambda p, v: p == v),
    "StringNotEquals": (True, lambda p, v: p == v),
    "StringEqualsIgnoreCase": (False, lambda p, v: p.casefold() == v.casefold()),
    "StringNotEqualsIgnoreCase": (True, lambda p, v: p.casefold() == v.casefold()),
    "StringLike": (False, wildcard),
    "StringNotLike": (True, wildcard),
    "ArnEquals": (False, arn_like),
    "ArnLike": (False, arn_like),
    "ArnNotEquals": (True, arn_like),
    "ArnNotLike": (True, arn_like),
}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def condition_holds(operator: str, key: str, wanted: Any, context: dict[str, object]) -> bool | None:
    """One key of one operator; None when the operator is not one this layer evaluates."""
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    if qualifier not in ("", "ForAllValues", "ForAnyValue") or name not in OPERATORS:
        return None
    negated, match = OPERATORS[name]
    values = context.get(key.lower())
    patterns = [str(p) for p in as_list(wanted)]
    if values is ANY:  # the caller is what the condition names (see the module docstring)
        values = patterns[:1]

    def one(value: str) -> bool:
        hit = any(match(p, value) for p in patterns)
        return not hit if negated else hit

    if values is None:  # the request does not carry the key
        if qualifier == "ForAllValues":
            return True
        return False if qualifier == "ForAnyValue" else if_exists or negated
    if qualifier == "ForAnyValue":
        return any(one(v) for v in values)
    return all(one(v) for v in values)


def conditions_hold(conditions: Any, context: dict[str, object], effect: str) -> bool:
    if not conditions:
        return True
    if not isinstance(conditions, dict):
        return effect == "Deny"
    for operator, keys in conditions.items():
        if not isinstance(keys, dict):
            return effect == "Deny"
        for key, wanted in keys.items():
            held = condition_holds(operator, key, wanted, context)
            if held is None:  # not evaluated: refuse (an Allow fails, a Deny stands)
                held = effect == "Deny"
            if not held:
                return False
    return True


def names_caller(principal: Any, who: Caller) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, dict) or "AWS" not in principal:
        return False
    accepted = {
        "*",
        who.account,
        f"arn:{who.partition}:iam::{who.account}:root",
        f"arn:{who.partition}:iam::*:root",  # moto's form of PutPermission's Principal "*"
        who.identity,
    }
    if who.principal:
        accepted.add(who.principal)
    return any(isinstance(name, str) and name in accepted for name in as_list(principal["AWS"]))


def covers(patterns: Any, value: str, ignore_case: bool = False) -> bool:
    return any(isinstance(p, str) and wildcard(p, value, ignore_case) for p in as_list(patterns))


def applies(statement: Json, who: Caller, bus_arn: str, context: dict[str, object]) -> bool:
    effect = statement.get("Effect")
    if "Principal" in statement:
        named = names_caller(statement["Principal"], who)
    else:
        named = "NotPrincipal" in statement and not names_caller(statement["NotPrincipal"], who)
    if "Action" in statement:
        acts = covers(statement["Action"], ACTION, ignore_case=True)
    else:
        acts = "NotAction" in statement and not covers(statement["NotAction"], ACTION, ignore_case=True)
    if "NotResource" in statement:
        on_bus = not covers(statement["NotResource"], bus_arn)
    else:
        on_bus = covers(statement.get("Resource", bus_arn), bus_arn)
    return named and acts and on_bus and conditions_hold(statement.get("Condition"), context, effect)


def refusal(bus: EventBus, who: Caller, entry: Json) -> str | None:
    """None when the bus's policy lets the caller put the entry, else the AccessDenied message."""
    context: dict[str, object] = {
        "events:source": [str(entry["Source"])],
        "events:detail-type": [str(entry["DetailType"])],
        "aws:principalaccount": [who.account],
        "aws:principalarn": [who.principal] if who.principal else ANY,
        "aws:principalorgid": [who.organization] if who.organization else ANY,
    }
    statements = json.loads(bus.policy)["Statement"] if bus.policy else []
    applying = [s for s in statements if isinstance(s, dict) and applies(s, who, bus.arn, context)]
    denied = f"User: {who.identity} is not authorized to perform: {ACTION} on resource: {bus.arn}"
    if any(s.get("Effect") == "Deny" for s in applying):
        return f"{denied} with an explicit deny in a resource-based policy"
    if any(s.get("Effect") == "Allow" for s in applying):
        return None
    return f"{denied} because no resource-based policy allows the {ACTION} action"


# ---------------------------------------------------------------- delivery


def malformed(entry: Json) -> Json | None:
    """moto's own checks of an entry (EventsBackend.put_events), with its codes and messages."""
    for field in ("Source", "DetailType", "Detail"):
        if not entry.get(field):
            return {
                "ErrorCode": "InvalidArgument",
                "ErrorMessage": f"Parameter {field} is not valid. Reason: {field} is a required argument.",
            }
    try:
        json.loads(entry["Detail"])
    except (TypeError, ValueError):
        return {"ErrorCode": "MalformedDetail", "ErrorMessage": "Detail is malformed."}
    return None


def find_bus(account: str, region: str, name: str) -> EventBus | None:
    try:
        backend = events_backends[account][region]
    except KeyError:  # a region moto does not know
        return None
    return backend.event_buses.get(name)


def deliver(bus: EventBus, entry: Json, who: Caller) -> str:
    """The event to every rule of the bus, built as moto builds its own, from the sender."""
    event_id = str(mock_random.uuid4())
    for rule in list(bus.rules.values()):
        event = copy.deepcopy(_BASE_EVENT_MESSAGE)
        event["id"] = event_id
        event["detail-type"] = entry["DetailType"]
        event["source"] = entry["Source"]
        event["account"] = who.account
        event["time"] = entry.get("Time", unix_time())
        event["region"] = who.region
        event["resources"] = entry.get("Resources", [])
        event["detail"] = json.loads(entry["Detail"])
        event["ingestion-time"] = unix_time()
        rule.send_to_targets(event)
    return event_id


def put_entry(entry: Json, arn: re.Match[str], who: Caller) -> Json:
    invalid = malformed(entry)
    if invalid:
        return invalid
    _, region, account, name = arn.groups()
    bus = find_bus(account, region, name)
    if bus is None:
        return {"ErrorCode": "ResourceNotFoundException", "ErrorMessage": f"Event bus {name} does not exist."}
    refused = refusal(bus, who, entry)
    if refused:
        return {"ErrorCode": "AccessDeniedException", "ErrorMessage": refused}
    return {"EventId": deliver(bus, entry, who)}


# ---------------------------------------------------------------- WSGI


def with_body(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    environ["wsgi.input"] = BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return environ


def call(app: WsgiApp, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """moto's answer to a request, kept rather than sent."""
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        answer.update(status=status, headers=headers)

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close:
            close()
    return answer["status"], answer["headers"], body


def with_cross_account_events(app: WsgiApp) -> WsgiApp:
    """moto's WSGI app with PutEvents onto other accounts' buses delivered to those accounts."""

    def layered(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("HTTP_X_AMZ_TARGET") != TARGET:
            return app(environ, start_response)
        request = Request(environ)
        raw = request.get_data()
        with_body(environ, raw)  # moto reads the body again
        try:
            params = json.loads(raw)
        except ValueError:
            return app(environ, start_response)
        entries = params.get("Entries") if isinstance(params, dict) else None
        if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_ENTRIES:
            return app(environ, start_response)
        who = caller(request)
        targets = [other_account_bus(entry, who.account) for entry in entries]
        if not any(targets):
            return app(environ, start_response)

        answers: list[Json | None] = [None] * len(entries)
        failed = 0
        status, headers = "200 OK", [("Content-Type", "application/x-amz-json-1.1")]
        own = [i for i, arn in enumerate(targets) if arn is None]
        if own:
            body = json.dumps({**params, "Entries": [entries[i] for i in own]}).encode()
            status, headers, data = call(app, with_body(dict(environ), body))
            if not status.startswith("200"):
                start_response(status, headers)
                return [data]
            moto_answer = json.loads(data)
            for i, answer in zip(own, moto_answer["Entries"], strict=True):
                answers[i] = answer
            failed += moto_answer.get("FailedEntryCount", 0)
        for i, arn in enumerate(targets):
            if arn is not None:
                answers[i] = put_entry(entries[i], arn, who)
                failed += "ErrorCode" in answers[i]

        data = json.dumps({"FailedEntryCount": failed, "Entries": answers}).encode()
        headers = [(k, v) for k, v in headers if k.lower() not in ("content-length", "x-amzn-requestid")]
        headers += [("Content-Length", str(len(data))), ("x-amzn-RequestId", str(uuid.uuid4()))]
        start_response(f"200 {HTTPStatus.OK.phrase}", headers)
        return [data]

    return layered
