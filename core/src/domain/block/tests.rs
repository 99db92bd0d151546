use std::collections::BTreeMap;

use chrono::{Duration, TimeZone};
use rust_decimal_macros::dec;

use super::*;
use crate::domain::budget::Intent;
use crate::domain::offering::Offering;

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
}

fn reservation(tags: &[(&str, &str)]) -> Reservation {
    Reservation {
        id: "cr-0123456789abcdef0".into(),
        arn: Some("arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-0123456789abcdef0".into()),
        region: "us-east-1".parse().unwrap(),
        availability_zone: "us-east-1a".into(),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: 2,
        start: t(3, 11, 30),
        end: t(5, 11, 30),
        state: "scheduled".into(),
        reservation_type: Some("capacity-block".into()),
        capacity_block_id: None,
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }
}

/// What was bought to get `reservation(&[])`: the same block, for 3072 USD.
fn offering(ultraserver: bool) -> Offering {
    let r = reservation(&[]);
    Offering {
        id: "cb-1".into(),
        duration_hours: 48,
        duration_minutes: 0,
        fee: Money::usd(dec!(3072)).unwrap(),
        ultraserver,
        ultraservers: None,
        local_zone: false,
        segments: Vec::new(),
        region: r.region,
        availability_zone: r.availability_zone,
        instance_type: r.instance_type,
        instance_count: r.instance_count,
        start: r.start,
        end: r.end,
    }
}

#[test]
fn an_adopted_block_knows_only_what_ec2_says() {
    let now = t(1, 9, 0);
    let b = Block::adopted(&reservation(&[]), false, now);
    assert_eq!(b.state, BlockState::Scheduled);
    assert_eq!(
        (b.fee, b.accelerators_per_instance, b.payment_deadline, b.rule_id.as_deref()),
        (None, None, None, None)
    );
    assert_eq!(b.purchased_at, now);
    // A start before `now` caps the purchase time: the block cannot have been bought after it.
    assert_eq!(Block::adopted(&reservation(&[]), false, t(4, 0, 0)).purchased_at, t(3, 11, 30));
}

#[test]
fn only_a_tagged_reservation_counts_against_its_rule() {
    let r = reservation(&[(RULE_TAG, "p5-weekly")]);
    assert_eq!(Block::adopted(&r, true, t(1, 9, 0)).rule_id.as_deref(), Some("p5-weekly"));
    assert_eq!(Block::adopted(&r, false, t(1, 9, 0)).rule_id, None);
}

#[test]
fn an_unknown_ec2_state_is_held_as_payment_pending() {
    let r = Reservation { state: "no-such-state".into(), ..reservation(&[]) };
    assert_eq!(Block::adopted(&r, false, t(1, 9, 0)).state, BlockState::PaymentPending);
}

#[test]
fn a_bought_block_keeps_what_the_intent_knew() {
    let mut intent = Intent::new("p5-weekly", offering(true), 8, Vec::new(), t(1, 8, 0));
    intent.sent_at = Some(t(1, 9, 0));
    let b = Block::bought(&intent, &reservation(&[]), t(1, 10, 0));
    assert_eq!(b.purchased_at, t(1, 9, 0));
    assert_eq!(b.payment_deadline, Some(t(1, 21, 0)));
    assert_eq!((b.rule_id.as_deref(), b.intent_id.as_deref()), (Some("p5-weekly"), Some("p5-weekly/cb-1")));
    assert_eq!(b.fee, Some(Money::usd(dec!(3072)).unwrap()));
    assert!(b.ultraserver);
    // UltraServer instances go 60 minutes before the end, others 30.
    assert_eq!(b.termination_time(), t(5, 10, 30));
    assert_eq!(Block { ultraserver: false, ..b.clone() }.termination_time(), t(5, 11, 0));
    assert_eq!(b.with_end(t(6, 11, 30)).termination_time(), t(6, 10, 30));
}

