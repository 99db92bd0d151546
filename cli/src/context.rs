//! What every command shares: the exit codes and the error that carries them, the SDK
//! configuration, the store, the instant a run happens at, rule files and EC2's describe limit.
//!
//! Exit codes (docs/operate.md, "The operator CLI"): 0 success, 1 a failure talking to AWS or the store, 2 bad input
//! (usage, an invalid rule, a refused purchase, failed preflight checks, a search EC2 refused
//! every time), 3 nothing found where something was asked for.

use std::collections::BTreeMap;

use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::request::{TeamApproval, parse_team_approvals};
use capblock_shared::domain::rule::{Mode, Rule, RuleSpec};
use capblock_shared::domain::run_time::RunTime;
use capblock_shared::domain::stack::{StackSettings, StoredSettings};
use capblock_shared::ports::{MarketError, SettingsStore, StoreError};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::table::{safe, safe_lines};

pub const EXIT_FAILURE: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_NOT_FOUND: u8 = 3;

/// Why a command did not succeed. Each kind has its exit code and the stream its message goes
/// to, so a command says what happened and `main` turns it into what the operator sees.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// AWS, the store or the local system failed (exit 1, "error: ..." on stderr).
    #[error("{0}")]
    Failed(String),
    /// A purchase was sent and its answer lost (exit 1): reconciliation settles it by tag.
    #[error("the purchase outcome is unknown ({reason}); the next scan settles intent {intent} by tag")]
    Unknown { intent: String, reason: String },
    /// Bad input: an argument, a --time, a file (exit 2, on stderr).
    #[error("{0}")]
    Invalid(String),
    /// A rule file's problems, each with its field (exit 2). On stdout: it is the report
    /// `rules validate` gives, and scripts read it there.
    #[error("{0}")]
    InvalidRule(String),
    /// Some of the files `rules validate` checked are invalid; each was reported already (exit 2).
    #[error("{0} invalid rule file(s)")]
    InvalidFiles(usize),
    /// A purchase refused before or by EC2: nothing bought (exit 2).
    #[error("refused: {0}; nothing bought")]
    Refused(String),
    /// Preflight checks failed; the findings say which and what to do (exit 2).
    #[error("{0} preflight check(s) failed")]
    ChecksFailed(usize),
    /// EC2 refused every search for some instance families (a quota of 0, or the describe limit
    /// spent by others); the findings say which and what to do (exit 2, as preflight's).
    #[error("EC2 refused every search for {0} instance family(ies)")]
    SearchRefused(usize),
    /// What was asked for does not exist (exit 3, on stderr).
    #[error("{0}")]
    NotFound(String),
    /// The command's output already says that nothing was found (an empty table) (exit 3).
    #[error("nothing found")]
    NothingFound,
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Failed(_) | CliError::Unknown { .. } => EXIT_FAILURE,
            CliError::Invalid(_)
            | CliError::InvalidRule(_)
            | CliError::InvalidFiles(_)
            | CliError::Refused(_)
            | CliError::ChecksFailed(_)
            | CliError::SearchRefused(_) => EXIT_INVALID,
            CliError::NotFound(_) | CliError::NothingFound => EXIT_NOT_FOUND,
        }
    }

    /// Say it where the operator (or a script) expects it.
    pub fn report(&self) {
        match self {
            // Errors carry what came from outside (names, AWS's messages): escaped, but for
            // the line breaks capblock puts in its own messages.
            CliError::Failed(_) => eprintln!("error: {}", safe_lines(&plain(&self.to_string()))),
            CliError::InvalidRule(_) => println!("{}", safe_lines(&self.to_string())),
            CliError::InvalidFiles(_)
            | CliError::NothingFound
            | CliError::ChecksFailed(_)
            | CliError::SearchRefused(_) => {}
            CliError::Unknown { .. } | CliError::Invalid(_) | CliError::Refused(_) | CliError::NotFound(_) => {
                eprintln!("{}", safe_lines(&self.to_string()))
            }
        }
    }

    /// A failure described by `e` (exit 1).
    pub fn failed(e: impl std::fmt::Display) -> CliError {
        CliError::Failed(e.to_string())
    }
}

