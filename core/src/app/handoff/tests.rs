//! The action runner against in-memory sides (the local-stack tests in `tests/` run the same
//! workflow on moto's SSM, Auto Scaling, Resource Groups and EKS).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use chrono::{Duration, TimeZone};

use super::*;
use crate::domain::block::example;
use crate::domain::handoff::tests::{all, target};
use crate::domain::handoff::{NodegroupScaled, NodegroupScaling, Point, ReservationPool, at_point, due};
use crate::domain::lifecycle::BlockState;
use crate::domain::share::{Association, SharePrincipal};
use crate::memory::{Call, Failure, HookVerdict, Hooked, MemoryAccounts, MemoryHandoff, MemoryTable, Script};
use crate::ports::ShareRequest;

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
}

/// The table in memory, its open blocks given; before it, a thread whose notices cannot be
/// written while `failing` names it (a store error that concerns one block).
type Memory = Hooked<MemoryTable, Script>;
type Failing = Arc<Mutex<Option<String>>>;

fn memory_failing(blocks: Vec<Block>, failing: &Failing) -> Memory {
    let fails = |failing: Failing| {
        move |call: &Call<'_>| match call.arg::<Notice>() {
            Some(n) if failing.lock().unwrap().as_deref() == Some(n.thread.as_str()) => {
                HookVerdict::Fail(Failure::Unavailable("InternalServerError".into()))
            }
            _ => HookVerdict::Proceed,
        }
    };
    let script = Script::new().on("enqueue", fails(failing.clone())).on("put_record", fails(failing.clone()));
    Hooked::new(MemoryTable::default().with_blocks(blocks), script)
}

fn memory(blocks: Vec<Block>) -> Memory {
    memory_failing(blocks, &Failing::default())
}

/// What the hand-off said, as the table holds it.
trait Said {
    /// Every notice, in the order written.
    fn said(&self) -> Vec<Notice>;

    /// Every notice for `topic`, in order.
    fn on(&self, topic: Topic) -> Vec<Notice> {
        self.said().into_iter().filter(|n| n.topic == topic).collect()
    }

    /// The body of the notice whose key ends with `suffix` (the test knows there is one).
    fn body_ending(&self, suffix: &str) -> String {
        let found = self.said().into_iter().find(|n| n.milestone.ends_with(suffix));
        found.map(|n| n.message.body).unwrap_or_else(|| panic!("no notice ending {suffix:?}"))
    }

    fn alerts(&self) -> Vec<String> {
        self.on(Topic::Alerts).into_iter().map(|n| n.milestone.to_string()).collect()
    }
}

impl Said for Memory {
    fn said(&self) -> Vec<Notice> {
        let writes = self.inner.writes();
        let written = |n: &Notice| {
            let (queued, recorded) = (format!("enqueue {}", n.id()), format!("put_record {}", n.id()));
            writes.iter().position(|w| *w == queued || *w == recorded)
        };
        let mut said: Vec<Notice> = self.inner.notices().into_iter().map(|(n, _)| n).collect();
        said.sort_by_key(written);
        said
    }
}

/// An account RAM refuses (outside the Organization).
const OUTSIDER: &str = "999999999999";

/// The hand-off's sides in memory, as these tests meet them: instances i-1 and i-2 in every
/// block, i-2's commands failing, [`OUTSIDER`] outside the Organization.
type Aws = MemoryHandoff;

fn sides() -> Aws {
    MemoryHandoff::default().with_instances(["i-1", "i-2"]).with_failing_commands_on("i-2").with_outsider(OUTSIDER)
}

fn action_runner(aws: &Aws) -> ActionRunner<'_> {
    ActionRunner {
        parameters: aws,
        groups: aws,
        commands: aws,
        instances: aws,
        reservation_groups: aws,
        nodegroups: aws,
        shares: aws,
        accounts: None,
    }
}

/// The settings of stack `prod` in `mode`.
fn stack(mode: Mode) -> StackSettings {
    StackSettings { name: "prod".into(), mode, account_budget: None, team_budgets: Default::default() }
}

#[tokio::test]
async fn each_action_runs_once_under_duplicate_triggers_and_runs() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    let planned = at_point(&all(), &target(), Point::Active, false);
    assert_eq!(enqueue_actions(&outbox, &planned, now).await.unwrap(), 2);
    // The event and the tracker both see the block active; and a retried invocation.
    assert_eq!(enqueue_actions(&outbox, &planned, now).await.unwrap(), 0);
    let first = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(first.done.len(), 2, "{first:?}");
    let again = action_runner(&aws).run(&outbox, now + Duration::minutes(5)).await.unwrap();
    assert_eq!(again, ActionReport::default());
    assert_eq!(enqueue_actions(&outbox, &planned, now).await.unwrap(), 0, "done stays done");
    assert_eq!(*aws.capacity.lock().unwrap(), [("trainers".to_string(), 2)]);
    let value = aws.parameters.lock().unwrap()["/capblock/p5/current"].clone();
    assert!(value.contains("cr-0123456789abcdef0"), "{value}");
    let mut alerts = outbox.alerts();
    alerts.sort();
    assert_eq!(alerts, ["action-parameter-end-20261211T1130Z-done", "action-scale-up-trainers-done"]);
}

#[tokio::test]
async fn dry_run_announces_and_touches_nothing() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    enqueue_actions(&outbox, &at_point(&all(), &target(), Point::Active, true), now).await.unwrap();
    enqueue_actions(&outbox, &due(&all(), &target(), t(11, 10, 40), true), now).await.unwrap();
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 4, "{report:?}");
    assert!(aws.parameters.lock().unwrap().is_empty());
    assert!(aws.capacity.lock().unwrap().is_empty());
    assert!(aws.sent.lock().unwrap().is_empty());
    assert_eq!(outbox.alerts().len(), 4);
}

#[tokio::test]
async fn a_failing_action_is_announced_once_and_retried_until_it_succeeds() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    enqueue_actions(&outbox, &at_point(&all(), &target(), Point::Active, false), now).await.unwrap();
    aws.fail(true);
    for run in 0..3 {
        // Each run past the previous one's lease.
        let report = action_runner(&aws).run(&outbox, now + Duration::minutes(5 * run)).await.unwrap();
        assert_eq!(report.failed.len(), 2, "{report:?}");
    }
    let mut alerts = outbox.alerts();
    alerts.sort();
    assert_eq!(alerts, ["action-parameter-end-20261211T1130Z-failed", "action-scale-up-trainers-failed"]);
    aws.fail(false);
    let report = action_runner(&aws).run(&outbox, now + Duration::minutes(20)).await.unwrap();
    assert_eq!(report.done.len(), 2);
    assert_eq!(*aws.capacity.lock().unwrap(), [("trainers".to_string(), 2)]);
    assert_eq!(outbox.alerts().len(), 4, "failed once and done once, per action");
}

