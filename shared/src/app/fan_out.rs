//! Asking the market many questions within EC2's describe limit: one lane per region, all
//! regions at once, one call at a time in each.
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
//! - a family whose calls are refused with `CapacityBlockDescribeLimitExceeded` `QUOTA_STRIKES`
//!   times in a row (counted across runs), each time after resting at least one full refill,
//!   with no success of its own in between, most likely has a Capacity Block quota of 0: EC2
//!   answers that on every call however slowly it is asked. Its questions end as `QuotaZero`,
//!   but only when the caller says the family's refusals are spread over runs and time
//!   (`Carried::conclusive`, `domain::plan::Refusals`): anyone allowed the call can empty the
//!   account's bucket with one burst, and a busy account can look the same for a while. A
//!   finding starts the count again. A family with a quota of 0 noted gets one call a run
//!   (`Carried::probes`), never retried in the run: the first success clears the finding;
//! - "not sold here" (InvalidParameterValue) ends that question and the type's others;
//!   "not supported in this region" closes the lane;
//! - an unknown answer (5xx, timeout) is retried once; a second one fails the region's
//!   remaining questions at once (a dead region costs two timeouts, not one per question);
//! - when `ask_for` has passed, the questions still waiting are carried over to the next run:
//!   throttling never makes a region "failed".
//!
//! Lane time is real elapsed time (tokio's clock, so tests run it paused), never business time.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use futures::future::join_all;
use tokio::time::{Instant, sleep, sleep_until};

use crate::domain::names::Region;
use crate::domain::offering::Offering;
use crate::domain::pace::{Pace, PaceBounds};
use crate::domain::plan::{DescribeBudget, family};
use crate::ports::{DESCRIBE_LIMIT, MarketError, OfferingQuery, OfferingSource};

/// Throttled attempts a question may make in one run before it is carried over.
pub const MAX_THROTTLED: u32 = 4;
/// Rested `CapacityBlockDescribeLimitExceeded` refusals in a row that mean a quota of 0.
pub const QUOTA_STRIKES: u32 = 6;
/// Extra attempts after an unknown answer (5xx, timeout).
const UNKNOWN_RETRIES: u32 = 1;
const UNKNOWN_PAUSE: Duration = Duration::from_millis(250);

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
}

/// Rested refusals in a row per (region, family), carried from run to run.
pub type Strikes = BTreeMap<(Region, String), u32>;

/// What earlier runs leave the lanes, per (region, family).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Rested refusals in a row.
    pub strikes: Strikes,
    /// Families whose refusals may conclude a quota of 0 this run (spread over runs and time).
    pub conclusive: BTreeSet<(Region, String)>,
    /// Families with a quota of 0 noted: one call this run, not retried.
    pub probes: BTreeSet<(Region, String)>,
    /// The pace each region's lane starts at (learned by earlier runs; else the bounds' start).
    pub paces: BTreeMap<Region, Pace>,
}

impl From<Strikes> for Carried {
    fn from(strikes: Strikes) -> Carried {
        Carried { strikes, ..Default::default() }
    }
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
}

/// DescribeCapacityBlockOfferings calls one region's lane sent, and how many EC2 throttled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub sent: usize,
    pub throttled: usize,
    /// Of the throttled, the describe-limit refusals capblock's own pace does not explain: the
    /// bucket was emptied by someone else, who likely met refusals too.
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
    ask_all_seeing(market, queries, pacing, carried, |_, _| answered()).await
}

