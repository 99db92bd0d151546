//! What the budgets say: a rule whose team has none, and the month's summary of spend and use.

use crate::domain::budget::StackBudgets;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::Money;
use crate::domain::report::{RuleMonth, TeamMonth};
use crate::domain::slack::SlackMessage;

/// The month's summary (the first day of the next month): each rule's spend and use, each
/// team's, and the account's count. Thread `report-<month>`.
pub fn month_summary(
    month: &str,
    rules: &[RuleMonth],
    teams: &[TeamMonth],
    account_spent: Option<Money>,
) -> SlackMessage {
    let pct = |p: Option<rust_decimal::Decimal>| p.map_or("-".to_string(), |p| format!("{:.1}%", p.round_dp(1)));
    let (title, description) = if rules.is_empty() {
        (format!("{month}: nothing bought or extended"), format!("No block was charged to {month}."))
    } else {
        let blocks: u32 = rules.iter().map(|r| r.blocks).sum();
        let spent = rules.iter().skip(1).try_fold(rules[0].spent, |t, r| t.checked_add(&r.spent).ok());
        let mut lines: Vec<String> = rules
            .iter()
            .map(|r| {
                let price = r
                    .per_used_accelerator_hour
                    .map_or(String::new(), |p| format!(", {} per used accelerator-hour", p.display()));
                let unpriced = match r.unpriced_blocks {
                    0 => String::new(),
                    n => format!(", {n} of them adopted with no fee known"),
                };
                format!(
                    "• `{}` ({}): {} block(s){unpriced}, {} spent ({} fees + {} extensions), {:.1} of {:.1} accelerator-hours used ({}){price}",
                    r.rule,
                    r.team,
                    r.blocks,
                    r.spent,
                    r.fees,
                    r.extensions,
                    r.used_accelerator_hours.round_dp(1),
                    // Of the hours elapsed, which the use is counted over (a past month's are all paid).
                    r.elapsed_accelerator_hours.round_dp(1),
                    pct(r.utilization_percent)
                )
            })
            .collect();
        lines.extend(teams.iter().map(|t| {
            let budget = t.budget.map_or(String::new(), |b| format!(" (budget {b})"));
            format!("• team {}: {} spent{budget}, {} used", t.team, t.spent, pct(t.utilization_percent))
        }));
        if let Some(a) = account_spent {
            lines.push(format!("• account budget: {a} spent"));
        }
        (
            format!(
                "{month}: {blocks} block(s), {} spent",
                spent.map_or_else(|| "several currencies".to_string(), |s| s.to_string())
            ),
            lines.join("\n"),
        )
    };
    SlackMessage {
        id: MessageKind::MonthSummary.message_id(&format!("report-{month}"), None),
        title,
        description,
        next_steps: vec![format!("`capblock report --month {month} --csv` for a spreadsheet or a FinOps tool.")],
        keywords: vec!["capblock".into(), "report".into(), month.to_string()],
        thread_id: format!("report-{month}"),
        summary: format!("capblock's month {month}"),
        event_type: MessageKind::MonthSummary.event_type().into(),
        related_resources: vec![],
    }
}

/// A rule names a team the stack has no budget for: it buys nothing until the team has one.
pub fn team_unbudgeted(rule_id: &str, team: &str, budgets: &StackBudgets) -> SlackMessage {
    let known = if budgets.teams.is_empty() {
        "This stack has no team budgets.".to_string()
    } else {
        format!(
            "Teams with a budget: {}.",
            budgets.teams.iter().map(|(t, m)| format!("`{t}` ({m} a month)")).collect::<Vec<_>>().join(", ")
        )
    };
    SlackMessage {
        id: MessageKind::TeamUnbudgeted.message_id(&format!("rule-{rule_id}"), Some(team)),
        title: format!("Rule {rule_id} buys nothing: team {team} has no budget"),
        description: format!(
            "Rule `{rule_id}` names team `{team}`, and this stack's TeamBudgets give it none, so the rule is left out of every scan (a team's rules are capped together; spending outside that cap is what a typo in `team` would do). {known}"
        ),
        next_steps: vec![format!(
            "Add `{team}=<monthly USD>` to the stack's TeamBudgets parameter, or correct `team` in the rule (`capblock rules put`)."
        )],
        keywords: vec!["capblock".into(), "team-unbudgeted".into(), rule_id.to_string(), team.to_string()],
        thread_id: format!("rule-{rule_id}"),
        summary: format!("rule {rule_id}: team {team} has no budget"),
        event_type: MessageKind::TeamUnbudgeted.event_type().into(),
        related_resources: vec![],
    }
}
