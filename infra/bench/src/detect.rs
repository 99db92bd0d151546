//! (b) Detection latency, in virtual time: how long after a qualifying offering appears does a
//! scan's answer contain it (the purchase follows in the same run, after the run's asking).
//!
//! Each asker runs on a tokio runtime of its own with the clock paused (time jumps to the next
//! timer whenever every task waits), against the same in-process market and the same
//! appearances:
//! - capblock: the real planner (`plan::choose` over a `RegionMemory` per region, kept from run
//!   to run like the scan keeps it) and the real `ask_spread`, one run per schedule tick, over
//!   the buying account alone or with member accounts lending their describe limits (each
//!   account its own buckets, as EC2 keeps the limit per account and region);
//! - a one-by-one script: every question of a region in turn, one call per 4 s per region;
//! - the ideal asker the bound is defined by: the same at capblock's share (one call per 8 s).
//!
//! The market: 4 regions x 2-4 instance types x counts x durations = 256 questions, EC2's
//! describe limit per region (burst 2, one token per 4 s), 100-300 ms per call. Every question
//! always has a standing offering above the rule's threshold: its price is the (region, type)
//! pair's level times a factor of the question (1.00-1.20, fixed). One type per region is
//! "cheap" (level 1.05x the threshold, the others 1.40x), re-drawn every 3 days. Qualifying
//! offerings (0.90x the threshold) appear at random times (exponential gaps) and last 12 h
//! unless bought; 80 % of them on a cheap pair (the closer a question's standing price is to
//! the threshold, the likelier: weight 1 / (ratio - 1)), the rest on any question. So price
//! memory can help, and most of the time nothing qualifies.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use capblock_shared::app::paced_asker::{Answer, Helper, Pacing, ask_spread};
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::ids::{InstanceType, Region};
use capblock_shared::domain::market_memory::{Carried, Strikes};
use capblock_shared::domain::money::Money;
use capblock_shared::domain::offering::Offering;
use capblock_shared::domain::plan::{self, Asked, Candidate, DescribeBudget, RegionMemory};
use capblock_shared::ports::{DESCRIBE_LIMIT, MarketError, OfferingQuery, OfferingSource};
use chrono::{DateTime, Utc};
use tokio::time::{Instant, sleep, sleep_until};

/// splitmix64: small, seedable, good enough for a benchmark's coin flips.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize % n.max(1)
    }
    /// Index drawn with probability proportional to `w`.
    pub fn weighted(&mut self, w: &[f64]) -> usize {
        let total: f64 = w.iter().sum();
        let mut x = self.unit() * total;
        for (i, wi) in w.iter().enumerate() {
            if x < *wi {
                return i;
            }
            x -= wi;
        }
        w.len() - 1
    }
}

/// One region of the market: its name, the types it sells, instance counts, durations in days.
type RegionGrid = (&'static str, &'static [&'static str], &'static [u32], &'static [u32]);

/// The market's regions and what each sells.
const GRID: [RegionGrid; 4] = [
    ("us-east-1", &["p5.48xlarge", "p5e.48xlarge", "p4d.24xlarge", "trn1.32xlarge"], &[1, 2, 4, 8], &[1, 2, 7, 14]),
    ("us-east-2", &["p5.48xlarge", "p4d.24xlarge"], &[1, 2, 4, 8], &[1, 2, 3, 4, 7, 14, 21, 28]),
    ("us-west-2", &["p5.48xlarge", "p5e.48xlarge", "p4d.24xlarge", "trn1.32xlarge"], &[1, 2, 4, 8], &[1, 2, 7, 14]),
    ("eu-west-2", &["p5.48xlarge", "trn1.32xlarge"], &[1, 2, 4, 8, 16, 32, 48, 64], &[1, 2, 7, 14]),
];
const THRESHOLD: &str = "2.95";
const CHEAP_LEVEL: f64 = 1.05;
const DEAR_LEVEL: f64 = 1.40;
const APPEARANCE_LEVEL: f64 = 0.90;
/// EC2's describe limit per account and region: a bucket of `burst` calls, one token per
/// `refill`. Nothing published settles it: `READINGS` are the three readings the record allows.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub name: &'static str,
    pub burst: f64,
    pub refill: Duration,
}

/// A burst of 2 and one call per 4 s (public clients; the simulator's default); a burst of 10
/// and 0.15 calls/s (an open pull request in AWS's capacity finder sample); a burst of 2 and
/// one per 2 s (a version of the same sample's code).
pub const READINGS: [Limit; 3] = [
    Limit { name: "burst 2, 1 per 4 s", burst: 2.0, refill: Duration::from_secs(4) },
    Limit { name: "burst 10, 0.15 per s", burst: 10.0, refill: Duration::from_micros(6_666_667) },
    Limit { name: "burst 2, 1 per 2 s", burst: 2.0, refill: Duration::from_secs(2) },
];

/// Another caller in the account, in every region: `calls` calls spread over `over`, every
/// `every`, starting at `offset`.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub calls: u32,
    pub over: Duration,
    pub every: Duration,
    pub offset: Duration,
}

