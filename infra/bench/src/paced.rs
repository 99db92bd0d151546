//! (a) Full coverage and (c) the describe-limit storm: capblock's real `ask_all` over the real
//! `Ec2Market` against the simulator binary over HTTP, with EC2's describe limit (burst 2, one
//! token per 4 s per region) and capblock's pacing both sped up by `SCALE`, so that what takes
//! minutes of EC2 time takes seconds here. Figures are given in EC2 time (wall x `SCALE`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use capblock_shared::app::paced_asker::{Answer, Pacing, ask_all};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::ids::Region;
use capblock_shared::domain::market_memory::{Carried, Strikes};
use capblock_shared::domain::plan::{self, Asked, Candidate, DescribeBudget, RegionMemory};
use capblock_shared::ports::{InstanceTypeSource, OfferingQuery};

use crate::grid::{self, Grid, REGIONS, TYPES};

/// EC2 time per wall second.
pub const SCALE: f64 = 20.0;
/// The simulator's latency per call, wall (x `SCALE` = 200 ms of EC2 time).
pub const LATENCY_MS: u64 = 10;
/// The rule set of (a) and (c): 4 regions x 4 types x 4 counts x 4 durations.
pub const GRID: Grid = Grid { k: 4 };

/// capblock's describe budget with every duration divided by `SCALE`.
pub fn scaled(b: DescribeBudget) -> DescribeBudget {
    DescribeBudget {
        refill: b.refill.div_f64(SCALE),
        share: b.share,
        fastest: b.fastest.div_f64(SCALE),
        slowest: b.slowest.div_f64(SCALE),
        ask_for: b.ask_for.div_f64(SCALE),
    }
}

/// The simulator's scenario: the query grid's market, the sped-up describe limit, other
/// callers spending `others` of its refill, and `throttle_rate` RequestLimitExceeded at random.
pub fn scenario(others: f64, throttle_rate: f64) -> String {
    let refill = DescribeBudget::default().refill.as_secs_f64() / SCALE;
    let per_min = others * 60.0 / refill;
    grid::scenario_with(
        grid::Market { latency_ms: LATENCY_MS, throttle: None },
        &format!(
            "describe_limit = {{ burst = 2, refill_secs = {refill} }}\n\
             describe_limit_other_callers_per_min = {per_min:.1}\nthrottle_rate = {throttle_rate}\n"
        ),
    )
}

/// The bound of (a): one region's questions at capblock's share of the refill, in EC2 time.
pub fn coverage_bound(b: &DescribeBudget) -> Duration {
    let per_region = GRID.queries() / REGIONS.len();
    b.pace().mul_f64(per_region as f64)
}

/// What the simulator counted (since the last reset).
#[derive(Debug, Clone, Copy, Default)]
pub struct SimCounts {
    pub calls: u64,
    pub describe_limited: u64,
    pub throttled: u64,
}

pub fn sim_counts(sim: &str) -> SimCounts {
    let Ok((_, body)) = capblock_http1::blocking::request(sim, "GET", "/_sim/state", b"") else {
        return SimCounts::default();
    };
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let n = |p: &str| v.pointer(p).and_then(serde_json::Value::as_u64).unwrap_or(0);
    SimCounts {
        calls: n("/calls/DescribeCapacityBlockOfferings"),
        describe_limited: n("/faults_injected/describe_limited"),
        throttled: n("/faults_injected/throttled"),
    }
}

fn load(sim: &str, scenario: &str) -> Result<(), String> {
    let (status, body) = capblock_http1::blocking::request(sim, "POST", "/_sim/scenario", scenario.as_bytes())
        .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("POST /_sim/scenario: {status} {}", String::from_utf8_lossy(&body)));
    }
    Ok(())
}

fn child(args: &[&str], sim: &str) -> Result<serde_json::Value, String> {
    let out = grid::child_command(sim)?.args(args).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", args[0], String::from_utf8_lossy(&out.stderr)));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{} output: {e}", args[0]))
}

/// Answers of one `ask_all`, tallied.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    pub questions: u64,
    pub answered: u64,
    pub carried_over: u64,
    /// Neither offerings nor carried over: NotSold, Unsupported, QuotaZero or Failed.
    pub lost: u64,
    pub failed: u64,
    pub quota_zero: u64,
    pub offerings: u64,
}

impl Tally {
    fn add(&mut self, a: &Answer) {
        self.questions += 1;
        match a {
            Answer::Offerings(list) => {
                self.answered += 1;
                self.offerings += list.len() as u64;
            }
            Answer::CarriedOver => self.carried_over += 1,
            Answer::Failed(_) => {
                self.lost += 1;
                self.failed += 1;
            }
            Answer::QuotaZero => {
                self.lost += 1;
                self.quota_zero += 1;
            }
            // Only a one-shot search gives a family up; the bench runs the scan's way.
            Answer::NotSold(_) | Answer::Unsupported | Answer::GivenUp => self.lost += 1,
        }
    }
}

/// (a) as measured: EC2 seconds to ask all 256 questions, and what the simulator counted.
#[derive(Debug, Clone)]
pub struct Coverage {
    pub ec2_secs: f64,
    pub wall_secs: f64,
    pub tally: Tally,
    pub sim: SimCounts,
}

pub fn coverage(sim: &str) -> Result<Coverage, String> {
    load(sim, &scenario(0.0, 0.0))?;
    let v = child(&["--cover-child"], sim)?;
    let wall = v["seconds"].as_f64().unwrap_or(f64::NAN);
    let tally: Tally = serde_json::from_value(v["tally"].clone()).map_err(|e| e.to_string())?;
    Ok(Coverage { ec2_secs: wall * SCALE, wall_secs: wall, tally, sim: sim_counts(sim) })
}

