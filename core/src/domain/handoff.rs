//! Hand-off to the workloads: the actions a rule may ask for at points of a block's life, and
//! when each is due. Pure: which order to run, under which key, is decided here; the app runs
//! it through the outbox (one record per (block, action), so it runs once and is retried until
//! it succeeds) and the adapters do the AWS calls.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::actions::{Action, NodegroupTarget, reservation_group_name};
use super::block::Block;
use super::lifecycle::BlockState;
use super::message_kind::MessageKind;
use super::outbox_key::OutboxKey;
use super::rule::Rule;
use super::share::SharePrincipal;
use super::slack::SlackMessage;

/// Every parameter capblock writes is under this path (the IAM policy grants no other).
pub const PARAMETER_ROOT: &str = "/capblock";
/// SendCommand's `Comment` is at most 100 characters: capblock's mark fits.
const COMMENT_CHARS: usize = 100;

/// The parameter a rule's `publish_parameter` writes.
pub fn parameter_name(rule_id: &str) -> String {
    format!("{PARAMETER_ROOT}/{rule_id}/current")
}

/// The block an action is about, the rule whose action it is, and the stack that acts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub block: Block,
    pub rule_id: String,
    /// The stack's name: part of the default name of the rule's reservation group, and the
    /// tag a group capblock creates carries. Empty in records stored before it was kept, which
    /// planned no order that needs it.
    #[serde(default)]
    pub stack: String,
    /// The account the actions run in (the rule's `handoff_account`, a consumer of the shared
    /// block); None: the stack's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

impl Target {
    /// The target of a block a rule bought (or a block tagged with the rule) in stack `stack`;
    /// `None` for a block of no rule, which no rule's actions concern.
    pub fn of(b: &Block, stack: &str) -> Option<Target> {
        Some(Target { rule_id: b.rule_id.clone()?, block: b.clone(), stack: stack.to_string(), account: None })
    }

    /// The target of a block of `rule` in stack `stack`: acting where the rule's hand-off runs.
    pub fn of_rule(b: &Block, stack: &str, rule: &Rule) -> Option<Target> {
        Target::of(b, stack).map(|t| Target { account: rule.handoff_account.clone(), ..t })
    }

    pub fn termination_time(&self) -> DateTime<Utc> {
        self.block.termination_time()
    }
}

/// One thing to do for one block. Stored as the body of an outbox record, so its fields are
/// everything the run needs (the rule may have changed or gone since).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "order", rename_all = "snake_case")]
pub enum Order {
    PublishParameter {
        name: String,
        value: String,
    },
    /// Deletes the parameter if it still names this block (another block of the rule may have
    /// taken it over).
    ClearParameter {
        name: String,
    },
    SetCapacity {
        group: String,
        desired: u32,
    },
    /// SendCommand to the block's running instances, marked with `comment` so a retry finds
    /// which instances already have it and sends to the others only.
    RunCommand {
        document: String,
        comment: String,
    },
    /// Reads the results of a sent command and reports them; not done while any instance is
    /// still running it.
    /// `commands`: instance id -> the command it was sent in.
    CommandResult {
        document: String,
        commands: BTreeMap<String, String>,
    },
    /// Creates the capacity reservation group unless it exists, then adds the block's
    /// reservation to it (GroupResources): a launch that targets the group lands in the block.
    GroupReservation {
        group: String,
    },
    /// Takes the block's reservation out of the group (UngroupResources).
    UngroupReservation {
        group: String,
    },
    /// Reads the node group's scaling configuration and records it in the block's thread
    /// ([`nodegroup_record`]: once, so a retry keeps what it was before capblock touched it),
    /// then sets it to `desired` nodes (UpdateNodegroupConfig): `min` and `max` as given, or
    /// its minimum kept and its maximum raised to at least `desired` ([`scaled_up`]).
    ScaleNodegroup(NodegroupTarget),
    /// Puts the node group back to what the record of its scale-up says it was
    /// ([`restored`]); nothing when capblock never scaled it up for this block.
    RestoreNodegroup {
        cluster: String,
        nodegroup: String,
    },
    /// Shares the block's reservation through an AWS RAM resource share of its own
    /// (`domain::share`): made once, its ARN recorded from RAM's answer and read back by later
    /// runs (a retry sends the same client token); done when RAM has associated it.
    ShareReservation {
        principals: Vec<SharePrincipal>,
        /// The rule's tags, for the `Block Shared` event.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        tags: BTreeMap<String, String>,
    },
    /// Deletes the block's resource share (the one recorded, or found by its tags), if any is left.
    UnshareReservation,
}

