//! The team page on the local stack: the S3 adapter on moto (the hour's claim is the store
//! contract's, `store.rs`; what any bucket promises, the page contract's, `topics.rs`), and the
//! `track-blocks` binary publishing the page of a block the `scan-offerings` binary bought, read
//! back from moto's S3 (path-style, as the SDK addresses an IP endpoint: `aws::s3`).

use std::time::Duration as StdDuration;

use capblock_shared::app::publish::PAGE_KEY;
use capblock_shared::aws::s3::{CACHE_CONTROL, CONTENT_TYPE, S3Pages};
use capblock_shared::ports::{PagePublisher, RuleStore};
use capblock_tests::runtime::{self, Outcome, binary};
use capblock_tests::{Aws, RuleToml, ScenarioToml, Sim, T0, binary_env, emf, t0};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

const STACK: &str = "capblock-page";

/// A fresh bucket on moto, named after the test (bucket names are global: one per run).
async fn bucket(aws: &Aws, name: &str) -> String {
    let bucket = format!("capblock-page-{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    aws_sdk_s3::Client::new(&aws.sdk).create_bucket().bucket(&bucket).send().await.expect("create bucket on moto");
    bucket
}

/// The object's body, content type and cache control as S3 serves them.
async fn object(aws: &Aws, bucket: &str, key: &str) -> (String, Option<String>, Option<String>) {
    let out =
        aws_sdk_s3::Client::new(&aws.sdk).get_object().bucket(bucket).key(key).send().await.expect("get the page");
    let (ct, cc) = (out.content_type().map(str::to_string), out.cache_control().map(str::to_string));
    let body = out.body.collect().await.expect("read the page").into_bytes();
    (String::from_utf8(body.to_vec()).expect("UTF-8"), ct, cc)
}

#[tokio::test]
async fn s3_pages_writes_html_that_browsers_revalidate_and_names_a_missing_bucket() {
    let aws = Aws::fresh("page-s3").await;
    let bucket = bucket(&aws, "s3").await;
    let pages = S3Pages::new(&aws.sdk, &bucket);
    let html = "<!doctype html><title>capblock</title><p>Bloc « p5 » à 3,00 $</p>";
    pages.publish(PAGE_KEY, html).await.unwrap();
    let (body, ct, cc) = object(&aws, &bucket, PAGE_KEY).await;
    assert_eq!(body, html);
    assert_eq!(ct.as_deref(), Some(CONTENT_TYPE));
    assert_eq!(cc.as_deref(), Some(CACHE_CONTROL));
    // Replaced whole by the next page.
    pages.publish(PAGE_KEY, "<!doctype html><p>next</p>").await.unwrap();
    assert_eq!(object(&aws, &bucket, PAGE_KEY).await.0, "<!doctype html><p>next</p>");

    let missing = S3Pages::new(&aws.sdk, format!("{bucket}-missing"));
    let e = missing.publish(PAGE_KEY, html).await.unwrap_err();
    assert_eq!(e.operation, "PutObject");
    assert_eq!(e.key, format!("s3://{bucket}-missing/{PAGE_KEY}"));
    assert!(e.message.contains("NoSuchBucket"), "{e}");
}

fn tick(t: DateTime<Utc>) -> Value {
    json!({"source": "capblock.schedule", "time": t.to_rfc3339()})
}

/// Runs `function` once per payload and stops it: each invocation's outcome and the EMF
/// documents it printed.
async fn run(function: &str, env: &[(String, String)], payloads: &[Value]) -> (Vec<Outcome>, Vec<Value>) {
    let api = runtime::start().await;
    let mut child = runtime::spawn_capturing_stdout(&api, &binary(function), env);
    let mut outcomes = Vec::new();
    for p in payloads {
        let id = api.invoke_bytes(p.to_string().into_bytes());
        outcomes.push(api.wait_outcome(&id, StdDuration::from_secs(60)).await.expect("the function answered"));
    }
    child.kill().await.expect("stop the function");
    let mut out = String::new();
    child.stdout.take().expect("piped stdout").read_to_string(&mut out).await.expect("read stdout");
    let docs = emf::documents(&out).into_iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    (outcomes, docs)
}

/// The report's `page` of a run that answered.
fn page(outcome: &Outcome) -> Value {
    let Outcome::Response(report) = outcome else { panic!("the tracker failed: {outcome:?}") };
    report["page"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracker_publishes_the_stacks_page_once_an_hour_to_s3() {
    // 1 x p5.48xlarge for a day at 3.00 per GPU-hour, bought by a real scan.
    let scenario = ScenarioToml::new(41, T0).payment("succeed", Some(3)).p5("us-east-1", &[2], "3.00").build();
    let sim = Sim::start(&scenario).await;
    let aws = Aws::fresh("page-track").await;
    aws.store().put_rule(&RuleToml::p5("east").rule(t0()), None).await.unwrap();
    let bucket = bucket(&aws, "track").await;
    let mut env = binary_env(&sim, &aws, STACK);
    env.extend(
        [
            ("CAPBLOCK_MODE", "live"),
            ("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", "20000"),
            ("CAPBLOCK_SCHEDULE_GROUP", "default"),
            ("CAPBLOCK_REMINDER_TARGET_ARN", "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event"),
            ("CAPBLOCK_REMINDER_ROLE_ARN", "arn:aws:iam::123456789012:role/capblock-reminder"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let (outcomes, _) = run("scan-offerings", &env, &[tick(t0())]).await;
    assert!(matches!(outcomes[0], Outcome::Response(_)), "{:?}", outcomes[0]);
    let reservation = sim.purchases().await[0]["reservation_id"].as_str().unwrap().to_string();

    // Without the bucket's variable (TeamPage=Disabled) the tracker publishes nothing.
    let (outcomes, _) = run("track-blocks", &env, &[tick(t0())]).await;
    assert_eq!(page(&outcomes[0]), Value::Null);

    env.push(("CAPBLOCK_PAGE_BUCKET".into(), bucket.clone()));
    sim.advance_secs(5 * 60).await;
    let now = t0() + Duration::minutes(5);
    // Two runs in one hour: one page.
    let (outcomes, _) = run("track-blocks", &env, &[tick(now), tick(now)]).await;
    let hour = json!(t0().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    assert_eq!(page(&outcomes[0])["outcome"], "published", "{:?}", outcomes[0]);
    assert_eq!(page(&outcomes[0])["hour"], hour);
    assert_eq!(page(&outcomes[1]), json!({"outcome": "already_claimed", "hour": hour}));
    let (html, ct, _) = object(&aws, &bucket, PAGE_KEY).await;
    assert_eq!(ct.as_deref(), Some(CONTENT_TYPE));
    assert!(html.trim_start().to_ascii_lowercase().starts_with("<!doctype html>"), "{}", &html[..html.len().min(200)]);
    assert!(html.trim_end().to_ascii_lowercase().ends_with("</html>"));
    assert!(html.contains(&reservation), "the page names the stack's block {reservation}");
    assert_eq!(page(&outcomes[0])["bytes"], json!(html.len()));

    // The next hour's run publishes again; a bucket gone makes a counted failure, not a failed run.
    sim.advance_secs(3600).await;
    let later = now + Duration::hours(1);
    let (outcomes, _) = run("track-blocks", &env, &[tick(later)]).await;
    assert_eq!(page(&outcomes[0])["outcome"], "published", "{:?}", outcomes[0]);
    let gone: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.clone(), if k == "CAPBLOCK_PAGE_BUCKET" { format!("{v}-gone") } else { v.clone() }))
        .collect();
    sim.advance_secs(3600).await;
    let (outcomes, docs) = run("track-blocks", &gone, &[tick(later + Duration::hours(1))]).await;
    let failed = page(&outcomes[0]);
    assert_eq!(failed["outcome"], "failed", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("NoSuchBucket"), "{failed}");
    let counted = docs
        .iter()
        .filter(|d| d["Stack"] == STACK && d["Function"] == "track-blocks" && d["Kind"] == "capblock.PagePublishFailed")
        .find_map(|d| d["Errors"].as_f64());
    assert_eq!(counted, Some(1.0), "{docs:?}");
}
