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
//! They are faithful, not clever: no fault of their own. Faults (lost answers, crashes,
//! throttling) are the business of whoever wraps them: the workflows' unit tests script one
//! answer, the seeded simulation (`capblock-verify`'s `sim`) injects them by the seed. The
//! real adapters are tested on the local stack (`tests/`), so a difference between the two
//! shows there.

mod ec2;
mod handoff;
mod notify;
mod page;
mod table;

pub use ec2::{Holding, Listing, MemoryEc2, PaymentOutcome, TypeQuestions};
pub use handoff::{MemoryAccounts, MemoryHandoff, MemoryShare, ReservationGroup};
pub use notify::{MemoryNotifier, MemoryReminders};
pub use page::MemoryPages;
pub use table::{BudgetRow, MemoryTable};
