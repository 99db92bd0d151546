//! A function's own role, tried without effect (`ports::PermissionProbe`), for `capblock
//! preflight`. Each IAM action of the function's ports has one way to be tried here:
//!
//! * EC2: the call with `DryRun` (EC2 answers `DryRunOperation` when the caller may, and
//!   `UnauthorizedOperation` when not). The purchase is tried on an offering the same probe just
//!   saw, with the stack's tag, so the role's request-tag and region conditions are what answer;
//!   `CreateTags` rides on it (tags on create are authorized with the call).
//! * DynamoDB: reads of the stack's settings, and writes to a probe item of the function's own
//!   (`PREFLIGHT#PROBE`, removed again and carrying a `ttl` in case it is not).
//! * Reads elsewhere (a topic's subscriptions, a schedule that does not exist, a parameter that
//!   does not exist, a node group that does not exist in a cluster the stack names): "not
//!   found" comes after IAM allowed the call.
//! * What has an effect whatever is asked (publishing, putting events, scaling a group, sending a
//!   command, creating a schedule, passing a role, creating or filling a reservation group,
//!   resizing a node group) is
//!   `NotChecked`, with the reason.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{CapacityReservationInstancePlatform, ResourceType, Tag, TagSpecification};

use super::regional::Regional;
use crate::domain::ids::{InstanceType, Region};
use crate::domain::permissions::Access;
use crate::ports::PermissionProbe;

