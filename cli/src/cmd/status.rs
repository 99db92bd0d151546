//! `capblock status`: one screen for the operator: the stack's mode, its rules, who approves
//! people's requests, its blocks, this month's spend against the budgets, the last scan, and
//! where the dashboard is.

use std::collections::{BTreeMap, BTreeSet};

use capblock_shared::app::report::month;
use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::alarm::{AlarmState, AlarmValue};
use capblock_shared::domain::budget::{BudgetOwner, BudgetUsage, Period};
use capblock_shared::domain::money::{Currency, Money};
use capblock_shared::domain::plan::Coverage;
use capblock_shared::domain::preflight::Verdict;
use capblock_shared::domain::request::{TeamApproval, team_approval_problems};
use capblock_shared::domain::stack::StoredSettings;
use capblock_shared::ports::{AlarmStore, BlockStore, Ledger, MarketMemory, PreflightStore, RuleStore, StoredRule};
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Serialize;

use crate::context::{CliError, CliResult, sdk, store, stored_settings, team_approvals};
use crate::output::OutputArgs;
use crate::table::{self, Column, Layout, safe, when_utc};

#[derive(Args)]
#[command(
    after_help = "Examples:\n  capblock status\n  capblock status --time 2026-12-10T00:00:00Z\n  capblock status -o json | jq '.spend[] | select(.kind == \"rule\")'\n\n\
The dashboard URL is the stack output DashboardUrl (the dashboard is named after the stack, in the \
SDK's region). The alarms in ALARM are those whose last state-change event (kept by \
on-capacity-event) said so.\n\
Exit codes: 0 printed, 1 store failure."
)]
pub struct StatusArgs {
    /// The instant whose month's spend to show (RFC 3339); default: now.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// Also print the watch of each region: how many questions the rules ask there, how long
    /// ago they were answered, the learned pace and the refusals others likely met.
    #[arg(long, short = 'v')]
    verbose: bool,
    #[command(flatten)]
    output: OutputArgs,
}

/// The stack output DashboardUrl, built the same way as in template.yaml.
pub fn dashboard_url(stack: &str, region: &str) -> String {
    format!("https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards:name={stack}")
}

/// What `status` shows, as `-o json|yaml` prints it.
#[derive(Serialize)]
struct Status {
    /// The instant looked at (`--time`, else the clock).
    at: DateTime<Utc>,
    /// The stack's settings as its functions stored them; none: no function has run yet.
    settings: Option<StoredSettings>,
    /// Each team's approval settings for people's requests (the deployed stack's TeamApprovals).
    team_approvals: BTreeMap<String, TeamApproval>,
    rules: usize,
    rules_enabled: usize,
    /// Open blocks by state.
    blocks: BTreeMap<&'static str, usize>,
    /// The budget month (UTC), and each budget's spend in it.
    month: String,
    spend: Vec<Spend>,
    /// When a question of an enabled rule was last answered.
    last_scan_answered: Option<DateTime<Utc>>,
    /// Each region the enabled rules ask, as the last scan that asked it left it (`watch` in
    /// the JSON, its name since `status --json` began).
    #[serde(rename = "watch")]
    coverage: Vec<RegionCoverage>,
    preflight: Option<PreflightSummary>,
    dashboard: String,
    /// The stack's alarms whose last state-change event said ALARM.
    alarms_in_alarm: Vec<AlarmState>,
}

/// One budget's month: the account's, a team's, a rule's (a deleted rule's keeps its row).
#[derive(Serialize)]
struct Spend {
    /// `account`, `team`, `rule` or `deleted-rule`.
    kind: &'static str,
    /// The team or rule; empty for the account.
    name: String,
    /// As the table's first column says it.
    label: String,
    spent: Money,
    committed: Money,
    purchases: u32,
    /// None: no cap (the account) or none left to show (a deleted rule).
    limit: Option<Money>,
}

#[derive(Serialize)]
struct RegionCoverage {
    region: String,
    /// None: not asked yet (`watch` in the JSON).
    #[serde(rename = "watch")]
    coverage: Option<Coverage>,
}

#[derive(Serialize)]
struct PreflightSummary {
    at: DateTime<Utc>,
    passed: bool,
    ok: usize,
    warn: usize,
    failed: usize,
    not_checked: usize,
}

