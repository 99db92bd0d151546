//! The HTTP/1 server. hyper is driven directly (one task per connection) so that a call can be
//! left unanswered and its connection closed: that is how timeouts and "the purchase went
//! through but the response was lost" are simulated.
//!
//! A call EC2 has received is done whatever its caller does next: once admitted (counted), the
//! rest of it (latency, faults, the action) runs in a task of its own, which a caller that
//! hangs up cannot cancel. EC2 completes a purchase it received even if the client is killed
//! while waiting for the answer; a simulator that dropped it would be kinder than EC2.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
#[cfg(test)]
use tokio::net::TcpStream;
use tokio::sync::{Notify, oneshot};

use crate::actions;
use crate::control;
use crate::faults::Fault;
use crate::sts::Sts;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::region;
use crate::wire::xml::envelope;
use crate::world::World;

pub struct App {
    world: Mutex<World>,
    /// Where the accounts of temporary keys are asked (`--sts-endpoint`), if anywhere.
    sts: Option<Sts>,
    /// Calls held in the network (`[behaviour] hold_actions`): their action and the sender
    /// that delivers (`true`) or loses (`false`) them.
    held: Mutex<Vec<(String, oneshot::Sender<bool>)>>,
}

impl App {
    pub fn new(world: World) -> Arc<Self> {
        Self::with_sts(world, None)
    }

    pub fn with_sts(world: World, sts: Option<Sts>) -> Arc<Self> {
        Arc::new(Self { world: Mutex::new(world), sts, held: Mutex::new(Vec::new()) })
    }

    /// A panic while holding the lock must not take the whole simulator down with it.
    fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn held(&self) -> MutexGuard<'_, Vec<(String, oneshot::Sender<bool>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many calls of each action are held now.
    fn held_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for (action, tx) in self.held().iter() {
            if !tx.is_closed() {
                *counts.entry(action.clone()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Lets every held call go on to EC2 (`deliver`) or loses it in the network; how many.
    fn release(&self, deliver: bool) -> usize {
        let held = std::mem::take(&mut *self.held());
        held.into_iter().filter_map(|(_, tx)| tx.send(deliver).ok()).count()
    }
}

pub async fn serve(listener: TcpListener, app: Arc<App>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // E.g. out of file descriptors: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let kill = Arc::new(Notify::new());
            let svc_kill = kill.clone();
            let svc = service_fn(move |req| {
                let app = app.clone();
                let kill = svc_kill.clone();
                async move { Ok::<_, Infallible>(route(app, req, kill).await) }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                r = conn => if let Err(e) = r { tracing::debug!(error = %e, "connection ended") },
                () = kill.notified() => tracing::debug!("connection dropped without a response"),
            }
        });
    }
}

type Resp = Response<Full<Bytes>>;

fn reply(status: u16, content_type: &str, body: String) -> Resp {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"internal"))))
}

async fn route(app: Arc<App>, req: Request<Incoming>, kill: Arc<Notify>) -> Resp {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let auth = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return reply(400, "text/plain", format!("could not read body: {e}")),
    };

    match (method.as_str(), path.trim_end_matches('/')) {
        ("GET", "/_sim/held") => {
            let held = serde_json::json!({ "held": app.held_counts() });
            return reply(200, "application/json", held.to_string());
        }
        ("POST", "/_sim/release") => {
            // {"deliver": true} (the default): the held calls reach EC2; false: they are lost.
            let deliver = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("deliver").and_then(serde_json::Value::as_bool))
                .unwrap_or(true);
            let released = serde_json::json!({ "released": app.release(deliver), "delivered": deliver });
            return reply(200, "application/json", released.to_string());
        }
        _ => {}
    }
    if path == "/_sim" || path.starts_with("/_sim/") {
        let r = control::handle(&mut app.lock(), &method, &path, &body);
        return reply(r.status, r.content_type, r.body);
    }
    // EC2's Query protocol posts to `/`; RAM's restJson1 names its operation in the path.
    if !path.is_empty() && path != "/" {
        return ram(&app, &method, &path, &query, auth.as_deref(), &body);
    }
    let call = Call::parse(&method, &query, auth.as_deref(), &body);
    if !in_network(&app, &call).await {
        // Lost before EC2 received it: the caller never hears back.
        kill.notify_one();
        return std::future::pending().await;
    }
    // Received: done to the end in a task of its own, whatever the caller does meanwhile.
    let answer = tokio::spawn(received(app, call))
        .await
        .unwrap_or_else(|e| Answer::Reply(reply(500, "text/plain", format!("the simulator failed on this call: {e}"))));
    match answer {
        Answer::Reply(r) => r,
        Answer::Hang(secs) => hang(kill, secs).await,
    }
}

