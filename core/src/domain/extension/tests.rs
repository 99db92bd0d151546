use super::*;
use chrono::TimeZone;
use rust_decimal_macros::dec;

fn offer(id: &str, hours: u32, fee: Decimal) -> ExtensionOffer {
    let t = Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap();
    ExtensionOffer {
        id: id.into(),
        reservation_id: "cr-1".into(),
        duration_hours: hours,
        start: t,
        end: t + Duration::hours(i64::from(hours)),
        fee: Money::usd(fee).unwrap(),
    }
}

#[test]
fn picks_the_cheapest_rate_under_the_threshold_and_the_budget() {
    // 1 x 8 GPUs: 1 day at 2.50 = 480, 2 days at 2.40 = 921.60, 3 days at 3.10 = 1785.60.
    let offers = [offer("a", 24, dec!(480)), offer("b", 48, dec!(921.60)), offer("c", 72, dec!(1785.60))];
    let h = |v| Money::usd(v).unwrap();
    let (o, r) = choose(&offers, 1, 8, dec!(3.00), h(dec!(10000))).unwrap();
    assert_eq!((o.id.as_str(), r.per_unit), ("b", dec!(2.40)));
    // The budget left only fits the one-day extension.
    assert_eq!(choose(&offers, 1, 8, dec!(3.00), h(dec!(500))).unwrap().0.id, "a");
    // The threshold is inclusive; a cent below refuses everything.
    assert_eq!(choose(&offers, 1, 8, dec!(2.40), h(dec!(10000))).unwrap().0.id, "b");
    assert!(choose(&offers, 1, 8, dec!(2.39), h(dec!(10000))).is_none());
}

fn at(h: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap() + Duration::hours(h)
}

/// A block ending at `end`, in `state`.
fn block(state: BlockState, end: DateTime<Utc>) -> Block {
    Block { state, instance_count: 1, ..crate::domain::block::example(at(-48), end) }
}

/// A one-day extension of the block above, created at `created` in `state`.
fn record(state: ExtensionState, created: DateTime<Utc>) -> ExtensionIntent {
    ExtensionIntent {
        reservation_id: "cr-1".into(),
        rule_id: "p5".into(),
        offer: offer("x", 24, dec!(480)),
        state,
        created_at: created,
        sent_at: (state != ExtensionState::Reserved).then_some(created),
        reason: None,
        charges: Vec::new(),
    }
}

#[test]
fn an_extension_is_paid_when_the_end_reaches_its_end() {
    let x = record(ExtensionState::Sent, at(-3));
    assert_eq!(settlement(&x, &block(BlockState::Active, at(24)), true, at(-2)), Settlement::Paid);
    // Paid wins even when the block was not observed this run: the stored end already moved.
    assert_eq!(settlement(&x, &block(BlockState::Active, at(24)), false, at(-2)), Settlement::Paid);
}

#[test]
fn a_reserved_record_is_released_after_its_grace() {
    let x = record(ExtensionState::Reserved, at(-3));
    let b = block(BlockState::Active, at(0));
    assert_eq!(settlement(&x, &b, true, at(-3) + Duration::minutes(4)), Settlement::Wait);
    assert_eq!(settlement(&x, &b, true, at(-3) + RESERVED_GRACE), Settlement::Release("abandoned before it was sent"));
    // Never sent: an unobserved block does not hold it open.
    assert_eq!(settlement(&x, &b, false, at(-3) + RESERVED_GRACE), Settlement::Release("abandoned before it was sent"));
}

#[test]
fn a_sent_record_waits_for_its_payment_deadline_and_is_never_released_on_it() {
    // Sent 3 h before the end at at(0): its payment deadline is 35 minutes before the block's
    // scheduled end (the offer's start), not the 5 minutes a block's own payment has.
    let x = record(ExtensionState::Sent, at(-3));
    let b = block(BlockState::Active, at(0));
    let deadline = extension_payment_deadline(at(-3), x.offer.start);
    assert_eq!(deadline, x.offer.start - Duration::minutes(35));
    assert_eq!(settlement(&x, &b, true, deadline), Settlement::Wait);
    // EC2 not asked this run: the stored end may be stale.
    assert_eq!(settlement(&x, &b, false, deadline), Settlement::Unobserved);
    // Past the deadline and its grace, observed or not: overdue, never released on the timer
    // (EC2 may hold it whatever the end says; only its word that the payment failed releases).
    assert_eq!(settlement(&x, &b, true, deadline + SENT_GRACE), Settlement::Overdue);
    assert_eq!(settlement(&x, &b, false, deadline + SENT_GRACE), Settlement::Overdue);
    // A block that ended does not release it either.
    let ended = block(BlockState::Expired, at(0));
    assert_eq!(settlement(&x, &ended, false, at(-2)), Settlement::Overdue);
}

#[test]
fn the_decision_window_closes_an_hour_before_the_end() {
    let x = Extend { max_price_per_accelerator_hour: dec!(3), max_days: 2, decide_hours_before_end: 6 };
    let b = block(BlockState::Active, at(0));
    assert!(!in_window(&b, &x, at(-6) - Duration::minutes(1)));
    assert!(in_window(&b, &x, at(-6)));
    assert!(in_window(&b, &x, at(0) - LAST_EXTENSION_BEFORE_END));
    assert!(!in_window(&b, &x, at(0) - LAST_EXTENSION_BEFORE_END + Duration::minutes(1)));
    assert!(!in_window(&block(BlockState::PaymentPending, at(0)), &x, at(-2)));
}

