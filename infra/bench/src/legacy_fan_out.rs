//! capblock's fan-out before issue 13, kept as the bench's baseline ("today's unpaced
//! fan-out"): it knew only EC2's general token bucket, not the describe limit.
//!
//! Asking the market many questions at once: one lane per region, at most `per_region` calls in
//! flight in each, all regions at the same time.
//!
//! EC2 throttles each API per account and region with a token bucket (a burst, then a steady
//! refill). A scan should finish as soon as the bucket allows, neither stalling behind long
//! backoffs nor hammering a region that has said "slow down". So the lane, not the SDK, owns the
//! retries of this read-only call:
//! - until a region first throttles, its lane sends as fast as `per_region` allows (the burst);
//! - the first throttle starts pacing at 70 % of the successes of the last second, and then
//!   the rate moves like TCP's congestion window: +`INCREASE`/s per second of successes, x0.7 on
//!   a throttle (at most once per round trip, so one burst of refusals counts once). A token the
//!   bucket refills while the lane is below its rate is not lost, only spent later, so the lane
//!   keeps up with the refill rate overall;
//! - a throttled query is retried (it did nothing), up to `MAX_THROTTLED` times;
//! - an unknown answer (5xx, timeout) is retried once after a short pause; a second one means
//!   the region is unwell, and the lane fails the region's remaining queries at once with that
//!   error instead of spending the Lambda's time on them (the scan skips the region);
//! - a refusal or "not sold here" is final (no retry; "not sold here" also closes the lane);
//! - the whole fan-out has `TIME_BUDGET`: a question still waiting for its turn then is given
//!   up as throttled, so a region throttled far below `MIN_RATE` cannot make the scan miss its
//!   Lambda timeout (60 s) and lose the purchases the other regions' answers allow.
//!
//! Lane time is real elapsed time (tokio's clock, so tests run it paused), never business time.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::Semaphore;
use tokio::time::{Instant, sleep, sleep_until};

use capblock_shared::domain::names::Region;
use capblock_shared::domain::offering::Offering;
use capblock_shared::ports::{MarketError, OfferingQuery, OfferingSource, REQUEST_LIMIT};

/// Calls in flight per region unless configured otherwise (`CAPBLOCK_REGION_CONCURRENCY`).
/// DescribeCapacityBlockOfferings has a token bucket of its own (EC2 throttles each API
/// separately), documented at a burst of 100 for describe calls: a scan of up to 64 questions
/// per region goes out as one burst and leaves the other tools' buckets alone.
pub const DEFAULT_REGION_CONCURRENCY: usize = 64;

/// Throttled attempts a query may make before the lane reports it throttled.
pub const MAX_THROTTLED: u32 = 12;
/// Extra attempts after an unknown answer (5xx, timeout).
const UNKNOWN_RETRIES: u32 = 1;
const UNKNOWN_PAUSE: Duration = Duration::from_millis(250);
/// Pacing: the rate never drops below this (calls per second)...
const MIN_RATE: f64 = 0.5;
/// ...is cut to this fraction on a throttle...
const DECREASE: f64 = 0.7;
/// ...and grows by this many calls per second for every second of successes.
const INCREASE: f64 = 4.0;
/// The first pace is taken from the successes seen in this window before the first throttle.
const FIRST_WINDOW: Duration = Duration::from_secs(1);
/// How long a fan-out may take: half the scan function's 60 s timeout, leaving the rest for
/// deciding, buying and publishing.
pub const TIME_BUDGET: Duration = Duration::from_secs(30);
const OPERATION: &str = "DescribeCapacityBlockOfferings";

/// Runs every query and returns each answer in the order of `queries`.
pub async fn fan_out<M: OfferingSource + ?Sized>(
    market: &M,
    queries: &[OfferingQuery],
    per_region: usize,
) -> Vec<Result<Vec<Offering>, MarketError>> {
    fan_out_observed(market, queries, per_region, || {}).await
}

/// `fan_out`, calling `answered` once per query when its final answer is in (progress bars).
pub async fn fan_out_observed<M, F>(
    market: &M,
    queries: &[OfferingQuery],
    per_region: usize,
    answered: F,
) -> Vec<Result<Vec<Offering>, MarketError>>
where
    M: OfferingSource + ?Sized,
    F: Fn() + Sync,
{
    let give_up_at = Instant::now() + TIME_BUDGET;
    let mut lanes: Vec<(&Region, Lane)> = Vec::new();
    for q in queries {
        if !lanes.iter().any(|(r, _)| *r == &q.region) {
            lanes.push((&q.region, Lane::new(per_region, give_up_at)));
        }
    }
    let lane_of = |r: &Region| &lanes.iter().find(|(lr, _)| *lr == r).expect("a lane per region").1;
    let answered = &answered;
    join_all(queries.iter().map(|q| async move {
        let answer = lane_of(&q.region).ask(market, q).await;
        answered();
        answer
    }))
    .await
}

