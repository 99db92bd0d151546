use super::*;
use crate::domain::actions::{ActionLimits, ActionSpec, is_cluster_name, is_nodegroup_name, validate};
use chrono::TimeZone;

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
}

fn limits() -> ActionLimits {
    // A 1-day block, tolerance 0, 30 minutes termination lead.
    ActionLimits {
        shortest_block_minutes: 24 * 60,
        termination_lead_minutes: 30,
        max_instances: 4,
        ultraserver_instance_types: Vec::new(),
        in_member_account: false,
    }
}

/// `block::example`'s: rule `p5`, 2 x p5.48xlarge in us-east-1a, 12-10 to 12-11 11:30, in
/// stack `prod`.
pub(crate) fn target() -> Target {
    let mut b = crate::domain::block::example(t(10, 11, 30), t(11, 11, 30));
    b.arn = Some(format!("arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{}", b.reservation_id));
    Target::of(&b, "prod").unwrap()
}

pub(crate) fn all() -> Vec<Action> {
    vec![
        Action::PublishParameter,
        Action::ScaleGroup { group: "trainers".into(), desired: 2, down_lead_minutes: 45 },
        Action::RunCommand { document: "capblock-checkpoint".into(), lead_minutes: 30 },
    ]
}

fn fields(problems: &[(String, String)]) -> Vec<&str> {
    problems.iter().map(|(f, _)| f.as_str()).collect()
}

/// The `[[actions]]` of a rule file's `text`, read as the rule's spec reads them.
fn specs_of(text: &str) -> Vec<ActionSpec> {
    toml::from_str::<toml::Table>(text).unwrap()["actions"].clone().try_into().unwrap()
}

/// [`all`]'s actions as a rule file writes them (the rule tests' file with every part has them).
pub(crate) const ALL_TOML: &str = r#"
[[actions]]
kind = "publish_parameter"
[[actions]]
kind = "scale_group"
group = "trainers"
desired = 2
down_lead_minutes = 45
[[actions]]
kind = "run_command"
document = "capblock-checkpoint"
lead_minutes = 30
"#;

#[test]
fn good_actions_validate() {
    let specs = specs_of(ALL_TOML);
    let (actions, problems) = validate(&specs, &limits());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(actions, all());
}

#[test]
fn an_empty_document_is_named() {
    let specs = [ActionSpec::RunCommand { document: String::new(), lead_minutes: 30 }];
    let (actions, problems) = validate(&specs, &limits());
    assert!(actions.is_empty());
    assert_eq!(fields(&problems), ["actions[0].document"]);
    assert!(problems[0].1.contains("empty"), "{problems:?}");
}

#[test]
fn a_lead_longer_than_the_block_is_named() {
    // 24 h block, 30 min termination lead: 1410 minutes of room; a lead must be shorter.
    let specs = [
        ActionSpec::RunCommand { document: "doc".into(), lead_minutes: 1410 },
        ActionSpec::ScaleGroup { group: "g".into(), desired: 1, down_lead_minutes: 2000 },
        ActionSpec::RunCommand { document: "doc".into(), lead_minutes: 0 },
    ];
    let (actions, problems) = validate(&specs, &limits());
    assert!(actions.is_empty());
    assert_eq!(
        fields(&problems),
        ["actions[0].lead_minutes", "actions[1].down_lead_minutes", "actions[2].lead_minutes"]
    );
    assert!(problems[0].1.contains("longer than the block"), "{problems:?}");
    let (ok, none) = validate(&[ActionSpec::RunCommand { document: "doc".into(), lead_minutes: 1409 }], &limits());
    assert!(none.is_empty() && ok.len() == 1);
}

#[test]
fn bad_groups_and_counts_are_named() {
    let specs = [
        ActionSpec::ScaleGroup { group: String::new(), desired: 1, down_lead_minutes: 30 },
        ActionSpec::ScaleGroup { group: "g".into(), desired: 5, down_lead_minutes: 30 },
        ActionSpec::ScaleGroup { group: "h".into(), desired: 1, down_lead_minutes: 30 },
        ActionSpec::ScaleGroup { group: "h".into(), desired: 1, down_lead_minutes: 40 },
        ActionSpec::RunCommand { document: "bad name!".into(), lead_minutes: 30 },
        ActionSpec::PublishParameter {},
        ActionSpec::PublishParameter {},
    ];
    let (actions, problems) = validate(&specs, &limits());
    assert_eq!(
        fields(&problems),
        ["actions[0].group", "actions[1].desired", "actions[3].group", "actions[4].document", "actions[6].kind"]
    );
    assert_eq!(actions.len(), 2, "h once and one publish_parameter: {actions:?}");
}

