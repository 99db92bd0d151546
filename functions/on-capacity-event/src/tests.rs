//! The handler called as Lambda calls it (`LambdaEvent::new(payload, Context::default())`, as
//! lambda_runtime's examples test a handler), through the function's one edge, on ports in
//! memory and a clock the test sets to each input's own time: each documented detail-type and
//! capblock's reminder are handled, a stack alarm's state is kept, and an input capblock does
//! not act on is acknowledged by name (never retried) with nothing written, no panic.

use std::sync::Arc;

use capblock_shared::app::on_capacity_event::Handled;
use capblock_shared::aws::clock::TimeSource;
use capblock_shared::config::Targets;
use capblock_shared::domain::block::{Block, Reservation};
use capblock_shared::lambda::{Context, Edge, EdgeConfig, Lambda, LambdaEvent, Payload, Ports, Reply};
use capblock_shared::memory::{MemoryClock, MemoryEc2, MemoryNotifier, MemoryReminders, MemoryTable};
use capblock_shared::ports::{Reminders, Topic};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use super::{AWS_PORTS, App, ReminderSchedules};

const RESERVATION: &str = "cr-0a1b2c3d4e5f60718";
const DELIVERED: &str = include_str!("../../../core/src/domain/capacity_event/fixtures/capacity-block-delivered.json");
const WARNING: &str =
    include_str!("../../../core/src/domain/capacity_event/fixtures/capacity-block-expiration-warning.json");
const INTERRUPTION: &str = include_str!(
    "../../../core/src/domain/capacity_event/fixtures/capacity-reservation-instance-interruption-warning.json"
);
const ALARM: &str = include_str!("../../../core/src/domain/alarm/state-change.json");

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// The schedules in memory, whatever ARN the function was invoked with.
impl ReminderSchedules for Arc<MemoryReminders> {
    fn targeting(&self, _invoked_arn: &str) -> Arc<dyn Reminders> {
        self.clone()
    }
}

/// The block of the documented examples (2 x p5.48xlarge in us-east-2 until 2026-12-10 11:30),
/// as EC2 lists it and as capblock stored it.
fn reservation() -> Reservation {
    Reservation {
        id: RESERVATION.into(),
        arn: Some(format!("arn:aws:ec2:us-east-2:111122223333:capacity-reservation/{RESERVATION}")),
        region: "us-east-2".parse().unwrap(),
        availability_zone: "us-east-2a".into(),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: 2,
        start: t("2026-12-03T11:30:00Z"),
        end: t("2026-12-10T11:30:00Z"),
        state: "active".into(),
        reservation_type: Some("capacity-block".into()),
        tags: Default::default(),
        capacity_block_id: None,
    }
}

struct Function {
    lambda: Lambda<App>,
    table: Arc<MemoryTable>,
    notifier: Arc<MemoryNotifier>,
    reminders: Arc<MemoryReminders>,
    wall: Arc<MemoryClock>,
}

fn function() -> Function {
    let bought = t("2026-12-01T09:00:00Z");
    let table = Arc::new(MemoryTable::default().with_blocks([Block::adopted(&reservation(), false, bought)]));
    let ec2 = Arc::new(MemoryEc2::default().with_reservations([reservation()]));
    let notifier = Arc::new(MemoryNotifier::default());
    let wall = Arc::new(MemoryClock::at(bought));
    let ports = Ports::memory(ec2, table.clone(), notifier.clone(), wall.clone());
    let config = EdgeConfig {
        stack: "capblock-test".into(),
        keep_settings: None,
        targets: Targets { table: "capblock".into(), alerts_topic: "alerts".into(), event_bus: "capblock".into() },
        workloads_topic: Some("workloads".into()),
        schedule_group: Some("capblock".into()),
        time: TimeSource::Wall,
    };
    let reminders = Arc::new(MemoryReminders::default());
    let handler = App { reminders: Arc::new(reminders.clone()), leads: vec![Duration::minutes(30)] };
    let lambda = Lambda { edge: Edge::on("on-capacity-event", AWS_PORTS, config, ports), handler };
    Function { lambda, table, notifier, reminders, wall }
}

impl Function {
    /// One invocation, the wall clock at `at`.
    async fn send(&self, at: &str, payload: Payload) -> Result<Reply<Handled>, lambda_runtime::Diagnostic> {
        self.wall.set(t(at));
        self.lambda.handle(LambdaEvent::new(payload, Context::default())).await
    }

    async fn handled(&self, at: &str, input: Value) -> Handled {
        match self.send(at, Payload::Json(input)).await {
            Ok(Reply::Run(handled)) => handled,
            other => panic!("an input is handled: {other:?}"),
        }
    }

