//! Whether AWS RAM may share with the Organization, as AWS Organizations lists its enabled
//! service access (`capblock preflight`, with the operator's credentials). Sharing a Capacity
//! Block inside the Organization needs it (RAM User Guide, "Enable resource sharing within AWS
//! Organizations": the management account runs `aws ram enable-sharing-with-aws-organization`,
//! which turns on trusted access for `ram.amazonaws.com`). Only the management account or a
//! delegated administrator may list it (Organizations API reference,
//! ListAWSServiceAccessForOrganization): anyone else is refused, which preflight reports as not
//! checked, not as a failure.

use async_trait::async_trait;
use aws_sdk_organizations::Client;
use aws_sdk_organizations::error::DisplayErrorContext;

use crate::ports::{ActionError, OrganizationSharing};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`).
pub const ACTIONS: &[(&str, &[&str])] =
    &[("OrganizationSharing", &["organizations:ListAWSServiceAccessForOrganization"])];

/// RAM's service principal as Organizations lists it.
pub const RAM_PRINCIPAL: &str = "ram.amazonaws.com";

pub struct Organizations {
    client: Client,
}

impl Organizations {
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Organizations { client: Client::new(sdk) }
    }
}

#[async_trait]
impl OrganizationSharing for Organizations {
    async fn ram_sharing_enabled(&self) -> Result<bool, ActionError> {
        let mut pages = self.client.list_aws_service_access_for_organization().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| ActionError {
                operation: "ListAWSServiceAccessForOrganization",
                region: "global".into(),
                message: DisplayErrorContext(&e).to_string(),
            })?;
            if page.enabled_service_principals().iter().any(|p| p.service_principal() == Some(RAM_PRINCIPAL)) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
