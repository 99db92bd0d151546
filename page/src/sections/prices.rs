//! Section 4: the price history per rule, its threshold, and what capblock bought on it.

use std::collections::BTreeMap;

use capblock_core::app::team_page::{CALENDAR_WEEKS, HISTORY_DAYS, PageBlock, PriceSeries, TeamData};
use capblock_core::domain::block::Block;
use capblock_core::domain::duration::compact;
use capblock_core::domain::extension::ExtensionState;
use capblock_core::domain::list_price::{ListRate, RateBook};
use capblock_core::domain::money::Currency;
use capblock_core::domain::rule::Rule;
use capblock_core::ports::Observation;
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use super::{f, section, when};
use crate::chart::{self, Chart, Point, Series};
use crate::html::{empty, esc};

/// The cheapest price per accelerator-hour of each scan (observations sharing a `seen_at`), in
/// time order (the chart drops repeats once it has split the line at its gaps).
fn cheapest_per_scan(obs: &[Observation]) -> Vec<(DateTime<Utc>, Decimal, String)> {
    let mut by_scan: BTreeMap<DateTime<Utc>, (Decimal, &Observation)> = BTreeMap::new();
    for o in obs {
        let Some(r) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) else { continue };
        let e = by_scan.entry(o.seen_at).or_insert((r.per_unit, o));
        if r.per_unit < e.0 {
            *e = (r.per_unit, o);
        }
    }
    by_scan.into_iter().map(|(t, (p, o))| (t, p, o.offering.fee.currency().to_string())).collect()
}

/// How far apart two scans may be and still count as one run of asking.
const GAP: Duration = Duration::hours(6);

/// A block's span on its rule's chart: from, to, tooltip.
type Span = (DateTime<Utc>, DateTime<Utc>, String);

/// Section 4: Price history per rule: a step line per region and type, its threshold, where capblock
/// bought or extended, and its blocks' spans.
pub fn prices(d: &TeamData) -> String {
    if d.rules.is_empty() {
        return section("prices", "Prices", &empty("No rules, so no prices asked."));
    }
    let from = d.now - Duration::days(HISTORY_DAYS);
    let mut body = format!(
        "<p class=\"summary\">The cheapest offering per scan over the last {HISTORY_DAYS} days, per accelerator-hour; a line breaks where nothing was asked for more than {}.</p>",
        compact(GAP)
    );
    for r in &d.rules {
        body.push_str(&rule_prices(d, r, from));
    }
    section("prices", "Prices", &body)
}

/// One rule's chart and its words: its lines, its marks and spans since `from`.
fn rule_prices(d: &TeamData, r: &Rule, from: DateTime<Utc>) -> String {
    let (series, lines): (Vec<Series>, Vec<String>) = d
        .prices
        .iter()
        .filter(|p| r.regions.contains(&p.region) && r.priced_types().contains(&p.instance_type))
        .filter_map(line)
        .unzip();
    let (markers, spans) = marks(d, r, from);
    let title = format!("Rule {}", r.id);
    if series.is_empty() && markers.is_empty() {
        return format!(
            "<h3>{}</h3>{}",
            esc(&title),
            empty("No prices seen for this rule's regions and types in the window.")
        );
    }
    let end = spans.iter().map(|s| s.1).max().unwrap_or(d.now).clamp(d.now, d.now + Duration::weeks(CALENDAR_WEEKS));
    // From the first thing to show (a day before it), not always the window's start: a stack
    // a week old would otherwise draw its week in the last tenth of the chart.
    let first = series
        .iter()
        .flat_map(|s: &Series| s.points.iter().map(|p| p.at))
        .chain(markers.iter().map(|m| m.at))
        .chain(spans.iter().map(|s| s.0))
        .min()
        .map_or(from, |t| (t - Duration::days(1)).max(from));
    let (lists, listed) = list_lines(r, &d.rates, (first, end), d.now);
    let summary = format!(
        "{}. Threshold {} {}/accelerator-hour. {}{} purchase or extension mark(s).",
        if lines.is_empty() { "No prices".to_string() } else { lines.join("; ") },
        r.max_price_per_accelerator_hour,
        r.currency,
        listed,
        markers.len()
    );
    let series = series.into_iter().chain(lists).collect();
    let svg = chart::draw(&Chart {
        title: title.clone(),
        summary: summary.clone(),
        y_label: format!("{}/accelerator-hour", r.currency),
        series,
        threshold: Some((
            format!("threshold {}", r.max_price_per_accelerator_hour),
            f(r.max_price_per_accelerator_hour),
        )),
        markers,
        spans,
        gap: GAP,
        window: Some((first, end)),
        from_zero: false,
    });
    let warnings: String =
        d.rates.warnings(r, d.now).iter().map(|w| format!("<p class=\"warn\">{}</p>", esc(w))).collect();
    format!(
        "<h3>{}</h3>{warnings}<div class=\"scroll chart-box\">{svg}</div><p class=\"summary\">{}</p>",
        esc(&title),
        esc(&summary)
    )
}

