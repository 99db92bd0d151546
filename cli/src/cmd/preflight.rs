//! `capblock preflight`: checks a stack in its real account before it is switched to live.

use std::collections::BTreeMap;

use capblock_shared::app::preflight::Preflighter;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::preflight::{Finding, Verdict};
use capblock_shared::domain::request::{TeamApproval, team_approval_problems};
use capblock_shared::ports::{FunctionDirectory, PreflightStore, SettingsStore};
use clap::Args;

use crate::context::{CliError, CliResult, sdk, store, team_approvals};
use crate::invoke::LambdaRoles;
use crate::output::OutputArgs;
use crate::table::{self, Column, safe};

#[derive(Args)]
#[command(
    after_help = "Examples:\n  capblock preflight\n  capblock preflight -o wide   # what each check saw and what to do, in columns apart\n  capblock preflight --json\n  \
capblock preflight --function on-capacity-event=capblock-OnCapacityEventFunction-AbC123\n\n\
Run it against the stack (--stack NAME, or CAPBLOCK_TABLE) before deploying with Mode=live. It spends nothing: it \
reads the stack's stored settings and rules, counts the alerts topic's confirmed subscriptions, asks \
one question per region the rules name (paced as a scan is), asks one of them twice to see whether \
EC2 repeats offering ids, and lists each region's Capacity Blocks as the tracker does. Then it \
invokes each of the stack's functions (Lambda Invoke, which needs lambda:InvokeFunction) with a \
preflight payload: the function tries every action its own role needs without effect (DryRun calls, \
reads, a probe item of its own in the table) and answers what IAM said. What cannot be tried without \
effect (publishing, putting events, scaling a group, creating a schedule) is reported as not checked, \
never as passed. It checks the teams' approval settings for people's requests (TeamApprovals) \
against their budgets (TeamBudgets). The findings are stored in the table; `capblock status` shows \
the last one.\n\
Exit codes: 0 nothing failed, 1 AWS or store failure, 2 a check failed (each says what to do)."
)]
pub struct PreflightArgs {
    #[command(flatten)]
    output: OutputArgs,
    /// Seconds between two questions to one region (EC2's describe refill).
    #[arg(long, default_value_t = 4.0)]
    pause_seconds: f64,
    /// The name a function runs under, when it has not recorded it in the table yet (it does
    /// on its first run): KIND=NAME, KIND one of scan-offerings, track-blocks, on-capacity-event.
    /// The stack's outputs name them (ScanOfferingsFunctionName, ...). Repeatable.
    #[arg(long = "function", value_name = "KIND=NAME", value_parser = function_name)]
    functions: Vec<(String, String)>,
}

fn function_name(s: &str) -> Result<(String, String), String> {
    let (kind, name) = s.split_once('=').ok_or_else(|| format!("{s}: expected KIND=NAME"))?;
    if !crate::invoke::KINDS.contains(&kind) {
        return Err(format!("{kind}: not a function of the stack ({})", crate::invoke::KINDS.join(", ")));
    }
    if name.is_empty() {
        return Err(format!("{kind}=: the name is empty"));
    }
    Ok((kind.to_string(), name.to_string()))
}

/// The teams' approval settings (TeamApprovals) against their budgets: a warning per problem,
/// or one finding that they hold; a parameter that does not parse fails (the scan approves no
/// request on it: a failed check, not a crash of preflight).
fn approval_findings(
    teams: Result<BTreeMap<String, TeamApproval>, String>,
    budgets: &BTreeMap<String, Money>,
) -> Vec<Finding> {
    let teams = match teams {
        Ok(t) => t,
        Err(e) => {
            return vec![Finding::flagged(
                "team approvals",
                Verdict::Fail,
                e,
                "fix the stack's TeamApprovals parameter (docs/requests.md) and deploy again",
            )];
        }
    };
    let problems = team_approval_problems(&teams, budgets);
    if problems.is_empty() {
        let seen = match teams.len() {
            0 => "no team takes people's requests (TeamApprovals is empty)".to_string(),
            n => format!("{n} team(s) take people's requests, each with a budget and a way to approve"),
        };
        return vec![Finding::ok("team approvals", seen)];
    }
    problems.into_iter().map(|(seen, todo)| Finding::flagged("team approvals", Verdict::Warn, seen, todo)).collect()
}

