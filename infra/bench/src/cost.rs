//! The monthly bill at the template's default settings, from this run's measured durations,
//! memory and request counts and the list prices in `infra/bench/prices.toml`.
//!
//! The scan now asks for up to `DescribeBudget::ask_for` (40 s) per run when the rule set has
//! more questions than a run may ask: its billed duration is the cold start's handler (the
//! example rule, one question per region) plus the mean asking time of a run of the 256-question
//! rule set, measured in the detection simulation (`detect.rs`), for each schedule priced.

use std::path::Path;
use std::time::Duration;

use crate::{Defaults, FunctionFigures, Row, info, row};

pub struct Cost {
    load: ScanLoad,
    lines: Vec<(String, f64, String)>,
    total: f64,
}

/// How often the scan runs and how long each run asks.
#[derive(Debug, Clone)]
pub struct ScanLoad {
    pub label: String,
    pub every_minutes: f64,
    pub ask_secs: f64,
}

fn price(p: &toml::Value, section: &str, key: &str) -> Result<f64, String> {
    let v = &p[section][key];
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).ok_or(format!("prices.toml: [{section}] {key} missing"))
}

/// Billed milliseconds (Lambda rounds up to the millisecond).
fn billed_secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).ceil() / 1000.0
}

pub fn monthly(prices: &Path, d: &Defaults, fns: &[FunctionFigures], load: &ScanLoad) -> Result<Cost, String> {
    let text = std::fs::read_to_string(prices).map_err(|e| format!("{}: {e}", prices.display()))?;
    let p: toml::Value = toml::from_str(&text).map_err(|e| format!("prices.toml: {e}"))?;
    let days = price(&p, "assumptions", "days_per_month")?;
    let cold = price(&p, "assumptions", "cold_fraction")?;
    let minutes = days * 24.0 * 60.0;
    let invocations = |name: &str| -> Result<f64, String> {
        Ok(match name {
            "scan-offerings" => minutes / load.every_minutes,
            "track-blocks" => minutes / d.track_minutes,
            _ => price(&p, "assumptions", "capacity_events_per_month")?,
        })
    };
    let gb = d.memory_mb as f64 / 1024.0;
    let gb_s_price = price(&p, "lambda", "arm64_gb_second")?;
    let mut u = Usage::default();
    let platform_log = price(&p, "assumptions", "platform_log_bytes_per_invocation")?;
    for f in fns {
        let n = invocations(f.name)?;
        let asking = if f.name == "scan-offerings" { load.ask_secs } else { 0.0 };
        let secs =
            billed_secs(f.median_handler() + Duration::from_secs_f64(asking)) + cold * billed_secs(f.median_init());
        u.add(f, n, secs, gb, platform_log);
    }
    let lines = u.lines(&p, gb_s_price, d, load)?;
    let total: f64 = lines.iter().map(|l| l.1).sum();
    Ok(Cost { load: load.clone(), lines, total })
}

/// What the functions use in a month, summed over them.
#[derive(Clone, Copy, Default)]
struct Usage {
    gb_s: f64,
    requests: f64,
    wru: f64,
    rru: f64,
    bytes: f64,
    publishes: f64,
    logs: f64,
    sched: f64,
}

impl Usage {
    /// Adds function `f`'s month: `n` invocations of `secs` billed seconds at `gb` GB each.
    fn add(&mut self, f: &FunctionFigures, n: f64, secs: f64, gb: f64, platform_log: f64) {
        self.gb_s += n * secs * gb;
        self.requests += n;
        self.wru += n * f.per_run(f.counts.dynamo_wru);
        self.rru += n * f.per_run(f.counts.dynamo_rru);
        self.bytes += n * f.per_run(f.counts.dynamo_write_bytes as f64);
        self.publishes += n * f.per_run(f.counts.sns_publishes as f64);
        self.logs += n * (f.log_bytes() + platform_log);
        // Scheduled functions are invoked by Scheduler; each reminder schedule fires once.
        if f.name != "on-capacity-event" {
            self.sched += n;
        }
        self.sched += n * f.per_run(f.counts.schedules_created as f64);
    }

    /// The bill's lines at the prices `p`: what each costs, and how much of it was used.
    fn lines(
        &self,
        p: &toml::Value,
        gb_s_price: f64,
        d: &Defaults,
        load: &ScanLoad,
    ) -> Result<Vec<(String, f64, String)>, String> {
        let Usage { gb_s, requests, wru, rru, bytes, publishes, logs, sched } = *self;
        Ok(vec![
            (
                "Lambda compute".to_string(),
                gb_s * gb_s_price,
                format!(
                    "{gb_s:.0} GB-s ({} MB, arm64, init billed on every run; scan {:.1} s of asking per run)",
                    d.memory_mb, load.ask_secs
                ),
            ),
            (
                "Lambda requests".to_string(),
                requests / 1e6 * price(p, "lambda", "requests_per_million")?,
                format!("{requests:.0} invocations"),
            ),
            (
                "DynamoDB writes".to_string(),
                wru / 1e6 * price(p, "dynamodb", "write_request_units_per_million")?,
                format!("{wru:.0} WRU (counted at the wire)"),
            ),
            (
                "DynamoDB reads".to_string(),
                rru / 1e6 * price(p, "dynamodb", "read_request_units_per_million")?,
                format!("{rru:.0} RRU (counted at the wire)"),
            ),
            (
                "DynamoDB storage".to_string(),
                bytes / 1e9 * price(p, "dynamodb", "storage_gb_month")?,
                format!("{:.1} MB written a month (upper bound: nothing expires or is overwritten)", bytes / 1e6),
            ),
            (
                "SNS publishes".to_string(),
                publishes / 1e6 * price(p, "sns", "publishes_per_million")?,
                format!("{publishes:.0} publishes"),
            ),
            (
                "Scheduler invocations".to_string(),
                sched / 1e6 * price(p, "scheduler", "invocations_per_million")?,
                format!("{sched:.0} invocations"),
            ),
            (
                "CloudWatch Logs ingestion".to_string(),
                logs / 1e9 * price(p, "cloudwatch_logs", "ingestion_per_gb")?,
                format!("{:.1} MB of logs", logs / 1e6),
            ),
        ])
    }
}

/// The month's cost a stack may reach at its defaults, USD: the market is watched continuously,
/// and a block lost to a slower watcher costs far more (docs/benchmarks.md).
const TARGET_USD: f64 = 5.0;

impl Cost {
    /// The first (default) schedule with its breakdown; the others as one line each.
    pub fn rows(&self, rows: &mut Vec<Row>, primary: bool) {
        if !primary {
            rows.push(row(
                format!("  monthly cost, {}", self.load.label),
                format!("${:.3} (Lambda compute ${:.3})", self.total, self.lines[0].1),
                "<= $5",
                Some(self.total / TARGET_USD),
            ));
            return;
        }
        rows.push(row(
            format!("monthly cost at default settings ({})", self.load.label),
            format!("${:.3}", self.total),
            "<= $5",
            Some(self.total / TARGET_USD),
        ));
        for (name, usd, what) in &self.lines {
            rows.push(info(format!("  {name}"), format!("${usd:.4} ({what})")));
        }
    }
}
