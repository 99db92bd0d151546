use super::*;
use crate::domain::money::Money;
use chrono::TimeZone;
use rust_decimal_macros::dec;

/// Day `d` of 2026 at `h` o'clock: the history starts on 1 January.
fn at(d: i64, h: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::days(d) + Duration::hours(h)
}

/// A rule for 1 x each of `types` for a day in `regions`, up to `threshold` per
/// accelerator-hour, 100000 a month, `extra` (more of the rule file) after it. Also the
/// market-move workflow's tests' rule.
pub(crate) fn rule(regions: &[&str], types: &[&str], threshold: &str, extra: &str) -> Rule {
    let list = |v: &[&str]| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    Rule::from_toml(
        &format!(
            r#"
id = "mm"
regions = [{}]
instance_types = [{}]
instance_counts = [1]
durations_days = [1]
max_price_per_accelerator_hour = "{threshold}"
monthly_budget = "100000"
start_window = {{ earliest_in_days = 1, latest_in_days = 14 }}
{extra}
"#,
            list(regions),
            list(types)
        ),
        at(0, 0),
    )
    .unwrap()
}

/// 1 x `ty` (8 accelerators) for a day from two days after it was seen, at `price` per
/// accelerator-hour, seen at `seen`.
fn seen(region: &str, ty: &str, seen: DateTime<Utc>, price: Decimal, n: usize) -> Sample {
    let start = seen.date_naive().and_hms_opt(11, 30, 0).unwrap().and_utc() + Duration::days(2);
    let fee = Money::parse(&(price * dec!(192)).round_dp(2).to_string(), "USD").unwrap();
    let id = format!("cb-{region}-{ty}-{}-{n}", seen.timestamp());
    let example = crate::domain::offering::example(&id, region, start, fee);
    let offering = Offering { instance_type: ty.parse().expect("a valid type"), ..example };
    Sample { seen_at: seen, offering, accelerators_per_instance: 8 }
}

/// Four scans a day from day `from` to day `to` (exclusive), each seeing two offerings: the
/// level `price(day)` and one 5 % dearer.
fn days(region: &str, ty: &str, from: i64, to: i64, price: impl Fn(i64) -> Decimal) -> Vec<Sample> {
    let mut out = Vec::new();
    for d in from..to {
        for h in [0, 6, 12, 18] {
            let p = price(d);
            out.push(seen(region, ty, at(d, h), p, 0));
            out.push(seen(region, ty, at(d, h), (p * dec!(1.05)).round_dp(4), 1));
        }
    }
    out
}

fn step_notes(notes: &[Note]) -> Vec<(String, Decimal)> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Stepped { step, .. } => Some((n.milestone(), step.percent())),
            Note::Drought(_) => None,
        })
        .collect()
}

/// Every step key any daily run from `from` to `to` would announce: what the outbox sends.
fn announced(rule: &Rule, samples: &[Sample], from: i64, to: i64) -> BTreeMap<String, Decimal> {
    (from..=to).flat_map(|d| step_notes(&notes(rule, samples, &[], at(d, 23)))).collect()
}

#[test]
fn the_early_2026_step_of_15_percent_is_found_once() {
    // p5e in us-east-1: 4.00 (with a little daily spread), then 4.60 from day 20.
    let spread = [dec!(0), dec!(0.04), dec!(-0.03), dec!(0.02)];
    let h = days("us-east-1", "p5e.48xlarge", 0, 40, |d| {
        if d < 20 { dec!(4.00) + spread[(d % 4) as usize] } else { dec!(4.60) }
    });
    let r = rule(&["us-east-1"], &["p5e.48xlarge"], "4.10", "");
    let all = announced(&r, &h, 0, 40);
    assert_eq!(all.len(), 1, "{all:?}");
    let (key, pct) = all.into_iter().next().unwrap();
    assert_eq!(key, "market-step-us-east-1-p5e.48xlarge-2026-01-21");
    assert!(pct >= dec!(14) && pct <= dec!(16), "{pct}");
    // Not before the new level held for three days.
    assert!(step_notes(&notes(&r, &h, &[], at(21, 23))).is_empty());
    assert_eq!(step_notes(&notes(&r, &h, &[], at(22, 23))).len(), 1);
}

