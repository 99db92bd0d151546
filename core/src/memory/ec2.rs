//! EC2's Capacity Block calls in memory, on a clock the caller moves (`set_now`).
//!
//! What it keeps is what capblock's money depends on, as `infra/market-sim` (the independent
//! model of EC2 the local stack runs) and EC2 play it: an offering sold to every call that asks
//! (no ClientToken: each call buys) until its stock, if one is set, runs out; a purchase that
//! makes one reservation per UltraServer carrying the request's tags, each part with a payment
//! window of its own that ends paid (`scheduled`, then `active`, then `expired`) or failed
//! (`payment-failed`, then gone), so one part may fail while another is held; a segmented
//! offering (EC2 since 2026-11-17) bought the same way, one reservation per segment with its
//! segment's zone, type, count and fee, and found by a question as the simulator's readings of
//! the record answer it (`TypeQuestions`); extensions whose
//! payment stays pending, then succeeds (the block's end moves) or fails (it does not); and
//! listings as stale as EC2's eventual consistency makes them (a reservation listed late,
//! un-listed for a while after it was listed, or listed twice in one answer). It counts every
//! PurchaseCapacityBlock that bought, per intent tag: the number the money promise bounds.
//! `crate::contract::ec2` holds it to the simulator: the same cases run on both.
//!
//! A block's health is played as the simulator plays it: an active block's interconnect and the
//! instances taken out of it (`set_health`), the instances each account runs in it
//! (`run_instances`), and DescribeCapacityBlockStatus's unavailable count under either reading
//! of the record (`UnavailableCounts`).
//!
//! What it leaves out (the owner's instances by id, quotas) answers empty: the workflows treat
//! those as "not known", which their own unit tests cover.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use rust_decimal::{Decimal, RoundingStrategy};

use crate::domain::block::Reservation;
use crate::domain::extension::{ExtensionOffer, ExtensionReceipt};
use crate::domain::health::{CapacityStatus, Interconnect, ReservationUsage, StatusCounts};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::lifecycle::Observed;
use crate::domain::money::Money;
use crate::domain::offering::Offering;
use crate::domain::tags::INTENT_TAG;
use crate::ports::*;

/// A reservation as EC2 holds it now.
#[derive(Debug, Clone)]
pub struct Holding {
    pub reservation: Reservation,
    /// The purchase it is a part of: its first part's id.
    pub purchase: String,
    /// Whether EC2 may charge for it: its payment has not failed.
    pub charged: bool,
    /// What EC2 charges for it: a segment's own fee, an UltraServer's share of the purchase's,
    /// or the whole (None: a reservation a test seeded).
    pub fee: Option<Money>,
}

/// Which questions a segmented offering answers: the readings of the record the simulator
/// plays (its README, "Segmented offerings and ten-type questions"). A question here is its
/// types (`OfferingQuery::types`), as the EC2 adapter asks them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TypeQuestions {
    /// EC2 takes `InstanceTypePreferences` (the simulator's default): the types in one call,
    /// answered a segmented offering when they name every segment's type.
    #[default]
    Preferences,
    /// EC2 refuses the list as unknown (`instance_type_preferences = "unknown"`), so the types
    /// are asked one per call, and a one-type question never answers a segmented offering
    /// (`segmented_for_one_type = "never"`).
    OneTypeNever,
    /// One type per call as above, a one-type question answering a segmented offering when it
    /// names the first segment's type (`segmented_for_one_type = "first_segment"`).
    OneTypeFirstSegment,
}

impl TypeQuestions {
    /// Whether a question of `types` finds `segmented` (an offering of segments).
    fn finds(self, segmented: &Offering, types: &[&InstanceType]) -> bool {
        match self {
            TypeQuestions::Preferences => segmented.segments.iter().all(|s| types.contains(&&s.instance_type)),
            TypeQuestions::OneTypeNever => false,
            // Its top-level type is its first segment's.
            TypeQuestions::OneTypeFirstSegment => types.contains(&&segmented.instance_type),
        }
    }
}

/// What DescribeCapacityBlockStatus's unavailable count holds: the readings of the record the
/// simulator plays (`unavailable_means`; its README, "What unavailable counts").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnavailableCounts {
    /// The instances taken out and every instance in use, so available and unavailable make the
    /// total (the simulator's default, `"in_use"`).
    #[default]
    InUse,
    /// Only the instances taken out (`"failed"`).
    Failed,
}

/// How a purchase's payment ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentOutcome {
    Paid,
    Failed,
}

/// How DescribeCapacityReservations shows one reservation after its purchase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Listing {
    /// Listed only this long after the purchase.
    pub late: Duration,
    /// Described without a field capblock needs for this long after the purchase.
    pub unreadable_for: Duration,
    /// Un-listed again for a while once listed: from this long after the purchase, for this long.
    pub unlisted: Option<(Duration, Duration)>,
    /// Listed twice in every answer that lists it.
    pub twice: bool,
}