impl Spend {
    fn new(kind: &'static str, name: &str, label: String, u: Option<BudgetUsage>, limit: Option<Money>) -> Spend {
        let zero = Money::zero(limit.map_or(Currency::USD, |l| l.currency()));
        Spend {
            kind,
            name: name.to_string(),
            label,
            spent: u.as_ref().map_or(zero, |u| u.spent),
            committed: u.as_ref().map_or(zero, |u| u.committed),
            purchases: u.map_or(0, |u| u.purchases),
            limit,
        }
    }
}

pub async fn run(a: StatusArgs) -> CliResult {
    let now = match a.time {
        Some(t) => t,
        None => crate::context::clock_now().await?,
    };
    let status = gather(now).await?;
    if a.output.data(&status)? {
        return Ok(());
    }
    print(&status, a.verbose, a.output.layout());
    Ok(())
}

/// Everything `status` shows, read from the stack's table.
async fn gather(now: DateTime<Utc>) -> Result<Status, CliError> {
    let store = store().await?;
    // The stack's settings as its functions stored them; none yet: said so.
    let stored = stored_settings(&store).await?;
    let account = stored.as_ref().and_then(|s| s.stack.account_budget);
    let rules = store.list_rules().await?;
    let blocks = store.open_blocks(None).await?;
    let period = Period::budget_month(now);

    let mut by_state: BTreeMap<&'static str, usize> = BTreeMap::new();
    for b in &blocks {
        *by_state.entry(b.state.as_str()).or_default() += 1;
    }

    let teams = stored.as_ref().map(|s| s.stack.team_budgets.clone()).unwrap_or_default();
    let spend = spend(&store, account, &teams, &rules, &period).await?;
    let (last, coverage) = coverage(&store, &rules).await?;
    let preflight = store.last_preflight().await?.map(|p| PreflightSummary {
        at: p.at,
        passed: p.passed(),
        ok: p.count(Verdict::Ok),
        warn: p.count(Verdict::Warn),
        failed: p.count(Verdict::Fail),
        not_checked: p.count(Verdict::NotChecked),
    });

    let region = sdk().await.region().map_or_else(|| "us-east-1".to_string(), |r| r.to_string());
    // Without stored settings, the name the template gives a stack by default.
    let name = stored.as_ref().map_or("capblock", |s| s.stack.name.as_str()).to_string();
    // From the alarms' state-change events (on-capacity-event keeps each one's last state),
    // not DescribeAlarms: see domain::alarm.
    let alarms_in_alarm = store
        .alarms()
        .await?
        .into_iter()
        .filter(|a| a.value == AlarmValue::Alarm && a.alarm.starts_with(&format!("{name}-")))
        .collect();
    Ok(Status {
        at: now,
        rules: rules.len(),
        rules_enabled: rules.iter().filter(|r| r.rule.enabled).count(),
        blocks: by_state,
        month: period.as_str().to_string(),
        spend,
        last_scan_answered: last,
        coverage,
        preflight,
        dashboard: dashboard_url(&name, &region),
        alarms_in_alarm,
        settings: stored,
        team_approvals: team_approvals()?,
    })
}

/// Each budget's month: the account's, each team's the stack budgets, each rule's (with its
/// team, when it names one), and each deleted rule's that still spent in it.
async fn spend(
    store: &DynamoStore,
    account: Option<Money>,
    teams: &BTreeMap<String, Money>,
    rules: &[StoredRule],
    period: &Period,
) -> Result<Vec<Spend>, CliError> {
    let mut spend = Vec::new();
    // The account's usage is counted with or without a cap: shown when capped or used.
    let u = store.usage(&BudgetOwner::Account, period).await?;
    if account.is_some() || u.is_some() {
        spend.push(Spend::new("account", "", "(account)".into(), u, account));
    }
    // Each team the stack budgets, then each rule (with its team, when it names one).
    for (team, limit) in teams {
        let u = store.usage(&BudgetOwner::Team(team.clone()), period).await?;
        spend.push(Spend::new("team", team, format!("(team {team})"), u, Some(*limit)));
    }
    for r in rules {
        let u = store.usage(&BudgetOwner::Rule(r.rule.id.clone()), period).await?;
        let label = match &r.rule.team {
            Some(t) if teams.contains_key(t) => format!("{} (team {t})", r.rule.id),
            Some(t) => format!("{} (team {t}: NO BUDGET, buys nothing)", r.rule.id),
            None => r.rule.id.clone(),
        };
        spend.push(Spend::new("rule", &r.rule.id, label, u, Some(r.rule.monthly_budget)));
    }
    // A deleted rule's blocks keep their spend in the account's row: its own row stays too, so
    // the rows still add up to the account's.
    let listed: BTreeSet<&str> = rules.iter().map(|r| r.rule.id.as_str()).collect();
    let month = month(store, period, teams).await?;
    for note in &month.skipped {
        eprintln!("note: {note}");
    }
    for row in month.rules {
        let id = row.month.rule.as_str();
        if listed.contains(id) {
            continue;
        }
        let u = store.usage(&BudgetOwner::Rule(id.to_string()), period).await?;
        spend.push(Spend::new("deleted-rule", id, format!("{id} (deleted rule)"), u, None));
    }
    Ok(spend)
}