/// An error as a person reads it: what the SDK's messages mean when the cause is on this side
/// (no credentials, an expired session, an endpoint that does not answer, a table that is not
/// there), said first with what to do, and the SDK's debug dump (the parenthesized
/// `DispatchFailure(...)` that follows its message) left out.
pub fn plain(message: &str) -> String {
    let dump =
        [" (DispatchFailure(", " (ServiceError(", " (TimeoutError(", " (ResponseError(", " (ConstructionFailure("];
    let cut = dump.iter().filter_map(|d| message.find(d)).min().unwrap_or(message.len());
    let said = message[..cut].replace("\\u{a}", " ").replace('\n', " ");
    let hint = if said.contains("no credentials found in chain")
        || said.contains("CredentialsNotLoaded")
        || said.contains("while loading credentials")
    {
        Some(
            "no AWS credentials found: set AWS_PROFILE (after `aws sso login`), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        )
    } else if said.contains("ExpiredToken") || said.contains("expired") && said.contains("token") {
        Some("your AWS session has expired: log in again (aws sso login)")
    } else if said.contains("signing region") || said.contains("region must be set") || said.contains("No region") {
        Some("no AWS region is set: set AWS_REGION (or a region in the AWS profile) to the stack's region")
    } else if said.contains("tcp connect error") || said.contains("dns error") || said.contains("Connection refused") {
        Some("AWS did not answer: check the network and AWS_REGION (AWS_ENDPOINT_URL_* are for the local stack only)")
    } else if said.contains("ResourceNotFoundException") && (said.contains("store") || said.contains("table")) {
        Some("the stack's table does not exist here: check --stack (or CAPBLOCK_TABLE) and AWS_REGION")
    } else {
        None
    };
    match hint {
        Some(h) => format!("{h} ({})", said.trim()),
        None => said.trim().to_string(),
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError::failed(e)
    }
}

impl From<MarketError> for CliError {
    fn from(e: MarketError) -> Self {
        CliError::failed(e)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        CliError::failed(e)
    }
}

impl From<crate::stack::StackError> for CliError {
    fn from(e: crate::stack::StackError) -> Self {
        use crate::stack::StackError;
        match e {
            StackError::NotFound(m) => CliError::NotFound(m),
            StackError::Invalid(m) => CliError::Invalid(m),
            StackError::Failed(m) => CliError::Failed(m),
        }
    }
}

pub type CliResult = Result<(), CliError>;

/// The SDK configuration: the standard AWS chain plus `AWS_ENDPOINT_URL_*`, as the functions.
/// A chosen profile's `region` and `aws_profile` (`crate::stack::profile`) are taken over
/// AWS_REGION and AWS_PROFILE: naming the profile is the choice.
pub async fn sdk() -> aws_config::SdkConfig {
    let Some(p) = crate::stack::profile().filter(|p| p.region.is_some() || p.aws_profile.is_some()) else {
        return capblock_shared::aws::load_config().await;
    };
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(capblock_shared::aws::ec2::timeouts());
    if let Some(name) = &p.aws_profile {
        loader = loader.profile_name(name);
    }
    if let Some(region) = &p.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    loader.load().await
}

/// The regions a command asks about: those given (`--regions`), else the one the SDK acts in:
/// the chosen profile's `region` (`--profile`), else AWS_REGION, else the AWS profile's. So
/// `capblock --profile prod offerings ...` searches prod's region, as every other command acts
/// there. None at all is bad input, with what to give.
pub async fn regions_or_default(
    given: Vec<capblock_shared::domain::ids::Region>,
    flag: &str,
) -> Result<Vec<capblock_shared::domain::ids::Region>, CliError> {
    if !given.is_empty() {
        return Ok(given);
    }
    let sdk = sdk().await;
    let Some(region) = sdk.region() else {
        return Err(CliError::Invalid(format!(
            "no region: give {flag}, or a region in the profile (--profile), AWS_REGION or the AWS profile"
        )));
    };
    region.as_ref().parse().map(|r| vec![r]).map_err(|e| CliError::Invalid(format!("the region {region}: {e}")))
}

/// The stack's store: the table of the stack `--stack` names (its CloudFormation outputs), or
/// the one CAPBLOCK_TABLE names (`crate::stack`).
pub async fn store() -> Result<DynamoStore, CliError> {
    let sdk = sdk().await;
    let table = crate::stack::table(&sdk).await?;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), table);
    say_stack(&store).await;
    Ok(store)
}

