//! Buying one chosen offering for one rule, exactly once.
//!
//! 1. Reserve: one transaction creates the intent (keyed by rule + offering), charges the fee
//!    to the rule's and the account's monthly budgets and takes the rule's guard.
//! 2. Re-check the offering is still there at a price the rule accepts.
//! 3. Mark the intent Sent, then call PurchaseCapacityBlock once, without SDK retries.
//! 4. Bought: record block + announcement. Refused: release the budget. Unknown: leave it Sent
//!    for reconciliation by tag.

use std::collections::BTreeMap;

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::outbox::alert_notice;
use super::reconcile::record_purchase;
use crate::domain::announce;
use crate::domain::approval;
use crate::domain::block::purchases_held_at;
use crate::domain::budget::{Approved, BudgetOwner, Intent, Period, StackBudgets, charges_for};
use crate::domain::decision::{Headroom, PassedOver, Priced, check};
use crate::domain::ids::InstanceType;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::Money;
use crate::domain::offering::Offering;
use crate::domain::rule::{Mode, Rule};
use crate::domain::tags::{INTENT_TAG, RULE_TAG, STACK_TAG};
use crate::ports::{
    BlockStore, Ledger, MarketError, OFFERING_ID_EXPIRED, OfferingQuery, OfferingSource, Outbox, PurchaseOutcome,
    PurchaseRequest, Purchaser, ReserveError, RuleGuard, StoreError,
};
use crate::sabotage::{self, Bug};

/// What happened to a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Outcome {
    /// Dry run: announced (once per offering) and nothing bought.
    WouldBuy { offering_id: String, first_time: bool },
    Bought {
        offering_id: String,
        reservation_id: String,
        /// The purchase's other reservations (one per UltraServer past the first), stored on
        /// the intent: the tracker adopts exactly these by their intent tag as its parts.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more: Vec<String>,
    },
    /// Not attempted: a limit, a budget, or another run got there first.
    Skipped { reason: String },
    /// This rule already has an intent for this offering (bought, refused or abandoned): a
    /// purchase is never sent twice, so the scan moves on to the next cheapest offering.
    AlreadyTried { offering_id: String },
    /// Approval mode: the decision is stored and a person was asked (once per offering).
    AwaitingApproval { offering_id: String, intent: String, first_time: bool },
    /// EC2 refused the purchase; the budget was released and the offering stays tried.
    Refused { offering_id: String, reason: String },
    /// Nothing reached EC2 that could have bought it (the re-check or the purchase was
    /// throttled, or the offering changed before sending): the budget was released and the
    /// offering given back, so a later run may buy it.
    GivenBack { offering_id: String, reason: String },
    /// Sent, but the answer was lost: reconciliation settles it.
    Unknown { intent: String, reason: String },
    /// A replay of another moment: what the rule would choose then. Nothing was asked of EC2,
    /// stored or announced.
    Replayed { offering_id: String },
    /// A live scan a person confirmed (`scan::Confirmed`) found the market moved since the plan
    /// they said yes to: the rule's choice is not the planned block at the planned fee, so
    /// nothing was reserved or sent; `reason` names the fields that differ.
    OffPlan { offering_id: String, reason: String },
}

/// What an approval came to.
#[derive(Debug)]
pub enum Approval {
    /// Looked at again and not bought (gone, or above the threshold now): nothing reserved.
    Refused(String),
    /// EC2 did not answer the look (still throttled, or failed): nothing reserved.
    Unanswered(MarketError),
    /// Sent down the live path with the offering as it is on sale now.
    Decided { priced: Box<Priced>, action: Outcome },
}

/// Why a person may not buy `seen` for `rule` by hand (`Buyer::buy_by_hand`), before anything
/// is asked or reserved: a stack not live, a rule disabled or in dry-run, or an offering the rule
/// could not have bought itself (every limit but the budgets, which the purchase reserves).
/// `None`: it may be tried. The CLI asks it before it asks the person.
pub fn hand_refusal(rule: &Rule, seen: &Priced, stack_mode: Mode, now: DateTime<Utc>) -> Option<String> {
    if stack_mode != Mode::Live {
        return Some(format!(
            "the stack is in {} mode: deploy it with Mode=live to buy (docs/deploy.md, \"Switching to live\")",
            stack_mode.as_str()
        ));
    }
    if !rule.enabled {
        return Some(format!("rule {} is disabled", rule.id));
    }
    if rule.mode == Mode::DryRun {
        return Some(format!("rule {} is in dry-run mode: set mode = \"live\" or \"approval\" to buy for it", rule.id));
    }
    let any_fee = match Money::new(Money::MAX_AMOUNT, rule.currency) {
        Ok(m) => m,
        Err(e) => return Some(e.to_string()),
    };
    check(rule, seen, Headroom(any_fee), now).map(|why| {
        format!("offering {} does not meet rule {}: {}", seen.offering.id, rule.id, in_detail(rule, seen, &why))
    })
}

