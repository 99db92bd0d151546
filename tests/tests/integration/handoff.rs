//! Hand-off to the workloads on the local stack: capblock's events through the outbox onto an
//! EventBridge bus, routed by a rule to an SQS queue and validated against their JSON Schemas;
//! and the actions on moto's SSM, Auto Scaling, Resource Groups and EKS through the real adapters.
//!
//! moto (5.2) serves Resource Groups' CreateGroup (with its configuration and tags),
//! GetGroupConfiguration, GetTags and ListGroups; GroupResources, UngroupResources and
//! ListGroupResources, which moto lacks, are answered on moto's own groups by the layer the local
//! stack runs in front of it (`infra/local/moto_resource_groups.py`, readings in
//! `infra/local/README.md`). The reservation group's tests check the group capblock makes, and
//! that the block's reservation goes into it once paid and out of it at the end. Answers the
//! layer never gives for a capacity reservation (Pending, a refusal inside a successful answer)
//! are the unit tests' (`app/handoff/tests.rs`, on fakes, and the adapter's own on recorded
//! answers).

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use capblock_shared::app::handoff::{ActionRunner, enqueue_actions, event_notice};
use capblock_shared::app::outbox::flush;
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::eks::Eks;
use capblock_shared::aws::eventbridge::Delivery;
use capblock_shared::aws::ram::Ram;
use capblock_shared::aws::resource_groups::ResourceGroups;
use capblock_shared::aws::ssm::Ssm;
use capblock_shared::domain::actions::Action;
use capblock_shared::domain::block::Block;
use capblock_shared::domain::bus_event::{BusStep, EndOutcome, Subject, step_of_idle};
use capblock_shared::domain::handoff::{Point, Target, at_point, due};
use capblock_shared::domain::ids::Region;
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::usage::IdleNews;
use capblock_shared::memory::MemoryHandoff;
use capblock_shared::ports::{InstanceSource, Outbox, Parameters};
use capblock_tests::{
    Aws, Published, Rig, RuleToml, ScenarioToml, T0, auto_scaling_group, auto_scaling_group_in, detail_types,
    eks_nodegroup, event_types, example_block, nodegroup_size, usd,
};
use chrono::{DateTime, Duration, TimeZone, Utc};

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
}

fn id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// `example_block` in us-east-1 (where the test's group and parameters are), ending 12-12.
fn block(reservation: &str, rule: &str) -> Block {
    Block {
        region: "us-east-1".parse().unwrap(),
        availability_zone: "us-east-1a".into(),
        start: t(10, 11, 30),
        end: t(12, 11, 30),
        rule_id: Some(rule.into()),
        ..example_block(reservation)
    }
}

fn subject(reservation: &str) -> Subject {
    Subject::of(&block(reservation, "p5-weekly"), [("team".to_string(), "llm".to_string())].into())
}

fn every_step() -> Vec<(BusStep, &'static str)> {
    vec![
        (BusStep::Purchased, "purchased"),
        (BusStep::PaymentFailed, "payment-failed"),
        (BusStep::Active, "delivered"),
        (BusStep::Ending { minutes_left: 30 }, "reminder-30m-end-20261212T1130Z"),
        (BusStep::Ending { minutes_left: 120 }, "reminder-120m-end-20261212T1130Z"),
        (BusStep::Extended { previous_end: t(11, 11, 30) }, "extended-20261212T1130"),
        (BusStep::Ended { outcome: EndOutcome::Expired }, "expired"),
        (BusStep::HealthChanged { status: "impaired".into(), summary: "a node degraded".into() }, "health-1"),
        // An idle episode's first alert (3 idle since 12:30, 288.00 at the block's price), as
        // the tracker turns it into its step.
        (
            step_of_idle(
                &IdleNews::Idle { number: 1, idle: 3, since: t(10, 12, 30), idle_instance_minutes: 180 },
                Some(usd("288")),
            ),
            "idle-1",
        ),
    ]
}

