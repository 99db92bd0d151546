//! `share_with` end to end: the tracker shares a rule's block through RAM (served by the
//! simulator, which plays EC2's rules for sharing Capacity Blocks) once EC2 has it scheduled,
//! never before and never twice, and deletes the share at the block's end; each of the record's
//! open readings (a refused block or principal: an error, or a failed association; associations
//! that take a while) is played, and capblock says what happened under each.

use capblock_shared::domain::lifecycle::BlockState;
use capblock_tests::{Rig, RuleToml, ScenarioToml, T0};
use serde_json::Value;

/// In the simulated Organization (the simulator's default): two member accounts and their OU.
const MEMBER_A: &str = "111111111111";
const MEMBER_B: &str = "222222222222";
const OU: &str = "arn:aws:organizations::111122223333:ou/o-capblock01/ou-cb01-mlteams1";
/// Not in it.
const OUTSIDER: &str = "999999999999";

async fn rig(name: &str, behaviour: &[&str]) -> Rig {
    rig_seeded(name, 7, behaviour).await
}

/// [`rig`] with its own seed: the simulator names its reservations from it, and a member
/// account's bus is shared by every test that shares with it.
async fn rig_seeded(name: &str, seed: u64, behaviour: &[&str]) -> Rig {
    let mut scenario = ScenarioToml::new(seed, T0).payment("succeed", Some(3)).p5("us-east-1", &[2], "3.00");
    for b in behaviour {
        scenario = scenario.behaviour(b);
    }
    let mut h =
        Rig::start(name, &scenario.build(), capblock_tests::quick_timeouts(), T0.parse().unwrap(), "capblock-test")
            .await;
    h.track.regions = vec!["us-east-1".parse().unwrap()];
    h
}

fn rule(share_with: &[&str]) -> capblock_shared::domain::rule::Rule {
    let list = share_with.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(", ");
    RuleToml::p5("shared")
        .extra(&format!("share_with = [{list}]\ntags = {{ team = \"vision\" }}"))
        .rule(T0.parse().unwrap())
}

/// Every share the simulator holds, with its associations as they show now.
async fn shares(h: &Rig) -> Vec<Value> {
    let v = h.sim.control("GET", "/_sim/ram/shares", "").await;
    v.get("shares").and_then(Value::as_array).cloned().unwrap_or_else(|| v.as_array().cloned().unwrap_or_default())
}

fn status(share: &Value) -> &str {
    share["status"].as_str().unwrap_or_default()
}

