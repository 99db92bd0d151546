//! Settling purchase intents whose outcome is not known: a run that died after reserving, or
//! after sending PurchaseCapacityBlock. EC2 is asked by tag; a purchase is never re-sent.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::handoff::event_notice;
use super::outbox::alert_notice;
use crate::domain::announce;
use crate::domain::block::{Block, Reservation};
use crate::domain::budget::{Intent, IntentState, RESERVED_GRACE, SENT_GRACE};
use crate::domain::bus::{Step, Subject, event_tags};
use crate::domain::decision::Priced;
use crate::domain::tags::INTENT_TAG;
use crate::ports::{Ledger, ReservationSource, StoreError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Settled {
    Adopted {
        intent: String,
        reservation_id: String,
    },
    Rejected {
        intent: String,
        reason: String,
    },
    /// Never sent: the fee was released and the offering may be tried again.
    GivenBack {
        intent: String,
        reason: String,
    },
    StillOpen {
        intent: String,
        reason: String,
    },
}

/// Records a bought reservation with its announcement and its Block Purchased event, in one
/// transaction: a purchase on the books is always announced, once.
pub async fn record_purchase<L: Ledger + ?Sized>(
    ledger: &L,
    intent: &Intent,
    r: &Reservation,
    now: DateTime<Utc>,
) -> Result<Block, StoreError> {
    let block = Block::bought(intent, r, now);
    let priced = Priced {
        per_accelerator_hour: intent
            .offering
            .price_per_accelerator_hour(intent.accelerators_per_instance)
            .unwrap_or_else(|| intent.offering.price_per_instance_hour()),
        per_instance_hour: intent.offering.price_per_instance_hour(),
        accelerators_per_instance: intent.accelerators_per_instance,
        offering: intent.offering.clone(),
    };
    let msg = announce::purchased(&intent.rule_id, &priced, &r.id, r.arn.as_deref(), block.purchased_at);
    let notice = alert_notice(&r.id, "purchased", &msg, now);
    let subject = Subject::of(&block, event_tags(&r.tags));
    let event = event_notice(&subject, &Step::Purchased, "purchased", r.arn.as_deref(), now);
    ledger.record_bought(intent, &block, &[notice, event]).await?;
    Ok(block)
}

/// Settles every open intent it can. Errors on one intent are reported and do not stop others.
pub async fn settle_open_intents<L, R>(ledger: &L, market: &R, now: DateTime<Utc>) -> Result<Vec<Settled>, StoreError>
where
    L: Ledger + ?Sized,
    R: ReservationSource + ?Sized,
{
    let mut out = Vec::new();
    for intent in ledger.open_intents().await? {
        let settled = match settle(ledger, market, &intent, now).await {
            Ok(s) => s,
            Err(e) => Settled::StillOpen { intent: intent.id.clone(), reason: e.to_string() },
        };
        tracing::info!(event = "intent_settled", intent = %intent.id, result = ?settled, "reconciled");
        out.push(settled);
    }
    Ok(out)
}

async fn settle<L, R>(ledger: &L, market: &R, intent: &Intent, now: DateTime<Utc>) -> Result<Settled, StoreError>
where
    L: Ledger + ?Sized,
    R: ReservationSource + ?Sized,
{
    let id = intent.id.clone();
    match intent.state {
        // Nothing was sent for it, so the offering goes back to the rule for a later run.
        IntentState::Reserved if now - intent.created_at >= RESERVED_GRACE => {
            let reason = "abandoned before PurchaseCapacityBlock was sent";
            ledger.record_given_back(intent, reason).await?;
            Ok(Settled::GivenBack { intent: id, reason: reason.into() })
        }
        IntentState::Reserved => Ok(Settled::StillOpen { intent: id, reason: "another run is buying".into() }),
        IntentState::Sent => {
            let found = market
                .reservations_tagged(&intent.offering.region, INTENT_TAG, &intent.id)
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            if let Some(r) = found.first() {
                if found.len() > 1 {
                    tracing::error!(event = "duplicate_purchase", intent = %id, count = found.len(), "more than one reservation carries this intent");
                }
                let block = record_purchase(ledger, intent, r, now).await?;
                return Ok(Settled::Adopted { intent: id, reservation_id: block.reservation_id });
            }
            let sent_at = intent.sent_at.unwrap_or(intent.created_at);
            if now - sent_at >= SENT_GRACE {
                let reason = "EC2 has no reservation tagged with this intent";
                ledger.record_rejected(intent, reason, None).await?;
                Ok(Settled::Rejected { intent: id, reason: reason.into() })
            } else {
                Ok(Settled::StillOpen { intent: id, reason: "outcome unknown; waiting for EC2 to show it".into() })
            }
        }
        _ => Ok(Settled::StillOpen { intent: id, reason: format!("state {}", intent.state.as_str()) }),
    }
}
