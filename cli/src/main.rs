//! `capblock`: the operator's command line. It runs the same `shared/` code as the functions,
//! against the same endpoints (the standard AWS configuration, so `AWS_ENDPOINT_URL_*` points it
//! at a local stack).
//!
//! Modules: `cmd/` (one file per command) over `context` (store, SDK config, exit codes) and the
//! output helpers `table`, `svg` and `progress`; nothing below `cmd/` imports it back.

mod cmd;
mod context;
mod progress;
mod svg;
mod table;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.report();
            ExitCode::from(e.exit_code())
        }
    }
}
