//! What every function shares at its edge: JSON logs, the scheduled-trigger payload, and
//! typed errors mapped to Lambda's error response.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::config::ConfigError;
use crate::ports::{Clock, MarketError, NotifyError, StoreError};

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

/// The payload the recurring schedules send: `{"source": "capblock.schedule", "time":
/// "<aws.scheduler.scheduled-time>"}`. The EventBridge "Scheduled Event" envelope also fits.
/// `time` is the instant the run is for; without it the wall clock is used.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Tick {
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub time: Option<DateTime<Utc>>,
}

impl Tick {
    pub fn now(&self, clock: &dyn Clock) -> DateTime<Utc> {
        self.time.unwrap_or_else(|| clock.now())
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
    Event(#[from] crate::app::events::HandleError),
}

impl FunctionError {
    pub fn kind(&self) -> &'static str {
        match self {
            FunctionError::BadInput(_) => "capblock.BadInput",
            FunctionError::Config(_) => "capblock.Config",
            FunctionError::Store(_) => "capblock.StoreUnavailable",
            FunctionError::Market(_) => "capblock.MarketUnavailable",
            FunctionError::Notify(_) => "capblock.NotifyFailed",
            FunctionError::Event(e) => e.kind(),
        }
    }

    /// Whether a retry of the same invocation may succeed.
    pub fn retryable(&self) -> bool {
        !matches!(self, FunctionError::BadInput(_) | FunctionError::Config(_))
    }
}

/// Turns a failed invocation into Lambda's typed error response, after one log line that says
/// what failed, whether a retry may help, and why.
pub fn report(function: &str, e: FunctionError) -> lambda_runtime::Diagnostic {
    tracing::error!(event = "invocation_failed", function, error_type = e.kind(), retryable = e.retryable(), error = %e, "invocation failed");
    lambda_runtime::Diagnostic { error_type: e.kind().to_string(), error_message: e.to_string() }
}

/// The body of a scheduled function: parse the tick, take `now` from it (or the clock), run.
pub async fn on_tick<R, F, Fut>(
    function: &str,
    payload: serde_json::Value,
    clock: &dyn Clock,
    run: F,
) -> Result<R, lambda_runtime::Diagnostic>
where
    F: FnOnce(DateTime<Utc>) -> Fut,
    Fut: std::future::Future<Output = Result<R, FunctionError>>,
{
    let result = async {
        let tick: Tick = parse_event(payload)?;
        run(tick.now(clock)).await
    }
    .await;
    result.map_err(|e| report(function, e))
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
