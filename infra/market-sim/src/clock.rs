//! The simulated clock. Frozen by default (moved only by the control API) so that a test
//! sees exactly the states it asks for; optionally it also flows with real time.

use std::time::Instant;

use chrono::{DateTime, Duration, DurationRound, Utc};

#[derive(Debug, Clone)]
pub struct SimClock {
    base: DateTime<Utc>,
    real_base: Instant,
    ticking: bool,
}

impl SimClock {
    pub fn new(start: Option<DateTime<Utc>>, ticking: bool) -> Self {
        let base = start.unwrap_or_else(|| {
            let now = Utc::now();
            now.duration_trunc(Duration::minutes(1)).unwrap_or(now)
        });
        Self { base, real_base: Instant::now(), ticking }
    }

    pub fn now(&self) -> DateTime<Utc> {
        if self.ticking {
            let elapsed = Duration::from_std(self.real_base.elapsed()).unwrap_or_default();
            self.base + elapsed
        } else {
            self.base
        }
    }

    pub fn advance(&mut self, secs: i64) {
        self.set(self.now() + Duration::seconds(secs));
    }

    pub fn set(&mut self, t: DateTime<Utc>) {
        self.base = t;
        self.real_base = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn frozen_clock_moves_only_when_told() {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        let mut c = SimClock::new(Some(t0), false);
        assert_eq!(c.now(), t0);
        c.advance(3600);
        assert_eq!(c.now(), t0 + Duration::hours(1));
        c.set(t0);
        assert_eq!(c.now(), t0);
    }

    #[test]
    fn default_start_is_whole_minute() {
        let c = SimClock::new(None, false);
        assert_eq!(c.now().timestamp() % 60, 0);
    }
}
