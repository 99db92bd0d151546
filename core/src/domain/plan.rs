//! The query planner: which DescribeCapacityBlockOfferings questions a scan asks, within a
//! describe limit that allows only a few calls per region per run.
//!
//! EC2 answers DescribeCapacityBlockOfferings from a small, slowly refilling bucket per account
//! and region (about one call every 2-4 s, a burst of about 2), shared with everyone in the
//! account. A scan spends only a share of it, so a rule set with more questions than one run can
//! ask is spread over several runs:
//! - at least half of a region's calls in a run (rounded up) go to the questions asked longest
//!   ago, never asked first: with `Q` questions and `S` such calls, every question is asked at
//!   least once every `ceil(Q / S)` runs (`full_cycle_runs`);
//! - up to the other half go to the promising questions, most likely to lead to a purchase:
//!   the cheapest price last seen within `PROMISING` of a rule's threshold (or under it), or a
//!   start window about to close. Calls no promising question takes go to the stalest ones too:
//!   asking the same far-from-threshold question every run would only slow the round of the
//!   others (on a watched market every question is asked within minutes; `make bench`).
//!
//! What was asked when, and the cheapest price it found, is the cursor kept between runs
//! (`RegionMemory`), with what EC2 said of the region: types it does not sell, and instance
//! families whose Capacity Block quota looks like 0.

use std::collections::BTreeMap;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::pace::{Pace, PaceBounds};
use super::ultraserver::SearchForm;

/// How a scan asks each region: where its pace starts, the bounds the learned pace keeps
/// within (`domain::pace`), and how long one run asks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DescribeBudget {
    /// EC2's refill as capblock assumes it: one DescribeCapacityBlockOfferings call per this
    /// long, per account and region (a refusal a full refill after the previous call is
    /// someone else's doing).
    pub refill: StdDuration,
    /// The share of that refill a region starts at before its pace is learned (0 < share <= 1).
    pub share: f64,
    /// The shortest gap between two calls in one region, whatever is learned (the ceiling).
    pub fastest: StdDuration,
    /// The longest gap (the floor): a region is never asked slower than this.
    pub slowest: StdDuration,
    /// How long one run may keep asking.
    pub ask_for: StdDuration,
}

impl Default for DescribeBudget {
    fn default() -> Self {
        DescribeBudget {
            refill: StdDuration::from_secs(4),
            share: 0.5,
            fastest: StdDuration::from_secs(1),
            slowest: StdDuration::from_secs(30),
            ask_for: StdDuration::from_secs(50),
        }
    }
}

impl DescribeBudget {
    /// A budget for EC2's refill of `refill` with the default bounds' proportions: the fastest
    /// gap a quarter of the refill, the slowest 7.5 refills (1 s and 30 s for 4 s). For a
    /// describe limit sped up or slowed down as a whole (tests, the CLI's `--refill-seconds`).
    pub fn for_refill(refill: StdDuration, share: f64, ask_for: StdDuration) -> DescribeBudget {
        DescribeBudget { refill, share, fastest: refill / 4, slowest: refill.mul_f64(7.5), ask_for }
    }

    /// The gap a region starts at before its pace is learned.
    pub fn pace(&self) -> StdDuration {
        self.refill.div_f64(self.share)
    }

    /// The bounds of the learned pace.
    pub fn bounds(&self) -> PaceBounds {
        PaceBounds { refill: self.refill, start: self.pace(), fastest: self.fastest, slowest: self.slowest }
    }

    /// Calls one run makes per region at the starting pace.
    pub fn calls_per_region(&self) -> usize {
        self.calls_at(self.pace())
    }

    /// Calls one run makes per region at `gap`: the first at once, then one per gap within
    /// `ask_for`.
    pub fn calls_at(&self, gap: StdDuration) -> usize {
        1 + (self.ask_for.as_secs_f64() / gap.as_secs_f64().max(0.001)).floor() as usize
    }

    /// Questions a run plans for a region at `gap`: what the pace fits in the asking time, and
    /// half again (the pace rises while EC2 answers; what is not reached is carried over).
    pub fn planned_at(&self, gap: StdDuration) -> usize {
        self.calls_at(gap) * 3 / 2
    }

