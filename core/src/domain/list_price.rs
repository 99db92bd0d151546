//! The published Capacity Block rates, as data with their source and the day they took effect,
//! so a rule whose threshold sits below today's list is told so before a week of drought does.
//!
//! EC2 prices each offering by supply and demand, but the pricing page publishes a rate per
//! accelerator-hour for each family, the same in every region, and offerings cluster around it:
//! a threshold far below the list may never buy. The Price List API carries no block rates, so
//! the table is written here from the record, with where each figure comes from. A rate applies
//! from its effective day on; before the first one known, nothing is said (capblock does not
//! guess older prices).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;

use crate::domain::plan::family;
use crate::domain::rule::Rule;

/// One family's published rate from a day on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRate {
    /// The instance family ("p5" for p5.48xlarge and p5.4xlarge alike).
    pub family: &'static str,
    /// USD per accelerator-hour.
    pub usd: Decimal,
    pub effective: NaiveDate,
    pub source: &'static str,
}

/// The 2026-10-07 change, the third of 2026: one secondary report citing the pricing page (the
/// project's reference notes, capacity-blocks.md, "The market and the API in late 2026").
const OCTOBER_2026: &str = "the Capacity Blocks pricing page, as reported for 2026-10-07";

/// One row of the table as written: the family, the rate in thousandths of a USD, and the day
/// (year, month, day) it took effect.
struct Published(&'static str, i64, (i32, u32, u32), &'static str);

/// Every published rate known, oldest first within a family. Trainium and UltraServer rates are
/// not in the record's last report (unchanged, with no figure given), so none is said for them.
const RATES: &[Published] = &[
    Published("p6-b300", 16_146, (2026, 10, 7), OCTOBER_2026),
    Published("p6-b200", 14_208, (2026, 10, 7), OCTOBER_2026),
    Published("p5en", 7_895, (2026, 10, 7), OCTOBER_2026),
    Published("p5e", 6_866, (2026, 10, 7), OCTOBER_2026),
    Published("p5", 5_970, (2026, 10, 7), OCTOBER_2026),
    Published("p4de", 2_546, (2026, 10, 7), OCTOBER_2026),
    Published("p4d", 1_696, (2026, 10, 7), OCTOBER_2026),
];

fn rates() -> impl Iterator<Item = ListRate> {
    RATES.iter().map(|&Published(family, thousandths, (y, m, d), source)| ListRate {
        family,
        usd: Decimal::new(thousandths, 3),
        effective: NaiveDate::from_ymd_opt(y, m, d).expect("a real day"),
        source,
    })
}

/// The rate published for `instance_type`'s family on `at`'s day: the latest that took effect
/// by then, if any is known.
pub fn list_rate(instance_type: &str, at: DateTime<Utc>) -> Option<ListRate> {
    let fam = family(instance_type);
    rates().filter(|r| r.family == fam && r.effective <= at.date_naive()).max_by_key(|r| r.effective)
}

/// Each of `rule`'s instance types whose list rate on `at`'s day is above the rule's threshold,
/// with that rate: a USD rule that may never buy at today's prices (`rules validate`, preflight).
pub fn below_list(rule: &Rule, at: DateTime<Utc>) -> Vec<(String, ListRate)> {
    if rule.currency != crate::domain::money::Currency::USD {
        return vec![];
    }
    rule.instance_types
        .iter()
        .filter_map(|t| list_rate(t.as_str(), at).map(|r| (t.to_string(), r)))
        .filter(|(_, r)| rule.max_price_per_accelerator_hour < r.usd)
        .collect()
}

/// When `rule`'s `max_total_fee` is below the least block it accepts would cost at the list on
/// `at`'s day, that in words: its smallest (type, count) for its shortest duration less
/// `duration_tolerance_hours`, over the types with a known rate and accelerator count. Such a
/// rule is valid (a dip may come) but buys only below the list.
pub fn fee_cap_below_list(rule: &Rule, at: DateTime<Utc>) -> Option<String> {
    let max = rule.max_total_fee?;
    if rule.currency != crate::domain::money::Currency::USD {
        return None;
    }
    let catalog = crate::domain::catalog::AcceleratorCatalog::new();
    let days = rule.durations_days.iter().copied().min()?;
    let hours = (days * 24).saturating_sub(rule.duration_tolerance_hours).max(1);
    let (fee, ask, accelerators, rate) = rule
        .asks()
        .into_iter()
        .filter_map(|a| {
            let rate = list_rate(a.instance_type.as_str(), at)?;
            let accelerators = catalog.accelerators(&a.instance_type)?;
            let units = Decimal::from(u64::from(hours) * u64::from(a.instance_count) * u64::from(accelerators));
            Some((units * rate.usd, a, accelerators, rate))
        })
        .min_by_key(|(fee, ..)| *fee)?;
    if max.amount() >= fee {
        return None;
    }
    Some(format!(
        "{max} is below the least block this rule accepts at today's list: {:.2} USD ({} x {}, {accelerators} \
         accelerators each, for {} at {} USD per accelerator-hour since {}): it buys only below the list",
        fee,
        ask.instance_count,
        ask.instance_type,
        crate::domain::duration::compact(chrono::Duration::hours(i64::from(hours))),
        rate.usd.normalize(),
        rate.effective,
    ))
}

