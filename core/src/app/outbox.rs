//! Publishing stored notices exactly once (but for the one crash window no store can close:
//! after SNS accepted a message and before it was marked published).

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::domain::outbox_key::OutboxKey;
use crate::domain::slack::SlackMessage;
use crate::ports::{Message, Notice, Notifier, NotifyError, Outbox, StoreError, Topic};

/// How long one run may hold a notice before another run may publish it instead.
pub const LEASE: Duration = Duration::seconds(90);

/// How long a consumer's copy of an event (`bus_event::ACCOUNT_ATTRIBUTE`: for a member account's
/// bus) is retried before it is given up: an account without the member stack in this region,
/// or one that left the Organization, would otherwise fail every run for ever. The failures of
/// that day raise the publish alarm; capblock's own events are never given up.
pub const CONSUMER_COPY_RETRIES_FOR: Duration = Duration::hours(24);

/// Whether a notice whose publishing just failed is given up rather than retried.
pub fn gives_up(notice: &Notice, now: DateTime<Utc>) -> bool {
    notice.topic == Topic::Events
        && notice.message.attributes.contains_key(crate::domain::bus_event::ACCOUNT_ATTRIBUTE)
        && now - notice.created_at >= CONSUMER_COPY_RETRIES_FOR
}

/// A Slack notice for the alerts topic.
pub fn alert_notice(thread: &str, milestone: &OutboxKey, msg: &SlackMessage, now: DateTime<Utc>) -> Notice {
    Notice {
        thread: thread.to_string(),
        milestone: milestone.clone(),
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
    milestone: &OutboxKey,
    (body, attributes): (String, std::collections::BTreeMap<String, String>),
    now: DateTime<Utc>,
) -> Notice {
    Notice {
        thread: thread.to_string(),
        milestone: milestone.clone(),
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
                Err(e) if gives_up(notice, now) => {
                    // Out of the pending set, so no run puts it again.
                    outbox.mark_published(notice, now).await?;
                    tracing::warn!(event = "consumer_event_given_up", notice = %notice.id(), error = %e,
                        "a member account's bus refused this event for a day: given up (is the member stack deployed in this region?)");
                    report.failed += 1;
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::TimeZone;

    use super::*;

    fn notice(attributes: &[(&str, &str)], topic: Topic, created_at: DateTime<Utc>) -> Notice {
        let attributes: BTreeMap<String, String> =
            attributes.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Notice {
            thread: "cr-0123456789abcdef0".into(),
            milestone: crate::domain::outbox_key::OutboxKey::parse("delivered@events@111111111111").unwrap(),
            topic,
            message: Message { body: "{}".into(), attributes },
            created_at,
        }
    }

    #[test]
    fn only_a_consumers_copy_is_given_up_and_only_after_a_day() {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        let copy = notice(&[(crate::domain::bus_event::ACCOUNT_ATTRIBUTE, "111111111111")], Topic::Events, t0);
        assert!(!gives_up(&copy, t0 + Duration::hours(23)));
        assert!(gives_up(&copy, t0 + Duration::hours(24)));
        let own = notice(&[], Topic::Events, t0);
        assert!(!gives_up(&own, t0 + Duration::days(30)), "capblock's own bus: retried for ever");
        let alert = notice(&[(crate::domain::bus_event::ACCOUNT_ATTRIBUTE, "111111111111")], Topic::Alerts, t0);
        assert!(!gives_up(&alert, t0 + Duration::days(30)));
    }
}
