//! track-blocks: the scheduled tracker. Each run settles unknown purchase outcomes, follows
//! every open block through payment, start and end (announcing each milestone once and keeping
//! checkpoint reminders in step), adopts reservations missing from the store, and buys the
//! extensions rules ask for. Then, once an hour, it publishes the team page to the stack's
//! bucket (`app::publish`), when the stack has one.

use std::sync::Arc;

use capblock_shared::app::after_track::{AfterTrack, asks_for_summary};
use capblock_shared::app::handoff::ActionRunner;
use capblock_shared::app::metrics;
use capblock_shared::app::publish::PageReport;
use capblock_shared::app::track::{TrackReport, TrackSettings, Tracker};
use capblock_shared::aws::accounts::AssumedAccounts;
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::eks::Eks;
use capblock_shared::aws::ram::Ram;
use capblock_shared::aws::resource_groups::ResourceGroups;
use capblock_shared::aws::s3::S3Pages;
use capblock_shared::aws::scheduler::SchedulerReminders;
use capblock_shared::aws::ssm::Ssm;
use capblock_shared::config;
use capblock_shared::domain::metrics::Batch;
use capblock_shared::lambda::{Edge, EdgeConfig, FunctionError, Handler, Lambda, Payload, invocation_deadline};
use capblock_shared::ports::{
    AccountHands, Commands, Groups, Nodegroups, PagePublisher, Parameters, Reminders, ReservationGroups, Shares,
};
use lambda_runtime::{Diagnostic, LambdaEvent};

/// The ports of the AWS adapters this function uses (`ACTIONS` in shared/src/aws): its role in
/// template.yaml allows exactly their actions (infra/deploy/crosscheck). A new port in the bounds
/// of the app service it runs goes here too.
pub const AWS_PORTS: &[&str] = &[
    "ReservationSource",
    "ExtensionMarket",
    "BlockKinds",
    "BlockStatusSource",
    // The hand-off actions' instances (a block's health counts every account's instances through
    // `BlockStatusSource`'s GetCapacityReservationUsage, `app::health`).
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
    // The hand-off actions (`app::handoff::ActionRunner`).
    "Parameters",
    "Groups",
    "Commands",
    "ReservationGroups",
    "Nodegroups",
    // `share_with`: each block's AWS RAM share.
    "Shares",
    // `handoff_account`: the hand-off in a member account, through its role.
    "AccountHands",
    // The team page (`app::publish`): the hour claimed in the table, the page put in S3, and
    // the price history it draws and people's requests it lists (`app::team_page::gather`).
    "PageClaims",
    "RequestStore",
    "ObservationStore",
    "PagePublisher",
];

/// The `Errors` kind counting a run whose team page was not published (logged as
/// `page_failed` with its cause); the tracker's own work is unaffected.
pub const PAGE_FAILED_KIND: &str = "capblock.PagePublishFailed";

/// The time a run keeps for the team page (a table scan, a render and one PutObject): with
/// less left before Lambda's deadline, the run leaves the hour's page to the next one.
const PAGE_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// What this function is configured with (`settings` reads it from the environment).
pub struct Settings {
    pub edge: EdgeConfig,
    pub track: TrackSettings,
    pub reminders: ReminderSettings,
    /// The EKS clusters whose node groups the role may scale (the template's HandoffClusters).
    pub handoff_clusters: Vec<String>,
    /// The team page's bucket (the template's TeamPage=Enabled); `None` publishes no page.
    pub page_bucket: Option<String>,
}

/// The reminder schedules' settings: track-blocks owns the schedules, so all are required.
pub struct ReminderSettings {
    pub group: String,
    /// The function the schedules invoke (on-capacity-event).
    pub target_arn: String,
    /// The role EventBridge Scheduler assumes to invoke it.
    pub role_arn: String,
    pub leads: Vec<chrono::Duration>,
}

