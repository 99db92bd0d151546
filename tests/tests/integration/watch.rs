//! The market watch on the simulator's describe limit: an offering that appears while a scan
//! asks is bought in that scan, on sight; overlapping scans never ask one region at once and
//! lose none of each other's memory; the learned pace is kept between scans.

use std::sync::{Arc, Mutex};

use capblock_shared::app::purchase::Outcome;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::offering::Offering;
use capblock_shared::memory::{Call, Hook, HookVerdict, Hooked, Kind};
use capblock_shared::ports::{MarketError, MarketMemory, OfferingQuery, OfferingSource};
use capblock_tests::{Rig, RuleToml, ScenarioToml, Sim};

const STACK: &str = "capblock-test";
const CLOCK: &str = "2026-12-01T00:00:00Z";

/// 16 questions in us-east-1 (counts 1-8 x 1-4 days), each with one offering at 3.50 per
/// GPU-hour until 01:00, 2.50 from then; the describe limit sped up 40 times (a burst of 2, one
/// call per 100 ms), as the rig's pace assumes.
fn market(seed: u64) -> String {
    market_limited(seed, "describe_limit = { burst = 2, refill_secs = 0.1 }")
}

fn market_limited(seed: u64, describe_limit: &str) -> String {
    ScenarioToml::new(seed, CLOCK)
        .behaviour(describe_limit)
        .payment("succeed", None)
        .raw(
            r#"[[market]]
region = "us-east-1"
instance_type = "p5.48xlarge"
azs = ["us-east-1a"]
counts = [1, 2, 4, 8]
durations_days = [1, 2, 3, 4]
start_days = [2]
price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "3.50" }, { from = "2026-12-01T01:00:00Z", usd_per_accelerator_hour = "2.50" } ]
"#,
        )
        .build()
}

fn rule(h: &Rig) -> capblock_shared::domain::rule::Rule {
    RuleToml::p5("watch")
        .mode("live")
        .instance_counts(&[1, 2, 4, 8])
        .durations_days(&[1, 2, 3, 4])
        .max_price("3.00")
        .budget("1000000")
        .max_blocks_held(1)
        .rule(h.now())
}

/// How many DescribeCapacityBlockOfferings calls the simulator had answered when the purchase
/// was sent; after the second answer, the market moves an hour on (its price drops under the
/// threshold), before the scan asks again. A question asked after the first cheap answer is
/// held here until the purchase is sent: the interleaving is the test's, not the machine's (a
/// slow purchase path must not let the asking finish first). A scan that does not buy on sight
/// never sends it: the hold then gives up once, after 30 s, and the test fails as it should.
struct CountAtPurchase {
    sim_url: String,
    /// The adapter the hook stands before, shared with its `Hooked`: the hook makes the
    /// offerings call itself, to move the market on after its answer.
    real: Arc<Ec2Market>,
    describes: Mutex<Option<u64>>,
    answers: std::sync::atomic::AtomicU32,
    sent: tokio::sync::watch::Sender<bool>,
    gave_up: std::sync::atomic::AtomicBool,
}

impl CountAtPurchase {
    /// The simulator's adapter behind this hook.
    async fn market(sim: &Sim) -> Hooked<Ec2Market, CountAtPurchase> {
        let real = Arc::new(sim.market().await);
        let hook = CountAtPurchase {
            sim_url: sim.url.clone(),
            real: real.clone(),
            describes: Mutex::new(None),
            answers: Default::default(),
            sent: tokio::sync::watch::channel(false).0,
            gave_up: Default::default(),
        };
        Hooked::sharing(&real, hook)
    }

    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        use std::sync::atomic::Ordering::SeqCst;
        // The third answer is the first cheap one; a question after it waits for the purchase.
        if self.answers.load(SeqCst) >= 3 && !self.gave_up.load(SeqCst) {
            let mut sent = self.sent.subscribe();
            let waited = tokio::time::timeout(std::time::Duration::from_secs(30), sent.wait_for(|s| *s)).await;
            if waited.is_err() {
                self.gave_up.store(true, SeqCst);
            }
        }
        let answer = self.real.offerings(q).await;
        if self.answers.fetch_add(1, SeqCst) + 1 == 2 {
            capblock_tests::http("POST", &format!("{}/_sim/clock", self.sim_url), r#"{"advance_secs": 3600}"#).await;
        }
        answer
    }
}

