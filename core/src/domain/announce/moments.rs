//! Checkpoint moments of a block (on-capacity-event): delivered, capblock's reminder, AWS's
//! expiration warning, an instance's interruption warning.

use chrono::{DateTime, Utc};

use super::when;
use crate::domain::block::Block;
use crate::domain::checkpoint::{CheckpointMilestone, minutes_left};
use crate::domain::duration;
use crate::domain::slack::SlackMessage;

fn block_line(f: &Block) -> String {
    format!(
        "*{} x {}* in {} (`{}`)\n• End: {}\n• Instances terminated from: {}",
        f.instance_count,
        f.instance_type,
        f.region,
        f.reservation_id,
        when(f.end),
        when(f.termination_time())
    )
}

fn checkpoint_keywords(f: &Block, extra: &str) -> Vec<String> {
    vec!["capblock".to_string(), extra.to_string(), f.region.to_string(), f.instance_type.to_string()]
}

/// A checkpoint moment of a block: delivered, capblock's reminder, AWS's expiration warning or
/// one instance's interruption warning. `instances` are the ids running in the block now.
pub fn checkpoint(
    f: &Block,
    milestone: &CheckpointMilestone,
    instances: &[String],
    now: DateTime<Utc>,
) -> SlackMessage {
    let left = minutes_left(f.termination_time(), now);
    let running = match instances.len() {
        0 => "No instance is running in it.".to_string(),
        1 => format!("1 instance running: {}.", instances[0]),
        n => format!("{n} instances running."),
    };
    let (title, summary, steps) = match milestone {
        CheckpointMilestone::Delivered => (
            format!("Capacity Block active: {}", f.reservation_id),
            "The block is active: its instances can run now".to_string(),
            vec![
                format!("Launch with MarketType=capacity-block and CapacityReservationId={}.", f.reservation_id),
                "capblock reminds this thread (and the workloads topic) before the instances are terminated.".into(),
            ],
        ),
        CheckpointMilestone::Reminder { lead_minutes, .. } => (
            format!(
                "Checkpoint reminder: {} ends in {}",
                f.reservation_id,
                duration::minutes(i64::from(*lead_minutes))
            ),
            format!("{} until the instances are terminated", duration::minutes(left)),
            vec![
                "Checkpoint training state to durable storage now.".into(),
                "Extend the block (PurchaseCapacityBlockExtension) if the work needs longer.".into(),
            ],
        ),
        CheckpointMilestone::AwsExpirationWarning => (
            format!("AWS expiration warning: {}", f.reservation_id),
            format!("AWS warns the block ends soon: {} until the instances are terminated", duration::minutes(left)),
            vec!["Save checkpoints now: the instances are terminated at the time above.".into()],
        ),
        CheckpointMilestone::Interruption { instance_id } => (
            format!("Instance interruption: {instance_id}"),
            format!("{instance_id} in {} is about to be terminated", f.reservation_id),
            vec![format!("Work on {instance_id} not yet saved will be lost.")],
        ),
    };
    SlackMessage {
        id: format!("{}#{}", f.reservation_id, milestone.key()),
        title,
        description: format!("{}\n• Time left: {}\n{running}", block_line(f), duration::minutes(left)),
        next_steps: steps,
        keywords: checkpoint_keywords(f, &milestone.kind()),
        thread_id: f.reservation_id.clone(),
        summary,
        event_type: milestone.kind(),
        related_resources: f.arn.iter().cloned().collect(),
    }
}