#[tokio::test]
async fn an_action_still_failing_a_day_after_the_end_is_dropped_once() {
    let (outbox, aws) = (memory(vec![]), sides());
    let end = target().block.end;
    enqueue_actions(&outbox, &at_point(&all(), &target(), Point::Ended, false), end).await.unwrap();
    aws.fail(true);
    let before = action_runner(&aws).run(&outbox, end + Duration::hours(23)).await.unwrap();
    assert_eq!(before.failed.len(), 2, "{before:?}");
    let last = action_runner(&aws).run(&outbox, end + Duration::hours(24)).await.unwrap();
    assert_eq!(last.failed.len(), 2, "{last:?}");
    let after = action_runner(&aws).run(&outbox, end + Duration::hours(25)).await.unwrap();
    assert_eq!(after, ActionReport::default(), "dropped: no longer tried");
    let given_up = outbox.alerts().into_iter().filter(|a| a.ends_with("-given-up")).count();
    assert_eq!(given_up, 2);
}

#[tokio::test]
async fn a_leased_action_is_left_to_the_run_holding_it() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    enqueue_actions(&outbox, &at_point(&all(), &target(), Point::Active, false), now).await.unwrap();
    for n in outbox.pending().await.unwrap() {
        assert!(outbox.lease(&n, now, now + LEASE).await.unwrap());
    }
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.held_elsewhere, 2);
    assert!(aws.capacity.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_command_goes_once_to_each_instance_and_its_result_comes_back() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(11, 10, 30);
    let run = due(&all(), &target(), now, false)
        .into_iter()
        .filter(|p| matches!(p.order, Order::RunCommand { .. }))
        .collect::<Vec<_>>();
    enqueue_actions(&outbox, &run, now).await.unwrap();
    // A run that sent the command to i-1 and died before recording its id: it had marked the
    // send, and SSM has a command of the document with capblock's comment to i-1.
    let Order::RunCommand { comment, .. } = &run[0].order else { unreachable!() };
    aws.sent.lock().unwrap().push(("capblock-checkpoint".into(), vec!["i-1".into()], comment.clone()));
    let marker = record(&run[0].target.block.reservation_id, run[0].key.then("sending-0"), &["i-1"], now);
    outbox.put_record(&marker).await.unwrap();

    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    let sent = aws.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].1, ["i-2"], "only the instance without it");

    *aws.running.lock().unwrap() = true;
    let report = action_runner(&aws).run(&outbox, now + Duration::minutes(5)).await.unwrap();
    assert_eq!(report.waiting.len(), 1, "the result waits for every instance: {report:?}");
    assert!(!outbox.alerts().iter().any(|a| a.contains("result")), "nothing said while it runs");

    *aws.running.lock().unwrap() = false;
    let report = action_runner(&aws).run(&outbox, now + Duration::minutes(10)).await.unwrap();
    assert_eq!(report.done.len(), 1);
    assert_eq!(aws.sent.lock().unwrap().len(), 2, "nothing sent again");
    let result = outbox.body_ending("-result-done");
    assert!(result.contains("Ran on: i-1") && result.contains("Failed on: i-2 (Failed)"), "{result}");
}

#[tokio::test]
async fn a_parameter_is_cleared_only_while_it_names_the_block() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    enqueue_actions(&outbox, &at_point(&all(), &target(), Point::Paid, false), now).await.unwrap();
    action_runner(&aws).run(&outbox, now).await.unwrap();
    // Another block of the rule published over it: the first block's end leaves it alone.
    let mut other = target();
    other.block.reservation_id = "cr-0fedcba9876543210".into();
    enqueue_actions(&outbox, &at_point(&all(), &other, Point::Paid, false), now).await.unwrap();
    enqueue_actions(&outbox, &at_point(&all(), &target(), Point::Ended, false), now).await.unwrap();
    action_runner(&aws).run(&outbox, now).await.unwrap();
    let value = aws.parameters.lock().unwrap().get("/capblock/p5/current").cloned().unwrap();
    assert!(value.contains("cr-0fedcba9876543210"));
    enqueue_actions(&outbox, &at_point(&all(), &other, Point::Ended, false), now).await.unwrap();
    action_runner(&aws).run(&outbox, now).await.unwrap();
    assert!(aws.parameters.lock().unwrap().is_empty());
}

#[test]
fn event_notices_are_keyed_by_block_and_step() {
    let s = bus_event::tests::subject();
    let n = event_notice(&s, &BusStep::Active, "delivered", Some("arn:x"), t(1, 0, 0)).unwrap();
    assert_eq!(n.id(), "cr-0123456789abcdef0#delivered@events");
    assert_eq!(n.topic, Topic::Events);
    assert_eq!(n.message.attributes[DETAIL_TYPE_ATTRIBUTE], "Block Active");
    assert_eq!(n.message.attributes[RESOURCE_ATTRIBUTE], "arn:x");
    let d: serde_json::Value = serde_json::from_str(&n.message.body).unwrap();
    assert_eq!(d["event_key"], "cr-0123456789abcdef0#delivered");
}

/// A live rule `id` with these actions, as stored (its actions unchecked: a rule stored before
/// names were judged by bytes).
fn rule_with(id: &str, actions: Vec<Action>) -> Rule {
    let text = format!(
        "id = \"{id}\"\nmode = \"live\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\ninstance_counts = [2]\n\
         durations_days = [1]\nmax_price_per_accelerator_hour = \"3.00\"\nmonthly_budget = \"10000\"\n\
         start_window = {{ earliest_in_days = 1, latest_in_days = 10 }}\n"
    );
    let mut rule = Rule::from_toml(&text, t(1, 0, 0)).unwrap();
    rule.actions = actions;
    rule
}

