//! The store and ledger ports' contract: what every implementation promises a workflow, and
//! the ways DynamoDB departs from a map that a caller must survive (a number read back without
//! its trailing zeros, an index that lags its table, a transaction cancelled for a conflict, an
//! answer lost after the write committed, an item over the size limit).
//!
//! Each case takes a fresh, empty store and its faults. To add one: write `async fn
//! the_promise<S: StorePorts, F: StoreFaults>(s: &S, f: &F)` and name it in
//! `store_contract_cases!` below: both runners (the core's `on_memory!` below and `contract!` in
//! `tests/tests/integration/store.rs`) expand that one list, one test per case.

use async_trait::async_trait;
use chrono::Duration;
use rust_decimal::Decimal;

use super::fixtures::{block_for, charges, intent, notice, now, offering, request, rule, usd};
use crate::domain::block::{Block, purchases_held_at};
use crate::domain::budget::{BudgetOwner, Intent, IntentState, Period, ReleasedHold};
use crate::domain::extension::{ExtensionIntent, ExtensionOffer, ExtensionState};
use crate::domain::lifecycle::BlockState;
use crate::domain::money::Money;
use crate::domain::request::{AUTO_APPROVER, Request, RequestDecision, RequestVerdict};
use crate::domain::rule::{Mode, Rule};
use crate::ports::{
    BlockStore, ExtensionLedger, Ledger, MarketMemory, Observation, ObservationStore, Outbox, PageClaims, RateStore,
    RequestStore, ReserveError, RuleStore, SettingsStore, StoreError,
};

port_bundle!(
    /// The store ports every implementation under contract has (any type with them all).
    pub trait StorePorts: RuleStore
        + Ledger
        + BlockStore
        + Outbox
        + ObservationStore
        + SettingsStore
        + MarketMemory
        + PageClaims
        + RequestStore
        + RateStore
        + ExtensionLedger
);

/// The departures from a plain map that DynamoDB makes on its own, played on an
/// implementation under contract when a case asks: the in-memory table by settings of its own,
/// the DynamoDB adapter by what its client sends and hears and by raw writes to its table.
#[async_trait]
pub trait StoreFaults: Send + Sync {
    /// The next write commits and its answer is lost: the caller gets an error although the
    /// table holds the write (on DynamoDB: a timeout or a dropped connection after the write).
    fn lose_next_answer(&self);
    /// The next transaction is cancelled for a conflict with another writer's transaction on
    /// one of its items (DynamoDB's `TransactionConflict`): nothing of it is written.
    fn conflict_next_transaction(&self);
    /// From now on the open-blocks index has not seen the writes that follow (DynamoDB keeps a
    /// global secondary index eventually consistent); `index_lags` before a read shows it so.
    async fn lag_index(&self);
    /// Called before a read while the index lags (an implementation that plays the lag as a
    /// state of its own needs nothing here).
    async fn index_lags(&self);
    /// Stores what budget `owner` committed in `period` as the number `committed` is written
    /// (DynamoDB trims trailing zeros: a fee of 4608.00 is stored as 4608).
    async fn store_committed_as(&self, owner: &BudgetOwner, period: &Period, committed: &str);
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        /// Every case, by name.
        pub const CASES: &[&str] = &[$(stringify!($name)),*];

        /// Runs case `name` on `store` (a fresh, empty one), its departures played by `faults`.
        pub async fn run<S: StorePorts, F: StoreFaults>(name: &str, store: &S, faults: &F) {
            match name {
                $(stringify!($name) => $name(store, faults).await,)*
                _ => panic!("no store contract case {name}"),
            }
        }
    };
}

/// Calls macro `$runner` with the name of every case, in order: the one list of cases, which
/// `run`/`CASES` here, the in-memory runner below and the DynamoDB runner in
/// `tests/tests/integration/store.rs` all expand, so a case cannot be left out of one of them.
#[macro_export]
macro_rules! store_contract_cases {
    ($runner:ident) => {
        $runner!(
            rules_use_optimistic_versions,
            an_item_over_the_size_limit_is_refused_not_a_version_change,
            deleting_a_rule_keeps_its_blocks_intents_and_budgets,
            reserve_is_all_or_nothing,
            a_fee_is_refused_when_it_would_pass_the_limit_from_what_is_committed,
            purchases_per_month_are_capped,
            mark_sent_and_bought_need_the_right_state,
            closing_an_intent_that_was_never_reserved_is_refused,
            a_purchase_sent_since_it_was_read_is_not_given_back,
            a_failed_payment_never_drives_a_budget_below_zero,
            a_fee_never_released_is_not_committed_again,
            a_block_has_one_open_extension_at_a_time,
            a_writer_between_the_read_and_the_reservation_makes_it_refused,
            a_write_whose_answer_was_lost_is_refused_when_retried,
            amounts_read_back_with_cents_however_the_store_trims_them,
            outbox_leases_and_publishes_once,
            observations_are_batched_and_read_back_by_time,
            the_stacks_settings_are_rewritten_only_when_they_change,
            overlapping_saves_of_the_market_memory_lose_nothing,
            a_region_claim_past_any_runs_length_holds_nothing,
            a_rules_held_blocks_are_counted_before_the_index_shows_them,
            a_kept_fee_holds_its_rule_once_until_the_offering_ends,
            a_released_purchase_ec2_holds_is_bought_again_once_past_any_limit,
            the_page_hour_is_claimed_once_and_given_back_only_by_its_hour,
            a_request_is_filed_once_and_cancelled_once_by_its_requester,
            a_requester_lists_her_own_requests_only,
            a_requests_approval_is_consumed_by_one_purchase,
            a_request_cancelled_after_the_scans_read_is_not_reserved,
            an_announced_rate_is_kept_per_family_and_day_and_withdrawn_once,
        );
    };
}

store_contract_cases!(cases);

