//! The charts, drawn by plotters' SVG backend: step lines over time (a price holds until the next
//! observation, and a line breaks where nothing was asked for longer than `gap`), a threshold,
//! markers and spans, and a point's value in its tooltip (an SVG `<title>` per point, which
//! every browser shows on hover and screen readers read, with no script).
//!
//! Coordinates are f64 for placing pixels only: every figure a person reads (tooltips, labels)
//! is text the caller formatted from the exact value.

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::html::esc;

/// The Okabe-Ito palette (distinguishable with the common colour-vision deficiencies), black left
/// out: lines take the first colours in turn.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0xF0, 0xE4, 0x42),
];
/// The threshold's colour (vermillion), and the grid's: the page's CSS restyles both in the dark.
const THRESHOLD: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);

/// One point: where it is drawn and what its tooltip says.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub at: DateTime<Utc>,
    pub y: f64,
    pub text: String,
}

/// One line, drawn as steps (each value holds until the next point).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<Point>,
}

/// What a chart shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The chart's title (its SVG `<title>` too).
    pub title: String,
    /// What the chart says in words, for a screen reader (its `<desc>`).
    pub summary: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// A horizontal line: its label and value.
    pub threshold: Option<(String, f64)>,
    /// Marked events (a purchase, an extension): a diamond each, with its tooltip.
    pub markers: Vec<Point>,
    /// Shaded spans (a block's): from, to, tooltip.
    pub spans: Vec<(DateTime<Utc>, DateTime<Utc>, String)>,
    /// Two points further apart than this are not joined: nothing was asked in between.
    pub gap: Duration,
    /// The time axis; None: the points' own range.
    pub window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Whether the value axis starts at zero (counts), or hugs the values (prices).
    pub from_zero: bool,
}

const W: u32 = 900;
const H: u32 = 360;

fn secs(t: DateTime<Utc>) -> f64 {
    t.timestamp() as f64
}

fn day_label(x: &f64) -> String {
    Utc.timestamp_opt(*x as i64, 0).single().map(|t| t.format("%b %d").to_string()).unwrap_or_default()
}

/// The chart as one `<svg>` element, titled and described for screen readers.
pub fn draw(c: &Chart) -> String {
    let times = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.at)).chain(c.markers.iter().map(|m| m.at));
    let (t0, t1) = match c.window {
        Some(w) => w,
        None => {
            let all: Vec<DateTime<Utc>> = times.collect();
            match (all.iter().min(), all.iter().max()) {
                (Some(a), Some(b)) => (*a - Duration::hours(12), *b + Duration::hours(12)),
                _ => (
                    Utc.timestamp_opt(0, 0).single().unwrap_or_default(),
                    Utc.timestamp_opt(86_400, 0).single().unwrap_or_default(),
                ),
            }
        }
    };
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.y))
        .chain(c.markers.iter().map(|m| m.y))
        .chain(c.threshold.iter().map(|t| t.1));
    let (mut lo, mut hi) = ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if lo > hi {
        (lo, hi) = (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.1).max(0.05);
    let (lo, hi) = (if c.from_zero { 0.0 } else { (lo - pad).max(0.0) }, hi + pad);
    let mut svg = String::new();
    let mut overlay = String::new();
    if plot(c, (secs(t0), secs(t1)), (lo, hi), &mut svg, &mut overlay).is_err() {
        // Plotters fails only on a backend error, which a String backend never has: show the
        // words rather than half a chart.
        return format!("<p>{}</p>", esc(&c.summary));
    }
    finish(svg, &overlay, c)
}

/// The chart as an SVG file of its own (`capblock history --chart`): the namespace a file needs,
/// and a white ground, which a page's CSS would otherwise give it.
pub fn svg_file(c: &Chart) -> String {
    let svg = draw(c);
    match svg.strip_prefix("<svg") {
        Some(rest) => format!("<svg xmlns=\"http://www.w3.org/2000/svg\" style=\"background:#fff\"{rest}\n"),
        None => svg,
    }
}

