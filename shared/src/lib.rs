//! capblock's core: the domain (pure, clock-free), the ports the functions depend on, and the
//! AWS adapters behind those ports.

pub mod app;
pub mod aws;
pub mod config;
pub mod domain;
pub mod lambda;
pub mod ports;
