//! Hand-off to the workloads: capblock's events for EventBridge, and the actions rules ask for.
//!
//! Both go through the outbox. An event is a notice for `Topic::Events`, keyed by (block,
//! step), published by `outbox::flush` like any SNS notice. An action is a notice for
//! `Topic::Actions`, keyed by (block, action): `run` leases it, does it, announces the result
//! in the block's Slack thread and marks it done. A failed action stays pending (its failure
//! announced once) and is tried again by the next run; nothing of the block's life waits for it.
//! Every action is safe to repeat: parameters and capacities are set, not added to, a node
//! group's size before its scale-up is recorded once (a retry sets the same size and the end puts
//! back the same), a reservation group is created only when missing, and a command is sent only
//! to the instances that do not have it yet (by the commands capblock recorded sending).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::outbox::{LEASE, alert_notice};
use crate::domain::actions::{Action, NodegroupTarget, reservation_group_name};
use crate::domain::block::Block;
use crate::domain::bus_event::{
    self, ACCOUNT_ATTRIBUTE, BusStep, DETAIL_TYPE_ATTRIBUTE, RESOURCE_ATTRIBUTE, Subject, TIME_ATTRIBUTE,
};
use crate::domain::handoff::{self, Order, Planned, Point, Target};
use crate::domain::launch::{self, GroupLaunch};
use crate::domain::message_kind::MessageKind;
use crate::domain::milestone::Milestone;
use crate::domain::outbox_key::OutboxKey;
use crate::domain::rule::{Mode, Rule};
use crate::domain::share::{self, SharePrincipal, Shared};
use crate::domain::slack::SlackMessage;
use crate::domain::stack::StackSettings;
use crate::ports::{
    AccountHands, ActionError, BlockStore, Commands, Groups, InstanceSource, LaunchTemplates, Message, Nodegroups,
    Notice, Outbox, Parameters, ReservationGroups, ShareRequest, Shares, StoreError, Topic,
};

