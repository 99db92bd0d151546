//! on-capacity-event end to end: EC2's example events (both spellings) and capblock's reminders
//! through the real adapters — the simulator for EC2, moto for DynamoDB, SNS, SQS and
//! EventBridge Scheduler — read back from the topics' SQS taps.

use std::sync::atomic::{AtomicU32, Ordering};

use capblock_shared::app::on_capacity_event::{CapacityEventHandler, HandleError, Handled};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::eventbridge::Delivery;
use capblock_shared::aws::scheduler::SchedulerReminders;
use capblock_shared::domain::block::Block;
use capblock_shared::memory::{Call, HookVerdict, Hooked, Script};
use capblock_shared::ports::{BlockStore, InstanceSource, Notifier, NotifyError, Outbox, ReadClock, Reminders, Topic};
use capblock_tests::{Aws, Published, Sim, assert_slack_schema, detail_types, example_block};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

const DELIVERED: &str = include_str!("../../../core/src/domain/capacity_event/fixtures/capacity-block-delivered.json");
const WARNING: &str =
    include_str!("../../../core/src/domain/capacity_event/fixtures/capacity-block-expiration-warning.json");
const INTERRUPTION: &str = include_str!(
    "../../../core/src/domain/capacity_event/fixtures/capacity-reservation-instance-interruption-warning.json"
);

/// The examples' block: 2 x p5.48xlarge in us-east-2, 2026-12-03 to 2026-12-10 11:30 UTC.
/// The simulator's clock sits inside it, so its instances are running.
const SCENARIO: &str = r#"
seed = 11
[clock]
start = "2026-12-10T10:00:00Z"
"#;

const LEADS: [i64; 3] = [1440, 120, 30];
const LEAD_DURATIONS: [Duration; 3] = [Duration::minutes(1440), Duration::minutes(120), Duration::minutes(30)];

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// A notifier that fails the first `fail_workloads` publishes to the workloads topic.
fn flaky(inner: Delivery, fail_workloads: u32) -> Hooked<Delivery, Script> {
    let left = AtomicU32::new(fail_workloads);
    let to_workloads = move |call: &Call<'_>| {
        let fails = call.arg::<Topic>() == Some(&Topic::Workloads)
            && left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if !fails {
            return HookVerdict::Proceed;
        }
        HookVerdict::error(NotifyError::Failed { topic: "workloads".into(), message: "injected".into() })
    };
    Hooked::new(inner, Script::new().on("publish", to_workloads))
}

struct Harness {
    sim: Sim,
    aws: Aws,
    market: Ec2Market,
    group: String,
}

impl Harness {
    async fn new(name: &str) -> Harness {
        let sim = Sim::start(SCENARIO).await;
        let aws = Aws::fresh(name).await;
        let market = sim.market().await;
        let group = format!("capblock-{}", aws.table.trim_start_matches("capblock-test-"));
        aws_sdk_scheduler::Client::new(&aws.sdk)
            .create_schedule_group()
            .name(&group)
            .send()
            .await
            .expect("create schedule group on moto");
        Harness { sim, aws, market, group }
    }

    fn scheduler(&self) -> aws_sdk_scheduler::Client {
        aws_sdk_scheduler::Client::new(&self.aws.sdk)
    }

    fn reminders(&self) -> SchedulerReminders {
        SchedulerReminders::new(
            self.scheduler(),
            self.group.clone(),
            "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event".into(),
            "arn:aws:iam::123456789012:role/capblock-reminder".into(),
            LEADS.iter().map(|&m| Duration::minutes(m)).collect(),
        )
    }

    /// A block "bought in the console": EC2 knows it, capblock's store does not.
    async fn inject(&self, count: u32) -> String {
        let r = self
            .sim
            .control(
                "POST",
                "/_sim/reservations",
                &json!({"region": "us-east-2", "instance_type": "p5.48xlarge", "instance_count": count,
                    "start": "2026-12-03T11:30:00Z", "end": "2026-12-10T11:30:00Z"})
                .to_string(),
            )
            .await;
        assert_eq!(r["state"], "active", "{r}");
        r["reservation_id"].as_str().unwrap().to_string()
    }

