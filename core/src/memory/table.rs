//! The table in memory: every store port over one lock, so each call is as atomic as the
//! DynamoDB transaction or conditional write it stands for (`aws/dynamo`), with the same
//! conditions: an intent must not exist, the rule guard must be free and unmoved, each budget
//! must keep `committed <= limit` and `purchases < max`, a closing intent must still be open,
//! a block update must find its version, a failed payment's fee goes back once per intent.
//!
//! A journal names every write (`writes()`), for tests that assert what a run wrote, and above
//! all that a replay wrote nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::domain::alarm::AlarmState;
use crate::domain::block::Block;
use crate::domain::budget::{
    Approved, BudgetCharge, BudgetOwner, BudgetUsage, ChargeCondition, Intent, IntentState, Period, ReleasedHold,
};
use crate::domain::extension::{ExtensionIntent, ExtensionState};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::list_price::ListRate;
use crate::domain::money::{Currency, Money};
use crate::domain::offering::Offering;
use crate::domain::outbox_key::OutboxKey;
use crate::domain::plan::RegionMemory;
use crate::domain::preflight::Preflight;
use crate::domain::request::{Request, RequestDecision, RequestVerdict};
use crate::domain::rule::Rule;
use crate::domain::settlement::held_after_close;
use crate::domain::stack::StoredSettings;
use crate::ports::*;

/// One budget item (`BUDGET#<owner>` / `PERIOD#<month>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRow {
    pub committed: Decimal,
    pub spent: Decimal,
    pub purchases: u32,
    pub currency: Currency,
}

#[derive(Clone)]
struct IntentRow {
    intent: Intent,
    fee_released_at: Option<DateTime<Utc>>,
}

#[derive(Clone)]
struct BlockRow {
    block: Block,
    open_extension: Option<String>,
    budget_released_at: Option<DateTime<Utc>>,
}

#[derive(Clone)]
struct NoticeRow {
    notice: Notice,
    /// In the pending index (an outbox notice not yet published; records never are).
    pending: bool,
    lease_until: Option<DateTime<Utc>>,
    published_at: Option<DateTime<Utc>>,
}

#[derive(Default)]
struct Items {
    rules: BTreeMap<String, StoredRule>,
    guards: BTreeMap<String, RuleGuard>,
    /// The guard's `held`: the reservation ids recorded with each rule (bought or adopted),
    /// written with the block, read strongly: what the rule's count reads besides the index.
    held: BTreeMap<String, BTreeSet<String>>,
    /// By (rule, offering id), as `RULE#<id>` / `INTENT#<offering>`.
    intents: BTreeMap<(String, String), IntentRow>,
    dry_runs: BTreeSet<(String, String)>,
    approvals: BTreeMap<(String, String), Intent>,
    approval_blocks: BTreeSet<(String, String)>,
    /// Consumed approvals, as `consumed_by` on `APPROVAL#<offering>` and on the block's
    /// `APPROVALBLOCK#<block key>` marker: (rule, offering id) and (rule, block key) -> intent.
    approvals_used: BTreeMap<(String, String), String>,
    approval_blocks_used: BTreeMap<(String, String), String>,
    /// People's requests by (keyed requester, id), as `REQUEST#<requester>` / `REQUEST#<id>`.
    requests: BTreeMap<(String, String), Request>,
    /// The decisions on them by request id (`REQUESTDECISION#<id>`), `consumed_by` included.
    decisions: BTreeMap<String, RequestDecision>,
    budgets: BTreeMap<(String, Period), BudgetRow>,
    blocks: BTreeMap<String, BlockRow>,
    extensions: BTreeMap<(String, String), ExtensionIntent>,
    /// Extension items that do not decode, by (block, offering): `BLOCK#<r>` / `EXT#<o>`.
    corrupt_extensions: BTreeSet<(String, String)>,
    observations: Vec<Observation>,
    alarms: BTreeMap<String, AlarmState>,
    settings: Option<StoredSettings>,
    functions: BTreeMap<String, String>,
    seen: BTreeMap<String, (Offering, DateTime<Utc>)>,
    preflight: Option<Preflight>,
    memory: BTreeMap<Region, (RegionMemory, u64)>,
    /// Region -> (run, until): which run asks it now.
    region_claims: BTreeMap<Region, (String, DateTime<Utc>)>,
    /// The hour whose team page a run claimed (`STACK` / `PAGE`).
    page_hour: Option<DateTime<Utc>>,
    /// The operator's announced list rates, by family and day.
    rates: BTreeMap<(String, chrono::NaiveDate), ListRate>,
    /// By (thread, milestone), as `BLOCK#<thread>` / `NOTICE#<milestone>`.
    notices: BTreeMap<(String, OutboxKey), NoticeRow>,
    /// The pending index (gsi1 `NOTICE#PENDING`): creation time, id, key.
    pending: BTreeSet<(DateTime<Utc>, String, (String, OutboxKey))>,
}

/// Every store port in memory. `Default` is an empty table; `with_*` seed it as a test needs.
#[derive(Default)]
pub struct MemoryTable {
    items: Mutex<Items>,
    journal: Mutex<Vec<String>>,
    /// Keeps no journal and no price history (a simulated year would hold millions of lines).
    quiet: bool,
    /// Writes that move money or a block (the ledger, blocks, extensions), counted.
    money_moves: std::sync::atomic::AtomicU64,
    /// The open-blocks index (gsi1 `BLOCK#OPEN`) as it lags: while set, reads through the index
    /// see the blocks as they were when the lag began (`lag_index`), as DynamoDB's eventually
    /// consistent GSI may; the base table's reads see every write.
    index_lag: Mutex<Option<BTreeMap<String, Block>>>,
    /// The next money-moving write commits and answers an error, as a DynamoDB write whose
    /// answer was lost (a timeout, a dropped connection) after the table applied it.
    lose_answer: std::sync::atomic::AtomicBool,
    /// The next reservation is cancelled for a conflict with another writer's transaction
    /// (DynamoDB's `TransactionConflict`): nothing of it is written.
    cancel_transaction: std::sync::atomic::AtomicBool,
}

/// DynamoDB's largest item: a write of a bigger one is refused (`ValidationException`).
const MAX_ITEM_BYTES: usize = 400 * 1024;

fn conflict(what: impl Into<String>) -> StoreError {
    StoreError::Conflict(what.into())
}

impl MemoryTable {
    fn items(&self) -> MutexGuard<'_, Items> {
        // A panic elsewhere (a failing test) must not hide behind a poisoned lock.
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wrote(&self, what: impl Into<String>) {
        if !self.quiet {
            self.journal.lock().unwrap_or_else(|p| p.into_inner()).push(what.into());
        }
    }

