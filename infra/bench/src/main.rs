//! `make bench`: capblock's figures, each against its target (project issues 8 and 13).
//!
//! Run it under the local stack (`infra/local/stack.sh run -- capblock-bench ...`): the
//! cold-start part needs the stack's table and topics. Every figure is measured in this run;
//! nothing here asserts, it reports. See docs/benchmarks.md.
//!
//! The figures on EC2's describe limit come first (issue 13): (a) full coverage and (c) the
//! storm against the simulator with the limit sped up (`paced.rs`), (b) detection latency and
//! (d) the budget left to others in virtual time (`detect.rs`). The figures of issue 8 follow
//! as secondary ones: cold start, memory, package size, and the monthly cost. (The fan-out of
//! before issue 13 is no longer measured: its figures stay in docs/benchmarks.md.)

mod cold;
mod cost;
mod detect;
mod grid;
mod paced;
mod proxy;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: capblock-bench [--repo DIR] [--bin-dir DIR] [--runs N] [--detect-days N] \
     [--readings 0,1,2] [--detect-types-only] [--skip-paced] [--skip-detect] [--skip-cold]";

struct Args {
    repo: PathBuf,
    bin_dir: PathBuf,
    runs: usize,
    /// Virtual days the detection simulation covers.
    detect_days: u64,
    /// Which of `detect::READINGS` the detection figures are taken under (all by default).
    readings: Vec<usize>,
    paced: bool,
    /// Only capblock's own detection rows, one type and ten types a question (the others'
    /// askers and the member accounts' rows take most of the detection's time).
    types_only: bool,
    detect: bool,
    cold: bool,
}

fn args() -> Args {
    let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
    let cache = std::env::var("CAPBLOCK_CACHE").unwrap_or_else(|_| format!("{home}/.cache/capblock"));
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| format!("{cache}/target-release"));
    let mut a = Args {
        repo: PathBuf::from("."),
        bin_dir: PathBuf::from(format!("{target}/release")),
        runs: 15,
        detect_days: 30,
        readings: vec![0, 1, 2],
        paced: true,
        types_only: false,
        detect: true,
        cold: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{arg} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--repo" => a.repo = val().into(),
            "--bin-dir" => a.bin_dir = val().into(),
            "--runs" => a.runs = val().parse().expect("--runs N"),
            "--detect-days" => a.detect_days = val().parse().expect("--detect-days N"),
            "--readings" => {
                a.readings = val().split(',').map(|r| r.trim().parse().expect("--readings 0,1,2")).collect()
            }
            "--skip-paced" => a.paced = false,
            "--detect-types-only" => a.types_only = true,
            "--skip-detect" => a.detect = false,
            "--skip-cold" => a.cold = false,
            _ => {
                eprintln!("{USAGE}");
                std::process::exit(2);
            }
        }
    }
    a
}

/// One line of the result table.
pub struct Row {
    figure: String,
    value: String,
    target: String,
    /// value / target, oriented so that <= 1.0 meets the target ("x" as printed)
    ratio: Option<f64>,
}

fn row(figure: impl Into<String>, value: impl Into<String>, target: impl Into<String>, ratio: Option<f64>) -> Row {
    Row { figure: figure.into(), value: value.into(), target: target.into(), ratio }
}

fn info(figure: impl Into<String>, value: impl Into<String>) -> Row {
    row(figure, value, "-", None)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1048576.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    if v.is_empty() { Duration::ZERO } else { v[v.len() / 2] }
}

/// The deployed defaults, read from template.yaml so the bench follows the template.
pub struct Defaults {
    pub memory_mb: u64,
    pub scan_minutes: f64,
    /// The scan's asking time per run (template parameter AskSeconds).
    pub ask_secs: u64,
    pub track_minutes: f64,
}

fn rate_minutes(expr: &str) -> Option<f64> {
    let inner = expr.split_once("rate(")?.1.split(')').next()?;
    let (n, unit) = inner.trim().split_once(' ')?;
    let n: f64 = n.parse().ok()?;
    Some(if unit.starts_with("hour") {
        n * 60.0
    } else if unit.starts_with("day") {
        n * 1440.0
    } else {
        n
    })
}

