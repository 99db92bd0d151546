//! The seeded fault injector and the ports it stands in front of.
//!
//! Every port call of every actor goes through a gate: the actor may crash there (its run is
//! dropped mid-way, as Lambda drops a function that times out or dies), it may yield so another
//! actor runs in between (the seed decides the interleaving, never a sleep), and the call may
//! fail: EC2 throttles, answers 5xx, or loses its answer before or after it acted; DynamoDB is
//! unavailable. What a fault costs is decided by the seed alone, so a seed replays exactly.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use async_trait::async_trait;
use capblock_core::domain::block::{Block, Reservation};
use capblock_core::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period, ReleasedHold};
use capblock_core::domain::extension::{ExtensionIntent, ExtensionOffer, ExtensionReceipt, ExtensionState};
use capblock_core::domain::health::{CapacityStatus, ReservationUsage};
use capblock_core::domain::ids::{InstanceType, Region};
use capblock_core::domain::lifecycle::Observed;
use capblock_core::domain::offering::Offering;
use capblock_core::domain::plan::RegionMemory;
use capblock_core::domain::request::{Request, RequestDecision};
use capblock_core::domain::rule::Rule;
use capblock_core::memory::{MemoryEc2, MemoryTable};
use capblock_core::ports::*;
use chrono::{DateTime, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How often each fault happens, per call (crashes: per actor run).
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// A run crashes at one of its port calls (chosen evenly among the first `CRASH_SPAN`).
    pub crash: f64,
    /// Another actor runs before this call.
    pub interleave: f64,
    pub throttled: f64,
    /// EC2 fails with a 5xx before acting.
    pub unknown: f64,
    /// A purchase whose answer is lost after EC2 bought.
    pub lost_after: f64,
    /// A purchase whose answer is lost before it reached EC2.
    pub lost_before: f64,
    pub store_unavailable: f64,
}

impl Rates {
    pub const BUSY: Rates = Rates {
        crash: 0.08,
        interleave: 0.3,
        throttled: 0.03,
        unknown: 0.01,
        lost_after: 0.06,
        lost_before: 0.03,
        store_unavailable: 0.005,
    };
    pub const NONE: Rates = Rates {
        crash: 0.0,
        interleave: 0.0,
        throttled: 0.0,
        unknown: 0.0,
        lost_after: 0.0,
        lost_before: 0.0,
        store_unavailable: 0.0,
    };
}

/// The calls among which a run's crash is placed: more than a tracker or a scan makes in most
/// runs, so some crashes fall after the last call (the run ends whole).
const CRASH_SPAN: u32 = 60;

/// How many faults of each kind were injected.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub crashes: u64,
    pub throttled: u64,
    pub unknown: u64,
    pub lost_after: u64,
    pub lost_before: u64,
    pub store_unavailable: u64,
    pub calls: u64,
}

/// A bug put back on purpose in the adapters the workflows meet, to show the invariants catch
/// what it costs (the model checker puts protocol bugs back the same way: `crate::sabotage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// A purchase whose answer was lost after EC2 bought is reported as refused (a timeout
    /// classed as a 4xx): capblock releases the fee of a block EC2 holds.
    LostAnswerAsRefusal,
    /// A reservation whose payment is pending is read as failed: its fee goes back before EC2
    /// has taken it.
    PendingReadAsFailed,
    /// A purchase whose answer was lost after EC2 bought is reported as throttled. A throttle
    /// is EC2's word that it did nothing, so the buyer gives the Sent intent back and frees its
    /// fee (the store releases an intent in the state the buyer holds, Sent included): the
    /// block EC2 bought is then on no budget, and its tag names an intent the table forgot.
    LostAnswerAsThrottle,
    /// The ledger's reservation for a person's request does not consume the request's approval
    /// (DynamoDB's transaction without the decision's update and condition): the approval
    /// stays open after the purchase it made.
    ApprovalNotConsumed,
    /// The ledger's reservation of a segmented purchase charges its first segment's fee, not
    /// all of theirs (the offering read as its first block): EC2 charges every segment, the
    /// budget holds one.
    FirstSegmentFee,
}

