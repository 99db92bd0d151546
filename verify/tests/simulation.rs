//! The seeded simulation of every actor, on fixed seeds: the money promise holds through a
//! busy stack's faults, a seed replays exactly, and each bug put back on purpose is caught.
//! New seeds run in `make soak`.

use capblock_verify::sim::{self, Config, Sabotage};

/// `make test`'s seeds: a simulated month each (`make soak` runs years).
const SEEDS: [u64; 3] = [1, 2, 3];
const DAYS: u32 = 30;

#[test]
fn fixed_seeds_keep_the_money_promise_through_every_fault() {
    let mut extensions = 0;
    for seed in SEEDS {
        let summary = sim::run(Config::busy(seed, DAYS)).unwrap_or_else(|f| panic!("{f}"));
        extensions += summary.extensions;
        // The seed exercised what it is for: purchases, crashes and lost answers.
        assert!(summary.purchases >= 5, "seed {seed}: {summary:?}");
        assert!(summary.faults.crashes >= 20 && summary.faults.lost_after >= 1, "seed {seed}: {summary:?}");
        assert!(summary.runs.get("capblock buy").is_some_and(|n| *n > 0), "seed {seed}: {summary:?}");
    }
    assert!(extensions >= 1, "the seeds extended no block");
}

#[test]
fn a_seed_replays_exactly() {
    let a = sim::run(Config::busy(7, 10)).unwrap_or_else(|f| panic!("{f}"));
    let b = sim::run(Config::busy(7, 10)).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!((a.digest, a.checks, a.purchases), (b.digest, b.checks, b.purchases));
    let c = sim::run(Config::busy(8, 10)).unwrap_or_else(|f| panic!("{f}"));
    assert_ne!(a.digest, c.digest, "another seed, another run");
}

#[test]
fn each_bug_put_back_is_caught() {
    for sabotage in Sabotage::CAUGHT {
        let caught =
            (1..=5).find_map(|seed| sim::run(Config { sabotage: Some(sabotage), ..Config::busy(seed, DAYS) }).err());
        let failure = caught.unwrap_or_else(|| panic!("{sabotage:?} went unnoticed in 5 seeds"));
        let text = failure.to_string();
        assert!(text.contains("replay it exactly") && text.contains("--seed"), "{text}");
        eprintln!("{sabotage:?}: {}", failure.broken);
    }
}

/// A bug another guard makes harmless: the money promise holds through it.
#[test]
fn a_bug_another_guard_stops_costs_nothing() {
    for sabotage in Sabotage::DEFENDED {
        let summary =
            sim::run(Config { sabotage: Some(sabotage), ..Config::busy(1, DAYS) }).unwrap_or_else(|f| panic!("{f}"));
        assert!(summary.faults.lost_after >= 1, "{sabotage:?}: the seed lost no answer: {summary:?}");
    }
}
