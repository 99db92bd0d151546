//! People's requests in the simulated month: researchers file them (`RequestStore::file_request`,
//! as `capblock request` does), the teams' leads approve or reject them (sometimes approving one
//! twice), requesters cancel some, and some expire unfilled, their cap below what the market
//! asks; beside them, items no requester's policy lets anyone write, put straight into the
//! table: an item naming another identity than its key, malformed terms, a request's terms
//! changed after their approval, and a decision by a principal the team does not name. The
//! production scan fulfils them (`Scanner::run_with_requests`); `Watch` is what the
//! invariants judge them by, kept from what the people did, not from what the scan said.

use std::collections::{BTreeMap, BTreeSet};

use capblock_core::domain::ids::{InstanceType, Region};
use capblock_core::domain::money::Money;
use capblock_core::domain::request::{Request, RequestDecision, RequestTerms, RequestVerdict, TeamApproval};
use capblock_core::memory::MemoryTable;
use capblock_core::ports::RequestStore;
use chrono::{DateTime, Duration, Utc};
use futures::FutureExt;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;

use super::market::{REGIONS, TYPES};

/// The research lead's role, whose sessions approve research's requests.
const RESEARCH_LEAD: &str = "arn:aws:iam::123456789012:role/research-lead";
/// The inference lead, an IAM user.
const INFERENCE_LEAD: &str = "arn:aws:iam::123456789012:user/inference-lead";
/// A principal no team names: its decision buys nothing.
const INTERN: &str = "arn:aws:iam::123456789012:user/intern";
/// The researchers (their `aws:userid`s), and the one who writes items under another's key.
const REQUESTERS: [&str; 3] = ["AIDAALICE", "AIDABOB", "AROALAB:carol"];
const MALLORY: &str = "AIDAMALLORY";

/// The teams' approval settings (the stack's `TeamApprovals`): research's requests up to 1,500
/// USD and inference's up to 800 USD are approved on their own; beyond, by the team's lead.
pub fn teams() -> BTreeMap<String, TeamApproval> {
    let usd = |n: i64| Money::usd(Decimal::from(n)).expect("a whole number of dollars");
    BTreeMap::from([
        ("research".to_string(), TeamApproval { auto_up_to: usd(1_500), approvers: vec![RESEARCH_LEAD.into()] }),
        ("inference".to_string(), TeamApproval { auto_up_to: usd(800), approvers: vec![INFERENCE_LEAD.into()] }),
    ])
}

/// A port call a person makes, run by the simulation as an actor behind the fault gate.
pub enum Call {
    File(Request),
    Decide(RequestDecision),
    Cancel { requester: String, id: String, at: DateTime<Utc> },
}

impl Call {
    pub fn kind(&self) -> &'static str {
        match self {
            Call::File(_) => "capblock request",
            Call::Decide(_) => "capblock requests approve",
            Call::Cancel { .. } => "capblock requests cancel",
        }
    }

    pub async fn run<S: RequestStore + ?Sized>(&self, store: &S) -> String {
        let (what, result) = match self {
            Call::File(r) => (format!("files {}", r.id), store.file_request(r).await),
            Call::Decide(d) => (format!("decides {} ({:?})", d.request_id, d.verdict), store.decide_request(d).await),
            Call::Cancel { requester, id, at } => {
                (format!("cancels {id}"), store.cancel_request(requester, id, *at).await)
            }
        };
        match result {
            Ok(()) => what,
            Err(e) => format!("{what}: failed: {e}"),
        }
    }
}

/// A request closed to buying: since when, why, and the purchase intents it had then (which it
/// keeps; no other may follow).
#[derive(Debug, Clone)]
pub struct Closed {
    pub at: DateTime<Utc>,
    pub why: &'static str,
    pub rule: String,
    pub intents: BTreeSet<String>,
}

