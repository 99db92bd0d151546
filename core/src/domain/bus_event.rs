//! capblock's own events on EventBridge: what each lifecycle step tells workloads, in a shape
//! written down as a JSON Schema per detail-type (`core/schemas/events/`), and the limits of
//! PutEvents that EventBridge enforces but the local emulator does not.
//!
//! Pure: the caller passes every fact, `now` included.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::block::Block;
use super::checkpoint::CheckpointMilestone;
use super::health::HealthChange;
use super::milestone::Milestone;
use super::usage::IdleNews;

/// The `source` of every event capblock puts. Kept as the bare `capblock` rather than a
/// reverse-DNS name (EventBridge's advice for sources on a shared bus): consumers' rules already
/// match it, the events go to the stack's own bus by default (`EventBusName`), and the only
/// reserved prefix, `aws.`, cannot clash with it. docs/handoff.md says so.
pub const SOURCE: &str = "capblock";
/// The detail's `version`: raised only on a change a consumer must adapt to (a field removed,
/// renamed or changed in meaning). Fields are added without raising it, and the schemas allow
/// fields they do not name, so a consumer that validates keeps working.
pub const DETAIL_VERSION: u32 = 1;
/// An event notice's attribute holding when its step happened (RFC 3339): the entry's `Time`,
/// so a notice published late (a retry, a later run) still says when the step was.
pub const TIME_ATTRIBUTE: &str = "time";
/// PutEvents takes at most this many entries per call.
pub const MAX_ENTRIES_PER_CALL: usize = 10;
/// PutEvents refuses an entry (the whole call, in fact) above 256 KB, counted as EventBridge
/// counts it: see `entry_size`.
pub const MAX_ENTRY_BYTES: usize = 256 * 1024;
/// An event's outbox notice carries its detail as the body and these as attributes.
pub const DETAIL_TYPE_ATTRIBUTE: &str = "detail-type";
pub const RESOURCE_ATTRIBUTE: &str = "resource";
/// The member account whose default bus a copy of an event goes to (a shared block's
/// consumer); absent: capblock's own bus.
pub const ACCOUNT_ATTRIBUTE: &str = "account";

/// One detail-type: one kind of lifecycle step, with a schema of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DetailType {
    BlockPurchased,
    PaymentFailed,
    BlockActive,
    BlockEnding,
    BlockExtended,
    BlockEnded,
    HealthChanged,
    BlockIdle,
    BlockShared,
}

impl DetailType {
    pub const ALL: [DetailType; 9] = [
        DetailType::BlockPurchased,
        DetailType::PaymentFailed,
        DetailType::BlockActive,
        DetailType::BlockEnding,
        DetailType::BlockExtended,
        DetailType::BlockEnded,
        DetailType::HealthChanged,
        DetailType::BlockIdle,
        DetailType::BlockShared,
    ];

    /// The `detail-type` as EventBridge rules match it.
    pub fn as_str(self) -> &'static str {
        match self {
            DetailType::BlockPurchased => "Block Purchased",
            DetailType::PaymentFailed => "Payment Failed",
            DetailType::BlockActive => "Block Active",
            DetailType::BlockEnding => "Block Ending",
            DetailType::BlockExtended => "Block Extended",
            DetailType::BlockEnded => "Block Ended",
            DetailType::HealthChanged => "Health Changed",
            DetailType::BlockIdle => "Block Idle",
            DetailType::BlockShared => "Block Shared",
        }
    }

    pub fn parse(s: &str) -> Option<DetailType> {
        DetailType::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// The schema's file name under `core/schemas/events/`.
    pub fn schema_file(self) -> String {
        format!("{}.schema.json", self.as_str().to_ascii_lowercase().replace(' ', "-"))
    }
}

impl std::fmt::Display for DetailType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The block an event is about, as capblock knows it when the step happens, with the tags the
/// event carries (`event_tags`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub block: Block,
    pub tags: BTreeMap<String, String>,
}