/// An EKS managed node group's size (its `scalingConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodegroupScaling {
    pub min: u32,
    pub max: u32,
    pub desired: u32,
}

impl std::fmt::Display for NodegroupScaling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "min {}, max {}, desired {}", self.min, self.max, self.desired)
    }
}

/// What capblock recorded, in the block's thread, before it scaled a node group up for the
/// block: the node group as it was, and as capblock set it. The scale-down at the end reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodegroupScaled {
    pub before: NodegroupScaling,
    pub set: NodegroupScaling,
}

/// The size a `scale_nodegroup` sets at the block's start, from the node group's size `before`:
/// `desired` nodes, `min` and `max` as the rule gives them; a minimum it does not give stays
/// (and a desired below it is raised to it: the node group keeps that many anyway), a maximum
/// it does not give is raised to at least the desired. An error when no size can be both (a
/// minimum kept above the rule's maximum).
pub fn scaled_up(
    before: NodegroupScaling,
    desired: u32,
    min: Option<u32>,
    max: Option<u32>,
) -> Result<NodegroupScaling, String> {
    let min_size = min.unwrap_or(before.min);
    let desired = desired.max(min_size);
    let max_size = max.unwrap_or(before.max.max(desired)).max(1);
    if min_size > max_size || desired > max_size {
        return Err(format!(
            "the node group's minimum size {min_size} is above max = {max_size}, which the rule sets: give min too"
        ));
    }
    Ok(NodegroupScaling { min: min_size, max: max_size, desired })
}

/// How a node group goes back at the end of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The size to set.
    pub to: NodegroupScaling,
    /// The sizes someone else changed since capblock set them (another block's scale-up, a
    /// person, the Cluster Autoscaler), which are left as they are: `(name, as capblock set it,
    /// as it is now)`.
    pub kept: Vec<(&'static str, u32, u32)>,
}

/// The node group's size at the end of a block, from what capblock recorded at the start and
/// what it is `now`: each of min, max and desired still as capblock set it goes back to what it
/// was; one changed since is left as it is (so two overlapping blocks scaling one node group
/// leave it as it was before the first, not as the first set it). The desired size is kept
/// within the minimum and maximum, as EKS requires.
pub fn restored(record: &NodegroupScaled, now: NodegroupScaling) -> Restore {
    let mut kept = Vec::new();
    let mut back = |name: &'static str, before: u32, set: u32, now: u32| {
        if now == set {
            before
        } else {
            kept.push((name, set, now));
            now
        }
    };
    let (b, s) = (record.before, record.set);
    let min = back("min", b.min, s.min, now.min);
    let max = back("max", b.max, s.max, now.max).max(min).max(1);
    let desired = back("desired", b.desired, s.desired, now.desired).clamp(min, max);
    Restore { to: NodegroupScaling { min, max, desired }, kept }
}

/// The name of a node group as it goes into outbox keys.
fn nodegroup_key(cluster: &str, nodegroup: &str) -> String {
    key_name(&format!("{cluster}/{nodegroup}"))
}

/// The milestone, in the block's thread, of the record of a node group's scale-up
/// ([`NodegroupScaled`]).
pub fn nodegroup_record(cluster: &str, nodegroup: &str) -> OutboxKey {
    nodegroup_up(cluster, nodegroup).then("before")
}

/// The outbox key of a node group's scale-up.
fn nodegroup_up(cluster: &str, nodegroup: &str) -> OutboxKey {
    OutboxKey::action(format!("nodegroup-up-{}", nodegroup_key(cluster, nodegroup)))
}

