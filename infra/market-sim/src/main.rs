use std::io::Write;
use std::process::ExitCode;

use capblock_market_sim::scenario::Scenario;
use capblock_market_sim::server::{App, serve};
use capblock_market_sim::sts::Sts;
use capblock_market_sim::world::World;

const HELP: &str = "\
capblock-market-sim: a simulated EC2 Capacity Blocks market on the EC2 Query protocol

USAGE:
    capblock-market-sim [--listen ADDR] [--scenario FILE] [--port-file FILE] [--sts-endpoint URL]

OPTIONS:
    --listen ADDR        address to bind (default 127.0.0.1:0, port 0 = pick a free one)
    --scenario FILE      TOML scenario (default: empty market, clock = now)
    --port-file FILE     write the bound port number to FILE
    --sts-endpoint URL   an STS (http://HOST:PORT, e.g. moto's) asked GetCallerIdentity for the
                         account of a temporary key (ASIA...) calling DescribeCapacityBlockOfferings:
                         an assumed role's account spends its own describe limit
                         (default: env CAPBLOCK_SIM_STS_ENDPOINT; neither: never asked)
    -h, --help           this text

Point SDKs at it with AWS_ENDPOINT_URL_EC2=http://127.0.0.1:PORT (any credentials; the
region comes from the SigV4 credential scope).

SCENARIO (TOML, every key optional; see infra/market-sim/README.md):
    seed = 7                                  # PRNG seed for ids and faults
    expired_visible_days = 60                 # expired ids answer NotFound after this
    [clock]      start = \"2026-12-01T00:00:00Z\", ticking = false
    [behaviour]  latency_ms, error_5xx_rate, timeout_rate, timeout_secs,
                 throttle = { rate_per_sec, burst }, payment = succeed|fail|never,
                 payment_delay_minutes = 5 (payment_delay_hours, when given, wins),
                 failed_payment_visible_minutes = 60, down_regions, drop_purchase_response,
                 drop_extension_purchase_response, max_offerings_per_answer = 6,
                 same_day_offerings = true,
                 describe_limit = { burst = 2, refill_secs = 4.0 } (false = off),
                 describe_limit_other_callers_per_min = 0.0,
                 describe_limit_others = [{ name, calls, over_secs = 0, every_secs,
                 offset_secs = 0 }] (other callers, refusable; counts in /_sim/state),
                 counts_before_start = zero|full, offering_ids = stable|per_answer,
                 offering_id_ttl_secs = 300,
                 offering_ids_across_accounts = shared|per_account,
                 ultraserver_search = instance_type_required|ultraserver_only,
                 instance_type_preferences = accepted|unknown,
                 segmented_for_one_type = never|first_segment,
                 extension_offerings_limit = shared|own|none (which limit extension
                 offering questions spend),
                 caller_accounts = { \"AKID\" = \"ACCOUNT\" } (whose describe limit a key spends),
                 hold_actions = [] (tests: held before EC2 receives them; POST /_sim/release),
                 hold_accounts = [] (with hold_actions: only these callers' calls held),
                 listing_lag_secs = 0 (a purchase's reservation listed that late),
                 stale_listing_secs = 0 (once listed, missing again that long: a stale read),
                 listed_twice = false (DescribeCapacityReservations lists each one twice),
                 ram_refusal = failed_association|error, ram_association_delay_secs = 10,
                 ram_listing_lag_secs = 60 (a new RAM share listed that late),
                 unavailable_means = in_use|failed (DescribeCapacityBlockStatus),
                 stopping_minutes = 5 (a stopped instance keeps its place that long),
                 stopping_in_usage = counted|not_counted (GetCapacityReservationUsage)
    [[regions]]  name, supported = true, down = false, zero_quota_families = [],
                 sells = [types] (default: the region's market lines), opted_in_zones = []
    [[market]]   region, instance_type, azs, counts, durations_days, start_days,
                 price = [{ from, usd_per_accelerator_hour }], extension_usd_per_accelerator_hour,
                 payment, currency, zone_type = availability-zone|local-zone

CONTROL API (JSON): GET /_sim/state, /_sim/health, /_sim/behaviour, /_sim/describe/calls,
    /_sim/held; POST /_sim/clock, /_sim/behaviour, /_sim/scenario (TOML body), /_sim/payment,
    /_sim/reservations, /_sim/describe/calls ({} clears it), /_sim/release ({\"deliver\": bool})
";

struct Args {
    listen: String,
    scenario: Option<String>,
    port_file: Option<String>,
    sts_endpoint: Option<String>,
}

fn parse_args() -> Result<Option<Args>, String> {
    let sts_endpoint = std::env::var("CAPBLOCK_SIM_STS_ENDPOINT").ok().filter(|v| !v.is_empty());
    let mut args = Args { listen: "127.0.0.1:0".into(), scenario: None, port_file: None, sts_endpoint };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next()).ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--listen" => args.listen = value()?,
            "--scenario" => args.scenario = Some(value()?),
            "--port-file" => args.port_file = Some(value()?),
            "--sts-endpoint" => args.sts_endpoint = Some(value()?),
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(Some(args))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let scenario = match &args.scenario {
        Some(path) => {
            match std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}")).and_then(|t| Scenario::parse(&t)) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        None => Scenario::parse("").expect("the empty scenario is valid"),
    };
    let sts = match args.sts_endpoint.as_deref().map(Sts::new).transpose() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot bind {}: {e}", args.listen);
            return ExitCode::from(1);
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(pf) = &args.port_file {
        // Write then rename so a poller never reads a half-written file.
        let tmp = format!("{pf}.tmp");
        if let Err(e) = std::fs::write(&tmp, addr.port().to_string()).and_then(|()| std::fs::rename(&tmp, pf)) {
            eprintln!("error: cannot write port file {pf}: {e}");
            return ExitCode::from(1);
        }
    }
    let world = World::new(scenario);
    tracing::info!(now = %world.now(), "simulated clock");
    if let Some(url) = &args.sts_endpoint {
        tracing::info!(%url, "the accounts of temporary keys are asked of this STS");
    }
    println!("listening on http://{addr}");
    let _ = std::io::stdout().flush();
    serve(listener, App::with_sts(world, sts)).await;
    ExitCode::SUCCESS
}