/// Reserves, sends and records `intent` bought as block `block_id`; returns the sent intent.
async fn buy<S: StorePorts>(s: &S, intent: &Intent, block_id: &str) -> Intent {
    let seq = s.guard(&intent.rule_id).await.unwrap().seq;
    s.reserve(intent, seq).await.unwrap();
    s.mark_sent(&intent.id, &intent.rule_id, now()).await.unwrap();
    let sent = Intent { state: IntentState::Sent, sent_at: Some(now()), ..intent.clone() };
    s.record_bought(&sent, &block_for(&sent, block_id), &[notice(block_id, "purchased")]).await.unwrap();
    sent
}

async fn used<S: StorePorts>(s: &S, owner: BudgetOwner) -> (Decimal, Decimal, u32) {
    s.usage(&owner, &Period::budget_month(now()))
        .await
        .unwrap()
        .map_or((Decimal::ZERO, Decimal::ZERO, 0), |u| (u.committed.amount(), u.spent.amount(), u.purchases))
}

fn rule_owner(id: &str) -> BudgetOwner {
    BudgetOwner::Rule(id.into())
}

fn d(s: &str) -> Decimal {
    s.parse().expect("a decimal")
}

async fn rules_use_optimistic_versions<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    assert_eq!(s.put_rule(&r, Some(0)).await.unwrap(), 1);
    // Creating it again, or updating from a stale version, is a conflict.
    assert!(matches!(s.put_rule(&r, Some(0)).await, Err(StoreError::Conflict(_))));
    assert_eq!(s.put_rule(&r, Some(1)).await.unwrap(), 2);
    assert!(matches!(s.put_rule(&r, Some(1)).await, Err(StoreError::Conflict(_))));
    let got = s.get_rule("r1").await.unwrap().unwrap();
    assert_eq!((got.rule, got.version), (r, 2));
    s.put_rule(&rule("r2", "5"), None).await.unwrap();
    let mut ids: Vec<_> = s.list_rules().await.unwrap().into_iter().map(|s| s.rule.id).collect();
    ids.sort();
    assert_eq!(ids, vec!["r1", "r2"]);
    assert!(s.get_rule("nope").await.unwrap().is_none());
}

/// DynamoDB refuses an item over 400 KB: the refusal is no version conflict (a caller that
/// reads a conflict as "someone else wrote first" would re-read and try again forever).
async fn an_item_over_the_size_limit_is_refused_not_a_version_change<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    s.put_rule(&r, Some(0)).await.unwrap();
    let conflict = s.put_rule(&r, Some(0)).await.unwrap_err();
    assert!(conflict.to_string().ends_with("rule r1 (version changed)"), "{conflict}");
    let huge = Rule { description: "x".repeat(500 * 1024), ..r.clone() };
    let refused = s.put_rule(&huge, Some(1)).await.unwrap_err();
    assert!(!matches!(refused, StoreError::Conflict(_)), "{refused}");
    assert!(!refused.to_string().contains("version changed"), "{refused}");
    assert_eq!(s.get_rule("r1").await.unwrap().unwrap().version, 1);
}

async fn deleting_a_rule_keeps_its_blocks_intents_and_budgets<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    s.put_rule(&r, None).await.unwrap();
    buy(s, &intent(&r, "cb-1", "10", None), "cr-1").await;
    let open = intent(&r, "cb-2", "20", None);
    s.reserve(&open, s.guard("r1").await.unwrap().seq).await.unwrap();

    assert!(s.delete_rule("r1").await.unwrap());
    assert!(s.get_rule("r1").await.unwrap().is_none());
    assert!(s.list_rules().await.unwrap().is_empty());
    assert!(!s.delete_rule("r1").await.unwrap(), "gone already");
    // Everything but the rule stays.
    assert_eq!(s.open_blocks(Some("r1")).await.unwrap().len(), 1);
    assert_eq!(s.open_intents().await.unwrap().iter().map(|i| &i.id).collect::<Vec<_>>(), [&open.id]);
    let (committed, _, purchases) = used(s, rule_owner("r1")).await;
    assert_eq!((committed, purchases), (d("30"), 2));
    assert_eq!(s.guard("r1").await.unwrap().open_intent.as_deref(), Some(open.id.as_str()));
    // Put again, it is a new rule (version 1) that finds its month as it was.
    assert_eq!(s.put_rule(&r, Some(0)).await.unwrap(), 1);
}

async fn reserve_is_all_or_nothing<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    // The account budget (700) cannot take a 800 fee although the rule's (1000) could:
    // the whole transaction fails, so neither the intent, the guard nor the rule budget moved.
    let big = intent(&r, "cb-big", "800", Some("700"));
    assert_eq!(s.reserve(&big, 0).await, Err(ReserveError::OverBudget("ACCOUNT".into())));
    let mut acct = charges(&r, Some("1000"));
    acct[1].limit = Some(usd("900"));
    let first = Intent::new("r1", offering("cb-a", "600"), 8, acct.clone(), now());
    s.reserve(&first, 0).await.unwrap();
    let second = Intent::new("r1", offering("cb-b", "350"), 8, acct.clone(), now());
    assert_eq!(s.reserve(&second, 1).await, Err(ReserveError::RuleBusy), "the guard is first's");
    assert!(s.get_intent("r1", &second.id).await.unwrap().is_none(), "no half-written intent");
    let (committed, _, purchases) = used(s, rule_owner("r1")).await;
    assert_eq!((committed, purchases), (d("600"), 1));
    // Same rule + offering again: the intent key already exists.
    assert_eq!(s.reserve(&first, 1).await, Err(ReserveError::AlreadyExists));
    // Rejecting releases budget and guard.
    s.record_rejected(&first, "refused", Some(&notice("r1/cb-a", "rejected"))).await.unwrap();
    let (committed, _, purchases) = used(s, BudgetOwner::Account).await;
    assert_eq!((committed, purchases), (Decimal::ZERO, 0));
    assert_eq!(s.guard("r1").await.unwrap().open_intent, None);
    // A stale sequence number (the decision was made before `first`) is refused.
    assert_eq!(s.reserve(&second, 0).await, Err(ReserveError::RuleBusy));
    let seq = s.guard("r1").await.unwrap().seq;
    s.reserve(&second, seq).await.unwrap();
    let open: Vec<String> = s.open_intents().await.unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(open, vec![second.id.clone()]);
}