    /// Writes the block to the store, as capblock's own purchases are.
    async fn adopt(&self, reservation_id: &str) -> Block {
        let block = example_block(reservation_id);
        assert!(self.aws.store().adopt_block(&block).await.unwrap());
        block
    }

    /// A harness holding a 2-instance block, injected and adopted: its id and its instances.
    async fn holding(name: &str) -> (Harness, String, Vec<String>) {
        let h = Harness::new(name).await;
        let rid = h.inject(2).await;
        h.adopt(&rid).await;
        let instances = h.instances(&rid).await;
        (h, rid, instances)
    }

    async fn instances(&self, reservation_id: &str) -> Vec<String> {
        self.market.instances_in(&"us-east-2".parse().unwrap(), reservation_id).await.unwrap()
    }

    /// One invocation; `wall` is the wall clock (outbox leases), not the event's time.
    async fn invoke<N: Notifier>(&self, notifier: &N, event: &Value, wall: &str) -> Result<Handled, HandleError> {
        let store = self.aws.store();
        let reminders = self.reminders();
        let clock = ReadClock(t(wall));
        let handler = CapacityEventHandler {
            store: &store,
            market: &self.market,
            notifier,
            reminders: &reminders,
            clock: &clock,
            leads: &LEAD_DURATIONS,
            // The simulator's account, which the example events carry.
            account: Some("111122223333"),
        };
        handler.handle(event).await
    }

    /// One invocation as it comes in a real stack: on time, the wall clock at the input's own
    /// time (an event's `time`, a reminder's `fire_at`).
    async fn send(&self, event: &Value) -> Handled {
        let wall = event.get("time").or_else(|| event.get("fire_at")).and_then(Value::as_str);
        let wall = wall.filter(|w| w.parse::<DateTime<Utc>>().is_ok()).unwrap_or("2026-12-10T10:00:00Z");
        self.invoke(&self.aws.notifier(), event, wall).await.unwrap()
    }

    async fn schedules(&self) -> Vec<String> {
        let out = self.scheduler().list_schedules().group_name(&self.group).send().await.unwrap();
        let mut names: Vec<String> = out.schedules().iter().filter_map(|s| s.name()).map(str::to_string).collect();
        names.sort();
        names
    }
}

/// An example event pointed at `reservation_id`, optionally with another detail-type spelling.
fn example(text: &str, reservation_id: &str, detail_type: Option<&str>) -> Value {
    let mut v: Value = serde_json::from_str(text).unwrap();
    if v["detail"].get("capacity-reservation-id").is_some() {
        v["detail"]["capacity-reservation-id"] = json!(reservation_id);
        v["resources"] = json!([format!("arn:aws:ec2:us-east-2:111122223333:capacity-reservation/{reservation_id}")]);
    }
    if let Some(dt) = detail_type {
        v["detail-type"] = json!(dt);
    }
    v
}

fn interruption(instance_id: &str) -> Value {
    let mut v: Value = serde_json::from_str(INTERRUPTION).unwrap();
    v["detail"]["instance-id"] = json!(instance_id);
    v["resources"] = json!([format!("arn:aws:ec2:us-east-2:111122223333:instance/{instance_id}")]);
    v
}

fn reminder(reservation_id: &str, lead: u32, fire_at: &str) -> Value {
    json!({"source": "capblock.reminder", "reservation_id": reservation_id, "region": "us-east-2",
        "lead_minutes": lead, "fire_at": fire_at})
}

fn one(published: &[Published], what: &str) -> Published {
    assert_eq!(published.len(), 1, "{what}: {published:#?}");
    published[0].clone()
}

fn check_workload(p: &Published, reservation_id: &str, kind: &str, minutes_left: i64, instances: &[String]) {
    let b = &p.body;
    assert_eq!(b["reservation_id"], reservation_id, "{b}");
    assert_eq!(b["region"], "us-east-2");
    assert_eq!(b["instance_type"], "p5.48xlarge");
    assert_eq!(b["end_date"], "2026-12-10T11:30:00Z");
    assert_eq!(b["termination_time"], "2026-12-10T11:00:00Z");
    assert_eq!(b["minutes_left"], minutes_left);
    assert_eq!(b["kind"], kind);
    assert_eq!(b["instance_ids"], json!(instances));
    let a = &p.attributes;
    assert_eq!(a["reservation_id"], reservation_id);
    assert_eq!(a["kind"], kind);
    assert_eq!(a["minutes_left"], minutes_left.to_string());
    assert_eq!(a["termination_time"], "2026-12-10T11:00:00Z");
    assert_eq!(a["instance_ids"], instances.join(","));
}