#[test]
fn the_july_steps_of_20_percent_outside_and_32_percent_inside_the_us_are_found_once_each() {
    let mut h = days("us-east-1", "p5.48xlarge", 0, 40, |d| if d < 15 { dec!(3.00) } else { dec!(3.96) });
    h.extend(days("eu-north-1", "p5.48xlarge", 0, 40, |d| if d < 18 { dec!(3.20) } else { dec!(3.84) }));
    let r = rule(&["us-east-1", "eu-north-1"], &["p5.48xlarge"], "3.10", "drought_days = 0");
    let all = announced(&r, &h, 0, 40);
    assert_eq!(
        all.into_iter().collect::<Vec<_>>(),
        vec![
            ("market-step-eu-north-1-p5.48xlarge-2026-01-19".to_string(), dec!(20.0)),
            ("market-step-us-east-1-p5.48xlarge-2026-01-16".to_string(), dec!(32.0)),
        ]
    );
    let Note::Stepped { step, market, .. } = &notes(&r, &h, &[], at(19, 0))[0] else { panic!() };
    assert_eq!((step.old, step.new), (dec!(3.00), dec!(3.96)));
    assert_eq!(market.describe(), "p5.48xlarge in us-east-1");
}

#[test]
fn a_second_step_is_a_new_episode() {
    let h = days("us-east-1", "p5.48xlarge", 0, 45, |d| match d {
        ..10 => dec!(2.50),
        10..25 => dec!(2.875),
        _ => dec!(3.45),
    });
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "2.60", "drought_days = 0");
    let keys: Vec<String> = announced(&r, &h, 0, 45).into_keys().collect();
    assert_eq!(
        keys,
        vec!["market-step-us-east-1-p5.48xlarge-2026-01-11", "market-step-us-east-1-p5.48xlarge-2026-01-26"]
    );
}

#[test]
fn a_single_expensive_offering_or_day_is_not_a_step() {
    let mut h = days("us-east-1", "p5.48xlarge", 0, 30, |_| dec!(3.00));
    // One offering at +40 % every day: the level is the cheapest, it never moves.
    for d in 0..30 {
        h.push(seen("us-east-1", "p5.48xlarge", at(d, 3), dec!(4.20), 9));
    }
    // And one day when only dear offerings were seen.
    h.retain(|s| s.seen_at.date_naive() != at(12, 0).date_naive());
    h.push(seen("us-east-1", "p5.48xlarge", at(12, 3), dec!(4.20), 9));
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "3.10", "drought_days = 0");
    assert!(announced(&r, &h, 0, 30).is_empty());
    // Two such days in a row are still not three.
    h.retain(|s| s.seen_at.date_naive() != at(13, 0).date_naive());
    h.push(seen("us-east-1", "p5.48xlarge", at(13, 3), dec!(4.20), 9));
    assert!(announced(&r, &h, 0, 30).is_empty());
}

#[test]
fn noise_under_ten_percent_is_not_a_step() {
    let wobble = [dec!(0), dec!(0.08), dec!(-0.07), dec!(0.09), dec!(0.05), dec!(-0.09), dec!(0.07)];
    let h = days("us-east-1", "p5.48xlarge", 0, 40, |d| dec!(3.00) * (Decimal::ONE + wobble[(d % 7) as usize]));
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "3.10", "drought_days = 0");
    assert!(announced(&r, &h, 0, 40).is_empty());
    // A fall is a step as well as a rise.
    let h = days("us-east-1", "p5.48xlarge", 0, 20, |d| if d < 10 { dec!(3.00) } else { dec!(2.40) });
    assert_eq!(announced(&r, &h, 0, 20).into_values().collect::<Vec<_>>(), vec![dec!(-20.0)]);
}

#[test]
fn an_old_step_is_not_news_and_other_types_are_not_the_rules() {
    let h = days("us-east-1", "p5.48xlarge", 0, 40, |d| if d < 5 { dec!(3.00) } else { dec!(3.60) });
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "3.10", "drought_days = 0");
    // The step of day 5, first looked for on day 30, is older than STEP_NEWS.
    assert!(step_notes(&notes(&r, &h, &[], at(30, 0))).is_empty());
    let other = rule(&["us-east-1"], &["p5e.48xlarge"], "3.10", "drought_days = 0");
    assert!(announced(&other, &h, 0, 40).is_empty());
}

fn droughts(notes: &[Note]) -> Vec<&Drought> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Drought(d) => Some(d),
            Note::Stepped { .. } => None,
        })
        .collect()
}

