//! Each function's handler called in this process, as Lambda calls it: a `LambdaEvent` built
//! here (`LambdaEvent::new(payload, Context::default())`, as lambda_runtime's own examples test
//! a handler) through the function's one edge (`capblock_shared::lambda::Lambda::handle`), on
//! this test's table, topics and bus on moto and the stack's simulator, with no rule or block
//! (so nothing depends on the day), on the wall clock as deployed. A normal event is answered
//! with the function's report; a malformed one is refused as `capblock.BadInput`.

use capblock_shared::app::on_capacity_event::Handled;
use capblock_shared::aws::clock::TimeSource;
use capblock_shared::config::Targets;
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::rule::Mode;
use capblock_shared::domain::stack::StackSettings;
use capblock_shared::lambda::{Context, EdgeConfig, LambdaEvent, Payload, Reply};
use capblock_shared::ports::SettingsStore;
use capblock_tests::Aws;
use serde::Deserialize;
use serde_json::{Value, json};

const STACK: &str = "capblock-handlers";

fn stack() -> StackSettings {
    StackSettings { name: STACK.into(), mode: Mode::DryRun, account_budget: None, team_budgets: Default::default() }
}

/// The edge's settings on this test's resources, on the wall clock (as a deployed stack runs).
fn edge(aws: &Aws, keep: bool) -> EdgeConfig {
    EdgeConfig {
        stack: STACK.into(),
        keep_settings: keep.then(stack),
        targets: Targets {
            table: aws.table.clone(),
            alerts_topic: aws.alerts_topic.clone(),
            event_bus: aws.events_bus.clone(),
        },
        workloads_topic: Some(aws.workloads_topic.clone()),
        schedule_group: Some("capblock-handlers".into()),
        time: TimeSource::Wall,
    }
}

fn event(payload: Value) -> LambdaEvent<Payload> {
    LambdaEvent::new(Payload::Json(payload), Context::default())
}

/// A body as the runtime reads it (`Payload`'s own parse), JSON or not.
fn body(text: &str) -> LambdaEvent<Payload> {
    let payload = Payload::deserialize(&mut serde_json::Deserializer::from_str(text)).unwrap();
    LambdaEvent::new(payload, Context::default())
}

fn tick() -> LambdaEvent<Payload> {
    event(json!({"source": "capblock.schedule"}))
}

/// This test's resources, and the SDK configuration the functions load (the stack's endpoints).
async fn setup(name: &str) -> (Aws, aws_config::SdkConfig) {
    let aws = Aws::fresh(name).await;
    let sdk = aws.sdk.clone();
    (aws, sdk)
}

#[tokio::test]
async fn scan_offerings_answers_a_tick_and_refuses_a_payload_that_is_not_an_object() {
    let (aws, sdk) = setup("handler-scan").await;
    let settings = scan_offerings::Settings {
        edge: edge(&aws, true),
        scan: capblock_shared::app::scan::ScanSettings {
            stack: stack(),
            describe: DescribeBudget::default(),
            settles: true,
        },
        member_accounts: Vec::new(),
    };
    let lambda = scan_offerings::build("scan-offerings", settings, sdk).await;
    let reply = lambda.handle(tick()).await.unwrap();
    let Reply::Run(report) = reply else { panic!("a tick is a run, not a role check: {reply:?}") };
    assert_eq!((report.rules, report.replay), (0, false), "{report:?}");
    // The edge kept the stack's settings for the CLI before the run.
    let kept = aws.store().stored_settings().await.unwrap().expect("settings stored");
    assert_eq!(kept.stack, stack());

    let e = lambda.handle(event(json!(["2026-12-01T00:00:00Z"]))).await.unwrap_err();
    assert_eq!(e.error_type, "capblock.BadInput", "{e:?}");
    assert!(e.error_message.contains("must be a JSON object"), "{e:?}");
}

#[tokio::test]
async fn track_blocks_answers_a_tick_and_refuses_a_body_that_is_not_json() {
    let (aws, sdk) = setup("handler-track").await;
    let settings = track_blocks::Settings {
        edge: edge(&aws, true),
        track: capblock_shared::app::track::TrackSettings {
            stack: stack(),
            payment_warning_hours: vec![6, 1],
            adopt_untagged: false,
            regions: Vec::new(),
        },
        reminders: track_blocks::ReminderSettings {
            group: "capblock-handlers".into(),
            target_arn: "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event".into(),
            role_arn: "arn:aws:iam::123456789012:role/capblock-reminders".into(),
            leads: vec![chrono::Duration::minutes(120)],
        },
        handoff_clusters: Vec::new(),
        page_bucket: None,
    };
    let lambda = track_blocks::build("track-blocks", settings, sdk);
    let reply = lambda.handle(tick()).await.unwrap();
    let Reply::Run(report) = reply else { panic!("a tick is a run, not a role check: {reply:?}") };
    let report = serde_json::to_value(&report).unwrap();
    assert_eq!(report["replay"], json!(false), "{report}");

    let e = lambda.handle(body("{\"source\": ")).await.unwrap_err();
    assert_eq!(e.error_type, "capblock.BadInput", "{e:?}");
    assert!(e.error_message.contains("the payload is not JSON"), "{e:?}");
}

#[tokio::test]
async fn on_capacity_event_keeps_an_alarms_state_and_refuses_a_body_that_is_not_json() {
    let (aws, sdk) = setup("handler-event").await;
    let settings = on_capacity_event::Settings {
        edge: edge(&aws, false),
        group: "capblock-handlers".into(),
        leads: vec![chrono::Duration::minutes(120)],
        role_arn: None,
    };
    let lambda = on_capacity_event::build("on-capacity-event", settings, sdk);
    // CloudWatch's documented state-change event, a minute before the function's clock (the
    // wall clock, read at the test's start): a state's time is never later than its news.
    let mut alarm: Value =
        serde_json::from_str(include_str!("../../../core/src/domain/alarm/state-change.json")).unwrap();
    let minute_ago = chrono::Utc::now() - chrono::Duration::minutes(1);
    alarm["time"] = json!(minute_ago.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    alarm["detail"]["state"]["value"] = json!("ALARM");
    let reply = lambda.handle(event(alarm)).await.unwrap();
    let Reply::Run(Handled::Alarm { state, .. }) = &reply else { panic!("an alarm's state is kept: {reply:?}") };
    assert_eq!(state, "ALARM", "{reply:?}");

    let e = lambda.handle(body("{not json")).await.unwrap_err();
    assert_eq!(e.error_type, "capblock.BadInput", "{e:?}");
    assert!(e.error_message.contains("the payload is not JSON"), "{e:?}");
}
