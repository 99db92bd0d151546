//! `capblock report`: a month's cost truth per rule and team (`domain::report`), beside what each
//! rule's budget counted as spent, so a difference shows at once.

use std::collections::BTreeSet;

use capblock_shared::app::report::{Month, Row, month};
use capblock_shared::domain::budget::Period;
use capblock_shared::domain::money::{Currency, Money};
use capblock_shared::domain::report::RuleMonth;
use clap::Args;
use rust_decimal::Decimal;

use crate::context::{CliError, CliResult, run_now, store, stored_settings};
use crate::output::OutputArgs;
use crate::table::{self, Column, Layout};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock report                      # this month so far\n  \
capblock report --month 2026-11\n  capblock report --month 2026-11 --csv > capblock-2026-11.csv\n\n\
What the columns mean:\n  SPENT        the month's fees plus the extensions paid in it: what the rule's budget counts\n  \
BUDGET       what the rule's budget counts as spent, of its monthly limit (SPENT and the count agree;\n               \
a note says when not)\n  \
GPU-H PAID   accelerator-hours of the blocks charged to the month, over their whole life\n  \
GPU-H ELAPSED of those, the hours gone by: a finished block's all, an open one's up to its last sample\n  \
GPU-H USED   of those, what the tracker saw running (5-minute samples; a block still open: so far)\n  \
USE %        used over elapsed (a block used to its end reaches 97.9% for a day, 99.7% for a week:\n               \
EC2 terminates the instances 30 minutes before the end, and that half hour is paid)\n  \
$/USED GPU-H the cost of the elapsed hours (extensions included; an open block's share of its cost\n               \
so far) over the used accelerator-hours: a block half-way through is not priced at its whole fee\n\n\
A rule's team is its `team` (rules written before teams existed: their `team` tag). A team with a\n\
budget in the stack's TeamBudgets shows what that budget counts as spent, of its limit (TEAM BUDGET).\n\
A team marked `(tag)` is named by its rules' `team` tag only: their purchases are not charged to\n\
the team's budget until each rule says `team = \"...\"`.\n\
A block bought by hand and adopted by a rule's tag (its fee unknown to capblock) counts in the month it\n\
starts in with its hours, marked `fee unknown` in BLOCKS; it adds nothing to the fees, and the price\n\
per used GPU-hour is the priced blocks' alone.\n\
Exit codes: 0 reported (a month with nothing says so), 1 store failure, 2 bad input.")]
pub struct ReportArgs {
    /// The month (YYYY-MM, UTC); default: this month, on the stack's clock.
    #[arg(long, value_name = "YYYY-MM")]
    month: Option<String>,
    /// Print CSV (one row per rule) for a spreadsheet or a FinOps tool.
    #[arg(long, conflicts_with_all = ["json", "output"])]
    csv: bool,
    // `-o json|yaml`: the rules, the teams and the account's budget.
    #[command(flatten)]
    output: OutputArgs,
}

/// One decimal, rounded (Decimal's `{:.1}` cuts digits off rather than rounding them).
fn hours(d: Decimal) -> String {
    format!("{:.1}", d.round_dp(1))
}

pub async fn run(a: ReportArgs) -> CliResult {
    let period = match &a.month {
        Some(m) => Period::parse(m)
            .ok_or_else(|| CliError::Invalid(format!("--month {m:?}: write a month as YYYY-MM, e.g. 2026-12")))?,
        None => Period::budget_month(run_now(None, false).await?.clock()),
    };
    let store = store().await?;
    let teams = stored_settings(&store).await?.map(|s| s.stack.team_budgets).unwrap_or_default();
    let report = month(&store, &period, &teams).await?;
    for note in &report.skipped {
        eprintln!("note: {note}");
    }
    for r in report.rules.iter().filter(|r| !r.agrees()) {
        eprintln!(
            "note: rule {}'s budget counts {} spent in {}, the blocks and extensions {}: a purchase may still \
             be settling (the tracker's next run records it)",
            r.month.rule,
            r.budget_spent.map_or("nothing".to_string(), |b| b.to_string()),
            period.as_str(),
            r.month.spent
        );
    }
    if a.csv {
        print_csv(&report)?;
    } else if !a.output.data(&report)? {
        print_table(&report, a.output.layout());
    }
    Ok(())
}

