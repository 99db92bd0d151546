//! `capblock backtest`: replay a rule over a price history.

use capblock_shared::domain::backtest::{Backtest, Sample, backtest};
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::{Observation, ObservationStore};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::context::{CliError, CliResult, Window, bounds, load_rule, store};
use crate::output::OutputArgs;
use crate::table::{self, Column, Layout, when, when_utc};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock backtest --rule infra/examples/rules/p5-weekly.toml\n  \
capblock backtest --rule my-rule.toml --history prices.json --json\n\n\
The history is replayed scan by scan (each distinct observation time): the rule decides over the \
offerings seen then, exactly as the scan does, with its monthly budget, max_purchases_per_month and \
max_blocks_held applied (a block is held from its purchase to its end).\n\
--history takes a JSON array of observations ({\"offering\": {...}, \"accelerators_per_instance\": 8, \
\"seen_at\": \"...\"}), e.g. `capblock history --json` turned back into observations; without it the \
stored history of the rule's regions and types is used.\n\
Exit codes: 0 replayed (whether or not anything was bought), 1 store failure, 2 bad input (invalid \
rule or history file), 3 no history.")]
#[command(mut_arg("from", |a| a.help("Earliest stored observation to use (2026-12-20, 2026-12-20T11:30 UTC, or RFC 3339).")), mut_arg("to", |a| a.help("Latest stored observation to use (a date counts whole).")))]
pub struct BacktestArgs {
    /// The rule file to test.
    #[arg(long)]
    rule: String,
    /// A JSON file with an array of observations, instead of the stored history.
    #[arg(long)]
    history: Option<String>,
    #[command(flatten)]
    window: Window,
    #[command(flatten)]
    output: OutputArgs,
}

/// A history file: a JSON array of observations.
fn read_history(path: &str) -> Result<Vec<Observation>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::Invalid(format!("{path}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| CliError::Invalid(format!("{path}: not a JSON array of observations: {e}")))
}

pub async fn run(a: BacktestArgs) -> CliResult {
    let rule = load_rule(&a.rule, crate::context::clock_now().await?)?;
    let observations: Vec<Observation> = match &a.history {
        Some(path) => read_history(path)?,
        None => stored_history(&rule, &a.window).await?,
    };
    if observations.is_empty() {
        return Err(CliError::NotFound(format!("no price history for rule {:?}: nothing to replay", rule.id)));
    }
    let samples: Vec<Sample> = observations.into_iter().map(Sample::from).collect();
    let report = backtest(&rule, &samples);
    if a.output.data(&report)? {
        return Ok(());
    }
    print(&rule, &report, a.output.layout());
    Ok(())
}

/// The stored history of the rule's regions and types within the window.
async fn stored_history(rule: &Rule, window: &Window) -> Result<Vec<Observation>, CliError> {
    let (from, to) = bounds(window.from, window.to);
    let store = store().await?;
    let mut all = Vec::new();
    for r in &rule.regions {
        for t in &rule.instance_types {
            all.extend(store.history(r, t, from, to).await?);
        }
    }
    Ok(all)
}

/// The replay for a person: what it replayed, what it would have bought and spent, and why it
/// held back.
fn print(rule: &Rule, report: &Backtest, layout: Layout) {
    println!(
        "rule {} (max {} per accelerator-hour, budget {}/month, {} purchase(s)/month, {} block(s) held): \
{} observation(s) in {} scan(s)",
        rule.id,
        rule.max_price_per_accelerator_hour,
        rule.monthly_budget,
        rule.max_purchases_per_month,
        rule.max_blocks_held,
        report.observations,
        report.scans
    );
    if report.purchases.is_empty() {
        println!("it would have bought nothing");
    } else {
        println!("{}", purchases_table(rule, report, layout));
        println!("total {:.2} {}", report.total.round_dp(2), rule.currency);
        for (month, spent) in &report.spent_by_month {
            println!("  {month}: {:.2} of {}", spent.round_dp(2), rule.monthly_budget);
        }
    }
    // One line per reason, not per scan: a rule holding its block is held back every scan.
    let mut reasons: Vec<(&str, usize, DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for h in &report.limited {
        match reasons.iter_mut().find(|(r, ..)| *r == h.reason) {
            Some((_, n, first, last)) => {
                *n += 1;
                *first = (*first).min(h.at);
                *last = (*last).max(h.at);
            }
            None => reasons.push((&h.reason, 1, h.at, h.at)),
        }
    }
    for (reason, n, first, last) in reasons {
        let span =
            if n == 1 { format!("at {}", when_utc(first)) } else { format!("{} to {}", when(first), when_utc(last)) };
        println!("  held back: {reason} ({n} scan{}, {span})", if n == 1 { "" } else { "s" });
    }
}

/// What the rule would have bought, one row a purchase.
fn purchases_table(rule: &Rule, report: &Backtest, layout: Layout) -> String {
    let rows: Vec<Vec<String>> = report
        .purchases
        .iter()
        .map(|b| {
            vec![
                when(b.at),
                b.offering.id.clone(),
                b.offering.region.to_string(),
                format!("{} x {}", b.offering.instance_count, b.offering.instance_type),
                when(b.offering.start),
                b.offering.length_text(),
                table::money(&b.fee),
                format!("{:.4}", b.per_accelerator_hour.per_unit.round_dp(4)),
            ]
        })
        .collect();
    let currency = rule.currency.to_string();
    let mut columns =
        vec![Column::text("BOUGHT AT (UTC)"), Column::whole("OFFERING").wide(), Column::whole("REGION").wide()];
    columns.extend(table::block_columns(&currency));
    table::render(&columns, &rows, layout)
}
