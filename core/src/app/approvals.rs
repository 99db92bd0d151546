//! The approvals waiting for a person: the decisions approval-mode rules stored, not bought and
//! not expired. One reading for `capblock approvals` and the team page, so both list the same.

use chrono::{DateTime, Utc};

use crate::domain::approval;
use crate::domain::budget::Intent;
use crate::domain::rule::Rule;
use crate::ports::{Ledger, StoreError};

/// Each of `rules`' decisions still waiting at `now`, the first to expire first (then by id).
pub async fn waiting<S>(store: &S, rules: &[Rule], now: DateTime<Utc>) -> Result<Vec<Intent>, StoreError>
where
    S: Ledger + ?Sized,
{
    let mut approvals = Vec::new();
    for r in rules {
        for a in store.approvals_waiting(&r.id).await? {
            // Bought already (its intent exists; a consumed approval is not listed at all) or
            // past its validity: nothing to approve.
            let bought = store.get_intent(&r.id, &a.id).await?.is_some();
            if !bought && approval::expires_at(&a) > now {
                approvals.push(a);
            }
        }
    }
    approvals.sort_by(|a, b| (approval::expires_at(a), &a.id).cmp(&(approval::expires_at(b), &b.id)));
    Ok(approvals)
}
