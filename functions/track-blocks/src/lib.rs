//! track-blocks: the scheduled tracker. Each run settles unknown purchase outcomes, follows
//! every open block through payment, start and end (announcing each milestone once and keeping
//! checkpoint reminders in step), adopts reservations missing from the store, and buys the
//! extensions rules ask for.

use capblock_shared::app::handoff::Hands;
use capblock_shared::app::metrics;
use capblock_shared::app::outbox::flush;
use capblock_shared::app::report::{MONTHLY_SUMMARY_SOURCE, enqueue_summary};
use capblock_shared::app::track::{TrackReport, TrackSettings, Tracker};
use capblock_shared::aws::accounts::AssumedAccounts;
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::eks::Eks;
use capblock_shared::aws::ram::Ram;
use capblock_shared::aws::resource_groups::ResourceGroups;
use capblock_shared::aws::scheduler::SchedulerReminders;
use capblock_shared::aws::ssm::Ssm;
use capblock_shared::config;
use capblock_shared::domain::budget::Period;

use capblock_shared::lambda::{
    Adapters, FunctionError, NameKeeper, Payload, Reply, SettingsKeeper, check_own_role, emit_corrupt_items,
    invocation_deadline, on_tick, report,
};
use capblock_shared::ports::SystemClock;
use lambda_runtime::{Diagnostic, LambdaEvent};

/// The ports of the AWS adapters this function uses (`ACTIONS` in shared/src/aws): its role in
/// template.yaml allows exactly their actions (infra/deploy/crosscheck). A new port in the bounds
/// of the app service it runs goes here too.
pub const AWS_PORTS: &[&str] = &[
    "ReservationSource",
    "ExtensionMarket",
    "BlockKinds",
    "BlockStatusSource",
    // The instances running in a block, which its health check takes off EC2's unavailable
    // count (`app::health`), and the hand-off actions' instances.
    "InstanceSource",
    "ExtensionHistory",
    "RuleStore",
    "SettingsStore",
    "FunctionDirectory",
    "Ledger",
    "BlockStore",
    // The monthly summary reads every block once a month (`app::report`).
    "BlockArchive",
    "ExtensionLedger",
    "Outbox",
    "Notifier",
    "Reminders",
    "EventBus",
    // The hand-off actions (`app::handoff::Hands`).
    "Parameters",
    "Groups",
    "Commands",
    "ReservationGroups",
    "Nodegroups",
    // `share_with`: each block's AWS RAM share.
    "Shares",
    // `handoff_account`: the hand-off in a member account, through its role.
    "AccountHands",
];

/// Everything built once per container and reused by every invocation.
pub struct App {
    /// Stores the stack's settings in the table for the CLI, once per container.
    keeper: SettingsKeeper,
    /// Records the name Lambda runs this function under, for preflight.
    names: NameKeeper,
    /// The reminders' schedule group (preflight reads it to try the role's scheduler actions).
    schedule_group: String,
    /// Where `now` comes from: the wall clock in a deployed stack.
    time: capblock_shared::aws::clock::TimeSource,
    aws: Adapters,
    /// Where rules' hand-off actions act (parameters and Run Command; Auto Scaling groups;
    /// capacity reservation groups; EKS managed node groups).
    ssm: Ssm,
    groups: AutoScaling,
    reservation_groups: ResourceGroups,
    nodegroups: Eks,
    shares: Ram,
    accounts: AssumedAccounts,
    /// The EKS clusters whose node groups the role may scale (the template's HandoffClusters):
    /// preflight tries DescribeNodegroup on one of them.
    handoff_clusters: Vec<String>,
    reminders: SchedulerReminders,
    settings: TrackSettings,
}

/// Reads this function's settings from the environment.
pub fn settings() -> Result<TrackSettings, FunctionError> {
    Ok(TrackSettings {
        stack: config::stack_settings()?,
        payment_warning_hours: config::list_or("CAPBLOCK_PAYMENT_WARNING_HOURS", vec![6, 1])?,
        adopt_untagged: config::parsed_or("CAPBLOCK_ADOPT_UNTAGGED", false)?,
        regions: config::list_or("CAPBLOCK_REGIONS", vec![])?,
    })
}

/// The reminder adapter: track-blocks owns the schedules, so all of its settings are required.
fn reminders(sdk: &aws_config::SdkConfig) -> Result<SchedulerReminders, FunctionError> {
    Ok(SchedulerReminders::new(
        aws_sdk_scheduler::Client::new(sdk),
        config::required("CAPBLOCK_SCHEDULE_GROUP")?,
        config::required("CAPBLOCK_REMINDER_TARGET_ARN")?,
        config::required("CAPBLOCK_REMINDER_ROLE_ARN")?,
        config::reminder_leads()?,
    ))
}

