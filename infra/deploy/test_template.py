#!/usr/bin/env python3
"""What template.yaml promises about money and access, checked on the template itself.

Run: infra/deploy/unit.sh (the deploy venv's Python: PyYAML), or
     python3 infra/deploy/test_template.py [TEMPLATE]

- alarms: every money problem the functions only log has a metric filter in the log group of
  each function that logs it, and an alarm on the alarms topic, whose key is its own (a broken
  alerts topic or key cannot silence it). crosscheck.py checks the event names against the code.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # leave no __pycache__ in infra/deploy
HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("crosscheck", HERE / "crosscheck.py")
crosscheck = importlib.util.module_from_spec(_spec)
sys.modules["crosscheck"] = crosscheck
_spec.loader.exec_module(crosscheck)

TEMPLATE = HERE.parent.parent / "template.yaml"

# The money problems of issue 15, item 3: (event, extra condition on a field or None) -> the
# functions whose log groups must be filtered for it.
MONEY_EVENTS = {
    ("duplicate_purchase", None): {"ScanOfferingsFunction", "TrackBlocksFunction"},
    ("reservation_after_intent_closed", None): {"TrackBlocksFunction"},
    ("block_adopted", "tagged"): {"TrackBlocksFunction"},  # an adoption without a fee
    ("intent_missing", None): {"TrackBlocksFunction"},
    ("extension_unknown", None): {"TrackBlocksFunction"},
    ("block_failed", None): {"TrackBlocksFunction"},
    ("notice_publish_failed", None): {"ScanOfferingsFunction", "TrackBlocksFunction"},
}



def as_list(v) -> list:
    return crosscheck.as_list(v)


def ref(v) -> str | None:
    return crosscheck.ref_target(v)


# --------------------------------------------------------------------------- tests


class Template(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tpl = crosscheck.load_template(TEMPLATE)
        cls.res = cls.tpl["Resources"]

    def of_type(self, t: str) -> dict[str, dict]:
        return {k: v for k, v in self.res.items() if v.get("Type") == t}

    def role_statements(self, role_id: str) -> list[dict]:
        role = self.res[role_id]["Properties"]
        out = [s for p in role.get("Policies", []) for s in as_list(p["PolicyDocument"]["Statement"])]
        for v in self.of_type("AWS::IAM::Policy").values():
            if any(ref(r) == role_id for r in v["Properties"].get("Roles", [])):
                out += as_list(v["Properties"]["PolicyDocument"]["Statement"])
        return out


class Alarms(Template):
    def test_every_money_problem_has_a_filter_per_function_and_an_alarm_on_the_alarms_topic(self):
        fns = self.of_type("AWS::Serverless::Function")
        group_of = {ref(f["Properties"]["LoggingConfig"]["LogGroup"]): fid for fid, f in fns.items()}
        alarms = self.of_type("AWS::CloudWatch::Alarm")
        found: dict[tuple[str, str | None], set[str]] = {}
        for fid, f in self.of_type("AWS::Logs::MetricFilter").items():
            p = f["Properties"]
            pattern = p["FilterPattern"]
            for ev in re.findall(r'\$\.fields\.event = "([^"]+)"', pattern):
                fields = re.findall(r"\$\.fields\.(\w+) IS TRUE", pattern)
                key = (ev, fields[0] if fields else None)
                metric = p["MetricTransformations"][0]
                alarm = [a for a in alarms.values() if a["Properties"]["MetricName"] == metric["MetricName"]
                         and a["Properties"]["Namespace"] == metric["MetricNamespace"]]
                self.assertTrue(alarm, f"{fid}: no alarm on {metric['MetricName']}")
                for a in alarm:
                    actions = [ref(x) for x in a["Properties"].get("AlarmActions", [])]
                    self.assertIn("AlarmsTopic", actions, f"{fid}: its alarm does not publish to AlarmsTopic")
                found.setdefault(key, set()).add(group_of.get(ref(p["LogGroupName"]), "?"))
        for key, functions in MONEY_EVENTS.items():
            self.assertIn(key, found, f"no metric filter for {key}")
            self.assertLessEqual(functions, found[key], f"{key}: filtered only in {sorted(found[key])}")

    def test_every_alarm_publishes_to_the_alarms_topic(self):
        for aid, a in self.of_type("AWS::CloudWatch::Alarm").items():
            self.assertIn("AlarmsTopic", [ref(x) for x in a["Properties"].get("AlarmActions", [])], aid)

    def test_the_alarms_topic_has_a_key_of_its_own_that_cloudwatch_may_use(self):
        topic = self.res["AlarmsTopic"]["Properties"]
        key = ref(topic["KmsMasterKeyId"])
        self.assertIsNotNone(key, "the alarms topic must be encrypted with a key of this template")
        for tid, t in self.of_type("AWS::SNS::Topic").items():
            if tid != "AlarmsTopic":
                self.assertNotEqual(ref(t["Properties"].get("KmsMasterKeyId")), key, f"{tid} shares the alarms key")
        stmts = self.res[key]["Properties"]["KeyPolicy"]["Statement"]
        cw = [s for s in stmts if s.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com"]
        self.assertTrue(cw and {"kms:Decrypt", "kms:GenerateDataKey"} <= set(as_list(cw[0]["Action"])))

    def test_alarm_subscriptions_are_optional(self):
        for sid, param in [("AlarmsEmailSubscription", "AlarmEmail"), ("AlarmsHttpsSubscription", "AlarmHttpsEndpoint")]:
            sub = self.res[sid]
            self.assertEqual(ref(sub["Properties"]["TopicArn"]), "AlarmsTopic")
            self.assertEqual(ref(sub["Properties"]["Endpoint"]), param)
            self.assertIn("Condition", sub)
            self.assertEqual(self.tpl["Parameters"][param]["Default"], "")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        TEMPLATE = Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=2)
