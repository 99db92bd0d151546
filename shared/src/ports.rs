//! The narrow traits the application code depends on. The AWS adapters (`crate::aws`)
//! implement them for real; unit tests implement the few they need in memory (see
//! `app/fan_out/tests.rs`), and every adapter is also tested on the local stack (`tests/`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::alarm::AlarmState;
use crate::domain::block::{Block, Reservation};
use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period};
use crate::domain::bus::BusEntry;
use crate::domain::extension::{ExtensionIntent, ExtensionOffer, ExtensionReceipt, ExtensionState};
use crate::domain::handoff::Invocation;
use crate::domain::health::BlockHealth;
use crate::domain::lifecycle::Observed;
use crate::domain::names::{InstanceType, Region};
use crate::domain::offering::Offering;
use crate::domain::plan::RegionMemory;
use crate::domain::rule::Rule;
use crate::domain::stack::StoredSettings;
use crate::domain::ultraserver::UltraServers;

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

/// A clock read once: an invocation's `now`, from whichever source the function runs on (the
/// wall clock, or a simulation's), held for the whole invocation.
pub struct ReadClock(pub DateTime<Utc>);

impl Clock for ReadClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
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
    /// Throttled: RequestLimitExceeded (EC2's per-API token bucket), or
    /// CapacityBlockDescribeLimitExceeded (the low limit of DescribeCapacityBlockOfferings per
    /// account and region, which no SDK retry mode classes as throttling). Nothing was done.
    #[error("EC2 throttled {operation} in {region} ({code})")]
    Throttled { operation: &'static str, region: String, code: &'static str },
    /// The region does not sell this instance type as Capacity Blocks (InvalidParameterValue
    /// "... not supported for Capacity Blocks"). Nothing was done.
    #[error("{region} does not sell this as Capacity Blocks: {message}")]
    NotSold { operation: &'static str, region: String, message: String },
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

/// EC2's codes for a throttled call, as `MarketError::Throttled` carries them.
pub const REQUEST_LIMIT: &str = "RequestLimitExceeded";
pub const DESCRIBE_LIMIT: &str = "CapacityBlockDescribeLimitExceeded";

impl MarketError {
    /// Whether the call certainly had no effect.
    pub fn had_no_effect(&self) -> bool {
        matches!(
            self,
            MarketError::Rejected { .. }
                | MarketError::Throttled { .. }
                | MarketError::Unsupported { .. }
                | MarketError::NotSold { .. }
        )
    }
}

/// One DescribeCapacityBlockOfferings question.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OfferingQuery {
    pub region: Region,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    /// Set for an UltraServer search: EC2 is asked with UltraserverType + UltraserverCount, and
    /// `instance_type` / `instance_count` are the UltraServers' own (never sent).
    pub ultraservers: Option<UltraServers>,
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

/// What one PurchaseCapacityBlock created. A purchase may make several reservations: one per
/// UltraServer today, one per segment once the SDK has `CapacityBlockOfferingSegments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purchase {
    /// The reservation the answer describes in full (CapacityReservation).
    pub reservation: Reservation,
    /// The other reservations the answer names (by id only, in its CapacityBlocks): tagged like
    /// the first, they are adopted by the tracker as parts of the same purchase.
    pub more: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PurchaseOutcome {
    Bought(Box<Purchase>),
    /// DryRun: EC2 would have accepted the request.
    WouldSucceed,
}

#[async_trait]
pub trait Purchaser: Send + Sync {
    /// Sends PurchaseCapacityBlock exactly once: the adapter must not retry it.
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError>;
}

/// A reservation EC2 listed that capblock cannot read: a field it relies on is missing or
/// malformed. It is never dropped silently: one carrying a purchase's tag may be that purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// Its id, when EC2 gave one.
    pub id: Option<String>,
    pub reason: String,
}

/// The capacity blocks carrying a tag: those capblock read, and those it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tagged {
    pub reservations: Vec<Reservation>,
    pub unreadable: Vec<Unreadable>,
}

#[async_trait]
pub trait ReservationSource: Send + Sync {
    /// Capacity-block reservations carrying `tag_key` = `tag_value`, with any that carry it but
    /// cannot be read.
    async fn reservations_tagged(&self, region: &Region, tag_key: &str, tag_value: &str)
    -> Result<Tagged, MarketError>;