/// The alerts of the block's share order, by their event type (`action-done`, ...).
fn share_alerts(alerts: &[capblock_tests::Published]) -> Vec<String> {
    alerts
        .iter()
        .filter(|a| a.body["metadata"]["summary"].as_str().is_some_and(|s| s.contains("AWS RAM")))
        .map(|a| a.body["metadata"]["eventType"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Three hours on (the payment has gone through) a tracker run sees block `id` scheduled; then
/// `runs` more runs, `minutes` apart, each without an error.
async fn scheduled_then_tracked(h: &Rig, id: &str, runs: usize, minutes: i64) {
    h.advance_hours(3).await;
    h.track().await;
    assert_eq!(h.block(id).await.state, BlockState::Scheduled);
    for _ in 0..runs {
        h.advance_minutes(minutes).await;
        let report = h.track().await;
        assert!(report.errors.is_empty(), "{report:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_is_shared_once_when_scheduled_and_unshared_at_its_end() {
    let h = rig("share-life", &[]).await;
    let id = h.buy(&rule(&[MEMBER_A, OU])).await;
    // Payment pending: not shared (EC2 shares scheduled or active blocks only).
    for _ in 0..2 {
        h.track().await;
        h.advance_minutes(30).await;
    }
    assert_eq!(h.block(&id).await.state, BlockState::PaymentPending);
    assert!(shares(&h).await.is_empty(), "nothing shared before the block is scheduled");

    // Scheduled: one share; RAM associates it within seconds (the simulator's 10 s reading):
    // capblock says it is shared only once RAM has.
    scheduled_then_tracked(&h, &id, 3, 5).await;
    let all = shares(&h).await;
    assert_eq!(all.len(), 1, "one share per block, however many runs: {all:#?}");
    let share = &all[0];
    assert_eq!(status(share), "ACTIVE");
    let text = share.to_string();
    for needle in [id.as_str(), MEMBER_A, OU, "capblock:reservation", "capblock-test", "ASSOCIATED"] {
        assert!(text.contains(needle), "{needle} missing from {share:#}");
    }
    let alerts = h.aws.alerts().await;
    assert_eq!(share_alerts(&alerts), ["action-done"], "announced once");
    let events = h.aws.events().await;
    let shared: Vec<&Value> = events.iter().filter(|e| e["detail-type"] == "Block Shared").collect();
    assert_eq!(shared.len(), 1, "{events:#?}");
    capblock_tests::validate_events(&events).await;
    let d = &shared[0]["detail"];
    assert_eq!(d["owner_account"], "111122223333", "what a consumer's Karpenter selects by");
    assert_eq!(d["tags"]["team"], "vision");
    assert_eq!(d["shared_with"].as_array().unwrap().len(), 2);

    // The block's end (12-04 11:30): the share is deleted, once.
    h.advance_hours(80).await;
    h.track().await;
    assert!(matches!(h.block(&id).await.state, BlockState::Expired), "{:?}", h.block(&id).await.state);
    h.advance_minutes(5).await;
    h.track().await;
    let all = shares(&h).await;
    assert_eq!(all.len(), 1);
    assert_eq!(status(&all[0]), "DELETED", "{all:#?}");
    assert_eq!(h.sim.state().await["calls"]["ram:CreateResourceShare"], 1);
    assert_eq!(h.sim.state().await["calls"]["ram:DeleteResourceShare"], 1);
}

/// An account with a limited billing history cannot share a block (user guide): under each
/// reading of how RAM refuses it (an error from CreateResourceShare, or a share whose resource
/// association fails), capblock says so once, with RAM's reason, keeps no useless share, and
/// tries again on later runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_ram_refuses_is_said_once_under_either_reading() {
    for reading in ["failed_association", "error"] {
        let h = rig(
            &format!("share-no-{reading}"),
            &[&format!("ram_refusal = \"{reading}\""), "ram_association_delay_secs = 0"],
        )
        .await;
        h.sim.control("POST", "/_sim/ram/organization", r#"{"limited_billing_history": true}"#).await;
        let id = h.buy(&rule(&[MEMBER_B])).await;
        h.advance_hours(3).await;
        h.track().await;
        h.advance_minutes(5).await;
        h.track().await;
        assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
        let alerts = h.aws.alerts().await;
        assert_eq!(share_alerts(&alerts), ["action-failed"], "{reading}: announced once");
        let failed = alerts.iter().find(|a| a.body["metadata"]["eventType"] == "action-failed").unwrap();
        let text = failed.body["content"]["description"].as_str().unwrap();
        assert!(text.to_lowercase().contains("billing"), "{reading}: RAM's reason is passed on: {text}");
        let active: Vec<Value> = shares(&h).await.into_iter().filter(|s| status(s) == "ACTIVE").collect();
        assert!(active.is_empty(), "{reading}: no useless share is kept: {active:#?}");
        assert!(h.aws.events().await.iter().all(|e| e["detail-type"] != "Block Shared"), "{reading}");

        // The account's history allows it later: the next run shares the block.
        h.sim.control("POST", "/_sim/ram/organization", r#"{"limited_billing_history": false}"#).await;
        h.advance_minutes(5).await;
        h.track().await;
        let active: Vec<Value> = shares(&h).await.into_iter().filter(|s| status(s) == "ACTIVE").collect();
        assert_eq!(active.len(), 1, "{reading}: {active:#?}");
        assert_eq!(share_alerts(&h.aws.alerts().await), ["action-done"], "{reading}");
    }
}

/// A principal outside the Organization: RAM refuses the share (`allowExternalPrincipals` is
/// false, as EC2 shares blocks inside the Organization only); said once with RAM's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_outside_the_organization_is_refused_and_said_once() {
    let h = rig("share-outsider", &["ram_association_delay_secs = 0"]).await;
    let id = h.buy(&rule(&[MEMBER_B, OUTSIDER])).await;
    h.advance_hours(3).await;
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
    let alerts = h.aws.alerts().await;
    assert_eq!(share_alerts(&alerts), ["action-failed"]);
    let failed = alerts.iter().find(|a| a.body["metadata"]["eventType"] == "action-failed").unwrap();
    let text = failed.body["content"]["description"].as_str().unwrap();
    assert!(text.contains(OUTSIDER), "RAM's reason is passed on: {text}");
    h.advance_minutes(5).await;
    h.track().await;
    assert!(share_alerts(&h.aws.alerts().await).is_empty(), "said once, retried quietly");
    assert!(shares(&h).await.iter().all(|s| status(s) != "ACTIVE"));
}

/// A rule whose hand-off runs in the member account it shares with: the block's parameter is
/// published there (through the member stack's role, assumed with moto's STS, which keeps each
/// account's SSM apart), not in the buying account; the share itself stays the owner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hand_off_of_a_shared_block_runs_in_the_consumer_account() {
    use capblock_shared::domain::handoff::parameter_name;
    use capblock_shared::ports::{AccountHands, Parameters};
    let h = rig("share-handoff", &["ram_association_delay_secs = 0"]).await;
    let rule = RuleToml::p5("consumed")
        .extra(&format!(
            "share_with = [\"{MEMBER_A}\"]\nhandoff_account = \"{MEMBER_A}\"\n[[actions]]\nkind = \"publish_parameter\""
        ))
        .rule(T0.parse().unwrap());
    let id = h.buy(&rule).await;
    h.advance_hours(3).await;
    h.track().await;
    assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
    let region: capblock_shared::domain::ids::Region = "us-east-1".parse().unwrap();
    let name = parameter_name("consumed");
    let there = h.accounts.sides(MEMBER_A).await.unwrap();
    let value = there.parameters.parameter(&region, &name).await.unwrap().expect("published in the member account");
    assert!(value.contains(&id), "{value}");
    assert_eq!(h.ssm.parameter(&region, &name).await.unwrap(), None, "nothing in the buying account");
    let alerts = h.aws.alerts().await;
    let done: Vec<String> = alerts
        .iter()
        .filter(|a| a.body["metadata"]["eventType"] == "action-done")
        .map(|a| a.body["content"]["description"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(done.iter().any(|d| d.contains(&format!("in account {MEMBER_A}"))), "{done:#?}");
    assert!(shares(&h).await.iter().any(|s| status(s) == "ACTIVE"), "the share is the owner's");
}

/// A shared block's events go to the consumer account's default bus too (its member stack's bus
/// policy lets the capacity account put them there; the local stack's EventBridge delivers a
/// put to another account's bus as that bus's policy allows), each once, as on capblock's bus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_blocks_events_reach_the_consumer_accounts_bus_once() {
    let h = rig_seeded("share-events", 71, &["ram_association_delay_secs = 0"]).await;
    let id = h.buy(&rule(&[MEMBER_A])).await;
    // The member account on moto, through an assumed role: its queue, its default bus's rule for
    // this block's events, and the bus policy member.yaml makes (the capacity account may put
    // events of source capblock).
    let member = capblock_shared::aws::accounts::as_role(
        &h.aws.sdk,
        &format!("arn:aws:iam::{MEMBER_A}:role/capblock-handoff-capblock-test"),
        "capblock-test",
    )
    .await;
    let (queue, queue_arn) = capblock_tests::queue(&member, &format!("consumer-{id}")).await;
    let eb = aws_sdk_eventbridge::Client::new(&member);
    let pattern = format!(r#"{{"source": ["capblock"], "detail": {{"reservation_id": ["{id}"]}}}}"#);
    eb.put_rule().name(format!("consumer-{id}")).event_pattern(pattern).send().await.unwrap();
    eb.put_targets()
        .rule(format!("consumer-{id}"))
        .targets(aws_sdk_eventbridge::types::Target::builder().id("queue").arn(queue_arn).build().unwrap())
        .send()
        .await
        .unwrap();
    let policy = format!(
        r#"{{"Version": "2012-10-17", "Statement": [{{"Sid": "capblock-capblock-test", "Effect": "Allow",
            "Principal": {{"AWS": "arn:aws:iam::123456789012:root"}}, "Action": "events:PutEvents",
            "Resource": "arn:aws:events:us-east-1:{MEMBER_A}:event-bus/default",
            "Condition": {{"StringEquals": {{"events:source": "capblock"}}}}}}]}}"#
    );
    eb.put_permission().policy(policy).send().await.unwrap();

    h.advance_hours(3).await;
    for _ in 0..3 {
        h.track().await;
        h.advance_minutes(5).await;
    }
    let sqs = aws_sdk_sqs::Client::new(&member);
    let mut got: Vec<Value> = Vec::new();
    loop {
        let r = sqs.receive_message().queue_url(&queue).max_number_of_messages(10).send().await.unwrap();
        let msgs = r.messages.unwrap_or_default();
        if msgs.is_empty() {
            break;
        }
        for m in msgs {
            got.push(serde_json::from_str(m.body().unwrap()).unwrap());
            sqs.delete_message().queue_url(&queue).receipt_handle(m.receipt_handle().unwrap()).send().await.unwrap();
        }
    }
    let types: Vec<&str> = got.iter().filter_map(|e| e["detail-type"].as_str()).collect();
    assert_eq!(types.iter().filter(|t| **t == "Block Shared").count(), 1, "{got:#?}");
    let ours: Vec<Value> = h.aws.events().await;
    for t in &types {
        assert!(ours.iter().any(|e| e["detail-type"] == *t), "{t} on the consumer's bus but not capblock's");
    }
    capblock_tests::validate_events(&got).await;
}

/// The shares the simulator holds that are not deleted.
async fn active_shares(h: &Rig) -> Vec<Value> {
    shares(h).await.into_iter().filter(|s| status(s) == "ACTIVE").collect()
}

/// RAM's listing is eventually consistent, and the record does not say how long a new share
/// takes to be listed: under each reading (listed at once, or missing from GetResourceShares
/// for ten minutes while the tracker runs every minute) one block gets exactly one share,
/// however many runs it takes RAM to associate it, and capblock says so once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_share_per_block_whether_rams_listing_lags_or_not() {
    for lag in [0, 600] {
        let h = rig(&format!("share-lag-{lag}"), &[&format!("ram_listing_lag_secs = {lag}")]).await;
        let id = h.buy(&rule(&[MEMBER_A])).await;
        scheduled_then_tracked(&h, &id, 4, 1).await;
        let all = shares(&h).await;
        assert_eq!(all.len(), 1, "lag {lag}: one share for one block after 5 runs: {all:#?}");
        assert_eq!(status(&all[0]), "ACTIVE", "lag {lag}");
        assert_eq!(h.sim.state().await["calls"]["ram:CreateResourceShare"], 1, "lag {lag}");
        let alerts = h.aws.alerts().await;
        assert_eq!(share_alerts(&alerts), ["action-done"], "lag {lag}: shared, said once, no failure");
        let events = h.aws.events().await;
        let shared: Vec<&Value> = events.iter().filter(|e| e["detail-type"] == "Block Shared").collect();
        assert_eq!(shared.len(), 1, "lag {lag}: {events:#?}");
        assert_eq!(shared[0]["detail"]["share_arn"], all[0]["resource_share_arn"], "lag {lag}");
    }
}

