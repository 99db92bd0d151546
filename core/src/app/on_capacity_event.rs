//! on-capacity-event's workflow: turn an EC2 Capacity Block event or one of capblock's own
//! reminders into one Slack alert and one workload checkpoint notice per (block, milestone).
//!
//! Exactly once comes from the outbox: both notices are enqueued under the milestone's key
//! (`attribute_not_exists`), then pending notices are flushed. A duplicate delivery, the other
//! detail-type spelling or a retry after a partial failure enqueues nothing new; a notice left
//! unpublished by a crash is published by the next flush.
//!
//! Inputs that will never be actionable (malformed, unknown kind, unknown reservation) are
//! acknowledged as `Ignored`: retrying them would only make a retry storm. Failures of the
//! store, EC2 or the scheduler are errors, so Lambda retries the invocation.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::Value;

use super::handoff::{EventTo, consumer_copies, event_notice};
use super::outbox::{FlushReport, alert_notice, flush};
use crate::domain::announce;
use crate::domain::block::Block;
use crate::domain::bus_event::{self, Subject};
use crate::domain::capacity_event::{Incoming, Trigger, event_id_of, lead_is_configured, parse, timely};
use crate::domain::checkpoint::{CheckpointMilestone, WorkloadNotice, reminder_is_current};
use crate::domain::ids::Region;
use crate::ports::{
    BlockKinds, BlockStore, Clock, InstanceSource, MarketError, Message, Notice, Notifier, Outbox, ReminderError,
    Reminders, ReservationLookup, RuleStore, StoreError, Topic,
};

