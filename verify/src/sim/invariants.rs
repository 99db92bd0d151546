//! What must hold after every step of the simulation: the money promise, judged from the
//! table's items and from what EC2 holds, not from anything a workflow says about itself.

use std::collections::{BTreeMap, BTreeSet};

use capblock_core::domain::block::Block;
use capblock_core::domain::budget::{BudgetCharge, BudgetOwner, Intent, IntentState, Period};
use capblock_core::domain::extension::ExtensionState;
use capblock_core::domain::ledger_check::{self, LedgerVerdict};
use capblock_core::domain::money::Money;
use capblock_core::domain::request::{Request, RequestDecision, RequestVerdict};
use capblock_core::domain::rule::{REQUEST_RULE_PREFIX, Rule};
use capblock_core::domain::stack::StackSettings;
use capblock_core::domain::tags::INTENT_TAG;
use capblock_core::memory::{MemoryEc2, MemoryTable};
use capblock_core::ports::{Notice, RequestStore};
use chrono::{DateTime, Utc};
use futures::FutureExt;
use rust_decimal::Decimal;

use super::requests::Watch;

/// The limit each budget item may commit, by its owner's key.
fn limit(owner: &str, rules: &[Rule], stack: &StackSettings) -> Option<Decimal> {
    if owner == BudgetOwner::Account.key() {
        return stack.account_budget.map(|m| m.amount());
    }
    if let Some(rule) = rules.iter().find(|r| BudgetOwner::Rule(r.id.clone()).key() == owner) {
        return Some(rule.monthly_budget.amount());
    }
    stack.team_budgets.iter().find(|(t, _)| BudgetOwner::Team((*t).clone()).key() == owner).map(|(_, m)| m.amount())
}

/// A purchase EC2 may charge for, as EC2 holds it.
struct HeldPurchase {
    intent: String,
    /// One of its reservations is not over yet.
    running: bool,
    /// What EC2 charges for the purchase: every reservation's fee together (a segmented
    /// purchase's segments each at its own; the fee stays committed while one part may be held).
    fee: Decimal,
}

/// The purchases EC2 may charge for (a part's payment not failed), each once (however many
/// reservations it made: a purchase of UltraServers or of segments is one), by their first
/// reservation's id.
fn held_purchases(ec2: &MemoryEc2) -> BTreeMap<String, HeldPurchase> {
    let holdings = ec2.holdings();
    let mut fees: BTreeMap<&str, Decimal> = BTreeMap::new();
    for h in &holdings {
        *fees.entry(h.purchase.as_str()).or_default() += h.fee.map_or(Decimal::ZERO, |f| f.amount());
    }
    let mut out: BTreeMap<String, HeldPurchase> = BTreeMap::new();
    for h in holdings.iter().filter(|h| h.charged) {
        let r = &h.reservation;
        let running = !matches!(r.state.as_str(), "expired" | "payment-failed");
        let held = out.entry(h.purchase.clone()).or_insert(HeldPurchase {
            intent: r.tags.get(INTENT_TAG).cloned().unwrap_or_default(),
            running: false,
            fee: fees.get(h.purchase.as_str()).copied().unwrap_or_default(),
        });
        held.running |= running;
    }
    out
}

/// Every money invariant, checked now; the first broken one, in words.
pub fn check(table: &MemoryTable, ec2: &MemoryEc2, rules: &[Rule], stack: &StackSettings) -> Result<(), String> {
    // At most one PurchaseCapacityBlock that bought, per intent.
    if let Some((intent, n)) = ec2.purchases_by_intent().into_iter().find(|(_, n)| *n > 1) {
        return Err(format!("intent {intent} was bought {n} times"));
    }
    let intents: BTreeMap<String, Intent> = table.intents().into_iter().map(|i| (i.id.clone(), i)).collect();
    ledger_adds_up(table, &intents, rules, stack)?;
    ec2_is_committed(table, ec2, &intents, rules)?;
    ledger_agrees(table, ec2)
}

