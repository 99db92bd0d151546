use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use super::*;
use crate::domain::budget::BudgetCharge;
use crate::domain::extension::ExtensionOffer;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn usd(s: &str) -> Money {
    Money::parse(s, "USD").unwrap()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// An 8 x p5 one-day block of rule `rule`, charged `fee` to `month`, in `state`, with
/// `used_minutes` instance-minutes used.
fn block(id: &str, rule: &str, month: &str, fee: &str, state: BlockState, used_minutes: u64) -> Block {
    let start = t("2026-12-03T11:30:00Z");
    let mut b = crate::domain::block::example(start, start + Duration::days(1));
    b.reservation_id = id.into();
    b.rule_id = Some(rule.into());
    b.instance_count = 8;
    b.fee = Some(usd(fee));
    b.period = Period::parse(month);
    b.state = state;
    b.usage.used_instance_minutes = used_minutes;
    b.usage.sampled_at = (used_minutes > 0).then_some(start + Duration::hours(1));
    b
}

fn extension(reservation: &str, rule: &str, month: &str, fee: &str, state: ExtensionState) -> ExtensionIntent {
    let end = t("2026-12-04T11:30:00Z");
    ExtensionIntent {
        reservation_id: reservation.into(),
        rule_id: rule.into(),
        offer: ExtensionOffer {
            id: format!("cbx-{fee}"),
            reservation_id: reservation.into(),
            duration_hours: 24,
            start: end,
            end: end + Duration::days(1),
            fee: usd(fee),
        },
        state,
        created_at: end - Duration::hours(3),
        sent_at: None,
        reason: None,
        charges: vec![BudgetCharge {
            owner: BudgetOwner::Rule(rule.into()),
            period: Period::parse(month).unwrap(),
            limit: None,
            max_purchases: None,
        }],
    }
}

#[test]
fn a_month_counts_what_its_budgets_count_and_what_was_used() {
    let dec_ = "2026-12";
    let blocks = vec![
        // Expired, 182 of 192 instance-hours used, extended once (paid in December) and once
        // more (released: nothing paid).
        (
            block("cr-a", "p5", dec_, "4608.00", BlockState::Expired, 10_920),
            vec![
                extension("cr-a", "p5", dec_, "480.00", ExtensionState::Paid),
                extension("cr-a", "p5", dec_, "999.00", ExtensionState::Released),
            ],
        ),
        // Payment failed: given back, not counted.
        (block("cr-b", "p5", dec_, "4608.00", BlockState::PaymentFailed, 0), vec![]),
        // November's: not this month.
        (block("cr-c", "p5", "2026-11", "100.00", BlockState::Expired, 600), vec![]),
        // Another team's rule, still running, never sampled.
        (block("cr-d", "trn", dec_, "1000.00", BlockState::Active, 0), vec![]),
    ];
    let teams = [("p5".to_string(), "llm".to_string())].into();
    let rows = month(&Period::parse(dec_).unwrap(), &blocks, &teams);
    assert_eq!(rows.len(), 2);
    let p5 = &rows[0];
    assert_eq!((p5.rule.as_str(), p5.team.as_str(), p5.blocks, p5.open_blocks), ("p5", "llm", 1, 0));
    assert_eq!((p5.fees, p5.extensions, p5.spent), (usd("4608.00"), usd("480.00"), usd("5088.00")));
    // 8 instances x 8 accelerators x 24 h (the block as stored ends after one day).
    assert_eq!(p5.paid_accelerator_hours, dec("1536"));
    assert_eq!(p5.used_accelerator_hours, dec("1456"));
    assert_eq!(p5.utilization_percent, Some(dec("94.79")));
    // (4,608 + 480) / 1,456.
    assert_eq!(p5.per_used_accelerator_hour.unwrap().display(), "3.4945 USD");
    let trn = &rows[1];
    assert_eq!((trn.team.as_str(), trn.open_blocks, trn.unsampled_blocks), ("-", 1, 1));
    assert_eq!((trn.spent, trn.per_used_accelerator_hour), (usd("1000.00"), None));

    let teams = by_team(&rows);
    assert_eq!(
        teams.iter().map(|t| (t.team.as_str(), t.spent)).collect::<Vec<_>>(),
        [("-", usd("1000.00")), ("llm", usd("5088.00"))]
    );
}

/// A block bought by hand and adopted by the rule's tag (no fee known) is in the month it
/// starts in, with its hours and marked unpriced; the price per used hour is the priced blocks'.
#[test]
fn an_adopted_block_is_shown_with_its_hours_and_no_fee() {
    let dec_ = "2026-12";
    let mut adopted = block("cr-h", "p5", dec_, "1.00", BlockState::Expired, 10_920);
    (adopted.fee, adopted.period) = (None, None);
    let blocks =
        vec![(block("cr-a", "p5", dec_, "4608.00", BlockState::Expired, 10_920), vec![]), (adopted.clone(), vec![])];
    let rows = month(&Period::parse(dec_).unwrap(), &blocks, &Default::default());
    let p5 = &rows[0];
    assert_eq!((p5.blocks, p5.unpriced_blocks, p5.spent), (2, 1, usd("4608.00")));
    assert_eq!((p5.paid_accelerator_hours, p5.used_accelerator_hours), (dec("3072"), dec("2912")));
    // 4,608 over the priced block's 1,456 used hours, not over both blocks' 2,912.
    assert_eq!(p5.per_used_accelerator_hour.unwrap().display(), "3.1648 USD");
    // Another month: not there.
    assert!(month(&Period::parse("2027-01").unwrap(), &[(adopted, vec![])], &Default::default()).is_empty());
}

#[test]
fn an_extension_paid_in_a_later_month_is_that_months_spend() {
    let blocks = vec![(
        block("cr-a", "p5", "2026-11", "4608.00", BlockState::Expired, 0),
        vec![extension("cr-a", "p5", "2026-12", "480.00", ExtensionState::Paid)],
    )];
    let rows = month(&Period::parse("2026-12").unwrap(), &blocks, &Default::default());
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].blocks, rows[0].spent), (0, usd("480.00")));
    let nov = month(&Period::parse("2026-11").unwrap(), &blocks, &Default::default());
    assert_eq!((nov[0].blocks, nov[0].spent), (1, usd("4608.00")));
}

