//! SNS topics and EventBridge Scheduler in memory: what was published, and which blocks have
//! reminders.

use std::collections::BTreeSet;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::block::Block;
use crate::ports::*;

/// Every message published, by topic, in order. It refuses what SNS's Publish refuses (held to
/// the SNS adapter by `crate::contract::notify`): a topic deleted, a String attribute without a
/// value, a message over 256 KiB.
#[derive(Default)]
pub struct MemoryNotifier {
    published: Mutex<Vec<(Topic, Message)>>,
    deleted: Mutex<Vec<Topic>>,
}

impl MemoryNotifier {
    pub fn published(&self) -> Vec<(Topic, Message)> {
        self.published.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Deletes `topic`: every later publish to it fails, as SNS's NotFound.
    pub fn delete_topic(&self, topic: Topic) {
        self.deleted.lock().unwrap_or_else(|p| p.into_inner()).push(topic);
    }

    /// Why SNS would refuse `message` on `topic`, if it would.
    fn refusal(&self, topic: Topic, message: &Message) -> Option<String> {
        if self.deleted.lock().unwrap_or_else(|p| p.into_inner()).contains(&topic) {
            return Some("NotFound: Topic does not exist".into());
        }
        if message.body.len() > MAX_MESSAGE_BYTES {
            return Some("InvalidParameter: Message too long".into());
        }
        let empty = message.attributes.iter().find(|(_, v)| v.is_empty());
        empty.map(|(k, _)| format!("InvalidParameterValue: the message attribute '{k}' must contain a non-empty value"))
    }
}

#[async_trait]
impl Notifier for MemoryNotifier {
    async fn publish(&self, topic: Topic, message: &Message) -> Result<(), NotifyError> {
        if let Some(message) = self.refusal(topic, message) {
            return Err(NotifyError::Failed { topic: format!("{topic:?}"), message });
        }
        self.published.lock().unwrap_or_else(|p| p.into_inner()).push((topic, message.clone()));
        Ok(())
    }
}

/// What the tracker asked of the reminders: ("sync" or "clear", reservation id, the block's
/// end then).
pub type ReminderCall = (String, String, DateTime<Utc>);

/// The blocks that have reminder schedules now, and every sync and clear asked, in order.
#[derive(Default)]
pub struct MemoryReminders {
    scheduled: Mutex<BTreeSet<String>>,
    asked: Mutex<Vec<ReminderCall>>,
}

impl MemoryReminders {
    pub fn scheduled(&self) -> BTreeSet<String> {
        self.scheduled.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every sync and clear asked, in order.
    pub fn calls(&self) -> Vec<ReminderCall> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn ask(&self, what: &str, block: &Block) {
        let asked = (what.to_string(), block.reservation_id.clone(), block.end);
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).push(asked);
    }
}

#[async_trait]
impl Reminders for MemoryReminders {
    async fn sync(&self, block: &Block, _: DateTime<Utc>) -> Result<(), ReminderError> {
        self.ask("sync", block);
        self.scheduled.lock().unwrap_or_else(|p| p.into_inner()).insert(block.reservation_id.clone());
        Ok(())
    }
    async fn clear(&self, block: &Block) -> Result<(), ReminderError> {
        self.ask("clear", block);
        self.scheduled.lock().unwrap_or_else(|p| p.into_inner()).remove(&block.reservation_id);
        Ok(())
    }
}