#[test]
fn price_per_accelerator_hour_spans_the_whole_block() {
    let mut intent = Intent::new("p5-weekly", offering(false), 8, Vec::new(), t(1, 8, 0));
    intent.sent_at = Some(t(1, 9, 0));
    let b = Block::bought(&intent, &reservation(&[]), t(1, 10, 0));
    // 3072 over 2 x 8 accelerators x 48 h = 4.00.
    assert_eq!(b.per_accelerator_hour(Money::usd(dec!(3072)).unwrap()).unwrap().per_unit, dec!(4));
    let extended = b.with_end(b.end + Duration::hours(24));
    assert_eq!(
        extended.per_accelerator_hour(Money::usd(dec!(3072)).unwrap()).unwrap().per_unit,
        dec!(2.6666666666666666666666666667)
    );
    assert!(
        Block { accelerators_per_instance: None, ..b }.per_accelerator_hour(Money::usd(dec!(1)).unwrap()).is_none()
    );
}

fn with_id(id: &str, r: Reservation) -> Reservation {
    Reservation { id: id.into(), ..r }
}

fn ids(rs: &[Reservation]) -> Vec<&str> {
    rs.iter().map(|r| r.id.as_str()).collect()
}

#[test]
fn a_lost_instance_purchase_has_one_part_and_any_more_are_duplicates() {
    // The same 2-instance block twice with the intent's tag: the purchase is one reservation
    // of both instances, so the second is a second purchase, not a part.
    let found = vec![with_id("cr-b", reservation(&[])), with_id("cr-a", reservation(&[]))];
    let split = split_by_tag(&offering(false), found);
    assert_eq!((ids(&split.parts), ids(&split.duplicates)), (vec!["cr-a"], vec!["cr-b"]));
    // One alone is the purchase.
    let split = split_by_tag(&offering(false), vec![with_id("cr-a", reservation(&[]))]);
    assert_eq!((ids(&split.parts), split.duplicates.len()), (vec!["cr-a"], 0));
}

#[test]
fn a_lost_ultraserver_purchase_has_count_parts_and_more_are_duplicates() {
    // Two UltraServers of 4 instances each: 8 instances, two parts; a third is a duplicate.
    let o = Offering { instance_count: 8, ..offering(true) };
    let one = |id: &str| Reservation { instance_count: 4, ..with_id(id, reservation(&[])) };
    let split = split_by_tag(&o, vec![one("cr-c"), one("cr-a"), one("cr-b")]);
    assert_eq!((ids(&split.parts), ids(&split.duplicates)), (vec!["cr-a", "cr-b"], vec!["cr-c"]));
}

#[test]
fn reservations_unlike_the_offering_come_last_and_no_instances_take_a_place() {
    // A hand-tagged reservation in another zone sorts after the real one, whatever its id.
    let other = Reservation { availability_zone: "us-east-1b".into(), ..with_id("cr-a", reservation(&[])) };
    let split = split_by_tag(&offering(false), vec![other, with_id("cr-z", reservation(&[]))]);
    assert_eq!((ids(&split.parts), ids(&split.duplicates)), (vec!["cr-z"], vec!["cr-a"]));
    // Reservations claiming no instances cannot be parts without end.
    let empty = |id: &str| Reservation { instance_count: 0, ..with_id(id, reservation(&[])) };
    let split = split_by_tag(&offering(false), vec![empty("cr-a"), empty("cr-b"), empty("cr-c")]);
    assert_eq!((ids(&split.parts), ids(&split.duplicates)), (vec!["cr-a", "cr-b"], vec!["cr-c"]));
}

/// Before a block starts EC2 shows 0 instances: a bought block takes its count from the
/// offering, shared by the purchase's parts, and each part carries its share of the fee (the
/// budget is charged once; the parts' fees sum to it).
#[test]
fn a_block_bought_before_ec2_shows_its_count_takes_the_offerings() {
    let zero = Reservation { instance_count: 0, ..reservation(&[]) };
    let mut intent = Intent::new("p5-weekly", offering(false), 8, Vec::new(), t(1, 8, 0));
    intent.sent_at = Some(t(1, 9, 0));
    let b = Block::bought(&intent, &zero, t(1, 10, 0));
    assert_eq!((b.instance_count, b.fee), (2, Some(Money::usd(dec!(3072)).unwrap())));
    // An UltraServer purchase of 2 x 4 instances made two reservations, each showing 0.
    let ultra = Offering { instance_count: 8, ..offering(true) };
    let mut two = Intent::new("trn2", ultra, 16, Vec::new(), t(1, 8, 0));
    two.parts = vec!["cr-0000000000000000a".into(), "cr-0000000000000000b".into()];
    let parts: Vec<Block> = two
        .parts
        .iter()
        .map(|id| Block::bought(&two, &Reservation { id: id.clone(), ..zero.clone() }, t(1, 10, 0)))
        .collect();
    assert!(parts.iter().all(|p| p.instance_count == 4), "{parts:?}");
    let fees: Decimal = parts.iter().map(|p| p.fee.unwrap().amount()).sum();
    assert_eq!(fees, dec!(3072), "the parts' fees sum to the fee");
}

