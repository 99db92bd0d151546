//! The steps after a tracker run, on the memory table, topics and bucket: the past month's
//! summary enqueued and sent once however often the monthly schedule runs, the page published
//! once per hour claim, and a page that cannot be written reported in the run's report
//! without failing the run.

use chrono::Duration;

use super::*;
use crate::app::fixtures::t0;
use crate::app::publish::{PAGE_KEY, PageReport};
use crate::memory::{Hooked, MemoryNotifier, MemoryPages, MemoryTable, Script};
use crate::ports::{PublishError, Topic};

fn render(d: &TeamData) -> String {
    format!("<p>{}</p>", d.now.to_rfc3339())
}

fn at(t: chrono::DateTime<chrono::Utc>) -> RunTime {
    RunTime::asked(t, None)
}

/// The steps after a run of a stack with no team budgets or approvals (the summary and the
/// page these tests check do not depend on them), publishing to `pages`.
fn steps_after<'a, P: ?Sized>(
    table: &'a MemoryTable,
    notifier: &'a MemoryNotifier,
    pages: Option<&'a P>,
) -> AfterTrack<'a, MemoryTable, MemoryNotifier, P> {
    static NO_BUDGETS: BTreeMap<String, Money> = BTreeMap::new();
    static NO_APPROVALS: BTreeMap<String, TeamApproval> = BTreeMap::new();
    AfterTrack { store: table, notifier, pages, team_budgets: &NO_BUDGETS, team_approvals: &NO_APPROVALS, render }
}

/// November's summaries sent on the alerts topic so far (an empty month says so in its title).
fn summaries(notifier: &MemoryNotifier) -> Vec<String> {
    notifier
        .published()
        .into_iter()
        .filter(|(topic, m)| *topic == Topic::Alerts && m.body.contains("2026-11: nothing bought or extended"))
        .map(|(_, m)| m.body)
        .collect()
}

#[tokio::test]
async fn the_monthly_run_sends_the_past_months_summary_once() {
    let (table, notifier, pages) = (MemoryTable::default(), MemoryNotifier::default(), MemoryPages::default());
    let after = steps_after(&table, &notifier, Some(&pages));
    // t0 is 2026-12-01: the monthly schedule's run summarizes November.
    let mut first = TrackReport::default();
    after.run(at(t0() + Duration::minutes(5)), true, &mut first).await.unwrap();
    assert_eq!(first.summary.as_deref(), Some("2026-11"), "{first:?}");
    assert_eq!(first.notices.published, 1, "{first:?}");
    assert_eq!(summaries(&notifier).len(), 1, "{:?}", notifier.published());
    // The schedule retried an hour later: the same month, nothing sent again.
    let mut retried = TrackReport::default();
    after.run(at(t0() + Duration::hours(1)), true, &mut retried).await.unwrap();
    assert_eq!(retried.summary.as_deref(), Some("2026-11"));
    assert_eq!(retried.notices.published, 0, "{retried:?}");
    assert_eq!(summaries(&notifier).len(), 1, "{:?}", notifier.published());
    // An hourly run is not the monthly one: no summary.
    let mut hourly = TrackReport::default();
    after.run(at(t0() + Duration::hours(2)), false, &mut hourly).await.unwrap();
    assert_eq!(hourly.summary, None);
}

#[tokio::test]
async fn the_page_is_published_once_per_hour_claim() {
    let (table, notifier, pages) = (MemoryTable::default(), MemoryNotifier::default(), MemoryPages::default());
    let after = steps_after(&table, &notifier, Some(&pages));
    let hour = t0() + Duration::hours(3);
    let mut reports = Vec::new();
    for minutes in [1, 10, 59, 61] {
        let mut r = TrackReport::default();
        after.run(at(hour + Duration::minutes(minutes)), false, &mut r).await.unwrap();
        reports.push(r.page);
    }
    assert!(matches!(&reports[0], Some(PageReport::Published { hour: h, .. }) if *h == hour), "{reports:?}");
    assert_eq!(reports[1], Some(PageReport::AlreadyClaimed { hour }));
    assert_eq!(reports[2], Some(PageReport::AlreadyClaimed { hour }));
    let next = hour + Duration::hours(1);
    assert!(matches!(&reports[3], Some(PageReport::Published { hour: h, .. }) if *h == next), "{reports:?}");
    assert_eq!(pages.writes(), [PAGE_KEY, PAGE_KEY]);
    assert_eq!(pages.object(PAGE_KEY).unwrap(), format!("<p>{}</p>", (next + Duration::minutes(1)).to_rfc3339()));
}

#[tokio::test]
async fn a_page_that_cannot_be_written_is_reported_and_the_run_still_succeeds() {
    let (table, notifier) = (MemoryTable::default(), MemoryNotifier::default());
    // A bucket that refuses every write.
    let denied = PublishError { operation: "PutObject", key: PAGE_KEY.into(), message: "AccessDenied".into() };
    let refusing = Hooked::new(MemoryPages::default(), Script::new().fail("PutObject", denied));
    let after = steps_after(&table, &notifier, Some(&refusing));
    let mut report = TrackReport::default();
    after.run(at(t0() + Duration::minutes(5)), true, &mut report).await.expect("the page's failure is not the run's");
    let page = report.page.expect("a page was tried");
    assert!(page.failed(), "{page:?}");
    let PageReport::Failed { error, .. } = &page else { unreachable!() };
    assert_eq!(error, "writing the page: PutObject of team.html failed: AccessDenied");
    // The summary went out all the same.
    assert_eq!(report.summary.as_deref(), Some("2026-11"));
    assert_eq!(summaries(&notifier).len(), 1);
}

#[tokio::test]
async fn a_stack_without_a_page_and_a_replay_write_nothing() {
    let (table, notifier) = (MemoryTable::default(), MemoryNotifier::default());
    let off = steps_after::<MemoryPages>(&table, &notifier, None);
    let mut report = TrackReport::default();
    off.run(at(t0()), false, &mut report).await.unwrap();
    assert_eq!(report.page, None);
    let pages = MemoryPages::default();
    let on = steps_after(&table, &notifier, Some(&pages));
    let replay = RunTime::asked(t0(), Some(t0() - Duration::days(40)));
    on.run(replay, true, &mut report).await.unwrap();
    assert_eq!((report.page, report.summary), (None, None));
    assert!(table.writes().is_empty(), "{:?}", table.writes());
    assert!(notifier.published().is_empty() && pages.writes().is_empty());
}

#[test]
fn only_the_monthly_schedules_payload_asks_for_a_summary() {
    assert!(asks_for_summary(&serde_json::json!({"source": "capblock.monthly-summary"})));
    assert!(!asks_for_summary(&serde_json::json!({"source": "capblock.schedule"})));
    assert!(!asks_for_summary(&serde_json::json!({})));
    assert!(!asks_for_summary(&serde_json::json!({"source": 3})));
}
