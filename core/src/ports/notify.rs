//! Telling people and workloads: the topics (SNS), the outbox that makes each notice go out
//! once, and the reminder schedules (EventBridge Scheduler).

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::block::Block;
use crate::domain::outbox_key::OutboxKey;

use super::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    #[error("publish to {topic} failed: {message}")]
    Failed { topic: String, message: String },
}

/// Who hears a topic: its confirmed subscriptions (preflight).
#[async_trait]
pub trait Subscriptions: Send + Sync {
    /// How many of the topic's subscriptions are confirmed (pending ones are not).
    async fn confirmed_subscriptions(&self, topic_arn: &str) -> Result<usize, NotifyError>;
}

/// Which SNS topic a message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topic {
    /// People: the Slack channel.
    Alerts,
    /// Machines: the training jobs running on the blocks.
    Workloads,
    /// capblock's own events, for EventBridge (`domain::bus_event`): anyone routes them with a rule.
    Events,
    /// Not a message: a hand-off action to run once (`app::handoff`); `flush` leaves these to
    /// the action runner.
    Actions,
}

/// The largest message SNS publishes, in bytes (Publish: "up to 256 KB"; larger is refused).
pub const MAX_MESSAGE_BYTES: usize = 262_144;

/// A message ready to publish: a body and string attributes for subscription filters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub body: String,
    pub attributes: BTreeMap<String, String>,
}

#[async_trait]
pub trait Notifier: Send + Sync {
    async fn publish(&self, topic: Topic, message: &Message) -> Result<(), NotifyError>;

    /// Publishes several messages to one topic: one result per message, in order. An adapter
    /// whose service takes batches (EventBridge) overrides it.
    async fn publish_all(&self, topic: Topic, messages: &[Message]) -> Vec<Result<(), NotifyError>> {
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            out.push(self.publish(topic, m).await);
        }
        out
    }
}

/// An announcement to make exactly once: `thread` (reservation or intent id) + `milestone`
/// (its outbox key, `domain::outbox_key`) is its identity. Written to the store before it is published (an outbox), so a crash
/// delays it instead of losing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub thread: String,
    pub milestone: OutboxKey,
    pub topic: Topic,
    pub message: Message,
    pub created_at: DateTime<Utc>,
}

impl Notice {
    pub fn id(&self) -> String {
        format!("{}#{}", self.thread, self.milestone)
    }
}

#[async_trait]
pub trait Outbox: Send + Sync {
    /// Adds a notice unless one with the same thread and milestone exists (then `false`).
    async fn enqueue(&self, notice: &Notice) -> Result<bool, StoreError>;
    /// Notices not yet published.
    async fn pending(&self) -> Result<Vec<Notice>, StoreError>;
    /// Takes the right to publish a notice until `until`; `false` if another run holds it.
    async fn lease(&self, notice: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError>;
    async fn mark_published(&self, notice: &Notice, at: DateTime<Utc>) -> Result<(), StoreError>;
    /// Writes a record: a notice that is never published (what capblock did, for a retry to
    /// read). `false` if one with the same thread and milestone exists.
    async fn put_record(&self, notice: &Notice) -> Result<bool, StoreError>;
    /// The thread's notices and records whose milestone starts with `prefix`.
    async fn records(&self, thread: &str, prefix: &str) -> Result<Vec<Notice>, StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Reminders (EventBridge Scheduler)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReminderError {
    #[error("scheduler: {0}")]
    Failed(String),
}

/// capblock's own checkpoint reminders: one-time schedules at operator-set lead times before a
/// block's termination time (end - 30 min, or 60 for UltraServers).
#[async_trait]
pub trait Reminders: Send + Sync {
    /// Makes sure the block has one one-time schedule per lead time, at the right instants
    /// (moving them when the end moved); lead times already past at `now` are skipped.
    /// Idempotent: calling it twice changes nothing.
    async fn sync(&self, block: &Block, now: DateTime<Utc>) -> Result<(), ReminderError>;
    /// Removes every reminder schedule of the block. Idempotent.
    async fn clear(&self, block: &Block) -> Result<(), ReminderError>;
}
