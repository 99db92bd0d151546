//! Text tables for a person and for a script, laid out by comfy-table.
//!
//! Why a crate: a table must fit the terminal it is printed on. At 80 columns the hand-written
//! padder printed rows of 125-200 characters that the terminal broke over 2-3 lines, and it cut
//! long cells (a preflight finding's advice) with an ellipsis. comfy-table (maintained, no
//! unsafe code, used without its crossterm feature) wraps a cell inside its column instead,
//! at word boundaries, keeping the columns aligned; columns marked `whole` (ids, zones,
//! numbers) are never wrapped, so they can be copied. The tables stay plain columns, as
//! kubectl prints them: no borders (the `NOTHING` preset), two spaces between columns, no
//! trailing spaces, so scripts that read columns keep working.
//!
//! Where the width comes from (`Layout::detect`), the same for every table on either stream:
//! `COLUMNS` when it holds a positive number, wherever the output goes; else the terminal's width
//! when the stream the table is printed on (stdout, or stderr for `buy`'s and `approve`'s plan)
//! is a terminal; else nothing is wrapped: each row is one line, every cell whole, stable for
//! `grep`, `awk` and `cut`, as kubectl and the aws CLI print on a pipe. `COLUMNS` is honoured on
//! a pipe because setting it is asking: bash and zsh keep their own `COLUMNS` unexported, so a
//! program sees it only when someone exported it or wrote `COLUMNS=100 capblock ... | less`
//! (as `ls -C` and Python's `shutil.get_terminal_size` read it), and it is how the tests ask
//! for a width without a terminal. A script that must have whole rows whatever the environment
//! says uses `-o wide`, `-o json` or `-o yaml`: `-o wide` adds the columns the narrow default
//! leaves out and is never wrapped.
//!
//! Every cell and header goes through `safe`: text from EC2 or AWS must not move a terminal's
//! cursor. Numbers are right-aligned; money is an amount to the cent (`money`) under a header
//! that names the currency (`in_currency`: `FEE (USD)`), the same in every table.

use std::borrow::Cow;

use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::money::Money;
use chrono::{DateTime, Utc};

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

