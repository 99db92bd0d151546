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
