//! The DynamoDB store: one table, several item kinds (see README "Data model").
//!
//! | item        | pk                     | sk                         | gsi1pk / gsi1sk                 |
//! |-------------|------------------------|----------------------------|---------------------------------|
//! | rule        | `RULE#<id>`            | `RULE`                     | `RULES` / `<id>`                |
//! | rule guard  | `RULE#<id>`            | `GUARD`                    |                                 |
//! | intent      | `RULE#<id>`            | `INTENT#<offering>`        | `INTENT#OPEN` while open        |
//! | dry-run     | `RULE#<id>`            | `DRYRUN#<offering>`        |                                 |
//! | approval    | `RULE#<id>`            | `APPROVAL#<offering>`      |                                 |
//! | budget      | `BUDGET#<owner>`       | `PERIOD#<yyyy-mm>`         |                                 |
//! | block       | `BLOCK#<reservation>`  | `BLOCK`                    | `BLOCK#OPEN` / `RULE#<r>#<id>`  |
//! | observation | `OBS#<region>#<type>`  | `<seen-at>#<offering>`     | (ttl)                           |
//! | market      | `MARKET#<region>`      | `MEMORY`                   |                                 |
//! | notice      | `BLOCK#<thread>`       | `NOTICE#<milestone>`       | `NOTICE#PENDING` until sent     |
//! | extension   | `BLOCK#<reservation>`  | `EXT#<offering>`           | `EXT#OPEN` (see `dynamo/track`) |

use std::time::Duration as StdDuration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, PutRequest, TransactWriteItem, Update, WriteRequest};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use super::dynamo_item::{Item, data, get_decimal, get_s, get_u64, json, key, n, s};
use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, IntentState, Period};
use crate::domain::money::Money;
use crate::domain::names::{InstanceType, Region};
use crate::domain::plan::RegionMemory;
use crate::domain::rule::Rule;
use crate::ports::{
    Block, BlockArchive, BlockStore, ExtensionIntent, ExtensionLedger, ExtensionState, Ledger, MarketMemory, Notice,
    Observation, ObservationStore, Outbox, ReserveError, RuleGuard, RuleStore, StoreError, StoredRule,
};

mod track;

/// How long price observations are kept.
pub const OBSERVATION_TTL: Duration = Duration::days(400);
const OPEN_INTENTS: &str = "INTENT#OPEN";
/// A closed intent that spent nothing: its fee and its purchase go back to every budget.
const RELEASE_FEE: &str = "SET committed = committed - :fee, purchases = purchases - :one";
const OPEN_BLOCKS: &str = "BLOCK#OPEN";
const RULES: &str = "RULES";
pub const GSI: &str = "gsi1";