#[test]
fn a_document_of_another_account_is_refused() {
    let doc = |d: &str| [ActionSpec::RunCommand { document: d.into(), lead_minutes: 30 }];
    for arn in [
        "arn:aws:ssm:us-east-1:999999999999:document/Exfiltrate",
        "arn:aws:ssm:us-east-1::document/AWS-RunShellScript",
        "999999999999:document/x",
        "team/doc",
    ] {
        let (actions, problems) = validate(&doc(arn), &limits());
        assert!(actions.is_empty(), "{arn}");
        assert_eq!(fields(&problems), ["actions[0].document"], "{arn}");
        assert!(problems[0].1.contains("is an ARN") && problems[0].1.contains("AWS-owned"), "{problems:?}");
    }
    // This account's documents and AWS's are named by name.
    for name in ["AWS-RunShellScript", "capblock-checkpoint", "my_doc.v2"] {
        let (actions, problems) = validate(&doc(name), &limits());
        assert!(problems.is_empty() && actions.len() == 1, "{name}: {problems:?}");
    }
}

#[test]
fn names_are_judged_by_bytes_and_the_services_patterns() {
    let group = |g: String| [ActionSpec::ScaleGroup { group: g, desired: 1, down_lead_minutes: 30 }];
    // 255 characters, 1,020 bytes: past the outbox key's room; Auto Scaling takes ASCII only.
    for bad in [
        "😀".repeat(255),
        "😀".into(),
        "a".repeat(256),
        "a:b".into(),
        "a b".into(),
        "tab\there".into(),
        "\u{1b}[2J".into(),
    ] {
        let (actions, problems) = validate(&group(bad.clone()), &limits());
        assert!(actions.is_empty(), "{bad:?}");
        assert_eq!(fields(&problems), ["actions[0].group"], "{bad:?}");
        assert!(problems[0].1.chars().count() < 200, "the message cuts a long name: {}", problems[0].1);
    }
    for good in ["a".repeat(255), "trainers".into(), "eks-nodes_p5/ml.[prod]~1".into()] {
        let (actions, problems) = validate(&group(good.clone()), &limits());
        assert!(problems.is_empty() && actions.len() == 1, "{good}: {problems:?}");
    }
    let doc = |d: String| [ActionSpec::RunCommand { document: d, lead_minutes: 30 }];
    for bad in ["é".repeat(100), "a".repeat(129), "ab".into(), "doc!".into()] {
        let (_, problems) = validate(&doc(bad.clone()), &limits());
        assert_eq!(fields(&problems), ["actions[0].document"], "{bad:?}");
    }
    assert!(validate(&doc("a".repeat(128)), &limits()).1.is_empty());
}

#[test]
fn unknown_keys_are_refused() {
    let r: Result<ActionSpec, _> =
        toml::from_str("kind = \"run_command\"\ndocument = \"d\"\nlead_minutes = 1\nleed = 2\n");
    assert!(r.is_err());
    let r: Result<ActionSpec, _> = toml::from_str("kind = \"scale\"\n");
    assert!(r.is_err());
}

fn keys(p: &[Planned]) -> Vec<&str> {
    p.iter().map(|p| p.key.as_str()).collect()
}

