//! The EC2 market ports' contract: what EC2, as the market simulator (`infra/market-sim`) plays
//! it, promises a workflow about Capacity Blocks, held against the in-memory EC2
//! (`crate::memory::MemoryEc2`) and the EC2 adapters over the simulator alike: offerings that
//! answer the question asked, a purchase that buys at every call, payments that stay pending and
//! then are taken or fail (each UltraServer's on its own), a failed payment listed for a while and
//! then gone, listings as late, stale or doubled as the simulator's readings make them, a block
//! per UltraServer, a segmented offering bought as a reservation per segment and found by the
//! questions each reading of the record answers it, extensions whose payment moves the end
//! once taken, and an active block's status whose unavailable count holds what each reading
//! says (the instances taken out, or those and every one in use).
//!
//! Each case starts from one market ([`OnSale`]), at [`T0`], under the reading its
//! [`Setup`] names; the runner builds it (the in-memory EC2 with its settings, or a simulator on a
//! scenario) and passes the ports and a [`Ec2Control`] that moves the clock. To add a case: write
//! `async fn the_promise<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C)` and name it with its setup in
//! `ec2_contract_cases!`: both runners (the core's `on_memory!` below and `contract!` in
//! `tests/tests/integration/ec2_contract.rs`) expand that one list.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};
use rust_decimal::Decimal;

use crate::domain::block::Reservation;
use crate::domain::health::{Interconnect, StatusCounts};
use crate::domain::ids::Region;
use crate::domain::lifecycle::Observed;
use crate::domain::offering::Offering;
use crate::domain::tags::{INTENT_TAG, STACK_TAG};
use crate::domain::ultraserver::UltraServers;
pub use crate::memory::{TypeQuestions, UnavailableCounts};
use crate::ports::{
    BlockKinds, BlockStatusSource, ExtensionHistory, ExtensionMarket, MarketError, OFFERING_ID_EXPIRED, OfferingQuery,
    OfferingSource, PurchaseOutcome, PurchaseRequest, Purchaser, ReservationLookup, ReservationSource,
};

port_bundle!(
    /// The market ports every implementation under contract has.
    pub trait Ec2Ports: OfferingSource
        + Purchaser
        + ReservationSource
        + ReservationLookup
        + ExtensionMarket
        + ExtensionHistory
        + BlockKinds
        + BlockStatusSource
);

/// What a case does to EC2 besides calling it: the simulator's control API, the in-memory EC2's
/// settings.
#[async_trait]
pub trait Ec2Control: Send + Sync {
    /// Moves EC2's clock forward.
    async fn advance(&self, by: Duration);
    /// The payment of reservation `id` fails when it would have been taken (the simulator's
    /// `POST /_sim/payment` with `outcome = "fail"`).
    async fn fail_payment(&self, id: &str);
    /// `n` instances of `account` run in reservation `id` from now on: the owner's
    /// ([`OnSale::ACCOUNT`]), or another account's, the block shared with it first where EC2
    /// requires that (the simulator's `POST /_sim/blocks/usage`, with `account_id`).
    async fn run_instances(&self, id: &str, account: &str, n: u32);
    /// Reservation `id`'s interconnect reads `interconnect` (EC2's word: `ok`, `impaired`) and
    /// `unavailable` of its instances are taken out from now on (the simulator's
    /// `POST /_sim/blocks/health`).
    async fn set_health(&self, id: &str, interconnect: &str, unavailable: u32);
}

/// The instant every case starts at: EC2's clock when the market opens.
pub const T0: &str = "2026-12-01T00:00:00Z";

/// [`T0`] as a time.
pub fn t0() -> DateTime<Utc> {
    T0.parse().expect("T0 is RFC 3339")
}

/// The market every case starts from, in the simulator's terms (its scenario's `[[market]]`
/// lines): what each runner puts on sale.
pub struct OnSale;

impl OnSale {
    pub const REGION: &'static str = "us-east-1";
    /// The account that buys (the simulator's default `account_id`), and one the blocks are
    /// shared with (a member of the simulator's default Organization).
    pub const ACCOUNT: &'static str = "111122223333";
    pub const MEMBER: &'static str = "111111111111";
    pub const ZONE: &'static str = "us-east-1a";
    /// One p5.48xlarge (8 GPUs) for a day, starting at 11:30 UTC this many days after T0.
    pub const P5_START_DAYS: [u32; 2] = [1, 2];
    /// Its price per accelerator-hour, and its extensions'.
    pub const P5_PRICE: &'static str = "3.00";
    /// Two u-trn2x64 UltraServers (4 x trn2u.48xlarge each, 16 Trainium2 per instance) for a
    /// day, from 11:30 UTC the day after T0.
    pub const ULTRA_COUNT: u32 = 2;
    pub const ULTRA_PRICE: &'static str = "2.00";

    /// The p5 block's fee: 3.00 x 8 accelerators x 1 instance x 24 hours.
    pub fn p5_fee() -> Decimal {
        Decimal::from(576)
    }

    /// The UltraServer block's fee: 2.00 x 16 accelerators x 8 instances x 24 hours.
    pub fn ultra_fee() -> Decimal {
        Decimal::from(6144)
    }

    /// A segmented offering for a day from 11:30 UTC the day after T0, at 2.50 per
    /// accelerator-hour: (type, zone, instances, fee) per segment, the first segment's type the
    /// offering's. 2 x p5 (8 GPUs) is 960, 1 x p5en (8 GPUs) 480: 1440 in all.
    pub const SEGMENTS: [(&'static str, &'static str, u32, u32); 2] =
        [("p5.48xlarge", "us-east-1a", 2, 960), ("p5en.48xlarge", "us-east-1b", 1, 480)];
    pub const SEGMENTED_PRICE: &'static str = "2.50";
    pub const SEGMENTED_START_DAYS: u32 = 1;