/// A released record EC2's history shows held (pending or paid) is committed again; a failed
/// or missing word, or an open record, is not.
#[test]
fn a_released_record_ec2_holds_is_held_after_release() {
    let released = record(ExtensionState::Released, at(-3));
    let st = PaymentStatus::from_ec2;
    assert!(held_after_release(&released, st("payment-succeeded")));
    assert!(held_after_release(&released, st("payment-pending")));
    assert!(!held_after_release(&released, st("payment-failed")));
    assert!(!held_after_release(&released, None));
    assert!(!held_after_release(&record(ExtensionState::Bought, at(-3)), st("payment-succeeded")));
    for s in ["payment-pending", "payment-failed", "payment-succeeded"] {
        assert_eq!(st(s).map(PaymentStatus::as_ec2), Some(s));
    }
}

#[test]
fn paid_days_count_only_paid_extensions() {
    let history = [
        record(ExtensionState::Paid, at(-30)),
        record(ExtensionState::Released, at(-20)),
        ExtensionIntent { offer: offer("y", 48, dec!(900)), ..record(ExtensionState::Paid, at(-10)) },
    ];
    assert_eq!(paid_days(&history), 3);
    assert_eq!(paid_days(&[]), 0);
}

/// DescribeCapacityBlockExtensionHistory decides; the end date cross-checks.
#[test]
fn the_history_settles_and_the_end_cross_checks() {
    let x = record(ExtensionState::Sent, at(-3));
    let (old_end, new_end) = (block(BlockState::Active, at(0)), block(BlockState::Active, at(24)));
    let s = |b: &Block, st: &str, now| settlement_with_history(&x, b, true, PaymentStatus::from_ec2(st), now);
    assert_eq!(s(&old_end, "payment-succeeded", at(-2)), Settlement::Paid, "paid before the end moved");
    assert!(history_disagrees(&x, &old_end, true, PaymentStatus::from_ec2("payment-succeeded")));
    assert!(!history_disagrees(&x, &new_end, true, PaymentStatus::from_ec2("payment-succeeded")));
    assert_eq!(
        s(&old_end, "payment-failed", at(-2)),
        Settlement::Release("EC2 reports the extension's payment failed")
    );
    // The end moved all the same: the charge is kept.
    assert_eq!(s(&new_end, "payment-failed", at(-2)), Settlement::Paid);
    // Pending: waited for, and past the deadline overdue (a person is told), never released.
    assert_eq!(s(&old_end, "payment-pending", at(-2)), Settlement::Wait);
    assert_eq!(s(&old_end, "payment-pending", at(10)), Settlement::Overdue);
    // An unknown status, or none: the end date decides, which never releases a sent one.
    assert_eq!(s(&old_end, "payment-mystery", at(10)), settlement(&x, &old_end, true, at(10)));
    assert_eq!(s(&old_end, "payment-mystery", at(10)), Settlement::Overdue);
    assert_eq!(s(&new_end, "payment-mystery", at(10)), Settlement::Paid);
}

/// Reserved, Sent and Bought hold the budget and stop another extension of the block; Paid
/// and Released are closed. Each state's name is the one its record is stored under.
#[test]
fn only_an_unsettled_extension_is_open_and_each_state_reads_as_stored() {
    use ExtensionState::*;
    for (s, open) in [(Reserved, true), (Sent, true), (Bought, true), (Paid, false), (Released, false)] {
        assert_eq!(s.is_open(), open, "{s:?}");
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.as_str()));
    }
    assert_eq!(record(Sent, at(-3)).id(), "cr-1/x");
}

#[test]
fn a_short_allowance_asks_every_length() {
    assert_eq!(lengths_to_ask(0, at(0)), Vec::<u32>::new());
    assert_eq!(lengths_to_ask(1, at(0)), vec![1]);
    assert_eq!(lengths_to_ask(3, at(5)), vec![1, 2, 3]);
}

#[test]
fn a_long_allowance_asks_a_few_lengths_a_run_the_shortest_always() {
    let all: Vec<u32> = (1..=14).chain((21..=182).step_by(7)).collect();
    for minute in 0..500 {
        let asked = lengths_to_ask(182, at(0) + Duration::minutes(minute));
        assert_eq!(asked.len(), LENGTHS_PER_RUN, "minute {minute}: {asked:?}");
        assert_eq!(asked[0], 1, "the shortest first, always");
        assert!(asked.windows(2).all(|w| w[0] < w[1]), "ascending, no repeats: {asked:?}");
        assert!(asked.iter().all(|d| all.contains(d)), "only sellable lengths: {asked:?}");
    }
}

#[test]
fn runs_every_five_minutes_cover_every_length_within_a_day() {
    // A decision window of 24 hours at the tracker's 5-minute schedule: 288 runs.
    let mut seen = std::collections::BTreeSet::new();
    for run in 0..288 {
        seen.extend(lengths_to_ask(45, at(0) + Duration::minutes(5 * run)));
    }
    let sellable: Vec<u32> = (1..=14).chain([21, 28, 35, 42]).collect();
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), sellable);
}
