"""Resource Groups' GroupResources, UngroupResources and ListGroupResources in front of moto.

moto 5.2.5 serves Resource Groups' CreateGroup, DeleteGroup, GetGroupConfiguration, GetTags and
ListGroups, but has no route for GroupResources or UngroupResources, and its ListGroupResources
raises NotImplementedError. capblock's `reservation_group` hand-off action adds a block's
capacity reservation to a group configured as `AWS::EC2::CapacityReservationPool` with
GroupResources and takes it out with UngroupResources. This WSGI layer answers those three
calls itself, on the groups moto's own backend holds (created through moto's CreateGroup,
looked up by name or ARN in the backend of the caller's account and region), and hands every
other request to moto unchanged. moto_serial.py runs it under its one lock.

What it follows (AWS Resource Groups API reference, and the model botocore ships):
- GroupResources / UngroupResources: `POST /group-resources` / `POST /ungroup-resources`,
  `{"Group": name or ARN, "ResourceArns": [1..10 ARNs]}`, answered
  `{"Succeeded": [...], "Failed": [{"ResourceArn", "ErrorMessage", "ErrorCode"}], "Pending": []}`.
  Only groups configured as `AWS::EC2::HostManagement`, `AWS::EC2::CapacityReservationPool` or
  `AWS::ResourceGroups::ApplicationGroup` take members this way; a group whose
  `AWS::ResourceGroups::Generic` item has `allowed-resource-types` "can consist of resources of
  only the specified type or types".
- ListGroupResources: `POST /list-group-resources`, `{"Group" (or the deprecated "GroupName"),
  "Filters"?, "MaxResults"? (1..50), "NextToken"?}`, answered `{"Resources": [{"Identifier":
  {"ResourceArn", "ResourceType"}}], "ResourceIdentifiers": [...], "QueryErrors": [],
  "NextToken"?}`. `Status` is only given for `AWS::EC2::HostManagement` groups, so never here.
- A group that is not there: 404 `NotFoundException`; a request that breaks the model's
  constraints: 400 `BadRequestException`. Errors are REST-JSON: `{"Message": ...}` with the
  `x-amzn-ErrorType` header, as the Rust SDK and botocore parse them.

Where the record is silent this layer reads it one way (infra/local/README.md lists them):
adding a member again succeeds; removing a resource that is not a member succeeds; a resource
of a type the group does not allow fails with ErrorCode `RESOURCE_TYPE_NOT_SUPPORTED`; a group
without one of the three configurations is refused with `BadRequestException`; members are
listed in ARN order, 50 to a page by default.

Membership is kept in memory, keyed by moto's group object: a group deleted through moto's
DeleteGroup (or dropped by a moto reset) takes its members with it, a group created again under
the same name starts empty, and groups of the same name in two regions or accounts are two
groups.
"""

import base64
import binascii
import json
import re
import uuid
import weakref
from collections.abc import Callable, Iterable
from http import HTTPStatus
from io import BytesIO
from typing import Any

from moto.resourcegroups.models import (
    FakeResourceGroup,
    ResourceGroupsBackend,
    resourcegroups_backends,
)
from moto.resourcegroups.responses import ResourceGroupsResponse
from werkzeug.wrappers import Request

Json = dict[str, Any]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# The configuration types GroupResources works with (API reference, GroupResources).
MEMBERSHIP_TYPES = (
    "AWS::EC2::HostManagement",
    "AWS::EC2::CapacityReservationPool",
    "AWS::ResourceGroups::ApplicationGroup",
)
GENERIC = "AWS::ResourceGroups::Generic"
ALLOWED_TYPES = "allowed-resource-types"