    /// The segmented offering's fee: its segments' together.
    pub fn segmented_fee() -> Decimal {
        Self::SEGMENTS.iter().map(|s| Decimal::from(s.3)).sum()
    }

    /// Its instances in all (what a question's count is compared with).
    pub fn segmented_count() -> u32 {
        Self::SEGMENTS.iter().map(|s| s.2).sum()
    }

    /// The start of a block sold `days` after T0.
    pub fn start(days: u32) -> DateTime<Utc> {
        let day = t0() + Duration::days(i64::from(days));
        Utc.from_utc_datetime(&day.date_naive().and_hms_opt(11, 30, 0).expect("a time"))
    }

    pub fn region() -> Region {
        Self::REGION.parse().expect("a region")
    }

    /// The UltraServers an UltraServer offering sells.
    pub fn ultraservers() -> UltraServers {
        UltraServers { kind: "u-trn2x64".parse().expect("a known type"), count: Self::ULTRA_COUNT }
    }
}

/// How a purchase's payment ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payment {
    /// Taken `payment_delay` after the purchase.
    Succeed,
    /// Failed at the payment deadline: 12 hours after the purchase, or 5 minutes before the
    /// start if sooner (the simulator's `payment = "fail"`).
    Fail,
}

/// The reading of EC2 a case runs under (the simulator's `[behaviour]` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// `payment`: how every purchase's and extension's payment ends.
    pub payment: Payment,
    /// `payment_delay_minutes`: how long a payment stays pending.
    pub payment_delay: Duration,
    /// `failed_payment_visible_minutes`: how long a failed payment's reservation stays listed.
    pub failed_visible: Duration,
    /// `listing_lag_secs`: a purchase's reservation is listed this long after it.
    pub listing_lag: Duration,
    /// `stale_listing_secs`: once listed, a reservation is missing again for this long, from a
    /// minute after it was first listed (zero: never).
    pub stale_listing: Duration,
    /// `listed_twice`: every reservation listed twice in one answer.
    pub listed_twice: bool,
    /// `instance_type_preferences` and `segmented_for_one_type`: which questions a segmented
    /// offering answers.
    pub questions: TypeQuestions,
    /// `unavailable_means`: what DescribeCapacityBlockStatus's unavailable count holds.
    pub unavailable: UnavailableCounts,
}

impl Default for Setup {
    /// The simulator's defaults: payments taken after 5 minutes, a failed one listed 60 more,
    /// every reservation listed at once, once.
    fn default() -> Self {
        Setup {
            payment: Payment::Succeed,
            payment_delay: Duration::minutes(5),
            failed_visible: Duration::minutes(60),
            listing_lag: Duration::zero(),
            stale_listing: Duration::zero(),
            listed_twice: false,
            questions: TypeQuestions::Preferences,
            unavailable: UnavailableCounts::InUse,
        }
    }
}

impl Setup {
    fn failing() -> Self {
        Setup { payment: Payment::Fail, ..Setup::default() }
    }
    fn lagging() -> Self {
        Setup { listing_lag: Duration::seconds(960), ..Setup::default() }
    }
    fn stale() -> Self {
        Setup { stale_listing: Duration::hours(1), ..Setup::default() }
    }
    fn twice() -> Self {
        Setup { listed_twice: true, ..Setup::default() }
    }
    fn one_type(segmented: TypeQuestions) -> Self {
        Setup { questions: segmented, ..Setup::default() }
    }
    fn unavailable(reading: UnavailableCounts) -> Self {
        Setup { unavailable: reading, ..Setup::default() }
    }

    /// When a payment made at `bought` for a block starting at `start` ends, under this setup.
    pub fn payment_ends(&self, bought: DateTime<Utc>, start: DateTime<Utc>) -> DateTime<Utc> {
        let deadline = (bought + Duration::hours(12)).min(start - Duration::minutes(5));
        match self.payment {
            Payment::Succeed => (bought + self.payment_delay).min(deadline),
            Payment::Fail => deadline,
        }
    }
}

macro_rules! cases {
    ($($name:ident: $setup:expr),* $(,)?) => {
        /// Every case, by name.
        pub const CASES: &[&str] = &[$(stringify!($name)),*];

        /// The reading case `name` runs under.
        pub fn setup(name: &str) -> Setup {
            match name {
                $(stringify!($name) => $setup,)*
                _ => panic!("no EC2 contract case {name}"),
            }
        }

        /// Runs case `name` on `market` (opened under `setup(name)` at T0), its clock moved by
        /// `control`.
        pub async fn run<M: Ec2Ports, C: Ec2Control>(name: &str, market: &M, control: &C) {
            match name {
                $(stringify!($name) => $name(market, control).await,)*
                _ => panic!("no EC2 contract case {name}"),
            }
        }
    };
}

