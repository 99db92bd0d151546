//! The lane against a fake market with EC2's kind of token bucket, on tokio's paused clock:
//! time moves only when every task waits, so these runs are deterministic and take no real time.
//! What they check is behaviour (answers, calls spent, the pace not collapsing); how fast the
//! real thing runs is `make bench`'s business.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use chrono::{TimeZone, Utc};

use super::*;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Per region: a token bucket (`burst`, refilled at `rate`/s), `latency` per call, and scripted
/// failures by instance count.
struct FakeMarket {
    latency: Duration,
    bucket: Option<(f64, f64)>,
    buckets: Mutex<HashMap<String, Bucket>>,
    calls: Mutex<HashMap<String, u32>>,
    throttled: AtomicU32,
    /// instance_count -> errors to answer first, in order
    script: Mutex<HashMap<u32, Vec<MarketError>>>,
    /// regions that never answer (each call times out after 10 s: unknown)
    dead: Vec<String>,
}

impl FakeMarket {
    fn new(latency_ms: u64, bucket: Option<(f64, f64)>) -> FakeMarket {
        FakeMarket {
            latency: Duration::from_millis(latency_ms),
            bucket,
            buckets: Mutex::default(),
            calls: Mutex::default(),
            throttled: AtomicU32::new(0),
            script: Mutex::default(),
            dead: Vec::new(),
        }
    }
    fn calls(&self, region: &str) -> u32 {
        self.calls.lock().unwrap().get(region).copied().unwrap_or(0)
    }
    fn total_calls(&self) -> u32 {
        self.calls.lock().unwrap().values().sum()
    }
}

fn unknown(region: &str) -> MarketError {
    MarketError::Unknown {
        operation: "DescribeCapacityBlockOfferings",
        region: region.into(),
        message: "HTTP 500".into(),
    }
}

#[async_trait]
impl OfferingSource for FakeMarket {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        let region = q.region.to_string();
        *self.calls.lock().unwrap().entry(region.clone()).or_default() += 1;
        // The bucket is taken when the call arrives, like the simulator and EC2.
        let admitted = match self.bucket {
            None => true,
            Some((rate, burst)) => {
                let now = Instant::now();
                let mut all = self.buckets.lock().unwrap();
                let b = all.entry(region.clone()).or_insert(Bucket { tokens: burst, at: now });
                b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst);
                b.at = now;
                if b.tokens >= 1.0 {
                    b.tokens -= 1.0;
                    true
                } else {
                    false
                }
            }
        };
        if self.dead.contains(&region) {
            sleep(Duration::from_secs(10)).await; // the SDK's attempt timeout
            return Err(unknown(&region));
        }
        sleep(self.latency).await;
        if !admitted {
            self.throttled.fetch_add(1, Ordering::SeqCst);
            return Err(MarketError::Throttled { operation: "DescribeCapacityBlockOfferings", region });
        }
        if let Some(errors) = self.script.lock().unwrap().get_mut(&q.instance_count)
            && !errors.is_empty()
        {
            return Err(errors.remove(0));
        }
        Ok(Vec::new())
    }
}

const REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "eu-west-2"];

fn grid(per_region: u32) -> Vec<OfferingQuery> {
    let from = Utc.with_ymd_and_hms(2026, 12, 2, 0, 0, 0).unwrap();
    let mut out = Vec::new();
    for r in REGIONS {
        for n in 1..=per_region {
            out.push(OfferingQuery {
                region: r.parse().unwrap(),
                instance_type: "p5.48xlarge".parse().unwrap(),
                instance_count: n,
                duration_hours: 24,
                start_from: from,
                start_to: from + chrono::Duration::days(7),
            });
        }
    }
    out
}

/// Virtual seconds the bucket needs at the least for `n` calls per region, plus one call.
fn bound(n: f64, (rate, burst): (f64, f64), latency: Duration) -> f64 {
    ((n - burst) / rate).max(0.0) + latency.as_secs_f64()
}

