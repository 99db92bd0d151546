//! Buy on sight: each answer holding offerings goes to the rules that asked it while the other
//! questions are still being asked, and a rule it makes ready acts at once.

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::Instant;

use super::{Acted, Confirmed, Findings, Plan, Scanner};
use crate::app::budgets::headroom;
use crate::app::paced_asker::Answer;
use crate::domain::decision::{Headroom, decide};
use crate::domain::offering::Offering;
use crate::domain::rule::Rule;
use crate::domain::run_time::RunTime;
use crate::ports::{BlockStore, Ledger, OfferingSource, Outbox, Purchaser, QuotaSource, StoreError};

/// How long a rule made ready by an answer waits for the answers other regions' lanes have in
/// flight (their calls go out side by side, a call's latency apart), so that it takes the
/// cheapest of them, not merely the first. A fraction of one describe-limit refill: detection
/// is measured in minutes.
const SIGHT_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// An answer that held offerings, the moment it came.
struct Sighting {
    /// Index into the plan's questions.
    question: usize,
    offerings: Vec<Offering>,
    at: Instant,
    /// The member account whose call gave the answer (`None`: the buying account's).
    member: Option<String>,
}

impl<M: OfferingSource + Purchaser + QuotaSource + ?Sized, S: Ledger + BlockStore + Outbox + ?Sized, N: ?Sized>
    Scanner<'_, M, S, N>
{
    /// Asks the plan's questions and, side by side, hands each answer holding offerings to the
    /// rules that asked it (`on_sight`): the offerings of each answered question, and what each
    /// rule that acted on sight did.
    pub(super) async fn ask_on_sight(
        &self,
        rules: &[Rule],
        plan: &mut Plan,
        findings: &mut Findings,
        at: RunTime,
        confirmed: Option<&Confirmed>,
    ) -> (BTreeMap<usize, Vec<Offering>>, Result<BTreeMap<usize, Acted>, StoreError>) {
        // Buy on sight: each answer with offerings goes to the rules that asked it while the
        // other questions are still being asked; a rule acts on the first answer that holds
        // an offering it would take, not after the asking time.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let owners: Vec<Vec<usize>> = plan.all.iter().map(|p| p.rules.clone()).collect();
        let send = move |i: usize, a: &Answer, by: Option<&str>| {
            if let Answer::Offerings(list) = a
                && !list.is_empty()
            {
                // The receiver only goes when the scan already failed: nothing to tell.
                let _ = tx.send(Sighting {
                    question: i,
                    offerings: list.clone(),
                    at: Instant::now(),
                    member: by.map(str::to_string),
                });
            }
        };
        tokio::join!(self.ask(plan, findings, at.clock(), send), self.on_sight(rules, &owners, rx, at, confirmed))
    }

    /// Per rule that asked the sighted question: every offering its answered questions held so
    /// far, and if one is eligible now, the rule acts at once (`act`). Returns what each rule
    /// that acted did, by rule index; the others decide after the asking (`decide_and_act`).
    async fn on_sight(
        &self,
        rules: &[Rule],
        owners: &[Vec<usize>],
        mut sightings: tokio::sync::mpsc::UnboundedReceiver<Sighting>,
        at: RunTime,
        confirmed: Option<&Confirmed>,
    ) -> Result<BTreeMap<usize, Acted>, StoreError> {
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut seen: BTreeMap<usize, Vec<Offering>> = BTreeMap::new();
        let mut acted = BTreeMap::new();
        // The rules an answer made ready to act (an offering meets them on price and window),
        // and the oldest answer among what they will choose from.
        let mut ready: BTreeSet<usize> = BTreeSet::new();
        let mut oldest: Option<Instant> = None;
        let mut settle_until: Option<Instant> = None;
        // Offering ids a member account was shown: nothing public says another account may buy
        // under them, so the buying account asks for the block again before it buys (the
        // purchase's re-check finds it under the id EC2 shows the buyer).
        let mut shown_to_members: BTreeSet<String> = BTreeSet::new();
        loop {
            let next = match settle_until {
                None => sightings.recv().await,
                Some(t) => tokio::time::timeout_at(t, sightings.recv()).await.unwrap_or(None),
            };
            let Some(sighting) = next else {
                // The settling time is over (or the asking): the ready rules act, each on the
                // cheapest of everything it has seen.
                for ri in std::mem::take(&mut ready) {
                    let rule = &rules[ri];
                    let offerings = seen.get(&ri).map(Vec::as_slice).unwrap_or_default();
                    let room = Headroom(headroom(self.store, rule, &self.settings.stack.budgets(), at.clock()).await?);
                    let decision = decide(rule, offerings, &catalog, room, at.view());
                    if decision.chosen.is_none() {
                        continue;
                    }
                    tracing::info!(event = "on_sight", rule = %rule.id, offering = ?decision.chosen.as_ref().map(|p| &p.offering.id),
                        "an answer holds an offering the rule takes: acting now");
                    acted.insert(ri, self.act(rule, &decision, at, oldest, &shown_to_members, confirmed).await?);
                }
                (oldest, settle_until) = (None, None);
                if sightings.is_closed() && sightings.is_empty() {
                    break;
                }
                continue;
            };
            if let Some(account) = &sighting.member {
                tracing::debug!(event = "seen_by_member", %account, offerings = sighting.offerings.len());
                shown_to_members.extend(sighting.offerings.iter().map(|o| o.id.clone()));
            }
            for &ri in &owners[sighting.question] {
                if acted.contains_key(&ri) {
                    continue;
                }
                let rule = &rules[ri];
                let offerings = seen.entry(ri).or_default();
                offerings.extend(sighting.offerings.iter().cloned());
                // The budgets are read only when an offering meets the rule on price and window.
                if decide(rule, offerings, &catalog, Headroom(rule.monthly_budget), at.view()).chosen.is_some() {
                    ready.insert(ri);
                }
            }
            if !ready.is_empty() {
                oldest = Some(oldest.map_or(sighting.at, |o| o.min(sighting.at)));
                settle_until.get_or_insert(sighting.at + SIGHT_SETTLE);
            }
        }
        Ok(acted)
    }
}
