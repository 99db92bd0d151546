//! Scan fan-out against the market simulator: capblock's real `fan_out` over the real
//! `Ec2Market` (production timeouts, the fan-out's pacing), the token-bucket bound, and the
//! one-by-one boto3 baseline.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::legacy_fan_out::fan_out;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::ports::{InstanceTypeSource, MarketError, OfferingQuery};
use chrono::{DateTime, Utc};

pub const REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "eu-west-2"];
pub const TYPES: [&str; 4] = ["p5.48xlarge", "p5e.48xlarge", "p4d.24xlarge", "trn1.32xlarge"];
const COUNTS: [u32; 8] = [1, 2, 4, 8, 16, 32, 48, 64];
const DAYS: [u32; 8] = [1, 2, 3, 4, 7, 14, 21, 28];

/// EC2's documented token bucket for describe (non-mutating) actions, per account, region
/// and API: 100 tokens, refilled at 20 per second.
pub const EC2_BUCKET: (f64, u32) = (20.0, 100);
/// A bucket mostly spent by other callers before the scan starts: 20 tokens, 10 per second.
pub const TIGHT_BUCKET: (f64, u32) = (10.0, 20);

/// The simulated market's behaviour.
#[derive(Debug, Clone, Copy)]
pub struct Market {
    pub latency_ms: u64,
    /// (rate per second, burst) per region; `None`: no throttling
    pub throttle: Option<(f64, u32)>,
}

/// The query grid: 4 regions x 4 types x k counts x k durations.
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    pub k: usize,
}

impl Grid {
    pub fn for_queries(n: usize) -> Grid {
        Grid { k: ((n / 16) as f64).sqrt().round() as usize }
    }
    pub fn queries(&self) -> usize {
        16 * self.k * self.k
    }
    pub fn counts(&self) -> &'static [u32] {
        &COUNTS[..self.k]
    }
    pub fn days(&self) -> &'static [u32] {
        &DAYS[..self.k]
    }
}

pub const CLOCK: &str = "2026-12-01T00:00:00Z";

/// The legacy rows' market: EC2's general token bucket only, the describe limit off (what
/// they measured before issue 13; the describe limit is `paced.rs`'s business).
pub fn scenario(m: Market) -> String {
    scenario_with(m, "describe_limit = false\n")
}

/// The grid's market with `behaviour` added to its `[behaviour]` table.
pub fn scenario_with(m: Market, behaviour: &str) -> String {
    let mut s =
        format!("seed = 1\n\n[clock]\nstart = \"{CLOCK}\"\n\n[behaviour]\nlatency_ms = {}\n{behaviour}", m.latency_ms);
    if let Some((rate, burst)) = m.throttle {
        s += &format!("throttle = {{ rate_per_sec = {rate:.1}, burst = {burst} }}\n");
    }
    let counts = format!("{:?}", COUNTS);
    let days = format!("{:?}", DAYS);
    for region in REGIONS {
        for t in TYPES {
            s += &format!(
                "\n[[market]]\nregion = \"{region}\"\ninstance_type = \"{t}\"\ncounts = {counts}\ndurations_days = {days}\n\
                 start_days = [1, 4, 9]\nprice = [{{ from = \"{CLOCK}\", usd_per_accelerator_hour = \"4.10\" }}]\n"
            );
        }
    }
    s
}

fn window() -> (DateTime<Utc>, DateTime<Utc>) {
    let now: DateTime<Utc> = CLOCK.parse().expect("constant");
    (now + chrono::Duration::days(1), now + chrono::Duration::days(14))
}

pub fn queries(g: Grid) -> Vec<OfferingQuery> {
    let (start_from, start_to) = window();
    let mut out = Vec::new();
    for r in REGIONS {
        for t in TYPES {
            for &c in g.counts() {
                for &d in g.days() {
                    out.push(OfferingQuery {
                        region: r.parse().expect("region"),
                        instance_type: t.parse().expect("type"),
                        instance_count: c,
                        ultraservers: None,
                        duration_hours: d * 24,
                        start_from,
                        start_to,
                    });
                }
            }
        }
    }
    out
}

/// The fastest any client can finish: regions in parallel, each serving n calls through a
/// bucket of `burst` refilled at `rate`, plus one call's latency.
pub fn bound(g: Grid, m: Market) -> Duration {
    let per_region = (g.queries() / REGIONS.len()) as f64;
    let wait = match m.throttle {
        Some((rate, burst)) => ((per_region - f64::from(burst)) / rate).max(0.0),
        None => 0.0,
    };
    Duration::from_secs_f64(wait + m.latency_ms as f64 / 1000.0)
}

#[derive(Debug, Clone)]
pub struct ScanRun {
    pub queries: usize,
    pub elapsed: Duration,
    pub offerings: usize,
    pub failed: usize,
    pub first_error: Option<String>,
    pub throttled: u64,
    pub calls: u64,
}

