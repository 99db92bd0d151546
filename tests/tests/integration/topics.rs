//! The topics' and the page bucket's contracts (`capblock_core::contract::notify`,
//! `capblock_core::contract::page`) on the SNS and S3 adapters over moto: each case on fresh
//! topics, each with an SQS queue subscribed, or on a fresh bucket (the same cases run on the
//! in-memory notifier and bucket in the core's unit tests).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use aws_config::SdkConfig;
use capblock_core::contract::{notify, page};
use capblock_shared::aws::s3::S3Pages;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::ports::{Message, Topic};
use capblock_tests::sqs_tap;
use serde_json::Value;

/// Two fresh topics on moto, each with a queue subscribed: what the queues received so far.
struct OnSns {
    sdk: SdkConfig,
    topics: BTreeMap<&'static str, (String, String)>,
    received: Mutex<Vec<(String, Message)>>,
}

fn kind(topic: Topic) -> &'static str {
    match topic {
        Topic::Alerts => "alerts",
        Topic::Workloads => "workloads",
        other => panic!("not an SNS topic: {other:?}"),
    }
}

impl OnSns {
    async fn fresh(name: &str) -> (OnSns, SnsNotifier) {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        let sns = aws_sdk_sns::Client::new(&sdk);
        let id = format!("{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let mut topics = BTreeMap::new();
        for kind in ["alerts", "workloads"] {
            let arn = sns.create_topic().name(format!("{kind}-{id}")).send().await.unwrap().topic_arn.unwrap();
            let queue = sqs_tap(&sdk, &arn, &format!("{kind}-{id}"), None).await;
            topics.insert(kind, (arn, queue));
        }
        let notifier = SnsNotifier::new(sns, topics["alerts"].0.clone(), Some(topics["workloads"].0.clone()));
        (OnSns { sdk, topics, received: Mutex::default() }, notifier)
    }

    /// Moves what `queue` holds now into `received`: SNS's envelope read as a subscriber reads
    /// it, the message and its String attributes.
    async fn drain(&self, queue: &str) {
        let sqs = aws_sdk_sqs::Client::new(&self.sdk);
        loop {
            let r = sqs.receive_message().queue_url(queue).max_number_of_messages(10).send().await.unwrap();
            let msgs = r.messages.unwrap_or_default();
            if msgs.is_empty() {
                return;
            }
            for m in msgs {
                let envelope: Value = serde_json::from_str(m.body().unwrap()).unwrap();
                let attributes = envelope["MessageAttributes"].as_object().map_or_else(BTreeMap::new, |a| {
                    a.iter().map(|(k, v)| (k.clone(), v["Value"].as_str().unwrap_or_default().to_string())).collect()
                });
                let body = envelope["Message"].as_str().expect("a message").to_string();
                self.received.lock().unwrap().push((queue.to_string(), Message { body, attributes }));
                sqs.delete_message().queue_url(queue).receipt_handle(m.receipt_handle().unwrap()).send().await.unwrap();
            }
        }
    }
}

#[async_trait]
impl notify::Subscribers for OnSns {
    async fn received(&self, topic: Topic) -> Vec<Message> {
        let queue = &self.topics[kind(topic)].1;
        self.drain(queue).await;
        self.received.lock().unwrap().iter().filter(|(q, _)| q == queue).map(|(_, m)| m.clone()).collect()
    }
    async fn delete_topic(&self, topic: Topic) {
        let arn = &self.topics[kind(topic)].0;
        aws_sdk_sns::Client::new(&self.sdk).delete_topic().topic_arn(arn).send().await.unwrap();
    }
}

macro_rules! sns_contract {
    ($($name:ident),* $(,)?) => {
        mod sns {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let (subscribers, notifier) = OnSns::fresh("contract").await;
                    notify::run(stringify!($name), &notifier, &subscribers).await;
                }
            )*
        }
    };
}

capblock_core::notify_contract_cases!(sns_contract);

/// A fresh bucket on moto, read with GetObject.
struct OnS3 {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl OnS3 {
    async fn fresh() -> (OnS3, S3Pages) {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        let bucket = format!("capblock-contract-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let client = aws_sdk_s3::Client::new(&sdk);
        client.create_bucket().bucket(&bucket).send().await.expect("create bucket on moto");
        let pages = S3Pages::new(&sdk, &bucket);
        (OnS3 { client, bucket }, pages)
    }
}

#[async_trait]
impl page::Readers for OnS3 {
    async fn read(&self, key: &str) -> Option<String> {
        let out = self.client.get_object().bucket(&self.bucket).key(key).send().await.ok()?;
        let body = out.body.collect().await.expect("read the object").into_bytes();
        Some(String::from_utf8(body.to_vec()).expect("UTF-8"))
    }
    async fn delete_bucket(&self) {
        let listed = self.client.list_objects_v2().bucket(&self.bucket).send().await.unwrap();
        for o in listed.contents() {
            self.client.delete_object().bucket(&self.bucket).key(o.key().unwrap()).send().await.unwrap();
        }
        self.client.delete_bucket().bucket(&self.bucket).send().await.unwrap();
    }
}

macro_rules! s3_contract {
    ($($name:ident),* $(,)?) => {
        mod s3 {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let (readers, pages) = OnS3::fresh().await;
                    page::run(stringify!($name), &pages, &readers).await;
                }
            )*
        }
    };
}

capblock_core::page_contract_cases!(s3_contract);