pub async fn run(a: PreflightArgs) -> CliResult {
    let pause = std::time::Duration::try_from_secs_f64(a.pause_seconds)
        .map_err(|_| CliError::Invalid(format!("--pause-seconds {}: expected a positive number", a.pause_seconds)))?;
    let store = store().await?;
    let sdk = sdk().await;
    let market = Ec2Market::new(sdk.clone());
    let topic = store.stored_settings().await?.map(|s| s.alerts_topic).unwrap_or_default();
    let topics = SnsNotifier::new(aws_sdk_sns::Client::new(&sdk), topic, None);
    eprintln!(
        "preflight: asking the stack's table, topic and regions ({} between two questions to a region)...",
        capblock_shared::domain::duration::compact_std(pause)
    );
    // Progress on stderr, a line per finding: the findings themselves are stdout's.
    let tell = |f: &Finding| eprintln!("  {}: {}", safe(&f.check), f.verdict.as_str());
    let mut names = store.functions().await?;
    names.extend(a.functions);
    let roles = LambdaRoles::new(&sdk, names);
    let organization = capblock_shared::aws::organizations::Organizations::new(&sdk);
    let report = Preflighter {
        market: &market,
        store: &store,
        topics: &topics,
        pause,
        tell: &tell,
        roles: &roles,
        organization: &organization,
    }
    .run(crate::context::clock_now().await?)
    .await?;
    let mut report = report;
    // The teams' approval settings are the deployed stack's parameter, which only the CLI reads:
    // their findings join the report, stored again with them for `capblock status`.
    let stored = store.stored_settings().await?;
    let budgets = stored.map(|s| s.stack.team_budgets).unwrap_or_default();
    for f in approval_findings(team_approvals().map_err(|e| e.to_string()), &budgets) {
        tell(&f);
        report.findings.push(f);
    }
    store.save_preflight(&report).await?;
    if !a.output.data(&report)? {
        let rows: Vec<Vec<String>> = report
            .findings
            .iter()
            .map(|f| {
                let (seen, todo) = (safe(&f.seen).into_owned(), f.todo.as_deref().map(|t| safe(t).into_owned()));
                let finding = match &todo {
                    Some(t) if !t.is_empty() => format!("{seen}; to do: {t}"),
                    _ => seen.clone(),
                };
                vec![
                    safe(&f.check).into_owned(),
                    f.verdict.as_str().to_string(),
                    finding,
                    seen,
                    todo.unwrap_or_default(),
                ]
            })
            .collect();
        // The narrow table says what each check saw and what to do in one column, wrapped, never
        // cut; `-o wide` has them apart.
        let columns = [
            Column::text("CHECK"),
            Column::whole("VERDICT"),
            Column::text("FINDING").narrow(),
            Column::text("SEEN").wide(),
            Column::text("WHAT TO DO").wide(),
        ];
        println!("{}", table::render(&columns, &rows, a.output.layout()));
        println!(
            "preflight {}: {} ok, {} warn, {} failed, {} not checked",
            if report.passed() { "passed" } else { "FAILED" },
            report.count(Verdict::Ok),
            report.count(Verdict::Warn),
            report.count(Verdict::Fail),
            report.count(Verdict::NotChecked)
        );
    }
    if report.passed() { Ok(()) } else { Err(CliError::ChecksFailed(report.count(Verdict::Fail))) }
}

#[cfg(test)]
mod tests {
    use capblock_shared::domain::request::parse_team_approvals;

    use super::*;

    /// Teams that take requests each with a budget and a way to approve pass; each problem is a
    /// warning saying what to do; no team taking requests is said, not warned of; a parameter
    /// that does not parse fails.
    #[test]
    fn the_teams_approval_settings_are_checked_against_their_budgets() {
        let budgets: BTreeMap<String, Money> = [("research".to_string(), Money::parse("20000", "USD").unwrap())].into();
        let teams = parse_team_approvals("research=500 arn:aws:iam::111122223333:role/ResearchLead").unwrap();
        let ok = approval_findings(Ok(teams), &budgets);
        assert_eq!(ok.len(), 1);
        assert_eq!(
            (ok[0].verdict, ok[0].seen.as_str()),
            (Verdict::Ok, "1 team(s) take people's requests, each with a budget and a way to approve")
        );
        let bad = approval_findings(parse_team_approvals("research=30000; vision=0"), &budgets);
        let said: Vec<(Verdict, &str, Option<&str>)> =
            bad.iter().map(|f| (f.verdict, f.seen.as_str(), f.todo.as_deref())).collect();
        assert_eq!(
            said,
            [
                (
                    Verdict::Warn,
                    "team research approves requests on its own up to 30000.00 USD, more than its monthly budget of 20000.00 USD",
                    Some("lower its automatic limit in TeamApprovals")
                ),
                (
                    Verdict::Warn,
                    "team vision takes requests but has no TeamBudgets entry: its requests buy nothing",
                    Some("give it a budget in TeamBudgets")
                ),
                (
                    Verdict::Warn,
                    "team vision: no request is ever approved (an automatic limit of 0 and no approver)",
                    Some("name an approver in TeamApprovals")
                ),
            ]
        );
        let none = approval_findings(Ok(BTreeMap::new()), &budgets);
        assert_eq!(
            (none[0].verdict, none[0].seen.as_str()),
            (Verdict::Ok, "no team takes people's requests (TeamApprovals is empty)")
        );
        let broken = approval_findings(parse_team_approvals("research=500; research=9"), &budgets);
        assert_eq!((broken.len(), broken[0].verdict), (1, Verdict::Fail));
        assert_eq!(broken[0].seen, "team research is named twice");
    }
}