fn rate(r: &RuleMonth) -> String {
    r.per_used_accelerator_hour.map_or("-".into(), |p| format!("{:.4}", p.per_unit.round_dp(4)))
}

fn percent(p: Option<Decimal>) -> String {
    p.map_or("-".into(), |p| format!("{:.1}", p.round_dp(1)))
}

/// "3", "3 (1 open)", "3 (1 open, 1 fee unknown)".
fn blocks_cell(m: &RuleMonth) -> String {
    let mut notes = Vec::new();
    if m.open_blocks > 0 {
        notes.push(format!("{} open", m.open_blocks));
    }
    if m.unpriced_blocks > 0 {
        notes.push(format!("{} fee unknown", m.unpriced_blocks));
    }
    if notes.is_empty() { m.blocks.to_string() } else { format!("{} ({})", m.blocks, notes.join(", ")) }
}

/// The rule's budget as "spent of limit"; a rule gone from the store has no limit left to show.
fn rule_budget(row: &Row) -> String {
    let spent = row.budget_spent.unwrap_or(Money::zero(row.month.spent.currency()));
    match row.budget_limit {
        Some(limit) => format!("{} of {}", table::money(&spent), table::money(&limit)),
        None => format!("{} (rule deleted)", table::money(&spent)),
    }
}

/// Teams whose every rule in the month names them only by the `team` tag: not charged to the
/// team's budget, so the team's row must not read as if that budget were kept.
fn teams_by_tag(r: &Month) -> BTreeSet<&str> {
    let mut by_tag: BTreeSet<&str> = r.rules.iter().filter(|x| x.team_by_tag).map(|x| x.month.team.as_str()).collect();
    for x in r.rules.iter().filter(|x| !x.team_by_tag) {
        by_tag.remove(x.month.team.as_str());
    }
    by_tag
}

fn print_table(r: &Month, layout: Layout) {
    if r.rules.is_empty() {
        println!("nothing bought or extended in {}", r.month);
        return;
    }
    let currency = r.rules[0].month.spent.currency();
    println!("{} (UTC month)", r.month);
    println!("{}", rules_table(r, currency, layout));
    println!();
    let by_tag = teams_by_tag(r);
    println!("{}", teams_table(r, &by_tag, currency, layout));
    if !by_tag.is_empty() {
        println!(
            "(tag): the rules name the team by their `team` tag only; their purchases are not charged to \
             the team's budget (give each rule `team = \"<name>\"`)"
        );
    }
    if let Some(a) = r.account_spent {
        println!("\naccount budget spent in {}: {a}", r.month);
    }
    let unsampled: u32 = r.rules.iter().map(|x| x.month.unsampled_blocks).sum();
    if unsampled > 0 {
        println!("{unsampled} block(s) never seen running yet: their used hours count 0");
    }
}

/// The month per rule.
fn rules_table(r: &Month, currency: Currency, layout: Layout) -> String {
    let rows: Vec<Vec<String>> = r
        .rules
        .iter()
        .map(|row| {
            let m = &row.month;
            vec![
                m.rule.clone(),
                m.team.clone(),
                blocks_cell(m),
                table::money(&m.fees),
                table::money(&m.extensions),
                table::money(&m.spent),
                rule_budget(row),
                hours(m.paid_accelerator_hours),
                hours(m.elapsed_accelerator_hours),
                hours(m.used_accelerator_hours),
                percent(m.utilization_percent),
                rate(m),
            ]
        })
        .collect();
    // The narrow set: the rule, what it spent of its budget, and how well the blocks were used
    // (USE % and the price per used hour over the hours elapsed: a running block's up to its last
    // sample, with that share of its cost); `-o wide` adds the team, the fees and extensions
    // apart, and the paid, elapsed and used hours.
    let columns = [
        Column::text("RULE"),
        Column::text("TEAM").wide(),
        Column::text("BLOCKS"),
        Column::number(table::in_currency("FEES", currency)).wide(),
        Column::number(table::in_currency("EXTENSIONS", currency)).wide(),
        Column::number(table::in_currency("SPENT", currency)),
        Column::text(table::in_currency("BUDGET", currency)),
        Column::number("GPU-H PAID").wide(),
        Column::number("GPU-H ELAPSED").wide(),
        Column::number("GPU-H USED").wide(),
        Column::number("USE %"),
        Column::number(format!("{currency}/USED GPU-H")),
    ];
    table::render(&columns, &rows, layout)
}

