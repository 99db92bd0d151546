//! Slack messages, as the custom-notification JSON that Amazon Q Developer in chat
//! applications (formerly AWS Chatbot) renders from an SNS topic. Every human-facing message
//! of capblock is built here, so they all look alike and all carry a thread id.

use serde::Serialize;
use serde_json::json;

/// One custom notification. `thread_id` (the reservation id, or the intent id before there is
/// one) keeps each block's messages in one Slack thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlackMessage {
    pub id: String,
    pub title: String,
    pub description: String,
    pub next_steps: Vec<String>,
    pub keywords: Vec<String>,
    pub thread_id: String,
    pub summary: String,
    pub event_type: String,
    pub related_resources: Vec<String>,
}

impl SlackMessage {
    /// The JSON body published to the alerts topic.
    pub fn to_json(&self) -> String {
        json!({
            "version": "1.0",
            "source": "custom",
            "id": self.id,
            "content": {
                "textType": "client-markdown",
                "title": self.title,
                "description": self.description,
                "nextSteps": self.next_steps,
                "keywords": self.keywords,
            },
            "metadata": {
                "threadId": self.thread_id,
                "summary": self.summary,
                "eventType": self.event_type,
                "relatedResources": self.related_resources,
                "additionalContext": {},
            }
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_custom_notification_schema() {
        let m = SlackMessage {
            id: "cr-1#purchased".into(),
            title: "Bought".into(),
            description: "*1 x p5.48xlarge*".into(),
            next_steps: vec!["Wait".into()],
            keywords: vec!["capblock".into()],
            thread_id: "cr-1".into(),
            summary: "Bought".into(),
            event_type: "purchased".into(),
            related_resources: vec!["arn:aws:ec2:us-east-1:1:capacity-reservation/cr-1".into()],
        };
        let v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        assert_eq!(v["version"], "1.0");
        assert_eq!(v["source"], "custom");
        assert_eq!(v["content"]["textType"], "client-markdown");
        assert_eq!(v["content"]["nextSteps"][0], "Wait");
        assert_eq!(v["metadata"]["threadId"], "cr-1");
        assert!(v["metadata"]["additionalContext"].is_object());
    }
}
