//! `capblock requests list|show|approve|reject|cancel`: people's requests for capacity, as the
//! scan reads them (each item checked, a forged or changed one named), and the decisions a lead
//! makes on them. Approving shows the plan (the fee range, each budget before and after the most
//! fee) and asks for `yes` typed in full; the approval names the approver's own ARN (STS), and
//! the scan buys on it only if the team's settings name that approver.

use std::collections::BTreeMap;

use capblock_shared::app::requests::{Checked, read_own_requests, read_requests};
use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::aws::identity::{Caller, caller};
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::money::Money;
use capblock_shared::domain::request::{RequestDecision, RequestState, RequestVerdict, TeamApproval};
use capblock_shared::ports::{Ledger, RequestStore};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::context::{CliError, CliResult, clock_now, confirm_typed, sdk, store, stored_settings, team_approvals};
use crate::output::OutputArgs;
use crate::table::{self, Column};

#[derive(Subcommand)]
pub enum RequestsCommand {
    /// The requests: its state, who asked, for what and why (an approver: everyone's; anyone
    /// else: their own).
    #[command(after_help = "Examples:\n  capblock requests list\n  capblock requests list -o json\n  \
capblock requests list --all\n\n\
An approver (the stack's TeamApprovals names you, or your role, for a team) sees every request. \
Anyone else sees their own, the ones filed under their AWS identity, which is all the \
requesters' policy lets them read; --all asks for everyone's anyway (an operator's access). \
A request is filed, then approved (by an approver of its team, or by the scan within the team's \
automatic limit), then bought, or rejected, cancelled or expired at its window's end.")]
    List(ListArgs),
    /// One request whole: its terms, its state, its decision (a requester: one of their own).
    #[command(after_help = "Examples:\n  capblock requests show rq-7f3a2c9b01de")]
    Show(IdArgs),
    /// Approve a request (an approver of its team): shows the plan, then asks for `yes`.
    Approve(ApproveArgs),
    /// Reject a request (an approver of its team), with a reason.
    #[command(
        after_help = "Examples:\n  capblock requests reject rq-7f3a2c9b01de --reason \"no budget left this month\"\n\n\
The reason is told to the requester in the request's Slack thread."
    )]
    Reject(RejectArgs),
    /// Cancel your own request before it is bought.
    #[command(after_help = "Examples:\n  capblock requests cancel rq-7f3a2c9b01de\n\n\
Only the identity that filed the request may cancel it; a request already bought is not undone \
(a Capacity Block purchase cannot be cancelled).")]
    Cancel(IdArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Everyone's requests, though you approve for no team (an operator with the table's read
    /// access, or the approvers' policy).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct IdArgs {
    /// The request's id (rq-...), as `capblock request` and Slack print it.
    id: String,
}

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock requests approve rq-7f3a2c9b01de\n\n\
Shows the plan first: the request's terms, its fee range (the cheapest it may cost at the list \
price to the most its cap allows) and each budget it would be charged to (team, account) this \
month, before and after its most fee. Then asks for `yes` typed in full (--yes for scripts). The \
approval is stored under your AWS identity (STS GetCallerIdentity's ARN); the scan buys on it only \
if the stack's TeamApprovals parameter names you (or your role) for the request's team, and only \
once: the purchase consumes it.\n\
Exit codes: 0 approved, 1 AWS or store failure, 2 refused (not an approver, decided already, not \
confirmed), 3 no such request.")]
pub struct ApproveArgs {
    id: String,
    /// Approve without asking (scripts).
    #[arg(long)]
    yes: bool,
}

#[derive(Args)]
pub struct RejectArgs {
    id: String,
    /// Why: told to the requester in the request's Slack thread.
    #[arg(long)]
    reason: String,
}

pub async fn run(c: RequestsCommand) -> CliResult {
    match c {
        RequestsCommand::List(a) => list(a).await,
        RequestsCommand::Show(a) => show(&a.id).await,
        RequestsCommand::Approve(a) => decide(&a.id, RequestVerdict::Approved, a.yes).await,
        RequestsCommand::Reject(a) => decide(&a.id, RequestVerdict::Rejected { reason: a.reason }, false).await,
        RequestsCommand::Cancel(a) => cancel(&a.id).await,
    }
}

