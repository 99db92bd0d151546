//! `capblock offerings`: search the market now, cheapest per accelerator-hour first.

use capblock_shared::app::paced_asker::{Answer, ONE_SHOT_REFUSALS, Pacing, Retrying, ask_once};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::catalog::{AcceleratorCatalog, quota_in_words, quota_request};
use capblock_shared::domain::decision::{Priced, better};
use capblock_shared::domain::ids::{InstanceType, Region};
use capblock_shared::domain::plan::{DescribeBudget, family};
use capblock_shared::domain::ultraserver::{UltraServerType, UltraServers};
use capblock_shared::ports::{DESCRIBE_LIMIT, InstanceTypeSource, OfferingQuery, QuotaSource, SeenOfferings};
use chrono::{DateTime, Duration, Utc};
use clap::Args;
use serde::Serialize;

use crate::context::{CliError, CliResult, DescribeArgs, Window, sdk, store};
use crate::output::OutputArgs;
use crate::table::{self, safe};

// Every argument is parsed by clap, so a bad one is a usage error: exit 2 with the argument
// named, before anything is asked.
#[derive(Args)]
#[command(after_help = "Examples:\n  capblock offerings --types p5.48xlarge --regions us-east-1\n  \
capblock offerings --types p5.48xlarge,p5e.48xlarge --counts 1,2 --days 1-7 --regions us-east-1,us-west-2 --from 2026-12-20\n  \
capblock offerings --ultraservers u-p6e-gb200x72 --days 1-7 --regions us-east-1\n  \
capblock offerings --types p5.48xlarge --regions us-east-1 -o wide   # every column\n  \
capblock offerings --types p5.48xlarge --regions us-east-1 -o json | jq -r '.offerings[0].offering.id'\n\n\
The table is sorted by the price per accelerator-hour, cheapest first; buy one within the hour with \
`capblock buy OFFERING --rule RULE`. Each refusal by EC2 is said on stderr as it is waited out; an \
instance family refused at every call, each a refill apart (a Capacity Block quota of 0, or someone \
else spending the describe limit), is given up after a few calls with what to do; the others are still shown.\n\
Exit codes: 0 offerings found, 1 AWS failure, 2 bad input or a family EC2 refused every time, 3 nothing offered.")]
#[command(mut_arg("from", |a| a.help("Earliest start (2026-12-20, 2026-12-20T11:30 UTC, or RFC 3339); default: now.")), mut_arg("to", |a| a.help("Latest start (a date counts whole); default: 8 weeks after --from.")))]
pub struct OfferingsArgs {
    /// Instance types, comma-separated (e.g. p5.48xlarge,p5e.48xlarge).
    #[arg(
        long,
        alias = "type",
        value_delimiter = ',',
        required_unless_present = "ultraservers",
        conflicts_with = "ultraservers"
    )]
    types: Vec<InstanceType>,
    /// UltraServer types instead of instance types, comma-separated (u-p6e-gb200x72,
    /// u-p6e-gb200x36, u-trn2x64): EC2 is asked with UltraserverType + UltraserverCount.
    #[arg(long, value_delimiter = ',')]
    ultraservers: Vec<UltraServerType>,
    /// How many UltraServers per block, comma-separated (1-16), with --ultraservers.
    #[arg(long, value_delimiter = ',', default_value = "1",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(capblock_shared::domain::ultraserver::MAX_COUNT)))]
    ultraserver_counts: Vec<u32>,
    /// Instance counts, comma-separated (1-64).
    #[arg(long, value_delimiter = ',', default_value = "1",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(capblock_shared::domain::rule::MAX_INSTANCES_PER_BLOCK)))]
    counts: Vec<u32>,
    /// Durations in days EC2 sells (1-14, then multiples of 7 up to 182): a list (1,2,7) or a
    /// range (1-7, keeping the sellable ones).
    #[arg(long, default_value = "1", value_parser = parse_days)]
    days: Days,
    /// Regions, comma-separated; default: the profile's region (--profile), else AWS_REGION, else
    /// the AWS profile's.
    #[arg(long, alias = "region", value_delimiter = ',')]
    regions: Vec<Region>,
    #[command(flatten)]
    window: Window,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    describe: DescribeArgs,
}