    /// [`DescribeBudget::planned_at`] the region's learned pace (within today's bounds), or the
    /// starting pace when none is learned yet.
    pub fn planned(&self, pace: Option<Pace>) -> usize {
        let bounds = self.bounds();
        self.planned_at(pace.map_or(bounds.start, |p| p.within(&bounds).gap()))
    }

    /// Checks the numbers an operator may set.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.share > 0.0 && self.share <= 1.0) {
            return Err(format!("the describe share must be within (0, 1], got {}", self.share));
        }
        if self.refill.is_zero() {
            return Err("the describe refill interval must be positive".into());
        }
        self.bounds().validate()
    }
}

/// What one run remembers about one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    pub at: DateTime<Utc>,
    /// The cheapest price per accelerator-hour the answer held, if it held any offering.
    #[serde(default, with = "rust_decimal::serde::str_option")]
    pub cheapest: Option<Decimal>,
    /// When the question's answer last went to the price history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<DateTime<Utc>>,
}

/// An instance family EC2 refuses every search for, however slowly asked: its Capacity Block
/// quota is most likely 0. While it is noted, each run asks one question of the family (a
/// probe); the first that succeeds clears it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaZero {
    /// When it was first found (the alert names it once per `since`).
    pub since: DateTime<Utc>,
}

/// Rested describe-limit refusals in a row of one family (see `app::paced_asker`), with when the
/// first came and in how many runs. A quota of 0 is concluded only from refusals spread over
/// `QUOTA_RUNS` runs and `QUOTA_SPREAD`: one burst by anyone allowed
/// DescribeCapacityBlockOfferings can empty the account's bucket for one run, not for half an
/// hour of runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusals {
    pub count: u32,
    pub first_at: DateTime<Utc>,
    pub runs: u32,
}

/// Runs the refusals that conclude a quota of 0 must come in.
pub const QUOTA_RUNS: u32 = 2;
/// How long after the first refusal a quota of 0 may be concluded.
pub const QUOTA_SPREAD: Duration = Duration::minutes(30);

impl Refusals {
    /// Whether refusals in a run at `now` may conclude a quota of 0: some came in an earlier
    /// run, at least `QUOTA_SPREAD` before.
    pub fn conclusive(&self, now: DateTime<Utc>) -> bool {
        self.runs.saturating_add(1) >= QUOTA_RUNS && now - self.first_at >= QUOTA_SPREAD
    }

    /// The record after a run at `now` that left `count` refusals in a row, some of them its own.
    pub fn after_run(earlier: Option<&Refusals>, count: u32, now: DateTime<Utc>) -> Refusals {
        match earlier {
            Some(e) => Refusals { count, first_at: e.first_at.min(now), runs: e.runs.saturating_add(1) },
            None => Refusals { count, first_at: now, runs: 1 },
        }
    }
}

/// How long a "not sold here" is believed before asking again.
pub const MARKET_NOTE_TTL: Duration = Duration::days(1);
/// Questions not asked for this long are forgotten (their rule changed or went).
pub const FORGET_AFTER: Duration = Duration::days(7);
/// How far past the clock a time the memory recorded may be before it is taken as the clock's
/// (clocks of different runs differ a little; more than this was never the clock's).
const AHEAD_MARGIN: Duration = Duration::minutes(10);

/// The planner's memory of one region, kept in the store between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionMemory {
    /// Question key -> when it was last answered.
    #[serde(default)]
    pub asked: BTreeMap<String, Asked>,
    /// Instance type -> until when it is taken as not sold in this region.
    #[serde(default)]
    pub not_sold: BTreeMap<String, DateTime<Utc>>,
    /// Instance family -> its apparent quota of 0.
    #[serde(default)]
    pub quota_zero: BTreeMap<String, QuotaZero>,
    /// Instance family -> describe-limit refusals in a row after resting (see `app::paced_asker`).
    /// (Memories written before capblock kept their times held `strikes`, a bare count: it is
    /// ignored, so counting starts again.)
    #[serde(default)]
    pub refusals: BTreeMap<String, Refusals>,
    /// The pace learned from EC2's answers in this region (`domain::pace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<Pace>,
    /// The pace learned in this region by each member account that lends the watch its own
    /// describe limit (account id -> pace): each account has a limit of its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub helper_paces: BTreeMap<String, Pace>,
    /// Member accounts refused on every call of a family in this region (their quota of it is
    /// 0, or their limit is spent), keyed `member_key(account, family)`: each gets one call of
    /// the family a run until one is answered, and is announced once per `since`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub member_refused: BTreeMap<String, QuotaZero>,
    /// The form EC2 took this region's UltraServer searches in, as the last run that had to
    /// learn it found (`None`: never learned; the model's form is tried first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_form: Option<SearchForm>,
    /// How well this region is covered, as of the last run that asked it (for people); stored
    /// as `watch`, the attribute's name in the items already written.
    #[serde(default, rename = "watch", skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// How well one region is covered, as the last run that asked it left it: what `capblock
