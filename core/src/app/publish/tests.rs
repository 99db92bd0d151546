//! The hourly page on the memory table and bucket: once an hour whoever runs, again the next
//! hour, never when the stack publishes none or a run is a replay, and a failed write tried
//! again within the hour without failing the run.

use chrono::Duration;

use super::*;
use crate::app::fixtures::t0;
use crate::memory::{HookVerdict, Hooked, MemoryPages, MemoryTable, Script};

fn at(t: DateTime<Utc>) -> RunTime {
    RunTime::asked(t, None)
}

async fn page(text: &str) -> Result<String, StoreError> {
    Ok(format!("<!doctype html><p>{text}</p>"))
}

#[tokio::test]
async fn publishes_once_an_hour_and_again_the_next_hour() {
    let table = MemoryTable::default();
    let pages = MemoryPages::default();
    let p = Publishing { claims: &table, pages: Some(&pages) };
    let hour = t0() + Duration::hours(5);

    let first = p.hourly(at(hour + Duration::minutes(1)), page("first")).await;
    assert_eq!(first, Some(PageReport::Published { hour, key: PAGE_KEY.into(), bytes: 27 }));
    // Later runs of the same hour, the last a second before the next: nothing written.
    for m in [5, 30, 59] {
        let again = p.hourly(at(hour + Duration::minutes(m)), page("again")).await;
        assert_eq!(again, Some(PageReport::AlreadyClaimed { hour }), "minute {m}");
    }
    let late = p.hourly(at(hour + Duration::hours(1) - Duration::seconds(1)), page("late")).await;
    assert_eq!(late, Some(PageReport::AlreadyClaimed { hour }));
    assert_eq!(pages.writes(), [PAGE_KEY]);
    assert_eq!(pages.object(PAGE_KEY).unwrap(), "<!doctype html><p>first</p>");

    let next = hour + Duration::hours(1);
    let second = p.hourly(at(next), page("second")).await;
    assert!(matches!(second, Some(PageReport::Published { hour: h, .. }) if h == next), "{second:?}");
    assert_eq!(pages.writes(), [PAGE_KEY, PAGE_KEY]);
    assert_eq!(pages.object(PAGE_KEY).unwrap(), "<!doctype html><p>second</p>");
}

#[tokio::test]
async fn an_earlier_hour_run_late_never_takes_a_later_hours_claim() {
    let table = MemoryTable::default();
    let pages = MemoryPages::default();
    let p = Publishing { claims: &table, pages: Some(&pages) };
    let hour = t0() + Duration::hours(5);
    p.hourly(at(hour), page("now")).await;
    // A retry of the hour before, delivered late: the page stays the newer one.
    let stale = p.hourly(at(hour - Duration::minutes(2)), page("stale")).await;
    assert_eq!(stale, Some(PageReport::AlreadyClaimed { hour: hour - Duration::hours(1) }));
    assert_eq!(pages.object(PAGE_KEY).unwrap(), "<!doctype html><p>now</p>");
}

#[tokio::test]
async fn two_runs_at_once_publish_one_page() {
    let table = MemoryTable::default();
    let pages = MemoryPages::default();
    let p = Publishing { claims: &table, pages: Some(&pages) };
    let now = at(t0() + Duration::minutes(10));
    let (a, b) = tokio::join!(p.hourly(now, page("a")), p.hourly(now, page("b")));
    let published = [&a, &b].iter().filter(|r| matches!(r, Some(PageReport::Published { .. }))).count();
    assert_eq!(published, 1, "{a:?} {b:?}");
    assert_eq!(pages.writes().len(), 1);
}

#[tokio::test]
async fn a_stack_without_a_page_claims_nothing_and_writes_nothing() {
    let table = MemoryTable::default();
    let p: Publishing<'_, MemoryTable, MemoryPages> = Publishing { claims: &table, pages: None };
    assert_eq!(p.hourly(at(t0()), page("off")).await, None);
    assert!(table.writes().is_empty(), "{:?}", table.writes());
}

