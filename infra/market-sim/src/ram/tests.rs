//! RAM through `handle`, as the server calls it: each action, each refusal under both readings of
//! `ram_refusal`, the association delay, client tokens, filters and paging.

use serde_json::{Value, json};

use super::associations::ORG_ONLY;
use super::*;
use crate::control;
use crate::resource_shares::BLOCK_ENDED;
use crate::scenario::Scenario;

const OWNER: &str = "111122223333";
const REGION: &str = "us-east-1";

/// A world at 2026-12-01 00:00 UTC with `behaviour` lines.
fn world(behaviour: &str) -> World {
    let text = format!("[clock]\nstart = \"2026-12-01T00:00:00Z\"\n[behaviour]\n{behaviour}");
    World::new(Scenario::parse(&text).expect("a test scenario"))
}

/// A block bought in the console (`extra` JSON members added): scheduled, starting in a day.
fn block(w: &mut World, extra: Value) -> String {
    let mut req = json!({
        "instance_type": "p5.48xlarge", "instance_count": 2,
        "start": "2026-12-02T11:30:00Z", "end": "2026-12-03T11:30:00Z",
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut req, extra) {
        m.extend(e);
    }
    let r = control::handle(w, "POST", "/_sim/reservations", req.to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let id = serde_json::from_str::<Value>(&r.body).unwrap()["reservation_id"].as_str().unwrap().to_string();
    format!("arn:aws:ec2:{REGION}:{OWNER}:capacity-reservation/{id}")
}

fn call_in(
    w: &mut World,
    region: &str,
    method: &str,
    path: &str,
    query: &str,
    body: Value,
) -> Result<Value, (u16, String, String)> {
    let r = handle(w, region, method, path, query, body.to_string().as_bytes());
    let v: Value = serde_json::from_str(&r.body).expect("a JSON answer");
    match r.error_type {
        None => Ok(v),
        Some(code) => Err((r.status, code, v["message"].as_str().unwrap_or_default().to_string())),
    }
}

fn call(w: &mut World, path: &str, body: Value) -> Result<Value, (u16, String, String)> {
    call_in(w, REGION, "POST", path, "", body)
}

fn code(r: Result<Value, (u16, String, String)>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v}"),
        Err((status, code, message)) => {
            assert_eq!(status, 400, "{code}: {message}");
            assert!(!message.is_empty(), "{code} has a message");
            code
        }
    }
}

fn create(w: &mut World, body: Value) -> Result<Value, (u16, String, String)> {
    call(w, "/createresourceshare", body)
}

fn share_arn(v: &Value) -> String {
    v["resourceShare"]["resourceShareArn"].as_str().unwrap().to_string()
}

/// (type, entity, status, statusMessage) of every association of `arn`.
fn associations(w: &mut World, arn: &str) -> Vec<(String, String, String, Option<String>)> {
    let mut out = Vec::new();
    for kind in ["RESOURCE", "PRINCIPAL"] {
        let v =
            call(w, "/getresourceshareassociations", json!({ "associationType": kind, "resourceShareArns": [arn] }))
                .unwrap();
        for a in v["resourceShareAssociations"].as_array().unwrap() {
            out.push((
                a["associationType"].as_str().unwrap().to_string(),
                a["associatedEntity"].as_str().unwrap().to_string(),
                a["status"].as_str().unwrap().to_string(),
                a["statusMessage"].as_str().map(str::to_string),
            ));
        }
    }
    out
}

fn statuses(w: &mut World, arn: &str) -> Vec<String> {
    associations(w, arn).into_iter().map(|a| a.2).collect()
}

fn advance(w: &mut World, secs: i64) {
    w.clock.advance(secs);
}