impl ScanRun {
    /// A run as a scanner process reported it (one JSON object: `seconds`, `offerings`,
    /// `failed`, `first_error`), with what the simulator counted since its last reset.
    fn reported(queries: usize, v: &serde_json::Value, sim: &str) -> ScanRun {
        let (throttled, calls) = sim_counts(sim);
        ScanRun {
            queries,
            elapsed: Duration::from_secs_f64(v["seconds"].as_f64().unwrap_or(f64::NAN)),
            offerings: v["offerings"].as_u64().unwrap_or(0) as usize,
            failed: v["failed"].as_u64().unwrap_or(0) as usize,
            first_error: v["first_error"].as_str().map(str::to_string),
            throttled,
            calls,
        }
    }
}

/// Resets the simulator to `m` with fresh token buckets.
pub fn reset(sim: &str, m: Market) -> Result<(), String> {
    let (status, body) = capblock_http1::blocking::request(sim, "POST", "/_sim/scenario", scenario(m).as_bytes())
        .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("POST /_sim/scenario: {status} {}", String::from_utf8_lossy(&body)));
    }
    // A new scenario is a new world: every region's bucket starts full.
    Ok(())
}

/// (throttled answers, DescribeCapacityBlockOfferings calls) the simulator counted since the
/// last reset (a scan's DescribeInstanceTypes calls are not counted).
pub fn sim_counts(sim: &str) -> (u64, u64) {
    let Ok((_, body)) = capblock_http1::blocking::request(sim, "GET", "/_sim/state", b"") else { return (0, 0) };
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let throttled = v["faults_injected"]["throttled"].as_u64().unwrap_or(0);
    let calls = v["calls"]["DescribeCapacityBlockOfferings"].as_u64().unwrap_or(0);
    (throttled, calls)
}

/// One scan in a fresh process (`capblock-bench --scan-child`), like a new Lambda container:
/// no connection or state carried over from an earlier scan.
pub fn capblock_scan(sim: &str, g: Grid, m: Market, per_region: usize) -> Result<ScanRun, String> {
    reset(sim, m)?;
    let out = child_command(sim)?
        .args(["--scan-child", &g.k.to_string(), &per_region.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("scan child failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("scan child output: {e}"))?;
    Ok(ScanRun::reported(g.queries(), &v, sim))
}

/// The child side: capblock's `fan_out` over a fresh `Ec2Market` (production timeouts; the
/// fan-out's own pacing and retries), timed around the fan-out; prints one JSON object.
pub fn scan_child(k: usize, per_region: usize) -> Result<String, String> {
    // The runtime the functions run on (their `main`s: current_thread).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let market = Ec2Market::new(capblock_shared::aws::load_config().await);
        let qs = queries(Grid { k });
        // What the scan does before its fan-out, untimed: learn each region's accelerator
        // counts (one DescribeInstanceTypes per region, `scan::learn_accelerators`). It also
        // builds the HTTP client (root certificates) that the fan-out then finds ready, as it
        // does in the Lambda.
        let types: Vec<_> = TYPES.iter().map(|t| t.parse().expect("type")).collect();
        for r in REGIONS {
            market.accelerators(&r.parse().expect("region"), &types).await.map_err(|e| e.to_string())?;
        }
        let t = Instant::now();
        let answers = fan_out(&market, &qs, per_region).await;
        let seconds = t.elapsed().as_secs_f64();
        let failed: Vec<&MarketError> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
        Ok(serde_json::json!({
            "seconds": seconds,
            "offerings": answers.iter().filter_map(|a| a.as_ref().ok()).map(Vec::len).sum::<usize>(),
            "failed": failed.len(),
            "first_error": failed.first().map(|e| e.to_string()),
        })
        .to_string())
    })
}

/// This binary again as a child process, its environment set by the parent (a process never
/// changes its own environment): EC2 at the simulator, test credentials where none are set.
pub fn child_command(sim: &str) -> Result<Command, String> {
    let mut cmd = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.env("AWS_ENDPOINT_URL_EC2", sim);
    for (key, v) in [("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_REGION", "us-east-1")] {
        if std::env::var_os(key).is_none() {
            cmd.env(key, v);
        }
    }
    Ok(cmd)
}

/// The boto3 baseline (`baseline.py`), one call after another, standard retry mode.
pub fn baseline(python: &Path, script: &Path, sim: &str, g: Grid, m: Market) -> Result<ScanRun, String> {
    reset(sim, m)?;
    let (from, to) = window();
    let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let out = Command::new(python)
        .arg(script)
        .args(["--endpoint", sim, "--regions", &REGIONS.join(","), "--types", &TYPES.join(",")])
        .args(["--counts", &join(g.counts()), "--days", &join(g.days())])
        .args(["--start", &from.to_rfc3339(), "--end", &to.to_rfc3339()])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("AWS_ENDPOINT_URL_EC2")
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!("baseline.py failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("baseline.py output: {e}"))?;
    Ok(ScanRun::reported(v["queries"].as_u64().unwrap_or(0) as usize, &v, sim))
}
