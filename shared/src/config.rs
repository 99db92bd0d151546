//! Reading settings from the environment, once, in `main`. A function names the variables it
//! reads as string literals, in its own crate or in a reader here that it calls (the template
//! cross-check reads both). Settings more than one function reads have one reader here, with
//! their one default.

use std::str::FromStr;

use crate::domain::checkpoint::DEFAULT_REMINDER_LEAD_MINUTES;
use crate::domain::money::Money;
use crate::domain::stack::StackSettings;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set (the SAM template sets it; locally, see `infra/local/stack.sh env`)")]
    Missing(&'static str),
    #[error("environment variable {name}={value:?} is invalid: {problem}")]
    Invalid { name: &'static str, value: String, problem: String },
}

// Each reader below is `optional(name)` and a parser of that text (`*_in`): the tests call the
// parsers, since a test may not change the process environment (`unsafe_code` is forbidden).

/// A variable that must be set and non-empty.
pub fn required(name: &'static str) -> Result<String, ConfigError> {
    optional(name).ok_or(ConfigError::Missing(name))
}

/// An optional variable; empty counts as unset.
pub fn optional(name: &'static str) -> Option<String> {
    present(std::env::var(name).ok())
}

/// A variable's text, trimmed; empty counts as unset.
fn present(raw: Option<String>) -> Option<String> {
    raw.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// An optional variable parsed with `FromStr`, or `default` when unset.
pub fn parsed_or<T>(name: &'static str, default: T) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    parsed_in(name, optional(name), default)
}

fn parsed_in<T>(name: &'static str, text: Option<String>, default: T) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match text {
        None => Ok(default),
        Some(v) => v.parse().map_err(|e: T::Err| ConfigError::Invalid { name, value: v, problem: e.to_string() }),
    }
}

/// A positive number of seconds (fractions allowed), or `default` when unset.
pub fn seconds_or(name: &'static str, default: std::time::Duration) -> Result<std::time::Duration, ConfigError> {
    seconds_in(name, optional(name), default)
}

fn seconds_in(
    name: &'static str,
    text: Option<String>,
    default: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    let Some(text) = text else { return Ok(default) };
    text.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0)
        .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
        .ok_or(ConfigError::Invalid { name, value: text, problem: "expected a positive number of seconds".into() })
}

/// A monthly budget in USD; unset or "0" means no limit of this kind.
pub fn budget_usd(name: &'static str) -> Result<Option<Money>, ConfigError> {
    let Some(text) = optional(name) else { return Ok(None) };
    let budget =
        Money::parse(&text, "USD").map_err(|e| ConfigError::Invalid { name, value: text, problem: e.to_string() })?;
    Ok((!budget.amount().is_zero()).then_some(budget))
}

/// A comma-separated list, each element parsed with `FromStr`.
pub fn list_or<T>(name: &'static str, default: Vec<T>) -> Result<Vec<T>, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    list_in(name, optional(name), default)
}

fn list_in<T>(name: &'static str, text: Option<String>, default: Vec<T>) -> Result<Vec<T>, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match text {
        None => Ok(default),
        Some(v) => v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse().map_err(|e: T::Err| ConfigError::Invalid { name, value: v.clone(), problem: e.to_string() })
            })
            .collect(),
    }
}

/// The member accounts lending the scan their describe limit (`CAPBLOCK_WATCH_ACCOUNTS`, from
/// the `WatchAccounts` parameter): none when unset.
pub fn member_accounts() -> Result<Vec<String>, ConfigError> {
    let name = "CAPBLOCK_WATCH_ACCOUNTS";
    match optional(name) {
        None => Ok(Vec::new()),
        Some(v) => crate::domain::ids::parse_member_accounts(&v).map_err(|problem| ConfigError::Invalid {
            name,
            value: v,
            problem,
        }),
    }
}

