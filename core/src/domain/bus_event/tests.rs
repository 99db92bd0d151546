use super::*;
use chrono::TimeZone;

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
}

pub(crate) fn subject() -> Subject {
    let block = crate::domain::block::example(t(10, 11, 30), t(12, 11, 30));
    Subject::of(&block, [("team".to_string(), "llm".to_string())].into())
}

/// One step of each detail-type, so a test over all of them misses none.
pub(crate) fn every_step() -> Vec<BusStep> {
    let steps = vec![
        BusStep::Purchased,
        BusStep::PaymentFailed,
        BusStep::Active,
        BusStep::Ending { minutes_left: 30 },
        BusStep::Extended { previous_end: t(11, 11, 30) },
        BusStep::Ended { outcome: EndOutcome::Expired },
        BusStep::HealthChanged { status: "impaired".into(), summary: "one node degraded".into() },
        BusStep::Idle {
            status: "idle".into(),
            idle_instances: 3,
            idle_since: t(10, 12, 30),
            idle_instance_minutes: 180,
            idle_cost: Some("288.00 USD".into()),
        },
        BusStep::Shared {
            share_arn: "arn:aws:ram:us-east-1:123456789012:resource-share/4f1c".into(),
            shared_with: vec!["111111111111".into()],
            not_shared_with: vec![],
        },
    ];
    let types: Vec<DetailType> = steps.iter().map(BusStep::detail_type).collect();
    assert_eq!(types, DetailType::ALL, "one step per detail-type, in order");
    steps
}

#[test]
fn detail_carries_the_common_facts_and_the_steps_own() {
    let d = serde_json::to_value(detail(&subject(), &BusStep::Ending { minutes_left: 30 }, "reminder-30m")).unwrap();
    assert_eq!(d["event_key"], "cr-0123456789abcdef0#reminder-30m");
    assert_eq!(d["region"], "us-east-1");
    assert_eq!(d["availability_zone"], "us-east-1a");
    assert_eq!(d["instance_type"], "p5.48xlarge");
    assert_eq!(d["instance_count"], 2);
    assert_eq!(d["start"], "2026-12-10T11:30:00Z");
    assert_eq!(d["end"], "2026-12-12T11:30:00Z");
    assert_eq!(d["termination_time"], "2026-12-12T11:00:00Z");
    assert_eq!(d["rule_id"], "p5");
    assert_eq!(d["tags"]["team"], "llm");
    assert_eq!(d["minutes_left"], 30);

    let active = serde_json::to_value(detail(&subject(), &BusStep::Active, "delivered")).unwrap();
    assert!(active.get("minutes_left").is_none(), "no other step's fields: {active}");
    let ended = serde_json::to_value(detail(&subject(), &BusStep::Ended { outcome: EndOutcome::Released }, "released"))
        .unwrap();
    assert_eq!(ended["outcome"], "released");
}

#[test]
fn ultraserver_termination_is_an_hour_before_the_end() {
    let mut s = subject();
    s.block.ultraserver = true;
    let d = detail(&s, &BusStep::Active, "delivered");
    assert_eq!(d.termination_time, "2026-12-12T10:30:00Z");
}

#[test]
fn an_adopted_block_has_a_null_rule() {
    let mut s = subject();
    s.block.rule_id = None;
    let d = serde_json::to_value(detail(&s, &BusStep::Active, "delivered")).unwrap();
    assert!(d["rule_id"].is_null());
}

#[test]
fn detail_types_round_trip_and_name_their_schema() {
    for d in DetailType::ALL {
        assert_eq!(DetailType::parse(d.as_str()), Some(d));
    }
    assert_eq!(DetailType::BlockEnding.schema_file(), "block-ending.schema.json");
    assert_eq!(DetailType::parse("block ending"), None);
}

#[test]
fn every_detail_type_has_its_schema_in_the_repo() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/events");
    for d in DetailType::ALL {
        let text = std::fs::read_to_string(dir.join(d.schema_file())).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(schema["properties"]["detail-type"]["const"], d.as_str());
        assert_eq!(schema["properties"]["source"]["const"], SOURCE);
    }
}

/// The schemas list exactly the fields `detail` writes for each step: a field added on one side
/// only fails here (the integration tests validate real events with a JSON Schema validator).
#[test]
fn schemas_require_exactly_the_fields_each_step_writes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/events");
    for step in every_step() {
        let d = serde_json::to_value(detail(&subject(), &step, "k")).unwrap();
        let mut written: Vec<String> = d.as_object().unwrap().keys().cloned().collect();
        written.sort();
        let text = std::fs::read_to_string(dir.join(step.detail_type().schema_file())).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        let detail = &schema["properties"]["detail"];
        let mut required: Vec<String> =
            detail["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        required.sort();
        assert_eq!(written, required, "{}", step.detail_type());
        let mut props: Vec<String> = detail["properties"].as_object().unwrap().keys().cloned().collect();
        props.sort();
        assert_eq!(props, required, "{}: every property required", step.detail_type());
        // Fields may be added later without breaking a consumer that validates.
        assert_eq!(detail["additionalProperties"], true, "{}: open to new fields", step.detail_type());
        assert_eq!(detail["properties"]["version"]["const"], DETAIL_VERSION, "{}", step.detail_type());
    }
}

#[test]
fn every_detail_carries_its_version() {
    for step in every_step() {
        let d = serde_json::to_value(detail(&subject(), &step, "k")).unwrap();
        assert_eq!(d["version"], DETAIL_VERSION, "{}", step.detail_type());
    }
}

