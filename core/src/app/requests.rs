//! People's requests in the scan: each request item read back is checked as the scan checks a
//! rule (`domain::request::check_item`), a filed one within its team's automatic limit is
//! approved, each approved one is asked and bought as a one-shot rule (`Request::as_rule`,
//! whose purchase consumes the approval in `Ledger::reserve`), and each step is told once in
//! the request's own Slack thread. A refused item is named and nothing else is touched: no
//! decision, no rule, no budget.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::outbox::alert_notice;
use crate::domain::announce::request_step;
use crate::domain::message_kind::MessageKind;
use crate::domain::request::{
    AUTO_APPROVER, Request, RequestDecision, RequestError, RequestState, RequestVerdict, TeamApproval, check_item,
    decision_allowed, state_of,
};
use crate::domain::rule::Rule;
use crate::ports::{Observation, ObservationStore, Outbox, RequestStore, StoreError};

/// What a scan made of the requests.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestsReport {
    /// The requests asked for this run, by rule id.
    pub asked: Vec<String>,
    /// Approved this run within their team's automatic limit.
    pub auto_approved: Vec<String>,
    /// Request id -> why its item was refused (a `RequestError`, in words).
    pub refused: BTreeMap<String, String>,
}

/// A request item and its decision, checked: the request's own state, or why it is refused.
pub struct Checked {
    pub request: Request,
    pub decision: Option<RequestDecision>,
    pub state: Result<RequestState, RequestError>,
}

/// Reads every request and its decision, each checked (`check_request`). For the scan, the
/// CLI and the page alike.
pub async fn read_requests<S: RequestStore + ?Sized>(
    store: &S,
    teams: &BTreeMap<String, TeamApproval>,
    now: DateTime<Utc>,
) -> Result<Vec<Checked>, StoreError> {
    checked(store, store.requests().await?, teams, now).await
}

/// Reads `requester`'s own requests and their decisions, each checked as `read_requests` checks
/// every one: what a requester lists, whose policy reads their own key and no listing.
pub async fn read_own_requests<S: RequestStore + ?Sized>(
    store: &S,
    requester: &str,
    teams: &BTreeMap<String, TeamApproval>,
    now: DateTime<Utc>,
) -> Result<Vec<Checked>, StoreError> {
    checked(store, store.requests_of(requester).await?, teams, now).await
}

/// Each stored request with its decision, checked against its key and `teams`.
async fn checked<S: RequestStore + ?Sized>(
    store: &S,
    items: Vec<crate::ports::StoredRequest>,
    teams: &BTreeMap<String, TeamApproval>,
    now: DateTime<Utc>,
) -> Result<Vec<Checked>, StoreError> {
    let mut out = Vec::new();
    for stored in items {
        let decision = store.decision(&stored.keyed_id).await?;
        let state = check_item(&stored.request, &stored.keyed_requester, &stored.keyed_id)
            .and_then(|()| check_request(&stored.request, decision.as_ref(), teams, now));
        out.push(Checked { request: stored.request, decision, state });
    }
    Ok(out)
}

/// The state of a request item already checked against its key: refused when its decision is
/// one the team's settings do not allow or is not for these terms (changed since).
pub fn check_request(
    request: &Request,
    decision: Option<&RequestDecision>,
    teams: &BTreeMap<String, TeamApproval>,
    now: DateTime<Utc>,
) -> Result<RequestState, RequestError> {
    if let Some(d) = decision {
        if d.request_id != request.id || d.requester != request.requester || d.terms != request.terms {
            return Err(RequestError::ChangedSinceApproval(request.id.clone()));
        }
        if d.verdict == RequestVerdict::Approved && d.consumed_by.is_none() {
            decision_allowed(d, teams)?;
        }
        if crate::sabotage::on(crate::sabotage::Bug::RequestStateUnchecked) && d.verdict == RequestVerdict::Approved {
            return Ok(RequestState::Approved);
        }
    }
    Ok(state_of(request, decision, now))
}

