//! The scan-and-buy workflow end to end: the real adapters on moto and the simulator.

use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::scan::ScanReport;
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::rule::{Mode, Rule};
use capblock_shared::memory::{Failure, HookVerdict, Hooked, Script};
use capblock_shared::ports::{BlockStore, Ledger, MarketMemory};
use capblock_tests::{Rig, RuleToml, ScenarioToml, T0, assert_slack_schema, t0, usd};
use std::time::Duration;

use capblock_shared::domain::plan::DescribeBudget;
use rust_decimal_macros::dec;

/// us-east-1 sells p5 at 3.00/GPU-hour, us-west-2 at 2.75; one start day, one AZ each, so
/// each (region, count, duration) question has exactly one answer.
fn two_regions() -> String {
    two_regions_scenario().build()
}

fn two_regions_scenario() -> ScenarioToml {
    ScenarioToml::new(3, T0).payment("succeed", None).p5("us-east-1", &[2], "3.00").p5("us-west-2", &[3], "2.75")
}

fn rule(id: &str, regions: &[&str], threshold: &str, budget: &str, mode: &str) -> Rule {
    RuleToml::p5(id)
        .mode(mode)
        .regions(regions)
        .max_price(threshold)
        .budget(budget)
        .max_blocks_held(1)
        .extra(r#"tags = { team = "llm" }"#)
        .rule(t0())
}

/// A rig for stack "capblock-test" in `mode`, with `account_budget` if any.
async fn harness(name: &str, scenario: &str, mode: Mode, account_budget: Option<&str>) -> Rig {
    harness_with_timeouts(name, scenario, mode, account_budget, capblock_tests::quick_timeouts()).await
}

async fn harness_with_timeouts(
    name: &str,
    scenario: &str,
    mode: Mode,
    account_budget: Option<&str>,
    timeouts: aws_config::timeout::TimeoutConfig,
) -> Rig {
    let mut h = Rig::start(name, scenario, timeouts, t0(), "capblock-test").await;
    h.scan.stack.mode = mode;
    h.scan.stack.account_budget = account_budget.map(usd);
    h
}

fn action(r: &ScanReport, rule: &str) -> Option<Outcome> {
    r.outcomes.iter().find(|o| o.rule_id == rule).and_then(|o| o.action.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_equal_to_the_threshold_buys_once_and_announces() {
    let h = harness("boundary", &two_regions(), Mode::Live, None).await;
    h.put_rules(&[rule("east", &["us-east-1"], "3.00", "10000", "live")]).await;
    let report = h.scan().await;
    let Some(Outcome::Bought { reservation_id, .. }) = action(&report, "east") else { panic!("{report:#?}") };
    let bought = h.sim.purchases().await;
    assert_eq!(bought.len(), 1);
    assert_eq!(bought[0]["reservation_id"], reservation_id.as_str());
    let tags = &bought[0]["tags"];
    assert_eq!(tags["capblock:rule"], "east");
    assert_eq!(tags["capblock:stack"], "capblock-test");
    assert_eq!(tags["capblock:intent"], format!("east/{}", bought[0]["offering_id"].as_str().unwrap()));
    assert_eq!(tags["team"], "llm");

    let block = h.aws.store().get_block(&reservation_id).await.unwrap().expect("block recorded");
    assert_eq!(block.fee.unwrap().amount(), dec!(576.00)); // 3.00 x 8 x 24
    let alerts = h.aws.alerts().await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_slack_schema(&alerts[0].body);
    assert_eq!(alerts[0].body["metadata"]["threadId"], reservation_id.as_str());
    let text = alerts[0].body["content"]["description"].as_str().unwrap();
    for needle in
        ["576.00 USD", "3.0000 USD per accelerator-hour", "Payment deadline", "us-east-1", "Thu 2026-12-03 11:30 UTC"]
    {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }

    // The rule now holds its one block: later scans buy nothing more and say nothing more.
    for _ in 0..3 {
        let again = h.scan().await;
        assert!(matches!(action(&again, "east"), Some(Outcome::Skipped { .. })), "{again:#?}");
    }
    assert_eq!(h.sim.purchases().await.len(), 1);
    assert!(h.aws.alerts().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cent_above_the_threshold_buys_nothing() {
    let h = harness("above", &two_regions(), Mode::Live, None).await;
    h.put_rules(&[rule("east", &["us-east-1"], "2.99", "10000", "live")]).await;
    let report = h.scan().await;
    assert_eq!(report.outcomes[0].offerings_seen, 1);
    assert!(report.outcomes[0].chosen.is_none());
    assert!(h.sim.purchases().await.is_empty());
    assert_eq!(report.observations_written, 1, "the price is recorded even when nothing is bought");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cheapest_region_wins() {
    let h = harness("cheapest", &two_regions(), Mode::Live, None).await;
    h.put_rules(&[rule("both", &["us-east-1", "us-west-2"], "3.50", "10000", "live")]).await;
    let report = h.scan().await;
    assert_eq!(report.queries, 2);
    let chosen = report.outcomes[0].chosen.as_ref().unwrap();
    assert_eq!(chosen.offering.region.as_str(), "us-west-2");
    let bought = h.sim.purchases().await;
    assert_eq!(bought.len(), 1);
    assert_eq!(bought[0]["region"], "us-west-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_buys_nothing_and_announces_once() {
    // A live rule in a dry-run stack (the default for a fresh deployment).
    let h = harness("dryrun", &two_regions(), Mode::DryRun, None).await;
    h.put_rules(&[rule("east", &["us-east-1"], "3.00", "10000", "live")]).await;
    let report = h.scan().await;
    assert!(matches!(action(&report, "east"), Some(Outcome::WouldBuy { first_time: true, .. })), "{report:#?}");
    assert!(h.sim.purchases().await.is_empty());
    assert_eq!(h.sim.state().await["calls"]["PurchaseCapacityBlock"], 1, "checked once with DryRun");
    let alerts = h.aws.alerts().await;
    assert_eq!(alerts.len(), 1);
    assert_slack_schema(&alerts[0].body);
    assert!(alerts[0].body["content"]["title"].as_str().unwrap().starts_with("Would buy (dry run)"));
    assert!(alerts[0].body["content"]["description"].as_str().unwrap().contains("Mode=live"));
    let report = h.scan().await;
    assert!(matches!(action(&report, "east"), Some(Outcome::WouldBuy { first_time: false, .. })));
    assert!(h.aws.alerts().await.is_empty(), "the same would-buy is announced once");
    let usage = h.aws.store().usage(&BudgetOwner::Rule("east".into()), &Period::of(t0())).await.unwrap();
    assert!(usage.is_none(), "dry runs reserve no budget");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_budget_runs_out_mid_scan() {
    // Two rules, each would buy (576 and 528 USD); the account allows 1000 a month.
    let h = harness("budget", &two_regions(), Mode::Live, Some("1000")).await;
    h.put_rules(&[
        rule("east", &["us-east-1"], "3.00", "10000", "live"),
        rule("west", &["us-west-2"], "3.00", "10000", "live"),
    ])
    .await;
    let report = h.scan().await;
    let bought: Vec<_> = report.outcomes.iter().filter(|o| matches!(o.action, Some(Outcome::Bought { .. }))).collect();
    assert_eq!(bought.len(), 1, "{report:#?}");
    assert_eq!(h.sim.purchases().await.len(), 1);
    let usage = h.aws.store().usage(&BudgetOwner::Account, &Period::of(t0())).await.unwrap().unwrap();
    assert!(usage.committed.amount() <= dec!(1000));
    // The other rule was either passed over for budget or refused at reservation.
    let other = report.outcomes.iter().find(|o| !matches!(o.action, Some(Outcome::Bought { .. }))).unwrap();
    assert!(
        other.chosen.is_none()
            || matches!(&other.action, Some(Outcome::Skipped { reason }) if reason.contains("budget")),
        "{other:#?}"
    );
}

/// A rule of team `team` (tags name another team: the rule's own `team` wins).
fn team_rule(id: &str, region: &str, team: &str) -> Rule {
    RuleToml::p5(id)
        .mode("live")
        .regions(&[region])
        .max_price("3.00")
        .budget("10000")
        .max_blocks_held(1)
        .extra(&format!("team = \"{team}\""))
        .rule(t0())
}

/// Two rules of one team, each would buy (576 and 528 USD), the team's budget 1000 a month and
/// no account cap: one buys, the other is stopped by the team's budget in the same conditional
/// transaction as its own, and the team's budget counts exactly the one purchase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_over_its_budget_buys_nothing_more() {
    let mut h = harness("team-budget", &two_regions(), Mode::Live, None).await;
    h.scan.stack.team_budgets = [("vision".to_string(), usd("1000"))].into();
    h.put_rules(&[team_rule("east", "us-east-1", "vision"), team_rule("west", "us-west-2", "vision")]).await;
    let report = h.scan().await;
    let bought: Vec<_> = report.outcomes.iter().filter(|o| matches!(o.action, Some(Outcome::Bought { .. }))).collect();
    assert_eq!(bought.len(), 1, "{report:#?}");
    assert_eq!(h.sim.purchases().await.len(), 1);
    let period = Period::of(t0());
    let team = h.aws.store().usage(&BudgetOwner::Team("vision".into()), &period).await.unwrap().unwrap();
    let rule = &bought[0].rule_id;
    let own = h.aws.store().usage(&BudgetOwner::Rule(rule.clone()), &period).await.unwrap().unwrap();
    assert_eq!(team.committed, own.committed, "the team is charged what its rule is");
    assert!(team.committed.amount() <= dec!(1000));
    let other = report.outcomes.iter().find(|o| &o.rule_id != rule).unwrap();
    assert!(
        other.chosen.is_none()
            || matches!(&other.action, Some(Outcome::Skipped { reason }) if reason.contains("TEAM#vision")),
        "{other:#?}"
    );
    // Later scans buy nothing more for the team.
    h.scan().await;
    assert_eq!(h.sim.purchases().await.len(), 1);
}

/// A rule naming a team the stack gives no budget is left out of the scan (never asked for,
/// never bought), said once in its thread, and shown in the report; a rule of a budgeted team
/// beside it buys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_of_a_team_without_a_budget_is_refused() {
    let mut h = harness("team-none", &two_regions(), Mode::Live, None).await;
    h.scan.stack.team_budgets = [("vision".to_string(), usd("5000"))].into();
    h.put_rules(&[team_rule("east", "us-east-1", "visoin"), team_rule("west", "us-west-2", "vision")]).await;
    let report = h.scan().await;
    assert_eq!(report.unbudgeted.get("east").map(String::as_str), Some("visoin"), "{report:#?}");
    assert!(report.outcomes.iter().all(|o| o.rule_id != "east"), "the refused rule is not evaluated");
    let bought = h.sim.purchases().await;
    assert_eq!(bought.len(), 1);
    assert_eq!(bought[0]["region"], "us-west-2");
    let alerts = h.aws.alerts().await;
    let refusal: Vec<_> = alerts.iter().filter(|a| a.body["metadata"]["threadId"] == "rule-east").collect();
    assert_eq!(refusal.len(), 1, "{alerts:?}");
    assert_slack_schema(&refusal[0].body);
    let text = refusal[0].body["content"]["description"].as_str().unwrap();
    assert!(text.contains("`visoin`") && text.contains("`vision` (5000.00 USD a month)"), "{text}");
    // Said once a month, however many scans refuse it.
    let again = h.scan().await;
    assert!(again.unbudgeted.contains_key("east"));
    assert!(h.aws.alerts().await.iter().all(|a| a.body["metadata"]["threadId"] != "rule-east"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_that_times_out_does_not_stop_the_others() {
    let h = harness("down", &two_regions(), Mode::Live, None).await;
    h.sim.behaviour(r#"{"down_regions": ["us-west-2"], "timeout_secs": 1}"#).await;
    h.put_rules(&[rule("both", &["us-east-1", "us-west-2"], "3.50", "10000", "live")]).await;
    let report = h.scan().await;
    assert!(report.failed_regions.contains_key("us-west-2"), "{report:#?}");
    assert!(!report.failed_regions.contains_key("us-east-1"));
    let bought = h.sim.purchases().await;
    assert_eq!(bought.len(), 1);
    assert_eq!(bought[0]["region"], "us-east-1");
}

/// 2 types x 4 counts x 2 durations in one region: 16 questions; EC2's describe limit, sped
/// up 20 times (a burst of 2, one call per 200 ms), with another caller in the account spending
/// 60 % of it and 20 % of all calls refused at random besides.
const WIDE: &str = r#"
seed = 5
[clock]
start = "2026-12-01T00:00:00Z"
[behaviour]
describe_limit = { burst = 2, refill_secs = 0.2 }
describe_limit_other_callers_per_min = 180.0
throttle_rate = 0.2
same_day_offerings = false
[[market]]
region = "us-east-1"
instance_type = "p5.48xlarge"
azs = ["us-east-1a", "us-east-1b"]
counts = [1, 2, 4, 8]
durations_days = [1, 2, 3, 4]
start_days = [1, 2, 3, 4, 5, 6, 7, 8]
price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "4.00" } ]
[[market]]
region = "us-east-1"
instance_type = "p4d.24xlarge"
azs = ["us-east-1a"]
counts = [1, 2, 4, 8]
durations_days = [1, 2, 3, 4]
start_days = [2, 4, 6]
price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "2.40" } ]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_limit_storm_loses_no_question_and_fails_no_region() {
    let mut h = harness_with_timeouts("storm", WIDE, Mode::Live, None, capblock_shared::aws::ec2::timeouts()).await;
    // The scan's pace on the sped-up limit: half of it, 4 s of asking a run.
    h.scan.describe = DescribeBudget::for_refill(Duration::from_millis(200), 0.5, Duration::from_secs(4));
    let r = RuleToml::p5("wide")
        .instance_types(&["p5.48xlarge", "p4d.24xlarge"])
        .instance_counts(&[1, 2, 4, 8])
        .durations_days(&[1, 2])
        .max_price("2.50")
        .budget("1000000")
        .window(0, 10)
        .rule(t0());
    h.put_rules(&[r]).await;
    // The most a run plans: what its fastest pace allows.
    let calls = h.scan.describe.planned_at(h.scan.describe.fastest);
    let mut answered_keys = 0;
    let mut runs = 0;
    let mut seen = 0;
    let mut bought = false;
    let mut fewest_answers = usize::MAX;
    // Every question is reached within the planner's bound, however many calls are refused.
    while answered_keys < 16 {
        runs += 1;
        let report = h.scan().await;
        let east = &report.regions["us-east-1"];
        assert_eq!((report.queries, east.questions), (16, 16));
        assert!(report.failed_regions.is_empty(), "no region reported failed: {:?}", report.failed_regions);
        assert!(report.quota_zero.is_empty(), "no false quota alert");
        assert!(east.planned <= calls, "{east:?}");
        // Nothing lost: what was planned was answered or carried over.
        assert_eq!(east.answered + east.carried_over, east.planned, "{east:?}");
        // The cursor in DynamoDB: every question answered so far, with when.
        answered_keys = h.store.region_memory(&"us-east-1".parse().unwrap()).await.unwrap().asked.len();
        seen += report.offerings_seen;
        bought |= matches!(action(&report, "wide"), Some(Outcome::Bought { .. }));
        fewest_answers = fewest_answers.min(east.answered);
        assert!(fewest_answers >= 1, "every run gets some answer through the storm");
        // The planner's bound, counted in the answers the storm let through.
        assert!(runs <= capblock_shared::domain::plan::full_cycle_runs(16, fewest_answers), "{runs} runs");
    }
    let state = h.sim.state().await;
    // The storm happened (the learned pace may keep clear of the describe limit itself once
    // the random throttling has slowed it).
    let refused = |k: &str| state["faults_injected"][k].as_u64().unwrap_or(0);
    assert!(refused("describe_limited") + refused("throttled") > 0, "the storm happened: {state}");
    // Answers are EC2's 6 best (p5: 16 candidates, p4d: 3), and the cheap p4d was bought once.
    assert!(seen > 0);
    assert!(bought, "the p4d offering under the threshold was bought");
    assert_eq!(h.sim.purchases().await.len(), 1);
}

/// Under both readings of offering ids (EC2 repeats them between answers, or mints new ones in
/// every answer), 32 scans at once buy the block once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_scans_buy_exactly_once() {
    for ids in ["stable", "per_answer"] {
        thirty_two_concurrent_scans(ids).await;
    }
}

async fn thirty_two_concurrent_scans(ids: &str) {
    let scenario = two_regions_scenario().offering_ids(ids).build();
    let h = std::sync::Arc::new(harness(&format!("race-{ids}"), &scenario, Mode::Live, None).await);
    h.put_rules(&[rule("east", &["us-east-1"], "3.00", "10000", "live")]).await;
    let runs = (0..32).map(|_| {
        let h = h.clone();
        tokio::spawn(async move { h.scan().await })
    });
    let reports = futures::future::join_all(runs).await;
    let mut bought = 0;
    for r in reports {
        if matches!(action(&r.unwrap(), "east"), Some(Outcome::Bought { .. })) {
            bought += 1;
        }
    }
    assert_eq!(bought, 1, "{ids}");
    assert_eq!(h.sim.purchases().await.len(), 1, "{ids}: exactly one purchase reached EC2");
    assert_eq!(h.sim.state().await["calls"]["PurchaseCapacityBlock"], 1);
    let usage = h.aws.store().usage(&BudgetOwner::Rule("east".into()), &Period::of(t0())).await.unwrap().unwrap();
    assert_eq!(usage.committed.amount(), dec!(576.00));
    assert_eq!(h.aws.alerts().await.len(), 1, "one announcement");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_loses_the_purchase_answer_is_followed_by_one_that_adopts_the_block() {
    let h = harness("crash", &two_regions(), Mode::Live, None).await;
    h.put_rules(&[rule("east", &["us-east-1"], "3.00", "10000", "live")]).await;
    // EC2 records the purchase but the answer never arrives: to the buyer this is the same as
    // dying right after PurchaseCapacityBlock, before the store write.
    h.sim.behaviour(r#"{"drop_purchase_response": true, "timeout_secs": 1}"#).await;
    let first = h.scan().await;
    assert!(matches!(action(&first, "east"), Some(Outcome::Unknown { .. })), "{first:#?}");
    assert_eq!(h.sim.purchases().await.len(), 1);
    assert!(h.aws.store().open_blocks(None).await.unwrap().is_empty(), "not recorded yet");
    h.sim.behaviour(r#"{"drop_purchase_response": false}"#).await;

    let second = h.scan().await;
    assert_eq!(second.settled.len(), 1, "{second:#?}");
    assert!(matches!(&second.settled[0], capblock_shared::app::reconcile::Settled::Adopted { .. }));
    assert!(matches!(action(&second, "east"), Some(Outcome::Skipped { .. })), "holds its block now: {second:#?}");
    assert_eq!(h.sim.purchases().await.len(), 1, "nothing more was bought");
    assert_eq!(h.sim.state().await["calls"]["PurchaseCapacityBlock"], 1);
    let blocks = h.aws.store().open_blocks(Some("east")).await.unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].reservation_id, h.sim.purchases().await[0]["reservation_id"].as_str().unwrap());
    assert!(h.aws.store().open_intents().await.unwrap().is_empty());
    let alerts = h.aws.alerts().await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].body["metadata"]["eventType"], "purchased");
}

/// EC2 refusing every purchase, as it does for a quota, an offering just sold out, or a price
/// that moved.
fn refuse() -> Script {
    Script::new().on("purchase", |_| {
        HookVerdict::Fail(Failure::Rejected {
            code: "InsufficientCapacityBlockQuota".into(),
            message: "the account has reached its capacity-block quota".into(),
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_purchase_releases_the_budget_and_is_reported() {
    let h = harness("refused", &two_regions(), Mode::Live, Some("5000")).await;
    h.put_rules(&[rule("east", &["us-east-1"], "3.00", "10000", "live")]).await;
    let market = Hooked::new(h.sim.market().await, refuse());
    let scanner = h.scanner(&market, &h.notifier, &h.scan);
    let store = &h.store;
    let report = scanner.run(t0()).await.unwrap();
    let Some(Outcome::Refused { reason, .. }) = action(&report, "east") else { panic!("{report:#?}") };
    assert!(reason.contains("InsufficientCapacityBlockQuota"), "{reason}");
    for owner in [BudgetOwner::Rule("east".into()), BudgetOwner::Account] {
        let usage = store.usage(&owner, &Period::of(t0())).await.unwrap().unwrap();
        assert_eq!((usage.committed.amount(), usage.purchases), (dec!(0), 0), "{owner:?} released");
    }
    assert_eq!(store.guard("east").await.unwrap().open_intent, None);
    assert!(store.open_intents().await.unwrap().is_empty());
    let alerts = h.aws.alerts().await;
    assert_eq!(alerts.len(), 1);
    assert_slack_schema(&alerts[0].body);
    assert_eq!(alerts[0].body["metadata"]["eventType"], "purchase-rejected");
    // The same offering is never sent again (its intent is closed as rejected), so a second
    // scan neither buys nor repeats the alert.
    let again = scanner.run(t0()).await.unwrap();
    assert!(matches!(action(&again, "east"), Some(Outcome::AlreadyTried { .. })), "{again:#?}");
    assert!(h.aws.alerts().await.is_empty());
    assert_eq!(h.sim.state().await["calls"].get("PurchaseCapacityBlock"), None, "the refusals came from the wrapper");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_refusal_the_next_scan_tries_the_next_cheapest_offering() {
    let h = harness("runner-up", &two_regions(), Mode::Live, None).await;
    h.put_rules(&[rule("both", &["us-east-1", "us-west-2"], "3.00", "10000", "live")]).await;
    let market = Hooked::new(h.sim.market().await, refuse());
    let scanner = h.scanner(&market, &h.notifier, &h.scan);
    let first = scanner.run(t0()).await.unwrap();
    assert_eq!(first.outcomes[0].chosen.as_ref().unwrap().offering.region.as_str(), "us-west-2");
    assert!(matches!(action(&first, "both"), Some(Outcome::Refused { .. })), "{first:#?}");
    // The cheapest (us-west-2) was tried: the next scan goes to the runner-up (us-east-1).
    let second = scanner.run(t0()).await.unwrap();
    assert_eq!(second.outcomes[0].chosen.as_ref().unwrap().offering.region.as_str(), "us-east-1", "{second:#?}");
    assert!(matches!(action(&second, "both"), Some(Outcome::Refused { .. })), "{second:#?}");
    // Both tried: nothing left to try, nothing sent twice.
    let third = scanner.run(t0()).await.unwrap();
    assert!(matches!(action(&third, "both"), Some(Outcome::AlreadyTried { .. })), "{third:#?}");
    assert_eq!(h.aws.alerts().await.len(), 2, "one refusal alert per offering");
}