/// The list rate of each family the rule prices (published, or announced and in effect), as a line over `window` from the day
/// it took effect, and its words ("List for p5: 5.97 USD since 2026-10-07 (source). "); none for a
/// family with no published rate or a rule in another currency.
fn list_lines(
    r: &Rule,
    book: &RateBook,
    window: (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
) -> (Vec<Series>, String) {
    if r.currency != Currency::USD {
        return (vec![], String::new());
    }
    let mut rates: Vec<ListRate> = r.priced_types().iter().filter_map(|t| book.rate(t.as_str(), now)).collect();
    rates.dedup_by_key(|l| l.family.clone());
    let mut words = String::new();
    let lines = rates
        .iter()
        .map(|l| {
            let label = format!("list {} {} since {}", l.family, l.usd.normalize(), l.effective);
            words.push_str(&format!(
                "List for {}: {} USD/accelerator-hour since {} ({}). ",
                l.family,
                l.usd.normalize(),
                l.effective,
                l.source
            ));
            let since = l.effective.and_hms_opt(0, 0, 0).map_or(window.0, |t| t.and_utc().max(window.0));
            let text = format!("{label} USD/accelerator-hour ({})", l.source);
            // A point every half `GAP`, so the chart joins them into one line (it breaks a line
            // where points are further apart); a step line keeps only the ends.
            let steps = (window.1 - since).num_minutes().max(0) / (GAP / 2).num_minutes() + 1;
            let points = (0..=steps)
                .map(|i| Point { at: (since + GAP / 2 * i as i32).min(window.1), y: f(l.usd), text: text.clone() })
                .collect();
            Series { label, points }
        })
        .collect();
    (lines, words)
}

/// A region and type's step line of the cheapest price per scan, and its words (None: no price
/// seen).
fn line(p: &PriceSeries) -> Option<(Series, String)> {
    let pts = cheapest_per_scan(&p.observations);
    if pts.is_empty() {
        return None;
    }
    let label = format!("{} {}", p.region, p.instance_type);
    let lo = pts.iter().map(|x| x.1).min().unwrap_or_default();
    let hi = pts.iter().map(|x| x.1).max().unwrap_or_default();
    let last = pts.last().map(|x| x.1).unwrap_or_default();
    let words = format!(
        "{label}: {} scans shown, from {} to {}, last {}",
        pts.len(),
        lo.round_dp(4),
        hi.round_dp(4),
        last.round_dp(4)
    );
    let points = pts
        .iter()
        .map(|(t, v, c)| Point {
            at: *t,
            y: f(*v),
            text: format!("{label}: {} {c}/accelerator-hour at {}", v.round_dp(4), when(*t)),
        })
        .collect();
    Some((Series { label: label.clone(), points }, words))
}

/// Where the rule bought or extended since `from` (a mark at the price paid), and its blocks'
/// spans.
fn marks(d: &TeamData, r: &Rule, from: DateTime<Utc>) -> (Vec<Point>, Vec<Span>) {
    let mine: Vec<&PageBlock> = d.blocks.iter().filter(|b| b.block.rule_id.as_deref() == Some(r.id.as_str())).collect();
    let mut markers = Vec::new();
    let mut spans = Vec::new();
    for b in &mine {
        let bl: &Block = &b.block;
        if let Some(rate) = bl.fee.and_then(|fee| bl.per_accelerator_hour(fee))
            && bl.purchased_at >= from
        {
            markers.push(Point {
                at: bl.purchased_at,
                y: f(rate.per_unit),
                text: format!(
                    "bought {} at {} ({}), {}",
                    bl.reservation_id,
                    rate.display(),
                    bl.fee.map(|m| m.to_string()).unwrap_or_default(),
                    when(bl.purchased_at)
                ),
            });
        }
        for x in b.extensions.iter().filter(|x| x.state == ExtensionState::Paid && x.created_at >= from) {
            let acc = bl.accelerators_per_instance.unwrap_or(0) * bl.instance_count;
            let per = (acc > 0 && x.offer.duration_hours > 0)
                .then(|| x.offer.fee.amount() / Decimal::from(acc * x.offer.duration_hours));
            markers.push(Point {
                at: x.created_at,
                y: per.map(f).unwrap_or(f(r.max_price_per_accelerator_hour)),
                text: format!(
                    "extended {} by {} for {}",
                    bl.reservation_id,
                    compact(Duration::hours(i64::from(x.offer.duration_hours))),
                    x.offer.fee
                ),
            });
        }
        spans.push((bl.start, bl.end, format!("block {}: {} to {}", bl.reservation_id, when(bl.start), when(bl.end))));
    }
    (markers, spans)
}