/// The scan's part: the one-shot rules of the approved requests (after approving, when the
/// scan writes, the filed ones within their team's automatic limit), and each step told once
/// in the request's thread. `writes` is false on a replay or a person's look: nothing written.
pub async fn request_rules<S: RequestStore + Outbox + ObservationStore + ?Sized>(
    store: &S,
    teams: &BTreeMap<String, TeamApproval>,
    now: DateTime<Utc>,
    writes: bool,
) -> Result<(Vec<Rule>, RequestsReport), StoreError> {
    let mut report = RequestsReport::default();
    let mut rules = Vec::new();
    for c in read_requests(store, teams, now).await? {
        let id = c.request.id.clone();
        let state = match c.state {
            Err(e) => {
                tracing::warn!(event = "request_refused", request = %id, error = %e, "request item refused");
                report.refused.insert(id.clone(), e.to_string());
                if writes {
                    // The thread is the id the item names: a forged item's real owner hears of it.
                    tell(store, MessageKind::RequestRefused, &c.request, &e.to_string(), now).await?;
                }
                continue;
            }
            Ok(s) => s,
        };
        if !writes {
            if state == RequestState::Approved {
                rules.push(c.request.as_rule());
                report.asked.push(c.request.rule_id());
            }
            continue;
        }
        tell(store, MessageKind::RequestFiled, &c.request, &format!("Why: {}", c.request.terms.reason), now).await?;
        match state {
            RequestState::Filed => {
                let auto = teams.get(&c.request.terms.team).is_some_and(|t| t.approves_on_its_own(&c.request.terms));
                if auto && approve_on_its_own(store, &c.request, now).await? {
                    report.auto_approved.push(id.clone());
                    tell(
                        store,
                        MessageKind::RequestApproved,
                        &c.request,
                        "Approved within the team's automatic limit.",
                        now,
                    )
                    .await?;
                    rules.push(c.request.as_rule());
                    report.asked.push(c.request.rule_id());
                }
            }
            RequestState::Approved => {
                let by = c.decision.as_ref().map_or(String::new(), |d| d.by.clone());
                tell(store, MessageKind::RequestApproved, &c.request, &format!("Approved by {by}."), now).await?;
                rules.push(c.request.as_rule());
                report.asked.push(c.request.rule_id());
            }
            RequestState::Bought { intent } => {
                tell(store, MessageKind::RequestBought, &c.request, &format!("Bought by purchase {intent}."), now)
                    .await?;
            }
            RequestState::Rejected { reason } => {
                tell(store, MessageKind::RequestRejected, &c.request, &format!("Why: {reason}"), now).await?;
            }
            RequestState::Cancelled => {
                tell(store, MessageKind::RequestCancelled, &c.request, "", now).await?;
            }
            // Told on the first scans after it expired; past `EXPIRY_TOLD_WITHIN` the price
            // history is not read again (every scan would, for every request ever expired).
            RequestState::Expired if now <= c.request.terms.latest_start() + EXPIRY_TOLD_WITHIN => {
                let seen = cheapest_seen(store, &c.request, now).await?;
                tell(store, MessageKind::RequestExpired, &c.request, &seen, now).await?;
            }
            RequestState::Expired => {}
        }
    }
    Ok((rules, report))
}

/// How long after a request expired the scans still tell it (its message enqueued once, by the
/// outbox's key): a week of scans, so a stack stopped for days still tells it when it runs
/// again, while one expired long ago costs no price-history read per scan.
pub const EXPIRY_TOLD_WITHIN: chrono::Duration = chrono::Duration::days(7);

/// Writes the automatic approval of a filed request; false if another run decided it first.
async fn approve_on_its_own<S: RequestStore + ?Sized>(
    store: &S,
    r: &Request,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let decision = RequestDecision {
        request_id: r.id.clone(),
        requester: r.requester.clone(),
        terms: r.terms.clone(),
        by: AUTO_APPROVER.into(),
        at: now,
        verdict: RequestVerdict::Approved,
        consumed_by: None,
    };
    match store.decide_request(&decision).await {
        Ok(()) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Enqueues the step's message in the request's thread, once (the outbox's key).
async fn tell<S: Outbox + ?Sized>(
    store: &S,
    kind: MessageKind,
    r: &Request,
    detail: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let key = kind.outbox_key(None)?;
    let notice = alert_notice(&r.id, &key, &request_step(kind, r, detail), now);
    store.enqueue(&notice).await.map(|_| ())
}

/// The cheapest offering per accelerator-hour the scan saw for the request since it was filed,
/// and when, in words (the price history, `ObservationStore`).
async fn cheapest_seen<S: ObservationStore + ?Sized>(
    store: &S,
    r: &Request,
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    Ok(cheapest_observed(store, r, now).await?.map_or_else(
        || "No offering was seen for it.".to_string(),
        |o| {
            let rate = o.offering.price_per_accelerator_hour(o.accelerators_per_instance).map(|r| r.display());
            format!(
                "The cheapest offering seen: {} per accelerator-hour, {} x {} in {} at {}.",
                rate.unwrap_or_default(),
                o.offering.instance_count,
                o.offering.instance_type,
                o.offering.region,
                o.seen_at.format("%Y-%m-%d %H:%M UTC")
            )
        },
    ))
}

/// The cheapest offering per accelerator-hour seen for the request's types and regions since
/// it was filed (the price history): what its expiry message and the team page say.
pub async fn cheapest_observed<S: ObservationStore + ?Sized>(
    store: &S,
    r: &Request,
    now: DateTime<Utc>,
) -> Result<Option<Observation>, StoreError> {
    let t = &r.terms;
    let mut best: Option<(rust_decimal::Decimal, Observation)> = None;
    for region in &t.regions {
        for ty in &t.instance_types {
            // Nothing after the last instant its block could start is of use to it.
            let to = now.min(t.latest_start());
            for o in store.history(region, ty, r.filed_at, to).await? {
                let Some(rate) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) else { continue };
                if best.as_ref().is_none_or(|(b, _)| rate.per_unit < *b) {
                    best = Some((rate.per_unit, o));
                }
            }
        }
    }
    Ok(best.map(|(_, o)| o))
}

#[cfg(test)]
mod tests;
