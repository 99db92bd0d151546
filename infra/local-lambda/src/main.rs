//! `capblock-local-lambda`: a local Lambda Runtime API for one function (the library's
//! [`RuntimeApi`] behind a command line; `make demo` runs one per function).
//!
//! ```text
//! capblock-local-lambda --port 9101 --name scan-offerings -- path/to/scan-offerings
//! curl -s -d '{"source":"capblock.schedule","time":"2026-12-03T00:00:00Z"}' http://127.0.0.1:9101/invoke
//! ```
//!
//! It starts the function binary with `AWS_LAMBDA_RUNTIME_API` pointing here and serves the
//! runtime endpoints the function's `lambda_runtime` loop calls:
//! `GET /2018-06-01/runtime/invocation/next` (held until an invocation arrives; answered with the
//! event and the `Lambda-Runtime-Aws-Request-Id`, `-Deadline-Ms`, `-Invoked-Function-Arn` and
//! `-Trace-Id` headers), `POST .../invocation/<id>/response` and `.../<id>/error`, and
//! `POST .../init/error` (printed on stderr). `POST /invoke` (the body is the event) waits for
//! the function's answer and returns it: 200 with the response, or 500 with the error document,
//! as `Invoke` would. Invocations run one at a time, like one warm Lambda container.
//!
//! The function is named `--name` (ARN `arn:aws:lambda:$AWS_REGION:123456789012:function:NAME`,
//! us-east-1 if `AWS_REGION` is unset), has 256 MB and a `--timeout-secs` timeout (default 60:
//! its deadline, and how long `/invoke` waits). `--port 0` picks a free port. Once listening it
//! prints `listening on http://127.0.0.1:PORT` on stdout (logs go to stderr). On SIGTERM or
//! SIGINT it stops the function and exits 0; if the function exits on its own it exits 1.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use capblock_local_lambda::{Config, Event, Function, RuntimeApi, function_arn};
use tokio::signal::unix::{SignalKind, signal};

fn usage() -> ! {
    eprintln!("usage: capblock-local-lambda --port PORT --name FUNCTION [--timeout-secs N] -- BINARY [ARGS...]");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").unwrap_or_else(|| usage());
    let (opts, cmd) = (&args[..split], &args[split + 1..]);
    let opt = |name: &str| opts.iter().position(|a| a == name).and_then(|i| opts.get(i + 1)).cloned();
    let port: u16 = opt("--port").and_then(|p| p.parse().ok()).unwrap_or_else(|| usage());
    let name = opt("--name").unwrap_or_else(|| usage());
    let timeout = Duration::from_secs(opt("--timeout-secs").and_then(|t| t.parse().ok()).unwrap_or(60));
    let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
    let Some(binary) = cmd.first() else { usage() };

    let config = Config {
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        function_arn: function_arn(&region, &name),
        timeout,
    };
    let api = RuntimeApi::start(config).await.unwrap_or_else(|e| {
        eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
        std::process::exit(1)
    });
    let mut events = api.events();
    let function = Function::new(binary)
        .args(&cmd[1..])
        .name(&name)
        .memory_mb(256)
        .log_group(format!("/aws/lambda/{name}"))
        .log_stream("local");
    let mut child = api.spawn(function).unwrap_or_else(|e| {
        eprintln!("cannot start {binary}: {e}");
        std::process::exit(1)
    });
    println!("listening on {}", api.url());
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("cannot install signal handlers");
        let _ = child.kill().await;
        std::process::exit(1)
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            Some(event) = events.recv() => {
                if let Event::InitError { body, .. } = event {
                    eprintln!("function init error: {body}");
                }
            }
            status = child.wait() => {
                eprintln!("function {name} exited: {status:?}");
                std::process::exit(1);
            }
        }
    }
    // Stopped: take the function down with us (exit() would skip kill_on_drop).
    let _ = child.kill().await;
}
