//! A counting reverse proxy in front of moto: every request a function makes to DynamoDB, SNS
//! or Scheduler passes through it, so the bench counts billable requests at the wire instead of
//! guessing them from the code.
//!
//! DynamoDB capacity units are estimated from the JSON sizes (an item's JSON, with its type
//! tags, is larger than DynamoDB's own size, so this over-counts): writes 1 WRU per started KiB
//! per item (x2 in a transaction), reads 1 RRU per started 4 KiB of the answer (strongly
//! consistent, x2 in a transaction), control-plane calls nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::Value;

use capblock_http1::{Message, exchange, read_message, write_message};
use tokio::io::BufReader;
use tokio::net::TcpStream;

#[derive(Debug, Default, Clone)]
pub struct Counts {
    /// (service, operation) -> requests
    pub calls: BTreeMap<(String, String), u64>,
    pub dynamo_wru: f64,
    pub dynamo_rru: f64,
    /// bytes of items written (for the storage estimate)
    pub dynamo_write_bytes: u64,
    pub sns_publishes: u64,
    pub schedules_created: u64,
}

impl Counts {
    pub fn total(&self, service: &str) -> u64 {
        self.calls.iter().filter(|((s, _), _)| s == service).map(|(_, n)| n).sum()
    }
}

pub struct Proxy {
    pub url: String,
    pub counts: Arc<Mutex<Counts>>,
}

/// Starts a proxy for `service` ("dynamodb", "sns", "scheduler") forwarding to `upstream`, on a
/// thread and runtime of its own (the bench's drivers are not async).
pub fn start(service: &'static str, upstream: &str) -> std::io::Result<Proxy> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}", listener.local_addr()?);
    let counts = Arc::new(Mutex::new(Counts::default()));
    let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let c = counts.clone();
    thread::spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
            while let Ok((conn, _)) = listener.accept().await {
                let (c, up) = (c.clone(), upstream.clone());
                tokio::spawn(async move {
                    let _ = serve(conn, service, &up, &c).await;
                });
            }
        })
    });
    Ok(Proxy { url, counts })
}

async fn serve(conn: TcpStream, service: &str, upstream: &str, counts: &Mutex<Counts>) -> std::io::Result<()> {
    let (r, mut w) = conn.into_split();
    let mut r = BufReader::new(r);
    while let Some(req) = read_message(&mut r, false).await? {
        let resp = exchange(upstream, &req).await.unwrap_or_else(|_| Message::response(502, b""));
        count(service, &req, &resp, &mut counts.lock().unwrap_or_else(|p| p.into_inner()));
        write_message(&mut w, &resp, true).await?;
    }
    Ok(())
}

fn kib(n: usize, unit: usize) -> f64 {
    n.div_ceil(unit).max(1) as f64
}

fn count(service: &str, req: &Message, resp: &Message, c: &mut Counts) {
    let op = match service {
        "dynamodb" => req.header("x-amz-target").and_then(|t| t.split('.').nth(1)).unwrap_or("?").to_string(),
        "sns" => form_value(&req.body, "Action").unwrap_or_else(|| "?".into()),
        _ => {
            let mut parts = req.start.split_whitespace();
            let method = parts.next().unwrap_or("?");
            let path = parts.next().unwrap_or("?");
            let kind = path.trim_start_matches('/').split('/').next().unwrap_or("?");
            format!("{method} /{kind}")
        }
    };
    *c.calls.entry((service.to_string(), op.clone())).or_default() += 1;
    match service {
        "dynamodb" => dynamo_units(&op, req, resp, c),
        "sns" if op == "Publish" => c.sns_publishes += 1,
        "sns" if op == "PublishBatch" => {
            let body = String::from_utf8_lossy(&req.body);
            c.sns_publishes += body.matches(".Id=").count().max(1) as u64;
        }
        "scheduler" if op == "POST /schedules" => c.schedules_created += 1,
        _ => {}
    }
}

fn dynamo_units(op: &str, req: &Message, resp: &Message, c: &mut Counts) {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let size = |v: &Value| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
    match op {
        "PutItem" | "UpdateItem" | "DeleteItem" => {
            let n = size(&body);
            c.dynamo_wru += kib(n, 1024);
            c.dynamo_write_bytes += n as u64;
        }
        "BatchWriteItem" => {
            for reqs in body["RequestItems"].as_object().into_iter().flat_map(|m| m.values()) {
                for item in reqs.as_array().into_iter().flatten() {
                    let n = size(item);
                    c.dynamo_wru += kib(n, 1024);
                    c.dynamo_write_bytes += n as u64;
                }
            }
        }
        "TransactWriteItems" => {
            for item in body["TransactItems"].as_array().into_iter().flatten() {
                let n = size(item);
                c.dynamo_wru += 2.0 * kib(n, 1024);
                c.dynamo_write_bytes += n as u64;
            }
        }
        "GetItem" | "Query" | "Scan" => c.dynamo_rru += kib(resp.body.len(), 4096),
        "BatchGetItem" => {
            let keys: usize = body["RequestItems"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .map(|t| t["Keys"].as_array().map_or(0, Vec::len))
                .sum();
            c.dynamo_rru += (keys as f64).max(kib(resp.body.len(), 4096));
        }
        "TransactGetItems" => {
            let n = body["TransactItems"].as_array().map_or(1, Vec::len);
            c.dynamo_rru += 2.0 * (n as f64).max(kib(resp.body.len(), 4096));
        }
        _ => {}
    }
}

fn form_value(body: &[u8], key: &str) -> Option<String> {
    String::from_utf8_lossy(body).split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}
