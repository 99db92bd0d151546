//! The metrics the functions write, from real runs: the `scan-offerings` and `track-blocks`
//! binaries behind the local Lambda Runtime API, against moto and the simulator, with their
//! stdout (what Lambda sends to the log group) captured. Every EMF line must pass the checker
//! written from the specification (`capblock_tests::emf`), and together the runs must emit
//! every metric of the catalogue, which is what the dashboard draws (see `emf`'s unit test).

use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

use aws_sdk_dynamodb::types::AttributeValue;
use capblock_shared::domain::metrics;
use capblock_shared::ports::RuleStore;
use capblock_tests::runtime::{self, Outcome, binary};
use capblock_tests::{Aws, RuleToml, ScenarioToml, Sim, T0, binary_env, emf, t0};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

const STACK: &str = "capblock-metrics";

fn tick(t: DateTime<Utc>) -> Value {
    json!({"source": "capblock.schedule", "time": t.to_rfc3339()})
}

/// Runs `function` once per payload, then stops it; returns each invocation's outcome and the
/// EMF documents it printed, parsed.
async fn run(function: &str, env: &[(String, String)], payloads: &[Value]) -> (Vec<Outcome>, Vec<Value>) {
    let bodies: Vec<Vec<u8>> = payloads.iter().map(|p| p.to_string().into_bytes()).collect();
    run_bodies(function, env, &bodies).await
}

/// As `run`, with each invocation's body as sent (JSON or not).
async fn run_bodies(function: &str, env: &[(String, String)], bodies: &[Vec<u8>]) -> (Vec<Outcome>, Vec<Value>) {
    let api = runtime::start().await;
    let mut child = runtime::spawn_capturing_stdout(&api, &binary(function), env);
    let mut outcomes = Vec::new();
    for body in bodies {
        let id = api.invoke_bytes(body.clone());
        outcomes.push(api.wait_outcome(&id, StdDuration::from_secs(60)).await.expect("the function answered"));
    }
    child.kill().await.expect("stop the function");
    let mut out = String::new();
    child.stdout.take().expect("piped stdout").read_to_string(&mut out).await.expect("read stdout");
    let docs = emf::documents(&out)
        .into_iter()
        .map(|line| {
            emf::validate(line).unwrap_or_else(|e| panic!("{function}: invalid EMF ({e}): {line}"));
            serde_json::from_str(line).unwrap()
        })
        .collect();
    (outcomes, docs)
}