/// status` and the dashboard show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    pub at: DateTime<Utc>,
    /// Distinct questions the rules ask of the region.
    pub questions: u32,
    /// Of them, those never answered yet (not reached yet, not sold here, or a family with a
    /// quota of 0): they have no age.
    #[serde(default)]
    pub unanswered: u32,
    /// Of the others, how long ago each was last answered: the median and the longest, in
    /// seconds. The longest is how long a full cycle of the region's questions takes now.
    pub age_p50_secs: u64,
    pub age_max_secs: u64,
    /// This run's calls, the refusals among them, and the refusals capblock's own pace does not
    /// explain (someone else emptied the bucket: each is likely one of their calls refused too).
    pub calls: u32,
    pub refused: u32,
    pub contended: u32,
    /// The learned gap between calls, in milliseconds.
    pub gap_ms: u64,
}

impl Coverage {
    /// The ages of each question (seconds since last answered) summarised.
    pub fn ages(ages: &mut [u64]) -> (u64, u64) {
        ages.sort_unstable();
        let p50 = ages.get(ages.len().saturating_sub(1) / 2).copied().unwrap_or(0);
        (p50, ages.last().copied().unwrap_or(0))
    }
}

/// The key of a member account's family in `RegionMemory::member_refused`.
pub fn member_key(account: &str, family: &str) -> String {
    format!("{account} {family}")
}

/// The member account and family of a `RegionMemory::member_refused` key.
pub fn member_of_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(' ')
}

impl RegionMemory {
    /// Notes a member refused on every call of `family`; returns the `since` of the note (kept
    /// from an earlier one) and whether it is new.
    pub fn note_member_refused(&mut self, account: &str, family: &str, now: DateTime<Utc>) -> (DateTime<Utc>, bool) {
        let key = member_key(account, family);
        let earlier = self.member_refused.get(&key).map(|q| q.since);
        let since = earlier.unwrap_or(now);
        self.member_refused.insert(key, QuotaZero { since });
        (since, earlier.is_none())
    }

    pub fn is_not_sold(&self, instance_type: &str, now: DateTime<Utc>) -> bool {
        self.not_sold.get(instance_type).is_some_and(|until| *until > now)
    }

    /// Records a quota of 0 and starts the family's count again (a finding is not re-made from
    /// the refusals that made it); returns the `since` of the finding (kept from an earlier one).
    pub fn note_quota_zero(&mut self, family: &str, now: DateTime<Utc>) -> DateTime<Utc> {
        let since = self.quota_zero.get(family).map_or(now, |q| q.since);
        self.quota_zero.insert(family.to_string(), QuotaZero { since });
        self.refusals.remove(family);
        since
    }

    /// The memory as of `clock`: a time it recorded later than the clock (plus a small margin)
    /// is taken as the clock's. A memory written at a replayed or forged future time would
    /// otherwise switch a type or family off for as long as that time is ahead (years).
    /// Times kept as "until" count from when they were recorded (a not-sold note until
    /// recorded + a day, a quota recheck at recorded + an hour).
    pub fn clamped(mut self, clock: DateTime<Utc>) -> RegionMemory {
        let latest = clock + AHEAD_MARGIN;
        let clamp = |t: &mut DateTime<Utc>, recorded_before: Duration| {
            if t.checked_sub_signed(recorded_before).is_some_and(|recorded| recorded > latest) {
                *t = clock + recorded_before;
            }
        };
        for a in self.asked.values_mut() {
            clamp(&mut a.at, Duration::zero());
            // A history time "in the future" would keep the question out of the history.
            if let Some(r) = a.recorded.as_mut() {
                clamp(r, Duration::zero());
            }
        }
        for until in self.not_sold.values_mut() {
            clamp(until, MARKET_NOTE_TTL);
        }
        for q in self.quota_zero.values_mut().chain(self.member_refused.values_mut()) {
            clamp(&mut q.since, Duration::zero());
        }
        // A first refusal "in the future" would never be QUOTA_SPREAD old: no finding, ever.
        for r in self.refusals.values_mut() {
            clamp(&mut r.first_at, Duration::zero());
        }
        self
    }

