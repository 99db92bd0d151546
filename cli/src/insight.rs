//! The read-and-decide commands: `blocks`, `history`, `backtest` and `approve`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use capblock_shared::app::outbox::flush;
use capblock_shared::app::purchase::{Action, Buyer};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::domain::backtest::{Sample, backtest};
use capblock_shared::domain::block::Block;
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::lifecycle::termination_time;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::names::{InstanceType, Region};
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::{
    BlockArchive, BlockStore, Ledger, Observation, ObservationStore, OfferingQuery, OfferingSource, RuleStore,
};
use chrono::{DateTime, Duration, Utc};
use clap::Args;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;

use crate::commands::{EXIT_FAILURE, EXIT_INVALID, EXIT_NOT_FOUND, load_rule, store};
use crate::{svg, table};

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// "2d 3h", "5h 10m", "12m".
pub fn span(d: Duration) -> String {
    let m = d.num_minutes().max(0);
    let (days, hours, mins) = (m / 1440, (m % 1440) / 60, m % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {mins}m")
    } else {
        format!("{mins}m")
    }
}

// ---------------------------------------------------------------------------------------------
// blocks
// ---------------------------------------------------------------------------------------------

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock blocks\n  capblock blocks --all --json\n  \
capblock blocks --time 2026-12-10T00:00:00Z   # as seen at a simulated market's time\n\n\
The next reminder is the first of termination time (end - 30 min, 60 for UltraServers) minus each \
lead time in CAPBLOCK_REMINDER_LEAD_MINUTES (default 1440,120,30) still ahead.\n\
Exit codes: 0 blocks listed, 1 store failure, 2 bad input, 3 no blocks.")]
pub struct BlocksArgs {
    /// Include blocks in final states (expired, payment-failed, released).
    #[arg(long)]
    all: bool,
    /// The instant to compute time left and reminders from (RFC 3339); default: now.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// Reminder lead times in minutes before termination time.
    #[arg(long, env = "CAPBLOCK_REMINDER_LEAD_MINUTES", value_delimiter = ',', default_value = "1440,120,30")]
    reminder_lead_minutes: Vec<i64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct BlockView<'a> {
    #[serde(flatten)]
    block: &'a Block,
    time_left: String,
    termination_time: DateTime<Utc>,
    next_reminder: Option<DateTime<Utc>>,
}

pub fn next_reminder(b: &Block, leads: &[i64], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if b.state.is_final() {
        return None;
    }
    let term = termination_time(b.end, b.ultraserver);
    leads.iter().map(|m| term - Duration::minutes(*m)).filter(|t| *t > now).min()
}

fn time_left(b: &Block, now: DateTime<Utc>) -> String {
    if b.state.is_final() || now >= b.end {
        "-".into()
    } else if now < b.start {
        format!("starts in {}", span(b.start - now))
    } else {
        format!("{} left", span(b.end - now))
    }
}

pub async fn blocks(a: BlocksArgs) -> Result<ExitCode, String> {
    let now = a.time.unwrap_or_else(Utc::now);
    let store = store().await?;
    let mut list =
        if a.all { store.all_blocks().await } else { store.open_blocks(None).await }.map_err(|e| e.to_string())?;
    list.sort_by(|x, y| x.start.cmp(&y.start).then(x.reservation_id.cmp(&y.reservation_id)));
    let views: Vec<BlockView> = list
        .iter()
        .map(|b| BlockView {
            block: b,
            time_left: time_left(b, now),
            termination_time: termination_time(b.end, b.ultraserver),
            next_reminder: next_reminder(b, &a.reminder_lead_minutes, now),
        })
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&views).map_err(|e| e.to_string())?);
    } else if views.is_empty() {
        eprintln!("no {}blocks", if a.all { "" } else { "open " });
    } else {
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
                    v.time_left.clone(),
                    v.next_reminder.map(when).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        println!(
            "{}",
            table::render(
                &[
                    "RESERVATION",
                    "RULE",
                    "REGION",
                    "BLOCK",
                    "STATE",
                    "PAY BY (UTC)",
                    "START (UTC)",
                    "END (UTC)",
                    "TIME LEFT",
                    "NEXT REMINDER"
                ],
                &rows
            )
        );
    }
    Ok(if views.is_empty() { ExitCode::from(EXIT_NOT_FOUND) } else { ExitCode::SUCCESS })
}

