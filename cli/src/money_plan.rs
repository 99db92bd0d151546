//! What a purchase by hand would do to the money, said before the person is asked (`buy`,
//! `approve`, a live `scan`): each block and its fee, its price per accelerator-hour, each
//! budget it is charged to before and after the fees, and that EC2 purchases cannot be
//! cancelled. Then a typed `yes`, as terraform asks before it applies.

use std::collections::BTreeMap;

use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::budget::{BudgetAfter, BudgetCharge, BudgetOwner, BudgetUsage, Period, StackBudgets};
use capblock_shared::domain::budget::{charges_for, headroom};
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::Ledger;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::context::CliError;
use crate::table;

/// The plan's text for one purchase (`buy`, `approve`), every budget read from the table now.
/// A fee a budget has no room for is said here; the purchase path refuses it (atomically, in
/// the ledger) after the answer.
pub async fn plan(
    store: &DynamoStore,
    rule: &Rule,
    budgets: &StackBudgets,
    priced: &Priced,
    now: DateTime<Utc>,
) -> Result<String, CliError> {
    let o = &priced.offering;
    let money = money(store, &[(rule, priced)], budgets, now).await?;
    Ok(format!(
        "Buy {} x {} in {}, {} to {}, for {} ({} per accelerator-hour; rule {}'s threshold {}).\n\n{money}\n\n\
         A Capacity Block purchase cannot be cancelled or refunded. EC2 is asked again first: a changed fee is refused.",
        o.instance_count,
        o.instance_type,
        o.availability_zone,
        table::when_utc(o.start),
        table::when_utc(o.end),
        o.fee,
        priced.per_accelerator_hour,
        rule.id,
        rule.max_price_per_accelerator_hour,
    ))
}

/// The budgets `purchases` are charged to, read from the table now: each budget's month before
/// and after all their fees (a budget two purchases share carries both, in the order given),
/// and which budget has no room for them; or why the budgets cannot be charged.
pub async fn money(
    store: &DynamoStore,
    purchases: &[(&Rule, &Priced)],
    budgets: &StackBudgets,
    now: DateTime<Utc>,
) -> Result<String, CliError> {
    let period = Period::budget_month(now);
    let mut charged: Vec<(&Rule, &Priced, Vec<BudgetCharge>)> = Vec::new();
    for (rule, priced) in purchases {
        match charges_for(rule, budgets, &period) {
            Ok(charges) => charged.push((rule, priced, charges)),
            Err(e) => return Ok(format!("The budgets cannot be charged: {e}.")),
        }
    }
    // Each budget's usage, read once, then carried from one purchase to the next.
    let mut usage: BTreeMap<String, Option<BudgetUsage>> = BTreeMap::new();
    for c in charged.iter().flat_map(|(_, _, charges)| charges) {
        if let std::collections::btree_map::Entry::Vacant(e) = usage.entry(c.owner.key()) {
            e.insert(store.usage(&c.owner, &period).await?);
        }
    }
    let mut rows = carried(&charged, usage);
    in_reading_order(&mut rows);
    // A budget refuses for one of two reasons, said apart: its limit (the fees pass it) or, for
    // a rule's own, its purchases this month (`max_purchases_per_month`) already made.
    let over = |h: &&BudgetAfter| h.limit.is_some_and(|l| h.after > l);
    let full: Vec<String> = rows.iter().filter(|h| !h.fits).filter(over).map(|h| owner(&h.owner)).collect();
    let counted: Vec<String> = rows.iter().filter(|h| !h.fits && !over(h)).map(|h| owner(&h.owner)).collect();
    let currency = table::currency(purchases.iter().map(|(_, p)| &p.offering.fee));
    let mut text = table_of(&rows, &period, currency);
    if !full.is_empty() {
        let what = if purchases.len() == 1 { "this fee" } else { "these fees" };
        text.push_str(&format!("\nNo room for {what} in {}: a purchase past it will be refused.", full.join(", ")));
    }
    if !counted.is_empty() {
        text.push_str(&format!(
            "\n{} made its purchases for {} (max_purchases_per_month): another will be refused.",
            counted.join(", "),
            period.as_str()
        ));
    }
    Ok(text)
}

