//! The cold-start measurement: spawn the function binary behind capblock's local Lambda Runtime
//! API (`capblock_local_lambda`, the one the tests and `make demo` use) with one invocation
//! queued, note when it first asks for work (its init is done) and when it answers, read its CPU
//! time and peak RSS at that moment, stop it.

use std::path::Path;
use std::time::{Duration, Instant};

use capblock_local_lambda::{Config, Event, Function, Kind, RuntimeApi};
use tokio::sync::mpsc::UnboundedReceiver;

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

/// One cold start of `bin` with `env` (and nothing else from this process's environment),
/// serving `event`.
pub fn cold_start(bin: &Path, env: &[(String, String)], event: &str, arn: &str, log: &Path) -> Result<Run, String> {
    // The runtime API is served from its own worker thread, as the function's requests come in;
    // this thread waits for its events and reads /proc.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(measure(bin, env, event, arn, log))
}

/// The next event before `deadline`, if any.
async fn next_event(events: &mut UnboundedReceiver<Event>, deadline: tokio::time::Instant) -> Option<Event> {
    tokio::time::timeout_at(deadline, events.recv()).await.ok().flatten()
}

async fn measure(bin: &Path, env: &[(String, String)], event: &str, arn: &str, log: &Path) -> Result<Run, String> {
    let config = Config { function_arn: arn.to_string(), timeout: Duration::from_secs(60), ..Config::default() };
    let api = RuntimeApi::start(config).await.map_err(|e| e.to_string())?;
    let mut events = api.events();
    let request_id = api.invoke_bytes(event);
    let log_file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    let function = Function::new(bin)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .memory_mb(128)
        .log_group("bench")
        .log_stream("bench")
        .stdout(log_file)
        .stderr(log_err);
    let t0 = Instant::now();
    let mut child = api.spawn(function).map_err(|e| format!("{}: {e}", bin.display()))?;
    let pid = child.id().unwrap_or_default();
    let timeout = Duration::from_secs(90);

    // Init: until the function first asks for work (and is handed the event at once).
    let deadline = tokio::time::Instant::now() + timeout;
    let mut asked = None;
    let failed = loop {
        match next_event(&mut events, deadline).await {
            Some(Event::Asked { at }) => {
                asked.get_or_insert(at);
            }
            Some(Event::Taken { .. }) => break None,
            Some(Event::InitError { body, .. }) => break Some(format!("init-error before any invocation: {body}")),
            Some(Event::Answered(a)) => break Some(format!("answer before any invocation: {}", a.text())),
            None => break Some(format!("no request for work within {timeout:?} (log: {})", log.display())),
        }
    };
    if let Some(e) = failed {
        let _ = child.kill().await;
        return Err(e);
    }
    let next = asked.unwrap_or(t0);
    let cpu_at_next = cpu_time(pid);

    // The handler: until it answers (or reports an init error after all).
    let deadline = tokio::time::Instant::now() + timeout;
    let done = loop {
        match next_event(&mut events, deadline).await {
            Some(Event::Answered(a)) if a.request_id == request_id => {
                let kind = if a.kind == Kind::Response { "response" } else { "error" };
                break Some((a.answered_at, a.taken_at, kind, a.text()));
            }
            Some(Event::InitError { body, at }) => break Some((at, next, "init-error", body)),
            Some(_) => {}
            None => break None,
        }
    };
    let cpu_at_done = cpu_time(pid);
    let peak_rss = vm_hwm(pid);
    let _ = child.kill().await;
    let Some((t_done, taken, outcome, body)) = done else {
        return Err(format!("no response within {timeout:?} (log: {})", log.display()));
    };
    let handler_cpu = match (cpu_at_next, cpu_at_done) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(Run {
        init: next - t0,
        handler: t_done.saturating_duration_since(taken),
        handler_cpu,
        outcome,
        body,
        peak_rss,
        log_bytes: std::fs::metadata(log).map_or(0, |m| m.len()),
    })
}
