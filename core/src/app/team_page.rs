//! What the team page shows (`capblock-page` renders it; `capblock page` and the tracker write
//! it): everything read from the store once, at one instant, so the renderer stays a pure
//! function of this value. The figures come from the domain's own computations (the month's
//! report, usage and idle cost, budgets' charges), never recomputed by the page.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::report::{self, Month};
use super::requests::{cheapest_observed, read_requests};
use crate::domain::block::Block;
use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period};
use crate::domain::checkpoint::DEFAULT_REMINDER_LEAD_MINUTES;
use crate::domain::extension::ExtensionIntent;
use crate::domain::ids::{InstanceType, Region};
use crate::domain::list_price::RateBook;
use crate::domain::money::Money;
use crate::domain::request::{Request, RequestDecision, RequestState, TeamApproval};
use crate::domain::rule::Rule;
use crate::ports::{
    BlockArchive, ExtensionLedger, Ledger, Observation, ObservationStore, RateStore, RequestStore, RuleStore,
    SettingsStore, StoreError,
};

/// How far back the page's price history and market section look.
pub const HISTORY_DAYS: i64 = 90;
/// How far ahead the calendar looks.
pub const CALENDAR_WEEKS: i64 = 8;
/// The most requests the page lists open, and the most closed: the newest; the rest are counted
/// (`capblock requests list` lists them all).
pub const SHOWN_REQUESTS: usize = 20;

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

/// One person's request as the page shows it: the item as the scan reads and checks it
/// (`app::requests::read_requests`), and what its state points at.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRequest {
    pub request: Request,
    pub decision: Option<RequestDecision>,
    /// Where it stands, or why the scan refuses its item (a `RequestError`, in words).
    pub state: Result<RequestState, String>,
    /// A bought one's blocks (the purchase that consumed its approval), once tracked.
    pub blocks: Vec<Block>,
    /// An expired one's cheapest offering seen since it was filed, if any was.
    pub cheapest: Option<Observation>,
}

impl PageRequest {
    /// Filed or approved: still to be decided or bought.
    pub fn is_open(&self) -> bool {
        matches!(self.state, Ok(RequestState::Filed | RequestState::Approved))
    }
}

/// How many requests stand where, all of them (the page lists the newest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub filed: usize,
    pub approved: usize,
    pub bought: usize,
    pub expired: usize,
    pub rejected: usize,
    pub cancelled: usize,
    /// Items the scan refuses (forged, changed since approved, an approver not allowed).
    pub refused: usize,
}

impl RequestCounts {
    pub fn open(&self) -> usize {
        self.filed + self.approved
    }

    pub fn closed(&self) -> usize {
        self.bought + self.expired + self.rejected + self.cancelled + self.refused
    }

    fn count(&mut self, state: &Result<RequestState, String>) {
        let n = match state {
            Ok(RequestState::Filed) => &mut self.filed,
            Ok(RequestState::Approved) => &mut self.approved,
            Ok(RequestState::Bought { .. }) => &mut self.bought,
            Ok(RequestState::Expired) => &mut self.expired,
            Ok(RequestState::Rejected { .. }) => &mut self.rejected,
            Ok(RequestState::Cancelled) => &mut self.cancelled,
            Err(_) => &mut self.refused,
        };
        *n += 1;
    }
}

/// The requests the page shows: the newest open ones and the newest closed ones, each at most
/// `SHOWN_REQUESTS`, and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageRequests {
    /// Filed or approved, newest first.
    pub open: Vec<PageRequest>,
    /// Bought, expired, rejected, cancelled or refused, newest first.
    pub closed: Vec<PageRequest>,
    pub counts: RequestCounts,
    /// Each team's approval settings (`TeamApprovals`): who may approve a waiting request.
    pub teams: BTreeMap<String, TeamApproval>,
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
    /// People's requests (`capblock request`), the newest of each kind.
    pub requests: PageRequests,
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

/// Every request, checked as the scan checks it against `teams` (the stack's `TeamApprovals`),
/// counted; the newest `SHOWN_REQUESTS` open and closed kept, each with its bought blocks (from
/// `blocks`) or, expired, its cheapest offering seen.
async fn page_requests<S>(
    store: &S,
    teams: &BTreeMap<String, TeamApproval>,
    blocks: &[PageBlock],
    now: DateTime<Utc>,
) -> Result<PageRequests, StoreError>
where
    S: RequestStore + ObservationStore + ?Sized,
{
    let mut all = read_requests(store, teams, now).await?;
    all.sort_by(|a, b| (b.request.filed_at, &b.request.id).cmp(&(a.request.filed_at, &a.request.id)));
    let mut shown = PageRequests { teams: teams.clone(), ..Default::default() };
    for c in all {
        let state = c.state.map_err(|e| e.to_string());
        shown.counts.count(&state);
        let mut r = PageRequest { request: c.request, decision: c.decision, state, blocks: vec![], cheapest: None };
        let list = if r.is_open() { &mut shown.open } else { &mut shown.closed };
        if list.len() >= SHOWN_REQUESTS {
            continue;
        }
        match &r.state {
            Ok(RequestState::Bought { intent }) => {
                r.blocks = blocks
                    .iter()
                    .filter(|b| b.block.intent_id.as_deref() == Some(intent.as_str()))
                    .map(|b| b.block.clone())
                    .collect();
            }
            Ok(RequestState::Expired) => r.cheapest = cheapest_observed(store, &r.request, now).await?,
            _ => {}
        }
        list.push(r);
    }
    Ok(shown)
}

