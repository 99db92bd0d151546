//! The team page, published by the tracker once an hour (`PAGE_KEY` in the stack's page bucket).
//!
//! Each run claims the clock's hour in the store first, with a condition on the hour
//! (`PageClaims`), and only the run that claims it reads the table, renders and writes the
//! page: overlapping or retried trackers publish once an hour, and the hours between cost no
//! read. A failure to read or write gives the claim back, so the tracker's next run in the same
//! hour tries again; either is logged and counted by the caller, never the tracker's failure:
//! the page is a view of the money work, which has already been done when it is published.

use std::collections::BTreeMap;
use std::future::Future;

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;

use super::team_page::{PageStore, TeamData, gather};
use crate::domain::request::TeamApproval;
use crate::domain::run_time::RunTime;
use crate::ports::{PageClaims, PagePublisher, PublishError, StoreError};

/// The page's object key in the bucket (the template grants `s3:PutObject` on it alone).
pub const PAGE_KEY: &str = "team.html";

/// What one run did about the page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PageReport {
    /// This run wrote the page for its hour.
    Published { hour: DateTime<Utc>, key: String, bytes: usize },
    /// This hour's page is another run's (or this hour was published already).
    AlreadyClaimed { hour: DateTime<Utc> },
    /// The page could not be made or written this run; the next run of the hour tries again.
    Failed { hour: DateTime<Utc>, error: String },
}

impl PageReport {
    pub fn failed(&self) -> bool {
        matches!(self, PageReport::Failed { .. })
    }
}

/// Why a run published no page.
#[derive(Debug, thiserror::Error)]
pub enum PageFailure {
    #[error("claiming the hour's page in the store: {0}")]
    Claim(StoreError),
    #[error("reading the page's data from the store: {0}")]
    Gather(StoreError),
    #[error("writing the page: {0}")]
    Publish(PublishError),
}

/// The hour `t` falls in (its start).
pub fn hour_of(t: DateTime<Utc>) -> DateTime<Utc> {
    let s = t.timestamp();
    // Always a valid instant: `t` is one, and this is at most an hour before it.
    Utc.timestamp_opt(s - s.rem_euclid(3600), 0).single().unwrap_or(t)
}

/// The team page as `store` holds it at `now` (people's requests judged by `teams`, the stack's
/// `TeamApprovals`): read once (`team_page::gather`), then made by `render`, the pure renderer
/// (`capblock_page::render`, a crate above this one).
pub async fn team_page<S>(
    store: &S,
    now: DateTime<Utc>,
    teams: &BTreeMap<String, TeamApproval>,
    render: fn(&TeamData) -> String,
) -> Result<String, StoreError>
where
    S: PageStore + ?Sized,
{
    Ok(render(&gather(store, now, teams).await?))
}

/// The tracker's page publishing: the claims in the store and, when the stack publishes a page
/// (its TeamPage parameter; `None` otherwise), where it goes.
pub struct Publishing<'a, C: ?Sized, P: ?Sized> {
    pub claims: &'a C,
    pub pages: Option<&'a P>,
}

impl<C, P> Publishing<'_, C, P>
where
    C: PageClaims + ?Sized,
    P: PagePublisher + ?Sized,
{
    /// Publishes the page `page` makes, once for the clock's hour; `None` when the stack
    /// publishes none or `at` is a replay (which writes nothing). `page` is only awaited by
    /// the run that claims the hour.
    pub async fn hourly<F>(&self, at: RunTime, page: F) -> Option<PageReport>
    where
        F: Future<Output = Result<String, StoreError>>,
    {
        let pages = self.pages?;
        if at.is_replay() {
            return None;
        }
        let hour = hour_of(at.clock());
        let report = match self.publish(pages, hour, page).await {
            Ok(Some(bytes)) => {
                tracing::info!(event = "page_published", key = PAGE_KEY, %hour, bytes, "team page published");
                PageReport::Published { hour, key: PAGE_KEY.to_string(), bytes }
            }
            Ok(None) => PageReport::AlreadyClaimed { hour },
            Err(e) => {
                tracing::error!(event = "page_failed", key = PAGE_KEY, %hour, error = %e, "team page not published this run: the tracker's next run this hour tries again");
                PageReport::Failed { hour, error: e.to_string() }
            }
        };
        Some(report)
    }

    /// The page's size once written; `None` when another run has the hour.
    async fn publish<F>(&self, pages: &P, hour: DateTime<Utc>, page: F) -> Result<Option<usize>, PageFailure>
    where
        F: Future<Output = Result<String, StoreError>>,
    {
        if !self.claims.claim_page_hour(hour).await.map_err(PageFailure::Claim)? {
            return Ok(None);
        }
        let written = match page.await {
            Ok(html) => pages.publish(PAGE_KEY, &html).await.map(|()| html.len()).map_err(PageFailure::Publish),
            Err(e) => Err(PageFailure::Gather(e)),
        };
        if written.is_err() {
            // Given back so the next run this hour publishes; if that fails too, the claim
            // stands and the page waits for the next hour (logged below either way).
            if let Err(e) = self.claims.release_page_hour(hour).await {
                tracing::warn!(event = "page_claim_kept", %hour, error = %e, "the hour's page claim was not given back: the next hour publishes");
            }
        }
        written.map(Some)
    }
}

#[cfg(test)]
mod tests;
