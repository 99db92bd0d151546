//! The hand-off's sides in memory (`ports::handoff`): SSM parameters, Auto Scaling groups,
//! Run Command, Resource Groups' capacity reservation groups, EKS node groups and RAM shares, as
//! `app::handoff::ActionRunner` drives them. The local-stack tests in `tests/` run the same
//! workflow on moto's and the simulator's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::domain::handoff::{Invocation, NodegroupScaling, ReservationPool};
use crate::domain::ids::Region;
use crate::domain::launch::{GroupLaunch, GroupSetup};
use crate::domain::share::{self, Association, ShareView};
use crate::ports::{
    AccountHands, AccountSides, ActionError, ActionResult, Commands, Groups, InstanceSource, MarketError, Membership,
    Nodegroups, Parameters, ReservationGroups, SentCommand, ShareRequest, Shares,
};

/// A capacity reservation group in memory: what it was made to hold, its tags, its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationGroup {
    pub(crate) pool: ReservationPool,
    pub(crate) tags: Vec<(String, String)>,
    pub(crate) members: BTreeSet<String>,
}

/// The hand-off's AWS sides in memory (SSM parameters, Auto Scaling groups, Run Command,
/// Resource Groups, EKS node groups, RAM shares), with a switch that makes every call fail.
/// Its state is open to the core's tests (`pub(crate)`); other crates set it up through the
/// `with_*` settings and read it through the accessors.
#[derive(Default)]
pub struct MemoryHandoff {
    pub(crate) failing: Mutex<bool>,
    pub(crate) parameters: Mutex<BTreeMap<String, String>>,
    pub(crate) capacity: Mutex<Vec<(String, u32)>>,
    pub(crate) sent: Mutex<Vec<(String, Vec<String>, String)>>,
    pub(crate) running: Mutex<bool>,
    /// The zones every Auto Scaling group launches in (none set: the group is not found).
    pub(crate) zones: Mutex<Vec<String>>,
    /// DescribeAutoScalingGroups fails (the rest does not).
    pub(crate) zones_unreadable: Mutex<bool>,
    pub(crate) reservation_groups: Mutex<BTreeMap<String, ReservationGroup>>,
    /// CreateGroup calls that created a group.
    pub(crate) created: Mutex<u32>,
    /// GroupResources and UngroupResources calls.
    pub(crate) membership_calls: Mutex<u32>,
    /// EKS node groups by `cluster/nodegroup`, and every UpdateNodegroupConfig's new size.
    pub(crate) nodegroups: Mutex<BTreeMap<String, NodegroupScaling>>,
    pub(crate) nodegroup_updates: Mutex<Vec<(String, NodegroupScaling)>>,
    /// RAM resource shares: each with its request, whether deleted, and what RAM says of it.
    pub(crate) shares: Mutex<Vec<MemoryShare>>,
    /// What RAM makes of the next shares created: their resource association's state.
    pub(crate) share_outcome: Mutex<Option<Association>>,
    /// RAM's listing (GetResourceShares) does not show the shares made so far yet.
    pub(crate) listing_lags: Mutex<bool>,
    /// The instances running in every block (DescribeInstances by reservation).
    pub(crate) instances: Vec<String>,
    /// Instances whose commands fail.
    pub(crate) command_fails_on: BTreeSet<String>,
    /// Accounts outside the Organization, whom RAM refuses as principals.
    pub(crate) outsiders: BTreeSet<String>,
}

#[derive(Debug, Clone)]
pub struct MemoryShare {
    pub(crate) arn: String,
    pub(crate) request: ShareRequest,
    pub(crate) deleted: bool,
    pub(crate) resource: Association,
    /// Not in RAM's listing (yet).
    pub(crate) unlisted: bool,
}