/// An EC2 call as the Query protocol carries it.
struct Call {
    region: String,
    /// The access key id that signed it (`iam_denials` refuse actions per key).
    caller: Option<String>,
    action: String,
    params: Params,
}

impl Call {
    fn parse(method: &str, query: &str, auth: Option<&str>, body: &[u8]) -> Call {
        let mut params = Params::parse(query);
        if method == "POST" {
            params.extend(&String::from_utf8_lossy(body));
        }
        let region = region::from_authorization(auth, params.get("X-Amz-Credential"))
            .unwrap_or_else(|| region::DEFAULT_REGION.to_string());
        let caller = region::access_key(auth, params.get("X-Amz-Credential"));
        let action = params.get("Action").unwrap_or("").to_string();
        Call { region, caller, action, params }
    }
}

/// What the connection does with a received call: answer it, or say nothing for `secs` and
/// close (a timeout, or an answer lost on the way back).
enum Answer {
    Reply(Resp),
    Hang(u64),
}

/// Whether `call` reaches EC2: at once, or when a test releases it if its action (and, with
/// `hold_accounts`, its caller's account) is held. The hold is decided and the call queued under
/// the world's lock, so a test that lifts the hold and then releases never strands a call that
/// was on its way in.
async fn in_network(app: &App, call: &Call) -> bool {
    let by_account = {
        let w = app.lock();
        if !w.behaviour.hold_actions.contains(&call.action) {
            return true;
        }
        !w.behaviour.hold_accounts.is_empty()
    };
    // Resolved outside the lock (STS may be asked over the network).
    let account = match by_account {
        true => caller_account(app, call.caller.as_deref()).await,
        false => None,
    };
    let rx = {
        let w = app.lock();
        let account = account.unwrap_or_else(|| w.scenario.account_id.clone());
        let b = &w.behaviour;
        let holds =
            b.hold_actions.contains(&call.action) && (b.hold_accounts.is_empty() || b.hold_accounts.contains(&account));
        if !holds {
            return true;
        }
        let (tx, rx) = oneshot::channel();
        app.held().push((call.action.clone(), tx));
        tracing::info!(region = %call.region, action = %call.action, %account, "ec2 call held in the network");
        rx
    };
    rx.await.unwrap_or(false)
}

/// A RAM call (see `ram`): the region from SigV4 as for EC2, a JSON answer with RAM's headers.
fn ram(app: &App, method: &str, path: &str, query: &str, auth: Option<&str>, body: &[u8]) -> Resp {
    let presigned = crate::wire::query::Params::parse(query);
    let region = region::from_authorization(auth, presigned.get("X-Amz-Credential"))
        .unwrap_or_else(|| region::DEFAULT_REGION.to_string());
    let (r, request_id) = {
        let mut w = app.lock();
        let request_id = w.request_id();
        (crate::ram::handle(&mut w, &region, method, path, query, body), request_id)
    };
    let mut b = Response::builder()
        .status(r.status)
        .header("content-type", "application/json")
        .header("x-amzn-RequestId", request_id);
    if let Some(code) = &r.error_type {
        b = b.header("x-amzn-ErrorType", code);
    }
    b.body(Full::new(Bytes::from(r.body))).unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"internal"))))
}

/// Waits `secs`, then closes the connection without an answer; never returns.
async fn hang(kill: Arc<Notify>, secs: u64) -> Resp {
    tokio::time::sleep(Duration::from_secs(secs)).await;
    kill.notify_one();
    std::future::pending().await
}