/// Calls macro `$runner` with every case and its setup, in order: the one list of cases, which
/// `run`/`setup`/`CASES` here, the in-memory runner below and the simulator's runner in
/// `tests/tests/integration/ec2_contract.rs` all expand.
#[macro_export]
macro_rules! ec2_contract_cases {
    ($runner:ident) => {
        $runner!(
            offerings_answer_the_question_asked: Setup::default(),
            every_purchase_call_buys_a_block_of_its_own: Setup::default(),
            a_dry_run_buys_nothing: Setup::default(),
            an_offering_not_on_sale_is_refused_and_nothing_bought: Setup::default(),
            a_paid_block_is_scheduled_then_active_then_expired: Setup::default(),
            a_failed_payment_is_listed_for_a_while_then_gone: Setup::failing(),
            a_reservation_listed_late_is_unknown_until_then: Setup::lagging(),
            a_stale_read_misses_a_listed_reservation_for_a_while: Setup::stale(),
            a_reservation_listed_twice_is_one_reservation: Setup::twice(),
            an_ultraserver_purchase_makes_a_block_per_ultraserver: Setup::default(),
            each_ultraserver_pays_on_its_own: Setup::default(),
            an_extension_is_pending_then_moves_the_end: Setup::default(),
            a_reservation_s_usage_counts_every_account_in_it: Setup::default(),
            a_block_s_status_counts_instances_in_use_unavailable_where_the_reading_does:
                Setup::unavailable(UnavailableCounts::InUse),
            a_block_s_status_counts_only_failures_unavailable_where_the_reading_does:
                Setup::unavailable(UnavailableCounts::Failed),
            a_segmented_purchase_makes_a_reservation_per_segment: Setup::default(),
            each_segment_pays_on_its_own: Setup::default(),
            a_one_type_question_never_finds_a_segmented_offering: Setup::one_type(TypeQuestions::OneTypeNever),
            a_one_type_question_finds_a_segmented_offering_by_its_first_segment:
                Setup::one_type(TypeQuestions::OneTypeFirstSegment),
        );
    };
}

ec2_contract_cases!(cases);

fn p5_query() -> OfferingQuery {
    OfferingQuery {
        region: OnSale::region(),
        instance_type: "p5.48xlarge".parse().expect("a type"),
        instance_count: 1,
        ultraservers: None,
        duration_hours: 24,
        start_from: t0(),
        start_to: t0() + Duration::days(3),
        also_types: Vec::new(),
    }
}

fn ultra_query() -> OfferingQuery {
    let u = OnSale::ultraservers();
    OfferingQuery {
        instance_type: u.kind.instance_type().expect("its instance type"),
        instance_count: u.instances(),
        ultraservers: Some(u),
        ..p5_query()
    }
}

fn tags(intent: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(INTENT_TAG.to_string(), intent.to_string()), (STACK_TAG.to_string(), "contract".to_string())])
}

fn request(offering: Offering, intent: &str) -> PurchaseRequest {
    PurchaseRequest { offering, instance_platform: "Linux/UNIX".into(), tags: tags(intent), dry_run: false }
}

/// The earliest offering the market answers `q` with.
async fn earliest<M: Ec2Ports>(m: &M, q: &OfferingQuery) -> Offering {
    let mut offerings = m.offerings(q).await.expect("offerings");
    offerings.sort_by_key(|o| o.start);
    offerings.into_iter().next().expect("an offering on sale")
}

/// Buys the earliest p5 block for `intent`; returns the reservation EC2 answered with.
async fn buy<M: Ec2Ports>(m: &M, intent: &str) -> Reservation {
    match m.purchase(&request(earliest(m, &p5_query()).await, intent)).await.expect("bought") {
        PurchaseOutcome::Bought(p) => p.reservation,
        other => panic!("not a purchase: {other:?}"),
    }
}

async fn tagged<M: Ec2Ports>(m: &M, intent: &str) -> Vec<String> {
    let t = m.reservations_tagged(&OnSale::region(), INTENT_TAG, intent).await.expect("listed");
    assert!(t.unreadable.is_empty(), "{t:?}");
    t.reservations.into_iter().map(|r| r.id).collect()
}

/// What EC2 says of reservation `id` now: its state, or "not found".
async fn state<M: Ec2Ports>(m: &M, id: &str) -> String {
    let seen = m.observe(&OnSale::region(), &[id.to_string()]).await.expect("observed");
    match &seen[..] {
        [(seen_id, Observed::Found { state, .. })] if seen_id == id => state.clone(),
        [(seen_id, Observed::NotFound)] if seen_id == id => "not found".into(),
        other => panic!("{id}: {other:?}"),
    }
}

async fn offerings_answer_the_question_asked<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    let q = p5_query();
    let mut got = m.offerings(&q).await.unwrap();
    got.sort_by_key(|o| o.start);
    let starts: Vec<_> = got.iter().map(|o| o.start).collect();
    assert_eq!(starts, OnSale::P5_START_DAYS.map(OnSale::start).to_vec(), "{got:#?}");
    for o in &got {
        assert_eq!((o.region.as_str(), o.availability_zone.as_str()), (OnSale::REGION, OnSale::ZONE));
        assert_eq!((o.instance_type.as_str(), o.instance_count, o.duration_hours), ("p5.48xlarge", 1, 24));
        assert_eq!(o.end, o.start + Duration::hours(24));
        assert_eq!((o.fee.amount(), o.fee.currency().to_string()), (OnSale::p5_fee(), "USD".to_string()));
        assert!(!o.ultraserver && o.ultraservers.is_none(), "{o:?}");
    }
    // A count, a length or a window nobody sells: nothing, and no error.
    for q in [
        OfferingQuery { instance_count: 2, ..p5_query() },
        OfferingQuery { duration_hours: 48, ..p5_query() },
        OfferingQuery { start_from: t0() + Duration::days(4), start_to: t0() + Duration::days(5), ..p5_query() },
    ] {
        assert_eq!(m.offerings(&q).await.unwrap(), vec![], "{q:?}");
    }
}