/// Whether the command moves money (`scan`, `buy`, `approve`, `intents release`): only those say
/// which stack they act on (`say_stack`).
static MOVES_MONEY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the command as one that moves money: it says, once, which stack and mode it acts on.
pub fn moves_money() {
    MOVES_MONEY.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Says once, on one line of stderr, which stack and mode a command that moves money acts on, as
/// the stack's functions stored them (not as the shell says): the operator sees a dry-run stack
/// before reading a scan's "would buy", and a live one before money moves. The other commands
/// say nothing of it (`status` shows the stack; stdout stays the data alone either way).
async fn say_stack(store: &DynamoStore) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !MOVES_MONEY.load(std::sync::atomic::Ordering::SeqCst) || SAID.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    match store.stored_settings().await {
        Ok(Some(s)) => {
            let cap = crate::table::account_cap(s.stack.account_budget);
            eprintln!("stack {}: {}, {cap}", safe(&s.stack.name), s.stack.mode.as_str());
        }
        // A store that does not answer is the command's own error to tell.
        Ok(None) => eprintln!(
            "table {}: the stack's settings are not stored yet (no function has run): its mode is not known here",
            safe(store.table())
        ),
        Err(_) => {}
    }
}

/// The instants a scan or an approval runs at: the clock's (the wall clock, or a simulator's
/// through CAPBLOCK_SIMULATED_CLOCK_URL) for everything that settles, waits, charges or is
/// stored, and `--time` as the moment looked at. A `--time` off the clock is a replay: a live
/// run refuses it (budget months and waits guard money); a dry run replays it and writes nothing.
pub async fn run_now(time: Option<DateTime<Utc>>, live: bool) -> Result<RunTime, CliError> {
    RunTime::for_stack(clock_now().await?, time, live).map_err(|e| CliError::Invalid(format!("--time: {e}")))
}

/// How far this machine's clock may be from AWS's for a person to buy from it: well within the
/// graces a purchase is judged by (5 minutes before an abandoned reservation is given back, 15
/// before an unseen purchase is put before a person).
pub const MAX_CLOCK_SKEW: chrono::Duration = chrono::Duration::seconds(60);

/// The instant a person's purchase (`buy`, `approve`, a live or approval `scan`) is made at:
/// AWS's clock, the `Date` of an EC2 answer, and only while this machine's clock (its time
/// source) agrees with it within `MAX_CLOCK_SKEW`. Budget months and every wait that guards
/// money follow the stack's clock, never a laptop's.
pub async fn purchase_now(sdk: &aws_config::SdkConfig) -> Result<DateTime<Utc>, CliError> {
    let mine = clock_now().await?;
    let aws = capblock_shared::aws::ec2::aws_clock::aws_now(sdk).await.map_err(|e| {
        CliError::Failed(format!("AWS's clock could not be read, and a purchase is stamped with it: {e}"))
    })?;
    skew_refusal(mine, aws).map_or(Ok(aws), Err)
}

/// Why a purchase is refused on this machine's clock `mine` against AWS's `aws`, if it is.
fn skew_refusal(mine: DateTime<Utc>, aws: DateTime<Utc>) -> Option<CliError> {
    let off = mine - aws;
    if off.abs() <= MAX_CLOCK_SKEW {
        return None;
    }
    let side = if off > chrono::Duration::zero() { "ahead of" } else { "behind" };
    Some(CliError::Refused(format!(
        "this machine's clock is {} {side} AWS's ({} UTC): purchases and their budget months follow AWS's clock; \
         set this clock right (NTP) and try again",
        capblock_shared::domain::duration::compact(off.abs()),
        aws.format("%Y-%m-%d %H:%M:%S")
    )))
}

/// The CLI's one time source, for every command: the wall clock, or the simulator's in a
/// simulation (CAPBLOCK_SIMULATED_CLOCK_URL), as the stack's functions read it. A command that
/// defaulted to the wall clock while the market ran on another would look at the wrong days.
pub async fn clock_now() -> Result<DateTime<Utc>, CliError> {
    let source = capblock_shared::config::time_source().map_err(CliError::failed)?;
    source.now(&capblock_shared::ports::SystemClock).await.map_err(CliError::failed)
}

