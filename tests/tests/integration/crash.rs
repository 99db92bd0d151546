//! Crash points: the real `scan-offerings` binary, run behind a local Lambda Runtime API
//! (`capblock_local_lambda`, through `capblock_tests::runtime`) against moto and a simulator,
//! is SIGKILLed at each step of a purchase and of its announcement. The function has no test
//! hooks; the test holds each step where it can be observed from outside, so the test, not the
//! machine's speed, decides where the run is when it dies:
//!
//! | point | how the run is held there |
//! |---|---|
//! | before the intent | the simulator holds DescribeCapacityBlockOfferings before EC2 receives it (`hold_actions`); after the kill it is lost |
//! | after the intent | a proxy in front of DynamoDB never forwards the write that marks the intent Sent: the intent is Reserved and nothing was sent |
//! | after PurchaseCapacityBlock | `drop_purchase_response`: EC2 bought, its answer never comes; kill once the simulator recorded it |
//! | after the store write | SNS behind a proxy that never forwards Publish; kill once the block is stored |
//! | after publish | the proxy forwards Publish to moto, holds the answer; kill once it was forwarded |
//!
//! Then the binary runs again (the next scheduled scan, 6 minutes later: past the 5-minute
//! grace for abandoned reservations and the 90-second notice lease) and the end state is
//! compared with a run that did not crash.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use capblock_http1::{exchange, read_message, write_message};
use capblock_shared::domain::budget::{BudgetOwner, IntentState, Period};
use capblock_shared::ports::{BlockStore, Ledger, RuleStore};
use capblock_tests::runtime::{self, Outcome, binary};
use capblock_tests::{Aws, RuleToml, ScenarioToml, Sim, T0, binary_env, t0};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde_json::json;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};

const STACK: &str = "capblock-crash";

/// One line, one region: 1 x p5.48xlarge for a day at 3.00/GPU-hour = 576.00, starting on
/// days 2 and 3 (the second is what a rule buys once the first has left its window).
fn market() -> String {
    ScenarioToml::new(23, T0).p5("us-east-1", &[2, 3], "3.00").build()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ProxyMode {
    Pass,
    /// The held request is never forwarded: the service never sees it.
    HangBefore,
    /// The held request is forwarded and done; its answer never comes back.
    HoldAfter,
}

/// An HTTP proxy in front of one of moto's services that can hold the requests whose body
/// contains `holds` (e.g. SNS's `Action=Publish`) before or after forwarding them.
struct Proxy {
    url: String,
    mode: Arc<Mutex<ProxyMode>>,
    /// Held requests forwarded to the service.
    forwarded: Arc<AtomicUsize>,
    /// Held requests that arrived, forwarded or not.
    arrived: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    async fn start(upstream: String, holds: &'static str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mode = Arc::new(Mutex::new(ProxyMode::Pass));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let arrived = Arc::new(AtomicUsize::new(0));
        let (m, f, a) = (mode.clone(), forwarded.clone(), arrived.clone());
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(proxy(sock, upstream.clone(), holds, m.clone(), f.clone(), a.clone()));
            }
        });
        Proxy { url, mode, forwarded, arrived, task }
    }

    fn set(&self, mode: ProxyMode) {
        *self.mode.lock().unwrap() = mode;
    }
}

async fn proxy(
    sock: TcpStream,
    upstream: String,
    holds: &'static str,
    mode: Arc<Mutex<ProxyMode>>,
    forwarded: Arc<AtomicUsize>,
    arrived: Arc<AtomicUsize>,
) {
    let (r, mut w) = sock.into_split();
    let Ok(Some(req)) = read_message(&mut BufReader::new(r), false).await else { return };
    let held = String::from_utf8_lossy(&req.body).contains(holds);
    let m = *mode.lock().unwrap();
    if held {
        arrived.fetch_add(1, Ordering::SeqCst);
    }
    if held && m == ProxyMode::HangBefore {
        std::future::pending::<()>().await;
    }
    let Ok(resp) = exchange(&upstream, &req).await else { return };
    if held {
        forwarded.fetch_add(1, Ordering::SeqCst);
        if m == ProxyMode::HoldAfter {
            std::future::pending::<()>().await;
        }
    }
    let _ = write_message(&mut w, &resp, false).await;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    None,
    BeforeIntent,
    AfterIntent,
    AfterPurchase,
    AfterStoreWrite,
    AfterPublish,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::None => "no crash (baseline)",
            Point::BeforeIntent => "before the intent",
            Point::AfterIntent => "after the intent (reserved)",
            Point::AfterPurchase => "after PurchaseCapacityBlock",
            Point::AfterStoreWrite => "after the store write",
            Point::AfterPublish => "after publish (before mark)",
        }
    }
}