async fn every_purchase_call_buys_a_block_of_its_own<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    // No ClientToken: the same request twice is two blocks, both charged.
    let offering = earliest(m, &p5_query()).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let Ok(PurchaseOutcome::Bought(p)) = m.purchase(&request(offering.clone(), "i-twice")).await else {
            panic!("not bought")
        };
        let r = p.reservation;
        assert!(p.more.is_empty(), "{:?}", p.more);
        assert_eq!(r.state, "payment-pending");
        assert_eq!((r.start, r.end, r.instance_count), (offering.start, offering.end, 1));
        assert_eq!((r.instance_type.as_str(), r.availability_zone.as_str()), ("p5.48xlarge", OnSale::ZONE));
        assert!(tags("i-twice").iter().all(|(k, v)| r.tags.get(k) == Some(v)), "{:?}", r.tags);
        ids.push(r.id);
    }
    assert_ne!(ids[0], ids[1]);
    let mut listed = tagged(m, "i-twice").await;
    listed.sort();
    ids.sort();
    assert_eq!(listed, ids);
    // Listed among every capacity block of the region, and each found by its id.
    let all: Vec<String> = m.capacity_blocks(&OnSale::region()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert!(ids.iter().all(|id| all.contains(id)), "{all:?}");
    for id in &ids {
        let r = m.reservation(&OnSale::region(), id).await.unwrap().expect("found by id");
        assert_eq!((r.instance_count, r.reservation_type.as_deref()), (1, Some("capacity-block")), "{r:?}");
    }
    assert_eq!(m.reservation(&OnSale::region(), "cr-0123456789abcdef0").await.unwrap(), None);
}

async fn a_dry_run_buys_nothing<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    let req = PurchaseRequest { dry_run: true, ..request(earliest(m, &p5_query()).await, "i-dry") };
    assert_eq!(m.purchase(&req).await.unwrap(), PurchaseOutcome::WouldSucceed);
    assert!(tagged(m, "i-dry").await.is_empty());
    assert!(m.capacity_blocks(&OnSale::region()).await.unwrap().is_empty());
}

async fn an_offering_not_on_sale_is_refused_and_nothing_bought<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    let offering = Offering { id: "cb-0123456789abcdef0".into(), ..earliest(m, &p5_query()).await };
    let e = m.purchase(&request(offering, "i-gone")).await.unwrap_err();
    assert!(e.had_no_effect(), "{e}");
    // The simulator answers an id it never showed NotFound; the in-memory EC2 an id it took
    // off sale Expired, which a scan also gives back (both: ask again, nothing bought).
    let codes = [Some("InvalidCapacityBlockOfferingIdNotFound"), Some(OFFERING_ID_EXPIRED)];
    assert!(matches!(e, MarketError::Rejected { .. }) && codes.contains(&e.code()), "{e}");
    assert!(tagged(m, "i-gone").await.is_empty());
}

async fn a_paid_block_is_scheduled_then_active_then_expired<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let r = buy(m, "i-paid").await;
    assert_eq!(state(m, &r.id).await, "payment-pending");
    c.advance(Duration::minutes(5) + Duration::seconds(1)).await;
    assert_eq!(state(m, &r.id).await, "scheduled");
    // A block not active yet has no interconnect status: left out, not an error.
    let block = r.capacity_block_id.clone().expect("its block");
    assert_eq!(m.block_status(&OnSale::region(), std::slice::from_ref(&block)).await.unwrap(), vec![]);
    c.advance(r.start - t0()).await;
    assert_eq!(state(m, &r.id).await, "active");
    let listed = m.reservation(&OnSale::region(), &r.id).await.unwrap().expect("listed");
    assert_eq!((listed.state.as_str(), listed.instance_count), ("active", 1));
    c.advance(r.end - r.start).await;
    assert_eq!(state(m, &r.id).await, "expired");
    assert_eq!(tagged(m, "i-paid").await, vec![r.id]);
}

async fn a_failed_payment_is_listed_for_a_while_then_gone<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let r = buy(m, "i-failed").await;
    let fails = Setup::failing().payment_ends(t0(), r.start);
    c.advance(fails - t0() - Duration::seconds(1)).await;
    assert_eq!(state(m, &r.id).await, "payment-pending", "pending up to the deadline");
    c.advance(Duration::seconds(2)).await;
    assert_eq!(state(m, &r.id).await, "payment-failed");
    assert_eq!(tagged(m, "i-failed").await, vec![r.id.clone()]);
    c.advance(Duration::minutes(60)).await;
    assert_eq!(state(m, &r.id).await, "not found", "gone an hour after failing");
    assert!(tagged(m, "i-failed").await.is_empty());
    assert_eq!(m.reservation(&OnSale::region(), &r.id).await.unwrap(), None);
}

async fn a_reservation_listed_late_is_unknown_until_then<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let r = buy(m, "i-late").await;
    let lag = Setup::lagging().listing_lag;
    assert!(tagged(m, "i-late").await.is_empty(), "not listed yet");
    assert_eq!(state(m, &r.id).await, "not found");
    assert_eq!(m.reservation(&OnSale::region(), &r.id).await.unwrap(), None);
    c.advance(lag - Duration::seconds(1)).await;
    assert!(tagged(m, "i-late").await.is_empty(), "not listed a second before the lag");
    c.advance(Duration::seconds(2)).await;
    assert_eq!(tagged(m, "i-late").await, vec![r.id.clone()]);
    assert_eq!(state(m, &r.id).await, "scheduled");
}

async fn a_stale_read_misses_a_listed_reservation_for_a_while<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let r = buy(m, "i-stale").await;
    assert_eq!(tagged(m, "i-stale").await, vec![r.id.clone()], "listed at once");
    c.advance(Duration::seconds(61)).await;
    assert!(tagged(m, "i-stale").await.is_empty(), "missing from a minute after it was listed");
    assert_eq!(state(m, &r.id).await, "not found");
    c.advance(Setup::stale().stale_listing - Duration::seconds(2)).await;
    assert!(tagged(m, "i-stale").await.is_empty(), "missing a second before the stale time passed");
    c.advance(Duration::seconds(2)).await;
    assert_eq!(tagged(m, "i-stale").await, vec![r.id.clone()], "listed again");
    assert_eq!(state(m, &r.id).await, "scheduled");
}

