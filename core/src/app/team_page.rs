//! What the team page shows (`capblock-page` renders it; `capblock page` and the tracker write
//! it): everything read from the store once, at one instant, so the renderer stays a pure
//! function of this value. The figures come from the domain's own computations (the month's
//! report, usage and idle cost, budgets' charges), never recomputed by the page.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::report::{self, Month};
use crate::domain::block::Block;
use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period};
use crate::domain::checkpoint::DEFAULT_REMINDER_LEAD_MINUTES;
use crate::domain::extension::ExtensionIntent;
use crate::domain::ids::{InstanceType, Region};
use crate::domain::list_price::RateBook;
use crate::domain::money::Money;
use crate::domain::rule::Rule;
use crate::ports::{
    BlockArchive, ExtensionLedger, Ledger, Observation, ObservationStore, RateStore, RuleStore, SettingsStore,
    StoreError,
};

/// How far back the page's price history and market section look.
pub const HISTORY_DAYS: i64 = 90;
/// How far ahead the calendar looks.
pub const CALENDAR_WEEKS: i64 = 8;

/// One block with its extensions, as the calendar and the use section show it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageBlock {
    pub block: Block,
    pub extensions: Vec<ExtensionIntent>,
    /// The rule's team (its `team`, else its `team` tag), if any.
    pub team: Option<String>,
    /// Who the rule shares its blocks with (RAM principals), as written in the rule.
    pub shared_with: Vec<String>,
}

/// One budget's month: what its item counts against its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct PageBudget {
    pub owner: BudgetOwner,
    /// None: no limit set (an account without `AccountBudget`, an unlimited rule).
    pub limit: Option<Money>,
    /// None: nothing charged this month yet.
    pub usage: Option<BudgetUsage>,
}

/// Every price seen for one region and instance type over the history window, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceSeries {
    pub region: Region,
    pub instance_type: InstanceType,
    pub observations: Vec<Observation>,
}

/// Everything the team page shows, read at `now`.
#[derive(Debug, Clone)]
pub struct TeamData {
    pub now: DateTime<Utc>,
    /// The stack's name as its functions stored it (None before any function ran).
    pub stack: Option<String>,
    /// The budget month `now` falls in.
    pub period: Period,
    pub rules: Vec<Rule>,
    /// Every block the table holds, final ones included (the calendar picks its window).
    pub blocks: Vec<PageBlock>,
    /// The account's budget first, then each team's, then each rule's.
    pub budgets: Vec<PageBudget>,
    /// Decisions waiting for a person's approval, not yet expired or bought.
    pub approvals: Vec<Intent>,
    /// One series per (region, type) some rule asks about, over the last `HISTORY_DAYS`.
    pub prices: Vec<PriceSeries>,
    /// The month's report (`capblock report`).
    pub month: Month,
    /// Reminders before a block's end, minutes (the stack's default leads).
    pub reminder_lead_minutes: Vec<u32>,
    /// The list rates: the published table and the operator's announced ones.
    pub rates: RateBook,
}

