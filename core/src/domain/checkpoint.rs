//! Checkpoint notices: what a workload on a block is told before its instances are terminated,
//! and the milestones that make each announcement happen once. Pure: `now` is an argument.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;

use super::block::Block;
use super::health::HealthChange;
use super::lifecycle::termination_time;
use super::message_kind::MessageKind;
use super::money::Money;
use super::outbox_key::{OutboxKey, OutboxKeyError};
use super::usage::IdleNews;

/// One announcement-worthy moment of a block. Its `key` is the outbox identity: everything
/// that maps to the same key (duplicate deliveries, both detail-type spellings, a retry) is
/// announced once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "milestone", rename_all = "kebab-case")]
pub enum CheckpointMilestone {
    Delivered,
    /// capblock's reminder `lead_minutes` before the termination time of the block ending at
    /// `end`. The end is part of the identity: after an extension the reminders are due again.
    Reminder {
        lead_minutes: u32,
        end: DateTime<Utc>,
    },
    /// AWS's own warning, 40 minutes before the end. Distinct from the 30-minute reminder: the
    /// two say different things at different moments.
    AwsExpirationWarning,
    Interruption {
        instance_id: String,
    },
}

impl CheckpointMilestone {
    /// The outbox milestone for the alerts topic.
    pub fn key(&self) -> String {
        match self {
            // The tracker's `Milestone::Active` writes the same key: whichever sees the block
            // active first announces it, and the other finds it taken.
            CheckpointMilestone::Delivered => MessageKind::Delivered.key_with(None),
            CheckpointMilestone::Reminder { lead_minutes, end } => {
                MessageKind::Reminder.key_with(Some(&format!("{lead_minutes}m-end-{}", end.format("%Y%m%dT%H%MZ"))))
            }
            CheckpointMilestone::AwsExpirationWarning => MessageKind::AwsExpirationWarning.key_with(None),
            CheckpointMilestone::Interruption { instance_id } => MessageKind::Interruption.key_with(Some(instance_id)),
        }
    }

    /// The outbox key for the alerts topic (`key` as an outbox key).
    pub fn alert_key(&self) -> Result<OutboxKey, OutboxKeyError> {
        OutboxKey::notice(self.key())
    }

    /// The outbox key for the workloads topic: same moment, its own dedup record.
    pub fn workload_key(&self) -> Result<OutboxKey, OutboxKeyError> {
        OutboxKey::workloads(self.key())
    }

    /// The `kind` workloads see (and may filter on).
    pub fn kind(&self) -> String {
        match self {
            CheckpointMilestone::Delivered => MessageKind::Delivered.event_type().into(),
            CheckpointMilestone::Reminder { lead_minutes, .. } => {
                format!("{}-{lead_minutes}m", MessageKind::Reminder.event_type())
            }
            CheckpointMilestone::AwsExpirationWarning => MessageKind::AwsExpirationWarning.event_type().into(),
            CheckpointMilestone::Interruption { .. } => MessageKind::Interruption.event_type().into(),
        }
    }
}

/// Whole minutes from `now` to the termination time, never negative.
pub fn minutes_left(termination: DateTime<Utc>, now: DateTime<Utc>) -> i64 {
    (termination - now).num_minutes().max(0)
}

