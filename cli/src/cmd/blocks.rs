//! `capblock blocks`: the blocks tracked, with time left and the next reminder.

use capblock_shared::domain::block::Block;
use capblock_shared::domain::checkpoint::DEFAULT_REMINDER_LEAD_MINUTES;
use capblock_shared::domain::lifecycle::termination_time;
use capblock_shared::ports::{BlockArchive, BlockStore};
use chrono::{DateTime, Duration, Utc};
use clap::Args;
use serde::Serialize;

use crate::context::{CliResult, store};
use crate::output::OutputArgs;
use capblock_shared::domain::duration::{brief, compact};

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
    time_left: String,
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

/// How long until the block starts, or is left of it; `say` prints the duration (the table's
/// countdown is `brief`, to fit 80 columns; `-o json|yaml` keep it to the minute).
fn time_left(b: &Block, now: DateTime<Utc>, say: fn(Duration) -> String) -> String {
    if b.state.is_final() || now >= b.end {
        "-".into()
    } else if now < b.start {
        format!("starts in {}", say(b.start - now))
    } else {
        format!("{} left", say(b.end - now))
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
            time_left: time_left(b, now, compact),
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
                time_left(b, now, brief),
                v.next_reminder.map(when).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    // The narrow set: which block, whose, what, its state and the time left; `-o wide` adds the
    // region, the payment deadline, the start, the end and the next reminder.
    let columns = [
        Column::whole("RESERVATION"),
        Column::text("RULE"),
        Column::whole("REGION").wide(),
        Column::text("BLOCK"),
        Column::whole("STATE"),
        Column::text("PAY BY (UTC)").wide(),
        Column::text("START (UTC)").wide(),
        Column::text("END (UTC)").wide(),
        Column::text("TIME LEFT"),
        Column::text("NEXT REMINDER (UTC)").wide(),
    ];
    println!("{}", table::render(&columns, &rows, a.output.layout()));
    Ok(())
}
