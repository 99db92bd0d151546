//! The question grid the bench asks the market simulator (4 regions x 4 instance types x k
//! counts x k durations), the simulator's scenario for it, and this binary as a child process
//! asking it (`paced.rs`).

use std::process::Command;

use capblock_shared::ports::OfferingQuery;
use chrono::{DateTime, Utc};

pub const REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "eu-west-2"];
pub const TYPES: [&str; 4] = ["p5.48xlarge", "p5e.48xlarge", "p4d.24xlarge", "trn1.32xlarge"];
const COUNTS: [u32; 8] = [1, 2, 4, 8, 16, 32, 48, 64];
const DAYS: [u32; 8] = [1, 2, 3, 4, 7, 14, 21, 28];

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
                        also_types: Vec::new(),
                    });
                }
            }
        }
    }
    out
}

/// The fastest any client can finish: regions in parallel, each serving n calls through a
/// bucket of `burst` refilled at `rate`, plus one call's latency.
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
