//! The actions a rule may ask for (`[[actions]]`) and their validation. Apart from
//! `domain::handoff` (when each is due, under which key) so that `domain::rule` can validate
//! them without depending on blocks.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::ids::prefix;

/// SSM's limit on a document name (`DocumentName`: `^[a-zA-Z0-9_\-.]{3,128}$`). A name, never
/// an ARN: SendCommand needs an ARN only for a document shared from another account, and a
/// document of another account would run as root on the block's instances.
const DOCUMENT_NAME_BYTES: std::ops::RangeInclusive<usize> = 3..=128;
/// Auto Scaling's limit on a group name: 1-255 of the ASCII characters 33 to 126, no colon
/// (CreateAutoScalingGroup). Counted in bytes: the name goes into outbox keys, and DynamoDB
/// limits a sort key to 1,024 bytes.
const GROUP_NAME_BYTES: std::ops::RangeInclusive<usize> = 1..=255;
/// EKS's limit on a cluster name (CreateCluster: 1-100 of `[A-Za-z0-9_-]`, starting with a
/// letter or digit).
const CLUSTER_NAME_BYTES: std::ops::RangeInclusive<usize> = 1..=100;
/// EKS's limit on a managed node group name (CreateNodegroup: 1-63 of `[A-Za-z0-9_-]`,
/// starting with a letter or digit).
const NODEGROUP_NAME_BYTES: std::ops::RangeInclusive<usize> = 1..=63;
/// Most actions one rule may ask for: each is planned for each open block on every tracker run.
pub const MAX_ACTIONS: usize = 10;
/// AWS Resource Groups' limit on a group name (CreateGroup: 1-300 of `[a-zA-Z0-9_.-]`, not
/// starting with "aws" in any capitalization).
const RESERVATION_GROUP_NAME_BYTES: std::ops::RangeInclusive<usize> = 1..=300;
/// Every capacity reservation group capblock keeps is named so: the IAM policy grants
/// GroupResources and UngroupResources on groups of this prefix only, so a rule cannot make the
/// tracker fill a group of the account that is not capblock's.
pub const RESERVATION_GROUP_PREFIX: &str = "capblock-";

