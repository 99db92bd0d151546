//! The commands. Exit codes: 0 success, 1 a failure talking to AWS, 2 bad input (usage, an
//! invalid rule file), 3 nothing found where something was asked for.

use std::process::ExitCode;
use std::sync::Mutex;

use capblock_shared::app::fan_out::{Answer, Pacing, Strikes, ask_all};
use capblock_shared::app::scan::{ScanSettings, Scanner};
use capblock_shared::app::settings::StackSettings;
use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::decision::{Priced, better};
use capblock_shared::domain::money::Money;
use capblock_shared::domain::names::{InstanceType, Region};
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::rule::{Mode, Rule, RuleSpec};
use capblock_shared::ports::{InstanceTypeSource, OfferingQuery, RuleStore};
use chrono::{DateTime, Duration, Utc};
use clap::{Args, Parser, Subcommand};

use crate::table;

pub const EXIT_FAILURE: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_NOT_FOUND: u8 = 3;

#[derive(Parser)]
#[command(
    name = "capblock",
    version,
    about = "Operate capblock: search the Capacity Blocks market, manage purchase rules, run a scan.",
    long_about = "Operate capblock: search the EC2 Capacity Blocks market, manage purchase rules and run a \
scan by hand.\n\nIt uses the standard AWS configuration (profile, region, credentials) and the same \
endpoint settings as the functions: AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_DYNAMODB, ... point it at a \
local stack (see `infra/local/stack.sh env`). Commands that use the store need CAPBLOCK_TABLE.\n\n\
Exit codes: 0 success, 1 AWS or store failure, 2 bad input (usage, invalid rule), 3 nothing found.",
    after_help = "Examples:\n  capblock offerings --types p5.48xlarge --counts 1,2 --days 1-7 --regions us-east-1,us-west-2\n  \
capblock rules validate infra/examples/rules/p5-weekly.toml\n  capblock rules put infra/examples/rules/*.toml\n  \
capblock rules delete p5-weekly\n  \
capblock scan --time 2026-12-03T00:00:00Z\n  capblock blocks --all\n  \
capblock history --region us-west-2 --type p5.48xlarge --chart prices.svg --rule infra/examples/rules/p5-weekly.toml\n  \
capblock backtest --rule infra/examples/rules/p5-weekly.toml\n  capblock approve p5-weekly/cb-0123456789abcdef0"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Search the market now: every region x type x count x duration, cheapest per accelerator-hour first.
    Offerings(OfferingsArgs),
    /// Validate, store and list purchase rules (TOML files; see README "Rules").
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Run one scan-and-buy pass exactly as the scan-offerings function does, and print it.
    Scan(ScanArgs),
    /// List blocks: state, payment deadline, start, end, time left, next reminder.
    Blocks(crate::insight::BlocksArgs),
    /// Price history from the observations every scan stores; optionally an SVG chart.
    History(crate::insight::HistoryArgs),
    /// Replay a rule over a price history: what it would have bought, when, at what price.
    Backtest(crate::insight::BacktestArgs),
    /// Buy a decision an approval-mode rule is waiting on (re-checks the offering first).
    Approve(crate::insight::ApproveArgs),
}

// Every argument is parsed by clap, so a bad one is a usage error: exit 2 with the argument
// named, before anything is asked.
#[derive(Args)]
struct OfferingsArgs {
    /// Instance types, comma-separated (e.g. p5.48xlarge,p5e.48xlarge).
    #[arg(long, value_delimiter = ',', required = true)]
    types: Vec<InstanceType>,
    /// Instance counts, comma-separated (1-64).
    #[arg(long, value_delimiter = ',', default_value = "1",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(capblock_shared::domain::rule::MAX_INSTANCES_PER_BLOCK)))]
    counts: Vec<u32>,
    /// Durations in days EC2 sells (1-14, then multiples of 7 up to 182): a list (1,2,7) or a
    /// range (1-7, keeping the sellable ones).
    #[arg(long, default_value = "1", value_parser = parse_days)]
    days: Days,
    /// Regions, comma-separated.
    #[arg(long, value_delimiter = ',', env = "AWS_REGION", required = true)]
    regions: Vec<Region>,
    /// Earliest start (RFC 3339); default: now.
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// Latest start (RFC 3339); default: 8 weeks after --from.
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    describe: DescribeArgs,
}

