//! One scan: settle open intents, plan which questions this run may ask within EC2's
//! describe limit, ask them (paced, all regions at once), remember what was asked and what EC2
//! said of each region, store the prices seen, decide per rule, buy or announce, and publish
//! pending notices.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use tokio::time::Instant;

use super::budgets::headroom;
use super::fan_out::{Answer, MEMBER_STRIKES, Pacing, QUOTA_STRIKES, RunAnswers, ask_spread, helpers};
use super::outbox::{FlushReport, alert_notice, flush};
use super::purchase::{Buyer, Outcome};
use super::reconcile::{Settled, settle_open_intents, settling_until};
use super::settings::StackSettings;
use crate::domain::announce;
use crate::domain::budget::{Period, charges_for};
use crate::domain::catalog::AcceleratorCatalog;
use crate::domain::decision::{Decision, Headroom, Priced, decide};
use crate::domain::market_memory::{self, Carried};
use crate::domain::market_move;
use crate::domain::names::{InstanceType, Region};
use crate::domain::offering::Offering;
use crate::domain::outbox_key::OutboxKey;
use crate::domain::plan::{
    self, Candidate, DescribeBudget, MARKET_NOTE_TTL, Refusals, RegionMemory, Watch, family, member_key, member_of_key,
};
use crate::domain::rule::{Mode, Rule, StartWindow};
use crate::domain::run_time::RunTime;
use crate::ports::{
    BlockStore, InstanceTypeSource, Ledger, MarketMemory, Notifier, Observation, ObservationStore, OfferingQuery,
    OfferingSource, Outbox, Purchaser, QuotaSource, ReservationSource, RuleStore, StoreError, WatchAccount,
};

/// How many offerings one rule may try in one scan when the best ones were tried before.
const MAX_ALTERNATIVES: usize = 5;

/// Distinct questions one scan plans over all its rules. Each rule is bounded on its own
/// (`rule::MAX_QUESTIONS_PER_RULE`), but many rules could still make a scan that outgrows its
/// memory and time and starves every rule: the rules that would push the total past this are
/// left out of the scan (named in the report and a warning), the others are asked as usual.
pub const MAX_QUESTIONS_PER_SCAN: usize = 1024;

/// Distinct regions one scan visits over all its rules. Each region costs its own clients,
/// memory item, instance-type lookup and paced questions, so many regions (each rule is bounded
/// by `rule::MAX_REGIONS_PER_RULE`) outgrow the scan's time and memory whatever the questions:
/// rules that would push the regions past this are left out whole, like the questions' bound.
pub const MAX_REGIONS_PER_SCAN: usize = 32;

/// The bounds `gather` keeps a scan within.
#[derive(Debug, Clone, Copy)]
struct ScanBounds {
    questions: usize,
    regions: usize,
}

const SCAN_BOUNDS: ScanBounds = ScanBounds { questions: MAX_QUESTIONS_PER_SCAN, regions: MAX_REGIONS_PER_SCAN };

/// Settings read once from the environment by the function's `main`.
#[derive(Debug, Clone)]
pub struct ScanSettings {
    /// Stack name, mode and account budget.
    pub stack: StackSettings,
    /// How much of each region's DescribeCapacityBlockOfferings limit a run may spend.
    pub describe: DescribeBudget,
    /// Whether this scan settles open purchase intents: the stack's function does, on its
    /// clock; a person's `capblock scan` never does (its machine's clock is not the stack's,
    /// and a settlement on a clock an hour ahead freed the fee of a purchase in flight).
    pub settles: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleOutcome {
    pub rule_id: String,
    pub mode: Mode,
    /// Of the rule's questions, how many were answered this run (the rest wait their turn).
    pub questions_answered: usize,
    pub questions: usize,
    pub offerings_seen: usize,
    pub eligible: usize,
    /// The cheapest offering its answered questions held, eligible or not, and the rule's
    /// threshold: how far the market is from what the rule would buy.
    pub cheapest: Option<Priced>,
    pub threshold: Decimal,
    pub chosen: Option<Priced>,
    pub action: Option<Outcome>,
}

/// How one region's questions went this run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RegionQuestions {
    /// Distinct questions the rules ask of the region.
    pub questions: usize,
    /// Picked for this run (the describe budget's calls per region at most).
    pub planned: usize,
    pub answered: usize,
    /// Planned but not answered in time (throttled or out of asking time): asked in a later run.
    pub carried_over: usize,
    /// Runs needed to ask every question at least once at this budget.
    pub full_cycle_runs: usize,
    /// DescribeCapacityBlockOfferings calls sent (a throttled question is asked again), of the
    /// `allowed` the describe budget gives the region each run, and how many EC2 throttled.
    pub asked: usize,
    pub allowed: usize,
    pub throttled: usize,
    /// Of the throttled, the refusals capblock's own pace does not explain (someone else in
    /// the account emptied the bucket, and likely met refusals too).
    pub contended: usize,
    /// The accounts asking the region: the buying account and the member accounts lending
    /// their describe limits (`asked`, `allowed`, `throttled` and `contended` count them all).
    pub accounts: usize,
    /// The learned gap between two calls in the region as this run left it (the buying
    /// account's), milliseconds.
    pub pace_ms: u64,
    /// How long ago the region's questions were last answered, after this run: the median and
    /// the longest (a full cycle), seconds.
    pub age_p50_secs: u64,
    pub age_max_secs: u64,
    /// Another run was asking the region (an overlapping scan): this one left it alone.
    pub elsewhere: bool,
}

/// The cheapest price per accelerator-hour one region and instance type offered this run.
#[derive(Debug, Clone, Serialize)]
pub struct SeenPrice {
    pub region: Region,
    pub instance_type: InstanceType,
    /// The UltraServer type of UltraServer offerings (priced apart from single instances).
    pub ultraserver_type: Option<String>,
    pub per_accelerator_hour: Decimal,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScanReport {
    /// The moment the scan looked at: the clock's, or a replay's.
    pub now: DateTime<Utc>,
    /// A replay of another moment than the clock's: nothing was written or sent.
    pub replay: bool,
    pub rules: usize,
    /// Distinct questions over all regions, and how many were asked and answered this run.
    pub queries: usize,
    pub answered: usize,
    pub regions: BTreeMap<String, RegionQuestions>,
    pub offerings_seen: usize,
    pub observations_written: usize,
    /// The cheapest price per region and instance type, and each rule's threshold (what the
    /// dashboard draws prices against).
    pub prices: Vec<SeenPrice>,
    pub thresholds: BTreeMap<String, Decimal>,
    pub failed_regions: BTreeMap<String, String>,
    pub unsupported_regions: BTreeSet<String>,
    /// Member accounts lending their describe limit whose lane failed this run (their role
    /// missing or refused) -> the failure: the other accounts asked their questions.
    pub watch_failed: BTreeMap<String, String>,
    /// "account region family" of the member accounts refused on every call of a family this
    /// run (their quota of it 0, or their limit spent): they stopped asking it.
    pub watch_refused: BTreeSet<String>,
    /// "region instance-type" pairs EC2 does not sell as blocks (remembered for a day).
    pub not_sold: BTreeSet<String>,
    /// "region family" pairs whose Capacity Block quota looks like 0.
    pub quota_zero: BTreeSet<String>,
    /// Rules left out of this scan: their questions would have passed `MAX_QUESTIONS_PER_SCAN`.
    pub skipped_rules: Vec<String>,
    /// Rules refused this scan because they name a team the stack has no budget for: rule id
    /// -> team.
    pub unbudgeted: BTreeMap<String, String>,
    pub settled: Vec<Settled>,
    pub outcomes: Vec<RuleOutcome>,
    /// Notes of a moved market enqueued this run, `rule#milestone` (`domain::market_move`).
    pub market_notes: Vec<String>,
    pub notices: FlushReport,
}

/// One question a rule asks, with the planner's key for it: the same key run after run while
/// the rule is unchanged, even though a relative start window moves with `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub key: String,
    pub query: OfferingQuery,
}

