//! People's requests in the scan, on the in-memory table and market: approved within a team's
//! limit, bought once, refused by name when forged or changed, told in their own thread.

use std::collections::BTreeMap;

use chrono::Duration;

use super::*;
use crate::app::fixtures::{ScanOutputs, offering, scan_settings, scanner, t0};
use crate::app::purchase::Outcome;
use crate::domain::money::Money;
use crate::domain::request::{RequestTerms, parse_team_approvals};
use crate::domain::rule::Mode;
use crate::domain::run_time::RunTime;
use crate::memory::{MemoryEc2, MemoryTable};

const ADA: &str = "AROAEXAMPLE:ada";
const LEAD: &str = "arn:aws:iam::111122223333:role/ResearchLead";

fn usd(s: &str) -> Money {
    Money::parse(s, "USD").unwrap()
}

/// Ada's request: 1 x p5.48xlarge for a day in us-east-1, starting from a day on, ending within
/// five, at most 3 USD per GPU-hour (576 in all).
fn request() -> Request {
    Request {
        id: "rq-ada1".into(),
        requester: ADA.into(),
        filed_at: t0(),
        terms: RequestTerms {
            instance_types: vec!["p5.48xlarge".parse().unwrap()],
            instance_count: 1,
            days: 1,
            regions: vec!["us-east-1".parse().unwrap()],
            earliest_start: t0() + Duration::days(1),
            latest_end: t0() + Duration::days(5),
            max_price_per_accelerator_hour: usd("3"),
            team: "research".into(),
            reason: "the ablation the reviewers asked for".into(),
            slack: Some("@ada".into()),
        },
        cancelled_at: None,
    }
}

/// Research approves up to `auto` on its own and names its lead beyond.
fn teams(auto: &str) -> BTreeMap<String, TeamApproval> {
    parse_team_approvals(&format!("research={auto} {LEAD}")).unwrap()
}

fn keys(table: &MemoryTable) -> Vec<String> {
    let mut k: Vec<String> = table
        .notices()
        .into_iter()
        .filter(|(n, _)| n.thread == "rq-ada1")
        .map(|(n, _)| n.milestone.to_string())
        .collect();
    k.sort();
    k
}

struct Stack {
    table: MemoryTable,
    market: MemoryEc2,
    out: ScanOutputs,
    settings: crate::app::scan::ScanSettings,
}

impl Stack {
    /// A live stack whose research team has 5,000 a month, an offering on sale for the day
    /// from t0 + 2 days at 480 (2.50 per GPU-hour).
    fn new() -> Stack {
        let mut settings = scan_settings(Mode::Live);
        settings.stack.team_budgets = [("research".to_string(), usd("5000"))].into();
        let market = MemoryEc2::default().with_offerings([offering("cb-on-sale", t0() + Duration::days(2))]);
        Stack { table: MemoryTable::default(), market, out: ScanOutputs::default(), settings }
    }

    async fn scan(&self, teams: &BTreeMap<String, TeamApproval>, at: DateTime<Utc>) -> crate::app::scan::ScanReport {
        let s = scanner(&self.market, &self.table, &self.out, &self.settings);
        s.run_with_requests(RunTime::from(at), None, teams).await.unwrap()
    }

    fn purchases(&self) -> u64 {
        self.market.calls().get("PurchaseCapacityBlock").copied().unwrap_or(0)
    }
}

/// Filed within the team's limit: approved by capblock, asked beside the rules, bought once;
/// the approval consumed, so the next scans (and a replay of the same item) buy nothing more;
/// each step once in the request's thread.
#[tokio::test]
async fn a_request_within_its_teams_limit_is_approved_and_bought_once() {
    let stack = Stack::new();
    stack.table.file_request(&request()).await.unwrap();
    let report = stack.scan(&teams("1000"), t0()).await;
    let requests = report.requests.clone().unwrap();
    assert_eq!(requests.auto_approved, ["rq-ada1"]);
    assert_eq!(requests.asked, ["request-ada1"]);
    let outcome = report.outcomes.iter().find(|o| o.rule_id == "request-ada1").expect("asked");
    assert!(matches!(outcome.action, Some(Outcome::Bought { .. })), "{:?}", outcome.action);
    let decision = stack.table.decision("rq-ada1").await.unwrap().unwrap();
    assert_eq!(decision.by, AUTO_APPROVER);
    assert!(decision.consumed_by.is_some(), "the purchase consumed the approval");
    assert_eq!(stack.purchases(), 1);
    assert_eq!(keys(&stack.table), ["request-approved", "request-filed"]);

    // The next scan sees it bought and says so once; a replayed request item (written back as
    // filed) is the same request, its approval consumed: nothing more is bought.
    let later = t0() + Duration::minutes(10);
    let again = stack.scan(&teams("1000"), later).await;
    assert!(again.requests.unwrap().asked.is_empty());
    stack.table.put_request_item(ADA, &request());
    stack.scan(&teams("1000"), later + Duration::minutes(10)).await;
    assert_eq!(stack.purchases(), 1, "one approval buys once");
    assert_eq!(keys(&stack.table), ["request-approved", "request-bought", "request-filed"]);
}

