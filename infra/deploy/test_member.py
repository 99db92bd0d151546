#!/usr/bin/env python3
"""What member.yaml (the stack StackSets deploys to each member account) promises, checked on
the template itself and against template.yaml (the capacity stack).

Run: infra/deploy/unit.sh (the deploy venv's Python: PyYAML), or
     python3 infra/deploy/test_member.py [MEMBER_TEMPLATE]
(infra/deploy/lint.sh runs cfn-lint and `sam validate --lint` on it, as on template.yaml.)

- stacksets: plain CloudFormation (no transform), so StackSets deploys it as it is; the two
  required parameters have no default; every parameter is in one group with a label and says
  what its default means (or that it is required).
- trust: the hand-off and watch roles, the only roles, trust only the capacity account, only its
  roles named <CapacityStackName>-* (which the names CloudFormation gives the capacity stack's
  roles match, whole, for any stack name the parameter allows), only inside the Organization; no
  other principal.
- hand-off role: no wildcard action, no NotAction; it allows exactly the capacity stack's own
  hand-off actions (its Handoff* statements and node-group policy) less reservation groups
  (UltraServer blocks only, never shared) plus DescribeCapacityReservations; parameters only
  under /capblock/; documents only of this account or AWS and only those named; node groups
  only of the named clusters and only when some are; groups and instances only when tagged
  capblock:handoff=<CapacityStackName>.
- watch role: exactly ec2:DescribeCapacityBlockOfferings on '*' (no resource-level permissions),
  the one action of the port a member's market client serves (OfferingSource in
  shared/src/aws/ec2/mod.rs's ACTIONS); no other policy, no condition that could widen it.
- events: the default bus's policy lets only the capacity stack's roles put, only PutEvents,
  only source capblock, only inside the Organization; the rule matches source capblock from
  the capacity account and logs to a log group EventBridge may write to (the put tied to the
  rule).
- together: the hand-off role's name is the one the capacity stack's track-blocks may assume, the
  watch role's the one its scan-offerings may assume, and both are the names the Rust code
  assumes (shared/src/aws/accounts.rs); the bus is one the capacity stack's three functions may
  put a shared block's events on (same region), and its policy admits each of their roles; the
  outputs name the roles, the bus and the rule.
"""

from __future__ import annotations

import json
import re
import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # leave no __pycache__ in infra/deploy
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import test_template as capacity
from crosscheck import cfn, rust

REPO = HERE.parent.parent
MEMBER = REPO / "member.yaml"

as_list = cfn.as_list
ref = cfn.ref_target

CAPACITY_ACCOUNT = "444455556666"
ORG = "o-a1b2c3d4e5"
# A member stack's parameters as StackSets would pass them (PSEUDO's account is the member's).
PARAMS = {
    "CapacityAccountId": CAPACITY_ACCOUNT,
    "OrganizationId": ORG,
    "CapacityStackName": "capblock",
    "HandoffClusters": "train,infer-2",
    "HandoffDocuments": "capblock-checkpoint,AWS-RunShellScript",
}
MEMBER_ACCOUNT = capacity.PSEUDO["AWS::AccountId"]
# The longest physical-id suffix CloudFormation appends to a role it names
# (<stack>-<LogicalId>-<suffix>), and IAM's limit on a role's name.
CFN_SUFFIX, ROLE_NAME_MAX = 13, 64
# What a rule's actions need in a member account beyond what track-blocks is granted for them at
# home: the shared block, as the member account sees it.
MEMBER_ONLY_ACTIONS = {"ec2:DescribeCapacityReservations"}
# Reservation groups take UltraServer blocks only, which cannot be shared.
# Reservation groups stay in the capacity account: grouping and its dependent tagging actions
# (the tagging API's, and EC2's own on the grouped reservation).
NEVER_SHARED_ACTIONS = ("resource-groups:", "tag:", "ec2:CreateTags", "ec2:DeleteTags")


def resolve(expr, params: dict[str, str] | None = None):
    return capacity.resolve(expr, {**PARAMS, **(params or {})})


