use std::collections::BTreeSet;

use chrono::TimeZone;
use rust_decimal_macros::dec;

use super::*;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

fn cand(key: &str, threshold: Decimal, closes_in_days: i64) -> Candidate {
    Candidate { key: key.into(), threshold, closes_in: Duration::days(closes_in_days) }
}

#[test]
fn the_budget_turns_into_calls_per_region() {
    let b = DescribeBudget::default();
    // 4 s refill at a 50 % share: one call per 8 s to start; 50 s of asking -> 1 + 6 calls.
    assert_eq!(b.pace(), StdDuration::from_secs(8));
    assert_eq!(b.calls_per_region(), 7);
    let all = DescribeBudget { share: 1.0, ..b };
    assert_eq!(all.calls_per_region(), 13);
    assert_eq!(b.calls_at(StdDuration::from_secs(5)), 11);
    // A run plans half again what its pace fits: the starting pace without a learned one.
    assert_eq!(b.planned(None), 10);
    let learned = crate::domain::pace::Pace { gap_ms: 5000, limit_ms: None };
    assert_eq!(b.planned(Some(learned)), 16);
    // A learned pace past today's bounds is taken within them (1 s at the fastest).
    assert_eq!(b.planned(Some(crate::domain::pace::Pace { gap_ms: 10, limit_ms: None })), b.planned_at(b.fastest));
    // The learned pace's bounds: 1 s to 30 s by default, and never the wrong way round.
    assert_eq!((b.bounds().fastest, b.bounds().slowest), (StdDuration::from_secs(1), StdDuration::from_secs(30)));
    assert!(DescribeBudget { fastest: StdDuration::from_secs(40), ..b }.validate().is_err());
    assert!(DescribeBudget { share: 0.0, ..b }.validate().is_err());
    assert!(DescribeBudget { share: 1.5, ..b }.validate().is_err());
    assert!(DescribeBudget { refill: StdDuration::ZERO, ..b }.validate().is_err());
    assert!(b.validate().is_ok());
}

#[test]
fn families_are_the_part_before_the_dot() {
    assert_eq!(family("trn2.48xlarge"), "trn2");
    assert_eq!(family("p5.4xlarge"), "p5");
    assert_eq!(family("p6e-gb200.36xlarge"), "p6e-gb200");
}

#[test]
fn cheaper_history_and_closing_windows_come_first() {
    let mut m = RegionMemory::default();
    m.asked.insert("near".into(), Asked { at: t0(), cheapest: Some(dec!(3.00)), recorded: None });
    m.asked.insert("far".into(), Asked { at: t0(), cheapest: Some(dec!(6.00)), recorded: None });
    let near = cand("near", dec!(3.00), 30);
    let far = cand("far", dec!(3.00), 30);
    let unknown = cand("unknown", dec!(3.00), 30);
    let closing = cand("closing", dec!(3.00), 1);
    assert_eq!(priority(&near, m.asked.get("near")), dec!(1));
    assert_eq!(priority(&far, m.asked.get("far")), dec!(2));
    assert_eq!(priority(&unknown, None), dec!(1));
    assert_eq!(priority(&closing, None), dec!(0.75));
    let order = choose(&[far.clone(), near.clone(), closing.clone()], &m, 3);
    assert_eq!(order, vec![2, 1, 0]);
}

