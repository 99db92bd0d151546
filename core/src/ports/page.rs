//! The team page (`app::publish`): where the tracker writes it (S3 when deployed) and the hour
//! whose publishing a run has claimed in the store.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// A page that could not be written: the object's key and what the service answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} of {key} failed: {message}")]
pub struct PublishError {
    /// The call that failed, as the service names it (`PutObject`).
    pub operation: &'static str,
    pub key: String,
    pub message: String,
}

#[async_trait]
pub trait PagePublisher: Send + Sync {
    /// Writes `html` as the object `key`, replacing what was there: readers always get one
    /// whole page, the last one written.
    async fn publish(&self, key: &str, html: &str) -> Result<(), PublishError>;
}

#[async_trait]
pub trait PageClaims: Send + Sync {
    /// Claims the publishing of the hour that starts at `hour`: true for the one caller that
    /// claims it first, false when this hour (or a later one) is claimed already. A condition
    /// in the store, so overlapping or retried trackers publish once an hour.
    async fn claim_page_hour(&self, hour: DateTime<Utc>) -> Result<bool, StoreError>;

    /// Gives back this run's claim of `hour` after its publishing failed, so a later run of the
    /// same hour tries again; leaves any other hour's claim alone.
    async fn release_page_hour(&self, hour: DateTime<Utc>) -> Result<(), StoreError>;
}
