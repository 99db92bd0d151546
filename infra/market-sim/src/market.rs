//! The offer side of the market: which Capacity Block offerings exist at a given sim time,
//! what they cost, and their stable ids. Pure functions of (scenario, now, query).

use std::cmp::Ordering;
use std::collections::HashSet;

use chrono::{DateTime, Duration, NaiveTime, Utc};
use rust_decimal::{Decimal, RoundingStrategy};

use crate::instance_types;
use crate::rng::stable_id;
use crate::scenario::{HealthStep, MarketLine, PaymentOutcome, Scenario, UsageStep, ZoneType};
pub use crate::sellable::valid_duration_days;
use crate::wire::error::ApiError;

/// Blocks start (and so end) at 11:30 UTC.
pub const START_TIME: NaiveTime = match NaiveTime::from_hms_opt(11, 30, 0) {
    Some(t) => t,
    None => panic!("11:30 is a valid time"),
};
/// Earliest start: about 30 minutes ahead.
pub const MIN_LEAD_MINUTES: i64 = 30;
/// Latest start: 8 weeks ahead.
pub const MAX_LEAD_DAYS: i64 = 56;
/// Same-day blocks start on a 5-minute boundary.
pub const SAME_DAY_STEP_SECS: i64 = 300;

/// CapacityDurationHours -> days, rejecting what the market does not sell.
pub fn duration_days_from_hours(hours: i64, param: &str) -> Result<i64, ApiError> {
    if hours > 0 && hours % 24 == 0 && valid_duration_days(hours / 24) {
        Ok(hours / 24)
    } else {
        Err(ApiError::invalid_value(format!(
            "Value ({hours}) for parameter {param} is invalid. Capacity Block durations are 24-336 hours in 24-hour steps, then 168-hour steps up to 4368 hours."
        )))
    }
}

/// Exact fee: price x accelerators x instances x hours, rounded to cents.
pub fn upfront_fee(usd_per_accel_hour: Decimal, accelerators: u32, count: u32, hours: i64) -> Decimal {
    upfront_fee_minutes(usd_per_accel_hour, accelerators, count, hours * 60)
}

/// Exact fee of a block lasting `minutes`: price x accelerators x instances x minutes / 60,
/// rounded half away from zero to cents. A quotient that does not terminate is not a midpoint,
/// and Decimal's 28 digits decide its rounding exactly.
pub fn upfront_fee_minutes(usd_per_accel_hour: Decimal, accelerators: u32, count: u32, minutes: i64) -> Decimal {
    let units = Decimal::from(i64::from(accelerators) * i64::from(count) * minutes);
    let mut fee = (usd_per_accel_hour * units / Decimal::from(60))
        .round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
    fee.rescale(2);
    fee
}