/// A block EC2 does not list is never booked payment-failed, whatever its payment deadline:
/// quiet while it may not be listed yet (`LISTING_GRACE` from its purchase), an anomaly after
/// it (its fee stays committed), and expired once it has ended. Only EC2's `payment-failed`
/// moves it there.
#[test]
fn a_pending_block_ec2_does_not_list_is_never_booked_failed() {
    let mut intent = Intent::new("p5-weekly", offering(false), 8, Vec::new(), t(1, 8, 0));
    intent.sent_at = Some(t(1, 9, 0));
    let b = Block { state: BlockState::PaymentPending, ..Block::bought(&intent, &reservation(&[]), t(1, 10, 0)) };
    let deadline = b.payment_deadline.unwrap();
    let listed_by = b.purchased_at + LISTING_GRACE;
    assert_eq!(b.transition(&Observed::NotFound, b.purchased_at), Transition::Stay, "not listed yet");
    assert_eq!(b.transition(&Observed::NotFound, listed_by - Duration::minutes(1)), Transition::Stay);
    assert!(matches!(b.transition(&Observed::NotFound, listed_by), Transition::Anomaly(_)));
    assert!(matches!(b.transition(&Observed::NotFound, deadline), Transition::Anomaly(_)), "never payment-failed");
    assert!(matches!(b.transition(&Observed::NotFound, b.end - Duration::minutes(1)), Transition::Anomaly(_)));
    assert_eq!(b.transition(&Observed::NotFound, b.end), Transition::Move { to: BlockState::Expired, end: b.end });
    let failed = Observed::Found {
        state: "payment-failed".into(),
        end: b.end,
        capacity_block_id: None,
        instance_count: 0,
        available: None,
    };
    assert_eq!(b.transition(&failed, deadline), Transition::Move { to: BlockState::PaymentFailed, end: b.end });
    // A same-day block: its deadline is minutes after the purchase, inside the grace.
    let same_day = Block { payment_deadline: Some(b.purchased_at + Duration::minutes(25)), ..b.clone() };
    assert_eq!(same_day.transition(&Observed::NotFound, b.purchased_at + Duration::minutes(30)), Transition::Stay);
}

/// A purchase of two UltraServers is one block to the rule's `max_blocks_held`, however many of
/// its parts are tracked yet; an adopted block counts alone; a failed one not at all.
#[test]
fn held_blocks_count_once_per_purchase() {
    let start = Utc.with_ymd_and_hms(2026, 12, 3, 0, 0, 0).unwrap();
    let part = |id: &str, intent: Option<&str>, state: BlockState| Block {
        reservation_id: id.into(),
        intent_id: intent.map(str::to_string),
        state,
        ..example(start, start + chrono::Duration::days(1))
    };
    let first = part("cr-1", Some("p5/cb-1"), BlockState::PaymentPending);
    assert_eq!(purchases_held([&first]), 1);
    let second = part("cr-2", Some("p5/cb-1"), BlockState::Scheduled);
    assert_eq!(purchases_held([&first, &second]), 1, "two parts of one purchase");
    let adopted = part("cr-3", None, BlockState::Active);
    let other = part("cr-4", Some("p5/cb-2"), BlockState::Active);
    assert_eq!(purchases_held([&first, &second, &adopted, &other]), 3);
    let failed = part("cr-5", Some("p5/cb-3"), BlockState::PaymentFailed);
    assert_eq!(purchases_held([&failed, &adopted]), 1);
}

#[test]
fn only_a_reservation_of_type_capacity_block_is_a_capacity_block() {
    assert!(reservation(&[]).is_capacity_block());
    let other = |t: Option<&str>| Reservation { reservation_type: t.map(str::to_string), ..reservation(&[]) };
    assert!(!other(Some("default")).is_capacity_block());
    assert!(!other(None).is_capacity_block());
}

