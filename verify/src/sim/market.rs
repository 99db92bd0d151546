//! The stack the simulation runs: twelve rules over four regions (live, approval and dry-run;
//! ten of instances, two of UltraServers; two teams; team and account caps below what their
//! rules' budgets add up to, so they bind), and a market that puts blocks on sale at seeded
//! prices and takes them off again: single blocks, UltraServers, and segmented offerings (one
//! purchase of a block per segment, EC2 since 2026-11-17), most within what a rule allows, some
//! with one segment of another type or in a Local Zone.

use std::collections::BTreeMap;

use capblock_core::domain::ids::{InstanceType, Region};
use capblock_core::domain::money::Money;
use capblock_core::domain::offering::{Offering, OfferingSegment};
use capblock_core::domain::rule::{Mode, Rule};
use capblock_core::domain::stack::StackSettings;
use capblock_core::domain::ultraserver::{UltraServerType, UltraServers};
use chrono::{DateTime, Duration, Timelike, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;

pub const REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1"];
pub const TYPES: [(&str, u32); 3] = [("p5.48xlarge", 8), ("p4d.24xlarge", 8), ("trn1.32xlarge", 16)];
/// The UltraServer the UltraServer rules buy: 4 x trn2u.48xlarge of 16 Trainium2 chips each.
pub const ULTRASERVER: &str = "u-trn2x64";
const ULTRA_ACCELERATORS: u32 = 16;

/// Accelerators per instance of a type the simulation sells.
pub fn accelerators(instance_type: &str) -> u32 {
    TYPES.iter().find(|(t, _)| *t == instance_type).map_or(ULTRA_ACCELERATORS, |(_, a)| *a)
}

/// The stack: its settings (live, an account cap, two teams) and its twelve rules. The rules'
/// monthly budgets add up to 75,500 USD (research's four to 20,000, inference's three to
/// 16,500): the caps are below, so a team's or the account's budget refuses some purchases
/// every rule's own would admit.
pub fn stack() -> StackSettings {
    StackSettings {
        name: "capblock-sim".into(),
        mode: Mode::Live,
        account_budget: Some(usd(45_000)),
        team_budgets: [("research".to_string(), usd(14_000)), ("inference".to_string(), usd(12_000))].into(),
    }
}

pub fn usd(amount: i64) -> Money {
    Money::usd(Decimal::from(amount)).expect("a whole number of dollars")
}

/// Twelve rules. Ten ask one or two regions for one type, one or two instances, for one or two
/// days; seven of them live, two waiting for approval, one in dry-run; some rebuy after a failed
/// payment, some belong to a team. Two more, live, ask for one or two UltraServers. The seed
/// never changes them: the market and the faults vary.
pub fn rules(now: DateTime<Utc>) -> Vec<Rule> {
    let mut rules = instance_rules(now);
    rules.extend((10..12).map(|i| ultraserver_rule(i, now)));
    rules
}

/// An UltraServer rule: one or two u-trn2x64 for a day, in two regions; rule 10 is research's.
fn ultraserver_rule(i: usize, now: DateTime<Utc>) -> Rule {
    let team = if i == 10 { "team = \"research\"\n" } else { "" };
    let text = format!(
        "id = \"rule-{i}\"\nmode = \"live\"\nregions = [\"{}\", \"{}\"]\nultraserver_types = [\"{ULTRASERVER}\"]\n\
         ultraserver_counts = [1, 2]\ndurations_days = [1]\n\
         start_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"8000\"\n\
         max_purchases_per_month = 2\nmax_blocks_held = 1\nrebuy_on_payment_failure = {}\n{team}",
        REGIONS[i % 4],
        REGIONS[(i + 1) % 4],
        i == 11,
    );
    Rule::from_toml(&text, now).unwrap_or_else(|e| panic!("the simulation's rule {i} is valid: {e:?}"))
}

fn instance_rules(now: DateTime<Utc>) -> Vec<Rule> {
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
    segmented: u64,
    goes_at: BTreeMap<String, DateTime<Utc>>,
    /// The segmented offerings' own draws, apart from the seed's stream (None: none on sale).
    segments_rng: Option<ChaCha8Rng>,
}

impl Market {
    /// The market of `seed`. An odd seed's sells segmented offerings too; an even seed's does
    /// not, so the runs an even seed was chosen for (its faults, its purchases) stay as they
    /// were before segmented offerings were sold.
    pub fn new(seed: u64) -> Market {
        let segments_rng = (seed % 2 == 1).then(|| ChaCha8Rng::seed_from_u64(seed ^ 0x5e9_3e47));
        Market { next: 0, segmented: 0, goes_at: BTreeMap::new(), segments_rng }
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
            if let Some(o) = self.segmented_offering(now, region) {
                new.push(o);
            }
            if rng.random_bool(0.03) {
                self.next += 1;
                new.push(self.ultraserver_offering(rng, now, region));
            }
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
                    segments: Vec::new(),
                });
                self.on_sale_for(rng, now, id);
            }
        }
        (new, gone)
    }

    fn on_sale_for(&mut self, rng: &mut ChaCha8Rng, now: DateTime<Utc>, id: String) {
        let on_sale_for = Duration::minutes(rng.random_range(10..=600));
        self.goes_at.insert(id, (now + on_sale_for).with_second(0).unwrap_or(now + on_sale_for));
    }

    /// Now and then a segmented offering in `region`: two segments of one instance of a type,
    /// in two zones (what an instance rule of that type and two instances allows), at 1.50 to 6
    /// USD per accelerator-hour, each segment at its own price. One in four breaks a rule's
    /// limit on one segment: its second segment of another type, or in a Local Zone.
    fn segmented_offering(&mut self, now: DateTime<Utc>, region: &str) -> Option<Offering> {
        let rng = self.segments_rng.as_mut()?;
        if !rng.random_bool(0.004) {
            return None;
        }
        let ty = TYPES[rng.random_range(0..TYPES.len())].0;
        let day = now.date_naive() + chrono::Days::new(rng.random_range(1..=16));
        let start = day.and_hms_opt(11, 30, 0).expect("a valid time").and_utc();
        let mut segments = Vec::new();
        for zone in ["a", "b"] {
            let cents: i64 = rng.random_range(150..=600);
            let fee = Decimal::new(cents * 24 * i64::from(accelerators(ty)), 2);
            segments.push(OfferingSegment {
                availability_zone: format!("{region}{zone}"),
                instance_type: ty.parse::<InstanceType>().expect("a known type"),
                instance_count: 1,
                fee: Money::usd(fee).expect("a valid fee"),
                local_zone: false,
            });
        }
        match rng.random_range(0..8) {
            // Another type: no rule names two.
            0 => segments[1].instance_type = TYPES[(TYPES.iter().position(|t| t.0 == ty)? + 1) % 2].0.parse().ok()?,
            1 => {
                segments[1].availability_zone = format!("{region}-lax-1a");
                segments[1].local_zone = true;
            }
            _ => {}
        }
        // Ids of their own: the other offerings keep theirs.
        self.segmented += 1;
        let id = format!("cb-seg{:05}", self.segmented);
        self.on_sale_for_segmented(now, id.clone());
        let fee = segments.iter().map(|s| s.fee.amount()).sum();
        Some(Offering {
            id,
            region: region.parse::<Region>().expect("a known region"),
            availability_zone: segments[0].availability_zone.clone(),
            instance_type: segments[0].instance_type.clone(),
            instance_count: segments.iter().map(|s| s.instance_count).sum(),
            start,
            end: start + Duration::days(1),
            duration_hours: 24,
            duration_minutes: 0,
            fee: Money::usd(fee).expect("a valid fee"),
            ultraserver: false,
            ultraservers: None,
            local_zone: segments.iter().any(|s| s.local_zone),
            segments,
        })
    }

    fn on_sale_for_segmented(&mut self, now: DateTime<Utc>, id: String) {
        let minutes = self.segments_rng.as_mut().map_or(600, |rng| rng.random_range(10..=600));
        let on_sale_for = Duration::minutes(minutes);
        self.goes_at.insert(id, (now + on_sale_for).with_second(0).unwrap_or(now + on_sale_for));
    }

    /// One or two u-trn2x64 for a day (EC2 sells them in whole UltraServers: one reservation
    /// each), at 1.50 to 5 USD per accelerator-hour.
    fn ultraserver_offering(&mut self, rng: &mut ChaCha8Rng, now: DateTime<Utc>, region: &str) -> Offering {
        let kind: UltraServerType = ULTRASERVER.parse().expect("a known UltraServer");
        let u = UltraServers { kind, count: rng.random_range(1..=2) };
        let day = now.date_naive() + chrono::Days::new(rng.random_range(1..=16));
        let start = day.and_hms_opt(11, 30, 0).expect("a valid time").and_utc();
        let cents: i64 = rng.random_range(150..=500);
        let fee = Decimal::new(cents * 24 * i64::from(ULTRA_ACCELERATORS * u.instances()), 2);
        let id = format!("cb-{:06}", self.next);
        self.on_sale_for(rng, now, id.clone());
        Offering {
            id,
            region: region.parse::<Region>().expect("a known region"),
            availability_zone: format!("{region}a"),
            instance_type: kind.instance_type().expect("a known type"),
            instance_count: u.instances(),
            start,
            end: start + Duration::days(1),
            duration_hours: 24,
            duration_minutes: 0,
            fee: Money::usd(fee).expect("a valid fee"),
            ultraserver: true,
            ultraservers: Some(u),
            local_zone: false,
            segments: Vec::new(),
        }
    }
}
