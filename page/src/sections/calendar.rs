//! Section 2: the calendar of blocks, a lane per team and rule, and its table.

use std::collections::BTreeSet;

use capblock_core::app::team_page::{CALENDAR_WEEKS, PageBlock, TeamData};
use capblock_core::domain::block::Block;
use capblock_core::domain::duration::compact;
use capblock_core::domain::extension::{ExtensionIntent, ExtensionState};
use capblock_core::domain::lifecycle::BlockState;
use chrono::{DateTime, Duration, Utc};

use super::{lane, section, state, time, when};
use crate::chart::{self, Bar, Tick};
use crate::html::{empty, esc, table};

/// The calendar table's columns: one row per block, the text of its bar and marks.
const COLUMNS: [&str; 12] = [
    "team / rule",
    "block",
    "state",
    "what",
    "fee",
    "start",
    "end",
    "pay by",
    "termination",
    "reminders",
    "extensions",
    "shared with",
];

/// Section 2: The calendar: the blocks held now or starting within `CALENDAR_WEEKS`, one lane per team
/// and rule, coloured by state; the table below is its text and carries every date.
pub fn calendar(d: &TeamData) -> String {
    let until = d.now + Duration::weeks(CALENDAR_WEEKS);
    let shown: Vec<&PageBlock> = d
        .blocks
        .iter()
        .filter(|b| b.block.start < until && b.block.termination_time() > d.now - Duration::days(1))
        .filter(|b| !matches!(b.block.state, BlockState::Released | BlockState::PaymentFailed) || b.block.end > d.now)
        .collect();
    if shown.is_empty() {
        return section(
            "calendar",
            "Calendar",
            &empty(&format!("No blocks held or starting in the next {CALENDAR_WEEKS} weeks.")),
        );
    }
    let lanes: BTreeSet<String> = shown.iter().map(|b| lane(b)).collect();
    let lanes: Vec<String> = lanes.into_iter().collect();
    let lane_of = |b: &PageBlock| lanes.iter().position(|l| *l == lane(b)).unwrap_or(0);
    let bars = shown.iter().map(|b| bar(b, lane_of(b))).collect::<Vec<_>>();
    let ticks: Vec<Tick> = shown.iter().flat_map(|b| ticks(d, b, lane_of(b))).collect();
    let window = window(&bars, &ticks, d.now);
    let title = format!("Blocks from {} to {}", window.0.format("%b %d"), window.1.format("%b %d"));
    let summary = format!(
        "{} block(s) in {} lane(s); each row of the table below is one block with its dates.",
        shown.len(),
        lanes.len()
    );
    let lanes = chart::Lanes { title, summary, lanes, bars, ticks, window, now: d.now };
    let svg = chart::lanes(&lanes);
    let legend = chart::lanes_legend(&lanes);
    let rows: Vec<Vec<String>> = shown.iter().map(|b| row(d, b)).collect();
    let t = table("Blocks in the calendar", &COLUMNS, &rows);
    section("calendar", "Calendar", &format!("<div class=\"scroll chart-box\">{svg}</div>{legend}{t}"))
}

