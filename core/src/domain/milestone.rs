//! Which announcements a block's life calls for: the pure part of the tracker. A milestone's
//! name is its identity in the outbox (thread = reservation id), so each is announced once.

use chrono::{DateTime, Duration, Utc};

use super::lifecycle::BlockState;
use super::message_kind::MessageKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Milestone {
    PaymentSucceeded,
    /// `n` hours (a configured point) or less before the payment deadline.
    PaymentWarning(u32),
    PaymentFailed,
    /// Scheduled without passing through payment-pending in capblock's eyes.
    Scheduled,
    Active,
    Expired,
    /// Cancelled or failed by EC2.
    Released,
    /// The end moved (an extension was paid) to this instant.
    Extended(DateTime<Utc>),
    /// EC2 moved the end back to this instant: not an extension, and not to be announced as one.
    EndMovedBack(DateTime<Utc>),
}

impl Milestone {
    /// The outbox key: the kind's, with the detail that makes each instance its own.
    pub fn name(&self) -> String {
        let end = |e: &DateTime<Utc>| e.format("%Y%m%dT%H%M").to_string();
        match self {
            Milestone::PaymentSucceeded => MessageKind::PaymentSucceeded.key_with(None),
            Milestone::PaymentWarning(h) => MessageKind::PaymentWarning.key_with(Some(&format!("{h}h"))),
            Milestone::PaymentFailed => MessageKind::PaymentFailed.key_with(None),
            Milestone::Scheduled => MessageKind::Scheduled.key_with(None),
            // The same outbox key as on-capacity-event's "block delivered" announcement: whichever
            // of the event and the tracker sees the block active first announces it, once.
            Milestone::Active => MessageKind::Delivered.key_with(None),
            Milestone::Expired => MessageKind::Expired.key_with(None),
            Milestone::Released => MessageKind::Released.key_with(None),
            // Keyed by the new end so a second extension is announced too.
            Milestone::Extended(e) => MessageKind::Extended.key_with(Some(&end(e))),
            Milestone::EndMovedBack(e) => MessageKind::EndMovedBack.key_with(Some(&end(e))),
        }
    }
}

/// The milestones of one observed move from `from` to `to`, the end moving from `old_end` to
/// `new_end`. A move that skips states (the tracker did not run in between) announces every
/// state reached that matters to people: a block found active right after payment still gets
/// its payment message.
pub fn milestones(from: BlockState, to: BlockState, old_end: DateTime<Utc>, new_end: DateTime<Utc>) -> Vec<Milestone> {
    use BlockState::*;
    let mut out = Vec::new();
    let paid_now = from == PaymentPending && matches!(to, Scheduled | Active | Expired);
    if paid_now {
        out.push(Milestone::PaymentSucceeded);
    }
    match to {
        Scheduled if from != PaymentPending && from != Scheduled => out.push(Milestone::Scheduled),
        Active if from != Active => out.push(Milestone::Active),
        Expired => out.push(Milestone::Expired),
        PaymentFailed => out.push(Milestone::PaymentFailed),
        Released => out.push(Milestone::Released),
        _ => {}
    }
    if matches!(to, Scheduled | Active) {
        if new_end > old_end {
            out.push(Milestone::Extended(new_end));
        } else if new_end < old_end {
            out.push(Milestone::EndMovedBack(new_end));
        }
    }
    out
}

/// The payment warning due at `now`, if any: the most urgent configured point (hours before
/// the deadline) already reached. Points already past when the block was bought are skipped
/// (the purchase message names the deadline), and after a gap in tracking only the most
/// urgent point is announced, not every one missed.
pub fn warning_due(
    purchased_at: DateTime<Utc>,
    deadline: DateTime<Utc>,
    points_hours: &[u32],
    now: DateTime<Utc>,
) -> Option<u32> {
    if now >= deadline {
        return None;
    }
    points_hours
        .iter()
        .copied()
        .filter(|&h| {
            let at = deadline - Duration::hours(i64::from(h));
            at > purchased_at && now >= at
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
    }

    #[test]
    fn warnings_fire_at_each_point_once_reached() {
        let bought = t(1, 0, 0);
        let deadline = t(1, 12, 0);
        let pts = [6, 1];
        assert_eq!(warning_due(bought, deadline, &pts, t(1, 5, 59)), None);
        assert_eq!(warning_due(bought, deadline, &pts, t(1, 6, 0)), Some(6));
        assert_eq!(warning_due(bought, deadline, &pts, t(1, 10, 59)), Some(6));
        assert_eq!(warning_due(bought, deadline, &pts, t(1, 11, 0)), Some(1));
        assert_eq!(warning_due(bought, deadline, &pts, t(1, 12, 0)), None, "at the deadline it has failed");
    }

    #[test]
    fn points_past_at_purchase_are_skipped() {
        // Bought 2 h before the start: deadline start - 5 min, the 6 h point already passed.
        let bought = t(3, 9, 30);
        let deadline = t(3, 11, 25);
        assert_eq!(warning_due(bought, deadline, &[6, 1], t(3, 9, 30)), None);
        assert_eq!(warning_due(bought, deadline, &[6, 1], t(3, 10, 25)), Some(1));
    }

    #[test]
    fn a_gap_in_tracking_announces_only_the_most_urgent_point() {
        assert_eq!(warning_due(t(1, 0, 0), t(1, 12, 0), &[6, 1, 3], t(1, 11, 30)), Some(1));
        assert_eq!(warning_due(t(1, 0, 0), t(1, 12, 0), &[], t(1, 11, 30)), None);
    }

    #[test]
    fn milestone_selection() {
        use BlockState::*;
        let e = t(10, 11, 30);
        let later = t(11, 11, 30);
        let names = |v: Vec<Milestone>| v.iter().map(Milestone::name).collect::<Vec<_>>();
        assert_eq!(names(milestones(PaymentPending, Scheduled, e, e)), ["payment-succeeded"]);
        assert_eq!(names(milestones(PaymentPending, Active, e, e)), ["payment-succeeded", "delivered"]);
        assert_eq!(names(milestones(Scheduled, Active, e, e)), ["delivered"]);
        assert_eq!(names(milestones(Active, Expired, e, e)), ["expired"]);
        assert_eq!(names(milestones(PaymentPending, PaymentFailed, e, e)), ["payment-failed"]);
        assert_eq!(names(milestones(Scheduled, Released, e, e)), ["released"]);
        assert_eq!(names(milestones(Active, Active, e, later)), ["extended-20261211T1130"]);
        assert_eq!(names(milestones(Scheduled, Active, e, later)), ["delivered", "extended-20261211T1130"]);
        // An end EC2 moves back (an extension it showed as paid undone) is no extension.
        assert_eq!(names(milestones(Active, Active, later, e)), ["end-moved-back-20261210T1130"]);
        assert_eq!(names(milestones(Scheduled, Active, later, e)), ["delivered", "end-moved-back-20261210T1130"]);
        assert!(milestones(Active, Active, e, e).is_empty());
    }
}
