//! The narrow traits the application code depends on. The AWS adapters (`crate::aws`)
//! implement them for real; `crate::memory` in memory, for the tests (with `Hooked` before one
//! where a test wants a call to fail, hang or answer otherwise), and every adapter is also
//! tested on the local stack (`tests/`).
//!
//! One file per concern, as `aws/` is laid out: `market` (EC2), `store` (DynamoDB), `notify`
//! (SNS topics, the outbox, reminder schedules), `handoff` (events and workload actions),
//! `page` (the team page's object and its hourly claim), `probe` (a role's permissions, tried
//! without effect). Every trait is re-exported here, so callers write `crate::ports::Ledger`
//! whatever file holds it.

use chrono::{DateTime, Utc};

mod handoff;
mod market;
mod notify;
mod page;
mod probe;
mod store;

pub use handoff::*;
pub use market::*;
pub use notify::*;
pub use page::*;
pub use probe::*;
pub use store::*;

/// The wall clock, for `main`s only: domain code takes `now` as an argument.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock read once: an invocation's `now`, from whichever source the function runs on (the
/// wall clock, or a simulation's), held for the whole invocation.
pub struct ReadClock(pub DateTime<Utc>);

impl Clock for ReadClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}
