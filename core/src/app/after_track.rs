//! What a tracker run does once its money work is done: on the monthly schedule's run, the
//! past month's summary enqueued and sent; on every run, the team page published once for the
//! clock's hour (`app::publish`). track-blocks calls it after `Tracker::run_until`, on the
//! tracker's report.
//!
//! Both come after the money work because they show its result. A summary that cannot be
//! enqueued fails the run (retryable: the schedule tries again, and the outbox sends the month
//! once); a page that cannot be published is given back and counted by the caller, never the
//! run's failure.

use std::collections::BTreeMap;

use super::outbox::flush;
use super::publish::{Publishing, team_page};
use super::report::{MONTHLY_SUMMARY_SOURCE, enqueue_summary};
use super::team_page::{PageStore, TeamData};
use super::track::TrackReport;
use crate::domain::budget::Period;
use crate::domain::money::Money;
use crate::domain::request::TeamApproval;
use crate::domain::run_time::RunTime;
use crate::ports::{Notifier, Outbox, PageClaims, PagePublisher, StoreError};

/// Whether a tracker payload is the monthly schedule's (`{"source": "capblock.monthly-summary"}`):
/// a run as always, then the past month's summary.
pub fn asks_for_summary(payload: &serde_json::Value) -> bool {
    payload.get("source").and_then(|s| s.as_str()) == Some(MONTHLY_SUMMARY_SOURCE)
}

/// The ports and settings the steps after the tracker's run need.
pub struct AfterTrack<'a, S: ?Sized, N: ?Sized, P: ?Sized> {
    /// The table: the month's summary read from it and enqueued in its outbox, the page's hour
    /// claimed in it and the page's data read from it.
    pub store: &'a S,
    pub notifier: &'a N,
    /// Where the team page goes; `None` when the stack publishes none, or when this run has too
    /// little time left for it (the hour's page is then the next run's).
    pub pages: Option<&'a P>,
    /// The stack's team budgets, which the summary reports against.
    pub team_budgets: &'a BTreeMap<String, Money>,
    /// The stack's `TeamApprovals`, which the page judges people's requests by, as the scan does.
    pub team_approvals: &'a BTreeMap<String, TeamApproval>,
    /// The page's pure renderer (`capblock_page::render`, a crate above this one).
    pub render: fn(&TeamData) -> String,
}

impl<S, N, P> AfterTrack<'_, S, N, P>
where
    S: PageStore + Outbox + PageClaims + ?Sized,
    N: Notifier + ?Sized,
    P: PagePublisher + ?Sized,
{
    /// The summary (when `summary`: the monthly schedule's run) and the hour's page, into
    /// `report`. A replay writes neither.
    pub async fn run(&self, at: RunTime, summary: bool, report: &mut TrackReport) -> Result<(), StoreError> {
        if summary && !at.is_replay() {
            // The month before the clock's, never a payload's: a late or retried schedule
            // summarizes the same month, and the outbox sends it once.
            let month = Period::of(at.clock()).previous();
            enqueue_summary(self.store, &month, self.team_budgets, at.clock()).await?;
            report.notices = flush(self.store, self.notifier, at.clock()).await?;
            report.summary = Some(month.as_str().to_string());
        }
        let publishing = Publishing { claims: self.store, pages: self.pages };
        let page = team_page(self.store, at.clock(), self.team_approvals, self.render);
        report.page = publishing.hourly(at, page).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