/// Asks before an irreversible change of money: `what` on the terminal, and the word `yes`
/// typed in full (as terraform asks before it applies). Without a terminal only `--yes` says yes.
pub fn confirm_typed(what: &str, yes: bool) -> Result<(), CliError> {
    let prompt =
        if what.is_empty() { "Type `yes` to go on: ".to_string() } else { format!("{what}\nType `yes` to go on: ") };
    match ask(&prompt, "moves", yes)?.as_deref() {
        None | Some("yes") => Ok(()),
        _ => Err(CliError::Refused("not confirmed".into())),
    }
}

/// The person's answer to `prompt` on the terminal, trimmed; `None` when `--yes` answered for
/// them. Without a terminal and without `--yes`, refused: this `verb`s money.
fn ask(prompt: &str, verb: &str, yes: bool) -> Result<Option<String>, CliError> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Refused(format!("this {verb} money and there is no terminal to confirm on: pass --yes")));
    }
    eprint!("{prompt}");
    std::io::stderr().flush().map_err(CliError::failed)?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(CliError::failed)?;
    Ok(Some(answer.trim().to_string()))
}

/// The largest rule file read: a rule is a few hundred bytes, and a path to a device or a
/// runaway file must not be read into memory (`/dev/zero` grew the process to 23 GB).
pub const MAX_RULE_FILE_BYTES: u64 = 1024 * 1024;

/// A rule file's text: a regular file of at most `MAX_RULE_FILE_BYTES`, else why not.
pub fn read_rule_file(path: &str) -> Result<String, CliError> {
    let bad = |why: String| CliError::InvalidRule(format!("{path}: {why}"));
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file (a rule is a TOML file)".into()));
    }
    read_rule_from(file, path)
}

/// A rule file, parsed and validated at `now` (`clock_now`); every problem names its field.
pub fn load_rule(path: &str, now: DateTime<Utc>) -> Result<Rule, CliError> {
    parse_rule(path, &read_rule_file(path)?, now)
}

/// A rule's text read from `name` (a file, or `(stdin)`), parsed and validated at `now`.
pub fn parse_rule(name: &str, text: &str, now: DateTime<Utc>) -> Result<Rule, CliError> {
    RuleSpec::from_toml(text).and_then(|s| s.validate(now)).map_err(|e| CliError::InvalidRule(format!("{name}: {e}")))
}

/// A rule's text from stdin (`rules put -`), at most `MAX_RULE_FILE_BYTES`.
pub fn read_rule_stdin() -> Result<String, CliError> {
    read_rule_from(std::io::stdin().lock(), "(stdin)")
}

fn read_rule_from(from: impl std::io::Read, name: &str) -> Result<String, CliError> {
    use std::io::Read;
    let mut text = String::new();
    from.take(MAX_RULE_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::InvalidRule(format!("{name}: {e}")))?;
    if text.len() as u64 > MAX_RULE_FILE_BYTES {
        return Err(CliError::InvalidRule(format!(
            "{name}: larger than {} KiB: not a rule file",
            MAX_RULE_FILE_BYTES / 1024
        )));
    }
    Ok(text)
}

/// A time window, `--from` to `--to`: a date (`2026-12-20`: from its first minute, to its last),
/// a UTC time (`2026-12-20T11:30`, `2026-12-20 11:30`) or RFC 3339 with its offset. What it
/// bounds (an offering's start, an observation's time) and its defaults, each command says in
/// its own help (`mut_arg`).
#[derive(Args, Clone)]
pub struct Window {
    #[arg(long, value_parser = window_start)]
    pub from: Option<DateTime<Utc>>,
    #[arg(long, value_parser = window_end)]
    pub to: Option<DateTime<Utc>>,
}

/// `--from`: a date is its first minute (00:00 UTC).
fn window_start(s: &str) -> Result<DateTime<Utc>, String> {
    when(s, false)
}

/// `--to`: a date is its last (up to 24:00 UTC), so `--to 2026-12-20` includes the 20th.
fn window_end(s: &str) -> Result<DateTime<Utc>, String> {
    when(s, true)
}

fn when(s: &str, end_of_day: bool) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, format) {
            return Ok(t.and_utc());
        }
    }
    match chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        Ok(d) => {
            let d = if end_of_day { d.succ_opt().ok_or("a date too far ahead")? } else { d };
            Ok(d.and_hms_opt(0, 0, 0).expect("midnight").and_utc())
        }
        Err(_) => Err(format!(
            "{s:?} is not a date or time: write 2026-12-20, 2026-12-20T11:30 (UTC) or RFC 3339 \
             (2026-12-20T11:30:00Z, 2026-12-20T12:30:00+01:00)"
        )),
    }
}