/// What a capacity reservation group capblock creates is made to hold (the EC2 user guide,
/// "Capacity Reservation groups" and "Create a resource group for UltraServer Capacity Blocks").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationPool {
    /// Capacity reservations of any kind, instance Capacity Blocks among them.
    Reservations,
    /// UltraServer Capacity Blocks of one instance type: the guide makes their group with the
    /// pool's instance type and reservation type, and a launch into it that finds no room fails.
    UltraServerBlocks { instance_type: String },
}

impl ReservationPool {
    /// The kind of group the block's reservation goes into.
    pub fn of(b: &Block) -> ReservationPool {
        if b.ultraserver {
            ReservationPool::UltraServerBlocks { instance_type: b.instance_type.to_string() }
        } else {
            ReservationPool::Reservations
        }
    }
}

/// An order for a block under its outbox key, dry-run or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub key: OutboxKey,
    pub target: Target,
    pub order: Order,
    /// Announce what would be done, do nothing.
    pub dry_run: bool,
}

/// The lifecycle points actions hang on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Paid: payment succeeded, or the block was found scheduled or active.
    Paid,
    Active,
    /// The end moved later (a paid extension).
    Extended,
    /// Expired, released or payment failed.
    Ended,
}

/// The longest name an outbox key carries as it is. Every key built here adds less than 100
/// bytes to the name, and DynamoDB limits a sort key to 1,024 bytes.
const KEY_NAME_BYTES: usize = 768;

