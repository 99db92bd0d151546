//! The published Capacity Block rates, as data with their source and the day they took effect,
//! so a rule whose threshold sits below today's list is told so before a week of drought does.
//!
//! EC2 prices each offering by supply and demand, but the pricing page publishes a rate per
//! accelerator-hour for each family, the same in every region, and offerings cluster around it:
//! a threshold far below the list may never buy. The Price List API carries no block rates, so
//! the table is written here from the record, with where each figure comes from. A rate applies
//! from its effective day on; before the first one known, nothing is said (capblock does not
//! guess older prices).
//!
//! AWS announces a change before it takes effect (the 2026 rises were each announced ahead): the
//! operator records one (`capblock rates announce`, kept in the table), and a [`RateBook`] reads
//! the published table and those together. An announced rate is the list from its day on, and
//! before that day a rule whose threshold will be below it is told so ([`RateBook::ahead`]).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::domain::plan::family;
use crate::domain::rule::Rule;

/// One family's rate from a day on: published (in the table below) or announced (recorded by
/// the operator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRate {
    /// The instance family ("p5" for p5.48xlarge and p5.4xlarge alike).
    pub family: String,
    /// USD per accelerator-hour.
    pub usd: Decimal,
    pub effective: NaiveDate,
    pub source: String,
    /// Recorded by the operator from an announcement, not in capblock's published table.
    #[serde(default)]
    pub announced: bool,
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

fn published() -> impl Iterator<Item = ListRate> {
    RATES.iter().map(|&Published(family, thousandths, (y, m, d), source)| ListRate {
        family: family.to_string(),
        usd: Decimal::new(thousandths, 3),
        effective: NaiveDate::from_ymd_opt(y, m, d).expect("a real day"),
        source: source.to_string(),
        announced: false,
    })
}

/// Why an announced rate is refused, said to the operator who typed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnouncementError {
    #[error("{0:?} is not an instance family or type (for example p5 or p5.48xlarge)")]
    Family(String),
    #[error("{0} USD per accelerator-hour is not a rate: give a positive amount below 1000")]
    Rate(Decimal),
    #[error("the source is empty: say where the rate was announced (an email, a page, its date)")]
    Source,
}

/// The family a rate is recorded under, as the operator typed it: a family or any of its types,
/// in any case ("P5.48xlarge" is "p5").
pub fn family_key(family_or_type: &str) -> String {
    family(family_or_type.trim()).to_ascii_lowercase()
}

impl ListRate {
    /// A rate the operator read in an announcement: `family` may be a family or an instance
    /// type ("p5.48xlarge" records "p5": rates are per family), the amount per accelerator-hour.
    pub fn announcement(
        family_or_type: &str,
        usd: Decimal,
        effective: NaiveDate,
        source: &str,
    ) -> Result<ListRate, AnnouncementError> {
        let fam = family_key(family_or_type);
        let well_formed = fam.len() >= 2
            && fam.starts_with(|c: char| c.is_ascii_lowercase())
            && fam.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !well_formed {
            return Err(AnnouncementError::Family(family_or_type.to_string()));
        }
        // A rate per accelerator-hour of 1000 USD or more is a typo (the dearest list is ~16).
        if usd <= Decimal::ZERO || usd >= Decimal::from(1000) {
            return Err(AnnouncementError::Rate(usd));
        }
        if source.trim().is_empty() {
            return Err(AnnouncementError::Source);
        }
        Ok(ListRate { family: fam, usd, effective, source: source.trim().to_string(), announced: true })
    }
}

/// The rates capblock knows: the published table and the operator's announced ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateBook {
    announced: Vec<ListRate>,
}

impl RateBook {
    /// The published table alone (where no table is at hand: `rules validate`, offline).
    pub fn published() -> RateBook {
        RateBook::default()
    }

    /// The published table and `announced` (as the table holds them).
    pub fn with_announced(announced: Vec<ListRate>) -> RateBook {
        RateBook { announced }
    }

    /// Every rate, published and announced, by family and day.
    pub fn every_rate(&self) -> Vec<ListRate> {
        let mut all: Vec<ListRate> = self.all().collect();
        all.sort_by(|a, b| (&a.family, a.effective, a.announced).cmp(&(&b.family, b.effective, b.announced)));
        all
    }