/// A call EC2 received: counted, delayed, maybe failed, then done. Runs in a task of its own.
async fn received(app: Arc<App>, call: Call) -> Answer {
    let Call { region, caller, action, params } = call;
    let (request_id, fault, latency_ms, timeout_secs) = {
        let mut w = app.lock();
        (w.request_id(), w.admit(&region, &action), w.behaviour.latency_ms, w.behaviour.timeout_secs)
    };
    if latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(latency_ms)).await;
    }
    let error = |e: ApiError| {
        tracing::info!(%region, %action, status = e.status, code = %e.code, "ec2 call failed");
        Answer::Reply(ec2_reply(&app, e.status, e.to_xml(&request_id)))
    };
    match fault {
        Some(Fault::Hang) => {
            tracing::info!(%region, %action, timeout_secs, "ec2 call will time out");
            return Answer::Hang(timeout_secs);
        }
        Some(Fault::Throttled) => return error(ApiError::throttled()),
        Some(Fault::InternalError) => return error(ApiError::internal()),
        None => {}
    }

    // Whose describe limit a DescribeCapacityBlockOfferings spends: the caller's account,
    // resolved here, outside the world's lock (STS is asked over the network).
    let account = match action.as_str() {
        "DescribeCapacityBlockOfferings" => caller_account(&app, caller.as_deref()).await,
        _ => None,
    };
    let result = {
        let mut w = app.lock();
        actions::dispatch_for(&mut w, &region, caller.as_deref(), account.as_deref(), &action, &params)
    };
    match result {
        Ok(out) if out.drop_response => {
            tracing::info!(%region, %action, timeout_secs, "action done, response dropped");
            Answer::Hang(timeout_secs)
        }
        Ok(out) => {
            tracing::info!(%region, %action, "ec2 call ok");
            Answer::Reply(ec2_reply(&app, 200, envelope(&action, &request_id, &out.body)))
        }
        Err(e) => error(e),
    }
}

/// An EC2 answer, with the `Date` header of EC2's clock: the simulated one. (A client that
/// checks its own clock against AWS's reads it here.)
fn ec2_reply(app: &App, status: u16, body: String) -> Resp {
    let mut r = reply(status, "text/xml;charset=UTF-8", body);
    if let Ok(v) = hyper::header::HeaderValue::from_str(&http_date(app.lock().now())) {
        r.headers_mut().insert(hyper::header::DATE, v);
    }
    r
}