fn window_key(w: &StartWindow) -> String {
    match w {
        StartWindow::Relative { earliest, latest } => format!("in{}h-{}h", earliest.num_hours(), latest.num_hours()),
        StartWindow::Absolute { earliest, latest } => format!("{}-{}", earliest.timestamp(), latest.timestamp()),
    }
}

/// The questions a rule asks at `now`: one per region x type x count x duration, each over the
/// rule's whole start window (EC2 answers with its best offerings for the range).
pub fn questions_for(rule: &Rule, now: DateTime<Utc>) -> Vec<Question> {
    let (start_from, start_to) = rule.start_window.resolve(now);
    let mut out = Vec::new();
    if start_to <= start_from {
        return out;
    }
    let window = window_key(&rule.start_window);
    let asks = rule.asks();
    for region in &rule.regions {
        for ask in &asks {
            for &days in &rule.durations_days {
                // An UltraServer question has a key of its own: the same instances asked as
                // instances are another question (and EC2 answers it differently).
                let what = match &ask.ultraservers {
                    Some(u) => format!("{}|{}u", u.kind, u.count),
                    None => format!("{}|{}", ask.instance_type, ask.instance_count),
                };
                out.push(Question {
                    key: format!("{what}|{days}d|{window}"),
                    query: OfferingQuery {
                        region: region.clone(),
                        instance_type: ask.instance_type.clone(),
                        instance_count: ask.instance_count,
                        ultraservers: ask.ultraservers,
                        duration_hours: days * 24,
                        start_from,
                        start_to,
                    },
                });
            }
        }
    }
    out
}

/// Learns accelerator counts from EC2 for the types not known yet; the built-in table covers
/// a region whose DescribeInstanceTypes fails.
pub async fn learn_accelerators<M: InstanceTypeSource + ?Sized>(
    market: &M,
    catalog: &Mutex<AcceleratorCatalog>,
    wanted: &BTreeMap<Region, BTreeSet<InstanceType>>,
) {
    for (region, types) in wanted {
        let unknown: Vec<InstanceType> = {
            let c = catalog.lock().unwrap_or_else(|p| p.into_inner());
            types.iter().filter(|t| !c.is_learned(t)).cloned().collect()
        };
        if unknown.is_empty() {
            continue;
        }
        match market.accelerators(region, &unknown).await {
            Ok(found) => {
                let mut c = catalog.lock().unwrap_or_else(|p| p.into_inner());
                for (t, n) in found {
                    c.learn(t, n);
                }
            }
            Err(e) => {
                tracing::warn!(%region, error = %e, "DescribeInstanceTypes failed; using the built-in accelerator table")
            }
        }
    }
}

pub struct Scanner<'a, M: ?Sized, S: ?Sized, N: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub notifier: &'a N,
    pub catalog: &'a Mutex<AcceleratorCatalog>,
    pub settings: &'a ScanSettings,
    /// Member accounts that lend the watch their own describe limit (none: the buying account
    /// asks alone). Purchases are never theirs.
    pub watch: &'a [WatchAccount],
}

/// One distinct question of this run and the rules that ask it.
struct Planned {
    question: Question,
    rules: Vec<usize>,
    candidate: Candidate,
}

/// What the planner decided for one run.
struct Plan {
    /// Every distinct question, by region.
    all: Vec<Planned>,
    /// Indices into `all`, in asking order, for this run.
    chosen: Vec<usize>,
    memories: BTreeMap<Region, RegionMemory>,
    /// The memories as read, for the store to merge this run's changes into whatever an
    /// overlapping run saved meanwhile.
    read: BTreeMap<Region, RegionMemory>,
    regions: BTreeMap<String, RegionQuestions>,
    /// Indices into the rules of those left out (see `MAX_QUESTIONS_PER_SCAN`).
    skipped: Vec<usize>,
    /// The regions this run claimed the asking of (`MarketMemory::claim_watch`), given back
    /// when its memory is saved.
    claimed: Vec<Region>,
}

/// How long past its asking time a run's claim on a region lasts: the deciding, buying and
/// saving after it. A run that dies leaves a claim that simply runs out.
const CLAIM_MARGIN: chrono::Duration = chrono::Duration::seconds(60);

/// The distinct questions of `rules`, each with the rules that ask it, taken rule by rule while
/// the questions and the regions stay within `bounds`; a rule whose new questions or regions
/// would pass them is left out whole (half a rule's questions would look like a market with
/// nothing to sell). Returns the questions and the indices of the rules left out.
fn gather(rules: &[Rule], now: DateTime<Utc>, bounds: ScanBounds) -> (Vec<Planned>, Vec<usize>) {
    let mut all: Vec<Planned> = Vec::new();
    let mut index: HashMap<(Region, String), usize> = HashMap::new();
    let mut regions: BTreeSet<&Region> = BTreeSet::new();
    let mut skipped = Vec::new();
    for (ri, rule) in rules.iter().enumerate() {
        let new_regions = rule.regions.iter().filter(|r| !regions.contains(r)).collect::<BTreeSet<_>>();
        if regions.len() + new_regions.len() > bounds.regions {
            skipped.push(ri);
            continue;
        }
        let questions = questions_for(rule, now);
        let new = questions.iter().filter(|q| !index.contains_key(&(q.query.region.clone(), q.key.clone()))).count();
        if all.len() + new > bounds.questions {
            skipped.push(ri);
            continue;
        }
        regions.extend(new_regions);
        let closes_in = rule.start_window.resolve(now).1 - now;
        for question in questions {
            let k = (question.query.region.clone(), question.key.clone());
            match index.get(&k) {
                Some(&i) => {
                    let p = &mut all[i];
                    p.rules.push(ri);
                    p.candidate.threshold = p.candidate.threshold.min(rule.max_price_per_accelerator_hour);
                    p.candidate.closes_in = p.candidate.closes_in.min(closes_in);
                }
                None => {
                    index.insert(k, all.len());
                    all.push(Planned {
                        candidate: Candidate {
                            key: question.key.clone(),
                            threshold: rule.max_price_per_accelerator_hour,
                            closes_in,
                        },
                        question,
                        rules: vec![ri],
                    });
                }
            }
        }
    }
    (all, skipped)
}

