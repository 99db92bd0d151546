//! Every actor, seeded and simulated: the real `app/` workflows (the scheduled scan, a late
//! scan overlapping it, the tracker, EC2's events, a person's `capblock buy` and `approve`,
//! dry-run replays of other moments) over the in-memory ports, on a virtual clock, with a
//! seeded fault injector (`faults`) in front of every port call.
//!
//! One seed decides everything: the market (`market`), each payment's length and outcome,
//! how late EC2 lists a reservation and whether it is unreadable for a while, which actors run
//! in a step, the order their calls interleave in, where a run crashes and which calls fail.
//! The invariants (`invariants`) are checked after every poll that moved money or bought; at
//! the end the faults stop, the runs that follow run, and everything must be on the books.
//! A failing seed prints the command that replays it exactly.
//!
//! What the model checker (`protocol`) walks exhaustively within small bounds, this runs at the
//! size of a busy stack for a simulated year, on the workflows themselves rather than a model.

mod faults;
mod invariants;
mod market;
mod requests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use capblock_core::app::on_capacity_event::CapacityEventHandler;
use capblock_core::app::purchase::Buyer;
use capblock_core::app::scan::{ScanSettings, Scanner};
use capblock_core::app::track::{TrackSettings, Tracker};
use capblock_core::domain::budget::StackBudgets;
use capblock_core::domain::catalog::AcceleratorCatalog;
use capblock_core::domain::decision::Priced;
use capblock_core::domain::extension::ExtensionOffer;
use capblock_core::domain::money::Money;
use capblock_core::domain::plan::DescribeBudget;
use capblock_core::domain::request::TeamApproval;
use capblock_core::domain::rule::{Mode, Rule};
use capblock_core::domain::run_time::RunTime;
use capblock_core::domain::stack::StackSettings;
use capblock_core::domain::tags::STACK_TAG;
use capblock_core::memory::{Listing, MemoryEc2, MemoryNotifier, MemoryReminders, MemoryTable, PaymentOutcome};
use capblock_core::ports::{Outbox, ReadClock};
use chrono::{DateTime, Duration, TimeZone, Utc};
use futures::task::{ArcWake, waker_ref};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use faults::{Counts, Rates, Sabotage};

/// One step of the virtual clock: the scan and the tracker run once per step (a stack on
/// `rate(10 minutes)` scans).
pub const STEP: Duration = Duration::minutes(10);

/// How long the faults stop at the end while the tracker runs: past every payment window
/// (12 hours) and listing delay.
const SETTLE_FOR: Duration = Duration::days(2);

/// Lines of the trace a failure prints.
const TRACE: usize = 60;

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub seed: u64,
    pub days: u32,
    pub rates: Rates,
    /// A bug put back on purpose (none in `make test`'s seeds and `make soak`).
    pub sabotage: Option<Sabotage>,
}

impl Config {
    /// A busy stack's faults for `days`, without sabotage.
    pub fn busy(seed: u64, days: u32) -> Config {
        Config { seed, days, rates: Rates::BUSY, sabotage: None }
    }
}

/// What one seed's run did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub seed: u64,
    pub days: u32,
    pub steps: u64,
    /// Actor runs by kind.
    pub runs: BTreeMap<&'static str, u64>,
    /// PurchaseCapacityBlock calls that bought.
    pub purchases: u64,
    /// Extensions EC2 sold.
    pub extensions: u64,
    /// Purchases of UltraServers (more than one part), and those whose parts' payments ended
    /// differently (one failed while another was held).
    pub ultraserver_purchases: u64,
    pub split_payments: u64,
    /// Purchases of segmented offerings (a reservation per segment).
    pub segmented_purchases: u64,
    /// Invariant checks made.
    pub checks: u64,
    pub faults: Counts,
    /// A digest of every step's money moves and the final books: equal for equal seeds.
    pub digest: u64,
    /// Where the time went: polling each kind of actor, and checking (for `make soak`'s figures).
    pub busy: BTreeMap<&'static str, std::time::Duration>,
    /// EC2 calls made, by operation.
    pub ec2_calls: BTreeMap<&'static str, u64>,
    /// People's requests: what the people did (filed, approvals, cancels, forged items) and
    /// how the requests ended (cancelled, rejected, expired, bought).
    pub requests: BTreeMap<&'static str, u64>,
}

