//! A person's request for capacity: a one-shot rule a researcher files (`capblock request`), a
//! lead or the team's own limit approves, and the scan buys once under its cap.
//!
//! Who filed it is the table's word, not the request's: the item lives under the requester's
//! own partition key (`REQUEST#<aws:userid>`), which their IAM policy lets them write and no
//! other's, so `Request::requester` is checked against the key it was read from
//! ([`check_item`]). The requester may rewrite their own item, so it never carries a decision:
//! an approval (or a rejection) is a [`RequestDecision`] under a key only approvers and the functions
//! write, holding a copy of the terms approved. A request whose terms differ from the copy is
//! refused (`RequestError::ChangedSinceApproval`), and the decision is consumed by the one
//! purchase it makes (`consumed_by`, in the reservation's transaction): a replayed request item
//! buys nothing.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::catalog::AcceleratorCatalog;
use super::ids::{InstanceType, Region, is_team_name};
use super::money::{Currency, Money};
use super::rule::{MAX_START_AHEAD, Mode, Rule, StartWindow, is_sellable_duration_days};
use super::usage::DEFAULT_IDLE_ALERT_MINUTES;

/// The most instances one request asks for (a rule's own bound is its business; a person's
/// one-shot ask is kept to what one block of the largest types holds).
pub const MAX_REQUEST_INSTANCES: u32 = 64;
/// The most instance types one request may accept (each is a question the scan asks per region).
pub const MAX_REQUEST_TYPES: usize = 4;
/// The most regions one request may name.
pub const MAX_REQUEST_REGIONS: usize = 4;
/// The longest reason kept: it is shown in Slack and on the page, not an essay.
pub const MAX_REASON_CHARS: usize = 500;
use crate::domain::rule::REQUEST_RULE_PREFIX;

/// What a request asks for, as the requester filed it and as an approver approved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestTerms {
    /// Any of these types will do (the cheapest offering under the cap is bought).
    pub instance_types: Vec<InstanceType>,
    pub instance_count: u32,
    /// The block's length in days (one of EC2's sellable lengths).
    pub days: u32,
    pub regions: Vec<Region>,
    /// The block starts no earlier than this and ends no later than `latest_end`.
    pub earliest_start: DateTime<Utc>,
    pub latest_end: DateTime<Utc>,
    /// The most per accelerator-hour, in USD.
    pub max_price_per_accelerator_hour: Money,
    pub team: String,
    pub reason: String,
    /// The requester's Slack handle (`@name`), named in the request's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
}

/// A filed request, as stored under its requester's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// `rq-` and 1 to 32 of a-z, 0-9.
    pub id: String,
    /// The requester's `aws:userid` (STS GetCallerIdentity's `UserId`), the item's key.
    pub requester: String,
    pub filed_at: DateTime<Utc>,
    pub terms: RequestTerms,
    /// The requester withdrew it (honoured unless it was bought already).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<DateTime<Utc>>,
}

