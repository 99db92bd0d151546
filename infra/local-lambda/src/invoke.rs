//! Lambda's `Invoke`, `POST /2015-03-31/functions/<FunctionName>/invocations`: served by every
//! [`RuntimeApi`](crate::RuntimeApi) for its one function, and by an [`InvokeRouter`] for several.
//!
//! What it answers follows Lambda's `Invoke` API reference:
//!
//! * `FunctionName` (percent-encoded in the path) may be the function's name, its full ARN
//!   (`arn:aws:lambda:REGION:ACCOUNT:function:NAME`) or partial ARN (`ACCOUNT:function:NAME`),
//!   each with the qualifier `:$LATEST` or none; the `Qualifier` query parameter may also say
//!   `$LATEST`. Anything else (another name, region or account, a version or an alias) is
//!   `404`, header `x-amzn-ErrorType: ResourceNotFoundException`, body
//!   `{"Type":"User","Message":"Function not found: <arn>"}`, the ARN in the region of the
//!   request's SigV4 credential scope when it names none (the endpoint's region, for Lambda).
//! * `X-Amz-Invocation-Type: RequestResponse` (or no header) queues the invocation and waits for
//!   the answer: `200` with the function's response as the body. A function that posted to
//!   `.../error` also gets `200`, with its error document as the body and
//!   `X-Amz-Function-Error: Unhandled`: Lambda's status reflects whether it ran the function, not
//!   what the function said. No answer within [`Config::timeout`](crate::Config::timeout) is
//!   the same with the body Lambda writes for a timed-out invocation,
//!   `{"errorType":"Sandbox.Timedout","errorMessage":"RequestId: <id> Error: Task timed out after
//!   N.NN seconds"}` (the shape real invocations report and Lambda's runtime interface emulator
//!   writes; the invocation is withdrawn if the function has not taken it). These answers carry
//!   `X-Amz-Executed-Version: $LATEST`.
//! * `Event` queues the invocation and answers `202` with an empty body at once.
//! * `DryRun` queues nothing and answers `204`.
//! * Any other invocation type: `400` `InvalidParameterValueException`.
//!
//! Every answer carries `x-amzn-RequestId`; for `RequestResponse` and `Event` it is the
//! invocation's request id, the function's `Lambda-Runtime-Aws-Request-Id` (so an `Event`'s
//! answer can be read back with [`RuntimeApi::answer`](crate::RuntimeApi::answer)). Not served:
//! `X-Amz-Log-Type: Tail` (no `X-Amz-Log-Result`), client context, versions and aliases.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use capblock_http1::{Message, exchange, read_message, write_message};
use serde_json::json;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::{ACCOUNT, Kind, Shared, response, serve_connections};

/// The path of Lambda's `Invoke` up to the function name.
pub const INVOKE_PATH: &str = "/2015-03-31/functions/";

const INVOCATIONS: &str = "/invocations";

/// The region named when neither the function name nor the request says one.
const DEFAULT_REGION: &str = "us-east-1";

/// The `Invoke` path for `function_name` (a name or an ARN), percent-encoded as the SDK sends it.
pub fn invoke_path(function_name: &str) -> String {
    let mut encoded = String::with_capacity(function_name.len() * 3);
    for b in function_name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{INVOKE_PATH}{encoded}{INVOCATIONS}")
}

pub(crate) fn is_invoke_path(path: &str) -> bool {
    path.starts_with(INVOKE_PATH) && path.ends_with(INVOCATIONS)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The function one `Invoke` names: `FunctionName` taken apart, plus the `Qualifier` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    name: String,
    region: Option<String>,
    account: Option<String>,
    qualifier: Option<String>,
}