/// A person in the console (about 10 calls over 2 minutes, every 30 minutes) and a notebook
/// asking once every 20 s.
pub const A_PERSON: [Caller; 2] = [
    Caller {
        calls: 10,
        over: Duration::from_secs(120),
        every: Duration::from_secs(1800),
        offset: Duration::from_secs(100),
    },
    Caller { calls: 1, over: Duration::ZERO, every: Duration::from_secs(20), offset: Duration::from_secs(7) },
];
const LATENCY_MS: (u64, u64) = (100, 300);
const CLOCK: &str = "2026-12-01T00:00:00Z";

/// What the market does over the horizon.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub seed: u64,
    pub horizon: Duration,
    /// Mean gap between two appearances anywhere in the market.
    pub mean_gap: Duration,
    /// How long an appearance stays on offer unless bought.
    pub lifetime: Duration,
    /// Share of appearances on a currently cheap (region, type) pair.
    pub clustered: f64,
    /// How often each region's cheap type is re-drawn.
    pub rotate: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            seed: 13,
            horizon: Duration::from_secs(30 * 86400),
            mean_gap: Duration::from_secs(3600),
            lifetime: Duration::from_secs(12 * 3600),
            clustered: 0.8,
            rotate: Duration::from_secs(3 * 86400),
        }
    }
}

struct Question {
    key: String,
    query: OfferingQuery,
    region: usize,
    pair: usize,
    factor: f64,
    /// The standing offering at the cheap and at the dear level, and the qualifying one.
    standing: [Offering; 2],
    qualifying: Offering,
}

