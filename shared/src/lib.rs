//! capblock's core: the domain (pure, clock-free), the ports the functions depend on, and the
//! AWS adapters behind those ports.

pub mod domain;
pub mod aws;
pub mod ports;
