//! Launch templates: what one version of a template asks for (the market and the capacity
//! reservation it targets), for `rules validate --check-aws`.

use super::*;
use crate::domain::launch::{LaunchTarget, TemplateRef};
use crate::ports::{ActionError, ActionResult, LaunchTemplates};

/// EC2's answers for a template or version it does not know.
const NOT_FOUND: &[&str] = &[
    "InvalidLaunchTemplateName.NotFoundException",
    "InvalidLaunchTemplateId.NotFound",
    "InvalidLaunchTemplateId.VersionNotFound",
    "InvalidLaunchTemplateId.Malformed",
];

#[async_trait]
impl LaunchTemplates for Ec2Market {
    async fn target(&self, region: &Region, template: &TemplateRef) -> ActionResult<Option<LaunchTarget>> {
        let call = self
            .client(region)
            .describe_launch_template_versions()
            // By name when Auto Scaling gives one (unique in a region, and the same template as
            // its id), else by id: EC2 refuses a call naming both.
            .set_launch_template_name(template.name.clone())
            .set_launch_template_id(if template.name.is_some() { None } else { template.id.clone() })
            .versions(template.version.clone().unwrap_or_else(|| "$Default".into()));
        match call.send().await {
            Ok(out) => Ok(out.launch_template_versions().first().and_then(|v| v.launch_template_data()).map(|d| {
                let target = d.capacity_reservation_specification().and_then(|s| s.capacity_reservation_target());
                LaunchTarget {
                    market_type: d
                        .instance_market_options()
                        .and_then(|m| m.market_type())
                        .map(|m| m.as_str().to_string()),
                    reservation_id: target.and_then(|t| t.capacity_reservation_id()).map(str::to_string),
                    reservation_group_arn: target
                        .and_then(|t| t.capacity_reservation_resource_group_arn())
                        .map(str::to_string),
                }
            })),
            Err(e) if e.code().is_some_and(|c| NOT_FOUND.contains(&c)) => Ok(None),
            Err(e) => Err(ActionError {
                operation: "DescribeLaunchTemplateVersions",
                region: region.to_string(),
                message: DisplayErrorContext(&e).to_string(),
            }),
        }
    }
}
