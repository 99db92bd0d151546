//! The narrow traits the application code depends on. The AWS adapters (`crate::aws`)
//! implement them for real; `crate::fakes` (feature `mocks`) in memory for fast tests.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period};
use crate::domain::lifecycle::{BlockState, Observed};
use crate::domain::money::Money;
use crate::domain::names::{InstanceType, Region};
use crate::domain::offering::Offering;
use crate::domain::rule::Rule;

/// The wall clock, for `main`s only: domain code takes `now` as an argument.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

// ---------------------------------------------------------------------------------------------
// Market (EC2)
// ---------------------------------------------------------------------------------------------

/// Errors from the market, sorted by what they mean for money.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarketError {
    /// EC2 said no and did nothing (4xx). For a purchase: definitely not bought.
    #[error("EC2 rejected {operation} in {region}: {code}: {message}")]
    Rejected { operation: &'static str, region: String, code: String, message: String },
    /// RequestLimitExceeded after the SDK's retries. Nothing was done.
    #[error("EC2 throttled {operation} in {region} (RequestLimitExceeded) after retries")]
    Throttled { operation: &'static str, region: String },
    /// The region does not sell Capacity Blocks (InvalidAction / UnsupportedOperation).
    #[error("{region} does not support {operation}")]
    Unsupported { operation: &'static str, region: String },
    /// Timeout, connection failure or 5xx: EC2 may or may not have acted. For a purchase this
    /// means "maybe bought": only reconciliation by tag may resolve it.
    #[error("{operation} in {region} has an unknown outcome: {message}")]
    Unknown { operation: &'static str, region: String, message: String },
    /// EC2 answered with something we could not use.
    #[error("{operation} in {region} returned an unusable response: {message}")]
    BadResponse { operation: &'static str, region: String, message: String },
}

impl MarketError {
    /// Whether the call certainly had no effect.
    pub fn had_no_effect(&self) -> bool {
        matches!(self, MarketError::Rejected { .. } | MarketError::Throttled { .. } | MarketError::Unsupported { .. })
    }
}

/// One DescribeCapacityBlockOfferings question.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OfferingQuery {
    pub region: Region,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub duration_hours: u32,
    pub start_from: DateTime<Utc>,
    pub start_to: DateTime<Utc>,
}

#[async_trait]
pub trait OfferingSource: Send + Sync {
    /// All offerings for the query, every page followed. Rows that fail to parse are logged and
    /// skipped; the call fails only when EC2 does.
    async fn offerings(&self, query: &OfferingQuery) -> Result<Vec<Offering>, MarketError>;
}

#[async_trait]
pub trait InstanceTypeSource: Send + Sync {
    /// Accelerators per instance (GPUs or Neuron devices) for each type EC2 knows.
    async fn accelerators(
        &self,
        region: &Region,
        types: &[InstanceType],
    ) -> Result<Vec<(InstanceType, u32)>, MarketError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurchaseRequest {
    pub offering: Offering,
    pub instance_platform: String,
    pub tags: BTreeMap<String, String>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PurchaseOutcome {
    Bought(Reservation),
    /// DryRun: EC2 would have accepted the request.
    WouldSucceed,
}

#[async_trait]
pub trait Purchaser: Send + Sync {
    /// Sends PurchaseCapacityBlock exactly once: the adapter must not retry it.
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError>;
}

/// A capacity reservation as DescribeCapacityReservations reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub id: String,
    pub arn: Option<String>,
    pub region: Region,
    pub availability_zone: String,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub state: String,
    pub reservation_type: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl Reservation {
    pub fn is_capacity_block(&self) -> bool {
        self.reservation_type.as_deref() == Some("capacity-block")
    }
}

#[async_trait]
pub trait ReservationSource: Send + Sync {
    /// Capacity-block reservations carrying `tag_key` = `tag_value`.
    async fn reservations_tagged(
        &self,
        region: &Region,
        tag_key: &str,
        tag_value: &str,
    ) -> Result<Vec<Reservation>, MarketError>;

    /// What EC2 says about each id; ids EC2 no longer knows come back as `Observed::NotFound`.
    async fn observe(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError>;
}

// ---------------------------------------------------------------------------------------------
// Store (DynamoDB)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A condition did not hold: someone else got there first.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("{what} not found")]
    NotFound { what: String },
    /// The store is unreachable, throttled or failed: safe to retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// An item that does not decode: a bug or a hand edit.
    #[error("corrupt item {key}: {message}")]
    Corrupt { key: String, message: String },
}

/// A stored rule, with the version used for optimistic updates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRule {
    pub rule: Rule,
    pub version: u64,
}

#[async_trait]
pub trait RuleStore: Send + Sync {
    /// Creates or replaces a rule; `expected_version` 0 means "must not exist yet".
    async fn put_rule(&self, rule: &Rule, expected_version: Option<u64>) -> Result<u64, StoreError>;
    async fn get_rule(&self, id: &str) -> Result<Option<StoredRule>, StoreError>;
    async fn list_rules(&self) -> Result<Vec<StoredRule>, StoreError>;
}

/// Why a reservation of funds was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    #[error("an intent for this rule and offering already exists")]
    AlreadyExists,
    #[error("the rule has another purchase in flight, or bought since the decision was made")]
    RuleBusy,
    #[error("the budget {0} would be exceeded")]
    OverBudget(String),
    #[error("the rule reached its purchases for this month")]
    PurchaseLimit,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The per-rule purchase guard: at most one open intent per rule, and a sequence number that
/// moves on every reservation so a decision made on stale counts cannot commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleGuard {
    pub open_intent: Option<String>,
    pub seq: u64,
}

/// A block capblock tracks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub reservation_id: String,
    pub region: Region,
    pub availability_zone: String,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub state: BlockState,
    /// None for blocks adopted from the account whose price capblock never saw.
    pub fee: Option<Money>,
    pub accelerators_per_instance: Option<u32>,
    pub purchased_at: DateTime<Utc>,
    pub payment_deadline: Option<DateTime<Utc>>,
    pub rule_id: Option<String>,
    pub intent_id: Option<String>,
    pub ultraserver: bool,
    pub arn: Option<String>,
    /// Budget period the fee was charged to.
    pub period: Option<Period>,
    pub version: u64,
}

/// Purchase bookkeeping: intents, budgets and the rule guard, moved together in transactions.
#[async_trait]
pub trait Ledger: Send + Sync {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError>;
    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError>;

    /// In one transaction: creates the intent (state Reserved), charges its fee to every
    /// budget (each must stay within its limit), and takes the rule guard (no open intent,
    /// `seq` unchanged since `seen_seq`). All or nothing.
    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError>;

    /// Reserved -> Sent, just before PurchaseCapacityBlock. Fails if the intent is not Reserved.
    async fn mark_sent(&self, intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Sent -> Bought: writes the block and its purchase notice, moves the fee from reserved to
    /// spent, frees the guard. All or nothing.
    async fn record_bought(
        &self,
        intent: &Intent,
        block: &Block,
        notice: &Notice,
    ) -> Result<(), StoreError>;

    /// Reserved/Sent -> Rejected: releases the fee and frees the guard.
    async fn record_rejected(
        &self,
        intent: &Intent,
        reason: &str,
        notice: Option<&Notice>,
    ) -> Result<(), StoreError>;

    /// Records a dry-run decision (no money, no guard). Returns false if it was recorded before.
    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError>;

    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError>;
    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError>;
}

#[async_trait]
pub trait BlockStore: Send + Sync {
    /// Blocks not in a final state, optionally only one rule's.
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError>;
    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError>;
    /// Writes a block capblock did not buy itself (adoption). False if it is already known.
    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError>;
}

/// One price seen in the market.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    pub offering: Offering,
    pub accelerators_per_instance: u32,
    pub seen_at: DateTime<Utc>,
}

#[async_trait]
pub trait ObservationStore: Send + Sync {
    /// Stores observations in batches; returns how many were written.
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError>;
    async fn history(
        &self,
        region: &Region,
        instance_type: &InstanceType,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Observation>, StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Notifier (SNS)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    #[error("publish to {topic} failed: {message}")]
    Failed { topic: String, message: String },
}

/// Which SNS topic a message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topic {
    /// People: the Slack channel.
    Alerts,
    /// Machines: the training jobs running on the blocks.
    Workloads,
}

/// A message ready to publish: a body and string attributes for subscription filters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub body: String,
    pub attributes: BTreeMap<String, String>,
}

#[async_trait]
pub trait Notifier: Send + Sync {
    async fn publish(&self, topic: Topic, message: &Message) -> Result<(), NotifyError>;
}

/// An announcement to make exactly once: `thread` (reservation or intent id) + `milestone`
/// is its identity. Written to the store before it is published (an outbox), so a crash
/// delays it instead of losing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub thread: String,
    pub milestone: String,
    pub topic: Topic,
    pub message: Message,
    pub created_at: DateTime<Utc>,
}