async fn run_under_bucket(per_region_queries: u32, bucket: (f64, f64), concurrency: usize) -> (f64, u32, u32) {
    let market = FakeMarket::new(40, Some(bucket));
    let queries = grid(per_region_queries);
    let t = Instant::now();
    let answers = fan_out(&market, &queries, concurrency).await;
    let took = t.elapsed().as_secs_f64();
    let failed: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert!(failed.is_empty(), "every query answered: {failed:?}");
    let b = bound(f64::from(per_region_queries), bucket, market.latency);
    // Not a speed target (that is make bench's): a guard against a pace that collapses or a
    // retry that waits out a long backoff, which take many times the bucket's own time.
    assert!(took <= 1.5 * b, "{took:.2} virtual s against a bucket bound of {b:.2} s");
    let throttled = market.throttled.load(Ordering::SeqCst);
    // Refusals: the first wave's overflow (the lane cannot know the burst before it is spent),
    // then at most a quarter of the queries while paced: not a storm of retries.
    let overflow = (concurrency as u32).saturating_sub(bucket.1 as u32).min(per_region_queries) * 4;
    assert!(throttled <= overflow + queries.len() as u32 / 4, "{throttled} refusals for {} queries", queries.len());
    (took, throttled, market.total_calls())
}

#[tokio::test(start_paused = true)]
async fn a_tight_bucket_paces_the_lane_and_every_query_is_answered() {
    // 64 queries per region through 20 tokens and 10/s: 44 must wait for the refill.
    let (took, throttled, calls) = run_under_bucket(64, (10.0, 20.0), DEFAULT_REGION_CONCURRENCY).await;
    eprintln!("tight bucket, 64 at a time: {took:.2} s, {throttled} throttled of {calls} calls");
    let (took, throttled, calls) = run_under_bucket(64, (10.0, 20.0), 4).await;
    eprintln!("tight bucket, 4 at a time: {took:.2} s, {throttled} throttled of {calls} calls");
}

#[tokio::test(start_paused = true)]
async fn ec2s_describe_bucket_is_one_burst_then_the_refill_rate() {
    let (took, throttled, calls) = run_under_bucket(256, (20.0, 100.0), DEFAULT_REGION_CONCURRENCY).await;
    eprintln!("EC2 bucket, 1024 queries: {took:.2} s, {throttled} throttled of {calls} calls");
}

#[tokio::test(start_paused = true)]
async fn within_the_burst_nothing_waits_and_nothing_is_retried() {
    let market = FakeMarket::new(40, Some((20.0, 100.0)));
    let queries = grid(64);
    let t = Instant::now();
    let answers = fan_out(&market, &queries, DEFAULT_REGION_CONCURRENCY).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(market.total_calls(), 256, "one call per query");
    // All 64 of a region go out together: the whole fan-out is one round trip.
    assert_eq!(t.elapsed(), Duration::from_millis(40));
}

#[tokio::test(start_paused = true)]
async fn concurrency_per_region_is_a_hard_limit() {
    let market = FakeMarket::new(40, None);
    let queries = grid(12);
    let t = Instant::now();
    fan_out(&market, &queries, 4).await;
    // 12 per region, 4 at a time: three round trips, regions in parallel.
    assert_eq!(t.elapsed(), Duration::from_millis(120));
}

