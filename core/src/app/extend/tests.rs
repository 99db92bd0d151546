//! The extender settling what EC2 holds: a sent extension's fee is released only on EC2's word
//! that its payment failed, never on an unanswered history, a block shown off its path or not
//! at all, or a timer; and a released one EC2 shows held is committed again, once.

use std::sync::{Arc, Mutex};

use chrono::Duration;

use super::*;
use crate::app::fixtures::{Outputs, offering, reservation_of, rule, sent_intent, t0, track_settings, tracker};
use crate::domain::block::Reservation;
use crate::domain::budget::{BudgetOwner, IntentState};
use crate::domain::lifecycle::extension_payment_deadline;
use crate::domain::money::Money;
use crate::memory::{Failure, HookVerdict, Hooked, MemoryEc2, MemoryTable, Script};
use crate::ports::ExtensionRecord;

/// EC2 with a history of extensions told by the test (`None` answers 503); the rest is the
/// in-memory EC2's.
type Ec2 = Hooked<MemoryEc2, Script>;
type Told = Arc<Mutex<Option<Vec<ExtensionRecord>>>>;

fn ec2(history: Option<Vec<ExtensionRecord>>) -> (Ec2, Told) {
    let told: Told = Arc::new(Mutex::new(history));
    let history = told.clone();
    let script = Script::new().on("extension_history", move |_| match history.lock().unwrap().clone() {
        Some(records) => HookVerdict::answer(Ok::<_, MarketError>(records)),
        None => HookVerdict::Fail(Failure::Unknown("503 Service Unavailable".into())),
    });
    (Hooked::new(MemoryEc2::default(), script), told)
}

/// The p5 rule's block (2026-12-02 00:00 to 12-03 00:00) as EC2 made it, and as stored.
fn held_block() -> (Block, Reservation) {
    let mut bought = sent_intent(&rule("p5", "live"), offering("cb-1", t0() + Duration::days(1)), t0());
    bought.state = IntentState::Bought;
    let r = reservation_of(&bought, "cr-1");
    let b = Block::bought(&bought, &r, t0());
    (b, r)
}

/// A one-day extension of `b` (480 USD), sent 3 hours before its end: its payment deadline is
/// 35 minutes before the end.
fn one_day(b: &Block) -> ExtensionIntent {
    let r = rule("p5", "live");
    let sent = b.end - Duration::hours(3);
    ExtensionIntent {
        reservation_id: b.reservation_id.clone(),
        rule_id: r.id.clone(),
        offer: ExtensionOffer {
            id: "cbx-1".into(),
            reservation_id: b.reservation_id.clone(),
            duration_hours: 24,
            start: b.end,
            end: b.end + Duration::days(1),
            fee: Money::parse("480", "USD").unwrap(),
        },
        state: ExtensionState::Reserved,
        created_at: sent,
        sent_at: None,
        reason: None,
        charges: charges_for(&r, &StackBudgets::default(), &Period::of(sent)).unwrap(),
    }
}

/// The table holding `b` and its extension `x`, reserved and sent through the ledger (so the
/// budgets carry its fee as the live run leaves them).
async fn table_with(b: &Block, x: &ExtensionIntent) -> MemoryTable {
    let table = MemoryTable::default().with_rules([rule("p5", "live")]).with_blocks([b.clone()]);
    table.reserve_extension(x).await.unwrap();
    table.advance_extension(x, ExtensionState::Sent, x.created_at).await.unwrap();
    table
}

/// The rule's (committed, spent) in the extension's month.
async fn budget(table: &MemoryTable, x: &ExtensionIntent) -> (Decimal, Decimal) {
    let u = table.usage(&BudgetOwner::Rule("p5".into()), &Period::of(x.created_at)).await.unwrap().unwrap();
    (u.committed.amount(), u.spent.amount())
}

fn extender<'a>(market: &'a Ec2, table: &'a MemoryTable) -> Extender<'a, Ec2, MemoryTable> {
    Extender { market, store: table, stack_mode: Mode::Live, budgets: StackBudgets::default() }
}

fn notices_of(table: &MemoryTable, milestone: &str) -> usize {
    table.notices().iter().filter(|(n, _)| n.milestone.starts_with(milestone)).count()
}

use rust_decimal::Decimal;
use rust_decimal_macros::dec;

