//! A small hand-written SVG line chart: one line per series over time, an optional horizontal
//! threshold. No dependency: the chart is a few hundred bytes of markup per series.

use chrono::{DateTime, Utc};

const W: f64 = 960.0;
const H: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const DAY: i64 = 86_400;
/// At most this many steps on an axis (labels stay legible).
const MAX_STEPS: f64 = 8.0;

/// The price axis: `lo..=hi` padded a little and widened to whole steps of 1, 2.5 or 5 x 10^k
/// dollars (so labels read $2.75, $3.00, ...; below 10 cents 1, 2 or 5 cents, which two decimals
/// show exactly), never below zero. Returns (low, high, step).
pub fn price_axis(lo: f64, hi: f64) -> (f64, f64, f64) {
    let pad = ((hi - lo) * 0.05).max(0.05);
    let (lo, hi) = ((lo - pad).max(0.0), hi + pad);
    let raw = (hi - lo) / MAX_STEPS;
    let magnitude = 10f64.powf(raw.log10().floor());
    let multiples: &[f64] = if magnitude >= 0.1 { &[1.0, 2.5, 5.0, 10.0] } else { &[1.0, 2.0, 5.0, 10.0] };
    let step = multiples.iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    // Float noise (0.1 x 2.5) would show in the equality the ticks are drawn by.
    let step = (step * 1e9).round() / 1e9;
    ((lo / step).floor() * step, (hi / step).ceil() * step, step)
}

/// The time axis: `t0..=t1` (Unix seconds) widened to whole UTC days, with a tick every step
/// days. Returns (start, end, step in days).
pub fn day_axis(t0: i64, t1: i64) -> (i64, i64, i64) {
    let start = t0.div_euclid(DAY) * DAY;
    let end = (t1.div_euclid(DAY) + 1) * DAY;
    let days = (end - start) / DAY;
    (start, end, (days as f64 / MAX_STEPS).ceil().max(1.0) as i64)
}

/// One line: its label and its points in time order.
pub type Series = (String, Vec<(DateTime<Utc>, f64)>);

/// `series`: one line each. `threshold`: (label, value).
pub fn chart(title: &str, series: &[Series], threshold: Option<(&str, f64)>) -> String {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut t0, mut t1) = (i64::MAX, i64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for (t, v) in points {
        t0 = t0.min(t.timestamp());
        t1 = t1.max(t.timestamp());
        y0 = y0.min(*v);
        y1 = y1.max(*v);
    }
    if let Some((_, v)) = threshold {
        y0 = y0.min(v);
        y1 = y1.max(v);
    }
    if t0 > t1 {
        (t0, t1) = (0, 1);
    }
    if y0 > y1 {
        (y0, y1) = (0.0, 1.0);
    }
    // Round values on both axes: prices at a 1-2-2.5-5 step, time at whole days.
    let (y0, y1, y_step) = price_axis(y0, y1);
    let (t0, t1, day_step) = day_axis(t0, t1);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |t: i64| LEFT + (t - t0) as f64 / (t1 - t0) as f64 * pw;
    let y = |v: f64| TOP + (1.0 - (v - y0) / (y1 - y0)) * ph;

    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
<text x=\"{LEFT}\" y=\"28\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
        esc(title)
    );
    // Y grid and labels, one per step.
    let steps = ((y1 - y0) / y_step).round() as i64;
    for i in 0..=steps {
        let v = y0 + y_step * i as f64;
        let yy = y(v);
        s += &format!(
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/>\n\
<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">${v:.2}</text>\n",
            LEFT + pw,
            LEFT - 6.0,
            yy + 4.0
        );
    }
    // X labels at day boundaries (UTC), every `day_step` days.
    let mut t = t0;
    while t <= t1 {
        let label = DateTime::<Utc>::from_timestamp(t, 0).map(|d| d.format("%m-%d").to_string()).unwrap_or_default();
        let xx = x(t);
        s += &format!(
            "<line x1=\"{xx:.1}\" y1=\"{TOP}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#f0f0f0\"/>\n\
<text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>\n",
            TOP + ph,
            TOP + ph + 18.0
        );
        t += day_step * DAY;
    }
    s += &format!(
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>\n\
<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">USD per accelerator-hour</text>\n\
<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">observed at (UTC)</text>\n",
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        LEFT + pw / 2.0,
        H - 8.0
    );
    if let Some((label, v)) = threshold {
        let yy = y(v);
        s += &format!(
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
            LEFT + pw
        );
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#d62728\">{}</text>\n",
            LEFT + pw + 10.0,
            yy + 4.0,
            esc(label)
        );
    }
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts.iter().map(|(t, v)| format!("{:.1},{:.1}", x(t.timestamp()), y(*v))).collect();
        s += &format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>\n",
            path.join(" "),
            esc(label)
        );
        let ly = TOP + 20.0 + 20.0 * i as f64;
        s += &format!(
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-width=\"3\"/>\n\
<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            LEFT + pw + 10.0,
            LEFT + pw + 30.0,
            LEFT + pw + 36.0,
            ly + 4.0,
            esc(label)
        );
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_line_per_series_and_the_threshold() {
        let t = |h: i64| DateTime::<Utc>::from_timestamp(1_796_083_200 + h * 3600, 0).unwrap();
        let svg = chart(
            "t <&>",
            &[("a".into(), vec![(t(0), 4.1), (t(1), 2.9)]), ("b".into(), vec![(t(0), 4.35)])],
            Some(("rule x: 2.95", 2.95)),
        );
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    /// Ticks are round: $2.75, $3.00, ... rather than $3.09, $3.44.
    #[test]
    fn price_ticks_are_round_values() {
        let (lo, hi, step) = price_axis(2.80, 4.10);
        assert_eq!(step, 0.25);
        assert_eq!((lo, hi), (2.5, 4.25));
        let (lo, hi, step) = price_axis(3.0, 3.0);
        assert_eq!(step, 0.02);
        assert!(lo <= 3.0 && hi >= 3.0 && ((lo / step).round() * step - lo).abs() < 1e-9);
        let (lo, _, step) = price_axis(0.01, 40.0);
        assert_eq!((lo, step), (0.0, 10.0));
        let svg =
            chart("t", &[("a".into(), vec![(DateTime::<Utc>::from_timestamp(0, 0).unwrap(), 2.8)])], Some(("r", 4.1)));
        for label in ["$2.75", "$3.00", "$4.25"] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(!svg.contains("$3.09"));
    }

    /// The date axis starts and ends at midnight UTC and steps in whole days.
    #[test]
    fn the_date_axis_uses_day_boundaries() {
        let noon = 1_796_083_200 + 12 * 3600;
        assert_eq!(day_axis(noon, noon + 3600), (1_796_083_200, 1_796_083_200 + DAY, 1));
        let (start, end, step) = day_axis(noon, noon + 20 * DAY);
        assert_eq!((start % DAY, end % DAY), (0, 0));
        assert_eq!(((end - start) / DAY, step), (21, 3));
    }

    #[test]
    fn an_empty_chart_is_still_a_document() {
        let svg = chart("empty", &[], None);
        assert!(svg.contains("</svg>"));
    }
}
