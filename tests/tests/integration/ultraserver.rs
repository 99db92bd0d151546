//! UltraServers and block health end to end: an UltraServer rule from the search to the expiry
//! of its blocks, a hand-bought UltraServer block adopted with its kind, and health changes of
//! an active block announced once each. The simulator plays EC2, moto plays DynamoDB, SNS and
//! EventBridge Scheduler (the real reminder schedules, so the 60-minute lead is read back).

use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::track::TrackSettings;
use capblock_shared::aws::scheduler::SchedulerReminders;
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::ports::{Ledger, MarketError, OfferingQuery, OfferingSource};
use capblock_tests::{Published, Rig, RuleToml, ScenarioToml, T0, detail_types, event_types};
use chrono::{DateTime, Duration, Utc};
use rust_decimal_macros::dec;
use serde_json::json;

const STACK: &str = "capblock-ultra";
/// Reminder leads of the tests' schedules, in minutes.
const LEADS: [i64; 2] = [120, 30];

/// u-trn2x64 UltraServers (4 x trn2u.48xlarge of 16 Trainium2 chips), 1 or 2 per block, for a
/// day from 12-03 11:30, at 2.00 per chip-hour: 2 UltraServers cost 2.00 x 128 x 24 = 6144.
fn scenario() -> String {
    ScenarioToml::new(16, T0).payment("succeed", Some(3)).trn2_ultra("us-east-1", &[1, 2], &[2], "2.00").build()
}

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// A rig on `scenario()` at T0, us-east-1 reconciled, and a schedule group on moto.
async fn rig(name: &str) -> (Rig, SchedulerReminders) {
    let mut h = Rig::start(name, &scenario(), capblock_tests::quick_timeouts(), t(T0), STACK).await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    let group = format!("capblock-{}", h.aws.table.trim_start_matches("capblock-test-"));
    let scheduler = aws_sdk_scheduler::Client::new(&h.aws.sdk);
    scheduler.create_schedule_group().name(&group).send().await.expect("a schedule group on moto");
    let reminders = SchedulerReminders::new(
        scheduler,
        group,
        "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event".into(),
        "arn:aws:iam::123456789012:role/capblock-reminder".into(),
        LEADS.iter().map(|&m| Duration::minutes(m)).collect(),
    );
    (h, reminders)
}

/// One tracker run with the real reminder schedules; it must succeed without errors.
async fn track(
    h: &Rig,
    reminders: &SchedulerReminders,
    settings: &TrackSettings,
) -> capblock_shared::app::track::TrackReport {
    let report = h.tracker(&h.notifier, reminders, settings).run(h.now()).await.unwrap();
    assert!(report.errors.is_empty() && report.failed_regions.is_empty(), "{report:#?}");
    report
}

