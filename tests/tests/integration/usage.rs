//! What a block's instances are used for, end to end on the simulator: an 8-instance block of
//! which 3 run nothing for two hours (the simulator's `usage` steps) gives one idle alert at the
//! rule's hour with the money it cost so far, one recovery, a workload notice and a Block Idle
//! event for each, and the end-of-block line of paid and used hours. Figures by hand: a 1-day
//! block of 8 x p5.48xlarge (64 accelerators) at 3.00 USD per accelerator-hour costs 4,608.00 USD,
//! so an instance-minute costs 4,608 / (8 x 1,440) = 0.40 USD.

use capblock_shared::domain::lifecycle::BlockState;
use capblock_tests::{Rig, RuleToml, ScenarioToml, T0, event_types};
use chrono::{DateTime, Utc};

fn scenario() -> String {
    ScenarioToml::new(5, T0)
        .payment("succeed", Some(3))
        .p5_counts("us-east-1", &[8], &[2], "3.00")
        // The market line's own `usage` key: what runs on its blocks, hours after their start.
        .raw("usage = [ { after_start_hours = 1.0, running = 5 }, { after_start_hours = 3.0, running = 8 } ]")
        .build()
}

async fn rig(name: &str) -> Rig {
    let mut h =
        Rig::start(name, &scenario(), capblock_tests::quick_timeouts(), T0.parse().unwrap(), "capblock-test").await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    h
}