/// What `below_list` found, in words, one line per type.
pub fn says(found: &[(String, ListRate)], threshold: Decimal) -> Vec<String> {
    found
        .iter()
        .map(|(t, r)| {
            format!(
                "{threshold} USD per accelerator-hour is below today's list for {t} ({} USD since {}, {}): \
                 the rule may never buy; raise the threshold or expect to wait for a dip",
                r.usd.normalize(),
                r.effective,
                r.source
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn day(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap()
    }

    #[test]
    fn a_rate_applies_from_its_day_by_family_and_nothing_is_guessed_before() {
        let p5 = list_rate("p5.48xlarge", day(2026, 12, 7)).unwrap();
        assert_eq!((p5.family, p5.usd.to_string()), ("p5", "5.970".to_string()));
        assert_eq!(list_rate("p5.4xlarge", day(2026, 10, 7)).map(|r| r.usd), Some(p5.usd), "the same per GPU");
        assert_eq!(list_rate("p5e.48xlarge", day(2026, 12, 7)).unwrap().usd.to_string(), "6.866", "p5e is not p5");
        assert_eq!(list_rate("p5.48xlarge", day(2026, 10, 6)), None, "before the first rate known");
        assert_eq!(list_rate("trn2.48xlarge", day(2026, 12, 7)), None, "no figure in the record");
    }

    #[test]
    fn a_threshold_below_the_list_is_found_with_the_rate_and_its_source() {
        let text = "id = \"r\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\", \"p4d.24xlarge\"]\n\
                    instance_counts = [1]\ndurations_days = [1]\nstart_window = { earliest_in_days = 1, latest_in_days = 14 }\n\
                    max_price_per_accelerator_hour = \"3.50\"\nmonthly_budget = \"2000\"\n";
        let rule = Rule::from_toml(text, day(2026, 12, 7)).unwrap();
        let found = below_list(&rule, day(2026, 12, 7));
        assert_eq!(found.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["p5.48xlarge"], "p4d lists at 1.696");
        let said = says(&found, rule.max_price_per_accelerator_hour);
        assert_eq!(
            said,
            ["3.50 USD per accelerator-hour is below today's list for p5.48xlarge (5.97 USD since 2026-10-07, \
              the Capacity Blocks pricing page, as reported for 2026-10-07): the rule may never buy; raise the \
              threshold or expect to wait for a dip"]
        );
        assert!(below_list(&rule, day(2026, 9, 1)).is_empty(), "no rate known then");
    }

    /// A fee cap below one block at the list is said with the figures; one above it is not.
    #[test]
    fn a_fee_cap_below_one_block_at_the_list_is_said() {
        let text = |cap: &str| {
            format!(
                "id = \"r\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\ninstance_counts = [1]\n\
                 durations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
                 max_price_per_accelerator_hour = \"6\"\nmax_total_fee = \"{cap}\"\nmonthly_budget = \"5000\"\n"
            )
        };
        let low = Rule::from_toml(&text("500"), day(2026, 12, 7)).unwrap();
        let hours = (24 - low.duration_tolerance_hours).max(1);
        let said = fee_cap_below_list(&low, day(2026, 12, 7))
            .expect("500 is below a day less the tolerance of 8 GPUs at 5.97");
        let least = Decimal::from(hours * 8) * Decimal::new(5970, 3);
        assert!(
            said.starts_with(&format!(
                "500.00 USD is below the least block this rule accepts at today's list: {least:.2} USD"
            )),
            "{said}"
        );
        assert!(
            said.contains("1 x p5.48xlarge, 8 accelerators each")
                && said.contains("5.97 USD per accelerator-hour since 2026-10-07"),
            "{said}"
        );
        let high = Rule::from_toml(&text("1200"), day(2026, 12, 7)).unwrap();
        assert_eq!(fee_cap_below_list(&high, day(2026, 12, 7)), None);
        assert_eq!(fee_cap_below_list(&low, day(2026, 9, 1)), None, "no rate known then");
    }
}
