//! `capblock request`: a researcher files a request for capacity under their own identity (STS
//! GetCallerIdentity's `UserId`, never a flag), and is told at once what it would cost at the
//! list price and at the cheapest price seen lately, whether the team's budget has room, and
//! whether the account's quota allows it.

use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::identity::caller;
use capblock_shared::domain::block::{QuotaHeld, quota_held};
use capblock_shared::domain::budget::{BudgetOwner, Period};
use capblock_shared::domain::catalog::{AcceleratorCatalog, quota_request, vcpus_of};
use capblock_shared::domain::ids::{InstanceType, Region};
use capblock_shared::domain::list_price::list_rate;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::plan::family;
use capblock_shared::domain::request::{Request, RequestTerms};
use capblock_shared::ports::{BlockStore, Ledger, ObservationStore, QuotaSource, RequestStore};
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
    let quota = quota(&Ec2Market::new(sdk.clone()), &store, &request).await;
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

/// The account's Capacity Block quota for each family in each region, as Service Quotas says,
/// less what the store says is held there (`quota_held`: blocks held and purchases in flight),
/// against what the request needs. What is held is read best-effort: a requester's policy may
/// not read the blocks, and the line then says the whole quota.
async fn quota<Q: QuotaSource, S: Ledger + BlockStore>(market: &Q, store: &S, r: &Request) -> String {
    let held = match (store.open_blocks(None).await, store.open_intents().await) {
        (Ok(blocks), Ok(intents)) => Ok((blocks, intents)),
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    };
    let mut lines = Vec::new();
    for region in &r.terms.regions {
        let mut families: Vec<&str> = r.terms.instance_types.iter().map(|t| family(t.as_str())).collect();
        families.dedup();
        for fam in families {
            // The largest of the request's types in the family: the scan may buy any of them.
            let ty = r
                .terms
                .instance_types
                .iter()
                .filter(|t| family(t.as_str()) == fam)
                .max_by_key(|t| vcpus_of(t.as_str()).unwrap_or(0))
                .expect("a family of the request's types");
            let taken = held.as_ref().map(|(b, i)| quota_held(b, i, region, fam)).map_err(String::clone);
            let said = market.capacity_block_quota(region, fam).await;
            lines.push(quota_line(region, fam, said, taken, r.terms.instance_count, ty));
        }
    }
    lines.join("\n")
}

/// One family's quota line: the quota in vCPUs, what is held, what is free, what the request
/// needs (`count` of `ty`), and whether it fits.
fn quota_line(
    region: &Region,
    fam: &str,
    quota: Option<u32>,
    held: Result<QuotaHeld, String>,
    count: u32,
    ty: &InstanceType,
) -> String {
    let need = vcpus_of(ty.as_str()).map(|per| (per.saturating_mul(count), per));
    let needs = match need {
        Some((n, per)) => format!("this request needs {n} vCPUs ({count} x {ty} of {per} vCPUs)"),
        None => format!("this request needs {count} x {ty} (its vCPUs are not known here)"),
    };
    let ask = quota_request(fam, region.as_str(), ty.as_str());
    if quota == Some(0) {
        return format!(
            "Quota: 0 vCPUs of {fam} Capacity Blocks in {region}: none can be bought there until it is raised: {ask}."
        );
    }
    let held = match held {
        Ok(h) => h,
        Err(e) => {
            let quota = quota.map_or("Service Quotas does not say".to_string(), |q| format!("{q} vCPUs"));
            return format!(
                "Quota: {quota} of {fam} in {region}; what is held there is not readable with your access ({e}); {needs}."
            );
        }
    };
    let unknown = if held.unknown > 0 {
        format!(", {} of them of a type whose vCPUs are not known here and not counted", held.unknown)
    } else {
        String::new()
    };
    let held_text = format!("{} vCPUs held ({} block(s) held or being bought{unknown})", held.vcpus, held.blocks);
    let Some(quota) = quota else {
        return format!(
            "Quota: Service Quotas does not say for {fam} in {region} (EC2's refusals will); {held_text} there; {needs}."
        );
    };
    let free = quota.saturating_sub(held.vcpus);
    let verdict = match need {
        Some((n, _)) if n <= free => "it fits".to_string(),
        Some(_) => format!("NOT enough free: the purchase would be refused until blocks end or you {ask}"),
        None => "whether it fits is not known".to_string(),
    };
    format!("Quota: {quota} vCPUs of {fam} in {region}, {held_text}, {free} free: {needs}: {verdict}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quota line subtracts what is held: "quota 1536 vCPUs of p5, 576 held, 960 free: this
    /// request needs 384" fits; more than is free does not, and says what to ask for; a store
    /// the caller may not read says the whole quota; a quota Service Quotas does not say still
    /// says what is held.
    #[test]
    fn the_quota_line_subtracts_what_is_held() {
        let east: Region = "us-east-2".parse().unwrap();
        let p5: InstanceType = "p5.48xlarge".parse().unwrap();
        let held = QuotaHeld { vcpus: 576, blocks: 2, unknown: 0 };
        assert_eq!(
            quota_line(&east, "p5", Some(1536), Ok(held), 2, &p5),
            "Quota: 1536 vCPUs of p5 in us-east-2, 576 vCPUs held (2 block(s) held or being bought), 960 free: \
this request needs 384 vCPUs (2 x p5.48xlarge of 192 vCPUs): it fits."
        );
        let over = quota_line(&east, "p5", Some(1536), Ok(held), 6, &p5);
        assert!(
            over.contains("960 free: this request needs 1152 vCPUs (6 x p5.48xlarge of 192 vCPUs): NOT enough free"),
            "{over}"
        );
        assert!(over.contains("request \"Concurrent P5 Capacity Blocks per account\" in us-east-2"), "{over}");
        let odd = quota_line(&east, "p5", Some(1536), Ok(QuotaHeld { unknown: 1, ..held }), 2, &p5);
        assert!(
            odd.contains("(2 block(s) held or being bought, 1 of them of a type whose vCPUs are not known here"),
            "{odd}"
        );
        let unread = quota_line(&east, "p5", Some(1536), Err("AccessDeniedException".into()), 2, &p5);
        assert!(unread.contains("Quota: 1536 vCPUs of p5 in us-east-2; what is held there is not readable with your access (AccessDeniedException); this request needs 384 vCPUs"), "{unread}");
        assert!(
            quota_line(&east, "p5", Some(0), Ok(held), 2, &p5)
                .contains("0 vCPUs of p5 Capacity Blocks in us-east-2: none can be bought")
        );
        assert!(
            quota_line(&east, "p5", None, Ok(held), 2, &p5).contains("Service Quotas does not say for p5 in us-east-2")
        );
    }

    #[test]
    fn a_date_or_a_time_is_an_instant() {
        assert_eq!(instant("2026-12-10").unwrap().to_rfc3339(), "2026-12-10T00:00:00+00:00");
        assert_eq!(instant("2026-12-10T06:30:00Z").unwrap().to_rfc3339(), "2026-12-10T06:30:00+00:00");
        assert!(instant("next week").unwrap_err().contains("neither a date"));
    }
}