#[test]
fn a_bought_block_is_charged_to_the_intents_budget_period() {
    let intent = Intent::new("p5-weekly", offering(false), 8, Vec::new(), t(1, 8, 0));
    let b = Block::bought(&intent, &reservation(&[]), t(1, 10, 0));
    assert_eq!(b.period, Some(Period::of(t(1, 8, 0))));
}

/// DescribeCapacityBlocks only ever adds the UltraServer kind: a block known as one stays one.
#[test]
fn a_blocks_kind_is_learned_never_forgotten() {
    let plain = example(t(3, 11, 30), t(5, 11, 30));
    assert!(plain.clone().with_kind(true).ultraserver);
    assert!(!plain.clone().with_kind(false).ultraserver);
    let ultra = Block { ultraserver: true, ..plain };
    assert!(ultra.with_kind(false).ultraserver);
}

/// Once EC2 shows a reservation's instances, the block counts those, not the offering's, and
/// its fee is its share of the purchase's, never more than the whole fee.
#[test]
fn a_bought_block_counts_the_instances_ec2_shows_and_never_carries_more_than_the_fee() {
    let intent = Intent::new("p5-weekly", offering(false), 8, Vec::new(), t(1, 8, 0));
    let fewer = Block::bought(&intent, &Reservation { instance_count: 1, ..reservation(&[]) }, t(1, 10, 0));
    assert_eq!((fewer.instance_count, fewer.fee), (1, Some(Money::usd(dec!(1536)).unwrap())));
    let more = Block::bought(&intent, &Reservation { instance_count: 3, ..reservation(&[]) }, t(1, 10, 0));
    assert_eq!((more.instance_count, more.fee), (3, Some(Money::usd(dec!(3072)).unwrap())));
}

/// The first reservation found is the purchase even when it shows more instances than the
/// offering; after the first that does not fit, none is a part, even one that would.
#[test]
fn the_first_reservation_is_always_a_part_and_none_after_a_duplicate_is() {
    let sized = |id: &str, n: u32| Reservation { instance_count: n, ..with_id(id, reservation(&[])) };
    let split = split_by_tag(&offering(false), vec![sized("cr-a", 4)]);
    assert_eq!((ids(&split.parts), split.duplicates.len()), (vec!["cr-a"], 0));
    let o = Offering { instance_count: 8, ..offering(true) };
    let split = split_by_tag(&o, vec![sized("cr-a", 4), sized("cr-b", 8), sized("cr-c", 4)]);
    assert_eq!((ids(&split.parts), ids(&split.duplicates)), (vec!["cr-a"], vec!["cr-b", "cr-c"]));
}

/// A purchase a person released counts until its offering's start, once even when EC2 lists it
/// after all (its block carries the intent).
#[test]
fn a_released_purchase_counts_until_its_start() {
    let start = Utc.with_ymd_and_hms(2026, 12, 3, 0, 0, 0).unwrap();
    let released = [crate::domain::budget::ReleasedHold { intent: "p5/cb-1".into(), until: start }];
    let listed = Block {
        reservation_id: "cr-1".into(),
        intent_id: Some("p5/cb-1".into()),
        state: BlockState::PaymentPending,
        ..example(start, start + chrono::Duration::days(1))
    };
    let before = start - chrono::Duration::minutes(1);
    assert_eq!(purchases_held_at([], &released, before), 1);
    assert_eq!(purchases_held_at([&listed], &released, before), 1, "listed after all: once");
    assert_eq!(purchases_held_at([], &released, start), 0, "past its start");
}

