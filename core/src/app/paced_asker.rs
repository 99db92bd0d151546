//! Asking the market many questions within EC2's describe limit: one lane per region and
//! account, all regions at once, one call at a time in each lane. The buying account always has
//! a lane; member accounts that lend their own limit (`MemberMarket`) add theirs, and the
//! lanes of a region share its queue of questions (`ask_spread`).
//!
//! DescribeCapacityBlockOfferings has a limit of its own per account and region: a burst of
//! about 2, then about one call every 2-4 s, shared with everyone in the account. Past it EC2
//! answers `CapacityBlockDescribeLimitExceeded`, which no SDK retry mode treats as throttling.
//! So the lane, not the SDK, owns the retries of this read:
//! - calls go out one at a time at the region's learned pace (`domain::pace`: it rises while
//!   EC2 answers and falls on each refusal, sharper when capblock's own pace cannot explain it,
//!   i.e. the call came at least one refill after the previous one), from the first one: a scan
//!   never spends the burst that a person in the console may need. Each lane returns the pace
//!   it ends with, for the next run to start from;
//! - a throttled question (either limit) goes to the back of the queue and is asked again
//!   later in the run, up to `MAX_THROTTLED` times;
//! - a member account's lane refused `MEMBER_STRIKES` times for a family it was never answered
//!   for in the run (its quota of the family is 0, as the published default is, or someone in
//!   it spends its limit) stops asking the family for the run and gives the question back; the
//!   run names the member and family (`RunAnswers::helper_refused`), and a member noted so gets
//!   one call of the family a run (`Carried::helper_probes`). Such refusals count against
//!   neither the question nor `contended` (until the family is answered on the lane): a member
//!   that lends nothing costs the run a few calls of its own limit, not the others' questions;
//! - a family whose calls are refused with `CapacityBlockDescribeLimitExceeded` `QUOTA_STRIKES`
//!   times in a row (counted across runs), each time after resting at least one full refill,
//!   with no success of its own in between, most likely has a Capacity Block quota of 0: EC2
//!   answers that on every call however slowly it is asked. Its questions end as `QuotaZero`,
//!   but only when the caller says the family's refusals are spread over runs and time
//!   (`Carried::conclusive`, `domain::plan::Refusals`): anyone allowed the call can empty the
//!   account's bucket with one burst, and a busy account can look the same for a while. A
//!   finding starts the count again. A family with a quota of 0 noted gets one call a run
//!   (`Carried::probes`), never retried in the run: the first success clears the finding;
//! - a one-shot search (`ask_once`: a person's `capblock offerings`) has no later run to spread
//!   refusals over, so it cannot conclude a quota of 0 as a scan does; instead it gives a family
//!   up after `ONE_SHOT_REFUSALS` rested describe-limit refusals in a row with no answer of its
//!   own in between (`Answer::GivenUp`: a quota of 0, or someone else spending the limit, which
//!   the caller tells apart through Service Quotas), and tells each refusal it waits out
//!   (`Retrying`), so a person is never left watching a silent search;
//! - "not sold here" (InvalidParameterValue) ends that question and the type's others;
//!   "not supported in this region" closes the lane;
//! - an unknown answer (5xx, timeout) is retried once; a second one fails the region's
//!   remaining questions at once (a dead region costs two timeouts, not one per question);
//! - when `ask_for` has passed, the questions still waiting are carried over to the next run:
//!   throttling never makes a region "failed".
//!
//! Lane time is real elapsed time (tokio's clock, so tests run it paused), never business time.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::{Instant, sleep, sleep_until};

use crate::domain::ids::Region;
use crate::domain::market_memory::{Carried, Strikes};
use crate::domain::offering::Offering;
use crate::domain::pace::{Pace, PaceBounds};
use crate::domain::plan::{DescribeBudget, family};
use crate::ports::{DESCRIBE_LIMIT, MarketError, MemberMarket, OfferingQuery, OfferingSource};