/// Whether times are also shown in the local time zone (`--tz`).
static LOCAL_TOO: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--tz`: every time `when` shows is followed by the same instant in the local time zone (`TZ`,
/// else the system's). Call once, before any command runs.
pub fn show_local_time(on: bool) {
    LOCAL_TOO.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A time cell: "2026-12-03 10:30" (UTC; the headers say so); with `--tz`, the local time
/// beside it: "2026-12-03 10:30 (11:30 +01:00)".
pub fn when(t: DateTime<Utc>) -> String {
    when_in(t, "", local(t))
}

/// A time in a sentence: "2026-12-03 10:30 UTC"; with `--tz`, "2026-12-03 10:30 UTC (11:30 +01:00)".
pub fn when_utc(t: DateTime<Utc>) -> String {
    when_in(t, " UTC", local(t))
}

/// `t` in the local zone when `--tz` asks for it.
fn local(t: DateTime<Utc>) -> Option<DateTime<chrono::FixedOffset>> {
    LOCAL_TOO.load(std::sync::atomic::Ordering::Relaxed).then(|| t.with_timezone(&chrono::Local).fixed_offset())
}

/// `t` in UTC (followed by `zone`), and `local` (the same instant in a zone) after it: its time
/// and offset, and its date when that is another day.
fn when_in(t: DateTime<Utc>, zone: &str, local: Option<DateTime<chrono::FixedOffset>>) -> String {
    let utc = format!("{}{zone}", t.format("%Y-%m-%d %H:%M"));
    match local {
        None => utc,
        Some(l) if l.date_naive() == t.date_naive() => format!("{utc} ({})", l.format("%H:%M %:z")),
        Some(l) => format!("{utc} ({})", l.format("%Y-%m-%d %H:%M %:z")),
    }
}

/// The account's monthly cap as a sentence says it (`account cap 1000.00 USD a month`).
pub fn account_cap(budget: Option<Money>) -> String {
    budget.map_or("no account cap".to_string(), |m| format!("account cap {m} a month"))
}

/// An offering as a question about buying it says it: count, type, zone, times and fee.
pub fn block(o: &capblock_shared::domain::offering::Offering) -> String {
    format!(
        "{} x {} in {} from {} to {} for {}",
        o.instance_count,
        o.instance_type,
        o.availability_zone,
        when_utc(o.start),
        when_utc(o.end),
        o.fee
    )
}

/// A money cell: the amount to the cent, without the currency (the header names it). Every
/// Decimal is rounded before `{:.N}`, which cuts digits off rather than rounding them.
pub fn money(m: &Money) -> String {
    format!("{:.2}", m.amount().round_dp(2))
}

/// One column of a table: its header, how its cells sit, and whether only `-o wide` shows it.
#[derive(Debug, Clone)]
pub struct Column {
    header: String,
    /// Right-aligned (numbers).
    right: bool,
    /// Never wrapped: ids, zones, times and numbers are read (and copied) whole.
    whole: bool,
    /// Shown only with `-o wide`.
    wide: bool,
    /// Shown only without `-o wide` (what wide shows in columns of its own, said in one).
    narrow: bool,
    /// Left out of a narrow table that would not fit its width on a line a row (`render`).
    spare: bool,
}

impl Column {
    /// Text, wrapped at word boundaries when the table is wider than the terminal.
    pub fn text(header: impl Into<String>) -> Column {
        Column { header: header.into(), right: false, whole: false, wide: false, narrow: false, spare: false }
    }

    /// Text that is never wrapped: an id, a zone, a state, a time.
    pub fn whole(header: impl Into<String>) -> Column {
        Column { whole: true, ..Column::text(header) }
    }

    /// A number: right-aligned, never wrapped. Money's header names its currency (`in_currency`).
    pub fn number(header: impl Into<String>) -> Column {
        Column { right: true, whole: true, ..Column::text(header) }
    }

    /// Only in `-o wide`.
    pub fn wide(self) -> Column {
        Column { wide: true, ..self }
    }

    /// Only in the narrow default: `-o wide` has its content in columns of their own.
    pub fn narrow(self) -> Column {
        Column { narrow: true, ..self }
    }

    /// Left out of a narrow table too wide for its terminal (`render` names it under the
    /// table); piped and in `-o wide` it is there.
    pub fn spare(self) -> Column {
        Column { spare: true, ..self }
    }
}

/// How a table is printed: the narrow default or every column (`wide`), and the width to wrap
/// the narrow one to (`None`: nothing wrapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub wide: bool,
    pub width: Option<u16>,
}

/// The stream a table is printed on: its width is that terminal's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Layout {
    /// For a table on stdout (the module's doc says why): `COLUMNS`, else the terminal's width,
    /// else none. `-o wide` is never wrapped.
    pub fn detect(wide: bool) -> Layout {
        Layout::detect_on(wide, Stream::Stdout)
    }

    /// As `detect`, for a table printed on `stream`.
    pub fn detect_on(wide: bool, stream: Stream) -> Layout {
        if wide {
            return Layout { wide, width: None };
        }
        let columns = std::env::var("COLUMNS").ok();
        Layout { wide, width: width(columns.as_deref(), terminal_width(stream)) }
    }

    /// The narrow set, unwrapped (the tests' layout).
    #[cfg(test)]
    pub const PLAIN: Layout = Layout { wide: false, width: None };
}

/// `stream`'s terminal width, when it is a terminal.
fn terminal_width(stream: Stream) -> Option<u16> {
    use std::io::IsTerminal;
    let size = match stream {
        Stream::Stdout if std::io::stdout().is_terminal() => terminal_size::terminal_size_of(std::io::stdout()),
        Stream::Stderr if std::io::stderr().is_terminal() => terminal_size::terminal_size_of(std::io::stderr()),
        _ => None,
    };
    size.map(|(w, _)| w.0)
}

/// The width to wrap to: `COLUMNS` when it is a positive number, else the terminal's.
fn width(columns: Option<&str>, terminal: Option<u16>) -> Option<u16> {
    columns.and_then(|c| c.trim().parse::<u16>().ok()).filter(|w| *w > 0).or(terminal)
}

/// `label (CURRENCY)`: a money column's header, as every table says it.
pub fn in_currency(label: &str, currency: impl std::fmt::Display) -> String {
    format!("{label} ({currency})")
}

/// The table: `columns` over `rows` (a cell per column, in order), laid out as `layout` says.
/// Columns marked `wide` are left out unless `layout.wide`. Given a width, the narrow table is
/// fitted to it here, not by comfy-table (whose dynamic arrangement splits a word longer than
/// the room it gives a column): where the rows would not fit on a line each, the `spare`
/// columns are left out, the rightmost first, and a last line names them; then each text cell
/// is wrapped between its words into a column never narrower than its longest word, so an
/// instance type, a region, an id or a command to copy is never cut in two. Where even that does
/// not fit, the table is wider than the terminal, which breaks its lines between whole words.
pub fn render(columns: &[Column], rows: &[Vec<String>], layout: Layout) -> String {
    use comfy_table::CellAlignment;
    let mut shown: Vec<usize> =
        (0..columns.len()).filter(|i| if layout.wide { !columns[*i].narrow } else { !columns[*i].wide }).collect();
    let mut left_out = Vec::new();
    if let Some(w) = layout.width {
        while natural_width(columns, &shown, rows) > usize::from(w) {
            let Some(at) = shown.iter().rposition(|i| columns[*i].spare) else { break };
            left_out.push(columns[shown.remove(at)].header.clone());
        }
    }
    let wraps = layout.width.map(|w| text_widths(columns, &shown, rows, usize::from(w)));
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    t.set_header(shown.iter().map(|i| safe(&columns[*i].header).into_owned()).collect::<Vec<_>>());
    for r in rows {
        t.add_row(
            shown
                .iter()
                .enumerate()
                .map(|(n, i)| {
                    let cell = safe(r.get(*i).map_or("", String::as_str)).into_owned();
                    match wraps.as_ref().and_then(|w| w[n]) {
                        Some(width) => wrap(&cell, width),
                        None => cell,
                    }
                })
                .collect::<Vec<_>>(),
        );
    }
    let last = shown.len().saturating_sub(1);
    for (n, i) in shown.iter().enumerate() {
        let Some(column) = t.column_mut(n) else { continue };
        column.set_padding((0, if n == last { 0 } else { 2 }));
        if columns[*i].right {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut text = t.trim_fmt();
    if let (false, Some(w)) = (left_out.is_empty(), layout.width) {
        text.push_str(&format!("\nleft out to fit {w} columns: {}; -o wide shows every column", left_out.join(", ")));
    }
    text
}

/// The width of each of the `shown` columns' text, for a table `width` wide: `None` for a column
/// never wrapped (whole, or wide enough for its longest cell), else the width to wrap its cells
/// to. A text column gets at least its longest word (and its header: a header is never wrapped,
/// scripts read it), then the room left is shared out among the columns that want more, evenly,
/// none getting more than its longest line.
fn text_widths(columns: &[Column], shown: &[usize], rows: &[Vec<String>], width: usize) -> Vec<Option<usize>> {
    let cells = |i: usize| rows.iter().map(move |r| r.get(i).map_or("", String::as_str));
    let longest = |i: usize| cells(i).map(line_width).chain(std::iter::once(line_width(&columns[i].header))).max();
    let natural: Vec<usize> = shown.iter().map(|i| longest(*i).unwrap_or(0)).collect();
    let least: Vec<usize> = shown
        .iter()
        .zip(&natural)
        .map(|(i, n)| if columns[*i].whole { *n } else { least_text_width(&columns[*i], cells(*i)) })
        .collect();
    let gaps = 2 * shown.len().saturating_sub(1);
    let mut given = least.clone();
    let mut room = width.saturating_sub(least.iter().sum::<usize>() + gaps);
    loop {
        let wanting: Vec<usize> = (0..shown.len()).filter(|n| given[*n] < natural[*n]).collect();
        if wanting.is_empty() || room == 0 {
            break;
        }
        let share = (room / wanting.len()).max(1);
        for n in wanting {
            let more = share.min(natural[n] - given[n]).min(room);
            given[n] += more;
            room -= more;
        }
    }
    (0..shown.len()).map(|n| (given[n] < natural[n]).then_some(given[n])).collect()
}

/// The widest line of `text` (as `safe` prints it).
fn line_width(text: &str) -> usize {
    safe(text).lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The narrowest a text column `c` holding `cells` may be: its header, and its longest word.
fn least_text_width<'a>(c: &'a Column, cells: impl Iterator<Item = &'a str>) -> usize {
    let word = |text: &str| safe(text).split_whitespace().map(|w| w.chars().count()).max().unwrap_or(0);
    cells.map(word).chain(std::iter::once(line_width(&c.header))).max().unwrap_or(1).max(1)
}

/// `text` wrapped to `width` between its words (its own line breaks kept): a word is never cut,
/// a line holds as many words as fit, one space apart.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let mut current = String::new();
        for word in line.split_whitespace() {
            let len = current.chars().count();
            if len > 0 && len + 1 + word.chars().count() > width {
                out.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push(current);
    }
    out.join("\n")
}

/// The width the `shown` columns take with every row on one line: each column as wide as its
/// widest cell or header, two spaces between columns.
fn natural_width(columns: &[Column], shown: &[usize], rows: &[Vec<String>]) -> usize {
    let widest = |i: usize| {
        rows.iter()
            .map(|r| r.get(i).map_or(0, |c| line_width(c)))
            .chain(std::iter::once(line_width(&columns[i].header)))
            .max()
    };
    shown.iter().map(|i| widest(*i).unwrap_or(0)).sum::<usize>() + 2 * shown.len().saturating_sub(1)
}

/// The columns of `offering_rows`. The id first and whole (what `buy` takes, as kubectl puts
/// NAME first). The narrow set: the short id (`short_ids`: `buy` takes it as it takes the whole
/// one), the zone (which names its region: rows from two regions or zones differ), the block,
/// when it starts, how long, the fee and the price the list is sorted by; at 80 columns the fee
/// and then the length are left out (`spare`: the price per accelerator-hour, the count and
/// the start say the choice; the plan `buy` prints says the fee before it asks). `-o wide` shows
/// the whole id and adds the region, the end and the price per instance-hour.
pub fn offering_columns(currency: &str) -> Vec<Column> {
    vec![
        Column::whole("OFFERING").narrow(),
        Column::whole("OFFERING").wide(),
        Column::whole("REGION").wide(),
        Column::whole("AZ"),
        Column::text("BLOCK"),
        Column::text("START (UTC)"),
        Column::text("END (UTC)").wide(),
        Column::whole("LENGTH").spare(),
        Column::number(in_currency("FEE", currency)).spare(),
        Column::number(format!("{currency}/INSTANCE-H")).wide(),
        Column::number(format!("{currency}/ACCEL-H")),
    ]
}

/// The shortest prefix an id is shown by in the narrow table: `cb-` and 8 characters.
pub const SHORT_ID: usize = 11;

/// Each id as the narrow table prints it: its first `SHORT_ID` characters, or more where two ids
/// of the list would read the same (as git shortens a commit hash). EC2's offering ids are
/// `cb-` and 17 hex digits: the whole id took 20 of a row's 80 columns. `capblock buy` takes a
/// short id and finds the one offering shown in the last hour whose id starts with it (or
/// names them all when several do).
pub fn short_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let all: Vec<&str> = ids.into_iter().collect();
    let distinct: std::collections::BTreeSet<&str> = all.iter().copied().collect();
    let prefix = |id: &str, n: usize| id.chars().take(n).collect::<String>();
    let unique = |n: usize| {
        distinct.iter().map(|id| prefix(id, n)).collect::<std::collections::BTreeSet<_>>().len() == distinct.len()
    };
    let longest = all.iter().map(|id| id.chars().count()).max().unwrap_or(0);
    let n = (SHORT_ID..longest).find(|n| unique(*n)).unwrap_or(longest.max(SHORT_ID));
    all.iter().map(|id| prefix(id, n)).collect()
}

/// A bought or seen block's columns, after its time (`history`, `backtest`): the block, its
/// start, the fee and the price per accelerator-hour; `-o wide` adds its length.
pub fn block_columns(currency: &str) -> [Column; 5] {
    [
        Column::text("BLOCK"),
        Column::text("START (UTC)"),
        Column::text("LENGTH").wide(),
        Column::number(in_currency("FEE", currency)),
        Column::number(format!("{currency}/ACCEL-H")),
    ]
}

/// The currency of a list of amounts (USD when the list is empty): every EC2 fee is in one.
pub fn currency<'a>(amounts: impl IntoIterator<Item = &'a Money>) -> String {
    amounts.into_iter().next().map_or_else(|| "USD".to_string(), |m| m.currency().to_string())
}

/// Offerings as table rows, the short id first (`short_ids`), then the whole one.
pub fn offering_rows(list: &[Priced]) -> Vec<Vec<String>> {
    let short = short_ids(list.iter().map(|p| p.offering.id.as_str()));
    list.iter()
        .zip(short)
        .map(|(p, short)| {
            let o = &p.offering;
            vec![
                short,
                o.id.clone(),
                o.region.to_string(),
                o.availability_zone.clone(),
                match &o.ultraservers {
                    Some(u) => format!("{u} ({})", o.instance_type),
                    None => format!("{} x {}", o.instance_count, o.instance_type),
                },
                when(o.start),
                when(o.end),
                o.length_text(),
                money(&o.fee),
                format!("{:.4}", p.per_instance_hour.per_unit.round_dp(4)),
                format!("{:.4}", p.per_accelerator_hour.per_unit.round_dp(4)),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_reach_no_terminal() {
        let hostile = "capblock-x\u{1b}]0;owned\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}gpj";
        let shown = super::safe(hostile);
        assert!(!shown.chars().any(|c| c.is_control() || c == '\u{202e}'), "{shown:?}");
        assert_eq!(shown, "capblock-x\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{d}\\u{9b}31m\\u{202e}gpj");
        assert!(matches!(super::safe("plain é text"), std::borrow::Cow::Borrowed(_)));
        let table = super::render(&[super::Column::text(hostile)], &[vec![hostile.into()]], super::Layout::PLAIN);
        assert!(!table.chars().any(|c| c != '\n' && c.is_control()), "{table:?}");
        let wrapped = super::render(
            &[super::Column::text("ALARM")],
            &[vec![hostile.repeat(20)]],
            super::Layout { wide: false, width: Some(40) },
        );
        assert!(!wrapped.chars().any(|c| c != '\n' && c.is_control()), "{wrapped:?}");
    }

    /// A message keeps its own line breaks and tabs, and nothing else that moves a cursor.
    #[test]
    fn a_message_keeps_its_lines_and_loses_its_escapes() {
        let said = super::safe_lines("rule.toml: 2 problems:\n\t- regions: empty\n\t- name \u{1b}[2J\r");
        assert_eq!(said, "rule.toml: 2 problems:\n\t- regions: empty\n\t- name \\u{1b}[2J\\u{d}");
        assert!(!said.contains("\\u{a}"), "{said}");
    }

    use super::{Column, Layout, render};

    fn plain(headers: &[&str], rows: &[Vec<String>]) -> String {
        let columns: Vec<Column> = headers.iter().map(|h| Column::text(*h)).collect();
        render(&columns, rows, Layout::PLAIN)
    }

    #[test]
    fn pads_columns() {
        let t = plain(&["a", "bb"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "a    bb\nxxx  y");
    }

    /// Numbers are right-aligned under their header; nothing trails a line.
    #[test]
    fn numbers_are_right_aligned() {
        let columns = [Column::whole("RULE"), Column::number(super::in_currency("FEE", "USD"))];
        let t =
            render(&columns, &[vec!["a".into(), "5.00".into()], vec!["b".into(), "12345.67".into()]], Layout::PLAIN);
        assert_eq!(t, "RULE  FEE (USD)\na          5.00\nb      12345.67");
    }

    /// The narrow default leaves out the wide columns; `-o wide` shows them, and leaves out
    /// the narrow-only ones.
    #[test]
    fn wide_columns_only_in_wide() {
        let columns = [Column::whole("ID"), Column::text("DETAIL").wide(), Column::text("SUMMARY").narrow()];
        let rows = [vec!["r1".to_string(), "more".to_string(), "in short".to_string()]];
        assert_eq!(render(&columns, &rows, Layout::PLAIN), "ID  SUMMARY\nr1  in short");
        assert_eq!(render(&columns, &rows, Layout { wide: true, width: None }), "ID  DETAIL\nr1  more");
    }

    /// At 80 columns a long cell is wrapped inside its column at word boundaries, never cut:
    /// every word of the advice is there, no line passes 80, and the id stays whole.
    #[test]
    fn a_long_cell_wraps_within_the_width_and_loses_nothing() {
        let advice = "allow lambda:InvokeFunction on the stack's functions for the role you run preflight \
                      with, then run capblock preflight again; the functions' own roles are checked by them";
        let columns = [Column::whole("CHECK"), Column::whole("VERDICT"), Column::text("WHAT TO DO")];
        let rows = [vec!["functions-invocable-by-you".to_string(), "fail".to_string(), advice.to_string()]];
        let t = render(&columns, &rows, Layout { wide: false, width: Some(80) });
        assert!(t.lines().all(|l| l.chars().count() <= 80), "{t}");
        assert!(t.lines().count() > 2, "wrapped over several lines: {t}");
        assert!(!t.contains('…'), "{t}");
        let words: Vec<&str> = t.lines().skip(1).flat_map(|l| l.split_whitespace()).collect();
        let expected: Vec<&str> =
            ["functions-invocable-by-you", "fail"].into_iter().chain(advice.split_whitespace()).collect();
        assert_eq!(words, expected, "{t}");
        // Piped (no width), the row is one line.
        assert_eq!(render(&columns, &rows, Layout::PLAIN).lines().count(), 2);
    }

    /// `--tz`: the local time after the UTC one, with its offset, and its date when it is another
    /// day there.
    #[test]
    fn a_time_in_a_zone_follows_the_utc_one() {
        use chrono::{FixedOffset, TimeZone, Utc};
        let t = Utc.with_ymd_and_hms(2026, 12, 3, 10, 30, 0).unwrap();
        assert_eq!(super::when_in(t, "", None), "2026-12-03 10:30");
        let paris = t.with_timezone(&FixedOffset::east_opt(3600).unwrap());
        assert_eq!(super::when_in(t, " UTC", Some(paris)), "2026-12-03 10:30 UTC (11:30 +01:00)");
        let tokyo = t.with_timezone(&FixedOffset::east_opt(9 * 3600 + 1800).unwrap());
        assert_eq!(super::when_in(t, "", Some(tokyo)), "2026-12-03 10:30 (20:00 +09:30)");
        let late = Utc.with_ymd_and_hms(2026, 12, 3, 20, 0, 0).unwrap();
        let tokyo = late.with_timezone(&FixedOffset::east_opt(9 * 3600).unwrap());
        assert_eq!(super::when_in(late, "", Some(tokyo)), "2026-12-03 20:00 (2026-12-04 05:00 +09:00)");
        let la = t.with_timezone(&FixedOffset::west_opt(8 * 3600).unwrap());
        assert_eq!(super::when_in(t, "", Some(la)), "2026-12-03 10:30 (02:30 -08:00)");
    }

    /// The narrow table's ids: `cb-` and 8 characters, longer only where two would read the same.
    #[test]
    fn a_short_id_is_the_shortest_prefix_that_tells_the_ids_apart() {
        let short = |ids: &[&str]| super::short_ids(ids.iter().copied());
        assert_eq!(short(&["cb-0123456789abcdef0", "cb-fedcba98765432100"]), ["cb-01234567", "cb-fedcba98"]);
        assert_eq!(short(&["cb-0123456789abcdef0", "cb-0123456799abcdef0"]), ["cb-012345678", "cb-012345679"]);
        // One id shown twice is one offering: no longer for it.
        assert_eq!(short(&["cb-0123456789abcdef0", "cb-0123456789abcdef0"]), ["cb-01234567", "cb-01234567"]);
        // An id shorter than the short form is shown whole; one a prefix of another, whole too.
        assert_eq!(short(&["cb-x"]), ["cb-x"]);
        assert_eq!(short(&["cb-0123456789", "cb-01234567890"]), ["cb-0123456789", "cb-01234567890"]);
        assert!(short(&[]).is_empty());
    }

    #[test]
    fn the_width_is_columns_else_the_terminal() {
        assert_eq!(super::width(Some("80"), Some(200)), Some(80));
        assert_eq!(super::width(Some("x"), Some(200)), Some(200));
        assert_eq!(super::width(Some("0"), None), None);
        assert_eq!(super::width(None, None), None);
        assert!(Layout::detect(true).width.is_none(), "-o wide is never wrapped");
    }

    /// At 80 columns a cell wraps between its words, never inside one: every instance type,
    /// region and command keeps its characters together, however narrow its column gets.
    #[test]
    fn a_wrapped_cell_never_splits_a_word() {
        let types = "p4d.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge";
        let regions = "us-east-1, us-west-2, eu-north-1, ap-southeast-2";
        let command = "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B";
        let columns = [Column::whole("ID"), Column::text("TYPES"), Column::text("REGIONS"), Column::text("DO")];
        let rows = [vec!["a-rule-with-a-long-name".to_string(), types.into(), regions.into(), command.into()]];
        let t = render(&columns, &rows, Layout { wide: false, width: Some(80) });
        let words: std::collections::BTreeSet<&str> = t.split_whitespace().collect();
        for word in [types, regions, command].iter().flat_map(|c| c.split_whitespace()) {
            assert!(words.contains(word), "{word:?} split:\n{t}");
        }
    }

    /// A narrow table too wide for the terminal leaves out its spare columns, rightmost first,
    /// keeping a row a line, and says which; piped, every column is there.
    #[test]
    fn a_spare_column_is_left_out_and_named() {
        let columns =
            [Column::whole("ID"), Column::whole("LONG").spare(), Column::whole("LONGER").spare(), Column::whole("END")];
        let rows = [vec!["x".repeat(30), "y".repeat(20), "z".repeat(20), "end".into()]];
        let t = render(&columns, &rows, Layout { wide: false, width: Some(70) });
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 70), "{t}");
        assert!(t.contains("LONG ") && !t.contains("LONGER "), "{t}");
        assert!(t.ends_with("left out to fit 70 columns: LONGER; -o wide shows every column"), "{t}");
        assert!(render(&columns, &rows, Layout::PLAIN).contains("LONGER"));
    }

    #[test]
    fn a_huge_cell_is_printed_whole_when_piped() {
        // A rule with 10,000 regions: the REGIONS cell is 160,000 characters.
        let regions = vec!["us-east-1"; 10_000].join(", ");
        let t = plain(&["ID", "REGIONS", "MODE"], &[vec!["r".into(), regions.clone(), "live".into()]]);
        assert_eq!(t.chars().filter(|c| *c == ',').count(), 9_999, "nothing cut");
        assert!(t.contains("live"));
        let wrapped = render(
            &[Column::whole("ID"), Column::text("REGIONS"), Column::whole("MODE")],
            &[vec!["r".into(), regions, "live".into()]],
            Layout { wide: false, width: Some(80) },
        );
        assert!(wrapped.lines().all(|l| l.chars().count() <= 80));
    }
}