/// Two active blocks: `cr-...0` of rule `a`, `cr-...1` of rule `b`, each scaling its group.
fn two_blocks(group_a: &str, failing: &Failing) -> (Memory, HashMap<String, Rule>) {
    let block = |id: &str, rule: &str| Block {
        reservation_id: id.into(),
        rule_id: Some(rule.into()),
        state: BlockState::Active,
        ..example(t(10, 11, 30), t(11, 11, 30))
    };
    let scale = |g: &str| vec![Action::ScaleGroup { group: g.into(), desired: 2, down_lead_minutes: 45 }];
    let rules = [rule_with("a", scale(group_a)), rule_with("b", scale("trainers"))];
    let store = memory_failing(vec![block("cr-0000000000000000a", "a"), block("cr-0000000000000000b", "b")], failing);
    (store, rules.into_iter().map(|r| (r.id.clone(), r)).collect())
}

#[tokio::test]
async fn a_group_name_of_any_length_gets_a_key_the_store_takes() {
    // 255 emoji: 1,020 bytes, accepted before names were judged by bytes.
    let long = "😀".repeat(255);
    let (store, rules) = two_blocks(&long, &Failing::default());
    let aws = sides();
    let report = tracker_pass(&store, &action_runner(&aws), &rules, &stack(Mode::Live), t(10, 12, 0)).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.done.len(), 2, "{report:?}");
    let mut set = aws.capacity.lock().unwrap().clone();
    set.sort();
    assert_eq!(set, [("trainers".to_string(), 2), (long, 2)]);
    // The key of a name that fits is the one stored before: those records are still found.
    assert!(store.said().iter().any(|n| n.milestone == "action-scale-up-trainers"));
}

#[tokio::test]
async fn one_blocks_store_error_stops_no_other_block() {
    let failing = Failing::new(Mutex::new(Some("cr-0000000000000000a".into())));
    let (store, rules) = two_blocks("first", &failing);
    let aws = sides();
    let report = tracker_pass(&store, &action_runner(&aws), &rules, &stack(Mode::Live), t(10, 12, 0)).await;
    assert_eq!(*aws.capacity.lock().unwrap(), [("trainers".to_string(), 2)], "{report:?}");
    assert_eq!(report.done, ["cr-0000000000000000b#action-scale-up-trainers"]);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].starts_with("cr-0000000000000000a"), "{report:?}");

    // Both planned; the first block's action runs but its record cannot be written: the
    // second still runs, and the first is retried by the next run.
    let failing = Failing::default();
    let (store, rules) = two_blocks("first", &failing);
    let aws = sides();
    let first = rules["a"].clone();
    let planned = handoff::current(
        &first.actions,
        &Target::of(&store.inner.blocks()[0], "prod").unwrap(),
        BlockState::Active,
        t(10, 12, 0),
        false,
    );
    enqueue_actions(&store, &planned, t(10, 11, 59)).await.unwrap();
    *failing.lock().unwrap() = Some("cr-0000000000000000a".into());
    let report = tracker_pass(&store, &action_runner(&aws), &rules, &stack(Mode::Live), t(10, 12, 0)).await;
    assert_eq!(report.done, ["cr-0000000000000000b#action-scale-up-trainers"], "{report:?}");
    assert_eq!(report.errors.len(), 2, "planning and running the first block: {report:?}");
    *failing.lock().unwrap() = None;
    let report = tracker_pass(&store, &action_runner(&aws), &rules, &stack(Mode::Live), t(10, 12, 10)).await;
    assert_eq!(report.done, ["cr-0000000000000000a#action-scale-up-first"], "{report:?}");
}

#[tokio::test]
async fn a_command_someone_else_sent_with_capblocks_mark_suppresses_nothing() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(11, 10, 30);
    let run: Vec<Planned> = due(&all(), &target(), now, false)
        .into_iter()
        .filter(|p| matches!(p.order, Order::RunCommand { .. }))
        .collect();
    enqueue_actions(&outbox, &run, now).await.unwrap();
    let Order::RunCommand { comment, .. } = &run[0].order else { unreachable!() };
    // Someone allowed to send commands sent one with capblock's comment (the document too)
    // to both instances before capblock did: capblock never marked a send, so it is not its.
    aws.sent.lock().unwrap().push(("capblock-checkpoint".into(), vec!["i-1".into(), "i-2".into()], comment.clone()));
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    let sent = aws.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].1, ["i-1", "i-2"], "capblock's own command goes to every instance");
    // Its id is recorded: a retry of the same order sends nothing again.
    let recorded = outbox.records(&run[0].target.block.reservation_id, &format!("{}-sent-", run[0].key)).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert!(recorded[0].message.body.contains("cmd-2"), "{:?}", recorded[0]);
}

fn with_group() -> Vec<Action> {
    vec![Action::ReservationGroup { name: None }]
}

const ARN: &str = "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0";

#[tokio::test]
async fn the_reservation_goes_into_the_rules_group_once_and_out_at_the_end() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(9, 12, 0);
    let add = at_point(&with_group(), &target(), Point::Paid, false);
    enqueue_actions(&outbox, &add, now).await.unwrap();
    // Scheduled, then active, then extended: the same order, planned once.
    for point in [Point::Active, Point::Extended] {
        assert_eq!(enqueue_actions(&outbox, &at_point(&with_group(), &target(), point, false), now).await.unwrap(), 0);
    }
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done, ["cr-0123456789abcdef0#action-reservation-group-add-capblock-prod-p5"]);
    action_runner(&aws).run(&outbox, now + Duration::minutes(5)).await.unwrap();
    {
        let groups = aws.reservation_groups.lock().unwrap();
        let g = &groups["capblock-prod-p5"];
        assert_eq!(g.pool, ReservationPool::Reservations);
        assert_eq!(g.tags, [("capblock:stack".to_string(), "prod".to_string())]);
        assert_eq!(g.members, BTreeSet::from([ARN.to_string()]));
    }
    assert_eq!((*aws.created.lock().unwrap(), *aws.membership_calls.lock().unwrap()), (1, 1), "once");

    // Another block of the rule: the group is there already, and holds both.
    let mut other = target();
    other.block.reservation_id = "cr-0fedcba9876543210".into();
    other.block.arn = Some(ARN.replace("cr-0123456789abcdef0", "cr-0fedcba9876543210"));
    enqueue_actions(&outbox, &at_point(&with_group(), &other, Point::Paid, false), now).await.unwrap();
    action_runner(&aws).run(&outbox, now + Duration::minutes(10)).await.unwrap();
    assert_eq!(*aws.created.lock().unwrap(), 1);
    assert_eq!(aws.reservation_groups.lock().unwrap()["capblock-prod-p5"].members.len(), 2);

    // The first block ends: out of the group, once; the other stays.
    let end = target().block.end;
    let mut ended = target();
    ended.block.state = BlockState::Expired;
    let out = at_point(&with_group(), &ended, Point::Ended, false);
    enqueue_actions(&outbox, &out, end).await.unwrap();
    enqueue_actions(&outbox, &out, end).await.unwrap();
    let report = action_runner(&aws).run(&outbox, end).await.unwrap();
    assert_eq!(report.done, ["cr-0123456789abcdef0#action-reservation-group-remove-capblock-prod-p5"]);
    action_runner(&aws).run(&outbox, end + Duration::minutes(5)).await.unwrap();
    let members = aws.reservation_groups.lock().unwrap()["capblock-prod-p5"].members.clone();
    assert_eq!(members, BTreeSet::from([other.block.arn.clone().unwrap()]));
    assert_eq!(*aws.membership_calls.lock().unwrap(), 3);
    let done: Vec<String> = outbox.alerts().into_iter().filter(|a| a.contains("reservation-group")).collect();
    assert_eq!(done.len(), 3, "each announced once: {done:?}");
}