/// Throttled attempts a question may make in one run before it is carried over.
pub const MAX_THROTTLED: u32 = 4;
/// Rested `CapacityBlockDescribeLimitExceeded` refusals in a row that mean a quota of 0.
pub const QUOTA_STRIKES: u32 = 6;
/// Rested `CapacityBlockDescribeLimitExceeded` refusals in a row after which a one-shot search
/// gives a family up. Preflight's bound (a first call and two more, each after a full refill):
/// a token bucket refills at least one call per refill, so three rested calls all refused mean
/// a quota of 0 or someone draining the bucket as fast as it refills, throughout; and the lane's
/// pace halves on each such refusal (down to `DescribeBudget::slowest`, 7.5 refills), so the
/// family adds at most two of the slowest gaps to the search (60 s at EC2's assumed 4 s refill;
/// 46 s for a family asked alone: 0, 16 and 46 s), where it kept a person waiting the whole hour
/// of asking.
pub const ONE_SHOT_REFUSALS: u32 = 3;
/// Describe-limit refusals of one family, never answered on a member's lane in the run, after
/// which the member stops asking it for the run.
pub const MEMBER_STRIKES: u32 = 3;
/// Extra attempts after an unknown answer (5xx, timeout).
const UNKNOWN_RETRIES: u32 = 1;
const UNKNOWN_PAUSE: Duration = Duration::from_millis(250);
/// How often a lane with nothing to take looks again while another lane's call is out.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// How a lane spaces its calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacing {
    /// Where a region's pace starts and the bounds it learns within. `bounds.refill`: a
    /// refusal of a call sent at least this long after the previous one is not capblock's doing.
    pub bounds: PaceBounds,
    /// No call starts after this long; what is left is carried over.
    pub ask_for: Duration,
}

impl From<&DescribeBudget> for Pacing {
    fn from(b: &DescribeBudget) -> Pacing {
        Pacing { bounds: b.bounds(), ask_for: b.ask_for }
    }
}

/// The final answer to one question in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Offerings(Vec<Offering>),
    /// Not asked, or still throttled, when the run's asking time was over: a later run asks it.
    CarriedOver,
    /// `CapacityBlockDescribeLimitExceeded` every time, even paced: the family's quota is 0.
    QuotaZero,
    /// The region does not sell this instance type as Capacity Blocks (EC2's words).
    NotSold(String),
    /// The region does not sell Capacity Blocks at all.
    Unsupported,
    /// EC2 failed (twice for unknown answers) or refused the question.
    Failed(MarketError),
    /// A one-shot search (`ask_once`) gave the family up: `CapacityBlockDescribeLimitExceeded` at
    /// `ONE_SHOT_REFUSALS` rested calls in a row. A quota of 0, or the describe limit spent by
    /// someone else all along; a scan never answers this (its count goes on across runs).
    GivenUp,
}

/// A refusal a lane waits out before asking the question again, told as it happens (a person
/// watching a one-shot search): what was refused, with which code, and how the lane goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retrying<'a> {
    pub query: &'a OfferingQuery,
    /// EC2's code: `DESCRIBE_LIMIT` (the describe limit, or a quota of 0) or `REQUEST_LIMIT`.
    pub code: &'static str,
    /// The family's describe-limit refusals in a row after a full refill (`None`: a refusal the
    /// lane's own pace may explain, which does not count towards giving up).
    pub in_a_row: Option<u32>,
    /// Refusals in a row after which the family is given up (a one-shot search), if any.
    pub give_up_after: Option<u32>,
    /// The lane's gap between calls from now on (its pace slowed on the refusal).
    pub gap: Duration,
}

/// How a run treats the refusals it meets beyond the rules above: a scan's run neither gives a
/// family up nor tells anyone; a one-shot search does both.
struct OnRefusal<'t> {
    give_up_after: Option<u32>,
    told: &'t (dyn Fn(&Retrying<'_>) + Sync),
}

/// What a run of questions gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAnswers {
    /// One answer per question, in the order of the questions.
    pub answers: Vec<Answer>,
    /// The strikes to carry to the next run (only families with some; a family found with a
    /// quota of 0 starts again at none).
    pub strikes: Strikes,
    /// The families refused after resting in this run.
    pub refused: BTreeSet<(Region, String)>,
    /// The calls each region's lane sent (a question may take several).
    pub calls: BTreeMap<Region, Calls>,
    /// The pace each region's lane ended with (only regions asked).
    pub paces: BTreeMap<Region, Pace>,
    /// The calls each member account's lane sent, per (region, account).
    pub helper_calls: BTreeMap<(Region, String), Calls>,
    /// The pace each member account's lane ended with, per (region, account).
    pub helper_paces: BTreeMap<(Region, String), Pace>,
    /// Member accounts whose lane stopped on a failure, and the first failure.
    pub helper_failed: BTreeMap<String, String>,
    /// (region, account, family): a member's lane refused on every call of the family this run
    /// (`MEMBER_STRIKES`, or its one probe), which it then stopped asking.
    pub helper_refused: BTreeSet<(Region, String, String)>,
    /// (region, account, family): a member's lane answered for the family this run.
    pub helper_answered: BTreeSet<(Region, String, String)>,
}

