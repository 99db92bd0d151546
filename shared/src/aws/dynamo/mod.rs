//! The DynamoDB store: one table, several item kinds, one file each (`rules`, `market`,
//! `ledger`, `blocks`, `extensions`, `outbox`, `observations`, `alarms`, `settings`, `seen`,
//! `preflight`, `page`; `item` holds the attribute helpers, `table` creates the table). The item kinds
//! and their keys are in one table, ARCHITECTURE.md's "The data model"; infra/lint/check_docs.py
//! checks it against the key strings written here.

use std::time::Duration as StdDuration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, PutRequest, TransactWriteItem, Update, WriteRequest};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use crate::domain::block::Block;
use crate::domain::budget::{
    Approved, BudgetCharge, BudgetOwner, BudgetUsage, Intent, IntentState, Period, ReleasedHold,
};
use crate::domain::extension::{ExtensionIntent, ExtensionState};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::money::Money;
use crate::domain::plan::RegionMemory;
use crate::domain::rule::Rule;
use crate::ports::{
    AlarmStore, BlockArchive, BlockStore, ExtensionLedger, Ledger, MarketMemory, Notice, Observation, ObservationStore,
    Outbox, ReserveError, RuleGuard, RuleStore, StoreError, StoredRule,
};
use item::{Item, data, get_decimal, get_s, get_ss, get_u64, json, key, n, s};

mod alarms;
mod blocks;
mod extensions;
mod item;
mod ledger;
mod market;
mod observations;
mod outbox;
mod page;
mod preflight;
mod rates;
mod requests;
mod rules;
mod seen;
mod settings;
mod table;

pub use table::create_table;

