//! The wall clock in memory: where a test sets it.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::ports::Clock;

/// The wall clock as a test sets it: each input arrives on time, at its own time.
pub struct MemoryClock(Mutex<DateTime<Utc>>);

impl MemoryClock {
    pub fn at(now: DateTime<Utc>) -> MemoryClock {
        MemoryClock(Mutex::new(now))
    }

    pub fn set(&self, now: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = now;
    }
}

impl Clock for MemoryClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