#[test]
fn points_call_for_their_orders() {
    let tg = target();
    assert_eq!(keys(&at_point(&all(), &tg, Point::Paid, false)), ["action-parameter-end-20261211T1130Z"]);
    assert_eq!(
        keys(&at_point(&all(), &tg, Point::Active, false)),
        ["action-parameter-end-20261211T1130Z", "action-scale-up-trainers"]
    );
    assert_eq!(
        keys(&at_point(&all(), &tg, Point::Ended, false)),
        ["action-parameter-clear", "action-scale-down-trainers-end-20261211T1130Z"]
    );
    let up = &at_point(&all(), &tg, Point::Active, true)[1];
    assert_eq!(up.order, Order::SetCapacity { group: "trainers".into(), desired: 2 });
    assert!(up.dry_run);
    let Order::PublishParameter { name, value } = &at_point(&all(), &tg, Point::Paid, false)[0].order else {
        panic!("not a parameter");
    };
    assert_eq!(name, "/capblock/p5/current");
    let v: serde_json::Value = serde_json::from_str(value).unwrap();
    assert_eq!(v["reservation_id"], "cr-0123456789abcdef0");
    assert_eq!(v["availability_zone"], "us-east-1a");
    assert_eq!(v["end"], "2026-12-11T11:30:00Z");
}

#[test]
fn lead_orders_are_due_from_their_lead_until_termination() {
    let tg = target(); // termination 11 Dec 11:00
    assert!(due(&all(), &tg, t(11, 10, 14), false).is_empty());
    assert_eq!(keys(&due(&all(), &tg, t(11, 10, 15), false)), ["action-scale-down-trainers-end-20261211T1130Z"]);
    let both = due(&all(), &tg, t(11, 10, 30), false);
    assert_eq!(
        keys(&both),
        [
            "action-scale-down-trainers-end-20261211T1130Z",
            "action-run-command-capblock-checkpoint-30m-end-20261211T1130Z"
        ]
    );
    assert_eq!(
        both[1].order,
        Order::RunCommand {
            document: "capblock-checkpoint".into(),
            comment: "capblock cr-0123456789abcdef0 30m 20261211T1130Z".into()
        }
    );
    // After termination a command finds no instance; the scale-down is still due.
    assert_eq!(keys(&due(&all(), &tg, t(11, 11, 0), false)), ["action-scale-down-trainers-end-20261211T1130Z"]);
}

#[test]
fn an_extension_makes_lead_orders_due_again_under_new_keys() {
    let mut tg = target();
    let before = keys(&due(&all(), &tg, t(11, 10, 30), false)).iter().map(|s| s.to_string()).collect::<Vec<_>>();
    tg.block.end = t(12, 11, 30);
    assert!(due(&all(), &tg, t(11, 10, 30), false).is_empty(), "the new end is a day away");
    let after = due(&all(), &tg, t(12, 10, 30), false);
    assert!(after.iter().all(|p| !before.contains(&p.key.to_string())));
}

#[test]
fn command_results_wait_for_every_instance() {
    let mut r: BTreeMap<String, Invocation> =
        [("i-1".to_string(), Invocation::Succeeded), ("i-2".to_string(), Invocation::Running)].into();
    assert_eq!(command_summary(&r), None);
    r.insert("i-2".into(), Invocation::Failed("TimedOut".into()));
    let s = command_summary(&r).unwrap();
    assert_eq!(s.ran, ["i-1"]);
    assert_eq!(s.failed, [("i-2".to_string(), "TimedOut".to_string())]);
}

#[test]
fn messages_go_to_the_blocks_thread_and_say_dry_run() {
    let p = &at_point(&all(), &target(), Point::Active, true)[1];
    let m = announce_done(p, "");
    assert_eq!(m.thread_id, "cr-0123456789abcdef0");
    assert!(m.title.starts_with("Dry run"), "{}", m.title);
    assert!(m.description.contains("Would set the desired capacity of the group `trainers` to 2"), "{}", m.description);
    let f = announce_failed(p, "AccessDenied");
    assert!(f.description.contains("AccessDenied") && f.description.contains("retries"));
    let r = announce_command_result(p, &["i-1".into()], &[("i-2".into(), "Failed".into())]);
    assert!(
        r.description.contains("Ran on: i-1") && r.description.contains("Failed on: i-2 (Failed)"),
        "{}",
        r.description
    );
}

#[test]
fn comments_fit_ssm() {
    let c = command_comment(&"cr-".repeat(60), 30, t(1, 0, 0));
    assert_eq!(c.len(), 100);
}

