//! The EC2 Query wire protocol: form-encoded requests in, XML out.

pub mod error;
pub mod query;
pub mod region;
pub mod xml;
