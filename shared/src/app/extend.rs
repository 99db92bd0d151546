//! Extending blocks whose rule asks for it, with the purchase discipline: an extension intent
//! keyed by (block, extension offering) and the budget reserved in one transaction before
//! PurchaseCapacityBlockExtension is sent once (no SDK retries); an unknown outcome is settled
//! by watching the block's end date, never by resending.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::outbox::alert_notice;
use super::purchase::charges_for;
use super::reconcile::{RESERVED_GRACE, SENT_GRACE};
use super::track::facts;
use crate::domain::announce;
use crate::domain::budget::{BudgetOwner, Period};
use crate::domain::decision::room;
use crate::domain::lifecycle::{BlockState, extension_payment_deadline};
use crate::domain::money::{Money, Rate};
use crate::domain::rule::{Extend, Mode, Rule, is_sellable_duration_days};
use crate::ports::{
    Block, BlockStore, ExtensionIntent, ExtensionLedger, ExtensionMarket, ExtensionOffer, ExtensionState, Ledger,
    Outbox, ReserveError, StoreError,
};

/// EC2 sells extensions until 1 hour before the end.
pub const LAST_EXTENSION_BEFORE_END: Duration = Duration::hours(1);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum ExtensionAction {
    WouldExtend { reservation_id: String, offering_id: String, first_time: bool },
    Bought { reservation_id: String, offering_id: String },
    Refused { reservation_id: String, offering_id: String, reason: String },
    Unknown { reservation_id: String, offering_id: String, reason: String },
    Skipped { reservation_id: String, reason: String },
    Paid { reservation_id: String, offering_id: String },
    Released { reservation_id: String, offering_id: String, reason: String },
}

/// The cheapest offer per accelerator-hour at or under `max_rate` whose fee fits `headroom`.
pub fn choose(
    offers: &[ExtensionOffer],
    instance_count: u32,
    accelerators_per_instance: u32,
    max_rate: Decimal,
    headroom: Money,
) -> Option<(ExtensionOffer, Rate)> {
    offers
        .iter()
        .filter(|o| o.fee.currency() == headroom.currency() && o.fee.amount() <= headroom.amount())
        .filter_map(|o| {
            let units = Decimal::from(instance_count)
                * Decimal::from(accelerators_per_instance)
                * Decimal::from(o.duration_hours);
            Some((o.clone(), o.fee.per(units)?))
        })
        .filter(|(_, r)| r.per_unit <= max_rate)
        .min_by(|a, b| a.1.per_unit.cmp(&b.1.per_unit).then(a.0.duration_hours.cmp(&b.0.duration_hours)))
}

/// Whether the block is in its rule's decision window at `now`.
pub fn in_window(b: &Block, x: &Extend, now: DateTime<Utc>) -> bool {
    matches!(b.state, BlockState::Scheduled | BlockState::Active)
        && now >= b.end - Duration::hours(i64::from(x.decide_hours_before_end))
        && now <= b.end - LAST_EXTENSION_BEFORE_END
}

pub struct Extender<'a, M: ?Sized, S: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub stack_mode: Mode,
    pub account_budget: Option<Money>,
}