#[tokio::test(start_paused = true)]
async fn answers_come_back_in_query_order() {
    let market = FakeMarket::new(5, None);
    let queries = grid(6);
    for n in [2, 5] {
        let rejected = MarketError::Rejected {
            operation: "DescribeCapacityBlockOfferings",
            region: "any".into(),
            code: format!("Count{n}"),
            message: String::new(),
        };
        market.script.lock().unwrap().insert(n, vec![rejected; 4]);
    }
    let answers = fan_out(&market, &queries, 3).await;
    for (q, a) in queries.iter().zip(&answers) {
        match a {
            Ok(_) => assert!(![2, 5].contains(&q.instance_count)),
            Err(MarketError::Rejected { code, .. }) => assert_eq!(code, &format!("Count{}", q.instance_count)),
            Err(e) => panic!("{e}"),
        }
    }
    // A refusal is final: one call per query.
    assert_eq!(market.total_calls(), 24);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_answer_is_retried_once() {
    let market = FakeMarket::new(5, None);
    market.script.lock().unwrap().insert(1, vec![unknown("us-east-1")]);
    let queries: Vec<_> = grid(1).into_iter().take(1).collect();
    let answers = fan_out(&market, &queries, 4).await;
    assert!(answers[0].is_ok(), "{:?}", answers[0]);
    assert_eq!(market.total_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_region_that_fails_twice_is_skipped_for_the_rest_of_the_fan_out() {
    let mut market = FakeMarket::new(40, None);
    market.dead.push("us-east-2".into());
    let queries = grid(20);
    let t = Instant::now();
    let answers = fan_out(&market, &queries, 4).await;
    for (q, a) in queries.iter().zip(&answers) {
        assert_eq!(a.is_err(), q.region.as_str() == "us-east-2", "{q:?}: {a:?}");
    }
    // The first 4 queries there each tried twice; the other 16 were never sent.
    assert_eq!(market.calls("us-east-2"), 8);
    assert_eq!(market.calls("us-east-1"), 20);
    // Two timeouts and the pause, not 5 rounds of them.
    assert!(t.elapsed() < Duration::from_secs(21), "{:?}", t.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_region_that_does_not_sell_blocks_closes_its_lane() {
    let market = FakeMarket::new(5, None);
    let unsupported = MarketError::Unsupported { operation: "DescribeCapacityBlockOfferings", region: "x".into() };
    market.script.lock().unwrap().insert(1, vec![unsupported; 4]);
    let queries: Vec<_> = grid(8).into_iter().take(8).collect(); // us-east-1 only
    let answers = fan_out(&market, &queries, 1).await;
    assert!(answers.iter().all(|a| matches!(a, Err(MarketError::Unsupported { .. }))), "{answers:?}");
    assert_eq!(market.total_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_query_throttled_every_time_gives_up_after_max_throttled_calls() {
    let market = FakeMarket::new(40, Some((0.0, 0.0)));
    let queries: Vec<_> = grid(1).into_iter().take(1).collect();
    let answers = fan_out(&market, &queries, 4).await;
    assert!(matches!(answers[0], Err(MarketError::Throttled { .. })), "{answers:?}");
    // Paced at the floor (0.5/s): 12 attempts fit in the time budget.
    assert_eq!(market.total_calls(), MAX_THROTTLED);
}

#[tokio::test(start_paused = true)]
async fn a_region_throttled_below_the_floor_is_given_up_when_the_time_budget_is_spent() {
    // One token every 20 s: far below the pace's floor of 0.5/s.
    let market = FakeMarket::new(40, Some((0.05, 4.0)));
    let queries: Vec<_> = grid(40).into_iter().take(40).collect(); // one region
    let t = Instant::now();
    let answers = fan_out(&market, &queries, 8).await;
    let took = t.elapsed();
    // The burst's 4 and the refill's 1 (at 20 s) answered; the rest given up as throttled.
    let ok = answers.iter().filter(|a| a.is_ok()).count();
    assert_eq!(ok, 5, "{answers:?}");
    assert!(answers.iter().all(|a| matches!(a, Ok(_) | Err(MarketError::Throttled { .. }))));
    // Given up within the budget (as soon as the next turn would fall after it), not after
    // 35 questions x 12 paced attempts (~14 virtual minutes).
    assert!(took > Duration::from_secs(20) && took <= TIME_BUDGET, "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn progress_is_counted_once_per_query_not_per_call() {
    let market = FakeMarket::new(40, Some((10.0, 5.0)));
    let queries = grid(16);
    let done = AtomicU32::new(0);
    fan_out_observed(&market, &queries, 4, || {
        done.fetch_add(1, Ordering::SeqCst);
    })
    .await;
    assert!(market.total_calls() > 64, "some calls were throttled and retried");
    assert_eq!(done.load(Ordering::SeqCst), 64);
}

#[test]
fn the_first_throttle_paces_from_the_last_seconds_successes_and_cuts_once_per_round_trip() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut p = Pace { rate: None, next: t0, cut_at: None, recent: VecDeque::new(), closed: None };
    for i in 0..20 {
        p.succeeded(ms(10 * i));
    }
    assert_eq!(p.take_turn(ms(200)), Ok(()), "unpaced: go at once");
    p.throttled(ms(200), ms(240));
    assert_eq!(p.rate, Some(14.0));
    // Three more refusals of calls sent before the cut: one cut only.
    for _ in 0..3 {
        p.throttled(ms(230), ms(245));
    }
    assert_eq!(p.rate, Some(14.0));
    // A call sent after the cut and refused cuts again.
    p.throttled(ms(250), ms(290));
    assert!((p.rate.unwrap() - 9.8).abs() < 1e-9);
    // Paced: turns are 1/rate apart.
    assert_eq!(p.take_turn(ms(300)), Ok(()));
    assert!(p.take_turn(ms(301)).is_err());
    // Never below the floor.
    for i in 0..100 {
        p.throttled(ms(400 + 50 * i), ms(401 + 50 * i));
    }
    assert_eq!(p.rate, Some(MIN_RATE));
}
