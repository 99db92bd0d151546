//! Test support: a market simulator per test (in-process, on its own loopback port), a fresh
//! DynamoDB table and SNS topics per test on the shared moto server, and readers for what was
//! published. Tests reach moto through the standard `AWS_ENDPOINT_URL_*` variables that
//! `infra/local/stack.sh` exports; nothing here changes how the production code finds AWS.

pub mod emf;
pub mod fixtures;
pub mod runtime;

pub use fixtures::*;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use capblock_market_sim::scenario::Scenario;
use capblock_market_sim::server::{App, serve};
use capblock_market_sim::world::World;
use capblock_shared::aws::dynamo::{DynamoStore, create_table};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::eventbridge::Delivery;
use capblock_shared::aws::sns::SnsNotifier;
use serde_json::Value;
use tokio::net::TcpListener;

fn require_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests through `make test` (or `infra/local/stack.sh run -- cargo test`)")
    })
}

/// A running simulator; stops when dropped.
pub struct Sim {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sim {
    /// A simulator on `scenario_toml`. Like the local stack's, it tells a caller's account by
    /// asking moto's STS (`AWS_ENDPOINT_URL_STS`) about temporary keys, so a role assumed in a
    /// member account brings that account's own describe limit.
    pub async fn start(scenario_toml: &str) -> Sim {
        let scenario = Scenario::parse(scenario_toml).expect("test scenario parses");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let sts = std::env::var("AWS_ENDPOINT_URL_STS")
            .ok()
            .map(|e| capblock_market_sim::sts::Sts::new(&e).expect("AWS_ENDPOINT_URL_STS is an http:// URL"));
        let task = tokio::spawn(serve(listener, App::with_sts(World::new(scenario), sts)));
        Sim { url, task }
    }

    pub async fn control(&self, method: &str, path: &str, body: &str) -> Value {
        let (status, text) = http(method, &format!("{}{path}", self.url), body).await;
        assert!(status < 300, "sim {method} {path} -> {status}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }

    pub async fn state(&self) -> Value {
        self.control("GET", "/_sim/state", "").await
    }

    pub async fn purchases(&self) -> Vec<Value> {
        self.state().await["purchases"].as_array().cloned().unwrap_or_default()
    }

    /// Moves the simulator's clock forward.
    pub async fn advance_secs(&self, secs: i64) -> Value {
        self.control("POST", "/_sim/clock", &format!("{{\"advance_secs\": {secs}}}")).await
    }

    pub async fn advance_hours(&self, hours: i64) -> Value {
        self.advance_secs(hours * 3600).await
    }

    pub async fn behaviour(&self, json: &str) -> Value {
        self.control("POST", "/_sim/behaviour", json).await
    }

    /// The calls `hold_actions` keeps before EC2 receives them, by action.
    pub async fn held(&self) -> Value {
        self.control("GET", "/_sim/held", "").await["held"].clone()
    }

    /// Lets the held calls reach EC2 (`deliver`) or loses them in the network.
    pub async fn release(&self, deliver: bool) -> Value {
        self.control("POST", "/_sim/release", &format!("{{\"deliver\": {deliver}}}")).await
    }

    /// SDK configuration for this simulator: the shared test config with the EC2 endpoint here.
    pub async fn sdk(&self, timeouts: aws_config::timeout::TimeoutConfig) -> SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&self.url)
            .timeout_config(timeouts)
            .load()
            .await
    }

    pub async fn market(&self) -> Ec2Market {
        Ec2Market::new(self.sdk(quick_timeouts()).await)
    }
}

/// Client timeouts: to connect, for each attempt, and for the whole operation with its retries.
pub fn timeouts(connect: Duration, attempt: Duration, operation: Duration) -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(connect)
        .operation_attempt_timeout(attempt)
        .operation_timeout(operation)
        .build()
}

/// The tests' client timeouts: a safety net, never the thing a test waits on. Every simulated
/// hang (`timeout_secs`, a lost call, a dropped answer) ends with the simulator closing the
/// connection, so a hang costs a test its `timeout_secs` whatever the client's timeouts are. They
/// are generous because a slow or busy machine must not turn a slow answer into a failed region
/// (a 1.5 s attempt once did, on the 2-core CI machine with the suite running four at a time).
pub fn quick_timeouts() -> aws_config::timeout::TimeoutConfig {
    timeouts(Duration::from_secs(10), Duration::from_secs(10), Duration::from_secs(20))
}

