//! A function's own role, tried: each IAM action in a way that has no effect.

use async_trait::async_trait;

use crate::domain::ids::{InstanceType, Region};
use crate::domain::permissions::Access;

#[async_trait]
pub trait PermissionProbe: Send + Sync {
    /// Tries `action` (`service:Action`, as IAM names it) in `region` (`None`: the function's
    /// own region) without effect: a `DryRun` call, a read, or a write to a probe item of its
    /// own that it removes again. An action that cannot be tried so is `NotChecked`, never
    /// `Allowed`. `instance_type` is one the rules ask in `region`, for the EC2 calls that need one.
    async fn try_action(&self, action: &str, region: Option<&Region>, instance_type: Option<&InstanceType>) -> Access;

    /// Whether `action` is tried once per region the rules watch (EC2 and the other regional
    /// services a function calls in the block's region) or once in the function's own region.
    fn regional(&self, action: &str) -> bool;
}

/// Asks the stack's functions to check their own roles (`capblock preflight`: the operator's
/// credentials are not the roles').
#[async_trait]
pub trait RoleChecks: Send + Sync {
    /// The function kinds this can ask, with the names they run under; the kinds it cannot
    /// (name unknown) with why.
    fn kinds(&self) -> Vec<(String, Result<String, String>)>;
    /// Function `kind`'s own check; `Err` says why it could not be asked and what to do.
    async fn check_role(
        &self,
        kind: &str,
        ask: &crate::domain::permissions::PermissionsAsk,
    ) -> Result<crate::domain::permissions::RoleCheck, Unasked>;
}

/// Why a function could not be asked, and what to do about it: the cause decides the advice (a
/// network failure is not a missing permission).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unasked {
    pub why: String,
    pub todo: String,
}
