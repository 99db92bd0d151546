//! capblock's core: everything that decides, with no AWS SDK in reach.
//!
//! - `domain/`: pure rules (the decision, money, budgets, lifecycle, announcements); no I/O, no
//!   clock: every function takes `now`.
//! - `ports/`: the narrow traits the workflows need from the world (market, store, notify,
//!   probe, hand-off), each with the errors a caller can act on.
//! - `app/`: the workflows (scan, purchase, track, reconcile, events, ...) over those ports.
//! - `sabotage`: known bugs behind switches the model checker turns on (feature `sabotage`,
//!   off in every build that ships).
//! - `memory/`: an in-memory adapter for each port (the table, EC2, the topics), with the
//!   real ones' conditions: the workflows' unit tests, the bench and the seeded simulation run
//!   on them.
//!
//! The adapters behind the ports (DynamoDB, EC2, SNS, ...) and the Lambda glue are in
//! `capblock-shared`, which depends on this crate and never the other way round.

pub mod app;
pub mod contract;
pub mod domain;
pub mod memory;
pub mod ports;
pub mod sabotage;