/// One reservation EC2 made.
#[derive(Debug, Clone)]
struct Made {
    reservation: Reservation,
    /// The purchase it is a part of (the first part's id).
    purchase: String,
    /// When its payment ends, and how.
    settles_at: DateTime<Utc>,
    outcome: PaymentOutcome,
    /// Listed by DescribeCapacityReservations from then on (eventual consistency).
    listed_from: DateTime<Utc>,
    /// Described without a field capblock needs until then.
    unreadable_until: Option<DateTime<Utc>>,
    /// Not listed in this window, though listed before it (a stale read).
    unlisted: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Listed twice in every answer.
    twice: bool,
    /// Seeded by a test: its state is the one it was given, whatever the clock says.
    fixed: bool,
    /// The UltraServer type it is one UltraServer of (EC2 makes a block per UltraServer).
    ultraserver_type: Option<String>,
    /// What EC2 charges for it (None: seeded by a test).
    fee: Option<Money>,
}

#[derive(Default)]
struct Market {
    now: Option<DateTime<Utc>>,
    on_sale: Vec<Offering>,
    made: Vec<Made>,
    /// PurchaseCapacityBlock calls that bought, by the intent tag they carried.
    bought_by_intent: BTreeMap<String, u32>,
    extension_offers: BTreeMap<String, Vec<ExtensionOffer>>,
    extensions: Vec<SoldExtension>,
    /// How many times each offering was sold.
    sold: BTreeMap<String, u32>,
    calls: BTreeMap<&'static str, u64>,
    next_id: u64,
    /// Instances running in each reservation, by account (`run_instances`).
    running: BTreeMap<String, BTreeMap<String, u32>>,
    /// Each reservation's interconnect status and instances taken out (`set_health`).
    health: BTreeMap<String, (Interconnect, u32)>,
}

/// An extension EC2 sold: its record as EC2 describes it once paid, and when and how its
/// payment ends.
#[derive(Debug, Clone)]
struct SoldExtension {
    record: ExtensionRecord,
    settles_at: DateTime<Utc>,
    outcome: PaymentOutcome,
}

impl SoldExtension {
    fn status(&self, now: DateTime<Utc>) -> &'static str {
        match (now >= self.settles_at, self.outcome) {
            (false, _) => "payment-pending",
            (true, PaymentOutcome::Paid) => "payment-succeeded",
            (true, PaymentOutcome::Failed) => "payment-failed",
        }
    }

    fn as_now(&self, now: DateTime<Utc>) -> ExtensionRecord {
        ExtensionRecord { status: self.status(now).into(), ..self.record.clone() }
    }
}

/// How long one part's payment stays pending, and how it ends (the offering, the part's index).
type PaymentPlan = Box<dyn Fn(&Offering, u32) -> (Duration, PaymentOutcome) + Send + Sync>;
/// How each of a purchase's reservations is listed (the offering, the part's index).
type ListingPlan = Box<dyn Fn(&Offering, u32) -> Listing + Send + Sync>;
/// How long an extension's payment stays pending, and how it ends.
type ExtensionPaymentPlan = Box<dyn Fn(&ExtensionOffer) -> (Duration, PaymentOutcome) + Send + Sync>;
/// The fee of an extension of a reservation by so many hours (`None`: not offered).
type ExtensionFeePlan = Box<dyn Fn(&Reservation, u32) -> Option<Money> + Send + Sync>;
/// How many times an offering sells before it is gone (`None`: to every call).
type StockPlan = Box<dyn Fn(&Offering) -> Option<u32> + Send + Sync>;

/// EC2 in memory. `Default` sells nothing, sells an offering to every call, and pays every
/// purchase and extension at once.
pub struct MemoryEc2 {
    market: Mutex<Market>,
    /// How long each part's payment stays pending, and how it ends.
    payment: PaymentPlan,
    /// How each part is listed.
    listing: ListingPlan,
    /// How long each extension's payment stays pending, and how it ends.
    extension_payment: ExtensionPaymentPlan,
    /// How many times each offering sells.
    stock: StockPlan,
    /// Extensions EC2 offers of its own accord, as the simulator does (`None`: only those a test
    /// offers with `offer_extension`).
    extension_fee: Option<ExtensionFeePlan>,
    /// How long a failed payment's reservations stay listed before EC2 drops them.
    failed_visible_for: Duration,
    /// Which questions a segmented offering answers.
    questions: TypeQuestions,
    /// What the block status's unavailable count holds.
    unavailable: UnavailableCounts,
}