impl<M, S> Extender<'_, M, S>
where
    M: ExtensionMarket + ?Sized,
    S: Ledger + BlockStore + Outbox + ExtensionLedger + ?Sized,
{
    /// `observed`: the blocks whose stored state and end were checked against EC2 in this run.
    pub async fn run(
        &self,
        rules: &HashMap<String, Rule>,
        observed: &HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ExtensionAction>, StoreError> {
        let mut out = self.settle(observed, now).await?;
        for b in self.store.open_blocks(None).await? {
            let Some(rule) = b.rule_id.as_ref().and_then(|r| rules.get(r)) else {
                continue;
            };
            let Some(x) = &rule.extend else { continue };
            if !rule.enabled || !in_window(&b, x, now) {
                continue;
            }
            match self.consider(&b, rule, x, now).await {
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

    /// Closes open extension intents whose outcome is now known from the block's end date.
    async fn settle(&self, observed: &HashSet<String>, now: DateTime<Utc>) -> Result<Vec<ExtensionAction>, StoreError> {
        let mut out = Vec::new();
        for x in self.store.open_extensions().await? {
            let Some(b) = self.store.get_block(&x.reservation_id).await? else {
                continue;
            };
            let (rid, oid) = (x.reservation_id.clone(), x.offer.id.clone());
            let sent_at = x.sent_at.unwrap_or(x.created_at);
            let (to, reason) = if b.end >= x.offer.end {
                (ExtensionState::Paid, None)
            } else if x.state == ExtensionState::Reserved && now - x.created_at >= RESERVED_GRACE {
                (ExtensionState::Released, Some("abandoned before it was sent"))
            } else if x.state != ExtensionState::Reserved && !b.state.is_final() && !observed.contains(&rid) {
                // EC2 was not asked about the block this run (its region failed): the stored
                // end may be stale, and releasing an extension EC2 has charged would hide the
                // charge from the budgets. Decide when the end is known.
                tracing::info!(event = "extension_unsettled", reservation = %rid, offering = %oid, "block not observed this run; extension left open");
                continue;
            } else if x.state != ExtensionState::Reserved
                && now >= extension_payment_deadline(sent_at, x.offer.start) + SENT_GRACE
            {
                (ExtensionState::Released, Some("the end did not move by the payment deadline"))
            } else if b.state.is_final() {
                (ExtensionState::Released, Some("the block ended"))
            } else {
                continue;
            };
            if let Some(why) = reason
                && x.state != ExtensionState::Reserved
            {
                let msg = announce::extension_released(&facts(&b), &oid, why);
                self.store.enqueue(&alert_notice(&rid, &format!("extension-released-{oid}"), &msg, now)).await?;
            }
            match self.store.close_extension(&x, to, reason).await {
                Ok(()) | Err(StoreError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
            tracing::info!(event = "extension_settled", reservation = %rid, offering = %oid, state = to.as_str(), "extension closed");
            out.push(match reason {
                None => ExtensionAction::Paid { reservation_id: rid, offering_id: oid },
                Some(r) => ExtensionAction::Released { reservation_id: rid, offering_id: oid, reason: r.into() },
            });
        }
        Ok(out)
    }

    async fn headroom(&self, rule: &Rule, now: DateTime<Utc>) -> Result<Money, StoreError> {
        let period = Period::of(now);
        let committed =
            |u: Option<crate::domain::budget::BudgetUsage>, cur| u.map(|u| u.committed).unwrap_or(Money::zero(cur));
        let mut h = room(
            rule.monthly_budget,
            committed(self.store.usage(&BudgetOwner::Rule(rule.id.clone()), &period).await?, rule.currency),
        );
        if let Some(limit) = self.account_budget {
            let acct =
                room(limit, committed(self.store.usage(&BudgetOwner::Account, &period).await?, limit.currency()));
            if acct.amount() < h.amount() {
                h = acct;
            }
        }
        Ok(h)
    }

    async fn consider(
        &self,
        b: &Block,
        rule: &Rule,
        x: &Extend,
        now: DateTime<Utc>,
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
        let used_days: u32 =
            history.iter().filter(|e| e.state == ExtensionState::Paid).map(|e| e.offer.duration_hours / 24).sum();
        let left_days = x.max_days.saturating_sub(used_days);
        if left_days == 0 {
            return Ok(None);
        }
        let mut offers = Vec::new();
        for days in (1..=left_days).filter(|d| is_sellable_duration_days(i64::from(*d))) {
            match self.market.extension_offerings(&b.region, &b.reservation_id, days * 24).await {
                Ok(o) => offers.extend(o),
                Err(e) => {
                    tracing::warn!(event = "extension_offerings_failed", reservation = %rid, days, error = %e, "skipping this duration")
                }
            }
        }
        let headroom = self.headroom(rule, now).await?;
        let Some((offer, rate)) = choose(&offers, b.instance_count, accel, x.max_price_per_accelerator_hour, headroom)
        else {
            return skip(format!("none of {} extension offering(s) meets the rule and the budget", offers.len()));
        };

        let mode = self.stack_mode.and(rule.mode);
        if mode != Mode::Live {
            let msg = announce::extension_decided(&facts(b), &offer.id, offer.end, offer.fee, rate, mode);
            let first_time = self.store.enqueue(&alert_notice(&rid, "would-extend", &msg, now)).await?;
            return Ok(Some(ExtensionAction::WouldExtend { reservation_id: rid, offering_id: offer.id, first_time }));
        }

        let intent = ExtensionIntent {
            reservation_id: rid.clone(),
            rule_id: rule.id.clone(),
            offer: offer.clone(),
            state: ExtensionState::Reserved,
            created_at: now,
            sent_at: None,
            reason: None,
            charges: charges_for(rule, self.account_budget, &Period::of(now)),
        };
        match self.store.reserve_extension(&intent).await {
            Ok(()) => {}
            Err(ReserveError::Store(e)) => return Err(e),
            Err(e) => return skip(e.to_string()),
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
                let msg = announce::extension_decided(&facts(b), &offer.id, offer.end, offer.fee, rate, Mode::Live);
                self.store.enqueue(&alert_notice(&rid, &format!("extension-bought-{}", offer.id), &msg, now)).await?;
                Ok(Some(ExtensionAction::Bought { reservation_id: rid, offering_id: offer.id }))
            }
            Err(e) if e.had_no_effect() => {
                let reason = e.to_string();
                tracing::warn!(event = "extension_refused", reservation = %rid, offering = %offer.id, %reason, "nothing bought; budget released");
                // The notice first (keyed like settle's, so a crash before the close cannot
                // announce it twice: the next run settles the intent and finds the notice).
                let msg = announce::extension_released(&facts(b), &offer.id, &reason);
                self.store.enqueue(&alert_notice(&rid, &format!("extension-released-{}", offer.id), &msg, now)).await?;
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
mod tests {
    use super::*;
    use chrono::TimeZone;
    use rust_decimal_macros::dec;

    fn offer(id: &str, hours: u32, fee: Decimal) -> ExtensionOffer {
        let t = Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap();
        ExtensionOffer {
            id: id.into(),
            reservation_id: "cr-1".into(),
            duration_hours: hours,
            start: t,
            end: t + Duration::hours(i64::from(hours)),
            fee: Money::usd(fee).unwrap(),
        }
    }

    #[test]
    fn picks_the_cheapest_rate_under_the_threshold_and_the_budget() {
        // 1 x 8 GPUs: 1 day at 2.50 = 480, 2 days at 2.40 = 921.60, 3 days at 3.10 = 1785.60.
        let offers = [offer("a", 24, dec!(480)), offer("b", 48, dec!(921.60)), offer("c", 72, dec!(1785.60))];
        let h = |v| Money::usd(v).unwrap();
        let (o, r) = choose(&offers, 1, 8, dec!(3.00), h(dec!(10000))).unwrap();
        assert_eq!((o.id.as_str(), r.per_unit), ("b", dec!(2.40)));
        // The budget left only fits the one-day extension.
        assert_eq!(choose(&offers, 1, 8, dec!(3.00), h(dec!(500))).unwrap().0.id, "a");
        // The threshold is inclusive; a cent below refuses everything.
        assert_eq!(choose(&offers, 1, 8, dec!(2.40), h(dec!(10000))).unwrap().0.id, "b");
        assert!(choose(&offers, 1, 8, dec!(2.39), h(dec!(10000))).is_none());
    }
}
