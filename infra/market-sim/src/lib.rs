//! capblock-market-sim: an independent model of the EC2 Capacity Blocks market that speaks the
//! real EC2 Query protocol, so unmodified AWS SDKs can be pointed at it. It deliberately shares
//! no code with the rest of capblock: a misreading of the API cannot hide on both sides.

pub mod accounts;
pub mod action_names;
pub mod actions;
pub mod clock;
pub mod control;
pub mod describe_limit;
pub mod faults;
pub mod instance_types;
pub mod launch_templates;
pub mod market;
pub mod organization;
pub mod pagination;
pub mod ram;
pub mod reservations;
pub mod resource_shares;
pub mod rng;
pub mod scenario;
pub mod sellable;
pub mod server;
pub mod sts;
pub mod wire;
pub mod world;