/// The one budget condition, asked of the ledger directly: with `committed` such that
/// `limit - fee < committed <= limit`, the fee does not fit (a condition that forgets the fee,
/// `committed <= limit`, admits it); at `committed + fee == limit` it does.
async fn a_fee_is_refused_when_it_would_pass_the_limit_from_what_is_committed<S: StorePorts, F: StoreFaults>(
    s: &S,
    _: &F,
) {
    let (a, b, c) = (rule("a", "1000"), rule("b", "1000"), rule("c", "1000"));
    // The account: 701 of 1000 committed by rule a's purchase.
    buy(s, &intent(&a, "cb-a", "701", Some("1000")), "cr-a").await;
    assert_eq!(
        s.reserve(&intent(&b, "cb-b", "300", Some("1000")), 0).await,
        Err(ReserveError::OverBudget("ACCOUNT".into())),
        "701 + 300 > 1000"
    );
    assert_eq!(used(s, rule_owner("b")).await, (Decimal::ZERO, Decimal::ZERO, 0), "nothing of it written");
    s.reserve(&intent(&c, "cb-c", "299", Some("1000")), 0).await.unwrap();
    assert_eq!(used(s, BudgetOwner::Account).await.0, d("1000"), "to the limit exactly");
    // The same of a rule's own budget: 701 of its 1000 spent.
    let mut second = intent(&a, "cb-a2", "300", None);
    second.charges.truncate(1);
    let seq = s.guard("a").await.unwrap().seq;
    assert_eq!(s.reserve(&second, seq).await, Err(ReserveError::OverBudget("RULE#a".into())));
    assert_eq!(used(s, rule_owner("a")).await, (d("701"), d("701"), 1));
}

async fn purchases_per_month_are_capped<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "100000");
    for (i, id) in ["cb-1", "cb-2"].iter().enumerate() {
        buy(s, &intent(&r, id, "10", None), &format!("cr-{i}")).await;
    }
    let third = intent(&r, "cb-3", "10", None);
    assert_eq!(s.reserve(&third, 2).await, Err(ReserveError::PurchaseLimit));
    assert_eq!(used(s, rule_owner("r1")).await, (d("20"), d("20"), 2));
    // No account budget: the account's usage is counted all the same, for a cap set later.
    assert_eq!(used(s, BudgetOwner::Account).await, (d("20"), d("20"), 2));
    assert_eq!(s.open_blocks(Some("r1")).await.unwrap().len(), 2);
    assert!(s.open_blocks(Some("r2")).await.unwrap().is_empty());
    assert_eq!(s.pending().await.unwrap().len(), 2, "both purchase notices are in the outbox");
}

async fn mark_sent_and_bought_need_the_right_state<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    let it = intent(&r, "cb-1", "10", None);
    s.reserve(&it, 0).await.unwrap();
    s.mark_sent(&it.id, "r1", now()).await.unwrap();
    // A second run cannot send it again.
    assert!(matches!(s.mark_sent(&it.id, "r1", now()).await, Err(StoreError::Conflict(_))));
    let sent = Intent { state: IntentState::Sent, ..it.clone() };
    s.record_bought(&sent, &block_for(&sent, "cr-1"), &[notice("cr-1", "purchased")]).await.unwrap();
    // Recording the same purchase twice fails as a whole (block exists, intent closed).
    assert!(matches!(
        s.record_bought(&sent, &block_for(&sent, "cr-1"), &[notice("cr-1", "purchased")]).await,
        Err(StoreError::Conflict(_))
    ));
    let got = s.get_intent("r1", &it.id).await.unwrap().unwrap();
    assert_eq!((got.state, got.reservation_id.as_deref()), (IntentState::Bought, Some("cr-1")));
    assert!(s.open_intents().await.unwrap().is_empty());
    assert_eq!(s.get_block("cr-1").await.unwrap().unwrap().fee.unwrap().amount(), d("10"));
    assert_eq!(used(s, rule_owner("r1")).await, (d("10"), d("10"), 1), "spent once");
}

/// A failed payment's fee kept for a part EC2 may hold (`Ledger::add_hold`): the hold is on the
/// rule's guard once however often it is written, the purchase counts once against
/// `max_blocks_held` (beside its own block) until the offering's end, and the intent and the
/// budgets stay as they were.
async fn a_kept_fee_holds_its_rule_once_until_the_offering_ends<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    let it = intent(&r, "cb-1", "100", None);
    buy(s, &it, "cr-1").await;
    let hold = ReleasedHold::kept(&it);
    s.add_hold("r1", &hold).await.unwrap();
    s.add_hold("r1", &hold).await.unwrap();
    let guard = s.guard("r1").await.unwrap();
    assert_eq!(guard.released, vec![hold.clone()], "kept once");
    assert_eq!(guard.open_intent, None);
    let mut failed = s.get_block("cr-1").await.unwrap().unwrap();
    failed.state = BlockState::PaymentFailed;
    let held = |blocks: &[Block], at| purchases_held_at(blocks, &guard.released, at);
    assert_eq!(held(&[failed.clone()], now()), 1, "no held block, the hold counts");
    assert_eq!(held(&[failed], it.offering.end), 0, "past the offering's end");
    assert_eq!(s.get_intent("r1", &it.id).await.unwrap().unwrap().state, IntentState::Bought);
    assert_eq!(used(s, rule_owner("r1")).await, (d("100"), d("100"), 1), "the fee stays committed");
    // The guard still takes the next reservation (the hold moves no sequence).
    s.reserve(&intent(&r, "cb-2", "100", None), guard.seq).await.unwrap();
}