/// The IAM actions of `ports`, from every adapter's `ACTIONS` table, in the order the ports
/// name them, each once: what the function's role must allow.
pub fn actions_of(ports: &[&str]) -> Vec<&'static str> {
    let tables: [&[(&str, &[&'static str])]; 11] = [
        super::ec2::ACTIONS,
        super::dynamo::ACTIONS,
        super::sns::ACTIONS,
        super::eventbridge::ACTIONS,
        super::scheduler::ACTIONS,
        super::ssm::ACTIONS,
        super::autoscaling::ACTIONS,
        super::resource_groups::ACTIONS,
        super::eks::ACTIONS,
        super::ram::ACTIONS,
        super::accounts::ACTIONS,
    ];
    let mut out: Vec<&'static str> = Vec::new();
    for port in ports {
        for table in tables {
            for (name, actions) in table {
                if name == port {
                    for a in *actions {
                        if !out.contains(a) {
                            out.push(a);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Codes that say the thing asked for does not exist: answered only after IAM allowed the call.
fn is_absence(code: &str) -> bool {
    matches!(
        code,
        "ResourceNotFoundException"
            | "ParameterNotFound"
            | "InvocationDoesNotExist"
            | "InvalidCommandId"
            | "NoSuchResourceException"
            | "NotFoundException"
    )
}

/// The access an SDK call's result shows, where the call asked for something that is not there
/// on purpose (a schedule, a parameter, a command): "not found" means IAM let the call through.
fn access<T, E, R>(result: Result<T, SdkError<E, R>>) -> Access
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    judged(result, true)
}

/// As [`access`], for calls on what must exist (the stack's table, its topic): "not found" there
/// is the stack's own problem, and says nothing about the permission.
fn access_existing<T, E, R>(result: Result<T, SdkError<E, R>>) -> Access
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    judged(result, false)
}

/// As [`access`], for a `DryRun` call about a placeholder reservation (none is held): EC2
/// judges IAM against the resource's ARN, and a policy scoped to tagged reservations refuses
/// `UnauthorizedOperation` for an id no one holds while it would allow the real block. Only
/// `DryRunOperation` says something (allowed); anything else is "not checked", never a failure.
fn placeholder_access<T, E, R>(result: Result<T, SdkError<E, R>>) -> Access
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let error = result.err().map(|e| (e.code().map(str::to_string), DisplayErrorContext(&e).to_string()));
    about_placeholder(error.as_ref().map(|(c, m)| (c.as_deref(), m.as_str())))
}

/// What an answer about the placeholder reservation shows (`None`: it was answered).
fn about_placeholder(error: Option<(Option<&str>, &str)>) -> Access {
    match error {
        None | Some((Some("DryRunOperation"), _)) => Access::Allowed,
        Some((code, _)) => Access::not_checked(format!(
            "asked about a placeholder reservation ({NO_RESERVATION}), as no block is held: EC2's answer ({}) may \
             be about the id rather than the permission; checked for real once a block exists",
            code.unwrap_or("no code")
        )),
    }
}

fn judged<T, E, R>(result: Result<T, SdkError<E, R>>, absent_on_purpose: bool) -> Access
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(_) => Access::Allowed,
        Err(e) => {
            let code = e.code().map(str::to_string);
            let message = e.message().map(str::to_string).unwrap_or_else(|| DisplayErrorContext(&e).to_string());
            match code.as_deref() {
                Some(c) if absent_on_purpose && is_absence(c) => Access::Allowed,
                c => Access::from_error(c, &message),
            }
        }
    }
}

/// Where the probe writes: never an item capblock itself uses.
const PROBE_PK: &str = "PREFLIGHT#PROBE";
/// A placeholder id in the `DryRun` calls that need one: syntactically valid, never a real one.
const NO_RESERVATION: &str = "cr-00000000000000000";
const NO_EXTENSION_OFFERING: &str = "cbe-00000000000000000";
/// The node group DescribeNodegroup is asked about: a valid name no one gives a node group.
const NO_NODEGROUP: &str = "capblock-preflight-probe";

pub struct AwsProbe {
    ec2: Regional<aws_sdk_ec2::Client>,
    quotas: Regional<aws_sdk_servicequotas::Client>,
    groups: Regional<aws_sdk_autoscaling::Client>,
    ssm: Regional<aws_sdk_ssm::Client>,
    eks: Regional<aws_sdk_eks::Client>,
    ram: Regional<aws_sdk_ram::Client>,
    dynamo: aws_sdk_dynamodb::Client,
    sns: aws_sdk_sns::Client,
    scheduler: aws_sdk_scheduler::Client,
    table: String,
    alerts_topic: String,
    schedule_group: Option<String>,
    stack: String,
    function: String,
    handoff_clusters: Vec<String>,
    handoff_accounts: Vec<String>,
    member_accounts: Vec<String>,
    sdk: SdkConfig,
    /// Per region: the offering the describe try saw (the purchase is tried on it) ...
    offering: Mutex<HashMap<Region, Option<String>>>,
    /// ... and what the purchase try showed (CreateTags rides on it).
    purchase: Mutex<HashMap<Region, Access>>,
}

/// What the probe needs to know of the stack: the function it runs in, where it writes and
/// reads, and the stack's name for the purchase's tag.
pub struct ProbeTargets {
    pub table: String,
    pub alerts_topic: String,
    pub schedule_group: Option<String>,
    pub stack: String,
    pub function: String,
    /// The EKS clusters whose node groups the role may scale (HandoffClusters; empty for a
    /// function that scales none): DescribeNodegroup is tried in the first.
    pub handoff_clusters: Vec<String>,
    /// The member accounts the rules' `handoff_account` name: the member stack's hand-off role
    /// is assumed in each (empty for a function that acts in no other account).
    pub handoff_accounts: Vec<String>,
    /// The member accounts lending the scan their describe limit (`WatchAccounts`): the member
    /// stack's watch role is assumed in each (empty for a function that asks through none).
    pub member_accounts: Vec<String>,
}

impl AwsProbe {
    pub fn new(sdk: &SdkConfig, t: ProbeTargets) -> AwsProbe {
        AwsProbe {
            ec2: Regional::new(sdk.clone(), aws_sdk_ec2::Client::new),
            quotas: Regional::new(sdk.clone(), aws_sdk_servicequotas::Client::new),
            groups: Regional::new(sdk.clone(), aws_sdk_autoscaling::Client::new),
            ssm: Regional::new(sdk.clone(), aws_sdk_ssm::Client::new),
            eks: Regional::new(sdk.clone(), aws_sdk_eks::Client::new),
            ram: Regional::new(sdk.clone(), aws_sdk_ram::Client::new),
            dynamo: aws_sdk_dynamodb::Client::new(sdk),
            sns: aws_sdk_sns::Client::new(sdk),
            scheduler: aws_sdk_scheduler::Client::new(sdk),
            table: t.table,
            alerts_topic: t.alerts_topic,
            schedule_group: t.schedule_group,
            stack: t.stack,
            function: t.function,
            handoff_clusters: t.handoff_clusters,
            handoff_accounts: t.handoff_accounts,
            member_accounts: t.member_accounts,
            sdk: sdk.clone(),
            offering: Mutex::new(HashMap::new()),
            purchase: Mutex::new(HashMap::new()),
        }
    }

    fn key(&self, sk: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_string(), AttributeValue::S(PROBE_PK.to_string())),
            ("sk".to_string(), AttributeValue::S(format!("{}#{sk}", self.function))),
        ])
    }

    /// A probe item: the key, and a `ttl` an hour ahead in case the cleanup is not allowed.
    fn probe_item(&self, sk: &str) -> HashMap<String, AttributeValue> {
        let mut item = self.key(sk);
        // The table's TTL only: nothing is decided by it.
        let expires = chrono::Utc::now().timestamp() + 3600;
        item.insert("ttl".into(), AttributeValue::N(expires.to_string()));
        item
    }

    /// Removes a probe item; a refusal is the DeleteItem try's to report, not this one's.
    async fn clean(&self, sk: &str) {
        let _ = self.dynamo.delete_item().table_name(&self.table).set_key(Some(self.key(sk))).send().await;
    }

    /// DescribeCapacityBlockOfferings, for real (no DryRun): an offering to try the purchase on.
    async fn describe_offerings(&self, region: &Region, t: &InstanceType) -> Access {
        let answer = self
            .ec2
            .get(region)
            .describe_capacity_block_offerings()
            .instance_type(t.as_str())
            .instance_count(1)
            .capacity_duration_hours(24)
            .send()
            .await;
        let seen = answer.as_ref().ok().map(|o| {
            o.capacity_block_offerings().first().and_then(|x| x.capacity_block_offering_id()).map(str::to_string)
        });
        if let Some(id) = seen {
            self.offering.lock().unwrap_or_else(|p| p.into_inner()).insert(region.clone(), id);
        }
        access(answer)
    }

    async fn try_purchase(&self, region: &Region, t: &InstanceType) -> Access {
        let known = self.offering.lock().unwrap_or_else(|p| p.into_inner()).get(region).cloned();
        let id = match known {
            Some(id) => id,
            None => {
                if let Access::Denied { message } = self.describe_offerings(region, t).await {
                    return Access::not_checked(format!("no offering could be read to try it on: {message}"));
                }
                self.offering.lock().unwrap_or_else(|p| p.into_inner()).get(region).cloned().flatten()
            }
        };
        let Some(id) = id else {
            return Access::not_checked(format!("EC2 offered no {t} block to try the purchase on (DryRun)"));
        };
        let tags = TagSpecification::builder()
            .resource_type(ResourceType::CapacityReservation)
            .tags(Tag::builder().key(crate::domain::tags::STACK_TAG).value(&self.stack).build())
            .build();
        let result = self
            .ec2
            .get(region)
            .purchase_capacity_block()
            .capacity_block_offering_id(id)
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .tag_specifications(tags)
            .dry_run(true)
            .send()
            .await;
        let seen = match result {
            // A DryRun that buys: never expected, and reported as it is.
            Ok(_) => Access::not_checked("EC2 answered a DryRun purchase without DryRunOperation"),
            Err(e) => access::<(), _, _>(Err(e)),
        };
        self.purchase.lock().unwrap_or_else(|p| p.into_inner()).insert(region.clone(), seen.clone());
        seen
    }

    async fn try_ec2(&self, action: &str, region: &Region, t: Option<&InstanceType>) -> Access {
        let c = self.ec2.get(region);
        match action {
            "DescribeCapacityBlockOfferings" => match t {
                Some(t) => self.describe_offerings(region, t).await,
                None => Access::not_checked("no instance type asked in this region"),
            },
            "PurchaseCapacityBlock" => match t {
                Some(t) => self.try_purchase(region, t).await,
                None => Access::not_checked("no instance type asked in this region"),
            },
            "CreateTags" => match self.purchase.lock().unwrap_or_else(|p| p.into_inner()).get(region) {
                Some(Access::Allowed) => Access::Allowed,
                _ => Access::not_checked("tried only with a purchase (DryRun) that EC2 allowed"),
            },
            "DescribeInstanceTypes" => access(c.describe_instance_types().dry_run(true).send().await),
            "DescribeCapacityReservations" => access(c.describe_capacity_reservations().dry_run(true).send().await),
            "DescribeInstances" => access(c.describe_instances().dry_run(true).send().await),
            "DescribeCapacityBlocks" => access(c.describe_capacity_blocks().dry_run(true).send().await),
            "DescribeCapacityBlockStatus" => access(c.describe_capacity_block_status().dry_run(true).send().await),
            "DescribeCapacityBlockExtensionHistory" => {
                access(c.describe_capacity_block_extension_history().dry_run(true).send().await)
            }
            "DescribeCapacityBlockExtensionOfferings" => placeholder_access(
                c.describe_capacity_block_extension_offerings()
                    .capacity_reservation_id(NO_RESERVATION)
                    .capacity_block_extension_duration_hours(24)
                    .dry_run(true)
                    .send()
                    .await,
            ),
            "PurchaseCapacityBlockExtension" => placeholder_access(
                c.purchase_capacity_block_extension()
                    .capacity_block_extension_offering_id(NO_EXTENSION_OFFERING)
                    .capacity_reservation_id(NO_RESERVATION)
                    .dry_run(true)
                    .send()
                    .await,
            ),
            other => Access::not_checked(format!("capblock has no way to try ec2:{other}")),
        }
    }

    async fn try_dynamo(&self, action: &str) -> Access {
        let t = &self.table;
        let d = &self.dynamo;
        match action {
            "GetItem" => access_existing(
                d.get_item()
                    .table_name(t)
                    .key("pk", AttributeValue::S("STACK".into()))
                    .key("sk", AttributeValue::S("SETTINGS".into()))
                    .send()
                    .await,
            ),
            "PutItem" => {
                let seen =
                    access_existing(d.put_item().table_name(t).set_item(Some(self.probe_item("put"))).send().await);
                self.clean("put").await;
                seen
            }
            "UpdateItem" => {
                let seen = access_existing(
                    d.update_item()
                        .table_name(t)
                        .set_key(Some(self.key("update")))
                        .update_expression("SET #t = :t")
                        .expression_attribute_names("#t", "ttl")
                        .expression_attribute_values(
                            ":t",
                            AttributeValue::N((chrono::Utc::now().timestamp() + 3600).to_string()),
                        )
                        .send()
                        .await,
                );
                self.clean("update").await;
                seen
            }
            "DeleteItem" => {
                // Deleting an item that is not there is allowed or refused like any other.
                access_existing(d.delete_item().table_name(t).set_key(Some(self.key("delete"))).send().await)
            }
            "Query" => access_existing(
                d.query()
                    .table_name(t)
                    .key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", AttributeValue::S(PROBE_PK.into()))
                    .limit(1)
                    .send()
                    .await,
            ),
            "BatchWriteItem" => {
                let put = PutRequest::builder().set_item(Some(self.probe_item("batch"))).build();
                let seen = match put {
                    Ok(put) => access_existing(
                        d.batch_write_item()
                            .request_items(t, vec![WriteRequest::builder().put_request(put).build()])
                            .send()
                            .await,
                    ),
                    Err(e) => Access::not_checked(format!("the probe's request: {e}")),
                };
                self.clean("batch").await;
                seen
            }
            "Scan" => access_existing(d.scan().table_name(t).limit(1).send().await),
            other => Access::not_checked(format!("capblock has no way to try dynamodb:{other}")),
        }
    }

    async fn try_other(&self, service: &str, action: &str, region: Option<&Region>) -> Access {
        if let Some(what) = effect_of(service, action) {
            return Access::not_checked(format!("it cannot be tried without {what}"));
        }
        match (service, action, region) {
            ("sns", "ListSubscriptionsByTopic", _) => {
                access_existing(self.sns.list_subscriptions_by_topic().topic_arn(&self.alerts_topic).send().await)
            }
            ("scheduler", "GetSchedule" | "ListSchedules", _) => self.try_schedules(action).await,
            ("servicequotas", "ListAWSDefaultServiceQuotas", Some(r)) => access(
                self.quotas.get(r).list_aws_default_service_quotas().service_code("ec2").max_results(1).send().await,
            ),
            ("servicequotas", "GetServiceQuota", Some(r)) => access(
                // Running On-Demand P instances: a quota every account has.
                self.quotas.get(r).get_service_quota().service_code("ec2").quota_code("L-417A185B").send().await,
            ),
            ("autoscaling", "DescribeAutoScalingGroups", Some(r)) => {
                access(self.groups.get(r).describe_auto_scaling_groups().max_records(1).send().await)
            }
            ("ssm", "GetParameter", Some(r)) => {
                access(self.ssm.get(r).get_parameter().name("/capblock/preflight-probe-absent").send().await)
            }
            ("eks", "DescribeNodegroup", Some(r)) => match self.handoff_clusters.first() {
                // The role allows it on the named clusters' node groups only: asked of one of
                // them, about a node group that is not there.
                Some(cluster) => access(
                    self.eks
                        .get(r)
                        .describe_nodegroup()
                        .cluster_name(cluster)
                        .nodegroup_name(NO_NODEGROUP)
                        .send()
                        .await,
                ),
                None => Access::not_checked(
                    "the stack names no cluster in HandoffClusters: its role may read and scale no node group",
                ),
            },
            ("sts", "AssumeRole", _) => self.try_member_roles().await,
            ("ram", "GetResourceShares", Some(r)) => access(
                self.ram
                    .get(r)
                    .get_resource_shares()
                    .resource_owner(aws_sdk_ram::types::ResourceOwner::SelfValue)
                    .max_results(1)
                    .send()
                    .await,
            ),
            ("ram", "GetResourceShareAssociations", Some(r)) => access(
                self.ram
                    .get(r)
                    .get_resource_share_associations()
                    .association_type(aws_sdk_ram::types::ResourceShareAssociationType::Resource)
                    .max_results(1)
                    .send()
                    .await,
            ),
            ("ssm", "ListCommands", Some(r)) => access(self.ssm.get(r).list_commands().max_results(1).send().await),
            ("ssm", "GetCommandInvocation", Some(r)) => access(
                self.ssm
                    .get(r)
                    .get_command_invocation()
                    .command_id("00000000-0000-0000-0000-000000000000")
                    .instance_id("i-00000000000000000")
                    .send()
                    .await,
            ),
            _ => Access::not_checked(format!("capblock has no way to try {service}:{action}")),
        }
    }

    /// Reads the function's schedule group: a schedule that is not there, or the group's first.
    async fn try_schedules(&self, action: &str) -> Access {
        let Some(group) = &self.schedule_group else {
            return Access::not_checked("the function has no schedule group");
        };
        if action == "GetSchedule" {
            access(self.scheduler.get_schedule().name("capblock-preflight-probe").group_name(group).send().await)
        } else {
            access(self.scheduler.list_schedules().group_name(group).max_results(1).send().await)
        }
    }
}

/// What an action would do that keeps preflight from trying it (a message sent, a size or a
/// share changed), for the actions of `try_other`'s services that have an effect; `None` for
/// those tried without one.
fn effect_of(service: &str, action: &str) -> Option<&'static str> {
    Some(match (service, action) {
        ("sns", "Publish") => "reaching the topic's subscribers",
        ("events", "PutEvents") => "putting an event on the bus",
        // The role may write the page's one object only, and the Organization reads it.
        ("s3", "PutObject") => "replacing the team page",
        ("iam", "PassRole") => "creating a schedule (it passes the role)",
        ("scheduler", "CreateSchedule" | "UpdateSchedule" | "DeleteSchedule") => {
            "creating, changing or deleting a schedule"
        }
        ("autoscaling", "SetDesiredCapacity") => "changing a group's size",
        ("ssm", "PutParameter" | "DeleteParameter") => "writing a parameter a workload may read",
        ("ssm", "SendCommand") => "running a command on instances",
        ("resource-groups", "CreateGroup" | "Tag") => "creating or tagging a group",
        ("resource-groups", "GroupResources" | "UngroupResources") => {
            "changing what a group holds, which launches that target it use"
        }
        ("eks", "UpdateNodegroupConfig") => "changing a node group's size",
        ("ram", "CreateResourceShare" | "TagResource" | "DeleteResourceShare") => {
            "sharing a block with other accounts, or taking it back"
        }
        _ => return None,
    })
}

