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
fn mode_defaults_to_dry_run_and_the_stricter_of_stack_and_rule_wins() {
    let text = GOOD.replace("mode = \"live\"\n", "");
    assert_eq!(Rule::from_toml(&text, now()).unwrap().mode, Mode::DryRun);
    // (stack, rule) -> what runs: a dry-run stack keeps every rule dry; approval asks in a live one.
    for (stack, rule, runs) in [
        (Mode::Live, Mode::DryRun, Mode::DryRun),
        (Mode::DryRun, Mode::Live, Mode::DryRun),
        (Mode::Live, Mode::Live, Mode::Live),
        (Mode::Live, Mode::Approval, Mode::Approval),
        (Mode::DryRun, Mode::Approval, Mode::DryRun),
        (Mode::Approval, Mode::DryRun, Mode::DryRun),
    ] {
        assert_eq!(stack.and(rule), runs, "{stack:?} stack, {rule:?} rule");
    }
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

/// A threshold of 1e-28 was accepted and overflowed every ratio the planner takes to it:
/// every amount a rule sets lies between a cent and a sane maximum, named by its field.
#[test]
fn amounts_are_bounded_below_and_above() {
    let tiny = "\"0.0000000000000000000000000001\"";
    let p = problems(&with(&format!("max_price_per_accelerator_hour = {tiny}")));
    assert_eq!(
        p,
        vec![(
            "max_price_per_accelerator_hour".into(),
            "must be at least 0.01 (got 0.0000000000000000000000000001)".into()
        )]
    );
    let p = problems(&with("max_price_per_accelerator_hour = 10000.01"));
    assert_eq!(p, vec![("max_price_per_accelerator_hour".into(), "must be at most 10000 (got 10000.01)".into())]);
    assert!(Rule::from_toml(&with("max_price_per_accelerator_hour = \"0.01\""), now()).is_ok());
    assert!(Rule::from_toml(&with("max_price_per_accelerator_hour = 10000"), now()).is_ok());
    assert_eq!(fields(&with(&format!("max_total_fee = {tiny}"))), vec!["max_total_fee"]);
    assert_eq!(fields(&with(&format!("monthly_budget = {tiny}"))), vec!["monthly_budget"]);
    let tiny_extend = format!("extend = {{ max_price_per_accelerator_hour = {tiny}, max_days = 7 }}");
    assert_eq!(fields(&with(&tiny_extend)), vec!["extend.max_price_per_accelerator_hour"]);
    // `unlimited` lifts the usual maximum of a budget, never the hard one.
    let huge = with("monthly_budget = \"79228162514264337593543950335\"");
    let p = problems(&format!("{huge}\nunlimited = true"));
    assert_eq!(
        p,
        vec![("monthly_budget".into(), "must be at most 1000000000000 (got 79228162514264337593543950335)".into())]
    );
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
fn approval_mode_is_spelled_approval() {
    let text = GOOD.replace("mode = \"live\"", "mode = \"approval\"");
    assert_eq!(Rule::from_toml(&text, now()).unwrap().mode, Mode::Approval);
    assert_eq!("approval".parse::<Mode>().unwrap().as_str(), "approval");
    assert!("ask".parse::<Mode>().unwrap_err().contains("approval"));
}

#[test]
fn regions_must_be_known_unless_the_rule_allows_unknown_ones() {
    let p = problems(&with("regions = [\"us-east-1\", \"us-east-9\", \"ap-southeast-7\"]"));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "regions[1]");
    assert!(
        p[0].1.contains("\"us-east-9\" is not a region capblock knows") && p[0].1.contains("allow_unknown_regions")
    );
    let text = format!("{}\nallow_unknown_regions = true", with("regions = [\"us-east-1\", \"us-east-9\"]"));
    let r = Rule::from_toml(&text, now()).unwrap();
    assert_eq!(r.regions.len(), 2);
    assert!(r.allow_unknown_regions);
    // The override never lets a malformed name through.
    let text = format!("{}\nallow_unknown_regions = true", with("regions = [\"mars\"]"));
    assert_eq!(fields(&text), vec!["regions[0]"]);
}

#[test]
fn a_rule_asks_at_most_256_questions_per_scan() {
    // 10,000 well-formed regions, allowed: the product is refused with its count and the limit.
    let many: Vec<String> = (0..10_000).map(|i| format!("\"xx-test-{}\"", i % 100)).collect();
    let text = format!("{}\nallow_unknown_regions = true", with(&format!("regions = [{}]", many.join(", "))));
    let p = problems(&text);
    let q: Vec<_> = p.iter().filter(|(f, _)| f.starts_with("regions x")).collect();
    assert_eq!(q.len(), 1, "{p:?}");
    assert!(q[0].1.contains("asks 1800 questions per scan (100 x 2 x 3 x 3); at most 256"), "{}", q[0].1);
    // 14 x 2 x 3 x 3 = 252 passes; 15 regions = 270 does not.
    let known = |n: usize| {
        crate::domain::ids::KNOWN_REGIONS[..n].iter().map(|r| format!("\"{r}\"")).collect::<Vec<_>>().join(", ")
    };
    assert!(Rule::from_toml(&with(&format!("regions = [{}]", known(14))), now()).is_ok());
    assert_eq!(
        fields(&with(&format!("regions = [{}]", known(15)))),
        vec!["regions x instance_types x instance_counts x durations_days"]
    );
}

#[test]
fn a_rule_names_at_most_16_regions() {
    let one_question_each = |regions: &str| {
        with(&format!("regions = [{regions}]"))
            .replace("instance_types = [\"p5.48xlarge\", \"p5e.48xlarge\"]", "instance_types = [\"p5.48xlarge\"]")
            .replace("instance_counts = [1, 2, 4]", "instance_counts = [1]")
            .replace("durations_days = [7, 14, 21]", "durations_days = [7]")
    };
    let known = |n: usize| {
        crate::domain::ids::KNOWN_REGIONS[..n].iter().map(|r| format!("\"{r}\"")).collect::<Vec<_>>().join(", ")
    };
    assert_eq!(Rule::from_toml(&one_question_each(&known(16)), now()).unwrap().regions.len(), 16);
    let p = problems(&one_question_each(&known(17)));
    assert_eq!(
        p,
        vec![("regions".to_string(), "lists 17 regions; at most 16: split it into several rules".to_string())]
    );
    // The audit's rule: 256 well-formed unknown regions, allowed, one question each (256, within
    // the questions' bound): refused for its regions.
    let many: Vec<String> = (0..256).map(|i| format!("\"xx-test{}-{}\"", ["a", "b", "c"][i / 99], i % 99)).collect();
    let text = format!("{}\nallow_unknown_regions = true", one_question_each(&many.join(", ")));
    assert_eq!(fields(&text), vec!["regions"]);
}

#[test]
fn days_near_i64_max_are_a_field_problem_not_a_panic() {
    for (e, l) in [(i64::MAX, i64::MAX), (i64::MAX - 1, i64::MAX), (1, i64::MAX), (i64::MIN, i64::MAX), (i64::MIN, 3)] {
        let p = fields(&with(&format!("start_window = {{ earliest_in_days = {e}, latest_in_days = {l} }}")));
        assert!(!p.is_empty() && p.iter().all(|f| f.starts_with("start_window.")), "{e} {l}: {p:?}");
    }
    assert_eq!(
        fields(&with(
            "start_window = { earliest_in_days = 9223372036854775806, latest_in_days = 9223372036854775807 }"
        )),
        vec!["start_window.earliest_in_days", "start_window.latest_in_days"]
    );
    // Absolute windows at the edges of time, and a `now` at the end of it.
    let text = with("start_window = { earliest = 0001-01-01T00:00:00Z, latest = 9999-12-31T23:59:59Z }");
    let r = Rule::from_toml(&text, now()).unwrap();
    let (a, b) = r.start_window.resolve(DateTime::<Utc>::MAX_UTC);
    assert!(a >= b, "nothing to ask at the end of time");
    let r = Rule::from_toml(GOOD, now()).unwrap();
    let _ = r.start_window.resolve(DateTime::<Utc>::MAX_UTC);
    assert!(RuleSpec::from_toml(&text).unwrap().validate(DateTime::<Utc>::MAX_UTC).is_err());
}

#[test]
fn a_long_description_is_refused_with_its_limit() {
    let long = "x".repeat(20 * 1024 * 1024);
    let p = problems(&with(&format!("description = \"{long}\"")));
    assert_eq!(p, vec![("description".into(), format!("is {} characters long; at most 1024", long.len()))]);
    // Characters, not bytes: 1024 of "é" are fine.
    assert!(Rule::from_toml(&with(&format!("description = \"{}\"", "é".repeat(1024))), now()).is_ok());
}

#[test]
fn limits_past_the_sane_maximums_need_unlimited() {
    let text = with("max_blocks_held = 11")
        .replace("max_purchases_per_month = 3", "max_purchases_per_month = 4294967295")
        .replace("monthly_budget = \"120000.50\"", "monthly_budget = \"1000000.01\"");
    let p = problems(&text);
    assert_eq!(
        p,
        vec![
            ("monthly_budget".into(), "1000000.01 is more than 1000000; set unlimited = true if you mean it".into()),
            ("max_blocks_held".into(), "11 is more than 10; set unlimited = true if you mean it".into()),
            (
                "max_purchases_per_month".into(),
                "4294967295 is more than 10; set unlimited = true if you mean it".into()
            ),
        ]
    );
    let r = Rule::from_toml(&format!("{text}\nunlimited = true"), now()).unwrap();
    assert!(r.unlimited);
    assert_eq!((r.max_blocks_held, r.max_purchases_per_month), (11, 4294967295));
    // The maximums themselves are fine without it.
    let text = with("max_blocks_held = 10")
        .replace("max_purchases_per_month = 3", "max_purchases_per_month = 10")
        .replace("monthly_budget = \"120000.50\"", "monthly_budget = 1000000");
    assert!(Rule::from_toml(&text, now()).is_ok());
}

#[test]
fn tags_follow_ec2s_rules() {
    let p = problems(&with(
        "tags = { \"AWS:x\" = \"a\", \"Capblock:intent\" = \"b\", \"bad<!here>key\" = \"c\", ok = \"line\\nbreak\", tab = \"a\\tb\" }",
    ));
    let fields: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        vec!["tags.AWS:x", "tags.Capblock:intent", "tags.bad<!here>key", "tags.ok", "tags.tab"],
        "{p:?}"
    );
    assert!(p[0].1.contains("\"aws:\" (in any case) are reserved"), "{}", p[0].1);
    assert!(p[1].1.contains("\"capblock:\" (in any case) are reserved"), "{}", p[1].1);
    assert_eq!(p[2].1, "key has '<': tags hold only letters, digits, spaces and _ . : / = + - @");
    assert_eq!(p[3].1, "value has '\\n': tags hold only letters, digits, spaces and _ . : / = + - @");
    // Lengths in characters; Unicode letters, spaces and the allowed punctuation pass.
    let ok = format!(
        "tags = {{ \"{}\" = \"{}\", \"Équipe données\" = \"llm_train.v2:a/b=c+d-e@f\", empty = \"\" }}",
        "k".repeat(128),
        "é".repeat(256)
    );
    assert!(Rule::from_toml(&with(&ok), now()).is_ok(), "{:?}", Rule::from_toml(&with(&ok), now()));
    let long = format!("tags = {{ \"{}\" = \"{}\" }}", "k".repeat(129), "v".repeat(257));
    let p = problems(&with(&long));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].0.ends_with('…') && p[0].0.len() < 80, "a long key is cut in the field name: {}", p[0].0);
}

