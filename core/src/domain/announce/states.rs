//! The states of a tracked block (track-blocks): scheduled, active, ended, released, EC2's
//! other states and health, and the reservations capblock starts tracking.

use super::{tracked, tracked_line, when};
use crate::domain::block::Block;
use crate::domain::health::HealthChange;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::{Money, Rate};
use crate::domain::slack::SlackMessage;
use crate::domain::usage;

/// A block capblock sees scheduled without having watched its payment.
pub fn scheduled(b: &Block) -> SlackMessage {
    tracked(
        b,
        MessageKind::Scheduled,
        format!("Capacity Block scheduled: {} x {}", b.instance_count, b.instance_type),
        format!("Reservation `{}` is scheduled.\n{}", b.reservation_id, tracked_line(b)),
        vec![format!("Instances can launch into it from {}.", when(b.start))],
        format!("Scheduled {} to {}", when(b.start), when(b.end)),
    )
}

fn launch_hints(b: &Block) -> Vec<String> {
    vec![
        format!(
            "aws ec2 run-instances --region {} --instance-type {} --count {} --instance-market-options MarketType=capacity-block --capacity-reservation-specification 'CapacityReservationTarget={{CapacityReservationId={}}}' ...",
            b.region, b.instance_type, b.instance_count, b.reservation_id
        ),
        format!(
            "Karpenter: in the EC2NodeClass set capacityReservationSelectorTerms: [{{id: {}}}] and allow karpenter.sh/capacity-type: reserved in the NodePool (nodes drain 40 minutes before the end).",
            b.reservation_id
        ),
    ]
}

/// The block is active: how to launch into it.
pub fn active(b: &Block) -> SlackMessage {
    tracked(
        b,
        MessageKind::Delivered,
        format!("Capacity Block active: {} x {}", b.instance_count, b.instance_type),
        format!("Reservation `{}` is active: its instances can run now.\n{}", b.reservation_id, tracked_line(b)),
        launch_hints(b),
        format!("Active until {}", when(b.end)),
    )
}

/// The block ended: what it cost. `total_fee` includes paid extensions; `per_accelerator_hour`
/// is None when capblock does not know the fee or the accelerator count.
pub fn expired(b: &Block, total_fee: Option<Money>, per_accelerator_hour: Option<Rate>) -> SlackMessage {
    let cost = match (total_fee, per_accelerator_hour) {
        (Some(f), Some(r)) => format!("• Total fee: {f}\n• Price: {} per accelerator-hour", r.display()),
        (Some(f), None) => format!("• Total fee: {f}"),
        _ => "• Fee: unknown to capblock (the block was bought outside it)".into(),
    };
    let used = used_line(b, total_fee);
    tracked(
        b,
        MessageKind::Expired,
        format!("Capacity Block ended: {} x {}", b.instance_count, b.instance_type),
        format!("Reservation `{}` has expired.\n{}\n{cost}{used}", b.reservation_id, tracked_line(b)),
        vec!["Nothing to do: capblock stops tracking this block.".into()],
        match total_fee {
            Some(f) => format!("Ended; cost {f}"),
            None => "Ended".into(),
        },
    )
}

/// The end-of-block line of what was used (empty when capblock never sampled the block active):
/// paid and used instance-hours, utilization, and the price per used accelerator-hour.
fn used_line(b: &Block, total_fee: Option<Money>) -> String {
    if !b.usage.is_known() {
        return String::new();
    }
    let x = usage::utilization(&b.span(), &b.usage, total_fee);
    let price =
        x.per_used_accelerator_hour.map_or(String::new(), |r| format!(": {} per used accelerator-hour", r.display()));
    format!(
        "\n• Used: {} of {} instance-hours paid ({}%){price}",
        x.used_instance_hours.normalize(),
        x.paid_instance_hours.normalize(),
        x.percent.normalize()
    )
}

/// EC2 cancelled or failed the block.
pub fn released(b: &Block, ec2_state: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::Released,
        format!("Capacity Block released: {} x {}", b.instance_count, b.instance_type),
        format!(
            "EC2 reports reservation `{}` as {ec2_state}: it will not be delivered.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec!["capblock stops tracking this block.".into()],
        format!("Released ({ec2_state})"),
    )
}