impl AwsProbe {
    /// Assumes the member stack's roles this function uses: the hand-off role in each account a
    /// rule's `handoff_account` names, the watch role in each of `WatchAccounts`. The member
    /// stack is there and its trust lets this role in. The first that fails is the answer (a
    /// denial names the role; anything else is not a verdict on it).
    async fn try_member_roles(&self) -> Access {
        use aws_credential_types::provider::ProvideCredentials;
        if self.handoff_accounts.is_empty() && self.member_accounts.is_empty() {
            return Access::not_checked(
                "no rule names a handoff_account and WatchAccounts is empty: no member role is assumed",
            );
        }
        let region = self.sdk.region().map(|r| r.as_ref().to_string());
        let mut roles = Vec::new();
        for account in &self.handoff_accounts {
            roles.push(super::accounts::member_role(&self.sdk, account, &self.stack, "capblock-preflight").await);
        }
        for account in &self.member_accounts {
            let role = super::accounts::market_role_in(region.as_deref(), account, &self.stack);
            let provider = super::accounts::assumed(&self.sdk, &role, "capblock-preflight").await;
            roles.push((role, provider));
        }
        for (role, provider) in roles {
            if let Err(e) = provider.provide_credentials().await {
                let message = format!("{role}: {}", DisplayErrorContext(&e));
                return if message.contains("AccessDenied") {
                    Access::Denied { message }
                } else {
                    Access::not_checked(format!("could not assume {message}"))
                };
            }
        }
        Access::Allowed
    }
}

