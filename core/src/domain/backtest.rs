//! Backtesting a rule: what it would have bought from a price history, when and at what price.
//!
//! The history is replayed scan by scan: at each distinct observation time, the offerings seen
//! at that time are decided on exactly as a scan would (`decision::decide`), with the rule's
//! monthly budget, `max_purchases_per_month` and `max_blocks_held` applied. A block counts as
//! held from its purchase until its end. At most one purchase per scan, like the scan.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::budget::Period;
use super::catalog::AcceleratorCatalog;
use super::decision::{Headroom, Priced, decide, room};
use super::money::{Money, Rate};
use super::offering::Offering;
use super::rule::Rule;

/// One price seen: the offering, its accelerators per instance, and when it was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub seen_at: DateTime<Utc>,
    pub offering: Offering,
    pub accelerators_per_instance: u32,
}

/// A purchase the rule would have made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bought {
    pub at: DateTime<Utc>,
    pub offering: Offering,
    pub per_accelerator_hour: Rate,
    pub fee: Money,
}

/// Why a scan time with an eligible offering bought nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    pub at: DateTime<Utc>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backtest {
    pub rule_id: String,
    /// Distinct observation times replayed.
    pub scans: usize,
    pub observations: usize,
    pub purchases: Vec<Bought>,
    /// Total fees per budget month ("2026-12").
    pub spent_by_month: BTreeMap<String, Decimal>,
    pub total: Decimal,
    /// Scans where the limits, not the prices, stopped a purchase.
    pub limited: Vec<Held>,
}

