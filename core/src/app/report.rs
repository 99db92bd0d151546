//! A month's cost truth (`domain::report`) from the store: every block with its extensions, the
//! rules' teams and the budgets' own counts. For `capblock report`, and for the summary the
//! tracker posts to Slack on the first day of each month (its schedule's payload asks for it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::outbox::alert_notice;
use crate::domain::announce;
use crate::domain::block::Block;
use crate::domain::budget::{BudgetOwner, Period};
use crate::domain::extension::ExtensionIntent;
use crate::domain::message_kind::MessageKind;
use crate::domain::money::Money;
use crate::domain::report::{self, RuleMonth, TeamMonth};
use crate::ports::{BlockArchive, ExtensionLedger, Ledger, Outbox, RuleStore, StoreError};

/// The payload `source` of the monthly schedule: the tracker runs as always, then posts the
/// previous month's summary.
pub const MONTHLY_SUMMARY_SOURCE: &str = "capblock.monthly-summary";

/// One rule's month beside its budget's own count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub month: RuleMonth,
    /// What the rule's budget item counts as spent in the month (None: no item).
    pub budget_spent: Option<Money>,
    /// The rule's monthly budget (None: the rule is gone from the store, its blocks kept).
    pub budget_limit: Option<Money>,
    /// The rule names its team only by its `team` tag (rules written before teams existed): its
    /// purchases are counted under the team here but not charged to the team's budget
    /// (`domain::budget::charges_for` charges a rule's `team` only).
    pub team_by_tag: bool,
}

impl Row {
    /// Whether the blocks and extensions add up to what the budget counts, to the cent.
    pub fn agrees(&self) -> bool {
        self.budget_spent.unwrap_or(Money::zero(self.month.spent.currency())) == self.month.spent
    }
}

/// A month per rule and team, and the account budget's count.
#[derive(Debug, Clone, Serialize)]
pub struct Month {
    pub month: String,
    pub rules: Vec<Row>,
    pub teams: Vec<TeamMonth>,
    pub account_spent: Option<Money>,
    /// What could not be read and is left out, one line each (a corrupt extension item).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// A block's extensions as the readers for people show them. Their items are read strictly
/// (`ExtensionLedger::extensions_of`: the extender's `max_days` is bounded by the paid ones), so
/// one that does not decode fails the read: here the block's extensions are left out instead,
/// with a warning naming the item and a line in `skipped` for the reader's output, so one
/// corrupt item does not stop a report, the status or the team page.
pub async fn extensions_shown<S: ExtensionLedger + ?Sized>(
    store: &S,
    block: &Block,
    skipped: &mut Vec<String>,
) -> Result<Vec<ExtensionIntent>, StoreError> {
    match store.extensions_of(&block.reservation_id).await {
        Err(StoreError::Corrupt { key, message }) => {
            tracing::warn!(event = "extension_item_corrupt", block = %block.reservation_id, %key, error = %message,
                "an extension item does not decode; the block's extensions are left out of what people read");
            skipped.push(format!(
                "block {}: its extensions are left out, item {key} does not decode ({message})",
                block.reservation_id
            ));
            Ok(Vec::new())
        }
        read => read,
    }
}

/// The month `period` as the store holds it. Reads every block (a table scan: for people and
/// the monthly summary, never a run's hot path).
/// `team_budgets`: the stack's, so each team's row carries its budget.
pub async fn month<S>(store: &S, period: &Period, team_budgets: &BTreeMap<String, Money>) -> Result<Month, StoreError>
where
    S: BlockArchive + ExtensionLedger + RuleStore + Ledger + ?Sized,
{
    let stored = store.list_rules().await?;
    let teams: BTreeMap<String, String> =
        stored.iter().filter_map(|r| Some((r.rule.id.clone(), report::team_of(&r.rule)?.to_string()))).collect();
    let limits: BTreeMap<&str, Money> = stored.iter().map(|r| (r.rule.id.as_str(), r.rule.monthly_budget)).collect();
    let by_tag: Vec<&str> = stored
        .iter()
        .filter(|r| r.rule.team.is_none() && report::team_of(&r.rule).is_some())
        .map(|r| r.rule.id.as_str())
        .collect();
    let (mut blocks, mut skipped) = (Vec::new(), Vec::new());
    for b in store.all_blocks().await? {
        let extensions = extensions_shown(store, &b, &mut skipped).await?;
        blocks.push((b, extensions));
    }
    let mut rules = Vec::new();
    for m in report::month(period, &blocks, &teams) {
        let budget_spent = store.usage(&BudgetOwner::Rule(m.rule.clone()), period).await?.map(|u| u.spent);
        let budget_limit = limits.get(m.rule.as_str()).copied();
        let team_by_tag = by_tag.contains(&m.rule.as_str());
        rules.push(Row { month: m, budget_spent, budget_limit, team_by_tag });
    }
    let mut teams = report::by_team(&rules.iter().map(|r| r.month.clone()).collect::<Vec<_>>());
    // Each team the stack budgets, with what its budget counts (a team with a budget and no
    // spend yet is shown too: its room is news to its people).
    for (team, limit) in team_budgets {
        if !teams.iter().any(|t| &t.team == team) {
            teams.push(TeamMonth {
                team: team.clone(),
                rules: Vec::new(),
                blocks: 0,
                spent: Money::zero(limit.currency()),
                paid_accelerator_hours: Default::default(),
                elapsed_accelerator_hours: Default::default(),
                used_accelerator_hours: Default::default(),
                utilization_percent: None,
                budget: None,
                budget_spent: None,
            });
        }
    }
    teams.sort_by(|a, b| a.team.cmp(&b.team));
    for t in &mut teams {
        if let Some(limit) = team_budgets.get(&t.team) {
            t.budget = Some(*limit);
            t.budget_spent = store.usage(&BudgetOwner::Team(t.team.clone()), period).await?.map(|u| u.spent);
        }
    }
    let account_spent = store.usage(&BudgetOwner::Account, period).await?.map(|u| u.spent);
    Ok(Month { month: period.as_str().to_string(), rules, teams, account_spent, skipped })
}

/// Enqueues the Slack summary of `period` (thread `report-<period>`, once: a retried schedule
/// adds nothing). A month with nothing bought or extended says so in one line. Whether it was
/// new.
pub async fn enqueue_summary<S>(
    store: &S,
    period: &Period,
    team_budgets: &BTreeMap<String, Money>,
    now: DateTime<Utc>,
) -> Result<bool, StoreError>
where
    S: BlockArchive + ExtensionLedger + RuleStore + Ledger + Outbox + ?Sized,
{
    let m = month(store, period, team_budgets).await?;
    let rows: Vec<RuleMonth> = m.rules.iter().map(|r| r.month.clone()).collect();
    let msg = announce::month_summary(period.as_str(), &rows, &m.teams, m.account_spent);
    store
        .enqueue(&alert_notice(
            &format!("report-{}", period.as_str()),
            &MessageKind::MonthSummary.outbox_key(None)?,
            &msg,
            now,
        ))
        .await
}
