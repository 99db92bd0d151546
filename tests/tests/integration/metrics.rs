//! The metrics the functions write, from real runs: the `scan-offerings` and `track-blocks`
//! binaries behind the local Lambda Runtime API, against moto and the simulator, with their
//! stdout (what Lambda sends to the log group) captured. Every EMF line must pass the checker
//! written from the specification (`capblock_tests::emf`), and together the runs must emit
//! every metric of the catalogue, which is what the dashboard draws (see `emf`'s unit test).

use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

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
    let api = runtime::start().await;
    let mut child = runtime::spawn_capturing_stdout(&api, &binary(function), env);
    let mut outcomes = Vec::new();
    for p in payloads {
        let id = api.invoke(p.clone());
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

    let emitted: BTreeSet<&str> =
        scan.iter().chain(&track).flat_map(|d| d.as_object().unwrap().keys().map(String::as_str)).collect();
    let missing: Vec<&str> = metrics::ALL.iter().map(|m| m.name).filter(|n| !emitted.contains(n)).collect();
    assert!(missing.is_empty(), "catalogued but never emitted by a real run: {missing:?}");
}
