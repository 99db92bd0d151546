//! Section 6: the market per instance type and region, as the scans saw it.

use std::collections::{BTreeMap, BTreeSet};

use capblock_core::app::team_page::{HISTORY_DAYS, PriceSeries, TeamData};
use capblock_core::domain::duration::compact;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use rust_decimal::Decimal;

use super::section;
use crate::chart::{self, Chart, Point, Series};
use crate::html::{empty, esc, table};

/// Section 6: The market per type and region over the history window: how often offerings appeared,
/// how long each stayed on sale, the largest count seen per start day, the price level.
pub fn market(d: &TeamData) -> String {
    let seen: Vec<_> = d.prices.iter().filter(|p| !p.observations.is_empty()).collect();
    if seen.is_empty() {
        return section("market", "Market", &empty(&format!("No offerings seen in the last {HISTORY_DAYS} days.")));
    }
    let mut body = format!(
        "<p class=\"summary\">What the scans saw over the last {HISTORY_DAYS} days, per instance type and region.</p>"
    );
    let mut rows = Vec::new();
    for p in &seen {
        let t = Tally::of(p, d.now);
        rows.push(t.row(p));
        body.push_str(&t.chart(p));
    }
    let t = table(
        "The market per type and region",
        &[
            "type and region",
            "how often seen",
            "offerings",
            "median time on sale",
            "longest on sale",
            "largest count per start day",
            "median price per accelerator-hour, 90 days",
            "the last 7 days",
        ],
        &rows,
    );
    section("market", "Market", &format!("{t}{body}"))
}

/// What the scans saw of one type in one region.
struct Tally<'a> {
    /// When it was asked.
    scans: BTreeSet<DateTime<Utc>>,
    /// Each offering's first and last sighting.
    on_sale: BTreeMap<&'a str, (DateTime<Utc>, DateTime<Utc>)>,
    /// The largest instance count offered per start day.
    largest: BTreeMap<NaiveDate, u32>,
    /// Prices per accelerator-hour, all and the last 7 days', each sorted.
    rates: Vec<Decimal>,
    recent: Vec<Decimal>,
}

impl<'a> Tally<'a> {
    fn of(p: &'a PriceSeries, now: DateTime<Utc>) -> Tally<'a> {
        let mut t = Tally {
            scans: p.observations.iter().map(|o| o.seen_at).collect(),
            on_sale: BTreeMap::new(),
            largest: BTreeMap::new(),
            rates: Vec::new(),
            recent: Vec::new(),
        };
        for o in &p.observations {
            let e = t.on_sale.entry(o.offering.id.as_str()).or_insert((o.seen_at, o.seen_at));
            e.0 = e.0.min(o.seen_at);
            e.1 = e.1.max(o.seen_at);
            let c = t.largest.entry(o.offering.start.date_naive()).or_insert(0);
            *c = (*c).max(o.offering.instance_count);
            if let Some(r) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) {
                t.rates.push(r.per_unit);
                if o.seen_at >= now - Duration::days(7) {
                    t.recent.push(r.per_unit);
                }
            }
        }
        t.rates.sort();
        t.recent.sort();
        t
    }

    /// The three start days with the most instances offered: "4 on Dec 10, ...".
    fn top(&self) -> Vec<String> {
        let mut v: Vec<(NaiveDate, u32)> = self.largest.iter().map(|(d, c)| (*d, *c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.iter().take(3).map(|(d, c)| format!("{c} on {}", d.format("%b %d"))).collect()
    }

    /// Its row of the market table.
    fn row(&self, p: &PriceSeries) -> Vec<String> {
        let days: BTreeSet<NaiveDate> = self.scans.iter().map(|t| t.date_naive()).collect();
        let mut stays: Vec<Duration> = self.on_sale.values().map(|(a, b)| *b - *a).collect();
        stays.sort();
        let median = |v: &[Decimal]| v.get(v.len() / 2).copied();
        let currency = p.observations[0].offering.fee.currency();
        vec![
            esc(&format!("{} {}", p.instance_type, p.region)),
            format!("{} scans on {} of {HISTORY_DAYS} days", self.scans.len(), days.len()),
            self.on_sale.len().to_string(),
            esc(&stays.get(stays.len() / 2).map(|d| compact(*d)).unwrap_or_else(|| "-".into())),
            esc(&stays.last().map(|d| compact(*d)).unwrap_or_else(|| "-".into())),
            esc(&self.top().join(", ")),
            esc(&median(&self.rates).map(|m| format!("{} {currency}", m.round_dp(4))).unwrap_or_else(|| "-".into())),
            esc(&median(&self.recent).map(|m| format!("{} {currency}", m.round_dp(4))).unwrap_or_else(|| "-".into())),
        ]
    }

    /// Its chart: the largest count per start day, as steps over the start days; a count that
    /// never changed is one sentence instead (a flat line says nothing a sentence cannot).
    fn chart(&self, p: &PriceSeries) -> String {
        let counts: BTreeSet<u32> = self.largest.values().copied().collect();
        if let (Some(c), 1, Some(first), Some(last)) =
            (counts.first(), counts.len(), self.largest.keys().next(), self.largest.keys().next_back())
        {
            return format!(
                "<p class=\"summary\">{} {}: at most {c} instance(s) in one offering on every start day seen ({} of them, {} to {}).</p>",
                esc(p.instance_type.as_str()),
                esc(p.region.as_str()),
                self.largest.len(),
                first.format("%b %d"),
                last.format("%b %d")
            );
        }
        let points: Vec<Point> = self
            .largest
            .iter()
            .filter_map(|(day, c)| {
                let at = day.and_hms_opt(0, 0, 0)?.and_utc();
                Some(Point {
                    at,
                    y: f64::from(*c),
                    text: format!("{c} instances at most, for blocks starting {}", day.format("%b %d")),
                })
            })
            .collect();
        let title = format!("Largest count seen per start day, {} {}", p.instance_type, p.region);
        let summary = format!("The most instances offered in one offering, per start day: {}.", self.top().join(", "));
        format!(
            "<h3>{}</h3><div class=\"scroll chart-box\">{}</div>",
            esc(&title),
            chart::draw(&Chart {
                title,
                summary,
                y_label: "instances".into(),
                series: vec![Series { label: format!("{} {}", p.instance_type, p.region), points }],
                threshold: None,
                markers: vec![],
                spans: vec![],
                gap: Duration::days(1),
                window: None,
                from_zero: true,
            })
        )
    }
}
