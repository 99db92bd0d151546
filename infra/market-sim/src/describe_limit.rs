//! DescribeCapacityBlockOfferings' describe limit in one region: the token bucket capblock spends
//! from, shared with the other callers of the account. The steady drain
//! (`describe_limit_other_callers_per_min`) is the bucket's own; the discrete callers
//! (`describe_limit_others`) are played here, lazily: whenever the bucket is touched, every call
//! of theirs due by then is played first, each at its own time and in time order, so the result
//! is the same as if each had been made when it was due.
//!
//! The limit is per account and region: that bucket is the simulated account's. Every other
//! account (a member account whose role a caller assumed) has a plain bucket of its own per
//! region, in the world, with neither the drain nor the callers.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::faults::TokenBucket;
use crate::scenario::{DescribeLimit, OtherCaller};

/// Calls that reached a describe-limit bucket, and how many of them found it empty (refused):
/// the other callers' (by caller and region), and every account's own (by account).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CallCounts {
    pub calls: u64,
    pub refused: u64,
}

impl CallCounts {
    pub fn record(&mut self, served: bool) {
        self.calls += 1;
        self.refused += u64::from(!served);
    }

    pub fn add(&mut self, other: CallCounts) {
        self.calls += other.calls;
        self.refused += other.refused;
    }
}

/// One DescribeCapacityBlockOfferings call that reached the describe limit, as
/// `GET /_sim/describe/calls` lists it: who asked where, what (as given, before any validation),
/// and whether the limit served it (`false`: refused CapacityBlockDescribeLimitExceeded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DescribeCall {
    pub account: String,
    pub region: String,
    pub instance_type: Option<String>,
    /// `InstanceTypePreferences.N`, in order (left out when the call named none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instance_types: Vec<String>,
    pub ultraserver_type: Option<String>,
    /// `InstanceCount`, else `UltraserverCount`; `None` when absent or not a whole number.
    pub count: Option<u64>,
    /// `CapacityDurationHours`; `None` when absent or not a whole number.
    pub duration_hours: Option<i64>,
    /// `StartDateRange` and `EndDateRange` as given.
    pub start_range: Option<String>,
    pub end_range: Option<String>,
    pub served: bool,
}

/// When call `k` (from 0) of `caller` is due, in seconds after its schedule started: period
/// k / calls, and within it the calls evenly spaced over `over_secs`, the first at the period's
/// start (10 calls over 120 s: one every 12 s, the last 108 s in). Computed from `k` alone, so
/// no error builds up however long the schedule runs.
pub fn call_time(caller: &OtherCaller, k: u64) -> f64 {
    let calls = u64::from(caller.calls.max(1));
    let (period, within) = (k / calls, k % calls);
    caller.offset_secs + period as f64 * caller.every_secs + within as f64 * caller.over_secs / calls as f64
}

/// One caller's place in its pattern: the index of its next call.
#[derive(Debug, Clone)]
struct Schedule {
    caller: OtherCaller,
    next: u64,
}

#[derive(Debug, Clone)]
pub struct DescribeBucket {
    bucket: TokenBucket,
    /// When the callers' schedules started (real seconds): the scenario's load, the last change
    /// of the callers, or the limit coming back on.
    started: f64,
    schedules: Vec<Schedule>,
    /// Counts by caller name; a caller removed keeps what it did.
    by_caller: BTreeMap<String, CallCounts>,
}

impl DescribeBucket {
    /// A full bucket at `now`, the callers' schedules starting then.
    pub fn new(limit: DescribeLimit, drain_per_sec: f64, callers: &[OtherCaller], now: f64) -> Self {
        let mut b = Self {
            bucket: full(limit, drain_per_sec, now),
            started: now,
            schedules: Vec::new(),
            by_caller: BTreeMap::new(),
        };
        b.start_schedules(callers, now);
        b
    }

    /// Plays every other caller's call due by `now`: each takes a token at its own time or is
    /// refused; a tie goes to the caller listed first.
    pub fn settle(&mut self, now: f64) {
        while let Some((i, at)) = self.next_due(now) {
            let served = self.bucket.try_take(at);
            let s = &mut self.schedules[i];
            s.next += 1;
            self.by_caller.entry(s.caller.name.clone()).or_default().record(served);
        }
    }

