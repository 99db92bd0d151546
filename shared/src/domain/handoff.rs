//! Hand-off to the workloads: the actions a rule may ask for at points of a block's life, and
//! when each is due. Pure: which order to run, under which key, is decided here; the app runs
//! it through the outbox (one record per (block, action), so it runs once and is retried until
//! it succeeds) and the adapters do the AWS calls.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::lifecycle::{BlockState, termination_time};
use super::slack::SlackMessage;

/// Every parameter capblock writes is under this path (the IAM policy grants no other).
pub const PARAMETER_ROOT: &str = "/capblock";
/// SSM's limit on a document name, and its characters.
const DOCUMENT_NAME_CHARS: std::ops::RangeInclusive<usize> = 3..=128;
/// Auto Scaling's limit on a group name.
const GROUP_NAME_CHARS: std::ops::RangeInclusive<usize> = 1..=255;
/// SendCommand's `Comment` is at most 100 characters: capblock's mark fits.
const COMMENT_CHARS: usize = 100;

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
}

/// A validated action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    PublishParameter,
    ScaleGroup { group: String, desired: u32, down_lead_minutes: u32 },
    RunCommand { document: String, lead_minutes: u32 },
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
}

/// Checks each action; problems are `(field, message)` like the rest of the rule's.
pub fn validate(specs: &[ActionSpec], limits: &ActionLimits) -> (Vec<Action>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    // The longest a lead may be: the block's time before termination.
    let room = limits.shortest_block_minutes - limits.termination_lead_minutes;
    let lead = |field: String, v: i64, problems: &mut Vec<(String, String)>| -> Option<u32> {
        if v < 1 {
            problems.push((field, format!("{v} is not a lead time: at least 1 minute")));
            None
        } else if v >= room {
            problems.push((
                field,
                format!(
                    "{v} minutes is longer than the block: the shortest block this rule buys has {room} minutes before its instances are terminated"
                ),
            ));
            None
        } else {
            u32::try_from(v).ok()
        }
    };
    for (i, spec) in specs.iter().enumerate() {
        let at = |f: &str| format!("actions[{i}].{f}");
        match spec {
            ActionSpec::PublishParameter {} => {
                if !seen.insert("publish_parameter".to_string()) {
                    problems.push((at("kind"), "publish_parameter is given twice".into()));
                    continue;
                }
                out.push(Action::PublishParameter);
            }
            ActionSpec::ScaleGroup { group, desired, down_lead_minutes } => {
                let before = problems.len();
                if !GROUP_NAME_CHARS.contains(&group.chars().count()) || group.trim() != group {
                    problems.push((
                        at("group"),
                        format!(
                            "{group:?} is not an Auto Scaling group name (1-255 characters, no surrounding spaces)"
                        ),
                    ));
                } else if !seen.insert(format!("group:{group}")) {
                    problems.push((at("group"), format!("the group {group:?} is scaled by two actions")));
                }
                let desired = match u32::try_from(*desired) {
                    Ok(d) if d >= 1 && d <= limits.max_instances => Some(d),
                    _ => {
                        problems.push((
                            at("desired"),
                            format!(
                                "{desired} is not between 1 and {} (the most instances a block of this rule holds)",
                                limits.max_instances
                            ),
                        ));
                        None
                    }
                };
                let lead = lead(at("down_lead_minutes"), *down_lead_minutes, &mut problems);
                if let (Some(desired), Some(down_lead_minutes), true) = (desired, lead, problems.len() == before) {
                    out.push(Action::ScaleGroup { group: group.clone(), desired, down_lead_minutes });
                }
            }
            ActionSpec::RunCommand { document, lead_minutes } => {
                let before = problems.len();
                if document.is_empty() {
                    problems.push((at("document"), "the document name is empty".into()));
                } else if !is_document_name(document) {
                    problems.push((
                        at("document"),
                        format!("{document:?} is not an SSM document name (3-128 letters, digits, _ - . : /)"),
                    ));
                }
                let lead = lead(at("lead_minutes"), *lead_minutes, &mut problems);
                if let (Some(lead_minutes), true) = (lead, problems.len() == before) {
                    if !seen.insert(format!("command:{document}:{lead_minutes}")) {
                        problems
                            .push((at("document"), format!("{document:?} at {lead_minutes} minutes is given twice")));
                        continue;
                    }
                    out.push(Action::RunCommand { document: document.clone(), lead_minutes });
                }
            }
        }
    }
    (out, problems)
}