/// A group's or document's name as it goes into an outbox key: the name itself while it fits
/// (so the keys of records stored before stay the same, and a key says what it is about), a
/// hash of it when it does not (a name from a rule stored before names were checked by bytes).
/// SHA-256: two names of one rule never share a key, so neither action is skipped as done.
fn key_name(name: &str) -> String {
    if name.len() <= KEY_NAME_BYTES {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("sha256-{hex}")
}

fn stamp(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%MZ").to_string()
}

fn parameter_value(t: &Target) -> String {
    serde_json::json!({
        "reservation_id": t.block.reservation_id,
        "region": t.block.region.to_string(),
        "availability_zone": t.block.availability_zone,
        "instance_type": t.block.instance_type.to_string(),
        "instance_count": t.block.instance_count,
        "start": t.block.start.to_rfc3339_opts(SecondsFormat::Secs, true),
        "end": t.block.end.to_rfc3339_opts(SecondsFormat::Secs, true),
        "termination_time": t.termination_time().to_rfc3339_opts(SecondsFormat::Secs, true),
    })
    .to_string()
}

fn restore_nodegroup(t: &Target, cluster: &str, nodegroup: &str, dry_run: bool) -> Planned {
    // Keyed by the end, as a group's scale-down: after an extension it runs again before the
    // new end (a no-op when the node group is back already).
    Planned {
        key: OutboxKey::action(format!(
            "nodegroup-back-{}-end-{}",
            nodegroup_key(cluster, nodegroup),
            stamp(t.block.end)
        )),
        target: t.clone(),
        order: Order::RestoreNodegroup { cluster: cluster.to_string(), nodegroup: nodegroup.to_string() },
        dry_run,
    }
}

fn scale_down(t: &Target, group: &str, dry_run: bool) -> Planned {
    // Keyed by the end: after an extension the group goes down again before the new end.
    Planned {
        key: OutboxKey::action(format!("scale-down-{}-end-{}", key_name(group), stamp(t.block.end))),
        target: t.clone(),
        order: Order::SetCapacity { group: group.to_string(), desired: 0 },
        dry_run,
    }
}

/// The orders a lifecycle point calls for.
pub fn at_point(actions: &[Action], t: &Target, point: Point, dry_run: bool) -> Vec<Planned> {
    let plan = |key: OutboxKey, order: Order| Planned { key, target: t.clone(), order, dry_run };
    let mut out = Vec::new();
    for a in actions {
        match (a, point) {
            (Action::PublishParameter, Point::Paid | Point::Active | Point::Extended) => {
                let name = parameter_name(&t.rule_id);
                out.push(plan(
                    OutboxKey::action(format!("parameter-end-{}", stamp(t.block.end))),
                    Order::PublishParameter { value: parameter_value(t), name },
                ));
            }
            (Action::PublishParameter, Point::Ended) => {
                out.push(plan(
                    OutboxKey::action("parameter-clear"),
                    Order::ClearParameter { name: parameter_name(&t.rule_id) },
                ));
            }
            (Action::ScaleGroup { group, desired, .. }, Point::Active) => out.push(plan(
                OutboxKey::action(format!("scale-up-{}", key_name(group))),
                Order::SetCapacity { group: group.clone(), desired: *desired },
            )),
            // A group that missed its scale-down (the tracker did not run in the window) goes
            // to 0 at the end anyway: same key, so never twice.
            (Action::ScaleGroup { group, .. }, Point::Ended) => out.push(scale_down(t, group, dry_run)),
            (Action::ScaleNodegroup { target, .. }, Point::Active) => {
                out.push(plan(nodegroup_up(&target.cluster, &target.nodegroup), Order::ScaleNodegroup(target.clone())))
            }
            // As a group's: one that missed its lead goes back at the end anyway (same key). A
            // block whose payment failed was never active, so never scaled up.
            (Action::ScaleNodegroup { target, .. }, Point::Ended) if t.block.state != BlockState::PaymentFailed => {
                out.push(restore_nodegroup(t, &target.cluster, &target.nodegroup, dry_run))
            }
            // Once per block: the reservation keeps its id when the block is extended.
            (Action::ReservationGroup { name }, Point::Paid | Point::Active | Point::Extended) => {
                let group = reservation_group_name(&t.stack, &t.rule_id, name.as_deref());
                out.push(plan(
                    OutboxKey::action(format!("reservation-group-add-{}", key_name(&group))),
                    Order::GroupReservation { group },
                ));
            }
            // A block whose payment failed was never paid, so never added.
            (Action::ReservationGroup { name }, Point::Ended) if t.block.state != BlockState::PaymentFailed => {
                let group = reservation_group_name(&t.stack, &t.rule_id, name.as_deref());
                out.push(plan(
                    OutboxKey::action(format!("reservation-group-remove-{}", key_name(&group))),
                    Order::UngroupReservation { group },
                ));
            }
            _ => {}
        }
    }
    out
}

/// The share orders of a rule that shares its blocks (`share_with`): at a paid point the block
/// goes into a resource share of its own (once: a block keeps its reservation when extended),
/// and at its end the share is deleted. A block whose payment failed was never shared. EC2
/// shares a block only once it is `scheduled` or `active`: `Paid` is planned only then (see
/// [`share_current`]; the tracker's payment-succeeded move sees the block scheduled).
pub fn share_at_point(rule: &Rule, t: &Target, point: Point, dry_run: bool) -> Vec<Planned> {
    if rule.share_with.is_empty() {
        return Vec::new();
    }
    let plan = |key: OutboxKey, order: Order| vec![Planned { key, target: t.clone(), order, dry_run }];
    match point {
        Point::Paid | Point::Active | Point::Extended => {
            plan(share_key(), Order::ShareReservation { principals: rule.share_with.clone(), tags: rule.tags.clone() })
        }
        Point::Ended if t.block.state != BlockState::PaymentFailed => plan(unshare_key(), Order::UnshareReservation),
        _ => Vec::new(),
    }
}

/// The share order a block in `state` calls for: shared while `scheduled` or `active`, never
/// before (EC2 refuses, and a block whose payment fails must not reach another account).
pub fn share_current(rule: &Rule, t: &Target, state: BlockState, dry_run: bool) -> Vec<Planned> {
    if matches!(state, BlockState::Scheduled | BlockState::Active) {
        share_at_point(rule, t, Point::Paid, dry_run)
    } else {
        Vec::new()
    }
}

/// The outbox keys of a block's share orders: one share and one deletion per block.
pub fn share_key() -> OutboxKey {
    OutboxKey::action("share")
}

pub fn unshare_key() -> OutboxKey {
    OutboxKey::action("unshare")
}

/// Every order a block in `state` calls for at `now`, whatever happened before: the tracker
/// plans these on each run and the outbox keeps the ones already planned, so a run that was
/// missed, a crash or a block adopted late still gets its orders, each once.
/// - paid (scheduled or active): the parameter, for the current end, and the reservation added
///   to the rule's reservation group (before the start, so a launch at the start lands in it);
/// - active: each group scaled up, unless its scale-down is already due (scaling up for minutes
///   would only launch instances EC2 is about to terminate), and the lead-time orders due.
pub fn current(actions: &[Action], t: &Target, state: BlockState, now: DateTime<Utc>, dry_run: bool) -> Vec<Planned> {
    let mut out = Vec::new();
    if matches!(state, BlockState::Scheduled | BlockState::Active) {
        let paid = at_point(actions, t, Point::Paid, dry_run);
        out.extend(
            paid.into_iter()
                .filter(|p| matches!(p.order, Order::PublishParameter { .. } | Order::GroupReservation { .. })),
        );
    }
    if state == BlockState::Active {
        let due_now = due(actions, t, now, dry_run);
        let down: BTreeSet<String> = due_now.iter().filter_map(|p| scaled(&p.order)).collect();
        let up = at_point(actions, t, Point::Active, dry_run);
        // The parameter came with the paid orders above; the groups and node groups go up here.
        out.extend(up.into_iter().filter(|p| scaled(&p.order).is_some_and(|s| !down.contains(&s))));
        out.extend(due_now);
    }
    out
}

/// What an order scales (up or down), to match a scale-up with its scale-down; `None` for an
/// order that scales nothing.
fn scaled(order: &Order) -> Option<String> {
    match order {
        Order::SetCapacity { group, .. } => Some(format!("group:{group}")),
        Order::ScaleNodegroup(NodegroupTarget { cluster, nodegroup, .. })
        | Order::RestoreNodegroup { cluster, nodegroup } => Some(format!("nodegroup:{cluster}/{nodegroup}")),
        _ => None,
    }
}

/// The lead-time orders due at `now` for an active block: each once its lead is reached, and
/// only before the termination time (a command sent after it would find no instance).
pub fn due(actions: &[Action], t: &Target, now: DateTime<Utc>, dry_run: bool) -> Vec<Planned> {
    let term = t.termination_time();
    let reached = |lead: u32| now >= term - Duration::minutes(i64::from(lead));
    let mut out = Vec::new();
    for a in actions {
        match a {
            Action::ScaleGroup { group, down_lead_minutes, .. } if reached(*down_lead_minutes) => {
                out.push(scale_down(t, group, dry_run));
            }
            Action::ScaleNodegroup { target, down_lead_minutes } if reached(*down_lead_minutes) => {
                out.push(restore_nodegroup(t, &target.cluster, &target.nodegroup, dry_run));
            }
            Action::RunCommand { document, lead_minutes } if reached(*lead_minutes) && now < term => {
                let comment = command_comment(&t.block.reservation_id, *lead_minutes, t.block.end);
                out.push(Planned {
                    key: OutboxKey::action(format!(
                        "run-command-{}-{lead_minutes}m-end-{}",
                        key_name(document),
                        stamp(t.block.end)
                    )),
                    target: t.clone(),
                    order: Order::RunCommand { document: document.clone(), comment },
                    dry_run,
                });
            }
            _ => {}
        }
    }
    out
}

/// The mark a command carries: the block, the lead and the end (at most 100 characters).
pub fn command_comment(reservation_id: &str, lead_minutes: u32, end: DateTime<Utc>) -> String {
    let mut c = format!("capblock {reservation_id} {lead_minutes}m {}", stamp(end));
    c.truncate(COMMENT_CHARS);
    c
}

/// One instance's outcome of a command, as SSM reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Invocation {
    /// Still pending, in progress or delayed.
    Running,
    Succeeded,
    /// Failed, timed out, cancelled or undeliverable: SSM's status text.
    Failed(String),
}