#[tokio::test]
async fn every_event_reaches_a_rules_queue_once_and_matches_its_schema() {
    let aws = Aws::fresh("handoff-events").await;
    let store = aws.store();
    let delivery = aws.notifier();
    let reservation = format!("cr-{}0000000000", id());
    let s = subject(&reservation);
    let now = t(10, 11, 30);
    let arn = format!("arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{reservation}");
    for (step, key) in every_step() {
        assert!(store.enqueue(&event_notice(&s, &step, key, Some(&arn), now).unwrap()).await.unwrap());
    }
    // Duplicate triggers (the event and the tracker, a retried invocation) add nothing.
    for (step, key) in every_step() {
        assert!(!store.enqueue(&event_notice(&s, &step, key, Some(&arn), now).unwrap()).await.unwrap());
    }
    let first = flush(&store, &delivery, now).await.unwrap();
    assert_eq!((first.published, first.failed), (9, 0), "{first:?}");
    let again = flush(&store, &delivery, now + Duration::minutes(5)).await.unwrap();
    assert_eq!(again.published, 0, "published once: {again:?}");

    let events = aws.events().await;
    assert_eq!(events.len(), 9, "{events:#?}");
    let mut keys: Vec<&str> = events.iter().map(|e| e["detail"]["event_key"].as_str().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 9, "each (block, step) once");
    for e in &events {
        assert_eq!(e["source"], "capblock");
        assert_eq!(e["resources"][0], arn.as_str());
        assert_eq!(e["detail"]["reservation_id"], reservation.as_str());
        assert_eq!(e["detail"]["version"], 1);
        // When the step happened (the notice's time), not when it was put: EventBridge writes
        // RFC 3339; the emulator hands the entry's epoch seconds through.
        let time = match &e["time"] {
            serde_json::Value::String(s) => chrono::DateTime::parse_from_rfc3339(s).ok().map(|t| t.timestamp()),
            v => v.as_f64().map(|f| f as i64),
        };
        assert_eq!(time, Some(now.timestamp()), "{e}");
    }
    let ending: Vec<i64> = events
        .iter()
        .filter(|e| e["detail-type"] == "Block Ending")
        .filter_map(|e| e["detail"]["minutes_left"].as_i64())
        .collect();
    assert_eq!(ending.len(), 2, "one per reminder lead");
}

#[tokio::test]
async fn more_than_ten_events_go_out_in_putevents_sized_calls() {
    let aws = Aws::fresh("handoff-batch").await;
    let store = aws.store();
    let delivery = aws.notifier();
    let now = t(10, 11, 30);
    // moto refuses a call of more than 10 entries, as EventBridge does: 23 go out in 3 calls.
    for n in 0..23 {
        let s = subject(&format!("cr-{}{n:010}", id()));
        store.enqueue(&event_notice(&s, &BusStep::Active, "delivered", None, now).unwrap()).await.unwrap();
    }
    let report = flush(&store, &delivery, now).await.unwrap();
    assert_eq!((report.published, report.failed), (23, 0), "{report:?}");
    assert_eq!(aws.events().await.len(), 23);
}

#[tokio::test]
async fn an_event_the_bus_refuses_stays_pending_and_goes_out_later() {
    let aws = Aws::fresh("handoff-retry").await;
    let store = aws.store();
    let missing = Delivery::new(&aws.sdk, aws.sns(), format!("{}-no-such-bus", aws.events_bus));
    let now = t(10, 11, 30);
    let s = subject(&format!("cr-{}0000000000", id()));
    store.enqueue(&event_notice(&s, &BusStep::Active, "delivered", None, now).unwrap()).await.unwrap();
    let failed = flush(&store, &missing, now).await.unwrap();
    assert_eq!((failed.published, failed.failed), (0, 1), "{failed:?}");

    let later = flush(&store, &aws.notifier(), now + Duration::minutes(5)).await.unwrap();
    assert_eq!(later.published, 1, "{later:?}");
    assert_eq!(aws.events().await.len(), 1);
}

async fn desired(sdk: &SdkConfig, name: &str) -> i32 {
    let asg = aws_sdk_autoscaling::Client::new(sdk);
    let out = asg.describe_auto_scaling_groups().auto_scaling_group_names(name).send().await.unwrap();
    out.auto_scaling_groups()[0].desired_capacity().unwrap()
}

/// The real hand-off adapters on moto, with two fixed instances for Run Command.
struct MotoHands {
    ssm: Ssm,
    asg: AutoScaling,
    rg: ResourceGroups,
    eks: Eks,
    ram: Ram,
    /// The block's instances: the market simulator's, as the tracker sees them.
    instances: MemoryHandoff,
}

impl MotoHands {
    fn new(sdk: &SdkConfig) -> MotoHands {
        MotoHands {
            ssm: Ssm::new(sdk.clone()),
            asg: AutoScaling::new(sdk.clone()),
            rg: ResourceGroups::new(sdk.clone()),
            eks: Eks::new(sdk.clone()),
            ram: Ram::new(sdk.clone()),
            instances: MemoryHandoff::default().with_instances(["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"]),
        }
    }

    fn action_runner(&self) -> ActionRunner<'_> {
        ActionRunner {
            parameters: &self.ssm,
            groups: &self.asg,
            commands: &self.ssm,
            instances: &self.instances,
            reservation_groups: &self.rg,
            nodegroups: &self.eks,
            shares: &self.ram,
            accounts: None,
        }
    }
}

