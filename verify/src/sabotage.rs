//! Protocol bugs put back on purpose; each has a test (tests/bounded.rs) that the checker finds
//! it, so a property that could never fail would show there. Their counterexamples are in
//! docs/how-it-works.md ("Buying safely").
//!
//! A bug of the code the model runs (`bug`: the buyer's refusal, a purchase error's meaning,
//! the settlement's write, the fee release's count of parts, a block's lifecycle) is put back in
//! the core's own production line, behind `capblock_core::sabotage`'s switch: the checker finds
//! it in the code that moves money, not in a copy. The others are changes at one step of the
//! model, where the model writes the table itself (the reservation transaction and the
//! once-per-purchase mark) or runs the replay itself.

use capblock_core::sabotage::Bug;

/// One bug, as the code would have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sabotage {
    /// A Sent intent with nothing tagged is given back once `SENT_GRACE` has passed (the old
    /// 15-minute rule): a reservation EC2 lists late is bought again.
    ReleaseSentOnTimer,
    /// The budgets are charged when the answer is written, not reserved before the call.
    ChargeAfterPurchase,
    /// A replay settles on the moment it looks at, not on the clock.
    SettleOnReplayedClock,
    /// A failed payment gives the fee back per part, and whatever the other parts.
    ReleasePerPart,
    /// A pending block EC2 does not list past its payment deadline is booked payment-failed
    /// (the old vanished-payment rule): a paid block listed late is freed and bought again.
    GoneAsFailed,
    /// A lost answer is taken as "nothing bought" and its fee given back.
    GiveBackUnknownAnswers,
    /// The scan does not count the rule's held blocks.
    IgnoreHeldBlocks,
    /// A failed payment's fee goes back while another part of the purchase, which EC2 does not
    /// list yet, may be held: the unlisted part counted as failed.
    UnlistedPartFailed,
    /// A failed payment's fee kept for a part that may be held leaves no hold on the rule's
    /// guard: the purchase counts as nothing held and a second scan buys beside it.
    KeptFeeNotHeld,
    /// A purchase a person released, which EC2 lists after all, is adopted without its fee.
    ClosedIntentHeldUncharged,
    /// A person's release leaves no hold on the rule's guard (the model's ledger write).
    ReleaseWithoutHold,
    /// The scan asks a request whatever its state, so long as it was approved once: cancelled,
    /// or its approval consumed.
    RequestStateUnchecked,
    /// A request's purchase is reserved without consuming its approval (the model's ledger
    /// write).
    ApprovalNotConsumed,
    /// A request's reservation does not check the request item: a cancel that lands after the
    /// scan read the request approved is bought anyway (the model's ledger condition).
    CancelUncheckedAtReserve,
    /// A segment's failed payment gives the purchase's fee back whatever its other segments (each
    /// segment taken for a purchase of its own).
    SegmentPaidAlone,
}

impl Sabotage {
    pub const ALL: [Sabotage; 15] = [
        Sabotage::ReleaseSentOnTimer,
        Sabotage::ChargeAfterPurchase,
        Sabotage::SettleOnReplayedClock,
        Sabotage::ReleasePerPart,
        Sabotage::GoneAsFailed,
        Sabotage::GiveBackUnknownAnswers,
        Sabotage::IgnoreHeldBlocks,
        Sabotage::UnlistedPartFailed,
        Sabotage::KeptFeeNotHeld,
        Sabotage::ClosedIntentHeldUncharged,
        Sabotage::ReleaseWithoutHold,
        Sabotage::RequestStateUnchecked,
        Sabotage::ApprovalNotConsumed,
        Sabotage::CancelUncheckedAtReserve,
        Sabotage::SegmentPaidAlone,
    ];

    /// The core's bug switch it is, when the bug is in the core's code the model runs.
    pub fn bug(self) -> Option<Bug> {
        match self {
            Sabotage::ReleaseSentOnTimer => Some(Bug::ReleaseSentOnTimer),
            Sabotage::IgnoreHeldBlocks => Some(Bug::IgnoreHeldBlocks),
            Sabotage::GiveBackUnknownAnswers => Some(Bug::GiveBackUnknownAnswers),
            Sabotage::UnlistedPartFailed => Some(Bug::UnlistedPartFailed),
            Sabotage::GoneAsFailed => Some(Bug::GoneAsFailed),
            Sabotage::KeptFeeNotHeld => Some(Bug::KeptFeeNotHeld),
            Sabotage::ClosedIntentHeldUncharged => Some(Bug::ClosedIntentHeldUncharged),
            Sabotage::RequestStateUnchecked => Some(Bug::RequestStateUnchecked),
            Sabotage::SegmentPaidAlone => Some(Bug::SegmentPaidAlone),
            Sabotage::ChargeAfterPurchase
            | Sabotage::SettleOnReplayedClock
            | Sabotage::ReleasePerPart
            | Sabotage::ReleaseWithoutHold
            | Sabotage::ApprovalNotConsumed
            | Sabotage::CancelUncheckedAtReserve => None,
        }
    }

    /// Its name on the command line (`capblock-verify --sabotage NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Sabotage::ReleaseSentOnTimer => "release-sent-on-timer",
            Sabotage::ChargeAfterPurchase => "charge-after-purchase",
            Sabotage::SettleOnReplayedClock => "settle-on-replayed-clock",
            Sabotage::ReleasePerPart => "release-per-part",
            Sabotage::GoneAsFailed => "gone-as-failed",
            Sabotage::GiveBackUnknownAnswers => "give-back-unknown-answers",
            Sabotage::IgnoreHeldBlocks => "ignore-held-blocks",
            Sabotage::UnlistedPartFailed => "unlisted-part-failed",
            Sabotage::KeptFeeNotHeld => "kept-fee-not-held",
            Sabotage::ClosedIntentHeldUncharged => "closed-intent-held-uncharged",
            Sabotage::ReleaseWithoutHold => "release-without-hold",
            Sabotage::RequestStateUnchecked => "request-state-unchecked",
            Sabotage::ApprovalNotConsumed => "approval-not-consumed",
            Sabotage::CancelUncheckedAtReserve => "cancel-unchecked-at-reserve",
            Sabotage::SegmentPaidAlone => "segment-paid-alone",
        }
    }

    pub fn parse(name: &str) -> Option<Sabotage> {
        Sabotage::ALL.into_iter().find(|s| s.name() == name)
    }
}
