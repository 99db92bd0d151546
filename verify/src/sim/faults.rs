//! The seeded fault injector, and its gate as the hook (`Seeded`) of the core's one hook
//! wrapper (`capblock_core::memory::Hooked`) before the in-memory ports.
//!
//! Every port call of every actor goes through a gate: the actor may crash there (its run is
//! dropped mid-way, as Lambda drops a function that times out or dies), it may yield so another
//! actor runs in between (the seed decides the interleaving, never a sleep), and the call may
//! fail: EC2 throttles, answers 5xx, or loses its answer before or after it acted; DynamoDB is
//! unavailable. What a fault costs is decided by the seed alone, so a seed replays exactly.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use async_trait::async_trait;
use capblock_core::domain::budget::Intent;
use capblock_core::domain::lifecycle::Observed;
use capblock_core::memory::{Call, Failure, Hook, HookVerdict, Hooked, Kind};
use capblock_core::ports::{MarketError, REQUEST_LIMIT, StoreError};
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
pub type Faulty<T> = Hooked<T, Seeded>;

/// `inner` behind run `run`'s gate.
pub fn faulty<T>(inner: &Arc<T>, inj: &Arc<Injector>, run: usize) -> Faulty<T> {
    Hooked::sharing(inner, Seeded { inj: inj.clone(), run })
}

/// The seeded gate, as the hook before each call of one actor run.
pub struct Seeded {
    pub inj: Arc<Injector>,
    pub run: usize,
}

impl Seeded {
    /// A call that may buy (a purchase or an extension): besides the reads' faults, its answer
    /// may be lost after EC2 acted, or before the request reached it. A dry run (`live` false)
    /// buys nothing, so it meets only the reads' faults and the lost answers counted are live
    /// ones.
    fn market(&self, live: bool) -> HookVerdict {
        match self.inj.market_fault(live) {
            None => HookVerdict::Proceed,
            Some(MarketFault::Throttled) => HookVerdict::Fail(Failure::Throttled(REQUEST_LIMIT)),
            Some(MarketFault::LostAfter) => HookVerdict::Lose(match self.inj.sabotage {
                Some(Sabotage::LostAnswerAsRefusal) => Failure::Rejected {
                    code: "InternalError".into(),
                    message: "sabotage: a lost answer read as a refusal".into(),
                },
                Some(Sabotage::LostAnswerAsThrottle) => Failure::Throttled(REQUEST_LIMIT),
                _ => lost(),
            }),
            Some(MarketFault::LostBefore | MarketFault::Unknown) => HookVerdict::Fail(lost()),
        }
    }

    /// The ledger's reservation as a sabotage puts it back: without the request's approval, or
    /// charging the first segment's fee only.
    fn reserve(&self, intent: &Intent) -> HookVerdict {
        if self.inj.sabotage == Some(Sabotage::ApprovalNotConsumed) && intent.request.is_some() {
            return HookVerdict::Instead(Box::new(Intent { request: None, ..intent.clone() }));
        }
        if let (Some(Sabotage::FirstSegmentFee), Some(first)) = (self.inj.sabotage, intent.offering.segments.first()) {
            let mut first_only = intent.clone();
            first_only.offering.fee = first.fee;
            return HookVerdict::Instead(Box::new(first_only));
        }
        HookVerdict::Proceed
    }
}

fn lost() -> Failure {
    Failure::Unknown("injected: the answer was lost".into())
}

#[async_trait]
impl Hook for Seeded {
    async fn before(&self, call: &Call<'_>) -> HookVerdict {
        if call.kind == Kind::Other {
            return HookVerdict::Proceed;
        }
        self.inj.gate(self.run).await;
        match call.kind {
            Kind::Store => match self.inj.store_fault(call.method) {
                Err(e) => HookVerdict::error(e),
                Ok(()) => call
                    .arg::<Intent>()
                    .filter(|_| call.method == "reserve")
                    .map_or(HookVerdict::Proceed, |i| self.reserve(i)),
            },
            Kind::Read => self.market(false),
            Kind::Buy { live } => self.market(live),
            Kind::Other => HookVerdict::Proceed,
        }
    }

    /// A payment pending read as failed (`Sabotage::PendingReadAsFailed`).
    fn after(&self, call: &Call<'_>, answer: &mut (dyn Any + Send)) {
        if self.inj.sabotage != Some(Sabotage::PendingReadAsFailed) || call.method != "observe" {
            return;
        }
        let Some(Ok(seen)) = answer.downcast_mut::<Result<Vec<(String, Observed)>, MarketError>>() else { return };
        for (_, o) in seen {
            if let Observed::Found { state, .. } = o
                && state == "payment-pending"
            {
                *state = "payment-failed".into();
            }
        }
    }
}
