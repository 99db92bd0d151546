//! A local Lambda: enough of the Lambda Runtime API to run a real function binary (one built on
//! `lambda_runtime`) outside Lambda, and enough of Lambda's `Invoke` to call it with the real
//! SDK; capblock's only one. The `capblock-local-lambda` binary (`make demo`), the integration
//! tests (`tests/`) and the cold-start bench (`infra/bench/`) all run their functions behind
//! [`RuntimeApi`].
//!
//! The server listens on loopback and answers what the function's `lambda_runtime` loop calls:
//!
//! * `GET /2018-06-01/runtime/invocation/next`: held until an invocation is queued, then
//!   answered with the event and the `Lambda-Runtime-Aws-Request-Id`, `-Deadline-Ms`,
//!   `-Invoked-Function-Arn` and `-Trace-Id` headers. A caller that hangs up while waiting takes
//!   nothing (a killed function does not swallow the next invocation).
//! * `POST .../invocation/<id>/response` and `.../invocation/<id>/error`: the function's
//!   [`Answer`], recorded with the instant the function took the invocation and the instant it
//!   answered.
//! * `POST .../init/error`: recorded as an init error.
//!
//! and what a caller of the function sends:
//!
//! * `POST /2015-03-31/functions/<FunctionName>/invocations`: Lambda's own `Invoke`, so that
//!   `aws-sdk-lambda` pointed here (`AWS_ENDPOINT_URL_LAMBDA`) can call the function. See
//!   [`invoke`] for what it answers.
//! * `POST /invoke` (not Lambda's path: the local `Invoke` of the scripts): the body is the event;
//!   waits for the function's answer and returns it, 200 with the response or 500 with the error
//!   document (500 `Timeout` when no answer comes within [`Config::timeout`]).
//!
//! Invocations are queued with [`RuntimeApi::invoke`] (or either `Invoke`) and handed out in
//! order; one function process takes one at a time, like one warm Lambda container. The function
//! process is started with [`RuntimeApi::spawn`], which sets `AWS_LAMBDA_RUNTIME_API` and the
//! other variables `lambda_runtime` reads. What happens can be read back ([`RuntimeApi::answer`],
//! [`RuntimeApi::wait_answer`], ...) or followed as it happens ([`RuntimeApi::events`]: each
//! request's [`Instant`], for timing a cold start).
//!
//! One [`RuntimeApi`] is one function. An [`InvokeRouter`] puts several behind one endpoint, as
//! Lambda does: it serves the same `Invoke` path and forwards each call to the [`RuntimeApi`] of
//! the function it names.
//!
//! Everything runs on the caller's tokio runtime; a server stops when its [`RuntimeApi`] or
//! [`InvokeRouter`] is dropped (open connections are closed).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capblock_http1::{Message, read_message, write_message};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::{JoinHandle, JoinSet};

pub mod invoke;
pub use invoke::{INVOKE_PATH, InvokeRouter};

/// The Runtime API's path prefix.
pub const RUNTIME_PATH: &str = "/2018-06-01/runtime";

/// The account id in the ARNs handed to functions.
pub const ACCOUNT: &str = "123456789012";

/// The ARN of function `name` in `region`, in the local account.
pub fn function_arn(region: &str, name: &str) -> String {
    format!("arn:aws:lambda:{region}:{ACCOUNT}:function:{name}")
}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free one (see [`RuntimeApi::addr`]).
    pub listen: SocketAddr,
    /// `Lambda-Runtime-Invoked-Function-Arn`, the function's `context.invoked_function_arn`.
    pub function_arn: String,
    /// The function's timeout: each invocation's deadline (`Lambda-Runtime-Deadline-Ms` = when
    /// it is handed out + this) and how long `POST /invoke` waits for the answer.
    pub timeout: Duration,
}

