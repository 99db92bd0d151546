//! `capblock-local-lambda`: a local Lambda Runtime API for one function.
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
//! `POST .../init/error`. `POST /invoke` (the body is the event) waits for the function's answer
//! and returns it: 200 with the response, or 500 with the error document, as `Invoke` would.
//! Invocations run one at a time, like one warm Lambda container.
//!
//! `--port 0` picks a free port. Once listening it prints `listening on http://127.0.0.1:PORT`
//! on stdout (logs go to stderr). On SIGTERM or SIGINT it stops the function and exits 0; if
//! the function exits on its own it exits 1.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, oneshot};

struct Invocation {
    id: String,
    body: Vec<u8>,
}

/// The function's answer: HTTP status (200 response, 500 error) and body.
type Answer = oneshot::Sender<(u16, Vec<u8>)>;

#[derive(Default)]
struct State {
    queue: Mutex<VecDeque<Invocation>>,
    waiting: Mutex<HashMap<String, Answer>>,
    ready: Notify,
    arn: String,
    timeout: Duration,
}

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

async fn read_request(r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).await.ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.ok()?;
    Some(Request { method, path, body })
}

fn response(status: u16, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        404 => "Not Found",
        _ => "Error",
    };
    let mut out =
        format!("HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        out += &format!("{k}: {v}\r\n");
    }
    out += "\r\n";
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

async fn next(state: &State) -> Invocation {
    loop {
        let notified = state.ready.notified();
        if let Some(inv) = state.queue.lock().unwrap().pop_front() {
            return inv;
        }
        notified.await;
    }
}

async fn serve(stream: TcpStream, state: Arc<State>) {
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    while let Some(req) = read_request(&mut r).await {
        let base = "/2018-06-01/runtime";
        let reply = if req.method == "GET" && req.path == format!("{base}/invocation/next") {
            let inv = next(&state).await;
            let deadline = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + state.timeout;
            response(
                200,
                &[
                    ("Lambda-Runtime-Aws-Request-Id", inv.id.clone()),
                    ("Lambda-Runtime-Deadline-Ms", deadline.as_millis().to_string()),
                    ("Lambda-Runtime-Invoked-Function-Arn", state.arn.clone()),
                    ("Lambda-Runtime-Trace-Id", format!("Root=1-{}", &inv.id[..8])),
                ],
                &inv.body,
            )
        } else if req.method == "POST" && req.path.starts_with(&format!("{base}/invocation/")) {
            let rest = &req.path[base.len() + "/invocation/".len()..];
            let (id, kind) = rest.split_once('/').unwrap_or((rest, ""));
            let status = if kind == "response" { 200 } else { 500 };
            if let Some(tx) = state.waiting.lock().unwrap().remove(id) {
                let _ = tx.send((status, req.body));
            }
            response(202, &[], b"{\"status\":\"OK\"}")
        } else if req.method == "POST" && req.path == format!("{base}/init/error") {
            eprintln!("function init error: {}", String::from_utf8_lossy(&req.body));
            response(202, &[], b"{\"status\":\"OK\"}")
        } else if req.method == "POST" && req.path == "/invoke" {
            let id = uuid::Uuid::new_v4().to_string();
            let (tx, rx) = oneshot::channel();
            state.waiting.lock().unwrap().insert(id.clone(), tx);
            state.queue.lock().unwrap().push_back(Invocation { id, body: req.body });
            state.ready.notify_one();
            match tokio::time::timeout(state.timeout, rx).await {
                Ok(Ok((status, body))) => response(status, &[], &body),
                _ => response(500, &[], b"{\"errorType\":\"Timeout\",\"errorMessage\":\"no answer in time\"}"),
            }
        } else {
            response(404, &[], b"{\"errorMessage\":\"unknown path\"}")
        };
        if w.write_all(&reply).await.is_err() {
            return;
        }
    }
}

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
    let arn = format!("arn:aws:lambda:{region}:123456789012:function:{name}");
    let Some(binary) = cmd.first() else { usage() };

    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap_or_else(|e| {
        eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
        std::process::exit(1)
    });
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    let state = Arc::new(State { arn, timeout, ..Default::default() });
    let mut child = tokio::process::Command::new(binary)
        .args(&cmd[1..])
        .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
        .env("AWS_LAMBDA_FUNCTION_NAME", &name)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("cannot start {binary}: {e}");
            std::process::exit(1)
        });
    println!("listening on http://127.0.0.1:{port}");
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("cannot install signal handlers");
        let _ = child.kill().await;
        std::process::exit(1)
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(serve(stream, state.clone()));
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
