use chrono::{Duration, TimeZone, Utc};

use super::*;
use crate::domain::budget::{Intent, Period};
use crate::domain::money::Money;
use crate::domain::offering::example;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap()
}

fn intent(state: IntentState) -> Intent {
    let fee = Money::parse("600", "USD").unwrap();
    let mut i = Intent::new("p5", example("cb-1", "us-east-1", t0() + Duration::days(2), fee), 8, vec![], t0());
    i.state = state;
    if state == IntentState::Sent {
        i.sent_at = Some(t0());
    }
    assert_eq!(i.period, Period::of(t0()));
    i
}

fn at(minutes: i64) -> RunTime {
    RunTime::from(t0() + Duration::minutes(minutes))
}

#[test]
fn a_reserved_intent_goes_back_only_after_its_grace() {
    let i = intent(IntentState::Reserved);
    assert_eq!(judge(&i, at(4), None), Judgement::AnotherRunIsBuying);
    assert_eq!(judge(&i, at(5), None), Judgement::GiveBack);
}

#[test]
fn a_sent_intent_is_never_released_whatever_ec2_shows_or_how_long() {
    let i = intent(IntentState::Sent);
    assert_eq!(judge(&i, at(1), None), Judgement::LookUp);
    assert_eq!(judge(&i, at(1), Some(Shown::Nothing)), Judgement::Wait);
    assert_eq!(judge(&i, at(15), Some(Shown::Nothing)), Judgement::HoldForAPerson);
    assert_eq!(judge(&i, at(60 * 24 * 30), Some(Shown::Nothing)), Judgement::HoldForAPerson);
    assert_eq!(judge(&i, at(60), Some(Shown::Unreadable)), Judgement::HoldUnreadable);
    assert_eq!(judge(&i, at(60), Some(Shown::Tagged)), Judgement::Adopt);
}

#[test]
fn a_replay_or_a_look_settles_nothing() {
    let i = intent(IntentState::Reserved);
    let replay = RunTime::asked(t0() + Duration::minutes(10), Some(t0() + Duration::hours(2)));
    assert_eq!(judge(&i, replay, None), Judgement::NotOnTheClock);
    assert_eq!(judge(&i, at(10).look(), None), Judgement::NotOnTheClock);
    assert_eq!(judge(&intent(IntentState::Bought), at(10), None), Judgement::NotOpen);
}

#[test]
fn only_a_failed_payment_in_the_store_or_in_ec2_frees_a_part() {
    let shown = |state: &str| Observed::Found {
        state: state.into(),
        end: t0(),
        capacity_block_id: None,
        instance_count: 1,
        available: None,
    };
    assert!(part_failed(Some(BlockState::PaymentFailed), None));
    assert!(part_failed(None, Some(&shown("payment-failed"))));
    assert!(!part_failed(Some(BlockState::PaymentPending), Some(&shown("payment-pending"))));
    assert!(!part_failed(None, Some(&Observed::NotFound)));
    assert!(!part_failed(None, Some(&Observed::Unreadable("no state".into()))));
    assert!(!part_failed(None, None));
}

#[test]
fn a_person_may_release_a_sent_intent_only_an_hour_after_it_was_sent() {
    let i = intent(IntentState::Sent);
    for minutes in [1, 16, 59] {
        let e = may_release(&i, at(minutes).clock()).unwrap_err();
        assert_eq!(e.may_release_at, t0() + Duration::hours(1), "{minutes}");
        let said = e.to_string();
        assert!(said.contains("it may be released from 2026-12-01 13:00 UTC"), "{said}");
    }
    assert_eq!(may_release(&i, at(60).clock()), Ok(()));
    assert_eq!(may_release(&i, at(61).clock()), Ok(()));
}
