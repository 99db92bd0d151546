//! The store: DynamoDB's items (rules, the ledger of intents and budgets, blocks, extensions,
//! observations, alarms, the stack's settings, market memory, announced list rates).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::alarm::AlarmState;
use crate::domain::block::Block;
use crate::domain::budget::{BudgetCharge, BudgetOwner, BudgetUsage, ChargeRefusal, Intent, Period, ReleasedHold};
use crate::domain::extension::{ExtensionIntent, ExtensionState};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::list_price::ListRate;
use crate::domain::offering::Offering;
use crate::domain::plan::RegionMemory;
use crate::domain::preflight::Preflight;
use crate::domain::rule::Rule;
use crate::domain::stack::StoredSettings;

use super::Notice;

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

/// An outbox key that breaks the grammar (`domain::outbox_key`): one read back from the store
/// does not decode, and one built from a name that cannot be a key is refused before it is
/// written. Either reads the same on a retry: corrupt, named by the key.
impl From<crate::domain::outbox_key::OutboxKeyError> for StoreError {
    fn from(e: crate::domain::outbox_key::OutboxKeyError) -> Self {
        StoreError::Corrupt { message: e.problem.to_string(), key: e.key }
    }
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
    /// The approval the intent buys on was consumed by another purchase of the same block.
    #[error("the approval was used by a purchase already: one approval buys one block")]
    ApprovalUsed,
    /// The request the intent buys for was cancelled, or is gone, since the scan read it: the
    /// reservation checks the request item itself, so a cancel that lands first stops it.
    #[error("request {0} was cancelled before its purchase was reserved")]
    RequestClosed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReserveError {
    /// A budget's refusal of a charge (`BudgetCharge::condition`), naming the budget.
    pub fn refused(refusal: ChargeRefusal, charge: &BudgetCharge) -> Self {
        match refusal {
            ChargeRefusal::PurchaseLimit => ReserveError::PurchaseLimit,
            ChargeRefusal::OverBudget => ReserveError::OverBudget(charge.owner.key()),
        }
    }
}

/// The per-rule purchase guard: at most one open intent per rule, and a sequence number that
/// moves on every reservation so a decision made on stale counts cannot commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleGuard {
    pub open_intent: Option<String>,
    pub seq: u64,
    /// The purchases EC2 may hold with no held block in the table (a person's release, a fee
    /// kept for a part not yet adopted): each counts against the rule's `max_blocks_held`
    /// until its `ReleasedHold::until`.
    #[serde(default)]
    pub released: Vec<ReleasedHold>,
}

/// Purchase bookkeeping: intents, budgets and the rule guard, moved together in transactions.
#[async_trait]
pub trait Ledger: Send + Sync {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError>;
    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError>;

    /// In one transaction: creates the intent (state Reserved), charges its fee to every
    /// budget (each must stay within its limit), and takes the rule guard (no open intent,
    /// `seq` unchanged since `seen_seq`); an intent bought on a person's approval
    /// (`intent.approval`) consumes it: the approval's record and its block's marker
    /// (`Offering::block_key`) must not be consumed yet (`ReserveError::ApprovalUsed`). All or
    /// nothing.
    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError>;