#[test]
fn actions_validate_with_the_rule_and_name_their_problems() {
    let good = format!(
        "{GOOD}\n[[actions]]\nkind = \"publish_parameter\"\n[[actions]]\nkind = \"scale_group\"\ngroup = \"trainers\"\ndesired = 4\ndown_lead_minutes = 45\n[[actions]]\nkind = \"run_command\"\ndocument = \"capblock-checkpoint\"\nlead_minutes = 30\n"
    );
    let r = Rule::from_toml(&good, now()).unwrap();
    assert_eq!(r.actions.len(), 3);
    assert!(Rule::from_toml(GOOD, now()).unwrap().actions.is_empty(), "no key, no actions");

    // The shortest block: 7 days less the 12 h tolerance; a lead must end before its termination.
    let room = 7 * 24 * 60 - 12 * 60 - 30;
    let bad = format!(
        "{GOOD}\n[[actions]]\nkind = \"run_command\"\ndocument = \"\"\nlead_minutes = 30\n[[actions]]\nkind = \"run_command\"\ndocument = \"doc\"\nlead_minutes = {room}\n[[actions]]\nkind = \"scale_group\"\ngroup = \"g\"\ndesired = 5\ndown_lead_minutes = 30\n"
    );
    let p = problems(&bad);
    let f: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(f, ["actions[0].document", "actions[1].lead_minutes", "actions[2].desired"], "{p:?}");
    assert!(p[1].1.contains("longer than the block"), "{p:?}");
}