/// An action as an operator writes it in a rule (`[[actions]]`, `kind` = ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActionSpec {
    /// Write the block's reservation id, AZ and end to `/capblock/<rule>/current` once it is
    /// paid (again when it is extended); delete it when the block ends.
    PublishParameter {},
    /// Set the group's desired capacity to `desired` when the block becomes active, and to 0
    /// `down_lead_minutes` before the instances' termination time.
    ScaleGroup { group: String, desired: i64, down_lead_minutes: i64 },
    /// Send the SSM document to the block's running instances `lead_minutes` before the
    /// termination time.
    RunCommand { document: String, lead_minutes: i64 },
    /// Scale the EKS managed node group `nodegroup` of `cluster` to `desired` nodes when the
    /// block becomes active (`min` and `max` when given; otherwise its minimum stays and its
    /// maximum is raised to at least `desired`), and put it back to what it was
    /// `down_lead_minutes` before the instances' termination time.
    ScaleNodegroup {
        cluster: String,
        nodegroup: String,
        desired: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<i64>,
        down_lead_minutes: i64,
    },
    /// Keep a capacity reservation group (AWS Resource Groups) for the rule: created when
    /// missing, each block's reservation added once it is paid and taken out when it ends, so a
    /// launch template that targets the group launches into whichever block is current. `name`:
    /// the group's name, `capblock-<stack>-<rule>` when not given.
    ReservationGroup {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

/// A node group and the size a block's start scales it to: the rule's `scale_nodegroup` action
/// holds it, and the order the action plans carries it (`handoff::Order::ScaleNodegroup`). `min`,
/// `max`: None when the rule leaves them to the node group (its minimum stays, its maximum is
/// raised to at least `desired`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodegroupTarget {
    pub cluster: String,
    pub nodegroup: String,
    pub desired: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

/// A validated action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    PublishParameter,
    ScaleGroup {
        group: String,
        desired: u32,
        down_lead_minutes: u32,
    },
    RunCommand {
        document: String,
        lead_minutes: u32,
    },
    /// The node group scaled up at the block's start and back `down_lead_minutes` before its
    /// termination; the target's fields are stored flat, beside the lead.
    ScaleNodegroup {
        #[serde(flatten)]
        target: NodegroupTarget,
        down_lead_minutes: u32,
    },
    /// `name`: None for the default name, which only the stack's name completes
    /// ([`reservation_group_name`]).
    ReservationGroup {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

/// An action as a rule file writes it (`rules show`).
impl From<&Action> for ActionSpec {
    fn from(a: &Action) -> ActionSpec {
        match a {
            Action::PublishParameter => ActionSpec::PublishParameter {},
            Action::ScaleGroup { group, desired, down_lead_minutes } => ActionSpec::ScaleGroup {
                group: group.clone(),
                desired: i64::from(*desired),
                down_lead_minutes: i64::from(*down_lead_minutes),
            },
            Action::RunCommand { document, lead_minutes } => {
                ActionSpec::RunCommand { document: document.clone(), lead_minutes: i64::from(*lead_minutes) }
            }
            Action::ScaleNodegroup {
                target: NodegroupTarget { cluster, nodegroup, desired, min, max },
                down_lead_minutes,
            } => ActionSpec::ScaleNodegroup {
                cluster: cluster.clone(),
                nodegroup: nodegroup.clone(),
                desired: i64::from(*desired),
                min: min.map(i64::from),
                max: max.map(i64::from),
                down_lead_minutes: i64::from(*down_lead_minutes),
            },
            Action::ReservationGroup { name } => ActionSpec::ReservationGroup { name: name.clone() },
        }
    }
}

/// What the rule's validation needs to judge its actions.
pub struct ActionLimits {
    /// The shortest block the rule may buy, in minutes (shortest duration minus the tolerance).
    pub shortest_block_minutes: i64,
    /// The termination lead (30 min; 60 for UltraServers): a lead is counted from there.
    pub termination_lead_minutes: i64,
    /// The most instances a block of the rule has: a group scaled past it would launch
    /// instances the reservation cannot hold.
    pub max_instances: u32,
    /// The instance types of the UltraServer types the rule buys (empty for a rule of
    /// instances): a group for UltraServer Capacity Blocks is made for one instance type.
    pub ultraserver_instance_types: Vec<String>,
    /// The rule runs its actions in a member account (`handoff_account`), whose hand-off role
    /// (member.yaml) is given no Resource Groups permissions.
    pub in_member_account: bool,
}

/// Checks each action; problems are `(field, message)` like the rest of the rule's.
pub fn validate(specs: &[ActionSpec], limits: &ActionLimits) -> (Vec<Action>, Vec<(String, String)>) {
    if specs.len() > MAX_ACTIONS {
        let problem = (
            "actions".to_string(),
            format!(
                "{} actions; at most {MAX_ACTIONS} per rule (each runs for every block on every tracker run)",
                specs.len()
            ),
        );
        return (Vec::new(), vec![problem]);
    }
    let mut check = Checker {
        limits,
        // The longest a lead may be: the block's time before termination.
        room: limits.shortest_block_minutes - limits.termination_lead_minutes,
        seen: BTreeSet::new(),
        out: Vec::new(),
        problems: Vec::new(),
    };
    for (i, spec) in specs.iter().enumerate() {
        match spec {
            ActionSpec::PublishParameter {} => check.publish_parameter(i),
            ActionSpec::ScaleGroup { group, desired, down_lead_minutes } => {
                check.scale_group(i, group, *desired, *down_lead_minutes)
            }
            ActionSpec::RunCommand { document, lead_minutes } => check.run_command(i, document, *lead_minutes),
            ActionSpec::ScaleNodegroup { cluster, nodegroup, desired, min, max, down_lead_minutes } => {
                check.scale_nodegroup(i, (cluster, nodegroup), *desired, (*min, *max), *down_lead_minutes)
            }
            ActionSpec::ReservationGroup { name } => check.reservation_group(i, name),
        }
    }
    (check.out, check.problems)
}

/// One rule's actions being checked: one validator per action kind, each adding the action
/// when it holds and its problems when not. `seen` keys what two actions may not both do.
struct Checker<'l> {
    limits: &'l ActionLimits,
    /// The longest a lead may be, in minutes: the shortest block's time before termination.
    room: i64,
    seen: BTreeSet<String>,
    out: Vec<Action>,
    problems: Vec<(String, String)>,
}

impl Checker<'_> {
    /// A lead time in minutes: at least 1, and shorter than the block's time before termination.
    fn lead(&mut self, field: String, v: i64) -> Option<u32> {
        let room = self.room;
        if v < 1 {
            self.problems.push((field, format!("{v} is not a lead time: at least 1 minute")));
            None
        } else if v >= room {
            self.problems.push((
                field,
                format!(
                    "{v} minutes is longer than the block: the shortest block this rule buys has {room} minutes before its instances are terminated"
                ),
            ));
            None
        } else {
            u32::try_from(v).ok()
        }
    }

    /// `publish_parameter`: once per rule.
    fn publish_parameter(&mut self, i: usize) {
        let at = |f: &str| format!("actions[{i}].{f}");
        if !self.seen.insert("publish_parameter".to_string()) {
            self.problems.push((at("kind"), "publish_parameter is given twice".into()));
            return;
        }
        self.out.push(Action::PublishParameter);
    }

    /// `scale_group`: a valid group name, scaled by one action, to 1..=the block's instances.
    fn scale_group(&mut self, i: usize, group: &str, desired: i64, down_lead_minutes: i64) {
        let at = |f: &str| format!("actions[{i}].{f}");
        let before = self.problems.len();
        if !is_group_name(group) {
            self.problems.push((
                at("group"),
                format!(
                    "{:?} is not an Auto Scaling group name (1-255 ASCII letters, digits and punctuation, no colon or space)",
                    prefix(group)
                ),
            ));
        } else if !self.seen.insert(format!("group:{group}")) {
            self.problems.push((at("group"), format!("the group {group:?} is scaled by two actions")));
        }
        let desired = match u32::try_from(desired) {
            Ok(d) if d >= 1 && d <= self.limits.max_instances => Some(d),
            _ => {
                self.problems.push((
                    at("desired"),
                    format!(
                        "{desired} is not between 1 and {} (the most instances a block of this rule holds)",
                        self.limits.max_instances
                    ),
                ));
                None
            }
        };
        let lead = self.lead(at("down_lead_minutes"), down_lead_minutes);
        if let (Some(desired), Some(down_lead_minutes), true) = (desired, lead, self.problems.len() == before) {
            self.out.push(Action::ScaleGroup { group: group.to_string(), desired, down_lead_minutes });
        }
    }

    /// `run_command`: an SSM document named (never an ARN), once per lead time.
    fn run_command(&mut self, i: usize, document: &str, lead_minutes: i64) {
        let at = |f: &str| format!("actions[{i}].{f}");
        let before = self.problems.len();
        if document.is_empty() {
            self.problems.push((at("document"), "the document name is empty".into()));
        } else if document.starts_with("arn:") || document.contains([':', '/']) {
            self.problems.push((
                at("document"),
                format!(
                    "{:?} is an ARN: name the document instead; only this account's documents and AWS-owned ones (AWS-...) may run",
                    prefix(document)
                ),
            ));
        } else if !is_document_name(document) {
            self.problems.push((
                at("document"),
                format!("{:?} is not an SSM document name (3-128 letters, digits, _ - .)", prefix(document)),
            ));
        }
        let lead = self.lead(at("lead_minutes"), lead_minutes);
        if let (Some(lead_minutes), true) = (lead, self.problems.len() == before) {
            if !self.seen.insert(format!("command:{document}:{lead_minutes}")) {
                self.problems.push((at("document"), format!("{document:?} at {lead_minutes} minutes is given twice")));
                return;
            }
            self.out.push(Action::RunCommand { document: document.to_string(), lead_minutes });
        }
    }

    /// `scale_nodegroup`: valid EKS names, scaled by one action, sizes that EKS accepts.
    fn scale_nodegroup(
        &mut self,
        i: usize,
        (cluster, nodegroup): (&str, &str),
        desired: i64,
        (min, max): (Option<i64>, Option<i64>),
        down_lead_minutes: i64,
    ) {
        let at = |f: &str| format!("actions[{i}].{f}");
        let before = self.problems.len();
        let names_ok = match (check_cluster_name(cluster), check_nodegroup_name(nodegroup)) {
            (Ok(()), Ok(())) => true,
            (c, n) => {
                self.problems.extend(c.err().map(|why| (at("cluster"), why)));
                self.problems.extend(n.err().map(|why| (at("nodegroup"), why)));
                false
            }
        };
        if names_ok && !self.seen.insert(format!("nodegroup:{cluster}/{nodegroup}")) {
            self.problems.push((
                at("nodegroup"),
                format!("the node group {nodegroup:?} of cluster {cluster:?} is scaled by two actions"),
            ));
        }
        let desired = match u32::try_from(desired) {
            Ok(d) if d <= self.limits.max_instances => Some(d),
            _ => {
                self.problems.push((
                    at("desired"),
                    format!(
                        "{desired} is not between 0 and {} (the most instances a block of this rule holds)",
                        self.limits.max_instances
                    ),
                ));
                None
            }
        };
        let sizes = nodegroup_sizes(desired, min, max);
        self.problems.extend(sizes.iter().filter_map(|s| s.as_ref().err()).map(|(f, why)| (at(f), why.clone())));
        let lead = self.lead(at("down_lead_minutes"), down_lead_minutes);
        if let (Some(desired), [Ok(min), Ok(max)], Some(down_lead_minutes), true) =
            (desired, sizes, lead, self.problems.len() == before)
        {
            let target =
                NodegroupTarget { cluster: cluster.to_string(), nodegroup: nodegroup.to_string(), desired, min, max };
            self.out.push(Action::ScaleNodegroup { target, down_lead_minutes });
        }
    }

    /// `reservation_group`: once per rule, in this account, for one instance type.
    fn reservation_group(&mut self, i: usize, name: &Option<String>) {
        let at = |f: &str| format!("actions[{i}].{f}");
        let before = self.problems.len();
        if !self.seen.insert("reservation_group".to_string()) {
            self.problems.push((
                at("kind"),
                "reservation_group is given twice: a block's reservation goes into one group".into(),
            ));
            return;
        }
        if let Some(Err(why)) = name.as_deref().map(check_reservation_group_name) {
            self.problems.push((at("name"), why));
        }
        let mut types = self.limits.ultraserver_instance_types.clone();
        types.sort();
        types.dedup();
        if self.limits.in_member_account {
            // The member stack's hand-off role is not granted Resource Groups.
            self.problems.push((
                at("kind"),
                "reservation_group cannot run in the handoff_account: the member's hand-off role may not make groups; keep the group in this account (drop handoff_account) or target the block by its id (publish_parameter)".into(),
            ));
        }
        // Instance Capacity Blocks join a group too: the EC2 user guide's "Capacity
        // Reservation Resource Groups" page says a group supports all reservation types,
        // Capacity Blocks for ML included (an older sentence on the UltraServer page said
        // otherwise; infra/market-sim/README.md cites both). A rule buys one kind, so its
        // group holds one reservation type, as a launch must name one.
        if types.len() > 1 {
            self.problems.push((
                at("kind"),
                format!(
                    "a capacity reservation group for UltraServer Capacity Blocks holds one instance type, and this rule's UltraServer types name {}: split the rule",
                    types.join(", ")
                ),
            ));
        }
        if self.problems.len() == before {
            self.out.push(Action::ReservationGroup { name: name.clone() });
        }
    }
}

