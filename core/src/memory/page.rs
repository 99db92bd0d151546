//! The team page's bucket in memory: each object's last body, and every write in order (a test
//! counts the publishings, not only what is there now).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use crate::ports::{PagePublisher, PublishError};

/// Held to the S3 adapter by `crate::contract::page`.
#[derive(Default)]
pub struct MemoryPages {
    objects: Mutex<BTreeMap<String, String>>,
    writes: Mutex<Vec<String>>,
    /// The bucket was deleted: every write fails, as S3's NoSuchBucket.
    gone: AtomicBool,
}

impl MemoryPages {
    /// The object `key`'s body as last written.
    pub fn object(&self, key: &str) -> Option<String> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Deletes the bucket and what it holds: later writes fail.
    pub fn delete_bucket(&self) {
        self.gone.store(true, Ordering::SeqCst);
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The keys written, one per publishing, in order.
    pub fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl PagePublisher for MemoryPages {
    async fn publish(&self, key: &str, html: &str) -> Result<(), PublishError> {
        if self.gone.load(Ordering::SeqCst) {
            let message = "NoSuchBucket: The specified bucket does not exist".into();
            return Err(PublishError { operation: "PutObject", key: key.to_string(), message });
        }
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_string(), html.to_string());
        self.writes.lock().unwrap_or_else(|p| p.into_inner()).push(key.to_string());
        Ok(())
    }
}
