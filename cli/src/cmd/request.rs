//! `capblock request`: a researcher files a request for capacity under their own identity (STS
//! GetCallerIdentity's `UserId`, never a flag), and is told at once what it would cost at the
//! list price and at the cheapest price seen lately, whether the team's budget has room, and
//! whether the account's quota allows it.

use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::identity::caller;
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::ids::{InstanceType, Region};
use capblock_shared::domain::list_price::list_rate;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::plan::family;
use capblock_shared::domain::request::{Request, RequestTerms};
use capblock_shared::ports::{Ledger, ObservationStore, QuotaSource, RequestStore};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use clap::Args;
use rust_decimal::Decimal;

use crate::context::{CliError, CliResult, clock_now, sdk, store, stored_settings};

/// How far back the cheapest price seen is looked for.
const RECENT: Duration = Duration::days(30);

#[derive(Args)]
#[command(
    // clap's own usage line names every required option on one line, past 80 columns.
    override_usage = "capblock request --type <TYPE> --count <COUNT> --days <DAYS>\n         \
--region <REGION> --from <FROM> --until <UNTIL> --max-price <USD>\n         \
--team <TEAM> --reason <REASON> [OPTIONS]",
    after_help = "Examples:\n  capblock request --type p5.48xlarge --count 2 --days 3 --region us-east-2 \\\n    \
--from 2026-12-10 --until 2026-12-20 --max-price 6.20 --team research \\\n    \
--reason \"fine-tune before the paper deadline\" --slack @ada\n  \
capblock request --type p5.48xlarge --type p5e.48xlarge --count 1 --days 7 --region us-east-1 \\\n    \
--region us-west-2 --from 2026-12-14T00:00:00Z --until 2027-01-10 --max-price 6.50 \\\n    \
--team infra --reason \"eval\"\n\n\
Files a request under your AWS identity (STS GetCallerIdentity: the user id your credentials \
carry, never a flag), and says at once what it would cost at the list price and at the cheapest \
price seen in the last 30 days, whether the team's budget has room for its most fee, and whether \
the account's quota allows it. Nothing is bought here: a request within the team's automatic \
limit is approved by the next scan, beyond it a lead approves it (`capblock requests approve`); \
then the scan buys the first block in the window under the cap, once. It expires when its \
window can no longer hold the block. See docs/requests.md.\n\
Exit codes: 0 filed, 1 AWS or store failure, 2 an invalid request (each problem named)."
)]
pub struct RequestArgs {
    /// An instance type that will do (repeat for several: the cheapest is bought).
    #[arg(long = "type", value_name = "TYPE", required = true)]
    types: Vec<InstanceType>,
    /// How many instances.
    #[arg(long)]
    count: u32,
    /// The block's length in days (1 to 14, or whole weeks to 182).
    #[arg(long)]
    days: u32,
    /// A region to look in (repeat for several).
    #[arg(long = "region", value_name = "REGION", required = true)]
    regions: Vec<Region>,
    /// The earliest the block may start: a date (midnight UTC) or an RFC 3339 time.
    #[arg(long, value_parser = instant)]
    from: DateTime<Utc>,
    /// The latest the block may end: a date (midnight UTC) or an RFC 3339 time.
    #[arg(long, value_parser = instant)]
    until: DateTime<Utc>,
    /// The most per accelerator-hour, in USD.
    #[arg(long, value_name = "USD")]
    max_price: Decimal,
    /// The team whose budget pays.
    #[arg(long)]
    team: String,
    /// Why: shown to the approver and in the request's Slack thread.
    #[arg(long)]
    reason: String,
    /// Your Slack handle (@name), named in the request's Slack thread.
    #[arg(long)]
    slack: Option<String>,
}

/// A date (midnight UTC) or an RFC 3339 instant.
fn instant(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .map(|d| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc())
        .map_err(|_| format!("{s:?} is neither a date (2026-12-10) nor an RFC 3339 time"))
}