impl Default for MemoryEc2 {
    fn default() -> Self {
        MemoryEc2 {
            market: Mutex::default(),
            payment: Box::new(|_, _| (Duration::zero(), PaymentOutcome::Paid)),
            listing: Box::new(|_, _| Listing::default()),
            extension_payment: Box::new(|_| (Duration::zero(), PaymentOutcome::Paid)),
            // EC2 takes no ClientToken: every call that finds the offering on sale buys.
            stock: Box::new(|_| None),
            extension_fee: None,
            // The user guide: payment-failed reservations are shown for a while, then gone.
            failed_visible_for: Duration::hours(1),
            questions: TypeQuestions::default(),
            unavailable: UnavailableCounts::default(),
        }
    }
}

fn op<'a>(m: &'a mut Market, name: &'static str) -> &'a mut Market {
    *m.calls.entry(name).or_default() += 1;
    m
}

impl MemoryEc2 {
    /// The account that buys and owns the blocks (the simulator's default account).
    pub const OWNER: &'static str = "111122223333";

    /// `n` instances of `account` run in reservation `id` from now on (the owner's, or another
    /// account's through a share): GetCapacityReservationUsage counts them, and they are no
    /// longer available. Stopped instances free their places at once here.
    pub fn run_instances(&self, id: &str, account: &str, n: u32) {
        let mut m = self.market();
        m.running.entry(id.to_string()).or_default().insert(account.to_string(), n);
    }

    /// Reservation `id`'s interconnect is `interconnect` and `unavailable` of its instances are
    /// taken out from now on (the simulator's `POST /_sim/blocks/health`): they cannot be
    /// launched, and DescribeCapacityBlockStatus counts them unavailable under either reading.
    pub fn set_health(&self, id: &str, interconnect: Interconnect, unavailable: u32) {
        self.market().health.insert(id.to_string(), (interconnect, unavailable));
    }

    /// Reservation `id`, seeded with `with_reservations`, is an UltraServer of `ultraserver_type`
    /// in DescribeCapacityBlocks' answer (as one bought from an UltraServer offering is).
    pub fn with_ultraserver(self, id: &str, ultraserver_type: &str) -> Self {
        for x in self.market().made.iter_mut().filter(|x| x.reservation.id == id) {
            x.ultraserver_type = Some(ultraserver_type.to_string());
        }
        self
    }

    fn market(&self) -> MutexGuard<'_, Market> {
        self.market.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(m: &Market) -> DateTime<Utc> {
        m.now.unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
    }

    /// Each part's payment (the offering, the part's index): pending for the duration, then
    /// paid or failed. An UltraServer purchase's parts may end differently.
    pub fn with_payment(
        mut self,
        f: impl Fn(&Offering, u32) -> (Duration, PaymentOutcome) + Send + Sync + 'static,
    ) -> Self {
        self.payment = Box::new(f);
        self
    }

    /// How each part of a purchase is listed (the offering, the part's index).
    pub fn with_listing(mut self, f: impl Fn(&Offering, u32) -> Listing + Send + Sync + 'static) -> Self {
        self.listing = Box::new(f);
        self
    }

    /// Each extension's payment: pending for the duration, then succeeded (the block's end
    /// moves then) or failed (it never moves).
    pub fn with_extension_payment(
        mut self,
        f: impl Fn(&ExtensionOffer) -> (Duration, PaymentOutcome) + Send + Sync + 'static,
    ) -> Self {
        self.extension_payment = Box::new(f);
        self
    }

    /// How many times each offering sells before EC2 takes it off sale (`None`: until the
    /// market takes it off).
    pub fn with_stock(mut self, f: impl Fn(&Offering) -> Option<u32> + Send + Sync + 'static) -> Self {
        self.stock = Box::new(f);
        self
    }

    /// EC2 offers extensions itself, as the simulator plays the API reference: one of each
    /// length asked, for a block scheduled or active with no extension awaiting payment, from 56
    /// days to an hour before its end, at the fee `fee` gives (the reservation, the hours).
    pub fn with_extension_fees(
        mut self,
        fee: impl Fn(&Reservation, u32) -> Option<Money> + Send + Sync + 'static,
    ) -> Self {
        self.extension_fee = Some(Box::new(fee));
        self
    }

    /// Which questions a segmented offering answers (the simulator's readings).
    pub fn with_type_questions(mut self, questions: TypeQuestions) -> Self {
        self.questions = questions;
        self
    }

    /// What DescribeCapacityBlockStatus's unavailable count holds (the simulator's readings).
    pub fn with_unavailable_counts(mut self, reading: UnavailableCounts) -> Self {
        self.unavailable = reading;
        self
    }

    /// Offers `offerings` for sale.
    pub fn with_offerings(self, offerings: impl IntoIterator<Item = Offering>) -> Self {
        self.market().on_sale.extend(offerings);
        self
    }

