//! The market memory's bookkeeping around one run of questions: what the regions' memories
//! (`plan::RegionMemory`) carry into the run's lanes (`Carried`), and what the run's answers
//! leave in them (an answer's cheapest price and whether it goes to the price history, each
//! family's refusals, the paces learned). Pure: `app::scan` asks the market and stores the
//! memories; this decides what is remembered, so it is tested without a market.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use super::ids::Region;
use super::pace::Pace;
use super::plan::{Asked, Refusals, RegionMemory, member_of_key};

/// Rested refusals in a row per (region, family), carried from run to run.
pub type Strikes = BTreeMap<(Region, String), u32>;

/// What earlier runs leave the lanes, per (region, family).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Rested refusals in a row.
    pub strikes: Strikes,
    /// Families whose refusals may conclude a quota of 0 this run (spread over runs and time).
    pub conclusive: BTreeSet<(Region, String)>,
    /// Families with a quota of 0 noted: one call this run, not retried.
    pub probes: BTreeSet<(Region, String)>,
    /// The pace each region's lane starts at (learned by earlier runs; else the bounds' start).
    pub paces: BTreeMap<Region, Pace>,
    /// The pace each member account's lane starts at, per (region, account).
    pub helper_paces: BTreeMap<(Region, String), Pace>,
    /// (region, account, family): a member refused on every call of the family in an earlier
    /// run; one call of it this run, not retried.
    pub helper_probes: BTreeSet<(Region, String, String)>,
}

impl From<Strikes> for Carried {
    fn from(strikes: Strikes) -> Carried {
        Carried { strikes, ..Default::default() }
    }
}

impl Carried {
    /// What the regions' memories carry into a run at `now`.
    pub fn from_memories(memories: &BTreeMap<Region, RegionMemory>, now: DateTime<Utc>) -> Carried {
        let mut carried = Carried::default();
        for (region, m) in memories {
            for (f, r) in &m.refusals {
                let key = (region.clone(), f.clone());
                if r.conclusive(now) {
                    carried.conclusive.insert(key.clone());
                }
                carried.strikes.insert(key, r.count);
            }
            carried.probes.extend(m.quota_zero.keys().map(|f| (region.clone(), f.clone())));
            if let Some(p) = m.pace {
                carried.paces.insert(region.clone(), p);
            }
            for (account, p) in &m.helper_paces {
                carried.helper_paces.insert((region.clone(), account.clone()), *p);
            }
            for key in m.member_refused.keys() {
                if let Some((account, fam)) = member_of_key(key) {
                    carried.helper_probes.insert((region.clone(), account.to_string(), fam.to_string()));
                }
            }
        }
        carried
    }
}

/// How often a question's answer goes to the price history while its price stays the same
/// (every change goes at once): the resolution the history had when scans ran every 10 minutes.
pub const HISTORY_EVERY: Duration = Duration::minutes(10);

/// Notes the answer to question `key` (its cheapest price per accelerator-hour, if it held an
/// offering) in the region's memory; returns whether the answer goes to the price history: when
/// its price changed, or `HISTORY_EVERY` after the last one it got. A scan every minute would
/// otherwise write every offering it sees every minute.
pub fn note_answer(memory: &mut RegionMemory, key: String, cheapest: Option<Decimal>, now: DateTime<Utc>) -> bool {
    let prev = memory.asked.get(&key);
    let last = prev.and_then(|a| a.recorded);
    let due = prev.is_none_or(|a| a.cheapest != cheapest) || last.is_none_or(|t| now - t >= HISTORY_EVERY);
    let recorded = if due { Some(now) } else { last };
    memory.asked.insert(key, Asked { at: now, cheapest, recorded });
    due
}

/// Each family's refusals as a run at `now` leaves them, in the regions it asked (`asked`; the
/// others' are as they were): a family refused after resting this run (`refused`) gets its
/// `strikes` added to its record, one not refused keeps its record, one with neither is
/// forgotten. Returns the records as they were before the run, which name a finding's refusals.
pub fn settle_refusals(
    memories: &mut BTreeMap<Region, RegionMemory>,
    asked: &BTreeSet<Region>,
    strikes: &Strikes,
    refused: &BTreeSet<(Region, String)>,
    now: DateTime<Utc>,
) -> BTreeMap<(Region, String), Refusals> {
    let mut before = BTreeMap::new();
    for (region, m) in memories.iter_mut().filter(|(r, _)| asked.contains(*r)) {
        let earlier = std::mem::take(&mut m.refusals);
        for ((r, f), &count) in strikes.iter().filter(|((r, _), _)| r == region) {
            let key = (r.clone(), f.clone());
            let record = if refused.contains(&key) {
                Refusals::after_run(earlier.get(f), count, now)
            } else {
                match earlier.get(f) {
                    Some(e) => e.clone(),
                    None => continue,
                }
            };
            m.refusals.insert(f.clone(), record);
        }
        before.extend(earlier.into_iter().map(|(f, r)| ((region.clone(), f), r)));
    }
    before
}

/// Keeps the paces a run's lanes ended with: each region's, and each member account's
/// (`helper_paces`, per (region, account)); a member no longer lending its limit (`lends`
/// false) is forgotten in each region asked.
pub fn keep_paces(
    memories: &mut BTreeMap<Region, RegionMemory>,
    paces: &BTreeMap<Region, Pace>,
    helper_paces: &BTreeMap<(Region, String), Pace>,
    lends: impl Fn(&str) -> bool,
) {
    for (region, pace) in paces {
        let memory = memories.entry(region.clone()).or_default();
        memory.pace = Some(*pace);
        memory.helper_paces.retain(|a, _| lends(a));
    }
    for ((region, account), pace) in helper_paces {
        memories.entry(region.clone()).or_default().helper_paces.insert(account.clone(), *pace);
    }
}

#[cfg(test)]
mod tests;