/// One call's question: one grid question, or several types of one count and duration.
struct Group {
    key: String,
    query: OfferingQuery,
    members: Vec<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Appearance {
    question: usize,
    at: Duration,
    until: Duration,
}

/// The market's script: questions, the cheap pair of each region per epoch, the appearances.
pub struct World {
    setup: Setup,
    questions: Vec<Question>,
    by_query: HashMap<(String, String, u32, u32), usize>,
    /// epoch -> region -> cheap pair
    cheap: Vec<Vec<usize>>,
    appearances: Vec<Appearance>,
    /// question -> its appearances, by time
    by_question: Vec<Vec<usize>>,
    pub threshold: Money,
}

fn offering(id: String, q: &OfferingQuery, acc: u32, ratio: f64, start: DateTime<Utc>) -> Offering {
    let hours = q.duration_hours;
    let fee = 2.95 * ratio * f64::from(acc * q.instance_count * hours);
    Offering {
        id,
        region: q.region.clone(),
        availability_zone: format!("{}a", q.region),
        instance_type: q.instance_type.clone(),
        instance_count: q.instance_count,
        start,
        end: start + chrono::Duration::hours(i64::from(hours)),
        duration_hours: hours,
        duration_minutes: 0,
        fee: Money::parse(&format!("{fee:.2}"), "USD").expect("a fee"),
        ultraserver: false,
        ultraservers: None,
        local_zone: false,
        segments: Vec::new(),
    }
}

pub fn clock() -> DateTime<Utc> {
    CLOCK.parse().expect("constant")
}

/// The grid's questions, each with its standing offerings and the one that qualifies, and the
/// (region, type) pairs they belong to.
fn grid_questions(rng: &mut Rng) -> (Vec<Question>, Vec<(usize, &'static str)>) {
    let now = clock();
    let (from, to) = (now + chrono::Duration::days(1), now + chrono::Duration::days(14));
    let start = now + chrono::Duration::days(3) + chrono::Duration::minutes(11 * 60 + 30);
    let catalog = AcceleratorCatalog::new();
    let mut questions = Vec::new();
    let mut pairs = Vec::new();
    for (ri, (region, types, counts, days)) in GRID.iter().enumerate() {
        for t in *types {
            let pair = pairs.len();
            pairs.push((ri, *t));
            let it: InstanceType = t.parse().expect("type");
            let acc = catalog.accelerators(&it).expect("a known type");
            for &c in *counts {
                for &d in *days {
                    let query = OfferingQuery {
                        region: region.parse().expect("region"),
                        instance_type: it.clone(),
                        instance_count: c,
                        ultraservers: None,
                        duration_hours: d * 24,
                        start_from: from,
                        start_to: to,
                        also_types: Vec::new(),
                    };
                    let factor = 1.0 + 0.2 * rng.unit();
                    let i = questions.len();
                    let standing = [CHEAP_LEVEL, DEAR_LEVEL]
                        .map(|l| offering(format!("cb-standing-{i}-{l}"), &query, acc, l * factor, start));
                    let qualifying = offering(format!("cb-qualifying-{i}"), &query, acc, APPEARANCE_LEVEL, start);
                    questions.push(Question {
                        key: format!("{t}|{c}|{d}d|in24h-336h"),
                        query,
                        region: ri,
                        pair,
                        factor,
                        standing,
                        qualifying,
                    });
                }
            }
        }
    }
    (questions, pairs)
}

impl World {
    pub fn new(setup: Setup) -> World {
        let mut rng = Rng::new(setup.seed);
        let (questions, pairs) = grid_questions(&mut rng);
        let epochs = (setup.horizon.as_secs_f64() / setup.rotate.as_secs_f64()).ceil() as usize + 1;
        let cheap: Vec<Vec<usize>> = (0..epochs)
            .map(|_| {
                (0..GRID.len())
                    .map(|ri| {
                        let mine: Vec<usize> = (0..pairs.len()).filter(|&p| pairs[p].0 == ri).collect();
                        mine[rng.below(mine.len())]
                    })
                    .collect()
            })
            .collect();
        let mut w = World {
            setup,
            questions,
            by_query: HashMap::new(),
            cheap,
            appearances: Vec::new(),
            by_question: Vec::new(),
            threshold: Money::parse(THRESHOLD, "USD").expect("constant"),
        };
        for (i, q) in w.questions.iter().enumerate() {
            let k = &q.query;
            w.by_query
                .insert((k.region.to_string(), k.instance_type.to_string(), k.instance_count, k.duration_hours), i);
        }
        w.by_question = vec![Vec::new(); w.questions.len()];
        w.appear(&mut rng);
        w
    }

    /// Draws the appearances until one lifetime before the horizon: each has its whole life to
    /// be found.
    fn appear(&mut self, rng: &mut Rng) {
        let setup = self.setup;
        let mut t = 0.0;
        let last = setup.horizon.saturating_sub(setup.lifetime).as_secs_f64();
        loop {
            t += -setup.mean_gap.as_secs_f64() * (1.0 - rng.unit()).ln();
            if t >= last {
                break;
            }
            let at = Duration::from_secs_f64(t);
            let q = if rng.unit() < setup.clustered {
                let epoch = self.epoch(at);
                let cheap: Vec<usize> = (0..self.questions.len())
                    .filter(|&i| self.cheap[epoch].contains(&self.questions[i].pair))
                    .collect();
                let weights: Vec<f64> = cheap.iter().map(|&i| 1.0 / (self.ratio(i, at) - 1.0)).collect();
                cheap[rng.weighted(&weights)]
            } else {
                rng.below(self.questions.len())
            };
            // One live appearance per question at a time.
            if self.by_question[q].iter().any(|&a| self.appearances[a].until > at) {
                continue;
            }
            self.by_question[q].push(self.appearances.len());
            self.appearances.push(Appearance { question: q, at, until: at + setup.lifetime });
        }
    }

    fn epoch(&self, at: Duration) -> usize {
        ((at.as_secs_f64() / self.setup.rotate.as_secs_f64()) as usize).min(self.cheap.len() - 1)
    }

    fn is_cheap(&self, q: usize, at: Duration) -> bool {
        self.cheap[self.epoch(at)][self.questions[q].region] == self.questions[q].pair
    }

    /// The standing price over the threshold.
    fn ratio(&self, q: usize, at: Duration) -> f64 {
        let level = if self.is_cheap(q, at) { CHEAP_LEVEL } else { DEAR_LEVEL };
        level * self.questions[q].factor
    }

    pub fn appearances(&self) -> usize {
        self.appearances.len()
    }

    pub fn questions_per_region(&self) -> usize {
        self.questions.len() / GRID.len()
    }

    /// The questions an asker of `per_question` types a call asks: a region's types of one
    /// count and duration together, `per_question` at most a call, each with its planner key
    /// and the grid questions it answers.
    fn groups(&self, per_question: usize) -> Vec<Group> {
        let mut out: Vec<Group> = Vec::new();
        for (i, q) in self.questions.iter().enumerate() {
            let k = &q.query;
            let open = out.iter_mut().find(|g| {
                g.query.region == k.region
                    && g.query.instance_count == k.instance_count
                    && g.query.duration_hours == k.duration_hours
                    && g.members.len() < per_question.max(1)
            });
            match open {
                Some(g) => {
                    g.query.also_types.push(k.instance_type.clone());
                    g.key = format!("{}+{}", k.instance_type, g.key);
                    g.members.push(i);
                }
                None => out.push(Group { key: q.key.clone(), query: k.clone(), members: vec![i] }),
            }
        }
        out
    }

    /// Every question, in the market's order (region by region).
    fn queries(&self) -> Vec<OfferingQuery> {
        self.questions.iter().map(|q| q.query.clone()).collect()
    }

    /// The share of appearances on a cheap pair, and on the 3 questions of it with the lowest
    /// standing price (what the planner's price memory can reach first).
    pub fn clustering(&self) -> (f64, f64) {
        let (mut on_cheap, mut on_top3) = (0usize, 0usize);
        for a in &self.appearances {
            if !self.is_cheap(a.question, a.at) {
                continue;
            }
            on_cheap += 1;
            let pair = self.questions[a.question].pair;
            let mut mine: Vec<usize> = (0..self.questions.len()).filter(|&i| self.questions[i].pair == pair).collect();
            mine.sort_by(|&x, &y| self.questions[x].factor.total_cmp(&self.questions[y].factor));
            if mine[..3].contains(&a.question) {
                on_top3 += 1;
            }
        }
        let n = self.appearances.len().max(1) as f64;
        (on_cheap as f64 / n, on_top3 as f64 / n)
    }
}

/// A market run: the world, the describe limit's buckets, what was found when.
pub struct Market<'w> {
    world: &'w World,
    start: Instant,
    limit: Limit,
    state: Mutex<State>,
}

struct State {
    rng: Rng,
    /// per account (0: the buying account), per region: tokens, last update. Each account has
    /// a describe limit of its own.
    buckets: Vec<Vec<(f64, Instant)>>,
    /// appearance -> when an answer first held it
    found: Vec<Option<Duration>>,
    calls: u64,
    refused: u64,
    others_calls: u64,
    others_refused: u64,
}

type Answered<'a> = Pin<Box<dyn Future<Output = Result<Vec<Offering>, MarketError>> + Send + 'a>>;

impl<'w> Market<'w> {
    /// A market whose describe limit `accounts` accounts call, each with buckets of its own.
    pub fn new(world: &'w World, seed: u64, limit: Limit, accounts: usize) -> Market<'w> {
        let start = Instant::now();
        Market {
            world,
            start,
            limit,
            state: Mutex::new(State {
                rng: Rng::new(seed),
                buckets: vec![vec![(limit.burst, start); GRID.len()]; accounts.max(1)],
                found: vec![None; world.appearances.len()],
                calls: 0,
                refused: 0,
                others_calls: 0,
                others_refused: 0,
            }),
        }
    }

    /// Takes a token of `account`'s bucket in region `ri` now, if there is one.
    fn take(&self, s: &mut State, account: usize, ri: usize, now: Instant) -> bool {
        let (tokens, last) = s.buckets[account][ri];
        let tokens =
            (tokens + now.duration_since(last).as_secs_f64() / self.limit.refill.as_secs_f64()).min(self.limit.burst);
        if tokens < 1.0 {
            s.buckets[account][ri] = (tokens, now);
            false
        } else {
            s.buckets[account][ri] = (tokens - 1.0, now);
            true
        }
    }

    /// Another caller's calls in every region until `end`, in the buying account.
    async fn other(&self, c: Caller, end: Instant) {
        let mut period = self.start + c.offset;
        while period < end {
            for k in 0..c.calls {
                sleep_until(period + c.over.mul_f64(f64::from(k) / f64::from(c.calls))).await;
                let now = Instant::now();
                let mut s = self.state();
                for ri in 0..GRID.len() {
                    s.others_calls += 1;
                    if !self.take(&mut s, 0, ri, now) {
                        s.others_refused += 1;
                    }
                }
            }
            period += c.every;
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn answer(&self, query: &OfferingQuery, account: usize) -> Result<Vec<Offering>, MarketError> {
        let w = self.world;
        // A question of several types (InstanceTypePreferences) answers each of them, for one
        // call of the describe limit.
        let asked: Vec<usize> = query
            .types()
            .into_iter()
            .map(|t| {
                let key = (query.region.to_string(), t.to_string(), query.instance_count, query.duration_hours);
                *w.by_query.get(&key).expect("a question of the market")
            })
            .collect();
        let region = w.questions[asked[0]].region;
        let latency = {
            let mut s = self.state();
            let (lo, hi) = LATENCY_MS;
            Duration::from_millis(lo + s.rng.next_u64() % (hi - lo + 1))
        };
        // The bucket is looked at when the call arrives, half way.
        sleep(latency / 2).await;
        let now = Instant::now();
        let at = now - self.start;
        let answer = {
            let mut s = self.state();
            s.calls += 1;
            if !self.take(&mut s, account, region, now) {
                s.refused += 1;
                Err(MarketError::Throttled {
                    operation: "DescribeCapacityBlockOfferings",
                    region: query.region.to_string(),
                    code: DESCRIBE_LIMIT,
                })
            } else {
                let mut list = Vec::with_capacity(2 * asked.len());
                for &qi in &asked {
                    let q = &w.questions[qi];
                    for &a in &w.by_question[qi] {
                        let ap = w.appearances[a];
                        if ap.at <= at && at < ap.until && s.found[a].is_none() {
                            // Bought in this run: gone for everyone after it.
                            s.found[a] = Some(at + latency / 2 - ap.at);
                            list.push(q.qualifying.clone());
                        }
                    }
                    list.push(q.standing[usize::from(!w.is_cheap(qi, at))].clone());
                }
                Ok(list)
            }
        };
        sleep(latency / 2).await;
        answer
    }
}

impl OfferingSource for Market<'_> {
    fn offerings<'life0, 'life1, 'async_trait>(&'life0 self, query: &'life1 OfferingQuery) -> Answered<'async_trait>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.answer(query, 0))
    }
}

/// The market as a member account calls it: the same offerings, that account's own buckets.
pub struct Member<'m, 'w> {
    market: &'m Market<'w>,
    account: usize,
}

impl OfferingSource for Member<'_, '_> {
    fn offerings<'life0, 'life1, 'async_trait>(&'life0 self, query: &'life1 OfferingQuery) -> Answered<'async_trait>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.market.answer(query, self.account))
    }
}

