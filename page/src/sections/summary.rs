//! The page's first answer, above every chart: what a lead asks first, each in one line. What is
//! active and until when, what starts next, which payment is due by when, the month's spend
//! against the account's cap, how many decisions wait for a person, and people's requests.

use capblock_core::app::team_page::{PageBlock, TeamData};
use capblock_core::domain::budget::BudgetOwner;
use capblock_core::domain::lifecycle::BlockState;
use rust_decimal::Decimal;

use super::{lane, section, time};
use crate::html::esc;

/// One block in a line: whose, what, and its fee when known.
fn what(b: &PageBlock) -> String {
    let bl = &b.block;
    let fee = bl.fee.map(|f| format!(", {f}")).unwrap_or_default();
    esc(&format!("{}: {} × {}{fee}", lane(b), bl.instance_count, bl.instance_type))
}

/// The lines of "At a glance", each a term and what it says now.
fn lines(d: &TeamData) -> Vec<(&'static str, String)> {
    let mut active: Vec<&PageBlock> = d.blocks.iter().filter(|b| b.block.state == BlockState::Active).collect();
    active.sort_by_key(|b| b.block.end);
    let active = if active.is_empty() {
        "none".to_string()
    } else {
        let each: Vec<String> =
            active.iter().map(|b| format!("{} until {}", what(b), time(b.block.termination_time()))).collect();
        format!("{} block(s): {}", active.len(), each.join("; "))
    };
    let next = d
        .blocks
        .iter()
        .filter(|b| {
            matches!(b.block.state, BlockState::Scheduled | BlockState::PaymentPending) && b.block.start > d.now
        })
        .min_by_key(|b| b.block.start)
        .map_or("nothing scheduled".to_string(), |b| format!("{} from {}", what(b), time(b.block.start)));
    let mut due: Vec<&PageBlock> = d
        .blocks
        .iter()
        .filter(|b| b.block.state == BlockState::PaymentPending && b.block.payment_deadline.is_some())
        .collect();
    due.sort_by_key(|b| b.block.payment_deadline);
    let due = if due.is_empty() {
        "none".to_string()
    } else {
        let each: Vec<String> =
            due.iter().filter_map(|b| Some(format!("{} by {}", what(b), time(b.block.payment_deadline?)))).collect();
        format!("{}: EC2 takes the fee by then or releases the block", each.join("; "))
    };
    let waiting = match d.approvals.len() {
        0 => "none".to_string(),
        n => format!("<a href=\"#approvals\">{n} decision(s)</a> wait for a person"),
    };
    let c = &d.requests.counts;
    let requests = match (c.open(), c.closed()) {
        (0, 0) => "none".to_string(),
        (open, closed) => format!(
            "<a href=\"#requests\">{open} open</a>: {} waiting for approval, {} approved and looked for; \
{closed} closed: {} bought, {} expired, {} rejected or cancelled{}",
            c.filed,
            c.approved,
            c.bought,
            c.expired,
            c.rejected + c.cancelled,
            if c.refused > 0 { format!(", {} refused", c.refused) } else { String::new() }
        ),
    };
    vec![
        ("Active now", active),
        ("Starts next", next),
        ("Payment due", due),
        ("Spent this month", spend(d)),
        ("Approvals waiting", waiting),
        ("Requests", requests),
    ]
}

/// The account's month: spent, in flight, and the share of its cap, said as over or within an
/// even burn so "ahead" never has to be decoded.
fn spend(d: &TeamData) -> String {
    let Some(account) = d.budgets.iter().find(|b| b.owner == BudgetOwner::Account) else {
        return "nothing charged yet".to_string();
    };
    let Some(u) = &account.usage else {
        return format!("nothing charged in {}", d.period.as_str());
    };
    let committed = u.committed;
    let flight = committed.amount() - u.spent.amount();
    let mut text = format!("{} spent", u.spent);
    if flight > Decimal::ZERO {
        text.push_str(&format!(" and {:.2} {} in flight", flight, committed.currency()));
    }
    match account.limit {
        Some(limit) if limit.amount() > Decimal::ZERO => {
            let pct = (committed.amount() * Decimal::from(100) / limit.amount()).round_dp(0);
            text.push_str(&format!(" of the account's {limit} cap ({pct} % committed)"));
        }
        _ => text.push_str(" (the account has no cap)"),
    }
    esc(&text)
}

/// Section 0: At a glance.
pub fn summary(d: &TeamData) -> String {
    let items: String = lines(d).into_iter().map(|(term, says)| format!("<dt>{term}</dt><dd>{says}</dd>")).collect();
    section("glance", "At a glance", &format!("<dl class=\"glance\">{items}</dl>"))
}