/// Which instances ran a command, and which failed it (with SSM's status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSummary {
    pub ran: Vec<String>,
    pub failed: Vec<(String, String)>,
}

/// The result of a command once every instance finished, or `None` while any still runs.
pub fn command_summary(results: &BTreeMap<String, Invocation>) -> Option<CommandSummary> {
    if results.values().any(|r| *r == Invocation::Running) {
        return None;
    }
    let ran = results.iter().filter(|(_, r)| **r == Invocation::Succeeded).map(|(i, _)| i.clone()).collect();
    let failed = results
        .iter()
        .filter_map(|(i, r)| match r {
            Invocation::Failed(why) => Some((i.clone(), why.clone())),
            _ => None,
        })
        .collect();
    Some(CommandSummary { ran, failed })
}

/// What an order does, for people: the first line of its Slack message.
pub fn describe(order: &Order) -> String {
    match order {
        Order::PublishParameter { name, .. } => format!("publish the block to the SSM parameter `{name}`"),
        Order::ClearParameter { name } => format!("clear the SSM parameter `{name}`"),
        Order::SetCapacity { group, desired } => {
            format!("set the desired capacity of the group `{group}` to {desired}")
        }
        Order::RunCommand { document, .. } => {
            format!("send the Run Command document `{document}` to the block's instances")
        }
        Order::CommandResult { document, .. } => format!("collect the results of `{document}`"),
        Order::GroupReservation { group } => {
            format!("add the block's reservation to the capacity reservation group `{group}`")
        }
        Order::UngroupReservation { group } => {
            format!("take the block's reservation out of the capacity reservation group `{group}`")
        }
        Order::ScaleNodegroup(NodegroupTarget { cluster, nodegroup, desired, min, max }) => {
            let bounds = match (min, max) {
                (None, None) => String::new(),
                (Some(m), None) => format!(" (min {m})"),
                (None, Some(x)) => format!(" (max {x})"),
                (Some(m), Some(x)) => format!(" (min {m}, max {x})"),
            };
            format!("scale node group `{nodegroup}` of cluster `{cluster}` to {desired}{bounds}")
        }
        Order::RestoreNodegroup { cluster, nodegroup } => {
            format!("put node group `{nodegroup}` of cluster `{cluster}` back to its size before the block")
        }
        Order::ShareReservation { principals, .. } => format!(
            "share the block through AWS RAM with {}",
            principals.iter().map(SharePrincipal::describe).collect::<Vec<_>>().join(", ")
        ),
        Order::UnshareReservation => "delete the block's AWS RAM share".to_string(),
    }
}

