//! The stack's own settings: what every scheduled workflow shares, and the copy the functions
//! store in the table so that the operator's CLI acts as the stack does (its mode, its account
//! cap, its name, where its alerts go) without trusting a variable of the operator's shell.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::budget::StackBudgets;
use super::money::Money;
use super::rule::Mode;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSettings {
    /// The stack name: written to every purchase's `capblock:stack` tag, and how the tracker
    /// tells this stack's reservations from another's.
    pub name: String,
    /// The stack-wide mode: a dry-run stack never buys or extends, whatever its rules say.
    pub mode: Mode,
    /// Account-wide monthly limit across all rules, if any. The account's usage is counted
    /// either way, so a cap set later sees the month's real spend.
    pub account_budget: Option<Money>,
    /// Each team's monthly budget (`TeamBudgets`), charged with the rule's and the account's on
    /// every purchase and extension of a rule that names the team. Settings stored before teams
    /// existed have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub team_budgets: BTreeMap<String, Money>,
}

impl StackSettings {
    /// The stack-wide budgets a purchase or an extension draws on besides its rule's.
    pub fn budgets(&self) -> StackBudgets {
        StackBudgets { account: self.account_budget, teams: self.team_budgets.clone() }
    }
}

/// The settings a function stores from its configuration (one item per table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSettings {
    pub stack: StackSettings,
    /// The SNS topic of the stack's alerts: where the CLI publishes the notices it makes.
    pub alerts_topic: String,
    /// When a function stored them (its clock), for the operator to judge how fresh they are.
    pub written_at: DateTime<Utc>,
}
