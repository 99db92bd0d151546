//! The in-memory adapters: one per port, beside the AWS ones in `capblock-shared` (as
//! serverless-rust-demo keeps `MemoryStore` beside `DynamoDBStore`).
//!
//! - `table`: the DynamoDB table, with the same conditions and the same all-or-nothing
//!   transactions as `aws/dynamo` (a reservation over a budget is refused here exactly as there),
//!   and a journal of every write for tests that assert what a run wrote.
//! - `ec2`: EC2's Capacity Block calls: offerings on sale, purchases that make tagged
//!   reservations, payment windows that end paid or failed, extensions.
//! - `notify`: SNS topics and the reminder schedules, recording what was published.
//! - `page`: the team page's bucket, recording every page written.
//! - `handoff`: the hand-off's sides (SSM, Auto Scaling, Run Command, Resource Groups, EKS node
//!   groups, RAM shares), as the action runner drives them, and member accounts' sides
//!   (`MemoryAccounts`, each member's its own).
//!
//! `crate::contract` holds the table, EC2, the topics and the bucket to their AWS adapters: the
//! same cases run on both.
//!
//! - `describe_limit`: EC2's describe limit on offerings as the market simulator plays it
//!   (`MemoryDescribeLimit`: a token bucket per region on tokio's clock), for a hook in front of
//!   `ec2` to refuse calls by.
//! - `clock`: the wall clock, set by the test.
//! - `probe`: a function's role, every action allowed but those denied, each try recorded.
//! - `hooked`: the one fault and hook wrapper, `Hooked`, which puts a per-call hook before any
//!   of them (or any other port).
//!
//! They are faithful, not clever: no fault of their own. Faults (lost answers, crashes,
//! throttling) are the business of the hook in front of them (`Hooked`): the workflows' unit
//! tests script one answer (`Script`), the seeded simulation (`capblock-verify`'s `sim`) injects
//! them by the seed, paced_asker's tests refuse calls by EC2's describe limit
//! (`describe_limit`). A behaviour a test needs that EC2 or DynamoDB has is a setting of the
//! adapter here, not a port of the test's own. The real adapters are tested on the local stack
//! (`tests/`), so a difference between the two shows there.

mod clock;
mod describe_limit;
mod ec2;
mod handoff;
mod hooked;
mod notify;
mod page;
mod probe;
mod table;

pub use clock::MemoryClock;
pub use describe_limit::MemoryDescribeLimit;
pub use ec2::{Holding, Listing, MemoryEc2, PaymentOutcome, TypeQuestions, UnavailableCounts};
pub use handoff::{MemoryAccounts, MemoryHandoff, MemoryShare, ReservationGroup};
pub use hooked::{Call, Failure, Gate, Hook, HookVerdict, Hooked, HookedAnswer, Injected, Kind, Script};
pub use notify::{MemoryNotifier, MemoryReminders};
pub use page::MemoryPages;
pub use probe::MemoryProbe;
pub use table::{BudgetRow, MemoryTable};