/// Reads this function's settings from the environment.
pub fn settings() -> Result<Settings, FunctionError> {
    let targets = config::targets()?;
    let track = TrackSettings {
        stack: config::stack_settings()?,
        payment_warning_hours: config::list_or("CAPBLOCK_PAYMENT_WARNING_HOURS", vec![6, 1])?,
        adopt_untagged: config::parsed_or("CAPBLOCK_ADOPT_UNTAGGED", false)?,
        regions: config::list_or("CAPBLOCK_REGIONS", vec![])?,
    };
    let reminders = ReminderSettings {
        group: config::required("CAPBLOCK_SCHEDULE_GROUP")?,
        target_arn: config::required("CAPBLOCK_REMINDER_TARGET_ARN")?,
        role_arn: config::required("CAPBLOCK_REMINDER_ROLE_ARN")?,
        leads: config::reminder_leads()?,
    };
    Ok(Settings {
        edge: EdgeConfig {
            stack: track.stack.name.clone(),
            // Stored for the CLI, which buys only on the settings its stack runs on.
            keep_settings: Some(track.stack.clone()),
            targets,
            workloads_topic: None,
            schedule_group: Some(reminders.group.clone()),
            time: config::time_source()?,
        },
        handoff_clusters: config::list_or("CAPBLOCK_HANDOFF_CLUSTERS", vec![])?,
        // Unset (TeamPage=Disabled) or empty: no page.
        page_bucket: config::optional("CAPBLOCK_PAGE_BUCKET"),
        track,
        reminders,
    })
}

/// The function as Lambda runs it, from the environment (`main`).
pub async fn from_env(function: &'static str) -> Result<Lambda<App>, FunctionError> {
    let settings = settings()?;
    let teams = config::team_approvals()?;
    let mut lambda = build(function, settings, capblock_shared::aws::load_config().await);
    lambda.handler.team_approvals = teams;
    Ok(lambda)
}

/// The function on `settings` and an SDK configuration (a test's endpoints): its edge on the AWS
/// adapters, and its own: the reminder schedules, the hand-off actions' services and the team
/// page's bucket.
pub fn build(function: &'static str, settings: Settings, sdk: aws_config::SdkConfig) -> Lambda<App> {
    let Settings { edge, track, reminders: r, handoff_clusters, page_bucket } = settings;
    let ssm = Arc::new(Ssm::new(sdk.clone()));
    let handoff = Handoff {
        parameters: ssm.clone(),
        commands: ssm,
        groups: Arc::new(AutoScaling::new(sdk.clone())),
        reservation_groups: Arc::new(ResourceGroups::new(sdk.clone())),
        nodegroups: Arc::new(Eks::new(sdk.clone())),
        shares: Arc::new(Ram::new(sdk.clone())),
        accounts: Arc::new(AssumedAccounts::new(sdk.clone(), &track.stack.name)),
    };
    let own = OwnPorts {
        reminders: Arc::new(SchedulerReminders::new(
            aws_sdk_scheduler::Client::new(&sdk),
            r.group,
            r.target_arn,
            r.role_arn,
            r.leads,
        )),
        pages: page_bucket.map(|bucket| Arc::new(S3Pages::new(&sdk, bucket)) as Arc<dyn PagePublisher>),
        handoff: Some(handoff),
    };
    let edge = Edge::with_sdk(function, AWS_PORTS, edge, sdk);
    Lambda { edge, handler: App { own, handoff_clusters, settings: track, team_approvals: Default::default() } }
}

/// Where rules' hand-off actions act: parameters and Run Command; Auto Scaling groups; capacity
/// reservation groups; EKS managed node groups; RAM shares; member accounts' sides.
pub struct Handoff {
    pub parameters: Arc<dyn Parameters>,
    pub commands: Arc<dyn Commands>,
    pub groups: Arc<dyn Groups>,
    pub reservation_groups: Arc<dyn ReservationGroups>,
    pub nodegroups: Arc<dyn Nodegroups>,
    pub shares: Arc<dyn Shares>,
    pub accounts: Arc<dyn AccountHands>,
}

/// The ports this function uses beyond its edge's.
pub struct OwnPorts {
    pub reminders: Arc<dyn Reminders>,
    /// The team page's bucket, when the stack publishes one.
    pub pages: Option<Arc<dyn PagePublisher>>,
    /// Where rules' hand-off actions act; `None` runs none (they wait in the outbox, as the
    /// tracker leaves them without an `ActionRunner`).
    pub handoff: Option<Handoff>,
}

