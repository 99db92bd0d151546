use super::*;
use chrono::TimeZone;
use rust_decimal_macros::dec;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

const GOOD: &str = r#"
id = "p5-weekly"
description = "a week of H100s for the pretraining team"
mode = "live"
regions = ["us-east-1", "us-west-2"]
instance_types = ["p5.48xlarge", "p5e.48xlarge"]
instance_counts = [1, 2, 4]
durations_days = [7, 14, 21]
max_price_per_accelerator_hour = "3.10"
max_total_fee = 60000
monthly_budget = "120000.50"
max_blocks_held = 2
max_purchases_per_month = 3
rebuy_on_payment_failure = true
start_window = { earliest_in_days = 1, latest_in_days = 21 }
tags = { team = "llm", "karpenter.sh/nodepool" = "train" }
extend = { max_price_per_accelerator_hour = 2.9, max_days = 7 }
"#;

fn problems(text: &str) -> Vec<(String, String)> {
    match Rule::from_toml(text, now()) {
        Err(RuleError::Invalid { problems, .. }) => problems.into_iter().map(|p| (p.field, p.message)).collect(),
        other => panic!("expected validation problems, got {other:?}"),
    }
}

fn fields(text: &str) -> Vec<String> {
    problems(text).into_iter().map(|(f, _)| f).collect()
}