/// A request as `-o json|yaml` print it.
#[derive(Serialize)]
struct View<'a> {
    id: &'a str,
    state: String,
    /// Why the scan refuses its item, when it does.
    refused: Option<String>,
    request: &'a capblock_shared::domain::request::Request,
    decision: Option<&'a RequestDecision>,
}

fn view(c: &Checked) -> View<'_> {
    let (state, refused) = match &c.state {
        Ok(s) => (s.as_str().to_string(), None),
        Err(e) => ("refused".to_string(), Some(e.to_string())),
    };
    View { id: &c.request.id, state, refused, request: &c.request, decision: c.decision.as_ref() }
}

/// Whose requests the caller lists: everyone's for an approver of some team (or on `--all`),
/// else their own, the only ones the requesters' policy lets them read.
enum Whose {
    Everyone,
    Own(Caller),
}

/// Whose requests the caller sees, by the teams' approvers; said on stderr when their own.
async fn whose(teams: &BTreeMap<String, TeamApproval>, all: bool) -> Result<Whose, CliError> {
    if all {
        return Ok(Whose::Everyone);
    }
    let me = caller(&sdk().await).await.map_err(CliError::Failed)?;
    if teams.values().any(|t| t.may_approve(&me.arn)) {
        return Ok(Whose::Everyone);
    }
    eprintln!(
        "Your requests (filed as {}): you approve for no team in the stack's TeamApprovals, so you see your own.",
        me.user_id
    );
    Ok(Whose::Own(me))
}

/// The requests the caller sees, each checked as the scan checks it.
async fn seen(store: &DynamoStore, all: bool, now: DateTime<Utc>) -> Result<(Vec<Checked>, Whose), CliError> {
    let teams = team_approvals()?;
    let whose = whose(&teams, all).await?;
    let checked = match &whose {
        Whose::Everyone => read_requests(store, &teams, now).await?,
        Whose::Own(me) => read_own_requests(store, &me.user_id, &teams, now).await?,
    };
    Ok((checked, whose))
}

async fn list(a: ListArgs) -> CliResult {
    let now = clock_now().await?;
    let store = store().await?;
    let (all, whose) = seen(&store, a.all, now).await?;
    let views: Vec<View> = all.iter().map(view).collect();
    if a.output.data(&views)? {
        return Ok(());
    }
    let own = matches!(whose, Whose::Own(_));
    if views.is_empty() {
        println!("{}", if own { "you have filed no requests (capblock request files one)" } else { "no requests" });
        return Ok(());
    }
    let columns = [
        Column::whole("ID"),
        Column::text("STATE"),
        Column::text("TEAM"),
        Column::text("WHAT"),
        Column::number("MOST (USD)"),
        Column::text("WHO").wide(),
        Column::text("WHY"),
    ];
    let rows: Vec<Vec<String>> = all
        .iter()
        .zip(&views)
        .map(|(c, v)| {
            let t = &c.request.terms;
            let types: Vec<String> = t.instance_types.iter().map(|i| i.to_string()).collect();
            vec![
                c.request.id.clone(),
                v.state.clone(),
                t.team.clone(),
                format!("{} x {} for {}d", t.instance_count, types.join("|"), t.days),
                table::money(&t.max_fee()),
                t.slack.clone().unwrap_or_else(|| c.request.requester.clone()),
                t.reason.clone(),
            ]
        })
        .collect();
    println!("{}", table::render(&columns, &rows, a.output.layout()));
    if own {
        println!("{} request(s) of yours; withdraw one with: capblock requests cancel ID", views.len());
    } else {
        println!("{} request(s); approve one with: capblock requests approve ID", views.len());
    }
    Ok(())
}