/// The stack's name, mode (dry-run unless set to live) and account-wide budget.
pub fn stack_settings() -> Result<StackSettings, ConfigError> {
    Ok(StackSettings {
        name: required("CAPBLOCK_STACK")?,
        mode: parsed_or("CAPBLOCK_MODE", Default::default())?,
        // Unset or "0": no account-wide limit beyond each rule's own.
        account_budget: budget_usd("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET")?,
        team_budgets: team_budgets_in("CAPBLOCK_TEAM_BUDGETS", optional("CAPBLOCK_TEAM_BUDGETS"))?,
    })
}

/// Each team's approval settings for people's requests (`CAPBLOCK_TEAM_APPROVALS`, from the
/// `TeamApprovals` parameter: `team=amount principal-arn ...; ...`,
/// `domain::request::parse_team_approvals`); unset: no team's request is approved, on its own or
/// by anyone. The scan buys by them and the tracker's team page shows them.
pub fn team_approvals() -> Result<std::collections::BTreeMap<String, crate::domain::request::TeamApproval>, ConfigError>
{
    let name = "CAPBLOCK_TEAM_APPROVALS";
    let text = optional(name).unwrap_or_default();
    crate::domain::request::parse_team_approvals(&text).map_err(|problem| ConfigError::Invalid {
        name,
        value: text,
        problem,
    })
}

/// `team=amount,...` in USD a month (`domain::budget::parse_team_budgets`); unset: no teams.
fn team_budgets_in(
    name: &'static str,
    text: Option<String>,
) -> Result<std::collections::BTreeMap<String, Money>, ConfigError> {
    let Some(text) = text else { return Ok(Default::default()) };
    crate::domain::budget::parse_team_budgets(&text).map_err(|problem| ConfigError::Invalid {
        name,
        value: text,
        problem,
    })
}

/// Where every function keeps its state and sends its alerts. Read here, once, so that each
/// function's use of them is a call of this reader (infra/deploy/crosscheck follows it).
pub fn targets() -> Result<Targets, ConfigError> {
    Ok(Targets {
        table: required("CAPBLOCK_TABLE")?,
        alerts_topic: required("CAPBLOCK_ALERTS_TOPIC_ARN")?,
        // The account's default bus unless set.
        event_bus: optional("CAPBLOCK_EVENT_BUS").unwrap_or_else(|| "default".into()),
    })
}

/// The DynamoDB table, the SNS alerts topic and the EventBridge bus of capblock's events.
#[derive(Debug, Clone)]
pub struct Targets {
    pub table: String,
    pub alerts_topic: String,
    pub event_bus: String,
}

/// Where a run's `now` comes from: the wall clock, or a local simulator's clock named by
/// `CAPBLOCK_SIMULATED_CLOCK_URL` (simulations only; see `aws::clock`).
pub fn time_source() -> Result<crate::aws::clock::TimeSource, ConfigError> {
    time_source_in(optional(SIMULATED_CLOCK_URL))
}

/// The setting that names a simulated clock.
pub const SIMULATED_CLOCK_URL: &str = "CAPBLOCK_SIMULATED_CLOCK_URL";

fn time_source_in(text: Option<String>) -> Result<crate::aws::clock::TimeSource, ConfigError> {
    crate::aws::clock::TimeSource::from_url(text.as_deref()).map_err(|e| ConfigError::Invalid {
        name: SIMULATED_CLOCK_URL,
        value: text.unwrap_or_default(),
        problem: e.to_string(),
    })
}

/// The checkpoint reminders' lead times before a block's termination time (whole minutes,
/// comma-separated; `DEFAULT_REMINDER_LEAD_MINUTES` when unset).
pub fn reminder_leads() -> Result<Vec<chrono::Duration>, ConfigError> {
    const NAME: &str = "CAPBLOCK_REMINDER_LEAD_MINUTES";
    leads_in(NAME, optional(NAME))
}

