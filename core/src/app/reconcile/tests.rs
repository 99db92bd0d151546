//! Settlement on the clock, never on a replayed time, and within the run's time.

use chrono::Duration;

use super::*;
use crate::app::fixtures::{logged_events, offering, reservation_of, rule, sent_intent, t0};
use crate::domain::budget::SENT_GRACE;
use crate::memory::{Hooked, MemoryEc2, MemoryTable, Script};

/// Two purchases whose answers were lost, sent at the clock's 10:00: one EC2 made, one not.
fn two_unknown() -> (MemoryTable, MemoryEc2) {
    let (east, west) = (rule("east", "live"), rule("west", "live"));
    let start = t0() + Duration::days(2);
    let made = sent_intent(&east, offering("cb-made", start), t0());
    let lost = sent_intent(&west, offering("cb-lost", start), t0());
    let market = MemoryEc2::default().with_reservations([reservation_of(&made, "cr-made")]);
    (MemoryTable::default().with_rules([east, west]).with_intents([made, lost]), market)
}

/// A replayed moment past every grace settles nothing: the fee of a
/// purchase whose answer is only late stays held (a replay an hour ahead released it, and the
/// next scan bought a second block).
#[tokio::test]
async fn a_replay_settles_nothing() {
    let (table, market) = two_unknown();
    let replay = RunTime::asked(t0() + Duration::minutes(5), Some(t0() + Duration::hours(1)));
    let settled = settle_open_intents(&table, &market, replay, None).await.unwrap();
    assert_eq!(settled.len(), 2);
    for s in &settled {
        let Settled::StillOpen { reason, .. } = s else { panic!("{settled:?}") };
        assert!(reason.contains("a replay"), "{reason}");
    }
    assert!(table.writes().is_empty(), "{:?}", table.writes());
}

/// On the clock the one EC2 made is adopted; the other, with nothing tagged, is never released
/// on a timer: past the grace it stays open, its fee committed, and a person is told (a
/// reservation EC2 lists 16 minutes late was bought twice when absence released it).
#[tokio::test]
async fn on_the_clock_a_made_purchase_is_adopted_and_an_unseen_one_held() {
    let (table, market) = two_unknown();
    let within = settle_open_intents(&table, &market, RunTime::from(t0() + Duration::minutes(10)), None).await.unwrap();
    assert!(matches!(&within[..], [Settled::Adopted { .. }, Settled::StillOpen { .. }]), "{within:?}");
    assert!(!table.writes().iter().any(|w| w.contains("outcome-unknown")), "{:?}", table.writes());
    for later in [SENT_GRACE, Duration::hours(16), Duration::days(60)] {
        let past = settle_open_intents(&table, &market, RunTime::from(t0() + later), None).await.unwrap();
        assert!(
            matches!(&past[..], [Settled::StillOpen { intent, reason }] if intent == "west/cb-lost" && reason == UNKNOWN_HELD),
            "{past:?}"
        );
    }
    let writes = table.writes();
    assert!(
        !writes.iter().any(|w| w.starts_with("record_rejected") || w.starts_with("record_given_back")),
        "{writes:?}"
    );
    assert!(writes.iter().any(|w| w.starts_with("enqueue") && w.contains("outcome-unknown")), "{writes:?}");
}

/// EC2 that never answers (a throttle storm the SDK keeps retrying): every lookup stops at the
/// run's time and its intent stays open, reported so, instead of each waiting the operation
/// timeout and the run dying at its own.
#[tokio::test(start_paused = true)]
async fn lookups_stop_at_the_runs_time() {
    let (table, market) = two_unknown();
    // Its tag lookups never answer.
    let market = Hooked::new(market, Script::new().hang("reservations_tagged"));
    let until = Instant::now() + std::time::Duration::from_secs(10);
    let at = RunTime::from(t0() + SENT_GRACE);
    let settling = settle_open_intents(&table, &market, at, Some(until));
    let settled = tokio::time::timeout(std::time::Duration::from_secs(600), settling)
        .await
        .expect("settlement ends by the run's time")
        .unwrap();
    assert_eq!(settled.len(), 2);
    assert!(
        settled.iter().all(|s| matches!(s, Settled::StillOpen { reason, .. } if reason == OUT_OF_TIME)),
        "{settled:?}"
    );
    assert!(Instant::now() <= until, "no lookup outlived the run's time");
    assert!(table.writes().is_empty(), "{:?}", table.writes());
    // Settlement takes half of what is left of a run; without a deadline it is not bounded.
    let now = Instant::now();
    assert_eq!(
        settling_until(Some(now + std::time::Duration::from_secs(40))),
        Some(now + std::time::Duration::from_secs(20))
    );
    assert_eq!(settling_until(Some(now - std::time::Duration::from_secs(1))), Some(now));
    assert_eq!(settling_until(None), None);
}

/// Only reservations capblock cannot read carry the intent's tag: its step is to hold the fee
/// and tell a person (`hold_unreadable`), never to adopt, give back or wait in silence.
#[test]
fn an_intent_whose_tagged_reservation_cannot_be_read_is_held_for_a_person() {
    let east = rule("east", "live");
    let x = sent_intent(&east, offering("cb-x", t0() + Duration::days(2)), t0());
    for later in [Duration::hours(1), Duration::hours(16), Duration::days(60)] {
        let step = settle_step(&x, RunTime::from(t0() + later), Some(Shown::Unreadable));
        assert_eq!(step, SettleStep::HoldUnreadable, "{later}");
    }
}

/// A lost answer EC2 made once is adopted quietly; one EC2 made twice (two reservations carry
/// the intent's tag, where its purchase makes one) is adopted once and logs the
/// `duplicate_purchase` line the duplicate-purchase alarm counts, naming the extra reservation.
#[tokio::test]
async fn a_second_reservation_with_the_tag_is_the_duplicate_purchase_alarm_and_one_is_not() {
    let (table, market) = two_unknown();
    let at = RunTime::from(t0() + Duration::minutes(10));
    let (settled, events) = logged_events(settle_open_intents(&table, &market, at, None)).await;
    assert!(matches!(&settled.unwrap()[..], [Settled::Adopted { .. }, Settled::StillOpen { .. }]));
    assert!(!events.iter().any(|e| e == "duplicate_purchase"), "{events:?}");

    let east = rule("east", "live");
    let start = t0() + Duration::days(2);
    let twice = sent_intent(&east, offering("cb-twice", start), t0());
    let table = MemoryTable::default().with_rules([east]).with_intents([twice.clone()]);
    let market = MemoryEc2::default()
        .with_reservations([reservation_of(&twice, "cr-first"), reservation_of(&twice, "cr-second")]);
    let (settled, events) = logged_events(settle_open_intents(&table, &market, at, None)).await;
    let settled = settled.unwrap();
    assert!(
        matches!(&settled[..], [Settled::Adopted { reservation_id, .. }] if reservation_id == "cr-first"),
        "{settled:?}"
    );
    assert_eq!(events.iter().filter(|e| *e == "duplicate_purchase").count(), 1, "{events:?}");
}
