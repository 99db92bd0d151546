//! What a rule may still spend: the least room among the budgets a purchase of it would be
//! charged to (`domain::budget::charges_for`: its own, its team's, the account's). The scan and
//! the extender judge offerings by it; the ledger's one conditional transaction is what enforces
//! the limits, so a stale read here can only make capblock try and be refused, never overspend.

use chrono::{DateTime, Utc};

use crate::domain::budget::{BudgetCharge, BudgetUsage, Period, StackBudgets, charges_for};
use crate::domain::decision::room;
use crate::domain::money::Money;
use crate::domain::rule::Rule;
use crate::ports::{Ledger, StoreError};

/// What `rule` may still spend in `now`'s month. A rule whose team has no budget has none (the
/// scan refuses such rules before asking; this keeps any other path from buying for them).
pub async fn headroom<L: Ledger + ?Sized>(
    ledger: &L,
    rule: &Rule,
    budgets: &StackBudgets,
    now: DateTime<Utc>,
) -> Result<Money, StoreError> {
    match charges_for(rule, budgets, &Period::budget_month(now)) {
        Ok(charges) => least_room(ledger, &charges).await,
        Err(_) => Ok(Money::zero(rule.currency)),
    }
}

/// The smallest room left among `charges`' limits (a budget without a limit gives no bound).
/// `charges` start with the rule's own, which always has a limit.
async fn least_room<L: Ledger + ?Sized>(ledger: &L, charges: &[BudgetCharge]) -> Result<Money, StoreError> {
    let mut least: Option<Money> = None;
    for c in charges {
        let Some(limit) = c.limit else { continue };
        let committed = ledger.usage(&c.owner, &c.period).await?.map(|u: BudgetUsage| u.committed);
        let left = room(limit, committed.unwrap_or(Money::zero(limit.currency())));
        if least.is_none_or(|l| left.amount() < l.amount()) {
            least = Some(left);
        }
    }
    Ok(least.unwrap_or_else(|| Money::zero(crate::domain::money::Currency::USD)))
}
