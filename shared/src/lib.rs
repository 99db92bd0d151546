//! capblock's AWS side: the adapters behind the core's ports (`aws/`), the Lambda glue
//! (`lambda`) and the environment readers (`config`). The domain, the ports and the workflows are
//! `capblock-core`, re-exported here so a function crate names one library.

pub use capblock_core::{app, domain, memory, ports};

pub mod aws;
pub mod config;
pub mod lambda;
