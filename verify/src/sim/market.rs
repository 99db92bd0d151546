//! The stack the simulation runs: ten rules over four regions (live, approval and dry-run;
//! two teams; an account cap), and a market that puts blocks on sale at seeded prices and
//! takes them off again.

use std::collections::BTreeMap;

use capblock_core::domain::ids::{InstanceType, Region};
use capblock_core::domain::money::Money;
use capblock_core::domain::offering::Offering;
use capblock_core::domain::rule::{Mode, Rule};
use capblock_core::domain::stack::StackSettings;
use chrono::{DateTime, Duration, Timelike, Utc};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;

pub const REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1"];
pub const TYPES: [(&str, u32); 3] = [("p5.48xlarge", 8), ("p4d.24xlarge", 8), ("trn1.32xlarge", 16)];

/// The stack: its settings (live, an account cap, two teams) and its ten rules.
pub fn stack() -> StackSettings {
    StackSettings {
        name: "capblock-sim".into(),
        mode: Mode::Live,
        account_budget: Some(usd(60_000)),
        team_budgets: [("research".to_string(), usd(20_000)), ("inference".to_string(), usd(15_000))].into(),
    }
}

pub fn usd(amount: i64) -> Money {
    Money::usd(Decimal::from(amount)).expect("a whole number of dollars")
}

/// Ten rules: each asks one or two regions for one type, one or two instances, for one or two
/// days; seven live, two waiting for approval, one in dry-run; some rebuy after a failed
/// payment, some belong to a team. The seed never changes them: the market and the faults vary.
pub fn rules(now: DateTime<Utc>) -> Vec<Rule> {
    (0..10)
        .map(|i| {
            let mode = match i {
                7 | 8 => "approval",
                9 => "dry-run",
                _ => "live",
            };
            let regions = format!("\"{}\", \"{}\"", REGIONS[i % 4], REGIONS[(i + 1) % 4]);
            let (ty, _) = TYPES[i % 3];
            // Every third rule extends its blocks when EC2 offers a day or two at its price.
            let extend = if i % 3 == 0 {
                "extend = { max_price_per_accelerator_hour = \"6\", max_days = 2, decide_hours_before_end = 24 }\n"
            } else {
                ""
            };
            let team = match i % 4 {
                0 => "team = \"research\"\n",
                1 => "team = \"inference\"\n",
                _ => "",
            };
            let text = format!(
                "id = \"rule-{i}\"\nmode = \"{mode}\"\nregions = [{regions}]\ninstance_types = [\"{ty}\"]\n\
                 instance_counts = [1, 2]\ndurations_days = [1, 2]\n\
                 start_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
                 max_price_per_accelerator_hour = \"{price}\"\nmonthly_budget = \"{budget}\"\n\
                 max_purchases_per_month = {purchases}\nmax_blocks_held = {held}\n\
                 rebuy_on_payment_failure = {rebuy}\n{team}{extend}",
                price = 3 + i % 3,
                budget = 4_000 + 1_500 * (i % 4),
                purchases = 2 + i % 3,
                held = 1 + i % 2,
                rebuy = i % 2 == 0,
            );
            Rule::from_toml(&text, now).unwrap_or_else(|e| panic!("the simulation's rule {i} is valid: {e:?}"))
        })
        .collect()
}

/// The market: what is on sale and when each offering goes.
pub struct Market {
    next: u64,
    goes_at: BTreeMap<String, DateTime<Utc>>,
}

impl Market {
    pub fn new() -> Market {
        Market { next: 0, goes_at: BTreeMap::new() }
    }

    /// One step of the market: a few new blocks (some under the rules' thresholds, most
    /// above), and the ones whose time on sale is over taken off.
    pub fn step(&mut self, rng: &mut ChaCha8Rng, now: DateTime<Utc>) -> (Vec<Offering>, Vec<String>) {
        let gone: Vec<String> = self.goes_at.iter().filter(|(_, at)| **at <= now).map(|(id, _)| id.clone()).collect();
        for id in &gone {
            self.goes_at.remove(id);
        }
        let mut new = Vec::new();
        for region in REGIONS {
            for (ty, accelerators) in TYPES {
                if !rng.random_bool(0.04) {
                    continue;
                }
                self.next += 1;
                let count: u32 = rng.random_range(1..=2);
                let days: i64 = rng.random_range(1..=2);
                // EC2's blocks start at 11:30 UTC.
                let day = now.date_naive() + chrono::Days::new(rng.random_range(1..=16));
                let start = day.and_hms_opt(11, 30, 0).expect("a valid time").and_utc();
                let end = start + Duration::days(days);
                let cents_per_accelerator_hour: i64 = rng.random_range(150..=900);
                let hours = days * 24;
                let fee = Decimal::new(cents_per_accelerator_hour * hours * i64::from(accelerators * count), 2);
                let id = format!("cb-{:06}", self.next);
                new.push(Offering {
                    id: id.clone(),
                    region: region.parse::<Region>().expect("a known region"),
                    availability_zone: format!("{region}a"),
                    instance_type: ty.parse::<InstanceType>().expect("a known type"),
                    instance_count: count,
                    start,
                    end,
                    duration_hours: hours as u32,
                    duration_minutes: 0,
                    fee: Money::usd(fee).expect("a valid fee"),
                    ultraserver: false,
                    ultraservers: None,
                    local_zone: false,
                });
                let on_sale_for = Duration::minutes(rng.random_range(10..=600));
                self.goes_at.insert(id, (now + on_sale_for).with_second(0).unwrap_or(now + on_sale_for));
            }
        }
        (new, gone)
    }
}
