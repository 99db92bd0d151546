//! The page's six sections, each a `<section>` with its pictures and their text alternatives
//! (a table or a sentence), and a plain sentence when it has nothing to show.

use std::collections::{BTreeMap, BTreeSet};

use capblock_core::app::team_page::{CALENDAR_WEEKS, HISTORY_DAYS, PageBlock, PageBudget, TeamData};
use capblock_core::domain::approval;
use capblock_core::domain::block::Block;
use capblock_core::domain::budget::BudgetOwner;
use capblock_core::domain::duration::compact;
use capblock_core::domain::extension::ExtensionState;
use capblock_core::domain::lifecycle::BlockState;
use capblock_core::domain::money::Money;
use capblock_core::domain::usage;
use capblock_core::ports::Observation;
use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use crate::chart::{self, Chart, Point, Series};
use crate::html::{empty, esc, table};

fn when(t: DateTime<Utc>) -> String {
    t.format("%a %b %d %H:%M").to_string()
}

fn time(t: DateTime<Utc>) -> String {
    format!("<time datetime=\"{}\">{}</time>", t.to_rfc3339(), when(t))
}

fn f(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

fn section(id: &str, title: &str, body: &str) -> String {
    format!("<section id=\"{id}\" aria-labelledby=\"{id}-h\"><h2 id=\"{id}-h\">{}</h2>{body}</section>", esc(title))
}

fn state(s: BlockState) -> String {
    format!("<span class=\"state s-{0}\">{0}</span>", s.as_str())
}

/// What a block cost in all: its fee and its paid extensions (None: an adopted block).
fn total(b: &PageBlock) -> Option<Money> {
    let paid = b.extensions.iter().filter(|x| x.state == ExtensionState::Paid).map(|x| x.offer.fee);
    paid.fold(b.block.fee, |t, fee| t.and_then(|t| t.checked_add(&fee).ok()))
}

fn lane(b: &PageBlock) -> String {
    format!("{} / {}", b.team.as_deref().unwrap_or("no team"), b.block.rule_id.as_deref().unwrap_or("adopted"))
}

/// Section 1: The calendar: the blocks held now or starting within `CALENDAR_WEEKS`, one lane per team
/// and rule, coloured by state; the table below is its text and carries every date.
pub fn calendar(d: &TeamData) -> String {
    let until = d.now + Duration::weeks(CALENDAR_WEEKS);
    let shown: Vec<&PageBlock> = d
        .blocks
        .iter()
        .filter(|b| b.block.start < until && b.block.termination_time() > d.now - Duration::days(1))
        .filter(|b| !matches!(b.block.state, BlockState::Released | BlockState::PaymentFailed) || b.block.end > d.now)
        .collect();
    let title = format!("Blocks from {} to {}", d.now.format("%b %d"), until.format("%b %d"));
    if shown.is_empty() {
        return section(
            "calendar",
            "Calendar",
            &empty(&format!("No blocks held or starting in the next {CALENDAR_WEEKS} weeks.")),
        );
    }
    let lanes: BTreeSet<String> = shown.iter().map(|b| lane(b)).collect();
    let lanes: Vec<String> = lanes.into_iter().collect();
    let bars = shown
        .iter()
        .map(|b| {
            let i = lanes.iter().position(|l| *l == lane(b)).unwrap_or(0);
            let mut tip = format!(
                "{} {} × {} in {} ({}), {} to {}",
                b.block.reservation_id,
                b.block.instance_count,
                b.block.instance_type,
                b.block.availability_zone,
                b.block.state.as_str(),
                when(b.block.start),
                when(b.block.end)
            );
            if let Some(p) = b.block.payment_deadline.filter(|_| b.block.state == BlockState::PaymentPending) {
                tip.push_str(&format!("; pay by {}", when(p)));
            }
            chart::Bar {
                lane: i,
                from: b.block.start,
                to: b.block.end,
                state: b.block.state.as_str().to_string(),
                text: tip,
            }
        })
        .collect::<Vec<_>>();
    let mut ticks = Vec::new();
    for b in &shown {
        let i = lanes.iter().position(|l| *l == lane(b)).unwrap_or(0);
        if let Some(p) = b.block.payment_deadline.filter(|_| b.block.state == BlockState::PaymentPending) {
            ticks.push(chart::Tick {
                lane: i,
                at: p,
                kind: "deadline",
                text: format!("{}: payment deadline {}", b.block.reservation_id, when(p)),
            });
        }
        let term = b.block.termination_time();
        ticks.push(chart::Tick {
            lane: i,
            at: term,
            kind: "termination",
            text: format!("{}: instances terminated from {}", b.block.reservation_id, when(term)),
        });
        for m in &d.reminder_lead_minutes {
            let at = b.block.end - Duration::minutes(i64::from(*m));
            if at > d.now {
                ticks.push(chart::Tick {
                    lane: i,
                    at,
                    kind: "reminder",
                    text: format!(
                        "{}: reminder {} before the end",
                        b.block.reservation_id,
                        compact(Duration::minutes(i64::from(*m)))
                    ),
                });
            }
        }
        for x in b.extensions.iter().filter(|x| x.state != ExtensionState::Released) {
            ticks.push(chart::Tick {
                lane: i,
                at: x.offer.start,
                kind: "extension",
                text: format!(
                    "{}: extended {} to {} ({}, {})",
                    b.block.reservation_id,
                    compact(Duration::hours(i64::from(x.offer.duration_hours))),
                    when(x.offer.end),
                    x.offer.fee,
                    x.state.as_str()
                ),
            });
        }
    }
    let summary = format!(
        "{} block(s) in {} lane(s); each row of the table below is one block with its dates.",
        shown.len(),
        lanes.len()
    );
    let svg = chart::lanes(&chart::Lanes {
        title: title.clone(),
        summary,
        lanes: lanes.clone(),
        bars,
        ticks,
        window: (d.now - Duration::days(1), until),
        now: d.now,
    });
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|b| {
            let bl = &b.block;
            let reminders = d
                .reminder_lead_minutes
                .iter()
                .map(|m| bl.end - Duration::minutes(i64::from(*m)))
                .filter(|t| *t > d.now)
                .map(when)
                .collect::<Vec<_>>();
            let ext = b
                .extensions
                .iter()
                .map(|x| {
                    format!(
                        "{} to {} ({}, {})",
                        compact(Duration::hours(i64::from(x.offer.duration_hours))),
                        when(x.offer.end),
                        x.offer.fee,
                        x.state.as_str()
                    )
                })
                .collect::<Vec<_>>();
            vec![
                esc(&lane(b)),
                format!("<code>{}</code>", esc(&bl.reservation_id)),
                state(bl.state),
                esc(&format!("{} × {} in {}", bl.instance_count, bl.instance_type, bl.availability_zone)),
                time(bl.start),
                time(bl.end),
                bl.payment_deadline
                    .filter(|_| bl.state == BlockState::PaymentPending)
                    .map(time)
                    .unwrap_or_else(|| "-".into()),
                time(bl.termination_time()),
                esc(&if reminders.is_empty() { "-".into() } else { reminders.join(", ") }),
                esc(&if ext.is_empty() { "-".into() } else { ext.join("; ") }),
                esc(&if b.shared_with.is_empty() { "-".into() } else { b.shared_with.join(", ") }),
            ]
        })
        .collect();
    let t = table(
        "Blocks in the calendar",
        &[
            "team / rule",
            "block",
            "state",
            "what",
            "start",
            "end",
            "pay by",
            "termination",
            "reminders",
            "extensions",
            "shared with",
        ],
        &rows,
    );
    section("calendar", "Calendar", &format!("{svg}{t}"))
}

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