#[test]
fn current_orders_follow_the_blocks_state_and_the_clock() {
    let tg = target(); // termination 12-11 11:00; scale-down lead 45, command lead 30
    let keys_at = |state, now| keys(&current(&all(), &tg, state, now, false)).join(" ");
    assert_eq!(keys_at(BlockState::PaymentPending, t(9, 12, 0)), "", "nothing before it is paid");
    assert_eq!(keys_at(BlockState::Scheduled, t(9, 12, 0)), "action-parameter-end-20261211T1130Z");
    assert_eq!(
        keys_at(BlockState::Active, t(10, 12, 0)),
        "action-parameter-end-20261211T1130Z action-scale-up-trainers"
    );
    // Past the scale-down lead: no scale-up (a block found active this late is not scaled up
    // only to be scaled down), the scale-down instead.
    assert_eq!(
        keys_at(BlockState::Active, t(11, 10, 20)),
        "action-parameter-end-20261211T1130Z action-scale-down-trainers-end-20261211T1130Z"
    );
    assert_eq!(
        keys_at(BlockState::Active, t(11, 10, 30)),
        "action-parameter-end-20261211T1130Z action-scale-down-trainers-end-20261211T1130Z \
         action-run-command-capblock-checkpoint-30m-end-20261211T1130Z"
    );
    assert_eq!(keys_at(BlockState::Expired, t(11, 12, 0)), "", "the end's orders come with the move");
}

/// A rule of UltraServers (u-trn2x64): the only kind whose blocks can join a resource group.
fn ultra_limits() -> ActionLimits {
    ActionLimits { ultraserver_instance_types: vec!["trn2u.48xlarge".into()], ..limits() }
}

#[test]
fn a_rule_of_instances_keeps_a_reservation_group_in_its_own_account_only() {
    let (actions, problems) = validate(&[group_spec(None)], &limits());
    assert_eq!((actions, problems), (vec![Action::ReservationGroup { name: None }], vec![]));
    // In a member account the hand-off role may not make groups.
    let member = ActionLimits { in_member_account: true, ..limits() };
    let (actions, problems) = validate(&[group_spec(None)], &member);
    assert!(actions.is_empty());
    assert_eq!(fields(&problems), ["actions[0].kind"]);
    assert!(problems[0].1.contains("handoff_account"), "{problems:?}");
}

fn group_spec(name: Option<&str>) -> ActionSpec {
    ActionSpec::ReservationGroup { name: name.map(str::to_string) }
}

#[test]
fn a_reservation_group_is_named_within_resource_groups_and_capblocks_limits() {
    let specs = specs_of("[[actions]]\nkind = \"reservation_group\"\n[[actions]]\nkind = \"publish_parameter\"");
    let (actions, problems) = validate(&specs, &ultra_limits());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(actions[0], Action::ReservationGroup { name: None });
    // `rules show` writes it back as it was written.
    assert_eq!(ActionSpec::from(&actions[0]), group_spec(None));

    let long = format!("capblock-{}", "a".repeat(291));
    for good in ["capblock-p5", "capblock-team.a_1", long.as_str()] {
        let (actions, problems) = validate(&[group_spec(Some(good))], &ultra_limits());
        assert!(problems.is_empty() && actions.len() == 1, "{good}: {problems:?}");
    }
    let too_long = format!("capblock-{}", "a".repeat(292));
    for bad in ["", "capblock-", "capblock-a b", "capblock-a/b", "capblock-é", too_long.as_str()] {
        let (actions, problems) = validate(&[group_spec(Some(bad))], &ultra_limits());
        assert!(actions.is_empty(), "{bad:?}");
        assert_eq!(fields(&problems), ["actions[0].name"], "{bad:?}");
    }
    // Outside the IAM policy's groups, and AWS's reserved prefix.
    for outside in ["trainers", "AWS-capblock-x", "awscapblock"] {
        let (_, problems) = validate(&[group_spec(Some(outside))], &ultra_limits());
        assert_eq!(fields(&problems), ["actions[0].name"], "{outside}");
    }
    assert!(validate(&[group_spec(Some("trainers"))], &ultra_limits()).1[0].1.contains("capblock-*"));
    assert!(!crate::domain::actions::is_reservation_group_name("Aws-x"));

    let (actions, problems) = validate(&[group_spec(None), group_spec(Some("capblock-x"))], &ultra_limits());
    assert_eq!(fields(&problems), ["actions[1].kind"], "a block goes into one group");
    assert_eq!(actions.len(), 1);
}