impl RunAnswers {
    /// A run before any lane ended: no answers yet.
    fn empty() -> RunAnswers {
        RunAnswers {
            answers: Vec::new(),
            strikes: Strikes::new(),
            refused: BTreeSet::new(),
            calls: BTreeMap::new(),
            paces: BTreeMap::new(),
            helper_calls: BTreeMap::new(),
            helper_paces: BTreeMap::new(),
            helper_failed: BTreeMap::new(),
            helper_refused: BTreeSet::new(),
            helper_answered: BTreeSet::new(),
        }
    }

    /// Keeps what one region's lanes ended with: the buying account's (`home`) calls, pace and
    /// families, and each member's (`helper_ends`, in the order of `helpers`).
    fn keep_lanes(&mut self, region: &Region, home: LaneEnd, helpers: &[Helper<'_>], helper_ends: Vec<LaneEnd>) {
        self.calls.insert(region.clone(), home.calls);
        self.paces.insert(region.clone(), home.pace);
        let families = home.families;
        self.strikes
            .extend(families.strikes.into_iter().filter(|(_, n)| *n > 0).map(|(f, n)| ((region.clone(), f), n)));
        self.refused.extend(families.refused.into_iter().map(|f| (region.clone(), f)));
        for (&(account, _), end) in helpers.iter().zip(helper_ends) {
            let key = (region.clone(), account.to_string());
            self.helper_calls.insert(key.clone(), end.calls);
            self.helper_paces.insert(key, end.pace);
            if let Some(e) = end.failed {
                self.helper_failed.entry(account.to_string()).or_insert_with(|| e.to_string());
            }
            let of = |f: String| (region.clone(), account.to_string(), f);
            self.helper_refused.extend(end.member.gave_up.into_iter().map(of));
            self.helper_answered.extend(end.member.answered.into_iter().map(of));
        }
    }
}

/// DescribeCapacityBlockOfferings calls one region's lane sent, and how many EC2 throttled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub sent: usize,
    pub throttled: usize,
    /// Of the throttled, the describe-limit refusals capblock's own pace does not explain: the
    /// bucket was emptied by someone else, who likely met refusals too. (A member's refusals of
    /// a family never answered on its lane are not: they may be its quota of 0.)
    pub contended: usize,
}

/// Asks every question and returns each answer in the order of `queries`; calls `answered`
/// once per question when its answer is final (progress bars). `carried`: what earlier runs
/// saw of each family.
pub async fn ask_all<M, F>(
    market: &M,
    queries: &[OfferingQuery],
    pacing: &Pacing,
    carried: &Carried,
    answered: F,
) -> RunAnswers
where
    M: OfferingSource + ?Sized,
    F: Fn() + Sync,
{
    ask_spread(market, &[], queries, pacing, carried, |_, _, _| answered()).await
}

/// A member account lending its describe limit, as the lanes borrow it: its id and its market
/// (a `ports::MemberMarket`'s, or a bench's stand-in).
pub type Helper<'a> = (&'a str, &'a dyn OfferingSource);

/// The lanes' view of `MemberMarket`s.
pub fn helpers(members: &[MemberMarket]) -> Vec<Helper<'_>> {
    members.iter().map(|w| (w.account.as_str(), w.market.as_ref())).collect()
}

