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
import unittest
import urllib.error
import urllib.request

import boto3
from botocore.exceptions import ClientError
from moto_server import MotoTestCase

ACCOUNT = "123456789012"  # moto's account for the access key "test"
REGION = "us-east-1"

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


def answer(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def refused(test: unittest.TestCase, name: str, call, status: int, code: str) -> None:
    """call() must fail with HTTP `status` and error `code`, named in x-amzn-ErrorType."""
    try:
        got = call()
    except ClientError as e:
        meta = e.response["ResponseMetadata"]
        with test.subTest(f"{name}: status"):
            test.assertEqual(meta["HTTPStatusCode"], status)
        with test.subTest(f"{name}: code"):
            test.assertEqual(e.response["Error"]["Code"], code)
        with test.subTest(f"{name}: x-amzn-ErrorType"):
            test.assertEqual(meta["HTTPHeaders"].get("x-amzn-errortype"), code)
        with test.subTest(f"{name}: message"):
            test.assertTrue(bool(e.response["Error"].get("Message")), repr(e.response["Error"]))
        return
    with test.subTest(name):
        test.fail(f"answered {got!r}")


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


def run(test: unittest.TestCase, url: str) -> None:
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
    with test.subTest("CreateGroup: the group's ARN"):
        test.assertEqual(group_arn, f"arn:aws:resource-groups:{REGION}:{ACCOUNT}:group/capblock-check-r1")

    # GroupResources, by name, then the same reservation again by the group's ARN.
    with test.subTest("GroupResources: added"):
        test.assertEqual(
            answer(rg.group_resources(Group="capblock-check-r1", ResourceArns=[CR])),
            {"Succeeded": [CR], "Failed": [], "Pending": []},
        )
    with test.subTest("GroupResources: added again, by the group's ARN"):
        test.assertEqual(
            answer(rg.group_resources(Group=group_arn, ResourceArns=[CR])),
            {"Succeeded": [CR], "Failed": [], "Pending": []},
        )
    identifier = {"ResourceArn": CR, "ResourceType": CR_TYPE}
    with test.subTest("ListGroupResources: the one member"):
        test.assertEqual(
            answer(rg.list_group_resources(Group="capblock-check-r1")),
            {
                "Resources": [{"Identifier": identifier}],
                "ResourceIdentifiers": [identifier],
                "QueryErrors": [],
            },
        )
    with test.subTest("ListGroupResources: by the group's ARN"):
        test.assertEqual(listed(rg, group_arn), [CR])

    # A resource of a type the group does not allow is refused inside a successful answer.
    got = answer(rg.group_resources(Group="capblock-check-r1", ResourceArns=[INSTANCE]))
    with test.subTest("GroupResources: an instance is not added"):
        test.assertEqual((got["Succeeded"], got["Pending"]), ([], []))
    with test.subTest("GroupResources: an instance fails"):
        test.assertEqual(
            [(f["ResourceArn"], f["ErrorCode"]) for f in got["Failed"]],
            [(INSTANCE, "RESOURCE_TYPE_NOT_SUPPORTED")],
        )
    with test.subTest("GroupResources: the failure names the allowed type"):
        test.assertTrue(
            bool(got["Failed"]) and all(CR_TYPE in f.get("ErrorMessage", "") for f in got["Failed"]),
            repr(got["Failed"]),
        )
    with test.subTest("ListGroupResources: still the one member"):
        test.assertEqual(listed(rg, "capblock-check-r1"), [CR])

    # Pages: three more reservations, listed three to a page, then filtered.
    more = [reservation(n) for n in (4, 2, 3)]
    with test.subTest("GroupResources: three at once"):
        test.assertEqual(
            answer(rg.group_resources(Group="capblock-check-r1", ResourceArns=more))["Succeeded"], more
        )
    first = rg.list_group_resources(Group="capblock-check-r1", MaxResults=3)
    with test.subTest("ListGroupResources: a page of three"):
        test.assertEqual(
            [r["Identifier"]["ResourceArn"] for r in first["Resources"]], [reservation(n) for n in (1, 2, 3)]
        )
    with test.subTest("ListGroupResources: a token for the rest"):
        test.assertTrue(bool(first.get("NextToken")), repr(first))
    second = rg.list_group_resources(
        Group="capblock-check-r1", MaxResults=3, NextToken=first.get("NextToken", "")
    )
    with test.subTest("ListGroupResources: the rest"):
        test.assertEqual([r["Identifier"]["ResourceArn"] for r in second["Resources"]], [reservation(4)])
    with test.subTest("ListGroupResources: no token after the last page"):
        test.assertTrue("NextToken" not in second, repr(second))
    with test.subTest("ListGroupResources: paged one by one"):
        test.assertEqual(
            listed(rg, "capblock-check-r1", MaxResults=1), [reservation(n) for n in (1, 2, 3, 4)]
        )
    with test.subTest("ListGroupResources: filtered on the reservation type"):
        test.assertEqual(
            listed(rg, "capblock-check-r1", Filters=[{"Name": "resource-type", "Values": [CR_TYPE]}]),
            [reservation(n) for n in (1, 2, 3, 4)],
        )
    with test.subTest("ListGroupResources: filtered on another type"):
        test.assertEqual(
            listed(
                rg, "capblock-check-r1", Filters=[{"Name": "resource-type", "Values": ["AWS::EC2::Instance"]}]
            ),
            [],
        )
    refused(
        test,
        "ListGroupResources: MaxResults over 50",
        lambda: rg.list_group_resources(Group="capblock-check-r1", MaxResults=51),
        400,
        "BadRequestException",
    )
    refused(
        test,
        "ListGroupResources: a token it never gave",
        lambda: rg.list_group_resources(Group="capblock-check-r1", NextToken="bm90IGEgdG9rZW4="),
        400,
        "BadRequestException",
    )
    with test.subTest("UngroupResources: the three"):
        test.assertEqual(
            answer(rg.ungroup_resources(Group="capblock-check-r1", ResourceArns=more)),
            {"Succeeded": more, "Failed": [], "Pending": []},
        )

    # UngroupResources, then again once it is out.
    with test.subTest("UngroupResources: removed"):
        test.assertEqual(
            answer(rg.ungroup_resources(Group="capblock-check-r1", ResourceArns=[CR])),
            {"Succeeded": [CR], "Failed": [], "Pending": []},
        )
    with test.subTest("ListGroupResources: empty"):
        test.assertEqual(
            answer(rg.list_group_resources(Group="capblock-check-r1")),
            {"Resources": [], "ResourceIdentifiers": [], "QueryErrors": []},
        )
    with test.subTest("UngroupResources: removed again"):
        test.assertEqual(
            answer(rg.ungroup_resources(Group=group_arn, ResourceArns=[CR])),
            {"Succeeded": [CR], "Failed": [], "Pending": []},
        )

    # A group that is not there, by name and by ARN.
    missing = f"arn:aws:resource-groups:{REGION}:{ACCOUNT}:group/capblock-check-missing"
    refused(
        test,
        "GroupResources: no such group",
        lambda: rg.group_resources(Group="capblock-check-missing", ResourceArns=[CR]),
        404,
        "NotFoundException",
    )
    refused(
        test,
        "UngroupResources: no such group",
        lambda: rg.ungroup_resources(Group=missing, ResourceArns=[CR]),
        404,
        "NotFoundException",
    )
    refused(
        test,
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
    with test.subTest("GroupResources, raw: 404"):
        test.assertEqual(status, 404)
    with test.subTest("GroupResources, raw: x-amzn-ErrorType"):
        test.assertEqual(headers.get("x-amzn-errortype"), "NotFoundException")
    with test.subTest("GroupResources, raw: the body"):
        test.assertEqual(json.loads(body), {"Message": "One or more of the specified resources don't exist."})

    # Requests outside the model's limits, and a group that cannot take members.
    refused(
        test,
        "GroupResources: eleven ARNs",
        lambda: rg.group_resources(
            Group="capblock-check-r1", ResourceArns=[reservation(n) for n in range(11)]
        ),
        400,
        "BadRequestException",
    )
    refused(
        test,
        "GroupResources: not an ARN",
        lambda: rg.group_resources(Group="capblock-check-r1", ResourceArns=["cr-0123456789abcdef0"]),
        400,
        "BadRequestException",
    )
    status, headers, body = raw(
        url, "/ungroup-resources", json.dumps({"Group": "capblock-check-r1"}).encode()
    )
    with test.subTest("UngroupResources, raw, no ResourceArns: 400"):
        test.assertEqual((status, headers.get("x-amzn-errortype")), (400, "BadRequestException"))
    with test.subTest("UngroupResources, raw, no ResourceArns: the message names the field"):
        test.assertTrue(b"resourceArns" in body, repr(body))
    rg.create_group(Name="capblock-check-plain", Description="no configuration")
    refused(
        test,
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
    with test.subTest("GroupResources: in us-west-2"):
        test.assertEqual(
            answer(
                west.group_resources(Group="capblock-check-r1", ResourceArns=[reservation(9, "us-west-2")])
            )["Succeeded"],
            [reservation(9, "us-west-2")],
        )
    with test.subTest("ListGroupResources: us-east-1's group does not have it"):
        test.assertEqual(listed(rg, "capblock-check-r1"), [])
    with test.subTest("ListGroupResources: us-west-2's group has it"):
        test.assertEqual(listed(west, "capblock-check-r1"), [reservation(9, "us-west-2")])
    west.delete_group(Group="capblock-check-r1")

    # DeleteGroup (moto's) forgets the members: the group made again starts empty.
    rg.group_resources(Group="capblock-check-r1", ResourceArns=[CR])
    with test.subTest("ListGroupResources: a member before DeleteGroup"):
        test.assertEqual(listed(rg, "capblock-check-r1"), [CR])
    with test.subTest("DeleteGroup: deleted"):
        test.assertEqual(rg.delete_group(Group=group_arn)["Group"]["Name"], "capblock-check-r1")
    refused(
        test,
        "ListGroupResources: the deleted group",
        lambda: rg.list_group_resources(Group="capblock-check-r1"),
        404,
        "NotFoundException",
    )
    refused(
        test,
        "GroupResources: the deleted group",
        lambda: rg.group_resources(Group=group_arn, ResourceArns=[CR]),
        404,
        "NotFoundException",
    )
    rg.create_group(Name="capblock-check-r1", Configuration=POOL, Tags=TAGS)
    with test.subTest("ListGroupResources: the group made again is empty"):
        test.assertEqual(listed(rg, "capblock-check-r1"), [])
    rg.delete_group(Group="capblock-check-r1")

    # moto still serves the rest of Resource Groups through the layer.
    with test.subTest("ListGroups: through the layer"):
        test.assertEqual(rg.list_groups()["GroupIdentifiers"], [])
    with test.subTest("the token is base64"):
        test.assertEqual(base64.b64decode(first.get("NextToken", "")).startswith(b"{"), True)


class ResourceGroupsCheck(MotoTestCase):
    def test_membership_calls(self) -> None:
        """GroupResources, UngroupResources and ListGroupResources through the layer."""
        run(self, self.url)


if __name__ == "__main__":
    unittest.main()
