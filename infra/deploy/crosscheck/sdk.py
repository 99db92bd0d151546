"""The AWS SDK's operations: which method names of an `aws_sdk_<service>::Client` are API calls
(read from the SDK crate's source in the cargo registry), the IAM action of each, and the
actions an operation implies beyond its own name."""

from __future__ import annotations

import re
from pathlib import Path

# aws-sdk-<crate> -> IAM service prefix, where they differ.
IAM_PREFIX = {
    "cloudwatchlogs": "logs", "eventbridge": "events", "sfn": "states", "cloudwatch": "cloudwatch",
    "resourcegroups": "resource-groups",
}

# Used when the SDK crate's source is not in the cargo registry (not fetched yet).
FALLBACK_OPERATIONS = {
    "scheduler": [
        "create_schedule", "create_schedule_group", "delete_schedule", "delete_schedule_group",
        "get_schedule", "get_schedule_group", "list_schedule_groups", "list_schedules",
        "list_tags_for_resource", "tag_resource", "untag_resource", "update_schedule",
    ],
    "sns": [
        "publish", "publish_batch", "subscribe", "unsubscribe", "create_topic", "delete_topic",
        "get_topic_attributes", "set_topic_attributes", "list_topics", "list_subscriptions",
        "list_subscriptions_by_topic", "confirm_subscription", "get_subscription_attributes",
        "set_subscription_attributes",
    ],
    "dynamodb": [
        "batch_get_item", "batch_write_item", "create_table", "delete_item", "delete_table",
        "describe_table", "describe_time_to_live", "execute_statement", "get_item", "put_item",
        "query", "scan", "transact_get_items", "transact_write_items", "update_item",
        "update_table", "update_time_to_live",
    ],
}