async fn describes(sim_url: &str) -> u64 {
    let (_, text) = capblock_tests::http("GET", &format!("{sim_url}/_sim/state"), "").await;
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["calls"]["DescribeCapacityBlockOfferings"].as_u64().unwrap_or(0)
}

#[async_trait::async_trait]
impl Hook for CountAtPurchase {
    async fn before(&self, call: &Call<'_>) -> HookVerdict {
        if call.is("purchase") && matches!(call.kind, Kind::Buy { live: true }) {
            *self.describes.lock().unwrap() = Some(describes(&self.sim_url).await);
            self.sent.send_replace(true);
        }
        match call.arg::<OfferingQuery>() {
            Some(q) if call.is("offerings") => HookVerdict::answer(self.offerings(q).await),
            _ => HookVerdict::Proceed,
        }
    }
}

/// Nothing qualifies when the scan starts; after its second answer, the price drops under the
/// threshold. The answers after that hold the cheap offering, and the rule buys it then, while
/// the other questions are still being asked (not after the asking time), without a re-check
/// call: the answer is seconds old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offering_that_appears_mid_run_is_bought_in_that_run_on_sight() {
    let h = Rig::paced("on-sight", &market(81), CLOCK, STACK).await;
    h.put_rules(&[rule(&h)]).await;
    let hooked = CountAtPurchase::market(&h.sim).await;
    let report = h.scanner(&hooked, &h.notifier, &h.scan).run(h.now()).await.unwrap();
    let Some(Outcome::Bought { .. }) = report.outcomes[0].action.clone() else { panic!("{report:#?}") };
    assert_eq!(h.sim.purchases().await.len(), 1);
    let at_purchase = hooked.hook.describes.lock().unwrap().expect("a purchase was sent");
    let total = describes(&h.sim.url).await;
    assert!(at_purchase < total, "asking went on after the purchase: {at_purchase} calls then, {total} in all");
    let east = &report.regions["us-east-1"];
    assert_eq!(east.asked as u64, total, "no re-check call: every call was one of the run's questions");
}

/// Two scans at once: the second finds the region claimed by the first and leaves it alone
/// (no question asked twice in one slot); the first's memory, pace and watch are saved; a scan
/// after them asks the region again from the pace the first learned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_scans_never_ask_one_region_at_once_and_lose_no_memory() {
    let h = Rig::paced("overlap", &market(82), CLOCK, STACK).await;
    h.put_rules(&[rule(&h)]).await;
    // The first scan's first question is held in the network: the first holds the region's
    // claim while the second runs, whatever the machine's speed; then the question goes on.
    h.sim.behaviour(r#"{"hold_actions": ["DescribeCapacityBlockOfferings"]}"#).await;
    let (a, b) = tokio::join!(h.scan(), async {
        while h.sim.held().await["DescribeCapacityBlockOfferings"].as_u64().unwrap_or(0) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let b = h.scan().await;
        h.sim.behaviour(r#"{"hold_actions": []}"#).await;
        h.sim.release(true).await;
        b
    });
    let (ea, eb) = (&a.regions["us-east-1"], &b.regions["us-east-1"]);
    assert!(!ea.elsewhere && ea.asked > 0, "{ea:?}");
    assert!(eb.elsewhere && eb.asked == 0, "the second run left the region to the first: {eb:?}");
    let state = h.sim.state().await;
    assert_eq!(state["calls"]["DescribeCapacityBlockOfferings"].as_u64().unwrap(), ea.asked as u64);
    let east = "us-east-1".parse().unwrap();
    let memory = h.store.region_memory(&east).await.unwrap();
    assert_eq!(memory.asked.len(), ea.answered, "every answer of the first run kept");
    let pace = memory.pace.expect("the learned pace is kept");
    let coverage = memory.coverage.expect("the coverage is kept");
    assert_eq!((coverage.questions, coverage.calls as usize), (16, ea.asked));
    // The claim was given back: the next scan asks the region, from the pace learned.
    let c = h.scan().await;
    assert!(!c.regions["us-east-1"].elsewhere && c.regions["us-east-1"].asked > 0);
    let after = h.store.region_memory(&east).await.unwrap().pace.unwrap();
    assert!(after.gap_ms <= pace.gap_ms || after.limit_ms.is_some(), "{pace:?} then {after:?}");
}

/// A scan every minute writes a question's prices to the history when they change, and at most
/// every 10 minutes while they do not: not every offering every minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_price_history_is_written_on_change_and_every_ten_minutes() {
    let h = Rig::paced("history", &market(83), CLOCK, STACK).await;
    h.put_rules(&[rule(&h)]).await;
    let first = h.scan().await;
    assert!(first.observations_written > 0, "{first:#?}");
    let answered = first.regions["us-east-1"].answered;
    h.advance_minutes(1).await;
    let same = h.scan().await;
    assert!(same.regions["us-east-1"].answered > 0);
    // Only questions not answered by the first run (its answers are a minute old and unchanged).
    assert!(
        same.observations_written < first.observations_written,
        "{} then {}",
        first.observations_written,
        same.observations_written
    );
    h.advance_minutes(10).await;
    let later = h.scan().await;
    assert!(later.observations_written > 0 && answered > 0, "{later:#?}");
}