/// The instant of the block's `lead`-minute reminder schedule; None when it does not exist.
async fn reminder_at(h: &Rig, reservation_id: &str, lead: i64) -> Option<String> {
    let group = format!("capblock-{}", h.aws.table.trim_start_matches("capblock-test-"));
    let got = aws_sdk_scheduler::Client::new(&h.aws.sdk)
        .get_schedule()
        .name(format!("capblock-{reservation_id}-{lead}m"))
        .group_name(group)
        .send()
        .await
        .ok()?;
    got.schedule_expression().map(str::to_string)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn title(a: &Published) -> String {
    a.body["content"]["title"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ultraserver_rule_is_bought_once_and_tracked_to_expiry_with_60_minute_reminders() {
    let (h, reminders) = rig("ultra-life").await;
    let rule = RuleToml::trn2_ultra("trn2-ultra", &[2]).rule(h.now());

    // The search names the UltraServers: the market answers the 2-UltraServer offering only.
    let q = capblock_shared::app::scan::questions_for(&rule, h.now());
    assert_eq!(q.len(), 1);
    let offers = h.market.offerings(&q[0].query).await.unwrap();
    assert!(!offers.is_empty() && offers.iter().all(|o| o.ultraservers.is_some_and(|u| u.count == 2)), "{offers:#?}");
    assert!(offers.iter().all(|o| o.instance_count == 8));
    // Asked as instances, the UltraServers' instance type is not sold: EC2 sells it only whole.
    let as_instances = OfferingQuery { ultraservers: None, ..q[0].query.clone() };
    assert!(matches!(h.market.offerings(&as_instances).await, Err(MarketError::NotSold { .. })));

    // Bought through the one purchase path: one PurchaseCapacityBlock, two reservations.
    h.put_rules(std::slice::from_ref(&rule)).await;
    let report = h.scan().await;
    let Some(Outcome::Bought { reservation_id: first, more, .. }) = report.outcomes[0].action.clone() else {
        panic!("{report:#?}")
    };
    assert_eq!(more.len(), 1, "one reservation per UltraServer: {report:#?}");
    let second = more[0].clone();
    assert_eq!(purchase_calls(&h).await, 1);
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["purchased"]);
    assert_eq!(title(&alerts[0]), "Capacity Block bought: 2 x u-trn2x64 (8 x trn2u.48xlarge)");
    let chosen = report.outcomes[0].chosen.clone().unwrap();
    assert_eq!(chosen.per_accelerator_hour.per_unit, dec!(2), "over all 128 chips of the offering");
    // A second scan buys nothing more.
    let again = h.scan().await;
    assert!(!matches!(again.outcomes[0].action, Some(Outcome::Bought { .. })), "{again:#?}");

    let b = h.block(&first).await;
    assert!(b.ultraserver && b.capacity_block_id.is_some());
    assert_eq!((b.instance_count, b.fee.map(|f| f.amount())), (4, Some(dec!(3072.00))), "its half of the fee");
    assert_eq!(b.termination_time(), b.end - Duration::minutes(60));

    // The tracker adopts the other UltraServer as part of the same purchase (no money moves),
    // and both are paid after 3 hours.
    h.advance_hours(3).await;
    let report = track(&h, &reminders, &h.track).await;
    assert_eq!(report.adopted, std::slice::from_ref(&second), "{report:#?}");
    let other = h.block(&second).await;
    assert!(other.ultraserver);
    assert_eq!((other.state, other.fee.map(|f| f.amount())), (BlockState::Scheduled, Some(dec!(3072.00))));
    assert_eq!(sorted(event_types(&h.aws.alerts().await)), ["payment-succeeded", "tracking"]);
    let usage = h.store.usage(&BudgetOwner::Rule(rule.id.clone()), &Period::of(h.now())).await.unwrap().unwrap();
    assert_eq!((usage.spent.amount(), usage.purchases), (dec!(6144.00), 1), "charged once for the purchase");

    // Reminders 60 minutes earlier than a plain block's: the end is 12-04 11:30, instances go
    // from 10:30.
    for id in [&first, &second] {
        assert_eq!(reminder_at(&h, id, 30).await.as_deref(), Some("at(2026-12-04T10:00:00)"), "{id}");
        assert_eq!(reminder_at(&h, id, 120).await.as_deref(), Some("at(2026-12-04T08:30:00)"), "{id}");
    }

    // Active at the start (12-03 11:30), expired at the end, each announced once per block.
    h.advance_hours(56).await;
    h.advance_minutes(30).await;
    assert_eq!(h.now(), t("2026-12-03T11:30:00Z"));
    track(&h, &reminders, &h.track).await;
    assert_eq!(event_types(&h.aws.alerts().await), ["delivered", "delivered"]);
    h.advance_hours(24).await;
    track(&h, &reminders, &h.track).await;
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["expired", "expired"]);
    let text = format!("{}", alerts[0].body["content"]["description"]);
    assert!(text.contains("3072.00 USD") && text.contains("2.0000 USD per accelerator-hour"), "{text}");
    for id in [&first, &second] {
        assert_eq!(h.block(id).await.state, BlockState::Expired);
        assert_eq!(reminder_at(&h, id, 30).await, None, "schedules cleared");
    }
    assert_eq!(purchase_calls(&h).await, 1, "exactly one purchase reached EC2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_bought_ultraserver_block_is_adopted_with_the_60_minute_lead() {
    let (h, reminders) = rig("ultra-adopt").await;
    let ultra = bought_by_hand(
        &h,
        json!({"region": "us-east-1", "instance_type": "p6e-gb200.36xlarge", "instance_count": 9,
        "ultraserver_type": "u-p6e-gb200x36", "start": "2026-12-05T11:30:00Z", "end": "2026-12-07T11:30:00Z"}),
    )
    .await;
    let plain = bought_by_hand(
        &h,
        json!({"region": "us-east-1", "instance_type": "p5.48xlarge", "instance_count": 2,
        "start": "2026-12-05T11:30:00Z", "end": "2026-12-07T11:30:00Z"}),
    )
    .await;
    let all = TrackSettings { adopt_untagged: true, ..h.track.clone() };
    let report = track(&h, &reminders, &all).await;
    assert_eq!(sorted(report.adopted.clone()), sorted(vec![ultra.clone(), plain.clone()]));
    let (u, p) = (h.block(&ultra).await, h.block(&plain).await);
    assert!(u.ultraserver && !p.ultraserver, "the kind comes from DescribeCapacityBlocks");
    assert!(u.capacity_block_id.is_some());
    assert_eq!(reminder_at(&h, &ultra, 30).await.as_deref(), Some("at(2026-12-07T10:00:00)"));
    assert_eq!(reminder_at(&h, &plain, 30).await.as_deref(), Some("at(2026-12-07T10:30:00)"));
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["tracking", "tracking"]);
    let ut = alerts.iter().find(|a| a.body["metadata"]["threadId"] == ultra.as_str()).unwrap();
    assert!(
        format!("{}", ut.body["content"]["description"])
            .contains("Instances terminated from: Mon 2026-12-07 10:30 UTC"),
        "{:?}",
        ut.body
    );
    // Adopted once.
    assert!(track(&h, &reminders, &all).await.adopted.is_empty());
    assert!(h.aws.alerts().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_health_change_of_an_active_block_is_announced_once_and_so_is_the_recovery() {
    let (h, reminders) = rig("ultra-health").await;
    // Active now (T0 = 12-01 00:00): one u-trn2x64, bought by hand, adopted.
    let id = trn2_ultra_by_hand(&h, "2026-11-30T11:30:00Z", "2026-12-02T11:30:00Z").await;
    let all = TrackSettings { adopt_untagged: true, ..h.track.clone() };
    track(&h, &reminders, &all).await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    assert_eq!(event_types(&h.aws.alerts().await), ["tracking"]);
    assert!(h.aws.workload_notices().await.is_empty(), "healthy: nothing to say");

    let set = |health: serde_json::Value| {
        let sim = &h.sim;
        let mut health = health;
        health["reservation_id"] = json!(id);
        async move { sim.control("POST", "/_sim/blocks/health", &health.to_string()).await }
    };
    // Whether each change is a rise in failed instances: under the simulator's default reading
    // (the unavailable count holds the running instances too) instances still stopping would
    // look the same, so such a rise is announced once it has lasted the settle (15 minutes).
    let steps = [
        (json!({"interconnect": "impaired"}), "Check this block: interconnect impaired", false),
        (json!({"unavailable": 2}), "Check this block: interconnect impaired; 2 of 4 instances unavailable", true),
        (json!({"interconnect": "ok", "unavailable": 0}), "Block healthy again", false),
        // The same problem after a recovery is news again.
        (json!({"interconnect": "impaired"}), "Check this block: interconnect impaired", false),
    ];
    for (i, (health, expected, rise)) in steps.into_iter().enumerate() {
        set(health).await;
        if rise {
            assert!(track(&h, &reminders, &all).await.health.is_empty(), "step {i}: held");
            assert!(h.aws.alerts().await.is_empty() && h.aws.events().await.is_empty(), "step {i}");
            h.advance_minutes(15).await;
        }
        let report = track(&h, &reminders, &all).await;
        assert_eq!(report.health.len(), 1, "{report:#?}");
        let alerts = h.aws.alerts().await;
        assert_eq!(event_types(&alerts), ["health"], "step {i}");
        assert_eq!(title(&alerts[0]), expected);
        assert_eq!(alerts[0].body["metadata"]["threadId"], id.as_str());
        let work = h.aws.workload_notices().await;
        assert_eq!(work.len(), 1, "step {i}");
        assert_eq!(work[0].attributes["kind"], "health");
        assert_eq!(work[0].attributes["reservation_id"], id.as_str());
        assert_eq!(
            work[0].body["health"]["change"],
            if expected.starts_with("Block") { "recovered" } else { "degraded" }
        );
        assert_eq!(h.block(&id).await.health_changes, i as u32 + 1);
        // capblock's event too, once (Aws::events checks it against its schema).
        let events = h.aws.events().await;
        assert_eq!(detail_types(&events), ["Health Changed"], "step {i}");
        assert_eq!(events[0]["detail"]["status"], work[0].body["health"]["change"]);
        // The same status on the next runs: nothing more.
        for _ in 0..2 {
            assert!(track(&h, &reminders, &all).await.health.is_empty());
        }
        assert!(h.aws.alerts().await.is_empty() && h.aws.workload_notices().await.is_empty(), "step {i}");
        assert!(h.aws.events().await.is_empty(), "step {i}");
    }
    // insufficient-data alone is not a problem: going there from ok says nothing.
    set(json!({"interconnect": "ok"})).await;
    track(&h, &reminders, &all).await;
    assert_eq!(event_types(&h.aws.alerts().await), ["health"]);
    set(json!({"interconnect": "insufficient-data"})).await;
    assert!(track(&h, &reminders, &all).await.health.is_empty());
    assert!(h.aws.alerts().await.is_empty());
}

/// PurchaseCapacityBlock calls that reached the simulator.
async fn purchase_calls(h: &Rig) -> u64 {
    h.sim.state().await["calls"]["PurchaseCapacityBlock"].as_u64().unwrap_or(0)
}

/// on-capacity-event for a hand-bought UltraServer block capblock does not track: the kind is
/// looked up in EC2, so the workload is told its instances go 60 minutes before the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_for_a_hand_bought_ultraserver_block_names_its_60_minute_termination() {
    let (h, reminders) = rig("ultra-event").await;
    let mut ids = Vec::new();
    for body in [
        json!({"region": "us-east-2", "instance_type": "trn2u.48xlarge", "instance_count": 4,
            "ultraserver_type": "u-trn2x64", "start": "2026-12-03T11:30:00Z", "end": "2026-12-10T11:30:00Z"}),
        json!({"region": "us-east-2", "instance_type": "p5.48xlarge", "instance_count": 2,
            "start": "2026-12-03T11:30:00Z", "end": "2026-12-10T11:30:00Z"}),
    ] {
        ids.push(bought_by_hand(&h, body).await);
    }
    // EC2 shows them active only once they start: the market's clock moves there.
    h.advance_minutes(59 * 60 + 31).await;
    let clock = capblock_shared::memory::MemoryClock::at(t("2026-12-03T11:31:00Z"));
    let handler = capblock_shared::app::on_capacity_event::CapacityEventHandler {
        store: &h.store,
        market: &h.market,
        notifier: &h.notifier,
        reminders: &reminders,
        clock: &clock,
        leads: &[chrono::Duration::minutes(1440), chrono::Duration::minutes(120), chrono::Duration::minutes(30)],
        account: None,
    };
    let fixture = include_str!("../../../core/src/domain/capacity_event/fixtures/capacity-block-delivered.json");
    for (id, termination) in ids.iter().zip(["2026-12-10T10:30:00Z", "2026-12-10T11:00:00Z"]) {
        let mut event: serde_json::Value = serde_json::from_str(fixture).unwrap();
        event["id"] = json!(format!("ev-{id}"));
        event["detail"]["capacity-reservation-id"] = json!(id);
        event["resources"] = json!([format!("arn:aws:ec2:us-east-2:111122223333:capacity-reservation/{id}")]);
        handler.handle(&event).await.unwrap();
        let work = h.aws.workload_notices().await;
        assert_eq!(work.len(), 1, "{work:#?}");
        assert_eq!(work[0].attributes["termination_time"], termination, "{id}");
        assert_eq!(event_types(&h.aws.alerts().await), ["delivered"]);
    }
}

/// A hand-bought UltraServer block adopted by an earlier capblock (no CapacityBlockId kept,
/// taken as instances): the tracker learns its id and kind, and moves its reminders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_adopted_before_kinds_were_read_is_corrected_once() {
    use capblock_shared::domain::block::Block;
    use capblock_shared::ports::{BlockStore, ReservationLookup};
    let (h, reminders) = rig("ultra-backfill").await;
    let id = trn2_ultra_by_hand(&h, "2026-12-05T11:30:00Z", "2026-12-07T11:30:00Z").await;
    let mut r = h.market.reservation(&"us-east-1".parse().unwrap(), &id).await.unwrap().unwrap();
    r.capacity_block_id = None;
    let old = Block::adopted(&r, false, h.now());
    assert!(!old.ultraserver);
    assert!(h.store.adopt_block(&old).await.unwrap());

    track(&h, &reminders, &h.track).await;
    let b = h.block(&id).await;
    assert!(b.ultraserver && b.capacity_block_id.is_some(), "{b:#?}");
    assert_eq!(b.version, 2);
    assert_eq!(reminder_at(&h, &id, 30).await.as_deref(), Some("at(2026-12-07T10:00:00)"));
    assert!(h.aws.alerts().await.is_empty(), "nothing to tell anyone");
    // Once.
    track(&h, &reminders, &h.track).await;
    assert_eq!(h.block(&id).await.version, 2);
}

/// A reservation "bought in the console" (`POST /_sim/reservations`): its id.
async fn bought_by_hand(h: &Rig, body: serde_json::Value) -> String {
    h.sim.control("POST", "/_sim/reservations", &body.to_string()).await["reservation_id"].as_str().unwrap().to_string()
}

/// One u-trn2x64 in us-east-1 bought by hand, from `start` to `end`: its id.
async fn trn2_ultra_by_hand(h: &Rig, start: &str, end: &str) -> String {
    let body = json!({"region": "us-east-1", "instance_type": "trn2u.48xlarge", "instance_count": 4,
        "ultraserver_type": "u-trn2x64", "start": start, "end": end});
    bought_by_hand(h, body).await
}

/// A purchase of 2 UltraServers is 2 blocks for one fee: when its payment fails, the fee goes
/// back to each budget once, not once per UltraServer, and the month's other spend (a paid
/// purchase of the same rule) stays counted. Rebuy gives the purchase back to the count once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_ultraserver_payment_gives_its_fee_back_once_whatever_its_parts() {
    let scenario =
        ScenarioToml::new(16, T0).payment("succeed", Some(3)).trn2_ultra("us-east-1", &[2], &[2, 3], "2.00").build();
    let mut h = Rig::start("ultra-refund", &scenario, capblock_tests::quick_timeouts(), t(T0), STACK).await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    for stack in [&mut h.scan.stack, &mut h.track.stack] {
        stack.account_budget = Some(capblock_tests::usd("13000"));
    }
    let rule = RuleToml::p5("trn2-ultra")
        .instance_types(&[])
        .instance_counts(&[])
        .max_price("2.00")
        .budget("13000")
        .max_blocks_held(4)
        .max_purchases_per_month(4)
        .extra("ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [2]\nrebuy_on_payment_failure = true")
        .rule(h.now());
    h.put_rules(std::slice::from_ref(&rule)).await;
    // Two purchases of 6144 each, the second one's parts to fail their payment.
    let mut bought = Vec::new();
    for _ in 0..2 {
        let report = h.scan().await;
        let Some(Outcome::Bought { reservation_id, more, .. }) = report.outcomes[0].action.clone() else {
            panic!("{report:#?}")
        };
        assert_eq!(more.len(), 1, "{report:#?}");
        bought.push([reservation_id, more[0].clone()]);
    }
    for part in &bought[1] {
        h.sim.control("POST", "/_sim/payment", &json!({"reservation_id": part, "outcome": "fail"}).to_string()).await;
    }
    let spent = |owner: BudgetOwner| {
        let (store, now) = (h.aws.store(), h.now());
        async move {
            let u = store.usage(&owner, &Period::of(now)).await.unwrap().unwrap();
            (u.committed.amount(), u.spent.amount(), u.purchases)
        }
    };
    let rule_owner = || BudgetOwner::Rule(rule.id.clone());
    assert_eq!(spent(rule_owner()).await, (dec!(12288.00), dec!(12288.00), 2));
    // The tracker adopts each purchase's other part, then sees the payments settle.
    h.track().await;
    for _ in 0..4 {
        h.advance_hours(1).await;
        h.track().await;
    }
    for part in &bought[1] {
        assert_eq!(h.block(part).await.state, BlockState::PaymentFailed, "{part}");
    }
    for part in &bought[0] {
        assert_eq!(h.block(part).await.state, BlockState::Scheduled, "{part}");
    }
    // One fee of 6144 released, once: the paid purchase is still counted, in full.
    assert_eq!(spent(rule_owner()).await, (dec!(6144.00), dec!(6144.00), 1));
    assert_eq!(spent(BudgetOwner::Account).await, (dec!(6144.00), dec!(6144.00), 1));
    h.advance_hours(1).await;
    h.track().await;
    assert_eq!(spent(BudgetOwner::Account).await, (dec!(6144.00), dec!(6144.00), 1), "and never again");
}