/// The IAM actions each port of this adapter needs: a function's role allows exactly those of
/// the ports it declares in `AWS_PORTS`. infra/deploy/crosscheck checks that every SDK call here
/// has its action in this table and that nothing in it is uncalled (ARCHITECTURE.md, "Where a
/// change goes": a new AWS call).
// A transaction needs the action of each kind of item it carries (Put, Update, Delete) besides
// TransactWriteItems.
pub const ACTIONS: &[(&str, &[&str])] = &[
    ("RuleStore", &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"]),
    ("MarketMemory", &["dynamodb:GetItem", "dynamodb:PutItem"]),
    (
        "Ledger",
        &[
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:TransactWriteItems",
        ],
    ),
    ("BlockArchive", &["dynamodb:Scan"]),
    ("BlockStore", &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]),
    ("ExtensionLedger", &["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:TransactWriteItems"]),
    ("Outbox", &["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]),
    ("ObservationStore", &["dynamodb:BatchWriteItem", "dynamodb:Query"]),
    // Not a port: `create_table` sets up the local stack and the tests; no function declares it.
    ("TableSetup", &["dynamodb:CreateTable"]),
];

#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    table: String,
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

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore { client, table: table.into() }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
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
    ) -> Result<(), StoreError> {
        let fee = n(intent.offering.fee.amount());
        let mut items: Vec<TransactWriteItem> = extra;
        match &closed {
            Some(closed) => items.push(tx_update(
                self.update(
                    intent_key(&intent.rule_id, &intent.offering.id),
                    "SET #s = :new, #d = :data REMOVE gsi1pk, gsi1sk",
                )
                .condition_expression("#s IN (:reserved, :sent)")
                .expression_attribute_names("#s", "state")
                .expression_attribute_names("#d", "data")
                .expression_attribute_values(":new", s(closed.state.as_str()))
                .expression_attribute_values(":data", json(closed))
                .expression_attribute_values(":reserved", s(IntentState::Reserved.as_str()))
                .expression_attribute_values(":sent", s(IntentState::Sent.as_str())),
            )),
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
        items.push(tx_update(
            self.update(key(rule_pk(&intent.rule_id), "GUARD"), "REMOVE open_intent")
                .condition_expression("open_intent = :iid")
                .expression_attribute_values(":iid", s(&intent.id)),
        ));
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

#[async_trait]
impl RuleStore for DynamoStore {
    async fn put_rule(&self, rule: &Rule, expected_version: Option<u64>) -> Result<u64, StoreError> {
        let version = expected_version.unwrap_or(0) + 1;
        let mut item = key(rule_pk(&rule.id), "RULE");
        item.insert("data".into(), json(rule));
        item.insert("version".into(), n(version));
        item.insert("enabled".into(), AttributeValue::Bool(rule.enabled));
        item.insert("gsi1pk".into(), s(RULES));
        item.insert("gsi1sk".into(), s(&rule.id));
        let mut put = self.client.put_item().table_name(&self.table).set_item(Some(item));
        put = match expected_version {
            None => put,
            Some(0) => put.condition_expression("attribute_not_exists(pk)"),
            Some(v) => put.condition_expression("version = :v").expression_attribute_values(":v", n(v)),
        };
        // Only a failed condition is a version conflict: a refused item (too large) or an
        // unreachable table is not, and must not read like one.
        put.send().await.map_err(|e| match store_err(&format!("rule {}", rule.id), e) {
            StoreError::Conflict(what) => StoreError::Conflict(format!("{what} (version changed)")),
            other => other,
        })?;
        Ok(version)
    }

    async fn get_rule(&self, id: &str) -> Result<Option<StoredRule>, StoreError> {
        let Some(item) = self.get(key(rule_pk(id), "RULE")).await? else { return Ok(None) };
        Ok(Some(StoredRule { rule: data(&item)?, version: get_u64(&item, "version")?.unwrap_or(0) }))
    }

    async fn list_rules(&self) -> Result<Vec<StoredRule>, StoreError> {
        self.query_gsi(RULES, None)
            .await?
            .iter()
            .map(|item| Ok(StoredRule { rule: data(item)?, version: get_u64(item, "version")?.unwrap_or(0) }))
            .collect()
    }

    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(rule_pk(id), "RULE")))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| store_err(&format!("rule {id}"), e))?;
        Ok(out.attributes.is_some_and(|a| !a.is_empty()))
    }
}

/// The planner's memory: one item per region, rewritten whole by each scan. Two overlapping
/// scans may overwrite each other's update; the cost is a question asked again.
#[async_trait]
impl MarketMemory for DynamoStore {
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError> {
        Ok(self
            .get(key(format!("MARKET#{region}"), "MEMORY"))
            .await?
            .map(|i| data(&i))
            .transpose()?
            .unwrap_or_default())
    }

    async fn save_region_memory(&self, region: &Region, memory: &RegionMemory) -> Result<(), StoreError> {
        let mut item = key(format!("MARKET#{region}"), "MEMORY");
        item.insert("data".into(), json(memory));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| store_err(&format!("market memory of {region}"), e))?;
        Ok(())
    }
}

