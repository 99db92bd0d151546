//! The tests run real function binaries (built by `cargo build --workspace --bins`) behind
//! capblock's local Lambda Runtime API, `capblock_local_lambda` (infra/local-lambda, the same one
//! `make demo` and the bench use). This module re-exports it and adds what is particular to the
//! tests: where the binaries are, and how a test starts the API and a function.

use std::path::{Path, PathBuf};

pub use capblock_local_lambda::{
    Answer, Config, Event, Function, InvokeRouter, Kind, Outcome, RuntimeApi, function_arn,
};

/// A runtime API on a free loopback port (function `capblock-local`, 15-minute deadline).
pub async fn start() -> RuntimeApi {
    RuntimeApi::start(Config::default()).await.expect("start the local Lambda Runtime API on loopback")
}

/// Starts `binary` as a Lambda function against `api`: 512 MB, log level from
/// `CAPBLOCK_FUNCTION_LOG` (default `warn`), `env` on top. Output goes to the test's stderr;
/// the process is killed when the returned child is dropped.
pub fn spawn(api: &RuntimeApi, binary: &Path, env: &[(String, String)]) -> tokio::process::Child {
    start_function(api, function(binary, env), binary)
}

/// As `spawn`, with the function's stdout piped to the test (where Lambda's log group would
/// get it: the EMF metric lines).
pub fn spawn_capturing_stdout(api: &RuntimeApi, binary: &Path, env: &[(String, String)]) -> tokio::process::Child {
    start_function(api, function(binary, env).stdout(std::process::Stdio::piped()), binary)
}

fn start_function(api: &RuntimeApi, function: Function, binary: &Path) -> tokio::process::Child {
    api.spawn(function)
        .unwrap_or_else(|e| panic!("start {}: {e} (run `cargo build --workspace --bins`)", binary.display()))
}

fn function(binary: &Path, env: &[(String, String)]) -> Function {
    Function::new(binary)
        .memory_mb(512)
        .log_group("local")
        .log_stream("local")
        .env("RUST_LOG", std::env::var("CAPBLOCK_FUNCTION_LOG").unwrap_or_else(|_| "warn".into()))
        .envs(env.iter().map(|(k, v)| (k, v)))
}

/// A function binary in the cargo target directory (debug profile).
pub fn binary(name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/capblock/target"));
    let path = target.join("debug").join(name);
    assert!(path.exists(), "{} is missing: run `cargo build --workspace --bins` first", path.display());
    path
}