    /// What a run that read `read` and ends with `self` leaves when another run saved `theirs`
    /// meanwhile: a three-way merge, entry by entry. What this run changed or added wins over
    /// what it read (an entry both changed keeps the later fact: the later answer, the later
    /// "not sold" horizon, the earlier quota finding); what this run dropped is dropped unless
    /// the other run changed it; everything else is theirs. So two overlapping scans lose
    /// neither's answers.
    pub fn merged(self, read: &RegionMemory, theirs: RegionMemory) -> RegionMemory {
        RegionMemory {
            asked: merge_map(&read.asked, self.asked, theirs.asked, |m, t| if t.at > m.at { t } else { m }),
            not_sold: merge_map(&read.not_sold, self.not_sold, theirs.not_sold, |m, t| m.max(t)),
            quota_zero: merge_map(&read.quota_zero, self.quota_zero, theirs.quota_zero, |m, t| {
                if t.since < m.since { t } else { m }
            }),
            refusals: merge_map(&read.refusals, self.refusals, theirs.refusals, |m, t| {
                if t.first_at < m.first_at { Refusals { count: m.count.max(t.count), ..t } } else { m }
            }),
            // Both learned a pace: the slower is the careful reading of the limit.
            pace: match (self.pace == read.pace, theirs.pace == read.pace) {
                (true, _) => theirs.pace,
                (false, true) => self.pace,
                (false, false) => match (self.pace, theirs.pace) {
                    (Some(m), Some(t)) => Some(m.slower(t)),
                    (m, t) => m.or(t),
                },
            },
            helper_paces: merge_map(&read.helper_paces, self.helper_paces, theirs.helper_paces, |m, t| m.slower(t)),
            member_refused: merge_map(&read.member_refused, self.member_refused, theirs.member_refused, |m, t| {
                if t.since < m.since { t } else { m }
            }),
            // What this run learned wins; else theirs (which may have learned it meanwhile).
            search_form: if self.search_form != read.search_form { self.search_form } else { theirs.search_form },
            coverage: match (self.coverage, theirs.coverage) {
                (Some(m), Some(t)) => Some(if t.at > m.at { t } else { m }),
                (m, t) => m.or(t),
            },
        }
    }

    /// Drops what is too old to matter.
    pub fn prune(&mut self, now: DateTime<Utc>) {
        self.asked.retain(|_, a| now - a.at < FORGET_AFTER);
        self.not_sold.retain(|_, until| *until > now);
    }
}

/// `merged`'s rule for one map: start from `theirs`, take back what `mine` dropped of `read`
/// (unless theirs changed it since), and put in what `mine` changed or added (`pick` decides
/// when both changed one entry).
fn merge_map<V: Clone + PartialEq>(
    read: &BTreeMap<String, V>,
    mine: BTreeMap<String, V>,
    mut theirs: BTreeMap<String, V>,
    pick: impl Fn(V, V) -> V,
) -> BTreeMap<String, V> {
    for (k, was) in read {
        if !mine.contains_key(k) && theirs.get(k) == Some(was) {
            theirs.remove(k);
        }
    }
    for (k, v) in mine {
        if read.get(&k) == Some(&v) {
            continue;
        }
        let v = match theirs.remove(&k) {
            Some(t) if read.get(&k) != Some(&t) => pick(v, t),
            _ => v,
        };
        theirs.insert(k, v);
    }
    theirs
}

/// The family of an instance type: what Capacity Block quotas are counted per ("trn2" for
/// "trn2.48xlarge", "p5" for "p5.4xlarge").
pub fn family(instance_type: &str) -> &str {
    instance_type.split('.').next().unwrap_or(instance_type)
}