    /// The earliest call due by `now`, as (schedule, time); `min_by` keeps the first of equals.
    fn next_due(&self, now: f64) -> Option<(usize, f64)> {
        self.schedules
            .iter()
            .enumerate()
            .map(|(i, s)| (i, self.started + call_time(&s.caller, s.next)))
            .filter(|&(_, at)| at <= now)
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// capblock's call at `now`, after every other caller's call due by then.
    pub fn try_take(&mut self, now: f64) -> bool {
        self.settle(now);
        self.bucket.try_take(now)
    }

    /// The steady drain changes pace from `now` on.
    pub fn set_drain(&mut self, drain_per_sec: f64, now: f64) {
        self.settle(now);
        self.bucket.set_drain(drain_per_sec, now);
    }

    /// A new pattern from `now` on: the schedules start again then; what the old callers did
    /// until now stays done and counted.
    pub fn set_callers(&mut self, callers: &[OtherCaller], now: f64) {
        self.settle(now);
        self.start_schedules(callers, now);
    }

    /// A new limit: the bucket is full from `now` on (the old one played until then). The
    /// callers keep their schedules.
    pub fn set_limit(&mut self, limit: DescribeLimit, drain_per_sec: f64, now: f64) {
        self.settle(now);
        self.bucket = full(limit, drain_per_sec, now);
    }

    /// The limit was off and is on again: full from `now`, the callers from the start of their
    /// schedules. Nothing is played for the time it was off (no bucket, nothing to refuse).
    pub fn restart(&mut self, limit: DescribeLimit, drain_per_sec: f64, callers: &[OtherCaller], now: f64) {
        self.bucket = full(limit, drain_per_sec, now);
        self.start_schedules(callers, now);
    }

    fn start_schedules(&mut self, callers: &[OtherCaller], now: f64) {
        self.started = now;
        self.schedules = callers.iter().map(|c| Schedule { caller: c.clone(), next: 0 }).collect();
        // Listed from the start, so that a caller shows in the counts before its first call.
        for c in callers {
            self.by_caller.entry(c.name.clone()).or_default();
        }
    }

    /// All the other callers' calls in this bucket.
    pub fn counts(&self) -> CallCounts {
        let mut total = CallCounts::default();
        self.by_caller.values().for_each(|c| total.add(*c));
        total
    }

    pub fn by_caller(&self) -> &BTreeMap<String, CallCounts> {
        &self.by_caller
    }
}

fn full(limit: DescribeLimit, drain_per_sec: f64, now: f64) -> TokenBucket {
    TokenBucket::with_drain(1.0 / limit.refill_secs, limit.burst, drain_per_sec, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str, calls: u32, over_secs: f64, every_secs: f64) -> OtherCaller {
        OtherCaller { name: name.into(), calls, over_secs, every_secs, offset_secs: 0.0 }
    }

    fn limit(burst: u32, refill_secs: f64) -> DescribeLimit {
        DescribeLimit { burst, refill_secs }
    }

    fn counts(calls: u64, refused: u64) -> CallCounts {
        CallCounts { calls, refused }
    }

    #[test]
    fn the_pattern_spreads_calls_evenly_from_each_periods_start() {
        let times = |c: &OtherCaller, n: u64| (0..n).map(|k| call_time(c, k)).collect::<Vec<_>>();
        // 10 calls over 120 s every 30 minutes: one every 12 s, then again at 1800 s.
        let console = caller("console", 10, 120.0, 1800.0);
        let first: Vec<f64> = (0..10).map(|k| f64::from(k) * 12.0).collect();
        assert_eq!(times(&console, 10), first);
        assert_eq!(times(&console, 12)[10..], [1800.0, 1812.0]);
        assert_eq!(call_time(&console, 29), 3600.0 + 108.0, "the third period's last call");
        // One call every 20 s; with over_secs absent (0) a period's calls come all at once.
        assert_eq!(times(&caller("notebook", 1, 0.0, 20.0), 3), [0.0, 20.0, 40.0]);
        assert_eq!(times(&caller("script", 3, 0.0, 60.0), 4), [0.0, 0.0, 0.0, 60.0]);
        // An offset moves every call.
        let late = OtherCaller { offset_secs: 5.0, ..caller("notebook", 1, 0.0, 20.0) };
        assert_eq!(times(&late, 2), [5.0, 25.0]);
    }

    #[test]
    fn calls_finding_the_bucket_empty_are_refused_and_counted() {
        // Burst 2, an hour per token; a script makes 5 calls at once every 100 s.
        let mut b = DescribeBucket::new(limit(2, 3600.0), 0.0, &[caller("script", 5, 0.0, 100.0)], 0.0);
        b.settle(0.0);
        assert_eq!(b.counts(), counts(5, 3), "2 served, 3 refused");
        assert!(!b.try_take(0.0), "nothing left for capblock");
        assert!(!b.try_take(99.0));
        assert_eq!(b.counts(), counts(5, 3), "no call due before 100 s");
        assert!(!b.try_take(100.0));
        assert_eq!(b.counts(), counts(10, 8), "the second period, all refused, before capblock's call");
        assert_eq!(b.by_caller()["script"], counts(10, 8));
    }

    #[test]
    fn a_persons_burst_against_a_quiet_bucket_is_all_served() {
        // The default reading (burst 2, a token every 4 s): a person clicking through the
        // console, 10 searches over 2 minutes (one every 12 s), never meets the limit...
        let console = caller("console", 10, 120.0, 1800.0);
        let mut b = DescribeBucket::new(DescribeLimit::default(), 0.0, &[console], 0.0);
        b.settle(108.0);
        assert_eq!(b.counts(), counts(10, 0));
        // ...and 4 s after their last one (at 108 s) capblock has its burst of 2 back.
        assert!(b.try_take(112.0) && b.try_take(112.0));
        b.settle(1799.0);
        assert_eq!(b.counts(), counts(10, 0), "nothing more until the next period");
        // Under the burst-10 reading, 10 searches at once are served too.
        let at_once = caller("console", 10, 0.0, 1800.0);
        let mut b = DescribeBucket::new(limit(10, 6.667), 0.0, &[at_once], 0.0);
        assert!(!b.try_take(0.0), "capblock comes after them and finds none left");
        assert_eq!(b.counts(), counts(10, 0));
    }

    #[test]
    fn callers_and_capblock_take_turns_in_time_order() {
        // Burst 1, a token every 8 s. A notebook calls at 0, 20, 40...; a console at 5 and 6.
        let notebook = caller("notebook", 1, 0.0, 20.0);
        let console = OtherCaller { offset_secs: 5.0, ..caller("console", 2, 2.0, 1000.0) };
        let mut b = DescribeBucket::new(limit(1, 8.0), 0.0, &[notebook, console], 0.0);
        // notebook@0 served (0 left), console@5 refused (0.625), console@6 refused (0.75);
        // capblock@8 served (1.0); notebook@20 served (1.0, full).
        assert!(b.try_take(8.0));
        assert_eq!(b.by_caller()["notebook"], counts(1, 0));
        assert_eq!(b.by_caller()["console"], counts(2, 2));
        b.settle(20.0);
        assert_eq!(b.by_caller()["notebook"], counts(2, 0));
        assert!(!b.try_take(20.0), "the notebook's call at 20 s came first");
        // A tie goes to the caller listed first.
        let mut b =
            DescribeBucket::new(limit(1, 3600.0), 0.0, &[caller("a", 1, 0.0, 60.0), caller("b", 1, 0.0, 60.0)], 0.0);
        b.settle(0.0);
        assert_eq!((b.by_caller()["a"], b.by_caller()["b"]), (counts(1, 0), counts(1, 1)));
    }

    #[test]
    fn playing_lazily_is_exact_however_often_the_bucket_is_touched() {
        let callers = [caller("console", 10, 120.0, 300.0), caller("notebook", 1, 0.0, 7.0)];
        let mut once = DescribeBucket::new(limit(2, 8.0), 0.0, &callers, 0.0);
        let mut often = once.clone();
        once.settle(3000.0);
        // Touched every 3/8 s (binary-exact times, so that the arithmetic is too).
        for t in 0..=8000 {
            often.settle(f64::from(t) * 0.375);
        }
        assert_eq!(once.by_caller(), often.by_caller());
        // By 3000 s: 10 whole console periods and the first call of the 11th; 0, 7, ..., 2996.
        assert_eq!(once.counts().calls, 101 + 429);
        assert!(once.counts().refused > 0, "0.125 tokens/s cannot serve them all");
    }

    #[test]
    fn changes_restart_schedules_or_refill_the_bucket() {
        let mut b = DescribeBucket::new(limit(1, 3600.0), 0.0, &[caller("notebook", 1, 0.0, 20.0)], 0.0);
        b.settle(50.0);
        assert_eq!(b.counts(), counts(3, 2), "0 served; 20, 40 refused");
        // New callers at 55: what the old ones did stays; the new ones start at 55.
        b.set_callers(&[caller("console", 2, 0.0, 100.0)], 55.0);
        b.settle(154.0);
        assert_eq!(b.by_caller()["notebook"], counts(3, 2));
        assert_eq!(b.by_caller()["console"], counts(2, 2), "two at 55 only");
        // A new limit is full at once; the console keeps its schedule (next at 155).
        b.set_limit(limit(3, 3600.0), 0.0, 154.0);
        b.settle(155.0);
        assert_eq!(b.by_caller()["console"], counts(4, 2));
        assert!(b.try_take(155.0) && !b.try_take(155.0));
        // On again after being off: full, the schedules from now.
        b.restart(limit(1, 3600.0), 0.0, &[caller("console", 2, 0.0, 100.0)], 1000.0);
        b.settle(1000.0);
        assert_eq!(b.by_caller()["console"], counts(6, 3));
    }

    #[test]
    fn the_steady_drain_and_the_callers_share_the_bucket() {
        // Refill 0.25/s, drain 0.25/s: the level stays put; only calls spend it.
        let mut b = DescribeBucket::new(limit(2, 4.0), 0.25, &[caller("console", 1, 0.0, 10.0)], 0.0);
        assert!(b.try_take(5.0), "console@0 took one, capblock the other");
        assert!(!b.try_take(9.0), "nothing refilled");
        // Without the drain 0.25 a second come back: too few for console@10, 1 by 13 s.
        b.set_drain(0.0, 9.0);
        assert!(b.try_take(13.0));
        assert_eq!(b.counts(), counts(2, 1));
    }
}
