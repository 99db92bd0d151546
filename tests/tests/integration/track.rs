//! The block lifecycle end to end: blocks bought through the real scan, then followed by the
//! tracker on the simulator's clock, with the real DynamoDB and SNS adapters on moto.

use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::track::TrackSettings;
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::{BlockStore, Ledger, RuleStore};
use capblock_tests::{Published, Rig, RuleToml, ScenarioToml, T0, detail_types, event_types};
use chrono::{DateTime, Duration, Utc};
use rust_decimal_macros::dec;

const STACK: &str = "capblock-test";

/// One p5.48xlarge line in us-east-1 at 3.00 per GPU-hour: a 1-day block costs 576.00.
fn scenario(clock: &str, start_day: u32, payment: &str, extension_price: Option<&str>) -> String {
    ScenarioToml::new(5, clock)
        .payment(payment, Some(3))
        .p5("us-east-1", &[start_day], "3.00")
        .extension_price(extension_price)
        .build()
}

fn rule(now: DateTime<Utc>, earliest_days: i64, extra: &str) -> Rule {
    RuleToml::p5("p5").window(earliest_days, 10).extra(extra).rule(now)
}

/// A rig for stack "capblock-test" with its clock at `clock`, us-east-1 always reconciled.
async fn rig(name: &str, scenario: &str, clock: &str) -> Rig {
    let mut h = Rig::start(name, scenario, capblock_tests::quick_timeouts(), clock.parse().unwrap(), STACK).await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    h
}

/// A rig on the one-line market (payment succeeds after 3 hours; an extension sells at
/// `extension_price`, if any) with a block bought at T0 under `rule(.., 1, extra)`, then tracked
/// once 3 hours later; the block's id.
async fn paid_block(name: &str, extension_price: Option<&str>, extra: &str) -> (Rig, String) {
    let h = rig(name, &scenario(T0, 2, "succeed", extension_price), T0).await;
    let id = h.buy(&rule(h.now(), 1, extra)).await;
    h.advance_hours(3).await;
    h.track().await;
    (h, id)
}

