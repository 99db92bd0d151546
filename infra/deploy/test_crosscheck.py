#!/usr/bin/env python3
"""Self-test of the crosscheck package on a small fake repository built in a temp dir.

Run: python3 infra/deploy/test_crosscheck.py   (needs PyYAML; stdlib unittest otherwise)

The fake repo has one adapter (`Store`, in shared/src/aws/store.rs) implementing two ports:
its ACTIONS table says Reader needs GetItem and Writer PutItem, and the adapter's code calls
get_item (in a helper method) and put_item (in a free helper fn). The function declares
AWS_PORTS = ["Reader"], so its role must allow GetItem and nothing else. No cargo registry is
given, so the built-in DynamoDB operation list is used.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from typing import ClassVar

sys.dont_write_bytecode = True  # leave no __pycache__ in infra/deploy
# the crosscheck package beside this file
sys.path.insert(0, str(Path(__file__).resolve().parent))
import crosscheck
from crosscheck import rust

ADAPTER = """
    use aws_sdk_dynamodb::Client;
    use crate::ports::{Reader, Writer};

    pub const ACTIONS: &[(&str, &[&str])] = &[
        ("Reader", &["dynamodb:GetItem"]),
        // a comment with "quotes" and ] must not matter
        ("Writer", &["dynamodb:PutItem"]),
    ];

    pub struct Store {
        client: Client,
        table: String,
    }

    impl Store {
        pub fn new(client: Client, table: String) -> Self {
            Store { client, table }
        }

        async fn fetch(&self, id: &str) -> Option<String> {
            let msg = "not a call: .delete_item( }"; // a string with a brace and an op name
            self.client.get_item().table_name(&self.table).send().await.ok().map(|_| msg.to_string())
        }
    }

    fn put_one(client: &Client, table: &str) {
        let _ = client.put_item().table_name(table);
    }

    #[async_trait]
    impl Reader for Store {
        async fn read(&self, id: &str) -> Option<String> {
            self.fetch(id).await
        }
    }

    #[async_trait]
    impl crate::ports::Writer for Store {
        async fn write(&self, id: &str) {
            put_one(&self.client, &self.table);
        }
    }

    #[cfg(test)]
    mod tests {
        fn t(c: &aws_sdk_dynamodb::Client) { let _ = c.delete_item(); }
    }
"""

FUNCTION = """
    use capblock_shared::app::lookup::Lookup;
    use capblock_shared::aws::store::Store;

    pub const AWS_PORTS: &[&str] = &["Reader"];

    #[tokio::main]
    async fn main() {
        let table = std::env::var("CAPBLOCK_TABLE").unwrap();
        let store = Store::new(todo!(), table);
        if Lookup { reader: &store }.run("x").await.is_none() {
            tracing::error!(event = "lookup_missing", tagged = true, id = %"x", "no (item) found");
        }
        tracing::debug!(event = "lookup_done", "quiet");
    }
"""

TEMPLATE = """
    AWSTemplateFormatVersion: '2010-09-09'
    Transform: AWS::Serverless-2016-10-31
    Resources:
      Table:
        Type: AWS::DynamoDB::Table
      LookupFunction:
        Type: AWS::Serverless::Function
        Metadata:
          BuildMethod: rust-cargolambda
          BuildProperties:
            Binary: lookup
        Properties:
          CodeUri: functions/lookup
          Handler: bootstrap
          Runtime: provided.al2023
          Environment:
            Variables:
              RUST_LOG: info
              CAPBLOCK_TABLE: !Ref Table
          LoggingConfig:
            LogFormat: Text
            LogGroup: !Ref LookupLogGroup
          Policies:
            - Statement:
                - Sid: Table
                  Effect: Allow
                  Action: [dynamodb:GetItem]
                  Resource: !GetAtt Table.Arn
      LookupLogGroup:
        Type: AWS::Logs::LogGroup
      LookupMissingFilter:
        Type: AWS::Logs::MetricFilter
        Properties:
          LogGroupName: !Ref LookupLogGroup
          FilterPattern: '{ ($.fields.event = "lookup_missing") && ($.fields.tagged IS TRUE) }'
          MetricTransformations:
            - MetricNamespace: !Sub lookup/${AWS::StackName}
              MetricName: LookupMissing
              MetricValue: '1'
      LookupMissingAlarm:
        Type: AWS::CloudWatch::Alarm
        Properties:
          Namespace: !Sub lookup/${AWS::StackName}
          MetricName: LookupMissing
