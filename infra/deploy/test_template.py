#!/usr/bin/env python3
"""What template.yaml promises about money and access, checked on the template itself.

Run: infra/deploy/unit.sh (the deploy venv's Python: PyYAML), or
     python3 infra/deploy/test_template.py [TEMPLATE]

- alarms: every money problem the functions only log has a metric filter in the log group of
  each function that logs it, and an alarm on the alarms topic, whose key is its own (a broken
  alerts topic or key cannot silence it). infra/deploy/crosscheck checks the event names against the code.
- live budget: the template's Rules refuse Mode=live without a positive AccountMonthlyBudget
  (evaluated here as CloudFormation would, for the parameter sets below), and '0' is the only
  spelling of zero the parameter's pattern accepts.
- dashboard: a default time range; each function's Lambda Errors, Throttles, Duration (a
  percentile or the maximum) and ConcurrentExecutions; the depth of every dead-letter queue the
  template sends failures to; the Scheduler metrics of every schedule group; a Logs Insights
  table over every function's log group that names the purchase and extension events the Rust
  code really logs (read from the sources here).
- parameters: each has a one-line Description that says what its default means; each is in one
  ParameterGroup with a ParameterLabel; the template lists them in the groups' order, first
  deployment's group first (the order `sam deploy --guided` asks them in).
- guards: purchases (and their tags, and extensions) only in PurchaseRegions; the table keeps
  DeletionProtectionEnabled; scan-offerings runs one at a time; every service principal trusted
  by a key policy or a role comes with aws:SourceAccount and aws:SourceArn; only the roles that
  publish to a topic (and CloudWatch, for the topics alarms use) may publish to it; the extension
  offerings describe is scoped to this stack's blocks.
- organization: TeamBudgets, OrganizationId and WatchAccounts default to nothing and take only
  their forms (WatchAccounts: up to 8 account ids), and the Rules refuse WatchAccounts without
  OrganizationId; the functions that store the stack's settings get the team budgets, and only
  scan-offerings an account list (CAPBLOCK_WATCH_ACCOUNTS); only track-blocks (RAM shares, the
  member accounts' hand-off role), scan-offerings (the member accounts' watch role) and, for a
  shared block's events, all three functions (member accounts' default buses) act outside this
  account, through policies that exist only with an organization, with exactly those actions,
  any other account only inside the Organization (aws:ResourceOrgID); shares only of this
  account's capacity reservations, tagged for this stack, never outside the Organization; the
  events only on the default bus, only in this region. member.yaml's side: test_member.py.
- team page: with TeamPage=Enabled (the default) a bucket with all four public access blocks,
  no ACLs, default encryption and no versioning, whose policy (evaluated with and without
  OrganizationId) lets only this account and the Organization's principals (aws:PrincipalOrgID)
  read and denies access without TLS; only track-blocks writes, only team.html; Disabled creates
  none of it and leaves track-blocks without the bucket's variable.
"""

from __future__ import annotations

import re
import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # leave no __pycache__ in infra/deploy
HERE = Path(__file__).resolve().parent
# the crosscheck package beside this file: its template reader
sys.path.insert(0, str(HERE))
import dashboard
from crosscheck import cfn as crosscheck

REPO = HERE.parent.parent
TEMPLATE = REPO / "template.yaml"

# The money problems of issue 15, item 3: (event, extra condition on a field or None) -> the
# functions whose log groups must be filtered for it.
MONEY_EVENTS = {
    ("duplicate_purchase", None): {"ScanOfferingsFunction", "TrackBlocksFunction"},
    ("reservation_after_intent_closed", None): {"TrackBlocksFunction"},
    ("block_adopted", "tagged"): {"TrackBlocksFunction"},  # an adoption without a fee
    ("intent_missing", None): {"TrackBlocksFunction"},
    ("extension_unknown", None): {"TrackBlocksFunction"},
    ("extension_overdue", None): {"TrackBlocksFunction"},
    ("ledger_mismatch", None): {"TrackBlocksFunction"},
    ("block_failed", None): {"TrackBlocksFunction"},
    ("notice_publish_failed", None): {"ScanOfferingsFunction", "TrackBlocksFunction"},
}

PURCHASE_ACTIONS = {"ec2:PurchaseCapacityBlock", "ec2:PurchaseCapacityBlockExtension", "ec2:CreateTags"}
# Service principals whose trust needs no confused-deputy condition: Lambda assumes execution
# roles for this account's functions only; the chat role carries no permission at all.
NO_SOURCE_CONDITION = {"lambda.amazonaws.com", "chatbot.amazonaws.com"}


def as_list(v) -> list:
    return crosscheck.as_list(v)


def ref(v) -> str | None:
    return crosscheck.ref_target(v)


# --------------------------------------------------------------------------- CloudFormation Rules


class RuleError(Exception):
    pass


def evaluate(expr, params: dict[str, str], conditions: dict | None = None):
    """Evaluates a Rules or Conditions expression (Fn::Equals/Not/And/Or/Contains, Ref to a
    parameter, and Condition to another of `conditions`, the template's Conditions)."""
    if isinstance(expr, (str, bool, int)):
        return expr
    if isinstance(expr, list):
        return [evaluate(e, params, conditions) for e in expr]
    if not isinstance(expr, dict) or len(expr) != 1:
        raise RuleError(f"unsupported expression {expr!r}")
    (fn, arg), = expr.items()
    if fn == "Ref":
        if arg not in params:
            raise RuleError(f"Ref to {arg!r}: not a parameter")
        return params[arg]
    if fn == "Condition":
        if conditions is None or arg not in conditions:
            raise RuleError(f"Condition {arg!r}: not a condition of the template")
        return evaluate(conditions[arg], params, conditions)
    args = evaluate(arg, params, conditions)
    if fn == "Fn::Equals":
        return str(args[0]) == str(args[1])
    if fn == "Fn::Not":
        return not args[0]
    if fn == "Fn::And":
        return all(args)
    if fn == "Fn::Or":
        return any(args)
    if fn == "Fn::Contains":
        return str(args[1]) in [str(x) for x in args[0]]
    raise RuleError(f"unsupported function {fn}")


def failed_assertions(tpl: dict, overrides: dict[str, str]) -> list[str]:
    """The AssertDescriptions CloudFormation would stop a deploy with, for these parameters."""
    params = {k: str(v.get("Default", "")) for k, v in (tpl.get("Parameters") or {}).items()}
    params.update(overrides)
    out = []
    for name, rule in (tpl.get("Rules") or {}).items():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], params):
            continue
        for a in rule.get("Assertions", []):
            if not evaluate(a["Assert"], params):
                out.append(f"{name}: {a.get('AssertDescription', '')}")
    return out



# --------------------------------------------------------------------------- IAM, evaluated

PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::AccountId": "111122223333",
    "AWS::Region": "us-east-1",
    "AWS::StackName": "capblock",
}


