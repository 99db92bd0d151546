//! Block health in the tracker: DescribeCapacityBlockStatus for the active blocks of a region
//! (one batched call), and each change announced once, in Slack and to the workloads (kind
//! `health`), through the outbox like every other milestone. EC2 reports no status for a block
//! that is still scheduled (the call fails for it), so the tracker asks about the blocks EC2
//! calls active (or unavailable) in this run.
//!
//! The failures are judged by `domain::health` from EC2's counts and, where the unavailable
//! count may hold running instances, the instances in the reservation of every account
//! (GetCapacityReservationUsage): one more call per such block and run, none for a block with
//! nothing unavailable. Asked of every block, shared or not, in place of the owner's
//! DescribeInstances it replaced: the same one call, and it counts what DescribeInstances
//! cannot see, the instances of the accounts a block is shared with (the owner's
//! DescribeInstances lists only its own, so under the reading where running instances count as
//! unavailable a consumer's work read as failed capacity) and the ones still stopping, which
//! hold their places for minutes after they stop running. A block whose usage cannot be read
//! is left as it was this run (a named error and a log line): no alert on a guess.

use chrono::{DateTime, Utc};

use super::handoff::{EventTo, enqueue_event};
use super::outbox::{alert_notice, workload_notice};
use crate::domain::announce;
use crate::domain::block::Block;
use crate::domain::bus_event;
use crate::domain::checkpoint::health_notice;
use crate::domain::health::{self, HealthChange, HealthWatch, WatchedHealth};
use crate::domain::ids::Region;
use crate::domain::outbox_key::OutboxKey;
use crate::ports::{BlockStatusSource, BlockStore, MarketError, Outbox, StoreError};

/// A change of one block's health, to announce: the block, the change, the health judged and
/// the watch to keep with it (`domain::health::settle`).
pub type Found<'b> = (&'b Block, HealthChange, WatchedHealth);

/// What one health check found: the changes to announce, the blocks whose watch on a rise in
/// failures starts or ends with no news (to store), and the blocks whose instances in use could
/// not be read (their health is not judged this run).
#[derive(Debug, Default)]
pub struct HealthCheck<'b> {
    pub found: Vec<Found<'b>>,
    pub watched: Vec<(&'b Block, Option<HealthWatch>)>,
    pub unread: Vec<(&'b Block, MarketError)>,
}

/// Asks EC2 about the health of `blocks` (those of one region EC2 reports active or
/// unavailable), in one batched DescribeCapacityBlockStatus, and returns the changes since
/// what was announced last, a rise in failures that instances still stopping could explain held
/// back until it has lasted (`domain::health::settle`, by `now`, the tracker's clock). A block
/// whose failures its status cannot tell (EC2 listed its block but not its reservation) is left
/// as it was, and so is one whose usage EC2 did not give (in `unread`).
pub async fn changes<'b, M: BlockStatusSource + ?Sized>(
    market: &M,
    region: &Region,
    blocks: &[&'b Block],
    now: DateTime<Utc>,
) -> Result<HealthCheck<'b>, MarketError> {
    let ids: Vec<String> = blocks.iter().filter_map(|b| b.capacity_block_id.clone()).collect();
    let mut checked = HealthCheck::default();
    if ids.is_empty() {
        return Ok(checked);
    }
    for status in market.block_status(region, &ids).await? {
        for &b in blocks.iter().filter(|b| b.capacity_block_id.as_deref() == Some(status.capacity_block_id.as_str())) {
            let Some(counts) = status.counts_of(&b.reservation_id) else {
                continue;
            };
            let in_use = if counts.may_count_work() {
                match market.reservation_usage(region, &b.reservation_id).await {
                    Ok(usage) => Some(usage.in_use()),
                    Err(e) => {
                        checked.unread.push((b, e));
                        continue;
                    }
                }
            } else {
                None
            };
            let Some(seen) = status.health_of(&b.reservation_id, in_use) else {
                continue;
            };
            let settled = health::settle(b.health.as_ref(), b.health_watch.as_ref(), &seen, in_use.is_some(), now);
            if let Some(change) = health::change(b.health.as_ref(), &settled.health) {
                checked.found.push((b, change, settled));
            } else if settled.watch != b.health_watch {
                checked.watched.push((b, settled.watch));
            }
        }
    }
    Ok(checked)
}

/// Enqueues the Slack and the workload notice of the change, and capblock's Health Changed
/// event (with `tags`, the rule's), then stores the health it announced and the watch (so the
/// same status is no news next run). Enqueue first: a run that dies before the store write
/// repeats the enqueue, which the outbox drops. Returns whether it stored.
pub async fn announce_change<S: BlockStore + Outbox + ?Sized>(
    store: &S,
    b: &Block,
    change: &HealthChange,
    settled: &WatchedHealth,
    to: EventTo,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let n = b.health_changes + 1;
    let key = health::milestone(n, change);
    store
        .enqueue(&alert_notice(&b.reservation_id, &OutboxKey::notice(key.as_str())?, &announce::health(b, change), now))
        .await?;
    let work_key = OutboxKey::workloads(key.as_str())?;
    let notice = health_notice(b, &work_key, change, now);
    store.enqueue(&workload_notice(&b.reservation_id, &work_key, notice, now)).await?;
    enqueue_event(store, b, to, &bus_event::step_of_health(change), &key, now).await?;
    store_health(store, b, |current| Block {
        health: Some(settled.health.clone()),
        health_changes: n,
        health_watch: settled.watch,
        ..current
    })
    .await
}

