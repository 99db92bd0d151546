//! Hand-off to the workloads: capblock's events (EventBridge) and the actions rules ask for
//! (SSM parameters and Run Command, Auto Scaling, EKS managed node groups, capacity reservation
//! groups, RAM resource shares).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::bus_event::BusEntry;
use crate::domain::handoff::{Invocation, NodegroupScaling, ReservationPool};
use crate::domain::ids::Region;
use crate::domain::launch::{GroupSetup, LaunchTarget, TemplateRef};
use crate::domain::share::{SharePrincipal, ShareView};

use super::{InstanceSource, NotifyError};

#[async_trait]
pub trait EventBus: Send + Sync {
    /// Puts the entries on the bus, in PutEvents calls of at most 10. One result per entry, in
    /// order: EventBridge accepts or refuses each entry on its own.
    async fn put(&self, entries: &[BusEntry]) -> Vec<Result<(), NotifyError>>;
}

/// What a hand-off action's AWS call comes to.
pub type ActionResult<T> = Result<T, ActionError>;

/// A hand-off action's AWS call failed. Nothing about money: a retry is always safe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} in {region} failed: {message}")]
pub struct ActionError {
    pub operation: &'static str,
    pub region: String,
    pub message: String,
}

/// Whether AWS RAM may share with the Organization (`capblock preflight`).
#[async_trait]
pub trait OrganizationSharing: Send + Sync {
    /// `Ok(true)`: RAM's trusted access is enabled in the Organization. A refusal (only the
    /// management account or a delegated administrator may look) is an error naming it.
    async fn ram_sharing_enabled(&self) -> Result<bool, ActionError>;
}

#[async_trait]
pub trait Parameters: Send + Sync {
    /// Writes (overwrites) a String parameter.
    async fn put_parameter(&self, region: &Region, name: &str, value: &str) -> Result<(), ActionError>;
    /// The parameter's value; `None` when it does not exist.
    async fn parameter(&self, region: &Region, name: &str) -> Result<Option<String>, ActionError>;
    /// Deletes it; a parameter already gone is no error.
    async fn delete_parameter(&self, region: &Region, name: &str) -> Result<(), ActionError>;
}

#[async_trait]
pub trait Groups: Send + Sync {
    /// SetDesiredCapacity (without honoring cooldowns: the block's time is the schedule).
    async fn set_desired(&self, region: &Region, group: &str, desired: u32) -> Result<(), ActionError>;
    /// Which of the groups exist in the region (for `rules validate`).
    async fn existing(&self, region: &Region, groups: &[String]) -> Result<Vec<String>, ActionError>;
    /// The Availability Zones the group launches in (its subnets' zones for a group in a VPC);
    /// `None` when there is no such group.
    async fn zones(&self, region: &Region, group: &str) -> Result<Option<Vec<String>>, ActionError>;
    /// How the group launches its instances (its launch template, or a launch configuration,
    /// and its own Capacity Reservation settings); `None` when there is no such group. For
    /// `rules validate --check-aws`.
    async fn launch(&self, region: &Region, group: &str) -> Result<Option<GroupSetup>, ActionError>;
}

/// Launch templates (EC2): what one version asks for, to tell whether a group lands in a block.
#[async_trait]
pub trait LaunchTemplates: Send + Sync {
    /// DescribeLaunchTemplateVersions of the template's version; `None` when EC2 knows no such
    /// template or version.
    async fn target(&self, region: &Region, template: &TemplateRef) -> ActionResult<Option<LaunchTarget>>;
}

/// EKS managed node groups: `scale_nodegroup` reads a node group's size and sets it.
#[async_trait]
pub trait Nodegroups: Send + Sync {
    /// DescribeNodegroup: the node group's scaling configuration; `None` when the cluster or the
    /// node group does not exist in the region.
    async fn scaling(&self, region: &Region, cluster: &str, nodegroup: &str) -> ActionResult<Option<NodegroupScaling>>;
    /// UpdateNodegroupConfig of its scaling configuration (all three sizes); EKS applies it on
    /// its own after accepting it. The update's id.
    async fn set_scaling(
        &self,
        region: &Region,
        cluster: &str,
        nodegroup: &str,
        to: &NodegroupScaling,
    ) -> ActionResult<String>;
}