/// Each budget row commits and spends what its intents and extensions add up to (open and
/// bought purchases, open and paid extensions, less failed payments given back), within its
/// limit, and no intent charges a budget the ledger does not hold.
fn ledger_adds_up(
    table: &MemoryTable,
    intents: &BTreeMap<String, Intent>,
    rules: &[Rule],
    stack: &StackSettings,
) -> Result<(), String> {
    let mut owed: BTreeMap<(String, Period), (Decimal, Decimal)> = BTreeMap::new();
    let mut owe = |charges: &[BudgetCharge], fee: Decimal, paid: bool| {
        for c in charges {
            let e = owed.entry((c.owner.key(), c.period.clone())).or_default();
            e.0 += fee;
            if paid {
                e.1 += fee;
            }
        }
    };
    for i in intents.values() {
        let released = table.fee_released(&i.rule_id, &i.offering.id);
        if i.state.is_open() || (i.state == IntentState::Bought && !released) {
            owe(&i.charges, i.offering.fee.amount(), i.state == IntentState::Bought);
        }
    }
    for x in table.extensions() {
        if x.state.is_open() || x.state == ExtensionState::Paid {
            owe(&x.charges, x.offer.fee.amount(), x.state == ExtensionState::Paid);
        }
    }
    for ((owner, period), row) in &table.budgets() {
        let (committed, spent) = owed.remove(&(owner.clone(), period.clone())).unwrap_or_default();
        if row.committed != committed || row.spent != spent {
            return Err(format!(
                "budget {owner} {}: the ledger commits {} and spends {}, its intents add up to {committed} and {spent}",
                period.as_str(),
                row.committed,
                row.spent
            ));
        }
        if let Some(limit) = limit(owner, rules, stack)
            && row.committed > limit
        {
            return Err(format!("budget {owner} {} commits {} past its limit {limit}", period.as_str(), row.committed));
        }
    }
    if let Some(((owner, period), _)) = owed.into_iter().find(|(_, (c, _))| !c.is_zero()) {
        return Err(format!("intents charge budget {owner} {} that the ledger does not hold", period.as_str()));
    }
    Ok(())
}

/// What EC2 holds is committed in every budget it was charged to, and each rule holds no more
/// blocks at once than it may. An extension EC2 sold is charged like a purchase: its intent is
/// open or paid, never released, and its fee is committed; unless its payment failed (EC2
/// charges nothing).
fn ec2_is_committed(
    table: &MemoryTable,
    ec2: &MemoryEc2,
    intents: &BTreeMap<String, Intent>,
    rules: &[Rule],
) -> Result<(), String> {
    let mut held: BTreeMap<(String, Period), Decimal> = BTreeMap::new();
    let mut running: BTreeMap<String, usize> = BTreeMap::new();
    for (purchase, p) in held_purchases(ec2) {
        let intent_id = p.intent;
        let Some(intent) = intents.get(&intent_id) else {
            return Err(format!("EC2 holds purchase {purchase} (intent {intent_id:?}) that the table does not know"));
        };
        if table.fee_released(&intent.rule_id, &intent.offering.id) {
            return Err(format!("the fee of {intent_id} was released while EC2 holds {purchase}"));
        }
        // EC2's own fee, not the table's word on it: a segmented purchase costs all its
        // segments, once.
        for c in &intent.charges {
            *held.entry((c.owner.key(), c.period.clone())).or_default() += p.fee;
        }
        if p.running {
            *running.entry(intent.rule_id.clone()).or_default() += 1;
        }
    }
    let extensions = table.extensions();
    for sold in ec2.extensions_sold().into_iter().filter(|x| x.status != "payment-failed") {
        let id = format!("{}/{}", sold.reservation_id, sold.offering_id);
        let Some(x) = extensions.iter().find(|x| x.id() == id) else {
            return Err(format!("EC2 sold extension {id} that the table does not know"));
        };
        if !(x.state.is_open() || x.state == ExtensionState::Paid) {
            return Err(format!("extension {id} is {} though EC2 sold it", x.state.as_str()));
        }
        for c in &x.charges {
            *held.entry((c.owner.key(), c.period.clone())).or_default() += x.offer.fee.amount();
        }
    }
    let budgets = table.budgets();
    for ((owner, period), amount) in held {
        let committed = budgets.get(&(owner.clone(), period.clone())).map_or(Decimal::ZERO, |r| r.committed);
        if amount > committed {
            return Err(format!(
                "EC2 holds {amount} of budget {owner} {} but it commits only {committed}",
                period.as_str()
            ));
        }
    }
    for rule in rules {
        let n = running.get(&rule.id).copied().unwrap_or(0);
        if n > rule.max_blocks_held as usize {
            return Err(format!("EC2 holds {n} blocks of {} at once; it may hold {}", rule.id, rule.max_blocks_held));
        }
    }
    Ok(())
}

