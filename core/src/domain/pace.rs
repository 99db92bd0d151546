//! How fast capblock asks one region's market: a pace learned from EC2's answers.
//!
//! DescribeCapacityBlockOfferings has a limit per account and region that nothing published
//! settles (public clients pace themselves to one call every 2-4 s with a burst of about 2; an
//! open pull request in AWS's own capacity finder cites a burst of 10 and 0.15 calls/s), that
//! may differ by account, and that everyone in the account shares. So the pace is not a
//! setting but a learned figure, per region, kept between runs:
//! - calls are spaced by the pace from the first one: capblock never spends the burst, which
//!   is what a person in the console or a notebook needs when they ask;
//! - each answer raises the rate additively (by a share of the assumed refill rate), quickly
//!   while it is well under the rate at which
//!   EC2 last refused (`limit`), slowly past `KNEE` of it: most of the time is spent just under
//!   the limit, and the limit is probed again only gently, since the bucket empties when
//!   capblock asks faster than EC2 refills it, and an empty bucket refuses everyone;
//! - each refusal (`CapacityBlockDescribeLimitExceeded` or `RequestLimitExceeded`) notes the rate
//!   as the limit and cuts it: by `OWN_BACKOFF` when capblock's own pace explains it, by the
//!   sharper `OTHERS_BACKOFF` when it does not (the call came a full refill after the previous
//!   one: someone else spent the bucket, and they should find it refilled next time);
//! - the rate stays within the operator's bounds (`PaceBounds`).
//!
//! The step sizes and backoffs were chosen on a token-bucket model under the three readings of
//! the limit, quiet and with a person and a notebook asking (README "Asking the market" and
//! `make bench` give the figures): a plain AIMD that halves on every refusal stays near 0.78 of
//! a quiet limit; this one near 0.95, and leaves others' calls refused a few percent of the time.
//!
//! Rates are in calls per second (f64): the pace is a rate of asking, not money, and it is
//! stored rounded to whole milliseconds of gap.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Rate added per answer while under `KNEE` of the learned limit, as a share of the refill rate
/// capblock assumes (0.005 calls/s for one call per 4 s).
pub const FAST_STEP: f64 = 0.02;
/// Rate added per answer at or past `KNEE` of the learned limit (the gentle probe), as a share
/// of the assumed refill rate (0.0003 calls/s for one call per 4 s).
pub const SLOW_STEP: f64 = 0.0012;
/// Share of the learned limit up to which the rate climbs quickly.
pub const KNEE: f64 = 0.9;
/// The cut after a refusal capblock's own pace explains.
pub const OWN_BACKOFF: f64 = 0.7;
/// The cut after a refusal it does not (someone else emptied the bucket).
pub const OTHERS_BACKOFF: f64 = 0.5;

/// The operator's bounds on the pace of one region, and where an unknown region starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceBounds {
    /// EC2's refill interval as far as capblock assumes it: a refusal of a call sent at least
    /// this long after the previous one is not its own pace's doing.
    pub refill: Duration,
    /// The gap a region starts at before anything is learned.
    pub start: Duration,
    /// The shortest gap ever (the ceiling on the rate).
    pub fastest: Duration,
    /// The longest gap ever (the floor on the rate).
    pub slowest: Duration,
}

impl PaceBounds {
    /// Checks the numbers an operator may set.
    pub fn validate(&self) -> Result<(), String> {
        if self.refill.is_zero() || self.fastest.is_zero() {
            return Err("the refill interval and the fastest gap must be positive".into());
        }
        if self.fastest > self.slowest {
            return Err(format!(
                "the fastest gap ({} s) must not be longer than the slowest ({} s)",
                self.fastest.as_secs_f64(),
                self.slowest.as_secs_f64()
            ));
        }
        Ok(())
    }

    fn clamp_gap(&self, gap: Duration) -> Duration {
        gap.clamp(self.fastest, self.slowest)
    }
}

/// A region's learned pace, kept in its market memory between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pace {
    /// The gap between two calls, in milliseconds.
    pub gap_ms: u64,
    /// The gap at which EC2 last refused, if it ever did: the limit as last learned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_ms: Option<u64>,
}

fn rate_of(gap_ms: u64) -> f64 {
    1000.0 / gap_ms.max(1) as f64
}

fn gap_of(rate: f64) -> u64 {
    (1000.0 / rate).round() as u64
}

impl Pace {
    /// Where a region starts before anything is learned.
    pub fn start(bounds: &PaceBounds) -> Pace {
        Pace { gap_ms: bounds.clamp_gap(bounds.start).as_millis() as u64, limit_ms: None }
    }

    /// A stored pace within today's bounds (the operator may have changed them).
    pub fn within(self, bounds: &PaceBounds) -> Pace {
        Pace { gap_ms: bounds.clamp_gap(self.gap()).as_millis() as u64, ..self }
    }

    pub fn gap(&self) -> Duration {
        Duration::from_millis(self.gap_ms)
    }

    /// Calls per second.
    pub fn rate(&self) -> f64 {
        rate_of(self.gap_ms)
    }

    /// EC2 answered: ask a little faster.
    pub fn answered(&mut self, bounds: &PaceBounds) {
        let rate = self.rate();
        let share = match self.limit_ms {
            Some(limit) if rate >= KNEE * rate_of(limit) => SLOW_STEP,
            _ => FAST_STEP,
        };
        // Steps scale with the refill assumed: the same climb on a limit sped up for tests.
        self.set_rate(rate + share / bounds.refill.as_secs_f64(), bounds);
    }