impl MemoryShare {
    fn view(&self, outsiders: &BTreeSet<String>) -> ShareView {
        ShareView {
            arn: self.arn.clone(),
            resource: Some(share::Associated {
                entity: self.request.reservation_arn.clone(),
                status: if self.deleted { Association::Disassociated } else { self.resource },
                message: (self.resource == Association::Failed).then(|| "not scheduled or active".to_string()),
            }),
            principals: self
                .request
                .principals
                .iter()
                .map(|p| share::Associated {
                    entity: p.as_str().to_string(),
                    status: if outsiders.contains(p.as_str()) { Association::Failed } else { Association::Associated },
                    message: Some("outside the organization".into()),
                })
                .collect(),
        }
    }
}

impl MemoryHandoff {
    fn check(&self, operation: &'static str) -> Result<(), ActionError> {
        if *self.failing.lock().unwrap() {
            return Err(ActionError { operation, region: "us-east-1".into(), message: "AccessDenied".into() });
        }
        Ok(())
    }
    /// Every call fails (`on`) or none does, as AccessDenied.
    pub fn fail(&self, on: bool) {
        *self.failing.lock().unwrap() = on;
    }

    /// `ids` run in every block.
    pub fn with_instances<'a>(mut self, ids: impl IntoIterator<Item = &'a str>) -> Self {
        self.instances = ids.into_iter().map(str::to_string).collect();
        self
    }

    /// Commands sent to instance `id` fail.
    pub fn with_failing_commands_on(mut self, id: &str) -> Self {
        self.command_fails_on.insert(id.to_string());
        self
    }

    /// `account` is outside the Organization: RAM refuses it as a principal.
    pub fn with_outsider(mut self, account: &str) -> Self {
        self.outsiders.insert(account.to_string());
        self
    }

    /// The SSM parameters as they stand, by name.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        self.parameters.lock().unwrap().clone()
    }

    /// Every SetDesiredCapacity: the group and its new desired count, in order.
    pub fn desired(&self) -> Vec<(String, u32)> {
        self.capacity.lock().unwrap().clone()
    }
}

/// Member accounts' hand-off sides in memory (`AccountHands`, which `AssumedAccounts` is on
/// AWS): each member's a `MemoryHandoff` of its own, kept by the test to read what the actions
/// did there. An account no member was added for is refused as AssumeRole refuses a role the
/// member's stack never made, naming the account.
#[derive(Default)]
pub struct MemoryAccounts {
    members: Mutex<BTreeMap<String, Arc<MemoryHandoff>>>,
}

impl MemoryAccounts {
    /// `account`'s sides are `sides`.
    pub fn with_member(self, account: &str, sides: Arc<MemoryHandoff>) -> Self {
        self.members.lock().unwrap().insert(account.to_string(), sides);
        self
    }
}

#[async_trait]
impl AccountHands for MemoryAccounts {
    async fn sides(&self, account: &str) -> ActionResult<Arc<AccountSides>> {
        let Some(m) = self.members.lock().unwrap().get(account).cloned() else {
            return Err(ActionError {
                operation: "AssumeRole",
                region: "us-east-1".into(),
                message: format!("AccessDenied: no hand-off role to assume in account {account}"),
            });
        };
        Ok(Arc::new(AccountSides {
            parameters: m.clone(),
            groups: m.clone(),
            commands: m.clone(),
            instances: m.clone(),
            nodegroups: m,
        }))
    }
}

#[async_trait]
impl Parameters for MemoryHandoff {
    async fn put_parameter(&self, _r: &Region, name: &str, value: &str) -> Result<(), ActionError> {
        self.check("PutParameter")?;
        self.parameters.lock().unwrap().insert(name.into(), value.into());
        Ok(())
    }
    async fn parameter(&self, _r: &Region, name: &str) -> Result<Option<String>, ActionError> {
        self.check("GetParameter")?;
        Ok(self.parameters.lock().unwrap().get(name).cloned())
    }
    async fn delete_parameter(&self, _r: &Region, name: &str) -> Result<(), ActionError> {
        self.check("DeleteParameter")?;
        self.parameters.lock().unwrap().remove(name);
        Ok(())
    }
}

