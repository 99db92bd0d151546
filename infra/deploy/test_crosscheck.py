#!/usr/bin/env python3
"""Self-test of crosscheck.py on a small fake repository built in a temp dir.

Run: python3 infra/deploy/test_crosscheck.py   (needs PyYAML; stdlib unittest otherwise)

The fake repo has two port traits (Reader, Writer) implemented by one adapter type (Store):
Reader reaches GetItem through an inherent helper method, Writer reaches PutItem through a free
helper fn. The function uses an app service bounded by Reader only, so it must need GetItem and
nothing else. No cargo registry is given, so the built-in DynamoDB operation list is used.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # leave no __pycache__ in infra/deploy
HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("crosscheck", HERE / "crosscheck.py")
crosscheck = importlib.util.module_from_spec(_spec)
sys.modules["crosscheck"] = crosscheck  # dataclasses look their module up there
_spec.loader.exec_module(crosscheck)

PORTS = """
    //! Ports: two narrow traits.
    #[async_trait]
    pub trait Reader: Send + Sync {
        async fn read(&self, id: &str) -> Option<String>;
    }

    #[async_trait]
    pub trait Writer: Send + Sync {
        /// Writes "it" (braces in a comment { must not matter).
        async fn write(&self, id: &str);
    }
"""

ADAPTER = """
    use aws_sdk_dynamodb::Client;
    use crate::ports::{Reader, Writer};

    pub struct Store {
        client: Client,
        table: String,
    }

    impl Store {
        pub fn new(client: Client, table: String) -> Self {
            Store { client, table }
        }

        async fn fetch(&self, id: &str) -> Option<String> {
            let msg = "not a call: .put_item( }"; // a string with a brace and an op name
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

    /// Local-dev helper: never deployed, so never required.
    pub async fn create_table(client: &Client) {
        let _ = client.create_table().send().await;
    }

    #[cfg(test)]
    mod tests {
        fn t(c: &aws_sdk_dynamodb::Client) { let _ = c.delete_item(); }
    }
"""

APP = """
    use super::other::plain;
    use crate::ports::Reader;

    pub struct Lookup<'a, R: ?Sized> {
        pub reader: &'a R,
    }

    impl<R> Lookup<'_, R>
    where
        R: Reader + ?Sized,
    {
        pub async fn run(&self, id: &str) -> Option<String> {
            plain();
            self.reader.read(id).await
        }
    }
"""

# Imported by app/lookup.rs for `plain` only: `Saver`'s Writer bound must not count.
APP_OTHER = """
    use crate::ports::Writer;

    pub fn plain() {}

    pub struct Saver<'a, W: ?Sized> {
        pub writer: &'a W,
    }

    impl<W: Writer + ?Sized> Saver<'_, W> {
        pub async fn save(&self) {
            self.writer.write("x").await
        }
    }