/// Why a request (or its stored item) is refused. Each names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("request id {0:?} is not `rq-` and 1 to 32 of a-z, 0-9")]
    BadId(String),
    #[error("requester {0:?} is not an AWS user id (STS GetCallerIdentity's UserId)")]
    BadRequester(String),
    #[error("no instance type: name at least one")]
    NoInstanceType,
    #[error("{0} instance types: a request accepts at most {MAX_REQUEST_TYPES}")]
    TooManyTypes(usize),
    #[error("instance type {0} has no known accelerator count, so no price per accelerator-hour")]
    UnpricedType(String),
    #[error("instance count {0} is not between 1 and {MAX_REQUEST_INSTANCES}")]
    Count(u32),
    #[error("{0} days is not a length EC2 sells (1 to 14 days, or whole weeks to 182 days)")]
    Length(u32),
    #[error("no region: name at least one")]
    NoRegion,
    #[error("{0} regions: a request names at most {MAX_REQUEST_REGIONS}")]
    TooManyRegions(usize),
    #[error("the window ({window_hours} h) is shorter than the block ({days} days)")]
    WindowShort { window_hours: i64, days: u32 },
    #[error("the window starts {0} weeks ahead or more: EC2 sells blocks up to 8 weeks ahead")]
    WindowTooFar(i64),
    #[error("the window ends before the request was filed")]
    WindowOver,
    #[error("the cap per accelerator-hour must be more than 0 USD, not {0}")]
    Cap(String),
    #[error("team {0:?} is not a team name (1-64 of a-z, 0-9, '-', '_')")]
    Team(String),
    #[error("the reason is empty or longer than {MAX_REASON_CHARS} characters")]
    Reason,
    #[error("Slack handle {0:?} is not `@` and 1 to 80 of a-z, 0-9, '.', '_', '-'")]
    Slack(String),
    /// The item's requester is not the identity its key was written under: written by someone
    /// else, or edited by hand.
    #[error("request {id} names requester {named:?} but is stored under {keyed:?}: forged")]
    NotTheRequester { id: String, named: String, keyed: String },
    /// The item's id is not the one in its key.
    #[error("request item {keyed} holds request {named}: forged")]
    NotTheId { named: String, keyed: String },
    /// The request's terms are not the ones approved: changed after the approval.
    #[error("request {0}'s terms changed since they were approved: approve it again")]
    ChangedSinceApproval(String),
    /// A decision no approver could have made (an approver the team does not name, over the
    /// team's automatic limit).
    #[error("request {id}'s approval by {by:?} is not one the team's settings allow")]
    ApproverNotAllowed { id: String, by: String },
}

fn is_request_id(s: &str) -> bool {
    s.strip_prefix("rq-").is_some_and(|r| {
        !r.is_empty() && r.len() <= 32 && r.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    })
}

/// `aws:userid` is `AIDA...` for a user, `AROA...:<session>` for a role's session: letters,
/// digits and the few characters session names and federated ids use.
fn is_user_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || b":@._-=,+".contains(&c))
        && !s.contains('#')
}

fn is_slack_handle(s: &str) -> bool {
    s.strip_prefix('@').is_some_and(|r| {
        !r.is_empty()
            && r.len() <= 80
            && r.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(&c))
    })
}

impl RequestTerms {
    /// Every problem with the terms as filed at `at`, in field order; empty when valid.
    pub fn problems(&self, at: DateTime<Utc>) -> Vec<RequestError> {
        let mut out = Vec::new();
        let catalog = AcceleratorCatalog::new();
        match self.instance_types.len() {
            0 => out.push(RequestError::NoInstanceType),
            n if n > MAX_REQUEST_TYPES => out.push(RequestError::TooManyTypes(n)),
            _ => {}
        }
        for t in &self.instance_types {
            if catalog.accelerators(t).is_none() {
                out.push(RequestError::UnpricedType(t.to_string()));
            }
        }
        if !(1..=MAX_REQUEST_INSTANCES).contains(&self.instance_count) {
            out.push(RequestError::Count(self.instance_count));
        }
        if !is_sellable_duration_days(i64::from(self.days)) {
            out.push(RequestError::Length(self.days));
        }
        match self.regions.len() {
            0 => out.push(RequestError::NoRegion),
            n if n > MAX_REQUEST_REGIONS => out.push(RequestError::TooManyRegions(n)),
            _ => {}
        }
        let window = self.latest_end - self.earliest_start;
        if window < Duration::days(i64::from(self.days)) {
            out.push(RequestError::WindowShort { window_hours: window.num_hours(), days: self.days });
        }
        if self.earliest_start - at >= MAX_START_AHEAD {
            out.push(RequestError::WindowTooFar((self.earliest_start - at).num_weeks()));
        }
        if self.latest_end <= at {
            out.push(RequestError::WindowOver);
        }
        let cap = self.max_price_per_accelerator_hour;
        if cap.currency() != Currency::USD || cap.amount() <= Decimal::ZERO {
            out.push(RequestError::Cap(cap.to_string()));
        }
        if !is_team_name(&self.team) {
            out.push(RequestError::Team(self.team.clone()));
        }
        if self.reason.trim().is_empty() || self.reason.chars().count() > MAX_REASON_CHARS {
            out.push(RequestError::Reason);
        }
        if let Some(h) = self.slack.as_ref().filter(|h| !is_slack_handle(h)) {
            out.push(RequestError::Slack(h.clone()));
        }
        out
    }

