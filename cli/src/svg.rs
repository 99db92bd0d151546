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
    if t1 == t0 {
        t1 = t0 + 3600;
    }
    if y0 > y1 {
        (y0, y1) = (0.0, 1.0);
    }
    let pad = ((y1 - y0) * 0.1).max(0.05);
    let (y0, y1) = ((y0 - pad).max(0.0), y1 + pad);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |t: i64| LEFT + (t - t0) as f64 / (t1 - t0) as f64 * pw;
    let y = |v: f64| TOP + (1.0 - (v - y0) / (y1 - y0)) * ph;

    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
<text x=\"{LEFT}\" y=\"28\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
        esc(title)
    );
    // Y grid and labels.
    for i in 0..=5 {
        let v = y0 + (y1 - y0) * f64::from(i) / 5.0;
        let yy = y(v);
        s += &format!(
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/>\n\
<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">${v:.2}</text>\n",
            LEFT + pw,
            LEFT - 6.0,
            yy + 4.0
        );
    }
    // X labels: up to 8 evenly spaced dates.
    let ticks = 8;
    for i in 0..=ticks {
        let t = t0 + (t1 - t0) * i / ticks;
        let label =
            DateTime::<Utc>::from_timestamp(t, 0).map(|d| d.format("%m-%d %H:%M").to_string()).unwrap_or_default();
        let xx = x(t);
        s += &format!(
            "<line x1=\"{xx:.1}\" y1=\"{TOP}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#f0f0f0\"/>\n\
<text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>\n",
            TOP + ph,
            TOP + ph + 18.0
        );
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

    #[test]
    fn an_empty_chart_is_still_a_document() {
        let svg = chart("empty", &[], None);
        assert!(svg.contains("</svg>"));
    }
}
