//! capblock's purchase protocol as a model, checked exhaustively with stateright.
//!
//! The examples in the suite show the paths someone thought of; the checker walks every
//! interleaving of the actors and faults below, within bounds, and prints the shortest path to
//! any state that breaks a money property.
//!
//! - `world`: the state: the table (intents, the rule's guard, budgets, blocks, notices), EC2
//!   (reservations, what it lists, payments) and each actor's place in its run.
//! - `protocol`: the actors' steps and the faults (`Protocol`, stateright's `Model`). Each step
//!   is one port call of the real workflow, so a crash can fall between any two. The judgements
//!   are capblock-core's own functions, never copies: the decision (`decision::check`), the
//!   charges (`budget::charges_for`, `budget::admits`), a purchase error's meaning
//!   (`purchase::failed_purchase`), the settlement (`settlement::judge`), the lifecycle
//!   (`Block::transition`) and the fee release (`settlement::part_failed`).
//! - `protocol::properties` (also `properties`): what must hold in every reachable state.
//! - `sabotage`: protocol bugs put back on purpose, each of which the checker must catch.
//!
//! - `sim`: the seeded simulation of every actor: the real workflows over the in-memory
//!   ports, on a virtual clock, with faults injected at every port call (`make soak`).
//!
//! What is outside the model, and why, is in docs/how-it-works.md ("Buying safely").

pub mod protocol;
pub mod sabotage;
pub mod sim;
pub mod world;

pub use protocol::{Bounds, Protocol, properties};
pub use sabotage::Sabotage;
