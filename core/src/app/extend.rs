//! Extending blocks whose rule asks for it, with the purchase discipline: an extension intent
//! keyed by (block, extension offering) and the budget reserved in one transaction before
//! PurchaseCapacityBlockExtension is sent once (no SDK retries); an unknown outcome is settled
//! by EC2's extension history or the block's end date, never by resending. A sent extension's
//! fee is released only on EC2's word that its payment failed.

mod asking;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use self::asking::{Asking, NotAsked};
use super::outbox::alert_notice;
use crate::domain::announce;
use crate::domain::block::Block;
use crate::domain::budget::{Period, StackBudgets, charges_for};
use crate::domain::extension::{
    ExtensionIntent, ExtensionOffer, ExtensionState, PaymentStatus, Settlement, choose, held_after_release,
    history_disagrees, in_window, lengths_to_ask, paid_days, settlement_with_history,
};
use crate::domain::ids::Region;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::Rate;
use crate::domain::rule::{Extend, Mode, Rule};
use crate::domain::slack::SlackMessage;
use crate::ports::{
    BlockStore, ExtensionHistory, ExtensionLedger, ExtensionMarket, Ledger, MarketError, MarketMemory, Outbox,
    ReserveError, StoreError,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum ExtensionAction {
    WouldExtend {
        reservation_id: String,
        offering_id: String,
        first_time: bool,
    },
    Bought {
        reservation_id: String,
        offering_id: String,
    },
    Refused {
        reservation_id: String,
        offering_id: String,
        reason: String,
    },
    Unknown {
        reservation_id: String,
        offering_id: String,
        reason: String,
    },
    Skipped {
        reservation_id: String,
        reason: String,
    },
    Paid {
        reservation_id: String,
        offering_id: String,
    },
    Released {
        reservation_id: String,
        offering_id: String,
        reason: String,
    },
    /// Past its payment deadline without EC2's word that it failed: left open, a person told.
    Overdue {
        reservation_id: String,
        offering_id: String,
    },
    /// Closed as released, yet EC2's history shows it held: its fee committed again.
    Recommitted {
        reservation_id: String,
        offering_id: String,
    },
}

pub struct Extender<'a, M: ?Sized, S: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub stack_mode: Mode,
    /// The stack's account and team budgets, charged with the rule's.
    pub budgets: StackBudgets,
}