/// Who asks, and how.
#[derive(Debug, Clone, Copy)]
pub enum Asker {
    /// The planner and `ask_spread`, one run every `every`, the learned paces carried from run
    /// to run. `on_sight`: a qualifying answer is bought at once (capblock now); otherwise after
    /// the run's asking (capblock before), which detection then counts to. `accounts`: the
    /// buying account and `accounts - 1` member accounts lending their describe limits.
    /// `types_per_question`: a region's types of one count and duration asked together, up to
    /// this many a call (EC2's `InstanceTypePreferences`, 10 at most); 1: one type a call.
    Capblock { every: Duration, budget: DescribeBudget, on_sight: bool, accounts: usize, types_per_question: usize },
    /// Every question of a region in turn, one call per `gap` per region, forever.
    RoundRobin { gap: Duration },
}

/// What one asker achieved over the horizon.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Detection latency of each appearance found, seconds.
    pub found: Vec<f64>,
    pub appearances: usize,
    pub calls: u64,
    pub refused: u64,
    pub days: f64,
    pub regions: usize,
    /// capblock: seconds each run spent asking (start of the run to `ask_all`'s return).
    pub ask_secs: Vec<f64>,
    /// capblock: answers carried over to the next run.
    pub carried_over: u64,
    /// capblock: answers that were neither offerings nor carried over.
    pub lost: u64,
    /// Other callers' calls in the account, and how many of them EC2 refused.
    pub others_calls: u64,
    pub others_refused: u64,
}