/// A node group's optional `min` and `max` sizes, each judged against `desired` (when it is
/// valid): `min <= desired <= max`, and a maximum of at least 1 (EKS's `maxSize`). A problem is
/// `(field, message)`.
/// The most nodes a managed node group holds (the EKS service quota "Nodes per managed node
/// group", 450): a larger `max` is a typo, and unbounded it would let one scale a cluster.
pub const MAX_NODEGROUP_SIZE: u32 = 450;

/// `min` and `max` of a node group scaled for a block; `max` at most `MAX_NODEGROUP_SIZE`.
fn nodegroup_sizes(
    desired: Option<u32>,
    min: Option<i64>,
    max: Option<i64>,
) -> [Result<Option<u32>, (&'static str, String)>; 2] {
    // EKS takes the sizes as 32-bit integers.
    let size = |v: i64| u32::try_from(v).ok().filter(|v| i32::try_from(*v).is_ok());
    let min = match min {
        None => Ok(None),
        Some(m) => match (size(m), desired) {
            (None, _) => Err(("min", format!("{m} is not a node group size (0 or more)"))),
            (Some(m), Some(d)) if m > d => Err(("min", format!("{m} is above desired = {d}"))),
            (Some(m), _) => Ok(Some(m)),
        },
    };
    let max = match max {
        None => Ok(None),
        Some(x) => match (size(x), desired) {
            (None, _) | (Some(0), _) => Err(("max", format!("{x} is not a node group maximum (1 or more)"))),
            (Some(x), Some(d)) if x < d => Err(("max", format!("{x} is below desired = {d}"))),
            (Some(x), _) if x > MAX_NODEGROUP_SIZE => Err((
                "max",
                format!("{x} is above {MAX_NODEGROUP_SIZE}, the most nodes EKS holds in a managed node group"),
            )),
            (Some(x), _) => Ok(Some(x)),
        },
    };
    [min, max]
}

/// Why `name` cannot be an EKS cluster's name.
fn check_cluster_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the cluster name is empty".into());
    }
    if !is_eks_name(name, &CLUSTER_NAME_BYTES) {
        return Err(format!(
            "{:?} is not an EKS cluster name (1-100 letters, digits, - and _, starting with a letter or digit)",
            prefix(name)
        ));
    }
    Ok(())
}

