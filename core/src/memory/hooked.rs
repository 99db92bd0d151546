//! The one fault and hook wrapper: `Hooked<T, H>` puts a per-call hook in front of any port
//! (an in-memory one here, usually): the workflows' unit tests, `capblock-verify`'s seeded
//! simulation (its fault gate is a hook) and the integration tests use it, on the in-memory
//! ports and on the real EC2 adapter alike (`Hooked<Ec2Market, _>` on the simulator: a
//! purchase refused, throttled or its answer lost). Not yet the bench's market and members (a
//! generated market of offerings that come and go, each found-time measured).
//!
//! Before each call the hook is told which call it is ([`Call`]: the port's method, the AWS
//! operation it stands for, the region, whether it reads, buys or writes the table) and gives
//! a [`HookVerdict`]: let it through, fail it with an error, make it and lose its answer, answer
//! in its place, or make it with another first argument. The hook is async, so it may also
//! hold the call (until a test releases it, or for ever) or let another task run first. After
//! a call made, the hook may look at its answer and change it. A hook that must do async work
//! after the call too makes the call itself, on the port it shares with its wrapper
//! ([`Hooked::sharing`]), and answers it.
//!
//! [`Script`] is the hook tests write by hand: fail, answer or hold the calls named, and count
//! every call. paced_asker's tests write a hook of their own over the in-memory EC2: it plays
//! EC2's describe limit with a [`MemoryDescribeLimit`](super::MemoryDescribeLimit).

use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::Semaphore;

use crate::domain::alarm::AlarmState;
use crate::domain::block::{Block, Reservation};
use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period, ReleasedHold};
use crate::domain::extension::{ExtensionIntent, ExtensionOffer, ExtensionReceipt, ExtensionState};
use crate::domain::health::{CapacityStatus, ReservationUsage};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::lifecycle::Observed;
use crate::domain::list_price::ListRate;
use crate::domain::offering::Offering;
use crate::domain::plan::RegionMemory;
use crate::domain::request::{Request, RequestDecision};
use crate::domain::rule::Rule;
use crate::domain::stack::StoredSettings;
use crate::domain::ultraserver::SearchForm;
use crate::ports::*;

/// What a call does to the outside world, as a fault injector tells calls apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A read or a write of the table.
    Store,
    /// An EC2 call that cannot buy.
    Read,
    /// An EC2 call that may buy (`live` false: a dry run).
    Buy { live: bool },
    /// Anything else: a quota, a topic, a schedule, the page's bucket.
    Other,
}

/// One call, as its hook sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The port's method (`reserve`, `offerings`, `publish`).
    pub method: &'static str,
    /// The AWS operation it stands for (`DescribeCapacityBlockOfferings`); the table's calls
    /// are named by their method.
    pub operation: &'static str,
    pub region: Option<&'a Region>,
    pub kind: Kind,
    /// The argument a hook may read (an offering query, an intent, a notice's topic).
    pub arg: Option<&'a (dyn Any + Send + Sync)>,
}