/// The month per team: a team named by its rules' tag only is marked `(tag)`.
fn teams_table(r: &Month, by_tag: &BTreeSet<&str>, currency: Currency, layout: Layout) -> String {
    let teams: Vec<Vec<String>> = r
        .teams
        .iter()
        .map(|t| {
            vec![
                if by_tag.contains(t.team.as_str()) { format!("{} (tag)", t.team) } else { t.team.clone() },
                t.rules.join(", "),
                t.blocks.to_string(),
                table::money(&t.spent),
                hours(t.paid_accelerator_hours),
                hours(t.elapsed_accelerator_hours),
                hours(t.used_accelerator_hours),
                percent(t.utilization_percent),
                t.budget.map_or("-".to_string(), |b| {
                    let spent = t.budget_spent.map_or("0.00".to_string(), |s| table::money(&s));
                    format!("{spent} of {}", table::money(&b))
                }),
            ]
        })
        .collect();
    let columns = [
        Column::text("TEAM"),
        Column::text("RULES"),
        Column::text("BLOCKS"),
        Column::number(table::in_currency("SPENT", currency)),
        Column::number("GPU-H PAID").wide(),
        Column::number("GPU-H ELAPSED").wide(),
        Column::number("GPU-H USED").wide(),
        Column::number("USE %"),
        Column::text(table::in_currency("TEAM BUDGET", currency)),
    ];
    table::render(&columns, &teams, layout)
}

fn print_csv(r: &Month) -> CliResult {
    let mut w = csv::Writer::from_writer(std::io::stdout().lock());
    let failed = |e: csv::Error| CliError::Failed(format!("writing CSV: {e}"));
    w.write_record([
        "month",
        "rule",
        "team",
        "blocks",
        "open_blocks",
        "currency",
        "fees",
        "extensions",
        "spent",
        "budget_spent",
        "paid_accelerator_hours",
        "used_accelerator_hours",
        "utilization_percent",
        "per_used_accelerator_hour",
        "budget_limit",
        "team_by_tag",
        "unpriced_blocks",
        "elapsed_accelerator_hours",
    ])
    .map_err(failed)?;
    for row in &r.rules {
        let m = &row.month;
        w.write_record([
            r.month.clone(),
            m.rule.clone(),
            m.team.clone(),
            m.blocks.to_string(),
            m.open_blocks.to_string(),
            m.spent.currency().to_string(),
            table::money(&m.fees),
            table::money(&m.extensions),
            table::money(&m.spent),
            row.budget_spent.map_or(String::new(), |b| table::money(&b)),
            m.paid_accelerator_hours.normalize().to_string(),
            m.used_accelerator_hours.normalize().to_string(),
            m.utilization_percent.map_or(String::new(), |p| p.normalize().to_string()),
            m.per_used_accelerator_hour.map_or(String::new(), |p| p.per_unit.round_dp(4).to_string()),
            row.budget_limit.map_or(String::new(), |b| table::money(&b)),
            row.team_by_tag.to_string(),
            m.unpriced_blocks.to_string(),
            m.elapsed_accelerator_hours.normalize().to_string(),
        ])
        .map_err(failed)?;
    }
    w.flush().map_err(|e| CliError::Failed(format!("writing CSV: {e}")))?;
    Ok(())
}