def pascal(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


class Sdk:
    """Operation names of aws-sdk-<service> crates, read from the cargo registry."""

    def __init__(self, registry: Path | None, lock: dict):
        self.registry = registry
        self.versions = {p["name"]: p["version"] for p in lock.get("package", [])}
        self.cache: dict[str, dict[str, str] | None] = {}
        self.notes: list[str] = []

    def operations(self, service: str) -> dict[str, str] | None:
        """snake_case operation -> API operation name, or None if unknown."""
        if service in self.cache:
            return self.cache[service]
        ops = self._from_registry(service)
        if ops is None and service in FALLBACK_OPERATIONS:
            ops = {o: pascal(o) for o in FALLBACK_OPERATIONS[service]}
            self.notes.append(f"aws-sdk-{service} not in the cargo registry: using the built-in operation list")
        self.cache[service] = ops
        return ops

    def _from_registry(self, service: str) -> dict[str, str] | None:
        if not self.registry or not self.registry.is_dir():
            return None
        crate = f"aws-sdk-{service}"
        want = self.versions.get(crate)
        candidates = []
        for index in self.registry.iterdir():
            candidates += [d for d in index.glob(f"{crate}-*") if re.fullmatch(re.escape(crate) + r"-\d+\.\d+\.\d+", d.name)]
        if not candidates:
            return None
        exact = [d for d in candidates if want and d.name == f"{crate}-{want}"]
        if exact:
            chosen = exact[0]
        else:
            chosen = max(candidates, key=lambda d: tuple(int(x) for x in d.name.rsplit("-", 1)[1].split(".")))
            if want:
                self.notes.append(f"{crate} {want} (Cargo.lock) not in the registry: using {chosen.name}")
        opdir = chosen / "src" / "operation"
        ops: dict[str, str] = {}
        for d in opdir.iterdir() if opdir.is_dir() else []:
            if not d.is_dir():
                continue
            name = pascal(d.name)
            rs = opdir / f"{d.name}.rs"
            if rs.is_file():
                m = re.search(r'Metadata::new\(\s*"(\w+)"', rs.read_text(encoding="utf-8", errors="replace"))
                if m:
                    name = m.group(1)
            ops[d.name] = name
        return ops or None



# Extra IAM actions an operation needs, depending on what the code passes to it, looked for in
# the code a adapter's code (a transaction that carries a Delete needs DeleteItem too).
#   (service, operation, regex over the reachable code or None, implied actions)
# Operations IAM does not authorize as themselves: a transaction is checked item by item
# (IMPLIED below), and `dynamodb:TransactWriteItems` is no action of the Service Authorization
# Reference, so a policy naming it allows nothing.
NOT_ACTIONS = {"dynamodb:TransactWriteItems", "dynamodb:TransactGetItems"}

IMPLIED = [
    # TransactWriteItems is authorized per item: each kind of item needs its own action.
    ("dynamodb", "transact_write_items", r"\bConditionCheck::builder\b|\.\s*condition_check\s*\(", ["dynamodb:ConditionCheckItem"]),
    ("dynamodb", "transact_write_items", r"\bPut::builder\b", ["dynamodb:PutItem"]),
    ("dynamodb", "transact_write_items", r"\bUpdate::builder\b", ["dynamodb:UpdateItem"]),
    ("dynamodb", "transact_write_items", r"\bDelete::builder\b", ["dynamodb:DeleteItem"]),
    # Tags in the purchase request are applied with CreateTags (ec2:CreateAction condition).
    ("ec2", "purchase_capacity_block", r"\bTagSpecification\b", ["ec2:CreateTags"]),
    # A schedule whose target carries a role ARN makes the caller pass that role.
    ("scheduler", "create_schedule", r"\.\s*role_arn\s*\(", ["iam:PassRole"]),
    ("scheduler", "update_schedule", r"\.\s*role_arn\s*\(", ["iam:PassRole"]),
    # A group created with tags is tagged with resource-groups:Tag as well.
    ("resourcegroups", "create_group", r"\.\s*tags\s*\(", ["resource-groups:Tag"]),
    # Putting a reservation in a group, or taking it out, tags it through the tagging API: the
    # Service Authorization Reference lists these dependent actions for GroupResources and
    # UngroupResources; the tagging API's reference adds that TagResources / UntagResources
    # also need the owning service's own tagging permission (EC2's, for a reservation).
    ("resourcegroups", "group_resources", None, ["resource-groups:Tag", "tag:TagResources", "ec2:CreateTags"]),
    ("resourcegroups", "ungroup_resources", None, ["resource-groups:Untag", "tag:UntagResources", "ec2:DeleteTags"]),
    # A resource share created with tags (capblock:stack, which the role's conditions require)
    # is tagged with ram:TagResource as well.
    ("ram", "create_resource_share", r"\.\s*tags\s*\(", ["ram:TagResource"]),
]

# aws-config's credentials providers call STS themselves: AssumeRoleProvider assumes its role
# (sts:AssumeRole) when first asked for credentials.
INDIRECT_CALLS = [
    (r"\bAssumeRoleProvider::builder\b", "sts", "assume_role"),
]

METHOD_CALL_RX = re.compile(r"\.\s*([a-z_][a-z0-9_]*)\s*(?:::\s*<[^>]*>\s*)?\(")


def sdk_services(code: str) -> set[str]:
    return set(re.findall(r"\baws_sdk_(\w+?)::", code))


def sdk_calls(code: str, services: set[str], sdk: Sdk) -> tuple[dict[str, set[str]], list[str]]:
    """service -> called operations (snake_case); problems."""
    calls: dict[str, set[str]] = {}
    problems: list[str] = []
    methods = set(METHOD_CALL_RX.findall(code))
    for svc in sorted(services):
        ops = sdk.operations(svc)
        if ops is None:
            # last resort: methods called directly on something named client
            found = set(re.findall(r"\bclient\b(?:\s*\([^()]*\))?\s*\.\s*([a-z_][a-z0-9_]*)\s*\(", code))
            found -= {"clone", "config", "as_ref"}
            problems.append(f"aws-sdk-{svc}: operation list unavailable (crate not fetched); guessed calls from `client.op(` only")
            calls[svc] = found
        else:
            calls[svc] = methods & set(ops)
    # Calls the SDK makes on the code's behalf, with no `aws_sdk_<service>::` in the code.
    for rx, svc, op in INDIRECT_CALLS:
        if re.search(rx, code):
            calls.setdefault(svc, set()).add(op)
    return calls, problems


def action_of(svc: str, op: str, sdk: Sdk) -> str:
    return f"{IAM_PREFIX.get(svc, svc)}:{(sdk.operations(svc) or {}).get(op, pascal(op))}"


