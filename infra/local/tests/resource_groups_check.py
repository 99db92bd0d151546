#!/usr/bin/env python3
"""boto3 check of the Resource Groups membership calls the local stack serves in front of moto.

Starts infra/local/moto_serial.py (moto plus moto_resource_groups.py) on a free loopback port
with this interpreter, which must have the stack's requirements (moto, boto3), and drives
GroupResources, UngroupResources and ListGroupResources through boto3's real Resource Groups
client on a group made the way capblock's `reservation_group` action makes it; a few requests
go out raw to check the wire shape of an error. Prints `N passed, M failed` last and exits
non-zero on any mismatch.

    ~/.cache/capblock/venv/bin/python infra/local/tests/resource_groups_check.py
"""

import base64
import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import boto3
from botocore.exceptions import ClientError
from moto_server import start

ACCOUNT = "123456789012"  # moto's account for the access key "test"
REGION = "us-east-1"
PASSED = 0
FAILED = 0

# The configuration capblock's reservation_group gives a group (shared/src/aws/resource_groups.rs),
# as the EC2 user guide creates one.
POOL = [
    {"Type": "AWS::EC2::CapacityReservationPool"},
    {
        "Type": "AWS::ResourceGroups::Generic",
        "Parameters": [{"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}],
    },
]
TAGS = {"capblock:stack": "check"}


def reservation(n: int, region: str = REGION) -> str:
    return f"arn:aws:ec2:{region}:{ACCOUNT}:capacity-reservation/cr-{n:017x}"


CR = reservation(1)
INSTANCE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0123456789abcdef0"
CR_TYPE = "AWS::EC2::CapacityReservation"


def check(name: str, cond: bool, detail: str = "") -> None:
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print(f"FAIL: {name}" + (f" -- {detail}" if detail else ""), file=sys.stderr)


def eq(name: str, got, want) -> None:
    check(name, got == want, f"got {got!r}, want {want!r}")


def answer(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def refused(name: str, call, status: int, code: str) -> None:
    """call() must fail with HTTP `status` and error `code`, named in x-amzn-ErrorType."""
    try:
        got = call()
    except ClientError as e:
        meta = e.response["ResponseMetadata"]
        eq(f"{name}: status", meta["HTTPStatusCode"], status)
        eq(f"{name}: code", e.response["Error"]["Code"], code)
        eq(f"{name}: x-amzn-ErrorType", meta["HTTPHeaders"].get("x-amzn-errortype"), code)
        check(f"{name}: message", bool(e.response["Error"].get("Message")), repr(e.response["Error"]))
        return
    check(name, False, f"answered {got!r}")


def listed(client, group: str, **kwargs) -> list[str]:
    """Every member ARN of the group, page by page."""
    arns, token = [], None
    while True:
        page = client.list_group_resources(Group=group, **kwargs, **({"NextToken": token} if token else {}))
        arns += [r["Identifier"]["ResourceArn"] for r in page["Resources"]]
        token = page.get("NextToken")
        if not token:
            return arns


def raw(url: str, path: str, body: bytes) -> tuple[int, dict, bytes]:
    """A POST signed only as far as moto looks (the credential scope names the service)."""
    request = urllib.request.Request(
        url + path,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"AWS4-HMAC-SHA256 Credential=test/20261201/{REGION}/resource-groups/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def run(url: str) -> None:
    def client(region: str = REGION):
        return boto3.client(
            "resource-groups",
            endpoint_url=url,
            region_name=region,
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    rg = client()
    created = rg.create_group(
        Name="capblock-check-r1",
        Description="The Capacity Blocks of a capblock rule for launch templates to target",
        Configuration=POOL,
        Tags=TAGS,
    )
    group_arn = created["Group"]["GroupArn"]
    eq(
        "CreateGroup: the group's ARN",
        group_arn,
        f"arn:aws:resource-groups:{REGION}:{ACCOUNT}:group/capblock-check-r1",
    )

    # GroupResources, by name, then the same reservation again by the group's ARN.
    eq(
        "GroupResources: added",
        answer(rg.group_resources(Group="capblock-check-r1", ResourceArns=[CR])),
        {"Succeeded": [CR], "Failed": [], "Pending": []},
    )
    eq(
        "GroupResources: added again, by the group's ARN",
        answer(rg.group_resources(Group=group_arn, ResourceArns=[CR])),
        {"Succeeded": [CR], "Failed": [], "Pending": []},
    )
    identifier = {"ResourceArn": CR, "ResourceType": CR_TYPE}
    eq(
        "ListGroupResources: the one member",
        answer(rg.list_group_resources(Group="capblock-check-r1")),
        {"Resources": [{"Identifier": identifier}], "ResourceIdentifiers": [identifier], "QueryErrors": []},
    )
    eq("ListGroupResources: by the group's ARN", listed(rg, group_arn), [CR])

    # A resource of a type the group does not allow is refused inside a successful answer.
    got = answer(rg.group_resources(Group="capblock-check-r1", ResourceArns=[INSTANCE]))
    eq("GroupResources: an instance is not added", (got["Succeeded"], got["Pending"]), ([], []))
    eq(
        "GroupResources: an instance fails",
        [(f["ResourceArn"], f["ErrorCode"]) for f in got["Failed"]],
        [(INSTANCE, "RESOURCE_TYPE_NOT_SUPPORTED")],
    )
    check(
        "GroupResources: the failure names the allowed type",
        bool(got["Failed"]) and all(CR_TYPE in f.get("ErrorMessage", "") for f in got["Failed"]),
        repr(got["Failed"]),
    )
    eq("ListGroupResources: still the one member", listed(rg, "capblock-check-r1"), [CR])

    # Pages: three more reservations, listed three to a page, then filtered.
    more = [reservation(n) for n in (4, 2, 3)]
    eq(
        "GroupResources: three at once",
        answer(rg.group_resources(Group="capblock-check-r1", ResourceArns=more))["Succeeded"],
        more,
    )
    first = rg.list_group_resources(Group="capblock-check-r1", MaxResults=3)
    eq(
        "ListGroupResources: a page of three",
        [r["Identifier"]["ResourceArn"] for r in first["Resources"]],
        [reservation(n) for n in (1, 2, 3)],
    )
    check("ListGroupResources: a token for the rest", bool(first.get("NextToken")), repr(first))
    second = rg.list_group_resources(
        Group="capblock-check-r1", MaxResults=3, NextToken=first.get("NextToken", "")
    )
    eq(
        "ListGroupResources: the rest",
        [r["Identifier"]["ResourceArn"] for r in second["Resources"]],
        [reservation(4)],
    )
    check("ListGroupResources: no token after the last page", "NextToken" not in second, repr(second))
    eq(
        "ListGroupResources: paged one by one",
        listed(rg, "capblock-check-r1", MaxResults=1),
        [reservation(n) for n in (1, 2, 3, 4)],
    )
    eq(
        "ListGroupResources: filtered on the reservation type",
        listed(rg, "capblock-check-r1", Filters=[{"Name": "resource-type", "Values": [CR_TYPE]}]),
        [reservation(n) for n in (1, 2, 3, 4)],
    )
    eq(
        "ListGroupResources: filtered on another type",
        listed(
            rg, "capblock-check-r1", Filters=[{"Name": "resource-type", "Values": ["AWS::EC2::Instance"]}]
        ),
        [],
    )
    refused(
        "ListGroupResources: MaxResults over 50",
        lambda: rg.list_group_resources(Group="capblock-check-r1", MaxResults=51),
        400,
        "BadRequestException",
    )
    refused(
        "ListGroupResources: a token it never gave",
        lambda: rg.list_group_resources(Group="capblock-check-r1", NextToken="bm90IGEgdG9rZW4="),
        400,
        "BadRequestException",
    )
    eq(
        "UngroupResources: the three",
        answer(rg.ungroup_resources(Group="capblock-check-r1", ResourceArns=more)),
        {"Succeeded": more, "Failed": [], "Pending": []},
    )

    # UngroupResources, then again once it is out.
    eq(
        "UngroupResources: removed",
        answer(rg.ungroup_resources(Group="capblock-check-r1", ResourceArns=[CR])),
        {"Succeeded": [CR], "Failed": [], "Pending": []},
    )
    eq(
        "ListGroupResources: empty",
        answer(rg.list_group_resources(Group="capblock-check-r1")),
        {"Resources": [], "ResourceIdentifiers": [], "QueryErrors": []},
    )
    eq(
        "UngroupResources: removed again",
        answer(rg.ungroup_resources(Group=group_arn, ResourceArns=[CR])),
        {"Succeeded": [CR], "Failed": [], "Pending": []},
    )

    # A group that is not there, by name and by ARN.
    missing = f"arn:aws:resource-groups:{REGION}:{ACCOUNT}:group/capblock-check-missing"
    refused(
        "GroupResources: no such group",
        lambda: rg.group_resources(Group="capblock-check-missing", ResourceArns=[CR]),
        404,
        "NotFoundException",
    )
    refused(
        "UngroupResources: no such group",
        lambda: rg.ungroup_resources(Group=missing, ResourceArns=[CR]),
        404,
        "NotFoundException",
    )
    refused(
        "ListGroupResources: no such group",
        lambda: rg.list_group_resources(Group="capblock-check-missing"),
        404,
        "NotFoundException",
    )
    status, headers, body = raw(
        url,
        "/group-resources",
        json.dumps({"Group": "capblock-check-missing", "ResourceArns": [CR]}).encode(),
    )
    eq("GroupResources, raw: 404", status, 404)
    eq("GroupResources, raw: x-amzn-ErrorType", headers.get("x-amzn-errortype"), "NotFoundException")
    eq(
        "GroupResources, raw: the body",
        json.loads(body),
        {"Message": "One or more of the specified resources don't exist."},
    )

    # Requests outside the model's limits, and a group that cannot take members.
    refused(
        "GroupResources: eleven ARNs",
        lambda: rg.group_resources(
            Group="capblock-check-r1", ResourceArns=[reservation(n) for n in range(11)]
        ),
        400,
        "BadRequestException",
    )
    refused(
        "GroupResources: not an ARN",
        lambda: rg.group_resources(Group="capblock-check-r1", ResourceArns=["cr-0123456789abcdef0"]),
        400,
        "BadRequestException",
    )
    status, headers, body = raw(
        url, "/ungroup-resources", json.dumps({"Group": "capblock-check-r1"}).encode()
    )
    eq(
        "UngroupResources, raw, no ResourceArns: 400",
        (status, headers.get("x-amzn-errortype")),
        (400, "BadRequestException"),
    )
    check(
        "UngroupResources, raw, no ResourceArns: the message names the field",
        b"resourceArns" in body,
        repr(body),
    )
    rg.create_group(Name="capblock-check-plain", Description="no configuration")
    refused(
        "GroupResources: a group with no pool configuration",
        lambda: rg.group_resources(Group="capblock-check-plain", ResourceArns=[CR]),
        400,
        "BadRequestException",
    )
    rg.delete_group(Group="capblock-check-plain")

    # Membership belongs to one region's group: a group of the same name in another region is
    # another group.
    west = client("us-west-2")
    west.create_group(Name="capblock-check-r1", Configuration=POOL)
    eq(
        "GroupResources: in us-west-2",
        answer(west.group_resources(Group="capblock-check-r1", ResourceArns=[reservation(9, "us-west-2")]))[
            "Succeeded"
        ],
        [reservation(9, "us-west-2")],
    )
    eq("ListGroupResources: us-east-1's group does not have it", listed(rg, "capblock-check-r1"), [])
    eq(
        "ListGroupResources: us-west-2's group has it",
        listed(west, "capblock-check-r1"),
        [reservation(9, "us-west-2")],
    )
    west.delete_group(Group="capblock-check-r1")

    # DeleteGroup (moto's) forgets the members: the group made again starts empty.
    rg.group_resources(Group="capblock-check-r1", ResourceArns=[CR])
    eq("ListGroupResources: a member before DeleteGroup", listed(rg, "capblock-check-r1"), [CR])
    eq("DeleteGroup: deleted", rg.delete_group(Group=group_arn)["Group"]["Name"], "capblock-check-r1")
    refused(
        "ListGroupResources: the deleted group",
        lambda: rg.list_group_resources(Group="capblock-check-r1"),
        404,
        "NotFoundException",
    )
    refused(
        "GroupResources: the deleted group",
        lambda: rg.group_resources(Group=group_arn, ResourceArns=[CR]),
        404,
        "NotFoundException",
    )
    rg.create_group(Name="capblock-check-r1", Configuration=POOL, Tags=TAGS)
    eq("ListGroupResources: the group made again is empty", listed(rg, "capblock-check-r1"), [])
    rg.delete_group(Group="capblock-check-r1")

    # moto still serves the rest of Resource Groups through the layer.
    eq("ListGroups: through the layer", rg.list_groups()["GroupIdentifiers"], [])
    eq("the token is base64", base64.b64decode(first.get("NextToken", "")).startswith(b"{"), True)


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
    print(f"resource_groups_check: {PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
