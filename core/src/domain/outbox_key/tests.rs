use super::*;

/// Every kind of key reads back as the key it was built as, with its parts.
#[test]
fn each_kind_round_trips_through_its_text() {
    let notice = OutboxKey::notice("reminder-120m-end-20261210T1130Z").unwrap();
    let workloads = OutboxKey::workloads("health-1-x").unwrap();
    let events = OutboxKey::events("delivered").unwrap();
    let copy = events.for_account("111111111111").unwrap();
    let action = OutboxKey::action("scale-up-trainers");
    let cases = [
        (&notice, "reminder-120m-end-20261210T1130Z", KeyKind::Notice("reminder-120m-end-20261210T1130Z")),
        (&workloads, "health-1-x@workloads", KeyKind::Workloads("health-1-x")),
        (&events, "delivered@events", KeyKind::Events("delivered")),
        (
            &copy,
            "delivered@events@111111111111",
            KeyKind::ConsumerEvents { name: "delivered", account: "111111111111" },
        ),
        (&action, "action-scale-up-trainers", KeyKind::Action("scale-up-trainers")),
    ];
    for (key, text, kind) in cases {
        assert_eq!(key.as_str(), text);
        assert_eq!(key.to_string(), text);
        assert_eq!(key.kind(), kind, "{text}");
        let back = OutboxKey::parse(text).unwrap();
        assert_eq!(&back, key, "{text}");
        assert_eq!(back.kind(), kind, "{text}");
    }
}

/// An action's rest is opaque: a group's name may hold '@' and the key is still an action's,
/// never read as a channel.
#[test]
fn an_action_key_carries_no_channel() {
    let key = OutboxKey::action("scale-up-team@events");
    assert_eq!(key.kind(), KeyKind::Action("scale-up-team@events"));
    assert_eq!(OutboxKey::parse(key.as_str()).unwrap(), key);
}

/// Stored as a plain string (the notice's and the planned order's JSON are what they were).
#[test]
fn it_serializes_as_its_text_and_parses_when_read() {
    let key = OutboxKey::events("delivered").unwrap().for_account("222222222222").unwrap();
    let json = serde_json::to_string(&key).unwrap();
    assert_eq!(json, "\"delivered@events@222222222222\"");
    assert_eq!(serde_json::from_str::<OutboxKey>(&json).unwrap(), key);
    let e = serde_json::from_str::<OutboxKey>("\"delivered@mail\"").unwrap_err();
    assert!(e.to_string().contains("\"delivered@mail\"") && e.to_string().contains("no channel"), "{e}");
}

/// What breaks the grammar is refused, naming the key and the problem.
#[test]
fn a_bad_key_is_refused_by_name() {
    let bad = [
        ("", KeyProblem::Empty),
        ("@events", KeyProblem::EmptyName { channel: "@events" }),
        ("@workloads", KeyProblem::EmptyName { channel: "@workloads" }),
        ("delivered@mail", KeyProblem::UnknownChannel { channel: "@mail".into() }),
        ("a@b@workloads", KeyProblem::UnknownChannel { channel: "@b@workloads".into() }),
        ("delivered@workloads@111111111111", KeyProblem::UnknownChannel { channel: "@workloads@111111111111".into() }),
        ("delivered@events@", KeyProblem::BadAccount { account: String::new() }),
        ("delivered@events@12345", KeyProblem::BadAccount { account: "12345".into() }),
        ("delivered@events@11111111111x", KeyProblem::BadAccount { account: "11111111111x".into() }),
        ("delivered@events@111111111111@events", KeyProblem::BadAccount { account: "111111111111@events".into() }),
    ];
    for (text, problem) in bad {
        let e = OutboxKey::parse(text).unwrap_err();
        assert_eq!(e, OutboxKeyError { key: text.to_string(), problem }, "{text}");
        assert!(e.to_string().starts_with(&format!("outbox key {text:?}: ")), "{e}");
    }
    let long = "x".repeat(MAX_KEY_BYTES + 1);
    assert_eq!(OutboxKey::parse(&long).unwrap_err().problem, KeyProblem::TooLong { bytes: MAX_KEY_BYTES + 1 });
    assert!(OutboxKey::parse(&"x".repeat(MAX_KEY_BYTES)).is_ok());
}

/// The constructors refuse what the grammar would read back as something else.
#[test]
fn the_constructors_refuse_names_that_would_read_back_otherwise() {
    assert_eq!(
        OutboxKey::notice("quota@zero").unwrap_err().problem,
        KeyProblem::AtInName { name: "quota@zero".into() }
    );
    assert_eq!(OutboxKey::workloads("idle@1").unwrap_err().problem, KeyProblem::AtInName { name: "idle@1".into() });
    assert_eq!(
        OutboxKey::notice("action-share").unwrap_err().problem,
        KeyProblem::ActionName { name: "action-share".into() }
    );
    assert_eq!(
        OutboxKey::events("action-share").unwrap_err().problem,
        KeyProblem::ActionName { name: "action-share".into() }
    );
    assert_eq!(OutboxKey::notice("").unwrap_err().problem, KeyProblem::Empty);
    assert_eq!(OutboxKey::events("").unwrap_err().problem, KeyProblem::EmptyName { channel: "@events" });
    let e = OutboxKey::notice("delivered").unwrap().for_account("111111111111").unwrap_err();
    assert_eq!(e, OutboxKeyError { key: "delivered@111111111111".into(), problem: KeyProblem::NotAnEvent });
    let e = OutboxKey::events("delivered").unwrap().for_account("ou-ab12").unwrap_err();
    assert_eq!(e.problem, KeyProblem::BadAccount { account: "ou-ab12".into() });
    let too_long = "n".repeat(MAX_KEY_BYTES);
    assert!(matches!(OutboxKey::workloads(too_long).unwrap_err().problem, KeyProblem::TooLong { .. }));
}

/// An action's records and messages follow its key, and read back by it: another action whose
/// key starts the same is not taken for it.
#[test]
fn an_actions_followers_extend_its_key_and_read_back() {
    let send = OutboxKey::action("run-command-drain-30m-end-20261210T1130Z");
    let sending = send.then("sending-3");
    assert_eq!(sending.as_str(), "action-run-command-drain-30m-end-20261210T1130Z-sending-3");
    assert_eq!(sending.kind(), KeyKind::Action("run-command-drain-30m-end-20261210T1130Z-sending-3"));
    assert!(sending.as_str().starts_with(&send.prefix("sen")));
    assert_eq!(sending.after(&send, "sending-"), Some("3"));
    assert_eq!(sending.after(&send, "sent-"), None);
    assert_eq!(send.then("done").as_str(), "action-run-command-drain-30m-end-20261210T1130Z-done");
    let share = OutboxKey::action("share");
    assert_eq!(share.then("ram-arn-0").after(&share, "ram-arn-"), Some("0"));
    assert_eq!(OutboxKey::action("shared-x").after(&share, "ram-"), None);
}

/// An action's key never outgrows the store's sort key: an over-long rest is hashed.
#[test]
fn an_over_long_action_key_is_hashed_to_fit() {
    let key = OutboxKey::action("g".repeat(2000));
    assert!(key.as_str().len() <= MAX_KEY_BYTES);
    assert!(key.as_str().starts_with("action-sha256-"), "{key}");
    assert_eq!(OutboxKey::parse(key.as_str()).unwrap(), key);
    assert_ne!(key, OutboxKey::action("h".repeat(2000)));
    let fits = "g".repeat(MAX_KEY_BYTES - "action-".len());
    assert_eq!(OutboxKey::action(fits.clone()).as_str(), format!("action-{fits}"));
}