/// Section 2: Budgets: each budget's spent and committed against its limit, the straight line a month
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
    let over = if committed.amount() > even { "ahead of" } else { "within" };
    format!(
        "<div class=\"card\"><h3>{}</h3>{svg}<p>{} left of {limit} ({} spent, {} in flight); {over} the even line.</p></div>",
        esc(&name),
        Money::new(left, limit.currency()).unwrap_or(zero),
        spent,
        Money::new(pending.max(Decimal::ZERO), limit.currency()).unwrap_or(zero),
    )
}

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

/// Section 3: Price history per rule: a step line per region and type, its threshold, where capblock
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
        let mut series = Vec::new();
        let mut lines = Vec::new();
        for p in
            d.prices.iter().filter(|p| r.regions.contains(&p.region) && r.instance_types.contains(&p.instance_type))
        {
            let pts = cheapest_per_scan(&p.observations);
            if pts.is_empty() {
                continue;
            }
            let label = format!("{} {}", p.region, p.instance_type);
            let lo = pts.iter().map(|x| x.1).min().unwrap_or_default();
            let hi = pts.iter().map(|x| x.1).max().unwrap_or_default();
            let last = pts.last().map(|x| x.1).unwrap_or_default();
            lines.push(format!(
                "{label}: {} scans shown, from {} to {}, last {}",
                pts.len(),
                lo.round_dp(4),
                hi.round_dp(4),
                last.round_dp(4)
            ));
            series.push(Series {
                label: label.clone(),
                points: pts
                    .iter()
                    .map(|(t, v, c)| Point {
                        at: *t,
                        y: f(*v),
                        text: format!("{label}: {} {c}/accelerator-hour at {}", v.round_dp(4), when(*t)),
                    })
                    .collect(),
            });
        }
        let mine: Vec<&PageBlock> =
            d.blocks.iter().filter(|b| b.block.rule_id.as_deref() == Some(r.id.as_str())).collect();
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
            spans.push((
                bl.start,
                bl.end,
                format!("block {}: {} to {}", bl.reservation_id, when(bl.start), when(bl.end)),
            ));
        }
        let title = format!("Rule {}", r.id);
        if series.is_empty() && markers.is_empty() {
            body.push_str(&format!(
                "<h3>{}</h3>{}",
                esc(&title),
                empty("No prices seen for this rule's regions and types in the window.")
            ));
            continue;
        }
        let end =
            spans.iter().map(|s| s.1).max().unwrap_or(d.now).clamp(d.now, d.now + Duration::weeks(CALENDAR_WEEKS));
        // From the first thing to show (a day before it), not always the window's start: a stack
        // a week old would otherwise draw its week in the last tenth of the chart.
        let first = series
            .iter()
            .flat_map(|s: &Series| s.points.iter().map(|p| p.at))
            .chain(markers.iter().map(|m| m.at))
            .chain(spans.iter().map(|s| s.0))
            .min()
            .map_or(from, |t| (t - Duration::days(1)).max(from));
        let summary = format!(
            "{}. Threshold {} {}/accelerator-hour. {} purchase or extension mark(s).",
            if lines.is_empty() { "No prices".to_string() } else { lines.join("; ") },
            r.max_price_per_accelerator_hour,
            r.currency,
            markers.len()
        );
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
        body.push_str(&format!("<h3>{}</h3>{svg}<p class=\"summary\">{}</p>", esc(&title), esc(&summary)));
    }
    section("prices", "Prices", &body)
}