    /// Reservations that exist already (bought by hand or earlier), listed and readable, each
    /// in the state it is given whatever the clock says (`payment-failed`: never charged).
    pub fn with_reservations(self, reservations: impl IntoIterator<Item = Reservation>) -> Self {
        {
            let mut m = self.market();
            let now = Self::now(&m);
            for r in reservations {
                let failed = r.state == "payment-failed";
                m.made.push(Made {
                    purchase: r.id.clone(),
                    settles_at: now,
                    outcome: if failed { PaymentOutcome::Failed } else { PaymentOutcome::Paid },
                    listed_from: DateTime::<Utc>::UNIX_EPOCH,
                    unreadable_until: None,
                    unlisted: None,
                    twice: false,
                    fixed: true,
                    ultraserver_type: None,
                    fee: None,
                    reservation: r,
                });
            }
        }
        self
    }

    /// The clock EC2 judges its states by. An extension whose payment succeeded by then has
    /// moved its block's end.
    pub fn set_now(&self, now: DateTime<Utc>) {
        let mut m = self.market();
        m.now = Some(now);
        Self::settle_extensions(&mut m);
    }

    fn settle_extensions(m: &mut Market) {
        let now = Self::now(m);
        let paid: Vec<(String, DateTime<Utc>)> = m
            .extensions
            .iter()
            .filter(|x| x.status(now) == "payment-succeeded")
            .filter_map(|x| Some((x.record.reservation_id.clone(), x.record.end?)))
            .collect();
        for (id, end) in paid {
            if let Some(x) = m.made.iter_mut().find(|x| x.reservation.id == id && x.reservation.end < end) {
                x.reservation.end = end;
            }
        }
    }

    /// Puts `offerings` on sale (more of the market).
    pub fn offer(&self, offerings: impl IntoIterator<Item = Offering>) {
        self.market().on_sale.extend(offerings);
    }

    /// Takes off sale every offering `keep` refuses (the market moving on).
    pub fn retain_offerings(&self, keep: impl Fn(&Offering) -> bool) {
        self.market().on_sale.retain(|o| keep(o));
    }

    /// The payment of reservation `id` fails when it would have been taken (a part of an
    /// UltraServer purchase failing alone, as the simulator's `POST /_sim/payment` fails it).
    pub fn fail_payment(&self, id: &str) {
        if let Some(x) = self.market().made.iter_mut().find(|x| x.reservation.id == id && !x.fixed) {
            x.outcome = PaymentOutcome::Failed;
        }
    }

    /// Offers an extension of `reservation_id`.
    pub fn offer_extension(&self, offer: ExtensionOffer) {
        self.market().extension_offers.entry(offer.reservation_id.clone()).or_default().push(offer);
    }

    /// PurchaseCapacityBlock calls that bought, by the intent tag they carried.
    pub fn purchases_by_intent(&self) -> BTreeMap<String, u32> {
        self.market().bought_by_intent.clone()
    }

    /// How many times each call was made.
    pub fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.market().calls.clone()
    }

    /// Every reservation EC2 made or knows, as it stands at the clock, with the purchase it is
    /// a part of (its first part's id) and whether EC2 may still charge for it (its payment did
    /// not fail): what the money promise is judged by.
    pub fn holdings(&self) -> Vec<Holding> {
        let m = self.market();
        let now = Self::now(&m);
        m.made
            .iter()
            .map(|x| Holding {
                reservation: Self::as_now(x, now),
                purchase: x.purchase.clone(),
                charged: !(x.outcome == PaymentOutcome::Failed && now >= x.settles_at),
                fee: x.fee,
            })
            .collect()
    }

    /// Every extension EC2 sold (PurchaseCapacityBlockExtension calls that bought), with its
    /// payment's status at the clock (a failed one EC2 does not charge).
    pub fn extensions_sold(&self) -> Vec<ExtensionRecord> {
        let m = self.market();
        let now = Self::now(&m);
        m.extensions.iter().map(|x| x.as_now(now)).collect()
    }

    /// How many PurchaseCapacityBlock calls bought (DryRun and refused ones are not counted).
    pub fn purchases_made(&self) -> u64 {
        self.market().bought_by_intent.values().map(|n| u64::from(*n)).sum()
    }

    /// Offerings on sale now.
    pub fn on_sale(&self) -> Vec<Offering> {
        self.market().on_sale.clone()
    }

    fn state(x: &Made, now: DateTime<Utc>) -> String {
        if x.fixed {
            return x.reservation.state.clone();
        }
        let s = match (now >= x.settles_at, x.outcome) {
            (false, _) => "payment-pending",
            (true, PaymentOutcome::Failed) => "payment-failed",
            (true, PaymentOutcome::Paid) if now < x.reservation.start => "scheduled",
            (true, PaymentOutcome::Paid) if now < x.reservation.end => "active",
            (true, PaymentOutcome::Paid) => "expired",
        };
        s.to_string()
    }

    fn as_now(x: &Made, now: DateTime<Utc>) -> Reservation {
        let mut r = x.reservation.clone();
        r.state = Self::state(x, now);
        r
    }

    /// Whether EC2 still shows the reservation at all (a failed payment's go after a while).
    fn shown(&self, x: &Made, now: DateTime<Utc>) -> bool {
        x.fixed || !(x.outcome == PaymentOutcome::Failed && now >= x.settles_at + self.failed_visible_for)
    }

    fn listed(&self, x: &Made, now: DateTime<Utc>) -> bool {
        let stale = x.unlisted.is_some_and(|(from, until)| now >= from && now < until);
        self.shown(x, now) && now >= x.listed_from && !stale
    }

    /// How many times an answer that lists `x` lists it.
    fn copies(x: &Made) -> usize {
        if x.twice { 2 } else { 1 }
    }

    fn unreadable(x: &Made, now: DateTime<Utc>) -> bool {
        x.unreadable_until.is_some_and(|u| now < u)
    }

    /// The extension EC2 offers of its own accord now, when it prices them (`with_extension_fees`).
    fn priced_extension(&self, m: &Market, reservation_id: &str, hours: u32) -> Option<ExtensionOffer> {
        let fee = self.extension_fee.as_ref()?;
        let now = Self::now(m);
        let x = m.made.iter().find(|x| x.reservation.id == reservation_id && self.listed(x, now))?;
        let r = Self::as_now(x, now);
        let awaiting = m
            .extensions
            .iter()
            .any(|e| e.record.reservation_id == reservation_id && e.status(now) == "payment-pending");
        let window = now >= r.end - Duration::days(56) && now <= r.end - Duration::hours(1);
        if !matches!(r.state.as_str(), "scheduled" | "active") || awaiting || !window {
            return None;
        }
        // One id per block, length and end: asked again, the same offering.
        let id = format!("cbe-{}-{hours}h-{}", reservation_id.trim_start_matches("cr-"), r.end.timestamp());
        Some(ExtensionOffer {
            id,
            reservation_id: reservation_id.to_string(),
            duration_hours: hours,
            start: r.end,
            end: r.end + Duration::hours(i64::from(hours)),
            fee: fee(&r, hours)?,
        })
    }
}