#[tokio::test]
async fn actions_run_once_on_moto_and_a_failure_is_retried() {
    let aws = Aws::fresh("handoff-actions").await;
    let store = aws.store();
    let rule = format!("rule-{}", id());
    let group_name = format!("trainers-{}", id());
    let moto = MotoHands::new(&aws.sdk);
    let action_runner = moto.action_runner();
    let actions = vec![
        Action::PublishParameter,
        Action::ScaleGroup { group: group_name.clone(), desired: 2, down_lead_minutes: 45 },
        Action::RunCommand { document: "AWS-RunShellScript".into(), lead_minutes: 30 },
    ];
    let target = Target::of(&block(&format!("cr-{}0000000000", id()), &rule), "capblock-test").unwrap();
    let region: Region = "us-east-1".parse().unwrap();
    let now = t(10, 11, 35);

    // The group does not exist yet: scale-up fails, is announced, and stays pending.
    enqueue_actions(&store, &at_point(&actions, &target, Point::Active, false), now).await.unwrap();
    let first = action_runner.run(&store, now).await.unwrap();
    assert_eq!(first.done.len(), 1, "the parameter: {first:?}");
    assert_eq!(first.failed.len(), 1, "the group: {first:?}");
    let value = moto.ssm.parameter(&region, &format!("/capblock/{rule}/current")).await.unwrap().unwrap();
    assert!(value.contains(&target.block.reservation_id), "{value}");

    auto_scaling_group(&aws.sdk, "us-east-1", &group_name).await;
    // A duplicate trigger plans nothing new; the retry (past the lease) succeeds.
    assert_eq!(enqueue_actions(&store, &at_point(&actions, &target, Point::Active, false), now).await.unwrap(), 0);
    let retry = action_runner.run(&store, now + Duration::minutes(5)).await.unwrap();
    assert_eq!((retry.done.len(), retry.failed.len()), (1, 0), "{retry:?}");
    assert_eq!(desired(&aws.sdk, &group_name).await, 2);

    // 30 minutes before termination: the group went to 0 (45 min lead) and the command is sent.
    let late = t(12, 10, 30);
    enqueue_actions(&store, &due(&actions, &target, late, false), late).await.unwrap();
    enqueue_actions(&store, &due(&actions, &target, late, false), late).await.unwrap();
    let down = action_runner.run(&store, late).await.unwrap();
    assert_eq!(down.done.len(), 2, "{down:?}");
    assert_eq!(desired(&aws.sdk, &group_name).await, 0);
    let results = action_runner.run(&store, late + Duration::minutes(5)).await.unwrap();
    assert_eq!(results.done.len(), 1, "moto's invocations succeed at once: {results:?}");

    let ssm_client = aws_sdk_ssm::Client::new(&aws.sdk);
    let mut sent_to: BTreeMap<String, usize> = BTreeMap::new();
    for i in ["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"] {
        let listed = ssm_client.list_commands().instance_id(i).send().await.unwrap();
        let ours = listed
            .commands()
            .iter()
            .filter(|c| c.comment().is_some_and(|c| c.contains(&target.block.reservation_id)))
            .count();
        sent_to.insert(i.to_string(), ours);
    }
    assert!(sent_to.values().all(|n| *n == 1), "once per instance: {sent_to:?}");

    // The end clears the parameter; nothing runs twice.
    enqueue_actions(&store, &at_point(&actions, &target, Point::Ended, false), late).await.unwrap();
    action_runner.run(&store, late + Duration::minutes(10)).await.unwrap();
    assert_eq!(moto.ssm.parameter(&region, &format!("/capblock/{rule}/current")).await.unwrap(), None);
    let idle = action_runner.run(&store, late + Duration::minutes(20)).await.unwrap();
    assert!(idle.done.is_empty() && idle.failed.is_empty(), "{idle:?}");

    // Every step announced in the block's thread: done, and the one failure.
    let flushed = flush(&store, &aws.notifier(), late + Duration::minutes(30)).await.unwrap();
    assert_eq!(flushed.failed, 0);
    let alerts = aws.alerts().await;
    let threads: Vec<&str> = alerts.iter().filter_map(|a| a.body["metadata"]["threadId"].as_str()).collect();
    assert!(threads.iter().all(|t| *t == target.block.reservation_id), "{threads:?}");
    let failed = alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "action-failed").count();
    assert_eq!(failed, 1, "a failure is announced once");
    // The group is in the block's zone: no warning.
    assert!(!alerts.iter().any(|a| a.body["metadata"]["eventType"] == "action-warning"));
}