impl Target {
    /// `None` if `req` is not an `Invoke` request.
    fn of(req: &Message) -> Option<Target> {
        let path = req.path();
        let encoded = path.strip_prefix(INVOKE_PATH)?.strip_suffix(INVOCATIONS)?;
        if encoded.is_empty() || encoded.contains('/') {
            return None;
        }
        let mut target = Target::parse(&percent_decode(encoded));
        let query = req.start.split_whitespace().nth(1).and_then(|t| t.split_once('?')).map(|(_, q)| q);
        let qualifier = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|kv| kv.strip_prefix("Qualifier="))
            .map(percent_decode);
        if let Some(q) = qualifier {
            // Both given and different: no such function either way.
            match &target.qualifier {
                Some(own) if own != &q => target.qualifier = Some(format!("{own}|{q}")),
                _ => target.qualifier = Some(q),
            }
        }
        Some(target)
    }

    /// A name, a full ARN or a partial ARN, with an optional qualifier; what fits none of these
    /// is kept whole as the name (and so names no function).
    fn parse(name: &str) -> Target {
        let parts: Vec<&str> = name.split(':').collect();
        let own = |s: &str| Some(s.to_string());
        let (name, region, account, qualifier) = match parts[..] {
            ["arn", _, "lambda", region, account, "function", name] => (name, own(region), own(account), None),
            ["arn", _, "lambda", region, account, "function", name, q] => (name, own(region), own(account), own(q)),
            [account, "function", name] => (name, None, own(account), None),
            [account, "function", name, q] => (name, None, own(account), own(q)),
            [name, q] => (name, None, None, own(q)),
            _ => (name, None, None, None),
        };
        Target { name: name.to_string(), region, account, qualifier }
    }

    /// Whether this names `function` (a full ARN, as in [`Config::function_arn`](crate::Config)).
    fn names(&self, function: &Target) -> bool {
        self.name == function.name
            && self.region.as_ref().is_none_or(|r| Some(r) == function.region.as_ref())
            && self.account.as_ref().is_none_or(|a| Some(a) == function.account.as_ref())
            && self.qualifier.as_deref().is_none_or(|q| q == "$LATEST")
    }

    /// The ARN Lambda's "Function not found" names: the given parts, the rest by default.
    fn arn(&self, default_region: &str) -> String {
        let region = self.region.as_deref().unwrap_or(default_region);
        let account = self.account.as_deref().unwrap_or(ACCOUNT);
        let qualifier = self.qualifier.as_ref().map(|q| format!(":{q}")).unwrap_or_default();
        format!("arn:aws:lambda:{region}:{account}:function:{}{qualifier}", self.name)
    }
}

/// The region of the request's SigV4 credential scope
/// (`Authorization: AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/lambda/aws4_request, ...`).
fn signed_region(req: &Message) -> Option<&str> {
    let auth = req.header("authorization")?;
    let credential = auth.split_once("Credential=")?.1.split([',', ' ']).next()?;
    credential.split('/').nth(2).filter(|r| !r.is_empty())
}

/// Lambda's error answer: `x-amzn-ErrorType` names the exception, the body its message.
fn lambda_error(status: u16, error_type: &str, message: &str) -> Message {
    let kind = if status < 500 { "User" } else { "Service" };
    let body = json!({"Type": kind, "Message": message}).to_string();
    response(status, &[("x-amzn-ErrorType", error_type.to_string())], body.as_bytes())
}

fn not_found(target: &Target, req: &Message, default_region: &str) -> Message {
    let region = signed_region(req).unwrap_or(default_region);
    lambda_error(404, "ResourceNotFoundException", &format!("Function not found: {}", target.arn(region)))
}

