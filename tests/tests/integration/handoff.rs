//! Hand-off to the workloads on the local stack: capblock's events through the outbox onto an
//! EventBridge bus, routed by a rule to an SQS queue and validated against their JSON Schemas;
//! and the actions on moto's SSM and Auto Scaling through the real adapters.

use std::collections::BTreeMap;
use std::process::Stdio;

use aws_config::SdkConfig;
use capblock_shared::app::handoff::{Hands, enqueue_actions, event_notice};
use capblock_shared::app::outbox::flush;
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::eventbridge::{Delivery, EventBridgeBus};
use capblock_shared::aws::ssm::Ssm;
use capblock_shared::domain::bus::{EndOutcome, Step, Subject};
use capblock_shared::domain::handoff::{Action, Point, Target, at_point, due};
use capblock_shared::domain::names::Region;
use capblock_shared::ports::{InstanceSource, MarketError, Outbox, Parameters};
use capblock_tests::Aws;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
}

fn id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// A bus of the test's own with a rule sending every capblock event to a queue: the README's
/// rule, on moto.
async fn bus_with_queue(sdk: &SdkConfig, name: &str) -> (String, String) {
    let eb = aws_sdk_eventbridge::Client::new(sdk);
    eb.create_event_bus().name(name).send().await.unwrap();
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let url = sqs.create_queue().queue_name(name).send().await.unwrap().queue_url.unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    eb.put_rule()
        .name(format!("{name}-all"))
        .event_bus_name(name)
        .event_pattern(r#"{"source": ["capblock"]}"#)
        .send()
        .await
        .unwrap();
    eb.put_targets()
        .rule(format!("{name}-all"))
        .event_bus_name(name)
        .targets(aws_sdk_eventbridge::types::Target::builder().id("queue").arn(arn).build().unwrap())
        .send()
        .await
        .unwrap();
    (name.to_string(), url)
}

async fn drain_events(sdk: &SdkConfig, queue: &str) -> Vec<Value> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut out = Vec::new();
    loop {
        let r = sqs.receive_message().queue_url(queue).max_number_of_messages(10).send().await.unwrap();
        let msgs = r.messages.unwrap_or_default();
        if msgs.is_empty() {
            return out;
        }
        for m in msgs {
            out.push(serde_json::from_str(m.body().unwrap()).unwrap());
            sqs.delete_message().queue_url(queue).receipt_handle(m.receipt_handle().unwrap()).send().await.unwrap();
        }
    }
}

