//! The renderer against a fixture: each section holds what the table holds, says so when it
//! holds nothing, escapes what people typed, asks for nothing outside the file, and stays under
//! 1 MB for a year of data.

use std::collections::BTreeMap;

use capblock_core::app::report::{Month, Row};
use capblock_core::app::team_page::{PageBlock, PageBudget, PriceSeries, TeamData};
use capblock_core::domain::block::{Block, Reservation};
use capblock_core::domain::budget::{BudgetOwner, BudgetUsage, Intent, Period};
use capblock_core::domain::lifecycle::BlockState;
use capblock_core::domain::money::Money;
use capblock_core::domain::offering::Offering;
use capblock_core::domain::report;
use capblock_core::domain::rule::Rule;
use capblock_core::domain::usage::Usage;
use capblock_core::ports::Observation;
use chrono::{DateTime, Duration, TimeZone, Utc};

use super::render;

fn at(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, d, h, 0, 0).unwrap()
}

fn now() -> DateTime<Utc> {
    at(7, 9)
}

fn rule(id: &str, team: &str) -> Rule {
    let text = format!(
        "id = \"{id}\"\nmode = \"approval\"\nregions = [\"us-east-1\", \"us-west-2\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1]\ndurations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"6000\"\nmax_purchases_per_month = 4\nteam = \"{team}\"\n"
    );
    Rule::from_toml(&text, at(1, 0)).unwrap()
}

fn offering(id: &str, region: &str, start: DateTime<Utc>, fee: &str, count: u32) -> Offering {
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
    }
}

fn block(rule: &Rule, id: &str, start: DateTime<Utc>, state: BlockState, bought_at: DateTime<Utc>) -> Block {
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

fn observations(region: &str, from: DateTime<Utc>, hours: i64, every: i64) -> Vec<Observation> {
    (0..hours / every)
        .map(|i| {
            let seen_at = from + Duration::hours(i * every);
            // A price that moves a little every 5 hours: 2.40 .. 2.80 per GPU-hour.
            let fee = 460 + 10 * ((i * every / 5) % 5);
            Observation {
                offering: offering(
                    &format!("cb-{region}-{}", i / 3),
                    region,
                    seen_at + Duration::days(2),
                    &fee.to_string(),
                    1 + (i % 4) as u32,
                ),
                accelerators_per_instance: 8,
                seen_at,
            }
        })
        .collect()
}

fn month(period: &Period, blocks: &[PageBlock], rules: &[Rule]) -> Month {
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
    Month { month: period.as_str().into(), rules: rows, teams, account_spent: None }
}

/// The demo's story in small: two teams' rules, an active block with idle instances, a block
/// waiting for its payment, one approval waiting, budgets, a week of prices in two regions.
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
    let period = Period::of(now());
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
    }
}

fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
    let end = page[start..].find("</section>").map(|e| start + e).unwrap();
    &page[start..end]
}

#[test]
fn each_section_holds_the_fixtures_blocks_budgets_prices_and_approval() {
    let page = render(&fixture());
    let cal = section(&page, "calendar");
    assert!(cal.contains("cr-active0001") && cal.contains("cr-pending0002"), "{cal}");
    assert!(cal.contains("ml-research / p5-weekly") && cal.contains("vision / vision-burst"));
    assert!(cal.contains("payment deadline") && cal.contains("111122223333") && cal.contains("reminder"));
    let budgets = section(&page, "budgets");
    for name in ["Account", "Team ml-research", "Rule p5-weekly", "Rule vision-burst"] {
        assert!(budgets.contains(name), "{name} missing");
    }
    assert!(budgets.contains("49040.00 USD left of 50000.00 USD"), "{budgets}");
    let prices = section(&page, "prices");
    assert_eq!(prices.matches("<svg").count(), 2, "a chart per rule");
    assert!(prices.contains("us-east-1 p5.48xlarge") && prices.contains("threshold 3"));
    assert!(prices.contains("bought cr-active0001"), "the purchase is marked");
    let approvals = section(&page, "approvals");
    assert!(approvals.contains("<code>capblock approve p5-weekly/cb-0123456789abcdef0</code>"));
    assert!(
        approvals.contains("432.00 USD") && approvals.contains("2.2500 USD") && approvals.contains("21 h"),
        "{approvals}"
    );
    let used = section(&page, "use");
    assert!(used.contains("1 of 1") && used.contains("cr-active0001"), "{used}");
    assert!(used.contains("The month per rule"));
    let market = section(&page, "market");
    assert!(market.contains("p5.48xlarge us-west-2") && market.contains("Largest count seen per start day"));
}