    fn all(&self) -> impl Iterator<Item = ListRate> + '_ {
        published().chain(self.announced.iter().cloned())
    }

    /// The rate for `instance_type`'s family on `at`'s day: the latest that took effect by then,
    /// if any is known; on a day with both, the announced one (the operator's newer word).
    pub fn rate(&self, instance_type: &str, at: DateTime<Utc>) -> Option<ListRate> {
        let fam = family(instance_type);
        self.all()
            .filter(|r| r.family == fam && r.effective <= at.date_naive())
            .max_by_key(|r| (r.effective, r.announced))
    }

    /// Each of `rule`'s instance types whose list rate on `at`'s day is above the rule's
    /// threshold, with that rate: a USD rule that may never buy at today's prices.
    pub fn below(&self, rule: &Rule, at: DateTime<Utc>) -> Vec<(String, ListRate)> {
        if rule.currency != crate::domain::money::Currency::USD {
            return vec![];
        }
        rule.instance_types
            .iter()
            .filter_map(|t| self.rate(t.as_str(), at).map(|r| (t.to_string(), r)))
            .filter(|(_, r)| rule.max_price_per_accelerator_hour < r.usd)
            .collect()
    }

    /// Each announced rate not yet in effect on `at`'s day that will put one of `rule`'s types
    /// above its threshold, where today's list does not already: the rule still buys today and
    /// may stop on that day, so it is told before.
    pub fn ahead(&self, rule: &Rule, at: DateTime<Utc>) -> Vec<(String, ListRate)> {
        if rule.currency != crate::domain::money::Currency::USD {
            return vec![];
        }
        let below_now = self.below(rule, at);
        let mut found: Vec<(String, ListRate)> = rule
            .instance_types
            .iter()
            .filter(|t| !below_now.iter().any(|(b, _)| b == t.as_str()))
            .flat_map(|t| {
                self.announced
                    .iter()
                    .filter(|r| r.family == family(t.as_str()) && r.effective > at.date_naive())
                    .filter(|r| rule.max_price_per_accelerator_hour < r.usd)
                    .map(|r| (t.to_string(), r.clone()))
                    .min_by_key(|(_, r)| r.effective)
            })
            .collect();
        found.sort_by(|a, b| (a.1.effective, &a.0).cmp(&(b.1.effective, &b.0)));
        found
    }
}

impl RateBook {
    /// Everything the rates say of `rule` on `at`'s day, in words: each type below today's list,
    /// then each an announced rate will put below on a later day (`says`, `says_ahead`).
    pub fn warnings(&self, rule: &Rule, at: DateTime<Utc>) -> Vec<String> {
        let threshold = rule.max_price_per_accelerator_hour;
        let mut said = says(&self.below(rule, at), threshold);
        said.extend(says_ahead(&self.ahead(rule, at), threshold));
        said
    }
}

/// The published rate for `instance_type`'s family on `at`'s day (the table alone).
pub fn list_rate(instance_type: &str, at: DateTime<Utc>) -> Option<ListRate> {
    RateBook::published().rate(instance_type, at)
}

/// [`RateBook::below`] over the published table alone (`rules validate`, preflight).
pub fn below_list(rule: &Rule, at: DateTime<Utc>) -> Vec<(String, ListRate)> {
    RateBook::published().below(rule, at)
}

/// When `rule`'s `max_total_fee` is below the least block it accepts would cost at the list on
/// `at`'s day, that in words: its smallest (type, count) for its shortest duration less
/// `duration_tolerance_hours`, over the types with a known rate and accelerator count. Such a
/// rule is valid (a dip may come) but buys only below the list.
pub fn fee_cap_below_list(rule: &Rule, at: DateTime<Utc>) -> Option<String> {
    RateBook::published().fee_cap_below(rule, at)
}