impl<M, S, N> Scanner<'_, M, S, N>
where
    M: OfferingSource + InstanceTypeSource + Purchaser + ReservationSource + QuotaSource + ?Sized,
    S: RuleStore + Ledger + BlockStore + ObservationStore + Outbox + MarketMemory + ?Sized,
    N: Notifier + ?Sized,
{
    /// Runs one scan over every enabled rule in the store.
    pub async fn run(&self, at: impl Into<RunTime>) -> Result<ScanReport, StoreError> {
        self.run_until(at.into(), None).await
    }

    /// [`Scanner::run`] within a run's time: `until` is when the run must be done by (the
    /// function's deadline), which bounds how long settlement waits for EC2.
    pub async fn run_until(&self, at: RunTime, until: Option<Instant>) -> Result<ScanReport, StoreError> {
        let rules: Vec<Rule> =
            self.store.list_rules().await?.into_iter().map(|s| s.rule).filter(|r| r.enabled).collect();
        self.scan(&rules, at, until, None).await
    }

    pub async fn run_rules(&self, rules: &[Rule], at: impl Into<RunTime>) -> Result<ScanReport, StoreError> {
        self.scan(rules, at.into(), None, None).await
    }

    /// [`Scanner::run`] that buys only what a person confirmed: each live rule buys the block
    /// the plan showed them, at the fee it showed, or nothing (`Outcome::OffPlan`, the fields
    /// that differ named). The plan is a look at the same moment (`RunTime::look`, which writes
    /// nothing), made into `confirmed` by [`Confirmed::from_report`].
    pub async fn run_confirmed(&self, at: RunTime, confirmed: &Confirmed) -> Result<ScanReport, StoreError> {
        let rules: Vec<Rule> =
            self.store.list_rules().await?.into_iter().map(|s| s.rule).filter(|r| r.enabled).collect();
        self.scan(&rules, at, None, Some(confirmed)).await
    }

    /// A replay (`at` looks at another moment than the clock's) asks EC2 and decides as of that
    /// moment, and writes nothing: no settlement, market memory, prices, decisions or notices.
    async fn scan(
        &self,
        rules: &[Rule],
        at: RunTime,
        until: Option<Instant>,
        confirmed: Option<&Confirmed>,
    ) -> Result<ScanReport, StoreError> {
        let now = at.clock();
        let (budgeted, unbudgeted) = self.refuse_unbudgeted(rules, at).await?;
        let rules = budgeted.as_slice();
        // Unknown outcomes first: an unresolved intent blocks its rule, and a block bought by a
        // run that died must be on the books before anyone decides to buy more.
        let settled = if self.settings.settles {
            settle_open_intents(self.store, self.market, at, settling_until(until)).await?
        } else {
            Vec::new()
        };
        let run = uuid::Uuid::new_v4().to_string();
        let mut plan = self.plan(rules, at, &run).await;
        // Only the regions of the rules the plan kept are visited, even to learn types.
        let kept: Vec<Rule> =
            rules.iter().enumerate().filter(|(i, _)| !plan.skipped.contains(i)).map(|(_, r)| r.clone()).collect();
        self.learn_types(&kept).await;
        let mut findings = Findings::default();
        // Buy on sight: each answer with offerings goes to the rules that asked it while the
        // other questions are still being asked; a rule acts on the first answer that holds
        // an offering it would take, not after the asking time.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let owners: Vec<Vec<usize>> = plan.all.iter().map(|p| p.rules.clone()).collect();
        let send = move |i: usize, a: &Answer, by: Option<&str>| {
            if let Answer::Offerings(list) = a
                && !list.is_empty()
            {
                // The receiver only goes when the scan already failed: nothing to tell.
                let _ = tx.send(Sighting {
                    question: i,
                    offerings: list.clone(),
                    at: Instant::now(),
                    member: by.map(str::to_string),
                });
            }
        };
        let (answered, on_sight) = tokio::join!(
            self.ask(&mut plan, &mut findings, now, send),
            self.on_sight(rules, &owners, rx, at, confirmed)
        );
        let on_sight = on_sight?;
        if !at.is_replay() {
            let remembered = self.remember(&plan, &findings, rules, now).await;
            for region in &plan.claimed {
                if let Err(e) = self.store.release_watch(region, &run).await {
                    tracing::warn!(event = "watch_unreleased", %region, error = %e, "the claim runs out by itself");
                }
            }
            remembered?;
        }
        let (observations_written, prices) = self.record_prices(&answered, &findings.history, at).await;
        let outcomes = self.decide_and_act(rules, &plan, &answered, on_sight, at, confirmed).await?;
        // What this run recorded is in the history it reads back (`domain::market_move`).
        let market_notes = if at.is_replay() {
            Vec::new()
        } else {
            let due: BTreeSet<Region> = plan
                .read
                .iter()
                .filter(|(_, m)| market_move::due(m.watch.as_ref().map(|w| w.at), now))
                .map(|(r, _)| r.clone())
                .collect();
            // Notes only: a store failure here must not fail a scan that may have bought.
            super::market_move::check(self.store, rules, &due, now).await.unwrap_or_else(|e| {
                tracing::warn!(event = "market_check_failed", error = %e, "market moves not checked this run");
                Vec::new()
            })
        };
        let notices =
            if at.is_replay() { FlushReport::default() } else { flush(self.store, self.notifier, now).await? };
        let offerings_seen: BTreeSet<&str> = answered.values().flatten().map(|o| o.id.as_str()).collect();
        Ok(ScanReport {
            now: at.view(),
            replay: at.is_replay(),
            rules: rules.len(),
            queries: plan.all.len(),
            answered: answered.len(),
            offerings_seen: offerings_seen.len(),
            regions: plan.regions,
            observations_written,
            prices,
            thresholds: rules.iter().map(|r| (r.id.clone(), r.max_price_per_accelerator_hour)).collect(),
            failed_regions: findings.failed,
            unsupported_regions: findings.unsupported,
            watch_failed: findings.watch_failed,
            watch_refused: findings.watch_refused,
            not_sold: findings.not_sold.keys().map(|(r, t)| format!("{r} {t}")).collect(),
            quota_zero: findings.quota_zero.keys().map(|(r, f)| format!("{r} {f}")).collect(),
            skipped_rules: plan.skipped.iter().map(|&i| rules[i].id.clone()).collect(),
            unbudgeted,
            settled,
            outcomes,
            market_notes,
            notices,
        })
    }

    /// Accelerator counts for every type the rules name (prices are per accelerator-hour).
    async fn learn_types(&self, rules: &[Rule]) {
        let mut wanted: BTreeMap<Region, BTreeSet<InstanceType>> = BTreeMap::new();
        for r in rules {
            for region in &r.regions {
                wanted.entry(region.clone()).or_default().extend(r.priced_types());
            }
        }
        learn_accelerators(self.market, self.catalog, &wanted).await;
    }

    /// The distinct questions of all rules, and the few per region this run asks: what EC2 said
    /// it does not sell is skipped for a day, a family with a quota of 0 gets one probe an hour,
    /// and the planner picks the rest within the describe budget.
    async fn plan(&self, rules: &[Rule], at: RunTime, run: &str) -> Plan {
        let now = at.view();
        let (all, skipped) = gather(rules, now, SCAN_BOUNDS);
        if !skipped.is_empty() {
            let names: Vec<&str> = skipped.iter().map(|&i| rules[i].id.as_str()).collect();
            tracing::warn!(event = "rules_skipped", rules = ?names, questions = MAX_QUESTIONS_PER_SCAN, regions = MAX_REGIONS_PER_SCAN,
                "these rules would push the scan past its questions or regions; disable or narrow some rules");
        }
        let regions: BTreeSet<Region> = all.iter().map(|p| p.question.query.region.clone()).collect();
        let mut memories = BTreeMap::new();
        let mut report = BTreeMap::new();
        let mut claimed = Vec::new();
        let until = (at.clock()
            + chrono::Duration::from_std(self.settings.describe.ask_for).unwrap_or_default()
            + CLAIM_MARGIN)
            .min(at.clock() + crate::ports::MAX_WATCH_CLAIM);
        for region in regions {
            // A replay writes nothing, not even a claim.
            if !at.is_replay() {
                match self.store.claim_watch(&region, run, at.clock(), until).await {
                    Ok(true) => claimed.push(region.clone()),
                    Ok(false) => {
                        tracing::info!(event = "watched_elsewhere", %region, "another scan is asking this region; leaving it to that one");
                        report.insert(region.to_string(), RegionQuestions { elsewhere: true, ..Default::default() });
                        continue;
                    }
                    // Asked anyway: a claim only keeps two runs from asking at once.
                    Err(e) => tracing::warn!(event = "watch_unclaimed", %region, error = %e, "asking without a claim"),
                }
            }
            let memory = match self.store.region_memory(&region).await {
                Ok(m) => m.clamped(at.clock()),
                Err(e) => {
                    // The planner then starts afresh: more questions asked again, nothing lost.
                    tracing::warn!(event = "market_memory_unreadable", %region, error = %e, "planning without the region's memory");
                    RegionMemory::default()
                }
            };
            memories.insert(region, memory);
        }
        let mut chosen = Vec::new();
        for (region, memory) in &memories {
            // Each account brings its own describe limit: the region's calls are the sum of each
            // account's at its own learned pace.
            let calls = self.settings.describe.planned(memory.pace)
                + self
                    .watch
                    .iter()
                    .map(|w| self.settings.describe.planned(memory.helper_paces.get(&w.account).copied()))
                    .sum::<usize>();
            let mut probed: BTreeSet<&str> = BTreeSet::new();
            let askable: Vec<usize> = (0..all.len())
                .filter(|&i| &all[i].question.query.region == region)
                .filter(|&i| {
                    let ty = all[i].question.query.instance_type.as_str();
                    let fam = family(ty);
                    if memory.is_not_sold(ty, now) {
                        return false;
                    }
                    // A family with a quota of 0 noted: one question a run (a probe), so the
                    // first success clears it.
                    !memory.quota_zero.contains_key(fam) || probed.insert(fam)
                })
                .collect();
            let candidates: Vec<Candidate> = askable.iter().map(|&i| all[i].candidate.clone()).collect();
            let picked: Vec<usize> = plan::choose(&candidates, memory, calls).into_iter().map(|j| askable[j]).collect();
            let questions = all.iter().filter(|p| &p.question.query.region == region).count();
            report.insert(
                region.to_string(),
                RegionQuestions {
                    questions,
                    planned: picked.len(),
                    full_cycle_runs: plan::full_cycle_runs(askable.len(), calls),
                    allowed: calls,
                    accounts: 1 + self.watch.len(),
                    ..Default::default()
                },
            );
            chosen.extend(picked);
        }
        Plan { all, chosen, read: memories.clone(), memories, regions: report, skipped, claimed }
    }

    /// Starts the market's client and each member's at the UltraServer search form each
    /// region's memory keeps: a new container does not ask in a form EC2 refused first.
    fn start_search_forms(&self, memories: &BTreeMap<Region, RegionMemory>) {
        for (region, form) in memories.iter().filter_map(|(r, m)| Some((r, m.search_form?))) {
            self.market.start_search_form(region, form);
            for w in self.watch {
                w.market.start_search_form(region, form);
            }
        }
    }

    /// Keeps in each region's memory the UltraServer search form this run learned: the buying
    /// account's client's, else a member's, when it differs from the one the memory held.
    fn keep_search_forms(&self, queries: &[OfferingQuery], memories: &mut BTreeMap<Region, RegionMemory>) {
        let regions: BTreeSet<&Region> =
            queries.iter().filter(|q| q.ultraservers.is_some()).map(|q| &q.region).collect();
        for region in regions {
            let memory = memories.entry(region.clone()).or_default();
            let learned = std::iter::once(self.market.search_form(region))
                .chain(self.watch.iter().map(|w| w.market.search_form(region)))
                .flatten()
                .find(|f| Some(*f) != memory.search_form);
            if let Some(form) = learned {
                tracing::info!(event = "search_form_learned", region = %region, ?form,
                    "EC2 takes this region's UltraServer searches in another form: kept for the next runs");
                memory.search_form = Some(form);
            }
        }
    }

    /// Asks the planned questions; returns the offerings of each answered one (by index into
    /// `plan.all`) and notes what EC2 said of the regions.
    async fn ask(
        &self,
        plan: &mut Plan,
        findings: &mut Findings,
        now: DateTime<Utc>,
        seen: impl Fn(usize, &Answer, Option<&str>) + Sync,
    ) -> BTreeMap<usize, Vec<Offering>> {
        let queries: Vec<OfferingQuery> = plan.chosen.iter().map(|&i| plan.all[i].question.query.clone()).collect();
        let carried = Carried::from_memories(&plan.memories, now);
        self.start_search_forms(&plan.memories);
        let chosen = &plan.chosen;
        let pacing = Pacing::from(&self.settings.describe);
        let asked = ask_spread(self.market, &helpers(self.watch), &queries, &pacing, &carried, |k, a, by| {
            seen(chosen[k], a, by)
        })
        .await;
        let mut calls = asked.calls.clone();
        for ((region, _), c) in &asked.helper_calls {
            let all = calls.entry(region.clone()).or_default();
            (all.sent, all.throttled, all.contended) =
                (all.sent + c.sent, all.throttled + c.throttled, all.contended + c.contended);
        }
        for (region, c) in &calls {
            let counts = plan.regions.entry(region.to_string()).or_default();
            (counts.asked, counts.throttled, counts.contended) = (c.sent, c.throttled, c.contended);
        }
        // A member no longer lending its limit is forgotten.
        let lends = |a: &str| self.watch.iter().any(|w| w.account == a);
        market_memory::keep_paces(&mut plan.memories, &asked.paces, &asked.helper_paces, lends);
        for (region, pace) in &asked.paces {
            plan.regions.entry(region.to_string()).or_default().pace_ms = pace.gap_ms;
        }
        self.keep_search_forms(&queries, &mut plan.memories);
        for (account, error) in &asked.helper_failed {
            tracing::warn!(event = "watch_account_failed", account = %account, %error,
                "a member account's watch role did not answer; the other accounts asked its questions");
        }
        findings.watch_failed.extend(asked.helper_failed.clone());
        self.member_quotas(plan, findings, &asked, now);
        // Each family's refusals as this run leaves them (only regions asked this run: the
        // others' are as they were). The record before the run names a finding's refusals.
        let regions_asked: BTreeSet<Region> = asked.calls.keys().cloned().collect();
        let before =
            market_memory::settle_refusals(&mut plan.memories, &regions_asked, &asked.strikes, &asked.refused, now);
        let answered = self.take_answers(plan, findings, asked.answers, &before, now).await;
        for (region, error) in &findings.failed {
            tracing::warn!(event = "region_failed", %region, %error, "region skipped this scan");
        }
        for region in &findings.unsupported {
            tracing::info!(event = "region_unsupported", %region, "region does not sell Capacity Blocks");
        }
        self.watch(plan, &calls, now);
        for (region, q) in &plan.regions {
            tracing::info!(event = "questions", %region, questions = q.questions, planned = q.planned, answered = q.answered,
                carried_over = q.carried_over, full_cycle_runs = q.full_cycle_runs, pace_ms = q.pace_ms,
                every_question_within_secs = q.age_max_secs, contended = q.contended, "asked the market");
        }
        answered
    }

    /// Takes each chosen question's answer (`answers`, in `plan.chosen`'s order) into the plan's
    /// counts, the regions' memories and the findings; returns the offerings of each answered
    /// one. `before`: each family's refusals before the run, which a quota-0 finding names.
    async fn take_answers(
        &self,
        plan: &mut Plan,
        findings: &mut Findings,
        answers: Vec<Answer>,
        before: &BTreeMap<(Region, String), Refusals>,
        now: DateTime<Utc>,
    ) -> BTreeMap<usize, Vec<Offering>> {
        // The accelerator counts, once: each answer's cheapest price per accelerator-hour is kept.
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut answered = BTreeMap::new();
        // Service Quotas, read once per family and region in a run.
        let mut quotas: BTreeMap<(Region, String), Option<u32>> = BTreeMap::new();
        for (&i, answer) in plan.chosen.iter().zip(answers) {
            let q = &plan.all[i].question.query;
            let region = q.region.to_string();
            let counts = plan.regions.entry(region.clone()).or_default();
            let memory = plan.memories.entry(q.region.clone()).or_default();
            let fam = family(q.instance_type.as_str()).to_string();
            match answer {
                Answer::Offerings(list) => {
                    counts.answered += 1;
                    if memory.quota_zero.remove(&fam).is_some() {
                        tracing::info!(event = "quota_zero_cleared", %region, family = %fam, "a search succeeded: the family's quota is no longer 0");
                    }
                    let cheapest = list
                        .iter()
                        .filter_map(|o| o.price_per_accelerator_hour(catalog.accelerators(&o.instance_type)?))
                        .map(|r| r.per_unit)
                        .min();
                    if market_memory::note_answer(memory, plan.all[i].question.key.clone(), cheapest, now) {
                        findings.history.insert(i);
                    }
                    answered.insert(i, list);
                }
                // Only a one-shot search (`ask_once`) gives a family up; a scan's refusals are
                // counted across runs instead, so this is never a scan's answer.
                Answer::CarriedOver | Answer::GivenUp => counts.carried_over += 1,
                Answer::QuotaZero => {
                    counts.carried_over += 1;
                    // Refusals over runs say "quota 0" or "someone keeps spending the limit";
                    // Service Quotas, where the role may read it, tells them apart.
                    let key = (q.region.clone(), fam.clone());
                    let quota = match quotas.get(&key) {
                        Some(known) => *known,
                        None => {
                            let read = self.market.capacity_block_quota(&q.region, &fam).await;
                            *quotas.entry(key).or_insert(read)
                        }
                    };
                    if let Some(quota) = quota
                        && quota > 0
                    {
                        tracing::warn!(event = "quota_not_zero", %region, family = %fam, quota, "refused over runs, but Service Quotas allows this family: others in the account spend the describe limit");
                        memory.refusals.remove(&fam);
                        continue;
                    }
                    let refused = Refusals::after_run(before.get(&(q.region.clone(), fam.clone())), QUOTA_STRIKES, now);
                    let since = memory.note_quota_zero(&fam, now);
                    findings.quota_zero.insert((region, fam), (since, refused));
                }
                Answer::NotSold(message) => {
                    memory.not_sold.insert(q.instance_type.to_string(), now + MARKET_NOTE_TTL);
                    findings.not_sold.insert((region, q.instance_type.to_string()), message);
                    findings.not_sold_rules.extend(plan.all[i].rules.iter().map(|&r| (q.instance_type.to_string(), r)));
                }
                Answer::Unsupported => {
                    findings.unsupported.insert(region);
                }
                Answer::Failed(e) => {
                    findings.failed.entry(region).or_insert_with(|| e.to_string());
                }
            }
        }
        answered
    }

    /// Each member refused on every call of a family noted in the region's memory (a new note
    /// is a finding, announced once), and each answered one cleared; members no longer in
    /// `WatchAccounts` are forgotten.
    fn member_quotas(&self, plan: &mut Plan, findings: &mut Findings, asked: &RunAnswers, now: DateTime<Utc>) {
        for memory in plan.memories.values_mut() {
            memory
                .member_refused
                .retain(|k, _| member_of_key(k).is_some_and(|(a, _)| self.watch.iter().any(|w| w.account == a)));
        }
        for (region, account, fam) in &asked.helper_refused {
            findings.watch_refused.insert(format!("{account} {region} {fam}"));
            let memory = plan.memories.entry(region.clone()).or_default();
            let (_, new) = memory.note_member_refused(account, fam, now);
            if new {
                tracing::warn!(event = "member_quota_zero", %region, account = %account, family = %fam,
                    "a member account was refused on every call of the family: its quota is 0 or its limit is spent; it lends nothing for it");
                findings.member_refused.insert((account.clone(), region.to_string(), fam.clone()), MEMBER_STRIKES);
            }
        }
        for (region, account, fam) in &asked.helper_answered {
            let cleared =
                plan.memories.get_mut(region).and_then(|m| m.member_refused.remove(&member_key(account, fam)));
            if cleared.is_some() {
                tracing::info!(event = "member_quota_zero_cleared", %region, account = %account, family = %fam,
                    "a member account was answered: it lends the family again");
            }
        }
    }

    /// How well each region asked this run is watched now: the ages of its questions' last
    /// answers (and how many have none yet), into the report and the region's memory.
    fn watch(&self, plan: &mut Plan, calls: &BTreeMap<Region, super::fan_out::Calls>, now: DateTime<Utc>) {
        for (region, c) in calls {
            let Some(memory) = plan.memories.get_mut(region) else { continue };
            let mine: Vec<&Planned> = plan.all.iter().filter(|p| &p.question.query.region == region).collect();
            let mut ages: Vec<u64> = mine
                .iter()
                .filter_map(|p| memory.asked.get(&p.question.key))
                .map(|a| (now - a.at).num_seconds().max(0) as u64)
                .collect();
            let questions = mine.len() as u32;
            let unanswered = questions - ages.len() as u32;
            let (p50, max) = Watch::ages(&mut ages);
            let counts = plan.regions.entry(region.to_string()).or_default();
            (counts.age_p50_secs, counts.age_max_secs) = (p50, max);
            memory.watch = Some(Watch {
                at: now,
                questions,
                unanswered,
                age_p50_secs: p50,
                age_max_secs: max,
                calls: c.sent as u32,
                refused: c.throttled as u32,
                contended: c.contended as u32,
                gap_ms: memory.pace.map_or(0, |p| p.gap_ms),
            });
        }
    }

    /// Saves each region's memory and queues one alert per market finding: a quota of 0 once
    /// per sighting, "not sold here" once per region and type.
    async fn remember(
        &self,
        plan: &Plan,
        findings: &Findings,
        rules: &[Rule],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for (region, memory) in &plan.memories {
            let mut memory = memory.clone();
            memory.prune(now);
            let read = plan.read.get(region).cloned().unwrap_or_default();
            if let Err(e) = self.store.save_region_memory(region, &read, &memory).await {
                tracing::warn!(event = "market_memory_unsaved", %region, error = %e, "the next run plans without this one");
            }
        }
        for ((region, fam), (since, refused)) in &findings.quota_zero {
            let msg = announce::quota_zero(region, fam, refused, now);
            let milestone = format!("quota-zero-{fam}-{}", since.timestamp());
            self.store
                .enqueue(&alert_notice(&format!("market-{region}"), &OutboxKey::notice(milestone)?, &msg, now))
                .await?;
        }
        // Once per note: a member refused on every call of a family (cleared by an answer).
        for ((account, region, fam), refused) in &findings.member_refused {
            let msg = announce::member_quota_zero(account, region, fam, *refused);
            let milestone = format!("member-quota-{account}-{fam}-{}", now.timestamp());
            self.store
                .enqueue(&alert_notice(&format!("market-{region}"), &OutboxKey::notice(milestone)?, &msg, now))
                .await?;
        }
        // Once a day per member account while its watch role fails.
        for (account, error) in &findings.watch_failed {
            let msg = announce::watch_account_failed(account, error, &self.settings.stack.name);
            let milestone = format!("watch-failed-{account}-{}", now.format("%Y-%m-%d"));
            self.store.enqueue(&alert_notice("market-watch", &OutboxKey::notice(milestone)?, &msg, now)).await?;
        }
        for ((region, ty), message) in &findings.not_sold {
            let names: BTreeSet<String> =
                findings.not_sold_rules.iter().filter(|(t, _)| t == ty).map(|(_, r)| rules[*r].id.clone()).collect();
            let msg = announce::not_sold(region, ty, message, &names.into_iter().collect::<Vec<_>>());
            self.store
                .enqueue(&alert_notice(
                    &format!("market-{region}"),
                    &OutboxKey::notice(format!("not-sold-{ty}"))?,
                    &msg,
                    now,
                ))
                .await?;
        }
        Ok(())
    }

    /// The price history (for people): a failure here must not stop a purchase.
    /// Every answer's prices go to the report (and the metrics); the history only gets the
    /// answers of the questions in `history` (see `market_memory::HISTORY_EVERY`).
    async fn record_prices(
        &self,
        answered: &BTreeMap<usize, Vec<Offering>>,
        history: &BTreeSet<usize>,
        at: RunTime,
    ) -> (usize, Vec<SeenPrice>) {
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut seen: HashMap<&str, &Offering> = HashMap::new();
        let mut kept: BTreeSet<&str> = BTreeSet::new();
        for (i, list) in answered {
            for o in list {
                seen.insert(o.id.as_str(), o);
                if history.contains(i) {
                    kept.insert(o.id.as_str());
                }
            }
        }
        let observations: Vec<Observation> = seen
            .values()
            .filter_map(|o| {
                Some(Observation {
                    accelerators_per_instance: catalog.accelerators(&o.instance_type)?,
                    offering: (*o).clone(),
                    seen_at: at.clock(),
                })
            })
            .collect();
        let mut cheapest: BTreeMap<(Region, InstanceType, Option<String>), Decimal> = BTreeMap::new();
        for o in &observations {
            let Some(rate) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) else { continue };
            let kind = o.offering.ultraservers.as_ref().map(|u| u.kind.as_str().to_string());
            let key = (o.offering.region.clone(), o.offering.instance_type.clone(), kind);
            cheapest.entry(key).and_modify(|p| *p = (*p).min(rate.per_unit)).or_insert(rate.per_unit);
        }
        let prices = cheapest
            .into_iter()
            .map(|((region, instance_type, ultraserver_type), per_accelerator_hour)| SeenPrice {
                region,
                instance_type,
                ultraserver_type,
                per_accelerator_hour,
            })
            .collect();
        if at.is_replay() {
            return (0, prices);
        }
        let observations: Vec<Observation> =
            observations.into_iter().filter(|o| kept.contains(o.offering.id.as_str())).collect();
        let written = match self.store.record(&observations).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(event = "observations_failed", error = %e, "price history not written");
                0
            }
        };
        (written, prices)
    }

    /// Per rule that asked the sighted question: every offering its answered questions held so
    /// far, and if one is eligible now, the rule acts at once (`act`). Returns what each rule
    /// that acted did, by rule index; the others decide after the asking (`decide_and_act`).
    async fn on_sight(
        &self,
        rules: &[Rule],
        owners: &[Vec<usize>],
        mut sightings: tokio::sync::mpsc::UnboundedReceiver<Sighting>,
        at: RunTime,
        confirmed: Option<&Confirmed>,
    ) -> Result<BTreeMap<usize, Acted>, StoreError> {
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut seen: BTreeMap<usize, Vec<Offering>> = BTreeMap::new();
        let mut acted = BTreeMap::new();
        // The rules an answer made ready to act (an offering meets them on price and window),
        // and the oldest answer among what they will choose from.
        let mut ready: BTreeSet<usize> = BTreeSet::new();
        let mut oldest: Option<Instant> = None;
        let mut settle_until: Option<Instant> = None;
        // Offering ids a member account was shown: nothing public says another account may buy
        // under them, so the buying account asks for the block again before it buys (the
        // purchase's re-check finds it under the id EC2 shows the buyer).
        let mut shown_to_members: BTreeSet<String> = BTreeSet::new();
        loop {
            let next = match settle_until {
                None => sightings.recv().await,
                Some(t) => tokio::time::timeout_at(t, sightings.recv()).await.unwrap_or(None),
            };
            let Some(sighting) = next else {
                // The settling time is over (or the asking): the ready rules act, each on the
                // cheapest of everything it has seen.
                for ri in std::mem::take(&mut ready) {
                    let rule = &rules[ri];
                    let offerings = seen.get(&ri).map(Vec::as_slice).unwrap_or_default();
                    let room = Headroom(headroom(self.store, rule, &self.settings.stack.budgets(), at.clock()).await?);
                    let decision = decide(rule, offerings, &catalog, room, at.view());
                    if decision.chosen.is_none() {
                        continue;
                    }
                    tracing::info!(event = "on_sight", rule = %rule.id, offering = ?decision.chosen.as_ref().map(|p| &p.offering.id),
                        "an answer holds an offering the rule takes: acting now");
                    acted.insert(ri, self.act(rule, &decision, at, oldest, &shown_to_members, confirmed).await?);
                }
                (oldest, settle_until) = (None, None);
                if sightings.is_closed() && sightings.is_empty() {
                    break;
                }
                continue;
            };
            if let Some(account) = &sighting.member {
                tracing::debug!(event = "seen_by_member", %account, offerings = sighting.offerings.len());
                shown_to_members.extend(sighting.offerings.iter().map(|o| o.id.clone()));
            }
            for &ri in &owners[sighting.question] {
                if acted.contains_key(&ri) {
                    continue;
                }
                let rule = &rules[ri];
                let offerings = seen.entry(ri).or_default();
                offerings.extend(sighting.offerings.iter().cloned());
                // The budgets are read only when an offering meets the rule on price and window.
                if decide(rule, offerings, &catalog, Headroom(rule.monthly_budget), at.view()).chosen.is_some() {
                    ready.insert(ri);
                }
            }
            if !ready.is_empty() {
                oldest = Some(oldest.map_or(sighting.at, |o| o.min(sighting.at)));
                settle_until.get_or_insert(sighting.at + SIGHT_SETTLE);
            }
        }
        Ok(acted)
    }

    /// The rules that may spend, and those refused because they name a team without a budget
    /// (rule id -> team). Each refusal is logged on every scan and said once per rule, team and
    /// month in the rule's alert thread: a rule that silently never buys is what this prevents.
    async fn refuse_unbudgeted(
        &self,
        rules: &[Rule],
        at: RunTime,
    ) -> Result<(Vec<Rule>, BTreeMap<String, String>), StoreError> {
        let (now, budgets) = (at.clock(), self.settings.stack.budgets());
        let mut kept = Vec::with_capacity(rules.len());
        let mut refused = BTreeMap::new();
        for rule in rules {
            match charges_for(rule, &budgets, &Period::of(now)) {
                Ok(_) => kept.push(rule.clone()),
                Err(e) => {
                    tracing::warn!(event = "team_unbudgeted", rule = %rule.id, team = %e.team, "{e}");
                    if !at.is_replay() {
                        let milestone = format!("team-unbudgeted-{}-{}", e.team, Period::of(now).as_str());
                        let msg = announce::team_unbudgeted(&e.rule, &e.team, &budgets);
                        self.store
                            .enqueue(&alert_notice(
                                &format!("rule-{}", rule.id),
                                &OutboxKey::notice(milestone)?,
                                &msg,
                                now,
                            ))
                            .await?;
                    }
                    refused.insert(e.rule, e.team);
                }
            }
        }
        Ok((kept, refused))
    }

    /// The first of the rule's `MAX_ALTERNATIVES` best offerings it has not tried to buy before
    /// (no intent of it stored).
    async fn first_untried<'d>(&self, rule: &Rule, ranked: &'d [Priced]) -> Result<Option<&'d Priced>, StoreError> {
        for p in ranked.iter().take(MAX_ALTERNATIVES) {
            let intent = crate::domain::budget::Intent::id_for(&rule.id, &p.offering.id);
            if self.store.get_intent(&rule.id, &intent).await?.is_none() {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    /// Buys, asks for approval or announces `decision`'s choice, as the rule's and the stack's
    /// modes say. `answered_at`: when EC2's answer holding it came, if just now; an offering a
    /// member account was shown (`shown_to_members`) is always looked at again by the buying
    /// account first, the first choice and every alternative alike. `confirmed`: a person's
    /// plan, the only blocks a live rule may buy (`Confirmed::admits`).
    async fn act(
        &self,
        rule: &Rule,
        decision: &Decision,
        at: RunTime,
        answered_at: Option<Instant>,
        shown_to_members: &BTreeSet<String>,
        confirmed: Option<&Confirmed>,
    ) -> Result<Acted, StoreError> {
        let now = at.clock();
        let buyer_for = |p: &Priced| Buyer {
            market: self.market,
            store: self.store,
            stack: &self.settings.stack.name,
            budgets: self.settings.stack.budgets(),
            recheck_pause: self.settings.describe.refill,
            answered_at: answered_at.filter(|_| !shown_to_members.contains(&p.offering.id)),
        };
        let mode = self.settings.stack.mode.and(rule.mode);
        let mut chosen = decision.chosen.clone();
        let action = match &decision.chosen {
            None => None,
            // A live rule's look (a person's plan before a live scan) passes over what the rule
            // tried before, as the live path below does, so the plan names what the run would
            // buy; it only reads.
            Some(_) if at.is_replay() && mode == Mode::Live => {
                match self.first_untried(rule, &decision.ranked).await? {
                    Some(p) => {
                        chosen = Some(p.clone());
                        Some(Outcome::Replayed { offering_id: p.offering.id.clone() })
                    }
                    None => {
                        decision.ranked.first().map(|p| Outcome::AlreadyTried { offering_id: p.offering.id.clone() })
                    }
                }
            }
            // A replay only says what the rule would choose: nothing is asked or stored.
            Some(p) if at.is_replay() => Some(Outcome::Replayed { offering_id: p.offering.id.clone() }),
            Some(_) if mode == Mode::Live => {
                // Under a person's plan, only the planned block: any other the rule would take
                // now is passed over, and with the planned one gone or repriced nothing is bought.
                let ranked: Vec<&Priced> = match confirmed {
                    None => decision.ranked.iter().collect(),
                    Some(c) => decision.ranked.iter().filter(|p| c.admits(&rule.id, &p.offering).is_ok()).collect(),
                };
                if let (Some(c), Some(first), true) = (confirmed, decision.ranked.first(), ranked.is_empty()) {
                    let reason = c.admits(&rule.id, &first.offering).err().unwrap_or_default();
                    tracing::info!(event = "off_plan", rule = %rule.id, offering = %first.offering.id, %reason,
                        "the market moved since the person's plan: not buying");
                    return Ok(Acted {
                        chosen,
                        action: Some(Outcome::OffPlan { offering_id: first.offering.id.clone(), reason }),
                    });
                }
                // The best offering may already have been tried by this rule (refused by
                // EC2): take the next cheapest, a few at most.
                let mut last = None;
                for p in ranked.into_iter().take(MAX_ALTERNATIVES) {
                    chosen = Some(p.clone());
                    let action = buyer_for(p).live(rule, p, now).await?;
                    let tried = matches!(action, Outcome::AlreadyTried { .. });
                    last = Some(action);
                    if !tried {
                        break;
                    }
                }
                last
            }
            Some(p) if mode == Mode::Approval => Some(buyer_for(p).ask(rule, p, now).await?),
            Some(p) => Some(buyer_for(p).dry_run(rule, p, self.settings.stack.mode, now).await?),
        };
        Ok(Acted { chosen, action })
    }

    /// Per rule: the cheapest eligible offering among its answered questions, then buy,
    /// ask for approval or announce (`act`), unless the rule already acted on sight.
    async fn decide_and_act(
        &self,
        rules: &[Rule],
        plan: &Plan,
        answered: &BTreeMap<usize, Vec<Offering>>,
        mut on_sight: BTreeMap<usize, Acted>,
        at: RunTime,
        confirmed: Option<&Confirmed>,
    ) -> Result<Vec<RuleOutcome>, StoreError> {
        // Budget months are the clock's; what is on sale and eligible is judged as of the view.
        let (now, view) = (at.clock(), at.view());
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut outcomes = Vec::new();
        for (ri, rule) in rules.iter().enumerate() {
            let mine: Vec<usize> = (0..plan.all.len()).filter(|&i| plan.all[i].rules.contains(&ri)).collect();
            let offerings: Vec<Offering> = mine.iter().filter_map(|i| answered.get(i)).flatten().cloned().collect();
            let questions_answered = mine.iter().filter(|i| answered.contains_key(i)).count();
            let room = Headroom(headroom(self.store, rule, &self.settings.stack.budgets(), now).await?);
            let decision = decide(rule, &offerings, &catalog, room, view);
            let mode = self.settings.stack.mode.and(rule.mode);
            let Acted { chosen, action } = match on_sight.remove(&ri) {
                Some(acted) => acted,
                None => self.act(rule, &decision, at, None, &BTreeSet::new(), confirmed).await?,
            };
            tracing::info!(event = "decision", rule = %rule.id, mode = mode.as_str(), questions = mine.len(), questions_answered,
                offerings = offerings.len(), eligible = decision.eligible, chosen = ?chosen.as_ref().map(|p| &p.offering.id),
                action = ?action, "rule evaluated");
            outcomes.push(RuleOutcome {
                rule_id: rule.id.clone(),
                mode,
                questions_answered,
                questions: mine.len(),
                offerings_seen: offerings.len(),
                eligible: decision.eligible,
                cheapest: decision.cheapest,
                threshold: rule.max_price_per_accelerator_hour,
                chosen,
                action,
            });
        }
        Ok(outcomes)
    }
}

/// How long a rule made ready by an answer waits for the answers other regions' lanes have in
/// flight (their calls go out side by side, a call's latency apart), so that it takes the
/// cheapest of them, not merely the first. A fraction of one describe-limit refill: detection
/// is measured in minutes.
const SIGHT_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// An answer that held offerings, the moment it came.
struct Sighting {
    /// Index into the plan's questions.
    question: usize,
    offerings: Vec<Offering>,
    at: Instant,
    /// The member account whose call gave the answer (`None`: the buying account's).
    member: Option<String>,
}

/// What a person said yes to before a live scan from the CLI: per rule, the one block its plan
/// showed (a look at the same moment: `RunTime::look`). The run that follows asks EC2 again,
/// and the market may have moved meanwhile; a live rule then buys only its planned block, the
/// same block (region, zone, type, count, UltraServers, start and end) at the same fee, and
/// otherwise nothing (`Outcome::OffPlan`). So the person never pays for a block, or a fee, they
/// did not see; a rule with nothing planned buys nothing. The purchase path's own re-checks
/// (the budgets reserved in one transaction, the offering asked of EC2 again at that fee) hold
/// as in every run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confirmed {
    blocks: BTreeMap<String, Offering>,
}