fn unknown_path() -> Message {
    response(404, &[], br#"{"errorMessage":"unknown path"}"#)
}

/// `Invoke` on a [`RuntimeApi`](crate::RuntimeApi) (see the module docs).
pub(crate) async fn serve(shared: &Shared, req: Message) -> Message {
    let function = Target::parse(&shared.config.function_arn);
    let own_region = function.region.clone().unwrap_or_else(|| DEFAULT_REGION.to_string());
    let Some(target) = Target::of(&req) else { return unknown_path() };
    if !target.names(&function) {
        return not_found(&target, &req, &own_region);
    }
    let version = ("X-Amz-Executed-Version", "$LATEST".to_string());
    match req.header("x-amz-invocation-type").unwrap_or("RequestResponse") {
        "RequestResponse" => {
            let (id, answer) = shared.call(req.body).await;
            let request_id = ("x-amzn-RequestId", id.clone());
            let unhandled = ("X-Amz-Function-Error", "Unhandled".to_string());
            match answer {
                Some(a) if a.kind == Kind::Response => response(200, &[request_id, version], &a.body),
                Some(a) => response(200, &[request_id, version, unhandled], &a.body),
                None => {
                    let secs = shared.config.timeout.as_secs_f64();
                    let body = json!({
                        "errorType": "Sandbox.Timedout",
                        "errorMessage": format!("RequestId: {id} Error: Task timed out after {secs:.2} seconds"),
                    });
                    response(200, &[request_id, version, unhandled], body.to_string().as_bytes())
                }
            }
        }
        "Event" => {
            let id = shared.enqueue(req.body);
            response(202, &[("x-amzn-RequestId", id)], b"")
        }
        "DryRun" => response(204, &[("x-amzn-RequestId", uuid::Uuid::new_v4().to_string())], b""),
        other => lambda_error(
            400,
            "InvalidParameterValueException",
            &format!("Invalid invocation type {other:?}: expected RequestResponse, Event or DryRun"),
        ),
    }
}

/// Lambda's `Invoke` for several functions on one endpoint (what `AWS_ENDPOINT_URL_LAMBDA`
/// points at when a function calls others): each call goes, unchanged, to the
/// [`RuntimeApi`](crate::RuntimeApi) registered under the function's name, and its answer comes
/// back unchanged (status, headers, body). A name with no route gets Lambda's `404`
/// `ResourceNotFoundException`. The router picks the route by name only; the region, account and
/// qualifier are checked by the [`RuntimeApi`](crate::RuntimeApi), so a route's name must be its
/// function's name. Listens where it is told (loopback in capblock); stops when dropped.
pub struct InvokeRouter {
    addr: SocketAddr,
    routes: Arc<BTreeMap<String, String>>,
    task: JoinHandle<()>,
}

impl Drop for InvokeRouter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InvokeRouter {
    /// Binds `listen` and starts serving on the current tokio runtime. `routes`: function name ->
    /// base URL of its [`RuntimeApi`](crate::RuntimeApi) (`http://host:port`, its
    /// [`url`](crate::RuntimeApi::url)).
    pub async fn start(listen: SocketAddr, routes: BTreeMap<String, String>) -> io::Result<InvokeRouter> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let routes = Arc::new(routes);
        let shared = routes.clone();
        let task = tokio::spawn(serve_connections(listener, move |sock| route_connection(sock, shared.clone())));
        Ok(InvokeRouter { addr, routes, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://host:port`, the value for `AWS_ENDPOINT_URL_LAMBDA`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn routes(&self) -> &BTreeMap<String, String> {
        &self.routes
    }
}

async fn route_connection(sock: TcpStream, routes: Arc<BTreeMap<String, String>>) {
    let _ = sock.set_nodelay(true);
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    while let Ok(Some(req)) = read_message(&mut r, false).await {
        let reply = match Target::of(&req) {
            Some(target) if req.method() == "POST" => match routes.get(&target.name) {
                Some(base) => forward(base, req).await,
                None => not_found(&target, &req, DEFAULT_REGION),
            },
            _ => unknown_path(),
        };
        if write_message(&mut w, &reply, true).await.is_err() {
            return;
        }
    }
}

/// Sends `req` to the function's Runtime API at `base` and returns its answer as it came.
async fn forward(base: &str, mut req: Message) -> Message {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    req.headers.retain(|(k, _)| k != "host");
    req.headers.push(("host".into(), host.to_string()));
    match exchange(host, &req).await {
        Ok(answer) => answer,
        // The function's endpoint is gone: Lambda could not run it.
        Err(e) => lambda_error(500, "ServiceException", &format!("cannot reach the function at {base}: {e}")),
    }
}
