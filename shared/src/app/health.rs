//! Block health in the tracker: DescribeCapacityBlockStatus for the active blocks of a region
//! (one batched call), and each change announced once, in Slack and to the workloads (kind
//! `health`), through the outbox like every other milestone. EC2 reports no status for a block
//! that is still scheduled (the call fails for it), so the tracker asks about the blocks EC2
//! calls active (or unavailable) in this run.

use chrono::{DateTime, Utc};

use super::outbox::alert_notice;
use crate::domain::announce;
use crate::domain::block::Block;
use crate::domain::checkpoint::health_notice;
use crate::domain::health::{self, BlockHealth, HealthChange};
use crate::domain::names::Region;
use crate::ports::{BlockStatusSource, BlockStore, MarketError, Message, Notice, Outbox, StoreError, Topic};

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error(transparent)]
    Market(#[from] MarketError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Asks EC2 about the health of `blocks` (those of one region EC2 reports active or
/// unavailable) and announces each change. Returns the changes announced, as `reservation#summary`.
pub async fn check<M, S>(
    market: &M,
    store: &S,
    region: &Region,
    blocks: &[&Block],
    now: DateTime<Utc>,
) -> Result<Vec<String>, HealthError>
where
    M: BlockStatusSource + ?Sized,
    S: BlockStore + Outbox + ?Sized,
{
    let asked: Vec<&Block> = blocks.iter().copied().filter(|b| b.capacity_block_id.is_some()).collect();
    let ids: Vec<String> = asked.iter().filter_map(|b| b.capacity_block_id.clone()).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut announced = Vec::new();
    for (block_id, now_health) in market.block_status(region, &ids).await? {
        for b in asked.iter().filter(|b| b.capacity_block_id.as_deref() == Some(block_id.as_str())) {
            let Some(change) = health::change(b.health.as_ref(), &now_health) else {
                continue;
            };
            if announce_change(store, b, &change, &now_health, now).await? {
                tracing::warn!(event = "block_health_changed", reservation = %b.reservation_id, change = %change.summary(), "announced");
                announced.push(format!("{}#{}", b.reservation_id, change.summary()));
            }
        }
    }
    Ok(announced)
}

/// Enqueues the Slack and the workload notice of the change, then stores the health it
/// announced (so the same status is no news next run). Enqueue first: a run that dies before
/// the store write repeats the enqueue, which the outbox drops. Returns whether it stored.
async fn announce_change<S: BlockStore + Outbox + ?Sized>(
    store: &S,
    b: &Block,
    change: &HealthChange,
    seen: &BlockHealth,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let n = b.health_changes + 1;
    let key = health::milestone(n, change);
    store.enqueue(&alert_notice(&b.reservation_id, &key, &announce::health(b, change), now)).await?;
    let work_key = format!("{key}@workloads");
    let (body, attributes) = health_notice(b, &work_key, change, now);
    store
        .enqueue(&Notice {
            thread: b.reservation_id.clone(),
            milestone: work_key,
            topic: Topic::Workloads,
            message: Message { body, attributes },
            created_at: now,
        })
        .await?;
    // The block as stored now: the tracker may have moved it in this run.
    let Some(current) = store.get_block(&b.reservation_id).await? else {
        return Ok(false);
    };
    if current.health_changes >= n {
        return Ok(false);
    }
    let next = Block { health: Some(seen.clone()), health_changes: n, ..current.clone() };
    match store.update_block(&next, current.version).await {
        Ok(()) => Ok(true),
        // Another run stored a newer block first: it saw the same status and did the same.
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e),
    }
}
