//! Purchase rules: what to buy, where, when and at what price. Operators write them as TOML;
//! `RuleSpec::validate` turns a file into a `Rule` or into the full list of what is wrong
//! with it, each problem named by its field.
//!
//! The rule's parts, in modules named for what they hold: `limits` (the bounds a rule is
//! checked against), `spec` (a rule file as written: parsing, unknown keys, and a rule written
//! back as a file) and `validation` (every field checked, every problem named). This module
//! holds the validated `Rule` and what the scan asks of it.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::actions::{self, Action, ActionLimits, ActionSpec};
use super::ids::{InstanceType, Region, is_team_name, prefix};
use super::lifecycle::termination_lead;
use super::money::{Currency, Money};
use super::offering::Offering;
use super::share::{MAX_SHARE_PRINCIPALS, SharePrincipal};
use super::ultraserver::{self, UltraServerType, UltraServers};
use super::usage::DEFAULT_IDLE_ALERT_MINUTES;

mod limits;
mod spec;
mod validation;

pub use self::limits::*;
pub use self::spec::*;

/// What the scan may do for a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Decide and announce, call PurchaseCapacityBlock with DryRun: nothing is bought.
    #[default]
    DryRun,
    /// Buy for real.
    Live,
    /// Decide, store the decision and ask a person in Slack: `capblock approve <intent>` buys it.
    Approval,
}

impl Mode {
    /// The stricter of the stack's and the rule's modes: a rule can be live only in a live stack.
    /// Approval in a live stack means "ask"; in a dry-run stack it stays a dry run.
    pub fn and(self, other: Mode) -> Mode {
        match (self, other) {
            (Mode::DryRun, _) | (_, Mode::DryRun) => Mode::DryRun,
            (Mode::Live, Mode::Live) => Mode::Live,
            _ => Mode::Approval,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::DryRun => "dry-run",
            Mode::Live => "live",
            Mode::Approval => "approval",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dry-run" => Ok(Mode::DryRun),
            "live" => Ok(Mode::Live),
            "approval" => Ok(Mode::Approval),
            other => Err(format!("unknown mode {other:?}: expected \"dry-run\", \"live\" or \"approval\"")),
        }
    }
}

fn default_idle_alert_u32() -> u32 {
    DEFAULT_IDLE_ALERT_MINUTES
}

fn default_drought_days_u32() -> u32 {
    DEFAULT_DROUGHT_DAYS
}