fn rejected(operation: &'static str, region: &Region, code: &str, message: &str) -> MarketError {
    MarketError::Rejected { operation, region: region.to_string(), code: code.into(), message: message.into() }
}

#[async_trait]
impl OfferingSource for MemoryEc2 {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityBlockOfferings");
        let types = q.types();
        // Offerings of any of the question's types, as EC2 answers `InstanceTypePreferences` (or
        // the adapter's one call per type); a segmented one as `questions` reads the record.
        let asked = |o: &Offering| match (o.segments.is_empty(), &q.ultraservers) {
            (true, Some(_)) => o.instance_type == q.instance_type,
            (true, None) => types.contains(&&o.instance_type),
            (false, Some(_)) => false,
            (false, None) => self.questions.finds(o, &types),
        };
        let fits = |o: &&Offering| {
            o.region == q.region
                && asked(o)
                && o.instance_count == q.instance_count
                && o.duration_hours == q.duration_hours
                && o.start >= q.start_from
                && o.start <= q.start_to
        };
        Ok(m.on_sale.iter().filter(fits).cloned().collect())
    }
}

#[async_trait]
impl InstanceTypeSource for MemoryEc2 {
    async fn accelerators(&self, _: &Region, types: &[InstanceType]) -> Result<Vec<(InstanceType, u32)>, MarketError> {
        // Every accelerated type capblock's examples use has 8 or 16 per instance; 8 is enough
        // for the workflows, which take the count as given.
        let per = |t: &InstanceType| if t.as_str().starts_with("trn") { 16 } else { 8 };
        Ok(types.iter().map(|t| (t.clone(), per(t))).collect())
    }
}

#[async_trait]
impl QuotaSource for MemoryEc2 {
    async fn capacity_block_quota(&self, _: &Region, _: &str) -> Option<u32> {
        None
    }
}

/// One reservation a purchase makes.
struct Part {
    availability_zone: String,
    instance_type: InstanceType,
    instance_count: u32,
    fee: Money,
    ultraserver_type: Option<String>,
}