/// EC2's describe limit, and how much of it to take. DescribeCapacityBlockOfferings is limited
/// per account and region (about one call every 2-4 s, a burst of 2), shared with everyone in
/// the account: searches go out one at a time per region, `refill / share` apart.
#[derive(Args, Clone)]
pub struct DescribeArgs {
    /// Seconds EC2 takes to refill one DescribeCapacityBlockOfferings call per region.
    #[arg(long, env = "CAPBLOCK_DESCRIBE_REFILL_SECONDS", default_value_t = 4.0)]
    refill_seconds: f64,
    /// The share of that refill to use (0-1]; the rest is left to others in the account.
    #[arg(long, env = "CAPBLOCK_DESCRIBE_SHARE", default_value_t = 0.5)]
    share: f64,
}

impl DescribeArgs {
    /// The budget, asking for at most `ask_for`.
    pub fn budget(&self, ask_for: std::time::Duration) -> Result<DescribeBudget, String> {
        let refill = std::time::Duration::try_from_secs_f64(self.refill_seconds)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("--refill-seconds {}: expected a positive number", self.refill_seconds))?;
        let b = DescribeBudget { refill, share: self.share, ask_for };
        b.validate().map_err(|e| format!("--share: {e}"))?;
        Ok(b)
    }
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Check rule files and print every problem with its field; exit 2 if any is invalid.
    Validate { files: Vec<String> },
    /// Validate and store rule files (creates or replaces, with a version check).
    Put { files: Vec<String> },
    /// List stored rules.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one stored rule.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Enable a stored rule.
    Enable { id: String },
    /// Disable a stored rule (the scan skips it).
    Disable { id: String },
    /// Delete a stored rule. Only the rule goes: its blocks are still tracked to their end, its
    /// purchase intents settled and its budgets kept (a rule put again under the same id finds
    /// this month's spending and purchases as they were). To stop it for a while, `disable` it.
    Delete { id: String },
}

#[derive(Args)]
struct ScanArgs {
    /// The instant to scan as (RFC 3339); default: the clock. A dry-run scan may replay another time;
    /// a live one runs on the clock (budget months guard money) and refuses a --time 5+ minutes off it.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// The stack mode: dry-run (default) never buys; live buys for live rules.
    #[arg(long, env = "CAPBLOCK_MODE", default_value = "dry-run")]
    mode: Mode,
    /// The stack name written to purchases' capblock:stack tag.
    #[arg(long, env = "CAPBLOCK_STACK", default_value = "capblock")]
    stack: String,
    #[command(flatten)]
    describe: DescribeArgs,
    /// Seconds of asking per scan; questions not reached wait for the next scan.
    #[arg(long, env = "CAPBLOCK_ASK_SECONDS", default_value_t = 40.0)]
    ask_seconds: f64,
    /// Account-wide monthly budget in USD (0: none).
    #[arg(long, env = "CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", default_value = "0")]
    account_budget: String,
    /// Print the full report as JSON.
    #[arg(long)]
    json: bool,
}

/// `--days`, parsed: durations EC2 sells.
#[derive(Debug, Clone, PartialEq)]
struct Days(Vec<u32>);

fn parse_days(s: &str) -> Result<Days, String> {
    use capblock_shared::domain::rule::is_sellable_duration_days as sellable;
    const SOLD: &str = "EC2 sells 1-14 days, then multiples of 7 up to 182";
    let number = |d: &str| d.trim().parse::<u32>().map_err(|_| format!("{d:?} is not a number of days"));
    let days: Vec<u32> = if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (number(a)?, number(b)?);
        if a == 0 || b < a || b > 182 {
            return Err(format!("{s:?} is not a range of days within 1-182"));
        }
        (a..=b).filter(|d| sellable(i64::from(*d))).collect()
    } else {
        let days = s.split(',').map(number).collect::<Result<Vec<u32>, _>>()?;
        if let Some(d) = days.iter().find(|d| !sellable(i64::from(**d))) {
            return Err(format!("{d} days is not a duration EC2 sells ({SOLD})"));
        }
        days
    };
    if days.is_empty() {
        return Err(format!("{s:?} holds no duration EC2 sells ({SOLD})"));
    }
    Ok(Days(days))
}

