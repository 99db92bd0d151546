//! Segmented offerings end to end (EC2 since 2026-11-17: an offering of up to 10 blocks, each
//! its own zone, type and count, bought as one reservation per segment), under each reading of
//! the record the simulator plays: a one-type question never answered one (found by a question
//! naming every segment's type, `InstanceTypePreferences`: here segments across zones), or
//! answered one when it names the first segment's type (segments across zones and types, in a
//! region that does not take the preferences: one type per call).
//! Either way a rule buys the offering once, EC2 holds exactly what the rule allows, every
//! reservation is tracked, shared and announced once, and the fee is committed once.

use capblock_shared::app::purchase::Outcome;
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::Ledger;
use capblock_tests::{Published, Rig, RuleToml, ScenarioToml, T0, event_types};
use rust_decimal_macros::dec;
use serde_json::Value;

/// A member account of the simulated Organization.
const MEMBER: &str = "111111111111";

/// Segments across zones and types: 2 x p5 in us-east-1a and 1 x p5en in us-east-1b.
const ACROSS_TYPES: &str = "p5en.48xlarge";
/// Segments across zones: 2 x p5 in us-east-1a and 1 x p5 in us-east-1b.
const ACROSS_ZONES: &str = "p5.48xlarge";

/// One segmented offering a day from 12-03 11:30 in us-east-1 at 2.50 per GPU-hour: 2 x p5 in
/// us-east-1a (960.00) and 1 x `second` in us-east-1b (480.00), 1440.00 in all.
fn scenario(second: &str, behaviour: &[&str]) -> String {
    let mut s = ScenarioToml::new(11, T0).payment("succeed", Some(3)).raw(&format!(
        r#"[[market]]
region = "us-east-1"
instance_type = "p5.48xlarge"
durations_days = [1]
start_days = [2]
segments = [ {{ instance_type = "p5.48xlarge", az = "us-east-1a", count = 2 }},
             {{ instance_type = "{second}", az = "us-east-1b", count = 1 }} ]
price = [ {{ from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "2.50" }} ]"#
    ));
    for b in behaviour {
        s = s.behaviour(b);
    }
    s.build()
}

async fn rig(name: &str, second: &str, behaviour: &[&str]) -> Rig {
    let mut h = Rig::start(
        name,
        &scenario(second, behaviour),
        capblock_tests::quick_timeouts(),
        T0.parse().unwrap(),
        "capblock-test",
    )
    .await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    h
}

/// A live rule for 3 instances of `types`, one block held at a time, shared with `MEMBER`.
fn rule(types: &[&str]) -> Rule {
    RuleToml::p5("segments")
        .instance_types(types)
        .instance_counts(&[3])
        .max_blocks_held(1)
        .budget("10000")
        .extra(&format!("share_with = [\"{MEMBER}\"]"))
        .rule(T0.parse().unwrap())
}