#[tokio::test]
async fn an_ultraserver_block_gets_a_group_for_its_instance_type() {
    let (outbox, aws) = (memory(vec![]), sides());
    let mut ultra = target();
    ultra.block.ultraserver = true;
    ultra.block.instance_type = "p6e-gb200.36xlarge".parse().unwrap();
    enqueue_actions(&outbox, &at_point(&with_group(), &ultra, Point::Paid, false), t(9, 12, 0)).await.unwrap();
    action_runner(&aws).run(&outbox, t(9, 12, 0)).await.unwrap();
    assert_eq!(
        aws.reservation_groups.lock().unwrap()["capblock-prod-p5"].pool,
        ReservationPool::UltraServerBlocks { instance_type: "p6e-gb200.36xlarge".into() }
    );
}

#[tokio::test]
async fn a_group_in_dry_run_is_announced_and_never_made() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(9, 12, 0);
    enqueue_actions(&outbox, &at_point(&with_group(), &target(), Point::Paid, true), now).await.unwrap();
    let mut ended = target();
    ended.block.state = BlockState::Expired;
    enqueue_actions(&outbox, &at_point(&with_group(), &ended, Point::Ended, true), now).await.unwrap();
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 2, "{report:?}");
    assert!(aws.reservation_groups.lock().unwrap().is_empty());
    assert_eq!((*aws.created.lock().unwrap(), *aws.membership_calls.lock().unwrap()), (0, 0));
    let bodies: Vec<String> = outbox.on(Topic::Alerts).into_iter().map(|n| n.message.body).collect();
    assert!(bodies.iter().all(|b| b.contains("Would ")), "{bodies:?}");
}

#[tokio::test]
async fn a_failing_group_is_announced_once_retried_and_holds_nothing_back() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(9, 12, 0);
    let mut actions = with_group();
    actions.push(Action::PublishParameter);
    aws.fail(true);
    enqueue_actions(&outbox, &at_point(&actions, &target(), Point::Paid, false), now).await.unwrap();
    for run in 0..3 {
        let report = action_runner(&aws).run(&outbox, now + Duration::minutes(5 * run)).await.unwrap();
        assert_eq!(report.failed.len(), 2, "{report:?}");
    }
    let failed: Vec<String> = outbox.alerts().into_iter().filter(|a| a.ends_with("-failed")).collect();
    assert_eq!(failed.len(), 2, "announced once each: {failed:?}");
    aws.fail(false);
    let report = action_runner(&aws).run(&outbox, now + Duration::minutes(20)).await.unwrap();
    assert_eq!(report.done.len(), 2, "{report:?}");
    assert_eq!(aws.reservation_groups.lock().unwrap()["capblock-prod-p5"].members.len(), 1);

    // A block recorded without an ARN cannot be grouped: said, not guessed.
    let outbox = memory(vec![]);
    let mut no_arn = target();
    no_arn.block.arn = None;
    enqueue_actions(&outbox, &at_point(&with_group(), &no_arn, Point::Paid, false), now).await.unwrap();
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.failed.len(), 1, "{report:?}");
}

#[tokio::test]
async fn a_group_that_is_gone_at_the_end_has_nothing_to_give_back() {
    let (outbox, aws) = (memory(vec![]), sides());
    let mut ended = target();
    ended.block.state = BlockState::Expired;
    let end = ended.block.end;
    enqueue_actions(&outbox, &at_point(&with_group(), &ended, Point::Ended, false), end).await.unwrap();
    let report = action_runner(&aws).run(&outbox, end).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    let said = outbox.said().iter().any(|n| n.message.body.contains("is gone"));
    assert!(said);
}

#[tokio::test]
async fn a_group_scaled_up_outside_the_blocks_zone_is_warned_of_once() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    *aws.zones.lock().unwrap() = vec!["us-east-1b".into()];
    let up: Vec<Planned> = at_point(&all(), &target(), Point::Active, false)
        .into_iter()
        .filter(|p| matches!(p.order, Order::SetCapacity { .. }))
        .collect();
    enqueue_actions(&outbox, &up, now).await.unwrap();
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 1, "scaled up all the same: {report:?}");
    assert_eq!(*aws.capacity.lock().unwrap(), [("trainers".to_string(), 2)]);
    let mut alerts = outbox.alerts();
    alerts.sort();
    assert_eq!(alerts, ["action-scale-up-trainers-done", "action-scale-up-trainers-warning"]);
    let warning = outbox.body_ending("-warning");
    assert!(warning.contains("is in us-east-1b, the block is in us-east-1a"), "{warning}");

    // The scale-down is not checked; a group in the block's zone earns no warning, and one
    // whose zones cannot be read is scaled all the same.
    for (zones, unreadable) in [(vec!["us-east-1a".to_string()], false), (vec!["us-east-1b".to_string()], true)] {
        let (outbox, aws) = (memory(vec![]), sides());
        *aws.zones.lock().unwrap() = zones;
        *aws.zones_unreadable.lock().unwrap() = unreadable;
        enqueue_actions(&outbox, &up, now).await.unwrap();
        enqueue_actions(&outbox, &due(&all(), &target(), t(11, 10, 20), false), now).await.unwrap();
        let report = action_runner(&aws).run(&outbox, now).await.unwrap();
        assert_eq!(report.done.len(), 2, "{report:?}");
        assert!(!outbox.alerts().iter().any(|a| a.ends_with("-warning")), "{:?}", outbox.alerts());
    }
}