"""


def dedent(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


class CrosscheckOnFakeRepo(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="crosscheck-test-")
        self.repo = Path(self._tmp.name)
        files = {
            "Cargo.toml": '[workspace]\nmembers = ["shared", "functions/lookup"]\n',
            "shared/Cargo.toml": '[package]\nname = "capblock-shared"\nversion = "0.1.0"\n',
            "shared/src/aws/mod.rs": "pub mod store;\n",
            "shared/src/aws/store.rs": ADAPTER,
            "functions/lookup/Cargo.toml": '[package]\nname = "lookup"\nversion = "0.1.0"\n',
            "functions/lookup/src/main.rs": FUNCTION,
            "template.yaml": TEMPLATE,
        }
        for name, text in files.items():
            self.write(name, dedent(text))

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name: str, text: str):
        p = self.repo / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")

    def edit(self, name: str, old: str, new: str):
        p = self.repo / name
        text = p.read_text(encoding="utf-8")
        self.assertIn(old, text, f"test setup: {old!r} not in {name}")
        p.write_text(text.replace(old, new), encoding="utf-8")

    def run_check(self, *extra: str) -> tuple[int, str]:
        out = io.StringIO()
        # no registry: the built-in DynamoDB operation list is used
        argv = ["--repo", str(self.repo), "--registry", str(self.repo / "no-registry"), *extra]
        with contextlib.redirect_stdout(out):
            rc = crosscheck.main(argv)
        return rc, out.getvalue()

    def assertSummary(self, output: str, failed: int):
        last = output.strip().splitlines()[-1]
        self.assertRegex(last, rf"^\d+ passed, {failed} failed$")

    def assertFails(self, *expected: str, failed: int | None = None) -> str:
        """The check exits 1 and prints each of `expected`; `failed` checks, if given."""
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        for text in expected:
            self.assertIn(text, out)
        if failed is not None:
            self.assertSummary(out, failed)
        return out

    # ------------------------------------------------------------------ tests

    def test_the_declared_ports_actions_are_required(self):
        rc, out = self.run_check("-v")
        self.assertEqual(rc, 0, out)
        self.assertSummary(out, 0)
        self.assertIn("ok   store: every SDK call declared (2 actions)", out)
        self.assertIn("iam: 1 actions needed, 1 allowed", out)
        self.assertIn("needs dynamodb:GetItem <- Reader", out)
        # Writer's PutItem is not declared by the function; the test-only DeleteItem and the op
        # name inside a string literal are no calls
        self.assertNotIn("needs dynamodb:PutItem", out)
        self.assertNotIn("DeleteItem", out)

    def test_a_moved_call_still_passes(self):
        # Layout does not matter: the call moves into a child module of the adapter.
        self.edit("shared/src/aws/store.rs", "fn put_one(client: &Client, table: &str) {\n"
                  "    let _ = client.put_item().table_name(table);\n}", "")
        self.write("shared/src/aws/store/helpers.rs",
                   "pub(super) fn put_one(client: &Client, table: &str) { let _ = client.put_item(); }\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)

    def test_missing_action_fails(self):
        self.edit("template.yaml", "Action: [dynamodb:GetItem]", "Action: [dynamodb:Query]")
        self.assertFails(
            "not allowed: dynamodb:GetItem (needed by port Reader)",
            "allowed but never needed: dynamodb:Query (statement Table)",
            failed=1,
        )

    def test_a_port_the_function_declares_needs_its_actions(self):
        self.edit("functions/lookup/src/main.rs", '&["Reader"]', '&["Reader", "Writer"]')
        self.assertFails("not allowed: dynamodb:PutItem (needed by port Writer)", failed=1)

    def test_one_edit_that_breaks_a_rule_fails(self):
        # (file, old, new) -> a line the report must print; each case on a fresh fake repo.
        cases = {
            "wildcard action": (
                ("template.yaml", "Action: [dynamodb:GetItem]", "Action: [dynamodb:Get*]"),
                "wildcard action dynamodb:Get*",
            ),
            "function without port table": (
                ("functions/lookup/src/main.rs", 'pub const AWS_PORTS: &[&str] = &["Reader"];', ""),
                "declares no `pub const AWS_PORTS`",
            ),
            "log filter field missing from the call": (
                ("template.yaml", "$.fields.tagged IS TRUE", "$.fields.taged IS TRUE"),
                "field 'taged' is not in the tracing call that logs 'lookup_missing'",
            ),
            "log filter without the fields key": (
                ("template.yaml", '$.fields.event = "lookup_missing"', '$.event = "lookup_missing"'),
                "the log lines carry their fields under $.fields.*",
            ),
        }
        for name, ((path, old, new), expected) in cases.items():
            with self.subTest(name):
                self.setUp()
                try:
                    self.edit(path, old, new)
                    self.assertFails(expected)
                finally:
                    self.tearDown()

    def test_extra_grant_fails(self):
        self.edit("template.yaml", "Action: [dynamodb:GetItem]", "Action: [dynamodb:GetItem, dynamodb:PutItem]")
        out = self.assertFails("allowed but never needed: dynamodb:PutItem (statement Table)", failed=1)
        self.assertNotIn("not allowed:", out)

    def test_undeclared_sdk_call_fails(self):
        self.edit("shared/src/aws/store.rs", "let _ = client.put_item().table_name(table);",
                  "let _ = client.put_item().table_name(table);\n    let _ = client.query();")
        self.assertFails("undeclared SDK call: query() needs dynamodb:Query", failed=1)

    def test_stale_declaration_fails(self):
        self.edit("shared/src/aws/store.rs", '("Writer", &["dynamodb:PutItem"])',
                  '("Writer", &["dynamodb:PutItem", "dynamodb:Scan"])')
        self.assertFails("declared but never called: dynamodb:Scan")

    def test_implied_action_must_be_declared(self):
        # A transaction with a Delete item needs DeleteItem besides TransactWriteItems.
        self.edit("shared/src/aws/store.rs", '("Writer", &["dynamodb:PutItem"])',
                  '("Writer", &["dynamodb:PutItem", "dynamodb:TransactWriteItems"])')
        self.edit("shared/src/aws/store.rs", "let _ = client.put_item().table_name(table);",
                  "let _ = client.put_item().table_name(table);\n"
                  "    let _ = client.transact_write_items().transact_items(Delete::builder().build());")
        self.assertFails("undeclared SDK call: implied by transact_write_items() needs dynamodb:DeleteItem")

    def test_an_assumed_role_provider_calls_sts_for_the_code(self):
        # aws-config's AssumeRoleProvider calls sts:AssumeRole itself: declared, it passes; not
        # declared, the call is named.
        self.edit("shared/src/aws/store.rs", "let _ = client.put_item().table_name(table);",
                  "let _ = client.put_item().table_name(table);\n"
                  "    let _ = aws_config::sts::AssumeRoleProvider::builder(\"arn\");")
        self.assertFails("undeclared SDK call: assume_role() needs sts:AssumeRole")

    def test_unknown_or_unbuilt_port_fails(self):
        self.edit("functions/lookup/src/main.rs", '&["Reader"]', '&["Reader", "Clock"]')
        self.assertFails("AWS_PORTS names Clock, which no adapter's ACTIONS table declares")
        self.edit("functions/lookup/src/main.rs", '&["Reader", "Clock"]', "&[]")
        self.assertFails("builds the store adapter (Store) but declares none of its ports in AWS_PORTS")

    def test_adapters_built_through_the_shared_edge_count(self):
        # The function builds its adapters through shared/src/lambda.rs's `Adapters::new`.
        self.write("shared/src/lambda.rs", "pub struct Adapters { pub store: crate::aws::store::Store }\n"
                   "impl Adapters { pub async fn new() -> Adapters { todo!() } }\n")
        self.edit("functions/lookup/src/main.rs", "use capblock_shared::aws::store::Store;\n", "")
        self.edit("functions/lookup/src/main.rs", "let store = Store::new(todo!(), table);",
                  "let store = capblock_shared::lambda::Adapters::new().await.store;")
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.edit("functions/lookup/src/main.rs", '&["Reader"]', "&[]")
        self.assertFails("builds the store adapter (Store) but declares none of its ports in AWS_PORTS")

    def test_adapters_built_by_the_edge_a_function_stands_behind_count(self):
        # The function names no adapter: `Edge::with_sdk` (shared/src/lambda.rs) builds them.
        self.write("shared/src/lambda.rs", "pub struct Adapters { pub store: crate::aws::store::Store }\n"
                   "pub struct Edge { pub aws: Adapters }\n"
                   "impl Edge { pub fn with_sdk() -> Edge { todo!() } }\n")
        self.edit("functions/lookup/src/main.rs", "use capblock_shared::aws::store::Store;\n", "")
        self.edit("functions/lookup/src/main.rs", "let store = Store::new(todo!(), table);",
                  "let store = capblock_shared::lambda::Edge::with_sdk().aws.store;")
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)

    def test_an_adapter_built_by_a_free_function_that_returns_a_ports_value_counts(self):
        # aws/accounts.rs's `member_markets(..) -> Vec<MemberMarket>` builds market clients under
        # member roles: a function that calls it through the module builds the adapter, though it
        # never names the adapter's struct. A same-named fn of another module is no such call.
        self.edit("shared/src/aws/mod.rs", "pub mod store;\n", "pub mod store;\npub mod accounts;\n")
        self.write("shared/src/aws/accounts.rs", dedent("""
            use crate::ports::{StoreError, Watcher};
            pub const ACTIONS: &[(&str, &[&str])] = &[("Watchers", &["sts:AssumeRole"])];
            pub struct Unused;
            pub async fn watchers(base: &SdkConfig, accounts: &[String]) -> Vec<Watcher> {
                let _ = aws_config::sts::AssumeRoleProvider::builder("arn");
                Vec::new()
            }
            pub fn helper(x: &str) -> Result<String, StoreError> { Ok(x.into()) }
        """))
        main = "functions/lookup/src/main.rs"
        self.edit(main, "let table =", "let watch = capblock_shared::aws::accounts::watchers(&sdk, &[]).await;\n    let table =")
        self.edit(main, '&["Reader"]', '&["Reader", "Watchers"]')
        self.edit("template.yaml", "              Resource: !GetAtt Table.Arn\n",
                  "              Resource: !GetAtt Table.Arn\n"
                  "            - Sid: Watch\n              Effect: Allow\n              Action: sts:AssumeRole\n"
                  "              Resource: arn:aws:iam::*:role/watch\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        # Without the call (only config's fn of the same name), the port is declared for nothing.
        self.edit(main, "capblock_shared::aws::accounts::watchers(&sdk, &[])", "capblock_shared::config::watchers()")
        self.assertFails("AWS_PORTS names Watchers but the function builds no accounts adapter "
                         "(Unused, accounts::watchers())")
        # ... and with the call but not the port, the adapter is built undeclared; a helper that
        # returns only a port's error builds nothing.
        self.edit(main, "capblock_shared::config::watchers()", "capblock_shared::aws::accounts::watchers(&sdk, &[])")
        self.edit(main, '&["Reader", "Watchers"]', '&["Reader"]')
        out = self.assertFails("builds the accounts adapter (Unused, accounts::watchers()) but declares none of its ports")
        self.assertNotIn("helper", out)

    def test_the_role_probe_may_try_only_actions_other_adapters_declare(self):
        # aws/probe.rs tries a function's own actions for preflight: declared elsewhere, it passes
        # without a table of its own; an action no adapter declares (no role needs it) fails.
        self.edit("shared/src/aws/mod.rs", "pub mod store;\n", "pub mod store;\npub mod probe;\n")
        self.write("shared/src/aws/probe.rs", "use aws_sdk_dynamodb::Client;\npub struct AwsProbe;\n"
                   "fn try_get(client: &Client) { let _ = client.get_item(); }\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.edit("shared/src/aws/probe.rs", "let _ = client.get_item();",
                  "let _ = client.get_item();\n    let _ = client.scan();")
        self.assertFails("tries dynamodb:Scan, which no adapter's ACTIONS declares (no role needs it)")

    def test_function_calling_the_sdk_itself_fails(self):
        self.edit("functions/lookup/src/main.rs", "let table =",
                  "let _ = aws_sdk_dynamodb::Client::new(&sdk).scan();\n    let table =")
        self.assertFails("calls scan() of aws-sdk-dynamodb itself")

    def test_env_var_mismatch_fails(self):
        self.edit("template.yaml", "CAPBLOCK_TABLE: !Ref Table", "CAPBLOCK_TABLE: !Ref Table\n          CAPBLOCK_EXTRA: x")
        self.edit("functions/lookup/src/main.rs", 'std::env::var("CAPBLOCK_TABLE")',
                  'std::env::var("CAPBLOCK_TABLE").and(std::env::var("CAPBLOCK_MODE"))')
        self.assertFails(
            "read by the code, missing in the template: CAPBLOCK_MODE",
            "set in the template, never read by the code: CAPBLOCK_EXTRA",
            "FAIL env: 2 variables",
            failed=1,
        )

    # ---------------------------------------------------------------- log alarms

    def test_log_filter_on_a_logged_event_passes(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.assertIn("ok   LookupMissingFilter: lookup_missing <- functions/lookup/src/main.rs:", out)

    def test_misspelled_event_in_a_log_filter_fails(self):
        self.edit("template.yaml", '$.fields.event = "lookup_missing"', '$.fields.event = "lookup_mising"')
        self.assertFails(
            "event 'lookup_mising' is logged nowhere in core/src, shared/src or functions/*/src of LookupFunction "
                      "(did you mean lookup_missing?)",
            failed=1,
        )

    def test_flattened_logs_move_the_fields_key(self):
        self.write("shared/src/lambda.rs", "pub fn init_logging() { fmt().json().flatten_event(true).init(); }\n")
        self.assertFails("$.fields.event, $.fields.tagged: the log lines carry their fields under $.*")

    def test_event_logged_below_rust_log_fails(self):
        self.edit("template.yaml", '$.fields.event = "lookup_missing"', '$.fields.event = "lookup_done"')
        self.edit("template.yaml", " && ($.fields.tagged IS TRUE)", "")
        self.assertFails("event 'lookup_done' is logged only below RUST_LOG=info of LookupFunction")

    def test_log_metric_without_alarm_fails(self):
        self.edit("template.yaml", "Namespace: !Sub lookup/${AWS::StackName}\n      MetricName: LookupMissing",
                  "Namespace: !Sub lookup/${AWS::StackName}\n      MetricName: Other")
        self.assertFails("metric LookupMissing has no AWS::CloudWatch::Alarm")


class DeclaredTables(unittest.TestCase):
    def test_actions_table(self):
        text = 'pub const ACTIONS: &[(&str, &[&str])] = &[\n    ("A", &["x:One", "x:Two"]),\n' \
               '    // ("Gone", &["x:Three"]),\n    (\n        "B",\n        &[\n            "y:Four",\n        ],\n    ),\n];'
        self.assertEqual(rust.declared_actions(text), {"A": ["x:One", "x:Two"], "B": ["y:Four"]})
        self.assertIsNone(rust.declared_actions("pub const OTHER: u8 = 1;"))

    def test_port_builders(self):
        code = rust.lex_rust(dedent("""
            use crate::ports::{ActionError, MemberMarket};
            pub async fn member_markets(base: &SdkConfig, accounts: &[String]) -> Vec<MemberMarket> { todo!() }
            pub fn role_in(region: Option<&str>) -> String { todo!() }
            pub fn fails(x: u8) -> Result<(), ActionError> { todo!() }
            fn private() -> Vec<MemberMarket> { todo!() }
            impl Thing { pub fn make(&self) -> MemberMarket { todo!() } }
            pub fn generic<T: Into<String>>(t: T) -> Option<MemberMarket> where T: Clone { todo!() }
        """)).code
        self.assertEqual(rust.port_builders(code), {"member_markets", "generic"})

    def test_ports_table(self):
        self.assertEqual(rust.declared_ports('pub const AWS_PORTS: &[&str] = &[\n    "A",\n    "B",\n];'), ["A", "B"])
        self.assertIsNone(rust.declared_ports("fn main() {}"))


class SdkActions(unittest.TestCase):
    def test_resource_groups_calls_are_named_by_their_iam_prefix_and_tags_on_create_imply_tag(self):
        # No cargo registry: the calls are read from `client.<op>(` (the fallback).
        from crosscheck.iam import Adapter, check_adapter
        from crosscheck.sdk import Sdk
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "resource_groups.rs"
            path.write_text(
                "use aws_sdk_resourcegroups::Client;\n"
                "fn make(client: &Client) { let _ = client.create_group().name(\"g\").tags(\"k\", \"v\"); }\n"
                "fn fill(client: &Client) { let _ = client.group_resources(); }\n",
                encoding="utf-8",
            )
            table = {"G": ["resource-groups:CreateGroup", "resource-groups:GroupResources"]}
            problems, _ = check_adapter(Adapter("resource_groups", [path], table), Sdk(None, {}))
            self.assertEqual(problems, [
                ("undeclared SDK call: implied by group_resources() needs ec2:CreateTags; "
                 "add it to ACTIONS under the port that calls it"),
                ("undeclared SDK call: implied by create_group() needs resource-groups:Tag; "
                 "add it to ACTIONS under the port that calls it"),
                ("undeclared SDK call: implied by group_resources() needs tag:TagResources; "
                 "add it to ACTIONS under the port that calls it"),
            ])
            table["G"] += ["resource-groups:Tag", "tag:TagResources", "ec2:CreateTags"]
            ok, _ = check_adapter(Adapter("resource_groups", [path], table), Sdk(None, {}))
            self.assertEqual(ok, [])

    def test_a_resource_share_created_with_tags_implies_tag_resource(self):
        from crosscheck.iam import Adapter, check_adapter
        from crosscheck.sdk import Sdk
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "ram.rs"
            path.write_text(
                "use aws_sdk_ram::Client;\n"
                "fn share(client: &Client, t: Tag) { let _ = client.create_resource_share().name(\"s\").tags(t); }\n"
                "fn end(client: &Client) { let _ = client.delete_resource_share(); }\n",
                encoding="utf-8",
            )
            table = {"Shares": ["ram:CreateResourceShare", "ram:DeleteResourceShare"]}
            problems, _ = check_adapter(Adapter("ram", [path], table), Sdk(None, {}))
            self.assertEqual(problems, [
                ("undeclared SDK call: implied by create_resource_share() needs ram:TagResource; "
                 "add it to ACTIONS under the port that calls it"),
            ])
            table["Shares"].append("ram:TagResource")
            ok, _ = check_adapter(Adapter("ram", [path], table), Sdk(None, {}))
            self.assertEqual(ok, [])


class KnownToIam(unittest.TestCase):
    """Actions IAM does not know, and EC2 actions on resource types they are not authorized on,
    allow nothing: each is named."""

    DATA: ClassVar[dict] = {
        "dynamodb": {"Actions": {"putitem": {"Resources": ["table"]}}},
        "ec2": {"Actions": {"purchasecapacityblock": {"Resources": ["capacity-reservation"]}}},
    }

    def test_an_unknown_action_and_a_resource_type_that_allows_nothing_fail(self):
        from crosscheck.iam import check_known
        allow = [
            {"Sid": "Table", "Action": ["dynamodb:PutItem", "dynamodb:TransactWriteItems"], "Resource": "*"},
            {"Sid": "Buy", "Action": "ec2:PurchaseCapacityBlock", "Resource": [
                {"Fn::Sub": "arn:${AWS::Partition}:ec2:*:${AWS::AccountId}:capacity-reservation/*"},
                {"Fn::Sub": "arn:${AWS::Partition}:ec2:*:${AWS::AccountId}:capacity-block/*"},
            ]},
        ]
        problems, _ = check_known(allow, self.DATA, {"dynamodb:PutItem"})
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("dynamodb:TransactWriteItems is not an IAM action", problems[0])
        self.assertIn("ec2:PurchaseCapacityBlock on capacity-block/* allows nothing", problems[1])
        ok, _ = check_known([allow[0] | {"Action": ["dynamodb:PutItem"]}], self.DATA, {"dynamodb:PutItem"})
        self.assertEqual(ok, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