#[test]
fn a_share_of_a_scheduled_block_associates_after_the_delay_and_is_deleted() {
    // Listed at once (the other reading of RAM's listing: see the lag's own test).
    let mut w = world("ram_listing_lag_secs = 0");
    let cr = block(&mut w, json!({}));
    let v = create(
        &mut w,
        json!({ "name": "team-a", "resourceArns": [cr], "principals": ["111111111111"], "tags": [{"key": "team", "value": "a"}] }),
    )
    .unwrap();
    let share = &v["resourceShare"];
    let arn = share_arn(&v);
    assert!(arn.starts_with("arn:aws:ram:us-east-1:111122223333:resource-share/"), "{arn}");
    assert_eq!(arn.rsplit('/').next().unwrap().len(), 36, "a UUID");
    assert_eq!(
        (
            &share["name"],
            &share["owningAccountId"],
            &share["allowExternalPrincipals"],
            &share["status"],
            &share["featureSet"]
        ),
        (&json!("team-a"), &json!(OWNER), &json!(true), &json!("ACTIVE"), &json!("STANDARD"))
    );
    assert_eq!(share["tags"], json!([{"key": "team", "value": "a"}]));
    // 2026-12-01T00:00:00Z in epoch seconds.
    assert_eq!(
        (share["creationTime"].as_f64(), share["lastUpdatedTime"].as_f64()),
        (Some(1_796_083_200.0), Some(1_796_083_200.0))
    );
    assert!(v["clientToken"].as_str().is_some_and(|t| t.len() == 36), "RAM generates a token: {v}");
    // The default delay: 10 s of sim time ASSOCIATING, then ASSOCIATED.
    assert_eq!(statuses(&mut w, &arn), ["ASSOCIATING", "ASSOCIATING"]);
    advance(&mut w, 9);
    assert_eq!(statuses(&mut w, &arn), ["ASSOCIATING", "ASSOCIATING"]);
    advance(&mut w, 1);
    let a = associations(&mut w, &arn);
    assert_eq!(
        a,
        [
            ("RESOURCE".into(), cr.clone(), "ASSOCIATED".into(), None),
            ("PRINCIPAL".into(), "111111111111".into(), "ASSOCIATED".into(), None)
        ]
    );
    let one =
        call(&mut w, "/getresourceshareassociations", json!({ "associationType": "RESOURCE", "resourceArn": cr }))
            .unwrap();
    let one = &one["resourceShareAssociations"][0];
    assert_eq!((&one["resourceShareName"], &one["external"]), (&json!("team-a"), &json!(false)));
    assert_eq!(
        (one["creationTime"].as_f64(), one["lastUpdatedTime"].as_f64()),
        (Some(1_796_083_200.0), Some(1_796_083_210.0))
    );

    let q = format!("resourceShareArn={}&clientToken=del-1", arn.replace(':', "%3A").replace('/', "%2F"));
    let d = call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", &q, json!({})).unwrap();
    assert_eq!(d, json!({ "returnValue": true, "clientToken": "del-1" }));
    let got = call(&mut w, "/getresourceshares", json!({ "resourceOwner": "SELF" })).unwrap();
    assert_eq!(got["resourceShares"][0]["status"], "DELETED");
    assert_eq!(statuses(&mut w, &arn), ["DISASSOCIATING", "DISASSOCIATING"]);
    advance(&mut w, 10);
    assert_eq!(statuses(&mut w, &arn), ["DISASSOCIATED", "DISASSOCIATED"]);
    // The same token again: the same answer; without it, the share is already deleted.
    assert_eq!(call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", &q, json!({})).unwrap(), d);
    let again = format!("resourceShareArn={arn}");
    assert_eq!(
        code(call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", &again, json!({}))),
        "InvalidStateTransitionException"
    );
    let unknown = format!("resourceShareArn=arn:aws:ram:{REGION}:{OWNER}:resource-share/nope");
    assert_eq!(
        code(call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", &unknown, json!({}))),
        "UnknownResourceException"
    );
    let e =
        call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", "resourceShareArn=share-1", json!({})).unwrap_err();
    assert_eq!(
        (e.1.as_str(), e.2.as_str()),
        ("MalformedArnException", "The specified resource share ARN is not valid. Verify the ARN and try again.")
    );
    assert_eq!(w.calls["ram:DeleteResourceShare"], 5);
    assert_eq!(w.calls_by_region[REGION]["ram:CreateResourceShare"], 1);
}

#[test]
fn a_new_share_is_listed_only_after_the_listing_lag() {
    let listed = |w: &mut World, body: Value| -> usize {
        call(w, "/getresourceshares", body).unwrap()["resourceShares"].as_array().unwrap().len()
    };
    let mut w = world("ram_listing_lag_secs = 30\nram_association_delay_secs = 0");
    let cr = block(&mut w, json!({}));
    let tags = json!([{"key": "capblock:reservation", "value": cr}]);
    let v = create(&mut w, json!({ "name": "late", "resourceArns": [cr], "principals": ["111111111111"], "tags": tags, "clientToken": "t-1" }))
        .unwrap();
    let arn = share_arn(&v);
    let by_tag =
        json!({ "resourceOwner": "SELF", "tagFilters": [{"tagKey": "capblock:reservation", "tagValues": [cr]}] });
    let by_arn = json!({ "resourceOwner": "SELF", "resourceShareArns": [arn] });
    for _ in 0..3 {
        assert_eq!(listed(&mut w, json!({ "resourceOwner": "SELF" })), 0, "not listed yet");
        assert_eq!(listed(&mut w, by_tag.clone()), 0, "not by its tags either");
        assert_eq!(listed(&mut w, by_arn.clone()), 0, "nor by its ARN (no error: RAM knows it)");
    }
    // Its associations are read by its ARN meanwhile; its token answers it again.
    assert_eq!(statuses(&mut w, &arn), ["ASSOCIATED", "ASSOCIATED"]);
    let again = create(&mut w, json!({ "name": "late", "resourceArns": [cr], "principals": ["111111111111"], "tags": tags, "clientToken": "t-1" }))
        .unwrap();
    assert_eq!(share_arn(&again), arn);
    assert_eq!(w.resource_shares.len(), 1);
    advance(&mut w, 29);
    assert_eq!(listed(&mut w, by_tag.clone()), 0);
    advance(&mut w, 1);
    assert_eq!((listed(&mut w, by_tag), listed(&mut w, by_arn)), (1, 1), "listed from the lag on");
    // The setting through the control API, like the others.
    let r = control::handle(&mut w, "POST", "/_sim/behaviour", br#"{"ram_listing_lag_secs": 0}"#);
    assert_eq!((r.status, w.behaviour.ram_listing_lag_secs), (200, 0), "{}", r.body);
    let r = control::handle(&mut w, "POST", "/_sim/behaviour", br#"{"ram_listing_lag_secs": 86401}"#);
    assert_eq!(r.status, 400, "{}", r.body);
}

#[test]
fn no_delay_associates_at_once() {
    let mut w = world("ram_association_delay_secs = 0");
    let cr = block(&mut w, json!({}));
    let v = create(&mut w, json!({ "name": "now", "resourceArns": [cr], "principals": ["222222222222"] })).unwrap();
    assert_eq!(statuses(&mut w, &share_arn(&v)), ["ASSOCIATED", "ASSOCIATED"]);
}

#[test]
fn a_client_token_answers_the_same_share_again_and_refuses_other_parameters() {
    let mut w = world("");
    let cr = block(&mut w, json!({}));
    let req = json!({ "name": "once", "resourceArns": [cr], "principals": ["111111111111"], "clientToken": "tok-1" });
    let first = create(&mut w, req.clone()).unwrap();
    assert_eq!(first["clientToken"], "tok-1");
    // The same parameters in another order: the same answer, no second share.
    let reordered =
        json!({ "clientToken": "tok-1", "principals": ["111111111111"], "resourceArns": [cr], "name": "once" });
    assert_eq!(create(&mut w, reordered).unwrap(), first);
    assert_eq!(w.resource_shares.len(), 1);
    let mut other = req.clone();
    other["name"] = json!("twice");
    assert_eq!(code(create(&mut w, other)), "IdempotentParameterMismatchException");
    // Another region keeps its own tokens; no token: a new share every call.
    let west = call_in(
        &mut w,
        "us-west-2",
        "POST",
        "/createresourceshare",
        "",
        json!({ "name": "once", "clientToken": "tok-1" }),
    );
    assert!(west.is_ok());
    create(&mut w, json!({ "name": "once" })).unwrap();
    create(&mut w, json!({ "name": "once" })).unwrap();
    assert_eq!(w.resource_shares.len(), 4);
}

/// Every block RAM cannot share, under one reading; (what, resource, principal) per case.
fn refusals(w: &mut World) -> Vec<(&'static str, Vec<String>, Vec<String>, String)> {
    let pending = block(w, json!({ "state_override": "payment-pending" }));
    let expired = block(w, json!({ "start": "2026-11-01T11:30:00Z", "end": "2026-11-02T11:30:00Z" }));
    let ultra = block(
        w,
        json!({ "instance_type": "p6e-gb200.36xlarge", "instance_count": 18, "ultraserver_type": "u-p6e-gb200x72" }),
    );
    let fine = block(w, json!({}));
    vec![
        (
            "payment-pending",
            vec![pending.clone()],
            vec!["111111111111".into()],
            format!(
                "Capacity Block {} is payment-pending: only Capacity Blocks that are active or scheduled can be shared.",
                id(&pending)
            ),
        ),
        (
            "expired",
            vec![expired.clone()],
            vec!["111111111111".into()],
            format!(
                "Capacity Block {} is expired: only Capacity Blocks that are active or scheduled can be shared.",
                id(&expired)
            ),
        ),
        (
            "ultraserver",
            vec![ultra.clone()],
            vec!["111111111111".into()],
            format!(
                "You cannot share Capacity Blocks for EC2 UltraServers: {} is a u-p6e-gb200x72 Capacity Block.",
                id(&ultra)
            ),
        ),
        ("outside the organization", vec![fine], vec!["999999999999".into()], ORG_ONLY.to_string()),
    ]
}

fn id(arn: &str) -> &str {
    arn.rsplit('/').next().unwrap()
}

#[test]
fn under_failed_association_a_refused_block_is_shared_and_its_association_fails() {
    let mut w = world("ram_refusal = \"failed_association\"");
    assert_eq!(w.behaviour.ram_refusal, crate::scenario::RamRefusal::FailedAssociation, "the default");
    for (what, resources, principals, message) in refusals(&mut w) {
        let v = create(&mut w, json!({ "name": what, "resourceArns": resources, "principals": principals })).unwrap();
        let arn = share_arn(&v);
        assert_eq!(v["resourceShare"]["status"], "ACTIVE", "{what}");
        assert_eq!(statuses(&mut w, &arn), ["ASSOCIATING", "ASSOCIATING"], "{what}: RAM is not done yet");
        advance(&mut w, 10);
        let a = associations(&mut w, &arn);
        let failed: Vec<_> = a.iter().filter(|a| a.2 == "FAILED").collect();
        assert_eq!(failed.len(), 1, "{what}: {a:?}");
        assert_eq!(failed[0].3.as_deref(), Some(message.as_str()), "{what}");
        // The refused side fails, the other is associated: the block, or the members.
        let want = if what == "outside the organization" { "PRINCIPAL" } else { "RESOURCE" };
        assert_eq!(failed[0].0, want, "{what}");
        assert!(a.iter().any(|a| a.2 == "ASSOCIATED"), "{what}: {a:?}");
        let by_status = call(
            &mut w,
            "/getresourceshareassociations",
            json!({ "associationType": want, "associationStatus": "FAILED", "resourceShareArns": [arn] }),
        )
        .unwrap();
        assert_eq!(by_status["resourceShareAssociations"].as_array().unwrap().len(), 1, "{what}");
    }
    assert_eq!(w.resource_shares.len(), 4);
}

#[test]
fn under_error_a_refused_block_fails_the_call_and_changes_nothing() {
    let mut w = world("ram_refusal = \"error\"");
    for (what, resources, principals, message) in refusals(&mut w) {
        let e =
            create(&mut w, json!({ "name": what, "resourceArns": resources, "principals": principals })).unwrap_err();
        let want = if what == "outside the organization" {
            "InvalidParameterException"
        } else {
            "OperationNotPermittedException"
        };
        assert_eq!((e.0, e.1.as_str(), e.2.as_str()), (400, want, message.as_str()), "{what}");
    }
    assert!(w.resource_shares.is_empty());
    assert!(w.client_tokens.is_empty());
}

#[test]
fn a_limited_billing_history_refuses_every_block_under_both_readings() {
    for (reading, failed) in [("error", false), ("failed_association", true)] {
        let mut w = world(&format!("ram_refusal = \"{reading}\"\nram_association_delay_secs = 0"));
        let cr = block(&mut w, json!({}));
        let r = control::handle(&mut w, "POST", "/_sim/ram/organization", br#"{"limited_billing_history": true}"#);
        assert_eq!(r.status, 200, "{}", r.body);
        let result = create(&mut w, json!({ "name": "x", "resourceArns": [cr] }));
        let message = format!(
            "Capacity Block sharing is not available to accounts that have a limited billing history: {} cannot be shared.",
            id(&cr)
        );
        if failed {
            let arn = share_arn(&result.unwrap());
            assert_eq!(associations(&mut w, &arn)[0].2, "FAILED");
            assert_eq!(associations(&mut w, &arn)[0].3.as_deref(), Some(message.as_str()));
        } else {
            assert_eq!(result.unwrap_err().1, "OperationNotPermittedException");
        }
    }
}

#[test]
fn principals_are_the_organization_its_ous_and_its_accounts() {
    let mut w = world("ram_refusal = \"error\"\nram_association_delay_secs = 0");
    let cr = block(&mut w, json!({}));
    let org = w.organization.arn(OWNER);
    let ou = w.organization.ou_arn(OWNER, "ou-cb01-mlteams1");
    let v = create(
        &mut w,
        json!({ "name": "all", "resourceArns": [cr], "principals": [org, ou, "111111111111", "222222222222"] }),
    )
    .unwrap();
    let a = associations(&mut w, &share_arn(&v));
    assert_eq!(a.iter().filter(|a| a.0 == "PRINCIPAL" && a.2 == "ASSOCIATED").count(), 4, "{a:?}");
    for (principal, want) in [
        ("arn:aws:iam::111111111111:root", "InvalidParameterException"),
        ("ec2.amazonaws.com", "InvalidParameterException"),
        ("arn:aws:organizations::111122223333:organization/o-otherorg00", "UnknownResourceException"),
        ("arn:aws:organizations::111122223333:ou/o-capblock01/ou-cb01-nothere1", "UnknownResourceException"),
        ("999999999999", "InvalidParameterException"),
    ] {
        assert_eq!(
            code(create(&mut w, json!({ "name": "p", "resourceArns": [cr], "principals": [principal] }))),
            want,
            "{principal}"
        );
    }
    let e = create(&mut w, json!({ "name": "p", "principals": ["arn:aws:iam::111111111111:root"] })).unwrap_err();
    assert_eq!(e.2, "Principal ID arn:aws:iam::111111111111:root is malformed. Verify the ID and try again.");
    // The organization changes at run time: a new member can be shared with.
    let r = control::handle(
        &mut w,
        "POST",
        "/_sim/ram/organization",
        br#"{"accounts": ["111111111111", "222222222222", "999999999999"]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        create(&mut w, json!({ "name": "new member", "resourceArns": [cr], "principals": ["999999999999"] })).is_ok()
    );
}

#[test]
fn an_outside_account_may_join_a_share_without_blocks_and_no_block_may_join_it() {
    for reading in ["error", "failed_association"] {
        let mut w = world(&format!("ram_refusal = \"{reading}\"\nram_association_delay_secs = 0"));
        let cr = block(&mut w, json!({}));
        // RAM's own check, recorded as synchronous: both readings refuse it.
        let e = create(
            &mut w,
            json!({ "name": "closed", "principals": ["999999999999"], "allowExternalPrincipals": false }),
        )
        .unwrap_err();
        assert_eq!(e.1, "InvalidParameterException", "{reading}");
        let v = create(&mut w, json!({ "name": "open", "principals": ["999999999999"] })).unwrap();
        let arn = share_arn(&v);
        let p = call(
            &mut w,
            "/getresourceshareassociations",
            json!({ "associationType": "PRINCIPAL", "principal": "999999999999" }),
        )
        .unwrap();
        assert_eq!(
            (&p["resourceShareAssociations"][0]["external"], &p["resourceShareAssociations"][0]["status"]),
            (&json!(true), &json!("ASSOCIATED"))
        );
        let added = call(&mut w, "/associateresourceshare", json!({ "resourceShareArn": arn, "resourceArns": [cr] }));
        if reading == "error" {
            assert_eq!(added.unwrap_err().2, ORG_ONLY);
        } else {
            let list = added.unwrap();
            let a = &list["resourceShareAssociations"][0];
            assert_eq!((&a["status"], &a["statusMessage"]), (&json!("FAILED"), &json!(ORG_ONLY)));
        }
    }
}

#[test]
fn resources_ram_cannot_find_or_read_fail_the_call_under_both_readings() {
    for reading in ["error", "failed_association"] {
        let mut w = world(&format!("ram_refusal = \"{reading}\""));
        let cr = block(&mut w, json!({}));
        let cr_id = id(&cr).to_string();
        for (arn, want) in [
            (format!("arn:aws:ec2:us-west-2:{OWNER}:capacity-reservation/{cr_id}"), "UnknownResourceException"),
            (format!("arn:aws:ec2:{REGION}:444455556666:capacity-reservation/{cr_id}"), "UnknownResourceException"),
            (
                format!("arn:aws:ec2:{REGION}:{OWNER}:capacity-reservation/cr-0123456789abcdef0"),
                "UnknownResourceException",
            ),
            (format!("arn:aws:ec2:{REGION}:{OWNER}:subnet/subnet-0123456789abcdef0"), "UnknownResourceException"),
            ("cr-0123456789abcdef0".to_string(), "MalformedArnException"),
            ("arn:aws:ec2".to_string(), "MalformedArnException"),
        ] {
            assert_eq!(code(create(&mut w, json!({ "name": "x", "resourceArns": [arn] }))), want, "{reading}: {arn}");
        }
        let e = create(
            &mut w,
            json!({ "name": "x", "resourceArns": ["arn:aws:ec2:us-east-1:111122223333:subnet/subnet-1"] }),
        )
        .unwrap_err();
        assert!(e.2.contains("the simulator shares EC2 capacity reservations only"), "{}", e.2);
        assert!(w.resource_shares.is_empty(), "{reading}");
    }
}

#[test]
fn a_block_that_ends_is_disassociated_and_an_active_one_can_be_shared() {
    let mut w = world("ram_association_delay_secs = 0");
    let cr = block(&mut w, json!({}));
    let v = create(&mut w, json!({ "name": "x", "resourceArns": [cr], "principals": ["111111111111"] })).unwrap();
    let arn = share_arn(&v);
    w.clock.set(chrono::DateTime::parse_from_rfc3339("2026-12-02T12:00:00Z").unwrap().into());
    assert_eq!(statuses(&mut w, &arn), ["ASSOCIATED", "ASSOCIATED"], "active");
    let active = block(&mut w, json!({ "start": "2026-12-02T11:30:00Z" }));
    assert!(create(&mut w, json!({ "name": "active", "resourceArns": [active] })).is_ok());
    w.clock.set(chrono::DateTime::parse_from_rfc3339("2026-12-03T11:30:00Z").unwrap().into());
    let a = associations(&mut w, &arn);
    assert_eq!(a[0], ("RESOURCE".into(), cr.clone(), "DISASSOCIATED".into(), Some(BLOCK_ENDED.into())));
    assert_eq!(a[1].2, "ASSOCIATED", "the principal stays");
    let one =
        call(&mut w, "/getresourceshareassociations", json!({ "associationType": "RESOURCE", "resourceArn": cr }))
            .unwrap();
    assert_eq!(
        one["resourceShareAssociations"][0]["lastUpdatedTime"].as_f64(),
        Some(1_796_297_400.0),
        "at the block's end"
    );
    // Cancelled by EC2 (through the control API): disassociated too.
    let other = block(&mut w, json!({ "start": "2026-12-04T11:30:00Z", "end": "2026-12-05T11:30:00Z" }));
    let v = create(&mut w, json!({ "name": "y", "resourceArns": [other] })).unwrap();
    let r = control::handle(
        &mut w,
        "POST",
        "/_sim/reservations/state",
        json!({ "reservation_id": id(&other), "state": "cancelled" }).to_string().as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert_eq!(statuses(&mut w, &share_arn(&v)), ["DISASSOCIATED"]);
}

#[test]
fn get_resource_shares_filters_by_arn_status_name_and_tags_and_pages() {
    let mut w = world("ram_listing_lag_secs = 0");
    let tagged = |team: &str, env: &str| json!([{"key": "team", "value": team}, {"key": "env", "value": env}]);
    for (name, tags) in
        [("a", tagged("ml", "prod")), ("b", tagged("ml", "dev")), ("c", tagged("web", "prod")), ("d", json!([]))]
    {
        create(&mut w, json!({ "name": name, "tags": tags })).unwrap();
    }
    let names = |w: &mut World, body: Value| -> Vec<String> {
        let v = call(w, "/getresourceshares", body).unwrap();
        v["resourceShares"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&mut w, json!({ "resourceOwner": "SELF" })), ["a", "b", "c", "d"]);
    assert_eq!(names(&mut w, json!({ "resourceOwner": "OTHER-ACCOUNTS" })), Vec::<String>::new());
    assert_eq!(
        names(&mut w, json!({ "resourceOwner": "SELF", "tagFilters": [{"tagKey": "team", "tagValues": ["ml"]}] })),
        ["a", "b"]
    );
    assert_eq!(
        names(
            &mut w,
            json!({ "resourceOwner": "SELF", "tagFilters": [{"tagKey": "team", "tagValues": ["ml"]}, {"tagKey": "env", "tagValues": ["prod"]}] })
        ),
        ["a"],
        "every filter"
    );
    assert_eq!(
        names(
            &mut w,
            json!({ "resourceOwner": "SELF", "tagFilters": [{"tagKey": "env", "tagValues": ["dev", "prod"]}] })
        ),
        ["a", "b", "c"],
        "any value"
    );
    assert_eq!(
        names(&mut w, json!({ "resourceOwner": "SELF", "tagFilters": [{"tagKey": "env"}] })),
        ["a", "b", "c"],
        "the key alone"
    );
    assert_eq!(names(&mut w, json!({ "resourceOwner": "SELF", "name": "c" })), ["c"]);
    let c = w.resource_shares[2].arn.clone();
    assert_eq!(names(&mut w, json!({ "resourceOwner": "SELF", "resourceShareArns": [c] })), ["c"]);
    let q = format!("resourceShareArn={c}");
    call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", &q, json!({})).unwrap();
    assert_eq!(names(&mut w, json!({ "resourceOwner": "SELF", "resourceShareStatus": "ACTIVE" })), ["a", "b", "d"]);
    assert_eq!(names(&mut w, json!({ "resourceOwner": "SELF", "resourceShareStatus": "DELETED" })), ["c"]);
    assert!(call_in(&mut w, "us-west-2", "POST", "/getresourceshares", "", json!({ "resourceOwner": "SELF" })).unwrap()["resourceShares"].as_array().unwrap().is_empty(), "per region");
    // Paging: two a page, the token tied to the request.
    let p1 = call(&mut w, "/getresourceshares", json!({ "resourceOwner": "SELF", "maxResults": 2 })).unwrap();
    let token = p1["nextToken"].as_str().unwrap().to_string();
    let p2 =
        call(&mut w, "/getresourceshares", json!({ "resourceOwner": "SELF", "maxResults": 2, "nextToken": token }))
            .unwrap();
    assert_eq!(
        (p1["resourceShares"].as_array().unwrap().len(), p2["resourceShares"].as_array().unwrap().len()),
        (2, 2)
    );
    assert!(p2.get("nextToken").is_none());
    assert_eq!(
        code(call(&mut w, "/getresourceshares", json!({ "resourceOwner": "SELF", "name": "a", "nextToken": token }))),
        "InvalidNextTokenException"
    );
    for bad in [
        json!({}),
        json!({ "resourceOwner": "ME" }),
        json!({ "resourceOwner": "SELF", "maxResults": 0 }),
        json!({ "resourceOwner": "SELF", "maxResults": 501 }),
        json!({ "resourceOwner": "SELF", "resourceShareStatus": "GONE" }),
        json!({ "resourceOwner": "SELF", "tagFilters": [{"tagValues": ["x"]}] }),
        json!({ "resourceOwner": "SELF", "permissionArn": "arn:aws:ram::aws:permission/x" }),
        json!({ "resourceOwner": 5 }),
    ] {
        assert_eq!(code(call(&mut w, "/getresourceshares", bad.clone())), "InvalidParameterException", "{bad}");
    }
    let unknown = format!("arn:aws:ram:{REGION}:{OWNER}:resource-share/nope");
    assert_eq!(
        code(call(&mut w, "/getresourceshares", json!({ "resourceOwner": "SELF", "resourceShareArns": [unknown] }))),
        "UnknownResourceException"
    );
}

#[test]
fn get_resource_share_associations_checks_its_parameters() {
    let mut w = world("");
    for bad in [
        json!({}),
        json!({ "associationType": "SOURCE" }),
        json!({ "associationType": "PRINCIPAL", "resourceArn": "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1" }),
        json!({ "associationType": "RESOURCE", "principal": "111111111111" }),
        json!({ "associationType": "RESOURCE", "associationStatus": "DONE" }),
    ] {
        assert_eq!(
            code(call(&mut w, "/getresourceshareassociations", bad.clone())),
            "InvalidParameterException",
            "{bad}"
        );
    }
    let e = call(
        &mut w,
        "/getresourceshareassociations",
        json!({ "associationType": "RESOURCE", "resourceShareArns": ["x"] }),
    );
    assert_eq!(code(e), "MalformedArnException");
    let v = call(&mut w, "/getresourceshareassociations", json!({ "associationType": "RESOURCE" })).unwrap();
    assert_eq!(v, json!({ "resourceShareAssociations": [] }));
}

#[test]
fn associate_and_disassociate_change_a_share() {
    let mut w = world("");
    let a = block(&mut w, json!({}));
    let b = block(&mut w, json!({}));
    let v = create(&mut w, json!({ "name": "grow", "resourceArns": [a] })).unwrap();
    let arn = share_arn(&v);
    advance(&mut w, 10);
    let added = call(&mut w, "/associateresourceshare", json!({ "resourceShareArn": arn, "resourceArns": [a, b], "principals": ["222222222222"], "clientToken": "add-1" })).unwrap();
    let got: Vec<(&str, &str)> = added["resourceShareAssociations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["associatedEntity"].as_str().unwrap(), x["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [(a.as_str(), "ASSOCIATED"), (b.as_str(), "ASSOCIATING"), ("222222222222", "ASSOCIATING")],
        "one already there"
    );
    assert_eq!(added["clientToken"], "add-1");
    let again = json!({ "resourceShareArn": arn, "resourceArns": [a, b], "principals": ["222222222222"], "clientToken": "add-1" });
    assert_eq!(call(&mut w, "/associateresourceshare", again).unwrap(), added);
    advance(&mut w, 10);
    let removed =
        call(&mut w, "/disassociateresourceshare", json!({ "resourceShareArn": arn, "resourceArns": [a] })).unwrap();
    assert_eq!(removed["resourceShareAssociations"][0]["status"], "DISASSOCIATING");
    advance(&mut w, 10);
    assert_eq!(statuses(&mut w, &arn), ["DISASSOCIATED", "ASSOCIATED", "ASSOCIATED"]);
    assert_eq!(
        code(call(&mut w, "/disassociateresourceshare", json!({ "resourceShareArn": arn, "resourceArns": [a] }))),
        "UnknownResourceException"
    );
    // Associated anew after it went.
    call(&mut w, "/associateresourceshare", json!({ "resourceShareArn": arn, "resourceArns": [a] })).unwrap();
    assert_eq!(statuses(&mut w, &arn), ["DISASSOCIATED", "ASSOCIATED", "ASSOCIATING", "ASSOCIATED"]);
    assert_eq!(
        code(call(&mut w, "/associateresourceshare", json!({ "resourceShareArn": arn }))),
        "InvalidParameterException"
    );
    let q = format!("resourceShareArn={arn}");
    call_in(&mut w, REGION, "DELETE", "/deleteresourceshare", &q, json!({})).unwrap();
    assert_eq!(
        code(call(
            &mut w,
            "/associateresourceshare",
            json!({ "resourceShareArn": arn, "principals": ["111111111111"] })
        )),
        "InvalidStateTransitionException"
    );
}

#[test]
fn tags_are_added_replaced_removed_and_checked() {
    let mut w = world("");
    let arn = share_arn(&create(&mut w, json!({ "name": "t", "tags": [{"key": "a", "value": "1"}] })).unwrap());
    assert_eq!(
        call(
            &mut w,
            "/tagresource",
            json!({ "resourceShareArn": arn, "tags": [{"key": "a", "value": "2"}, {"key": "b"}] })
        )
        .unwrap(),
        json!({})
    );
    assert_eq!(w.resource_shares[0].tags, [("a".to_string(), "2".to_string()), ("b".to_string(), String::new())]);
    call(&mut w, "/untagresource", json!({ "resourceShareArn": arn, "tagKeys": ["a", "zzz"] })).unwrap();
    assert_eq!(w.resource_shares[0].tags, [("b".to_string(), String::new())]);
    assert_eq!(
        code(call(
            &mut w,
            "/tagresource",
            json!({ "resourceShareArn": arn, "tags": [{"key": "aws:x", "value": "1"}] })
        )),
        "TagPolicyViolationException"
    );
    assert_eq!(
        code(create(&mut w, json!({ "name": "t", "tags": [{"key": "AWS:x", "value": "1"}] }))),
        "TagPolicyViolationException"
    );
    let many: Vec<Value> = (0..51).map(|i| json!({"key": format!("k{i}"), "value": "v"})).collect();
    assert_eq!(
        code(call(&mut w, "/tagresource", json!({ "resourceShareArn": arn, "tags": many }))),
        "TagLimitExceededException"
    );
    assert_eq!(
        code(call(&mut w, "/tagresource", json!({ "resourceShareArn": arn, "tags": [{"value": "v"}] }))),
        "InvalidParameterException"
    );
    assert_eq!(
        code(call(&mut w, "/tagresource", json!({ "resourceArn": "arn:aws:ram::aws:permission/x", "tags": [] }))),
        "InvalidParameterException"
    );
}

#[test]
fn create_checks_what_it_does_not_model_and_its_name() {
    let mut w = world("");
    for bad in [
        json!({}),
        json!({ "name": " " }),
        json!({ "name": "x", "permissionArns": ["arn:aws:ram::aws:permission/AWSRAMDefaultPermissionCapacityReservation"] }),
        json!({ "name": "x", "sources": ["111111111111"] }),
        json!({ "name": "x", "resourceArns": "not a list" }),
    ] {
        assert_eq!(code(create(&mut w, bad.clone())), "InvalidParameterException", "{bad}");
    }
    let r = handle(&mut w, REGION, "POST", "/createresourceshare", "", b"{not json");
    assert_eq!((r.status, r.error_type.as_deref()), (400, Some("InvalidParameterException")));
}

#[test]
fn unknown_operations_answer_404_and_the_state_lists_every_share() {
    let mut w = world("");
    for (method, path) in
        [("POST", "/listresources"), ("GET", "/createresourceshare"), ("POST", "/deleteresourceshare")]
    {
        let r = handle(&mut w, REGION, method, path, "", b"{}");
        assert_eq!((r.status, r.error_type.as_deref()), (404, Some("UnknownOperationException")), "{method} {path}");
    }
    assert!(w.calls.is_empty(), "not counted");
    let cr = block(&mut w, json!({}));
    create(&mut w, json!({ "name": "s", "resourceArns": [cr], "principals": ["111111111111"], "tags": [{"key": "k", "value": "v"}] })).unwrap();
    let r = control::handle(&mut w, "GET", "/_sim/ram/shares", b"");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    let s = &v["shares"][0];
    assert_eq!(
        (&s["name"], &s["region"], &s["status"], &s["tags"]),
        (&json!("s"), &json!(REGION), &json!("ACTIVE"), &json!({"k": "v"}))
    );
    let a = &s["associations"][0];
    assert_eq!(
        (&a["association_type"], &a["status"], &a["reservation_id"]),
        (&json!("RESOURCE"), &json!("ASSOCIATING"), &json!(id(&cr)))
    );
    assert_eq!(control::handle(&mut w, "POST", "/_sim/ram/shares", b"").status, 405);
}

#[test]
fn the_organization_is_a_scenario_table_and_a_control_endpoint() {
    let text = "[organization]\nid = \"o-exampleorg1\"\nmanagement_account = \"123456789012\"\naccounts = [\"333333333333\"]\n\
                ous = [{ id = \"ou-ab12-research1\", accounts = [\"333333333333\", \"111122223333\"] }]";
    let mut w = World::new(Scenario::parse(text).unwrap());
    assert_eq!(w.organization.arn(OWNER), "arn:aws:organizations::123456789012:organization/o-exampleorg1");
    assert_eq!(w.organization.ous[0].name, "");
    for bad in [
        "[organization]\nid = \"x\"",
        "[organization]\naccounts = [\"1\"]",
        "[organization]\nous = [{ id = \"ou-ab12-research1\", accounts = [\"444444444444\"] }]",
        "[organization]\nmembers = []",
    ] {
        assert!(Scenario::parse(bad).is_err(), "{bad}");
    }
    let r = control::handle(&mut w, "GET", "/_sim/ram/organization", b"");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!((&v["id"], &v["limited_billing_history"]), (&json!("o-exampleorg1"), &json!(false)));
    for bad in [r#"{"id": "o-1"}"#, r#"{"nope": 1}"#, r#"{"accounts": "x"}"#, "[]"] {
        let r = control::handle(&mut w, "POST", "/_sim/ram/organization", bad.as_bytes());
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    assert_eq!(w.organization.id, "o-exampleorg1", "a refused change changes nothing");
    // The default, and the two RAM settings with theirs.
    let d = World::new(Scenario::parse("").unwrap());
    assert_eq!((d.organization.id.as_str(), d.organization.accounts.len()), ("o-capblock01", 2));
    assert_eq!(
        (d.behaviour.ram_refusal, d.behaviour.ram_association_delay_secs, d.behaviour.ram_listing_lag_secs),
        (crate::scenario::RamRefusal::FailedAssociation, 10, 60)
    );
    for bad in [
        "ram_refusal = \"errors\"",
        "ram_refusal = \"failed-association\"",
        "ram_association_delay_secs = 86401",
        "ram_association_delay_secs = -1",
        "ram_listing_lag_secs = 86401",
        "ram_listing_lag_secs = -1",
        "ram_listing_lag_secs = \"60\"",
    ] {
        assert!(Scenario::parse(&format!("[behaviour]\n{bad}")).is_err(), "{bad}");
    }
    let r = control::handle(
        &mut w,
        "POST",
        "/_sim/behaviour",
        br#"{"ram_refusal": "error", "ram_association_delay_secs": 0}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(w.behaviour.ram_refusal, crate::scenario::RamRefusal::Error);
}