impl Default for Config {
    /// Loopback on a free port, function `capblock-local` in us-east-1, a 15-minute timeout.
    fn default() -> Config {
        Config {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            function_arn: function_arn("us-east-1", "capblock-local"),
            timeout: Duration::from_secs(900),
        }
    }
}

/// Which endpoint the function answered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `POST .../invocation/<id>/response`
    Response,
    /// `POST .../invocation/<id>/error`
    Error,
}

/// What the function posted back for one invocation, and when.
#[derive(Debug, Clone)]
pub struct Answer {
    pub request_id: String,
    pub kind: Kind,
    /// The posted body, as sent.
    pub body: Vec<u8>,
    /// When the function took the invocation: the arrival of the `GET .../invocation/next` it
    /// was handed to, or, if that request was already waiting, the moment it was queued.
    pub taken_at: Instant,
    /// When the function's `POST` arrived.
    pub answered_at: Instant,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (a JSON string holding the text if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| Value::String(self.text()))
    }

    pub fn outcome(&self) -> Outcome {
        match self.kind {
            Kind::Response => Outcome::Response(self.json()),
            Kind::Error => Outcome::Error(self.json()),
        }
    }

    /// Taken -> answered: the handler, including its own calls.
    pub fn handler_time(&self) -> Duration {
        self.answered_at.saturating_duration_since(self.taken_at)
    }
}

/// An answer's kind and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Response(Value),
    Error(Value),
}

/// What the function did, in order, with the instant the server read each request.
#[derive(Debug, Clone)]
pub enum Event {
    /// A `GET .../invocation/next` arrived: the function is ready for work (the first one ends
    /// its init).
    Asked { at: Instant },
    /// An invocation was handed out ([`Answer::taken_at`]).
    Taken { request_id: String, at: Instant },
    /// The function answered an invocation.
    Answered(Answer),
    /// `POST .../init/error`.
    InitError { body: String, at: Instant },
}

/// How to start a function binary (see [`RuntimeApi::spawn`]).
///
/// The function gets the Lambda variables (`AWS_LAMBDA_FUNCTION_NAME`, `_MEMORY_SIZE`,
/// `_VERSION`, `AWS_LAMBDA_LOG_GROUP_NAME`, `_STREAM_NAME`), then [`Function::env`]'s on top,
/// then `AWS_LAMBDA_RUNTIME_API`. Its stdin is null; it is killed if its `Child` is dropped.
#[derive(Debug)]
pub struct Function {
    binary: PathBuf,
    args: Vec<OsString>,
    name: String,
    memory_mb: u32,
    log_group: Option<String>,
    log_stream: String,
    env: Vec<(OsString, OsString)>,
    env_clear: bool,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
}

