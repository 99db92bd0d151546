//! What arrives at on-capacity-event, parsed into typed triggers. Pure: any JSON goes in, a
//! trigger or a typed error naming the problem comes out; nothing here panics or reads a clock.
//!
//! Two shapes are accepted: the EventBridge envelope of EC2's Capacity Block events (both of
//! the detail-type spellings AWS has documented), and capblock's own reminder payload sent by
//! the one-time EventBridge Scheduler schedules.

// `aws_lambda_events` is a types-only crate (serde structs, no SDK client): using its envelope
// keeps the domain free of AWS calls while matching the exact wire shape.
use aws_lambda_events::eventbridge::EventBridgeEvent;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ids::{Region, is_instance_id, is_reservation_id, prefix};

/// The `source` of capblock's reminder payload.
pub const REMINDER_SOURCE: &str = "capblock.reminder";
/// The `source` of EC2's events.
pub const EC2_SOURCE: &str = "aws.ec2";

const DELIVERED: [&str; 2] = ["Capacity Block Reservation Delivered", "Capacity Block Delivered"];
const EXPIRATION_WARNING: [&str; 2] =
    ["Capacity Block Reservation Expiration Warning", "Capacity Block Expiration Warning"];
const INSTANCE_INTERRUPTION: &str = "EC2 Capacity Reservation Instance Interruption Warning";

/// Why an input is not something capblock acts on. The function acknowledges all of these
/// (retrying would not change the input); `kind` names them in the logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IncomingError {
    #[error("the input is not a JSON object")]
    NotAnObject,
    #[error("the input is neither an EventBridge event nor a capblock reminder")]
    UnknownShape,
    #[error("events from source {0:?} are not handled")]
    UnknownSource(String),
    #[error("detail-type {0:?} is not handled")]
    UnknownDetailType(String),
    #[error("the event envelope does not parse: {0}")]
    BadEnvelope(String),
    #[error("field {0} is missing")]
    MissingField(&'static str),
    #[error("field {field} is invalid: {problem}")]
    BadField { field: &'static str, problem: String },
}

impl IncomingError {
    pub fn kind(&self) -> &'static str {
        match self {
            IncomingError::NotAnObject => "not-an-object",
            IncomingError::UnknownShape => "unknown-shape",
            IncomingError::UnknownSource(_) => "unknown-source",
            IncomingError::UnknownDetailType(_) => "unknown-detail-type",
            IncomingError::BadEnvelope(_) => "bad-envelope",
            IncomingError::MissingField(_) => "missing-field",
            IncomingError::BadField { .. } => "bad-field",
        }
    }
}

/// What happened, with the facts each kind carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "trigger", rename_all = "kebab-case")]
pub enum Trigger {
    /// The block became active.
    Delivered { reservation_id: String, end: DateTime<Utc> },
    /// AWS's warning, 40 minutes before the end.
    ExpirationWarning { reservation_id: String, end: DateTime<Utc> },
    /// One instance of a block is about to be terminated.
    InstanceInterruption {
        instance_id: String,
        termination_time: DateTime<Utc>,
        /// A reservation id if the event's resources name one (the examples name the instance).
        reservation_hint: Option<String>,
    },
    /// capblock's own reminder, `lead_minutes` before the termination time.
    Reminder { reservation_id: String, lead_minutes: u32, fire_at: DateTime<Utc> },
}

/// One parsed input: where, when (the instant the run is for) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Incoming {
    /// EventBridge's event id, or `reminder:<reservation>:<lead>` for reminders.
    pub event_id: String,
    pub region: Region,
    pub time: DateTime<Utc>,
    pub trigger: Trigger,
    /// The AWS account an EC2 event comes from (EventBridge's `account`); `None` for capblock's
    /// own reminders. The handler ignores events from any account but its own.
    pub account: Option<String>,
}

/// capblock's reminder payload, as the schedules send it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReminderPayload {
    pub source: String,
    pub reservation_id: String,
    pub region: String,
    pub lead_minutes: u32,
    pub fire_at: DateTime<Utc>,
}