/// EC2 holds a reservation of an intent a person released (`record_held_after_close`): the
/// intent is recorded bought with it, the block stored, and the fee committed again in every
/// budget it charged, past the limit if need be (EC2 took the money), once however often it is
/// asked; an intent that is not closed unbought is left alone.
async fn a_released_purchase_ec2_holds_is_bought_again_once_past_any_limit<S: StorePorts, F: StoreFaults>(
    s: &S,
    _: &F,
) {
    let r = rule("r1", "1000");
    let it = intent(&r, "cb-1", "100", None);
    s.reserve(&it, 0).await.unwrap();
    s.mark_sent(&it.id, "r1", now()).await.unwrap();
    let sent = Intent { state: IntentState::Sent, sent_at: Some(now()), ..it.clone() };
    s.release_by_person(&sent, "by hand").await.unwrap();
    buy(s, &intent(&r, "cb-2", "950", None), "cr-2").await;
    let before = used(s, rule_owner("r1")).await;
    assert_eq!(before.0, d("950"), "the released fee is out of the books");
    let released = s.get_intent("r1", &it.id).await.unwrap().unwrap();
    assert_eq!(released.state, IntentState::Rejected);
    let block = block_for(&released, "cr-1");
    assert!(s.record_held_after_close(&released, &block).await.unwrap());
    assert!(!s.record_held_after_close(&released, &block).await.unwrap(), "once");
    let after = used(s, rule_owner("r1")).await;
    assert_eq!((after.0, after.1, after.2), (d("1050"), before.1 + d("100"), before.2 + 1), "past the limit");
    let got = s.get_intent("r1", &it.id).await.unwrap().unwrap();
    assert_eq!((got.state, got.reservation_id.as_deref()), (IntentState::Bought, Some("cr-1")));
    assert_eq!(got.parts, vec!["cr-1".to_string()]);
    assert!(s.get_block("cr-1").await.unwrap().is_some(), "the block is tracked");
    // A bought intent is not closed unbought: nothing moves.
    let bought = s.get_intent("r1", &intent(&r, "cb-2", "950", None).id).await.unwrap().unwrap();
    assert!(!s.record_held_after_close(&bought, &block_for(&bought, "cr-9")).await.unwrap());
    assert_eq!(used(s, rule_owner("r1")).await, after);
}

/// A fee goes back only from an intent that holds it: closing or releasing one that was never
/// reserved (or is gone) is refused and moves no budget.
async fn closing_an_intent_that_was_never_reserved_is_refused<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    buy(s, &intent(&r, "cb-1", "100", None), "cr-1").await;
    let ghost = intent(&r, "cb-ghost", "100", None);
    assert!(matches!(s.record_given_back(&ghost, "no such").await, Err(StoreError::Conflict(_))));
    assert!(matches!(s.record_rejected(&ghost, "no such", None).await, Err(StoreError::Conflict(_))));
    let sent_ghost = Intent { state: IntentState::Sent, sent_at: Some(now()), ..ghost.clone() };
    assert!(matches!(s.release_by_person(&sent_ghost, "by hand").await, Err(StoreError::Conflict(_))));
    let bought_ghost = Intent { state: IntentState::Bought, ..ghost.clone() };
    let block = s.get_block("cr-1").await.unwrap().unwrap();
    assert!(matches!(s.release_failed_block(&block, &bought_ghost, true, now()).await, Err(StoreError::Conflict(_))));
    assert!(s.get_intent("r1", &ghost.id).await.unwrap().is_none(), "nothing written for it");
    assert_eq!(used(s, rule_owner("r1")).await, (d("100"), d("100"), 1), "the real purchase's fee stays");
}

/// A reserved purchase another run has since sent to EC2 is not given back on the reserved
/// copy's word: the give-back is refused as a whole, the intent stays sent and its fee
/// committed (PurchaseCapacityBlock may have bought).
async fn a_purchase_sent_since_it_was_read_is_not_given_back<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    let reserved = intent(&r, "cb-1", "100", None);
    s.reserve(&reserved, 0).await.unwrap();
    s.mark_sent(&reserved.id, "r1", now()).await.unwrap();
    assert!(matches!(s.record_given_back(&reserved, "not sent").await, Err(StoreError::Conflict(_))));
    assert_eq!(s.get_intent("r1", &reserved.id).await.unwrap().unwrap().state, IntentState::Sent);
    assert_eq!(used(s, rule_owner("r1")).await, (d("100"), d("0"), 1), "committed, not spent");
}

/// A failed payment's fee goes back only from budgets that hold it both committed and spent:
/// one whose committed amount is below the fee (however it got there) refuses the release as
/// a whole, so no budget goes below zero.
async fn a_failed_payment_never_drives_a_budget_below_zero<S: StorePorts, F: StoreFaults>(s: &S, f: &F) {
    let r = rule("r1", "1000");
    buy(s, &intent(&r, "cb-1", "100", None), "cr-1").await;
    f.store_committed_as(&rule_owner("r1"), &Period::budget_month(now()), "50").await;
    let bought = s.open_blocks(Some("r1")).await.unwrap().pop().expect("its block");
    let intent = s.get_intent("r1", bought.intent_id.as_deref().expect("bought")).await.unwrap().unwrap();
    let released = s.release_failed_block(&bought, &intent, true, now()).await;
    assert!(matches!(released, Err(StoreError::Conflict(_))), "{released:?}");
    assert_eq!(used(s, rule_owner("r1")).await, (d("50"), d("100"), 1), "nothing released");
}

/// Committing a failed payment's fee again (EC2 holds the block after all) is for a fee that
/// was released: one still committed is left as it is, never counted twice.
async fn a_fee_never_released_is_not_committed_again<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    buy(s, &intent(&r, "cb-1", "100", None), "cr-1").await;
    let bought = s.get_block("cr-1").await.unwrap().expect("its block");
    let intent = s.get_intent("r1", bought.intent_id.as_deref().expect("bought")).await.unwrap().unwrap();
    assert!(!s.recommit_released_fee(&bought, &intent, true).await.unwrap(), "nothing to commit again");
    assert_eq!(used(s, rule_owner("r1")).await, (d("100"), d("100"), 1), "counted once");
}