/// Moves the clock to `at` in `step`-minute steps, tracking after each.
async fn track_every(h: &Rig, step: i64, at: &str) {
    let at: DateTime<Utc> = at.parse().unwrap();
    while h.now() < at {
        h.advance_minutes(step.min((at - h.now()).num_minutes())).await;
        let report = h.track().await;
        assert!(report.errors.is_empty(), "{report:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_eight_idle_for_two_hours_is_said_once_with_its_cost_and_once_over() {
    let h = rig("usage-idle").await;
    let rule =
        RuleToml::p5("idle8").instance_counts(&[8]).budget("10000").extra("tags = { team = \"llm\" }").rule(h.now());
    let id = h.buy(&rule).await;
    // Active at 12-03 11:30; the tracker every 5 minutes from then on.
    track_every(&h, 7 * 60, "2026-12-03T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Active);
    h.aws.alerts().await;
    h.aws.workload_notices().await;
    h.aws.events().await;

    // The first hour is quiet; 3 idle from 12:30: nothing said until an hour of it.
    track_every(&h, 5, "2026-12-03T13:25:00Z").await;
    assert!(h.aws.alerts().await.is_empty(), "nothing before an hour of idleness");
    track_every(&h, 5, "2026-12-03T13:30:00Z").await;
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["idle"]);
    let alert = &alerts[0].body["content"];
    assert_eq!(alert["title"], "Paid but idle: 3 of 8 instances for 1h");
    let text = alert["description"].as_str().unwrap();
    // 3 x 60 instance-minutes at 0.40 USD.
    assert!(text.contains("has cost 72.00 USD so far (3.0 instance-hours)"), "{text}");
    assert!(text.contains("since Thu 2026-12-03 12:30 UTC"), "{text}");
    let work = h.aws.workload_notices().await;
    assert_eq!(work.len(), 1);
    assert_eq!(work[0].attributes["kind"], "idle");
    assert_eq!(work[0].body["idle"]["idle_instances"], 3);
    assert_eq!(work[0].body["idle"]["idle_cost"], "72.00 USD");
    let events = h.aws.events().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["detail-type"], "Block Idle");
    assert_eq!(events[0]["detail"]["status"], "idle");
    assert_eq!(events[0]["detail"]["idle_since"], "2026-12-03T12:30:00Z");
    assert_eq!(events[0]["detail"]["tags"]["team"], "llm");

    // Never again in the episode, however long; a tracker run twice at one moment adds nothing.
    track_every(&h, 5, "2026-12-03T14:25:00Z").await;
    h.track().await;
    assert!(h.aws.alerts().await.is_empty() && h.aws.events().await.is_empty());

    // All 8 run from 14:30: one recovery, 3 x 120 instance-minutes = 144.00 USD in all.
    track_every(&h, 5, "2026-12-03T15:30:00Z").await;
    let alerts = h.aws.alerts().await;
    assert_eq!(event_types(&alerts), ["idle"]);
    let over = &alerts[0].body["content"];
    assert_eq!(over["title"], "Every instance of the block runs again");
    let text = over["description"].as_str().unwrap();
    assert!(text.contains("6.0 instance-hours paid and unused, which cost 144.00 USD"), "{text}");
    let events = h.aws.events().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["detail"]["status"], "recovered");
    assert_eq!(events[0]["detail"]["idle_instance_minutes"], 360);
    let stored = h.block(&id).await.usage;
    assert_eq!((stored.alerts, stored.idle_instance_minutes, stored.episode), (1, 360, None));

    // The end: 8 x 60 + 5 x 120 + 8 x 1,230 (to the termination at 11:00) = 10,920
    // instance-minutes = 182 of 192 paid; 4,608 / (182 x 8) = 3.1648 USD per used
    // accelerator-hour.
    track_every(&h, 7 * 60, "2026-12-04T11:35:00Z").await;
    assert_eq!(h.block(&id).await.state, BlockState::Expired);
    let alerts = h.aws.alerts().await;
    let ended = alerts.iter().find(|a| a.body["metadata"]["eventType"] == "expired").expect("the end announced");
    let text = ended.body["content"]["description"].as_str().unwrap();
    assert!(
        text.contains("• Used: 182 of 192 instance-hours paid (94.79%): 3.1648 USD per used accelerator-hour"),
        "{text}"
    );
    assert_eq!(h.block(&id).await.usage.used_instance_minutes, 10_920);

    // The month's report agrees with the rule's budget to the cent, and says what was used.
    let csv = capblock(&h, &["report", "--month", "2026-12", "--csv"]).await;
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(
        lines[0].starts_with("month,rule,team,blocks,open_blocks,currency,fees,extensions,spent,budget_spent,"),
        "{csv}"
    );
    assert_eq!(
        lines[1],
        // ..., unpriced blocks, then the hours elapsed: the block has ended, all of its 1536.
        "2026-12,idle8,llm,1,0,USD,4608.00,0.00,4608.00,4608.00,1536,1456,94.79,3.1648,10000.00,true,0,1536"
    );
    let table = capblock(&h, &["report", "--month", "2026-12"]).await;
    assert!(table.contains("account budget spent in 2026-12: 4608.00 USD"), "{table}");
    // The rule's budget reads as spent of its limit; the team named only by the rule's tag is
    // marked, since that team's budget is never charged.
    let idle8 = table.lines().find(|l| l.starts_with("idle8")).expect("the rule's row");
    assert!(idle8.contains("4608.00 of 10000.00"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("llm (tag)")), "{table}");
    assert!(table.contains("not charged to the team's budget"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&capblock(&h, &["report", "--json"]).await).unwrap();
    assert_eq!(json["month"], "2026-12", "the clock's month by default");
    assert_eq!(json["rules"][0]["spent"], json["rules"][0]["budget_spent"]);
    assert_eq!(json["teams"][0]["team"], "llm");
    let empty = capblock(&h, &["report", "--month", "2026-11"]).await;
    assert_eq!(empty.trim(), "nothing bought or extended in 2026-11");

    // January the first: the monthly schedule's tracker run posts December's summary, once
    // however often the schedule retries.
    h.advance_minutes((at("2027-01-01T09:00:00Z") - h.now()).num_minutes()).await;
    let summary = serde_json::json!({"source": "capblock.monthly-summary", "time": "2027-01-01T09:00:00Z"});
    tracker_binary(&h, &[summary.clone(), summary]).await;
    let alerts = h.aws.alerts().await;
    let month: Vec<_> = alerts.iter().filter(|a| a.body["metadata"]["eventType"] == "month-summary").collect();
    assert_eq!(month.len(), 1, "{alerts:#?}");
    let c = &month[0].body["content"];
    assert_eq!(c["title"], "2026-12: 1 block(s), 4608.00 USD spent");
    let text = c["description"].as_str().unwrap();
    assert!(
        text.contains(
            "• `idle8` (llm): 1 block(s), 4608.00 USD spent (4608.00 USD fees + 0.00 USD extensions), \
             1456.0 of 1536.0 accelerator-hours used (94.8%), 3.1648 USD per used accelerator-hour"
        ),
        "{text}"
    );
    assert!(text.contains("• team llm: 4608.00 USD spent, 94.8% used"), "{text}");
    assert_eq!(month[0].body["metadata"]["threadId"], "report-2026-12");
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// The track-blocks binary behind the local Runtime API, invoked once per payload (each must
/// succeed), against the rig's table and clock.
async fn tracker_binary(h: &Rig, payloads: &[serde_json::Value]) {
    use capblock_tests::runtime::{self, Outcome};
    let mut env = capblock_tests::binary_env(&h.sim, &h.aws, "capblock-test");
    env.extend(
        [
            ("CAPBLOCK_MODE", "live"),
            ("CAPBLOCK_SCHEDULE_GROUP", "default"),
            ("CAPBLOCK_REMINDER_TARGET_ARN", "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event"),
            ("CAPBLOCK_REMINDER_ROLE_ARN", "arn:aws:iam::123456789012:role/capblock-reminder"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let api = runtime::start().await;
    let mut child = runtime::spawn(&api, &runtime::binary("track-blocks"), &env);
    for p in payloads {
        let id = api.invoke(p.clone());
        let out = api.wait_outcome(&id, std::time::Duration::from_secs(60)).await;
        assert!(matches!(out, Some(Outcome::Response(_))), "{out:?}");
    }
    child.kill().await.expect("stop the function");
}

/// `capblock ARGS` against the rig's table and clock; its stdout (it must succeed).
async fn capblock(h: &Rig, args: &[&str]) -> String {
    let out = tokio::process::Command::new(capblock_tests::runtime::binary("capblock"))
        .envs(capblock_tests::binary_env(&h.sim, &h.aws, "capblock-test"))
        .env("CAPBLOCK_CONFIG", std::env::temp_dir().join("capblock-no-config.toml"))
        .args(args)
        .output()
        .await
        .expect("run capblock");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{args:?}: {stdout}{stderr}");
    assert!(!stderr.contains("note:"), "the budget agrees: {stderr}");
    stdout.into_owned()
}

/// With `idle_alert_minutes = 0` the same idleness is counted and never said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_alerts_off_count_the_idle_time_and_say_nothing() {
    let h = rig("usage-off").await;
    let rule =
        RuleToml::p5("quiet8").instance_counts(&[8]).budget("10000").extra("idle_alert_minutes = 0").rule(h.now());
    let id = h.buy(&rule).await;
    track_every(&h, 7 * 60, "2026-12-03T11:35:00Z").await;
    h.aws.alerts().await;
    track_every(&h, 10, "2026-12-03T15:30:00Z").await;
    assert!(h.aws.alerts().await.is_empty());
    assert!(h.aws.events().await.iter().all(|e| e["detail-type"] != "Block Idle"));
    assert_eq!(h.block(&id).await.usage.idle_instance_minutes, 360);
}
