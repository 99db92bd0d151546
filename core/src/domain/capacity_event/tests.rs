use super::*;
use serde_json::json;

const DELIVERED_JSON: &str = include_str!("fixtures/capacity-block-delivered.json");
const WARNING_JSON: &str = include_str!("fixtures/capacity-block-expiration-warning.json");
const INTERRUPTION_JSON: &str = include_str!("fixtures/capacity-reservation-instance-interruption-warning.json");

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn example(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn with_detail_type(mut v: Value, dt: &str) -> Value {
    v["detail-type"] = json!(dt);
    v
}

/// The example event, parsed as it is and with its detail-type spelled `other`.
fn in_both_spellings(text: &str, other: &str) -> [Incoming; 2] {
    let v = example(text);
    [parse(&v).unwrap(), parse(&with_detail_type(v, other)).unwrap()]
}

#[test]
fn delivered_in_both_spellings() {
    for e in in_both_spellings(DELIVERED_JSON, "Capacity Block Delivered") {
        assert_eq!(e.event_id, "6a7e8feb-b491-4cf7-a9f1-bf3703467718");
        assert_eq!(e.region.as_str(), "us-east-2");
        assert_eq!(e.time, t("2026-12-03T11:30:00Z"));
        assert_eq!(
            e.trigger,
            Trigger::Delivered { reservation_id: "cr-0a1b2c3d4e5f60718".into(), end: t("2026-12-10T11:30:00Z") }
        );
    }
}

#[test]
fn expiration_warning_in_both_spellings() {
    for e in in_both_spellings(WARNING_JSON, "Capacity Block Reservation Expiration Warning") {
        assert_eq!(e.time, t("2026-12-10T10:50:00Z"));
        assert_eq!(
            e.trigger,
            Trigger::ExpirationWarning {
                reservation_id: "cr-0a1b2c3d4e5f60718".into(),
                end: t("2026-12-10T11:30:00Z")
            }
        );
    }
}

#[test]
fn instance_interruption() {
    let e = parse(&example(INTERRUPTION_JSON)).unwrap();
    assert_eq!(
        e.trigger,
        Trigger::InstanceInterruption {
            instance_id: "i-0abc1234def567890".into(),
            termination_time: t("2026-12-10T11:00:00Z"),
            reservation_hint: None,
        }
    );
    // A reservation ARN among the resources is taken as a hint.
    let mut v = example(INTERRUPTION_JSON);
    v["resources"] = json!(["arn:aws:ec2:us-east-2:111122223333:capacity-reservation/cr-0123456789abcdef0"]);
    assert!(
        matches!(parse(&v).unwrap().trigger, Trigger::InstanceInterruption { reservation_hint: Some(h), .. } if h == "cr-0123456789abcdef0")
    );
}

#[test]
fn reminder_payload() {
    let v = json!({"source": "capblock.reminder", "reservation_id": "cr-0a1b2c3d4e5f60718", "region": "us-east-2",
        "lead_minutes": 120, "fire_at": "2026-12-10T09:00:00Z"});
    let e = parse(&v).unwrap();
    assert_eq!(e.event_id, "reminder:cr-0a1b2c3d4e5f60718:120m");
    assert_eq!(e.time, t("2026-12-10T09:00:00Z"));
    assert_eq!(
        e.trigger,
        Trigger::Reminder {
            reservation_id: "cr-0a1b2c3d4e5f60718".into(),
            lead_minutes: 120,
            fire_at: t("2026-12-10T09:00:00Z")
        }
    );
    // The payload the schedules carry round-trips through its own type.
    let p: ReminderPayload = serde_json::from_value(v).unwrap();
    assert_eq!(p.lead_minutes, 120);
}

#[test]
fn unknown_and_malformed_inputs_are_named() {
    let cases: Vec<(Value, &str)> = vec![
        (json!("text"), "not-an-object"),
        (json!(null), "not-an-object"),
        (json!([1, 2]), "not-an-object"),
        (json!({}), "unknown-shape"),
        (json!({"source": "capblock.schedule", "time": "2026-12-01T10:00:00Z"}), "unknown-source"),
        (with_detail_type(example(DELIVERED_JSON), "EC2 Spot Instance Interruption Warning"), "unknown-detail-type"),
        (
            json!({"detail-type": "Capacity Block Delivered", "source": "aws.ec2", "detail": {}, "time": "yesterday"}),
            "bad-envelope",
        ),
        (json!({"detail-type": 7, "source": "aws.ec2", "detail": {}}), "bad-envelope"),
        (json!({"detail-type": "Capacity Block Delivered", "source": "aws.events", "detail": {}}), "unknown-source"),
        (
            json!({"source": "capblock.reminder", "region": "us-east-2", "lead_minutes": 30, "fire_at": "2026-12-10T09:00:00Z"}),
            "missing-field",
        ),
        (
            json!({"source": "capblock.reminder", "reservation_id": "cr-0a1b2c3d4e5f60718", "region": "us-east-2", "lead_minutes": -3, "fire_at": "2026-12-10T09:00:00Z"}),
            "bad-field",
        ),
        (
            json!({"source": "capblock.reminder", "reservation_id": "cr-0a1b2c3d4e5f60718", "region": "mars", "lead_minutes": 30, "fire_at": "2026-12-10T09:00:00Z"}),
            "bad-field",
        ),
        (
            json!({"source": "capblock.reminder", "reservation_id": "i-1", "region": "us-east-2", "lead_minutes": 30, "fire_at": "2026-12-10T09:00:00Z"}),
            "bad-field",
        ),
    ];
    for (v, kind) in cases {
        let err = parse(&v).unwrap_err();
        assert_eq!(err.kind(), kind, "{v}: {err}");
    }

    let mut v = example(DELIVERED_JSON);
    v["detail"].as_object_mut().unwrap().remove("end-date");
    assert_eq!(parse(&v).unwrap_err(), IncomingError::MissingField("end-date"));

    let mut v = example(WARNING_JSON);
    v["detail"]["capacity-reservation-id"] = json!(42);
    assert_eq!(parse(&v).unwrap_err().kind(), "bad-field");

    let mut v = example(INTERRUPTION_JSON);
    v["detail"]["instance-termination-time"] = json!("soon");
    assert!(parse(&v).unwrap_err().to_string().contains("instance-termination-time"));

    let mut v = example(DELIVERED_JSON);
    v.as_object_mut().unwrap().remove("id");
    assert_eq!(parse(&v).unwrap_err(), IncomingError::MissingField("id"));

    let mut v = example(DELIVERED_JSON);
    v["detail"] = json!("x");
    assert_eq!(parse(&v).unwrap_err().kind(), "bad-field");
}

#[test]
fn event_ids_for_logs() {
    assert_eq!(event_id_of(&example(DELIVERED_JSON)).as_deref(), Some("6a7e8feb-b491-4cf7-a9f1-bf3703467718"));
    assert_eq!(event_id_of(&json!(3)), None);
}

#[test]
fn ids_must_have_ec2s_shape_and_length() {
    // The audit's interruption: Slack markup in the instance id.
    let mut v = example(INTERRUPTION_JSON);
    v["detail"]["instance-id"] = json!("i-<!channel> <https://evil.example|click>");
    let err = parse(&v).unwrap_err();
    assert_eq!(err.kind(), "bad-field", "{err}");
    assert!(err.to_string().contains("instance-id"), "{err}");
    // A 300 KB id is bad input, named without being echoed whole.
    let huge = format!("cr-{}", "0".repeat(300 * 1024));
    for (mut v, field) in [
        (example(DELIVERED_JSON), "capacity-reservation-id"),
        (example(INTERRUPTION_JSON), "instance-id"),
        (example(WARNING_JSON), "id"),
    ] {
        if field == "id" {
            v["id"] = json!(huge);
        } else {
            v["detail"][field] = json!(huge);
        }
        let err = parse(&v).unwrap_err();
        assert_eq!(err.kind(), "bad-field", "{field}");
        assert!(
            err.to_string().contains(field) && err.to_string().len() < 300,
            "{field}: {}",
            prefix(&err.to_string())
        );
    }
    let reminder = json!({"source": "capblock.reminder", "reservation_id": huge, "region": "us-east-2",
        "lead_minutes": 30, "fire_at": "2026-12-10T09:00:00Z"});
    assert_eq!(parse(&reminder).unwrap_err().kind(), "bad-field");
    // A hint that is not a reservation id is no hint.
    let mut v = example(INTERRUPTION_JSON);
    v["resources"] = json!(["arn:aws:ec2:us-east-2:111122223333:capacity-reservation/cr-<!here>"]);
    assert!(matches!(parse(&v).unwrap().trigger, Trigger::InstanceInterruption { reservation_hint: None, .. }));
    assert_eq!(event_id_of(&json!({"id": huge})).map(|id| id.chars().count()), Some(65));
}

/// An input's time must fit the clock: a reminder sent early (its `fire_at` ahead) or an event
/// replayed from long ago is refused; Lambda's own retries (up to 6 hours late) and a few
/// seconds of clock skew are not.
#[test]
fn an_inputs_time_must_fit_the_clock() {
    let v = json!({"source": "capblock.reminder", "reservation_id": "cr-0a1b2c3d4e5f60718", "region": "us-east-2",
        "lead_minutes": 120, "fire_at": "2026-12-10T09:00:00Z"});
    let reminder = parse(&v).unwrap();
    assert_eq!(timely(&reminder, t("2026-12-10T09:00:00Z")), Ok(()));
    assert_eq!(timely(&reminder, t("2026-12-10T08:55:00Z")), Ok(()), "5 minutes of skew");
    assert_eq!(timely(&reminder, t("2026-12-10T08:54:59Z")).unwrap_err().0, "ahead-of-the-clock");
    assert_eq!(timely(&reminder, t("2026-12-10T15:00:00Z")), Ok(()), "a retry 6 hours late");
    assert_eq!(timely(&reminder, t("2026-12-10T15:00:01Z")).unwrap_err().0, "too-old");
    let delivered = parse(&example(DELIVERED_JSON)).unwrap();
    assert_eq!(timely(&delivered, delivered.time), Ok(()));
    let (kind, reason) = timely(&delivered, delivered.time - Duration::days(3)).unwrap_err();
    assert_eq!(kind, "ahead-of-the-clock");
    assert!(reason.contains("2026-12-03 11:30:00 UTC"), "{reason}");
}

/// Only the leads the stack schedules are reminders; EC2's events have no lead.
#[test]
fn a_reminder_must_have_a_configured_lead() {
    let leads = [Duration::minutes(1440), Duration::minutes(120), Duration::minutes(30)];
    let reminder = |lead: u32| Trigger::Reminder {
        reservation_id: "cr-0a1b2c3d4e5f60718".into(),
        lead_minutes: lead,
        fire_at: t("2026-12-10T09:00:00Z"),
    };
    assert_eq!(lead_is_configured(&reminder(120), &leads), Ok(()));
    let (kind, reason) = lead_is_configured(&reminder(600), &leads).unwrap_err();
    assert_eq!(kind, "unknown-lead");
    assert!(reason.contains("1440, 120, 30"), "{reason}");
    assert_eq!(lead_is_configured(&parse(&example(DELIVERED_JSON)).unwrap().trigger, &leads), Ok(()));
}

/// An expiration warning is due within the hour before EC2's end, never days early (a forged
/// one) nor after the end.
#[test]
fn an_expiration_warning_is_due_only_within_the_hour_before_the_end() {
    let end: DateTime<Utc> = "2026-12-10T11:30:00Z".parse().unwrap();
    let at = |minutes_before: i64| end - Duration::minutes(minutes_before);
    assert!(expiration_is_near(end, at(40)), "AWS's own timing");
    assert!(expiration_is_near(end, at(60)));
    assert!(expiration_is_near(end, at(1)));
    assert!(!expiration_is_near(end, at(61)));
    assert!(!expiration_is_near(end, at(3 * 24 * 60)), "days early: forged");
    assert!(!expiration_is_near(end, at(0)), "over");
    assert!(!expiration_is_near(end, at(-10)));
}