/// A broken invariant, where, and how to replay it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub days: u32,
    pub at: DateTime<Utc>,
    pub broken: String,
    pub trace: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} broke the money promise at {}: {}", self.seed, self.at, self.broken)?;
        writeln!(f, "the last steps:")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        write!(
            f,
            "replay it exactly: cargo run -p capblock-verify --release --bin capblock-soak -- --seed {} --days {}",
            self.seed, self.days
        )
    }
}

/// Runs one seed.
pub fn run(config: Config) -> Result<Summary, Box<Failure>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    rt.block_on(Sim::new(config).run())
}

/// The clock the simulation starts at (a Monday; any fixed time would do).
pub fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).single().expect("a valid time")
}

type Run = Pin<Box<dyn Future<Output = String>>>;

/// The CLI's buyer, as a person's `capblock buy` or `approve` runs it: no pause before the
/// re-check (the simulation's clock does not move within a step).
fn person<'a>(
    market: &'a faults::Faulty<MemoryEc2>,
    store: &'a faults::Faulty<MemoryTable>,
    stack: &'a str,
    budgets: StackBudgets,
) -> Buyer<'a, faults::Faulty<MemoryEc2>, faults::Faulty<MemoryTable>> {
    Buyer { market, store, stack, budgets, recheck_pause: std::time::Duration::ZERO, answered_at: None }
}

/// An actor run the driver polls: its future, its place in the injector, and whether it was
/// woken since it was last polled.
struct Actor {
    kind: &'static str,
    run: usize,
    future: Run,
    woken: Arc<Woken>,
}

struct Woken {
    flag: AtomicBool,
    outer: Mutex<Option<Waker>>,
}

impl ArcWake for Woken {
    fn wake_by_ref(arc: &Arc<Self>) {
        arc.flag.store(true, Ordering::SeqCst);
        if let Some(w) = arc.outer.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            w.wake_by_ref();
        }
    }
}

struct Sim {
    config: Config,
    rng: ChaCha8Rng,
    inj: Arc<faults::Injector>,
    table: Arc<MemoryTable>,
    ec2: Arc<MemoryEc2>,
    notifier: Arc<MemoryNotifier>,
    reminders: Arc<MemoryReminders>,
    catalog: Arc<Mutex<AcceleratorCatalog>>,
    rules: Vec<Rule>,
    stack: StackSettings,
    market: market::Market,
    people: requests::People,
    teams: BTreeMap<String, TeamApproval>,
    now: DateTime<Utc>,
    approved: BTreeSet<String>,
    extension_offered: BTreeSet<(String, DateTime<Utc>)>,
    next_extension: u64,
    announced: BTreeSet<(String, &'static str)>,
    summary: Summary,
    trace: VecDeque<String>,
    last_moves: (u64, u64),
    hasher: DefaultHasher,
}

/// EC2 as harsh as the record, drawn from the seed: each part of a purchase pays in minutes or
/// hours of its 12-hour window, or fails (an UltraServer's parts each on their own, so one may
/// fail while another is held); some reservations are listed up to 40 minutes late, described
/// unreadably for up to 90 minutes, un-listed again for up to an hour after they were listed,
/// or listed twice; an extension's payment stays pending for up to 6 hours, and some fail; an
/// offering sells to every call, or to one, two or three before it is gone.
fn ec2(seed: u64) -> MemoryEc2 {
    let ec2_rng = Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0xec2)));
    let (pay, list, extend) = (ec2_rng.clone(), ec2_rng.clone(), ec2_rng);
    MemoryEc2::default()
        .with_payment(move |_, _| {
            let mut r = pay.lock().unwrap_or_else(|p| p.into_inner());
            // Most payments clear in minutes, some take hours of the 12-hour window, a few fail.
            let pending = if r.random_bool(0.75) {
                Duration::minutes(r.random_range(0..=20))
            } else {
                Duration::minutes(r.random_range(20..=12 * 60))
            };
            let outcome = if r.random_bool(0.08) { PaymentOutcome::Failed } else { PaymentOutcome::Paid };
            (pending, outcome)
        })
        .with_listing(move |_, _| {
            let mut r = list.lock().unwrap_or_else(|p| p.into_inner());
            let mut minutes = |p: f64, from: i64, to: i64| {
                if r.random_bool(p) { Duration::minutes(r.random_range(from..=to)) } else { Duration::zero() }
            };
            let (late, unreadable_for) = (minutes(0.15, 1, 40), minutes(0.05, 10, 90));
            let (after, lasting) = (minutes(0.05, 1, 30), minutes(1.0, 10, 60));
            let unlisted = (after > Duration::zero()).then_some((late + after, lasting));
            let twice = r.random_bool(0.05);
            Listing { late, unreadable_for, unlisted, twice }
        })
        .with_extension_payment(move |_| {
            let mut r = extend.lock().unwrap_or_else(|p| p.into_inner());
            let pending = if r.random_bool(0.7) {
                Duration::minutes(r.random_range(0..=5))
            } else {
                Duration::minutes(r.random_range(10..=6 * 60))
            };
            let outcome = if r.random_bool(0.1) { PaymentOutcome::Failed } else { PaymentOutcome::Paid };
            (pending, outcome)
        })
        // Decided by the offering's number, so every call asks the same stock of it.
        .with_stock(|o| {
            let n: u32 = o.id.trim_start_matches("cb-").parse().unwrap_or(0);
            (!n.is_multiple_of(4)).then_some(n % 4)
        })
}

