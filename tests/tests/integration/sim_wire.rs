//! The simulator through the real aws-sdk-ec2 client: what the SDK parses, the adapter reads.

use capblock_shared::domain::lifecycle::Observed;
use capblock_shared::ports::{
    InstanceTypeSource, MarketError, OfferingQuery, OfferingSource, PurchaseOutcome, PurchaseRequest, Purchaser,
    ReservationSource,
};
use capblock_tests::{Sim, quick_timeouts};
use chrono::{DateTime, Duration, Utc};
use rust_decimal_macros::dec;

pub const MARKET: &str = r#"
seed = 11
[clock]
start = "2026-12-01T00:00:00Z"
[behaviour]
payment = "succeed"
payment_delay_hours = 3
# These tests are about the wire, not EC2's describe limit (tests/integration/real_market.rs).
describe_limit = false
same_day_offerings = false
[[regions]]
name = "us-east-1"
[[regions]]
name = "eu-north-1"
supported = false
[[market]]
region = "us-east-1"
instance_type = "p5.48xlarge"
azs = ["us-east-1a", "us-east-1b", "us-east-1c"]
counts = [1, 2]
durations_days = [1, 2]
start_days = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "3.25" } ]
"#;

fn t0() -> DateTime<Utc> {
    "2026-12-01T00:00:00Z".parse().unwrap()
}