#[async_trait]
impl Groups for MemoryHandoff {
    async fn set_desired(&self, _r: &Region, group: &str, desired: u32) -> Result<(), ActionError> {
        self.check("SetDesiredCapacity")?;
        self.capacity.lock().unwrap().push((group.into(), desired));
        Ok(())
    }
    async fn existing(&self, _r: &Region, groups: &[String]) -> Result<Vec<String>, ActionError> {
        Ok(groups.to_vec())
    }
    async fn zones(&self, _r: &Region, _group: &str) -> Result<Option<Vec<String>>, ActionError> {
        if *self.zones_unreadable.lock().unwrap() {
            return Err(ActionError {
                operation: "DescribeAutoScalingGroups",
                region: "us-east-1".into(),
                message: "Throttling".into(),
            });
        }
        let zones = self.zones.lock().unwrap().clone();
        Ok((!zones.is_empty()).then_some(zones))
    }
    async fn launch(&self, _r: &Region, _group: &str) -> Result<Option<GroupSetup>, ActionError> {
        Ok(Some(GroupLaunch::Unknown.into()))
    }
}

#[async_trait]
impl ReservationGroups for MemoryHandoff {
    async fn ensure_group(
        &self,
        _r: &Region,
        group: &str,
        pool: &ReservationPool,
        tags: &[(&str, &str)],
    ) -> Result<bool, ActionError> {
        self.check("CreateGroup")?;
        let mut groups = self.reservation_groups.lock().unwrap();
        if groups.contains_key(group) {
            return Ok(false);
        }
        let tags = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        groups.insert(group.into(), ReservationGroup { pool: pool.clone(), tags, members: BTreeSet::new() });
        *self.created.lock().unwrap() += 1;
        Ok(true)
    }
    async fn add(&self, _r: &Region, group: &str, arn: &str) -> Result<Membership, ActionError> {
        self.check("GroupResources")?;
        *self.membership_calls.lock().unwrap() += 1;
        let mut groups = self.reservation_groups.lock().unwrap();
        let g = groups.get_mut(group).ok_or_else(|| ActionError {
            operation: "GroupResources",
            region: "us-east-1".into(),
            message: "NotFoundException".into(),
        })?;
        g.members.insert(arn.into());
        Ok(Membership::Changed)
    }
    async fn remove(&self, _r: &Region, group: &str, arn: &str) -> Result<Membership, ActionError> {
        self.check("UngroupResources")?;
        *self.membership_calls.lock().unwrap() += 1;
        Ok(match self.reservation_groups.lock().unwrap().get_mut(group) {
            None => Membership::NoGroup,
            Some(g) => {
                g.members.remove(arn);
                Membership::Changed
            }
        })
    }
}

#[async_trait]
impl Nodegroups for MemoryHandoff {
    async fn scaling(&self, _r: &Region, cluster: &str, nodegroup: &str) -> ActionResult<Option<NodegroupScaling>> {
        self.check("DescribeNodegroup")?;
        Ok(self.nodegroups.lock().unwrap().get(&format!("{cluster}/{nodegroup}")).copied())
    }
    async fn set_scaling(
        &self,
        _r: &Region,
        cluster: &str,
        nodegroup: &str,
        to: &NodegroupScaling,
    ) -> ActionResult<String> {
        self.check("UpdateNodegroupConfig")?;
        let name = format!("{cluster}/{nodegroup}");
        let mut groups = self.nodegroups.lock().unwrap();
        let g = groups.get_mut(&name).ok_or_else(|| ActionError {
            operation: "UpdateNodegroupConfig",
            region: "us-east-1".into(),
            message: "ResourceNotFoundException".into(),
        })?;
        *g = *to;
        let mut updates = self.nodegroup_updates.lock().unwrap();
        updates.push((name, *to));
        Ok(format!("update-{}", updates.len()))
    }
}

