//! Settings every scheduled workflow shares. Read once from the environment by
//! `config::stack_settings` (the one reader and the one place of each default), held here so
//! `app/` depends on no environment.

use crate::domain::money::Money;
use crate::domain::rule::Mode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSettings {
    /// The stack name: written to every purchase's `capblock:stack` tag, and how the tracker
    /// tells this stack's reservations from another's.
    pub name: String,
    /// The stack-wide mode: a dry-run stack never buys or extends, whatever its rules say.
    pub mode: Mode,
    /// Account-wide monthly limit across all rules, if any.
    pub account_budget: Option<Money>,
}