    /// The most accelerators one instance of the accepted types has (the built-in table).
    fn most_accelerators(&self) -> u32 {
        let catalog = AcceleratorCatalog::new();
        self.instance_types.iter().filter_map(|t| catalog.accelerators(t)).max().unwrap_or(0)
    }

    /// The most the request may cost: its cap times the most accelerators, the count and the
    /// block's hours. What its approval is judged by and its budget is limited to.
    pub fn max_fee(&self) -> Money {
        let hours = Decimal::from(self.days) * Decimal::from(24);
        let units = Decimal::from(self.most_accelerators()) * Decimal::from(self.instance_count) * hours;
        let amount = self.max_price_per_accelerator_hour.amount().checked_mul(units).unwrap_or(Money::MAX_AMOUNT);
        Money::new(amount.min(Money::MAX_AMOUNT), self.max_price_per_accelerator_hour.currency())
            .unwrap_or(self.max_price_per_accelerator_hour)
    }

    /// The latest instant the block may start and still end by `latest_end`.
    pub fn latest_start(&self) -> DateTime<Utc> {
        self.latest_end - Duration::days(i64::from(self.days))
    }
}

impl Request {
    /// Every problem with the request as filed: its id, its requester, its terms at `filed_at`.
    pub fn problems(&self) -> Vec<RequestError> {
        let mut out = Vec::new();
        if !is_request_id(&self.id) {
            out.push(RequestError::BadId(self.id.clone()));
        }
        if !is_user_id(&self.requester) {
            out.push(RequestError::BadRequester(self.requester.clone()));
        }
        out.extend(self.terms.problems(self.filed_at));
        out
    }

    /// The rule id the request buys under: its own guard and budget, apart from every rule's.
    pub fn rule_id(&self) -> String {
        format!("{REQUEST_RULE_PREFIX}{}", self.id.trim_start_matches("rq-"))
    }

    /// The key this request is stored under (`RequestKey`): what a purchase for it names.
    pub fn key(&self) -> crate::domain::ids::RequestKey {
        crate::domain::ids::RequestKey { requester: self.requester.clone(), id: self.id.clone() }
    }

    /// The one-shot rule the scan asks and buys for an approved request: live (the stack's mode
    /// still applies), one block at most, within the window, under the cap, its budget the
    /// request's most fee, charged to the team's budget and the account's as every rule is.
    pub fn as_rule(&self) -> Rule {
        let t = &self.terms;
        Rule {
            id: self.rule_id(),
            description: format!("request {} by {}: {}", self.id, self.requester, t.reason),
            enabled: true,
            mode: Mode::Live,
            regions: t.regions.clone(),
            instance_types: t.instance_types.clone(),
            instance_counts: vec![t.instance_count],
            ultraserver_types: Vec::new(),
            ultraserver_counts: Vec::new(),
            durations_days: vec![t.days],
            start_window: StartWindow::Absolute { earliest: t.earliest_start, latest: t.latest_start() },
            currency: Currency::USD,
            max_price_per_accelerator_hour: t.max_price_per_accelerator_hour.amount(),
            max_total_fee: Some(t.max_fee()),
            monthly_budget: t.max_fee(),
            instance_platform: "Linux/UNIX".into(),
            max_blocks_held: 1,
            max_purchases_per_month: 1,
            rebuy_on_payment_failure: false,
            tags: BTreeMap::new(),
            extend: None,
            // A block EC2 offers a few hours shorter than asked would not be what was approved.
            duration_tolerance_hours: 0,
            local_zones: false,
            allow_unknown_regions: false,
            unlimited: false,
            actions: Vec::new(),
            idle_alert_minutes: DEFAULT_IDLE_ALERT_MINUTES,
            drought_days: 0,
            team: Some(t.team.clone()),
            share_with: Vec::new(),
            handoff_account: None,
            request: Some(self.key()),
        }
    }
}