/// What this function keeps beyond its edge, once per container.
pub struct App {
    pub own: OwnPorts,
    /// The EKS clusters whose node groups the role may scale (the template's HandoffClusters):
    /// preflight tries DescribeNodegroup on one of them.
    pub handoff_clusters: Vec<String>,
    pub settings: TrackSettings,
    /// The teams' approval settings (`config::team_approvals`), which the team page judges
    /// people's requests by, as the scan does; none by default.
    pub team_approvals: std::collections::BTreeMap<String, capblock_shared::domain::request::TeamApproval>,
}

impl App {
    /// The hand-off actions' runner on this function's ports, when it has them.
    fn action_runner<'a>(&'a self, edge: &'a Edge) -> Option<ActionRunner<'a>> {
        let h = self.own.handoff.as_ref()?;
        Some(ActionRunner {
            parameters: h.parameters.as_ref(),
            groups: h.groups.as_ref(),
            commands: h.commands.as_ref(),
            instances: edge.ports.market.as_ref(),
            reservation_groups: h.reservation_groups.as_ref(),
            nodegroups: h.nodegroups.as_ref(),
            shares: h.shares.as_ref(),
            accounts: Some(h.accounts.as_ref()),
        })
    }
}

#[async_trait::async_trait]
impl Handler for App {
    type Report = TrackReport;

    /// The clusters, and the member accounts the stored rules' `handoff_account` name
    /// (preflight assumes the member role in each); none when the rules cannot be read (logged:
    /// the check says so).
    async fn probe(&self, edge: &Edge, targets: &mut capblock_shared::aws::probe::ProbeTargets) {
        targets.handoff_clusters = self.handoff_clusters.clone();
        targets.handoff_accounts = match edge.ports.store.list_rules().await {
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
        };
    }

    async fn run(&self, edge: &Edge, event: LambdaEvent<Payload>) -> Result<TrackReport, Diagnostic> {
        let stack = &self.settings.stack;
        let until = invocation_deadline(&event.context);
        let summary = matches!(&event.payload, Payload::Json(v) if asks_for_summary(v));
        edge.on_tick(event.payload, stack, |at| async move {
            let ports = &edge.ports;
            let tracker = Tracker {
                market: ports.market.as_ref(),
                store: ports.store.as_ref(),
                notifier: ports.notifier.as_ref(),
                reminders: self.own.reminders.as_ref(),
                settings: &self.settings,
                action_runner: self.action_runner(edge),
            };
            let mut report = tracker.run_until(at, until).await?;
            let after = AfterTrack {
                store: ports.store.as_ref(),
                notifier: ports.notifier.as_ref(),
                pages: self.pages_for(until),
                team_budgets: &stack.team_budgets,
                team_approvals: &self.team_approvals,
                render: capblock_page::render,
            };
            after.run(at, summary, &mut report).await?;
            let mut metrics = metrics::of_track(&report, &stack.name);
            if report.page.as_ref().is_some_and(PageReport::failed) {
                let batch = metrics.get_or_insert_with(|| Batch::new(&stack.name, at.clock()));
                batch.error(edge.function(), PAGE_FAILED_KIND);
            }
            Ok((report, metrics))
        })
        .await
    }
}

impl App {
    /// The page's bucket for a run that must be done by `until`: not in a run's last seconds,
    /// where a page cut off by Lambda's timeout would fail the run; unclaimed, the hour's page
    /// is the next run's.
    fn pages_for(&self, until: Option<tokio::time::Instant>) -> Option<&dyn PagePublisher> {
        let pages = self.own.pages.as_deref()?;
        let time_left = until.map(|u| u.saturating_duration_since(tokio::time::Instant::now()));
        if time_left.is_some_and(|left| left < PAGE_TIME) {
            tracing::info!(
                event = "page_deferred",
                "too little time left in this run: the next run publishes the page"
            );
            return None;
        }
        Some(pages)
    }
}

#[cfg(test)]
mod tests;