    fn alerts(&self) -> usize {
        self.notifier.published().iter().filter(|(topic, _)| *topic == Topic::Alerts).count()
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn announced(h: &Handled) -> Option<(&str, usize)> {
    match h {
        Handled::Announced { milestone, enqueued, .. } => Some((milestone.as_str(), *enqueued)),
        _ => None,
    }
}

#[tokio::test]
async fn each_documented_detail_type_and_a_reminder_is_handled_once() {
    let f = function();
    for spelling in ["Capacity Block Reservation Delivered", "Capacity Block Delivered"] {
        let mut delivered = json(DELIVERED);
        delivered["detail-type"] = json!(spelling);
        let h = f.handled("2026-12-03T11:31:00Z", delivered).await;
        assert_eq!(announced(&h).map(|(m, _)| m), Some("delivered"), "{spelling}: {h:?}");
    }
    assert_eq!(f.alerts(), 1, "delivered is told once, whichever spelling comes");
    assert!(f.reminders.scheduled().contains(RESERVATION), "the reminders follow the block");

    let h = f
        .handled(
            "2026-12-10T10:30:00Z",
            json!({"source": "capblock.reminder", "reservation_id": RESERVATION,
        "region": "us-east-2", "lead_minutes": 30, "fire_at": "2026-12-10T10:30:00Z"}),
        )
        .await;
    assert!(announced(&h).is_some_and(|(_, n)| n > 0), "{h:?}");
    for spelling in ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"] {
        let mut warning = json(WARNING);
        warning["detail-type"] = json!(spelling);
        let h = f.handled("2026-12-10T10:51:00Z", warning).await;
        assert_eq!(announced(&h).map(|(m, _)| m), Some("aws-expiration-warning"), "{spelling}: {h:?}");
    }
    assert_eq!(f.alerts(), 3, "delivered, the reminder and EC2's warning, each once");

    // EC2's interruption warning names an instance; EC2 in memory runs none, so it places the
    // instance in no reservation and the event is acknowledged, by that name.
    let h = f.handled("2026-12-10T10:58:30Z", json(INTERRUPTION)).await;
    assert!(matches!(&h, Handled::Ignored { kind, .. } if kind == "instance-not-in-a-reservation"), "{h:?}");
    assert_eq!(f.alerts(), 3);
}

#[tokio::test]
async fn a_stack_alarms_state_is_kept() {
    let f = function();
    let mut alarm = json(ALARM);
    alarm["time"] = json!("2026-12-02T08:00:00Z");
    alarm["detail"]["state"]["value"] = json!("ALARM");
    let h = f.handled("2026-12-02T08:01:00Z", alarm).await;
    assert!(matches!(&h, Handled::Alarm { state, kept: true, .. } if state == "ALARM"), "{h:?}");
}

/// Inputs capblock does not act on are acknowledged (a retry would not change them), each
/// named by its kind, and nothing is written or sent; a body that is not JSON is refused.
#[tokio::test]
async fn an_unknown_or_malformed_event_is_named_and_writes_nothing() {
    let f = function();
    let mut unknown = json(DELIVERED);
    unknown["detail-type"] = json!("Capacity Block Reservation Refunded");
    let mut no_id = json(DELIVERED);
    no_id["detail"].as_object_mut().unwrap().remove("capacity-reservation-id");
    let cases = [
        (unknown, "unknown-detail-type"),
        (no_id, "missing-field"),
        (json!({"source": "aws.ec2", "detail-type": 7}), "bad-envelope"),
        (json!([1, 2]), "not-an-object"),
        (json!({"source": "capblock.reminder", "reservation_id": RESERVATION}), "missing-field"),
    ];
    for (input, kind) in cases {
        let h = f.handled("2026-12-03T11:31:00Z", input.clone()).await;
        assert!(matches!(&h, Handled::Ignored { kind: k, .. } if k == kind), "{input}: {h:?}");
    }
    // Cut off mid-object, as a truncated body reaches the runtime.
    let cut = serde_json::from_str::<Payload>("{\"detail-type\": ").unwrap();
    let e = f.send("2026-12-03T11:31:00Z", cut).await.unwrap_err();
    assert_eq!(e.error_type, "capblock.BadInput", "{e:?}");
    assert!(e.error_message.contains("the payload is not JSON"), "{e:?}");
    assert!(f.table.writes().is_empty(), "{:?}", f.table.writes());
    assert!(f.notifier.published().is_empty() && f.reminders.scheduled().is_empty());
}