/// The IAM actions each port of this adapter needs: a function's role allows exactly those of
/// the ports it declares in `AWS_PORTS`. infra/deploy/crosscheck checks that every SDK call here
/// has its action in this table and that nothing in it is uncalled (ARCHITECTURE.md, "Where a
/// change goes": a new AWS call).
// A transaction is authorized item by item: it needs the action of each kind of item it carries
// (Put, Update, Delete). IAM has no `dynamodb:TransactWriteItems` action.
pub const ACTIONS: &[(&str, &[&str])] = &[
    ("RuleStore", &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"]),
    ("MarketMemory", &["dynamodb:GetItem", "dynamodb:PutItem"]),
    // A request's reservation checks the request item in its transaction (`ConditionCheck`).
    (
        "Ledger",
        &[
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
        ],
    ),
    ("BlockArchive", &["dynamodb:Scan"]),
    ("BlockStore", &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]),
    ("ExtensionLedger", &["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]),
    ("Outbox", &["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]),
    ("ObservationStore", &["dynamodb:BatchWriteItem", "dynamodb:Query"]),
    ("AlarmStore", &["dynamodb:PutItem", "dynamodb:Query"]),
    ("SettingsStore", &["dynamodb:GetItem", "dynamodb:PutItem"]),
    ("PreflightStore", &["dynamodb:GetItem", "dynamodb:PutItem"]),
    // People's requests and their decisions; the scan consumes an approval in `Ledger::reserve`.
    ("RequestStore", &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]),
    // The CLI's only: no function declares it.
    ("SeenOfferings", &["dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:Query"]),
    ("FunctionDirectory", &["dynamodb:PutItem", "dynamodb:Query"]),
    // The operator's announced list rates: written by the CLI, read by the page and preflight.
    ("RateStore", &["dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"]),
    // The team page's hour: claimed with a conditional put, given back after a failed publish.
    ("PageClaims", &["dynamodb:PutItem", "dynamodb:DeleteItem"]),
    // Not a port: `create_table` sets up the local stack and the tests; no function declares it.
    ("TableSetup", &["dynamodb:CreateTable"]),
];

/// How long price observations are kept.
pub const OBSERVATION_TTL: Duration = Duration::days(400);
const OPEN_INTENTS: &str = "INTENT#OPEN";
/// A closed intent that spent nothing: its fee and its purchase go back to every budget.
const RELEASE_FEE: &str = "SET committed = committed - :fee, purchases = purchases - :one";
const OPEN_BLOCKS: &str = "BLOCK#OPEN";
const RULES: &str = "RULES";
pub const GSI: &str = "gsi1";

#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// Items left out of listings because they did not decode, since `take_corrupt_items`.
    corrupt: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

fn store_err<
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
>(
    what: &str,
    e: SdkError<E, R>,
) -> StoreError {
    match e.code() {
        Some("ConditionalCheckFailedException") => StoreError::Conflict(what.to_string()),
        Some(code) => StoreError::Unavailable(format!("{what}: {code}: {}", e.message().unwrap_or_default())),
        None => StoreError::Unavailable(format!("{what}: {}", aws_sdk_dynamodb::error::DisplayErrorContext(&e))),
    }
}

fn rule_pk(id: &str) -> String {
    format!("RULE#{id}")
}
fn block_pk(id: &str) -> String {
    format!("BLOCK#{id}")
}
fn budget_key(owner: &BudgetOwner, period: &Period) -> Item {
    key(format!("BUDGET#{}", owner.key()), format!("PERIOD#{}", period.as_str()))
}
fn intent_key(rule_id: &str, offering_id: &str) -> Item {
    key(rule_pk(rule_id), format!("INTENT#{offering_id}"))
}

/// A refused transaction as a store error that says what it was doing.
fn cancelled(what: &str, e: TxError) -> StoreError {
    match e {
        TxError::Cancelled(codes) => StoreError::Conflict(format!("{what}: {}", codes.join(","))),
        TxError::Store(e) => e,
    }
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore { client, table: table.into(), corrupt: Default::default() }
    }

    /// How many items listings have left out as corrupt since the last call (the functions
    /// count them in `Errors`, kind `capblock.CorruptItem`, once per invocation).
    pub fn take_corrupt_items(&self) -> u64 {
        self.corrupt.swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    /// Decodes every item of a listing. One item that does not decode (a bug or a hand edit)
    /// must not stop every run: it is left out, with an error line naming its key, and counted
    /// (`take_corrupt_items`). Only for listings whose items stand alone: where a missing item
    /// would lift a limit (a rule's held blocks, a block's paid extensions) an error is the answer.
    fn decode_each<T>(&self, items: &[Item], what: &str, decode: impl Fn(&Item) -> Result<T, StoreError>) -> Vec<T> {
        items
            .iter()
            .filter_map(|item| match decode(item) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.corrupt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::error!(event = "corrupt_item_skipped", listing = what, error = %e, "an item does not decode; left out until repaired");
                    None
                }
            })
            .collect()
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Writes an item, replacing any with its key (items one writer owns: the last preflight,
    /// a function's name).
    async fn put(&self, item: Item, what: &str) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| store_err(what, e))?;
        Ok(())
    }

    /// Writes an item that must not exist yet: `false` if it does (someone wrote it first).
    async fn put_new(&self, item: Item, what: &str) -> Result<bool, StoreError> {
        match self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) => match store_err(what, e) {
                StoreError::Conflict(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    /// Puts `items` in BatchWriteItem calls of 25; what DynamoDB hands back unprocessed (under
    /// load) is sent again with backoff. Returns how many were written.
    async fn batch_put(&self, items: Vec<Item>, what: &str) -> Result<usize, StoreError> {
        let mut written = 0;
        for chunk in items.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|item| {
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(item.clone())).build().expect("item set"))
                        .build()
                })
                .collect();
            for attempt in 0..8u32 {
                if pending.is_empty() {
                    break;
                }
                let n_sent = pending.len();
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(|e| store_err(what, e))?;
                pending = out.unprocessed_items.and_then(|mut m| m.remove(&self.table)).unwrap_or_default();
                written += n_sent - pending.len();
                if !pending.is_empty() {
                    tokio::time::sleep(StdDuration::from_millis(50 << attempt)).await;
                }
            }
            if !pending.is_empty() {
                return Err(StoreError::Unavailable(format!("{} {what} left unprocessed", pending.len())));
            }
        }
        Ok(written)
    }

    async fn query_gsi(&self, pk: &str, sk_prefix: Option<&str>) -> Result<Vec<Item>, StoreError> {
        let mut q =
            self.client.query().table_name(&self.table).index_name(GSI).expression_attribute_values(":pk", s(pk));
        q = match sk_prefix {
            Some(p) => q
                .key_condition_expression("gsi1pk = :pk AND begins_with(gsi1sk, :p)")
                .expression_attribute_values(":p", s(p)),
            None => q.key_condition_expression("gsi1pk = :pk"),
        };
        Self::all_items(q, "query").await
    }

    /// Every item of partition `pk` whose sort key starts with `prefix`, read strongly
    /// consistent, all pages (`what` names them in an error).
    async fn query_prefix(&self, pk: &str, prefix: &str, what: &str) -> Result<Vec<Item>, StoreError> {
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":p", s(prefix))
            .consistent_read(true);
        Self::all_items(q, what).await
    }

    /// Every item a query matches, all pages.
    async fn all_items(q: QueryFluentBuilder, what: &str) -> Result<Vec<Item>, StoreError> {
        q.into_paginator().items().send().collect::<Result<Vec<_>, _>>().await.map_err(|e| store_err(what, e))
    }

    async fn get(&self, k: Item) -> Result<Option<Item>, StoreError> {
        self.client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(k))
            .consistent_read(true)
            .send()
            .await
            .map(|o| o.item)
            .map_err(|e| store_err("get", e))
    }

    fn intent_item(intent: &Intent) -> Item {
        let mut item = intent_key(&intent.rule_id, &intent.offering.id);
        item.insert("state".into(), s(intent.state.as_str()));
        item.insert("data".into(), json(intent));
        if intent.state.is_open() {
            item.insert("gsi1pk".into(), s(OPEN_INTENTS));
            item.insert("gsi1sk".into(), s(&intent.id));
        }
        item
    }

    fn block_item(block: &Block) -> Item {
        let mut item = key(block_pk(&block.reservation_id), "BLOCK");
        item.insert("state".into(), s(block.state.as_str()));
        item.insert("version".into(), n(block.version));
        item.insert("data".into(), json(block));
        if !block.state.is_final() {
            item.insert("gsi1pk".into(), s(OPEN_BLOCKS));
            item.insert("gsi1sk".into(), s(block_gsi_sk(block.rule_id.as_deref(), &block.reservation_id)));
        }
        item
    }

    fn update(&self, k: Item, expr: &str) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        Update::builder().table_name(&self.table).set_key(Some(k)).update_expression(expr)
    }

    /// Runs a transaction; a cancelled one comes back with the per-item reason codes.
    async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<(), TxError> {
        match self.client.transact_write_items().set_transact_items(Some(items)).send().await {
            Ok(_) => Ok(()),
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => Err(TxError::Cancelled(
                    c.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_string()).collect(),
                )),
                _ => Err(TxError::Store(store_err("transaction", e))),
            },
        }
    }

    /// Moves an intent out of the open states, frees the rule guard and adjusts the budgets.
    async fn close_intent(
        &self,
        intent: &Intent,
        closed: Option<Intent>,
        budget_expr: &str,
        extra: Vec<TransactWriteItem>,
        hold: Option<&ReleasedHold>,
    ) -> Result<(), StoreError> {
        let fee = n(intent.offering.fee.amount());
        let mut items: Vec<TransactWriteItem> = extra;
        match &closed {
            Some(closed) => {
                let u = self
                    .update(
                        intent_key(&intent.rule_id, &intent.offering.id),
                        "SET #s = :new, #d = :data REMOVE gsi1pk, gsi1sk",
                    )
                    .expression_attribute_names("#s", "state")
                    .expression_attribute_names("#d", "data")
                    .expression_attribute_values(":new", s(closed.state.as_str()))
                    .expression_attribute_values(":data", json(closed))
                    .expression_attribute_values(":sent", s(IntentState::Sent.as_str()));
                // A person releases only a sent intent; the other closings any open one.
                items.push(tx_update(match hold {
                    Some(_) => u.condition_expression("#s = :sent"),
                    None => u
                        .condition_expression("#s IN (:reserved, :sent)")
                        .expression_attribute_values(":reserved", s(IntentState::Reserved.as_str())),
                }));
            }
            // Given back: the intent goes, so the rule may reserve the same offering again.
            None => items.push(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.table)
                            .set_key(Some(intent_key(&intent.rule_id, &intent.offering.id)))
                            .condition_expression("#s = :expected")
                            .expression_attribute_names("#s", "state")
                            .expression_attribute_values(":expected", s(intent.state.as_str()))
                            .build()
                            .expect("table and key are set"),
                    )
                    .build(),
            ),
        }
        // A bought block joins the guard's `held` in the same transaction: the rule's count
        // reads it strongly, never waiting for the open-blocks index to show the block.
        let bought =
            closed.as_ref().filter(|c| c.state == IntentState::Bought).and_then(|c| c.reservation_id.as_deref());
        items.push(self.free_guard(intent, hold, bought));
        for c in &intent.charges {
            let mut u = self
                .update(budget_key(&c.owner, &c.period), budget_expr)
                .condition_expression("attribute_exists(committed)")
                .expression_attribute_values(":fee", fee.clone());
            // DynamoDB refuses expression values the expression does not use.
            if budget_expr.contains(":one") {
                u = u.expression_attribute_values(":one", n(1));
            }
            items.push(tx_update(u));
        }
        self.transact(items).await.map_err(|e| match e {
            TxError::Cancelled(codes) => StoreError::Conflict(format!(
                "closing intent {} as {}: {}",
                intent.id,
                closed.as_ref().map_or("given back", |c| c.state.as_str()),
                codes.join(",")
            )),
            TxError::Store(e) => e,
        })
    }
}