impl<M, S> Extender<'_, M, S>
where
    M: ExtensionMarket + ExtensionHistory + ?Sized,
    S: Ledger + BlockStore + Outbox + ExtensionLedger + MarketMemory + ?Sized,
{
    /// `observed`: the blocks whose stored state and end were checked against EC2 in this run.
    pub async fn run(
        &self,
        rules: &HashMap<String, Rule>,
        observed: &HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ExtensionAction>, StoreError> {
        let mut blocks = self.store.open_blocks(None).await?;
        let mut out = self.settle(&blocks, observed, now).await?;
        let asking = Asking::default();
        // The blocks ending soonest ask first: when a region's questions run out this run, the
        // ones left have the most time.
        blocks.sort_by_key(|b| b.end);
        for b in blocks {
            let Some(rule) = b.rule_id.as_ref().and_then(|r| rules.get(r)) else {
                continue;
            };
            let Some(x) = &rule.extend else { continue };
            if !rule.enabled || !in_window(&b, x, now) {
                continue;
            }
            match self.consider(&b, rule, x, now, &asking).await {
                Ok(Some(a)) => out.push(a),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(event = "extension_failed", reservation = %b.reservation_id, error = %e, "extension not decided this run");
                    out.push(ExtensionAction::Skipped {
                        reservation_id: b.reservation_id.clone(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// EC2's payment status of each extension in `asked`, from one
    /// DescribeCapacityBlockExtensionHistory per region. A region that fails has no status this
    /// run: its extensions are left as they are (absence is no evidence).
    async fn payment_statuses(&self, asked: &[(ExtensionIntent, Block)]) -> HashMap<(String, String), PaymentStatus> {
        let mut by_region: HashMap<Region, Vec<String>> = HashMap::new();
        for (x, b) in asked {
            by_region.entry(b.region.clone()).or_default().push(x.reservation_id.clone());
        }
        let mut out = HashMap::new();
        for (region, mut ids) in by_region {
            ids.sort();
            ids.dedup();
            match self.market.extension_history(&region, &ids).await {
                Ok(records) => out.extend(
                    records
                        .into_iter()
                        .filter_map(|r| Some(((r.reservation_id, r.offering_id), PaymentStatus::from_ec2(&r.status)?))),
                ),
                Err(e) => {
                    tracing::warn!(event = "extension_history_failed", %region, error = %e, "no extension is released in the region this run")
                }
            }
        }
        out
    }

    /// The extensions EC2's history is asked about this run: the open ones, and those closed as
    /// Released after they were sent, of blocks still open (EC2 may hold them after all).
    async fn to_ask(
        &self,
        blocks: &[Block],
    ) -> Result<(Vec<(ExtensionIntent, Block)>, Vec<(ExtensionIntent, Block)>), StoreError> {
        let mut open = Vec::new();
        for x in self.store.open_extensions().await? {
            if let Some(b) = self.store.get_block(&x.reservation_id).await? {
                open.push((x, b));
            }
        }
        let mut released = Vec::new();
        for b in blocks {
            for x in self.store.extensions_of(&b.reservation_id).await? {
                if x.state == ExtensionState::Released && x.sent_at.is_some() {
                    released.push((x, b.clone()));
                }
            }
        }
        Ok((open, released))
    }

    /// Closes open extension intents whose outcome is now known (EC2's extension history, or an
    /// end that moved), tells a person of those overdue, and commits again the fee of a released
    /// one EC2's history shows it holds.
    async fn settle(
        &self,
        blocks: &[Block],
        observed: &HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ExtensionAction>, StoreError> {
        let (open, released) = self.to_ask(blocks).await?;
        if open.is_empty() && released.is_empty() {
            return Ok(Vec::new());
        }
        let asked: Vec<(ExtensionIntent, Block)> = open.iter().chain(&released).cloned().collect();
        let statuses = self.payment_statuses(&asked).await;
        let status_of = |x: &ExtensionIntent| statuses.get(&(x.reservation_id.clone(), x.offer.id.clone())).copied();
        let mut out = Vec::new();
        for (x, b) in released {
            if held_after_release(&x, status_of(&x)) {
                out.extend(self.recommit(&x, &b, status_of(&x), now).await?);
            }
        }
        for (x, b) in open {
            let status = status_of(&x);
            out.extend(self.settle_one(&x, &b, observed.contains(&x.reservation_id), status, now).await?);
        }
        Ok(out)
    }

    /// One open intent: closed when EC2's word (or an end that moved) decides it, else left open.
    async fn settle_one(
        &self,
        x: &ExtensionIntent,
        b: &Block,
        seen: bool,
        status: Option<PaymentStatus>,
        now: DateTime<Utc>,
    ) -> Result<Option<ExtensionAction>, StoreError> {
        let (rid, oid) = (x.reservation_id.clone(), x.offer.id.clone());
        if history_disagrees(x, b, seen, status) {
            tracing::warn!(event = "extension_history_disagrees", reservation = %rid, offering = %oid, end = %b.end,
                "EC2's history says paid, the block's end has not moved yet; counted as paid");
        }
        let (to, reason): (ExtensionState, Option<&str>) = match settlement_with_history(x, b, seen, status, now) {
            Settlement::Paid => (ExtensionState::Paid, None),
            Settlement::Release(why) => (ExtensionState::Released, Some(why)),
            Settlement::Overdue => return self.overdue(x, b, status, now).await,
            Settlement::Unobserved => {
                tracing::info!(event = "extension_unsettled", reservation = %rid, offering = %oid, "block not observed this run; extension left open");
                return Ok(None);
            }
            Settlement::Wait => return Ok(None),
        };
        if let Some(why) = reason
            && x.state != ExtensionState::Reserved
        {
            let msg = announce::extension_released(b, &oid, why);
            self.store
                .enqueue(&alert_notice(&rid, &MessageKind::ExtensionReleased.outbox_key(Some(&oid))?, &msg, now))
                .await?;
        }
        match self.store.close_extension(x, to, reason).await {
            Ok(()) | Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        tracing::info!(event = "extension_settled", reservation = %rid, offering = %oid, state = to.as_str(), "extension closed");
        Ok(Some(match reason {
            None => ExtensionAction::Paid { reservation_id: rid, offering_id: oid },
            Some(r) => ExtensionAction::Released { reservation_id: rid, offering_id: oid, reason: r.into() },
        }))
    }

    /// A sent extension past its payment deadline (or of an ended block) that EC2 has not said
    /// failed: its fee stays committed and it stays open (so no other extension of the block is
    /// bought). Logged as an error every run, for the alarm, and told once to a person, who
    /// decides.
    async fn overdue(
        &self,
        x: &ExtensionIntent,
        b: &Block,
        status: Option<PaymentStatus>,
        now: DateTime<Utc>,
    ) -> Result<Option<ExtensionAction>, StoreError> {
        let (rid, oid) = (x.reservation_id.clone(), x.offer.id.clone());
        let word = status.map_or("no word", PaymentStatus::as_ec2);
        tracing::error!(event = "extension_overdue", reservation = %rid, offering = %oid, ec2_status = word, fee = %x.offer.fee,
            "past its payment deadline and EC2 has not reported it failed; its fee stays committed until a person decides");
        self.tell_once(x, MessageKind::ExtensionOverdue, &announce::extension_overdue(b, &oid, x.offer.fee, word), now)
            .await?;
        Ok(Some(ExtensionAction::Overdue { reservation_id: rid, offering_id: oid }))
    }

    /// Tells a person `msg` in the block's thread, once per extension offer: the outbox key
    /// `<kind>-<offer id>` dedups it across runs.
    async fn tell_once(
        &self,
        x: &ExtensionIntent,
        kind: MessageKind,
        msg: &SlackMessage,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let key = kind.outbox_key(Some(&x.offer.id))?;
        self.store.enqueue(&alert_notice(&x.reservation_id, &key, msg, now)).await.map(drop)
    }

    /// A released intent EC2's history shows it holds (pending or paid): its fee is committed
    /// to the budgets again, once (the store's condition on Released), announced once and
    /// logged as a ledger mismatch.
    async fn recommit(
        &self,
        x: &ExtensionIntent,
        b: &Block,
        status: Option<PaymentStatus>,
        now: DateTime<Utc>,
    ) -> Result<Option<ExtensionAction>, StoreError> {
        let (rid, oid) = (x.reservation_id.clone(), x.offer.id.clone());
        let word = status.map_or("no word", PaymentStatus::as_ec2);
        tracing::error!(event = "ledger_mismatch", reservation = %rid, offering = %oid, ec2_status = word, fee = %x.offer.fee,
            "an extension closed as released is held by EC2; its fee is committed to the budgets again");
        self.tell_once(
            x,
            MessageKind::ExtensionRecommitted,
            &announce::extension_recommitted(b, &oid, x.offer.fee, word),
            now,
        )
        .await?;
        let reason = format!("re-committed: EC2's extension history says {word}");
        match self.store.recommit_extension(x, &reason).await {
            Ok(()) => Ok(Some(ExtensionAction::Recommitted { reservation_id: rid, offering_id: oid })),
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn consider(
        &self,
        b: &Block,
        rule: &Rule,
        x: &Extend,
        now: DateTime<Utc>,
        asking: &Asking,
    ) -> Result<Option<ExtensionAction>, StoreError> {
        let rid = b.reservation_id.clone();
        let skip = |reason: String| Ok(Some(ExtensionAction::Skipped { reservation_id: rid.clone(), reason }));
        let Some(accel) = b.accelerators_per_instance else {
            return skip("accelerators per instance unknown".into());
        };
        let history = self.store.extensions_of(&b.reservation_id).await?;
        if history.iter().any(|e| e.state.is_open()) {
            return Ok(None);
        }
        // max_days bounds the extension days of a block in total, so a cheap market cannot
        // keep a block alive forever.
        let left_days = x.max_days.saturating_sub(paid_days(&history));
        if left_days == 0 {
            return Ok(None);
        }
        let offers = match self.offers(b, left_days, now, asking).await {
            Ok(offers) => offers,
            Err(why) => return skip(why.reason().into()),
        };
        let headroom = super::budgets::headroom(self.store, rule, &self.budgets, now).await?;
        let Some((offer, rate)) = choose(&offers, b.instance_count, accel, x.max_price_per_accelerator_hour, headroom)
        else {
            return skip(format!("none of {} extension offering(s) meets the rule and the budget", offers.len()));
        };

        let mode = self.stack_mode.and(rule.mode);
        if mode != Mode::Live {
            let msg = announce::extension_decided(b, &offer.id, offer.end, offer.fee, rate, mode);
            let first_time =
                self.store.enqueue(&alert_notice(&rid, &MessageKind::WouldExtend.outbox_key(None)?, &msg, now)).await?;
            // Checked with DryRun=true, once per decision, so a permission problem shows now
            // rather than in the first live run.
            if first_time && let Err(e) = self.market.check_extension(&b.region, &offer.id, &rid).await {
                tracing::warn!(event = "extension_dry_run_refused", reservation = %rid, offering = %offer.id, error = %e, "EC2 would refuse this extension");
                let why = format!("A dry-run PurchaseCapacityBlockExtension of `{}` was refused: {e}", offer.id);
                self.store
                    .enqueue(&alert_notice(
                        &rid,
                        &MessageKind::WouldExtend.outbox_key(Some("refused"))?,
                        &announce::anomaly(b, &why),
                        now,
                    ))
                    .await?;
            }
            return Ok(Some(ExtensionAction::WouldExtend { reservation_id: rid, offering_id: offer.id, first_time }));
        }
        self.buy(b, rule, offer, rate, now).await
    }

    /// The extensions EC2 sells now for the block, for the lengths up to `days` this run asks
    /// (`lengths_to_ask`), each question waiting its turn in the region (`asking`). A length EC2
    /// fails to answer for is skipped this run; a throttled question ends the region's asking
    /// for the run. `Err` when not one question could be asked.
    async fn offers(
        &self,
        b: &Block,
        days: u32,
        now: DateTime<Utc>,
        asking: &Asking,
    ) -> Result<Vec<ExtensionOffer>, NotAsked> {
        if !asking.knows(&b.region) {
            let learned = match self.store.region_memory(&b.region).await {
                Ok(m) => m.pace,
                Err(e) => {
                    tracing::warn!(event = "extension_pace_unread", region = %b.region, error = %e, "asking at the starting pace");
                    None
                }
            };
            asking.open(&b.region, learned);
        }
        let mut offers = Vec::new();
        for (i, days) in lengths_to_ask(days, now).into_iter().enumerate() {
            if let Err(why) = asking.turn(&b.region).await {
                if i == 0 {
                    return Err(why);
                }
                break;
            }
            match self.market.extension_offerings(&b.region, &b.reservation_id, days * 24).await {
                Ok(o) => offers.extend(o),
                Err(e @ MarketError::Throttled { .. }) => {
                    tracing::warn!(event = "extension_offerings_throttled", reservation = %b.reservation_id, days, error = %e, "no more extension questions in the region this run");
                    asking.throttled(&b.region);
                    if i == 0 {
                        return Err(NotAsked::Throttled);
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(event = "extension_offerings_failed", reservation = %b.reservation_id, days, error = %e, "skipping this duration")
                }
            }
        }
        Ok(offers)
    }

    /// Buys `offer` exactly once: budget reserved and the record marked Sent before the one
    /// PurchaseCapacityBlockExtension; an unknown outcome is settled by the end date later.
    async fn buy(
        &self,
        b: &Block,
        rule: &Rule,
        offer: ExtensionOffer,
        rate: Rate,
        now: DateTime<Utc>,
    ) -> Result<Option<ExtensionAction>, StoreError> {
        let rid = b.reservation_id.clone();
        let charges = match charges_for(rule, &self.budgets, &Period::budget_month(now)) {
            Ok(c) => c,
            Err(e) => return Ok(Some(ExtensionAction::Skipped { reservation_id: rid, reason: e.to_string() })),
        };
        let intent = ExtensionIntent {
            reservation_id: rid.clone(),
            rule_id: rule.id.clone(),
            offer: offer.clone(),
            state: ExtensionState::Reserved,
            created_at: now,
            sent_at: None,
            reason: None,
            charges,
        };
        match self.store.reserve_extension(&intent).await {
            Ok(()) => {}
            Err(ReserveError::Store(e)) => return Err(e),
            Err(e) => return Ok(Some(ExtensionAction::Skipped { reservation_id: rid, reason: e.to_string() })),
        }
        self.store.advance_extension(&intent, ExtensionState::Sent, now).await?;
        let sent = ExtensionIntent { state: ExtensionState::Sent, sent_at: Some(now), ..intent };
        match self.market.purchase_extension(&b.region, &offer.id, &rid).await {
            Ok(receipt) => {
                tracing::info!(event = "extension_bought", reservation = %rid, offering = %offer.id, fee = %offer.fee, status = %receipt.status, "extension bought");
                // If this write is lost the intent stays Sent; the end date settles it all the same.
                if let Err(e) = self.store.advance_extension(&sent, ExtensionState::Bought, now).await {
                    tracing::warn!(event = "extension_record_failed", reservation = %rid, error = %e, "left Sent; settled by the end date");
                }
                let msg = announce::extension_decided(b, &offer.id, offer.end, offer.fee, rate, Mode::Live);
                self.store
                    .enqueue(&alert_notice(&rid, &MessageKind::ExtensionBought.outbox_key(Some(&offer.id))?, &msg, now))
                    .await?;
                Ok(Some(ExtensionAction::Bought { reservation_id: rid, offering_id: offer.id }))
            }
            Err(e) if e.had_no_effect() => {
                let reason = e.to_string();
                tracing::warn!(event = "extension_refused", reservation = %rid, offering = %offer.id, %reason, "nothing bought; budget released");
                // The notice first (keyed like settle's, so a crash before the close cannot
                // announce it twice: the next run settles the intent and finds the notice).
                let msg = announce::extension_released(b, &offer.id, &reason);
                self.store
                    .enqueue(&alert_notice(
                        &rid,
                        &MessageKind::ExtensionReleased.outbox_key(Some(&offer.id))?,
                        &msg,
                        now,
                    ))
                    .await?;
                self.store.close_extension(&sent, ExtensionState::Released, Some(&reason)).await?;
                Ok(Some(ExtensionAction::Refused { reservation_id: rid, offering_id: offer.id, reason }))
            }
            Err(e) => {
                tracing::error!(event = "extension_unknown", reservation = %rid, offering = %offer.id, error = %e, "outcome unknown; settled by the end date");
                Ok(Some(ExtensionAction::Unknown { reservation_id: rid, offering_id: offer.id, reason: e.to_string() }))
            }
        }
    }
}

#[cfg(test)]
mod tests;
