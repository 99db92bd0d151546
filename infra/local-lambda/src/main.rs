//! `capblock-local-lambda`: a local Lambda for one function (the library's [`RuntimeApi`] behind
//! a command line; `make demo` runs one per function), or a router that puts several of them
//! behind one Lambda endpoint (the library's [`InvokeRouter`]).
//!
//! ```text
//! capblock-local-lambda --port 9101 --name scan-offerings -- path/to/scan-offerings
//! curl -s -d '{"source":"capblock.schedule","time":"2026-12-03T00:00:00Z"}' http://127.0.0.1:9101/invoke
//! capblock-local-lambda --port 9100 --route scan-offerings=http://127.0.0.1:9101 \
//!     --route track-blocks=http://127.0.0.1:9102
//! AWS_ENDPOINT_URL_LAMBDA=http://127.0.0.1:9100 aws lambda invoke --function-name track-blocks out.json
//! ```
//!
//! With `-- BINARY [ARGS...]` it starts the function binary with `AWS_LAMBDA_RUNTIME_API`
//! pointing here and serves the runtime endpoints the function's `lambda_runtime` loop calls:
//! `GET /2018-06-01/runtime/invocation/next` (held until an invocation arrives; answered with the
//! event and the `Lambda-Runtime-Aws-Request-Id`, `-Deadline-Ms`, `-Invoked-Function-Arn` and
//! `-Trace-Id` headers), `POST .../invocation/<id>/response` and `.../<id>/error`, and
//! `POST .../init/error` (printed on stderr). It also serves Lambda's `Invoke`,
//! `POST /2015-03-31/functions/NAME/invocations` (the real SDK with `AWS_ENDPOINT_URL_LAMBDA`
//! pointing here: 200 with the response, or 200 with the error document and
//! `X-Amz-Function-Error: Unhandled`; `Event` 202, `DryRun` 204; another function's name 404
//! `ResourceNotFoundException`), and `POST /invoke` (the body is the event), which waits for the
//! function's answer and returns it: 200 with the response, or 500 with the error document.
//! Invocations run one at a time, like one warm Lambda container.
//!
//! The function is named `--name` (ARN `arn:aws:lambda:$AWS_REGION:123456789012:function:NAME`,
//! us-east-1 if `AWS_REGION` is unset), has 256 MB and a `--timeout-secs` timeout (default 60:
//! its deadline, and how long `Invoke` and `/invoke` wait). If the function exits on its own it
//! exits 1.
//!
//! Without `-- BINARY`, each `--route NAME=URL` (one or more) sends the `Invoke` calls for
//! function `NAME` to the function's own `capblock-local-lambda` at `URL` (`http://host:port`),
//! and their answers back unchanged; an unknown name is 404 `ResourceNotFoundException`.
//!
//! Either way `--port 0` picks a free port; once listening it prints
//! `listening on http://127.0.0.1:PORT` on stdout (logs go to stderr), and on SIGTERM or SIGINT
//! it stops (and stops the function) and exits 0.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use std::collections::BTreeMap;

use capblock_local_lambda::{Config, Event, Function, InvokeRouter, RuntimeApi, function_arn};
use tokio::signal::unix::{Signal, SignalKind, signal};

fn usage() -> ! {
    eprintln!(
        "usage: capblock-local-lambda --port PORT --name FUNCTION [--timeout-secs N] -- BINARY [ARGS...]\n       \
         capblock-local-lambda --port PORT --route NAME=URL [--route NAME=URL ...]"
    );
    std::process::exit(2)
}

fn signals() -> (Signal, Signal) {
    let (Ok(term), Ok(int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("cannot install signal handlers");
        std::process::exit(1)
    };
    (term, int)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--");
    let opts = &args[..split.unwrap_or(args.len())];
    let opt = |name: &str| opts.iter().position(|a| a == name).and_then(|i| opts.get(i + 1)).cloned();
    let port: u16 = opt("--port").and_then(|p| p.parse().ok()).unwrap_or_else(|| usage());
    let routes: Vec<&String> = opts.windows(2).filter(|w| w[0] == "--route").map(|w| &w[1]).collect();
    let Some(split) = split else { return route(port, &routes).await };
    if !routes.is_empty() {
        usage()
    }
    let cmd = &args[split + 1..];
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
    // Before the function starts: failing here must not leave it running.
    let (mut term, mut int) = signals();
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

/// Router mode: `--route NAME=URL`, at least one.
async fn route(port: u16, routes: &[&String]) {
    let mut table = BTreeMap::new();
    for r in routes {
        match r.split_once('=') {
            Some((name, url)) if !name.is_empty() && url.starts_with("http://") => {
                table.insert(name.to_string(), url.to_string());
            }
            _ => usage(),
        }
    }
    if table.is_empty() {
        usage()
    }
    let router = InvokeRouter::start(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), table).await.unwrap_or_else(|e| {
        eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
        std::process::exit(1)
    });
    let (mut term, mut int) = signals();
    println!("listening on {}", router.url());
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