# The model's patterns (GroupStringV2, ResourceArn, ResourceFilterValue, NextToken), matched
# against the whole value.
GROUP = re.compile(
    r"[a-zA-Z0-9_\.-]{1,300}|[a-zA-Z0-9_\.-]{1,150}/[a-z0-9]{26}"
    r"|arn:aws(-[a-z]+)*:resource-groups:[a-z]{2}(-[a-z]+)+-\d{1}:[0-9]{12}:group/"
    r"([a-zA-Z0-9_\.-]{1,300}|[a-zA-Z0-9_\.-]{1,150}/[a-z0-9]{26})"
)
RESOURCE_ARN = re.compile(r"arn:aws(-[a-z]+)*:[a-z0-9\-]*:([a-z]{2}(-[a-z]+)+-\d{1})?:([0-9]{12})?:.+")
FILTER_VALUE = re.compile(r"AWS::[a-zA-Z0-9]+::[a-zA-Z0-9]+")
NEXT_TOKEN = re.compile(r"[a-zA-Z0-9+/]*={0,2}")
MAX_ARNS = 10
MAX_RESULTS = 50
MAX_FILTER_VALUES = 5

# Resource types by (service, resource type in the ARN); any other ARN gets a type spelled
# from its own parts (only reported, never matched against AWS's list).
KNOWN_TYPES = {
    ("ec2", "capacity-reservation"): "AWS::EC2::CapacityReservation",
    ("ec2", "dedicated-host"): "AWS::EC2::Host",
    ("ec2", "instance"): "AWS::EC2::Instance",
}

ROUTES = {
    "/group-resources": "GroupResources",
    "/ungroup-resources": "UngroupResources",
    "/list-group-resources": "ListGroupResources",
}
SCOPE = re.compile(r"Credential=[^/,\s]+/[^/]+/[^/]+/([^/]+)/aws4_request")

# Group -> {resource ARN: resource type}, in the order they were added.
_members: "weakref.WeakKeyDictionary[FakeResourceGroup, dict[str, str]]" = weakref.WeakKeyDictionary()


class ServiceError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class ToMoto(Exception):
    """The request is moto's own to answer (a group populated by a resource query)."""


def not_found() -> ServiceError:
    # NotFoundException's documentation in the model, which is also moto's default message.
    return ServiceError(404, "NotFoundException", "One or more of the specified resources don't exist.")


def invalid(violations: list[str]) -> ServiceError:
    n = len(violations)
    return ServiceError(
        400,
        "BadRequestException",
        f"{n} validation error{'s' if n > 1 else ''} detected: " + "; ".join(violations),
    )


def violation(value: Any, field: str, constraint: str) -> str:
    shown = "null" if value is None else f"'{value}'"
    return f"Value {shown} at '{field}' failed to satisfy constraint: {constraint}"


def resource_type(arn: str) -> str:
    _, _, service, _, _, resource = arn.split(":", 5)
    kind = re.split(r"[/:]", resource, maxsplit=1)[0] if re.search(r"[/:]", resource) else ""
    if (service, kind) in KNOWN_TYPES:
        return KNOWN_TYPES[(service, kind)]
    words = [w for w in re.split(r"[^a-zA-Z0-9]", service) if w]
    service_name = service.upper() if len(service) <= 3 else "".join(w.capitalize() for w in words)
    kind_name = "".join(w.capitalize() for w in re.split(r"[^a-zA-Z0-9]", kind) if w) or "Resource"
    return f"AWS::{service_name or 'Unknown'}::{kind_name}"


def members(group: FakeResourceGroup) -> dict[str, str]:
    return _members.setdefault(group, {})


def configuration_types(group: FakeResourceGroup) -> set[str]:
    return {item.get("Type") for item in group.configuration or [] if isinstance(item, dict)}


def allowed_types(group: FakeResourceGroup) -> set[str] | None:
    for item in group.configuration or []:
        if isinstance(item, dict) and item.get("Type") == GENERIC:
            for parameter in item.get("Parameters") or []:
                if parameter.get("Name") == ALLOWED_TYPES:
                    return set(parameter.get("Values") or [])
    return None


def find_group(backend: ResourceGroupsBackend, name_or_arn: str) -> FakeResourceGroup:
    try:
        return backend.groups[name_or_arn]
    except KeyError:
        raise not_found() from None