/// Whether the payload is preflight's ask to check this function's role.
fn is_permissions_ask(payload: &Payload) -> bool {
    matches!(payload, Payload::Json(v) if capblock_shared::domain::permissions::PermissionsAsk::of(v).is_some())
}

impl App {
    /// The member accounts the stored rules' `handoff_account` name (preflight assumes the
    /// member role in each); none when the rules cannot be read (logged: the check says so).
    async fn handoff_accounts(&self) -> Vec<String> {
        use capblock_shared::ports::RuleStore;
        match self.aws.store.list_rules().await {
            Ok(rules) => {
                let mut accounts: Vec<String> = rules.into_iter().filter_map(|r| r.rule.handoff_account).collect();
                accounts.sort();
                accounts.dedup();
                accounts
            }
            Err(e) => {
                tracing::warn!(event = "rules_unread", error = %e, "preflight tries no member role");
                Vec::new()
            }
        }
    }

    pub async fn from_env() -> Result<App, FunctionError> {
        let aws = Adapters::new(config::targets()?, None).await;
        let settings = settings()?;
        let accounts = AssumedAccounts::new(aws.sdk.clone(), &settings.stack.name);
        Ok(App {
            keeper: SettingsKeeper::new(settings.stack.clone(), aws.alerts_topic.clone()),
            names: NameKeeper::from_env("track-blocks"),
            schedule_group: config::required("CAPBLOCK_SCHEDULE_GROUP")?,
            settings,
            reminders: reminders(&aws.sdk)?,
            time: config::time_source()?,
            ssm: Ssm::new(aws.sdk.clone()),
            groups: AutoScaling::new(aws.sdk.clone()),
            reservation_groups: ResourceGroups::new(aws.sdk.clone()),
            nodegroups: Eks::new(aws.sdk.clone()),
            shares: Ram::new(aws.sdk.clone()),
            accounts,
            handoff_clusters: config::list_or("CAPBLOCK_HANDOFF_CLUSTERS", vec![])?,
            aws,
        })
    }

    pub async fn handle(&self, event: LambdaEvent<Payload>) -> Result<Reply<TrackReport>, Diagnostic> {
        let stack = &self.settings.stack;
        if let Err(e) = self.keeper.keep(&self.aws.store, &self.time, &SystemClock).await {
            return Err(report("track-blocks", &stack.name, e));
        }
        self.names.keep(&self.aws.store).await;
        let mut targets = self.aws.probe_targets(&stack.name, "track-blocks", Some(self.schedule_group.clone()));
        targets.handoff_clusters = self.handoff_clusters.clone();
        if is_permissions_ask(&event.payload) {
            targets.handoff_accounts = self.handoff_accounts().await;
        }
        if let Some(checked) =
            check_own_role("track-blocks", AWS_PORTS, &event.payload, &self.aws.sdk, targets, &[]).await
        {
            return checked.map(Reply::Role).map_err(|e| report("track-blocks", &stack.name, e));
        }
        let until = invocation_deadline(&event.context);
        // The monthly schedule's payload: a run as always, then the past month's summary.
        let summary = matches!(&event.payload, Payload::Json(v) if v.get("source").and_then(|s| s.as_str()) == Some(MONTHLY_SUMMARY_SOURCE));
        let out = on_tick("track-blocks", event.payload, &self.time, &SystemClock, stack, |at| async move {
            let hands = Hands {
                parameters: &self.ssm,
                groups: &self.groups,
                commands: &self.ssm,
                instances: &self.aws.market,
                reservation_groups: &self.reservation_groups,
                nodegroups: &self.nodegroups,
                shares: &self.shares,
                accounts: Some(&self.accounts),
            };
            let tracker = Tracker {
                market: &self.aws.market,
                store: &self.aws.store,
                notifier: &self.aws.notifier,
                reminders: &self.reminders,
                settings: &self.settings,
                hands: Some(hands),
            };
            let mut report = tracker.run_until(at, until).await?;
            if summary && !at.is_replay() {
                // The month before the clock's, never a payload's: a late or retried schedule
                // summarizes the same month, and the outbox sends it once.
                let month = Period::of(at.clock()).previous();
                enqueue_summary(&self.aws.store, &month, &stack.team_budgets, at.clock()).await?;
                report.notices = flush(&self.aws.store, &self.aws.notifier, at.clock()).await?;
                report.summary = Some(month.as_str().to_string());
            }
            let metrics = metrics::of_track(&report, &stack.name);
            Ok((report, metrics))
        })
        .await;
        emit_corrupt_items("track-blocks", &stack.name, &self.aws.store);
        out.map(Reply::Run)
    }
}
