use chrono::TimeZone;
use rust_decimal_macros::dec;

use super::*;
use crate::domain::money::Money;

fn t(d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, 11, 30, 0).unwrap()
}

fn offering(id: &str, start: u32) -> Offering {
    crate::domain::offering::example(id, "us-east-1", t(start), Money::usd(dec!(576)).unwrap())
}

#[test]
fn id_stability_tells_the_two_readings_and_a_moved_market_apart() {
    let first = [offering("cb-1", 3), offering("cb-2", 4)];
    let stable = id_stability("ids", &first, &[offering("cb-1", 3)]);
    assert_eq!(stable.verdict, Verdict::Ok);
    assert!(stable.seen.contains("kept their ids"), "{stable:?}");
    let minted = id_stability("ids", &first, &[offering("cb-9", 3)]);
    assert_eq!(minted.verdict, Verdict::Ok);
    assert!(minted.seen.contains("minted per answer"), "{minted:?}");
    assert_eq!(id_stability("ids", &first, &[offering("cb-9", 9)]).verdict, Verdict::Warn);
    assert_eq!(id_stability("ids", &first, &[]).verdict, Verdict::NotChecked);
}

#[test]
fn a_scheduled_blocks_count_is_read_from_ec2s_tag_while_it_shows_0() {
    let tag = "aws:ec2capacityreservation:incrementalRequestedQuantity";
    let r = Reservation {
        id: "cr-0123456789abcdef0".into(),
        arn: None,
        region: "us-east-1".parse().unwrap(),
        availability_zone: "us-east-1a".into(),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: 0,
        start: t(3),
        end: t(4),
        state: "scheduled".into(),
        reservation_type: Some("capacity-block".into()),
        tags: [(tag.to_string(), "2".to_string())].into(),
        capacity_block_id: None,
    };
    // The adapter reads the tag while EC2 shows 0: the block reads as 2.
    let read = Reservation { instance_count: 2, ..r.clone() };
    let f = scheduled_block("c", &read, tag);
    assert_eq!(f.verdict, Verdict::Ok);
    assert!(f.seen.contains("2 instance(s)") && f.seen.contains("incrementalRequestedQuantity = 2"), "{f:?}");
    let bare = Reservation { tags: Default::default(), ..r.clone() };
    let f = scheduled_block("c", &bare, tag);
    assert_eq!(f.verdict, Verdict::Warn);
    assert!(f.seen.contains("absent"), "{f:?}");
    let report = Preflight { at: t(1), findings: vec![scheduled_block("c", &read, tag)] };
    assert!(report.passed());
}

#[test]
fn ram_sharing_is_checked_only_for_rules_that_share() {
    assert_eq!(ram_sharing(&[], Ok(false)).verdict, Verdict::Ok);
    assert_eq!(ram_sharing(&["a"], Ok(true)).verdict, Verdict::Ok);
    let off = ram_sharing(&["a", "b"], Ok(false));
    assert_eq!(off.verdict, Verdict::Fail);
    assert!(off.seen.contains("a, b") && off.todo.unwrap().contains("enable-sharing-with-aws-organization"));
    let denied = ram_sharing(&["a"], Err("AccessDeniedException: You don't have permissions".into()));
    assert_eq!(denied.verdict, Verdict::NotChecked);
    assert!(denied.todo.unwrap().contains("list-aws-service-access-for-organization"));
    assert_eq!(ram_sharing(&["a"], Err("AWSOrganizationsNotInUseException".into())).verdict, Verdict::Fail);
    assert_eq!(ram_sharing(&["a"], Err("timeout".into())).verdict, Verdict::NotChecked);
}
