//! on-capacity-event: EC2's Capacity Block events (delivered, expiration warning, instance
//! interruption) and capblock's own reminder schedules in; one Slack alert and one workload
//! checkpoint notice per (block, milestone) out. Unusable input is acknowledged, never retried.

use std::sync::Arc;

use capblock_shared::app::alarms;
use capblock_shared::app::on_capacity_event::{CapacityEventHandler, Handled};
use capblock_shared::aws::scheduler::SchedulerReminders;
use capblock_shared::config::{self, ConfigError};
use capblock_shared::domain::alarm;
use capblock_shared::domain::block::Block;
use capblock_shared::lambda::{Edge, EdgeConfig, FunctionError, Handler, Lambda, Payload};
use capblock_shared::ports::{ReadClock, ReminderError, Reminders};
use chrono::{DateTime, Utc};
use lambda_runtime::{Diagnostic, LambdaEvent};

/// The ports of the AWS adapters this function uses (`ACTIONS` in shared/src/aws): its role in
/// template.yaml allows exactly their actions (infra/deploy/crosscheck). A new port in the bounds
/// of the app service it runs goes here too.
pub const AWS_PORTS: &[&str] = &[
    "ReservationLookup",
    "InstanceSource",
    "BlockKinds",
    "BlockStore",
    "RuleStore",
    "Outbox",
    "Notifier",
    "EventBus",
    "Reminders",
    "AlarmStore",
    "FunctionDirectory",
];

/// What this function is configured with (`settings` reads it from the environment).
pub struct Settings {
    pub edge: EdgeConfig,
    pub group: String,
    pub leads: Vec<chrono::Duration>,
    /// The role EventBridge Scheduler assumes to invoke this function. Without it this function
    /// leaves the reminder schedules to track-blocks (which also syncs them) and only announces.
    pub role_arn: Option<String>,
}

/// Reads this function's settings from the environment.
pub fn settings() -> Result<Settings, ConfigError> {
    // Required so a misconfigured stack fails at start; also the Errors metric's Stack.
    let stack = config::required("CAPBLOCK_STACK")?;
    let workloads = config::required("CAPBLOCK_WORKLOADS_TOPIC_ARN")?;
    let group = config::required("CAPBLOCK_SCHEDULE_GROUP")?;
    let role_arn = config::optional("CAPBLOCK_REMINDER_ROLE_ARN");
    let leads = config::reminder_leads()?;
    tracing::info!(event = "config", stack = %stack, group = %group, reminders = role_arn.is_some(), leads = ?leads.iter().map(|l| l.num_minutes()).collect::<Vec<_>>(), "configured");
    Ok(Settings {
        edge: EdgeConfig {
            stack,
            keep_settings: None,
            targets: config::targets()?,
            workloads_topic: Some(workloads),
            schedule_group: Some(group.clone()),
            time: config::time_source()?,
        },
        group,
        leads,
        role_arn,
    })
}

/// The function as Lambda runs it, from the environment (`main`).
pub async fn from_env(function: &'static str) -> Result<Lambda<App>, FunctionError> {
    let settings = settings()?;
    Ok(build(function, settings, capblock_shared::aws::load_config().await))
}

/// The function on `settings` and an SDK configuration (a test's endpoints): its edge on the AWS
/// adapters, and the reminder schedules on EventBridge Scheduler when it may create them.
pub fn build(function: &'static str, settings: Settings, sdk: aws_config::SdkConfig) -> Lambda<App> {
    let Settings { edge, group, leads, role_arn } = settings;
    let reminders: Arc<dyn ReminderSchedules> = match role_arn {
        Some(role_arn) => {
            Arc::new(Scheduler { client: aws_sdk_scheduler::Client::new(&sdk), group, role_arn, leads: leads.clone() })
        }
        None => Arc::new(NoReminders),
    };
    let edge = Edge::with_sdk(function, AWS_PORTS, edge, sdk);
    Lambda { edge, handler: App { reminders, leads } }
}

/// What this function keeps beyond its edge, once per container.
pub struct App {
    pub reminders: Arc<dyn ReminderSchedules>,
    /// The reminder leads this stack schedules: a reminder with any other lead is not one of
    /// capblock's.
    pub leads: Vec<chrono::Duration>,
}

/// Where a block's reminder schedules are kept, given the ARN Lambda invoked this function
/// with: the schedules target this very function, and the template cannot hand a function its
/// own ARN without a circular reference.
pub trait ReminderSchedules: Send + Sync {
    fn targeting(&self, invoked_arn: &str) -> Arc<dyn Reminders>;
}

/// EventBridge Scheduler, with the role it assumes to invoke this function.
struct Scheduler {
    client: aws_sdk_scheduler::Client,
    group: String,
    role_arn: String,
    leads: Vec<chrono::Duration>,
}

impl ReminderSchedules for Scheduler {
    fn targeting(&self, invoked_arn: &str) -> Arc<dyn Reminders> {
        Arc::new(SchedulerReminders::new(
            self.client.clone(),
            self.group.clone(),
            invoked_arn.to_string(),
            self.role_arn.clone(),
            self.leads.clone(),
        ))
    }
}

/// Stands in for the scheduler when this function may not create schedules.
struct NoReminders;

impl ReminderSchedules for NoReminders {
    fn targeting(&self, _invoked_arn: &str) -> Arc<dyn Reminders> {
        Arc::new(NoReminders)
    }
}

#[async_trait::async_trait]
impl Reminders for NoReminders {
    async fn sync(&self, block: &Block, _now: DateTime<Utc>) -> Result<(), ReminderError> {
        tracing::info!(event = "reminders_not_synced", reservation = %block.reservation_id, "CAPBLOCK_REMINDER_ROLE_ARN is not set: track-blocks keeps the schedules");
        Ok(())
    }
    async fn clear(&self, _block: &Block) -> Result<(), ReminderError> {
        Ok(())
    }
}

#[async_trait::async_trait]
impl Handler for App {
    type Report = Handled;

    async fn run(&self, edge: &Edge, event: LambdaEvent<Payload>) -> Result<Handled, Diagnostic> {
        let fail = |e: FunctionError| edge.fail(e);
        let LambdaEvent { payload, context } = event;
        let payload = payload.into_json().map_err(fail)?;
        let clock = ReadClock(edge.now().await.map_err(fail)?);
        // arn:aws:lambda:REGION:ACCOUNT:function:NAME
        let account = context.invoked_function_arn.split(':').nth(4).filter(|a| !a.is_empty());
        // The stack's own alarms (template: AlarmStateRule) only say how they are: kept for status.
        if alarm::is_cloudwatch_event(&payload) {
            return alarms::record(edge.ports.store.as_ref(), &payload, account, clock.0)
                .await
                .map_err(|e| fail(e.into()));
        }
        let reminders = self.reminders.targeting(&context.invoked_function_arn);
        let handler = CapacityEventHandler {
            store: edge.ports.store.as_ref(),
            market: edge.ports.market.as_ref(),
            notifier: edge.ports.notifier.as_ref(),
            reminders: reminders.as_ref(),
            clock: &clock,
            leads: &self.leads,
            account,
        };
        handler.handle(&payload).await.map_err(|e| fail(e.into()))
    }
}

#[cfg(test)]
mod tests;