impl Outcome {
    fn sorted(&self) -> Vec<f64> {
        let mut v = self.found.clone();
        v.sort_by(f64::total_cmp);
        v
    }
    /// The median over all appearances, a missed one counting as longer than any found.
    pub fn median(&self) -> Option<f64> {
        let v = self.sorted();
        let mid = self.appearances / 2;
        v.get(mid).copied()
    }
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let v = self.sorted();
        let i = ((self.appearances as f64 * p).ceil() as usize).saturating_sub(1);
        v.get(i).copied()
    }
    pub fn worst(&self) -> Option<f64> {
        self.sorted().last().copied()
    }
    pub fn missed(&self) -> usize {
        self.appearances - self.found.len()
    }
    pub fn calls_per_region_day(&self) -> f64 {
        self.calls as f64 / self.regions as f64 / self.days
    }
    /// The share of the other callers' calls EC2 refused.
    pub fn others_refused_share(&self) -> f64 {
        self.others_refused as f64 / self.others_calls.max(1) as f64
    }
}

/// Runs one asker over the world's horizon on a fresh runtime with the clock paused, under
/// `limit`, with `others` asking in the same account.
pub fn run(world: &World, asker: Asker, limit: Limit, others: &[Caller]) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().expect("a runtime");
    rt.block_on(async {
        let accounts = match asker {
            Asker::Capblock { accounts, .. } => accounts,
            Asker::RoundRobin { .. } => 1,
        };
        let market = Market::new(world, world.setup.seed ^ 0xA5A5, limit, accounts);
        let end = market.start + world.setup.horizon;
        let others_ask = futures::future::join_all(others.iter().map(|c| market.other(*c, end)));
        let (out, _) = tokio::join!(ask(world, &market, end, asker), others_ask);
        out
    })
}

