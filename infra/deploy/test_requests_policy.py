#!/usr/bin/env python3
"""The requesters' and approvers' managed policies (template.yaml: RequesterPolicy,
ApproverPolicy), evaluated as IAM evaluates them for DynamoDB fine-grained access, on the
template's own documents.

Run: infra/deploy/unit.sh, or python3 infra/deploy/test_requests_policy.py

A requester (aws:userid AROAEXAMPLE:ada) may put, update and read items under her own partition
key REQUEST#AROAEXAMPLE:ada with the request's attributes only; another's key, a decision, a
gsi1 attribute (which would enter a listing the functions trust) or a rule is refused. An
approver may write decisions and list requests (gsi2), never a request item or a rule.

What the emulator checks and what it does not: moto does not evaluate IAM for DynamoDB (nor
its condition keys dynamodb:LeadingKeys and dynamodb:Attributes) unless its IAM enforcement is
turned on, and even then not these condition keys; so the local stack cannot show a refusal,
and this evaluator is the check of the documents. It implements what the documents use: Allow
statements, exact actions, the table's and the index's ARNs, and ForAllValues:StringEquals /
ForAllValues:StringLike over a multivalued key, with ${aws:userid} substituted (an absent key
satisfies ForAllValues, as in IAM).
"""

from __future__ import annotations

import fnmatch
import functools
import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from crosscheck import cfn

TEMPLATE = HERE.parent.parent / "template.yaml"
TABLE = "arn:aws:dynamodb:us-east-1:111122223333:table/capblock-Table"
STACK_ID = "arn:aws:cloudformation:us-east-1:111122223333:stack/capblock/1"
ADA = "AROAEXAMPLE:ada"


def resolve(v) -> str:
    """The ARNs the documents name, for this stack."""
    if v == {"Fn::GetAtt": ["Table", "Arn"]}:
        return TABLE
    if v == {"Fn::Sub": "${Table.Arn}/index/gsi2"}:
        return TABLE + "/index/gsi2"
    if v == {"Ref": "AWS::StackId"}:
        return STACK_ID
    raise AssertionError(f"unexpected resource {v!r}")


def holds(condition: dict, context: dict, userid: str) -> bool:
    for op, keys in condition.items():
        for key, wanted in keys.items():
            wanted = [w.replace("${aws:userid}", userid) for w in cfn.as_list(wanted)]
            values = context.get(key)
            if values is None:
                continue  # ForAllValues over no values: true
            if op == "ForAllValues:StringEquals":
                ok = all(v in wanted for v in values)
            elif op == "ForAllValues:StringLike":
                ok = all(any(fnmatch.fnmatchcase(v, w) for w in wanted) for v in values)
            else:
                raise AssertionError(f"the evaluator does not know {op}")
            if not ok:
                return False
    return True


@functools.cache
def template() -> dict:
    return cfn.load_template(TEMPLATE)


def allows(policy: str, action: str, resource: str, context: dict, userid: str = ADA) -> bool:
    doc = template()["Resources"][policy]["Properties"]["PolicyDocument"]
    for st in doc["Statement"]:
        assert st["Effect"] == "Allow", "the evaluator reads Allow statements only"
        if action not in cfn.as_list(st["Action"]):
            continue
        if resource not in [resolve(r) for r in cfn.as_list(st["Resource"])]:
            continue
        if holds(st.get("Condition", {}), context, userid):
            return True
    return False


def item(pk: str, *attributes: str) -> dict:
    return {"dynamodb:LeadingKeys": [pk], "dynamodb:Attributes": ["pk", "sk", *attributes]}