fn is_document_name(s: &str) -> bool {
    DOCUMENT_NAME_CHARS.contains(&s.chars().count())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-.:/".contains(c))
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

/// The parameter a rule's `publish_parameter` writes.
pub fn parameter_name(rule_id: &str) -> String {
    format!("{PARAMETER_ROOT}/{rule_id}/current")
}

/// The block an action is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub reservation_id: String,
    pub region: String,
    pub availability_zone: String,
    pub instance_type: String,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub ultraserver: bool,
    pub rule_id: String,
}

impl Target {
    pub fn termination_time(&self) -> DateTime<Utc> {
        termination_time(self.end, self.ultraserver)
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
}

/// An order for a block under its outbox key, dry-run or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub key: String,
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

fn stamp(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%MZ").to_string()
}

fn parameter_value(t: &Target) -> String {
    serde_json::json!({
        "reservation_id": t.reservation_id,
        "region": t.region,
        "availability_zone": t.availability_zone,
        "instance_type": t.instance_type,
        "instance_count": t.instance_count,
        "start": t.start.to_rfc3339_opts(SecondsFormat::Secs, true),
        "end": t.end.to_rfc3339_opts(SecondsFormat::Secs, true),
        "termination_time": t.termination_time().to_rfc3339_opts(SecondsFormat::Secs, true),
    })
    .to_string()
}

fn scale_down(t: &Target, group: &str, dry_run: bool) -> Planned {
    // Keyed by the end: after an extension the group goes down again before the new end.
    Planned {
        key: format!("action-scale-down-{group}-end-{}", stamp(t.end)),
        target: t.clone(),
        order: Order::SetCapacity { group: group.to_string(), desired: 0 },
        dry_run,
    }
}

/// The orders a lifecycle point calls for.
pub fn at_point(actions: &[Action], t: &Target, point: Point, dry_run: bool) -> Vec<Planned> {
    let plan = |key: String, order: Order| Planned { key, target: t.clone(), order, dry_run };
    let mut out = Vec::new();
    for a in actions {
        match (a, point) {
            (Action::PublishParameter, Point::Paid | Point::Active | Point::Extended) => {
                let name = parameter_name(&t.rule_id);
                out.push(plan(
                    format!("action-parameter-end-{}", stamp(t.end)),
                    Order::PublishParameter { value: parameter_value(t), name },
                ));
            }
            (Action::PublishParameter, Point::Ended) => {
                out.push(plan(
                    "action-parameter-clear".into(),
                    Order::ClearParameter { name: parameter_name(&t.rule_id) },
                ));
            }
            (Action::ScaleGroup { group, desired, .. }, Point::Active) => out.push(plan(
                format!("action-scale-up-{group}"),
                Order::SetCapacity { group: group.clone(), desired: *desired },
            )),
            // A group that missed its scale-down (the tracker did not run in the window) goes
            // to 0 at the end anyway: same key, so never twice.
            (Action::ScaleGroup { group, .. }, Point::Ended) => out.push(scale_down(t, group, dry_run)),
            _ => {}
        }
    }
    out
}

/// Every order a block in `state` calls for at `now`, whatever happened before: the tracker
/// plans these on each run and the outbox keeps the ones already planned, so a run that was
/// missed, a crash or a block adopted late still gets its orders, each once.
/// - paid (scheduled or active): the parameter, for the current end;
/// - active: each group scaled up, unless its scale-down is already due (scaling up for minutes
///   would only launch instances EC2 is about to terminate), and the lead-time orders due.
pub fn current(actions: &[Action], t: &Target, state: BlockState, now: DateTime<Utc>, dry_run: bool) -> Vec<Planned> {
    let mut out = Vec::new();
    if matches!(state, BlockState::Scheduled | BlockState::Active) {
        let paid = at_point(actions, t, Point::Paid, dry_run);
        out.extend(paid.into_iter().filter(|p| matches!(p.order, Order::PublishParameter { .. })));
    }
    if state == BlockState::Active {
        let due_now = due(actions, t, now, dry_run);
        let down: BTreeSet<&str> = due_now
            .iter()
            .filter_map(|p| match &p.order {
                Order::SetCapacity { group, .. } => Some(group.as_str()),
                _ => None,
            })
            .collect();
        let up = at_point(actions, t, Point::Active, dry_run);
        // The parameter came with the paid orders above; the groups go up here.
        out.extend(up.into_iter().filter(|p| match &p.order {
            Order::SetCapacity { group, .. } => !down.contains(group.as_str()),
            _ => false,
        }));
        out.extend(due_now);
    }
    out
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
            Action::RunCommand { document, lead_minutes } if reached(*lead_minutes) && now < term => {
                let comment = command_comment(&t.reservation_id, *lead_minutes, t.end);
                out.push(Planned {
                    key: format!("action-run-command-{document}-{lead_minutes}m-end-{}", stamp(t.end)),
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
    }
}

fn message(p: &Planned, suffix: &str, title: String, description: String) -> SlackMessage {
    SlackMessage {
        id: format!("{}#{}-{suffix}", p.target.reservation_id, p.key),
        title,
        description,
        next_steps: Vec::new(),
        keywords: vec![p.target.rule_id.clone(), p.target.instance_type.clone()],
        thread_id: p.target.reservation_id.clone(),
        summary: format!("{} ({})", describe(&p.order), p.target.reservation_id),
        event_type: format!("action-{suffix}"),
        related_resources: vec![p.target.reservation_id.clone()],
    }
}

/// The order ran (or, in dry-run, would have).
pub fn announce_done(p: &Planned, what: &str) -> SlackMessage {
    let (title, verb) =
        if p.dry_run { ("Dry run: hand-off action not run", "Would") } else { ("Hand-off action done", "Done:") };
    message(p, "done", title.into(), format!("{verb} {}.\n{what}", describe(&p.order)))
}

/// How long after a block's end a failing order is still retried: past it, the group, document
/// or parameter the order is about is gone or was never there, and the order is dropped (said
/// once in the thread) rather than retried for ever.
pub const GIVE_UP_AFTER_END: Duration = Duration::hours(24);

/// Whether a failing order is dropped at `now` instead of retried.
pub fn gives_up(p: &Planned, now: DateTime<Utc>) -> bool {
    now >= p.target.end + GIVE_UP_AFTER_END
}

/// The order failed for the last time: it is dropped.
pub fn announce_given_up(p: &Planned, error: &str) -> SlackMessage {
    message(
        p,
        "given-up",
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
        "failed",
        "Hand-off action failed: retrying".into(),
        format!(
            "Could not {}: {error}\ncapblock retries it every tracker run; the block's life goes on.",
            describe(&p.order)
        ),
    );
    m.next_steps = vec!["Check the IAM policy and the group, document or parameter the rule names.".into()];
    m
}

/// The per-instance result of a command.
pub fn announce_command_result(p: &Planned, ran: &[String], failed: &[(String, String)]) -> SlackMessage {
    let failed_text: Vec<String> = failed.iter().map(|(i, why)| format!("{i} ({why})")).collect();
    let title = if failed.is_empty() { "Run Command finished" } else { "Run Command finished with failures" };
    let ran_text = if ran.is_empty() { "none".to_string() } else { ran.join(", ") };
    let failed_line = if failed.is_empty() { "none".to_string() } else { failed_text.join(", ") };
    message(p, "result", title.into(), format!("Ran on: {ran_text}\nFailed on: {failed_line}"))
}

#[cfg(test)]
mod tests;
