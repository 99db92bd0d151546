//! Fault injection: the real scan and tracker on moto and the simulator while EC2 throttles,
//! answers 5xx, hangs and loses a region, while runs overlap (DynamoDB conditional-check
//! conflicts) and while SNS publishes fail. After every run and after a final convergence run
//! with the faults off, the invariants must hold:
//!
//! * at most one purchase per intent (counted at the simulator, by `capblock:intent` tag);
//! * no budget exceeded (read from the budget items), and what is committed is what was bought
//!   or held for a person (a purchase whose answer was lost and that EC2 never made: its fee is
//!   never released on a timer);
//! * every block bought is tracked once the faults stop;
//! * every milestone announced exactly once (late allowed, lost not): the alert ids read from
//!   the SQS tap are unique, every purchase has its "purchased" message, nothing is pending.
//!
//! `CAPBLOCK_LONG=1` (`make test-long`) runs the same tests with more rounds.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::reconcile::Settled;
use capblock_shared::app::scan::ScanReport;
use capblock_shared::app::track::TrackReport;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::eventbridge::Delivery;
use capblock_shared::domain::budget::{BudgetOwner, Intent, IntentState, Period};
use capblock_shared::domain::money::Money;
use capblock_shared::domain::rule::Rule;
use capblock_shared::domain::tags::INTENT_TAG;
use capblock_shared::memory::{Call, Failure, Hook, HookVerdict, Hooked, Injected, Kind, Script};
use capblock_shared::ports::{
    BlockStore, Ledger, MarketError, NotifyError, Outbox, PurchaseOutcome, PurchaseRequest, Purchaser, Topic,
};
use capblock_tests::{Published, Rig, RuleToml, ScenarioToml, T0, t0, usd};
use rust_decimal::Decimal;
use serde_json::Value;

const STACK: &str = "capblock-faults";

