//! The stack's alarm states, kept from CloudWatch's state-change events (see `domain::alarm`),
//! for `capblock status`.

use serde_json::Value;

use super::events::{Handled, ignored};
use crate::domain::alarm::{self, AlarmValue};
use crate::ports::{AlarmStore, StoreError};

/// Records the state an alarm event reports; an event that is not one is acknowledged and
/// dropped (with why), like every unusable event.
pub async fn record<S: AlarmStore + ?Sized>(store: &S, input: &Value) -> Result<Handled, StoreError> {
    let event_id = crate::domain::events::event_id_of(input);
    let state = match alarm::parse(input) {
        Ok(s) => s,
        Err(e) => return Ok(ignored(event_id, e.kind(), e.to_string())),
    };
    let kept = store.record_alarm(&state).await?;
    if state.value == AlarmValue::Alarm {
        tracing::warn!(event = "alarm_state", alarm = %state.alarm, state = state.value.as_str(), kept, reason = %state.reason, "a capblock alarm fired");
    } else {
        tracing::info!(event = "alarm_state", alarm = %state.alarm, state = state.value.as_str(), kept, "alarm state");
    }
    Ok(Handled::Alarm { event_id, alarm: state.alarm, state: state.value.as_str().to_string(), kept })
}
