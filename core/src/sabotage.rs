//! Bugs that once were (or could be) in the code that moves money, put back on purpose behind a
//! switch, so the model checker (`capblock-verify`) shows that it finds each one in the
//! production code itself, not in a copy of it.
//!
//! Every switch is read at the one production line the bug changes and is off unless a checker
//! turns it on. Turning one on needs the cargo feature `sabotage`, which only `capblock-verify`
//! enables: the Lambda packages (`make package`: `cargo lambda build --release --package` for
//! each function) are built without it, where `on` is the constant `false` and the compiler
//! drops the bug's branch. A build of the whole workspace (which unifies features) compiles
//! the switches in, off: nothing but a checker turns one on.

/// One bug, at the production line it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// `app::reconcile`: a Sent intent with nothing tagged is given back once `SENT_GRACE` has
    /// passed (the old 15-minute rule), instead of held for a person.
    ReleaseSentOnTimer,
    /// `app::purchase`: the rule's held blocks are not counted before buying.
    IgnoreHeldBlocks,
    /// `app::track`: an UltraServer part EC2 does not list is counted as failed when a failed
    /// payment's fee is released.
    UnlistedPartFailed,
    /// `app::purchase`: an answer lost after PurchaseCapacityBlock was sent is taken as "nothing
    /// bought" and its fee given back.
    GiveBackUnknownAnswers,
    /// `domain::block`: a pending block EC2 does not list past its payment deadline is booked
    /// payment-failed (the old vanished-payment rule), freeing the fee of a block listed late.
    GoneAsFailed,
    /// `app::track`: a failed payment's fee kept for a part that may be held leaves no hold on
    /// the rule's guard, so `max_blocks_held` counts the purchase as nothing held.
    KeptFeeNotHeld,
    /// `domain::settlement`: a reservation EC2 holds for an intent closed unbought (a person
    /// released it) is not taken for its purchase: adopted without its fee.
    ClosedIntentHeldUncharged,
    /// `app::requests`: a request's own state is not checked before the scan asks it: any
    /// approval is asked, the request cancelled, bought or expired since.
    RequestStateUnchecked,
    /// `app::track`: a segment's failed payment is judged alone, as if each segment were a
    /// purchase of its own: the fee goes back while another segment may be held.
    SegmentPaidAlone,
}

#[cfg(feature = "sabotage")]
mod switch {
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::Bug;

    /// The bug on (its index + 1), 0 for none. One process-wide switch: the checker's threads
    /// all run the code it is put back in.
    static ON: AtomicU8 = AtomicU8::new(0);

    const ALL: [Bug; 9] = [
        Bug::ReleaseSentOnTimer,
        Bug::IgnoreHeldBlocks,
        Bug::UnlistedPartFailed,
        Bug::GiveBackUnknownAnswers,
        Bug::GoneAsFailed,
        Bug::KeptFeeNotHeld,
        Bug::ClosedIntentHeldUncharged,
        Bug::RequestStateUnchecked,
        Bug::SegmentPaidAlone,
    ];

    fn code(bug: Option<Bug>) -> u8 {
        bug.and_then(|b| ALL.iter().position(|x| *x == b)).map_or(0, |i| i as u8 + 1)
    }

    /// Puts `bug` back in the whole process (None: the code as it is).
    pub fn put_back(bug: Option<Bug>) {
        ON.store(code(bug), Ordering::SeqCst);
    }

    pub fn on(bug: Bug) -> bool {
        ON.load(Ordering::Relaxed) == code(Some(bug))
    }
}

#[cfg(feature = "sabotage")]
pub use switch::{on, put_back};

/// Whether `bug` is put back: never, in a build without the `sabotage` feature.
#[cfg(not(feature = "sabotage"))]
#[inline(always)]
pub const fn on(_bug: Bug) -> bool {
    false
}