/// The price step in force at `now`: (step index, price). None before the first step.
pub fn price_at(line: &MarketLine, now: DateTime<Utc>) -> Option<(usize, Decimal)> {
    line.price.iter().enumerate().rev().find(|(_, p)| p.from <= now).map(|(i, p)| (i, p.usd_per_accelerator_hour))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Offering {
    pub id: String,
    pub region: String,
    pub instance_type: String,
    pub availability_zone: String,
    pub zone_type: ZoneType,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Whole hours of the block; `duration_minutes` holds the rest (0..=59).
    pub duration_hours: i64,
    pub duration_minutes: i64,
    /// The price step the fee was computed from, per accelerator-hour (exact, before the fee's
    /// rounding to cents).
    pub usd_per_accelerator_hour: Decimal,
    pub upfront_fee: Decimal,
    pub currency: String,
    /// The line's payment override, carried to the purchase.
    pub payment: Option<PaymentOutcome>,
    /// An UltraServer offering: its type and how many UltraServers (`instance_count` is the
    /// total of their instances).
    pub ultraserver: Option<UltraServers>,
    /// The line's health steps, carried to the reservations it becomes.
    pub health: Vec<HealthStep>,
    /// The line's usage steps (instances running), carried likewise.
    pub usage: Vec<UsageStep>,
    /// A segmented offering's blocks (empty for one block): the top-level fields are the first
    /// segment's, except `instance_count`, also the first's, and `upfront_fee`, the total.
    pub segments: Vec<Segment>,
}

/// One block of a segmented offering, bought as a reservation of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub instance_type: String,
    pub availability_zone: String,
    pub instance_count: u32,
    pub upfront_fee: Decimal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UltraServers {
    pub ultraserver_type: String,
    pub count: u32,
    /// Instances in one UltraServer.
    pub instances_each: u32,
}

/// The order of an answer: cheapest per accelerator-hour first (the exact price, i.e. the
/// upfront fee per accelerator-minute before its rounding to cents); ties go to the earliest
/// start, then the availability zone name, then the instance count, then the offering id.
pub fn cheapest_first(a: &Offering, b: &Offering) -> Ordering {
    a.usd_per_accelerator_hour
        .cmp(&b.usd_per_accelerator_hour)
        .then_with(|| a.start.cmp(&b.start))
        .then_with(|| a.availability_zone.cmp(&b.availability_zone))
        .then_with(|| a.instance_count.cmp(&b.instance_count))
        .then_with(|| a.id.cmp(&b.id))
}

/// What one DescribeCapacityBlockOfferings answer holds: the `cap` cheapest offerings (0 = all)
/// of a list already in `cheapest_first` order.
pub fn recommend(mut all: Vec<Offering>, cap: u32) -> Vec<Offering> {
    if cap > 0 {
        all.truncate(cap as usize);
    }
    all
}

#[derive(Debug, Clone, Default)]
pub struct OfferingQuery {
    pub region: String,
    pub duration_days: i64,
    pub instance_type: Option<String>,
    pub instance_count: Option<u32>,
    pub start_range: Option<DateTime<Utc>>,
    pub end_range: Option<DateTime<Utc>>,
    /// Also offer the same-day closest-match blocks (see `same_day_windows`).
    pub same_day: bool,
    /// AllAvailabilityZones=true: also Local Zones the account has not opted into.
    pub all_zones: bool,
    /// UltraserverType / UltraserverCount: only that UltraServer type's offerings.
    pub ultraserver_type: Option<String>,
    pub ultraserver_count: Option<u32>,
    /// InstanceTypePreferences: offerings of any of these types, and segmented offerings whose
    /// every segment is of one of them.
    pub instance_types: Vec<String>,
    /// A one-type question (`instance_type`) is also answered the segmented offerings whose
    /// first segment is of that type (`segmented_for_one_type = "first_segment"`).
    pub segmented_for_one_type: bool,
}

/// (instance count, UltraServers) pairs a line offers for a query: an instance line its
/// `counts` (never with UltraserverType); an UltraServer line its `ultraserver_counts` when
/// the query names its type (with or without its instance type) or names no type at all
/// (InstanceCount then compares with the total of instances).
fn line_counts(line: &MarketLine, q: &OfferingQuery) -> Vec<(u32, Option<UltraServers>)> {
    if !line.segments.is_empty() {
        return segmented_counts(line, q);
    }
    let asked_type = |t: &str| {
        q.instance_type.as_deref().is_none_or(|a| a == t)
            && (q.instance_types.is_empty() || q.instance_types.iter().any(|a| a == t))
    };
    match (&line.ultraserver_type, &q.ultraserver_type) {
        (None, None) if asked_type(&line.instance_type) => {
            line.counts.iter().filter(|&&c| q.instance_count.is_none_or(|qc| qc == c)).map(|&c| (c, None)).collect()
        }
        (Some(u), asked)
            if asked.as_ref().is_none_or(|a| a == u)
                && (asked.is_some() || q.instance_type.is_none())
                && q.instance_type.as_ref().is_none_or(|t| *t == line.instance_type) =>
        {
            let each = instance_types::ultraserver(u).map_or(0, |i| i.instances);
            line.ultraserver_counts()
                .into_iter()
                .filter(|&n| q.ultraserver_count.is_none_or(|qn| qn == n))
                .filter(|&n| q.instance_count.is_none_or(|qc| qc == n * each))
                .map(|n| (n * each, Some(UltraServers { ultraserver_type: u.clone(), count: n, instances_each: each })))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// A segmented line's one count (the total of its instances) when the question takes it: a
/// preference list naming every segment's type, a one-type question under
/// `segmented_for_one_type` naming the first segment's, or a question naming no type; never an
/// UltraServer search. InstanceCount compares with the total.
fn segmented_counts(line: &MarketLine, q: &OfferingQuery) -> Vec<(u32, Option<UltraServers>)> {
    let total: u32 = line.segments.iter().map(|s| s.count).sum();
    let typed = match (&q.instance_type, q.instance_types.is_empty()) {
        (Some(t), _) => q.segmented_for_one_type && *t == line.instance_type,
        (None, false) => line.segments.iter().all(|s| q.instance_types.contains(&s.instance_type)),
        (None, true) => true,
    };
    if typed && q.ultraserver_type.is_none() && q.instance_count.is_none_or(|c| c == total) {
        vec![(total, None)]
    } else {
        Vec::new()
    }
}

/// Start times a line offers at `now`: 11:30 UTC on (today + start_day), kept if at least 30
/// minutes and at most 8 weeks ahead.
pub fn start_times(line: &MarketLine, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let today = now.date_naive();
    let mut v: Vec<DateTime<Utc>> = line
        .start_days
        .iter()
        .map(|&d| (today + Duration::days(i64::from(d))).and_time(START_TIME).and_utc())
        .filter(|s| *s >= now + Duration::minutes(MIN_LEAD_MINUTES) && *s <= now + Duration::days(MAX_LEAD_DAYS))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The start of same-day blocks: now + 30 minutes, rounded up to the next multiple of 5 minutes.
pub fn same_day_start(now: DateTime<Utc>) -> DateTime<Utc> {
    let t = now + Duration::minutes(MIN_LEAD_MINUTES);
    let secs = t.timestamp();
    let floor = secs - secs.rem_euclid(SAME_DAY_STEP_SECS);
    let start = if floor == secs && t.timestamp_subsec_nanos() == 0 { secs } else { floor + SAME_DAY_STEP_SECS };
    DateTime::from_timestamp(start, 0).unwrap_or(t)
}

/// The latest 11:30 UTC at or before `t`.
fn latest_end_at_or_before(t: DateTime<Utc>) -> DateTime<Utc> {
    let same_day = t.date_naive().and_time(START_TIME).and_utc();
    if same_day <= t { same_day } else { same_day - Duration::days(1) }
}

/// Same-day closest-match blocks for a duration of `days`: (start, end) pairs. All blocks end at
/// 11:30 UTC, so a block starting at S = `same_day_start(now)` comes slightly shorter (ending
/// at the latest 11:30 <= S + days) and slightly longer (24 h later). None when S is 11:30
/// itself (the ordinary offerings cover it).
pub fn same_day_windows(now: DateTime<Utc>, days: i64) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let start = same_day_start(now);
    if start.time() == START_TIME {
        return Vec::new();
    }
    let shorter = latest_end_at_or_before(start + Duration::days(days));
    [shorter, shorter + Duration::days(1)].into_iter().filter(|end| *end > start).map(|end| (start, end)).collect()
}

/// `duration` is the duration in hours for the 11:30 blocks (the ids they always had) and
/// `{h}h{m}m-{end}` for same-day blocks.
fn offering_id(
    region: &str,
    itype: &str,
    count: u32,
    duration: &str,
    az: &str,
    start: DateTime<Utc>,
    step: usize,
) -> String {
    stable_id("cb-", &format!("{region}|{itype}|{count}|{duration}|{az}|{}|{step}", start.timestamp()))
}

/// Every offering matching the query at `now`, in `cheapest_first` order, without duplicate ids.
pub fn offerings(scenario: &Scenario, q: &OfferingQuery, now: DateTime<Utc>) -> Vec<Offering> {
    let mut out = Vec::new();
    let hours = q.duration_days * 24;
    for line in scenario.market.iter().filter(|l| l.region == q.region) {
        let counts = line_counts(line, q);
        if counts.is_empty() {
            continue;
        }
        if !line.durations_days.iter().any(|&d| i64::from(d) == q.duration_days) {
            continue;
        }
        let (Some((step, price)), Some(accel)) =
            (price_at(line, now), instance_types::accelerators(&line.instance_type))
        else {
            continue;
        };
        let mut windows: Vec<(DateTime<Utc>, DateTime<Utc>, String)> =
            start_times(line, now).into_iter().map(|s| (s, s + Duration::hours(hours), hours.to_string())).collect();
        if q.same_day {
            windows.extend(same_day_windows(now, q.duration_days).into_iter().map(|(s, e)| {
                let m = (e - s).num_minutes();
                (s, e, format!("{}h{}m-{}", m / 60, m % 60, e.timestamp()))
            }));
        }
        for (start, end, duration) in windows {
            if q.start_range.is_some_and(|r| start < r) || q.end_range.is_some_and(|r| end > r) {
                continue;
            }
            let minutes = (end - start).num_minutes();
            if !line.segments.is_empty() {
                out.extend(segmented_offering(line, step, price, (start, end, &duration)));
                continue;
            }
            for az in &line.azs {
                if line.zone_type == ZoneType::LocalZone && !q.all_zones && !scenario.opted_in(&q.region, az) {
                    continue;
                }
                for (count, ultra) in &counts {
                    let count = *count;
                    // Instance lines keep the ids they always had.
                    let id = match ultra {
                        None => offering_id(&line.region, &line.instance_type, count, &duration, az, start, step),
                        Some(u) => {
                            let product = format!("{}|{}", u.ultraserver_type, line.instance_type);
                            offering_id(&line.region, &product, u.count, &duration, az, start, step)
                        }
                    };
                    out.push(Offering {
                        id,
                        region: line.region.clone(),
                        instance_type: line.instance_type.clone(),
                        availability_zone: az.clone(),
                        zone_type: line.zone_type,
                        instance_count: count,
                        start,
                        end,
                        duration_hours: minutes / 60,
                        duration_minutes: minutes % 60,
                        usd_per_accelerator_hour: price,
                        upfront_fee: upfront_fee_minutes(price, accel, count, minutes),
                        currency: line.currency.clone(),
                        payment: line.payment,
                        ultraserver: ultra.clone(),
                        health: line.health.clone(),
                        usage: line.usage.clone(),
                        segments: Vec::new(),
                    });
                }
            }
        }
    }
    out.sort_by(cheapest_first);
    let mut seen = HashSet::new();
    out.retain(|o| seen.insert(o.id.clone()));
    out
}

/// The one offering a segmented line makes for a window: each segment priced at the line's
/// price on its own type, the offering's fee their sum, its top-level fields the first
/// segment's (README, "Segmented offerings").
fn segmented_offering(
    line: &MarketLine,
    step: usize,
    price: Decimal,
    (start, end, duration): (DateTime<Utc>, DateTime<Utc>, &str),
) -> Option<Offering> {
    let minutes = (end - start).num_minutes();
    let mut segments = Vec::new();
    for s in &line.segments {
        let accel = instance_types::accelerators(&s.instance_type)?;
        segments.push(Segment {
            instance_type: s.instance_type.clone(),
            availability_zone: s.az.clone(),
            instance_count: s.count,
            upfront_fee: upfront_fee_minutes(price, accel, s.count, minutes),
        });
    }
    let product: Vec<String> =
        segments.iter().map(|s| format!("{}x{}@{}", s.instance_count, s.instance_type, s.availability_zone)).collect();
    let first = segments.first()?.clone();
    let mut fee: Decimal = segments.iter().map(|s| s.upfront_fee).sum();
    fee.rescale(2);
    Some(Offering {
        id: offering_id(&line.region, &product.join("+"), 0, duration, &first.availability_zone, start, step),
        region: line.region.clone(),
        instance_type: first.instance_type,
        availability_zone: first.availability_zone,
        zone_type: line.zone_type,
        instance_count: first.instance_count,
        start,
        end,
        duration_hours: minutes / 60,
        duration_minutes: minutes % 60,
        usd_per_accelerator_hour: price,
        upfront_fee: fee,
        currency: line.currency.clone(),
        payment: line.payment,
        ultraserver: None,
        health: line.health.clone(),
        usage: line.usage.clone(),
        segments,
    })
}

/// The offering with this id if it is on offer right now (same price step) in `region`;
/// same-day blocks only when `same_day` offerings are on. Local Zones included: an offering
/// seen with AllAvailabilityZones=true is purchasable by id.
pub fn find_offering(
    scenario: &Scenario,
    region: &str,
    id: &str,
    now: DateTime<Utc>,
    same_day: bool,
) -> Option<Offering> {
    let mut days: Vec<i64> = scenario
        .market
        .iter()
        .filter(|l| l.region == region)
        .flat_map(|l| l.durations_days.iter().map(|&d| i64::from(d)))
        .collect();
    days.sort_unstable();
    days.dedup();
    days.into_iter().find_map(|d| {
        let q = OfferingQuery {
            region: region.to_string(),
            duration_days: d,
            same_day,
            all_zones: true,
            ..Default::default()
        };
        offerings(scenario, &q, now).into_iter().find(|o| o.id == id)
    })
}

/// What an extension offering is priced from: the reservation as it stands now.
#[derive(Debug, Clone)]
pub struct ExtensionBase<'a> {
    pub reservation_id: &'a str,
    pub region: &'a str,
    pub instance_type: &'a str,
    pub availability_zone: &'a str,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub current_end: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionOffering {
    pub id: String,
    pub instance_type: String,
    pub instance_count: u32,
    pub availability_zone: String,
    pub start_date: DateTime<Utc>,
    pub extension_start: DateTime<Utc>,
    pub extension_end: DateTime<Utc>,
    pub duration_hours: i64,
    pub upfront_fee: Decimal,
    pub currency: String,
    pub payment: Option<PaymentOutcome>,
}

/// Extension offerings, if the block may be extended now: from 56 days to 1 hour before its end
/// and only if a market line sells this instance type in this region (price: the line's
/// extension price, else its current price step). The caller checks the reservation state.
pub fn extension_offering(
    scenario: &Scenario,
    base: &ExtensionBase<'_>,
    hours: i64,
    now: DateTime<Utc>,
) -> Option<ExtensionOffering> {
    if now < base.current_end - Duration::days(56) || now > base.current_end - Duration::hours(1) {
        return None;
    }
    let line = scenario.market.iter().find(|l| l.region == base.region && l.instance_type == base.instance_type)?;
    let price = match line.extension_usd_per_accelerator_hour {
        Some(p) => p,
        None => price_at(line, now)?.1,
    };
    let accel = instance_types::accelerators(base.instance_type)?;
    let fee = upfront_fee(price, accel, base.instance_count, hours);
    Some(ExtensionOffering {
        id: stable_id("cbe-", &format!("{}|{}|{hours}|{fee}", base.reservation_id, base.current_end.timestamp())),
        instance_type: base.instance_type.to_string(),
        instance_count: base.instance_count,
        availability_zone: base.availability_zone.to_string(),
        start_date: base.start,
        extension_start: base.current_end,
        extension_end: base.current_end + Duration::hours(hours),
        duration_hours: hours,
        upfront_fee: fee,
        currency: line.currency.clone(),
        payment: line.payment,
    })
}

/// Every valid extension duration (for finding an offering by id at purchase time).
pub fn all_durations_hours() -> impl Iterator<Item = i64> {
    (1..=182).filter(|d| valid_duration_days(*d)).map(|d| d * 24)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone};
    use std::str::FromStr;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn scenario() -> Scenario {
        Scenario::parse(
            r#"
            [[market]]
            region = "us-east-1"
            instance_type = "p5.48xlarge"
            azs = ["us-east-1a", "us-east-1b"]
            counts = [1, 2]
            durations_days = [1, 7]
            start_days = [0, 1, 3, 55]
            price = [ { from = "2026-12-01T00:00:00Z", usd_per_accelerator_hour = "4.10" },
                      { from = "2026-12-03T00:00:00Z", usd_per_accelerator_hour = "2.85" } ]
            extension_usd_per_accelerator_hour = "3.00"
            "#,
        )
        .unwrap()
    }

    #[test]
    fn durations() {
        for d in [1, 2, 13, 14, 21, 28, 182] {
            assert!(valid_duration_days(d), "{d}");
        }
        for d in [0, 15, 20, 22, 183, 189] {
            assert!(!valid_duration_days(d), "{d}");
        }
        assert_eq!(duration_days_from_hours(24, "X").unwrap(), 1);
        assert_eq!(duration_days_from_hours(504, "X").unwrap(), 21);
        assert!(duration_days_from_hours(36, "X").is_err());
        assert!(duration_days_from_hours(360, "X").is_err());
        assert!(duration_days_from_hours(-24, "X").is_err());
    }

    #[test]
    fn fees_are_exact() {
        let p = Decimal::from_str("24.05").unwrap();
        assert_eq!(upfront_fee(p, 8, 1, 24).to_string(), "4617.60");
        let p = Decimal::from_str("4.10").unwrap();
        assert_eq!(upfront_fee(p, 8, 2, 168).to_string(), "11020.80");
        // Sub-cent prices round half away from zero.
        let p = Decimal::from_str("0.0001").unwrap();
        assert_eq!(upfront_fee(p, 1, 1, 50).to_string(), "0.01");
        assert_eq!(upfront_fee(Decimal::ONE, 16, 1, 24).to_string(), "384.00");
    }

    #[test]
    fn fees_by_the_minute_are_exact() {
        // 04:55 -> 11:30 is 6 h 35 min = 395 min: 4.10 x 8 x 395 / 60 = 215.9333.. -> 215.93.
        let p = Decimal::from_str("4.10").unwrap();
        assert_eq!(upfront_fee_minutes(p, 8, 1, 395).to_string(), "215.93");
        assert_eq!(upfront_fee_minutes(p, 8, 2, 24 * 60).to_string(), upfront_fee(p, 8, 2, 24).to_string());
        // An exact midpoint (0.03 x 10 / 60 = 0.005) rounds away from zero.
        assert_eq!(upfront_fee_minutes(Decimal::from_str("0.03").unwrap(), 1, 1, 10).to_string(), "0.01");
        assert_eq!(upfront_fee_minutes(Decimal::from_str("0.029").unwrap(), 1, 1, 10).to_string(), "0.00");
        // A quotient that does not terminate: 1 / 60 = 0.01666.. -> 0.02.
        assert_eq!(upfront_fee_minutes(Decimal::ONE, 1, 1, 1).to_string(), "0.02");
    }

    #[test]
    fn answers_are_cheapest_first_with_a_stable_tie_order_and_capped() {
        let s = Scenario::parse(include_str!("../tests/scenarios/cheapest-first.toml")).unwrap();
        let q = OfferingQuery { region: "us-east-1".into(), duration_days: 1, ..Default::default() };
        let all = offerings(&s, &q, t("2026-12-01T00:00:00Z"));
        let key =
            |o: &Offering| (o.instance_type.clone(), o.availability_zone.clone(), o.instance_count, o.start.day());
        let got: Vec<_> = all.iter().map(key).collect();
        // The two 4.10 offerings that tie on start, zone and count are ordered by id.
        let (p5, p5e) = (
            all.iter().find(|o| key(o) == ("p5.48xlarge".into(), "us-east-1a".into(), 1, 2)).unwrap(),
            all.iter().find(|o| o.instance_type == "p5e.48xlarge").unwrap(),
        );
        let (first, second) = if p5.id < p5e.id { (p5, p5e) } else { (p5e, p5) };
        let want = vec![
            // 2.00 per accelerator-hour, although it starts last.
            ("p4d.24xlarge".to_string(), "us-east-1c".to_string(), 1, 4),
            // 4.10: earliest start, then zone, then count, then id.
            key(first),
            key(second),
            ("p5.48xlarge".into(), "us-east-1a".into(), 2, 2),
            ("p5.48xlarge".into(), "us-east-1b".into(), 1, 2),
            ("p5.48xlarge".into(), "us-east-1b".into(), 2, 2),
            ("p5.48xlarge".into(), "us-east-1a".into(), 1, 3),
            ("p5.48xlarge".into(), "us-east-1a".into(), 2, 3),
            ("p5.48xlarge".into(), "us-east-1b".into(), 1, 3),
            ("p5.48xlarge".into(), "us-east-1b".into(), 2, 3),
            // 4.11: dearer, although it starts first.
            ("trn2.48xlarge".into(), "us-east-1d".into(), 4, 2),
        ];
        assert_eq!(got, want);
        assert_eq!(recommend(all.clone(), 6), all[..6].to_vec());
        assert_eq!(recommend(all.clone(), 0), all);
        assert_eq!(recommend(all.clone(), 100), all);
    }

    #[test]
    fn price_steps_follow_sim_time() {
        let s = scenario();
        let l = &s.market[0];
        assert_eq!(price_at(l, t("2026-11-30T23:59:59Z")), None);
        assert_eq!(price_at(l, t("2026-12-01T00:00:00Z")).unwrap().0, 0);
        assert_eq!(price_at(l, t("2026-12-05T00:00:00Z")).unwrap().1.to_string(), "2.85");
    }

    #[test]
    fn offerings_respect_windows() {
        let s = scenario();
        let now = t("2026-12-01T11:00:00Z");
        let q = OfferingQuery { region: "us-east-1".into(), duration_days: 1, ..Default::default() };
        let all = offerings(&s, &q, now);
        // start_days 0 (11:30 today, exactly 30 min ahead: kept), 1, 3, 55 x 2 azs x 2 counts.
        assert_eq!(all.len(), 4 * 2 * 2);
        assert!(all.iter().all(|o| o.start.time() == START_TIME && o.end == o.start + Duration::days(1)));
        assert_eq!(all[0].start, t("2026-12-01T11:30:00Z"));
        assert_eq!(all[0].upfront_fee.to_string(), "787.20"); // 4.10 x 8 x 1 x 24
        // 11:01 -> today's 11:30 is less than 30 minutes ahead.
        let later = offerings(&s, &q, now + Duration::minutes(1));
        assert_eq!(later.len(), 3 * 2 * 2);
        // Ranges: start >= StartDateRange, end <= EndDateRange.
        let q2 = OfferingQuery {
            start_range: Some(t("2026-12-02T00:00:00Z")),
            end_range: Some(t("2026-12-05T11:30:00Z")),
            instance_count: Some(2),
            ..q.clone()
        };
        let r = offerings(&s, &q2, now);
        assert_eq!(r.len(), 2 * 2);
        assert!(r.iter().all(|o| o.instance_count == 2 && o.start >= t("2026-12-02T00:00:00Z")));
        // Unsold duration for this line, other region, other type: nothing.
        assert!(offerings(&s, &OfferingQuery { duration_days: 2, ..q.clone() }, now).is_empty());
        assert!(offerings(&s, &OfferingQuery { region: "us-west-2".into(), ..q.clone() }, now).is_empty());
        assert!(
            offerings(&s, &OfferingQuery { instance_type: Some("p4d.24xlarge".into()), ..q.clone() }, now).is_empty()
        );
        // No price before the first step.
        assert!(offerings(&s, &q, t("2026-11-30T00:00:00Z")).is_empty());
    }

    #[test]
    fn same_day_blocks_start_on_the_next_5_minutes_after_30() {
        assert_eq!(same_day_start(t("2026-12-01T04:25:00Z")), t("2026-12-01T04:55:00Z"));
        assert_eq!(same_day_start(t("2026-12-01T04:22:10Z")), t("2026-12-01T04:55:00Z"));
        assert_eq!(same_day_start(t("2026-12-01T04:25:00.001Z")), t("2026-12-01T05:00:00Z"));
        assert_eq!(same_day_start(t("2026-12-01T23:59:00Z")), t("2026-12-02T00:30:00Z"));
        // 04:55 -> 11:30 the same day (6 h 35 min) and the next day (30 h 35 min).
        let w = same_day_windows(t("2026-12-01T04:25:00Z"), 1);
        assert_eq!(
            w,
            vec![
                (t("2026-12-01T04:55:00Z"), t("2026-12-01T11:30:00Z")),
                (t("2026-12-01T04:55:00Z"), t("2026-12-02T11:30:00Z"))
            ]
        );
        // After 11:30: 11:35 -> 11:30 next day (23 h 55 min) and the day after (47 h 55 min).
        let w = same_day_windows(t("2026-12-01T11:00:01Z"), 2);
        assert_eq!(
            w,
            vec![
                (t("2026-12-01T11:35:00Z"), t("2026-12-03T11:30:00Z")),
                (t("2026-12-01T11:35:00Z"), t("2026-12-04T11:30:00Z"))
            ]
        );
        // A start of exactly 11:30 is an ordinary block: no same-day ones.
        assert!(same_day_windows(t("2026-12-01T11:00:00Z"), 1).is_empty());
    }

    #[test]
    fn same_day_offerings_carry_minutes_and_exact_fees() {
        let s = scenario();
        let now = t("2026-12-01T04:25:00Z");
        let q = OfferingQuery {
            region: "us-east-1".into(),
            duration_days: 1,
            instance_count: Some(1),
            same_day: true,
            ..Default::default()
        };
        let all = offerings(&s, &q, now);
        let same_day: Vec<&Offering> = all.iter().filter(|o| o.start == t("2026-12-01T04:55:00Z")).collect();
        // 2 ends x 2 zones; without `same_day` none of them.
        assert_eq!(same_day.len(), 4);
        assert_eq!(offerings(&s, &OfferingQuery { same_day: false, ..q.clone() }, now).len(), all.len() - 4);
        let short = same_day.iter().find(|o| o.end == t("2026-12-01T11:30:00Z") && o.availability_zone == "us-east-1a");
        let short = short.unwrap();
        assert_eq!((short.duration_hours, short.duration_minutes), (6, 35));
        assert_eq!(short.upfront_fee.to_string(), "215.93"); // 4.10 x 8 x 395 / 60 = 215.9333..
        let long = same_day.iter().find(|o| o.end == t("2026-12-02T11:30:00Z")).unwrap();
        assert_eq!((long.duration_hours, long.duration_minutes), (30, 35));
        assert_eq!(long.upfront_fee.to_string(), "1003.13"); // 4.10 x 8 x 1835 / 60 = 1003.1333..
        // 11:30 blocks keep minutes 0.
        assert!(all.iter().filter(|o| o.start.time() == START_TIME).all(|o| o.duration_minutes == 0));
        // Ids are distinct from the 11:30 blocks', stable, and purchasable (same-day on).
        let ids: HashSet<&str> = all.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids.len(), all.len());
        assert_eq!(offerings(&s, &q, now), all);
        assert_eq!(find_offering(&s, "us-east-1", &short.id, now, true).as_ref(), Some(*short));
        assert!(find_offering(&s, "us-east-1", &short.id, now, false).is_none());
        // Five minutes later they start at 05:00: other blocks, other ids.
        assert!(find_offering(&s, "us-east-1", &short.id, now + Duration::minutes(5), true).is_none());
    }

    #[test]
    fn same_day_offerings_obey_ranges_durations_and_price_steps() {
        let s = scenario();
        let now = t("2026-12-01T04:25:00Z");
        let q = OfferingQuery { region: "us-east-1".into(), duration_days: 1, same_day: true, ..Default::default() };
        let is_same_day = |o: &Offering| o.start == t("2026-12-01T04:55:00Z");
        // StartDateRange after S drops them; EndDateRange between the two ends keeps the shorter.
        let late = OfferingQuery { start_range: Some(t("2026-12-01T05:00:00Z")), ..q.clone() };
        assert!(!offerings(&s, &late, now).iter().any(is_same_day));
        let short_only = OfferingQuery { end_range: Some(t("2026-12-02T11:29:00Z")), ..q.clone() };
        let r = offerings(&s, &short_only, now);
        assert_eq!(r.iter().filter(|o| is_same_day(o)).count(), 2 * 2);
        assert!(r.iter().all(|o| o.end <= t("2026-12-02T11:29:00Z")));
        // A duration the line does not sell: none. 7 days: 04:55 -> 12-07 11:30 and 12-08 11:30.
        assert!(offerings(&s, &OfferingQuery { duration_days: 2, ..q.clone() }, now).is_empty());
        let week = offerings(&s, &OfferingQuery { duration_days: 7, instance_count: Some(2), ..q.clone() }, now);
        let ends: HashSet<_> = week.iter().filter(|o| is_same_day(o)).map(|o| (o.end, o.duration_hours)).collect();
        assert_eq!(ends, HashSet::from([(t("2026-12-07T11:30:00Z"), 150), (t("2026-12-08T11:30:00Z"), 174)]));
        // The price step in force: 2.85 from 12-03.
        let later = t("2026-12-03T04:25:00Z");
        let o = offerings(&s, &OfferingQuery { instance_count: Some(2), ..q.clone() }, later)
            .into_iter()
            .find(|o| o.start == t("2026-12-03T04:55:00Z") && o.end == t("2026-12-03T11:30:00Z"))
            .unwrap();
        assert_eq!(o.upfront_fee.to_string(), "300.20"); // 2.85 x 8 x 2 x 395 / 60
        // No price yet: nothing at all.
        assert!(offerings(&s, &q, t("2026-11-30T04:25:00Z")).is_empty());
    }

    #[test]
    fn local_zone_offerings_need_all_zones_or_an_opt_in() {
        let text = |opted: &str| {
            format!(
                r#"
                [[regions]]
                name = "us-east-1"
                opted_in_zones = [{opted}]
                [[market]]
                region = "us-east-1"
                instance_type = "p6-b200.48xlarge"
                zone_type = "local-zone"
                azs = ["us-east-1-dfw-2a", "us-east-1-mia-2a"]
                price = [ {{ from = "2026-12-01T00:00:00Z", usd_per_accelerator_hour = "3.00" }} ]
                [[market]]
                region = "us-east-1"
                instance_type = "p5.48xlarge"
                price = [ {{ from = "2026-12-01T00:00:00Z", usd_per_accelerator_hour = "4.10" }} ]
                "#
            )
        };
        let now = t("2026-12-01T00:00:00Z");
        let q = OfferingQuery { region: "us-east-1".into(), duration_days: 1, ..Default::default() };
        let zones = |s: &Scenario, q: &OfferingQuery| {
            offerings(s, q, now).iter().map(|o| (o.availability_zone.clone(), o.zone_type)).collect::<Vec<_>>()
        };
        let s = Scenario::parse(&text("")).unwrap();
        assert_eq!(zones(&s, &q), vec![("us-east-1a".to_string(), ZoneType::AvailabilityZone)]);
        let all = OfferingQuery { all_zones: true, ..q.clone() };
        assert_eq!(
            zones(&s, &all),
            vec![
                ("us-east-1-dfw-2a".to_string(), ZoneType::LocalZone),
                ("us-east-1-mia-2a".to_string(), ZoneType::LocalZone),
                ("us-east-1a".to_string(), ZoneType::AvailabilityZone),
            ]
        );
        // Purchasable by id although a plain search does not show it.
        let dfw = offerings(&s, &all, now).remove(0);
        assert_eq!(find_offering(&s, "us-east-1", &dfw.id, now, false), Some(dfw));
        // An opted-in Local Zone comes back without AllAvailabilityZones, the other does not.
        let s = Scenario::parse(&text("\"us-east-1-dfw-2a\"")).unwrap();
        assert_eq!(
            zones(&s, &q),
            vec![
                ("us-east-1-dfw-2a".to_string(), ZoneType::LocalZone),
                ("us-east-1a".to_string(), ZoneType::AvailabilityZone)
            ]
        );
    }

    #[test]
    fn ids_are_stable_within_a_price_step() {
        let s = scenario();
        let q = OfferingQuery { region: "us-east-1".into(), duration_days: 7, ..Default::default() };
        let a = offerings(&s, &q, t("2026-12-01T01:00:00Z"));
        let b = offerings(&s, &q, t("2026-12-01T05:00:00Z"));
        assert_eq!(a, b);
        let id = &a[0].id;
        assert!(id.starts_with("cb-") && id.len() == 20);
        assert!(find_offering(&s, "us-east-1", id, t("2026-12-01T05:00:00Z"), true).is_some());
        // The price step changes on 12-03: the old id is gone.
        assert!(find_offering(&s, "us-east-1", id, t("2026-12-03T00:00:00Z"), true).is_none());
        assert!(find_offering(&s, "us-west-2", id, t("2026-12-01T05:00:00Z"), true).is_none());
    }

    #[test]
    fn extension_window() {
        let s = scenario();
        let end = Utc.with_ymd_and_hms(2026, 12, 10, 11, 30, 0).unwrap();
        let base = ExtensionBase {
            reservation_id: "cr-1",
            region: "us-east-1",
            instance_type: "p5.48xlarge",
            availability_zone: "us-east-1a",
            instance_count: 2,
            start: end - Duration::days(2),
            current_end: end,
        };
        let o = extension_offering(&s, &base, 48, end - Duration::hours(2)).unwrap();
        assert_eq!(o.extension_start, end);
        assert_eq!(o.extension_end, end + Duration::hours(48));
        assert_eq!(o.upfront_fee.to_string(), "2304.00"); // 3.00 x 8 x 2 x 48
        assert!(o.id.starts_with("cbe-"));
        assert!(extension_offering(&s, &base, 48, end - Duration::minutes(59)).is_none());
        assert!(extension_offering(&s, &base, 48, end - Duration::days(57)).is_none());
        assert!(extension_offering(&s, &base, 48, end - Duration::days(56)).is_some());
    }
}