/// RFC 9110's IMF-fixdate, as HTTP's `Date` header carries it.
fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// The account of the caller with the access key id `key`, as AWS resolves it from the
/// credentials: `caller_accounts`'s entry for the key; else, for a temporary key (`ASIA`, what
/// STS AssumeRole issues) and an STS to ask, the account of the role it is a session of; else
/// `None`, the simulated account (no key, long-term keys, keys nobody knows, STS failing).
async fn caller_account(app: &App, key: Option<&str>) -> Option<String> {
    let key = key?;
    let listed = app.lock().behaviour.caller_account(key).map(str::to_string);
    if listed.is_some() {
        return listed;
    }
    match &app.sts {
        Some(sts) if key.starts_with("ASIA") => sts.account_of(key).await,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    /// One EC2 call as the server takes it: `query` as the form, signed by `key` in us-west-2.
    async fn call(app: &Arc<App>, key: Option<&str>, query: &str) -> (u16, String) {
        let auth = key.map(|k| {
            format!(
                "AWS4-HMAC-SHA256 Credential={k}/20261201/us-west-2/ec2/aws4_request, SignedHeaders=host, Signature=x"
            )
        });
        let Answer::Reply(resp) = received(app.clone(), Call::parse("GET", query, auth.as_deref(), b"")).await else {
            panic!("no answer to {query}");
        };
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn the_caller_is_the_access_key_and_throttling_comes_first() {
        let scenario = "[behaviour]\nthrottle = { rate_per_sec = 0.001, burst = 3 }\n\
                        iam_denials = [{ access_key = \"ASIADENIED\", action = \"DescribeCapacityReservations\" }]";
        let app = App::new(World::new(Scenario::parse(scenario).unwrap()));
        let action = "Action=DescribeCapacityReservations&Version=2016-11-15";
        let (status, body) = call(&app, Some("ASIADENIED"), action).await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("<Code>UnauthorizedOperation</Code>"), "{body}");
        assert!(body.contains("assumed-role/role-ASIADENIED/ASIADENIED"), "{body}");
        assert_eq!(call(&app, Some("ASIAALLOWED"), action).await.0, 200);
        // A presigned call names its key in X-Amz-Credential.
        let presigned = format!("{action}&X-Amz-Credential=ASIADENIED%2F20261201%2Fus-west-2%2Fec2%2Faws4_request");
        assert_eq!(call(&app, None, &presigned).await.0, 403);
        // The bucket (3 calls) is empty: a denied caller is throttled like any other.
        let (status, body) = call(&app, Some("ASIADENIED"), action).await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("<Code>RequestLimitExceeded</Code>"), "{body}");
        assert_eq!(app.lock().faults.unauthorized, 2);
    }

    #[tokio::test]
    async fn ram_calls_take_their_region_from_sigv4_and_answer_with_rams_headers() {
        let app = App::new(World::new(Scenario::parse("").unwrap()));
        let auth =
            "AWS4-HMAC-SHA256 Credential=AKID/20261201/eu-west-1/ram/aws4_request, SignedHeaders=host, Signature=x";
        let resp = ram(&app, "POST", "/createresourceshare", "", Some(auth), br#"{"name": "s"}"#);
        assert_eq!(resp.status().as_u16(), 200);
        assert!(resp.headers().get("x-amzn-RequestId").is_some());
        assert!(resp.headers().get("x-amzn-ErrorType").is_none());
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(v["resourceShare"]["resourceShareArn"].as_str().unwrap().starts_with("arn:aws:ram:eu-west-1:"), "{v}");
        let resp = ram(&app, "POST", "/getresourceshares", "", Some(auth), b"{}");
        assert_eq!(resp.status().as_u16(), 400);
        assert_eq!(resp.headers()["x-amzn-ErrorType"], "InvalidParameterException");
        assert_eq!(resp.headers()["content-type"], "application/json");
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(v["message"].as_str().unwrap().contains("not a valid resource owner"), "{v}");
        assert_eq!(app.lock().calls_by_region["eu-west-1"]["ram:GetResourceShares"], 1);
    }

    const SIM: &str = "111122223333";
    const MEMBER: &str = "444455556666";
    const OTHER_MEMBER: &str = "777788889999";
    const DESCRIBE: &str = "Action=DescribeCapacityBlockOfferings&Version=2016-11-15&CapacityDurationHours=24";
    const LIMITED: &str = "[behaviour]\ndescribe_limit = { burst = 1, refill_secs = 3600.0 }\n";

    /// The describe answer's status, or its error code.
    async fn describe(app: &Arc<App>, key: Option<&str>) -> String {
        let (status, body) = call(app, key, DESCRIBE).await;
        match status {
            200 => "200".into(),
            _ => body.split("<Code>").nth(1).and_then(|r| r.split('<').next()).unwrap_or(&body).to_string(),
        }
    }

    const REFUSED: &str = "CapacityBlockDescribeLimitExceeded";

    fn by_account(app: &App) -> serde_json::Value {
        serde_json::to_value(app.lock().describe_calls_by_account()).unwrap()
    }

    #[tokio::test]
    async fn caller_accounts_give_a_key_the_limit_of_its_account() {
        let scenario = format!("{LIMITED}caller_accounts = {{ AKIAEXAMPLE1 = \"{MEMBER}\" }}");
        let app = App::new(World::new(Scenario::parse(&scenario).unwrap()));
        assert_eq!(describe(&app, Some("AKIAEXAMPLE1")).await, "200");
        assert_eq!(describe(&app, Some("AKIAEXAMPLE1")).await, REFUSED, "the member's burst of 1 is spent");
        // The simulated account's bucket is untouched: the first of its callers is served.
        assert_eq!(describe(&app, Some("AKIANOTLISTED")).await, "200", "a key not listed: the simulated account");
        assert_eq!(describe(&app, Some("ASIANOSTS")).await, REFUSED, "a temporary key without an STS: the same");
        assert_eq!(
            by_account(&app),
            serde_json::json!({SIM: {"calls": 2, "refused": 1}, MEMBER: {"calls": 2, "refused": 1}})
        );
        // Changed at run time: the key is now the simulated account's (spent), another one's
        // bucket is its own.
        let body = format!(r#"{{"caller_accounts": {{"AKIAEXAMPLE1": "{SIM}", "AKIANOTLISTED": "{OTHER_MEMBER}"}}}}"#);
        assert_eq!(crate::control::handle(&mut app.lock(), "POST", "/_sim/behaviour", body.as_bytes()).status, 200);
        assert_eq!(describe(&app, Some("AKIAEXAMPLE1")).await, REFUSED);
        assert_eq!(describe(&app, Some("AKIANOTLISTED")).await, "200");
    }

    /// `hold_accounts` narrows `hold_actions` to those callers' accounts: the member's call
    /// waits, the simulated account's goes on; lifting the hold and releasing lets it through.
    #[tokio::test]
    async fn an_account_scoped_hold_keeps_only_that_accounts_calls() {
        let scenario = format!("caller_accounts = {{ AKIAEXAMPLE1 = \"{MEMBER}\" }}");
        let app = App::new(World::new(Scenario::parse(&format!("[behaviour]\n{scenario}")).unwrap()));
        let body = format!(r#"{{"hold_actions": ["DescribeCapacityBlockOfferings"], "hold_accounts": ["{MEMBER}"]}}"#);
        assert_eq!(crate::control::handle(&mut app.lock(), "POST", "/_sim/behaviour", body.as_bytes()).status, 200);
        let signed = |key: &str| {
            let auth = format!(
                "AWS4-HMAC-SHA256 Credential={key}/20261201/us-west-2/ec2/aws4_request, SignedHeaders=host, Signature=x"
            );
            Call::parse("GET", DESCRIBE, Some(&auth), b"")
        };
        assert!(in_network(&app, &signed("AKIANOTLISTED")).await, "the simulated account's call is not held");
        let member = tokio::spawn({
            let app = app.clone();
            let call = signed("AKIAEXAMPLE1");
            async move { in_network(&app, &call).await }
        });
        while app.held_counts().is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(app.held_counts()["DescribeCapacityBlockOfferings"], 1);
        let lift = br#"{"hold_actions": [], "hold_accounts": []}"#;
        assert_eq!(crate::control::handle(&mut app.lock(), "POST", "/_sim/behaviour", lift).status, 200);
        assert_eq!(app.release(true), 1);
        assert!(member.await.unwrap(), "released: delivered");
        assert!(in_network(&app, &signed("AKIAEXAMPLE1")).await, "the hold lifted");
    }

    /// A moto-like STS on 127.0.0.1. GetCallerIdentity answers, by the key in the request's
    /// credential: ASIAMEMBER... a session of a role in MEMBER; ASIABROKEN... HTTP 500;
    /// ASIASLOW... nothing (it holds the connection); any other key moto's default user. Returns
    /// its URL and the requests it got.
    async fn fake_sts() -> (String, Arc<Mutex<Vec<capblock_http1::Message>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut read = tokio::io::BufReader::new(read);
                    let Ok(Some(req)) = capblock_http1::read_message(&mut read, false).await else { return };
                    let key = region::access_key(req.header("authorization"), None).unwrap_or_default();
                    log.lock().unwrap().push(req);
                    let (status, body) = if key.starts_with("ASIASLOW") {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    } else if key.starts_with("ASIABROKEN") {
                        (500, "<ErrorResponse><Error><Code>InternalFailure</Code></Error></ErrorResponse>".to_string())
                    } else if key.starts_with("ASIAMEMBER") {
                        let arn = format!("arn:aws:sts::{MEMBER}:assumed-role/capblock-watch-dev/scan");
                        (200, crate::sts::tests::identity(MEMBER, &arn))
                    } else {
                        (200, crate::sts::tests::identity("123456789012", "arn:aws:sts::123456789012:user/moto"))
                    };
                    let answer = capblock_http1::Message::response(status, body.as_bytes());
                    let _ = capblock_http1::write_message(&mut write, &answer, false).await;
                });
            }
        });
        (url, seen)
    }

    fn sts_app(scenario: &str, url: &str) -> Arc<App> {
        let sts = Sts::new(url).unwrap().with_timeout(Duration::from_millis(300));
        App::with_sts(World::new(Scenario::parse(scenario).unwrap()), Some(sts))
    }

    /// The keys the fake STS was asked about, in order.
    fn asked(seen: &Mutex<Vec<capblock_http1::Message>>) -> Vec<String> {
        let seen = seen.lock().unwrap();
        seen.iter().map(|m| region::access_key(m.header("authorization"), None).unwrap_or_default()).collect()
    }

    #[tokio::test]
    async fn temporary_keys_are_resolved_through_sts_once_each() {
        let (url, seen) = fake_sts().await;
        let app = sts_app(&format!("{LIMITED}caller_accounts = {{ ASIALISTED = \"{OTHER_MEMBER}\" }}"), &url);
        // A session of a member role: the member's bucket, asked once for the key.
        assert_eq!(describe(&app, Some("ASIAMEMBER1")).await, "200");
        assert_eq!(describe(&app, Some("ASIAMEMBER1")).await, REFUSED, "the member's burst of 1 is spent");
        assert_eq!(asked(&seen), ["ASIAMEMBER1"], "the answer is kept");
        {
            let seen = seen.lock().unwrap();
            let req = &seen[0];
            assert_eq!((req.method(), req.path()), ("POST", "/"));
            assert_eq!(req.body, b"Action=GetCallerIdentity&Version=2011-06-15");
            assert_eq!(
                req.header("authorization"),
                Some(
                    "AWS4-HMAC-SHA256 Credential=ASIAMEMBER1/20260101/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0"
                )
            );
            assert_eq!(req.header("content-type"), Some("application/x-www-form-urlencoded; charset=utf-8"));
        }
        // Another session of the same account shares its bucket.
        assert_eq!(describe(&app, Some("ASIAMEMBER2")).await, REFUSED);
        // Moto's default user (a key it did not issue): the simulated account, asked once too.
        assert_eq!(describe(&app, Some("ASIAUSER")).await, "200");
        assert_eq!(describe(&app, Some("ASIAUSER")).await, REFUSED, "the simulated account's burst is spent");
        assert_eq!(asked(&seen), ["ASIAMEMBER1", "ASIAMEMBER2", "ASIAUSER"]);
        // Never asked: a long-term key, no key, a key caller_accounts lists, another action.
        assert_eq!(describe(&app, Some("AKIALONGTERM")).await, REFUSED);
        assert_eq!(describe(&app, None).await, "200", "unsigned: us-east-1, the simulated account's bucket there");
        assert_eq!(describe(&app, Some("ASIALISTED")).await, "200", "its own account's bucket");
        let reservations = "Action=DescribeCapacityReservations&Version=2016-11-15";
        assert_eq!(call(&app, Some("ASIANEWSESSION"), reservations).await.0, 200);
        assert_eq!(asked(&seen).len(), 3);
        assert_eq!(
            by_account(&app),
            serde_json::json!({
                SIM: {"calls": 4, "refused": 2},
                MEMBER: {"calls": 3, "refused": 2},
                OTHER_MEMBER: {"calls": 1, "refused": 0},
            })
        );
        // The call log names each call's account.
        let (_, log) = {
            let r = crate::control::handle(&mut app.lock(), "GET", "/_sim/describe/calls", b"");
            (r.status, serde_json::from_str::<serde_json::Value>(&r.body).unwrap())
        };
        let accounts: Vec<&str> =
            log["calls"].as_array().unwrap().iter().map(|c| c["account"].as_str().unwrap()).collect();
        assert_eq!(accounts, [MEMBER, MEMBER, MEMBER, SIM, SIM, SIM, SIM, OTHER_MEMBER]);
        assert_eq!(log["calls"][0]["region"], "us-west-2");
        assert_eq!(log["calls"][6]["region"], "us-east-1");
    }

    #[tokio::test]
    async fn when_sts_fails_the_caller_is_the_simulated_account_and_sts_is_asked_again() {
        let (url, seen) = fake_sts().await;
        let app = sts_app("[behaviour]\ndescribe_limit = { burst = 3, refill_secs = 3600.0 }", &url);
        // An error answer: the simulated account, and not kept.
        assert_eq!(describe(&app, Some("ASIABROKEN")).await, "200");
        assert_eq!(describe(&app, Some("ASIABROKEN")).await, "200");
        assert_eq!(asked(&seen), ["ASIABROKEN", "ASIABROKEN"]);
        // No answer: asked again, then given up after ATTEMPTS time limits (300 ms here, 10 s by
        // default); an error answer above was asked once.
        let started = std::time::Instant::now();
        assert_eq!(describe(&app, Some("ASIASLOW")).await, "200");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(8), "{took:?}");
        assert_eq!(asked(&seen).len(), 2 + crate::sts::ATTEMPTS as usize);
        assert_eq!(describe(&app, Some("ASIABROKEN")).await, REFUSED, "3 calls spent the simulated account's burst");
        assert_eq!(by_account(&app), serde_json::json!({SIM: {"calls": 4, "refused": 1}}));
        // Nobody listening: the simulated account too.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gone = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let app = sts_app(LIMITED, &gone);
        assert_eq!(describe(&app, Some("ASIAMEMBER1")).await, "200");
        assert_eq!(describe(&app, Some("ASIAMEMBER1")).await, REFUSED);
        assert_eq!(by_account(&app), serde_json::json!({SIM: {"calls": 2, "refused": 1}}));
    }

    /// The offering ids of a DescribeCapacityBlockOfferings answer, in order.
    fn offering_ids(body: &str) -> Vec<String> {
        body.split("<capacityBlockOfferingId>")
            .skip(1)
            .filter_map(|r| r.split('<').next())
            .map(str::to_string)
            .collect()
    }

    fn state(app: &App) -> serde_json::Value {
        serde_json::from_str(&crate::control::handle(&mut app.lock(), "GET", "/_sim/state", b"").body).unwrap()
    }

    #[tokio::test]
    async fn a_member_sessions_offering_ids_under_each_reading_through_the_server() {
        let (url, _) = fake_sts().await;
        let scenario = "[clock]\nstart = \"2026-12-01T00:00:00Z\"\n\
             [behaviour]\ndescribe_limit = false\nsame_day_offerings = false\n\
             offering_ids_across_accounts = \"per_account\"\n\
             [[market]]\nregion = \"us-west-2\"\ninstance_type = \"p5.48xlarge\"\nstart_days = [1, 2]\n\
             price = [ { from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"4.10\" } ]";
        let app = sts_app(scenario, &url);
        // The capacity account (a long-term key: the simulated account) and a session of a member
        // role (STS: MEMBER) ask the same question.
        let (status, own) = call(&app, Some("AKIACAPACITY"), DESCRIBE).await;
        assert_eq!(status, 200, "{own}");
        let own = offering_ids(&own);
        let (_, member) = call(&app, Some("ASIAMEMBER1"), DESCRIBE).await;
        let member = offering_ids(&member);
        assert_eq!((own.len(), member.len()), (2, 2), "{own:?} {member:?}");
        assert!(member.iter().all(|id| !own.contains(id)), "per_account: the member's own ids");
        assert_eq!(offering_ids(&call(&app, Some("ASIAMEMBER2"), DESCRIBE).await.1), member, "the same account's");
        // The capacity account buying the member's id: EC2's NotFound, nothing bought.
        let buy = |id: &str| {
            format!(
                "Action=PurchaseCapacityBlock&Version=2016-11-15&CapacityBlockOfferingId={id}&InstancePlatform=Linux%2FUNIX"
            )
        };
        let (status, body) = call(&app, Some("AKIACAPACITY"), &buy(&member[0])).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("<Code>InvalidCapacityBlockOfferingIdNotFound</Code>"), "{body}");
        assert!(
            body.contains(&format!(
                "The Capacity Block offering ID &apos;{}&apos; cannot be found for this account.",
                member[0]
            )),
            "{body}"
        );
        let st = state(&app);
        assert_eq!(
            (st["purchases"].as_array().unwrap().len(), &st["offering_ids_other_accounts"]),
            (0, &serde_json::json!(2))
        );
        // Its own id buys.
        let (status, body) = call(&app, Some("AKIACAPACITY"), &buy(&own[0])).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(state(&app)["purchases"][0]["offering_id"], own[0].as_str());

        // "shared" (the default): the member sees the market's ids, and they buy.
        let body = br#"{"offering_ids_across_accounts": "shared"}"#;
        assert_eq!(crate::control::handle(&mut app.lock(), "POST", "/_sim/behaviour", body).status, 200);
        let (_, shared) = call(&app, Some("ASIAMEMBER1"), DESCRIBE).await;
        let shared = offering_ids(&shared);
        assert_eq!(shared, own);
        let (status, body) = call(&app, Some("AKIACAPACITY"), &buy(&shared[1])).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(state(&app)["purchases"].as_array().unwrap().len(), 2);
    }

    const ONE_BLOCK: &str = "[clock]\nstart = \"2026-12-01T00:00:00Z\"\n\
         [behaviour]\ndescribe_limit = false\nsame_day_offerings = false\n\
         [[market]]\nregion = \"us-west-2\"\ninstance_type = \"p5.48xlarge\"\nstart_days = [1]\n\
         price = [ { from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"4.10\" } ]";

    /// A real server on a loopback port, and the id of the one offering of `ONE_BLOCK`.
    async fn served(app: &Arc<App>) -> (std::net::SocketAddr, String) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, app.clone()));
        let (_, body) = call(app, Some("AKIACAPACITY"), DESCRIBE).await;
        (addr, offering_ids(&body).remove(0))
    }

    /// Sends PurchaseCapacityBlock for `id` over a new connection, which the caller keeps
    /// (dropping it is hanging up).
    async fn send_purchase(addr: std::net::SocketAddr, id: &str) -> TcpStream {
        use tokio::io::AsyncWriteExt;
        let body = format!(
            "Action=PurchaseCapacityBlock&Version=2016-11-15&CapacityBlockOfferingId={id}&InstancePlatform=Linux%2FUNIX"
        );
        let request = format!(
            "POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-www-form-urlencoded\r\n\
             authorization: AWS4-HMAC-SHA256 Credential=AKIACAPACITY/20261201/us-west-2/ec2/aws4_request, SignedHeaders=host, Signature=x\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    }

    /// Waits (bounded) until `done` holds of the world: a condition, never a guess at a time.
    async fn until(app: &App, what: &str, done: impl Fn(&serde_json::Value) -> bool) {
        for _ in 0..12000 {
            if done(&state(app)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the simulator never reached: {what}; {}", state(app));
    }

    fn calls(st: &serde_json::Value, action: &str) -> u64 {
        st["calls"][action].as_u64().unwrap_or(0)
    }

    /// EC2 completes a purchase it received whatever the client does: a caller killed while
    /// the answer is on its way (here: in the simulated latency) still bought the block.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_received_purchase_is_done_though_its_caller_hangs_up() {
        let app = App::new(World::new(Scenario::parse(ONE_BLOCK).unwrap()));
        let (addr, id) = served(&app).await;
        let body = br#"{"latency_ms": 2000}"#;
        assert_eq!(crate::control::handle(&mut app.lock(), "POST", "/_sim/behaviour", body).status, 200);
        let stream = send_purchase(addr, &id).await;
        // Received (counted) and waiting out its latency; nothing bought yet.
        until(&app, "the purchase received", |st| calls(st, "PurchaseCapacityBlock") == 1).await;
        assert!(state(&app)["purchases"].as_array().unwrap().is_empty());
        drop(stream);
        // The latency runs out without the caller, and the purchase is done.
        until(&app, "the purchase done after the caller left", |st| {
            st["purchases"].as_array().is_some_and(|p| p.len() == 1)
        })
        .await;
        assert_eq!(state(&app)["purchases"][0]["offering_id"], id.as_str());
    }

    /// A held call has not reached EC2: not counted, not done. Released, it is received and
    /// done; lost, it never is, whatever its caller does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_calls_reach_ec2_only_when_released() {
        let app = App::new(World::new(Scenario::parse(ONE_BLOCK).unwrap()));
        let (addr, id) = served(&app).await;
        let body = br#"{"hold_actions": ["PurchaseCapacityBlock"]}"#;
        assert_eq!(crate::control::handle(&mut app.lock(), "POST", "/_sim/behaviour", body).status, 200);
        let lost = send_purchase(addr, &id).await;
        for _ in 0..12000 {
            if app.held_counts().get("PurchaseCapacityBlock") == Some(&1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(app.held_counts().get("PurchaseCapacityBlock"), Some(&1));
        assert_eq!(calls(&state(&app), "PurchaseCapacityBlock"), 0, "held: not received");
        assert_eq!(app.release(false), 1, "lost in the network");
        drop(lost);
        assert!(app.held_counts().is_empty());
        assert_eq!(calls(&state(&app), "PurchaseCapacityBlock"), 0);
        assert!(state(&app)["purchases"].as_array().unwrap().is_empty(), "a lost call buys nothing");

        let delivered = send_purchase(addr, &id).await;
        for _ in 0..12000 {
            if !app.held_counts().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(app.release(true), 1);
        until(&app, "the released purchase done", |st| st["purchases"].as_array().is_some_and(|p| p.len() == 1)).await;
        assert_eq!(calls(&state(&app), "PurchaseCapacityBlock"), 1);
        drop(delivered);
    }

    #[test]
    fn ec2_answers_carry_the_simulated_clock_as_date() {
        let app = App::new(World::new(Scenario::parse(ONE_BLOCK).unwrap()));
        let r = ec2_reply(&app, 200, String::new());
        assert_eq!(r.headers()[hyper::header::DATE], "Tue, 01 Dec 2026 00:00:00 GMT");
    }
}
