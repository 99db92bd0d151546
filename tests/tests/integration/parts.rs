//! Which reservations are a purchase's: only those its answer named (or, with the answer lost,
//! as many as its offering makes) are its parts; any other reservation carrying its intent tag
//! is a second purchase, recorded uncharged and announced; one EC2 lists but capblock cannot
//! read keeps its intent open. Through the real scan and tracker on the simulator and moto.

use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::reconcile::Settled;
use capblock_shared::domain::budget::{BudgetOwner, IntentState, Period};
use capblock_shared::memory::{Failure, HookVerdict, Hooked, Kind, Script};
use capblock_shared::ports::{BlockStore, Ledger};
use capblock_tests::{Rig, RuleToml, ScenarioToml, T0, event_types};
use rust_decimal_macros::dec;

const STACK: &str = "capblock-test";

/// One p5.48xlarge line in us-east-1 at 3.00 per GPU-hour (a 1-day block of 2 days ahead costs
/// 576.00), paid after 3 hours; the rule `p5` that buys it.
async fn rig(name: &str) -> Rig {
    let scenario = ScenarioToml::new(5, T0).payment("succeed", Some(3)).p5("us-east-1", &[2], "3.00").build();
    let mut h = Rig::start(name, &scenario, capblock_tests::quick_timeouts(), T0.parse().unwrap(), STACK).await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    h
}

fn rule(h: &Rig) -> capblock_shared::domain::rule::Rule {
    RuleToml::p5("p5").window(1, 10).rule(h.now())
}

/// A reservation "bought by hand" in us-east-1 carrying `intent`'s tags (this stack's, the
/// rule's and the intent's), of `instance_type`; its id.
async fn tagged(h: &Rig, intent: &str, instance_type: &str) -> String {
    let body = format!(
        r#"{{"region": "us-east-1", "instance_type": "{instance_type}", "instance_count": 2, "start": "2026-12-05T11:30:00Z", "end": "2026-12-06T11:30:00Z", "upfront_fee": "576", "tags": {{"capblock:stack": "{STACK}", "capblock:rule": "p5", "capblock:intent": "{intent}"}}}}"#
    );
    h.sim.control("POST", "/_sim/reservations", &body).await["reservation_id"].as_str().unwrap().to_string()
}

async fn usage(h: &Rig) -> (rust_decimal::Decimal, rust_decimal::Decimal, u32) {
    let u = h.store.usage(&BudgetOwner::Rule("p5".into()), &Period::of(h.now())).await.unwrap().unwrap();
    (u.committed.amount(), u.spent.amount(), u.purchases)
}

/// PurchaseCapacityBlock whose answer is lost: after EC2 bought (`buys`), or without anything
/// reaching EC2. A dry run goes through.
fn lost_answer(buys: bool) -> Script {
    Script::new().on("purchase", move |call| {
        let lost = Failure::Unknown("the answer was lost".into());
        match call.kind {
            Kind::Buy { live: false } => HookVerdict::Proceed,
            _ if buys => HookVerdict::Lose(lost),
            _ => HookVerdict::Fail(lost),
        }
    })
}

