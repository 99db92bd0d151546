//! The domain: pure types and decisions. No AWS SDK client and no I/O below this module (the
//! one AWS crate here is `aws_lambda_events`, serde types for the EventBridge envelope), and no
//! function here reads the clock: `now` is always an argument.

pub mod actions;
pub mod alarm;
pub mod announce;
pub mod approval;
pub mod backtest;
pub mod block;
pub mod budget;
pub mod bus_event;
pub mod capacity_event;
pub mod catalog;
pub mod checkpoint;
pub mod decision;
pub mod duration;
pub mod extension;
pub mod handoff;
pub mod health;
pub mod ids;
pub mod launch;
pub mod ledger_check;
pub mod lifecycle;
pub mod list_price;
pub mod market_memory;
pub mod market_move;
pub mod market_note;
pub mod message_kind;
pub mod metrics;
pub mod milestone;
pub mod money;
pub mod offering;
pub mod outbox_key;
pub mod pace;
pub mod permissions;
pub mod plan;
pub mod preflight;
pub mod report;
pub mod rule;
pub mod run_time;
pub mod settlement;
pub mod share;
pub mod slack;
pub mod stack;
pub mod tags;
pub mod ultraserver;
pub mod usage;
