//! `capblock status`: one screen for the operator: the stack's mode, its rules, its blocks,
//! this month's spend against the budgets, the last scan, and where the dashboard is.

use std::collections::{BTreeMap, BTreeSet};

use capblock_shared::app::report::month;
use capblock_shared::domain::alarm::AlarmValue;
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::plan::Watch;
use capblock_shared::domain::preflight::Verdict;
use capblock_shared::ports::{AlarmStore, BlockStore, Ledger, MarketMemory, PreflightStore, RuleStore};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::context::{CliResult, sdk, store, stored_settings};
use crate::table::{self, safe, when};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock status\n  capblock status --time 2026-12-10T00:00:00Z\n\n\
The dashboard URL is the stack output DashboardUrl (the dashboard is named after the stack, in the \
SDK's region). The alarms in ALARM are those whose last state-change event (kept by \
on-capacity-event) said so.\n\
Exit codes: 0 printed, 1 store failure.")]
pub struct StatusArgs {
    /// The instant whose month's spend to show (RFC 3339); default: now.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// Also print the watch of each region: how many questions the rules ask there, how long
    /// ago they were answered, the learned pace and the refusals others likely met.
    #[arg(long, short = 'v')]
    verbose: bool,
}

/// The stack output DashboardUrl, built the same way as in template.yaml.
pub fn dashboard_url(stack: &str, region: &str) -> String {
    format!("https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards:name={stack}")
}

pub async fn run(a: StatusArgs) -> CliResult {
    let now = match a.time {
        Some(t) => t,
        None => crate::context::clock_now().await?,
    };
    let store = store().await?;
    // The stack's settings as its functions stored them; none yet: said so.
    let stored = stored_settings(&store).await?;
    let account = stored.as_ref().and_then(|s| s.stack.account_budget);
    let rules = store.list_rules().await?;
    let blocks = store.open_blocks(None).await?;
    let period = Period::of(now);

    match &stored {
        Some(s) => println!(
            "stack {} in mode {} ({} UTC; settings stored {} UTC)",
            s.stack.name,
            s.stack.mode.as_str(),
            when(now),
            when(s.written_at)
        ),
        None => println!(
            "stack settings not stored yet: no function of the stack has run against this table ({} UTC)",
            when(now)
        ),
    }
    let enabled = rules.iter().filter(|r| r.rule.enabled).count();
    println!("rules: {} ({} enabled)", rules.len(), enabled);

    let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &blocks {
        *by_state.entry(b.state.as_str()).or_default() += 1;
    }
    let states: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!("blocks: {}", if states.is_empty() { "none open".to_string() } else { states.join(", ") });

    let mut rows = Vec::new();
    // The account's usage is counted with or without a cap: shown when capped or used.
    let u = store.usage(&BudgetOwner::Account, &period).await?;
    if account.is_some() || u.is_some() {
        rows.push(budget_row("(account)", u.as_ref(), &account.map_or_else(|| "none".into(), |l| table::money(&l))));
    }
    // Each team the stack budgets, then each rule (with its team, when it names one).
    let teams = stored.as_ref().map(|s| s.stack.team_budgets.clone()).unwrap_or_default();
    for (team, limit) in &teams {
        let u = store.usage(&BudgetOwner::Team(team.clone()), &period).await?;
        rows.push(budget_row(&format!("(team {team})"), u.as_ref(), &table::money(limit)));
    }
    for r in &rules {
        let u = store.usage(&BudgetOwner::Rule(r.rule.id.clone()), &period).await?;
        let name = match &r.rule.team {
            Some(t) if teams.contains_key(t) => format!("{} (team {t})", r.rule.id),
            Some(t) => format!("{} (team {t}: NO BUDGET, buys nothing)", r.rule.id),
            None => r.rule.id.clone(),
        };
        rows.push(budget_row(&name, u.as_ref(), &table::money(&r.rule.monthly_budget)));
    }
    // A deleted rule's blocks keep their spend in the account's row: its own row stays too, so
    // the rows still add up to the account's.
    let listed: BTreeSet<&str> = rules.iter().map(|r| r.rule.id.as_str()).collect();
    for row in month(&store, &period, &teams).await?.rules {
        if listed.contains(row.month.rule.as_str()) {
            continue;
        }
        let u = store.usage(&BudgetOwner::Rule(row.month.rule.clone()), &period).await?;
        rows.push(budget_row(&format!("{} (deleted rule)", row.month.rule), u.as_ref(), "-"));
    }
    println!("spend in {}:", period.as_str());
    println!("{}", indent(&table::render(&["BUDGET", "SPENT", "COMMITTED", "PURCHASES", "LIMIT"], &rows)));

    let regions: BTreeSet<_> = rules.iter().filter(|r| r.rule.enabled).flat_map(|r| r.rule.regions.iter()).collect();
    let mut last: Option<DateTime<Utc>> = None;
    let mut watch = Vec::new();
    for r in regions {
        let memory = store.region_memory(r).await?;
        last = last.max(memory.asked.values().map(|q| q.at).max());
        watch.push(match &memory.watch {
            Some(w) => watch_line(r.as_str(), w),
            None => format!("{r}: not asked yet"),
        });
    }
    println!("last scan answered: {}", last.map_or_else(|| "never".to_string(), |t| format!("{} UTC", when(t))));
    if !watch.is_empty() && a.verbose {
        println!("the watch, per region (as the last scan that asked it left it):");
        for line in watch {
            println!("  {}", safe(&line));
        }
    } else if !watch.is_empty() {
        println!("the watch: {} region(s) (`capblock status --verbose` for each one's pace and ages)", watch.len());
    }
    match store.last_preflight().await? {
        Some(p) => println!(
            "preflight: {} at {} UTC ({} warn, {} failed, {} not checked)",
            if p.passed() { "passed" } else { "FAILED" },
            when(p.at),
            p.count(Verdict::Warn),
            p.count(Verdict::Fail),
            p.count(Verdict::NotChecked)
        ),
        None => println!("preflight: never run (run `capblock preflight` before switching to live)"),
    }

    let region = sdk().await.region().map_or_else(|| "us-east-1".to_string(), |r| r.to_string());
    // Without stored settings, the name the template gives a stack by default.
    let name = stored.as_ref().map_or("capblock", |s| s.stack.name.as_str());
    println!("dashboard: {}", dashboard_url(name, &region));
    // From the alarms' state-change events (on-capacity-event keeps each one's last state),
    // not DescribeAlarms: see domain::alarm.
    let firing: Vec<String> = store
        .alarms()
        .await?
        .into_iter()
        .filter(|a| a.value == AlarmValue::Alarm && a.alarm.starts_with(&format!("{name}-")))
        .map(|a| format!("{} (since {} UTC)", safe(&a.alarm), when(a.at)))
        .collect();
    if firing.is_empty() {
        println!("alarms in ALARM: none");
    } else {
        println!("alarms in ALARM: {}", firing.join(", "));
    }
    Ok(())
}

fn budget_row(owner: &str, u: Option<&capblock_shared::domain::budget::BudgetUsage>, limit: &str) -> Vec<String> {
    vec![
        owner.to_string(),
        u.map_or_else(|| "0.00".into(), |u| table::money(&u.spent)),
        u.map_or_else(|| "0.00".into(), |u| table::money(&u.committed)),
        u.map_or(0, |u| u.purchases).to_string(),
        limit.to_string(),
    ]
}

/// "us-east-1: 64 questions, every question asked within 4 min 20 s (half within 2 min 10 s),
/// one call every 4.2 s (2026-12-01 10:00 UTC)", and the refusals others likely met too.
fn watch_line(region: &str, w: &Watch) -> String {
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
    line.push_str(&format!(" ({} UTC)", when(w.at)));
    line
}

/// "4.2 s", or "13 ms" under a second (a sped-up local limit).
fn gap(ms: u64) -> String {
    if ms < 1000 { format!("{ms} ms") } else { format!("{:.1} s", ms as f64 / 1000.0) }
}

/// "45 s", "4 min 20 s", "2 h 5 min", "3 d 4 h": seconds matter in a watch of minutes.
fn secs(s: u64) -> String {
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_line_says_how_soon_every_question_is_asked() {
        let w = Watch {
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
            watch_line("us-east-1", &w),
            "us-east-1: 64 questions, every question asked within 4 min 20 s (half within 2 min 10 s), \
             one call every 4.2 s (2026-12-01 10:00 UTC)"
        );
        assert_eq!((secs(45), secs(7500), secs(90_000)), ("45 s".into(), "2 h 5 min".into(), "1 d 1 h".into()));
        let w = Watch { questions: 4, unanswered: 1, gap_ms: 13, ..w };
        assert_eq!(
            watch_line("us-east-1", &w),
            "us-east-1: 4 questions, every one of the 3 answered asked within 4 min 20 s (half within 2 min 10 s), \
             1 never answered (not reached yet, not sold there, or a quota of 0), one call every 13 ms (2026-12-01 10:00 UTC)"
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
