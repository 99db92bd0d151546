//! Application services: the workflows the functions and the CLI run, written against the
//! ports only, with `now` passed in.

pub mod alarms;
pub mod budgets;
pub mod events;
pub mod extend;
pub mod fan_out;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod handoff;
pub mod health;
pub mod kinds;
pub mod market_move;
pub mod metrics;
pub mod outbox;
pub mod permissions;
pub mod preflight;
pub mod publish;
pub mod purchase;
pub mod reconcile;
pub mod report;
pub mod scan;
pub mod settings;
pub mod team_page;
pub mod track;
pub mod usage;
