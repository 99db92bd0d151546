#!/usr/bin/env python3
"""boto3 conformance check for capblock-market-sim.

Drives every action of the simulator through boto3's real EC2 client, so botocore parses
(and type-converts) every response against the EC2 service model. Needs only the standard
library and boto3.

    AWS_ENDPOINT_URL_EC2=http://127.0.0.1:PORT python3 tests/boto3_check.py
    python3 tests/boto3_check.py --endpoint http://127.0.0.1:PORT [--scenario examples/basic.toml]

The check resets the simulator with POST /_sim/scenario first, so it may be run against a
simulator that is already in use (it wipes its state). The general part (--scenario) switches
off the cap of 6 offerings, same-day blocks and the describe limit; check_real_market then
loads its own scenario (REAL_MARKET) and checks those and the other behaviours of the real EC2
(quota 0, unsold types, Local Zones); check_iam_denials plays a caller denied an action by its
access key; check_usage plays an active block whose instances are partly idle
(AvailableInstanceCount); check_launch_templates creates launch templates and versions and reads
them back (a Capacity Block template's market type and reservation target included); check_ram
shares Capacity Blocks through boto3's RAM client (restJson1, the same endpoint). A unittest
test: each check a subtest, every failure reported, exit non-zero on any.
"""

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
import unittest
import urllib.error
import urllib.request
from decimal import Decimal
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

# Scenarios kept as data, beside this check.
SCENARIOS = Path(__file__).resolve().parent / "scenarios"

UTC = dt.UTC
CB_ID = re.compile(r"^cb-[0-9a-f]{17}$")
CR_ID = re.compile(r"^cr-[0-9a-f]{17}$")
I_ID = re.compile(r"^i-[0-9a-f]{17}$")
LT_ID = re.compile(r"^lt-[0-9a-f]{17}$")
QUANTITY_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
TYPE_TAG = "aws:ec2capacityreservation:capacityReservationType"
NOT_FOUND = "InvalidCapacityBlockOfferingIdNotFound"
# What every offering of basic.toml (24 h blocks) and every Capacity Block reservation says alike.
OFFERING_FIELDS = {
    "CapacityBlockDurationHours": 24,
    "CapacityBlockDurationMinutes": 0,
    "CurrencyCode": "USD",
    "Tenancy": "default",
    "ZoneType": "availability-zone",
}
RESERVATION_FIELDS = {
    "OwnerId": "111122223333",
    "Tenancy": "default",
    "EndDateType": "limited",
    "InstanceMatchCriteria": "targeted",
    "ReservationType": "capacity-block",
}


def t(s):
    return dt.datetime.fromisoformat(s)


class Sim:
    def __init__(self, endpoint):
        self.endpoint = endpoint.rstrip("/")

    def _req(self, method, path, body=None, ctype="application/json"):
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(self.endpoint + path, data=data, method=method, headers={"content-type": ctype})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        return json.loads(text) if text.startswith(("{", "[")) else text

    def scenario(self, toml_text):
        return self._req("POST", "/_sim/scenario", toml_text, "application/toml")

    def set_clock(self, when):
        return self._req("POST", "/_sim/clock", {"set": when})

    def behaviour(self, **kw):
        return self._req("POST", "/_sim/behaviour", kw)

    def payment(self, **kw):
        return self._req("POST", "/_sim/payment", kw)

    def inject(self, **kw):
        return self._req("POST", "/_sim/reservations", kw)

    def state(self):
        return self._req("GET", "/_sim/state")


def client(endpoint, region="us-east-1", validate=True, read_timeout=10, key="AKIDSIMULATOR", service="ec2"):
    return boto3.client(
        service,
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key="simulator-secret",
        config=Config(
            # Exactly one attempt. In a client Config, botocore reads `max_attempts` as the number
            # of RETRIES (whatever the mode): {"max_attempts": 1} sends a failing call twice.
            retries={"total_max_attempts": 1},
            read_timeout=read_timeout,
            connect_timeout=3,
            parameter_validation=validate,
        ),
    )


