//! The stack's functions, invoked through Lambda's `Invoke` to check their own roles for
//! `capblock preflight` (`ports::RoleChecks`). The CLI's only Lambda call, so it lives here
//! rather than in the shared adapters the functions are built from.

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use capblock_shared::aws::cause::{Cause, cause};
use capblock_shared::domain::permissions::{PermissionsAsk, RoleCheck};
use capblock_shared::ports::{RoleChecks, Unasked};

/// The stack's function kinds, in the order preflight asks them.
pub const KINDS: [&str; 3] = ["scan-offerings", "track-blocks", "on-capacity-event"];

pub struct LambdaRoles {
    client: aws_sdk_lambda::Client,
    /// Kind to the name Lambda runs it under (recorded by the functions, or `--function`).
    names: BTreeMap<String, String>,
}

impl LambdaRoles {
    pub fn new(sdk: &aws_config::SdkConfig, names: BTreeMap<String, String>) -> LambdaRoles {
        // A function answers when its tries are done (tens of calls, some retried): the shared
        // 10-second attempt timeout of a describe call would give up on it. Lambda's own limit
        // is the function's timeout; one attempt, as an invocation is not worth repeating blind.
        let conf = aws_sdk_lambda::config::Builder::from(sdk)
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(std::time::Duration::from_secs(3))
                    .operation_attempt_timeout(std::time::Duration::from_secs(900))
                    .operation_timeout(std::time::Duration::from_secs(900))
                    .build(),
            )
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build();
        LambdaRoles { client: aws_sdk_lambda::Client::from_conf(conf), names }
    }
}

#[async_trait]
impl RoleChecks for LambdaRoles {
    fn kinds(&self) -> Vec<(String, Result<String, String>)> {
        KINDS
            .iter()
            .map(|k| {
                let name =
                    self.names.get(*k).cloned().ok_or_else(|| format!("{k} has not recorded its name in the table"));
                (k.to_string(), name)
            })
            .collect()
    }

    async fn check_role(&self, kind: &str, ask: &PermissionsAsk) -> Result<RoleCheck, Unasked> {
        let deploy = "deploy this version of capblock, then run preflight again";
        let unasked = |why: String, todo: &str| Unasked { why, todo: todo.to_string() };
        let name = self.names.get(kind).ok_or_else(|| unasked(format!("{kind}: no function name"), deploy))?;
        let payload = serde_json::to_vec(ask).map_err(|e| unasked(e.to_string(), deploy))?;
        // Progress: a function takes seconds to try its role's actions.
        eprintln!("  asking {kind} ({}) to check its own role...", crate::table::safe(name));
        let out = self.client.invoke().function_name(name).payload(Blob::new(payload)).send().await.map_err(|e| {
            // The advice follows the cause: a permission only when Lambda refused for one.
            let c = cause(&e);
            let todo = match &c {
                c if c.is_access_denied() => format!("allow lambda:InvokeFunction on {name} to the operator"),
                Cause::Refused { code, .. } if code == "ResourceNotFoundException" => {
                    format!("no function {name} here: check --stack and AWS_REGION, or name it --function {kind}=NAME")
                }
                c => c.todo(),
            };
            Unasked { why: c.to_string(), todo }
        })?;
        let body = out.payload().map(|b| String::from_utf8_lossy(b.as_ref()).into_owned()).unwrap_or_default();
        if let Some(kind_of_error) = out.function_error() {
            // The function failed (`Unhandled`): its error document names why.
            let said: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let message = said.get("errorMessage").and_then(|m| m.as_str()).unwrap_or(&body);
            return Err(unasked(
                format!("the function failed ({kind_of_error}): {message}"),
                &format!("read {name}'s log for this invocation"),
            ));
        }
        let json: serde_json::Value = serde_json::from_str(&body)
            .map_err(|e| unasked(format!("the answer is not JSON ({e}): an older function?"), deploy))?;
        RoleCheck::from_answer(&json)
            .ok_or_else(|| unasked("it answered with a run's report, not a role check".into(), deploy))
    }
}