#[test]
fn every_section_says_plainly_when_it_is_empty() {
    let mut d = fixture();
    d.rules.clear();
    d.blocks.clear();
    d.budgets = vec![PageBudget { owner: BudgetOwner::Account, limit: None, usage: None }];
    d.approvals.clear();
    d.prices.clear();
    d.month = Month { month: d.period.as_str().into(), rules: vec![], teams: vec![], account_spent: None };
    let page = render(&d);
    assert!(section(&page, "calendar").contains("No blocks held or starting in the next 8 weeks."));
    assert!(section(&page, "budgets").contains("No budgets set"));
    assert!(section(&page, "prices").contains("No rules"));
    assert!(section(&page, "approvals").contains("No approvals waiting."));
    assert!(section(&page, "use").contains("No active blocks.") && section(&page, "use").contains("Nothing bought"));
    assert!(section(&page, "market").contains("No offerings seen"));
}

#[test]
fn nothing_in_the_page_points_outside_it() {
    let page = render(&fixture());
    assert!(!page.contains("http"), "a URL in the page");
    assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("<img") && !page.contains("url("));
    assert!(page.contains(&format!("content=\"{}\"", super::CSP)));
}

#[test]
fn what_people_typed_is_shown_never_run() {
    let mut d = fixture();
    d.stack = Some("<script>alert(1)</script>".into());
    d.blocks[0].team = Some("<img src=x onerror=alert(1)>".into());
    d.blocks[0].shared_with = vec!["\"><script>".into()];
    let page = render(&d);
    assert!(!page.contains("<script") && !page.contains("<img"), "user text became markup");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn every_picture_has_a_text_alternative() {
    let page = render(&fixture());
    let svgs = page.matches("<svg").count();
    assert!(svgs >= 6, "{svgs}");
    for svg in page.split("<svg").skip(1) {
        let head = &svg[..svg.find("</svg>").unwrap()];
        assert!(head.contains("role=\"img\""), "an svg without a role");
        assert!(head.contains("<title>"), "an svg without a title");
    }
}

#[test]
fn a_year_of_data_stays_under_a_megabyte() {
    let mut d = fixture();
    // A year of hourly scans in two regions (the page shows the last 90 days of them), a block a
    // week for each rule, and an approval a day.
    let year = at(7, 9) - Duration::days(365);
    d.prices = ["us-east-1", "us-west-2", "eu-north-1", "ap-northeast-1"]
        .iter()
        .map(|r| PriceSeries {
            region: r.parse().unwrap(),
            instance_type: "p5.48xlarge".parse().unwrap(),
            observations: observations(r, at(7, 9) - Duration::days(90), 24 * 90, 1),
        })
        .collect();
    let rules = d.rules.clone();
    for w in 0..52 {
        for r in &rules {
            let start = year + Duration::weeks(w);
            let b = block(
                r,
                &format!("cr-{}-{w:02}", r.id),
                start,
                if start < d.now { BlockState::Expired } else { BlockState::Scheduled },
                start - Duration::days(2),
            );
            d.blocks.push(PageBlock { block: b, extensions: vec![], team: None, shared_with: vec![] });
        }
    }
    let page = render(&d);
    assert!(page.len() < 1_000_000, "{} bytes", page.len());
}
