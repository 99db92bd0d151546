//! Checkpoint reminders as EventBridge Scheduler one-time schedules: one per (block, lead
//! time), named deterministically so a second sync finds the first one's schedules. Each fires
//! once at `termination time - lead`, invokes on-capacity-event with capblock's reminder
//! payload, and deletes itself afterwards (ActionAfterCompletion DELETE).

use async_trait::async_trait;
use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_scheduler::types::{ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target};
use chrono::{DateTime, Duration, SecondsFormat, Utc};

use crate::domain::block::Block;
use crate::domain::capacity_event::{REMINDER_SOURCE, ReminderPayload};
use crate::domain::checkpoint::{at_expression, reminder_at, schedule_name, schedule_prefix};
use crate::ports::{ReminderError, Reminders};

/// The IAM actions each port of this adapter needs: a function's role allows exactly those of
/// the ports it declares in `AWS_PORTS`. infra/deploy/crosscheck checks that every SDK call here
/// has its action in this table and that nothing in it is uncalled (ARCHITECTURE.md, "Where a
/// change goes": a new AWS call).
pub const ACTIONS: &[(&str, &[&str])] = &[(
    "Reminders",
    &[
        "scheduler:CreateSchedule",
        "scheduler:UpdateSchedule",
        "scheduler:GetSchedule",
        "scheduler:ListSchedules",
        "scheduler:DeleteSchedule",
        // A schedule's target carries the reminder role: creating or updating it passes the role.
        "iam:PassRole",
    ],
)];

pub struct SchedulerReminders {
    client: Client,
    group: String,
    target_arn: String,
    role_arn: String,
    leads: Vec<Duration>,
}

/// One schedule as capblock wants it.
struct Wanted {
    name: String,
    expression: String,
    input: String,
}

fn failed<E: ProvideErrorMetadata + std::error::Error + 'static>(what: &str, name: &str, e: E) -> ReminderError {
    ReminderError::Failed(format!("{what} {name}: {}", DisplayErrorContext(&e)))
}

/// The settings a reminder schedule is created and updated with (the two SDK builders are
/// different types with the same setters).
macro_rules! schedule {
    ($this:expr, $w:expr, $builder:expr) => {
        $builder
            .name(&$w.name)
            .group_name(&$this.group)
            .schedule_expression(&$w.expression)
            .schedule_expression_timezone("UTC")
            .flexible_time_window(Self::window()?)
            .action_after_completion(ActionAfterCompletion::Delete)
            .target($this.target(&$w.input)?)
            .description("capblock checkpoint reminder")
    };
}

impl SchedulerReminders {
    pub fn new(client: Client, group: String, target_arn: String, role_arn: String, leads: Vec<Duration>) -> Self {
        SchedulerReminders { client, group, target_arn, role_arn, leads }
    }

    /// The schedules a block should have at `now`: lead times already past are left out.
    fn wanted(&self, block: &Block, now: DateTime<Utc>) -> Vec<Wanted> {
        self.leads
            .iter()
            .filter_map(|&lead| {
                let at = reminder_at(block.end, block.ultraserver, lead);
                if at <= now {
                    return None;
                }
                let payload = ReminderPayload {
                    source: REMINDER_SOURCE.to_string(),
                    reservation_id: block.reservation_id.clone(),
                    region: block.region.to_string(),
                    lead_minutes: u32::try_from(lead.num_minutes()).ok()?,
                    fire_at: at,
                };
                // Serializing plain strings and numbers does not fail; a None here skips the lead.
                let mut input = serde_json::to_value(&payload).ok()?;
                input["fire_at"] = at.to_rfc3339_opts(SecondsFormat::Secs, true).into();
                Some(Wanted {
                    name: schedule_name(&block.reservation_id, lead),
                    expression: at_expression(at),
                    input: input.to_string(),
                })
            })
            .collect()
    }

    fn target(&self, input: &str) -> Result<Target, ReminderError> {
        Target::builder()
            .arn(&self.target_arn)
            .role_arn(&self.role_arn)
            .input(input)
            .build()
            .map_err(|e| ReminderError::Failed(format!("target: {e}")))
    }

    fn window() -> Result<FlexibleTimeWindow, ReminderError> {
        FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| ReminderError::Failed(format!("flexible time window: {e}")))
    }

    async fn create(&self, w: &Wanted) -> Result<(), ReminderError> {
        let result = schedule!(self, w, self.client.create_schedule()).send().await;
        match result {
            Ok(_) => Ok(()),
            // Another sync created it between our get and create: settle it with an update.
            Err(e) if e.code() == Some("ConflictException") => self.update(w).await,
            Err(e) => Err(failed("create schedule", &w.name, e)),
        }
    }

    async fn update(&self, w: &Wanted) -> Result<(), ReminderError> {
        schedule!(self, w, self.client.update_schedule())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| failed("update schedule", &w.name, e))
    }

    async fn delete(&self, name: &str) -> Result<(), ReminderError> {
        match self.client.delete_schedule().name(name).group_name(&self.group).send().await {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(()),
            Err(e) => Err(failed("delete schedule", name, e)),
        }
    }
}

#[async_trait]
impl Reminders for SchedulerReminders {
    async fn sync(&self, block: &Block, now: DateTime<Utc>) -> Result<(), ReminderError> {
        for w in self.wanted(block, now) {
            match self.client.get_schedule().name(&w.name).group_name(&self.group).send().await {
                Ok(s) => {
                    let same_time = s.schedule_expression() == Some(w.expression.as_str());
                    let same_input = s.target().and_then(|t| t.input()) == Some(w.input.as_str());
                    if !(same_time && same_input) {
                        tracing::info!(event = "reminder_moved", schedule = %w.name, to = %w.expression, "end moved");
                        self.update(&w).await?;
                    }
                }
                Err(e) if e.code() == Some("ResourceNotFoundException") => {
                    tracing::info!(event = "reminder_created", schedule = %w.name, at = %w.expression, "created");
                    self.create(&w).await?;
                }
                Err(e) => return Err(failed("get schedule", &w.name, e)),
            }
        }
        Ok(())
    }

    async fn clear(&self, block: &Block) -> Result<(), ReminderError> {
        // By listing, so schedules of lead times no longer configured go too.
        let prefix = schedule_prefix(&block.reservation_id);
        let mut names: Vec<String> = self.leads.iter().map(|&l| schedule_name(&block.reservation_id, l)).collect();
        let mut pages =
            self.client.list_schedules().group_name(&self.group).name_prefix(&prefix).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| failed("list schedules", &prefix, e))?;
            names.extend(
                page.schedules().iter().filter_map(|s| s.name()).filter(|n| n.starts_with(&prefix)).map(str::to_string),
            );
        }
        names.sort();
        names.dedup();
        for name in names {
            self.delete(&name).await?;
        }
        Ok(())
    }
}