    /// A write that moves money or a block, made: its answer, which a fault may lose.
    fn moved(&self, what: impl Into<String>) -> Result<(), StoreError> {
        self.money_moves.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let what = what.into();
        self.wrote(what.clone());
        if self.lose_answer.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Err(StoreError::Unavailable(format!("{what}: the answer was lost after the write")));
        }
        Ok(())
    }

    /// The next write that moves money or a block commits and answers an error.
    pub fn lose_next_answer(&self) {
        self.lose_answer.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The next reservation is cancelled for a conflict with another writer's transaction.
    pub fn conflict_next_transaction(&self) {
        self.cancel_transaction.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A transaction cancelled for a conflict, as the adapter reads DynamoDB's
    /// `TransactionConflict`: another writer is on the rule's items, decide again.
    fn cancelled_for_a_conflict(&self) -> Result<(), ReserveError> {
        match self.cancel_transaction.swap(false, std::sync::atomic::Ordering::Relaxed) {
            true => Err(ReserveError::RuleBusy),
            false => Ok(()),
        }
    }

    /// Stores what budget `owner` committed in `period` as the number `committed` is written
    /// (DynamoDB trims trailing zeros; `usage` reads this table's numbers so too).
    pub fn store_committed_as(&self, owner: &BudgetOwner, period: &Period, committed: Decimal) {
        if let Some(row) = self.items().budgets.get_mut(&(owner.key(), period.clone())) {
            row.committed = committed;
        }
    }

    /// A table that keeps no journal and no price history, for long simulations.
    pub fn quiet() -> Self {
        MemoryTable { quiet: true, ..Default::default() }
    }

    /// From now on the open-blocks index lags: its reads see the blocks as they are now, not
    /// the writes that follow, until `catch_up_index`.
    pub fn lag_index(&self) {
        let now: BTreeMap<String, Block> =
            self.items().blocks.iter().map(|(id, r)| (id.clone(), r.block.clone())).collect();
        *self.index_lag.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
    }

    /// The index sees every write again.
    pub fn catch_up_index(&self) {
        *self.index_lag.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The open blocks as the index shows them now (lagging or not).
    fn indexed_open_blocks(&self) -> Vec<Block> {
        let lagging = self.index_lag.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let blocks = match lagging {
            Some(seen) => seen.into_values().collect::<Vec<_>>(),
            None => self.items().blocks.values().map(|r| r.block.clone()).collect(),
        };
        blocks.into_iter().filter(|b| !b.state.is_final()).collect()
    }

    /// Stores an extension item of `reservation_id` that does not decode: a block's extensions
    /// read strictly fail on it (`StoreError::Corrupt`), the open ones leave it out, as on
    /// DynamoDB.
    pub fn with_corrupt_extension(self, reservation_id: &str, offering_id: &str) -> Self {
        self.items().corrupt_extensions.insert((reservation_id.to_string(), offering_id.to_string()));
        self
    }

    /// How many writes moved money or a block so far.
    pub fn money_moves(&self) -> u64 {
        self.money_moves.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Decisions recorded for a person's approval since `since` (older ones have expired).
    pub fn approvals_since(&self, since: DateTime<Utc>) -> Vec<Intent> {
        self.items().approvals.values().filter(|i| i.created_at >= since).cloned().collect()
    }

    /// The name of every write so far, in order.
    pub fn writes(&self) -> Vec<String> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stores `rules` (version 1 each).
    pub fn with_rules(self, rules: impl IntoIterator<Item = Rule>) -> Self {
        {
            let mut items = self.items();
            for rule in rules {
                items.rules.insert(rule.id.clone(), StoredRule { rule, version: 1 });
            }
        }
        self
    }

    /// Stores intents as the ledger would have left them: an open one holds its rule's guard
    /// and commits its fee; a bought one has spent it; each counts as a purchase.
    pub fn with_intents(self, intents: impl IntoIterator<Item = Intent>) -> Self {
        {
            let mut items = self.items();
            for intent in intents {
                let fee = intent.offering.fee;
                for c in &intent.charges {
                    let row = budget_row(&mut items, c, fee.currency());
                    match intent.state {
                        IntentState::Reserved | IntentState::Sent | IntentState::Bought => {
                            row.committed += fee.amount();
                            row.purchases += 1;
                        }
                        _ => {}
                    }
                    if intent.state == IntentState::Bought {
                        row.spent += fee.amount();
                    }
                }
                if intent.state.is_open() {
                    let guard = items.guards.entry(intent.rule_id.clone()).or_default();
                    guard.open_intent = Some(intent.id.clone());
                    guard.seq += 1;
                }
                let k = (intent.rule_id.clone(), intent.offering.id.clone());
                items.intents.insert(k, IntentRow { intent, fee_released_at: None });
            }
        }
        self
    }

    /// Stores blocks as they are.
    pub fn with_blocks(self, blocks: impl IntoIterator<Item = Block>) -> Self {
        {
            let mut items = self.items();
            for block in blocks {
                let row = BlockRow { block, open_extension: None, budget_released_at: None };
                items.blocks.insert(row.block.reservation_id.clone(), row);
            }
        }
        self
    }

    /// Stores extension intents; an open one holds its block's guard (the block must be stored).
    pub fn with_extensions(self, extensions: impl IntoIterator<Item = ExtensionIntent>) -> Self {
        {
            let mut items = self.items();
            for x in extensions {
                if x.state.is_open()
                    && let Some(b) = items.blocks.get_mut(&x.reservation_id)
                {
                    b.open_extension = Some(x.id());
                }
                items.extensions.insert((x.reservation_id.clone(), x.offer.id.clone()), x);
            }
        }
        self
    }

    /// Stores a region's market memory.
    pub fn with_memory(self, region: Region, memory: RegionMemory) -> Self {
        self.items().memory.insert(region, (memory, 1));
        self
    }

    /// Every intent, open or closed.
    pub fn intents(&self) -> Vec<Intent> {
        self.items().intents.values().map(|r| r.intent.clone()).collect()
    }

    /// Whether the failed payment of `intent_id` gave its fee back.
    pub fn fee_released(&self, rule_id: &str, offering_id: &str) -> bool {
        self.items()
            .intents
            .get(&(rule_id.to_string(), offering_id.to_string()))
            .is_some_and(|r| r.fee_released_at.is_some())
    }

    /// Every block, final states included.
    pub fn blocks(&self) -> Vec<Block> {
        self.items().blocks.values().map(|r| r.block.clone()).collect()
    }

    /// Every extension intent.
    pub fn extensions(&self) -> Vec<ExtensionIntent> {
        self.items().extensions.values().cloned().collect()
    }

    /// Every budget item, by owner key and month.
    pub fn budgets(&self) -> BTreeMap<(String, Period), BudgetRow> {
        self.items().budgets.clone()
    }

    /// Every notice (outbox and records), with whether it was published.
    pub fn notices(&self) -> Vec<(Notice, bool)> {
        self.items().notices.values().map(|r| (r.notice.clone(), r.published_at.is_some())).collect()
    }

    /// Every dry-run record, as (rule, block key).
    pub fn dry_runs(&self) -> Vec<(String, String)> {
        self.items().dry_runs.iter().cloned().collect()
    }
}

fn budget_row<'a>(items: &'a mut Items, c: &BudgetCharge, currency: Currency) -> &'a mut BudgetRow {
    items.budgets.entry((c.owner.key(), c.period.clone())).or_insert(BudgetRow {
        committed: Decimal::ZERO,
        spent: Decimal::ZERO,
        purchases: 0,
        currency,
    })
}

/// The condition of each of `charges` for `fee` (`BudgetCharge::condition`), refused outright
/// before anything is read, as `DynamoStore::charge` refuses before its transaction.
fn conditions(charges: &[BudgetCharge], fee: Money, purchase: bool) -> Result<Vec<ChargeCondition>, ReserveError> {
    charges.iter().map(|c| c.condition(fee, purchase).map_err(|r| ReserveError::refused(r, c))).collect()
}

/// Whether every budget's item holds its condition: DynamoDB's transaction, evaluated.
fn may_charge(items: &Items, charges: &[BudgetCharge], conds: &[ChargeCondition]) -> Result<(), ReserveError> {
    for (c, cond) in charges.iter().zip(conds) {
        let (committed, purchases) = items
            .budgets
            .get(&(c.owner.key(), c.period.clone()))
            .map_or((Decimal::ZERO, 0), |r| (r.committed, r.purchases));
        cond.check_held(committed, purchases).map_err(|r| ReserveError::refused(r, c))?;
    }
    Ok(())
}

fn charge(items: &mut Items, charges: &[BudgetCharge], fee: Money, purchase: bool) {
    for c in charges {
        let row = budget_row(items, c, fee.currency());
        row.committed += fee.amount();
        if purchase {
            row.purchases += 1;
        }
    }
}

/// How closing an intent moves its budgets.
#[derive(Clone, Copy)]
enum Close {
    /// Bought: the fee moves to spent.
    Spend,
    /// Rejected or given back: the fee and the purchase are released.
    Release,
}

impl Items {
    /// A fee EC2 took after all: committed and spent again on each charge's budget (its row
    /// made at zero if missing), and counted as a purchase when `purchase`.
    fn recommit(&mut self, charges: &[BudgetCharge], fee: Money, purchase: bool) {
        for c in charges {
            let row = budget_row(self, c, fee.currency());
            row.committed += fee.amount();
            row.spent += fee.amount();
            if purchase {
                row.purchases += 1;
            }
        }
    }

    /// `DynamoStore::close_intent`: the intent must be open (given back: still in its state),
    /// the guard must be the intent's, every budget must exist.
    fn close_intent(&mut self, intent: &Intent, closed: Option<Intent>, how: Close) -> Result<(), StoreError> {
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        let what = |why: &str| conflict(format!("closing intent {}: {why}", intent.id));
        let stored = self.intents.get(&k).ok_or_else(|| what("no such intent"))?;
        match &closed {
            Some(_) if !stored.intent.state.is_open() => return Err(what("no longer open")),
            None if stored.intent.state != intent.state => return Err(what("no longer in its state")),
            _ => {}
        }
        if self.guards.get(&intent.rule_id).and_then(|g| g.open_intent.as_ref()) != Some(&intent.id) {
            return Err(what("the rule guard is not its"));
        }
        if intent.charges.iter().any(|c| !self.budgets.contains_key(&(c.owner.key(), c.period.clone()))) {
            return Err(what("a budget it charged is missing"));
        }
        let fee = intent.offering.fee.amount();
        for c in &intent.charges {
            let row = self.budgets.get_mut(&(c.owner.key(), c.period.clone())).expect("checked above");
            match how {
                Close::Spend => row.spent += fee,
                Close::Release => {
                    row.committed -= fee;
                    row.purchases = row.purchases.saturating_sub(1);
                }
            }
        }
        if let Some(g) = self.guards.get_mut(&intent.rule_id) {
            g.open_intent = None;
        }
        match closed {
            Some(c) => {
                self.intents.get_mut(&k).expect("checked above").intent = c;
            }
            None => {
                self.intents.remove(&k);
            }
        }
        Ok(())
    }

    /// Un-consumes the approval of `intent`'s request, if `intent` consumed it: nothing was
    /// bought on it (`record_given_back`, `record_rejected`).
    fn give_request_back(&mut self, intent: &Intent) {
        if let Some(d) = intent.request.as_ref().and_then(|k| self.decisions.get_mut(&k.id))
            && d.consumed_by.as_ref() == Some(&intent.id)
        {
            d.consumed_by = None;
        }
    }

    /// `DynamoDB`'s conditions on consuming approval `a` of rule `rule`: its record exists and
    /// neither it nor its block's marker was consumed.
    fn may_consume_request(&self, id: &str) -> bool {
        self.decisions.get(id).is_some_and(|d| d.verdict == RequestVerdict::Approved && d.consumed_by.is_none())
    }

    fn may_consume(&self, rule: &str, a: &Approved) -> bool {
        let k = |s: &str| (rule.to_string(), s.to_string());
        self.approvals.contains_key(&k(&a.offering_id))
            && !self.approvals_used.contains_key(&k(&a.offering_id))
            && !self.approval_blocks_used.contains_key(&k(&a.block))
    }

    fn put_notice(&mut self, notice: &Notice, pending: bool) -> bool {
        let k = (notice.thread.clone(), notice.milestone.clone());
        if self.notices.contains_key(&k) {
            return false;
        }
        if pending {
            self.pending.insert((notice.created_at, notice.id(), k.clone()));
        }
        self.notices.insert(k, NoticeRow { notice: notice.clone(), pending, lease_until: None, published_at: None });
        true
    }
}

#[async_trait]
impl RuleStore for MemoryTable {
    async fn put_rule(&self, rule: &Rule, expected_version: Option<u64>) -> Result<u64, StoreError> {
        let size = serde_json::to_string(rule).map_or(0, |j| j.len());
        if size > MAX_ITEM_BYTES {
            return Err(StoreError::Unavailable(format!(
                "put rule {}: ValidationException: Item size has exceeded the maximum allowed size",
                rule.id
            )));
        }
        let mut items = self.items();
        let stored = items.rules.get(&rule.id).map(|r| r.version);
        match (expected_version, stored) {
            (Some(0), Some(_)) => return Err(conflict(format!("rule {} (version changed)", rule.id))),
            (Some(v), s) if v > 0 && s != Some(v) => {
                return Err(conflict(format!("rule {} (version changed)", rule.id)));
            }
            _ => {}
        }
        let version = expected_version.unwrap_or(0) + 1;
        items.rules.insert(rule.id.clone(), StoredRule { rule: rule.clone(), version });
        self.wrote(format!("put_rule {}", rule.id));
        Ok(version)
    }
    async fn get_rule(&self, id: &str) -> Result<Option<StoredRule>, StoreError> {
        Ok(self.items().rules.get(id).cloned())
    }
    async fn list_rules(&self) -> Result<Vec<StoredRule>, StoreError> {
        Ok(self.items().rules.values().cloned().collect())
    }
    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        self.wrote(format!("delete_rule {id}"));
        Ok(self.items().rules.remove(id).is_some())
    }
}

