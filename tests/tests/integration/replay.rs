//! A dry-run replay beside a live purchase in flight, through the real `capblock` binary against
//! the local stack (moto's table, the simulator as EC2). The live scan's PurchaseCapacityBlock is
//! held by a proxy in front of the simulator (EC2 has not acted yet; the scan is killed, its
//! answer lost, the intent rightly `sent`). A dry-run `capblock scan --time <an hour later>`
//! then runs against the same table: it must settle nothing and write nothing. When EC2 makes
//! the purchase, a live scan from the CLI still settles nothing (only the stack's functions
//! settle, on their clock) and buys nothing more; the function's run adopts it: one block, the
//! fee charged once.

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use capblock_http1::{Message, exchange, read_message, write_message};
use capblock_shared::domain::budget::{BudgetOwner, IntentState, Period};
use capblock_shared::domain::rule::Mode;
use capblock_shared::domain::stack::{StackSettings, StoredSettings};
use capblock_shared::ports::{BlockStore, Ledger, MarketMemory, ObservationStore, RuleStore, SettingsStore};
use capblock_tests::{Aws, RuleToml, ScenarioToml, Sim, T0, binary_env, t0};
use chrono::Duration;
use rust_decimal::Decimal;
use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};

const STACK: &str = "capblock-replay";

/// 1 x p5.48xlarge for a day at 2.50 per GPU-hour (480.00), starting on days 2 and 3.
fn market() -> String {
    ScenarioToml::new(29, T0).payment("succeed", None).p5("us-east-1", &[2, 3], "2.50").build()
}

/// A proxy in front of the simulator's EC2 API that forwards every call but
/// PurchaseCapacityBlock, which it holds (unanswered, not yet at EC2) until `release`.
struct HeldPurchases {
    url: String,
    upstream: String,
    held: Arc<Mutex<Vec<Message>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HeldPurchases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HeldPurchases {
    async fn start(sim: &Sim) -> HeldPurchases {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = sim.url.trim_start_matches("http://").trim_end_matches('/').to_string();
        let held = Arc::new(Mutex::new(Vec::new()));
        let (up, h) = (upstream.clone(), held.clone());
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, up.clone(), h.clone()));
            }
        });
        HeldPurchases { url, upstream, held, task }
    }

    fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    /// EC2 receives the held purchases now (their answers go nowhere: the caller is gone).
    async fn release(&self) {
        let held: Vec<Message> = std::mem::take(&mut *self.held.lock().unwrap());
        for req in held {
            let resp = exchange(&self.upstream, &req).await.expect("the simulator answers");
            assert_eq!(resp.status(), 200, "{}", String::from_utf8_lossy(&resp.body));
        }
    }
}

async fn serve(sock: TcpStream, upstream: String, held: Arc<Mutex<Vec<Message>>>) {
    let (r, mut w) = sock.into_split();
    let Ok(Some(req)) = read_message(&mut BufReader::new(r), false).await else { return };
    if String::from_utf8_lossy(&req.body).contains("Action=PurchaseCapacityBlock&") {
        held.lock().unwrap().push(req);
        // The caller waits for an answer that never comes, as after a lost connection.
        return std::future::pending::<()>().await;
    }
    let Ok(resp) = exchange(&upstream, &req).await else { return };
    let _ = write_message(&mut w, &resp, false).await;
}

/// `capblock` with this test's stack (`deployed`: its CloudFormation stack, which the CLI checks
/// the stored settings against before it buys); `ec2`: where its EC2 calls go (the simulator or
/// the proxy).
fn capblock(sim: &Sim, aws: &Aws, deployed: &str, ec2: &str, args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(capblock_tests::runtime::binary("capblock"));
    c.args(args)
        .envs(binary_env(sim, aws, STACK))
        .env("AWS_ENDPOINT_URL_EC2", ec2)
        .env("CAPBLOCK_STACK_NAME", deployed)
        .env_remove("CAPBLOCK_MODE")
        .env_remove("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET")
        .kill_on_drop(true);
    c
}

