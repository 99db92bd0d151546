use super::*;

const ORG: &str = "arn:aws:organizations::111111111111:organization/o-abcdef1234";
const OU: &str = "arn:aws:organizations::111111111111:ou/o-abcdef1234/ou-ab12-cdef5678";

#[test]
fn principals_are_accounts_the_organization_or_its_units() {
    assert_eq!(SharePrincipal::parse("123456789012"), Ok(SharePrincipal::Account("123456789012".into())));
    assert_eq!(SharePrincipal::parse(ORG), Ok(SharePrincipal::Organization(ORG.into())));
    assert_eq!(SharePrincipal::parse(OU), Ok(SharePrincipal::Unit(OU.into())));
    for bad in [
        "12345678901",
        "1234567890123",
        "arn:aws:iam::123456789012:root",
        "arn:aws:organizations::111111111111:organization/o-short",
        "arn:aws:organizations::111111111111:ou/o-abcdef1234/ou-x",
        "arn:aws:organizations::1111:organization/o-abcdef1234",
        "",
    ] {
        let e = SharePrincipal::parse(bad).unwrap_err();
        assert!(e.contains("inside the Organization"), "{bad}: {e}");
    }
    assert_eq!(SharePrincipal::parse(OU).unwrap().describe(), "OU ou-ab12-cdef5678");
    assert_eq!(SharePrincipal::parse(ORG).unwrap().describe(), "the whole Organization o-abcdef1234");
}

fn assoc(entity: &str, status: Association, message: Option<&str>) -> Associated {
    Associated { entity: entity.into(), status, message: message.map(str::to_string) }
}

fn view(resource: Association, principals: &[(&str, Association)]) -> ShareView {
    ShareView {
        arn: "arn:aws:ram:us-east-1:999999999999:resource-share/x".into(),
        resource: Some(assoc("arn:aws:ec2:us-east-1:999999999999:capacity-reservation/cr-1", resource, Some("no"))),
        principals: principals.iter().map(|(p, s)| assoc(p, *s, Some("not in the organization"))).collect(),
    }
}

#[test]
fn a_share_is_done_only_when_ram_has_associated_it() {
    use Association::*;
    assert_eq!(judge(&view(Associating, &[("111111111111", Associated)])), Shared::Pending);
    assert_eq!(judge(&view(Associated, &[("111111111111", Associating)])), Shared::Pending);
    assert_eq!(
        judge(&view(Associated, &[("111111111111", Associated)])),
        Shared::Done { with: vec!["111111111111".into()], refused: vec![] }
    );
    assert_eq!(
        judge(&view(Associated, &[("111111111111", Associated), ("222222222222", Failed)])),
        Shared::Done {
            with: vec!["111111111111".into()],
            refused: vec![("222222222222".into(), "not in the organization".into())]
        }
    );
    assert_eq!(judge(&view(Failed, &[("111111111111", Associated)])), Shared::Failed("no".into()));
    assert!(
        matches!(judge(&view(Associated, &[("222222222222", Failed)])), Shared::Failed(w) if w.contains("222222222222"))
    );
    assert!(matches!(judge(&view(Disassociated, &[])), Shared::Failed(_)));
    let none = ShareView { resource: None, ..view(Associated, &[]) };
    assert!(matches!(judge(&none), Shared::Failed(w) if w.contains("no reservation")));
}

#[test]
fn shares_are_named_and_tagged_by_block() {
    assert_eq!(share_name("prod", "cr-1"), "capblock-prod-cr-1");
    let tags = share_tags("prod", "p5", "cr-1");
    assert!(tags.contains(&(RESERVATION_TAG, "cr-1")) && tags.contains(&("capblock:stack", "prod")));
    assert_eq!(Association::parse("FAILED"), Some(Association::Failed));
    assert_eq!(Association::parse("SOMETHING"), None);
}

#[test]
fn a_share_token_is_the_same_for_the_same_block_and_attempt_and_short() {
    let rid = "cr-0123456789abcdef0";
    let token = share_client_token("prod", rid, 0);
    assert_eq!(token, share_client_token("prod", rid, 0), "no clock in it: a retry sends the same");
    assert_ne!(token, share_client_token("prod", rid, 1), "a new attempt, a new share");
    assert_ne!(token, share_client_token("staging", rid, 0), "another stack's is its own");
    assert_ne!(token, share_client_token("prod", "cr-0123456789abcdef1", 0));
    assert!(token.contains(rid), "a person sees whose it is: {token}");
    let long = share_client_token(&"s".repeat(300), &format!("cr-{}", "f".repeat(200)), u32::MAX);
    for t in [&token, &long] {
        assert!(t.len() <= MAX_CLIENT_TOKEN, "{t}: {}", t.len());
        assert!(t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{t}");
    }
}

#[test]
fn share_attempts_are_read_from_their_records() {
    let key = &crate::domain::outbox_key::OutboxKey::parse("action-share").unwrap();
    assert_eq!(ShareAttempts::read(key, []), ShareAttempts::default());
    let arn = |n: u32| (share_arn_record(key, n), format!("arn:aws:ram:us-east-1:1:resource-share/s{n}"));
    let dropped = |n: u32| (share_dropped_record(key, n), String::new());
    // Attempt 0 made, then dropped; attempt 1 made: the current one is 1's, kept.
    let records = [
        arn(0),
        dropped(0),
        arn(1),
        (crate::domain::outbox_key::OutboxKey::parse("action-shared-other-0").unwrap(), "x".to_string()),
    ];
    let read = ShareAttempts::read(key, records.iter().map(|(m, b)| (m, b.as_str())));
    assert_eq!(read.attempt, 1);
    assert_eq!(read.arn.as_deref(), Some(arn(1).1.as_str()));
    assert_eq!(read.kept, [arn(1).1]);
    // Dropped and not made again yet: the next attempt, nothing recorded for it.
    let records = [arn(0), dropped(0)];
    let read = ShareAttempts::read(key, records.iter().map(|(m, b)| (m, b.as_str())));
    assert_eq!((read.attempt, read.arn, read.kept.len()), (1, None, 0));
}

#[test]
fn events_go_to_the_named_accounts_once_not_to_units() {
    let with = vec![
        SharePrincipal::Account("111111111111".into()),
        SharePrincipal::Unit("arn:aws:organizations::999999999999:ou/o-abc1234567/ou-ab12-cdefgh12".into()),
        SharePrincipal::Account("222222222222".into()),
    ];
    assert_eq!(event_consumers(&with, Some("111111111111")), ["111111111111", "222222222222"]);
    assert!(event_consumers(&[], None).is_empty());
    assert_eq!(event_consumers(&[], Some("333333333333")), ["333333333333"]);
}
