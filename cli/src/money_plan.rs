//! What a purchase by hand would do to the money, said before the person is asked (`buy`,
//! `approve`): the block and its fee, its price per accelerator-hour against the rule's
//! threshold, each budget it is charged to before and after the fee, and that EC2 purchases
//! cannot be cancelled. Then a typed `yes`, as terraform asks before it applies.

use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::budget::{BudgetAfter, BudgetOwner, Period, charges_for, headroom};
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::rule::Rule;
use capblock_shared::domain::stack::StoredSettings;
use capblock_shared::ports::Ledger;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::context::CliError;
use crate::table;

/// The plan's text, every budget read from the table now. A fee a budget has no room for is
/// said here; the purchase path refuses it (atomically, in the ledger) after the answer.
pub async fn plan(
    store: &DynamoStore,
    rule: &Rule,
    stored: &StoredSettings,
    priced: &Priced,
    now: DateTime<Utc>,
) -> Result<String, CliError> {
    let period = Period::of(now);
    let o = &priced.offering;
    let money = match charges_for(rule, &stored.stack.budgets(), &period) {
        Ok(charges) => {
            let mut usages = Vec::new();
            for c in &charges {
                usages.push(store.usage(&c.owner, &period).await?);
            }
            let rows = headroom(&charges, &usages, o.fee);
            let full: Vec<String> = rows.iter().filter(|h| !h.fits).map(|h| owner(&h.owner)).collect();
            let mut text = budgets(&rows, &period, o.fee.currency().to_string());
            if !full.is_empty() {
                text.push_str(&format!("\nNo room for this fee in {}: the purchase will be refused.", full.join(", ")));
            }
            text
        }
        Err(e) => format!("The budgets cannot be charged: {e}."),
    };
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

/// The budgets as a table: each one's month before and after the fee, and what is left.
fn budgets(rows: &[BudgetAfter], period: &Period, currency: String) -> String {
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