#[test]
fn half_the_calls_go_to_the_stalest_questions() {
    // Ten questions, four calls a run; "hot" is always the most promising.
    let mut cands: Vec<Candidate> = (0..9).map(|i| cand(&format!("q{i}"), dec!(3), 30)).collect();
    cands.push(cand("hot", dec!(3), 30));
    let mut m = RegionMemory::default();
    m.asked.insert("hot".into(), Asked { at: t0(), cheapest: Some(dec!(2.5)), recorded: None });
    let mut last_asked: BTreeMap<String, usize> = BTreeMap::new();
    let mut worst_gap = 0;
    for run in 1..=30usize {
        let now = t0() + Duration::minutes(10 * run as i64);
        let picked = choose(&cands, &m, 4);
        assert_eq!(picked.len(), 4);
        let keys: BTreeSet<&str> = picked.iter().map(|&i| cands[i].key.as_str()).collect();
        assert_eq!(keys.len(), 4, "no question twice in a run");
        assert!(keys.contains("hot"), "run {run}: the most promising question is asked every run");
        for &i in &picked {
            let k = &cands[i].key;
            if let Some(prev) = last_asked.insert(k.clone(), run) {
                worst_gap = worst_gap.max(run - prev);
            }
            let cheapest = m.asked.get(k).and_then(|a| a.cheapest);
            m.asked.insert(k.clone(), Asked { at: now, cheapest, recorded: None });
        }
    }
    // Every question was reached, and none waited longer than the stated bound.
    assert_eq!(last_asked.len(), 10);
    assert!(worst_gap <= full_cycle_runs(10, 4), "worst gap {worst_gap} runs");
    assert_eq!(full_cycle_runs(10, 4), 5);
    assert_eq!(full_cycle_runs(256, 6), 86);
    assert_eq!(full_cycle_runs(3, 6), 1);
}

#[test]
fn a_run_with_room_for_everything_asks_everything() {
    let cands = vec![cand("a", dec!(3), 30), cand("b", dec!(3), 1)];
    assert_eq!(choose(&cands, &RegionMemory::default(), 6), vec![1, 0]);
    assert!(choose(&[], &RegionMemory::default(), 6).is_empty());
}

/// Room for every question (several accounts lending their limits) still asks the stalest
/// first: a run that answers only part of its plan must not leave the same dear questions
/// unasked run after run.
#[test]
fn room_for_everything_still_asks_the_stalest_first() {
    let cands: Vec<Candidate> = ["cheap", "dear", "never"].iter().map(|k| cand(k, dec!(3), 30)).collect();
    let mut memory = RegionMemory::default();
    let asked = |minutes: i64, price: Decimal| Asked {
        at: t0() - Duration::minutes(minutes),
        cheapest: Some(price),
        recorded: None,
    };
    memory.asked.insert("cheap".into(), asked(1, dec!(3.05)));
    memory.asked.insert("dear".into(), asked(30, dec!(4.50)));
    let order = choose(&cands, &memory, 10);
    assert_eq!(order.len(), 3, "every question: {order:?}");
    assert_eq!(order[0], 2, "the never asked first: {order:?}");
    // That run answered only its first two: the dear one, stalest now, leads the next.
    memory.asked.insert("never".into(), asked(0, dec!(4.00)));
    memory.asked.insert("cheap".into(), asked(0, dec!(3.05)));
    assert_eq!(choose(&cands, &memory, 10)[0], 1, "the stalest leads");
}

#[test]
fn market_notes_expire_and_keep_their_first_sighting() {
    let mut m = RegionMemory::default();
    m.refusals.insert("trn2".into(), Refusals { count: 6, first_at: t0() - Duration::hours(1), runs: 3 });
    let since = m.note_quota_zero("trn2", t0());
    assert_eq!(since, t0());
    assert!(m.refusals.is_empty(), "a finding starts the count again");
    // Still 0 later: the finding keeps its first date, so the alert is not repeated.
    assert_eq!(m.note_quota_zero("trn2", t0() + Duration::hours(1)), t0());
    m.not_sold.insert("p4d.24xlarge".into(), t0() + MARKET_NOTE_TTL);
    assert!(m.is_not_sold("p4d.24xlarge", t0()));
    m.asked.insert("old".into(), Asked { at: t0(), cheapest: None, recorded: None });
    m.prune(t0() + Duration::days(8));
    assert!(m.asked.is_empty() && m.not_sold.is_empty());
    assert!(m.quota_zero.contains_key("trn2"), "a quota of 0 is dropped only when a search succeeds");
    let text = serde_json::to_string(&m).unwrap();
    assert_eq!(serde_json::from_str::<RegionMemory>(&text).unwrap(), m);
}