/// Why an offering does not meet a rule, with the figures a person compares: the field of the
/// rule and the offering's value for it.
fn in_detail(rule: &Rule, seen: &Priced, why: &PassedOver) -> String {
    let o = &seen.offering;
    let list = |v: Vec<String>| v.join(", ");
    match why {
        PassedOver::AboveThreshold => format!(
            "its price per accelerator-hour, {}, is above the rule's threshold {} {} (max_price_per_accelerator_hour)",
            seen.per_accelerator_hour.display(),
            rule.max_price_per_accelerator_hour,
            rule.currency
        ),
        PassedOver::AboveMaxTotalFee => match rule.max_total_fee {
            Some(max) => format!("its fee {} is above the rule's max_total_fee {max}", o.fee),
            None => why.says().to_string(),
        },
        PassedOver::OutsideStartWindow => {
            format!("it starts {} UTC, outside the rule's start_window", o.start.format("%Y-%m-%d %H:%M"))
        }
        PassedOver::NotInRule if !rule.regions.contains(&o.region) => format!(
            "its region {} is not in the rule's regions ({})",
            o.region,
            list(rule.regions.iter().map(ToString::to_string).collect())
        ),
        PassedOver::NotInRule if !rule.asks_for(o) => format!(
            "{} x {} is not what the rule asks for (instance_types {}; instance_counts {})",
            o.instance_count,
            o.instance_type,
            list(rule.instance_types.iter().map(ToString::to_string).collect()),
            list(rule.instance_counts.iter().map(ToString::to_string).collect())
        ),
        PassedOver::NotInRule => format!(
            "its length, {}, is none of the rule's durations_days ({})",
            o.length_text(),
            list(rule.durations_days.iter().map(ToString::to_string).collect())
        ),
        other => other.says().to_string(),
    }
}

/// Why the rule may not buy another block, holding `held` purchases (`Err`: why they cannot be
/// counted): it holds its `max_blocks_held`. The model checker asks it at its scans' decision.
pub fn held_refusal(rule: &Rule, held: Result<usize, String>) -> Option<String> {
    match held {
        Err(reason) => Some(reason),
        // The bug put back: the held blocks are not counted (`sabotage`).
        Ok(_) if sabotage::on(Bug::IgnoreHeldBlocks) => None,
        Ok(held) if held >= rule.max_blocks_held as usize => {
            Some(format!("the rule holds {held} block(s), its limit is {}", rule.max_blocks_held))
        }
        Ok(_) => None,
    }
}

pub struct Buyer<'a, M: ?Sized, S: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub stack: &'a str,
    /// The stack's account and team budgets, charged with the rule's.
    pub budgets: StackBudgets,
    /// How long to wait before asking again when the re-check is throttled: one refill of
    /// EC2's describe limit.
    pub recheck_pause: StdDuration,
    /// When EC2's answer that holds the offering came (tokio's clock). An answer at most
    /// `FRESH_ANSWER` old stands in for the re-check.
    pub answered_at: Option<tokio::time::Instant>,
}

/// How old an answer may be and still stand in for the re-check before buying. The re-check is
/// one more paced DescribeCapacityBlockOfferings (seconds of the describe limit) asked only to
/// learn what an answer this young already says: the same block, under the id EC2 gave it, at
/// its fee. What could change meanwhile cannot cost money: a purchase of an id EC2 no longer
/// takes is refused (`...OfferingIdExpired` / `...IdNotFound`, API reference), nothing is
/// charged, and the offering is given back or refused as after any refusal. The rule's checks
/// (window, threshold, room) are still run on the clock.
pub const FRESH_ANSWER: StdDuration = StdDuration::from_secs(15);

/// Attempts at the re-check (a DescribeCapacityBlockOfferings) when EC2 throttles it.
pub const RECHECK_ATTEMPTS: u32 = 3;

/// What the re-check before buying found.
#[derive(Debug)]
enum Recheck {
    /// Same offering, same fee, still within the rule: the fresh answer's offering (its id may
    /// be a new one).
    Confirmed(Offering),
    /// Gone, repriced or outside the rule now.
    Changed(String),
    /// EC2 did not answer usefully (throttled, failed): nothing is known, nothing was sent.
    Unanswered(MarketError),
}

/// What looking at an offering again found.
enum Looked {
    OnSale(Offering),
    Gone,
    /// The rule no longer asks a question that could find it.
    Unaskable(String),
    Unanswered(MarketError),
}

