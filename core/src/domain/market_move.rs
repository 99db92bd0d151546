//! When the market moves away from a rule: the two notes a rule's thread gets once per episode.
//!
//! Capacity Block prices stepped twice in 2026 (about +15 % on p5e/p5en early in the year, then
//! about +20 % outside and +32 % inside the US for p5 and p6 by July). A rule with a fixed
//! threshold then buys nothing and says nothing. From the stored price history this module
//! finds:
//!
//! - a **step** in the price level of a rule's region and type (and UltraServer kind): the level
//!   of a day is the cheapest price per accelerator-hour seen that day (what a rule could have
//!   bought; one dear offering never moves it), and the level steps when [`SUSTAIN_DAYS`] days in
//!   a row all sit at least [`MIN_STEP_PERCENT`] above (or below) the level before. One odd day
//!   is not a step, nor is noise within the band. The episode is the step, named by its first
//!   day at the new level ([`Step::milestone`]): the same step found by every later run gets the
//!   same outbox key, so the outbox says it once; the next step has another day, so another key.
//! - a **drought**: the rule has seen offerings (its regions, kind, counts and durations, its
//!   currency) for at least its `drought_days`, and none at or under its threshold since. The
//!   note names the cheapest seen and replays the drought's history ([`super::backtest`]) at the
//!   cheapest seen price rounded up to the cent, the lowest threshold that would have bought
//!   anything, with the rule's budget and limits: what the rule would have bought, if anything.
//!   The episode ends when the rule sees an offering at or under its threshold; a drought
//!   already told (a note of this threshold written after the last such offering: `told`) is
//!   not told again, however the history window slides.
//!
//! Where it runs: in scan-offerings, after the scan recorded what it saw and decided
//! (`app::market_move`). The scan is the function that writes the history and already holds
//! the port that reads it back, and it is the one that knows the rules' thresholds as they are
//! used; the tracker's role reads no history, and giving it one would widen a role for a job the
//! scan does with what it has. Reading weeks of history every minute would cost more than the
//! scan itself, so each region is checked on the first scan of each UTC hour (the region's
//! memory says when it was last asked): a step is days long, an hour late is on time.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::backtest::{Bought, Sample, backtest};
use super::ids::{InstanceType, Region};
use super::message_kind::MessageKind;
use super::offering::Offering;
use super::rule::Rule;

/// A day's level at least this far from the level before, for [`SUSTAIN_DAYS`] days, is a step.
/// 10 %: under the smallest 2026 step (+15 %) and over the day-to-day spread of one type's
/// offerings in one region.
pub const MIN_STEP_PERCENT: Decimal = Decimal::from_parts(10, 0, 0, false, 0);

/// Days in a row (days with observations) a new level must hold to be a step.
pub const SUSTAIN_DAYS: usize = 3;

/// Days whose median is the level a history starts from.
pub const BASE_DAYS: usize = 3;

/// How far back a step is news: a rule made today hears of last week's step, not last year's.
pub const STEP_NEWS: Duration = Duration::days(14);

/// How much history the step check reads: the news window, with the base days and the
/// sustained days before and after it.
pub const STEP_LOOKBACK: Duration = Duration::days(28);

/// The history a check of `rule` reads back from `now`: enough for a step and for its drought.
pub fn lookback(rule: &Rule) -> Duration {
    STEP_LOOKBACK.max(Duration::days(i64::from(rule.drought_days) + 1))
}

/// Whether a region is checked this run: on the first run of each UTC hour, the one after a run
/// (`last_asked`, from the region's memory) of another hour.
pub fn due(last_asked: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    let hour = |t: DateTime<Utc>| t.timestamp().div_euclid(3600);
    last_asked.is_none_or(|t| hour(t) != hour(now))
}

/// The instance types whose history a rule's check reads: its types, and its UltraServers'.
pub fn types_of(rule: &Rule) -> Vec<InstanceType> {
    let mut types = rule.instance_types.clone();
    types.extend(rule.ultraserver_types.iter().filter_map(|u| u.instance_type().ok()));
    types.sort();
    types.dedup();
    types
}

/// A region, instance type and UltraServer kind: one market with one price level.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Market {
    pub region: Region,
    pub instance_type: InstanceType,
    /// The UltraServer type, for UltraServer offerings (priced apart from single instances).
    pub ultraserver_type: Option<String>,
}

impl Market {
    fn of(o: &Offering) -> Market {
        Market {
            region: o.region.clone(),
            instance_type: o.instance_type.clone(),
            ultraserver_type: o.ultraservers.as_ref().map(|u| u.kind.as_str().to_string()),
        }
    }

