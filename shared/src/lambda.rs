//! What every function shares at its edge: the ports it runs on ([`Ports`]: the AWS adapters
//! when deployed, the in-memory ones in a function's own tests), JSON logs, the
//! scheduled-trigger payload, and typed errors mapped to Lambda's error response.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::aws::clock::{ClockError, TimeSource};
use crate::config::ConfigError;
use crate::domain::metrics::Batch;
use crate::domain::rule::Mode;
use crate::domain::run_time::RunTime;
use crate::domain::stack::{StackSettings, StoredSettings};
use crate::ports::{
    AlarmStore, BlockArchive, BlockKinds, BlockStatusSource, BlockStore, Clock, ExtensionHistory, ExtensionLedger,
    ExtensionMarket, FunctionDirectory, InstanceSource, InstanceTypeSource, Ledger, MarketError, MarketMemory,
    Notifier, NotifyError, ObservationStore, OfferingSource, Outbox, PageClaims, Purchaser, QuotaSource, RateStore,
    RequestStore, ReservationLookup, ReservationSource, RuleStore, SettingsStore, StoreError,
};
/// The invocation Lambda hands over (a test builds one with `LambdaEvent::new`).
pub use lambda_runtime::{Context, LambdaEvent};

/// JSON logs (one object a line) at the level `RUST_LOG` asks for, `info` by default.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_target(false)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The `Errors` kind of a panic: a bug, or input no check caught.
pub const PANIC_KIND: &str = "capblock.Panic";

/// Makes a panic leave what a failed invocation leaves: a JSON log line (what panicked, where)
/// and the `Errors` metric of kind `capblock.Panic`, which the stack's alarm watches. Release
/// builds abort on panic, so without this the process ends with neither. Call once, first
/// thing in `main`; the stack's name is read here so that a panic while reading the rest of
/// the settings is counted too.
pub fn install_panic_hook(function: &'static str) {
    let stack = crate::config::optional("CAPBLOCK_STACK").unwrap_or_else(|| "unknown".to_string());
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        let location = info.location().map(|l| l.to_string());
        // The metric's timestamp only: nothing is decided by it.
        let (line, metrics) = panic_report(function, &stack, &message, location.as_deref(), Utc::now());
        // Written by hand, not through `tracing`: the panic may have come from inside it.
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        emit(&metrics);
    }));
}

/// What the panic hook writes: the log line (shaped like the `tracing` JSON lines) and the
/// `Errors` metric batch.
pub fn panic_report(
    function: &str,
    stack: &str,
    message: &str,
    location: Option<&str>,
    at: DateTime<Utc>,
) -> (String, Batch) {
    let line = serde_json::json!({
        "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "level": "ERROR",
        "fields": {
            "message": "panicked",
            "event": "panic",
            "function": function,
            "error_type": PANIC_KIND,
            "error": message,
            "location": location,
        },
    });
    let mut errors = Batch::new(stack, at);
    errors.error(function, PANIC_KIND);
    (line.to_string(), errors)
}

/// The `Errors` kind of a stored item that does not decode: one left out of a listing, or
/// one an invocation needed.
pub const CORRUPT_KIND: &str = "capblock.CorruptItem";

/// Counts the items `store`'s listings left out as corrupt during this invocation in `Errors`
/// (kind `capblock.CorruptItem`): each one was logged with its key when it was skipped.
pub fn emit_corrupt_items(function: &str, stack: &str, store: &dyn EdgeStore) {
    let n = store.take_corrupt_items();
    if n > 0 {
        // The metric's timestamp only: nothing is decided by it.
        let mut errors = Batch::new(stack, Utc::now());
        errors.errors(function, CORRUPT_KIND, n);
        emit(&errors);
    }
}

/// Every market port a function's workflows call (scan, track, an event's handling), as one
/// object the edge holds: EC2 when deployed (`Ec2Market`), EC2 in memory in a function's tests.
pub trait EdgeMarket:
    OfferingSource
    + InstanceTypeSource
    + Purchaser
    + ReservationSource
    + ReservationLookup
    + QuotaSource
    + ExtensionMarket
    + ExtensionHistory
    + BlockKinds
    + BlockStatusSource
    + InstanceSource
{
}

// The two markets a function runs on, named as `EdgeStore`'s two tables are: each implements
// every port above.
impl EdgeMarket for crate::aws::ec2::Ec2Market {}

impl EdgeMarket for crate::memory::MemoryEc2 {}

