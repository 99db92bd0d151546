//! Block health and use under each reading of DescribeCapacityBlockStatus's unavailable count
//! (the simulator's `[behaviour] unavailable_means`, infra/market-sim/README.md, "What
//! "unavailable" counts"): `failed`, the instances taken out, or `in_use`, those and every
//! running instance. Under each, a block whose workload runs every instance is healthy and fully
//! used, and failed instances are one health alert naming only them.
//!
//! A block shared with another account of the Organization has that account's instances
//! running beside the owner's, which the owner's DescribeInstances does not list: under each
//! reading they are work, not failed capacity (no health alert, no Health Changed event), and a
//! real failure beside them is still announced once.
//!
//! An instance that stops holds its place for minutes: under each reading of whether
//! GetCapacityReservationUsage counts it meanwhile (`stopping_in_usage`), it is never a failure.
//! Under `in_use` a rise in failures is announced once it has lasted the settle (15 minutes),
//! since instances still stopping look the same; under `failed` at once.
//!
//! An 8 x p5.48xlarge block for a day from 12-03 11:30, bought by a rule; the tracker every 5
//! minutes once it is active.

use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::usage::utilization_so_far;
use capblock_tests::{Rig, RuleToml, ScenarioToml, T0, detail_types, event_types};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::json;

fn scenario(reading: &str) -> String {
    ScenarioToml::new(7, T0)
        .payment("succeed", Some(3))
        .behaviour(&format!("unavailable_means = \"{reading}\""))
        .p5_counts("us-east-1", &[8], &[2], "3.00")
        .build()
}

/// A member account of the simulated Organization, which a shared block's rule shares it with.
const MEMBER: &str = "111111111111";

/// A rig under `reading` with the rule's block bought and active (12-03 11:35), nothing left
/// in the topics; the block's reservation id.
async fn active_block(name: &str, reading: &str) -> (Rig, String) {
    active_block_of(name, reading, "").await
}

