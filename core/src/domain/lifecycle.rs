//! The life of a Capacity Block after purchase:
//! payment-pending -> scheduled -> active -> expired, or payment-pending -> payment-failed.
//!
//! EC2 is the source of truth for the state; this module says what an observation of EC2
//! means for a block we hold, and computes the deadlines that EC2 does not publish.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// Billing may take up to 12 hours after purchase...
pub const PAYMENT_WINDOW: Duration = Duration::hours(12);
/// ...but must be through 5 minutes before the block starts.
pub const PAYMENT_CUTOFF_BEFORE_START: Duration = Duration::minutes(5);
/// EC2 starts terminating instances this long before the end of a block...
pub const TERMINATION_LEAD: Duration = Duration::minutes(30);
/// ...and this long for UltraServer blocks.
pub const ULTRASERVER_TERMINATION_LEAD: Duration = Duration::minutes(60);

/// How long a reservation just bought may be missing from EC2's answers before capblock says
/// so. The EC2 API is eventually consistent and publishes no bound on how late a new
/// reservation is listed (the simulator plays lags as settings: its README, "A new reservation
/// listed late"). Past it a missing block is a disagreement between the ledger and EC2 that a
/// person looks at: never evidence that EC2 does not hold it, so its fee stays committed.
pub const LISTING_GRACE: Duration = Duration::minutes(60);

/// The states capblock tracks a block through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockState {
    PaymentPending,
    Scheduled,
    Active,
    Expired,
    PaymentFailed,
    /// Cancelled, failed or otherwise gone: EC2 will not deliver this block.
    Released,
}

impl BlockState {
    pub fn is_final(self) -> bool {
        matches!(self, BlockState::Expired | BlockState::PaymentFailed | BlockState::Released)
    }

    /// Whether a rule's "blocks held at once" limit counts this block.
    pub fn is_held(self) -> bool {
        matches!(self, BlockState::PaymentPending | BlockState::Scheduled | BlockState::Active)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BlockState::PaymentPending => "payment-pending",
            BlockState::Scheduled => "scheduled",
            BlockState::Active => "active",
            BlockState::Expired => "expired",
            BlockState::PaymentFailed => "payment-failed",
            BlockState::Released => "released",
        }
    }

    /// Maps EC2's CapacityReservationState onto the block states. States EC2 uses for other
    /// kinds of reservation, or for transient work (`assessing`, `delayed`), are `None`:
    /// nothing to move yet.
    pub fn from_ec2(state: &str) -> Option<BlockState> {
        match state {
            "payment-pending" => Some(BlockState::PaymentPending),
            "scheduled" => Some(BlockState::Scheduled),
            "active" => Some(BlockState::Active),
            "expired" => Some(BlockState::Expired),
            "payment-failed" => Some(BlockState::PaymentFailed),
            "cancelled" | "failed" | "unsupported" => Some(BlockState::Released),
            _ => None,
        }
    }

    fn rank(self) -> u8 {
        match self {
            BlockState::PaymentPending => 0,
            BlockState::Scheduled => 1,
            BlockState::Active => 2,
            BlockState::Expired | BlockState::PaymentFailed | BlockState::Released => 3,
        }
    }
}

impl std::fmt::Display for BlockState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The moment a pending payment turns into `payment-failed`:
/// min(purchase + 12 h, start - 5 min).
pub fn payment_deadline(purchased_at: DateTime<Utc>, start: DateTime<Utc>) -> DateTime<Utc> {
    (purchased_at + PAYMENT_WINDOW).min(start - PAYMENT_CUTOFF_BEFORE_START)
}

/// An extension is released unless paid within 12 hours of its purchase or by 35 minutes
/// before the block's scheduled end (its end before the extension), whichever comes first
/// (capacity-blocks.md, "Extensions"): min(sent + 12 h, end - 35 min).
pub const EXTENSION_CUTOFF_BEFORE_END: Duration = Duration::minutes(35);

pub fn extension_payment_deadline(sent_at: DateTime<Utc>, block_end: DateTime<Utc>) -> DateTime<Utc> {
    (sent_at + PAYMENT_WINDOW).min(block_end - EXTENSION_CUTOFF_BEFORE_END)
}

/// When EC2 begins terminating the block's instances: when unsaved work is lost.
pub fn termination_time(end: DateTime<Utc>, ultraserver: bool) -> DateTime<Utc> {
    end - termination_lead(ultraserver)
}

