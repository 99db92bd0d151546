//! What may be concluded of an open purchase intent, and of a failed payment's fee, from what
//! EC2 showed: the judgements `app::reconcile` and the tracker act on, and the protocol model
//! (`verify/`) explores. Money moves only on these answers.
//!
//! The evidence rules (docs/how-it-works.md, "Buying safely"):
//! - A Reserved intent never reached EC2 (Sent is written before the one call): after
//!   `RESERVED_GRACE` its fee goes back.
//! - A Sent intent may have: only a reservation carrying its tag settles it (bought). Nothing
//!   shown is not evidence, however long it lasts: past `SENT_GRACE` a person is told, and the
//!   fee stays committed.
//! - A reservation carrying the tag that cannot be read may be the purchase: held, never
//!   released.
//! - A replay or a person's look settles nothing: money follows the clock.

use chrono::{DateTime, Utc};

use super::budget::{Intent, IntentState, RELEASE_MIN_AGE, RESERVED_GRACE, SENT_GRACE};
use super::lifecycle::{BlockState, Observed};
use super::run_time::RunTime;

/// What EC2 answered when asked for the reservations carrying an intent's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shown {
    /// At least one readable reservation carries the tag.
    Tagged,
    /// Only reservations capblock cannot read carry it.
    Unreadable,
    /// None does (yet: EC2 lists new reservations when it lists them).
    Nothing,
}

/// What to do with one open intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Judgement {
    /// A replay or a person's look: leave it for the next run on the clock.
    NotOnTheClock,
    /// Reserved and abandoned: nothing reached EC2, the fee goes back.
    GiveBack,
    /// Reserved recently: another run is buying.
    AnotherRunIsBuying,
    /// Sent: ask EC2 by tag, then judge again with its answer.
    LookUp,
    /// EC2 shows the purchase: record it as bought.
    Adopt,
    /// Something carrying the tag cannot be read: held, a person told.
    HoldUnreadable,
    /// Sent past `SENT_GRACE` with nothing shown: held, a person told; the fee stays committed.
    HoldForAPerson,
    /// Sent recently with nothing shown: wait for EC2 to list it.
    Wait,
    /// Not open (bought, rejected, dry run): nothing to settle.
    NotOpen,
}

/// The verdict on `intent` at `at`, given EC2's answer by tag (`None`: not asked yet).
pub fn judge(intent: &Intent, at: RunTime, shown: Option<Shown>) -> Judgement {
    if at.is_replay() {
        return Judgement::NotOnTheClock;
    }
    let now = at.clock();
    match intent.state {
        IntentState::Reserved if now - intent.created_at >= RESERVED_GRACE => Judgement::GiveBack,
        IntentState::Reserved => Judgement::AnotherRunIsBuying,
        IntentState::Sent => match shown {
            None => Judgement::LookUp,
            Some(Shown::Tagged) => Judgement::Adopt,
            Some(Shown::Unreadable) => Judgement::HoldUnreadable,
            Some(Shown::Nothing) if now - sent_at(intent) >= SENT_GRACE => Judgement::HoldForAPerson,
            Some(Shown::Nothing) => Judgement::Wait,
        },
        IntentState::Bought | IntentState::Rejected | IntentState::DryRun => Judgement::NotOpen,
    }
}

/// A person's release of a sent intent asked too early: EC2 may still list the purchase, so
/// its fee stays committed until `may_release_at`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "intent {intent} was sent at {} UTC, {} ago: EC2 lists a purchase late, so nothing listed yet proves \
     nothing; it may be released from {} UTC ({} after sending), if EC2 still lists nothing tagged with it",
    sent.format("%Y-%m-%d %H:%M"),
    super::duration::compact(*age),
    may_release_at.format("%Y-%m-%d %H:%M"),
    super::duration::compact(RELEASE_MIN_AGE)
)]
pub struct TooEarlyToRelease {
    pub intent: String,
    pub sent: DateTime<Utc>,
    pub age: chrono::Duration,
    pub may_release_at: DateTime<Utc>,
}

/// Whether a person may release `intent`'s fee at `now` (the clock's, never a machine's own):
/// only once it was sent at least `RELEASE_MIN_AGE` ago.
pub fn may_release(intent: &Intent, now: DateTime<Utc>) -> Result<(), TooEarlyToRelease> {
    let sent = sent_at(intent);
    let may_release_at = sent + RELEASE_MIN_AGE;
    if now >= may_release_at {
        return Ok(());
    }
    Err(TooEarlyToRelease { intent: intent.id.clone(), sent, age: now - sent, may_release_at })
}

/// The intent closed unbought (`Rejected`: a person released it, or EC2 refused it) as it is
/// recorded once EC2 holds `reservation_id` tagged with it after all (`Ledger::
/// record_held_after_close`): bought, with that reservation as its purchase. EC2 is the source
/// of truth for what it holds; the ledger follows it. A purchase of several parts (UltraServers)
/// is recorded by the first part seen; the others are told apart as duplicates, as for any
/// purchase recorded by tag.
pub fn held_after_close(intent: &Intent, reservation_id: &str) -> Intent {
    Intent {
        state: IntentState::Bought,
        reservation_id: Some(reservation_id.to_string()),
        parts: vec![reservation_id.to_string()],
        ..intent.clone()
    }
}

/// Whether a reservation EC2 lists in state `ec2_state`, tagged with an intent in state
/// `intent`, is a purchase of a closed intent that EC2 holds after all: the intent was closed
/// unbought, and EC2 shows the reservation in a held state (payment pending, scheduled,
/// active). Its fee is committed again (`held_after_close`). The model checker asks it when its
/// tracker adopts a reservation.
pub fn held_after_close_of(intent: IntentState, ec2_state: &str) -> bool {
    // The bug put back (`sabotage`): the purchase adopted without its fee, as before.
    if crate::sabotage::on(crate::sabotage::Bug::ClosedIntentHeldUncharged) {
        return false;
    }
    intent == IntentState::Rejected && BlockState::from_ec2(ec2_state).is_some_and(BlockState::is_held)
}

/// When the purchase was sent (its creation, for intents stored before `sent_at` was kept).
pub fn sent_at(intent: &Intent) -> DateTime<Utc> {
    intent.sent_at.unwrap_or(intent.created_at)
}

/// Whether another part of a failed purchase (an UltraServer of N) is known not to be held:
/// the store has it as payment-failed, or EC2 shows it payment-failed. Anything else (waiting,
/// paid, not shown, unreadable, not asked) may be held, so the purchase's one fee stays
/// committed until every part has failed.
pub fn part_failed(stored: Option<BlockState>, shown: Option<&Observed>) -> bool {
    stored == Some(BlockState::PaymentFailed)
        || matches!(shown, Some(Observed::Found { state, .. }) if BlockState::from_ec2(state) == Some(BlockState::PaymentFailed))
}

#[cfg(test)]
mod tests;