#[async_trait]
impl Ledger for DynamoStore {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError> {
        let item = self.get(key(rule_pk(rule_id), "GUARD")).await?;
        Ok(match item {
            None => RuleGuard::default(),
            Some(i) => RuleGuard {
                open_intent: get_s(&i, "open_intent").map(str::to_string),
                seq: get_u64(&i, "seq")?.unwrap_or(0),
            },
        })
    }

    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError> {
        let Some(item) = self.get(budget_key(owner, period)).await? else { return Ok(None) };
        let currency = get_s(&item, "currency").unwrap_or("USD");
        let money = |d: Option<Decimal>| {
            Money::parse(&d.unwrap_or_default().to_string(), currency)
                .map_err(|e| StoreError::Corrupt { key: format!("budget {}", owner.key()), message: e.to_string() })
        };
        Ok(Some(BudgetUsage {
            committed: money(get_decimal(&item, "committed")?)?,
            spent: money(get_decimal(&item, "spent")?)?,
            purchases: get_u64(&item, "purchases")?.unwrap_or(0) as u32,
        }))
    }

    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError> {
        let fee = intent.offering.fee;
        let charges = &intent.charges;
        let mut items = vec![
            tx_put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(Self::intent_item(intent)))
                    .condition_expression("attribute_not_exists(pk)"),
            ),
            tx_update(
                self.update(
                    key(rule_pk(&intent.rule_id), "GUARD"),
                    "SET open_intent = :iid, seq = if_not_exists(seq, :zero) + :one",
                )
                .condition_expression(
                    "attribute_not_exists(open_intent) AND (attribute_not_exists(seq) OR seq = :seen)",
                )
                .expression_attribute_values(":iid", s(&intent.id))
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":seen", n(seen_seq)),
            ),
        ];
        for c in charges {
            if c.limit.currency() != fee.currency() || fee.amount() > c.limit.amount() {
                return Err(ReserveError::OverBudget(c.owner.key()));
            }
            // DynamoDB conditions cannot add, so the check is `committed <= limit - fee`.
            let headroom = c.limit.amount() - fee.amount();
            let mut cond = "(attribute_not_exists(committed) OR committed <= :headroom)".to_string();
            let mut u = self.update(
                budget_key(&c.owner, &c.period),
                "SET committed = if_not_exists(committed, :zero) + :fee, spent = if_not_exists(spent, :zero), \
                 purchases = if_not_exists(purchases, :zero) + :one, #limit = :limit, currency = :cur",
            );
            if let Some(max) = c.max_purchases {
                cond.push_str(" AND (attribute_not_exists(purchases) OR purchases < :maxp)");
                u = u.expression_attribute_values(":maxp", n(max));
            }
            items.push(tx_update(
                u.condition_expression(cond)
                    .expression_attribute_names("#limit", "limit")
                    .expression_attribute_values(":zero", n(0))
                    .expression_attribute_values(":one", n(1))
                    .expression_attribute_values(":fee", n(fee.amount()))
                    .expression_attribute_values(":headroom", n(headroom))
                    .expression_attribute_values(":limit", n(c.limit.amount()))
                    .expression_attribute_values(":cur", s(c.limit.currency().as_str())),
            ));
        }
        match self.transact(items).await {
            Ok(()) => Ok(()),
            Err(TxError::Store(e)) => Err(e.into()),
            Err(TxError::Cancelled(codes)) => {
                let failed = |i: usize| codes.get(i).is_some_and(|c| c == "ConditionalCheckFailed");
                if failed(0) {
                    return Err(ReserveError::AlreadyExists);
                }
                if failed(1) {
                    return Err(ReserveError::RuleBusy);
                }
                for (i, c) in charges.iter().enumerate() {
                    if failed(i + 2) {
                        // Tell the two budget conditions apart by reading the item.
                        let usage = self.usage(&c.owner, &c.period).await?;
                        let at_max = matches!((c.max_purchases, &usage), (Some(m), Some(u)) if u.purchases >= m);
                        return Err(if at_max {
                            ReserveError::PurchaseLimit
                        } else {
                            ReserveError::OverBudget(c.owner.key())
                        });
                    }
                }
                Err(ReserveError::Store(StoreError::Conflict(format!("transaction cancelled: {}", codes.join(",")))))
            }
        }
    }

    async fn mark_sent(&self, intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let Some(mut intent) = self.get_intent(rule_id, intent_id).await? else {
            return Err(StoreError::NotFound { what: format!("intent {intent_id}") });
        };
        intent.state = IntentState::Sent;
        intent.sent_at = Some(at);
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(intent_key(rule_id, &intent.offering.id)))
            .update_expression("SET #s = :sent, #d = :data")
            .condition_expression("#s = :reserved")
            .expression_attribute_names("#s", "state")
            .expression_attribute_names("#d", "data")
            .expression_attribute_values(":sent", s(IntentState::Sent.as_str()))
            .expression_attribute_values(":reserved", s(IntentState::Reserved.as_str()))
            .expression_attribute_values(":data", json(&intent))
            .send()
            .await
            .map_err(|e| store_err(&format!("intent {intent_id} is no longer reserved"), e))?;
        Ok(())
    }

    async fn record_bought(&self, intent: &Intent, block: &Block, notice: &Notice) -> Result<(), StoreError> {
        let mut closed = intent.clone();
        closed.state = IntentState::Bought;
        closed.reservation_id = Some(block.reservation_id.clone());
        let put_block = tx_put(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(Self::block_item(block)))
                .condition_expression("attribute_not_exists(pk)"),
        );
        let put_notice = tx_put(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(notice_item(notice)))
                .condition_expression("attribute_not_exists(pk)"),
        );
        self.close_intent(intent, Some(closed), "SET spent = spent + :fee", vec![put_block, put_notice]).await
    }

    async fn record_rejected(&self, intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError> {
        let mut closed = intent.clone();
        closed.state = IntentState::Rejected;
        closed.reason = Some(reason.to_string());
        let extra = notice
            .map(|n| {
                tx_put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(notice_item(n)))
                        .condition_expression("attribute_not_exists(pk)"),
                )
            })
            .into_iter()
            .collect();
        self.close_intent(intent, Some(closed), RELEASE_FEE, extra).await
    }

    async fn record_given_back(&self, intent: &Intent, reason: &str) -> Result<(), StoreError> {
        tracing::info!(event = "intent_given_back", intent = %intent.id, %reason, "nothing reached EC2; the offering may be tried again");
        self.close_intent(intent, None, RELEASE_FEE, vec![]).await
    }

    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError> {
        let mut item = key(rule_pk(&intent.rule_id), format!("DRYRUN#{}", intent.offering.id));
        item.insert("data".into(), json(intent));
        item.insert("state".into(), s(IntentState::DryRun.as_str()));
        self.put_new(item, "dry-run record").await
    }

    async fn record_approval(&self, intent: &Intent) -> Result<bool, StoreError> {
        let mut item = key(rule_pk(&intent.rule_id), format!("APPROVAL#{}", intent.offering.id));
        item.insert("data".into(), json(intent));
        item.insert("state".into(), s("awaiting-approval"));
        self.put_new(item, "approval record").await
    }

    async fn get_approval(&self, rule_id: &str, offering_id: &str) -> Result<Option<Intent>, StoreError> {
        self.get(key(rule_pk(rule_id), format!("APPROVAL#{offering_id}"))).await?.map(|i| data(&i)).transpose()
    }

    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError> {
        let offering_id = intent_id.strip_prefix(&format!("{rule_id}/")).unwrap_or(intent_id);
        self.get(intent_key(rule_id, offering_id)).await?.map(|i| data(&i)).transpose()
    }

    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError> {
        self.query_gsi(OPEN_INTENTS, None).await?.iter().map(data).collect()
    }

    async fn release_failed_block(
        &self,
        block: &Block,
        intent: &Intent,
        restore_purchase: bool,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.release_failed_block_tx(block, intent, restore_purchase, at).await
    }
}

