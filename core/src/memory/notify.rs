//! SNS topics and EventBridge Scheduler in memory: what was published, and which blocks have
//! reminders.

use std::collections::BTreeSet;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::block::Block;
use crate::ports::*;

/// Every message published, by topic, in order.
#[derive(Default)]
pub struct MemoryNotifier {
    published: Mutex<Vec<(Topic, Message)>>,
}

impl MemoryNotifier {
    pub fn published(&self) -> Vec<(Topic, Message)> {
        self.published.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Notifier for MemoryNotifier {
    async fn publish(&self, topic: Topic, message: &Message) -> Result<(), NotifyError> {
        self.published.lock().unwrap_or_else(|p| p.into_inner()).push((topic, message.clone()));
        Ok(())
    }
}

/// The blocks that have reminder schedules now.
#[derive(Default)]
pub struct MemoryReminders {
    scheduled: Mutex<BTreeSet<String>>,
}

impl MemoryReminders {
    pub fn scheduled(&self) -> BTreeSet<String> {
        self.scheduled.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Reminders for MemoryReminders {
    async fn sync(&self, block: &Block, _: DateTime<Utc>) -> Result<(), ReminderError> {
        self.scheduled.lock().unwrap_or_else(|p| p.into_inner()).insert(block.reservation_id.clone());
        Ok(())
    }
    async fn clear(&self, block: &Block) -> Result<(), ReminderError> {
        self.scheduled.lock().unwrap_or_else(|p| p.into_inner()).remove(&block.reservation_id);
        Ok(())
    }
}
