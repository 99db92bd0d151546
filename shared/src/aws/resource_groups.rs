//! AWS Resource Groups for the hand-off: `reservation_group` keeps a capacity reservation group
//! per rule, and each block's reservation goes into it once paid and out of it at the end. A
//! launch template that targets the group (`CapacityReservationResourceGroupArn`) then launches
//! into whichever block of the rule is current, without knowing its id.

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_resourcegroups::Client;
use aws_sdk_resourcegroups::error::{DisplayErrorContext, SdkError};
use aws_sdk_resourcegroups::operation::create_group::CreateGroupError;
use aws_sdk_resourcegroups::types::{GroupConfigurationItem, GroupConfigurationParameter};

use super::regional::Regional;
use crate::domain::handoff::ReservationPool;
use crate::domain::ids::Region;
use crate::ports::{ActionError, ActionResult, Membership, ReservationGroups};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`). CreateGroup
/// carries the group's tags, and tags on create are authorized as `resource-groups:Tag` too.
/// GroupResources and UngroupResources tag the reservation through the tagging API: the Service
/// Authorization Reference lists `resource-groups:Tag` + `tag:TagResources` and
/// `resource-groups:Untag` + `tag:UntagResources` as their dependent actions, and the Tagging
/// API's reference says TagResources / UntagResources also need the owning service's tagging
/// permission: `ec2:CreateTags` / `ec2:DeleteTags` on the reservation (template.yaml grants them
/// on the stack's own reservations only).
pub const ACTIONS: &[(&str, &[&str])] = &[(
    "ReservationGroups",
    &[
        "resource-groups:CreateGroup",
        "resource-groups:Tag",
        "resource-groups:GroupResources",
        "resource-groups:UngroupResources",
        "resource-groups:Untag",
        "tag:TagResources",
        "tag:UntagResources",
        "ec2:CreateTags",
        "ec2:DeleteTags",
    ],
)];

/// The configuration of a group instances can be launched into (`AWS::EC2::CapacityReservationPool`)
/// that accepts capacity reservations only (`AWS::ResourceGroups::Generic`), as the EC2 user
/// guide creates one; for UltraServer Capacity Blocks the pool names their instance type and
/// the Capacity Block reservation type.
fn configuration(pool: &ReservationPool) -> Result<Vec<GroupConfigurationItem>, String> {
    let parameter = |name: &str, value: &str| {
        GroupConfigurationParameter::builder().name(name).values(value).build().map_err(|e| e.to_string())
    };
    let mut pool_item = GroupConfigurationItem::builder().r#type("AWS::EC2::CapacityReservationPool");
    if let ReservationPool::UltraServerBlocks { instance_type } = pool {
        pool_item = pool_item
            .parameters(parameter("instance-type", instance_type)?)
            .parameters(parameter("reservation-type", "capacity-block")?);
    }
    let generic = GroupConfigurationItem::builder()
        .r#type("AWS::ResourceGroups::Generic")
        .parameters(parameter("allowed-resource-types", "AWS::EC2::CapacityReservation")?);
    Ok(vec![pool_item.build().map_err(|e| e.to_string())?, generic.build().map_err(|e| e.to_string())?])
}

fn failure<E, R>(operation: &'static str, region: &Region, e: &SdkError<E, R>) -> ActionError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    ActionError { operation, region: region.to_string(), message: DisplayErrorContext(e).to_string() }
}

/// CreateGroup, or nothing when a group of that name is there: Resource Groups answers
/// `BadRequestException` "Cannot create group: group already exists" then. Whether it created it.
async fn ensure_group(
    client: &Client,
    region: &Region,
    group: &str,
    pool: &ReservationPool,
    tags: &[(&str, &str)],
) -> ActionResult<bool> {
    let fail = |message: String| ActionError { operation: "CreateGroup", region: region.to_string(), message };
    let mut create = client
        .create_group()
        .name(group)
        // Letters, digits, spaces and `_ . -` only (CreateGroup's pattern).
        .description("The Capacity Blocks of a capblock rule for launch templates to target")
        .set_configuration(Some(configuration(pool).map_err(fail)?));
    for (k, v) in tags {
        create = create.tags(*k, *v);
    }
    match create.send().await {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(e.as_service_error(), Some(CreateGroupError::BadRequestException(b))
                if b.message().is_some_and(|m| m.to_ascii_lowercase().contains("already exists"))) =>
        {
            Ok(false)
        }
        Err(e) => Err(failure("CreateGroup", region, &e)),
    }
}

/// What a GroupResources or UngroupResources answer says of the one reservation: a failure is
/// listed per resource inside a successful answer.
fn membership(
    operation: &'static str,
    region: &Region,
    failed: &[aws_sdk_resourcegroups::types::FailedResource],
    pending: usize,
) -> ActionResult<Membership> {
    if let Some(f) = failed.first() {
        return Err(ActionError {
            operation,
            region: region.to_string(),
            message: format!(
                "{}: {} {}",
                f.resource_arn().unwrap_or("the reservation"),
                f.error_code().unwrap_or("refused"),
                f.error_message().unwrap_or_default()
            ),
        });
    }
    Ok(if pending > 0 { Membership::Pending } else { Membership::Changed })
}

async fn add(client: &Client, region: &Region, group: &str, arn: &str) -> ActionResult<Membership> {
    let out = client
        .group_resources()
        .group(group)
        .resource_arns(arn)
        .send()
        .await
        .map_err(|e| failure("GroupResources", region, &e))?;
    membership("GroupResources", region, out.failed(), out.pending().len())
}

async fn remove(client: &Client, region: &Region, group: &str, arn: &str) -> ActionResult<Membership> {
    match client.ungroup_resources().group(group).resource_arns(arn).send().await {
        Ok(out) => membership("UngroupResources", region, out.failed(), out.pending().len()),
        Err(e) if e.as_service_error().is_some_and(|se| se.is_not_found_exception()) => Ok(Membership::NoGroup),
        Err(e) => Err(failure("UngroupResources", region, &e)),
    }
}

pub struct ResourceGroups {
    clients: Regional<Client>,
}

impl ResourceGroups {
    pub fn new(base: SdkConfig) -> Self {
        ResourceGroups { clients: Regional::new(base, Client::new) }
    }
}

#[async_trait]
impl ReservationGroups for ResourceGroups {
    async fn ensure_group(
        &self,
        region: &Region,
        group: &str,
        pool: &ReservationPool,
        tags: &[(&str, &str)],
    ) -> ActionResult<bool> {
        ensure_group(&self.clients.get(region), region, group, pool, tags).await
    }

    async fn add(&self, region: &Region, group: &str, reservation_arn: &str) -> ActionResult<Membership> {
        add(&self.clients.get(region), region, group, reservation_arn).await
    }

    async fn remove(&self, region: &Region, group: &str, reservation_arn: &str) -> ActionResult<Membership> {
        remove(&self.clients.get(region), region, group, reservation_arn).await
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_resourcegroups::operation::create_group::CreateGroupOutput;
    use aws_sdk_resourcegroups::operation::group_resources::GroupResourcesOutput;
    use aws_sdk_resourcegroups::operation::ungroup_resources::{UngroupResourcesError, UngroupResourcesOutput};
    use aws_sdk_resourcegroups::types::error::{BadRequestException, NotFoundException};
    use aws_sdk_resourcegroups::types::{FailedResource, PendingResource};
    use aws_smithy_mocks::{mock, mock_client};

    use super::*;

    const ARN: &str = "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0";

    fn east() -> Region {
        "us-east-1".parse().unwrap()
    }

    /// A configuration item's type and its parameters' names and values.
    type Item<'a> = (&'a str, Vec<(&'a str, Vec<&'a str>)>);

    fn types(items: &[GroupConfigurationItem]) -> Vec<Item<'_>> {
        items
            .iter()
            .map(|i| {
                let params = i
                    .parameters()
                    .iter()
                    .map(|p| (p.name(), p.values().iter().map(String::as_str).collect()))
                    .collect();
                (i.r#type(), params)
            })
            .collect()
    }

    #[test]
    fn a_group_is_a_pool_of_reservations_and_an_ultraserver_group_names_its_type() {
        let plain = configuration(&ReservationPool::Reservations).unwrap();
        assert_eq!(
            types(&plain),
            [
                ("AWS::EC2::CapacityReservationPool", vec![]),
                (
                    "AWS::ResourceGroups::Generic",
                    vec![("allowed-resource-types", vec!["AWS::EC2::CapacityReservation"])]
                ),
            ]
        );
        let ultra =
            configuration(&ReservationPool::UltraServerBlocks { instance_type: "p6e-gb200.36xlarge".into() }).unwrap();
        assert_eq!(
            types(&ultra)[0],
            (
                "AWS::EC2::CapacityReservationPool",
                vec![("instance-type", vec!["p6e-gb200.36xlarge"]), ("reservation-type", vec!["capacity-block"])]
            )
        );
    }

    #[tokio::test]
    async fn a_group_already_there_is_kept_and_other_refusals_fail() {
        let created = mock!(Client::create_group)
            .match_requests(|r| {
                r.name() == Some("capblock-s-r") && r.tags().is_some_and(|t| t["capblock:stack"] == "s")
            })
            .then_output(|| CreateGroupOutput::builder().build());
        let client = mock_client!(aws_sdk_resourcegroups, [&created]);
        let tags = [("capblock:stack", "s")];
        assert!(ensure_group(&client, &east(), "capblock-s-r", &ReservationPool::Reservations, &tags).await.unwrap());

        let exists = mock!(Client::create_group).then_error(|| {
            CreateGroupError::BadRequestException(
                BadRequestException::builder().message("Cannot create group: group already exists").build(),
            )
        });
        let client = mock_client!(aws_sdk_resourcegroups, [&exists]);
        assert!(!ensure_group(&client, &east(), "capblock-s-r", &ReservationPool::Reservations, &tags).await.unwrap());

        let bad = mock!(Client::create_group).then_error(|| {
            CreateGroupError::BadRequestException(BadRequestException::builder().message("Invalid name").build())
        });
        let client = mock_client!(aws_sdk_resourcegroups, [&bad]);
        let e =
            ensure_group(&client, &east(), "capblock-s-r", &ReservationPool::Reservations, &tags).await.unwrap_err();
        assert_eq!(e.operation, "CreateGroup");
    }

    #[tokio::test]
    async fn a_reservation_refused_inside_a_successful_answer_is_a_failure() {
        let refused = mock!(Client::group_resources).then_output(|| {
            GroupResourcesOutput::builder()
                .failed(
                    FailedResource::builder()
                        .resource_arn(ARN)
                        .error_code("InvalidResource")
                        .error_message("not a capacity reservation pool")
                        .build(),
                )
                .build()
        });
        let client = mock_client!(aws_sdk_resourcegroups, [&refused]);
        let e = add(&client, &east(), "g", ARN).await.unwrap_err();
        assert!(e.message.contains("InvalidResource") && e.message.contains("cr-0123456789abcdef0"), "{e}");

        let pending = mock!(Client::group_resources).then_output(|| {
            GroupResourcesOutput::builder().pending(PendingResource::builder().resource_arn(ARN).build()).build()
        });
        let done = mock!(Client::group_resources)
            .match_requests(|r| r.group() == Some("g") && r.resource_arns() == [ARN.to_string()])
            .then_output(|| GroupResourcesOutput::builder().succeeded(ARN).build());
        let client = mock_client!(aws_sdk_resourcegroups, [&pending]);
        assert_eq!(add(&client, &east(), "g", ARN).await.unwrap(), Membership::Pending);
        let client = mock_client!(aws_sdk_resourcegroups, [&done]);
        assert_eq!(add(&client, &east(), "g", ARN).await.unwrap(), Membership::Changed);
    }

    #[tokio::test]
    async fn a_group_that_is_gone_has_nothing_to_take_out() {
        let gone = mock!(Client::ungroup_resources).then_error(|| {
            UngroupResourcesError::NotFoundException(NotFoundException::builder().message("no such group").build())
        });
        let client = mock_client!(aws_sdk_resourcegroups, [&gone]);
        assert_eq!(remove(&client, &east(), "g", ARN).await.unwrap(), Membership::NoGroup);
        let out =
            mock!(Client::ungroup_resources).then_output(|| UngroupResourcesOutput::builder().succeeded(ARN).build());
        let client = mock_client!(aws_sdk_resourcegroups, [&out]);
        assert_eq!(remove(&client, &east(), "g", ARN).await.unwrap(), Membership::Changed);
    }
}
