//! scan-offerings: the scheduled scan-and-buy. Each run settles unknown purchase outcomes,
//! searches the market for every enabled rule, stores the prices seen, and buys (or, in
//! dry-run, announces) the cheapest offering that meets each rule.

use std::sync::Mutex;

use capblock_shared::app::metrics;
use capblock_shared::app::scan::{ScanReport, ScanSettings, Scanner};
use capblock_shared::config;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::plan::DescribeBudget;
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
    "Notifier",
    "EventBus",
];

/// Everything built once per container and reused by every invocation.
pub struct App {
    /// Stores the stack's settings in the table for the CLI, once per container.
    keeper: SettingsKeeper,
    /// Records the name Lambda runs this function under, for preflight.
    names: NameKeeper,
    /// Where `now` comes from: the wall clock in a deployed stack.
    time: capblock_shared::aws::clock::TimeSource,
    aws: Adapters,
    /// Accelerator counts learned from DescribeInstanceTypes outlive one invocation.
    catalog: Mutex<AcceleratorCatalog>,
    settings: ScanSettings,
    /// Member accounts lending the watch their describe limit (`WatchAccounts`), each a market
    /// client under its read-only role, built once per container.
    watch: Vec<capblock_shared::ports::WatchAccount>,
}

/// Reads this function's settings from the environment.
pub fn settings() -> Result<ScanSettings, FunctionError> {
    Ok(ScanSettings { stack: config::stack_settings()?, describe: describe_budget()?, settles: true })
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

impl App {
    pub async fn from_env() -> Result<App, FunctionError> {
        let settings = settings()?;
        let aws = Adapters::new(config::targets()?, None).await;
        let watch =
            capblock_shared::aws::accounts::watch_accounts(&aws.sdk, &config::watch_accounts()?, &settings.stack.name)
                .await;
        Ok(App {
            watch,
            keeper: SettingsKeeper::new(settings.stack.clone(), aws.alerts_topic.clone()),
            names: NameKeeper::from_env("scan-offerings"),
            settings,
            aws,
            catalog: Mutex::new(AcceleratorCatalog::new()),
            time: config::time_source()?,
        })
    }

    pub async fn handle(&self, event: LambdaEvent<Payload>) -> Result<Reply<ScanReport>, Diagnostic> {
        let stack = &self.settings.stack;
        if let Err(e) = self.keeper.keep(&self.aws.store, &self.time, &SystemClock).await {
            return Err(report("scan-offerings", &stack.name, e));
        }
        self.names.keep(&self.aws.store).await;
        let mut targets = self.aws.probe_targets(&stack.name, "scan-offerings", None);
        targets.watch_accounts = self.watch.iter().map(|w| w.account.clone()).collect();
        if let Some(checked) =
            check_own_role("scan-offerings", AWS_PORTS, &event.payload, &self.aws.sdk, targets, &self.watch).await
        {
            return checked.map(Reply::Role).map_err(|e| report("scan-offerings", &stack.name, e));
        }
        let until = invocation_deadline(&event.context);
        let out = on_tick("scan-offerings", event.payload, &self.time, &SystemClock, stack, |at| async move {
            let scanner = Scanner {
                market: &self.aws.market,
                store: &self.aws.store,
                notifier: &self.aws.notifier,
                catalog: &self.catalog,
                settings: &self.settings,
                watch: &self.watch,
            };
            let report = scanner.run_until(at, until).await?;
            let metrics = metrics::of_scan(&report, &stack.name);
            Ok((report, Some(metrics)))
        })
        .await;
        emit_corrupt_items("scan-offerings", &stack.name, &self.aws.store);
        out.map(Reply::Run)
    }
}