/// The tracker's own ledger check (`domain::ledger_check`), judged after every step: no block
/// EC2 holds is one the table has as final. (The tracker mends such a block on its next run; the
/// simulation's EC2 never holds a block again after failing it, so here it is always a bug.)
fn ledger_agrees(table: &MemoryTable, ec2: &MemoryEc2) -> Result<(), String> {
    let blocks: BTreeMap<String, Block> = table.blocks().into_iter().map(|b| (b.reservation_id.clone(), b)).collect();
    for h in ec2.holdings() {
        if let LedgerVerdict::HeldAgain { .. } = ledger_check::check(blocks.get(&h.reservation.id), &h.reservation) {
            return Err(format!(
                "EC2 holds {} ({}) which the table has as final",
                h.reservation.id, h.reservation.state
            ));
        }
    }
    Ok(())
}

/// Once the runs that follow have run without faults: every purchase EC2 holds is on the books
/// as bought, every intent still open is one EC2 never received and a person was told of it,
/// and every notice went out.
pub fn settled(table: &MemoryTable, ec2: &MemoryEc2, pending: &[Notice], now: DateTime<Utc>) -> Result<(), String> {
    let intents: BTreeMap<String, Intent> = table.intents().into_iter().map(|i| (i.id.clone(), i)).collect();
    let bought: BTreeSet<String> = ec2.purchases_by_intent().into_keys().collect();
    every_reservation_tracked(table, ec2, &intents, now)?;
    for (purchase, p) in held_purchases(ec2) {
        let intent_id = p.intent;
        match intents.get(&intent_id) {
            Some(i) if i.state == IntentState::Bought => {}
            other => {
                return Err(format!(
                    "at {now} EC2 holds purchase {purchase} but intent {intent_id} is {:?}",
                    other.map(|i| i.state)
                ));
            }
        }
    }
    let extensions = table.extensions();
    for sold in ec2.extensions_sold().into_iter().filter(|x| x.status == "payment-succeeded") {
        let id = format!("{}/{}", sold.reservation_id, sold.offering_id);
        if !extensions.iter().any(|x| x.id() == id && x.state == ExtensionState::Paid) {
            return Err(format!("at {now} EC2 sold extension {id} but the table has not booked it paid"));
        }
    }
    let notices = table.notices();
    for i in intents.values().filter(|i| i.state.is_open()) {
        if bought.contains(&i.id) {
            return Err(format!("intent {} is still open though EC2 bought it", i.id));
        }
        let told =
            notices.iter().any(|(n, _)| n.milestone.contains("outcome-unknown") && n.thread.contains(&i.offering.id));
        if i.state == IntentState::Sent && !told {
            return Err(format!("intent {} is held for a person, and no one was told", i.id));
        }
    }
    if let Some(n) = pending.first() {
        return Err(format!("notice {} was never published", n.id()));
    }
    Ok(())
}

/// Every reservation EC2 holds of a purchase is tracked, each UltraServer and each segment a
/// block of its own; a segment's block at its segment's fee, what EC2 charges for it.
fn every_reservation_tracked(
    table: &MemoryTable,
    ec2: &MemoryEc2,
    intents: &BTreeMap<String, Intent>,
    now: DateTime<Utc>,
) -> Result<(), String> {
    let blocks: BTreeMap<String, Block> = table.blocks().into_iter().map(|b| (b.reservation_id.clone(), b)).collect();
    // Reservations a test seeded carry no fee: the simulation seeds none.
    for h in ec2.holdings().into_iter().filter(|h| h.charged && h.fee.is_some()) {
        let id = &h.reservation.id;
        let Some(block) = blocks.get(id) else {
            return Err(format!(
                "at {now} EC2 holds {id} of purchase {} and the table tracks no block of it",
                h.purchase
            ));
        };
        let intent = h.reservation.tags.get(INTENT_TAG).and_then(|i| intents.get(i));
        let segmented = intent.is_some_and(|i| !i.offering.segments.is_empty());
        if segmented && block.fee != h.fee {
            let text = |m: Option<Money>| m.map_or_else(|| "no fee".to_string(), |m| m.to_string());
            return Err(format!(
                "at {now} the block of segment {id} is booked at {}; EC2 charges {} for it",
                text(block.fee),
                text(h.fee)
            ));
        }
    }
    Ok(())
}