impl Sabotage {
    /// The bugs that cost money: the invariants must catch each.
    pub const CAUGHT: [Sabotage; 5] = [
        Sabotage::LostAnswerAsRefusal,
        Sabotage::PendingReadAsFailed,
        Sabotage::LostAnswerAsThrottle,
        Sabotage::ApprovalNotConsumed,
        Sabotage::FirstSegmentFee,
    ];
}

struct Run {
    crash_at: Option<u32>,
    calls: u32,
    crashed: bool,
}

pub struct Injector {
    rng: Mutex<ChaCha8Rng>,
    pub rates: Mutex<Rates>,
    runs: Mutex<Vec<Run>>,
    pub counts: Mutex<Counts>,
    pub sabotage: Option<Sabotage>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

enum MarketFault {
    Throttled,
    Unknown,
    LostAfter,
    LostBefore,
}

impl Injector {
    pub fn new(seed: u64, rates: Rates, sabotage: Option<Sabotage>) -> Injector {
        Injector {
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_fa17)),
            rates: Mutex::new(rates),
            runs: Mutex::default(),
            counts: Mutex::default(),
            sabotage,
        }
    }

    fn rates(&self) -> Rates {
        *lock(&self.rates)
    }

    pub fn coin(&self, p: f64) -> bool {
        p > 0.0 && lock(&self.rng).random_bool(p.min(1.0))
    }

    /// A new actor run; the seed decides now whether and where it crashes.
    pub fn start_run(&self) -> usize {
        let crash_at = self.coin(self.rates().crash).then(|| lock(&self.rng).random_range(1..=CRASH_SPAN));
        let mut runs = lock(&self.runs);
        runs.push(Run { crash_at, calls: 0, crashed: false });
        runs.len() - 1
    }

    pub fn crashed(&self, run: usize) -> bool {
        lock(&self.runs)[run].crashed
    }

    /// Forgets finished runs' bookkeeping (ids stay unique within a step).
    pub fn clear_runs(&self) {
        lock(&self.runs).clear();
    }

    /// Before every port call: the run may crash here (never to return: the driver drops it),
    /// or let another actor run first.
    async fn gate(&self, run: usize) {
        let crash = {
            let mut runs = lock(&self.runs);
            let r = &mut runs[run];
            r.calls += 1;
            let crash = r.crash_at == Some(r.calls);
            r.crashed |= crash;
            crash
        };
        lock(&self.counts).calls += 1;
        if crash {
            lock(&self.counts).crashes += 1;
            std::future::pending::<()>().await;
        }
        if self.coin(self.rates().interleave) {
            YieldNow(false).await;
        }
    }

    fn store_fault(&self, what: &str) -> Result<(), StoreError> {
        if self.coin(self.rates().store_unavailable) {
            lock(&self.counts).store_unavailable += 1;
            return Err(StoreError::Unavailable(format!("injected: {what}")));
        }
        Ok(())
    }

    fn market_fault(&self, buys: bool) -> Option<MarketFault> {
        let r = self.rates();
        let mut c = lock(&self.counts);
        if self.coin(r.throttled) {
            c.throttled += 1;
            return Some(MarketFault::Throttled);
        }
        if buys && self.coin(r.lost_after) {
            c.lost_after += 1;
            return Some(MarketFault::LostAfter);
        }
        if buys && self.coin(r.lost_before) {
            c.lost_before += 1;
            return Some(MarketFault::LostBefore);
        }
        if self.coin(r.unknown) {
            c.unknown += 1;
            return Some(MarketFault::Unknown);
        }
        None
    }
}

/// Returns `Pending` once, having asked to be polled again: the driver then polls another actor.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A port as one actor run meets it: the real in-memory adapter behind the run's gate.
pub struct Faulty<T> {
    pub inner: Arc<T>,
    pub inj: Arc<Injector>,
    pub run: usize,
}

impl<T> Faulty<T> {
    pub fn new(inner: &Arc<T>, inj: &Arc<Injector>, run: usize) -> Faulty<T> {
        Faulty { inner: inner.clone(), inj: inj.clone(), run }
    }

