//! Extensions of a held block, end to end: a block bought through the real scan, then the real
//! tracker on the simulator's clock (DynamoDB and SNS on moto), for the cases where an
//! extension does not simply go through: its answer is lost, its payment fails, the region
//! cannot be asked at the moment it would be settled, and dry-run.
//!
//! One p5.48xlarge block in us-east-1, bought Tue 12-01 00:00 for Thu 12-03 11:30 -> Fri 12-04
//! 11:30 at 3.00 per GPU-hour (fee 576.00), paid at 03:00. Its rule extends it by one day at up
//! to 3.00 within 48 h of the end; the market sells that day at 2.50 (fee 480.00). The tracker
//! decides at Wed 12-02 12:00; the extension's payment deadline is then min(12:00 + 12 h,
//! end - 5 min) = Thu 12-03 00:00, and capblock gives up on it 15 minutes later.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use async_trait::async_trait;
use capblock_shared::app::extend::ExtensionAction;
use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::scan::{ScanSettings, Scanner};
use capblock_shared::app::track::{TrackReport, TrackSettings, Tracker};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::block::Block;
use capblock_shared::domain::budget::{BudgetOwner, BudgetUsage, Period};
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::extension::{ExtensionIntent, ExtensionState};
use capblock_shared::domain::ids::Region;
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::rule::{Mode, Rule};
use capblock_shared::domain::stack::StackSettings;
use capblock_shared::memory::{Call, Failure, Hook, HookVerdict, Hooked, MemoryReminders};
use capblock_shared::ports::{
    BlockStore, ExtensionLedger, ExtensionMarket, ExtensionRecord, Ledger, MarketError, RuleStore,
};
use capblock_tests::{Aws, Published, RuleToml, ScenarioToml, Sim, assert_slack_schema};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::Value;

const STACK: &str = "capblock-extend";
const T0: &str = "2026-12-01T00:00:00Z";

/// The market: the block's day at 3.00, its one-day extension at 2.50.
fn scenario() -> String {
    ScenarioToml::new(11, T0)
        .payment("succeed", Some(3))
        .p5("us-east-1", &[2], "3.00")
        .extension_price(Some("2.50"))
        .build()
}

/// The p5 rule in `mode`, extending by up to `max_days` days at up to 3.00 within 48 h of the end.
fn rule(mode: Mode, max_days: u32) -> Rule {
    RuleToml::p5("p5")
        .mode(mode.as_str())
        .extra(&format!(
            "[extend]\nmax_price_per_accelerator_hour = \"3.00\"\nmax_days = {max_days}\ndecide_hours_before_end = 48"
        ))
        .rule(T0.parse().unwrap())
}

/// Lets every purchase through to the simulator, unless told to refuse extensions (as EC2 does
/// with InsufficientCapacity when the extension sold out between the offer and the purchase).
#[derive(Default)]
struct ExtensionHook {
    refuse: AtomicBool,
    refused: AtomicU32,
    history: Mutex<History>,
}

/// How DescribeCapacityBlockExtensionHistory answers.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum History {
    /// The simulator's answer.
    #[default]
    Real,
    /// 503 Service Unavailable, as the adapter reads a 5xx: an unknown outcome.
    Unanswered,
    /// Answered, without the block's extensions (not listed yet).
    Unlisted,
}

#[async_trait]
impl Hook for ExtensionHook {
    async fn before(&self, call: &Call<'_>) -> HookVerdict {
        if call.is("purchase_extension") && self.refuse.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return HookVerdict::Fail(Failure::Rejected {
                code: "InsufficientCapacity".into(),
                message: "there is not enough capacity to extend this block".into(),
            });
        }
        if !call.is("extension_history") {
            return HookVerdict::Proceed;
        }
        let mode = *self.history.lock().unwrap();
        match mode {
            History::Real => HookVerdict::Proceed,
            History::Unlisted => HookVerdict::answer(Ok::<Vec<ExtensionRecord>, MarketError>(Vec::new())),
            History::Unanswered => HookVerdict::Fail(Failure::Unknown("service error: 503 Service Unavailable".into())),
        }
    }
}

/// One simulator, one moto table and the clocks of both moved together.
struct X {
    sim: Sim,
    aws: Aws,
    market: Hooked<Ec2Market, ExtensionHook>,
    reminders: MemoryReminders,
    now: Mutex<DateTime<Utc>>,
    settings: TrackSettings,
    id: String,
    /// The block's end as bought.
    end: DateTime<Utc>,
}