/// Section 4: Approvals waiting: what, its price and fee, how long it may still be approved, and the
/// command to run (no button: buying stays behind the CLI's confirmation and IAM).
pub fn approvals(d: &TeamData) -> String {
    if d.approvals.is_empty() {
        return section("approvals", "Approvals waiting", &empty("No approvals waiting."));
    }
    let rows: Vec<Vec<String>> = d
        .approvals
        .iter()
        .map(|a| {
            let o = &a.offering;
            let rate = o
                .price_per_accelerator_hour(a.accelerators_per_instance)
                .map(|r| r.display())
                .unwrap_or_else(|| "-".into());
            vec![
                esc(&a.rule_id),
                esc(&format!(
                    "{} × {} in {}, {} from {}",
                    o.instance_count,
                    o.instance_type,
                    o.availability_zone,
                    o.length_text(),
                    when(o.start)
                )),
                esc(&rate),
                esc(&o.fee.to_string()),
                esc(&compact(approval::expires_at(a) - d.now)),
                format!("<code>capblock approve {}/{}</code>", esc(&a.rule_id), esc(&o.id)),
            ]
        })
        .collect();
    section(
        "approvals",
        "Approvals waiting",
        &format!(
            "<p class=\"summary\">{} decision(s) wait for a person. Approve in a terminal with the line shown: it prints the plan and asks before it buys.</p>{}",
            d.approvals.len(),
            table(
                "Approvals waiting",
                &["rule", "what", "per accelerator-hour", "fee", "expires in", "to approve"],
                &rows
            )
        ),
    )
}

