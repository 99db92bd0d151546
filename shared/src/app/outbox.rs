//! Publishing stored notices exactly once (but for the one crash window no store can close:
//! after SNS accepted a message and before it was marked published).

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::domain::slack::SlackMessage;
use crate::ports::{Message, Notice, Notifier, NotifyError, Outbox, StoreError, Topic};

/// How long one run may hold a notice before another run may publish it instead.
pub const LEASE: Duration = Duration::seconds(90);

/// A Slack notice for the alerts topic.
pub fn alert_notice(thread: &str, milestone: &str, msg: &SlackMessage, now: DateTime<Utc>) -> Notice {
    Notice {
        thread: thread.to_string(),
        milestone: milestone.to_string(),
        topic: Topic::Alerts,
        message: Message {
            body: msg.to_json(),
            attributes: [
                ("capblock_event".to_string(), msg.event_type.clone()),
                ("capblock_thread".to_string(), thread.to_string()),
            ]
            .into(),
        },
        created_at: now,
    }
}

/// A workload notice (a body and its attributes, from `domain::checkpoint`) for the workloads
/// topic, in the block's thread.
pub fn workload_notice(
    thread: &str,
    milestone: &str,
    (body, attributes): (String, std::collections::BTreeMap<String, String>),
    now: DateTime<Utc>,
) -> Notice {
    Notice {
        thread: thread.to_string(),
        milestone: milestone.to_string(),
        topic: Topic::Workloads,
        message: Message { body, attributes },
        created_at: now,
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct FlushReport {
    pub published: usize,
    pub failed: usize,
    pub held_elsewhere: usize,
}

/// Publishes every pending notice this run can lease, topic by topic (so capblock's events go
/// out in PutEvents batches). A failed publish stays pending for the next run: late rather than
/// lost. Actions are not messages: `app::handoff` runs them.
pub async fn flush<O: Outbox + ?Sized, N: Notifier + ?Sized>(
    outbox: &O,
    notifier: &N,
    now: DateTime<Utc>,
) -> Result<FlushReport, StoreError> {
    let mut report = FlushReport::default();
    let mut pending = outbox.pending().await?;
    pending.retain(|n| n.topic != Topic::Actions);
    pending.sort_by_key(|n| n.created_at);
    let mut leased: Vec<Notice> = Vec::with_capacity(pending.len());
    for notice in pending {
        if outbox.lease(&notice, now, now + LEASE).await? {
            leased.push(notice);
        } else {
            report.held_elsewhere += 1;
        }
    }
    for topic in [Topic::Alerts, Topic::Workloads, Topic::Events] {
        let notices: Vec<&Notice> = leased.iter().filter(|n| n.topic == topic).collect();
        if notices.is_empty() {
            continue;
        }
        let messages: Vec<Message> = notices.iter().map(|n| n.message.clone()).collect();
        let results = notifier.publish_all(topic, &messages).await;
        for (i, notice) in notices.into_iter().enumerate() {
            match results.get(i).cloned().unwrap_or_else(|| {
                Err(NotifyError::Failed { topic: format!("{topic:?}"), message: "no result for this message".into() })
            }) {
                Ok(()) => {
                    outbox.mark_published(notice, now).await?;
                    tracing::info!(event = "notice_published", notice = %notice.id(), "published");
                    report.published += 1;
                }
                Err(e) => {
                    tracing::warn!(event = "notice_publish_failed", notice = %notice.id(), error = %e, "will retry next run");
                    report.failed += 1;
                }
            }
        }
    }
    Ok(report)
}
