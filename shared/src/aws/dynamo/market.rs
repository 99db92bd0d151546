//! The planner's memory of a region (`MARKET#<region>` / `MEMORY`).

use super::*;

/// The planner's memory: one item per region, rewritten whole by each scan. Two overlapping
/// scans may overwrite each other's update; the cost is a question asked again.
#[async_trait]
impl MarketMemory for DynamoStore {
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError> {
        Ok(self
            .get(key(format!("MARKET#{region}"), "MEMORY"))
            .await?
            .map(|i| data(&i))
            .transpose()?
            .unwrap_or_default())
    }

    async fn save_region_memory(&self, region: &Region, memory: &RegionMemory) -> Result<(), StoreError> {
        let mut item = key(format!("MARKET#{region}"), "MEMORY");
        item.insert("data".into(), json(memory));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| store_err(&format!("market memory of {region}"), e))?;
        Ok(())
    }
}