/// What the invariants judge the requests by.
#[derive(Debug, Default)]
pub struct Watch {
    /// Request id -> (its one-shot rule's id, what was forged): nothing may be bought for it,
    /// and an item forged is never approved.
    pub forged: BTreeMap<String, (String, &'static str)>,
    /// Requests closed to buying (cancelled, rejected, expired, changed after approval).
    pub closed: BTreeMap<String, Closed>,
    /// The requests as their requesters filed them, by id.
    pub filed: BTreeMap<String, Request>,
}

/// The people and what they did.
pub struct People {
    rng: ChaCha8Rng,
    next: u64,
    changed: BTreeSet<String>,
    /// Requests an intern approved this step: forged once their decision is the one stored.
    interns: BTreeSet<String>,
    pub watch: Watch,
    pub counts: BTreeMap<&'static str, u64>,
}

impl People {
    pub fn new(seed: u64) -> People {
        People {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x7e9_0e57),
            next: 0,
            changed: BTreeSet::new(),
            interns: BTreeSet::new(),
            watch: Watch::default(),
            counts: BTreeMap::new(),
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    /// This step's calls: a request filed now and then; once an hour the leads' decisions and
    /// the requesters' cancels; and, rarely, an item or decision forged straight into `table`.
    pub fn step(&mut self, now: DateTime<Utc>, table: &MemoryTable, hourly: bool) -> Vec<Call> {
        let mut calls = Vec::new();
        if self.rng.random_bool(0.004) {
            let requester = REQUESTERS[self.rng.random_range(0..REQUESTERS.len())];
            let r = self.request(requester, now);
            self.watch.filed.insert(r.id.clone(), r.clone());
            self.count("filed");
            calls.push(Call::File(r));
        }
        if hourly {
            calls.extend(self.decisions(now, table));
        }
        if self.rng.random_bool(0.0015) {
            self.forge_item(now, table);
        }
        if self.rng.random_bool(0.0015) {
            self.change_after_approval(table);
        }
        calls
    }

    /// A fresh request of `requester`'s, filed at `now`: one or two types and regions, a day or
    /// two, a window one to six days longer, a cap of 1.50 to 6 USD per accelerator-hour
    /// (the market asks 1.50 to 9: some are never met and expire).
    fn request(&mut self, requester: &str, now: DateTime<Utc>) -> Request {
        self.next += 1;
        let r = &mut self.rng;
        let mut types: Vec<&str> = TYPES.iter().map(|(t, _)| *t).collect();
        types.shuffle(r);
        types.truncate(r.random_range(1..=2));
        let mut regions: Vec<&str> = REGIONS.to_vec();
        regions.shuffle(r);
        regions.truncate(r.random_range(1..=2));
        let days: u32 = r.random_range(1..=2);
        let earliest_start = now + Duration::hours(r.random_range(12..=72));
        let terms = RequestTerms {
            instance_types: types.iter().map(|t| t.parse::<InstanceType>().expect("a known type")).collect(),
            instance_count: r.random_range(1..=2),
            days,
            regions: regions.iter().map(|g| g.parse::<Region>().expect("a known region")).collect(),
            earliest_start,
            latest_end: earliest_start + Duration::days(i64::from(days)) + Duration::hours(r.random_range(24..=144)),
            max_price_per_accelerator_hour: Money::usd(Decimal::new(r.random_range(150..=600), 2)).expect("a cap"),
            team: if r.random_bool(0.5) { "research" } else { "inference" }.into(),
            reason: format!("experiment {}", self.next),
            slack: r.random_bool(0.5).then(|| "@alice".to_string()),
        };
        Request {
            id: format!("rq-{}", self.next),
            requester: requester.into(),
            filed_at: now,
            terms,
            cancelled_at: None,
        }
    }

    /// Once an hour the leads look at the open requests with no decision (approve a fifth,
    /// reject some, an intern's approval now and then), approve an approved one again, and
    /// requesters cancel a few of theirs.
    fn decisions(&mut self, now: DateTime<Utc>, table: &MemoryTable) -> Vec<Call> {
        let mut calls = Vec::new();
        let open: Vec<Request> =
            self.watch.filed.values().filter(|r| !self.watch.closed.contains_key(&r.id)).cloned().collect();
        for r in open {
            let decision = table.decision(&r.id).now_or_never().and_then(Result::ok).flatten();
            let lead = if r.terms.team == "research" {
                "arn:aws:sts::123456789012:assumed-role/research-lead/dana"
            } else {
                INFERENCE_LEAD
            };
            let decide = |by: &str, verdict: RequestVerdict| {
                Call::Decide(RequestDecision {
                    request_id: r.id.clone(),
                    requester: r.requester.clone(),
                    terms: r.terms.clone(),
                    by: by.into(),
                    at: now,
                    verdict,
                    consumed_by: None,
                })
            };
            let roll: f64 = self.rng.random();
            let call = match &decision {
                None if roll < 0.2 => Some(("approvals by a lead", decide(lead, RequestVerdict::Approved))),
                None if roll < 0.26 => {
                    let no = RequestVerdict::Rejected { reason: "not this month".into() };
                    Some(("rejections by a lead", decide(lead, no)))
                }
                None if roll < 0.28 => {
                    self.interns.insert(r.id.clone());
                    Some(("approvals by an intern", decide(INTERN, RequestVerdict::Approved)))
                }
                Some(d) if d.verdict == RequestVerdict::Approved && roll < 0.02 => {
                    Some(("approvals again", decide(lead, RequestVerdict::Approved)))
                }
                _ => None,
            };
            if let Some((what, call)) = call {
                self.count(what);
                calls.push(call);
            }
            if self.rng.random_bool(0.004) {
                self.count("cancels");
                calls.push(Call::Cancel { requester: r.requester.clone(), id: r.id.clone(), at: now });
            }
        }
        calls
    }

    /// An item no requester's policy lets anyone write, put straight into the table: one naming
    /// another identity than its key, or malformed terms (no instance, so no fee at all, within
    /// every automatic limit; an empty reason; a window over before it was filed).
    fn forge_item(&mut self, now: DateTime<Utc>, table: &MemoryTable) {
        let mut r = self.request(MALLORY, now);
        r.id = format!("rq-f{}", self.next);
        r.terms.max_price_per_accelerator_hour = Money::usd(Decimal::new(900, 2)).expect("a cap");
        let (keyed, what) = match self.rng.random_range(0..4) {
            0 => {
                r.requester = REQUESTERS[0].into();
                (MALLORY, "an item naming another identity than its key")
            }
            1 => {
                r.terms.instance_count = 0;
                (MALLORY, "an item asking for no instance")
            }
            2 => {
                r.terms.reason = String::new();
                (MALLORY, "an item with no reason")
            }
            _ => {
                r.terms.latest_end = now - Duration::hours(1);
                r.terms.earliest_start = r.terms.latest_end - Duration::days(3);
                (MALLORY, "an item whose window closed before it was filed")
            }
        };
        self.watch.forged.insert(r.id.clone(), (r.rule_id(), what));
        self.count("forged items");
        table.put_request_item(keyed, &r);
    }

    /// A requester rewrites an approved request's item under their own key (their policy lets
    /// them), doubling its cap: the approval no longer covers it.
    fn change_after_approval(&mut self, table: &MemoryTable) {
        let approved: Vec<Request> = self
            .watch
            .filed
            .values()
            .filter(|r| !self.changed.contains(&r.id))
            .filter(|r| {
                let d = table.decision(&r.id).now_or_never().and_then(Result::ok).flatten();
                d.is_some_and(|d| d.verdict == RequestVerdict::Approved && d.consumed_by.is_none())
            })
            .cloned()
            .collect();
        let Some(mut r) = approved.first().cloned() else { return };
        let cap = r.terms.max_price_per_accelerator_hour.amount() * Decimal::from(2);
        r.terms.max_price_per_accelerator_hour = Money::usd(cap).expect("a cap");
        self.changed.insert(r.id.clone());
        self.count("changed after approval");
        table.put_request_item(&r.requester.clone(), &r);
    }

    /// After a step: each request closed to buying since (cancelled, rejected, past the last
    /// start its window allows, changed after its approval) is closed with the purchase intents
    /// it has now. Judged from the items and decisions as stored, not by the scan's reading.
    pub fn after_step(&mut self, now: DateTime<Utc>, table: &MemoryTable) {
        for id in std::mem::take(&mut self.interns) {
            let d = table.decision(&id).now_or_never().and_then(Result::ok).flatten();
            if let (Some(d), Some(r)) = (d, self.watch.filed.get(&id))
                && d.by == INTERN
            {
                self.watch.forged.insert(id, (r.rule_id(), "approved by a principal no team names"));
            }
        }
        let stored = table.requests().now_or_never().and_then(Result::ok).unwrap_or_default();
        let intents = table.intents();
        for s in stored {
            let id = s.request.id.clone();
            let Some(filed) = self.watch.filed.get(&id).cloned() else { continue };
            if self.watch.closed.contains_key(&id) || s.keyed_requester != filed.requester {
                continue;
            }
            let decision = table.decision(&id).now_or_never().and_then(Result::ok).flatten();
            let rejected = decision.as_ref().is_some_and(|d| matches!(d.verdict, RequestVerdict::Rejected { .. }));
            let why = if s.request.cancelled_at.is_some() {
                "cancelled"
            } else if rejected {
                "rejected"
            } else if self.changed.contains(&id) {
                "changed after its approval"
            } else if now > filed.terms.latest_end - Duration::days(i64::from(filed.terms.days)) {
                "expired"
            } else {
                continue;
            };
            self.count(why);
            let rule = filed.rule_id();
            let held = intents.iter().filter(|i| i.rule_id == rule).map(|i| i.id.clone()).collect();
            self.watch.closed.insert(id, Closed { at: now, why, rule, intents: held });
        }
    }
}