    /// Reserved -> Sent, just before PurchaseCapacityBlock. Fails if the intent is not Reserved.
    async fn mark_sent(&self, intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Sent -> Bought: writes the block and its purchase notice, moves the fee from reserved to
    /// spent, frees the guard. All or nothing.
    async fn record_bought(&self, intent: &Intent, block: &Block, notices: &[Notice]) -> Result<(), StoreError>;

    /// Reserved/Sent -> Rejected: releases the fee and frees the guard. The offering stays
    /// tried: the rule never sends a purchase for it again. A request's approval it consumed is
    /// given back in the same write: EC2 bought nothing on it, and another offering may.
    async fn record_rejected(&self, intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError>;

    /// A person's release of a Sent intent EC2 lists nothing for (`capblock intents release`):
    /// as `record_rejected`, and in the same transaction the rule's guard keeps a
    /// `ReleasedHold` of it, so it counts against `max_blocks_held` until the offering's start.
    async fn release_by_person(&self, intent: &Intent, reason: &str) -> Result<(), StoreError>;

    /// Keeps `hold` on rule `rule_id`'s guard (a failed payment's fee kept for a purchase part
    /// EC2 may hold: `track::kept_fee_hold`), so the purchase counts against `max_blocks_held`
    /// until `hold.until` even while no block of it is held in the table. Idempotent: a hold
    /// already there is not added twice. Intents and budgets are untouched.
    async fn add_hold(&self, rule_id: &str, hold: &ReleasedHold) -> Result<(), StoreError>;

    /// For an intent whose purchase certainly never took effect at EC2 (throttled, stopped
    /// before sending, abandoned while Reserved): in one transaction, removes the intent
    /// (only if it is still in `intent.state`), releases the fee and frees the guard, so a later
    /// run may try the same offering again. An approval it consumed is given back too: nothing
    /// was bought on it.
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

    /// Every decision recorded for a person's approval for this rule and not consumed by a
    /// purchase (expired ones too: the caller judges them, `domain::approval`). For the team
    /// page.
    async fn approvals_waiting(&self, rule_id: &str) -> Result<Vec<Intent>, StoreError> {
        Err(StoreError::Unavailable(format!("this store cannot list the approvals of rule {rule_id}")))
    }

    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError>;
    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError>;

    /// A purchase whose payment failed was never charged: in one transaction, moves the
    /// intent's fee out of `committed` and `spent` of every budget the intent charged, gives
    /// the purchase back to the month's count when `restore_purchase`, and marks the intent
    /// (and `block`'s item) released. Returns false (and changes nothing) if the intent's fee was
    /// released before, so it happens once per purchase, however many runs try and however many
    /// block items (UltraServers) the purchase made: one fee, given back once. An intent that
    /// is not stored held no fee: a conflict, nothing changed.
    async fn release_failed_block(
        &self,
        block: &Block,
        intent: &Intent,
        restore_purchase: bool,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// EC2 holds a block of a purchase whose fee was released (a payment seen failed that EC2
    /// then took after all): in one transaction, puts the intent's fee back into `committed` and
    /// `spent` of every budget it charged, with no limit (EC2 took the money: the books must say
    /// so, over a limit or not), counts the purchase again when `count_purchase`, and clears the
    /// release marks on the intent and on `block`'s item. Returns false (and changes nothing)
    /// if the intent's fee is not released: once per release, however many runs and parts see
    /// the block held.
    async fn recommit_released_fee(
        &self,
        block: &Block,
        intent: &Intent,
        count_purchase: bool,
    ) -> Result<bool, StoreError>;

    /// EC2 holds `block`, a reservation tagged with `intent`, which was closed unbought (a
    /// person released it while EC2 had not listed the purchase yet, or EC2 made a purchase it
    /// had refused): in one transaction, the intent becomes Bought with `block` as its
    /// purchase, `block` is written, and the fee goes back into `committed` and `spent` of
    /// every budget the intent charged, with no limit (EC2 took the money: the books must say
    /// so), the purchase counted again. Returns false (and changes nothing) when the intent is
    /// no longer Rejected or the block is stored already: once, however many runs see it.
    async fn record_held_after_close(&self, intent: &Intent, block: &Block) -> Result<bool, StoreError>;
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
    /// Commits again the fee of an intent closed as Released that EC2's extension history shows
    /// it holds after all (pending or paid): in one transaction the intent moves Released ->
    /// Paid, conditional on Released so it happens once, and every budget it charged counts the
    /// fee as committed and spent again, whatever its limit (EC2 has charged it). `Conflict` if
    /// it is no longer Released (another run re-committed it first).
    async fn recommit_extension(&self, intent: &ExtensionIntent, reason: &str) -> Result<(), StoreError>;
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

/// A stored price as the backtest replays it (the CLI's `backtest`, the drought's "what it
/// would have bought").
impl From<Observation> for crate::domain::backtest::Sample {
    fn from(o: Observation) -> Self {
        Self { seen_at: o.seen_at, offering: o.offering, accelerators_per_instance: o.accelerators_per_instance }
    }
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
/// The longest a region claim holds: Lambda runs a function at most 15 minutes.
pub const MAX_REGION_CLAIM: chrono::Duration = chrono::Duration::minutes(15);

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

/// The list rates the operator recorded from AWS's announcements (`capblock rates announce`),
/// read beside the published table (`domain::list_price::RateBook`) by preflight, `rules put` and
/// the team page.
#[async_trait]
pub trait RateStore: Send + Sync {
    /// Records `rate` (announced), replacing one recorded for the same family and day.
    async fn announce_rate(&self, rate: &ListRate) -> Result<(), StoreError>;
    /// Forgets the rate recorded for `family` from `effective`; returns whether one was.
    async fn withdraw_rate(&self, family: &str, effective: chrono::NaiveDate) -> Result<bool, StoreError>;
    /// Every recorded rate, in any order.
    async fn announced_rates(&self) -> Result<Vec<ListRate>, StoreError>;
}

/// The names Lambda runs the stack's functions under, as each function recorded its own: how
/// `capblock preflight` finds the functions to ask about their roles.
#[async_trait]
pub trait FunctionDirectory: Send + Sync {
    /// Records that function `kind` (`scan-offerings`, ...) runs as `name`.
    async fn record_function(&self, kind: &str, name: &str) -> Result<(), StoreError>;
    /// Every recorded function: kind to name.
    async fn functions(&self) -> Result<std::collections::BTreeMap<String, String>, StoreError>;
}

/// Offerings a person saw (`capblock offerings`), for `capblock buy` to take one by its id.
#[async_trait]
pub trait SeenOfferings: Send + Sync {
    /// Remembers each offering until `until`; returns how many were written.
    async fn remember_offerings(&self, offerings: &[Offering], until: DateTime<Utc>) -> Result<usize, StoreError>;
    /// The offering seen under `id`, unless it was forgotten by `now`.
    async fn seen_offering(&self, id: &str, now: DateTime<Utc>) -> Result<Option<Offering>, StoreError>;
    /// Every offering seen under an id that starts with `prefix` and not forgotten by `now`: the
    /// short id the narrow table prints (`cb-` and the id's next 8 characters) names one of
    /// them, as a short commit hash names a commit.
    async fn seen_offerings_starting(&self, prefix: &str, now: DateTime<Utc>) -> Result<Vec<Offering>, StoreError>;
}

/// The last `capblock preflight` of the stack, for `capblock status`.
#[async_trait]
pub trait PreflightStore: Send + Sync {
    async fn save_preflight(&self, preflight: &Preflight) -> Result<(), StoreError>;
    /// The last preflight; `None` when none was run.
    async fn last_preflight(&self) -> Result<Option<Preflight>, StoreError>;
}

/// The query planner's memory per region (`domain::plan::RegionMemory`): the cursor of what was
/// asked when, and what EC2 said of the region.
#[async_trait]
pub trait MarketMemory: Send + Sync {
    /// The region's memory; empty when none was saved.
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError>;
    /// Saves `memory`, what a run that read `read` ends with. Another run may have saved since
    /// (overlapping scans): the store merges the two (`RegionMemory::merged`), never overwrites.
    async fn save_region_memory(
        &self,
        region: &Region,
        read: &RegionMemory,
        memory: &RegionMemory,
    ) -> Result<(), StoreError>;
    /// Claims the asking of `region` for the run `run` until `until` (the clock's), unless
    /// another run's claim is still good at `now`: true when this run may ask the region. Two
    /// overlapping scans (a late invocation, no reserved concurrency) then never ask one region
    /// at once, so no question is asked twice in one slot and the paces do not add up. A claim
    /// ending more than `MAX_REGION_CLAIM` after `now` is no run's (a scan lasts at most
    /// Lambda's 15 minutes): it does not hold, or a forged one would stop the region's asking.
    async fn claim_region(
        &self,
        region: &Region,
        run: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Ends `run`'s claim of `region` (another run's is left alone).
    async fn release_region(&self, region: &Region, run: &str) -> Result<(), StoreError>;
}

/// A request item as read back, with the key it was read under: the requester and id of the
/// key, which `domain::request::check_item` holds the item's own fields to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRequest {
    pub request: crate::domain::request::Request,
    pub keyed_requester: String,
    pub keyed_id: String,
}

/// People's capacity requests (`domain::request`): the request items, each under its
/// requester's own key, and the decisions on them, under keys of their own. A decision's
/// approval is consumed by the purchase it makes, in `Ledger::reserve`'s transaction.
#[async_trait]
pub trait RequestStore: Send + Sync {
    /// Files `request` under its requester's key; `Conflict` if a request of that id is there.
    async fn file_request(&self, request: &crate::domain::request::Request) -> Result<(), StoreError>;
    /// The requester's cancel: marks their request cancelled at `at`, conditional on its not
    /// being cancelled yet (`Conflict`), `NotFound` if they have no such request.
    async fn cancel_request(&self, requester: &str, id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;
    /// Every request item (through the index: eventually consistent), each with its key. An
    /// item that does not decode is left out and counted, as in every listing.
    async fn requests(&self) -> Result<Vec<StoredRequest>, StoreError>;
    /// The request items under `requester`'s own key: what a requester, whose policy lets them
    /// read no listing, may list (`capblock requests list` of a non-approver). The adapters that
    /// can read the key directly do; otherwise the listing, filtered by key.
    async fn requests_of(&self, requester: &str) -> Result<Vec<StoredRequest>, StoreError> {
        Ok(self.requests().await?.into_iter().filter(|r| r.keyed_requester == requester).collect())
    }
    /// Records the decision on a request, once: `Conflict` if it has one.
    async fn decide_request(&self, decision: &crate::domain::request::RequestDecision) -> Result<(), StoreError>;
    /// The decision on request `id`, read strongly, with the intent that consumed it if any.
    async fn decision(&self, id: &str) -> Result<Option<crate::domain::request::RequestDecision>, StoreError>;
}