/// Duration steps EC2 sells: 1-day steps to 14 days, then 7-day steps to 182 days.
pub fn is_sellable_duration_days(days: i64) -> bool {
    (1..=14).contains(&days) || (days > 14 && days <= 182 && days % 7 == 0)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartWindow {
    Relative { earliest: Duration, latest: Duration },
    Absolute { earliest: DateTime<Utc>, latest: DateTime<Utc> },
}

impl StartWindow {
    /// The instants a block may start between, as seen at `now`; never earlier than `now`
    /// and never past what EC2 sells.
    pub fn resolve(&self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        // Saturating: `now` comes from outside, and the end of time is not worth a panic.
        let plus = |d: Duration| now.checked_add_signed(d).unwrap_or(DateTime::<Utc>::MAX_UTC);
        let (a, b) = match self {
            StartWindow::Relative { earliest, latest } => (plus(*earliest), plus(*latest)),
            StartWindow::Absolute { earliest, latest } => (*earliest, *latest),
        };
        (a.max(now), b.min(plus(MAX_START_AHEAD)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extend {
    pub max_price_per_accelerator_hour: Decimal,
    pub max_days: u32,
    pub decide_hours_before_end: u32,
}

/// The prefix of the rule id a person's request buys under (`domain::request::Request::as_rule`),
/// reserved so its guard and budget items are apart from every rule a person writes.
pub const REQUEST_RULE_PREFIX: &str = "request-";

/// A validated rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    pub description: String,
    pub enabled: bool,
    pub mode: Mode,
    pub regions: Vec<Region>,
    /// Empty for a rule that asks for UltraServers.
    pub instance_types: Vec<InstanceType>,
    pub instance_counts: Vec<u32>,
    /// Empty for a rule that asks for instances.
    #[serde(default)]
    pub ultraserver_types: Vec<UltraServerType>,
    #[serde(default)]
    pub ultraserver_counts: Vec<u32>,
    pub durations_days: Vec<u32>,
    pub start_window: StartWindow,
    pub currency: Currency,
    pub max_price_per_accelerator_hour: Decimal,
    pub max_total_fee: Option<Money>,
    pub monthly_budget: Money,
    pub instance_platform: String,
    pub max_blocks_held: u32,
    pub max_purchases_per_month: u32,
    pub rebuy_on_payment_failure: bool,
    pub tags: BTreeMap<String, String>,
    pub extend: Option<Extend>,
    /// A block may be this many hours shorter or longer than a duration the rule asks for
    /// (EC2's closest matches for blocks starting the same day).
    #[serde(default = "default_tolerance_u32")]
    pub duration_tolerance_hours: u32,
    /// Whether offerings in Local Zones may be bought.
    #[serde(default)]
    pub local_zones: bool,
    /// Kept so `rules show` tells why a region or a limit past the usual was accepted.
    #[serde(default)]
    pub allow_unknown_regions: bool,
    #[serde(default)]
    pub unlimited: bool,
    /// What to do for the workloads at points of each block's life (stored rules without the
    /// key have none).
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Stored rules without the key alert after the default hour.
    #[serde(default = "default_idle_alert_u32")]
    pub idle_alert_minutes: u32,
    /// See `RuleSpec::drought_days`; 0 never says.
    #[serde(default = "default_drought_days_u32")]
    pub drought_days: u32,
    /// Stored rules without the key belong to no team.
    #[serde(default)]
    pub team: Option<String>,
    /// Stored rules without the key share nothing.
    #[serde(default)]
    pub share_with: Vec<SharePrincipal>,
    /// Stored rules without the key act in this account.
    #[serde(default)]
    pub handoff_account: Option<String>,
    /// The request (`domain::request`) this one-shot rule buys for: its purchase consumes the
    /// request's approval. Rules people write have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<crate::domain::ids::RequestKey>,
}

fn default_tolerance_u32() -> u32 {
    DEFAULT_DURATION_TOLERANCE_HOURS
}

/// The least a block a rule accepts could cost, and the block: the rule's smallest (type,
/// count), for its shortest duration less `duration_tolerance_hours` (EC2's closest matches),
/// at `catalog::PRICE_FLOOR_PER_ACCELERATOR_HOUR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeastFee {
    pub fee: Decimal,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub accelerators: u32,
    pub hours: u32,
}

impl Rule {
    /// [`LeastFee`] over the (type, count)s the built-in accelerator table knows (a type it does
    /// not know proves nothing: it is left out), `None` when it knows none of them or the rule
    /// is not priced in USD (the floor is in USD).
    pub fn least_fee(&self) -> Option<LeastFee> {
        if self.currency != Currency::USD {
            return None;
        }
        let catalog = super::catalog::AcceleratorCatalog::new();
        let days = self.durations_days.iter().copied().min()?;
        let hours = (days * 24).saturating_sub(self.duration_tolerance_hours).max(1);
        self.asks()
            .into_iter()
            .filter_map(|a| {
                let accelerators = catalog.accelerators(&a.instance_type)?;
                let units = u64::from(hours) * u64::from(a.instance_count) * u64::from(accelerators);
                Some(LeastFee {
                    fee: Decimal::from(units) * super::catalog::PRICE_FLOOR_PER_ACCELERATOR_HOUR,
                    instance_type: a.instance_type,
                    instance_count: a.instance_count,
                    accelerators,
                    hours,
                })
            })
            .min_by_key(|l| l.fee)
    }

    /// When `max_total_fee` is below what the least block this rule accepts costs at its own
    /// threshold, that in words: the cap, not the threshold, then sets the price it buys at (a
    /// valid rule, but one that waits for a price its threshold does not say). `None` when the
    /// cap is above, absent, or the accelerators are not known (`least_fee`).
    pub fn fee_cap_below_threshold(&self) -> Option<String> {
        let max = self.max_total_fee?;
        let least = self.least_fee()?;
        let units =
            Decimal::from(u64::from(least.hours) * u64::from(least.instance_count) * u64::from(least.accelerators));
        let at_threshold = units * self.max_price_per_accelerator_hour;
        if max.amount() >= at_threshold {
            return None;
        }
        let cur = self.currency;
        let round = |d: Decimal| d.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::ToZero);
        Some(format!(
            "{max} is below one block at the threshold: the least block this rule accepts ({} x {}, {} \
             accelerators each, for {}) costs {:.2} {cur} at {} {cur} per accelerator-hour, so it buys only at \
             {:.2} {cur} per accelerator-hour or less; raise max_total_fee to at least {:.2} or lower the threshold",
            least.instance_count,
            least.instance_type,
            least.accelerators,
            super::duration::compact(Duration::hours(i64::from(least.hours))),
            at_threshold.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::AwayFromZero),
            self.max_price_per_accelerator_hour.normalize(),
            round(max.amount() / units),
            at_threshold.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::AwayFromZero),
        ))
    }
}

