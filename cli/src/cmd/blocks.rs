//! `capblock blocks`: the blocks tracked, with time left and the next reminder.

use capblock_shared::domain::block::Block;
use capblock_shared::domain::checkpoint::DEFAULT_REMINDER_LEAD_MINUTES;
use capblock_shared::domain::lifecycle::{BlockState, termination_time};
use capblock_shared::ports::{BlockArchive, BlockStore};
use chrono::{DateTime, Duration, Utc};
use clap::Args;
use serde::Serialize;

use crate::context::{CliResult, store};
use crate::output::OutputArgs;
use capblock_shared::domain::duration::brief;

use crate::table::{self, Column, when};

#[derive(Args)]
#[command(
    after_help = "Examples:\n  capblock blocks\n  capblock blocks --all -o wide\n  capblock blocks --all --json\n  \
capblock blocks --time 2026-12-10T00:00:00Z   # as seen at a simulated market's time\n\n\
The next reminder is the first of termination time (end - 30 min, 60 for UltraServers) minus each \
lead time in CAPBLOCK_REMINDER_LEAD_MINUTES (default 1440,120,30) still ahead.\n\
Exit codes: 0 listed (an empty list says so), 1 store failure, 2 bad input."
)]
pub struct BlocksArgs {
    /// Include blocks in final states (expired, payment-failed, released).
    #[arg(long)]
    all: bool,
    /// The instant to compute time left and reminders from (RFC 3339); default: now.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// Reminder lead times in minutes before termination time.
    #[arg(long, env = "CAPBLOCK_REMINDER_LEAD_MINUTES", value_delimiter = ',', default_values_t = DEFAULT_REMINDER_LEAD_MINUTES)]
    reminder_lead_minutes: Vec<u32>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Serialize)]
struct BlockView<'a> {
    #[serde(flatten)]
    block: &'a Block,
    /// Seconds until the block starts (absent once it has): the table says "starts in 2d 4h".
    #[serde(skip_serializing_if = "Option::is_none")]
    starts_in_seconds: Option<i64>,
    /// Seconds until its end, while it is open: the table says "3h 12m left".
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds_left: Option<i64>,
    termination_time: DateTime<Utc>,
    next_reminder: Option<DateTime<Utc>>,
}

fn next_reminder(b: &Block, leads: &[u32], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if b.state.is_final() {
        return None;
    }
    let term = termination_time(b.end, b.ultraserver);
    leads.iter().map(|m| term - Duration::minutes(i64::from(*m))).filter(|t| *t > now).min()
}

/// How long until the block starts, or is left of it, for the table (`-o json|yaml` say it in
/// seconds); `say` prints the duration (`brief`, to fit 80 columns).
fn time_left(b: &Block, now: DateTime<Utc>, say: fn(Duration) -> String) -> String {
    if b.state.is_final() || now >= b.end {
        "-".into()
    } else if now < b.start {
        format!("starts in {}", say(b.start - now))
    } else {
        format!("{} left", say(b.end - now))
    }
}

/// The narrow table's countdown: for a block whose payment EC2 still waits for, the time left to
/// pay (the narrow set has no PAY BY column: a payment missed loses the block, so it is what a
/// person must read first); for any other, `time_left`.
fn narrow_time_left(b: &Block, now: DateTime<Utc>) -> String {
    match (b.state, b.payment_deadline) {
        (BlockState::PaymentPending, Some(by)) if now < by => format!("pay within {}", brief(by - now)),
        (BlockState::PaymentPending, Some(_)) => "payment overdue".into(),
        _ => time_left(b, now, brief),
    }
}

pub async fn run(a: BlocksArgs) -> CliResult {
    let now = match a.time {
        Some(t) => t,
        None => crate::context::clock_now().await?,
    };
    let store = store().await?;
    let mut list = if a.all { store.all_blocks().await } else { store.open_blocks(None).await }?;
    list.sort_by(|x, y| x.start.cmp(&y.start).then(x.reservation_id.cmp(&y.reservation_id)));
    let views: Vec<BlockView> = list
        .iter()
        .map(|b| BlockView {
            block: b,
            starts_in_seconds: (!b.state.is_final() && now < b.start).then(|| (b.start - now).num_seconds()),
            seconds_left: (!b.state.is_final() && now < b.end).then(|| (b.end - now).num_seconds()),
            termination_time: termination_time(b.end, b.ultraserver),
            next_reminder: next_reminder(b, &a.reminder_lead_minutes, now),
        })
        .collect();
    if a.output.data(&views)? {
        return Ok(());
    }
    if views.is_empty() {
        println!("no {}blocks", if a.all { "" } else { "open " });
        return Ok(());
    }
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            let b = v.block;
            vec![
                b.reservation_id.clone(),
                b.rule_id.clone().unwrap_or_else(|| "(adopted)".into()),
                b.region.to_string(),
                format!("{} x {}", b.instance_count, b.instance_type),
                b.state.as_str().into(),
                b.payment_deadline.map(when).unwrap_or_else(|| "-".into()),
                when(b.start),
                when(b.end),
                narrow_time_left(b, now),
                time_left(b, now, brief),
                v.next_reminder.map(when).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    // The narrow set: which block, whose, what, its state and the time left (to pay, while EC2
    // waits for the payment); `-o wide` adds the region, the payment deadline, the start, the end
    // and the next reminder.
    let columns = [
        Column::whole("RESERVATION"),
        Column::text("RULE"),
        Column::whole("REGION").wide(),
        Column::text("BLOCK"),
        Column::whole("STATE"),
        Column::text("PAY BY (UTC)").wide(),
        Column::text("START (UTC)").wide(),
        Column::text("END (UTC)").wide(),
        Column::text("TIME LEFT").narrow(),
        Column::text("TIME LEFT").wide(),
        Column::text("NEXT REMINDER (UTC)").wide(),
    ];
    println!("{}", table::render(&columns, &rows, a.output.layout()));
    Ok(())
}