/// The history answers 503 past the deadline and its grace, the block observed with its end
/// not moved (as stored): the fee stays committed, the extension open, and a person is told
/// once however many runs pass.
#[tokio::test]
async fn an_unanswered_history_past_the_deadline_releases_nothing() {
    let (b, _) = held_block();
    let x = one_day(&b);
    let table = table_with(&b, &x).await;
    let (market, history) = ec2(None);
    let deadline = extension_payment_deadline(b.end - Duration::hours(3), b.end);
    let observed: HashSet<String> = [b.reservation_id.clone()].into();
    for minutes in [15, 16, 30] {
        let out =
            extender(&market, &table).run(&HashMap::new(), &observed, deadline + Duration::minutes(minutes)).await;
        assert!(!out.unwrap().iter().any(|a| matches!(a, ExtensionAction::Released { .. })), "+{minutes} min");
        assert_eq!(table.extensions()[0].state, ExtensionState::Sent, "+{minutes} min: still open");
        assert_eq!(budget(&table, &x).await, (dec!(480), dec!(0)), "+{minutes} min: the fee stays committed");
    }
    assert!(!table.writes().iter().any(|w| w.starts_with("close_extension")), "{:?}", table.writes());
    assert_eq!(notices_of(&table, "extension-overdue"), 1, "told once");
    assert_eq!(notices_of(&table, "extension-released"), 0);

    // EC2's word that the payment failed releases it, once.
    let failed = ExtensionRecord {
        reservation_id: b.reservation_id.clone(),
        offering_id: x.offer.id.clone(),
        status: "payment-failed".into(),
        end: None,
    };
    *history.lock().unwrap() = Some(vec![failed]);
    extender(&market, &table).run(&HashMap::new(), &observed, deadline + Duration::hours(1)).await.unwrap();
    assert_eq!(table.extensions()[0].state, ExtensionState::Released);
    assert_eq!(budget(&table, &x).await, (dec!(0), dec!(0)));
}

/// The tracker past the deadline and its grace, EC2's history not listing the extension yet,
/// while EC2 shows the block off its path (`unavailable`, its end moved by the extension) or
/// does not find it: the stored end is stale, and the extension is not settled on it.
#[tokio::test]
async fn a_block_off_its_path_or_not_found_settles_nothing_on_its_stale_end() {
    for shown in ["unavailable", "not found"] {
        let (b, mut r) = held_block();
        let x = one_day(&b);
        let table = table_with(&b, &x).await;
        r.state = "unavailable".into();
        r.end = x.offer.end;
        let market =
            if shown == "unavailable" { MemoryEc2::default().with_reservations([r]) } else { MemoryEc2::default() };
        let settings = track_settings(Mode::Live);
        let out = Outputs::default();
        let tracker = tracker(&market, &table, &out, &settings);
        let deadline = extension_payment_deadline(b.end - Duration::hours(3), b.end);
        tracker.run(deadline + Duration::minutes(16)).await.unwrap();
        assert_eq!(table.extensions()[0].state, ExtensionState::Sent, "{shown}: still open");
        assert_eq!(budget(&table, &x).await, (dec!(480), dec!(0)), "{shown}: the fee stays committed");
        assert!(!table.writes().iter().any(|w| w.starts_with("close_extension")), "{shown}: {:?}", table.writes());
    }
}

/// An extension closed as Released whose history later says paid (or pending): its fee is
/// committed and spent again in the budgets, once, announced once.
#[tokio::test]
async fn a_released_extension_ec2_shows_paid_is_committed_again_once() {
    for status in ["payment-succeeded", "payment-pending"] {
        let (b, _) = held_block();
        let x = one_day(&b);
        let table = table_with(&b, &x).await;
        let sent = ExtensionIntent { state: ExtensionState::Sent, sent_at: Some(x.created_at), ..x.clone() };
        table.close_extension(&sent, ExtensionState::Released, Some("released on a stale end")).await.unwrap();
        assert_eq!(budget(&table, &x).await, (dec!(0), dec!(0)));
        let held = ExtensionRecord {
            reservation_id: b.reservation_id.clone(),
            offering_id: x.offer.id.clone(),
            status: status.into(),
            end: Some(x.offer.end),
        };
        let (market, _) = ec2(Some(vec![held]));
        for run in 0..3 {
            let now = b.end - Duration::minutes(10) + Duration::minutes(run);
            extender(&market, &table).run(&HashMap::new(), &HashSet::new(), now).await.unwrap();
            assert_eq!(budget(&table, &x).await, (dec!(480), dec!(480)), "{status}, run {run}: counted once");
        }
        assert_eq!(table.extensions()[0].state, ExtensionState::Paid, "{status}");
        let recommits = table.writes().iter().filter(|w| w.starts_with("recommit_extension")).count();
        assert_eq!(recommits, 1, "{status}: {:?}", table.writes());
        assert_eq!(notices_of(&table, "extension-recommitted"), 1, "{status}: told once");
    }
}