async fn a_reservation_listed_twice_is_one_reservation<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    let r = buy(m, "i-twice-listed").await;
    // Both copies are the one reservation: the caller must count it once.
    assert_eq!(tagged(m, "i-twice-listed").await, vec![r.id.clone(), r.id.clone()]);
    let all: Vec<String> = m.capacity_blocks(&OnSale::region()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(all, vec![r.id.clone(), r.id.clone()]);
    assert_eq!(state(m, &r.id).await, "payment-pending", "one answer for one id");
}

/// Buys the UltraServer offering; returns its parts' reservations (the first, then the others
/// by id).
async fn buy_ultra<M: Ec2Ports>(m: &M, intent: &str) -> (Reservation, Vec<String>) {
    let offering = earliest(m, &ultra_query()).await;
    assert_eq!(offering.ultraservers, Some(OnSale::ultraservers()), "{offering:?}");
    assert_eq!((offering.instance_count, offering.fee.amount()), (8, OnSale::ultra_fee()));
    match m.purchase(&request(offering, intent)).await.expect("bought") {
        PurchaseOutcome::Bought(p) => (p.reservation, p.more),
        other => panic!("not a purchase: {other:?}"),
    }
}

async fn an_ultraserver_purchase_makes_a_block_per_ultraserver<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    let (first, more) = buy_ultra(m, "i-ultra").await;
    assert_eq!(more.len(), 1, "one reservation per UltraServer");
    assert_eq!(first.instance_count, 4, "one UltraServer's instances");
    let mut ids = vec![first.id.clone(), more[0].clone()];
    ids.sort();
    let mut listed = tagged(m, "i-ultra").await;
    listed.sort();
    assert_eq!(listed, ids, "every part carries the purchase's tags");
    let parts = m.reservations_tagged(&OnSale::region(), INTENT_TAG, "i-ultra").await.unwrap().reservations;
    let blocks: Vec<String> = parts.iter().map(|r| r.capacity_block_id.clone().expect("a block id")).collect();
    assert_ne!(blocks[0], blocks[1], "a block per UltraServer");
    let mut facts = m.capacity_blocks_by_id(&OnSale::region(), &blocks).await.unwrap();
    facts.sort_by(|a, b| a.capacity_block_id.cmp(&b.capacity_block_id));
    assert_eq!(facts.len(), 2, "{facts:#?}");
    for f in &facts {
        assert_eq!(f.ultraserver_type.as_deref(), Some("u-trn2x64"), "{f:?}");
        assert_eq!(f.reservation_ids.len(), 1, "{f:?}");
        assert!(ids.contains(&f.reservation_ids[0]), "{f:?}");
        assert_eq!(f.tags.get(INTENT_TAG).map(String::as_str), Some("i-ultra"), "{f:?}");
    }
    // An instance block's kind names no UltraServer.
    let p5 = buy(m, "i-p5").await;
    let kinds = m.capacity_blocks_by_id(&OnSale::region(), &[p5.capacity_block_id.expect("its block")]).await.unwrap();
    assert_eq!(kinds.iter().map(|f| f.ultraserver_type.clone()).collect::<Vec<_>>(), vec![None]);
}

async fn each_ultraserver_pays_on_its_own<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let (first, more) = buy_ultra(m, "i-parts").await;
    c.fail_payment(&more[0]).await;
    c.advance(Duration::minutes(5) + Duration::seconds(1)).await;
    assert_eq!(state(m, &first.id).await, "scheduled", "the first part is held");
    assert_eq!(state(m, &more[0]).await, "payment-failed", "the other failed alone");
    c.advance(Duration::minutes(60)).await;
    assert_eq!(state(m, &more[0]).await, "not found");
    assert_eq!(tagged(m, "i-parts").await, vec![first.id.clone()]);
}

async fn an_extension_is_pending_then_moves_the_end<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let r = buy(m, "i-extend").await;
    let region = OnSale::region();
    assert_eq!(m.extension_offerings(&region, &r.id, 24).await.unwrap(), vec![], "none while payment-pending");
    c.advance(Duration::minutes(6)).await;
    let offers = m.extension_offerings(&region, &r.id, 24).await.unwrap();
    let [offer] = &offers[..] else { panic!("one offering: {offers:#?}") };
    assert_eq!((offer.reservation_id.as_str(), offer.duration_hours), (r.id.as_str(), 24));
    assert_eq!((offer.start, offer.end), (r.end, r.end + Duration::hours(24)));
    assert_eq!(offer.fee.amount(), OnSale::p5_fee());
    m.check_extension(&region, &offer.id, &r.id).await.expect("a dry run allowed");
    assert_eq!(m.extension_history(&region, std::slice::from_ref(&r.id)).await.unwrap(), vec![], "a dry run buys none");
    let receipt = m.purchase_extension(&region, &offer.id, &r.id).await.unwrap();
    assert_eq!((receipt.status.as_str(), receipt.end), ("payment-pending", Some(offer.end)));
    assert_eq!(m.extension_offerings(&region, &r.id, 24).await.unwrap(), vec![], "none while one awaits payment");
    let history = m.extension_history(&region, std::slice::from_ref(&r.id)).await.unwrap();
    let statuses: Vec<_> = history.iter().map(|x| (x.offering_id.as_str(), x.status.as_str())).collect();
    assert_eq!(statuses, vec![(offer.id.as_str(), "payment-pending")]);
    assert_eq!(end_of(m, &r.id).await, r.end, "the end moves only once paid");
    c.advance(Duration::minutes(6)).await;
    let history = m.extension_history(&region, std::slice::from_ref(&r.id)).await.unwrap();
    assert_eq!(history.iter().map(|x| x.status.as_str()).collect::<Vec<_>>(), vec!["payment-succeeded"]);
    assert_eq!(end_of(m, &r.id).await, offer.end);
}