/// The message a workload gets: the JSON body and the same fields as SNS message attributes,
/// so a subscription can filter on `reservation_id` (or `kind`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkloadNotice {
    /// Stable per (block, milestone): a consumer can drop a repeat.
    pub notice_id: String,
    pub reservation_id: String,
    pub region: String,
    pub instance_type: String,
    pub end_date: String,
    pub termination_time: String,
    pub minutes_left: i64,
    pub kind: String,
    pub instance_ids: Vec<String>,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl WorkloadNotice {
    pub fn new(facts: &Block, milestone: &CheckpointMilestone, instance_ids: Vec<String>, now: DateTime<Utc>) -> Self {
        Self::of_kind(facts, &milestone.key(), milestone.kind(), instance_ids, now)
    }

    /// A notice of any kind (`health` too), `key` its outbox milestone.
    pub fn of_kind(facts: &Block, key: &str, kind: String, instance_ids: Vec<String>, now: DateTime<Utc>) -> Self {
        let termination = facts.termination_time();
        WorkloadNotice {
            notice_id: format!("{}#{key}", facts.reservation_id),
            reservation_id: facts.reservation_id.clone(),
            region: facts.region.to_string(),
            instance_type: facts.instance_type.to_string(),
            end_date: rfc3339(facts.end),
            termination_time: rfc3339(termination),
            minutes_left: minutes_left(termination, now),
            kind,
            instance_ids,
        }
    }

    pub fn body(&self) -> String {
        // A struct of strings, numbers and a list: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// SNS string attributes. Empty values are left out: SNS rejects them.
    pub fn attributes(&self) -> BTreeMap<String, String> {
        [
            ("notice_id", self.notice_id.clone()),
            ("reservation_id", self.reservation_id.clone()),
            ("region", self.region.clone()),
            ("instance_type", self.instance_type.clone()),
            ("end_date", self.end_date.clone()),
            ("termination_time", self.termination_time.clone()),
            ("minutes_left", self.minutes_left.to_string()),
            ("kind", self.kind.clone()),
            ("instance_ids", self.instance_ids.join(",")),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// The workload notice of a health change (kind `health`): the usual fields and attributes,
/// and in the body the change itself (`health`: the status, the problems).
pub fn health_notice(
    b: &Block,
    key: &str,
    change: &HealthChange,
    now: DateTime<Utc>,
) -> (String, BTreeMap<String, String>) {
    let notice = WorkloadNotice::of_kind(b, key, HealthChange::KIND.into(), Vec::new(), now);
    let mut body = serde_json::to_value(&notice).unwrap_or_default();
    if let Some(fields) = body.as_object_mut() {
        fields.insert("health".into(), serde_json::to_value(change).unwrap_or_default());
    }
    (body.to_string(), notice.attributes())
}

/// The workload notice of an idle episode's news (kind `idle`): the body carries `idle` with the
/// status (`idle` or `recovered`), how many instances, since when, the idle instance-minutes and
/// their cost.
pub fn idle_notice(
    b: &Block,
    key: &str,
    news: &IdleNews,
    cost: Option<Money>,
    now: DateTime<Utc>,
) -> (String, BTreeMap<String, String>) {
    let notice = WorkloadNotice::of_kind(b, key, "idle".into(), Vec::new(), now);
    let (status, idle, since) = match news {
        IdleNews::Idle { idle, since, .. } => ("idle", *idle, *since),
        IdleNews::Recovered { since, .. } => ("recovered", 0, *since),
    };
    let mut body = serde_json::to_value(&notice).unwrap_or_default();
    if let Some(fields) = body.as_object_mut() {
        fields.insert(
            "idle".into(),
            serde_json::json!({
                "status": status,
                "idle_instances": idle,
                "idle_since": rfc3339(since),
                "idle_instance_minutes": news.idle_instance_minutes(),
                "idle_cost": cost.map(|c| c.to_string()),
            }),
        );
    }
    (body.to_string(), notice.attributes())
}

// ---------------------------------------------------------------------------------------------
// Reminder schedules
// ---------------------------------------------------------------------------------------------

/// EventBridge Scheduler's limit on schedule names.
pub const SCHEDULE_NAME_MAX: usize = 64;

/// A reminder's schedule name: deterministic in (reservation, lead), so a second sync finds
/// and updates the first one instead of adding another.
pub fn schedule_name(reservation_id: &str, lead: Duration) -> String {
    let suffix = format!("-{}m", lead.num_minutes());
    let name = format!("capblock-{reservation_id}{suffix}");
    if name.len() <= SCHEDULE_NAME_MAX {
        return name;
    }
    // Real ids (cr- + 17 hex) never get here; a stable hash keeps odd ones short and unique.
    let hash =
        reservation_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("capblock-{hash:016x}{suffix}")
}

/// The prefix shared by every reminder schedule of a reservation (for listing them).
pub fn schedule_prefix(reservation_id: &str) -> String {
    format!("capblock-{reservation_id}-")
}

/// When the reminder `lead` before the termination time fires.
pub fn reminder_at(end: DateTime<Utc>, ultraserver: bool, lead: Duration) -> DateTime<Utc> {
    termination_time(end, ultraserver) - lead
}

/// `at(yyyy-mm-ddThh:mm:ss)`, read by the scheduler in the schedule's time zone (UTC).
pub fn at_expression(t: DateTime<Utc>) -> String {
    format!("at({})", t.format("%Y-%m-%dT%H:%M:%S"))
}

/// Checkpoint reminders, in minutes before the termination time, when none are configured:
/// a day ahead (plan), two hours (finish a step), 30 minutes (save now).
pub const DEFAULT_REMINDER_LEAD_MINUTES: [u32; 3] = [1440, 120, 30];

/// How far a reminder may fire from its intended instant and still count (the scheduler is
/// punctual with FlexibleTimeWindow OFF; this covers a late retry of the invocation).
pub const REMINDER_TOLERANCE: Duration = Duration::minutes(10);

/// Whether a reminder that fired for `fire_at` still belongs to the block's current end (an
/// extension moves the end, and the old schedule may have fired before it was moved).
pub fn reminder_is_current(fire_at: DateTime<Utc>, lead_minutes: u32, end: DateTime<Utc>, ultraserver: bool) -> bool {
    let due = reminder_at(end, ultraserver, Duration::minutes(i64::from(lead_minutes)));
    (fire_at - due).abs() <= REMINDER_TOLERANCE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn facts() -> Block {
        Block {
            reservation_id: "cr-0a1b2c3d4e5f60718".into(),
            region: "us-east-2".parse().unwrap(),
            ..crate::domain::block::example(t("2026-12-08T11:30:00Z"), t("2026-12-10T11:30:00Z"))
        }
    }

    #[test]
    fn milestones_and_kinds() {
        // The tracker and on-capacity-event announce a block's activation under one key.
        assert_eq!(CheckpointMilestone::Delivered.key(), crate::domain::milestone::Milestone::Active.name());
        let r = CheckpointMilestone::Reminder { lead_minutes: 120, end: t("2026-12-10T11:30:00Z") };
        assert_eq!(r.key(), "reminder-120m-end-20261210T1130Z");
        assert_eq!(r.workload_key().unwrap(), "reminder-120m-end-20261210T1130Z@workloads");
        assert_eq!(r.kind(), "reminder-120m");
        assert_eq!(CheckpointMilestone::AwsExpirationWarning.key(), "aws-expiration-warning");
        assert_eq!(CheckpointMilestone::Interruption { instance_id: "i-1".into() }.key(), "interruption-i-1");
        assert_eq!(CheckpointMilestone::Interruption { instance_id: "i-1".into() }.kind(), "instance-interruption");
        assert_ne!(
            CheckpointMilestone::AwsExpirationWarning.key(),
            CheckpointMilestone::Reminder { lead_minutes: 30, end: t("2026-12-10T11:30:00Z") }.key()
        );
    }

    #[test]
    fn workload_notice_fields_and_attributes() {
        let n = WorkloadNotice::new(
            &facts(),
            &CheckpointMilestone::AwsExpirationWarning,
            vec!["i-1".into(), "i-2".into()],
            t("2026-12-10T10:50:00Z"),
        );
        assert_eq!(n.minutes_left, 10);
        assert_eq!(n.termination_time, "2026-12-10T11:00:00Z");
        let a = n.attributes();
        assert_eq!(a["reservation_id"], "cr-0a1b2c3d4e5f60718");
        assert_eq!(a["instance_ids"], "i-1,i-2");
        assert_eq!(a["minutes_left"], "10");
        let body: serde_json::Value = serde_json::from_str(&n.body()).unwrap();
        assert_eq!(body["instance_ids"][1], "i-2");
        assert_eq!(body["kind"], "aws-expiration-warning");
        // No instances: the attribute is left out rather than sent empty.
        let n = WorkloadNotice::new(&facts(), &CheckpointMilestone::Delivered, vec![], t("2026-12-12T00:00:00Z"));
        assert!(!n.attributes().contains_key("instance_ids"));
        assert_eq!(n.minutes_left, 0);
    }

    #[test]
    fn health_notices_have_kind_health_and_the_change() {
        use crate::domain::health::{BlockHealth, Interconnect, change};
        let h = BlockHealth { interconnect: Interconnect::Impaired, total: 16, unavailable: 2 };
        let d = change(None, &h).unwrap();
        let b = crate::domain::block::example(t("2026-12-03T11:30:00Z"), t("2026-12-05T11:30:00Z"));
        let (body, attrs) = health_notice(&b, "health-1-x@workloads", &d, t("2026-12-04T11:00:00Z"));
        assert_eq!(attrs["kind"], "health");
        assert_eq!(attrs["minutes_left"], "1440");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["health"]["change"], "degraded");
        assert_eq!(v["health"]["problems"][1], "2 of 16 instances unavailable");
        assert_eq!(v["notice_id"], "cr-0123456789abcdef0#health-1-x@workloads");
    }

    #[test]
    fn schedule_names_and_instants() {
        assert_eq!(
            schedule_name("cr-0a1b2c3d4e5f60718", Duration::minutes(1440)),
            "capblock-cr-0a1b2c3d4e5f60718-1440m"
        );
        let long = format!("cr-{}", "a".repeat(80));
        let name = schedule_name(&long, Duration::minutes(30));
        assert!(name.len() <= SCHEDULE_NAME_MAX && name.ends_with("-30m"));
        assert_eq!(name, schedule_name(&long, Duration::minutes(30)));
        let at = reminder_at(t("2026-12-10T11:30:00Z"), false, Duration::minutes(120));
        assert_eq!(at, t("2026-12-10T09:00:00Z"));
        assert_eq!(at_expression(at), "at(2026-12-10T09:00:00)");
        assert_eq!(reminder_at(t("2026-12-10T11:30:00Z"), true, Duration::minutes(30)), t("2026-12-10T10:00:00Z"));
    }

    #[test]
    fn stale_reminders_are_recognised() {
        let end = t("2026-12-10T11:30:00Z");
        assert!(reminder_is_current(t("2026-12-10T09:00:00Z"), 120, end, false));
        assert!(reminder_is_current(t("2026-12-10T09:05:00Z"), 120, end, false));
        // The block was extended by a day: the old 120-minute reminder is not the current one.
        assert!(!reminder_is_current(t("2026-12-10T09:00:00Z"), 120, t("2026-12-11T11:30:00Z"), false));
    }
}