/// A memory stored at a far-future time (a replay, a forged item) is read as of the clock: the
/// type and family it switched off are asked again on the clock's schedule.
#[test]
fn a_far_future_memory_is_read_as_of_the_clock() {
    let clock = t0();
    let years = clock + Duration::days(3 * 365);
    let mut m = RegionMemory::default();
    m.asked.insert("future".into(), Asked { at: years, cheapest: None, recorded: None });
    m.asked.insert("past".into(), Asked { at: clock - Duration::hours(2), cheapest: None, recorded: None });
    m.not_sold.insert("p5.48xlarge".into(), years + MARKET_NOTE_TTL);
    m.not_sold.insert("p4d.24xlarge".into(), clock + Duration::hours(20));
    m.note_quota_zero("trn2", years);
    m.refusals.insert("p5".into(), Refusals { count: 6, first_at: years, runs: 1 });
    // Stored as is, the far-future notes switch p5 off for years, and p5's refusals never
    // conclude anything.
    assert!(m.is_not_sold("p5.48xlarge", clock + Duration::days(365)));
    assert!(!m.refusals["p5"].conclusive(clock + Duration::days(365)));
    let m = m.clamped(clock);
    assert_eq!(m.asked["future"].at, clock);
    assert_eq!(m.asked["past"].at, clock - Duration::hours(2), "a past time is kept");
    assert_eq!(m.not_sold["p5.48xlarge"], clock + MARKET_NOTE_TTL);
    assert_eq!(m.not_sold["p4d.24xlarge"], clock + Duration::hours(20), "a note within its day is kept");
    assert!(!m.is_not_sold("p5.48xlarge", clock + MARKET_NOTE_TTL));
    assert_eq!(m.quota_zero["trn2"], QuotaZero { since: clock });
    assert_eq!(m.refusals["p5"].first_at, clock);
    assert!(m.refusals["p5"].conclusive(clock + QUOTA_SPREAD));
    // Within the margin (clocks differ a little between runs): kept.
    let mut near = RegionMemory::default();
    near.asked.insert("k".into(), Asked { at: clock + Duration::minutes(9), cheapest: None, recorded: None });
    assert_eq!(near.clone().clamped(clock), near);
    // Extreme stored times neither panic nor move.
    let mut extreme = RegionMemory::default();
    extreme.not_sold.insert("x".into(), DateTime::<Utc>::MIN_UTC);
    assert_eq!(extreme.clone().clamped(clock), extreme);
}

/// A stored rule with a threshold no validation would accept and a forged `MARKET#` memory
/// with prices at the ends of `Decimal`'s range: the planner orders them, it does not panic
/// ("Division overflowed" stopped every rule's scan).
#[test]
fn extreme_thresholds_and_forged_prices_do_not_panic_the_planner() {
    let memory: RegionMemory = serde_json::from_value(serde_json::json!({
        "asked": {
            "tiny": {"at": "2026-11-30T00:00:00Z", "cheapest": "79228162514264337593543950335"},
            "negative": {"at": "2026-11-30T00:00:00Z", "cheapest": "-79228162514264337593543950335"},
            "plain": {"at": "2026-11-30T00:00:00Z", "cheapest": "3.00"}
        }
    }))
    .unwrap();
    let tiny = dec!(0.0000000000000000000000000001);
    let cands =
        vec![cand("tiny", tiny, 1), cand("negative", tiny, 1), cand("plain", dec!(3), 30), cand("new", tiny, 30)];
    assert_eq!(priority(&cands[0], memory.asked.get("tiny")), Decimal::MAX - dec!(0.25));
    assert_eq!(priority(&cands[1], memory.asked.get("negative")), Decimal::MAX - dec!(0.25));
    let all = choose(&cands, &memory, 4);
    assert_eq!(all.len(), 4);
    assert_eq!(
        &all[2..].iter().map(|&i| cands[i].key.as_str()).collect::<BTreeSet<_>>(),
        &BTreeSet::from(["negative", "tiny"])
    );
    assert_eq!(choose(&cands, &memory, 2).len(), 2);
}