/// When a question of an enabled rule was last answered, and each region they ask as the last
/// scan that asked it left it.
async fn coverage(
    store: &DynamoStore,
    rules: &[StoredRule],
) -> Result<(Option<DateTime<Utc>>, Vec<RegionCoverage>), CliError> {
    let regions: BTreeSet<_> = rules.iter().filter(|r| r.rule.enabled).flat_map(|r| r.rule.regions.iter()).collect();
    let mut last: Option<DateTime<Utc>> = None;
    let mut covered = Vec::new();
    for r in regions {
        let memory = store.region_memory(r).await?;
        last = last.max(memory.asked.values().map(|q| q.at).max());
        covered.push(RegionCoverage { region: r.to_string(), coverage: memory.coverage.clone() });
    }
    Ok((last, covered))
}

fn print(s: &Status, verbose: bool, layout: Layout) {
    let now = s.at;
    match &s.settings {
        Some(st) => println!(
            "stack {} in mode {} ({}; settings stored {})",
            st.stack.name,
            st.stack.mode.as_str(),
            when_utc(now),
            when_utc(st.written_at)
        ),
        None => println!(
            "stack settings not stored yet: no function of the stack has run against this table ({})",
            when_utc(now)
        ),
    }
    println!("rules: {} ({} enabled)", s.rules, s.rules_enabled);
    println!("{}", requests_lines(s));
    let states: Vec<String> = s.blocks.iter().map(|(st, n)| format!("{n} {st}")).collect();
    println!("blocks: {}", if states.is_empty() { "none open".to_string() } else { states.join(", ") });

    println!("spend in {}:", s.month);
    println!("{}", spend_table(&s.spend, layout));

    println!("last scan answered: {}", s.last_scan_answered.map_or_else(|| "never".to_string(), when_utc));
    if !s.coverage.is_empty() && verbose {
        println!("the watch, per region (as the last scan that asked it left it):");
        for w in &s.coverage {
            let line = match &w.coverage {
                Some(x) => coverage_line(&w.region, x),
                None => format!("{}: not asked yet", w.region),
            };
            println!("  {}", safe(&line));
        }
    } else if !s.coverage.is_empty() {
        println!(
            "the watch: {} region(s) (`capblock status --verbose` for each one's pace and ages)",
            s.coverage.len()
        );
    }
    match &s.preflight {
        Some(p) => println!(
            "preflight: {} at {} ({} warn, {} failed, {} not checked)",
            if p.passed { "passed" } else { "FAILED" },
            when_utc(p.at),
            p.warn,
            p.failed,
            p.not_checked
        ),
        None => println!("preflight: never run (run `capblock preflight` before switching to live)"),
    }
    println!("dashboard: {}", s.dashboard);
    let firing: Vec<String> =
        s.alarms_in_alarm.iter().map(|a| format!("{} (since {})", safe(&a.alarm), when_utc(a.at))).collect();
    if firing.is_empty() {
        println!("alarms in ALARM: none");
    } else {
        println!("alarms in ALARM: {}", firing.join(", "));
    }
}

/// Who approves people's requests, per team (TeamApprovals), and what is wrong with it against
/// the teams' budgets, each a warning line.
fn requests_lines(s: &Status) -> String {
    if s.team_approvals.is_empty() {
        return "requests: no team takes them (the stack's TeamApprovals is empty, or unknown: the stack was named by its table)"
            .to_string();
    }
    let mut lines = vec!["requests (TeamApprovals):".to_string()];
    for (team, a) in &s.team_approvals {
        lines.push(format!("  team {}: {}", safe(team), safe(&a.describe())));
    }
    let budgets = s.settings.as_ref().map(|st| st.stack.team_budgets.clone()).unwrap_or_default();
    for (seen, todo) in team_approval_problems(&s.team_approvals, &budgets) {
        lines.push(format!("  WARNING: {}: {}", safe(&seen), safe(&todo)));
    }
    lines.join("\n")
}