#[async_trait]
impl Commands for MemoryHandoff {
    async fn send(&self, _r: &Region, document: &str, ids: &[String], comment: &str) -> Result<String, ActionError> {
        self.check("SendCommand")?;
        let mut sent = self.sent.lock().unwrap();
        sent.push((document.into(), ids.to_vec(), comment.into()));
        Ok(format!("cmd-{}", sent.len()))
    }
    async fn sent(
        &self,
        _r: &Region,
        document: &str,
        comment: &str,
        ids: &[String],
    ) -> Result<Vec<SentCommand>, ActionError> {
        self.check("ListCommands")?;
        let sent = self.sent.lock().unwrap();
        Ok(sent
            .iter()
            .enumerate()
            .filter(|(_, (d, to, c))| d == document && c == comment && to.iter().any(|i| ids.contains(i)))
            .map(|(n, (_, to, _))| SentCommand { command_id: format!("cmd-{}", n + 1), instance_ids: to.clone() })
            .collect())
    }
    async fn invocation(&self, _r: &Region, _c: &str, instance: &str) -> Result<Invocation, ActionError> {
        self.check("GetCommandInvocation")?;
        Ok(if *self.running.lock().unwrap() {
            Invocation::Running
        } else if self.command_fails_on.contains(instance) {
            Invocation::Failed("Failed".into())
        } else {
            Invocation::Succeeded
        })
    }
}

#[async_trait]
impl InstanceSource for MemoryHandoff {
    async fn instances_in(&self, _r: &Region, _id: &str) -> Result<Vec<String>, MarketError> {
        Ok(self.instances.clone())
    }
    async fn reservation_of(&self, _r: &Region, _i: &str) -> Result<Option<String>, MarketError> {
        Ok(None)
    }
}

#[async_trait]
impl Shares for MemoryHandoff {
    async fn find(&self, _r: &Region, stack: &str, reservation_id: &str) -> ActionResult<Option<ShareView>> {
        self.check("GetResourceShares")?;
        let tagged = |s: &MemoryShare, k: &str, v: &str| s.request.tags.iter().any(|(a, b)| a == k && b == v);
        Ok(self
            .shares
            .lock()
            .unwrap()
            .iter()
            .find(|s| {
                !s.deleted
                    && !s.unlisted
                    && tagged(s, "capblock:stack", stack)
                    && tagged(s, "capblock:reservation", reservation_id)
            })
            .map(|s| s.view(&self.outsiders)))
    }
    async fn view(&self, _r: &Region, share_arn: &str) -> ActionResult<ShareView> {
        self.check("GetResourceShareAssociations")?;
        let shares = self.shares.lock().unwrap();
        let s = shares.iter().find(|s| s.arn == share_arn).ok_or_else(|| ActionError {
            operation: "GetResourceShareAssociations",
            region: "us-east-1".into(),
            message: format!("UnknownResourceException: {share_arn}"),
        })?;
        Ok(s.view(&self.outsiders))
    }
    async fn create(&self, _r: &Region, request: &ShareRequest) -> ActionResult<String> {
        self.check("CreateResourceShare")?;
        let mut shares = self.shares.lock().unwrap();
        // RAM's client tokens: the same token and parameters answer the same share.
        if let Some(made) = shares.iter().find(|s| s.request.client_token == request.client_token) {
            assert_eq!(&made.request, request, "IdempotentParameterMismatch");
            return Ok(made.arn.clone());
        }
        let arn = format!("arn:aws:ram:us-east-1:123456789012:resource-share/s-{}", shares.len());
        let resource = self.share_outcome.lock().unwrap().unwrap_or(Association::Associated);
        let unlisted = *self.listing_lags.lock().unwrap();
        shares.push(MemoryShare { arn: arn.clone(), request: request.clone(), deleted: false, resource, unlisted });
        Ok(arn)
    }
    async fn delete(&self, _r: &Region, share_arn: &str) -> ActionResult<()> {
        self.check("DeleteResourceShare")?;
        for s in self.shares.lock().unwrap().iter_mut().filter(|s| s.arn == share_arn) {
            s.deleted = true;
        }
        Ok(())
    }
}
