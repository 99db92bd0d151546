//! UltraServers, the block view, block health and the extension history through the unmodified
//! aws-sdk-ec2 client (the version in Cargo.lock): what the SDK parses is what capblock can read.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{CapacityBlockInterconnectStatus, CapacityReservationInstancePlatform, Filter};
use capblock_tests::{Sim, quick_timeouts};

const MARKET: &str = include_str!("../../scenarios/ultraserver-wire.toml");

async fn client(sim: &Sim) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&sim.sdk(quick_timeouts()).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_reads_ultraserver_offerings_and_every_block_of_a_purchase() {
    let sim = Sim::start(MARKET).await;
    let ec2 = client(&sim).await;
    let offers = ec2
        .describe_capacity_block_offerings()
        .capacity_duration_hours(24)
        .instance_type("trn2u.48xlarge")
        .ultraserver_type("u-trn2x64")
        .ultraserver_count(2)
        .send()
        .await
        .unwrap();
    let o = &offers.capacity_block_offerings()[0];
    assert_eq!((o.ultraserver_type(), o.ultraserver_count()), (Some("u-trn2x64"), Some(2)));
    assert_eq!((o.instance_type(), o.instance_count()), (Some("trn2u.48xlarge"), Some(8)));
    // 2.00 x 16 chips x 8 instances x 24 h: priced over every accelerator of the offering.
    assert_eq!(o.upfront_fee(), Some("6144.00"));
    // The API model's reading (the simulator's default): InstanceType is required, so an
    // UltraServer search without it is refused.
    let e = ec2
        .describe_capacity_block_offerings()
        .capacity_duration_hours(24)
        .ultraserver_type("u-trn2x64")
        .send()
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("MissingParameter"));

    let bought = ec2
        .purchase_capacity_block()
        .capacity_block_offering_id(o.capacity_block_offering_id().unwrap())
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .send()
        .await
        .unwrap();
    // aws-sdk-ec2 1.274 exposes capacity_reservation and capacity_blocks (not yet
    // capacity_reservations): every reservation is in the blocks.
    let first = bought.capacity_reservation().unwrap();
    let blocks = bought.capacity_blocks();
    assert_eq!(blocks.len(), 2, "one block per UltraServer");
    let ids: Vec<&str> = blocks.iter().flat_map(|b| b.capacity_reservation_ids()).map(String::as_str).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(first.capacity_reservation_id(), Some(ids[0]));
    assert_eq!(first.capacity_block_id(), blocks[0].capacity_block_id());
    assert!(blocks.iter().all(|b| b.ultraserver_type() == Some("u-trn2x64")));

    let described = ec2
        .describe_capacity_blocks()
        .filters(Filter::builder().name("ultraserver-type").values("ultraservers").build())
        .send()
        .await
        .unwrap();
    assert_eq!(described.capacity_blocks().len(), 2);
    assert_eq!(described.capacity_blocks()[0].state().map(|s| s.as_str()), Some("scheduled"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_reads_block_status_and_the_extension_history() {
    let sim = Sim::start(MARKET).await;
    let ec2 = client(&sim).await;
    let offer = ec2
        .describe_capacity_block_offerings()
        .capacity_duration_hours(24)
        .instance_type("trn2u.48xlarge")
        .ultraserver_type("u-trn2x64")
        .ultraserver_count(1)
        .send()
        .await
        .unwrap();
    let bought = ec2
        .purchase_capacity_block()
        .capacity_block_offering_id(offer.capacity_block_offerings()[0].capacity_block_offering_id().unwrap())
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .send()
        .await
        .unwrap();
    let r = bought.capacity_reservation().unwrap();
    let (rid, block) = (r.capacity_reservation_id().unwrap().to_string(), r.capacity_block_id().unwrap().to_string());

    // Scheduled: no status yet; by id the call fails.
    let none = ec2.describe_capacity_block_status().send().await.unwrap();
    assert!(none.capacity_block_statuses().is_empty());
    let e = ec2.describe_capacity_block_status().capacity_block_ids(&block).send().await.unwrap_err();
    assert_eq!(e.code(), Some("InvalidCapacityReservationState.PendingActivation"));

    // An hour after the start the market impairs it and takes 2 of its 4 instances out.
    sim.control("POST", "/_sim/clock", r#"{"set": "2026-12-02T12:30:00Z"}"#).await;
    let st = ec2.describe_capacity_block_status().send().await.unwrap();
    let s = &st.capacity_block_statuses()[0];
    assert_eq!(s.capacity_block_id(), Some(block.as_str()));
    assert_eq!(s.interconnect_status(), Some(&CapacityBlockInterconnectStatus::Impaired));
    // The simulator's default reading (`unavailable_means = "in_use"`): the 2 taken out and the
    // 2 still running are all unavailable, nothing is left to launch.
    assert_eq!(
        (s.total_capacity(), s.total_available_capacity(), s.total_unavailable_capacity()),
        (Some(4), Some(0), Some(4))
    );

    // Extensions: a dry run is refused with DryRunOperation and leaves no history.
    let ext = ec2
        .describe_capacity_block_extension_offerings()
        .capacity_reservation_id(&rid)
        .capacity_block_extension_duration_hours(24)
        .send()
        .await
        .unwrap();
    let ext_id = ext.capacity_block_extension_offerings()[0].capacity_block_extension_offering_id().unwrap();
    let dry = ec2
        .purchase_capacity_block_extension()
        .capacity_block_extension_offering_id(ext_id)
        .capacity_reservation_id(&rid)
        .dry_run(true)
        .send()
        .await
        .unwrap_err();
    assert_eq!(dry.code(), Some("DryRunOperation"));
    let h = ec2.describe_capacity_block_extension_history().capacity_reservation_ids(&rid).send().await.unwrap();
    assert!(h.capacity_block_extensions().is_empty());
    ec2.purchase_capacity_block_extension()
        .capacity_block_extension_offering_id(ext_id)
        .capacity_reservation_id(&rid)
        .send()
        .await
        .unwrap();
    let h = ec2.describe_capacity_block_extension_history().capacity_reservation_ids(&rid).send().await.unwrap();
    let x = &h.capacity_block_extensions()[0];
    assert_eq!(x.capacity_block_extension_status().map(|s| s.as_str()), Some("payment-succeeded"));
    assert_eq!(x.capacity_block_extension_duration_hours(), Some(24));
}