impl<'a> Call<'a> {
    pub fn store(method: &'static str) -> Call<'a> {
        Call { method, operation: method, region: None, kind: Kind::Store, arg: None }
    }
    pub fn read(method: &'static str, operation: &'static str, region: &'a Region) -> Call<'a> {
        Call { method, operation, region: Some(region), kind: Kind::Read, arg: None }
    }
    pub fn buy(method: &'static str, operation: &'static str, region: &'a Region, live: bool) -> Call<'a> {
        Call { method, operation, region: Some(region), kind: Kind::Buy { live }, arg: None }
    }
    pub fn other(method: &'static str, operation: &'static str) -> Call<'a> {
        Call { method, operation, region: None, kind: Kind::Other, arg: None }
    }
    fn with_arg(self, arg: &'a (dyn Any + Send + Sync)) -> Call<'a> {
        Call { arg: Some(arg), ..self }
    }
    /// Whether `name` is this call's method or its operation.
    pub fn is(&self, name: &str) -> bool {
        self.method == name || self.operation == name
    }
    /// The call's first argument, if it is a `A`.
    pub fn arg<A: 'static>(&self) -> Option<&'a A> {
        self.arg.and_then(|a| a.downcast_ref::<A>())
    }
    fn region_name(&self) -> String {
        self.region.map(|r| r.to_string()).unwrap_or_default()
    }
}

/// An error a hook makes a call fail with; the port's own error is made from it and the call.
#[derive(Debug)]
pub enum Failure {
    /// The store is unavailable (`StoreError::Unavailable`).
    Unavailable(String),
    /// EC2 throttled the call, with this code.
    Throttled(&'static str),
    /// EC2 answered 5xx, or its answer was lost (`MarketError::Unknown`).
    Unknown(String),
    /// EC2 refused the call.
    Rejected { code: String, message: String },
    /// This error, of the call's own error type.
    Error(Box<dyn Any + Send>),
}

impl Failure {
    fn message(self) -> String {
        match self {
            Failure::Unavailable(m) | Failure::Unknown(m) => m,
            Failure::Throttled(code) => code.to_string(),
            Failure::Rejected { code, message } => format!("{code}: {message}"),
            Failure::Error(_) => "an error of another type".into(),
        }
    }
}

/// What a call does, as its hook decides.
pub enum HookVerdict {
    /// It is made.
    Proceed,
    /// It fails before it is made.
    Fail(Failure),
    /// It is made, and its answer lost: it fails all the same.
    Lose(Failure),
    /// It is not made; this (of the method's return type) is its answer.
    Answer(Box<dyn Any + Send>),
    /// It is made with this (of its first argument's type) in place of its first argument
    /// (`Ledger::reserve` only).
    Instead(Box<dyn Any + Send>),
}

impl HookVerdict {
    /// Fails the call with `error`, of its own error type.
    pub fn error<E: Send + 'static>(error: E) -> HookVerdict {
        HookVerdict::Fail(Failure::Error(Box::new(error)))
    }
    /// Answers the call with `answer`, of its method's return type.
    pub fn answer<R: Send + 'static>(answer: R) -> HookVerdict {
        HookVerdict::Answer(Box::new(answer))
    }
}

/// A port's error, made from a hook's [`Failure`] for a call.
pub trait Injected: Sized + 'static {
    fn injected(failure: Failure, call: &Call<'_>) -> Self;
}

fn given<E: 'static>(failure: Failure, call: &Call<'_>) -> Result<E, Failure> {
    match failure {
        Failure::Error(e) => match e.downcast::<E>() {
            Ok(e) => Ok(*e),
            Err(_) => panic!("the error given for {} is not a {}", call.method, std::any::type_name::<E>()),
        },
        other => Err(other),
    }
}

impl Injected for StoreError {
    fn injected(failure: Failure, call: &Call<'_>) -> Self {
        given(failure, call).unwrap_or_else(|f| StoreError::Unavailable(f.message()))
    }
}

impl Injected for ReserveError {
    fn injected(failure: Failure, call: &Call<'_>) -> Self {
        match failure {
            Failure::Error(e) if e.is::<StoreError>() => {
                ReserveError::Store(StoreError::injected(Failure::Error(e), call))
            }
            f => given(f, call).unwrap_or_else(|f| ReserveError::Store(StoreError::injected(f, call))),
        }
    }
}

impl Injected for MarketError {
    fn injected(failure: Failure, call: &Call<'_>) -> Self {
        let (operation, region) = (call.operation, call.region_name());
        match given(failure, call) {
            Ok(e) => e,
            Err(Failure::Throttled(code)) => MarketError::Throttled { operation, region, code },
            Err(Failure::Rejected { code, message }) => MarketError::Rejected { operation, region, code, message },
            Err(f) => MarketError::Unknown { operation, region, message: f.message() },
        }
    }
}

impl Injected for NotifyError {
    fn injected(failure: Failure, call: &Call<'_>) -> Self {
        given(failure, call)
            .unwrap_or_else(|f| NotifyError::Failed { topic: call.operation.into(), message: f.message() })
    }
}

impl Injected for ReminderError {
    fn injected(failure: Failure, call: &Call<'_>) -> Self {
        given(failure, call).unwrap_or_else(|f| ReminderError::Failed(f.message()))
    }
}

impl Injected for PublishError {
    fn injected(failure: Failure, call: &Call<'_>) -> Self {
        given(failure, call).unwrap_or_else(|f| PublishError {
            operation: call.operation,
            key: String::new(),
            message: f.message(),
        })
    }
}

/// A method's return type, as a verdict makes one.
pub trait HookedAnswer: Send + 'static {
    fn failed(failure: Failure, call: &Call<'_>) -> Self;
}

impl<T: Send + 'static, E: Injected + Send> HookedAnswer for Result<T, E> {
    fn failed(failure: Failure, call: &Call<'_>) -> Self {
        Err(E::injected(failure, call))
    }
}