/// One question a region may be asked, with what the planner weighs.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub key: String,
    /// The lowest of the rules' thresholds that ask this question.
    pub threshold: Decimal,
    /// How long until the earliest start window of those rules closes.
    pub closes_in: Duration,
}

/// Lower is asked sooner: the cheapest price last seen for the question over the threshold
/// (1 when nothing is known), less a bonus when a start window closes within days.
///
/// Both numbers come from the store (a rule's threshold, the memory's price), so neither is
/// trusted to keep the ratio in range: one past `Decimal`'s range is as far from a purchase as
/// a ratio gets, and sorts last.
pub fn priority(c: &Candidate, last: Option<&Asked>) -> Decimal {
    let ratio = match last.and_then(|a| a.cheapest) {
        Some(p) if !c.threshold.is_zero() => p.checked_div(c.threshold).unwrap_or(Decimal::MAX),
        _ => Decimal::ONE,
    };
    let bonus = if c.closes_in <= Duration::days(1) {
        Decimal::new(25, 2)
    } else if c.closes_in <= Duration::days(3) {
        Decimal::new(10, 2)
    } else {
        Decimal::ZERO
    };
    ratio.saturating_sub(bonus)
}

/// The priority at or under which a question is promising: its cheapest price last seen at most
/// 5 % over the threshold (or a window closing soon brings it there).
pub const PROMISING: Decimal = Decimal::from_parts(105, 0, 0, false, 2);

/// Whether a question deserves a call beyond its turn: a price known and near (or under) the
/// threshold, or a start window closing within days. A question never answered gets its turn
/// among the stalest, first.
pub fn promising(c: &Candidate, last: Option<&Asked>) -> bool {
    let known = last.is_some_and(|a| a.cheapest.is_some());
    (known || c.closes_in <= Duration::days(3)) && priority(c, last) <= PROMISING
}

/// Runs needed to ask every one of `questions` at least once when each run has `calls`.
pub fn full_cycle_runs(questions: usize, calls: usize) -> usize {
    let stale_slots = calls.div_ceil(2).max(1);
    questions.div_ceil(stale_slots)
}

/// Picks up to `calls` of `candidates` for this run, in the order to ask them: at least
/// `ceil(calls / 2)` slots go to the stalest questions (never asked first), up to the rest to the
/// best priorities among the promising others (`promising`), asked alternately from a stale
/// one; slots no promising question takes go to the next stalest. A run cut short by
/// throttling still spends half of its answers (rounded up) on the stalest questions, so the
/// bound of `full_cycle_runs` holds in answers, whatever the throttling. Returns indices into
/// `candidates`.
pub fn choose(candidates: &[Candidate], memory: &RegionMemory, calls: usize) -> Vec<usize> {
    let last = |i: usize| memory.asked.get(&candidates[i].key);
    let prio = |i: usize| priority(&candidates[i], last(i));
    // Room for every question still puts the stalest first: a run rarely answers all it
    // plans (the plan books half again what the pace allows), and what it leaves unasked must
    // not be the same questions every run (the dearest, in priority order).
    let calls = calls.min(candidates.len());
    // Stalest first: never asked (None) sorts before any time; ties by priority, then key.
    let mut by_age: Vec<usize> = (0..candidates.len()).collect();
    by_age.sort_by(|&a, &b| {
        last(a)
            .map(|x| x.at)
            .cmp(&last(b).map(|x| x.at))
            .then(prio(a).cmp(&prio(b)))
            .then(candidates[a].key.cmp(&candidates[b].key))
    });
    let half = calls.div_ceil(2);
    let mut rest: Vec<usize> = by_age[half..].iter().copied().filter(|&i| promising(&candidates[i], last(i))).collect();
    rest.sort_by(|&a, &b| prio(a).cmp(&prio(b)).then(candidates[a].key.cmp(&candidates[b].key)));
    rest.truncate(calls - half);
    // What the promising leave goes to the stalest, in age order.
    let stale: Vec<usize> = by_age.iter().copied().filter(|i| !rest.contains(i)).take(calls - rest.len()).collect();
    let mut chosen = Vec::with_capacity(calls);
    for (k, &s) in stale.iter().enumerate() {
        chosen.push(s);
        if let Some(&p) = rest.get(k) {
            chosen.push(p);
        }
    }
    chosen
}

#[cfg(test)]
mod tests;