/// Section 5: Use: each active block's idle instances, idle cost and utilization (the tracker's samples,
/// `domain::usage`), and the month's report with the effective price per used accelerator-hour.
pub fn usage(d: &TeamData) -> String {
    let active: Vec<&PageBlock> = d.blocks.iter().filter(|b| b.block.state == BlockState::Active).collect();
    let mut body = String::from("<h3>Active blocks</h3>");
    if active.is_empty() {
        body.push_str(&empty("No active blocks."));
    } else {
        let rows: Vec<Vec<String>> = active
            .iter()
            .map(|b| {
                let bl = &b.block;
                let span = bl.span();
                let known = bl.usage.is_known();
                let idle_cost = usage::idle_cost(&span, total(b), bl.usage.idle_instance_minutes);
                let util = usage::utilization_so_far(&span, &bl.usage);
                vec![
                    esc(&lane(b)),
                    format!("<code>{}</code>", esc(&bl.reservation_id)),
                    esc(&format!("{} × {}", bl.instance_count, bl.instance_type)),
                    if known {
                        format!("{} of {}", bl.usage.idle, bl.instance_count)
                    } else {
                        "not sampled yet".into()
                    },
                    esc(&idle_cost.map(|m| m.to_string()).unwrap_or_else(|| "-".into())),
                    esc(&util.map(|u| format!("{}%", u.round_dp(1))).unwrap_or_else(|| "-".into())),
                    bl.usage.sampled_at.map(time).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        body.push_str(&table(
            "Active blocks",
            &["team / rule", "block", "what", "idle instances", "idle cost so far", "utilization", "last sample"],
            &rows,
        ));
    }
    body.push_str(&format!("<h3>Month {}</h3>", esc(&d.month.month)));
    if d.month.rules.is_empty() {
        body.push_str(&empty("Nothing bought or extended this month."));
    } else {
        let rows: Vec<Vec<String>> = d
            .month
            .rules
            .iter()
            .map(|r| {
                let m = &r.month;
                vec![
                    esc(&m.rule),
                    esc(&m.team),
                    m.blocks.to_string(),
                    esc(&m.spent.to_string()),
                    esc(&r.budget_limit.map(|l| l.to_string()).unwrap_or_else(|| "-".into())),
                    m.paid_accelerator_hours.round_dp(1).to_string(),
                    m.used_accelerator_hours.round_dp(1).to_string(),
                    esc(&m.utilization_percent.map(|u| format!("{u}%")).unwrap_or_else(|| "-".into())),
                    esc(&m.per_used_accelerator_hour.map(|r| r.display()).unwrap_or_else(|| "-".into())),
                ]
            })
            .collect();
        body.push_str(&table(
            "The month per rule (capblock report)",
            &[
                "rule",
                "team",
                "blocks",
                "spent",
                "budget",
                "paid accelerator-h",
                "used accelerator-h",
                "utilization",
                "per used accelerator-hour",
            ],
            &rows,
        ));
    }
    section("use", "Use", &body)
}

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
        let scans: BTreeSet<DateTime<Utc>> = p.observations.iter().map(|o| o.seen_at).collect();
        let days: BTreeSet<NaiveDate> = scans.iter().map(|t| t.date_naive()).collect();
        let mut on_sale: BTreeMap<&str, (DateTime<Utc>, DateTime<Utc>)> = BTreeMap::new();
        let mut largest: BTreeMap<NaiveDate, u32> = BTreeMap::new();
        let mut rates: Vec<Decimal> = Vec::new();
        let mut recent: Vec<Decimal> = Vec::new();
        for o in &p.observations {
            let e = on_sale.entry(o.offering.id.as_str()).or_insert((o.seen_at, o.seen_at));
            e.0 = e.0.min(o.seen_at);
            e.1 = e.1.max(o.seen_at);
            let c = largest.entry(o.offering.start.date_naive()).or_insert(0);
            *c = (*c).max(o.offering.instance_count);
            if let Some(r) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) {
                rates.push(r.per_unit);
                if o.seen_at >= d.now - Duration::days(7) {
                    recent.push(r.per_unit);
                }
            }
        }
        let mut stays: Vec<Duration> = on_sale.values().map(|(a, b)| *b - *a).collect();
        stays.sort();
        rates.sort();
        recent.sort();
        let median = |v: &[Decimal]| v.get(v.len() / 2).copied();
        let currency = p.observations[0].offering.fee.currency();
        let top: Vec<String> = {
            let mut v: Vec<(NaiveDate, u32)> = largest.iter().map(|(d, c)| (*d, *c)).collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            v.iter().take(3).map(|(d, c)| format!("{c} on {}", d.format("%b %d"))).collect()
        };
        rows.push(vec![
            esc(&format!("{} {}", p.instance_type, p.region)),
            format!("{} scans on {} of {HISTORY_DAYS} days", scans.len(), days.len()),
            on_sale.len().to_string(),
            esc(&stays.get(stays.len() / 2).map(|d| compact(*d)).unwrap_or_else(|| "-".into())),
            esc(&stays.last().map(|d| compact(*d)).unwrap_or_else(|| "-".into())),
            esc(&top.join(", ")),
            esc(&median(&rates).map(|m| format!("{} {currency}", m.round_dp(4))).unwrap_or_else(|| "-".into())),
            esc(&median(&recent).map(|m| format!("{} {currency}", m.round_dp(4))).unwrap_or_else(|| "-".into())),
        ]);
        // The largest count per start day, as steps over the start days.
        let points: Vec<Point> = largest
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
        let summary = format!("The most instances offered in one offering, per start day: {}.", top.join(", "));
        body.push_str(&format!(
            "<h3>{}</h3>{}",
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
        ));
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