#[tokio::test]
async fn the_tracker_plans_the_group_with_the_stacks_name_once_the_block_is_paid() {
    let block = |id: &str, state| Block {
        reservation_id: id.into(),
        rule_id: Some("a".into()),
        state,
        arn: Some(format!("arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{id}")),
        ..example(t(10, 11, 30), t(11, 11, 30))
    };
    let store = memory(vec![
        block("cr-0000000000000000a", BlockState::PaymentPending),
        block("cr-0000000000000000b", BlockState::Scheduled),
    ]);
    let rules: HashMap<String, Rule> = [("a".to_string(), rule_with("a", with_group()))].into();
    let aws = sides();
    let report = tracker_pass(&store, &action_runner(&aws), &rules, &stack(Mode::Live), t(9, 12, 0)).await;
    assert_eq!(report.done, ["cr-0000000000000000b#action-reservation-group-add-capblock-prod-a"], "{report:?}");
    // In a dry-run stack, the same plan only says what it would do.
    let (store, aws) = (memory(store.inner.blocks()), sides());
    let report = tracker_pass(&store, &action_runner(&aws), &rules, &stack(Mode::DryRun), t(9, 12, 0)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert!(aws.reservation_groups.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// scale_nodegroup: an EKS managed node group up at the start, back to what it was at the end.
// ---------------------------------------------------------------------------------------------

fn nodegroup(desired: u32, min: Option<u32>, max: Option<u32>) -> Vec<Action> {
    let target = NodegroupTarget { cluster: "train".into(), nodegroup: "gpu".into(), desired, min, max };
    vec![Action::ScaleNodegroup { target, down_lead_minutes: 45 }]
}

fn sized(min: u32, max: u32, desired: u32) -> NodegroupScaling {
    NodegroupScaling { min, max, desired }
}

impl Aws {
    fn with_nodegroup(at: NodegroupScaling) -> Aws {
        let aws = sides();
        aws.nodegroups.lock().unwrap().insert("train/gpu".into(), at);
        aws
    }
    fn nodegroup(&self) -> NodegroupScaling {
        self.nodegroups.lock().unwrap()["train/gpu"]
    }
    fn updates(&self) -> usize {
        self.nodegroup_updates.lock().unwrap().len()
    }
}

#[tokio::test]
async fn a_node_group_goes_up_once_at_the_start_and_back_to_what_it_was_at_the_end() {
    let (outbox, aws) = (memory(vec![]), Aws::with_nodegroup(sized(1, 2, 1)));
    let now = t(10, 11, 35);
    let up = at_point(&nodegroup(4, None, None), &target(), Point::Active, false);
    assert_eq!(enqueue_actions(&outbox, &up, now).await.unwrap(), 1);
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    // The minimum stays, the maximum is raised to the desired size.
    assert_eq!(aws.nodegroup(), sized(1, 4, 4));
    // A duplicate trigger and a second run change nothing.
    assert_eq!(enqueue_actions(&outbox, &up, now).await.unwrap(), 0);
    assert_eq!(action_runner(&aws).run(&outbox, now + Duration::minutes(5)).await.unwrap(), ActionReport::default());
    assert_eq!(aws.updates(), 1);

    // 45 minutes before termination: back to min 1, max 2, desired 1, once.
    let late = t(11, 10, 15);
    let down = due(&nodegroup(4, None, None), &target(), late, false);
    assert_eq!(enqueue_actions(&outbox, &down, late).await.unwrap(), 1);
    let report = action_runner(&aws).run(&outbox, late).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert_eq!(aws.nodegroup(), sized(1, 2, 1));
    // The end's order has the lead's key: nothing runs twice.
    let ended = at_point(&nodegroup(4, None, None), &target(), Point::Ended, false);
    assert_eq!(enqueue_actions(&outbox, &ended, late).await.unwrap(), 0);
    assert_eq!(action_runner(&aws).run(&outbox, late + Duration::minutes(5)).await.unwrap(), ActionReport::default());
    assert_eq!(aws.updates(), 2);
    let said: Vec<String> = outbox.on(Topic::Alerts).into_iter().map(|n| n.message.body).collect();
    assert!(said.iter().any(|b| b.contains("min 1, max 4, desired 4 (was min 1, max 2, desired 1)")), "{said:#?}");
    assert!(said.iter().any(|b| b.contains("min 1, max 2, desired 1 (was min 1, max 4, desired 4)")), "{said:#?}");
}

#[tokio::test]
async fn a_retried_scale_up_keeps_what_the_node_group_was_before_the_first_try() {
    let (outbox, aws) = (memory(vec![]), Aws::with_nodegroup(sized(0, 2, 0)));
    let now = t(10, 11, 35);
    let actions = nodegroup(3, Some(1), Some(6));
    enqueue_actions(&outbox, &at_point(&actions, &target(), Point::Active, false), now).await.unwrap();
    // The first try recorded the size, then its update was lost (the run died): the node
    // group was scaled nonetheless.
    let record_key = handoff::nodegroup_record("train", "gpu");
    let scaled = NodegroupScaled { before: sized(0, 2, 0), set: sized(1, 6, 3) };
    outbox.put_record(&record(&target().block.reservation_id, record_key, &scaled, now)).await.unwrap();
    aws.nodegroups.lock().unwrap().insert("train/gpu".into(), sized(1, 6, 3));

    action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(aws.nodegroup(), sized(1, 6, 3), "the same size again");
    let late = t(11, 10, 15);
    enqueue_actions(&outbox, &due(&actions, &target(), late, false), late).await.unwrap();
    action_runner(&aws).run(&outbox, late).await.unwrap();
    assert_eq!(aws.nodegroup(), sized(0, 2, 0), "what it was before capblock touched it");
}

#[tokio::test]
async fn a_size_changed_since_the_scale_up_is_left_as_it_is() {
    let (outbox, aws) = (memory(vec![]), Aws::with_nodegroup(sized(0, 2, 0)));
    let now = t(10, 11, 35);
    let actions = nodegroup(4, None, None);
    enqueue_actions(&outbox, &at_point(&actions, &target(), Point::Active, false), now).await.unwrap();
    action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(aws.nodegroup(), sized(0, 4, 4));
    // Someone (the Cluster Autoscaler, a person) took the desired size to 3.
    aws.nodegroups.lock().unwrap().insert("train/gpu".into(), sized(0, 4, 3));
    let late = t(11, 10, 15);
    enqueue_actions(&outbox, &due(&actions, &target(), late, false), late).await.unwrap();
    action_runner(&aws).run(&outbox, late).await.unwrap();
    // The maximum goes back; the desired size stays theirs, within it.
    assert_eq!(aws.nodegroup(), sized(0, 2, 2));
    let said = outbox.said().iter().map(|n| n.message.body.clone()).collect::<Vec<_>>();
    assert!(said.iter().any(|b| b.contains("left as it is: desired is 3 (capblock set 4)")), "{said:#?}");
}

#[tokio::test]
async fn a_node_group_never_scaled_up_is_left_as_it_is_at_the_end() {
    let (outbox, aws) = (memory(vec![]), Aws::with_nodegroup(sized(0, 2, 1)));
    let end = target().block.end;
    enqueue_actions(&outbox, &at_point(&nodegroup(2, None, None), &target(), Point::Ended, false), end).await.unwrap();
    let report = action_runner(&aws).run(&outbox, end).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert_eq!(aws.updates(), 0);
    assert_eq!(aws.nodegroup(), sized(0, 2, 1));
}

#[tokio::test]
async fn a_missing_node_group_fails_once_and_is_retried() {
    let (outbox, aws) = (memory(vec![]), sides());
    let now = t(10, 11, 35);
    enqueue_actions(&outbox, &at_point(&nodegroup(2, None, None), &target(), Point::Active, false), now).await.unwrap();
    for run in 0..3 {
        let report = action_runner(&aws).run(&outbox, now + Duration::minutes(5 * run)).await.unwrap();
        assert_eq!(report.failed.len(), 1, "{report:?}");
    }
    let failed = outbox
        .said()
        .into_iter()
        .filter(|n| n.milestone.ends_with("-failed"))
        .map(|n| n.message.body)
        .collect::<Vec<_>>();
    assert_eq!(failed.len(), 1, "announced once");
    assert!(failed[0].contains("no node group") && failed[0].contains("HandoffClusters"), "{failed:#?}");
    // Made by a person: the next run scales it up.
    aws.nodegroups.lock().unwrap().insert("train/gpu".into(), sized(0, 1, 0));
    let report = action_runner(&aws).run(&outbox, now + Duration::minutes(20)).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert_eq!(aws.nodegroup(), sized(0, 2, 2));
}

#[tokio::test]
async fn a_node_group_in_dry_run_is_announced_and_never_touched() {
    let (outbox, aws) = (memory(vec![]), Aws::with_nodegroup(sized(0, 2, 0)));
    let now = t(10, 11, 35);
    let actions = nodegroup(2, None, None);
    enqueue_actions(&outbox, &at_point(&actions, &target(), Point::Active, true), now).await.unwrap();
    enqueue_actions(&outbox, &due(&actions, &target(), t(11, 10, 15), true), now).await.unwrap();
    let report = action_runner(&aws).run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 2, "{report:?}");
    assert_eq!(aws.updates(), 0);
    let said = outbox.said().iter().map(|n| n.message.body.clone()).collect::<Vec<_>>();
    assert!(said.iter().any(|b| b.contains("Would scale node group `gpu` of cluster `train` to 2.")), "{said:#?}");
    assert!(said.iter().any(|b| b.contains("Would put node group `gpu` of cluster `train` back")), "{said:#?}");
}

/// The node groups rules validate asks EKS about.
#[tokio::test]
async fn a_node_group_eks_does_not_know_is_named_in_each_of_the_rules_regions() {
    let aws = Aws::with_nodegroup(sized(0, 2, 0));
    let mut rule = rule_with("p5", nodegroup(2, None, None));
    rule.regions = vec!["us-east-1".parse().unwrap(), "us-west-2".parse().unwrap()];
    assert!(unknown_nodegroups(&aws, &rule).await.unwrap().is_empty());
    let rule = rule_with(
        "p5",
        vec![Action::ScaleNodegroup {
            target: NodegroupTarget {
                cluster: "train".into(),
                nodegroup: "cpu".into(),
                desired: 1,
                min: None,
                max: None,
            },
            down_lead_minutes: 30,
        }],
    );
    let p = unknown_nodegroups(&aws, &rule).await.unwrap();
    assert_eq!(p.len(), rule.regions.len(), "{p:?}");
    assert_eq!(p[0].0, "actions[0].nodegroup");
    assert!(p[0].1.starts_with("no node group \"cpu\" in EKS cluster \"train\" in "), "{p:?}");
}

#[tokio::test]
async fn after_an_extension_the_new_ends_order_finds_the_node_group_back_already() {
    let (outbox, aws) = (memory(vec![]), Aws::with_nodegroup(sized(0, 2, 0)));
    let actions = nodegroup(2, None, None);
    let now = t(10, 11, 35);
    enqueue_actions(&outbox, &at_point(&actions, &target(), Point::Active, false), now).await.unwrap();
    action_runner(&aws).run(&outbox, now).await.unwrap();
    let late = t(11, 10, 15);
    enqueue_actions(&outbox, &due(&actions, &target(), late, false), late).await.unwrap();
    action_runner(&aws).run(&outbox, late).await.unwrap();
    assert_eq!((aws.nodegroup(), aws.updates()), (sized(0, 2, 0), 2));
    // Extended by a day: the new end's order runs once more and changes nothing.
    let mut extended = target();
    extended.block.end = t(12, 11, 30);
    let later = t(12, 10, 15);
    assert_eq!(enqueue_actions(&outbox, &due(&actions, &extended, later, false), later).await.unwrap(), 1);
    let report = action_runner(&aws).run(&outbox, later).await.unwrap();
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert_eq!((aws.nodegroup(), aws.updates()), (sized(0, 2, 0), 2));
    let said = outbox.said().iter().map(|n| n.message.body.clone()).collect::<Vec<_>>();
    assert!(said.iter().any(|b| b.contains("already: nothing to put back")), "{said:#?}");
}

// ---------------------------------------------------------------------------------------------
// share_with: each block in a RAM share of its own once scheduled, deleted at its end.
// ---------------------------------------------------------------------------------------------

fn sharing(principals: &[&str]) -> Rule {
    let mut rule = rule_with("p5", vec![]);
    rule.share_with = principals.iter().map(|p| SharePrincipal::parse(p).unwrap()).collect();
    rule.tags = [("team".to_string(), "vision".to_string())].into();
    rule
}

fn block_in(state: BlockState) -> Block {
    let mut b = target().block;
    b.rule_id = Some("p5".into());
    b.state = state;
    b
}

async fn pass(store: &Memory, aws: &Aws, rule: &Rule, mode: Mode, now: DateTime<Utc>) -> ActionReport {
    let rules: HashMap<String, Rule> = [(rule.id.clone(), rule.clone())].into();
    tracker_pass(store, &action_runner(aws), &rules, &stack(mode), now).await
}

/// The block of `rule` ends (the tracker's move to expired) and the unshare order it plans is
/// run: asserted done. The block's end, when it ran.
async fn end_and_unshare(store: &Memory, aws: &Aws, rule: &Rule) -> DateTime<Utc> {
    let ended = block_in(BlockState::Expired);
    at_move(store, &block_in(BlockState::Active), &ended, &[], Some(rule), &stack(Mode::Live), ended.end)
        .await
        .unwrap();
    let report = action_runner(aws).run(store, ended.end).await.unwrap();
    assert_eq!(report.done, ["cr-0123456789abcdef0#action-unshare"], "{report:?}");
    ended.end
}

#[tokio::test]
async fn a_block_is_shared_once_when_scheduled_never_before_and_unshared_at_its_end() {
    let rule = sharing(&["111111111111", "arn:aws:organizations::111111111111:ou/o-abcdef1234/ou-ab12-cdef5678"]);
    let aws = sides();
    let now = t(9, 12, 0);
    // Payment pending: nothing is shared (EC2 shares scheduled or active blocks only).
    let pending = memory(vec![block_in(BlockState::PaymentPending)]);
    let report = pass(&pending, &aws, &rule, Mode::Live, now).await;
    assert!(report.done.is_empty() && aws.shares.lock().unwrap().is_empty(), "{report:?}");

    // Scheduled: one share, tagged, with both principals; the next runs add nothing.
    let store = memory(vec![block_in(BlockState::Scheduled)]);
    let report = pass(&store, &aws, &rule, Mode::Live, now).await;
    assert_eq!(report.done, ["cr-0123456789abcdef0#action-share"], "{report:?}");
    for later in 1..4 {
        pass(&store, &aws, &rule, Mode::Live, now + Duration::minutes(5 * later)).await;
    }
    let shares = aws.shares.lock().unwrap().clone();
    assert_eq!(shares.len(), 1, "one share per block: {shares:?}");
    let r = &shares[0].request;
    assert_eq!(r.name, "capblock-prod-cr-0123456789abcdef0");
    assert_eq!(r.reservation_arn, ARN);
    assert_eq!(r.principals, rule.share_with);
    assert!(r.tags.contains(&("capblock:rule".to_string(), "p5".to_string())));
    // Announced once, and one Block Shared event carrying the rule's tags and the owner.
    let alerts = store.alerts();
    assert_eq!(alerts.iter().filter(|a| a.starts_with("action-share")).count(), 1, "{alerts:?}");
    let events: Vec<Notice> = store.on(Topic::Events);
    // One on capblock's bus, and a copy for the one account share_with names (not the OU).
    let (copies, own): (Vec<&Notice>, Vec<&Notice>) =
        events.iter().partition(|n| n.message.attributes.contains_key(ACCOUNT_ATTRIBUTE));
    assert_eq!(own.len(), 1, "{events:?}");
    let accounts: Vec<&str> = copies.iter().map(|n| n.message.attributes[ACCOUNT_ATTRIBUTE].as_str()).collect();
    assert_eq!(accounts.len(), 1, "{events:?}");
    assert_eq!(copies[0].milestone, format!("{}@{}", own[0].milestone, accounts[0]));
    assert_eq!(copies[0].message.body, own[0].message.body);
    let events: Vec<Notice> = own.into_iter().cloned().collect();
    let detail: serde_json::Value = serde_json::from_str(&events[0].message.body).unwrap();
    assert_eq!(events[0].message.attributes[DETAIL_TYPE_ATTRIBUTE], "Block Shared");
    assert_eq!(detail["owner_account"], "123456789012");
    assert_eq!(detail["tags"]["team"], "vision");
    assert_eq!(detail["shared_with"].as_array().unwrap().len(), 2);

    // The block ends: the share is deleted, once.
    let ended = end_and_unshare(&store, &aws, &rule).await;
    assert!(aws.shares.lock().unwrap()[0].deleted);
    let again = action_runner(&aws).run(&store, ended + Duration::minutes(5)).await.unwrap();
    assert!(again.done.is_empty());
}

/// A run that died after CreateResourceShare (its answer lost, or before the outbox recorded it
/// done) finds the share by its tags: never a second share.
#[tokio::test]
async fn a_share_made_by_a_run_that_died_is_found_not_made_again() {
    let rule = sharing(&["111111111111"]);
    let aws = sides();
    let store = memory(vec![block_in(BlockState::Scheduled)]);
    // The share exists, as the dead run left it.
    let stack_tags = share::share_tags("prod", "p5", "cr-0123456789abcdef0");
    aws.create(
        &"us-east-1".parse().unwrap(),
        &ShareRequest {
            name: "x".into(),
            reservation_arn: ARN.into(),
            principals: rule.share_with.clone(),
            tags: stack_tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            client_token: "dead-run".into(),
        },
    )
    .await
    .unwrap();
    let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, 0)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert_eq!(aws.shares.lock().unwrap().len(), 1);
}

/// RAM still associating: not done, looked at again; RAM failing: the share deleted, the
/// failure announced once, a fresh share tried next run; one principal refused: a warning.
#[tokio::test]
async fn ram_pending_failed_or_partial_is_waited_for_retried_or_warned_of() {
    let rule = sharing(&["111111111111"]);
    let store = memory(vec![block_in(BlockState::Scheduled)]);
    let aws = sides();
    *aws.share_outcome.lock().unwrap() = Some(Association::Associating);
    let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, 0)).await;
    assert_eq!(report.waiting.len(), 1, "{report:?}");
    aws.shares.lock().unwrap()[0].resource = Association::Associated;
    let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, 5)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert_eq!(aws.shares.lock().unwrap().len(), 1);

    let store = memory(vec![block_in(BlockState::Scheduled)]);
    let aws = sides();
    *aws.share_outcome.lock().unwrap() = Some(Association::Failed);
    for minutes in [0, 5] {
        let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, minutes)).await;
        assert_eq!(report.failed.len(), 1, "{report:?}");
    }
    {
        let shares = aws.shares.lock().unwrap();
        assert_eq!(shares.len(), 2, "each failed share deleted, a fresh one tried: {shares:?}");
        assert!(shares.iter().all(|s| s.deleted));
    }
    assert_eq!(store.alerts().iter().filter(|a| a.ends_with("-failed")).count(), 1, "announced once");
    *aws.share_outcome.lock().unwrap() = None;
    let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, 10)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");

    let rule = sharing(&["111111111111", OUTSIDER]);
    let store = memory(vec![block_in(BlockState::Scheduled)]);
    let report = pass(&store, &sides(), &rule, Mode::Live, t(9, 12, 0)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert!(store.alerts().iter().any(|a| a == "action-share-warning"), "{:?}", store.alerts());
}