#[async_trait]
impl Ledger for MemoryTable {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError> {
        Ok(self.items().guards.get(rule_id).cloned().unwrap_or_default())
    }

    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError> {
        let items = self.items();
        let Some(row) = items.budgets.get(&(owner.key(), period.clone())) else { return Ok(None) };
        // DynamoDB keeps a number without its trailing zeros (4608.00 reads back as 4608):
        // so does this table, so that nothing shown depends on how an amount was written.
        let money = |d: Decimal| {
            Money::new(d.normalize(), row.currency)
                .map_err(|e| StoreError::Corrupt { key: format!("budget {}", owner.key()), message: e.to_string() })
        };
        Ok(Some(BudgetUsage { committed: money(row.committed)?, spent: money(row.spent)?, purchases: row.purchases }))
    }

    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError> {
        let mut items = self.items();
        let conds = conditions(&intent.charges, intent.offering.fee, true)?;
        self.cancelled_for_a_conflict()?;
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        if items.intents.contains_key(&k) {
            return Err(ReserveError::AlreadyExists);
        }
        let guard = items.guards.get(&intent.rule_id).cloned().unwrap_or_default();
        if guard.open_intent.is_some() || guard.seq != seen_seq {
            return Err(ReserveError::RuleBusy);
        }
        if let Some(a) = &intent.approval
            && !items.may_consume(&intent.rule_id, a)
        {
            return Err(ReserveError::ApprovalUsed);
        }
        if let Some(key) = &intent.request {
            // As the adapter's condition check on the request item: filed and not cancelled.
            let open =
                items.requests.get(&(key.requester.clone(), key.id.clone())).is_some_and(|r| r.cancelled_at.is_none());
            if !open {
                return Err(ReserveError::RequestClosed(key.id.clone()));
            }
            if !items.may_consume_request(&key.id) {
                return Err(ReserveError::ApprovalUsed);
            }
        }
        may_charge(&items, &intent.charges, &conds)?;
        if let Some(d) = intent.request.as_ref().and_then(|k| items.decisions.get_mut(&k.id)) {
            d.consumed_by = Some(intent.id.clone());
        }
        if let Some(a) = &intent.approval {
            let r = intent.rule_id.clone();
            items.approvals_used.insert((r.clone(), a.offering_id.clone()), intent.id.clone());
            items.approval_blocks_used.insert((r, a.block.clone()), intent.id.clone());
        }
        charge(&mut items, &intent.charges, intent.offering.fee, true);
        let g = items.guards.entry(intent.rule_id.clone()).or_default();
        g.open_intent = Some(intent.id.clone());
        g.seq += 1;
        items.intents.insert(k, IntentRow { intent: intent.clone(), fee_released_at: None });
        self.moved(format!("reserve {}", intent.id))?;
        Ok(())
    }

