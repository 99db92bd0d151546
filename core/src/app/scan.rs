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

use super::outbox::{FlushReport, alert_notice, flush};
use super::purchase::Outcome;
use super::reconcile::{Settled, settle_open_intents, settling_until};
use super::requests::request_rules;
use crate::domain::announce;
use crate::domain::budget::{Period, charges_for};
use crate::domain::catalog::AcceleratorCatalog;
use crate::domain::decision::Priced;
use crate::domain::ids::{InstanceType, Region};
use crate::domain::market_move;
use crate::domain::message_kind::MessageKind;
#[cfg(test)]
use crate::domain::offering::Offering;
use crate::domain::plan::{Candidate, DescribeBudget, Refusals, RegionMemory, family};
use crate::domain::request::TeamApproval;
use crate::domain::rule::{Ask, Mode, Rule, StartWindow};
use crate::domain::run_time::RunTime;
use crate::domain::stack::StackSettings;
use crate::ports::{
    BlockStore, InstanceTypeSource, Ledger, MarketMemory, MemberMarket, Notifier, ObservationStore, OfferingQuery,
    OfferingSource, Outbox, Purchaser, QuotaSource, RequestStore, ReservationSource, RuleStore, StoreError,
};

mod acting;
mod asking;
mod confirmed;
mod findings;
mod planning;
mod prices;
mod sighting;

pub use confirmed::Confirmed;

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
    /// Nothing chosen while the cheapest offering was within the threshold: why it was passed
    /// over, in words (`PassedOver::says`: a budget's room, `max_total_fee`, the start window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passed_over: Option<String>,
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
    /// People's requests this run (`Scanner::run_with_requests`): asked, approved on their own,
    /// refused by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<super::requests::RequestsReport>,
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

/// The questions a rule asks at `now`: one per region x family x count x duration, each over
/// the rule's whole start window (EC2 answers with its best offerings for the range), its
/// instance types of a family asked together, up to `TYPES_PER_QUESTION` a question (EC2's
/// `InstanceTypePreferences`, which also finds the offerings in segments of them; where EC2
/// does not take it, the adapter asks them one per call); one per UltraServer type and count.
pub fn questions_for(rule: &Rule, now: DateTime<Utc>) -> Vec<Question> {
    let (start_from, start_to) = rule.start_window.resolve(now);
    let mut out = Vec::new();
    if start_to <= start_from {
        return out;
    }
    let window = window_key(&rule.start_window);
    let asks = grouped_asks(rule);
    for region in &rule.regions {
        for (ask, also_types) in &asks {
            for &days in &rule.durations_days {
                // An UltraServer question has a key of its own: the same instances asked as
                // instances are another question (and EC2 answers it differently).
                let what = match &ask.ultraservers {
                    Some(u) => format!("{}|{}u", u.kind, u.count),
                    None => {
                        let types: Vec<&str> =
                            std::iter::once(&ask.instance_type).chain(also_types).map(|t| t.as_str()).collect();
                        format!("{}|{}", types.join("+"), ask.instance_count)
                    }
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
                        also_types: also_types.clone(),
                    },
                });
            }
        }
    }
    out
}

/// Instance types one question asks at most: EC2's limit on `InstanceTypePreferences`.
pub const TYPES_PER_QUESTION: usize = 10;

