//! Property tests (proptest, 256 cases each): the decision and the budget over random markets,
//! rules and interleavings; and the parsers (events, rules, offerings, money) over arbitrary
//! input: they never panic, and every rejection is a typed error that names the problem.

use capblock_core::domain::capacity_event;
use capblock_core::domain::catalog::AcceleratorCatalog;
use capblock_core::domain::decision::{Headroom, decide, room};
use capblock_core::domain::money::{Money, MoneyError};
use capblock_core::domain::offering::{Offering, OfferingError, RawOffering};
use capblock_core::domain::rule::{Rule, RuleError, RuleSpec};
use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use rust_decimal::Decimal;
use serde_json::{Value, json};

const REGIONS: [&str; 4] = ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"];
const TYPES: [(&str, u32); 3] = [("p5.48xlarge", 8), ("p4d.24xlarge", 8), ("trn1.32xlarge", 16)];

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

#[derive(Debug, Clone)]
struct MarketRow {
    region: usize,
    ty: usize,
    count: u32,
    days: u32,
    start_day: i64,
    cents_per_gpu_hour: u32,
    fee_cents_jitter: u32,
}

fn market_row() -> impl Strategy<Value = MarketRow> {
    (0..REGIONS.len(), 0..TYPES.len(), prop::sample::select(vec![1u32, 2, 4]), 1u32..=3, 0i64..20, 150u32..500, 0u32..3)
        .prop_map(|(region, ty, count, days, start_day, cents_per_gpu_hour, fee_cents_jitter)| MarketRow {
            region,
            ty,
            count,
            days,
            start_day,
            cents_per_gpu_hour,
            fee_cents_jitter,
        })
}

fn offering(i: usize, r: &MarketRow) -> Offering {
    let (ty, acc) = TYPES[r.ty];
    let hours = r.days * 24;
    let cents = u64::from(r.cents_per_gpu_hour) * u64::from(acc * r.count * hours) + u64::from(r.fee_cents_jitter);
    let start = now() + Duration::days(r.start_day) + Duration::minutes(11 * 60 + 30);
    Offering {
        id: format!("cb-{i:017x}"),
        region: REGIONS[r.region].parse().unwrap(),
        availability_zone: format!("{}a", REGIONS[r.region]),
        instance_type: ty.parse().unwrap(),
        instance_count: r.count,
        start,
        end: start + Duration::hours(i64::from(hours)),
        duration_hours: hours,
        duration_minutes: 0,
        fee: Money::usd(Decimal::new(cents as i64, 2)).unwrap(),
        ultraserver: false,
        ultraservers: None,
        local_zone: false,
        segments: Vec::new(),
    }
}

#[derive(Debug, Clone)]
struct RuleParams {
    regions: Vec<usize>,
    types: Vec<usize>,
    counts: Vec<u32>,
    days: Vec<u32>,
    threshold_cents: u32,
    budget: u32,
    max_fee: Option<u32>,
    earliest: i64,
    span: i64,
}

fn rule_params() -> impl Strategy<Value = RuleParams> {
    (
        prop::sample::subsequence((0..REGIONS.len()).collect::<Vec<_>>(), 1..=REGIONS.len()),
        prop::sample::subsequence((0..TYPES.len()).collect::<Vec<_>>(), 1..=TYPES.len()),
        prop::sample::subsequence(vec![1u32, 2, 4], 1..=3),
        prop::sample::subsequence(vec![1u32, 2, 3], 1..=3),
        150u32..500,
        // At least 100: a max fee is capped at the budget, and one under the price floor's
        // least block (46.08 at most here) is a validation error, not a market to decide over.
        100u32..60_000,
        prop::option::of(100u32..40_000),
        0i64..10,
        1i64..20,
    )
        .prop_map(|(regions, types, counts, days, threshold_cents, budget, max_fee, earliest, span)| RuleParams {
            regions,
            types,
            counts,
            days,
            threshold_cents,
            budget,
            max_fee,
            earliest,
            span,
        })
}