#[test]
fn an_entry_carries_the_time_its_step_happened() {
    let e = BusEntry::new(DetailType::BlockActive, "{}".into(), vec![]).unwrap();
    assert_eq!(e.time(), None);
    assert_eq!(e.at(t(10, 11, 30)).time(), Some(t(10, 11, 30)));
}

#[test]
fn an_entry_over_256_kb_is_refused_when_made() {
    let big = "x".repeat(MAX_ENTRY_BYTES);
    let err = BusEntry::new(DetailType::BlockActive, big, vec![]).unwrap_err();
    assert!(matches!(err, EntryError::TooLarge { bytes, .. } if bytes > MAX_ENTRY_BYTES));

    // Exactly at the limit is accepted: 14 (time) + source + detail-type + detail + resources.
    let resources = vec!["arn:aws:ec2:us-east-1:1:capacity-reservation/cr-1".to_string()];
    let fixed = 14 + SOURCE.len() + "Block Active".len() + resources[0].len();
    let fits = "x".repeat(MAX_ENTRY_BYTES - fixed);
    assert!(BusEntry::new(DetailType::BlockActive, fits.clone(), resources.clone()).is_ok());
    let over = format!("{fits}x");
    assert!(BusEntry::new(DetailType::BlockActive, over, resources).is_err());
}

#[test]
fn sizes_count_bytes_not_characters() {
    assert_eq!(entry_size("A", "é", &[]), 14 + SOURCE.len() + 1 + 2);
}

#[test]
fn calls_hold_at_most_ten_entries() {
    let entries: Vec<BusEntry> =
        (0..23).map(|i| BusEntry::new(DetailType::BlockActive, format!("{{\"n\":{i}}}"), vec![]).unwrap()).collect();
    let sizes: Vec<usize> = calls(&entries).map(<[BusEntry]>::len).collect();
    assert_eq!(sizes, [10, 10, 3]);
    let order: Vec<&str> = calls(&entries).flatten().map(BusEntry::detail).collect();
    assert_eq!(order.first(), Some(&"{\"n\":0}"));
    assert_eq!(order.last(), Some(&"{\"n\":22}"));
}

#[test]
fn tracker_milestones_map_to_their_events_and_the_rest_to_none() {
    let before = t(12, 11, 30);
    let cases = [
        (Milestone::PaymentFailed, Some(DetailType::PaymentFailed)),
        (Milestone::Active, Some(DetailType::BlockActive)),
        (Milestone::Expired, Some(DetailType::BlockEnded)),
        (Milestone::Released, Some(DetailType::BlockEnded)),
        (Milestone::Extended(t(13, 11, 30)), Some(DetailType::BlockExtended)),
        (Milestone::PaymentSucceeded, None),
        (Milestone::Scheduled, None),
        (Milestone::EndMovedBack(t(11, 11, 30)), None),
        (Milestone::PaymentWarning(6), None),
    ];
    for (m, want) in cases {
        assert_eq!(step_of_milestone(&m, before).map(|s| s.detail_type()), want, "{m:?}");
    }
    assert_eq!(
        step_of_milestone(&Milestone::Extended(t(13, 11, 30)), before),
        Some(BusStep::Extended { previous_end: before })
    );
    assert_eq!(step_of_milestone(&Milestone::Released, before), Some(BusStep::Ended { outcome: EndOutcome::Released }));
}

#[test]
fn the_tracker_and_the_ec2_event_share_one_block_active_key() {
    // Both put "Block Active" under the same outbox milestone, so it goes out once.
    assert_eq!(Milestone::Active.name(), CheckpointMilestone::Delivered.key());
    assert_eq!(step_of_checkpoint(&CheckpointMilestone::Delivered), Some(BusStep::Active));
    let reminder = CheckpointMilestone::Reminder { lead_minutes: 30, end: t(12, 11, 30) };
    assert_eq!(step_of_checkpoint(&reminder), Some(BusStep::Ending { minutes_left: 30 }));
    assert_eq!(step_of_checkpoint(&CheckpointMilestone::AwsExpirationWarning), None);
    assert_eq!(step_of_checkpoint(&CheckpointMilestone::Interruption { instance_id: "i-1".into() }), None);
}

#[test]
fn event_tags_leave_out_capblocks_own() {
    let tags: BTreeMap<String, String> = [
        ("team".to_string(), "llm".to_string()),
        ("capblock:rule".to_string(), "p5".to_string()),
        ("capblock:stack".to_string(), "prod".to_string()),
    ]
    .into();
    assert_eq!(event_tags(&tags), [("team".to_string(), "llm".to_string())].into());
}

#[test]
fn a_health_change_is_degraded_or_recovered_with_its_summary() {
    use crate::domain::health::{BlockHealth, Interconnect};
    let health = BlockHealth { interconnect: Interconnect::from_ec2("impaired"), total: 16, unavailable: 2 };
    let degraded = HealthChange::Degraded { health: health.clone(), problems: vec!["interconnect impaired".into()] };
    assert_eq!(
        step_of_health(&degraded),
        BusStep::HealthChanged { status: "degraded".into(), summary: "interconnect impaired".into() }
    );
    let BusStep::HealthChanged { status, .. } = step_of_health(&HealthChange::Recovered { health }) else {
        panic!("a health step")
    };
    assert_eq!(status, "recovered");
}