impl DynamoStore {
    /// The closing's step that frees the rule's guard; a person's release (`hold`) stays on it,
    /// counted against `max_blocks_held` until its start (`ReleasedHold`), and a bought block
    /// (`bought`) joins its `held` set.
    fn free_guard(&self, intent: &Intent, hold: Option<&ReleasedHold>, bought: Option<&str>) -> TransactWriteItem {
        let guard = match (hold, bought) {
            (None, None) => self.update(key(rule_pk(&intent.rule_id), "GUARD"), "REMOVE open_intent"),
            (None, Some(id)) => self
                .update(key(rule_pk(&intent.rule_id), "GUARD"), "REMOVE open_intent ADD held :held")
                .expression_attribute_values(":held", AttributeValue::Ss(vec![id.to_string()])),
            (Some(h), _) => self
                .update(
                    key(rule_pk(&intent.rule_id), "GUARD"),
                    "REMOVE open_intent SET released = list_append(if_not_exists(released, :none), :hold)",
                )
                .expression_attribute_values(":none", AttributeValue::L(vec![]))
                .expression_attribute_values(":hold", AttributeValue::L(vec![json(h)])),
        };
        tx_update(guard.condition_expression("open_intent = :iid").expression_attribute_values(":iid", s(&intent.id)))
    }

