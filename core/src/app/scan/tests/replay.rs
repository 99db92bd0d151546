//! A scan replaying another moment than the clock's writes nothing; a scan on the clock settles
//! on the clock, whatever the stack's mode.

use chrono::Duration;

use super::*;
use crate::app::fixtures::{
    ScanOutputs, offering, reservation_of, rule, scan_settings as settings, scanner, sent_intent, t0,
};
use crate::memory::{MemoryEc2, MemoryTable};

/// The reproduction: a live rule (1 purchase, 600 a month) whose purchase answer is late (the
/// intent Sent at the clock's 00:00, its 480 held), another rule, and an offering on sale. A
/// dry-run scan replaying an hour later settles nothing, remembers nothing, stores no price,
/// decision or notice, and asks EC2 to buy nothing, not even with DryRun: it reports what the
/// rules would choose then (the first none: its budget still holds the late purchase's fee).
#[tokio::test]
async fn a_replayed_scan_writes_nothing() {
    let east = rule("east", "live");
    let start = t0() + Duration::days(2);
    let late = sent_intent(&east, offering("cb-late", start), t0());
    let table = MemoryTable::default().with_rules([east, rule("west", "dry-run")]).with_intents([late]);
    let market = MemoryEc2::default().with_offerings([offering("cb-next", start + Duration::days(1))]);
    let (out, settings) = (ScanOutputs::default(), settings(Mode::DryRun));
    let scanner = scanner(&market, &table, &out, &settings);
    let hour_later = t0() + Duration::hours(1);
    let report = scanner.run(RunTime::asked(t0() + Duration::minutes(1), Some(hour_later))).await.unwrap();
    assert!(report.replay);
    assert_eq!(report.now, hour_later);
    assert!(matches!(&report.settled[..], [Settled::StillOpen { .. }]), "{:?}", report.settled);
    assert_eq!(report.answered, 1, "EC2 was asked what is on sale");
    assert_eq!(report.observations_written, 0);
    let actions: Vec<_> = report.outcomes.iter().map(|o| (o.rule_id.as_str(), o.action.clone())).collect();
    assert_eq!(actions, [("east", None), ("west", Some(Outcome::Replayed { offering_id: "cb-next".into() }))]);
    assert!(table.writes().is_empty(), "a replay wrote {:?}", table.writes());
    assert!(!market.calls().contains_key("PurchaseCapacityBlock"), "{:?}", market.calls());
    assert!(out.notifier.published().is_empty());
}

/// A stack switched back to dry-run while its live intents are open still settles them, on the
/// clock: the purchase EC2 made is adopted, the one EC2 does not show is held for a person
/// (never released on a timer). The same run at a `--time` within the tolerance is a run on
/// the clock.
#[tokio::test]
async fn a_dry_run_stack_settles_open_live_intents_on_the_clock() {
    let (east, west) = (rule("east", "live"), rule("west", "live"));
    let start = t0() + Duration::days(2);
    let made = sent_intent(&east, offering("cb-made", start), t0());
    let lost = sent_intent(&west, offering("cb-lost", start), t0());
    let market = MemoryEc2::default().with_reservations([reservation_of(&made, "cr-made")]);
    let table = MemoryTable::default().with_rules([east, west]).with_intents([made, lost]);
    let (out, settings) = (ScanOutputs::default(), settings(Mode::DryRun));
    let scanner = scanner(&market, &table, &out, &settings);
    let clock = t0() + Duration::minutes(20);
    let report = scanner.run(RunTime::asked(clock, Some(clock + Duration::minutes(4)))).await.unwrap();
    assert!(!report.replay);
    assert_eq!(report.now, clock);
    assert!(
        matches!(&report.settled[..], [Settled::Adopted { .. }, Settled::StillOpen { .. }]),
        "{:?}",
        report.settled
    );
    let writes = table.writes();
    assert!(writes.contains(&"record_bought east/cb-made".to_string()), "{writes:?}");
    assert!(!writes.iter().any(|w| w.starts_with("record_rejected")), "{writes:?}");
    assert!(writes.contains(&"enqueue west/cb-lost#outcome-unknown".to_string()), "{writes:?}");
}

