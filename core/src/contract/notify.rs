//! The topics' contract (the `Notifier` port on SNS's alerts and workloads topics): what a
//! subscriber receives of a publish, and the publishes SNS refuses (a topic deleted, an
//! attribute without a value, a message over 256 KiB), held against the in-memory notifier
//! (`crate::memory::MemoryNotifier`) and the SNS adapter on moto alike.
//!
//! Each case takes a fresh notifier on two fresh topics, each with one subscriber, and a
//! [`Subscribers`] that reads what they received. To add one: write `async fn the_promise<N:
//! Notifier, S: Subscribers>(n: &N, s: &S)` and name it in `notify_contract_cases!`: both runners
//! (the core's `on_memory!` below and `contract!` in `tests/tests/integration/topics.rs`) expand
//! that one list.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::ports::{MAX_MESSAGE_BYTES, Message, Notifier, NotifyError, Topic};

/// The topics' subscribers, and what a case does to the topics besides publishing.
#[async_trait]
pub trait Subscribers: Send + Sync {
    /// Every message `topic`'s subscriber has received so far, in the order they arrived.
    async fn received(&self, topic: Topic) -> Vec<Message>;
    /// Deletes `topic` (an operator removing it from the stack by hand).
    async fn delete_topic(&self, topic: Topic);
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        /// Every case, by name.
        pub const CASES: &[&str] = &[$(stringify!($name)),*];

        /// Runs case `name` on `notifier` (on fresh topics), read by `subscribers`.
        pub async fn run<N: Notifier, S: Subscribers>(name: &str, notifier: &N, subscribers: &S) {
            match name {
                $(stringify!($name) => $name(notifier, subscribers).await,)*
                _ => panic!("no notify contract case {name}"),
            }
        }
    };
}

/// Calls macro `$runner` with the name of every case, in order: the one list of cases.
#[macro_export]
macro_rules! notify_contract_cases {
    ($runner:ident) => {
        $runner!(
            a_subscriber_receives_the_body_and_attributes_published,
            each_message_reaches_its_own_topic_once,
            a_publish_to_a_deleted_topic_fails_and_reaches_no_one,
            an_attribute_without_a_value_is_refused,
            a_message_over_256_kib_is_refused,
        );
    };
}

notify_contract_cases!(cases);

fn message(body: &str, attributes: &[(&str, &str)]) -> Message {
    Message {
        body: body.into(),
        attributes: attributes.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }
}

fn sorted(mut messages: Vec<Message>) -> Vec<Message> {
    messages.sort_by(|a, b| a.body.cmp(&b.body));
    messages
}

async fn a_subscriber_receives_the_body_and_attributes_published<N: Notifier, S: Subscribers>(n: &N, s: &S) {
    // Slack's JSON, non-ASCII text included, with the attributes a subscription filters on.
    let m = message(
        r#"{"version":"1.0","source":"custom","content":{"title":"Bloc « p5 » acheté : 576,00 $"}}"#,
        &[("kind", "purchased"), ("rule", "east"), ("severity", "info")],
    );
    n.publish(Topic::Alerts, &m).await.unwrap();
    assert_eq!(s.received(Topic::Alerts).await, vec![m]);
    assert_eq!(s.received(Topic::Workloads).await, vec![], "another topic's subscriber hears nothing");
}

async fn each_message_reaches_its_own_topic_once<N: Notifier, S: Subscribers>(n: &N, s: &S) {
    // SNS promises no order to a standard queue: the set is the promise, each message once.
    let alerts: Vec<Message> = (1..=3).map(|i| message(&format!("alert {i}"), &[("n", &i.to_string())])).collect();
    let notices = vec![message("{\"block\":\"cr-1\",\"event\":\"ending\"}", &[])];
    assert!(n.publish_all(Topic::Alerts, &alerts).await.iter().all(Result::is_ok));
    n.publish(Topic::Workloads, &notices[0]).await.unwrap();
    assert_eq!(sorted(s.received(Topic::Alerts).await), alerts);
    assert_eq!(s.received(Topic::Workloads).await, notices);
}

async fn a_publish_to_a_deleted_topic_fails_and_reaches_no_one<N: Notifier, S: Subscribers>(n: &N, s: &S) {
    s.delete_topic(Topic::Alerts).await;
    let e = n.publish(Topic::Alerts, &message("lost?", &[])).await.unwrap_err();
    assert!(matches!(&e, NotifyError::Failed { .. }), "{e}");
    assert_eq!(s.received(Topic::Alerts).await, vec![]);
    // The other topic still publishes.
    n.publish(Topic::Workloads, &message("still here", &[])).await.unwrap();
    assert_eq!(s.received(Topic::Workloads).await.len(), 1);
}

async fn an_attribute_without_a_value_is_refused<N: Notifier, S: Subscribers>(n: &N, s: &S) {
    // SNS refuses a String attribute whose value is empty: the whole message is not sent.
    let e = n.publish(Topic::Alerts, &message("with an empty attribute", &[("rule", "")])).await.unwrap_err();
    assert!(matches!(&e, NotifyError::Failed { .. }), "{e}");
    assert_eq!(s.received(Topic::Alerts).await, vec![]);
}

async fn a_message_over_256_kib_is_refused<N: Notifier, S: Subscribers>(n: &N, s: &S) {
    let at_limit = message(&"x".repeat(MAX_MESSAGE_BYTES), &[]);
    n.publish(Topic::Workloads, &at_limit).await.unwrap();
    let over = message(&"x".repeat(MAX_MESSAGE_BYTES + 1), &[]);
    let e = n.publish(Topic::Workloads, &over).await.unwrap_err();
    assert!(matches!(&e, NotifyError::Failed { .. }), "{e}");
    // Only the one at the limit may have reached the subscriber (a queue may refuse even that
    // once SNS wrapped it in its envelope: SNS promises the publish, not the queue's limit).
    let got = s.received(Topic::Workloads).await;
    assert!(got.iter().all(|m| m.body.len() <= MAX_MESSAGE_BYTES), "{} received", got.len());
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::Subscribers;
    use crate::memory::MemoryNotifier;
    use crate::ports::{Message, Topic};

    struct OnMemory(MemoryNotifier);

    #[async_trait]
    impl Subscribers for OnMemory {
        async fn received(&self, topic: Topic) -> Vec<Message> {
            self.0.published().into_iter().filter(|(t, _)| *t == topic).map(|(_, m)| m).collect()
        }
        async fn delete_topic(&self, topic: Topic) {
            self.0.delete_topic(topic);
        }
    }

    macro_rules! on_memory {
        ($($name:ident),* $(,)?) => {
            $(
                #[tokio::test]
                async fn $name() {
                    let s = OnMemory(MemoryNotifier::default());
                    super::run(stringify!($name), &s.0, &s).await;
                }
            )*
        };
    }

    crate::notify_contract_cases!(on_memory);
}