/// An extension is reserved only on a block with none open: a second offer for the same block
/// is refused as busy (decided again next run), and only the first one's fee is committed.
async fn a_block_has_one_open_extension_at_a_time<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = rule("r1", "1000");
    buy(s, &intent(&r, "cb-1", "100", None), "cr-1").await;
    let block = s.get_block("cr-1").await.unwrap().expect("its block");
    let extension = |offer: &str| ExtensionIntent {
        reservation_id: block.reservation_id.clone(),
        rule_id: "r1".into(),
        offer: ExtensionOffer {
            id: offer.into(),
            reservation_id: block.reservation_id.clone(),
            duration_hours: 24,
            start: block.end,
            end: block.end + chrono::Duration::days(1),
            fee: Money::parse("10", "USD").expect("a fee"),
        },
        state: ExtensionState::Reserved,
        created_at: now(),
        sent_at: None,
        reason: None,
        charges: intent(&r, "cb-1", "10", None).charges,
    };
    s.reserve_extension(&extension("cbx-1")).await.unwrap();
    let second = s.reserve_extension(&extension("cbx-2")).await;
    assert!(matches!(second, Err(ReserveError::RuleBusy)), "{second:?}");
    assert_eq!(used(s, rule_owner("r1")).await.0, d("110"), "the first extension's fee alone");
    assert_eq!(s.open_extensions().await.unwrap().len(), 1);
    // Paid, it is spent and frees the block for the next one.
    let first = extension("cbx-1");
    s.advance_extension(&first, ExtensionState::Sent, now()).await.unwrap();
    let sent = ExtensionIntent { state: ExtensionState::Sent, sent_at: Some(now()), ..first };
    s.close_extension(&sent, ExtensionState::Paid, None).await.unwrap();
    assert_eq!(used(s, rule_owner("r1")).await, (d("110"), d("110"), 1), "spent once");
    s.reserve_extension(&extension("cbx-2")).await.unwrap();
}

/// Another writer between the decision's read and the reservation: a guard that moved since
/// the read, or a transaction cancelled for a conflict on one of its items, refuses the
/// reservation as the rule being busy (decided again on the next run) and writes nothing.
async fn a_writer_between_the_read_and_the_reservation_makes_it_refused<S: StorePorts, F: StoreFaults>(s: &S, f: &F) {
    let r = rule("r1", "1000");
    let seen = s.guard("r1").await.unwrap().seq;
    let other = intent(&r, "cb-other", "100", None);
    s.reserve(&other, seen).await.unwrap();
    s.record_given_back(&other, "changed").await.unwrap();
    let mine = intent(&r, "cb-mine", "100", None);
    assert_eq!(s.reserve(&mine, seen).await, Err(ReserveError::RuleBusy), "the guard moved since the read");
    let seq = s.guard("r1").await.unwrap().seq;
    f.conflict_next_transaction();
    assert_eq!(s.reserve(&mine, seq).await, Err(ReserveError::RuleBusy), "cancelled for a conflict");
    assert!(s.get_intent("r1", &mine.id).await.unwrap().is_none());
    assert_eq!(used(s, rule_owner("r1")).await, (Decimal::ZERO, Decimal::ZERO, 0));
    assert_eq!(s.guard("r1").await.unwrap().seq, seq, "the guard did not move");
    s.reserve(&mine, seq).await.unwrap();
}

/// A write that committed and whose answer was lost: the caller saw an error, and a retry of
/// the same write is refused with the error of a write already made (never applied twice).
async fn a_write_whose_answer_was_lost_is_refused_when_retried<S: StorePorts, F: StoreFaults>(s: &S, f: &F) {
    let r = rule("r1", "1000");
    let it = intent(&r, "cb-1", "100", None);
    f.lose_next_answer();
    assert!(matches!(s.reserve(&it, 0).await, Err(ReserveError::Store(StoreError::Unavailable(_)))));
    assert_eq!(s.reserve(&it, 0).await, Err(ReserveError::AlreadyExists), "the retry");
    assert_eq!(used(s, rule_owner("r1")).await, (d("100"), Decimal::ZERO, 1), "charged once");
    f.lose_next_answer();
    assert!(matches!(s.mark_sent(&it.id, "r1", now()).await, Err(StoreError::Unavailable(_))));
    assert!(matches!(s.mark_sent(&it.id, "r1", now()).await, Err(StoreError::Conflict(_))), "sent once");
    let sent = Intent { state: IntentState::Sent, sent_at: Some(now()), ..it.clone() };
    f.lose_next_answer();
    let block = block_for(&sent, "cr-1");
    assert!(matches!(s.record_bought(&sent, &block, &[]).await, Err(StoreError::Unavailable(_))));
    assert!(matches!(s.record_bought(&sent, &block, &[]).await, Err(StoreError::Conflict(_))), "recorded once");
    assert_eq!(used(s, rule_owner("r1")).await, (d("100"), d("100"), 1), "spent once");
    assert_eq!(s.get_intent("r1", &it.id).await.unwrap().unwrap().state, IntentState::Bought);
}

/// DynamoDB trims a number's trailing zeros (a budget that committed 4608.00 reads back 4608):
/// an amount read back keeps its cents, in what is shown and what is exported.
async fn amounts_read_back_with_cents_however_the_store_trims_them<S: StorePorts, F: StoreFaults>(s: &S, f: &F) {
    let r = rule("r1", "10000");
    s.reserve(&intent(&r, "cb-1", "4608.00", None), 0).await.unwrap();
    let period = Period::budget_month(now());
    f.store_committed_as(&rule_owner("r1"), &period, "4608").await;
    let usage = s.usage(&rule_owner("r1"), &period).await.unwrap().unwrap();
    assert_eq!(usage.committed, usd("4608.00"));
    let json = serde_json::to_value(usage.committed).unwrap();
    assert_eq!(json["amount"], "4608.00", "{json}");
    assert_eq!(serde_json::to_value(usage.spent).unwrap()["amount"], "0.00");
    assert_eq!(usage.committed.to_string(), "4608.00 USD");
}

async fn outbox_leases_and_publishes_once<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let n = notice("cr-9", "scheduled");
    assert!(s.enqueue(&n).await.unwrap());
    assert!(!s.enqueue(&n).await.unwrap(), "the same milestone twice is dropped");
    assert!(s.lease(&n, now(), now() + Duration::seconds(60)).await.unwrap());
    assert!(!s.lease(&n, now(), now() + Duration::seconds(60)).await.unwrap(), "held by the first");
    // After the lease runs out another run may take it (the crash window).
    assert!(s.lease(&n, now() + Duration::seconds(61), now() + Duration::seconds(120)).await.unwrap());
    s.mark_published(&n, now()).await.unwrap();
    assert!(s.pending().await.unwrap().is_empty());
    assert!(!s.lease(&n, now() + Duration::days(1), now() + Duration::days(2)).await.unwrap());
}

