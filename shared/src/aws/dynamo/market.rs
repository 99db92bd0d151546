//! The planner's memory of a region (`MARKET#<region>` / `MEMORY`), and which run asks the
//! region now (`MARKET#<region>` / `WATCH`).

use super::*;

/// How often a save is tried against other runs' saves before it gives up (the next run
/// saves again; a lost save costs questions asked again, never money).
const SAVE_ATTEMPTS: u32 = 4;

/// The planner's memory: one item per region, versioned. A save merges this run's changes into
/// the stored memory and writes it only if no other run saved in between (a conditional put on
/// the version), so two overlapping scans lose neither's answers.
#[async_trait]
impl MarketMemory for DynamoStore {
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError> {
        Ok(self.versioned_memory(region).await?.0)
    }

    async fn save_region_memory(
        &self,
        region: &Region,
        read: &RegionMemory,
        memory: &RegionMemory,
    ) -> Result<(), StoreError> {
        for _ in 0..SAVE_ATTEMPTS {
            let (stored, version) = self.versioned_memory(region).await?;
            let merged = memory.clone().merged(read, stored);
            let mut item = key(format!("MARKET#{region}"), "MEMORY");
            item.insert("data".into(), json(&merged));
            item.insert("version".into(), n(version.map_or(1, |v| v + 1)));
            let put = self.client.put_item().table_name(&self.table).set_item(Some(item));
            let put = match version {
                Some(v) => put.condition_expression("version = :v").expression_attribute_values(":v", n(v)),
                None => put.condition_expression("attribute_not_exists(pk)"),
            };
            match put.send().await.map_err(|e| store_err(&format!("market memory of {region}"), e)) {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict(_)) => {
                    tracing::info!(%region, "another run saved the market memory meanwhile: merging again");
                }
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Unavailable(format!("market memory of {region}: other runs kept saving; not saved this run")))
    }

    /// A conditional put: no claim, or one that ran out, or this run's own, or one ending past
    /// `MAX_REGION_CLAIM` from now (no run's). Times are the clock's epoch seconds.
    async fn claim_region(
        &self,
        region: &Region,
        run: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.put_region_claim(
            region,
            run,
            until.timestamp(),
            "attribute_not_exists(pk) OR #until < :now OR #run = :run OR #until > :latest",
            Some(now),
        )
        .await
    }

    /// A put that ends the claim at once, only if it is still this run's (no DeleteItem: the
    /// scan's role needs no more than it has).
    async fn release_region(&self, region: &Region, run: &str) -> Result<(), StoreError> {
        self.put_region_claim(region, run, 0, "#run = :run", None).await.map(|_| ())
    }
}

impl DynamoStore {
    /// Writes `run`'s claim of `region` until `until` (epoch seconds) if `condition` holds
    /// (`#run`/`:run` name the run, `#until`/`:now` the claim's end and `now`, when given);
    /// false when it does not.
    async fn put_region_claim(
        &self,
        region: &Region,
        run: &str,
        until: i64,
        condition: &str,
        now: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let mut item = key(format!("MARKET#{region}"), "WATCH");
        item.insert("run".into(), s(run));
        item.insert("until".into(), n(until));
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .expression_attribute_names("#run", "run")
            .expression_attribute_values(":run", s(run));
        if let Some(now) = now {
            put = put
                .expression_attribute_names("#until", "until")
                .expression_attribute_values(":now", n(now.timestamp()))
                .expression_attribute_values(":latest", n((now + crate::ports::MAX_REGION_CLAIM).timestamp()));
        }
        match put.send().await.map_err(|e| store_err(&format!("watch claim of {region}"), e)) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The region's memory and its version (`None`: never saved, or saved before versions).
    async fn versioned_memory(&self, region: &Region) -> Result<(RegionMemory, Option<u64>), StoreError> {
        let Some(item) = self.get(key(format!("MARKET#{region}"), "MEMORY")).await? else {
            return Ok((RegionMemory::default(), None));
        };
        let version = item.get("version").and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok());
        Ok((data(&item)?, version))
    }
}
