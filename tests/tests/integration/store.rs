//! The DynamoDB adapter on moto: the store contract (`capblock_core::contract::store`, the
//! same cases the in-memory table passes in the core's unit tests), run through the real
//! `DynamoStore` with DynamoDB's departures played by its client and by raw writes; and the
//! cases only the adapter has (items that do not decode, the guard's `held` attribute).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeDeserializationInterceptorContextRef,
    BeforeTransmitInterceptorContextMut,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::types::AttributeValue;
use capblock_core::contract::fixtures::{block_for, intent, notice, now, rule};
use capblock_core::contract::store::{self as contract, StoreFaults};
use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::block::Block;
use capblock_shared::domain::budget::{BudgetOwner, Intent, IntentState, Period};
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::ports::{BlockStore, Ledger, Outbox, RuleStore, StoreError};
use capblock_tests::Aws;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the client is to do to its next call: lose a write's answer after moto applied it,
/// or answer a transaction as DynamoDB does when another transaction holds one of its items.
#[derive(Debug, Default)]
struct Armed {
    lose: AtomicBool,
    conflict: AtomicBool,
    /// Set between a call's transmission and its answer: that answer is the one to lose, or
    /// to replace with the cancellation.
    losing: AtomicBool,
    conflicting: AtomicBool,
}

#[derive(Debug, Clone)]
struct FaultyClient(Arc<Armed>);

const WRITES: [&str; 5] = ["TransactWriteItems", "UpdateItem", "PutItem", "DeleteItem", "BatchWriteItem"];

/// DynamoDB's answer to a transaction that met another transaction on its second item (the
/// rule's guard): cancelled, `TransactionConflict`, nothing written.
const CONFLICT: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict, None, None]","CancellationReasons":[{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"},{"Code":"None"},{"Code":"None"}]}"#;

impl Intercept for FaultyClient {
    fn name(&self) -> &'static str {
        "store-contract-faults"
    }

    fn modify_before_transmit(
        &self,
        ctx: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = ctx.request().headers().get("x-amz-target").unwrap_or_default().to_string();
        let op = target.rsplit('.').next().unwrap_or_default();
        if WRITES.contains(&op) && self.0.lose.swap(false, Ordering::SeqCst) {
            self.0.losing.store(true, Ordering::SeqCst);
        }
        if op == "TransactWriteItems" && self.0.conflict.swap(false, Ordering::SeqCst) {
            // moto must not apply it: it is asked something harmless, and the answer replaced.
            let req = ctx.request_mut();
            req.headers_mut().insert("x-amz-target", "DynamoDB_20120810.ListTables");
            req.headers_mut().insert("content-length", "2");
            *req.body_mut() = "{}".to_string().into();
            self.0.conflicting.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.0.conflicting.swap(false, Ordering::SeqCst) {
            let res = ctx.response_mut();
            *res.status_mut() = 400u16.try_into()?;
            res.headers_mut().remove("x-amz-crc32");
            res.headers_mut().remove("content-length");
            *res.body_mut() = CONFLICT.to_string().into();
        }
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        _: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.0.losing.swap(false, Ordering::SeqCst) {
            return Err("the connection dropped before the answer (the write was applied)".into());
        }
        Ok(())
    }
}

/// The adapter's faults: its client's, and raw writes to the test's table.
struct MotoFaults {
    armed: Arc<Armed>,
    raw: aws_sdk_dynamodb::Client,
    table: String,
    /// The block items the open-blocks index had seen when it began to lag.
    seen: std::sync::Mutex<Option<Vec<String>>>,
}