async fn scan_json(sim: &Sim, aws: &Aws, deployed: &str, args: &[&str]) -> Value {
    let out = capblock(sim, aws, deployed, &sim.url, args).output().await.expect("run capblock");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_replay_never_releases_a_live_purchase_in_flight() {
    let sim = Sim::start(&market()).await;
    let aws = Aws::fresh("replay").await;
    let store = aws.store();
    let rule = RuleToml::p5("east").budget("600").max_purchases_per_month(1).max_blocks_held(1);
    store.put_rule(&rule.rule(t0()), None).await.unwrap();
    let owner = BudgetOwner::Rule("east".into());
    let period = Period::of(t0());
    // A live stack, as its functions store it: the CLI buys only on the stack's own settings.
    let live_stack = StoredSettings {
        stack: StackSettings {
            name: STACK.into(),
            mode: Mode::Live,
            account_budget: Some(capblock_tests::usd("100000")),
            team_budgets: Default::default(),
        },
        alerts_topic: aws.alerts_topic.clone(),
        written_at: t0(),
    };
    store.store_settings(&live_stack).await.unwrap();
    let deployed = aws.deployed_stack("live", "100000", "").await;

    // The live scan sends its purchase; EC2 has not acted when the scan dies.
    let proxy = HeldPurchases::start(&sim).await;
    let mut live =
        capblock(&sim, &aws, &deployed, &proxy.url, &["scan", "--mode", "live", "--yes", "--json"]).spawn().unwrap();
    // Bounded for a slow machine only: the proxy holds the call until told.
    for _ in 0..7200 {
        if proxy.held() == 1 {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(25)).await;
    }
    assert_eq!(proxy.held(), 1, "the live scan sent PurchaseCapacityBlock");
    live.kill().await.unwrap();
    let open = store.open_intents().await.unwrap();
    assert!(matches!(&open[..], [i] if i.state == IntentState::Sent), "{open:#?}");
    let usage = store.usage(&owner, &period).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.purchases), (Decimal::from(480), 1), "held while unknown");

    // What the live scan stored before it died: the replay must leave it as it is.
    let region = "us-east-1".parse().unwrap();
    let p5 = "p5.48xlarge".parse().unwrap();
    let memory = store.region_memory(&region).await.unwrap();
    let prices = |store: &capblock_shared::aws::dynamo::DynamoStore| {
        let (region, p5) = (&region, &p5);
        let store = store.clone();
        async move { store.history(region, p5, t0() - Duration::days(1), t0() + Duration::days(30)).await.unwrap() }
    };
    let seen = prices(&store).await;

    // An operator looks at an hour later with a dry-run scan (the README's what-if).
    let hour_later = (t0() + Duration::hours(1)).to_rfc3339();
    let replay = scan_json(&sim, &aws, &deployed, &["scan", "--time", &hour_later, "--json"]).await;
    assert_eq!(replay["replay"], true, "{replay:#}");
    assert!(replay["settled"].as_array().is_some_and(Vec::is_empty), "a person's scan settles nothing: {replay:#}");
    assert!(replay["outcomes"][0]["action"].is_null(), "the held fee leaves no room: {replay:#}");
    let usage = store.usage(&owner, &period).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.purchases), (Decimal::from(480), 1), "the replay released nothing");
    assert_eq!(store.open_intents().await.unwrap(), open, "the intent is still open, as it was");
    assert_eq!(store.region_memory(&region).await.unwrap(), memory, "no market memory written");
    assert_eq!(prices(&store).await, seen, "no prices written");
    assert!(sim.purchases().await.is_empty(), "nothing asked of EC2 to buy");

    // EC2 makes the purchase; the next live scan adopts it and buys nothing more.
    proxy.release().await;
    assert_eq!(sim.purchases().await.len(), 1);
    let next = scan_json(&sim, &aws, &deployed, &["scan", "--mode", "live", "--yes", "--json"]).await;
    assert!(next["settled"].as_array().is_some_and(Vec::is_empty), "{next:#}");
    assert_ne!(next["outcomes"][0]["action"]["action"], "bought", "the open intent holds the rule: {next:#}");
    assert_eq!(sim.purchases().await.len(), 1, "exactly one block bought");
    // The stack's function settles it on its clock: adopted.
    let market = capblock_shared::aws::ec2::Ec2Market::new(sim.sdk(capblock_tests::quick_timeouts()).await);
    let now: chrono::DateTime<chrono::Utc> = sim.state().await["now"].as_str().unwrap().parse().unwrap();
    let settled =
        capblock_shared::app::reconcile::settle_open_intents(&store, &market, now.into(), None).await.unwrap();
    assert!(matches!(&settled[..], [capblock_shared::app::reconcile::Settled::Adopted { .. }]), "{settled:#?}");
    assert_eq!(store.open_blocks(Some("east")).await.unwrap().len(), 1);
    let usage = store.usage(&owner, &period).await.unwrap().unwrap();
    assert_eq!((usage.committed.amount(), usage.purchases), (Decimal::from(480), 1), "the fee, once");
}
