//! The demo story in small, as the table would hold it: the renderer's unit tests and the
//! browser check (`examples/demo_page.rs`, `make test-page`) render it.

use std::collections::BTreeMap;

use capblock_core::app::report::{Month, Row};
use capblock_core::app::team_page::{PageBlock, PageBudget, PageRequest, PageRequests, PriceSeries, TeamData};
use capblock_core::domain::block::{Block, Reservation};
use capblock_core::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period};
use capblock_core::domain::lifecycle::BlockState;
use capblock_core::domain::money::Money;
use capblock_core::domain::offering::Offering;
use capblock_core::domain::report;
use capblock_core::domain::request::{
    Request, RequestDecision, RequestState, RequestTerms, RequestVerdict, parse_team_approvals,
};
use capblock_core::domain::rule::Rule;
use capblock_core::domain::usage::Usage;
use capblock_core::ports::Observation;
use chrono::{DateTime, Duration, TimeZone, Utc};

pub fn at(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, 0, 0).unwrap()
}

pub fn now() -> DateTime<Utc> {
    at(7, 9)
}

pub fn rule(id: &str, team: &str) -> Rule {
    let text = format!(
        "id = \"{id}\"\nmode = \"approval\"\nregions = [\"us-east-1\", \"us-west-2\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1]\ndurations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"6000\"\nmax_purchases_per_month = 4\nteam = \"{team}\"\n"
    );
    Rule::from_toml(&text, at(1, 0)).unwrap()
}

pub fn offering(id: &str, region: &str, start: DateTime<Utc>, fee: &str, count: u32) -> Offering {
    Offering {
        id: id.into(),
        region: region.parse().unwrap(),
        availability_zone: format!("{region}a"),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: count,
        start,
        end: start + Duration::days(1),
        duration_hours: 24,
        duration_minutes: 0,
        fee: Money::parse(fee, "USD").unwrap(),
        ultraserver: false,
        ultraservers: None,
        local_zone: false,
        segments: Vec::new(),
    }
}

pub fn block(rule: &Rule, id: &str, start: DateTime<Utc>, state: BlockState, bought_at: DateTime<Utc>) -> Block {
    let o = offering(&format!("cb-{id}"), "us-east-1", start, "480", 1);
    let mut intent = Intent::new(&rule.id, o.clone(), 8, vec![], bought_at);
    intent.sent_at = Some(bought_at);
    let r = Reservation {
        id: id.into(),
        arn: None,
        region: o.region.clone(),
        availability_zone: o.availability_zone.clone(),
        instance_type: o.instance_type.clone(),
        instance_count: 1,
        start: o.start,
        end: o.end,
        state: state.as_str().into(),
        reservation_type: Some("capacity-block".into()),
        tags: Default::default(),
        capacity_block_id: None,
    };
    let mut b = Block::bought(&intent, &r, bought_at);
    b.state = state;
    b
}

pub fn observations(region: &str, from: DateTime<Utc>, hours: i64, every: i64) -> Vec<Observation> {
    (0..hours / every)
        .map(|i| {
            let seen_at = from + Duration::hours(i * every);
            // A price that moves a little every 5 hours: 2.40 .. 2.80 per GPU-hour.
            // One to four instances at the same price per instance.
            let count = 1 + (i % 4) as u32;
            let fee = (460 + 10 * ((i * every / 5) % 5)) * i64::from(count);
            Observation {
                offering: offering(
                    &format!("cb-{region}-{}", i / 3),
                    region,
                    seen_at + Duration::days(2),
                    &fee.to_string(),
                    count,
                ),
                accelerators_per_instance: 8,
                seen_at,
            }
        })
        .collect()
}