/// The outbox notice of one lifecycle step's event. `step_key` is the step's milestone name
/// (the Slack notice's), so the event and the message of a step are each sent once.
pub fn event_notice(
    subject: &Subject,
    step: &BusStep,
    step_key: &str,
    arn: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Notice, StoreError> {
    let milestone = OutboxKey::events(step_key)?;
    let detail = bus_event::detail(subject, step, step_key);
    // When the step happened: the run's time, kept with the notice so a later retry still says it.
    let mut attributes: BTreeMap<String, String> = [
        (DETAIL_TYPE_ATTRIBUTE.to_string(), step.detail_type().as_str().to_string()),
        (TIME_ATTRIBUTE.to_string(), now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    ]
    .into();
    if let Some(arn) = arn {
        attributes.insert(RESOURCE_ATTRIBUTE.to_string(), arn.to_string());
    }
    Ok(Notice {
        thread: subject.block.reservation_id.clone(),
        milestone,
        topic: Topic::Events,
        // A struct of strings and numbers: serializing it cannot fail.
        message: Message { body: serde_json::to_string(&detail).unwrap_or_default(), attributes },
        created_at: now,
    })
}

/// The copies of an event notice for `consumers`' default buses: each its own notice (keyed
/// `<step>@events@<account>`), so each bus gets the event once whatever the others answer.
pub fn consumer_copies(notice: &Notice, consumers: &[String]) -> Result<Vec<Notice>, StoreError> {
    consumers
        .iter()
        .map(|account| {
            let mut copy = notice.clone();
            copy.milestone = notice.milestone.for_account(account)?;
            copy.message.attributes.insert(ACCOUNT_ATTRIBUTE.to_string(), account.clone());
            Ok(copy)
        })
        .collect()
}

/// Who a block's events are for beyond capblock's own bus, and the tags they carry: its rule's
/// tags, and the member accounts the block is shared with (`domain::share::event_consumers`).
#[derive(Debug, Clone, Default)]
pub struct EventTo {
    pub tags: BTreeMap<String, String>,
    pub consumers: Vec<String>,
}

impl EventTo {
    /// The events of a block of `rule` (none known: capblock's bus only, no tags).
    pub fn of(rule: Option<&Rule>) -> EventTo {
        match rule {
            Some(r) => EventTo {
                tags: r.tags.clone(),
                consumers: share::event_consumers(&r.share_with, r.handoff_account.as_deref()),
            },
            None => EventTo::default(),
        }
    }
}

/// Enqueues the event of `step` for block `b` (stored under `step_key`), and its copy for each
/// of `to.consumers` (the member accounts the block is shared with); true when it is new.
pub async fn enqueue_event<O: Outbox + ?Sized>(
    outbox: &O,
    b: &Block,
    to: EventTo,
    step: &BusStep,
    step_key: &str,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let notice = event_notice(&Subject::of(b, to.tags), step, step_key, b.arn.as_deref(), now)?;
    for copy in consumer_copies(&notice, &to.consumers)? {
        outbox.enqueue(&copy).await?;
    }
    let added = outbox.enqueue(&notice).await?;
    if added {
        tracing::info!(event = "event_planned", reservation = %b.reservation_id, detail_type = %step.detail_type(), key = step_key, "will put");
    }
    Ok(added)
}

/// Whether a rule's actions only announce: while the stack or the rule is in dry-run. A rule
/// in approval mode acts (a person approved its blocks).
fn dry_run(stack_mode: Mode, rule: &Rule) -> bool {
    stack_mode.and(rule.mode) == Mode::DryRun
}

/// What one tracker move hands off, enqueued before the move is stored (as its Slack notices
/// are, so a run that dies half-way redoes it as a no-op): the event of each milestone, and
/// once the block is over, the orders that undo its rule's actions (parameter cleared, groups
/// to 0).
pub async fn at_move<O: Outbox + ?Sized>(
    outbox: &O,
    before: &Block,
    after: &Block,
    milestones: &[Milestone],
    rule: Option<&Rule>,
    stack: &StackSettings,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let to = EventTo::of(rule);
    for m in milestones {
        if let Some(step) = bus_event::step_of_milestone(m, before.end) {
            enqueue_event(outbox, after, to.clone(), &step, &m.name(), now).await?;
        }
    }
    if let (true, Some(rule)) = (after.state.is_final(), rule)
        && let Some(target) = Target::of_rule(after, &stack.name, rule)
    {
        let dry = dry_run(stack.mode, rule);
        let mut orders = handoff::at_point(&rule.actions, &target, Point::Ended, dry);
        orders.extend(handoff::share_at_point(rule, &target, Point::Ended, dry));
        enqueue_actions(outbox, &orders, now).await?;
    }
    Ok(())
}

/// The tracker's hand-off pass: plans the orders every open block of a rule with actions calls
/// for now (`handoff::current`; the outbox keeps those planned before) and runs what is pending.
/// Never an error: a failure is logged and reported, and the block's life goes on.
pub async fn tracker_pass<S: BlockStore + Outbox + ?Sized>(
    store: &S,
    action_runner: &ActionRunner<'_>,
    rules: &HashMap<String, Rule>,
    stack: &StackSettings,
    now: DateTime<Utc>,
) -> ActionReport {
    let mut planned = 0;
    let mut errors = Vec::new();
    match store.open_blocks(None).await {
        Err(e) => errors.push(e.to_string()),
        Ok(blocks) => {
            for b in blocks {
                let Some(rule) = b.rule_id.as_ref().and_then(|r| rules.get(r)) else { continue };
                let Some(target) = Target::of_rule(&b, &stack.name, rule) else { continue };
                if rule.actions.is_empty() && rule.share_with.is_empty() {
                    continue;
                }
                let dry = dry_run(stack.mode, rule);
                let mut orders = handoff::current(&rule.actions, &target, b.state, now, dry);
                orders.extend(handoff::share_current(rule, &target, b.state, dry));
                // One block's failure is that block's: every other block is still planned.
                match enqueue_actions(store, &orders, now).await {
                    Ok(n) => planned += n,
                    Err(e) => {
                        tracing::warn!(event = "handoff_failed", reservation = %b.reservation_id, error = %e, "this block's actions not planned; next run retries");
                        errors.push(format!("{}: {e}", b.reservation_id));
                    }
                }
            }
        }
    }
    let mut report = match action_runner.run(store, now).await {
        Ok(r) => r,
        Err(e) => ActionReport { errors: vec![e.to_string()], ..Default::default() },
    };
    report.planned = planned;
    report.errors.splice(0..0, errors);
    if !report.errors.is_empty() {
        tracing::warn!(event = "handoff_failed", errors = ?report.errors, "hand-off actions not all planned or run; next run retries");
    }
    report
}

/// The groups a rule's `scale_group` actions name that Auto Scaling does not know in one of the
/// rule's regions (a block of the rule may be in any of them), as `(field, problem)` like the
/// rule's own problems. For `capblock rules validate`.
pub async fn unknown_groups(groups: &dyn Groups, rule: &Rule) -> Result<Vec<(String, String)>, ActionError> {
    let named: Vec<(usize, &str)> = rule
        .actions
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            Action::ScaleGroup { group, .. } => Some((i, group.as_str())),
            _ => None,
        })
        .collect();
    let mut problems = Vec::new();
    if named.is_empty() {
        return Ok(problems);
    }
    let names: Vec<String> = named.iter().map(|(_, g)| g.to_string()).collect();
    for region in &rule.regions {
        let found = groups.existing(region, &names).await?;
        for (i, group) in &named {
            if !found.iter().any(|f| f == group) {
                problems.push((format!("actions[{i}].group"), format!("no Auto Scaling group {group:?} in {region}")));
            }
        }
    }
    Ok(problems)
}

