//! Auto Scaling for the hand-off: `scale_group` sets a group's desired capacity, and reads the
//! zones a group launches in (a group outside the block's zone launches nothing into it) and its
//! launch template (one that does not target the block launches nothing into it either).

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_autoscaling::Client;
use aws_sdk_autoscaling::error::DisplayErrorContext;
use aws_sdk_autoscaling::types::AutoScalingGroup;

use super::regional::Regional;
use crate::domain::ids::Region;
use crate::domain::launch::{GroupCapacity, GroupLaunch, GroupSetup, TemplateRef};
use crate::ports::{ActionError, Groups};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`).
pub const ACTIONS: &[(&str, &[&str])] =
    &[("Groups", &["autoscaling:SetDesiredCapacity", "autoscaling:DescribeAutoScalingGroups"])];

pub struct AutoScaling {
    clients: Regional<Client>,
}

impl AutoScaling {
    pub fn new(base: SdkConfig) -> Self {
        AutoScaling { clients: Regional::new(base, Client::new) }
    }

    /// DescribeAutoScalingGroups of one group; `None` when there is no such group.
    async fn group(&self, region: &Region, group: &str) -> Result<Option<AutoScalingGroup>, ActionError> {
        let out = self
            .clients
            .get(region)
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(group)
            .send()
            .await
            .map_err(|e| ActionError {
                operation: "DescribeAutoScalingGroups",
                region: region.to_string(),
                message: DisplayErrorContext(&e).to_string(),
            })?;
        Ok(out.auto_scaling_groups().iter().find(|g| g.auto_scaling_group_name() == Some(group)).cloned())
    }
}

#[async_trait]
impl Groups for AutoScaling {
    async fn set_desired(&self, region: &Region, group: &str, desired: u32) -> Result<(), ActionError> {
        let fail =
            |message: String| ActionError { operation: "SetDesiredCapacity", region: region.to_string(), message };
        let desired = i32::try_from(desired).map_err(|_| fail(format!("{desired} is not a capacity")))?;
        self.clients
            .get(region)
            .set_desired_capacity()
            .auto_scaling_group_name(group)
            .desired_capacity(desired)
            // The block's times are the schedule: a cooldown must not defer them.
            .honor_cooldown(false)
            .send()
            .await
            .map_err(|e| fail(DisplayErrorContext(&e).to_string()))?;
        Ok(())
    }

    async fn existing(&self, region: &Region, groups: &[String]) -> Result<Vec<String>, ActionError> {
        let mut found = Vec::new();
        // DescribeAutoScalingGroups takes at most 100 names per call.
        for names in groups.chunks(100) {
            let mut pages = self
                .clients
                .get(region)
                .describe_auto_scaling_groups()
                .set_auto_scaling_group_names(Some(names.to_vec()))
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| ActionError {
                    operation: "DescribeAutoScalingGroups",
                    region: region.to_string(),
                    message: DisplayErrorContext(&e).to_string(),
                })?;
                found.extend(
                    page.auto_scaling_groups().iter().filter_map(|g| g.auto_scaling_group_name()).map(str::to_string),
                );
            }
        }
        Ok(found)
    }

    async fn zones(&self, region: &Region, group: &str) -> Result<Option<Vec<String>>, ActionError> {
        // A group in a VPC lists its subnets' zones here too.
        Ok(self.group(region, group).await?.map(|g| g.availability_zones().to_vec()))
    }

    async fn launch(&self, region: &Region, group: &str) -> Result<Option<GroupSetup>, ActionError> {
        let Some(g) = self.group(region, group).await? else {
            return Ok(None);
        };
        // A group with several instance types names its template in its mixed instances policy.
        let spec = g
            .launch_template()
            .or_else(|| g.mixed_instances_policy()?.launch_template()?.launch_template_specification());
        let launch = match (spec, g.launch_configuration_name()) {
            (Some(t), _) => GroupLaunch::Template(TemplateRef {
                id: t.launch_template_id().map(str::to_string),
                name: t.launch_template_name().map(str::to_string),
                version: t.version().map(str::to_string),
            }),
            (None, Some(c)) => GroupLaunch::Configuration(c.to_string()),
            (None, None) => GroupLaunch::Unknown,
        };
        Ok(Some(GroupSetup { launch, capacity: capacity_of(&g) }))
    }
}

/// The group's own Capacity Reservation settings: its CapacityReservationSpecification and
/// its mixed instances policy's distribution segments.
fn capacity_of(g: &AutoScalingGroup) -> GroupCapacity {
    let spec = g.capacity_reservation_specification();
    let target = spec.and_then(|s| s.capacity_reservation_target());
    let segments = g
        .mixed_instances_policy()
        .and_then(|p| p.instances_distribution())
        .map(|d| d.distribution_segments())
        .unwrap_or_default();
    GroupCapacity {
        preference: spec.and_then(|s| s.capacity_reservation_preference()).map(|p| p.as_str().to_string()),
        reservation_ids: target.map(|t| t.capacity_reservation_ids().to_vec()).unwrap_or_default(),
        group_arns: target.map(|t| t.capacity_reservation_resource_group_arns().to_vec()).unwrap_or_default(),
        segment_types: segments
            .iter()
            .flat_map(|s| s.target_capacity_types.iter().flatten())
            .map(|t| t.as_str().to_string())
            .collect(),
    }
}