/// GOOD with its instance lines replaced by `lines` (UltraServer keys, or both kinds).
fn ultra(lines: &str) -> String {
    GOOD.lines()
        .filter(|l| !l.starts_with("instance_types") && !l.starts_with("instance_counts"))
        .chain(lines.lines())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn an_ultraserver_rule_asks_for_whole_ultraservers() {
    let r = Rule::from_toml(
        &ultra("ultraserver_types = [\"u-trn2x64\", \"u-p6e-gb200x72\"]\nultraserver_counts = [1, 2]"),
        now(),
    )
    .unwrap();
    assert!(r.instance_types.is_empty() && r.instance_counts.is_empty());
    let asks = r.asks();
    assert_eq!(asks.len(), 4);
    // 2 x u-p6e-gb200x72 = 36 p6e-gb200.36xlarge, asked as UltraServers.
    let big = asks.iter().find(|a| a.ultraservers.is_some_and(|u| u.kind.as_str() == "u-p6e-gb200x72" && u.count == 2));
    let big = big.unwrap();
    assert_eq!((big.instance_type.as_str(), big.instance_count), ("p6e-gb200.36xlarge", 36));
    assert_eq!(
        r.priced_types().iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        ["p6e-gb200.36xlarge", "trn2u.48xlarge"]
    );
    // A stored rule from before these keys still loads (serde defaults).
    let mut v = serde_json::to_value(Rule::from_toml(GOOD, now()).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("ultraserver_types");
    v.as_object_mut().unwrap().remove("ultraserver_counts");
    assert!(serde_json::from_value::<Rule>(v).unwrap().ultraserver_types.is_empty());
}

#[test]
fn ultraserver_combinations_ec2_refuses_are_named() {
    // Both kinds at once: EC2 refuses UltraserverType with InstanceType or InstanceCount.
    let both = format!("{GOOD}\nultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1]");
    assert_eq!(fields(&both), ["ultraserver_types"]);
    let p = problems(&ultra("ultraserver_types = [\"u-nope\", \"u-trn2x64\"]\nultraserver_counts = [0, 17, 1]"));
    assert_eq!(p[0].0, "ultraserver_types[0]");
    assert!(p[0].1.contains("unknown UltraServer type"));
    assert_eq!(
        p.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
        ["ultraserver_types[0]", "ultraserver_counts[0]", "ultraserver_counts[1]"]
    );
    // 15 x u-p6e-gb200x72 is 270 instances: more than an account may hold.
    let p = problems(&ultra("ultraserver_types = [\"u-p6e-gb200x72\"]\nultraserver_counts = [14, 15]"));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].0, "ultraserver_counts[1]");
    assert!(p[0].1.contains("270 instances"), "{p:?}");
    // Types without counts, and the reverse.
    assert_eq!(fields(&ultra("ultraserver_types = [\"u-trn2x64\"]")), ["ultraserver_counts"]);
    assert_eq!(fields(&ultra("ultraserver_counts = [1]")), ["ultraserver_types"]);
    // An instance type sold only inside UltraServers, asked as instances.
    let p = problems(&with("instance_types = [\"trn2u.48xlarge\"]"));
    assert_eq!(p[0].0, "instance_types[0]");
    assert!(p[0].1.contains("ultraserver_types = [\"u-trn2x64\"]"), "{p:?}");
}