/// The reservations a purchase of `offering` makes, as the simulator makes them
/// (`reservations_of`): one per segment of a segmented offering, each its segment's zone, type,
/// count and fee; one per UltraServer, the fee shared evenly, the cents left over to the first;
/// else the one, at the whole fee.
fn parts_of(offering: &Offering) -> Vec<Part> {
    if !offering.segments.is_empty() {
        let part = |s: &crate::domain::offering::OfferingSegment| Part {
            availability_zone: s.availability_zone.clone(),
            instance_type: s.instance_type.clone(),
            instance_count: s.instance_count,
            fee: s.fee,
            ultraserver_type: None,
        };
        return offering.segments.iter().map(part).collect();
    }
    let n = offering.ultraservers.as_ref().map_or(1, |u| u.count.max(1));
    // EC2 names the UltraServer type on each of its blocks (an unknown one by its instances).
    let ultraserver_type = match &offering.ultraservers {
        Some(u) => Some(u.kind.to_string()),
        None => offering.ultraserver.then(|| offering.instance_type.to_string()),
    };
    let fee = offering.fee;
    let share = (fee.amount() / Decimal::from(n)).round_dp_with_strategy(2, RoundingStrategy::ToZero);
    (0..n)
        .map(|index| {
            let amount = if index == 0 { fee.amount() - share * Decimal::from(n - 1) } else { share };
            Part {
                availability_zone: offering.availability_zone.clone(),
                instance_type: offering.instance_type.clone(),
                instance_count: offering.instance_count / n,
                // A share of a valid fee is a valid amount in its currency.
                fee: Money::new(amount, fee.currency()).unwrap_or(fee),
                ultraserver_type: ultraserver_type.clone(),
            }
        })
        .collect()
}

#[async_trait]
impl Purchaser for MemoryEc2 {
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError> {
        const OP: &str = "PurchaseCapacityBlock";
        let region = req.offering.region.clone();
        let mut m = self.market();
        op(&mut m, OP);
        let now = Self::now(&m);
        let Some(at) = m.on_sale.iter().position(|o| o.id == req.offering.id) else {
            return Err(rejected(OP, &region, OFFERING_ID_EXPIRED, "the offering is no longer on sale"));
        };
        if req.dry_run {
            return Ok(PurchaseOutcome::WouldSucceed);
        }
        let offering = m.on_sale[at].clone();
        let sold = {
            let n = m.sold.entry(offering.id.clone()).or_default();
            *n += 1;
            *n
        };
        if (self.stock)(&offering).is_some_and(|stock| sold >= stock) {
            m.on_sale.remove(at);
        }
        let parts = parts_of(&offering);
        let mut ids = Vec::new();
        for _ in &parts {
            m.next_id += 1;
            ids.push(format!("cr-{:017x}", m.next_id));
        }
        for ((index, part), id) in (0u32..).zip(parts).zip(&ids) {
            let (pending, outcome) = (self.payment)(&offering, index);
            let listing = (self.listing)(&offering, index);
            let reservation = Reservation {
                id: id.clone(),
                arn: Some(format!("arn:aws:ec2:{region}:123456789012:capacity-reservation/{id}")),
                region: region.clone(),
                availability_zone: part.availability_zone,
                instance_type: part.instance_type,
                instance_count: part.instance_count,
                start: offering.start,
                end: offering.end,
                state: "payment-pending".into(),
                reservation_type: Some("capacity-block".into()),
                tags: req.tags.clone(),
                capacity_block_id: Some(format!("cb-{}", &id[3..])),
            };
            m.made.push(Made {
                reservation,
                purchase: ids[0].clone(),
                settles_at: now + pending,
                outcome,
                listed_from: now + listing.late,
                unreadable_until: (listing.unreadable_for > Duration::zero()).then_some(now + listing.unreadable_for),
                unlisted: listing.unlisted.map(|(after, lasting)| (now + after, now + after + lasting)),
                twice: listing.twice,
                fixed: false,
                ultraserver_type: part.ultraserver_type,
                fee: Some(part.fee),
            });
        }
        if let Some(tag) = req.tags.get(INTENT_TAG) {
            *m.bought_by_intent.entry(tag.clone()).or_default() += 1;
        }
        let first = m.made.iter().find(|x| x.reservation.id == ids[0]).expect("just made");
        let reservation = Self::as_now(first, now);
        Ok(PurchaseOutcome::Bought(Box::new(Purchase { reservation, more: ids[1..].to_vec() })))
    }
}

#[async_trait]
impl ReservationSource for MemoryEc2 {
    async fn reservations_tagged(&self, region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityReservations");
        let now = Self::now(&m);
        let mut tagged = Tagged::default();
        for x in &m.made {
            let r = &x.reservation;
            if &r.region != region || r.tags.get(key).is_none_or(|v| v != value) || !self.listed(x, now) {
                continue;
            }
            for _ in 0..Self::copies(x) {
                if Self::unreadable(x, now) {
                    tagged.unreadable.push(Unreadable { id: Some(r.id.clone()), reason: "no StartDate".into() });
                } else {
                    tagged.reservations.push(Self::as_now(x, now));
                }
            }
        }
        Ok(tagged)
    }