#[tokio::test]
async fn a_group_scaled_up_in_another_zone_than_the_block_is_warned_of_once() {
    let aws = Aws::fresh("handoff-zone").await;
    let store = aws.store();
    let moto = MotoHands::new(&aws.sdk);
    let action_runner = moto.action_runner();
    let group_name = format!("trainers-{}", id());
    auto_scaling_group_in(&aws.sdk, "us-east-1", &group_name, "us-east-1b").await;
    let actions = vec![Action::ScaleGroup { group: group_name.clone(), desired: 2, down_lead_minutes: 45 }];
    // The block is in us-east-1a.
    let target = Target::of(&block(&format!("cr-{}0000000000", id()), "zone"), "capblock-test").unwrap();
    let now = t(10, 11, 35);
    enqueue_actions(&store, &at_point(&actions, &target, Point::Active, false), now).await.unwrap();
    let up = action_runner.run(&store, now).await.unwrap();
    assert_eq!((up.done.len(), up.failed.len()), (1, 0), "scaled up all the same: {up:?}");
    assert_eq!(desired(&aws.sdk, &group_name).await, 2);
    // Scaled down at the end: no second look, no second warning.
    let late = t(12, 10, 30);
    enqueue_actions(&store, &due(&actions, &target, late, false), late).await.unwrap();
    assert_eq!(action_runner.run(&store, late).await.unwrap().done.len(), 1);
    assert_eq!(desired(&aws.sdk, &group_name).await, 0);

    flush(&store, &aws.notifier(), late + Duration::minutes(5)).await.unwrap();
    let alerts = aws.alerts().await;
    let warnings: Vec<&Published> =
        alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "action-warning").collect();
    assert_eq!(warnings.len(), 1, "{:#?}", event_types(&alerts));
    let text = warnings[0].body["content"]["description"].as_str().unwrap();
    assert_eq!(
        text,
        format!(
            "Group `{group_name}` is in us-east-1b, the block is in us-east-1a: nothing it launches lands in the block."
        )
    );
    assert_eq!(warnings[0].body["metadata"]["threadId"], target.block.reservation_id.as_str());
}

// ---------------------------------------------------------------------------------------------
// A block's life through the real scan and tracker: its events and its rule's actions.
// ---------------------------------------------------------------------------------------------

/// A 1-day p5 block starting 12-03 11:30 (termination 12-04 11:00), payment after 3 hours.
fn life_scenario() -> String {
    ScenarioToml::new(5, T0)
        .payment("succeed", Some(3))
        .p5("us-east-1", &[2], "3.00")
        .trn2_ultra("us-east-1", &[1], &[2], "1.80")
        .build()
}

/// The rule `rule` (of its own, as moto's parameters and commands are shared by the tests):
/// tagged, and with every action (the group scaled to 1, down 45 minutes before termination;
/// `document` sent 30 minutes before).
fn life_rule(h: &Rig, rule: &str, group: &str, document: &str) -> capblock_shared::domain::rule::Rule {
    let actions = format!(
        "tags = {{ team = \"llm\" }}\n\
         [[actions]]\nkind = \"publish_parameter\"\n\
         [[actions]]\nkind = \"scale_group\"\ngroup = \"{group}\"\ndesired = 1\ndown_lead_minutes = 45\n\
         [[actions]]\nkind = \"run_command\"\ndocument = \"{document}\"\nlead_minutes = 30"
    );
    RuleToml::p5(rule).window(1, 10).extra(&actions).rule(h.now())
}

async fn life_rig(name: &str) -> (Rig, String) {
    let mut h =
        Rig::start(name, &life_scenario(), capblock_tests::quick_timeouts(), T0.parse().unwrap(), "capblock-test")
            .await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    let group_name = format!("trainers-{}", id());
    (h, group_name)
}

/// Moves the rig's clock to `at` in steps of at most 7 hours, tracking after each step (twice at
/// the last: a duplicate run).
async fn track_until(h: &Rig, at: &str) {
    let at: DateTime<Utc> = at.parse().unwrap();
    while h.now() < at {
        h.advance_minutes((at - h.now()).num_minutes().min(7 * 60)).await;
        h.track().await;
    }
    h.track().await;
}

fn parameter_name(rule: &str) -> String {
    format!("/capblock/{rule}/current")
}