/// How late an input may reach the function: Lambda retries an asynchronous invocation for
/// at most 6 hours (its maximum event age). An input older than that on the clock is not a
/// retry but a replay or a forgery, and announcing it would suppress the genuine one.
pub const MAX_EVENT_AGE: Duration = Duration::hours(6);
/// How far ahead of the clock an input's time may be: clocks differ by seconds. A reminder
/// whose time is ahead of the clock would warn workloads early (a forged schedule).
pub const MAX_EVENT_AHEAD: Duration = Duration::minutes(5);

/// How long before a block's end (EC2's) an expiration warning may be announced. EC2 sends it
/// 40 minutes before the end (the user guide's "Capacity Block Expiration Warning"); an hour
/// leaves room for a late clock. A warning the clock finds days early is forged: announcing it
/// would tell the workloads to stop and suppress the genuine warning (once per milestone).
pub const EXPIRATION_WARNING_WITHIN: Duration = Duration::minutes(60);

/// Whether an expiration warning for a block ending at `end` (EC2's end, not the event's) is
/// due at the clock's `now`: within `EXPIRATION_WARNING_WITHIN` of the end, and before it.
pub fn expiration_is_near(end: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    let left = end - now;
    left > Duration::zero() && left <= EXPIRATION_WARNING_WITHIN
}

/// Why an input is refused though it parses: its kind (for the logs) and the reason.
pub type Refusal = (&'static str, String);

/// Whether an input's time fits the clock's `now`: not older than [`MAX_EVENT_AGE`], not ahead
/// by more than [`MAX_EVENT_AHEAD`]. A reminder's time is its `fire_at`, so one sent early is
/// refused here.
pub fn timely(incoming: &Incoming, now: DateTime<Utc>) -> Result<(), Refusal> {
    if incoming.time > now + MAX_EVENT_AHEAD {
        return Err((
            "ahead-of-the-clock",
            format!("the input's time {} is ahead of the clock ({now}) by more than 5 minutes", incoming.time),
        ));
    }
    if incoming.time < now - MAX_EVENT_AGE {
        return Err((
            "too-old",
            format!("the input's time {} is more than 6 hours before the clock ({now})", incoming.time),
        ));
    }
    Ok(())
}

/// Whether a reminder's lead is one this stack schedules (`leads`); any other input is not a
/// reminder and passes.
pub fn lead_is_configured(trigger: &Trigger, leads: &[Duration]) -> Result<(), Refusal> {
    match trigger {
        Trigger::Reminder { lead_minutes, .. }
            if !leads.iter().any(|l| l.num_minutes() == i64::from(*lead_minutes)) =>
        {
            let known: Vec<String> = leads.iter().map(|l| l.num_minutes().to_string()).collect();
            Err((
                "unknown-lead",
                format!("a {lead_minutes}-minute reminder; this stack's leads are {} minutes", known.join(", ")),
            ))
        }
        _ => Ok(()),
    }
}

/// The longest EventBridge event id accepted (they are UUIDs, 36 characters).
const MAX_EVENT_ID_LEN: usize = 128;

/// The event id of any input, for logging even what does not parse (cut to its first
/// characters: the input may be hostile).
pub fn event_id_of(v: &Value) -> Option<String> {
    v.get("id").and_then(Value::as_str).map(prefix)
}

/// Parses any input into an `Incoming`.
pub fn parse(v: &Value) -> Result<Incoming, IncomingError> {
    let obj = v.as_object().ok_or(IncomingError::NotAnObject)?;
    if obj.contains_key("detail-type") {
        return parse_eventbridge(v);
    }
    match obj.get("source").and_then(Value::as_str) {
        Some(REMINDER_SOURCE) => parse_reminder(v),
        Some(other) if !obj.contains_key("reservation_id") => Err(IncomingError::UnknownSource(prefix(other))),
        _ => Err(IncomingError::UnknownShape),
    }
}

fn parse_reminder(v: &Value) -> Result<Incoming, IncomingError> {
    // Field by field, so the error names the field rather than serde's position.
    let text = |field: &'static str| -> Result<&str, IncomingError> {
        v.get(field)
            .ok_or(IncomingError::MissingField(field))?
            .as_str()
            .ok_or(IncomingError::BadField { field, problem: "not a string".into() })
    };
    let reservation_id = reservation_id(text("reservation_id")?, "reservation_id")?;
    let region = region(text("region")?)?;
    let lead = v.get("lead_minutes").ok_or(IncomingError::MissingField("lead_minutes"))?;
    let lead_minutes = lead.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| IncomingError::BadField {
        field: "lead_minutes",
        problem: format!("{lead} is not a whole number of minutes"),
    })?;
    let fire_at = timestamp(text("fire_at")?, "fire_at")?;
    Ok(Incoming {
        event_id: format!("reminder:{reservation_id}:{lead_minutes}m"),
        region,
        time: fire_at,
        trigger: Trigger::Reminder { reservation_id, lead_minutes, fire_at },
        account: None,
    })
}