/// RAM's listing lags (a new share is not in GetResourceShares for a while): the share is made
/// once and read by the ARN CreateResourceShare returned, however many runs it takes to be
/// associated, and deleted at the block's end all the same.
#[tokio::test]
async fn a_share_is_made_once_and_deleted_while_rams_listing_lags() {
    let rule = sharing(&["111111111111"]);
    let store = memory(vec![block_in(BlockState::Scheduled)]);
    let aws = sides();
    *aws.listing_lags.lock().unwrap() = true;
    *aws.share_outcome.lock().unwrap() = Some(Association::Associating);
    for minutes in [0, 5, 10] {
        let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, minutes)).await;
        assert!(report.failed.is_empty() && report.errors.is_empty(), "{report:?}");
        assert_eq!(report.waiting.len(), 1, "{report:?}");
    }
    aws.shares.lock().unwrap()[0].resource = Association::Associated;
    let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, 15)).await;
    assert_eq!(report.done, ["cr-0123456789abcdef0#action-share"], "{report:?}");
    assert_eq!(aws.shares.lock().unwrap().len(), 1, "one share for the block");
    assert!(store.alerts().iter().all(|a| !a.ends_with("-failed")), "{:?}", store.alerts());

    end_and_unshare(&store, &aws, &rule).await;
    assert!(aws.shares.lock().unwrap()[0].deleted, "the recorded share is deleted, listed or not");
}