/// Draws into `svg` with plotters; the tooltipped points go to `overlay`, placed by the chart's
/// own coordinate mapping.
fn plot(c: &Chart, x: (f64, f64), y: (f64, f64), svg: &mut String, overlay: &mut String) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, (W, H)).into_drawing_area();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&day_label)
        .y_label_formatter(&|v| format!("{v:.2}"))
        .label_style(("sans-serif", PLOTTERS_LABEL))
        .draw()
        .map_err(|e| e.to_string())?;
    // The unit beside the value axis, drawn here at `LABEL_PX`: plotters shrinks its own axis
    // description below the labels' size.
    let (_, top) = chart.backend_coord(&(x.0, y.1));
    let (_, bottom) = chart.backend_coord(&(x.0, y.0));
    let mid = (top + bottom) / 2;
    overlay.push_str(&format!(
        "<text class=\"unit\" x=\"16\" y=\"{mid}\" font-size=\"{LABEL_PX}\" text-anchor=\"middle\" transform=\"rotate(270, 16, {mid})\">{}</text>",
        esc(&c.y_label)
    ),);
    for (from, to, text) in &c.spans {
        let (a, b) = (secs(*from).max(x.0), secs(*to).min(x.1));
        if a < b {
            let style = PALETTE[2].mix(0.15).filled();
            chart
                .draw_series(std::iter::once(Rectangle::new([(a, y.0), (b, y.1)], style)))
                .map_err(|e| e.to_string())?;
            let (px, _) = chart.backend_coord(&(a, y.1));
            let (qx, qy) = chart.backend_coord(&(b, y.0));
            overlay.push_str(&format!(
                "<rect class=\"span\" x=\"{px}\" y=\"0\" width=\"{}\" height=\"{qy}\" fill-opacity=\"0\"><title>{}</title></rect>",
                (qx - px).max(1),
                esc(text)
            ));
        }
    }
    if let Some((label, v)) = &c.threshold {
        chart
            .draw_series(LineSeries::new([(x.0, *v), (x.1, *v)], THRESHOLD.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label.as_str())
            .legend(|(a, b)| PathElement::new([(a, b), (a + 16, b)], THRESHOLD.stroke_width(2)));
    }
    for (i, s) in c.series.iter().enumerate() {
        line(&mut chart, s, PALETTE[i % PALETTE.len()], c.gap, overlay)?;
    }
    for m in &c.markers {
        let (px, py) = chart.backend_coord(&(secs(m.at), m.y));
        overlay.push_str(&format!(
            "<path class=\"mark\" d=\"M{px} {} l6 6 l-6 6 l-6 -6 z\" fill=\"#000\" stroke=\"#fff\"><title>{}</title></path>",
            py - 6,
            esc(&m.text)
        ));
    }
    if c.threshold.is_some() || !c.series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(GRID)
            .label_font(("sans-serif", PLOTTERS_LABEL))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The chart's coordinates: seconds across, values up.
type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One series as step lines broken at its gaps, labelled once in the legend; its tooltipped
/// points (at most `MAX_TIPS`) go to `overlay`.
fn line(chart: &mut Plot, s: &Series, colour: RGBColor, gap: Duration, overlay: &mut String) -> Result<(), String> {
    let mut first = true;
    let mut kept: Vec<&Point> = Vec::new();
    for segment in segments(&s.points, gap) {
        let segment = thin(segment);
        let drawn =
            chart.draw_series(LineSeries::new(steps(&segment), colour.stroke_width(2))).map_err(|e| e.to_string())?;
        if first {
            drawn
                .label(s.label.as_str())
                .legend(move |(a, b)| PathElement::new([(a, b), (a + 16, b)], colour.stroke_width(2)));
            first = false;
        }
        kept.extend(segment);
    }
    for p in spaced(&kept, MAX_TIPS) {
        let (px, py) = chart.backend_coord(&(secs(p.at), p.y));
        overlay.push_str(&format!(
            "<circle cx=\"{px}\" cy=\"{py}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>",
            colour.to_hex(),
            esc(&p.text)
        ));
    }
    Ok(())
}

trait Hex {
    fn to_hex(&self) -> String;
}

impl Hex for RGBColor {
    fn to_hex(&self) -> String {
        format!("#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

/// One block on the calendar: its lane, its span, its state's name (its colour) and tooltip.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub lane: usize,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub state: String,
    pub text: String,
}

/// A moment on a lane: a payment deadline, a termination, a reminder, an extension.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub lane: usize,
    pub at: DateTime<Utc>,
    pub kind: &'static str,
    pub text: String,
}

/// The calendar: lanes (team / rule) over a time window.
#[derive(Debug, Clone, PartialEq)]
pub struct Lanes {
    pub title: String,
    pub summary: String,
    pub lanes: Vec<String>,
    pub bars: Vec<Bar>,
    pub ticks: Vec<Tick>,
    pub window: (DateTime<Utc>, DateTime<Utc>),
    pub now: DateTime<Utc>,
}

/// A block state's colour (Okabe-Ito), the same as the page's state labels.
fn state_colour(state: &str) -> RGBColor {
    match state {
        "payment-pending" => PALETTE[1],
        "scheduled" => PALETTE[4],
        "active" => PALETTE[2],
        "payment-failed" => PALETTE[5],
        _ => GRID,
    }
}

/// The calendar as one `<svg>`: a lane per team and rule, a bar per block coloured by its
/// state, a mark per deadline, termination, reminder and extension, each with its tooltip.
pub fn lanes(c: &Lanes) -> String {
    let mut svg = String::new();
    let mut overlay = String::new();
    let h = 60 + 34 * c.lanes.len().max(1) as u32;
    if plot_lanes(c, h, &mut svg, &mut overlay).is_err() {
        return format!("<p>{}</p>", esc(&c.summary));
    }
    let chart = Chart {
        title: c.title.clone(),
        summary: c.summary.clone(),
        y_label: String::new(),
        series: vec![],
        threshold: None,
        markers: vec![],
        spans: vec![],
        gap: Duration::zero(),
        window: None,
        from_zero: false,
    };
    finish(svg, &overlay, &chart)
}

/// The row (counted from the bottom of the plot, which is where the y axis starts) that draws
/// a lane: lane 0, the first named, on top. Bars, marks and labels all place a lane through this
/// and its inverse, so a lane's name can never stand beside another lane's blocks.
fn row_of_lane(lanes: usize, lane: usize) -> usize {
    lanes.saturating_sub(1).saturating_sub(lane)
}

/// The lane a row draws, if any (the inverse of `row_of_lane`).
fn lane_of_row(lanes: usize, row: usize) -> Option<usize> {
    (row < lanes).then(|| lanes - 1 - row)
}

/// The text size of every chart label, in the chart's own pixels: a 900-pixel chart shown
/// narrower scales it down, so the page keeps charts at least `MIN_CHART_PX` wide (scrolling
/// sideways on a phone) and their words stay readable.
pub const LABEL_PX: u32 = 15;

/// The size plotters is asked for to write `LABEL_PX`: its SVG backend writes a font's size
/// divided by 1.24 (a point-to-pixel factor of its own) after dropping its fraction, so 19 is
/// asked for 15.3.
const PLOTTERS_LABEL: f64 = (LABEL_PX * 124).div_ceil(100) as f64;

/// The narrowest a chart is drawn on the page, in CSS pixels: `LABEL_PX` scaled to it is 10 px.
pub const MIN_CHART_PX: u32 = W * 10 / LABEL_PX;

/// The time axis's marks for a window: midnights (Mondays for weeks) or hours, at most about six
/// so their labels (a hundred pixels each at `LABEL_PX`) never touch.
pub fn time_ticks(from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<(DateTime<Utc>, String)> {
    const STEPS: [i64; 7] = [6, 12, 24, 48, 168, 336, 672];
    let hours = (to - from).num_hours().max(1);
    let step = STEPS.iter().copied().find(|s| hours / s <= 6).unwrap_or(672);
    let day = from.date_naive();
    let mut t = match step {
        s if s < 24 => from.duration_trunc_hours(s),
        s if s >= 168 => {
            let monday = day - Duration::days(i64::from(day.weekday().num_days_from_monday()));
            monday.and_hms_opt(0, 0, 0).map(|d| d.and_utc()).unwrap_or(from)
        }
        _ => day.and_hms_opt(0, 0, 0).map(|d| d.and_utc()).unwrap_or(from),
    };
    let mut out = Vec::new();
    while t <= to {
        if t >= from {
            let label = if step < 24 { t.format("%b %d %H:%M") } else { t.format("%a %b %d") };
            out.push((t, label.to_string()));
        }
        t += Duration::hours(step);
    }
    out
}

/// Truncation to a whole number of hours in the day (0, 6, 12, 18 for six).
trait TruncHours {
    fn duration_trunc_hours(self, hours: i64) -> DateTime<Utc>;
}

impl TruncHours for DateTime<Utc> {
    fn duration_trunc_hours(self, hours: i64) -> DateTime<Utc> {
        let h = i64::from(self.hour()) / hours * hours;
        self.date_naive().and_hms_opt(0, 0, 0).map(|d| d.and_utc() + Duration::hours(h)).unwrap_or(self)
    }
}

fn plot_lanes(c: &Lanes, h: u32, svg: &mut String, overlay: &mut String) -> Result<(), String> {
    let n = c.lanes.len().max(1) as f64;
    let (x0, x1) = (secs(c.window.0), secs(c.window.1));
    let root = SVGBackend::with_string(svg, (W, h)).into_drawing_area();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(LANE_LABELS)
        .build_cartesian_2d(x0..x1, 0.0..n)
        .map_err(|e| e.to_string())?;
    let names = c.lanes.clone();
    let lanes = c.lanes.len().max(1);
    let lane_label = move |v: &f64| {
        let i = v.floor();
        // Labels sit at lane centres (row + 0.5); other ticks stay blank. The row is turned
        // back into its lane by the same mapping the bars use, so a name stands beside its bars.
        if (v - i - 0.5).abs() < 1e-6 && i >= 0.0 {
            lane_of_row(lanes, i as usize)
                .and_then(|lane| names.get(lane))
                .map(|s| short(s, LANE_CHARS))
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    // The time axis is drawn below from `time_ticks` (midnights, Mondays), not plotters' round
    // numbers of seconds, which fall at odd hours.
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_labels(0)
        .y_labels(c.lanes.len() * 2 + 1)
        .y_label_formatter(&lane_label)
        .disable_y_mesh()
        .label_style(("sans-serif", PLOTTERS_LABEL))
        .draw()
        .map_err(|e| e.to_string())?;
    let bottom = time_axis(&mut chart, c.window, n, overlay)?;
    let row = |lane: usize| row_of_lane(lanes, lane) as f64;
    for b in &c.bars {
        let (a, z) = (secs(b.from).max(x0), secs(b.to).min(x1));
        if a >= z {
            continue;
        }
        let y = row(b.lane);
        let style = state_colour(&b.state).filled();
        chart
            .draw_series(std::iter::once(Rectangle::new([(a, y + 0.2), (z, y + 0.8)], style)))
            .map_err(|e| e.to_string())?;
        let (px, py) = chart.backend_coord(&(a, y + 0.8));
        let (qx, qy) = chart.backend_coord(&(z, y + 0.2));
        overlay.push_str(&format!(
            "<rect class=\"bar\" data-lane=\"{}\" x=\"{px}\" y=\"{py}\" width=\"{}\" height=\"{}\" fill-opacity=\"0\"><title>{}</title></rect>",
            esc(c.lanes.get(b.lane).map_or("", |s| s.as_str())),
            (qx - px).max(1),
            (qy - py).max(1),
            esc(&b.text)
        ));
    }
    let (nx, _) = chart.backend_coord(&(secs(c.now), n));
    overlay.push_str(&format!(
        "<line class=\"now\" x1=\"{nx}\" x2=\"{nx}\" y1=\"12\" y2=\"{bottom}\" stroke=\"#000000\" stroke-dasharray=\"4 3\"><title>now</title></line>"
    ));
    for t in &c.ticks {
        let x = secs(t.at);
        if x < x0 || x > x1 {
            continue;
        }
        let y = row(t.lane);
        let (px, py) = chart.backend_coord(&(x, y + 0.9));
        let (_, qy) = chart.backend_coord(&(x, y + 0.1));
        overlay.push_str(&tick_mark(t, px, py, qy));
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The calendar's frame and its time axis (`time_ticks`: a grid line and a label each); the
/// plot's bottom edge, in pixels.
fn time_axis(
    chart: &mut Plot,
    window: (DateTime<Utc>, DateTime<Utc>),
    n: f64,
    overlay: &mut String,
) -> Result<i32, String> {
    let (left, top) = chart.backend_coord(&(secs(window.0), n));
    let (right, bottom) = chart.backend_coord(&(secs(window.1), 0.0));
    overlay.push_str(&format!(
        "<rect class=\"plot\" x=\"{left}\" y=\"{top}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#DDDDDD\"/>",
        right - left,
        bottom - top
    ));
    for (t, label) in time_ticks(window.0, window.1) {
        let (px, _) = chart.backend_coord(&(secs(t), 0.0));
        chart
            .draw_series(LineSeries::new([(secs(t), 0.0), (secs(t), n)], GRID.stroke_width(1)))
            .map_err(|e| e.to_string())?;
        overlay.push_str(&format!(
            "<text class=\"tick\" x=\"{px}\" y=\"{}\" font-size=\"{LABEL_PX}\" text-anchor=\"middle\">{}</text>",
            bottom + 20,
            esc(&label)
        ));
    }
    Ok(bottom)
}

/// The width of the lane names' column, in the chart's pixels: `LANE_CHARS` at `LABEL_PX`.
const LANE_LABELS: u32 = 220;

/// The most characters of a lane's name drawn beside it (the table under the chart has them all).
const LANE_CHARS: usize = 24;

/// `s` cut to `most` characters, an ellipsis saying where it was cut.
fn short(s: &str, most: usize) -> String {
    if s.chars().count() <= most {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(most - 1).collect();
    cut.push('…');
    cut
}

/// A tick's mark with its tooltip, its shape by its kind, between `py` (top) and `qy` (bottom)
/// of its lane at `px`.
fn tick_mark(t: &Tick, px: i32, py: i32, qy: i32) -> String {
    format!("<g class=\"{}\"><title>{}</title>{}</g>", t.kind, esc(&t.text), tick_shape(t.kind, px, py, qy))
}

/// The shape of a tick kind's mark: the calendar and its legend draw the same.
fn tick_shape(kind: &str, px: i32, py: i32, qy: i32) -> String {
    match kind {
        "deadline" => format!("<path d=\"M{px} {py} l5 -8 h-10 z\" fill=\"#D55E00\" stroke=\"#000000\"/>"),
        "termination" => {
            format!("<line x1=\"{px}\" x2=\"{px}\" y1=\"{py}\" y2=\"{qy}\" stroke=\"#000000\" stroke-width=\"2\"/>")
        }
        "extension" => {
            format!("<path d=\"M{px} {} l6 6 l-6 6 l-6 -6 z\" fill=\"#CC79A7\" stroke=\"#000000\"/>", (py + qy) / 2 - 6)
        }
        _ => format!("<circle cx=\"{px}\" cy=\"{qy}\" r=\"3\" fill=\"#0072B2\" stroke=\"#000000\"/>"),
    }
}

/// What a tick kind's mark means, in the legend's words.
fn tick_meaning(kind: &str) -> &'static str {
    match kind {
        "deadline" => "payment deadline: EC2 takes the fee by then or releases the block",
        "termination" => "instances terminated (EC2 stops them before the block ends)",
        "extension" => "extension",
        _ => "reminder",
    }
}

/// The calendar's legend, as HTML below its chart: a swatch per state its bars show and a mark
/// per kind its ticks draw (only those drawn), and the dashed line of now.
pub fn lanes_legend(c: &Lanes) -> String {
    let mut states: Vec<&str> = c.bars.iter().map(|b| b.state.as_str()).collect();
    states.sort_unstable();
    states.dedup();
    let mut kinds: Vec<&str> = c.ticks.iter().map(|t| t.kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut items = String::new();
    for s in states {
        items.push_str(&format!(
            "<li><svg class=\"key\" viewBox=\"0 0 24 16\" role=\"img\"><title>{0}</title><rect x=\"0\" y=\"3\" width=\"24\" height=\"10\" fill=\"{1}\"/></svg>{0}</li>",
            esc(s),
            state_colour(s).to_hex()
        ));
    }
    for k in kinds {
        let meaning = tick_meaning(k);
        // A deadline's triangle hangs above its point; the other marks span the swatch.
        let (py, qy) = if k == "deadline" { (13, 13) } else { (2, 13) };
        items.push_str(&format!(
            "<li class=\"k-{k}\"><svg class=\"key\" viewBox=\"0 0 24 16\" role=\"img\"><title>{meaning}</title>{}</svg>{meaning}</li>",
            tick_shape(k, 12, py, qy)
        ));
    }
    items.push_str(
        "<li><svg class=\"key\" viewBox=\"0 0 24 16\" role=\"img\"><title>now</title><line x1=\"12\" x2=\"12\" y1=\"0\" y2=\"16\" stroke=\"#000000\" stroke-dasharray=\"4 3\"/></svg>now</li>",
    );
    format!("<ul class=\"legend\" aria-label=\"Legend\">{items}</ul>")
}

/// At most this many tooltipped points per line: more cannot be told apart on a 900-pixel chart,
/// and each costs the page's size (a year of hourly scans must stay under 1 MB).
const MAX_TIPS: usize = 160;

/// A step line needs only the points where the value changes, and the run's last point (where
/// the line ends).
fn thin(points: &[Point]) -> Vec<&Point> {
    let mut out: Vec<&Point> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let last = i + 1 == points.len();
        if out.last().is_none_or(|q| q.y != p.y) || last {
            out.push(p);
        }
    }
    out
}

/// At most `most` of `points`, evenly spread, the first and the last always among them.
fn spaced<'a>(points: &[&'a Point], most: usize) -> Vec<&'a Point> {
    if points.len() <= most || most < 2 {
        return points.to_vec();
    }
    let step = (points.len() - 1) as f64 / (most - 1) as f64;
    (0..most).map(|k| points[((k as f64 * step).round() as usize).min(points.len() - 1)]).collect()
}

/// The runs of points no further apart than `gap`.
fn segments(points: &[Point], gap: Duration) -> Vec<&[Point]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=points.len() {
        if i == points.len() || points[i].at - points[i - 1].at > gap {
            if start < i {
                out.push(&points[start..i]);
            }
            start = i;
        }
    }
    out
}

/// A step line through `points`: each value holds until the next point.
fn steps(points: &[&Point]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, p) in points.iter().enumerate() {
        if i > 0 {
            out.push((secs(p.at), points[i - 1].y));
        }
        out.push((secs(p.at), p.y));
    }
    out
}

/// Plotters' SVG with a title and description for screen readers, the tooltipped overlay on top,
/// and sized by the page (its width follows the screen's).
fn finish(svg: String, overlay: &str, c: &Chart) -> String {
    let Some(open_end) = svg.find("<svg").and_then(|i| svg[i..].find('>').map(|j| i + j)) else {
        return format!("<p>{}</p>", esc(&c.summary));
    };
    // Inline SVG in HTML needs no namespace: without it the page holds no URL at all.
    let head = svg[..open_end].replace(" xmlns=\"http://www.w3.org/2000/svg\"", "");
    let head = head.as_str();
    let rest = &svg[open_end + 1..];
    let rest = rest.trim_end().strip_suffix("</svg>").unwrap_or(rest);
    format!(
        "{head} class=\"chart\" role=\"img\" preserveAspectRatio=\"xMinYMin meet\"><title>{}</title><desc>{}</desc>{rest}<g class=\"tips\">{overlay}</g></svg>",
        esc(&c.title),
        esc(&c.summary)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, d, h, 0, 0).unwrap()
    }

    fn p(d: u32, h: u32, y: f64) -> Point {
        Point { at: at(d, h), y, text: format!("{y:.2} at {d} {h}h") }
    }

    #[test]
    fn a_price_holds_until_the_next_point_and_breaks_at_a_gap() {
        let points = [p(1, 0, 3.0), p(1, 1, 4.0), p(3, 0, 5.0)];
        let flat = [p(1, 0, 3.0), p(1, 1, 3.0), p(1, 2, 3.0), p(1, 3, 4.0)];
        assert_eq!(thin(&flat).iter().map(|p| p.at).collect::<Vec<_>>(), vec![at(1, 0), at(1, 3)], "no repeats");
        let flat_end = [p(1, 0, 3.0), p(1, 1, 3.0), p(1, 2, 3.0)];
        assert_eq!(thin(&flat_end).len(), 2, "the line ends where the run does");
        let segs = segments(&points, Duration::hours(6));
        assert_eq!(segs.len(), 2, "nothing asked for two days: two lines");
        let s = steps(&thin(segs[0]));
        // Horizontal to the second point's time at the first price, then up.
        assert_eq!(s, vec![(secs(at(1, 0)), 3.0), (secs(at(1, 1)), 3.0), (secs(at(1, 1)), 4.0)]);
    }

    #[test]
    fn a_long_lane_name_is_cut_with_an_ellipsis() {
        assert_eq!(short("ml-research / p5-weekly", LANE_CHARS), "ml-research / p5-weekly");
        let long = "computer-vision-research / p5-weekly-burst";
        assert_eq!(short(long, LANE_CHARS), "computer-vision-researc…");
        assert_eq!(short(long, LANE_CHARS).chars().count(), LANE_CHARS);
    }

    #[test]
    fn the_time_axis_marks_days_or_mondays_and_never_crowds() {
        let days = time_ticks(at(7, 0) - Duration::hours(5), at(11, 16));
        assert_eq!(days.first().map(|t| t.1.as_str()), Some("Mon Dec 07"), "{days:?}");
        assert!(days.iter().all(|(t, _)| t.hour() == 0) && days.len() == 5, "{days:?}");
        let weeks = time_ticks(at(2, 0), at(2, 0) + Duration::weeks(5));
        assert!(weeks.iter().all(|(t, _)| t.weekday() == chrono::Weekday::Mon) && weeks.len() == 5, "{weeks:?}");
        let hours = time_ticks(at(7, 1), at(7, 23));
        assert!(hours.iter().all(|(t, _)| t.hour() % 6 == 0) && hours.len() == 3, "{hours:?}");
    }

    #[test]
    fn every_point_has_its_value_as_a_tooltip_and_the_chart_is_described() {
        let c = Chart {
            title: "Prices <p5>".into(),
            summary: "Two prices".into(),
            y_label: "USD per accelerator-hour".into(),
            series: vec![Series { label: "us-east-1 p5".into(), points: vec![p(1, 0, 3.0), p(1, 1, 4.0)] }],
            threshold: Some(("threshold 3.50".into(), 3.5)),
            markers: vec![Point { at: at(1, 1), y: 4.0, text: "bought".into() }],
            spans: vec![(at(1, 2), at(2, 2), "block r-1".into())],
            gap: Duration::hours(6),
            window: None,
            from_zero: false,
        };
        let svg = draw(&c);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("<title>Prices &lt;p5&gt;</title><desc>Two prices</desc>"));
        assert!(svg.contains("<title>3.00 at 1 0h</title>") && svg.contains("<title>4.00 at 1 1h</title>"));
        assert!(svg.contains("<title>bought</title>") && svg.contains("<title>block r-1</title>"));
        assert!(svg.contains("threshold 3.50"));
        assert_eq!(svg.matches("</svg>").count(), 1);
    }

    /// The `y` attribute of the element that holds `needle` (an SVG `<text>` or an overlay
    /// `<rect>` before its `<title>`), plus half its height when it has one: its vertical centre.
    fn centre_of(svg: &str, needle: &str) -> f64 {
        let at = svg.find(needle).unwrap_or_else(|| panic!("{needle} not drawn: {svg}"));
        // A label's text follows its `<text ...>` tag; a tooltip's `<title>` sits in its `<rect>`.
        let tag = if needle.starts_with("<title>") { "<rect" } else { "<text" };
        let start = svg[..at].rfind(tag).expect("the element's tag");
        let attr = |name: &str| {
            let tag = &svg[start..at];
            let from = tag.find(&format!(" {name}=\"")).map(|i| i + name.len() + 3)?;
            tag[from..].split('"').next()?.parse::<f64>().ok()
        };
        attr("y").expect("a y") + attr("height").unwrap_or(0.0) / 2.0
    }

    #[test]
    fn each_lane_is_named_beside_its_own_blocks() {
        let names = ["ml-a / h100-week", "ml-b / trn2-ultra", "research / p5-day", "infra / p4d"];
        let bar = |lane: usize| Bar {
            lane,
            from: at(2, 0),
            to: at(4, 0),
            state: "scheduled".into(),
            text: format!("block of lane {lane}"),
        };
        let c = Lanes {
            title: "Calendar".into(),
            summary: "Four lanes".into(),
            lanes: names.iter().map(|s| s.to_string()).collect(),
            bars: (0..names.len()).map(bar).collect(),
            ticks: vec![],
            window: (at(1, 0), at(8, 0)),
            now: at(1, 12),
        };
        let svg = lanes(&c);
        let labels: Vec<f64> = names.iter().map(|n| centre_of(&svg, &format!("\n{n}\n</text>"))).collect();
        for lane in 0..names.len() {
            let y = centre_of(&svg, &format!("<title>block of lane {lane}</title>"));
            let nearest =
                (0..names.len()).min_by(|a, b| (labels[*a] - y).abs().total_cmp(&(labels[*b] - y).abs())).unwrap();
            assert_eq!(
                names[nearest], names[lane],
                "lane {lane}'s bar (y {y}) stands beside {}: {labels:?}",
                names[nearest]
            );
        }
        assert!(labels[0] < labels[3], "the first lane is drawn on top: {labels:?}");
    }
}
