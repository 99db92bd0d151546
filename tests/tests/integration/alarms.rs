//! The stack's alarms as `capblock status` shows them: CloudWatch's state-change events (the
//! documented example, core/src/domain/alarm/) go to the real `on-capacity-event` binary behind
//! the local Runtime API, which keeps each alarm's last state in the table on moto; the real
//! `capblock` binary then lists those in ALARM.

use std::time::Duration as StdDuration;

use capblock_shared::domain::alarm::AlarmValue;
use capblock_shared::ports::AlarmStore;
use capblock_tests::runtime::{self, Outcome, binary};
use capblock_tests::{Aws, ScenarioToml, Sim, T0, binary_env};
use serde_json::{Value, json};

/// The stack the alarms are named after (`<stack>-...`).
const STACK: &str = "capblock";

/// `minutes` from the wall clock (the function's clock: a state's time is never later), as
/// CloudWatch writes an event's `time`.
fn ago(minutes: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::minutes(minutes)).format("%Y-%m-%dT%H:%M:00Z").to_string()
}

fn change(value: &str, time: &str) -> Value {
    let mut v: Value = serde_json::from_str(include_str!("../../../core/src/domain/alarm/state-change.json")).unwrap();
    v["id"] = json!(uuid::Uuid::new_v4().to_string());
    v["time"] = json!(time);
    v["detail"]["state"]["value"] = json!(value);
    v
}

async fn status(sim: &Sim, aws: &Aws) -> String {
    let out = tokio::process::Command::new(binary("capblock"))
        .args(["status", "--time", &ago(0)])
        .envs(binary_env(sim, aws, STACK))
        .output()
        .await
        .expect("run capblock status");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarm_events_are_kept_in_order_and_status_lists_those_in_alarm() {
    let sim = Sim::start(&ScenarioToml::new(71, T0).build()).await;
    let aws = Aws::fresh("alarms").await;
    let mut env = binary_env(&sim, &aws, STACK);
    // CloudWatch's times are the wall clock's, and so is the function's clock here, as in a
    // deployed stack: not the simulated market's.
    env.retain(|(k, _)| k != "CAPBLOCK_SIMULATED_CLOCK_URL");
    env.extend(
        [("CAPBLOCK_WORKLOADS_TOPIC_ARN", aws.workloads_topic.as_str()), ("CAPBLOCK_SCHEDULE_GROUP", "default")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let api = runtime::start().await;
    let _function = runtime::spawn(&api, &binary("on-capacity-event"), &env);
    let send = |event: Value| {
        let api = &api;
        async move {
            let id = api.invoke(event);
            match api.wait_outcome(&id, StdDuration::from_secs(60)).await {
                Some(Outcome::Response(v)) => v,
                other => panic!("{other:?}"),
            }
        }
    };

    assert!(status(&sim, &aws).await.contains("alarms in ALARM: none"));
    let fired_at = ago(60);
    let fired = send(change("ALARM", &fired_at)).await;
    assert_eq!((&fired["result"], &fired["state"], &fired["kept"]), (&json!("alarm"), &json!("ALARM"), &json!(true)));
    // An older OK delivered late does not hide the alarm.
    let late = send(change("OK", &ago(120))).await;
    assert_eq!(late["kept"], json!(false), "{late}");
    let shown = status(&sim, &aws).await;
    let since = format!("(since {} UTC)", fired_at[..16].replace('T', " "));
    assert!(shown.contains(&format!("alarms in ALARM: capblock-PurchaseFailedAlarm {since}")), "{shown}");

    // Another stack's alarm, another account's, a CloudWatch event of another kind, and an OK
    // from the far future (which would pin the state) change nothing shown.
    let mut other = change("ALARM", &ago(55));
    other["detail"]["alarmName"] = json!("someone-else-errors");
    send(other).await;
    let mut forged = change("OK", &ago(54));
    forged["account"] = json!("999999999999");
    assert_eq!(send(forged).await["kind"], json!("other-account"));
    let mut config = change("ALARM", &ago(53));
    config["detail-type"] = json!("CloudWatch Alarm Configuration Change");
    assert_eq!(send(config).await["kind"], json!("unknown-detail-type"));
    assert!(status(&sim, &aws).await.contains("alarms in ALARM: capblock-PurchaseFailedAlarm ("));
    let far_future = (chrono::Utc::now() + chrono::Duration::days(3650)).format("%Y-%m-%dT%H:%M:00Z").to_string();
    send(change("OK", &far_future)).await;
    // Kept at the function's clock: a genuine event after it still counts.
    tokio::time::sleep(StdDuration::from_millis(1100)).await;
    send(change("ALARM", &chrono::Utc::now().to_rfc3339())).await;
    assert!(status(&sim, &aws).await.contains("alarms in ALARM: capblock-PurchaseFailedAlarm ("), "not pinned");

    // Back to OK: nothing in ALARM for this stack.
    tokio::time::sleep(StdDuration::from_millis(1100)).await;
    send(change("OK", &chrono::Utc::now().to_rfc3339())).await;
    assert!(status(&sim, &aws).await.contains("alarms in ALARM: none"));
    let kept = aws.store().alarms().await.unwrap();
    let mine: Vec<_> = kept.iter().filter(|a| a.alarm == "capblock-PurchaseFailedAlarm").collect();
    assert_eq!(mine.iter().map(|a| a.value).collect::<Vec<_>>(), [AlarmValue::Ok]);
}
