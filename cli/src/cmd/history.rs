//! `capblock history`: the price observations every scan stores, as a table, JSON or a chart.

use std::collections::BTreeMap;

use capblock_shared::domain::ids::{InstanceType, Region};
use capblock_shared::domain::money::Money;
use capblock_shared::ports::{Observation, ObservationStore};
use chrono::{DateTime, Utc};
use clap::Args;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;

use crate::context::{CliError, CliResult, Window, bounds, load_rule, store};
use crate::output::OutputArgs;
use crate::table::{self, Column, Layout, when, when_utc};
use capblock_page::chart;

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock history --region us-west-2 --type p5.48xlarge\n  \
capblock history --region us-east-1,us-west-2 --type p5.48xlarge --from 2026-12-01T00:00:00Z -o json\n  \
capblock history --region us-east-1,us-west-2 --type p5.48xlarge --csv > prices.csv\n  \
capblock history --region us-east-1,us-west-2 --type p5.48xlarge --chart prices.svg --rule infra/examples/rules/p5-weekly.toml\n\n\
Prices come from the observations every scan stores (kept 400 days). -o json (--json), -o yaml and --csv \
export every observation with every field; the JSON is also what `capblock backtest --history` reads.\n\
Exit codes: 0 history printed, 1 store failure, 2 bad input (e.g. an invalid --rule), 3 no observations.")]
#[command(mut_arg("from", |a| a.help("Earliest observation (2026-12-20, 2026-12-20T11:30 UTC, or RFC 3339); default: everything kept.")), mut_arg("to", |a| a.help("Latest observation (a date counts whole); default: everything kept.")))]
pub struct HistoryArgs {
    /// Regions, comma-separated; default: the profile's region (--profile), else AWS_REGION, else
    /// the AWS profile's.
    #[arg(long, alias = "regions", value_delimiter = ',')]
    region: Vec<String>,
    /// Instance types, comma-separated.
    #[arg(long = "type", alias = "types", value_delimiter = ',', required = true)]
    instance_type: Vec<String>,
    #[command(flatten)]
    window: Window,
    /// Also write an SVG chart of $/accelerator-hour over time (cheapest per scan) to this file.
    #[arg(long)]
    chart: Option<String>,
    /// A rule file whose threshold is drawn on the chart.
    #[arg(long)]
    rule: Option<String>,
    // Every observation with every field: `-o json` (what `backtest --history` reads) or `-o yaml`.
    #[command(flatten)]
    output: OutputArgs,
    /// Print every observation as CSV (a header line, then one line each) instead of a table.
    #[arg(long, conflicts_with_all = ["json", "output"])]
    csv: bool,
}

/// One observation as exported: the stored observation itself (so the JSON reads back as
/// `backtest --history`), and the figures a reader would otherwise compute.
#[derive(Serialize)]
struct HistoryRow<'a> {
    #[serde(flatten)]
    observation: &'a Observation,
    region: &'a Region,
    instance_type: &'a InstanceType,
    offering_id: &'a str,
    start: DateTime<Utc>,
    instance_count: u32,
    /// The block's length ("7 days", "30 h 35 min").
    length: String,
    fee: Money,
    #[serde(with = "rust_decimal::serde::str")]
    per_instance_hour: Decimal,
    /// None when the accelerator count is unknown.
    #[serde(with = "rust_decimal::serde::str_option")]
    per_accelerator_hour: Option<Decimal>,
}

impl HistoryRow<'_> {
    fn new(o: &Observation) -> HistoryRow<'_> {
        HistoryRow {
            observation: o,
            region: &o.offering.region,
            instance_type: &o.offering.instance_type,
            offering_id: &o.offering.id,
            start: o.offering.start,
            instance_count: o.offering.instance_count,
            length: o.offering.length_text(),
            fee: o.offering.fee,
            per_instance_hour: o.offering.price_per_instance_hour().per_unit,
            per_accelerator_hour: per_accel(o),
        }
    }

    fn seen_at(&self) -> DateTime<Utc> {
        self.observation.seen_at
    }
}

const CSV_HEADERS: [&str; 15] = [
    "seen_at",
    "region",
    "instance_type",
    "offering_id",
    "availability_zone",
    "start",
    "end",
    "instance_count",
    "duration_minutes",
    "fee",
    "currency",
    "accelerators_per_instance",
    "per_instance_hour",
    "per_accelerator_hour",
    "ultraserver",
];

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn csv_line(r: &HistoryRow) -> String {
    let o = &r.observation.offering;
    // The form JSON and YAML print a time in (`Z`, never `+00:00`): one form in every output.
    let at = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    let fields = [
        at(r.seen_at()),
        o.region.to_string(),
        o.instance_type.to_string(),
        o.id.clone(),
        o.availability_zone.clone(),
        at(o.start),
        at(o.end),
        o.instance_count.to_string(),
        o.total_minutes().to_string(),
        o.fee.amount().to_string(),
        o.fee.currency().to_string(),
        r.observation.accelerators_per_instance.to_string(),
        r.per_instance_hour.to_string(),
        r.per_accelerator_hour.map(|d| d.to_string()).unwrap_or_default(),
        o.ultraserver.to_string(),
    ];
    fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",")
}

fn per_accel(o: &Observation) -> Option<Decimal> {
    o.offering.price_per_accelerator_hour(o.accelerators_per_instance).map(|r| r.per_unit)
}