    async fn mark_sent(&self, intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut items = self.items();
        let offering_id = intent_id.strip_prefix(&format!("{rule_id}/")).unwrap_or(intent_id);
        let Some(row) = items.intents.get_mut(&(rule_id.to_string(), offering_id.to_string())) else {
            return Err(StoreError::NotFound { what: format!("intent {intent_id}") });
        };
        if row.intent.state != IntentState::Reserved {
            return Err(conflict(format!("intent {intent_id} is no longer reserved")));
        }
        row.intent.state = IntentState::Sent;
        row.intent.sent_at = Some(at);
        self.moved(format!("mark_sent {intent_id}"))?;
        Ok(())
    }

    async fn record_bought(&self, intent: &Intent, block: &Block, notices: &[Notice]) -> Result<(), StoreError> {
        let mut items = self.items();
        if items.blocks.contains_key(&block.reservation_id) {
            return Err(conflict(format!("block {} exists", block.reservation_id)));
        }
        if notices.iter().any(|n| items.notices.contains_key(&(n.thread.clone(), n.milestone.clone()))) {
            return Err(conflict(format!("a notice of intent {} exists", intent.id)));
        }
        let mut closed = intent.clone();
        closed.state = IntentState::Bought;
        closed.reservation_id = Some(block.reservation_id.clone());
        items.close_intent(intent, Some(closed), Close::Spend)?;
        items.blocks.insert(
            block.reservation_id.clone(),
            BlockRow { block: block.clone(), open_extension: None, budget_released_at: None },
        );
        items.held.entry(intent.rule_id.clone()).or_default().insert(block.reservation_id.clone());
        for n in notices {
            items.put_notice(n, true);
        }
        self.moved(format!("record_bought {}", intent.id))?;
        Ok(())
    }

    async fn record_rejected(&self, intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError> {
        let mut items = self.items();
        if let Some(n) = notice
            && items.notices.contains_key(&(n.thread.clone(), n.milestone.clone()))
        {
            return Err(conflict(format!("notice {} exists", n.id())));
        }
        let mut closed = intent.clone();
        closed.state = IntentState::Rejected;
        closed.reason = Some(reason.to_string());
        items.close_intent(intent, Some(closed), Close::Release)?;
        if let Some(n) = notice {
            items.put_notice(n, true);
        }
        // As the adapter: a request's approval is given back with the fee.
        items.give_request_back(intent);
        self.moved(format!("record_rejected {}", intent.id))?;
        Ok(())
    }

    async fn release_by_person(&self, intent: &Intent, reason: &str) -> Result<(), StoreError> {
        let mut items = self.items();
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        if items.intents.get(&k).map(|r| r.intent.state) != Some(IntentState::Sent) {
            return Err(conflict(format!("intent {} is not sent", intent.id)));
        }
        let mut closed = intent.clone();
        closed.state = IntentState::Rejected;
        closed.reason = Some(reason.to_string());
        items.close_intent(intent, Some(closed), Close::Release)?;
        items.guards.entry(intent.rule_id.clone()).or_default().released.push(ReleasedHold::of(intent));
        self.moved(format!("release_by_person {}", intent.id))?;
        Ok(())
    }

    async fn add_hold(&self, rule_id: &str, hold: &ReleasedHold) -> Result<(), StoreError> {
        let mut items = self.items();
        let released = &mut items.guards.entry(rule_id.to_string()).or_default().released;
        if !released.contains(hold) {
            released.push(hold.clone());
        }
        self.moved(format!("add_hold {rule_id} {}", hold.intent))?;
        Ok(())
    }

    async fn record_given_back(&self, intent: &Intent, _: &str) -> Result<(), StoreError> {
        let mut items = self.items();
        items.close_intent(intent, None, Close::Release)?;
        // Nothing was bought on the approval: it may be approved again.
        if let Some(a) = &intent.approval {
            let r = intent.rule_id.clone();
            let mine = |m: &mut BTreeMap<(String, String), String>, k: (String, String)| {
                if m.get(&k) == Some(&intent.id) {
                    m.remove(&k);
                }
            };
            mine(&mut items.approvals_used, (r.clone(), a.offering_id.clone()));
            mine(&mut items.approval_blocks_used, (r, a.block.clone()));
        }
        items.give_request_back(intent);
        drop(items);
        self.moved(format!("record_given_back {}", intent.id))?;
        Ok(())
    }

    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError> {
        let fresh = self.items().dry_runs.insert((intent.rule_id.clone(), intent.offering.block_key()));
        if fresh {
            self.wrote(format!("record_dry_run {}", intent.id));
        }
        Ok(fresh)
    }

    async fn record_approval(&self, intent: &Intent) -> Result<bool, StoreError> {
        let mut items = self.items();
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        items.approvals.entry(k).or_insert_with(|| intent.clone());
        let fresh = items.approval_blocks.insert((intent.rule_id.clone(), intent.offering.block_key()));
        if fresh {
            self.wrote(format!("record_approval {}", intent.id));
        }
        Ok(fresh)
    }

    async fn get_approval(&self, rule_id: &str, offering_id: &str) -> Result<Option<Intent>, StoreError> {
        Ok(self.items().approvals.get(&(rule_id.to_string(), offering_id.to_string())).cloned())
    }

    async fn approvals_waiting(&self, rule_id: &str) -> Result<Vec<Intent>, StoreError> {
        let items = self.items();
        // A record consumed, or of a block consumed under another id EC2 gave it, waits no more.
        let waiting = |k: &(String, String), i: &Intent| {
            k.0 == rule_id
                && !items.approvals_used.contains_key(k)
                && !items.approval_blocks_used.contains_key(&(k.0.clone(), i.offering.block_key()))
        };
        Ok(items.approvals.iter().filter(|(k, i)| waiting(k, i)).map(|(_, i)| i.clone()).collect())
    }

    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError> {
        let offering_id = intent_id.strip_prefix(&format!("{rule_id}/")).unwrap_or(intent_id);
        Ok(self.items().intents.get(&(rule_id.to_string(), offering_id.to_string())).map(|r| r.intent.clone()))
    }

    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError> {
        Ok(self.items().intents.values().filter(|r| r.intent.state.is_open()).map(|r| r.intent.clone()).collect())
    }

    async fn release_failed_block(
        &self,
        block: &Block,
        intent: &Intent,
        restore_purchase: bool,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut items = self.items();
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        match items.intents.get(&k) {
            None => return Err(conflict(format!("releasing the budget of block {}: no intent", block.reservation_id))),
            Some(r) if r.fee_released_at.is_some() => return Ok(false),
            Some(_) => {}
        }
        if !items.blocks.contains_key(&block.reservation_id) {
            return Err(conflict(format!("releasing the budget of block {}: no block", block.reservation_id)));
        }
        let fee = intent.offering.fee.amount();
        for c in &intent.charges {
            // The fee must have been spent there: never drive a budget below zero.
            let ok = items
                .budgets
                .get(&(c.owner.key(), c.period.clone()))
                .is_some_and(|r| r.spent >= fee && r.committed >= fee);
            if !ok {
                return Err(conflict(format!(
                    "releasing the budget of block {}: {} was not charged",
                    block.reservation_id,
                    c.owner.key()
                )));
            }
        }
        for c in &intent.charges {
            let row = items.budgets.get_mut(&(c.owner.key(), c.period.clone())).expect("checked above");
            row.committed -= fee;
            row.spent -= fee;
            if restore_purchase {
                row.purchases = row.purchases.saturating_sub(1);
            }
        }
        items.intents.get_mut(&k).expect("checked above").fee_released_at = Some(at);
        items.blocks.get_mut(&block.reservation_id).expect("checked above").budget_released_at = Some(at);
        self.moved(format!("release_failed_block {}", block.reservation_id))?;
        Ok(true)
    }

    async fn recommit_released_fee(
        &self,
        block: &Block,
        intent: &Intent,
        count_purchase: bool,
    ) -> Result<bool, StoreError> {
        let mut items = self.items();
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        match items.intents.get(&k) {
            None => return Err(conflict(format!("recommitting the fee of block {}: no intent", block.reservation_id))),
            Some(r) if r.fee_released_at.is_none() => return Ok(false),
            Some(_) => {}
        }
        if !items.blocks.contains_key(&block.reservation_id) {
            return Err(conflict(format!("recommitting the fee of block {}: no block", block.reservation_id)));
        }
        items.recommit(&intent.charges, intent.offering.fee, count_purchase);
        items.intents.get_mut(&k).expect("checked above").fee_released_at = None;
        items.blocks.get_mut(&block.reservation_id).expect("checked above").budget_released_at = None;
        self.moved(format!("recommit_released_fee {}", block.reservation_id))?;
        Ok(true)
    }

    async fn record_held_after_close(&self, intent: &Intent, block: &Block) -> Result<bool, StoreError> {
        let mut items = self.items();
        let k = (intent.rule_id.clone(), intent.offering.id.clone());
        match items.intents.get(&k) {
            None => return Err(conflict(format!("recording block {}: no intent", block.reservation_id))),
            Some(r) if r.intent.state != IntentState::Rejected => return Ok(false),
            Some(_) => {}
        }
        if items.blocks.contains_key(&block.reservation_id) {
            return Ok(false);
        }
        items.recommit(&intent.charges, intent.offering.fee, true);
        let row = items.intents.get_mut(&k).expect("checked above");
        row.intent = held_after_close(&row.intent, &block.reservation_id);
        items.blocks.insert(
            block.reservation_id.clone(),
            BlockRow { block: block.clone(), open_extension: None, budget_released_at: None },
        );
        items.held.entry(intent.rule_id.clone()).or_default().insert(block.reservation_id.clone());
        self.moved(format!("record_held_after_close {}", block.reservation_id))?;
        Ok(true)
    }
}

#[async_trait]
impl BlockStore for MemoryTable {
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError> {
        let indexed = self.indexed_open_blocks();
        let Some(rule) = rule_id else { return Ok(indexed) };
        // As the DynamoDB adapter: the index's ids and the guard's `held`, each block then
        // read from the base table, so a block recorded a moment ago is counted.
        let items = self.items();
        let mut ids: BTreeSet<String> =
            indexed.into_iter().filter(|b| b.rule_id.as_deref() == Some(rule)).map(|b| b.reservation_id).collect();
        ids.extend(items.held.get(rule).into_iter().flatten().cloned());
        Ok(ids
            .iter()
            .filter_map(|id| items.blocks.get(id))
            .map(|r| &r.block)
            .filter(|b| !b.state.is_final() && b.rule_id.as_deref() == Some(rule))
            .cloned()
            .collect())
    }
    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError> {
        Ok(self.items().blocks.get(reservation_id).map(|r| r.block.clone()))
    }
    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError> {
        let mut items = self.items();
        if items.blocks.contains_key(&block.reservation_id) {
            return Ok(false);
        }
        items.blocks.insert(
            block.reservation_id.clone(),
            BlockRow { block: block.clone(), open_extension: None, budget_released_at: None },
        );
        if let Some(rule) = &block.rule_id {
            items.held.entry(rule.clone()).or_default().insert(block.reservation_id.clone());
        }
        self.moved(format!("adopt_block {}", block.reservation_id))?;
        Ok(true)
    }
    async fn update_block(&self, block: &Block, expected_version: u64) -> Result<(), StoreError> {
        let mut items = self.items();
        let Some(row) = items.blocks.get_mut(&block.reservation_id) else {
            return Err(conflict(format!("block {} changed since version {expected_version}", block.reservation_id)));
        };
        if row.block.version != expected_version {
            return Err(conflict(format!("block {} changed since version {expected_version}", block.reservation_id)));
        }
        row.block = block.clone();
        row.block.version = expected_version + 1;
        // A final block leaves its rule's `held` (DynamoDB's prune, after the update).
        if let (true, Some(rule)) = (block.state.is_final(), &block.rule_id)
            && let Some(held) = items.held.get_mut(rule)
        {
            held.remove(&block.reservation_id);
        }
        self.moved(format!("update_block {}", block.reservation_id))?;
        Ok(())
    }
}

#[async_trait]
impl RequestStore for MemoryTable {
    async fn file_request(&self, request: &Request) -> Result<(), StoreError> {
        let mut items = self.items();
        let k = (request.requester.clone(), request.id.clone());
        if items.requests.contains_key(&k) {
            return Err(conflict(format!("request {}", request.id)));
        }
        items.requests.insert(k, request.clone());
        drop(items);
        self.wrote(format!("file_request {}", request.id));
        Ok(())
    }