impl X {
    /// A block bought live at T0 and paid at 03:00 (its messages drained), the clock at Wed
    /// 12-02 12:00: inside the extension window. The tracker runs with `stack_mode`.
    async fn at_the_decision(name: &str, stack_mode: Mode) -> X {
        X::at_the_decision_with(name, stack_mode, 1).await
    }

    /// The end of each reminder sync the tracker asked for.
    fn reminders_synced(&self) -> Vec<DateTime<Utc>> {
        self.reminders.calls().into_iter().filter(|(what, _, _)| what == "sync").map(|(_, _, end)| end).collect()
    }

    /// [`X::at_the_decision`] with a rule that may extend by `max_days` days in all.
    async fn at_the_decision_with(name: &str, stack_mode: Mode, max_days: u32) -> X {
        let sim = Sim::start(&scenario()).await;
        let market = Hooked::new(sim.market().await, ExtensionHook::default());
        let mut x = X {
            aws: Aws::fresh(name).await,
            market,
            sim,
            reminders: MemoryReminders::default(),
            now: Mutex::new(T0.parse().unwrap()),
            settings: TrackSettings {
                stack: StackSettings {
                    name: STACK.into(),
                    mode: stack_mode,
                    account_budget: None,
                    team_budgets: Default::default(),
                },
                payment_warning_hours: vec![6, 1],
                adopt_untagged: false,
                regions: vec!["us-east-1".parse().unwrap()],
            },
            id: String::new(),
            end: "2026-12-04T11:30:00Z".parse().unwrap(),
        };
        x.aws.store().put_rule(&rule(Mode::Live, max_days), None).await.unwrap();
        let scan = ScanSettings {
            stack: StackSettings {
                name: STACK.into(),
                mode: Mode::Live,
                account_budget: None,
                team_budgets: Default::default(),
            },
            describe: capblock_tests::fixtures::fast_describe(),
            settles: true,
        };
        let (store, notifier) = (x.aws.store(), x.aws.notifier());
        let catalog = Mutex::new(AcceleratorCatalog::new());
        let report = Scanner {
            market: &x.market,
            store: &store,
            notifier: &notifier,
            catalog: &catalog,
            settings: &scan,
            members: &[],
        }
        .run(x.now())
        .await
        .unwrap();
        let Some(Outcome::Bought { reservation_id, .. }) = report.outcomes[0].action.clone() else {
            panic!("{report:#?}")
        };
        x.id = reservation_id;
        x.advance_minutes(3 * 60).await;
        x.track().await;
        assert_eq!(x.block().await.state, BlockState::Scheduled);
        assert_eq!(x.block().await.end, x.end);
        assert_eq!(x.events().await, ["purchased", "payment-succeeded"]);
        x.advance_minutes(33 * 60).await;
        assert_eq!(x.now(), at("2026-12-02T12:00:00Z"));
        x
    }

    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap()
    }

    async fn advance_minutes(&self, minutes: i64) {
        self.sim.control("POST", "/_sim/clock", &format!("{{\"advance_secs\": {}}}", minutes * 60)).await;
        *self.now.lock().unwrap() += Duration::minutes(minutes);
    }

    /// Moves both clocks to `t` (later than now).
    async fn advance_to(&self, t: &str) {
        let minutes = (at(t) - self.now()).num_minutes();
        assert!(minutes >= 0, "{t} is in the past");
        self.advance_minutes(minutes).await;
    }

    /// One tracker run that must see every block and every region.
    async fn track(&self) -> TrackReport {
        let report = self.track_anyway().await;
        assert!(report.errors.is_empty() && report.failed_regions.is_empty(), "{report:#?}");
        report
    }

    /// One tracker run, whatever EC2 answers.
    async fn track_anyway(&self) -> TrackReport {
        let (store, notifier) = (self.aws.store(), self.aws.notifier());
        let t = Tracker {
            market: &self.market,
            store: &store,
            notifier: &notifier,
            reminders: &self.reminders,
            settings: &self.settings,
            action_runner: None,
        };
        t.run(self.now()).await.unwrap()
    }

    async fn block(&self) -> Block {
        self.aws.store().get_block(&self.id).await.unwrap().unwrap()
    }

    async fn intents(&self) -> Vec<ExtensionIntent> {
        self.aws.store().extensions_of(&self.id).await.unwrap()
    }

    /// The one extension intent of the block.
    async fn intent(&self) -> ExtensionIntent {
        let mut all = self.intents().await;
        assert_eq!(all.len(), 1, "{all:#?}");
        all.remove(0)
    }

    /// The rule's (committed, spent) this month.
    async fn budget(&self) -> (Decimal, Decimal) {
        let u: BudgetUsage =
            self.aws.store().usage(&BudgetOwner::Rule("p5".into()), &Period::of(self.now())).await.unwrap().unwrap();
        (u.committed.amount(), u.spent.amount())
    }

    /// The Slack messages published since the last call (drained), all in the block's thread.
    async fn alerts(&self) -> Vec<Published> {
        let alerts = self.aws.alerts().await;
        for a in &alerts {
            assert_slack_schema(&a.body);
            assert_eq!(a.body["metadata"]["threadId"], self.id.as_str(), "{}", a.body);
        }
        alerts
    }

    async fn events(&self) -> Vec<String> {
        self.alerts().await.iter().map(event).collect()
    }

    /// PurchaseCapacityBlockExtension calls that reached the simulator.
    async fn extension_calls(&self) -> u64 {
        self.sim.state().await["calls"]["PurchaseCapacityBlockExtension"].as_u64().unwrap_or(0)
    }

    /// The extensions EC2 holds for any block.
    async fn ec2_extensions(&self) -> Vec<Value> {
        self.sim.state().await["extensions"].as_array().cloned().unwrap_or_default()
    }

    /// Tells the market how the block's extension `offering_id` settles.
    async fn extension_payment(&self, offering_id: &str, outcome: &str, after_hours: Option<u32>) {
        let after = after_hours.map(|h| format!(", \"after_hours\": {h}")).unwrap_or_default();
        self.sim
            .control(
                "POST",
                "/_sim/payment",
                &format!(
                    r#"{{"reservation_id": "{}", "extension_offering_id": "{offering_id}", "outcome": "{outcome}"{after}}}"#,
                    self.id
                ),
            )
            .await;
    }
}