/// Why `name` cannot be an EKS managed node group's name.
fn check_nodegroup_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the node group name is empty".into());
    }
    if !is_eks_name(name, &NODEGROUP_NAME_BYTES) {
        return Err(format!(
            "{:?} is not an EKS node group name (1-63 letters, digits, - and _, starting with a letter or digit)",
            prefix(name)
        ));
    }
    Ok(())
}

/// A name EKS accepts for a cluster or a node group (`^[0-9A-Za-z][A-Za-z0-9\-_]*`) of a length
/// in `bytes`.
fn is_eks_name(s: &str, bytes: &std::ops::RangeInclusive<usize>) -> bool {
    bytes.contains(&s.len())
        && s.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

/// Whether `name` is a cluster name EKS accepts.
pub fn is_cluster_name(name: &str) -> bool {
    check_cluster_name(name).is_ok()
}

/// Whether `name` is a managed node group name EKS accepts.
pub fn is_nodegroup_name(name: &str) -> bool {
    check_nodegroup_name(name).is_ok()
}

/// Why `name` cannot be the name of a capacity reservation group capblock keeps.
fn check_reservation_group_name(name: &str) -> Result<(), String> {
    if !is_reservation_group_name(name) {
        return Err(format!(
            "{:?} is not a resource group name (1-300 letters, digits, _ . -, not starting with \"aws\")",
            prefix(name)
        ));
    }
    if !name.starts_with(RESERVATION_GROUP_PREFIX) || name.len() == RESERVATION_GROUP_PREFIX.len() {
        return Err(format!(
            "{:?} does not start with {RESERVATION_GROUP_PREFIX:?}: capblock's role may fill only groups named {RESERVATION_GROUP_PREFIX}*",
            prefix(name)
        ));
    }
    Ok(())
}

/// A name AWS Resource Groups' CreateGroup accepts.
pub fn is_reservation_group_name(s: &str) -> bool {
    RESERVATION_GROUP_NAME_BYTES.contains(&s.len())
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
        && !s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("aws"))
}

/// The name of the capacity reservation group a rule's `reservation_group` keeps: the name it
/// gives, or `capblock-<stack>-<rule>`.
pub fn reservation_group_name(stack: &str, rule_id: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => n.to_string(),
        None => format!("{RESERVATION_GROUP_PREFIX}{stack}-{rule_id}"),
    }
}

/// A name SendCommand takes for a document of this account or AWS's (never an ARN).
pub fn is_document_name(s: &str) -> bool {
    DOCUMENT_NAME_BYTES.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.".contains(&c))
}

/// A name CreateAutoScalingGroup accepts.
pub fn is_group_name(s: &str) -> bool {
    GROUP_NAME_BYTES.contains(&s.len()) && s.bytes().all(|c| (33..=126).contains(&c) && c != b':')
}

/// The groups and documents rules name: what the IAM policy grants and `rules validate` checks.
pub fn named_groups(actions: &[Action]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::ScaleGroup { group, .. } => Some(group.as_str()),
            _ => None,
        })
        .collect()
}
