//! A scan replaying another moment than the clock's writes nothing; a scan on the clock settles
//! on the clock, whatever the stack's mode.

use chrono::Duration;

use super::*;
use crate::app::fixtures::{offering, reservation_of, rule, sent_intent, t0};
use crate::memory::{MemoryEc2, MemoryNotifier, MemoryTable};

pub(super) fn settings(mode: Mode) -> ScanSettings {
    ScanSettings {
        stack: StackSettings {
            name: "capblock-test".into(),
            mode,
            account_budget: None,
            team_budgets: Default::default(),
        },
        describe: DescribeBudget::for_refill(
            std::time::Duration::from_millis(1),
            1.0,
            std::time::Duration::from_secs(1),
        ),
        settles: true,
    }
}

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
    let notifier = MemoryNotifier::default();
    let (catalog, settings) = (Mutex::new(AcceleratorCatalog::new()), settings(Mode::DryRun));
    let scanner = Scanner {
        market: &market,
        store: &table,
        notifier: &notifier,
        catalog: &catalog,
        settings: &settings,
        watch: &[],
    };
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
    assert!(notifier.published().is_empty());
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
    let notifier = MemoryNotifier::default();
    let (catalog, settings) = (Mutex::new(AcceleratorCatalog::new()), settings(Mode::DryRun));
    let scanner = Scanner {
        market: &market,
        store: &table,
        notifier: &notifier,
        catalog: &catalog,
        settings: &settings,
        watch: &[],
    };
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