def expect_error(test: unittest.TestCase, name, code, status, fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        with test.subTest(f"{name}: error code"):
            test.assertEqual(e.response["Error"]["Code"], code)
        with test.subTest(f"{name}: HTTP status"):
            test.assertEqual(e.response["ResponseMetadata"]["HTTPStatusCode"], status)
        with test.subTest(f"{name}: has a message"):
            test.assertTrue(bool(e.response["Error"].get("Message")))
        return e
    with test.subTest(f"{name}: expected {code}"):
        test.fail("the call succeeded")
    return None


def expect_no_answer(test: unittest.TestCase, name, fn, **kw):
    try:
        fn(**kw)
    except (ReadTimeoutError, ConnectionClosedError):
        return
    except Exception as e:  # noqa: BLE001 - any transport error is what we want here
        with test.subTest(name):
            test.assertTrue("Connection" in type(e).__name__ or "Timeout" in type(e).__name__, f"{type(e).__name__}: {e}")
        return
    with test.subTest(name):
        test.fail("the call was answered")


def all_offerings(ec2, page_size=None, **kw):
    pages = ec2.get_paginator("describe_capacity_block_offerings").paginate(
        PaginationConfig={"PageSize": page_size} if page_size else {}, **kw
    )
    out, n = [], 0
    for page in pages:
        n += 1
        out.extend(page["CapacityBlockOfferings"])
    return out, n


def check_offerings(test: unittest.TestCase, ec2, ec2_raw, ec2_unsupported):
    offers, pages = all_offerings(ec2, page_size=5, CapacityDurationHours=24, InstanceType="p5.48xlarge")
    # basic.toml: start_days 1,2,3,7 x azs a,b x counts 1,2,4.
    with test.subTest("offerings: count"):
        test.assertEqual(len(offers), 24)
    with test.subTest("offerings: paginated"):
        test.assertTrue(pages >= 5, f"{pages} pages")
    with test.subTest("offerings: ids unique"):
        test.assertEqual(len({o["CapacityBlockOfferingId"] for o in offers}), 24)
    for o in offers:
        oid = o["CapacityBlockOfferingId"]
        with test.subTest(f"offering {oid}: id shape"):
            test.assertTrue(CB_ID.match(oid) is not None, oid)
        with test.subTest(f"offering {oid}: UpfrontFee is str"):
            test.assertTrue(isinstance(o["UpfrontFee"], str), repr(o["UpfrontFee"]))
        want_fee = (Decimal("4.10") * 8 * o["InstanceCount"] * 24).quantize(Decimal("0.01"))
        with test.subTest(f"offering {oid}: fee"):
            test.assertEqual(o["UpfrontFee"], str(want_fee))
        with test.subTest(f"offering {oid}: StartDate datetime"):
            test.assertTrue(isinstance(o["StartDate"], dt.datetime) and o["StartDate"].tzinfo is not None)
        with test.subTest(f"offering {oid}: InstanceCount int"):
            test.assertTrue(isinstance(o["InstanceCount"], int))
        with test.subTest(f"offering {oid}: starts 11:30 UTC"):
            test.assertEqual((o["StartDate"].hour, o["StartDate"].minute), (11, 30))
        with test.subTest(f"offering {oid}: 24 h"):
            test.assertEqual(o["EndDate"] - o["StartDate"], dt.timedelta(hours=24))
        for field, want in OFFERING_FIELDS.items():
            with test.subTest(f"offering {oid}: {field}"):
                test.assertEqual(o[field], want)
        with test.subTest(f"offering {oid}: start window"):
            test.assertTrue(t("2026-12-01T00:30:00Z") <= o["StartDate"] <= t("2027-01-26T00:00:00Z"))

    again, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge")
    with test.subTest("offerings: stable ids on re-ask"):
        test.assertEqual(sorted(o["CapacityBlockOfferingId"] for o in again), sorted(o["CapacityBlockOfferingId"] for o in offers))

    ranged, _ = all_offerings(
        ec2,
        CapacityDurationHours=48,
        InstanceType="p5.48xlarge",
        InstanceCount=2,
        StartDateRange=t("2026-12-02T12:00:00Z"),
        EndDateRange=t("2026-12-06T11:30:00Z"),
    )
    # starts 12-03 (ends 12-05) and 12-04 (ends 12-06) x 2 azs, count 2 only.
    with test.subTest("offerings: date range + count"):
        test.assertEqual(len(ranged), 4)
    with test.subTest("offerings: range respected"):
        test.assertTrue(all(o["StartDate"] >= t("2026-12-02T12:00:00Z") and o["EndDate"] <= t("2026-12-06T11:30:00Z") and o["InstanceCount"] == 2 for o in ranged))

    trn, _ = all_offerings(ec2, CapacityDurationHours=504, InstanceType="trn2.48xlarge")
    with test.subTest("offerings: trn2 21 days"):
        test.assertEqual(len(trn), 1)
    if trn:
        with test.subTest("offerings: trn2 fee"):
            test.assertEqual(trn[0]["UpfrontFee"], "10080.00")
    with test.subTest("offerings: unsold duration empty"):
        test.assertEqual(all_offerings(ec2, CapacityDurationHours=72, InstanceType="p5.48xlarge")[0], [])

    expect_error(test, "offerings: missing duration", "MissingParameter", 400, ec2_raw.describe_capacity_block_offerings, InstanceType="p5.48xlarge")
    expect_error(test, "offerings: 36 h", "InvalidParameterValue", 400, ec2.describe_capacity_block_offerings, CapacityDurationHours=36)
    expect_error(test, "offerings: 15 days", "InvalidParameterValue", 400, ec2.describe_capacity_block_offerings, CapacityDurationHours=360)
    expect_error(test, "offerings: MaxResults 0", "InvalidParameterValue", 400, ec2_raw.describe_capacity_block_offerings, CapacityDurationHours=24, MaxResults=0)
    expect_error(test, "offerings: MaxResults 1001", "InvalidParameterValue", 400, ec2_raw.describe_capacity_block_offerings, CapacityDurationHours=24, MaxResults=1001)
    expect_error(test, "offerings: bad token", "InvalidPaginationToken", 400, ec2.describe_capacity_block_offerings, CapacityDurationHours=24, NextToken="garbage")
    expect_error(test, "offerings: DryRun", "DryRunOperation", 412, ec2.describe_capacity_block_offerings, CapacityDurationHours=24, DryRun=True)
    expect_error(test, "offerings: unsupported region", "UnsupportedOperation", 400, ec2_unsupported.describe_capacity_block_offerings, CapacityDurationHours=24)
    return offers


def pick(offers, az, count, start):
    for o in offers:
        if o["AvailabilityZone"] == az and o["InstanceCount"] == count and o["StartDate"] == t(start):
            return o
    raise AssertionError(f"no offering {az} x{count} at {start}")


def check_reservation_shape(test: unittest.TestCase, name, r, want):
    for k, v in want.items():
        with test.subTest(f"{name}: {k}"):
            test.assertEqual(r.get(k), v)
    with test.subTest(f"{name}: id shape"):
        test.assertTrue(CR_ID.match(r["CapacityReservationId"]) is not None, r["CapacityReservationId"])
    with test.subTest(f"{name}: arn"):
        test.assertEqual(r["CapacityReservationArn"], f"arn:aws:ec2:us-east-1:111122223333:capacity-reservation/{r['CapacityReservationId']}")
    for k in ("TotalInstanceCount", "AvailableInstanceCount"):
        with test.subTest(f"{name}: {k} int"):
            test.assertTrue(isinstance(r[k], int))
    for k in ("StartDate", "EndDate", "CreateDate"):
        with test.subTest(f"{name}: {k} datetime"):
            test.assertTrue(isinstance(r[k], dt.datetime))
    with test.subTest(f"{name}: EbsOptimized bool"):
        test.assertTrue(isinstance(r.get("EbsOptimized"), bool))
    for field, value in RESERVATION_FIELDS.items():
        with test.subTest(f"{name}: {field}"):
            test.assertEqual(r[field], value)


def own_tags(r):
    """The buyer's tags of a reservation, without EC2's aws: tags."""
    return [x for x in r.get("Tags", []) if not x["Key"].startswith("aws:")]


def ec2_tags(r):
    """EC2's aws: tags of a reservation, as a dict."""
    return {x["Key"]: x["Value"] for x in r.get("Tags", []) if x["Key"].startswith("aws:")}


def describe_one(ec2, rid):
    out = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    assert len(out) == 1, out
    return out[0]


def run(test: unittest.TestCase, ep: str, scenario: str):
    """Every check, in order, against the simulator at `ep`, the general part on `scenario`."""
    sim = Sim(ep)
    with test.subTest("health"):
        test.assertEqual(sim._req("GET", "/_sim/health"), "ok")
    with test.subTest("scenario reset"):
        test.assertEqual(sim.scenario(Path(scenario).read_text())["now"], "2026-12-01T00:00:00Z")
    # The general checks below look at every offering of basic.toml, so they switch off what
    # makes answers realistic (see check_real_market for those behaviours).
    sim.behaviour(max_offerings_per_answer=0, same_day_offerings=False, describe_limit=None)

    ec2 = client(ep)
    ec2_raw = client(ep, validate=False)
    west = client(ep, region="us-west-2")
    north = client(ep, region="eu-north-1")

    offers = check_offerings(test, ec2, ec2_raw, north)

    # --- purchases at 2026-12-01T00:00Z ----------------------------------------------------
    a_off = pick(offers, "us-east-1a", 2, "2026-12-02T11:30:00Z")
    c_off = pick(offers, "us-east-1b", 1, "2026-12-02T11:30:00Z")
    tags = [{"Key": "team", "Value": "ml"}, {"Key": "capblock:run", "Value": "r1 & <x>"}]
    spec = [{"ResourceType": "capacity-reservation", "Tags": tags}]
    expect_error(test, "purchase: DryRun", "DryRunOperation", 412, ec2.purchase_capacity_block, CapacityBlockOfferingId=a_off["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX", TagSpecifications=spec, DryRun=True)
    with test.subTest("purchase: DryRun recorded nothing"):
        test.assertEqual(sim.state()["purchases"], [])
    expect_error(test, "purchase: unknown offering", NOT_FOUND, 400, ec2.purchase_capacity_block, CapacityBlockOfferingId="cb-0123456789abcdef0", InstancePlatform="Linux/UNIX")
    expect_error(test, "purchase: malformed offering id", "InvalidCapacityBlockOfferingIdMalformed", 400, ec2.purchase_capacity_block, CapacityBlockOfferingId="cb-nothex", InstancePlatform="Linux/UNIX")
    expect_error(test, "purchase: an aws: tag", "InvalidParameterValue", 400, ec2.purchase_capacity_block, CapacityBlockOfferingId=a_off["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX", TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": QUANTITY_TAG, "Value": "64"}]}])
    expect_error(test, "purchase: wrong tag resource type", "InvalidParameterValue", 400, ec2.purchase_capacity_block, CapacityBlockOfferingId=a_off["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX", TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    expect_error(test, "purchase: missing platform", "MissingParameter", 400, ec2_raw.purchase_capacity_block, CapacityBlockOfferingId=a_off["CapacityBlockOfferingId"])
    expect_error(test, "purchase: offering from another region", NOT_FOUND, 400, west.purchase_capacity_block, CapacityBlockOfferingId=a_off["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")

    resp = ec2.purchase_capacity_block(CapacityBlockOfferingId=a_off["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX", TagSpecifications=spec)
    a = resp["CapacityReservation"]
    a_id = a["CapacityReservationId"]
    check_reservation_shape(test, 
        "purchase A",
        a,
        {
            "InstanceType": "p5.48xlarge",
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": "us-east-1a",
            # Before its start a block shows no instances (counts_before_start = "zero")...
            "TotalInstanceCount": 0,
            "AvailableInstanceCount": 0,
            "State": "payment-pending",
            "StartDate": t("2026-12-02T11:30:00Z"),
            "EndDate": t("2026-12-03T11:30:00Z"),
            "CreateDate": t("2026-12-01T00:00:00Z"),
        },
    )
    with test.subTest("purchase A: tags round-trip"):
        test.assertEqual(sorted((x["Key"], x["Value"]) for x in own_tags(a)), sorted((x["Key"], x["Value"]) for x in tags))
    # ...and its count in EC2's tag.
    with test.subTest("purchase A: EC2's tags"):
        test.assertEqual(ec2_tags(a), {QUANTITY_TAG: "2", TYPE_TAG: "capacity-block"})
    blocks = resp.get("CapacityBlocks", [])
    with test.subTest("purchase A: one capacity block"):
        test.assertEqual(len(blocks), 1)
    if blocks:
        with test.subTest("purchase A: block lists the reservation"):
            test.assertEqual(blocks[0]["CapacityReservationIds"], [a_id])
        with test.subTest("purchase A: block state"):
            test.assertEqual(blocks[0]["State"], "payment-pending")
    c = ec2.purchase_capacity_block(CapacityBlockOfferingId=c_off["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
    c_id = c["CapacityReservationId"]
    with test.subTest("purchase C: no tags but EC2's"):
        test.assertEqual(own_tags(c), [])
    with test.subTest("purchase C: EC2's tags"):
        test.assertEqual(ec2_tags(c), {QUANTITY_TAG: "1", TYPE_TAG: "capacity-block"})
    w_offers, _ = all_offerings(west, CapacityDurationHours=24)
    with test.subTest("us-west-2: offerings"):
        test.assertEqual(len(w_offers), 4)
    b = west.purchase_capacity_block(CapacityBlockOfferingId=w_offers[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
    b_id = b["CapacityReservationId"]
    with test.subTest("purchase B (us-west-2): arn region"):
        test.assertEqual(b["CapacityReservationArn"].split(":")[3], "us-west-2")

    st = sim.state()
    with test.subTest("state: 3 purchases"):
        test.assertEqual(len(st["purchases"]), 3)
    pa = next(p for p in st["purchases"] if p["reservation_id"] == a_id)
    with test.subTest("state: A fee"):
        test.assertEqual(pa["upfront_fee"], a_off["UpfrontFee"])
    with test.subTest("state: A offering"):
        test.assertEqual(pa["offering_id"], a_off["CapacityBlockOfferingId"])
    with test.subTest("state: A tags"):
        test.assertEqual(pa["tags"], {"team": "ml", "capblock:run": "r1 & <x>"})
    with test.subTest("state: purchase calls counted"):
        test.assertEqual(st["calls"].get("PurchaseCapacityBlock"), 10)
    with test.subTest("state: per-region calls"):
        test.assertEqual(st["calls_by_region"]["us-west-2"].get("PurchaseCapacityBlock"), 2)

    # --- describe by id and filters --------------------------------------------------------
    d = describe_one(ec2, a_id)
    with test.subTest("describe A: same as purchase"):
        test.assertEqual({k: d[k] for k in a if k != "Tags"}, {k: a[k] for k in a if k != "Tags"})
    by_tag = ec2.describe_capacity_reservations(Filters=[{"Name": "tag:team", "Values": ["ml"]}])["CapacityReservations"]
    with test.subTest("filter tag:team"):
        test.assertEqual([r["CapacityReservationId"] for r in by_tag], [a_id])
    by_key = ec2.describe_capacity_reservations(Filters=[{"Name": "tag-key", "Values": ["capblock:run"]}])["CapacityReservations"]
    with test.subTest("filter tag-key"):
        test.assertEqual([r["CapacityReservationId"] for r in by_key], [a_id])
    by_quantity = ec2.describe_capacity_reservations(Filters=[{"Name": f"tag:{QUANTITY_TAG}", "Values": ["2"]}])["CapacityReservations"]
    with test.subTest("filter on EC2's quantity tag"):
        test.assertEqual([r["CapacityReservationId"] for r in by_quantity], [a_id])
    blocks_only = ec2.describe_capacity_reservations(Filters=[{"Name": "reservation-type", "Values": ["capacity-block"]}])["CapacityReservations"]
    with test.subTest("filter reservation-type capacity-block"):
        test.assertEqual(sorted(r["CapacityReservationId"] for r in blocks_only), sorted([a_id, c_id]))
    with test.subTest("filter reservation-type default: none"):
        test.assertEqual(ec2.describe_capacity_reservations(Filters=[{"Name": "reservation-type", "Values": ["default"]}])["CapacityReservations"], [])
    pend = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["payment-pending"]}, {"Name": "instance-type", "Values": ["p5.48xlarge"]}])["CapacityReservations"]
    with test.subTest("filter state+type"):
        test.assertEqual(sorted(r["CapacityReservationId"] for r in pend), sorted([a_id, c_id]))
    with test.subTest("filter state active: none"):
        test.assertEqual(ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["active"]}])["CapacityReservations"], [])
    with test.subTest("regions are separate"):
        test.assertEqual([r["CapacityReservationId"] for r in west.describe_capacity_reservations()["CapacityReservations"]], [b_id])
    pages = list(ec2.get_paginator("describe_capacity_reservations").paginate(PaginationConfig={"PageSize": 1}))
    with test.subTest("describe reservations paginates"):
        test.assertEqual(sum(len(p["CapacityReservations"]) for p in pages), 2)
    expect_error(test, "describe: unknown id", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_reservations, CapacityReservationIds=["cr-0123456789abcdef0"])
    expect_error(test, "describe: other region's id", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_reservations, CapacityReservationIds=[b_id])
    expect_error(test, "describe: bad filter", "InvalidParameterValue", 400, ec2.describe_capacity_reservations, Filters=[{"Name": "bogus", "Values": ["x"]}])

    def state_at(when, rid, state, name, client=ec2):
        """Moves the simulator's clock to `when`, then checks `rid`'s state there (subtest `name`)."""
        sim.set_clock(when)
        with test.subTest(name):
            test.assertEqual(describe_one(client, rid)["State"], state)

    # --- payment over sim time -------------------------------------------------------------
    sim.payment(reservation_id=c_id, outcome="fail", after_hours=1)
    state_at("2026-12-01T00:59:00Z", c_id, "payment-pending", "C pending before its override")
    state_at("2026-12-01T01:00:00Z", c_id, "payment-failed", "C payment-failed at +1 h")
    # A failed block stays visible failed_payment_visible_minutes (60), then is gone.
    state_at("2026-12-01T01:59:00Z", c_id, "payment-failed", "C still visible 59 min after failing")
    sim.set_clock("2026-12-01T02:00:00Z")
    expect_error(test, "C NotFound 60 min after failing", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_reservations, CapacityReservationIds=[c_id])
    with test.subTest("C gone from listings"):
        test.assertTrue(c_id not in [r["CapacityReservationId"] for r in ec2.describe_capacity_reservations()["CapacityReservations"]])
    with test.subTest("A still pending at +1 h"):
        test.assertEqual(describe_one(ec2, a_id)["State"], "payment-pending")
    state_at("2026-12-01T03:00:00Z", a_id, "scheduled", "A scheduled at +3 h")
    with test.subTest("A: no instances shown while scheduled"):
        test.assertEqual((describe_one(ec2, a_id)["TotalInstanceCount"], describe_one(ec2, a_id)["AvailableInstanceCount"]), (0, 0))
    with test.subTest("B (line payment=fail) pending at +3 h"):
        test.assertEqual(describe_one(west, b_id)["State"], "payment-pending")
    state_at("2026-12-01T12:00:00Z", b_id, "payment-failed", "B payment-failed at +12 h", west)
    with test.subTest("extension offerings: none for failed block"):
        test.assertEqual(west.describe_capacity_block_extension_offerings(CapacityReservationId=b_id, CapacityBlockExtensionDurationHours=24)["CapacityBlockExtensionOfferings"], [])
    with test.subTest("instances: none while scheduled"):
        test.assertEqual(ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [a_id]}])["Reservations"], [])

    # An offering id from an old price step is no longer purchasable.
    sim.set_clock("2026-12-03T00:00:00Z")
    stale = pick(offers, "us-east-1a", 1, "2026-12-08T11:30:00Z")
    expect_error(test, "purchase: stale price step", NOT_FOUND, 400, ec2.purchase_capacity_block, CapacityBlockOfferingId=stale["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")
    new_price, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge", InstanceCount=1)
    with test.subTest("offerings: new price step"):
        test.assertTrue(all(o["UpfrontFee"] == "547.20" for o in new_price), str({o["UpfrontFee"] for o in new_price}))

    # --- active: instances, extension -------------------------------------------------------
    sim.set_clock("2026-12-02T11:30:00Z")
    d = describe_one(ec2, a_id)
    with test.subTest("A active at start"):
        test.assertEqual(d["State"], "active")
    with test.subTest("A shows its 2 instances from its start"):
        test.assertEqual(d["TotalInstanceCount"], 2)
    with test.subTest("A keeps EC2's tags once active"):
        test.assertEqual(ec2_tags(d), {QUANTITY_TAG: "2", TYPE_TAG: "capacity-block"})
    with test.subTest("A available 0 while active"):
        test.assertEqual(d["AvailableInstanceCount"], 0)
    res = ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [a_id]}])["Reservations"]
    insts = [i for r in res for i in r["Instances"]]
    with test.subTest("instances: count"):
        test.assertEqual(len(insts), 2)
    for i in insts:
        with test.subTest("instances: id shape"):
            test.assertTrue(I_ID.match(i["InstanceId"]) is not None, i["InstanceId"])
        with test.subTest("instances: state"):
            test.assertEqual(i["State"], {"Code": 16, "Name": "running"})
        with test.subTest("instances: reservation"):
            test.assertEqual(i["CapacityReservationId"], a_id)
        with test.subTest("instances: az"):
            test.assertEqual(i["Placement"]["AvailabilityZone"], "us-east-1a")
        with test.subTest("instances: type"):
            test.assertEqual(i["InstanceType"], "p5.48xlarge")
    res2 = ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [a_id]}])["Reservations"]
    with test.subTest("instances: stable ids"):
        test.assertEqual(sorted(i["InstanceId"] for r in res2 for i in r["Instances"]), sorted(i["InstanceId"] for i in insts))

    ext_offers = ec2.describe_capacity_block_extension_offerings(CapacityReservationId=a_id, CapacityBlockExtensionDurationHours=48)["CapacityBlockExtensionOfferings"]
    with test.subTest("extension offerings: one"):
        test.assertEqual(len(ext_offers), 1)
    eo = ext_offers[0]
    with test.subTest("extension offering: starts at current end"):
        test.assertEqual(eo["CapacityBlockExtensionStartDate"], t("2026-12-03T11:30:00Z"))
    with test.subTest("extension offering: end"):
        test.assertEqual(eo["CapacityBlockExtensionEndDate"], t("2026-12-05T11:30:00Z"))
    with test.subTest("extension offering: fee"):
        test.assertEqual(eo["UpfrontFee"], "2304.00")
    with test.subTest("extension offering: hours"):
        test.assertEqual(eo["CapacityBlockExtensionDurationHours"], 48)
    with test.subTest("extension offering: count"):
        test.assertEqual(eo["InstanceCount"], 2)
    with test.subTest("extension offering: StartDate"):
        test.assertEqual(eo["StartDate"], t("2026-12-02T11:30:00Z"))
    expect_error(test, "extension offerings: bad duration", "InvalidParameterValue", 400, ec2.describe_capacity_block_extension_offerings, CapacityReservationId=a_id, CapacityBlockExtensionDurationHours=30)
    expect_error(test, "extension offerings: unknown id", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_block_extension_offerings, CapacityReservationId="cr-0123456789abcdef0", CapacityBlockExtensionDurationHours=24)
    expect_error(test, "extension offerings: a failed block gone", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_block_extension_offerings, CapacityReservationId=c_id, CapacityBlockExtensionDurationHours=24)
    expect_error(test, "extension purchase: DryRun", "DryRunOperation", 412, ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId=eo["CapacityBlockExtensionOfferingId"], CapacityReservationId=a_id, DryRun=True)
    expect_error(test, "extension purchase: unknown offering", "InvalidCapacityBlockExtensionOfferingId.NotFound", 400, ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId="cbe-0123456789abcdef0", CapacityReservationId=a_id)
    ext = ec2.purchase_capacity_block_extension(CapacityBlockExtensionOfferingId=eo["CapacityBlockExtensionOfferingId"], CapacityReservationId=a_id)["CapacityBlockExtensions"]
    with test.subTest("extension purchase: one"):
        test.assertEqual(len(ext), 1)
    with test.subTest("extension purchase: status"):
        test.assertEqual(ext[0]["CapacityBlockExtensionStatus"], "payment-pending")
    with test.subTest("extension purchase: purchase date"):
        test.assertEqual(ext[0]["CapacityBlockExtensionPurchaseDate"], t("2026-12-02T11:30:00Z"))
    with test.subTest("extension purchase: fee"):
        test.assertEqual(ext[0]["UpfrontFee"], "2304.00")
    with test.subTest("extension pending: end unchanged"):
        test.assertEqual(describe_one(ec2, a_id)["EndDate"], t("2026-12-03T11:30:00Z"))
    with test.subTest("extension pending: no more offerings"):
        test.assertEqual(ec2.describe_capacity_block_extension_offerings(CapacityReservationId=a_id, CapacityBlockExtensionDurationHours=48)["CapacityBlockExtensionOfferings"], [])
    sim.set_clock("2026-12-02T14:30:00Z")
    with test.subTest("extension paid: end moved"):
        test.assertEqual(describe_one(ec2, a_id)["EndDate"], t("2026-12-05T11:30:00Z"))
    with test.subTest("extension paid: status in state"):
        test.assertEqual(sim.state()["extensions"][0]["status"], "payment-succeeded")

    # --- expiry and disappearance ----------------------------------------------------------
    state_at("2026-12-05T11:29:00Z", a_id, "active", "A active before extended end")
    state_at("2026-12-05T11:30:00Z", a_id, "expired", "A expired at extended end")
    with test.subTest("instances: none once expired"):
        test.assertEqual(ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [a_id]}])["Reservations"], [])
    state_at("2027-02-03T11:29:00Z", a_id, "expired", "A visible 59 days after expiry")
    sim.set_clock("2027-02-03T11:30:00Z")
    expect_error(test, "A NotFound 60 days after expiry", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_reservations, CapacityReservationIds=[a_id])
    with test.subTest("A gone from listings"):
        test.assertEqual([r["CapacityReservationId"] for r in ec2.describe_capacity_reservations()["CapacityReservations"] if r["CapacityReservationId"] == a_id], [])

    # --- injected (console) reservation ----------------------------------------------------
    inj = sim.inject(region="us-east-1", instance_type="trn2.48xlarge", instance_count=1, availability_zone="us-east-1c", start="2027-02-01T11:30:00Z", end="2027-02-08T11:30:00Z", upfront_fee="1234.5", tags={"owner": "console"})
    d = describe_one(ec2, inj["reservation_id"])
    with test.subTest("injected: active"):
        test.assertEqual(d["State"], "active")
    with test.subTest("injected: tags"):
        test.assertEqual(own_tags(d), [{"Key": "owner", "Value": "console"}])
    with test.subTest("injected: EC2's tags"):
        test.assertEqual(ec2_tags(d), {QUANTITY_TAG: "1", TYPE_TAG: "capacity-block"})
    st = sim.state()
    with test.subTest("injected: not a purchase"):
        test.assertTrue(all(p["reservation_id"] != inj["reservation_id"] for p in st["purchases"]))
    with test.subTest("injected: listed in reservations"):
        test.assertTrue(any(r["reservation_id"] == inj["reservation_id"] for r in st["reservations"]))
    with test.subTest("injected: instances"):
        test.assertEqual(len(ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [inj["reservation_id"]]}])["Reservations"][0]["Instances"]), 1)

    # --- instance types --------------------------------------------------------------------
    its = {x["InstanceType"]: x for x in ec2.describe_instance_types(InstanceTypes=["p5.48xlarge", "p5.4xlarge", "trn2.48xlarge", "trn2.3xlarge", "trn1.32xlarge", "p6-b200.48xlarge"])["InstanceTypes"]}
    with test.subTest("instance types: count"):
        test.assertEqual(len(its), 6)
    gpu = its["p5.48xlarge"]["GpuInfo"]["Gpus"][0]
    with test.subTest("p5.48xlarge GPUs"):
        test.assertEqual(gpu["Count"], 8)
    with test.subTest("p5.48xlarge GPU maker"):
        test.assertEqual(gpu["Manufacturer"], "NVIDIA")
    with test.subTest("p5.48xlarge GPU memory int"):
        test.assertTrue(isinstance(gpu["MemoryInfo"]["SizeInMiB"], int))
    with test.subTest("p5.4xlarge GPUs"):
        test.assertEqual(its["p5.4xlarge"]["GpuInfo"]["Gpus"][0]["Count"], 1)
    with test.subTest("p6-b200 GPUs"):
        test.assertEqual(its["p6-b200.48xlarge"]["GpuInfo"]["Gpus"][0]["Count"], 8)
    with test.subTest("trn2.48xlarge Neuron"):
        test.assertEqual(its["trn2.48xlarge"]["NeuronInfo"]["NeuronDevices"][0]["Count"], 16)
    with test.subTest("trn1.32xlarge Neuron"):
        test.assertEqual(its["trn1.32xlarge"]["NeuronInfo"]["NeuronDevices"][0]["Count"], 16)
    with test.subTest("trn2.3xlarge Neuron"):
        test.assertEqual(its["trn2.3xlarge"]["NeuronInfo"]["NeuronDevices"][0]["Count"], 1)
    with test.subTest("trn2 has no GpuInfo"):
        test.assertTrue("GpuInfo" not in its["trn2.48xlarge"])
    expect_error(test, "instance types: unknown", "InvalidInstanceType", 400, ec2.describe_instance_types, InstanceTypes=["m9.fake"])

    # --- faults ----------------------------------------------------------------------------
    sim.behaviour(throttle={"rate_per_sec": 0.2, "burst": 3})
    codes = []
    for _ in range(6):
        try:
            ec2.describe_capacity_reservations()
            codes.append("ok")
        except ClientError as e:
            codes.append((e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]))
    with test.subTest("throttle: burst then RequestLimitExceeded"):
        test.assertEqual(codes, ["ok"] * 3 + [("RequestLimitExceeded", 503)] * 3)
    with test.subTest("throttle: /_sim/ is never throttled"):
        test.assertEqual(sim.state()["faults_injected"]["throttled"], 3)
    sim.behaviour(throttle=None)
    with test.subTest("throttle: off again"):
        ec2.describe_capacity_reservations()

    sim.behaviour(error_5xx_rate=1.0)
    expect_error(test, "5xx: InternalError", "InternalError", 500, ec2.describe_capacity_reservations)
    sim.behaviour(error_5xx_rate=0.0)

    sim.behaviour(timeout_rate=1.0, timeout_secs=1)
    expect_no_answer(test, "timeout: no answer", client(ep, read_timeout=5).describe_capacity_reservations)
    sim.behaviour(timeout_rate=0.0, down_regions=["us-west-2"])
    expect_no_answer(test, "down region: no answer", client(ep, region="us-west-2", read_timeout=5).describe_capacity_reservations)
    with test.subTest("down region: others still answer"):
        ec2.describe_capacity_reservations()
    sim.behaviour(down_regions=[])

    sim.behaviour(drop_purchase_response=True)
    cur, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge", InstanceCount=1)
    before = len(sim.state()["purchases"])
    expect_no_answer(test, "dropped purchase: no answer", client(ep, read_timeout=5).purchase_capacity_block, CapacityBlockOfferingId=cur[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")
    st = sim.state()
    with test.subTest("dropped purchase: still recorded"):
        test.assertEqual(len(st["purchases"]), before + 1)
    with test.subTest("dropped purchase: counted"):
        test.assertEqual(st["faults_injected"]["dropped_purchase_responses"], 1)
    sim.behaviour(drop_purchase_response=False, timeout_secs=30)
    with test.subTest("faults: timeouts counted"):
        test.assertEqual(st["faults_injected"]["timeouts"], 1)
    with test.subTest("faults: 5xx counted"):
        test.assertEqual(st["faults_injected"]["error_5xx"], 1)

    # --- unknown action (raw request: boto3 only sends known ones) -------------------------
    req = urllib.request.Request(ep, data=b"Action=NoSuchThing&Version=2016-11-15", method="POST", headers={"content-type": "application/x-www-form-urlencoded"})
    try:
        urllib.request.urlopen(req, timeout=5)
        with test.subTest("unknown action: 400"):
            test.fail("answered 200")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        with test.subTest("unknown action: status"):
            test.assertEqual(e.code, 400)
        with test.subTest("unknown action: code"):
            test.assertTrue("<Code>InvalidAction</Code>" in body, body)

    check_real_market(test, sim, ep)
    check_ultraservers_and_health(test, sim, ep)
    check_readings(test, sim, ep, Path(scenario).read_text())
    check_iam_denials(test, sim, ep, Path(scenario).read_text())
    check_usage(test, sim, ep)
    check_launch_templates(test, sim, ep, Path(scenario).read_text())
    check_ram(test, sim, ep, Path(scenario).read_text())


# A market for the behaviours of the real EC2 that the general checks switch off.
REAL_MARKET = (SCENARIOS / "real-market.toml").read_text(encoding="utf-8")

ACCELERATORS = {"p5.48xlarge": 8, "p5e.48xlarge": 8, "p6-b200.48xlarge": 8, "p4d.24xlarge": 8, "trn2.48xlarge": 16}


def minutes(o):
    return int((o["EndDate"] - o["StartDate"]).total_seconds()) // 60


def cheapest_first_key(o):
    """The documented order: price per accelerator-hour, start, zone, count, id. The price is
    recovered from the fee (rounded to cents, so exact to well under 0.001 for these blocks)."""
    units = ACCELERATORS[o["InstanceType"]] * o["InstanceCount"] * minutes(o)
    price = (Decimal(o["UpfrontFee"]) * 60 / units).quantize(Decimal("0.001"))
    return (price, o["StartDate"], o["AvailabilityZone"], o["InstanceCount"], o["CapacityBlockOfferingId"])


def describe_code(ec2, **kw):
    """'ok', or (error code, HTTP status)."""
    try:
        ec2.describe_capacity_block_offerings(CapacityDurationHours=24, **kw)
        return "ok"
    except ClientError as e:
        return (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])


def sim_error(sim, behaviour):
    """The error a refused POST /_sim/behaviour answers ('' if it was accepted)."""
    try:
        sim.behaviour(**behaviour)
        return ""
    except urllib.error.HTTPError as e:
        return json.loads(e.read().decode())["error"]


def describe_calls(sim):
    return sim.state()["calls"].get("DescribeCapacityBlockOfferings", 0)


def check_describe_limit(test: unittest.TestCase, sim, ep, ec2):
    """The default describe limit: burst 2, a token every 4 s, per account and region."""
    limited = ("CapacityBlockDescribeLimitExceeded", 400)
    with test.subTest("describe limit: default is on"):
        test.assertEqual(sim._req("GET", "/_sim/behaviour")["describe_limit"], {"burst": 2, "refill_secs": 4.0})
    codes = [describe_code(ec2) for _ in range(3)]
    with test.subTest("describe limit: burst of 2, then CapacityBlockDescribeLimitExceeded (400)"):
        test.assertEqual(codes, ["ok", "ok", limited])
    e = expect_error(test, "describe limit: DryRun is limited too", "CapacityBlockDescribeLimitExceeded", 400, ec2.describe_capacity_block_offerings, CapacityDurationHours=24, DryRun=True)
    if e:
        with test.subTest("describe limit: message"):
            test.assertEqual(e.response["Error"]["Message"], "You've reached the limit for this account.")
    with test.subTest("describe limit: other actions are not limited"):
        test.assertEqual(len(ec2.describe_capacity_reservations()["CapacityReservations"]), 0)
    with test.subTest("describe limit: another region has its own"):
        test.assertEqual(describe_code(client(ep, region="us-west-2")), "ok")
    # botocore does not class the code as throttling: even its standard retry mode sends once.
    standard = boto3.client("ec2", region_name="us-east-1", endpoint_url=ep, aws_access_key_id="AKIDSIMULATOR", aws_secret_access_key="simulator-secret", config=Config(retries={"mode": "standard", "total_max_attempts": 3}))
    before = describe_calls(sim)
    with test.subTest("describe limit: standard retries"):
        test.assertEqual(describe_code(standard), limited)
    with test.subTest("describe limit: botocore did not retry it"):
        test.assertEqual(describe_calls(sim) - before, 1)
    time.sleep(4.2)
    with test.subTest("describe limit: a token again after 4 s"):
        test.assertEqual(describe_code(ec2), "ok")
    with test.subTest("describe limit: and only one"):
        test.assertEqual(describe_code(ec2), limited)
    with test.subTest("describe limit: refusals counted"):
        test.assertEqual(sim.state()["faults_injected"]["describe_limited"], 4)

    # Other callers in the account (2 a second) empty the bucket without this client calling.
    # (Posting the same limit again changes nothing; off and on again starts a full bucket.)
    sim.behaviour(describe_limit=None)
    sim.behaviour(describe_limit={"burst": 2, "refill_secs": 4.0}, describe_limit_other_callers_per_min=120.0)
    with test.subTest("describe limit: fresh bucket"):
        test.assertEqual(describe_code(ec2), "ok")
    time.sleep(1.2)
    with test.subTest("describe limit: drained by the other callers"):
        test.assertEqual(describe_code(ec2), limited)
    sim.behaviour(describe_limit_other_callers_per_min=0.0, describe_limit=None)
    with test.subTest("describe limit: off"):
        test.assertEqual([describe_code(ec2) for _ in range(4)], ["ok"] * 4)

    # Discrete other callers: a person's 3 searches at once in the console (then none for an
    # hour) spend the same bucket in every region, one of them refused; GET /_sim/state counts
    # them per region (the regions the scenario names, and those asked) and per caller.
    limited_before = sim.state()["faults_injected"]["describe_limited"]
    console = {"name": "console", "calls": 3, "every_secs": 3600}
    b = sim.behaviour(describe_limit={"burst": 2, "refill_secs": 4.0}, describe_limit_others=[console])
    with test.subTest("others: in the behaviour"):
        test.assertEqual(b["describe_limit_others"], [dict(console, over_secs=0.0, every_secs=3600.0, offset_secs=0.0)])
    with test.subTest("others: capblock finds the bucket spent"):
        test.assertEqual(describe_code(ec2), limited)
    others = sim.state()["describe_limit_others"]
    with test.subTest("others: us-east-1, 2 served and 1 refused"):
        test.assertEqual(others["by_region"].get("us-east-1"), {"calls": 3, "refused": 1})
    with test.subTest("others: us-west-2 as well, not asked since"):
        test.assertEqual(others["by_region"].get("us-west-2"), {"calls": 3, "refused": 1})
    totals = {"calls": sum(r["calls"] for r in others["by_region"].values()), "refused": sum(r["refused"] for r in others["by_region"].values())}
    with test.subTest("others: the totals are the regions'"):
        test.assertEqual({"calls": others["calls"], "refused": others["refused"]}, totals)
    with test.subTest("others: by caller"):
        test.assertEqual(others["by_caller"], {"console": totals})
    with test.subTest("others: their refusals are not capblock's"):
        test.assertEqual(sim.state()["faults_injected"]["describe_limited"], limited_before + 1)
    bad_caller = sim_error(sim, {"describe_limit_others": [{"name": "console", "calls": 0, "every_secs": 20}]})
    with test.subTest("others: a bad caller is refused by name"):
        test.assertTrue("describe_limit_others[0] (console): calls" in bad_caller, bad_caller)
    sim.behaviour(describe_limit_others=[], describe_limit=None)

    # Quota 0 for trn2 in us-east-1: the same code on every call, however slowly asked.
    sim.behaviour(describe_limit={"burst": 2, "refill_secs": 4.0})
    limited_before = sim.state()["faults_injected"]["describe_limited"]
    with test.subTest("quota 0: refused"):
        test.assertEqual(describe_code(ec2, InstanceType="trn2.48xlarge"), limited)
    with test.subTest("quota 0: a token was left (p5 answered)"):
        test.assertEqual(describe_code(ec2, InstanceType="p5.48xlarge"), "ok")
    time.sleep(4.2)
    with test.subTest("quota 0: still refused after a wait"):
        test.assertEqual(describe_code(ec2, InstanceType="trn2.48xlarge"), limited)
    with test.subTest("quota 0: any trn2 size"):
        test.assertEqual(describe_code(ec2, InstanceType="trn2.3xlarge"), limited)
    with test.subTest("quota 0: tokens untouched (2 p5 calls answered)"):
        test.assertEqual([describe_code(ec2, InstanceType="p5.48xlarge") for _ in range(2)], ["ok", "ok"])
    faults = sim.state()["faults_injected"]
    with test.subTest("quota 0: counted as quota_zero"):
        test.assertEqual(faults["quota_zero"], 3)
    with test.subTest("quota 0: not as describe_limited"):
        test.assertEqual(faults["describe_limited"], limited_before)


def check_real_market(test: unittest.TestCase, sim, ep):
    with test.subTest("real market: reset"):
        test.assertEqual(sim.scenario(REAL_MARKET)["now"], "2026-12-01T04:25:00Z")
    ec2 = client(ep)
    check_describe_limit(test, sim, ep, ec2)
    # The rest looks at answers, not at pacing.
    sim.behaviour(describe_limit=None)

    # --- at most 6 offerings, the cheapest per accelerator-hour first ----------------------
    answer = ec2.describe_capacity_block_offerings(CapacityDurationHours=24)
    capped = answer["CapacityBlockOfferings"]
    with test.subTest("cap: 6 offerings"):
        test.assertEqual(len(capped), 6)
    with test.subTest("cap: no NextToken past the cap"):
        test.assertTrue("NextToken" not in answer, answer.get("NextToken"))
    with test.subTest("cap: in cheapest-first order"):
        test.assertEqual([o["CapacityBlockOfferingId"] for o in capped], [o["CapacityBlockOfferingId"] for o in sorted(capped, key=cheapest_first_key)])
    if capped:
        with test.subTest("cap: the cheaper p5e comes first although it starts last"):
            test.assertEqual(capped[0]["InstanceType"], "p5e.48xlarge")
    paged, pages = all_offerings(ec2, page_size=4, CapacityDurationHours=24)
    with test.subTest("cap: pages of 4 run over the 6"):
        test.assertEqual(([o["CapacityBlockOfferingId"] for o in paged], pages), ([o["CapacityBlockOfferingId"] for o in capped], 2))
    sim.behaviour(max_offerings_per_answer=0)
    everything, _ = all_offerings(ec2, CapacityDurationHours=24)
    with test.subTest("cap: more than 6 without the cap"):
        test.assertTrue(len(everything) > 6, str(len(everything)))
    with test.subTest("cap: the 6 kept are the 6 cheapest"):
        test.assertEqual([o["CapacityBlockOfferingId"] for o in sorted(everything, key=cheapest_first_key)[:6]], [o["CapacityBlockOfferingId"] for o in capped])
    sim.behaviour(max_offerings_per_answer=6)

    # --- types a region does not sell ------------------------------------------------------
    west = client(ep, region="us-west-2")
    not_sold = "InvalidParameterValue"
    e = expect_error(test, "not sold: p5e in us-west-2 (not in sells)", not_sold, 400, west.describe_capacity_block_offerings, CapacityDurationHours=24, InstanceType="p5e.48xlarge")
    if e:
        with test.subTest("not sold: message"):
            test.assertEqual(e.response["Error"]["Message"], "The instance type 'p5e.48xlarge' is not supported for Capacity Blocks in 'us-west-2'. Specify a compatible instance type and try again.")
    expect_error(test, "not sold: p4d in us-east-1 (no sells list, no line)", not_sold, 400, ec2.describe_capacity_block_offerings, CapacityDurationHours=24, InstanceType="p4d.24xlarge")
    expect_error(test, "not sold: a type unknown to the table", not_sold, 400, ec2.describe_capacity_block_offerings, CapacityDurationHours=24, InstanceType="m9.fake")
    with test.subTest("sold without a line: empty answer"):
        test.assertEqual(west.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p5.48xlarge")["CapacityBlockOfferings"], [])
    with test.subTest("sold with a line: offerings"):
        test.assertTrue(len(west.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p4d.24xlarge")["CapacityBlockOfferings"]) > 0)
    with test.subTest("no InstanceType: not checked"):
        test.assertTrue(len(west.describe_capacity_block_offerings(CapacityDurationHours=24)["CapacityBlockOfferings"]) > 0)

    # --- Local Zones: ZoneType, AllAvailabilityZones, opted-in zones ------------------------
    plain = ec2.describe_capacity_block_offerings(CapacityDurationHours=24)["CapacityBlockOfferings"]
    with test.subTest("zones: plain answers are all in availability zones"):
        test.assertEqual({o.get("ZoneType") for o in plain}, {"availability-zone"})
    with test.subTest("zones: Dallas not returned without AllAvailabilityZones"):
        test.assertEqual(ec2.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p6-b200.48xlarge")["CapacityBlockOfferings"], [])
    dfw = ec2.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p6-b200.48xlarge", AllAvailabilityZones=True)["CapacityBlockOfferings"]
    with test.subTest("zones: Dallas with AllAvailabilityZones (11:30 + 2 same-day)"):
        test.assertEqual(len(dfw), 3)
    with test.subTest("zones: Dallas offerings"):
        test.assertEqual({(o["AvailabilityZone"], o["ZoneType"]) for o in dfw}, {("us-east-1-dfw-2a", "local-zone")})
    everywhere = ec2.describe_capacity_block_offerings(CapacityDurationHours=24, AllAvailabilityZones=True)["CapacityBlockOfferings"]
    with test.subTest("zones: with AllAvailabilityZones the cheaper Dallas blocks lead"):
        test.assertEqual([o["InstanceType"] for o in everywhere[:3]], ["p6-b200.48xlarge"] * 3)
    lax = {(o["AvailabilityZone"], o["ZoneType"]) for o in west.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p4d.24xlarge")["CapacityBlockOfferings"]}
    with test.subTest("zones: an opted-in Local Zone comes back, the other not"):
        test.assertEqual(lax, {("us-west-2b", "availability-zone"), ("us-west-2-lax-1a", "local-zone")})
    if dfw:
        r = ec2.purchase_capacity_block(CapacityBlockOfferingId=dfw[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
        with test.subTest("zones: a Local Zone offering bought by id"):
            test.assertEqual(r["AvailabilityZone"], "us-east-1-dfw-2a")

    # --- same-day closest-match blocks: 04:25 + 30 min = 04:55, ending 11:30 -----------------
    same, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge", InstanceCount=1)
    with test.subTest("same-day: the four 04:55 blocks are the cheapest-first head"):
        test.assertEqual([o["StartDate"] for o in same[:4]], [t("2026-12-01T04:55:00Z")] * 4)
    for o in same:
        oid = o["CapacityBlockOfferingId"]
        with test.subTest(f"same-day {oid}: minutes parsed as int"):
            test.assertTrue(isinstance(o["CapacityBlockDurationMinutes"], int), repr(o["CapacityBlockDurationMinutes"]))
        with test.subTest(f"same-day {oid}: hours + minutes = the block"):
            test.assertEqual(o["CapacityBlockDurationHours"] * 60 + o["CapacityBlockDurationMinutes"], minutes(o))
        with test.subTest(f"same-day {oid}: ends 11:30"):
            test.assertEqual((o["EndDate"].hour, o["EndDate"].minute), (11, 30))
    shorter = [o for o in same if o["EndDate"] == t("2026-12-01T11:30:00Z")]
    longer = [o for o in same if o["StartDate"] == t("2026-12-01T04:55:00Z") and o["EndDate"] == t("2026-12-02T11:30:00Z")]
    with test.subTest("same-day: a shorter block per zone"):
        test.assertEqual(len(shorter), 2)
    with test.subTest("same-day: a longer block per zone"):
        test.assertEqual(len(longer), 2)
    if shorter and longer:
        with test.subTest("same-day: shorter is 6 h 35 min"):
            test.assertEqual((shorter[0]["CapacityBlockDurationHours"], shorter[0]["CapacityBlockDurationMinutes"]), (6, 35))
        with test.subTest("same-day: shorter fee (4.10 x 8 x 395 / 60)"):
            test.assertEqual(shorter[0]["UpfrontFee"], "215.93")
        with test.subTest("same-day: longer is 30 h 35 min"):
            test.assertEqual((longer[0]["CapacityBlockDurationHours"], longer[0]["CapacityBlockDurationMinutes"]), (30, 35))
        with test.subTest("same-day: longer fee (4.10 x 8 x 1835 / 60)"):
            test.assertEqual(longer[0]["UpfrontFee"], "1003.13")
    ranged, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge", InstanceCount=1, EndDateRange=t("2026-12-02T00:00:00Z"))
    with test.subTest("same-day: EndDateRange keeps the shorter only"):
        test.assertEqual(sorted(o["CapacityBlockOfferingId"] for o in ranged), sorted(o["CapacityBlockOfferingId"] for o in shorter))
    late, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge", StartDateRange=t("2026-12-01T05:00:00Z"))
    with test.subTest("same-day: StartDateRange after 04:55 drops them"):
        test.assertTrue(bool(late) and all(o["StartDate"] >= t("2026-12-01T05:00:00Z") for o in late))
    if shorter:
        r = ec2.purchase_capacity_block(CapacityBlockOfferingId=shorter[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
        with test.subTest("same-day purchase: start"):
            test.assertEqual(r["StartDate"], t("2026-12-01T04:55:00Z"))
        with test.subTest("same-day purchase: end"):
            test.assertEqual(r["EndDate"], t("2026-12-01T11:30:00Z"))
        with test.subTest("same-day purchase: fee in state"):
            test.assertEqual(sim.state()["purchases"][-1]["upfront_fee"], "215.93")
        with test.subTest("same-day purchase: paid (payment_delay_hours = 0)"):
            test.assertEqual(describe_one(ec2, r["CapacityReservationId"])["State"], "scheduled")


ULTRA_MARKET = (SCENARIOS / "ultra-market.toml").read_text(encoding="utf-8")


def check_ultraservers_and_health(test: unittest.TestCase, sim, ep):
    """UltraServer offerings and purchases, the block view, block status and health, reservation
    states set by EC2, the extension history and a dry-run extension purchase."""
    with test.subTest("ultra: reset"):
        test.assertEqual(sim.scenario(ULTRA_MARKET)["now"], "2026-12-01T00:00:00Z")
    ec2 = client(ep)
    gb, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p6e-gb200.36xlarge", UltraserverType="u-p6e-gb200x72", UltraserverCount=2)
    with test.subTest("ultra: one offering of 2 x u-p6e-gb200x72"):
        test.assertEqual(len(gb), 1)
    if gb:
        o = gb[0]
        with test.subTest("ultra: UltraserverType"):
            test.assertEqual(o.get("UltraserverType"), "u-p6e-gb200x72")
        with test.subTest("ultra: UltraserverCount parsed as int"):
            test.assertEqual(o.get("UltraserverCount"), 2)
        with test.subTest("ultra: instance type"):
            test.assertEqual(o["InstanceType"], "p6e-gb200.36xlarge")
        with test.subTest("ultra: instances = 2 x 18"):
            test.assertEqual(o["InstanceCount"], 36)
        with test.subTest("ultra: fee = 10.00 x 4 GPUs x 36 x 24 h"):
            test.assertEqual(o["UpfrontFee"], "34560.00")
        with test.subTest("ultra: Local Zone"):
            test.assertEqual(o["ZoneType"], "local-zone")
    any_kind, _ = all_offerings(ec2, CapacityDurationHours=24)
    with test.subTest("ultra: a search naming no type sees every kind"):
        test.assertEqual(sorted({o.get("UltraserverType", "-") for o in any_kind}), ["-", "u-p6e-gb200x72", "u-trn2x64"])
    p5, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="p5.48xlarge")
    with test.subTest("ultra: an instance search sees no UltraServer"):
        test.assertTrue(all("UltraserverType" not in o for o in p5))
    # ultraserver_search = "instance_type_required" (default): InstanceType is required.
    e = expect_error(test, "ultra: without InstanceType", "MissingParameter", 400, ec2.describe_capacity_block_offerings,
                     CapacityDurationHours=24, UltraserverType="u-trn2x64", UltraserverCount=1)
    if e:
        with test.subTest("ultra: MissingParameter names InstanceType"):
            test.assertTrue("InstanceType" in e.response["Error"]["Message"], e.response["Error"]["Message"])
    trn, _ = all_offerings(ec2, CapacityDurationHours=24, InstanceType="trn2u.48xlarge", UltraserverType="u-trn2x64")
    with test.subTest("ultra: with its InstanceType"):
        test.assertEqual([(o.get("UltraserverType"), o["InstanceType"], o["InstanceCount"]) for o in trn], [("u-trn2x64", "trn2u.48xlarge", 4)])
    expect_error(test, "ultra: with InstanceCount", "InvalidParameterCombination", 400, ec2.describe_capacity_block_offerings,
                 CapacityDurationHours=24, InstanceType="trn2u.48xlarge", UltraserverType="u-trn2x64", InstanceCount=4)
    expect_error(test, "ultra: count without type", "InvalidParameterCombination", 400, ec2.describe_capacity_block_offerings,
                 CapacityDurationHours=24, InstanceType="trn2u.48xlarge", UltraserverCount=1)
    expect_error(test, "ultra: a type not sold", "InvalidParameterValue", 400, ec2.describe_capacity_block_offerings,
                 CapacityDurationHours=24, InstanceType="p6e-gb200.36xlarge", UltraserverType="u-p6e-gb200x36")
    # "ultraserver_only": the UltraServer alone; InstanceType beside it is refused.
    sim.behaviour(ultraserver_search="ultraserver_only")
    alone, _ = all_offerings(ec2, CapacityDurationHours=24, UltraserverType="u-trn2x64")
    with test.subTest("ultraserver_only: answered alone"):
        test.assertEqual([o["CapacityBlockOfferingId"] for o in alone], [o["CapacityBlockOfferingId"] for o in trn])
    expect_error(test, "ultraserver_only: with InstanceType", "InvalidParameterCombination", 400, ec2.describe_capacity_block_offerings,
                 CapacityDurationHours=24, UltraserverType="u-trn2x64", InstanceType="trn2u.48xlarge")
    sim.behaviour(ultraserver_search="instance_type_required")
    expect_error(test, "ultra: its instances alone are not sold", "InvalidParameterValue", 400, ec2.describe_capacity_block_offerings,
                 CapacityDurationHours=24, InstanceType="trn2u.48xlarge")

    # A purchase of 2 UltraServers makes two blocks, each one reservation of 18 instances.
    bought = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=gb[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX",
        TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}])
    blocks = bought.get("CapacityBlocks", [])
    with test.subTest("ultra purchase: two blocks"):
        test.assertEqual(len(blocks), 2)
    with test.subTest("ultra purchase: each block its UltraServer type"):
        test.assertEqual([b.get("UltraserverType") for b in blocks], ["u-p6e-gb200x72"] * 2)
    rids = [rid for b in blocks for rid in b["CapacityReservationIds"]]
    with test.subTest("ultra purchase: the reservation is the first block's"):
        test.assertEqual(bought["CapacityReservation"]["CapacityReservationId"], rids[0] if rids else None)
    with test.subTest("ultra purchase: the reservation names its block"):
        test.assertEqual(bought["CapacityReservation"].get("CapacityBlockId"), blocks[0]["CapacityBlockId"] if blocks else None)
    res = ec2.describe_capacity_reservations(CapacityReservationIds=rids)["CapacityReservations"]
    with test.subTest("ultra purchase: no instances shown before the start"):
        test.assertEqual([r["TotalInstanceCount"] for r in res], [0, 0])
    with test.subTest("ultra purchase: 18 instances each (EC2's tag)"):
        test.assertEqual([ec2_tags(r).get(QUANTITY_TAG) for r in res], ["18", "18"])
    with test.subTest("ultra purchase: tags on each"):
        test.assertEqual([own_tags(r) for r in res], [[{"Key": "team", "Value": "ml"}]] * 2)
    cb = ec2.describe_capacity_blocks(CapacityBlockIds=[blocks[0]["CapacityBlockId"]])["CapacityBlocks"]
    with test.subTest("describe blocks: by id"):
        test.assertEqual([b["CapacityBlockId"] for b in cb], [blocks[0]["CapacityBlockId"]])
    with test.subTest("describe blocks: state"):
        test.assertEqual(cb[0]["State"], "scheduled")
    with test.subTest("describe blocks: dates parsed"):
        test.assertTrue(isinstance(cb[0]["StartDate"], dt.datetime))
    with test.subTest("describe blocks: tags"):
        test.assertEqual(cb[0]["Tags"], [{"Key": "team", "Value": "ml"}])
    hand = sim.inject(instance_type="trn2u.48xlarge", instance_count=4, ultraserver_type="u-trn2x64",
                      start="2026-11-30T11:30:00Z", end="2026-12-03T11:30:00Z")
    p5r = ec2.purchase_capacity_block(CapacityBlockOfferingId=p5[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
    kinds = {f: [b["CapacityBlockId"] for b in ec2.describe_capacity_blocks(Filters=[{"Name": "ultraserver-type", "Values": [f]}])["CapacityBlocks"]]
             for f in ("instances", "ultraservers")}
    with test.subTest("describe blocks: kinds"):
        test.assertEqual((len(kinds["instances"]), len(kinds["ultraservers"])), (1, 3))
    with test.subTest("describe blocks: the p5 block is of instances"):
        test.assertEqual(kinds["instances"], [p5r["CapacityBlockId"]])
    expect_error(test, "describe blocks: unknown id", "InvalidCapacityBlockId.NotFound", 400, ec2.describe_capacity_blocks,
                 CapacityBlockIds=["cb-00000000000000000"])
    hand_r = describe_one(ec2, hand["reservation_id"])
    hand_b = ec2.describe_capacity_blocks(CapacityBlockIds=[hand_r["CapacityBlockId"]])["CapacityBlocks"][0]
    with test.subTest("hand-bought UltraServer: type from the block"):
        test.assertEqual(hand_b.get("UltraserverType"), "u-trn2x64")
    with test.subTest("hand-bought UltraServer: active"):
        test.assertEqual(hand_b["State"], "active")

    # Status: only the active block (the hand-bought one) has one; asking for a scheduled one fails.
    st = ec2.describe_capacity_block_status()["CapacityBlockStatuses"]
    with test.subTest("status: active blocks only"):
        test.assertEqual([s["CapacityBlockId"] for s in st], [hand_r["CapacityBlockId"]])
    with test.subTest("status: ok"):
        test.assertEqual(st[0]["InterconnectStatus"], "ok")
    with test.subTest("status: counts (unavailable_means = in_use: the 4 running)"):
        test.assertEqual((st[0]["TotalCapacity"], st[0]["TotalAvailableCapacity"], st[0]["TotalUnavailableCapacity"]), (4, 0, 4))
    expect_error(test, "status: a scheduled block by id", "InvalidCapacityReservationState.PendingActivation", 400, ec2.describe_capacity_block_status,
                 CapacityBlockIds=[blocks[0]["CapacityBlockId"]])
    h = sim._req("POST", "/_sim/blocks/health", {"capacity_block_id": hand_r["CapacityBlockId"], "interconnect": "impaired", "unavailable": 1})
    with test.subTest("health control: answer"):
        test.assertEqual((h["interconnect"], h["unavailable"]), ("impaired", 1))
    st = ec2.describe_capacity_block_status(CapacityBlockIds=[hand_r["CapacityBlockId"]])["CapacityBlockStatuses"][0]
    with test.subTest("status: impaired"):
        test.assertEqual(st["InterconnectStatus"], "impaired")
    with test.subTest("status: one taken out, three running: all four in use"):
        test.assertEqual(st["TotalUnavailableCapacity"], 4)
    with test.subTest("status: per reservation"):
        test.assertEqual(st["CapacityReservationStatuses"][0]["CapacityReservationId"], hand["reservation_id"])
    running = ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [hand["reservation_id"]]}])["Reservations"]
    with test.subTest("instances: the one taken out is gone"):
        test.assertEqual(sum(len(r["Instances"]) for r in running), 3)
    imp = ec2.describe_capacity_block_status(Filters=[{"Name": "interconnect-status", "Values": ["impaired"]}])["CapacityBlockStatuses"]
    with test.subTest("status: interconnect filter"):
        test.assertEqual(len(imp), 1)
    # The market line's health step: 1 h after start the GB200 blocks are impaired, 2 out.
    sim.set_clock("2026-12-02T12:30:00Z")
    st = {s["CapacityBlockId"]: s for s in ec2.describe_capacity_block_status()["CapacityBlockStatuses"]}
    got = st.get(blocks[0]["CapacityBlockId"], {})
    with test.subTest("status: scenario step"):
        test.assertEqual((got.get("InterconnectStatus"), got.get("TotalUnavailableCapacity"), got.get("TotalCapacity")), ("impaired", 18, 18))

    # States EC2 sets on its own, the unknown one included (botocore keeps the string).
    for state in ["unavailable", "cancelling", "delayed", "assessing", "some-future-state"]:
        sim._req("POST", "/_sim/reservations/state", {"reservation_id": p5r["CapacityReservationId"], "state": state})
        with test.subTest(f"state {state}: reservation"):
            test.assertEqual(describe_one(ec2, p5r["CapacityReservationId"])["State"], state)
    blk = ec2.describe_capacity_blocks(CapacityBlockIds=[p5r["CapacityBlockId"]])["CapacityBlocks"][0]
    with test.subTest("state: an unknown reservation state leaves the block's lifecycle state"):
        test.assertEqual(blk["State"], "active")
    sim._req("POST", "/_sim/reservations/state", {"reservation_id": p5r["CapacityReservationId"], "state": None})
    with test.subTest("state: back to the lifecycle"):
        test.assertEqual(describe_one(ec2, p5r["CapacityReservationId"])["State"], "active")

    # Extensions: DryRun checks and records nothing; the history reports the payment status.
    ext = ec2.describe_capacity_block_extension_offerings(CapacityReservationId=p5r["CapacityReservationId"], CapacityBlockExtensionDurationHours=24)["CapacityBlockExtensionOfferings"]
    with test.subTest("extension: one offering"):
        test.assertEqual(len(ext), 1)
    if ext:
        kw = {"CapacityBlockExtensionOfferingId": ext[0]["CapacityBlockExtensionOfferingId"], "CapacityReservationId": p5r["CapacityReservationId"]}
        expect_error(test, "extension: DryRun", "DryRunOperation", 412, ec2.purchase_capacity_block_extension, DryRun=True, **kw)
        with test.subTest("extension history: empty after the dry run"):
            test.assertEqual(ec2.describe_capacity_block_extension_history()["CapacityBlockExtensions"], [])
        sim.behaviour(payment_delay_hours=3.0)
        ec2.purchase_capacity_block_extension(**kw)
        hist = ec2.describe_capacity_block_extension_history(CapacityReservationIds=[p5r["CapacityReservationId"]])["CapacityBlockExtensions"]
        with test.subTest("extension history: pending"):
            test.assertEqual([x["CapacityBlockExtensionStatus"] for x in hist], ["payment-pending"])
        with test.subTest("extension history: fields"):
            test.assertEqual((hist[0]["InstanceType"], hist[0]["CapacityBlockExtensionDurationHours"], hist[0]["UpfrontFee"]), ("p5.48xlarge", 24, ext[0]["UpfrontFee"]))
        sim._req("POST", "/_sim/clock", {"advance_secs": 3 * 3600})
        hist = ec2.describe_capacity_block_extension_history(Filters=[{"Name": "capacity-block-extension-status", "Values": ["payment-succeeded"]}])["CapacityBlockExtensions"]
        with test.subTest("extension history: succeeded"):
            test.assertEqual(len(hist), 1)
        expect_error(test, "extension history: unknown reservation", "InvalidCapacityReservationId.NotFound", 400,
                     ec2.describe_capacity_block_extension_history, CapacityReservationIds=["cr-00000000000000000"])


def offered(offers):
    """What an answer offers, ids aside."""
    return [(o["StartDate"], o["AvailabilityZone"], o["UpfrontFee"]) for o in offers]


def check_readings(test: unittest.TestCase, sim, ep, scenario):
    """The readings of a real account that are settings: offering ids minted per answer, counts
    before the start, the payment delay in minutes and how long a failed payment stays visible."""
    with test.subTest("readings: reset"):
        test.assertEqual(sim.scenario(scenario)["now"], "2026-12-01T00:00:00Z")
    ec2 = client(ep)
    b = sim.behaviour(describe_limit=None, same_day_offerings=False, payment_delay_minutes=5)
    with test.subTest("readings: the minutes clear payment_delay_hours"):
        test.assertEqual((b["payment_delay_minutes"], b["payment_delay_hours"]), (5.0, None))
    ask = {"CapacityDurationHours": 24, "InstanceType": "p5.48xlarge", "InstanceCount": 1}

    # Offering ids: stable by default, fresh in every answer with "per_answer".
    first = ec2.describe_capacity_block_offerings(**ask)["CapacityBlockOfferings"]
    with test.subTest("ids: stable by default"):
        test.assertEqual([o["CapacityBlockOfferingId"] for o in ec2.describe_capacity_block_offerings(**ask)["CapacityBlockOfferings"]], [o["CapacityBlockOfferingId"] for o in first])
    sim.behaviour(offering_ids="per_answer", offering_id_ttl_secs=300)
    one = ec2.describe_capacity_block_offerings(**ask)["CapacityBlockOfferings"]
    two = ec2.describe_capacity_block_offerings(**ask)["CapacityBlockOfferings"]
    with test.subTest("ids per answer: the same offerings"):
        test.assertEqual(offered(one), offered(two))
    with test.subTest("ids per answer: new ids"):
        test.assertTrue(not {o["CapacityBlockOfferingId"] for o in one} & {o["CapacityBlockOfferingId"] for o in two})
    with test.subTest("ids per answer: EC2's shape"):
        test.assertTrue(all(CB_ID.match(o["CapacityBlockOfferingId"]) for o in one + two))
    with test.subTest("ids per answer: counted"):
        test.assertEqual(sim.state()["offering_ids_minted"], len(one) + len(two))
    expect_error(test, "ids per answer: a stable id was never handed out", NOT_FOUND, 400, ec2.purchase_capacity_block, CapacityBlockOfferingId=first[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")
    sim._req("POST", "/_sim/clock", {"advance_secs": 299})
    r = ec2.purchase_capacity_block(CapacityBlockOfferingId=one[0]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
    with test.subTest("ids per answer: bought within the TTL"):
        test.assertEqual(r["StartDate"], one[0]["StartDate"])
    with test.subTest("ids per answer: the state records the id named"):
        test.assertEqual(sim.state()["purchases"][-1]["offering_id"], one[0]["CapacityBlockOfferingId"])
    sim._req("POST", "/_sim/clock", {"advance_secs": 1})
    e = expect_error(test, "ids per answer: expired after the TTL", "InvalidCapacityBlockOfferingIdExpired", 400, ec2.purchase_capacity_block, CapacityBlockOfferingId=one[1]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")
    if e:
        with test.subTest("ids per answer: expired message"):
            test.assertEqual(e.response["Error"]["Message"], f"The Capacity Block offering ID '{one[1]['CapacityBlockOfferingId']}' is no longer available.")
    sim.behaviour(offering_ids="stable")

    # Counts before the start: "zero" (default) shows 0 and EC2's tags; "full" the count.
    with test.subTest("counts: zero before the start"):
        test.assertEqual((r["TotalInstanceCount"], r["AvailableInstanceCount"]), (0, 0))
    with test.subTest("counts: EC2's tags"):
        test.assertEqual(ec2_tags(r), {QUANTITY_TAG: "1", TYPE_TAG: "capacity-block"})
    sim.behaviour(counts_before_start="full")
    full = describe_one(ec2, r["CapacityReservationId"])
    with test.subTest("counts full: the count before the start"):
        test.assertEqual((full["TotalInstanceCount"], full["AvailableInstanceCount"]), (1, 1))
    with test.subTest("counts full: no aws: tags"):
        test.assertEqual(full.get("Tags", []), [])
    sim.behaviour(counts_before_start="zero")

    # The payment delay: 5 minutes from the purchase (bought at 00:04:59, now 00:05:00).
    sim._req("POST", "/_sim/clock", {"advance_secs": 298})
    with test.subTest("payment: pending 4 min 59 s after"):
        test.assertEqual(describe_one(ec2, r["CapacityReservationId"])["State"], "payment-pending")
    sim._req("POST", "/_sim/clock", {"advance_secs": 1})
    with test.subTest("payment: scheduled 5 min after"):
        test.assertEqual(describe_one(ec2, r["CapacityReservationId"])["State"], "scheduled")

    # A failed payment stays visible failed_payment_visible_minutes: here 10.
    sim.behaviour(failed_payment_visible_minutes=10)
    f = ec2.purchase_capacity_block(CapacityBlockOfferingId=first[1]["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
    sim.payment(reservation_id=f["CapacityReservationId"], outcome="fail", after_hours=0)
    with test.subTest("failed payment: visible"):
        test.assertEqual(describe_one(ec2, f["CapacityReservationId"])["State"], "payment-failed")
    sim._req("POST", "/_sim/clock", {"advance_secs": 600})
    expect_error(test, "failed payment: gone 10 min later", "InvalidCapacityReservationId.NotFound", 400, ec2.describe_capacity_reservations, CapacityReservationIds=[f["CapacityReservationId"]])
    with test.subTest("failed payment: its block gone too"):
        test.assertTrue(f["CapacityBlockId"] not in [x["CapacityBlockId"] for x in ec2.describe_capacity_blocks()["CapacityBlocks"]])


def check_iam_denials(test: unittest.TestCase, sim, ep, scenario):
    """A caller (an access key) denied PurchaseCapacityBlock in us-east-1: 403
    UnauthorizedOperation, DryRun included, while another key buys and gets DryRunOperation."""
    with test.subTest("iam: reset"):
        test.assertEqual(sim.scenario(scenario)["now"], "2026-12-01T00:00:00Z")
    denial = {"access_key": "ASIASCANOFFERINGS", "action": "PurchaseCapacityBlock", "regions": ["us-east-1"]}
    b = sim.behaviour(describe_limit=None, same_day_offerings=False, iam_denials=[denial])
    with test.subTest("iam: the setting reads back"):
        test.assertEqual(b["iam_denials"], [denial])
    scan, track = client(ep, key="ASIASCANOFFERINGS"), client(ep, key="ASIATRACKBLOCKS")
    offer = scan.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p5.48xlarge", InstanceCount=1)["CapacityBlockOfferings"][0]
    buy = {"CapacityBlockOfferingId": offer["CapacityBlockOfferingId"], "InstancePlatform": "Linux/UNIX"}
    e = expect_error(test, "iam: a denied purchase", "UnauthorizedOperation", 403, scan.purchase_capacity_block, **buy)
    if e:
        msg = e.response["Error"]["Message"]
        with test.subTest("iam: EC2's message"):
            test.assertTrue(msg.startswith("You are not authorized to perform this operation. User: arn:aws:sts::111122223333:assumed-role/role-ASIASCANOFFERINGS/ASIASCANOFFERINGS is not authorized to perform: ec2:PurchaseCapacityBlock on resource: arn:aws:ec2:us-east-1:111122223333:capacity-reservation/* because no identity-based policy allows the ec2:PurchaseCapacityBlock action. Encoded authorization failure message: "), msg)
    expect_error(test, "iam: a denied DryRun", "UnauthorizedOperation", 403, scan.purchase_capacity_block, DryRun=True, **buy)
    expect_error(test, "iam: an allowed DryRun", "DryRunOperation", 412, track.purchase_capacity_block, DryRun=True, **buy)
    with test.subTest("iam: nothing bought"):
        test.assertEqual(sim.state()["purchases"], [])
    r = track.purchase_capacity_block(**buy)["CapacityReservation"]
    with test.subTest("iam: another key buys"):
        test.assertTrue(CR_ID.match(r["CapacityReservationId"]), r)
    st = sim.state()
    with test.subTest("iam: refusals counted"):
        test.assertEqual(st["faults_injected"]["unauthorized"], 2)
    with test.subTest("iam: calls counted"):
        test.assertEqual(st["calls"]["PurchaseCapacityBlock"], 4)
    sim.behaviour(iam_denials=[])
    with test.subTest("iam: lifted"):
        test.assertTrue(CR_ID.match(scan.purchase_capacity_block(**buy)["CapacityReservation"]["CapacityReservationId"]))


USAGE_WORLD = (SCENARIOS / "usage-world.toml").read_text(encoding="utf-8")


def check_usage(test: unittest.TestCase, sim, ep):
    """Instances running in an active block: the line's usage steps (5 of 8 from 1 h after the
    start, 8 from 3 h), the control override and its clear, as botocore reads them."""
    with test.subTest("usage: reset"):
        test.assertEqual(sim.scenario(USAGE_WORLD)["now"], "2026-12-01T00:00:00Z")
    ec2 = client(ep)
    offer = ec2.describe_capacity_block_offerings(CapacityDurationHours=24, InstanceType="p5.48xlarge", InstanceCount=8)["CapacityBlockOfferings"][0]
    r = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
    rid, start = r["CapacityReservationId"], offer["StartDate"]

    def at(hours):
        sim.set_clock((start + dt.timedelta(hours=hours)).isoformat().replace("+00:00", "Z"))

    def counts():
        d = describe_one(ec2, rid)
        return d["State"], d["TotalInstanceCount"], d["AvailableInstanceCount"]

    def running():
        res = ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [rid]}])["Reservations"]
        return sum(len(x["Instances"]) for x in res)

    def usage_at(hours, want, name):
        """Moves the clock to `hours` from the start, then checks (counts(), running()) (subtest `name`)."""
        at(hours)
        with test.subTest(name):
            test.assertEqual((counts(), running()), want)

    usage_at(-1, (("scheduled", 0, 0), 0), "usage: before the start as before (counts zero)")
    usage_at(0, (("active", 8, 0), 8), "usage: active, every instance running before the first step")
    usage_at(1, (("active", 8, 3), 5), "usage: 5 of 8 running, 3 idle available")
    st = ec2.describe_capacity_block_status(CapacityBlockIds=[r["CapacityBlockId"]])["CapacityBlockStatuses"][0]
    with test.subTest("usage: block status agrees (in_use: the 5 running are unavailable)"):
        test.assertEqual((st["TotalCapacity"], st["TotalAvailableCapacity"], st["TotalUnavailableCapacity"]), (8, 3, 5))
    with test.subTest("usage: reservation status agrees"):
        rs = st["CapacityReservationStatuses"][0]
        test.assertEqual((rs["TotalCapacity"], rs["TotalAvailableCapacity"], rs["TotalUnavailableCapacity"]), (8, 3, 5))
    sim.behaviour(unavailable_means="failed")
    st = ec2.describe_capacity_block_status(CapacityBlockIds=[r["CapacityBlockId"]])["CapacityBlockStatuses"][0]
    with test.subTest("usage: unavailable_means = failed counts none of the running"):
        test.assertEqual((st["TotalCapacity"], st["TotalAvailableCapacity"], st["TotalUnavailableCapacity"]), (8, 3, 0))
    sim.behaviour(unavailable_means="in_use")
    with test.subTest("usage: the state agrees"):
        test.assertEqual([(x["running"], x["available"]) for x in sim.state()["reservations"]], [(5, 3)])
    # The control endpoint: by block id, capped by unavailable instances, then cleared. Stopped
    # instances free their places at once here (the stopping time is checked below).
    sim.behaviour(stopping_minutes=0)
    u = sim._req("POST", "/_sim/blocks/usage", {"capacity_block_id": r["CapacityBlockId"], "running": 0})
    with test.subTest("usage control: answer"):
        test.assertEqual((u["reservation_id"], u["running"], u["available"]), (rid, 0, 8))
    with test.subTest("usage control: all idle"):
        test.assertEqual((counts(), running()), (("active", 8, 8), 0))
    sim._req("POST", "/_sim/blocks/usage", {"reservation_id": rid, "running": 7})
    sim._req("POST", "/_sim/blocks/health", {"reservation_id": rid, "unavailable": 2})
    with test.subTest("usage control: capped by 2 unavailable"):
        test.assertEqual((counts(), running()), (("active", 8, 0), 6))
    sim._req("POST", "/_sim/blocks/health", {"reservation_id": rid, "clear": True})
    u = sim._req("POST", "/_sim/blocks/usage", {"reservation_id": rid, "clear": True})
    with test.subTest("usage control: clear goes back to the step"):
        test.assertEqual((u["running"], u["available"]), (5, 3))
    def usage():
        u = ec2.get_capacity_reservation_usage(CapacityReservationId=rid)
        return (u["CapacityReservationId"], u["InstanceType"], u["TotalInstanceCount"], u["AvailableInstanceCount"],
                u["State"], [(x["AccountId"], x["UsedInstanceCount"]) for x in u["InstanceUsages"]])

    with test.subTest("usage: GetCapacityReservationUsage, the owner's 5"):
        test.assertEqual(usage(), (rid, "p5.48xlarge", 8, 3, "active", [("111122223333", 5)]))
    sim.behaviour(stopping_minutes=5)
    sim._req("POST", "/_sim/blocks/usage", {"reservation_id": rid, "running": 2})
    with test.subTest("usage: 3 stopping keep their places, counted as the owner's"):
        test.assertEqual((usage()[3:], running()), ((3, "active", [("111122223333", 5)]), 2))
    sim._req("POST", "/_sim/blocks/usage", {"reservation_id": rid, "clear": True})
    try:
        sim._req("POST", "/_sim/blocks/usage", {"reservation_id": rid, "running": 9})
        with test.subTest("usage control: more than the block refused"):
            test.fail("answered 200")
    except urllib.error.HTTPError as e:
        with test.subTest("usage control: more than the block refused"):
            test.assertEqual(e.code, 400)
    usage_at(3, (("active", 8, 0), 8), "usage: the next step, all running again")
    usage_at(24, (("expired", 8, 0), 0), "usage: after the end as before")


GROUP_ARN = "arn:aws:resource-groups:us-east-1:111122223333:group/capblock-x"
# What capblock reads of a template: the market type and the reservation target.
CAPACITY_BLOCK_DATA = {
    "InstanceType": "p5.48xlarge",
    "ImageId": "ami-0123456789abcdef0",
    "InstanceMarketOptions": {"MarketType": "capacity-block"},
    "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": GROUP_ARN}},
}
# Everything else a template may hold comes back as given (one member of each kind of shape,
# the lists whose elements are not `{name}Set` of `item`s included).
RICH_DATA = {
    "InstanceType": "p5.48xlarge",
    "KeyName": "capblock-key",
    "EbsOptimized": True,
    "UserData": "IyEvYmluL2Jhc2gKZWNobyBoaQ==",
    "IamInstanceProfile": {"Name": "capblock-node"},
    "SecurityGroupIds": ["sg-0123456789abcdef0", "sg-0fedcba9876543210"],
    "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 200, "VolumeType": "gp3", "DeleteOnTermination": True}}],
    "NetworkInterfaces": [{"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": ["sg-0123456789abcdef0"], "SubnetId": "subnet-0123456789abcdef0"}],
    "SecondaryInterfaces": [{"DeviceIndex": 1, "PrivateIpAddresses": [{"PrivateIpAddress": "10.0.0.10"}]}],
    "LicenseSpecifications": [{"LicenseConfigurationArn": "arn:aws:license-manager:us-east-1:111122223333:license-configuration:lic-0123456789abcdef0123456789abcdef"}],
    "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2},
    "Monitoring": {"Enabled": True},
    "Placement": {"AvailabilityZone": "us-east-1a", "GroupName": "capblock-pg"},
    "TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "ml & <infra>"}]}],
    "InstanceMarketOptions": {"MarketType": "capacity-block"},
    "CapacityReservationSpecification": {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"},
    },
}


def check_launch_templates(test: unittest.TestCase, sim, ep, scenario):
    """Launch templates through botocore: a Capacity Block template (market type capacity-block,
    a reservation group as its target) created and read back by name, id, $Latest, $Default and
    number; a version from it targeting one reservation; every other kind of data round-tripping;
    EC2's errors, idempotent ClientTokens, DryRun, paging, regions, an IAM denial and the state."""
    with test.subTest("launch templates: reset"):
        test.assertEqual(sim.scenario(scenario)["now"], "2026-12-01T00:00:00Z")
    ec2, ec2_raw, west = client(ep), client(ep, validate=False), client(ep, region="us-west-2")
    tags = [{"Key": "owner", "Value": "capblock"}]
    lt = ec2.create_launch_template(
        LaunchTemplateName="capblock-x",
        VersionDescription="capacity block",
        LaunchTemplateData=CAPACITY_BLOCK_DATA,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
    )["LaunchTemplate"]
    lt_id = lt["LaunchTemplateId"]
    with test.subTest("lt create: id shape"):
        test.assertTrue(LT_ID.match(lt_id), lt_id)
    with test.subTest("lt create: answer"):
        test.assertEqual({k: lt[k] for k in ("LaunchTemplateName", "DefaultVersionNumber", "LatestVersionNumber", "CreateTime", "Tags")}, {"LaunchTemplateName": "capblock-x", "DefaultVersionNumber": 1, "LatestVersionNumber": 1, "CreateTime": t("2026-12-01T00:00:00+00:00"), "Tags": tags})

    def versions(**kw):
        return ec2.describe_launch_template_versions(**kw)["LaunchTemplateVersions"]

    for how, kw in [
        ("by name, $Latest", {"LaunchTemplateName": "capblock-x", "Versions": ["$Latest"]}),
        ("by id, $Default", {"LaunchTemplateId": lt_id, "Versions": ["$Default"]}),
        ("by id, number", {"LaunchTemplateId": lt_id, "Versions": ["1"]}),
        ("by name, every version", {"LaunchTemplateName": "capblock-x"}),
    ]:
        got = versions(**kw)
        with test.subTest(f"lt describe {how}: one version"):
            test.assertEqual(len(got), 1)
        if got:
            v = got[0]
            with test.subTest(f"lt describe {how}: the data as given"):
                test.assertEqual(v["LaunchTemplateData"], CAPACITY_BLOCK_DATA)
            with test.subTest(f"lt describe {how}: the version"):
                test.assertEqual((v["LaunchTemplateId"], v["LaunchTemplateName"], v["VersionNumber"], v["DefaultVersion"], v["VersionDescription"], v["CreateTime"]), (lt_id, "capblock-x", 1, True, "capacity block", t("2026-12-01T00:00:00+00:00")))

    # Version 2 from version 1, targeting one reservation instead of the group.
    target = {"CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}
    v2 = ec2.create_launch_template_version(LaunchTemplateId=lt_id, SourceVersion="1", LaunchTemplateData={"CapacityReservationSpecification": target})["LaunchTemplateVersion"]
    want2 = {**CAPACITY_BLOCK_DATA, "CapacityReservationSpecification": target}
    with test.subTest("lt version 2: answer"):
        test.assertEqual((v2["VersionNumber"], v2["DefaultVersion"], v2["LaunchTemplateData"]), (2, False, want2))
    with test.subTest("lt version 2: every version, newest first"):
        test.assertEqual([v["VersionNumber"] for v in versions(LaunchTemplateId=lt_id)], [2, 1])
    with test.subTest("lt version 2: $Latest"):
        test.assertEqual([(v["VersionNumber"], v["LaunchTemplateData"]) for v in versions(LaunchTemplateName="capblock-x", Versions=["$Latest"])], [(2, want2)])
    with test.subTest("lt version 2: $Default still 1"):
        test.assertEqual([(v["VersionNumber"], v["DefaultVersion"]) for v in versions(LaunchTemplateName="capblock-x", Versions=["$Default"])], [(1, True)])
    v3 = ec2.create_launch_template_version(LaunchTemplateName="capblock-x", LaunchTemplateData={"ImageId": "ami-3"})["LaunchTemplateVersion"]
    with test.subTest("lt version 3: no source version, only its own data"):
        test.assertEqual((v3["VersionNumber"], v3["LaunchTemplateData"]), (3, {"ImageId": "ami-3"}))
    pages = ec2.get_paginator("describe_launch_template_versions").paginate(LaunchTemplateId=lt_id, PaginationConfig={"PageSize": 1})
    with test.subTest("lt paging: one a page, every version once"):
        test.assertEqual([[v["VersionNumber"] for v in page["LaunchTemplateVersions"]] for page in pages], [[3], [2], [1]])

    rich = ec2.create_launch_template(LaunchTemplateName="capblock-rich", LaunchTemplateData=RICH_DATA)["LaunchTemplate"]
    got = versions(LaunchTemplateId=rich["LaunchTemplateId"], Versions=["$Latest"])
    with test.subTest("lt round trip: every kind of data as given"):
        test.assertEqual(got[0]["LaunchTemplateData"] if got else None, RICH_DATA)
    with test.subTest("lt every template's $Latest"):
        test.assertEqual(sorted((v["LaunchTemplateName"], v["VersionNumber"]) for v in versions(Versions=["$Latest"])), [("capblock-rich", 1), ("capblock-x", 3)])
    with test.subTest("lt $Latest in another region"):
        test.assertEqual(west.describe_launch_template_versions(Versions=["$Latest", "$Default"])["LaunchTemplateVersions"], [])

    # EC2's errors.
    e = expect_error(test, "lt duplicate name", "InvalidLaunchTemplateName.AlreadyExistsException", 400, ec2.create_launch_template, LaunchTemplateName="capblock-x", LaunchTemplateData=CAPACITY_BLOCK_DATA)
    if e:
        with test.subTest("lt duplicate name: message"):
            test.assertEqual(e.response["Error"]["Message"], "Launch template name already in use.")
    expect_error(test, "lt name with a space", "InvalidLaunchTemplateName.MalformedException", 400, ec2.create_launch_template, LaunchTemplateName="capblock x", LaunchTemplateData=CAPACITY_BLOCK_DATA)
    expect_error(test, "lt name too short", "InvalidLaunchTemplateName.MalformedException", 400, ec2_raw.create_launch_template, LaunchTemplateName="lt", LaunchTemplateData=CAPACITY_BLOCK_DATA)
    e = expect_error(test, "lt unknown id", "InvalidLaunchTemplateId.NotFound", 400, ec2.describe_launch_template_versions, LaunchTemplateId="lt-0123456789abcdef0")
    if e:
        with test.subTest("lt unknown id: message"):
            test.assertEqual(e.response["Error"]["Message"], "The specified launch template, with template ID lt-0123456789abcdef0, does not exist.")
    expect_error(test, "lt unknown name", "InvalidLaunchTemplateName.NotFoundException", 400, ec2.create_launch_template_version, LaunchTemplateName="nope", LaunchTemplateData={"ImageId": "ami-1"})
    expect_error(test, "lt another region's template", "InvalidLaunchTemplateName.NotFoundException", 400, west.describe_launch_template_versions, LaunchTemplateName="capblock-x")
    e = expect_error(test, "lt unknown version", "InvalidLaunchTemplateId.VersionNotFound", 400, ec2.describe_launch_template_versions, LaunchTemplateName="capblock-x", Versions=["9"])
    if e:
        with test.subTest("lt unknown version: message"):
            test.assertEqual(e.response["Error"]["Message"], f"Could not find the specified version 9 for the launch template with ID {lt_id}.")
    expect_error(test, "lt no template, no versions", "MissingParameter", 400, ec2.describe_launch_template_versions)
    expect_error(test, "lt no template, a version number", "InvalidParameterValue", 400, ec2.describe_launch_template_versions, Versions=["1"])
    expect_error(test, "lt DryRun", "DryRunOperation", 412, ec2.create_launch_template, LaunchTemplateName="capblock-dry", LaunchTemplateData=CAPACITY_BLOCK_DATA, DryRun=True)

    # A ClientToken makes the call idempotent.
    once = {"LaunchTemplateName": "capblock-once", "LaunchTemplateData": CAPACITY_BLOCK_DATA, "ClientToken": "capblock-token-1"}
    a = ec2.create_launch_template(**once)["LaunchTemplate"]["LaunchTemplateId"]
    with test.subTest("lt client token: the same call, the same template"):
        test.assertEqual(ec2.create_launch_template(**once)["LaunchTemplate"]["LaunchTemplateId"], a)
    expect_error(test, "lt client token: other parameters", "IdempotentParameterMismatch", 400, ec2.create_launch_template, **{**once, "LaunchTemplateName": "capblock-twice"})
    st = sim.state()
    with test.subTest("lt state: the templates"):
        test.assertEqual([(x["launch_template_name"], x["region"], x["latest_version_number"]) for x in st["launch_templates"]], [("capblock-x", "us-east-1", 3), ("capblock-rich", "us-east-1", 1), ("capblock-once", "us-east-1", 1)])
    v1 = st["launch_templates"][0]["versions"][0]
    with test.subTest("lt state: what capblock reads"):
        test.assertEqual((v1["market_type"], v1["capacity_reservation_resource_group_arn"], v1["capacity_reservation_id"]), ("capacity-block", GROUP_ARN, None))

    # Denied like any action.
    sim.behaviour(iam_denials=[{"access_key": "ASIANOTEMPLATES", "action": "DescribeLaunchTemplateVersions"}])
    expect_error(test, "lt iam: a denied describe", "UnauthorizedOperation", 403, client(ep, key="ASIANOTEMPLATES").describe_launch_template_versions, LaunchTemplateId=lt_id)
    with test.subTest("lt iam: another key reads"):
        test.assertEqual(len(versions(LaunchTemplateId=lt_id)), 3)
    sim.behaviour(iam_denials=[])


OWNER = "111122223333"
ORG_ONLY = "The resource you are attempting to share can only be shared within your AWS Organization."


def check_ram(test: unittest.TestCase, sim, ep, scenario):
    """RAM through boto3's real `ram` client (restJson1): shares of Capacity Blocks created, read,
    tagged, changed and deleted; associations ASSOCIATING for the delay, then ASSOCIATED; client
    tokens; every refusal under both readings of `ram_refusal`; a block's end; the control API."""
    # These checks read each share back at once: RAM's listing lag (a reading, a minute by
    # default) is played here at 0, and the integration tests play it on.
    if "[behaviour]\n" in scenario:
        scenario = scenario.replace("[behaviour]\n", "[behaviour]\nram_listing_lag_secs = 0\n", 1)
    else:
        scenario += "\n[behaviour]\nram_listing_lag_secs = 0\n"
    with test.subTest("ram: reset"):
        test.assertEqual(sim.scenario(scenario)["now"], "2026-12-01T00:00:00Z")
        test.assertEqual(sim._req("GET", "/_sim/behaviour")["ram_listing_lag_secs"], 0)
    ram, ec2 = client(ep, service="ram"), client(ep)
    west_ram, raw_ram = client(ep, region="us-west-2", service="ram"), client(ep, validate=False, service="ram")
    def creating(**kw):
        # `name` is expect_error's own first parameter: the call's go through a closure.
        return lambda: ram.create_resource_share(**kw)

    with test.subTest("ram: the default readings"):
        test.assertEqual({k: sim._req("GET", "/_sim/behaviour")[k] for k in ("ram_refusal", "ram_association_delay_secs")}, {"ram_refusal": "failed_association", "ram_association_delay_secs": 10})
    org = sim._req("GET", "/_sim/ram/organization")
    with test.subTest("ram: the default organization"):
        test.assertEqual((org["id"], org["accounts"], [u["id"] for u in org["ous"]]), ("o-capblock01", ["111111111111", "222222222222"], ["ou-cb01-mlteams1"]))

    def inject(**kw):
        base = {"instance_type": "p5.48xlarge", "instance_count": 2, "start": "2026-12-02T11:30:00Z", "end": "2026-12-03T11:30:00Z"}
        rid = sim.inject(**{**base, **kw})["reservation_id"]
        return describe_one(ec2, rid)["CapacityReservationArn"]

    # The ARN EC2 shows is the one RAM takes.
    cr = inject()
    with test.subTest("ram: the reservation's ARN"):
        test.assertTrue(cr.startswith(f"arn:aws:ec2:us-east-1:{OWNER}:capacity-reservation/cr-"), cr)
    tags = [{"key": "team", "value": "ml"}, {"key": "capblock:block", "value": cr.rsplit("/", 1)[1]}]
    req = {"name": "capblock-ml", "resourceArns": [cr], "principals": ["111111111111"], "tags": tags, "clientToken": "capblock-share-1"}
    created = ram.create_resource_share(**req)
    share = created["resourceShare"]
    arn = share["resourceShareArn"]
    with test.subTest("ram create: the share's ARN"):
        test.assertTrue(re.match(rf"^arn:aws:ram:us-east-1:{OWNER}:resource-share/[0-9a-f-]{{36}}$", arn), arn)
    with test.subTest("ram create: the share"):
        test.assertEqual({k: share[k] for k in ("name", "owningAccountId", "allowExternalPrincipals", "status", "featureSet", "tags")}, {"name": "capblock-ml", "owningAccountId": OWNER, "allowExternalPrincipals": True, "status": "ACTIVE", "featureSet": "STANDARD", "tags": tags})
    with test.subTest("ram create: times (epoch seconds, read by botocore)"):
        test.assertEqual((share["creationTime"], share["lastUpdatedTime"]), (t("2026-12-01T00:00:00+00:00"), t("2026-12-01T00:00:00+00:00")))
    with test.subTest("ram create: the client token"):
        test.assertEqual(created["clientToken"], "capblock-share-1")
    again = ram.create_resource_share(**req)
    with test.subTest("ram client token: the same share again"):
        test.assertEqual(again["resourceShare"]["resourceShareArn"], arn)
    expect_error(test, "ram client token: other parameters", "IdempotentParameterMismatchException", 400, creating(**{**req, "name": "capblock-other"}))
    with test.subTest("ram client token: one share"):
        test.assertEqual(len(ram.get_resource_shares(resourceOwner="SELF")["resourceShares"]), 1)

    def assocs(kind, **kw):
        return ram.get_resource_share_associations(associationType=kind, **kw)["resourceShareAssociations"]

    def statuses(share_arn):
        return [(a["associationType"], a["associatedEntity"], a["status"], a.get("StatusMessage", a.get("statusMessage"))) for kind in ("RESOURCE", "PRINCIPAL") for a in assocs(kind, resourceShareArns=[share_arn])]

    with test.subTest("ram: ASSOCIATING at first"):
        test.assertEqual(statuses(arn), [("RESOURCE", cr, "ASSOCIATING", None), ("PRINCIPAL", "111111111111", "ASSOCIATING", None)])
    sim._req("POST", "/_sim/clock", {"advance_secs": 10})
    with test.subTest("ram: ASSOCIATED 10 s later"):
        test.assertEqual(statuses(arn), [("RESOURCE", cr, "ASSOCIATED", None), ("PRINCIPAL", "111111111111", "ASSOCIATED", None)])
    a = assocs("RESOURCE", resourceArn=cr)[0]
    with test.subTest("ram association: the rest"):
        test.assertEqual((a["resourceShareArn"], a["resourceShareName"], a["external"], a["creationTime"], a["lastUpdatedTime"]), (arn, "capblock-ml", False, t("2026-12-01T00:00:00+00:00"), t("2026-12-01T00:00:10+00:00")))
    with test.subTest("ram associations: by principal"):
        test.assertEqual([x["resourceShareArn"] for x in assocs("PRINCIPAL", principal="111111111111")], [arn])
    with test.subTest("ram associations: by status"):
        test.assertEqual(assocs("RESOURCE", associationStatus="FAILED"), [])
    expect_error(test, "ram associations: a principal with RESOURCE", "InvalidParameterException", 400, ram.get_resource_share_associations, associationType="RESOURCE", principal="111111111111")
    expect_error(test, "ram associations: a malformed share ARN", "MalformedArnException", 400, ram.get_resource_share_associations, associationType="RESOURCE", resourceShareArns=["share-1"])

    # Tags, filters, paging, regions.
    ram.tag_resource(resourceShareArn=arn, tags=[{"key": "env", "value": "prod"}])
    ram.untag_resource(resourceShareArn=arn, tagKeys=["capblock:block"])
    with test.subTest("ram tags: added and removed"):
        test.assertEqual(ram.get_resource_shares(resourceOwner="SELF", resourceShareArns=[arn])["resourceShares"][0]["tags"], [{"key": "team", "value": "ml"}, {"key": "env", "value": "prod"}])
    expect_error(test, "ram tags: aws: is reserved", "TagPolicyViolationException", 400, ram.tag_resource, resourceShareArn=arn, tags=[{"key": "aws:x", "value": "1"}])
    other = ram.create_resource_share(name="capblock-web", tags=[{"key": "team", "value": "web"}])["resourceShare"]["resourceShareArn"]

    def names(**kw):
        return [x["name"] for x in ram.get_resource_shares(resourceOwner="SELF", **kw)["resourceShares"]]

    with test.subTest("ram filter: a tag value"):
        test.assertEqual(names(tagFilters=[{"tagKey": "team", "tagValues": ["ml"]}]), ["capblock-ml"])
    with test.subTest("ram filter: any of the values"):
        test.assertEqual(names(tagFilters=[{"tagKey": "team", "tagValues": ["ml", "web"]}]), ["capblock-ml", "capblock-web"])
    with test.subTest("ram filter: every filter"):
        test.assertEqual(names(tagFilters=[{"tagKey": "team", "tagValues": ["ml", "web"]}, {"tagKey": "env", "tagValues": ["prod"]}]), ["capblock-ml"])
    with test.subTest("ram filter: the key alone"):
        test.assertEqual(names(tagFilters=[{"tagKey": "env"}]), ["capblock-ml"])
    with test.subTest("ram filter: the name"):
        test.assertEqual(names(name="capblock-web"), ["capblock-web"])
    with test.subTest("ram filter: nobody shares with the account"):
        test.assertEqual(ram.get_resource_shares(resourceOwner="OTHER-ACCOUNTS")["resourceShares"], [])
    pages = ram.get_paginator("get_resource_shares").paginate(resourceOwner="SELF", PaginationConfig={"PageSize": 1})
    with test.subTest("ram paging: one a page"):
        test.assertEqual([[x["name"] for x in p["resourceShares"]] for p in pages], [["capblock-ml"], ["capblock-web"]])
    with test.subTest("ram regions: another region's shares"):
        test.assertEqual(west_ram.get_resource_shares(resourceOwner="SELF")["resourceShares"], [])
    expect_error(test, "ram: resourceOwner is required", "InvalidParameterException", 400, raw_ram.get_resource_shares)
    expect_error(test, "ram: the share of another region", "UnknownResourceException", 400, west_ram.get_resource_shares, resourceOwner="SELF", resourceShareArns=[arn])

    # Associate and disassociate.
    cr2 = inject(start="2026-12-01T00:00:00Z")
    got = ram.associate_resource_share(resourceShareArn=arn, resourceArns=[cr2], principals=[org_arn := f"arn:aws:organizations::{OWNER}:organization/o-capblock01"])["resourceShareAssociations"]
    with test.subTest("ram associate: an active block and the organization"):
        test.assertEqual([(x["associatedEntity"], x["status"]) for x in got], [(cr2, "ASSOCIATING"), (org_arn, "ASSOCIATING")])
    sim._req("POST", "/_sim/clock", {"advance_secs": 10})
    got = ram.disassociate_resource_share(resourceShareArn=arn, principals=[org_arn])["resourceShareAssociations"]
    with test.subTest("ram disassociate: DISASSOCIATING"):
        test.assertEqual([(x["associatedEntity"], x["status"]) for x in got], [(org_arn, "DISASSOCIATING")])
    sim._req("POST", "/_sim/clock", {"advance_secs": 10})
    with test.subTest("ram disassociate: DISASSOCIATED 10 s later"):
        test.assertEqual([x["status"] for x in assocs("PRINCIPAL", principal=org_arn)], ["DISASSOCIATED"])
    expect_error(test, "ram disassociate: not associated", "UnknownResourceException", 400, ram.disassociate_resource_share, resourceShareArn=arn, principals=[org_arn])

    # What RAM cannot find or read fails the call, whatever the reading.
    cr_id = cr.rsplit("/", 1)[1]
    for what, res, code in [
        ("another region's ARN", f"arn:aws:ec2:us-west-2:{OWNER}:capacity-reservation/{cr_id}", "UnknownResourceException"),
        ("another account's ARN", f"arn:aws:ec2:us-east-1:444455556666:capacity-reservation/{cr_id}", "UnknownResourceException"),
        ("a reservation never bought", f"arn:aws:ec2:us-east-1:{OWNER}:capacity-reservation/cr-0123456789abcdef0", "UnknownResourceException"),
        ("a subnet", f"arn:aws:ec2:us-east-1:{OWNER}:subnet/subnet-0123456789abcdef0", "UnknownResourceException"),
        ("a malformed ARN", cr_id, "MalformedArnException"),
    ]:
        expect_error(test, f"ram refused: {what}", code, 400, creating(name="x", resourceArns=[res]))
    expect_error(test, "ram refused: an IAM role", "InvalidParameterException", 400, creating(name="x", resourceArns=[cr], principals=["arn:aws:iam::111111111111:role/x"]))
    expect_error(test, "ram refused: another organization", "UnknownResourceException", 400, creating(name="x", principals=[f"arn:aws:organizations::{OWNER}:organization/o-otherorg00"]))
    expect_error(test, "ram refused: outside, external principals not allowed", "InvalidParameterException", 400, creating(name="x", principals=["999999999999"], allowExternalPrincipals=False))

    # What the Capacity Block rules refuse, under each reading.
    pending, ultra = inject(state_override="payment-pending"), inject(instance_type="p6e-gb200.36xlarge", instance_count=18, ultraserver_type="u-p6e-gb200x72")
    expired = inject(start="2026-11-01T11:30:00Z", end="2026-11-02T11:30:00Z")
    cases = [
        ("payment-pending", [pending], ["111111111111"], "RESOURCE", "OperationNotPermittedException", "is payment-pending: only Capacity Blocks that are active or scheduled can be shared"),
        ("expired", [expired], ["111111111111"], "RESOURCE", "OperationNotPermittedException", "is expired: only Capacity Blocks that are active or scheduled can be shared"),
        ("UltraServer", [ultra], ["111111111111"], "RESOURCE", "OperationNotPermittedException", "You cannot share Capacity Blocks for EC2 UltraServers"),
        ("outside the organization", [cr], ["999999999999"], "PRINCIPAL", "InvalidParameterException", ORG_ONLY),
    ]
    before = len(ram.get_resource_shares(resourceOwner="SELF")["resourceShares"])
    for what, res, principals, failing, code, message in cases:
        s = ram.create_resource_share(name=f"failed {what}", resourceArns=res, principals=principals)["resourceShare"]["resourceShareArn"]
        with test.subTest(f"ram failed_association, {what}: ASSOCIATING first"):
            test.assertEqual({a[2] for a in statuses(s)}, {"ASSOCIATING"})
        sim._req("POST", "/_sim/clock", {"advance_secs": 10})
        failed = assocs(failing, resourceShareArns=[s], associationStatus="FAILED")
        with test.subTest(f"ram failed_association, {what}: one FAILED"):
            test.assertEqual(len(failed), 1)
        if failed:
            with test.subTest(f"ram failed_association, {what}: the statusMessage"):
                test.assertTrue(message in failed[0].get("statusMessage", ""), failed[0])
    sim.behaviour(ram_refusal="error")
    for what, res, principals, _, code, message in cases:
        e = expect_error(test, f"ram error, {what}", code, 400, creating(name=f"error {what}", resourceArns=res, principals=principals))
        if e:
            with test.subTest(f"ram error, {what}: the message"):
                test.assertTrue(message in e.response["Error"]["Message"], e.response["Error"]["Message"])
    with test.subTest("ram error: no share made"):
        test.assertEqual(len(ram.get_resource_shares(resourceOwner="SELF")["resourceShares"]), before + len(cases))
    sim._req("POST", "/_sim/ram/organization", {"limited_billing_history": True})
    expect_error(test, "ram error: a limited billing history", "OperationNotPermittedException", 400, creating(name="billing", resourceArns=[cr]))
    sim._req("POST", "/_sim/ram/organization", {"limited_billing_history": False, "accounts": ["111111111111", "222222222222", "999999999999"]})
    with test.subTest("ram: a new member can be shared with"):
        test.assertTrue(ram.create_resource_share(name="new member", resourceArns=[cr], principals=["999999999999"])["resourceShare"]["status"] == "ACTIVE")
    sim.behaviour(ram_refusal="failed_association", ram_association_delay_secs=0)
    quick = ram.create_resource_share(name="quick", resourceArns=[cr], principals=["222222222222"])["resourceShare"]["resourceShareArn"]
    with test.subTest("ram no delay: ASSOCIATED at once"):
        test.assertEqual({a[2] for a in statuses(quick)}, {"ASSOCIATED"})

    # A block that ends: its association reads DISASSOCIATED.
    sim.set_clock("2026-12-03T11:30:00Z")
    ended = assocs("RESOURCE", resourceShareArns=[arn], resourceArn=cr)[0]
    with test.subTest("ram: an expired block is DISASSOCIATED"):
        test.assertEqual((ended["status"], ended["lastUpdatedTime"]), ("DISASSOCIATED", t("2026-12-03T11:30:00+00:00")))
    with test.subTest("ram: the ended block's statusMessage"):
        test.assertTrue("ended" in ended.get("statusMessage", ""), ended)

    # Delete: DELETED, then the same token answers the same, and the share is gone for good.
    d = ram.delete_resource_share(resourceShareArn=other, clientToken="capblock-delete-1")
    with test.subTest("ram delete: the answer"):
        test.assertEqual((d["returnValue"], d["clientToken"]), (True, "capblock-delete-1"))
    with test.subTest("ram delete: DELETED"):
        test.assertEqual(names(resourceShareStatus="DELETED"), ["capblock-web"])
    with test.subTest("ram delete: the same token again"):
        test.assertEqual(ram.delete_resource_share(resourceShareArn=other, clientToken="capblock-delete-1")["returnValue"], True)
    expect_error(test, "ram delete: again", "InvalidStateTransitionException", 400, ram.delete_resource_share, resourceShareArn=other)
    expect_error(test, "ram delete: unknown", "UnknownResourceException", 400, ram.delete_resource_share, resourceShareArn=f"arn:aws:ram:us-east-1:{OWNER}:resource-share/00000000-0000-4000-8000-000000000000")
    expect_error(test, "ram delete: malformed", "MalformedArnException", 400, ram.delete_resource_share, resourceShareArn="share-1")
    ram.delete_resource_share(resourceShareArn=quick)
    with test.subTest("ram delete: the associations DISASSOCIATED (no delay)"):
        test.assertEqual({a[2] for a in statuses(quick)}, {"DISASSOCIATED"})

    st = sim._req("GET", "/_sim/ram/shares")
    with test.subTest("ram state: every share"):
        test.assertEqual(len(st["shares"]), len(ram.get_resource_shares(resourceOwner="SELF")["resourceShares"]))
    first = next(x for x in st["shares"] if x["resource_share_arn"] == arn)
    # Both blocks ended at 11:30; the member stays, the organization was disassociated.
    with test.subTest("ram state: a share's associations"):
        test.assertEqual([(x["association_type"], x["status"]) for x in first["associations"]], [("RESOURCE", "DISASSOCIATED"), ("PRINCIPAL", "ASSOCIATED"), ("RESOURCE", "DISASSOCIATED"), ("PRINCIPAL", "DISASSOCIATED")])
    with test.subTest("ram state: calls counted"):
        test.assertEqual(sim.state()["calls"]["ram:CreateResourceShare"] > 10, True)


class Boto3Check(unittest.TestCase):
    endpoint = os.environ.get("AWS_ENDPOINT_URL_EC2")
    scenario = str(Path(__file__).resolve().parent.parent / "examples" / "basic.toml")

    def test_every_action_through_boto3(self):
        """Each check is a subtest: a mismatch is reported with its name and the rest go on."""
        if not self.endpoint:
            self.fail("give --endpoint or set AWS_ENDPOINT_URL_EC2")
        run(self, self.endpoint, self.scenario)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", default=Boto3Check.endpoint)
    ap.add_argument("--scenario", default=Boto3Check.scenario)
    args, rest = ap.parse_known_args()
    Boto3Check.endpoint, Boto3Check.scenario = args.endpoint, args.scenario
    unittest.main(argv=[sys.argv[0], *rest])
