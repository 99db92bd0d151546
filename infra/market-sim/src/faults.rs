//! Fault injection for EC2 calls: a per-region token bucket (EC2-like throttling), random
//! 500s and hangs, and regions that are down. Never applied to /_sim/.

/// Token bucket refilled continuously at `rate` tokens/s up to `burst`. Time is passed in
/// (seconds, monotonic) so the arithmetic is testable without sleeping.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: f64,
}

impl TokenBucket {
    pub fn new(rate_per_sec: f64, burst: u32, now: f64) -> Self {
        Self { rate: rate_per_sec, burst: f64::from(burst), tokens: f64::from(burst), last: now }
    }

    pub fn try_take(&mut self, now: f64) -> bool {
        let elapsed = (now - self.last).max(0.0);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
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
    fn clock_going_backwards_does_not_mint_tokens() {
        let mut b = TokenBucket::new(1.0, 1, 10.0);
        assert!(b.try_take(10.0));
        assert!(!b.try_take(5.0));
    }
}
