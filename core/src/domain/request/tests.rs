use chrono::TimeZone;

use super::*;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap()
}

fn usd(s: &str) -> Money {
    Money::parse(s, "USD").unwrap()
}

pub(crate) fn terms() -> RequestTerms {
    RequestTerms {
        instance_types: vec!["p5.48xlarge".parse().unwrap()],
        instance_count: 2,
        days: 3,
        regions: vec!["us-east-2".parse().unwrap()],
        earliest_start: t0() + Duration::days(2),
        latest_end: t0() + Duration::days(12),
        max_price_per_accelerator_hour: usd("4.10"),
        team: "research".into(),
        reason: "llama fine-tune before the paper deadline".into(),
        slack: Some("@ada".into()),
    }
}

fn request() -> Request {
    Request {
        id: "rq-7f3a2c9b".into(),
        requester: "AROAEXAMPLE:ada".into(),
        filed_at: t0(),
        terms: terms(),
        cancelled_at: None,
    }
}

#[test]
fn a_good_request_has_no_problem_and_its_most_fee_is_cap_times_accelerator_hours() {
    assert_eq!(request().problems(), vec![]);
    // 8 accelerators x 2 instances x 72 hours x 4.10
    assert_eq!(terms().max_fee(), usd("4723.20"));
}

#[test]
fn each_problem_is_named() {
    let bad = Request {
        id: "rq-Bad".into(),
        requester: "REQUEST#x".into(),
        terms: RequestTerms {
            instance_types: vec!["m5.large".parse().unwrap()],
            instance_count: 0,
            days: 15,
            regions: vec![],
            earliest_start: t0() - Duration::days(3),
            latest_end: t0() - Duration::days(1),
            max_price_per_accelerator_hour: usd("0"),
            team: "Research".into(),
            reason: " ".into(),
            slack: Some("ada".into()),
        },
        ..request()
    };
    let problems = bad.problems();
    let names: Vec<String> =
        problems.iter().map(|p| format!("{p:?}").split(['(', ' ', '{']).next().unwrap().to_string()).collect();
    assert_eq!(
        names,
        [
            "BadId",
            "BadRequester",
            "UnpricedType",
            "Count",
            "Length",
            "NoRegion",
            "WindowShort",
            "WindowOver",
            "Cap",
            "Team",
            "Reason",
            "Slack"
        ]
    );
    assert_eq!(problems[6].to_string(), "the window (48 h) is shorter than the block (15 days)");
}

#[test]
fn a_window_too_far_ahead_is_refused() {
    let far =
        RequestTerms { earliest_start: t0() + Duration::weeks(9), latest_end: t0() + Duration::weeks(10), ..terms() };
    assert_eq!(far.problems(t0()), vec![RequestError::WindowTooFar(9)]);
}

#[test]
fn an_item_is_checked_against_the_key_it_was_read_from() {
    let r = request();
    assert_eq!(check_item(&r, "AROAEXAMPLE:ada", "rq-7f3a2c9b"), Ok(()));
    let err = check_item(&r, "AROAOTHER:bob", "rq-7f3a2c9b").unwrap_err();
    assert!(matches!(err, RequestError::NotTheRequester { .. }), "{err}");
    assert!(err.to_string().contains("forged"), "{err}");
    assert!(matches!(check_item(&r, "AROAEXAMPLE:ada", "rq-other").unwrap_err(), RequestError::NotTheId { .. }));
    let malformed = Request { terms: RequestTerms { instance_count: 500, ..terms() }, ..request() };
    assert_eq!(check_item(&malformed, "AROAEXAMPLE:ada", "rq-7f3a2c9b"), Err(RequestError::Count(500)));
}

fn decision(by: &str, verdict: RequestVerdict) -> RequestDecision {
    RequestDecision {
        request_id: "rq-7f3a2c9b".into(),
        requester: "AROAEXAMPLE:ada".into(),
        terms: terms(),
        by: by.into(),
        at: t0(),
        verdict,
        consumed_by: None,
    }
}