class Member(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tpl = cfn.load_template(MEMBER)
        cls.res = cls.tpl["Resources"]
        cls.cap = cfn.load_template(capacity.TEMPLATE)

    def of_type(self, t: str, tpl: dict | None = None) -> dict[str, dict]:
        return {k: v for k, v in (tpl or self.tpl)["Resources"].items() if v.get("Type") == t}

    def role_statements(self, role_id: str) -> list[dict]:
        return capacity.role_statements(self.res, role_id)


class StackSets(Member):
    def test_plain_cloudformation(self):
        self.assertNotIn("Transform", self.tpl)
        for rid, r in self.res.items():
            self.assertTrue(r["Type"].startswith("AWS::") and not r["Type"].startswith("AWS::Serverless::"), rid)

    def test_the_capacity_account_and_organization_are_required(self):
        params = self.tpl["Parameters"]
        for name in ("CapacityAccountId", "OrganizationId"):
            self.assertNotIn("Default", params[name], name)
        self.assertEqual(params["CapacityStackName"]["Default"], "capblock")
        for name in ("HandoffClusters", "HandoffDocuments"):
            self.assertEqual(params[name]["Default"], "", name)
        cases = {
            "CapacityAccountId": (["123456789012"], ["", "12345678901", "arn:aws:iam::123456789012:root"]),
            "OrganizationId": (["o-a1b2c3d4e5"], ["", "o-", "a1b2c3d4e5"]),
            "CapacityStackName": (["capblock", "a", "cb-prod-2", "c" * 30], ["", "1cb", "cb_prod", "cb*", "c" * 31]),
        }
        for name, (good, bad) in cases.items():
            for v in good:
                self.assertIsNotNone(re.fullmatch(params[name]["AllowedPattern"], v), f"{name}={v!r}")
            for v in bad:
                self.assertIsNone(re.fullmatch(params[name]["AllowedPattern"], v), f"{name}={v!r}")
        # The hand-off lists take what the capacity stack's do.
        for name in ("HandoffClusters", "HandoffDocuments"):
            self.assertEqual(params[name]["AllowedPattern"], self.cap["Parameters"][name]["AllowedPattern"], name)

    def test_each_parameter_is_described_grouped_and_labelled(self):
        ui = self.tpl["Metadata"]["AWS::CloudFormation::Interface"]
        params = list(self.tpl["Parameters"])
        self.assertEqual([n for g in ui["ParameterGroups"] for n in g["Parameters"]], params)
        self.assertEqual(set(ui["ParameterLabels"]), set(params))
        for name, p in self.tpl["Parameters"].items():
            d = p.get("Description", "")
            self.assertTrue(d and "\n" not in d and len(d) <= 400, name)
            self.assertRegex(d, r"\bDefault\b" if "Default" in p else r"\bRequired\b", name)


class Trust(Member):
    ROLES = ("HandoffRole", "WatchRole")

    def test_only_the_capacity_stacks_roles_inside_the_organization(self):
        for rid in self.ROLES:
            (s,) = as_list(self.res[rid]["Properties"]["AssumeRolePolicyDocument"]["Statement"])
            self.assertEqual((s["Effect"], s["Action"]), ("Allow", "sts:AssumeRole"), rid)
            self.assertEqual(list(s["Principal"]), ["AWS"], rid)
            self.assertEqual(resolve(s["Principal"]["AWS"]), f"arn:aws:iam::{CAPACITY_ACCOUNT}:root", rid)
            cond = s["Condition"]
            self.assertEqual(set(cond), {"StringEquals", "ArnLike"}, rid)
            self.assertEqual(cond["StringEquals"], {"aws:PrincipalOrgID": {"Ref": "OrganizationId"}}, rid)
            self.assertEqual(list(cond["ArnLike"]), ["aws:PrincipalArn"], rid)
            pattern = resolve(cond["ArnLike"]["aws:PrincipalArn"])
            self.assertEqual(pattern, f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/capblock-*", rid)
            for who in (f"arn:aws:iam::{MEMBER_ACCOUNT}:role/capblock-TrackBlocksRole-1A2B3C4D5E6F7",
                        f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/Admin",
                        f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/capblockx-TrackBlocksRole-1A2B3C4D5E6F7",
                        f"arn:aws:iam::{CAPACITY_ACCOUNT}:user/capblock-ops"):
                self.assertFalse(capacity.arn_matches(pattern, who), f"{rid}: {who}")

    def test_the_names_cloudformation_gives_the_capacity_roles_match(self):
        # Every role of the capacity stack, named by CloudFormation, keeps the stack's whole name
        # for the longest name CapacityStackName allows, so the trusts' pattern matches it.
        longest = "c" * 30
        self.assertIsNotNone(re.fullmatch(self.tpl["Parameters"]["CapacityStackName"]["AllowedPattern"], longest))
        roles = self.of_type("AWS::IAM::Role", self.cap)
        self.assertIn("TrackBlocksRole", roles)
        for rid, r in roles.items():
            self.assertNotIn("RoleName", r["Properties"], rid)
            name = f"{longest}-{rid}-{'X' * CFN_SUFFIX}"
            self.assertLessEqual(len(name), ROLE_NAME_MAX, rid)
            for own in self.ROLES:
                pattern = resolve(self.res[own]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
                                  ["Condition"]["ArnLike"]["aws:PrincipalArn"], {"CapacityStackName": longest})
                self.assertTrue(capacity.arn_matches(pattern, f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/{name}"),
                                f"{own} trusts {rid}")
        # ... and this stack's role names fit too.
        for rid in self.ROLES:
            self.assertLessEqual(len(resolve(self.res[rid]["Properties"]["RoleName"], {"CapacityStackName": longest})),
                                 ROLE_NAME_MAX, rid)

    def test_no_other_role_and_no_external_id(self):
        self.assertEqual(set(self.of_type("AWS::IAM::Role")), set(self.ROLES))
        for rid in self.ROLES:
            self.assertNotIn("sts:ExternalId", json.dumps(self.res[rid]["Properties"]["AssumeRolePolicyDocument"]), rid)


class Handoff(Member):
    def capacity_handoff_actions(self) -> set[str]:
        """The actions template.yaml grants track-blocks for rules' actions: its Handoff*
        statements and its node-group policy."""
        cap = self.cap["Resources"]
        stmts = [s for p in cap["TrackBlocksRole"]["Properties"]["Policies"]
                 for s in as_list(p["PolicyDocument"]["Statement"]) if s.get("Sid", "").startswith("Handoff")]
        stmts += as_list(cap["TrackBlocksNodegroupsPolicy"]["Properties"]["PolicyDocument"]["Statement"])
        return {a for s in stmts if s["Effect"] == "Allow" for a in as_list(s["Action"])}

    def test_exactly_the_capacity_stacks_handoff_actions(self):
        stmts = self.role_statements("HandoffRole")
        for s in stmts:
            self.assertNotIn("NotAction", s, s.get("Sid"))
            for a in as_list(s["Action"]):
                self.assertNotIn("*", a, s.get("Sid"))
        allowed = {a for s in stmts if s["Effect"] == "Allow" for a in as_list(s["Action"])}
        home = {a for a in self.capacity_handoff_actions() if not a.startswith(NEVER_SHARED_ACTIONS)}
        self.assertEqual(allowed, home | MEMBER_ONLY_ACTIONS)
        self.assertEqual(allowed, {
            "ssm:PutParameter", "ssm:GetParameter", "ssm:DeleteParameter",
            "autoscaling:SetDesiredCapacity", "autoscaling:DescribeAutoScalingGroups",
            "ssm:SendCommand", "ssm:ListCommands", "ssm:GetCommandInvocation",
            "ec2:DescribeInstances", "ec2:DescribeCapacityReservations",
            "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig",
        })
        # '*' only for the calls without resource-level permissions.
        star = {a for s in stmts if s["Effect"] == "Allow" and cfn.is_star(s.get("Resource")) for a in as_list(s["Action"])}
        self.assertEqual(star, {"autoscaling:DescribeAutoScalingGroups", "ssm:ListCommands", "ssm:GetCommandInvocation",
                                "ec2:DescribeInstances", "ec2:DescribeCapacityReservations"})

    def may(self, action: str, arn: str, **params: str) -> bool:
        stmts = [s for s in self.role_statements("HandoffRole") if "Condition" not in s]
        return capacity.allowed(stmts, action, arn, {**PARAMS, **params})

    def test_parameters_only_under_capblock(self):
        ssm = f"arn:aws:ssm:us-west-2:{MEMBER_ACCOUNT}:parameter"
        for action in ("ssm:PutParameter", "ssm:GetParameter", "ssm:DeleteParameter"):
            self.assertTrue(self.may(action, f"{ssm}/capblock/p5-weekly/current"), action)
            self.assertFalse(self.may(action, f"{ssm}/other/secret"), action)
            self.assertFalse(self.may(action, "arn:aws:ssm:us-west-2:999999999999:parameter/capblock/x"), action)

    def test_commands_only_with_named_documents_of_this_account_or_aws(self):
        ssm = "arn:aws:ssm:us-west-2"
        self.assertTrue(self.may("ssm:SendCommand", f"{ssm}:{MEMBER_ACCOUNT}:document/capblock-checkpoint"))
        self.assertTrue(self.may("ssm:SendCommand", f"{ssm}::document/AWS-RunShellScript"))
        self.assertFalse(self.may("ssm:SendCommand", f"{ssm}:999999999999:document/capblock-checkpoint"))
        self.assertFalse(self.may("ssm:SendCommand", f"{ssm}:{MEMBER_ACCOUNT}:document/other"))
        self.assertFalse(self.may("ssm:SendCommand", f"{ssm}::document/AWS-RunShellScript", HandoffDocuments=""))

    def tag_condition(self, action: str) -> dict:
        (s,) = [s for s in self.role_statements("HandoffRole") if s["Effect"] == "Allow" and "Condition" in s
                and action in as_list(s["Action"])]
        return s["Condition"]["StringEquals"]

    def test_groups_and_instances_only_when_tagged_for_the_capacity_stack(self):
        self.assertEqual(self.tag_condition("autoscaling:SetDesiredCapacity"),
                         {"aws:ResourceTag/capblock:handoff": {"Ref": "CapacityStackName"}})
        self.assertEqual(self.tag_condition("ssm:SendCommand"),
                         {"ssm:resourceTag/capblock:handoff": {"Ref": "CapacityStackName"}})
        # ... and not at all without the tag.
        self.assertFalse(self.may("autoscaling:SetDesiredCapacity",
                                  f"arn:aws:autoscaling:us-west-2:{MEMBER_ACCOUNT}:autoScalingGroup:x:autoScalingGroupName/g"))

    def test_node_groups_only_of_the_named_clusters_and_only_when_some_are(self):
        (policy,) = self.of_type("AWS::IAM::Policy").values()
        self.assertEqual([ref(r) for r in policy["Properties"]["Roles"]], ["HandoffRole"])
        cond = self.tpl["Conditions"][policy["Condition"]]
        self.assertFalse(capacity.evaluate(cond, {"HandoffClusters": ""}), "the default grants nothing")
        self.assertTrue(capacity.evaluate(cond, {"HandoffClusters": "train"}))
        eks = "arn:aws:eks:us-west-2"
        for action in ("eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"):
            self.assertTrue(self.may(action, f"{eks}:{MEMBER_ACCOUNT}:nodegroup/train/p5/0ac7a1b2"), action)
            self.assertTrue(self.may(action, f"{eks}:{MEMBER_ACCOUNT}:nodegroup/infer-2/gpu/0ac7a1b2"), action)
            self.assertFalse(self.may(action, f"{eks}:{MEMBER_ACCOUNT}:nodegroup/train-b/gpu/0ac7a1b2"), action)
            self.assertFalse(self.may(action, f"{eks}:999999999999:nodegroup/infer-2/gpu/0ac7a1b2"), action)


class Watch(Member):
    """The read-only role the capacity stack's scan-offerings asks the market through."""

    def test_it_may_ask_the_market_and_nothing_else(self):
        stmts = self.role_statements("WatchRole")
        (s,) = stmts
        self.assertEqual(s["Effect"], "Allow")
        self.assertNotIn("NotAction", s)
        self.assertNotIn("Condition", s)
        self.assertEqual(as_list(s["Action"]), ["ec2:DescribeCapacityBlockOfferings"])
        # The action has no resource-level permissions: '*' is the only resource it takes.
        self.assertTrue(cfn.is_star(s["Resource"]))
        data = cfn.load_action_data()
        if data is not None:
            self.assertFalse(cfn.deep_get(data, "ec2", "Actions", "describecapacityblockofferings", "Resources"))
        # No policy attached besides its own (the node-group policy is the hand-off role's).
        for pid, p in self.of_type("AWS::IAM::Policy").items():
            self.assertNotIn("WatchRole", [ref(r) for r in p["Properties"]["Roles"]], pid)
        self.assertNotIn("ManagedPolicyArns", self.res["WatchRole"]["Properties"])
        self.assertNotIn("Condition", self.res["WatchRole"])

    def test_its_action_is_what_a_members_market_client_calls(self):
        # MemberMarket.market is an OfferingSource (core/src/ports/market.rs): the ec2 adapter's
        # table says what that port calls.
        table = rust.declared_actions((REPO / "shared/src/aws/ec2/mod.rs").read_text(encoding="utf-8"))
        (s,) = self.role_statements("WatchRole")
        self.assertEqual(set(as_list(s["Action"])), set(table["OfferingSource"]))


class Events(Member):
    def test_the_bus_lets_only_the_capacity_stack_put_capblock_events_inside_the_organization(self):
        (policy,) = self.of_type("AWS::Events::EventBusPolicy").values()
        p = policy["Properties"]
        self.assertEqual(p["EventBusName"], "default")
        self.assertEqual(resolve(p["StatementId"]), "capblock-capblock")
        s = p["Statement"]
        self.assertEqual((s["Effect"], s["Action"]), ("Allow", "events:PutEvents"))
        self.assertEqual(resolve(s["Principal"]["AWS"]), f"arn:aws:iam::{CAPACITY_ACCOUNT}:root")
        self.assertEqual(resolve(s["Resource"]), f"arn:aws:events:us-east-1:{MEMBER_ACCOUNT}:event-bus/default")
        cond = s["Condition"]
        self.assertEqual(cond["StringEquals"], {"aws:PrincipalOrgID": {"Ref": "OrganizationId"}})
        self.assertEqual(resolve(cond["ArnLike"]["aws:PrincipalArn"]), f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/capblock-*")
        self.assertEqual(cond["ForAllValues:StringEquals"], {"events:source": ["capblock"]})

    def test_the_rule_matches_capblocks_events_from_the_capacity_account_and_logs_them(self):
        (rid, rule), = self.of_type("AWS::Events::Rule").items()
        p = rule["Properties"]
        self.assertEqual(p["EventBusName"], "default")
        self.assertEqual(p["EventPattern"], {"source": ["capblock"], "account": [{"Ref": "CapacityAccountId"}]})
        ((gid, group),) = self.of_type("AWS::Logs::LogGroup").items()
        name = resolve(group["Properties"]["LogGroupName"])
        self.assertTrue(name.startswith("/aws/events/"), name)
        (target,) = p["Targets"]
        self.assertEqual(resolve(target["Arn"], {gid: name}), f"arn:aws:logs:us-east-1:{MEMBER_ACCOUNT}:log-group:{name}")
        self.assertNotIn("RoleArn", target)  # log groups take the resource policy, not a role
        # The log group's resource policy: EventBridge writes, the put tied to this rule.
        ((_, rp),) = self.of_type("AWS::Logs::ResourcePolicy").items()
        text = rp["Properties"]["PolicyDocument"]["Fn::Sub"]
        doc = json.loads(re.sub(r"\$\{([^}]+)\}", lambda m: f"<{m.group(1)}>", text))
        group_arn = f"arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:<{gid}>:*"
        puts = [s for s in doc["Statement"] if "logs:PutLogEvents" in as_list(s["Action"])]
        self.assertEqual(len(puts), 1)
        self.assertEqual(puts[0]["Condition"], {"ArnEquals": {"aws:SourceArn": f"<{rid}.Arn>"}})
        for s in doc["Statement"]:
            self.assertEqual(s["Effect"], "Allow")
            self.assertIn("events.amazonaws.com", as_list(s["Principal"]["Service"]))
            self.assertEqual(s["Resource"], group_arn)
            self.assertLessEqual(set(as_list(s["Action"])), {"logs:CreateLogStream", "logs:PutLogEvents"})


class Together(Member):
    """member.yaml's names are the ones template.yaml's functions may use."""

    def capacity_statement(self, policy: str, action: str) -> dict:
        stmts = as_list(self.cap["Resources"][policy]["Properties"]["PolicyDocument"]["Statement"])
        (s,) = [s for s in stmts if action in as_list(s["Action"])]
        return s

    def test_the_capacity_stacks_track_blocks_may_assume_the_handoff_role(self):
        s = self.capacity_statement("TrackBlocksOrganizationPolicy", "sts:AssumeRole")
        (pattern,) = as_list(capacity.resolve(s["Resource"], {"OrganizationId": ORG}))
        name = resolve(self.res["HandoffRole"]["Properties"]["RoleName"])
        self.assertTrue(capacity.arn_matches(pattern, f"arn:aws:iam::{MEMBER_ACCOUNT}:role/{name}"))
        # ... for a capacity stack of another name, only that stack's member role.
        other = resolve(self.res["HandoffRole"]["Properties"]["RoleName"], {"CapacityStackName": "other"})
        self.assertFalse(capacity.arn_matches(pattern, f"arn:aws:iam::{MEMBER_ACCOUNT}:role/{other}"))

    def test_the_capacity_stacks_scan_may_assume_the_watch_role_and_only_it(self):
        s = self.capacity_statement("ScanOfferingsOrganizationPolicy", "sts:AssumeRole")
        (pattern,) = as_list(capacity.resolve(s["Resource"], {"OrganizationId": ORG}))
        watch = resolve(self.res["WatchRole"]["Properties"]["RoleName"])
        handoff = resolve(self.res["HandoffRole"]["Properties"]["RoleName"])
        self.assertTrue(capacity.arn_matches(pattern, f"arn:aws:iam::{MEMBER_ACCOUNT}:role/{watch}"))
        self.assertFalse(capacity.arn_matches(pattern, f"arn:aws:iam::{MEMBER_ACCOUNT}:role/{handoff}"))
        other = resolve(self.res["WatchRole"]["Properties"]["RoleName"], {"CapacityStackName": "other"})
        self.assertFalse(capacity.arn_matches(pattern, f"arn:aws:iam::{MEMBER_ACCOUNT}:role/{other}"))
        # ... and track-blocks' hand-off statement does not reach the watch role.
        t = self.capacity_statement("TrackBlocksOrganizationPolicy", "sts:AssumeRole")
        (handoff_pattern,) = as_list(capacity.resolve(t["Resource"], {"OrganizationId": ORG}))
        self.assertFalse(capacity.arn_matches(handoff_pattern, f"arn:aws:iam::{MEMBER_ACCOUNT}:role/{watch}"))
        # The watch role's trust admits the scan's role as CloudFormation names it.
        pattern = resolve(self.res["WatchRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
                          ["Condition"]["ArnLike"]["aws:PrincipalArn"])
        self.assertTrue(capacity.arn_matches(pattern, f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/capblock-ScanOfferingsRole-1A2B3C4D5E6F7"))

    def test_the_role_names_are_the_ones_the_code_assumes(self):
        # shared/src/aws/accounts.rs formats the ARNs it assumes: role/capblock-handoff-{stack}
        # and role/capblock-watch-{stack}.
        code = rust.read_rust(REPO / "shared/src/aws/accounts.rs")
        formats = {x for x in code.strings if ":role/" in x}
        for rid in ("HandoffRole", "WatchRole"):
            name = self.res[rid]["Properties"]["RoleName"]["Fn::Sub"]
            self.assertIn(name.replace("${CapacityStackName}", "{stack}"), {f.split(":role/", 1)[1] for f in formats}, rid)

    def test_the_bus_admits_the_capacity_stacks_functions(self):
        # Every capacity function flushes the outbox and so may put a shared block's events here:
        # the capacity stack's MemberEventsPolicy lets each role put on this bus (same region),
        # and this bus's policy admits each of those roles as CloudFormation names them.
        (policy,) = self.of_type("AWS::Events::EventBusPolicy").values()
        statement = policy["Properties"]["Statement"]
        who = resolve(statement["Condition"]["ArnLike"]["aws:PrincipalArn"])
        bus = resolve(statement["Resource"])
        self.assertEqual(bus, resolve(self.tpl["Outputs"]["EventBusArn"]["Value"]))
        s = self.capacity_statement("MemberEventsPolicy", "events:PutEvents")
        (pattern,) = as_list(capacity.resolve(s["Resource"], {"OrganizationId": ORG}))
        self.assertTrue(capacity.arn_matches(pattern, bus))
        # The member stack in another region than the capacity stack's: the events miss it.
        self.assertFalse(capacity.arn_matches(pattern, bus.replace(":us-east-1:", ":eu-west-1:")))
        roles = [ref(r) for r in self.cap["Resources"]["MemberEventsPolicy"]["Properties"]["Roles"]]
        functions = {ref(f["Properties"]["Role"]) for f in self.of_type("AWS::Serverless::Function", self.cap).values()}
        self.assertEqual(set(roles), functions)
        for rid in roles:
            self.assertTrue(capacity.arn_matches(who, f"arn:aws:iam::{CAPACITY_ACCOUNT}:role/capblock-{rid}-1A2B3C4D5E6F7"), rid)

    def test_the_outputs(self):
        outputs = self.tpl["Outputs"]
        self.assertLessEqual({"HandoffRoleArn", "WatchRoleArn", "EventBusArn", "EventRuleName"}, set(outputs))
        self.assertEqual(outputs["HandoffRoleArn"]["Value"], {"Fn::GetAtt": ["HandoffRole", "Arn"]})
        self.assertEqual(outputs["WatchRoleArn"]["Value"], {"Fn::GetAtt": ["WatchRole", "Arn"]})
        self.assertEqual(ref(outputs["EventRuleName"]["Value"]), "CapblockEventsRule")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        MEMBER = Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=2)