/// The list rates rules are judged by: the published table and the ones announced in the
/// stack's table (`capblock rates`).
pub async fn rate_book(store: &DynamoStore) -> Result<capblock_shared::domain::list_price::RateBook, StoreError> {
    use capblock_shared::ports::RateStore;
    Ok(capblock_shared::domain::list_price::RateBook::with_announced(store.announced_rates().await?))
}

/// The teams' approval settings as the deployed stack's TeamApprovals parameter says them (what
/// the scan judges every request's approval by); none when the stack was named by its table
/// only. Read after `store`, which looks the stack up.
pub fn team_approvals() -> Result<BTreeMap<String, TeamApproval>, CliError> {
    let text = crate::stack::deployed().and_then(|d| d.parameters.get("TeamApprovals")).cloned().unwrap_or_default();
    parse_team_approvals(&text).map_err(|e| CliError::Failed(format!("the stack's TeamApprovals parameter: {e}")))
}

/// The stack's settings as its functions stored them in the table (`None`: no function has run
/// against it yet). The CLI never takes the stack's mode or account budget from a variable of
/// the operator's shell, which may be missing or stale.
pub async fn stored_settings(store: &DynamoStore) -> Result<Option<StoredSettings>, StoreError> {
    store.stored_settings().await
}

/// The stored settings a purchase from the CLI acts on, in a stack whose stored mode allows
/// `mode` (live, or approval: both buy); refused (exit 2, saying what to do) when they cannot be
/// read or the stack's mode is stricter.
pub async fn settings_to_buy(store: &DynamoStore, mode: Mode) -> Result<StoredSettings, CliError> {
    let table = store.table();
    let stored = match stored_settings(store).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(CliError::Refused(format!(
                "the stack's settings are not in table {table} (no function of the stack has run against it yet), \
                 and a purchase from the CLI needs the stack's mode and account budget: invoke the stack's \
                 scan-offerings function once (or wait for its schedule) and try again"
            )));
        }
        Err(e) => {
            return Err(CliError::Refused(format!(
                "the stack's settings could not be read from table {table} ({e}), and a purchase from the CLI \
                 needs the stack's mode and account budget: check --stack (or CAPBLOCK_TABLE) and the table, then try again"
            )));
        }
    };
    // The table's item is only as good as whoever may write the table: a purchase acts on it
    // only when the deployed stack's parameters say the same.
    let Some(deployed) = crate::stack::deployed() else {
        return Err(CliError::Refused(format!(
            "a purchase from the CLI checks the settings stored in table {table} against the deployed stack's \
             CloudFormation parameters, and only a table was named: name the stack with --stack NAME \
             (or CAPBLOCK_STACK_NAME, or `stack = \"NAME\"` in the config file) and try again"
        )));
    };
    if let Err(differ) = crate::stack::settings_match(&stored.stack, deployed) {
        return Err(CliError::Refused(format!(
            "the settings stored in table {table} do not match stack {}'s parameters ({differ}): a deploy may be \
             in progress (wait for the functions to run once), or the table's item was edited; nothing bought",
            deployed.name
        )));
    }
    if stored.stack.mode.and(mode) != mode {
        return Err(CliError::Refused(format!(
            "stack {} is in mode {} (its settings as stored at {}), so the CLI does not buy in mode {} for it: \
             deploy the stack with Mode={} first, or run a dry-run scan",
            stored.stack.name,
            stored.stack.mode.as_str(),
            stored.written_at.format("%Y-%m-%d %H:%M UTC"),
            mode.as_str(),
            mode.as_str()
        )));
    }
    // The functions may run a live stack without an account cap (the operator's choice at
    // deploy time), but a purchase by hand is where a typo spends: the CLI never buys without one.
    if mode == Mode::Live && stored.stack.account_budget.is_none() {
        return Err(CliError::Refused(format!(
            "stack {} has no account-wide monthly cap (AccountMonthlyBudget is 0), and the CLI buys only \
             under one: deploy the stack with AccountMonthlyBudget set (e.g. `sam deploy --parameter-overrides \
             AccountMonthlyBudget=20000`), let a function run once to store it, and try again",
            stored.stack.name
        )));
    }
    Ok(stored)
}