#[test]
fn an_ultraserver_group_holds_one_instance_type() {
    let mut l = limits();
    l.ultraserver_instance_types = vec!["p6e-gb200.36xlarge".into(), "p6e-gb200.36xlarge".into()];
    assert!(validate(&[group_spec(None)], &l).1.is_empty(), "x72 and x36 share one type");
    l.ultraserver_instance_types.push("trn2u.48xlarge".into());
    let (actions, problems) = validate(&[group_spec(None)], &l);
    assert!(actions.is_empty());
    assert!(problems[0].1.contains("p6e-gb200.36xlarge, trn2u.48xlarge"), "{problems:?}");
}

#[test]
fn the_reservation_goes_into_the_group_once_paid_and_out_at_the_end() {
    let tg = target();
    let with_group = |name: Option<&str>| vec![Action::ReservationGroup { name: name.map(str::to_string) }];
    let add = at_point(&with_group(None), &tg, Point::Paid, false);
    assert_eq!(keys(&add), ["action-reservation-group-add-capblock-prod-p5"]);
    assert_eq!(add[0].order, Order::GroupReservation { group: "capblock-prod-p5".into() });
    // Active and extended plan the same order under the same key: once per block.
    for point in [Point::Active, Point::Extended] {
        assert_eq!(at_point(&with_group(None), &tg, point, false), add);
    }
    let custom = at_point(&with_group(Some("capblock-gpu")), &tg, Point::Ended, false);
    assert_eq!(keys(&custom), ["action-reservation-group-remove-capblock-gpu"]);
    assert_eq!(custom[0].order, Order::UngroupReservation { group: "capblock-gpu".into() });
    // Never paid, never added: nothing to take out.
    let mut failed = tg.clone();
    failed.block.state = BlockState::PaymentFailed;
    assert!(at_point(&with_group(None), &failed, Point::Ended, false).is_empty());
    let mut released = tg.clone();
    released.block.state = BlockState::Released;
    assert_eq!(at_point(&with_group(None), &released, Point::Ended, false).len(), 1);

    // Before the start (scheduled), so a launch at the start lands in it; not before payment.
    let mut actions = all();
    actions.push(Action::ReservationGroup { name: None });
    for (state, now, want) in [
        (BlockState::PaymentPending, t(9, 12, 0), ""),
        (
            BlockState::Scheduled,
            t(9, 12, 0),
            "action-parameter-end-20261211T1130Z action-reservation-group-add-capblock-prod-p5",
        ),
        (
            BlockState::Active,
            t(10, 12, 0),
            "action-parameter-end-20261211T1130Z action-reservation-group-add-capblock-prod-p5 action-scale-up-trainers",
        ),
    ] {
        assert_eq!(keys(&current(&actions, &tg, state, now, false)).join(" "), want, "{state:?} at {now}");
    }
    let p = &current(&actions, &tg, BlockState::Scheduled, t(9, 12, 0), true)[1];
    assert!(
        announce_done(p, "")
            .description
            .starts_with("Would add the block's reservation to the capacity reservation group `capblock-prod-p5`")
    );
}

#[test]
fn an_ultraserver_block_goes_into_a_group_for_its_instance_type() {
    let mut b = target().block;
    assert_eq!(ReservationPool::of(&b), ReservationPool::Reservations);
    b.ultraserver = true;
    b.instance_type = "p6e-gb200.36xlarge".parse().unwrap();
    assert_eq!(
        ReservationPool::of(&b),
        ReservationPool::UltraServerBlocks { instance_type: "p6e-gb200.36xlarge".into() }
    );
}

#[test]
fn a_group_outside_the_blocks_zone_is_warned_of() {
    let p = &at_point(&all(), &target(), Point::Active, false)[1];
    assert_eq!(zone_warning(p, "trainers", &["us-east-1b".into(), "us-east-1a".into()]), None);
    let w = zone_warning(p, "trainers", &["us-east-1b".into()]).expect("a warning");
    assert_eq!(
        w.description,
        "Group `trainers` is in us-east-1b, the block is in us-east-1a: nothing it launches lands in the block."
    );
    assert_eq!(w.thread_id, "cr-0123456789abcdef0");
    assert_eq!(w.event_type, "action-warning");
    assert!(zone_warning(p, "trainers", &[]).unwrap().description.contains("in no Availability Zone"));
}