def resolve(expr, params: dict[str, str]):
    """A resource expression's value (Ref, Fn::Sub, Fn::Join, Fn::Split) for these parameters."""
    if isinstance(expr, str):
        return expr
    if isinstance(expr, list):
        return [resolve(e, params) for e in expr]
    (fn, arg), = expr.items()
    if fn == "Ref":
        return {**PSEUDO, **params}[arg]
    if fn == "Fn::Sub":
        text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        names = {**PSEUDO, **params, **{k: resolve(v, params) for k, v in extra.items()}}
        return re.sub(r"\$\{([^}!]+)\}", lambda m: names[m.group(1)], text)
    if fn == "Fn::Join":
        return arg[0].join(resolve(arg[1], params))
    if fn == "Fn::Split":
        return resolve(arg[1], params).split(arg[0])
    raise RuleError(f"unsupported function {fn}")


def role_statements(resources: dict, role_id: str) -> list[dict]:
    """The statements of a role's own policies and of every policy attached to it."""
    role = resources[role_id]["Properties"]
    out = [s for p in role.get("Policies", []) for s in as_list(p["PolicyDocument"]["Statement"])]
    for v in resources.values():
        if v.get("Type") == "AWS::IAM::Policy" and any(ref(r) == role_id for r in v["Properties"].get("Roles", [])):
            out += as_list(v["Properties"]["PolicyDocument"]["Statement"])
    return out