impl<M, S> Buyer<'_, M, S>
where
    M: OfferingSource + Purchaser + ?Sized,
    S: Ledger + BlockStore + Outbox + ?Sized,
{
    fn tags(&self, rule: &Rule, intent_id: &str) -> BTreeMap<String, String> {
        let mut tags = rule.tags.clone();
        tags.insert(RULE_TAG.into(), rule.id.clone());
        tags.insert(INTENT_TAG.into(), intent_id.to_string());
        tags.insert(STACK_TAG.into(), self.stack.to_string());
        tags
    }

    /// What EC2 is asked, for real or with DryRun: the same offering, platform and tags.
    fn request(&self, rule: &Rule, p: &Priced, intent_id: &str, dry_run: bool) -> PurchaseRequest {
        PurchaseRequest {
            offering: p.offering.clone(),
            instance_platform: rule.instance_platform.clone(),
            tags: self.tags(rule, intent_id),
            dry_run,
        }
    }

    /// Dry run: asks EC2 with DryRun (which checks permissions and the offering), stores the
    /// would-buy decision and announces it the first time.
    pub async fn dry_run(
        &self,
        rule: &Rule,
        p: &Priced,
        stack_mode: Mode,
        now: DateTime<Utc>,
    ) -> Result<Outcome, StoreError> {
        // A dry run says what a live run would do: a rule that may not buy now is not told
        // "would buy" (it holds its blocks, made its purchases this month, or is mid-purchase).
        if let Err(reason) = self.may_buy(rule, now).await? {
            return Ok(Outcome::Skipped { reason });
        }
        let intent = Intent::new(&rule.id, p.offering.clone(), p.accelerators_per_instance, vec![], now);
        match self.market.purchase(&self.request(rule, p, &intent.id, true)).await {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(event = "dry_run_refused", rule = %rule.id, offering = %p.offering.id, error = %e, "EC2 would refuse this purchase");
                return Ok(Outcome::Refused { offering_id: p.offering.id.clone(), reason: e.to_string() });
            }
        }
        let first_time = self.store.record_dry_run(&intent).await?;
        if first_time {
            let msg = announce::would_buy(&rule.id, p, &intent, stack_mode, rule.mode);
            self.store.enqueue(&alert_notice(&intent.id, &MessageKind::WouldBuy.outbox_key(None)?, &msg, now)).await?;
        }
        Ok(Outcome::WouldBuy { offering_id: p.offering.id.clone(), first_time })
    }

    /// Approval: like a dry run, but the decision is stored for `capblock approve` and the
    /// message asks a person. Nothing is asked while the rule holds its blocks.
    pub async fn ask(&self, rule: &Rule, p: &Priced, now: DateTime<Utc>) -> Result<Outcome, StoreError> {
        if let Err(reason) = self.may_buy(rule, now).await? {
            return Ok(Outcome::Skipped { reason });
        }
        let intent = Intent::new(&rule.id, p.offering.clone(), p.accelerators_per_instance, vec![], now);
        let req = PurchaseRequest {
            offering: p.offering.clone(),
            instance_platform: rule.instance_platform.clone(),
            tags: self.tags(rule, &intent.id),
            dry_run: true,
        };
        if let Err(e) = self.market.purchase(&req).await {
            tracing::warn!(event = "dry_run_refused", rule = %rule.id, offering = %p.offering.id, error = %e, "EC2 would refuse this purchase");
            return Ok(Outcome::Refused { offering_id: p.offering.id.clone(), reason: e.to_string() });
        }
        let first_time = self.store.record_approval(&intent).await?;
        if first_time {
            let msg = announce::approval_needed(&rule.id, p, &intent);
            self.store
                .enqueue(&alert_notice(&intent.id, &MessageKind::ApprovalNeeded.outbox_key(None)?, &msg, now))
                .await?;
        }
        Ok(Outcome::AwaitingApproval { offering_id: p.offering.id.clone(), intent: intent.id, first_time })
    }

    /// The rule's guard if it may buy a block at `now`, else why not, read the way the live path
    /// reads it before it reserves: no purchase of the rule still open, room under
    /// `max_blocks_held`, a team with a budget, and a purchase left this month
    /// (`max_purchases_per_month`). Only reads: a dry run and a person's plan ask it too, so
    /// what they show is what a live run would do (the reservation's transaction decides again,
    /// atomically; a fee's room is the decision's, `decide`'s headroom).
    pub async fn may_buy(&self, rule: &Rule, now: DateTime<Utc>) -> Result<Result<RuleGuard, String>, StoreError> {
        let guard = self.store.guard(&rule.id).await?;
        if let Some(open) = &guard.open_intent {
            return Ok(Err(format!("intent {open} of this rule is still open")));
        }
        if let Some(reason) = self.no_room(rule, &guard, now).await? {
            return Ok(Err(reason));
        }
        let period = Period::budget_month(now);
        if let Err(e) = charges_for(rule, &self.budgets, &period) {
            return Ok(Err(e.to_string()));
        }
        let made = self.store.usage(&BudgetOwner::Rule(rule.id.clone()), &period).await?.map_or(0, |u| u.purchases);
        if made >= rule.max_purchases_per_month {
            return Ok(Err(format!(
                "the rule made {made} purchase(s) in {}, its max_purchases_per_month is {}",
                period.as_str(),
                rule.max_purchases_per_month
            )));
        }
        Ok(Ok(guard))
    }

    /// Why the rule may not buy another block at `now`, if it may not: it holds its
    /// `max_blocks_held` (or they cannot be counted).
    async fn no_room(&self, rule: &Rule, guard: &RuleGuard, now: DateTime<Utc>) -> Result<Option<String>, StoreError> {
        Ok(held_refusal(rule, self.held(rule, guard, now).await?))
    }

    /// How many blocks the rule holds at `now`, or why it may not buy now: a block of the rule
    /// that does not decode cannot be counted against `max_blocks_held`, so the rule waits
    /// until the item is repaired (the other rules go on). A purchase a person released counts
    /// until its start (`guard.released`): EC2 may still list it.
    async fn held(
        &self,
        rule: &Rule,
        guard: &RuleGuard,
        now: DateTime<Utc>,
    ) -> Result<Result<usize, String>, StoreError> {
        match self.store.open_blocks(Some(&rule.id)).await {
            Ok(blocks) => Ok(Ok(purchases_held_at(&blocks, &guard.released, now))),
            Err(e @ StoreError::Corrupt { .. }) => {
                tracing::error!(event = "rule_blocks_corrupt", rule = %rule.id, error = %e, "the rule's held blocks cannot be counted; not buying");
                Ok(Err(format!("its held blocks cannot be counted ({e}); repair the item")))
            }
            Err(e) => Err(e),
        }
    }

    /// Live: the exactly-once path.
    pub async fn live(&self, rule: &Rule, p: &Priced, now: DateTime<Utc>) -> Result<Outcome, StoreError> {
        self.buy(rule, p, None, now).await
    }

    /// The exactly-once path, for a decision of the rule's own or one a person approved
    /// (`approved`: consumed by the reservation, so one approval buys once).
    async fn buy(
        &self,
        rule: &Rule,
        p: &Priced,
        approved: Option<Approved>,
        now: DateTime<Utc>,
    ) -> Result<Outcome, StoreError> {
        let skipped = |reason: String| {
            tracing::info!(event = "purchase_skipped", rule = %rule.id, offering = %p.offering.id, %reason, "not buying");
            Ok(Outcome::Skipped { reason })
        };
        let guard = match self.may_buy(rule, now).await? {
            Ok(guard) => guard,
            Err(reason) => return skipped(reason),
        };

        let period = Period::budget_month(now);
        let charges = match charges_for(rule, &self.budgets, &period) {
            Ok(c) => c,
            Err(e) => return skipped(e.to_string()),
        };
        let intent = Intent {
            approval: approved,
            // A request's one-shot rule consumes the request's approval in the reservation.
            request: rule.request.clone(),
            ..Intent::new(&rule.id, p.offering.clone(), p.accelerators_per_instance, charges, now)
        };
        match self.store.reserve(&intent, guard.seq).await {
            Ok(()) => {}
            Err(ReserveError::Store(e)) => return Err(e),
            Err(ReserveError::AlreadyExists) => {
                return Ok(Outcome::AlreadyTried { offering_id: p.offering.id.clone() });
            }
            Err(e) => return skipped(e.to_string()),
        }
        tracing::info!(event = "intent_reserved", rule = %rule.id, intent = %intent.id, fee = %p.offering.fee, "budget reserved");

        let just_answered = self.answered_at.is_some_and(|t| t.elapsed() <= FRESH_ANSWER);
        let recheck = if just_answered { self.still_meets(rule, p, now) } else { self.recheck(rule, p, now).await };
        let fresh = match recheck {
            Recheck::Confirmed(fresh) => fresh,
            Recheck::Changed(reason) => return self.give_back(rule, p, &intent, reason).await,
            Recheck::Unanswered(e) => {
                return self.give_back(rule, p, &intent, format!("could not re-check the offering: {e}")).await;
            }
        };
        if fresh.id != p.offering.id {
            tracing::info!(event = "offering_id_changed", rule = %rule.id, intent = %intent.id, decided = %p.offering.id, buying = %fresh.id, "EC2 answered the same block under a new id; buying under it");
        }

        self.store.mark_sent(&intent.id, &rule.id, now).await?;
        let mut sent = intent.clone();
        sent.state = crate::domain::budget::IntentState::Sent;
        sent.sent_at = Some(now);

        let buying = Priced { offering: fresh, ..p.clone() };
        match self.market.purchase(&self.request(rule, &buying, &intent.id, false)).await {
            Ok(PurchaseOutcome::Bought(bought)) => {
                let (r, more) = (bought.reservation, bought.more);
                tracing::info!(event = "purchased", rule = %rule.id, intent = %intent.id, reservation = %r.id, more = ?more, fee = %p.offering.fee, "bought");
                // If this write fails, the intent stays Sent and the next run adopts the block by tag.
                record_purchase(self.store, &sent, &r, &more, now).await?;
                Ok(Outcome::Bought { offering_id: p.offering.id.clone(), reservation_id: r.id, more })
            }
            Ok(PurchaseOutcome::WouldSucceed) => Err(StoreError::Corrupt {
                key: intent.id.clone(),
                message: "EC2 answered a live purchase as a dry run".into(),
            }),
            Err(e) => match failed_purchase(&e) {
                FailedPurchase::GiveBack => self.give_back(rule, p, &sent, e.to_string()).await,
                FailedPurchase::Refused => self.refuse(rule, p, &sent, &e.to_string(), now).await,
                FailedPurchase::Unknown => {
                    tracing::error!(event = "purchase_failed", outcome = "unknown", rule = %rule.id, intent = %intent.id, error = %e, "purchase outcome unknown; reconciliation will settle it");
                    Ok(Outcome::Unknown { intent: intent.id.clone(), reason: e.to_string() })
                }
            },
        }
    }

    /// Approval: a person said yes to `intent` (a decision `ask` stored). Refused with nothing
    /// asked or reserved unless the stack (`stack_mode`, as stored) is live, the rule enabled
    /// and in approval mode, and the approval not expired at `now` (the clock's time). The
    /// offering is looked at again first: gone, or priced above the rule's threshold now, it is
    /// refused with nothing reserved; otherwise it is bought at today's price through `live`
    /// (which re-checks it once more after reserving the budget).
    pub async fn approve(
        &self,
        rule: &Rule,
        intent: &Intent,
        stack_mode: Mode,
        now: DateTime<Utc>,
    ) -> Result<Approval, StoreError> {
        if let Some(why) = approval::refusal(rule, intent, stack_mode, now) {
            tracing::warn!(event = "approval_refused", rule = %rule.id, intent = %intent.id, reason = %why, "nothing bought");
            return Ok(Approval::Refused(why));
        }
        let o = &intent.offering;
        let fresh = match self.look_again(rule, o).await {
            Looked::OnSale(fresh) => fresh,
            Looked::Gone => return Ok(Approval::Refused(format!("offering {} is no longer on sale", o.id))),
            Looked::Unanswered(e) => return Ok(Approval::Unanswered(e)),
            Looked::Unaskable(why) => return Ok(Approval::Refused(why)),
        };
        let acc = intent.accelerators_per_instance;
        let (Some(per_acc), Some(was)) = (fresh.price_per_accelerator_hour(acc), o.price_per_accelerator_hour(acc))
        else {
            return Err(StoreError::Corrupt {
                key: intent.id.clone(),
                message: format!("offering {} has no price per accelerator-hour", o.id),
            });
        };
        if per_acc.per_unit > rule.max_price_per_accelerator_hour {
            return Ok(Approval::Refused(format!(
                "the price is {} per accelerator-hour (was {} when decided), above rule {}'s threshold {}",
                per_acc, was, rule.id, rule.max_price_per_accelerator_hour
            )));
        }
        let priced = Priced {
            per_instance_hour: fresh.price_per_instance_hour(),
            per_accelerator_hour: per_acc,
            accelerators_per_instance: acc,
            offering: fresh,
        };
        let action = self.buy(rule, &priced, Some(Approved::of(intent)), now).await?;
        Ok(Approval::Decided { priced: Box::new(priced), action })
    }

    /// A person buys an offering they saw (`capblock buy`) for `rule`. Refused with nothing
    /// reserved unless the stack (`stack_mode`, as stored) is live, the rule enabled and not in
    /// dry-run, and the offering one the rule could have bought itself (its regions, types,
    /// counts, durations, Local Zones, start window, threshold and fee cap, judged at `now`, the
    /// clock's time). Then it goes down `live` as a scan's decision does: the budgets reserved
    /// in one transaction, the offering re-checked with EC2 (by id, or by what it is), one
    /// PurchaseCapacityBlock, and reconciliation by tag if the answer is lost.
    pub async fn buy_by_hand(
        &self,
        rule: &Rule,
        seen: Priced,
        stack_mode: Mode,
        now: DateTime<Utc>,
    ) -> Result<Approval, StoreError> {
        if let Some(why) = hand_refusal(rule, &seen, stack_mode, now) {
            tracing::warn!(event = "buy_refused", rule = %rule.id, offering = %seen.offering.id, reason = %why, "nothing bought");
            return Ok(Approval::Refused(why));
        }
        let action = self.live(rule, &seen, now).await?;
        Ok(Approval::Decided { priced: Box::new(seen), action })
    }

    /// Asks EC2 for `o` again with the question that found it (the rule's duration, not the
    /// block's own length: a same-day closest match is 6 h 35 min for a one-day question),
    /// over a start window of one minute either side; a segmented offering with every type of
    /// its segments, as the question that found it named them. A throttled question is asked
    /// again after `recheck_pause`, a few times.
    async fn look_again(&self, rule: &Rule, o: &Offering) -> Looked {
        let Some(days) = rule.matching_days(o.total_minutes()) else {
            return Looked::Unaskable("the offering's length no longer matches the rule".into());
        };
        let mut also_types: Vec<InstanceType> = Vec::new();
        for s in o.segments.iter().filter(|s| s.instance_type != o.instance_type) {
            if !also_types.contains(&s.instance_type) {
                also_types.push(s.instance_type.clone());
            }
        }
        let q = OfferingQuery {
            region: o.region.clone(),
            instance_type: o.instance_type.clone(),
            instance_count: o.instance_count,
            ultraservers: o.ultraservers,
            duration_hours: days * 24,
            start_from: o.start - Duration::minutes(1),
            start_to: o.start + Duration::minutes(1),
            also_types,
        };
        let mut attempt = 1;
        let answer = loop {
            match self.market.offerings(&q).await {
                Err(MarketError::Throttled { .. }) if attempt < RECHECK_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(self.recheck_pause).await;
                }
                other => break other,
            }
        };
        match answer {
            Err(e) => Looked::Unanswered(e),
            // By id, or by what it is: EC2 may give the same block a new id in a new answer.
            // What is bought is the fresh answer's offering, under the id EC2 gave it there.
            Ok(list) => {
                let same = |x: &Offering| x.id == o.id || o.same_block(x);
                list.into_iter().find(same).map_or(Looked::Gone, Looked::OnSale)
            }
        }
    }

    /// The offering must still be on sale, at the same fee, within the rule.
    async fn recheck(&self, rule: &Rule, p: &Priced, now: DateTime<Utc>) -> Recheck {
        let o = &p.offering;
        match self.look_again(rule, o).await {
            Looked::Unaskable(why) => Recheck::Changed(why),
            Looked::Unanswered(e) => Recheck::Unanswered(e),
            Looked::Gone => Recheck::Changed("the offering is no longer on sale".into()),
            Looked::OnSale(fresh) if fresh.fee != o.fee => {
                Recheck::Changed(format!("the price changed from {} to {}", o.fee, fresh.fee))
            }
            // Same offering, same fee: the price per accelerator-hour is unchanged, but the
            // start window moves with time.
            Looked::OnSale(fresh) => self.still_meets(rule, &Priced { offering: fresh, ..p.clone() }, now),
        }
    }

    /// The offering as answered still meets the rule at `now`.
    fn still_meets(&self, rule: &Rule, p: &Priced, now: DateTime<Utc>) -> Recheck {
        match check(rule, p, Headroom(p.offering.fee), now) {
            None => Recheck::Confirmed(p.offering.clone()),
            Some(why) => Recheck::Changed(format!("the offering no longer meets the rule: {why:?}")),
        }
    }

    /// Nothing that could buy reached EC2: release the budget and let a later run try again.
    /// No message: nothing happened that a person must know, and a busy market would repeat it.
    async fn give_back(&self, rule: &Rule, p: &Priced, intent: &Intent, reason: String) -> Result<Outcome, StoreError> {
        tracing::warn!(event = "purchase_deferred", rule = %rule.id, intent = %intent.id, %reason, "nothing bought; the offering is given back for a later run");
        self.store.record_given_back(intent, &reason).await?;
        Ok(Outcome::GivenBack { offering_id: p.offering.id.clone(), reason })
    }

    async fn refuse(
        &self,
        rule: &Rule,
        p: &Priced,
        intent: &Intent,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Outcome, StoreError> {
        tracing::warn!(event = "purchase_failed", outcome = "refused", rule = %rule.id, intent = %intent.id, %reason, "nothing bought; budget released");
        let msg = announce::purchase_rejected(&rule.id, p, intent, reason);
        let notice = alert_notice(&intent.id, &MessageKind::PurchaseRejected.outbox_key(None)?, &msg, now);
        self.store.record_rejected(intent, reason, Some(&notice)).await?;
        Ok(Outcome::Refused { offering_id: p.offering.id.clone(), reason: reason.to_string() })
    }
}