pub fn month(period: &Period, blocks: &[PageBlock], rules: &[Rule]) -> Month {
    let with_x: Vec<(Block, Vec<_>)> = blocks.iter().map(|b| (b.block.clone(), b.extensions.clone())).collect();
    let teams: BTreeMap<String, String> =
        rules.iter().filter_map(|r| Some((r.id.clone(), report::team_of(r)?.to_string()))).collect();
    let rows: Vec<Row> = report::month(period, &with_x, &teams)
        .into_iter()
        .map(|m| Row {
            budget_spent: Some(m.spent),
            budget_limit: Some(Money::parse("6000", "USD").unwrap()),
            team_by_tag: false,
            month: m,
        })
        .collect();
    let teams = report::by_team(&rows.iter().map(|r| r.month.clone()).collect::<Vec<_>>());
    Month { month: period.as_str().into(), rules: rows, teams, account_spent: None, skipped: vec![] }
}

/// A request for `count` p5.48xlarge for a day in us-west-2, filed at `filed` by `who`.
pub fn request(id: &str, who: &str, slack: Option<&str>, filed: DateTime<Utc>, count: u32, reason: &str) -> Request {
    Request {
        id: id.into(),
        requester: who.into(),
        filed_at: filed,
        terms: RequestTerms {
            instance_types: vec!["p5.48xlarge".parse().unwrap()],
            instance_count: count,
            days: 1,
            regions: vec!["us-west-2".parse().unwrap()],
            earliest_start: filed + Duration::days(1),
            latest_end: filed + Duration::days(6),
            max_price_per_accelerator_hour: Money::parse("3", "USD").unwrap(),
            team: "ml-research".into(),
            reason: reason.into(),
            slack: slack.map(str::to_string),
        },
        cancelled_at: None,
    }
}

/// The lead's decision on `r`.
pub fn decided(r: &Request, verdict: RequestVerdict, consumed_by: Option<&str>) -> RequestDecision {
    RequestDecision {
        request_id: r.id.clone(),
        requester: r.requester.clone(),
        terms: r.terms.clone(),
        by: "arn:aws:iam::111122223333:role/ResearchLead".into(),
        at: r.filed_at + Duration::hours(1),
        verdict,
        consumed_by: consumed_by.map(str::to_string),
    }
}

/// People's requests: one waiting for the lead, one approved, one bought, one expired, one
/// rejected and one cancelled, newest first.
pub fn requests(rule: &Rule) -> PageRequests {
    let shown = |request: Request, decision: Option<RequestDecision>, state: RequestState| PageRequest {
        request,
        decision,
        state: Ok(state),
        blocks: vec![],
        cheapest: None,
    };
    let waiting =
        request("rq-waiting1", "AROAEXAMPLE:ada", Some("@ada"), at(7, 8), 2, "the ablation the reviewers asked for");
    let approved = request("rq-approved1", "AROAEXAMPLE:kim", None, at(6, 12), 1, "eval sweep");
    let bought = request("rq-bought1", "AROAEXAMPLE:ada", Some("@ada"), at(3, 10), 1, "fine-tune before the deadline");
    let expired = request("rq-expired1", "AROAEXAMPLE:lin", Some("@lin"), at(1, 9), 1, "<b>urgent</b> & large");
    let rejected = request("rq-rejected1", "AROAEXAMPLE:kim", None, at(1, 8), 4, "a bigger sweep");
    let mut cancelled = request("rq-cancelled1", "AROAEXAMPLE:lin", None, at(1, 7), 1, "a retry");
    cancelled.cancelled_at = Some(at(1, 20));
    let mut block = block(rule, "cr-request0003", at(4, 11), BlockState::Scheduled, at(3, 12));
    block.rule_id = Some("request-bought1".into());
    block.region = "us-west-2".parse().unwrap();
    block.availability_zone = "us-west-2a".into();
    block.intent_id = Some("int-bought1".into());
    let cheapest = observations("us-west-2", at(2, 0), 6, 2).into_iter().next();
    PageRequests {
        open: vec![
            shown(waiting, None, RequestState::Filed),
            shown(approved.clone(), Some(decided(&approved, RequestVerdict::Approved, None)), RequestState::Approved),
        ],
        closed: vec![
            PageRequest {
                blocks: vec![block],
                ..shown(
                    bought.clone(),
                    Some(decided(&bought, RequestVerdict::Approved, Some("int-bought1"))),
                    RequestState::Bought { intent: "int-bought1".into() },
                )
            },
            PageRequest { cheapest, ..shown(expired, None, RequestState::Expired) },
            shown(
                rejected.clone(),
                Some(decided(&rejected, RequestVerdict::Rejected { reason: "over the quarter's plan".into() }, None)),
                RequestState::Rejected { reason: "over the quarter's plan".into() },
            ),
            shown(cancelled, None, RequestState::Cancelled),
        ],
        counts: capblock_core::app::team_page::RequestCounts {
            filed: 1,
            approved: 1,
            bought: 1,
            expired: 1,
            rejected: 1,
            cancelled: 1,
            refused: 0,
        },
        teams: parse_team_approvals("ml-research=500 arn:aws:iam::111122223333:role/ResearchLead").unwrap(),
    }
}