impl Sim {
    fn new(config: Config) -> Sim {
        let now = start();
        let ec2 = ec2(config.seed);
        ec2.set_now(now);
        let rules = market::rules(now);
        let table = MemoryTable::quiet().with_rules(rules.clone());
        Sim {
            config,
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            inj: Arc::new(faults::Injector::new(config.seed, config.rates, config.sabotage)),
            table: Arc::new(table),
            ec2: Arc::new(ec2),
            notifier: Arc::default(),
            reminders: Arc::default(),
            catalog: Arc::new(Mutex::new(AcceleratorCatalog::new())),
            rules,
            stack: market::stack(),
            market: market::Market::new(config.seed),
            people: requests::People::new(config.seed),
            teams: requests::teams(),
            now,
            approved: BTreeSet::new(),
            extension_offered: BTreeSet::new(),
            next_extension: 0,
            announced: BTreeSet::new(),
            summary: Summary { seed: config.seed, days: config.days, ..Summary::default() },
            trace: VecDeque::new(),
            last_moves: (0, 0),
            hasher: DefaultHasher::new(),
        }
    }

    async fn run(mut self) -> Result<Summary, Box<Failure>> {
        let steps = i64::from(self.config.days) * Duration::days(1).num_minutes() / STEP.num_minutes();
        for _ in 0..steps {
            self.now += STEP;
            self.ec2.set_now(self.now);
            let (new, gone) = self.market.step(&mut self.rng, self.now);
            self.ec2.offer(new);
            self.offer_extensions();
            let gone: BTreeSet<String> = gone.into_iter().collect();
            self.ec2.retain_offerings(|o| !gone.contains(&o.id));
            let started = std::time::Instant::now();
            let actors = self.actors();
            *self.summary.busy.entry("drawing actors").or_default() += started.elapsed();
            self.drive(actors).await?;
            self.people.after_step(self.now, &self.table);
            invariants::requests(&self.table, &self.ec2, &self.people.watch).map_err(|broken| self.failure(broken))?;
            self.summary.steps += 1;
        }
        self.settle().await?;
        self.summary.purchases = self.ec2.purchases_made();
        self.summary.extensions = self.ec2.extensions_sold().len() as u64;
        let mut parts: BTreeMap<String, Vec<bool>> = BTreeMap::new();
        let holdings = self.ec2.holdings();
        // A segmented purchase's parts lie in zones of their own (the simulation's segments
        // do); an UltraServer's share its first part's.
        let first_zone: BTreeMap<&str, &str> = holdings
            .iter()
            .filter(|h| h.reservation.id == h.purchase)
            .map(|h| (h.purchase.as_str(), h.reservation.availability_zone.as_str()))
            .collect();
        let mut segmented = BTreeSet::new();
        for h in &holdings {
            if first_zone.get(h.purchase.as_str()).is_some_and(|z| *z != h.reservation.availability_zone) {
                segmented.insert(h.purchase.clone());
            }
            parts.entry(h.purchase.clone()).or_default().push(h.charged);
        }
        self.summary.segmented_purchases = segmented.len() as u64;
        parts.retain(|purchase, _| !segmented.contains(purchase));
        let ultra: Vec<_> = parts.values().filter(|p| p.len() > 1).collect();
        self.summary.ultraserver_purchases = ultra.len() as u64;
        self.summary.split_payments = ultra.iter().filter(|p| p.contains(&true) && p.contains(&false)).count() as u64;
        self.summary.faults = self.inj.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for i in self.table.intents() {
            (i.id, i.state.as_str()).hash(&mut self.hasher);
        }
        self.summary.digest = self.hasher.finish();
        self.summary.ec2_calls = self.ec2.calls();
        self.summary.requests = self.people.counts.clone();
        let bought = self.ec2.purchases_by_intent().into_keys().filter(|i| i.starts_with("request-")).count();
        self.summary.requests.insert("bought", bought as u64);
        Ok(self.summary)
    }