def group_field(params: Json, violations: list[str]) -> str | None:
    group = params.get("Group")
    if group is None:
        violations.append(violation(None, "group", "Member must not be null"))
    elif not isinstance(group, str) or not 1 <= len(group) <= 1600:
        violations.append(violation(group, "group", "Member must have length between 1 and 1600"))
    elif not GROUP.fullmatch(group):
        violations.append(
            violation(group, "group", f"Member must satisfy regular expression pattern: {GROUP.pattern}")
        )
    else:
        return group
    return None


def arns_field(params: Json, violations: list[str]) -> list[str]:
    arns = params.get("ResourceArns")
    if arns is None:
        violations.append(violation(None, "resourceArns", "Member must not be null"))
        return []
    if not isinstance(arns, list) or not 1 <= len(arns) <= MAX_ARNS:
        violations.append(
            violation(arns, "resourceArns", f"Member must have length between 1 and {MAX_ARNS}")
        )
        return []
    bad = [a for a in arns if not isinstance(a, str) or not RESOURCE_ARN.fullmatch(a)]
    if bad:
        violations.append(
            violation(
                arns,
                "resourceArns",
                f"Member must satisfy constraint: [Member must satisfy regular expression pattern: {RESOURCE_ARN.pattern}]",
            )
        )
        return []
    return arns


def membership_group(
    backend: ResourceGroupsBackend, params: Json, operation: str
) -> tuple[FakeResourceGroup, list[str]]:
    violations: list[str] = []
    name = group_field(params, violations)
    arns = arns_field(params, violations)
    if violations:
        raise invalid(violations)
    group = find_group(backend, name)
    if group.resource_query or not configuration_types(group) & set(MEMBERSHIP_TYPES):
        raise ServiceError(
            400,
            "BadRequestException",
            f"{operation} works only with groups configured as {', '.join(MEMBERSHIP_TYPES)}; "
            f"{group.name} is not one of them",
        )
    return group, arns


def group_resources(backend: ResourceGroupsBackend, params: Json) -> Json:
    group, arns = membership_group(backend, params, "GroupResources")
    allowed = allowed_types(group)
    held = members(group)
    succeeded, failed = [], []
    for arn in arns:
        kind = resource_type(arn)
        if allowed is not None and kind not in allowed:
            failed.append(
                {
                    "ResourceArn": arn,
                    "ErrorCode": "RESOURCE_TYPE_NOT_SUPPORTED",
                    "ErrorMessage": f"The group {group.name} allows only {', '.join(sorted(allowed))}; "
                    f"this resource is of type {kind}",
                }
            )
            continue
        held.setdefault(arn, kind)
        succeeded.append(arn)
    return {"Succeeded": succeeded, "Failed": failed, "Pending": []}


def ungroup_resources(backend: ResourceGroupsBackend, params: Json) -> Json:
    group, arns = membership_group(backend, params, "UngroupResources")
    held = members(group)
    for arn in arns:
        held.pop(arn, None)
    return {"Succeeded": list(arns), "Failed": [], "Pending": []}


def encode_token(after: str) -> str:
    return base64.b64encode(json.dumps({"after": after}).encode()).decode()


def decode_token(token: Any) -> str:
    """The last ARN of the page before, from a NextToken this layer gave."""
    after = None
    if isinstance(token, str) and NEXT_TOKEN.fullmatch(token):
        try:
            after = json.loads(base64.b64decode(token, validate=True)).get("after")
        except (ValueError, AttributeError, binascii.Error):
            after = None
    if not isinstance(after, str):
        raise ServiceError(400, "BadRequestException", "The NextToken is not valid.")
    return after


def filter_types(filters: Any, violations: list[str]) -> set[str] | None:
    if filters is None:
        return None
    if not isinstance(filters, list):
        violations.append(violation(filters, "filters", "Member must be a list"))
        return None
    types: set[str] = set()
    for f in filters:
        name = f.get("Name") if isinstance(f, dict) else None
        values = f.get("Values") if isinstance(f, dict) else None
        if name != "resource-type":
            violations.append(
                violation(name, "filters.member.name", "Member must satisfy enum value set: [resource-type]")
            )
        elif not isinstance(values, list) or not 1 <= len(values) <= MAX_FILTER_VALUES:
            violations.append(
                violation(
                    values,
                    "filters.member.values",
                    f"Member must have length between 1 and {MAX_FILTER_VALUES}",
                )
            )
        elif not all(isinstance(v, str) and FILTER_VALUE.fullmatch(v) for v in values):
            violations.append(
                violation(
                    values,
                    "filters.member.values",
                    f"Member must satisfy regular expression pattern: {FILTER_VALUE.pattern}",
                )
            )
        else:
            types.update(values)
    return types