    async fn observe(&self, _: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityReservations");
        let now = Self::now(&m);
        Ok(ids
            .iter()
            .map(|id| {
                let seen = m.made.iter().find(|x| &x.reservation.id == id && self.listed(x, now));
                let o = match seen {
                    None => Observed::NotFound,
                    Some(x) if Self::unreadable(x, now) => Observed::Unreadable("no EndDate".into()),
                    Some(x) => {
                        let places = Self::places(&m, x, now);
                        // AvailableInstanceCount: an active block's places not in use (nor
                        // taken out), and 0 before the start (the simulator's default
                        // reading of the counts before it) and after the end.
                        let available = if places.state == "active" { places.available } else { 0 };
                        Observed::Found {
                            state: places.state,
                            end: x.reservation.end,
                            capacity_block_id: x.reservation.capacity_block_id.clone(),
                            instance_count: x.reservation.instance_count,
                            available: Some(available),
                        }
                    }
                };
                (id.clone(), o)
            })
            .collect())
    }

    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityReservations");
        let now = Self::now(&m);
        let listed = |x: &&Made| &x.reservation.region == region && self.listed(x, now) && !Self::unreadable(x, now);
        Ok(m.made
            .iter()
            .filter(listed)
            .flat_map(|x| std::iter::repeat_n(Self::as_now(x, now), Self::copies(x)))
            .collect())
    }
}

#[async_trait]
impl ReservationLookup for MemoryEc2 {
    async fn reservation(&self, _: &Region, id: &str) -> Result<Option<Reservation>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityReservations");
        let now = Self::now(&m);
        let found = m.made.iter().find(|x| x.reservation.id == id && self.listed(x, now) && !Self::unreadable(x, now));
        Ok(found.map(|x| Self::as_now(x, now)))
    }
}

#[async_trait]
impl ExtensionMarket for MemoryEc2 {
    async fn extension_offerings(
        &self,
        _: &Region,
        reservation_id: &str,
        duration_hours: u32,
    ) -> Result<Vec<ExtensionOffer>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityBlockExtensionOfferings");
        if let Some(offer) = self.priced_extension(&m, reservation_id, duration_hours) {
            let offers = m.extension_offers.entry(reservation_id.to_string()).or_default();
            offers.retain(|o| o.duration_hours != duration_hours);
            offers.push(offer);
        }
        let offers = m.extension_offers.get(reservation_id).cloned().unwrap_or_default();
        Ok(offers.into_iter().filter(|o| o.duration_hours == duration_hours).collect())
    }

    async fn purchase_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<ExtensionReceipt, MarketError> {
        const OP: &str = "PurchaseCapacityBlockExtension";
        let mut m = self.market();
        op(&mut m, OP);
        let offers = m.extension_offers.get_mut(reservation_id);
        let Some(offer) = offers.and_then(|os| os.iter().position(|o| o.id == offering_id).map(|i| os.remove(i)))
        else {
            return Err(rejected(OP, region, OFFERING_ID_EXPIRED, "the extension is no longer offered"));
        };
        if !m.made.iter().any(|x| x.reservation.id == reservation_id) {
            return Err(rejected(OP, region, "InvalidCapacityReservationId.NotFound", "no such reservation"));
        }
        let (pending, outcome) = (self.extension_payment)(&offer);
        let now = Self::now(&m);
        let sold = SoldExtension {
            record: ExtensionRecord {
                reservation_id: reservation_id.to_string(),
                offering_id: offering_id.to_string(),
                status: String::new(),
                end: Some(offer.end),
            },
            settles_at: now + pending,
            outcome,
        };
        let status = sold.status(now).to_string();
        m.extensions.push(sold);
        Self::settle_extensions(&mut m);
        Ok(ExtensionReceipt {
            offering_id: offering_id.to_string(),
            reservation_id: reservation_id.to_string(),
            status,
            end: Some(offer.end),
        })
    }

    async fn check_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<(), MarketError> {
        let mut m = self.market();
        op(&mut m, "PurchaseCapacityBlockExtension");
        let offered = m.extension_offers.get(reservation_id).is_some_and(|os| os.iter().any(|o| o.id == offering_id));
        if offered {
            Ok(())
        } else {
            Err(rejected(
                "PurchaseCapacityBlockExtension",
                region,
                OFFERING_ID_EXPIRED,
                "the extension is no longer offered",
            ))
        }
    }
}

#[async_trait]
impl ExtensionHistory for MemoryEc2 {
    async fn extension_history(&self, _: &Region, ids: &[String]) -> Result<Vec<ExtensionRecord>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityBlockExtensionHistory");
        let now = Self::now(&m);
        Ok(m.extensions.iter().filter(|x| ids.contains(&x.record.reservation_id)).map(|x| x.as_now(now)).collect())
    }
}

#[async_trait]
impl BlockKinds for MemoryEc2 {
    async fn capacity_blocks_by_id(&self, _: &Region, ids: &[String]) -> Result<Vec<CapacityBlockFacts>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityBlocks");
        let now = Self::now(&m);
        let mut facts: BTreeMap<String, CapacityBlockFacts> = BTreeMap::new();
        for x in m.made.iter().filter(|x| self.shown(x, now)) {
            let Some(id) = &x.reservation.capacity_block_id else { continue };
            if !ids.contains(id) {
                continue;
            }
            let f = facts.entry(id.clone()).or_insert(CapacityBlockFacts {
                capacity_block_id: id.clone(),
                ultraserver_type: x.ultraserver_type.clone(),
                state: Self::state(x, now),
                reservation_ids: vec![],
                tags: x.reservation.tags.clone(),
            });
            f.reservation_ids.push(x.reservation.id.clone());
        }
        Ok(facts.into_values().collect())
    }
}