fn with(line: &str) -> String {
    // Replaces the line with the same key in GOOD.
    let key = line.split('=').next().unwrap().trim();
    GOOD.lines()
        .map(|l| if l.split('=').next().unwrap().trim() == key { line } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_good_rule_parses_with_defaults() {
    let r = Rule::from_toml(GOOD, now()).unwrap();
    assert_eq!(r.id, "p5-weekly");
    assert_eq!(r.mode, Mode::Live);
    assert_eq!(r.regions.len(), 2);
    assert_eq!(r.instance_counts, vec![1, 2, 4]);
    assert_eq!(r.durations_days, vec![7, 14, 21]);
    assert_eq!(r.max_price_per_accelerator_hour, dec!(3.10));
    assert_eq!(r.max_total_fee.unwrap().amount(), dec!(60000));
    assert_eq!(r.monthly_budget.amount(), dec!(120000.50));
    assert_eq!(r.instance_platform, "Linux/UNIX");
    assert!(r.enabled);
    assert_eq!(r.tags["team"], "llm");
    let x = r.extend.unwrap();
    assert_eq!(x.max_price_per_accelerator_hour, dec!(2.9));
    assert_eq!(x.decide_hours_before_end, 48);
    let (a, b) = r.start_window.resolve(now());
    assert_eq!(a, now() + Duration::days(1));
    assert_eq!(b, now() + Duration::days(21));
}

#[test]
fn mode_defaults_to_dry_run() {
    let text = GOOD.replace("mode = \"live\"\n", "");
    assert_eq!(Rule::from_toml(&text, now()).unwrap().mode, Mode::DryRun);
    assert_eq!(Mode::Live.and(Mode::DryRun), Mode::DryRun);
    assert_eq!(Mode::DryRun.and(Mode::Live), Mode::DryRun);
    assert_eq!(Mode::Live.and(Mode::Live), Mode::Live);
}

#[test]
fn counts_out_of_range() {
    let p = problems(&with("instance_counts = [0, 65, 2, 2]"));
    assert_eq!(
        p,
        vec![
            ("instance_counts[0]".into(), "0 is not between 1 and 64 instances".into()),
            ("instance_counts[1]".into(), "65 is not between 1 and 64 instances".into()),
            ("instance_counts[3]".into(), "is listed twice".into()),
        ]
    );
}

#[test]
fn durations_the_market_does_not_sell() {
    assert_eq!(
        fields(&with("durations_days = [0, 15, 28, 189, 182]")),
        vec!["durations_days[0]", "durations_days[1]", "durations_days[3]"]
    );
    assert!(is_sellable_duration_days(14) && is_sellable_duration_days(182) && !is_sellable_duration_days(183));
}

#[test]
fn empty_lists() {
    let text =
        with("regions = []").replace("instance_types = [\"p5.48xlarge\", \"p5e.48xlarge\"]", "instance_types = []");
    let text = text
        .replace("instance_counts = [1, 2, 4]", "instance_counts = []")
        .replace("durations_days = [7, 14, 21]", "durations_days = []");
    let p = problems(&text);
    for f in ["regions", "instance_types", "instance_counts", "durations_days"] {
        assert!(p.contains(&(f.into(), "must list at least one value".into())), "{f}: {p:?}");
    }
}

#[test]
fn unknown_region_syntax_and_instance_type() {
    let p = problems(&with("regions = [\"us-east-1\", \"US-WEST-2\", \"mars-1\"]"));
    assert_eq!(p.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), vec!["regions[1]", "regions[2]"]);
    assert!(p[0].1.contains("not an AWS region name"));
    assert_eq!(fields(&with("instance_types = [\"p5\"]")), vec!["instance_types[0]"]);
}

#[test]
fn start_beyond_eight_weeks() {
    let p = problems(&with("start_window = { earliest_in_days = 1, latest_in_days = 60 }"));
    assert_eq!(
        p,
        vec![("start_window.latest_in_days".into(), "60 days is beyond the 8 weeks (56 days) EC2 sells ahead".into())]
    );
    assert_eq!(
        fields(&with("start_window = { earliest = 2027-03-01T11:30:00Z, latest = 2027-03-05T11:30:00Z }")),
        vec!["start_window.earliest"]
    );
}

#[test]
fn start_window_shapes() {
    assert_eq!(
        fields(&with("start_window = { earliest_in_days = -1, latest_in_days = -2 }")),
        vec!["start_window.earliest_in_days", "start_window.latest_in_days"]
    );
    assert_eq!(fields(&with("start_window = { earliest_in_days = 1 }")), vec!["start_window"]);
    assert_eq!(
        fields(&with("start_window = { earliest_in_days = 1, latest_in_days = 3, earliest = 2026-12-02T00:00:00Z }")),
        vec!["start_window"]
    );
    assert_eq!(fields(&with("start_window = { }")), vec!["start_window"]);
    assert_eq!(
        fields(&with("start_window = { earliest = \"tomorrow\", latest = 2026-12-09T00:00:00Z }")),
        vec!["start_window.earliest"]
    );
    assert_eq!(
        fields(&with("start_window = { earliest = 2026-11-01T00:00:00Z, latest = 2026-11-02T00:00:00Z }")),
        vec!["start_window.latest"]
    );
    let r = Rule::from_toml(
        &with("start_window = { earliest = \"2026-12-02T00:00:00Z\", latest = 2026-12-09T00:00:00Z }"),
        now(),
    )
    .unwrap();
    assert!(matches!(r.start_window, StartWindow::Absolute { .. }));
    // An absolute window is clamped to [now, now + 8 weeks] when resolved.
    let (a, _) = r.start_window.resolve(now() + Duration::days(3));
    assert_eq!(a, now() + Duration::days(3));
}

#[test]
fn negative_and_zero_prices() {
    let p = problems(&with("max_price_per_accelerator_hour = \"-1\""));
    assert_eq!(p, vec![("max_price_per_accelerator_hour".into(), "must be greater than zero (got -1)".into())]);
    assert_eq!(fields(&with("monthly_budget = 0")), vec!["monthly_budget"]);
    assert_eq!(fields(&with("max_total_fee = \"abc\"")), vec!["max_total_fee"]);
    assert_eq!(fields(&with("max_total_fee = 200000")), vec!["max_total_fee"]);
}

#[test]
fn other_fields() {
    assert_eq!(fields(&with("id = \"Has Spaces\"")), vec!["id"]);
    assert_eq!(fields(&with("max_blocks_held = 0")), vec!["max_blocks_held"]);
    assert_eq!(fields(&with("max_purchases_per_month = 0")), vec!["max_purchases_per_month"]);
    let text = GOOD.replace("id = \"p5-weekly\"", "id = \"x\"\ninstance_platform = \"BeOS\"\ncurrency = \"usd\"");
    assert_eq!(fields(&text), vec!["currency", "instance_platform"]);
    assert_eq!(
        fields(&with("tags = { \"capblock:rule\" = \"x\", \"aws:foo\" = \"y\" }")),
        vec!["tags.aws:foo", "tags.capblock:rule"]
    );
    assert_eq!(
        fields(&with("extend = { max_price_per_accelerator_hour = 0, max_days = 15, decide_hours_before_end = 0 }")),
        vec!["extend.max_price_per_accelerator_hour", "extend.max_days", "extend.decide_hours_before_end"]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = r#"
id = ""
regions = []
instance_types = ["x"]
instance_counts = [0]
durations_days = [200]
start_window = { earliest_in_days = 3, latest_in_days = 2 }
max_price_per_accelerator_hour = -3
monthly_budget = 0
"#;
    let err = Rule::from_toml(text, now()).unwrap_err();
    let RuleError::Invalid { problems, .. } = &err else { panic!("{err:?}") };
    assert_eq!(problems.len(), 8, "{problems:?}");
    let shown = err.to_string();
    assert!(shown.starts_with("rule \"\" has 8 problem(s):\n  - id: "), "{shown}");
}

#[test]
fn syntax_errors_and_unknown_fields() {
    assert!(matches!(Rule::from_toml("id = ", now()), Err(RuleError::Syntax(_))));
    let err = Rule::from_toml(&format!("{GOOD}\nmax_price = 3"), now()).unwrap_err();
    assert!(matches!(&err, RuleError::Syntax(m) if m.contains("unknown field `max_price`")), "{err}");
    let err = Rule::from_toml(&GOOD.replace("monthly_budget = \"120000.50\"", ""), now()).unwrap_err();
    assert!(matches!(&err, RuleError::Syntax(m) if m.contains("missing field `monthly_budget`")), "{err}");
}

#[test]
fn rule_round_trips_through_json() {
    let r = Rule::from_toml(GOOD, now()).unwrap();
    let j = serde_json::to_string(&r).unwrap();
    let back: Rule = serde_json::from_str(&j).unwrap();
    assert_eq!(back, r);
}

#[test]
fn approval_mode_asks_in_a_live_stack_and_stays_dry_in_a_dry_run_stack() {
    let text = GOOD.replace("mode = \"live\"", "mode = \"approval\"");
    assert_eq!(Rule::from_toml(&text, now()).unwrap().mode, Mode::Approval);
    assert_eq!(Mode::Live.and(Mode::Approval), Mode::Approval);
    assert_eq!(Mode::DryRun.and(Mode::Approval), Mode::DryRun);
    assert_eq!(Mode::Approval.and(Mode::DryRun), Mode::DryRun);
    assert_eq!("approval".parse::<Mode>().unwrap().as_str(), "approval");
    assert!("ask".parse::<Mode>().unwrap_err().contains("approval"));
}
