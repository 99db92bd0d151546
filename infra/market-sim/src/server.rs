//! The HTTP/1 server. hyper is driven directly (one task per connection) so that a call can be
//! left unanswered and its connection closed: that is how timeouts and "the purchase went
//! through but the response was lost" are simulated.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::actions;
use crate::control;
use crate::faults::Fault;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::region;
use crate::wire::xml::envelope;
use crate::world::World;

pub struct App {
    world: Mutex<World>,
}

impl App {
    pub fn new(world: World) -> Arc<Self> {
        Arc::new(Self { world: Mutex::new(world) })
    }

    /// A panic while holding the lock must not take the whole simulator down with it.
    fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
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

    if path == "/_sim" || path.starts_with("/_sim/") {
        let r = control::handle(&mut app.lock(), &method, &path, &body);
        return reply(r.status, r.content_type, r.body);
    }
    // EC2's Query protocol posts to `/`; RAM's restJson1 names its operation in the path.
    if !path.is_empty() && path != "/" {
        return ram(&app, &method, &path, &query, auth.as_deref(), &body);
    }
    ec2(app, &method, &query, auth.as_deref(), &body, kill).await
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

async fn ec2(app: Arc<App>, method: &str, query: &str, auth: Option<&str>, body: &[u8], kill: Arc<Notify>) -> Resp {
    let mut params = Params::parse(query);
    if method == "POST" {
        params.extend(&String::from_utf8_lossy(body));
    }
    let region = region::from_authorization(auth, params.get("X-Amz-Credential"))
        .unwrap_or_else(|| region::DEFAULT_REGION.to_string());
    // Who calls: `iam_denials` refuse actions per access key id.
    let caller = region::access_key(auth, params.get("X-Amz-Credential"));
    let action = params.get("Action").unwrap_or("").to_string();

    let (request_id, fault, latency_ms, timeout_secs) = {
        let mut w = app.lock();
        (w.request_id(), w.admit(&region, &action), w.behaviour.latency_ms, w.behaviour.timeout_secs)
    };
    if latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(latency_ms)).await;
    }
    let error = |e: ApiError| {
        tracing::info!(%region, %action, status = e.status, code = %e.code, "ec2 call failed");
        reply(e.status, "text/xml;charset=UTF-8", e.to_xml(&request_id))
    };
    match fault {
        Some(Fault::Hang) => {
            tracing::info!(%region, %action, timeout_secs, "ec2 call will time out");
            return hang(kill, timeout_secs).await;
        }
        Some(Fault::Throttled) => return error(ApiError::throttled()),
        Some(Fault::InternalError) => return error(ApiError::internal()),
        None => {}
    }

    let result = {
        let mut w = app.lock();
        actions::dispatch_as(&mut w, &region, caller.as_deref(), &action, &params)
    };
    match result {
        Ok(out) if out.drop_response => {
            tracing::info!(%region, %action, timeout_secs, "action done, response dropped");
            hang(kill, timeout_secs).await
        }
        Ok(out) => {
            tracing::info!(%region, %action, "ec2 call ok");
            reply(200, "text/xml;charset=UTF-8", envelope(&action, &request_id, &out.body))
        }
        Err(e) => error(e),
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
        let resp = ec2(app.clone(), "GET", query, auth.as_deref(), b"", Arc::new(Notify::new())).await;
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
}