fn query(region: &str, count: u32, days: u32) -> OfferingQuery {
    OfferingQuery {
        region: region.parse().unwrap(),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: count,
        ultraservers: None,
        duration_hours: days * 24,
        start_from: t0(),
        start_to: t0() + Duration::days(14),
        also_types: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_ecs_six_best_offerings_across_pages_with_exact_fees() {
    let sim = Sim::start(MARKET).await;
    let market = sim.market().await;
    // 3 AZs x 10 start days = 30 offerings match, all at one price: EC2 answers with 6, the
    // earliest starts first.
    let all = market.offerings(&query("us-east-1", 2, 1)).await.unwrap();
    assert_eq!(all.len(), 6);
    let o = &all[0];
    assert_eq!(o.instance_count, 2);
    assert_eq!((o.duration_hours, o.duration_minutes), (24, 0));
    // 3.25 x 8 GPUs x 2 instances x 24 h = 1248.00, exactly.
    assert_eq!(o.fee.amount(), dec!(1248.00));
    assert_eq!(o.price_per_accelerator_hour(8).unwrap().per_unit, dec!(3.25));
    assert_eq!(o.start.format("%H:%M").to_string(), "11:30");
    assert!(all.iter().all(|o| o.start <= t0() + Duration::days(2) + Duration::hours(12)), "the two earliest days");

    // The adapter follows every page: at 4 a page the same 6 come in two.
    let client = aws_sdk_ec2::Client::new(&sim.sdk(quick_timeouts()).await);
    let pages: Vec<_> = client
        .describe_capacity_block_offerings()
        .capacity_duration_hours(24)
        .instance_type("p5.48xlarge")
        .instance_count(2)
        .max_results(4)
        .into_paginator()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .unwrap();
    assert_eq!(pages.len(), 2, "6 offerings at 4 a page");
    let ids: std::collections::BTreeSet<_> = pages
        .iter()
        .flat_map(|p| p.capacity_block_offerings())
        .filter_map(|o| o.capacity_block_offering_id())
        .collect();
    assert_eq!(ids, all.iter().map(|o| o.id.as_str()).collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn date_ranges_narrow_the_answer() {
    let sim = Sim::start(MARKET).await;
    let market = sim.market().await;
    let mut q = query("us-east-1", 1, 2);
    q.start_from = t0() + Duration::days(3);
    q.start_to = t0() + Duration::days(5);
    let found = market.offerings(&q).await.unwrap();
    assert!(!found.is_empty());
    for o in &found {
        assert!(o.start >= q.start_from && o.start <= q.start_to, "{}", o.start);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_past_ec2s_range_are_refused_not_wrapped() {
    let sim = Sim::start(MARKET).await;
    let market = sim.market().await;
    // `as i32` sent InstanceCount=-1 for this.
    for (q, named) in [
        (query("us-east-1", u32::MAX, 1), "InstanceCount 4294967295"),
        (OfferingQuery { duration_hours: u32::MAX, ..query("us-east-1", 1, 1) }, "CapacityDurationHours 4294967295"),
    ] {
        match market.offerings(&q).await {
            Err(MarketError::Rejected { code, message, .. }) => {
                assert_eq!(code, "InvalidParameterValue");
                assert!(message.contains(named) && message.contains("not sent"), "{message}");
            }
            other => panic!("{named}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_is_a_retryable_error_and_unsupported_regions_are_named() {
    let sim = Sim::start(MARKET).await;
    sim.behaviour(r#"{"throttle": {"rate_per_sec": 0.01, "burst": 1}}"#).await;
    let client = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::config::Builder::from(&sim.sdk(quick_timeouts()).await)
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build(),
    );
    let call =
        || client.describe_capacity_block_offerings().capacity_duration_hours(24).instance_type("p5.48xlarge").send();
    call().await.unwrap();
    let err = call().await.unwrap_err();
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    assert_eq!(err.code(), Some("RequestLimitExceeded"));
    // The SDK's retry classifier sees it as a throttling error: retryable.
    let raw = err.raw_response().expect("an HTTP answer");
    assert_eq!(raw.status().as_u16(), 503);

    // Through the adapter one query is one attempt (the SDK does not retry it) and comes back
    // as Throttled, never as a refusal: the scan's paced asker owns the retries and the pace.
    let market = sim.market().await;
    let calls = || async { sim.state().await["calls"]["DescribeCapacityBlockOfferings"].as_u64().unwrap() };
    let before = calls().await;
    match market.offerings(&query("us-east-1", 1, 1)).await {
        Err(e @ MarketError::Throttled { .. }) => assert!(e.had_no_effect()),
        other => panic!("expected Throttled, got {other:?}"),
    }
    assert_eq!(calls().await - before, 1, "one attempt");
    // Through the paced asker the same query is retried at the lane's pace until the bucket lets
    // it through (one token every 2 s here).
    sim.behaviour(r#"{"throttle": {"rate_per_sec": 0.5, "burst": 1}}"#).await;
    let before = calls().await;
    let qs = [query("us-east-1", 1, 1), query("us-east-1", 2, 1)];
    let pacing =
        capblock_shared::app::paced_asker::Pacing::from(&capblock_shared::domain::plan::DescribeBudget::for_refill(
            std::time::Duration::from_millis(500),
            1.0,
            std::time::Duration::from_secs(30),
        ));
    let answers =
        capblock_shared::app::paced_asker::ask_all(&market, &qs, &pacing, &Default::default(), || {}).await.answers;
    assert!(
        answers.iter().all(|a| matches!(a, capblock_shared::app::paced_asker::Answer::Offerings(_))),
        "{answers:?}"
    );
    let attempts = calls().await - before;
    assert!(attempts > 2, "throttled attempts were retried ({attempts} calls for 2 queries)");
    sim.behaviour(r#"{"throttle": null}"#).await;
    match market.offerings(&query("eu-north-1", 1, 1)).await {
        Err(MarketError::Unsupported { region, .. }) => assert_eq!(region, "eu-north-1"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purchase_dry_run_tags_and_reservation_lookups() {
    let sim = Sim::start(MARKET).await;
    let market = sim.market().await;
    let offering = market.offerings(&query("us-east-1", 1, 1)).await.unwrap().remove(0);
    let mut req = PurchaseRequest {
        offering: offering.clone(),
        instance_platform: "Linux/UNIX".into(),
        tags: [("capblock:intent".to_string(), "r/cb-1".to_string()), ("team".to_string(), "llm".to_string())].into(),
        dry_run: true,
    };
    assert_eq!(market.purchase(&req).await.unwrap(), PurchaseOutcome::WouldSucceed);
    assert!(sim.purchases().await.is_empty(), "a dry run buys nothing");

    req.dry_run = false;
    let PurchaseOutcome::Bought(bought) = market.purchase(&req).await.unwrap() else { panic!("bought") };
    assert!(bought.more.is_empty(), "one reservation for an instance block");
    let r = bought.reservation;
    assert_eq!(r.state, "payment-pending");
    assert!(r.is_capacity_block());
    assert_eq!(r.tags["team"], "llm");
    assert_eq!((r.start, r.end), (offering.start, offering.end));
    assert_eq!(sim.purchases().await.len(), 1);

    let found = market.reservations_tagged(&offering.region, "capblock:intent", "r/cb-1").await.unwrap();
    assert_eq!(found.reservations.iter().map(|x| &x.id).collect::<Vec<_>>(), vec![&r.id]);
    assert!(found.unreadable.is_empty());
    assert_eq!(
        market.reservations_tagged(&offering.region, "capblock:intent", "other").await.unwrap(),
        Default::default()
    );

    // Buying the same offering again is refused by EC2 (it is no longer on sale): no effect.
    // (Whether it is or not, capblock never sends it twice; see the scan tests.)
    sim.advance_hours(4).await;
    let seen = market.observe(&offering.region, &[r.id.clone(), "cr-00000000000000000".into()]).await.unwrap();
    let block_id = r.capacity_block_id.clone();
    assert!(block_id.is_some(), "the reservation names its block");
    assert_eq!(
        seen[0],
        (
            r.id.clone(),
            Observed::Found {
                state: "scheduled".into(),
                end: offering.end,
                capacity_block_id: block_id,
                instance_count: offering.instance_count,
                available: Some(0),
            }
        )
    );
    assert_eq!(seen[1].1, Observed::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_types_report_accelerators() {
    let sim = Sim::start(MARKET).await;
    let market = sim.market().await;
    let region = "us-east-1".parse().unwrap();
    let mut got = market
        .accelerators(
            &region,
            &["p5.48xlarge".parse().unwrap(), "trn1.32xlarge".parse().unwrap(), "p5.4xlarge".parse().unwrap()],
        )
        .await
        .unwrap();
    got.sort();
    let got: Vec<(String, u32)> = got.into_iter().map(|(t, n)| (t.to_string(), n)).collect();
    assert_eq!(got, vec![("p5.48xlarge".into(), 8), ("p5.4xlarge".into(), 1), ("trn1.32xlarge".into(), 16)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_purchase_response_is_an_unknown_outcome_not_a_refusal() {
    let sim = Sim::start(MARKET).await;
    let market = sim.market().await;
    let offering = market.offerings(&query("us-east-1", 1, 1)).await.unwrap().remove(0);
    sim.behaviour(r#"{"drop_purchase_response": true, "timeout_secs": 1}"#).await;
    let req =
        PurchaseRequest { offering, instance_platform: "Linux/UNIX".into(), tags: Default::default(), dry_run: false };
    let err = market.purchase(&req).await.unwrap_err();
    assert!(matches!(err, MarketError::Unknown { .. }), "{err:?}");
    assert!(!err.had_no_effect());
    // Sent once, not retried: exactly one purchase at the market.
    assert_eq!(sim.purchases().await.len(), 1);
    assert_eq!(sim.state().await["calls"]["PurchaseCapacityBlock"], 1);
}
