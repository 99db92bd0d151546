//! `capblock`: the operator's command line. It runs the same `shared/` code as the functions,
//! against the same endpoints (the standard AWS configuration, so `AWS_ENDPOINT_URL_*` points it
//! at a local stack).

mod commands;
mod insight;
mod progress;
mod svg;
mod table;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match commands::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(commands::EXIT_FAILURE)
        }
    }
}