#[test]
fn an_ultraserver_rules_actions_are_judged_by_its_blocks_size_and_60_minute_lead() {
    // 2 x u-trn2x64 is 8 trn2u.48xlarge: a group may be scaled to 8 (not capped at 1).
    let rule = |actions: &str| {
        format!(
            "{}\n{actions}",
            ultra("ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1, 2]")
                .replace("durations_days = [7, 14, 21]", "durations_days = [1]")
                .replace("extend = { max_price_per_accelerator_hour = 2.9, max_days = 7 }", "")
        )
    };
    let scale = |desired: u32, lead: u32| {
        rule(&format!(
            "duration_tolerance_hours = 0\n[[actions]]\nkind = \"scale_group\"\ngroup = \"g\"\ndesired = {desired}\ndown_lead_minutes = {lead}\n"
        ))
    };
    let r = Rule::from_toml(&scale(8, 30), now()).unwrap();
    assert_eq!(r.actions, [Action::ScaleGroup { group: "g".into(), desired: 8, down_lead_minutes: 30 }]);
    assert_eq!(fields(&scale(9, 30)), ["actions[0].desired"]);
    // A 1-day block's instances end 60 minutes before its end: 1380 minutes of room, not 1410.
    assert!(Rule::from_toml(&scale(1, 1379), now()).is_ok());
    let p = problems(&scale(1, 1400));
    assert_eq!(p.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(), ["actions[0].down_lead_minutes"]);
    assert!(p[0].1.contains("1380 minutes"), "{p:?}");
}

