//! Contract suites: a port's promises written once, as async cases generic over the
//! implementation, so the in-memory doubles (`crate::memory`) and the AWS adapters are held to
//! the same word. `cargo test -p capblock-core` runs each case on the in-memory double; the
//! integration tests in `tests/` run each on the AWS adapter, over moto (DynamoDB, SNS, S3) or
//! the market simulator (EC2). A case that only
//! one implementation can pass is a difference between the proof's picture of AWS and AWS.
//!
//! - `ec2`: the EC2 market ports (`Ec2Ports`, `Ec2Control`, `ec2::CASES`, `ec2::run`), on the
//!   in-memory EC2 and on the EC2 adapters over the market simulator under each reading.
//! - `fixtures`: the items the cases write, shared with the adapters' own tests.
//! - `notify`: the topics (`Notifier` on SNS), `page`: the team page's bucket (`PagePublisher`
//!   on S3), each run on its in-memory double and on its adapter over moto.
//! - `store`: the store and ledger ports (`StoreUnderTest`, `store::CASES`, `store::run`).

/// Declares trait `$name`, the ports an implementation under contract has, implemented for any
/// type that has them all (the bounds written once).
macro_rules! port_bundle {
    ($(#[$doc:meta])* pub trait $name:ident: $first:ident $(+ $port:ident)*) => {
        $(#[$doc])*
        pub trait $name: $first $(+ $port)* + Send + Sync {}

        impl<T> $name for T where T: $first $(+ $port)* + Send + Sync {}
    };
}

pub mod ec2;
pub mod fixtures;
pub mod notify;
pub mod page;
pub mod store;