/// The groups a rule's `scale_group` actions name that would launch nothing into its blocks
/// (`domain::launch`), as `(field, warning)`, in each of the rule's regions. `stack`: the stack's
/// name, for the rule's reservation group name (None: any stack's). For `rules validate
/// --check-aws`. A group Auto Scaling does not know is `unknown_groups`' to report.
pub async fn launch_gaps(
    groups: &dyn Groups,
    templates: &dyn LaunchTemplates,
    rule: &Rule,
    stack: Option<&str>,
) -> Result<Vec<(String, String)>, ActionError> {
    let expected = rule.actions.iter().find_map(|a| match a {
        Action::ReservationGroup { name } => {
            Some(reservation_group_name(stack.unwrap_or("*"), &rule.id, name.as_deref()))
        }
        _ => None,
    });
    let mut gaps = Vec::new();
    for (i, action) in rule.actions.iter().enumerate() {
        let Action::ScaleGroup { group, .. } = action else { continue };
        for region in &rule.regions {
            let Some(how) = groups.launch(region, group).await? else { continue };
            let target = match &how.launch {
                GroupLaunch::Template(t) => templates.target(region, t).await?,
                _ => None,
            };
            let ultraserver = !rule.ultraserver_types.is_empty();
            if let Some(why) = launch::gap(group, &how, target.as_ref(), expected.as_deref(), ultraserver) {
                gaps.push((format!("actions[{i}].group"), format!("{why} (in {region})")));
            }
        }
    }
    Ok(gaps)
}

/// The node groups a rule's `scale_nodegroup` actions name that EKS does not know in one of the
/// rule's regions (a block of the rule may be in any of them), as `(field, problem)`. For
/// `capblock rules validate`.
pub async fn unknown_nodegroups(
    nodegroups: &dyn Nodegroups,
    rule: &Rule,
) -> Result<Vec<(String, String)>, ActionError> {
    let mut problems = Vec::new();
    for (i, action) in rule.actions.iter().enumerate() {
        let Action::ScaleNodegroup { target: NodegroupTarget { cluster, nodegroup, .. }, .. } = action else {
            continue;
        };
        for region in &rule.regions {
            if nodegroups.scaling(region, cluster, nodegroup).await?.is_none() {
                problems.push((
                    format!("actions[{i}].nodegroup"),
                    format!("no node group {nodegroup:?} in EKS cluster {cluster:?} in {region}"),
                ));
            }
        }
    }
    Ok(problems)
}

/// The outbox record of one action for one block.
pub fn action_notice(p: &Planned, now: DateTime<Utc>) -> Notice {
    Notice {
        thread: p.target.block.reservation_id.clone(),
        milestone: p.key.clone(),
        topic: Topic::Actions,
        message: Message { body: serde_json::to_string(p).unwrap_or_default(), attributes: BTreeMap::new() },
        created_at: now,
    }
}

