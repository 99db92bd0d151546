//! A person's request in the model: the scan's reading of it, by the core's own judgement
//! (`app::requests::check_request`, what `request_rules` asks of every request item before it
//! asks the request's one-shot rule), the reservation's consumption of its approval, the
//! lead's decision and the requester's cancel. The request is rule 1's (`Request::as_rule`).

use capblock_core::app::requests::check_request;
use capblock_core::domain::request::{Request, RequestDecision, RequestState, RequestVerdict};

use super::Protocol;
use crate::sabotage::Sabotage;
use crate::world::{LEAD, Step, World, at, offering_index, t0};

impl Protocol {
    /// The scan reads the request and its decision and judges them as `request_rules` does:
    /// None when it does not ask the request; else whether the request was, as the model sees
    /// it, closed to buying then (cancelled, not approved, or its approval consumed).
    pub(super) fn read_request(&self, w: &World) -> Option<bool> {
        let request = self.request.as_ref()?;
        let row = w.store.request;
        let now = at(w.minute);
        let item = Request { cancelled_at: row.cancelled.then_some(now), ..request.clone() };
        let rule = &self.rules[1].id;
        let decision = row.approved.map(|approved| RequestDecision {
            request_id: request.id.clone(),
            requester: request.requester.clone(),
            terms: request.terms.clone(),
            by: LEAD.into(),
            at: t0(),
            verdict: if approved {
                RequestVerdict::Approved
            } else {
                RequestVerdict::Rejected { reason: "not this month".into() }
            },
            consumed_by: row.consumed_by.map(|k| format!("{rule}/cb-{}", offering_index(k))),
        });
        let state = check_request(&item, decision.as_ref(), &self.teams, now).ok()?;
        (state == RequestState::Approved)
            .then_some(row.cancelled || row.approved != Some(true) || row.consumed_by.is_some())
    }

    /// `Ledger::reserve`'s conditions and write for a request's purchase `o`: the request item
    /// not cancelled (else `RequestClosed`), an approval not consumed yet (else `ApprovalUsed`),
    /// consumed by `o`; false when refused.
    pub(super) fn reserve_request(&self, w: &mut World, o: u8) -> bool {
        let row = &mut w.store.request;
        if row.cancelled && !self.on(Sabotage::CancelUncheckedAtReserve) {
            return false;
        }
        if row.approved != Some(true) || row.consumed_by.is_some() {
            return false;
        }
        if !self.on(Sabotage::ApprovalNotConsumed) {
            row.consumed_by = Some(o);
        }
        true
    }

    /// `decide_request`: the decision written once; a later one is refused (`Conflict`).
    pub(super) fn lead_decides(&self, w: &mut World, approve: bool) -> Option<Step> {
        if w.store.request.approved.is_none() {
            w.store.request.approved = Some(approve);
        }
        Some(Step::Done)
    }

    /// `cancel_request`: the item marked cancelled (a second cancel is refused).
    pub(super) fn requester_cancels(&self, w: &mut World) -> Option<Step> {
        w.store.request.cancelled = true;
        Some(Step::Done)
    }
}
