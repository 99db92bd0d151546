//! Part of an active block paid and idle (track-blocks), and the end of that episode.

use chrono::{DateTime, Utc};

use super::{tracked, tracked_line, when};
use crate::domain::block::Block;
use crate::domain::duration;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::Money;
use crate::domain::slack::SlackMessage;

/// Part of an active block has been idle (paid, nothing running) for the rule's
/// `idle_alert_minutes`: how many instances, since when, and what the idle time has cost so far
/// at the block's own price (`cost`: None when capblock never knew the fee).
pub fn idle(
    b: &Block,
    idle: u32,
    since: DateTime<Utc>,
    idle_instance_minutes: u64,
    cost: Option<Money>,
    now: DateTime<Utc>,
) -> SlackMessage {
    let minutes = (now - since).num_minutes();
    let cost_line = match cost {
        Some(c) => format!(
            "At the block's price that idle time has cost {c} so far ({} instance-hours).",
            hours(idle_instance_minutes)
        ),
        None => format!(
            "{} instance-hours idle so far (the block's fee is unknown to capblock).",
            hours(idle_instance_minutes)
        ),
    };
    tracked(
        b,
        MessageKind::Idle,
        format!("Paid but idle: {idle} of {} instances for {}", b.instance_count, duration::minutes(minutes)),
        format!(
            "{idle} of the block's {} instances have run nothing since {} ({}).\n{cost_line}\n{}",
            b.instance_count,
            when(since),
            duration::minutes(minutes),
            tracked_line(b)
        ),
        vec![
            "Start work on the idle instances (they are paid for until the end), or hand them to a team that can use them.".into(),
            "capblock says once more when every instance runs again.".into(),
        ],
        format!("{}: {idle} of {} instances idle for {}", b.reservation_id, b.instance_count, duration::minutes(minutes)),
    )
}

/// An idle episode alerted before is over: every instance runs again.
pub fn idle_over(
    b: &Block,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    idle_instance_minutes: u64,
    cost: Option<Money>,
) -> SlackMessage {
    let cost_line = match cost {
        Some(c) => format!(", which cost {c} at the block's price"),
        None => " (the block's fee is unknown to capblock)".to_string(),
    };
    tracked(
        b,
        MessageKind::Idle,
        "Every instance of the block runs again".to_string(),
        format!(
            "Idle from {} to {} ({}): {} instance-hours paid and unused{cost_line}.\n{}",
            when(since),
            when(until),
            duration::minutes((until - since).num_minutes()),
            hours(idle_instance_minutes),
            tracked_line(b)
        ),
        vec!["Nothing to do.".into()],
        format!("{}: every instance runs again", b.reservation_id),
    )
}

/// Instance-minutes as hours, to a tenth.
fn hours(instance_minutes: u64) -> String {
    // Rounded first: Decimal's `{:.1}` cuts digits off rather than rounding them.
    format!("{:.1}", (rust_decimal::Decimal::from(instance_minutes) / rust_decimal::Decimal::from(60)).round_dp(1))
}