/// `--days`, parsed: durations EC2 sells.
#[derive(Debug, Clone, PartialEq)]
struct Days(Vec<u32>);

fn parse_days(s: &str) -> Result<Days, String> {
    use capblock_shared::domain::rule::is_sellable_duration_days as sellable;
    const SOLD: &str = "EC2 sells 1-14 days, then multiples of 7 up to 182";
    let number = |d: &str| d.trim().parse::<u32>().map_err(|_| format!("{d:?} is not a number of days"));
    let days: Vec<u32> = if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (number(a)?, number(b)?);
        if a == 0 || b < a || b > 182 {
            return Err(format!("{s:?} is not a range of days within 1-182"));
        }
        (a..=b).filter(|d| sellable(i64::from(*d))).collect()
    } else {
        let days = s.split(',').map(number).collect::<Result<Vec<u32>, _>>()?;
        if let Some(d) = days.iter().find(|d| !sellable(i64::from(**d))) {
            return Err(format!("{d} days is not a duration EC2 sells ({SOLD})"));
        }
        days
    };
    if days.is_empty() {
        return Err(format!("{s:?} holds no duration EC2 sells ({SOLD})"));
    }
    Ok(Days(days))
}

pub async fn run(a: OfferingsArgs) -> CliResult {
    let regions = crate::context::regions_or_default(a.regions.clone(), "--regions").await?;
    let from = match a.window.from {
        Some(from) => from,
        None => crate::context::clock_now().await?,
    };
    let to =
        a.window.to.unwrap_or_else(|| from.checked_add_signed(Duration::weeks(8)).unwrap_or(DateTime::<Utc>::MAX_UTC));
    let (queries, types) = questions(&a, &regions, from, to)?;
    let market = Ec2Market::new(sdk().await);
    let mut catalog = AcceleratorCatalog::new();
    if let Some(r) = regions.first()
        && let Ok(found) = market.accelerators(r, &types).await
    {
        for (t, n) in found {
            catalog.learn(t, n);
        }
    }
    // A person waits for every answer (an hour at most), at the scan's pace; a family EC2
    // refuses at every rested call is given up after `ONE_SHOT_REFUSALS` of them (they add
    // under a minute at the default pace).
    let budget = a.describe.budget(std::time::Duration::from_secs(3600))?;
    let data = a.output.is_data();
    if !data {
        // Said before the first call, however few the questions: a person knows at once what
        // the wait is.
        eprintln!("{}", the_wait(queries.len(), regions.len(), &budget));
    }
    let progress = crate::progress::Progress::new(queries.len(), data);
    // Each refusal is said as it is waited out, whatever the format: stderr is the person's.
    let asked =
        ask_once(&market, &queries, &Pacing::from(&budget), || progress.tick(), |r| progress.say(&retrying(r))).await;
    progress.finish();
    let found = Found::sort(&market, &queries, asked.answers, &catalog).await;
    // Remembered an hour in the stack's table (when a stack or table is named), for `capblock buy`
    // to take one by its id: EC2 may give the same block another id in its next answer.
    let remembered = remember(&found.priced).await;
    let document = serde_json::json!({"offerings": found.priced, "failures": found.failures, "refused": found.refused});
    if !a.output.data(&document)? {
        print(&found, queries.len(), remembered, a.output.layout());
    }
    // The findings, in every format: the offerings that were answered are shown above them.
    for r in &found.refused {
        eprintln!("error: {}\n  what to do: {}", safe(&r.finding), safe(&r.todo));
    }
    if !found.refused.is_empty() {
        Err(CliError::SearchRefused(found.refused.len()))
    } else if found.priced.is_empty() {
        Err(CliError::NothingFound)
    } else {
        Ok(())
    }
}