/// A question for the segmented offering's instances of `types`.
fn segmented_query(types: &[&str]) -> OfferingQuery {
    let mut types = types.iter().map(|t| t.parse().expect("a type"));
    OfferingQuery {
        instance_type: types.next().expect("a type"),
        also_types: types.collect(),
        instance_count: OnSale::segmented_count(),
        ..p5_query()
    }
}

/// Every segment's type, the first's first: the question that finds the offering wherever
/// EC2 takes `InstanceTypePreferences`.
fn segment_types() -> Vec<&'static str> {
    OnSale::SEGMENTS.iter().map(|s| s.0).collect()
}

/// The segmented offering as a question of `types` finds it: its segments as EC2 sells them,
/// its fee their sum.
async fn segmented<M: Ec2Ports>(m: &M, types: &[&str]) -> Offering {
    let o = earliest(m, &segmented_query(types)).await;
    let segments: Vec<_> = o
        .segments
        .iter()
        .map(|s| (s.instance_type.as_str(), s.availability_zone.as_str(), s.instance_count, s.fee.amount()))
        .collect();
    let sold: Vec<_> = OnSale::SEGMENTS.iter().map(|s| (s.0, s.1, s.2, Decimal::from(s.3))).collect();
    assert_eq!(segments, sold, "{o:#?}");
    assert_eq!((o.fee.amount(), o.instance_count), (OnSale::segmented_fee(), OnSale::segmented_count()), "{o:?}");
    assert_eq!((o.instance_type.as_str(), o.availability_zone.as_str()), (sold[0].0, sold[0].1), "the first's");
    assert_eq!(o.start, OnSale::start(OnSale::SEGMENTED_START_DAYS));
    o
}

/// Buys `offering` for `intent`; returns every reservation the purchase made, as the answer
/// names them (the first, then the others).
async fn buy_all<M: Ec2Ports>(m: &M, offering: Offering, intent: &str) -> Vec<String> {
    match m.purchase(&request(offering, intent)).await.expect("bought") {
        PurchaseOutcome::Bought(p) => std::iter::once(p.reservation.id).chain(p.more).collect(),
        other => panic!("not a purchase: {other:?}"),
    }
}

async fn a_segmented_purchase_makes_a_reservation_per_segment<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    // Found by a question naming every segment's type, not by one naming only some of them.
    let offering = segmented(m, &segment_types()).await;
    assert_eq!(m.offerings(&segmented_query(&segment_types()[..1])).await.unwrap(), vec![]);
    let mut ids = buy_all(m, offering.clone(), "i-segments").await;
    assert_eq!(ids.len(), OnSale::SEGMENTS.len(), "one reservation per segment: {ids:?}");
    ids.sort();
    let mut listed = m.reservations_tagged(&OnSale::region(), INTENT_TAG, "i-segments").await.unwrap().reservations;
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(listed.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), ids, "every one carries the tags");
    // Each reservation is one segment (its own zone, type and count), each segment once; the
    // fees of the segments they are add up to the offering's, charged once.
    let mut fees = Decimal::ZERO;
    let mut seen = Vec::new();
    for r in &listed {
        let s = offering.segment_of(&r.instance_type, &r.availability_zone, r.instance_count).expect("a segment");
        assert!(!seen.contains(&s), "{s:?} twice");
        seen.push(s);
        fees += s.fee.amount();
        assert!(tags("i-segments").iter().all(|(k, v)| r.tags.get(k) == Some(v)), "{:?}", r.tags);
        assert_eq!((r.start, r.end, r.state.as_str()), (offering.start, offering.end, "payment-pending"));
        let found = m.reservation(&OnSale::region(), &r.id).await.unwrap().expect("found by id");
        assert_eq!(
            (found.instance_type, found.availability_zone),
            (r.instance_type.clone(), r.availability_zone.clone())
        );
    }
    assert_eq!(fees, offering.fee.amount());
    // A Capacity Block per segment, none an UltraServer's.
    let blocks: Vec<String> = listed.iter().map(|r| r.capacity_block_id.clone().expect("a block id")).collect();
    let facts = m.capacity_blocks_by_id(&OnSale::region(), &blocks).await.unwrap();
    assert_eq!(facts.len(), blocks.len(), "{facts:#?}");
    assert!(facts.iter().all(|f| f.ultraserver_type.is_none() && f.reservation_ids.len() == 1), "{facts:#?}");
}

async fn each_segment_pays_on_its_own<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    let ids = buy_all(m, segmented(m, &segment_types()).await, "i-segment-parts").await;
    c.fail_payment(&ids[1]).await;
    c.advance(Duration::minutes(5) + Duration::seconds(1)).await;
    assert_eq!(state(m, &ids[0]).await, "scheduled", "the first segment is held");
    assert_eq!(state(m, &ids[1]).await, "payment-failed", "the other failed alone");
    c.advance(Duration::minutes(60)).await;
    assert_eq!(state(m, &ids[1]).await, "not found");
    assert_eq!(tagged(m, "i-segment-parts").await, vec![ids[0].clone()]);
}

/// Where EC2 does not take `InstanceTypePreferences`, under `segmented_for_one_type = "never"`:
/// no question finds the segmented offering, whatever types it names.
async fn a_one_type_question_never_finds_a_segmented_offering<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    for types in [segment_types(), segment_types()[..1].to_vec(), vec![OnSale::SEGMENTS[1].0]] {
        assert_eq!(m.offerings(&segmented_query(&types)).await.unwrap(), vec![], "{types:?}");
    }
    assert_eq!(m.offerings(&p5_query()).await.unwrap().len(), OnSale::P5_START_DAYS.len(), "the others are found");
}

