//! scan-offerings: the scheduled scan-and-buy. Each run settles unknown purchase outcomes,
//! searches the market for every enabled rule, stores the prices seen, and buys (or, in
//! dry-run, announces) the cheapest offering that meets each rule.

use std::collections::BTreeMap;
use std::sync::Mutex;

use capblock_shared::app::metrics;
use capblock_shared::app::scan::{ScanReport, ScanSettings, Scanner};
use capblock_shared::config;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::request::TeamApproval;
use capblock_shared::lambda::{Edge, EdgeConfig, FunctionError, Handler, Lambda, Payload, invocation_deadline};
use capblock_shared::ports::MemberMarket;
use lambda_runtime::{Diagnostic, LambdaEvent};

/// The ports of the AWS adapters this function uses (`ACTIONS` in shared/src/aws): its role in
/// template.yaml allows exactly their actions (infra/deploy/crosscheck). A new port in the bounds
/// of the app service it runs goes here too.
pub const AWS_PORTS: &[&str] = &[
    "OfferingSource",
    "WatchAccounts",
    "InstanceTypeSource",
    "Purchaser",
    "ReservationSource",
    "QuotaSource",
    "RuleStore",
    "SettingsStore",
    "FunctionDirectory",
    "MarketMemory",
    "Ledger",
    "BlockStore",
    "Outbox",
    "ObservationStore",
    "RequestStore",
    "Notifier",
    "EventBus",
];

/// What this function is configured with (`settings` reads it from the environment).
pub struct Settings {
    pub edge: EdgeConfig,
    pub scan: ScanSettings,
    /// The member accounts lending the watch their describe limit (`WatchAccounts`).
    pub member_accounts: Vec<String>,
}

/// Reads this function's settings from the environment.
pub fn settings() -> Result<Settings, FunctionError> {
    let scan = ScanSettings { stack: config::stack_settings()?, describe: describe_budget()?, settles: true };
    Ok(Settings {
        edge: EdgeConfig {
            stack: scan.stack.name.clone(),
            // Stored for the CLI, which buys only on the settings its stack runs on.
            keep_settings: Some(scan.stack.clone()),
            targets: config::targets()?,
            workloads_topic: None,
            schedule_group: None,
            time: config::time_source()?,
        },
        member_accounts: config::member_accounts()?,
        scan,
    })
}

/// How a run asks each region's DescribeCapacityBlockOfferings: EC2's refill interval as
/// assumed (one call per 4 s per account and region, as public clients meet it), the share of
/// it a region starts at before its pace is learned, the bounds of the learned pace, and how
/// long a run asks.
pub fn describe_budget() -> Result<DescribeBudget, FunctionError> {
    let d = DescribeBudget::default();
    let budget = DescribeBudget {
        refill: config::seconds_or("CAPBLOCK_DESCRIBE_REFILL_SECONDS", d.refill)?,
        share: config::parsed_or("CAPBLOCK_DESCRIBE_SHARE", d.share)?,
        fastest: config::seconds_or("CAPBLOCK_DESCRIBE_FASTEST_SECONDS", d.fastest)?,
        slowest: config::seconds_or("CAPBLOCK_DESCRIBE_SLOWEST_SECONDS", d.slowest)?,
        ask_for: config::seconds_or("CAPBLOCK_ASK_SECONDS", d.ask_for)?,
    };
    budget.validate().map_err(|problem| {
        FunctionError::Config(config::ConfigError::Invalid {
            name: "CAPBLOCK_DESCRIBE_SHARE",
            value: budget.share.to_string(),
            problem,
        })
    })?;
    Ok(budget)
}

/// The function as Lambda runs it, from the environment (`main`).
pub async fn from_env(function: &'static str) -> Result<Lambda<App>, FunctionError> {
    let settings = settings()?;
    let teams = config::team_approvals()?;
    let mut lambda = build(function, settings, capblock_shared::aws::load_config().await).await;
    lambda.handler.team_approvals = teams;
    Ok(lambda)
}

/// The function on `settings` and an SDK configuration (a test's endpoints): its edge on the AWS
/// adapters, and a market client per member account through its watch role.
pub async fn build(function: &'static str, settings: Settings, sdk: aws_config::SdkConfig) -> Lambda<App> {
    let members =
        capblock_shared::aws::accounts::member_markets(&sdk, &settings.member_accounts, &settings.scan.stack.name)
            .await;
    let edge = Edge::with_sdk(function, AWS_PORTS, settings.edge, sdk);
    Lambda { edge, handler: App::new(settings.scan, members) }
}

/// What this function keeps beyond its edge, once per container.
pub struct App {
    /// Accelerator counts learned from DescribeInstanceTypes outlive one invocation.
    catalog: Mutex<AcceleratorCatalog>,
    settings: ScanSettings,
    /// Member accounts lending the watch their describe limit (`WatchAccounts`), each a market
    /// client under its read-only role, built once per container.
    members: Vec<MemberMarket>,
    /// The teams' approval settings for people's requests (`team_approvals`); none by default.
    pub team_approvals: BTreeMap<String, TeamApproval>,
}

impl App {
    /// The handler on its scan settings and the member accounts' markets (none: the buying
    /// account asks alone), whatever ports its edge stands on.
    pub fn new(settings: ScanSettings, members: Vec<MemberMarket>) -> App {
        App { members, settings, catalog: Mutex::new(AcceleratorCatalog::new()), team_approvals: BTreeMap::new() }
    }
}

#[async_trait::async_trait]
impl Handler for App {
    type Report = ScanReport;

    async fn probe(&self, _edge: &Edge, targets: &mut capblock_shared::aws::probe::ProbeTargets) {
        targets.member_accounts = self.members.iter().map(|w| w.account.clone()).collect();
    }

    fn members(&self) -> &[MemberMarket] {
        &self.members
    }

    async fn run(&self, edge: &Edge, event: LambdaEvent<Payload>) -> Result<ScanReport, Diagnostic> {
        let stack = &self.settings.stack;
        let until = invocation_deadline(&event.context);
        edge.on_tick(event.payload, stack, |at| async move {
            let ports = &edge.ports;
            let scanner = Scanner {
                market: ports.market.as_ref(),
                store: ports.store.as_ref(),
                notifier: ports.notifier.as_ref(),
                catalog: &self.catalog,
                settings: &self.settings,
                members: &self.members,
            };
            let report = scanner.run_with_requests(at, until, &self.team_approvals).await?;
            let metrics = metrics::of_scan(&report, &stack.name);
            Ok((report, Some(metrics)))
        })
        .await
    }
}

#[cfg(test)]
mod tests;