/// A person's live scan from the CLI: the plan is a look (it writes nothing and buys nothing),
/// and the run after their yes buys only the planned block at the planned fee. Repriced since
/// the plan: nothing bought, the fee named. The same block under a new id beside a cheaper block
/// the plan never showed: the planned block is bought, the other passed over.
#[tokio::test]
async fn a_confirmed_live_scan_buys_only_the_planned_block_at_the_planned_fee() {
    let start = t0() + Duration::days(2);
    let at_fee = |id: &str, start, fee: &str| {
        crate::domain::offering::example(
            id,
            "us-east-1",
            start,
            crate::domain::money::Money::parse(fee, "USD").unwrap(),
        )
    };
    let table = MemoryTable::default().with_rules([rule("east", "live")]);
    let out = ScanOutputs::default();
    let settings = ScanSettings { settles: false, ..settings(Mode::Live) };
    let scanner = |market| scanner(market, &table, &out, &settings);
    let planned = MemoryEc2::default().with_offerings([at_fee("cb-plan", start, "480")]);
    let look = scanner(&planned).run(RunTime::from(t0()).look()).await.unwrap();
    let confirmed = Confirmed::from_report(&look);
    assert_eq!(confirmed.blocks().keys().collect::<Vec<_>>(), ["east"]);
    assert_eq!(confirmed.blocks()["east"].id, "cb-plan");
    assert!(table.writes().is_empty(), "the plan wrote {:?}", table.writes());
    assert!(!planned.calls().contains_key("PurchaseCapacityBlock"), "{:?}", planned.calls());

    let repriced = MemoryEc2::default().with_offerings([at_fee("cb-plan", start, "500")]);
    let run = scanner(&repriced).run_confirmed(RunTime::from(t0()), &confirmed).await.unwrap();
    match &run.outcomes[0].action {
        Some(Outcome::OffPlan { reason, .. }) => {
            assert_eq!(reason, "fee 500 USD now, 480 USD in the plan", "only the fee differs")
        }
        other => panic!("expected off-plan, got {other:?}"),
    }
    assert!(!repriced.calls().contains_key("PurchaseCapacityBlock"), "{:?}", repriced.calls());
    assert!(!table.writes().iter().any(|w| w.starts_with("reserve")), "{:?}", table.writes());

    let moved = MemoryEc2::default()
        .with_offerings([at_fee("cb-cheaper", start + Duration::days(1), "400"), at_fee("cb-renamed", start, "480")]);
    let run = scanner(&moved).run_confirmed(RunTime::from(t0()), &confirmed).await.unwrap();
    assert!(
        matches!(&run.outcomes[0].action, Some(Outcome::Bought { offering_id, .. }) if offering_id == "cb-renamed"),
        "{:?}",
        run.outcomes[0].action
    );
    assert_eq!(moved.purchases_by_intent().into_keys().collect::<Vec<_>>(), ["east/cb-renamed"]);
}

/// A person's plan (and a dry run) says what a live run would do: a rule that made its
/// purchases this month, or holds its `max_blocks_held`, is not planned to buy (the live path
/// would skip it), and a rule whose budget has no room for the cheapest block says so rather
/// than "nothing meets the rule".
#[tokio::test]
async fn a_plan_leaves_out_what_the_live_run_would_skip_and_says_why() {
    use crate::domain::block::Block;
    use crate::domain::money::Money;
    let start = t0() + Duration::days(2);
    let roomy = |id: &str| Rule {
        monthly_budget: Money::parse("5000", "USD").unwrap(),
        max_blocks_held: 3,
        ..rule(id, "live")
    };
    // "counted" bought once this month (its max_purchases_per_month is 1); "holding" holds a
    // block at its max_blocks_held of 1; "poor" has 400 a month for a 480 block.
    let counted = roomy("counted");
    let mut bought = sent_intent(&counted, offering("cb-earlier", start), t0());
    bought.state = crate::domain::budget::IntentState::Bought;
    let holding = Rule { max_blocks_held: 1, max_purchases_per_month: 3, ..roomy("holding") };
    let held = sent_intent(&holding, offering("cb-held", start), t0());
    let block = Block::bought(&held, &reservation_of(&held, "cr-held"), t0());
    let poor = Rule { monthly_budget: Money::parse("400", "USD").unwrap(), ..rule("poor", "live") };
    let table = MemoryTable::default()
        .with_rules([counted, holding, poor, roomy("free")])
        .with_intents([bought])
        .with_blocks([block]);
    let market = MemoryEc2::default().with_offerings([offering("cb-next", start + Duration::days(1))]);
    let out = ScanOutputs::default();
    let settings = ScanSettings { settles: false, ..settings(Mode::Live) };
    let scanner = scanner(&market, &table, &out, &settings);
    let look = scanner.run(RunTime::from(t0()).look()).await.unwrap();
    let by_rule = |id: &str| look.outcomes.iter().find(|o| o.rule_id == id).unwrap();
    let skipped = |id: &str| match &by_rule(id).action {
        Some(Outcome::Skipped { reason }) => reason.clone(),
        other => panic!("rule {id}: expected skipped, got {other:?}"),
    };
    assert_eq!(skipped("counted"), "the rule made 1 purchase(s) in 2026-12, its max_purchases_per_month is 1");
    assert_eq!(skipped("holding"), "the rule holds 1 block(s), its limit is 1");
    assert_eq!(by_rule("poor").chosen, None);
    assert_eq!(by_rule("poor").passed_over.as_deref(), Some("its fee is more than the budgets have room for"));
    assert_eq!(by_rule("free").passed_over, None);
    let confirmed = Confirmed::from_report(&look);
    assert_eq!(confirmed.blocks().keys().collect::<Vec<_>>(), ["free"], "only what a live run would buy is planned");
    assert!(table.writes().is_empty(), "the plan wrote {:?}", table.writes());
}