/// Whether the long variants were asked for (`make test-long`).
pub fn long() -> bool {
    std::env::var("CAPBLOCK_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Three selling regions and one that is down. Offerings start every day, so new ones keep
/// appearing as the clock moves; us-west-2 is cheaper than us-east-1.
fn market() -> String {
    ScenarioToml::new(17, T0)
        .payment("succeed", Some(3))
        .p5("us-east-1", &[2, 3, 4], "3.00")
        .p5("us-west-2", &[2, 3, 4], "2.75")
        .p5("eu-west-1", &[2, 3, 4], "2.00")
        .build()
}

fn rule(id: &str, regions: &[&str], budget: &str, held: u32, purchases: u32) -> Rule {
    RuleToml::p5(id)
        .regions(regions)
        .budget(budget)
        .max_blocks_held(held)
        .max_purchases_per_month(purchases)
        .window(1, 6)
        .rule(t0())
}

/// When the flaky notifier fails: the first `fail_first` publishes and then every
/// `fail_every`-th while `on`: SNS refusing (the message never reached the topic).
pub struct Flakiness {
    fail_first: AtomicUsize,
    fail_every: usize,
    calls: AtomicUsize,
    pub failed: AtomicUsize,
    pub on: std::sync::atomic::AtomicBool,
}

impl Flakiness {
    fn new(fail_first: usize, fail_every: usize) -> Arc<Flakiness> {
        Arc::new(Flakiness {
            fail_first: AtomicUsize::new(fail_first),
            fail_every,
            calls: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            on: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// SNS's answer to one publish.
    fn verdict(&self, call: &Call<'_>) -> HookVerdict {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.on.load(Ordering::SeqCst) {
            return HookVerdict::Proceed;
        }
        let first = self.fail_first.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if !(first || (self.fail_every > 0 && n.is_multiple_of(self.fail_every))) {
            return HookVerdict::Proceed;
        }
        self.failed.fetch_add(1, Ordering::SeqCst);
        let topic = call.arg::<Topic>().map(|t| format!("{t:?}")).unwrap_or_default();
        HookVerdict::error(NotifyError::Failed { topic, message: "injected SNS failure".into() })
    }

    /// `inner` behind this flakiness.
    fn notifier(self: &Arc<Flakiness>, inner: Delivery) -> Hooked<Delivery, Script> {
        let flaky = self.clone();
        Hooked::new(inner, Script::new().on("publish", move |call| flaky.verdict(call)))
    }
}

/// PurchaseCapacityBlock answered "HTTP 500" for the first `ambiguous` purchases *after* EC2
/// carried them out: the worst 5xx, one that did act.
pub struct Ambiguous {
    pub ambiguous: AtomicUsize,
    /// When set, the next live purchase goes to this simulator with its 5xx rate at 100%: the
    /// real 500, answered before EC2 acts (taken once).
    pub sim_500: Mutex<Option<String>>,
    /// The adapter the hook stands before, shared with its `Hooked`: the hook makes the
    /// purchase itself while the simulator's 5xx rate is up.
    real: Arc<Ec2Market>,
}

#[async_trait]
impl Hook for Ambiguous {
    async fn before(&self, call: &Call<'_>) -> HookVerdict {
        let Some(req) = call.arg::<PurchaseRequest>().filter(|_| call.is("purchase")) else {
            return HookVerdict::Proceed;
        };
        let sim_500 = if req.dry_run { None } else { self.sim_500.lock().unwrap().take() };
        if let Some(url) = sim_500 {
            capblock_tests::http("POST", &format!("{url}/_sim/behaviour"), r#"{"error_5xx_rate": 1.0}"#).await;
            let out = self.real.purchase(req).await;
            capblock_tests::http("POST", &format!("{url}/_sim/behaviour"), r#"{"error_5xx_rate": 0.0}"#).await;
            return HookVerdict::answer(out);
        }
        HookVerdict::Proceed
    }

    /// A live purchase EC2 made: its answer lost while `ambiguous` lasts.
    fn after(&self, call: &Call<'_>, answer: &mut (dyn Any + Send)) {
        let Some(out) = answer.downcast_mut::<Result<PurchaseOutcome, MarketError>>() else { return };
        if out.is_ok()
            && matches!(call.kind, Kind::Buy { live: true })
            && self.ambiguous.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
        {
            let lost = Failure::Unknown("HTTP 500 InternalError: injected after the purchase was made".into());
            *out = Err(MarketError::injected(lost, call));
        }
    }
}

/// The rig with a flaky notifier, scanning and tracking within an account budget.
struct H {
    rig: Rig,
    notifier: Hooked<Delivery, Script>,
    flaky: Arc<Flakiness>,
    account_budget: Money,
}

impl Deref for H {
    type Target = Rig;
    fn deref(&self) -> &Rig {
        &self.rig
    }
}

impl H {
    async fn new(name: &str, scenario: &str, account_budget: &str, fail_first: usize, fail_every: usize) -> H {
        let mut rig = Rig::start(name, scenario, capblock_tests::quick_timeouts(), t0(), STACK).await;
        let account_budget = usd(account_budget);
        rig.scan.stack.account_budget = Some(account_budget);
        rig.track.stack.account_budget = Some(account_budget);
        let flaky = Flakiness::new(fail_first, fail_every);
        H { notifier: flaky.notifier(rig.aws.notifier()), flaky, rig, account_budget }
    }

    /// One scan with the flaky notifier (in place of the rig's own, which must succeed); a run
    /// that fails as a whole (the store unavailable) is what Lambda would retry.
    async fn scan(&self) -> Option<ScanReport> {
        let s = self.scanner(&self.market, &self.notifier, &self.scan);
        s.run(self.now()).await.map_err(|e| eprintln!("scan failed: {e}")).ok()
    }

    /// One tracker run with the flaky notifier, which may fail as a whole like [`H::scan`].
    async fn track(&self) -> Option<TrackReport> {
        let t = self.tracker(&self.notifier, &self.reminders, &self.track);
        t.run(self.now()).await.map_err(|e| eprintln!("track failed: {e}")).ok()
    }

    /// The simulator's market behind an [`Ambiguous`] purchase hook.
    async fn ambiguous_market(&self, ambiguous: usize, sim_500: Option<String>) -> Hooked<Ec2Market, Ambiguous> {
        let real = Arc::new(self.sim.market().await);
        let hook =
            Ambiguous { ambiguous: AtomicUsize::new(ambiguous), sim_500: Mutex::new(sim_500), real: real.clone() };
        Hooked::sharing(&real, hook)
    }

    /// One scan on `market` at the current time, which must succeed.
    async fn scan_on(&self, market: &Hooked<Ec2Market, Ambiguous>) -> ScanReport {
        self.scanner(market, &self.notifier, &self.scan).run(self.now()).await.unwrap()
    }

    /// `scans` scans and `tracks` tracker runs at once, all at the same instant.
    async fn overlapping(self: &Arc<Self>, scans: usize, tracks: usize) -> (Vec<ScanReport>, Vec<TrackReport>) {
        let s = (0..scans).map(|_| {
            let h = self.clone();
            tokio::spawn(async move { h.scan().await })
        });
        let t = (0..tracks).map(|_| {
            let h = self.clone();
            tokio::spawn(async move { h.track().await })
        });
        let (s, t) = futures::future::join(futures::future::join_all(s), futures::future::join_all(t)).await;
        (
            s.into_iter().filter_map(|r| r.expect("scan task panicked")).collect(),
            t.into_iter().filter_map(|r| r.expect("track task panicked")).collect(),
        )
    }
}

/// Every invariant that must hold at any time, faults or not.
async fn assert_safe(h: &H, rules: &[Rule]) -> BTreeMap<String, usize> {
    let purchases = h.sim.purchases().await;
    let mut per_intent: BTreeMap<String, usize> = BTreeMap::new();
    for p in &purchases {
        let intent = p["tags"][INTENT_TAG].as_str().unwrap_or_else(|| panic!("untagged purchase {p}")).to_string();
        *per_intent.entry(intent).or_default() += 1;
    }
    for (intent, n) in &per_intent {
        assert_eq!(*n, 1, "intent {intent} was bought {n} times: {purchases:#?}");
    }
    let store = h.aws.store();
    let period = Period::of(h.now());
    let mut account = Decimal::ZERO;
    for r in rules {
        if let Some(u) = store.usage(&BudgetOwner::Rule(r.id.clone()), &period).await.unwrap() {
            assert!(u.committed.amount() <= r.monthly_budget.amount(), "rule {} over budget: {u:?}", r.id);
            assert!(u.purchases <= r.max_purchases_per_month, "rule {} over its purchases: {u:?}", r.id);
            account += u.committed.amount();
        }
    }
    if let Some(u) = store.usage(&BudgetOwner::Account, &period).await.unwrap() {
        assert!(u.committed.amount() <= h.account_budget.amount(), "account over budget: {u:?}");
        assert_eq!(u.committed.amount(), account, "the account holds what its rules hold");
    }
    per_intent
}

fn fee(p: &Value) -> Decimal {
    p["upfront_fee"]
        .as_str()
        .map(|s| s.parse().unwrap())
        .unwrap_or_else(|| p["upfront_fee"].to_string().parse().unwrap())
}

/// After the faults stop and one more scan and track: everything bought is tracked, paid for
/// from the budgets exactly once, and announced exactly once. A purchase whose answer was lost
/// and that EC2 never made stays held for a person (never released on a timer): open, its fee
/// committed, EC2 holding nothing with its tag, and a person told once. Returns those held.
async fn assert_converged(h: &H, rules: &[Rule], alerts: &[Published]) -> Vec<Intent> {
    assert_safe(h, rules).await;
    let store = h.aws.store();
    let purchases = h.sim.purchases().await;
    let period = Period::of(h.now());
    let held = store.open_intents().await.unwrap();
    for i in &held {
        assert_eq!(i.state, IntentState::Sent, "only a purchase whose outcome is unknown stays open: {i:?}");
        assert!(
            !purchases.iter().any(|p| p["tags"][INTENT_TAG] == i.id.as_str()),
            "EC2 made {}: it must have been adopted",
            i.id
        );
        let told = format!("{}#outcome-unknown", i.id);
        assert!(alerts.iter().any(|a| a.body["id"] == told.as_str()), "a person is told of {}", i.id);
    }
    for r in rules {
        let bought: Decimal = purchases.iter().filter(|p| p["tags"]["capblock:rule"] == r.id.as_str()).map(fee).sum();
        let on_hold: Decimal = held.iter().filter(|i| i.rule_id == r.id).map(|i| i.offering.fee.amount()).sum();
        let committed = store
            .usage(&BudgetOwner::Rule(r.id.clone()), &period)
            .await
            .unwrap()
            .map(|u| u.committed.amount())
            .unwrap_or_default();
        assert_eq!(committed, bought + on_hold, "rule {}: budget holds exactly what was bought and what is held", r.id);
    }
    for p in &purchases {
        let id = p["reservation_id"].as_str().unwrap();
        let b = store.get_block(id).await.unwrap().unwrap_or_else(|| panic!("bought block {id} is not tracked"));
        assert_eq!(b.intent_id.as_deref(), p["tags"][INTENT_TAG].as_str());
    }
    assert!(store.pending().await.unwrap().is_empty(), "no notice left unpublished");
    let ids: Vec<String> = alerts.iter().map(|a| a.body["id"].as_str().unwrap().to_string()).collect();
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a milestone was announced twice: {ids:#?}");
    for p in &purchases {
        let id = format!("{}#purchased", p["reservation_id"].as_str().unwrap());
        assert!(unique.contains(&id), "{id} was never announced: {ids:#?}");
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn throttling_5xx_timeouts_a_dead_region_overlapping_runs_and_sns_failures_lose_nothing() {
    let started = Instant::now();
    let rounds = if long() { 24 } else { 6 };
    // The account allows three 1-day blocks at most (576 + 528 + 528 = 1632 <= 1700 < 2208).
    let h = Arc::new(H::new("faults", &market(), "1700", 3, 4).await);
    let rules = [rule("east", &["us-east-1", "eu-west-1"], "1200", 3, 3), rule("west", &["us-west-2"], "10000", 2, 4)];
    h.put_rules(&rules).await;
    // 30% of EC2 calls throttled, 5% 500s, 5% hangs, eu-west-1 down (its cheap offerings are
    // never seen).
    h.sim
        .behaviour(
            r#"{"throttle_rate": 0.3, "error_5xx_rate": 0.05, "timeout_rate": 0.05,
                "timeout_secs": 1, "down_regions": ["eu-west-1"]}"#,
        )
        .await;
    let mut alerts = Vec::new();
    let mut conflicts = 0;
    for _ in 0..rounds {
        let (scans, tracks) = h.overlapping(3, 2).await;
        for s in &scans {
            for o in &s.outcomes {
                if let Some(Outcome::Skipped { reason }) = &o.action
                    && (reason.contains("in flight")
                        || reason.contains("already exists")
                        || reason.contains("still open"))
                {
                    conflicts += 1;
                }
            }
        }
        let _ = tracks;
        assert_safe(&h, &rules).await;
        alerts.extend(h.aws.alerts().await);
        h.advance_minutes(7 * 60).await;
    }
    let state = h.sim.state().await;
    // Faults off; one more scan and one more track converge.
    h.sim.behaviour(r#"{"throttle_rate": 0.0, "error_5xx_rate": 0.0, "timeout_rate": 0.0, "down_regions": []}"#).await;
    h.flaky.on.store(false, Ordering::SeqCst);
    h.advance_minutes(20).await;
    h.scan().await.expect("a scan without faults succeeds");
    h.track().await.expect("a track without faults succeeds");
    alerts.extend(h.aws.alerts().await);
    let held = assert_converged(&h, &rules, &alerts).await;

    let purchases = h.sim.purchases().await.len();
    let calls: u64 = state["calls"].as_object().unwrap().values().filter_map(Value::as_u64).sum();
    println!(
        "faults: {rounds} rounds x (3 scans + 2 tracks) in {:.1}s; EC2 calls {calls}, injected {}, SNS failures {}, \
         overlapping-run skips {conflicts}; purchases {purchases}, alerts {}",
        started.elapsed().as_secs_f64(),
        state["faults_injected"],
        h.flaky.failed.load(Ordering::SeqCst),
        alerts.len(),
    );
    let f = &state["faults_injected"];
    assert!(f["throttled"].as_u64().unwrap() > 0, "throttling happened: {f}");
    assert!(f["region_down"].as_u64().unwrap() > 0, "the region was down: {f}");
    assert!(h.flaky.failed.load(Ordering::SeqCst) >= 3, "SNS failed");
    // Bought, or held for a person when every answer to the rules' purchases was lost.
    assert!(purchases + held.len() >= 1, "something was decided despite the faults");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_answered_5xx_after_ec2_made_it_is_adopted_and_never_resent() {
    let h = H::new("ambig5xx", &market(), "100000", 0, 0).await;
    let r = rule("west", &["us-west-2"], "10000", 1, 4);
    h.put_rules(std::slice::from_ref(&r)).await;
    let market = h.ambiguous_market(1, None).await;
    let first = h.scan_on(&market).await;
    assert!(matches!(first.outcomes[0].action, Some(Outcome::Unknown { .. })), "{first:#?}");
    assert_eq!(h.sim.purchases().await.len(), 1, "EC2 did buy");
    // The next run, same minute: adopts by tag, buys nothing more.
    let second = h.scan_on(&market).await;
    assert!(matches!(&second.settled[..], [Settled::Adopted { .. }]), "{second:#?}");
    assert!(matches!(second.outcomes[0].action, Some(Outcome::Skipped { .. })), "{second:#?}");
    assert_eq!(h.sim.state().await["calls"]["PurchaseCapacityBlock"], 1, "never re-sent");
    let held = assert_converged(&h, std::slice::from_ref(&r), &h.aws.alerts().await).await;
    assert!(held.is_empty(), "{held:#?}");
}

/// A 500 may come before or after EC2 acted: the purchase's outcome is unknown, and EC2's
/// silence afterwards is not evidence (it may list a reservation late). So the fee stays
/// committed and the rule blocked past the grace, a person is told once, and the purchase is
/// never sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_answered_5xx_that_ec2_did_not_make_is_held_for_a_person() {
    let h = H::new("noop5xx", &market(), "100000", 0, 0).await;
    let r = rule("west", &["us-west-2"], "10000", 1, 4);
    h.put_rules(std::slice::from_ref(&r)).await;
    // The simulator answers this one PurchaseCapacityBlock with its real 500 (before acting).
    let market = h.ambiguous_market(0, Some(h.sim.url.clone())).await;
    let store = h.aws.store();
    let first = h.scan_on(&market).await;
    assert!(matches!(first.outcomes[0].action, Some(Outcome::Unknown { .. })), "{first:#?}");
    assert_eq!(h.sim.state().await["faults_injected"]["error_5xx"], 1);
    let period = Period::of(h.now());
    let committed = || {
        let (store, period) = (&store, &period);
        async move { store.usage(&BudgetOwner::Rule("west".into()), period).await.unwrap().unwrap().committed.amount() }
    };
    assert_eq!(committed().await, Decimal::from(528), "held while the outcome is unknown");
    assert!(h.sim.purchases().await.is_empty(), "EC2 did not act");
    // Within the grace and long after it alike: open, the fee held, nothing else bought.
    for minutes in [10, 10, 60, 180] {
        h.advance_minutes(minutes).await;
        let again = h.scan_on(&market).await;
        assert!(matches!(&again.settled[..], [Settled::StillOpen { .. }]), "{again:#?}");
        assert!(matches!(again.outcomes[0].action, Some(Outcome::Skipped { .. })), "{again:#?}");
        assert_eq!(committed().await, Decimal::from(528));
    }
    assert_eq!(h.sim.state().await["calls"]["PurchaseCapacityBlock"], 1, "never re-sent");
    assert!(h.sim.purchases().await.is_empty());
    let alerts = h.aws.alerts().await;
    assert_eq!(alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "outcome-unknown").count(), 1, "told once");
}