/// How long before a block's end EC2 terminates its instances.
pub fn termination_lead(ultraserver: bool) -> Duration {
    if ultraserver { ULTRASERVER_TERMINATION_LEAD } else { TERMINATION_LEAD }
}

/// What DescribeCapacityReservations said about one reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    Found {
        state: String,
        end: DateTime<Utc>,
        /// Its CapacityBlockId, for blocks stored before capblock kept it.
        capacity_block_id: Option<String>,
        /// Its instances as EC2 shows them (before the start, from the requested-quantity tag;
        /// 0 when EC2 shows none): a block's count is raised to it, never lowered.
        instance_count: u32,
        /// AvailableInstanceCount: instances that could still be launched (None: EC2 left it
        /// out). Of an active block, the paid instances nothing runs on (`domain::usage`).
        available: Option<u32>,
    },
    /// `InvalidCapacityReservationId.NotFound`.
    NotFound,
    /// EC2 answered with the reservation, but capblock cannot read it (every member is
    /// optional in the API): nothing is known, so nothing moves, neither the block nor money.
    Unreadable(String),
}

/// What the tracker should do with a block after an observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Nothing changed.
    Stay,
    /// Move to a new state (and, for extensions, a new end).
    Move { to: BlockState, end: DateTime<Utc> },
    /// EC2 says something we cannot place (e.g. "not found" before the end): keep the block,
    /// report it, look again next run.
    Anomaly(String),
    /// EC2 reports a state that is not on a block's path (unavailable, cancelling, delayed,
    /// assessing, or one capblock does not know): the block stays as it is, and a person is
    /// told, so a block is never left silently.
    Check { ec2_state: String },
}