    /// How a person reads it: `p5.48xlarge in us-east-1`.
    pub fn describe(&self) -> String {
        match &self.ultraserver_type {
            Some(u) => format!("{u} ({}) in {}", self.instance_type, self.region),
            None => format!("{} in {}", self.instance_type, self.region),
        }
    }
}

/// A sustained change of a market's price level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The first day at the new level.
    pub day: NaiveDate,
    /// Per accelerator-hour, before and after.
    pub old: Decimal,
    pub new: Decimal,
}

impl Step {
    /// The change, in percent of the old level, to one decimal.
    pub fn percent(&self) -> Decimal {
        if self.old.is_zero() {
            return Decimal::ZERO;
        }
        ((self.new - self.old) * Decimal::ONE_HUNDRED / self.old).round_dp(1)
    }
}

/// The day levels of one market's samples: the cheapest per accelerator-hour seen each UTC day.
pub fn day_levels(prices: impl IntoIterator<Item = (DateTime<Utc>, Decimal)>) -> Vec<(NaiveDate, Decimal)> {
    let mut days: BTreeMap<NaiveDate, Decimal> = BTreeMap::new();
    for (at, p) in prices {
        days.entry(at.date_naive()).and_modify(|m| *m = (*m).min(p)).or_insert(p);
    }
    days.into_iter().collect()
}

fn median(values: &[Decimal]) -> Decimal {
    let mut v = values.to_vec();
    v.sort();
    let n = v.len();
    if n == 0 {
        return Decimal::ZERO;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / Decimal::TWO }
}

/// The steps of a series of day levels (oldest first): the level starts as the median of the
/// first [`BASE_DAYS`]; a step is [`SUSTAIN_DAYS`] days in a row all [`MIN_STEP_PERCENT`] or more
/// on one side of it, and its new level is their median, from which the walk goes on.
pub fn steps(levels: &[(NaiveDate, Decimal)]) -> Vec<Step> {
    let mut found = Vec::new();
    if levels.len() < BASE_DAYS + SUSTAIN_DAYS {
        return found;
    }
    let values: Vec<Decimal> = levels.iter().map(|(_, p)| *p).collect();
    let mut level = median(&values[..BASE_DAYS]);
    let mut i = BASE_DAYS;
    while i + SUSTAIN_DAYS <= values.len() {
        let band = level * MIN_STEP_PERCENT / Decimal::ONE_HUNDRED;
        let window = &values[i..i + SUSTAIN_DAYS];
        let up = window.iter().all(|p| *p >= level + band);
        let down = window.iter().all(|p| *p <= level - band);
        if up || down {
            let new = median(window);
            found.push(Step { day: levels[i].0, old: level, new });
            level = new;
            i += SUSTAIN_DAYS;
        } else {
            i += 1;
        }
    }
    found
}

/// A rule has seen offerings for its `drought_days` and none at or under its threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drought {
    pub threshold: Decimal,
    /// The first offering seen after the last one at or under the threshold (or the first in
    /// the history read, when none was).
    pub since: DateTime<Utc>,
    /// When the rule last saw an offering at or under its threshold, if in the history read.
    pub last_under: Option<DateTime<Utc>>,
    pub days: i64,
    /// Observations of the rule's offerings in the drought.
    pub seen: usize,
    /// The cheapest of them, per accelerator-hour, and the offering.
    pub cheapest: Decimal,
    pub cheapest_offering: Offering,
    /// The threshold the drought was replayed at: the cheapest, rounded up to the cent.
    pub tried: Decimal,
    /// What the rule would have bought at `tried`, its budget and limits applied.
    pub would_have_bought: Vec<Bought>,
}

impl Drought {
    /// The outbox key: per threshold and drought start. Runs that overlap read the same history
    /// and agree on it; later runs are kept from telling it again by `told`.
    pub fn milestone(&self) -> String {
        format!("{}{}", drought_prefix(self.threshold), self.since.format("%Y-%m-%d"))
    }
}

/// The key prefix of the drought notes of a threshold (what `told` is read under).
pub fn drought_prefix(threshold: Decimal) -> String {
    format!("{}-", MessageKind::Drought.key_with(Some(&threshold.normalize().to_string())))
}

/// What a rule's thread is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Note {
    Stepped { market: Market, step: Step, threshold: Decimal },
    Drought(Drought),
}

impl Note {
    /// The outbox key the note is sent once under, in the rule's thread.
    pub fn milestone(&self) -> String {
        match self {
            Note::Stepped { market, step, .. } => {
                let kind = market.ultraserver_type.as_ref().map_or(String::new(), |u| format!("-{u}"));
                let detail =
                    format!("{}-{}{kind}-{}", market.region, market.instance_type, step.day.format("%Y-%m-%d"));
                MessageKind::MarketStep.key_with(Some(&detail))
            }
            Note::Drought(d) => d.milestone(),
        }
    }
}