#[tokio::test]
async fn a_replay_claims_nothing_and_writes_nothing() {
    let table = MemoryTable::default();
    let pages = MemoryPages::default();
    let p = Publishing { claims: &table, pages: Some(&pages) };
    let replay = RunTime::asked(t0(), Some(t0() + Duration::days(3)));
    assert_eq!(p.hourly(replay, page("replay")).await, None);
    assert!(table.writes().is_empty(), "{:?}", table.writes());
    assert!(pages.writes().is_empty());
}

/// The page's bucket, refusing the first `refusals` writes.
fn refusing(refusals: u32) -> Hooked<MemoryPages, Script> {
    let denied = PublishError { operation: "PutObject", key: PAGE_KEY.into(), message: "AccessDenied".into() };
    Hooked::new(
        MemoryPages::default(),
        Script::new().first(refusals, "PutObject", move |_| HookVerdict::error(denied.clone())),
    )
}

#[tokio::test]
async fn a_refused_write_is_reported_and_tried_again_in_the_same_hour() {
    let table = MemoryTable::default();
    let pages = refusing(1);
    let p = Publishing { claims: &table, pages: Some(&pages) };
    let hour = t0() + Duration::hours(2);
    let failed = p.hourly(at(hour + Duration::minutes(1)), page("one")).await.unwrap();
    assert!(failed.failed(), "{failed:?}");
    let PageReport::Failed { error, .. } = &failed else { unreachable!() };
    assert_eq!(error, "writing the page: PutObject of team.html failed: AccessDenied");
    let retried = p.hourly(at(hour + Duration::minutes(6)), page("two")).await.unwrap();
    assert!(matches!(retried, PageReport::Published { .. }), "{retried:?}");
    assert_eq!(pages.inner.object(PAGE_KEY).unwrap(), "<!doctype html><p>two</p>");
}

#[tokio::test]
async fn a_page_that_cannot_be_read_is_reported_and_tried_again_in_the_same_hour() {
    let table = MemoryTable::default();
    let pages = MemoryPages::default();
    let p = Publishing { claims: &table, pages: Some(&pages) };
    let hour = t0() + Duration::hours(2);
    let unreadable = async { Err(StoreError::Unavailable("throttled".into())) };
    let failed = p.hourly(at(hour), unreadable).await.unwrap();
    assert_eq!(
        failed,
        PageReport::Failed {
            hour,
            error: "reading the page's data from the store: store unavailable: throttled".into()
        }
    );
    assert!(pages.writes().is_empty());
    let retried = p.hourly(at(hour + Duration::minutes(5)), page("ok")).await.unwrap();
    assert!(matches!(retried, PageReport::Published { .. }), "{retried:?}");
}

#[test]
fn an_hour_starts_on_the_hour() {
    let t = t0() + Duration::hours(7) + Duration::minutes(59) + Duration::seconds(59);
    assert_eq!(hour_of(t), t0() + Duration::hours(7));
    assert_eq!(hour_of(t0()), t0());
}

/// The page the tracker publishes is the store's, read at the run's clock: the block the table
/// holds reaches the renderer.
#[tokio::test]
async fn the_published_page_is_rendered_from_what_the_table_holds() {
    use crate::app::fixtures::{offering, reservation_of, rule, sent_intent};
    use crate::domain::block::Block;
    use crate::domain::budget::IntentState;

    let east = rule("east", "live");
    let mut bought = sent_intent(&east, offering("cb-1", t0() + Duration::days(1)), t0());
    bought.state = IntentState::Bought;
    let r = reservation_of(&bought, "cr-0123456789abcdef0");
    let table = MemoryTable::default().with_rules([east]).with_intents([bought.clone()]).with_blocks([Block::bought(
        &bought,
        &r,
        t0(),
    )]);
    let pages = MemoryPages::default();
    let p = Publishing { claims: &table, pages: Some(&pages) };
    fn render(d: &TeamData) -> String {
        let ids: Vec<&str> = d.blocks.iter().map(|b| b.block.reservation_id.as_str()).collect();
        format!("{} {}", d.now.to_rfc3339(), ids.join(","))
    }
    let now = t0() + Duration::hours(1);
    let report = p.hourly(at(now), team_page(&table, now, &Default::default(), render)).await.unwrap();
    assert!(matches!(report, PageReport::Published { .. }), "{report:?}");
    assert_eq!(pages.object(PAGE_KEY).unwrap(), format!("{} cr-0123456789abcdef0", now.to_rfc3339()));
}
