//! The hand-off in a consumer account: a shared block's actions (parameters, groups, commands,
//! node groups) run where its workloads are, through the member stack's hand-off role
//! (`member.yaml`: `capblock-handoff-<stack>`, assumable only by this stack's roles inside the
//! Organization). Each account's role is assumed once per container; aws-config's
//! `AssumeRoleProvider` refreshes the credentials before they expire.
//!
//! The watch over member accounts: each member named in `WatchAccounts` lends the scan its own
//! DescribeCapacityBlockOfferings limit through its read-only role `capblock-watch-<stack>`
//! (`member_accounts`: one market client per member, signed with that role's credentials).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::provider::SharedCredentialsProvider;

use super::autoscaling::AutoScaling;
use super::ec2::Ec2Market;
use super::eks::Eks;
use super::ssm::Ssm;
use crate::ports::{AccountHands, AccountSides, ActionError, ActionResult, MemberMarket};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`).
pub const ACTIONS: &[(&str, &[&str])] =
    &[("AccountHands", &["sts:AssumeRole"]), ("WatchAccounts", &["sts:AssumeRole"])];

/// The hand-off role the member stack of `stack` makes in `account`.
pub fn handoff_role_arn(partition: &str, account: &str, stack: &str) -> String {
    format!("arn:{partition}:iam::{account}:role/capblock-handoff-{stack}")
}

/// The hand-off role in `account` for a stack whose functions run in `region`.
pub fn handoff_role_in(region: Option<&str>, account: &str, stack: &str) -> String {
    handoff_role_arn(partition(region), account, stack)
}

/// The member stack's read-only watch role in `account` for a stack whose functions run in
/// `region`: DescribeCapacityBlockOfferings and nothing else.
pub fn market_role_in(region: Option<&str>, account: &str, stack: &str) -> String {
    format!("arn:{}:iam::{account}:role/capblock-watch-{stack}", partition(region))
}

/// The member stack's hand-off role in `account` for stack `stack`, and a provider of its
/// credentials over `base`'s under `session` (the role is assumed when they are first asked for).
pub async fn member_role(base: &SdkConfig, account: &str, stack: &str, session: &str) -> (String, AssumeRoleProvider) {
    let role = handoff_role_in(base.region().map(|r| r.as_ref()), account, stack);
    let provider = assumed(base, &role, session).await;
    (role, provider)
}

/// `base` acting as `role` (assumed under `session` when first asked for credentials).
pub async fn as_role(base: &SdkConfig, role: &str, session: &str) -> SdkConfig {
    let provider = assumed(base, role, session).await;
    base.to_builder().credentials_provider(SharedCredentialsProvider::new(provider)).build()
}

/// A market client for each member account in `accounts`, asking with the member's watch
/// role. Nothing is called here: a role that cannot be assumed shows as its first question's
/// error, and the scan's other accounts ask that question (`app::paced_asker::ask_spread`).
pub async fn member_markets(base: &SdkConfig, accounts: &[String], stack: &str) -> Vec<MemberMarket> {
    let mut out = Vec::with_capacity(accounts.len());
    for account in accounts {
        let role = market_role_in(base.region().map(|r| r.as_ref()), account, stack);
        let there = as_role(base, &role, &format!("capblock-watch-{stack}")).await;
        out.push(MemberMarket { account: account.clone(), market: Box::new(Ec2Market::new(there)) });
    }
    out
}

/// Credentials of `role` over `base`'s, assumed under `session` when first asked for and
/// refreshed before they expire.
pub async fn assumed(base: &SdkConfig, role: &str, session: &str) -> AssumeRoleProvider {
    AssumeRoleProvider::builder(role)
        .session_name(session.chars().take(64).collect::<String>())
        .configure(base)
        .build()
        .await
}

/// The partition of a region (`cn-north-1`: aws-cn, `us-gov-west-1`: aws-us-gov).
pub(crate) fn partition(region: Option<&str>) -> &'static str {
    match region {
        Some(r) if r.starts_with("cn-") => "aws-cn",
        Some(r) if r.starts_with("us-gov-") => "aws-us-gov",
        _ => "aws",
    }
}

pub struct AssumedAccounts {
    base: SdkConfig,
    stack: String,
    sides: Mutex<HashMap<String, Arc<AccountSides>>>,
}

impl AssumedAccounts {
    /// `stack`: this stack's name, which names the member stacks' role.
    pub fn new(base: SdkConfig, stack: &str) -> Self {
        AssumedAccounts { base, stack: stack.to_string(), sides: Mutex::new(HashMap::new()) }
    }
}

#[async_trait]
impl AccountHands for AssumedAccounts {
    async fn sides(&self, account: &str) -> ActionResult<Arc<AccountSides>> {
        if let Some(s) = self.sides.lock().unwrap_or_else(|p| p.into_inner()).get(account) {
            return Ok(s.clone());
        }
        let region = self.base.region().map(|r| r.to_string());
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ActionError {
                operation: "AssumeRole",
                region: region.unwrap_or_default(),
                message: format!("{account:?} is not an account id"),
            });
        }
        // The provider assumes the role when first asked for credentials (the first call in the
        // account): an AssumeRole refusal shows as that call's error, naming the role.
        let role = handoff_role_in(self.base.region().map(|r| r.as_ref()), account, &self.stack);
        let there = as_role(&self.base, &role, &format!("capblock-{}", self.stack)).await;
        let s = Arc::new(AccountSides {
            parameters: Arc::new(Ssm::new(there.clone())),
            groups: Arc::new(AutoScaling::new(there.clone())),
            commands: Arc::new(Ssm::new(there.clone())),
            instances: Arc::new(Ec2Market::new(there.clone())),
            nodegroups: Arc::new(Eks::new(there)),
        });
        // Two runs racing here each build one; the first kept serves the rest.
        let mut sides = self.sides.lock().unwrap_or_else(|p| p.into_inner());
        Ok(sides.entry(account.to_string()).or_insert(s).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_member_role_is_named_by_the_stack_in_the_regions_partition() {
        assert_eq!(
            handoff_role_arn(partition(Some("us-east-1")), "111111111111", "prod"),
            "arn:aws:iam::111111111111:role/capblock-handoff-prod"
        );
        assert_eq!(partition(Some("cn-north-1")), "aws-cn");
        assert_eq!(partition(Some("us-gov-west-1")), "aws-us-gov");
        assert_eq!(partition(None), "aws");
        assert_eq!(
            market_role_in(Some("us-gov-west-1"), "222222222222", "prod"),
            "arn:aws-us-gov:iam::222222222222:role/capblock-watch-prod"
        );
    }
}