    /// What EC2 says about each id; ids EC2 no longer knows come back as `Observed::NotFound`.
    async fn observe(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError>;

    /// Every capacity-block reservation of the region, tagged or not (for adopting blocks
    /// bought outside capblock). Other reservation types are left out.
    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError>;
}

#[async_trait]
pub trait ExtensionMarket: Send + Sync {
    /// The extensions EC2 sells now for the block, for exactly `duration_hours`.
    async fn extension_offerings(
        &self,
        region: &Region,
        reservation_id: &str,
        duration_hours: u32,
    ) -> Result<Vec<ExtensionOffer>, MarketError>;

    /// Sends PurchaseCapacityBlockExtension exactly once: the adapter must not retry it (the API
    /// has no ClientToken either).
    async fn purchase_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<ExtensionReceipt, MarketError>;
    /// PurchaseCapacityBlockExtension with DryRun=true, as purchases are checked in a dry run:
    /// Ok when EC2 answers DryRunOperation (the call would have been allowed), nothing bought.
    async fn check_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<(), MarketError>;
}

/// A block as DescribeCapacityBlocks describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityBlockFacts {
    pub capacity_block_id: String,
    /// Set for an UltraServer's block (the type as EC2 names it).
    pub ultraserver_type: Option<String>,
    pub state: String,
    pub reservation_ids: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

/// The kind of a block (UltraServer or instances), which only DescribeCapacityBlocks tells.
#[async_trait]
pub trait BlockKinds: Send + Sync {
    /// The blocks with these ids (at most a page of 1000 per call, every page followed); ids
    /// EC2 does not know are left out.
    async fn capacity_blocks_by_id(
        &self,
        region: &Region,
        ids: &[String],
    ) -> Result<Vec<CapacityBlockFacts>, MarketError>;
}

/// DescribeCapacityBlockStatus: interconnect health and capacity of blocks that have some.
#[async_trait]
pub trait BlockStatusSource: Send + Sync {
    /// Health of each block of `ids` that EC2 reports one for. A block without a status yet
    /// (scheduled) or any more is left out rather than failing the others.
    async fn block_status(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, BlockHealth)>, MarketError>;
}

/// One entry of DescribeCapacityBlockExtensionHistory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionRecord {
    pub reservation_id: String,
    pub offering_id: String,
    /// payment-pending, payment-failed or payment-succeeded (or what EC2 adds later).
    pub status: String,
    pub end: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait ExtensionHistory: Send + Sync {
    /// Every extension EC2 recorded for these reservations.
    async fn extension_history(
        &self,
        region: &Region,
        reservation_ids: &[String],
    ) -> Result<Vec<ExtensionRecord>, MarketError>;
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
    /// An item that does not decode: a bug or a hand edit. Listings leave such an item out
    /// (logged with its key, and counted) so that one item cannot stop every run; an item asked
    /// for by its key, and a listing whose every item bounds money (a rule's own blocks, a
    /// block's extensions), return this instead. A retry reads the same item: not retryable.
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
    /// Deletes the rule itself, nothing else: its blocks are tracked to their end, its open
    /// intents settled, and its budgets and purchase guard stay (a rule put again under the
    /// same id finds its month as it was). `false` if there was no such rule.
    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError>;
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
    async fn record_bought(&self, intent: &Intent, block: &Block, notices: &[Notice]) -> Result<(), StoreError>;

    /// Reserved/Sent -> Rejected: releases the fee and frees the guard. The offering stays
    /// tried: the rule never sends a purchase for it again.
    async fn record_rejected(&self, intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError>;

    /// For an intent whose purchase certainly never took effect at EC2 (throttled, stopped
    /// before sending, abandoned while Reserved): in one transaction, removes the intent
    /// (only if it is still in `intent.state`), releases the fee and frees the guard, so a later
    /// run may try the same offering again.
    async fn record_given_back(&self, intent: &Intent, reason: &str) -> Result<(), StoreError>;

    /// Records a dry-run decision (no money, no guard). Returns false if it was recorded before.
    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError>;

    /// Records a decision waiting for a person's approval (no money, no guard), under a key of
    /// its own. Returns false if it was recorded before.
    async fn record_approval(&self, intent: &Intent) -> Result<bool, StoreError> {
        Err(StoreError::Unavailable(format!("this store cannot record approval {}", intent.id)))
    }

    /// The decision waiting for approval for this rule and offering, if any.
    async fn get_approval(&self, rule_id: &str, offering_id: &str) -> Result<Option<Intent>, StoreError> {
        let _ = (rule_id, offering_id);
        Ok(None)
    }

    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError>;
    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError>;

    /// A block whose payment failed was never charged: in one transaction, moves the intent's
    /// fee out of `committed` and `spent` of every budget the intent charged, gives the
    /// purchase back to the month's count when `restore_purchase`, and marks the block item
    /// released. Returns false (and changes nothing) if the block was released before, so it
    /// happens once per block however many runs try.
    async fn release_failed_block(
        &self,
        block: &Block,
        intent: &Intent,
        restore_purchase: bool,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
}

#[async_trait]
pub trait BlockStore: Send + Sync {
    /// Blocks not in a final state, optionally only one rule's (strict then: they count against
    /// its `max_blocks_held`, so a corrupt one is `StoreError::Corrupt`, never left out).
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError>;
    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError>;
    /// Writes a block capblock did not buy itself (adoption). False if it is already known.
    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError>;
    /// Stores the block's state, end and data if its stored version is still
    /// `expected_version` (`Conflict` otherwise); the stored version becomes
    /// `expected_version + 1`. A block moved to a final state leaves the open-blocks index.
    async fn update_block(&self, block: &Block, expected_version: u64) -> Result<(), StoreError>;
}

/// Extension bookkeeping. At most one open extension per block (a guard on the block item),
/// budgets charged like purchases (money only: extensions do not count as purchases).
#[async_trait]
pub trait ExtensionLedger: Send + Sync {
    /// In one transaction: creates the intent (must not exist), takes the block's extension
    /// guard (no other open extension) and charges every budget within its limit.
    async fn reserve_extension(&self, intent: &ExtensionIntent) -> Result<(), ReserveError>;
    /// Moves an open intent to `to` (Sent, Bought) with a condition on its current state.
    async fn advance_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Closes an open intent as Paid (fee moves to spent) or Released (fee released), frees the
    /// block's guard. All or nothing; `Conflict` if someone closed it first.
    async fn close_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        reason: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Every extension intent of one block, open or closed (strict: paid ones bound `max_days`).
    async fn extensions_of(&self, reservation_id: &str) -> Result<Vec<ExtensionIntent>, StoreError>;
    /// Open extension intents of all blocks.
    async fn open_extensions(&self) -> Result<Vec<ExtensionIntent>, StoreError>;
}

/// Every block ever tracked, final states included: for people (the CLI), never for the
/// functions. A trait of its own so that no function's role needs the table scan it costs.
#[async_trait]
pub trait BlockArchive: Send + Sync {
    async fn all_blocks(&self) -> Result<Vec<Block>, StoreError>;
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

/// The last state of each of the stack's CloudWatch alarms, as their state-change events tell it.
#[async_trait]
pub trait AlarmStore: Send + Sync {
    /// Keeps `state` unless a later one is kept already (events may arrive out of order);
    /// returns whether it was kept.
    async fn record_alarm(&self, state: &AlarmState) -> Result<bool, StoreError>;
    /// Every alarm's last state, by name.
    async fn alarms(&self) -> Result<Vec<AlarmState>, StoreError>;
}

/// The stack's settings as its functions last stored them from their configuration: how the
/// CLI learns the stack's mode, account cap, name and alerts topic.
#[async_trait]
pub trait SettingsStore: Send + Sync {
    /// Stores `settings` unless the same settings are stored already (whenever written);
    /// returns whether it wrote.
    async fn store_settings(&self, settings: &StoredSettings) -> Result<bool, StoreError>;
    /// The stored settings; `None` when no function has stored any yet.
    async fn stored_settings(&self) -> Result<Option<StoredSettings>, StoreError>;
}

/// The query planner's memory per region (`domain::plan::RegionMemory`): the cursor of what was
/// asked when, and what EC2 said of the region.
#[async_trait]
pub trait MarketMemory: Send + Sync {
    /// The region's memory; empty when none was saved.
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError>;
    async fn save_region_memory(&self, region: &Region, memory: &RegionMemory) -> Result<(), StoreError>;
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
    /// capblock's own events, for EventBridge (`domain::bus`): anyone routes them with a rule.
    Events,
    /// Not a message: a hand-off action to run once (`app::handoff`); `flush` leaves these to
    /// the action runner.
    Actions,
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

    /// Publishes several messages to one topic: one result per message, in order. An adapter
    /// whose service takes batches (EventBridge) overrides it.
    async fn publish_all(&self, topic: Topic, messages: &[Message]) -> Vec<Result<(), NotifyError>> {
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            out.push(self.publish(topic, m).await);
        }
        out
    }
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
    /// Writes a record: a notice that is never published (what capblock did, for a retry to
    /// read). `false` if one with the same thread and milestone exists.
    async fn put_record(&self, notice: &Notice) -> Result<bool, StoreError>;
    /// The thread's notices and records whose milestone starts with `prefix`.
    async fn records(&self, thread: &str, prefix: &str) -> Result<Vec<Notice>, StoreError>;
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

// ---------------------------------------------------------------------------------------------
// Instances and single reservations (EC2), for checkpoint notices
// ---------------------------------------------------------------------------------------------

#[async_trait]
pub trait InstanceSource: Send + Sync {
    /// Ids of the instances running (or starting) in a capacity reservation now: DescribeInstances
    /// filtered by `capacity-reservation-id`.
    async fn instances_in(&self, region: &Region, reservation_id: &str) -> Result<Vec<String>, MarketError>;
    /// The capacity reservation an instance runs in; `None` when EC2 does not know the instance
    /// or it runs outside any reservation.
    async fn reservation_of(&self, region: &Region, instance_id: &str) -> Result<Option<String>, MarketError>;
}

#[async_trait]
pub trait ReservationLookup: Send + Sync {
    /// One reservation by id, whatever its type or tags (e.g. a block bought by hand);
    /// `None` when EC2 does not know it.
    async fn reservation(&self, region: &Region, id: &str) -> Result<Option<Reservation>, MarketError>;
}

// ---------------------------------------------------------------------------------------------
// Hand-off to the workloads: capblock's events (EventBridge) and the actions rules ask for
// (SSM parameters and Run Command, Auto Scaling)
// ---------------------------------------------------------------------------------------------

#[async_trait]
pub trait EventBus: Send + Sync {
    /// Puts the entries on the bus, in PutEvents calls of at most 10. One result per entry, in
    /// order: EventBridge accepts or refuses each entry on its own.
    async fn put(&self, entries: &[BusEntry]) -> Vec<Result<(), NotifyError>>;
}

/// What a hand-off action's AWS call comes to.
pub type ActionResult<T> = Result<T, ActionError>;

/// A hand-off action's AWS call failed. Nothing about money: a retry is always safe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} in {region} failed: {message}")]
pub struct ActionError {
    pub operation: &'static str,
    pub region: String,
    pub message: String,
}

#[async_trait]
pub trait Parameters: Send + Sync {
    /// Writes (overwrites) a String parameter.
    async fn put_parameter(&self, region: &Region, name: &str, value: &str) -> Result<(), ActionError>;
    /// The parameter's value; `None` when it does not exist.
    async fn parameter(&self, region: &Region, name: &str) -> Result<Option<String>, ActionError>;
    /// Deletes it; a parameter already gone is no error.
    async fn delete_parameter(&self, region: &Region, name: &str) -> Result<(), ActionError>;
}

#[async_trait]
pub trait Groups: Send + Sync {
    /// SetDesiredCapacity (without honoring cooldowns: the block's time is the schedule).
    async fn set_desired(&self, region: &Region, group: &str, desired: u32) -> Result<(), ActionError>;
    /// Which of the groups exist in the region (for `rules validate`).
    async fn existing(&self, region: &Region, groups: &[String]) -> Result<Vec<String>, ActionError>;
}

/// A Run Command capblock sent: as SSM lists it, and as capblock records it once sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentCommand {
    pub command_id: String,
    pub instance_ids: Vec<String>,
}

#[async_trait]
pub trait Commands: Send + Sync {
    /// SendCommand of `document` to the instances, marked with `comment`; the command id.
    async fn send(&self, region: &Region, document: &str, instances: &[String], comment: &str) -> ActionResult<String>;
    /// The commands of `document` marked `comment` sent to any of the instances. Anyone allowed
    /// to send commands can send one with that mark: asked only for a send of capblock's whose
    /// answer was lost.
    async fn sent(
        &self,
        region: &Region,
        document: &str,
        comment: &str,
        instance_ids: &[String],
    ) -> Result<Vec<SentCommand>, ActionError>;
    /// One instance's outcome of a command.
    async fn invocation(&self, region: &Region, command_id: &str, instance: &str) -> ActionResult<Invocation>;
}