impl Confirmed {
    /// The plan a look's report holds: each live rule's chosen block it would buy
    /// (`Outcome::Replayed`), by rule id.
    pub fn from_report(report: &ScanReport) -> Confirmed {
        let blocks = report
            .outcomes
            .iter()
            .filter(|o| o.mode == Mode::Live && matches!(o.action, Some(Outcome::Replayed { .. })))
            .filter_map(|o| Some((o.rule_id.clone(), o.chosen.as_ref()?.offering.clone())))
            .collect();
        Confirmed { blocks }
    }

    /// The planned blocks, by rule id.
    pub fn blocks(&self) -> &BTreeMap<String, Offering> {
        &self.blocks
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether `rule_id` may buy `o` under the plan, else why not: each field of the block that
    /// differs from the planned one, with both values (the offering's id may differ: EC2 may
    /// name a block anew in each answer).
    pub fn admits(&self, rule_id: &str, o: &Offering) -> Result<(), String> {
        let Some(planned) = self.blocks.get(rule_id) else {
            return Err(format!("the plan had nothing to buy for rule {rule_id}"));
        };
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
        let us = |u: Option<crate::domain::ultraserver::UltraServers>| u.map_or("none".to_string(), |u| u.to_string());
        let same = |a: &String, b: &String| a == b;
        let fields = [
            ("region", o.region.to_string(), planned.region.to_string(), same),
            ("availability zone", o.availability_zone.clone(), planned.availability_zone.clone(), same),
            ("instance type", o.instance_type.to_string(), planned.instance_type.to_string(), same),
            ("instance count", o.instance_count.to_string(), planned.instance_count.to_string(), same),
            ("UltraServers", us(o.ultraservers), us(planned.ultraservers), same),
            ("start", at(o.start), at(planned.start), same),
            ("end", at(o.end), at(planned.end), same),
        ];
        let mut differ: Vec<String> = fields
            .iter()
            .filter(|(_, now, plan, eq)| !eq(now, plan))
            .map(|(field, now, plan, _)| format!("{field} {now} now, {plan} in the plan"))
            .collect();
        // Exactly, not as shown: a fee a fraction of a cent higher is another fee.
        if o.fee.amount() != planned.fee.amount() || o.fee.currency() != planned.fee.currency() {
            let exact = |m: &crate::domain::money::Money| format!("{} {}", m.amount().normalize(), m.currency());
            differ.push(format!("fee {} now, {} in the plan", exact(&o.fee), exact(&planned.fee)));
        }
        if differ.is_empty() { Ok(()) } else { Err(differ.join("; ")) }
    }
}

/// What a rule did with its choice.
struct Acted {
    chosen: Option<Priced>,
    action: Option<Outcome>,
}

/// What EC2 said of the regions in one run.
#[derive(Default)]
struct Findings {
    failed: BTreeMap<String, String>,
    unsupported: BTreeSet<String>,
    /// (region, type) -> EC2's message.
    not_sold: BTreeMap<(String, String), String>,
    /// (type, rule index) pairs, to name the rules in the alert.
    not_sold_rules: BTreeSet<(String, usize)>,
    /// (region, family) -> when its quota of 0 was first seen (the alert's identity), and the
    /// refusals that showed it.
    quota_zero: BTreeMap<(String, String), (DateTime<Utc>, Refusals)>,
    /// The questions (indices into the plan) whose answers go to the price history this run.
    history: BTreeSet<usize>,
    /// Member accounts whose watch lane failed -> the first failure.
    watch_failed: BTreeMap<String, String>,
    /// (account, region, family) newly noted refused on every call -> the refusals that did.
    member_refused: BTreeMap<(String, String, String), u32>,
    /// "account region family" of every member refused on every call of a family this run.
    watch_refused: BTreeSet<String>,
}

#[cfg(test)]
mod members;

#[cfg(test)]
mod replay;

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn rule(id: &str, types: &[&str], regions: usize) -> Rule {
        let regions = crate::domain::names::KNOWN_REGIONS[..regions].iter().map(|r| format!("\"{r}\""));
        let types = types.iter().map(|t| format!("\"{t}\""));
        let text = format!(
            "id = \"{id}\"\nregions = [{}]\ninstance_types = [{}]\ninstance_counts = [1, 2, 4]\ndurations_days = [1, 2, 7]\n\
             start_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
             max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"1000\"\n",
            regions.collect::<Vec<_>>().join(", "),
            types.collect::<Vec<_>>().join(", ")
        );
        Rule::from_toml(&text, now()).unwrap()
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
    }