async fn observations_are_batched_and_read_back_by_time<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let obs: Vec<Observation> = (0..60)
        .map(|i| Observation {
            offering: offering(&format!("cb-{i:03}"), &(100 + i).to_string()),
            accelerators_per_instance: 8,
            seen_at: now() + Duration::minutes(i),
        })
        .collect();
    assert_eq!(s.record(&obs).await.unwrap(), 60);
    let region = "us-east-1".parse().unwrap();
    let t = "p5.48xlarge".parse().unwrap();
    let window = s.history(&region, &t, now() + Duration::minutes(10), now() + Duration::minutes(19)).await.unwrap();
    assert_eq!(window.len(), 10);
    assert_eq!(window[0].offering.fee.amount(), d("110"));
}

/// The stack's settings: one item, written when what it says differs (the time it was written
/// aside), read back whole.
async fn the_stacks_settings_are_rewritten_only_when_they_change<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    use crate::domain::stack::{StackSettings, StoredSettings};
    assert_eq!(s.stored_settings().await.unwrap(), None);
    let live = StoredSettings {
        stack: StackSettings {
            name: "prod".into(),
            mode: Mode::Live,
            account_budget: Some(usd("1000")),
            team_budgets: Default::default(),
        },
        alerts_topic: "arn:aws:sns:us-east-1:123456789012:alerts".into(),
        written_at: now(),
    };
    assert!(s.store_settings(&live).await.unwrap());
    let later = StoredSettings { written_at: now() + Duration::hours(1), ..live.clone() };
    assert!(!s.store_settings(&later).await.unwrap(), "the same settings: nothing written");
    assert_eq!(s.stored_settings().await.unwrap(), Some(live.clone()));
    let uncapped = StoredSettings { stack: StackSettings { account_budget: None, ..live.stack.clone() }, ..later };
    assert!(s.store_settings(&uncapped).await.unwrap());
    assert_eq!(s.stored_settings().await.unwrap(), Some(uncapped));
}

/// An announced rate: one per family and day (announcing it again replaces it), read back whole
/// with its source, withdrawn once.
async fn an_announced_rate_is_kept_per_family_and_day_and_withdrawn_once<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    use crate::domain::list_price::ListRate;
    let day = |m: u32| chrono::NaiveDate::from_ymd_opt(2027, m, 1).unwrap();
    let rate = |family: &str, usd: &str, m: u32| {
        ListRate::announcement(family, usd.parse().unwrap(), day(m), "AWS email of 2026-12-01").unwrap()
    };
    assert!(s.announced_rates().await.unwrap().is_empty());
    s.announce_rate(&rate("p5", "6.50", 1)).await.unwrap();
    s.announce_rate(&rate("p5", "6.90", 1)).await.unwrap();
    s.announce_rate(&rate("p5", "7.00", 3)).await.unwrap();
    s.announce_rate(&rate("p5e", "9.10", 1)).await.unwrap();
    let mut read = s.announced_rates().await.unwrap();
    read.sort_by(|a, b| (&a.family, a.effective).cmp(&(&b.family, b.effective)));
    assert_eq!(read, [rate("p5", "6.90", 1), rate("p5", "7.00", 3), rate("p5e", "9.10", 1)], "6.90 replaced 6.50");
    assert_eq!(read[0].usd.to_string(), "6.90", "cents kept however the store writes the number");
    assert!(s.withdraw_rate("p5", day(1)).await.unwrap());
    assert!(!s.withdraw_rate("p5", day(1)).await.unwrap(), "withdrawn once");
    assert!(!s.withdraw_rate("p4d", day(1)).await.unwrap(), "never announced");
    assert_eq!(s.announced_rates().await.unwrap().len(), 2);
}

/// Two scans that read the same market memory and save at once: both answers are kept (the
/// second save merges into the first), never the last alone.
async fn overlapping_saves_of_the_market_memory_lose_nothing<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    use crate::domain::plan::Asked;
    let region = "us-east-1".parse().unwrap();
    let read = s.region_memory(&region).await.unwrap();
    let answered = |key: &str| {
        let mut m = read.clone();
        m.asked.insert(key.into(), Asked { at: now(), cheapest: None, recorded: None });
        m
    };
    let mine: Vec<_> = (1..=4).map(|i| answered(&format!("q{i}"))).collect();
    let saves = mine.iter().map(|m| s.save_region_memory(&region, &read, m));
    for r in futures::future::join_all(saves).await {
        r.unwrap();
    }
    let stored = s.region_memory(&region).await.unwrap();
    assert_eq!(stored.asked.len(), 4, "{stored:?}");
}

/// A region claim ending further ahead than any run lasts (forged, or from a clock far ahead)
/// holds nothing: another run claims the region. A run's own claim still holds.
async fn a_region_claim_past_any_runs_length_holds_nothing<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let region = "us-east-1".parse().unwrap();
    assert!(s.claim_region(&region, "forged", now(), now() + Duration::days(3650)).await.unwrap());
    let b = s.claim_region(&region, "scan-b", now(), now() + Duration::minutes(2)).await.unwrap();
    assert!(b, "a claim past any run's length stops nothing");
    let c = s.claim_region(&region, "scan-c", now(), now() + Duration::minutes(2)).await.unwrap();
    assert!(!c, "a run's claim holds");
    let later = now() + Duration::minutes(3);
    assert!(s.claim_region(&region, "scan-c", later, later + Duration::minutes(2)).await.unwrap());
}