/// A run that died after CreateResourceShare made the share and before capblock recorded its
/// ARN, while RAM's listing does not show the share yet: the retry sends the same client token
/// (the same for the same block and attempt), RAM answers the same share, and the block has
/// one share, not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_crash_gets_the_same_share_from_its_client_token() {
    use capblock_shared::domain::share;
    use capblock_shared::ports::{ShareRequest, Shares};
    let h = rig("share-crash-token", &["ram_listing_lag_secs = 600"]).await;
    let rule = rule(&[MEMBER_A]);
    let id = h.buy(&rule).await;
    h.advance_hours(3).await;
    // What the dead run sent, as the tracker's first attempt sends it; its answer was lost.
    let stack = "capblock-test";
    let block = h.block(&id).await;
    let dead = ShareRequest {
        name: share::share_name(stack, &id),
        reservation_arn: block.arn.clone().expect("EC2 gave the reservation's ARN"),
        principals: rule.share_with.clone(),
        tags: share::share_tags(stack, &rule.id, &id).iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        client_token: share::share_client_token(stack, &id, 0),
    };
    let made = h.shares.create(&block.region, &dead).await.unwrap();
    for _ in 0..3 {
        h.track().await;
        h.advance_minutes(1).await;
    }
    assert_eq!(h.block(&id).await.state, BlockState::Scheduled);
    let all = active_shares(&h).await;
    assert_eq!(all.len(), 1, "the retry got the dead run's share back: {all:#?}");
    assert_eq!(all[0]["resource_share_arn"], made.as_str());
    assert_eq!(h.sim.state().await["calls"]["ram:CreateResourceShare"], 2, "the retry did call, with the token");
    let events = h.aws.events().await;
    let shared: Vec<&Value> = events.iter().filter(|e| e["detail-type"] == "Block Shared").collect();
    assert_eq!(shared.len(), 1, "{events:#?}");
    assert_eq!(shared[0]["detail"]["share_arn"], made.as_str());
}

/// A share deleted already (by a run that died before it recorded the deletion, or by a person)
/// is deleted again without an error: capblock deletes its shares by the ARN it recorded, and
/// RAM still lists a deleted share (`DELETED`) and refuses to delete it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_deleted_already_is_deleted_again_without_an_error() {
    use capblock_shared::domain::share;
    use capblock_shared::ports::{ShareRequest, Shares};
    let h = rig("share-delete-twice", &[]).await;
    let rule = rule(&[MEMBER_A]);
    let id = h.buy(&rule).await;
    h.advance_hours(3).await;
    let block = h.block(&id).await;
    let request = ShareRequest {
        name: share::share_name("capblock-test", &id),
        reservation_arn: block.arn.clone().unwrap(),
        principals: rule.share_with.clone(),
        tags: Vec::new(),
        client_token: share::share_client_token("capblock-test", &id, 0),
    };
    let arn = h.shares.create(&block.region, &request).await.unwrap();
    h.shares.delete(&block.region, &arn).await.unwrap();
    h.shares.delete(&block.region, &arn).await.expect("deleted already: done");
    let all = shares(&h).await;
    assert_eq!((all.len(), status(&all[0])), (1, "DELETED"), "{all:#?}");
}