#[async_trait]
impl BlockArchive for DynamoStore {
    async fn all_blocks(&self) -> Result<Vec<Block>, StoreError> {
        self.client
            .scan()
            .table_name(&self.table)
            .filter_expression("sk = :sk AND begins_with(pk, :pk)")
            .expression_attribute_values(":sk", s("BLOCK"))
            .expression_attribute_values(":pk", s("BLOCK#"))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| store_err("all blocks", e))?
            .iter()
            .map(data)
            .collect()
    }
}

#[async_trait]
impl BlockStore for DynamoStore {
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError> {
        let prefix = rule_id.map(|r| format!("RULE#{r}#"));
        self.query_gsi(OPEN_BLOCKS, prefix.as_deref()).await?.iter().map(data).collect()
    }

    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError> {
        self.get(key(block_pk(reservation_id), "BLOCK")).await?.map(|i| data(&i)).transpose()
    }

    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError> {
        self.put_new(Self::block_item(block), "adopt block").await
    }

    async fn update_block(&self, block: &Block, expected_version: u64) -> Result<(), StoreError> {
        self.update_block_item(block, expected_version).await
    }
}

#[async_trait]
impl ExtensionLedger for DynamoStore {
    async fn reserve_extension(&self, intent: &ExtensionIntent) -> Result<(), ReserveError> {
        self.reserve_extension_tx(intent).await
    }

    async fn advance_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.advance_extension_item(intent, to, at).await
    }

    async fn close_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.close_extension_tx(intent, to, reason).await
    }

    async fn extensions_of(&self, reservation_id: &str) -> Result<Vec<ExtensionIntent>, StoreError> {
        self.extensions_of_block(reservation_id).await
    }

    async fn open_extensions(&self) -> Result<Vec<ExtensionIntent>, StoreError> {
        self.open_extension_intents().await
    }
}