/// One region's lane: a concurrency limit and a pace shared by the region's queries.
struct Lane {
    slots: Semaphore,
    pace: Mutex<Pace>,
    /// The end of the fan-out's time budget.
    give_up_at: Instant,
}

#[derive(Debug)]
struct Pace {
    /// Calls per second; `None` until the region first throttles.
    rate: Option<f64>,
    /// The earliest instant the next paced call may go out.
    next: Instant,
    /// When the rate was last cut: a throttle of a call sent before it is old news.
    cut_at: Option<Instant>,
    /// Successes within `FIRST_WINDOW` (only kept until the first throttle).
    recent: VecDeque<Instant>,
    /// Set when the region is given up for this fan-out: every later query gets this error.
    closed: Option<MarketError>,
}

impl Lane {
    fn new(per_region: usize, give_up_at: Instant) -> Lane {
        Lane {
            give_up_at,
            slots: Semaphore::new(per_region.max(1)),
            pace: Mutex::new(Pace {
                rate: None,
                next: Instant::now(),
                cut_at: None,
                recent: VecDeque::new(),
                closed: None,
            }),
        }
    }

    fn pace(&self) -> std::sync::MutexGuard<'_, Pace> {
        self.pace.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn ask<M: OfferingSource + ?Sized>(
        &self,
        market: &M,
        q: &OfferingQuery,
    ) -> Result<Vec<Offering>, MarketError> {
        let _slot = self.slots.acquire().await.expect("the semaphore is never closed");
        let (mut throttled, mut unknown) = (0u32, 0u32);
        loop {
            let sent = self.turn(&q.region).await?;
            match market.offerings(q).await {
                Ok(list) => {
                    self.pace().succeeded(Instant::now());
                    return Ok(list);
                }
                Err(e @ MarketError::Throttled { .. }) => {
                    self.pace().throttled(sent, Instant::now());
                    throttled += 1;
                    if throttled >= MAX_THROTTLED {
                        tracing::warn!(region = %q.region, attempts = throttled, "query still throttled; giving up");
                        return Err(e);
                    }
                }
                Err(e @ MarketError::Unknown { .. }) => {
                    unknown += 1;
                    if unknown > UNKNOWN_RETRIES {
                        tracing::warn!(region = %q.region, error = %e, "region failed twice; skipping its other queries");
                        self.pace().closed.get_or_insert_with(|| e.clone());
                        return Err(e);
                    }
                    tracing::info!(region = %q.region, error = %e, "unknown answer to a read; retrying once");
                    sleep(UNKNOWN_PAUSE).await;
                }
                Err(e @ MarketError::Unsupported { .. }) => {
                    self.pace().closed.get_or_insert_with(|| e.clone());
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits for this lane's next turn; returns when the call may go out, or the error that
    /// closed the lane, or Throttled once the next turn would come after the time budget.
    async fn turn(&self, region: &Region) -> Result<Instant, MarketError> {
        loop {
            let wait_until = {
                let mut p = self.pace();
                if let Some(e) = &p.closed {
                    return Err(e.clone());
                }
                let now = Instant::now();
                match p.take_turn(now) {
                    Ok(()) if now < self.give_up_at => return Ok(now),
                    Ok(()) => now,
                    Err(at) => at,
                }
            };
            if wait_until >= self.give_up_at {
                tracing::warn!(%region, "fan-out time budget spent; question given up as throttled");
                return Err(MarketError::Throttled {
                    operation: OPERATION,
                    region: region.to_string(),
                    code: REQUEST_LIMIT,
                });
            }
            // Several queries may wake for the same turn: one takes it, the others wait again.
            sleep_until(wait_until).await;
        }
    }
}

impl Pace {
    /// `Ok`: go now (the turn is taken); `Err(t)`: not before `t`.
    fn take_turn(&mut self, now: Instant) -> Result<(), Instant> {
        let Some(rate) = self.rate else { return Ok(()) };
        if self.next > now {
            return Err(self.next);
        }
        let gap = Duration::from_secs_f64(1.0 / rate);
        // A late wake-up may catch up by one gap, not more: an idle lane does not bank turns.
        self.next = self.next.max(now.checked_sub(gap).unwrap_or(now)) + gap;
        Ok(())
    }

    fn succeeded(&mut self, now: Instant) {
        match &mut self.rate {
            Some(rate) => *rate += INCREASE / *rate,
            None => {
                self.recent.push_back(now);
                while self.recent.front().is_some_and(|t| now.duration_since(*t) > FIRST_WINDOW) {
                    self.recent.pop_front();
                }
            }
        }
    }

    fn throttled(&mut self, sent: Instant, now: Instant) {
        if self.cut_at.is_some_and(|cut| sent < cut) {
            return;
        }
        let from = self.rate.unwrap_or_else(|| {
            let seen = self.recent.iter().filter(|t| now.duration_since(**t) <= FIRST_WINDOW).count();
            self.recent = VecDeque::new();
            seen as f64
        });
        self.rate = Some((from * DECREASE).max(MIN_RATE));
        self.cut_at = Some(now);
        self.next = self.next.max(now);
    }
}
