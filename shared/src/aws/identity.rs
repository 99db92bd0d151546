//! Who is calling: STS GetCallerIdentity. A person's request is filed under the caller's
//! `UserId` (what IAM's `aws:userid` says in a policy), and an approval names the caller's ARN;
//! neither is ever a flag the person types.

use aws_sdk_sts::Client;

/// The IAM actions of this adapter. GetCallerIdentity needs no permission (IAM cannot deny it),
/// and only the CLI calls it: no function declares the port.
pub const ACTIONS: &[(&str, &[&str])] = &[("CallerIdentity", &["sts:GetCallerIdentity"])];

/// The caller as STS names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `AIDA...` for a user, `AROA...:<session>` for a role's session: `aws:userid`.
    pub user_id: String,
    /// The principal's ARN (an assumed role's session ARN for a role).
    pub arn: String,
    pub account: String,
}

/// Asks STS who the configured credentials are.
pub async fn caller(sdk: &aws_config::SdkConfig) -> Result<Caller, String> {
    let out = Client::new(sdk)
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| format!("STS GetCallerIdentity: {}", aws_sdk_sts::error::DisplayErrorContext(&e)))?;
    match (out.user_id, out.arn, out.account) {
        (Some(user_id), Some(arn), Some(account)) => Ok(Caller { user_id, arn, account }),
        _ => Err("STS GetCallerIdentity answered without a user id, ARN or account".into()),
    }
}