/// A rule's held blocks are counted by strongly consistent reads: a block bought or adopted a
/// moment ago counts against `max_blocks_held` before the open-blocks index shows it, and a
/// block moved to a final state stops counting. The index alone (all rules) may lag.
async fn a_rules_held_blocks_are_counted_before_the_index_shows_them<S: StorePorts, F: StoreFaults>(s: &S, f: &F) {
    let r = rule("r1", "1000");
    f.lag_index().await;
    let sent = buy(s, &intent(&r, "cb-1", "10", None), "cr-1").await;
    let adopted = Block { reservation_id: "cr-2".into(), intent_id: None, ..block_for(&sent, "cr-1") };
    assert!(s.adopt_block(&adopted).await.unwrap());
    assert!(!s.adopt_block(&adopted).await.unwrap(), "known already");
    f.index_lags().await;
    assert!(s.open_blocks(None).await.unwrap().is_empty(), "the index shows neither yet");
    let held: Vec<String> = s.open_blocks(Some("r1")).await.unwrap().into_iter().map(|b| b.reservation_id).collect();
    assert_eq!(held, ["cr-1", "cr-2"]);
    let done = Block { state: BlockState::Expired, ..s.get_block("cr-1").await.unwrap().unwrap() };
    s.update_block(&done, done.version).await.unwrap();
    f.index_lags().await;
    let held: Vec<String> = s.open_blocks(Some("r1")).await.unwrap().into_iter().map(|b| b.reservation_id).collect();
    assert_eq!(held, ["cr-2"], "a final block stops counting");
}

/// The in-memory table under contract: its faults and its lagging index are settings of its
/// own (`MemoryTable::lose_next_answer`, `lag_index`, ...).
#[async_trait]
impl StoreFaults for crate::memory::MemoryTable {
    fn lose_next_answer(&self) {
        crate::memory::MemoryTable::lose_next_answer(self);
    }
    fn conflict_next_transaction(&self) {
        crate::memory::MemoryTable::conflict_next_transaction(self);
    }
    async fn lag_index(&self) {
        crate::memory::MemoryTable::lag_index(self);
    }
    async fn index_lags(&self) {}
    async fn store_committed_as(&self, owner: &BudgetOwner, period: &Period, committed: &str) {
        let amount = Decimal::from_str_exact(committed).expect("a number");
        crate::memory::MemoryTable::store_committed_as(self, owner, period, amount);
    }
}

async fn the_page_hour_is_claimed_once_and_given_back_only_by_its_hour<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let hour = now() + Duration::hours(3);
    // Four trackers of the same hour at once: one publishes.
    let claims = futures::future::join_all((0..4).map(|_| s.claim_page_hour(hour))).await;
    let won: Vec<bool> = claims.into_iter().map(Result::unwrap).collect();
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    assert!(!s.claim_page_hour(hour - Duration::hours(1)).await.unwrap(), "an earlier hour after a later one");
    // Another hour's release leaves the claim; its own gives it back.
    s.release_page_hour(hour - Duration::hours(1)).await.unwrap();
    assert!(!s.claim_page_hour(hour).await.unwrap());
    s.release_page_hour(hour).await.unwrap();
    assert!(s.claim_page_hour(hour).await.unwrap(), "claimed again after its release");
    assert!(s.claim_page_hour(hour + Duration::hours(1)).await.unwrap(), "the next hour");
}

// People's requests: the request store, and a reservation consuming a request's approval.

/// A request's one-shot rule's charges: its own budget, its team's (research, 10,000) and the
/// account's, as the scan charges them.
fn team_charges(rule: &Rule) -> Vec<crate::domain::budget::BudgetCharge> {
    let budgets =
        crate::domain::budget::StackBudgets { account: None, teams: [("research".to_string(), usd("10000"))].into() };
    crate::domain::budget::charges_for(rule, &budgets, &Period::budget_month(now())).expect("research has a budget")
}

fn decision(r: &Request, verdict: RequestVerdict) -> RequestDecision {
    RequestDecision {
        request_id: r.id.clone(),
        requester: r.requester.clone(),
        terms: r.terms.clone(),
        by: AUTO_APPROVER.into(),
        at: now(),
        verdict,
        consumed_by: None,
    }
}

/// A request is filed once under its requester's key, read back with that key, and cancelled
/// once by that requester only.
async fn a_request_is_filed_once_and_cancelled_once_by_its_requester<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = request("rq-filed1", "AROAADA:ada");
    s.file_request(&r).await.unwrap();
    assert!(matches!(s.file_request(&r).await, Err(StoreError::Conflict(_))), "an id is filed once");
    let listed = s.requests().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].keyed_requester.as_str(), listed[0].keyed_id.as_str()), ("AROAADA:ada", "rq-filed1"));
    assert_eq!(listed[0].request, r);
    let other = s.cancel_request("AROABOB:bob", "rq-filed1", now()).await;
    assert!(matches!(other, Err(StoreError::NotFound { .. })), "only under the requester's key: {other:?}");
    s.cancel_request("AROAADA:ada", "rq-filed1", now()).await.unwrap();
    assert!(matches!(s.cancel_request("AROAADA:ada", "rq-filed1", now()).await, Err(StoreError::Conflict(_))));
    assert_eq!(s.requests().await.unwrap()[0].request.cancelled_at, Some(now()));
}

/// A requester's own listing holds her requests, each with its key and cancel, and no other's
/// (another id that starts with hers is another key).
async fn a_requester_lists_her_own_requests_only<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let ada = [request("rq-ada1", "AROAADA:ada"), request("rq-ada2", "AROAADA:ada")];
    for r in ada.iter().chain([&request("rq-bob1", "AROABOB:bob"), &request("rq-adax1", "AROAADA:adax")]) {
        s.file_request(r).await.unwrap();
    }
    s.cancel_request("AROAADA:ada", "rq-ada2", now()).await.unwrap();
    let mut own = s.requests_of("AROAADA:ada").await.unwrap();
    own.sort_by(|a, b| a.keyed_id.cmp(&b.keyed_id));
    let keys: Vec<(&str, &str)> = own.iter().map(|r| (r.keyed_requester.as_str(), r.keyed_id.as_str())).collect();
    assert_eq!(keys, [("AROAADA:ada", "rq-ada1"), ("AROAADA:ada", "rq-ada2")]);
    assert_eq!(own[0].request, ada[0]);
    assert_eq!(own[1].request.cancelled_at, Some(now()), "her cancel is read with it");
    assert!(s.requests_of("AROAEVE:eve").await.unwrap().is_empty());
    assert_eq!(s.requests().await.unwrap().len(), 4);
}