/// Every store port a function's workflows and its edge call, as one object the edge holds:
/// the DynamoDB table when deployed (`DynamoStore`), the in-memory table in a function's tests.
pub trait EdgeStore:
    RuleStore
    + Ledger
    + BlockStore
    + BlockArchive
    + ExtensionLedger
    + ObservationStore
    + AlarmStore
    + PageClaims
    + SettingsStore
    + FunctionDirectory
    + MarketMemory
    + RequestStore
    + RateStore
    + Outbox
{
    /// The items this store's listings left out as corrupt since the last call, counted by the
    /// edge after each invocation (`emit_corrupt_items`).
    fn take_corrupt_items(&self) -> u64;
}

impl EdgeStore for crate::aws::dynamo::DynamoStore {
    fn take_corrupt_items(&self) -> u64 {
        crate::aws::dynamo::DynamoStore::take_corrupt_items(self)
    }
}

impl EdgeStore for crate::memory::MemoryTable {
    /// None: the memory table holds typed items, so none of its listings leaves one out (an
    /// extension seeded corrupt fails the strict read that needs it, which its caller sees).
    fn take_corrupt_items(&self) -> u64 {
        0
    }
}

/// The ports a function runs on, held by its [`Edge`]: the market, the table and the notifier
/// its workflows take, and the wall clock its time source reads. `main` builds them on AWS
/// (`From<Adapters>`); a function's own tests build them in memory ([`Ports::memory`]) on a
/// fixed clock, and call the same handler.
pub struct Ports {
    pub market: std::sync::Arc<dyn EdgeMarket>,
    pub store: std::sync::Arc<dyn EdgeStore>,
    pub notifier: std::sync::Arc<dyn Notifier>,
    /// What `TimeSource::Wall` reads: the system clock on AWS.
    pub clock: std::sync::Arc<dyn Clock>,
    /// The AWS configuration the adapters were built on, for preflight's role probe, which tries
    /// the function's own IAM role action by action against AWS itself (DryRun, a denied write):
    /// ports in memory have no role, so on them (`None`) preflight's ask is refused by name.
    pub aws: Option<aws_config::SdkConfig>,
}

impl From<Adapters> for Ports {
    fn from(a: Adapters) -> Ports {
        Ports {
            market: std::sync::Arc::new(a.market),
            store: std::sync::Arc::new(a.store),
            notifier: std::sync::Arc::new(a.notifier),
            clock: std::sync::Arc::new(crate::ports::SystemClock),
            aws: Some(a.sdk),
        }
    }
}

impl Ports {
    /// The ports in memory (`capblock_core::memory`), read by `clock`: a test keeps its own
    /// handles to them, to seed them and to see what the function did.
    pub fn memory(
        market: std::sync::Arc<crate::memory::MemoryEc2>,
        store: std::sync::Arc<crate::memory::MemoryTable>,
        notifier: std::sync::Arc<crate::memory::MemoryNotifier>,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Ports {
        Ports { market, store, notifier, clock, aws: None }
    }
}

/// The adapters every function talks through, built once per container from the standard AWS
/// configuration chain (so `AWS_ENDPOINT_URL_<SERVICE>` points them at an emulator): the market
/// (EC2), the table and the notifier (alerts, plus the workloads topic for the function that
/// sends checkpoint notices, and capblock's events to the EventBridge bus).
pub struct Adapters {
    pub sdk: aws_config::SdkConfig,
    /// The alerts topic, as configured (stored with the stack's settings for the CLI).
    pub alerts_topic: String,
    pub market: crate::aws::ec2::Ec2Market,
    pub store: crate::aws::dynamo::DynamoStore,
    pub notifier: crate::aws::eventbridge::Delivery,
}

impl Adapters {
    pub async fn new(targets: crate::config::Targets, workloads_topic: Option<String>) -> Adapters {
        Adapters::with_sdk(crate::aws::load_config().await, targets, workloads_topic)
    }

    /// The adapters on a given SDK configuration (a test's endpoints).
    pub fn with_sdk(
        sdk: aws_config::SdkConfig,
        targets: crate::config::Targets,
        workloads_topic: Option<String>,
    ) -> Adapters {
        let crate::config::Targets { table, alerts_topic: alerts, event_bus } = targets;
        Adapters {
            market: crate::aws::ec2::Ec2Market::new(sdk.clone()),
            store: crate::aws::dynamo::DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), table),
            alerts_topic: alerts.clone(),
            notifier: crate::aws::eventbridge::Delivery::new(
                &sdk,
                crate::aws::sns::SnsNotifier::new(aws_sdk_sns::Client::new(&sdk), alerts, workloads_topic),
                event_bus,
            ),
            sdk,
        }
    }
}