/// A reservation's places now, as the simulator counts them.
struct Places {
    state: String,
    total: u32,
    /// Taken out (`set_health`).
    failed: u32,
    /// The instances each account runs in it, the owner's first (none before it is active).
    accounts: Vec<(String, u32)>,
    /// The places those hold, never more than the instances not taken out.
    in_use: u32,
    /// What can still be launched.
    available: u32,
}

impl MemoryEc2 {
    fn places(m: &Market, x: &Made, now: DateTime<Utc>) -> Places {
        let id = &x.reservation.id;
        let state = Self::state(x, now);
        let total = x.reservation.instance_count;
        let failed = m.health.get(id).map_or(0, |(_, n)| (*n).min(total));
        let present = total - failed;
        let running = m.running.get(id).cloned().unwrap_or_default();
        // Only an active block runs instances; before its start every instance can be launched.
        let active = state == "active";
        let used = |a: &str| if active { running.get(a).copied().unwrap_or(0) } else { 0 };
        let mut accounts = vec![(Self::OWNER.to_string(), used(Self::OWNER))];
        accounts.extend(running.keys().filter(|a| *a != Self::OWNER && used(a) > 0).map(|a| (a.clone(), used(a))));
        let in_use = accounts.iter().map(|(_, n)| n).sum::<u32>().min(present);
        let available = match state.as_str() {
            "active" => present - in_use,
            "payment-pending" | "scheduled" => present,
            _ => 0,
        };
        Places { state, total, failed, accounts, in_use, available }
    }

    /// DescribeCapacityBlockStatus's entry for block `x`: its interconnect, and its counts with
    /// the unavailable one under this EC2's reading.
    fn status_of(&self, m: &Market, x: &Made, block_id: &str, now: DateTime<Utc>) -> CapacityStatus {
        let p = Self::places(m, x, now);
        let unavailable = match self.unavailable {
            UnavailableCounts::Failed => p.failed,
            UnavailableCounts::InUse => (p.failed + p.in_use).min(p.total),
        };
        let counts = StatusCounts { total: p.total, available: p.available, unavailable };
        let interconnect = m.health.get(&x.reservation.id).map_or(Interconnect::Ok, |(i, _)| i.clone());
        let reservations = vec![(x.reservation.id.clone(), counts)];
        CapacityStatus { capacity_block_id: block_id.to_string(), interconnect, block: counts, reservations }
    }
}

#[async_trait]
impl BlockStatusSource for MemoryEc2 {
    /// The status of each block asked for that has one (an active block's); as the EC2 adapter
    /// answers the port, a block without one (not active yet, over, unknown) is left out, never
    /// the whole answer's error (EC2 refuses such an id, and the adapter asks again without it).
    /// Each block here is one reservation.
    async fn block_status(&self, _: &Region, ids: &[String]) -> Result<Vec<CapacityStatus>, MarketError> {
        let mut m = self.market();
        op(&mut m, "DescribeCapacityBlockStatus");
        let now = Self::now(&m);
        let mut found = Vec::new();
        for x in m.made.iter().filter(|x| self.shown(x, now)) {
            let Some(id) = &x.reservation.capacity_block_id else { continue };
            if ids.contains(id) && matches!(Self::state(x, now).as_str(), "active" | "unavailable") {
                found.push(self.status_of(&m, x, id, now));
            }
        }
        Ok(found)
    }

    async fn reservation_usage(&self, region: &Region, id: &str) -> Result<ReservationUsage, MarketError> {
        const OP: &str = "GetCapacityReservationUsage";
        let mut m = self.market();
        op(&mut m, OP);
        let now = Self::now(&m);
        let Some(x) = m.made.iter().find(|x| x.reservation.id == id && self.listed(x, now)) else {
            return Err(rejected(OP, region, "InvalidCapacityReservationId.NotFound", "no such reservation"));
        };
        let Places { state, total, available, accounts, .. } = Self::places(&m, x, now);
        Ok(ReservationUsage { reservation_id: id.to_string(), total, available, state, accounts })
    }
}

#[async_trait]
impl InstanceSource for MemoryEc2 {
    async fn instances_in(&self, _: &Region, _: &str) -> Result<Vec<String>, MarketError> {
        Ok(vec![])
    }
    async fn reservation_of(&self, _: &Region, _: &str) -> Result<Option<String>, MarketError> {
        Ok(None)
    }
}