/// The warning a share earns when RAM refused some of the rule's principals (an account
/// outside the Organization, say): the others have the block, these do not.
pub fn share_refused_warning(p: &Planned, refused: &[(String, String)]) -> SlackMessage {
    let lines: Vec<String> = refused.iter().map(|(who, why)| format!("• {who}: {why}")).collect();
    message(
        p,
        MessageKind::ActionWarning,
        "Hand-off warning: not shared with everyone the rule names".into(),
        format!(
            "AWS RAM did not share the block with:\n{}\nEC2 shares Capacity Blocks only inside the Organization: check `share_with`.",
            lines.join("\n")
        ),
    )
}

/// The warning a scaled-up group earns when none of its zones is the block's: every instance it
/// launches runs outside the block (a reservation serves only its own zone). `None` when the
/// group may launch in the block's zone. What its launch template targets is not read here.
pub fn zone_warning(p: &Planned, group: &str, zones: &[String]) -> Option<SlackMessage> {
    let az = &p.target.block.availability_zone;
    if zones.iter().any(|z| z == az) {
        return None;
    }
    let where_ = match zones {
        [] => "in no Availability Zone".to_string(),
        [one] => format!("in {one}"),
        many => format!("in {}", many.join(", ")),
    };
    let mut m = message(
        p,
        MessageKind::ActionWarning,
        "Hand-off warning: the group launches outside the block".into(),
        format!("Group `{group}` is {where_}, the block is in {az}: nothing it launches lands in the block."),
    );
    m.next_steps = vec![format!(
        "Add {az} (a subnet in it) to the group, and have its launch template target the reservation {} or the rule's reservation group.",
        p.target.block.reservation_id
    )];
    Some(m)
}