/// A record (never published) of what an action did, in the block's thread.
fn record<T: Serialize>(thread: &str, milestone: OutboxKey, body: &T, now: DateTime<Utc>) -> Notice {
    Notice {
        thread: thread.to_string(),
        milestone,
        topic: Topic::Actions,
        // Strings and lists of strings: serializing cannot fail.
        message: Message { body: serde_json::to_string(body).unwrap_or_default(), attributes: BTreeMap::new() },
        created_at: now,
    }
}

/// Enqueues the planned actions; returns how many were new (0 when all were planned before).
pub async fn enqueue_actions<O: Outbox + ?Sized>(
    outbox: &O,
    planned: &[Planned],
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let mut added = 0;
    for p in planned {
        if outbox.enqueue(&action_notice(p, now)).await? {
            tracing::info!(event = "action_planned", reservation = %p.target.block.reservation_id, action = %p.key, dry_run = p.dry_run, "will run");
            added += 1;
        }
    }
    Ok(added)
}

/// The AWS sides the actions reach.
#[derive(Clone, Copy)]
pub struct ActionRunner<'a> {
    pub parameters: &'a dyn Parameters,
    pub groups: &'a dyn Groups,
    pub commands: &'a dyn Commands,
    pub instances: &'a dyn InstanceSource,
    pub reservation_groups: &'a dyn ReservationGroups,
    pub nodegroups: &'a dyn Nodegroups,
    pub shares: &'a dyn Shares,
    /// Other accounts' sides, for rules whose `handoff_account` names one; None: this function
    /// acts in its own account only.
    pub accounts: Option<&'a dyn AccountHands>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ActionReport {
    /// Orders this run added to the outbox.
    pub planned: usize,
    pub done: Vec<String>,
    /// Failed this run; pending, tried again next run.
    pub failed: Vec<String>,
    /// Waiting (a command still running on some instance).
    pub waiting: Vec<String>,
    pub held_elsewhere: usize,
    /// What the store refused, per block or action: what was not planned or run is retried
    /// next run; the others went on.
    pub errors: Vec<String>,
}

/// What one try of an order came to.
enum Tried {
    Done(String),
    /// Done, and a follow-up order to run next (collecting a command's results).
    Then(String, Box<Planned>),
    /// Done, with a message of its own (a command's results).
    Reported(SlackMessage),
    /// Done, and a warning of its own in the thread (a group that launches outside the block).
    Warned(String, Box<SlackMessage>),
    NotYet(String),
}

