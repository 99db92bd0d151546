//! EKS for the hand-off: `scale_nodegroup` reads a managed node group's scaling configuration
//! (DescribeNodegroup) and sets it (UpdateNodegroupConfig).

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_eks::Client;
use aws_sdk_eks::error::{DisplayErrorContext, SdkError};
use aws_sdk_eks::types::NodegroupScalingConfig;

use super::regional::Regional;
use crate::domain::handoff::NodegroupScaling;
use crate::domain::ids::Region;
use crate::ports::{ActionError, ActionResult, Nodegroups};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`).
pub const ACTIONS: &[(&str, &[&str])] = &[("Nodegroups", &["eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"])];

fn failure<E, R>(operation: &'static str, region: &Region, e: &SdkError<E, R>) -> ActionError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    ActionError { operation, region: region.to_string(), message: DisplayErrorContext(e).to_string() }
}

/// A size as capblock counts it: EKS answers 32-bit integers, never negative.
fn size(region: &Region, what: &str, v: Option<i32>) -> ActionResult<u32> {
    v.and_then(|v| u32::try_from(v).ok()).ok_or_else(|| ActionError {
        operation: "DescribeNodegroup",
        region: region.to_string(),
        message: format!("EKS described the node group without a {what}"),
    })
}

async fn scaling(
    client: &Client,
    region: &Region,
    cluster: &str,
    nodegroup: &str,
) -> ActionResult<Option<NodegroupScaling>> {
    let out = match client.describe_nodegroup().cluster_name(cluster).nodegroup_name(nodegroup).send().await {
        Ok(out) => out,
        // The cluster or the node group is not there.
        Err(e) if e.as_service_error().is_some_and(|se| se.is_resource_not_found_exception()) => return Ok(None),
        Err(e) => return Err(failure("DescribeNodegroup", region, &e)),
    };
    let Some(config) = out.nodegroup().and_then(|n| n.scaling_config()) else {
        return Err(ActionError {
            operation: "DescribeNodegroup",
            region: region.to_string(),
            message: format!(
                "EKS described node group {nodegroup} of cluster {cluster} without its scaling configuration"
            ),
        });
    };
    Ok(Some(NodegroupScaling {
        min: size(region, "minimum size", config.min_size())?,
        max: size(region, "maximum size", config.max_size())?,
        desired: size(region, "desired size", config.desired_size())?,
    }))
}

async fn set_scaling(
    client: &Client,
    region: &Region,
    cluster: &str,
    nodegroup: &str,
    to: &NodegroupScaling,
) -> ActionResult<String> {
    let int = |v: u32| {
        i32::try_from(v).map_err(|_| ActionError {
            operation: "UpdateNodegroupConfig",
            region: region.to_string(),
            message: format!("{v} is not a node group size"),
        })
    };
    let config = NodegroupScalingConfig::builder()
        .min_size(int(to.min)?)
        .max_size(int(to.max)?)
        .desired_size(int(to.desired)?)
        .build();
    let out = client
        .update_nodegroup_config()
        .cluster_name(cluster)
        .nodegroup_name(nodegroup)
        .scaling_config(config)
        .send()
        .await
        .map_err(|e| failure("UpdateNodegroupConfig", region, &e))?;
    Ok(out.update().and_then(|u| u.id()).unwrap_or("without an id").to_string())
}

pub struct Eks {
    clients: Regional<Client>,
}

impl Eks {
    pub fn new(base: SdkConfig) -> Self {
        Eks { clients: Regional::new(base, Client::new) }
    }
}

#[async_trait]
impl Nodegroups for Eks {
    async fn scaling(&self, region: &Region, cluster: &str, nodegroup: &str) -> ActionResult<Option<NodegroupScaling>> {
        scaling(&self.clients.get(region), region, cluster, nodegroup).await
    }

    async fn set_scaling(
        &self,
        region: &Region,
        cluster: &str,
        nodegroup: &str,
        to: &NodegroupScaling,
    ) -> ActionResult<String> {
        set_scaling(&self.clients.get(region), region, cluster, nodegroup, to).await
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_eks::operation::describe_nodegroup::{DescribeNodegroupError, DescribeNodegroupOutput};
    use aws_sdk_eks::operation::update_nodegroup_config::{UpdateNodegroupConfigError, UpdateNodegroupConfigOutput};
    use aws_sdk_eks::types::error::{ResourceInUseException, ResourceNotFoundException};
    use aws_sdk_eks::types::{Nodegroup, Update, UpdateStatus, UpdateType};
    use aws_smithy_mocks::{mock, mock_client};

    use super::*;

    fn east() -> Region {
        "us-east-1".parse().unwrap()
    }

    fn described(min: i32, max: i32, desired: i32) -> DescribeNodegroupOutput {
        let config = NodegroupScalingConfig::builder().min_size(min).max_size(max).desired_size(desired).build();
        DescribeNodegroupOutput::builder()
            .nodegroup(Nodegroup::builder().nodegroup_name("gpu").cluster_name("train").scaling_config(config).build())
            .build()
    }

    #[tokio::test]
    async fn a_node_groups_size_is_read_and_a_missing_one_is_none() {
        let found = mock!(Client::describe_nodegroup)
            .match_requests(|r| r.cluster_name() == Some("train") && r.nodegroup_name() == Some("gpu"))
            .then_output(|| described(0, 2, 0));
        let client = mock_client!(aws_sdk_eks, [&found]);
        assert_eq!(
            scaling(&client, &east(), "train", "gpu").await.unwrap(),
            Some(NodegroupScaling { min: 0, max: 2, desired: 0 })
        );

        let missing = mock!(Client::describe_nodegroup).then_error(|| {
            DescribeNodegroupError::ResourceNotFoundException(
                ResourceNotFoundException::builder().message("No node group found for name: gpu.").build(),
            )
        });
        let client = mock_client!(aws_sdk_eks, [&missing]);
        assert_eq!(scaling(&client, &east(), "train", "gpu").await.unwrap(), None);

        let bare = mock!(Client::describe_nodegroup).then_output(|| {
            DescribeNodegroupOutput::builder().nodegroup(Nodegroup::builder().nodegroup_name("gpu").build()).build()
        });
        let client = mock_client!(aws_sdk_eks, [&bare]);
        let e = scaling(&client, &east(), "train", "gpu").await.unwrap_err();
        assert_eq!(e.operation, "DescribeNodegroup");
        assert!(e.message.contains("scaling configuration"), "{e}");
    }

    #[tokio::test]
    async fn the_update_sets_all_three_sizes_and_a_refusal_fails() {
        let update = mock!(Client::update_nodegroup_config)
            .match_requests(|r| {
                r.cluster_name() == Some("train")
                    && r.nodegroup_name() == Some("gpu")
                    && r.scaling_config()
                        .is_some_and(|c| (c.min_size(), c.max_size(), c.desired_size()) == (Some(0), Some(4), Some(4)))
            })
            .then_output(|| {
                UpdateNodegroupConfigOutput::builder()
                    .update(
                        Update::builder()
                            .id("u-1")
                            .status(UpdateStatus::InProgress)
                            .r#type(UpdateType::ConfigUpdate)
                            .build(),
                    )
                    .build()
            });
        let client = mock_client!(aws_sdk_eks, [&update]);
        let to = NodegroupScaling { min: 0, max: 4, desired: 4 };
        assert_eq!(set_scaling(&client, &east(), "train", "gpu", &to).await.unwrap(), "u-1");

        let busy = mock!(Client::update_nodegroup_config).then_error(|| {
            UpdateNodegroupConfigError::ResourceInUseException(
                ResourceInUseException::builder().message("Nodegroup cannot be updated as it is UPDATING").build(),
            )
        });
        let client = mock_client!(aws_sdk_eks, [&busy]);
        let e = set_scaling(&client, &east(), "train", "gpu", &to).await.unwrap_err();
        assert_eq!(e.operation, "UpdateNodegroupConfig");
        assert!(e.message.contains("UPDATING"), "{e}");
    }
}
