//! What an active block's instances are used for, in the tracker: each run's sample of the block
//! (EC2's AvailableInstanceCount from the observation the tracker made anyway) stored with the
//! block, and each idle episode worth telling announced once, in Slack, to the workloads (kind
//! `idle`) and as a Block Idle event, through the outbox like every other milestone. The rules
//! of counting are `domain::usage`'s.

use chrono::{DateTime, Utc};

use super::handoff::{EventTo, enqueue_event};
use super::outbox::{alert_notice, workload_notice};
use crate::domain::announce;
use crate::domain::block::Block;
use crate::domain::bus_event;
use crate::domain::checkpoint::idle_notice;
use crate::domain::extension::ExtensionState;
use crate::domain::money::Money;
use crate::domain::outbox_key::OutboxKey;
use crate::domain::usage::{IdleNews, Reading, idle_cost};
use crate::ports::{BlockStore, ExtensionLedger, Outbox, StoreError};

/// Stores sample `s` of active block `b` (as stored, `b.version`) and announces what it tells:
/// `alert_after` the rule's `idle_alert_minutes`, `tags` the rule's. What the block cost is read
/// only for news, which a sample rarely brings. Enqueue first: a run that dies before the store
/// write samples again next run, finds the same episode number, and the outbox drops the
/// repeat. Returns the news announced, if any. A block another run stored meanwhile is left
/// to that run (it sampled the same instances).
pub async fn sample<S: BlockStore + ExtensionLedger + Outbox + ?Sized>(
    store: &S,
    b: &Block,
    s: &Reading,
    alert_after: u32,
    to: EventTo,
    now: DateTime<Utc>,
) -> Result<Option<IdleNews>, StoreError> {
    let (usage, news) = b.usage.sample(&b.span(), s, alert_after);
    if usage == b.usage {
        return Ok(None);
    }
    if let Some(n) = &news {
        let total = total_paid(store, b).await?;
        announce_news(store, b, n, total, to, now).await?;
    }
    let next = Block { usage, ..b.clone() };
    match store.update_block(&next, b.version).await {
        Ok(()) => Ok(news),
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The block's fee plus every paid extension; None when capblock never knew the fee (an
/// adopted block).
pub async fn total_paid<S: ExtensionLedger + ?Sized>(store: &S, b: &Block) -> Result<Option<Money>, StoreError> {
    let Some(mut total) = b.fee else {
        return Ok(None);
    };
    for x in store.extensions_of(&b.reservation_id).await? {
        if x.state == ExtensionState::Paid {
            total = total.checked_add(&x.offer.fee).unwrap_or(total);
        }
    }
    Ok(Some(total))
}

async fn announce_news<S: Outbox + ?Sized>(
    store: &S,
    b: &Block,
    n: &IdleNews,
    total: Option<Money>,
    to: EventTo,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let cost = idle_cost(&b.span(), total, n.idle_instance_minutes());
    let key = n.milestone();
    let msg = match n {
        IdleNews::Idle { idle, since, idle_instance_minutes, .. } => {
            announce::idle(b, *idle, *since, *idle_instance_minutes, cost, now)
        }
        IdleNews::Recovered { since, until, idle_instance_minutes, .. } => {
            announce::idle_over(b, *since, *until, *idle_instance_minutes, cost)
        }
    };
    store.enqueue(&alert_notice(&b.reservation_id, &OutboxKey::notice(key.as_str())?, &msg, now)).await?;
    let work_key = OutboxKey::workloads(key.as_str())?;
    let notice = idle_notice(b, &work_key, n, cost, now);
    store.enqueue(&workload_notice(&b.reservation_id, &work_key, notice, now)).await?;
    enqueue_event(store, b, to, &bus_event::step_of_idle(n, cost), &key, now).await?;
    Ok(())
}