const PENDING_NOTICES: &str = "NOTICE#PENDING";

fn notice_key(thread: &str, milestone: &str) -> Item {
    key(format!("BLOCK#{thread}"), format!("NOTICE#{milestone}"))
}

fn notice_item(notice: &Notice) -> Item {
    let mut item = notice_key(&notice.thread, &notice.milestone);
    item.insert("data".into(), json(notice));
    item.insert("gsi1pk".into(), s(PENDING_NOTICES));
    item.insert(
        "gsi1sk".into(),
        s(format!("{}#{}", notice.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), notice.id())),
    );
    item
}

#[async_trait]
impl Outbox for DynamoStore {
    async fn enqueue(&self, notice: &Notice) -> Result<bool, StoreError> {
        self.put_new(notice_item(notice), "enqueue notice").await
    }

    async fn pending(&self) -> Result<Vec<Notice>, StoreError> {
        self.query_gsi(PENDING_NOTICES, None).await?.iter().map(data).collect()
    }

    async fn lease(&self, notice: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError> {
        match self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(notice_key(&notice.thread, &notice.milestone)))
            .update_expression("SET lease_until = :until")
            .condition_expression(
                "attribute_exists(gsi1pk) AND (attribute_not_exists(lease_until) OR lease_until < :now)",
            )
            .expression_attribute_values(":until", n(until.timestamp_millis()))
            .expression_attribute_values(":now", n(now.timestamp_millis()))
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) => match store_err("lease notice", e) {
                StoreError::Conflict(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    async fn mark_published(&self, notice: &Notice, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(notice_key(&notice.thread, &notice.milestone)))
            .update_expression("SET published_at = :at REMOVE gsi1pk, gsi1sk, lease_until")
            .expression_attribute_values(":at", s(at.to_rfc3339()))
            .send()
            .await
            .map_err(|e| store_err("mark notice published", e))?;
        Ok(())
    }
}

fn obs_pk(region: &Region, instance_type: &InstanceType) -> String {
    format!("OBS#{region}#{instance_type}")
}

#[async_trait]
impl ObservationStore for DynamoStore {
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError> {
        let mut written = 0;
        for chunk in observations.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|o| {
                    let mut item = key(
                        obs_pk(&o.offering.region, &o.offering.instance_type),
                        format!("{}#{}", o.seen_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), o.offering.id),
                    );
                    item.insert("data".into(), json(o));
                    item.insert("ttl".into(), n((o.seen_at + OBSERVATION_TTL).timestamp()));
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(item)).build().expect("item set"))
                        .build()
                })
                .collect();
            // BatchWriteItem may hand back unprocessed items under load: retry them with backoff.
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
                    .map_err(|e| store_err("observations batch", e))?;
                pending = out.unprocessed_items.and_then(|mut m| m.remove(&self.table)).unwrap_or_default();
                written += n_sent - pending.len();
                if !pending.is_empty() {
                    tokio::time::sleep(StdDuration::from_millis(50 << attempt)).await;
                }
            }
            if !pending.is_empty() {
                return Err(StoreError::Unavailable(format!("{} observations left unprocessed", pending.len())));
            }
        }
        Ok(written)
    }

    async fn history(
        &self,
        region: &Region,
        instance_type: &InstanceType,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Observation>, StoreError> {
        let fmt = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :a AND :b")
            .expression_attribute_values(":pk", s(obs_pk(region, instance_type)))
            .expression_attribute_values(":a", s(fmt(from)))
            .expression_attribute_values(":b", s(format!("{}~", fmt(to))));
        Self::all_items(q, "history").await?.iter().map(data).collect()
    }
}

/// Creates the table as template.yaml declares it (for local stacks and tests).
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
        ScalarAttributeType,
    };
    let attr = |name: &str| {
        AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build().expect("set")
    };
    let k = |name: &str, t: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(t).build().expect("set");
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .attribute_definitions(attr("gsi1pk"))
        .attribute_definitions(attr("gsi1sk"))
        .key_schema(k("pk", KeyType::Hash))
        .key_schema(k("sk", KeyType::Range))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(GSI)
                .key_schema(k("gsi1pk", KeyType::Hash))
                .key_schema(k("gsi1sk", KeyType::Range))
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .expect("set"),
        )
        .send()
        .await
        .map_err(|e| store_err("create table", e))?;
    Ok(())
}