impl Function {
    /// `binary`, named after its file name, 128 MB, log group `/aws/lambda/NAME`, log stream
    /// `local`, this process's environment, output inherited.
    pub fn new(binary: impl Into<PathBuf>) -> Function {
        let binary = binary.into();
        let name = binary.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Function {
            binary,
            args: Vec::new(),
            name,
            memory_mb: 128,
            log_group: None,
            log_stream: "local".into(),
            env: Vec::new(),
            env_clear: false,
            stdout: None,
            stderr: None,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Function {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Function {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `AWS_LAMBDA_FUNCTION_NAME`.
    pub fn name(mut self, name: impl Into<String>) -> Function {
        self.name = name.into();
        self
    }

    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (informational: nothing is enforced).
    pub fn memory_mb(mut self, mb: u32) -> Function {
        self.memory_mb = mb;
        self
    }

    pub fn log_group(mut self, group: impl Into<String>) -> Function {
        self.log_group = Some(group.into());
        self
    }

    pub fn log_stream(mut self, stream: impl Into<String>) -> Function {
        self.log_stream = stream.into();
        self
    }

    /// One more variable, on top of the Lambda ones.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Function {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn envs<I, K, V>(mut self, vars: I) -> Function
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.env.extend(vars.into_iter().map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())));
        self
    }

    /// Start from an empty environment instead of this process's.
    pub fn env_clear(mut self) -> Function {
        self.env_clear = true;
        self
    }

    pub fn stdout(mut self, out: impl Into<Stdio>) -> Function {
        self.stdout = Some(out.into());
        self
    }

    pub fn stderr(mut self, err: impl Into<Stdio>) -> Function {
        self.stderr = Some(err.into());
        self
    }

    pub fn binary(&self) -> &Path {
        &self.binary
    }
}

struct Queued {
    id: String,
    body: Vec<u8>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Queued>,
    handed_out: Vec<String>,
    taken: HashMap<String, Instant>,
    answers: BTreeMap<String, Answer>,
    init_errors: Vec<String>,
    first_asked: Option<Instant>,
    subscribers: Vec<mpsc::UnboundedSender<Event>>,
}

impl State {
    fn emit(&mut self, event: Event) {
        self.subscribers.retain(|tx| tx.send(event.clone()).is_ok());
    }
}

struct Shared {
    config: Config,
    state: Mutex<State>,
    /// an invocation was queued
    queued: Notify,
    /// an answer arrived
    answered: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn enqueue(&self, body: Vec<u8>) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        self.state().queue.push_back(Queued { id: id.clone(), body });
        self.queued.notify_waiters();
        id
    }

    fn asked(&self, at: Instant) {
        let mut s = self.state();
        s.first_asked.get_or_insert(at);
        s.emit(Event::Asked { at });
    }

    fn take(&self, at: Instant) -> Option<Queued> {
        let mut s = self.state();
        let q = s.queue.pop_front()?;
        s.handed_out.push(q.id.clone());
        s.taken.insert(q.id.clone(), at);
        s.emit(Event::Taken { request_id: q.id.clone(), at });
        Some(q)
    }

    /// The connection that took `q` is gone before it got it: first in line again.
    fn give_back(&self, q: Queued) {
        let mut s = self.state();
        s.handed_out.retain(|id| id != &q.id);
        s.taken.remove(&q.id);
        s.queue.push_front(q);
        drop(s);
        self.queued.notify_waiters();
    }

    fn answer(&self, request_id: &str, kind: Kind, body: Vec<u8>, at: Instant) {
        let mut s = self.state();
        if s.answers.contains_key(request_id) {
            return; // the first answer counts
        }
        let taken_at = s.taken.get(request_id).copied().unwrap_or(at);
        let a = Answer { request_id: request_id.to_string(), kind, body, taken_at, answered_at: at };
        s.answers.insert(request_id.to_string(), a.clone());
        s.emit(Event::Answered(a));
        drop(s);
        self.answered.notify_waiters();
    }

    fn init_error(&self, body: String, at: Instant) {
        let mut s = self.state();
        s.init_errors.push(body.clone());
        s.emit(Event::InitError { body, at });
    }

    /// Queues one invocation and waits up to the function's timeout for its answer (`None`: no
    /// answer in time); returns its request id too.
    async fn call(&self, body: Vec<u8>) -> (String, Option<Answer>) {
        let id = self.enqueue(body);
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        let answer = self.wait_answer(&id, deadline, true).await;
        if answer.is_none() {
            // Not answered in time: do not leave it queued for a later caller.
            self.state().queue.retain(|q| q.id != id);
        }
        (id, answer)
    }

    /// Waits until `request_id` is answered or `deadline`; `forget`: drop what is kept of it.
    async fn wait_answer(&self, request_id: &str, deadline: tokio::time::Instant, forget: bool) -> Option<Answer> {
        loop {
            let notified = self.answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.state();
                if forget {
                    if let Some(a) = s.answers.remove(request_id) {
                        s.taken.remove(request_id);
                        return Some(a);
                    }
                } else if let Some(a) = s.answers.get(request_id) {
                    return Some(a.clone());
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let mut s = self.state();
                if forget {
                    s.taken.remove(request_id);
                    return s.answers.remove(request_id);
                }
                return s.answers.get(request_id).cloned();
            }
        }
    }
}