// ---------------------------------------------------------------------------------------------
// scale_nodegroup
// ---------------------------------------------------------------------------------------------

fn nodegroup_spec(cluster: &str, nodegroup: &str, desired: i64, min: Option<i64>, max: Option<i64>) -> ActionSpec {
    ActionSpec::ScaleNodegroup {
        cluster: cluster.into(),
        nodegroup: nodegroup.into(),
        desired,
        min,
        max,
        down_lead_minutes: 45,
    }
}

fn nodegroup_action(desired: u32) -> Action {
    let target = NodegroupTarget { cluster: "train".into(), nodegroup: "gpu".into(), desired, min: None, max: None };
    Action::ScaleNodegroup { target, down_lead_minutes: 45 }
}

fn sized(min: u32, max: u32, desired: u32) -> NodegroupScaling {
    NodegroupScaling { min, max, desired }
}

#[test]
fn a_node_group_action_reads_from_toml_and_shows_back_the_same() {
    let specs = specs_of(
        r#"
        [[actions]]
        kind = "scale_nodegroup"
        cluster = "train"
        nodegroup = "gpu"
        desired = 4
        down_lead_minutes = 45
        [[actions]]
        kind = "scale_nodegroup"
        cluster = "train"
        nodegroup = "gpu-2"
        desired = 2
        min = 1
        max = 8
        down_lead_minutes = 30
        "#,
    );
    let (actions, problems) = validate(&specs, &limits());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(actions[0], nodegroup_action(4));
    assert_eq!(
        actions[1],
        Action::ScaleNodegroup {
            target: NodegroupTarget {
                cluster: "train".into(),
                nodegroup: "gpu-2".into(),
                desired: 2,
                min: Some(1),
                max: Some(8)
            },
            down_lead_minutes: 30
        }
    );
    let shown: Vec<ActionSpec> = actions.iter().map(ActionSpec::from).collect();
    assert_eq!(shown, specs);
    // Unset bounds are not written back as keys.
    let text = toml::to_string(&shown[0]).unwrap();
    assert!(!text.contains("min =") && !text.contains("max ="), "{text}");
    let r: Result<ActionSpec, _> = toml::from_str(
        "kind = \"scale_nodegroup\"\ncluster = \"c\"\nnodegroup = \"n\"\ndesired = 1\ndown_lead_minutes = 30\nend_desired = 0\n",
    );
    assert!(r.is_err(), "unknown keys are refused");
}