/// Failures worth a retry of the whole invocation.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("market: {0}")]
    Market(#[from] MarketError),
    #[error("reminders: {0}")]
    Reminders(#[from] ReminderError),
    /// Some notices stayed unpublished: they are safe in the outbox, and a retry (or any later
    /// flush) publishes them; failing the invocation asks Lambda for that retry now.
    #[error("{failed} notice(s) could not be published; they stay in the outbox")]
    Publish { failed: usize },
}

impl HandleError {
    /// Lambda's `errorType`.
    pub fn kind(&self) -> &'static str {
        match self {
            HandleError::Store(_) => "capblock.StoreUnavailable",
            HandleError::Market(_) => "capblock.MarketUnavailable",
            HandleError::Reminders(_) => "capblock.SchedulerUnavailable",
            HandleError::Publish { .. } => "capblock.NotifyFailed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Handled {
    /// The milestone's notices are in the outbox (now or before) and the outbox was flushed.
    Announced {
        event_id: String,
        reservation_id: String,
        milestone: String,
        /// Notices this invocation added: 0 for a duplicate.
        enqueued: usize,
        notices: FlushReport,
        reminders_synced: bool,
    },
    /// Acknowledged and dropped: `kind` names why.
    Ignored { event_id: Option<String>, kind: String, reason: String },
    /// A stack alarm's new state, kept unless a later one already was (`app::alarms`).
    Alarm { event_id: Option<String>, alarm: String, state: String, kept: bool },
}

/// The ports one invocation needs. `store` is both the block store and the outbox.
pub struct CapacityEventHandler<'a, S: ?Sized, M: ?Sized, N: ?Sized, R: ?Sized> {
    pub store: &'a S,
    pub market: &'a M,
    pub notifier: &'a N,
    pub reminders: &'a R,
    /// The wall clock: an input whose time is far from it is refused (`domain::capacity_event::timely`),
    /// and the outbox's bookkeeping (leases, `created_at`). What a message *says* is computed
    /// from the event's own time, so a late retry tells the same story.
    pub clock: &'a dyn Clock,
    /// The reminder leads this stack schedules (`CAPBLOCK_REMINDER_LEAD_MINUTES`): a reminder
    /// with any other lead is not one of capblock's.
    pub leads: &'a [Duration],
    /// The account this function runs in (from the ARN Lambda invoked it with): EC2 events
    /// from any other account are ignored. `None` only where no ARN is known.
    pub account: Option<&'a str>,
}

/// Why an event is acknowledged without action: the `Ignored` kind and its reason.
type Skip = (&'static str, String);

pub(super) fn ignored(event_id: Option<String>, kind: &str, reason: impl Into<String>) -> Handled {
    let reason = reason.into();
    tracing::warn!(event = "event_ignored", event_id = event_id.as_deref().unwrap_or("-"), kind, reason = %reason, "acknowledged without action");
    Handled::Ignored { event_id, kind: kind.to_string(), reason }
}

/// Where the facts about a reservation came from: capblock's store, or EC2 itself. An event
/// about a reservation neither knows is never announced (it may be forged or misrouted).
enum Known {
    Stored(Block),
    Ec2(Block),
}

impl<S, M, N, R> CapacityEventHandler<'_, S, M, N, R>
where
    S: BlockStore + RuleStore + Outbox + ?Sized,
    M: ReservationLookup + InstanceSource + BlockKinds + ?Sized,
    N: Notifier + ?Sized,
    R: Reminders + ?Sized,
{
    pub async fn handle(&self, input: &Value) -> Result<Handled, HandleError> {
        let incoming = match parse(input) {
            Ok(i) => i,
            Err(e) => return Ok(ignored(event_id_of(input), e.kind(), e.to_string())),
        };
        tracing::info!(event = "event_received", event_id = %incoming.event_id, trigger = ?incoming.trigger, "handling");
        self.handle_parsed(incoming).await
    }

    /// Four phases: whose event it is (the account), which reservation it concerns, what
    /// capblock or EC2 knows of that reservation, and which milestone it marks; then the
    /// milestone's notices are enqueued and flushed.
    pub async fn handle_parsed(&self, incoming: Incoming) -> Result<Handled, HandleError> {
        let id = Some(incoming.event_id.clone());
        // Anyone allowed to invoke the function or to create schedules can send anything: what
        // is far from the clock, or not a lead this stack schedules, is not capblock's to say.
        if let Err((kind, reason)) = timely(&incoming, self.clock.now()) {
            return Ok(ignored(id, kind, reason));
        }
        if let Err((kind, reason)) = lead_is_configured(&incoming.trigger, self.leads) {
            return Ok(ignored(id, kind, reason));
        }
        let Incoming { event_id, region, time: now, trigger, account } = incoming;
        if let (Some(own), Some(from)) = (self.account, account.as_deref())
            && own != from
        {
            return Ok(ignored(id, "other-account", format!("the event comes from account {from}, not {own}")));
        }
        let (reservation_id, event_end) = match self.reservation_of(&region, &trigger).await? {
            Ok(r) => r,
            Err((kind, reason)) => return Ok(ignored(id, kind, reason)),
        };
        let Some(known) = self.lookup(&region, &reservation_id).await? else {
            return Ok(ignored(id, "unknown-reservation", format!("neither capblock nor EC2 knows {reservation_id}")));
        };
        if let Known::Stored(b) = &known
            && b.region != region
        {
            return Ok(ignored(id, "wrong-region", format!("{reservation_id} is in {}, not {region}", b.region)));
        }
        let facts = match &known {
            Known::Stored(b) => b.with_end(self.confirmed_end(b, event_end).await?),
            Known::Ec2(b) => b.clone(),
        };
        let milestone = match self.milestone_of(&trigger, &known, &facts, now).await? {
            Ok(m) => m,
            Err((kind, reason)) => return Ok(ignored(id, kind, reason)),
        };
        self.announce(event_id, &known, &facts, milestone, now).await
    }

    /// The reservation the event concerns, and the end it claims (checked against EC2 later).
    /// An interruption names an instance: EC2 says which reservation holds it.
    async fn reservation_of(
        &self,
        region: &Region,
        trigger: &Trigger,
    ) -> Result<Result<(String, Option<DateTime<Utc>>), Skip>, HandleError> {
        Ok(Ok(match trigger {
            Trigger::Delivered { reservation_id, end } | Trigger::ExpirationWarning { reservation_id, end } => {
                (reservation_id.clone(), Some(*end))
            }
            Trigger::Reminder { reservation_id, .. } => (reservation_id.clone(), None),
            // The event's `resources` may name a reservation, but only EC2 says which one holds
            // the instance: an interruption for an instance outside the block is not the block's.
            Trigger::InstanceInterruption { instance_id, reservation_hint, .. } => {
                match (self.market.reservation_of(region, instance_id).await?, reservation_hint) {
                    (None, _) => {
                        return Ok(Err((
                            "instance-not-in-a-reservation",
                            format!("EC2 places {instance_id} in no capacity reservation"),
                        )));
                    }
                    (Some(placed), Some(hint)) if placed != *hint => {
                        return Ok(Err((
                            "instance-not-in-the-block",
                            format!("the event names {hint}, but EC2 places {instance_id} in {placed}"),
                        )));
                    }
                    (Some(placed), _) => (placed, None),
                }
            }
        }))
    }

    /// The milestone the event marks. A reminder counts only while the block is not over and
    /// the reminder belongs to the block's current end; a stale one re-syncs the schedules and
    /// says nothing.
    async fn milestone_of(
        &self,
        trigger: &Trigger,
        known: &Known,
        facts: &Block,
        now: DateTime<Utc>,
    ) -> Result<Result<CheckpointMilestone, Skip>, HandleError> {
        Ok(Ok(match trigger {
            // Only EC2 says a block is delivered: an event alone would announce it early and
            // suppress the genuine announcement (one per milestone).
            Trigger::Delivered { .. } => match self.market.reservation(&facts.region, &facts.reservation_id).await? {
                Some(r) if r.state == "active" => CheckpointMilestone::Delivered,
                Some(r) => {
                    return Ok(Err((
                        "not-active",
                        format!("EC2 shows {} as {}, not active", facts.reservation_id, r.state),
                    )));
                }
                None => {
                    return Ok(Err(("unknown-reservation", format!("EC2 does not know {}", facts.reservation_id))));
                }
            },
            // Announced only near EC2's end, on the function's clock: a warning days early is
            // forged, and would stop the workloads and suppress the real one.
            Trigger::ExpirationWarning { .. } => {
                let clock = self.clock.now();
                if !crate::domain::capacity_event::expiration_is_near(facts.end, clock) {
                    return Ok(Err((
                        "expiration-not-near",
                        format!(
                            "EC2 ends {} at {}, {} minutes from the clock: its expiration warning comes 40 minutes before",
                            facts.reservation_id,
                            facts.end,
                            (facts.end - clock).num_minutes()
                        ),
                    )));
                }
                CheckpointMilestone::AwsExpirationWarning
            }
            Trigger::InstanceInterruption { instance_id, .. } => {
                CheckpointMilestone::Interruption { instance_id: instance_id.clone() }
            }
            Trigger::Reminder { lead_minutes, fire_at, .. } => {
                if let Known::Stored(b) = known
                    && b.state.is_final()
                {
                    return Ok(Err(("block-ended", format!("{} is {}", b.reservation_id, b.state))));
                }
                if !reminder_is_current(*fire_at, *lead_minutes, facts.end, facts.ultraserver) {
                    // The end moved (an extension) after this schedule was set: make sure the
                    // schedules match the new end.
                    if let Known::Stored(b) = known {
                        self.reminders.sync(&b.with_end(facts.end), now).await?;
                    }
                    return Ok(Err((
                        "stale-reminder",
                        format!(
                            "a {lead_minutes}-minute reminder for {fire_at} no longer matches the end {}",
                            facts.end
                        ),
                    )));
                }
                CheckpointMilestone::Reminder { lead_minutes: *lead_minutes, end: facts.end }
            }
        }))
    }

    /// Enqueues the milestone's notices and flushes the outbox; when the block became active,
    /// makes sure its reminders exist for the current end.
    async fn announce(
        &self,
        event_id: String,
        known: &Known,
        facts: &Block,
        milestone: CheckpointMilestone,
        now: DateTime<Utc>,
    ) -> Result<Handled, HandleError> {
        let enqueued = self.enqueue(facts, &milestone, now).await?;
        let notices = flush(self.store, self.notifier, self.clock.now()).await?;

        let mut reminders_synced = false;
        if let (CheckpointMilestone::Delivered, Known::Stored(b)) = (&milestone, known) {
            self.reminders.sync(&b.with_end(facts.end), now).await?;
            reminders_synced = true;
        }

        if notices.failed > 0 {
            return Err(HandleError::Publish { failed: notices.failed });
        }

        let reservation_id = facts.reservation_id.clone();
        tracing::info!(event = "event_announced", event_id = %event_id, reservation = %reservation_id, milestone = %milestone.key(), enqueued, published = notices.published, "done");
        Ok(Handled::Announced {
            event_id,
            reservation_id,
            milestone: milestone.key(),
            enqueued,
            notices,
            reminders_synced,
        })
    }

    /// The store first (capblock's own blocks), then EC2 (blocks bought by hand). What the
    /// event says is never enough on its own.
    async fn lookup(&self, region: &Region, id: &str) -> Result<Option<Known>, HandleError> {
        if let Some(b) = self.store.get_block(id).await? {
            return Ok(Some(Known::Stored(b)));
        }
        // EC2's own facts (its end, not the event's). Adopted as of `now` = the clock: nothing
        // here is stored, the block only carries the facts the notices need, its kind (an
        // UltraServer's termination time) included.
        let Some(r) = self.market.reservation(region, id).await? else {
            return Ok(None);
        };
        let ultra = super::block_kinds::ultraserver_reservations(self.market, region, &[&r]).await?;
        Ok(Some(Known::Ec2(Block::adopted(&r, false, self.clock.now()).with_kind(ultra.contains(&r.id)))))
    }

    /// The end to announce and to set reminders from: the stored one, unless the event says
    /// otherwise and EC2 confirms the change (an extension the tracker has not seen yet). An
    /// event's end alone never moves the schedules.
    async fn confirmed_end(&self, b: &Block, event_end: Option<DateTime<Utc>>) -> Result<DateTime<Utc>, HandleError> {
        match event_end {
            Some(end) if end != b.end => {
                let ec2 = self.market.reservation(&b.region, &b.reservation_id).await?;
                Ok(match ec2 {
                    Some(r) if r.end == end => end,
                    Some(r) => {
                        tracing::warn!(event = "event_end_unconfirmed", reservation = %b.reservation_id, event_end = %end, ec2_end = %r.end, "the event's end is not EC2's; EC2's is used");
                        r.end
                    }
                    None => b.end,
                })
            }
            _ => Ok(b.end),
        }
    }

    /// The event of a milestone that is one (delivered, capblock's reminders). Its tags are the
    /// reservation's as EC2 reports them: a block's facts here come from the store, which keeps
    /// no tags. The event matters more than its tags: without EC2's answer it goes out without.
    async fn event(
        &self,
        facts: &Block,
        milestone: &CheckpointMilestone,
        created_at: DateTime<Utc>,
    ) -> Result<Option<Notice>, StoreError> {
        let Some(step) = bus_event::step_of_checkpoint(milestone) else { return Ok(None) };
        let tags = match self.market.reservation(&facts.region, &facts.reservation_id).await {
            Ok(r) => r.map(|r| bus_event::event_tags(&r.tags)).unwrap_or_default(),
            Err(e) => {
                tracing::warn!(event = "event_tags_unavailable", reservation = %facts.reservation_id, error = %e, "event goes out without tags");
                Default::default()
            }
        };
        let subject = Subject::of(facts, tags);
        event_notice(&subject, &step, &milestone.key(), facts.arn.as_deref(), created_at).map(Some)
    }

    /// Writes the Slack and the workload notice of a milestone, and its event if it is one;
    /// returns how many were new.
    async fn enqueue(
        &self,
        facts: &Block,
        milestone: &CheckpointMilestone,
        now: DateTime<Utc>,
    ) -> Result<usize, HandleError> {
        let instances = match self.market.instances_in(&facts.region, &facts.reservation_id).await {
            Ok(ids) => ids,
            // The warning matters more than the list: send it without ids rather than late.
            Err(e) => {
                tracing::warn!(event = "instances_unavailable", reservation = %facts.reservation_id, error = %e, "notice goes out without instance ids");
                Vec::new()
            }
        };
        let created_at = self.clock.now();
        let slack = announce::checkpoint(facts, milestone, &instances, now);
        let alert =
            alert_notice(&facts.reservation_id, &milestone.alert_key().map_err(StoreError::from)?, &slack, created_at);
        let workload = WorkloadNotice::new(facts, milestone, instances, now);
        let work = Notice {
            thread: facts.reservation_id.clone(),
            milestone: milestone.workload_key().map_err(StoreError::from)?,
            topic: Topic::Workloads,
            message: Message { body: workload.body(), attributes: workload.attributes() },
            created_at,
        };
        let event = self.event(facts, milestone, created_at).await?;
        // A shared block's event goes to its consumers' buses too: the accounts its rule names.
        let copies = match (&event, &facts.rule_id) {
            (Some(e), Some(rule_id)) => match self.store.get_rule(rule_id).await {
                Ok(rule) => consumer_copies(e, &EventTo::of(rule.as_ref().map(|s| &s.rule)).consumers)?,
                Err(err) => {
                    tracing::warn!(event = "event_consumers_unknown", reservation = %facts.reservation_id, error = %err, "the event goes to capblock's bus only");
                    Vec::new()
                }
            },
            _ => Vec::new(),
        };
        let mut added = 0;
        for notice in [Some(alert), Some(work)].into_iter().flatten().chain(copies).chain(event) {
            if self.store.enqueue(&notice).await? {
                added += 1;
            } else {
                tracing::info!(event = "notice_duplicate", notice = %notice.id(), "already announced or pending");
            }
        }
        Ok(added)
    }
}