/// Stores the stack's settings (from this function's configuration) in the table, for the CLI
/// to act as the stack does: at the start of the container's first invocation, and again at the
/// next one if that failed. The store writes only when what is stored differs, so three
/// functions with the same configuration leave one item with the time the settings last changed.
pub struct SettingsKeeper {
    stack: StackSettings,
    alerts_topic: String,
    stored: std::sync::atomic::AtomicBool,
}

impl SettingsKeeper {
    pub fn new(stack: StackSettings, alerts_topic: String) -> SettingsKeeper {
        SettingsKeeper { stack, alerts_topic, stored: std::sync::atomic::AtomicBool::new(false) }
    }

    /// Stores the settings unless this container did already. A failure fails the invocation
    /// (retryable): a CLI reading settings older than the stack's could spend past a new cap.
    pub async fn keep(
        &self,
        store: &dyn SettingsStore,
        source: &TimeSource,
        clock: &dyn Clock,
    ) -> Result<(), FunctionError> {
        use std::sync::atomic::Ordering;
        if self.stored.load(Ordering::Acquire) {
            return Ok(());
        }
        // When they were written: the time source's, never a payload's.
        let written_at = source.now(clock).await?;
        let settings =
            StoredSettings { stack: self.stack.clone(), alerts_topic: self.alerts_topic.clone(), written_at };
        let written = store.store_settings(&settings).await?;
        tracing::info!(event = "stack_settings_kept", written, mode = self.stack.mode.as_str(), account_budget = ?self.stack.account_budget, "the stack's settings are in the table");
        self.stored.store(true, Ordering::Release);
        Ok(())
    }
}

/// What an invocation answers: a run's report, or the function's own role checked for `capblock
/// preflight`. Serialized as the one it is, so a report reads exactly as it always did.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Reply<R> {
    Run(R),
    Role(crate::domain::permissions::RoleCheck),
}

/// The function's own role, tried action by action (`app::permissions`), when `payload` is
/// preflight's ask; `None` for any other payload (the function does its work). Only the regions
/// and instance types to try are read from the payload: it can make the function try its own
/// actions without effect, nothing else. `ports` are the function's `AWS_PORTS`; `members` the
/// member accounts it asks the market through (scan-offerings'), each asked the ask's member
/// questions through its watch role (`app::permissions::ask_members`). `store` is the
/// function's table, whose rules bound the regions tried.
pub async fn check_own_role(
    function: &str,
    ports: &[&str],
    payload: &Payload,
    (sdk, store): (&aws_config::SdkConfig, &dyn RuleStore),
    targets: crate::aws::probe::ProbeTargets,
    members: &[crate::ports::MemberMarket],
) -> Option<Result<crate::domain::permissions::RoleCheck, FunctionError>> {
    use crate::domain::permissions::PermissionsAsk;
    let Payload::Json(v) = payload else { return None };
    let ask = match PermissionsAsk::of(v)? {
        Ok(ask) => ask,
        Err(problem) => return Some(Err(FunctionError::BadInput(problem))),
    };
    // Only the stored rules' regions are tried, each once: the payload's word is not enough.
    let watched = match store.list_rules().await {
        Ok(rules) => rules.iter().flat_map(|r| r.rule.regions.iter().cloned()).collect(),
        Err(e) => {
            tracing::warn!(event = "role_check_rules_unread", error = %e, "no region tried: the rules could not be read");
            std::collections::BTreeSet::new()
        }
    };
    let (ask, dropped) = ask.bounded_to(&watched);
    let probe = crate::aws::probe::AwsProbe::new(sdk, targets);
    let actions = crate::aws::probe::actions_of(ports);
    let mut check = crate::app::permissions::check_role(function, &actions, &ask, &probe).await;
    if !members.is_empty() {
        let pause = std::time::Duration::from_millis(ask.member_pause_ms);
        let helpers = crate::app::paced_asker::helpers(members);
        check.members = crate::app::permissions::ask_members(&helpers, &ask.members, pause).await;
    }
    tracing::info!(
        event = "role_checked",
        function,
        actions = actions.len(),
        regions = ask.asks.len(),
        left_out = dropped,
        "tried the role's actions for preflight"
    );
    Some(Ok(check))
}

