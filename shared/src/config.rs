//! Reading settings from the environment, once, in `main`. A function names the variables it
//! reads as string literals, in its own crate or in a reader here that it calls (the template
//! cross-check reads both). Settings more than one function reads have one reader here, with
//! their one default.

use std::str::FromStr;

use crate::app::settings::StackSettings;
use crate::domain::checkpoint::DEFAULT_REMINDER_LEAD_MINUTES;
use crate::domain::money::Money;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set (the SAM template sets it; locally, see `infra/local/stack.sh env`)")]
    Missing(&'static str),
    #[error("environment variable {name}={value:?} is invalid: {problem}")]
    Invalid { name: &'static str, value: String, problem: String },
}

/// A variable that must be set and non-empty.
pub fn required(name: &'static str) -> Result<String, ConfigError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        _ => Err(ConfigError::Missing(name)),
    }
}

/// An optional variable; empty counts as unset.
pub fn optional(name: &'static str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// An optional variable parsed with `FromStr`, or `default` when unset.
pub fn parsed_or<T>(name: &'static str, default: T) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match optional(name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|e: T::Err| ConfigError::Invalid { name, value: v, problem: e.to_string() }),
    }
}

/// A positive number of seconds (fractions allowed), or `default` when unset.
pub fn seconds_or(name: &'static str, default: std::time::Duration) -> Result<std::time::Duration, ConfigError> {
    let Some(text) = optional(name) else { return Ok(default) };
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
    match optional(name) {
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

/// The stack's name, mode (dry-run unless set to live) and account-wide budget.
pub fn stack_settings() -> Result<StackSettings, ConfigError> {
    Ok(StackSettings {
        name: required("CAPBLOCK_STACK")?,
        mode: parsed_or("CAPBLOCK_MODE", Default::default())?,
        // Unset or "0": no account-wide limit beyond each rule's own.
        account_budget: budget_usd("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET")?,
    })
}

/// The checkpoint reminders' lead times before a block's termination time (whole minutes,
/// comma-separated; `DEFAULT_REMINDER_LEAD_MINUTES` when unset).
pub fn reminder_leads() -> Result<Vec<chrono::Duration>, ConfigError> {
    const NAME: &str = "CAPBLOCK_REMINDER_LEAD_MINUTES";
    let minutes: Vec<u32> = list_or(NAME, DEFAULT_REMINDER_LEAD_MINUTES.to_vec())?;
    if minutes.contains(&0) {
        return Err(ConfigError::Invalid {
            name: NAME,
            value: optional(NAME).unwrap_or_default(),
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
        // Names unique to this test: the process environment is shared between tests.
        unsafe {
            std::env::set_var("CAPBLOCK_TEST_LIST", "6, 1");
            std::env::set_var("CAPBLOCK_TEST_BAD", "6,x");
            std::env::set_var("CAPBLOCK_TEST_EMPTY", "  ");
        }
        assert_eq!(list_or::<u32>("CAPBLOCK_TEST_LIST", vec![]).unwrap(), vec![6, 1]);
        let err = list_or::<u32>("CAPBLOCK_TEST_BAD", vec![]).unwrap_err();
        assert!(err.to_string().starts_with("environment variable CAPBLOCK_TEST_BAD=\"6,x\" is invalid"), "{err}");
        assert_eq!(required("CAPBLOCK_TEST_EMPTY"), Err(ConfigError::Missing("CAPBLOCK_TEST_EMPTY")));
        assert_eq!(parsed_or::<u32>("CAPBLOCK_TEST_UNSET", 4).unwrap(), 4);
        unsafe {
            std::env::set_var("CAPBLOCK_TEST_SECS", "0.25");
            std::env::set_var("CAPBLOCK_TEST_SECS_BAD", "-1");
        }
        let d = std::time::Duration::from_secs(4);
        assert_eq!(seconds_or("CAPBLOCK_TEST_SECS", d).unwrap(), std::time::Duration::from_millis(250));
        assert_eq!(seconds_or("CAPBLOCK_TEST_SECS_UNSET", d).unwrap(), d);
        assert!(seconds_or("CAPBLOCK_TEST_SECS_BAD", d).is_err());
    }

    #[test]
    fn reminder_leads_default_and_refuse_zero() {
        // The only test that sets this variable: the environment is shared between tests.
        unsafe { std::env::remove_var("CAPBLOCK_REMINDER_LEAD_MINUTES") };
        let minutes = |l: Vec<chrono::Duration>| l.iter().map(|d| d.num_minutes()).collect::<Vec<_>>();
        assert_eq!(minutes(reminder_leads().unwrap()), vec![1440, 120, 30]);
        unsafe { std::env::set_var("CAPBLOCK_REMINDER_LEAD_MINUTES", "90, 15") };
        assert_eq!(minutes(reminder_leads().unwrap()), vec![90, 15]);
        unsafe { std::env::set_var("CAPBLOCK_REMINDER_LEAD_MINUTES", "60,0") };
        assert!(reminder_leads().unwrap_err().to_string().contains("0 is not a lead time"));
        unsafe { std::env::set_var("CAPBLOCK_REMINDER_LEAD_MINUTES", "60,x") };
        assert!(reminder_leads().is_err());
        unsafe { std::env::remove_var("CAPBLOCK_REMINDER_LEAD_MINUTES") };
    }
}
