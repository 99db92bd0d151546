//! The stack's alarm states, kept from CloudWatch's state-change events (see `domain::alarm`),
//! for `capblock status`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::on_capacity_event::{Handled, ignored};
use crate::domain::alarm::{self, AlarmValue};
use crate::domain::ids::prefix;
use crate::ports::{AlarmStore, StoreError};

/// Records the state an alarm event reports; an event that is not one is acknowledged and
/// dropped (with why), like every unusable event.
/// `account`: the function's own (from the ARN Lambda invoked it with); an event of another
/// account is not about this stack's alarms. `now`: the function's clock. A state is kept only if
/// later than the one stored, so its time is never later than the clock: a far-future `time`
/// would pin the alarm's state for good.
pub async fn record<S: AlarmStore + ?Sized>(
    store: &S,
    input: &Value,
    account: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Handled, StoreError> {
    let event_id = crate::domain::capacity_event::event_id_of(input);
    let from = input.get("account").and_then(Value::as_str);
    if let Some(own) = account
        && from != Some(own)
    {
        let from = prefix(from.unwrap_or("(none)"));
        tracing::warn!(event = "bad_input", kind = "other-account", %from, own, "an alarm event of another account: ignored");
        return Ok(ignored(event_id, "other-account", format!("the event comes from account {from:?}, not {own}")));
    }
    let mut state = match alarm::parse(input) {
        Ok(s) => s,
        Err(e) => return Ok(ignored(event_id, e.kind(), e.to_string())),
    };
    state.at = state.at.min(now);
    let kept = store.record_alarm(&state).await?;
    if state.value == AlarmValue::Alarm {
        tracing::warn!(event = "alarm_state", alarm = %state.alarm, state = state.value.as_str(), kept, reason = %state.reason, "a capblock alarm fired");
    } else {
        tracing::info!(event = "alarm_state", alarm = %state.alarm, state = state.value.as_str(), kept, "alarm state");
    }
    Ok(Handled::Alarm { event_id, alarm: state.alarm, state: state.value.as_str().to_string(), kept })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::memory::MemoryTable;

    fn change(value: &str, time: &str, account: &str) -> Value {
        let mut v: Value = serde_json::from_str(include_str!("../domain/alarm/state-change.json")).unwrap();
        v["time"] = json!(time);
        v["account"] = json!(account);
        v["detail"]["state"]["value"] = json!(value);
        v
    }

    const OWN: &str = "123456789012";

    #[tokio::test]
    async fn another_accounts_alarm_event_changes_nothing() {
        let store = MemoryTable::default();
        let now = "2026-12-02T18:00:00Z".parse().unwrap();
        let forged = change("ALARM", "2026-12-02T17:00:00Z", "999999999999");
        let handled = record(&store, &forged, Some(OWN), now).await.unwrap();
        assert!(matches!(handled, Handled::Ignored { ref kind, .. } if kind == "other-account"), "{handled:?}");
        assert!(store.alarms().await.unwrap().is_empty());
        let own = change("ALARM", "2026-12-02T17:00:00Z", OWN);
        assert!(matches!(record(&store, &own, Some(OWN), now).await.unwrap(), Handled::Alarm { kept: true, .. }));
    }

    #[tokio::test]
    async fn a_far_future_time_pins_no_state() {
        let store = MemoryTable::default();
        let now: DateTime<Utc> = "2026-12-02T18:00:00Z".parse().unwrap();
        // An OK "from 2099" would otherwise outrank every later genuine event.
        record(&store, &change("OK", "2099-01-01T00:00:00Z", OWN), Some(OWN), now).await.unwrap();
        assert_eq!(store.alarms().await.unwrap()[0].at, now, "clamped to the clock");
        let later = now + chrono::Duration::minutes(5);
        let fired = record(&store, &change("ALARM", "2026-12-02T18:04:00Z", OWN), Some(OWN), later).await.unwrap();
        assert!(matches!(fired, Handled::Alarm { kept: true, .. }), "{fired:?}");
        assert_eq!(store.alarms().await.unwrap()[0].value, AlarmValue::Alarm);
    }
}