/// Over the team's limit a request waits for an approver; one the team does not name is
/// refused by name, and nothing is bought on it.
#[tokio::test]
async fn a_request_over_the_limit_waits_for_an_approver_the_team_names() {
    let stack = Stack::new();
    stack.table.file_request(&request()).await.unwrap();
    let report = stack.scan(&teams("100"), t0()).await;
    assert!(report.requests.unwrap().asked.is_empty(), "576 is over research's 100");
    assert!(stack.table.decision("rq-ada1").await.unwrap().is_none(), "no decision written");
    let by_intern = RequestDecision {
        request_id: "rq-ada1".into(),
        requester: ADA.into(),
        terms: request().terms,
        by: "arn:aws:iam::111122223333:role/Intern".into(),
        at: t0(),
        verdict: RequestVerdict::Approved,
        consumed_by: None,
    };
    stack.table.decide_request(&by_intern).await.unwrap();
    let refused = stack.scan(&teams("100"), t0() + Duration::minutes(5)).await.requests.unwrap();
    assert!(refused.refused["rq-ada1"].contains("is not one the team's settings allow"), "{refused:?}");
    assert_eq!(stack.purchases(), 0);
    assert!(keys(&stack.table).contains(&"request-refused".to_string()));
}

/// An item stored under another requester's key, or whose terms changed since a lead approved
/// them, is refused by name: no decision written, no rule asked, nothing bought.
#[tokio::test]
async fn a_forged_or_changed_request_is_refused_by_name_and_buys_nothing() {
    let stack = Stack::new();
    stack.table.put_request_item("AROAOTHER:eve", &request());
    let report = stack.scan(&teams("1000"), t0()).await.requests.unwrap();
    assert_eq!(
        report.refused["rq-ada1"],
        "request rq-ada1 names requester \"AROAEXAMPLE:ada\" but is stored under \"AROAOTHER:eve\": forged"
    );
    assert!(stack.table.decision("rq-ada1").await.unwrap().is_none());
    assert!(report.asked.is_empty());

    let stack = Stack::new();
    stack.table.file_request(&request()).await.unwrap();
    let lead = RequestDecision {
        request_id: "rq-ada1".into(),
        requester: ADA.into(),
        terms: request().terms,
        by: LEAD.into(),
        at: t0(),
        verdict: RequestVerdict::Approved,
        consumed_by: None,
    };
    stack.table.decide_request(&lead).await.unwrap();
    let raised =
        Request { terms: RequestTerms { max_price_per_accelerator_hour: usd("30"), ..request().terms }, ..request() };
    stack.table.put_request_item(ADA, &raised);
    let report = stack.scan(&teams("0"), t0()).await.requests.unwrap();
    assert_eq!(report.refused["rq-ada1"], "request rq-ada1's terms changed since they were approved: approve it again");
    assert_eq!(stack.purchases(), 0);
    assert!(stack.table.decision("rq-ada1").await.unwrap().unwrap().consumed_by.is_none());
}

/// A request whose window closes unbought expires, and says the cheapest offering seen for it.
#[tokio::test]
async fn an_expired_request_says_the_cheapest_offering_seen() {
    let stack = Stack::new();
    let dear =
        Request { terms: RequestTerms { max_price_per_accelerator_hour: usd("1"), ..request().terms }, ..request() };
    stack.table.file_request(&dear).await.unwrap();
    stack.scan(&teams("1000"), t0()).await;
    assert_eq!(stack.purchases(), 0, "2.50 is over the cap of 1");
    stack.scan(&teams("1000"), t0() + Duration::days(5)).await;
    let expired = stack
        .table
        .notices()
        .into_iter()
        .find(|(n, _)| n.thread == "rq-ada1" && n.milestone.as_str() == "request-expired")
        .expect("told");
    assert!(expired.0.message.body.contains("2.5000 USD per accelerator-hour"), "{}", expired.0.message.body);
}

/// A request that expired more than `EXPIRY_TOLD_WITHIN` before a scan is not read against
/// the price history again: its expiry was told by the scans of that week, or the stack did
/// not run for a week.
#[tokio::test]
async fn a_request_expired_long_ago_costs_no_history_read() {
    let stack = Stack::new();
    let dear =
        Request { terms: RequestTerms { max_price_per_accelerator_hour: usd("1"), ..request().terms }, ..request() };
    stack.table.file_request(&dear).await.unwrap();
    let long_after = dear.terms.latest_start() + super::EXPIRY_TOLD_WITHIN + Duration::minutes(1);
    stack.scan(&teams("1000"), long_after).await;
    let told = stack.table.notices().into_iter().any(|(n, _)| n.milestone.as_str() == "request-expired");
    assert!(!told, "not told past the week");
    let (_, report) = super::request_rules(&stack.table, &teams("1000"), long_after, true).await.unwrap();
    assert!(report.asked.is_empty(), "and not asked");
}