/// Every question the arguments ask, per region, instance type or UltraServers, count and
/// duration; and the instance types asked, for their accelerator counts.
fn questions(
    a: &OfferingsArgs,
    regions: &[Region],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(Vec<OfferingQuery>, Vec<InstanceType>), CliError> {
    // (instance type, instance count, UltraServers): instances, or whole UltraServers.
    let mut asks: Vec<(InstanceType, u32, Option<UltraServers>)> =
        a.types.iter().flat_map(|t| a.counts.iter().map(move |&c| (t.clone(), c, None))).collect();
    for &kind in &a.ultraservers {
        let instance_type = kind.instance_type().map_err(|e| CliError::Invalid(e.to_string()))?;
        for &count in &a.ultraserver_counts {
            let u = UltraServers { kind, count };
            asks.push((instance_type.clone(), u.instances(), Some(u)));
        }
    }
    let types: Vec<InstanceType> = {
        let mut v: Vec<InstanceType> = asks.iter().map(|(t, _, _)| t.clone()).collect();
        v.dedup();
        v
    };
    let mut queries = Vec::new();
    for r in regions {
        for (t, c, u) in &asks {
            for &d in &a.days.0 {
                queries.push(OfferingQuery {
                    region: r.clone(),
                    instance_type: t.clone(),
                    instance_count: *c,
                    ultraservers: *u,
                    duration_hours: d * 24,
                    start_from: from,
                    start_to: to,
                    also_types: Vec::new(),
                });
            }
        }
    }
    Ok((queries, types))
}

/// How many questions, where, and at what pace: the wait a person is in for.
fn the_wait(questions: usize, regions: usize, budget: &DescribeBudget) -> String {
    let per_region = questions.div_ceil(regions.max(1));
    format!(
        "asking {questions} question(s) in {regions} region(s), one call every {} per region (EC2's describe limit at a {:.0} % share){}",
        secs(budget.pace()),
        budget.share * 100.0,
        if per_region > 1 {
            format!(": about {}", secs(budget.pace().mul_f64((per_region - 1) as f64)))
        } else {
            String::new()
        }
    )
}

/// What the answers held: the offerings, cheapest first, the questions that failed, and the
/// families EC2 refused.
struct Found {
    priced: Vec<Priced>,
    failures: Vec<String>,
    refused: Vec<RefusedFamily>,
}

impl Found {
    /// Each answer to its place; a refused family's quota is read once per region.
    async fn sort(
        market: &Ec2Market,
        queries: &[OfferingQuery],
        answers: Vec<Answer>,
        catalog: &AcceleratorCatalog,
    ) -> Found {
        let mut priced = Vec::new();
        let mut failures = Vec::new();
        let mut refused: Vec<RefusedFamily> = Vec::new();
        for (q, ans) in queries.iter().zip(answers) {
            let what = format!("{} {} x{} {}d", q.region, q.instance_type, q.instance_count, q.duration_hours / 24);
            match ans {
                Answer::Offerings(list) => priced.extend(list.into_iter().filter_map(|o| Priced::new(o, catalog))),
                Answer::CarriedOver => {
                    failures.push(format!("{what}: still throttled by EC2's describe limit; try again later"))
                }
                // One finding per family and region, whatever its questions.
                Answer::QuotaZero | Answer::GivenUp => {
                    let fam = family(q.instance_type.as_str());
                    if !refused.iter().any(|r| r.region == q.region.as_str() && r.family == fam) {
                        let quota = market.capacity_block_quota(&q.region, fam).await;
                        refused.push(RefusedFamily::new(&q.region, &q.instance_type, quota));
                    }
                }
                Answer::NotSold(m) => failures.push(format!("{what}: not sold here: {m}")),
                Answer::Unsupported => failures.push(format!("{what}: the region does not sell Capacity Blocks")),
                Answer::Failed(e) => failures.push(format!("{what}: {e}")),
            }
        }
        priced.sort_by(better);
        priced.dedup_by(|a, b| a.offering.id == b.offering.id);
        Found { priced, failures, refused }
    }
}

/// The offerings as a table for a person, the failures as warnings, and how to buy one.
fn print(found: &Found, questions: usize, remembered: Result<bool, CliError>, layout: table::Layout) {
    let priced = &found.priced;
    let currency = table::currency(priced.iter().map(|p| &p.offering.fee));
    let columns = table::offering_columns(&currency);
    println!("{}", table::render(&columns, &table::offering_rows(priced), layout));
    println!("{} offering(s) from {questions} question(s)", priced.len());
    for f in &found.failures {
        eprintln!("warning: {}", crate::context::plain(f));
    }
    match remembered {
        Ok(true) => println!("buy one within the hour: capblock buy OFFERING-ID --rule RULE"),
        Ok(false) => {}
        Err(e) => eprintln!("warning: not remembered for `capblock buy`: {e}"),
    }
}

/// A wait as a person reads it, in the one duration style: `8s`, `5.7s`, `1m 40s`.
fn secs(d: std::time::Duration) -> String {
    capblock_shared::domain::duration::compact_std(d)
}

/// A refusal being waited out, in words, with what it may mean and how the search goes on.
fn retrying(r: &Retrying<'_>) -> String {
    let what = format!("{} {}", r.query.region, r.query.instance_type);
    let next = format!("retrying at one call every {}", secs(r.gap));
    match (r.code == DESCRIBE_LIMIT, r.in_a_row, r.give_up_after) {
        (true, Some(n), Some(limit)) => format!(
            "{what}: refused by EC2 ({}): describe limit or a quota of 0 for {}; {next} ({n} of {limit} refusals, \
             then the family is given up)",
            r.code,
            family(r.query.instance_type.as_str()).to_uppercase()
        ),
        (true, _, _) => format!("{what}: refused by EC2 ({}): describe limit, asked too fast; {next}", r.code),
        (false, _, _) => format!("{what}: refused by EC2 ({}): its API rate limit; {next}", r.code),
    }
}

/// A family whose searches EC2 refused every time in a region: the finding, and what to do,
/// told apart by the quota Service Quotas states (`None`: it could not be read).
#[derive(Debug, Clone, PartialEq, Serialize)]
struct RefusedFamily {
    region: String,
    family: String,
    /// The account's Capacity Block quota for the family, in vCPUs, as Service Quotas states it.
    quota_vcpus: Option<u32>,
    finding: String,
    todo: String,
}

impl RefusedFamily {
    fn new(region: &Region, instance_type: &InstanceType, quota: Option<u32>) -> RefusedFamily {
        let ty = instance_type.as_str();
        let fam = family(ty);
        let upper = fam.to_uppercase();
        let refused = format!(
            "{region} {fam}: EC2 refused every search ({ONE_SHOT_REFUSALS} in a row, each a full refill after the last, \
             CapacityBlockDescribeLimitExceeded)"
        );
        let request = quota_request(fam, region.as_str(), ty);
        let (finding, todo) = match quota {
            Some(0) => (
                format!("{refused}: the account's Capacity Block quota for {upper} is 0 (Service Quotas)"),
                format!("{request}, then search again"),
            ),
            Some(n) => (
                format!(
                    "{refused}, yet Service Quotas allows {} of {upper} Capacity Blocks: someone else in the account \
                     spends the describe limit",
                    quota_in_words(n, ty)
                ),
                format!(
                    "search again in a few minutes; CloudTrail shows who calls DescribeCapacityBlockOfferings in {region}"
                ),
            ),
            None => (
                format!(
                    "{refused}: the account's Capacity Block quota for {upper} is likely 0, or someone else in the \
                     account spends the describe limit (Service Quotas could not be read to tell)"
                ),
                format!(
                    "if Service Quotas shows 0 for it, {request}; if not, search again in a few minutes (CloudTrail \
                     shows who calls DescribeCapacityBlockOfferings in {region})"
                ),
            ),
        };
        RefusedFamily { region: region.to_string(), family: fam.to_string(), quota_vcpus: quota, finding, todo }
    }
}

/// How long `capblock buy` may take an offering `offerings` showed.
const REMEMBERED_FOR: Duration = Duration::hours(1);

/// Remembers what was shown, for `capblock buy`: `Ok(false)` without a table to keep it in.
async fn remember(priced: &[Priced]) -> Result<bool, CliError> {
    if priced.is_empty() || !crate::stack::named() {
        return Ok(false);
    }
    let offerings: Vec<_> = priced.iter().map(|p| p.offering.clone()).collect();
    // On the clock `buy` reads it by: how long a person may take to decide.
    let until = crate::context::clock_now().await? + REMEMBERED_FOR;
    store().await?.remember_offerings(&offerings, until).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_ranges_keep_sellable_durations() {
        assert_eq!(parse_days("1-3").unwrap().0, vec![1, 2, 3]);
        assert_eq!(parse_days("13-21").unwrap().0, vec![13, 14, 21]);
        assert_eq!(parse_days("1,7").unwrap().0, vec![1, 7]);
        assert!(parse_days("3-1").is_err());
        assert!(parse_days("x").is_err());
        // Durations EC2 does not sell, and ranges that would take forever to walk.
        for bad in ["0", "15", "1,183", "4294967295", "1-4294967295", "15-20", ""] {
            assert!(parse_days(bad).is_err(), "{bad}");
        }
    }

    /// The finding follows what Service Quotas says: 0 for certain (request it), more than 0
    /// (someone else spends the limit: no request), or unread (either, and how to tell).
    #[test]
    fn a_refused_family_says_what_its_quota_tells() {
        let west: Region = "us-west-2".parse().unwrap();
        let trn2: InstanceType = "trn2.48xlarge".parse().unwrap();
        let zero = RefusedFamily::new(&west, &trn2, Some(0));
        assert!(zero.finding.starts_with("us-west-2 trn2: EC2 refused every search (3 in a row"), "{zero:?}");
        assert!(zero.finding.ends_with("quota for TRN2 is 0 (Service Quotas)"), "{zero:?}");
        assert!(
            zero.todo.starts_with("request \"Concurrent TRN2 Capacity Blocks per account\" in us-west-2"),
            "{zero:?}"
        );
        let allowed = RefusedFamily::new(&west, &trn2, Some(192));
        assert!(allowed.finding.contains("allows 192 vCPUs (1 x trn2.48xlarge of 192 vCPUs)"), "{allowed:?}");
        assert!(allowed.todo.starts_with("search again in a few minutes") && !allowed.todo.contains("request"));
        let unread = RefusedFamily::new(&west, &trn2, None);
        assert!(unread.finding.contains("is likely 0, or someone else in the account spends"), "{unread:?}");
        assert!(unread.todo.starts_with("if Service Quotas shows 0 for it, request"), "{unread:?}");
    }

    /// Each refusal in words: the describe limit counted towards giving the family up, one the
    /// lane's own pace explains, and EC2's API rate limit.
    #[test]
    fn a_refusal_is_said_with_what_it_may_mean() {
        let from = DateTime::<Utc>::from_timestamp(1_796_000_000, 0).unwrap();
        let query = OfferingQuery {
            region: "us-east-1".parse().unwrap(),
            instance_type: "trn2.48xlarge".parse().unwrap(),
            instance_count: 1,
            ultraservers: None,
            duration_hours: 24,
            start_from: from,
            start_to: from,
            also_types: Vec::new(),
        };
        let told = |code, in_a_row, gap_ms| {
            retrying(&Retrying {
                query: &query,
                code,
                in_a_row,
                give_up_after: Some(ONE_SHOT_REFUSALS),
                gap: std::time::Duration::from_millis(gap_ms),
            })
        };
        assert_eq!(
            told(DESCRIBE_LIMIT, Some(1), 16_000),
            "us-east-1 trn2.48xlarge: refused by EC2 (CapacityBlockDescribeLimitExceeded): describe limit or a quota \
             of 0 for TRN2; retrying at one call every 16s (1 of 3 refusals, then the family is given up)"
        );
        assert!(
            told(DESCRIBE_LIMIT, None, 5_700)
                .ends_with("describe limit, asked too fast; retrying at one call every 5.7s")
        );
        assert!(
            told("RequestLimitExceeded", None, 250).ends_with("its API rate limit; retrying at one call every 250ms")
        );
    }
}