fn text(a: &Published) -> String {
    format!("{} {} {}", a.body["content"]["title"], a.body["content"]["description"], a.body["content"]["nextSteps"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payment_after_three_hours_schedules_the_block_with_one_message() {
    let h = rig("paid", &scenario(T0, 2, "succeed", None), T0).await;
    let id = h.buy(&rule(h.now(), 1, "")).await;
    for _ in 0..3 {
        h.track().await;
        assert_eq!(h.block(&id).await.state, BlockState::PaymentPending);
        h.advance_hours(1).await;
    }
    let report = h.track().await;
    assert_eq!(report.moved.len(), 1, "{report:#?}");
    let b = h.block(&id).await;
    assert_eq!(b.state, BlockState::Scheduled);
    assert_eq!(b.version, 2);
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["payment-succeeded"]);
    assert_eq!(alerts[0].body["metadata"]["threadId"], id.as_str());
    assert!(text(&alerts[0]).contains("Thu 2026-12-03 11:30 UTC"), "{}", text(&alerts[0]));
    assert_eq!(h.reminders.calls(), [("sync".to_string(), id.clone(), b.end)]);
    h.track().await;
    assert!(h.aws.alerts().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_that_never_comes_fails_at_twelve_hours_after_one_warning_per_point() {
    let h = rig("never", &scenario(T0, 2, "never", None), T0).await;
    let id = h.buy(&rule(h.now(), 1, "")).await;
    let mut seen = Vec::new();
    for hour in 1..=13 {
        h.advance_hours(1).await;
        h.track().await;
        let state = h.block(&id).await.state;
        assert_eq!(state == BlockState::PaymentFailed, hour >= 12, "hour {hour}: {state}");
        for a in h.aws.alerts().await {
            seen.push((hour, a.body["id"].as_str().unwrap().to_string(), text(&a)));
        }
    }
    let ids: Vec<(i64, String)> = seen.iter().map(|(h, id, _)| (*h, id.clone())).collect();
    assert_eq!(
        ids,
        [
            (6, format!("{id}#payment-warning")),
            (11, format!("{id}#payment-warning")),
            (12, format!("{id}#payment-failed")),
        ]
    );
    assert!(seen[0].2.contains("6h left") && seen[1].2.contains("1h left"), "{seen:#?}");
    assert!(seen[2].2.contains("Tue 2026-12-01 12:00 UTC"), "{}", seen[2].2);
    assert!(h.aws.store().open_blocks(None).await.unwrap().is_empty(), "a failed block leaves the open index");
    // One Payment Failed event over 13 runs; a payment failure is not also a Block Ended.
    assert_eq!(detail_types(&h.aws.events().await), ["Block Purchased", "Payment Failed"]);
    assert_eq!(h.reminders.calls(), [("clear".to_string(), id.clone(), h.block(&id).await.end)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_bought_two_hours_before_its_start_fails_five_minutes_before_it() {
    let clock = "2026-12-03T09:30:00Z";
    let h = rig("late", &scenario(clock, 0, "never", None), clock).await;
    let id = h.buy(&rule(h.now(), 0, "")).await;
    assert_eq!(h.block(&id).await.payment_deadline, Some("2026-12-03T11:25:00Z".parse().unwrap()));
    h.track().await;
    assert!(h.aws.alerts().await.is_empty(), "the 6 h point was already past at purchase");
    h.advance_minutes(60).await; // 10:30
    h.track().await;
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-warning"]);
    h.advance_minutes(54).await; // 11:24
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::PaymentPending);
    h.advance_minutes(1).await; // 11:25
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::PaymentFailed);
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_makes_it_active_and_end_expires_it_with_its_cost() {
    let (h, id) = paid_block("life", None, "").await;
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-succeeded"]);
    // To the start (12-03 11:30) in steps.
    for _ in 0..8 {
        h.advance_hours(7).await;
        h.track().await;
    }
    h.advance_minutes(90).await; // 12-03 12:30
    assert_eq!(h.now(), "2026-12-03T12:30:00Z".parse::<DateTime<Utc>>().unwrap());
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["delivered"]);
    let t = text(&alerts[0]);
    for needle in [id.as_str(), "MarketType=capacity-block", "capacityReservationSelectorTerms"] {
        assert!(t.contains(needle), "{needle} missing: {t}");
    }
    h.advance_hours(23).await; // 12-04 11:30: the end
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::Expired);
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["expired"]);
    let t = text(&alerts[0]);
    assert!(t.contains("576.00 USD") && t.contains("3.0000 USD per accelerator-hour"), "{t}");
    let calls: Vec<String> = h.reminders.calls().into_iter().map(|c| c.0).collect();
    assert_eq!(calls, ["sync", "sync", "clear"], "scheduled, active, expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_quiet_runs_say_nothing() {
    let (h, id) = paid_block("quiet", None, "").await;
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-succeeded"]);
    let calls = h.reminders.calls().len();
    for _ in 0..20 {
        let r = h.track().await;
        assert!(r.moved.is_empty() && r.notices.published == 0, "{r:#?}");
    }
    assert!(h.aws.alerts().await.is_empty());
    assert_eq!(h.reminders.calls().len(), calls);
    assert_eq!(h.block(&id).await.version, 2);
}

async fn inject(h: &Rig, tags: &str) -> String {
    let body = format!(
        r#"{{"region": "us-east-1", "instance_type": "p5.48xlarge", "instance_count": 2, "start": "2026-12-05T11:30:00Z", "end": "2026-12-07T11:30:00Z", "tags": {tags}}}"#
    );
    h.sim.control("POST", "/_sim/reservations", &body).await["reservation_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tagged_reservation_missing_from_the_store_is_adopted_once() {
    let h = rig("adopt", &scenario(T0, 2, "succeed", None), T0).await;
    let ours = inject(&h, &format!(r#"{{"capblock:stack": "{STACK}", "capblock:rule": "p5"}}"#)).await;
    let other = inject(&h, r#"{"team": "vision"}"#).await;
    let report = h.track().await;
    assert_eq!(report.adopted, std::slice::from_ref(&ours));
    let b = h.block(&ours).await;
    assert_eq!((b.state, b.rule_id.as_deref(), b.fee), (BlockState::Scheduled, Some("p5"), None));
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["tracking"]);
    assert_eq!(alerts[0].body["metadata"]["threadId"], ours.as_str());
    assert!(h.aws.store().get_block(&other).await.unwrap().is_none(), "untagged: not without adopt_untagged");
    assert!(h.track().await.adopted.is_empty());
    assert!(h.aws.alerts().await.is_empty());
    assert_eq!(h.reminders.calls(), [("sync".to_string(), ours.clone(), b.end)]);

    let all = TrackSettings { adopt_untagged: true, ..h.track.clone() };
    let report = h.track_with(&all).await;
    assert_eq!(report.adopted, std::slice::from_ref(&other));
    assert_eq!(h.block(&other).await.rule_id, None, "a foreign block counts against no rule");
    assert_eq!(event_types(&h.aws.alerts().await), ["tracking"]);
    assert!(h.track_with(&all).await.adopted.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_rules_regions_are_not_visited() {
    let h = rig("disabled-regions", &scenario(T0, 2, "succeed", None), T0).await;
    // eu-west-1 hangs: a visit there would show as a failed region.
    h.sim.behaviour(r#"{"down_regions": ["eu-west-1"], "timeout_secs": 1}"#).await;
    let mut r = RuleToml::p5("far").regions(&["eu-west-1"]).extra("enabled = false").rule(h.now());
    h.put_rules(std::slice::from_ref(&r)).await;
    let report = h.track().await;
    assert!(report.failed_regions.is_empty(), "{report:#?}");
    // Enabled, its region is reconciled again.
    r.enabled = true;
    h.store.put_rule(&r, Some(1)).await.unwrap();
    let report = h.tracker(&h.notifier, &h.reminders, &h.track).run(h.now()).await.unwrap();
    assert_eq!(report.failed_regions.keys().collect::<Vec<_>>(), ["eu-west-1"], "{report:#?}");
}

const EXTEND: &str = "[extend]\nmax_price_per_accelerator_hour = \"3.00\"\nmax_days = 1\ndecide_hours_before_end = 48";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_under_the_threshold_is_bought_once_and_moves_the_end() {
    let (h, id) = paid_block("extend", Some("2.50"), EXTEND).await;
    h.aws.alerts().await;
    let old_end = h.block(&id).await.end;
    // 12-02 12:00: 47.5 h before the end, inside the decision window.
    h.advance_hours(33).await;
    let report = h.track().await;
    assert!(
        report.extensions.iter().any(|a| matches!(a, capblock_shared::app::extend::ExtensionAction::Bought { .. })),
        "{report:#?}"
    );
    assert_eq!(event_types(&h.aws.alerts().await), ["extension-bought"]);
    for _ in 0..3 {
        h.track().await;
    }
    assert_eq!(h.sim.state().await["extensions"].as_array().unwrap().len(), 1, "bought once");
    h.advance_hours(3).await; // paid
    h.track().await;
    let b = h.block(&id).await;
    assert_eq!(b.end, old_end + Duration::days(1));
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["extended"]);
    assert!(text(&alerts[0]).contains("480.00 USD"), "{}", text(&alerts[0]));
    assert_eq!(h.reminders.calls().last().unwrap(), &("sync".to_string(), id.clone(), b.end));
    let usage = h.aws.store().usage(&BudgetOwner::Rule("p5".into()), &Period::of(h.now())).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.spent.amount()), (dec!(1056), dec!(1056)));
    // Inside the window of the new end, but max_days is used up.
    h.advance_hours(24).await;
    h.track().await;
    assert_eq!(h.sim.state().await["extensions"].as_array().unwrap().len(), 1);
    // capblock's events: the purchase, one Block Extended for the runs that saw it, and the
    // start (12-03 11:30) the last day crossed.
    let events = h.aws.events().await;
    assert_eq!(detail_types(&events), ["Block Purchased", "Block Extended", "Block Active"]);
    assert_eq!(events[1]["detail"]["previous_end"], old_end.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    assert_eq!(events[1]["detail"]["end"], b.end.format("%Y-%m-%dT%H:%M:%SZ").to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_above_the_threshold_is_not_bought() {
    let (h, id) = paid_block("noextend", Some("3.01"), EXTEND).await;
    h.advance_hours(33).await;
    h.track().await;
    h.track().await;
    assert!(h.sim.state().await["extensions"].as_array().unwrap().is_empty());
    assert_eq!(h.sim.state().await["calls"]["PurchaseCapacityBlockExtension"], serde_json::Value::Null);
    let _ = id;
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-succeeded"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_payment_releases_the_budget_and_the_rule_rebuys() {
    let h = rig("rebuy", &scenario(T0, 2, "never", None), T0).await;
    let r = rule(h.now(), 1, "rebuy_on_payment_failure = true");
    let first = h.buy(&r).await;
    let usage = |h: &Rig| {
        let store = h.aws.store();
        let now = h.now();
        async move { store.usage(&BudgetOwner::Rule("p5".into()), &Period::of(now)).await.unwrap().unwrap() }
    };
    assert_eq!(usage(&h).await.committed.amount(), dec!(576));
    for _ in 0..12 {
        h.advance_hours(1).await;
        h.track().await;
    }
    assert_eq!(h.block(&first).await.state, BlockState::PaymentFailed);
    let u = usage(&h).await;
    assert_eq!((u.committed.amount(), u.spent.amount(), u.purchases), (dec!(0), dec!(0), 0));
    // Released once, however often the tracker runs.
    h.track().await;
    assert_eq!(usage(&h).await.committed.amount(), dec!(0));
    h.aws.alerts().await;

    // The next day's offering (a new offering id) is bought as a replacement.
    h.advance_hours(13).await;
    let report = h.scan().await;
    let Some(Outcome::Bought { reservation_id, .. }) = report.outcomes[0].action.clone() else { panic!("{report:#?}") };
    assert_ne!(reservation_id, first);
    assert_eq!(h.sim.purchases().await.len(), 2);
    assert_eq!(usage(&h).await.purchases, 1);
}

/// A reservation EC2 describes without a member capblock needs (every member is optional in the
/// API) is not "gone": past its payment deadline the paid block stays as it was, its fee
/// committed and the rule without a second block, and a person is told once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_reservation_moves_neither_the_block_nor_money() {
    let h = rig("unreadable-block", &scenario(T0, 2, "succeed", None), T0).await;
    let r = rule(h.now(), 1, "rebuy_on_payment_failure = true");
    let id = h.buy(&r).await;
    h.track().await;
    let omit = |members: &str| {
        let body = format!(r#"{{"reservation_id": "{id}", "members": [{members}]}}"#);
        let sim = &h.sim;
        async move { sim.control("POST", "/_sim/reservations/omit", &body).await }
    };
    omit(r#""state""#).await;
    // Past the payment deadline (12 hours after the purchase), EC2 answering every time.
    for _ in 0..14 {
        h.advance_hours(1).await;
        h.track().await;
    }
    assert_eq!(h.block(&id).await.state, BlockState::PaymentPending, "kept as it was");
    let usage = h.store.usage(&BudgetOwner::Rule("p5".into()), &Period::of(h.now())).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.spent.amount(), usage.purchases), (dec!(576), dec!(576), 1));
    assert_eq!(event_types(&h.aws.alerts().await), ["anomaly"], "told once");
    h.scan().await;
    assert_eq!(h.sim.purchases().await.len(), 1, "no second block");
    // Readable again: tracked on as EC2 says (paid, scheduled).
    omit("").await;
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_off_the_path_is_announced_once_per_change() {
    let (h, id) = paid_block("states", None, "").await;
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-succeeded"]);
    let set = |state: &str| {
        let body = if state == "null" {
            format!(r#"{{"reservation_id": "{id}", "state": null}}"#)
        } else {
            format!(r#"{{"reservation_id": "{id}", "state": "{state}"}}"#)
        };
        let sim = &h.sim;
        async move { sim.control("POST", "/_sim/reservations/state", &body).await }
    };
    for state in ["unavailable", "cancelling", "delayed", "assessing", "some-future-state"] {
        set(state).await;
        let report = h.track().await;
        assert_eq!(report.checks, [format!("{id}#{state}")], "{report:#?}");
        let alerts = h.aws.alerts().await;
        assert_eq!(event_types(&alerts), ["ec2-state"], "{state}");
        assert!(
            text(&alerts[0]).contains(&format!("Check this block: EC2 reports it `{state}`")),
            "{}",
            text(&alerts[0])
        );
        assert_eq!(alerts[0].body["metadata"]["threadId"], id.as_str());
        // The same state on the next runs: nothing more; the block is left as it was.
        assert!(h.track().await.checks.is_empty());
        assert!(h.aws.alerts().await.is_empty());
        assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
    }
    // Back on its path: tracked as before, in silence.
    set("null").await;
    let report = h.track().await;
    assert!(report.checks.is_empty() && report.moved.is_empty(), "{report:#?}");
    assert!(h.aws.alerts().await.is_empty());
    // Once active, unavailable again is a new change: announced once more.
    h.sim.control("POST", "/_sim/clock", r#"{"set": "2026-12-03T11:30:00Z"}"#).await;
    h.track().await;
    assert_eq!(event_types(&h.aws.alerts().await), ["delivered"]);
    set("unavailable").await;
    assert_eq!(h.track().await.checks.len(), 1);
    assert_eq!(event_types(&h.aws.alerts().await), ["ec2-state"]);
}

/// Final is not final while EC2 holds the block: a block booked payment-failed (EC2 said so,
/// its fee released) that EC2 then lists scheduled is held again on the next run: back in the
/// open blocks, its fee committed again in DynamoDB's budgets (one transaction, once), and a
/// person told once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_block_ec2_lists_held_again_is_tracked_and_charged_again_once() {
    let h = rig("held-again", &scenario(T0, 2, "never", None), T0).await;
    let id = h.buy(&rule(h.now(), 1, "")).await;
    h.advance_hours(12).await;
    let failed = h.track().await;
    assert_eq!(failed.released_budgets, std::slice::from_ref(&id));
    let committed = || async {
        let usage = h.store.usage(&BudgetOwner::Rule("p5".into()), &Period::of(T0.parse().unwrap())).await;
        usage.unwrap().unwrap().committed.amount()
    };
    assert_eq!(committed().await, dec!(0));
    assert_eq!(event_types(&h.aws.alerts().await), ["payment-failed"]);

    let body = format!(r#"{{"reservation_id": "{id}", "state": "scheduled"}}"#);
    h.sim.control("POST", "/_sim/reservations/state", &body).await;
    h.advance_minutes(5).await;
    let again = h.track().await;
    assert_eq!(again.recommitted_budgets, std::slice::from_ref(&id), "{again:#?}");
    assert_eq!(again.ledger_mismatches, [format!("{id}#payment-failed->scheduled")]);
    assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
    assert_eq!(committed().await, dec!(576), "the fee EC2 took counts again");
    let open: Vec<String> = h.store.open_blocks(None).await.unwrap().into_iter().map(|b| b.reservation_id).collect();
    assert_eq!(open, std::slice::from_ref(&id));
    assert_eq!(event_types(&h.aws.alerts().await), ["ledger-mismatch"]);
    h.advance_minutes(5).await;
    let later = h.track().await;
    assert!(later.recommitted_budgets.is_empty() && later.ledger_mismatches.is_empty(), "{later:#?}");
    assert_eq!(committed().await, dec!(576), "once");
    assert!(h.aws.alerts().await.is_empty());
}