/// Replays `samples` (any order) against `rule`.
pub fn backtest(rule: &Rule, samples: &[Sample]) -> Backtest {
    let mut catalog = AcceleratorCatalog::new();
    let mut by_time: BTreeMap<DateTime<Utc>, Vec<Offering>> = BTreeMap::new();
    for s in samples {
        catalog.learn(s.offering.instance_type.clone(), s.accelerators_per_instance);
        by_time.entry(s.seen_at).or_default().push(s.offering.clone());
    }
    let mut purchases: Vec<Bought> = Vec::new();
    let mut limited = Vec::new();
    let mut spent: HashMap<Period, (Decimal, u32)> = HashMap::new();
    let unlimited = Headroom(Money::new(Money::MAX_AMOUNT, rule.currency).expect("the bound itself is an amount"));
    for (t, offerings) in &by_time {
        let t = *t;
        let held = purchases.iter().filter(|b| b.at <= t && t < b.offering.end).count();
        let period = Period::budget_month(t);
        let (used, count) = spent.get(&period).copied().unwrap_or((Decimal::ZERO, 0));
        // Purchases stay within the budget, itself a `Money`: `used` is too (clamped all the same).
        let committed = Money::new(used.min(Money::MAX_AMOUNT), rule.currency).expect("spent is non-negative");
        let headroom = Headroom(room(rule.monthly_budget, committed));
        let decision = decide(rule, offerings, &catalog, headroom, t);
        let Some(p) = decision.chosen else {
            // Would a purchase have happened without the budget? Then the budget stopped it.
            if decide(rule, offerings, &catalog, unlimited, t).chosen.is_some() {
                limited.push(Held { at: t, reason: format!("monthly budget {} reached", rule.monthly_budget) });
            }
            continue;
        };
        if held >= rule.max_blocks_held as usize {
            limited
                .push(Held { at: t, reason: format!("holds {held} block(s), the limit is {}", rule.max_blocks_held) });
            continue;
        }
        if count >= rule.max_purchases_per_month {
            limited.push(Held {
                at: t,
                reason: format!(
                    "{count} purchase(s) in {}, the limit is {}",
                    period.as_str(),
                    rule.max_purchases_per_month
                ),
            });
            continue;
        }
        let Priced { offering, per_accelerator_hour, .. } = p;
        // Saturating: each fee is bounded (`Money`), a sum of them is only read.
        spent.insert(period, (used.saturating_add(offering.fee.amount()), count + 1));
        purchases.push(Bought { at: t, fee: offering.fee, per_accelerator_hour, offering });
    }
    let mut spent_by_month = BTreeMap::new();
    for b in &purchases {
        let month = spent_by_month.entry(Period::of(b.at).as_str().to_string()).or_insert(Decimal::ZERO);
        *month = month.saturating_add(b.fee.amount());
    }
    Backtest {
        rule_id: rule.id.clone(),
        scans: by_time.len(),
        observations: samples.len(),
        total: purchases.iter().fold(Decimal::ZERO, |t, b| t.saturating_add(b.fee.amount())),
        purchases,
        spent_by_month,
        limited,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};
    use rust_decimal_macros::dec;

    fn day(d: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap() + Duration::days(d)
    }

    fn rule(budget: &str, purchases: u32, held: u32) -> Rule {
        Rule::from_toml(
            &format!(
                r#"
id = "bt"
regions = ["us-east-1"]
instance_types = ["p5.48xlarge"]
instance_counts = [1]
durations_days = [1]
max_price_per_accelerator_hour = "3.00"
monthly_budget = "{budget}"
max_purchases_per_month = {purchases}
max_blocks_held = {held}
start_window = {{ earliest_in_days = 1, latest_in_days = 10 }}
"#
            ),
            day(0),
        )
        .unwrap()
    }

    /// 1 x p5.48xlarge (8 GPUs) for one day from `start_day`, at `price` per GPU-hour, seen on `seen_day`.
    fn seen(id: &str, seen_day: i64, start_day: i64, price: Decimal) -> Sample {
        let start = day(start_day) + Duration::minutes(11 * 60 + 30);
        let fee = Money::parse(&(price * dec!(192)).to_string(), "USD").unwrap();
        let offering = crate::domain::offering::example(id, "us-east-1", start, fee);
        Sample { seen_at: day(seen_day), offering, accelerators_per_instance: 8 }
    }

    /// Day 0: only 3.50 (too dear). Day 1: 2.90 from day 3 (bought, 556.80, held to day 4 11:30).
    /// Day 2: 2.50 (held: the day-3 block). Day 5: 2.80 from day 7 (bought, 537.60).
    /// Day 6: 2.00 (held). Day 9: 2.95 from day 11 (bought, 566.40).
    fn history() -> Vec<Sample> {
        vec![
            seen("a", 0, 2, dec!(3.50)),
            seen("b", 1, 3, dec!(2.90)),
            seen("b-dear", 1, 3, dec!(3.10)),
            seen("c", 2, 4, dec!(2.50)),
            seen("d", 5, 7, dec!(2.80)),
            seen("e", 6, 7, dec!(2.00)),
            seen("f", 9, 11, dec!(2.95)),
        ]
    }

    fn bought(b: &Backtest) -> Vec<(&str, i64)> {
        b.purchases.iter().map(|p| (p.offering.id.as_str(), (p.at - day(0)).num_days())).collect()
    }

    #[test]
    fn buys_under_the_threshold_one_block_at_a_time() {
        let b = backtest(&rule("10000", 5, 1), &history());
        assert_eq!(bought(&b), vec![("b", 1), ("d", 5), ("f", 9)]);
        assert_eq!(b.scans, 6);
        assert_eq!(b.observations, 7);
        assert_eq!(b.total, dec!(556.80) + dec!(537.60) + dec!(566.40));
        assert_eq!(b.spent_by_month["2026-12"], dec!(1660.80));
        assert_eq!(b.limited.len(), 2, "{:?}", b.limited);
        assert!(b.limited.iter().all(|h| h.reason.starts_with("holds 1 block")));
        assert_eq!(b.purchases[0].per_accelerator_hour.per_unit, dec!(2.90));
    }

    #[test]
    fn the_monthly_budget_stops_purchases() {
        let b = backtest(&rule("1100", 5, 1), &history());
        assert_eq!(bought(&b), vec![("b", 1), ("d", 5)]);
        assert_eq!(b.total, dec!(1094.40));
        assert!(b.limited.last().unwrap().reason.contains("budget"), "{:?}", b.limited);
    }

    #[test]
    fn the_purchase_count_stops_purchases_and_more_blocks_may_be_held() {
        let b = backtest(&rule("10000", 2, 5), &history());
        // Two blocks may be held at once, so "c" on day 2 is bought too; then the count is spent.
        assert_eq!(bought(&b), vec![("b", 1), ("c", 2)]);
        assert!(b.limited.iter().all(|h| h.reason.contains("purchase(s) in 2026-12")), "{:?}", b.limited);
    }

    #[test]
    fn order_of_samples_does_not_matter_and_empty_history_buys_nothing() {
        let mut h = history();
        h.reverse();
        assert_eq!(bought(&backtest(&rule("10000", 5, 1), &h)), vec![("b", 1), ("d", 5), ("f", 9)]);
        let empty = backtest(&rule("10000", 5, 1), &[]);
        assert!(empty.purchases.is_empty());
        assert_eq!(empty.total, Decimal::ZERO);
    }
}