fn list<T: std::fmt::Display>(v: impl IntoIterator<Item = T>, quote: bool) -> String {
    v.into_iter().map(|x| if quote { format!("\"{x}\"") } else { x.to_string() }).collect::<Vec<_>>().join(", ")
}

fn rule(id: &str, p: &RuleParams) -> Rule {
    // A max fee above the budget is a validation error (it could never apply): cap it.
    let max_fee = p.max_fee.map(|f| format!("max_total_fee = \"{}\"", f.min(p.budget))).unwrap_or_default();
    let text = format!(
        r#"
id = "{id}"
regions = [{}]
instance_types = [{}]
instance_counts = [{}]
durations_days = [{}]
max_price_per_accelerator_hour = "{}"
monthly_budget = "{}"
max_blocks_held = 64
max_purchases_per_month = 1000
unlimited = true
start_window = {{ earliest_in_days = {}, latest_in_days = {} }}
{max_fee}
"#,
        list(p.regions.iter().map(|&i| REGIONS[i]), true),
        list(p.types.iter().map(|&i| TYPES[i].0), true),
        list(p.counts.iter(), false),
        list(p.days.iter(), false),
        Decimal::new(i64::from(p.threshold_cents), 2),
        p.budget,
        p.earliest,
        (p.earliest + p.span).min(56),
    );
    Rule::from_toml(&text, now()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The rule's terms, written out again from scratch (not through `check`).
fn brute_force_eligible(rule: &Rule, o: &Offering, headroom: Decimal) -> Option<Decimal> {
    let acc = TYPES.iter().find(|(t, _)| *t == o.instance_type.as_str())?.1;
    let per_gpu_hour = o.fee.amount() / Decimal::from(acc * o.instance_count * o.duration_hours);
    let (earliest, latest) = rule.start_window.resolve(now());
    let ok = rule.regions.iter().any(|r| r == &o.region)
        && rule.instance_types.iter().any(|t| t == &o.instance_type)
        && rule.instance_counts.contains(&o.instance_count)
        && rule.durations_days.iter().any(|d| d * 24 == o.duration_hours)
        && per_gpu_hour <= rule.max_price_per_accelerator_hour
        && rule.max_total_fee.is_none_or(|m| o.fee.amount() <= m.amount())
        && o.start >= earliest
        && o.start <= latest
        && o.fee.amount() <= headroom;
    ok.then_some(per_gpu_hour)
}

fn usd(d: Decimal) -> Money {
    Money::usd(d).unwrap()
}

/// A rule and a market of `rows` offerings to decide over.
fn market(rows: std::ops::Range<usize>) -> impl Strategy<Value = (Rule, Vec<Offering>)> {
    (prop::collection::vec(market_row(), rows), rule_params())
        .prop_map(|(rows, p)| (rule("r", &p), rows.iter().enumerate().map(|(i, r)| offering(i, r)).collect()))
}

proptest! {
    // Every failing case proptest finds is saved beside this file
    // (tests/proptests.proptest-regressions, committed) and run first from then on, so a case
    // found once fails every `make test` until fixed.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn the_choice_is_the_cheapest_eligible_offering((rule, offerings) in market(0..40), committed in 0u32..60_000) {
        let headroom = room(rule.monthly_budget, usd(Decimal::from(committed)));
        let d = decide(&rule, &offerings, &AcceleratorCatalog::new(), Headroom(headroom), now());
        let eligible: Vec<(Decimal, &Offering)> = offerings
            .iter()
            .filter_map(|o| brute_force_eligible(&rule, o, headroom.amount()).map(|p| (p, o)))
            .collect();
        prop_assert_eq!(d.eligible, eligible.len());
        match (&d.chosen, eligible.iter().map(|(p, _)| *p).min()) {
            (None, None) => {}
            (Some(c), Some(best)) => {
                let mine = brute_force_eligible(&rule, &c.offering, headroom.amount());
                prop_assert!(mine.is_some(), "the chosen offering is eligible");
                prop_assert_eq!(mine.unwrap(), best, "the chosen offering is the cheapest");
                prop_assert!(c.offering.fee.amount() <= headroom.amount());
            }
            (c, best) => prop_assert!(false, "decision {:?} vs brute force {:?}", c, best),
        }
    }

    #[test]
    fn the_same_market_in_any_order_gives_the_same_choice((rule, offerings) in market(0..40), seed in any::<u64>()) {
        let mut shuffled = offerings.clone();
        // Fisher-Yates with a splitmix64 stream: a deterministic shuffle per case.
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            shuffled.swap(i, (z ^ (z >> 31)) as usize % (i + 1));
        }
        let h = Headroom(rule.monthly_budget);
        let a = decide(&rule, &offerings, &AcceleratorCatalog::new(), h, now());
        let b = decide(&rule, &shuffled, &AcceleratorCatalog::new(), h, now());
        prop_assert_eq!(a.chosen.map(|c| c.offering.id), b.chosen.map(|c| c.offering.id));
        prop_assert_eq!(a.eligible, b.eligible);
    }

    /// Whatever the room left in the budgets, the decision never picks an offering that does
    /// not fit it. (That concurrent runs cannot overspend between deciding and reserving is the
    /// store's conditional transaction, tested against DynamoDB in the integration suite.)
    #[test]
    fn the_decision_never_spends_past_the_headroom((rule, offerings) in market(1..30), headroom in 0u32..80_000) {
        let room = usd(Decimal::from(headroom));
        if let Some(c) = decide(&rule, &offerings, &AcceleratorCatalog::new(), Headroom(room), now()).chosen {
            prop_assert!(c.offering.fee.amount() <= room.amount(), "{} > {}", c.offering.fee, room);
        }
    }

    #[test]
    fn money_parse_never_panics_and_names_the_bad_value(amount in ".{0,24}", currency in ".{0,5}") {
        match Money::parse(&amount, &currency) {
            Ok(m) => prop_assert!(m.amount() >= Decimal::ZERO),
            Err(e) => {
                let msg = e.to_string();
                match &e {
                    MoneyError::BadCurrency(c) => {
                        let named = msg.contains(&format!("{c:?}")) && c == &currency;
                        prop_assert!(named, "{}", msg);
                    }
                    MoneyError::NotADecimal(a) | MoneyError::Negative(a) | MoneyError::TooLarge(a) => {
                        let named = msg.contains(&format!("{a:?}")) && a == &amount;
                        prop_assert!(named, "{}", msg);
                    }
                    MoneyError::CurrencyMismatch(..) => prop_assert!(false, "parse never mixes currencies"),
                }
            }
        }
    }

    /// Valid amounts with currencies that spaces around them may or may not rescue: an error
    /// names the currency exactly as given (a lone "\u{b}" was reported as "").
    #[test]
    fn money_parse_names_the_currency_as_given(amount in "[0-9]{1,6}", currency in "[ \t\u{b}\u{c}A-Za-z]{0,5}") {
        match Money::parse(&amount, &currency) {
            Ok(m) => prop_assert_eq!(m.currency().to_string(), currency.trim()),
            Err(e) => {
                prop_assert_eq!(&e, &MoneyError::BadCurrency(currency.clone()));
                prop_assert!(e.to_string().contains(&format!("{currency:?}")), "{}", e);
            }
        }
    }

    /// Every non-negative decimal up to `Money::MAX_AMOUNT` parses exactly; past it, the error
    /// names the amount as given.
    #[test]
    fn money_parse_accepts_every_non_negative_decimal(units in 0i64..i64::MAX, scale in 0u32..10) {
        let d = Decimal::new(units, scale);
        match Money::parse(&d.to_string(), "USD") {
            Ok(m) => prop_assert_eq!(m.amount(), d),
            Err(e) => {
                prop_assert!(d > Money::MAX_AMOUNT, "{} refused: {}", d, e);
                prop_assert_eq!(e, MoneyError::TooLarge(d.to_string()));
            }
        }
    }

    #[test]
    fn offering_parse_never_panics_and_names_the_field(
        id in prop::option::of("[a-z0-9-]{0,20}"),
        ty in prop::option::of(prop_oneof![Just("p5.48xlarge".to_string()), ".{0,16}"]),
        az in prop::option::of("[a-z0-9-]{0,12}"),
        count in prop::option::of(any::<i32>()),
        start in prop::option::of(-100_000i64..100_000),
        len in prop::option::of(-100i64..5000),
        hours in prop::option::of(any::<i32>()),
        fee in prop::option::of(prop_oneof![Just("576.00".to_string()), ".{0,12}"]),
        currency in prop::option::of(prop_oneof![Just("USD".to_string()), ".{0,4}"]),
        ultra in prop::option::of(".{0,6}"),
    ) {
        let start_date = start.map(|m| now() + Duration::minutes(m));
        let raw = RawOffering {
            offering_id: id.clone(),
            instance_type: ty,
            availability_zone: az,
            instance_count: count,
            start_date,
            end_date: start_date.zip(len).map(|(s, l)| s + Duration::hours(l)),
            duration_hours: hours,
            duration_minutes: None,
            upfront_fee: fee,
            currency_code: currency,
            ultraserver_type: ultra,
            ultraserver_count: None,
            zone_type: None,
            segments: Vec::new(),
        };
        match Offering::parse(&"us-east-1".parse().unwrap(), raw) {
            Ok(o) => {
                prop_assert!(o.end > o.start && o.instance_count >= 1 && o.duration_hours >= 1);
                prop_assert_eq!(Some(o.id), id);
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("offering "), "{}", msg);
                match &e {
                    OfferingError::Missing { field, .. } | OfferingError::OutOfRange { field, .. } => {
                        prop_assert!(msg.contains(field), "{}", msg)
                    }
                    OfferingError::Fee { source, .. } => prop_assert!(msg.contains(&source.to_string())),
                    OfferingError::Name { source, .. } => prop_assert!(!source.to_string().is_empty()),
                    OfferingError::EndBeforeStart { .. } => prop_assert!(msg.contains("not after start")),
                    OfferingError::Segment { problem, .. } => prop_assert!(msg.contains(problem.as_str())),
                }
            }
        }
    }

    #[test]
    fn rule_text_never_panics_and_every_problem_names_its_field(text in ".{0,200}") {
        check_rule_text(&text)?;
    }

    #[test]
    fn mangled_rules_never_panic_and_every_problem_names_its_field(
        drop in prop::collection::vec(any::<bool>(), 12),
        values in prop::collection::vec(prop_oneof![
            Just("\"\"".to_string()), Just("-1".to_string()), Just("0".to_string()), Just("[]".to_string()),
            Just("\"abc\"".to_string()), Just("1e400".to_string()), Just("{}".to_string()),
            Just("99999999999999999999".to_string()), Just("\"2026-13-45T00:00:00Z\"".to_string()),
            Just("[\"us-east-1\", \"nowhere-9\"]".to_string()), "\"[ -~]{0,12}\"",
        ], 12),
        replace in prop::collection::vec(any::<bool>(), 12),
    ) {
        let lines = [
            ("id", "\"r1\""), ("regions", "[\"us-east-1\"]"), ("instance_types", "[\"p5.48xlarge\"]"),
            ("instance_counts", "[1]"), ("durations_days", "[1]"), ("max_price_per_accelerator_hour", "\"2.95\""),
            ("monthly_budget", "\"10000\""), ("mode", "\"live\""), ("max_total_fee", "\"5000\""),
            ("currency", "\"USD\""), ("max_blocks_held", "1"),
            ("start_window", "{ earliest_in_days = 1, latest_in_days = 14 }"),
        ];
        let mut text = String::new();
        for (i, (k, v)) in lines.iter().enumerate() {
            if drop[i] && i % 3 == 0 {
                continue;
            }
            let v = if replace[i] { values[i].as_str() } else { v };
            text.push_str(&format!("{k} = {v}\n"));
        }
        check_rule_text(&text)?;
    }

    #[test]
    fn event_parse_never_panics_and_names_the_problem(v in json_value()) {
        check_event(&v)?;
    }

    #[test]
    fn mangled_events_never_panic(
        which in 0usize..3,
        field in prop::sample::select(vec!["detail-type", "source", "detail", "time", "resources", "region", "id", "account"]),
        value in json_value(),
        nested in prop::sample::select(vec!["capacity-reservation-id", "capacityReservationId", "end-date", "endDate", "instance-id", "reservation_id", "lead_minutes"]),
    ) {
        let fixtures = [
            include_str!("../src/domain/capacity_event/fixtures/capacity-block-delivered.json"),
            include_str!("../src/domain/capacity_event/fixtures/capacity-block-expiration-warning.json"),
            include_str!("../src/domain/capacity_event/fixtures/capacity-reservation-instance-interruption-warning.json"),
        ];
        let mut v: Value = serde_json::from_str(fixtures[which]).unwrap();
        v[field] = value.clone();
        check_event(&v)?;
        let mut v: Value = serde_json::from_str(fixtures[which]).unwrap();
        if v["detail"].is_object() {
            v["detail"][nested] = value.clone();
        }
        check_event(&v)?;
        let reminder = json!({"source": "capblock.reminder", "reservation_id": "cr-0123456789abcdef0", "region": "us-east-1", "lead_minutes": 30});
        let mut r = reminder.clone();
        r[nested] = value;
        check_event(&r)?;
    }
}

