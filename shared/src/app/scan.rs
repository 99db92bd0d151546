//! One scan: settle open intents, ask the market for every rule's offerings (concurrently,
//! bounded per region), store the prices seen, decide per rule, buy or announce, and publish
//! pending notices.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::fan_out::fan_out;
use super::outbox::{FlushReport, flush};
use super::purchase::{Action, Buyer};
use super::reconcile::{Settled, settle_open_intents};
use crate::domain::budget::{BudgetOwner, Period};
use crate::domain::catalog::AcceleratorCatalog;
use crate::domain::decision::{Headroom, Priced, decide, room};
use crate::domain::money::Money;
use crate::domain::names::{InstanceType, Region};
use crate::domain::offering::Offering;
use crate::domain::rule::{Mode, Rule};
use crate::ports::{
    BlockStore, InstanceTypeSource, Ledger, MarketError, Notifier, Observation, ObservationStore, OfferingQuery,
    OfferingSource, Outbox, Purchaser, ReservationSource, RuleStore, StoreError,
};

/// How many offerings one rule may try in one scan when the best ones were tried before.
const MAX_ALTERNATIVES: usize = 5;

/// Settings read once from the environment by the function's `main`.
#[derive(Debug, Clone)]
pub struct ScanSettings {
    /// The stack name, written to every purchase's `capblock:stack` tag.
    pub stack: String,
    /// The stack-wide mode: a dry-run stack never buys, whatever its rules say.
    pub mode: Mode,
    /// Account-wide monthly limit across all rules, if any.
    pub account_budget: Option<Money>,
    /// Concurrent DescribeCapacityBlockOfferings calls per region.
    pub region_concurrency: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleOutcome {
    pub rule_id: String,
    pub mode: Mode,
    pub offerings_seen: usize,
    pub eligible: usize,
    pub chosen: Option<Priced>,
    pub action: Option<Action>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScanReport {
    pub now: DateTime<Utc>,
    pub rules: usize,
    pub queries: usize,
    pub offerings_seen: usize,
    pub observations_written: usize,
    pub failed_regions: BTreeMap<String, String>,
    pub unsupported_regions: BTreeSet<String>,
    pub settled: Vec<Settled>,
    pub outcomes: Vec<RuleOutcome>,
    pub notices: FlushReport,
}

/// The queries a rule asks for at `now`.
pub fn queries_for(rule: &Rule, now: DateTime<Utc>) -> Vec<OfferingQuery> {
    let (start_from, start_to) = rule.start_window.resolve(now);
    let mut out = Vec::new();
    if start_to <= start_from {
        return out;
    }
    for region in &rule.regions {
        for instance_type in &rule.instance_types {
            for &instance_count in &rule.instance_counts {
                for &days in &rule.durations_days {
                    out.push(OfferingQuery {
                        region: region.clone(),
                        instance_type: instance_type.clone(),
                        instance_count,
                        duration_hours: days * 24,
                        start_from,
                        start_to,
                    });
                }
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

/// What `rule` may still spend in the current period: the smaller of its own room and the
/// account's.
async fn headroom<L: Ledger + ?Sized>(
    ledger: &L,
    rule: &Rule,
    account_budget: Option<Money>,
    now: DateTime<Utc>,
) -> Result<Headroom, StoreError> {
    let period = Period::of(now);
    let committed =
        |u: Option<crate::domain::budget::BudgetUsage>, cur| u.map(|u| u.committed).unwrap_or(Money::zero(cur));
    let own = room(
        rule.monthly_budget,
        committed(ledger.usage(&BudgetOwner::Rule(rule.id.clone()), &period).await?, rule.currency),
    );
    let mut h = own;
    if let Some(limit) = account_budget {
        let acct = room(limit, committed(ledger.usage(&BudgetOwner::Account, &period).await?, limit.currency()));
        if acct.amount() < h.amount() {
            h = acct;
        }
    }
    Ok(Headroom(h))
}

pub struct Scanner<'a, M: ?Sized, S: ?Sized, N: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub notifier: &'a N,
    pub catalog: &'a Mutex<AcceleratorCatalog>,
    pub settings: &'a ScanSettings,
}

impl<M, S, N> Scanner<'_, M, S, N>
where
    M: OfferingSource + InstanceTypeSource + Purchaser + ReservationSource + ?Sized,
    S: RuleStore + Ledger + BlockStore + ObservationStore + Outbox + ?Sized,
    N: Notifier + ?Sized,
{
    /// Runs one scan over every enabled rule in the store.
    pub async fn run(&self, now: DateTime<Utc>) -> Result<ScanReport, StoreError> {
        let rules: Vec<Rule> =
            self.store.list_rules().await?.into_iter().map(|s| s.rule).filter(|r| r.enabled).collect();
        self.run_rules(&rules, now).await
    }

    pub async fn run_rules(&self, rules: &[Rule], now: DateTime<Utc>) -> Result<ScanReport, StoreError> {
        // Unknown outcomes first: an unresolved intent blocks its rule, and a block bought by a
        // run that died must be on the books before anyone decides to buy more.
        let settled = settle_open_intents(self.store, self.market, now).await?;

        let mut wanted: BTreeMap<Region, BTreeSet<InstanceType>> = BTreeMap::new();
        for r in rules {
            for region in &r.regions {
                wanted.entry(region.clone()).or_default().extend(r.instance_types.iter().cloned());
            }
        }
        learn_accelerators(self.market, self.catalog, &wanted).await;

        // One query per distinct question, shared by the rules that ask it.
        let per_rule: Vec<Vec<OfferingQuery>> = rules.iter().map(|r| queries_for(r, now)).collect();
        let distinct: Vec<OfferingQuery> =
            per_rule.iter().flatten().cloned().collect::<std::collections::HashSet<_>>().into_iter().collect();
        let answers = fan_out(self.market, &distinct, self.settings.region_concurrency).await;

        let mut failed_regions = BTreeMap::new();
        let mut unsupported_regions = BTreeSet::new();
        let mut by_query: HashMap<&OfferingQuery, Vec<Offering>> = HashMap::new();
        for (q, a) in distinct.iter().zip(answers) {
            match a {
                Ok(list) => {
                    by_query.insert(q, list);
                }
                Err(MarketError::Unsupported { .. }) => {
                    unsupported_regions.insert(q.region.to_string());
                }
                Err(e) => {
                    failed_regions.entry(q.region.to_string()).or_insert_with(|| e.to_string());
                }
            }
        }
        for (region, error) in &failed_regions {
            tracing::warn!(event = "region_failed", %region, %error, "region skipped this scan");
        }
        for region in &unsupported_regions {
            tracing::info!(event = "region_unsupported", %region, "region does not sell Capacity Blocks");
        }

        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut seen: HashMap<&str, &Offering> = HashMap::new();
        for o in by_query.values().flatten() {
            seen.insert(o.id.as_str(), o);
        }
        let observations: Vec<Observation> = seen
            .values()
            .filter_map(|o| {
                Some(Observation {
                    accelerators_per_instance: catalog.accelerators(&o.instance_type)?,
                    offering: (*o).clone(),
                    seen_at: now,
                })
            })
            .collect();
        let observations_written = match self.store.record(&observations).await {
            Ok(n) => n,
            Err(e) => {
                // Price history is for people; a failure here must not stop a purchase.
                tracing::warn!(event = "observations_failed", error = %e, "price history not written");
                0
            }
        };

        let buyer = Buyer {
            market: self.market,
            store: self.store,
            stack: &self.settings.stack,
            account_budget: self.settings.account_budget,
        };
        let mut outcomes = Vec::new();
        for (rule, queries) in rules.iter().zip(&per_rule) {
            let offerings: Vec<Offering> = queries.iter().filter_map(|q| by_query.get(q)).flatten().cloned().collect();
            let room = headroom(self.store, rule, self.settings.account_budget, now).await?;
            let decision = decide(rule, &offerings, &catalog, room, now);
            let mode = self.settings.mode.and(rule.mode);
            let mut chosen = decision.chosen.clone();
            let action = match &decision.chosen {
                None => None,
                Some(_) if mode == Mode::Live => {
                    // The best offering may already have been tried by this rule (refused, or
                    // abandoned before sending): take the next cheapest, a few at most.
                    let mut last = None;
                    for p in decision.ranked.iter().take(MAX_ALTERNATIVES) {
                        chosen = Some(p.clone());
                        let action = buyer.live(rule, p, now).await?;
                        let tried = matches!(action, Action::AlreadyTried { .. });
                        last = Some(action);
                        if !tried {
                            break;
                        }
                    }
                    last
                }
                Some(p) if mode == Mode::Approval => Some(buyer.ask(rule, p, now).await?),
                Some(p) => Some(buyer.dry_run(rule, p, self.settings.mode, now).await?),
            };
            tracing::info!(event = "decision", rule = %rule.id, mode = mode.as_str(), offerings = offerings.len(), eligible = decision.eligible,
                chosen = ?decision.chosen.as_ref().map(|p| &p.offering.id), action = ?action, "rule evaluated");
            outcomes.push(RuleOutcome {
                rule_id: rule.id.clone(),
                mode,
                offerings_seen: offerings.len(),
                eligible: decision.eligible,
                chosen,
                action,
            });
        }

        let notices = flush(self.store, self.notifier, now).await?;
        Ok(ScanReport {
            now,
            rules: rules.len(),
            queries: distinct.len(),
            offerings_seen: seen.len(),
            observations_written,
            failed_regions,
            unsupported_regions,
            settled,
            outcomes,
            notices,
        })
    }
}
