//! A tiny local Lambda Runtime API, enough to run a real function binary (built by `cargo build
//! --workspace --bins`) outside Lambda: it hands out queued events on
//! `GET /2018-06-01/runtime/invocation/next` (long-polling while the queue is empty) with the
//! headers `lambda_runtime` needs, and records every `POST .../response`, `.../error` and
//! `/runtime/init/error`. The function process is started with [`RuntimeApi::spawn`].

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// What the function posted back for one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Response(Value),
    Error(Value),
}

#[derive(Default)]
struct State {
    queue: VecDeque<(String, Value)>,
    handed_out: Vec<String>,
    outcomes: BTreeMap<String, Outcome>,
    init_errors: Vec<String>,
}

/// The runtime API server; stops when dropped.
pub struct RuntimeApi {
    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub addr: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RuntimeApi {
    pub async fn start() -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, st.clone()));
            }
        });
        RuntimeApi { addr, state, task }
    }

    /// Queues one invocation; returns its request id.
    pub fn invoke(&self, event: Value) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        self.state.lock().unwrap().queue.push_back((id.clone(), event));
        id
    }

    /// Request ids the function has taken so far.
    pub fn handed_out(&self) -> Vec<String> {
        self.state.lock().unwrap().handed_out.clone()
    }

    pub fn outcome(&self, request_id: &str) -> Option<Outcome> {
        self.state.lock().unwrap().outcomes.get(request_id).cloned()
    }

    pub fn init_errors(&self) -> Vec<String> {
        self.state.lock().unwrap().init_errors.clone()
    }

    /// Waits for the function's answer to one invocation.
    pub async fn wait_outcome(&self, request_id: &str, timeout: Duration) -> Option<Outcome> {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if let Some(o) = self.outcome(request_id) {
                return Some(o);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// Starts `binary` as a Lambda function against this runtime API, with `env` on top of the
    /// Lambda environment variables `lambda_runtime` reads. Output goes to the test's stderr.
    pub fn spawn(&self, binary: &Path, env: &[(String, String)]) -> tokio::process::Child {
        let mut cmd = tokio::process::Command::new(binary);
        cmd.env("AWS_LAMBDA_RUNTIME_API", &self.addr)
            .env("AWS_LAMBDA_FUNCTION_NAME", binary.file_name().unwrap().to_string_lossy().to_string())
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "local")
            .env("RUST_LOG", std::env::var("CAPBLOCK_FUNCTION_LOG").unwrap_or_else(|_| "warn".into()))
            .kill_on_drop(true)
            .stdin(std::process::Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e} (run `cargo build --workspace --bins`)", binary.display()))
    }
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

async fn serve(sock: TcpStream, state: Arc<Mutex<State>>) {
    let mut reader = BufReader::new(sock);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).await.unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body).to_string();
        let reply = handle(&method, &path, &body, &state).await;
        if reader.get_mut().write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn response(status: &str, headers: &[(&str, String)], body: &str) -> String {
    let mut r = format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

async fn handle(method: &str, path: &str, body: &str, state: &Arc<Mutex<State>>) -> String {
    const BASE: &str = "/2018-06-01/runtime";
    let accepted = response("202 Accepted", &[], r#"{"status":"OK"}"#);
    let rest = path.strip_prefix(BASE).unwrap_or("");
    match (method, rest) {
        ("GET", "/invocation/next") => loop {
            let next = {
                let mut s = state.lock().unwrap();
                let n = s.queue.pop_front();
                if let Some((id, _)) = &n {
                    s.handed_out.push(id.clone());
                }
                n
            };
            if let Some((id, event)) = next {
                let deadline = chrono::Utc::now().timestamp_millis() + 900_000;
                return response(
                    "200 OK",
                    &[
                        ("Lambda-Runtime-Aws-Request-Id", id),
                        ("Lambda-Runtime-Deadline-Ms", deadline.to_string()),
                        (
                            "Lambda-Runtime-Invoked-Function-Arn",
                            "arn:aws:lambda:us-east-1:123456789012:function:capblock-local".into(),
                        ),
                        ("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000".into()),
                    ],
                    &event.to_string(),
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        },
        ("POST", "/init/error") => {
            state.lock().unwrap().init_errors.push(body.to_string());
            accepted
        }
        ("POST", r) if r.starts_with("/invocation/") => {
            let tail = &r["/invocation/".len()..];
            let (id, kind) = tail.split_once('/').unwrap_or((tail, ""));
            let value = serde_json::from_str(body).unwrap_or(Value::String(body.to_string()));
            let outcome = if kind == "response" { Outcome::Response(value) } else { Outcome::Error(value) };
            state.lock().unwrap().outcomes.insert(id.to_string(), outcome);
            accepted
        }
        _ => response("404 Not Found", &[], r#"{"errorMessage":"unknown path"}"#),
    }
}