/// Records the name Lambda runs this function under (`AWS_LAMBDA_FUNCTION_NAME`) in the table,
/// once per container, for `capblock preflight` to find the function. A failure is logged and
/// tried again next time: it never fails the function's work.
pub struct NameKeeper {
    kind: &'static str,
    name: Option<String>,
    kept: std::sync::atomic::AtomicBool,
}

impl NameKeeper {
    pub fn from_env(kind: &'static str) -> NameKeeper {
        NameKeeper {
            kind,
            name: crate::config::optional("AWS_LAMBDA_FUNCTION_NAME"),
            kept: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub async fn keep(&self, store: &dyn crate::ports::FunctionDirectory) {
        use std::sync::atomic::Ordering;
        let Some(name) = &self.name else { return };
        if self.kept.load(Ordering::Acquire) {
            return;
        }
        match store.record_function(self.kind, name).await {
            Ok(()) => self.kept.store(true, Ordering::Release),
            Err(e) => {
                tracing::warn!(event = "function_name_not_kept", function = self.kind, error = %e, "the function's name is not in the table yet")
            }
        }
    }
}

/// What a function's edge is built from: read by the function from its own settings (the
/// environment variables stay the function's to name, where infra/deploy/crosscheck finds them),
/// or given by a test.
pub struct EdgeConfig {
    /// The stack's name: the `Errors` metric's `Stack`, and the tag the role probe tries.
    pub stack: String,
    /// The stack's settings, for a function that stores them in the table for the CLI
    /// (scan-offerings, track-blocks); `None` for one that does not.
    pub keep_settings: Option<StackSettings>,
    pub targets: crate::config::Targets,
    /// The workloads topic, for the function that sends checkpoint notices.
    pub workloads_topic: Option<String>,
    /// The reminders' schedule group: preflight tries the role's scheduler actions on it.
    pub schedule_group: Option<String>,
    /// Where `now` comes from: the wall clock in a deployed stack.
    pub time: TimeSource,
}

/// The edge every function stands behind, built once per container: its name, its role's
/// ports, the ports it runs on, the time source, and the steps each invocation takes around
/// the function's own work ([`Lambda::handle`]).
pub struct Edge {
    function: &'static str,
    aws_ports: &'static [&'static str],
    stack: String,
    pub ports: Ports,
    pub time: TimeSource,
    names: NameKeeper,
    keeper: Option<SettingsKeeper>,
    schedule_group: Option<String>,
    /// The table and alerts topic as configured: what preflight's role probe tries.
    targets: crate::config::Targets,
}

impl Edge {
    /// The edge of `function` (its one name: logs, metrics, preflight's record and probe) whose
    /// role allows `ports`' actions, on the standard AWS configuration chain.
    pub async fn new(function: &'static str, ports: &'static [&'static str], config: EdgeConfig) -> Edge {
        Edge::with_sdk(function, ports, config, crate::aws::load_config().await)
    }

    /// The same on a given SDK configuration (a test's endpoints).
    pub fn with_sdk(
        function: &'static str,
        ports: &'static [&'static str],
        config: EdgeConfig,
        sdk: aws_config::SdkConfig,
    ) -> Edge {
        let adapters = Adapters::with_sdk(sdk, config.targets.clone(), config.workloads_topic.clone());
        Edge::on(function, ports, config, adapters.into())
    }

    /// The edge on given ports: the AWS adapters (`with_sdk`), or the in-memory ones a
    /// function's tests run it on. `config`'s targets name what preflight's probe tries.
    pub fn on(function: &'static str, aws_ports: &'static [&'static str], config: EdgeConfig, ports: Ports) -> Edge {
        let EdgeConfig { stack, keep_settings, targets, workloads_topic: _, schedule_group, time } = config;
        let keeper = keep_settings.map(|s| SettingsKeeper::new(s, targets.alerts_topic.clone()));
        let names = NameKeeper::from_env(function);
        Edge { function, aws_ports, stack, names, keeper, ports, time, schedule_group, targets }
    }

    /// `now` by the edge's time source, on its ports' clock.
    pub async fn now(&self) -> Result<DateTime<Utc>, FunctionError> {
        Ok(self.time.now(self.ports.clock.as_ref()).await?)
    }

    /// What `capblock preflight`'s probe of this function's role needs: its table, topic and
    /// stack (the purchase is tried with the stack's tag), and its schedule group if it has one.
    fn probe_targets(&self) -> crate::aws::probe::ProbeTargets {
        crate::aws::probe::ProbeTargets {
            table: self.targets.table.clone(),
            alerts_topic: self.targets.alerts_topic.clone(),
            schedule_group: self.schedule_group.clone(),
            stack: self.stack.clone(),
            function: self.function.to_string(),
            handoff_clusters: Vec::new(),
            handoff_accounts: Vec::new(),
            member_accounts: Vec::new(),
        }
    }

    /// The function's name.
    pub fn function(&self) -> &'static str {
        self.function
    }

