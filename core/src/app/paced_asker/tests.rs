//! The lanes against the in-memory EC2 behind a hook that plays EC2's describe limit (a small
//! bucket per region, refilled slowly, that other callers may spend from: `MemoryDescribeLimit`),
//! on tokio's paused clock: time moves only when every task waits, so these runs are
//! deterministic and take no real time. What they check is behaviour (answers, calls spent,
//! nothing lost); how fast the real thing runs is `make bench`'s business.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use chrono::{TimeZone, Utc};

use super::*;
use crate::memory::{Call, Failure, Hook, HookVerdict, Hooked, MemoryDescribeLimit, MemoryEc2, Script};
use crate::ports::REQUEST_LIMIT;

const OP: &str = "DescribeCapacityBlockOfferings";

/// EC2 as these tests meet it: the in-memory EC2 (no offerings on sale) behind this hook,
/// which plays, per region, the describe limit (a `MemoryDescribeLimit`, optional), `latency`
/// per call, families with a quota of 0, types not sold, regions that never answer, and
/// scripted errors by instance count; and counts the calls.
type Market = Hooked<MemoryEc2, Ec2Hook>;

struct Ec2Hook {
    latency: Duration,
    limit: Option<MemoryDescribeLimit>,
    calls: Mutex<HashMap<String, u32>>,
    sent_at: Mutex<Vec<(String, Instant)>>,
    quota_zero: Vec<&'static str>,
    not_sold: Vec<&'static str>,
    dead: Vec<&'static str>,
    script: Mutex<HashMap<u32, Vec<MarketError>>>,
}

/// A market with `limit`, or none.
fn limited(limit: Option<MemoryDescribeLimit>) -> Market {
    let hook = Ec2Hook {
        latency: Duration::from_millis(40),
        limit,
        calls: Mutex::default(),
        sent_at: Mutex::default(),
        quota_zero: Vec::new(),
        not_sold: Vec::new(),
        dead: Vec::new(),
        script: Mutex::default(),
    };
    Hooked::new(MemoryEc2::default(), hook)
}

/// EC2 as public clients meet it: a burst of 2, one call per 4 s.
fn ec2() -> Market {
    limited(Some(MemoryDescribeLimit::paced_4s()))
}

/// EC2 with a burst of 2, one token per 4 s, of which others take `tokens_per_sec`.
fn ec2_with_others(tokens_per_sec: f64) -> Market {
    limited(Some(MemoryDescribeLimit::paced_4s().with_others(tokens_per_sec)))
}

/// EC2 without a describe limit.
fn unlimited() -> Market {
    limited(None)
}

impl Ec2Hook {
    fn calls(&self, region: &str) -> u32 {
        self.calls.lock().unwrap().get(region).copied().unwrap_or(0)
    }
    fn total_calls(&self) -> u32 {
        self.calls.lock().unwrap().values().sum()
    }
    /// Each call's region and the instant it arrived, in order.
    fn sent_at(&self) -> Vec<(String, Instant)> {
        self.sent_at.lock().unwrap().clone()
    }
    /// The calls the describe limit refused.
    fn limited(&self) -> u32 {
        self.limit.as_ref().map_or(0, MemoryDescribeLimit::refused)
    }

    async fn offerings(&self, q: &OfferingQuery) -> HookVerdict {
        let region = q.region.to_string();
        *self.calls.lock().unwrap().entry(region.clone()).or_default() += 1;
        self.sent_at.lock().unwrap().push((region.clone(), Instant::now()));
        if self.dead.contains(&region.as_str()) {
            sleep(Duration::from_secs(10)).await; // the SDK's attempt timeout
            return HookVerdict::Fail(Failure::Unknown("HTTP 500".into()));
        }
        sleep(self.latency).await;
        let ty = q.instance_type.as_str();
        if self.quota_zero.contains(&family(ty)) {
            return HookVerdict::Fail(Failure::Throttled(DESCRIBE_LIMIT));
        }
        // The bucket is taken when the call arrives, like the simulator and EC2.
        if let Some(limit) = &self.limit
            && !limit.admit(&q.region)
        {
            return HookVerdict::Fail(Failure::Throttled(DESCRIBE_LIMIT));
        }
        if self.not_sold.contains(&ty) {
            return HookVerdict::error(MarketError::NotSold {
                operation: OP,
                region,
                message: format!("The instance type {ty} is not supported for Capacity Blocks."),
            });
        }
        if let Some(errors) = self.script.lock().unwrap().get_mut(&q.instance_count)
            && !errors.is_empty()
        {
            return HookVerdict::error(errors.remove(0));
        }
        HookVerdict::Proceed
    }
}

#[async_trait]
impl Hook for Ec2Hook {
    async fn before(&self, call: &Call<'_>) -> HookVerdict {
        match call.arg::<OfferingQuery>() {
            Some(q) if call.is("offerings") => self.offerings(q).await,
            _ => HookVerdict::Proceed,
        }
    }
}

fn unknown(region: &str) -> MarketError {
    MarketError::Unknown { operation: OP, region: region.into(), message: "HTTP 500".into() }
}

const REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "eu-west-2"];

fn query(region: &str, ty: &str, count: u32) -> OfferingQuery {
    let from = Utc.with_ymd_and_hms(2026, 12, 2, 0, 0, 0).unwrap();
    OfferingQuery {
        region: region.parse().unwrap(),
        instance_type: ty.parse().unwrap(),
        instance_count: count,
        ultraservers: None,
        duration_hours: 24,
        start_from: from,
        start_to: from + chrono::Duration::days(7),
        also_types: Vec::new(),
    }
}

fn grid(per_region: u32) -> Vec<OfferingQuery> {
    REGIONS.iter().flat_map(|r| (1..=per_region).map(move |n| query(r, "p5.48xlarge", n))).collect()
}

/// The production default: 4 s refill, starting at half of it, 50 s of asking.
fn pacing() -> Pacing {
    Pacing::from(&DescribeBudget::default())
}

fn count(answers: &[Answer], f: impl Fn(&Answer) -> bool) -> usize {
    answers.iter().filter(|a| f(a)).count()
}

#[tokio::test(start_paused = true)]
async fn calls_go_out_one_at_a_time_at_the_pace_in_every_region_at_once() {
    let market = ec2();
    let queries = grid(3);
    let t = Instant::now();
    let answers = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await.answers;
    assert!(answers.iter().all(|a| matches!(a, Answer::Offerings(_))), "{answers:?}");
    assert_eq!(market.hook.total_calls(), 12, "one call per question");
    // 0 s, then a little sooner than the starting pace of 8 s after each answer (the pace
    // rises: 0.125 + 0.005 calls/s: 7.692 s, then 7.407 s), in each region, side by side.
    let sent = market.hook.sent_at();
    for r in REGIONS {
        let at: Vec<Duration> = sent.iter().filter(|(x, _)| x == r).map(|(_, at)| at.duration_since(t)).collect();
        assert_eq!(at, vec![Duration::ZERO, Duration::from_millis(7692), Duration::from_millis(7692 + 7407)], "{r}");
    }
    assert_eq!(market.hook.limited(), 0, "the pace never meets the limit");
}

/// The learned pace: on a quiet account it rises to about EC2's refill (one call per 4 s here)
/// and stays near it; when someone else spends 3 of every 4 tokens it falls well below, and the
/// refusals it meets are counted as theirs (contended).
#[tokio::test(start_paused = true)]
async fn the_pace_rises_on_a_quiet_account_and_falls_when_others_spend_the_limit() {
    let long = Pacing { ask_for: Duration::from_secs(1800), ..pacing() };
    let east: Region = "us-east-1".parse().unwrap();
    let queries: Vec<OfferingQuery> = (1..=600).map(|n| query("us-east-1", "p5.48xlarge", n)).collect();
    let quiet = ec2();
    let asked = ask_all(&quiet, &queries, &long, &Carried::default(), || {}).await;
    let pace = asked.paces[&east];
    assert!((3500..=5000).contains(&pace.gap_ms), "near the refill of 4 s: {pace:?}");
    assert!(pace.limit_ms.is_some(), "the limit was met once and learned: {pace:?}");
    let answered = count(&asked.answers, |a| matches!(a, Answer::Offerings(_)));
    // The whole limit over 30 min would answer 450 + the burst; the starting pace 225.
    assert!(answered > 380, "{answered} answered in 30 min");
    let refused = quiet.hook.limited();
    assert!(refused * 50 < answered as u32, "refusals are rare: {refused}");

    let busy = ec2_with_others(0.1875);
    let carried = Carried { paces: asked.paces.clone(), ..Carried::default() };
    let asked = ask_all(&busy, &queries, &long, &carried, || {}).await;
    let pace = asked.paces[&east];
    assert!(pace.gap_ms >= 10_000, "far below the limit now: {pace:?}");
    assert!(asked.calls[&east].contended > 0, "someone else's refusals: {:?}", asked.calls[&east]);
}