    async fn cancel_request(&self, requester: &str, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut items = self.items();
        let Some(r) = items.requests.get_mut(&(requester.to_string(), id.to_string())) else {
            return Err(StoreError::NotFound { what: format!("request {id} of {requester}") });
        };
        if r.cancelled_at.is_some() {
            return Err(conflict(format!("request {id} is cancelled already")));
        }
        r.cancelled_at = Some(at);
        drop(items);
        self.wrote(format!("cancel_request {id}"));
        Ok(())
    }

    async fn requests(&self) -> Result<Vec<StoredRequest>, StoreError> {
        let items = self.items();
        Ok(items
            .requests
            .iter()
            .map(|((requester, id), r)| StoredRequest {
                request: r.clone(),
                keyed_requester: requester.clone(),
                keyed_id: id.clone(),
            })
            .collect())
    }

    async fn decide_request(&self, decision: &RequestDecision) -> Result<(), StoreError> {
        let mut items = self.items();
        if items.decisions.contains_key(&decision.request_id) {
            return Err(conflict(format!("request {} is decided already", decision.request_id)));
        }
        // A decision is written fresh: only a purchase consumes it.
        items.decisions.insert(decision.request_id.clone(), RequestDecision { consumed_by: None, ..decision.clone() });
        drop(items);
        self.wrote(format!("decide_request {}", decision.request_id));
        Ok(())
    }

    async fn decision(&self, id: &str) -> Result<Option<RequestDecision>, StoreError> {
        Ok(self.items().decisions.get(id).cloned())
    }
}

impl MemoryTable {
    /// Writes a request item under `keyed_requester`'s key as it is, whatever it names: what a
    /// person with the table's write access (not the requester's policy) could put there.
    pub fn put_request_item(&self, keyed_requester: &str, request: &Request) {
        self.items().requests.insert((keyed_requester.to_string(), request.id.clone()), request.clone());
        self.wrote(format!("put_request_item {}", request.id));
    }
}

#[async_trait]
impl BlockArchive for MemoryTable {
    async fn all_blocks(&self) -> Result<Vec<Block>, StoreError> {
        Ok(self.blocks())
    }
}

#[async_trait]
impl ExtensionLedger for MemoryTable {
    async fn reserve_extension(&self, x: &ExtensionIntent) -> Result<(), ReserveError> {
        let conds = conditions(&x.charges, x.offer.fee, false)?;
        self.cancelled_for_a_conflict()?;
        let mut items = self.items();
        let k = (x.reservation_id.clone(), x.offer.id.clone());
        if items.extensions.contains_key(&k) {
            return Err(ReserveError::AlreadyExists);
        }
        match items.blocks.get(&x.reservation_id) {
            Some(b) if b.open_extension.is_none() => {}
            _ => return Err(ReserveError::RuleBusy),
        }
        may_charge(&items, &x.charges, &conds)?;
        charge(&mut items, &x.charges, x.offer.fee, false);
        items.blocks.get_mut(&x.reservation_id).expect("checked above").open_extension = Some(x.id());
        items.extensions.insert(k, x.clone());
        self.moved(format!("reserve_extension {}", x.id()))?;
        Ok(())
    }