/// The commands of `document` each of the block's instances was sent (the simulator's ids
/// repeat between tests: the document tells this test's apart).
async fn commands_per_instance(h: &Rig, reservation: &str, document: &str) -> BTreeMap<String, usize> {
    let instances = h.market.instances_in(&"us-east-1".parse().unwrap(), reservation).await.unwrap();
    assert!(!instances.is_empty(), "an active block has running instances");
    let ssm = aws_sdk_ssm::Client::new(&h.aws.sdk);
    let mut out = BTreeMap::new();
    for i in instances {
        let listed = ssm.list_commands().instance_id(&i).send().await.unwrap();
        let ours = listed
            .commands()
            .iter()
            .filter(|c| c.document_name() == Some(document) && c.comment().is_some_and(|c| c.contains(reservation)))
            .count();
        out.insert(i, ours);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocks_life_puts_each_event_once_and_runs_each_action_once() {
    let (h, group_name) = life_rig("handoff-life").await;
    auto_scaling_group(&h.aws.sdk, "us-east-1", &group_name).await;
    let region: Region = "us-east-1".parse().unwrap();
    let (rule, document) = (format!("life-{}", id()), "AWS-RunShellScript");
    let id = h.buy(&life_rule(&h, &rule, &group_name, document)).await;
    let events = h.aws.events().await;
    assert_eq!(detail_types(&events), ["Block Purchased"]);
    let d = &events[0]["detail"];
    assert_eq!((d["reservation_id"].as_str(), d["rule_id"].as_str()), (Some(id.as_str()), Some(rule.as_str())));
    assert_eq!(d["tags"], serde_json::json!({"team": "llm"}), "the rule's tags, not capblock's own");
    assert_eq!(d["termination_time"], "2026-12-04T11:00:00Z");

    // Paid: the parameter names the block; no event (payment succeeded is not one).
    track_until(&h, "2026-12-01T03:00:00Z").await;
    let value = h.ssm.parameter(&region, &parameter_name(&rule)).await.unwrap().expect("published");
    assert!(value.contains(&id) && value.contains("2026-12-04T11:30:00Z"), "{value}");
    assert!(h.aws.events().await.is_empty());
    assert_eq!(desired(&h.aws.sdk, &group_name).await, 0, "not before the start");

    // Active: Block Active once, the group scaled up once.
    track_until(&h, "2026-12-03T11:35:00Z").await;
    assert_eq!(detail_types(&h.aws.events().await), ["Block Active"]);
    assert_eq!(desired(&h.aws.sdk, &group_name).await, 1);

    // 45 minutes before termination the group goes to 0; the command waits for its own lead.
    track_until(&h, "2026-12-04T10:15:00Z").await;
    assert_eq!(desired(&h.aws.sdk, &group_name).await, 0);
    assert!(commands_per_instance(&h, &id, document).await.values().all(|n| *n == 0));
    // 30 minutes before: the command, once per instance, and its result collected.
    track_until(&h, "2026-12-04T10:30:00Z").await;
    track_until(&h, "2026-12-04T10:40:00Z").await;
    let sent = commands_per_instance(&h, &id, document).await;
    assert!(sent.values().all(|n| *n == 1), "once per instance: {sent:?}");

    // The end: Block Ended, the parameter cleared.
    track_until(&h, "2026-12-04T11:35:00Z").await;
    let ended = h.aws.events().await;
    assert_eq!(detail_types(&ended), ["Block Ended"]);
    assert_eq!(ended[0]["detail"]["outcome"], "expired");
    assert_eq!(h.ssm.parameter(&region, &parameter_name(&rule)).await.unwrap(), None);
    assert!(h.aws.events().await.is_empty());

    // Every action announced once in the block's thread: parameter, up, down, command, its
    // result, and the parameter cleared (the group's end scale-down shares the lead's key).
    let alerts = h.aws.alerts().await;
    let actions: Vec<&Published> =
        alerts.iter().filter(|a| a.body["metadata"]["eventType"].as_str().unwrap().starts_with("action-")).collect();
    let mut ids: Vec<&str> = actions.iter().map(|a| a.body["id"].as_str().unwrap()).collect();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "each once: {ids:#?}");
    assert_eq!(n, 6, "{ids:#?}");
    assert!(actions.iter().all(|a| a.body["metadata"]["threadId"] == id.as_str()));
    let result = actions.iter().find(|a| a.body["metadata"]["eventType"] == "action-result").expect("a result");
    assert!(result.body["content"]["description"].as_str().unwrap().contains("Ran on: i-"), "{:#?}", result.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_action_is_announced_once_retried_and_never_holds_the_block_back() {
    let (h, group_name) = life_rig("handoff-fail").await;
    let id = h.buy(&life_rule(&h, &format!("fail-{}", id()), &group_name, "AWS-RunShellScript")).await;
    // The group does not exist: each run fails the scale-up, the block goes on regardless.
    track_until(&h, "2026-12-03T11:35:00Z").await;
    track_until(&h, "2026-12-03T12:00:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    assert_eq!(detail_types(&h.aws.events().await), ["Block Purchased", "Block Active"]);
    let failed: Vec<String> = event_types(&h.aws.alerts().await).into_iter().filter(|t| t == "action-failed").collect();
    assert_eq!(failed.len(), 1, "announced once, however many runs it fails");
    h.advance_minutes(5).await; // past the last try's lease
    let report = h.track().await;
    assert_eq!(report.handoff.failed.len(), 1, "still retried: {:#?}", report.handoff);
    // Fixed by a person: the next run scales it up.
    auto_scaling_group(&h.aws.sdk, "us-east-1", &group_name).await;
    h.advance_minutes(5).await;
    let report = h.track().await;
    assert!(report.handoff.failed.is_empty(), "{:#?}", report.handoff);
    assert_eq!(desired(&h.aws.sdk, &group_name).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_dry_run_actions_are_announced_and_change_nothing() {
    let (mut h, group_name) = life_rig("handoff-dry").await;
    auto_scaling_group(&h.aws.sdk, "us-east-1", &group_name).await;
    let region: Region = "us-east-1".parse().unwrap();
    let (rule, document) = (format!("dry-{}", id()), format!("checkpoint-{}", id()));
    let id = h.buy(&life_rule(&h, &rule, &group_name, &document)).await;
    h.track.stack.mode = capblock_shared::domain::rule::Mode::DryRun;
    track_until(&h, "2026-12-04T10:40:00Z").await;
    assert_eq!(desired(&h.aws.sdk, &group_name).await, 0);
    assert_eq!(h.ssm.parameter(&region, &parameter_name(&rule)).await.unwrap(), None);
    assert!(commands_per_instance(&h, &id, &document).await.values().all(|n| *n == 0));
    let alerts = h.aws.alerts().await;
    let would: Vec<&Published> = alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "action-done").collect();
    // Parameter, up, down, command: each announced once as what would be done.
    assert_eq!(would.len(), 4, "{:#?}", event_types(&alerts));
    assert!(would.iter().all(|a| a.body["content"]["description"].as_str().unwrap().starts_with("Would ")));
    // The events are facts, not actions: they go out in dry-run too.
    assert_eq!(detail_types(&h.aws.events().await), ["Block Purchased", "Block Active"]);
}

// ---------------------------------------------------------------------------------------------
// The rule's capacity reservation group, through a block's life.
// ---------------------------------------------------------------------------------------------

/// The rule `rule` of one u-trn2x64 UltraServer with a reservation group (only UltraServer
/// blocks can join one) and the parameter.
fn group_rule(h: &Rig, rule: &str) -> capblock_shared::domain::rule::Rule {
    let extra = "ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1]\n\
                 [[actions]]\nkind = \"publish_parameter\"\n[[actions]]\nkind = \"reservation_group\"";
    RuleToml::p5(rule).instance_types(&[]).instance_counts(&[]).window(1, 10).extra(extra).rule(h.now())
}

/// A group configuration item: its type, and its parameters' names and values.
type ConfigurationItem = (String, Vec<(String, Vec<String>)>);

/// The configuration of resource group `name` on moto.
async fn group_configuration(sdk: &SdkConfig, name: &str) -> Option<Vec<ConfigurationItem>> {
    let rg = aws_sdk_resourcegroups::Client::new(sdk);
    let out = rg.get_group_configuration().group(name).send().await.ok()?;
    let items = out.group_configuration()?.configuration().iter().map(|i| {
        let params = i.parameters().iter().map(|p| (p.name().to_string(), p.values().to_vec())).collect();
        (i.r#type().to_string(), params)
    });
    Some(items.collect())
}

fn descriptions<'a>(alerts: &'a [Published], event_type: &str) -> Vec<&'a str> {
    alerts
        .iter()
        .filter(|a| a.body["metadata"]["eventType"] == event_type)
        .map(|a| a.body["content"]["description"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocks_life_puts_its_reservation_in_the_rules_group_once_paid_and_out_at_the_end() {
    let (h, _) = life_rig("handoff-rgroup").await;
    let region: Region = "us-east-1".parse().unwrap();
    let rule = format!("grp-{}", id());
    let group = format!("capblock-capblock-test-{rule}");
    let id = h.buy(&group_rule(&h, &rule)).await;
    assert_eq!(group_configuration(&h.aws.sdk, &group).await, None, "not before it is paid");

    // Paid (scheduled, days before the start): the group is made as the EC2 user guide makes
    // one, tagged with the stack.
    track_until(&h, "2026-12-01T03:00:00Z").await;
    // An UltraServer block's pool names its instance type and the Capacity Block type.
    let pool = (
        "AWS::EC2::CapacityReservationPool".to_string(),
        vec![
            ("instance-type".to_string(), vec!["trn2u.48xlarge".to_string()]),
            ("reservation-type".to_string(), vec!["capacity-block".to_string()]),
        ],
    );
    let generic = (
        "AWS::ResourceGroups::Generic".to_string(),
        vec![("allowed-resource-types".to_string(), vec!["AWS::EC2::CapacityReservation".to_string()])],
    );
    assert_eq!(group_configuration(&h.aws.sdk, &group).await, Some(vec![pool, generic]));
    let rg = aws_sdk_resourcegroups::Client::new(&h.aws.sdk);
    let listed = rg.list_groups().send().await.unwrap();
    let ours: Vec<&str> = listed
        .group_identifiers()
        .iter()
        .filter(|g| g.group_name() == Some(group.as_str()))
        .filter_map(|g| g.group_arn())
        .collect();
    let tags = rg.get_tags().arn(ours[0]).send().await.unwrap();
    assert_eq!(tags.tags().unwrap()["capblock:stack"], "capblock-test");
    // The block's reservation is in the group, once: the add is done, and a later run neither
    // adds it again nor makes a second group (CreateGroup's "already exists" is no failure).
    let arn = h.block(&id).await.arn.expect("EC2 gave the reservation's ARN");
    let members = |rg: aws_sdk_resourcegroups::Client, group: String| async move {
        let out = rg.list_group_resources().group(group).send().await.unwrap();
        out.resources().iter().filter_map(|r| r.identifier()?.resource_arn().map(str::to_string)).collect::<Vec<_>>()
    };
    assert_eq!(members(rg.clone(), group.clone()).await, vec![arn.clone()]);
    h.advance_minutes(5).await;
    let report = h.track().await;
    assert!(report.handoff.failed.is_empty() && report.handoff.done.is_empty(), "{:#?}", report.handoff);
    let again = rg.list_groups().send().await.unwrap();
    assert_eq!(again.group_identifiers().iter().filter(|g| g.group_name() == Some(group.as_str())).count(), 1);
    assert_eq!(ours.len(), 1);
    assert_eq!(members(rg.clone(), group.clone()).await, vec![arn.clone()]);

    // The block's life goes on: active (still in the group), then ended: out of the group, the
    // group kept for the rule's next block; the parameter published and cleared.
    track_until(&h, "2026-12-03T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    assert_eq!(members(rg.clone(), group.clone()).await, vec![arn.clone()]);
    track_until(&h, "2026-12-04T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Expired);
    assert!(members(rg.clone(), group.clone()).await.is_empty());
    assert_eq!(h.ssm.parameter(&region, &parameter_name(&rule)).await.unwrap(), None);

    // Nothing failed, and each step was said once: the add, and the removal at the end.
    let alerts = h.aws.alerts().await;
    assert!(descriptions(&alerts, "action-failed").is_empty(), "{:#?}", descriptions(&alerts, "action-failed"));
    let done = descriptions(&alerts, "action-done");
    assert_eq!(done.iter().filter(|d| d.contains(&group)).count(), 2, "{done:#?}");
}

/// A rule of instances keeps a group too (the EC2 user guide: a group supports every reservation
/// type, Capacity Blocks for ML included): the group is the guide's plain one, the pool and the
/// capacity-reservations-only filter, and holds the paid block's reservation once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_of_instances_puts_its_paid_block_in_its_group() {
    let (h, _) = life_rig("handoff-rgroup-instances").await;
    let rule = format!("grpi-{}", id());
    let group = format!("capblock-capblock-test-{rule}");
    let extra = "[[actions]]\nkind = \"reservation_group\"";
    let id = h.buy(&RuleToml::p5(&rule).window(1, 10).extra(extra).rule(h.now())).await;
    assert_eq!(group_configuration(&h.aws.sdk, &group).await, None, "not before it is paid");
    track_until(&h, "2026-12-01T03:00:00Z").await;
    let pool = ("AWS::EC2::CapacityReservationPool".to_string(), vec![]);
    let generic = (
        "AWS::ResourceGroups::Generic".to_string(),
        vec![("allowed-resource-types".to_string(), vec!["AWS::EC2::CapacityReservation".to_string()])],
    );
    assert_eq!(group_configuration(&h.aws.sdk, &group).await, Some(vec![pool, generic]));
    let arn = h.block(&id).await.arn.expect("EC2 gave the reservation's ARN");
    let rg = aws_sdk_resourcegroups::Client::new(&h.aws.sdk);
    let out = rg.list_group_resources().group(&group).send().await.unwrap();
    let members: Vec<&str> = out.resources().iter().filter_map(|r| r.identifier()?.resource_arn()).collect();
    assert_eq!(members, vec![arn.as_str()]);
    let alerts = h.aws.alerts().await;
    assert!(descriptions(&alerts, "action-failed").is_empty(), "{:#?}", descriptions(&alerts, "action-failed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_dry_run_the_group_is_announced_and_never_made() {
    let (mut h, _) = life_rig("handoff-rgroup-dry").await;
    let rule = format!("grpdry-{}", id());
    let group = format!("capblock-capblock-test-{rule}");
    h.buy(&group_rule(&h, &rule)).await;
    h.track.stack.mode = capblock_shared::domain::rule::Mode::DryRun;
    track_until(&h, "2026-12-04T11:35:00Z").await;
    assert_eq!(group_configuration(&h.aws.sdk, &group).await, None);
    let alerts = h.aws.alerts().await;
    let would = descriptions(&alerts, "action-done");
    let add = format!("Would add the block's reservation to the capacity reservation group `{group}`");
    let remove = format!("Would take the block's reservation out of the capacity reservation group `{group}`");
    assert_eq!(would.iter().filter(|d| d.starts_with(&add)).count(), 1, "{would:#?}");
    assert_eq!(would.iter().filter(|d| d.starts_with(&remove)).count(), 1, "{would:#?}");
    assert!(descriptions(&alerts, "action-failed").is_empty());
}

// ---------------------------------------------------------------------------------------------
// An EKS managed node group (scale_nodegroup), through a block's life on moto's EKS.
// ---------------------------------------------------------------------------------------------

/// The rule `rule` scaling node group `nodegroup` of `cluster` to 1 node (min 1, max 3) at the
/// start, back 45 minutes before termination.
fn nodegroup_rule(h: &Rig, rule: &str, cluster: &str, nodegroup: &str) -> capblock_shared::domain::rule::Rule {
    let actions = format!(
        "[[actions]]\nkind = \"scale_nodegroup\"\ncluster = \"{cluster}\"\nnodegroup = \"{nodegroup}\"\n\
         desired = 1\nmin = 1\nmax = 3\ndown_lead_minutes = 45"
    );
    RuleToml::p5(rule).window(1, 10).extra(&actions).rule(h.now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocks_life_scales_its_node_group_up_once_and_back_to_what_it_was_once() {
    let (h, _) = life_rig("handoff-eks").await;
    let (cluster, nodegroup) = (format!("train-{}", id()), "p5-nodes");
    eks_nodegroup(&h.aws.sdk, "us-east-1", &cluster, nodegroup, (0, 1, 0)).await;
    let size = || nodegroup_size(&h.aws.sdk, "us-east-1", &cluster, nodegroup);
    let id = h.buy(&nodegroup_rule(&h, &format!("eks-{}", id()), &cluster, nodegroup)).await;

    // Paid, days before the start: left as it is.
    track_until(&h, "2026-12-01T03:00:00Z").await;
    assert_eq!(size().await, (0, 1, 0), "not before the start");

    // Active: scaled up once (track_until's last step runs the tracker twice).
    track_until(&h, "2026-12-03T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    assert_eq!(size().await, (1, 3, 1));
    h.advance_minutes(5).await;
    let again = h.track().await;
    assert!(again.handoff.done.is_empty() && again.handoff.planned == 0, "{:#?}", again.handoff);

    // 45 minutes before termination: back to what it was.
    track_until(&h, "2026-12-04T10:15:00Z").await;
    assert_eq!(size().await, (0, 1, 0));
    // The end plans the same order (its key): nothing runs again.
    track_until(&h, "2026-12-04T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Expired);
    assert_eq!(size().await, (0, 1, 0));

    let alerts = h.aws.alerts().await;
    let done = descriptions(&alerts, "action-done");
    assert_eq!(done.len(), 2, "up and back, each once: {done:#?}");
    let said = |start: &str| done.iter().find(|d| d.starts_with(start)).unwrap_or_else(|| panic!("{start}: {done:#?}"));
    let up = said(&format!("Done: scale node group `{nodegroup}` of cluster `{cluster}` to 1 (min 1, max 3)."));
    assert!(up.contains("min 1, max 3, desired 1 (was min 0, max 1, desired 0)"), "{up}");
    let back =
        said(&format!("Done: put node group `{nodegroup}` of cluster `{cluster}` back to its size before the block."));
    assert!(back.contains("min 0, max 1, desired 0 (was min 1, max 3, desired 1)"), "{back}");
    assert!(descriptions(&alerts, "action-failed").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_node_group_is_announced_once_and_scaled_once_it_is_there() {
    let (h, _) = life_rig("handoff-eks-missing").await;
    let cluster = format!("train-{}", id());
    h.buy(&nodegroup_rule(&h, &format!("eksfail-{}", id()), &cluster, "p5-nodes")).await;
    track_until(&h, "2026-12-03T11:35:00Z").await;
    track_until(&h, "2026-12-03T12:00:00Z").await;
    let failed = descriptions(&h.aws.alerts().await, "action-failed").iter().map(|d| d.to_string()).collect::<Vec<_>>();
    assert_eq!(failed.len(), 1, "announced once, however many runs it fails: {failed:#?}");
    assert!(failed[0].contains("DescribeNodegroup") && failed[0].contains("no node group"), "{failed:#?}");
    // Made by a person: the next run scales it up.
    eks_nodegroup(&h.aws.sdk, "us-east-1", &cluster, "p5-nodes", (0, 1, 0)).await;
    h.advance_minutes(5).await;
    let report = h.track().await;
    assert!(report.handoff.failed.is_empty(), "{:#?}", report.handoff);
    assert_eq!(nodegroup_size(&h.aws.sdk, "us-east-1", &cluster, "p5-nodes").await, (1, 3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_dry_run_the_node_group_is_announced_and_never_scaled() {
    let (mut h, _) = life_rig("handoff-eks-dry").await;
    let (cluster, nodegroup) = (format!("train-{}", id()), "p5-nodes");
    eks_nodegroup(&h.aws.sdk, "us-east-1", &cluster, nodegroup, (0, 1, 0)).await;
    h.buy(&nodegroup_rule(&h, &format!("eksdry-{}", id()), &cluster, nodegroup)).await;
    h.track.stack.mode = capblock_shared::domain::rule::Mode::DryRun;
    track_until(&h, "2026-12-04T11:35:00Z").await;
    assert_eq!(nodegroup_size(&h.aws.sdk, "us-east-1", &cluster, nodegroup).await, (0, 1, 0));
    let alerts = h.aws.alerts().await;
    let would = descriptions(&alerts, "action-done");
    let up = format!("Would scale node group `{nodegroup}` of cluster `{cluster}` to 1 (min 1, max 3).");
    let back = format!("Would put node group `{nodegroup}` of cluster `{cluster}` back to its size before the block.");
    assert_eq!(would.iter().filter(|d| d.starts_with(&up)).count(), 1, "{would:#?}");
    assert_eq!(would.iter().filter(|d| d.starts_with(&back)).count(), 1, "{would:#?}");
}