/// A scan on the rig whose purchase answer is lost; the intent left open.
async fn scan_losing_the_answer(h: &Rig, buys: bool) -> String {
    h.put_rules(&[rule(h)]).await;
    let market = Hooked::new(h.sim.market().await, lost_answer(buys));
    let report = h.scanner(&market, &h.notifier, &h.scan).run(h.now()).await.unwrap();
    let Some(Outcome::Unknown { intent, .. }) = report.outcomes[0].action.clone() else { panic!("{report:#?}") };
    intent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_reservation_of_a_bought_intent_is_a_duplicate_not_a_part() {
    let h = rig("duplicate").await;
    let id = h.buy(&rule(&h)).await;
    let intent_id = h.block(&id).await.intent_id.unwrap();
    let intent = h.store.get_intent("p5", &intent_id).await.unwrap().unwrap();
    assert_eq!(intent.parts, vec![id.clone()], "the purchase's reservations are stored with it");
    // A second block carrying the same intent (a second purchase for one decision).
    let dup = tagged(&h, &intent_id, "p5.48xlarge").await;
    let report = h.track().await;
    assert_eq!(report.adopted, std::slice::from_ref(&dup), "{report:#?}");
    let b = h.block(&dup).await;
    assert_eq!((b.fee, b.intent_id.as_deref(), b.rule_id.as_deref()), (None, None, Some("p5")), "recorded, uncharged");
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["duplicate-purchase"]);
    assert_eq!(alerts[0].body["metadata"]["threadId"], dup.as_str());
    let text = alerts[0].body["content"]["description"].as_str().unwrap();
    assert!(text.contains(&intent_id) && text.contains(&dup), "{text}");
    assert_eq!(usage(&h).await, (dec!(576.00), dec!(576.00), 1), "the purchase is charged once");
    // Announced once; the next runs adopt nothing more.
    h.advance_hours(3).await;
    assert!(h.track().await.adopted.is_empty());
    assert!(!event_types(&h.aws.alerts().await).contains(&"duplicate-purchase".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_settles_one_part_for_an_instance_purchase_and_alarms_the_rest() {
    let h = rig("lost-duplicate").await;
    let intent_id = scan_losing_the_answer(&h, true).await;
    let bought = h.sim.purchases().await[0]["reservation_id"].as_str().unwrap().to_string();
    let dup = tagged(&h, &intent_id, "p5.48xlarge").await;
    h.advance_minutes(5).await;
    let report = h.track().await;
    // The reservation that matches the offering is the purchase; the other one is not a part.
    assert!(
        report.settled.contains(&Settled::Adopted { intent: intent_id.clone(), reservation_id: bought.clone() }),
        "{report:#?}"
    );
    assert_eq!(report.adopted, std::slice::from_ref(&dup));
    let intent = h.store.get_intent("p5", &intent_id).await.unwrap().unwrap();
    assert_eq!((intent.state, intent.parts.clone()), (IntentState::Bought, vec![bought.clone()]));
    assert_eq!(h.block(&bought).await.fee.map(|f| f.amount()), Some(dec!(576.00)));
    assert_eq!(h.block(&dup).await.fee, None);
    let mut types = event_types(&h.aws.alerts().await);
    types.sort();
    assert_eq!(types, ["duplicate-purchase", "purchased"]);
    assert_eq!(usage(&h).await, (dec!(576.00), dec!(576.00), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_reservation_with_the_intent_tag_keeps_the_intent_open() {
    let h = rig("unreadable").await;
    // Nothing bought; EC2 lists one reservation with the intent's tag that capblock cannot
    // read (an instance type that is no instance type's name).
    let intent_id = scan_losing_the_answer(&h, false).await;
    let odd = tagged(&h, &intent_id, "P5.48XLARGE").await;
    // Long past the grace after which a Sent intent with nothing tagged is released.
    h.advance_hours(1).await;
    let report = h.track().await;
    assert!(
        report.settled.iter().any(
            |s| matches!(s, Settled::StillOpen { intent, reason } if *intent == intent_id && reason.contains(&odd))
        ),
        "{report:#?}"
    );
    let intent = h.store.get_intent("p5", &intent_id).await.unwrap().unwrap();
    assert_eq!(intent.state, IntentState::Sent, "never released");
    assert_eq!(usage(&h).await, (dec!(576.00), dec!(0), 1), "the fee stays committed");
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["unreadable-reservation"]);
    assert_eq!(alerts[0].body["metadata"]["threadId"], intent_id.as_str());
    // The next runs keep it open and say nothing more.
    h.advance_hours(1).await;
    h.track().await;
    h.scan().await;
    assert_eq!(h.store.get_intent("p5", &intent_id).await.unwrap().unwrap().state, IntentState::Sent);
    assert!(h.aws.alerts().await.is_empty());
    assert!(h.store.get_block(&odd).await.unwrap().is_none());
}