/// The value of metric `name` in the document whose dimensions are `dims`, if emitted.
fn value(docs: &[Value], name: &str, dims: &[(&str, &str)]) -> Option<f64> {
    docs.iter().filter(|d| d["Stack"] == STACK && dims.iter().all(|(k, v)| d[*k] == *v)).find_map(|d| d[name].as_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_runs_emit_every_catalogued_metric_as_valid_emf() {
    // 1 x p5.48xlarge for a day at 3.00 per GPU-hour (576.00), paid 6 hours after purchase,
    // and one u-trn2x64 UltraServer at 2.00 that a rule watches without buying (threshold 1.00).
    let scenario = ScenarioToml::new(61, T0)
        .payment("succeed", Some(6))
        .p5("us-east-1", &[2], "3.00")
        .trn2_ultra("us-east-1", &[1], &[2], "2.00")
        .build();
    let sim = Sim::start(&scenario).await;
    let aws = Aws::fresh("metrics").await;
    aws.store().put_rule(&RuleToml::p5("east").rule(t0()), None).await.unwrap();
    let ultra = RuleToml::p5("ultra")
        .instance_types(&[])
        .instance_counts(&[])
        .max_price("1.00")
        .extra("ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1]");
    aws.store().put_rule(&ultra.rule(t0()), None).await.unwrap();
    let group = "default".to_string();
    let mut env = binary_env(&sim, &aws, STACK);
    env.extend(
        [
            ("CAPBLOCK_MODE", "live"),
            ("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", "20000"),
            ("CAPBLOCK_SCHEDULE_GROUP", group.as_str()),
            ("CAPBLOCK_REMINDER_TARGET_ARN", "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event"),
            ("CAPBLOCK_REMINDER_ROLE_ARN", "arn:aws:iam::123456789012:role/capblock-reminder"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );

    // A scan that buys, then one with a payload that is not an object (a named error).
    let (outcomes, scan) = run("scan-offerings", &env, &[tick(t0()), json!([])]).await;
    assert!(matches!(outcomes[0], Outcome::Response(_)), "{:?}", outcomes[0]);
    assert!(matches!(outcomes[1], Outcome::Error(_)), "{:?}", outcomes[1]);
    assert_eq!(sim.purchases().await.len(), 1, "the scan bought the block");
    let east = [("Region", "us-east-1")];
    assert_eq!(
        value(&scan, "PricePerAcceleratorHour", &[("Region", "us-east-1"), ("InstanceType", "p5.48xlarge")]),
        Some(3.0)
    );
    assert_eq!(value(&scan, "MaxPricePerAcceleratorHour", &[("Rule", "east")]), Some(3.0));
    assert_eq!(
        value(
            &scan,
            "UltraServerPricePerAcceleratorHour",
            &[("Region", "us-east-1"), ("UltraServerType", "u-trn2x64")]
        ),
        Some(2.0)
    );
    assert_eq!(value(&scan, "QuestionsAnswered", &east), Some(2.0));
    assert!(value(&scan, "QuestionsAsked", &east).unwrap() >= 1.0);
    assert_eq!(value(&scan, "QuestionsThrottled", &east), Some(0.0));
    assert_eq!(value(&scan, "QuestionsCarriedOver", &east), Some(0.0));
    assert!(value(&scan, "DescribeBudgetUsed", &east).unwrap() > 0.0);
    assert_eq!(value(&scan, "Errors", &[("Function", "scan-offerings"), ("Kind", "capblock.BadInput")]), Some(1.0));

    // The tracker an hour later: the block waits for its payment.
    sim.advance_secs(3600).await;
    let now = t0() + chrono::Duration::hours(1);
    let (outcomes, track) = run("track-blocks", &env, &[tick(now)]).await;
    assert!(matches!(outcomes[0], Outcome::Response(_)), "{:?}", outcomes[0]);
    assert_eq!(value(&track, "Blocks", &[("State", "payment-pending")]), Some(1.0));
    assert_eq!(value(&track, "Blocks", &[("State", "active")]), Some(0.0));
    assert_eq!(value(&track, "BudgetCommitted", &[("Budget", "east")]), Some(576.0));
    assert_eq!(value(&track, "BudgetLimit", &[("Budget", "account")]), Some(20000.0));
    // A bought block counts as spent from the purchase (a failed payment gives it back).
    assert_eq!(value(&track, "BudgetSpent", &[("Budget", "east")]), Some(576.0));
    // Paid within 12 hours of the purchase (an hour ago): 11 hours left.
    let to_deadline = value(&track, "HoursToPaymentDeadline", &[]).unwrap();
    assert!((10.9..=11.0).contains(&to_deadline), "{to_deadline}");
    assert!(value(&track, "HoursToTermination", &[]).unwrap() > 24.0);

    // Active (12-03 11:30), and sampled an hour later: its one instance runs, nothing idle.
    let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    let mut now = now;
    let mut active = Vec::new();
    for step in ["2026-12-03T11:35:00Z", "2026-12-03T12:40:00Z"] {
        sim.advance_secs((at(step) - now).num_seconds()).await;
        now = at(step);
        let (outcomes, docs) = run("track-blocks", &env, &[tick(now)]).await;
        assert!(matches!(outcomes[0], Outcome::Response(_)), "{:?}", outcomes[0]);
        active = docs;
    }
    let reservation = sim.purchases().await[0]["reservation_id"].as_str().unwrap().to_string();
    let block = [("Reservation", reservation.as_str())];
    assert_eq!(value(&active, "IdleInstances", &block), Some(0.0));
    assert_eq!(value(&active, "IdleCost", &block), Some(0.0));
    assert_eq!(value(&active, "Utilization", &block), Some(100.0));
    assert_eq!(value(&active, "UnavailableInstances", &block), Some(0.0));

    let emitted: BTreeSet<&str> = scan
        .iter()
        .chain(&track)
        .chain(&active)
        .flat_map(|d| d.as_object().unwrap().keys().map(String::as_str))
        .collect();
    let missing: Vec<&str> = metrics::ALL.iter().map(|m| m.name).filter(|n| !emitted.contains(n)).collect();
    assert!(missing.is_empty(), "catalogued but never emitted by a real run: {missing:?}");
}

/// A body that is not JSON reaches capblock's own parse in every function (it used to fail
/// untyped inside the runtime, with no `Errors` line): `capblock.BadInput`, counted. And a
/// corrupt stored rule no longer stops the scan: the other rules run, and the skipped item is
/// counted as `capblock.CorruptItem`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_are_not_json_and_corrupt_items_are_counted_errors() {
    let sim = Sim::start(&ScenarioToml::new(62, T0).p5("us-east-1", &[2], "3.00").build()).await;
    let aws = Aws::fresh("badbodies").await;
    let store = aws.store();
    store.put_rule(&RuleToml::p5("east").rule(t0()), None).await.unwrap();
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("RULE#broken".into()))
        .item("sk", AttributeValue::S("RULE".into()))
        .item("gsi1pk", AttributeValue::S("RULES".into()))
        .item("gsi1sk", AttributeValue::S("broken".into()))
        .item("data", AttributeValue::S("{\"id\": \"broken\", \"regions\": 7".into()))
        .send()
        .await
        .unwrap();
    let mut env = binary_env(&sim, &aws, STACK);
    env.extend(
        [
            ("CAPBLOCK_WORKLOADS_TOPIC_ARN", aws.workloads_topic.as_str()),
            ("CAPBLOCK_SCHEDULE_GROUP", "default"),
            ("CAPBLOCK_REMINDER_TARGET_ARN", "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event"),
            ("CAPBLOCK_REMINDER_ROLE_ARN", "arn:aws:iam::123456789012:role/capblock-reminder"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let not_json = b"{\"source\": \"capblock.schedule\", \"time\": ".to_vec();
    for function in ["scan-offerings", "track-blocks", "on-capacity-event"] {
        let (outcomes, docs) = run_bodies(function, &env, std::slice::from_ref(&not_json)).await;
        let Outcome::Error(e) = &outcomes[0] else { panic!("{function}: {:?}", outcomes[0]) };
        assert_eq!(e["errorType"], "capblock.BadInput", "{function}: {e}");
        assert!(e["errorMessage"].as_str().unwrap().contains("the payload is not JSON"), "{function}: {e}");
        assert_eq!(value(&docs, "Errors", &[("Function", function), ("Kind", "capblock.BadInput")]), Some(1.0));
    }

    // A live scan: the broken rule is left out and counted, the good rule decided. One of its
    // held blocks does not decode, so its blocks cannot be counted against `max_blocks_held`:
    // it buys nothing (it waits for the repair), and the scan goes on.
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("BLOCK#cr-bad".into()))
        .item("sk", AttributeValue::S("BLOCK".into()))
        .item("gsi1pk", AttributeValue::S("BLOCK#OPEN".into()))
        .item("gsi1sk", AttributeValue::S("RULE#east#cr-bad".into()))
        .item("data", AttributeValue::S("{}".into()))
        .send()
        .await
        .unwrap();
    env.extend(
        [("CAPBLOCK_MODE", "live"), ("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", "20000")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let (outcomes, scan) = run("scan-offerings", &env, &[tick(t0())]).await;
    let Outcome::Response(report) = &outcomes[0] else { panic!("{:?}", outcomes[0]) };
    let text = report.to_string();
    assert!(text.contains("its held blocks cannot be counted") && text.contains("BLOCK#cr-bad/BLOCK"), "{report}");
    assert!(!text.contains("broken"), "{report}");
    assert!(sim.purchases().await.is_empty(), "nothing bought while the rule's blocks cannot be counted");
    assert_eq!(value(&scan, "Errors", &[("Function", "scan-offerings"), ("Kind", "capblock.CorruptItem")]), Some(1.0));
}
