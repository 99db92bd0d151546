//! The plan of one run: the regions claimed and their memories read, and the few questions
//! per region this run asks within the accounts' describe limits.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{
    MAX_QUESTIONS_PER_SCAN, MAX_REGIONS_PER_SCAN, Plan, Planned, RegionQuestions, SCAN_BOUNDS, Scanner, gather,
};
use crate::domain::ids::Region;
use crate::domain::plan::{self, Candidate, RegionMemory, family};
use crate::domain::rule::Rule;
use crate::domain::run_time::RunTime;
use crate::ports::MarketMemory;

/// How long past its asking time a run's claim on a region lasts: the deciding, buying and
/// saving after it. A run that dies leaves a claim that simply runs out.
const CLAIM_MARGIN: chrono::Duration = chrono::Duration::seconds(60);

impl<M: ?Sized, S: MarketMemory + ?Sized, N: ?Sized> Scanner<'_, M, S, N> {
    /// The distinct questions of all rules, and the few per region this run asks: what EC2 said
    /// it does not sell is skipped for a day, a family with a quota of 0 gets one probe an hour,
    /// and the planner picks the rest within the describe budget.
    pub(super) async fn plan(&self, rules: &[Rule], at: RunTime, run: &str) -> Plan {
        let now = at.view();
        let (all, skipped) = gather(rules, now, SCAN_BOUNDS);
        if !skipped.is_empty() {
            let names: Vec<&str> = skipped.iter().map(|&i| rules[i].id.as_str()).collect();
            tracing::warn!(event = "rules_skipped", rules = ?names, questions = MAX_QUESTIONS_PER_SCAN, regions = MAX_REGIONS_PER_SCAN,
                "these rules would push the scan past its questions or regions; disable or narrow some rules");
        }
        let regions: BTreeSet<Region> = all.iter().map(|p| p.question.query.region.clone()).collect();
        let (memories, mut report, claimed) = self.claim_regions(regions, at, run).await;
        let mut chosen = Vec::new();
        for (region, memory) in &memories {
            let (picked, questions) = self.choose(&all, region, memory, now);
            report.insert(region.to_string(), questions);
            chosen.extend(picked);
        }
        Plan { all, chosen, read: memories.clone(), memories, regions: report, skipped, claimed }
    }

    /// Claims the asking of each region for this run and reads its memory: a region another
    /// scan is asking is left to it (reported `elsewhere`, not read). Returns the memories, the
    /// report of the regions left, and the regions claimed.
    async fn claim_regions(
        &self,
        regions: BTreeSet<Region>,
        at: RunTime,
        run: &str,
    ) -> (BTreeMap<Region, RegionMemory>, BTreeMap<String, RegionQuestions>, Vec<Region>) {
        let mut memories = BTreeMap::new();
        let mut report = BTreeMap::new();
        let mut claimed = Vec::new();
        let until = (at.clock()
            + chrono::Duration::from_std(self.settings.describe.ask_for).unwrap_or_default()
            + CLAIM_MARGIN)
            .min(at.clock() + crate::ports::MAX_REGION_CLAIM);
        for region in regions {
            // A replay writes nothing, not even a claim.
            if !at.is_replay() {
                match self.store.claim_region(&region, run, at.clock(), until).await {
                    Ok(true) => claimed.push(region.clone()),
                    Ok(false) => {
                        tracing::info!(event = "watched_elsewhere", %region, "another scan is asking this region; leaving it to that one");
                        report.insert(region.to_string(), RegionQuestions { elsewhere: true, ..Default::default() });
                        continue;
                    }
                    // Asked anyway: a claim only keeps two runs from asking at once.
                    Err(e) => tracing::warn!(event = "watch_unclaimed", %region, error = %e, "asking without a claim"),
                }
            }
            let memory = match self.store.region_memory(&region).await {
                Ok(m) => m.clamped(at.clock()),
                Err(e) => {
                    // The planner then starts afresh: more questions asked again, nothing lost.
                    tracing::warn!(event = "market_memory_unreadable", %region, error = %e, "planning without the region's memory");
                    RegionMemory::default()
                }
            };
            memories.insert(region, memory);
        }
        (memories, report, claimed)
    }

    /// The questions of `all` this run asks in `region` (indices into `all`, in asking order)
    /// within the calls its accounts may make, and the region's line of the report.
    fn choose(
        &self,
        all: &[Planned],
        region: &Region,
        memory: &RegionMemory,
        now: DateTime<Utc>,
    ) -> (Vec<usize>, RegionQuestions) {
        // Each account brings its own describe limit: the region's calls are the sum of each
        // account's at its own learned pace.
        let calls = self.settings.describe.planned(memory.pace)
            + self
                .members
                .iter()
                .map(|w| self.settings.describe.planned(memory.helper_paces.get(&w.account).copied()))
                .sum::<usize>();
        let mut probed: BTreeSet<&str> = BTreeSet::new();
        let askable: Vec<usize> = (0..all.len())
            .filter(|&i| &all[i].question.query.region == region)
            .filter(|&i| {
                let ty = all[i].question.query.instance_type.as_str();
                let fam = family(ty);
                if memory.is_not_sold(ty, now) {
                    return false;
                }
                // A family with a quota of 0 noted: one question a run (a probe), so the
                // first success clears it.
                !memory.quota_zero.contains_key(fam) || probed.insert(fam)
            })
            .collect();
        let candidates: Vec<Candidate> = askable.iter().map(|&i| all[i].candidate.clone()).collect();
        let picked: Vec<usize> = plan::choose(&candidates, memory, calls).into_iter().map(|j| askable[j]).collect();
        let questions = all.iter().filter(|p| &p.question.query.region == region).count();
        let line = RegionQuestions {
            questions,
            planned: picked.len(),
            full_cycle_runs: plan::full_cycle_runs(askable.len(), calls),
            allowed: calls,
            accounts: 1 + self.members.len(),
            ..Default::default()
        };
        (picked, line)
    }

    /// Gives back the regions this run claimed, once their memory is saved; a claim not given
    /// back runs out by itself.
    pub(super) async fn release_claims(&self, claimed: &[Region], run: &str) {
        for region in claimed {
            if let Err(e) = self.store.release_region(region, run).await {
                tracing::warn!(event = "watch_unreleased", %region, error = %e, "the claim runs out by itself");
            }
        }
    }
}