#[test]
fn a_drought_is_told_after_its_days_with_the_cheapest_seen_and_what_it_would_have_bought() {
    // Under the threshold until day 9 (2.90), then 3.40 and dearer from day 10.
    let h = days("us-east-1", "p5.48xlarge", 0, 30, |d| if d < 10 { dec!(2.90) } else { dec!(3.405) });
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "3.00", "");
    assert_eq!(r.drought_days, 7);
    assert!(droughts(&notes(&r, &h, &[], at(16, 23))).is_empty(), "6 days and 23 hours");
    let n = notes(&r, &h, &[], at(17, 1));
    let d = droughts(&n);
    assert_eq!(d.len(), 1);
    let d = d[0];
    assert_eq!(d.since, at(10, 0));
    assert_eq!(d.last_under, Some(at(9, 18)));
    assert_eq!(d.days, 7);
    assert_eq!(d.cheapest, dec!(3.405));
    assert_eq!(d.tried, dec!(3.41));
    assert_eq!(d.would_have_bought.len(), 1, "one purchase a month: {:?}", d.would_have_bought);
    assert_eq!(d.would_have_bought[0].at, at(10, 0));
    assert_eq!(n.iter().find(|n| matches!(n, Note::Drought(_))).unwrap().milestone(), "drought-3-2026-01-11");
    // Told once: a note written after the last offering under the threshold holds the episode.
    assert!(droughts(&notes(&r, &h, &[at(17, 1)], at(25, 0))).is_empty());
    // Even once the last offering under the threshold is older than the history read.
    assert!(droughts(&notes(&r, &h, &[at(17, 1)], at(9, 0) + lookback(&r) + Duration::days(2))).is_empty());
}

#[test]
fn a_drought_ends_when_an_offering_is_under_the_threshold_and_another_may_follow() {
    let mut h = days("us-east-1", "p5.48xlarge", 0, 40, |_| dec!(3.40));
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "3.00", "");
    let first = droughts(&notes(&r, &h, &[], at(8, 0))).into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].last_under, None);
    let told = [at(8, 0)];
    // One offering at the threshold on day 12 ends the episode (an offering at it is bought).
    h.push(seen("us-east-1", "p5.48xlarge", at(12, 3), dec!(3.00), 7));
    assert!(droughts(&notes(&r, &h, &told, at(18, 0))).is_empty(), "under 7 days since");
    let later = notes(&r, &h, &told, at(19, 7));
    let second = droughts(&later);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].since, at(12, 6));
    assert_ne!(Note::Drought(second[0].clone()).milestone(), Note::Drought(first[0].clone()).milestone());
}

#[test]
fn no_drought_without_offerings_when_off_or_for_a_disabled_rule() {
    let h = days("us-east-1", "p5.48xlarge", 0, 20, |_| dec!(3.40));
    assert!(droughts(&notes(&rule(&["us-east-1"], &["p5.48xlarge"], "3.00", ""), &[], &[], at(20, 0))).is_empty());
    let off = rule(&["us-east-1"], &["p5.48xlarge"], "3.00", "drought_days = 0");
    assert!(droughts(&notes(&off, &h, &[], at(20, 0))).is_empty());
    let disabled = rule(&["us-east-1"], &["p5.48xlarge"], "3.00", "enabled = false");
    assert!(notes(&disabled, &h, &[], at(20, 0)).is_empty());
    // Offerings the rule would never take (another count) are no drought of its own.
    let two = rule(&["us-east-1"], &["p5.48xlarge"], "3.00", "");
    let two = Rule { instance_counts: vec![2], ..two };
    assert!(droughts(&notes(&two, &h, &[], at(20, 0))).is_empty());
}

#[test]
fn keys_parse_as_notice_keys() {
    use crate::domain::outbox_key::{KeyKind, OutboxKey};
    let h = days("us-east-1", "p5.48xlarge", 0, 20, |d| if d < 5 { dec!(3.00) } else { dec!(3.60) });
    let r = rule(&["us-east-1"], &["p5.48xlarge"], "2.95", "drought_days = 5");
    let n = notes(&r, &h, &[], at(12, 0));
    assert_eq!(n.len(), 2, "{n:?}");
    for note in &n {
        let key = OutboxKey::notice(note.milestone()).unwrap();
        assert!(matches!(OutboxKey::parse(key.as_str()).unwrap().kind(), KeyKind::Notice(_)));
    }
    assert!(n[1].milestone().starts_with(&drought_prefix(dec!(2.950))));
}

#[test]
fn a_region_is_checked_on_the_first_run_of_each_hour() {
    assert!(due(None, at(3, 5)));
    assert!(!due(Some(at(3, 5)), at(3, 5) + Duration::minutes(54)));
    assert!(due(Some(at(3, 5) + Duration::minutes(59)), at(3, 6)));
    assert!(due(Some(at(2, 5)), at(3, 5)), "the same hour of another day");
}