/// (c) as measured.
#[derive(Debug, Clone)]
pub struct Storm {
    pub rounds: u64,
    pub tally: Tally,
    /// Distinct questions answered at least once over the rounds.
    pub covered: u64,
    /// The most rested refusals in a row any family reached (a quota of 0 at `QUOTA_STRIKES`).
    pub max_strikes: u64,
    pub sim: SimCounts,
    pub others: f64,
    pub throttle_rate: f64,
}

pub const STORM_ROUNDS: u32 = 24;
pub const STORM_OTHERS: f64 = 0.6;
pub const STORM_THROTTLE_RATE: f64 = 0.2;

pub fn storm(sim: &str) -> Result<Storm, String> {
    load(sim, &scenario(STORM_OTHERS, STORM_THROTTLE_RATE))?;
    let v = child(&["--storm-child", &STORM_ROUNDS.to_string()], sim)?;
    let tally: Tally = serde_json::from_value(v["tally"].clone()).map_err(|e| e.to_string())?;
    Ok(Storm {
        rounds: u64::from(STORM_ROUNDS),
        tally,
        covered: v["covered"].as_u64().unwrap_or(0),
        max_strikes: v["max_strikes"].as_u64().unwrap_or(0),
        sim: sim_counts(sim),
        others: STORM_OTHERS,
        throttle_rate: STORM_THROTTLE_RATE,
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    // The runtime the functions run on (their `main`s: current_thread).
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())
}

/// The child of (a): every question at once through `ask_all`, asking time long enough.
pub fn cover_child() -> Result<String, String> {
    runtime()?.block_on(async {
        let market = Ec2Market::new(capblock_shared::aws::load_config().await);
        warm_up(&market).await?;
        let budget = scaled(DescribeBudget::default());
        let pacing = Pacing { bounds: budget.bounds(), ask_for: coverage_bound(&budget).mul_f64(2.0) };
        let qs = grid::queries(GRID);
        let t = Instant::now();
        let asked = ask_all(&market, &qs, &pacing, &Carried::default(), || {}).await;
        let seconds = t.elapsed().as_secs_f64();
        let mut tally = Tally::default();
        asked.answers.iter().for_each(|a| tally.add(a));
        Ok(serde_json::json!({ "seconds": seconds, "tally": tally }).to_string())
    })
}

/// What the scan does before it asks, untimed: one DescribeInstanceTypes per region (it also
/// builds the HTTP client that the asking then finds ready, as in the Lambda).
async fn warm_up(market: &Ec2Market) -> Result<(), String> {
    let types: Vec<_> = TYPES.iter().map(|t| t.parse().expect("type")).collect();
    for r in REGIONS {
        market.accelerators(&r.parse().expect("region"), &types).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The child of (c): `rounds` scans' worth of asking, each planned by the real planner from
/// the cursor the earlier ones left (`RegionMemory.asked`), carrying the strikes, at capblock's
/// default budget sped up by `SCALE`, a scaled 10 s apart.
pub fn storm_child(rounds: u32) -> Result<String, String> {
    runtime()?.block_on(async {
        let market = Ec2Market::new(capblock_shared::aws::load_config().await);
        let budget = scaled(DescribeBudget::default());
        let pacing = Pacing::from(&budget);
        let calls = budget.calls_per_region();
        let qs = grid::queries(GRID);
        let key = |q: &OfferingQuery| format!("{}|{}|{}h", q.instance_type, q.instance_count, q.duration_hours);
        let mut memories: BTreeMap<Region, RegionMemory> = BTreeMap::new();
        for r in REGIONS {
            memories.insert(r.parse().expect("region"), RegionMemory::default());
        }
        let threshold = capblock_shared::domain::money::Money::parse("2.95", "USD").expect("constant").amount();
        let (mut strikes, mut tally, mut covered, mut max_strikes) =
            (Strikes::new(), Tally::default(), BTreeSet::new(), 0);
        for _ in 0..rounds {
            let now = chrono::Utc::now();
            let mut chosen: Vec<usize> = Vec::new();
            for (region, memory) in &memories {
                let mine: Vec<usize> = (0..qs.len()).filter(|&i| &qs[i].region == region).collect();
                let candidates: Vec<Candidate> = mine
                    .iter()
                    .map(|&i| Candidate { key: key(&qs[i]), threshold, closes_in: chrono::Duration::days(14) })
                    .collect();
                chosen.extend(plan::choose(&candidates, memory, calls).into_iter().map(|j| mine[j]));
            }
            let queries: Vec<OfferingQuery> = chosen.iter().map(|&i| qs[i].clone()).collect();
            let asked = ask_all(&market, &queries, &pacing, &Carried::from(strikes.clone()), || {}).await;
            strikes = asked.strikes;
            max_strikes = max_strikes.max(strikes.values().copied().max().unwrap_or(0));
            for (&i, a) in chosen.iter().zip(&asked.answers) {
                tally.add(a);
                if let Answer::Offerings(_) = a {
                    covered.insert(i);
                    let m = memories.get_mut(&qs[i].region).expect("a region");
                    m.asked.insert(key(&qs[i]), Asked { at: now, cheapest: None, recorded: None });
                }
            }
            tokio::time::sleep(Duration::from_secs(10).div_f64(SCALE)).await;
        }
        Ok(serde_json::json!({ "tally": tally, "covered": covered.len(), "max_strikes": max_strikes }).to_string())
    })
}