#[test]
fn bad_node_group_actions_are_named_by_field() {
    let specs = [
        nodegroup_spec("", "gpu", 1, None, None),
        nodegroup_spec("train", "", 1, None, None),
        nodegroup_spec("-train", "gpu!", 1, None, None),
        nodegroup_spec(&"c".repeat(101), &"n".repeat(64), 1, None, None),
        nodegroup_spec("train", "gpu", -1, None, None),
        nodegroup_spec("train", "a", 5, None, None),
        nodegroup_spec("train", "b", 2, Some(3), None),
        nodegroup_spec("train", "c", 2, None, Some(1)),
        nodegroup_spec("train", "d", 0, Some(-1), Some(0)),
        nodegroup_spec("train", "e", 2, Some(1), Some(3)),
    ];
    let (actions, mut problems) = validate(&specs, &limits());
    assert_eq!(actions.len(), 1, "only e: {actions:?}");
    // The same node group twice in one rule.
    let twice = [nodegroup_spec("train", "e", 2, Some(1), Some(3)), nodegroup_spec("train", "e", 1, None, None)];
    let (once, more) = validate(&twice, &limits());
    assert_eq!(once.len(), 1);
    problems.extend(more.into_iter().map(|(f, p)| (f.replace("[1]", "[10]"), p)));
    assert_eq!(
        fields(&problems),
        [
            "actions[0].cluster",
            "actions[1].nodegroup",
            "actions[2].cluster",
            "actions[2].nodegroup",
            "actions[3].cluster",
            "actions[3].nodegroup",
            "actions[4].desired",
            "actions[5].desired",
            "actions[6].min",
            "actions[7].max",
            "actions[8].min",
            "actions[8].max",
            "actions[10].nodegroup",
        ],
        "{problems:#?}"
    );
    assert!(problems[0].1.contains("empty") && problems[1].1.contains("empty"), "{problems:?}");
    assert!(problems[2].1.contains("EKS cluster name"), "{problems:?}");
    assert!(problems[8].1.contains("3 is above desired = 2"), "{problems:?}");
    assert!(problems[9].1.contains("1 is below desired = 2"), "{problems:?}");
    assert!(problems[12].1.contains("scaled by two actions"), "{problems:?}");
    // A maximum past what EKS holds in a managed node group is a typo, not a size.
    let (none, over) = validate(&[nodegroup_spec("train", "f", 2, None, Some(451))], &limits());
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(fields(&over), ["actions[0].max"]);
    assert!(over[0].1.contains("451 is above 450, the most nodes EKS holds"), "{over:?}");
    let (ok, fine) = validate(&[nodegroup_spec("train", "g", 2, None, Some(450))], &limits());
    assert!(fine.is_empty() && ok.len() == 1, "{fine:?}");
    // 0 nodes is a size; a node group of one cluster may share its name with another's.
    let (ok, problems) = validate(
        &[nodegroup_spec("a", "gpu", 0, Some(0), Some(1)), nodegroup_spec("b", "gpu", 4, None, None)],
        &limits(),
    );
    assert!(problems.is_empty() && ok.len() == 2, "{problems:?}");
    for good in ["0", "A-b_c", &"c".repeat(100)] {
        assert!(is_cluster_name(good), "{good}");
    }
    assert!(is_nodegroup_name(&"n".repeat(63)) && !is_nodegroup_name(&"n".repeat(64)));
    assert!(!is_cluster_name("_a") && !is_cluster_name("a.b") && !is_cluster_name("é"));
}

#[test]
fn a_node_group_goes_up_when_active_and_back_at_its_lead_or_the_end() {
    let tg = target(); // termination 12-11 11:00
    let actions = [nodegroup_action(4)];
    let up = at_point(&actions, &tg, Point::Active, false);
    assert_eq!(keys(&up), ["action-nodegroup-up-train/gpu"]);
    assert_eq!(
        up[0].order,
        Order::ScaleNodegroup(NodegroupTarget {
            cluster: "train".into(),
            nodegroup: "gpu".into(),
            desired: 4,
            min: None,
            max: None
        })
    );
    let back = "action-nodegroup-back-train/gpu-end-20261211T1130Z";
    assert_eq!(keys(&at_point(&actions, &tg, Point::Ended, false)), [back]);
    assert!(due(&actions, &tg, t(11, 10, 14), false).is_empty());
    assert_eq!(keys(&due(&actions, &tg, t(11, 10, 15), false)), [back]);
    assert_eq!(
        keys(&current(&actions, &tg, BlockState::Active, t(10, 12, 0), false)),
        ["action-nodegroup-up-train/gpu"]
    );
    // Past the lead: put back, not scaled up.
    assert_eq!(keys(&current(&actions, &tg, BlockState::Active, t(11, 10, 20), false)), [back]);
    // A block whose payment failed was never scaled up.
    let mut failed = target();
    failed.block.state = BlockState::PaymentFailed;
    assert!(at_point(&actions, &failed, Point::Ended, false).is_empty());
    // The record the scale-up keeps and the end reads.
    assert_eq!(nodegroup_record("train", "gpu"), "action-nodegroup-up-train/gpu-before");
    let m = announce_done(&at_point(&actions, &tg, Point::Active, true)[0], "");
    assert!(m.description.starts_with("Would scale node group `gpu` of cluster `train` to 4."), "{}", m.description);
}

#[test]
fn the_size_at_the_start_keeps_the_minimum_and_raises_the_maximum() {
    assert_eq!(scaled_up(sized(0, 2, 0), 4, None, None), Ok(sized(0, 4, 4)));
    assert_eq!(scaled_up(sized(1, 10, 1), 4, None, None), Ok(sized(1, 10, 4)));
    assert_eq!(scaled_up(sized(0, 2, 0), 4, Some(4), Some(6)), Ok(sized(4, 6, 4)));
    // A minimum above the desired size: the node group keeps that many anyway.
    assert_eq!(scaled_up(sized(3, 5, 3), 2, None, None), Ok(sized(3, 5, 3)));
    // Zero nodes with a maximum of one at least (EKS's maxSize).
    assert_eq!(scaled_up(sized(0, 1, 1), 0, None, None), Ok(sized(0, 1, 0)));
    // The rule's maximum below the minimum the node group keeps: no size is both.
    let e = scaled_up(sized(5, 8, 5), 2, None, Some(3)).unwrap_err();
    assert!(e.contains("minimum size 5 is above max = 3"), "{e}");
}