    async fn store(&self, what: &str) -> Result<(), StoreError> {
        self.inj.gate(self.run).await;
        self.inj.store_fault(what)
    }

    /// For a call that cannot buy: throttled or 5xx, before EC2 acted.
    async fn read(&self, operation: &'static str, region: &Region) -> Result<(), MarketError> {
        self.inj.gate(self.run).await;
        match self.inj.market_fault(false) {
            None => Ok(()),
            Some(MarketFault::Throttled) => {
                Err(MarketError::Throttled { operation, region: region.to_string(), code: REQUEST_LIMIT })
            }
            Some(_) => Err(unknown(operation, region)),
        }
    }
}

fn unknown(operation: &'static str, region: &Region) -> MarketError {
    MarketError::Unknown { operation, region: region.to_string(), message: "injected: the answer was lost".into() }
}

/// A call that may buy (a purchase or an extension): besides the reads' faults, its answer may
/// be lost after EC2 acted, or before the request reached it. A dry run (`live` false) buys
/// nothing, so it meets only the reads' faults and the lost answers counted are live ones.
async fn buying<R>(
    f: &Faulty<MemoryEc2>,
    operation: &'static str,
    region: &Region,
    live: bool,
    call: impl Future<Output = Result<R, MarketError>>,
) -> Result<R, MarketError> {
    f.inj.gate(f.run).await;
    match f.inj.market_fault(live) {
        None => call.await,
        Some(MarketFault::Throttled) => {
            Err(MarketError::Throttled { operation, region: region.to_string(), code: REQUEST_LIMIT })
        }
        Some(MarketFault::LostAfter) => {
            let _ = call.await;
            match f.inj.sabotage {
                Some(Sabotage::LostAnswerAsRefusal) => Err(MarketError::Rejected {
                    operation,
                    region: region.to_string(),
                    code: "InternalError".into(),
                    message: "sabotage: a lost answer read as a refusal".into(),
                }),
                Some(Sabotage::LostAnswerAsThrottle) => {
                    Err(MarketError::Throttled { operation, region: region.to_string(), code: REQUEST_LIMIT })
                }
                _ => Err(unknown(operation, region)),
            }
        }
        Some(MarketFault::LostBefore | MarketFault::Unknown) => Err(unknown(operation, region)),
    }
}

#[async_trait]
impl RuleStore for Faulty<MemoryTable> {
    async fn put_rule(&self, rule: &Rule, v: Option<u64>) -> Result<u64, StoreError> {
        self.store("put_rule").await?;
        self.inner.put_rule(rule, v).await
    }
    async fn get_rule(&self, id: &str) -> Result<Option<StoredRule>, StoreError> {
        self.store("get_rule").await?;
        self.inner.get_rule(id).await
    }
    async fn list_rules(&self) -> Result<Vec<StoredRule>, StoreError> {
        self.store("list_rules").await?;
        self.inner.list_rules().await
    }
    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        self.store("delete_rule").await?;
        self.inner.delete_rule(id).await
    }
}

