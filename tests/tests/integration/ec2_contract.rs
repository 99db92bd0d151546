//! The EC2 contract (`capblock_core::contract::ec2`) on the EC2 adapters (`Ec2Market`) against
//! the market simulator: each case on a simulator of its own, opened on the contract's market
//! under the reading the case names (the same cases run on the in-memory EC2 in the core's unit
//! tests).

use async_trait::async_trait;
use capblock_core::contract::ec2::{
    self as contract, Ec2Control, OnSale, Payment, Setup, TypeQuestions, UnavailableCounts,
};
use capblock_shared::aws::ram::Ram;
use capblock_shared::domain::share::SharePrincipal;
use capblock_shared::ports::{ShareRequest, Shares};
use capblock_tests::{ScenarioToml, Sim};
use chrono::Duration;

/// The simulator's control API as the contract's control.
struct Control<'a>(&'a Sim);

#[async_trait]
impl Ec2Control for Control<'_> {
    async fn advance(&self, by: Duration) {
        self.0.advance_secs(by.num_seconds()).await;
    }
    async fn fail_payment(&self, id: &str) {
        let body = format!("{{\"reservation_id\": \"{id}\", \"outcome\": \"fail\"}}");
        self.0.control("POST", "/_sim/payment", &body).await;
    }
    async fn run_instances(&self, id: &str, account: &str, n: u32) {
        if account != OnSale::ACCOUNT {
            // EC2 lets another account launch into a block only through a share.
            let share = ShareRequest {
                name: format!("contract-{id}"),
                reservation_arn: format!(
                    "arn:aws:ec2:{}:{}:capacity-reservation/{id}",
                    OnSale::REGION,
                    OnSale::ACCOUNT
                ),
                principals: vec![SharePrincipal::Account(account.to_string())],
                tags: vec![],
                client_token: format!("contract-{id}-{account}"),
            };
            let ram = Ram::new(self.0.sdk(capblock_tests::quick_timeouts()).await);
            ram.create(&OnSale::region(), &share).await.expect("the block shared");
        }
        let body = serde_json::json!({"reservation_id": id, "account_id": account, "running": n});
        self.0.control("POST", "/_sim/blocks/usage", &body.to_string()).await;
    }
    async fn set_health(&self, id: &str, interconnect: &str, unavailable: u32) {
        let body = serde_json::json!({"reservation_id": id, "interconnect": interconnect, "unavailable": unavailable});
        self.0.control("POST", "/_sim/blocks/health", &body.to_string()).await;
    }
}

/// The contract's market as a scenario, under `setup`'s reading.
fn scenario(setup: &Setup) -> String {
    let payment = match setup.payment {
        Payment::Succeed => "succeed",
        Payment::Fail => "fail",
    };
    // Where EC2 takes the question's types in one call, or refuses the list as unknown (and the
    // adapter asks one type per call) under a reading of one-type questions.
    let (preferences, one_type) = match setup.questions {
        TypeQuestions::Preferences => ("accepted", "never"),
        TypeQuestions::OneTypeNever => ("unknown", "never"),
        TypeQuestions::OneTypeFirstSegment => ("unknown", "first_segment"),
    };
    let unavailable = match setup.unavailable {
        UnavailableCounts::InUse => "in_use",
        UnavailableCounts::Failed => "failed",
    };
    ScenarioToml::new(71, contract::T0)
        .behaviour(&format!("unavailable_means = \"{unavailable}\""))
        .behaviour(&format!("payment = \"{payment}\""))
        .behaviour(&format!("instance_type_preferences = \"{preferences}\""))
        .behaviour(&format!("segmented_for_one_type = \"{one_type}\""))
        .payment_delay_minutes(u32::try_from(setup.payment_delay.num_minutes()).expect("minutes"))
        .failed_payment_visible_minutes(u32::try_from(setup.failed_visible.num_minutes()).expect("minutes"))
        .behaviour(&format!("listing_lag_secs = {}", setup.listing_lag.num_seconds()))
        .behaviour(&format!("stale_listing_secs = {}", setup.stale_listing.num_seconds()))
        .behaviour(&format!("listed_twice = {}", setup.listed_twice))
        .p5(OnSale::REGION, &OnSale::P5_START_DAYS, OnSale::P5_PRICE)
        .extension_price(Some(OnSale::P5_PRICE))
        .trn2_ultra(OnSale::REGION, &[OnSale::ULTRA_COUNT], &[1], OnSale::ULTRA_PRICE)
        .raw(&segmented_line())
        .build()
}

/// The contract's segmented offering as a `[[market]]` line (`OnSale::SEGMENTS`).
fn segmented_line() -> String {
    let segments: Vec<String> = OnSale::SEGMENTS
        .iter()
        .map(|(t, z, n, _)| format!("{{ instance_type = \"{t}\", az = \"{z}\", count = {n} }}"))
        .collect();
    format!(
        "[[market]]\nregion = \"{}\"\ninstance_type = \"{}\"\ndurations_days = [1]\nstart_days = [{}]\n\
         segments = [{}]\nprice = [{{ from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"{}\" }}]",
        OnSale::REGION,
        OnSale::SEGMENTS[0].0,
        OnSale::SEGMENTED_START_DAYS,
        segments.join(", "),
        OnSale::SEGMENTED_PRICE
    )
}

macro_rules! contract {
    ($($name:ident: $setup:expr),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let name = stringify!($name);
                let sim = Sim::start(&scenario(&contract::setup(name))).await;
                contract::run(name, &sim.market().await, &Control(&sim)).await;
            }
        )*
    };
}

capblock_core::ec2_contract_cases!(contract);