pub async fn store() -> Result<DynamoStore, String> {
    let table = std::env::var("CAPBLOCK_TABLE")
        .map_err(|_| "CAPBLOCK_TABLE is not set (the DynamoDB table of your capblock stack)".to_string())?;
    let sdk = capblock_shared::aws::load_config().await;
    Ok(DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), table))
}

pub async fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Offerings(a) => offerings(a).await,
        Command::Rules(r) => rules(r).await,
        Command::Scan(a) => scan(a).await,
        Command::Blocks(a) => crate::insight::blocks(a).await,
        Command::History(a) => crate::insight::history(a).await,
        Command::Backtest(a) => crate::insight::backtest_cmd(a).await,
        Command::Approve(a) => crate::insight::approve(a).await,
    }
}

fn money_cell(m: &Money) -> String {
    format!("{:.2}", m.amount())
}

pub fn offering_rows(list: &[Priced]) -> Vec<Vec<String>> {
    list.iter()
        .map(|p| {
            let o = &p.offering;
            vec![
                o.region.to_string(),
                o.availability_zone.clone(),
                o.instance_type.to_string(),
                o.instance_count.to_string(),
                o.start.format("%Y-%m-%d %H:%M").to_string(),
                o.end.format("%Y-%m-%d %H:%M").to_string(),
                o.length_text(),
                format!("{} {}", money_cell(&o.fee), o.fee.currency()),
                format!("{:.4}", p.per_instance_hour.per_unit),
                format!("{:.4}", p.per_accelerator_hour.per_unit),
            ]
        })
        .collect()
}

pub const OFFERING_HEADERS: [&str; 10] =
    ["REGION", "AZ", "TYPE", "COUNT", "START (UTC)", "END (UTC)", "LENGTH", "FEE", "$/INSTANCE-H", "$/ACCEL-H"];

