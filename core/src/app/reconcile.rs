//! Settling purchase intents whose outcome is not known: a run that died after reserving, or
//! after sending PurchaseCapacityBlock. EC2 is asked by tag; a purchase is never re-sent.
//!
//! What counts as evidence. A Reserved intent certainly never reached EC2 (Sent is written
//! before the one call), so after `RESERVED_GRACE` its fee goes back. A Sent one may have: EC2
//! completes a purchase it received whatever became of the answer, and lists a new reservation
//! when it lists it (the EC2 API is eventually consistent). Its settlement is a reservation
//! carrying its tag, which records it as bought. Nothing seen by tag is not evidence that EC2
//! holds nothing, however long it lasts: past `SENT_GRACE` the fee stays committed, the rule
//! stays blocked (its guard holds the intent), a person is told once and the alarm stays on
//! until EC2 shows the reservation or the person, having looked in EC2, releases the intent
//! (`capblock intents release`).

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::time::Instant;

use super::handoff::event_notice;
use super::outbox::alert_notice;
use crate::domain::announce;
use crate::domain::block::{Block, Reservation, split_by_tag};
use crate::domain::budget::Intent;
use crate::domain::bus_event::{BusStep, Subject, event_tags};
use crate::domain::decision::Priced;
use crate::domain::message_kind::MessageKind;
use crate::domain::run_time::RunTime;
use crate::domain::settlement::{Judgement, Shown, judge, sent_at};
use crate::domain::tags::INTENT_TAG;
use crate::ports::{Ledger, Outbox, ReservationSource, StoreError, Tagged, Unreadable};
use crate::sabotage::{self, Bug};

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
/// transaction: a purchase on the books is always announced, once. `more`: the purchase's
/// other reservations (one per UltraServer past the first), stored on the intent with `r` as
/// its parts: the tracker adopts only those as parts of it.
pub async fn record_purchase<L: Ledger + ?Sized>(
    ledger: &L,
    intent: &Intent,
    r: &Reservation,
    more: &[String],
    now: DateTime<Utc>,
) -> Result<Block, StoreError> {
    let mut parts = vec![r.id.clone()];
    parts.extend(more.iter().filter(|id| **id != r.id).cloned());
    let intent = &Intent { parts, ..intent.clone() };
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
    let notice = alert_notice(&r.id, &MessageKind::Purchased.outbox_key(None)?, &msg, now);
    let subject = Subject::of(&block, event_tags(&r.tags));
    let event = event_notice(&subject, &BusStep::Purchased, "purchased", r.arn.as_deref(), now)?;
    ledger.record_bought(intent, &block, &[notice, event]).await?;
    Ok(block)
}

/// Settles every open intent it can, on the clock's time (never a replayed one: a replay looks
/// at another moment and settles nothing; each open intent is reported still open). EC2's
/// answers are waited for until `until` at most (the run must keep time for the rest of its
/// work): an intent not looked at in time stays open for the next run. Errors on one intent are
/// reported and do not stop others.
pub async fn settle_open_intents<L, R>(
    ledger: &L,
    market: &R,
    at: RunTime,
    until: Option<Instant>,
) -> Result<Vec<Settled>, StoreError>
where
    L: Ledger + Outbox + ?Sized,
    R: ReservationSource + ?Sized,
{
    let mut out = Vec::new();
    for intent in ledger.open_intents().await? {
        let settled = match settle(ledger, market, &intent, at, until).await {
            Ok(s) => s,
            Err(e) => Settled::StillOpen { intent: intent.id.clone(), reason: e.to_string() },
        };
        tracing::info!(event = "intent_settled", intent = %intent.id, result = ?settled, "reconciled");
        out.push(settled);
    }
    Ok(out)
}

/// When settlement stops waiting for EC2 in a run that must be done by `run_until`: half of the
/// time left, so the rest of the run (what it observes, decides and announces) keeps the other
/// half. `None`: no bound (a person's command waits for its answers).
pub fn settling_until(run_until: Option<Instant>) -> Option<Instant> {
    let now = Instant::now();
    run_until.map(|until| now + until.saturating_duration_since(now) / 2)
}

/// Why a Sent intent with nothing tagged is kept open past the grace.
pub const UNKNOWN_HELD: &str = "EC2 shows no reservation tagged with this intent yet; the fee stays committed and the rule \
     buys nothing more until EC2 shows it or a person releases the intent (capblock intents release)";

