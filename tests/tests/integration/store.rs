//! The DynamoDB adapter on moto: conditions, transactions, indexes.

use capblock_shared::domain::block::Block;
use capblock_shared::domain::budget::{BudgetCharge, BudgetOwner, Intent, IntentState, Period};
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::offering::Offering;
use capblock_shared::domain::rule::{Mode, Rule};
use capblock_shared::ports::{
    BlockStore, Ledger, Message, Notice, Observation, ObservationStore, Outbox, ReserveError, RuleStore, StoreError,
    Topic,
};
use capblock_tests::{Aws, RuleToml, p5_offering};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use rust_decimal_macros::dec;

fn now() -> DateTime<Utc> {
    "2026-12-01T08:00:00Z".parse().unwrap()
}

pub fn rule(id: &str, budget: &str) -> Rule {
    RuleToml::p5(id).max_price("5").budget(budget).max_purchases_per_month(2).window(0, 14).rule(now())
}

pub fn offering(id: &str, fee: Decimal) -> Offering {
    p5_offering("us-east-1", id, "2026-12-03T11:30:00Z".parse().unwrap(), fee)
}

fn charges(rule: &Rule, account: Option<Decimal>) -> Vec<BudgetCharge> {
    let budgets = capblock_shared::domain::budget::StackBudgets {
        account: account.map(|a| Money::usd(a).unwrap()),
        teams: Default::default(),
    };
    capblock_shared::domain::budget::charges_for(rule, &budgets, &Period::of(now())).expect("no team")
}

fn block_for(intent: &Intent, id: &str) -> Block {
    Block {
        reservation_id: id.into(),
        region: intent.offering.region.clone(),
        availability_zone: "us-east-1a".into(),
        instance_type: intent.offering.instance_type.clone(),
        instance_count: 1,
        start: intent.offering.start,
        end: intent.offering.end,
        state: BlockState::PaymentPending,
        fee: Some(intent.offering.fee),
        accelerators_per_instance: Some(8),
        purchased_at: now(),
        payment_deadline: None,
        rule_id: Some(intent.rule_id.clone()),
        intent_id: Some(intent.id.clone()),
        ultraserver: false,
        arn: None,
        period: Some(intent.period.clone()),
        version: 1,
        capacity_block_id: None,
        health: None,
        health_changes: 0,
        usage: Default::default(),
    }
}

