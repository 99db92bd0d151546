//! A tracked block's extensions (track-blocks): bought or would be, paid, not made, undone.

use chrono::{DateTime, Utc};

use super::{tracked, tracked_line, when};
use crate::domain::block::Block;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::{Money, Rate};
use crate::domain::rule::Mode;
use crate::domain::slack::SlackMessage;

/// An extension was paid: the block ends later.
pub fn extended(b: &Block, old_end: DateTime<Utc>, fee: Option<Money>) -> SlackMessage {
    tracked(
        b,
        MessageKind::Extended,
        format!("Capacity Block extended to {}", when(b.end)),
        format!(
            "Reservation `{}` now ends at {} (was {}){}.\n{}",
            b.reservation_id,
            when(b.end),
            when(old_end),
            fee.map(|f| format!("; extension fee {f}")).unwrap_or_default(),
            tracked_line(b)
        ),
        vec!["Checkpoint reminders moved to the new end.".into()],
        format!("Extended to {}", when(b.end)),
    )
}

/// EC2 now reports an earlier end than capblock had (an extension it showed as paid was undone):
/// the block ends at the earlier time, and the reminders follow it.
pub fn end_moved_back(b: &Block, old_end: DateTime<Utc>) -> SlackMessage {
    tracked(
        b,
        MessageKind::EndMovedBack,
        format!("Check this block: `{}` now ends earlier, at {}", b.reservation_id, when(b.end)),
        format!(
            "EC2 reports that reservation `{}` ends at {}, not at {} as it did before: the extension is not in force.\n{}",
            b.reservation_id,
            when(b.end),
            when(old_end),
            tracked_line(b)
        ),
        vec![
            "Checkpoint reminders moved to the earlier end; plan for the instances to stop then.".into(),
            "Look at the block's extensions in the EC2 console (describe-capacity-block-extension-history).".into(),
        ],
        format!("End moved back to {}", when(b.end)),
    )
}

/// An extension was bought (payment pending) or, in dry-run, would have been.
pub fn extension_decided(
    b: &Block,
    offering_id: &str,
    new_end: DateTime<Utc>,
    fee: Money,
    rate: Rate,
    mode: Mode,
) -> SlackMessage {
    let (event, title, step) = match mode {
        Mode::Live => (
            MessageKind::ExtensionBought,
            format!("Extension bought: `{}`", b.reservation_id),
            "The end moves once EC2 takes payment; capblock posts here when it does.".to_string(),
        ),
        Mode::DryRun => (
            MessageKind::WouldExtend,
            format!("Would extend (dry run): `{}`", b.reservation_id),
            "Nothing was bought: the stack or the rule is in dry-run mode.".to_string(),
        ),
        // Approval is asked for purchases only: an extension is decided near the block's end,
        // when nobody may be there to approve it in time.
        Mode::Approval => (
            MessageKind::WouldExtend,
            format!("Would extend (approval mode): `{}`", b.reservation_id),
            "Nothing was bought: capblock does not extend blocks of rules in approval mode. \
             Extend it in the EC2 console, or set the rule's mode to \"live\" to let capblock extend."
                .to_string(),
        ),
    };
    tracked(
        b,
        event,
        title,
        format!(
            "Extension offering `{offering_id}` to {}: fee {fee}, {} per accelerator-hour.\n{}",
            when(new_end),
            rate.display(),
            tracked_line(b)
        ),
        vec![step],
        format!("Extension to {} for {fee}", when(new_end)),
    )
}

/// An extension was refused or never paid: the end stays, the fee is released.
pub fn extension_released(b: &Block, offering_id: &str, reason: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::ExtensionReleased,
        format!("Extension not made: `{}`", b.reservation_id),
        format!(
            "Extension `{offering_id}` did not go through: {reason}. The block still ends at {}.\n{}",
            when(b.end),
            tracked_line(b)
        ),
        vec!["Its fee was released from the budgets.".into()],
        "Extension not made".into(),
    )
}

/// An extension past its payment deadline that EC2 has not reported failed (`ec2_status`: the
/// history's word on it, or "no word"): its fee stays committed until a person decides.
pub fn extension_overdue(b: &Block, offering_id: &str, fee: Money, ec2_status: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::ExtensionOverdue,
        format!("Check this extension: `{}`", b.reservation_id),
        format!(
            "Extension `{offering_id}` ({fee}) is past its payment deadline, and EC2 has not reported its payment \
             failed (its extension history: {ec2_status}). capblock keeps its fee committed and buys no other \
             extension of the block. capblock has the block ending at {}.\n{}",
            when(b.end),
            tracked_line(b)
        ),
        vec![
            "Look at the extension in the EC2 console (describe-capacity-block-extension-history).".into(),
            "capblock releases the fee once EC2 reports the payment failed, and counts it paid once the end moves."
                .into(),
        ],
        "Extension overdue".into(),
    )
}

/// An extension capblock had closed as not made, which EC2's history shows it holds
/// (`ec2_status`): its fee is counted in the budgets again.
pub fn extension_recommitted(b: &Block, offering_id: &str, fee: Money, ec2_status: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::ExtensionRecommitted,
        format!("Extension counted again: `{}`", b.reservation_id),
        format!(
            "capblock had released extension `{offering_id}`, but EC2's extension history says {ec2_status}: \
             EC2 holds it. Its fee, {fee}, is counted in the budgets again, and in the block's extension days.\n{}",
            tracked_line(b)
        ),
        vec!["Look at the extension in the EC2 console (describe-capacity-block-extension-history).".into()],
        "Extension counted again".into(),
    )
}