struct Row {
    point: Point,
    at_kill: String,
    runs_after: usize,
    purchases: usize,
    purchase_calls: u64,
    blocks: usize,
    committed: Decimal,
    purchased_msgs: usize,
}

/// Waits until `f` holds: the run is held there (the test decides where), so only a broken
/// run never gets there. The bound is generous for a slow machine (the date-ahead run under
/// libfaketime is 2-3 times slower), never a guess at how long a step takes.
async fn poll<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + StdDuration::from_secs(180);
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::time::sleep(StdDuration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

fn tick(t: DateTime<Utc>) -> serde_json::Value {
    json!({"source": "capblock.schedule", "time": t.to_rfc3339()})
}

async fn crash_at(point: Point) -> Row {
    let sim = Sim::start(&market()).await;
    let aws = Aws::fresh("crash").await;
    let store = aws.store();
    store.put_rule(&RuleToml::p5("east").rule(t0()), None).await.unwrap();
    let moto = |service: &str| {
        let var = format!("AWS_ENDPOINT_URL_{service}");
        std::env::var(&var).unwrap_or_else(|_| panic!("{var} (run under the local stack)"))
    };
    let sns = Proxy::start(moto("SNS"), "Action=Publish").await;
    // The one write that marks an intent Sent (`Ledger::mark_sent`), the last before the call.
    let dynamodb = Proxy::start(moto("DYNAMODB"), "SET #s = :sent").await;
    let mut env = binary_env(&sim, &aws, STACK);
    env.extend(
        [
            ("AWS_ENDPOINT_URL_SNS", sns.url.as_str()),
            ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb.url.as_str()),
            ("CAPBLOCK_MODE", "live"),
            ("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", "0"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let bin = binary("scan-offerings");
    let api = runtime::start().await;
    let t0 = t0();

    match point {
        Point::BeforeIntent => {
            sim.behaviour(r#"{"hold_actions": ["DescribeCapacityBlockOfferings"]}"#).await;
        }
        Point::AfterIntent => dynamodb.set(ProxyMode::HangBefore),
        Point::AfterPurchase => {
            sim.behaviour(r#"{"drop_purchase_response": true, "timeout_secs": 60}"#).await;
        }
        Point::AfterStoreWrite => sns.set(ProxyMode::HangBefore),
        Point::AfterPublish => sns.set(ProxyMode::HoldAfter),
        Point::None => {}
    }
    let mut child = runtime::spawn(&api, &bin, &env);
    let first = api.invoke(tick(t0));
    let at_kill = match point {
        Point::None => {
            let out = api.wait_outcome(&first, StdDuration::from_secs(60)).await;
            assert!(matches!(out, Some(Outcome::Response(_))), "{out:?}");
            "(ran to the end)".to_string()
        }
        Point::BeforeIntent => {
            poll("DescribeCapacityBlockOfferings held", || async {
                sim.held().await["DescribeCapacityBlockOfferings"].as_u64().unwrap_or(0) >= 1
            })
            .await;
            "searching".into()
        }
        Point::AfterIntent => {
            poll("the write marking the intent Sent", || async { dynamodb.arrived.load(Ordering::SeqCst) >= 1 }).await;
            "intent reserved, Sent not written".into()
        }
        Point::AfterPurchase => {
            poll("the purchase at EC2", || async { !sim.purchases().await.is_empty() }).await;
            "EC2 bought, answer pending".into()
        }
        Point::AfterStoreWrite => {
            poll("the block in the store", || async { !store.open_blocks(None).await.unwrap().is_empty() }).await;
            "block + notice stored, publish pending".into()
        }
        Point::AfterPublish => {
            poll("the publish at SNS", || async { sns.forwarded.load(Ordering::SeqCst) >= 1 }).await;
            "SNS accepted, not marked".into()
        }
    };
    // SIGKILL (for the baseline: the run already answered; the process is just stopped).
    child.kill().await.expect("SIGKILL the function");
    if point != Point::None {
        assert!(api.outcome(&first).is_none(), "killed before it answered");
    }
    let intents = store.open_intents().await.unwrap();
    let left = match intents.first() {
        Some(i) if i.state == IntentState::Reserved => "intent reserved",
        Some(i) if i.state == IntentState::Sent => "intent sent",
        Some(_) => "intent other",
        None => "no open intent",
    };
    let at_kill = format!("{at_kill}; {left}");

    if point == Point::AfterIntent {
        assert_eq!(dynamodb.forwarded.load(Ordering::SeqCst), 0, "the intent was never marked Sent");
    }
    // Faults off, what was held in the network lost with its caller; the next scheduled runs of
    // the same binary converge.
    sim.behaviour(r#"{"hold_actions": [], "drop_purchase_response": false}"#).await;
    sim.release(false).await;
    sns.set(ProxyMode::Pass);
    dynamodb.set(ProxyMode::Pass);
    let mut runs_after = 0;
    let mut now = t0;
    let mut child = runtime::spawn(&api, &bin, &env);
    // The next scan 6 minutes later; then, if nothing was bought yet, the one after the first
    // offering left the rule's start window (an abandoned intent's offering is not retried).
    for step in [Duration::minutes(6), Duration::hours(36)] {
        if point == Point::None {
            break;
        }
        if step > Duration::minutes(6) && !sim.purchases().await.is_empty() {
            break;
        }
        sim.advance_secs(step.num_seconds()).await;
        now += step;
        let id = api.invoke(tick(now));
        let out = api.wait_outcome(&id, StdDuration::from_secs(60)).await;
        assert!(matches!(out, Some(Outcome::Response(_))), "{:?}: rerun failed: {out:?}", point);
        runs_after += 1;
    }
    child.kill().await.ok();

    let state = sim.state().await;
    let purchases = state["purchases"].as_array().cloned().unwrap_or_default();
    let blocks = store.open_blocks(None).await.unwrap();
    let committed = store
        .usage(&BudgetOwner::Rule("east".into()), &Period::of(now))
        .await
        .unwrap()
        .map(|u| u.committed.amount())
        .unwrap_or_default();
    let alerts = aws.alerts().await;
    let purchased_msgs = alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "purchased").count();
    assert!(store.open_intents().await.unwrap().is_empty(), "{point:?}: no intent left open");
    Row {
        point,
        at_kill,
        runs_after,
        purchases: purchases.len(),
        purchase_calls: state["calls"]["PurchaseCapacityBlock"].as_u64().unwrap_or(0),
        blocks: blocks.len(),
        committed,
        purchased_msgs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_scan_offerings_at_each_step_converges_to_one_purchase() {
    let points = [
        Point::None,
        Point::BeforeIntent,
        Point::AfterIntent,
        Point::AfterPurchase,
        Point::AfterStoreWrite,
        Point::AfterPublish,
    ];
    let rows = futures::future::join_all(points.map(crash_at)).await;
    let mut table = String::from(
        "\n| crash point | state at the kill | runs after | purchases at EC2 | PurchaseCapacityBlock calls | blocks in store | budget committed | \"purchased\" messages |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.point.name(),
            r.at_kill,
            r.runs_after,
            r.purchases,
            r.purchase_calls,
            r.blocks,
            r.committed,
            r.purchased_msgs
        ));
    }
    println!("{table}");
    for r in &rows {
        let name = r.point.name();
        assert_eq!(r.purchases, 1, "{name}: exactly one purchase\n{table}");
        assert_eq!(r.purchase_calls, 1, "{name}: PurchaseCapacityBlock sent once\n{table}");
        assert_eq!(r.blocks, 1, "{name}: one block\n{table}");
        assert_eq!(r.committed, Decimal::from(576), "{name}: the budget holds one fee\n{table}");
        if r.point == Point::AfterPublish {
            assert!((1..=2).contains(&r.purchased_msgs), "{name}: announced, at most once repeated\n{table}");
        } else {
            assert_eq!(r.purchased_msgs, 1, "{name}: announced exactly once\n{table}");
        }
    }
}
