//! `capblock-soak`: runs the seeded simulation of every actor (`capblock_verify::sim`) for new
//! seeds until the time asked for is spent, or one seed exactly (`--seed`). Prints each seed's
//! figures, and for a seed that breaks the money promise the trace and the command that
//! replays it; exits 1 then.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use capblock_verify::sim::{self, Config};

const USAGE: &str = "usage: capblock-soak [--seed N] [--from N] [--days N] [--minutes N]

  --seed N     run this one seed (to replay a failure)
  --from N     the first seed of a soak (default: from the clock, printed)
  --days N     simulated days per seed (default 365)
  --minutes N  how long the soak runs (default 5); seeds run one after another";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut seed, mut from, mut days, mut minutes) = (None, None, 365u32, 5u64);
    while let Some(flag) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<u64>().ok());
        let ok = match flag.as_str() {
            "--seed" => value().map(|v| seed = Some(v)),
            "--from" => value().map(|v| from = Some(v)),
            "--days" => value().and_then(|v| u32::try_from(v).ok()).map(|v| days = v),
            "--minutes" => value().map(|v| minutes = v),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => None,
        };
        if ok.is_none() {
            eprintln!("capblock-soak: {flag}: expected a number\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let seeds: Box<dyn Iterator<Item = u64>> = match seed {
        Some(s) => Box::new(std::iter::once(s)),
        None => {
            let first = from.unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs())
            });
            println!("soaking from seed {first} for {minutes} minute(s), {days} simulated day(s) per seed");
            Box::new(first..)
        }
    };
    let deadline = Instant::now() + Duration::from_secs(minutes * 60);
    let (mut ran, mut simulated_days, started) = (0u64, 0u64, Instant::now());
    for seed in seeds {
        let t = Instant::now();
        match sim::run(Config::busy(seed, days)) {
            Ok(s) => {
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "seed {seed}: {days} days in {secs:.1} s; {} purchases ({} of UltraServers, {} with parts paid and failed), {} extensions, {} runs, {} crashes, {} lost answers, {} checks",
                    s.purchases,
                    s.ultraserver_purchases,
                    s.split_payments,
                    s.extensions,
                    s.runs.values().sum::<u64>(),
                    s.faults.crashes,
                    s.faults.lost_after + s.faults.lost_before,
                    s.checks
                );
                print_requests(&s);
                if std::env::var_os("CAPBLOCK_SOAK_PROFILE").is_some() {
                    println!("  time: {:?}\n  EC2 calls: {:?}", s.busy, s.ec2_calls);
                }
            }
            Err(failure) => {
                eprintln!("{failure}");
                return ExitCode::from(1);
            }
        }
        ran += 1;
        simulated_days += u64::from(days);
        if seed_only(seed, &deadline) {
            break;
        }
    }
    let minutes_used = started.elapsed().as_secs_f64() / 60.0;
    println!(
        "{ran} seed(s), {:.2} simulated years in {:.2} minutes: {:.2} years per minute",
        simulated_days as f64 / 365.0,
        minutes_used,
        simulated_days as f64 / 365.0 / minutes_used.max(1e-9)
    );
    ExitCode::SUCCESS
}

/// What became of the seed's people's requests.
fn print_requests(s: &sim::Summary) {
    let requests = |what: &str| s.requests.get(what).copied().unwrap_or(0);
    println!(
        "  requests: {} filed, {} bought, {} expired, {} cancelled, {} rejected, {} forged items refused",
        requests("filed"),
        requests("bought"),
        requests("expired"),
        requests("cancelled"),
        requests("rejected"),
        requests("forged items")
    );
}

/// Whether the soak is over: its time is spent.
fn seed_only(_seed: u64, deadline: &Instant) -> bool {
    Instant::now() >= *deadline
}