/// Request `id` among those the caller sees (`seen`).
async fn find(store: &DynamoStore, id: &str, now: DateTime<Utc>) -> Result<Checked, CliError> {
    let (seen, whose) = seen(store, false, now).await?;
    seen.into_iter().find(|c| c.request.id == id).ok_or_else(|| {
        CliError::NotFound(match whose {
            Whose::Everyone => format!("no request {id:?} (`capblock requests list` lists them)"),
            Whose::Own(me) => format!(
                "you ({}) have no request {id:?} (`capblock requests list` lists yours; an approver sees everyone's)",
                me.user_id
            ),
        })
    })
}

/// The request in words: its terms, its state, its decision.
fn describe(c: &Checked) -> String {
    let r = &c.request;
    let t = &r.terms;
    let state = match &c.state {
        Ok(RequestState::Bought { intent }) => format!("bought (purchase {intent})"),
        Ok(RequestState::Rejected { reason }) => format!("rejected: {reason}"),
        Ok(s) => s.as_str().to_string(),
        Err(e) => format!("refused: {e}"),
    };
    let types: Vec<String> = t.instance_types.iter().map(|i| i.to_string()).collect();
    let regions: Vec<String> = t.regions.iter().map(|i| i.to_string()).collect();
    let mut out = vec![
        format!("Request {} ({state})", r.id),
        format!("  by        {}{}", r.requester, t.slack.as_ref().map_or(String::new(), |h| format!(" ({h})"))),
        format!("  filed     {}", table::when_utc(r.filed_at)),
        format!(
            "  what      {} x {} for {} day(s) in {}",
            t.instance_count,
            types.join(" or "),
            t.days,
            regions.join(", ")
        ),
        format!(
            "  window    starts from {}, ends by {}",
            table::when_utc(t.earliest_start),
            table::when_utc(t.latest_end)
        ),
        format!(
            "  cap       {} per accelerator-hour, at most {} in all",
            t.max_price_per_accelerator_hour,
            t.max_fee()
        ),
        format!("  team      {}", t.team),
        format!("  why       {}", t.reason),
    ];
    if let Some(d) = &c.decision {
        out.push(format!("  decided   by {} at {}", d.by, table::when_utc(d.at)));
    }
    out.join("\n")
}

async fn show(id: &str) -> CliResult {
    let now = clock_now().await?;
    let store = store().await?;
    println!("{}", describe(&find(&store, id, now).await?));
    Ok(())
}

/// Each budget the request would be charged to this month (its team's, the account's), before
/// and after its most fee.
async fn budgets(store: &DynamoStore, c: &Checked, now: DateTime<Utc>) -> Result<String, CliError> {
    let settings = stored_settings(store).await?;
    let period = Period::budget_month(now);
    let most = c.request.terms.max_fee().amount();
    let team = c.request.terms.team.clone();
    let limits: [(BudgetOwner, Option<Money>); 2] = [
        (BudgetOwner::Team(team.clone()), settings.as_ref().and_then(|s| s.stack.team_budgets.get(&team).copied())),
        (BudgetOwner::Account, settings.as_ref().and_then(|s| s.stack.account_budget)),
    ];
    let mut lines = vec![format!("Budgets for {} (before -> after the most fee):", period.as_str())];
    for (owner, limit) in limits {
        let before = store.usage(&owner, &period).await?.map_or(Decimal::ZERO, |u| u.committed.amount());
        let after = before + most;
        let of = limit.map_or("no limit".to_string(), |l| format!("of {l}"));
        let over = limit.is_some_and(|l| after > l.amount());
        lines.push(format!(
            "  {:<20} {} -> {} USD {of}{}",
            owner.key(),
            before.round_dp(2),
            after.round_dp(2),
            if over { "  (NO ROOM: the purchase would be refused)" } else { "" }
        ));
    }
    Ok(lines.join("\n"))
}