/// The stack's mode for a scan from the CLI.
#[derive(Args, Clone)]
pub struct StackArgs {
    /// dry-run (default) never buys; live buys for live rules, and only in a stack whose stored
    /// mode (the functions' configuration, in the table) is live.
    #[arg(long, env = "CAPBLOCK_MODE", default_value = "dry-run")]
    mode: Mode,
}

impl StackArgs {
    /// The settings a scan runs with and the stack's alerts topic if stored: a live (or
    /// approval) scan takes the stored settings or is refused; a dry run takes them when stored,
    /// and otherwise runs as stack CAPBLOCK_STACK (default "capblock") with no account cap, which
    /// it says.
    pub async fn settings(&self, store: &DynamoStore) -> Result<(StackSettings, Option<String>), CliError> {
        if self.mode != Mode::DryRun {
            let stored = settings_to_buy(store, self.mode).await?;
            return Ok((StackSettings { mode: self.mode, ..stored.stack }, Some(stored.alerts_topic)));
        }
        match stored_settings(store).await {
            Ok(Some(stored)) => Ok((StackSettings { mode: Mode::DryRun, ..stored.stack }, Some(stored.alerts_topic))),
            found => {
                let why = match found {
                    Err(e) => format!("could not be read ({e})"),
                    _ => "are not stored yet".to_string(),
                };
                let name = capblock_shared::config::optional("CAPBLOCK_STACK").unwrap_or_else(|| "capblock".into());
                eprintln!("note: the stack's settings {why}: a dry run as stack {name:?} with no account budget");
                Ok((
                    StackSettings { name, mode: Mode::DryRun, account_budget: None, team_budgets: Default::default() },
                    None,
                ))
            }
        }
    }
}

/// EC2's describe limit, and how much of it to take. DescribeCapacityBlockOfferings is limited
/// per account and region (about one call every 2-4 s, a burst of 2), shared with everyone in
/// the account: searches go out one at a time per region, `refill / share` apart.
#[derive(Args, Clone)]
pub struct DescribeArgs {
    /// Seconds EC2 takes to refill one DescribeCapacityBlockOfferings call per region.
    #[arg(long, env = "CAPBLOCK_DESCRIBE_REFILL_SECONDS", default_value_t = DescribeBudget::default().refill.as_secs_f64())]
    refill_seconds: f64,
    /// The share of that refill to use (0-1]; the rest is left to others in the account.
    #[arg(long, env = "CAPBLOCK_DESCRIBE_SHARE", default_value_t = DescribeBudget::default().share)]
    share: f64,
}

impl DescribeArgs {
    /// The budget, asking for at most `ask_for`.
    pub fn budget(&self, ask_for: std::time::Duration) -> Result<DescribeBudget, CliError> {
        let refill =
            std::time::Duration::try_from_secs_f64(self.refill_seconds).ok().filter(|d| !d.is_zero()).ok_or_else(
                || CliError::Invalid(format!("--refill-seconds {}: expected a positive number", self.refill_seconds)),
            )?;
        let b = DescribeBudget::for_refill(refill, self.share, ask_for);
        b.validate().map_err(|e| CliError::Invalid(format!("--share: {e}")))?;
        Ok(b)
    }
}

/// The window to read: everything kept unless bounded.
pub fn bounds(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> (DateTime<Utc>, DateTime<Utc>) {
    let epoch = DateTime::<Utc>::from_timestamp(0, 0).expect("epoch");
    let far = DateTime::<Utc>::from_timestamp(4_102_444_800, 0).expect("2100");
    (from.unwrap_or(epoch), to.unwrap_or(far))
}

/// The buyer of a purchase by hand (`approve`, `buy`): the stack's stored name and account cap,
/// a refill of EC2's describe limit between re-checks, and no answer fresh enough to stand in
/// for the re-check (`live` asks EC2 again before buying).
pub fn hand_buyer<'a>(
    market: &'a capblock_shared::aws::ec2::Ec2Market,
    store: &'a DynamoStore,
    stored: &'a StoredSettings,
) -> capblock_shared::app::purchase::Buyer<'a, capblock_shared::aws::ec2::Ec2Market, DynamoStore> {
    capblock_shared::app::purchase::Buyer {
        market,
        store,
        stack: &stored.stack.name,
        budgets: stored.stack.budgets(),
        recheck_pause: std::time::Duration::from_secs(4),
        answered_at: None,
    }
}

