//! Plain text tables: columns padded to their widest cell, at most `MAX_COLUMN` characters.
//! Written here rather than with a table crate: capblock's tables are plain columns (no borders,
//! colours or wrapping) that scripts and tests read, every cell goes through `safe` (text from
//! EC2 or AWS must not move a terminal's cursor), and the whole of it is a few dozen lines.

use std::borrow::Cow;

use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::money::Money;
use chrono::{DateTime, Duration, Utc};

/// Text from outside (an alarm's name, an event's field, an AWS error) made safe for a
/// terminal: control characters (escape sequences that move the cursor, clear the screen or
/// rewrite the title) and bidirectional overrides are written as `\u{..}` escapes.
pub fn safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars().map(|c| if unsafe_char(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect(),
    )
}

/// A message made safe for a terminal as [`safe`] makes a cell, keeping its line breaks and
/// tabs: capblock's own messages span lines (a rule's problems one per line), and escaping them
/// printed `\u{a}` in the middle of the advice. Everything else `safe` escapes still is.
pub fn safe_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| line.split('\t').map(safe).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A time cell: "2026-12-03 10:30" (UTC; the headers say so).
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// The account's monthly cap as a sentence says it (`account cap 1000.00 USD a month`).
pub fn account_cap(budget: Option<Money>) -> String {
    budget.map_or("no account cap".to_string(), |m| format!("account cap {m} a month"))
}

/// An offering as a question about buying it says it: count, type, zone, times and fee.
pub fn block(o: &capblock_shared::domain::offering::Offering) -> String {
    format!(
        "{} x {} in {} from {} to {} UTC for {}",
        o.instance_count,
        o.instance_type,
        o.availability_zone,
        o.start.format("%Y-%m-%d %H:%M"),
        o.end.format("%Y-%m-%d %H:%M"),
        o.fee
    )
}

/// A money cell: the amount to the cent, without the currency (the header names it). Every
/// Decimal is rounded before `{:.N}`, which cuts digits off rather than rounding them.
pub fn money(m: &Money) -> String {
    format!("{:.2}", m.amount().round_dp(2))
}

/// A duration cell: "2d 3h", "5h 10m", "12m".
pub fn span(d: Duration) -> String {
    let m = d.num_minutes().max(0);
    let (days, hours, mins) = (m / 1440, (m % 1440) / 60, m % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {mins}m")
    } else {
        format!("{mins}m")
    }
}

/// The widest a column gets: a longer cell (a rule with many regions) is cut with an ellipsis,
/// so one value cannot push the others off the screen.
pub const MAX_COLUMN: usize = 60;

/// `cell`, cut to `MAX_COLUMN` characters.
fn clamp(cell: &str) -> String {
    match cell.char_indices().nth(MAX_COLUMN) {
        None => cell.to_string(),
        Some(_) => {
            let keep = cell.char_indices().nth(MAX_COLUMN - 1).map_or(cell.len(), |(i, _)| i);
            format!("{}…", &cell[..keep])
        }
    }
}

pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let clamped = |cells: &mut dyn Iterator<Item = &str>| cells.map(|c| clamp(&safe(c))).collect::<Vec<_>>();
    let head = clamped(&mut headers.iter().copied());
    let body: Vec<Vec<String>> = rows.iter().map(|r| clamped(&mut r.iter().map(String::as_str))).collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in &body {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Padded by hand: `format!("{c:<w$}")` panics for widths past 65,535.
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w.saturating_sub(c.chars().count()))))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(&head)];
    out.extend(body.iter().map(|r| line(r)));
    out.join("\n")
}

/// Offerings as table rows (also the scan's decision).
pub fn offering_rows(list: &[Priced]) -> Vec<Vec<String>> {
    list.iter()
        .map(|p| {
            let o = &p.offering;
            vec![
                o.region.to_string(),
                o.availability_zone.clone(),
                match &o.ultraservers {
                    Some(u) => format!("{u} ({})", o.instance_type),
                    None => o.instance_type.to_string(),
                },
                o.instance_count.to_string(),
                o.start.format("%Y-%m-%d %H:%M").to_string(),
                o.end.format("%Y-%m-%d %H:%M").to_string(),
                o.length_text(),
                format!("{} {}", money(&o.fee), o.fee.currency()),
                format!("{:.4}", p.per_instance_hour.per_unit.round_dp(4)),
                format!("{:.4}", p.per_accelerator_hour.per_unit.round_dp(4)),
                o.id.clone(),
            ]
        })
        .collect()
}

/// The offering id last: what an approval names, and EC2 may give the same block a new one in
/// its next answer.
pub const OFFERING_HEADERS: [&str; 11] = [
    "REGION",
    "AZ",
    "TYPE",
    "COUNT",
    "START (UTC)",
    "END (UTC)",
    "LENGTH",
    "FEE",
    "$/INSTANCE-H",
    "$/ACCEL-H",
    "OFFERING",
];

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_reach_no_terminal() {
        let hostile = "capblock-x\u{1b}]0;owned\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}gpj";
        let shown = super::safe(hostile);
        assert!(!shown.chars().any(|c| c.is_control() || c == '\u{202e}'), "{shown:?}");
        assert_eq!(shown, "capblock-x\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{d}\\u{9b}31m\\u{202e}gpj");
        assert!(matches!(super::safe("plain é text"), std::borrow::Cow::Borrowed(_)));
        let table = super::render(&["ALARM"], &[vec![hostile.into()]]);
        assert!(!table.chars().any(|c| c != '\n' && c.is_control()), "{table:?}");
    }

    /// A message keeps its own line breaks and tabs, and nothing else that moves a cursor.
    #[test]
    fn a_message_keeps_its_lines_and_loses_its_escapes() {
        let said = super::safe_lines("rule.toml: 2 problems:\n\t- regions: empty\n\t- name \u{1b}[2J\r");
        assert_eq!(said, "rule.toml: 2 problems:\n\t- regions: empty\n\t- name \\u{1b}[2J\\u{d}");
        assert!(!said.contains("\\u{a}"), "{said}");
    }

    #[test]
    fn pads_columns() {
        let t = super::render(&["a", "bb"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "a    bb\nxxx  y");
    }

    #[test]
    fn wide_cells_are_cut_with_an_ellipsis() {
        // A rule with 10,000 regions: the REGIONS cell is 150,000 characters.
        let regions = vec!["us-east-1"; 10_000].join(",");
        let t = super::render(&["ID", "REGIONS", "MODE"], &[vec!["r".into(), regions, "live".into()]]);
        let row = t.lines().nth(1).unwrap();
        // "ID" is two wide, then two spaces.
        let cell: String = row.chars().skip(4).take(super::MAX_COLUMN).collect();
        assert!(cell.starts_with("us-east-1,us-east-1,") && cell.ends_with('…'), "{cell}");
        assert_eq!(row.chars().count(), 4 + super::MAX_COLUMN + 2 + 4);
        // Exactly at the limit, nothing is cut; multi-byte characters are counted as one.
        let exact = "é".repeat(super::MAX_COLUMN);
        assert_eq!(super::render(&["X"], &[vec![exact.clone()]]).lines().nth(1), Some(exact.as_str()));
        let over = super::render(&["X"], &[vec!["é".repeat(super::MAX_COLUMN + 1)]]);
        assert_eq!(over.lines().nth(1).unwrap().chars().count(), super::MAX_COLUMN);
    }
}
