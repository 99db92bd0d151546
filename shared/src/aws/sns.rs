//! The SNS notifier: alerts (Slack through Amazon Q Developer) and workload notices.

use async_trait::async_trait;
use aws_sdk_sns::Client;
use aws_sdk_sns::error::DisplayErrorContext;
use aws_sdk_sns::types::MessageAttributeValue;

use crate::ports::{Message, Notifier, NotifyError, Topic};

/// The IAM actions each port of this adapter needs: a function's role allows exactly those of
/// the ports it declares in `AWS_PORTS`. infra/deploy/crosscheck checks that every SDK call here
/// has its action in this table and that nothing in it is uncalled (ARCHITECTURE.md, "Where a
/// change goes": a new AWS call).
pub const ACTIONS: &[(&str, &[&str])] =
    &[("Notifier", &["sns:Publish"]), ("Subscriptions", &["sns:ListSubscriptionsByTopic"])];

pub struct SnsNotifier {
    client: Client,
    alerts_topic_arn: String,
    workloads_topic_arn: Option<String>,
}

impl SnsNotifier {
    pub fn new(client: Client, alerts_topic_arn: String, workloads_topic_arn: Option<String>) -> Self {
        SnsNotifier { client, alerts_topic_arn, workloads_topic_arn }
    }
}

#[async_trait]
impl Notifier for SnsNotifier {
    async fn publish(&self, topic: Topic, message: &Message) -> Result<(), NotifyError> {
        let arn = match topic {
            Topic::Alerts => self.alerts_topic_arn.as_str(),
            Topic::Workloads => self.workloads_topic_arn.as_deref().ok_or_else(|| NotifyError::Failed {
                topic: "workloads".into(),
                message: "no workloads topic is configured for this function".into(),
            })?,
            // Events go to EventBridge (`aws::eventbridge::Delivery`) and actions are run, not
            // published: a notifier without a bus leaves them pending for one that has one.
            Topic::Events | Topic::Actions => {
                return Err(NotifyError::Failed {
                    topic: format!("{topic:?}"),
                    message: "this notifier publishes to SNS only".into(),
                });
            }
        };
        let mut req = self.client.publish().topic_arn(arn).message(&message.body);
        for (k, v) in &message.attributes {
            req = req.message_attributes(
                k,
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(v)
                    .build()
                    .map_err(|e| NotifyError::Failed { topic: arn.to_string(), message: e.to_string() })?,
            );
        }
        req.send().await.map_err(|e| NotifyError::Failed {
            topic: arn.to_string(),
            message: DisplayErrorContext(&e).to_string(),
        })?;
        Ok(())
    }
}

#[async_trait]
impl crate::ports::Subscriptions for SnsNotifier {
    async fn confirmed_subscriptions(&self, topic_arn: &str) -> Result<usize, NotifyError> {
        let subs = self
            .client
            .list_subscriptions_by_topic()
            .topic_arn(topic_arn)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| NotifyError::Failed {
                topic: topic_arn.to_string(),
                message: DisplayErrorContext(&e).to_string(),
            })?;
        // A subscription waiting for its confirmation has no ARN yet ("PendingConfirmation").
        Ok(subs.iter().filter(|s| s.subscription_arn().is_some_and(|a| a.starts_with("arn:"))).count())
    }
}
