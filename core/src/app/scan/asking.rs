//! Asking the planned questions (paced, all regions at once), and taking what EC2 answered into
//! the plan's counts, the regions' memories and the run's findings.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{Findings, Plan, Planned, Scanner};
use crate::app::paced_asker::{Answer, Calls, MEMBER_STRIKES, Pacing, QUOTA_STRIKES, RunAnswers, ask_spread, helpers};
use crate::domain::ids::Region;
use crate::domain::market_memory::{self, Carried};
use crate::domain::offering::Offering;
use crate::domain::plan::{Coverage, MARKET_NOTE_TTL, Refusals, RegionMemory, family, member_key, member_of_key};
use crate::ports::{OfferingQuery, OfferingSource, QuotaSource};

impl<M: OfferingSource + QuotaSource + ?Sized, S: ?Sized, N: ?Sized> Scanner<'_, M, S, N> {
    /// Starts the market's client and each member's at the UltraServer search form each
    /// region's memory keeps: a new container does not ask in a form EC2 refused first.
    fn start_search_forms(&self, memories: &BTreeMap<Region, RegionMemory>) {
        for (region, form) in memories.iter().filter_map(|(r, m)| Some((r, m.search_form?))) {
            self.market.start_search_form(region, form);
            for w in self.members {
                w.market.start_search_form(region, form);
            }
        }
    }

    /// Keeps in each region's memory the UltraServer search form this run learned: the buying
    /// account's client's, else a member's, when it differs from the one the memory held.
    fn keep_search_forms(&self, queries: &[OfferingQuery], memories: &mut BTreeMap<Region, RegionMemory>) {
        let regions: BTreeSet<&Region> =
            queries.iter().filter(|q| q.ultraservers.is_some()).map(|q| &q.region).collect();
        for region in regions {
            let memory = memories.entry(region.clone()).or_default();
            let learned = std::iter::once(self.market.search_form(region))
                .chain(self.members.iter().map(|w| w.market.search_form(region)))
                .flatten()
                .find(|f| Some(*f) != memory.search_form);
            if let Some(form) = learned {
                tracing::info!(event = "search_form_learned", region = %region, ?form,
                    "EC2 takes this region's UltraServer searches in another form: kept for the next runs");
                memory.search_form = Some(form);
            }
        }
    }

    /// Asks the planned questions; returns the offerings of each answered one (by index into
    /// `plan.all`) and notes what EC2 said of the regions.
    pub(super) async fn ask(
        &self,
        plan: &mut Plan,
        findings: &mut Findings,
        now: DateTime<Utc>,
        seen: impl Fn(usize, &Answer, Option<&str>) + Sync,
    ) -> BTreeMap<usize, Vec<Offering>> {
        let queries: Vec<OfferingQuery> = plan.chosen.iter().map(|&i| plan.all[i].question.query.clone()).collect();
        let carried = Carried::from_memories(&plan.memories, now);
        self.start_search_forms(&plan.memories);
        let chosen = &plan.chosen;
        let pacing = Pacing::from(&self.settings.describe);
        let asked = ask_spread(self.market, &helpers(self.members), &queries, &pacing, &carried, |k, a, by| {
            seen(chosen[k], a, by)
        })
        .await;
        let mut calls = asked.calls.clone();
        for ((region, _), c) in &asked.helper_calls {
            let all = calls.entry(region.clone()).or_default();
            (all.sent, all.throttled, all.contended) =
                (all.sent + c.sent, all.throttled + c.throttled, all.contended + c.contended);
        }
        for (region, c) in &calls {
            let counts = plan.regions.entry(region.to_string()).or_default();
            (counts.asked, counts.throttled, counts.contended) = (c.sent, c.throttled, c.contended);
        }
        // A member no longer lending its limit is forgotten.
        let lends = |a: &str| self.members.iter().any(|w| w.account == a);
        market_memory::keep_paces(&mut plan.memories, &asked.paces, &asked.helper_paces, lends);
        for (region, pace) in &asked.paces {
            plan.regions.entry(region.to_string()).or_default().pace_ms = pace.gap_ms;
        }
        self.keep_search_forms(&queries, &mut plan.memories);
        for (account, error) in &asked.helper_failed {
            tracing::warn!(event = "watch_account_failed", account = %account, %error,
                "a member account's watch role did not answer; the other accounts asked its questions");
        }
        findings.watch_failed.extend(asked.helper_failed.clone());
        self.member_quotas(plan, findings, &asked, now);
        // Each family's refusals as this run leaves them (only regions asked this run: the
        // others' are as they were). The record before the run names a finding's refusals.
        let regions_asked: BTreeSet<Region> = asked.calls.keys().cloned().collect();
        let before =
            market_memory::settle_refusals(&mut plan.memories, &regions_asked, &asked.strikes, &asked.refused, now);
        let answered = self.take_answers(plan, findings, asked.answers, &before, now).await;
        for (region, error) in &findings.failed {
            tracing::warn!(event = "region_failed", %region, %error, "region skipped this scan");
        }
        for region in &findings.unsupported {
            tracing::info!(event = "region_unsupported", %region, "region does not sell Capacity Blocks");
        }
        self.note_coverage(plan, &calls, now);
        for (region, q) in &plan.regions {
            tracing::info!(event = "questions", %region, questions = q.questions, planned = q.planned, answered = q.answered,
                carried_over = q.carried_over, full_cycle_runs = q.full_cycle_runs, pace_ms = q.pace_ms,
                every_question_within_secs = q.age_max_secs, contended = q.contended, "asked the market");
        }
        answered
    }

    /// Takes each chosen question's answer (`answers`, in `plan.chosen`'s order) into the plan's
    /// counts, the regions' memories and the findings; returns the offerings of each answered
    /// one. `before`: each family's refusals before the run, which a quota-0 finding names.
    async fn take_answers(
        &self,
        plan: &mut Plan,
        findings: &mut Findings,
        answers: Vec<Answer>,
        before: &BTreeMap<(Region, String), Refusals>,
        now: DateTime<Utc>,
    ) -> BTreeMap<usize, Vec<Offering>> {
        // The accelerator counts, once: each answer's cheapest price per accelerator-hour is kept.
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut answered = BTreeMap::new();
        // Service Quotas, read once per family and region in a run.
        let mut quotas: BTreeMap<(Region, String), Option<u32>> = BTreeMap::new();
        for (&i, answer) in plan.chosen.iter().zip(answers) {
            let q = &plan.all[i].question.query;
            let region = q.region.to_string();
            let counts = plan.regions.entry(region.clone()).or_default();
            let memory = plan.memories.entry(q.region.clone()).or_default();
            let fam = family(q.instance_type.as_str()).to_string();
            match answer {
                Answer::Offerings(list) => {
                    counts.answered += 1;
                    if memory.quota_zero.remove(&fam).is_some() {
                        tracing::info!(event = "quota_zero_cleared", %region, family = %fam, "a search succeeded: the family's quota is no longer 0");
                    }
                    let cheapest = list
                        .iter()
                        .filter_map(|o| o.price_per_accelerator_hour(catalog.accelerators(&o.instance_type)?))
                        .map(|r| r.per_unit)
                        .min();
                    if market_memory::note_answer(memory, plan.all[i].question.key.clone(), cheapest, now) {
                        findings.history.insert(i);
                    }
                    answered.insert(i, list);
                }
                // Only a one-shot search (`ask_once`) gives a family up; a scan's refusals are
                // counted across runs instead, so this is never a scan's answer.
                Answer::CarriedOver | Answer::GivenUp => counts.carried_over += 1,
                Answer::QuotaZero => {
                    counts.carried_over += 1;
                    // Refusals over runs say "quota 0" or "someone keeps spending the limit";
                    // Service Quotas, where the role may read it, tells them apart.
                    let key = (q.region.clone(), fam.clone());
                    let quota = match quotas.get(&key) {
                        Some(known) => *known,
                        None => {
                            let read = self.market.capacity_block_quota(&q.region, &fam).await;
                            *quotas.entry(key).or_insert(read)
                        }
                    };
                    if let Some(quota) = quota
                        && quota > 0
                    {
                        tracing::warn!(event = "quota_not_zero", %region, family = %fam, quota, "refused over runs, but Service Quotas allows this family: others in the account spend the describe limit");
                        memory.refusals.remove(&fam);
                        continue;
                    }
                    let refused = Refusals::after_run(before.get(&(q.region.clone(), fam.clone())), QUOTA_STRIKES, now);
                    let since = memory.note_quota_zero(&fam, now);
                    findings.quota_zero.insert((region, fam), (since, refused));
                }
                Answer::NotSold(message) => {
                    memory.not_sold.insert(q.instance_type.to_string(), now + MARKET_NOTE_TTL);
                    findings.not_sold.insert((region, q.instance_type.to_string()), message);
                    findings.not_sold_rules.extend(plan.all[i].rules.iter().map(|&r| (q.instance_type.to_string(), r)));
                }
                Answer::Unsupported => {
                    findings.unsupported.insert(region);
                }
                Answer::Failed(e) => {
                    findings.failed.entry(region).or_insert_with(|| e.to_string());
                }
            }
        }
        answered
    }

    /// Each member refused on every call of a family noted in the region's memory (a new note
    /// is a finding, announced once), and each answered one cleared; members no longer in
    /// `WatchAccounts` are forgotten.
    fn member_quotas(&self, plan: &mut Plan, findings: &mut Findings, asked: &RunAnswers, now: DateTime<Utc>) {
        for memory in plan.memories.values_mut() {
            memory
                .member_refused
                .retain(|k, _| member_of_key(k).is_some_and(|(a, _)| self.members.iter().any(|w| w.account == a)));
        }
        for (region, account, fam) in &asked.helper_refused {
            findings.watch_refused.insert(format!("{account} {region} {fam}"));
            let memory = plan.memories.entry(region.clone()).or_default();
            let (_, new) = memory.note_member_refused(account, fam, now);
            if new {
                tracing::warn!(event = "member_quota_zero", %region, account = %account, family = %fam,
                    "a member account was refused on every call of the family: its quota is 0 or its limit is spent; it lends nothing for it");
                findings.member_refused.insert((account.clone(), region.to_string(), fam.clone()), MEMBER_STRIKES);
            }
        }
        for (region, account, fam) in &asked.helper_answered {
            let cleared =
                plan.memories.get_mut(region).and_then(|m| m.member_refused.remove(&member_key(account, fam)));
            if cleared.is_some() {
                tracing::info!(event = "member_quota_zero_cleared", %region, account = %account, family = %fam,
                    "a member account was answered: it lends the family again");
            }
        }
    }

    /// How well each region asked this run is covered now: the ages of its questions' last
    /// answers (and how many have none yet), into the report and the region's memory.
    fn note_coverage(&self, plan: &mut Plan, calls: &BTreeMap<Region, Calls>, now: DateTime<Utc>) {
        for (region, c) in calls {
            let Some(memory) = plan.memories.get_mut(region) else { continue };
            let mine: Vec<&Planned> = plan.all.iter().filter(|p| &p.question.query.region == region).collect();
            let mut ages: Vec<u64> = mine
                .iter()
                .filter_map(|p| memory.asked.get(&p.question.key))
                .map(|a| (now - a.at).num_seconds().max(0) as u64)
                .collect();
            let questions = mine.len() as u32;
            let unanswered = questions - ages.len() as u32;
            let (p50, max) = Coverage::ages(&mut ages);
            let counts = plan.regions.entry(region.to_string()).or_default();
            (counts.age_p50_secs, counts.age_max_secs) = (p50, max);
            memory.coverage = Some(Coverage {
                at: now,
                questions,
                unanswered,
                age_p50_secs: p50,
                age_max_secs: max,
                calls: c.sent as u32,
                refused: c.throttled as u32,
                contended: c.contended as u32,
                gap_ms: memory.pace.map_or(0, |p| p.gap_ms),
            });
        }
    }
}