/// Where EC2 does not take `InstanceTypePreferences`, under `"first_segment"`: a question naming
/// the first segment's type finds the segmented offering, segments and all, and buys it whole;
/// one naming only another segment's type does not.
async fn a_one_type_question_finds_a_segmented_offering_by_its_first_segment<M: Ec2Ports, C: Ec2Control>(m: &M, _: &C) {
    let offering = segmented(m, &segment_types()[..1]).await;
    assert_eq!(m.offerings(&segmented_query(&[OnSale::SEGMENTS[1].0])).await.unwrap(), vec![]);
    let ids = buy_all(m, offering, "i-first-segment").await;
    assert_eq!(ids.len(), OnSale::SEGMENTS.len(), "one reservation per segment: {ids:?}");
    let mut listed = tagged(m, "i-first-segment").await;
    listed.sort();
    let mut ids = ids;
    ids.sort();
    assert_eq!(listed, ids);
}

async fn a_reservation_s_usage_counts_every_account_in_it<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C) {
    // A p5 block (UltraServer blocks cannot be shared): its one instance is a member account's,
    // run through the block's share; the owner's stopped one held its place for a few minutes.
    let r = buy(m, "i-used").await;
    let region = OnSale::region();
    c.advance(r.start - t0() + Duration::minutes(1)).await;
    assert_eq!(state(m, &r.id).await, "active");
    c.run_instances(&r.id, OnSale::ACCOUNT, 0).await;
    c.run_instances(&r.id, OnSale::MEMBER, 1).await;
    c.advance(Duration::minutes(10)).await;
    let u = m.reservation_usage(&region, &r.id).await.expect("its usage");
    assert_eq!((u.reservation_id.as_str(), u.state.as_str(), u.total, u.available), (r.id.as_str(), "active", 1, 0));
    let accounts = vec![(OnSale::ACCOUNT.to_string(), 0), (OnSale::MEMBER.to_string(), 1)];
    assert_eq!(u.accounts, accounts, "the owner's, then the member's");
    assert_eq!(u.in_use(), 1);
    assert_eq!(available(m, &r.id).await, Some(0), "DescribeCapacityReservations' count agrees");
    // The member stops it: after a few minutes its place is available and it uses nothing.
    c.run_instances(&r.id, OnSale::MEMBER, 0).await;
    c.advance(Duration::minutes(10)).await;
    let u = m.reservation_usage(&region, &r.id).await.expect("its usage");
    assert_eq!((u.available, u.accounts.clone()), (1, vec![(OnSale::ACCOUNT.to_string(), 0)]));
    assert_eq!(available(m, &r.id).await, Some(1), "what the tracker samples an idle block by");
    // A reservation EC2 does not know: refused by name.
    let e = m.reservation_usage(&region, "cr-0123456789abcdef0").await.expect_err("unknown");
    assert_eq!(e.code(), Some("InvalidCapacityReservationId.NotFound"), "{e}");
}

async fn a_block_s_status_counts_instances_in_use_unavailable_where_the_reading_does<M: Ec2Ports, C: Ec2Control>(
    m: &M,
    c: &C,
) {
    block_status_under(m, c, UnavailableCounts::InUse).await;
}

async fn a_block_s_status_counts_only_failures_unavailable_where_the_reading_does<M: Ec2Ports, C: Ec2Control>(
    m: &M,
    c: &C,
) {
    block_status_under(m, c, UnavailableCounts::Failed).await;
}

/// One UltraServer's block of 4: no status before its start (left out), then, with the
/// owner's 2 instances running and 1 taken out, its interconnect and counts, the unavailable
/// count as `reading` has it, and capblock's judgement from them (one failure) the same under
/// both readings.
async fn block_status_under<M: Ec2Ports, C: Ec2Control>(m: &M, c: &C, reading: UnavailableCounts) {
    let (r, _) = buy_ultra(m, "i-status").await;
    let region = OnSale::region();
    let block = r.capacity_block_id.clone().expect("a block id");
    let scheduled = m.block_status(&region, std::slice::from_ref(&block)).await.expect("no status, no error");
    assert_eq!(scheduled, vec![], "not active yet: left out");
    c.advance(r.start - t0() + Duration::minutes(1)).await;
    c.run_instances(&r.id, OnSale::ACCOUNT, 2).await;
    c.set_health(&r.id, "impaired", 1).await;
    // Past the minutes the instances stopped here hold their places (the in-memory EC2 frees
    // them at once).
    c.advance(Duration::minutes(10)).await;
    let status = m.block_status(&region, std::slice::from_ref(&block)).await.expect("its status");
    let [s] = status.as_slice() else { panic!("one block asked, one answered: {status:?}") };
    assert_eq!((s.capacity_block_id.as_str(), &s.interconnect), (block.as_str(), &Interconnect::Impaired));
    let unavailable = match reading {
        UnavailableCounts::InUse => 3,
        UnavailableCounts::Failed => 1,
    };
    assert_eq!(s.counts_of(&r.id), Some(StatusCounts { total: 4, available: 1, unavailable }), "{s:?}");
    let usage = m.reservation_usage(&region, &r.id).await.expect("its usage");
    assert_eq!((usage.in_use(), usage.available), (2, 1), "{usage:?}");
    let health = s.health_of(&r.id, Some(usage.in_use())).expect("judged");
    assert_eq!((health.total, health.unavailable, health.interconnect), (4, 1, Interconnect::Impaired));
}

/// Reservation `id`'s `AvailableInstanceCount` as EC2 describes it now.
async fn available<M: Ec2Ports>(m: &M, id: &str) -> Option<u32> {
    let Observed::Found { available, .. } = described(m, id).await else { unreachable!() };
    available
}

/// Reservation `id`'s end as EC2 describes it now.
async fn end_of<M: Ec2Ports>(m: &M, id: &str) -> DateTime<Utc> {
    let Observed::Found { end, .. } = described(m, id).await else { unreachable!() };
    end
}