async fn ask(world: &World, market: &Market<'_>, end: Instant, asker: Asker) -> Outcome {
    {
        let mut out = Outcome {
            found: Vec::new(),
            appearances: world.appearances(),
            calls: 0,
            refused: 0,
            days: world.setup.horizon.as_secs_f64() / 86400.0,
            regions: GRID.len(),
            ask_secs: Vec::new(),
            carried_over: 0,
            lost: 0,
            others_calls: 0,
            others_refused: 0,
        };
        match asker {
            Asker::Capblock { every, budget, on_sight, accounts, types_per_question } => {
                let members: Vec<(String, Member)> =
                    (1..accounts).map(|a| (format!("{a:012}"), Member { market, account: a })).collect();
                let helpers: Vec<Helper> =
                    members.iter().map(|(id, m)| (id.as_str(), m as &dyn OfferingSource)).collect();
                let groups = world.groups(types_per_question);
                capblock(world, &groups, market, &helpers, end, (every, budget, on_sight), &mut out).await
            }
            Asker::RoundRobin { gap } => {
                let all = world.queries();
                let lanes = (0..GRID.len()).map(|ri| {
                    let mine: Vec<&OfferingQuery> =
                        (0..all.len()).filter(|&i| world.questions[i].region == ri).map(|i| &all[i]).collect();
                    async move {
                        let (mut next, mut k) = (market.start, 0usize);
                        while next < end {
                            sleep_until(next).await;
                            // A refused question is asked again at the next turn.
                            if market.offerings(mine[k % mine.len()]).await.is_ok() {
                                k += 1;
                            }
                            next += gap;
                        }
                    }
                });
                futures::future::join_all(lanes).await;
            }
        }
        let s = market.state();
        out.found = s.found.iter().flatten().map(Duration::as_secs_f64).collect();
        out.calls = s.calls;
        out.refused = s.refused;
        out.others_calls = s.others_calls;
        out.others_refused = s.others_refused;
        out
    }
}