/// Every event through `infra/local/validate_events.py` (jsonschema, Draft 2020-12), with the
/// local stack's Python.
async fn validate_with_schemas(events: &[Value]) {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cache = std::env::var("CAPBLOCK_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/capblock", std::env::var("HOME").unwrap_or_default()));
    let mut child = tokio::process::Command::new(format!("{cache}/venv/bin/python"))
        .arg(repo.join("infra/local/validate_events.py"))
        .arg(repo.join("shared/schemas/events"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the local stack's venv python");
    let mut input = String::new();
    for e in events {
        input.push_str(&e.to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "events do not validate against their schemas:\n{text}");
    assert_eq!(text.lines().filter(|l| l.ends_with(": valid")).count(), events.len(), "{text}");
}

fn subject(reservation: &str) -> Subject {
    Subject {
        reservation_id: reservation.into(),
        region: "us-east-1".parse().unwrap(),
        availability_zone: "us-east-1a".into(),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: 2,
        start: t(10, 11, 30),
        end: t(12, 11, 30),
        ultraserver: false,
        rule_id: Some("p5-weekly".into()),
        tags: [("team".to_string(), "llm".to_string())].into(),
    }
}

fn every_step() -> Vec<(Step, &'static str)> {
    vec![
        (Step::Purchased, "purchased"),
        (Step::PaymentFailed, "payment-failed"),
        (Step::Active, "delivered"),
        (Step::Ending { minutes_left: 30 }, "reminder-30m-end-20261212T1130Z"),
        (Step::Ending { minutes_left: 120 }, "reminder-120m-end-20261212T1130Z"),
        (Step::Extended { previous_end: t(11, 11, 30) }, "extended-20261212T1130"),
        (Step::Ended { outcome: EndOutcome::Expired }, "expired"),
        (Step::HealthChanged { status: "impaired".into(), summary: "a node degraded".into() }, "health-1"),
    ]
}

#[tokio::test]
async fn every_event_reaches_a_rules_queue_once_and_matches_its_schema() {
    let aws = Aws::fresh("handoff-events").await;
    let (bus, queue) = bus_with_queue(&aws.sdk, &format!("capblock-events-{}", id())).await;
    let store = aws.store();
    let delivery =
        Delivery { sns: aws.notifier(), bus: EventBridgeBus::new(aws_sdk_eventbridge::Client::new(&aws.sdk), bus) };
    let reservation = format!("cr-{}0000000000", id());
    let s = subject(&reservation);
    let now = t(10, 11, 30);
    let arn = format!("arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{reservation}");
    for (step, key) in every_step() {
        assert!(store.enqueue(&event_notice(&s, &step, key, Some(&arn), now)).await.unwrap());
    }
    // Duplicate triggers (the event and the tracker, a retried invocation) add nothing.
    for (step, key) in every_step() {
        assert!(!store.enqueue(&event_notice(&s, &step, key, Some(&arn), now)).await.unwrap());
    }
    let first = flush(&store, &delivery, now).await.unwrap();
    assert_eq!((first.published, first.failed), (8, 0), "{first:?}");
    let again = flush(&store, &delivery, now + Duration::minutes(5)).await.unwrap();
    assert_eq!(again.published, 0, "published once: {again:?}");

    let events = drain_events(&aws.sdk, &queue).await;
    assert_eq!(events.len(), 8, "{events:#?}");
    let mut keys: Vec<&str> = events.iter().map(|e| e["detail"]["event_key"].as_str().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 8, "each (block, step) once");
    for e in &events {
        assert_eq!(e["source"], "capblock");
        assert_eq!(e["resources"][0], arn.as_str());
        assert_eq!(e["detail"]["reservation_id"], reservation.as_str());
    }
    let ending: Vec<i64> = events
        .iter()
        .filter(|e| e["detail-type"] == "Block Ending")
        .filter_map(|e| e["detail"]["minutes_left"].as_i64())
        .collect();
    assert_eq!(ending.len(), 2, "one per reminder lead");
    validate_with_schemas(&events).await;
}

#[tokio::test]
async fn more_than_ten_events_go_out_in_putevents_sized_calls() {
    let aws = Aws::fresh("handoff-batch").await;
    let (bus, queue) = bus_with_queue(&aws.sdk, &format!("capblock-batch-{}", id())).await;
    let store = aws.store();
    let delivery =
        Delivery { sns: aws.notifier(), bus: EventBridgeBus::new(aws_sdk_eventbridge::Client::new(&aws.sdk), bus) };
    let now = t(10, 11, 30);
    // moto refuses a call of more than 10 entries, as EventBridge does: 23 go out in 3 calls.
    for n in 0..23 {
        let s = subject(&format!("cr-{}{n:010}", id()));
        store.enqueue(&event_notice(&s, &Step::Active, "delivered", None, now)).await.unwrap();
    }
    let report = flush(&store, &delivery, now).await.unwrap();
    assert_eq!((report.published, report.failed), (23, 0), "{report:?}");
    assert_eq!(drain_events(&aws.sdk, &queue).await.len(), 23);
}

#[tokio::test]
async fn an_event_the_bus_refuses_stays_pending_and_goes_out_later() {
    let aws = Aws::fresh("handoff-retry").await;
    let name = format!("capblock-late-{}", id());
    let store = aws.store();
    let missing = Delivery {
        sns: aws.notifier(),
        bus: EventBridgeBus::new(aws_sdk_eventbridge::Client::new(&aws.sdk), format!("{name}-no-such-bus")),
    };
    let now = t(10, 11, 30);
    let s = subject(&format!("cr-{}0000000000", id()));
    store.enqueue(&event_notice(&s, &Step::Active, "delivered", None, now)).await.unwrap();
    let failed = flush(&store, &missing, now).await.unwrap();
    assert_eq!((failed.published, failed.failed), (0, 1), "{failed:?}");

    let (bus, queue) = bus_with_queue(&aws.sdk, &name).await;
    let delivery =
        Delivery { sns: aws.notifier(), bus: EventBridgeBus::new(aws_sdk_eventbridge::Client::new(&aws.sdk), bus) };
    let later = flush(&store, &delivery, now + Duration::minutes(5)).await.unwrap();
    assert_eq!(later.published, 1, "{later:?}");
    assert_eq!(drain_events(&aws.sdk, &queue).await.len(), 1);
}

/// The block's instances: the market simulator's, as the tracker sees them.
struct TwoInstances;

#[async_trait::async_trait]
impl InstanceSource for TwoInstances {
    async fn instances_in(&self, _r: &Region, _id: &str) -> Result<Vec<String>, MarketError> {
        Ok(vec!["i-0aaaaaaaaaaaaaaa1".into(), "i-0aaaaaaaaaaaaaaa2".into()])
    }
    async fn reservation_of(&self, _r: &Region, _i: &str) -> Result<Option<String>, MarketError> {
        Ok(None)
    }
}

async fn group(sdk: &SdkConfig, name: &str) {
    let asg = aws_sdk_autoscaling::Client::new(sdk);
    asg.create_launch_configuration()
        .launch_configuration_name(name)
        .image_id("ami-12c6146b")
        .instance_type("p5.48xlarge")
        .send()
        .await
        .unwrap();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name(name)
        .launch_configuration_name(name)
        .min_size(0)
        .max_size(4)
        .desired_capacity(0)
        .availability_zones("us-east-1a")
        .send()
        .await
        .unwrap();
}

async fn desired(sdk: &SdkConfig, name: &str) -> i32 {
    let asg = aws_sdk_autoscaling::Client::new(sdk);
    let out = asg.describe_auto_scaling_groups().auto_scaling_group_names(name).send().await.unwrap();
    out.auto_scaling_groups()[0].desired_capacity().unwrap()
}

#[tokio::test]
async fn actions_run_once_on_moto_and_a_failure_is_retried() {
    let aws = Aws::fresh("handoff-actions").await;
    let store = aws.store();
    let rule = format!("rule-{}", id());
    let group_name = format!("trainers-{}", id());
    let (ssm, asg) = (Ssm::new(aws.sdk.clone()), AutoScaling::new(aws.sdk.clone()));
    let hands = Hands { parameters: &ssm, groups: &asg, commands: &ssm, instances: &TwoInstances };
    let actions = vec![
        Action::PublishParameter,
        Action::ScaleGroup { group: group_name.clone(), desired: 2, down_lead_minutes: 45 },
        Action::RunCommand { document: "AWS-RunShellScript".into(), lead_minutes: 30 },
    ];
    let target = Target {
        reservation_id: format!("cr-{}0000000000", id()),
        region: "us-east-1".into(),
        availability_zone: "us-east-1a".into(),
        instance_type: "p5.48xlarge".into(),
        instance_count: 2,
        start: t(10, 11, 30),
        end: t(11, 11, 30),
        ultraserver: false,
        rule_id: rule.clone(),
    };
    let region: Region = "us-east-1".parse().unwrap();
    let now = t(10, 11, 35);

    // The group does not exist yet: scale-up fails, is announced, and stays pending.
    enqueue_actions(&store, &at_point(&actions, &target, Point::Active, false), now).await.unwrap();
    let first = hands.run(&store, now).await.unwrap();
    assert_eq!(first.done.len(), 1, "the parameter: {first:?}");
    assert_eq!(first.failed.len(), 1, "the group: {first:?}");
    let value = ssm.parameter(&region, &format!("/capblock/{rule}/current")).await.unwrap().unwrap();
    assert!(value.contains(&target.reservation_id), "{value}");

    group(&aws.sdk, &group_name).await;
    // A duplicate trigger plans nothing new; the retry (past the lease) succeeds.
    assert_eq!(enqueue_actions(&store, &at_point(&actions, &target, Point::Active, false), now).await.unwrap(), 0);
    let retry = hands.run(&store, now + Duration::minutes(5)).await.unwrap();
    assert_eq!((retry.done.len(), retry.failed.len()), (1, 0), "{retry:?}");
    assert_eq!(desired(&aws.sdk, &group_name).await, 2);

    // 30 minutes before termination: the group went to 0 (45 min lead) and the command is sent.
    let late = t(11, 10, 30);
    enqueue_actions(&store, &due(&actions, &target, late, false), late).await.unwrap();
    enqueue_actions(&store, &due(&actions, &target, late, false), late).await.unwrap();
    let down = hands.run(&store, late).await.unwrap();
    assert_eq!(down.done.len(), 2, "{down:?}");
    assert_eq!(desired(&aws.sdk, &group_name).await, 0);
    let results = hands.run(&store, late + Duration::minutes(5)).await.unwrap();
    assert_eq!(results.done.len(), 1, "moto's invocations succeed at once: {results:?}");

    let ssm_client = aws_sdk_ssm::Client::new(&aws.sdk);
    let mut sent_to: BTreeMap<String, usize> = BTreeMap::new();
    for i in ["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"] {
        let listed = ssm_client.list_commands().instance_id(i).send().await.unwrap();
        let ours = listed
            .commands()
            .iter()
            .filter(|c| c.comment().is_some_and(|c| c.contains(&target.reservation_id)))
            .count();
        sent_to.insert(i.to_string(), ours);
    }
    assert!(sent_to.values().all(|n| *n == 1), "once per instance: {sent_to:?}");

    // The end clears the parameter; nothing runs twice.
    enqueue_actions(&store, &at_point(&actions, &target, Point::Ended, false), late).await.unwrap();
    hands.run(&store, late + Duration::minutes(10)).await.unwrap();
    assert_eq!(ssm.parameter(&region, &format!("/capblock/{rule}/current")).await.unwrap(), None);
    let idle = hands.run(&store, late + Duration::minutes(20)).await.unwrap();
    assert!(idle.done.is_empty() && idle.failed.is_empty(), "{idle:?}");

    // Every step announced in the block's thread: done, and the one failure.
    let flushed = flush(&store, &aws.notifier(), late + Duration::minutes(30)).await.unwrap();
    assert_eq!(flushed.failed, 0);
    let alerts = aws.alerts().await;
    let threads: Vec<&str> = alerts.iter().filter_map(|a| a.body["metadata"]["threadId"].as_str()).collect();
    assert!(threads.iter().all(|t| *t == target.reservation_id), "{threads:?}");
    let failed = alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "action-failed").count();
    assert_eq!(failed, 1, "a failure is announced once");
}