impl Rule {
    /// The duration (in days) this rule asks for that the block's length matches: exactly, or
    /// within `duration_tolerance_hours` (EC2's closest matches), the nearest one if several.
    pub fn matching_days(&self, block_minutes: u32) -> Option<u32> {
        let tolerance = i64::from(self.duration_tolerance_hours) * 60;
        self.durations_days
            .iter()
            .map(|&d| (d, (i64::from(block_minutes) - i64::from(d) * 24 * 60).abs()))
            .filter(|&(_, off)| off <= tolerance)
            .min_by_key(|&(d, off)| (off, d))
            .map(|(d, _)| d)
    }

    /// What the rule searches for, one entry per (type, count): instances, or UltraServers
    /// (then the instance type and count are the UltraServers' own, as EC2's offerings name them).
    pub fn asks(&self) -> Vec<Ask> {
        let instances = self.instance_types.iter().flat_map(|t| {
            self.instance_counts.iter().map(|&n| Ask {
                instance_type: t.clone(),
                instance_count: n,
                ultraservers: None,
            })
        });
        let ultra = self.ultraserver_types.iter().flat_map(|&kind| {
            self.ultraserver_counts.iter().filter_map(move |&count| {
                let u = UltraServers { kind, count };
                Some(Ask {
                    instance_type: kind.instance_type().ok()?,
                    instance_count: u.instances(),
                    ultraservers: Some(u),
                })
            })
        });
        instances.chain(ultra).collect()
    }

    /// The instance types whose accelerators price the rule's offerings.
    pub fn priced_types(&self) -> Vec<InstanceType> {
        let mut v: Vec<InstanceType> = self.asks().into_iter().map(|a| a.instance_type).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Whether the offering is of a kind and size the rule asks for: an UltraServer offering
    /// for an UltraServer rule (type and count), an instance offering for an instance rule. A
    /// segmented offering is asked for when every segment is of one of the rule's types and
    /// its instances in all are one of the rule's counts: one segment of another type and the
    /// purchase would hold a block the rule never asked for.
    pub fn asks_for(&self, o: &Offering) -> bool {
        if !o.segments.is_empty() {
            return o.segments.iter().all(|s| self.instance_types.contains(&s.instance_type))
                && self.instance_counts.contains(&o.instance_count);
        }
        match (&o.ultraservers, o.ultraserver) {
            (Some(u), _) => self.ultraserver_types.contains(&u.kind) && self.ultraserver_counts.contains(&u.count),
            // An UltraServer of a type capblock does not know: no rule can name it.
            (None, true) => false,
            (None, false) => {
                self.instance_types.contains(&o.instance_type) && self.instance_counts.contains(&o.instance_count)
            }
        }
    }

    /// Parses and validates a TOML rule file.
    pub fn from_toml(text: &str, now: DateTime<Utc>) -> Result<Rule, RuleError> {
        RuleSpec::from_toml(text)?.validate(now)
    }
}

/// One (type, count) a rule searches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub instance_type: InstanceType,
    pub instance_count: u32,
    /// Set when the search names UltraServers (UltraserverType + UltraserverCount).
    pub ultraservers: Option<UltraServers>,
}

#[cfg(test)]
mod tests;