/// What a change of a capacity reservation group's members came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// Done.
    Changed,
    /// Accepted: AWS Resource Groups finishes it on its own (its `Pending`).
    Pending,
    /// The group does not exist: there is nothing to take out of it.
    NoGroup,
}

/// Capacity reservation groups (AWS Resource Groups): what a launch template may target instead
/// of one reservation.
#[async_trait]
pub trait ReservationGroups: Send + Sync {
    /// CreateGroup of a group that holds `pool`'s reservations and nothing else, tagged `tags`;
    /// a group of that name already there is no error (`false`: it was there).
    async fn ensure_group(
        &self,
        region: &Region,
        group: &str,
        pool: &ReservationPool,
        tags: &[(&str, &str)],
    ) -> ActionResult<bool>;
    /// GroupResources of the reservation (by ARN) into the group.
    async fn add(&self, region: &Region, group: &str, reservation_arn: &str) -> ActionResult<Membership>;
    /// UngroupResources of the reservation from the group.
    async fn remove(&self, region: &Region, group: &str, reservation_arn: &str) -> ActionResult<Membership>;
}

/// The hand-off's sides in another account (a consumer of a shared block), reached through that
/// account's hand-off role.
pub struct AccountSides {
    pub parameters: std::sync::Arc<dyn Parameters>,
    pub groups: std::sync::Arc<dyn Groups>,
    pub commands: std::sync::Arc<dyn Commands>,
    pub instances: std::sync::Arc<dyn InstanceSource>,
    pub nodegroups: std::sync::Arc<dyn Nodegroups>,
}

/// Where a rule's `handoff_account` is reached from.
#[async_trait]
pub trait AccountHands: Send + Sync {
    /// The sides in `account` (its role assumed once, its credentials refreshed as they expire).
    async fn sides(&self, account: &str) -> ActionResult<std::sync::Arc<AccountSides>>;
}

/// What a new resource share holds (`domain::share`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareRequest {
    pub name: String,
    pub reservation_arn: String,
    pub principals: Vec<SharePrincipal>,
    pub tags: Vec<(String, String)>,
    /// RAM's idempotency token (`domain::share::share_client_token`): the same for the same
    /// block and attempt, so a retry after a lost answer or a crash returns the same share.
    pub client_token: String,
}

/// AWS RAM resource shares of capblock's blocks, one per block, found by its tags.
#[async_trait]
pub trait Shares: Send + Sync {
    /// The active share of this stack tagged with the reservation, with its associations; None
    /// when there is none.
    async fn find(&self, region: &Region, stack: &str, reservation_id: &str) -> ActionResult<Option<ShareView>>;
    /// The share `share_arn` with its associations, read by its ARN (GetResourceShareAssociations):
    /// no listing of shares, which may not show a new share yet.
    async fn view(&self, region: &Region, share_arn: &str) -> ActionResult<ShareView>;
    /// CreateResourceShare with the reservation and the principals, and its tags; the share's
    /// ARN.
    async fn create(&self, region: &Region, request: &ShareRequest) -> ActionResult<String>;
    /// DeleteResourceShare: the consumers lose the block (RAM disassociates everything).
    async fn delete(&self, region: &Region, share_arn: &str) -> ActionResult<()>;
}

/// A Run Command capblock sent: as SSM lists it, and as capblock records it once sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentCommand {
    pub command_id: String,
    pub instance_ids: Vec<String>,
}

#[async_trait]
pub trait Commands: Send + Sync {
    /// SendCommand of `document` to the instances, marked with `comment`; the command id.
    async fn send(&self, region: &Region, document: &str, instances: &[String], comment: &str) -> ActionResult<String>;
    /// The commands of `document` marked `comment` sent to any of the instances. Anyone allowed
    /// to send commands can send one with that mark: asked only for a send of capblock's whose
    /// answer was lost.
    async fn sent(
        &self,
        region: &Region,
        document: &str,
        comment: &str,
        instance_ids: &[String],
    ) -> Result<Vec<SentCommand>, ActionError>;
    /// One instance's outcome of a command.
    async fn invocation(&self, region: &Region, command_id: &str, instance: &str) -> ActionResult<Invocation>;
}