/// A run that died after CreateResourceShare and before recording its answer: the retry sends
/// the same client token and gets the same share back, though RAM's listing does not show it.
#[tokio::test]
async fn a_retry_after_a_crash_sends_the_same_token_and_gets_the_same_share() {
    let rule = sharing(&["111111111111"]);
    let store = memory(vec![block_in(BlockState::Scheduled)]);
    let aws = sides();
    *aws.listing_lags.lock().unwrap() = true;
    let rid = "cr-0123456789abcdef0";
    let tags = share::share_tags("prod", "p5", rid);
    // What the dead run sent: the first attempt's request.
    let dead = ShareRequest {
        name: share::share_name("prod", rid),
        reservation_arn: ARN.into(),
        principals: rule.share_with.clone(),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        client_token: share::share_client_token("prod", rid, 0),
    };
    let made = aws.create(&"us-east-1".parse().unwrap(), &dead).await.unwrap();
    let report = pass(&store, &aws, &rule, Mode::Live, t(9, 12, 0)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");
    let shares = aws.shares.lock().unwrap().clone();
    assert_eq!(shares.len(), 1, "the same share, not a second: {shares:?}");
    assert_eq!(shares[0].arn, made);
    assert_eq!(shares[0].request, dead, "the retry sent the same request, token included");
}

#[tokio::test]
async fn a_share_in_dry_run_is_announced_and_never_made() {
    let rule = sharing(&["111111111111"]);
    let (store, aws) = (memory(vec![block_in(BlockState::Active)]), sides());
    let report = pass(&store, &aws, &rule, Mode::DryRun, t(10, 12, 0)).await;
    assert_eq!(report.done.len(), 1, "{report:?}");
    assert!(aws.shares.lock().unwrap().is_empty());
}

/// A member account the rule hands its blocks to (`handoff_account`).
const MEMBER: &str = "222222222222";

/// A rule with a `handoff_account` runs its workload actions in that account's sides, reached
/// through `AccountHands`, and never in this account's; an account whose role cannot be assumed
/// fails the action by name, and it is retried.
#[tokio::test]
async fn a_members_actions_run_in_its_own_account() {
    let (outbox, own) = (memory(vec![]), sides());
    let member = std::sync::Arc::new(MemoryHandoff::default());
    let accounts = MemoryAccounts::default().with_member(MEMBER, member.clone());
    let now = t(10, 11, 35);
    let there = Target { account: Some(MEMBER.into()), ..target() };
    enqueue_actions(&outbox, &at_point(&all(), &there, Point::Active, false), now).await.unwrap();
    let runner = ActionRunner { accounts: Some(&accounts), ..action_runner(&own) };
    let report = runner.run(&outbox, now).await.unwrap();
    assert_eq!(report.done.len(), 2, "{report:?}");
    assert_eq!(member.desired(), [("trainers".to_string(), 2)]);
    assert!(member.parameters()["/capblock/p5/current"].contains("cr-0123456789abcdef0"));
    assert!(own.desired().is_empty() && own.parameters().is_empty(), "nothing in this account");

    // Another member, whose role this stack cannot assume.
    let (outbox, own) = (memory(vec![]), sides());
    let stranger = Target { account: Some("333333333333".into()), ..target() };
    enqueue_actions(&outbox, &at_point(&all(), &stranger, Point::Active, false), now).await.unwrap();
    let runner = ActionRunner { accounts: Some(&accounts), ..action_runner(&own) };
    let report = runner.run(&outbox, now).await.unwrap();
    assert_eq!(report.failed.len(), 2, "{report:?}");
    let told: Vec<String> = outbox.on(Topic::Alerts).into_iter().map(|n| n.message.body).collect();
    assert!(told.iter().any(|b| b.contains("333333333333")), "{told:?}");
    assert!(own.desired().is_empty() && member.desired().len() == 1, "nothing anywhere else");
}
