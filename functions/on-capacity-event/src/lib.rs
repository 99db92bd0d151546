//! on-capacity-event: EC2's Capacity Block events (delivered, expiration warning, instance
//! interruption) and capblock's own reminder schedules in; one Slack alert and one workload
//! checkpoint notice per (block, milestone) out. Unusable input is acknowledged, never retried.

use capblock_shared::app::alarms;
use capblock_shared::app::events::{EventHandler, Handled};
use capblock_shared::aws::scheduler::SchedulerReminders;
use capblock_shared::config::{self, ConfigError};
use capblock_shared::domain::alarm;
use capblock_shared::domain::block::Block;
use capblock_shared::lambda::{
    Adapters, FunctionError, NameKeeper, Payload, Reply, check_own_role, emit_corrupt_items,
};
use capblock_shared::ports::{ReadClock, ReminderError, Reminders, SystemClock};
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

/// Everything built once per container and reused by every invocation.
pub struct App {
    aws: Adapters,
    /// Records the name Lambda runs this function under, for preflight.
    names: NameKeeper,
    stack: String,
    scheduler: aws_sdk_scheduler::Client,
    group: String,
    leads: Vec<chrono::Duration>,
    /// The role EventBridge Scheduler assumes to invoke this function. Without it this function
    /// leaves the reminder schedules to track-blocks (which also syncs them) and only announces.
    role_arn: Option<String>,
    /// Where `now` comes from: the wall clock in a deployed stack. An input far from it is
    /// refused, so a simulation's events are judged on the simulation's clock.
    time: capblock_shared::aws::clock::TimeSource,
}

/// Stands in for the scheduler when this function may not create schedules.
struct NoReminders;

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

impl App {
    pub async fn from_env() -> Result<App, ConfigError> {
        // Required so a misconfigured stack fails at start; also the Errors metric's Stack.
        let stack = config::required("CAPBLOCK_STACK")?;
        let workloads = config::required("CAPBLOCK_WORKLOADS_TOPIC_ARN")?;
        let group = config::required("CAPBLOCK_SCHEDULE_GROUP")?;
        let role_arn = config::optional("CAPBLOCK_REMINDER_ROLE_ARN");
        let leads = config::reminder_leads()?;
        tracing::info!(event = "config", stack = %stack, group = %group, reminders = role_arn.is_some(), leads = ?leads.iter().map(|l| l.num_minutes()).collect::<Vec<_>>(), "on-capacity-event ready");
        let aws = Adapters::new(config::targets()?, Some(workloads)).await;
        let time = config::time_source()?;
        Ok(App {
            scheduler: aws_sdk_scheduler::Client::new(&aws.sdk),
            names: NameKeeper::from_env("on-capacity-event"),
            aws,
            stack,
            group,
            leads,
            role_arn,
            time,
        })
    }

    /// The reminder schedules target this very function, by the ARN Lambda invoked it with:
    /// the template cannot hand a function its own ARN without a circular reference.
    fn reminders(&self, invoked_arn: &str) -> Box<dyn Reminders> {
        match &self.role_arn {
            Some(role) => Box::new(SchedulerReminders::new(
                self.scheduler.clone(),
                self.group.clone(),
                invoked_arn.to_string(),
                role.clone(),
                self.leads.clone(),
            )),
            None => Box::new(NoReminders),
        }
    }

    pub async fn handle(&self, event: LambdaEvent<Payload>) -> Result<Reply<Handled>, Diagnostic> {
        self.names.keep(&self.aws.store).await;
        let targets = self.aws.probe_targets(&self.stack, "on-capacity-event", Some(self.group.clone()));
        if let Some(checked) =
            check_own_role("on-capacity-event", AWS_PORTS, &event.payload, &self.aws.sdk, targets, &[]).await
        {
            return checked
                .map(Reply::Role)
                .map_err(|e| capblock_shared::lambda::report("on-capacity-event", &self.stack, e));
        }
        let out = self.handle_event(event).await;
        emit_corrupt_items("on-capacity-event", &self.stack, &self.aws.store);
        out.map(Reply::Run)
    }

    async fn handle_event(&self, event: LambdaEvent<Payload>) -> Result<Handled, Diagnostic> {
        let fail = |e: FunctionError| capblock_shared::lambda::report("on-capacity-event", &self.stack, e);
        let LambdaEvent { payload, context } = event;
        let payload = payload.into_json().map_err(fail)?;
        let clock = ReadClock(self.time.now(&SystemClock).await.map_err(|e| fail(e.into()))?);
        // arn:aws:lambda:REGION:ACCOUNT:function:NAME
        let account = context.invoked_function_arn.split(':').nth(4).filter(|a| !a.is_empty());
        // The stack's own alarms (template: AlarmStateRule) only say how they are: kept for status.
        if alarm::is_cloudwatch_event(&payload) {
            return alarms::record(&self.aws.store, &payload, account, clock.0).await.map_err(|e| fail(e.into()));
        }
        let reminders = self.reminders(&context.invoked_function_arn);
        let handler = EventHandler {
            store: &self.aws.store,
            market: &self.aws.market,
            notifier: &self.aws.notifier,
            reminders: reminders.as_ref(),
            clock: &clock,
            leads: &self.leads,
            account,
        };
        handler.handle(&payload).await.map_err(|e| fail(e.into()))
    }
}