/// Reservation `id` as EC2 describes it now, found and readable.
async fn described<M: Ec2Ports>(m: &M, id: &str) -> Observed {
    match &m.observe(&OnSale::region(), &[id.to_string()]).await.unwrap()[..] {
        [(_, found @ Observed::Found { .. })] => found.clone(),
        other => panic!("{id}: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use chrono::{DateTime, Duration, Utc};
    use rust_decimal::Decimal;

    use super::{Ec2Control, OnSale, Setup, t0};
    use crate::contract::fixtures::day_offering;
    use crate::domain::block::Reservation;
    use crate::domain::health::Interconnect;
    use crate::domain::money::Money;
    use crate::domain::offering::{Offering, RawOffering, RawSegment};
    use crate::memory::{Listing, MemoryEc2, PaymentOutcome};

    /// The in-memory EC2 opened under a setup, and its clock.
    struct OnMemory {
        ec2: MemoryEc2,
        now: Arc<Mutex<DateTime<Utc>>>,
    }

    #[async_trait]
    impl Ec2Control for OnMemory {
        async fn advance(&self, by: Duration) {
            let now = {
                let mut now = self.now.lock().unwrap();
                *now += by;
                *now
            };
            self.ec2.set_now(now);
        }
        async fn fail_payment(&self, id: &str) {
            self.ec2.fail_payment(id);
        }
        async fn run_instances(&self, id: &str, account: &str, n: u32) {
            self.ec2.run_instances(id, account, n);
        }
        async fn set_health(&self, id: &str, interconnect: &str, unavailable: u32) {
            self.ec2.set_health(id, Interconnect::from_ec2(interconnect), unavailable);
        }
    }

    /// The contract's segmented offering, as EC2 describes it (the top level its first
    /// segment's, the fee the total).
    fn segmented() -> Offering {
        let start = OnSale::start(OnSale::SEGMENTED_START_DAYS);
        let (first_type, first_zone, first_count, _) = OnSale::SEGMENTS[0];
        let mut raw = day_offering(
            "cb-0000000000000000a",
            first_type,
            first_count as i32,
            first_zone,
            start,
            &OnSale::segmented_fee().to_string(),
        );
        raw.segments = OnSale::SEGMENTS
            .iter()
            .map(|(t, z, n, fee)| RawSegment {
                instance_type: Some((*t).into()),
                availability_zone: Some((*z).into()),
                instance_count: Some(*n as i32),
                start_date: Some(start),
                end_date: Some(start + Duration::days(1)),
                upfront_fee: Some(format!("{fee}.00")),
                currency_code: Some("USD".into()),
                zone_type: Some("availability-zone".into()),
            })
            .collect();
        Offering::parse(&OnSale::region(), raw).expect("a valid segmented offering")
    }

    fn offering(n: u32, days: u32, instance_type: &str, count: i32, fee: Decimal, ultra: bool) -> Offering {
        let id = format!("cb-{n:017x}");
        let raw = day_offering(&id, instance_type, count, OnSale::ZONE, OnSale::start(days), &fee.to_string());
        let raw = RawOffering {
            ultraserver_type: ultra.then(|| "u-trn2x64".into()),
            ultraserver_count: ultra.then_some(OnSale::ULTRA_COUNT as i32),
            ..raw
        };
        Offering::parse(&OnSale::region(), raw).expect("a valid offering")
    }

    /// The contract's market, played by the in-memory EC2 under `setup`.
    fn open(setup: Setup) -> OnMemory {
        let now = Arc::new(Mutex::new(t0()));
        let mut market: Vec<Offering> = OnSale::P5_START_DAYS
            .iter()
            .zip(1..)
            .map(|(days, n)| offering(n, *days, "p5.48xlarge", 1, OnSale::p5_fee(), false))
            .collect();
        market.push(offering(9, 1, "trn2u.48xlarge", 8, OnSale::ultra_fee(), true));
        market.push(segmented());
        let clock = now.clone();
        let payment = setup.clone();
        let extension = setup.clone();
        let ec2 = MemoryEc2::default()
            .with_offerings(market)
            .with_type_questions(setup.questions)
            .with_unavailable_counts(setup.unavailable)
            .with_payment(move |o, _| {
                let bought = *clock.lock().unwrap();
                let outcome =
                    if payment.payment == super::Payment::Fail { PaymentOutcome::Failed } else { PaymentOutcome::Paid };
                (payment.payment_ends(bought, o.start) - bought, outcome)
            })
            .with_extension_payment(move |_| (extension.payment_delay, PaymentOutcome::Paid))
            .with_listing(move |_, _| Listing {
                late: setup.listing_lag,
                unreadable_for: Duration::zero(),
                unlisted: (setup.stale_listing > Duration::zero())
                    .then(|| (setup.listing_lag + Duration::minutes(1), setup.stale_listing)),
                twice: setup.listed_twice,
            })
            .with_extension_fees(|r: &Reservation, hours| {
                let per_hour = Decimal::from(8 * r.instance_count) * OnSale::P5_PRICE.parse::<Decimal>().ok()?;
                Money::usd(per_hour * Decimal::from(hours)).ok()
            });
        ec2.set_now(t0());
        OnMemory { ec2, now }
    }

    macro_rules! on_memory {
        ($($name:ident: $setup:expr),* $(,)?) => {
            $(
                #[tokio::test]
                async fn $name() {
                    let name = stringify!($name);
                    let m = open(super::setup(name));
                    super::run(name, &m.ec2, &m).await;
                }
            )*
        };
    }

    crate::ec2_contract_cases!(on_memory);

    #[test]
    fn the_in_memory_ec2_owns_its_blocks_as_the_simulator_s_account() {
        assert_eq!(MemoryEc2::OWNER, OnSale::ACCOUNT);
    }

    #[test]
    fn every_case_has_a_setup() {
        for name in super::CASES {
            let _ = super::setup(name);
        }
    }
}