impl Notice {
    pub fn id(&self) -> String {
        format!("{}#{}", self.thread, self.milestone)
    }
}

#[async_trait]
pub trait Outbox: Send + Sync {
    /// Adds a notice unless one with the same thread and milestone exists (then `false`).
    async fn enqueue(&self, notice: &Notice) -> Result<bool, StoreError>;
    /// Notices not yet published.
    async fn pending(&self) -> Result<Vec<Notice>, StoreError>;
    /// Takes the right to publish a notice until `until`; `false` if another run holds it.
    async fn lease(&self, notice: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError>;
    async fn mark_published(&self, notice: &Notice, at: DateTime<Utc>) -> Result<(), StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Reminders (EventBridge Scheduler)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReminderError {
    #[error("scheduler: {0}")]
    Failed(String),
}

/// capblock's own checkpoint reminders: one-time schedules at operator-set lead times before a
/// block's termination time (end - 30 min, or 60 for UltraServers).
#[async_trait]
pub trait Reminders: Send + Sync {
    /// Makes sure the block has one one-time schedule per lead time, at the right instants
    /// (moving them when the end moved); lead times already past at `now` are skipped.
    /// Idempotent: calling it twice changes nothing.
    async fn sync(&self, block: &Block, now: DateTime<Utc>) -> Result<(), ReminderError>;
    /// Removes every reminder schedule of the block. Idempotent.
    async fn clear(&self, block: &Block) -> Result<(), ReminderError>;
}