/// The questions a run asks, region by region as the scan plans them: each account's calls at
/// its own learned pace, every question askable.
fn plan_run(
    world: &World,
    groups: &[Group],
    memories: &BTreeMap<Region, RegionMemory>,
    helpers: &[Helper<'_>],
    budget: &DescribeBudget,
) -> Vec<usize> {
    let threshold = world.threshold.amount();
    let mut chosen: Vec<usize> = Vec::new();
    for (region, memory) in memories {
        let calls = budget.planned(memory.pace)
            + helpers.iter().map(|(a, _)| budget.planned(memory.helper_paces.get(*a).copied())).sum::<usize>();
        let mine: Vec<usize> = (0..groups.len()).filter(|&i| &groups[i].query.region == region).collect();
        let candidates: Vec<Candidate> = mine
            .iter()
            .map(|&i| Candidate { key: groups[i].key.clone(), threshold, closes_in: chrono::Duration::days(14) })
            .collect();
        chosen.extend(plan::choose(&candidates, memory, calls).into_iter().map(|j| mine[j]));
    }
    chosen
}

/// Takes a run's answers (to `chosen`, in order) into the regions' memories, as the scan does;
/// counts the questions carried over or lost.
fn take_answers(
    groups: &[Group],
    memories: &mut BTreeMap<Region, RegionMemory>,
    chosen: &[usize],
    answers: Vec<Answer>,
    catalog: &AcceleratorCatalog,
    now: DateTime<Utc>,
    out: &mut Outcome,
) {
    for (&i, answer) in chosen.iter().zip(answers) {
        let q = &groups[i];
        match answer {
            Answer::Offerings(list) => {
                let cheapest = list
                    .iter()
                    .filter_map(|o| o.price_per_accelerator_hour(catalog.accelerators(&o.instance_type)?))
                    .map(|r| r.per_unit)
                    .min();
                let memory = memories.get_mut(&q.query.region).expect("a region");
                memory.asked.insert(q.key.clone(), Asked { at: now, cheapest, recorded: None });
            }
            Answer::CarriedOver => out.carried_over += 1,
            _ => out.lost += 1,
        }
    }
}

/// capblock's scan, reduced to its asking: plan, `ask_spread`, remember; one run per tick,
/// `(every, budget, on_sight)`, over `groups` (its questions).
async fn capblock(
    world: &World,
    groups: &[Group],
    market: &Market<'_>,
    helpers: &[Helper<'_>],
    end: Instant,
    (every, budget, on_sight): (Duration, DescribeBudget, bool),
    out: &mut Outcome,
) {
    let catalog = AcceleratorCatalog::new();
    let pacing = Pacing::from(&budget);
    let regions: Vec<Region> = GRID.iter().map(|g| g.0.parse().expect("region")).collect();
    let mut memories: BTreeMap<Region, RegionMemory> =
        regions.iter().map(|r| (r.clone(), Default::default())).collect();
    let mut strikes = Strikes::new();
    let mut tick = market.start;
    while tick < end {
        sleep_until(tick).await;
        let now = clock() + chrono::Duration::from_std(tick - market.start).expect("in range");
        // The plan, region by region as the scan makes it (all questions askable).
        let chosen = plan_run(world, groups, &memories, helpers, &budget);
        let queries: Vec<OfferingQuery> = chosen.iter().map(|&i| groups[i].query.clone()).collect();
        let paces = memories.iter().filter_map(|(r, m)| Some((r.clone(), m.pace?))).collect();
        let helper_paces = memories
            .iter()
            .flat_map(|(r, m)| m.helper_paces.iter().map(move |(a, p)| ((r.clone(), a.clone()), *p)))
            .collect();
        let found_before = market.state().found.clone();
        let carried = Carried { paces, helper_paces, ..Carried::from(strikes.clone()) };
        let asked = ask_spread(market, helpers, &queries, &pacing, &carried, |_, _, _| {}).await;
        let asked_until = Instant::now();
        out.ask_secs.push((asked_until - tick).as_secs_f64());
        if !on_sight {
            // Bought after the run's asking: what this run found waited for its end.
            let mut s = market.state();
            let run_end = asked_until - market.start;
            for (a, f) in s.found.iter_mut().enumerate() {
                if found_before[a].is_none() && f.is_some() {
                    *f = Some(run_end - world.appearances[a].at);
                }
            }
        }
        for (region, pace) in &asked.paces {
            memories.get_mut(region).expect("a region").pace = Some(*pace);
        }
        for ((region, account), pace) in &asked.helper_paces {
            memories.get_mut(region).expect("a region").helper_paces.insert(account.clone(), *pace);
        }
        strikes = asked.strikes;
        take_answers(groups, &mut memories, &chosen, asked.answers, &catalog, now, out);
        for m in memories.values_mut() {
            m.prune(now);
        }
        tick += every;
        // A run that overran its tick starts the next one at once (Lambda would overlap them).
        let now = Instant::now();
        if tick < now {
            tick = now;
        }
    }
}
