//! `capblock rates list|announce|withdraw`: the list rates capblock judges thresholds by. The
//! published table is built in (`domain::list_price`); AWS announces each change before it takes
//! effect, and the operator records it here, in the stack's table, so that preflight, `rules put`
//! and the team page tell each rule the change will put below its threshold before the day, and
//! read the announced rate as the list from that day on. Recording a rate moves no money, so it
//! asks for no confirmation; each write names the rules it touches.

use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::domain::list_price::{ListRate, RateBook, says_ahead};
use capblock_shared::ports::{RateStore, RuleStore};
use chrono::{DateTime, NaiveDate, Utc};
use clap::{Args, Subcommand};
use rust_decimal::Decimal;

use crate::context::{CliError, CliResult, clock_now, rate_book, store};
use crate::output::OutputArgs;
use crate::table::{self, Column};

#[derive(Subcommand)]
pub enum RatesCommand {
    /// Every list rate known: the published ones and those the operator announced.
    #[command(after_help = "Examples:\n  capblock rates list\n  capblock rates list -o json")]
    List(ListArgs),
    /// Record a rate AWS announced, from the day it takes effect (per accelerator-hour, USD).
    #[command(after_help = "Examples:\n  capblock rates announce p5 6.50 --from 2027-01-01 \
--source \"AWS email of 2026-12-01\"\n  capblock rates announce p5en.48xlarge 8.40 --from 2027-01-01 \
--source \"pricing page, 2026-12-05\"\n\n\
Rates are per instance family (a type names its family) and the same in every region. Before the \
day, preflight, `rules put` and the team page tell each rule whose threshold the rate will be \
above; from the day on, the rate is the list they judge rules by. Announcing a family and day \
again replaces the rate.")]
    Announce(AnnounceArgs),
    /// Forget an announced rate (one recorded by mistake, or an announcement AWS withdrew).
    #[command(after_help = "Examples:\n  capblock rates withdraw p5 --from 2027-01-01")]
    Withdraw(WithdrawArgs),
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct AnnounceArgs {
    /// The instance family (p5) or any of its types (p5.48xlarge).
    family: String,
    /// USD per accelerator-hour from that day (for example 6.50).
    usd: Decimal,
    /// The first day (UTC) the rate applies, YYYY-MM-DD.
    #[arg(long)]
    from: NaiveDate,
    /// Where it was announced, as the team should read it later ("AWS email of 2026-12-01").
    #[arg(long)]
    source: String,
}

#[derive(Args)]
pub struct WithdrawArgs {
    /// The instance family (p5) or any of its types.
    family: String,
    /// The day the announced rate was recorded from, YYYY-MM-DD.
    #[arg(long)]
    from: NaiveDate,
}

pub async fn run(c: RatesCommand) -> CliResult {
    match c {
        RatesCommand::List(a) => list(a).await,
        RatesCommand::Announce(a) => announce(a).await,
        RatesCommand::Withdraw(a) => withdraw(a).await,
    }
}

async fn list(a: ListArgs) -> CliResult {
    let store = store().await?;
    let now = clock_now().await?;
    let rates = rate_book(&store).await?.every_rate();
    if a.output.data(&rates)? {
        return Ok(());
    }
    let columns = [
        Column::text("FAMILY"),
        Column::number("USD/ACCEL-HOUR"),
        Column::text("FROM"),
        Column::text("KIND"),
        Column::text("SOURCE"),
    ];
    let today = now.date_naive();
    let rows: Vec<Vec<String>> = rates
        .iter()
        .map(|r| {
            let kind = match (r.announced, r.effective > today) {
                (false, _) => "published",
                (true, true) => "announced, ahead",
                (true, false) => "announced, in effect",
            };
            vec![
                r.family.clone(),
                r.usd.normalize().to_string(),
                r.effective.to_string(),
                kind.into(),
                r.source.clone(),
            ]
        })
        .collect();
    println!("{}", table::render(&columns, &rows, a.output.layout()));
    println!("Record one AWS announced with: capblock rates announce FAMILY USD --from DAY --source TEXT");
    Ok(())
}

async fn announce(a: AnnounceArgs) -> CliResult {
    let rate =
        ListRate::announcement(&a.family, a.usd, a.from, &a.source).map_err(|e| CliError::Invalid(e.to_string()))?;
    let store = store().await?;
    let now = clock_now().await?;
    if rate.effective <= now.date_naive() {
        eprintln!("note: {} is today or past: the rate is the list from now on", rate.effective);
    }
    store.announce_rate(&rate).await?;
    println!(
        "Recorded: {} at {} USD per accelerator-hour from {} ({}).",
        rate.family,
        rate.usd.normalize(),
        rate.effective,
        rate.source
    );
    touched(&store, &rate_book(&store).await?, now).await
}

async fn withdraw(a: WithdrawArgs) -> CliResult {
    let family = capblock_shared::domain::list_price::family_key(&a.family);
    let store = store().await?;
    if !store.withdraw_rate(&family, a.from).await? {
        return Err(CliError::NotFound(format!(
            "no rate announced for {family} from {} (`capblock rates list` lists them)",
            a.from
        )));
    }
    println!("Withdrawn: the rate announced for {family} from {}.", a.from);
    Ok(())
}

/// Each enabled rule the book's announced rates will put below its threshold, said as preflight
/// says it; or that none is.
async fn touched(store: &DynamoStore, book: &RateBook, now: DateTime<Utc>) -> CliResult {
    let mut told = 0;
    for stored in store.list_rules().await?.into_iter().filter(|s| s.rule.enabled) {
        let r = &stored.rule;
        for said in says_ahead(&book.ahead(r, now), r.max_price_per_accelerator_hour) {
            told += 1;
            println!("  rule {}: {}", r.id, table::safe(&said));
        }
    }
    if told == 0 {
        println!("No enabled rule's threshold is below an announced rate.");
    }
    Ok(())
}