// ---------------------------------------------------------------------------------------------
// history
// ---------------------------------------------------------------------------------------------

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock history --region us-west-2 --type p5.48xlarge\n  \
capblock history --region us-east-1,us-west-2 --type p5.48xlarge --from 2026-12-01T00:00:00Z --json\n  \
capblock history --region us-east-1,us-west-2 --type p5.48xlarge --chart prices.svg --rule infra/examples/rules/p5-weekly.toml\n\n\
Prices come from the observations every scan stores (kept 400 days).\n\
Exit codes: 0 history printed, 1 store failure, 2 bad input (e.g. an invalid --rule), 3 no observations.")]
pub struct HistoryArgs {
    /// Regions, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    region: Vec<String>,
    /// Instance types, comma-separated.
    #[arg(long = "type", value_delimiter = ',', required = true)]
    instance_type: Vec<String>,
    /// Earliest observation (RFC 3339); default: everything kept.
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// Latest observation (RFC 3339); default: everything kept.
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// Also write an SVG chart of $/accelerator-hour over time (cheapest per scan) to this file.
    #[arg(long)]
    chart: Option<String>,
    /// A rule file whose threshold is drawn on the chart.
    #[arg(long)]
    rule: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct HistoryRow<'a> {
    seen_at: DateTime<Utc>,
    region: &'a Region,
    instance_type: &'a InstanceType,
    offering_id: &'a str,
    start: DateTime<Utc>,
    instance_count: u32,
    /// The block's length ("7 days", "30 h 35 min").
    length: String,
    fee: Money,
    #[serde(with = "rust_decimal::serde::str")]
    per_accelerator_hour: Decimal,
}

fn per_accel(o: &Observation) -> Option<Decimal> {
    o.offering.price_per_accelerator_hour(o.accelerators_per_instance).map(|r| r.per_unit)
}

