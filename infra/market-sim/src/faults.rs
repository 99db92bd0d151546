//! Fault injection for EC2 calls: a per-region token bucket (EC2-like throttling), random
//! 500s and hangs, and regions that are down. Never applied to /_sim/.

/// Token bucket refilled continuously at `rate` tokens/s up to `burst`, and optionally drained
/// at `drain` tokens/s by other callers (never below 0). Time is passed in (seconds, monotonic)
/// so the arithmetic is testable without sleeping.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    drain: f64,
    tokens: f64,
    last: f64,
}

impl TokenBucket {
    pub fn new(rate_per_sec: f64, burst: u32, now: f64) -> Self {
        Self::with_drain(rate_per_sec, burst, 0.0, now)
    }

    /// A full bucket that others also spend from, `drain_per_sec` tokens a second.
    pub fn with_drain(rate_per_sec: f64, burst: u32, drain_per_sec: f64, now: f64) -> Self {
        Self { rate: rate_per_sec, burst: f64::from(burst), drain: drain_per_sec, tokens: f64::from(burst), last: now }
    }

    /// Brings the bucket up to `now`. Refill and drain are both steady, so the level moves in a
    /// straight line and stays at a bound once it reaches it: clamping the end point is exact.
    fn settle(&mut self, now: f64) {
        let elapsed = (now - self.last).max(0.0);
        self.tokens = (self.tokens + elapsed * (self.rate - self.drain)).clamp(0.0, self.burst);
        self.last = self.last.max(now);
    }

    /// Changes the other callers' rate from `now` on (what they spent until now stays spent).
    pub fn set_drain(&mut self, drain_per_sec: f64, now: f64) {
        self.settle(now);
        self.drain = drain_per_sec;
    }

    pub fn try_take(&mut self, now: f64) -> bool {
        self.settle(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What happens to one EC2 call before it reaches the market.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Hang `timeout_secs`, then close the connection without an answer.
    Hang,
    Throttled,
    InternalError,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FaultCounts {
    pub throttled: u64,
    pub error_5xx: u64,
    pub timeouts: u64,
    pub region_down: u64,
    pub dropped_purchase_responses: u64,
    pub dropped_extension_purchase_responses: u64,
    /// DescribeCapacityBlockOfferings refused by the describe limit (an empty bucket), every
    /// account's...
    pub describe_limited: u64,
    /// ...and by account (listed from its first refusal).
    pub describe_limited_by_account: std::collections::BTreeMap<String, u64>,
    /// DescribeCapacityBlockExtensionOfferings refused by its own bucket (under
    /// `extension_offerings_limit = "own"`; under "shared" they count in `describe_limited`).
    pub extension_offerings_limited: u64,
    /// DescribeCapacityBlockOfferings refused for an instance family whose quota is 0, every
    /// account's...
    pub quota_zero: u64,
    /// ...and by account (listed from its first refusal).
    pub quota_zero_by_account: std::collections::BTreeMap<String, u64>,
    /// Calls refused UnauthorizedOperation by an `iam_denials` entry.
    pub unauthorized: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_burst_then_rate() {
        let mut b = TokenBucket::new(2.0, 3, 0.0);
        assert!(b.try_take(0.0));
        assert!(b.try_take(0.0));
        assert!(b.try_take(0.0));
        assert!(!b.try_take(0.0));
        // 0.5 s at 2/s = one token.
        assert!(b.try_take(0.5));
        assert!(!b.try_take(0.5));
        // Long idle refills only up to the burst.
        let granted = (0..10).filter(|_| b.try_take(100.0)).count();
        assert_eq!(granted, 3);
    }

    #[test]
    fn other_callers_drain_the_bucket_pro_rata_never_below_zero() {
        // Refill 1 token / 4 s, burst 2; others spend 30 tokens a minute (0.5/s).
        let mut b = TokenBucket::with_drain(0.25, 2, 0.5, 0.0);
        // After 2 s: 2 + 2 x (0.25 - 0.5) = 1.5 -> one call, 0.5 left.
        assert!(b.try_take(2.0));
        assert!(!b.try_take(2.0));
        // The drain outruns the refill: the bucket stays empty however long the wait...
        assert!(!b.try_take(1000.0));
        // ...and does not go below 0: once the others stop, 4 s of refill give a token.
        b.set_drain(0.0, 1000.0);
        assert!(!b.try_take(1003.9));
        assert!(b.try_take(1004.0));
        // A drain slower than the refill only slows it: 0.25 - 0.125 = 1 token per 8 s.
        let mut b = TokenBucket::with_drain(0.25, 1, 0.125, 0.0);
        assert!(b.try_take(0.0));
        assert!(!b.try_take(7.9));
        assert!(b.try_take(8.0));
    }

    #[test]
    fn clock_going_backwards_does_not_mint_tokens() {
        let mut b = TokenBucket::new(1.0, 1, 10.0);
        assert!(b.try_take(10.0));
        assert!(!b.try_take(5.0));
    }
}