impl<T: Send + 'static> HookedAnswer for Option<T> {
    fn failed(_: Failure, call: &Call<'_>) -> Self {
        panic!("{} cannot fail: answer it instead", call.method)
    }
}

/// What stands before every call of a [`Hooked`] port.
#[async_trait]
pub trait Hook: Send + Sync {
    /// Before the call: what it does.
    async fn before(&self, call: &Call<'_>) -> HookVerdict;
    /// After a call made (not one failed, lost or answered): its answer, of the method's
    /// return type, to look at or change.
    fn after(&self, _call: &Call<'_>, _answer: &mut (dyn Any + Send)) {}
}

/// A port with a hook before each of its calls.
pub struct Hooked<T: ?Sized, H> {
    pub inner: Arc<T>,
    pub hook: H,
}

impl<T, H> Hooked<T, H> {
    pub fn new(inner: T, hook: H) -> Hooked<T, H> {
        Hooked { inner: Arc::new(inner), hook }
    }
}

impl<T: ?Sized, H> Hooked<T, H> {
    /// In front of a port others share.
    pub fn sharing(inner: &Arc<T>, hook: H) -> Hooked<T, H> {
        Hooked { inner: inner.clone(), hook }
    }
}

impl<T: ?Sized + Sync, H: Hook> Hooked<T, H> {
    async fn around<R: HookedAnswer>(&self, call: &Call<'_>, verdict: HookVerdict, made: impl Future<Output = R>) -> R {
        match verdict {
            HookVerdict::Proceed => {
                let mut answer = made.await;
                self.hook.after(call, &mut answer);
                answer
            }
            HookVerdict::Fail(f) => R::failed(f, call),
            HookVerdict::Lose(f) => {
                drop(made.await);
                R::failed(f, call)
            }
            HookVerdict::Answer(a) => match a.downcast::<R>() {
                Ok(a) => *a,
                Err(_) => panic!("the answer given for {} is not a {}", call.method, std::any::type_name::<R>()),
            },
            HookVerdict::Instead(_) => panic!("{} takes no other argument", call.method),
        }
    }
}

/// Each method of `$port` asks the hook first; `$call` names the call (its arguments in scope),
/// and `arg` shows the hook the first argument. `{ ... }` after the methods: the port's methods
/// written by hand (its sync ones, one that takes another argument).
macro_rules! hooked {
    ($port:ident { $( fn $m:ident ( $($a:ident : $t:ty),* ) -> $r:ty = $call:expr $(, arg $x:expr)? ; )* } $({ $($extra:tt)* })?) => {
        #[async_trait]
        impl<T: $port + ?Sized, H: Hook> $port for Hooked<T, H> {
            $(
                async fn $m(&self, $($a: $t),*) -> $r {
                    let call: Call<'_> = $call;
                    $( let call = call.with_arg($x); )?
                    let verdict = self.hook.before(&call).await;
                    self.around(&call, verdict, <T as $port>::$m(&self.inner, $($a),*)).await
                }
            )*
            $($($extra)*)?
        }
    };
}

hooked!(RuleStore {
    fn put_rule(rule: &Rule, v: Option<u64>) -> Result<u64, StoreError> = Call::store("put_rule");
    fn get_rule(id: &str) -> Result<Option<StoredRule>, StoreError> = Call::store("get_rule");
    fn list_rules() -> Result<Vec<StoredRule>, StoreError> = Call::store("list_rules");
    fn delete_rule(id: &str) -> Result<bool, StoreError> = Call::store("delete_rule");
});

hooked!(Ledger {
    fn guard(rule_id: &str) -> Result<RuleGuard, StoreError> = Call::store("guard");
    fn usage(owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError> = Call::store("usage");
    fn mark_sent(intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> = Call::store("mark_sent");
    fn record_bought(intent: &Intent, block: &Block, notices: &[Notice]) -> Result<(), StoreError> =
        Call::store("record_bought"), arg intent;
    fn record_rejected(intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError> =
        Call::store("record_rejected"), arg intent;
    fn release_by_person(intent: &Intent, reason: &str) -> Result<(), StoreError> =
        Call::store("release_by_person"), arg intent;
    fn record_held_after_close(intent: &Intent, block: &Block) -> Result<bool, StoreError> =
        Call::store("record_held_after_close"), arg intent;
    fn add_hold(rule_id: &str, hold: &ReleasedHold) -> Result<(), StoreError> = Call::store("add_hold");
    fn record_given_back(intent: &Intent, reason: &str) -> Result<(), StoreError> =
        Call::store("record_given_back"), arg intent;
    fn record_dry_run(intent: &Intent) -> Result<bool, StoreError> = Call::store("record_dry_run"), arg intent;
    fn record_approval(intent: &Intent) -> Result<bool, StoreError> = Call::store("record_approval"), arg intent;
    fn get_approval(rule_id: &str, offering_id: &str) -> Result<Option<Intent>, StoreError> =
        Call::store("get_approval");
    fn approvals_waiting(rule_id: &str) -> Result<Vec<Intent>, StoreError> = Call::store("approvals_waiting");
    fn get_intent(rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError> = Call::store("get_intent");
    fn open_intents() -> Result<Vec<Intent>, StoreError> = Call::store("open_intents");
    fn release_failed_block(block: &Block, intent: &Intent, restore: bool, at: DateTime<Utc>) -> Result<bool, StoreError> =
        Call::store("release_failed_block"), arg block;
    fn recommit_released_fee(block: &Block, intent: &Intent, count_purchase: bool) -> Result<bool, StoreError> =
        Call::store("recommit_released_fee"), arg block;
} {
    /// The one call a hook may make with another argument: an intent in place of the one given.
    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError> {
        let call = Call::store("reserve").with_arg(intent);
        match self.hook.before(&call).await {
            HookVerdict::Instead(other) => match other.downcast::<Intent>() {
                Ok(other) => self.inner.reserve(&other, seen_seq).await,
                Err(_) => panic!("reserve takes an intent"),
            },
            verdict => self.around(&call, verdict, self.inner.reserve(intent, seen_seq)).await,
        }
    }
});

hooked!(RequestStore {
    fn file_request(request: &Request) -> Result<(), StoreError> = Call::store("file_request"), arg request;
    fn cancel_request(requester: &str, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> =
        Call::store("cancel_request");
    fn requests() -> Result<Vec<StoredRequest>, StoreError> = Call::store("requests");
    fn decide_request(decision: &RequestDecision) -> Result<(), StoreError> =
        Call::store("decide_request"), arg decision;
    fn decision(id: &str) -> Result<Option<RequestDecision>, StoreError> = Call::store("decision");
});

hooked!(BlockStore {
    fn open_blocks(rule_id: Option<&str>) -> Result<Vec<Block>, StoreError> = Call::store("open_blocks");
    fn get_block(id: &str) -> Result<Option<Block>, StoreError> = Call::store("get_block");
    fn adopt_block(block: &Block) -> Result<bool, StoreError> = Call::store("adopt_block"), arg block;
    fn update_block(block: &Block, v: u64) -> Result<(), StoreError> = Call::store("update_block"), arg block;
});

hooked!(BlockArchive {
    fn all_blocks() -> Result<Vec<Block>, StoreError> = Call::store("all_blocks");
});

hooked!(ExtensionLedger {
    fn reserve_extension(x: &ExtensionIntent) -> Result<(), ReserveError> = Call::store("reserve_extension"), arg x;
    fn advance_extension(x: &ExtensionIntent, to: ExtensionState, at: DateTime<Utc>) -> Result<(), StoreError> =
        Call::store("advance_extension"), arg x;
    fn close_extension(x: &ExtensionIntent, to: ExtensionState, reason: Option<&str>) -> Result<(), StoreError> =
        Call::store("close_extension"), arg x;
    fn recommit_extension(x: &ExtensionIntent, reason: &str) -> Result<(), StoreError> =
        Call::store("recommit_extension"), arg x;
    fn extensions_of(id: &str) -> Result<Vec<ExtensionIntent>, StoreError> = Call::store("extensions_of");
    fn open_extensions() -> Result<Vec<ExtensionIntent>, StoreError> = Call::store("open_extensions");
});

hooked!(ObservationStore {
    fn record(observations: &[Observation]) -> Result<usize, StoreError> = Call::store("record");
    fn history(region: &Region, t: &InstanceType, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<Observation>, StoreError> =
        Call::store("history");
});

hooked!(MarketMemory {
    fn region_memory(region: &Region) -> Result<RegionMemory, StoreError> = Call::store("region_memory");
    fn save_region_memory(region: &Region, read: &RegionMemory, m: &RegionMemory) -> Result<(), StoreError> =
        Call::store("save_region_memory");
    fn claim_region(region: &Region, run: &str, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError> =
        Call::store("claim_region");
    fn release_region(region: &Region, run: &str) -> Result<(), StoreError> = Call::store("release_region");
});

hooked!(Outbox {
    fn enqueue(n: &Notice) -> Result<bool, StoreError> = Call::store("enqueue"), arg n;
    fn pending() -> Result<Vec<Notice>, StoreError> = Call::store("pending");
    fn lease(n: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError> = Call::store("lease"), arg n;
    fn mark_published(n: &Notice, at: DateTime<Utc>) -> Result<(), StoreError> = Call::store("mark_published"), arg n;
    fn put_record(n: &Notice) -> Result<bool, StoreError> = Call::store("put_record"), arg n;
    fn records(thread: &str, prefix: &str) -> Result<Vec<Notice>, StoreError> = Call::store("records");
});

hooked!(AlarmStore {
    fn record_alarm(state: &AlarmState) -> Result<bool, StoreError> = Call::store("record_alarm"), arg state;
    fn alarms() -> Result<Vec<AlarmState>, StoreError> = Call::store("alarms");
});

hooked!(PageClaims {
    fn claim_page_hour(hour: DateTime<Utc>) -> Result<bool, StoreError> = Call::store("claim_page_hour");
    fn release_page_hour(hour: DateTime<Utc>) -> Result<(), StoreError> = Call::store("release_page_hour");
});

hooked!(RateStore {
    fn announce_rate(rate: &ListRate) -> Result<(), StoreError> = Call::store("announce_rate"), arg rate;
    fn withdraw_rate(family: &str, effective: chrono::NaiveDate) -> Result<bool, StoreError> =
        Call::store("withdraw_rate");
    fn announced_rates() -> Result<Vec<ListRate>, StoreError> = Call::store("announced_rates");
});

hooked!(SettingsStore {
    fn store_settings(settings: &StoredSettings) -> Result<bool, StoreError> =
        Call::store("store_settings"), arg settings;
    fn stored_settings() -> Result<Option<StoredSettings>, StoreError> = Call::store("stored_settings");
});

const RESERVATIONS: &str = "DescribeCapacityReservations";

hooked!(OfferingSource {
    fn offerings(q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> =
        Call::read("offerings", "DescribeCapacityBlockOfferings", &q.region), arg q;
} {
    fn search_form(&self, region: &Region) -> Option<SearchForm> {
        self.inner.search_form(region)
    }
    fn start_search_form(&self, region: &Region, form: SearchForm) {
        self.inner.start_search_form(region, form)
    }
});

hooked!(InstanceTypeSource {
    fn accelerators(region: &Region, types: &[InstanceType]) -> Result<Vec<(InstanceType, u32)>, MarketError> =
        Call::read("accelerators", "DescribeInstanceTypes", region);
});

hooked!(QuotaSource {
    fn capacity_block_quota(region: &Region, family: &str) -> Option<u32> =
        Call { region: Some(region), ..Call::other("capacity_block_quota", "GetServiceQuota") };
});

hooked!(Purchaser {
    fn purchase(req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError> =
        Call::buy("purchase", "PurchaseCapacityBlock", &req.offering.region, !req.dry_run), arg req;
});

hooked!(ReservationSource {
    fn reservations_tagged(region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> =
        Call::read("reservations_tagged", RESERVATIONS, region);
    fn observe(region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError> =
        Call::read("observe", RESERVATIONS, region);
    fn capacity_blocks(region: &Region) -> Result<Vec<Reservation>, MarketError> =
        Call::read("capacity_blocks", RESERVATIONS, region);
});

hooked!(ReservationLookup {
    fn reservation(region: &Region, id: &str) -> Result<Option<Reservation>, MarketError> =
        Call::read("reservation", RESERVATIONS, region);
});

hooked!(ExtensionMarket {
    fn extension_offerings(region: &Region, id: &str, hours: u32) -> Result<Vec<ExtensionOffer>, MarketError> =
        Call::read("extension_offerings", "DescribeCapacityBlockExtensionOfferings", region);
    fn purchase_extension(region: &Region, offering_id: &str, id: &str) -> Result<ExtensionReceipt, MarketError> =
        Call::buy("purchase_extension", "PurchaseCapacityBlockExtension", region, true);
    fn check_extension(region: &Region, offering_id: &str, id: &str) -> Result<(), MarketError> =
        Call::read("check_extension", "PurchaseCapacityBlockExtension", region);
});

hooked!(ExtensionHistory {
    fn extension_history(region: &Region, ids: &[String]) -> Result<Vec<ExtensionRecord>, MarketError> =
        Call::read("extension_history", "DescribeCapacityBlockExtensionHistory", region);
});

hooked!(BlockKinds {
    fn capacity_blocks_by_id(region: &Region, ids: &[String]) -> Result<Vec<CapacityBlockFacts>, MarketError> =
        Call::read("capacity_blocks_by_id", "DescribeCapacityBlocks", region);
});

hooked!(BlockStatusSource {
    fn block_status(region: &Region, ids: &[String]) -> Result<Vec<CapacityStatus>, MarketError> =
        Call::read("block_status", "DescribeCapacityBlockStatus", region);
    fn reservation_usage(region: &Region, id: &str) -> Result<ReservationUsage, MarketError> =
        Call::read("reservation_usage", "GetCapacityReservationUsage", region);
});

hooked!(InstanceSource {
    fn instances_in(region: &Region, id: &str) -> Result<Vec<String>, MarketError> =
        Call::read("instances_in", "DescribeInstances", region);
    fn reservation_of(region: &Region, id: &str) -> Result<Option<String>, MarketError> =
        Call::read("reservation_of", "DescribeInstances", region);
});

hooked!(Notifier {
    fn publish(topic: Topic, message: &Message) -> Result<(), NotifyError> =
        Call::other("publish", "Publish"), arg &topic;
});

hooked!(Reminders {
    fn sync(block: &Block, now: DateTime<Utc>) -> Result<(), ReminderError> =
        Call::other("sync", "CreateSchedule"), arg block;
    fn clear(block: &Block) -> Result<(), ReminderError> = Call::other("clear", "DeleteSchedule"), arg block;
});

hooked!(PagePublisher {
    fn publish(key: &str, html: &str) -> Result<(), PublishError> = Call::other("publish", "PutObject");
});

/// A gate a test holds calls at: each [`Gate::release`] lets that many through.
#[derive(Clone)]
pub struct Gate(Arc<Semaphore>);

impl Gate {
    /// Shut: no call passes until released.
    pub fn shut() -> Gate {
        Gate(Arc::new(Semaphore::new(0)))
    }
    pub fn release(&self, calls: usize) {
        self.0.add_permits(calls)
    }
    async fn pass(&self) {
        self.0.acquire().await.expect("the gate is never closed").forget();
    }
}

type Then = Arc<dyn Fn(&Call<'_>) -> HookVerdict + Send + Sync>;

struct Step {
    name: &'static str,
    /// How many more calls it takes; `None`, every one.
    left: Option<u32>,
    hold: Option<Gate>,
    then: Then,
}

/// The hook a test writes: which calls fail, are answered or held; every call is counted.
/// A call meets the first step that names it (by method or operation) and has calls left;
/// one no step names is made.
#[derive(Default)]
pub struct Script {
    steps: Mutex<Vec<Step>>,
    calls: Mutex<Vec<(&'static str, &'static str)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }

    fn step(self, name: &'static str, left: Option<u32>, hold: Option<Gate>, then: Then) -> Script {
        lock(&self.steps).push(Step { name, left, hold, then });
        self
    }

    /// Every call named `name` gets `then`'s verdict.
    pub fn on(self, name: &'static str, then: impl Fn(&Call<'_>) -> HookVerdict + Send + Sync + 'static) -> Script {
        self.step(name, None, None, Arc::new(then))
    }

    /// The first `n` calls named `name` get `then`'s verdict; later ones go on to the next step.
    pub fn first(
        self,
        n: u32,
        name: &'static str,
        then: impl Fn(&Call<'_>) -> HookVerdict + Send + Sync + 'static,
    ) -> Script {
        self.step(name, Some(n), None, Arc::new(then))
    }

    /// Every call named `name` fails with `error`, of the call's error type.
    pub fn fail<E: Clone + Send + Sync + 'static>(self, name: &'static str, error: E) -> Script {
        self.on(name, move |_| HookVerdict::error(error.clone()))
    }

    /// Every call named `name` is answered `answer`, of the method's return type.
    pub fn answer<R: Clone + Send + Sync + 'static>(self, name: &'static str, answer: R) -> Script {
        self.on(name, move |_| HookVerdict::answer(answer.clone()))
    }

    /// Every call named `name` waits at `gate`, then is made.
    pub fn hold(self, name: &'static str, gate: &Gate) -> Script {
        self.step(name, None, Some(gate.clone()), Arc::new(|_| HookVerdict::Proceed))
    }

    /// Every call named `name` waits for ever (EC2 that never answers).
    pub fn hang(self, name: &'static str) -> Script {
        self.hold(name, &Gate::shut())
    }

    /// The methods called, in order (failed, held and answered ones too).
    pub fn calls(&self) -> Vec<&'static str> {
        lock(&self.calls).iter().map(|(method, _)| *method).collect()
    }

    /// How many calls were named `name` (by method or operation).
    pub fn count(&self, name: &str) -> usize {
        lock(&self.calls).iter().filter(|(m, o)| *m == name || *o == name).count()
    }

    fn next(&self, call: &Call<'_>) -> Option<(Option<Gate>, Then)> {
        let mut steps = lock(&self.steps);
        let step = steps.iter_mut().find(|s| call.is(s.name) && s.left != Some(0))?;
        if let Some(left) = &mut step.left {
            *left -= 1;
        }
        Some((step.hold.clone(), step.then.clone()))
    }
}

#[async_trait]
impl Hook for Script {
    async fn before(&self, call: &Call<'_>) -> HookVerdict {
        lock(&self.calls).push((call.method, call.operation));
        let Some((hold, then)) = self.next(call) else { return HookVerdict::Proceed };
        if let Some(gate) = hold {
            gate.pass().await;
        }
        then(call)
    }
}
