use chrono::TimeZone;
use rust_decimal_macros::dec;

use super::*;
use crate::domain::plan::{QuotaZero, member_key};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

fn east() -> Region {
    "us-east-1".parse().unwrap()
}

fn west() -> Region {
    "us-west-2".parse().unwrap()
}

fn key(r: Region, f: &str) -> (Region, String) {
    (r, f.to_string())
}

#[test]
fn memories_carry_strikes_probes_paces_and_member_probes_into_a_run() {
    let now = t0();
    let mut m = RegionMemory::default();
    // Refused in one earlier run, long enough ago: may conclude this run.
    m.refusals.insert("p5".into(), Refusals { count: 3, first_at: now - Duration::hours(1), runs: 1 });
    // Refused just now: counted, not yet conclusive.
    m.refusals.insert("trn2".into(), Refusals { count: 1, first_at: now, runs: 1 });
    m.quota_zero.insert("p4d".into(), QuotaZero { since: now });
    m.pace = Some(Pace { gap_ms: 8000, limit_ms: None });
    m.helper_paces.insert("111111111111".into(), Pace { gap_ms: 4000, limit_ms: Some(2000) });
    m.member_refused.insert(member_key("222222222222", "p5"), QuotaZero { since: now });
    m.member_refused.insert("no-space-so-no-member".into(), QuotaZero { since: now });
    let carried = Carried::from_memories(&[(east(), m)].into(), now);
    assert_eq!(carried.strikes, [(key(east(), "p5"), 3), (key(east(), "trn2"), 1)].into());
    assert_eq!(carried.conclusive, [key(east(), "p5")].into());
    assert_eq!(carried.probes, [key(east(), "p4d")].into());
    assert_eq!(carried.paces, [(east(), Pace { gap_ms: 8000, limit_ms: None })].into());
    assert_eq!(
        carried.helper_paces,
        [((east(), "111111111111".to_string()), Pace { gap_ms: 4000, limit_ms: Some(2000) })].into()
    );
    assert_eq!(carried.helper_probes, [(east(), "222222222222".to_string(), "p5".to_string())].into());
}

#[test]
fn an_answer_goes_to_the_history_when_new_changed_or_due() {
    let now = t0();
    let mut m = RegionMemory::default();
    assert!(note_answer(&mut m, "q".into(), Some(dec!(2.5)), now), "a first answer is recorded");
    let later = now + Duration::minutes(1);
    assert!(!note_answer(&mut m, "q".into(), Some(dec!(2.5)), later), "the same price a minute later is not");
    assert_eq!(m.asked["q"], Asked { at: later, cheapest: Some(dec!(2.5)), recorded: Some(now) });
    assert!(note_answer(&mut m, "q".into(), Some(dec!(2.4)), later), "a changed price is recorded at once");
    assert!(!note_answer(&mut m, "q".into(), Some(dec!(2.4)), later + Duration::minutes(9)));
    assert!(note_answer(&mut m, "q".into(), Some(dec!(2.4)), later + HISTORY_EVERY), "due again after HISTORY_EVERY");
    assert!(note_answer(&mut m, "q".into(), None, later + HISTORY_EVERY), "no offering any more is a change");
}

#[test]
fn refusals_settle_only_in_the_regions_asked() {
    let now = t0();
    let earlier = Refusals { count: 2, first_at: now - Duration::hours(1), runs: 1 };
    let mut asked_region = RegionMemory::default();
    asked_region.refusals.insert("p5".into(), earlier.clone());
    asked_region.refusals.insert("trn2".into(), earlier.clone());
    asked_region.refusals.insert("p4d".into(), earlier.clone());
    let mut other = RegionMemory::default();
    other.refusals.insert("p5".into(), earlier.clone());
    let mut memories: BTreeMap<Region, RegionMemory> = [(east(), asked_region), (west(), other.clone())].into();
    // p5 refused again this run; trn2 has strikes but was not refused this run; p4d has none
    // (answered: its strikes were dropped); g6 is new.
    let strikes: Strikes =
        [(key(east(), "p5"), 4), (key(east(), "trn2"), 2), (key(east(), "g6"), 1), (key(west(), "p5"), 9)].into();
    let refused = [key(east(), "p5"), key(east(), "g6"), key(west(), "p5")].into();
    let before = settle_refusals(&mut memories, &[east()].into(), &strikes, &refused, now);
    let east_now = &memories[&east()].refusals;
    assert_eq!(east_now["p5"], Refusals { count: 4, first_at: earlier.first_at, runs: 2 });
    assert_eq!(east_now["trn2"], earlier, "kept as it was");
    assert_eq!(east_now["g6"], Refusals { count: 1, first_at: now, runs: 1 });
    assert!(!east_now.contains_key("p4d"), "no strikes left: forgotten");
    assert_eq!(memories[&west()], other, "a region not asked is left as it was");
    assert_eq!(
        before.keys().cloned().collect::<Vec<_>>(),
        vec![key(east(), "p4d"), key(east(), "p5"), key(east(), "trn2")]
    );
}

#[test]
fn paces_are_kept_and_members_no_longer_lending_forgotten() {
    let mut m = RegionMemory::default();
    m.helper_paces.insert("gone".into(), Pace { gap_ms: 1, limit_ms: None });
    m.helper_paces.insert("kept".into(), Pace { gap_ms: 2, limit_ms: None });
    let mut memories: BTreeMap<Region, RegionMemory> = [(east(), m)].into();
    let paces = [(east(), Pace { gap_ms: 5000, limit_ms: Some(4000) })].into();
    let helper_paces = [((west(), "kept".to_string()), Pace { gap_ms: 3, limit_ms: None })].into();
    keep_paces(&mut memories, &paces, &helper_paces, |a| a == "kept");
    assert_eq!(memories[&east()].pace, Some(Pace { gap_ms: 5000, limit_ms: Some(4000) }));
    assert_eq!(memories[&east()].helper_paces.keys().collect::<Vec<_>>(), vec!["kept"]);
    assert_eq!(memories[&west()].helper_paces["kept"], Pace { gap_ms: 3, limit_ms: None });
}
