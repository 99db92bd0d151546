//! capblock's purchase protocol as a model, checked exhaustively with stateright.
//!
//! The examples in the suite show the paths someone thought of; the checker walks every
//! interleaving of the actors and faults below, within bounds, and prints the shortest path to
//! any state that breaks a money property.
//!
//! - `world`: the state: the table (intents, the rule's guard, budgets, blocks, notices), EC2
//!   (reservations, what it lists, payments) and each actor's place in its run.
//! - `protocol`: the actors' steps and the faults (`Protocol`, stateright's `Model`). Each step
//!   is one port call of the real workflow, so a crash can fall between any two. What a step
//!   decides is capblock-core's own production code, never a copy: the decision
//!   (`decision::check`), the buyer's refusal when the rule holds its blocks
//!   (`purchase::held_refusal`), the charges (`budget::charges_for`, `budget::admits`), a
//!   purchase error's meaning (`purchase::failed_purchase`), what the settlement writes
//!   (`reconcile::settle_step`), the lifecycle (`Block::transition`) and whether a failed
//!   payment's fee may go back (`track::part_still_held`).
//!
//!   Why pure functions and not the async workflows themselves: stateright keeps every state
//!   it reaches, hashed, and a workflow's future is neither Clone nor Hash. Replaying a
//!   workflow afresh at each step (its answers so far recorded in the state) over the
//!   in-memory ports would need the table's and EC2's whole contents hashed in every state,
//!   many times the bytes of `world::World`, for bounds that must stay within `make test`'s
//!   minute. So each workflow's "judgement -> write" and "move -> release" decisions are pure
//!   functions its async shell only carries out, and the model calls the same functions; the
//!   shells' port calls are the model's steps. What the model still writes itself is the
//!   table's own transactions (`world::Store`), whose conditions the in-memory table and
//!   DynamoDB hold.
//! - `protocol::properties` (also `properties`): what must hold in every reachable state.
//! - `sabotage`: protocol bugs put back on purpose, each of which the checker must catch; those
//!   of the core's code behind the core's own switches (`capblock_core::sabotage`).
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
