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

/// How far into its month `now` is, in whole minutes: (gone, the month's length). Minutes keep the
/// forecast exact (Decimal over integers), with no float between a fee and its forecast.
fn month_minutes(now: DateTime<Utc>) -> (i64, i64) {
    let first = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single();
    let next = NaiveDate::from_ymd_opt(now.year(), now.month(), 1)
        .and_then(|d| d.checked_add_months(chrono::Months::new(1)))
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc());
    match (first, next) {
        (Some(a), Some(b)) => ((now - a).num_minutes().max(0), (b - a).num_minutes().max(1)),
        _ => (0, 1),
    }
}

/// The month's pace: how much of it is gone.
#[derive(Debug, Clone, Copy)]
struct Pace {
    gone: i64,
    length: i64,
}

impl Pace {
    fn fraction(&self) -> Decimal {
        Decimal::from(self.gone) / Decimal::from(self.length)
    }

    fn percent(&self) -> Decimal {
        (self.fraction() * Decimal::from(100)).round_dp(0)
    }

    /// What `so_far` comes to by the month's end if the rest of the month goes as it has: so far
    /// times the month over the part gone, to the cent. None in the month's first minute (no pace
    /// yet) or past `Money`'s range.
    fn month_end(&self, so_far: Money) -> Option<Money> {
        if self.gone == 0 {
            return None;
        }
        let at_end = so_far.amount().checked_mul(Decimal::from(self.length))?.checked_div(Decimal::from(self.gone))?;
        Money::new(at_end.round_dp(2), so_far.currency()).ok()
    }
}

/// Section 3: Budgets: each budget's month as a lead asks it: the share of its limit used, the
/// share of the month gone, over or within pace, and where the month ends at this pace.
pub fn budgets(d: &TeamData) -> String {
    let (gone, length) = month_minutes(d.now);
    let pace = Pace { gone, length };
    let mut cards = String::new();
    for b in &d.budgets {
        cards.push_str(&budget_card(b, pace));
    }
    let shown = d.budgets.iter().filter(|b| b.limit.is_some() || b.usage.is_some()).count();
    if shown == 0 {
        return section("budgets", "Budgets", &empty("No budgets set and nothing charged this month."));
    }
    section(
        "budgets",
        "Budgets",
        &format!(
            "<p class=\"summary\">Month {} is {} % gone. Each card: the fees committed against its limit (blue paid, \
orange in flight), the line where an even month would be by now, and the month's end at this pace.</p><div class=\"cards\">{cards}</div>",
            esc(d.period.as_str()),
            pace.percent()
        ),
    )
}

fn budget_card(b: &PageBudget, pace: Pace) -> String {
    if b.limit.is_none() && b.usage.is_none() {
        return String::new();
    }
    let currency = b.limit.map(|l| l.currency()).or(b.usage.as_ref().map(|u| u.spent.currency()));
    let zero = Money::zero(currency.unwrap_or_else(|| "USD".parse().expect("USD is a currency")));
    let spent = b.usage.as_ref().map(|u| u.spent).unwrap_or(zero);
    let committed = b.usage.as_ref().map(|u| u.committed).unwrap_or(zero);
    // `committed` counts every fee charged (spent included); the part not yet spent is in flight.
    let pending = Money::new((committed.amount() - spent.amount()).max(Decimal::ZERO), zero.currency()).unwrap_or(zero);
    let name = owner_name(&b.owner);
    let forecast = pace.month_end(committed);
    let Some(limit) = b.limit else {
        let end = forecast.map_or(String::new(), |f| format!(" Month-end forecast at this pace: {f}."));
        return format!(
            "<div class=\"card\"><h3>{}</h3><p>{committed} committed ({spent} spent, {pending} in flight); no limit.{end}</p></div>",
            esc(&name),
        );
    };
    let l = limit.amount().max(Decimal::ONE);
    let w = 600.0;
    let x = |v: Decimal| (f(v / l) * w).clamp(0.0, w);
    let left = Money::new((limit.amount() - committed.amount()).max(Decimal::ZERO), limit.currency()).unwrap_or(zero);
    let even = Money::new((limit.amount() * pace.fraction()).round_dp(2), limit.currency()).unwrap_or(zero);
    let pct = |m: Money| (m.amount() * Decimal::from(100) / l).round_dp(0);
    let text = format!(
        "{name}: {} % used ({committed} of {limit}) with {} % of the month gone; an even month would have committed {even} by now.",
        pct(committed),
        pace.percent()
    );
    // The scale's words are HTML below the bar, not SVG text: a card a third of a page wide
    // would shrink SVG text to a few pixels.
    let svg = format!(
        "<svg class=\"meter\" viewBox=\"0 0 {w} 26\" role=\"img\" aria-label=\"{}\"><title>{}</title>\
<rect class=\"track\" x=\"0\" y=\"4\" width=\"{w}\" height=\"18\"/>\
<rect class=\"spent\" x=\"0\" y=\"4\" width=\"{:.1}\" height=\"18\"><title>spent {spent}</title></rect>\
<rect class=\"committed\" x=\"{:.1}\" y=\"4\" width=\"{:.1}\" height=\"18\"><title>committed, not yet paid: {pending}</title></rect>\
<line class=\"line\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"0\" y2=\"26\"><title>even month by now: {even}</title></line></svg>\
<div class=\"scale\"><span>0</span><span>{limit}</span></div>",
        esc(&text),
        esc(&text),
        x(spent.amount()),
        x(spent.amount()),
        x(committed.amount()) - x(spent.amount()),
        x(even.amount()),
        x(even.amount()),
    );
    // Said as the lead reads it: over or within pace, with the share of the cap committed, and
    // a card over pace marked (its class colours it), never "ahead of a line".
    let (class, pace_word) =
        if committed.amount() > even.amount() { ("card over", "over pace") } else { ("card", "within pace") };
    let end = forecast.map_or("no pace yet".to_string(), |f| format!("{f} ({} % of the limit)", pct(f)));
    format!(
        "<div class=\"{class}\"><h3>{} <span class=\"pct\">{} % used</span></h3>{svg}<dl class=\"facts\">\
<dt>Month gone</dt><dd>{} %: <b class=\"pace\">{pace_word}</b></dd>\
<dt>Month-end forecast</dt><dd>{}</dd>\
<dt>Left</dt><dd>{left} of {limit} ({spent} spent, {pending} in flight)</dd></dl></div>",
        esc(&name),
        pct(committed),
        pace.percent(),
        esc(&end),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(s: &str) -> Money {
        Money::parse(s, "USD").unwrap()
    }

    #[test]
    fn the_month_end_forecast_extends_the_month_so_far_to_the_cent() {
        // December 7th, 09:00: 9,180 of the month's 44,640 minutes gone.
        let now = Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap();
        let (gone, length) = month_minutes(now);
        assert_eq!((gone, length), (9_180, 44_640));
        let pace = Pace { gone, length };
        assert_eq!(pace.month_end(usd("960")), Some(usd("4668.24")), "960 x 44640 / 9180 = 4668.235...");
        assert_eq!(pace.month_end(usd("0")), Some(usd("0")));
        assert_eq!(Pace { gone: 0, length }.month_end(usd("960")), None, "no pace in the month's first minute");
        let end = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 0).unwrap();
        let (gone, length) = month_minutes(end);
        assert_eq!(Pace { gone, length }.month_end(usd("100")), Some(usd("100.00")), "a minute before the end");
    }
}
