//! EC2's describe limit on DescribeCapacityBlockOfferings as the market simulator plays it
//! (infra/market-sim/README.md, "The describe limit's size"): per account and region, a
//! bucket of `burst` tokens, full at the first call, one token refilled every `refill`; each
//! call takes a token as it arrives, and one that finds less than a token is refused
//! (`CapacityBlockDescribeLimitExceeded`). Other callers in the account may spend from the
//! same bucket at a steady rate, as the simulator's `describe_limit_other_callers_per_min`
//! drain does (its discrete `describe_limit_others` are not played here).
//!
//! EC2 does not publish the limit's size; the simulator's README gives three readings, each
//! a constructor here: [`MemoryDescribeLimit::paced_4s`] (the default: a burst of 2, one token
//! per 4 s), [`MemoryDescribeLimit::burst_10`] (10, one per 6.667 s) and
//! [`MemoryDescribeLimit::paced_2s`] (2, one per 2 s).
//!
//! Time is tokio's (`tokio::time::Instant`), so on a paused clock a test's refills are exact
//! and take no real time. The in-memory EC2 has no limit of its own: a hook in front of it
//! (`Hooked`) asks [`MemoryDescribeLimit::admit`] and refuses the call when it says no.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::ids::Region;

/// One region's bucket, and the calls it refused.
struct Bucket {
    tokens: f64,
    at: Instant,
    refused: u32,
}

/// EC2's describe limit, a token bucket per region, as the simulator plays it (see the module).
pub struct MemoryDescribeLimit {
    burst: f64,
    refill: Duration,
    /// Other callers' tokens per second, spent from the same buckets.
    others: f64,
    buckets: Mutex<HashMap<Region, Bucket>>,
}

impl MemoryDescribeLimit {
    /// Buckets of `burst` tokens, one refilled every `refill`, nobody else spending from them.
    pub fn new(burst: f64, refill: Duration) -> MemoryDescribeLimit {
        MemoryDescribeLimit { burst, refill, others: 0.0, buckets: Mutex::default() }
    }

    /// The simulator's default reading, `paced-4s`: a burst of 2, one token every 4 s.
    pub fn paced_4s() -> MemoryDescribeLimit {
        MemoryDescribeLimit::new(2.0, Duration::from_secs(4))
    }

    /// The reading `burst-10`: a burst of 10, 0.15 tokens a second (one every 6.667 s).
    pub fn burst_10() -> MemoryDescribeLimit {
        MemoryDescribeLimit::new(10.0, Duration::from_secs_f64(1.0 / 0.15))
    }

    /// The reading `paced-2s`: a burst of 2, one token every 2 s.
    pub fn paced_2s() -> MemoryDescribeLimit {
        MemoryDescribeLimit::new(2.0, Duration::from_secs(2))
    }

    /// Other callers in the account spend `tokens_per_sec` from every region's bucket (never
    /// taking it below empty).
    pub fn with_others(self, tokens_per_sec: f64) -> MemoryDescribeLimit {
        MemoryDescribeLimit { others: tokens_per_sec, ..self }
    }

    fn buckets(&self) -> MutexGuard<'_, HashMap<Region, Bucket>> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call arriving now in `region`: whether the bucket has a token for it (taken), or it
    /// is refused (counted).
    pub fn admit(&self, region: &Region) -> bool {
        let now = Instant::now();
        let mut all = self.buckets();
        let b = all.entry(region.clone()).or_insert(Bucket { tokens: self.burst, at: now, refused: 0 });
        let elapsed = now.duration_since(b.at).as_secs_f64();
        let refilled = elapsed / self.refill.as_secs_f64() - elapsed * self.others;
        b.tokens = (b.tokens + refilled).clamp(0.0, self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            b.refused += 1;
            false
        }
    }

    /// The calls refused, in every region.
    pub fn refused(&self) -> u32 {
        self.buckets().values().map(|b| b.refused).sum()
    }

    /// The calls refused in `region`.
    pub fn refused_in(&self, region: &Region) -> u32 {
        self.buckets().get(region).map_or(0, |b| b.refused)
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::advance;

    use super::*;

    fn east() -> Region {
        "us-east-1".parse().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_serves_its_burst_then_one_call_a_refill() {
        let limit = MemoryDescribeLimit::paced_4s();
        let west: Region = "us-west-2".parse().unwrap();
        assert!(limit.admit(&east()) && limit.admit(&east()));
        assert!(!limit.admit(&east()), "the burst is spent");
        assert!(limit.admit(&west), "each region has its own bucket");
        advance(Duration::from_secs(3)).await;
        assert!(!limit.admit(&east()), "not yet a token");
        advance(Duration::from_secs(1)).await;
        assert!(limit.admit(&east()), "4 s after the burst");
        assert_eq!((limit.refused(), limit.refused_in(&east()), limit.refused_in(&west)), (2, 2, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn others_spend_from_the_same_bucket() {
        // Refilled at 0.25 a second, 0.1875 of it taken by others: one token every 16 s.
        let limit = MemoryDescribeLimit::paced_4s().with_others(0.1875);
        assert!(limit.admit(&east()) && limit.admit(&east()));
        advance(Duration::from_secs(8)).await;
        assert!(!limit.admit(&east()));
        advance(Duration::from_secs(16)).await;
        assert!(limit.admit(&east()));
        assert_eq!(limit.refused(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_readings_are_the_simulators() {
        let burst = MemoryDescribeLimit::burst_10();
        assert_eq!((0..11).filter(|_| burst.admit(&east())).count(), 10);
        let lenient = MemoryDescribeLimit::paced_2s();
        assert!(lenient.admit(&east()) && lenient.admit(&east()) && !lenient.admit(&east()));
        advance(Duration::from_secs(2)).await;
        assert!(lenient.admit(&east()));
    }
}
