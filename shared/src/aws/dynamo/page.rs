//! The team page's claim (`STACK` / `PAGE`): the hour whose page a tracker run publishes, as
//! `hour` (epoch seconds of its start). A put conditional on an earlier hour, so of the runs in
//! one hour exactly one publishes, and a late retry of an earlier hour never does.

use super::*;
use crate::ports::PageClaims;

const PK: &str = "STACK";
const SK: &str = "PAGE";

#[async_trait]
impl PageClaims for DynamoStore {
    async fn claim_page_hour(&self, hour: DateTime<Utc>) -> Result<bool, StoreError> {
        let mut item = key(PK, SK);
        item.insert("hour".into(), n(hour.timestamp()));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR #hour < :hour")
            // `hour` is not a DynamoDB reserved word today; the name is kept out of the
            // expression all the same, so a future reserved word cannot break the claim.
            .expression_attribute_names("#hour", "hour")
            .expression_attribute_values(":hour", n(hour.timestamp()))
            .send()
            .await;
        match put.map_err(|e| store_err("the team page's hour", e)) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release_page_hour(&self, hour: DateTime<Utc>) -> Result<(), StoreError> {
        let delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(PK, SK)))
            .condition_expression("#hour = :hour")
            .expression_attribute_names("#hour", "hour")
            .expression_attribute_values(":hour", n(hour.timestamp()))
            .send()
            .await;
        match delete.map_err(|e| store_err("the team page's hour", e)) {
            // Another hour's claim (or none): not this run's to give back.
            Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