/// What a PurchaseCapacityBlock error means for the intent that sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailedPurchase {
    /// Certainly nothing bought, and the offering may still be bought: the fee goes back and a
    /// later run may try it again.
    GiveBack,
    /// Certainly nothing bought, and EC2 said no: the fee goes back, the offering stays tried.
    Refused,
    /// EC2 may have bought it (a lost or failed answer): the intent stays Sent, its fee
    /// committed, until reconciliation by tag settles it.
    Unknown,
}

/// The meaning of a purchase's error: only an answer that says EC2 did nothing frees the fee.
pub fn failed_purchase(e: &MarketError) -> FailedPurchase {
    match e {
        // Throttled: EC2 did nothing, and the offering is as good as before. Giving it back is
        // safe because this answer is certain; an unknown one never is.
        MarketError::Throttled { .. } => FailedPurchase::GiveBack,
        // An id EC2 no longer takes: the block may still be on sale under a new one, so the
        // offering is asked again by a later run, never refused for good.
        MarketError::Rejected { .. } if e.code() == Some(OFFERING_ID_EXPIRED) => FailedPurchase::GiveBack,
        _ if e.had_no_effect() => FailedPurchase::Refused,
        // The bug put back: a lost answer read as "nothing bought" (`sabotage`).
        _ if sabotage::on(Bug::GiveBackUnknownAnswers) => FailedPurchase::GiveBack,
        _ => FailedPurchase::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    use crate::app::fixtures::{offering, rule, t0};
    use crate::domain::catalog::AcceleratorCatalog;
    use crate::memory::{Failure, HookVerdict, Hooked, MemoryEc2, MemoryTable, Script};
    use crate::ports::DESCRIBE_LIMIT;

    /// EC2 whose describe limit is spent: every DescribeCapacityBlockOfferings throttled (the
    /// script counts them); its purchases are the in-memory EC2's.
    type Spent = Hooked<MemoryEc2, Script>;

    fn spent(sells: MemoryEc2) -> Spent {
        Hooked::new(sells, Script::new().on("offerings", |_| HookVerdict::Fail(Failure::Throttled(DESCRIBE_LIMIT))))
    }

    fn selling(o: &Offering) -> Spent {
        spent(MemoryEc2::default().with_offerings([o.clone()]))
    }

    /// The purchases EC2 got, and the offerings asked.
    fn asked(market: &Spent) -> (u64, usize) {
        let purchases = market.inner.calls().get("PurchaseCapacityBlock").copied().unwrap_or(0);
        (purchases, market.hook.count("offerings"))
    }

    fn buyer<'a>(
        market: &'a Spent,
        table: &'a MemoryTable,
        answered_at: Option<tokio::time::Instant>,
    ) -> Buyer<'a, Spent, MemoryTable> {
        Buyer {
            market,
            store: table,
            stack: "capblock-test",
            budgets: StackBudgets::default(),
            recheck_pause: StdDuration::from_millis(1),
            answered_at,
        }
    }

    /// `capblock buy` is refused, before anything is asked or reserved, in a stack not live, for
    /// a rule disabled or in dry-run, and for an offering the rule could not have bought itself;
    /// what the rule could have bought in a live stack may be tried.
    #[test]
    fn a_person_may_buy_by_hand_only_what_the_rule_could_buy_itself() {
        let live = rule("east", "live");
        let p = Priced::new(offering("cb-1", t0() + Duration::days(2)), &AcceleratorCatalog::new()).unwrap();
        assert_eq!(hand_refusal(&live, &p, Mode::Live, t0()), None);
        assert_eq!(hand_refusal(&rule("east", "approval"), &p, Mode::Live, t0()), None);
        let refused = |r: &Rule, p: &Priced, stack: Mode| hand_refusal(r, p, stack, t0()).unwrap_or_default();
        assert!(refused(&live, &p, Mode::DryRun).contains("Mode=live"));
        assert!(refused(&Rule { enabled: false, ..live.clone() }, &p, Mode::Live).contains("is disabled"));
        assert!(refused(&rule("east", "dry-run"), &p, Mode::Live).contains("dry-run mode"));
        let too_late = Priced::new(offering("cb-2", t0() + Duration::days(30)), &AcceleratorCatalog::new()).unwrap();
        let late = refused(&live, &too_late, Mode::Live);
        assert!(late.contains("does not meet rule east") && late.contains("outside the rule's start_window"), "{late}");
        // The refusal names the field and the figures to compare.
        let cheap = Rule { max_price_per_accelerator_hour: rust_decimal::Decimal::ONE, ..live.clone() };
        let priced = refused(&cheap, &p, Mode::Live);
        assert!(
            priced.contains(&format!("{}, is above the rule's threshold 1 USD", p.per_accelerator_hour.display())),
            "{priced}"
        );
        let elsewhere = Rule { regions: vec!["eu-west-1".parse().unwrap()], ..live.clone() };
        assert!(refused(&elsewhere, &p, Mode::Live).contains("is not in the rule's regions (eu-west-1)"));
        // Not what the rule asks for: the type and count, or the length, each named.
        let a100 = Offering { instance_type: "p4d.24xlarge".parse().unwrap(), ..p.offering.clone() };
        let a100 = Priced::new(a100, &AcceleratorCatalog::new()).unwrap();
        let other_type = refused(&live, &a100, Mode::Live);
        assert!(other_type.contains("1 x p4d.24xlarge is not what the rule asks for"), "{other_type}");
        let o = &p.offering;
        let two_days = Offering { end: o.start + Duration::days(2), duration_hours: 48, ..o.clone() };
        let two_days = Priced::new(two_days, &AcceleratorCatalog::new()).unwrap();
        let longer = refused(&live, &two_days, Mode::Live);
        assert!(longer.contains("is none of the rule's durations_days (1)"), "{longer}");
    }

    /// An answer seconds old is sent to EC2 as answered, with no re-check call; one older than
    /// `FRESH_ANSWER` is looked at again first, and a re-check EC2 throttles (three times)
    /// gives the offering back with nothing sent.
    #[tokio::test(start_paused = true)]
    async fn a_seconds_old_answer_stands_in_for_the_recheck_an_older_one_does_not() {
        let live = rule("east", "live");
        let p = Priced::new(offering("cb-1", t0() + Duration::days(2)), &AcceleratorCatalog::new()).unwrap();
        let (market, table) = (selling(&p.offering), MemoryTable::default());
        let answered = tokio::time::Instant::now();
        tokio::time::advance(StdDuration::from_secs(5)).await;
        let out = buyer(&market, &table, Some(answered)).live(&live, &p, t0()).await.unwrap();
        assert!(matches!(out, Outcome::Bought { .. }), "{out:?}");
        assert_eq!(asked(&market), (1, 0), "bought with no re-check");

        let (market, table) = (selling(&p.offering), MemoryTable::default());
        let answered = tokio::time::Instant::now();
        tokio::time::advance(FRESH_ANSWER + StdDuration::from_secs(1)).await;
        let out = buyer(&market, &table, Some(answered)).live(&live, &p, t0()).await.unwrap();
        let Outcome::GivenBack { reason, .. } = out else { panic!("{out:?}") };
        assert!(reason.contains(DESCRIBE_LIMIT), "{reason}");
        assert_eq!(asked(&market), (0, RECHECK_ATTEMPTS as usize), "three looks, no purchase");
        assert!(table.writes().iter().any(|w| w.starts_with("record_given_back")));
    }

    /// The held count is read from the table, not the open-blocks index, which DynamoDB keeps
    /// eventually consistent: with the index lagging behind a purchase, the next run still
    /// counts the block bought a moment ago and stays within `max_blocks_held`.
    #[tokio::test(start_paused = true)]
    async fn the_held_count_does_not_wait_for_the_index() {
        let live = Rule { max_blocks_held: 1, ..rule("east", "live") };
        let catalog = AcceleratorCatalog::new();
        let first = Priced::new(offering("cb-1", t0() + Duration::days(2)), &catalog).unwrap();
        let second = Priced::new(offering("cb-2", t0() + Duration::days(3)), &catalog).unwrap();
        let sells = MemoryEc2::default().with_offerings([first.offering.clone(), second.offering.clone()]);
        let (market, table) = (spent(sells), MemoryTable::default());
        table.lag_index();
        let answered = tokio::time::Instant::now();
        let out = buyer(&market, &table, Some(answered)).live(&live, &first, t0()).await.unwrap();
        assert!(matches!(out, Outcome::Bought { .. }), "{out:?}");
        assert!(table.open_blocks(None).await.unwrap().is_empty(), "the index does not show the block yet");

        let out = buyer(&market, &table, Some(answered)).live(&live, &second, t0()).await.unwrap();
        let Outcome::Skipped { reason } = out else { panic!("{out:?}") };
        assert!(reason.contains("holds 1 block(s)"), "{reason}");
        assert_eq!(asked(&market).0, 1, "one block bought, within max_blocks_held");
    }

    /// Which purchase errors free the fee: only answers that say EC2 did nothing. A throttle and
    /// an expired offering id give the offering back for a later run; another refusal (4xx,
    /// a type not sold, a region without Capacity Blocks) frees the fee and keeps it tried; a
    /// lost or 5xx answer keeps the fee committed until reconciliation.
    #[test]
    fn only_an_answer_that_says_nothing_was_bought_frees_the_fee() {
        let region = "us-east-1".to_string();
        let rejected = |code: &str| MarketError::Rejected {
            operation: "PurchaseCapacityBlock",
            region: region.clone(),
            code: code.into(),
            message: "no".into(),
        };
        let cases = [
            (
                MarketError::Throttled {
                    operation: "PurchaseCapacityBlock",
                    region: region.clone(),
                    code: "RequestLimitExceeded",
                },
                FailedPurchase::GiveBack,
            ),
            (rejected(OFFERING_ID_EXPIRED), FailedPurchase::GiveBack),
            (rejected("InsufficientCapacity"), FailedPurchase::Refused),
            (
                MarketError::NotSold {
                    operation: "PurchaseCapacityBlock",
                    region: region.clone(),
                    message: "not sold".into(),
                },
                FailedPurchase::Refused,
            ),
            (
                MarketError::Unknown {
                    operation: "PurchaseCapacityBlock",
                    region: region.clone(),
                    message: "HTTP 503".into(),
                },
                FailedPurchase::Unknown,
            ),
        ];
        for (error, meant) in cases {
            assert_eq!(failed_purchase(&error), meant, "{error:?}");
        }
    }

    /// Re-checked before the purchase: at the fee decided it is bought; at another fee it is
    /// given back, nothing sent; and another block in the answer (another zone, the same start)
    /// is never bought in its place.
    #[tokio::test(start_paused = true)]
    async fn the_recheck_buys_the_offering_decided_at_its_fee_or_nothing() {
        let live = rule("east", "live");
        let p = Priced::new(offering("cb-1", t0() + Duration::days(2)), &AcceleratorCatalog::new()).unwrap();
        let market = |on_sale: Vec<Offering>| Hooked::new(MemoryEc2::default().with_offerings(on_sale), Script::new());
        let pricier = Offering { fee: Money::parse("500", "USD").unwrap(), ..p.offering.clone() };
        let (m, table) = (market(vec![pricier]), MemoryTable::default());
        let out = buyer(&m, &table, None).live(&live, &p, t0()).await.unwrap();
        let Outcome::GivenBack { reason, .. } = out else { panic!("{out:?}") };
        assert!(reason.contains("the price changed from"), "{reason}");
        assert_eq!(asked(&m).0, 0, "nothing sent");

        let elsewhere = Offering { id: "cb-2".into(), availability_zone: "us-east-1b".into(), ..p.offering.clone() };
        let (m, table) = (market(vec![elsewhere, p.offering.clone()]), MemoryTable::default());
        let out = buyer(&m, &table, None).live(&live, &p, t0()).await.unwrap();
        assert!(matches!(&out, Outcome::Bought { .. }), "{out:?}");
        let bought: Vec<String> = m.inner.holdings().iter().map(|h| h.reservation.availability_zone.clone()).collect();
        assert_eq!(bought, std::slice::from_ref(&p.offering.availability_zone), "the block decided, not its neighbour");
    }

    /// An approval buys at a price up to the rule's threshold now, its own included, and is
    /// refused, nothing reserved, a cent above it.
    #[tokio::test(start_paused = true)]
    async fn an_approval_buys_at_the_threshold_and_not_above_it() {
        let p = Priced::new(offering("cb-1", t0() + Duration::days(2)), &AcceleratorCatalog::new()).unwrap();
        let price = p.per_accelerator_hour.per_unit;
        for (threshold, buys) in [(price, true), (price - rust_decimal::Decimal::new(1, 2), false)] {
            let rule = Rule { max_price_per_accelerator_hour: threshold, ..rule("east", "approval") };
            let charges = charges_for(&rule, &StackBudgets::default(), &Period::budget_month(t0())).unwrap();
            let asked = Intent::new(&rule.id, p.offering.clone(), 8, charges, t0());
            let (m, table) = (
                Hooked::new(MemoryEc2::default().with_offerings([p.offering.clone()]), Script::new()),
                MemoryTable::default(),
            );
            assert!(table.record_approval(&asked).await.unwrap(), "asked");
            let out = buyer(&m, &table, None).approve(&rule, &asked, Mode::Live, t0()).await.unwrap();
            match out {
                Approval::Decided { action: Outcome::Bought { .. }, .. } => assert!(buys, "{threshold}: bought"),
                Approval::Refused(why) => {
                    assert!(!buys && why.contains("above rule east's threshold"), "{threshold}: {why}");
                    let writes = table.writes();
                    assert!(!writes.iter().any(|w| w.starts_with("reserve")), "nothing reserved: {writes:?}");
                }
                other => panic!("{threshold}: {other:?}"),
            }
            assert_eq!(m.inner.purchases_made(), u64::from(buys));
        }
    }

    /// One approval buys one block: the purchase uses it up (no longer waiting), and approved
    /// again (a double click, a retried request) the same intent buys nothing more, though the
    /// offering is still on sale.
    #[tokio::test(start_paused = true)]
    async fn an_approval_given_twice_buys_once() {
        let p = Priced::new(offering("cb-1", t0() + Duration::days(2)), &AcceleratorCatalog::new()).unwrap();
        let rule = Rule { max_blocks_held: 5, ..rule("east", "approval") };
        let charges = charges_for(&rule, &StackBudgets::default(), &Period::budget_month(t0())).unwrap();
        let asked = Intent::new(&rule.id, p.offering.clone(), 8, charges, t0());
        let market = Hooked::new(MemoryEc2::default().with_offerings([p.offering.clone()]), Script::new());
        let table = MemoryTable::default();
        assert!(table.record_approval(&asked).await.unwrap());
        let first = buyer(&market, &table, None).approve(&rule, &asked, Mode::Live, t0()).await.unwrap();
        assert!(matches!(first, Approval::Decided { action: Outcome::Bought { .. }, .. }), "{first:?}");
        let waiting = table.approvals_waiting(&rule.id).await.unwrap();
        assert!(waiting.is_empty(), "the approval is used up by the purchase: {waiting:?}");
        let again = buyer(&market, &table, None).approve(&rule, &asked, Mode::Live, t0() + Duration::minutes(1)).await;
        assert!(!matches!(again, Ok(Approval::Decided { action: Outcome::Bought { .. }, .. })), "{again:?}");
        assert_eq!(market.inner.purchases_made(), 1, "one approval, one block");
    }
}
