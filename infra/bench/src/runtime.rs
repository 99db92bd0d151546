//! A one-event Lambda Runtime API on 127.0.0.1 and the cold-start measurement around it:
//! spawn the function binary, serve one invocation, note when it asks for work (its init is
//! done) and when it answers, read its peak RSS, stop it.

use std::io::BufReader;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::http::{read_message, response, write_message};

#[derive(Debug)]
enum Event {
    Next(Instant),
    Done(Instant, &'static str, String),
}

/// One cold invocation.
#[derive(Debug, Clone)]
pub struct Run {
    /// spawn -> the first GET .../invocation/next (runtime, SDK clients, config ready)
    pub init: Duration,
    /// GET next -> POST response: the handler, including its AWS calls
    pub handler: Duration,
    /// CPU time all threads spent in the handler (what the handler costs besides waiting)
    pub handler_cpu: Option<Duration>,
    pub outcome: &'static str,
    pub body: String,
    /// VmHWM at the response, bytes
    pub peak_rss: u64,
    /// bytes the function logged (stdout + stderr)
    pub log_bytes: u64,
}

impl Run {
    pub fn first_response(&self) -> Duration {
        self.init + self.handler
    }
    /// Time to first response without the time spent waiting on AWS calls.
    pub fn first_response_own(&self) -> Duration {
        self.init + self.handler_cpu.unwrap_or(self.handler).min(self.handler)
    }
}

/// CPU time of every thread of `pid` so far (/proc/PID/task/*/schedstat, nanoseconds).
fn cpu_time(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

fn vm_hwm(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Serves `event` once to whoever asks; later `next` calls are held open.
fn serve(listener: TcpListener, event: String, arn: String, tx: mpsc::Sender<Event>) {
    let served = Arc::new(Mutex::new(false));
    for conn in listener.incoming().flatten() {
        let (event, arn, tx, served) = (event.clone(), arn.clone(), tx.clone(), served.clone());
        thread::spawn(move || {
            let Ok(mut w) = conn.try_clone() else { return };
            let mut r = BufReader::new(conn);
            while let Ok(Some(req)) = read_message(&mut r, false) {
                let path = req.start.split_whitespace().nth(1).unwrap_or("").to_string();
                if path.ends_with("/invocation/next") {
                    let first = !std::mem::replace(&mut *served.lock().unwrap_or_else(|p| p.into_inner()), true);
                    if !first {
                        // The function is warm and waiting: hold it until it is stopped.
                        thread::sleep(Duration::from_secs(3600));
                        return;
                    }
                    let _ = tx.send(Event::Next(Instant::now()));
                    let deadline = chrono::Utc::now().timestamp_millis() + 60_000;
                    let mut resp = response(200, "OK", "application/json", event.into_bytes());
                    resp.headers.extend([
                        ("lambda-runtime-aws-request-id".into(), "bench-0001".into()),
                        ("lambda-runtime-deadline-ms".into(), deadline.to_string()),
                        ("lambda-runtime-invoked-function-arn".into(), arn.clone()),
                        ("lambda-runtime-trace-id".into(), "Root=1-00000000-000000000000000000000000".into()),
                    ]);
                    if write_message(&mut w, &resp, true).is_err() {
                        return;
                    }
                    break;
                } else {
                    let kind = if path.ends_with("/response") {
                        "response"
                    } else if path.ends_with("/init/error") {
                        "init-error"
                    } else {
                        "error"
                    };
                    let _ = tx.send(Event::Done(Instant::now(), kind, String::from_utf8_lossy(&req.body).into()));
                    if write_message(&mut w, &response(202, "Accepted", "application/json", b"{}".to_vec()), true)
                        .is_err()
                    {
                        return;
                    }
                }
            }
            // keep reading the connection (the response may come on the same one)
            while let Ok(Some(req)) = read_message(&mut r, false) {
                let path = req.start.split_whitespace().nth(1).unwrap_or("").to_string();
                if path.ends_with("/invocation/next") {
                    thread::sleep(Duration::from_secs(3600));
                    return;
                }
                let kind = if path.ends_with("/response") { "response" } else { "error" };
                let _ = tx.send(Event::Done(Instant::now(), kind, String::from_utf8_lossy(&req.body).into()));
                if write_message(&mut w, &response(202, "Accepted", "application/json", b"{}".to_vec()), true).is_err()
                {
                    return;
                }
            }
        });
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// One cold start of `bin` with `env`, serving `event`.
pub fn cold_start(bin: &Path, env: &[(String, String)], event: &str, arn: &str, log: &Path) -> Result<Run, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let api = listener.local_addr().map_err(|e| e.to_string())?.to_string();
    let (tx, rx) = mpsc::channel();
    let (event, arn_s) = (event.to_string(), arn.to_string());
    thread::spawn(move || serve(listener, event, arn_s, tx));
    let log_file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("AWS_LAMBDA_RUNTIME_API", &api)
        .env("AWS_LAMBDA_FUNCTION_NAME", bin.file_name().unwrap_or_default())
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
    let pid = child.id();
    let timeout = Duration::from_secs(90);
    let next = match rx.recv_timeout(timeout) {
        Ok(Event::Next(t)) => t,
        Ok(Event::Done(_, kind, body)) => {
            stop(&mut child);
            return Err(format!("{kind} before any invocation: {body}"));
        }
        Err(_) => {
            stop(&mut child);
            return Err(format!("no request for work within {timeout:?} (log: {})", log.display()));
        }
    };
    let cpu_at_next = cpu_time(pid);
    let done = rx.recv_timeout(timeout);
    let cpu_at_done = cpu_time(pid);
    let peak_rss = vm_hwm(pid);
    stop(&mut child);
    let (t_done, outcome, body) = match done {
        Ok(Event::Done(t, kind, body)) => (t, kind, body),
        _ => return Err(format!("no response within {timeout:?} (log: {})", log.display())),
    };
    let handler_cpu = match (cpu_at_next, cpu_at_done) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(Run {
        init: next - t0,
        handler: t_done - next,
        handler_cpu,
        outcome,
        body,
        peak_rss,
        log_bytes: std::fs::metadata(log).map_or(0, |m| m.len()),
    })
}