/// On the simulator's describe limit (sped up: a burst of 2, one call per 100 ms), the learned
/// pace rises over scans of a quiet account to about the refill, and falls well below it when a
/// notebook in the account asks faster than the refill; the refusals it meets then are counted
/// as others' (contended), and the notebook's own calls are refused too, which is why the pace
/// gives way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pace_rises_on_a_quiet_account_and_falls_when_another_caller_spends_the_limit() {
    let h = Rig::paced("pace", &market(84), CLOCK, STACK).await;
    h.put_rules(&[rule(&h)]).await;
    let east = "us-east-1".parse().unwrap();
    let start = h.scan.describe.pace();
    for _ in 0..3 {
        h.scan().await;
        h.advance_minutes(1).await;
    }
    let quiet = h.store.region_memory(&east).await.unwrap().pace.unwrap();
    assert!(quiet.gap() < start, "rose from {start:?}: {quiet:?}");
    // A notebook asking every 80 ms: more than the whole refill.
    h.sim.behaviour(r#"{"describe_limit_others": [{"name": "notebook", "calls": 1, "every_secs": 0.08}]}"#).await;
    let mut contended = 0;
    for _ in 0..3 {
        contended += h.scan().await.regions["us-east-1"].contended;
        h.advance_minutes(1).await;
    }
    let busy = h.store.region_memory(&east).await.unwrap().pace.unwrap();
    assert!(busy.gap() > quiet.gap() * 2, "gave way: {quiet:?} then {busy:?}");
    assert!(contended > 0, "refusals counted as others'");
    let state = h.sim.state().await;
    assert!(state["describe_limit_others"]["refused"].as_u64().unwrap() > 0, "{state}");
}

/// The watch over member accounts: each member lends its own describe limit through its
/// read-only watch role (assumed on moto's STS; the simulator tells the caller's account from
/// the credentials and keeps a bucket per account and region). With two members a run answers
/// three times the questions one account can, each question is asked by one account only, each
/// member's pace is remembered, and the purchase is the buying account's.
///
/// The limit here is a burst of 2 that does not refill within the test (one call per 1000 s), so
/// what each account may answer is a count the test sets, not a rate the machine's speed
/// decides: one account answers exactly 2 of the 16 questions in a run, three accounts 6, on a
/// fast machine or a loaded one. The asking time (10 s) only has to fit 2 calls per account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_accounts_lend_their_describe_limit_and_each_question_is_asked_once() {
    const MEMBERS: [&str; 2] = ["111111111111", "222222222222"];
    const NO_REFILL: &str = "describe_limit = { burst = 2, refill_secs = 1000.0 }";
    let bounded = |h: &mut Rig| h.scan.describe.ask_for = std::time::Duration::from_secs(10);

    let mut alone = Rig::paced("watch-alone", &market_limited(85, NO_REFILL), CLOCK, STACK).await;
    bounded(&mut alone);
    alone.put_rules(&[rule(&alone)]).await;
    let one = alone.scan().await.regions["us-east-1"].answered;
    assert_eq!(one, 2, "one account answers its burst");

    let mut h = Rig::paced("watch-members", &market_limited(85, NO_REFILL), CLOCK, STACK).await;
    bounded(&mut h);
    h.put_rules(&[rule(&h)]).await;
    let lent = members(&h, &MEMBERS).await;
    let scanner = h.with_members(&lent);
    let report = scanner.run(h.now()).await.unwrap();
    let east = &report.regions["us-east-1"];
    assert_eq!(east.accounts, 3);
    assert!(report.watch_failed.is_empty(), "{:?}", report.watch_failed);
    assert_eq!(east.answered, 3 * one, "three accounts answer three bursts");

    let log = h.sim.control("GET", "/_sim/describe/calls", "").await;
    let calls = log["calls"].as_array().unwrap();
    let served: Vec<&serde_json::Value> = calls.iter().filter(|c| c["served"] == true).collect();
    assert_eq!(served.len(), east.answered, "every served call answered a question: {log}");
    let mut asked: Vec<String> =
        served.iter().map(|c| format!("{} {} {}", c["instance_type"], c["count"], c["duration_hours"])).collect();
    asked.sort();
    let n = asked.len();
    asked.dedup();
    assert_eq!(asked.len(), n, "no question asked twice across accounts");
    for account in MEMBERS.iter().chain(&["111122223333"]) {
        assert!(served.iter().any(|c| c["account"] == *account), "{account} asked nothing: {log}");
    }

    let memory = h.store.region_memory(&"us-east-1".parse().unwrap()).await.unwrap();
    assert_eq!(memory.helper_paces.keys().cloned().collect::<Vec<_>>(), MEMBERS, "{memory:?}");
    // The price is above the threshold until 01:00; after it, a run buys, in the buying account
    // (under the usual sped-up limit: a new limit starts every bucket full, and what is checked
    // now is who buys, not how much is asked).
    h.advance_minutes(61).await;
    h.sim.behaviour(r#"{"describe_limit": {"burst": 2, "refill_secs": 0.1}}"#).await;
    let report = scanner.run(h.now()).await.unwrap();
    let Some(Outcome::Bought { .. }) = report.outcomes[0].action.clone() else { panic!("{report:#?}") };
    assert_eq!(h.sim.purchases().await.len(), 1);
}

