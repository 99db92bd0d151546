//! Section 3: each budget's month as a meter against its limit and an even burn.

use capblock_core::app::team_page::{PageBudget, TeamData};
use capblock_core::domain::budget::BudgetOwner;
use capblock_core::domain::money::Money;
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use rust_decimal::Decimal;

use super::{f, section};
use crate::html::{empty, esc};

fn owner_name(o: &BudgetOwner) -> String {
    match o {
        BudgetOwner::Account => "Account".into(),
        BudgetOwner::Team(t) => format!("Team {t}"),
        BudgetOwner::Rule(r) => format!("Rule {r}"),
    }
}

/// How far into its month `now` is: 0 to 1.
fn month_fraction(now: DateTime<Utc>) -> Decimal {
    let first = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single();
    let next = NaiveDate::from_ymd_opt(now.year(), now.month(), 1)
        .and_then(|d| d.checked_add_months(chrono::Months::new(1)))
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc());
    match (first, next) {
        (Some(a), Some(b)) => Decimal::from((now - a).num_minutes()) / Decimal::from((b - a).num_minutes().max(1)),
        _ => Decimal::ZERO,
    }
}

/// Section 3: Budgets: each budget's spent and committed against its limit, the straight line a month
/// burnt evenly would be at by now, and what is left.
pub fn budgets(d: &TeamData) -> String {
    let frac = month_fraction(d.now);
    let mut cards = String::new();
    for b in &d.budgets {
        cards.push_str(&budget_card(b, frac));
    }
    let shown = d.budgets.iter().filter(|b| b.limit.is_some() || b.usage.is_some()).count();
    if shown == 0 {
        return section("budgets", "Budgets", &empty("No budgets set and nothing charged this month."));
    }
    section(
        "budgets",
        "Budgets",
        &format!(
            "<p class=\"summary\">Month {} is {}% through: the line marks where an even burn would be.</p><div class=\"cards\">{cards}</div>",
            esc(d.period.as_str()),
            (frac * Decimal::from(100)).round_dp(0)
        ),
    )
}

fn budget_card(b: &PageBudget, frac: Decimal) -> String {
    if b.limit.is_none() && b.usage.is_none() {
        return String::new();
    }
    let currency = b.limit.map(|l| l.currency()).or(b.usage.as_ref().map(|u| u.spent.currency()));
    let zero = Money::zero(currency.unwrap_or_else(|| "USD".parse().expect("USD is a currency")));
    let spent = b.usage.as_ref().map(|u| u.spent).unwrap_or(zero);
    let committed = b.usage.as_ref().map(|u| u.committed).unwrap_or(zero);
    // `committed` counts every fee charged (spent included); the part not yet spent is in flight.
    let pending = committed.amount() - spent.amount();
    let name = owner_name(&b.owner);
    let Some(limit) = b.limit else {
        return format!(
            "<div class=\"card\"><h3>{}</h3><p>{spent} spent, {} committed; no limit.</p></div>",
            esc(&name),
            Money::new(pending.max(Decimal::ZERO), zero.currency()).unwrap_or(zero)
        );
    };
    let l = limit.amount().max(Decimal::ONE);
    let w = 600.0;
    let x = |v: Decimal| (f(v / l) * w).clamp(0.0, w);
    let left = limit.amount() - committed.amount();
    let even = limit.amount() * frac;
    let text = format!(
        "{name}: {spent} spent and {} more committed of {limit}; {} left; an even burn would be at {} by now.",
        Money::new(pending.max(Decimal::ZERO), limit.currency()).unwrap_or(zero),
        Money::new(left, limit.currency()).unwrap_or(zero),
        Money::new(even.round_dp(2), limit.currency()).unwrap_or(zero),
    );
    let svg = format!(
        "<svg class=\"meter\" viewBox=\"0 0 {w} 34\" role=\"img\" aria-label=\"{}\"><title>{}</title>\
<rect class=\"track\" x=\"0\" y=\"4\" width=\"{w}\" height=\"18\"/>\
<rect class=\"spent\" x=\"0\" y=\"4\" width=\"{:.1}\" height=\"18\"><title>spent {spent}</title></rect>\
<rect class=\"committed\" x=\"{:.1}\" y=\"4\" width=\"{:.1}\" height=\"18\"><title>committed, not yet paid: {}</title></rect>\
<line class=\"line\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"0\" y2=\"26\"><title>even burn by now: {}</title></line>\
<text x=\"0\" y=\"33\">0</text><text x=\"{w}\" y=\"33\" text-anchor=\"end\">{limit}</text></svg>",
        esc(&text),
        esc(&text),
        x(spent.amount()),
        x(spent.amount()),
        x(committed.amount()) - x(spent.amount()),
        Money::new(pending.max(Decimal::ZERO), limit.currency()).unwrap_or(zero),
        x(even),
        x(even),
        Money::new(even.round_dp(2), limit.currency()).unwrap_or(zero),
    );
    // Said as the lead reads it: over or within pace, with the share of the cap committed, and
    // a card over pace marked (its class colours it), never "ahead of a line".
    let pct = (committed.amount() * Decimal::from(100) / l).round_dp(0);
    let (class, pace) = if committed.amount() > even { ("card over", "over pace") } else { ("card", "within pace") };
    format!(
        "<div class=\"{class}\"><h3>{} <span class=\"pct\">{pct} %</span></h3>{svg}<p>{} left of {limit} ({} spent, {} in flight); {pace}: an even burn would have committed {} by now.</p></div>",
        esc(&name),
        Money::new(left, limit.currency()).unwrap_or(zero),
        spent,
        Money::new(pending.max(Decimal::ZERO), limit.currency()).unwrap_or(zero),
        Money::new(even.round_dp(2), limit.currency()).unwrap_or(zero),
    )
}