#[test]
fn the_end_puts_back_what_capblock_changed_and_leaves_what_others_did() {
    let record = NodegroupScaled { before: sized(0, 2, 0), set: sized(0, 4, 4) };
    // Untouched since: all back.
    assert_eq!(restored(&record, sized(0, 4, 4)), Restore { to: sized(0, 2, 0), kept: vec![] });
    // The Cluster Autoscaler moved the desired size: it stays, within the maximum put back.
    assert_eq!(restored(&record, sized(0, 4, 3)), Restore { to: sized(0, 2, 2), kept: vec![("desired", 4, 3)] });
    // Back already (an extension's second run, or an overlapping block's end): nothing changes.
    let again = restored(&record, sized(0, 2, 0));
    assert_eq!(again.to, sized(0, 2, 0));
    // Two blocks overlapping: the later one recorded the earlier one's size as "before"; the
    // earlier one's end put it back, so the later one's leaves it there.
    let later = NodegroupScaled { before: sized(0, 4, 4), set: sized(0, 4, 4) };
    assert_eq!(restored(&later, sized(0, 2, 0)).to, sized(0, 2, 0));
    // A minimum raised by the rule goes back; a maximum of at least one.
    let raised = NodegroupScaled { before: sized(0, 1, 0), set: sized(3, 3, 3) };
    assert_eq!(restored(&raised, sized(3, 3, 3)).to, sized(0, 1, 0));
}

/// A rule's `handoff_account` moves its workload actions to that account; the block's RAM share
/// and reservation group are the owner's and stay in the stack's account.
#[test]
fn workload_orders_run_in_the_hand_off_account_the_owners_stay_home() {
    let mut t = target();
    t.account = Some("222222222222".into());
    let plan = |order: Order| Planned { key: OutboxKey::action("k"), target: t.clone(), order, dry_run: false };
    let there = plan(Order::PublishParameter { name: "/capblock/p5/current".into(), value: "{}".into() });
    assert_eq!(runs_in(&there), Some("222222222222"));
    assert!(announce_done(&there, "ok").description.contains("in account 222222222222"));
    for home in [
        Order::ShareReservation { principals: vec![], tags: Default::default() },
        Order::UnshareReservation,
        Order::GroupReservation { group: "g".into() },
    ] {
        assert_eq!(runs_in(&plan(home)), None);
    }
    assert_eq!(runs_in(&Planned { target: target(), ..there }), None, "no account: the stack's own");
}

/// A node group's target is stored flat beside the action's kind or the order's name (rules and
/// outbox records written before it was one type read the same).
#[test]
fn a_node_group_target_is_stored_flat() {
    let action = Action::ScaleNodegroup {
        target: NodegroupTarget { cluster: "c".into(), nodegroup: "n".into(), desired: 2, min: None, max: Some(8) },
        down_lead_minutes: 30,
    };
    let stored = serde_json::to_value(&action).unwrap();
    assert_eq!(
        stored,
        serde_json::json!({"kind": "scale_nodegroup", "cluster": "c", "nodegroup": "n", "desired": 2, "max": 8, "down_lead_minutes": 30})
    );
    assert_eq!(serde_json::from_value::<Action>(stored).unwrap(), action);
    let order = Order::ScaleNodegroup(NodegroupTarget {
        cluster: "c".into(),
        nodegroup: "n".into(),
        desired: 2,
        min: Some(1),
        max: None,
    });
    let stored = serde_json::to_value(&order).unwrap();
    assert_eq!(
        stored,
        serde_json::json!({"order": "scale_nodegroup", "cluster": "c", "nodegroup": "n", "desired": 2, "min": 1})
    );
    assert_eq!(serde_json::from_value::<Order>(stored).unwrap(), order);
}
