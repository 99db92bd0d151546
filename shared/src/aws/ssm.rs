//! SSM for the hand-off: the parameter `publish_parameter` writes, and Run Command.

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_ssm::Client;
use aws_sdk_ssm::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ssm::types::{CommandInvocationStatus, ParameterType};

use super::regional::Regional;
use crate::domain::handoff::Invocation;
use crate::domain::ids::Region;
use crate::ports::{ActionError, ActionResult, Commands, Parameters, SentCommand};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`).
pub const ACTIONS: &[(&str, &[&str])] = &[
    ("Parameters", &["ssm:PutParameter", "ssm:GetParameter", "ssm:DeleteParameter"]),
    ("Commands", &["ssm:SendCommand", "ssm:ListCommands", "ssm:GetCommandInvocation"]),
];

pub struct Ssm {
    clients: Regional<Client>,
}

impl Ssm {
    pub fn new(base: SdkConfig) -> Self {
        Ssm { clients: Regional::new(base, Client::new) }
    }
}

fn failed<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(
    operation: &'static str,
    region: &Region,
    e: SdkError<E, R>,
) -> ActionError {
    ActionError { operation, region: region.to_string(), message: DisplayErrorContext(&e).to_string() }
}

#[async_trait]
impl Parameters for Ssm {
    async fn put_parameter(&self, region: &Region, name: &str, value: &str) -> Result<(), ActionError> {
        self.clients
            .get(region)
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::String)
            .overwrite(true)
            .send()
            .await
            .map_err(|e| failed("PutParameter", region, e))?;
        Ok(())
    }

    async fn parameter(&self, region: &Region, name: &str) -> Result<Option<String>, ActionError> {
        match self.clients.get(region).get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_parameter_not_found()) => Ok(None),
            Err(e) => Err(failed("GetParameter", region, e)),
        }
    }

    async fn delete_parameter(&self, region: &Region, name: &str) -> Result<(), ActionError> {
        match self.clients.get(region).delete_parameter().name(name).send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_parameter_not_found()) => Ok(()),
            Err(e) => Err(failed("DeleteParameter", region, e)),
        }
    }
}

#[async_trait]
impl Commands for Ssm {
    async fn send(&self, region: &Region, document: &str, instances: &[String], comment: &str) -> ActionResult<String> {
        let request = self.clients.get(region).send_command().document_name(document).comment(comment);
        let sent = request.set_instance_ids(Some(instances.to_vec())).send().await;
        let out = sent.map_err(|e| failed("SendCommand", region, e))?;
        out.command().and_then(|c| c.command_id()).map(str::to_string).ok_or_else(|| ActionError {
            operation: "SendCommand",
            region: region.to_string(),
            message: "no command id in the answer".into(),
        })
    }

    async fn sent(
        &self,
        region: &Region,
        document: &str,
        comment: &str,
        instance_ids: &[String],
    ) -> Result<Vec<SentCommand>, ActionError> {
        let client = self.clients.get(region);
        let mut found: Vec<SentCommand> = Vec::new();
        // ListCommands filters by one instance at a time; a block has at most 64.
        for instance in instance_ids {
            let mut pages = client.list_commands().instance_id(instance).into_paginator().send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| failed("ListCommands", region, e))?;
                for c in page.commands() {
                    if c.comment() != Some(comment) || c.document_name() != Some(document) {
                        continue;
                    }
                    let Some(id) = c.command_id() else { continue };
                    if !found.iter().any(|f| f.command_id == id) {
                        found.push(SentCommand { command_id: id.to_string(), instance_ids: c.instance_ids().to_vec() });
                    }
                }
            }
        }
        Ok(found)
    }

    async fn invocation(&self, region: &Region, command_id: &str, instance: &str) -> ActionResult<Invocation> {
        let client = self.clients.get(region);
        let asked = client.get_command_invocation().command_id(command_id).instance_id(instance).send().await;
        let out = asked.map_err(|e| failed("GetCommandInvocation", region, e))?;
        Ok(match out.status() {
            Some(CommandInvocationStatus::Success) => Invocation::Succeeded,
            Some(
                CommandInvocationStatus::Pending
                | CommandInvocationStatus::InProgress
                | CommandInvocationStatus::Delayed,
            )
            | None => Invocation::Running,
            Some(other) => Invocation::Failed(out.status_details().unwrap_or(other.as_str()).to_string()),
        })
    }
}