impl MotoFaults {
    async fn block_keys(&self) -> Vec<String> {
        let out = self
            .raw
            .scan()
            .table_name(&self.table)
            .filter_expression("sk = :b")
            .expression_attribute_values(":b", AttributeValue::S("BLOCK".into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        out.items().iter().filter_map(|i| i.get("pk")?.as_s().ok().cloned()).collect()
    }
}

#[async_trait::async_trait]
impl StoreFaults for MotoFaults {
    fn lose_next_answer(&self) {
        self.armed.lose.store(true, Ordering::SeqCst);
    }
    fn conflict_next_transaction(&self) {
        self.armed.conflict.store(true, Ordering::SeqCst);
    }
    async fn lag_index(&self) {
        *self.seen.lock().unwrap() = Some(self.block_keys().await);
    }
    /// moto's index is always up to date: the blocks written since the lag began are taken out
    /// of it (their index attributes removed), as DynamoDB's may not show them yet.
    async fn index_lags(&self) {
        let seen = self.seen.lock().unwrap().clone().unwrap_or_default();
        for pk in self.block_keys().await.into_iter().filter(|pk| !seen.contains(pk)) {
            self.raw
                .update_item()
                .table_name(&self.table)
                .key("pk", AttributeValue::S(pk))
                .key("sk", AttributeValue::S("BLOCK".into()))
                .update_expression("REMOVE gsi1pk, gsi1sk")
                .send()
                .await
                .unwrap();
        }
    }
    async fn store_committed_as(&self, owner: &BudgetOwner, period: &Period, committed: &str) {
        self.raw
            .update_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("BUDGET#{}", owner.key())))
            .key("sk", AttributeValue::S(format!("PERIOD#{}", period.as_str())))
            .update_expression("SET committed = :c")
            .expression_attribute_values(":c", AttributeValue::N(committed.into()))
            .send()
            .await
            .unwrap();
    }
}

/// A fresh table on moto, its `DynamoStore` on a client whose faults the case may arm.
async fn on_moto(name: &str) -> (Aws, DynamoStore, MotoFaults) {
    let aws = Aws::fresh(name).await;
    let armed = Arc::new(Armed::default());
    let conf = aws_sdk_dynamodb::config::Builder::from(&aws.sdk).interceptor(FaultyClient(armed.clone())).build();
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(conf), &aws.table);
    let raw = aws_sdk_dynamodb::Client::new(&aws.sdk);
    let faults = MotoFaults { armed, raw, table: aws.table.clone(), seen: Default::default() };
    (aws, store, faults)
}

macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_aws, store, faults) = on_moto(&stringify!($name).replace('_', "-")[..40.min(stringify!($name).len())]).await;
                contract::run(stringify!($name), &store, &faults).await;
            }
        )*
    };
}

capblock_core::store_contract_cases!(contract);

/// Adapter-only: items written by hand that do not decode (the in-memory table stores only
/// typed values, so it has no such item to leave out).
/// Writes an item whose `data` does not decode, with the keys and index entries of its kind.
async fn put_corrupt(store: &DynamoStore, attrs: &[(&str, &str)]) {
    let mut put = store.client().put_item().table_name(store.table());
    for (k, v) in attrs {
        put = put.item(*k, AttributeValue::S(v.to_string()));
    }
    put.item("data", AttributeValue::S("{\"truncated\": ".into())).send().await.unwrap();
}