/// People's requests, judged from the table's intents, decisions and budgets and from what EC2
/// bought: a request is bought at most once and its approval consumed by that one purchase; a
/// forged item, or an approval no team allows, buys nothing and is never approved; a request
/// closed (cancelled, rejected, expired, changed after its approval) gets no purchase after.
pub fn requests(table: &MemoryTable, ec2: &MemoryEc2, watch: &Watch) -> Result<(), String> {
    let mut bought: BTreeMap<String, u32> = BTreeMap::new();
    for (intent, n) in ec2.purchases_by_intent() {
        let rule = intent.split_once('/').map_or(intent.as_str(), |(r, _)| r);
        if rule.starts_with(REQUEST_RULE_PREFIX) {
            *bought.entry(rule.to_string()).or_default() += n;
        }
    }
    if let Some((rule, n)) = bought.iter().find(|(_, n)| **n > 1) {
        return Err(format!("EC2 bought {n} blocks for request rule {rule}: a request buys once"));
    }
    let mut of_rule: BTreeMap<String, Vec<Intent>> = BTreeMap::new();
    for i in table.intents().into_iter().filter(|i| i.rule_id.starts_with(REQUEST_RULE_PREFIX)) {
        of_rule.entry(i.rule_id.clone()).or_default().push(i);
    }
    for (rule, list) in &of_rule {
        approval_consumed_once(table, rule, list)?;
    }
    let budgets = table.budgets();
    for (id, (rule, what)) in &watch.forged {
        let touched = if let Some(i) = of_rule.get(rule).and_then(|l| l.first()) {
            Some(format!("purchase intent {}", i.id))
        } else if bought.contains_key(rule) {
            Some("a block EC2 sold".to_string())
        } else if let Some(((owner, _), _)) =
            budgets.iter().find(|((o, _), _)| *o == BudgetOwner::Rule(rule.clone()).key())
        {
            Some(format!("budget {owner}"))
        } else if what.starts_with("an item") && decision(table, id).is_some() {
            Some("a decision on it".to_string())
        } else {
            None
        };
        if let Some(touched) = touched {
            return Err(format!("forged request {id} ({what}) has {touched}: a forged request buys nothing"));
        }
    }
    for (id, c) in &watch.closed {
        let later = of_rule.get(&c.rule).into_iter().flatten().find(|i| !c.intents.contains(&i.id));
        if let Some(i) = later {
            return Err(format!("request {id} was {} at {}, and purchase intent {} came after", c.why, c.at, i.id));
        }
    }
    Ok(())
}

/// Request rule `rule`'s purchase intents (given-back ones are deleted): one at most, naming
/// its request, whose approval it consumed.
fn approval_consumed_once(table: &MemoryTable, rule: &str, list: &[Intent]) -> Result<(), String> {
    // A purchase EC2 refused bought nothing and gave the approval back (`record_rejected`).
    let list: Vec<&Intent> = list.iter().filter(|i| i.state != IntentState::Rejected).collect();
    let ids: Vec<&str> = list.iter().map(|i| i.id.as_str()).collect();
    let [i] = list.as_slice() else {
        return Err(format!("request rule {rule} has purchase intents {ids:?}: one approval bought twice"));
    };
    let Some(id) = &i.request else {
        return Err(format!(
            "purchase intent {} of request rule {rule} names no request: it consumed no approval",
            i.id
        ));
    };
    match decision(table, &id.id) {
        Some(d) if d.verdict == RequestVerdict::Approved && d.consumed_by.as_deref() == Some(i.id.as_str()) => Ok(()),
        d => Err(format!(
            "purchase intent {} bought for request {id} did not consume its approval (consumed by {:?})",
            i.id,
            d.and_then(|d| d.consumed_by)
        )),
    }
}

/// The decision on request `id` as stored (the in-memory table answers at once).
fn decision(table: &MemoryTable, id: &str) -> Option<RequestDecision> {
    table.decision(id).now_or_never().and_then(Result::ok).flatten()
}

/// The one-shot rules of the approved requests, on the terms approved (the decision's, not the
/// item's, which its requester may rewrite): their budgets' limits and held blocks.
pub fn request_rules(table: &MemoryTable, watch: &Watch) -> Vec<Rule> {
    watch
        .filed
        .values()
        .filter_map(|r| {
            let d = decision(table, &r.id)?;
            (d.verdict == RequestVerdict::Approved).then(|| Request { terms: d.terms, ..r.clone() }.as_rule())
        })
        .collect()
}