/// One request to a control endpoint (the simulator's `/_sim/...`, the SQS taps' URLs).
pub async fn http(method: &str, url: &str, body: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let (status, body) = capblock_http1::request(host, method, &path, body.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Creates SQS queue `name` on moto; returns its URL and ARN.
pub async fn queue(sdk: &SdkConfig, name: &str) -> (String, String) {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let url = sqs.create_queue().queue_name(name).send().await.unwrap().queue_url.unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    (url, arn)
}

/// Creates EventBridge bus `name` on moto with the rule of docs/handoff.md: every event of source
/// `capblock` to a new SQS queue of the same name; returns the queue's URL.
pub async fn bus_with_queue(sdk: &SdkConfig, name: &str) -> String {
    let eb = aws_sdk_eventbridge::Client::new(sdk);
    eb.create_event_bus().name(name).send().await.unwrap();
    let (url, arn) = queue(sdk, name).await;
    let rule = format!("{name}-all");
    eb.put_rule().name(&rule).event_bus_name(name).event_pattern(r#"{"source": ["capblock"]}"#).send().await.unwrap();
    eb.put_targets()
        .rule(&rule)
        .event_bus_name(name)
        .targets(aws_sdk_eventbridge::types::Target::builder().id("queue").arn(arn).build().unwrap())
        .send()
        .await
        .unwrap();
    url
}

/// Creates Auto Scaling group `name` (0 to 4 instances, none wanted) in `region` on moto.
pub async fn auto_scaling_group(sdk: &SdkConfig, region: &str, name: &str) {
    auto_scaling_group_in(sdk, region, name, &format!("{region}a")).await;
}

/// As [`auto_scaling_group`], launching in Availability Zone `zone` only.
pub async fn auto_scaling_group_in(sdk: &SdkConfig, region: &str, name: &str, zone: &str) {
    let asg = aws_sdk_autoscaling::Client::from_conf(
        aws_sdk_autoscaling::config::Builder::from(sdk)
            .region(aws_sdk_autoscaling::config::Region::new(region.to_string()))
            .build(),
    );
    asg.create_launch_configuration()
        .launch_configuration_name(name)
        .image_id("ami-12c6146b")
        .instance_type("p5.48xlarge")
        .send()
        .await
        .unwrap();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name(name)
        .launch_configuration_name(name)
        .min_size(0)
        .max_size(4)
        .desired_capacity(0)
        .availability_zones(zone)
        .send()
        .await
        .unwrap();
}

/// The EKS client of `region` on moto.
fn eks_in(sdk: &SdkConfig, region: &str) -> aws_sdk_eks::Client {
    aws_sdk_eks::Client::from_conf(
        aws_sdk_eks::config::Builder::from(sdk).region(aws_sdk_eks::config::Region::new(region.to_string())).build(),
    )
}

/// Creates EKS cluster `cluster` in `region` on moto with managed node group `nodegroup` of
/// `(min, max, desired)` nodes.
pub async fn eks_nodegroup(sdk: &SdkConfig, region: &str, cluster: &str, nodegroup: &str, size: (i32, i32, i32)) {
    let eks = eks_in(sdk, region);
    let role = |name: &str| format!("arn:aws:iam::123456789012:role/{name}");
    eks.create_cluster()
        .name(cluster)
        .role_arn(role("eks-cluster"))
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder().subnet_ids("subnet-0aaaaaaaaaaaaaaa1").build(),
        )
        .send()
        .await
        .unwrap();
    let (min, max, desired) = size;
    eks.create_nodegroup()
        .cluster_name(cluster)
        .nodegroup_name(nodegroup)
        .node_role(role("eks-nodes"))
        .subnets("subnet-0aaaaaaaaaaaaaaa1")
        .instance_types("p5.48xlarge")
        .capacity_type(aws_sdk_eks::types::CapacityTypes::CapacityBlock)
        .scaling_config(
            aws_sdk_eks::types::NodegroupScalingConfig::builder()
                .min_size(min)
                .max_size(max)
                .desired_size(desired)
                .build(),
        )
        .send()
        .await
        .unwrap();
}

/// The `(min, max, desired)` sizes of node group `nodegroup` of `cluster` in `region`, as
/// DescribeNodegroup answers on moto.
pub async fn nodegroup_size(sdk: &SdkConfig, region: &str, cluster: &str, nodegroup: &str) -> (i32, i32, i32) {
    let out = eks_in(sdk, region).describe_nodegroup().cluster_name(cluster).nodegroup_name(nodegroup).send().await;
    let c = out.unwrap().nodegroup().and_then(|n| n.scaling_config()).cloned().expect("a scaling configuration");
    (c.min_size().unwrap(), c.max_size().unwrap(), c.desired_size().unwrap())
}

/// Creates SQS queue `name` on moto and subscribes it to SNS `topic` (with `filter_policy`, a
/// JSON filter policy, when given); returns the queue's URL.
pub async fn sqs_tap(sdk: &SdkConfig, topic: &str, name: &str, filter_policy: Option<String>) -> String {
    let (url, arn) = queue(sdk, name).await;
    aws_sdk_sns::Client::new(sdk)
        .subscribe()
        .topic_arn(topic)
        .protocol("sqs")
        .endpoint(arn)
        .set_attributes(filter_policy.map(|p| [("FilterPolicy".to_string(), p)].into()))
        .send()
        .await
        .unwrap();
    url
}

/// moto-backed resources private to one test.
pub struct Aws {
    pub sdk: SdkConfig,
    pub table: String,
    pub alerts_topic: String,
    pub workloads_topic: String,
    pub alerts_queue: String,
    pub workloads_queue: String,
    /// capblock's events: the test's own bus, and the queue a rule routes them to.
    pub events_bus: String,
    pub events_queue: String,
}

impl Aws {
    /// A fresh table, two topics and an SQS tap on each topic, named after the test.
    pub async fn fresh(name: &str) -> Aws {
        require_env("AWS_ENDPOINT_URL_DYNAMODB");
        require_env("AWS_ENDPOINT_URL_SNS");
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        let id = format!("{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let table = format!("capblock-test-{id}");
        let ddb = aws_sdk_dynamodb::Client::new(&sdk);
        create_table(&ddb, &table).await.expect("create table on moto");
        let sns = aws_sdk_sns::Client::new(&sdk);
        let mut topics = Vec::new();
        let mut queues = Vec::new();
        for kind in ["alerts", "workloads"] {
            let topic = sns.create_topic().name(format!("{kind}-{id}")).send().await.unwrap().topic_arn.unwrap();
            queues.push(sqs_tap(&sdk, &topic, &format!("{kind}-{id}"), None).await);
            topics.push(topic);
        }
        let events_bus = format!("events-{id}");
        let events_queue = bus_with_queue(&sdk, &events_bus).await;
        Aws {
            sdk,
            table,
            events_bus,
            events_queue,
            alerts_topic: topics[0].clone(),
            workloads_topic: topics[1].clone(),
            alerts_queue: queues[0].clone(),
            workloads_queue: queues[1].clone(),
        }
    }

    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(aws_sdk_dynamodb::Client::new(&self.sdk), &self.table)
    }

    /// A CloudFormation stack on moto that stands for this test's deployment: its `TableName`
    /// output is the test's table and its parameters are `Mode`, `AccountMonthlyBudget` and
    /// `TeamBudgets` as given (the CLI buys only when the table's stored settings say the same).
    /// Returns the stack's name, for `--stack` or `CAPBLOCK_STACK_NAME`.
    pub async fn deployed_stack(&self, mode: &str, cap: &str, teams: &str) -> String {
        let name = format!("capblock-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let template = serde_json::json!({
            "Parameters": {
                "Mode": {"Type": "String", "Default": "dry-run"},
                "AccountMonthlyBudget": {"Type": "String", "Default": "0"},
                "TeamBudgets": {"Type": "String", "Default": ""},
            },
            "Resources": {"Alerts": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {"TableName": {"Value": self.table.as_str()}},
        });
        let param = |k: &str, v: &str| {
            aws_sdk_cloudformation::types::Parameter::builder().parameter_key(k).parameter_value(v).build()
        };
        aws_sdk_cloudformation::Client::new(&self.sdk)
            .create_stack()
            .stack_name(&name)
            .template_body(template.to_string())
            .parameters(param("Mode", mode))
            .parameters(param("AccountMonthlyBudget", cap))
            .parameters(param("TeamBudgets", teams))
            .send()
            .await
            .expect("create a CloudFormation stack on moto");
        name
    }

    /// The functions' notifier on this test's topics and bus.
    pub fn notifier(&self) -> Delivery {
        Delivery::new(&self.sdk, self.sns(), self.events_bus.clone())
    }

    /// The SNS side alone: capblock's events stay pending with it.
    pub fn sns(&self) -> SnsNotifier {
        SnsNotifier::new(
            aws_sdk_sns::Client::new(&self.sdk),
            self.alerts_topic.clone(),
            Some(self.workloads_topic.clone()),
        )
    }

    /// Every capblock event put on this test's bus so far (whole EventBridge events, drained),
    /// each checked against its JSON Schema.
    pub async fn events(&self) -> Vec<Value> {
        let sqs = aws_sdk_sqs::Client::new(&self.sdk);
        let mut out = Vec::new();
        loop {
            let r =
                sqs.receive_message().queue_url(&self.events_queue).max_number_of_messages(10).send().await.unwrap();
            let msgs = r.messages.unwrap_or_default();
            if msgs.is_empty() {
                break;
            }
            for m in msgs {
                out.push(serde_json::from_str(m.body().unwrap()).unwrap());
                let handle = m.receipt_handle().unwrap();
                sqs.delete_message().queue_url(&self.events_queue).receipt_handle(handle).send().await.unwrap();
            }
        }
        validate_events(&out).await;
        out
    }

    /// Every message published to a topic so far, read from its SQS tap (drained).
    pub async fn drain(&self, queue: &str) -> Vec<Published> {
        let sqs = aws_sdk_sqs::Client::new(&self.sdk);
        let mut out = Vec::new();
        loop {
            let r = sqs.receive_message().queue_url(queue).max_number_of_messages(10).send().await.unwrap();
            let msgs = r.messages.unwrap_or_default();
            if msgs.is_empty() {
                break;
            }
            for m in msgs {
                let envelope: Value = serde_json::from_str(m.body().unwrap()).unwrap();
                let body: Value = serde_json::from_str(envelope["Message"].as_str().unwrap())
                    .unwrap_or_else(|_| Value::String(envelope["Message"].as_str().unwrap().to_string()));
                let attributes = envelope["MessageAttributes"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v["Value"].as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Published { body, attributes });
                sqs.delete_message().queue_url(queue).receipt_handle(m.receipt_handle().unwrap()).send().await.unwrap();
            }
        }
        out
    }

    pub async fn alerts(&self) -> Vec<Published> {
        self.drain(&self.alerts_queue).await
    }

    pub async fn workload_notices(&self) -> Vec<Published> {
        self.drain(&self.workloads_queue).await
    }
}

/// Checks every event against its JSON Schema with `infra/local/validate_events.py` (jsonschema,
/// Draft 2020-12) in the local stack's Python: the schemas are the contract, not this code.
pub async fn validate_events(events: &[Value]) {
    use tokio::io::AsyncWriteExt;
    if events.is_empty() {
        return;
    }
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cache = std::env::var("CAPBLOCK_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/capblock", std::env::var("HOME").unwrap_or_default()));
    let mut child = tokio::process::Command::new(format!("{cache}/venv/bin/python"))
        .arg(repo.join("infra/local/validate_events.py"))
        .arg(repo.join("core/schemas/events"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the local stack's venv python");
    let input: String = events.iter().map(|e| format!("{e}\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "events do not validate against their schemas:\n{text}");
    assert_eq!(text.lines().filter(|l| l.ends_with(": valid")).count(), events.len(), "{text}");
}

/// The detail-types of `events`, in order.
pub fn detail_types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["detail-type"].as_str().unwrap_or_default().to_string()).collect()
}

#[derive(Debug, Clone)]
pub struct Published {
    pub body: Value,
    pub attributes: BTreeMap<String, String>,
}

/// Checks a message against the custom-notification schema Amazon Q Developer renders.
pub fn assert_slack_schema(m: &Value) {
    assert_eq!(m["version"], "1.0", "{m}");
    assert_eq!(m["source"], "custom", "{m}");
    assert!(m["id"].as_str().is_some_and(|s| !s.is_empty()), "{m}");
    let c = &m["content"];
    assert_eq!(c["textType"], "client-markdown", "{m}");
    assert!(c["title"].as_str().is_some_and(|s| !s.is_empty()), "{m}");
    assert!(c["description"].as_str().is_some_and(|s| !s.is_empty()), "{m}");
    assert!(c["nextSteps"].is_array() && c["keywords"].is_array(), "{m}");
    let md = &m["metadata"];
    assert!(md["threadId"].as_str().is_some_and(|s| !s.is_empty()), "{m}");
    assert!(md["summary"].is_string() && md["eventType"].is_string(), "{m}");
    assert!(md["relatedResources"].is_array() && md["additionalContext"].is_object(), "{m}");
}

pub type SharedSim = Arc<Sim>;