/// The demo's story in small: two teams' rules, an active block with idle instances, a block
/// waiting for its payment, one approval waiting, people's requests, budgets, a week of prices
/// in two regions.
pub fn fixture() -> TeamData {
    let rules = vec![rule("p5-weekly", "ml-research"), rule("vision-burst", "vision")];
    let mut active = block(&rules[0], "cr-active0001", at(7, 0), BlockState::Active, at(3, 0));
    active.usage = Usage {
        sampled_at: Some(at(7, 8)),
        running: 0,
        idle: 1,
        used_instance_minutes: 0,
        idle_instance_minutes: 120,
        ..Default::default()
    };
    let pending = block(&rules[1], "cr-pending0002", at(10, 11), BlockState::PaymentPending, at(7, 8));
    let blocks = vec![
        PageBlock {
            block: active,
            extensions: vec![],
            team: Some("ml-research".into()),
            shared_with: vec!["111122223333".into()],
        },
        PageBlock { block: pending, extensions: vec![], team: Some("vision".into()), shared_with: vec![] },
    ];
    let usd = |s: &str| Money::parse(s, "USD").unwrap();
    let usage =
        |spent: &str, committed: &str| BudgetUsage { spent: usd(spent), committed: usd(committed), purchases: 1 };
    let budgets = vec![
        PageBudget { owner: BudgetOwner::Account, limit: Some(usd("50000")), usage: Some(usage("480", "960")) },
        PageBudget {
            owner: BudgetOwner::Team("ml-research".into()),
            limit: Some(usd("20000")),
            usage: Some(usage("480", "480")),
        },
        PageBudget {
            owner: BudgetOwner::Rule("p5-weekly".into()),
            limit: Some(usd("6000")),
            usage: Some(usage("480", "480")),
        },
        PageBudget {
            owner: BudgetOwner::Rule("vision-burst".into()),
            limit: Some(usd("6000")),
            usage: Some(usage("0", "480")),
        },
    ];
    let approval = Intent::new(
        "p5-weekly",
        offering("cb-0123456789abcdef0", "us-west-2", at(9, 11), "432", 1),
        8,
        vec![],
        at(7, 6),
    );
    let prices = vec![
        PriceSeries {
            region: "us-east-1".parse().unwrap(),
            instance_type: "p5.48xlarge".parse().unwrap(),
            observations: observations("us-east-1", at(1, 0), 24 * 6, 1),
        },
        PriceSeries {
            region: "us-west-2".parse().unwrap(),
            instance_type: "p5.48xlarge".parse().unwrap(),
            observations: observations("us-west-2", at(2, 0), 24 * 5, 2),
        },
    ];
    let period = Period::budget_month(now());
    let requests = requests(&rules[0]);
    TeamData {
        now: now(),
        stack: Some("capblock-demo".into()),
        month: month(&period, &blocks, &rules),
        period,
        rules,
        blocks,
        budgets,
        approvals: vec![approval],
        prices,
        reminder_lead_minutes: vec![1440, 120, 30],
        rates: Default::default(),
        requests,
    }
}