#[test]
fn a_rule_has_at_most_ten_actions() {
    let action =
        |i: usize| format!("[[actions]]\nkind = \"run_command\"\ndocument = \"doc\"\nlead_minutes = {}\n", i + 1);
    let ten: String = (0..10).map(action).collect();
    assert_eq!(Rule::from_toml(&format!("{GOOD}\n{ten}"), now()).unwrap().actions.len(), 10);
    let many: String = (0..300).map(action).collect();
    let p = problems(&format!("{GOOD}\n{many}"));
    assert_eq!(p.len(), 1, "one problem, not one per action: {p:?}");
    assert_eq!(p[0].0, "actions");
    assert!(p[0].1.contains("at most 10"), "{p:?}");
}

/// A misspelt key is named with the key it was probably meant to be.
#[test]
fn an_unknown_key_suggests_the_closest_one() {
    let e = RuleSpec::from_toml("id = \"a\"\nmonthly_budgett = \"10\"\n").unwrap_err().to_string();
    assert!(e.contains("unknown field `monthly_budgett`") && e.contains("did you mean `monthly_budget`?"), "{e}");
    let e = RuleSpec::from_toml("id = \"a\"\nzzzz = 1\n").unwrap_err().to_string();
    assert!(e.contains("unknown field `zzzz`") && !e.contains("did you mean"), "{e}");
}

/// Every unknown key is named in one run, in the file's order (not the alphabet's), each with
/// its line and its likely meaning.
#[test]
fn every_unknown_key_is_named_at_once_in_file_order() {
    let text = "id = \"a\"\nregionz = [\"us-east-1\"]\nmonthly_budgett = \"10\"\nabc = 1\n";
    let e = RuleSpec::from_toml(text).unwrap_err().to_string();
    let at = |needle: &str| e.find(needle).unwrap_or_else(|| panic!("{needle:?} missing from {e}"));
    let (regions, budget, abc) = (
        at("unknown field `regionz` at line 2 (did you mean `regions`?)"),
        at("unknown field `monthly_budgett` at line 3 (did you mean `monthly_budget`?)"),
        at("unknown field `abc` at line 4"),
    );
    assert!(regions < budget && budget < abc, "{e}");
    assert_eq!(e.matches("unknown field").count(), 3, "{e}");
    assert!(e.contains("3 unknown keys:\n  - unknown field `regionz`"), "one per line: {e}");
    // A file that is not TOML keeps the parser's own message.
    let e = RuleSpec::from_toml("id = ").unwrap_err().to_string();
    assert!(!e.contains("unknown field"), "{e}");
}