/// Stores the watch on a rise in failures that starts or ends with no news. Returns whether it
/// stored.
pub async fn store_watch<S: BlockStore + ?Sized>(
    store: &S,
    b: &Block,
    watch: Option<HealthWatch>,
) -> Result<bool, StoreError> {
    store_health(store, b, |current| Block { health_watch: watch, ..current }).await
}

/// Writes `edit` of the block as stored now (the tracker may have moved it in this run), unless
/// another run announced a health change since `b` was read: it judged the same or a newer
/// status. Returns whether it stored.
async fn store_health<S: BlockStore + ?Sized>(
    store: &S,
    b: &Block,
    edit: impl FnOnce(Block) -> Block,
) -> Result<bool, StoreError> {
    let Some(current) = store.get_block(&b.reservation_id).await? else {
        return Ok(false);
    };
    if current.health_changes > b.health_changes {
        return Ok(false);
    }
    let version = current.version;
    match store.update_block(&edit(current), version).await {
        Ok(()) => Ok(true),
        // Another run stored a newer block first: it saw the same status and did the same.
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::fixtures::reservation_of;
    use crate::contract::fixtures::{block_for, intent, rule};
    use crate::domain::block::Reservation;
    use crate::domain::health::Interconnect;
    use crate::memory::{Hooked, MemoryEc2, Script};

    fn now() -> DateTime<Utc> {
        "2026-12-03T12:00:00Z".parse().unwrap()
    }

    fn block() -> Block {
        let b = block_for(&intent(&rule("r", "1000"), "cb-x", "100", None), "cr-a");
        Block { capacity_block_id: Some("cb-a".into()), instance_count: 8, ..b }
    }

    /// EC2 with the block active, 8 instances: 1 taken out, the owner's 3 and a member's 4 at
    /// work, all counted unavailable (the `in_use` reading, the in-memory EC2's default).
    fn shared(b: &Block) -> MemoryEc2 {
        let r = reservation_of(&intent(&rule("r", "1000"), "cb-x", "100", None), &b.reservation_id);
        let r = Reservation {
            state: "active".into(),
            instance_count: 8,
            capacity_block_id: b.capacity_block_id.clone(),
            ..r
        };
        let ec2 = MemoryEc2::default().with_reservations([r]);
        ec2.run_instances(&b.reservation_id, MemoryEc2::OWNER, 3);
        ec2.run_instances(&b.reservation_id, "111111111111", 4);
        ec2.set_health(&b.reservation_id, Interconnect::Ok, 1);
        ec2
    }

    #[tokio::test]
    async fn every_account_s_instances_are_work_and_an_unread_usage_is_no_alert() {
        let region: Region = "us-east-1".parse().unwrap();
        let b = block();
        let ec2 = shared(&b);
        let status = ec2.block_status(&region, &["cb-a".into()]).await.unwrap();
        let counts = status[0].counts_of("cr-a").unwrap();
        assert_eq!((counts.total, counts.available, counts.unavailable), (8, 0, 8), "every place unavailable");
        // 8 unavailable, 7 of them at work in two accounts: 1 failed.
        let first = changes(&ec2, &region, &[&b], now()).await.unwrap();
        assert!(first.unread.is_empty() && first.found.is_empty(), "{first:?}");
        // First held back (instances still stopping would look the same), and watched.
        let [(_, Some(watch))] = first.watched.as_slice() else { panic!("{:?}", first.watched) };
        let b = Block { health_watch: Some(*watch), ..b.clone() };
        let later = now() + health::STOPPING_SETTLE;
        let checked = changes(&ec2, &region, &[&b], later).await.unwrap();
        let [(_, change, settled)] = checked.found.as_slice() else { panic!("{:?}", checked.found) };
        assert_eq!((settled.health.total, settled.health.unavailable, settled.watch), (8, 1, None));
        assert_eq!(change.summary(), "1 of 8 instances unavailable");
        // The usage refused: the block is named, nothing is judged (no alert on a guess).
        let refused = MarketError::Rejected {
            operation: "GetCapacityReservationUsage",
            region: region.to_string(),
            code: "UnauthorizedOperation".into(),
            message: "not allowed".into(),
        };
        let refusing = Hooked::new(shared(&b), Script::new().fail("reservation_usage", refused.clone()));
        let checked = changes(&refusing, &region, &[&b], later).await.unwrap();
        assert!(checked.found.is_empty(), "{:?}", checked.found);
        assert_eq!(
            checked.unread.iter().map(|(b, e)| (b.reservation_id.as_str(), e)).collect::<Vec<_>>(),
            [("cr-a", &refused)]
        );
    }
}
