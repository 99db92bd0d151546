//! Application services: the workflows the functions and the CLI run, written against the
//! ports only, with `now` passed in.

pub mod after_track;
pub mod alarms;
pub mod approvals;
pub mod block_kinds;
pub mod budgets;
pub mod extend;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod handoff;
pub mod health;
pub mod market_move;
pub mod metrics;
pub mod on_capacity_event;
pub mod outbox;
pub mod paced_asker;
pub mod permissions;
pub mod preflight;
pub mod publish;
pub mod purchase;
pub mod reconcile;
pub mod report;
pub mod requests;
pub mod scan;
pub mod team_page;
pub mod track;
pub mod usage;