    /// The stack's name.
    pub fn stack(&self) -> &str {
        &self.stack
    }

    /// A failed invocation as Lambda's typed error, logged and counted (`report`).
    pub fn fail(&self, e: FunctionError) -> lambda_runtime::Diagnostic {
        report(self.function, &self.stack, e)
    }

    /// The body of a scheduled function: parse the tick, take `now` from the edge's time source
    /// (see `run_time`: a live stack never runs on a payload's time), run, and emit the run's
    /// metrics.
    pub async fn on_tick<R, F, Fut>(
        &self,
        payload: Payload,
        stack: &StackSettings,
        run: F,
    ) -> Result<R, lambda_runtime::Diagnostic>
    where
        F: FnOnce(RunTime) -> Fut,
        Fut: std::future::Future<Output = Result<(R, Option<Batch>), FunctionError>>,
    {
        let result = async {
            let tick: Tick = parse_event(payload.into_json()?)?;
            let at = RunTime::for_stack(self.now().await?, tick.time, stack.mode == Mode::Live)
                .map_err(|e| FunctionError::BadInput(e.to_string()))?;
            let (report, metrics) = run(at).await?;
            // A replay's figures are of another moment: on the stack's dashboard they would read
            // as what the stack holds and spends now.
            if at.is_replay() {
                tracing::info!(event = "replay", function = self.function, view = %at.view(), clock = %at.clock(), "a replay: nothing written, no metrics");
                return Ok((report, None));
            }
            Ok((report, metrics))
        }
        .await;
        match result {
            Ok((report, metrics)) => {
                if let Some(m) = metrics {
                    emit(&m);
                }
                Ok(report)
            }
            Err(e) => Err(report(self.function, &stack.name, e)),
        }
    }
}

/// A function's own part behind its [`Edge`]: its work, and what preflight's check of its
/// role needs beyond the edge's.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    /// What a run answers.
    type Report: serde::Serialize + Send;

    /// Adds to the role probe's targets what this function's role reaches beyond the edge's
    /// (clusters, member accounts). Called only for preflight's ask.
    async fn probe(&self, _edge: &Edge, _targets: &mut crate::aws::probe::ProbeTargets) {}

    /// The member accounts it asks the market through, each asked preflight's member questions.
    fn members(&self) -> &[crate::ports::MemberMarket] {
        &[]
    }

    /// One invocation's work (any payload but preflight's ask).
    async fn run(&self, edge: &Edge, event: LambdaEvent<Payload>) -> Result<Self::Report, lambda_runtime::Diagnostic>;
}

/// A function: its edge and its handler; `handle` is what Lambda invokes.
pub struct Lambda<H> {
    pub edge: Edge,
    pub handler: H,
}

impl<H: Handler> Lambda<H> {
    /// One invocation: the stack's settings kept for the CLI (a failure fails the invocation,
    /// retryable), the function's name recorded for preflight, then either preflight's check of
    /// the role or the function's run; the corrupt items the store left out are counted after.
    pub async fn handle(&self, event: LambdaEvent<Payload>) -> Result<Reply<H::Report>, lambda_runtime::Diagnostic> {
        let edge = &self.edge;
        let store = edge.ports.store.as_ref();
        if let Some(keeper) = &edge.keeper {
            keeper.keep(store, &edge.time, edge.ports.clock.as_ref()).await.map_err(|e| edge.fail(e))?;
        }
        edge.names.keep(store).await;
        if is_permissions_ask(&event.payload) {
            // The probe tries the role's actions on AWS itself: ports in memory have no role.
            let Some(sdk) = &edge.ports.aws else {
                let why = "preflight's role check tries this function's IAM role on AWS, and these ports are in memory";
                return Err(edge.fail(FunctionError::BadInput(why.into())));
            };
            let mut targets = edge.probe_targets();
            self.handler.probe(edge, &mut targets).await;
            let members = self.handler.members();
            let on = (sdk, store as &dyn RuleStore);
            if let Some(checked) =
                check_own_role(edge.function, edge.aws_ports, &event.payload, on, targets, members).await
            {
                return checked.map(Reply::Role).map_err(|e| edge.fail(e));
            }
        }
        let out = self.handler.run(edge, event).await;
        emit_corrupt_items(edge.function, &edge.stack, store);
        out.map(Reply::Run)
    }
}