impl ActionRunner<'_> {
    /// Runs every pending action this run can lease.
    pub async fn run<O: Outbox + ?Sized>(&self, outbox: &O, now: DateTime<Utc>) -> Result<ActionReport, StoreError> {
        let mut report = ActionReport::default();
        let mut pending: Vec<Notice> =
            outbox.pending().await?.into_iter().filter(|n| n.topic == Topic::Actions).collect();
        pending.sort_by_key(|n| n.created_at);
        for notice in pending {
            // One action's failure is that action's: the others still run.
            if let Err(e) = self.run_one(outbox, &notice, now, &mut report).await {
                tracing::warn!(event = "handoff_failed", notice = %notice.id(), error = %e, "this action not run or not recorded; next run retries");
                report.errors.push(format!("{}: {e}", notice.id()));
            }
        }
        Ok(report)
    }

    /// Runs one pending action (if this run can lease it) and records what came of it.
    async fn run_one<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        notice: &Notice,
        now: DateTime<Utc>,
        report: &mut ActionReport,
    ) -> Result<(), StoreError> {
        let p: Planned = match serde_json::from_str(&notice.message.body) {
            Ok(p) => p,
            Err(e) => {
                // Written by this code only: a bug or a hand edit. Left for a person.
                tracing::error!(event = "action_corrupt", notice = %notice.id(), error = %e, "cannot read the action; left pending");
                report.failed.push(notice.id());
                return Ok(());
            }
        };
        if !outbox.lease(notice, now, now + LEASE).await? {
            report.held_elsewhere += 1;
            return Ok(());
        }
        let tried = if p.dry_run {
            Ok(Tried::Done("Dry run: nothing was changed.".into()))
        } else {
            self.try_where(outbox, &p, now).await
        };
        let thread = &p.target.block.reservation_id;
        let mut warning = None;
        let (message, next) = match tried {
            Ok(Tried::Done(what)) => (handoff::announce_done(&p, &what), None),
            Ok(Tried::Warned(what, w)) => {
                warning = Some(w);
                (handoff::announce_done(&p, &what), None)
            }
            Ok(Tried::Reported(message)) => (message, None),
            Ok(Tried::Then(what, next)) => (handoff::announce_done(&p, &what), Some(next)),
            Ok(Tried::NotYet(why)) => {
                tracing::info!(event = "action_waiting", reservation = %thread, action = %p.key, %why, "next run looks again");
                report.waiting.push(notice.id());
                return Ok(());
            }
            Err(e) if handoff::gives_up(&p, now) => {
                let msg = handoff::announce_given_up(&p, &e.to_string());
                outbox.enqueue(&alert_notice(thread, &p.key.then(MessageKind::ActionGivenUp.key()), &msg, now)).await?;
                outbox.mark_published(notice, now).await?;
                tracing::warn!(event = "action_given_up", reservation = %thread, action = %p.key, error = %e, "dropped a day after the block's end");
                report.failed.push(notice.id());
                return Ok(());
            }
            Err(e) => {
                let msg = handoff::announce_failed(&p, &e.to_string());
                // Announced once per action, however many runs it fails.
                outbox.enqueue(&alert_notice(thread, &p.key.then(MessageKind::ActionFailed.key()), &msg, now)).await?;
                tracing::warn!(event = "action_failed", reservation = %thread, action = %p.key, error = %e, "retried next run");
                report.failed.push(notice.id());
                return Ok(());
            }
        };
        // The follow-up first: if this run dies here, the retry finds the command sent (by
        // its comment) and plans the same follow-up again (a no-op).
        if let Some(next) = next {
            enqueue_actions(outbox, std::slice::from_ref(next.as_ref()), now).await?;
        }
        if let Some(w) = warning {
            outbox.enqueue(&alert_notice(thread, &p.key.then(MessageKind::ActionWarning.key()), &w, now)).await?;
        }
        outbox.enqueue(&alert_notice(thread, &p.key.then(MessageKind::ActionDone.key()), &message, now)).await?;
        outbox.mark_published(notice, now).await?;
        tracing::info!(event = "action_done", reservation = %thread, action = %p.key, dry_run = p.dry_run, "{}", message.description);
        report.done.push(notice.id());
        Ok(())
    }

    /// Runs one order here: each kind of order is its own method, in the file of its kind
    /// (handoff/parameter.rs, capacity.rs, reservation_group.rs, nodegroup.rs, command.rs).
    async fn try_order<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        now: DateTime<Utc>,
    ) -> Result<Tried, ActionError> {
        match &p.order {
            Order::PublishParameter { name, value } => self.publish_parameter(p, name, value).await,
            Order::ClearParameter { name } => self.clear_parameter(p, name).await,
            Order::SetCapacity { group, desired } => self.set_capacity(p, group, *desired).await,
            Order::GroupReservation { group } => self.group_reservation(p, group).await,
            Order::UngroupReservation { group } => self.ungroup_reservation(p, group).await,
            Order::ShareReservation { principals, tags } => self.share(outbox, p, principals, tags, now).await,
            Order::UnshareReservation => self.unshare(outbox, p).await,
            Order::ScaleNodegroup(NodegroupTarget { cluster, nodegroup, desired, min, max }) => {
                self.scale_nodegroup(outbox, p, (cluster, nodegroup), (*desired, *min, *max), now).await
            }
            Order::RestoreNodegroup { cluster, nodegroup } => {
                self.restore_nodegroup(outbox, p, cluster, nodegroup).await
            }
            Order::RunCommand { document, comment } => {
                let region = p.target.block.region.clone();
                self.send_command(outbox, p, &region, document, comment, now).await
            }
            Order::CommandResult { commands, .. } => self.command_result(p, commands).await,
        }
    }

    /// Tries the order in the account it runs in (`handoff::runs_in`): there through that
    /// account's sides, here through this function's own.
    async fn try_where<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        now: DateTime<Utc>,
    ) -> Result<Tried, ActionError> {
        let Some(account) = handoff::runs_in(p) else { return self.try_order(outbox, p, now).await };
        let accounts = self.accounts.ok_or_else(|| ActionError {
            operation: "AssumeRole",
            region: p.target.block.region.to_string(),
            message: format!("this function cannot act in account {account} (no member roles configured)"),
        })?;
        let sides = accounts.sides(account).await?;
        let there = ActionRunner {
            parameters: sides.parameters.as_ref(),
            groups: sides.groups.as_ref(),
            commands: sides.commands.as_ref(),
            instances: sides.instances.as_ref(),
            nodegroups: sides.nodegroups.as_ref(),
            reservation_groups: self.reservation_groups,
            shares: self.shares,
            accounts: None,
        };
        there.try_order(outbox, p, now).await
    }

    /// Shares the block once. The share's ARN is recorded (an outbox record of the order) as
    /// soon as CreateResourceShare returns it, and every later run reads the share by it: RAM's
    /// listing, which may not show a new share for a while, is looked at only while no ARN is
    /// recorded (a share made by a release that recorded none). A run that dies between the call
    /// and the record sends the same client token again (`share::share_client_token`, the same
    /// for the same block and attempt) and so gets the same share back. Done only when RAM has
    /// associated it, which puts the `Block Shared` event. A share RAM could not associate is
    /// dropped (recorded first, then deleted), so the next run makes a fresh one under the next
    /// attempt's token, and the failure is announced (once) and retried.
    async fn share<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        principals: &[SharePrincipal],
        tags: &BTreeMap<String, String>,
        now: DateTime<Utc>,
    ) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let rid = p.target.block.reservation_id.as_str();
        let attempts = share_attempts(outbox, p).await?;
        let record_fail =
            |e: StoreError| ActionError { operation: "the table", region: region.to_string(), message: e.to_string() };
        let arn = match attempts.arn {
            Some(arn) => arn,
            None => self.new_share(outbox, p, principals, attempts.attempt, now).await?,
        };
        let view = self.shares.view(&region, &arn).await?;
        match share::judge(&view) {
            Shared::Pending => Ok(Tried::NotYet(format!("RAM is still associating the share {}", view.arn))),
            Shared::Failed(why) => {
                // Recorded before the delete: a run dying in between starts the next attempt,
                // and finds this share (still listed) to drop again, rather than reading it forever.
                let key = share::share_dropped_record(&p.key, attempts.attempt);
                outbox.put_record(&record(rid, key, &why, now)).await.map_err(record_fail)?;
                self.shares.delete(&region, &view.arn).await?;
                Err(ActionError {
                    operation: "CreateResourceShare",
                    region: region.to_string(),
                    message: format!(
                        "RAM could not share the block: {why} (the share was deleted; the next run tries again)"
                    ),
                })
            }
            Shared::Done { with, refused } => {
                let step = BusStep::Shared {
                    share_arn: view.arn.clone(),
                    shared_with: with.clone(),
                    not_shared_with: refused.iter().map(|(p, _)| p.clone()).collect(),
                };
                let to = EventTo {
                    tags: bus_event::event_tags(tags),
                    consumers: share::event_consumers(principals, p.target.account.as_deref()),
                };
                enqueue_event(outbox, &p.target.block, to, &step, "shared", now).await.map_err(|e| ActionError {
                    operation: "the table",
                    region: region.to_string(),
                    message: e.to_string(),
                })?;
                let what = format!("`{rid}` is in the RAM share `{}`, shared with {}.", view.arn, with.join(", "));
                if refused.is_empty() {
                    return Ok(Tried::Done(what));
                }
                Ok(Tried::Warned(what, Box::new(handoff::share_refused_warning(p, &refused))))
            }
        }
    }

    /// The share of this attempt: the one RAM lists for the block (made by a release that
    /// recorded none), else a new one under the attempt's client token; its ARN recorded at once
    /// (or the ARN another run recorded first for the attempt).
    async fn new_share<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        principals: &[SharePrincipal],
        attempt: u32,
        now: DateTime<Utc>,
    ) -> Result<String, ActionError> {
        let region = p.target.block.region.clone();
        let (stack, rid) = (p.target.stack.as_str(), p.target.block.reservation_id.as_str());
        let record_fail =
            |e: StoreError| ActionError { operation: "the table", region: region.to_string(), message: e.to_string() };
        let mut arn = match self.shares.find(&region, stack, rid).await? {
            Some(found) => found.arn,
            None => {
                let request = ShareRequest {
                    name: share::share_name(stack, rid),
                    reservation_arn: reservation_arn(p, "CreateResourceShare")?,
                    principals: principals.to_vec(),
                    tags: share::share_tags(stack, &p.target.rule_id, rid)
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    client_token: share::share_client_token(stack, rid, attempt),
                };
                self.shares.create(&region, &request).await?
            }
        };
        let key = share::share_arn_record(&p.key, attempt);
        if !outbox.put_record(&record(rid, key, &arn, now)).await.map_err(record_fail)? {
            // Another run recorded this attempt's share first: its record is the share.
            if let Some(recorded) = share_attempts(outbox, p).await?.arn {
                arn = recorded;
            }
        }
        tracing::info!(event = "share_recorded", reservation = %rid, share = %arn, attempt, "read by its ARN from now on");
        Ok(arn)
    }
}