    /// EC2 offers to extend some of the stack's blocks in their last 30 hours, by a day or two
    /// at a seeded price (once per block and end).
    fn offer_extensions(&mut self) {
        for h in self.ec2.holdings() {
            let r = h.reservation;
            let near = r.end - self.now <= Duration::hours(30) && r.end > self.now;
            if !h.charged
                || !near
                || !self.extension_offered.insert((r.id.clone(), r.end))
                || !self.rng.random_bool(0.5)
            {
                continue;
            }
            let per = market::accelerators(r.instance_type.as_str());
            for days in 1..=2u32 {
                self.next_extension += 1;
                let cents: i64 = self.rng.random_range(200..=900);
                let hours = i64::from(days) * 24;
                let fee = rust_decimal::Decimal::new(cents * hours * i64::from(per * r.instance_count), 2);
                self.ec2.offer_extension(ExtensionOffer {
                    id: format!("cbx-{:06}", self.next_extension),
                    reservation_id: r.id.clone(),
                    duration_hours: days * 24,
                    start: r.end,
                    end: r.end + Duration::hours(hours),
                    fee: Money::usd(fee).expect("a valid fee"),
                });
            }
        }
    }

    /// The end: no more faults, no more offerings, and the tracker runs until every payment
    /// window and listing delay is over; then everything must be on the books.
    async fn settle(&mut self) -> Result<(), Box<Failure>> {
        *self.inj.rates.lock().unwrap_or_else(|p| p.into_inner()) = Rates::NONE;
        self.ec2.retain_offerings(|_| false);
        let until = self.now + SETTLE_FOR;
        while self.now < until {
            self.now += STEP;
            self.ec2.set_now(self.now);
            let tracker = self.tracker(RunTime::from(self.now));
            self.drive(vec![tracker]).await?;
        }
        let pending = self.table.pending().await.unwrap_or_default();
        invariants::settled(&self.table, &self.ec2, &pending, self.now).map_err(|broken| self.failure(broken))
    }

    fn failure(&self, broken: String) -> Box<Failure> {
        Box::new(Failure {
            seed: self.config.seed,
            days: self.config.days,
            at: self.now,
            broken,
            trace: self.trace.iter().cloned().collect(),
        })
    }

    fn note(&mut self, line: String) {
        line.hash(&mut self.hasher);
        if self.trace.len() == TRACE {
            self.trace.pop_front();
        }
        self.trace.push_back(line);
    }