/// Each budget before the first purchase charged to it and after the last (the rows in the order
/// the budgets first appear), each purchase judged by `headroom` on the usage the ones before it
/// left: a budget fits when every purchase charged to it does.
fn carried(
    charged: &[(&Rule, &Priced, Vec<BudgetCharge>)],
    mut usage: BTreeMap<String, Option<BudgetUsage>>,
) -> Vec<BudgetAfter> {
    let mut rows: Vec<BudgetAfter> = Vec::new();
    for (_, priced, charges) in charged {
        let fee = priced.offering.fee;
        let usages: Vec<Option<BudgetUsage>> =
            charges.iter().map(|c| usage.get(&c.owner.key()).cloned().flatten()).collect();
        for (c, after) in charges.iter().zip(headroom(charges, &usages, fee)) {
            let u = usage.entry(c.owner.key()).or_default();
            let committed = u.as_ref().map_or(Decimal::ZERO, |u| u.committed.amount()) + fee.amount();
            let committed = Money::new(committed, fee.currency()).unwrap_or(fee);
            *u = Some(BudgetUsage {
                committed,
                spent: u.as_ref().map_or(Money::zero(fee.currency()), |u| u.spent),
                purchases: u.as_ref().map_or(0, |u| u.purchases) + 1,
            });
            match rows.iter_mut().find(|r| r.owner == after.owner) {
                Some(r) => (r.after, r.fits) = (after.after, r.fits && after.fits),
                None => rows.push(after),
            }
        }
    }
    rows
}

/// The rows as a person reads a plan: the rules' budgets, then the teams', then the account's,
/// each kind by name (not in the order the purchases first charged them, which interleaved
/// "rule a, team t, the account, rule b").
fn in_reading_order(rows: &mut [BudgetAfter]) {
    let rank = |o: &BudgetOwner| match o {
        BudgetOwner::Rule(id) => (0, id.clone()),
        BudgetOwner::Team(t) => (1, t.clone()),
        BudgetOwner::Account => (2, String::new()),
    };
    rows.sort_by_key(|r| rank(&r.owner));
}

fn owner(o: &BudgetOwner) -> String {
    match o {
        BudgetOwner::Rule(id) => format!("rule {id}"),
        BudgetOwner::Team(t) => format!("team {t}"),
        BudgetOwner::Account => "the account".into(),
    }
}

fn cents(d: Decimal) -> String {
    format!("{:.2}", d.round_dp(2))
}

/// The budgets as a table: each one's month before and after the fees, and what is left.
fn table_of(rows: &[BudgetAfter], period: &Period, currency: String) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|h| {
            vec![
                owner(&h.owner),
                cents(h.before),
                cents(h.after),
                h.limit.map_or("no cap".into(), cents),
                h.left_after().map_or("-".into(), cents),
            ]
        })
        .collect();
    use table::{Column, in_currency};
    let columns = [
        Column::text(format!("BUDGET {}", period.as_str())),
        Column::number(in_currency("NOW", &currency)),
        Column::number(in_currency("AFTER", &currency)),
        Column::number(in_currency("LIMIT", &currency)),
        Column::number(in_currency("LEFT AFTER", &currency)),
    ];
    // On stderr, before the question: wrapped to the terminal like any table.
    table::render(&columns, &cells, table::Layout::detect_on(false, table::Stream::Stderr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plans_budgets_read_rules_then_teams_then_the_account() {
        let row = |owner| BudgetAfter { owner, before: Decimal::ZERO, after: Decimal::ONE, limit: None, fits: true };
        let mut rows = vec![
            row(BudgetOwner::Rule("p5-weekly".into())),
            row(BudgetOwner::Team("research".into())),
            row(BudgetOwner::Account),
            row(BudgetOwner::Rule("a100-daily".into())),
        ];
        in_reading_order(&mut rows);
        let names: Vec<String> = rows.iter().map(|r| owner(&r.owner)).collect();
        assert_eq!(names, ["rule a100-daily", "rule p5-weekly", "team research", "the account"]);
    }
}
