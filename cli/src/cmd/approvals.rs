//! `capblock approvals`: the decisions approval-mode rules are waiting on, each with the intent
//! `capblock approve` takes and how long it may still be approved.

use capblock_shared::app::approvals::waiting;
use capblock_shared::domain::approval::expires_at;
use capblock_shared::domain::budget::Intent;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::duration::brief;
use capblock_shared::ports::RuleStore;
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Serialize;

use crate::context::{CliError, CliResult, store};
use crate::output::OutputArgs;
use crate::table::{self, Column};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock approvals\n  capblock approvals -o wide\n  \
capblock approvals -o json | jq -r '.[].intent'\n  \
capblock approvals --time 2026-12-03T01:00:00Z   # as seen at a simulated market's time\n\n\
Rules in mode = \"approval\" do not buy: each scan stores what it would have bought and posts \"approval \
needed\" in Slack. This lists those decisions not yet bought and not expired (24h after the scan asked, \
never past the offering's start), the first to expire first; buy one with `capblock approve INTENT`.\n\
Exit codes: 0 listed (an empty list says so), 1 store failure, 2 bad input.")]
pub struct ApprovalsArgs {
    /// The instant to judge expiry from (RFC 3339); default: now.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    #[command(flatten)]
    output: OutputArgs,
}

/// An approval waiting, as `-o json|yaml` print it: what `capblock approve` takes, the decision,
/// and until when it may be approved.
#[derive(Serialize)]
struct Waiting<'a> {
    intent: String,
    expires_at: DateTime<Utc>,
    expires_in_seconds: i64,
    decision: &'a Intent,
}

pub async fn run(a: ApprovalsArgs) -> CliResult {
    let now = match a.time {
        Some(t) => t,
        None => crate::context::clock_now().await?,
    };
    let store = store().await?;
    let rules: Vec<_> = store.list_rules().await?.into_iter().map(|r| r.rule).collect();
    let list = waiting(&store, &rules, now).await.map_err(CliError::from)?;
    let views: Vec<Waiting> = list
        .iter()
        .map(|i| Waiting {
            intent: format!("{}/{}", i.rule_id, i.offering.id),
            expires_at: expires_at(i),
            expires_in_seconds: (expires_at(i) - now).num_seconds(),
            decision: i,
        })
        .collect();
    if a.output.data(&views)? {
        return Ok(());
    }
    if views.is_empty() {
        println!("no approvals waiting");
        return Ok(());
    }
    println!(
        "{}",
        table::render(
            &columns(&table::currency(list.iter().map(|i| &i.offering.fee))),
            &rows(&views, now),
            a.output.layout()
        )
    );
    println!("{} approval(s) waiting; buy one with: capblock approve INTENT", views.len());
    Ok(())
}

/// The narrow set: the intent to copy, the block, its start, the fee (left out at 80 columns:
/// `approve` prints it before it asks) and how long it may still be approved; `-o wide` adds the
/// zone, the price per accelerator-hour and the expiry's time.
fn columns(currency: &str) -> [Column; 8] {
    [
        Column::whole("INTENT"),
        Column::text("BLOCK"),
        Column::whole("AZ").wide(),
        Column::text("START (UTC)"),
        Column::number(table::in_currency("FEE", currency)).spare(),
        Column::number(format!("{currency}/ACCEL-H")).wide(),
        Column::text("EXPIRES IN"),
        Column::text("EXPIRES (UTC)").wide(),
    ]
}

fn rows(views: &[Waiting], now: DateTime<Utc>) -> Vec<Vec<String>> {
    views
        .iter()
        .map(|v| {
            let o = &v.decision.offering;
            // Priced as `approve` prices it: with the accelerators the decision was made with.
            let mut catalog = AcceleratorCatalog::new();
            catalog.learn(o.instance_type.clone(), v.decision.accelerators_per_instance);
            let per_accel = Priced::new(o.clone(), &catalog)
                .map_or("-".into(), |p| format!("{:.4}", p.per_accelerator_hour.per_unit.round_dp(4)));
            vec![
                v.intent.clone(),
                format!("{} x {}", o.instance_count, o.instance_type),
                o.availability_zone.clone(),
                table::when(o.start),
                table::money(&o.fee),
                per_accel,
                brief(v.expires_at - now),
                table::when(v.expires_at),
            ]
        })
        .collect()
}