/// `rules show` prints a stored rule as the file it came from: that text, read and validated
/// again, is the same rule, for every example rule and for one with every optional part set.
#[test]
fn a_rule_shown_as_toml_reads_back_as_the_same_rule() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/examples/rules");
    let mut texts: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    texts.push(
        r#"
id = "everything"
description = "every optional part"
mode = "live"
regions = ["us-east-1", "us-west-2"]
instance_types = ["p5.48xlarge"]
instance_counts = [1, 2]
durations_days = [1, 7]
start_window = { earliest = "2026-12-10T11:30:00Z", latest = "2026-12-20T11:30:00Z" }
max_price_per_accelerator_hour = "3.10"
max_total_fee = 9000
monthly_budget = 20000.5
max_blocks_held = 2
max_purchases_per_month = 3
rebuy_on_payment_failure = true
tags = { team = "llm", "cost-center" = "42" }
extend = { max_price_per_accelerator_hour = 3.5, max_days = 2, decide_hours_before_end = 24 }
duration_tolerance_hours = 6
local_zones = true
"#
        .to_string()
            + crate::domain::handoff::tests::ALL_TOML,
    );
    let mut checked = 0;
    for text in texts {
        let Ok(rule) = Rule::from_toml(&text, now()) else { continue };
        let shown = toml::to_string(&rule.to_spec()).unwrap();
        let again =
            Rule::from_toml(&shown, now() + chrono::Duration::days(1)).unwrap_or_else(|e| panic!("{e}\n{shown}"));
        assert_eq!(again, rule, "{shown}");
        assert!(!shown.contains("description = \"\"") && !shown.contains("ultraserver_types = []"), "{shown}");
        checked += 1;
    }
    assert!(checked >= 5, "the example rules and the full one: {checked}");
}

#[test]
fn a_reservation_group_of_ultraservers_holds_one_instance_type() {
    let group = "\n[[actions]]\nkind = \"reservation_group\"\n";
    // x72 and x36 are both p6e-gb200.36xlarge: one group holds them.
    let one = ultra("ultraserver_types = [\"u-p6e-gb200x72\", \"u-p6e-gb200x36\"]\nultraserver_counts = [1]");
    assert_eq!(Rule::from_toml(&format!("{one}{group}"), now()).unwrap().actions.len(), 1);
    let two = ultra("ultraserver_types = [\"u-trn2x64\", \"u-p6e-gb200x72\"]\nultraserver_counts = [1]");
    let p = problems(&format!("{two}{group}"));
    assert_eq!(p.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(), ["actions[0].kind"]);
    assert!(p[0].1.contains("p6e-gb200.36xlarge, trn2u.48xlarge"), "{p:?}");
    // A rule of instances keeps one too (a group supports every reservation type).
    assert_eq!(Rule::from_toml(&format!("{GOOD}{group}"), now()).unwrap().actions.len(), 1);
}

const OU: &str = "arn:aws:organizations::111111111111:ou/o-abcdef1234/ou-ab12-cdef5678";