/// The p5 rule, extending its blocks by up to a day at up to 3.00 per GPU-hour, decided from 6
/// hours before the end.
fn extending(enabled: bool) -> Rule {
    let extend = Extend { max_price_per_accelerator_hour: dec!(3.00), max_days: 1, decide_hours_before_end: 6 };
    Rule { enabled, extend: Some(extend), ..rule("p5", "live") }
}

/// EC2 holding the held block and selling extensions of it at 2.50 per GPU-hour (a day of its
/// 8 GPUs: 480), its clock at `now`; the purchase of an extension answered as `script` says.
fn selling(r: &Reservation, now: DateTime<Utc>, script: Script) -> Ec2 {
    let ec2 = MemoryEc2::default().with_reservations([r.clone()]).with_extension_fees(|r, hours| {
        Money::usd(dec!(2.50) * Decimal::from(8 * r.instance_count) * Decimal::from(hours)).ok()
    });
    ec2.set_now(now);
    Hooked::new(ec2, script)
}

/// One run of the extender over the held block under `rule`, at `now`.
async fn extend_run(market: &Ec2, table: &MemoryTable, rule: &Rule, now: DateTime<Utc>) -> Vec<ExtensionAction> {
    let rules = HashMap::from([(rule.id.clone(), rule.clone())]);
    extender(market, table).run(&rules, &HashSet::new(), now).await.unwrap()
}

/// Three hours before the end, in the rule's window: the one-day extension is bought once, its
/// fee reserved and its record marked Sent before the purchase, then Bought; the next runs buy
/// nothing more (max_days is spent).
#[tokio::test]
async fn an_extension_in_the_window_is_bought_once_at_its_fee() {
    let (b, r) = held_block();
    let rule = extending(true);
    let table = MemoryTable::default().with_rules([rule.clone()]).with_blocks([b.clone()]);
    let now = b.end - Duration::hours(3);
    let market = selling(&r, now, Script::new());
    let actions = extend_run(&market, &table, &rule, now).await;
    assert!(
        matches!(&actions[..], [ExtensionAction::Bought { reservation_id, .. }] if reservation_id == "cr-1"),
        "{actions:?}"
    );
    let [x] = &table.extensions()[..] else { panic!("{:?}", table.extensions()) };
    assert_eq!((x.state, x.sent_at, x.offer.duration_hours), (ExtensionState::Bought, Some(now), 24), "{x:?}");
    assert_eq!(x.offer.fee, Money::usd(dec!(480)).unwrap());
    assert_eq!(budget(&table, x).await.0, dec!(480), "its fee committed");
    let writes: Vec<String> = table.writes().into_iter().filter(|w| w.contains("extension")).collect();
    let order: Vec<&str> = writes.iter().map(|w| w.split(' ').next().unwrap_or_default()).collect();
    assert_eq!(
        order[..2],
        ["reserve_extension", "advance_extension"],
        "reserved and Sent before the purchase: {writes:?}"
    );
    assert_eq!(notices_of(&table, "extension-bought"), 1);
    for later in 1..4 {
        let at = now + Duration::minutes(5 * later);
        market.inner.set_now(at);
        extend_run(&market, &table, &rule, at).await;
    }
    assert_eq!(market.inner.extensions_sold().len(), 1, "bought once");
    assert_eq!(market.hook.calls().iter().filter(|c| **c == "purchase_extension").count(), 1);
}

/// A disabled rule's block, and a block outside the rule's window (too early, or less than the
/// last hour EC2 sells in), are not extended, nor asked about.
#[tokio::test]
async fn a_disabled_rule_or_a_block_outside_the_window_is_not_extended() {
    let (b, r) = held_block();
    for (rule, before_end) in [
        (extending(false), Duration::hours(3)),
        (extending(true), Duration::hours(7)),
        (extending(true), Duration::minutes(30)),
    ] {
        let table = MemoryTable::default().with_rules([rule.clone()]).with_blocks([b.clone()]);
        let now = b.end - before_end;
        let market = selling(&r, now, Script::new());
        let actions = extend_run(&market, &table, &rule, now).await;
        assert!(actions.is_empty(), "enabled {}, {before_end} before the end: {actions:?}", rule.enabled);
        assert!(market.hook.calls().is_empty(), "nothing asked: {:?}", market.hook.calls());
        assert!(table.extensions().is_empty());
    }
}