/// What a purchase by hand (`approve`, `buy`) came to, told to the operator: the notices it made
/// published (or left to the next scan), then the reservation bought, or why not (exit 2), or an
/// unknown outcome that reconciliation settles (exit 1).
pub async fn bought(
    decided: capblock_shared::app::purchase::Approval,
    store: &DynamoStore,
    sdk: &aws_config::SdkConfig,
    stored: &StoredSettings,
    now: DateTime<Utc>,
) -> CliResult {
    use capblock_shared::app::purchase::{Approval, Outcome};
    let notifier =
        capblock_shared::aws::sns::SnsNotifier::new(aws_sdk_sns::Client::new(sdk), stored.alerts_topic.clone(), None);
    let notifier = &notifier;
    let (priced, action) = match decided {
        Approval::Refused(why) => return Err(CliError::Refused(why)),
        Approval::Unanswered(e) => return Err(e.into()),
        Approval::Decided { priced, action } => (*priced, action),
    };
    if let Err(e) = capblock_shared::app::outbox::flush(store, notifier, now).await {
        eprintln!("warning: notices not published yet (the next scan publishes them): {e}");
    }
    match action {
        Outcome::Bought { reservation_id, .. } => {
            println!(
                "bought {} x {} in {} for {} ({} per accelerator-hour): reservation {reservation_id}",
                priced.offering.instance_count,
                priced.offering.instance_type,
                priced.offering.availability_zone,
                priced.offering.fee,
                priced.per_accelerator_hour
            );
            Ok(())
        }
        other => Err(not_bought(other)),
    }
}

/// Why a hand purchase bought nothing, in words: a refusal (exit 2) unless the outcome is
/// unknown (exit 1, settled by the stack's functions).
fn not_bought(action: capblock_shared::app::purchase::Outcome) -> CliError {
    use capblock_shared::app::purchase::Outcome;
    match action {
        Outcome::Refused { reason, .. } | Outcome::Skipped { reason } => CliError::Refused(reason),
        Outcome::Unknown { intent, reason } => CliError::Unknown { intent, reason },
        Outcome::OffPlan { offering_id, reason } => {
            CliError::Refused(format!("offering {offering_id} is not the block that was planned ({reason})"))
        }
        Outcome::GivenBack { offering_id, reason } => CliError::Refused(format!(
            "offering {offering_id} is not what was shown any more ({reason}); its fee was given back: run `capblock \
             offerings` again"
        )),
        Outcome::AlreadyTried { offering_id } => CliError::Refused(format!(
            "the rule already tried offering {offering_id} (bought, refused or abandoned), and a purchase is never sent \
             twice"
        )),
        Outcome::Bought { reservation_id, .. } => {
            CliError::Failed(format!("reservation {reservation_id} was bought, but not reported as the purchase"))
        }
        Outcome::WouldBuy { offering_id, .. }
        | Outcome::AwaitingApproval { offering_id, .. }
        | Outcome::Replayed { offering_id } => CliError::Refused(format!(
            "offering {offering_id} was not bought: the stack or the rule does not buy now (dry-run, approval or a replay)"
        )),
    }
}

#[cfg(test)]
mod rule_file_tests {
    use super::{CliError, MAX_RULE_FILE_BYTES, read_rule_file};