pub async fn run(a: RequestArgs) -> CliResult {
    let sdk = sdk().await;
    let now = clock_now().await?;
    let me = caller(&sdk).await.map_err(CliError::Failed)?;
    let cap = Money::usd(a.max_price).map_err(|e| CliError::Invalid(format!("--max-price: {e}")))?;
    let request = Request {
        id: format!("rq-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        requester: me.user_id.clone(),
        filed_at: now,
        terms: RequestTerms {
            instance_types: a.types,
            instance_count: a.count,
            days: a.days,
            regions: a.regions,
            earliest_start: a.from,
            latest_end: a.until,
            max_price_per_accelerator_hour: cap,
            team: a.team,
            reason: a.reason,
            slack: a.slack,
        },
        cancelled_at: None,
    };
    let problems = request.problems();
    if !problems.is_empty() {
        let lines: Vec<String> = problems.iter().map(|p| format!("  - {p}")).collect();
        return Err(CliError::Invalid(format!("the request is not filed:\n{}", lines.join("\n"))));
    }
    let store = store().await?;
    let limit = stored_settings(&store).await?.and_then(|s| s.stack.team_budgets.get(&request.terms.team).copied());
    let estimate = estimate(&store, &request, limit, now).await?;
    let quota = quota(&Ec2Market::new(sdk.clone()), &request).await;
    store.file_request(&request).await?;
    println!("Filed request {} as {} ({}).", request.id, me.user_id, me.arn);
    println!("{estimate}\n{quota}");
    println!(
        "Next: the scan approves it within the team's automatic limit, or a lead runs `capblock requests approve {}`.\n\
         Follow it with `capblock requests show {}`; withdraw it with `capblock requests cancel {}`.",
        request.id, request.id, request.id
    );
    Ok(())
}

/// The fee at the list price and at the cheapest price seen in the last 30 days, and the team
/// budget's room for the request's most fee, in words.
async fn estimate<S: ObservationStore + Ledger>(
    store: &S,
    r: &Request,
    limit: Option<Money>,
    now: DateTime<Utc>,
) -> Result<String, CliError> {
    let t = &r.terms;
    let catalog = AcceleratorCatalog::new();
    let hours = Decimal::from(t.days) * Decimal::from(24);
    let fee_at = |ty: &InstanceType, rate: Decimal| {
        let units = Decimal::from(catalog.accelerators(ty).unwrap_or(0)) * Decimal::from(t.instance_count) * hours;
        (rate * units).round_dp(2)
    };
    let mut lines =
        vec![format!("At most {} in all ({} per accelerator-hour).", t.max_fee(), t.max_price_per_accelerator_hour)];
    for ty in &t.instance_types {
        match list_rate(ty.as_str(), now) {
            Some(l) => lines.push(format!(
                "At the list price ({} USD per accelerator-hour for {}, {}): {} USD{}.",
                l.usd,
                l.family,
                l.source,
                fee_at(ty, l.usd),
                if l.usd > t.max_price_per_accelerator_hour.amount() { ", over your cap" } else { "" }
            )),
            None => lines.push(format!("No list price is known for {ty}.")),
        }
        let mut cheapest: Option<(Decimal, DateTime<Utc>, String)> = None;
        for region in &t.regions {
            for o in store.history(region, ty, now - RECENT, now).await? {
                let Some(rate) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) else { continue };
                if cheapest.as_ref().is_none_or(|(c, _, _)| rate.per_unit < *c) {
                    cheapest = Some((rate.per_unit, o.seen_at, region.to_string()));
                }
            }
        }
        lines.push(match cheapest {
            Some((rate, at, region)) => format!(
                "At the cheapest price seen for {ty} in the last 30 days ({} USD per accelerator-hour, {region}, {}): {} USD.",
                rate.round_dp(4),
                at.format("%Y-%m-%d %H:%M UTC"),
                fee_at(ty, rate)
            ),
            None => format!("No {ty} offering was seen in these regions in the last 30 days."),
        });
    }
    lines.push(team_room(store, r, limit, now).await?);
    Ok(lines.join("\n"))
}

/// Whether the team's budget this month has room for the request's most fee.
async fn team_room<S: Ledger>(
    store: &S,
    r: &Request,
    limit: Option<Money>,
    now: DateTime<Utc>,
) -> Result<String, CliError> {
    let team = &r.terms.team;
    let period = Period::budget_month(now);
    let Some(limit) = limit else {
        return Ok(format!("Team {team} has no budget in this stack: the request buys nothing until it has one."));
    };
    let committed =
        store.usage(&BudgetOwner::Team(team.clone()), &period).await?.map_or(Decimal::ZERO, |u| u.committed.amount());
    let room = limit.amount() - committed;
    let most = r.terms.max_fee().amount();
    Ok(format!(
        "Team {team}'s budget for {}: {} USD of {} committed, {} USD left: {}.",
        period.as_str(),
        committed.round_dp(2),
        limit,
        room.round_dp(2),
        if most <= room { "room for the most it may cost" } else { "NOT enough for the most it may cost" }
    ))
}

/// The account's Capacity Block quota for each family in each region, as Service Quotas says.
async fn quota<Q: QuotaSource>(market: &Q, r: &Request) -> String {
    let mut lines = Vec::new();
    for region in &r.terms.regions {
        for ty in &r.terms.instance_types {
            let fam = family(ty.as_str());
            lines.push(match market.capacity_block_quota(region, fam).await {
                Some(0) => format!("Quota: 0 concurrent {fam} Capacity Blocks in {region}: none can be bought there until it is raised."),
                Some(n) => format!("Quota: {n} concurrent {fam} Capacity Block(s) in {region}."),
                None => format!("Quota: Service Quotas does not say for {fam} in {region} (EC2's refusals will)."),
            });
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_or_a_time_is_an_instant() {
        assert_eq!(instant("2026-12-10").unwrap().to_rfc3339(), "2026-12-10T00:00:00+00:00");
        assert_eq!(instant("2026-12-10T06:30:00Z").unwrap().to_rfc3339(), "2026-12-10T06:30:00+00:00");
        assert!(instant("next week").unwrap_err().contains("neither a date"));
    }
}