impl Subject {
    pub fn of(b: &Block, tags: BTreeMap<String, String>) -> Subject {
        Subject { block: b.clone(), tags }
    }
}

/// The tags an event carries: the reservation's without capblock's own `capblock:*`
/// bookkeeping, i.e. the rule's `tags` capblock bought it with.
pub fn event_tags<'a>(tags: impl IntoIterator<Item = (&'a String, &'a String)>) -> BTreeMap<String, String> {
    // capblock's own tags are in the detail's fields already; `aws:` tags are EC2's (the
    // requested quantity, the reservation type), not the rule's.
    tags.into_iter()
        .filter(|(k, _)| !k.starts_with("capblock:") && !k.starts_with("aws:"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The event of a tracker milestone, keyed by the milestone's outbox name (the Slack notice's,
/// so the tracker and on-capacity-event, which share "delivered", put one Block Active between
/// them). `previous_end`: the end before the move. `None`: not an event (payment succeeded,
/// scheduled, an end moved back, payment warnings).
pub fn step_of_milestone(m: &Milestone, previous_end: DateTime<Utc>) -> Option<BusStep> {
    match m {
        Milestone::PaymentFailed => Some(BusStep::PaymentFailed),
        Milestone::Active => Some(BusStep::Active),
        Milestone::Expired => Some(BusStep::Ended { outcome: EndOutcome::Expired }),
        Milestone::Released => Some(BusStep::Ended { outcome: EndOutcome::Released }),
        Milestone::Extended(_) => Some(BusStep::Extended { previous_end }),
        Milestone::PaymentSucceeded
        | Milestone::Scheduled
        | Milestone::EndMovedBack(_)
        | Milestone::PaymentWarning(_) => None,
    }
}

/// The event of an on-capacity-event milestone (its key is the milestone's `key()`): the block
/// delivered, and each of capblock's reminders with the minutes left. AWS's own warning and an
/// instance's interruption are EC2's events already (source `aws.ec2`).
pub fn step_of_checkpoint(m: &CheckpointMilestone) -> Option<BusStep> {
    match m {
        CheckpointMilestone::Delivered => Some(BusStep::Active),
        CheckpointMilestone::Reminder { lead_minutes, .. } => Some(BusStep::Ending { minutes_left: *lead_minutes }),
        CheckpointMilestone::AwsExpirationWarning | CheckpointMilestone::Interruption { .. } => None,
    }
}

/// The event of a block's health change: `status` is `degraded` or `recovered`, the summary the
/// Slack title's. Its key is the health notice's own.
pub fn step_of_health(change: &HealthChange) -> BusStep {
    let status = match change {
        HealthChange::Degraded { .. } => "degraded",
        HealthChange::Recovered { .. } => "recovered",
    };
    BusStep::HealthChanged { status: status.into(), summary: change.summary() }
}

/// The event of an idle episode's news: `idle` when alerted, `recovered` when every instance
/// runs again; `cost`: the idle time's cost at the block's price. Its key is the Slack notice's.
pub fn step_of_idle(news: &IdleNews, cost: Option<super::money::Money>) -> BusStep {
    let (status, idle_instances, since) = match news {
        IdleNews::Idle { idle, since, .. } => ("idle", *idle, *since),
        IdleNews::Recovered { since, .. } => ("recovered", 0, *since),
    };
    BusStep::Idle {
        status: status.into(),
        idle_instances,
        idle_since: since,
        idle_instance_minutes: news.idle_instance_minutes(),
        idle_cost: cost.map(|c| c.to_string()),
    }
}

/// What one step adds to the common part. Each variant is one detail-type, so an event can
/// never carry the extra fields of another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusStep {
    Purchased,
    PaymentFailed,
    Active,
    /// A reminder `minutes_left` minutes before the instances' termination time.
    Ending {
        minutes_left: u32,
    },
    Extended {
        previous_end: DateTime<Utc>,
    },
    /// `outcome`: EC2's final word, `expired` or `released` (cancelled, failed).
    Ended {
        outcome: EndOutcome,
    },
    /// A health notice about the block (its own kind, e.g. an UltraServer node degraded).
    HealthChanged {
        status: String,
        summary: String,
    },
    /// Part of the block paid but idle for the rule's `idle_alert_minutes` (`status` `idle`),
    /// or every instance running again after it (`recovered`); see `domain::usage`.
    Idle {
        status: String,
        idle_instances: u32,
        idle_since: DateTime<Utc>,
        idle_instance_minutes: u64,
        /// At the block's own price; None when capblock never knew the fee.
        idle_cost: Option<String>,
    },
    /// The block is shared through AWS RAM (`domain::share`): consumers in `shared_with` may
    /// launch into it; `not_shared_with`: principals RAM refused.
    Shared {
        share_arn: String,
        shared_with: Vec<String>,
        not_shared_with: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndOutcome {
    Expired,
    Released,
}

impl BusStep {
    pub fn detail_type(&self) -> DetailType {
        match self {
            BusStep::Purchased => DetailType::BlockPurchased,
            BusStep::PaymentFailed => DetailType::PaymentFailed,
            BusStep::Active => DetailType::BlockActive,
            BusStep::Ending { .. } => DetailType::BlockEnding,
            BusStep::Extended { .. } => DetailType::BlockExtended,
            BusStep::Ended { .. } => DetailType::BlockEnded,
            BusStep::HealthChanged { .. } => DetailType::HealthChanged,
            BusStep::Idle { .. } => DetailType::BlockIdle,
            BusStep::Shared { .. } => DetailType::BlockShared,
        }
    }
}

/// The `detail` of an event. Field names are snake_case like the workload notices'; times are
/// RFC 3339 UTC with a `Z`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detail {
    /// [`DETAIL_VERSION`].
    pub version: u32,
    /// Stable per (block, step): a consumer drops a repeat by it (the outbox allows exactly one,
    /// in the crash window between PutEvents and marking the notice published).
    pub event_key: String,
    pub reservation_id: String,
    pub region: String,
    pub availability_zone: String,
    pub instance_type: String,
    pub instance_count: u32,
    pub start: String,
    pub end: String,
    /// When EC2 begins terminating the instances (end - 30 min, 60 for UltraServers).
    pub termination_time: String,
    pub rule_id: Option<String>,
    pub tags: BTreeMap<String, String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Extra {
    None {},
    Ending {
        minutes_left: u32,
    },
    Extended {
        previous_end: String,
    },
    Ended {
        outcome: EndOutcome,
    },
    Health {
        status: String,
        summary: String,
    },
    Idle {
        status: String,
        idle_instances: u32,
        idle_since: String,
        idle_instance_minutes: u64,
        idle_cost: Option<String>,
    },
    Shared {
        share_arn: String,
        shared_with: Vec<String>,
        not_shared_with: Vec<String>,
        /// The account that owns (and paid for) the block: what a consumer's Karpenter selects
        /// shared reservations by (`ownerID`).
        owner_account: Option<String>,
    },
}

/// The account of an ARN (`arn:aws:ec2:<region>:<account>:...`).
fn arn_account(arn: &str) -> Option<&str> {
    arn.split(':').nth(4).filter(|a| !a.is_empty())
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The detail of `step` for `subject`; `step_key` is the outbox milestone it is stored under.
pub fn detail(subject: &Subject, step: &BusStep, step_key: &str) -> Detail {
    let extra = match step {
        BusStep::Purchased | BusStep::PaymentFailed | BusStep::Active => Extra::None {},
        BusStep::Ending { minutes_left } => Extra::Ending { minutes_left: *minutes_left },
        BusStep::Extended { previous_end } => Extra::Extended { previous_end: rfc3339(*previous_end) },
        BusStep::Ended { outcome } => Extra::Ended { outcome: *outcome },
        BusStep::HealthChanged { status, summary } => {
            Extra::Health { status: status.clone(), summary: summary.clone() }
        }
        BusStep::Idle { status, idle_instances, idle_since, idle_instance_minutes, idle_cost } => Extra::Idle {
            status: status.clone(),
            idle_instances: *idle_instances,
            idle_since: rfc3339(*idle_since),
            idle_instance_minutes: *idle_instance_minutes,
            idle_cost: idle_cost.clone(),
        },
        BusStep::Shared { share_arn, shared_with, not_shared_with } => Extra::Shared {
            share_arn: share_arn.clone(),
            shared_with: shared_with.clone(),
            not_shared_with: not_shared_with.clone(),
            owner_account: subject.block.arn.as_deref().and_then(arn_account).map(str::to_string),
        },
    };
    let b = &subject.block;
    Detail {
        version: DETAIL_VERSION,
        event_key: format!("{}#{step_key}", b.reservation_id),
        reservation_id: b.reservation_id.clone(),
        region: b.region.to_string(),
        availability_zone: b.availability_zone.clone(),
        instance_type: b.instance_type.to_string(),
        instance_count: b.instance_count,
        start: rfc3339(b.start),
        end: rfc3339(b.end),
        termination_time: rfc3339(b.termination_time()),
        rule_id: b.rule_id.clone(),
        tags: subject.tags.clone(),
        extra,
    }
}

/// One PutEvents entry that EventBridge will take: the size is checked when it is made, so an
/// entry that exists fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusEntry {
    detail_type: DetailType,
    detail: String,
    resources: Vec<String>,
    /// When the step happened; `None`: EventBridge stamps the put's time.
    time: Option<DateTime<Utc>>,
    /// The member account whose default bus takes it; `None`: capblock's own bus.
    account: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("a {detail_type} event of {bytes} bytes is over PutEvents' {MAX_ENTRY_BYTES}-byte limit")]
    TooLarge { detail_type: DetailType, bytes: usize },
    #[error("unknown detail-type {0:?}")]
    UnknownDetailType(String),
}

/// The size EventBridge counts for an entry: the UTF-8 bytes of source, detail-type, detail and
/// each resource, plus 14 for the time (capblock sets it to when the step happened).
/// <https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html>
pub fn entry_size(detail_type: &str, detail: &str, resources: &[String]) -> usize {
    14 + SOURCE.len() + detail_type.len() + detail.len() + resources.iter().map(String::len).sum::<usize>()
}

impl BusEntry {
    pub fn new(detail_type: DetailType, detail: String, resources: Vec<String>) -> Result<BusEntry, EntryError> {
        let bytes = entry_size(detail_type.as_str(), &detail, &resources);
        if bytes > MAX_ENTRY_BYTES {
            return Err(EntryError::TooLarge { detail_type, bytes });
        }
        Ok(BusEntry { detail_type, detail, resources, time: None, account: None })
    }

    /// The entry with its `Time` set to when its step happened.
    pub fn at(mut self, time: DateTime<Utc>) -> BusEntry {
        self.time = Some(time);
        self
    }

    pub fn time(&self) -> Option<DateTime<Utc>> {
        self.time
    }

    /// The entry for member account `account`'s default bus.
    pub fn for_account(mut self, account: &str) -> BusEntry {
        self.account = Some(account.to_string());
        self
    }

    pub fn account(&self) -> Option<&str> {
        self.account.as_deref()
    }

    pub fn detail_type(&self) -> DetailType {
        self.detail_type
    }
    pub fn detail(&self) -> &str {
        &self.detail
    }
    pub fn resources(&self) -> &[String] {
        &self.resources
    }
}

/// Entries in PutEvents-sized calls, in order.
pub fn calls(entries: &[BusEntry]) -> std::slice::Chunks<'_, BusEntry> {
    entries.chunks(MAX_ENTRIES_PER_CALL)
}

#[cfg(test)]
pub(crate) mod tests;