/// The calendar's time axis: from shortly before the earliest bar or mark (or now, if sooner) to
/// just after the latest, so the blocks fill the width (a fixed 8 weeks drew a week's blocks in its
/// first tenth). The margin is a twentieth of the span each side, at least three hours.
fn window(bars: &[Bar], ticks: &[Tick], now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let times = bars.iter().flat_map(|b| [b.from, b.to]).chain(ticks.iter().map(|t| t.at)).chain([now]);
    let (lo, hi) = times.fold((now, now), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let margin = ((hi - lo) / 20).max(Duration::hours(3));
    (lo - margin, hi + margin)
}

/// The payment deadline a block still has to meet: only a pending payment's.
fn pay_by(bl: &Block) -> Option<DateTime<Utc>> {
    bl.payment_deadline.filter(|_| bl.state == BlockState::PaymentPending)
}

/// The reminders still to come before the block's end: each lead, and when it falls.
fn reminders<'a>(d: &'a TeamData, bl: &'a Block) -> impl Iterator<Item = (u32, DateTime<Utc>)> + 'a {
    d.reminder_lead_minutes.iter().map(|m| (*m, bl.end - Duration::minutes(i64::from(*m)))).filter(|(_, t)| *t > d.now)
}

/// An extension in words: "1d to Tue Dec 08 09:00 (100.00 USD, paid)".
fn extension(x: &ExtensionIntent) -> String {
    format!(
        "{} to {} ({}, {})",
        compact(Duration::hours(i64::from(x.offer.duration_hours))),
        when(x.offer.end),
        x.offer.fee,
        x.state.as_str()
    )
}

/// A block's bar on its lane, its tooltip saying what and when.
fn bar(b: &PageBlock, lane: usize) -> Bar {
    let bl = &b.block;
    let mut tip = format!(
        "{} {} × {} in {} ({}), {} to {}",
        bl.reservation_id,
        bl.instance_count,
        bl.instance_type,
        bl.availability_zone,
        bl.state.as_str(),
        when(bl.start),
        when(bl.end)
    );
    if let Some(p) = pay_by(bl) {
        tip.push_str(&format!("; pay by {}", when(p)));
    }
    Bar { lane, from: bl.start, to: bl.end, state: bl.state.as_str().to_string(), text: tip }
}

/// A block's marks on its lane: its payment deadline, its termination, the reminders to come and
/// its extensions.
fn ticks(d: &TeamData, b: &PageBlock, lane: usize) -> Vec<Tick> {
    let bl = &b.block;
    let id = &bl.reservation_id;
    let mut ticks = Vec::new();
    if let Some(p) = pay_by(bl) {
        ticks.push(Tick { lane, at: p, kind: "deadline", text: format!("{id}: payment deadline {}", when(p)) });
    }
    let term = bl.termination_time();
    ticks.push(Tick {
        lane,
        at: term,
        kind: "termination",
        text: format!("{id}: instances terminated from {}", when(term)),
    });
    for (m, at) in reminders(d, bl) {
        let lead = compact(Duration::minutes(i64::from(m)));
        ticks.push(Tick { lane, at, kind: "reminder", text: format!("{id}: reminder {lead} before the end") });
    }
    for x in b.extensions.iter().filter(|x| x.state != ExtensionState::Released) {
        ticks.push(Tick {
            lane,
            at: x.offer.start,
            kind: "extension",
            text: format!("{id}: extended {}", extension(x)),
        });
    }
    ticks
}

/// A block's row of the table: every date its bar and marks show.
fn row(d: &TeamData, b: &PageBlock) -> Vec<String> {
    let bl = &b.block;
    let reminders = reminders(d, bl).map(|(_, t)| when(t)).collect::<Vec<_>>();
    let ext = b.extensions.iter().map(extension).collect::<Vec<_>>();
    vec![
        esc(&lane(b)),
        format!("<code>{}</code>", esc(&bl.reservation_id)),
        state(bl.state),
        esc(&format!("{} × {} in {}", bl.instance_count, bl.instance_type, bl.availability_zone)),
        // Unknown for a block adopted without its purchase (EC2 does not say what was paid).
        esc(&bl.fee.map_or("-".to_string(), |f| f.to_string())),
        time(bl.start),
        time(bl.end),
        pay_by(bl).map(time).unwrap_or_else(|| "-".into()),
        time(bl.termination_time()),
        esc(&if reminders.is_empty() { "-".into() } else { reminders.join(", ") }),
        esc(&if ext.is_empty() { "-".into() } else { ext.join("; ") }),
        esc(&if b.shared_with.is_empty() { "-".into() } else { b.shared_with.join(", ") }),
    ]
}