fn parse_pairs(regions: &[String], types: &[String]) -> Result<Vec<(Region, InstanceType)>, CliError> {
    let regions: Vec<Region> = regions
        .iter()
        .map(|r| r.parse().map_err(|e| CliError::Invalid(format!("--region: {e}"))))
        .collect::<Result<_, _>>()?;
    let types: Vec<InstanceType> = types
        .iter()
        .map(|t| t.parse().map_err(|e| CliError::Invalid(format!("--type: {e}"))))
        .collect::<Result<_, _>>()?;
    Ok(regions.iter().flat_map(|r| types.iter().map(move |t| (r.clone(), t.clone()))).collect())
}

/// The cheapest price per accelerator-hour of each scan, a step line per region and type, with
/// the rule's threshold: the team page's chart (`capblock_page::chart`), as a file of its own.
fn price_chart(rows: &[HistoryRow], threshold: Option<&(String, Decimal)>) -> String {
    let mut series: BTreeMap<String, BTreeMap<DateTime<Utc>, Decimal>> = BTreeMap::new();
    for r in rows {
        let Some(v) = r.per_accelerator_hour else { continue };
        let e = series.entry(format!("{} {}", r.region, r.instance_type)).or_default().entry(r.seen_at()).or_insert(v);
        *e = (*e).min(v);
    }
    let series: Vec<chart::Series> = series
        .into_iter()
        .map(|(label, points)| chart::Series {
            points: points
                .into_iter()
                .map(|(at, v)| chart::Point {
                    at,
                    y: v.to_f64().unwrap_or(0.0),
                    text: format!("{label}: {} per accelerator-hour at {}", v.round_dp(4), when_utc(at)),
                })
                .collect(),
            label,
        })
        .collect();
    let summary = format!("{} line(s) of the cheapest price per accelerator-hour per scan", series.len());
    chart::svg_file(&chart::Chart {
        title: "Cheapest $ per accelerator-hour seen per scan".into(),
        summary,
        y_label: "$ per accelerator-hour".into(),
        series,
        threshold: threshold.map(|(id, t)| (format!("rule {id}: {t}"), t.to_f64().unwrap_or(0.0))),
        markers: vec![],
        spans: vec![],
        // Scans are minutes apart; a day without one is a day nothing was asked.
        gap: chrono::Duration::hours(6),
        window: None,
        from_zero: false,
    })
}

pub async fn run(a: HistoryArgs) -> CliResult {
    let regions = match a.region.is_empty() {
        true => crate::context::regions_or_default(vec![], "--region").await?.iter().map(|r| r.to_string()).collect(),
        false => a.region.clone(),
    };
    let pairs = parse_pairs(&regions, &a.instance_type)?;
    let now = crate::context::clock_now().await?;
    let threshold =
        a.rule.as_deref().map(|f| load_rule(f, now)).transpose()?.map(|r| (r.id, r.max_price_per_accelerator_hour));
    let (from, to) = bounds(a.window.from, a.window.to);
    let store = store().await?;
    let mut all: Vec<Observation> = Vec::new();
    for (r, t) in &pairs {
        all.extend(store.history(r, t, from, to).await?);
    }
    all.sort_by(|x, y| {
        x.seen_at.cmp(&y.seen_at).then(per_accel(x).cmp(&per_accel(y))).then(x.offering.id.cmp(&y.offering.id))
    });
    let rows: Vec<HistoryRow> = all.iter().map(HistoryRow::new).collect();
    if let Some(path) = &a.chart {
        std::fs::write(path, price_chart(&rows, threshold.as_ref()))
            .map_err(|e| CliError::Failed(format!("{path}: {e}")))?;
        eprintln!("chart written to {path}");
    }
    if a.csv {
        println!("{}", CSV_HEADERS.join(","));
        for r in &rows {
            println!("{}", csv_line(r));
        }
    } else if a.output.data(&rows)? {
        // Printed as data: every observation, even none (`[]`).
    } else if rows.is_empty() {
        // The bounds as asked: an open end is said as such, never as the 1970/2100 it stands for.
        let span = match (a.window.from, a.window.to) {
            (None, None) => "in the stored history".to_string(),
            (Some(f), None) => format!("since {}", when_utc(f)),
            (None, Some(t)) => format!("before {}", when_utc(t)),
            (Some(f), Some(t)) => format!("between {} and {}", when(f), when_utc(t)),
        };
        eprintln!("no observations for {} {span}", describe(&pairs));
    } else if a.chart.is_none() || rows.len() <= 200 {
        println!("{}", observations_table(&rows, a.output.layout()));
        println!("{} observation(s)", rows.len());
    } else {
        println!("{} observation(s) of {}; the chart has them (-o json for every row)", rows.len(), describe(&pairs));
    }
    if rows.is_empty() { Err(CliError::NothingFound) } else { Ok(()) }
}

/// The observations as a table, one row each.
fn observations_table(rows: &[HistoryRow], layout: Layout) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                when(r.seen_at()),
                r.region.to_string(),
                r.observation.offering.availability_zone.clone(),
                format!("{} x {}", r.instance_count, r.instance_type),
                when(r.start),
                r.length.clone(),
                table::money(&r.fee),
                r.per_accelerator_hour.map_or_else(|| "-".into(), |d| format!("{:.4}", d.round_dp(4))),
            ]
        })
        .collect();
    let currency = table::currency(rows.iter().map(|r| &r.fee));
    let mut columns = vec![Column::text("SEEN AT (UTC)"), Column::whole("REGION").wide(), Column::whole("AZ").wide()];
    columns.extend(table::block_columns(&currency));
    table::render(&columns, &cells, layout)
}

fn describe(pairs: &[(Region, InstanceType)]) -> String {
    pairs.iter().map(|(r, t)| format!("{r} {t}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("us-east-1"), "us-east-1");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(CSV_HEADERS.len(), 15);
    }
}