#[test]
fn months_parse_as_people_write_them() {
    assert_eq!(Period::parse("2026-12").map(|p| p.as_str().to_string()), Some("2026-12".into()));
    for bad in ["2026-13", "2026-00", "26-12", "2026-1", "2026/12", "december"] {
        assert_eq!(Period::parse(bad), None, "{bad}");
    }
    assert_eq!(Period::parse("2026-01").unwrap().previous().as_str(), "2025-12");
    assert_eq!(Period::parse("2026-12").unwrap().previous().as_str(), "2026-11");
}

/// A block half-way through (active, sampled 12 h into its day, every instance running so far)
/// is counted over the same hours for its use and its price: its elapsed half and that half of
/// its fee, not its whole fee over half its use. Its paid hours stay the whole block's.
#[test]
fn a_block_half_way_through_is_priced_over_the_hours_elapsed() {
    let dec_ = "2026-12";
    let mut half = block("cr-h", "p5", dec_, "4608.00", BlockState::Active, 8 * 12 * 60);
    half.usage.sampled_at = Some(half.start + Duration::hours(12));
    let rows = month(&Period::parse(dec_).unwrap(), &[(half, vec![])], &Default::default());
    let p5 = &rows[0];
    // 8 instances x 8 accelerators: 1,536 paid over the day, 768 elapsed, 768 used.
    assert_eq!((p5.paid_accelerator_hours, p5.elapsed_accelerator_hours), (dec("1536"), dec("768")));
    assert_eq!(p5.used_accelerator_hours, dec("768"));
    assert_eq!(p5.utilization_percent, Some(dec("100")));
    // 2,304 (half of 4,608) over 768 used: 3.00, as a block used to its end is priced.
    assert_eq!(p5.per_used_accelerator_hour.unwrap().display(), "3.0000 USD");
    // Spent is what the budget counts: the whole fee.
    assert_eq!(p5.spent, usd("4608.00"));
}