/// Each region and type some rule's offerings are priced by, once. The types are those that
/// price each rule's offerings: an UltraServer rule names no instance type, but its offerings
/// are of its UltraServers' type, and their history is kept under it.
fn priced_pairs(rules: &[Rule]) -> Vec<(Region, InstanceType)> {
    let mut pairs: Vec<(Region, InstanceType)> = rules
        .iter()
        .flat_map(|r| {
            let types = r.priced_types();
            r.regions.iter().flat_map(move |g| types.clone().into_iter().map(move |t| (g.clone(), t)))
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

/// Reads what the page shows from the store at `now`. A table scan of the blocks: for people
/// and the hourly page, never a run's hot path.
pub async fn gather<S>(store: &S, now: DateTime<Utc>) -> Result<TeamData, StoreError>
where
    S: RuleStore + Ledger + BlockArchive + ExtensionLedger + ObservationStore + SettingsStore + RateStore + ?Sized,
{
    let period = Period::budget_month(now);
    let settings = store.stored_settings().await?;
    let stack_budgets = settings.as_ref().map(|s| s.stack.budgets()).unwrap_or_default();
    let mut rules: Vec<Rule> = store.list_rules().await?.into_iter().map(|r| r.rule).collect();
    rules.sort_by(|a, b| a.id.cmp(&b.id));
    let by_id: BTreeMap<&str, &Rule> = rules.iter().map(|r| (r.id.as_str(), r)).collect();

    let mut blocks = Vec::new();
    for block in store.all_blocks().await? {
        // Left out as the month's report leaves it out, which names it in `month.skipped`.
        let extensions = report::extensions_shown(store, &block, &mut Vec::new()).await?;
        let rule = block.rule_id.as_deref().and_then(|id| by_id.get(id));
        let team = rule.and_then(|r| crate::domain::report::team_of(r)).map(str::to_string);
        let shared_with = rule.map(|r| r.share_with.iter().cloned().map(String::from).collect()).unwrap_or_default();
        blocks.push(PageBlock { block, extensions, team, shared_with });
    }
    blocks.sort_by(|a, b| (a.block.start, &a.block.reservation_id).cmp(&(b.block.start, &b.block.reservation_id)));

    let mut budgets = vec![PageBudget {
        owner: BudgetOwner::Account,
        limit: stack_budgets.account,
        usage: store.usage(&BudgetOwner::Account, &period).await?,
    }];
    for (team, limit) in &stack_budgets.teams {
        let owner = BudgetOwner::Team(team.clone());
        let usage = store.usage(&owner, &period).await?;
        budgets.push(PageBudget { owner, limit: Some(*limit), usage });
    }
    for r in &rules {
        let owner = BudgetOwner::Rule(r.id.clone());
        let usage = store.usage(&owner, &period).await?;
        budgets.push(PageBudget { owner, limit: (!r.unlimited).then_some(r.monthly_budget), usage });
    }

    let approvals = super::approvals::waiting(store, &rules, now).await?;

    let mut prices = Vec::new();
    for (region, instance_type) in priced_pairs(&rules) {
        let mut observations = store.history(&region, &instance_type, now - Duration::days(HISTORY_DAYS), now).await?;
        observations.sort_by(|a, b| (a.seen_at, &a.offering.id).cmp(&(b.seen_at, &b.offering.id)));
        prices.push(PriceSeries { region, instance_type, observations });
    }

    let month = report::month(store, &period, &stack_budgets.teams).await?;
    Ok(TeamData {
        now,
        stack: settings.map(|s| s.stack.name),
        period,
        rules,
        blocks,
        budgets,
        approvals,
        prices,
        month,
        reminder_lead_minutes: DEFAULT_REMINDER_LEAD_MINUTES.to_vec(),
        rates: RateBook::with_announced(store.announced_rates().await?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::fixtures::{offering, rule, sent_intent, t0};
    use crate::memory::MemoryTable;

    #[tokio::test]
    async fn only_the_approvals_still_waiting_are_gathered() {
        let r = rule("p5-weekly", "approval");
        let now = t0() + Duration::hours(30);
        // Each a block of its own (another start): a block is asked about once.
        let asked = |id: &str, at: DateTime<Utc>, day: i64| {
            Intent::new(&r.id, offering(id, t0() + Duration::days(day)), 8, vec![], at)
        };
        let fresh = asked("cb-fresh", now - Duration::hours(1), 5);
        let expired = asked("cb-expired", now - Duration::hours(25), 6);
        let bought = asked("cb-bought", now - Duration::hours(2), 7);
        let store = MemoryTable::default().with_rules([r.clone()]).with_intents([sent_intent(
            &r,
            bought.offering.clone(),
            now - Duration::hours(1),
        )]);
        for a in [&fresh, &expired, &bought] {
            assert!(store.record_approval(a).await.unwrap());
        }
        let data = gather(&store, now).await.unwrap();
        let ids: Vec<&str> = data.approvals.iter().map(|a| a.offering.id.as_str()).collect();
        assert_eq!(ids, ["cb-fresh"], "an expired approval and a bought one are not waiting");
        // Bought under the id EC2 gave the block in a later answer: the approval was consumed.
        let renamed = Intent {
            approval: Some(crate::domain::budget::Approved::of(&fresh)),
            ..Intent::new(&r.id, offering("cb-renamed", fresh.offering.start), 8, vec![], now)
        };
        let other = MemoryTable::default().with_rules([r.clone()]);
        other.record_approval(&fresh).await.unwrap();
        assert_eq!(gather(&other, now).await.unwrap().approvals, std::slice::from_ref(&fresh));
        other.reserve(&renamed, 0).await.unwrap();
        assert!(gather(&other, now).await.unwrap().approvals.is_empty(), "a consumed approval waits no more");
        // Budgets: the account's first, then the rule's with its limit.
        assert_eq!(data.budgets[0].owner, BudgetOwner::Account);
        assert!(
            data.budgets
                .iter()
                .any(|b| b.owner == BudgetOwner::Rule(r.id.clone()) && b.limit == Some(r.monthly_budget))
        );
        // A price series for each region and type the rule asks about.
        assert_eq!(data.prices.len(), 1);
        assert_eq!(data.period, Period::budget_month(now));
    }

    /// An UltraServer rule names UltraServer types, not instance types: the history of its
    /// UltraServers' instance type is gathered for its chart all the same.
    #[tokio::test]
    async fn an_ultraserver_rules_prices_are_gathered() {
        let text = "id = \"trn2-ultra\"\nmode = \"live\"\nregions = [\"us-east-1\"]\nultraserver_types = [\"u-trn2x64\"]\n\
                    ultraserver_counts = [1]\ndurations_days = [2]\nstart_window = { earliest_in_days = 2, latest_in_days = 10 }\n\
                    max_price_per_accelerator_hour = \"2.00\"\nmonthly_budget = \"12000\"\n";
        let r = Rule::from_toml(text, t0()).unwrap();
        let now = t0() + Duration::hours(30);
        let mut o = offering("cb-ultra", t0() + Duration::days(3));
        o.instance_type = "trn2u.48xlarge".parse().unwrap();
        o.instance_count = 4;
        o.ultraserver = true;
        let store = MemoryTable::default().with_rules([r]);
        let seen = Observation { offering: o, accelerators_per_instance: 16, seen_at: now - Duration::hours(2) };
        store.record(std::slice::from_ref(&seen)).await.unwrap();
        let data = gather(&store, now).await.unwrap();
        let series: Vec<String> = data.prices.iter().map(|p| format!("{} {}", p.region, p.instance_type)).collect();
        assert_eq!(series, ["us-east-1 trn2u.48xlarge"], "the UltraServers' type is asked for its history");
        assert_eq!(data.prices[0].observations, [seen]);
    }

    /// One extension item that does not decode stops neither the page (`capblock page`, the
    /// tracker's hourly one) nor the month's report (`capblock report`, `capblock status`): the
    /// block's extensions are left out and said to be, while the extender's strict read of
    /// them (its `max_days`) still fails on it.
    #[tokio::test]
    async fn a_corrupt_extension_item_is_named_and_left_out_not_fatal() {
        let r = rule("p5-weekly", "live");
        let now = t0() + Duration::hours(30);
        let intent = sent_intent(&r, offering("cb-1", t0() + Duration::days(2)), t0());
        let block = Block::bought(&intent, &crate::app::fixtures::reservation_of(&intent, "cr-1"), t0());
        let store = MemoryTable::default()
            .with_rules([r.clone()])
            .with_blocks([block])
            .with_corrupt_extension("cr-1", "cbx-bad");
        let data = gather(&store, now).await.unwrap();
        assert_eq!(data.blocks.len(), 1, "the block is shown");
        assert!(data.blocks[0].extensions.is_empty());
        assert_eq!(data.month.skipped.len(), 1, "{:?}", data.month.skipped);
        assert!(data.month.skipped[0].contains("BLOCK#cr-1/EXT#cbx-bad"), "{}", data.month.skipped[0]);
        let month = report::month(&store, &Period::budget_month(now), &BTreeMap::new()).await.unwrap();
        assert_eq!(month.skipped, data.month.skipped);
        let page = crate::app::publish::team_page(&store, now, |d| d.month.skipped.join("\n")).await.unwrap();
        assert!(page.contains("does not decode"), "{page}");
        // The money path stays strict.
        let strict = store.extensions_of("cr-1").await.unwrap_err();
        assert!(matches!(strict, StoreError::Corrupt { .. }), "{strict:?}");
    }
}