    #[test]
    fn rules_that_would_push_the_scan_past_its_questions_are_left_out_whole() {
        // 14 regions x 2 types x 3 counts x 3 durations = 252 questions each.
        let rules = [
            rule("a", &["p5.48xlarge", "p5e.48xlarge"], 14),
            rule("b", &["p4d.24xlarge", "p4de.24xlarge"], 14),
            rule("c", &["trn1.32xlarge", "trn2.48xlarge"], 14),
            rule("d", &["p5en.48xlarge", "p6-b200.48xlarge"], 14),
            // 1008 so far: 252 more would pass 1024.
            rule("e", &["g6.48xlarge", "g6e.48xlarge"], 14),
            // Asks only what "a" asks: nothing new, so it stays.
            rule("same-as-a", &["p5.48xlarge"], 3),
            // 1 type x 1 region x 9 = 9 new: 1017, still within.
            rule("small", &["p3.16xlarge"], 1),
        ];
        let (all, skipped) = gather(&rules, now(), SCAN_BOUNDS);
        assert_eq!(skipped, vec![4], "only the rule that passes the bound is left out");
        assert_eq!(all.len(), 4 * 252 + 9);
        assert!(all.iter().all(|p| !p.rules.contains(&4)));
        let shared = all.iter().filter(|p| p.rules == vec![0, 5]).count();
        assert_eq!(shared, 3 * 9, "the shared questions are asked once for both rules");
        // Under the bound nothing is left out.
        let (all, skipped) = gather(&rules[..4], now(), SCAN_BOUNDS);
        assert!(skipped.is_empty());
        assert_eq!(all.len(), 1008);
    }