/// A rule's asks with the instance types of one count and one family grouped,
/// `TYPES_PER_QUESTION` at most a group: each group's first ask and the other types asked with
/// it. UltraServer asks alone. Only one family a question: EC2 refuses a family whose quota is
/// 0 on every call and says a type is not sold by refusing the question, and the scan learns
/// both per question (its first type's family); a question of several families would lose the
/// other families' answers to one family's refusals.
fn grouped_asks(rule: &Rule) -> Vec<(Ask, Vec<InstanceType>)> {
    let mut out: Vec<(Ask, Vec<InstanceType>)> = Vec::new();
    for ask in rule.asks() {
        let group = out.iter_mut().find(|(first, also)| {
            ask.ultraservers.is_none()
                && first.ultraservers.is_none()
                && first.instance_count == ask.instance_count
                && family(first.instance_type.as_str()) == family(ask.instance_type.as_str())
                && also.len() + 1 < TYPES_PER_QUESTION
        });
        match group {
            Some((_, also)) => also.push(ask.instance_type),
            None => out.push((ask, Vec::new())),
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
    pub members: &'a [MemberMarket],
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
    /// The regions this run claimed the asking of (`MarketMemory::claim_region`), given back
    /// when its memory is saved.
    claimed: Vec<Region>,
}

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

    /// [`Scanner::run_until`] with people's requests beside the rules (`app::requests`): the
    /// approved ones are asked and bought as one-shot rules, after every rule, so within the
    /// scan's bounds a rule's questions come first; `teams` are the teams' approval settings.
    /// A replay reads them and writes nothing.
    pub async fn run_with_requests(
        &self,
        at: RunTime,
        until: Option<Instant>,
        teams: &BTreeMap<String, TeamApproval>,
    ) -> Result<ScanReport, StoreError>
    where
        S: RequestStore,
    {
        let mut rules: Vec<Rule> =
            self.store.list_rules().await?.into_iter().map(|s| s.rule).filter(|r| r.enabled).collect();
        let (asked, requests) = request_rules(self.store, teams, at.clock(), !at.is_replay()).await?;
        rules.extend(asked);
        let mut report = self.scan(&rules, at, until, None).await?;
        report.requests = Some(requests);
        Ok(report)
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
        let (answered, on_sight) = self.ask_on_sight(rules, &mut plan, &mut findings, at, confirmed).await;
        let on_sight = on_sight?;
        if !at.is_replay() {
            let remembered = self.remember(&plan, &findings, rules, now).await;
            self.release_claims(&plan.claimed, &run).await;
            remembered?;
        }
        let (observations_written, prices) = self.record_prices(&answered, &findings.history, at).await;
        let outcomes = self.decide_and_act(rules, &plan, &answered, on_sight, at, confirmed).await?;
        let market_notes = self.market_notes(rules, &plan, at).await;
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
            requests: None,
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

    /// The market's moves in the rules' regions due for a check, each told once in the rule's
    /// thread (`app::market_move`); none in a replay.
    async fn market_notes(&self, rules: &[Rule], plan: &Plan, at: RunTime) -> Vec<String> {
        if at.is_replay() {
            return Vec::new();
        }
        let now = at.clock();
        // What this run recorded is in the history it reads back (`domain::market_move`).
        let due: BTreeSet<Region> = plan
            .read
            .iter()
            .filter(|(_, m)| market_move::due(m.coverage.as_ref().map(|w| w.at), now))
            .map(|(r, _)| r.clone())
            .collect();
        // Notes only: a store failure here must not fail a scan that may have bought.
        super::market_move::check(self.store, rules, &due, now).await.unwrap_or_else(|e| {
            tracing::warn!(event = "market_check_failed", error = %e, "market moves not checked this run");
            Vec::new()
        })
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
            match charges_for(rule, &budgets, &Period::budget_month(now)) {
                Ok(_) => kept.push(rule.clone()),
                Err(e) => {
                    tracing::warn!(event = "team_unbudgeted", rule = %rule.id, team = %e.team, "{e}");
                    if !at.is_replay() {
                        let month = Period::budget_month(now);
                        let milestone =
                            MessageKind::TeamUnbudgeted.outbox_key(Some(&format!("{}-{}", e.team, month.as_str())))?;
                        let msg = announce::team_unbudgeted(&e.rule, &e.team, &budgets);
                        self.store.enqueue(&alert_notice(&format!("rule-{}", rule.id), &milestone, &msg, now)).await?;
                    }
                    refused.insert(e.rule, e.team);
                }
            }
        }
        Ok((kept, refused))
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
mod tests {
    use chrono::TimeZone;

    use super::*;

    mod members;
    mod replay;

    fn rule(id: &str, types: &[&str], regions: usize) -> Rule {
        let regions = crate::domain::ids::KNOWN_REGIONS[..regions].iter().map(|r| format!("\"{r}\""));
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
        // 14 regions x 3 counts x 3 durations = 126 questions each (a rule's types are asked
        // together).
        let types = [
            "p5.48xlarge",
            "p4d.24xlarge",
            "p4de.24xlarge",
            "trn1.32xlarge",
            "trn2.48xlarge",
            "p5en.48xlarge",
            "p6-b200.48xlarge",
            "p5e.48xlarge",
        ];
        let mut rules: Vec<Rule> = types.iter().enumerate().map(|(i, t)| rule(&format!("r{i}"), &[t], 14)).collect();
        // 1008 so far: 126 more would pass 1024.
        rules.push(rule("e", &["g6.48xlarge", "g6e.48xlarge"], 14));
        // Asks only what the first asks: nothing new, so it stays.
        rules.push(rule("same-as-a", &["p5.48xlarge"], 3));
        // 1 type x 1 region x 9 = 9 new: 1017, still within.
        rules.push(rule("small", &["p3.16xlarge"], 1));
        let (all, skipped) = gather(&rules, now(), SCAN_BOUNDS);
        assert_eq!(skipped, vec![8], "only the rule that passes the bound is left out");
        assert_eq!(all.len(), 8 * 126 + 9);
        assert!(all.iter().all(|p| !p.rules.contains(&8)));
        let shared = all.iter().filter(|p| p.rules == vec![0, 9]).count();
        assert_eq!(shared, 3 * 9, "the shared questions are asked once for both rules");
        // Under the bound nothing is left out.
        let (all, skipped) = gather(&rules[..8], now(), SCAN_BOUNDS);
        assert!(skipped.is_empty());
        assert_eq!(all.len(), 1008);
    }

    /// A rule's types of one family and count are one question: 2 p5 sizes and p4d with 2
    /// counts over one region and duration make 4 questions, not 6; ten types at most a question.
    #[test]
    fn a_rules_types_of_a_family_are_asked_together() {
        let text = "id = \"wide\"\nregions = [\"us-east-1\"]\n\
             instance_types = [\"p5.48xlarge\", \"p4d.24xlarge\", \"p5.4xlarge\"]\ninstance_counts = [1, 2]\n\
             durations_days = [1]\nstart_window = { earliest_in_days = 1, latest_in_days = 14 }\n\
             max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"1000\"\n";
        let qs = questions_for(&Rule::from_toml(text, now()).unwrap(), now());
        let asked: Vec<(String, u32)> = qs
            .iter()
            .map(|q| {
                let types: Vec<&str> = q.query.types().iter().map(|t| t.as_str()).collect();
                (types.join("+"), q.query.instance_count)
            })
            .collect();
        let want =
            [("p5.48xlarge+p5.4xlarge", 1), ("p5.48xlarge+p5.4xlarge", 2), ("p4d.24xlarge", 1), ("p4d.24xlarge", 2)];
        assert_eq!(asked, want.map(|(t, n)| (t.to_string(), n)));
        assert!(qs[0].key.starts_with("p5.48xlarge+p5.4xlarge|1|"), "{}", qs[0].key);
        assert_eq!(qs[2].key, "p4d.24xlarge|1|1d|in24h-336h", "a question of one type keeps its key");
        assert_eq!(TYPES_PER_QUESTION, 10);
    }

    #[test]
    fn rules_that_would_push_the_scan_past_its_regions_are_left_out_whole() {
        // Regions `from..to` of the known ones, one question each.
        let over = |id: &str, from: usize, to: usize| {
            let regions = crate::domain::ids::KNOWN_REGIONS[from..to].iter().map(|r| format!("\"{r}\""));
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