#[tokio::test(start_paused = true)]
async fn questions_beyond_the_asking_time_are_carried_over_not_failed() {
    let market = ec2();
    let queries = grid(10);
    let answers = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await.answers;
    // 50 s from one call per 8 s, rising after each answer: 8 questions a region (at 0, 7.7,
    // 15.1, 22.2, 29.1, 35.8, 42.3, 48.5 s; the next would be at 54.5 s); the other 2 wait for
    // the next run.
    assert_eq!(count(&answers, |a| matches!(a, Answer::Offerings(_))), 4 * 8);
    assert_eq!(count(&answers, |a| matches!(a, Answer::CarriedOver)), 4 * 2);
    // The carried-over ones are the last in each region's order.
    for (q, a) in queries.iter().zip(&answers) {
        assert_eq!(matches!(a, Answer::CarriedOver), q.instance_count > 8, "{q:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_describe_limit_storm_loses_no_question_and_fails_no_region() {
    // Someone else in the account spends 3 tokens of every 4 that refill, in every region.
    let market = ec2_with_others(0.1875);
    let mut queries = grid(3);
    // Two families, so refusals of both read as a busy bucket, not a quota of 0.
    queries.extend(REGIONS.iter().map(|r| query(r, "trn2.48xlarge", 1)));
    let long = Pacing { ask_for: Duration::from_secs(600), ..pacing() };
    let asked = ask_all(&market, &queries, &long, &Carried::default(), || {}).await;
    let answers = asked.answers;
    assert!(market.hook.limited() > 0, "the storm refused calls");
    // The calls each lane reports are the market's own count, refusals included.
    for r in REGIONS {
        assert_eq!(asked.calls[&r.parse::<Region>().unwrap()].sent as u32, market.hook.calls(r), "{r}");
    }
    let throttled: usize = asked.calls.values().map(|c| c.throttled).sum();
    assert_eq!(throttled as u32, market.hook.limited());
    assert_eq!(count(&answers, |a| matches!(a, Answer::Failed(_))), 0, "no region reported failed");
    assert_eq!(count(&answers, |a| matches!(a, Answer::QuotaZero)), 0, "no false quota alert");
    // Nothing lost: each question is answered or carried over to a later run.
    assert_eq!(count(&answers, |a| matches!(a, Answer::Offerings(_) | Answer::CarriedOver)), queries.len());
    assert!(count(&answers, |a| matches!(a, Answer::Offerings(_))) >= queries.len() / 2, "{answers:?}");
}

#[tokio::test(start_paused = true)]
async fn a_family_refused_every_time_is_told_from_the_rate_limit() {
    let (market, queries) = trn2_refused();
    let long = Pacing { ask_for: Duration::from_secs(600), ..pacing() };
    let answers = ask_all(&market, &queries, &long, &conclusive("trn2"), || {}).await.answers;
    assert_eq!(answers[0], Answer::QuotaZero);
    assert_eq!(answers[2], Answer::QuotaZero, "the family's other questions are not asked");
    assert!(matches!(answers[1], Answer::Offerings(_)) && matches!(answers[3], Answer::Offerings(_)));
    assert_eq!(market.hook.total_calls(), QUOTA_STRIKES + 2);
}

/// EC2 with the trn2 quota 0 in us-east-1, and two questions of trn2 and two of p5 there, in
/// turn.
fn trn2_refused() -> (Market, Vec<OfferingQuery>) {
    let mut market = ec2();
    market.hook.quota_zero = vec!["trn2"];
    let queries = vec![
        query("us-east-1", "trn2.48xlarge", 1),
        query("us-east-1", "p5.48xlarge", 1),
        query("us-east-1", "trn2.48xlarge", 2),
        query("us-east-1", "p5.48xlarge", 2),
    ];
    (market, queries)
}

/// What earlier runs leave when `family`'s refusals in us-east-1 are spread enough to conclude.
fn conclusive(family: &str) -> Carried {
    Carried { conclusive: [("us-east-1".parse().unwrap(), family.to_string())].into(), ..Default::default() }
}

#[tokio::test(start_paused = true)]
async fn one_run_of_refusals_never_concludes_a_quota_of_0() {
    // A burst by anyone in the account looks the same as a quota of 0 for a run: refused at
    // every rested call, the question is carried over and the refusals are counted, no more.
    let mut market = ec2();
    market.hook.quota_zero = vec!["trn2"];
    let east: Region = "us-east-1".parse().unwrap();
    let key = (east, "trn2".to_string());
    let q = [query("us-east-1", "trn2.48xlarge", 1)];
    let long = Pacing { ask_for: Duration::from_secs(600), ..pacing() };
    let first = ask_all(&market, &q, &long, &Carried::default(), || {}).await;
    assert_eq!(first.answers, vec![Answer::CarriedOver]);
    assert!(first.strikes[&key] >= QUOTA_STRIKES, "{:?}", first.strikes);
    assert!(first.refused.contains(&key));
    // Once the caller says the refusals are spread over runs and time, the count concludes,
    // and starts again.
    let carried = Carried { strikes: first.strikes.clone(), ..conclusive("trn2") };
    let second = ask_all(&market, &q, &pacing(), &carried, || {}).await;
    assert_eq!(second.answers, vec![Answer::QuotaZero]);
    assert_eq!(second.strikes.get(&key), None, "a finding starts the count again");
}

#[tokio::test(start_paused = true)]
async fn a_family_with_a_quota_of_0_noted_gets_one_call_a_run() {
    let mut market = ec2();
    market.hook.quota_zero = vec!["trn2"];
    let key = ("us-east-1".parse::<Region>().unwrap(), "trn2".to_string());
    let probes = Carried { probes: [key.clone()].into(), ..Default::default() };
    let long = Pacing { ask_for: Duration::from_secs(600), ..pacing() };
    let asked = ask_all(&market, &[query("us-east-1", "trn2.48xlarge", 1)], &long, &probes, || {}).await;
    assert_eq!(asked.answers, vec![Answer::CarriedOver]);
    assert_eq!(market.hook.total_calls(), 1, "refused: not asked again in the run");
    assert_eq!(asked.strikes[&key], 1);
    // Answered: the probe clears the count (the scan clears the finding).
    let open = ec2();
    let asked = ask_all(&open, &[query("us-east-1", "trn2.48xlarge", 1)], &long, &probes, || {}).await;
    assert!(matches!(asked.answers[0], Answer::Offerings(_)));
    assert!(asked.strikes.is_empty() && asked.refused.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_is_retried_later_in_the_run_and_slows_the_pace() {
    let market = unlimited();
    let refusal = MarketError::Throttled { operation: OP, region: "us-east-1".into(), code: REQUEST_LIMIT };
    market.hook.script.lock().unwrap().insert(1, vec![refusal.clone(), refusal]);
    let queries = vec![query("us-east-1", "p5.48xlarge", 1), query("us-east-1", "p5.48xlarge", 2)];
    let t = Instant::now();
    let answers = ask_all(
        &market,
        &queries,
        &Pacing { ask_for: Duration::from_secs(600), ..pacing() },
        &Carried::default(),
        || {},
    )
    .await
    .answers;
    assert!(answers.iter().all(|a| matches!(a, Answer::Offerings(_))), "{answers:?}");
    assert_eq!(market.hook.total_calls(), 4);
    // 0 (refused: our pace, 1/8 s, cut to 0.7 of it: 11.429 s), 11.429 (the other question:
    // answered, the pace rises a little: 10.811 s), 22.240 (refused again: 15.444 s), 37.684:
    // answered.
    let sent: Vec<Duration> = market.hook.sent_at().iter().map(|(_, at)| at.duration_since(t)).collect();
    assert_eq!(sent, [0, 11_429, 22_240, 37_684].map(Duration::from_millis));
}

#[tokio::test(start_paused = true)]
async fn refusals_after_resting_are_counted_across_runs() {
    // A bucket nobody ever refills: every call refused, whatever the family.
    let market = limited(Some(MemoryDescribeLimit::new(0.0, Duration::from_secs(3600))));
    let queries = [query("us-east-1", "p5.48xlarge", 1), query("us-east-1", "trn2.48xlarge", 1)];
    let first = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await;
    // 0 (p5), 16 (trn2), 46 s (p5): each refusal after resting halves the pace, down to its
    // floor (30 s); then the asking time is over.
    assert_eq!(first.answers, vec![Answer::CarriedOver, Answer::CarriedOver]);
    assert_eq!(market.hook.total_calls(), 3);
    let east: Region = "us-east-1".parse().unwrap();
    assert_eq!(first.strikes.get(&(east.clone(), "p5".into())), Some(&2));
    assert_eq!(first.calls[&east].contended, 3, "none of them our own pace's doing");
    // The next run goes on counting, from the pace the first ended with (30 s: 0 and 30 s).
    let carried = Carried { paces: first.paces.clone(), ..Carried::from(first.strikes.clone()) };
    let second = ask_all(&market, &queries, &pacing(), &carried, || {}).await;
    assert_eq!(second.answers, vec![Answer::CarriedOver, Answer::CarriedOver]);
    assert_eq!(second.strikes.get(&(east.clone(), "p5".into())), Some(&3));
    assert_eq!(second.strikes.get(&(east.clone(), "trn2".into())), Some(&2));
    // Six in a row make a quota of 0 once the refusals are spread enough (the scan's call),
    // only refused otherwise.
    let five: Strikes = [((east.clone(), "p5".to_string()), 5), ((east.clone(), "trn2".to_string()), 5)].into();
    let spread = Carried {
        conclusive: [(east.clone(), "p5".to_string()), (east.clone(), "trn2".to_string())].into(),
        ..Carried::from(five)
    };
    let second = ask_all(&market, &queries, &pacing(), &spread, || {}).await;
    assert_eq!(second.answers, vec![Answer::QuotaZero, Answer::QuotaZero]);
    // A success clears a family's count.
    let open = unlimited();
    let third = ask_all(&open, &queries[..1], &pacing(), &Carried::from(first.strikes.clone()), || {}).await;
    assert!(matches!(third.answers[0], Answer::Offerings(_)));
    assert_eq!(third.strikes.get(&(east.clone(), "p5".into())), None);
    assert_eq!(third.strikes.get(&(east, "trn2".into())), Some(&1), "kept for a family not asked this run");
}

#[tokio::test(start_paused = true)]
async fn a_question_our_pace_got_refused_is_carried_over_after_max_throttled_calls() {
    let market = unlimited();
    let refusal = MarketError::Throttled { operation: OP, region: "us-east-1".into(), code: REQUEST_LIMIT };
    market.hook.script.lock().unwrap().insert(1, vec![refusal; 10]);
    let long = Pacing { ask_for: Duration::from_secs(3600), ..pacing() };
    let answers = ask_all(&market, &[query("us-east-1", "p5.48xlarge", 1)], &long, &Carried::default(), || {}).await;
    assert_eq!(answers.answers, vec![Answer::CarriedOver]);
    assert_eq!(market.hook.total_calls(), MAX_THROTTLED);
}

#[tokio::test(start_paused = true)]
async fn a_type_not_sold_ends_its_questions_with_one_call() {
    let mut market = unlimited();
    market.hook.not_sold = vec!["p4d.24xlarge"];
    let queries = vec![
        query("us-east-1", "p4d.24xlarge", 1),
        query("us-east-1", "p4d.24xlarge", 2),
        query("us-east-1", "p5.48xlarge", 1),
    ];
    let answers = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await.answers;
    assert!(matches!(&answers[0], Answer::NotSold(m) if m.contains("not supported for Capacity Blocks")));
    assert!(matches!(&answers[1], Answer::NotSold(_)));
    assert!(matches!(&answers[2], Answer::Offerings(_)));
    assert_eq!(market.hook.total_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn answers_come_back_in_query_order_and_a_refusal_is_final() {
    let market = unlimited();
    for n in [2, 5] {
        let rejected = MarketError::Rejected {
            operation: OP,
            region: "any".into(),
            code: format!("Count{n}"),
            message: String::new(),
        };
        market.hook.script.lock().unwrap().insert(n, vec![rejected; 4]);
    }
    let queries = grid(6);
    let answers = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await.answers;
    for (q, a) in queries.iter().zip(&answers) {
        match a {
            Answer::Offerings(_) => assert!(![2, 5].contains(&q.instance_count)),
            Answer::Failed(MarketError::Rejected { code, .. }) => {
                assert_eq!(code, &format!("Count{}", q.instance_count))
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(market.hook.total_calls(), 24);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_answer_is_retried_once() {
    let market = unlimited();
    market.hook.script.lock().unwrap().insert(1, vec![unknown("us-east-1")]);
    let answers =
        ask_all(&market, &[query("us-east-1", "p5.48xlarge", 1)], &pacing(), &Carried::default(), || {}).await.answers;
    assert!(matches!(answers[0], Answer::Offerings(_)), "{:?}", answers[0]);
    assert_eq!(market.hook.total_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_region_that_fails_twice_is_skipped_for_the_rest_of_the_run() {
    let mut market = unlimited();
    market.hook.dead = vec!["us-east-2"];
    let queries = grid(5);
    let answers = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await.answers;
    for (q, a) in queries.iter().zip(&answers) {
        let dead = q.region.as_str() == "us-east-2";
        assert_eq!(matches!(a, Answer::Failed(MarketError::Unknown { .. })), dead, "{q:?}: {a:?}");
    }
    assert_eq!(market.hook.calls("us-east-2"), 2, "two timeouts, not one per question");
    assert_eq!(market.hook.calls("us-east-1"), 5);
}

#[tokio::test(start_paused = true)]
async fn a_region_that_does_not_sell_blocks_closes_its_lane() {
    let market = unlimited();
    let unsupported = MarketError::Unsupported { operation: OP, region: "x".into() };
    market.hook.script.lock().unwrap().insert(1, vec![unsupported]);
    let queries: Vec<_> = grid(4).into_iter().take(4).collect(); // us-east-1 only
    let answers = ask_all(&market, &queries, &pacing(), &Carried::default(), || {}).await.answers;
    assert!(answers.iter().all(|a| *a == Answer::Unsupported), "{answers:?}");
    assert_eq!(market.hook.total_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn progress_is_counted_once_per_question_not_per_call() {
    let market = ec2_with_others(0.2);
    let queries = grid(4);
    let done = AtomicU32::new(0);
    let long = Pacing { ask_for: Duration::from_secs(600), ..pacing() };
    let mut with_trn2 = queries.clone();
    with_trn2.extend(REGIONS.iter().map(|r| query(r, "trn2.48xlarge", 1)));
    ask_all(&market, &with_trn2, &long, &Carried::default(), || {
        done.fetch_add(1, Ordering::SeqCst);
    })
    .await;
    assert!(market.hook.total_calls() > with_trn2.len() as u32, "some calls were refused and asked again");
    assert_eq!(done.load(Ordering::SeqCst), with_trn2.len() as u32);
}

/// A member account's market whose every answer is a refusal (its watch role missing).
fn refusing() -> Hooked<MemoryEc2, Script> {
    let denied = |_: &Call<'_>| {
        HookVerdict::Fail(Failure::Rejected {
            code: "AccessDenied".into(),
            message: "not authorized to perform sts:AssumeRole".into(),
        })
    };
    Hooked::new(MemoryEc2::default(), Script::new().on(OP, denied))
}

/// The questions a market was asked, by instance type, shared with the test.
type Types = std::sync::Arc<Mutex<Vec<String>>>;

/// `inner`, recording in `types` the questions it is asked.
fn recording(inner: Market, types: &Types) -> Hooked<Market, Script> {
    let types = types.clone();
    let record = move |call: &Call<'_>| {
        if let Some(q) = call.arg::<OfferingQuery>() {
            types.lock().unwrap().push(q.instance_type.to_string());
        }
        HookVerdict::Proceed
    };
    Hooked::new(inner, Script::new().on(OP, record))
}

fn member(account: &str, market: impl OfferingSource + 'static) -> MemberMarket {
    MemberMarket { account: account.into(), market: Box::new(market) }
}

/// Each account has its own describe limit: with two members lending theirs, a region gets
/// three lanes at the same pace, about three times the answers in one asking time, and no
/// question is asked twice (every call is one question's answer).
#[tokio::test(start_paused = true)]
async fn member_accounts_each_bring_their_own_limit_and_no_question_is_asked_twice() {
    let east: Region = "us-east-1".parse().unwrap();
    let queries: Vec<OfferingQuery> = (1..=60).map(|n| query("us-east-1", "p5.48xlarge", n)).collect();
    let alone = ec2();
    let one = ask_all(&alone, &queries, &pacing(), &Carried::default(), || {}).await;
    let one_answered = count(&one.answers, |a| matches!(a, Answer::Offerings(_)));

    let home = ec2();
    let (a, b) = (std::sync::Arc::new(Mutex::new(Vec::new())), std::sync::Arc::new(Mutex::new(Vec::new())));
    let helpers = [member("111111111111", recording(ec2(), &a)), member("222222222222", recording(ec2(), &b))];
    let three =
        ask_spread(&home, &super::helpers(&helpers), &queries, &pacing(), &Carried::default(), |_, _, _| {}).await;
    let answered = count(&three.answers, |a| matches!(a, Answer::Offerings(_)));
    assert_eq!(answered, 3 * one_answered, "three lanes at one pace: {answered} vs {one_answered}");
    let (ha, hb) = (a.lock().unwrap().len(), b.lock().unwrap().len());
    assert_eq!(home.hook.total_calls() as usize + ha + hb, answered, "every call answers a question of its own");
    assert_eq!(three.calls[&east].sent, home.hook.total_calls() as usize);
    assert_eq!(three.helper_calls[&(east.clone(), "111111111111".to_string())].sent, ha);
    assert!(three.helper_paces.contains_key(&(east.clone(), "222222222222".to_string())));
    assert!(three.helper_failed.is_empty());
    assert_eq!(count(&three.answers, |a| matches!(a, Answer::CarriedOver)), 60 - answered);

    // The paces carried: each member's lane starts where it ended.
    let carried = Carried { helper_paces: three.helper_paces.clone(), ..Carried::default() };
    let again = ask_spread(&home, &super::helpers(&helpers), &queries, &pacing(), &carried, |_, _, _| {}).await;
    assert!(count(&again.answers, |a| matches!(a, Answer::Offerings(_))) >= answered);
}

/// A member whose role is refused stops after one call and gives its question back: the
/// buying account asks it, nothing fails, and the run names the member.
#[tokio::test(start_paused = true)]
async fn a_refused_member_gives_its_question_back_and_stops() {
    let home = ec2();
    let queries: Vec<OfferingQuery> = (1..=4).map(|n| query("us-east-1", "p5.48xlarge", n)).collect();
    let helpers = [member("111111111111", refusing())];
    let asked =
        ask_spread(&home, &super::helpers(&helpers), &queries, &pacing(), &Carried::default(), |_, _, _| {}).await;
    assert!(asked.answers.iter().all(|a| matches!(a, Answer::Offerings(_))), "{:?}", asked.answers);
    assert_eq!(home.hook.total_calls(), 4, "the buying account asked them all");
    let east: Region = "us-east-1".parse().unwrap();
    assert_eq!(asked.helper_calls[&(east, "111111111111".to_string())].sent, 1);
    assert!(asked.helper_failed["111111111111"].contains("AccessDenied"), "{:?}", asked.helper_failed);
}

/// A family with a quota of 0 noted is the buying account's to probe: a member's answer would
/// say nothing of the buyer's quota, so members never take its question.
#[tokio::test(start_paused = true)]
async fn a_quota_probe_is_asked_by_the_buying_account_only() {
    let mut home = ec2();
    home.hook.quota_zero = vec!["trn2"];
    let types = std::sync::Arc::new(Mutex::new(Vec::new()));
    let helpers = [member("111111111111", recording(ec2(), &types))];
    let queries: Vec<OfferingQuery> = std::iter::once(query("us-east-1", "trn2.48xlarge", 1))
        .chain((1..=5).map(|n| query("us-east-1", "p5.48xlarge", n)))
        .collect();
    let key: (Region, String) = ("us-east-1".parse().unwrap(), "trn2".into());
    let probes = Carried { probes: [key].into(), ..Default::default() };
    let asked = ask_spread(&home, &super::helpers(&helpers), &queries, &pacing(), &probes, |_, _, _| {}).await;
    assert_eq!(asked.answers[0], Answer::CarriedOver, "the probe was refused, once");
    assert!(!types.lock().unwrap().iter().any(|t| t.starts_with("trn2")), "{:?}", types.lock().unwrap());
    assert!(asked.answers[1..].iter().all(|a| matches!(a, Answer::Offerings(_))));
}

/// A question the buying account was refused goes back to the queue, and a member that had
/// nothing to take waits for it rather than end: it asks it, and says it was the one.
#[tokio::test(start_paused = true)]
async fn a_member_waits_for_a_question_that_may_come_back_and_names_itself() {
    let home = ec2();
    home.hook
        .script
        .lock()
        .unwrap()
        .insert(1, vec![MarketError::Throttled { operation: OP, region: "us-east-1".into(), code: REQUEST_LIMIT }]);
    let helpers = [member("111111111111", ec2())];
    let queries = vec![query("us-east-1", "p5.48xlarge", 1)];
    let by: Mutex<Vec<(usize, Option<String>)>> = Mutex::default();
    let asked = ask_spread(&home, &super::helpers(&helpers), &queries, &pacing(), &Carried::default(), |i, _, b| {
        by.lock().unwrap().push((i, b.map(str::to_string)))
    })
    .await;
    assert!(matches!(asked.answers[0], Answer::Offerings(_)), "{:?}", asked.answers);
    assert_eq!(home.hook.total_calls(), 1, "the buying account was refused once");
    assert_eq!(*by.lock().unwrap(), vec![(0, Some("111111111111".to_string()))]);
}

/// What a one-shot search told, per refusal: (instance type, code, in a row, gap in ms).
type Told = Mutex<Vec<(String, &'static str, Option<u32>, u128)>>;

fn tell(told: &Told) -> impl Fn(&Retrying<'_>) + Sync + '_ {
    |r: &Retrying<'_>| {
        assert_eq!(r.give_up_after, Some(ONE_SHOT_REFUSALS));
        told.lock().unwrap().push((r.query.instance_type.to_string(), r.code, r.in_a_row, r.gap.as_millis()));
    }
}

/// A person's search has no later run to spread refusals over: a family refused at every
/// rested call is given up after `ONE_SHOT_REFUSALS` of them, each refusal adding a gap of at
/// most the pace's slowest, where the scan's rule would keep asking for the whole hour; the
/// other family is answered, and each refusal waited out is told with the pace the lane goes
/// on at.
#[tokio::test(start_paused = true)]
async fn a_one_shot_search_gives_a_family_refused_every_time_up_within_a_bounded_wait() {
    let (market, queries) = trn2_refused();
    let hour = Pacing { ask_for: Duration::from_secs(3600), ..pacing() };
    let told = Told::default();
    let t = Instant::now();
    let asked = ask_once(&market, &queries, &hour, || {}, tell(&told)).await;
    let took = t.elapsed();
    assert_eq!(asked.answers[0], Answer::GivenUp);
    assert_eq!(asked.answers[2], Answer::GivenUp, "the family's other questions are not asked");
    assert!(matches!(asked.answers[1], Answer::Offerings(_)) && matches!(asked.answers[3], Answer::Offerings(_)));
    assert_eq!(market.hook.total_calls(), ONE_SHOT_REFUSALS + 2, "three trn2 calls and one per p5 question");
    // trn2 refused at 0 s (the gap doubles: 16 s), p5 answered at 16 s (14.8 s), trn2 refused
    // at 30.8 s (29.6 s), p5 answered at 60.4 s (25.8 s), trn2 refused at 86.3 s: given up, and
    // the search ends on that answer, not a gap later. Each refusal adds one gap of at most
    // the slowest (30 s) to the search; the scan's rule would ask until the hour is over.
    let sent: Vec<Duration> = market.hook.sent_at().iter().map(|(_, at)| at.duration_since(t)).collect();
    assert_eq!(sent, [0, 16_000, 30_815, 60_445, 86_252].map(Duration::from_millis));
    assert_eq!(took, sent[4] + market.hook.latency, "ended on the last answer");
    let slowest = DescribeBudget::default().slowest;
    assert!(sent.windows(2).all(|w| w[1] - w[0] <= slowest), "{sent:?}");
    assert_eq!(
        *told.lock().unwrap(),
        vec![
            ("trn2.48xlarge".to_string(), DESCRIBE_LIMIT, Some(1), 16_000),
            ("trn2.48xlarge".to_string(), DESCRIBE_LIMIT, Some(2), 29_630),
        ],
        "each refusal waited out is told; the last gives the family up instead"
    );
    // The scan's way with the same market: nothing given up, the question asked the hour long.
    let scan = ask_all(&market, &queries[..1], &hour, &Carried::default(), || {}).await;
    assert_eq!(scan.answers, vec![Answer::CarriedOver]);
}

/// Only rested describe-limit refusals in a row count: a busy bucket that answers at the third
/// rested call is answered, and a refusal the lane's own pace explains (here EC2's API rate
/// limit) is told as one but never brings the family nearer to being given up.
#[tokio::test(start_paused = true)]
async fn a_one_shot_search_waits_out_fewer_refusals_and_answers() {
    let market = unlimited();
    let limit = MarketError::Throttled { operation: OP, region: "us-east-1".into(), code: DESCRIBE_LIMIT };
    let rate = MarketError::Throttled { operation: OP, region: "us-east-1".into(), code: REQUEST_LIMIT };
    market.hook.script.lock().unwrap().insert(1, vec![limit.clone(), rate.clone(), rate, limit]);
    let told = Told::default();
    let hour = Pacing { ask_for: Duration::from_secs(3600), ..pacing() };
    let t = Instant::now();
    let asked = ask_once(&market, &[query("us-east-1", "p5.48xlarge", 1)], &hour, || {}, tell(&told)).await;
    assert!(matches!(asked.answers[0], Answer::Offerings(_)), "{:?}", asked.answers);
    assert_eq!(market.hook.total_calls(), 5);
    let last = market.hook.sent_at().last().unwrap().1;
    assert_eq!(t.elapsed(), last.duration_since(t) + market.hook.latency, "a search ends on its last answer");
    let counted: Vec<(&'static str, Option<u32>)> = told.lock().unwrap().iter().map(|t| (t.1, t.2)).collect();
    // The two rate-limit refusals came a refill or more after the call before, yet are not the
    // describe limit's: not counted. The second describe-limit refusal is the family's second.
    assert_eq!(
        counted,
        vec![(DESCRIBE_LIMIT, Some(1)), (REQUEST_LIMIT, None), (REQUEST_LIMIT, None), (DESCRIBE_LIMIT, Some(2))]
    );
}

/// A member whose quota of a family is 0 (the published default) is refused on every call of
/// it: its lane stops asking the family after `MEMBER_STRIKES` calls and gives the questions
/// back, which the buying account answers; it still asks the families it has a quota for; its
/// refusals are not counted as others' (contended) nor against the questions; the run names it.
#[tokio::test(start_paused = true)]
async fn a_member_refused_on_every_call_of_a_family_stops_asking_it_and_is_not_contended() {
    let east: Region = "us-east-1".parse().unwrap();
    let account = "111111111111".to_string();
    // The buying account never refused: whatever is not answered is the member's doing.
    let home = unlimited();
    let mut zero = ec2();
    zero.hook.quota_zero = vec!["trn2"];
    let types = std::sync::Arc::new(Mutex::new(Vec::new()));
    let helpers = [member(&account, recording(zero, &types))];
    // Enough trn2 questions ahead that the member meets the family on each of its first calls
    // (each refusal slows its lane).
    let queries: Vec<OfferingQuery> = (1..=16)
        .map(|n| query("us-east-1", "trn2.48xlarge", n))
        .chain((1..=4).map(|n| query("us-east-1", "p5.48xlarge", n)))
        .collect();
    // Time enough for every question: none is left to the asking time.
    let pacing = Pacing { ask_for: Duration::from_secs(600), ..pacing() };
    let asked =
        ask_spread(&home, &super::helpers(&helpers), &queries, &pacing, &Carried::default(), |_, _, _| {}).await;
    assert!(asked.answers.iter().all(|a| matches!(a, Answer::Offerings(_))), "{:?}", asked.answers);
    let asked_types = types.lock().unwrap().clone();
    let trn2 = asked_types.iter().filter(|t| t.starts_with("trn2")).count();
    assert_eq!(trn2, MEMBER_STRIKES as usize, "bounded: {asked_types:?}");
    assert!(asked_types.iter().any(|t| t.starts_with("p5")), "it still lends its p5 quota: {asked_types:?}");
    let key = (east.clone(), account.clone());
    assert_eq!(asked.helper_calls[&key].contended, 0, "{:?}", asked.helper_calls);
    assert_eq!(asked.calls[&east].contended, 0);
    assert_eq!(asked.helper_refused, [(east.clone(), account.clone(), "trn2".to_string())].into());
    assert_eq!(asked.helper_answered, [(east, account, "p5".to_string())].into());
    assert!(asked.helper_failed.is_empty(), "a refusal is not a failure: {:?}", asked.helper_failed);
}

/// A member noted refused on every call of a family gets one call of it a run: refused, it
/// stops at once (named again); answered, the family is its to ask again and the run says so.
#[tokio::test(start_paused = true)]
async fn a_member_noted_refused_gets_one_call_of_the_family_a_run_until_answered() {
    let east: Region = "us-east-1".parse().unwrap();
    let account = "111111111111".to_string();
    let noted = (east.clone(), account.clone(), "p5".to_string());
    let carried = Carried { helper_probes: [noted.clone()].into(), ..Default::default() };
    let queries: Vec<OfferingQuery> = (1..=6).map(|n| query("us-east-1", "p5.48xlarge", n)).collect();

    let mut zero = ec2();
    zero.hook.quota_zero = vec!["p5"];
    let helpers = [member(&account, zero)];
    let asked = ask_spread(&ec2(), &super::helpers(&helpers), &queries, &pacing(), &carried, |_, _, _| {}).await;
    assert_eq!(asked.helper_calls[&(east.clone(), account.clone())].sent, 1, "one call a run");
    assert_eq!(asked.helper_refused, [noted.clone()].into());
    assert!(asked.answers.iter().all(|a| matches!(a, Answer::Offerings(_))));

    let helpers = [member(&account, ec2())];
    let asked = ask_spread(&ec2(), &super::helpers(&helpers), &queries, &pacing(), &carried, |_, _, _| {}).await;
    assert!(asked.helper_calls[&(east, account)].sent > 1, "answered: it asks the family again");
    assert!(asked.helper_refused.is_empty());
    assert_eq!(asked.helper_answered, [noted].into());
}