fn parse_eventbridge(v: &Value) -> Result<Incoming, IncomingError> {
    let e: EventBridgeEvent<Value> =
        serde_json::from_value(v.clone()).map_err(|e| IncomingError::BadEnvelope(e.to_string()))?;
    if e.source != EC2_SOURCE {
        return Err(IncomingError::UnknownSource(prefix(&e.source)));
    }
    let dt = e.detail_type.as_str();
    let known = DELIVERED.contains(&dt) || EXPIRATION_WARNING.contains(&dt) || dt == INSTANCE_INTERRUPTION;
    if !known {
        return Err(IncomingError::UnknownDetailType(prefix(&e.detail_type)));
    }
    let event_id = e.id.clone().ok_or(IncomingError::MissingField("id"))?;
    if event_id.len() > MAX_EVENT_ID_LEN || event_id.chars().any(char::is_control) {
        return Err(IncomingError::BadField {
            field: "id",
            problem: format!("{:?} is not an EventBridge event id", prefix(&event_id)),
        });
    }
    let region = region(e.region.as_deref().ok_or(IncomingError::MissingField("region"))?)?;
    let time = e.time.ok_or(IncomingError::MissingField("time"))?;
    let detail =
        e.detail.as_object().ok_or(IncomingError::BadField { field: "detail", problem: "not an object".into() })?;
    let text = |field: &'static str| -> Result<&str, IncomingError> {
        detail
            .get(field)
            .ok_or(IncomingError::MissingField(field))?
            .as_str()
            .ok_or(IncomingError::BadField { field, problem: "not a string".into() })
    };
    let trigger = if dt == INSTANCE_INTERRUPTION {
        let instance_id = text("instance-id")?;
        if !is_instance_id(instance_id) {
            return Err(IncomingError::BadField {
                field: "instance-id",
                problem: format!("{:?} is not an instance id (i- and 8 or 17 hex digits)", prefix(instance_id)),
            });
        }
        Trigger::InstanceInterruption {
            instance_id: instance_id.to_string(),
            termination_time: timestamp(text("instance-termination-time")?, "instance-termination-time")?,
            reservation_hint: e.resources.iter().flatten().find_map(|arn| reservation_in_arn(arn)),
        }
    } else {
        let reservation_id = reservation_id(text("capacity-reservation-id")?, "capacity-reservation-id")?;
        let end = timestamp(text("end-date")?, "end-date")?;
        if DELIVERED.contains(&dt) {
            Trigger::Delivered { reservation_id, end }
        } else {
            Trigger::ExpirationWarning { reservation_id, end }
        }
    };
    let account = Some(e.account.clone().ok_or(IncomingError::MissingField("account"))?);
    Ok(Incoming { event_id, region, time, trigger, account })
}

/// `arn:aws:ec2:<region>:<account>:capacity-reservation/cr-...` -> `cr-...`.
pub fn reservation_in_arn(arn: &str) -> Option<String> {
    arn.rsplit_once(":capacity-reservation/").map(|(_, id)| id.to_string()).filter(|id| is_reservation_id(id))
}

fn reservation_id(s: &str, field: &'static str) -> Result<String, IncomingError> {
    if is_reservation_id(s) {
        Ok(s.to_string())
    } else {
        Err(IncomingError::BadField {
            field,
            problem: format!("{:?} is not a reservation id (cr- and 17 hex digits)", prefix(s)),
        })
    }
}

fn region(s: &str) -> Result<Region, IncomingError> {
    s.parse().map_err(|e: super::ids::IdError| IncomingError::BadField { field: "region", problem: e.to_string() })
}

fn timestamp(s: &str, field: &'static str) -> Result<DateTime<Utc>, IncomingError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| IncomingError::BadField { field, problem: format!("{:?}: {e}", prefix(s)) })
}

#[cfg(test)]
mod tests;
