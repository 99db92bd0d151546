//! The last preflight (`STACK` / `PREFLIGHT`): one item, written by `capblock preflight`, read
//! by `capblock status`.

use super::*;
use crate::domain::preflight::Preflight;
use crate::ports::PreflightStore;

#[async_trait]
impl PreflightStore for DynamoStore {
    async fn save_preflight(&self, preflight: &Preflight) -> Result<(), StoreError> {
        let mut item = key("STACK", "PREFLIGHT");
        item.insert("data".into(), json(preflight));
        self.put(item, "the last preflight").await
    }

    async fn last_preflight(&self) -> Result<Option<Preflight>, StoreError> {
        self.get(key("STACK", "PREFLIGHT")).await?.map(|i| data(&i)).transpose()
    }
}
