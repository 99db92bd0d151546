//! Offerings `capblock offerings` showed (`SEEN#<offering>` / `OFFERING`), kept an hour so that
//! `capblock buy <offering-id>` knows the block the id names, even where EC2 names a block anew
//! in every answer (the purchase then re-checks it by what it is).

use super::*;
use crate::domain::offering::Offering;
use crate::ports::SeenOfferings;

const SK: &str = "OFFERING";
/// The index partition of the seen offerings, sorted by id: a short id is a prefix of it.
const SEEN: &str = "SEEN";

fn seen_pk(id: &str) -> String {
    format!("SEEN#{id}")
}

#[async_trait]
impl SeenOfferings for DynamoStore {
    async fn remember_offerings(&self, offerings: &[Offering], until: DateTime<Utc>) -> Result<usize, StoreError> {
        let items = offerings
            .iter()
            .map(|o| {
                let mut item = key(seen_pk(&o.id), SK);
                item.insert("data".into(), json(o));
                item.insert("ttl".into(), n(until.timestamp()));
                item.insert("gsi1pk".into(), s(SEEN));
                item.insert("gsi1sk".into(), s(&o.id));
                item
            })
            .collect();
        self.batch_put(items, "seen offerings").await
    }

    async fn seen_offering(&self, id: &str, now: DateTime<Utc>) -> Result<Option<Offering>, StoreError> {
        let Some(item) = self.get(key(seen_pk(id), SK)).await? else { return Ok(None) };
        // DynamoDB deletes expired items within days, not at once: the time is checked here.
        let until = item.get("ttl").and_then(|v| v.as_n().ok()).and_then(|t| t.parse::<i64>().ok());
        if until.is_none_or(|t| t <= now.timestamp()) {
            return Ok(None);
        }
        data(&item).map(Some)
    }

    async fn seen_offerings_starting(&self, prefix: &str, now: DateTime<Utc>) -> Result<Vec<Offering>, StoreError> {
        let mut found = Vec::new();
        for item in self.query_gsi(SEEN, Some(prefix)).await? {
            let until = item.get("ttl").and_then(|v| v.as_n().ok()).and_then(|t| t.parse::<i64>().ok());
            if until.is_some_and(|t| t > now.timestamp()) {
                found.push(data(&item)?);
            }
        }
        Ok(found)
    }
}