/// A request item read back under key (`keyed_requester`, `keyed_id`): valid as filed, and
/// stored under the identity and id it names. The functions call it on every item they read.
pub fn check_item(request: &Request, keyed_requester: &str, keyed_id: &str) -> Result<(), RequestError> {
    if request.requester != keyed_requester {
        return Err(RequestError::NotTheRequester {
            id: request.id.clone(),
            named: request.requester.clone(),
            keyed: keyed_requester.to_string(),
        });
    }
    if request.id != keyed_id {
        return Err(RequestError::NotTheId { named: request.id.clone(), keyed: keyed_id.to_string() });
    }
    request.problems().into_iter().next().map_or(Ok(()), Err)
}

/// What an approver (or the team's automatic limit) decided of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum RequestVerdict {
    Approved,
    Rejected { reason: String },
}

/// The decision on a request, stored apart from it (`REQUESTDECISION#<id>`), where only approvers
/// and the functions write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestDecision {
    pub request_id: String,
    pub requester: String,
    /// The terms decided on: a request whose terms differ is not approved.
    pub terms: RequestTerms,
    /// The approver's principal ARN, or [`AUTO_APPROVER`].
    pub by: String,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub verdict: RequestVerdict,
    /// The purchase intent that consumed the approval: one approval buys once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_by: Option<String>,
}

/// Who approves a request within its team's automatic limit.
pub const AUTO_APPROVER: &str = "capblock (within the team's automatic limit)";

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum RequestState {
    /// Filed, waiting for a decision.
    Filed,
    /// Approved: the scan looks for a block.
    Approved,
    /// A purchase consumed the approval (`intent`): bought, or being bought.
    Bought {
        intent: String,
    },
    /// Its window closed unbought.
    Expired,
    Rejected {
        reason: String,
    },
    Cancelled,
}

impl RequestState {
    pub fn as_str(&self) -> &'static str {
        match self {
            RequestState::Filed => "filed",
            RequestState::Approved => "approved",
            RequestState::Bought { .. } => "bought",
            RequestState::Expired => "expired",
            RequestState::Rejected { .. } => "rejected",
            RequestState::Cancelled => "cancelled",
        }
    }
}

/// The state of `request` at `now` given its decision, if any. A consumed approval is final
/// (EC2 took or may take the money); then the requester's cancel and the decision; a request
/// still open past the last instant its block could start is expired.
pub fn state_of(request: &Request, decision: Option<&RequestDecision>, now: DateTime<Utc>) -> RequestState {
    if let Some(intent) = decision.and_then(|d| d.consumed_by.clone()) {
        return RequestState::Bought { intent };
    }
    if request.cancelled_at.is_some() {
        return RequestState::Cancelled;
    }
    if let Some(RequestDecision { verdict: RequestVerdict::Rejected { reason }, .. }) = decision {
        return RequestState::Rejected { reason: reason.clone() };
    }
    if now > request.terms.latest_start() {
        return RequestState::Expired;
    }
    match decision {
        Some(_) => RequestState::Approved,
        None => RequestState::Filed,
    }
}

/// A team's approval settings: requests whose most fee is within `auto_up_to` are approved by
/// capblock on sight; beyond it, one of `approvers` (IAM principal ARNs) must approve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamApproval {
    pub auto_up_to: Money,
    #[serde(default)]
    pub approvers: Vec<String>,
}

impl TeamApproval {
    /// Whether `terms` are approved within the team's automatic limit.
    pub fn approves_on_its_own(&self, terms: &RequestTerms) -> bool {
        terms.max_fee().currency() == self.auto_up_to.currency() && terms.max_fee().amount() <= self.auto_up_to.amount()
    }

    /// Whether the principal `caller` (an IAM ARN, or an STS assumed-role session's ARN, read
    /// as its role's) is one of the team's approvers.
    pub fn may_approve(&self, caller: &str) -> bool {
        let role = role_of_session(caller);
        self.approvers.iter().any(|a| a == caller || role.as_deref() == Some(a.as_str()))
    }