fn check_rule_text(text: &str) -> Result<(), TestCaseError> {
    match RuleSpec::from_toml(text) {
        Err(RuleError::Syntax(m)) => prop_assert!(!m.trim().is_empty()),
        Err(RuleError::Invalid { .. }) => prop_assert!(false, "from_toml only reports syntax"),
        Ok(spec) => match spec.validate(now()) {
            Ok(r) => prop_assert!(!r.id.is_empty()),
            Err(RuleError::Invalid { problems, .. }) => {
                prop_assert!(!problems.is_empty());
                for p in problems {
                    prop_assert!(!p.field.trim().is_empty() && !p.message.trim().is_empty(), "{:?}", p);
                }
            }
            Err(RuleError::Syntax(m)) => prop_assert!(!m.trim().is_empty()),
        },
    }
    // The one-call path gives the same verdict and never panics either.
    let _ = Rule::from_toml(text, now());
    Ok(())
}

fn check_event(v: &Value) -> Result<(), TestCaseError> {
    if let Err(e) = capacity_event::parse(v) {
        let msg = e.to_string();
        prop_assert!(!msg.trim().is_empty() && !e.kind().is_empty());
        match &e {
            capacity_event::IncomingError::MissingField(f) => prop_assert!(msg.contains(f)),
            capacity_event::IncomingError::BadField { field, problem } => {
                prop_assert!(msg.contains(field) && !problem.trim().is_empty(), "{}", msg)
            }
            capacity_event::IncomingError::UnknownSource(s) | capacity_event::IncomingError::UnknownDetailType(s) => {
                let named = msg.contains(&format!("{s:?}"));
                prop_assert!(named, "{}", msg);
            }
            _ => {}
        }
    }
    let _ = capacity_event::event_id_of(v);
    Ok(())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,20}".prop_map(Value::String),
        prop::sample::select(vec![
            "aws.ec2",
            "capblock.reminder",
            "capblock.schedule",
            "EC2 Capacity Block Delivered",
            "cr-0123456789abcdef0",
            "2026-12-03T11:30:00Z",
            "us-east-1",
            "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0",
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    prop::sample::select(vec![
                        "detail-type",
                        "source",
                        "detail",
                        "time",
                        "resources",
                        "region",
                        "id",
                        "reservation_id",
                        "lead_minutes",
                        "capacity-reservation-id",
                        "end-date"
                    ])
                    .prop_map(str::to_string),
                    "[a-z-]{1,8}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