/// [`ask_all`], handing each final answer to `seen` (with its index into `queries`) the moment
/// it is final: a scan buys what qualifies while the other questions are still being asked.
pub async fn ask_all_seeing<M, F>(
    market: &M,
    queries: &[OfferingQuery],
    pacing: &Pacing,
    carried: &Carried,
    seen: F,
) -> RunAnswers
where
    M: OfferingSource + ?Sized,
    F: Fn(usize, &Answer) + Sync,
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
        let of_region = |set: &BTreeSet<(Region, String)>| -> HashSet<String> {
            set.iter().filter(|(r, _)| r == region).map(|(_, f)| f.clone()).collect()
        };
        let families = Families {
            strikes: carried
                .strikes
                .iter()
                .filter(|((r, _), _)| r == region)
                .map(|((_, f), n)| (f.clone(), *n))
                .collect(),
            conclusive: of_region(&carried.conclusive),
            probes: of_region(&carried.probes),
            refused: HashSet::new(),
        };
        let pace = carried.paces.get(region).map_or_else(|| Pace::start(&pacing.bounds), |p| p.within(&pacing.bounds));
        async move {
            let lane = Lane::new(pacing, deadline, families, pace);
            let (answers, families, calls, pace) = lane.run(market, queries, list, seen).await;
            (region, answers, families, calls, pace)
        }
    }))
    .await;
    let mut out: Vec<Option<Answer>> = vec![None; queries.len()];
    let (mut strikes, mut refused) = (Strikes::new(), BTreeSet::new());
    let (mut calls, mut paces) = (BTreeMap::new(), BTreeMap::new());
    for (region, answers, families, lane_calls, pace) in results {
        calls.insert(region.clone(), lane_calls);
        paces.insert(region.clone(), pace);
        for (i, a) in answers {
            out[i] = Some(a);
        }
        strikes.extend(families.strikes.into_iter().filter(|(_, n)| *n > 0).map(|(f, n)| ((region.clone(), f), n)));
        refused.extend(families.refused.into_iter().map(|f| (region.clone(), f)));
    }
    RunAnswers {
        answers: out.into_iter().map(|a| a.expect("every question gets an answer")).collect(),
        strikes,
        refused,
        calls,
        paces,
    }
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

/// One region's lane.
struct Lane<'p> {
    pacing: &'p Pacing,
    deadline: Instant,
    pace: Pace,
    last_sent: Option<Instant>,
    families: Families,
    quota_zero: BTreeSet<String>,
    not_sold: HashMap<String, String>,
    calls: Calls,
}

impl<'p> Lane<'p> {
    fn new(pacing: &'p Pacing, deadline: Instant, families: Families, pace: Pace) -> Lane<'p> {
        Lane {
            pacing,
            deadline,
            pace,
            last_sent: None,
            families,
            quota_zero: BTreeSet::new(),
            not_sold: HashMap::new(),
            calls: Calls::default(),
        }
    }

    /// A question EC2 throttled: the family's refusal counted (a refusal after resting) or the
    /// lane's pace slowed (one its own pace may have caused), and what becomes of the question:
    /// its answer, or `None` to ask it again later in the run.
    fn after_throttle(
        &mut self,
        e: MarketError,
        i: usize,
        q: &OfferingQuery,
        rested: bool,
        throttled: &mut HashMap<usize, u32>,
    ) -> Option<Answer> {
        let fam = family(q.instance_type.as_str());
        self.calls.throttled += 1;
        let describe_limit = matches!(&e, MarketError::Throttled { code, .. } if *code == DESCRIBE_LIMIT);
        // A probe of a family with a quota of 0 noted is refused by the quota, not the limit:
        // it says nothing of the pace.
        if !self.families.probes.contains(fam) {
            self.pace.refused(describe_limit && rested, &self.pacing.bounds);
        }
        if describe_limit && rested {
            self.calls.contended += 1;
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
                self.quota_zero.insert(fam.to_string());
                return Some(Answer::QuotaZero);
            }
        }
        if self.families.probes.contains(fam) {
            // One call a run for a family with a quota of 0 noted.
            return Some(Answer::CarriedOver);
        }
        // A refusal after resting is retried at the pace until the asking time is
        // over; one our own pace may have caused counts against the question.
        let n = throttled.entry(i).or_default();
        if !(describe_limit && rested) {
            *n += 1;
        }
        if *n >= MAX_THROTTLED {
            tracing::warn!(region = %q.region, attempts = *n, error = %e, "question still throttled; carried over to the next run");
            return Some(Answer::CarriedOver);
        }
        None
    }