/// A decision is written once; its approval is consumed by one reservation, in its
/// transaction, and given back with a purchase that never reached EC2; a rejection buys nothing.
async fn a_requests_approval_is_consumed_by_one_purchase<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = request("rq-approved1", "AROAADA:ada");
    s.file_request(&r).await.unwrap();
    let rule = r.as_rule();
    s.decide_request(&decision(&r, RequestVerdict::Approved)).await.unwrap();
    let again = s.decide_request(&decision(&r, RequestVerdict::Rejected { reason: "late".into() })).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "decided once: {again:?}");
    let on = |o: &str| Intent {
        request: Some(r.key()),
        ..Intent::new(&rule.id, offering(o, "100"), 8, team_charges(&rule), now())
    };
    let first = on("cb-req-1");
    s.reserve(&first, 0).await.unwrap();
    assert_eq!(s.decision(&r.id).await.unwrap().unwrap().consumed_by, Some(first.id.clone()));
    s.record_given_back(&first, "never sent").await.unwrap();
    assert_eq!(s.decision(&r.id).await.unwrap().unwrap().consumed_by, None, "given back with the fee");
    // EC2 refused a purchase (another buyer took the offering): nothing bought on the approval.
    let seq = s.guard(&rule.id).await.unwrap().seq;
    let taken = on("cb-req-taken");
    s.reserve(&taken, seq).await.unwrap();
    s.mark_sent(&taken.id, &rule.id, now()).await.unwrap();
    let sent_taken = Intent { state: IntentState::Sent, sent_at: Some(now()), ..taken.clone() };
    s.record_rejected(&sent_taken, "InsufficientInstanceCapacity", None).await.unwrap();
    assert_eq!(s.decision(&r.id).await.unwrap().unwrap().consumed_by, None, "given back with the fee, EC2 said no");
    let seq = s.guard(&rule.id).await.unwrap().seq;
    let second = on("cb-req-2");
    s.reserve(&second, seq).await.unwrap();
    let sent = Intent { state: IntentState::Sent, sent_at: Some(now()), ..second.clone() };
    s.mark_sent(&second.id, &rule.id, now()).await.unwrap();
    s.record_bought(&sent, &block_for(&sent, "cr-req-2"), &[]).await.unwrap();
    // A replay of the purchase on another offering (a second run, a replayed request item) is
    // refused by the consumed approval, whatever the guard says.
    let seq = s.guard(&rule.id).await.unwrap().seq;
    assert_eq!(s.reserve(&on("cb-req-3"), seq).await, Err(ReserveError::ApprovalUsed));
    assert_eq!(s.decision(&r.id).await.unwrap().unwrap().consumed_by, Some(second.id.clone()));
    // A rejected request, or one never decided, buys nothing.
    let no = request("rq-rejected1", "AROAADA:ada");
    s.file_request(&no).await.unwrap();
    s.decide_request(&decision(&no, RequestVerdict::Rejected { reason: "no".into() })).await.unwrap();
    let no_rule = no.as_rule();
    let refused = Intent {
        request: Some(no.key()),
        ..Intent::new(&no_rule.id, offering("cb-req-4", "100"), 8, team_charges(&no_rule), now())
    };
    assert_eq!(s.reserve(&refused, 0).await, Err(ReserveError::ApprovalUsed));
    let never = request("rq-never", "AROAADA:ada");
    s.file_request(&never).await.unwrap();
    let undecided = Intent { request: Some(never.key()), ..refused.clone() };
    assert_eq!(s.reserve(&undecided, 0).await, Err(ReserveError::ApprovalUsed));
    assert!(s.get_intent(&no_rule.id, &refused.id).await.unwrap().is_none(), "nothing written");
}

/// A requester's cancel that lands after the scan read the approved request and before its
/// reservation stops the purchase: the reservation checks the request item itself, in its
/// transaction, and writes nothing. A request that is not under the key the intent names (never
/// filed, or another identity's) is not bought on either.
async fn a_request_cancelled_after_the_scans_read_is_not_reserved<S: StorePorts, F: StoreFaults>(s: &S, _: &F) {
    let r = request("rq-cancelled1", "AROAADA:ada");
    s.file_request(&r).await.unwrap();
    s.decide_request(&decision(&r, RequestVerdict::Approved)).await.unwrap();
    let rule = r.as_rule();
    // The scan has read the request approved and open, and decided on an offering; then:
    s.cancel_request("AROAADA:ada", &r.id, now()).await.unwrap();
    let intent = Intent {
        request: Some(r.key()),
        ..Intent::new(&rule.id, offering("cb-req-c1", "100"), 8, team_charges(&rule), now())
    };
    assert_eq!(s.reserve(&intent, 0).await, Err(ReserveError::RequestClosed(r.id.clone())));
    assert!(s.get_intent(&rule.id, &intent.id).await.unwrap().is_none(), "nothing written");
    assert_eq!(s.decision(&r.id).await.unwrap().unwrap().consumed_by, None, "the approval stays unconsumed");
    assert_eq!(used(s, BudgetOwner::Team("research".into())).await.0, Decimal::ZERO, "no fee committed");
    let forged = crate::domain::ids::RequestKey { requester: "AROABOB:bob".into(), id: r.id.clone() };
    let elsewhere = Intent { request: Some(forged), ..intent.clone() };
    assert_eq!(s.reserve(&elsewhere, 0).await, Err(ReserveError::RequestClosed(r.id.clone())));
}

#[cfg(test)]
mod tests {
    use crate::memory::MemoryTable;

    macro_rules! on_memory {
        ($($name:ident),* $(,)?) => {
            $(
                #[tokio::test]
                async fn $name() {
                    let table = MemoryTable::default();
                    super::run(stringify!($name), &table, &table).await;
                }
            )*
        };
    }

    crate::store_contract_cases!(on_memory);
}
