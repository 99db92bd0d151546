//! capblock's events on EventBridge (PutEvents), and the notifier that routes the outbox's
//! event notices there and the rest to SNS.

use async_trait::async_trait;
use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::error::DisplayErrorContext;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::sns::SnsNotifier;
use crate::domain::bus_event::{
    self, ACCOUNT_ATTRIBUTE, BusEntry, DETAIL_TYPE_ATTRIBUTE, DetailType, RESOURCE_ATTRIBUTE, TIME_ATTRIBUTE,
};
use crate::ports::{EventBus, Message, Notifier, NotifyError, Topic};

/// The IAM actions each port implemented here calls (the cross-check compares them with the
/// SDK calls below and with the roles of the functions that use the port).
pub const ACTIONS: &[(&str, &[&str])] = &[("EventBus", &["events:PutEvents"])];

pub struct EventBridgeBus {
    client: Client,
    /// A name or ARN; "default" is the account's default bus.
    bus: String,
}

/// The default bus of member `account` in `region` (its member stack's bus policy lets this
/// stack's roles put capblock's events there).
pub fn member_bus_arn(region: Option<&str>, account: &str) -> String {
    let partition = super::accounts::partition(region);
    format!("arn:{partition}:events:{}:{account}:event-bus/default", region.unwrap_or("us-east-1"))
}

impl EventBridgeBus {
    pub fn new(client: Client, bus: String) -> Self {
        EventBridgeBus { client, bus }
    }

    fn failed(&self, message: String) -> NotifyError {
        NotifyError::Failed { topic: format!("event bus {}", self.bus), message }
    }
}

#[async_trait]
impl EventBus for EventBridgeBus {
    async fn put(&self, entries: &[BusEntry]) -> Vec<Result<(), NotifyError>> {
        let mut out = Vec::with_capacity(entries.len());
        let region = self.client.config().region().map(|r| r.as_ref().to_string());
        for call in bus_event::calls(entries) {
            // A consumer's copy goes to that account's default bus in this region.
            let buses: Vec<String> = call
                .iter()
                .map(|e| e.account().map_or_else(|| self.bus.clone(), |a| member_bus_arn(region.as_deref(), a)))
                .collect();
            let request: Vec<PutEventsRequestEntry> = call
                .iter()
                .zip(&buses)
                .map(|(e, bus)| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(bus)
                        .source(bus_event::SOURCE)
                        .detail_type(e.detail_type().as_str())
                        .detail(e.detail())
                        .set_resources(Some(e.resources().to_vec()))
                        .set_time(e.time().map(|t| aws_smithy_types::DateTime::from_secs(t.timestamp())))
                        .build()
                })
                .collect();
            let failed =
                |i: usize, message: String| NotifyError::Failed { topic: format!("event bus {}", buses[i]), message };
            match self.client.put_events().set_entries(Some(request)).send().await {
                Ok(answer) => {
                    let results = answer.entries();
                    for i in 0..call.len() {
                        out.push(match results.get(i) {
                            Some(r) if r.error_code().is_some() || r.event_id().is_none() => Err(failed(
                                i,
                                format!(
                                    "{}: {}",
                                    r.error_code().unwrap_or("no event id"),
                                    r.error_message().unwrap_or("")
                                ),
                            )),
                            Some(_) => Ok(()),
                            None => Err(failed(i, "PutEvents answered fewer entries than it was sent".into())),
                        });
                    }
                }
                Err(e) => {
                    let why = DisplayErrorContext(&e).to_string();
                    out.extend((0..call.len()).map(|i| Err(failed(i, why.clone()))));
                }
            }
        }
        out
    }
}

/// The entry of an event notice: its detail-type and resource are attributes, its body the
/// detail. An entry that cannot be made (over 256 KB, or a notice not made by `app::outbox`)
/// will never be accepted: the error says so, and the notice stays pending and logged.
pub fn entry_of(message: &Message) -> Result<BusEntry, NotifyError> {
    let bad = |why: String| NotifyError::Failed { topic: "event bus".into(), message: why };
    let name = message.attributes.get(DETAIL_TYPE_ATTRIBUTE).ok_or_else(|| bad("no detail-type".into()))?;
    let detail_type = DetailType::parse(name).ok_or_else(|| bad(format!("unknown detail-type {name:?}")))?;
    let resources = message.attributes.get(RESOURCE_ATTRIBUTE).cloned().into_iter().collect();
    let mut entry = BusEntry::new(detail_type, message.body.clone(), resources).map_err(|e| bad(e.to_string()))?;
    if let Some(account) = message.attributes.get(ACCOUNT_ATTRIBUTE) {
        entry = entry.for_account(account);
    }
    // A notice queued before events carried their time goes without one (EventBridge stamps it).
    Ok(match message.attributes.get(TIME_ATTRIBUTE).and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
        Some(t) => entry.at(t.with_timezone(&chrono::Utc)),
        None => entry,
    })
}

/// The functions' notifier: alerts and workload notices to SNS, capblock's events to the bus.
pub struct Delivery {
    pub sns: SnsNotifier,
    pub bus: EventBridgeBus,
}

impl Delivery {
    /// `sns` for the topics, and the bus `bus` (a name; see `config::targets`).
    pub fn new(sdk: &aws_config::SdkConfig, sns: SnsNotifier, bus: String) -> Delivery {
        Delivery { sns, bus: EventBridgeBus::new(Client::new(sdk), bus) }
    }
}

#[async_trait]
impl Notifier for Delivery {
    async fn publish(&self, topic: Topic, message: &Message) -> Result<(), NotifyError> {
        let mut results = self.publish_all(topic, std::slice::from_ref(message)).await;
        results.pop().unwrap_or(Ok(()))
    }

    async fn publish_all(&self, topic: Topic, messages: &[Message]) -> Vec<Result<(), NotifyError>> {
        if topic != Topic::Events {
            return self.sns.publish_all(topic, messages).await;
        }
        // Entries that cannot be made fail alone; the others go out in PutEvents-sized calls.
        let made: Vec<Result<BusEntry, NotifyError>> = messages.iter().map(entry_of).collect();
        let good: Vec<BusEntry> = made.iter().filter_map(|m| m.as_ref().ok().cloned()).collect();
        let mut put = self.bus.put(&good).await.into_iter();
        made.into_iter()
            .map(|m| match m {
                Ok(_) => put.next().unwrap_or_else(|| Err(self.bus.failed("no result for an entry".into()))),
                Err(e) => Err(e),
            })
            .collect()
    }
}