fn at(t: &str) -> DateTime<Utc> {
    t.parse().unwrap()
}

fn event(a: &Published) -> String {
    a.body["metadata"]["eventType"].as_str().unwrap().to_string()
}

fn text(a: &Published) -> String {
    format!("{} {} {}", a.body["content"]["title"], a.body["content"]["description"], a.body["content"]["nextSteps"])
}

fn bought(report: &TrackReport) -> bool {
    report.extensions.iter().any(|a| matches!(a, ExtensionAction::Bought { .. }))
}

/// Runs the tracker at each of `times` (in order); each run must send nothing to EC2's
/// extension purchase, post nothing and leave the intent open in `state`.
async fn quiet_until(x: &X, times: &[&str], state: ExtensionState) {
    for t in times {
        x.advance_to(t).await;
        let report = x.track().await;
        assert!(!bought(&report), "{t}: {report:#?}");
        assert_eq!(x.extension_calls().await, 1, "{t}: never sent again");
        assert_eq!(x.intent().await.state, state, "{t}");
        assert_eq!(x.block().await.end, x.end, "{t}: the end has not moved");
        assert!(x.events().await.is_empty(), "{t}: nothing to say");
    }
}

/// Sends the extension purchase with its answer lost: the run reports an unknown outcome, EC2
/// holds one extension, the intent stays Sent with the fee reserved, nothing is posted.
async fn lose_the_extension_answer(x: &X) -> String {
    x.sim.behaviour(r#"{"drop_extension_purchase_response": true, "timeout_secs": 1}"#).await;
    let report = x.track().await;
    let unknown: Vec<&ExtensionAction> =
        report.extensions.iter().filter(|a| matches!(a, ExtensionAction::Unknown { .. })).collect();
    assert_eq!(unknown.len(), 1, "{report:#?}");
    x.sim.behaviour(r#"{"drop_extension_purchase_response": false}"#).await;
    let state = x.sim.state().await;
    assert_eq!(state["faults_injected"]["dropped_extension_purchase_responses"], 1);
    let ec2 = x.ec2_extensions().await;
    assert_eq!(ec2.len(), 1, "EC2 took it: {ec2:#?}");
    assert_eq!(x.extension_calls().await, 1);
    let intent = x.intent().await;
    assert_eq!(intent.state, ExtensionState::Sent);
    assert_eq!(ec2[0]["offering_id"], intent.offer.id.as_str());
    assert_eq!(x.budget().await, (dec!(1056), dec!(576)), "the extension's fee stays reserved");
    assert!(x.events().await.is_empty(), "nothing known yet, nothing said");
    intent.offer.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_extension_answer_is_never_resent_and_adopted_once_the_end_moves() {
    let x = X::at_the_decision("ext-lost-paid", Mode::Live).await;
    lose_the_extension_answer(&x).await;

    // EC2 takes payment at 15:00 (3 h after the purchase). Until then the block is extendable
    // again in nobody's eyes: capblock sends nothing more and says nothing.
    quiet_until(&x, &["2026-12-02T12:30:00Z", "2026-12-02T13:00:00Z", "2026-12-02T14:59:00Z"], ExtensionState::Sent)
        .await;

    x.advance_to("2026-12-02T15:00:00Z").await;
    let report = x.track().await;
    assert!(report.extensions.iter().any(|a| matches!(a, ExtensionAction::Paid { .. })), "{report:#?}");
    let new_end = x.end + Duration::days(1);
    assert_eq!(x.block().await.end, new_end);
    assert_eq!(x.intent().await.state, ExtensionState::Paid);
    assert_eq!(x.budget().await, (dec!(1056), dec!(1056)), "the fee is spent, once");
    assert_eq!(x.reminders_synced().last(), Some(&new_end), "reminders follow the new end");
    let alerts = x.alerts().await;
    assert_eq!(alerts.iter().map(event).collect::<Vec<_>>(), ["extended"], "one message about the extension");
    let t = text(&alerts[0]);
    assert!(t.contains("480.00 USD") && t.contains("Sat 2026-12-05 11:30 UTC"), "{t}");

    // Later runs, inside the new end's window too: nothing bought (max_days is used up), nothing
    // said about the extension (the block starts at 12-03 11:30).
    let mut later = Vec::new();
    for t in ["2026-12-02T18:00:00Z", "2026-12-03T12:00:00Z", "2026-12-04T12:00:00Z"] {
        x.advance_to(t).await;
        x.track().await;
        later.extend(x.events().await);
    }
    assert_eq!(later, ["delivered"]);
    assert_eq!(x.extension_calls().await, 1, "exactly one extension purchase reached EC2");
    assert_eq!(x.ec2_extensions().await.len(), 1);
    assert_eq!(x.budget().await, (dec!(1056), dec!(1056)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_extension_answer_whose_payment_fails_is_released_when_ec2_says_so() {
    let x = X::at_the_decision("ext-lost-unpaid", Mode::Live).await;
    let offering = lose_the_extension_answer(&x).await;
    // EC2 never takes payment: it fails the extension at its deadline, min(sent + 12 h, end -
    // 35 min) = Thu 00:00, and the end stays.
    x.extension_payment(&offering, "never", None).await;

    // Open while DescribeCapacityBlockExtensionHistory says payment-pending.
    quiet_until(&x, &["2026-12-02T13:00:00Z", "2026-12-02T18:00:00Z", "2026-12-02T23:59:00Z"], ExtensionState::Sent)
        .await;
    assert_eq!(x.ec2_extensions().await[0]["status"], "payment-pending");
    assert_eq!(x.budget().await, (dec!(1056), dec!(576)), "still reserved while EC2 waits for the payment");

    // The first run after EC2 failed it releases it (the end date alone would wait 15 minutes
    // more).
    x.advance_to("2026-12-03T00:01:00Z").await;
    assert_eq!(x.ec2_extensions().await[0]["status"], "payment-failed");
    let report = x.track().await;
    assert!(report.extensions.iter().any(|a| matches!(a, ExtensionAction::Released { .. })), "{report:#?}");
    let intent = x.intent().await;
    assert_eq!(intent.state, ExtensionState::Released);
    assert_eq!(x.budget().await, (dec!(576), dec!(576)), "the fee is released");
    let alerts = x.alerts().await;
    assert_eq!(alerts.iter().map(event).collect::<Vec<_>>(), ["extension-released"], "one message about it");
    let t = text(&alerts[0]);
    assert!(t.contains(&offering) && t.contains("EC2 reports the extension's payment failed"), "{t}");
    assert!(t.contains("Fri 2026-12-04 11:30 UTC"), "the block still ends as bought: {t}");

    // Later runs (the same offering is on sale again): never sent again, released once, nothing
    // more said about it (the block starts at 12-03 11:30).
    let mut later = Vec::new();
    for t in ["2026-12-03T01:00:00Z", "2026-12-03T12:00:00Z", "2026-12-04T09:00:00Z"] {
        x.advance_to(t).await;
        x.track().await;
        later.extend(x.events().await);
        assert_eq!(x.budget().await, (dec!(576), dec!(576)), "{t}: released once");
    }
    assert_eq!(later, ["delivered"]);
    assert_eq!(x.extension_calls().await, 1, "exactly one extension purchase reached EC2");
    assert_eq!(x.intents().await.len(), 1);
    assert_eq!(x.block().await.end, x.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_extension_payment_keeps_the_end_and_releases_the_fee_once() {
    let x = X::at_the_decision("ext-fail", Mode::Live).await;
    let report = x.track().await;
    assert!(bought(&report), "{report:#?}");
    let alerts = x.alerts().await;
    assert_eq!(alerts.iter().map(event).collect::<Vec<_>>(), ["extension-bought"]);
    let intent = x.intent().await;
    assert_eq!(intent.state, ExtensionState::Bought);
    assert_eq!(x.budget().await, (dec!(1056), dec!(576)));
    // EC2 fails the payment an hour after the purchase, long before its deadline.
    x.extension_payment(&intent.offer.id, "fail", Some(1)).await;

    // Pending for an hour: the fee stays reserved, no second extension is sent.
    quiet_until(&x, &["2026-12-02T12:30:00Z", "2026-12-02T12:59:00Z"], ExtensionState::Bought).await;

    // DescribeCapacityBlockExtensionHistory says payment-failed: released at the next run, not
    // 11 hours later at the deadline the end date alone would wait for.
    x.advance_to("2026-12-02T13:01:00Z").await;
    assert_eq!(x.ec2_extensions().await[0]["status"], "payment-failed");
    x.track().await;
    assert_eq!(x.intent().await.state, ExtensionState::Released);
    assert_eq!(x.budget().await, (dec!(576), dec!(576)), "the fee is released");
    let alerts = x.alerts().await;
    assert_eq!(alerts.iter().map(event).collect::<Vec<_>>(), ["extension-released"]);
    let t = text(&alerts[0]);
    assert!(t.contains("Extension not made") && t.contains("Fri 2026-12-04 11:30 UTC"), "{t}");
    assert!(t.contains("fee was released"), "{t}");

    // Released once however often the tracker runs; the block ends at its original end and
    // costs what the block cost.
    for t in ["2026-12-03T01:00:00Z", "2026-12-03T11:30:00Z", "2026-12-04T09:00:00Z"] {
        x.advance_to(t).await;
        x.track().await;
        assert_eq!(x.budget().await, (dec!(576), dec!(576)), "{t}");
    }
    assert_eq!(events_of(&x.alerts().await), ["delivered"], "the block started at 12-03 11:30");
    x.advance_to("2026-12-04T11:30:00Z").await;
    x.track().await;
    let b = x.block().await;
    assert_eq!((b.state, b.end), (BlockState::Expired, x.end));
    let alerts = x.alerts().await;
    assert_eq!(events_of(&alerts), ["expired"]);
    assert!(text(&alerts[0]).contains("Total fee: 576.00 USD"), "{}", text(&alerts[0]));
    assert!(x.reminders_synced().iter().all(|e| *e == x.end), "reminders never left the end");
    assert_eq!(x.extension_calls().await, 1);
    assert_eq!(x.budget().await, (dec!(576), dec!(576)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_extension_is_announced_once_and_its_fee_released() {
    let x = X::at_the_decision("ext-refused", Mode::Live).await;
    x.market.hook.refuse.store(true, Ordering::SeqCst);
    let report = x.track().await;
    assert!(report.extensions.iter().any(|a| matches!(a, ExtensionAction::Refused { .. })), "{report:#?}");
    assert_eq!(x.market.hook.refused.load(Ordering::SeqCst), 1);
    assert_eq!(x.intent().await.state, ExtensionState::Released);
    assert_eq!(x.budget().await, (dec!(576), dec!(576)), "the fee is released at once");
    let alerts = x.alerts().await;
    assert_eq!(events_of(&alerts), ["extension-released"]);
    let t = text(&alerts[0]);
    assert!(t.contains("Extension not made") && t.contains("InsufficientCapacity"), "{t}");
    assert!(t.contains("Fri 2026-12-04 11:30 UTC") && t.contains("fee was released"), "{t}");

    // The refused offering is not asked for again, and nothing more is said about it.
    for t in ["2026-12-02T13:00:00Z", "2026-12-02T20:00:00Z"] {
        x.advance_to(t).await;
        x.track().await;
        assert_eq!(x.market.hook.refused.load(Ordering::SeqCst), 1, "{t}");
        assert!(x.events().await.is_empty(), "{t}");
        assert_eq!(x.budget().await, (dec!(576), dec!(576)), "{t}");
    }
    assert_eq!(x.block().await.end, x.end);
    assert_eq!(x.extension_calls().await, 0, "nothing reached EC2");
}

fn events_of(alerts: &[Published]) -> Vec<String> {
    alerts.iter().map(event).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_that_ec2_moves_back_is_followed_and_not_announced_as_an_extension() {
    let x = X::at_the_decision("ext-revert", Mode::Live).await;
    assert!(bought(&x.track().await));
    let offering = x.intent().await.offer.id;
    x.alerts().await;
    x.advance_to("2026-12-02T15:00:00Z").await; // paid
    x.track().await;
    let new_end = x.end + Duration::days(1);
    assert_eq!(x.block().await.end, new_end);
    assert_eq!(events_of(&x.alerts().await), ["extended"]);

    // EC2 undoes it: the extension's payment is now reported failed and the end is the old one.
    x.extension_payment(&offering, "fail", Some(1)).await;
    x.advance_minutes(30).await;
    x.track().await;
    let b = x.block().await;
    assert_eq!((b.state, b.end), (BlockState::Scheduled, x.end), "the stored end follows EC2 back");
    assert_eq!(x.reminders_synced().last(), Some(&x.end), "and the reminders with it");
    let alerts = x.alerts().await;
    assert_eq!(events_of(&alerts), ["end-moved-back"], "not an 'extended' message");
    let t = text(&alerts[0]);
    assert!(t.contains("Fri 2026-12-04 11:30 UTC") && t.contains("Sat 2026-12-05 11:30 UTC"), "{t}");
    x.track().await;
    assert!(x.alerts().await.is_empty(), "said once");
    assert_eq!(x.extension_calls().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_outage_at_the_deadline_does_not_release_a_paid_extension() {
    let x = X::at_the_decision("ext-outage", Mode::Live).await;
    assert!(bought(&x.track().await));
    x.alerts().await;
    // us-east-1 stops answering before EC2 takes payment (15:00) and until after capblock's
    // deadline for the extension (Thu 00:15): capblock has never seen the end move.
    x.sim.behaviour(r#"{"down_regions": ["us-east-1"], "timeout_secs": 1}"#).await;
    let mut said = Vec::new();
    for t in ["2026-12-02T16:00:00Z", "2026-12-03T00:15:00Z", "2026-12-03T01:00:00Z"] {
        x.advance_to(t).await;
        let report = x.track_anyway().await;
        assert!(report.failed_regions.contains_key("us-east-1"), "{t}: {report:#?}");
        assert_eq!(x.intent().await.state, ExtensionState::Bought, "{t}: not released on a stale end");
        assert_eq!(x.budget().await, (dec!(1056), dec!(576)), "{t}");
        said.extend(x.events().await);
    }
    // Past capblock's deadline for it (00:15) without EC2's word: a person is told, once.
    assert_eq!(said, ["extension-overdue"]);
    x.sim.behaviour(r#"{"down_regions": []}"#).await;
    x.advance_minutes(5).await;
    x.track().await;
    assert_eq!(x.block().await.end, x.end + Duration::days(1));
    assert_eq!(x.intent().await.state, ExtensionState::Paid);
    assert_eq!(x.budget().await, (dec!(1056), dec!(1056)), "the charge is in the budget");
    assert_eq!(events_of(&x.alerts().await), ["extended"]);
    assert_eq!(x.extension_calls().await, 1);
}

/// Several runs inside the window with the stack or the rule in dry-run: one "would extend"
/// message, nothing bought, nothing reserved.
async fn dry_run_announces_once(x: X) {
    let mut first_times = Vec::new();
    for t in ["2026-12-02T12:00:00Z", "2026-12-02T12:05:00Z", "2026-12-02T18:00:00Z", "2026-12-03T12:00:00Z"] {
        x.advance_to(t).await;
        let report = x.track().await;
        let would: Vec<bool> = report
            .extensions
            .iter()
            .filter_map(|a| match a {
                ExtensionAction::WouldExtend { first_time, .. } => Some(*first_time),
                _ => None,
            })
            .collect();
        assert_eq!(would.len(), 1, "{t}: {report:#?}");
        first_times.push(would[0]);
    }
    assert_eq!(first_times, [true, false, false, false]);
    let alerts = x.alerts().await;
    let mut seen = events_of(&alerts);
    seen.sort();
    // The block became active at 12-03 11:30, between these runs.
    assert_eq!(seen, ["delivered", "would-extend"]);
    let would: Vec<&Published> = alerts.iter().filter(|a| event(a) == "would-extend").collect();
    assert_eq!(would.len(), 1, "announced once");
    let t = text(would[0]);
    assert!(
        t.contains("Would extend (dry run)") && t.contains("480.00 USD") && t.contains("Sat 2026-12-05 11:30 UTC"),
        "{t}"
    );
    // One PurchaseCapacityBlockExtension with DryRun=true (the permission check), nothing bought.
    assert_eq!(x.extension_calls().await, 1, "one dry-run call");
    assert!(x.ec2_extensions().await.is_empty());
    assert!(x.intents().await.is_empty(), "no intent");
    assert_eq!(x.budget().await, (dec!(576), dec!(576)), "nothing reserved");
    assert_eq!(x.block().await.end, x.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_stack_announces_would_extend_once_and_buys_nothing() {
    let x = X::at_the_decision("ext-dry-stack", Mode::DryRun).await;
    dry_run_announces_once(x).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_rule_announces_would_extend_once_and_buys_nothing() {
    let x = X::at_the_decision("ext-dry-rule", Mode::Live).await;
    x.aws.store().put_rule(&rule(Mode::DryRun, 1), None).await.unwrap();
    dry_run_announces_once(x).await;
}

/// DescribeCapacityBlockExtensionOfferings calls that reached the simulator.
async fn extension_questions(x: &X) -> u64 {
    x.sim.state().await["calls"]["DescribeCapacityBlockExtensionOfferings"].as_u64().unwrap_or(0)
}

/// Whether extension questions spend the describe limit, a bucket of their own or none is not
/// published (infra/market-sim/README.md, "Extension offerings and the describe limit"): under
/// each reading, a rule that may extend by up to 14 days asks three lengths a run, not fourteen;
/// when the region's limit is spent by someone else, the first throttled question ends its
/// asking for the run (one call, no retries, nothing bought), and the next run, the limit
/// refilled, asks and buys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_questions_are_few_a_run_and_stop_at_a_throttle_under_each_limit_reading() {
    for reading in ["shared", "own", "none"] {
        let x = X::at_the_decision_with(&format!("ext-limit-{reading}"), Mode::Live, 14).await;
        x.sim
            .behaviour(&format!(
                r#"{{"describe_limit": {{"burst": 2, "refill_secs": 3600.0}}, "extension_offerings_limit": "{reading}"}}"#
            ))
            .await;
        // Someone else in the account asks twice: under "shared" and "own" the bucket is empty.
        let region: Region = "us-east-1".parse().unwrap();
        for _ in 0..2 {
            x.market.inner.extension_offerings(&region, &x.id, 24).await.unwrap();
        }
        let before = extension_questions(&x).await;
        let report = x.track().await;
        let asked = extension_questions(&x).await - before;
        if reading == "none" {
            assert!(bought(&report), "{reading}: {report:#?}");
            assert_eq!(asked, 3, "{reading}: three lengths of fourteen, the shortest among them");
            assert_eq!(x.intent().await.offer.duration_hours, 24, "{reading}: the shortest at the same rate");
            continue;
        }
        assert!(!bought(&report), "{reading}: {report:#?}");
        assert_eq!(asked, 1, "{reading}: one throttled call, not retried, and no other length asked");
        let skipped = report.extensions.iter().any(
            |a| matches!(a, ExtensionAction::Skipped { reason, .. } if reason.contains("EC2 throttled an extension question")),
        );
        assert!(skipped, "{reading}: {report:#?}");
        assert!(x.intents().await.is_empty(), "{reading}: nothing reserved");

        // A new limit starts its buckets full: the next run asks its three lengths and buys.
        x.sim.behaviour(r#"{"describe_limit": {"burst": 3, "refill_secs": 3600.0}}"#).await;
        x.advance_minutes(5).await;
        let before = extension_questions(&x).await;
        let report = x.track().await;
        assert!(bought(&report), "{reading}: {report:#?}");
        assert_eq!(extension_questions(&x).await - before, 3, "{reading}");
        assert_eq!(x.intent().await.offer.duration_hours, 24, "{reading}");
    }
}

/// Shows the block to DescribeCapacityReservations in `state` (`None`: as EC2 has it).
async fn show_block(x: &X, state: Option<&str>) {
    let state = state.map_or("null".to_string(), |s| format!("\"{s}\""));
    let body = format!(r#"{{"reservation_id": "{}", "state": {state}}}"#, x.id);
    x.sim.control("POST", "/_sim/reservations/state", &body).await;
}

/// Every extension fee EC2 charged is committed (and spent) in the rule's budget, with the
/// block's, and EC2 holds no more extension days than the rule's `max_days` (1).
async fn every_charge_counted(x: &X) {
    let ec2 = x.ec2_extensions().await;
    let paid = ec2.iter().filter(|e| e["status"] == "payment-succeeded").count();
    assert!(paid <= 1, "EC2 holds {paid} extension days under max_days = 1: {ec2:#?}");
    let charged = dec!(576) + dec!(480) * Decimal::from(paid);
    assert_eq!(x.budget().await, (charged, charged), "EC2 charged {charged}: {ec2:#?}");
}

/// EC2 shows the block `unavailable` from before it takes the extension's payment (15:00, the
/// end moves) until after capblock's deadline for it (Thu 00:15), while its extension history
/// has no word on the extension (`history`): the stored end is stale, and the extension stays
/// open with its fee committed, a person told once. Once EC2 shows the block again its end
/// says paid; no second extension is bought, and the budget holds what EC2 charged.
async fn an_extension_ec2_paid_under(name: &str, history: History) {
    let x = X::at_the_decision(name, Mode::Live).await;
    assert!(bought(&x.track().await));
    let offering = x.intent().await.offer.id;
    x.alerts().await;
    show_block(&x, Some("unavailable")).await;
    *x.market.hook.history.lock().unwrap() = history;
    let mut said = Vec::new();
    for t in ["2026-12-02T14:00:00Z", "2026-12-02T16:00:00Z", "2026-12-03T00:15:00Z", "2026-12-03T01:00:00Z"] {
        x.advance_to(t).await;
        x.track_anyway().await;
        assert_eq!(x.intent().await.state, ExtensionState::Bought, "{t}: {history:?}: not released on absence");
        assert_eq!(x.budget().await, (dec!(1056), dec!(576)), "{t}: the fee stays committed");
        said.extend(x.events().await);
    }
    assert_eq!(x.ec2_extensions().await[0]["status"], "payment-succeeded", "EC2 took payment at 15:00");
    let overdue: Vec<&String> = said.iter().filter(|e| *e == "extension-overdue").collect();
    assert_eq!(overdue.len(), 1, "a person told once: {said:?}");
    assert!(!said.iter().any(|e| e == "extension-released"), "{said:?}");

    show_block(&x, None).await;
    *x.market.hook.history.lock().unwrap() = History::Real;
    x.advance_minutes(5).await;
    x.track().await;
    assert_eq!(x.block().await.end, x.end + Duration::days(1));
    assert_eq!(x.intent().await.state, ExtensionState::Paid);
    assert!(x.intents().await.iter().all(|i| i.offer.id == offering));
    for t in ["2026-12-03T12:00:00Z", "2026-12-04T12:00:00Z", "2026-12-05T09:00:00Z"] {
        x.advance_to(t).await;
        x.track_anyway().await;
        every_charge_counted(&x).await;
    }
    assert_eq!(x.extension_calls().await, 1, "one extension purchase reached EC2");
    every_charge_counted(&x).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_ec2_paid_is_kept_under_a_503_history_and_an_unavailable_block() {
    an_extension_ec2_paid_under("ext-hist-503", History::Unanswered).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_ec2_paid_is_kept_while_its_history_does_not_list_it_and_the_block_is_unavailable() {
    an_extension_ec2_paid_under("ext-hist-unlisted", History::Unlisted).await;
}
