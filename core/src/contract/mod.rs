//! Contract suites: a port's promises written once, as async cases generic over the
//! implementation, so the in-memory doubles (`crate::memory`) and the AWS adapters are held to
//! the same word. `cargo test -p capblock-core` runs each case on the in-memory table; the
//! integration tests in `tests/` run each on the DynamoDB adapter over moto. A case that only
//! one implementation can pass is a difference between the proof's picture of AWS and AWS.
//!
//! - `ec2`: the EC2 market ports (`Ec2Ports`, `Ec2Control`, `ec2::CASES`, `ec2::run`), on the
//!   in-memory EC2 and on the EC2 adapters over the market simulator under each reading.
//! - `fixtures`: the items the cases write, shared with the adapters' own tests.
//! - `store`: the store and ledger ports (`StoreUnderTest`, `store::CASES`, `store::run`).

pub mod ec2;
pub mod fixtures;
pub mod store;
