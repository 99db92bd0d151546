//! The stack's alarms (`ALARM#<name>` / `STATE`, listed through the index under `ALARMS`): the
//! last state each one's state-change event reported.

use super::*;
use crate::domain::alarm::AlarmState;

const ALARMS: &str = "ALARMS";

#[async_trait]
impl AlarmStore for DynamoStore {
    async fn record_alarm(&self, state: &AlarmState) -> Result<bool, StoreError> {
        let mut item = key(format!("ALARM#{}", state.alarm), "STATE");
        item.insert("gsi1pk".into(), s(ALARMS));
        item.insert("gsi1sk".into(), s(&state.alarm));
        item.insert("at_ms".into(), n(state.at.timestamp_millis()));
        item.insert("data".into(), json(state));
        // EventBridge may deliver an older change after a newer one: the later state stays.
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR at_ms < :at")
            .expression_attribute_values(":at", n(state.at.timestamp_millis()))
            .send()
            .await;
        match put.map_err(|e| store_err(&format!("alarm {}", state.alarm), e)) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn alarms(&self) -> Result<Vec<AlarmState>, StoreError> {
        Ok(self.decode_each(&self.query_gsi(ALARMS, None).await?, "alarms", data))
    }
}