/// EC2 refuses the purchase (a 4xx: nothing bought): the fee is released and a person told.
/// EC2's answer is lost (a 5xx: it may have bought): the fee stays committed, the record Sent,
/// for the end date to settle.
#[tokio::test]
async fn a_refused_purchase_releases_its_fee_and_a_lost_answer_keeps_it() {
    let (b, r) = held_block();
    let rule = extending(true);
    let now = b.end - Duration::hours(3);
    let refused = MarketError::Rejected {
        operation: "PurchaseCapacityBlockExtension",
        region: "us-east-1".into(),
        code: "InvalidParameterValue".into(),
        message: "no".into(),
    };
    let table = MemoryTable::default().with_rules([rule.clone()]).with_blocks([b.clone()]);
    let market = selling(&r, now, Script::new().fail("purchase_extension", refused));
    let actions = extend_run(&market, &table, &rule, now).await;
    assert!(matches!(&actions[..], [ExtensionAction::Refused { .. }]), "{actions:?}");
    let [x] = &table.extensions()[..] else { panic!("{:?}", table.extensions()) };
    assert_eq!(x.state, ExtensionState::Released);
    assert_eq!(budget(&table, x).await, (dec!(0), dec!(0)), "released");
    assert_eq!(notices_of(&table, "extension-released"), 1);

    let table = MemoryTable::default().with_rules([rule.clone()]).with_blocks([b.clone()]);
    let lost = Script::new().on("purchase_extension", |_| HookVerdict::Lose(Failure::Unknown("HTTP 503".into())));
    let market = selling(&r, now, lost);
    let actions = extend_run(&market, &table, &rule, now).await;
    assert!(matches!(&actions[..], [ExtensionAction::Unknown { .. }]), "{actions:?}");
    let [x] = &table.extensions()[..] else { panic!("{:?}", table.extensions()) };
    assert_eq!((x.state, x.sent_at), (ExtensionState::Sent, Some(now)));
    assert_eq!(budget(&table, x).await.0, dec!(480), "kept: EC2 may hold it");
    assert_eq!(notices_of(&table, "extension-released"), 0);
}

/// The first extension question throttled: the block is skipped for the run as throttled, and
/// a second block of the region is not asked this run (the region's asking is over).
#[tokio::test]
async fn a_throttled_question_ends_the_region_s_extension_asking_for_the_run() {
    let (b, r) = held_block();
    let second = Block { reservation_id: "cr-2".into(), end: b.end + Duration::hours(1), ..b.clone() };
    let r2 = Reservation { id: "cr-2".into(), end: second.end, ..r.clone() };
    let rule = extending(true);
    let now = b.end - Duration::hours(3);
    let table = MemoryTable::default().with_rules([rule.clone()]).with_blocks([b.clone(), second]);
    let throttled =
        Script::new().on("extension_offerings", |_| HookVerdict::Fail(Failure::Throttled("RequestLimitExceeded")));
    let ec2 = MemoryEc2::default().with_reservations([r, r2]);
    ec2.set_now(now);
    let market = Hooked::new(ec2, throttled);
    let actions = extend_run(&market, &table, &rule, now).await;
    let reasons: Vec<(&str, &str)> = actions
        .iter()
        .map(|a| match a {
            ExtensionAction::Skipped { reservation_id, reason } => (reservation_id.as_str(), reason.as_str()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reasons, [("cr-1", NotAsked::Throttled.reason()), ("cr-2", NotAsked::Throttled.reason())]);
    assert_eq!(market.hook.calls().iter().filter(|c| **c == "extension_offerings").count(), 1, "asked once");
}

/// A sent extension EC2's history says failed is released with one notice; one reserved and
/// never sent is released without a word (EC2 never saw it).
#[tokio::test]
async fn a_failed_sent_extension_is_announced_and_a_never_sent_one_is_not() {
    let (b, _) = held_block();
    let x = one_day(&b);
    let failed = ExtensionRecord {
        reservation_id: b.reservation_id.clone(),
        offering_id: x.offer.id.clone(),
        status: "payment-failed".into(),
        end: Some(x.offer.end),
    };
    let table = table_with(&b, &x).await;
    let (market, _) = ec2(Some(vec![failed]));
    extender(&market, &table).run(&HashMap::new(), &HashSet::new(), x.created_at + Duration::minutes(5)).await.unwrap();
    assert_eq!(table.extensions()[0].state, ExtensionState::Released);
    assert_eq!(notices_of(&table, "extension-released"), 1, "a sent one is told");

    let table = MemoryTable::default().with_rules([rule("p5", "live")]).with_blocks([b.clone()]);
    table.reserve_extension(&x).await.unwrap();
    let (market, _) = ec2(Some(vec![]));
    extender(&market, &table).run(&HashMap::new(), &HashSet::new(), x.created_at + Duration::minutes(5)).await.unwrap();
    assert_eq!(table.extensions()[0].state, ExtensionState::Released, "never sent: released");
    assert_eq!(notices_of(&table, "extension-released"), 0, "and not told");
}