impl RateBook {
    /// [`fee_cap_below_list`] over this book's rates.
    pub fn fee_cap_below(&self, rule: &Rule, at: DateTime<Utc>) -> Option<String> {
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
                let rate = self.rate(a.instance_type.as_str(), at)?;
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

/// What [`RateBook::ahead`] found, in words, one line per type: said before the day, while the
/// rule still buys.
pub fn says_ahead(found: &[(String, ListRate)], threshold: Decimal) -> Vec<String> {
    found
        .iter()
        .map(|(t, r)| {
            format!(
                "from {} the list for {t} will be {} USD per accelerator-hour (announced: {}): {threshold} will be \
                 below it and the rule may stop buying then; raise the threshold before that day or expect to \
                 wait for a dip",
                r.effective,
                r.usd.normalize(),
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
        assert_eq!((p5.family.as_str(), p5.usd.to_string()), ("p5", "5.970".to_string()));
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

    fn p5_rule(threshold: &str) -> Rule {
        let text = format!(
            "id = \"r\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\", \"p4d.24xlarge\"]\n\
             instance_counts = [1]\ndurations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
             max_price_per_accelerator_hour = \"{threshold}\"\nmonthly_budget = \"5000\"\n"
        );
        Rule::from_toml(&text, day(2026, 12, 7)).unwrap()
    }

    fn announced(family: &str, usd: &str, y: i32, m: u32, d: u32) -> ListRate {
        let usd: Decimal = usd.parse().unwrap();
        ListRate::announcement(family, usd, NaiveDate::from_ymd_opt(y, m, d).unwrap(), "AWS email of 2026-12-01")
            .unwrap()
    }

    /// An announced rise is said before its day to a rule that still buys today, and from its day
    /// on it is the list (the published table's rate is said no more).
    #[test]
    fn an_announced_rate_is_told_before_its_day_and_is_the_list_from_it() {
        let book = RateBook::with_announced(vec![announced("p5.48xlarge", "6.50", 2027, 1, 1)]);
        let rule = p5_rule("6.00");
        let today = day(2026, 12, 7);
        assert!(book.below(&rule, today).is_empty(), "6.00 is above today's 5.97");
        let ahead = book.ahead(&rule, today);
        assert_eq!(
            ahead.iter().map(|(t, r)| (t.as_str(), r.effective.to_string())).collect::<Vec<_>>(),
            [("p5.48xlarge", "2027-01-01".to_string())]
        );
        assert_eq!(
            says_ahead(&ahead, rule.max_price_per_accelerator_hour),
            ["from 2027-01-01 the list for p5.48xlarge will be 6.5 USD per accelerator-hour (announced: AWS email \
              of 2026-12-01): 6.00 will be below it and the rule may stop buying then; raise the threshold before \
              that day or expect to wait for a dip"]
        );
        let on_the_day = day(2027, 1, 1);
        assert!(book.ahead(&rule, on_the_day).is_empty(), "in effect: no longer ahead");
        let below = book.below(&rule, on_the_day);
        assert_eq!(below.len(), 1);
        assert!(below[0].1.announced && below[0].1.usd.to_string() == "6.50", "{below:?}");
        assert_eq!(book.rate("p5.4xlarge", on_the_day).map(|r| r.usd.to_string()), Some("6.50".into()));
        assert_eq!(book.rate("p5.48xlarge", today).map(|r| r.usd.to_string()), Some("5.970".into()), "not before");
        assert_eq!(RateBook::published().rate("p5.48xlarge", on_the_day).unwrap().usd.to_string(), "5.970");
    }

    /// A rule above the announced rate, one already below today's list, and another family's
    /// announcement are not told ahead.
    #[test]
    fn only_a_rule_the_announcement_puts_below_is_told() {
        let book = RateBook::with_announced(vec![
            announced("p5", "6.50", 2027, 1, 1),
            announced("p5", "7.00", 2027, 3, 1),
            announced("p5e", "9.00", 2027, 1, 1),
        ]);
        let today = day(2026, 12, 7);
        assert!(book.ahead(&p5_rule("7.10"), today).is_empty(), "above both");
        assert!(book.ahead(&p5_rule("3.50"), today).is_empty(), "below today's list already: said as below");
        let first = book.ahead(&p5_rule("6.00"), today);
        assert_eq!(first.len(), 1, "the first day it stops buying, once per type: {first:?}");
        assert_eq!(first[0].1.effective.to_string(), "2027-01-01");
        let later = book.ahead(&p5_rule("6.80"), today);
        assert_eq!(later[0].1.effective.to_string(), "2027-03-01", "6.50 does not stop it; 7.00 does");
    }

    #[test]
    fn an_announcement_is_checked_as_the_operator_typed_it() {
        let on = NaiveDate::from_ymd_opt(2027, 1, 1).unwrap();
        let p5 = ListRate::announcement(" P5.48xlarge ", Decimal::new(65, 1), on, " email ").unwrap();
        assert_eq!((p5.family.as_str(), p5.source.as_str(), p5.announced), ("p5", "email", true));
        assert_eq!(ListRate::announcement("5", Decimal::ONE, on, "x"), Err(AnnouncementError::Family("5".into())));
        assert_eq!(ListRate::announcement("p5", Decimal::ZERO, on, "x"), Err(AnnouncementError::Rate(Decimal::ZERO)));
        assert!(ListRate::announcement("p5", Decimal::from(1000), on, "x").is_err(), "a typo");
        assert_eq!(ListRate::announcement("p5", Decimal::ONE, on, "  "), Err(AnnouncementError::Source));
    }
}