/// Why an intent was left open when the run's time for settling ran out.
pub const OUT_OF_TIME: &str = "not settled within the run's time; looked at again next run";

/// What the settlement does with an open intent, judged (`settlement::judge`) at `at` on what
/// EC2 showed by its tag (`shown`; None: not asked yet). The async `settle` only carries it
/// out, so the model checker, which asks the same function at its tracker's steps, checks the
/// writes production makes, not a copy of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettleStep {
    /// Ask EC2 by tag, then decide again on what it shows.
    LookUp,
    /// Nothing reached EC2: the fee goes back and the intent is deleted (`record_given_back`).
    GiveBack(String),
    /// EC2 shows the purchase: recorded as bought from the tagged reservations.
    Adopt,
    /// Only reservations capblock cannot read carry the tag: held, a person told once.
    HoldUnreadable,
    /// Nothing tagged past `SENT_GRACE`: held, a person told once (never given back on a timer).
    HoldForAPerson,
    /// Nothing to write now.
    StillOpen(String),
}

/// The settlement's step for `intent` at `at` (see `SettleStep`).
pub fn settle_step(intent: &Intent, at: RunTime, shown: Option<Shown>) -> SettleStep {
    let Some(shown) = shown else {
        return match judge(intent, at, None) {
            Judgement::NotOnTheClock => SettleStep::StillOpen(format!(
                "a replay of {} settles nothing; the next run on the clock does",
                at.view()
            )),
            // Nothing was sent for it, so the offering goes back to the rule for a later run.
            Judgement::GiveBack => SettleStep::GiveBack("abandoned before PurchaseCapacityBlock was sent".into()),
            Judgement::AnotherRunIsBuying => SettleStep::StillOpen("another run is buying".into()),
            Judgement::LookUp => SettleStep::LookUp,
            Judgement::Adopt
            | Judgement::HoldUnreadable
            | Judgement::HoldForAPerson
            | Judgement::Wait
            | Judgement::NotOpen => SettleStep::StillOpen(format!("state {}", intent.state.as_str())),
        };
    };
    match judge(intent, at, Some(shown)) {
        Judgement::Adopt => SettleStep::Adopt,
        // EC2 holds something with this intent's tag that capblock cannot read: it may be the
        // purchase, so the fee stays committed until a person looks.
        Judgement::HoldUnreadable => SettleStep::HoldUnreadable,
        // The bug put back (`sabotage`): the old 15-minute rule.
        Judgement::HoldForAPerson if sabotage::on(Bug::ReleaseSentOnTimer) => {
            SettleStep::GiveBack("nothing tagged past the grace".into())
        }
        // Absence on a timer is not evidence: a reservation EC2 lists late would be bought a
        // second time. Held for a person, who looks in EC2.
        Judgement::HoldForAPerson => SettleStep::HoldForAPerson,
        _ => SettleStep::StillOpen("outcome unknown; waiting for EC2 to show it".into()),
    }
}

async fn settle<L, R>(
    ledger: &L,
    market: &R,
    intent: &Intent,
    at: RunTime,
    until: Option<Instant>,
) -> Result<Settled, StoreError>
where
    L: Ledger + Outbox + ?Sized,
    R: ReservationSource + ?Sized,
{
    let step = settle_step(intent, at, None);
    if step != SettleStep::LookUp {
        return carry_out(ledger, intent, step, Default::default(), at.clock()).await;
    }
    // Only the lookup is bounded: a store write, once started, runs to its end.
    let lookup = market.reservations_tagged(&intent.offering.region, INTENT_TAG, &intent.id);
    let answer = match until {
        Some(until) => tokio::time::timeout_at(until, lookup).await,
        None => Ok(lookup.await),
    };
    let Ok(answer) = answer else {
        return Ok(Settled::StillOpen { intent: intent.id.clone(), reason: OUT_OF_TIME.into() });
    };
    let found = answer.map_err(|e| StoreError::Unavailable(e.to_string()))?;
    let shown = if !found.reservations.is_empty() {
        Shown::Tagged
    } else if !found.unreadable.is_empty() {
        Shown::Unreadable
    } else {
        Shown::Nothing
    };
    carry_out(ledger, intent, settle_step(intent, at, Some(shown)), found, at.clock()).await
}