/// The Runtime API server (see the crate docs); stops when dropped.
pub struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RuntimeApi {
    /// Binds [`Config::listen`] and starts serving on the current tokio runtime.
    pub async fn start(config: Config) -> io::Result<RuntimeApi> {
        let listener = TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(State::default()),
            queued: Notify::new(),
            answered: Notify::new(),
        });
        let task = tokio::spawn(accept(listener, shared.clone()));
        Ok(RuntimeApi { addr, shared, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn runtime_api(&self) -> String {
        self.addr.to_string()
    }

    /// `http://host:port`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Queues one invocation with `event`; returns its request id.
    pub fn invoke(&self, event: Value) -> String {
        self.shared.enqueue(event.to_string().into_bytes())
    }

    /// Queues one invocation whose event is `body`, sent as is.
    pub fn invoke_bytes(&self, body: impl Into<Vec<u8>>) -> String {
        self.shared.enqueue(body.into())
    }

    /// Request ids the function has taken so far, in order.
    pub fn handed_out(&self) -> Vec<String> {
        self.shared.state().handed_out.clone()
    }

    /// When the first `GET .../invocation/next` arrived.
    pub fn first_asked(&self) -> Option<Instant> {
        self.shared.state().first_asked
    }

    pub fn answer(&self, request_id: &str) -> Option<Answer> {
        self.shared.state().answers.get(request_id).cloned()
    }

    pub fn outcome(&self, request_id: &str) -> Option<Outcome> {
        self.answer(request_id).map(|a| a.outcome())
    }

    /// Bodies of the `POST .../init/error` calls so far.
    pub fn init_errors(&self) -> Vec<String> {
        self.shared.state().init_errors.clone()
    }

    /// Waits for the function's answer to one invocation (woken by its arrival, no polling).
    pub async fn wait_answer(&self, request_id: &str, timeout: Duration) -> Option<Answer> {
        self.shared.wait_answer(request_id, tokio::time::Instant::now() + timeout, false).await
    }

    pub async fn wait_outcome(&self, request_id: &str, timeout: Duration) -> Option<Outcome> {
        self.wait_answer(request_id, timeout).await.map(|a| a.outcome())
    }

    /// Every [`Event`] from now on, in order (subscribe before starting the function to see all).
    pub fn events(&self) -> mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.state().subscribers.push(tx);
        rx
    }

    /// Starts `function` against this runtime API (see [`Function`]).
    pub fn spawn(&self, function: Function) -> io::Result<tokio::process::Child> {
        let f = function;
        let mut cmd = tokio::process::Command::new(&f.binary);
        if f.env_clear {
            cmd.env_clear();
        }
        let log_group = f.log_group.unwrap_or_else(|| format!("/aws/lambda/{}", f.name));
        cmd.args(&f.args)
            .env("AWS_LAMBDA_FUNCTION_NAME", &f.name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", f.memory_mb.to_string())
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", log_group)
            .env("AWS_LAMBDA_LOG_STREAM_NAME", &f.log_stream)
            .envs(f.env)
            .env("AWS_LAMBDA_RUNTIME_API", self.runtime_api())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if let Some(out) = f.stdout {
            cmd.stdout(out);
        }
        if let Some(err) = f.stderr {
            cmd.stderr(err);
        }
        cmd.spawn()
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    serve_connections(listener, |sock| connection(sock, shared.clone())).await
}

/// Accepts connections for ever, each served by `serve` on a task of its own.
async fn serve_connections<F, Fut>(listener: TcpListener, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    // Connections live in this set: aborting this task (dropping the server) closes them.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    conns.spawn(serve(sock));
                }
                // e.g. out of file descriptors: let connections finish, then try again
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// A JSON response with `headers`.
fn response(status: u16, headers: &[(&str, String)], body: &[u8]) -> Message {
    // The shared helper's reason phrases stop at the statuses the other tools send (no 204).
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    let m = Message { start: format!("HTTP/1.1 {status} {reason}"), ..Message::response(status, body) };
    headers.iter().fold(m, |m, (k, v)| m.with_header(k, v.clone()))
}

const ACCEPTED: &[u8] = br#"{"status":"OK"}"#;

/// Resolves when the peer closes the connection (or it fails); stays pending if it sends more.
async fn closed(r: &mut BufReader<OwnedReadHalf>) {
    match r.fill_buf().await {
        Ok([]) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// The next invocation for a `GET .../invocation/next` that arrived at `asked`; `None` if the
/// caller hung up first.
async fn next_invocation(shared: &Shared, asked: Instant, r: &mut BufReader<OwnedReadHalf>) -> Option<Queued> {
    shared.asked(asked);
    let mut at = asked;
    loop {
        let queued = shared.queued.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        if let Some(q) = shared.take(at) {
            return Some(q);
        }
        tokio::select! {
            // A caller that already hung up must not win the race for a new invocation.
            biased;
            _ = closed(r) => return None,
            _ = &mut queued => at = Instant::now(),
        }
    }
}

async fn connection(sock: TcpStream, shared: Arc<Shared>) {
    let _ = sock.set_nodelay(true);
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    while let Ok(Some(req)) = read_message(&mut r, false).await {
        let at = Instant::now();
        let (method, path) = (req.method().to_string(), req.path().to_string());
        let rest = path.strip_prefix(RUNTIME_PATH);
        let reply = match (method.as_str(), rest) {
            ("GET", Some("/invocation/next")) => {
                let Some(q) = next_invocation(&shared, at, &mut r).await else { return };
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                let deadline = now + shared.config.timeout;
                let simple = q.id.replace('-', "");
                let reply = response(
                    200,
                    &[
                        ("Lambda-Runtime-Aws-Request-Id", q.id.clone()),
                        ("Lambda-Runtime-Deadline-Ms", deadline.as_millis().to_string()),
                        ("Lambda-Runtime-Invoked-Function-Arn", shared.config.function_arn.clone()),
                        ("Lambda-Runtime-Trace-Id", format!("Root=1-{:08x}-{}", now.as_secs(), &simple[..24])),
                    ],
                    &q.body,
                );
                if write_message(&mut w, &reply, true).await.is_err() {
                    shared.give_back(q);
                    return;
                }
                continue;
            }
            ("POST", Some("/init/error")) => {
                shared.init_error(String::from_utf8_lossy(&req.body).into_owned(), at);
                response(202, &[], ACCEPTED)
            }
            ("POST", Some(r)) if r.starts_with("/invocation/") => {
                let tail = &r["/invocation/".len()..];
                match tail.split_once('/') {
                    Some((id, "response")) if !id.is_empty() => {
                        shared.answer(id, Kind::Response, req.body, at);
                        response(202, &[], ACCEPTED)
                    }
                    Some((id, "error")) if !id.is_empty() => {
                        shared.answer(id, Kind::Error, req.body, at);
                        response(202, &[], ACCEPTED)
                    }
                    _ => response(404, &[], br#"{"errorMessage":"unknown path"}"#),
                }
            }
            ("POST", None) if path == "/invoke" => match shared.call(req.body).await {
                (_, Some(a)) => response(if a.kind == Kind::Response { 200 } else { 500 }, &[], &a.body),
                (_, None) => response(500, &[], br#"{"errorType":"Timeout","errorMessage":"no answer in time"}"#),
            },
            ("POST", None) if invoke::is_invoke_path(&path) => invoke::serve(&shared, req).await,
            _ => response(404, &[], br#"{"errorMessage":"unknown path"}"#),
        };
        if write_message(&mut w, &reply, true).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