/// [`ask_all`] over the buying account (`home`) and the member accounts in `helpers`, handing
/// each final answer to `seen` (with its index into `queries`) the moment it is final: a scan
/// buys what qualifies while the other questions are still being asked. Each account has its
/// own describe limit per region (EC2 User Guide), so a region gets one lane per account, each
/// at its own learned pace, all taking the region's next question from one queue. Each question is asked by one account at a time and answered once; a faster
/// account simply takes more. What only the buying account can tell stays its own: the
/// refusals that may mean a quota of 0 are counted on its calls alone, and a family with a
/// quota of 0 noted is probed by it alone (another account's quota says nothing of the buyer's).
/// A helper that fails (its role refused, EC2 failing twice) gives its question back and stops
/// for the run; the other lanes ask the rest. A helper refused on every call of a family stops
/// asking that family (`MEMBER_STRIKES`). `seen` gets each final answer with the member
/// account whose call gave it (`None`: the buying account's, or no call): an offering id a
/// member was shown may not be the buying account's to buy (`app::scan` asks again first).
pub async fn ask_spread<M, F>(
    home: &M,
    helpers: &[Helper<'_>],
    queries: &[OfferingQuery],
    pacing: &Pacing,
    carried: &Carried,
    seen: F,
) -> RunAnswers
where
    M: OfferingSource + ?Sized,
    F: Fn(usize, &Answer, Option<&str>) + Sync,
{
    let scan = OnRefusal { give_up_after: None, told: &|_| {} };
    ask_lanes(home, helpers, queries, pacing, carried, &scan, seen).await
}

/// A person's search, asked once (`capblock offerings`): every question at the scan's pace, with
/// no earlier run's memory and none kept. `answered` is called once per question when its answer
/// is final; `told` with each refusal the lane waits out. A family refused at
/// `ONE_SHOT_REFUSALS` rested calls in a row is given up (`Answer::GivenUp`), so the search ends
/// within a bounded wait however EC2 refuses it.
pub async fn ask_once<M, F, T>(
    market: &M,
    queries: &[OfferingQuery],
    pacing: &Pacing,
    answered: F,
    told: T,
) -> RunAnswers
where
    M: OfferingSource + ?Sized,
    F: Fn() + Sync,
    T: Fn(&Retrying<'_>) + Sync,
{
    let once = OnRefusal { give_up_after: Some(ONE_SHOT_REFUSALS), told: &told };
    ask_lanes(market, &[], queries, pacing, &Carried::default(), &once, |_, _, _| answered()).await
}

/// [`ask_spread`], with what the run does on a refusal (`on_refusal`).
async fn ask_lanes<M, F>(
    home: &M,
    helpers: &[Helper<'_>],
    queries: &[OfferingQuery],
    pacing: &Pacing,
    carried: &Carried,
    on_refusal: &OnRefusal<'_>,
    seen: F,
) -> RunAnswers
where
    M: OfferingSource + ?Sized,
    F: Fn(usize, &Answer, Option<&str>) + Sync,
{
    let deadline = Instant::now() + pacing.ask_for;
    let mut lanes: Vec<(&Region, Vec<usize>)> = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        match lanes.iter_mut().find(|(r, _)| *r == &q.region) {
            Some((_, list)) => list.push(i),
            None => lanes.push((&q.region, vec![i])),
        }
    }
    let seen = &seen;
    let results = join_all(lanes.into_iter().map(|(region, list)| {
        let families = Families::carried(carried, region);
        let shared = Mutex::new(Shared::new(list, families.probes.clone()));
        let start = |p: Option<&Pace>| p.map_or_else(|| Pace::start(&pacing.bounds), |p| p.within(&pacing.bounds));
        let pace = start(carried.paces.get(region));
        async move {
            let home_lane = Lane::new(pacing, deadline, families, pace, None, on_refusal);
            let helper_lanes = helpers.iter().map(|&(account, market)| {
                let pace = start(carried.helper_paces.get(&(region.clone(), account.to_string())));
                let probes = carried
                    .helper_probes
                    .iter()
                    .filter(|(r, a, _)| r == region && a == account)
                    .map(|(_, _, f)| f.clone())
                    .collect();
                let mut lane = Lane::new(pacing, deadline, Families::none(), pace, Some(account), on_refusal);
                lane.member.probes = probes;
                lane.run(market, queries, &shared, seen)
            });
            let (home_end, helper_ends) =
                futures::join!(home_lane.run(home, queries, &shared, seen), join_all(helper_lanes));
            let answers = shared.into_inner().unwrap_or_else(|p| p.into_inner()).finish(queries, region, seen);
            (region, answers, home_end, helper_ends)
        }
    }))
    .await;
    let mut out: Vec<Option<Answer>> = vec![None; queries.len()];
    let mut run = RunAnswers::empty();
    for (region, answers, home, helper_ends) in results {
        for (i, a) in answers {
            out[i] = Some(a);
        }
        run.keep_lanes(region, home, helpers, helper_ends);
    }
    run.answers = out.into_iter().map(|a| a.expect("every question gets an answer")).collect();
    run
}

/// What one lane knows and learns of its region's families.
struct Families {
    /// Rested describe-limit refusals in a row.
    strikes: HashMap<String, u32>,
    conclusive: HashSet<String>,
    probes: HashSet<String>,
    /// Refused after resting in this run.
    refused: HashSet<String>,
}

impl Families {
    /// The buying account's in `region`, as earlier runs left them (`carried`).
    fn carried(carried: &Carried, region: &Region) -> Families {
        let of_region = |set: &BTreeSet<(Region, String)>| -> HashSet<String> {
            set.iter().filter(|(r, _)| r == region).map(|(_, f)| f.clone()).collect()
        };
        Families {
            strikes: carried
                .strikes
                .iter()
                .filter(|((r, _), _)| r == region)
                .map(|((_, f), n)| (f.clone(), *n))
                .collect(),
            conclusive: of_region(&carried.conclusive),
            probes: of_region(&carried.probes),
            refused: HashSet::new(),
        }
    }

    /// A helper's: it concludes nothing of the buying account's families.
    fn none() -> Families {
        Families {
            strikes: HashMap::new(),
            conclusive: HashSet::new(),
            probes: HashSet::new(),
            refused: HashSet::new(),
        }
    }
}

/// What a member's lane learns of its own families in the run: its account's quotas are its
/// own, so nothing here is shared with the other lanes.
#[derive(Default)]
struct MemberFamilies {
    /// Families noted refused on every call in an earlier run: one call this run.
    probes: HashSet<String>,
    /// Describe-limit refusals of families not answered on this lane yet...
    refusals: HashMap<String, u32>,
    /// ...of them, the rested ones: counted `contended` once the family is answered.
    held: HashMap<String, usize>,
    answered: BTreeSet<String>,
    /// Families this lane stopped asking: refused on every call.
    gave_up: BTreeSet<String>,
}

/// What a region's lanes share: the questions still waiting, the answers so far, and what EC2
/// said of the region that holds for every account.
struct Shared {
    queue: VecDeque<usize>,
    out: Vec<(usize, Answer)>,
    /// Throttled attempts per question (whoever asked).
    throttled: HashMap<usize, u32>,
    /// Types the region does not sell (EC2's message): a fact of the region, whoever asked.
    not_sold: HashMap<String, String>,
    /// Families the buying account's refusals found with a quota of 0 this run.
    quota_zero: BTreeSet<String>,
    /// Families a one-shot search gave up this run.
    given_up: BTreeSet<String>,
    /// Families only the buying account asks (a quota of 0 noted: its probe).
    home_only: HashSet<String>,
    /// The region's end for every question still waiting (unsupported, or failed).
    closed: Option<Answer>,
    /// Questions a lane has taken and not yet answered or given back: a lane with nothing to
    /// take waits while any is out, as it may come back (throttled) for it to ask.
    in_flight: usize,
}

impl Shared {
    fn new(list: Vec<usize>, home_only: HashSet<String>) -> Shared {
        Shared {
            queue: list.into(),
            out: Vec::new(),
            throttled: HashMap::new(),
            not_sold: HashMap::new(),
            quota_zero: BTreeSet::new(),
            given_up: BTreeSet::new(),
            home_only,
            closed: None,
            in_flight: 0,
        }
    }

    /// The answer a waiting question already has without a call, if any.
    fn known(&self, q: &OfferingQuery) -> Option<Answer> {
        if let Some(a) = &self.closed {
            return Some(a.clone());
        }
        let fam = family(q.instance_type.as_str());
        if self.quota_zero.contains(fam) {
            return Some(Answer::QuotaZero);
        }
        if self.given_up.contains(fam) {
            return Some(Answer::GivenUp);
        }
        self.not_sold.get(q.instance_type.as_str()).map(|m| Answer::NotSold(m.clone()))
    }

    fn done<F: Fn(usize, &Answer, Option<&str>)>(&mut self, i: usize, a: Answer, seen: &F, by: Option<&str>) {
        seen(i, &a, by);
        self.out.push((i, a));
    }

    /// The next question a lane may ask (`home`: the buying account's lane; `skip`: families
    /// the lane stopped asking), answering on the way those that need no call.
    fn take<F: Fn(usize, &Answer, Option<&str>)>(
        &mut self,
        home: bool,
        skip: &BTreeSet<String>,
        queries: &[OfferingQuery],
        seen: &F,
    ) -> Option<usize> {
        let mut k = 0;
        while k < self.queue.len() {
            let i = self.queue[k];
            let q = &queries[i];
            if let Some(a) = self.known(q) {
                self.queue.remove(k);
                self.done(i, a, seen, None);
                continue;
            }
            let fam = family(q.instance_type.as_str());
            if home || !(self.home_only.contains(fam) || skip.contains(fam)) {
                self.queue.remove(k);
                self.in_flight += 1;
                return Some(i);
            }
            k += 1;
        }
        None
    }

    /// Answers the waiting questions that need no call (a family given up, a type not sold);
    /// whether any question is still to be asked, or out and may come back.
    fn settle<F: Fn(usize, &Answer, Option<&str>)>(&mut self, queries: &[OfferingQuery], seen: &F) -> bool {
        for i in std::mem::take(&mut self.queue) {
            match self.known(&queries[i]) {
                Some(a) => self.done(i, a, seen, None),
                None => self.queue.push_back(i),
            }
        }
        !self.queue.is_empty() || self.in_flight > 0
    }

    /// A question to ask again later in the run (after the ones waiting).
    fn again<F: Fn(usize, &Answer, Option<&str>)>(&mut self, i: usize, queries: &[OfferingQuery], seen: &F) {
        match self.known(&queries[i]) {
            Some(a) => self.done(i, a, seen, None),
            None => self.queue.push_back(i),
        }
    }

    /// Every lane has stopped: what still waits is answered by what is known, or carried over.
    fn finish<F: Fn(usize, &Answer, Option<&str>)>(
        mut self,
        queries: &[OfferingQuery],
        region: &Region,
        seen: &F,
    ) -> Vec<(usize, Answer)> {
        let waiting: Vec<usize> = self.queue.drain(..).collect();
        let mut carried = 0;
        for i in waiting {
            let a = self.known(&queries[i]).unwrap_or_else(|| {
                carried += 1;
                Answer::CarriedOver
            });
            self.done(i, a, seen, None);
        }
        if carried > 0 {
            tracing::info!(%region, waiting = carried, "asking time over; questions carried over to the next run");
        }
        self.out
    }
}

/// What a lane does after a call's answer.
enum Next {
    /// Takes the next question at its pace.
    Go,
    /// Stops for this run.
    Stop,
    /// Asks the same question again after a pause (an unknown answer, once).
    Retry,
}

/// How a lane ended: what it learned and spent, and (a helper's) why it stopped early.
struct LaneEnd {
    families: Families,
    calls: Calls,
    pace: Pace,
    failed: Option<MarketError>,
    member: MemberFamilies,
}

/// One account's lane in one region.
struct Lane<'p> {
    pacing: &'p Pacing,
    deadline: Instant,
    pace: Pace,
    last_sent: Option<Instant>,
    families: Families,
    calls: Calls,
    /// `None`: the buying account; else the member account lending its limit.
    helper: Option<&'p str>,
    /// A member's lane: its own families' refusals and answers.
    member: MemberFamilies,
    unknown: u32,
    on_refusal: &'p OnRefusal<'p>,
    /// Why a member's lane stopped early (its market failed or refused), for `LaneEnd`.
    failed: Option<MarketError>,
}

impl<'p> Lane<'p> {
    fn new(
        pacing: &'p Pacing,
        deadline: Instant,
        families: Families,
        pace: Pace,
        helper: Option<&'p str>,
        on_refusal: &'p OnRefusal<'p>,
    ) -> Lane<'p> {
        Lane {
            pacing,
            deadline,
            pace,
            last_sent: None,
            families,
            calls: Calls::default(),
            helper,
            member: MemberFamilies::default(),
            unknown: 0,
            on_refusal,
            failed: None,
        }
    }

    /// A question EC2 throttled: the family's refusal counted (a refusal after resting, on the
    /// buying account's calls) or the lane's pace slowed (one its own pace may have caused), and
    /// what becomes of the question: its answer, or `None` to ask it again later in the run.
    fn after_throttle(
        &mut self,
        e: MarketError,
        i: usize,
        q: &OfferingQuery,
        rested: bool,
        shared: &mut Shared,
    ) -> Option<Answer> {
        let fam = family(q.instance_type.as_str());
        self.calls.throttled += 1;
        let code = match &e {
            MarketError::Throttled { code, .. } => *code,
            _ => "",
        };
        let describe_limit = code == DESCRIBE_LIMIT;
        if let Some(account) = self.helper
            && describe_limit
            && !self.member.answered.contains(fam)
        {
            self.member_refused(account, fam, rested, q);
            return None;
        }
        // A probe of a family with a quota of 0 noted is refused by the quota, not the limit:
        // it says nothing of the pace.
        if !self.families.probes.contains(fam) {
            self.pace.refused(describe_limit && rested, &self.pacing.bounds);
        }
        if describe_limit && rested {
            self.calls.contended += 1;
        }
        if describe_limit && rested && self.helper.is_none() {
            // Not our pace's doing: either someone else emptied the bucket, or this
            // family's quota is 0. The pace stays; the count, spread over runs and
            // time, decides.
            let f = &mut self.families;
            f.refused.insert(fam.to_string());
            let n = f.strikes.entry(fam.to_string()).or_default();
            *n += 1;
            if *n >= QUOTA_STRIKES && f.conclusive.contains(fam) {
                tracing::warn!(region = %q.region, family = fam, "refused every time, even paced, over runs: the family's Capacity Block quota looks like 0");
                f.strikes.remove(fam);
                shared.quota_zero.insert(fam.to_string());
                return Some(Answer::QuotaZero);
            }
            if self.on_refusal.give_up_after.is_some_and(|limit| *n >= limit) {
                tracing::warn!(region = %q.region, family = fam, refusals = *n, "refused at every rested call of a one-shot search: the family is given up (a quota of 0, or the describe limit spent by others)");
                shared.given_up.insert(fam.to_string());
                return Some(Answer::GivenUp);
            }
        }
        if self.families.probes.contains(fam) {
            // One call a run for a family with a quota of 0 noted.
            return Some(Answer::CarriedOver);
        }
        // A refusal after resting is retried at the pace until the asking time is
        // over; one our own pace may have caused counts against the question.
        let n = shared.throttled.entry(i).or_default();
        if !(describe_limit && rested) {
            *n += 1;
        }
        if *n >= MAX_THROTTLED {
            tracing::warn!(region = %q.region, attempts = *n, error = %e, "question still throttled; carried over to the next run");
            return Some(Answer::CarriedOver);
        }
        let counted = describe_limit && rested && self.helper.is_none();
        (self.on_refusal.told)(&Retrying {
            query: q,
            code,
            in_a_row: counted.then(|| self.families.strikes.get(fam).copied().unwrap_or_default()),
            give_up_after: self.on_refusal.give_up_after,
            gap: self.pace.gap(),
        });
        None
    }

    /// A member's describe-limit refusal of a family its lane was not answered for in the run:
    /// its quota of 0 (the published default) or someone spending its limit, not a fact of the
    /// question; the question goes back for another lane. Refused `MEMBER_STRIKES` times (a
    /// family noted so earlier: once), the lane stops asking the family.
    fn member_refused(&mut self, account: &str, fam: &str, rested: bool, q: &OfferingQuery) {
        let m = &mut self.member;
        let probe = m.probes.contains(fam);
        if !probe {
            self.pace.refused(rested, &self.pacing.bounds);
        }
        if rested {
            *m.held.entry(fam.to_string()).or_default() += 1;
        }
        let n = m.refusals.entry(fam.to_string()).or_default();
        *n += 1;
        if (probe || *n >= MEMBER_STRIKES) && m.gave_up.insert(fam.to_string()) {
            tracing::info!(region = %q.region, account, family = fam, refused = *n,
                "a member account was refused on every call of the family: its quota is 0 or its limit is spent; the other accounts ask its questions");
        }
    }

    /// A member's answer: the family's held refusals were the limit's after all.
    fn member_answered(&mut self, fam: &str) {
        let m = &mut self.member;
        m.answered.insert(fam.to_string());
        m.refusals.remove(fam);
        m.gave_up.remove(fam);
        self.calls.contended += m.held.remove(fam).unwrap_or(0);
    }

    /// The lane's policy for one answer, under the lock: the question's answer recorded (or
    /// put back for another call or lane) and what the lane does next. A refusal's reading is
    /// here, apart from the loop that paces the calls: throttles go to `after_throttle`, an
    /// unknown answer is retried once, a member's other refusals give its questions back.
    fn after_answer(
        &mut self,
        result: Result<Vec<Offering>, MarketError>,
        i: usize,
        rested: bool,
        s: &mut Shared,
        queries: &[OfferingQuery],
        seen: &(impl Fn(usize, &Answer, Option<&str>) + Sync),
    ) -> Next {
        let q = &queries[i];
        let fam = family(q.instance_type.as_str());
        let by = self.helper;
        match result {
            Ok(list) => {
                self.pace.answered(&self.pacing.bounds);
                self.families.strikes.remove(fam);
                if self.helper.is_some() {
                    self.member_answered(fam);
                }
                s.done(i, Answer::Offerings(list), seen, by);
                Next::Go
            }
            Err(e @ MarketError::Throttled { .. }) => {
                match self.after_throttle(e, i, q, rested, s) {
                    Some(answer) => s.done(i, answer, seen, by),
                    None => s.again(i, queries, seen),
                }
                Next::Go
            }
            Err(e @ MarketError::Unknown { .. }) if self.unknown >= UNKNOWN_RETRIES => {
                match self.helper {
                    Some(account) => {
                        tracing::warn!(region = %q.region, account, error = %e, "a member account's market failed twice; the other accounts ask the rest");
                        s.again(i, queries, seen);
                        self.failed = Some(e);
                    }
                    None => {
                        tracing::warn!(region = %q.region, error = %e, "region failed twice; skipping its other questions");
                        s.closed = Some(Answer::Failed(e.clone()));
                        s.done(i, Answer::Failed(e), seen, None);
                    }
                }
                Next::Stop
            }
            Err(e @ MarketError::Unknown { .. }) => {
                self.unknown += 1;
                tracing::info!(region = %q.region, error = %e, "unknown answer to a read; retrying once");
                // Still this lane's: the others wait for it rather than end.
                s.in_flight += 1;
                Next::Retry
            }
            Err(MarketError::Unsupported { .. }) => {
                s.closed = Some(Answer::Unsupported);
                s.done(i, Answer::Unsupported, seen, by);
                Next::Stop
            }
            Err(MarketError::NotSold { message, .. }) => {
                s.not_sold.insert(q.instance_type.to_string(), message.clone());
                s.done(i, Answer::NotSold(message), seen, by);
                Next::Go
            }
            Err(e) => match self.helper {
                // Most likely the member's watch role (missing, or refused): the buying
                // account's own lane and the other members ask its questions.
                Some(account) => {
                    tracing::warn!(region = %q.region, account, error = %e, "a member account's market refused a question; the other accounts ask the rest");
                    s.again(i, queries, seen);
                    self.failed = Some(e);
                    Next::Stop
                }
                None => {
                    tracing::warn!(region = %q.region, error = %e, "EC2 refused a question");
                    s.done(i, Answer::Failed(e), seen, None);
                    Next::Go
                }
            },
        }
    }

    async fn run<M, F>(mut self, market: &M, queries: &[OfferingQuery], shared: &Mutex<Shared>, seen: &F) -> LaneEnd
    where
        M: OfferingSource + ?Sized,
        F: Fn(usize, &Answer, Option<&str>) + Sync,
    {
        let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let send_at = self.last_sent.map_or_else(Instant::now, |t| t + self.pace.gap());
            if send_at > self.deadline || Instant::now() >= self.deadline {
                break;
            }
            // Nothing waits and nothing may come back: the lane ends now, not a gap later (a
            // person's search would sit out its pace after its last answer).
            if !lock().settle(queries, seen) {
                break;
            }
            sleep_until(send_at).await;
            // Taken when it can be sent, not before: a lane waiting out its pace holds nothing
            // another account could ask sooner.
            let (taken, out) = {
                let mut s = lock();
                let taken = s.take(self.helper.is_none(), &self.member.gave_up, queries, seen);
                (taken, s.in_flight)
            };
            let i = match (taken, out) {
                (Some(i), _) => i,
                (None, 0) => break,
                (None, _) => {
                    sleep(IDLE_POLL).await;
                    continue;
                }
            };
            let q = &queries[i];
            let sent = Instant::now();
            let rested = self.last_sent.is_none_or(|t| sent.duration_since(t) >= self.pacing.bounds.refill);
            self.last_sent = Some(sent);
            self.calls.sent += 1;
            let result = market.offerings(q).await;
            // What the lane does next is decided under the lock and done after it.
            let next = {
                let mut s = lock();
                s.in_flight -= 1;
                self.after_answer(result, i, rested, &mut s, queries, seen)
            };
            match next {
                Next::Go => {}
                Next::Stop => break,
                Next::Retry => {
                    sleep(UNKNOWN_PAUSE).await;
                    let mut s = lock();
                    s.in_flight -= 1;
                    s.queue.push_front(i);
                }
            }
        }
        LaneEnd {
            families: self.families,
            calls: self.calls,
            pace: self.pace,
            failed: self.failed,
            member: self.member,
        }
    }
}

#[cfg(test)]
mod tests;