/// Whether the payload is preflight's ask to check the function's role.
fn is_permissions_ask(payload: &Payload) -> bool {
    matches!(payload, Payload::Json(v) if crate::domain::permissions::PermissionsAsk::of(v).is_some())
}

/// A function's `main`: the panic hook and the logs first, then the function built once
/// (`build`, given the function's name) and served for every invocation. `function` is the one
/// place a function spells its name.
pub async fn serve<H, B, Fut>(function: &'static str, build: B) -> Result<(), lambda_runtime::Error>
where
    H: Handler,
    B: FnOnce(&'static str) -> Fut,
    Fut: std::future::Future<Output = Result<Lambda<H>, FunctionError>>,
{
    install_panic_hook(function);
    init_logging();
    let lambda = build(function).await?;
    lambda_runtime::run(lambda_runtime::service_fn(|event| lambda.handle(event))).await
}

/// The payload the recurring schedules send: `{"source": "capblock.schedule", "time":
/// "<aws.scheduler.scheduled-time>"}`. The EventBridge "Scheduled Event" envelope also fits.
/// `time` is when the schedule meant to run; what a run takes as `now` is `run_time`'s choice.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Tick {
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub time: Option<DateTime<Utc>>,
}

/// A time source that cannot be used is the stack's configuration at fault: named by its setting.
impl From<ClockError> for FunctionError {
    fn from(e: ClockError) -> Self {
        let (url, problem) = match e {
            ClockError::Invalid { url, problem } => (url, problem),
            ClockError::Unanswered { url, problem } => (url, format!("the simulated clock did not answer: {problem}")),
        };
        FunctionError::Config(ConfigError::Invalid { name: crate::config::SIMULATED_CLOCK_URL, value: url, problem })
    }
}

/// Why a function invocation failed. The variant name is Lambda's `errorType`, so alarms and
/// retries can tell them apart: `BadInput` is never worth retrying, the others are.
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    #[error("bad input: {0}")]
    BadInput(String),
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("market: {0}")]
    Market(#[from] MarketError),
    #[error("notify: {0}")]
    Notify(#[from] NotifyError),
    /// An EC2 event or reminder that could not be handled now (all of these are worth a retry).
    #[error("event: {0}")]
    Event(#[from] crate::app::on_capacity_event::HandleError),
}

impl FunctionError {
    pub fn kind(&self) -> &'static str {
        match self {
            FunctionError::BadInput(_) => "capblock.BadInput",
            FunctionError::Config(_) => "capblock.Config",
            FunctionError::Store(StoreError::Corrupt { .. }) => CORRUPT_KIND,
            FunctionError::Store(_) => "capblock.StoreUnavailable",
            FunctionError::Market(_) => "capblock.MarketUnavailable",
            FunctionError::Notify(_) => "capblock.NotifyFailed",
            FunctionError::Event(e) => e.kind(),
        }
    }

    /// Whether a retry of the same invocation may succeed.
    pub fn retryable(&self) -> bool {
        // A corrupt item reads the same on every retry, until someone repairs it.
        !matches!(
            self,
            FunctionError::BadInput(_) | FunctionError::Config(_) | FunctionError::Store(StoreError::Corrupt { .. })
        )
    }
}

/// Turns a failed invocation into Lambda's typed error response, after one log line that says
/// what failed, whether a retry may help, and why.
/// The failure also counts in the `Errors` metric of `stack`, by function and kind.
pub fn report(function: &str, stack: &str, e: FunctionError) -> lambda_runtime::Diagnostic {
    tracing::error!(event = "invocation_failed", function, error_type = e.kind(), retryable = e.retryable(), error = %e, "invocation failed");
    // The metric's timestamp only: nothing is decided by it.
    let mut errors = Batch::new(stack, Utc::now());
    errors.error(function, e.kind());
    emit(&errors);
    lambda_runtime::Diagnostic { error_type: e.kind().to_string(), error_message: e.to_string() }
}

/// Writes metrics as CloudWatch embedded metric format: one JSON document a line on stdout,
/// which Lambda sends to the function's log group, where CloudWatch extracts the metrics
/// (no API call, no extra permission). The JSON logs go to stderr, so the two never interleave
/// within a line.
pub fn emit(batch: &Batch) {
    use std::io::Write;
    let mut text = batch.lines().join("\n");
    if text.is_empty() {
        return;
    }
    text.push('\n');
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        tracing::warn!(event = "metrics_not_written", error = %e, "metrics lost for this run");
    }
}