"""

FUNCTION = """
    use capblock_shared::app::lookup::Lookup;
    use capblock_shared::aws::store::Store;

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
            "shared/src/ports.rs": PORTS,
            "shared/src/aws/mod.rs": "pub mod store;\n",
            "shared/src/aws/store.rs": ADAPTER,
            "shared/src/app/mod.rs": "pub mod lookup;\npub mod other;\n",
            "shared/src/app/lookup.rs": APP,
            "shared/src/app/other.rs": APP_OTHER,
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

    # ------------------------------------------------------------------ tests

    def test_only_the_used_traits_actions_are_required(self):
        rc, out = self.run_check("-v")
        self.assertEqual(rc, 0, out)
        self.assertSummary(out, 0)
        self.assertIn("iam: 1 actions needed, 1 allowed", out)
        # reached through the inherent helper Store::fetch
        self.assertRegex(out, r"needs dynamodb:GetItem <- get_item\(\) in shared/src/aws/store.rs <Store as Reader>::read -> fetch")
        # Writer's PutItem, the local-dev CreateTable and the test-only DeleteItem are not needed,
        # nor the op name inside a string literal
        self.assertNotIn("needs dynamodb:PutItem", out)
        self.assertNotIn("CreateTable", out)
        self.assertNotIn("DeleteItem", out)
        # app/lookup.rs imports app/other.rs's plain fn only, not Saver's Writer bound
        self.assertIn("port traits: Reader\n", out)

    def test_writer_trait_named_by_the_function_adds_its_helpers_actions(self):
        # the function now also uses Writer directly: PutItem (through put_one) is required
        self.edit("functions/lookup/src/main.rs", "use capblock_shared::aws::store::Store;",
                  "use capblock_shared::aws::store::Store;\nuse capblock_shared::ports::Writer;")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, r"not allowed: dynamodb:PutItem \(called: put_item\(\) in shared/src/aws/store.rs "
                              r"<Store as Writer>::write -> put_one\)")
        self.assertSummary(out, 1)

    def test_app_service_bound_of_another_module_counts_when_used(self):
        # using Saver (bounded by Writer) makes PutItem needed
        self.edit("functions/lookup/src/main.rs", "use capblock_shared::app::lookup::Lookup;",
                  "use capblock_shared::app::lookup::Lookup;\nuse capblock_shared::app::other::Saver;")
        rc, out = self.run_check("-v")
        self.assertEqual(rc, 1, out)
        self.assertIn("needs trait Writer <- bound in app/other.rs Saver", out)
        self.assertIn("not allowed: dynamodb:PutItem", out)

    def test_missing_action_fails(self):
        self.edit("template.yaml", "Action: [dynamodb:GetItem]", "Action: [dynamodb:Query]")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("not allowed: dynamodb:GetItem", out)
        self.assertIn("allowed but never called: dynamodb:Query (statement Table)", out)
        self.assertSummary(out, 1)

    def test_allowed_but_unused_action_fails(self):
        self.edit("template.yaml", "Action: [dynamodb:GetItem]", "Action: [dynamodb:GetItem, dynamodb:PutItem]")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("allowed but never called: dynamodb:PutItem (statement Table)", out)
        self.assertNotIn("not allowed:", out)
        self.assertSummary(out, 1)

    def test_env_var_mismatch_fails(self):
        self.edit("template.yaml", "CAPBLOCK_TABLE: !Ref Table", "CAPBLOCK_TABLE: !Ref Table\n          CAPBLOCK_EXTRA: x")
        self.edit("functions/lookup/src/main.rs", 'std::env::var("CAPBLOCK_TABLE")',
                  'std::env::var("CAPBLOCK_TABLE").and(std::env::var("CAPBLOCK_MODE"))')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("read by the code, missing in the template: CAPBLOCK_MODE", out)
        self.assertIn("set in the template, never read by the code: CAPBLOCK_EXTRA", out)
        self.assertIn("FAIL env: 2 variables", out)
        self.assertSummary(out, 1)

    # ---------------------------------------------------------------- log alarms

    def test_log_filter_on_a_logged_event_passes(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.assertIn("ok   LookupMissingFilter: lookup_missing <- functions/lookup/src/main.rs:", out)

    def test_misspelled_event_in_a_log_filter_fails(self):
        self.edit("template.yaml", '$.fields.event = "lookup_missing"', '$.fields.event = "lookup_mising"')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("event 'lookup_mising' is logged nowhere in shared/src or functions/*/src of LookupFunction "
                      "(did you mean lookup_missing?)", out)
        self.assertSummary(out, 1)

    def test_log_filter_field_missing_from_the_call_fails(self):
        self.edit("template.yaml", "$.fields.tagged IS TRUE", "$.fields.taged IS TRUE")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("field 'taged' is not in the tracing call that logs 'lookup_missing'", out)

    def test_log_filter_without_the_fields_key_fails(self):
        self.edit("template.yaml", '$.fields.event = "lookup_missing"', '$.event = "lookup_missing"')
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("the log lines carry their fields under $.fields.*", out)

    def test_flattened_logs_move_the_fields_key(self):
        self.write("shared/src/lambda.rs", "pub fn init_logging() { fmt().json().flatten_event(true).init(); }\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("$.fields.event, $.fields.tagged: the log lines carry their fields under $.*", out)

    def test_event_logged_below_rust_log_fails(self):
        self.edit("template.yaml", '$.fields.event = "lookup_missing"', '$.fields.event = "lookup_done"')
        self.edit("template.yaml", " && ($.fields.tagged IS TRUE)", "")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("event 'lookup_done' is logged only below RUST_LOG=info of LookupFunction", out)

    def test_log_metric_without_alarm_fails(self):
        self.edit("template.yaml", "Namespace: !Sub lookup/${AWS::StackName}\n      MetricName: LookupMissing",
                  "Namespace: !Sub lookup/${AWS::StackName}\n      MetricName: Other")
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn("metric LookupMissing has no AWS::CloudWatch::Alarm", out)


class RustParsing(unittest.TestCase):
    def test_impl_headers(self):
        p = crosscheck.parse_impl_header
        self.assertEqual(p("impl Reader for Store"), ("Reader", "Store"))
        self.assertEqual(p("impl crate::ports::Writer for Store "), ("Writer", "Store"))
        self.assertEqual(p("impl<M, S> Buyer<'_, M, S> where M: A + B + ?Sized, S: C"), (None, "Buyer"))
        self.assertEqual(p("impl<T: Fn() -> u8> Foo<T> for Bar<T>"), ("Foo", "Bar"))

    def test_trait_bounds(self):
        code = "impl<M, S> X<M, S> where M: OfferingSource + Purchaser + ?Sized, S: Ledger {}" \
               " fn f<L: Ledger + ?Sized, O: crate::ports::Outbox>(c: &dyn Clock) {}"
        self.assertTrue({"OfferingSource", "Purchaser", "Ledger", "Outbox", "Clock"} <= crosscheck.trait_bounds(code))


if __name__ == "__main__":
    unittest.main(verbosity=2)
