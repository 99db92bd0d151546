//! What every command shares: the exit codes and the error that carries them, the SDK
//! configuration, the store, the instant a run happens at, rule files and EC2's describe limit.
//!
//! Exit codes (README "CLI"): 0 success, 1 a failure talking to AWS or the store, 2 bad input
//! (usage, an invalid rule, a refused purchase), 3 nothing found where something was asked for.

use capblock_shared::app::settings::StackSettings;
use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::rule::{Mode, Rule, RuleSpec};
use capblock_shared::ports::{MarketError, StoreError};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::table::safe;

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
            CliError::Invalid(_) | CliError::InvalidRule(_) | CliError::InvalidFiles(_) | CliError::Refused(_) => {
                EXIT_INVALID
            }
            CliError::NotFound(_) | CliError::NothingFound => EXIT_NOT_FOUND,
        }
    }

    /// Say it where the operator (or a script) expects it.
    pub fn report(&self) {
        match self {
            // Errors carry what came from outside (names, AWS's messages): escaped.
            CliError::Failed(_) => eprintln!("error: {}", safe(&self.to_string())),
            CliError::InvalidRule(_) => println!("{}", safe(&self.to_string())),
            CliError::InvalidFiles(_) | CliError::NothingFound => {}
            CliError::Unknown { .. } | CliError::Invalid(_) | CliError::Refused(_) | CliError::NotFound(_) => {
                eprintln!("{}", safe(&self.to_string()))
            }
        }
    }

    /// A failure described by `e` (exit 1).
    pub fn failed(e: impl std::fmt::Display) -> CliError {
        CliError::Failed(e.to_string())
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

pub type CliResult = Result<(), CliError>;

/// The SDK configuration: the standard AWS chain plus `AWS_ENDPOINT_URL_*`, as the functions.
pub async fn sdk() -> aws_config::SdkConfig {
    capblock_shared::aws::load_config().await
}

/// The stack's store: the table CAPBLOCK_TABLE names.
pub async fn store() -> Result<DynamoStore, CliError> {
    let table = std::env::var("CAPBLOCK_TABLE")
        .map_err(|_| CliError::failed("CAPBLOCK_TABLE is not set (the DynamoDB table of your capblock stack)"))?;
    Ok(DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk().await), table))
}

/// The instant a scan or an approval runs at: a live one on the clock (the wall clock, or a
/// simulator's through CAPBLOCK_SIMULATED_CLOCK_URL), never on `--time` more than a few minutes
/// off it (budget months and waits guard money); a dry run at `--time` if given.
pub async fn run_now(time: Option<DateTime<Utc>>, live: bool) -> Result<DateTime<Utc>, CliError> {
    use capblock_shared::lambda::{TimeSource, run_time};
    let source = TimeSource::from_env().map_err(CliError::failed)?;
    let clock_now = source.now(&capblock_shared::ports::SystemClock).await.map_err(CliError::failed)?;
    run_time(time, clock_now, live).map_err(|e| CliError::Invalid(format!("--time: {e}")))
}

/// A rule file, parsed and validated; every problem names its field.
pub fn load_rule(path: &str) -> Result<Rule, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::InvalidRule(format!("{path}: {e}")))?;
    RuleSpec::from_toml(&text)
        .and_then(|s| s.validate(Utc::now()))
        .map_err(|e| CliError::InvalidRule(format!("{path}: {e}")))
}

/// A time window, `--from` to `--to` (RFC 3339). What it bounds (an offering's start, an
/// observation's time) and its defaults, each command says in its own help (`mut_arg`).
#[derive(Args, Clone)]
pub struct Window {
    #[arg(long)]
    pub from: Option<DateTime<Utc>>,
    #[arg(long)]
    pub to: Option<DateTime<Utc>>,
}

/// The stack's settings, as the functions read them from their environment (`CAPBLOCK_*`), so a
/// command run beside a stack sees what the stack sees.
#[derive(Args, Clone)]
pub struct StackArgs {
    /// The stack mode: dry-run (default) never buys; live buys for live rules.
    #[arg(long, env = "CAPBLOCK_MODE", default_value = "dry-run")]
    mode: Mode,
    /// The stack name: purchases' capblock:stack tag, the dashboard's name, the alarms' prefix.
    #[arg(long, env = "CAPBLOCK_STACK", default_value = "capblock")]
    stack: String,
    /// Account-wide monthly budget in USD (0: none).
    #[arg(long, env = "CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", default_value = "0")]
    account_budget: String,
}

impl StackArgs {
    pub fn settings(self) -> Result<StackSettings, CliError> {
        Ok(StackSettings { account_budget: account_budget(&self.account_budget)?, name: self.stack, mode: self.mode })
    }
}

/// An optional monthly budget in USD ("0": none).
pub fn account_budget(text: &str) -> Result<Option<Money>, CliError> {
    let budget = Money::parse(text, "USD").map_err(|e| CliError::Invalid(format!("--account-budget: {e}")))?;
    Ok((!budget.amount().is_zero()).then_some(budget))
}

/// EC2's describe limit, and how much of it to take. DescribeCapacityBlockOfferings is limited
/// per account and region (about one call every 2-4 s, a burst of 2), shared with everyone in
/// the account: searches go out one at a time per region, `refill / share` apart.
#[derive(Args, Clone)]
pub struct DescribeArgs {
    /// Seconds EC2 takes to refill one DescribeCapacityBlockOfferings call per region.
    #[arg(long, env = "CAPBLOCK_DESCRIBE_REFILL_SECONDS", default_value_t = 4.0)]
    refill_seconds: f64,
    /// The share of that refill to use (0-1]; the rest is left to others in the account.
    #[arg(long, env = "CAPBLOCK_DESCRIBE_SHARE", default_value_t = 0.5)]
    share: f64,
}

impl DescribeArgs {
    /// The budget, asking for at most `ask_for`.
    pub fn budget(&self, ask_for: std::time::Duration) -> Result<DescribeBudget, CliError> {
        let refill =
            std::time::Duration::try_from_secs_f64(self.refill_seconds).ok().filter(|d| !d.is_zero()).ok_or_else(
                || CliError::Invalid(format!("--refill-seconds {}: expected a positive number", self.refill_seconds)),
            )?;
        let b = DescribeBudget { refill, share: self.share, ask_for };
        b.validate().map_err(|e| CliError::Invalid(format!("--share: {e}")))?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind maps to the code README documents.
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