    async fn run<M, F>(
        mut self,
        market: &M,
        queries: &[OfferingQuery],
        list: Vec<usize>,
        seen: &F,
    ) -> (Vec<(usize, Answer)>, Families, Calls, Pace)
    where
        M: OfferingSource + ?Sized,
        F: Fn(usize, &Answer) + Sync,
    {
        let mut out = Vec::with_capacity(list.len());
        let done = |out: &mut Vec<(usize, Answer)>, i: usize, a: Answer| {
            seen(i, &a);
            out.push((i, a));
        };
        let mut queue: VecDeque<usize> = list.into();
        let mut throttled: HashMap<usize, u32> = HashMap::new();
        let mut unknown = 0u32;
        while let Some(i) = queue.pop_front() {
            let q = &queries[i];
            let fam = family(q.instance_type.as_str());
            if self.quota_zero.contains(fam) {
                done(&mut out, i, Answer::QuotaZero);
                continue;
            }
            if let Some(message) = self.not_sold.get(q.instance_type.as_str()) {
                done(&mut out, i, Answer::NotSold(message.clone()));
                continue;
            }
            let send_at = self.last_sent.map_or_else(Instant::now, |t| t + self.pace.gap());
            if send_at > self.deadline {
                tracing::info!(region = %q.region, waiting = queue.len() + 1, "asking time over; questions carried over to the next run");
                done(&mut out, i, Answer::CarriedOver);
                for j in queue.drain(..) {
                    done(&mut out, j, Answer::CarriedOver);
                }
                break;
            }
            sleep_until(send_at).await;
            let sent = Instant::now();
            let rested = self.last_sent.is_none_or(|t| sent.duration_since(t) >= self.pacing.bounds.refill);
            self.last_sent = Some(sent);
            self.calls.sent += 1;
            match market.offerings(q).await {
                Ok(list) => {
                    self.pace.answered(&self.pacing.bounds);
                    self.families.strikes.remove(fam);
                    done(&mut out, i, Answer::Offerings(list));
                }
                Err(e @ MarketError::Throttled { .. }) => match self.after_throttle(e, i, q, rested, &mut throttled) {
                    Some(answer) => done(&mut out, i, answer),
                    None => queue.push_back(i),
                },
                Err(e @ MarketError::Unknown { .. }) => {
                    unknown += 1;
                    if unknown > UNKNOWN_RETRIES {
                        tracing::warn!(region = %q.region, error = %e, "region failed twice; skipping its other questions");
                        done(&mut out, i, Answer::Failed(e.clone()));
                        for j in queue.drain(..) {
                            done(&mut out, j, Answer::Failed(e.clone()));
                        }
                        break;
                    }
                    tracing::info!(region = %q.region, error = %e, "unknown answer to a read; retrying once");
                    sleep(UNKNOWN_PAUSE).await;
                    queue.push_front(i);
                }
                Err(MarketError::Unsupported { .. }) => {
                    done(&mut out, i, Answer::Unsupported);
                    for j in queue.drain(..) {
                        done(&mut out, j, Answer::Unsupported);
                    }
                    break;
                }
                Err(MarketError::NotSold { message, .. }) => {
                    self.not_sold.insert(q.instance_type.to_string(), message.clone());
                    done(&mut out, i, Answer::NotSold(message));
                }
                Err(e) => {
                    tracing::warn!(region = %q.region, error = %e, "EC2 refused a question");
                    done(&mut out, i, Answer::Failed(e));
                }
            }
        }
        (out, self.families, self.calls, self.pace)
    }
}

#[cfg(test)]
mod tests;