fn leads_in(name: &'static str, text: Option<String>) -> Result<Vec<chrono::Duration>, ConfigError> {
    let minutes: Vec<u32> = list_in(name, text.clone(), DEFAULT_REMINDER_LEAD_MINUTES.to_vec())?;
    if minutes.contains(&0) {
        return Err(ConfigError::Invalid {
            name,
            value: text.unwrap_or_default(),
            problem: "0 is not a lead time".into(),
        });
    }
    Ok(minutes.into_iter().map(|m| chrono::Duration::minutes(i64::from(m))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_reports_bad_values() {
        let text = |v: &str| present(Some(v.to_string()));
        assert_eq!(list_in::<u32>("L", text("6, 1"), vec![]).unwrap(), vec![6, 1]);
        let err = list_in::<u32>("CAPBLOCK_TEST_BAD", text("6,x"), vec![]).unwrap_err();
        assert!(err.to_string().starts_with("environment variable CAPBLOCK_TEST_BAD=\"6,x\" is invalid"), "{err}");
        assert_eq!(text("  "), None, "blank is unset");
        assert_eq!(text(" a "), Some("a".into()));
        // Really unset in the process environment: the public readers' own path.
        assert_eq!(required("CAPBLOCK_TEST_UNSET"), Err(ConfigError::Missing("CAPBLOCK_TEST_UNSET")));
        assert_eq!(parsed_or::<u32>("CAPBLOCK_TEST_UNSET", 4).unwrap(), 4);
        assert_eq!(parsed_in::<u32>("N", text("7"), 4).unwrap(), 7);
        assert!(parsed_in::<u32>("N", text("x"), 4).is_err());
        let d = std::time::Duration::from_secs(4);
        assert_eq!(seconds_in("S", text("0.25"), d).unwrap(), std::time::Duration::from_millis(250));
        assert_eq!(seconds_or("CAPBLOCK_TEST_SECS_UNSET", d).unwrap(), d);
        assert!(seconds_in("S", text("-1"), d).is_err());
    }

    #[test]
    fn team_budgets_are_read_or_refused_whole() {
        let teams = |v: Option<&str>| team_budgets_in("CAPBLOCK_TEAM_BUDGETS", v.map(str::to_string));
        assert!(teams(None).unwrap().is_empty());
        assert_eq!(teams(Some("vision=5000,nlp=20")).unwrap().len(), 2);
        let err = teams(Some("vision=5000,nlp")).unwrap_err().to_string();
        assert!(err.starts_with("environment variable CAPBLOCK_TEAM_BUDGETS=") && err.contains("team=amount"), "{err}");
    }

    #[test]
    fn reminder_leads_default_and_refuse_zero() {
        let leads = |v: Option<&str>| leads_in("CAPBLOCK_REMINDER_LEAD_MINUTES", v.map(str::to_string));
        let minutes = |l: Vec<chrono::Duration>| l.iter().map(|d| d.num_minutes()).collect::<Vec<_>>();
        assert_eq!(minutes(leads(None).unwrap()), vec![1440, 120, 30]);
        assert_eq!(minutes(leads(Some("90, 15")).unwrap()), vec![90, 15]);
        assert!(leads(Some("60,0")).unwrap_err().to_string().contains("0 is not a lead time"));
        assert!(leads(Some("60,x")).is_err());
    }

    #[test]
    fn a_simulated_clock_off_this_machine_is_refused_with_the_setting_named() {
        use crate::aws::clock::TimeSource;
        assert_eq!(time_source_in(None).unwrap(), TimeSource::Wall);
        assert!(matches!(time_source_in(Some("http://127.0.0.1:9/c".into())).unwrap(), TimeSource::Simulated { .. }));
        let e = time_source_in(Some("http://203.0.113.7:8080/_sim/clock".into())).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("CAPBLOCK_SIMULATED_CLOCK_URL") && text.contains("must be on this machine"), "{text}");
    }
}