/// When this invocation must be done by (Lambda's deadline, milliseconds since the epoch) as a
/// monotonic instant; `None` when Lambda gave none. The time left is measured on the wall clock
/// whatever the time source: it is the function's real time, not the market's.
pub fn invocation_deadline(context: &lambda_runtime::Context) -> Option<tokio::time::Instant> {
    if context.deadline == 0 {
        return None;
    }
    let deadline = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(context.deadline))?;
    let left = deadline.duration_since(std::time::SystemTime::now()).unwrap_or_default();
    Some(tokio::time::Instant::now() + left)
}

/// An invocation's payload as the runtime hands it over: JSON, or why it is not. The runtime
/// parses the body into the handler's type before capblock sees it, and a body that is not JSON
/// failed there, untyped and with no `Errors` line; this type takes any body, so capblock's own
/// parse (`into_json`) names the problem as `capblock.BadInput`.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Json(serde_json::Value),
    /// The JSON parser's complaint (line and column), never the body itself.
    NotJson(String),
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The parser's error comes back through this call: keep it as the payload instead.
        Ok(match serde_json::Value::deserialize(d) {
            Ok(v) => Payload::Json(v),
            Err(e) => Payload::NotJson(e.to_string()),
        })
    }
}

impl From<serde_json::Value> for Payload {
    fn from(v: serde_json::Value) -> Self {
        Payload::Json(v)
    }
}

impl Payload {
    pub fn into_json(self) -> Result<serde_json::Value, FunctionError> {
        match self {
            Payload::Json(v) => Ok(v),
            Payload::NotJson(why) => Err(FunctionError::BadInput(format!("the payload is not JSON: {why}"))),
        }
    }
}