fn check_slack(p: &Published, reservation_id: &str, event_type: &str) {
    assert_slack_schema(&p.body);
    assert_eq!(p.body["metadata"]["threadId"], reservation_id);
    assert_eq!(p.body["metadata"]["eventType"], event_type);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_in_both_spellings_three_times_each_announces_once_and_sets_reminders() {
    let (h, rid, instances) = Harness::holding("ev-delivered").await;
    assert_eq!(instances.len(), 2);

    let mut enqueued = 0;
    for spelling in ["Capacity Block Reservation Delivered", "Capacity Block Delivered"] {
        for _ in 0..3 {
            match h.send(&example(DELIVERED, &rid, Some(spelling))).await {
                Handled::Announced { milestone, enqueued: n, reminders_synced, .. } => {
                    assert_eq!(milestone, "delivered");
                    assert!(reminders_synced);
                    enqueued += n;
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(enqueued, 3, "one Slack notice, one workload notice and one event, once");
    check_slack(&one(&h.aws.alerts().await, "slack"), &rid, "delivered");
    let events = h.aws.events().await;
    assert_eq!(detail_types(&events), ["Block Active"], "{events:#?}");
    assert_eq!(events[0]["detail"]["reservation_id"], rid.as_str());
    assert_eq!(events[0]["detail"]["event_key"], format!("{rid}#delivered"));
    // The event's time is the block's start: 7 days and 23.5 hours to the termination time.
    check_workload(&one(&h.aws.workload_notices().await, "workload"), &rid, "delivered", 7 * 1440 - 30, &instances);
    let want: Vec<String> = {
        let mut v: Vec<String> = LEADS.iter().map(|m| format!("capblock-{rid}-{m}m")).collect();
        v.sort();
        v
    };
    assert_eq!(h.schedules().await, want);
}

/// The reminders follow the end EC2 confirms, never an event's own `end-date` (issue 15: a
/// Delivered event moved the real schedules while the stored end stayed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_end_date_moves_nothing_unless_ec2_confirms_it() {
    let (h, rid, instances) = Harness::holding("ev-forged-end").await;
    let mut forged = example(DELIVERED, &rid, None);
    forged["detail"]["end-date"] = json!("2026-12-31T11:30:00Z");
    assert!(matches!(h.send(&forged).await, Handled::Announced { reminders_synced: true, .. }));
    // The notice and the schedules carry the real end (2026-12-10T11:30, termination 11:00).
    check_workload(&one(&h.aws.workload_notices().await, "workload"), &rid, "delivered", 7 * 1440 - 30, &instances);
    let s = h.scheduler().get_schedule().name(format!("capblock-{rid}-30m")).group_name(&h.group).send().await.unwrap();
    assert_eq!(s.schedule_expression(), Some("at(2026-12-10T10:30:00)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiration_warning_in_both_spellings_for_a_block_bought_by_hand_announces_once() {
    let h = Harness::new("ev-warning").await;
    let rid = h.inject(2).await; // not in the store: found through DescribeCapacityReservations
    let instances = h.instances(&rid).await;
    for spelling in ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"] {
        for _ in 0..3 {
            let r = h.send(&example(WARNING, &rid, Some(spelling))).await;
            assert!(
                matches!(&r, Handled::Announced { milestone, reminders_synced: false, .. } if milestone == "aws-expiration-warning"),
                "{r:?}"
            );
        }
    }
    let slack = one(&h.aws.alerts().await, "slack");
    check_slack(&slack, &rid, "aws-expiration-warning");
    assert!(slack.body["content"]["description"].as_str().unwrap().contains("2 x p5.48xlarge"), "{}", slack.body);
    check_workload(&one(&h.aws.workload_notices().await, "workload"), &rid, "aws-expiration-warning", 10, &instances);
    assert!(h.schedules().await.is_empty(), "no reminders for a block capblock does not hold");
}

/// An expiration warning days before EC2's end is forged (timely on its own clock, which the
/// sender chose): refused, nothing announced to the workloads, and the genuine warning 40
/// minutes before the end is announced after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiration_warning_days_early_is_refused_and_the_real_one_still_announced() {
    let (h, rid, instances) = Harness::holding("ev-early-warning").await;
    let mut early = example(WARNING, &rid, None);
    early["time"] = json!("2026-12-07T10:50:00Z");
    let r = h.send(&early).await;
    assert!(matches!(&r, Handled::Ignored { kind, .. } if kind == "expiration-not-near"), "{r:?}");
    assert!(h.aws.alerts().await.is_empty());
    assert!(h.aws.workload_notices().await.is_empty(), "the workloads were not told to stop");
    let r = h.send(&example(WARNING, &rid, None)).await;
    assert!(matches!(&r, Handled::Announced { milestone, .. } if milestone == "aws-expiration-warning"), "{r:?}");
    check_workload(&one(&h.aws.workload_notices().await, "workload"), &rid, "aws-expiration-warning", 10, &instances);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_interruption_three_times_announces_once_per_instance() {
    let h = Harness::new("ev-interrupt").await;
    let rid = h.inject(2).await;
    let instances = h.instances(&rid).await;
    for _ in 0..3 {
        let r = h.send(&interruption(&instances[0])).await;
        let want = format!("interruption-{}", instances[0]);
        assert!(
            matches!(&r, Handled::Announced { milestone, reservation_id, .. } if *milestone == want && *reservation_id == rid),
            "{r:?}"
        );
    }
    check_slack(&one(&h.aws.alerts().await, "slack"), &rid, "instance-interruption");
    check_workload(&one(&h.aws.workload_notices().await, "workload"), &rid, "instance-interruption", 2, &instances);
    // The other instance's warning is its own milestone.
    h.send(&interruption(&instances[1])).await;
    assert_eq!(h.aws.alerts().await.len(), 1);
    assert_eq!(h.aws.workload_notices().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_30_minute_reminder_and_the_aws_warning_are_distinct_but_each_is_sent_once() {
    let (h, rid, instances) = Harness::holding("ev-distinct").await;
    for _ in 0..2 {
        h.send(&reminder(&rid, 30, "2026-12-10T10:30:00Z")).await;
        h.send(&example(WARNING, &rid, None)).await;
        h.send(&example(WARNING, &rid, Some("Capacity Block Reservation Expiration Warning"))).await;
    }
    let alerts = h.aws.alerts().await;
    let mut kinds: Vec<&str> = alerts.iter().map(|p| p.body["metadata"]["eventType"].as_str().unwrap()).collect();
    kinds.sort();
    assert_eq!(kinds, ["aws-expiration-warning", "reminder-30m"]);
    alerts.iter().for_each(|p| assert_slack_schema(&p.body));
    let mut notices = h.aws.workload_notices().await;
    notices.sort_by_key(|p| p.body["kind"].as_str().unwrap().to_string());
    assert_eq!(notices.len(), 2, "{notices:#?}");
    check_workload(&notices[0], &rid, "aws-expiration-warning", 10, &instances);
    check_workload(&notices[1], &rid, "reminder-30m", 30, &instances);
    // capblock's reminder is a Block Ending event, once; AWS's own warning is EC2's event.
    let events = h.aws.events().await;
    assert_eq!(detail_types(&events), ["Block Ending"], "{events:#?}");
    assert_eq!(events[0]["detail"]["minutes_left"], 30);
    assert_eq!(events[0]["detail"]["termination_time"], "2026-12-10T11:00:00Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_failed_publish_sends_the_missing_notice_once() {
    let h = Harness::new("ev-retry").await;
    let rid = h.inject(2).await;
    h.adopt(&rid).await;
    let flaky = flaky(h.aws.notifier(), 1);
    let event = reminder(&rid, 120, "2026-12-10T09:00:00Z");
    // The workload publish fails: the invocation fails so Lambda retries it.
    let err = h.invoke(&flaky, &event, "2026-12-10T09:00:01Z").await.unwrap_err();
    assert!(matches!(err, HandleError::Publish { failed: 1 }), "{err}");
    assert_eq!(h.aws.alerts().await.len(), 1);
    assert!(h.aws.workload_notices().await.is_empty());
    // Lambda's retries come a minute or more later; EventBridge may deliver the event again too.
    for wall in ["2026-12-10T09:02:00Z", "2026-12-10T09:03:00Z"] {
        let Handled::Announced { enqueued, .. } = h.invoke(&flaky, &event, wall).await.unwrap() else { panic!() };
        assert_eq!(enqueued, 0);
    }
    assert!(h.aws.alerts().await.is_empty(), "Slack is not repeated");
    let n = one(&h.aws.workload_notices().await, "workload");
    assert_eq!(n.body["kind"], "reminder-120m");
    assert_eq!(n.body["minutes_left"], 120);
    assert!(h.aws.store().pending().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_left_over_from_before_an_extension_says_nothing_and_moves_the_schedules() {
    let h = Harness::new("ev-stale").await;
    let rid = h.inject(2).await;
    // The store already knows the block was extended by a day; the 120-minute schedule for the
    // old end fired before the tracker moved it.
    let block = Block { end: t("2026-12-11T11:30:00Z"), ..example_block(&rid) };
    assert!(h.aws.store().adopt_block(&block).await.unwrap());
    let r = h.send(&reminder(&block.reservation_id, 120, "2026-12-10T09:00:00Z")).await;
    assert!(matches!(&r, Handled::Ignored { kind, .. } if kind == "stale-reminder"), "{r:?}");
    assert!(h.aws.alerts().await.is_empty() && h.aws.workload_notices().await.is_empty());
    let got = h
        .scheduler()
        .get_schedule()
        .name(format!("capblock-{}-120m", block.reservation_id))
        .group_name(&h.group)
        .send()
        .await
        .unwrap();
    assert_eq!(got.schedule_expression(), Some("at(2026-12-11T09:00:00)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reminder_schedules_are_created_at_the_right_instants_moved_and_cleared() {
    let h = Harness::new("ev-sched").await;
    let rid = h.inject(2).await;
    let block = h.adopt(&rid).await;
    let reminders = h.reminders();
    let now = t("2026-12-03T11:30:00Z");
    reminders.sync(&block, now).await.unwrap();
    reminders.sync(&block, now).await.unwrap(); // idempotent

    let sched = h.scheduler();
    let check = |lead: i64, at: &'static str| {
        let sched = sched.clone();
        let name = format!("capblock-{rid}-{lead}m");
        let group = h.group.clone();
        let rid = rid.clone();
        async move {
            let s = sched.get_schedule().name(&name).group_name(&group).send().await.unwrap();
            assert_eq!(s.schedule_expression(), Some(format!("at({at})").as_str()), "{name}");
            assert_eq!(s.schedule_expression_timezone(), Some("UTC"));
            assert_eq!(s.flexible_time_window().map(|w| w.mode().as_str()), Some("OFF"));
            assert_eq!(s.action_after_completion().map(|a| a.as_str()), Some("DELETE"));
            let target = s.target().unwrap();
            assert_eq!(target.arn(), "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event");
            assert_eq!(target.role_arn(), "arn:aws:iam::123456789012:role/capblock-reminder");
            let input: Value = serde_json::from_str(target.input().unwrap()).unwrap();
            assert_eq!(
                input,
                json!({"source": "capblock.reminder", "reservation_id": rid, "region": "us-east-2",
                    "lead_minutes": lead, "fire_at": format!("{at}Z")})
            );
        }
    };
    // Termination time is end - 30 min = 2026-12-10T11:00:00Z.
    check(1440, "2026-12-09T11:00:00").await;
    check(120, "2026-12-10T09:00:00").await;
    check(30, "2026-12-10T10:30:00").await;
    assert_eq!(h.schedules().await.len(), 3);

    // Extended by a week: every schedule moves, none is added.
    let extended = Block { end: block.end + Duration::days(7), ..block.clone() };
    reminders.sync(&extended, now).await.unwrap();
    check(1440, "2026-12-16T11:00:00").await;
    check(120, "2026-12-17T09:00:00").await;
    check(30, "2026-12-17T10:30:00").await;
    assert_eq!(h.schedules().await.len(), 3);

    // Leads already past are skipped.
    let other = Block { reservation_id: format!("{rid}1"), ..block.clone() };
    reminders.sync(&other, t("2026-12-10T09:30:00Z")).await.unwrap();
    assert_eq!(h.schedules().await.len(), 4);

    reminders.clear(&extended).await.unwrap();
    reminders.clear(&extended).await.unwrap(); // NotFound is fine
    assert_eq!(h.schedules().await, vec![format!("capblock-{rid}1-30m")]);
}

/// A queue on the workloads topic that takes only `reservation_id`'s notices.
async fn filtered_queue(aws: &Aws, name: &str, reservation_id: &str) -> String {
    let policy = json!({"reservation_id": [reservation_id]}).to_string();
    capblock_tests::sqs_tap(&aws.sdk, &aws.workloads_topic, name, Some(policy)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_subscribed_with_a_filter_policy_gets_only_its_own_block() {
    let h = Harness::new("ev-filter").await;
    let a = h.inject(1).await;
    let b = h.inject(2).await;
    let qa = filtered_queue(&h.aws, &format!("{}-a", h.group), &a).await;
    let qb = filtered_queue(&h.aws, &format!("{}-b", h.group), &b).await;
    h.send(&example(WARNING, &a, None)).await;
    h.send(&example(WARNING, &b, None)).await;
    h.send(&reminder(&b, 30, "2026-12-10T10:30:00Z")).await;
    let got_a = h.aws.drain(&qa).await;
    let got_b = h.aws.drain(&qb).await;
    assert_eq!(got_a.len(), 1, "{got_a:#?}");
    assert!(got_a.iter().all(|p| p.body["reservation_id"] == a.as_str()));
    assert_eq!(got_b.len(), 2, "{got_b:#?}");
    assert!(got_b.iter().all(|p| p.body["reservation_id"] == b.as_str()));
    assert_eq!(h.aws.workload_notices().await.len(), 3, "the unfiltered tap sees all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_unknown_events_are_acknowledged_and_produce_nothing() {
    let h = Harness::new("ev-junk").await;
    let rid = h.inject(1).await;
    let mut no_end = example(DELIVERED, &rid, None);
    no_end["detail"].as_object_mut().unwrap().remove("end-date");
    let cases = vec![
        (json!("hello"), "not-an-object"),
        (json!({}), "unknown-shape"),
        (example(DELIVERED, &rid, Some("Capacity Block Reservation Cancelled")), "unknown-detail-type"),
        (
            json!({"version": "0", "id": "x", "detail-type": "Scheduled Event", "source": "aws.events", "time": "2026-12-10T10:00:00Z", "region": "us-east-2", "detail": {}}),
            "unknown-source",
        ),
        (no_end, "missing-field"),
        (
            json!({"source": "capblock.reminder", "reservation_id": rid, "region": "us-east-2", "lead_minutes": "soon", "fire_at": "2026-12-10T10:30:00Z"}),
            "bad-field",
        ),
        // Well formed, but nobody knows the reservation or the instance: never announced from
        // the event alone (issue 15: a forged Delivered was announced as "Capacity Block active").
        (reminder("cr-00000000000000000", 30, "2026-12-10T10:30:00Z"), "unknown-reservation"),
        (example(DELIVERED, "cr-00000000000000000", None), "unknown-reservation"),
        (example(WARNING, "cr-00000000000000000", None), "unknown-reservation"),
        // Another account's event, about a block this account holds.
        (
            {
                let mut e = example(DELIVERED, &rid, None);
                e["account"] = json!("999999999999");
                e
            },
            "other-account",
        ),
        (interruption("i-00000000000000000"), "instance-not-in-a-reservation"),
    ];
    for (event, kind) in cases {
        match h.send(&event).await {
            Handled::Ignored { kind: k, .. } => assert_eq!(k, kind, "{event}"),
            other => panic!("{event}: {other:?}"),
        }
    }
    assert!(h.aws.alerts().await.is_empty());
    assert!(h.aws.workload_notices().await.is_empty());
    assert!(h.aws.store().pending().await.unwrap().is_empty());
    assert!(h.schedules().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_not_shaped_like_ec2s_are_bad_input_and_reach_neither_store_nor_slack() {
    let h = Harness::new("ev-ids").await;
    let rid = h.inject(1).await;
    let huge = format!("i-{}", "0".repeat(300 * 1024));
    let mut huge_rid = example(DELIVERED, &rid, None);
    huge_rid["detail"]["capacity-reservation-id"] = json!(format!("cr-{}", "0".repeat(300 * 1024)));
    // The audit's interruption, a 300 KB instance id, a 300 KB reservation id, and a hint
    // with markup: each is acknowledged as bad input, never retried as StoreUnavailable.
    for event in [interruption("i-<!channel> <https://evil.example|click>"), interruption(&huge), huge_rid] {
        match h.send(&event).await {
            Handled::Ignored { kind, .. } => assert_eq!(kind, "bad-field"),
            other => panic!("{other:?}"),
        }
    }
    assert!(h.aws.alerts().await.is_empty());
    assert!(h.aws.workload_notices().await.is_empty());
    assert!(h.aws.store().pending().await.unwrap().is_empty());
}

/// What anyone allowed to invoke the function or create schedules could send about a real
/// block: a reminder ahead of its time (workloads told early), an event replayed days late, a
/// lead the stack does not schedule, the block in another region, an interruption whose
/// `resources` name the block for an instance EC2 places elsewhere, and a Delivered for a block
/// EC2 shows scheduled. Each is refused, and the genuine reminder is still announced after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_or_replayed_inputs_about_a_real_block_are_refused_and_suppress_nothing() {
    let (h, rid, _) = Harness::holding("ev-forged").await;
    let other = h.inject(1).await;
    let elsewhere = h.instances(&other).await;
    let notifier = h.aws.notifier();
    let mut in_another_region = reminder(&rid, 30, "2026-12-10T10:30:00Z");
    in_another_region["region"] = json!("us-west-2");
    let mut misplaced = interruption(&elsewhere[0]);
    misplaced["resources"] = json!([format!("arn:aws:ec2:us-east-2:111122223333:capacity-reservation/{rid}")]);
    let cases = [
        // The 30-minute reminder, an hour before its time.
        (reminder(&rid, 30, "2026-12-10T10:30:00Z"), "2026-12-10T09:30:00Z", "ahead-of-the-clock"),
        // EC2's Delivered of a week ago, sent again.
        (example(DELIVERED, &rid, None), "2026-12-10T10:00:00Z", "too-old"),
        (reminder(&rid, 600, "2026-12-10T01:30:00Z"), "2026-12-10T01:30:00Z", "unknown-lead"),
        (in_another_region, "2026-12-10T10:30:00Z", "wrong-region"),
        (misplaced, "2026-12-10T10:58:00Z", "instance-not-in-the-block"),
    ];
    for (event, wall, kind) in cases {
        match h.invoke(&notifier, &event, wall).await.unwrap() {
            Handled::Ignored { kind: k, .. } => assert_eq!(k, kind, "{event}"),
            other => panic!("{event}: {other:?}"),
        }
    }
    assert!(h.aws.alerts().await.is_empty());
    assert!(h.aws.workload_notices().await.is_empty());
    assert!(h.aws.store().pending().await.unwrap().is_empty());
    // The genuine reminder, at its time: announced, nothing suppressed it.
    let r = h.send(&reminder(&rid, 30, "2026-12-10T10:30:00Z")).await;
    assert!(matches!(&r, Handled::Announced { enqueued: 3, .. }), "{r:?}");
    check_slack(&one(&h.aws.alerts().await, "slack"), &rid, "reminder-30m");

    // A block EC2 shows scheduled: a Delivered event for it is not believed.
    let future = h
        .sim
        .control(
            "POST",
            "/_sim/reservations",
            &json!({"region": "us-east-2", "instance_type": "p5.48xlarge", "instance_count": 1,
                "start": "2026-12-12T11:30:00Z", "end": "2026-12-13T11:30:00Z"})
            .to_string(),
        )
        .await;
    assert_eq!(future["state"], "scheduled", "{future}");
    let scheduled = future["reservation_id"].as_str().unwrap().to_string();
    h.adopt(&scheduled).await;
    let mut early = example(DELIVERED, &scheduled, None);
    early["time"] = json!("2026-12-10T10:00:00Z");
    match h.invoke(&notifier, &early, "2026-12-10T10:00:00Z").await.unwrap() {
        Handled::Ignored { kind, reason, .. } => assert_eq!(kind, "not-active", "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(h.aws.alerts().await.is_empty());
}