    /// Writes `items` (the record and its guard, in that order) with one budget charge per
    /// entry of `charges`, atomically, and names what refused it: the record or guard, a
    /// purchase limit (`purchase` only: an extension counts money, never a purchase) or the
    /// budget of one owner.
    async fn reserve_charged(
        &self,
        mut items: Vec<TransactWriteItem>,
        charges: &[BudgetCharge],
        fee: Money,
        purchase: bool,
        approval: Vec<TransactWriteItem>,
        request: Option<(String, TransactWriteItem)>,
    ) -> Result<(), ReserveError> {
        for c in charges {
            items.push(self.charge(c, fee, purchase)?);
        }
        let approval_at = items.len();
        let approval_items = approval.len();
        items.extend(approval);
        let request_at = items.len();
        let request_id = request.as_ref().map(|(id, _)| id.clone());
        items.extend(request.map(|(_, check)| check));
        let codes = match self.transact(items).await {
            Ok(()) => return Ok(()),
            Err(TxError::Store(e)) => return Err(e.into()),
            Err(TxError::Cancelled(codes)) => codes,
        };
        if let Some(e) = record_or_guard_failed(&codes) {
            return Err(e);
        }
        if let Some(id) = request_id
            && failed_at(&codes, request_at)
        {
            return Err(ReserveError::RequestClosed(id));
        }
        if (approval_at..approval_at + approval_items).any(|i| failed_at(&codes, i)) {
            return Err(ReserveError::ApprovalUsed);
        }
        let Some(c) = charges.iter().enumerate().find(|(i, _)| failed_at(&codes, i + 2)).map(|(_, c)| c) else {
            // No condition failed: another writer's transaction was on one of the items
            // (`TransactionConflict`) between the decision's read and this write. Nothing was
            // written; the rule is busy, and the next run decides again on what it reads then.
            if codes.iter().any(|c| c == "TransactionConflict") {
                return Err(ReserveError::RuleBusy);
            }
            return Err(ReserveError::Store(StoreError::Conflict(format!(
                "transaction cancelled: {}",
                codes.join(",")
            ))));
        };
        // Tell the two budget conditions apart by reading the item and asking the condition.
        let usage = self.usage(&c.owner, &c.period).await?;
        match c.condition(fee, purchase).and_then(|cond| cond.check(usage.as_ref())) {
            Err(refusal) => Err(ReserveError::refused(refusal, c)),
            // Admitted by what is there now: a writer moved it between the two reads.
            Ok(()) => Err(ReserveError::OverBudget(c.owner.key())),
        }
    }