/// [`active_block`] with `extra` lines in the rule (e.g. its `share_with`).
async fn active_block_of(name: &str, reading: &str, extra: &str) -> (Rig, String) {
    let mut h =
        Rig::start(name, &scenario(reading), capblock_tests::quick_timeouts(), T0.parse().unwrap(), "capblock-test")
            .await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    let id = h.buy(&RuleToml::p5("busy8").instance_counts(&[8]).budget("10000").extra(extra).rule(h.now())).await;
    track_every(&h, 7 * 60, "2026-12-03T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    let alerts = h.aws.alerts().await;
    assert!(!event_types(&alerts).contains(&"health".to_string()), "{reading}: nothing failed yet");
    h.aws.workload_notices().await;
    h.aws.events().await;
    (h, id)
}

/// Moves the clock to `at` in `step`-minute steps, tracking after each; the health changes
/// announced on the way.
async fn track_every(h: &Rig, step: i64, at: &str) -> Vec<String> {
    let at: DateTime<Utc> = at.parse().unwrap();
    let mut health = Vec::new();
    while h.now() < at {
        h.advance_minutes(step.min((at - h.now()).num_minutes())).await;
        let report = h.track().await;
        assert!(report.errors.is_empty() && report.failed_regions.is_empty(), "{report:#?}");
        health.extend(report.health);
    }
    health
}

async fn every_instance_at_work(reading: &str) {
    let (h, id) = active_block(&format!("work-{reading}"), reading).await;
    // Two hours of all 8 running, none failed.
    let health = track_every(&h, 5, "2026-12-03T13:35:00Z").await;
    assert!(health.is_empty(), "{reading}: {health:?}");
    assert!(h.aws.alerts().await.is_empty(), "{reading}: no health alert, nothing idle");
    assert!(h.aws.workload_notices().await.is_empty() && h.aws.events().await.is_empty(), "{reading}");
    let b = h.block(&id).await;
    assert!(b.health.as_ref().is_none_or(|x| x.unavailable == 0), "{reading}: {:?}", b.health);
    assert_eq!((b.usage.running, b.usage.idle), (8, 0), "{reading}");
    // 8 instances from 11:30 to 13:35: every paid minute used.
    assert_eq!(b.usage.used_instance_minutes, 8 * 125, "{reading}");
    assert_eq!(utilization_so_far(&b.span(), &b.usage), Some(Decimal::from(100)), "{reading}");
    let report = h.track().await;
    let used = report.holdings.in_use.iter().find(|u| u.reservation_id == id).expect("the block's use");
    assert_eq!((used.unavailable, used.idle, used.utilization_percent), (0, 0, Some(Decimal::from(100))));
}

async fn failed_instances_alerted(reading: &str) {
    let (h, id) = active_block(&format!("failed-{reading}"), reading).await;
    let set = |path: &'static str, mut body: serde_json::Value| {
        body["reservation_id"] = json!(id);
        let sim = &h.sim;
        async move { sim.control("POST", path, &body.to_string()).await }
    };
    // 2 of the 8 fail; the workload runs on the other 6.
    set("/_sim/blocks/health", json!({"unavailable": 2})).await;
    if reading == "in_use" {
        // 2 fewer at work and 2 more out of use: instances still stopping would look the same
        // (under `stopping_in_usage = "not_counted"`), so the rise first seen at 11:40 waits
        // until it has lasted the settle (15 minutes).
        assert!(track_every(&h, 5, "2026-12-03T11:50:00Z").await.is_empty(), "held while stopping could explain it");
        assert_eq!(health_news(&h).await, (0, 0));
        assert!(h.block(&id).await.health_watch.is_some());
    }
    let health = track_every(&h, 5, "2026-12-03T11:55:00Z").await;
    assert_eq!(health.len(), 1, "{reading}: {health:?}");
    assert_eq!(h.block(&id).await.health_watch, None, "{reading}");
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["health"], "{reading}");
    assert_eq!(alerts[0].body["content"]["title"], "Check this block: 2 of 8 instances unavailable", "{reading}");
    let work = h.aws.workload_notices().await;
    assert_eq!(work.len(), 1, "{reading}");
    assert_eq!(work[0].body["health"]["health"]["unavailable"], 2, "{reading}: {}", work[0].body);
    h.aws.events().await;
    // The next runs: the same 2 are no news; 6 run, none idle.
    assert!(track_every(&h, 5, "2026-12-03T12:05:00Z").await.is_empty(), "{reading}");
    let b = h.block(&id).await;
    assert_eq!((b.usage.running, b.usage.idle), (6, 0), "{reading}");
    // The workload shrinks to 3 of the 6: still the same 2 failed, 3 run and 3 are idle.
    set("/_sim/blocks/usage", json!({"running": 3})).await;
    assert!(track_every(&h, 5, "2026-12-03T12:15:00Z").await.is_empty(), "{reading}");
    let b = h.block(&id).await;
    assert_eq!((b.usage.running, b.usage.idle), (3, 3), "{reading}");
    assert_eq!(b.health.as_ref().map(|x| x.unavailable), Some(2), "{reading}");
    assert!(h.aws.alerts().await.is_empty(), "{reading}: idle for less than an hour, health unchanged");
    // Replaced and all 8 at work again: healthy again, once.
    set("/_sim/blocks/health", json!({"unavailable": 0})).await;
    set("/_sim/blocks/usage", json!({"clear": true})).await;
    assert_eq!(track_every(&h, 5, "2026-12-03T12:25:00Z").await.len(), 1, "{reading}");
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["health"], "{reading}");
    assert_eq!(alerts[0].body["content"]["title"], "Block healthy again", "{reading}");
    let b = h.block(&id).await;
    assert_eq!((b.usage.running, b.usage.idle), (8, 0), "{reading}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_at_work_is_healthy_and_used_when_unavailable_means_failed() {
    every_instance_at_work("failed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_at_work_is_healthy_and_used_when_unavailable_means_in_use() {
    every_instance_at_work("in_use").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_instances_are_one_health_alert_when_unavailable_means_failed() {
    failed_instances_alerted("failed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_instances_are_one_health_alert_when_unavailable_means_in_use() {
    failed_instances_alerted("in_use").await;
}

/// The health alerts among the alerts published since the last look, and the Health Changed
/// events on the stack's bus.
async fn health_news(h: &Rig) -> (usize, usize) {
    let alerts = event_types(&h.aws.alerts().await).iter().filter(|t| *t == "health").count();
    let events = detail_types(&h.aws.events().await).iter().filter(|t| *t == "Health Changed").count();
    (alerts, events)
}

async fn a_consumer_s_instances_are_work(reading: &str) {
    let (h, id) =
        active_block_of(&format!("consumer-{reading}"), reading, &format!("share_with = [\"{MEMBER}\"]")).await;
    let set = |mut body: serde_json::Value| {
        body["reservation_id"] = json!(id);
        let sim = &h.sim;
        async move { sim.control("POST", "/_sim/blocks/usage", &body.to_string()).await }
    };
    // The owner runs 3 (its other 5 take minutes to stop), the member 4 through the share: 7
    // at work, none of them failed, and the owner lists only its own 3.
    set(json!({"running": 3})).await;
    let v = set(json!({"account_id": MEMBER, "running": 4})).await;
    assert_eq!(v["stopping"], 5, "{reading}: {v}");
    let health = track_every(&h, 5, "2026-12-03T12:35:00Z").await;
    assert!(health.is_empty(), "{reading}: {health:?}");
    assert_eq!(health_news(&h).await, (0, 0), "{reading}: no health alert, no Health Changed event");
    assert!(h.aws.workload_notices().await.is_empty(), "{reading}");
    let b = h.block(&id).await;
    assert!(b.health.as_ref().is_none_or(|x| x.unavailable == 0), "{reading}: {:?}", b.health);
    assert_eq!((b.usage.running, b.usage.idle), (7, 1), "{reading}: the member's instances are used, not idle");
    // 1 of the 8 fails beside them (the owner's runs on 2): announced once, as 1 failed.
    set(json!({"running": 2})).await;
    h.sim.control("POST", "/_sim/blocks/health", &json!({"reservation_id": id, "unavailable": 1}).to_string()).await;
    let health = track_every(&h, 5, "2026-12-03T13:05:00Z").await;
    assert_eq!(health.len(), 1, "{reading}: {health:?}");
    let b = h.block(&id).await;
    assert_eq!(b.health.as_ref().map(|x| x.unavailable), Some(1), "{reading}: {:?}", b.health);
    assert_eq!(health_news(&h).await, (1, 1), "{reading}: one alert, one Health Changed event");
    let work = h.aws.workload_notices().await;
    assert_eq!(work.len(), 1, "{reading}");
    assert_eq!(work[0].body["health"]["health"]["unavailable"], 1, "{reading}: {}", work[0].body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_s_instances_in_a_shared_block_are_work_when_unavailable_means_failed() {
    a_consumer_s_instances_are_work("failed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_s_instances_in_a_shared_block_are_work_when_unavailable_means_in_use() {
    a_consumer_s_instances_are_work("in_use").await;
}

/// The owner stops 5 of its 8 instances; they take minutes to stop (the simulator's
/// `stopping_minutes`, here 12 so that two tracker runs fall inside), holding their places
/// meanwhile: counted unavailable under `in_use`, yet no longer running, and counted in the
/// owner's use or in no one's (`stopping_in_usage`, `usage`). Never a failure; a real one after
/// them is announced once, when it has lasted the settle.
async fn stopping_instances_are_not_failures(usage: &str) {
    let (h, id) = active_block(&format!("stopping-{usage}"), "in_use").await;
    h.sim.behaviour(&json!({"stopping_minutes": 12, "stopping_in_usage": usage}).to_string()).await;
    let v = h.sim.control("POST", "/_sim/blocks/usage", &json!({"reservation_id": id, "running": 3}).to_string()).await;
    assert_eq!((&v["running"], &v["stopping"], &v["available"]), (&json!(3), &json!(5), &json!(0)), "{v}");
    let owner_uses = if usage == "counted" { 8 } else { 3 };
    assert_eq!(v["accounts"].as_object().unwrap().values().next(), Some(&json!(owner_uses)), "{usage}: {v}");
    let health = track_every(&h, 5, "2026-12-03T12:00:00Z").await;
    assert!(health.is_empty(), "{usage}: {health:?}");
    assert_eq!(health_news(&h).await, (0, 0), "{usage}: no health alert, no Health Changed event");
    let b = h.block(&id).await;
    assert!(b.health.as_ref().is_none_or(|x| x.unavailable == 0), "{usage}: {:?}", b.health);
    assert_eq!(b.health_watch, None, "{usage}: the places came back, nothing is waited for");
    assert_eq!((b.usage.running, b.usage.idle), (3, 5), "{usage}: stopped: idle once their places are free");
    // 1 idle place fails at 12:00: announced once, when it has lasted the settle.
    h.sim.control("POST", "/_sim/blocks/health", &json!({"reservation_id": id, "unavailable": 1}).to_string()).await;
    assert!(track_every(&h, 5, "2026-12-03T12:10:00Z").await.is_empty(), "{usage}");
    assert_eq!(track_every(&h, 5, "2026-12-03T12:30:00Z").await.len(), 1, "{usage}");
    assert_eq!(health_news(&h).await, (1, 1), "{usage}: one alert, one Health Changed event");
    assert_eq!(h.block(&id).await.health.map(|x| x.unavailable), Some(1), "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_instances_are_not_failures_when_usage_counts_them() {
    stopping_instances_are_not_failures("counted").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_instances_are_not_failures_when_usage_leaves_them_out() {
    stopping_instances_are_not_failures("not_counted").await;
}