    /// The team's settings in words: "approved on its own up to 500.00 USD; beyond it by
    /// arn:...".
    pub fn describe(&self) -> String {
        let beyond = if self.approvers.is_empty() {
            "no one approves beyond it".to_string()
        } else {
            format!("beyond it by {}", self.approvers.join(", "))
        };
        format!("approved on its own up to {}; {beyond}", self.auto_up_to)
    }
}

/// `arn:aws:sts::<account>:assumed-role/<role>/<session>` -> `arn:aws:iam::<account>:role/<role>`.
fn role_of_session(arn: &str) -> Option<String> {
    let rest = arn.strip_prefix("arn:")?;
    let (partition, rest) = rest.split_once(":sts::")?;
    let (account, rest) = rest.split_once(":assumed-role/")?;
    let (role, _session) = rest.split_once('/')?;
    Some(format!("arn:{partition}:iam::{account}:role/{role}"))
}

/// Whether `decision` is one the team's settings allow: automatic within the limit, or by a
/// named approver. The functions ask it of every decision they buy on.
pub fn decision_allowed(
    decision: &RequestDecision,
    teams: &BTreeMap<String, TeamApproval>,
) -> Result<(), RequestError> {
    let allowed = teams.get(&decision.terms.team).is_some_and(|team| {
        if decision.by == AUTO_APPROVER {
            team.approves_on_its_own(&decision.terms)
        } else {
            team.may_approve(&decision.by)
        }
    });
    if allowed {
        Ok(())
    } else {
        Err(RequestError::ApproverNotAllowed { id: decision.request_id.clone(), by: decision.by.clone() })
    }
}

/// `team=amount principal...; ...`: each team's automatic limit in USD and its approvers' ARNs
/// (the `TeamApprovals` parameter). Empty text: no team takes requests.
pub fn parse_team_approvals(text: &str) -> Result<BTreeMap<String, TeamApproval>, String> {
    let mut out = BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let mut words = entry.split_whitespace();
        let head = words.next().unwrap_or_default();
        let Some((team, amount)) = head.split_once('=') else {
            return Err(format!("{entry:?} is not `team=amount principal-arn ...`"));
        };
        if !is_team_name(team) {
            return Err(format!("{team:?} is not a team name (1-64 of a-z, 0-9, '-', '_')"));
        }
        let auto_up_to = Money::parse(amount, "USD").map_err(|e| format!("team {team}: {e}"))?;
        let approvers: Vec<String> = words.map(str::to_string).collect();
        if let Some(bad) = approvers.iter().find(|a| !a.starts_with("arn:")) {
            return Err(format!("team {team}: approver {bad:?} is not an IAM principal ARN"));
        }
        if out.insert(team.to_string(), TeamApproval { auto_up_to, approvers }).is_some() {
            return Err(format!("team {team} is named twice"));
        }
    }
    Ok(out)
}

/// What is wrong with the teams' approval settings against the teams' budgets (`TeamBudgets`),
/// each what is seen and what to do: a team that takes requests without a budget buys nothing,
/// one that approves on its own past its month's budget, and one whose requests no one approves.
pub fn team_approval_problems(
    teams: &BTreeMap<String, TeamApproval>,
    budgets: &BTreeMap<String, Money>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (team, a) in teams {
        match budgets.get(team) {
            None => out.push((
                format!("team {team} takes requests but has no TeamBudgets entry: its requests buy nothing"),
                "give it a budget in TeamBudgets".to_string(),
            )),
            Some(b) if a.auto_up_to.currency() == b.currency() && a.auto_up_to.amount() > b.amount() => out.push((
                format!(
                    "team {team} approves requests on its own up to {}, more than its monthly budget of {b}",
                    a.auto_up_to
                ),
                "lower its automatic limit in TeamApprovals".to_string(),
            )),
            Some(_) => {}
        }
        if a.approvers.is_empty() && a.auto_up_to.amount().is_zero() {
            out.push((
                format!("team {team}: no request is ever approved (an automatic limit of 0 and no approver)"),
                "name an approver in TeamApprovals".to_string(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