class RequesterPolicy(unittest.TestCase):
    def test_a_requester_files_reads_and_cancels_her_own_request(self):
        own = item(f"REQUEST#{ADA}", "data", "gsi2pk", "gsi2sk")
        self.assertTrue(allows("RequesterPolicy", "dynamodb:PutItem", TABLE, own))
        self.assertTrue(allows("RequesterPolicy", "dynamodb:UpdateItem", TABLE, item(f"REQUEST#{ADA}", "cancelled_at")))
        self.assertTrue(allows("RequesterPolicy", "dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": [f"REQUEST#{ADA}"]}))

    def test_another_requesters_item_is_refused(self):
        theirs = item("REQUEST#AROAOTHER:eve", "data", "gsi2pk", "gsi2sk")
        self.assertFalse(allows("RequesterPolicy", "dynamodb:PutItem", TABLE, theirs))
        self.assertFalse(allows("RequesterPolicy", "dynamodb:UpdateItem", TABLE, item("REQUEST#AROAOTHER:eve", "cancelled_at")))
        # Her id as a prefix of another's is another key.
        self.assertFalse(allows("RequesterPolicy", "dynamodb:PutItem", TABLE, item(f"REQUEST#{ADA}x", "data")))

    def test_no_decision_rule_or_listing_attribute(self):
        for pk in ["REQUESTDECISION#rq-1", "RULE#p5", "BLOCK#cr-1", "BUDGET#TEAM#research"]:
            self.assertFalse(allows("RequesterPolicy", "dynamodb:PutItem", TABLE, item(pk, "data")), pk)
        # gsi1pk on her own item would put it into the rules' or the outbox's listing.
        self.assertFalse(allows("RequesterPolicy", "dynamodb:PutItem", TABLE, item(f"REQUEST#{ADA}", "data", "gsi1pk")))
        self.assertFalse(allows("RequesterPolicy", "dynamodb:UpdateItem", TABLE, item(f"REQUEST#{ADA}", "consumed_by")))
        self.assertFalse(allows("RequesterPolicy", "dynamodb:Query", TABLE + "/index/gsi2", {}))

    def test_she_lists_her_own_requests_and_reads_their_decisions_only(self):
        # `capblock requests list` of a requester: a Query of her own partition, projecting the
        # request's attributes, and a GetItem of each decision.
        own = item(f"REQUEST#{ADA}", "data", "cancelled_at")
        self.assertTrue(allows("RequesterPolicy", "dynamodb:Query", TABLE, own))
        self.assertTrue(allows("RequesterPolicy", "dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ["REQUESTDECISION#rq-1"]}))
        # Another's partition, everyone's listing (gsi2), or the decisions queried or written: refused.
        self.assertFalse(allows("RequesterPolicy", "dynamodb:Query", TABLE, item("REQUEST#AROAOTHER:eve", "data")))
        self.assertFalse(allows("RequesterPolicy", "dynamodb:Query", TABLE + "/index/gsi2", {"dynamodb:LeadingKeys": ["REQUESTS"]}))
        self.assertFalse(allows("RequesterPolicy", "dynamodb:Query", TABLE, {"dynamodb:LeadingKeys": ["REQUESTDECISION#rq-1"]}))
        for action in ["dynamodb:PutItem", "dynamodb:UpdateItem"]:
            self.assertFalse(allows("RequesterPolicy", action, TABLE, item("REQUESTDECISION#rq-1", "data", "verdict")), action)

    def test_what_filing_tells_her_is_read_only(self):
        for pk in ["STACK", "BUDGET#TEAM#research", "OBS#us-east-1#p5.48xlarge"]:
            self.assertTrue(allows("RequesterPolicy", "dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": [pk]}), pk)
            self.assertFalse(allows("RequesterPolicy", "dynamodb:PutItem", TABLE, item(pk, "data")), pk)
        self.assertFalse(allows("RequesterPolicy", "dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ["RULE#p5"]}))


class ApproverPolicy(unittest.TestCase):
    def test_an_approver_lists_requests_and_writes_decisions(self):
        self.assertTrue(allows("ApproverPolicy", "dynamodb:Query", TABLE + "/index/gsi2", {}))
        self.assertTrue(allows("ApproverPolicy", "dynamodb:PutItem", TABLE, item("REQUESTDECISION#rq-1", "data", "verdict")))

    def test_an_approver_writes_no_request_rule_or_budget(self):
        for pk in [f"REQUEST#{ADA}", "RULE#p5", "BUDGET#TEAM#research", "BLOCK#cr-1"]:
            self.assertFalse(allows("ApproverPolicy", "dynamodb:PutItem", TABLE, item(pk, "data")), pk)
        self.assertFalse(allows("ApproverPolicy", "dynamodb:UpdateItem", TABLE, item("REQUESTDECISION#rq-1", "consumed_by")))
        self.assertFalse(allows("ApproverPolicy", "dynamodb:Query", TABLE + "/index/gsi1", {}))


if __name__ == "__main__":
    unittest.main()