/// The fee range: the least at the list price of the cheapest type (or nothing known), to the
/// most the cap allows.
fn fee_range(c: &Checked, now: DateTime<Utc>) -> String {
    let t = &c.request.terms;
    let catalog = capblock_shared::domain::catalog::AcceleratorCatalog::new();
    let hours = Decimal::from(t.days) * Decimal::from(24);
    let least = t
        .instance_types
        .iter()
        .filter_map(|ty| {
            let rate = capblock_shared::domain::list_price::list_rate(ty.as_str(), now)?.usd;
            let accel = Decimal::from(catalog.accelerators(ty)?);
            Some(
                (rate.min(t.max_price_per_accelerator_hour.amount()) * accel * Decimal::from(t.instance_count) * hours)
                    .round_dp(2),
            )
        })
        .min();
    match least {
        Some(l) => format!("Fee: from about {l} USD (the list price, or the cap if lower) to at most {}.", t.max_fee()),
        None => format!("Fee: at most {} (no list price known for its types).", t.max_fee()),
    }
}

async fn decide(id: &str, verdict: RequestVerdict, yes: bool) -> CliResult {
    let sdk = sdk().await;
    let now = clock_now().await?;
    let me = caller(&sdk).await.map_err(CliError::Failed)?;
    let store = store().await?;
    // Refused before any read: a requester's policy reads no other's request.
    if !team_approvals()?.values().any(|t| t.may_approve(&me.arn)) {
        return Err(CliError::Refused(format!(
            "{} approves for no team (the stack's TeamApprovals parameter names each team's approvers)",
            me.arn
        )));
    }
    let c = find(&store, id, now).await?;
    match &c.state {
        Ok(RequestState::Filed) => {}
        Ok(s) => return Err(CliError::Refused(format!("request {id} is {}, not waiting for a decision", s.as_str()))),
        Err(e) => return Err(CliError::Refused(format!("request {id}'s item is refused: {e}"))),
    }
    let teams = team_approvals()?;
    let team = &c.request.terms.team;
    if !teams.get(team).is_some_and(|t| t.may_approve(&me.arn)) {
        return Err(CliError::Refused(format!(
            "{} is not an approver of team {team} (the stack's TeamApprovals parameter names them)",
            me.arn
        )));
    }
    if verdict == RequestVerdict::Approved {
        eprintln!("{}\n\n{}\n{}\n", describe(&c), fee_range(&c, now), budgets(&store, &c, now).await?);
        eprintln!(
            "Approving lets capblock buy one block in the window under the cap; a purchase cannot be cancelled or refunded."
        );
        confirm_typed("", yes)?;
    }
    let decision = RequestDecision {
        request_id: c.request.id.clone(),
        requester: c.request.requester.clone(),
        terms: c.request.terms.clone(),
        by: me.arn.clone(),
        at: now,
        verdict: verdict.clone(),
        consumed_by: None,
    };
    store.decide_request(&decision).await.map_err(|e| match e {
        capblock_shared::ports::StoreError::Conflict(_) => {
            CliError::Refused(format!("request {id} was decided already"))
        }
        other => other.into(),
    })?;
    match verdict {
        RequestVerdict::Approved => println!(
            "Approved request {id} as {}: the scan buys it when a block in its window is under its cap.",
            me.arn
        ),
        RequestVerdict::Rejected { .. } => println!("Rejected request {id} as {}.", me.arn),
    }
    Ok(())
}

async fn cancel(id: &str) -> CliResult {
    let sdk = sdk().await;
    let now = clock_now().await?;
    let me = caller(&sdk).await.map_err(CliError::Failed)?;
    let store = store().await?;
    store.cancel_request(&me.user_id, id, now).await.map_err(|e| match e {
        capblock_shared::ports::StoreError::NotFound { .. } => {
            CliError::NotFound(format!("you ({}) have no request {id:?}: only its requester may cancel it", me.user_id))
        }
        capblock_shared::ports::StoreError::Conflict(_) => {
            CliError::Refused(format!("request {id} is cancelled already"))
        }
        other => other.into(),
    })?;
    println!(
        "Cancelled request {id}: nothing will be bought for it (unless a purchase consumed its approval already)."
    );
    Ok(())
}