def list_group_resources(backend: ResourceGroupsBackend, params: Json) -> Json:
    violations: list[str] = []
    if params.get("Group") is not None or params.get("GroupName") is None:
        name = group_field(params, violations)
    else:
        name = params["GroupName"]
        if not isinstance(name, str) or not name:
            violations.append(
                violation(name, "groupName", "Member must have length greater than or equal to 1")
            )
    max_results = params.get("MaxResults", MAX_RESULTS)
    if type(max_results) is not int or not 1 <= max_results <= MAX_RESULTS:
        violations.append(violation(max_results, "maxResults", f"Member must be between 1 and {MAX_RESULTS}"))
    types = filter_types(params.get("Filters"), violations)
    if violations:
        raise invalid(violations)
    after = decode_token(params["NextToken"]) if params.get("NextToken") else None
    group = find_group(backend, name)
    if group.resource_query:
        raise ToMoto
    held = members(group)
    arns = sorted(a for a, kind in held.items() if types is None or kind in types)
    if after is not None:
        arns = [a for a in arns if a > after]
    page, rest = arns[:max_results], arns[max_results:]
    identifiers = [{"ResourceArn": a, "ResourceType": held[a]} for a in page]
    answer: Json = {
        "Resources": [{"Identifier": dict(i)} for i in identifiers],
        "ResourceIdentifiers": identifiers,
        "QueryErrors": [],
    }
    if rest:
        answer["NextToken"] = encode_token(page[-1])
    return answer


HANDLERS: dict[str, Callable[[ResourceGroupsBackend, Json], Json]] = {
    "GroupResources": group_resources,
    "UngroupResources": ungroup_resources,
    "ListGroupResources": list_group_resources,
}


def is_resource_groups(environ: dict[str, Any]) -> bool:
    scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    if scope:
        return scope.group(1) == "resource-groups"
    return environ.get("HTTP_HOST", "").startswith("resource-groups.")


def caller(request: Request) -> tuple[str, str]:
    """The account and region moto itself would serve this request from."""
    probe = ResourceGroupsResponse()
    probe.headers = request.headers
    probe.querystring = {}
    return probe.get_current_account(), probe.get_region_from_url(request, request.url)


def respond(
    start_response: Callable[..., Any], status: int, body: Json, error: str | None = None
) -> list[bytes]:
    data = json.dumps(body).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(data))),
        ("x-amzn-RequestId", str(uuid.uuid4())),
    ]
    if error:
        headers.append(("x-amzn-ErrorType", error))
    start_response(f"{status} {HTTPStatus(status).phrase}", headers)
    return [data]


def with_group_membership(app: WsgiApp) -> WsgiApp:
    """moto's WSGI app with GroupResources, UngroupResources and ListGroupResources answered."""

    def layered(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        operation = ROUTES.get(environ.get("PATH_INFO", ""))
        if operation is None or environ.get("REQUEST_METHOD") != "POST" or not is_resource_groups(environ):
            return app(environ, start_response)
        request = Request(environ)
        raw = request.get_data()
        try:
            try:
                params = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise ServiceError(
                    400, "BadRequestException", "The request body is not valid JSON."
                ) from None
            if not isinstance(params, dict):
                raise ServiceError(400, "BadRequestException", "The request body must be a JSON object.")
            account, region = caller(request)
            answer = HANDLERS[operation](resourcegroups_backends[account][region], params)
        except ToMoto:
            environ["wsgi.input"] = BytesIO(raw)
            environ["CONTENT_LENGTH"] = str(len(raw))
            return app(environ, start_response)
        except ServiceError as e:
            return respond(start_response, e.status, {"Message": e.message}, e.code)
        return respond(start_response, 200, answer)

    return layered