#[test]
fn a_rule_names_its_team_and_who_its_blocks_are_shared_with() {
    let text = format!(
        "{GOOD}\nteam = \"vision\"\nshare_with = [\"222222222222\", \"{OU}\"]\nhandoff_account = \"222222222222\""
    );
    let r = Rule::from_toml(&text, now()).unwrap();
    assert_eq!(r.team.as_deref(), Some("vision"));
    assert_eq!(r.share_with.len(), 2);
    assert_eq!(r.handoff_account.as_deref(), Some("222222222222"));
    // `rules show` gives back what the file said.
    let again = r.to_spec().validate(now()).unwrap();
    assert_eq!(again, r);
    // Stored rules from before the keys existed read as no team, no share.
    let old: Rule = serde_json::from_value({
        let mut v = serde_json::to_value(Rule::from_toml(GOOD, now()).unwrap()).unwrap();
        for k in ["team", "share_with", "handoff_account"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    })
    .unwrap();
    assert!(old.team.is_none() && old.share_with.is_empty() && old.handoff_account.is_none());
}

#[test]
fn teams_shares_and_hand_off_accounts_ec2_or_ram_would_refuse_are_named() {
    let p = problems(&format!(
        "{GOOD}\nteam = \"Vision Team\"\nshare_with = [\"12345\", \"222222222222\", \"222222222222\"]"
    ));
    let named: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(named, ["team", "share_with[0]", "share_with[2]"], "{p:?}");
    assert!(p[1].1.contains("inside the Organization") && p[2].1.contains("twice"), "{p:?}");

    // UltraServer blocks cannot be shared (EC2 user guide).
    let p = problems(&ultra(
        "ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1]\nshare_with = [\"222222222222\"]",
    ));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "share_with");
    assert!(p[0].1.contains("cannot share UltraServer"), "{p:?}");

    let too_many: Vec<String> = (0..21).map(|i| format!("\"1111111111{i:02}\"")).collect();
    assert_eq!(fields(&format!("{GOOD}\nshare_with = [{}]", too_many.join(", "))), ["share_with"]);

    // The hand-off account must be one the block is shared with.
    assert_eq!(fields(&format!("{GOOD}\nhandoff_account = \"222222222222\"")), ["handoff_account"]);
    assert_eq!(
        fields(&format!("{GOOD}\nshare_with = [\"333333333333\"]\nhandoff_account = \"222222222222\"")),
        ["handoff_account"]
    );
    assert_eq!(fields(&format!("{GOOD}\nshare_with = [\"{OU}\"]\nhandoff_account = \"22\"")), ["handoff_account"]);
    assert!(
        Rule::from_toml(&format!("{GOOD}\nshare_with = [\"{OU}\"]\nhandoff_account = \"222222222222\""), now()).is_ok()
    );
}

/// The README's first rule buys on a fresh single-account stack: valid, and it names nothing
/// such a stack lacks (a team needs TeamBudgets, `share_with` an Organization, actions their
/// groups and documents).
#[test]
fn the_starter_rule_needs_nothing_but_the_stack() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/examples/rules/starter.toml");
    let rule = Rule::from_toml(&std::fs::read_to_string(path).unwrap(), now()).unwrap();
    assert_eq!(rule.team, None);
    assert!(rule.share_with.is_empty() && rule.actions.is_empty() && rule.handoff_account.is_none());
    assert!(rule.max_total_fee.is_some_and(|f| f.amount() <= rule.monthly_budget.amount()), "{rule:?}");
}

/// A `max_total_fee` below what the rule's cheapest block could cost at a cent an
/// accelerator-hour can never buy anything: refused with the figures and what would work. The
/// cheapest block here is 1 x p5.48xlarge (8 GPUs) for 7 days less the 12 h tolerance: 156 h x 8
/// x 0.01 = 12.48 USD.
#[test]
fn a_max_total_fee_no_block_could_cost_is_refused_with_the_figures() {
    let p = problems(&with("max_total_fee = 12"));
    assert_eq!(p.len(), 1, "{p:?}");
    let (field, message) = &p[0];
    assert_eq!(field, "max_total_fee");
    assert!(message.starts_with("12.00 USD can never buy anything"), "{message}");
    for figure in ["12.48 USD", "1 x p5.48xlarge", "8 accelerators", "for 6d 12h", "0.01 USD per accelerator-hour"] {
        assert!(message.contains(figure), "{figure}: {message}");
    }
    assert!(message.contains("set max_total_fee to at least 12.48, or leave it out"), "{message}");
    // At the least fee it may buy; without a cap too.
    assert!(Rule::from_toml(&with("max_total_fee = \"12.48\""), now()).is_ok());
    let least = Rule::from_toml(GOOD, now()).unwrap().least_fee().unwrap();
    assert_eq!((least.fee, least.hours, least.instance_count, least.accelerators), (dec!(12.48), 156, 1, 8));
    // The tolerance shortens the shortest block: 168 h with none.
    let exact = format!("{}\nduration_tolerance_hours = 0", with("max_total_fee = \"13.40\""));
    let p = problems(&exact);
    assert!(p[0].1.contains("13.44 USD") && p[0].1.contains("for 7d ("), "{p:?}");
    // A type the built-in table does not know proves nothing: not refused.
    let unknown = with("instance_types = [\"p9.48xlarge\"]").replace("max_total_fee = 60000", "max_total_fee = 1");
    let unknown = unknown.replace("regions = [\"us-east-1\", \"us-west-2\"]", "regions = [\"us-east-1\"]");
    match Rule::from_toml(&unknown, now()) {
        Ok(r) => assert_eq!(r.least_fee(), None),
        Err(e) => assert!(!e.to_string().contains("can never buy"), "{e}"),
    }
}