    /// The transaction step that charges `fee` to one budget: `BudgetCharge::condition`
    /// rendered as a condition expression and its values (a fee no item could admit is refused
    /// here, before the transaction). A purchase also counts against the budget's purchase
    /// limit; an extension spends money only.
    fn charge(&self, c: &BudgetCharge, fee: Money, purchase: bool) -> Result<TransactWriteItem, ReserveError> {
        let cond = c.condition(fee, purchase).map_err(|r| ReserveError::refused(r, c))?;
        let mut conds = Vec::new();
        let mut set = vec![
            "committed = if_not_exists(committed, :zero) + :fee",
            "spent = if_not_exists(spent, :zero)",
            if purchase {
                "purchases = if_not_exists(purchases, :zero) + :one"
            } else {
                "purchases = if_not_exists(purchases, :zero)"
            },
            "currency = :cur",
        ];
        // An item not written yet holds nothing: `condition` admits it (0 <= limit - fee, and
        // a purchase limit of 0 is refused above).
        if cond.max_committed.is_some() {
            conds.push("(attribute_not_exists(committed) OR committed <= :headroom)");
        }
        if cond.max_purchases.is_some() {
            conds.push("(attribute_not_exists(purchases) OR purchases < :maxp)");
        }
        // The limit is kept on the item for its readers (`limit` is a reserved word: `#limit`).
        if c.limit.is_some() {
            set.push("#limit = :limit");
        }
        let mut expr = format!("SET {}", set.join(", "));
        if c.limit.is_none() {
            // Uncapped: no limit of an earlier cap stays on the item to mislead a reader.
            expr.push_str(" REMOVE #limit");
        }
        let mut u = self
            .update(budget_key(&c.owner, &c.period), &expr)
            .expression_attribute_names("#limit", "limit")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":fee", n(fee.amount()))
            .expression_attribute_values(":cur", s(fee.currency().as_str()));
        if purchase {
            u = u.expression_attribute_values(":one", n(1));
        }
        if let Some(max) = cond.max_purchases {
            u = u.expression_attribute_values(":maxp", n(max));
        }
        if let Some(headroom) = cond.max_committed {
            u = u.expression_attribute_values(":headroom", n(headroom));
        }
        if let Some(limit) = c.limit {
            u = u.expression_attribute_values(":limit", n(limit.amount()));
        }
        if !conds.is_empty() {
            u = u.condition_expression(conds.join(" AND "));
        }
        Ok(tx_update(u))
    }
}

/// Whether the `i`th step of a cancelled transaction failed its condition.
fn failed_at(codes: &[String], i: usize) -> bool {
    codes.get(i).is_some_and(|c| c == "ConditionalCheckFailed")
}

/// A reserve transaction (purchase or extension) puts its record first and takes its guard
/// second, then charges the budgets: the refusal its first two steps stand for, if either failed.
fn record_or_guard_failed(codes: &[String]) -> Option<ReserveError> {
    if failed_at(codes, 0) {
        Some(ReserveError::AlreadyExists)
    } else if failed_at(codes, 1) {
        Some(ReserveError::RuleBusy)
    } else {
        None
    }
}

enum TxError {
    Cancelled(Vec<String>),
    Store(StoreError),
}

fn tx_update(u: aws_sdk_dynamodb::types::builders::UpdateBuilder) -> TransactWriteItem {
    TransactWriteItem::builder().update(u.build().expect("table, key and expression are set")).build()
}

fn tx_put(p: aws_sdk_dynamodb::types::builders::PutBuilder) -> TransactWriteItem {
    TransactWriteItem::builder().put(p.build().expect("table and item are set")).build()
}

fn block_gsi_sk(rule_id: Option<&str>, reservation_id: &str) -> String {
    format!("RULE#{}#{reservation_id}", rule_id.unwrap_or("-"))
}