/// EC2 reports something capblock cannot place.
pub fn anomaly(b: &Block, what: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::Anomaly,
        format!("Check this block: `{}`", b.reservation_id),
        format!("{what}\n{}", tracked_line(b)),
        vec!["capblock keeps tracking it; look at the reservation in the EC2 console.".into()],
        "Unexpected state from EC2".into(),
    )
}

/// EC2 reports a state that is not on a block's path: what it means, and what to look at.
pub fn ec2_state(b: &Block, state: &str) -> SlackMessage {
    let meaning = match state {
        "unavailable" => "EC2 reports the block unavailable: its capacity cannot be used right now.",
        "cancelling" => "EC2 is cancelling the block.",
        "delayed" => "EC2 reports the block delayed: its capacity is not delivered yet.",
        "assessing" => "EC2 is assessing the block.",
        _ => "EC2 reports a state capblock does not know.",
    };
    tracked(
        b,
        MessageKind::Ec2State,
        format!("Check this block: EC2 reports it `{state}`"),
        format!("{meaning}\n{}", tracked_line(b)),
        vec![
            "Look at the reservation in the EC2 console; capblock keeps tracking it and says so again if the state changes.".into(),
        ],
        format!("{} is {state}", b.reservation_id),
    )
}

/// DescribeCapacityBlockStatus reports a change of the block's health: new problems, or the
/// recovery from those announced before.
pub fn health(b: &Block, change: &HealthChange) -> SlackMessage {
    let h = change.health();
    let (title, steps) = match change {
        HealthChange::Degraded { .. } => (
            format!("Check this block: {}", change.summary()),
            vec![
                "Look at the block in the EC2 console (Capacity Blocks, status); jobs may need to move to the instances still available.".into(),
                "capblock says so again when the health changes, and when it recovers.".into(),
            ],
        ),
        HealthChange::Recovered { .. } => (
            "Block healthy again".to_string(),
            vec!["Nothing to do: the problems announced before are gone.".into()],
        ),
    };
    let available = h.total.saturating_sub(h.unavailable);
    tracked(
        b,
        MessageKind::Health,
        title,
        format!(
            "EC2 reports interconnect `{}`, {available} of {} instances available.\n{}",
            h.interconnect,
            h.total,
            tracked_line(b)
        ),
        steps,
        format!("{}: {}", b.reservation_id, change.summary()),
    )
}

/// A reservation capblock did not record is now tracked.
pub fn tracking(b: &Block, state: &str, tagged: bool) -> SlackMessage {
    let why = if tagged {
        "It carries this stack's `capblock:stack` tag but was missing from capblock's store."
    } else {
        "It was bought outside capblock (adopt_untagged is on)."
    };
    tracked(
        b,
        MessageKind::Tracking,
        format!("Now tracking: {} x {}", b.instance_count, b.instance_type),
        format!("{why} State: {state}.\n{}", tracked_line(b)),
        vec!["capblock posts its state changes and reminders in this thread.".into()],
        format!("Tracking {}", b.reservation_id),
    )
}

/// A reservation carries the tag of an intent whose purchase is recorded, but is not one of
/// that purchase's reservations: EC2 sold a second block for one decision (or someone tagged
/// one by hand). It is tracked; its fee is in no budget.
pub fn duplicate_purchase(b: &Block, state: &str, intent_id: &str) -> SlackMessage {
    tracked(
        b,
        MessageKind::DuplicatePurchase,
        format!("Second purchase for one decision: {} x {}", b.instance_count, b.instance_type),
        format!(
            "Reservation `{}` carries the `capblock:intent` tag `{intent_id}`, whose purchase is already recorded, but is not one of that purchase's reservations. EC2 may have sold two blocks for one decision. State: {state}.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec![
            format!("In the EC2 console, look up the reservations tagged `capblock:intent` = `{intent_id}`."),
            "capblock tracks this block, but its fee is charged to no budget: correct the budgets by hand if it was bought.".into(),
        ],
        format!("Second purchase for intent {intent_id}: {}", b.reservation_id),
    )
}