/// A member account whose Capacity Block quota for p5 is 0 (every account starts at 0) is
/// refused every p5 search: its lane stops asking after a few calls of its own limit, the other
/// accounts answer its questions, its refusals are not counted as others' (contended), the scan
/// names it and announces it once, and a later scan gives it one call (a probe), not a run's worth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_quota_stops_asking_is_announced_once_and_inflates_nothing() {
    const ZERO: &str = "111111111111";
    const LENDS: &str = "222222222222";
    const BUYER: &str = "111122223333";
    let scenario = format!("{}\n[[accounts]]\nid = \"{ZERO}\"\nzero_quota_families = [\"p5\"]\n", market(87));
    let mut h = Rig::paced("member-quota", &scenario, CLOCK, STACK).await;
    // The other lanes are held until the member's lane has made its calls, so the run's asking
    // time must outlast those calls however slow the machine (the rig's 3 s did not, under load
    // with the date ahead): when the asking stops is not what this test checks; it ends when
    // every question is answered.
    h.scan.describe.ask_for = std::time::Duration::from_secs(120);
    h.put_rules(&[rule(&h)]).await;
    let lent = members(&h, &[ZERO, LENDS]).await;
    let scanner = h.with_members(&lent);
    let refused = || async {
        let state = h.sim.state().await;
        state["faults_injected"]["quota_zero_by_account"][ZERO].as_u64().unwrap_or(0)
    };
    // The lanes that answer wait in the network until the member's lane has made the calls it
    // makes before stopping: which lane is faster is the test's choice, not the machine's.
    let hold =
        format!(r#"{{"hold_actions": ["DescribeCapacityBlockOfferings"], "hold_accounts": ["{LENDS}", "{BUYER}"]}}"#);
    let gated = |refusals: u64| {
        let hold = hold.clone();
        let h = &h;
        let scanner = &scanner;
        async move {
            h.sim.behaviour(&hold).await;
            let (report, ()) = tokio::join!(scanner.run(h.now()), async {
                for _ in 0..6000 {
                    if refused().await >= refusals {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                h.sim.behaviour(r#"{"hold_actions": [], "hold_accounts": []}"#).await;
                h.sim.release(true).await;
            });
            report.unwrap()
        }
    };
    let first = gated(3).await;
    let east = &first.regions["us-east-1"];
    assert_eq!(first.watch_refused.iter().collect::<Vec<_>>(), [&format!("{ZERO} us-east-1 p5")], "{first:#?}");
    assert!(first.watch_failed.is_empty(), "refused is not failed: {:?}", first.watch_failed);
    assert_eq!(east.contended, 0, "nobody else spends any limit here: {east:?}");
    assert!(east.answered > 0 && first.quota_zero.is_empty(), "{first:#?}");
    assert_eq!(refused().await, 3, "a few calls of the member's own limit, then it stops");
    let log = h.sim.control("GET", "/_sim/describe/calls", "").await;
    let lent = log["calls"].as_array().unwrap().iter().any(|c| c["account"] == LENDS && c["served"] == true);
    assert!(lent, "the member with a quota lends its limit: {log}");
    let alerts = h.aws.alerts().await;
    assert_eq!(capblock_tests::event_types(&alerts), ["member-quota-zero"]);
    let text = alerts[0].body["content"]["description"].as_str().unwrap();
    assert!(text.contains(ZERO) && text.contains("quota"), "{text}");

    h.advance_minutes(1).await;
    let second = gated(4).await;
    assert_eq!(second.watch_refused, first.watch_refused, "still refused");
    assert_eq!(refused().await, 4, "one call (a probe) a scan once noted");
    assert_eq!(second.regions["us-east-1"].contended, 0);
    assert!(h.aws.alerts().await.is_empty(), "announced once");
    let memory = h.store.region_memory(&"us-east-1".parse().unwrap()).await.unwrap();
    assert_eq!(memory.member_refused.keys().collect::<Vec<_>>(), [&format!("{ZERO} p5")], "{memory:?}");
    assert!(h.sim.purchases().await.is_empty(), "nothing is cheap enough before 01:00");
}

/// What `aws::accounts::member_markets` builds for `accounts`, with the EC2 endpoint on this
/// test's own simulator (the deployed function's env points EC2 there and STS at moto): each
/// member's watch role assumed on moto's STS.
async fn members(h: &Rig, accounts: &[&str]) -> Vec<capblock_shared::ports::MemberMarket> {
    use capblock_shared::aws::accounts::{assumed, market_role_in};
    let mut lent = Vec::new();
    for account in accounts {
        let role = market_role_in(Some("us-east-1"), account, STACK);
        let provider = assumed(&h.aws.sdk, &role, &format!("capblock-watch-{STACK}")).await;
        let config = h
            .sim
            .sdk(capblock_tests::quick_timeouts())
            .await
            .into_builder()
            .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(provider))
            .build();
        lent.push(capblock_shared::ports::MemberMarket {
            account: account.to_string(),
            market: Box::new(Ec2Market::new(config)),
        });
    }
    lent
}

/// Nothing public says whether an offering id one account was shown is another's to buy: the
/// simulator plays both readings. The buying account asks the first question (one instance, too
/// dear), the member the second (two instances, cheap enough); under each reading the block
/// the member found is bought once, by the buying account, under the id EC2 showed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_a_member_found_is_bought_once_under_each_reading_of_offering_ids() {
    for reading in ["shared", "per_account"] {
        let scenario = ScenarioToml::new(86, CLOCK)
            .behaviour("describe_limit = { burst = 2, refill_secs = 0.1 }")
            .behaviour(&format!("offering_ids_across_accounts = \"{reading}\""))
            .payment("succeed", None)
            // One instance too dear, two cheap enough.
            .p5_counts("us-east-1", &[1], &[2], "3.50")
            .p5_counts("us-east-1", &[2], &[2], "2.50")
            .build();
        let mut h = Rig::paced(&format!("member-ids-{reading}"), &scenario, CLOCK, STACK).await;
        // The member's first call waits for its role on moto's STS: however slow that is, the
        // run asks until both questions are answered (when asking stops is not checked here).
        h.scan.describe.ask_for = std::time::Duration::from_secs(120);
        let rule = RuleToml::p5("member-found")
            .mode("live")
            .instance_counts(&[1, 2])
            .durations_days(&[1])
            .max_price("3.00")
            .budget("1000000")
            .max_blocks_held(1)
            .rule(h.now());
        h.put_rules(&[rule]).await;
        let lent = members(&h, &["111111111111"]).await;
        let scanner = h.with_members(&lent);
        let report = scanner.run(h.now()).await.unwrap();
        let Some(Outcome::Bought { .. }) = report.outcomes[0].action.clone() else { panic!("{reading}: {report:#?}") };
        let purchases = h.sim.purchases().await;
        assert_eq!(purchases.len(), 1, "{reading}: {purchases:?}");
        let log = h.sim.control("GET", "/_sim/describe/calls", "").await;
        let by_member = log["calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["account"] == "111111111111" && c["count"] == 2 && c["served"] == true);
        assert!(by_member, "{reading}: the member asked the two-instance question: {log}");
    }
}
