//! The stack's settings (`STACK` / `SETTINGS`): one item, written by the functions from their
//! configuration when it differs from what is stored, read by the CLI. Beside it, one item per
//! function (`STACK` / `FUNCTION#<kind>`): the name Lambda runs it under, for preflight to invoke.

use super::*;
use crate::domain::stack::StoredSettings;
use crate::ports::{FunctionDirectory, SettingsStore};

const PK: &str = "STACK";
const SK: &str = "SETTINGS";

#[async_trait]
impl SettingsStore for DynamoStore {
    async fn store_settings(&self, settings: &StoredSettings) -> Result<bool, StoreError> {
        // What the settings say, without when they were written: equal text, nothing to write
        // (so `written_at` is when the stack last changed them).
        let said = json(&(&settings.stack, &settings.alerts_topic));
        let mut item = key(PK, SK);
        item.insert("said".into(), said.clone());
        item.insert("data".into(), json(settings));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR said <> :said")
            .expression_attribute_values(":said", said)
            .send()
            .await;
        match put.map_err(|e| store_err("the stack's settings", e)) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn stored_settings(&self) -> Result<Option<StoredSettings>, StoreError> {
        self.get(key(PK, SK)).await?.map(|i| data(&i)).transpose()
    }
}

const FUNCTION: &str = "FUNCTION#";

#[async_trait]
impl FunctionDirectory for DynamoStore {
    async fn record_function(&self, kind: &str, name: &str) -> Result<(), StoreError> {
        let mut item = key(PK, format!("{FUNCTION}{kind}"));
        item.insert("name".into(), s(name));
        self.put(item, "a function's name").await
    }

    async fn functions(&self) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
        let items = self.query_prefix(PK, FUNCTION, "the functions' names").await?;
        Ok(items
            .iter()
            .filter_map(|i| {
                let kind = i.get("sk")?.as_s().ok()?.strip_prefix(FUNCTION)?.to_string();
                Some((kind, i.get("name")?.as_s().ok()?.clone()))
            })
            .collect())
    }
}
