//! What a rule does with its choice: buy it, ask for approval or announce it, as the rule's and
//! the stack's modes say, on sight or after the asking.

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::Instant;

use super::{Acted, Confirmed, Plan, RuleOutcome, Scanner};
use crate::app::budgets::headroom;
use crate::app::purchase::{Buyer, Outcome};
use crate::domain::decision::{Decision, Headroom, PassedOver, Priced, decide};
use crate::domain::offering::Offering;
use crate::domain::rule::{Mode, Rule};
use crate::domain::run_time::RunTime;
use crate::ports::{BlockStore, Ledger, OfferingSource, Outbox, Purchaser, StoreError};

/// How many offerings one rule may try in one scan when the best ones were tried before.
const MAX_ALTERNATIVES: usize = 5;

impl<M: OfferingSource + Purchaser + ?Sized, S: Ledger + BlockStore + Outbox + ?Sized, N: ?Sized> Scanner<'_, M, S, N> {
    /// The first of the rule's `MAX_ALTERNATIVES` best offerings it has not tried to buy before
    /// (no intent of it stored).
    async fn first_untried<'d>(&self, rule: &Rule, ranked: &'d [Priced]) -> Result<Option<&'d Priced>, StoreError> {
        for p in ranked.iter().take(MAX_ALTERNATIVES) {
            let intent = crate::domain::budget::Intent::id_for(&rule.id, &p.offering.id);
            if self.store.get_intent(&rule.id, &intent).await?.is_none() {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    /// Buys, asks for approval or announces `decision`'s choice, as the rule's and the stack's
    /// modes say. `answered_at`: when EC2's answer holding it came, if just now; an offering a
    /// member account was shown (`shown_to_members`) is always looked at again by the buying
    /// account first, the first choice and every alternative alike. `confirmed`: a person's
    /// plan, the only blocks a live rule may buy (`Confirmed::admits`).
    pub(super) async fn act(
        &self,
        rule: &Rule,
        decision: &Decision,
        at: RunTime,
        answered_at: Option<Instant>,
        shown_to_members: &BTreeSet<String>,
        confirmed: Option<&Confirmed>,
    ) -> Result<Acted, StoreError> {
        let now = at.clock();
        let buyer_for = |p: &Priced| Buyer {
            market: self.market,
            store: self.store,
            stack: &self.settings.stack.name,
            budgets: self.settings.stack.budgets(),
            recheck_pause: self.settings.describe.refill,
            answered_at: answered_at.filter(|_| !shown_to_members.contains(&p.offering.id)),
        };
        let mode = self.settings.stack.mode.and(rule.mode);
        let mut chosen = decision.chosen.clone();
        let action = match &decision.chosen {
            None => None,
            // A live rule's look (a person's plan before a live scan) passes over what the rule
            // tried before, as the live path below does, so the plan names what the run would
            // buy; it only reads.
            // The live path's own checks first, read only: a rule that would be skipped (holding
            // its blocks, its purchases made) is not planned to buy, and the plan says why, even
            // when every offering on sale is one it tried before.
            Some(first) if at.is_replay() && mode == Mode::Live => match buyer_for(first).may_buy(rule, now).await? {
                Err(reason) => Some(Outcome::Skipped { reason }),
                Ok(_) => match self.first_untried(rule, &decision.ranked).await? {
                    Some(p) => {
                        chosen = Some(p.clone());
                        Some(Outcome::Replayed { offering_id: p.offering.id.clone() })
                    }
                    None => {
                        decision.ranked.first().map(|p| Outcome::AlreadyTried { offering_id: p.offering.id.clone() })
                    }
                },
            },
            // A replay only says what the rule would choose: nothing is asked or stored.
            Some(p) if at.is_replay() => Some(Outcome::Replayed { offering_id: p.offering.id.clone() }),
            Some(_) if mode == Mode::Live => {
                // Under a person's plan, only the planned block: any other the rule would take
                // now is passed over, and with the planned one gone or repriced nothing is bought.
                let ranked: Vec<&Priced> = match confirmed {
                    None => decision.ranked.iter().collect(),
                    Some(c) => decision.ranked.iter().filter(|p| c.admits(&rule.id, &p.offering).is_ok()).collect(),
                };
                if let (Some(c), Some(first), true) = (confirmed, decision.ranked.first(), ranked.is_empty()) {
                    let reason = c.admits(&rule.id, &first.offering).err().unwrap_or_default();
                    tracing::info!(event = "off_plan", rule = %rule.id, offering = %first.offering.id, %reason,
                        "the market moved since the person's plan: not buying");
                    return Ok(Acted {
                        chosen,
                        action: Some(Outcome::OffPlan { offering_id: first.offering.id.clone(), reason }),
                    });
                }
                // The best offering may already have been tried by this rule (refused by
                // EC2): take the next cheapest, a few at most.
                let mut last = None;
                for p in ranked.into_iter().take(MAX_ALTERNATIVES) {
                    chosen = Some(p.clone());
                    let action = buyer_for(p).live(rule, p, now).await?;
                    let tried = matches!(action, Outcome::AlreadyTried { .. });
                    last = Some(action);
                    if !tried {
                        break;
                    }
                }
                last
            }
            Some(p) if mode == Mode::Approval => Some(buyer_for(p).ask(rule, p, now).await?),
            Some(p) => Some(buyer_for(p).dry_run(rule, p, self.settings.stack.mode, now).await?),
        };
        Ok(Acted { chosen, action })
    }

    /// Per rule: the cheapest eligible offering among its answered questions, then buy,
    /// ask for approval or announce (`act`), unless the rule already acted on sight.
    pub(super) async fn decide_and_act(
        &self,
        rules: &[Rule],
        plan: &Plan,
        answered: &BTreeMap<usize, Vec<Offering>>,
        mut on_sight: BTreeMap<usize, Acted>,
        at: RunTime,
        confirmed: Option<&Confirmed>,
    ) -> Result<Vec<RuleOutcome>, StoreError> {
        // Budget months are the clock's; what is on sale and eligible is judged as of the view.
        let (now, view) = (at.clock(), at.view());
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut outcomes = Vec::new();
        for (ri, rule) in rules.iter().enumerate() {
            let mine: Vec<usize> = (0..plan.all.len()).filter(|&i| plan.all[i].rules.contains(&ri)).collect();
            let offerings: Vec<Offering> = mine.iter().filter_map(|i| answered.get(i)).flatten().cloned().collect();
            let questions_answered = mine.iter().filter(|i| answered.contains_key(i)).count();
            let room = Headroom(headroom(self.store, rule, &self.settings.stack.budgets(), now).await?);
            let decision = decide(rule, &offerings, &catalog, room, view);
            let mode = self.settings.stack.mode.and(rule.mode);
            let Acted { chosen, action } = match on_sight.remove(&ri) {
                Some(acted) => acted,
                None => self.act(rule, &decision, at, None, &BTreeSet::new(), confirmed).await?,
            };
            tracing::info!(event = "decision", rule = %rule.id, mode = mode.as_str(), questions = mine.len(), questions_answered,
                offerings = offerings.len(), eligible = decision.eligible, chosen = ?chosen.as_ref().map(|p| &p.offering.id),
                action = ?action, "rule evaluated");
            // Why the cheapest offering within the threshold was not chosen (a budget, the fee
            // cap, the start window): said, so "within it" is never followed by a bare "nothing
            // meets the rule".
            let passed_over = match (&chosen, &decision.cheapest) {
                (None, Some(c)) => decision
                    .passed_over
                    .iter()
                    .find(|(id, why)| id == &c.offering.id && *why != PassedOver::AboveThreshold)
                    .map(|(_, why)| why.says().to_string()),
                _ => None,
            };
            outcomes.push(RuleOutcome {
                passed_over,
                rule_id: rule.id.clone(),
                mode,
                questions_answered,
                questions: mine.len(),
                offerings_seen: offerings.len(),
                eligible: decision.eligible,
                cheapest: decision.cheapest,
                threshold: rule.max_price_per_accelerator_hour,
                chosen,
                action,
            });
        }
        Ok(outcomes)
    }
}