impl ActionRunner<'_> {
    /// Deletes the block's share: the one its share order recorded (read by its ARN, whatever
    /// RAM's listing shows), or one found by its tags (made before shares were recorded).
    async fn unshare<O: Outbox + ?Sized>(&self, outbox: &O, p: &Planned) -> Result<Tried, ActionError> {
        let region = &p.target.block.region;
        let (stack, rid) = (&p.target.stack, &p.target.block.reservation_id);
        let share_order = Planned { key: handoff::share_key(), ..p.clone() };
        let mut arns = share_attempts(outbox, &share_order).await?.kept;
        if arns.is_empty()
            && let Some(found) = self.shares.find(region, stack, rid).await?
        {
            arns.push(found.arn);
        }
        if arns.is_empty() {
            return Ok(Tried::Done("No RAM share of the block was left to delete.".to_string()));
        }
        for arn in &arns {
            self.shares.delete(region, arn).await?;
        }
        let names = arns.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ");
        Ok(Tried::Done(format!("Deleted the RAM share {names}: no other account sees the block any more.")))
    }
}

/// What the share order `p` recorded of its attempts (`domain::share::ShareAttempts`).
async fn share_attempts<O: Outbox + ?Sized>(outbox: &O, p: &Planned) -> Result<share::ShareAttempts, ActionError> {
    let thread = &p.target.block.reservation_id;
    let records = outbox.records(thread, &share::share_records_prefix(&p.key)).await.map_err(|e| ActionError {
        operation: "the table",
        region: p.target.block.region.to_string(),
        message: e.to_string(),
    })?;
    // The bodies are JSON strings, as `record` writes them.
    let read: Vec<(OutboxKey, String)> = records
        .into_iter()
        .map(|r| {
            let body = serde_json::from_str::<String>(&r.message.body).unwrap_or(r.message.body);
            (r.milestone, body)
        })
        .collect();
    Ok(share::ShareAttempts::read(&p.key, read.iter().map(|(m, b)| (m, b.as_str()))))
}

/// The block's reservation ARN, which GroupResources and UngroupResources take: recorded from
/// EC2's description of the reservation, which always carries it.
fn reservation_arn(p: &Planned, operation: &'static str) -> Result<String, ActionError> {
    p.target.block.arn.clone().ok_or_else(|| ActionError {
        operation,
        region: p.target.block.region.to_string(),
        message: format!(
            "capblock recorded no ARN for {} (EC2 described it without one)",
            p.target.block.reservation_id
        ),
    })
}

mod capacity;
mod command;
mod nodegroup;
mod parameter;
mod reservation_group;

#[cfg(test)]
mod tests;