#[async_trait]
impl Ledger for Faulty<MemoryTable> {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError> {
        self.store("guard").await?;
        self.inner.guard(rule_id).await
    }
    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError> {
        self.store("usage").await?;
        self.inner.usage(owner, period).await
    }
    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError> {
        self.store("reserve").await?;
        if self.inj.sabotage == Some(Sabotage::ApprovalNotConsumed) && intent.request.is_some() {
            return self.inner.reserve(&Intent { request: None, ..intent.clone() }, seen_seq).await;
        }
        if let (Some(Sabotage::FirstSegmentFee), Some(first)) = (self.inj.sabotage, intent.offering.segments.first()) {
            let mut first_only = intent.clone();
            first_only.offering.fee = first.fee;
            return self.inner.reserve(&first_only, seen_seq).await;
        }
        self.inner.reserve(intent, seen_seq).await
    }
    async fn mark_sent(&self, intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.store("mark_sent").await?;
        self.inner.mark_sent(intent_id, rule_id, at).await
    }
    async fn record_bought(&self, intent: &Intent, block: &Block, notices: &[Notice]) -> Result<(), StoreError> {
        self.store("record_bought").await?;
        self.inner.record_bought(intent, block, notices).await
    }
    async fn record_rejected(&self, intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError> {
        self.store("record_rejected").await?;
        self.inner.record_rejected(intent, reason, notice).await
    }
    async fn release_by_person(&self, intent: &Intent, reason: &str) -> Result<(), StoreError> {
        self.store("release_by_person").await?;
        self.inner.release_by_person(intent, reason).await
    }
    async fn record_held_after_close(&self, intent: &Intent, block: &Block) -> Result<bool, StoreError> {
        self.store("record_held_after_close").await?;
        self.inner.record_held_after_close(intent, block).await
    }
    async fn add_hold(&self, rule_id: &str, hold: &ReleasedHold) -> Result<(), StoreError> {
        self.store("add_hold").await?;
        self.inner.add_hold(rule_id, hold).await
    }
    async fn record_given_back(&self, intent: &Intent, reason: &str) -> Result<(), StoreError> {
        self.store("record_given_back").await?;
        self.inner.record_given_back(intent, reason).await
    }
    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError> {
        self.store("record_dry_run").await?;
        self.inner.record_dry_run(intent).await
    }
    async fn record_approval(&self, intent: &Intent) -> Result<bool, StoreError> {
        self.store("record_approval").await?;
        self.inner.record_approval(intent).await
    }
    async fn get_approval(&self, rule_id: &str, offering_id: &str) -> Result<Option<Intent>, StoreError> {
        self.store("get_approval").await?;
        self.inner.get_approval(rule_id, offering_id).await
    }
    async fn approvals_waiting(&self, rule_id: &str) -> Result<Vec<Intent>, StoreError> {
        self.store("approvals_waiting").await?;
        self.inner.approvals_waiting(rule_id).await
    }
    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError> {
        self.store("get_intent").await?;
        self.inner.get_intent(rule_id, intent_id).await
    }
    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError> {
        self.store("open_intents").await?;
        self.inner.open_intents().await
    }
    async fn release_failed_block(
        &self,
        block: &Block,
        intent: &Intent,
        restore: bool,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.store("release_failed_block").await?;
        self.inner.release_failed_block(block, intent, restore, at).await
    }

    async fn recommit_released_fee(
        &self,
        block: &Block,
        intent: &Intent,
        count_purchase: bool,
    ) -> Result<bool, StoreError> {
        self.store("recommit_released_fee").await?;
        self.inner.recommit_released_fee(block, intent, count_purchase).await
    }
}

#[async_trait]
impl RequestStore for Faulty<MemoryTable> {
    async fn file_request(&self, request: &Request) -> Result<(), StoreError> {
        self.store("file_request").await?;
        self.inner.file_request(request).await
    }
    async fn cancel_request(&self, requester: &str, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.store("cancel_request").await?;
        self.inner.cancel_request(requester, id, at).await
    }
    async fn requests(&self) -> Result<Vec<StoredRequest>, StoreError> {
        self.store("requests").await?;
        self.inner.requests().await
    }
    async fn decide_request(&self, decision: &RequestDecision) -> Result<(), StoreError> {
        self.store("decide_request").await?;
        self.inner.decide_request(decision).await
    }
    async fn decision(&self, id: &str) -> Result<Option<RequestDecision>, StoreError> {
        self.store("decision").await?;
        self.inner.decision(id).await
    }
}

#[async_trait]
impl BlockStore for Faulty<MemoryTable> {
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError> {
        self.store("open_blocks").await?;
        self.inner.open_blocks(rule_id).await
    }
    async fn get_block(&self, id: &str) -> Result<Option<Block>, StoreError> {
        self.store("get_block").await?;
        self.inner.get_block(id).await
    }
    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError> {
        self.store("adopt_block").await?;
        self.inner.adopt_block(block).await
    }
    async fn update_block(&self, block: &Block, v: u64) -> Result<(), StoreError> {
        self.store("update_block").await?;
        self.inner.update_block(block, v).await
    }
}

#[async_trait]
impl ExtensionLedger for Faulty<MemoryTable> {
    async fn reserve_extension(&self, x: &ExtensionIntent) -> Result<(), ReserveError> {
        self.store("reserve_extension").await?;
        self.inner.reserve_extension(x).await
    }
    async fn advance_extension(
        &self,
        x: &ExtensionIntent,
        to: ExtensionState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.store("advance_extension").await?;
        self.inner.advance_extension(x, to, at).await
    }
    async fn close_extension(
        &self,
        x: &ExtensionIntent,
        to: ExtensionState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.store("close_extension").await?;
        self.inner.close_extension(x, to, reason).await
    }
    async fn recommit_extension(&self, x: &ExtensionIntent, reason: &str) -> Result<(), StoreError> {
        self.store("recommit_extension").await?;
        self.inner.recommit_extension(x, reason).await
    }
    async fn extensions_of(&self, id: &str) -> Result<Vec<ExtensionIntent>, StoreError> {
        self.store("extensions_of").await?;
        self.inner.extensions_of(id).await
    }
    async fn open_extensions(&self) -> Result<Vec<ExtensionIntent>, StoreError> {
        self.store("open_extensions").await?;
        self.inner.open_extensions().await
    }
}

#[async_trait]
impl ObservationStore for Faulty<MemoryTable> {
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError> {
        self.store("record").await?;
        self.inner.record(observations).await
    }
    async fn history(
        &self,
        region: &Region,
        t: &InstanceType,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Observation>, StoreError> {
        self.store("history").await?;
        self.inner.history(region, t, from, to).await
    }
}

#[async_trait]
impl MarketMemory for Faulty<MemoryTable> {
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError> {
        self.store("region_memory").await?;
        self.inner.region_memory(region).await
    }
    async fn save_region_memory(
        &self,
        region: &Region,
        read: &RegionMemory,
        m: &RegionMemory,
    ) -> Result<(), StoreError> {
        self.store("save_region_memory").await?;
        self.inner.save_region_memory(region, read, m).await
    }
    async fn claim_region(
        &self,
        region: &Region,
        run: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.store("claim_region").await?;
        self.inner.claim_region(region, run, now, until).await
    }
    async fn release_region(&self, region: &Region, run: &str) -> Result<(), StoreError> {
        self.store("release_region").await?;
        self.inner.release_region(region, run).await
    }
}

#[async_trait]
impl Outbox for Faulty<MemoryTable> {
    async fn enqueue(&self, n: &Notice) -> Result<bool, StoreError> {
        self.store("enqueue").await?;
        self.inner.enqueue(n).await
    }
    async fn pending(&self) -> Result<Vec<Notice>, StoreError> {
        self.store("pending").await?;
        self.inner.pending().await
    }
    async fn lease(&self, n: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError> {
        self.store("lease").await?;
        self.inner.lease(n, now, until).await
    }
    async fn mark_published(&self, n: &Notice, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.store("mark_published").await?;
        self.inner.mark_published(n, at).await
    }
    async fn put_record(&self, n: &Notice) -> Result<bool, StoreError> {
        self.store("put_record").await?;
        self.inner.put_record(n).await
    }
    async fn records(&self, thread: &str, prefix: &str) -> Result<Vec<Notice>, StoreError> {
        self.store("records").await?;
        self.inner.records(thread, prefix).await
    }
}

#[async_trait]
impl OfferingSource for Faulty<MemoryEc2> {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        self.read("DescribeCapacityBlockOfferings", &q.region).await?;
        self.inner.offerings(q).await
    }
}

#[async_trait]
impl InstanceTypeSource for Faulty<MemoryEc2> {
    async fn accelerators(
        &self,
        region: &Region,
        types: &[InstanceType],
    ) -> Result<Vec<(InstanceType, u32)>, MarketError> {
        self.read("DescribeInstanceTypes", region).await?;
        self.inner.accelerators(region, types).await
    }
}

#[async_trait]
impl QuotaSource for Faulty<MemoryEc2> {
    async fn capacity_block_quota(&self, region: &Region, family: &str) -> Option<u32> {
        self.inner.capacity_block_quota(region, family).await
    }
}

#[async_trait]
impl Purchaser for Faulty<MemoryEc2> {
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError> {
        buying(self, "PurchaseCapacityBlock", &req.offering.region, !req.dry_run, self.inner.purchase(req)).await
    }
}

#[async_trait]
impl ReservationSource for Faulty<MemoryEc2> {
    async fn reservations_tagged(&self, region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> {
        self.read("DescribeCapacityReservations", region).await?;
        self.inner.reservations_tagged(region, key, value).await
    }
    async fn observe(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError> {
        self.read("DescribeCapacityReservations", region).await?;
        let mut seen = self.inner.observe(region, ids).await?;
        for (_, o) in &mut seen {
            match (self.inj.sabotage, &o) {
                (Some(Sabotage::PendingReadAsFailed), Observed::Found { state, .. }) if state == "payment-pending" => {
                    if let Observed::Found { state, .. } = o {
                        *state = "payment-failed".into();
                    }
                }
                _ => {}
            }
        }
        Ok(seen)
    }
    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError> {
        self.read("DescribeCapacityReservations", region).await?;
        self.inner.capacity_blocks(region).await
    }
}

#[async_trait]
impl ReservationLookup for Faulty<MemoryEc2> {
    async fn reservation(&self, region: &Region, id: &str) -> Result<Option<Reservation>, MarketError> {
        self.read("DescribeCapacityReservations", region).await?;
        self.inner.reservation(region, id).await
    }
}

#[async_trait]
impl ExtensionMarket for Faulty<MemoryEc2> {
    async fn extension_offerings(
        &self,
        region: &Region,
        id: &str,
        hours: u32,
    ) -> Result<Vec<ExtensionOffer>, MarketError> {
        self.read("DescribeCapacityBlockExtensionOfferings", region).await?;
        self.inner.extension_offerings(region, id, hours).await
    }
    async fn purchase_extension(
        &self,
        region: &Region,
        offering_id: &str,
        id: &str,
    ) -> Result<ExtensionReceipt, MarketError> {
        let call = self.inner.purchase_extension(region, offering_id, id);
        buying(self, "PurchaseCapacityBlockExtension", region, true, call).await
    }
    async fn check_extension(&self, region: &Region, offering_id: &str, id: &str) -> Result<(), MarketError> {
        self.read("PurchaseCapacityBlockExtension", region).await?;
        self.inner.check_extension(region, offering_id, id).await
    }
}

#[async_trait]
impl ExtensionHistory for Faulty<MemoryEc2> {
    async fn extension_history(&self, region: &Region, ids: &[String]) -> Result<Vec<ExtensionRecord>, MarketError> {
        self.read("DescribeCapacityBlockExtensionHistory", region).await?;
        self.inner.extension_history(region, ids).await
    }
}

#[async_trait]
impl BlockKinds for Faulty<MemoryEc2> {
    async fn capacity_blocks_by_id(
        &self,
        region: &Region,
        ids: &[String],
    ) -> Result<Vec<CapacityBlockFacts>, MarketError> {
        self.read("DescribeCapacityBlocks", region).await?;
        self.inner.capacity_blocks_by_id(region, ids).await
    }
}

#[async_trait]
impl BlockStatusSource for Faulty<MemoryEc2> {
    async fn block_status(&self, region: &Region, ids: &[String]) -> Result<Vec<CapacityStatus>, MarketError> {
        self.read("DescribeCapacityBlockStatus", region).await?;
        self.inner.block_status(region, ids).await
    }
    async fn reservation_usage(&self, region: &Region, id: &str) -> Result<ReservationUsage, MarketError> {
        self.read("GetCapacityReservationUsage", region).await?;
        self.inner.reservation_usage(region, id).await
    }
}

#[async_trait]
impl InstanceSource for Faulty<MemoryEc2> {
    async fn instances_in(&self, region: &Region, id: &str) -> Result<Vec<String>, MarketError> {
        self.read("DescribeInstances", region).await?;
        self.inner.instances_in(region, id).await
    }
    async fn reservation_of(&self, region: &Region, id: &str) -> Result<Option<String>, MarketError> {
        self.read("DescribeInstances", region).await?;
        self.inner.reservation_of(region, id).await
    }
}