/// Parses an event payload, naming what is wrong with it.
pub fn parse_event<T: serde::de::DeserializeOwned>(payload: serde_json::Value) -> Result<T, FunctionError> {
    // serde builds a struct from an array as well (`[]` is a `Tick` with every field left out,
    // which ran a full scan): every payload capblock reads is an object.
    let shape = match &payload {
        serde_json::Value::Object(_) => None,
        serde_json::Value::Array(_) => Some("an array"),
        serde_json::Value::Null => Some("null"),
        _ => Some("a scalar"),
    };
    if let Some(shape) = shape {
        return Err(FunctionError::BadInput(format!("the payload must be a JSON object, not {shape}")));
    }
    serde_json::from_value(payload).map_err(|e| FunctionError::BadInput(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{HookVerdict, Hooked, MemoryTable, Script};
    use crate::ports::ReadClock;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// The settings are stored at a container's first invocation, from its configuration and
    /// with the clock's time; not again while it lives; and again after a failed write, which
    /// fails the invocation (retryable) rather than leave the CLI with older settings.
    #[tokio::test]
    async fn the_stacks_settings_are_stored_once_per_container_and_after_a_failure() {
        let stack = StackSettings {
            name: "prod".into(),
            mode: Mode::Live,
            account_budget: Some(crate::domain::money::Money::parse("1000", "USD").unwrap()),
            team_budgets: Default::default(),
        };
        let keeper = SettingsKeeper::new(stack.clone(), "arn:aws:sns:us-east-1:1:alerts".into());
        // The table, its first write of the settings throttled.
        let throttled = StoreError::Unavailable("throttled".into());
        let store = Hooked::new(
            MemoryTable::default(),
            Script::new().first(1, "store_settings", move |_| HookVerdict::error(throttled.clone())),
        );
        let clock = ReadClock(at("2026-12-20T10:00:00Z"));
        let e = keeper.keep(&store, &TimeSource::Wall, &clock).await.unwrap_err();
        assert!(e.retryable(), "{e}");
        keeper.keep(&store, &TimeSource::Wall, &clock).await.unwrap();
        keeper.keep(&store, &TimeSource::Wall, &ReadClock(at("2026-12-20T11:00:00Z"))).await.unwrap();
        assert_eq!(store.hook.count("store_settings"), 2, "asked again after the failure, then not while it lives");
        assert_eq!(
            store.inner.stored_settings().await.unwrap(),
            Some(StoredSettings { stack, alerts_topic: "arn:aws:sns:us-east-1:1:alerts".into(), written_at: clock.0 })
        );
    }

    /// A panic is logged as one JSON line with what and where, and counted in `Errors` by
    /// function and kind, as a failed invocation is.
    #[test]
    fn a_panic_is_logged_and_counted_as_an_error() {
        let at = at("2026-12-20T10:00:00Z");
        let (line, metrics) =
            panic_report("scan-offerings", "prod", "Division overflowed", Some("core/src/domain/plan.rs:154:33"), at);
        let log: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(log["level"], "ERROR");
        assert_eq!(log["fields"]["event"], "panic");
        assert_eq!(log["fields"]["function"], "scan-offerings");
        assert_eq!(log["fields"]["error_type"], "capblock.Panic");
        assert_eq!(log["fields"]["error"], "Division overflowed");
        assert_eq!(log["fields"]["location"], "core/src/domain/plan.rs:154:33");
        let mut expected = Batch::new("prod", at);
        expected.error("scan-offerings", "capblock.Panic");
        assert_eq!(metrics.lines(), expected.lines());
        let doc: serde_json::Value = serde_json::from_str(&metrics.lines()[0]).unwrap();
        assert_eq!((doc["Errors"].as_f64(), doc["Kind"].as_str()), (Some(1.0), Some("capblock.Panic")), "{doc}");
    }

    #[test]
    fn ticks_parse_scheduler_and_eventbridge_payloads() {
        let t: Tick =
            parse_event(serde_json::json!({"source": "capblock.schedule", "time": "2026-12-01T10:00:00Z"})).unwrap();
        assert_eq!(t.time.unwrap().to_rfc3339(), "2026-12-01T10:00:00+00:00");
        let t: Tick = parse_event(serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events", "time": "2026-12-01T10:00:00Z", "detail": {}})).unwrap();
        assert!(t.time.is_some());
        let t: Tick = parse_event(serde_json::json!({})).unwrap();
        assert!(t.time.is_none());
        let e = parse_event::<Tick>(serde_json::json!({"time": "yesterday"})).unwrap_err();
        assert_eq!(e.kind(), "capblock.BadInput");
        assert!(!e.retryable());
        assert!(
            e.to_string().contains("input contains invalid characters")
                || e.to_string().contains("premature end")
                || e.to_string().starts_with("bad input"),
            "{e}"
        );
    }

    /// A body that is not JSON reaches capblock's parse (the runtime's own failed untyped):
    /// `capblock.BadInput`, not retried, naming where the JSON breaks.
    #[test]
    fn a_body_that_is_not_json_is_bad_input() {
        for body in ["{not json", "", "{\"time\": ", "\u{0}"] {
            // As the runtime reads a body (`lambda_runtime::deserializer`): no check past the value.
            let p = Payload::deserialize(&mut serde_json::Deserializer::from_str(body)).unwrap();
            assert!(matches!(p, Payload::NotJson(_)), "{body:?}: {p:?}");
            let e = p.into_json().unwrap_err();
            assert_eq!(e.kind(), "capblock.BadInput");
            assert!(!e.retryable());
            assert!(e.to_string().contains("the payload is not JSON") && e.to_string().contains("line 1"), "{e}");
        }
        let p = Payload::deserialize(&mut serde_json::Deserializer::from_str(r#"{"source": "capblock.schedule"}"#))
            .unwrap();
        assert_eq!(p.into_json().unwrap(), serde_json::json!({"source": "capblock.schedule"}));
    }

    #[test]
    fn a_payload_must_be_an_object() {
        for v in [
            serde_json::json!([]),
            serde_json::json!(["2026-12-01T10:00:00Z"]),
            serde_json::json!(null),
            serde_json::json!(3),
        ] {
            let e = parse_event::<Tick>(v.clone()).unwrap_err();
            assert_eq!(e.kind(), "capblock.BadInput", "{v}");
            assert!(e.to_string().contains("must be a JSON object"), "{v}: {e}");
        }
    }
}