#[async_trait]
impl PermissionProbe for AwsProbe {
    async fn try_action(&self, action: &str, region: Option<&Region>, t: Option<&InstanceType>) -> Access {
        let Some((service, name)) = action.split_once(':') else {
            return Access::not_checked(format!("{action} is not an IAM action"));
        };
        match (service, region) {
            ("ec2", Some(r)) => self.try_ec2(name, r, t).await,
            ("dynamodb", _) => self.try_dynamo(name).await,
            _ => self.try_other(service, name, region).await,
        }
    }

    fn regional(&self, action: &str) -> bool {
        crate::domain::permissions::is_regional(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::permissions::is_denial;

    #[test]
    fn a_functions_actions_come_from_its_ports_each_once_in_order() {
        let a = actions_of(&["OfferingSource", "Purchaser", "RuleStore", "Ledger", "Notifier"]);
        assert_eq!(&a[..3], &["ec2:DescribeCapacityBlockOfferings", "ec2:PurchaseCapacityBlock", "ec2:CreateTags"]);
        assert!(a.contains(&"dynamodb:UpdateItem") && a.contains(&"sns:Publish"));
        let mut dedup = a.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), a.len(), "each action once: {a:?}");
        assert!(actions_of(&["NoSuchPort"]).is_empty());
    }

    /// A denial about the placeholder reservation is no failure: a policy scoped to tagged
    /// reservations refuses an id no one holds; a DryRun that went through is still "allowed".
    #[test]
    fn an_answer_about_the_placeholder_reservation_is_not_a_verdict() {
        assert_eq!(about_placeholder(Some((Some("DryRunOperation"), "would have succeeded"))), Access::Allowed);
        for code in ["UnauthorizedOperation", "InvalidCapacityReservationId.NotFound"] {
            let seen = about_placeholder(Some((Some(code), "no")));
            assert!(
                matches!(&seen, Access::NotChecked { why } if why.contains("placeholder") && why.contains(code)),
                "{code}: {seen:?}"
            );
        }
        // The generic judgement would have failed the first (a denial).
        assert!(matches!(Access::from_error(Some("UnauthorizedOperation"), "no"), Access::Denied { .. }));
    }

    #[test]
    fn not_found_after_iam_is_allowed_and_a_denial_is_a_denial() {
        assert!(is_absence("ParameterNotFound") && !is_absence("UnauthorizedOperation"));
        assert!(is_denial("AccessDeniedException"));
    }
}
