//! CloudWatch's "CloudWatch Alarm State Change" events, which EventBridge delivers to
//! on-capacity-event for the stack's own alarms. capblock keeps the last state of each, so
//! `capblock status` can say which alarms are in ALARM without calling CloudWatch
//! (DescribeAlarms is not reachable on the local stack: the Rust SDK speaks RPC v2 CBOR to
//! CloudWatch, which moto does not answer, getmoto/moto#9195). Example payload: `alarm/`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::capacity_event::IncomingError;
use super::ids::prefix;

pub const SOURCE: &str = "aws.cloudwatch";
pub const STATE_CHANGE: &str = "CloudWatch Alarm State Change";

/// CloudWatch's alarm states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlarmValue {
    Ok,
    Alarm,
    InsufficientData,
}

impl AlarmValue {
    pub fn as_str(self) -> &'static str {
        match self {
            AlarmValue::Ok => "OK",
            AlarmValue::Alarm => "ALARM",
            AlarmValue::InsufficientData => "INSUFFICIENT_DATA",
        }
    }
}

/// One alarm's new state, as of the event's time (when CloudWatch changed it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmState {
    pub alarm: String,
    pub value: AlarmValue,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// Whether `v` is an event from CloudWatch (whatever its detail-type): those are this module's.
pub fn is_cloudwatch_event(v: &Value) -> bool {
    v.get("source").and_then(Value::as_str) == Some(SOURCE)
}

/// The alarm state an EventBridge event reports; other CloudWatch events are refused by name.
pub fn parse(v: &Value) -> Result<AlarmState, IncomingError> {
    let detail_type = v.get("detail-type").and_then(Value::as_str).ok_or(IncomingError::MissingField("detail-type"))?;
    if detail_type != STATE_CHANGE {
        return Err(IncomingError::UnknownDetailType(prefix(detail_type)));
    }
    let at = v
        .get("time")
        .and_then(Value::as_str)
        .ok_or(IncomingError::MissingField("time"))?
        .parse::<DateTime<Utc>>()
        .map_err(|e| IncomingError::BadField { field: "time", problem: e.to_string() })?;
    let detail = v.get("detail").ok_or(IncomingError::MissingField("detail"))?;
    let alarm =
        detail.get("alarmName").and_then(Value::as_str).ok_or(IncomingError::MissingField("detail.alarmName"))?;
    // CloudWatch's limit on alarm names; anything longer is not one of its events.
    if alarm.is_empty() || alarm.len() > 255 {
        return Err(IncomingError::BadField { field: "detail.alarmName", problem: "not 1-255 characters".into() });
    }
    let state = detail.get("state").ok_or(IncomingError::MissingField("detail.state"))?;
    let value = state.get("value").ok_or(IncomingError::MissingField("detail.state.value"))?;
    let value = AlarmValue::deserialize(value).map_err(|_| IncomingError::BadField {
        field: "detail.state.value",
        problem: format!("{value} is not a state"),
    })?;
    let reason = state.get("reason").and_then(Value::as_str).unwrap_or_default();
    Ok(AlarmState { alarm: alarm.to_string(), value, reason: reason.chars().take(1024).collect(), at })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn example() -> Value {
        serde_json::from_str(include_str!("alarm/state-change.json")).unwrap()
    }

    #[test]
    fn the_documented_event_gives_the_alarm_its_state_and_time() {
        let v = example();
        assert!(is_cloudwatch_event(&v));
        let s = parse(&v).unwrap();
        assert_eq!((s.alarm.as_str(), s.value), ("capblock-PurchaseFailedAlarm", AlarmValue::Alarm));
        assert_eq!(s.at, "2026-12-02T17:04:40Z".parse::<DateTime<Utc>>().unwrap());
        assert!(s.reason.starts_with("Threshold Crossed"));
        for (text, value) in
            [("OK", AlarmValue::Ok), ("INSUFFICIENT_DATA", AlarmValue::InsufficientData), ("ALARM", AlarmValue::Alarm)]
        {
            let mut v = example();
            v["detail"]["state"]["value"] = json!(text);
            assert_eq!(parse(&v).unwrap().value, value);
            assert_eq!(value.as_str(), text);
        }
    }

    #[test]
    fn other_events_and_broken_ones_are_named_errors() {
        let mut other = example();
        other["detail-type"] = json!("CloudWatch Alarm Configuration Change");
        assert_eq!(parse(&other).unwrap_err().kind(), "unknown-detail-type");
        let mut v = example();
        v["detail"]["state"]["value"] = json!("FIRE");
        assert_eq!(parse(&v).unwrap_err().kind(), "bad-field");
        let mut v = example();
        v["detail"].as_object_mut().unwrap().remove("alarmName");
        assert_eq!(parse(&v).unwrap_err(), IncomingError::MissingField("detail.alarmName"));
        let mut v = example();
        v["time"] = json!("yesterday");
        assert_eq!(parse(&v).unwrap_err().kind(), "bad-field");
        assert!(!is_cloudwatch_event(&json!({"source": "aws.ec2"})));
    }
}