    /// Polls the step's actors to the end, one poll at a time in an order the seed picks among
    /// those that can go on; a run that crashed is dropped where it stood.
    async fn drive(&mut self, mut actors: Vec<Actor>) -> Result<(), Box<Failure>> {
        std::future::poll_fn(|cx| {
            loop {
                let ready: Vec<usize> =
                    (0..actors.len()).filter(|i| actors[*i].woken.flag.load(Ordering::SeqCst)).collect();
                if actors.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                if ready.is_empty() {
                    // Every actor waits on a timer (tokio's paused clock moves to it).
                    for a in &actors {
                        *a.woken.outer.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
                let i = ready[self.rng.random_range(0..ready.len())];
                let a = &mut actors[i];
                a.woken.flag.store(false, Ordering::SeqCst);
                let waker = waker_ref(&a.woken);
                let started = std::time::Instant::now();
                let polled = a.future.as_mut().poll(&mut Context::from_waker(&waker));
                let (kind, run) = (a.kind, a.run);
                *self.summary.busy.entry(kind).or_default() += started.elapsed();
                match polled {
                    Poll::Ready(outcome) => {
                        actors.swap_remove(i);
                        self.note(format!("{} {kind}: {outcome}", self.now.format("%m-%d %H:%M")));
                    }
                    Poll::Pending if self.inj.crashed(run) => {
                        actors.swap_remove(i);
                        self.note(format!("{} {kind}: crashed", self.now.format("%m-%d %H:%M")));
                    }
                    Poll::Pending => {}
                }
                let started = std::time::Instant::now();
                let checked = self.check();
                *self.summary.busy.entry("checks").or_default() += started.elapsed();
                if let Err(broken) = checked {
                    return Poll::Ready(Err(self.failure(broken)));
                }
            }
        })
        .await
    }

    /// The invariants, whenever money or a block moved or EC2 was asked to buy.
    fn check(&mut self) -> Result<(), String> {
        let moves = (self.table.money_moves(), self.ec2.purchases_made() + self.ec2.extensions_sold().len() as u64);
        if moves == self.last_moves {
            return Ok(());
        }
        self.last_moves = moves;
        moves.hash(&mut self.hasher);
        self.summary.checks += 1;
        let mut rules = self.rules.clone();
        rules.extend(invariants::request_rules(&self.table, &self.people.watch));
        invariants::check(&self.table, &self.ec2, &rules, &self.stack)?;
        invariants::requests(&self.table, &self.ec2, &self.people.watch)
    }

    fn actor(&mut self, kind: &'static str, make: impl FnOnce(usize) -> Run) -> Actor {
        let run = self.inj.start_run();
        *self.summary.runs.entry(kind).or_default() += 1;
        let woken = Arc::new(Woken { flag: AtomicBool::new(true), outer: Mutex::new(None) });
        Actor { kind, run, future: make(run), woken }
    }

    /// This step's actors, as the seed draws them.
    fn actors(&mut self) -> Vec<Actor> {
        self.inj.clear_runs();
        let now = self.now;
        let mut out = vec![self.scan(RunTime::from(now), Mode::Live, "scan"), self.tracker(RunTime::from(now))];
        if self.rng.random_bool(0.05) {
            // A late invocation of the schedule, running beside the next one.
            out.push(self.scan(RunTime::from(now), Mode::Live, "late scan"));
        }
        if self.rng.random_bool(0.02) {
            let other = now + Duration::minutes(self.rng.random_range(-48 * 60..=48 * 60));
            out.push(self.scan(RunTime::asked(now, Some(other)), Mode::DryRun, "replayed scan"));
        }
        if self.rng.random_bool(0.01) {
            let other = now + Duration::minutes(self.rng.random_range(-48 * 60..=48 * 60));
            out.push(self.tracker(RunTime::asked(now, Some(other))));
        }
        if self.rng.random_bool(0.02)
            && let Some(a) = self.hand_purchase()
        {
            out.push(a);
        }
        out.extend(self.approvals());
        out.extend(self.people());
        out.extend(self.events());
        out
    }

    /// People's requests: this step's filings, decisions and cancels, each an actor behind the
    /// fault gate (the forged items are written straight into the table, by no actor).
    fn people(&mut self) -> Vec<Actor> {
        let hourly = (self.now - start()).num_minutes() % 60 == 0;
        let calls = self.people.step(self.now, &self.table, hourly);
        calls
            .into_iter()
            .map(|call| {
                let (inj, table) = (self.inj.clone(), self.table.clone());
                self.actor(call.kind(), move |run| {
                    Box::pin(async move { call.run(&faults::faulty(&table, &inj, run)).await })
                })
            })
            .collect()
    }

    fn scan(&mut self, at: RunTime, mode: Mode, kind: &'static str) -> Actor {
        let (inj, table, ec2, notifier, catalog) =
            (self.inj.clone(), self.table.clone(), self.ec2.clone(), self.notifier.clone(), self.catalog.clone());
        let teams = self.teams.clone();
        let settings = ScanSettings {
            stack: StackSettings { mode, ..self.stack.clone() },
            describe: DescribeBudget::for_refill(
                std::time::Duration::from_millis(1),
                1.0,
                std::time::Duration::from_secs(1),
            ),
            // A person's dry-run scan settles nothing; the scheduled ones do.
            settles: mode == Mode::Live,
        };
        self.actor(kind, move |run| {
            Box::pin(async move {
                let (market, store) = (faults::faulty(&ec2, &inj, run), faults::faulty(&table, &inj, run));
                let scanner = Scanner {
                    market: &market,
                    store: &store,
                    notifier: notifier.as_ref(),
                    catalog: catalog.as_ref(),
                    settings: &settings,
                    members: &[],
                };
                match scanner.run_with_requests(at, None, &teams).await {
                    Ok(r) => {
                        let acts: Vec<String> = r
                            .outcomes
                            .iter()
                            .filter_map(|o| o.action.as_ref().map(|a| format!("{} {a:?}", o.rule_id)))
                            .collect();
                        let refused = r.requests.map(|q| q.refused.len()).unwrap_or_default();
                        format!("{} question(s), {refused} request(s) refused, {}", r.answered, acts.join("; "))
                    }
                    Err(e) => format!("failed: {e}"),
                }
            })
        })
    }

    fn tracker(&mut self, at: RunTime) -> Actor {
        let (inj, table, ec2, notifier, reminders) =
            (self.inj.clone(), self.table.clone(), self.ec2.clone(), self.notifier.clone(), self.reminders.clone());
        let settings = TrackSettings {
            stack: self.stack.clone(),
            payment_warning_hours: vec![6, 1],
            adopt_untagged: false,
            regions: vec![],
        };
        let kind = if at.is_replay() { "replayed tracker" } else { "tracker" };
        self.actor(kind, move |run| {
            Box::pin(async move {
                let (market, store) = (faults::faulty(&ec2, &inj, run), faults::faulty(&table, &inj, run));
                let tracker = Tracker {
                    market: &market,
                    store: &store,
                    notifier: notifier.as_ref(),
                    reminders: reminders.as_ref(),
                    settings: &settings,
                    action_runner: None,
                };
                match tracker.run(at).await {
                    Ok(r) => format!("{} block(s), moved {:?}, settled {:?}", r.blocks, r.moved.len(), r.settled),
                    Err(e) => format!("failed: {e}"),
                }
            })
        })
    }

    /// `capblock buy`: a person buys an offering on sale for a live rule, by hand.
    fn hand_purchase(&mut self) -> Option<Actor> {
        let live: Vec<Rule> = self.rules.iter().filter(|r| r.mode == Mode::Live).cloned().collect();
        let rule = live[self.rng.random_range(0..live.len())].clone();
        let on_sale: Vec<_> =
            self.ec2.on_sale().into_iter().filter(|o| rule.regions.contains(&o.region) && rule.asks_for(o)).collect();
        if on_sale.is_empty() {
            return None;
        }
        let offering = on_sale[self.rng.random_range(0..on_sale.len())].clone();
        let priced = Priced::new(offering, &self.catalog.lock().unwrap_or_else(|p| p.into_inner()))?;
        let (now, name, budgets) = (self.now, self.stack.name.clone(), self.stack.budgets());
        let sim = (self.inj.clone(), self.table.clone(), self.ec2.clone());
        Some(self.actor("capblock buy", move |run| {
            Box::pin(async move {
                let (market, store) = (faults::faulty(&sim.2, &sim.0, run), faults::faulty(&sim.1, &sim.0, run));
                match person(&market, &store, &name, budgets).buy_by_hand(&rule, priced, Mode::Live, now).await {
                    Ok(a) => format!("{} {a:?}", rule.id),
                    Err(e) => format!("failed: {e}"),
                }
            })
        }))
    }

    /// `capblock approve`: a person approves a waiting decision, some steps after it was asked.
    fn approvals(&mut self) -> Vec<Actor> {
        // A person looks once an hour, at what was asked within the day (approvals expire).
        if (self.now - start()).num_minutes() % 60 != 0 {
            return Vec::new();
        }
        let asked = self.table.approvals_since(self.now - Duration::days(1));
        let waiting: Vec<_> = asked.into_iter().filter(|i| !self.approved.contains(&i.id)).collect();
        let mut out = Vec::new();
        for intent in waiting {
            if !self.rng.random_bool(0.5) {
                continue;
            }
            self.approved.insert(intent.id.clone());
            let Some(rule) = self.rules.iter().find(|r| r.id == intent.rule_id).cloned() else { continue };
            let (now, name, budgets) = (self.now, self.stack.name.clone(), self.stack.budgets());
            let sim = (self.inj.clone(), self.table.clone(), self.ec2.clone());
            out.push(self.actor("capblock approve", move |run| {
                Box::pin(async move {
                    let (market, store) = (faults::faulty(&sim.2, &sim.0, run), faults::faulty(&sim.1, &sim.0, run));
                    match person(&market, &store, &name, budgets).approve(&rule, &intent, Mode::Live, now).await {
                        Ok(a) => format!("{} {a:?}", intent.id),
                        Err(e) => format!("failed: {e}"),
                    }
                })
            }));
        }
        out
    }

    /// EC2's events for this stack's reservations: delivered at the start, the expiration
    /// warning 40 minutes before the end; some delivered twice, as EventBridge may.
    fn events(&mut self) -> Vec<Actor> {
        let mut due = Vec::new();
        for h in self.ec2.holdings() {
            let r = h.reservation;
            if !h.charged || r.tags.get(STACK_TAG) != Some(&self.stack.name) {
                continue;
            }
            let kinds = [
                ("delivered", r.start, "Capacity Block Delivered"),
                ("expiring", r.end - Duration::minutes(40), "Capacity Block Expiration Warning"),
            ];
            for (kind, at, detail_type) in kinds {
                if at <= self.now && at > self.now - STEP && self.announced.insert((r.id.clone(), kind)) {
                    due.push((r.clone(), at, detail_type));
                }
            }
        }
        let mut out = Vec::new();
        for (r, at, detail_type) in due {
            let copies = if self.rng.random_bool(0.3) { 2 } else { 1 };
            for _ in 0..copies {
                let event = serde_json::json!({
                    "version": "0",
                    "id": format!("ev-{}-{}", r.id, detail_type.len()),
                    "detail-type": detail_type,
                    "source": "aws.ec2",
                    "account": "123456789012",
                    "time": at.to_rfc3339(),
                    "region": r.region.to_string(),
                    "resources": [format!("arn:aws:ec2:{}:123456789012:capacity-reservation/{}", r.region, r.id)],
                    "detail": { "capacity-reservation-id": r.id, "end-date": r.end.to_rfc3339() }
                });
                let sim = (self.inj.clone(), self.table.clone(), self.ec2.clone());
                let (notifier, reminders, now) = (self.notifier.clone(), self.reminders.clone(), self.now);
                out.push(self.actor("event", move |run| {
                    Box::pin(async move {
                        let (market, store) =
                            (faults::faulty(&sim.2, &sim.0, run), faults::faulty(&sim.1, &sim.0, run));
                        let clock = ReadClock(now);
                        let handler = CapacityEventHandler {
                            store: &store,
                            market: &market,
                            notifier: notifier.as_ref(),
                            reminders: reminders.as_ref(),
                            clock: &clock,
                            leads: &[],
                            account: Some("123456789012"),
                        };
                        match handler.handle(&event).await {
                            Ok(h) => format!("{h:?}").chars().take(120).collect(),
                            Err(e) => format!("failed: {e}"),
                        }
                    })
                }));
            }
        }
        out
    }
}