/// A family's quota counts the blocks held in its region and the purchases in flight, in vCPUs:
/// not a final block, another region or family, a closed intent, or an intent counted twice
/// once its block is tracked; a type of unknown vCPUs is counted apart.
#[test]
fn the_quota_held_counts_held_blocks_and_purchases_in_flight_once() {
    let east: Region = "us-east-1".parse().unwrap();
    let o = |id: &str, region: &str, ty: &str, count: u32| {
        let mut o = crate::domain::offering::example(id, region, t(3, 0, 0), Money::usd(dec!(100)).unwrap());
        o.instance_type = ty.parse().unwrap();
        o.instance_count = count;
        o
    };
    let intent = |o: Offering| {
        let mut i = Intent::new("r", o, 8, vec![], t(1, 0, 0));
        i.state = crate::domain::budget::IntentState::Sent;
        i
    };
    let bought = intent(o("cb-bought", "us-east-1", "p5.48xlarge", 2));
    let r = Reservation { instance_count: 2, ..reservation(&[]) };
    let mut held = Block::bought(&bought, &Reservation { region: east.clone(), ..r.clone() }, t(1, 1, 0));
    held.instance_type = "p5.48xlarge".parse().unwrap();
    let mut ended = held.clone();
    ended.intent_id = None;
    ended.state = BlockState::Expired;
    let mut west = held.clone();
    west.intent_id = None;
    west.region = "us-west-2".parse().unwrap();
    let in_flight = intent(o("cb-flight", "us-east-1", "p5.48xlarge", 1));
    let p5e = intent(o("cb-p5e", "us-east-1", "p5e.48xlarge", 1));
    let mut closed = intent(o("cb-closed", "us-east-1", "p5.48xlarge", 4));
    closed.state = crate::domain::budget::IntentState::Rejected;
    let blocks = [held, ended, west];
    let intents = [bought, in_flight, p5e, closed];
    // 2 x 192 held and 1 x 192 in flight; the bought intent is its block, counted once.
    assert_eq!(quota_held(&blocks, &intents, &east, "p5"), QuotaHeld { vcpus: 576, blocks: 2, unknown: 0 });
    assert_eq!(quota_held(&blocks, &intents, &"us-west-2".parse().unwrap(), "p5").blocks, 1);
    let mut odd = intents[1].clone();
    odd.offering.instance_type = "p5.24xlarge".parse().unwrap();
    assert_eq!(quota_held([], [&odd], &east, "p5"), QuotaHeld { vcpus: 0, blocks: 1, unknown: 1 });
}

/// A reservation carrying a recorded purchase's tag that the record does not name: a part EC2
/// listed late when it fits beside the named parts (an UltraServer of the two bought, a segment
/// not named yet), a second purchase when it does not (a third UltraServer, a segment already
/// named, an instance purchase already whole, a reservation unlike the offering).
#[test]
fn a_part_listed_after_its_purchase_was_recorded_is_told_from_a_second_purchase() {
    let two = Offering { instance_count: 8, ..offering(true) };
    let server = |id: &str| Reservation { instance_count: 4, ..with_id(id, reservation(&[])) };
    let (a, b) = (server("cr-a"), server("cr-b"));
    assert!(late_part(&two, &[NamedPart::from(&a)], &b), "the second UltraServer");
    assert!(!late_part(&two, &[NamedPart::from(&a), NamedPart::from(&b)], &server("cr-c")), "a third");
    assert!(late_part(&two, &[], &b), "nothing named: it fits");

    let whole = reservation(&[]);
    assert!(!late_part(&offering(false), &[NamedPart::from(&whole)], &with_id("cr-2", reservation(&[]))));
    let elsewhere = Reservation { availability_zone: "us-east-1b".into(), ..server("cr-b") };
    assert!(!late_part(&two, &[NamedPart::from(&a)], &elsewhere), "not what the offering makes");
    let later = Reservation { start: a.start + Duration::hours(1), ..server("cr-b") };
    assert!(!late_part(&two, &[NamedPart::from(&a)], &later), "another start");

    let segment = |zone: &str| crate::domain::offering::OfferingSegment {
        availability_zone: zone.into(),
        instance_type: a.instance_type.clone(),
        instance_count: 4,
        fee: Money::usd(dec!(1536)).unwrap(),
        local_zone: false,
    };
    let segmented = Offering { segments: vec![segment("us-east-1a"), segment("us-east-1b")], ..two };
    assert!(late_part(&segmented, &[NamedPart::from(&a)], &elsewhere), "the other segment");
    assert!(!late_part(&segmented, &[NamedPart::from(&a)], &server("cr-b")), "the named segment again");
    let block = Block::adopted(&a, true, t(1, 0, 0));
    assert!(late_part(&segmented, &[NamedPart::from(&block)], &elsewhere), "a named part as stored");
}