    #[test]
    fn rules_that_would_push_the_scan_past_its_regions_are_left_out_whole() {
        // Regions `from..to` of the known ones, one question each.
        let over = |id: &str, from: usize, to: usize| {
            let regions = crate::domain::names::KNOWN_REGIONS[from..to].iter().map(|r| format!("\"{r}\""));
            let text = format!(
                "id = \"{id}\"\nregions = [{}]\ninstance_types = [\"p5.48xlarge\"]\ninstance_counts = [1]\n\
                 durations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
                 max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"1000\"\n",
                regions.collect::<Vec<_>>().join(", ")
            );
            Rule::from_toml(&text, now()).unwrap()
        };
        let bounds = ScanBounds { questions: MAX_QUESTIONS_PER_SCAN, regions: 20 };
        let rules = [
            over("a", 0, 16),
            // 4 new: 20 regions, the bound.
            over("b", 12, 20),
            // 1 new: past it, left out whole though its other regions are visited anyway.
            over("c", 19, 21),
            // Only regions already visited: stays.
            over("d", 0, 3),
        ];
        let (all, skipped) = gather(&rules, now(), bounds);
        assert_eq!(skipped, vec![2]);
        let regions: BTreeSet<&Region> = all.iter().map(|p| &p.question.query.region).collect();
        assert_eq!(regions.len(), 20);
        assert!(all.iter().all(|p| !p.rules.contains(&2)));
        // The scan's own bound: 32 regions.
        assert_eq!(SCAN_BOUNDS.regions, 32);
    }

    /// An UltraServer rule asks with its UltraServers (type and count), under keys of their own.
    #[test]
    fn ultraserver_rules_ask_for_ultraservers() {
        let text = "id = \"u\"\nregions = [\"us-east-1\"]\nultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1, 2]\n\
                    durations_days = [1]\nstart_window = { earliest_in_days = 1, latest_in_days = 14 }\n\
                    max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"100000\"\n";
        let q = questions_for(&Rule::from_toml(text, now()).unwrap(), now());
        assert_eq!(q.len(), 2);
        assert!(q[0].key.starts_with("u-trn2x64|1u|1d|"), "{}", q[0].key);
        let u = q[1].query.ultraservers.expect("an UltraServer question");
        assert_eq!((u.kind.as_str(), u.count), ("u-trn2x64", 2));
        assert_eq!((q[1].query.instance_type.as_str(), q[1].query.instance_count), ("trn2u.48xlarge", 8));
        // Instance questions carry none.
        assert!(questions_for(&rule("a", &["p5.48xlarge"], 1), now()).iter().all(|q| q.query.ultraservers.is_none()));
    }
}