fn defaults(repo: &Path) -> Defaults {
    let t = std::fs::read_to_string(repo.join("template.yaml")).unwrap_or_default();
    let lines: Vec<&str> = t.lines().collect();
    let param_default = |name: &str| -> Option<f64> {
        let i = lines.iter().position(|l| l.trim() == format!("{name}:"))?;
        lines[i..].iter().take(8).find_map(|l| l.trim().strip_prefix("Default:")).and_then(rate_minutes)
    };
    let after = |key: &str| -> Option<String> {
        let l = lines.iter().find(|l| l.trim().starts_with(key))?;
        Some(l.split_once(':')?.1.trim().trim_matches('\'').trim_matches('"').to_string())
    };
    Defaults {
        memory_mb: after("MemorySize:").and_then(|v| v.parse().ok()).unwrap_or(128),
        scan_minutes: param_default("ScanRate").unwrap_or(10.0),
        ask_secs: {
            let i = lines.iter().position(|l| l.trim() == "AskSeconds:");
            i.and_then(|i| lines[i..].iter().take(8).find_map(|l| l.trim().strip_prefix("Default:")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(50)
        },
        track_minutes: param_default("TrackRate").unwrap_or(5.0),
    }
}

fn start_sim(bin: &Path, name: &str, scenario: &str, dir: &Path) -> Result<(Child, String), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let (scn, port) = (dir.join(format!("{name}-scenario.toml")), dir.join(format!("{name}-sim.port")));
    std::fs::write(&scn, scenario).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&port);
    let log = std::fs::File::create(dir.join(format!("{name}-sim.log"))).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--scenario"])
        .arg(&scn)
        .arg("--port-file")
        .arg(&port)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if let Ok(p) = std::fs::read_to_string(&port)
            && !p.trim().is_empty()
        {
            return Ok((child, format!("http://127.0.0.1:{}", p.trim())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err("the simulator did not write its port".into())
}

/// (a) full coverage and (c) the storm, against a simulator of their own.
fn run_paced(a: &Args, dir: &Path, rows: &mut Vec<Row>) -> Result<(), String> {
    let (mut sim, url) = start_sim(&a.bin_dir.join("capblock-market-sim"), "paced", &paced::scenario(0.0, 0.0), dir)?;
    let res = (|| -> Result<(), String> {
        let budget = capblock_shared::domain::plan::DescribeBudget::default();
        let bound = paced::coverage_bound(&budget).as_secs_f64();
        let c = paced::coverage(&url)?;
        eprintln!("bench:   (a) coverage: {c:?}, bound {bound:.0} s");
        let t = &c.tally;
        rows.push(row(
            format!("(a) ask all {} questions, describe limit (sped up x{:.0})", t.questions, paced::SCALE),
            format!(
                "{:.0} s EC2 time ({:.2} s wall x {:.0}; {} answered, {} carried over, {} lost; {} calls, {} refused)",
                c.ec2_secs,
                c.wall_secs,
                paced::SCALE,
                t.answered,
                t.carried_over,
                t.lost,
                c.sim.calls,
                c.sim.describe_limited + c.sim.throttled
            ),
            format!("<= 1.3 x bound {bound:.0} s = {:.0} s", 1.3 * bound),
            Some(c.ec2_secs / (1.3 * bound)),
        ));
        let s = paced::storm(&url)?;
        eprintln!("bench:   (c) storm: {s:?}");
        let t = &s.tally;
        rows.push(row(
            "(c) describe-limit storm: questions lost",
            format!(
                "{} ({} runs of the default budget sped up x{:.0}, planner cursor and strikes carried; {} asked, {} \
                 answered, {} carried over, {}/{} questions answered at least once; others spend {:.0} % of the \
                 limit, throttle_rate {}: {} describe-limit + {} RequestLimitExceeded refusals of {} calls)",
                t.lost,
                s.rounds,
                paced::SCALE,
                t.questions,
                t.answered,
                t.carried_over,
                s.covered,
                paced::GRID.queries(),
                s.others * 100.0,
                s.throttle_rate,
                s.sim.describe_limited,
                s.sim.throttled,
                s.sim.calls
            ),
            "= 0",
            Some(t.lost as f64),
        ));
        rows.push(row("  storm: false 'region failed' answers", t.failed.to_string(), "= 0", Some(t.failed as f64)));
        rows.push(row(
            "  storm: false 'quota 0' answers",
            format!(
                "{} (most rested refusals in a row for one family: {}; quota 0 is declared at {})",
                t.quota_zero,
                s.max_strikes,
                capblock_shared::app::paced_asker::QUOTA_STRIKES
            ),
            "= 0",
            Some(t.quota_zero as f64),
        ));
        Ok(())
    })();
    let _ = sim.kill();
    let _ = sim.wait();
    res
}

/// What the cost model takes from the detection simulation: per schedule, minutes between
/// runs and the mean asking time of a run.
#[derive(Default)]
struct DetectFigures {
    schedules: Vec<(String, f64, f64)>,
}

fn minutes(secs: f64) -> String {
    if secs < 600.0 { format!("{secs:.0} s") } else { format!("{secs:.0} s = {:.0} min", secs / 60.0) }
}

fn latency_text(o: &detect::Outcome) -> String {
    let or_missed = |v: Option<f64>| v.map_or("not found".to_string(), minutes);
    format!(
        "median {}, p90 {}, worst found {}; {}/{} found, {} never ({:.1} %)",
        or_missed(o.median()),
        or_missed(o.percentile(0.9)),
        or_missed(o.worst()),
        o.found.len(),
        o.appearances,
        o.missed(),
        100.0 * o.missed() as f64 / o.appearances.max(1) as f64
    )
}

/// (b) detection latency under each reading of the describe limit, quiet and with a person in
/// the account, and (d) the share of the other callers' calls refused, in virtual time.
fn run_detect(a: &Args, d: &Defaults, rows: &mut Vec<Row>) -> DetectFigures {
    use capblock_shared::domain::plan::DescribeBudget;
    use detect::{A_PERSON, Asker, READINGS};
    let setup = detect::Setup { horizon: Duration::from_secs(a.detect_days * 86400), ..Default::default() };
    let world = detect::World::new(setup);
    let (on_cheap, on_top3) = world.clustering();
    eprintln!(
        "bench: detection: {} appearances over {} days, {:.0} % on a cheap pair, {:.0} % on one of its 3 cheapest \
         questions",
        world.appearances(),
        a.detect_days,
        on_cheap * 100.0,
        on_top3 * 100.0
    );
    // capblock now: the template's schedule and asking time, the learned pace, buying on sight.
    let budget = DescribeBudget { ask_for: Duration::from_secs(d.ask_secs), ..DescribeBudget::default() };
    let every = Duration::from_secs_f64(d.scan_minutes * 60.0);
    let now = Asker::Capblock { every, budget, on_sight: true, accounts: 1, types_per_question: 1 };
    let before = capblock_before();
    let mut figs = DetectFigures::default();
    for limit in a.readings.iter().filter_map(|&r| READINGS.get(r).copied()) {
        let polite = Asker::RoundRobin { gap: limit.refill * 2 };
        let greedy = Asker::RoundRobin { gap: limit.refill };
        for (scenario, others) in [("quiet account", &[][..]), ("a person and a notebook", &A_PERSON[..])] {
            let case = Case { world: &world, limit, scenario, others };
            let mine = case.timed("capblock", now);
            case.capblock_rows(&mine, rows);
            // Ten types a question (InstanceTypePreferences), where EC2 answers a region's types
            // of one count and duration together. capblock groups only types of one family (a
            // refusal for one family would cost the answer for all): in this market every type
            // of a region is a family of its own, so this row is what asking across families
            // would bring, beside the defaults' one type a question.
            let ten = Asker::Capblock { every, budget, on_sight: true, accounts: 1, types_per_question: 10 };
            case.types_row(&mine, ten, rows);
            if figs.schedules.is_empty() {
                let ask = mine.ask_secs.iter().sum::<f64>() / mine.ask_secs.len().max(1) as f64;
                figs.schedules.push((
                    format!("scan every {} min, {} s asking", d.scan_minutes, d.ask_secs),
                    d.scan_minutes,
                    ask,
                ));
            }
            if a.types_only {
                continue;
            }
            case.others_rows(
                [
                    ("capblock before (every 10 min, fixed half share, buys after asking)", before),
                    ("polite script (half the limit, round robin)", polite),
                    ("greedy script (the whole limit)", greedy),
                ],
                rows,
            );
            // The watch over member accounts, on the first reading taken: each member lends
            // its own describe limit, so the bound divides by the accounts.
            if Some(&limit.name) == a.readings.first().and_then(|&r| READINGS.get(r)).map(|l| &l.name) {
                for accounts in [2usize, 4] {
                    case.accounts_row(
                        Asker::Capblock { every, budget, on_sight: true, accounts, types_per_question: 1 },
                        accounts,
                        rows,
                    );
                }
            }
        }
    }
    figs
}

/// capblock before: every 10 minutes, 40 s of asking at a fixed half share (one call per 8 s),
/// the purchase after the run's asking.
fn capblock_before() -> detect::Asker {
    use capblock_shared::domain::plan::DescribeBudget;
    let fixed = Duration::from_secs(8);
    detect::Asker::Capblock {
        every: Duration::from_secs(600),
        budget: DescribeBudget {
            ask_for: Duration::from_secs(40),
            fastest: fixed,
            slowest: fixed,
            ..DescribeBudget::default()
        },
        on_sight: false,
        accounts: 1,
        types_per_question: 1,
    }
}

/// One reading of the describe limit with one set of other callers in the account: the askers
/// run against it in the detection world, and the rows they give.
struct Case<'w> {
    world: &'w detect::World,
    limit: detect::Limit,
    scenario: &'static str,
    others: &'w [detect::Caller],
}

impl Case<'_> {
    /// Runs `asker`, saying on stderr how it went.
    fn timed(&self, name: &str, asker: detect::Asker) -> detect::Outcome {
        let t = Instant::now();
        let o = detect::run(self.world, asker, self.limit, self.others);
        eprintln!(
            "bench:   [{}; {}] {name}: {}; others refused {:.1} % ({:.1} s to simulate)",
            self.limit.name,
            self.scenario,
            latency_text(&o),
            100.0 * o.others_refused_share(),
            t.elapsed().as_secs_f64()
        );
        o
    }

    /// The ideal asker's median: the whole limit round robin, each question once every
    /// Q x refill.
    fn bound(&self) -> f64 {
        self.world.questions_per_region() as f64 * self.limit.refill.as_secs_f64() / 2.0
    }

    /// How far above the bound capblock's median may be, and the rows' heading.
    fn target(&self) -> (f64, &'static str) {
        if self.others.is_empty() {
            (1.25, "(b) detection, quiet")
        } else {
            (2.0, "(b) detection, a person in the account")
        }
    }

    /// Capblock's own rows: (b) its detection latency, and with others in the account (d) the
    /// share of their calls refused.
    fn capblock_rows(&self, mine: &detect::Outcome, rows: &mut Vec<Row>) {
        let (bound, (factor, head)) = (self.bound(), self.target());
        let median = mine.median().unwrap_or(f64::INFINITY);
        rows.push(row(
            format!("{head}: capblock defaults [{}]", self.limit.name),
            format!("{}; {:.0} calls per region and day", latency_text(mine), mine.calls_per_region_day()),
            format!("median <= {factor} x bound {bound:.0} s = {:.0} s", factor * bound),
            Some(median / (factor * bound)),
        ));
        if !self.others.is_empty() {
            let share = mine.others_refused_share();
            rows.push(row(
                format!("(d) others' calls refused, capblock defaults [{}]", self.limit.name),
                format!(
                    "{:.1} % ({} of {} calls of the person and the notebook)",
                    100.0 * share,
                    mine.others_refused,
                    mine.others_calls
                ),
                "<= 10 %",
                Some(share / 0.10),
            ));
        }
    }

    /// The other askers' rows, for comparison, and the ideal asker's.
    fn others_rows(&self, askers: [(&str, detect::Asker); 3], rows: &mut Vec<Row>) {
        for (name, asker) in askers {
            let o = self.timed(name, asker);
            rows.push(info(
                format!("  {name}"),
                format!(
                    "{}; others refused {:.1} %; {:.0} calls per region and day",
                    latency_text(&o),
                    100.0 * o.others_refused_share(),
                    o.calls_per_region_day()
                ),
            ));
        }
        rows.push(info(
            "  ideal asker (the whole limit, round robin: the bound)",
            format!(
                "median {:.0} s = {} x {:.2} s / 2",
                self.bound(),
                self.world.questions_per_region(),
                self.limit.refill.as_secs_f64()
            ),
        ));
    }

    /// (e) capblock's detection with `accounts` accounts lending their limits (`asker`).
    fn types_row(&self, one: &detect::Outcome, asker: detect::Asker, rows: &mut Vec<Row>) {
        let o = self.timed("capblock, ten types a question", asker);
        rows.push(info(
            format!("(f) detection, {}: up to 10 types a question [{}]", self.scenario, self.limit.name),
            format!(
                "{}; {:.0} calls per region and day (one type a question: median {}, {:.0} calls)",
                latency_text(&o),
                o.calls_per_region_day(),
                one.median().map_or("not found".to_string(), minutes),
                one.calls_per_region_day()
            ),
        ));
    }

    fn accounts_row(&self, asker: detect::Asker, accounts: usize, rows: &mut Vec<Row>) {
        let (bound, (factor, _)) = (self.bound(), self.target());
        let o = self.timed(&format!("capblock with {accounts} accounts"), asker);
        let n = accounts as f64;
        rows.push(row(
            format!(
                "(e) detection, {}: {accounts} accounts (1 buying + {}) [{}]",
                self.scenario,
                accounts - 1,
                self.limit.name
            ),
            format!("{}; {:.0} calls per region and day", latency_text(&o), o.calls_per_region_day()),
            format!("median <= {factor} x bound / {accounts} = {:.0} s", factor * bound / n),
            Some(o.median().unwrap_or(f64::INFINITY) / (factor * bound / n)),
        ));
    }
}

/// Per function: the cold-start runs and the requests each invocation made.
pub struct FunctionFigures {
    pub name: &'static str,
    pub runs: Vec<cold::Run>,
    pub counts: proxy::Counts,
}

impl FunctionFigures {
    pub fn median_init(&self) -> Duration {
        median(self.runs.iter().map(|r| r.init).collect())
    }
    pub fn median_handler(&self) -> Duration {
        median(self.runs.iter().map(|r| r.handler).collect())
    }
    pub fn peak_rss(&self) -> u64 {
        self.runs.iter().map(|r| r.peak_rss).max().unwrap_or(0)
    }
    pub fn log_bytes(&self) -> f64 {
        self.runs.iter().map(|r| r.log_bytes as f64).sum::<f64>() / self.runs.len().max(1) as f64
    }
    /// per-invocation counts
    pub fn per_run(&self, v: f64) -> f64 {
        v / self.runs.len().max(1) as f64
    }
}

fn diff(after: &proxy::Counts, before: &proxy::Counts) -> proxy::Counts {
    let mut calls = after.calls.clone();
    for (k, n) in &before.calls {
        if let Some(v) = calls.get_mut(k) {
            *v -= n;
        }
    }
    calls.retain(|_, n| *n > 0);
    proxy::Counts {
        calls,
        dynamo_wru: after.dynamo_wru - before.dynamo_wru,
        dynamo_rru: after.dynamo_rru - before.dynamo_rru,
        dynamo_write_bytes: after.dynamo_write_bytes - before.dynamo_write_bytes,
        sns_publishes: after.sns_publishes - before.sns_publishes,
        schedules_created: after.schedules_created - before.schedules_created,
    }
}

/// The local stack's setting `k`, which the bench runs under.
fn need(env0: &BTreeMap<String, String>, k: &str) -> Result<String, String> {
    env0.get(k).cloned().ok_or(format!("{k} is not set: run under infra/local/stack.sh run --"))
}

/// The stack as the cold starts find it: the simulator's describe limit off, the example rule
/// stored.
fn limit_off_and_rule_put(a: &Args, env0: &BTreeMap<String, String>) -> Result<(), String> {
    // Each of the cold starts below asks one question per region of the example rule. One
    // after another they would find the describe limit's bucket spent by the run before and
    // wait out its refill, which a scan every 10 minutes never does: the limit is off here.
    let (status, body) = capblock_http1::blocking::request(
        &need(env0, "AWS_ENDPOINT_URL_EC2")?,
        "POST",
        "/_sim/behaviour",
        br#"{"describe_limit": null}"#,
    )
    .map_err(|e| format!("POST /_sim/behaviour: {e}"))?;
    if status != 200 {
        return Err(format!("POST /_sim/behaviour: {status} {}", String::from_utf8_lossy(&body)));
    }
    // A typical stack: the example rule stored (3 regions, one of them unsupported).
    let rule = a.repo.join("infra/examples/rules/p5-weekly.toml");
    let out = Command::new(a.bin_dir.join("capblock"))
        .args(["rules", "put"])
        .arg(&rule)
        .env_clear()
        .envs(env0)
        .output()
        .map_err(|e| format!("capblock rules put: {e}"))?;
    if !out.status.success() {
        return Err(format!("capblock rules put: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

/// The events the functions are invoked with, at the simulator's time (`sim`): the schedule's
/// tick and an expiration warning.
fn events_now(a: &Args, sim: &str) -> Result<(String, String), String> {
    let (status, body) = capblock_http1::blocking::request(sim, "GET", "/_sim/clock", b"")
        .map_err(|e| format!("GET /_sim/clock: {e}"))?;
    let sim_now = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["now"].as_str().map(str::to_string))
        .filter(|_| status == 200)
        .ok_or_else(|| format!("GET /_sim/clock: {status} {}", String::from_utf8_lossy(&body)))?;
    // A tick at the clock's time: one far from it is a replay, which writes nothing, and the
    // cost rows count the writes a real run makes (memory, claims, price history).
    let tick = format!(r#"{{"source": "capblock.schedule", "time": "{sim_now}"}}"#);
    let warning = std::fs::read_to_string(
        a.repo.join("core/src/domain/capacity_event/fixtures/capacity-block-expiration-warning.json"),
    )
    .map_err(|e| format!("event fixture: {e}"))?;
    // on-capacity-event refuses an input far from its clock: the warning arrives as it would, now.
    let warning = {
        let mut v: serde_json::Value = serde_json::from_str(&warning).map_err(|e| format!("event fixture: {e}"))?;
        v["time"] = sim_now.clone().into();
        v.to_string()
    };
    Ok((tick, warning))
}

fn run_cold(a: &Args, env0: &BTreeMap<String, String>, dir: &Path) -> Result<Vec<FunctionFigures>, String> {
    let (ddb, sns, sched) = (
        need(env0, "AWS_ENDPOINT_URL_DYNAMODB")?,
        need(env0, "AWS_ENDPOINT_URL_SNS")?,
        need(env0, "AWS_ENDPOINT_URL_SCHEDULER")?,
    );
    need(env0, "CAPBLOCK_TABLE")?;
    limit_off_and_rule_put(a, env0)?;
    let proxies = [proxy::start("dynamodb", &ddb), proxy::start("sns", &sns), proxy::start("scheduler", &sched)];
    let [p_ddb, p_sns, p_sched] = proxies.map(|p| p.expect("proxy"));
    let mut env: BTreeMap<String, String> = env0.clone();
    env.insert("AWS_ENDPOINT_URL_DYNAMODB".into(), p_ddb.url.clone());
    env.insert("AWS_ENDPOINT_URL_SNS".into(), p_sns.url.clone());
    env.insert("AWS_ENDPOINT_URL_SCHEDULER".into(), p_sched.url.clone());
    env.insert("RUST_LOG".into(), "info".into());
    env.insert("CAPBLOCK_SCHEDULE_GROUP".into(), "default".into());
    env.insert(
        "CAPBLOCK_REMINDER_TARGET_ARN".into(),
        "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event".into(),
    );
    env.insert("CAPBLOCK_REMINDER_ROLE_ARN".into(), "arn:aws:iam::123456789012:role/capblock-reminder".into());
    // The functions run on the simulator's clock, as in every simulation: its market is
    // anchored to the scenario's start, not to the day the bench runs.
    let sim = need(env0, "AWS_ENDPOINT_URL_EC2")?;
    let clock_url = format!("{}/_sim/clock", sim.trim_end_matches('/'));
    env.insert("CAPBLOCK_SIMULATED_CLOCK_URL".into(), clock_url);
    let env: Vec<(String, String)> = env.into_iter().collect();
    let (tick, warning) = events_now(a, &sim)?;
    let snapshot = || {
        let mut c = p_ddb.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let s = p_sns.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let h = p_sched.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        c.calls.extend(s.calls.clone());
        c.calls.extend(h.calls.clone());
        c.sns_publishes = s.sns_publishes;
        c.schedules_created = h.schedules_created;
        c
    };
    let mut out = Vec::new();
    for (name, event) in
        [("scan-offerings", tick.as_str()), ("track-blocks", tick.as_str()), ("on-capacity-event", warning.as_str())]
    {
        let bin = a.bin_dir.join(name);
        let before = snapshot();
        let mut runs = Vec::new();
        for i in 0..a.runs {
            let arn = format!("arn:aws:lambda:us-east-1:123456789012:function:{name}");
            let r = cold::cold_start(&bin, &env, event, &arn, &dir.join(format!("{name}-{i}.log")))?;
            if r.outcome != "response" {
                eprintln!("bench:   {name} run {i}: {} {}", r.outcome, r.body.chars().take(300).collect::<String>());
            }
            runs.push(r);
        }
        let counts = diff(&snapshot(), &before);
        let f = FunctionFigures { name, runs, counts };
        eprintln!(
            "bench:   {name}: init {} handler {} peak RSS {} requests {:?}",
            ms(f.median_init()),
            ms(f.median_handler()),
            mib(f.peak_rss()),
            f.counts.calls
        );
        out.push(f);
    }
    Ok(out)
}

fn cold_rows(fs: &[FunctionFigures], rows: &mut Vec<Row>) {
    for f in fs {
        let own = median(f.runs.iter().map(cold::Run::first_response_own).collect());
        let first = median(f.runs.iter().map(cold::Run::first_response).collect());
        let ok = f.runs.iter().filter(|r| r.outcome == "response").count();
        rows.push(row(
            format!("{} cold start -> first response, own time", f.name),
            format!("{} (init {} + handler CPU)", ms(own), ms(f.median_init())),
            "< 50 ms",
            Some(own.as_secs_f64() / 0.050),
        ));
        rows.push(info(
            format!("  {} spawn -> first response, wall", f.name),
            format!(
                "{} (handler {} incl. its AWS calls to local moto/sim; {ok}/{} answered ok)",
                ms(first),
                ms(f.median_handler()),
                f.runs.len()
            ),
        ));
        rows.push(row(
            format!("  {} peak RSS (VmHWM)", f.name),
            mib(f.peak_rss()),
            "< 40 MiB",
            Some(f.peak_rss() as f64 / (40.0 * 1048576.0)),
        ));
    }
}

fn package_rows(a: &Args, rows: &mut Vec<Row>) {
    let arch = std::env::var("BENCH_PACKAGE_ARCH").unwrap_or_else(|_| "arm64".into());
    let lambda_dir = a.bin_dir.parent().unwrap_or(Path::new(".")).join("lambda");
    for name in ["scan-offerings", "track-blocks", "on-capacity-event"] {
        let z = lambda_dir.join(name).join("bootstrap.zip");
        match std::fs::metadata(&z) {
            Ok(m) => rows.push(row(
                format!("{name} zip ({arch})"),
                mib(m.len()),
                "< 8 MiB",
                Some(m.len() as f64 / (8.0 * 1048576.0)),
            )),
            Err(_) => {
                rows.push(row(format!("{name} zip ({arch})"), format!("not built ({})", z.display()), "< 8 MiB", None))
            }
        }
    }
}

fn print_table(rows: &[Row]) {
    let w0 = rows.iter().map(|r| r.figure.len()).max().unwrap_or(6).max(6);
    let w2 = rows.iter().map(|r| r.target.len()).max().unwrap_or(6).max(6);
    println!("{:<w0$}  {:<w2$}  {:>7}  {:<4}  value", "figure", "target", "ratio", "");
    for r in rows {
        let (ratio, verdict) = match r.ratio {
            Some(x) if x.is_finite() => (format!("{x:.2}x"), if x <= 1.0 { "ok" } else { "MISS" }),
            _ => ("-".into(), ""),
        };
        println!("{:<w0$}  {:<w2$}  {:>7}  {:<4}  {}", r.figure, r.target, ratio, verdict, r.value);
    }
    println!(
        "ratio = measured / target (for the speed-up and the budget left: target / measured; for a count that \
         must be 0: the count); <= 1.00x meets the target"
    );
}

fn child_main(argv: &[String]) -> Option<Result<String, String>> {
    Some(match (argv.get(1).map(String::as_str), argv.len()) {
        (Some("--cover-child"), 2) => paced::cover_child(),
        (Some("--storm-child"), 3) => paced::storm_child(argv[2].parse().expect("rounds")),
        _ => return None,
    })
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(res) = child_main(&argv) {
        match res {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let a = args();
    let env0: BTreeMap<String, String> = std::env::vars().collect();
    let d = defaults(&a.repo);
    let cache = env0.get("CAPBLOCK_CACHE").cloned().unwrap_or_else(|| format!("{}/.cache/capblock", env0["HOME"]));
    let dir = PathBuf::from(cache).join("bench-logs");
    let _ = std::fs::create_dir_all(&dir);
    let mut rows = Vec::new();
    rows.push(info(
        "release profile",
        "opt-level \"s\", lto = true, codegen-units = 1, strip = true, panic = \"abort\" (root Cargo.toml)",
    ));
    if a.paced {
        eprintln!("bench: (a) coverage and (c) storm against the simulator, describe limit sped up x{}", paced::SCALE);
        if let Err(e) = run_paced(&a, &dir, &mut rows) {
            rows.push(info("(a) coverage / (c) storm", format!("NOT MEASURED: {e}")));
        }
    }
    let mut detected = DetectFigures::default();
    if a.detect {
        detected = run_detect(&a, &d, &mut rows);
    }
    rows.push(info("secondary figures", "-"));
    let mut fns = Vec::new();
    if a.cold {
        match run_cold(&a, &env0, &dir) {
            Ok(f) => {
                cold_rows(&f, &mut rows);
                fns = f;
            }
            Err(e) => rows.push(info("cold start / memory", format!("NOT MEASURED: {e}"))),
        }
    }
    package_rows(&a, &mut rows);
    if !fns.is_empty() {
        let prices = a.repo.join("infra/bench/prices.toml");
        let mut loads: Vec<cost::ScanLoad> = detected
            .schedules
            .iter()
            .map(|(label, every, ask)| cost::ScanLoad { label: label.clone(), every_minutes: *every, ask_secs: *ask })
            .collect();
        if loads.is_empty() {
            loads.push(cost::ScanLoad {
                label: "ask time not simulated".into(),
                every_minutes: d.scan_minutes,
                ask_secs: 0.0,
            });
        }
        for (k, load) in loads.iter().enumerate() {
            match cost::monthly(&prices, &d, &fns, load) {
                Ok(c) => c.rows(&mut rows, k == 0),
                Err(e) => rows.push(info("monthly cost", format!("NOT COMPUTED: {e}"))),
            }
        }
    }
    println!();
    print_table(&rows);
}