/// One corrupt item used to stop every run that listed its kind (a retryable store error, so
/// retried forever). A listing now leaves it out and counts it; the good items beside it are
/// returned. A rule's own blocks stay strict (they bound `max_blocks_held`), and so does a
/// single requested item: a typed, non-retryable error naming its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_item_is_left_out_of_listings_and_named_when_asked_for() {
    let aws = Aws::fresh("corrupt").await;
    let store = aws.store();
    store.put_rule(&rule("good", "1000"), None).await.unwrap();
    put_corrupt(&store, &[("pk", "RULE#bad"), ("sk", "RULE"), ("gsi1pk", "RULES"), ("gsi1sk", "bad")]).await;
    let it = intent(&rule("r1", "1000"), "cb-1", "10", None);
    store.reserve(&it, 0).await.unwrap();
    put_corrupt(&store, &[("pk", "RULE#r2"), ("sk", "INTENT#cb-2"), ("gsi1pk", "INTENT#OPEN"), ("gsi1sk", "r2/cb-2")])
        .await;
    let mut sent = it.clone();
    store.mark_sent(&it.id, "r1", now()).await.unwrap();
    sent.state = IntentState::Sent;
    store.record_bought(&sent, &block_for(&sent, "cr-1"), &[]).await.unwrap();
    put_corrupt(
        &store,
        &[("pk", "BLOCK#cr-bad"), ("sk", "BLOCK"), ("gsi1pk", "BLOCK#OPEN"), ("gsi1sk", "RULE#r1#cr-bad")],
    )
    .await;
    store.enqueue(&notice("cr-1", "scheduled")).await.unwrap();
    put_corrupt(
        &store,
        &[
            ("pk", "BLOCK#cr-bad"),
            ("sk", "NOTICE#active"),
            ("gsi1pk", "NOTICE#PENDING"),
            ("gsi1sk", "2026-12-01T08:00:00.000Z#x"),
        ],
    )
    .await;
    assert_eq!(store.take_corrupt_items(), 0);

    let rules: Vec<String> = store.list_rules().await.unwrap().into_iter().map(|s| s.rule.id).collect();
    assert_eq!(rules, vec!["good".to_string()]);
    assert!(store.open_intents().await.unwrap().is_empty(), "the good intent is closed, the corrupt one left out");
    let open: Vec<String> = store.open_blocks(None).await.unwrap().into_iter().map(|b| b.reservation_id).collect();
    assert_eq!(open, vec!["cr-1".to_string()]);
    let pending: Vec<String> = store.pending().await.unwrap().into_iter().map(|n| n.milestone.into()).collect();
    assert_eq!(pending, vec!["scheduled".to_string()]);
    assert_eq!(store.take_corrupt_items(), 4, "each skipped item is counted");
    assert_eq!(store.take_corrupt_items(), 0);

    // Strict where a missing item would lift a limit, or was asked for by name.
    let e = store.open_blocks(Some("r1")).await.unwrap_err();
    assert!(matches!(&e, StoreError::Corrupt { key, .. } if key == "BLOCK#cr-bad/BLOCK"), "{e}");
    let e = store.get_rule("bad").await.unwrap_err();
    assert!(matches!(&e, StoreError::Corrupt { key, .. } if key == "RULE#bad/RULE"), "{e}");
    let e = capblock_shared::lambda::FunctionError::from(e);
    assert_eq!((e.kind(), e.retryable()), ("capblock.CorruptItem", false));
}

/// Adapter-only: the guard's `held` attribute, which the rule's count reads strongly (the
/// contract's `a_rules_held_blocks_are_counted_before_the_index_shows_them` checks what it
/// counts; this, that a block moved to a final state leaves the attribute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_block_leaves_the_guards_held_attribute() {
    let aws = Aws::fresh("held").await;
    let store = aws.store();
    let it = intent(&rule("r1", "1000"), "cb-1", "10", None);
    store.reserve(&it, 0).await.unwrap();
    store.mark_sent(&it.id, "r1", now()).await.unwrap();
    let sent = Intent { state: IntentState::Sent, ..it.clone() };
    store.record_bought(&sent, &block_for(&sent, "cr-1"), &[]).await.unwrap();
    let adopted = Block { reservation_id: "cr-2".into(), intent_id: None, ..block_for(&sent, "cr-1") };
    assert!(store.adopt_block(&adopted).await.unwrap());
    let done = Block { state: BlockState::Expired, ..store.get_block("cr-1").await.unwrap().unwrap() };
    store.update_block(&done, done.version).await.unwrap();
    let guard = store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", AttributeValue::S("RULE#r1".into()))
        .key("sk", AttributeValue::S("GUARD".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let names = guard.item.unwrap()["held"].as_ss().unwrap().clone();
    assert_eq!(names, ["cr-2"], "a final block leaves the guard's held");
}