    async fn advance_extension(
        &self,
        x: &ExtensionIntent,
        to: ExtensionState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut items = self.items();
        let Some(stored) = items.extensions.get_mut(&(x.reservation_id.clone(), x.offer.id.clone())) else {
            return Err(conflict(format!("extension {} is no longer {}", x.id(), x.state.as_str())));
        };
        if stored.state != x.state {
            return Err(conflict(format!("extension {} is no longer {}", x.id(), x.state.as_str())));
        }
        let mut next = x.clone();
        next.state = to;
        if to == ExtensionState::Sent {
            next.sent_at = Some(at);
        }
        *stored = next;
        self.moved(format!("advance_extension {} {}", x.id(), to.as_str()))?;
        Ok(())
    }

    async fn close_extension(
        &self,
        x: &ExtensionIntent,
        to: ExtensionState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut items = self.items();
        let what = |why: &str| conflict(format!("closing extension {} as {}: {why}", x.id(), to.as_str()));
        if !matches!(to, ExtensionState::Paid | ExtensionState::Released) {
            return Err(what("not a closing state"));
        }
        let k = (x.reservation_id.clone(), x.offer.id.clone());
        if !items.extensions.get(&k).is_some_and(|s| s.state.is_open()) {
            return Err(what("no longer open"));
        }
        if items.blocks.get(&x.reservation_id).and_then(|b| b.open_extension.as_ref()) != Some(&x.id()) {
            return Err(what("the block's guard is not its"));
        }
        if x.charges.iter().any(|c| !items.budgets.contains_key(&(c.owner.key(), c.period.clone()))) {
            return Err(what("a budget it charged is missing"));
        }
        let fee = x.offer.fee.amount();
        for c in &x.charges {
            let row = items.budgets.get_mut(&(c.owner.key(), c.period.clone())).expect("checked above");
            if to == ExtensionState::Paid {
                row.spent += fee;
            } else {
                row.committed -= fee;
            }
        }
        let mut closed = x.clone();
        closed.state = to;
        closed.reason = reason.map(str::to_string);
        items.extensions.insert(k, closed);
        items.blocks.get_mut(&x.reservation_id).expect("checked above").open_extension = None;
        self.moved(format!("close_extension {} {}", x.id(), to.as_str()))?;
        Ok(())
    }

    async fn recommit_extension(&self, x: &ExtensionIntent, reason: &str) -> Result<(), StoreError> {
        let mut items = self.items();
        let what = |why: &str| conflict(format!("re-committing extension {}: {why}", x.id()));
        let k = (x.reservation_id.clone(), x.offer.id.clone());
        if !items.extensions.get(&k).is_some_and(|s| s.state == ExtensionState::Released) {
            return Err(what("no longer released"));
        }
        if x.charges.iter().any(|c| !items.budgets.contains_key(&(c.owner.key(), c.period.clone()))) {
            return Err(what("a budget it charged is missing"));
        }
        items.recommit(&x.charges, x.offer.fee, false);
        let mut paid = x.clone();
        paid.state = ExtensionState::Paid;
        paid.reason = Some(reason.to_string());
        items.extensions.insert(k, paid);
        self.moved(format!("recommit_extension {}", x.id()))?;
        Ok(())
    }

    async fn extensions_of(&self, reservation_id: &str) -> Result<Vec<ExtensionIntent>, StoreError> {
        let items = self.items();
        if let Some((r, o)) = items.corrupt_extensions.iter().find(|(r, _)| r == reservation_id) {
            return Err(StoreError::Corrupt {
                key: format!("BLOCK#{r}/EXT#{o}"),
                message: "missing field `offer`".into(),
            });
        }
        Ok(items.extensions.values().filter(|x| x.reservation_id == reservation_id).cloned().collect())
    }

