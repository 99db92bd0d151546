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

/// Slack's escaping of its three control characters. Slack reads `<...>` as a link or a
/// mention (`<!channel>`) and `&` as the start of an entity, so every text placed in a message
/// is escaped here, once, where the JSON is built: values from EC2 and events (an error
/// message, an id) can never become markup. capblock's own texts use none of the three
/// characters, so its markdown (`*bold*`, `code`) passes unchanged.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

impl SlackMessage {
    /// The JSON body published to the alerts topic, every shown text escaped (`escape`).
    pub fn to_json(&self) -> String {
        let all = |texts: &[String]| texts.iter().map(|t| escape(t)).collect::<Vec<_>>();
        json!({
            "version": "1.0",
            "source": "custom",
            "id": self.id,
            "content": {
                "textType": "client-markdown",
                "title": escape(&self.title),
                "description": escape(&self.description),
                "nextSteps": all(&self.next_steps),
                "keywords": all(&self.keywords),
            },
            "metadata": {
                "threadId": self.thread_id,
                "summary": escape(&self.summary),
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

    #[test]
    fn every_shown_text_is_escaped_and_capblocks_markdown_is_not() {
        let hostile = "i-<!channel> <https://evil.example|click> & co";
        let m = SlackMessage {
            id: "cr-1#interruption".into(),
            title: format!("Instance interruption: {hostile}"),
            description: format!("*1 x p5.48xlarge* in `us-east-1`: EC2 said {hostile}"),
            next_steps: vec![hostile.into()],
            keywords: vec![hostile.into()],
            thread_id: "cr-1".into(),
            summary: hostile.into(),
            event_type: "instance-interruption".into(),
            related_resources: vec![],
        };
        let v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        let escaped = "i-&lt;!channel&gt; &lt;https://evil.example|click&gt; &amp; co";
        assert_eq!(v["content"]["title"], format!("Instance interruption: {escaped}"));
        assert_eq!(v["content"]["description"], format!("*1 x p5.48xlarge* in `us-east-1`: EC2 said {escaped}"));
        assert_eq!(v["content"]["nextSteps"][0], escaped);
        assert_eq!(v["content"]["keywords"][0], escaped);
        assert_eq!(v["metadata"]["summary"], escaped);
        let shown = [&v["content"], &v["metadata"]["summary"]].map(|x| x.to_string()).join("");
        assert!(!shown.contains('<') && !shown.contains('>'), "{shown}");
        assert_eq!(escape("&amp;"), "&amp;amp;", "escaped once, where the JSON is built");
    }
}