/// Whether `o` is what the rule asks for, leaving price and start aside: its region, kind,
/// type and count, a duration it buys, its zone kind and its currency.
fn in_rule(rule: &Rule, o: &Offering) -> bool {
    rule.regions.contains(&o.region)
        && rule.asks_for(o)
        && rule.matching_days(o.total_minutes()).is_some()
        && (!o.local_zone || rule.local_zones)
        && o.fee.currency() == rule.currency
}

/// Whether `o` is of a market the rule buys in (any count or duration: a level is the market's).
fn in_market(rule: &Rule, o: &Offering) -> bool {
    rule.regions.contains(&o.region)
        && o.fee.currency() == rule.currency
        && match &o.ultraservers {
            Some(u) => rule.ultraserver_types.contains(&u.kind),
            None => !o.ultraserver && rule.instance_types.contains(&o.instance_type),
        }
}

fn price(s: &Sample) -> Option<Decimal> {
    s.offering.price_per_accelerator_hour(s.accelerators_per_instance).map(|r| r.per_unit)
}

/// The notes `rule` is due at `now`, from `samples` (the stored history of its regions and
/// types, any order) and `told` (when drought notes of its current threshold were written).
/// A disabled rule is told nothing.
pub fn notes(rule: &Rule, samples: &[Sample], told: &[DateTime<Utc>], now: DateTime<Utc>) -> Vec<Note> {
    if !rule.enabled {
        return Vec::new();
    }
    let from = now - lookback(rule);
    let samples: Vec<&Sample> = samples.iter().filter(|s| s.seen_at >= from && s.seen_at <= now).collect();
    let mut notes = Vec::new();
    let mut markets: BTreeMap<Market, Vec<(DateTime<Utc>, Decimal)>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.seen_at >= now - STEP_LOOKBACK && in_market(rule, &s.offering)) {
        if let Some(p) = price(s) {
            markets.entry(Market::of(&s.offering)).or_default().push((s.seen_at, p));
        }
    }
    for (market, prices) in markets {
        for step in steps(&day_levels(prices)) {
            if step.day >= (now - STEP_NEWS).date_naive() {
                notes.push(Note::Stepped {
                    market: market.clone(),
                    step,
                    threshold: rule.max_price_per_accelerator_hour,
                });
            }
        }
    }
    if let Some(d) = drought(rule, &samples, told, now) {
        notes.push(Note::Drought(d));
    }
    notes
}

fn drought(rule: &Rule, samples: &[&Sample], told: &[DateTime<Utc>], now: DateTime<Utc>) -> Option<Drought> {
    if rule.drought_days == 0 {
        return None;
    }
    let threshold = rule.max_price_per_accelerator_hour;
    let mut mine: Vec<(&Sample, Decimal)> =
        samples.iter().filter(|s| in_rule(rule, &s.offering)).filter_map(|s| Some((*s, price(s)?))).collect();
    mine.sort_by_key(|(s, _)| s.seen_at);
    let last_under = mine.iter().filter(|(_, p)| *p <= threshold).map(|(s, _)| s.seen_at).max();
    let dry: Vec<(&Sample, Decimal)> =
        mine.into_iter().filter(|(s, _)| last_under.is_none_or(|u| s.seen_at > u)).collect();
    let since = dry.first()?.0.seen_at;
    let days = (now - since).num_days();
    if days < i64::from(rule.drought_days) {
        return None;
    }
    // Told after the last offering under the threshold: the same episode.
    if told.iter().any(|t| last_under.is_none_or(|u| *t > u)) {
        return None;
    }
    let (cheapest_sample, cheapest) = dry.iter().min_by_key(|(s, p)| (*p, s.seen_at)).map(|(s, p)| (*s, *p))?;
    let tried = (cheapest * Decimal::ONE_HUNDRED).ceil() / Decimal::ONE_HUNDRED;
    let what_if = Rule { max_price_per_accelerator_hour: tried, ..rule.clone() };
    let history: Vec<Sample> = dry.iter().map(|(s, _)| (*s).clone()).collect();
    Some(Drought {
        threshold,
        since,
        last_under,
        days,
        seen: dry.len(),
        cheapest,
        cheapest_offering: cheapest_sample.offering.clone(),
        tried,
        would_have_bought: backtest(&what_if, &history).purchases,
    })
}

#[cfg(test)]
pub(crate) mod tests;
