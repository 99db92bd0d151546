//! `capblock`: the operator's command line. It runs the same `shared/` code as the functions,
//! against the same endpoints (the standard AWS configuration, so `AWS_ENDPOINT_URL_*` points it
//! at a local stack).
//!
//! Modules: `cmd/` (one file per command) over `context` (store, SDK config, exit codes),
//! `stack` (which deployed stack, its table, the config file and its profiles), `invoke` (the
//! functions, for preflight) and the output helpers `output` (`-o`), `table` and `progress`; nothing below `cmd/` imports it back.

mod cmd;
mod context;
mod invoke;
mod money_plan;
mod output;
mod progress;
mod stack;
mod table;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, so a write to a closed pipe (`capblock blocks | head`) is an error that
    // `println!` turns into a panic. A command line tool should end quietly there, as other Unix
    // tools do: the default action ends the process on the signal. Sockets are unaffected: the
    // standard library sends with MSG_NOSIGNAL, so the SDK's connections still see an error.
    sigpipe::reset();
    run()
}

#[tokio::main]
async fn run() -> ExitCode {
    let cli = cmd::parse();
    match cmd::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.report();
            ExitCode::from(e.exit_code())
        }
    }
}
