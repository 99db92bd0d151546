//! The operator's announced list rates (`RATES` / `ANNOUNCED#<family>#<day>`): one item per
//! family and day, replaced when announced again, read with one strongly consistent query.

use super::*;
use crate::domain::list_price::ListRate;
use crate::ports::RateStore;

const PK: &str = "RATES";
const ANNOUNCED: &str = "ANNOUNCED#";

fn rate_sk(family: &str, effective: chrono::NaiveDate) -> String {
    format!("{ANNOUNCED}{family}#{effective}")
}

#[async_trait]
impl RateStore for DynamoStore {
    async fn announce_rate(&self, rate: &ListRate) -> Result<(), StoreError> {
        let mut item = key(PK, rate_sk(&rate.family, rate.effective));
        item.insert("data".into(), json(rate));
        self.put(item, "an announced rate").await
    }

    async fn withdraw_rate(&self, family: &str, effective: chrono::NaiveDate) -> Result<bool, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(PK, rate_sk(family, effective))))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| store_err(&format!("the announced rate of {family} from {effective}"), e))?;
        Ok(out.attributes.is_some_and(|a| !a.is_empty()))
    }

    async fn announced_rates(&self) -> Result<Vec<ListRate>, StoreError> {
        let items = self.query_prefix(PK, ANNOUNCED, "the announced rates").await?;
        Ok(self.decode_each(&items, "announced rates", data))
    }
}