fn notice(thread: &str, milestone: &str) -> Notice {
    Notice {
        thread: thread.into(),
        milestone: capblock_shared::domain::outbox_key::OutboxKey::parse(milestone).unwrap(),
        topic: Topic::Alerts,
        message: Message { body: "{}".into(), attributes: Default::default() },
        created_at: now(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_use_optimistic_versions() {
    let aws = Aws::fresh("rules").await;
    let store = aws.store();
    let r = rule("r1", "1000");
    assert_eq!(store.put_rule(&r, Some(0)).await.unwrap(), 1);
    // Creating it again, or updating from a stale version, is a conflict.
    assert!(matches!(store.put_rule(&r, Some(0)).await, Err(StoreError::Conflict(_))));
    assert_eq!(store.put_rule(&r, Some(1)).await.unwrap(), 2);
    assert!(matches!(store.put_rule(&r, Some(1)).await, Err(StoreError::Conflict(_))));
    let got = store.get_rule("r1").await.unwrap().unwrap();
    assert_eq!((got.rule, got.version), (r, 2));
    store.put_rule(&rule("r2", "5"), None).await.unwrap();
    let mut ids: Vec<_> = store.list_rules().await.unwrap().into_iter().map(|s| s.rule.id).collect();
    ids.sort();
    assert_eq!(ids, vec!["r1", "r2"]);
    assert!(store.get_rule("nope").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_failed_condition_reads_as_a_version_change() {
    let aws = Aws::fresh("rule-label").await;
    let store = aws.store();
    let r = rule("r1", "1000");
    store.put_rule(&r, Some(0)).await.unwrap();
    let conflict = store.put_rule(&r, Some(0)).await.unwrap_err();
    assert!(conflict.to_string().ends_with("rule r1 (version changed)"), "{conflict}");
    // An item DynamoDB refuses (over 400 KB) is not a version conflict.
    let huge = Rule { description: "x".repeat(500 * 1024), ..r.clone() };
    let refused = store.put_rule(&huge, Some(1)).await.unwrap_err();
    assert!(!matches!(refused, StoreError::Conflict(_)), "{refused}");
    assert!(!refused.to_string().contains("version changed"), "{refused}");
    assert_eq!(store.get_rule("r1").await.unwrap().unwrap().version, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_rule_keeps_its_blocks_intents_and_budgets() {
    let aws = Aws::fresh("rule-delete").await;
    let store = aws.store();
    let r = rule("r1", "1000");
    store.put_rule(&r, None).await.unwrap();
    let bought = Intent::new("r1", offering("cb-1", dec!(10)), 8, charges(&r, None), now());
    store.reserve(&bought, 0).await.unwrap();
    store.mark_sent(&bought.id, "r1", now()).await.unwrap();
    let sent = Intent { state: IntentState::Sent, ..bought.clone() };
    store.record_bought(&sent, &block_for(&sent, "cr-1"), &[notice("cr-1", "purchased")]).await.unwrap();
    let open = Intent::new("r1", offering("cb-2", dec!(20)), 8, charges(&r, None), now());
    store.reserve(&open, store.guard("r1").await.unwrap().seq).await.unwrap();

    assert!(store.delete_rule("r1").await.unwrap());
    assert!(store.get_rule("r1").await.unwrap().is_none());
    assert!(store.list_rules().await.unwrap().is_empty());
    assert!(!store.delete_rule("r1").await.unwrap(), "gone already");
    // Everything but the rule stays.
    assert_eq!(store.open_blocks(Some("r1")).await.unwrap().len(), 1);
    assert_eq!(store.open_intents().await.unwrap().iter().map(|i| &i.id).collect::<Vec<_>>(), [&open.id]);
    let usage = store.usage(&BudgetOwner::Rule("r1".into()), &Period::of(now())).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.purchases), (dec!(30), 2));
    assert_eq!(store.guard("r1").await.unwrap().open_intent.as_deref(), Some(open.id.as_str()));
    // Put again, it is a new rule (version 1) that finds its month as it was.
    assert_eq!(store.put_rule(&r, Some(0)).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_is_all_or_nothing() {
    let aws = Aws::fresh("reserve").await;
    let store = aws.store();
    let r = rule("r1", "1000");
    // The account budget (700) cannot take a 800 fee although the rule's (1000) could:
    // the whole transaction fails, so neither the intent, the guard nor the rule budget moved.
    let big = Intent::new("r1", offering("cb-big", dec!(800)), 8, charges(&r, Some(dec!(700))), now());
    assert_eq!(store.reserve(&big, 0).await, Err(ReserveError::OverBudget("ACCOUNT".into())));
    let mut acct = charges(&r, Some(dec!(1000)));
    acct[1].limit = Some(Money::usd(dec!(900)).unwrap());
    let first = Intent::new("r1", offering("cb-a", dec!(600)), 8, acct.clone(), now());
    store.reserve(&first, 0).await.unwrap();
    let second = Intent::new("r1", offering("cb-b", dec!(350)), 8, acct.clone(), now());
    // Guard taken by `first`:
    assert_eq!(store.reserve(&second, 1).await, Err(ReserveError::RuleBusy));
    assert!(store.get_intent("r1", &second.id).await.unwrap().is_none(), "no half-written intent");
    let usage = store.usage(&BudgetOwner::Rule("r1".into()), &Period::of(now())).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.purchases), (dec!(600), 1));

    // Same rule + offering again: the intent key already exists.
    assert_eq!(store.reserve(&first, 1).await, Err(ReserveError::AlreadyExists));

    // Rejecting releases budget and guard, after which the account's 900 stops a 350 fee
    // only if 600 were still committed: it is not.
    store.record_rejected(&first, "refused", Some(&notice("r1/cb-a", "rejected"))).await.unwrap();
    let usage = store.usage(&BudgetOwner::Account, &Period::of(now())).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.purchases), (dec!(0), 0));
    assert_eq!(store.guard("r1").await.unwrap().open_intent, None);
    // A stale sequence number (the decision was made before `first`) is refused.
    assert_eq!(store.reserve(&second, 0).await, Err(ReserveError::RuleBusy));
    let seq = store.guard("r1").await.unwrap().seq;
    store.reserve(&second, seq).await.unwrap();
    assert_eq!(
        store.open_intents().await.unwrap().iter().map(|i| i.id.clone()).collect::<Vec<_>>(),
        vec![second.id.clone()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purchases_per_month_are_capped() {
    let aws = Aws::fresh("cap").await;
    let store = aws.store();
    let r = rule("r1", "100000");
    for (i, id) in ["cb-1", "cb-2"].iter().enumerate() {
        let it = Intent::new("r1", offering(id, dec!(10)), 8, charges(&r, None), now());
        store.reserve(&it, i as u64).await.unwrap();
        store.mark_sent(&it.id, "r1", now()).await.unwrap();
        let mut sent = it.clone();
        sent.state = IntentState::Sent;
        store
            .record_bought(&sent, &block_for(&sent, &format!("cr-{i}")), &[notice(&format!("cr-{i}"), "purchased")])
            .await
            .unwrap();
    }
    let third = Intent::new("r1", offering("cb-3", dec!(10)), 8, charges(&r, None), now());
    assert_eq!(store.reserve(&third, 2).await, Err(ReserveError::PurchaseLimit));
    let usage = store.usage(&BudgetOwner::Rule("r1".into()), &Period::of(now())).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.spent.amount(), usage.purchases), (dec!(20), dec!(20), 2));
    // No account budget: the account's usage is counted all the same, for a cap set later.
    let account = store.usage(&BudgetOwner::Account, &Period::of(now())).await.unwrap().expect("the account charged");
    assert_eq!((account.committed.amount(), account.spent.amount(), account.purchases), (dec!(20), dec!(20), 2));
    let open = store.open_blocks(Some("r1")).await.unwrap();
    assert_eq!(open.len(), 2);
    assert!(store.open_blocks(Some("r2")).await.unwrap().is_empty());
    assert_eq!(store.pending().await.unwrap().len(), 2, "both purchase notices are in the outbox");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_sent_and_bought_need_the_right_state() {
    let aws = Aws::fresh("states").await;
    let store = aws.store();
    let r = rule("r1", "1000");
    let it = Intent::new("r1", offering("cb-1", dec!(10)), 8, charges(&r, None), now());
    store.reserve(&it, 0).await.unwrap();
    store.mark_sent(&it.id, "r1", now()).await.unwrap();
    // A second run cannot send it again.
    assert!(matches!(store.mark_sent(&it.id, "r1", now()).await, Err(StoreError::Conflict(_))));
    let mut sent = it.clone();
    sent.state = IntentState::Sent;
    store.record_bought(&sent, &block_for(&sent, "cr-1"), &[notice("cr-1", "purchased")]).await.unwrap();
    // Recording the same purchase twice fails as a whole (block exists, intent closed).
    assert!(matches!(
        store.record_bought(&sent, &block_for(&sent, "cr-1"), &[notice("cr-1", "purchased")]).await,
        Err(StoreError::Conflict(_))
    ));
    let got = store.get_intent("r1", &it.id).await.unwrap().unwrap();
    assert_eq!(got.state, IntentState::Bought);
    assert_eq!(got.reservation_id.as_deref(), Some("cr-1"));
    assert!(store.open_intents().await.unwrap().is_empty());
    assert_eq!(store.get_block("cr-1").await.unwrap().unwrap().fee.unwrap().amount(), dec!(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_leases_and_publishes_once() {
    let aws = Aws::fresh("outbox").await;
    let store = aws.store();
    let n = notice("cr-9", "scheduled");
    assert!(store.enqueue(&n).await.unwrap());
    assert!(!store.enqueue(&n).await.unwrap(), "the same milestone twice is dropped");
    assert!(store.lease(&n, now(), now() + Duration::seconds(60)).await.unwrap());
    assert!(!store.lease(&n, now(), now() + Duration::seconds(60)).await.unwrap(), "held by the first");
    // After the lease runs out another run may take it (the crash window).
    assert!(store.lease(&n, now() + Duration::seconds(61), now() + Duration::seconds(120)).await.unwrap());
    store.mark_published(&n, now()).await.unwrap();
    assert!(store.pending().await.unwrap().is_empty());
    assert!(!store.lease(&n, now() + Duration::days(1), now() + Duration::days(2)).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observations_are_batched_and_read_back_by_time() {
    let aws = Aws::fresh("obs").await;
    let store = aws.store();
    let obs: Vec<Observation> = (0..60)
        .map(|i| Observation {
            offering: offering(&format!("cb-{i:03}"), Decimal::from(100 + i)),
            accelerators_per_instance: 8,
            seen_at: now() + Duration::minutes(i),
        })
        .collect();
    assert_eq!(store.record(&obs).await.unwrap(), 60);
    let region = "us-east-1".parse().unwrap();
    let t = "p5.48xlarge".parse().unwrap();
    let window =
        store.history(&region, &t, now() + Duration::minutes(10), now() + Duration::minutes(19)).await.unwrap();
    assert_eq!(window.len(), 10);
    assert_eq!(window[0].offering.fee.amount(), dec!(110));
}

/// The stack's settings: one item, written when what it says differs (the time it was written
/// aside), read back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stacks_settings_are_rewritten_only_when_they_change() {
    use capblock_shared::domain::stack::{StackSettings, StoredSettings};
    use capblock_shared::ports::SettingsStore;
    let aws = Aws::fresh("settings").await;
    let store = aws.store();
    assert_eq!(store.stored_settings().await.unwrap(), None);
    let live = StoredSettings {
        stack: StackSettings {
            name: "prod".into(),
            mode: Mode::Live,
            account_budget: Some(Money::usd(dec!(1000)).unwrap()),
            team_budgets: Default::default(),
        },
        alerts_topic: aws.alerts_topic.clone(),
        written_at: now(),
    };
    assert!(store.store_settings(&live).await.unwrap());
    let later = StoredSettings { written_at: now() + Duration::hours(1), ..live.clone() };
    assert!(!store.store_settings(&later).await.unwrap(), "the same settings: nothing written");
    assert_eq!(store.stored_settings().await.unwrap(), Some(live.clone()));
    let uncapped = StoredSettings { stack: StackSettings { account_budget: None, ..live.stack.clone() }, ..later };
    assert!(store.store_settings(&uncapped).await.unwrap());
    assert_eq!(store.stored_settings().await.unwrap(), Some(uncapped));
}

/// Writes an item whose `data` does not decode, with the keys and index entries of its kind.
async fn put_corrupt(store: &capblock_shared::aws::dynamo::DynamoStore, attrs: &[(&str, &str)]) {
    use aws_sdk_dynamodb::types::AttributeValue;
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
    let r = rule("r1", "1000");
    let it = Intent::new("r1", offering("cb-1", dec!(10)), 8, charges(&r, None), now());
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

/// Two scans that read the same market memory and save at once: DynamoDB keeps both answers
/// (the second save merges into the first, on the item's version), never the last alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_saves_of_the_market_memory_lose_nothing() {
    use capblock_shared::domain::plan::{Asked, RegionMemory};
    use capblock_shared::ports::MarketMemory;
    let aws = Aws::fresh("memory-merge").await;
    let store = aws.store();
    let region = "us-east-1".parse().unwrap();
    let read = store.region_memory(&region).await.unwrap();
    let answered = |key: &str| {
        let mut m = read.clone();
        m.asked.insert(key.into(), Asked { at: now(), cheapest: None, recorded: None });
        m
    };
    let saves = (1..=4).map(|i| {
        let (store, read, mine) = (store.clone(), read.clone(), answered(&format!("q{i}")));
        let region = &region;
        async move { store.save_region_memory(region, &read, &mine).await }
    });
    for r in futures::future::join_all(saves).await {
        r.unwrap();
    }
    let stored: RegionMemory = store.region_memory(&region).await.unwrap();
    assert_eq!(stored.asked.len(), 4, "{stored:?}");
}

/// A region claim ending further ahead than any run lasts (forged, or from a clock far ahead)
/// holds nothing: another run claims the region. A run's own claim still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_claim_past_any_runs_length_holds_nothing() {
    use capblock_shared::ports::MarketMemory;
    let aws = Aws::fresh("watch-bound").await;
    let store = aws.store();
    let region = "us-east-1".parse().unwrap();
    assert!(store.claim_region(&region, "forged", now(), now() + Duration::days(3650)).await.unwrap());
    assert!(
        store.claim_region(&region, "scan-b", now(), now() + Duration::minutes(2)).await.unwrap(),
        "a claim past any run's length stops nothing"
    );
    assert!(
        !store.claim_region(&region, "scan-c", now(), now() + Duration::minutes(2)).await.unwrap(),
        "a run's claim holds"
    );
    assert!(
        store
            .claim_region(&region, "scan-c", now() + Duration::minutes(3), now() + Duration::minutes(5))
            .await
            .unwrap()
    );
}

/// Removes a block's index attributes: the open-blocks index (eventually consistent on
/// DynamoDB) has not seen it yet.
async fn unindexed(store: &capblock_shared::aws::dynamo::DynamoStore, reservation_id: &str) {
    use aws_sdk_dynamodb::types::AttributeValue;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key("pk", AttributeValue::S(format!("BLOCK#{reservation_id}")))
        .key("sk", AttributeValue::S("BLOCK".into()))
        .update_expression("REMOVE gsi1pk, gsi1sk")
        .send()
        .await
        .unwrap();
}

/// A rule's held blocks are counted by strongly consistent reads: a block bought or adopted a
/// moment ago counts against `max_blocks_held` before the index shows it (its guard's `held`
/// names it), and a block moved to a final state stops counting and leaves `held`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_held_blocks_are_counted_before_the_index_shows_them() {
    let aws = Aws::fresh("held").await;
    let store = aws.store();
    let r = rule("r1", "1000");
    let it = Intent::new("r1", offering("cb-1", dec!(10)), 8, charges(&r, None), now());
    store.reserve(&it, 0).await.unwrap();
    store.mark_sent(&it.id, "r1", now()).await.unwrap();
    let sent = Intent { state: IntentState::Sent, ..it.clone() };
    let bought = block_for(&sent, "cr-1");
    store.record_bought(&sent, &bought, &[notice("cr-1", "purchased")]).await.unwrap();
    let adopted = Block { reservation_id: "cr-2".into(), intent_id: None, ..bought.clone() };
    assert!(store.adopt_block(&adopted).await.unwrap());
    assert!(!store.adopt_block(&adopted).await.unwrap(), "known already");
    unindexed(&store, "cr-1").await;
    unindexed(&store, "cr-2").await;
    assert!(store.open_blocks(None).await.unwrap().is_empty(), "the index shows neither yet");
    let held: Vec<String> =
        store.open_blocks(Some("r1")).await.unwrap().into_iter().map(|b| b.reservation_id).collect();
    assert_eq!(held, ["cr-1", "cr-2"]);

    let done = Block { state: BlockState::Expired, ..store.get_block("cr-1").await.unwrap().unwrap() };
    store.update_block(&done, done.version).await.unwrap();
    let held: Vec<String> =
        store.open_blocks(Some("r1")).await.unwrap().into_iter().map(|b| b.reservation_id).collect();
    assert_eq!(held, ["cr-2"]);
    let guard = store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S("RULE#r1".into()))
        .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("GUARD".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let names = guard.item.unwrap()["held"].as_ss().unwrap().clone();
    assert_eq!(names, ["cr-2"], "a final block leaves the guard's held");
}