def arn_matches(pattern: str, arn: str) -> bool:
    """IAM's ARN matching: `*` any run of characters, `?` one."""
    return re.fullmatch("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), arn) is not None


def allowed(statements: list[dict], action: str, arn: str, params: dict[str, str]) -> bool:
    """Whether the statements (without conditions) allow `action` on `arn`: an Allow matches and
    no Deny does."""

    def matches(s: dict) -> bool:
        if action not in as_list(s.get("Action")):
            return False
        if "NotResource" in s:
            return not any(arn_matches(r, arn) for r in as_list(resolve(s["NotResource"], params)))
        return any(arn_matches(r, arn) for r in as_list(resolve(s.get("Resource"), params)))

    return any(s["Effect"] == "Allow" and matches(s) for s in statements) and not any(
        s["Effect"] == "Deny" and matches(s) for s in statements
    )


# --------------------------------------------------------------------------- tests


class Template(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tpl = crosscheck.load_template(TEMPLATE)
        cls.res = cls.tpl["Resources"]

    def of_type(self, t: str) -> dict[str, dict]:
        return {k: v for k, v in self.res.items() if v.get("Type") == t}

    def role_statements(self, role_id: str) -> list[dict]:
        return role_statements(self.res, role_id)


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


class LiveBudget(Template):
    def test_live_without_an_account_budget_is_refused_with_a_clear_message(self):
        failed = failed_assertions(self.tpl, {"Mode": "live"})
        self.assertEqual(len(failed), 1, failed)
        self.assertIn("Mode=live needs a positive AccountMonthlyBudget", failed[0])
        self.assertTrue(failed_assertions(self.tpl, {"Mode": "live", "AccountMonthlyBudget": "0"}))

    def test_live_with_a_budget_and_dry_run_without_one_deploy(self):
        self.assertEqual(failed_assertions(self.tpl, {"Mode": "live", "AccountMonthlyBudget": "250000"}), [])
        self.assertEqual(failed_assertions(self.tpl, {"Mode": "live", "AccountMonthlyBudget": "1.50"}), [])
        self.assertEqual(failed_assertions(self.tpl, {"Mode": "dry-run"}), [])
        self.assertEqual(failed_assertions(self.tpl, {"Mode": "dry-run", "AccountMonthlyBudget": "0"}), [])

    def test_zero_has_one_spelling(self):
        # The rule compares with '0': any other spelling of zero must not pass the pattern.
        pattern = re.compile(self.tpl["Parameters"]["AccountMonthlyBudget"]["AllowedPattern"])
        for ok in ["0", "1", "250000", "250000.00", "1.5", "999999999999.99"]:
            self.assertTrue(pattern.fullmatch(ok), ok)
        for bad in ["00", "0.0", "0.00", "000", "0.5", "01", "-1", "1e6", "", "1.234"]:
            self.assertFalse(pattern.fullmatch(bad), bad)


# The events the dashboard's "recent purchases and extensions" table shows: (the file that logs
# it, the `event` it logs when EC2 took the money). A rename on either side fails the test.
DASHBOARD_EVENTS = {
    "core/src/app/purchase.rs": "purchased",
    "core/src/app/extend.rs": "extension_bought",
}
# EventBridge Scheduler's metrics (namespace AWS/Scheduler, dimension ScheduleGroup) the
# dashboard must show for each schedule group: attempts, and each way an invocation fails.
SCHEDULER_METRICS = {"InvocationAttemptCount", "TargetErrorCount", "InvocationDroppedCount"}
LAMBDA_METRICS = {"Errors", "Throttles", "Duration", "ConcurrentExecutions"}


def metric_rows(body: dict):
    """Every metric of the body's metric widgets as (namespace, name, {dimension: value},
    options), CloudWatch's "." (same as the row above) expanded."""
    for w in body["widgets"]:
        if w.get("type") != "metric":
            continue
        prev: list = []
        for row in w["properties"].get("metrics", []):
            opts = row[-1] if row and isinstance(row[-1], dict) else {}
            items = row[:-1] if opts else row
            if not items:  # an expression row
                continue
            items = [prev[i] if v == "." and i < len(prev) else v for i, v in enumerate(items)]
            prev = items
            yield items[0], items[1], dict(zip(items[2::2], items[3::2], strict=True)), opts


def rust_logs(event: str, path: Path) -> bool:
    """Whether a tracing call in `path` logs `event = "<event>"` at info or above."""
    text = path.read_text(encoding="utf-8")
    return re.search(r'tracing::(info|warn|error)!\(\s*event = "' + re.escape(event) + '"', text) is not None


class Dashboard(Template):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        text = TEMPLATE.read_text(encoding="utf-8")
        # Rendered with markers (ref:X, attr:X.Attr) in place of CloudFormation's names.
        # Unchecked, so that each test names what is missing; test_the_body_passes_the_checks
        # runs dashboard.py's own checks.
        cls.body = dashboard.render(dashboard.body_text(text), dashboard.markers, checked=False)
        cls.rows = list(metric_rows(cls.body))

    def has(self, namespace: str, metric: str, dims: dict[str, str]) -> list[dict]:
        return [o for ns, m, d, o in self.rows if (ns, m, d) == (namespace, metric, dims)]

    def test_a_default_time_range(self):
        self.assertIn("start", self.body, "no default time range")
        self.assertRegex(self.body["start"], dashboard.RELATIVE_START)
        self.assertIn(self.body.get("periodOverride", "auto"), ("auto", "inherit"))

    def test_the_body_passes_the_checks(self):
        self.assertEqual(dashboard.check(self.body), [])
        # ... which refuse a body without a range, or with a range CloudWatch would not read.
        widgets = self.body["widgets"]
        self.assertEqual(dashboard.check({"widgets": widgets}), ["no default time range (start)"])
        for bad in ["yesterday", "PT24H", "-P", "-PT", "-P1H"]:
            self.assertTrue(dashboard.check({"start": bad, "widgets": widgets}), bad)
        for good in ["-PT24H", "-P7D", "-P2W", "-PT15M", "-P1DT12H"]:
            self.assertEqual(dashboard.check({"start": good, "widgets": widgets}), [], good)

    def test_each_functions_errors_throttles_duration_and_concurrency(self):
        fns = self.of_type("AWS::Serverless::Function")
        self.assertEqual(len(fns), 3)
        for fid in fns:
            for metric in LAMBDA_METRICS:
                found = self.has("AWS/Lambda", metric, {"FunctionName": f"ref:{fid}"})
                self.assertTrue(found, f"no AWS/Lambda {metric} of {fid} on the dashboard")
            stats = {o.get("stat") for o in self.has("AWS/Lambda", "Duration", {"FunctionName": f"ref:{fid}"})}
            self.assertTrue({s for s in stats if s and (s == "Maximum" or re.fullmatch(r"p\d+(\.\d+)?", s))},
                            f"{fid}: Duration needs a percentile or the maximum, has {stats}")

    def dead_letter_queues(self) -> set[str]:
        """Every queue the template sends failed invocations to (functions' OnFailure
        destinations, schedules' dead-letter configs)."""
        out = set()
        for f in self.of_type("AWS::Serverless::Function").values():
            dest = f["Properties"].get("EventInvokeConfig", {}).get("DestinationConfig", {}).get("OnFailure", {})
            if dest.get("Type") == "SQS":
                out.add(dest["Destination"]["Fn::GetAtt"][0])
        for s in self.of_type("AWS::Scheduler::Schedule").values():
            if dlq := s["Properties"]["Target"].get("DeadLetterConfig"):
                out.add(dlq["Arn"]["Fn::GetAtt"][0])
        return out

    def test_the_depth_of_every_dead_letter_queue(self):
        queues = self.dead_letter_queues()
        self.assertTrue(queues)
        for q in queues:
            self.assertEqual(self.res[q]["Type"], "AWS::SQS::Queue")
            found = self.has("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": f"attr:{q}.QueueName"})
            self.assertTrue(found, f"no depth of the dead-letter queue {q}")

    def test_the_health_of_every_schedule_group(self):
        schedules = self.of_type("AWS::Scheduler::Schedule")
        self.assertTrue(schedules, "the template's schedules are EventBridge Scheduler ones")
        groups = {ref(s["Properties"].get("GroupName")) or "default" for s in schedules.values()}
        for g in groups:
            for metric in SCHEDULER_METRICS:
                found = self.has("AWS/Scheduler", metric, {"ScheduleGroup": f"ref:{g}"})
                self.assertTrue(found, f"no AWS/Scheduler {metric} of schedule group {g}")

    def log_widget(self) -> dict:
        logs = [w["properties"] for w in self.body["widgets"] if w["type"] == "log"
                and "purchases" in w["properties"].get("title", "").lower()]
        self.assertEqual(len(logs), 1, "one log widget of recent purchases and extensions")
        return logs[0]

    def test_the_purchase_log_reads_every_functions_log_group(self):
        query = self.log_widget()["query"]
        sources = set(re.findall(r"SOURCE '([^']+)'", query))
        groups = {f"ref:{ref(f['Properties']['LoggingConfig']['LogGroup'])}"
                  for f in self.of_type("AWS::Serverless::Function").values()}
        self.assertEqual(sources, groups)

    def test_the_purchase_log_names_events_the_code_logs(self):
        query = self.log_widget()["query"]
        m = re.search(r"filter `?fields\.event`? in \[([^\]]*)\]", query)
        self.assertIsNotNone(m, f"no filter on fields.event in {query!r}")
        named = set(re.findall(r'"([^"]+)"', m.group(1)))
        for path, event in DASHBOARD_EVENTS.items():
            self.assertIn(event, named, f"the table misses {event!r} ({path})")
            self.assertTrue(rust_logs(event, REPO / path), f"{path} logs no event {event!r}")
        sources = [p for d in ("core", "shared", "functions") for p in (REPO / d).rglob("*.rs")]
        for event in named:
            self.assertTrue(any(rust_logs(event, p) for p in sources), f"no code logs event {event!r}")
        self.assertFalse(rust_logs("no_such_event", REPO / "core/src/app/purchase.rs"))


class Parameters(Template):
    """What `sam deploy --guided` and the console show of the parameters. The guided deploy
    (aws-sam-cli's guided_context.prompt_parameters) asks `Parameter <Name> [default]` in the
    template's order and shows neither descriptions nor groups; the console shows both."""

    def interface(self) -> dict:
        return self.tpl["Metadata"]["AWS::CloudFormation::Interface"]

    def test_each_parameter_says_what_it_is_and_its_default_in_one_line(self):
        for name, p in self.tpl["Parameters"].items():
            d = p.get("Description", "")
            self.assertTrue(d, f"{name}: no Description")
            self.assertNotIn("\n", d, f"{name}: one line")
            self.assertLessEqual(len(d), 400, f"{name}: {len(d)} characters")
            self.assertRegex(d, r"\bDefault\b", f"{name}: say what the default means")

    def test_every_parameter_is_in_one_group_with_a_label(self):
        params = list(self.tpl["Parameters"])
        grouped = [n for g in self.interface()["ParameterGroups"] for n in g["Parameters"]]
        self.assertEqual(sorted(grouped), sorted(params), "each parameter in exactly one group")
        self.assertEqual(set(self.interface()["ParameterLabels"]), set(params))
        for name, label in self.interface()["ParameterLabels"].items():
            self.assertTrue(label.get("default"), name)

    def test_the_guided_deploy_asks_the_first_deployments_choices_first(self):
        groups = self.interface()["ParameterGroups"]
        first = groups[0]
        self.assertTrue(first["Label"]["default"].startswith("First deployment"), first["Label"])
        self.assertLessEqual({"Mode", "AccountMonthlyBudget", "Architecture"}, set(first["Parameters"]))
        # The template's order is the groups' order: what the guided deploy asks first.
        self.assertEqual(list(self.tpl["Parameters"]), [n for g in groups for n in g["Parameters"]])


class Guards(Template):
    def statements(self, when: dict[str, str] | None = None):
        """Each role's statements; `when`: only those of policies that exist with these
        parameters (the others at their defaults)."""
        gone = set()
        if when is not None:
            gone = {s_id for pid, p in self.of_type("AWS::IAM::Policy").items() if "Condition" in p
                    and not holds(self.tpl, p["Condition"], **when)
                    for s_id in map(id, as_list(p["Properties"]["PolicyDocument"]["Statement"]))}
        for rid in self.of_type("AWS::IAM::Role"):
            for s in self.role_statements(rid):
                if id(s) not in gone:
                    yield rid, s

    def test_purchases_only_in_the_purchase_regions(self):
        seen = set()
        for rid, s in self.statements():
            acts = set(as_list(s.get("Action"))) & PURCHASE_ACTIONS
            if not acts:
                continue
            seen |= acts
            cond = s.get("Condition", {}).get("StringEquals", {})
            self.assertEqual(ref(cond.get("aws:RequestedRegion")), "PurchaseRegions", f"{rid} {s.get('Sid')}")
        self.assertEqual(seen, PURCHASE_ACTIONS)
        self.assertEqual(self.tpl["Parameters"]["PurchaseRegions"]["Type"], "CommaDelimitedList")

    def test_the_ledger_table_is_protected_from_deletion(self):
        table = self.res["Table"]
        self.assertIs(table["Properties"].get("DeletionProtectionEnabled"), True)
        self.assertEqual(table.get("DeletionPolicy"), "Retain")

    def test_service_principals_come_with_source_account_and_arn(self):
        docs = []
        for kid, k in self.of_type("AWS::KMS::Key").items():
            docs += [(kid, s) for s in k["Properties"]["KeyPolicy"]["Statement"]]
        for rid, r in self.of_type("AWS::IAM::Role").items():
            docs += [(rid, s) for s in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
        for pid, p in self.of_type("AWS::SNS::TopicPolicy").items():
            docs += [(pid, s) for s in p["Properties"]["PolicyDocument"]["Statement"]]
        checked = 0
        for where, s in docs:
            services = set(as_list((s.get("Principal") or {}).get("Service"))) if isinstance(s.get("Principal"), dict) else set()
            if s.get("Effect") != "Allow" or not services - NO_SOURCE_CONDITION:
                continue
            checked += 1
            keys = {k for op in (s.get("Condition") or {}).values() for k in op}
            self.assertLessEqual({"aws:SourceAccount", "aws:SourceArn"}, keys, f"{where} {s.get('Sid', '')} {services}")
        self.assertGreaterEqual(checked, 5)  # 2 keys, 2 scheduler roles, topic policies for alarms

    def test_only_the_publishing_roles_and_cloudwatch_publish_to_each_topic(self):
        alarm_topics = {ref(x) for a in self.of_type("AWS::CloudWatch::Alarm").values()
                        for x in a["Properties"].get("AlarmActions", []) + a["Properties"].get("OKActions", [])}
        policy_of = {ref(t): p["Properties"]["PolicyDocument"] for p in self.of_type("AWS::SNS::TopicPolicy").values()
                     for t in p["Properties"]["Topics"]}
        for tid in self.of_type("AWS::SNS::Topic"):
            publishers = {rid for rid, s in self.statements()
                          if "sns:Publish" in as_list(s.get("Action")) and tid in {ref(r) for r in as_list(s.get("Resource"))}}
            self.assertIn(tid, policy_of, f"{tid} has no topic policy")
            stmts = policy_of[tid]["Statement"]
            allowed_roles, allowed_services, denies = set(), set(), []
            for s in stmts:
                if "sns:Publish" not in as_list(s.get("Action")):
                    continue
                principal = s.get("Principal", {})
                if s["Effect"] == "Deny":
                    denies.append(s)
                    continue
                allowed_services |= set(as_list(principal.get("Service")))
                for a in as_list(principal.get("AWS")):
                    self.assertIsInstance(a, dict, f"{tid}: publisher {a!r} is not one of this template's roles")
                    allowed_roles.add(a["Fn::GetAtt"][0])
            self.assertEqual(allowed_roles, publishers, tid)
            self.assertEqual(allowed_services, {"cloudwatch.amazonaws.com"} if tid in alarm_topics else set(), tid)
            # ... and a Deny for every other principal of the account, whatever their IAM policies.
            self.assertEqual(len(denies), 1, f"{tid}: expected one Deny for other publishers")
            d = denies[0]
            self.assertEqual(d["Principal"], {"AWS": "*"})
            cond = d["Condition"]
            exempt = {x["Fn::GetAtt"][0] for x in as_list(cond.get("ArnNotEquals", {}).get("aws:PrincipalArn"))}
            self.assertEqual(exempt, publishers, tid)
            if tid in alarm_topics:
                self.assertEqual(cond.get("Bool"), {"aws:PrincipalIsAWSService": "false"}, tid)

    def test_extension_offerings_are_asked_only_about_this_stacks_blocks(self):
        found = False
        for rid, s in self.statements():
            if "ec2:DescribeCapacityBlockExtensionOfferings" not in as_list(s.get("Action")):
                continue
            found = True
            self.assertFalse(crosscheck.is_star(s.get("Resource")), f"{rid}: scope it (capacity-reservation)")
            cond = s.get("Condition", {}).get("StringEquals", {})
            self.assertEqual(ref(cond.get("aws:ResourceTag/capblock:stack")), "AWS::StackName", rid)
        self.assertTrue(found)

    def test_commands_run_only_this_accounts_documents_and_aws_owned_ones(self):
        params = {"HandoffDocuments": "capblock-checkpoint,AWS-RunShellScript"}
        ssm = "arn:aws:ssm:us-west-2"
        senders = {
            rid for rid, s in self.statements() if "ssm:SendCommand" in as_list(s.get("Action"))
        }
        self.assertTrue(senders)
        for rid in senders:
            stmts = [s for s in self.role_statements(rid) if "Condition" not in s]

            def may(arn: str, stmts: list = stmts) -> bool:
                return allowed(stmts, "ssm:SendCommand", arn, params)

            for document in ("111122223333:document/capblock-checkpoint", "::document/AWS-RunShellScript"):
                self.assertTrue(may(f"{ssm}:{document}"), f"{rid} {document}")
            # Another account's document of a listed name, and a name not listed.
            for document in (
                "999999999999:document/capblock-checkpoint",
                "999999999999:document/AWS-RunShellScript",
                "111122223333:document/other",
            ):
                self.assertFalse(may(f"{ssm}:{document}"), f"{rid} {document}")
        # The parameter takes names only: an ARN names another account's document.
        pattern = self.tpl["Parameters"]["HandoffDocuments"]["AllowedPattern"]
        self.assertIsNotNone(re.fullmatch(pattern, params["HandoffDocuments"]))
        self.assertIsNone(re.fullmatch(pattern, "arn:aws:ssm:us-east-1:999999999999:document/x"))

    def test_node_groups_only_of_the_named_clusters_and_only_when_some_are(self):
        actions = ("eks:DescribeNodegroup", "eks:UpdateNodegroupConfig")
        policies = {
            pid: p for pid, p in self.of_type("AWS::IAM::Policy").items()
            if any(a in as_list(st.get("Action")) for st in as_list(p["Properties"]["PolicyDocument"]["Statement"])
                   for a in actions)
        }
        ((_, policy),) = policies.items()
        self.assertEqual([ref(r) for r in policy["Properties"]["Roles"]], ["TrackBlocksRole"])
        # No role's own policies grant EKS: only this policy, which exists only with clusters.
        for rid, role in self.of_type("AWS::IAM::Role").items():
            for p in role["Properties"].get("Policies", []):
                for st in as_list(p["PolicyDocument"]["Statement"]):
                    self.assertFalse(set(as_list(st.get("Action"))) & set(actions), f"{rid} {st.get('Sid')}")
        self.assertEqual(self.tpl["Parameters"]["HandoffClusters"]["Default"], "")
        cond = self.tpl["Conditions"][policy["Condition"]]
        self.assertFalse(evaluate(cond, {"HandoffClusters": ""}), "the default grants nothing")
        params = {"HandoffClusters": "train,infer-2"}
        self.assertTrue(evaluate(cond, params))
        stmts = as_list(policy["Properties"]["PolicyDocument"]["Statement"])
        eks = "arn:aws:eks:us-west-2"
        for action in actions:
            def may(arn: str, action: str = action) -> bool:
                return allowed(stmts, action, arn, params)

            self.assertTrue(may(f"{eks}:111122223333:nodegroup/train/p5-nodes/0ac7a1b2"), action)
            self.assertTrue(may(f"{eks}:111122223333:nodegroup/infer-2/gpu/0ac7a1b2"), action)
            # Another cluster, a cluster whose name starts like a named one, another account's.
            self.assertFalse(may(f"{eks}:111122223333:nodegroup/other/gpu/0ac7a1b2"), action)
            self.assertFalse(may(f"{eks}:111122223333:nodegroup/train-b/gpu/0ac7a1b2"), action)
            self.assertFalse(may(f"{eks}:999999999999:nodegroup/infer-2/gpu/0ac7a1b2"), action)
            self.assertFalse(may(f"{eks}:999999999999:nodegroup/train/gpu/0ac7a1b2"), action)
            self.assertFalse(may(f"{eks}:111122223333:cluster/train"), action)
        # The parameter takes EKS cluster names only.
        pattern = self.tpl["Parameters"]["HandoffClusters"]["AllowedPattern"]
        for ok in ["", "train", "train,infer-2", "a_b,0c", "c" * 100]:
            self.assertIsNotNone(re.fullmatch(pattern, ok), ok)
        for bad in ["arn:aws:eks:us-east-1:999999999999:cluster/x", "-a", "a,", "a b", "*", "c" * 101, "a/b"]:
            self.assertIsNone(re.fullmatch(pattern, bad), bad)

    def test_the_scan_reserves_concurrency_only_when_asked(self):
        # A new account (Lambda concurrency quota 10) cannot reserve any: the default reserves none.
        self.assertEqual(self.tpl["Parameters"]["ScanReservedConcurrency"]["Default"], "none")
        fn = self.tpl["Resources"]["ScanOfferingsFunction"]["Properties"]
        cond, reserved, otherwise = fn["ReservedConcurrentExecutions"]["Fn::If"]
        conds = self.tpl["Conditions"]
        self.assertFalse(evaluate(conds[cond], {"ScanReservedConcurrency": "none"}))
        self.assertTrue(evaluate(conds[cond], {"ScanReservedConcurrency": "1"}))
        self.assertEqual((reserved, otherwise), (1, {"Ref": "AWS::NoValue"}))

    def test_by_default_only_the_functions_put_events_on_capblocks_bus(self):
        (_, bus), = self.of_type("AWS::Events::EventBus").items()
        self.assertEqual(self.tpl["Parameters"]["EventBusName"]["Default"], "")
        own = {"EventBusName": ""}
        name = resolve(bus["Properties"]["Name"], own)
        arn = f"arn:aws:events:us-east-1:111122223333:event-bus/{name}"
        conds = self.tpl["Conditions"]
        self.assertEqual(evaluate(conds[bus["Condition"]], own), True, "the default makes the bus")
        fns = self.of_type("AWS::Serverless::Function")
        for fid, f in fns.items():
            env = f["Properties"]["Environment"]["Variables"]["CAPBLOCK_EVENT_BUS"]
            (cond, then, _), = env.values()
            self.assertEqual((cond, resolve(then, own)), (bus["Condition"], name), fid)
        putters = set()
        for rid, s in self.statements(when=own):
            if "events:PutEvents" in as_list(s.get("Action")):
                putters.add(rid)
                (cond, then, _), = s["Resource"].values()
                self.assertEqual(resolve(then, own), arn, rid)
        # The bus's policy: the functions' roles put, everyone else of the account is denied.
        stmts = bus["Properties"]["Policy"]["Statement"]
        allow = [s for s in stmts if s["Effect"] == "Allow"]
        deny = [s for s in stmts if s["Effect"] == "Deny"]
        self.assertEqual({ref(r) for s in allow for r in as_list(s["Principal"]["AWS"])}, putters)
        self.assertEqual(len(deny), 1)
        self.assertEqual(deny[0]["Principal"], {"AWS": "*"})
        self.assertEqual(deny[0]["Action"], "events:PutEvents")
        self.assertEqual(resolve(deny[0]["Resource"], own), arn)
        exempt = {ref(r) for r in as_list(deny[0]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"])}
        self.assertEqual(exempt, putters)


# What the capacity stack may do outside its account (docs/organization.md), exactly. Every
# function flushes the outbox, so each may put a shared block's events on its consumers' buses.
ORGANIZATION_ACTIONS = {
    "TrackBlocksRole": {
        "ram:CreateResourceShare", "ram:TagResource", "ram:GetResourceShares",
        "ram:GetResourceShareAssociations", "ram:DeleteResourceShare",
        "sts:AssumeRole", "events:PutEvents",
    },
    # The watch over member accounts: their read-only watch role, nothing else.
    "ScanOfferingsRole": {"sts:AssumeRole", "events:PutEvents"},
    "OnCapacityEventRole": {"events:PutEvents"},
}
# The member stack's role each function assumes in member accounts (member.yaml).
MEMBER_ROLES = {"TrackBlocksRole": "capblock-handoff-", "ScanOfferingsRole": "capblock-watch-"}
ORG = "o-a1b2c3d4e5"


def defaults(tpl: dict, **overrides: str) -> dict[str, str]:
    """The template's parameters at their defaults, with `overrides`."""
    params = {k: str(v.get("Default", "")) for k, v in tpl["Parameters"].items()}
    params.update(overrides)
    return params


def holds(tpl: dict, condition: str, **overrides: str) -> bool:
    """Whether one of the template's Conditions holds for these parameters."""
    return evaluate(tpl["Conditions"][condition], defaults(tpl, **overrides), tpl["Conditions"])


class Organization(Template):
    """One buyer for an Organization: the parameters, and what the roles may do outside this
    account, only with OrganizationId and only inside it."""

    def policies_of(self, role: str) -> dict[str, dict]:
        return {pid: p for pid, p in self.of_type("AWS::IAM::Policy").items()
                if any(ref(r) == role for r in p["Properties"]["Roles"])}

    def test_the_parameters_share_nothing_by_default(self):
        params = self.tpl["Parameters"]
        for name in ("TeamBudgets", "OrganizationId", "WatchAccounts"):
            self.assertEqual(params[name]["Type"], "String", name)
            self.assertEqual(params[name]["Default"], "", name)
        cases = {
            "TeamBudgets": (["", "ml-research=20000", "ml-research=20000,vision=5000.50", "a_1=1"],
                            ["ml-research", "ml-research=0", "ml-research=-1", "ML=5", "a=01", "a=1.234",
                             "a=1,", "a=1,,b=2", "a=1 ,b=2", "a" * 65 + "=1"]),
            "OrganizationId": (["", "o-a1b2c3d4e5"], ["o-", "a1b2c3d4e5", "o-A1B2C3D4E5", "r-a1b2"]),
            # Up to 8 account ids (core/src/domain/ids.rs's parse_watch_accounts takes no more).
            "WatchAccounts": (["", "222222222222", "222222222222,333333333333",
                               ",".join(f"{n:012}" for n in range(1, 9))],
                              ["22222222222", "2222222222222", "222222222222,", ",222222222222",
                               "222222222222,,333333333333", "222222222222 ,333333333333",
                               "arn:aws:iam::222222222222:root", "o-a1b2c3d4e5",
                               ",".join(f"{n:012}" for n in range(1, 10))]),
        }
        for name, (good, bad) in cases.items():
            pattern = params[name]["AllowedPattern"]
            for v in good:
                self.assertIsNotNone(re.fullmatch(pattern, v), f"{name}={v!r}")
            for v in bad:
                self.assertIsNone(re.fullmatch(pattern, v), f"{name}={v!r}")

    def test_an_organization_and_team_budgets_need_nothing_else(self):
        self.assertEqual(failed_assertions(self.tpl, {"OrganizationId": ORG}), [])
        self.assertEqual(failed_assertions(self.tpl, {"OrganizationId": ORG, "TeamBudgets": "ml-research=20000"}), [])

    def test_watch_accounts_need_an_organization(self):
        # The watch roles are assumed only inside the Organization: without one, CloudFormation
        # refuses the deploy with a message that says what to set.
        failed = failed_assertions(self.tpl, {"WatchAccounts": "222222222222"})
        self.assertEqual(len(failed), 1, failed)
        self.assertIn("WatchAccounts needs OrganizationId", failed[0])
        self.assertEqual(failed_assertions(self.tpl, {"WatchAccounts": "222222222222", "OrganizationId": ORG}), [])
        self.assertEqual(failed_assertions(self.tpl, {"WatchAccounts": "", "OrganizationId": ""}), [])
        # Shown beside OrganizationId in the console.
        groups = self.tpl["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
        (group,) = [g["Parameters"] for g in groups if "OrganizationId" in g["Parameters"]]
        self.assertIn("WatchAccounts", group)

    def test_only_these_roles_act_outside_this_account_and_only_with_an_organization(self):
        params = defaults(self.tpl)
        for rid in self.of_type("AWS::IAM::Role"):
            # No role's own policies share, assume a role or name another account's bus.
            for p in self.res[rid]["Properties"].get("Policies", []):
                for s in as_list(p["PolicyDocument"]["Statement"]):
                    acts = set(as_list(s.get("Action")))
                    self.assertFalse({a for a in acts if a.startswith(("ram:", "sts:"))}, f"{rid} {s.get('Sid')}")
                    self.assertNotIn("aws:ResourceOrgID", str(s.get("Condition")), f"{rid} {s.get('Sid')}")
                    if "events:PutEvents" in acts:
                        # Either bus (the stack's own, or EventBusName): this account's.
                        branches = s["Resource"]["Fn::If"][1:] if "Fn::If" in s["Resource"] else [s["Resource"]]
                        for arn in (a for b in branches for a in as_list(resolve(b, params))):
                            self.assertEqual(arn.split(":")[4], PSEUDO["AWS::AccountId"], f"{rid} {s.get('Sid')}")
            policies = [(pid, p) for pid, p in self.policies_of(rid).items()
                        if any(a.startswith(("ram:", "sts:", "events:")) or "aws:ResourceOrgID" in str(s.get("Condition"))
                               for s in as_list(p["Properties"]["PolicyDocument"]["Statement"])
                               for a in as_list(s.get("Action")))]
            if rid not in ORGANIZATION_ACTIONS:
                self.assertEqual(policies, [], rid)
                continue
            acts = set()
            for pid, p in policies:
                stmts = as_list(p["Properties"]["PolicyDocument"]["Statement"])
                self.assertTrue(all(s["Effect"] == "Allow" for s in stmts), pid)
                acts |= {a for s in stmts for a in as_list(s["Action"])}
                # Each policy exists only with an organization.
                self.assertFalse(holds(self.tpl, p["Condition"]), f"{pid}: the defaults grant nothing")
                self.assertTrue(holds(self.tpl, p["Condition"], OrganizationId=ORG), pid)
            self.assertEqual(acts, ORGANIZATION_ACTIONS[rid], rid)

    def statements_of(self, rid: str) -> list[dict]:
        """The statements of the role's policies that exist only with an organization."""
        policies = [p for p in self.policies_of(rid).values() if p.get("Condition") == "HasOrganization"]
        self.assertTrue(policies, rid)
        return [s for p in policies for s in as_list(p["Properties"]["PolicyDocument"]["Statement"])]

    def test_other_accounts_only_inside_the_organization(self):
        params = defaults(self.tpl, OrganizationId=ORG)
        for rid in ORGANIZATION_ACTIONS:
            for s in self.statements_of(rid):
                arns = [resolve(r, params) for r in as_list(s["Resource"])]
                others = [a for a in arns if a != "*" and a.split(":")[4] != PSEUDO["AWS::AccountId"]]
                if not others:
                    continue
                # Any account: only inside the Organization.
                self.assertEqual([a.split(":")[4] for a in others], ["*"], f"{rid} {s['Sid']}")
                org = (s.get("Condition") or {}).get("StringEquals", {}).get("aws:ResourceOrgID")
                self.assertEqual(org, {"Ref": "OrganizationId"}, f"{rid} {s['Sid']}: not only inside the Organization")

    def test_the_role_assumed_is_the_member_stacks_for_this_stack(self):
        params = defaults(self.tpl, OrganizationId=ORG)
        for rid, prefix in MEMBER_ROLES.items():
            role = f"{prefix}capblock"
            (s,) = [s for s in self.statements_of(rid) if "sts:AssumeRole" in as_list(s["Action"])]
            self.assertEqual(as_list(s["Action"]), ["sts:AssumeRole"], rid)
            (pattern,) = as_list(resolve(s["Resource"], params))
            self.assertTrue(arn_matches(pattern, f"arn:aws:iam::123456789012:role/{role}"), rid)
            self.assertFalse(arn_matches(pattern, f"arn:aws:iam::123456789012:role/{role}-x"), rid)
            self.assertFalse(arn_matches(pattern, "arn:aws:iam::123456789012:role/Admin"), rid)
            # ... and not the other function's member role.
            for other in MEMBER_ROLES.values():
                if other != prefix:
                    self.assertFalse(arn_matches(pattern, f"arn:aws:iam::123456789012:role/{other}capblock"), rid)

    def test_the_watch_policy_is_the_scans_and_only_with_an_organization(self):
        # scan-offerings' own policy has no sts: (test_only_these_roles_...); its watch policy
        # is attached to it alone, exists only with OrganizationId, and buys nothing.
        (pid,) = [pid for pid, p in self.policies_of("ScanOfferingsRole").items() if "Condition" in p
                  and any("sts:AssumeRole" in as_list(s["Action"]) for s in as_list(p["Properties"]["PolicyDocument"]["Statement"]))]
        p = self.res[pid]
        self.assertEqual([ref(r) for r in p["Properties"]["Roles"]], ["ScanOfferingsRole"])
        self.assertEqual(p["Condition"], "HasOrganization")
        self.assertFalse(holds(self.tpl, "HasOrganization", WatchAccounts="222222222222"))
        self.assertTrue(holds(self.tpl, "HasOrganization", OrganizationId=ORG))
        (s,) = as_list(p["Properties"]["PolicyDocument"]["Statement"])
        self.assertEqual((s["Effect"], as_list(s["Action"])), ("Allow", ["sts:AssumeRole"]))
        self.assertEqual(s["Condition"], {"StringEquals": {"aws:ResourceOrgID": {"Ref": "OrganizationId"}}})
        self.assertFalse(set(as_list(s["Action"])) & PURCHASE_ACTIONS)

    def test_a_shared_blocks_events_on_member_default_buses_only_with_an_organization(self):
        # Each function flushes the outbox, so each may put a consumer's copy of an event
        # (shared/src/aws/eventbridge.rs, member_bus_arn): one policy for the three roles,
        # only with OrganizationId, only PutEvents, only on the default bus of an account of the
        # Organization in this region (member.yaml's bus policy admits the roles there).
        putters = {pid: p for pid, p in self.of_type("AWS::IAM::Policy").items()
                   if any("events:PutEvents" in as_list(s["Action"]) for s in as_list(p["Properties"]["PolicyDocument"]["Statement"]))}
        (p,) = putters.values()
        self.assertEqual(p["Condition"], "HasOrganization")
        roles = {ref(f["Properties"]["Role"]) for f in self.of_type("AWS::Serverless::Function").values()}
        self.assertEqual(len(roles), 3)
        self.assertEqual({ref(r) for r in p["Properties"]["Roles"]}, roles)
        (s,) = as_list(p["Properties"]["PolicyDocument"]["Statement"])
        self.assertEqual((s["Effect"], as_list(s["Action"])), ("Allow", ["events:PutEvents"]))
        self.assertNotIn("NotResource", s)
        self.assertEqual(s["Condition"], {"StringEquals": {"aws:ResourceOrgID": {"Ref": "OrganizationId"}}})
        params = defaults(self.tpl, OrganizationId=ORG)
        (pattern,) = as_list(resolve(s["Resource"], params))
        for account in ("222222222222", "333333333333"):
            self.assertTrue(arn_matches(pattern, f"arn:aws:events:us-east-1:{account}:event-bus/default"), account)
        for other in ("arn:aws:events:us-west-2:222222222222:event-bus/default",  # another region
                      "arn:aws:events:us-east-1:222222222222:event-bus/capblock-events",  # another bus
                      "arn:aws:events:us-east-1:222222222222:rule/default",
                      "arn:aws-cn:events:us-east-1:222222222222:event-bus/default"):
            self.assertFalse(arn_matches(pattern, other), other)
        # The code's bus ARN: arn:<partition>:events:<region>:<account>:event-bus/default.
        code = (REPO / "shared/src/aws/eventbridge.rs").read_text(encoding="utf-8")
        self.assertIn('"arn:{partition}:events:{}:{account}:event-bus/default"', code)

    def test_the_functions_get_the_team_budgets_and_only_the_scan_an_account_list(self):
        # Role names need no setting: each function derives them from CAPBLOCK_STACK; the member
        # accounts a block reaches come from rules' share_with. The scan alone gets an account
        # list: the members whose watch role it asks through (WatchAccounts). The two functions
        # that store the stack's settings (budgets included) read the team budgets;
        # on-capacity-event spends nothing and stores no settings.
        for fid, f in self.of_type("AWS::Serverless::Function").items():
            env = f["Properties"]["Environment"]["Variables"]
            if fid == "OnCapacityEventFunction":
                self.assertNotIn("CAPBLOCK_TEAM_BUDGETS", env)
                self.assertNotIn("CAPBLOCK_TEAM_APPROVALS", env)
            else:
                self.assertEqual(env["CAPBLOCK_TEAM_BUDGETS"], {"Ref": "TeamBudgets"}, fid)
                # The scan buys by people's requests' approvals; the tracker's team page shows
                # them judged the same way.
                self.assertEqual(env.get("CAPBLOCK_TEAM_APPROVALS"), {"Ref": "TeamApprovals"}, fid)
            self.assertEqual(env["CAPBLOCK_STACK"], {"Ref": "AWS::StackName"}, fid)
            accounts = {k for k in env if any(w in k for w in ("ORGANIZATION", "ROLE_PREFIX", "MEMBER", "ACCOUNTS"))}
            if fid == "ScanOfferingsFunction":
                self.assertEqual(accounts, {"CAPBLOCK_WATCH_ACCOUNTS"}, fid)
                self.assertEqual(env["CAPBLOCK_WATCH_ACCOUNTS"], {"Ref": "WatchAccounts"}, fid)
            else:
                self.assertFalse(accounts, fid)

    def test_shares_are_this_stacks_blocks_inside_the_organization(self):
        by_action = {a: s for s in self.statements_of("TrackBlocksRole") for a in as_list(s["Action"])}
        create = by_action["ram:CreateResourceShare"]
        self.assertEqual(as_list(create["Action"]), ["ram:CreateResourceShare"])
        cond = create["Condition"]
        self.assertEqual(cond["StringEquals"]["aws:RequestTag/capblock:stack"], {"Ref": "AWS::StackName"})
        self.assertEqual(cond["StringEquals"]["ram:RequestedResourceType"], "ec2:CapacityReservation")
        self.assertEqual(cond["Bool"]["ram:RequestedAllowsExternalPrincipals"], "false")
        (pattern,) = as_list(resolve(cond["ArnLike"]["ram:ResourceArn"], {}))
        self.assertTrue(arn_matches(pattern, "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-0a1b2c3d4e5f60718"))
        self.assertFalse(arn_matches(pattern, "arn:aws:ec2:us-east-1:999999999999:capacity-reservation/cr-0a1b2c3d4e5f60718"))
        self.assertFalse(arn_matches(pattern, "arn:aws:ec2:us-east-1:111122223333:subnet/subnet-0a1b2c3d"))
        # Tagging and deleting: only this account's shares, tagged for this stack.
        tag, delete = by_action["ram:TagResource"], by_action["ram:DeleteResourceShare"]
        self.assertEqual(tag["Condition"]["StringEquals"]["aws:RequestTag/capblock:stack"], {"Ref": "AWS::StackName"})
        self.assertEqual(delete["Condition"]["StringEquals"]["aws:ResourceTag/capblock:stack"], {"Ref": "AWS::StackName"})
        for s in (tag, delete):
            (arn,) = as_list(resolve(s["Resource"], {}))
            self.assertEqual(arn, "arn:aws:ram:*:111122223333:resource-share/*", s["Sid"])
        # '*' only where RAM has no resource-level permission.
        star = {a for s in self.statements_of("TrackBlocksRole") if crosscheck.is_star(s["Resource"])
                for a in as_list(s["Action"])}
        self.assertEqual(star, {"ram:CreateResourceShare", "ram:GetResourceShares", "ram:GetResourceShareAssociations"})


# --------------------------------------------------------------------------- the team page


def materialize(expr, tpl: dict, params: dict[str, str]):
    """`expr` with every Fn::If decided for these parameters and AWS::NoValue dropped, as
    CloudFormation would deploy it (other functions are left as written)."""
    if isinstance(expr, list):
        out = [materialize(e, tpl, params) for e in expr]
        return [e for e in out if e is not NO_VALUE]
    if isinstance(expr, dict):
        if list(expr) == ["Fn::If"]:
            cond, yes, no = expr["Fn::If"]
            return materialize(yes if evaluate(tpl["Conditions"][cond], params, tpl["Conditions"]) else no, tpl, params)
        if expr == {"Ref": "AWS::NoValue"}:
            return NO_VALUE
        return {k: materialize(v, tpl, params) for k, v in expr.items()}
    return expr


NO_VALUE = object()
PAGE_RESOURCES = ("PageBucket", "PageBucketPolicy", "TrackBlocksPagePolicy")


def page_bucket_problems(tpl: dict, params: dict[str, str]) -> list[str]:
    """What breaks the team page bucket's promises for these parameters: private (all four
    public access blocks, no ACLs), encrypted, unversioned; its policy lets only this account and,
    with OrganizationId, the Organization's principals read, and nobody use it without TLS."""
    res = tpl["Resources"]
    problems = []
    bucket = res["PageBucket"]["Properties"]
    block = bucket.get("PublicAccessBlockConfiguration", {})
    for flag in ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"):
        if block.get(flag) is not True:
            problems.append(f"public access block: {flag} is not true")
    rules = bucket.get("OwnershipControls", {}).get("Rules", [])
    if [r.get("ObjectOwnership") for r in rules] != ["BucketOwnerEnforced"]:
        problems.append("object ownership is not BucketOwnerEnforced (ACLs would apply)")
    sse = [r.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm")
           for r in bucket.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])]
    if not sse or sse[0] not in ("AES256", "aws:kms"):
        problems.append("no default encryption")
    if bucket.get("VersioningConfiguration", {}).get("Status") == "Enabled":
        problems.append("versioning is on")
    policy = res["PageBucketPolicy"]["Properties"]
    if ref(policy["Bucket"]) != "PageBucket":
        problems.append("the policy is not the page bucket's")
    statements = as_list(materialize(policy["PolicyDocument"]["Statement"], tpl, params))
    account = f"arn:aws:iam::{PSEUDO['AWS::AccountId']}:root"
    org = params.get("OrganizationId", "")
    org_reads = 0
    for st in statements:
        sid = st.get("Sid", "?")
        principal = st.get("Principal")
        if st["Effect"] == "Deny":
            continue
        if as_list(st.get("Action")) != ["s3:GetObject"]:
            problems.append(f"{sid}: allows {st.get('Action')}, not s3:GetObject alone")
        aws = principal.get("AWS") if isinstance(principal, dict) else principal
        if aws != "*" and resolve(aws, {}) == account:
            continue
        # Anyone else: only the Organization's principals, and only when there is one.
        cond = st.get("Condition", {})
        if aws != "*" or list(cond) != ["StringEquals"] or list(cond["StringEquals"]) != ["aws:PrincipalOrgID"]:
            problems.append(f"{sid}: lets {aws} read without aws:PrincipalOrgID")
            continue
        if not org:
            problems.append(f"{sid}: an Organization's principals read with no OrganizationId")
        elif cond["StringEquals"]["aws:PrincipalOrgID"] != {"Ref": "OrganizationId"}:
            problems.append(f"{sid}: aws:PrincipalOrgID is not the OrganizationId parameter")
        org_reads += 1
    if org and org_reads != 1:
        problems.append("OrganizationId is set but the Organization's principals cannot read the page")
    tls = [st for st in statements if st["Effect"] == "Deny" and st.get("Principal") == "*"
           and as_list(st.get("Action")) == ["s3:*"]
           and st.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
    # The bucket (its ARN) and every object in it (`<ARN>/*`), as written.
    covered = {"bucket" if r == {"Fn::GetAtt": ["PageBucket", "Arn"]} else r.get("Fn::Sub") if isinstance(r, dict) else r
               for st in tls for r in as_list(st["Resource"])}
    if covered != {"bucket", "${PageBucket.Arn}/*"}:
        problems.append(f"access without TLS is not denied on the bucket and its objects ({sorted(covered)})")
    return problems


class TeamPage(Template):
    """The team page's bucket, its policy with and without OrganizationId, and who may write."""

    def test_the_bucket_keeps_its_promises_with_and_without_an_organization(self):
        for org in ("", ORG):
            with self.subTest(OrganizationId=org):
                self.assertEqual(page_bucket_problems(self.tpl, defaults(self.tpl, OrganizationId=org)), [])

    def test_the_check_fails_on_a_public_or_unguarded_bucket(self):
        import copy

        def broken(change) -> list[str]:
            tpl = copy.deepcopy(self.tpl)
            change(tpl["Resources"])
            return page_bucket_problems(tpl, defaults(tpl, OrganizationId=ORG))

        statements = lambda r: r["PageBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
        self.assertIn("public access block: RestrictPublicBuckets is not true", broken(
            lambda r: r["PageBucket"]["Properties"]["PublicAccessBlockConfiguration"].update(RestrictPublicBuckets=False)))
        self.assertIn("OrganizationReads: lets * read without aws:PrincipalOrgID", broken(
            lambda r: statements(r)[2]["Fn::If"][1].pop("Condition")))
        self.assertTrue(any("TLS" in p for p in broken(lambda r: statements(r).pop(0))))
        self.assertIn("versioning is on", broken(
            lambda r: r["PageBucket"]["Properties"].update(VersioningConfiguration={"Status": "Enabled"})))
        # Without an Organization, a statement for one reads as a hole.
        tpl = copy.deepcopy(self.tpl)
        statements(tpl["Resources"])[2] = statements(tpl["Resources"])[2]["Fn::If"][1]
        self.assertIn("OrganizationReads: an Organization's principals read with no OrganizationId",
                      page_bucket_problems(tpl, defaults(tpl)))

    def test_teampage_disabled_creates_no_bucket_and_no_permission(self):
        self.assertEqual(self.tpl["Parameters"]["TeamPage"]["Default"], "Enabled")
        self.assertEqual(self.tpl["Parameters"]["TeamPage"]["AllowedValues"], ["Enabled", "Disabled"])
        self.assertTrue(holds(self.tpl, "PublishTeamPage"))
        self.assertFalse(holds(self.tpl, "PublishTeamPage", TeamPage="Disabled"))
        for rid in PAGE_RESOURCES:
            self.assertEqual(self.res[rid].get("Condition"), "PublishTeamPage", rid)
        self.assertEqual(self.tpl["Outputs"]["TeamPageUri"].get("Condition"), "PublishTeamPage")
        env = self.res["TrackBlocksFunction"]["Properties"]["Environment"]["Variables"]
        self.assertEqual(env["CAPBLOCK_PAGE_BUCKET"],
                         {"Fn::If": ["PublishTeamPage", {"Ref": "PageBucket"}, {"Ref": "AWS::NoValue"}]})

    def test_only_track_blocks_writes_and_only_the_page(self):
        policy = self.res["TrackBlocksPagePolicy"]["Properties"]
        self.assertEqual([ref(r) for r in policy["Roles"]], ["TrackBlocksRole"])
        (st,) = as_list(policy["PolicyDocument"]["Statement"])
        self.assertEqual((st["Effect"], as_list(st["Action"])), ("Allow", ["s3:PutObject"]))
        self.assertEqual(st["Resource"], {"Fn::Sub": "${PageBucket.Arn}/team.html"})
        for role in self.of_type("AWS::IAM::Role"):
            s3 = [a for s in self.role_statements(role) for a in as_list(s.get("Action"))
                  if isinstance(a, str) and a.startswith("s3:")]
            self.assertEqual(s3, ["s3:PutObject"] if role == "TrackBlocksRole" else [], role)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        TEMPLATE = Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=2)