fn bounds(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> (DateTime<Utc>, DateTime<Utc>) {
    let epoch = DateTime::<Utc>::from_timestamp(0, 0).expect("epoch");
    let far = DateTime::<Utc>::from_timestamp(4_102_444_800, 0).expect("2100");
    (from.unwrap_or(epoch), to.unwrap_or(far))
}

fn parse_pairs(regions: &[String], types: &[String]) -> Result<Vec<(Region, InstanceType)>, String> {
    let regions: Vec<Region> =
        regions.iter().map(|r| r.parse().map_err(|e| format!("--region: {e}"))).collect::<Result<_, _>>()?;
    let types: Vec<InstanceType> =
        types.iter().map(|t| t.parse().map_err(|e| format!("--type: {e}"))).collect::<Result<_, _>>()?;
    Ok(regions.iter().flat_map(|r| types.iter().map(move |t| (r.clone(), t.clone()))).collect())
}

pub async fn history(a: HistoryArgs) -> Result<ExitCode, String> {
    let pairs = match parse_pairs(&a.region, &a.instance_type) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let threshold = match a.rule.as_deref().map(load_rule).transpose() {
        Ok(r) => r.map(|r| (r.id.clone(), r.max_price_per_accelerator_hour)),
        Err(e) => {
            println!("{e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let (from, to) = bounds(a.from, a.to);
    let store = store().await?;
    let mut all: Vec<Observation> = Vec::new();
    for (r, t) in &pairs {
        all.extend(store.history(r, t, from, to).await.map_err(|e| e.to_string())?);
    }
    all.sort_by(|x, y| {
        x.seen_at.cmp(&y.seen_at).then(per_accel(x).cmp(&per_accel(y))).then(x.offering.id.cmp(&y.offering.id))
    });
    let rows: Vec<HistoryRow> = all
        .iter()
        .filter_map(|o| {
            Some(HistoryRow {
                seen_at: o.seen_at,
                region: &o.offering.region,
                instance_type: &o.offering.instance_type,
                offering_id: &o.offering.id,
                start: o.offering.start,
                instance_count: o.offering.instance_count,
                length: o.offering.length_text(),
                fee: o.offering.fee,
                per_accelerator_hour: per_accel(o)?,
            })
        })
        .collect();
    if let Some(path) = &a.chart {
        let mut series: BTreeMap<String, BTreeMap<DateTime<Utc>, f64>> = BTreeMap::new();
        for r in &rows {
            let v = r.per_accelerator_hour.to_f64().unwrap_or(0.0);
            let e =
                series.entry(format!("{} {}", r.region, r.instance_type)).or_default().entry(r.seen_at).or_insert(v);
            *e = e.min(v);
        }
        let threshold = threshold.as_ref().map(|(id, t)| (format!("rule {id}: {t}"), t.to_f64().unwrap_or(0.0)));
        let doc = svg::chart(
            "Cheapest $ per accelerator-hour seen per scan",
            &series.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect::<Vec<_>>(),
            threshold.as_ref().map(|(l, v)| (l.as_str(), *v)),
        );
        std::fs::write(path, doc).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("chart written to {path}");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
    } else if rows.is_empty() {
        eprintln!("no observations for {} between {} and {}", describe(&pairs), when(from), when(to));
    } else if a.chart.is_none() || rows.len() <= 200 {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    when(r.seen_at),
                    r.region.to_string(),
                    r.instance_type.to_string(),
                    when(r.start),
                    r.instance_count.to_string(),
                    r.length.clone(),
                    format!("{:.2}", r.fee.amount()),
                    format!("{:.4}", r.per_accelerator_hour),
                ]
            })
            .collect();
        println!(
            "{}",
            table::render(
                &["SEEN AT (UTC)", "REGION", "TYPE", "START (UTC)", "COUNT", "LENGTH", "FEE", "$/ACCEL-H"],
                &cells
            )
        );
        println!("{} observation(s)", rows.len());
    } else {
        println!(
            "{} observation(s) of {}; the chart has them (use --json for every row)",
            rows.len(),
            describe(&pairs)
        );
    }
    Ok(if rows.is_empty() { ExitCode::from(EXIT_NOT_FOUND) } else { ExitCode::SUCCESS })
}

fn describe(pairs: &[(Region, InstanceType)]) -> String {
    pairs.iter().map(|(r, t)| format!("{r} {t}")).collect::<Vec<_>>().join(", ")
}

// ---------------------------------------------------------------------------------------------
// backtest
// ---------------------------------------------------------------------------------------------

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
pub struct BacktestArgs {
    /// The rule file to test.
    #[arg(long)]
    rule: String,
    /// A JSON file with an array of observations, instead of the stored history.
    #[arg(long)]
    history: Option<String>,
    /// Earliest stored observation to use (RFC 3339).
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// Latest stored observation to use (RFC 3339).
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn backtest_cmd(a: BacktestArgs) -> Result<ExitCode, String> {
    let rule = match load_rule(&a.rule) {
        Ok(r) => r,
        Err(e) => {
            println!("{e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let observations: Vec<Observation> = match &a.history {
        Some(path) => {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{path}: {e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            };
            match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("{path}: not a JSON array of observations: {e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            }
        }
        None => {
            let (from, to) = bounds(a.from, a.to);
            let store = store().await?;
            let mut all = Vec::new();
            for r in &rule.regions {
                for t in &rule.instance_types {
                    all.extend(store.history(r, t, from, to).await.map_err(|e| e.to_string())?);
                }
            }
            all
        }
    };
    if observations.is_empty() {
        eprintln!("no price history for rule {:?}: nothing to replay", rule.id);
        return Ok(ExitCode::from(EXIT_NOT_FOUND));
    }
    let samples: Vec<Sample> = observations
        .into_iter()
        .map(|o| Sample {
            seen_at: o.seen_at,
            offering: o.offering,
            accelerators_per_instance: o.accelerators_per_instance,
        })
        .collect();
    let report = backtest(&rule, &samples);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
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
                    format!("{:.2}", b.fee.amount()),
                    format!("{:.4}", b.per_accelerator_hour.per_unit),
                ]
            })
            .collect();
        println!(
            "{}",
            table::render(
                &["BOUGHT AT (UTC)", "OFFERING", "REGION", "BLOCK", "START (UTC)", "LENGTH", "FEE", "$/ACCEL-H"],
                &rows
            )
        );
        println!("total {:.2} {}", report.total, rule.currency);
        for (month, spent) in &report.spent_by_month {
            println!("  {month}: {spent:.2} of {}", rule.monthly_budget);
        }
    }
    for h in &report.limited {
        println!("  {}: held back: {}", when(h.at), h.reason);
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// approve
// ---------------------------------------------------------------------------------------------

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock approve p5-weekly/cb-0123456789abcdef0\n  \
capblock approve p5-weekly/cb-0123456789abcdef0 --time 2026-12-03T01:00:00Z   # a simulated market's time\n\n\
Rules in mode = \"approval\" do not buy: the scan stores its decision and posts \"approval needed\" in \
Slack with the intent to approve. This command re-reads the offering, refuses if it is gone or its \
price rose above the rule's threshold, and otherwise buys it through the same exactly-once path as the \
scan (budgets reserved first, one PurchaseCapacityBlock, reconciliation by tag if the answer is lost).\n\
Exit codes: 0 bought, 1 AWS or store failure (or an unknown outcome, settled by the next scan), \
2 refused (offering gone, price rose, a limit or budget), 3 no such rule or decision.")]
pub struct ApproveArgs {
    /// The intent from the Slack message: <rule-id>/<offering-id>.
    intent: String,
    /// The clock's time, for a check only: approving buys, so it runs on the clock (the wall
    /// clock, or CAPBLOCK_SIMULATED_CLOCK_URL's) and a --time more than 5 minutes off it is refused.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// The stack name written to the purchase's capblock:stack tag.
    #[arg(long, env = "CAPBLOCK_STACK", default_value = "capblock")]
    stack: String,
    /// Account-wide monthly budget in USD (0: none).
    #[arg(long, env = "CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", default_value = "0")]
    account_budget: String,
}

fn refuse(msg: String) -> Result<ExitCode, String> {
    eprintln!("refused: {msg}; nothing bought");
    Ok(ExitCode::from(EXIT_INVALID))
}

pub async fn approve(a: ApproveArgs) -> Result<ExitCode, String> {
    let Some((rule_id, offering_id)) = a.intent.split_once('/') else {
        eprintln!("{:?} is not an intent: expected <rule-id>/<offering-id>, as in the Slack message", a.intent);
        return Ok(ExitCode::from(EXIT_INVALID));
    };
    let budget = Money::parse(&a.account_budget, "USD").map_err(|e| format!("--account-budget: {e}"))?;
    // Approving buys: the clock decides the budget month, never `--time`.
    let now = match crate::commands::run_now(a.time, true).await? {
        Ok(now) => now,
        Err(code) => return Ok(code),
    };
    let store = store().await?;
    let Some(stored) = store.get_rule(rule_id).await.map_err(|e| e.to_string())? else {
        eprintln!("no rule {rule_id:?}");
        return Ok(ExitCode::from(EXIT_NOT_FOUND));
    };
    let rule: Rule = stored.rule;
    let Some(intent) = store.get_approval(rule_id, offering_id).await.map_err(|e| e.to_string())? else {
        eprintln!("no decision awaiting approval for rule {rule_id:?} and offering {offering_id:?}");
        return Ok(ExitCode::from(EXIT_NOT_FOUND));
    };
    let o = &intent.offering;
    let sdk = capblock_shared::aws::load_config().await;
    let market = Ec2Market::new(sdk.clone());
    let q = OfferingQuery {
        region: o.region.clone(),
        instance_type: o.instance_type.clone(),
        instance_count: o.instance_count,
        // The question that found it: a same-day closest match (30 h 35 min) was found by a
        // one-day question, and EC2 only takes whole days here.
        duration_hours: rule.matching_days(o.total_minutes()).map_or(o.duration_hours, |d| d * 24),
        start_from: o.start - Duration::minutes(1),
        start_to: o.start + Duration::minutes(1),
    };
    let fresh = market.offerings(&q).await.map_err(|e| e.to_string())?.into_iter().find(|x| x.id == o.id);
    let Some(fresh) = fresh else {
        return refuse(format!("offering {} is no longer on sale", o.id));
    };
    let acc = intent.accelerators_per_instance;
    let (Some(per_acc), Some(was)) = (fresh.price_per_accelerator_hour(acc), o.price_per_accelerator_hour(acc)) else {
        return Err(format!("offering {} has no price per accelerator-hour", o.id));
    };
    if per_acc.per_unit > rule.max_price_per_accelerator_hour {
        return refuse(format!(
            "the price is {} per accelerator-hour (was {} when decided), above rule {}'s threshold {}",
            per_acc, was, rule.id, rule.max_price_per_accelerator_hour
        ));
    }
    let priced = Priced {
        per_instance_hour: fresh.price_per_instance_hour(),
        per_accelerator_hour: per_acc,
        accelerators_per_instance: acc,
        offering: fresh,
    };
    let buyer = Buyer {
        market: &market,
        store: &store,
        stack: &a.stack,
        account_budget: (!budget.amount().is_zero()).then_some(budget),
        recheck_pause: std::time::Duration::from_secs(4),
    };
    let action = buyer.live(&rule, &priced, now).await.map_err(|e| e.to_string())?;
    if let Ok(topic) = std::env::var("CAPBLOCK_ALERTS_TOPIC_ARN") {
        let notifier = SnsNotifier::new(aws_sdk_sns::Client::new(&sdk), topic, None);
        if let Err(e) = flush(&store, &notifier, now).await {
            eprintln!("warning: notices not published yet (the next scan publishes them): {e}");
        }
    }
    match action {
        Action::Bought { reservation_id, .. } => {
            println!(
                "bought {} x {} in {} for {} ({} per accelerator-hour): reservation {reservation_id}",
                priced.offering.instance_count,
                priced.offering.instance_type,
                priced.offering.availability_zone,
                priced.offering.fee,
                priced.per_accelerator_hour
            );
            Ok(ExitCode::SUCCESS)
        }
        Action::Refused { reason, .. } | Action::Skipped { reason } => refuse(reason),
        Action::Unknown { intent, reason } => {
            eprintln!("the purchase outcome is unknown ({reason}); the next scan settles intent {intent} by tag");
            Ok(ExitCode::from(EXIT_FAILURE))
        }
        other => Err(format!("unexpected outcome {other:?}")),
    }
}