/// Writes what `step` says, with what EC2 showed by the intent's tag (`found`).
async fn carry_out<L: Ledger + Outbox + ?Sized>(
    ledger: &L,
    intent: &Intent,
    step: SettleStep,
    found: Tagged,
    now: DateTime<Utc>,
) -> Result<Settled, StoreError> {
    let id = intent.id.clone();
    match step {
        SettleStep::GiveBack(reason) => {
            ledger.record_given_back(intent, &reason).await?;
            Ok(Settled::GivenBack { intent: id, reason })
        }
        SettleStep::Adopt => adopt(ledger, intent, found.reservations, now).await,
        SettleStep::HoldUnreadable => hold_unreadable(ledger, intent, &found.unreadable, now).await,
        SettleStep::HoldForAPerson => hold_for_a_person(ledger, intent, now).await,
        SettleStep::StillOpen(reason) => Ok(Settled::StillOpen { intent: id, reason }),
        SettleStep::LookUp => Ok(Settled::StillOpen { intent: id, reason: "not looked up".into() }),
    }
}

/// Records the purchase of a Sent intent whose answer was lost, from the reservations EC2 lists
/// with its tag: which are its parts is decided by what an offering's purchase makes
/// (`split_by_tag`); any more are logged, for the tracker to record uncharged.
async fn adopt<L: Ledger + ?Sized>(
    ledger: &L,
    intent: &Intent,
    tagged: Vec<Reservation>,
    now: DateTime<Utc>,
) -> Result<Settled, StoreError> {
    let split = split_by_tag(&intent.offering, tagged);
    if !split.duplicates.is_empty() {
        let extra: Vec<&str> = split.duplicates.iter().map(|r| r.id.as_str()).collect();
        tracing::error!(event = "duplicate_purchase", intent = %intent.id, reservations = ?extra,
            "more reservations carry this intent than its purchase makes; the tracker records them uncharged");
    }
    let more: Vec<String> = split.parts.iter().skip(1).map(|r| r.id.clone()).collect();
    let block = record_purchase(ledger, intent, &split.parts[0], &more, now).await?;
    Ok(Settled::Adopted { intent: intent.id.clone(), reservation_id: block.reservation_id })
}

/// Keeps a Sent intent open, EC2 showing nothing with its tag past the grace: the fee stays
/// committed and the rule blocked, the alarm every run, one alert for a person to look in EC2.
async fn hold_for_a_person<L: Outbox + ?Sized>(
    ledger: &L,
    intent: &Intent,
    now: DateTime<Utc>,
) -> Result<Settled, StoreError> {
    let sent_at = sent_at(intent);
    tracing::error!(event = "purchase_outcome_unknown", intent = %intent.id, sent_at = %sent_at,
        "no reservation carries this intent's tag yet; the fee stays committed and the rule blocked until EC2 shows it or a person releases it");
    let msg = announce::outcome_unknown(intent, sent_at);
    ledger.enqueue(&alert_notice(&intent.id, &MessageKind::OutcomeUnknown.outbox_key(None)?, &msg, now)).await?;
    Ok(Settled::StillOpen { intent: intent.id.clone(), reason: UNKNOWN_HELD.into() })
}

/// Keeps a Sent intent open while the only reservations carrying its tag cannot be read: the
/// alarm every run, one alert (per intent) for a person to look in EC2.
async fn hold_unreadable<L: Outbox + ?Sized>(
    ledger: &L,
    intent: &Intent,
    unreadable: &[Unreadable],
    now: DateTime<Utc>,
) -> Result<Settled, StoreError> {
    let ids: Vec<&str> = unreadable.iter().map(|u| u.id.as_deref().unwrap_or("(no id)")).collect();
    let reasons: Vec<&str> = unreadable.iter().map(|u| u.reason.as_str()).collect();
    tracing::error!(event = "reservation_unreadable", intent = %intent.id, reservations = ?ids, reasons = ?reasons,
        "a reservation carries this intent's tag but cannot be read; the intent stays open, its fee committed");
    let msg = announce::unreadable_reservation(intent, &ids, &reasons);
    ledger.enqueue(&alert_notice(&intent.id, &MessageKind::UnreadableReservation.outbox_key(None)?, &msg, now)).await?;
    Ok(Settled::StillOpen {
        intent: intent.id.clone(),
        reason: format!("reservations {} carry this intent but cannot be read", ids.join(", ")),
    })
}

#[cfg(test)]
mod tests;