    async fn open_extensions(&self) -> Result<Vec<ExtensionIntent>, StoreError> {
        Ok(self.items().extensions.values().filter(|x| x.state.is_open()).cloned().collect())
    }
}

#[async_trait]
impl ObservationStore for MemoryTable {
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError> {
        if !self.quiet {
            self.items().observations.extend_from_slice(observations);
        }
        self.wrote(format!("record {} observation(s)", observations.len()));
        Ok(observations.len())
    }
    async fn history(
        &self,
        region: &Region,
        instance_type: &InstanceType,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Observation>, StoreError> {
        let items = self.items();
        let mine = |o: &&Observation| {
            &o.offering.region == region
                && &o.offering.instance_type == instance_type
                && o.seen_at >= from
                && o.seen_at <= to
        };
        Ok(items.observations.iter().filter(mine).cloned().collect())
    }
}

#[async_trait]
impl AlarmStore for MemoryTable {
    async fn record_alarm(&self, state: &AlarmState) -> Result<bool, StoreError> {
        let mut items = self.items();
        // DynamoDB's condition: `attribute_not_exists(pk) OR at_ms < :at`.
        if items.alarms.get(&state.alarm).is_some_and(|a| a.at >= state.at) {
            return Ok(false);
        }
        items.alarms.insert(state.alarm.clone(), state.clone());
        self.wrote(format!("record_alarm {}", state.alarm));
        Ok(true)
    }
    async fn alarms(&self) -> Result<Vec<AlarmState>, StoreError> {
        Ok(self.items().alarms.values().cloned().collect())
    }
}

#[async_trait]
impl PageClaims for MemoryTable {
    async fn claim_page_hour(&self, hour: DateTime<Utc>) -> Result<bool, StoreError> {
        let mut items = self.items();
        // As the adapter's condition: no claim yet, or one of an earlier hour.
        if items.page_hour.is_some_and(|h| h >= hour) {
            return Ok(false);
        }
        items.page_hour = Some(hour);
        self.wrote(format!("claim_page_hour {}", hour.to_rfc3339()));
        Ok(true)
    }
    async fn release_page_hour(&self, hour: DateTime<Utc>) -> Result<(), StoreError> {
        let mut items = self.items();
        if items.page_hour == Some(hour) {
            items.page_hour = None;
            self.wrote(format!("release_page_hour {}", hour.to_rfc3339()));
        }
        Ok(())
    }
}

#[async_trait]
impl RateStore for MemoryTable {
    async fn announce_rate(&self, rate: &ListRate) -> Result<(), StoreError> {
        self.items().rates.insert((rate.family.clone(), rate.effective), rate.clone());
        self.wrote(format!("announce_rate {} {}", rate.family, rate.effective));
        Ok(())
    }
    async fn withdraw_rate(&self, family: &str, effective: chrono::NaiveDate) -> Result<bool, StoreError> {
        let gone = self.items().rates.remove(&(family.to_string(), effective)).is_some();
        if gone {
            self.wrote(format!("withdraw_rate {family} {effective}"));
        }
        Ok(gone)
    }
    async fn announced_rates(&self) -> Result<Vec<ListRate>, StoreError> {
        Ok(self.items().rates.values().cloned().collect())
    }
}

#[async_trait]
impl SettingsStore for MemoryTable {
    async fn store_settings(&self, settings: &StoredSettings) -> Result<bool, StoreError> {
        let mut items = self.items();
        let same = |s: &StoredSettings| s.stack == settings.stack && s.alerts_topic == settings.alerts_topic;
        if items.settings.as_ref().is_some_and(same) {
            return Ok(false);
        }
        items.settings = Some(settings.clone());
        self.wrote("store_settings");
        Ok(true)
    }
    async fn stored_settings(&self) -> Result<Option<StoredSettings>, StoreError> {
        Ok(self.items().settings.clone())
    }
}

#[async_trait]
impl FunctionDirectory for MemoryTable {
    async fn record_function(&self, kind: &str, name: &str) -> Result<(), StoreError> {
        self.items().functions.insert(kind.to_string(), name.to_string());
        self.wrote(format!("record_function {kind}"));
        Ok(())
    }
    async fn functions(&self) -> Result<BTreeMap<String, String>, StoreError> {
        Ok(self.items().functions.clone())
    }
}

#[async_trait]
impl SeenOfferings for MemoryTable {
    async fn remember_offerings(&self, offerings: &[Offering], until: DateTime<Utc>) -> Result<usize, StoreError> {
        let mut items = self.items();
        for o in offerings {
            items.seen.insert(o.id.clone(), (o.clone(), until));
        }
        self.wrote(format!("remember {} offering(s)", offerings.len()));
        Ok(offerings.len())
    }
    async fn seen_offering(&self, id: &str, now: DateTime<Utc>) -> Result<Option<Offering>, StoreError> {
        Ok(self.items().seen.get(id).filter(|(_, until)| *until > now).map(|(o, _)| o.clone()))
    }
    async fn seen_offerings_starting(&self, prefix: &str, now: DateTime<Utc>) -> Result<Vec<Offering>, StoreError> {
        let items = self.items();
        Ok(items
            .seen
            .iter()
            .filter(|(id, (_, until))| id.starts_with(prefix) && *until > now)
            .map(|(_, (o, _))| o.clone())
            .collect())
    }
}

#[async_trait]
impl PreflightStore for MemoryTable {
    async fn save_preflight(&self, preflight: &Preflight) -> Result<(), StoreError> {
        self.items().preflight = Some(preflight.clone());
        self.wrote("save_preflight");
        Ok(())
    }
    async fn last_preflight(&self) -> Result<Option<Preflight>, StoreError> {
        Ok(self.items().preflight.clone())
    }
}

#[async_trait]
impl MarketMemory for MemoryTable {
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError> {
        Ok(self.items().memory.get(region).map(|(m, _)| m.clone()).unwrap_or_default())
    }
    async fn save_region_memory(
        &self,
        region: &Region,
        read: &RegionMemory,
        memory: &RegionMemory,
    ) -> Result<(), StoreError> {
        // One lock: the read-merge-put of the DynamoDB adapter cannot meet another save here.
        let mut items = self.items();
        let (stored, version) = items.memory.get(region).cloned().unwrap_or_default();
        let merged = memory.clone().merged(read, stored);
        items.memory.insert(region.clone(), (merged, version + 1));
        self.wrote(format!("save_region_memory {region}"));
        Ok(())
    }
    async fn claim_region(
        &self,
        region: &Region,
        run: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut items = self.items();
        // The adapter's condition: no claim, or one that ran out, or this run's, or one ending
        // past `MAX_REGION_CLAIM` from now (no run's).
        let held =
            items.region_claims.get(region).is_some_and(|(r, u)| r != run && *u >= now && *u <= now + MAX_REGION_CLAIM);
        if held {
            return Ok(false);
        }
        items.region_claims.insert(region.clone(), (run.to_string(), until));
        Ok(true)
    }
    async fn release_region(&self, region: &Region, run: &str) -> Result<(), StoreError> {
        let mut items = self.items();
        if items.region_claims.get(region).is_some_and(|(r, _)| r == run) {
            items.region_claims.insert(region.clone(), (run.to_string(), DateTime::<Utc>::UNIX_EPOCH));
        }
        Ok(())
    }
}

/// DynamoDB's limit on a sort key (`NOTICE#<milestone>`), in bytes.
const SORT_KEY_BYTES: usize = 1024;

/// A notice's sort key within DynamoDB's limit, which refuses a longer one.
fn fits(notice: &Notice) -> Result<(), StoreError> {
    if format!("NOTICE#{}", notice.milestone).len() > SORT_KEY_BYTES {
        return Err(StoreError::Unavailable("ValidationException: the sort key is over 1024 bytes".into()));
    }
    Ok(())
}

#[async_trait]
impl Outbox for MemoryTable {
    async fn enqueue(&self, notice: &Notice) -> Result<bool, StoreError> {
        fits(notice)?;
        let fresh = self.items().put_notice(notice, true);
        if fresh {
            self.wrote(format!("enqueue {}", notice.id()));
        }
        Ok(fresh)
    }
    async fn pending(&self) -> Result<Vec<Notice>, StoreError> {
        // The pending index sorts by creation time, then id.
        let items = self.items();
        Ok(items.pending.iter().filter_map(|(_, _, k)| items.notices.get(k)).map(|r| r.notice.clone()).collect())
    }
    async fn lease(&self, notice: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError> {
        let mut items = self.items();
        let Some(row) = items.notices.get_mut(&(notice.thread.clone(), notice.milestone.clone())) else {
            return Ok(false);
        };
        if !row.pending || row.lease_until.is_some_and(|l| l >= now) {
            return Ok(false);
        }
        row.lease_until = Some(until);
        Ok(true)
    }
    async fn mark_published(&self, notice: &Notice, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut guard = self.items();
        let items = &mut *guard;
        let k = (notice.thread.clone(), notice.milestone.clone());
        // An update without a condition creates what it names, as DynamoDB's does.
        let row = items.notices.entry(k).or_insert(NoticeRow {
            notice: notice.clone(),
            pending: false,
            lease_until: None,
            published_at: None,
        });
        row.pending = false;
        row.lease_until = None;
        row.published_at = Some(at);
        let gone = (row.notice.created_at, row.notice.id(), (notice.thread.clone(), notice.milestone.clone()));
        items.pending.remove(&gone);
        self.wrote(format!("mark_published {}", notice.id()));
        Ok(())
    }
    async fn put_record(&self, notice: &Notice) -> Result<bool, StoreError> {
        fits(notice)?;
        let fresh = self.items().put_notice(notice, false);
        if fresh {
            self.wrote(format!("put_record {}", notice.id()));
        }
        Ok(fresh)
    }
    async fn records(&self, thread: &str, prefix: &str) -> Result<Vec<Notice>, StoreError> {
        let items = self.items();
        let mine = |r: &&NoticeRow| r.notice.thread == thread && r.notice.milestone.starts_with(prefix);
        Ok(items.notices.values().filter(mine).map(|r| r.notice.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::app::fixtures::{offering, reservation_of, rule, sent_intent, t0};
    use crate::domain::block::Block;
    use crate::domain::budget::charges_for;

    fn reserved(rule: &Rule, id: &str, at: DateTime<Utc>) -> Intent {
        let charges = charges_for(rule, &Default::default(), &Period::budget_month(at)).unwrap();
        Intent::new(&rule.id, offering(id, at + Duration::days(2)), 8, charges, at)
    }

    /// The ledger's conditions, as the DynamoDB transaction states them: one open intent per
    /// rule and a guard that has not moved, the rule's purchases, and its budget.
    #[tokio::test]
    async fn a_reservation_takes_the_guard_the_budget_and_a_purchase_all_or_nothing() {
        let east = rule("east", "live"); // 600 a month, one purchase, 480 fees
        let t = MemoryTable::default().with_rules([east.clone()]);
        let first = reserved(&east, "cb-1", t0());
        assert_eq!(t.reserve(&first, 1).await, Err(ReserveError::RuleBusy), "a guard seen at another seq");
        t.reserve(&first, 0).await.unwrap();
        assert_eq!(t.reserve(&first, 1).await, Err(ReserveError::AlreadyExists));
        assert_eq!(t.reserve(&reserved(&east, "cb-2", t0()), 1).await, Err(ReserveError::RuleBusy));
        t.record_given_back(&first, "throttled").await.unwrap();
        let usage = t.usage(&BudgetOwner::Rule("east".into()), &Period::budget_month(t0())).await.unwrap().unwrap();
        assert_eq!((usage.committed.amount(), usage.purchases), (Decimal::ZERO, 0));
        t.reserve(&first, 1).await.unwrap();
        t.mark_sent(&first.id, "east", t0()).await.unwrap();
        let mut sent = first.clone();
        sent.state = IntentState::Sent;
        let block = Block::bought(&sent, &reservation_of(&sent, "cr-1"), t0());
        t.record_bought(&sent, &block, &[]).await.unwrap();
        assert!(t.record_bought(&sent, &block, &[]).await.is_err(), "closed once");
        // The month's one purchase is made: the next is refused however much budget is left.
        assert_eq!(t.reserve(&reserved(&east, "cb-3", t0()), 2).await, Err(ReserveError::PurchaseLimit));
        let wider = Rule { max_purchases_per_month: 5, ..east.clone() };
        let next = reserved(&wider, "cb-3", t0());
        assert!(matches!(t.reserve(&next, 2).await, Err(ReserveError::OverBudget(owner)) if owner == "RULE#east"));
        assert!(t.open_intents().await.unwrap().is_empty());
    }

    /// One approval buys once: the reservation consumes it by the approved block, so a second
    /// purchase of it under another id EC2 gave the block fails in the transaction; a purchase
    /// given back (nothing reached EC2) gives the approval back; a consumed one waits no more.
    #[tokio::test]
    async fn a_reservation_consumes_its_approval_once_whatever_the_blocks_id() {
        let east = Rule {
            max_purchases_per_month: 5,
            monthly_budget: Money::parse("5000", "USD").unwrap(),
            ..rule("east", "approval")
        };
        let t = MemoryTable::default().with_rules([east.clone()]);
        let asked = Intent::new(&east.id, offering("cb-asked", t0() + Duration::days(2)), 8, vec![], t0());
        assert!(t.record_approval(&asked).await.unwrap());
        let on_approval = |id: &str| Intent { approval: Some(Approved::of(&asked)), ..reserved(&east, id, t0()) };
        let first = on_approval("cb-renamed-1");
        t.reserve(&first, 0).await.unwrap();
        assert!(t.approvals_waiting("east").await.unwrap().is_empty(), "consumed: waits no more");
        t.record_given_back(&first, "throttled").await.unwrap();
        assert_eq!(t.approvals_waiting("east").await.unwrap(), std::slice::from_ref(&asked), "given back with the fee");
        t.reserve(&first, 1).await.unwrap();
        t.mark_sent(&first.id, "east", t0()).await.unwrap();
        let sent = Intent { state: IntentState::Sent, sent_at: Some(t0()), ..first.clone() };
        t.record_bought(&sent, &Block::bought(&sent, &reservation_of(&sent, "cr-1"), t0()), &[]).await.unwrap();
        // The same approval again, the block under yet another id: refused, nothing charged.
        assert_eq!(t.reserve(&on_approval("cb-renamed-2"), 2).await, Err(ReserveError::ApprovalUsed));
        let usage = t.usage(&BudgetOwner::Rule("east".into()), &Period::budget_month(t0())).await.unwrap().unwrap();
        assert_eq!(usage.purchases, 1);
        // Another record of the same block (a second ask raced the marker) is consumed too.
        let twin = Intent::new(&east.id, offering("cb-twin", t0() + Duration::days(2)), 8, vec![], t0());
        t.record_approval(&twin).await.unwrap();
        assert!(t.approvals_waiting("east").await.unwrap().is_empty(), "a record of a consumed block waits no more");
        let by_twin = Intent { approval: Some(Approved::of(&twin)), ..reserved(&east, "cb-renamed-3", t0()) };
        assert_eq!(t.reserve(&by_twin, 2).await, Err(ReserveError::ApprovalUsed), "the block was approved once");
    }

    /// A person's release closes the sent intent and gives its fee back, and the rule's guard
    /// keeps it until the offering's start, for the held-blocks count.
    #[tokio::test]
    async fn a_persons_release_keeps_the_purchase_on_the_guard_until_its_start() {
        let east = rule("east", "live");
        let t = MemoryTable::default().with_rules([east.clone()]);
        let intent = reserved(&east, "cb-1", t0());
        t.reserve(&intent, 0).await.unwrap();
        assert!(t.release_by_person(&intent, "by hand").await.is_err(), "only a sent intent");
        t.mark_sent(&intent.id, "east", t0()).await.unwrap();
        let sent = Intent { state: IntentState::Sent, sent_at: Some(t0()), ..intent.clone() };
        t.release_by_person(&sent, "by hand").await.unwrap();
        let guard = t.guard("east").await.unwrap();
        assert_eq!((&guard.open_intent, &guard.released), (&None, &vec![ReleasedHold::of(&sent)]));
        assert_eq!(guard.released[0].until, sent.offering.start);
        let usage = t.usage(&BudgetOwner::Rule("east".into()), &Period::budget_month(t0())).await.unwrap().unwrap();
        assert_eq!((usage.committed.amount(), usage.purchases), (Decimal::ZERO, 0), "the fee given back");
        assert_eq!(t.get_intent("east", &sent.id).await.unwrap().unwrap().state, IntentState::Rejected);
        assert!(t.release_by_person(&sent, "again").await.is_err(), "once");
    }

    /// A failed payment gives the fee back once per purchase, however many block items (parts)
    /// it made, and never drives a budget below zero.
    #[tokio::test]
    async fn a_failed_payment_gives_the_fee_back_once_per_purchase() {
        let east = rule("east", "live");
        let mut bought = sent_intent(&east, offering("cb-1", t0() + Duration::days(2)), t0());
        bought.state = IntentState::Bought;
        let parts: Vec<Block> = ["cr-1", "cr-2"]
            .iter()
            .map(|id| Block::bought(&bought, &reservation_of(&bought, id), t0()).with_kind(true))
            .collect();
        let t = MemoryTable::default().with_rules([east]).with_intents([bought.clone()]).with_blocks(parts.clone());
        assert!(t.release_failed_block(&parts[0], &bought, true, t0()).await.unwrap());
        assert!(!t.release_failed_block(&parts[1], &bought, true, t0()).await.unwrap());
        let usage = t.usage(&BudgetOwner::Rule("east".into()), &Period::budget_month(t0())).await.unwrap().unwrap();
        assert_eq!(
            (usage.committed.amount(), usage.spent.amount(), usage.purchases),
            (Decimal::ZERO, Decimal::ZERO, 0)
        );
        assert!(t.fee_released("east", "cb-1"));
    }

    /// A block moves only from the version it was read at; a notice is enqueued once and
    /// leased by one run at a time.
    #[tokio::test]
    async fn versions_and_leases_let_one_writer_win() {
        let east = rule("east", "live");
        let mut bought = sent_intent(&east, offering("cb-1", t0() + Duration::days(2)), t0());
        bought.state = IntentState::Bought;
        let block = Block::bought(&bought, &reservation_of(&bought, "cr-1"), t0());
        let t = MemoryTable::default().with_blocks([block.clone()]);
        t.update_block(&block, block.version).await.unwrap();
        assert!(matches!(t.update_block(&block, block.version).await, Err(StoreError::Conflict(_))));
        let notice = Notice {
            thread: "cr-1".into(),
            milestone: OutboxKey::parse("purchased").unwrap(),
            topic: Topic::Alerts,
            message: Message { body: "bought".into(), attributes: Default::default() },
            created_at: t0(),
        };
        assert!(t.enqueue(&notice).await.unwrap());
        assert!(!t.enqueue(&notice).await.unwrap());
        assert!(t.lease(&notice, t0(), t0() + Duration::minutes(1)).await.unwrap());
        assert!(!t.lease(&notice, t0(), t0() + Duration::minutes(1)).await.unwrap(), "leased by another run");
        assert!(t.lease(&notice, t0() + Duration::minutes(2), t0() + Duration::minutes(3)).await.unwrap(), "ran out");
        t.mark_published(&notice, t0()).await.unwrap();
        assert!(t.pending().await.unwrap().is_empty());
    }
}
