//! `capblock offerings`: search the market now, cheapest per accelerator-hour first.

use capblock_shared::app::fan_out::{Answer, Carried, Pacing, ask_all};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::decision::{Priced, better};
use capblock_shared::domain::names::{InstanceType, Region};
use capblock_shared::domain::ultraserver::{UltraServerType, UltraServers};
use capblock_shared::ports::{InstanceTypeSource, OfferingQuery, SeenOfferings};
use chrono::{DateTime, Duration, Utc};
use clap::Args;

use crate::context::{CliError, CliResult, DescribeArgs, Window, sdk, store};
use crate::output::OutputArgs;
use crate::table;

// Every argument is parsed by clap, so a bad one is a usage error: exit 2 with the argument
// named, before anything is asked.
#[derive(Args)]
#[command(after_help = "Examples:\n  capblock offerings --types p5.48xlarge --regions us-east-1\n  \
capblock offerings --types p5.48xlarge,p5e.48xlarge --counts 1,2 --days 1-7 --regions us-east-1,us-west-2 --from 2026-12-20\n  \
capblock offerings --ultraservers u-p6e-gb200x72 --days 1-7 --regions us-east-1\n  \
capblock offerings --types p5.48xlarge --regions us-east-1 -o wide   # every column\n  \
capblock offerings --types p5.48xlarge --regions us-east-1 -o json | jq -r '.offerings[0].offering.id'\n\n\
The table is sorted by the price per accelerator-hour, cheapest first; buy one within the hour with \
`capblock buy OFFERING --rule RULE`.\n\
Exit codes: 0 offerings found, 1 AWS failure, 2 bad input, 3 nothing offered.")]
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
    /// Regions, comma-separated.
    #[arg(long, alias = "region", value_delimiter = ',', env = "AWS_REGION", required = true)]
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
    let (regions, types, Days(days)) = (a.regions, a.types, a.days);
    let from = match a.window.from {
        Some(from) => from,
        None => crate::context::clock_now().await?,
    };
    let to =
        a.window.to.unwrap_or_else(|| from.checked_add_signed(Duration::weeks(8)).unwrap_or(DateTime::<Utc>::MAX_UTC));
    // (instance type, instance count, UltraServers): instances, or whole UltraServers.
    let mut asks: Vec<(InstanceType, u32, Option<UltraServers>)> =
        types.iter().flat_map(|t| a.counts.iter().map(move |&c| (t.clone(), c, None))).collect();
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
    for r in &regions {
        for (t, c, u) in &asks {
            for &d in &days {
                queries.push(OfferingQuery {
                    region: r.clone(),
                    instance_type: t.clone(),
                    instance_count: *c,
                    ultraservers: *u,
                    duration_hours: d * 24,
                    start_from: from,
                    start_to: to,
                });
            }
        }
    }
    let market = Ec2Market::new(sdk().await);
    let mut catalog = AcceleratorCatalog::new();
    if let Some(r) = regions.first()
        && let Ok(found) = market.accelerators(r, &types).await
    {
        for (t, n) in found {
            catalog.learn(t, n);
        }
    }
    // A person waits for every answer (an hour at most), at the scan's pace.
    let budget = a.describe.budget(std::time::Duration::from_secs(3600))?;
    let per_region = queries.len().div_ceil(regions.len().max(1));
    let data = a.output.is_data();
    if !data && per_region > 1 {
        eprintln!(
            "asking {} question(s), one every {:.0} s per region (EC2's describe limit at a {:.0} % share): about {:.0} s",
            queries.len(),
            budget.pace().as_secs_f64(),
            budget.share * 100.0,
            (per_region - 1) as f64 * budget.pace().as_secs_f64()
        );
    }
    let progress = crate::progress::Progress::new(queries.len(), data);
    let asked = ask_all(&market, &queries, &Pacing::from(&budget), &Carried::default(), || progress.tick()).await;
    progress.finish();
    let mut priced = Vec::new();
    let mut failures = Vec::new();
    for (q, ans) in queries.iter().zip(asked.answers) {
        let what = format!("{} {} x{} {}d", q.region, q.instance_type, q.instance_count, q.duration_hours / 24);
        match ans {
            Answer::Offerings(list) => priced.extend(list.into_iter().filter_map(|o| Priced::new(o, &catalog))),
            Answer::CarriedOver => failures.push(format!("{what}: still throttled by EC2's describe limit; try again later")),
            Answer::QuotaZero => failures.push(format!(
                "{what}: EC2 answered CapacityBlockDescribeLimitExceeded every time: the account's Capacity Block quota for {} looks like 0",
                capblock_shared::domain::plan::family(q.instance_type.as_str())
            )),
            Answer::NotSold(m) => failures.push(format!("{what}: not sold here: {m}")),
            Answer::Unsupported => failures.push(format!("{what}: the region does not sell Capacity Blocks")),
            Answer::Failed(e) => failures.push(format!("{what}: {e}")),
        }
    }
    priced.sort_by(better);
    priced.dedup_by(|a, b| a.offering.id == b.offering.id);
    // Remembered an hour in the stack's table (when a stack or table is named), for `capblock buy`
    // to take one by its id: EC2 may give the same block another id in its next answer.
    let remembered = remember(&priced).await;
    if !a.output.data(&serde_json::json!({"offerings": priced, "failures": failures}))? {
        let currency = table::currency(priced.iter().map(|p| &p.offering.fee));
        let columns = table::offering_columns(&currency);
        println!("{}", table::render(&columns, &table::offering_rows(&priced), a.output.layout()));
        println!("{} offering(s) from {} question(s)", priced.len(), queries.len());
        for f in &failures {
            eprintln!("warning: {}", crate::context::plain(f));
        }
        match remembered {
            Ok(true) => println!("buy one within the hour: capblock buy OFFERING-ID --rule RULE"),
            Ok(false) => {}
            Err(e) => eprintln!("warning: not remembered for `capblock buy`: {e}"),
        }
    }
    if priced.is_empty() { Err(CliError::NothingFound) } else { Ok(()) }
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
}