/// The store ports the team page is read from (`gather`), named once for every caller.
pub trait PageStore:
    RuleStore + Ledger + BlockArchive + ExtensionLedger + ObservationStore + SettingsStore + RequestStore + RateStore
{
}

impl<T> PageStore for T where
    T: RuleStore
        + Ledger
        + BlockArchive
        + ExtensionLedger
        + ObservationStore
        + SettingsStore
        + RequestStore
        + RateStore
        + ?Sized
{
}

/// Reads what the page shows from the store at `now`, people's requests judged by `teams` (the
/// stack's `TeamApprovals`, as the scan judges them). A table scan of the blocks: for people
/// and the hourly page, never a run's hot path.
pub async fn gather<S>(
    store: &S,
    now: DateTime<Utc>,
    teams: &BTreeMap<String, TeamApproval>,
) -> Result<TeamData, StoreError>
where
    S: PageStore + ?Sized,
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
    let requests = page_requests(store, teams, &blocks, now).await?;
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
        requests,
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
        let data = gather(&store, now, &BTreeMap::new()).await.unwrap();
        let ids: Vec<&str> = data.approvals.iter().map(|a| a.offering.id.as_str()).collect();
        assert_eq!(ids, ["cb-fresh"], "an expired approval and a bought one are not waiting");
        // Bought under the id EC2 gave the block in a later answer: the approval was consumed.
        let renamed = Intent {
            approval: Some(crate::domain::budget::Approved::of(&fresh)),
            ..Intent::new(&r.id, offering("cb-renamed", fresh.offering.start), 8, vec![], now)
        };
        let other = MemoryTable::default().with_rules([r.clone()]);
        other.record_approval(&fresh).await.unwrap();
        assert_eq!(gather(&other, now, &BTreeMap::new()).await.unwrap().approvals, std::slice::from_ref(&fresh));
        other.reserve(&renamed, 0).await.unwrap();
        assert!(
            gather(&other, now, &BTreeMap::new()).await.unwrap().approvals.is_empty(),
            "a consumed approval waits no more"
        );
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

    const LEAD: &str = "arn:aws:iam::111122223333:role/ResearchLead";

    /// `who`'s request `id` filed at `filed` for a day of one p5.48xlarge in us-east-1 between
    /// `from` and `until` (after t0), at most 3 USD per GPU-hour, for team research.
    fn request(id: &str, who: &str, filed: DateTime<Utc>, from: Duration, until: Duration) -> Request {
        Request {
            id: id.into(),
            requester: who.into(),
            filed_at: filed,
            terms: crate::domain::request::RequestTerms {
                instance_types: vec!["p5.48xlarge".parse().unwrap()],
                instance_count: 1,
                days: 1,
                regions: vec!["us-east-1".parse().unwrap()],
                earliest_start: t0() + from,
                latest_end: t0() + until,
                max_price_per_accelerator_hour: Money::parse("3", "USD").unwrap(),
                team: "research".into(),
                reason: format!("why {id}"),
                slack: None,
            },
            cancelled_at: None,
        }
    }

    fn approved_by(r: &Request, by: &str) -> RequestDecision {
        RequestDecision {
            request_id: r.id.clone(),
            requester: r.requester.clone(),
            terms: r.terms.clone(),
            by: by.into(),
            at: r.filed_at + Duration::hours(1),
            verdict: crate::domain::request::RequestVerdict::Approved,
            consumed_by: None,
        }
    }

    /// The page's requests as the scan reads them: each state judged by the stack's
    /// TeamApprovals (an approval by someone it does not name is refused), newest first, a bought
    /// one with its block, an expired one with the cheapest offering seen; counted all.
    #[tokio::test]
    async fn requests_are_gathered_as_the_scan_judges_them_newest_first() {
        let now = t0() + Duration::hours(30);
        let teams = crate::domain::request::parse_team_approvals(&format!("research=0 {LEAD}")).unwrap();
        let open = |id: &str, who: &str, h: i64| {
            request(id, who, t0() + Duration::hours(h), Duration::days(1), Duration::days(5))
        };
        let bought = open("rq-bought", "AROAEXAMPLE:ada", 1);
        let intent = Intent {
            request: Some(bought.key()),
            ..Intent::new(
                &bought.rule_id(),
                offering("cb-b", t0() + Duration::days(2)),
                8,
                vec![],
                t0() + Duration::hours(2),
            )
        };
        let block =
            Block::bought(&intent, &crate::app::fixtures::reservation_of(&intent, "cr-req"), t0() + Duration::hours(3));
        let store = MemoryTable::default().with_blocks([block]);
        let expired = request("rq-expired", "AROAEXAMPLE:lin", t0(), Duration::hours(2), Duration::hours(28));
        let seen = Observation {
            offering: offering("cb-seen", t0() + Duration::hours(3)),
            accelerators_per_instance: 8,
            seen_at: t0() + Duration::hours(1),
        };
        store.record(std::slice::from_ref(&seen)).await.unwrap();
        let filed = open("rq-filed", "AROAEXAMPLE:ada", 5);
        let approved = open("rq-approved", "AROAEXAMPLE:kim", 4);
        let forged = open("rq-forged", "AROAEXAMPLE:eve", 3);
        for r in [&bought, &expired, &filed, &approved, &forged] {
            store.file_request(r).await.unwrap();
        }
        store.decide_request(&approved_by(&approved, LEAD)).await.unwrap();
        store.decide_request(&approved_by(&forged, "arn:aws:iam::111122223333:user/eve")).await.unwrap();
        store.decide_request(&approved_by(&bought, LEAD)).await.unwrap();
        store.reserve(&intent, 0).await.unwrap();

        let data = gather(&store, now, &teams).await.unwrap();
        let q = &data.requests;
        let ids = |l: &[PageRequest]| l.iter().map(|r| r.request.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&q.open), ["rq-filed", "rq-approved"], "newest first");
        assert_eq!(ids(&q.closed), ["rq-forged", "rq-bought", "rq-expired"]);
        assert_eq!(q.open[0].state, Ok(RequestState::Filed));
        assert_eq!(q.open[1].state, Ok(RequestState::Approved));
        let refused = q.closed[0].state.as_ref().unwrap_err();
        assert!(
            refused.contains("approval by \"arn:aws:iam::111122223333:user/eve\" is not one the team's settings allow"),
            "{refused}"
        );
        assert_eq!(q.closed[1].state, Ok(RequestState::Bought { intent: intent.id.clone() }));
        assert_eq!(q.closed[1].blocks.iter().map(|b| b.reservation_id.as_str()).collect::<Vec<_>>(), ["cr-req"]);
        assert_eq!(q.closed[2].state, Ok(RequestState::Expired));
        assert_eq!(q.closed[2].cheapest, Some(seen));
        assert_eq!(
            q.counts,
            RequestCounts { filed: 1, approved: 1, bought: 1, expired: 1, refused: 1, ..Default::default() }
        );
        assert_eq!(q.teams, teams);

        // More than the page lists: the newest are kept, all are counted.
        for i in 0..SHOWN_REQUESTS {
            store.file_request(&open(&format!("rq-more{i:02}"), "AROAEXAMPLE:ada", 6 + i as i64)).await.unwrap();
        }
        let data = gather(&store, now, &teams).await.unwrap();
        assert_eq!(data.requests.open.len(), SHOWN_REQUESTS);
        assert_eq!(data.requests.open[0].request.id, format!("rq-more{:02}", SHOWN_REQUESTS - 1));
        assert_eq!(data.requests.counts.filed, SHOWN_REQUESTS + 1);
        assert_eq!(data.requests.closed.len(), 3);
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
        let data = gather(&store, now, &BTreeMap::new()).await.unwrap();
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
        let data = gather(&store, now, &BTreeMap::new()).await.unwrap();
        assert_eq!(data.blocks.len(), 1, "the block is shown");
        assert!(data.blocks[0].extensions.is_empty());
        assert_eq!(data.month.skipped.len(), 1, "{:?}", data.month.skipped);
        assert!(data.month.skipped[0].contains("BLOCK#cr-1/EXT#cbx-bad"), "{}", data.month.skipped[0]);
        let month = report::month(&store, &Period::budget_month(now), &BTreeMap::new()).await.unwrap();
        assert_eq!(month.skipped, data.month.skipped);
        let page = crate::app::publish::team_page(&store, now, &BTreeMap::new(), |d| d.month.skipped.join("\n"))
            .await
            .unwrap();
        assert!(page.contains("does not decode"), "{page}");
        // The money path stays strict.
        let strict = store.extensions_of("cr-1").await.unwrap_err();
        assert!(matches!(strict, StoreError::Corrupt { .. }), "{strict:?}");
    }
}
