use super::*;
use chrono::{Duration, TimeZone};
use rust_decimal_macros::dec;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

fn rule() -> Rule {
    Rule::from_toml(
        r#"
id = "r"
regions = ["us-east-1", "us-west-2"]
instance_types = ["p5.48xlarge", "trn1.32xlarge"]
instance_counts = [1, 2]
durations_days = [1, 2]
max_price_per_accelerator_hour = "3.00"
max_total_fee = "2000"
monthly_budget = "10000"
start_window = { earliest_in_days = 1, latest_in_days = 10 }
"#,
        now(),
    )
    .unwrap()
}

/// An offering priced at `per_gpu_hour` for 1 x p5.48xlarge (8 GPUs) over 1 day.
fn offer(id: &str, region: &str, per_gpu_hour: Decimal, start_day: i64) -> Offering {
    let start = now() + Duration::days(start_day) + Duration::minutes(11 * 60 + 30);
    crate::domain::offering::example(id, region, start, Money::usd(per_gpu_hour * dec!(8) * dec!(24)).unwrap())
}

fn budget(amount: Decimal) -> Headroom {
    Headroom(Money::usd(amount).unwrap())
}

fn chosen(d: &Decision) -> Option<&str> {
    d.chosen.as_ref().map(|p| p.offering.id.as_str())
}

#[test]
fn a_price_equal_to_the_threshold_buys_and_one_cent_above_does_not() {
    let cat = AcceleratorCatalog::new();
    let at = offer("cb-at", "us-east-1", dec!(3.00), 2);
    let d = decide(&rule(), &[at], &cat, budget(dec!(10000)), now());
    assert_eq!(chosen(&d), Some("cb-at"));
    let above = offer("cb-above", "us-east-1", dec!(3.01), 2);
    let d = decide(&rule(), &[above], &cat, budget(dec!(10000)), now());
    assert_eq!(chosen(&d), None);
    assert_eq!(d.passed_over, vec![("cb-above".into(), PassedOver::AboveThreshold)]);
}

#[test]
fn the_cheapest_of_several_regions_wins() {
    let cat = AcceleratorCatalog::new();
    let offers = [
        offer("cb-east", "us-east-1", dec!(2.90), 2),
        offer("cb-west", "us-west-2", dec!(2.10), 3),
        offer("cb-east2", "us-east-1", dec!(2.50), 1),
    ];
    let d = decide(&rule(), &offers, &cat, budget(dec!(10000)), now());
    assert_eq!(chosen(&d), Some("cb-west"));
    assert_eq!(d.eligible, 3);
}

#[test]
fn ties_go_to_the_earliest_start() {
    let cat = AcceleratorCatalog::new();
    let offers = [offer("cb-late", "us-east-1", dec!(2.5), 5), offer("cb-early", "us-west-2", dec!(2.5), 2)];
    assert_eq!(chosen(&decide(&rule(), &offers, &cat, budget(dec!(10000)), now())), Some("cb-early"));
    let reversed = [offers[1].clone(), offers[0].clone()];
    assert_eq!(chosen(&decide(&rule(), &reversed, &cat, budget(dec!(10000)), now())), Some("cb-early"));
}

#[test]
fn budget_window_fee_and_scope_are_applied() {
    let cat = AcceleratorCatalog::new();
    // 2.5 x 8 x 24 = 480 USD.
    let o = offer("cb-1", "us-east-1", dec!(2.5), 2);
    assert_eq!(chosen(&decide(&rule(), std::slice::from_ref(&o), &cat, budget(dec!(480)), now())), Some("cb-1"));
    let d = decide(&rule(), std::slice::from_ref(&o), &cat, budget(dec!(479.99)), now());
    assert_eq!(d.passed_over, vec![("cb-1".into(), PassedOver::OverBudget)]);

    let too_soon = offer("cb-soon", "us-east-1", dec!(2.5), 0);
    let too_late = offer("cb-late", "us-east-1", dec!(2.5), 11);
    let elsewhere = offer("cb-eu", "eu-west-1", dec!(2.5), 2);
    let d = decide(&rule(), &[too_soon, too_late, elsewhere], &cat, budget(dec!(10000)), now());
    assert_eq!(
        d.passed_over.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
        vec![PassedOver::OutsideStartWindow, PassedOver::OutsideStartWindow, PassedOver::NotInRule]
    );

    let mut r = rule();
    r.max_total_fee = Some(Money::usd(dec!(400)).unwrap());
    let d = decide(&r, std::slice::from_ref(&o), &cat, budget(dec!(10000)), now());
    assert_eq!(d.passed_over, vec![("cb-1".into(), PassedOver::AboveMaxTotalFee)]);
}

#[test]
fn other_currencies_and_unknown_types_are_passed_over() {
    let cat = AcceleratorCatalog::new();
    let mut yen = offer("cb-yen", "us-east-1", dec!(1), 2);
    yen.fee = Money::parse("10", "JPY").unwrap();
    let mut odd = offer("cb-odd", "us-east-1", dec!(1), 2);
    odd.instance_type = "x9.huge".parse().unwrap();
    let d = decide(&rule(), &[yen, odd], &cat, budget(dec!(10000)), now());
    assert_eq!(
        d.passed_over,
        vec![("cb-yen".into(), PassedOver::OtherCurrency), ("cb-odd".into(), PassedOver::UnknownAccelerators)]
    );
}

#[test]
fn room_never_goes_negative() {
    let l = Money::usd(dec!(100)).unwrap();
    assert_eq!(room(l, Money::usd(dec!(30)).unwrap()).amount(), dec!(70));
    assert_eq!(room(l, Money::usd(dec!(130)).unwrap()).amount(), dec!(0));
}