fn message(p: &Planned, kind: MessageKind, title: String, description: String) -> SlackMessage {
    SlackMessage {
        id: kind.message_id(&p.target.block.reservation_id, Some(&p.key)),
        title,
        description,
        next_steps: Vec::new(),
        keywords: vec![p.target.rule_id.clone(), p.target.block.instance_type.to_string()],
        thread_id: p.target.block.reservation_id.clone(),
        summary: format!("{} ({})", describe(&p.order), p.target.block.reservation_id),
        event_type: kind.event_type().into(),
        related_resources: vec![p.target.block.reservation_id.clone()],
    }
}

/// The account an order runs in when it is not the stack's own: the target's (the rule's
/// `handoff_account`), except for what only the block's owner can do (its RAM share, its
/// reservation group), which stays in the stack's account.
pub fn runs_in(p: &Planned) -> Option<&str> {
    match p.order {
        Order::ShareReservation { .. }
        | Order::UnshareReservation
        | Order::GroupReservation { .. }
        | Order::UngroupReservation { .. } => None,
        _ => p.target.account.as_deref(),
    }
}

/// The order ran (or, in dry-run, would have).
pub fn announce_done(p: &Planned, what: &str) -> SlackMessage {
    let (title, verb) =
        if p.dry_run { ("Dry run: hand-off action not run", "Would") } else { ("Hand-off action done", "Done:") };
    let there = runs_in(p).map_or(String::new(), |a| format!(" in account {a}"));
    message(p, MessageKind::ActionDone, title.into(), format!("{verb} {}{there}.\n{what}", describe(&p.order)))
}

/// How long after a block's end a failing order is still retried: past it, the group, document
/// or parameter the order is about is gone or was never there, and the order is dropped (said
/// once in the thread) rather than retried for ever.
pub const GIVE_UP_AFTER_END: Duration = Duration::hours(24);

/// Whether a failing order is dropped at `now` instead of retried.
pub fn gives_up(p: &Planned, now: DateTime<Utc>) -> bool {
    now >= p.target.block.end + GIVE_UP_AFTER_END
}

/// The order failed for the last time: it is dropped.
pub fn announce_given_up(p: &Planned, error: &str) -> SlackMessage {
    message(
        p,
        MessageKind::ActionGivenUp,
        "Hand-off action dropped".into(),
        format!(
            "Could not {}: {error}\nThe block ended more than a day ago; capblock stops retrying it.",
            describe(&p.order)
        ),
    )
}

/// The order failed; it is retried every run until it succeeds. Announced once per order.
pub fn announce_failed(p: &Planned, error: &str) -> SlackMessage {
    let mut m = message(
        p,
        MessageKind::ActionFailed,
        "Hand-off action failed: retrying".into(),
        format!(
            "Could not {}: {error}\ncapblock retries it every tracker run; the block's life goes on.",
            describe(&p.order)
        ),
    );
    m.next_steps = vec![match &p.order {
        Order::ScaleNodegroup(NodegroupTarget { cluster, .. }) | Order::RestoreNodegroup { cluster, .. } => format!(
            "Check the node group the rule names, and that the stack's HandoffClusters names `{cluster}` (its role may scale node groups of those clusters only)."
        ),
        _ => "Check the IAM policy and the group, document or parameter the rule names.".into(),
    }];
    m
}

/// The per-instance result of a command.
pub fn announce_command_result(p: &Planned, ran: &[String], failed: &[(String, String)]) -> SlackMessage {
    let failed_text: Vec<String> = failed.iter().map(|(i, why)| format!("{i} ({why})")).collect();
    let title = if failed.is_empty() { "Run Command finished" } else { "Run Command finished with failures" };
    let ran_text = if ran.is_empty() { "none".to_string() } else { ran.join(", ") };
    let failed_line = if failed.is_empty() { "none".to_string() } else { failed_text.join(", ") };
    message(p, MessageKind::ActionResult, title.into(), format!("Ran on: {ran_text}\nFailed on: {failed_line}"))
}

#[cfg(test)]
pub(crate) mod tests;