async fn offerings(a: OfferingsArgs) -> Result<ExitCode, String> {
    let (regions, types, Days(days)) = (a.regions, a.types, a.days);
    let from = a.from.unwrap_or_else(Utc::now);
    let to = a.to.unwrap_or_else(|| from.checked_add_signed(Duration::weeks(8)).unwrap_or(DateTime::<Utc>::MAX_UTC));
    let mut queries = Vec::new();
    for r in &regions {
        for t in &types {
            for &c in &a.counts {
                for &d in &days {
                    queries.push(OfferingQuery {
                        region: r.clone(),
                        instance_type: t.clone(),
                        instance_count: c,
                        duration_hours: d * 24,
                        start_from: from,
                        start_to: to,
                    });
                }
            }
        }
    }
    let sdk = capblock_shared::aws::load_config().await;
    let market = Ec2Market::new(sdk);
    let mut catalog = AcceleratorCatalog::new();
    if let Some(r) = regions.first()
        && let Ok(found) = market.accelerators(r, &types).await
    {
        for (t, n) in found {
            catalog.learn(t, n);
        }
    }
    // A person waits for every answer (an hour at most), at the scan's pace.
    let budget = a.describe.budget(std::time::Duration::from_secs(3600))?;
    let per_region = queries.len().div_ceil(regions.len().max(1));
    if !a.json && per_region > 1 {
        eprintln!(
            "asking {} question(s), one every {:.0} s per region (EC2's describe limit at a {:.0} % share): about {:.0} s",
            queries.len(),
            budget.pace().as_secs_f64(),
            budget.share * 100.0,
            (per_region - 1) as f64 * budget.pace().as_secs_f64()
        );
    }
    let progress = crate::progress::Progress::new(queries.len(), a.json);
    let asked = ask_all(&market, &queries, &Pacing::from(&budget), &Strikes::new(), || progress.tick()).await;
    progress.finish();
    let mut priced = Vec::new();
    let mut failures = Vec::new();
    for (q, ans) in queries.iter().zip(asked.answers) {
        let what = format!("{} {} x{} {}d", q.region, q.instance_type, q.instance_count, q.duration_hours / 24);
        match ans {
            Answer::Offerings(list) => priced.extend(list.into_iter().filter_map(|o| Priced::new(o, &catalog))),
            Answer::CarriedOver => failures.push(format!("{what}: still throttled by EC2's describe limit; try again later")),
            Answer::QuotaZero => failures.push(format!(
                "{what}: EC2 answered CapacityBlockDescribeLimitExceeded every time: the account's Capacity Block quota for {} looks like 0",
                capblock_shared::domain::plan::family(q.instance_type.as_str())
            )),
            Answer::NotSold(m) => failures.push(format!("{what}: not sold here: {m}")),
            Answer::Unsupported => failures.push(format!("{what}: the region does not sell Capacity Blocks")),
            Answer::Failed(e) => failures.push(format!("{what}: {e}")),
        }
    }
    priced.sort_by(better);
    priced.dedup_by(|a, b| a.offering.id == b.offering.id);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"offerings": priced, "failures": failures}))
                .map_err(|e| e.to_string())?
        );
    } else {
        println!("{}", table::render(&OFFERING_HEADERS, &offering_rows(&priced)));
        println!("{} offering(s) from {} question(s)", priced.len(), queries.len());
        for f in &failures {
            eprintln!("warning: {f}");
        }
    }
    Ok(if priced.is_empty() { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

/// The instant a scan or an approval runs at: a live one on the clock (the wall clock, or a
/// simulator's through CAPBLOCK_SIMULATED_CLOCK_URL), never on `--time` more than a few minutes
/// off it (budget months and waits guard money); a dry run at `--time` if given. The inner
/// `Err` is the exit code for a refused `--time`, after saying why.
pub async fn run_now(time: Option<DateTime<Utc>>, live: bool) -> Result<Result<DateTime<Utc>, ExitCode>, String> {
    use capblock_shared::lambda::{TimeSource, run_time};
    let source = TimeSource::from_env().map_err(|e| e.to_string())?;
    let clock_now = source.now(&capblock_shared::ports::SystemClock).await.map_err(|e| e.to_string())?;
    Ok(run_time(time, clock_now, live).map_err(|e| {
        eprintln!("--time: {e}");
        ExitCode::from(EXIT_INVALID)
    }))
}

pub fn load_rule(path: &str) -> Result<Rule, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    RuleSpec::from_toml(&text).and_then(|s| s.validate(Utc::now())).map_err(|e| format!("{path}: {e}"))
}

async fn rules(cmd: RulesCommand) -> Result<ExitCode, String> {
    match cmd {
        RulesCommand::Validate { files } => {
            let mut bad = 0;
            for f in &files {
                match load_rule(f) {
                    Ok(r) => println!(
                        "{f}: ok (rule {:?}, mode {}, {} question(s) per scan)",
                        r.id,
                        r.mode.as_str(),
                        r.regions.len() * r.instance_types.len() * r.instance_counts.len() * r.durations_days.len()
                    ),
                    Err(e) => {
                        bad += 1;
                        println!("{e}");
                    }
                }
            }
            Ok(if bad > 0 { ExitCode::from(EXIT_INVALID) } else { ExitCode::SUCCESS })
        }
        RulesCommand::Put { files } => {
            let rules: Vec<Rule> = match files.iter().map(|f| load_rule(f)).collect::<Result<_, _>>() {
                Ok(r) => r,
                Err(e) => {
                    println!("{e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            };
            let store = store().await?;
            for r in rules {
                let current = store.get_rule(&r.id).await.map_err(|e| e.to_string())?;
                let v = store
                    .put_rule(&r, Some(current.map(|c| c.version).unwrap_or(0)))
                    .await
                    .map_err(|e| e.to_string())?;
                println!(
                    "stored rule {:?} (version {v}, mode {}, {})",
                    r.id,
                    r.mode.as_str(),
                    if r.enabled { "enabled" } else { "disabled" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        RulesCommand::List { json } => {
            let list = store().await?.list_rules().await.map_err(|e| e.to_string())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?);
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|s| {
                        let r = &s.rule;
                        vec![
                            r.id.clone(),
                            if r.enabled { "yes" } else { "no" }.into(),
                            r.mode.as_str().into(),
                            r.instance_types.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","),
                            r.regions.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","),
                            format!("{}", r.max_price_per_accelerator_hour),
                            money_cell(&r.monthly_budget),
                            s.version.to_string(),
                        ]
                    })
                    .collect();
                println!(
                    "{}",
                    table::render(
                        &["ID", "ENABLED", "MODE", "TYPES", "REGIONS", "MAX $/ACCEL-H", "BUDGET/MONTH", "VERSION"],
                        &rows
                    )
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        RulesCommand::Show { id, json } => {
            let Some(s) = store().await?.get_rule(&id).await.map_err(|e| e.to_string())? else {
                eprintln!("no rule {id:?}");
                return Ok(ExitCode::from(3));
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?);
            } else {
                println!("{:#?}", s.rule);
                println!("version {}", s.version);
            }
            Ok(ExitCode::SUCCESS)
        }
        RulesCommand::Enable { id } => set_enabled(&id, true).await,
        RulesCommand::Disable { id } => set_enabled(&id, false).await,
        RulesCommand::Delete { id } => {
            if store().await?.delete_rule(&id).await.map_err(|e| e.to_string())? {
                println!("deleted rule {id:?}; its blocks, intents and budgets are kept");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("no rule {id:?}");
                Ok(ExitCode::from(EXIT_NOT_FOUND))
            }
        }
    }
}

async fn set_enabled(id: &str, enabled: bool) -> Result<ExitCode, String> {
    let store = store().await?;
    let Some(mut s) = store.get_rule(id).await.map_err(|e| e.to_string())? else {
        eprintln!("no rule {id:?}");
        return Ok(ExitCode::from(3));
    };
    s.rule.enabled = enabled;
    let v = store.put_rule(&s.rule, Some(s.version)).await.map_err(|e| e.to_string())?;
    println!("rule {id:?} {} (version {v})", if enabled { "enabled" } else { "disabled" });
    Ok(ExitCode::SUCCESS)
}

async fn scan(a: ScanArgs) -> Result<ExitCode, String> {
    let budget = Money::parse(&a.account_budget, "USD").map_err(|e| format!("--account-budget: {e}"))?;
    let settings = ScanSettings {
        stack: StackSettings {
            name: a.stack,
            mode: a.mode,
            account_budget: (!budget.amount().is_zero()).then_some(budget),
        },
        describe: a.describe.budget(
            std::time::Duration::try_from_secs_f64(a.ask_seconds)
                .map_err(|_| format!("--ask-seconds {}: expected a positive number", a.ask_seconds))?,
        )?,
    };
    let store = store().await?;
    let sdk = capblock_shared::aws::load_config().await;
    let market = Ec2Market::new(sdk.clone());
    let alerts =
        std::env::var("CAPBLOCK_ALERTS_TOPIC_ARN").map_err(|_| "CAPBLOCK_ALERTS_TOPIC_ARN is not set".to_string())?;
    let notifier = SnsNotifier::new(aws_sdk_sns::Client::new(&sdk), alerts, None);
    let catalog = Mutex::new(AcceleratorCatalog::new());
    let scanner =
        Scanner { market: &market, store: &store, notifier: &notifier, catalog: &catalog, settings: &settings };
    let now = match run_now(a.time, a.mode == Mode::Live).await? {
        Ok(now) => now,
        Err(code) => return Ok(code),
    };
    let report = scanner.run(now).await.map_err(|e| e.to_string())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "scan at {}: {} rule(s), {} question(s), {} answered this run, {} offering(s) seen, {} price observation(s) stored, stack mode {}",
        report.now.format("%Y-%m-%d %H:%M UTC"),
        report.rules,
        report.queries,
        report.answered,
        report.offerings_seen,
        report.observations_written,
        settings.stack.mode.as_str()
    );
    for (r, q) in &report.regions {
        println!(
            "  {r}: {} question(s), {} asked, {} answered, {} carried over; every question is asked within {} scan(s)",
            q.questions, q.planned, q.answered, q.carried_over, q.full_cycle_runs
        );
    }
    for x in &report.quota_zero {
        println!("  {x}: EC2 refuses every search: the Capacity Block quota looks like 0 (alerted once)");
    }
    for x in &report.not_sold {
        println!("  {x}: not sold as Capacity Blocks there (asked again tomorrow)");
    }
    for r in &report.unsupported_regions {
        println!("  {r}: does not sell Capacity Blocks");
    }
    for (r, e) in &report.failed_regions {
        println!("  {r}: FAILED this scan: {e}");
    }
    if !report.skipped_rules.is_empty() {
        println!(
            "  SKIPPED rule(s) {}: the scan's questions would pass {}; disable or narrow some rules",
            report.skipped_rules.join(", "),
            capblock_shared::app::scan::MAX_QUESTIONS_PER_SCAN
        );
    }
    for s in &report.settled {
        println!("  settled: {}", serde_json::to_string(s).unwrap_or_default());
    }
    for o in &report.outcomes {
        println!(
            "\nrule {} (mode {}): {} of {} question(s) answered, {} offering(s), {} eligible",
            o.rule_id,
            o.mode.as_str(),
            o.questions_answered,
            o.questions,
            o.offerings_seen,
            o.eligible
        );
        match &o.chosen {
            None => println!("  decision: nothing meets the rule"),
            Some(p) => {
                println!(
                    "  decision: {} ({} per accelerator-hour, {})",
                    p.offering.id, p.per_accelerator_hour, p.offering.fee
                );
                println!("{}", indent(&table::render(&OFFERING_HEADERS, &offering_rows(std::slice::from_ref(p)))));
            }
        }
        if let Some(action) = &o.action {
            println!("  action: {}", serde_json::to_string(action).unwrap_or_default());
        }
    }
    println!("\nnotices published: {}", report.notices.published);
    Ok(ExitCode::SUCCESS)
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_ranges_keep_sellable_durations() {
        assert_eq!(parse_days("1-3").unwrap().0, vec![1, 2, 3]);
        assert_eq!(parse_days("13-21").unwrap().0, vec![13, 14, 21]);
        assert_eq!(parse_days("1,7").unwrap().0, vec![1, 7]);
        assert!(parse_days("3-1").is_err());
        assert!(parse_days("x").is_err());
        // Durations EC2 does not sell, and ranges that would take forever to walk.
        for bad in ["0", "15", "1,183", "4294967295", "1-4294967295", "15-20", ""] {
            assert!(parse_days(bad).is_err(), "{bad}");
        }
    }

    /// Bad offerings arguments are usage errors (exit 2, clap's code), named, before any call.
    #[test]
    fn bad_offerings_arguments_are_usage_errors() {
        use clap::Parser;
        let args = |extra: &[&str]| {
            let mut v = vec!["capblock", "offerings", "--types", "p5.48xlarge", "--regions", "us-east-1"];
            v.extend_from_slice(extra);
            Cli::try_parse_from(v)
        };
        assert!(args(&["--counts", "1,64", "--days", "1-7"]).is_ok());
        for (bad, named) in [
            (vec!["--counts", "4294967295"], "--counts"),
            (vec!["--counts", "0"], "--counts"),
            (vec!["--counts", "65"], "--counts"),
            (vec!["--days", "x"], "--days"),
            (vec!["--days", "0-3"], "--days"),
            (vec!["--days", "15"], "--days"),
            (vec!["--regions", "mars"], "--regions"),
            (vec!["--types", "p5"], "--types"),
        ] {
            let Err(e) = args(&bad) else { panic!("{bad:?} accepted") };
            assert_eq!(e.exit_code(), i32::from(EXIT_INVALID), "{bad:?}");
            assert!(e.to_string().contains(named), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