    /// A device or a huge file is refused before it is read into memory; a rule file is read.
    #[test]
    fn only_a_regular_file_of_a_sane_size_is_read() {
        let refused = |path: &str, why: &str| {
            let e = read_rule_file(path).unwrap_err();
            assert!(matches!(&e, CliError::InvalidRule(m) if m.contains(why)), "{path}: {e}");
        };
        refused("/dev/zero", "not a regular file");
        refused("/", "not a regular file");
        let dir = std::env::temp_dir().join(format!("capblock-rule-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_RULE_FILE_BYTES as usize + 1]).unwrap();
        refused(big.to_str().unwrap(), "larger than 1024 KiB");
        let ok = dir.join("ok.toml");
        std::fs::write(&ok, "id = \"x\"\n").unwrap();
        assert_eq!(read_rule_file(ok.to_str().unwrap()).unwrap(), "id = \"x\"\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod not_bought_tests {
    use super::{CliError, not_bought};
    use capblock_shared::app::purchase::Outcome;

    /// A fee that changed between `offerings` and `buy` is a refusal in words (exit 2), not a
    /// failure with a debug dump (exit 1).
    #[test]
    fn a_changed_offering_is_a_refusal_in_words() {
        let e = not_bought(Outcome::GivenBack {
            offering_id: "cb-0123".into(),
            reason: "the fee is 600.00 USD now, not 576.00 USD".into(),
        });
        assert!(matches!(e, CliError::Refused(_)), "{e:?}");
        assert_eq!(e.exit_code(), super::EXIT_INVALID);
        let text = e.to_string();
        assert!(
            text.contains("cb-0123") && text.contains("600.00 USD") && text.contains("capblock offerings"),
            "{text}"
        );
        assert!(!text.contains('{'), "no debug dump: {text}");
        let tried = not_bought(Outcome::AlreadyTried { offering_id: "cb-0123".into() }).to_string();
        assert!(tried.contains("never sent twice") && !tried.contains('{'), "{tried}");
        let unknown = not_bought(Outcome::Unknown { intent: "p5/cb-0123".into(), reason: "timeout".into() });
        assert_eq!(unknown.exit_code(), super::EXIT_FAILURE);
    }
}

#[cfg(test)]
mod plain_tests {
    use super::plain;

    #[test]
    fn sdk_errors_say_what_to_do_without_the_debug_dump() {
        let down = "store unavailable: query: dispatch failure: io error: client error (Connect): tcp connect error: \
                    Connection refused (os error 111) (DispatchFailure(DispatchFailure { source: ConnectorError { kind: Io } }))";
        let p = plain(down);
        assert!(p.starts_with("AWS did not answer"), "{p}");
        assert!(!p.contains("DispatchFailure(") && p.contains("Connection refused"), "{p}");
        let creds = "store unavailable: query: dispatch failure: other: the credential provider was not enabled: no \
                     credentials found in chain. Attempted:\\u{a}  Environment: not set (DispatchFailure(x))";
        assert!(plain(creds).starts_with("no AWS credentials found"), "{}", plain(creds));
        assert!(!plain(creds).contains("\\u{a}"));
        let table = "store unavailable: get: ResourceNotFoundException: Requested resource not found";
        assert!(plain(table).starts_with("the stack's table does not exist here"), "{}", plain(table));
        assert_eq!(plain("rule x: version changed"), "rule x: version changed");
        let region = "store unavailable: query: failed to construct request: signing region missing \
                      (ConstructionFailure(ConstructionFailure { source: x }))";
        assert!(plain(region).starts_with("no AWS region is set: set AWS_REGION"), "{}", plain(region));
        assert!(!plain(region).contains("ConstructionFailure("), "{}", plain(region));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--from 2026-12-20` is the 20th's first minute, `--to 2026-12-20` its last; a UTC time
    /// and RFC 3339 with an offset are taken too; anything else says what to write.
    #[test]
    fn a_window_takes_a_date_a_utc_time_or_rfc3339() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(window_start("2026-12-20"), Ok(at("2026-12-20T00:00:00Z")));
        assert_eq!(window_end("2026-12-20"), Ok(at("2026-12-21T00:00:00Z")));
        assert_eq!(window_start("2026-12-20T11:30"), Ok(at("2026-12-20T11:30:00Z")));
        assert_eq!(window_end("2026-12-20 11:30"), Ok(at("2026-12-20T11:30:00Z")));
        assert_eq!(window_start("2026-12-20T12:30:00+01:00"), Ok(at("2026-12-20T11:30:00Z")));
        let bad = window_start("next tuesday").unwrap_err();
        assert!(bad.contains("write 2026-12-20"), "{bad}");
        assert!(window_start("2026-13-01").is_err());
    }

    /// Every kind maps to the code docs/operate.md documents.
    #[test]
    fn errors_map_to_the_documented_exit_codes() {
        let cases = [
            (CliError::failed("x"), 1),
            (CliError::Unknown { intent: "i".into(), reason: "r".into() }, 1),
            (CliError::Invalid("x".into()), 2),
            (CliError::InvalidRule("x".into()), 2),
            (CliError::InvalidFiles(1), 2),
            (CliError::Refused("x".into()), 2),
            (CliError::NotFound("x".into()), 3),
            (CliError::NothingFound, 3),
        ];
        for (e, code) in cases {
            assert_eq!(e.exit_code(), code, "{e:?}");
        }
        assert_eq!(CliError::Refused("gone".into()).to_string(), "refused: gone; nothing bought");
    }
}