/// Decides what an observation means for a block in `current` state ending at `end`.
/// States only move forward; a final state never changes.
pub fn step(current: BlockState, end: DateTime<Utc>, observed: &Observed, now: DateTime<Utc>) -> Transition {
    if current.is_final() {
        return Transition::Stay;
    }
    match observed {
        // Expired reservations drop out of DescribeCapacityReservations after ~60 days.
        Observed::NotFound if now >= end => Transition::Move { to: BlockState::Expired, end },
        Observed::NotFound => Transition::Anomaly(format!(
            "EC2 does not list the reservation, yet it ends only at {end}. Its fee stays committed and capblock \
             keeps tracking it: a reservation missing from EC2's answers is not evidence that EC2 does not hold it"
        )),
        // Whatever the time: an answer capblock cannot read says nothing of the block.
        Observed::Unreadable(why) => {
            Transition::Anomaly(format!("EC2 describes the reservation in a way capblock cannot read ({why})"))
        }
        Observed::Found { state, end: new_end, .. } => match BlockState::from_ec2(state) {
            None => Transition::Check { ec2_state: state.clone() },
            Some(to) if to == current && *new_end == end => Transition::Stay,
            Some(to) if to == current => Transition::Move { to, end: *new_end },
            Some(to) if to.rank() > current.rank() || to.is_final() => Transition::Move { to, end: *new_end },
            Some(to) => Transition::Anomaly(format!("EC2 reports {to} for a block capblock saw {current}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
    }

    #[test]
    fn extension_deadline_is_twelve_hours_or_35_minutes_before_the_end() {
        // Bought 2 days ahead of the end: 12 h after the purchase.
        assert_eq!(extension_payment_deadline(t(1, 9, 0), t(3, 11, 30)), t(1, 21, 0));
        // Bought 3 h before the end: 35 minutes before it (not 5, as for a block's start).
        assert_eq!(extension_payment_deadline(t(3, 8, 30), t(3, 11, 30)), t(3, 10, 55));
    }

    #[test]
    fn payment_deadline_is_twelve_hours_when_the_start_is_far() {
        assert_eq!(payment_deadline(t(1, 9, 0), t(3, 11, 30)), t(1, 21, 0));
    }

    #[test]
    fn payment_deadline_is_start_minus_five_minutes_when_the_start_is_near() {
        // Bought two hours before the start.
        assert_eq!(payment_deadline(t(3, 9, 30), t(3, 11, 30)), t(3, 11, 25));
        // The boundary: both rules give the same instant.
        assert_eq!(payment_deadline(t(2, 23, 25), t(3, 11, 30)), t(3, 11, 25));
    }

    #[test]
    fn termination_leads() {
        assert_eq!(termination_time(t(10, 11, 30), false), t(10, 11, 0));
        assert_eq!(termination_time(t(10, 11, 30), true), t(10, 10, 30));
    }

    fn found(state: &str, end: DateTime<Utc>) -> Observed {
        Observed::Found { state: state.into(), end, capacity_block_id: None, instance_count: 2, available: None }
    }

    #[test]
    fn states_off_the_path_are_checked_never_ignored() {
        let end = t(5, 11, 30);
        for s in ["unavailable", "cancelling", "delayed", "assessing", "pending", "some-future-state"] {
            assert_eq!(
                step(BlockState::Active, end, &found(s, end), t(4, 0, 0)),
                Transition::Check { ec2_state: s.into() },
                "{s}"
            );
        }
        // A block capblock holds as final stays final.
        assert_eq!(step(BlockState::Expired, end, &found("unavailable", end), t(6, 0, 0)), Transition::Stay);
    }

    #[test]
    fn forward_transitions() {
        let end = t(10, 11, 30);
        let now = t(2, 0, 0);
        use BlockState::*;
        assert_eq!(step(PaymentPending, end, &found("payment-pending", end), now), Transition::Stay);
        assert_eq!(step(PaymentPending, end, &found("scheduled", end), now), Transition::Move { to: Scheduled, end });
        assert_eq!(step(PaymentPending, end, &found("active", end), now), Transition::Move { to: Active, end });
        assert_eq!(
            step(PaymentPending, end, &found("payment-failed", end), now),
            Transition::Move { to: PaymentFailed, end }
        );
        assert_eq!(step(Scheduled, end, &found("active", end), now), Transition::Move { to: Active, end });
        assert_eq!(step(Active, end, &found("expired", end), now), Transition::Move { to: Expired, end });
        assert_eq!(step(Active, end, &found("cancelled", end), now), Transition::Move { to: Released, end });
        assert_eq!(
            step(Active, end, &found("assessing", end), now),
            Transition::Check { ec2_state: "assessing".into() }
        );
    }

    #[test]
    fn an_extension_moves_the_end_without_a_state_change() {
        let end = t(10, 11, 30);
        let later = t(17, 11, 30);
        assert_eq!(
            step(BlockState::Active, end, &found("active", later), t(9, 0, 0)),
            Transition::Move { to: BlockState::Active, end: later }
        );
    }

    #[test]
    fn not_found_after_the_end_is_expired_and_before_is_an_anomaly() {
        let end = t(10, 11, 30);
        assert_eq!(
            step(BlockState::Active, end, &Observed::NotFound, t(10, 11, 30)),
            Transition::Move { to: BlockState::Expired, end }
        );
        assert!(matches!(step(BlockState::Active, end, &Observed::NotFound, t(9, 0, 0)), Transition::Anomaly(_)));
    }

    #[test]
    fn states_never_move_backwards_and_final_states_stay() {
        let end = t(10, 11, 30);
        assert!(matches!(step(BlockState::Active, end, &found("scheduled", end), t(5, 0, 0)), Transition::Anomaly(_)));
        assert_eq!(step(BlockState::Expired, end, &found("active", end), t(5, 0, 0)), Transition::Stay);
        assert_eq!(step(BlockState::PaymentFailed, end, &Observed::NotFound, t(5, 0, 0)), Transition::Stay);
        // An unreadable answer moves nothing, before the end or after it.
        let unreadable = Observed::Unreadable("no State".into());
        for now in [t(5, 0, 0), t(10, 11, 30), t(20, 0, 0)] {
            assert!(matches!(step(BlockState::Active, end, &unreadable, now), Transition::Anomaly(_)), "{now}");
        }
    }

    #[test]
    fn final_and_held() {
        assert!(BlockState::PaymentPending.is_held() && !BlockState::PaymentPending.is_final());
        assert!(BlockState::Expired.is_final() && !BlockState::Expired.is_held());
        assert_eq!(BlockState::from_ec2("pending"), None);
        assert_eq!(serde_json::to_string(&BlockState::PaymentFailed).unwrap(), "\"payment-failed\"");
    }

    /// A state is shown and stored under one name, EC2's where EC2 has the state.
    #[test]
    fn a_block_state_reads_as_it_is_stored_and_as_ec2_writes_it() {
        use BlockState::*;
        for s in [PaymentPending, Scheduled, Active, Expired, PaymentFailed, Released] {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.as_str()));
            assert_eq!(s.to_string(), s.as_str());
            if s != Released {
                assert_eq!(BlockState::from_ec2(s.as_str()), Some(s));
            }
        }
    }
}