#[test]
fn a_quota_of_0_is_concluded_only_from_refusals_over_two_runs_and_30_minutes() {
    // The first run's refusals: never conclusive in that run, whatever their number.
    let first = Refusals::after_run(None, 40, t0());
    assert_eq!((first.count, first.first_at, first.runs), (40, t0(), 1));
    // A later run: conclusive once 30 minutes have passed since the first refusal.
    assert!(!first.conclusive(t0() + Duration::minutes(29)));
    assert!(first.conclusive(t0() + QUOTA_SPREAD));
    // Refusals in one run only are never conclusive in it, however long ago they began.
    let fresh = Refusals { count: 6, first_at: t0() - Duration::hours(2), runs: 0 };
    assert!(!fresh.conclusive(t0()));
    // A run adds itself and keeps the first refusal's time.
    let second = Refusals::after_run(Some(&first), 46, t0() + Duration::minutes(10));
    assert_eq!((second.count, second.first_at, second.runs), (46, t0(), 2));
    // A stored memory of the old kind (a bare count per family) still loads, counting afresh.
    let old = r#"{"asked": {}, "strikes": {"trn2": 5}, "quota_zero": {"p5": {"since": "2026-12-01T00:00:00Z", "recheck_at": "2026-12-01T01:00:00Z"}}}"#;
    let m: RegionMemory = serde_json::from_str(old).unwrap();
    assert!(m.refusals.is_empty() && m.quota_zero["p5"].since == t0());
}

/// Two overlapping scans read the same memory and save their own answers: the second save
/// merges into the first instead of overwriting it, what one dropped stays dropped, and an
/// entry both changed keeps the later fact.
#[test]
fn overlapping_runs_merge_their_memories() {
    let t = t0();
    let mut read = RegionMemory::default();
    read.asked.insert("old".into(), Asked { at: t - Duration::days(8), cheapest: None, recorded: None });
    read.asked.insert("both".into(), Asked { at: t - Duration::hours(1), cheapest: None, recorded: None });
    read.quota_zero.insert("trn2".into(), QuotaZero { since: t - Duration::hours(3) });
    // The first run answered "a" and "both", and cleared trn2 (a search succeeded).
    let mut first = read.clone();
    first.asked.insert("a".into(), Asked { at: t, cheapest: Some(dec!(3)), recorded: None });
    first.asked.insert("both".into(), Asked { at: t, cheapest: Some(dec!(4)), recorded: None });
    first.quota_zero.remove("trn2");
    // The second answered "b" and "both" a minute later, and pruned "old".
    let mut second = read.clone();
    second.asked.insert("b".into(), Asked { at: t, cheapest: None, recorded: None });
    second.asked.insert("both".into(), Asked { at: t + Duration::minutes(1), cheapest: Some(dec!(5)), recorded: None });
    second.asked.remove("old");
    let stored = first.clone().merged(&read, RegionMemory::default());
    let stored = second.merged(&read, stored);
    let keys: Vec<&str> = stored.asked.keys().map(String::as_str).collect();
    assert_eq!(keys, ["a", "b", "both"], "neither run's answers lost; the pruned one gone");
    assert_eq!(stored.asked["both"].at, t + Duration::minutes(1), "the later answer");
    assert!(stored.quota_zero.is_empty(), "the first run's clearing stands");
    // A run that changed nothing leaves the other's memory as it is.
    assert_eq!(read.clone().merged(&read, first.clone()), first);
}

/// The UltraServer search form a run learned survives another run's save made meanwhile, and a
/// run that learned nothing keeps the other's; a memory written before the form was kept reads
/// as "not learned".
#[test]
fn the_search_form_a_run_learned_is_kept_across_overlapping_saves() {
    use crate::domain::ultraserver::SearchForm;
    let read = RegionMemory::default();
    let learned = RegionMemory { search_form: Some(SearchForm::UltraserverOnly), ..read.clone() };
    assert_eq!(learned.clone().merged(&read, read.clone()).search_form, Some(SearchForm::UltraserverOnly));
    assert_eq!(read.clone().merged(&read, learned.clone()).search_form, Some(SearchForm::UltraserverOnly));
    let json = serde_json::to_value(&learned).unwrap();
    assert_eq!(json["search_form"], "ultraserver_only");
    let old: RegionMemory = serde_json::from_str("{}").unwrap();
    assert_eq!(old.search_form, None);
}