#[test]
fn the_state_follows_the_decision_the_cancel_and_the_window() {
    let r = request();
    let approved = decision(AUTO_APPROVER, RequestVerdict::Approved);
    assert_eq!(state_of(&r, None, t0()), RequestState::Filed);
    assert_eq!(state_of(&r, Some(&approved), t0()), RequestState::Approved);
    let rejected = decision("arn:aws:iam::1:role/Lead", RequestVerdict::Rejected { reason: "no budget".into() });
    assert_eq!(state_of(&r, Some(&rejected), t0()), RequestState::Rejected { reason: "no budget".into() });
    let cancelled = Request { cancelled_at: Some(t0()), ..request() };
    assert_eq!(state_of(&cancelled, Some(&approved), t0()), RequestState::Cancelled);
    // The latest start is 12 - 3 = 9 days on.
    assert_eq!(state_of(&r, Some(&approved), t0() + Duration::days(9)), RequestState::Approved);
    assert_eq!(state_of(&r, Some(&approved), t0() + Duration::days(9) + Duration::seconds(1)), RequestState::Expired);
    // A consumed approval is final, whatever the requester wrote since.
    let consumed = RequestDecision { consumed_by: Some("request-7f3a2c9b/cb-1".into()), ..approved };
    assert_eq!(
        state_of(&cancelled, Some(&consumed), t0() + Duration::days(30)),
        RequestState::Bought { intent: "request-7f3a2c9b/cb-1".into() }
    );
}

#[test]
fn the_one_shot_rule_buys_one_block_in_the_window_under_the_cap() {
    let rule = request().as_rule();
    assert_eq!(rule.id, "request-7f3a2c9b");
    assert_eq!(rule.request.as_ref().map(|k| k.id.as_str()), Some("rq-7f3a2c9b"));
    assert_eq!((rule.max_blocks_held, rule.max_purchases_per_month), (1, 1));
    assert_eq!(rule.monthly_budget, usd("4723.20"));
    assert_eq!(
        rule.start_window,
        StartWindow::Absolute { earliest: t0() + Duration::days(2), latest: t0() + Duration::days(9) }
    );
    assert_eq!(rule.team.as_deref(), Some("research"));
}

#[test]
fn team_approvals_are_parsed_and_judge_decisions() {
    let teams = parse_team_approvals(
        "research=5000 arn:aws:iam::111122223333:role/ResearchLead; infra=0 arn:aws:iam::111122223333:user/ops",
    )
    .unwrap();
    assert_eq!(teams["research"].auto_up_to, usd("5000"));
    assert!(decision_allowed(&decision(AUTO_APPROVER, RequestVerdict::Approved), &teams).is_ok());
    let lead = "arn:aws:sts::111122223333:assumed-role/ResearchLead/ada-session";
    assert!(
        decision_allowed(&decision(lead, RequestVerdict::Approved), &teams).is_ok(),
        "a session of the role approves"
    );
    let stranger = decision("arn:aws:iam::111122223333:role/Intern", RequestVerdict::Approved);
    assert!(matches!(decision_allowed(&stranger, &teams), Err(RequestError::ApproverNotAllowed { .. })));
    let low = parse_team_approvals("research=100").unwrap();
    assert!(
        decision_allowed(&decision(AUTO_APPROVER, RequestVerdict::Approved), &low).is_err(),
        "over the automatic limit"
    );
    for bad in ["research", "Research=1", "research=1 role/x", "research=1; research=2"] {
        assert!(parse_team_approvals(bad).is_err(), "{bad}");
    }
    assert!(parse_team_approvals("").unwrap().is_empty());
}

/// The teams' settings in words, and what is wrong with them against the teams' budgets: no
/// budget, an automatic limit past the month's budget, no way to approve.
#[test]
fn team_approvals_are_described_and_checked_against_the_budgets() {
    let teams = parse_team_approvals(
        "research=500 arn:aws:iam::111122223333:role/ResearchLead; vision=9000 arn:aws:iam::1:user/kim; idle=0; lone=100",
    )
    .unwrap();
    assert_eq!(
        teams["research"].describe(),
        "approved on its own up to 500.00 USD; beyond it by arn:aws:iam::111122223333:role/ResearchLead"
    );
    assert_eq!(teams["idle"].describe(), "approved on its own up to 0.00 USD; no one approves beyond it");
    let usd = |s: &str| Money::parse(s, "USD").unwrap();
    let budgets: BTreeMap<String, Money> =
        [("research", "20000"), ("vision", "5000"), ("idle", "100")].map(|(t, m)| (t.to_string(), usd(m))).into();
    let said: Vec<String> =
        team_approval_problems(&teams, &budgets).into_iter().map(|(s, t)| format!("{s}: {t}")).collect();
    assert_eq!(
        said,
        [
            "team idle: no request is ever approved (an automatic limit of 0 and no approver): name an approver in TeamApprovals",
            "team lone takes requests but has no TeamBudgets entry: its requests buy nothing: give it a budget in TeamBudgets",
            "team vision approves requests on its own up to 9000.00 USD, more than its monthly budget of 5000.00 USD: \
lower its automatic limit in TeamApprovals",
        ]
    );
    assert!(team_approval_problems(&BTreeMap::new(), &budgets).is_empty());
}