/// An UltraServer rule buys UltraServer offerings of its types and counts only, priced over
/// every accelerator of the offering; an instance rule never buys an UltraServer.
#[test]
fn ultraserver_offerings_go_to_ultraserver_rules() {
    use crate::domain::ultraserver::{UltraServerType, UltraServers};
    let ultra_rule = Rule::from_toml(
        r#"
id = "u"
start_window = { earliest_in_days = 1, latest_in_days = 10 }
ultraserver_types = ["u-trn2x64"]
ultraserver_counts = [2]
max_price_per_accelerator_hour = "2.00"
monthly_budget = "100000"
durations_days = [1]
regions = ["us-east-1"]
"#,
        now(),
    )
    .unwrap();
    let kind: UltraServerType = "u-trn2x64".parse().unwrap();
    // 2 x u-trn2x64 = 8 x trn2u.48xlarge of 16 chips for a day: 2.00 per chip-hour is 6144.
    let u = |id: &str, count: u32, fee| Offering {
        id: id.into(),
        instance_type: "trn2u.48xlarge".parse().unwrap(),
        instance_count: 4 * count,
        fee: Money::usd(fee).unwrap(),
        ultraserver: true,
        ultraservers: Some(UltraServers { kind, count }),
        ..offer(id, "us-east-1", dec!(1), 2)
    };
    let cat = AcceleratorCatalog::new();
    let d = decide(
        &ultra_rule,
        &[u("cb-two", 2, dec!(6144)), u("cb-one", 1, dec!(1000))],
        &cat,
        budget(dec!(100000)),
        now(),
    );
    assert_eq!(chosen(&d), Some("cb-two"));
    assert_eq!(d.chosen.as_ref().unwrap().per_accelerator_hour.per_unit, dec!(2));
    assert_eq!(d.passed_over, vec![("cb-one".to_string(), PassedOver::NotInRule)], "a count the rule does not ask for");
    // A cent over the threshold per chip-hour: passed over.
    let d = decide(&ultra_rule, &[u("cb-dear", 2, dec!(6145))], &cat, budget(dec!(100000)), now());
    assert_eq!(d.passed_over[0].1, PassedOver::AboveThreshold);
    // Instance rules never take UltraServers, even of a type they name; nor the reverse.
    let p5_ultra = Offering { ultraserver: true, ..offer("cb-p5u", "us-east-1", dec!(1), 2) };
    assert_eq!(decide(&rule(), &[p5_ultra], &cat, budget(dec!(10000)), now()).passed_over[0].1, PassedOver::NotInRule);
    let plain = offer("cb-plain", "us-east-1", dec!(1), 2);
    assert_eq!(
        decide(&ultra_rule, &[plain], &cat, budget(dec!(100000)), now()).passed_over[0].1,
        PassedOver::NotInRule
    );
}

#[test]
fn the_cheapest_priced_is_kept_eligible_or_not() {
    let cat = AcceleratorCatalog::new();
    // Above the threshold, and outside the window: neither eligible, the cheaper one is said.
    let above = offer("cb-above", "us-east-1", dec!(3.40), 2);
    let late = offer("cb-late", "us-west-2", dec!(3.20), 20);
    let d = decide(&rule(), &[above.clone(), late], &cat, budget(dec!(10000)), now());
    assert_eq!(chosen(&d), None);
    assert_eq!(d.cheapest.as_ref().map(|p| p.offering.id.as_str()), Some("cb-late"));
    // Of equals, the first.
    let twin = offer("cb-twin", "us-east-1", dec!(3.40), 2);
    let d = decide(&rule(), &[above, twin], &cat, budget(dec!(10000)), now());
    assert_eq!(d.cheapest.as_ref().map(|p| p.offering.id.as_str()), Some("cb-above"));
}

#[test]
fn a_fee_equal_to_the_cap_buys_and_one_cent_over_does_not() {
    let cat = AcceleratorCatalog::new();
    // 3.00 a GPU-hour for 8 GPUs over a day: 576.00, at the threshold.
    let at_cap = Rule { max_total_fee: Some(Money::usd(dec!(576)).unwrap()), ..rule() };
    let d = decide(&at_cap, &[offer("cb-576", "us-east-1", dec!(3.00), 2)], &cat, budget(dec!(10000)), now());
    assert_eq!(chosen(&d), Some("cb-576"));
    let below = Rule { max_total_fee: Some(Money::usd(dec!(575.99)).unwrap()), ..rule() };
    let d = decide(&below, &[offer("cb-576", "us-east-1", dec!(3.00), 2)], &cat, budget(dec!(10000)), now());
    assert_eq!(d.passed_over, vec![("cb-576".into(), PassedOver::AboveMaxTotalFee)]);
}

#[test]
fn starts_on_the_window_s_edges_buy_and_a_minute_outside_does_not() {
    let cat = AcceleratorCatalog::new();
    let (earliest, latest) = rule().start_window.resolve(now());
    let fee = Money::usd(dec!(576)).unwrap();
    let at = |id: &str, start: DateTime<Utc>| crate::domain::offering::example(id, "us-east-1", start, fee);
    for (id, start) in [("cb-first", earliest), ("cb-last", latest)] {
        let d = decide(&rule(), &[at(id, start)], &cat, budget(dec!(10000)), now());
        assert_eq!(chosen(&d), Some(id), "{start}: {:?}", d.passed_over);
    }
    for (id, start) in [("cb-early", earliest - Duration::minutes(1)), ("cb-late", latest + Duration::minutes(1))] {
        let d = decide(&rule(), &[at(id, start)], &cat, budget(dec!(10000)), now());
        assert_eq!(d.passed_over, vec![(id.into(), PassedOver::OutsideStartWindow)], "{start}");
    }
}