    /// EC2 refused a call for its limit. `rested`: the call came at least a refill after the
    /// previous one, so capblock's own pace does not explain the refusal.
    pub fn refused(&mut self, rested: bool, bounds: &PaceBounds) {
        let rate = self.rate();
        self.limit_ms = Some(self.gap_ms);
        self.set_rate(rate * if rested { OTHERS_BACKOFF } else { OWN_BACKOFF }, bounds);
    }

    fn set_rate(&mut self, rate: f64, bounds: &PaceBounds) {
        self.gap_ms = bounds.clamp_gap(Duration::from_millis(gap_of(rate))).as_millis() as u64;
    }

    /// Two runs saved a pace meanwhile: the slower one (the careful reading of the limit),
    /// and the lower limit learned.
    pub fn slower(self, other: Pace) -> Pace {
        let limit_ms = match (self.limit_ms, other.limit_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Pace { gap_ms: self.gap_ms.max(other.gap_ms), limit_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> PaceBounds {
        PaceBounds {
            refill: Duration::from_secs(4),
            start: Duration::from_secs(8),
            fastest: Duration::from_secs(1),
            slowest: Duration::from_secs(30),
        }
    }

    /// A token bucket of `burst`, one token per `refill` s, asked at the pace for `secs`;
    /// returns the answers per refill interval (1.0 = the whole limit).
    fn share_of_limit(burst: f64, refill: f64, secs: f64) -> f64 {
        let b = bounds();
        let mut pace = Pace::start(&b);
        let (mut tokens, mut last, mut t, mut answers) = (burst, 0.0, 0.0, 0u32);
        let mut prev: Option<f64> = None;
        while t < secs {
            tokens = f64::min(burst, tokens + (t - last) / refill);
            last = t;
            if tokens >= 1.0 {
                tokens -= 1.0;
                answers += 1;
                pace.answered(&b);
            } else {
                let rested = prev.is_some_and(|p| t - p >= b.refill.as_secs_f64());
                pace.refused(rested, &b);
            }
            prev = Some(t);
            t += pace.gap().as_secs_f64();
        }
        f64::from(answers) * refill / secs
    }

    #[test]
    fn the_pace_rises_while_ec2_answers_and_stays_within_bounds() {
        let b = bounds();
        let mut p = Pace::start(&b);
        assert_eq!(p.gap(), Duration::from_secs(8));
        p.answered(&b);
        assert!(p.gap() < Duration::from_secs(8), "{p:?}");
        for _ in 0..10_000 {
            p.answered(&b);
        }
        assert_eq!(p.gap(), b.fastest, "never past the ceiling");
    }

    #[test]
    fn a_refusal_cuts_the_rate_and_harder_when_someone_else_spent_the_bucket() {
        let b = bounds();
        let at = Pace { gap_ms: 4000, limit_ms: None };
        let (mut own, mut others) = (at, at);
        own.refused(false, &b);
        others.refused(true, &b);
        assert_eq!(own.gap_ms, 5714, "0.25/s x 0.7");
        assert_eq!(others.gap_ms, 8000, "0.25/s x 0.5");
        assert_eq!(own.limit_ms, Some(4000), "the limit is learned");
        let mut floor = Pace { gap_ms: 29_000, limit_ms: None };
        floor.refused(true, &b);
        assert_eq!(floor.gap(), b.slowest, "never under the floor");
    }

    #[test]
    fn past_the_knee_of_the_learned_limit_the_rate_climbs_gently() {
        let b = bounds();
        let mut near = Pace { gap_ms: 4200, limit_ms: Some(4000) };
        let mut far = Pace { gap_ms: 8000, limit_ms: Some(4000) };
        let (r_near, r_far) = (near.rate(), far.rate());
        near.answered(&b);
        far.answered(&b);
        assert!((near.rate() - r_near - 0.0003).abs() < 0.0005, "{near:?}");
        assert!((far.rate() - r_far - 0.005).abs() < 0.0005, "{far:?}");
    }

    /// The figures the module's doc quotes: a quiet bucket under each reading of the limit is
    /// used near its whole rate, never above it.
    #[test]
    fn a_quiet_limit_is_used_nearly_whole_under_each_reading() {
        for (burst, refill) in [(2.0, 4.0), (10.0, 1.0 / 0.15), (2.0, 2.0)] {
            let share = share_of_limit(burst, refill, 86_400.0);
            // Past 1.0 only by the burst the bucket starts with, spent once while probing.
            let most = 1.0 + burst * refill / 86_400.0;
            assert!((0.85..=most).contains(&share), "burst {burst}, refill {refill}: {share}");
        }
    }

    #[test]
    fn a_stored_pace_is_kept_within_todays_bounds_and_merges_to_the_slower() {
        let b = bounds();
        assert_eq!(Pace { gap_ms: 100, limit_ms: None }.within(&b).gap(), b.fastest);
        let a = Pace { gap_ms: 4000, limit_ms: Some(3000) };
        let c = Pace { gap_ms: 5000, limit_ms: None };
        assert_eq!(a.slower(c), Pace { gap_ms: 5000, limit_ms: Some(3000) });
        assert!(PaceBounds { fastest: Duration::from_secs(60), ..b }.validate().is_err());
        assert!(b.validate().is_ok());
    }
}