/// Each budget's month as a table, indented under its title.
fn spend_table(spend: &[Spend], layout: Layout) -> String {
    let rows: Vec<Vec<String>> = spend
        .iter()
        .map(|x| {
            vec![
                x.label.clone(),
                table::money(&x.spent),
                table::money(&x.committed),
                x.purchases.to_string(),
                match (x.limit, x.kind) {
                    (Some(l), _) => table::money(&l),
                    (None, "account") => "none".into(),
                    (None, _) => "-".into(),
                },
            ]
        })
        .collect();
    let currency = table::currency(spend.iter().map(|x| &x.spent));
    let columns = [
        Column::text("BUDGET"),
        Column::number(table::in_currency("SPENT", &currency)),
        Column::number(table::in_currency("COMMITTED", &currency)),
        Column::number("PURCHASES"),
        Column::number(table::in_currency("LIMIT", &currency)),
    ];
    // Indented under its title: two columns narrower.
    let layout = Layout { width: layout.width.map(|w| w.saturating_sub(2)), ..layout };
    indent(&table::render(&columns, &rows, layout))
}

/// "us-east-1: 64 questions, every question asked within 4m 20s (half within 2m 10s),
/// one call every 4.2s (2026-12-01 10:00 UTC)", and the refusals others likely met too.
fn coverage_line(region: &str, w: &Coverage) -> String {
    let answered = w.questions.saturating_sub(w.unanswered);
    let mut line = format!("{region}: {} question{}", w.questions, if w.questions == 1 { "" } else { "s" });
    if answered > 0 {
        line.push_str(&format!(
            ", every {} asked within {} (half within {})",
            if w.unanswered == 0 { "question".to_string() } else { format!("one of the {answered} answered") },
            secs(w.age_max_secs),
            secs(w.age_p50_secs)
        ));
    }
    if w.unanswered > 0 {
        line.push_str(&format!(", {} never answered (not reached yet, not sold there, or a quota of 0)", w.unanswered));
    }
    line.push_str(&format!(", one call every {}", gap(w.gap_ms)));
    if w.contended > 0 {
        line.push_str(&format!("; {} refusal(s) others in the account likely met too", w.contended));
    }
    line.push_str(&format!(" ({})", when_utc(w.at)));
    line
}

/// "4.2s", or "13ms" under a second (a sped-up local limit).
fn gap(ms: u64) -> String {
    capblock_shared::domain::duration::compact_std(std::time::Duration::from_millis(ms))
}

/// "45s", "4m 20s", "2h 5m", "3d 4h": seconds matter in a watch of minutes.
fn secs(s: u64) -> String {
    capblock_shared::domain::duration::compact_std(std::time::Duration::from_secs(s))
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coverage_line_says_how_soon_every_question_is_asked() {
        let w = Coverage {
            at: "2026-12-01T10:00:00Z".parse().unwrap(),
            questions: 64,
            unanswered: 0,
            age_p50_secs: 130,
            age_max_secs: 260,
            calls: 12,
            refused: 1,
            contended: 0,
            gap_ms: 4200,
        };
        assert_eq!(
            coverage_line("us-east-1", &w),
            "us-east-1: 64 questions, every question asked within 4m 20s (half within 2m 10s), \
             one call every 4.2s (2026-12-01 10:00 UTC)"
        );
        assert_eq!((secs(45), secs(7500), secs(90_000)), ("45s".into(), "2h 5m".into(), "1d 1h".into()));
        let w = Coverage { questions: 4, unanswered: 1, gap_ms: 13, ..w };
        assert_eq!(
            coverage_line("us-east-1", &w),
            "us-east-1: 4 questions, every one of the 3 answered asked within 4m 20s (half within 2m 10s), \
             1 never answered (not reached yet, not sold there, or a quota of 0), one call every 13ms (2026-12-01 10:00 UTC)"
        );
    }

    #[test]
    fn the_dashboard_url_matches_the_stack_output() {
        let template = include_str!("../../../template.yaml");
        assert!(template.contains(
            "https://${AWS::Region}.console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}#dashboards:name=${Dashboard}"
        ));
        assert_eq!(
            super::dashboard_url("prod", "us-west-2"),
            "https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2#dashboards:name=prod"
        );
    }
}