#[test]
fn drought_days_defaults_to_a_week_and_is_bounded() {
    let rule = Rule::from_toml(GOOD, now()).unwrap();
    assert_eq!(rule.drought_days, DEFAULT_DROUGHT_DAYS);
    assert_eq!(Rule::from_toml(&format!("{GOOD}\ndrought_days = 0"), now()).unwrap().drought_days, 0);
    assert_eq!(Rule::from_toml(&format!("{GOOD}\ndrought_days = 60"), now()).unwrap().drought_days, 60);
    for bad in ["-1", "61"] {
        let p = problems(&format!("{GOOD}\ndrought_days = {bad}"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "drought_days");
        assert!(p[0].1.contains("between 0 (never say) and 60 days"), "{p:?}");
    }
    // A stored rule from before the key still loads, with the default.
    let mut json = serde_json::to_value(&rule).unwrap();
    json.as_object_mut().unwrap().remove("drought_days");
    let old: Rule = serde_json::from_value(json).unwrap();
    assert_eq!(old.drought_days, DEFAULT_DROUGHT_DAYS);
    // The spec a person reads back leaves the default out and keeps a set value.
    assert!(!toml::to_string(&rule.to_spec()).unwrap().contains("drought_days"));
    let set = Rule::from_toml(&format!("{GOOD}\ndrought_days = 14"), now()).unwrap();
    assert!(toml::to_string(&set.to_spec()).unwrap().contains("drought_days = 14"));
}

/// A `max_total_fee` below one block at the rule's own threshold is valid but said: the least
/// block here (1 x p5.48xlarge, 8 GPUs, 156 h) costs 3,868.80 USD at 3.10, so a cap of 1,000
/// buys only at 0.80 USD per accelerator-hour or less. At or above one block, nothing is said.
#[test]
fn a_fee_cap_below_one_block_at_the_threshold_is_said_with_the_price_it_buys_at() {
    let rule = Rule::from_toml(&with("max_total_fee = 1000"), now()).unwrap();
    let said = rule.fee_cap_below_threshold().expect("a cap far below one block");
    for figure in [
        "1000.00 USD is below one block at the threshold",
        "1 x p5.48xlarge, 8 accelerators each, for 6d 12h",
        "costs 3868.80 USD at 3.1 USD per accelerator-hour",
        "buys only at 0.80 USD per accelerator-hour or less",
        "at least 3868.80",
    ] {
        assert!(said.contains(figure), "{figure:?}: {said}");
    }
    assert_eq!(Rule::from_toml(&with("max_total_fee = \"3868.80\""), now()).unwrap().fee_cap_below_threshold(), None);
    assert_eq!(Rule::from_toml(GOOD, now()).unwrap().fee_cap_below_threshold(), None);
}

#[test]
fn a_rule_file_may_not_take_a_requests_name() {
    let p = problems(&with("id = \"request-7\""));
    assert!(p.iter().any(|(f, m)| f == "id" && m.contains("reserved for people's requests")), "{p:?}");
}