/// The alerts of the blocks' share orders, by their event type.
fn share_alerts(alerts: &[Published]) -> Vec<String> {
    alerts
        .iter()
        .filter(|a| a.body["metadata"]["summary"].as_str().is_some_and(|s| s.contains("AWS RAM")))
        .map(|a| a.body["metadata"]["eventType"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn calls(h: &Rig, action: &str) -> u64 {
    h.sim.state().await["calls"][action].as_u64().unwrap_or(0)
}

/// What EC2 holds: (type, zone, instances, fee, the purchase's intent tag) per reservation.
async fn held(h: &Rig) -> Vec<(String, String, u64, String, String)> {
    let mut v: Vec<_> = h
        .sim
        .purchases()
        .await
        .iter()
        .map(|r: &Value| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (
                s("instance_type"),
                s("availability_zone"),
                r["instance_count"].as_u64().unwrap_or(0),
                s("upfront_fee"),
                r["tags"]["capblock:intent"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The whole life of the purchase of 2 x p5 and 1 x `second` under one reading, from the scan
/// to the shares.
async fn bought_once_tracked_and_shared(h: &Rig, second: &str) {
    let mut types = vec!["p5.48xlarge", second];
    types.dedup();
    let rule = rule(&types);
    h.put_rules(std::slice::from_ref(&rule)).await;
    let report = h.scan().await;
    let Some(Outcome::Bought { reservation_id: first, more, .. }) = report.outcomes[0].action.clone() else {
        panic!("{report:#?}")
    };
    assert_eq!(more.len(), 1, "one reservation per segment, both named by the answer: {report:#?}");
    let chosen = report.outcomes[0].chosen.clone().unwrap();
    assert_eq!(chosen.per_accelerator_hour.per_unit, dec!(2.5), "over all 24 GPUs of the offering");
    assert_eq!(calls(h, "PurchaseCapacityBlock").await, 1);
    // EC2 holds the two segments of one purchase, both with its tag, and nothing else.
    let ec2 = held(h).await;
    assert_eq!(ec2.len(), 2, "{ec2:#?}");
    let mut want = [("p5.48xlarge", "us-east-1a", 2, "960.00"), (second, "us-east-1b", 1, "480.00")];
    want.sort();
    let got: Vec<_> = ec2.iter().map(|r| (r.0.as_str(), r.1.as_str(), r.2, r.3.as_str())).collect();
    assert_eq!(got, want);
    assert!(!ec2[0].4.is_empty() && ec2[0].4 == ec2[1].4, "one intent: {ec2:#?}");
    assert_eq!(event_types(&h.aws.alerts().await), ["purchased"]);
    // The rule holds one block (max_blocks_held = 1): a second scan buys nothing.
    let again = h.scan().await;
    assert!(!matches!(again.outcomes[0].action, Some(Outcome::Bought { .. })), "{again:#?}");
    assert_eq!(calls(h, "PurchaseCapacityBlock").await, 1);

    // Paid after 3 hours: the other segment adopted as a part (no money moves), each block
    // with its own segment's fee, the purchase charged once.
    h.advance_hours(3).await;
    let report = h.track().await;
    assert_eq!(report.adopted, more, "{report:#?}");
    let (a, b) = (h.block(&first).await, h.block(&more[0]).await);
    assert_eq!((a.state, b.state), (BlockState::Scheduled, BlockState::Scheduled));
    let mut fees = vec![a.fee.unwrap().amount(), b.fee.unwrap().amount()];
    fees.sort();
    assert_eq!(fees, [dec!(480.00), dec!(960.00)]);
    let usage = h.store.usage(&BudgetOwner::Rule(rule.id.clone()), &Period::of(h.now())).await.unwrap().unwrap();
    assert_eq!((usage.spent.amount(), usage.purchases), (dec!(1440.00), 1), "the fee committed once");

    // Each reservation shared once (RAM shares one Capacity Block a share), and said once.
    for _ in 0..3 {
        h.advance_minutes(5).await;
        h.track().await;
    }
    let shares = h.sim.control("GET", "/_sim/ram/shares", "").await;
    let shares = shares.get("shares").and_then(Value::as_array).cloned().unwrap_or_default();
    assert_eq!(shares.len(), 2, "{shares:#?}");
    for id in [&first, &more[0]] {
        assert_eq!(shares.iter().filter(|s| s.to_string().contains(id.as_str())).count(), 1, "{id}: {shares:#?}");
    }
    let alerts = h.aws.alerts().await;
    assert_eq!(share_alerts(&alerts), ["action-done", "action-done"], "{:?}", event_types(&alerts));
    assert_eq!(calls(h, "ram:CreateResourceShare").await, 2);
    assert_eq!(calls(h, "PurchaseCapacityBlock").await, 1, "exactly one purchase reached EC2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segmented_offering_found_by_a_preference_question_is_bought_once() {
    let h = rig("segments-never", ACROSS_ZONES, &["segmented_for_one_type = \"never\""]).await;
    bought_once_tracked_and_shared(&h, ACROSS_ZONES).await;
    // The question named its type as a preference.
    let asked = h.sim.control("GET", "/_sim/describe/calls", "").await;
    let first = &asked["calls"][0];
    assert_eq!(first["instance_types"], serde_json::json!(["p5.48xlarge"]), "{asked:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segmented_offering_answered_to_a_one_type_question_is_bought_once() {
    let h = rig(
        "segments-first",
        ACROSS_TYPES,
        &["segmented_for_one_type = \"first_segment\"", "instance_type_preferences = \"unknown\""],
    )
    .await;
    bought_once_tracked_and_shared(&h, ACROSS_TYPES).await;
    let asked = h.sim.control("GET", "/_sim/describe/calls", "").await;
    let types: Vec<String> = asked["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["instance_type"].as_str().map(String::from))
        .collect();
    assert!(types.contains(&"p5en.48xlarge".to_string()), "then one type per call: {asked:#}");
}

/// A rule of p5 alone never buys the offering: one of its segments is a p5en, which EC2 would
/// hold for the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_outside_the_rules_types_keeps_the_offering_unbought() {
    // A one-type question that is answered the offering, so the judgement is capblock's.
    let h = rig(
        "segments-outside",
        ACROSS_TYPES,
        &["segmented_for_one_type = \"first_segment\"", "instance_type_preferences = \"unknown\""],
    )
    .await;
    h.put_rules(&[rule(&["p5.48xlarge"])]).await;
    let report = h.scan().await;
    assert!(!matches!(report.outcomes[0].action, Some(Outcome::Bought { .. })), "{report:#?}");
    assert!(held(&h).await.is_empty());
    assert!(!event_types(&h.aws.alerts().await).contains(&"purchased".to_string()));
    assert_eq!(
        report.outcomes[0].passed_over.as_deref(),
        Some("it is not what the rule asks for (region, type, count or duration)"),
        "{report:#?}"
    );
}
