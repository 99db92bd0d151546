//! A tracked block's payment (track-blocks): paid, still pending near its deadline, failed, and
//! a failed part whose purchase's fee stays committed, and what the ledger check finds.

use chrono::{DateTime, Utc};

use super::{tracked, tracked_line, when};
use crate::domain::block::Block;
use crate::domain::duration;
use crate::domain::message_kind::MessageKind;
use crate::domain::slack::SlackMessage;

/// Payment went through: the block is scheduled (or already running).
pub fn payment_succeeded(b: &Block) -> SlackMessage {
    tracked(
        b,
        MessageKind::PaymentSucceeded,
        format!("Payment succeeded: {} x {}", b.instance_count, b.instance_type),
        format!("The fee for `{}` is paid; the block is scheduled.\n{}", b.reservation_id, tracked_line(b)),
        vec![
            format!("Instances can launch into it from {}; capblock posts here when it is active.", when(b.start)),
            format!("Use MarketType=capacity-block and CapacityReservationId={}.", b.reservation_id),
        ],
        format!("Paid; scheduled {} to {}", when(b.start), when(b.end)),
    )
}

/// How long from `from` to `to` (none once past), in the one duration style.
fn left(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    duration::compact((to - from).max(chrono::Duration::zero()))
}

/// Payment is still pending `point_hours` (or less) before the deadline.
pub fn payment_warning(
    b: &Block,
    deadline: DateTime<Utc>,
    point_hours: u32,
    rebuy: bool,
    now: DateTime<Utc>,
) -> SlackMessage {
    tracked(
        b,
        MessageKind::PaymentWarning,
        format!("Payment still pending: {} left for `{}`", left(now, deadline), b.reservation_id),
        format!(
            "EC2 has not taken payment for this block yet (warning point: {} before the deadline).\n{}\n• Payment deadline: {} ({} from now)",
            duration::compact(chrono::Duration::hours(i64::from(point_hours))),
            tracked_line(b),
            when(deadline),
            left(now, deadline)
        ),
        vec![
            "Check the account's payment method (Billing console) if this is unexpected.".into(),
            format!(
                "If payment has not gone through by {}, EC2 releases the block (payment-failed) and capblock frees its budget{}.",
                when(deadline),
                if rebuy { "; the rule then buys a replacement" } else { "" }
            ),
        ],
        format!("Payment pending; deadline {}", when(deadline)),
    )
}

/// Payment failed: the block is gone and its budget released. `seen_at` is when the tracker saw
/// EC2 report `payment-failed`: before the deadline EC2 failed the payment early; at or after
/// it the payment had not gone through by then (EC2 does not say which happened).
pub fn payment_failed(b: &Block, rebuy: bool, seen_at: DateTime<Utc>) -> SlackMessage {
    let what = match b.payment_deadline {
        Some(d) if seen_at < d => format!("EC2 failed the payment before its deadline ({})", when(d)),
        Some(d) => format!("EC2 did not take payment by the deadline ({})", when(d)),
        None => "EC2 reports the payment as failed".to_string(),
    };
    // A purchase of UltraServers is one fee for all its parts: it goes back once EC2 shows every
    // part payment-failed, which this part alone does not say.
    let released = if b.ultraserver {
        "The purchase's fee goes back to the budgets once EC2 shows every UltraServer of it payment-failed"
    } else {
        "The fee was released from the budgets"
    };
    let next = if rebuy {
        format!("{released}; the rule may buy a replacement on its next scan.")
    } else {
        format!("{released}. The rule does not rebuy (rebuy_on_payment_failure = false).")
    };
    tracked(
        b,
        MessageKind::PaymentFailed,
        format!("Payment failed: {} x {} released", b.instance_count, b.instance_type),
        format!("{what}; reservation `{}` is released and nothing was charged.\n{}", b.reservation_id, tracked_line(b)),
        vec![next, "Check the account's payment method (Billing console).".into()],
        "Payment failed; block released".into(),
    )
}

/// A part of a purchase failed its payment while EC2 may still hold `part`, another of the same
/// purchase (one fee for all): the fee stays committed, and a person is told what to look at.
pub fn fee_kept(b: &Block, part: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::FeeKept,
        format!("Fee kept: `{part}` of the same purchase is not shown failed"),
        format!(
            "EC2 failed the payment for `{}`, but does not show `{part}`, another UltraServer of the same purchase, \
             as payment-failed (it may be waiting, paid, or not listed yet). The purchase's one fee stays committed \
             in the budgets until EC2 shows every part failed.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec![format!("Look at `{part}` in the EC2 console (Capacity Reservations); capblock keeps looking every run.")],
        "Payment failed; fee kept while a part may be held".into(),
    )
}

/// A failed payment's fee kept because the purchase made more UltraServers than its intent
/// names (recorded by its tag while EC2 listed only some): one EC2 has not listed may be held.
pub fn fee_kept_unshown(b: &Block) -> SlackMessage {
    tracked(
        b,
        MessageKind::FeeKept,
        "Fee kept: a part of the same purchase is not listed yet".to_string(),
        format!(
            "EC2 failed the payment for `{}`, but its purchase made more UltraServers than capblock has recorded \
             (it recorded the purchase by its tag while EC2 listed only some). One EC2 has not listed may be \
             waiting or paid, so the purchase's one fee stays committed in the budgets.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec![
            "Look for the purchase's other UltraServers in the EC2 console (Capacity Reservations, by the purchase's \
             intent tag); capblock keeps looking every run."
                .into(),
        ],
        "Payment failed; fee kept while a part may be held".into(),
    )
}

/// EC2 holds a block the ledger had as final (`from`): a payment EC2 reported failed and then
/// took after all, or a block released on a person's word. It is tracked again and its fee is
/// committed again: the books follow what EC2 holds.
pub fn held_again(b: &Block, from: &str, ec2_state: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::LedgerMismatch,
        format!("EC2 holds `{}`, which capblock had as {from}", b.reservation_id),
        format!(
            "EC2 lists the reservation as {ec2_state}. capblock had booked it {from}; it tracks the block again \
             (reminders, checkpoint notices) and counts its fee in the budgets again.\n{}",
            tracked_line(b)
        ),
        vec!["Check the reservation and the bill in the EC2 console; a second purchase for the same rule may be held too.".into()],
        "Ledger corrected: block held again".into(),
    )
}

/// EC2 holds more of a rule's purchases than its `max_blocks_held` allows (`b`: one of them).
pub fn over_limit_held(b: &Block, rule: &str, held: usize, limit: u32) -> SlackMessage {
    tracked(
        b,
        MessageKind::LedgerMismatch,
        format!("Rule {rule} holds {held} blocks; its limit is {limit}"),
        format!(
            "EC2 holds {held} purchases carrying rule {rule}'s tag, more than its max_blocks_held of {limit}. \
             capblock buys nothing more for the rule while it holds its limit.\n{}",
            tracked_line(b)
        ),
        vec![
            "Look at the rule's reservations in the EC2 console: a limit lowered after buying, or a second purchase."
                .into(),
        ],
        "Ledger check: over the rule's limit".into(),
    )
}
