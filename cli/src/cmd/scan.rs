//! `capblock scan`: one scan-and-buy pass over the rules, as the scan-offerings function runs it;
//! people's requests are left to the function (`requests_left_out` says how many wait).

use std::sync::Mutex;

use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::reconcile::Settled;
use capblock_shared::app::requests::read_requests;
use capblock_shared::app::scan::{Confirmed, RuleOutcome, ScanReport, ScanSettings, Scanner};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::request::RequestState;
use capblock_shared::domain::rule::Mode;
use capblock_shared::domain::run_time::RunTime;
use chrono::{DateTime, Utc};
use clap::Args;

use crate::context::{
    CliError, CliResult, DescribeArgs, StackArgs, confirm_typed, purchase_now, run_now, sdk, store, team_approvals,
};
use crate::output::OutputArgs;
use crate::table::{self, safe};

#[derive(Args)]
#[command(
    after_help = "Examples:\n  capblock scan                              # a dry run: what the rules choose\n  \
capblock scan --time 2026-12-03T00:00:00Z  # a dry run at another time\n  \
capblock scan -o json | jq '.outcomes[] | {rule_id, chosen: .chosen.offering.id}'\n  \
capblock scan --mode live                  # shows what it would buy, asks, buys that\n\n\
A live scan decides first, on AWS's clock, as a dry run does (writing nothing), and prints its plan \
on stderr: each block it would buy (rule, block, zone, start, length, fee, price per \
accelerator-hour), each budget before and after the fees (rule, team, account), and that a purchase \
cannot be cancelled. Then it asks for `yes` typed in full (--yes for scripts; without a terminal and \
without --yes nothing is bought). The run that follows buys only the planned blocks at the planned \
fees: a rule whose block is gone or changed buys nothing. When nothing would be bought, it says so \
and asks nothing.\n\n\
People's requests (`capblock request`) are not in this scan, live or not: the stack's scheduled \
scan buys an approved one, once (its purchase consumes its approval). This scan says how many \
approved requests wait for it (`capblock requests list` lists them).\n\n\
Exit codes: 0 scanned (a live scan: every planned block bought), 1 AWS or store failure, 2 bad \
input or refused (a live scan not confirmed, a stack not live, a planned block not bought: the \
market moved since the plan, a limit or EC2 refused it, or its answer was lost)."
)]
pub struct ScanArgs {
    /// The instant to scan as (RFC 3339); default: the clock. A dry-run scan (the default mode)
    /// writes nothing at any time (no settlement, market memory, prices, decisions or notices): it
    /// shows what the rules would choose then. A live one runs on AWS's clock (budget months guard
    /// money), refuses a --time 5+ minutes off it, and is refused while this machine's clock is
    /// more than a minute off AWS's. No scan from the CLI settles open purchases: the stack's
    /// function does.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    describe: DescribeArgs,
    /// Seconds of asking per scan; questions not reached wait for the next scan.
    #[arg(long, env = "CAPBLOCK_ASK_SECONDS", default_value_t = DescribeBudget::default().ask_for.as_secs_f64())]
    ask_seconds: f64,
    // `-o json|yaml`: the full report.
    #[command(flatten)]
    output: OutputArgs,
    /// A live scan without asking (scripts): the plan is still shown; on a terminal, a live
    /// scan asks for a typed `yes` first.
    #[arg(long)]
    yes: bool,
}

pub async fn run(a: ScanArgs) -> CliResult {
    let ask_for = std::time::Duration::try_from_secs_f64(a.ask_seconds)
        .map_err(|_| CliError::Invalid(format!("--ask-seconds {}: expected a positive number", a.ask_seconds)))?;
    let describe = a.describe.budget(ask_for)?;
    let store = store().await?;
    let (stack, stored_alerts) = a.stack.settings(&store).await?;
    // A person's scan never settles open intents: the stack's function does, on its clock.
    let settings = ScanSettings { stack, describe, settles: false };
    let sdk = sdk().await;
    let market = Ec2Market::new(sdk.clone());
    // The stack's own topic when stored; for a dry run of a table without settings, the variable.
    let alerts =
        stored_alerts.or_else(|| capblock_shared::config::optional("CAPBLOCK_ALERTS_TOPIC_ARN")).ok_or_else(|| {
            CliError::failed("CAPBLOCK_ALERTS_TOPIC_ARN is not set (and the stack's settings are not stored)")
        })?;
    let notifier = SnsNotifier::new(aws_sdk_sns::Client::new(&sdk), alerts, None);
    let catalog = Mutex::new(AcceleratorCatalog::new());
    let scanner = Scanner {
        market: &market,
        store: &store,
        notifier: &notifier,
        catalog: &catalog,
        settings: &settings,
        members: &[],
    };
    // A scan that may buy (live, or approval which asks) runs on AWS's clock, refused when this
    // machine's is off; a dry run is a look: it writes, settles and publishes nothing.
    let at = if settings.stack.mode == Mode::DryRun {
        run_now(a.time, false).await?.look()
    } else {
        let now = purchase_now(&sdk).await?;
        RunTime::for_stack(now, a.time, true).map_err(|e| CliError::Invalid(format!("--time: {e}")))?
    };
    // The scan asks the market for up to --ask-seconds, then decides: say how long so far.
    let most = ask_for + std::time::Duration::from_secs(10);
    let report = if settings.stack.mode == Mode::Live {
        let planned = {
            let _ticker = crate::progress::Ticker::start("planning", most, a.output.is_data());
            scanner.run(at.look()).await.map_err(CliError::failed)?
        };
        let confirmed = Confirmed::from_report(&planned);
        // What the plan leaves out, and why, before anything is asked.
        for (rule, why) in confirmed.left_out() {
            eprintln!("Rule {} is left out of the plan: {}.", safe(rule), why.trim_end_matches('.'));
        }
        if confirmed.is_empty() {
            // Under an empty plan no rule buys (a live rule buys only its planned block), so
            // there is nothing to say yes to; the run still does the rest of a scan: approval
            // rules ask in Slack, prices and notices are stored.
            eprintln!(
                "A live scan of stack {} would buy nothing now: scanning without buying.",
                safe(&settings.stack.name)
            );
        } else {
            eprintln!("{}", live_plan(&store, &planned, &confirmed, &settings, at.clock(), &a.output).await?);
            confirm_typed("", a.yes)?;
        }
        // AWS's clock again: the person may have taken minutes to answer.
        let at = RunTime::from(purchase_now(&sdk).await?);
        let report = {
            let _ticker = crate::progress::Ticker::start("scanning", most, a.output.is_data());
            scanner.run_confirmed(at, &confirmed).await.map_err(CliError::failed)?
        };
        show(&report, &settings, &a.output, at)?;
        requests_left_out(&store, at.clock()).await;
        return off_plan(&report, &confirmed);
    } else {
        let _ticker = crate::progress::Ticker::start("scanning", most, a.output.is_data());
        scanner.run(at).await.map_err(CliError::failed)?
    };
    show(&report, &settings, &a.output, at)?;
    requests_left_out(&store, at.clock()).await;
    Ok(())
}

/// Says on stderr how many approved requests this scan leaves to the stack's scheduled scan. A
/// person's scan never buys a request: the scheduled one does, once, so a person's live scan and
/// the schedule cannot both act on one approval (the ledger would refuse the second purchase
/// anyway: the purchase consumes the approval in its reservation). Best-effort: the scan's
/// report stands whether or not the requests could be read.
async fn requests_left_out(store: &capblock_shared::aws::dynamo::DynamoStore, now: DateTime<Utc>) {
    let teams = team_approvals().unwrap_or_default();
    match read_requests(store, &teams, now).await {
        Ok(all) => {
            let approved = all.iter().filter(|c| c.state == Ok(RequestState::Approved)).count();
            if approved > 0 {
                eprintln!(
                    "{approved} approved request(s) are not in this scan: people's requests are bought only by the \
stack's scheduled scan (capblock requests list lists them)."
                );
            }
        }
        Err(e) => eprintln!("note: people's requests were not read ({e}); the stack's scheduled scan buys them."),
    }
}

/// What a live scan a person confirmed came to: exit 2 naming each planned rule that did not
/// buy its planned block (the market moved since the plan, the purchase path skipped or EC2
/// refused it, or its answer was lost), so a script sees the plan it said yes to was not
/// carried out whole. Exit 0 only when every planned block was bought.
fn off_plan(report: &ScanReport, confirmed: &Confirmed) -> CliResult {
    let mut moved = false;
    let missed: Vec<String> = confirmed
        .blocks()
        .keys()
        .filter_map(|rule| {
            let action = report.outcomes.iter().find(|o| &o.rule_id == rule).and_then(|o| o.action.as_ref());
            let why = match action {
                Some(Outcome::Bought { .. }) => return None,
                Some(Outcome::OffPlan { reason, .. }) => {
                    moved = true;
                    format!("the market moved: {reason}")
                }
                Some(Outcome::Skipped { reason }) => reason.clone(),
                Some(Outcome::Refused { reason, .. }) => format!("EC2 refused the purchase: {reason}"),
                Some(Outcome::GivenBack { reason, .. }) => format!("not sent, fee given back: {reason}"),
                Some(Outcome::Unknown { intent, reason }) => {
                    format!("sent, but the answer was lost ({reason}); the stack settles intent {intent}")
                }
                Some(Outcome::AlreadyTried { offering_id }) => format!("offering {offering_id} was tried before"),
                // A live rule under a plan is never announced, asked or replayed.
                Some(_) | None => "not bought in this run".to_string(),
            };
            Some(format!("rule {rule}: {why}"))
        })
        .collect();
    if missed.is_empty() {
        return Ok(());
    }
    let then = if moved { "; run the scan again to see the new plan" } else { "" };
    Err(CliError::Refused(format!(
        "the plan was not carried out whole, these rules bought nothing ({}){then}",
        missed.join("; ")
    )))
}

/// The plan a live scan shows before it asks: each block it would buy (rule, block, zone, start,
/// length, fee, price per accelerator-hour), each budget before and after all their fees
/// (`money_plan`, as `buy` and `approve` show it), and that a purchase cannot be cancelled.
async fn live_plan(
    store: &capblock_shared::aws::dynamo::DynamoStore,
    planned: &ScanReport,
    confirmed: &Confirmed,
    settings: &ScanSettings,
    now: DateTime<Utc>,
    output: &OutputArgs,
) -> Result<String, CliError> {
    let mut rules = Vec::new();
    for id in confirmed.blocks().keys() {
        let stored = capblock_shared::ports::RuleStore::get_rule(store, id).await?;
        rules.push(
            stored.ok_or_else(|| CliError::failed(format!("rule {id} was deleted while the scan planned")))?.rule,
        );
    }
    let chosen: Vec<(&capblock_shared::domain::rule::Rule, &Priced)> = rules
        .iter()
        .filter_map(|r| {
            let o = planned.outcomes.iter().find(|o| o.rule_id == r.id)?;
            Some((r, o.chosen.as_ref()?))
        })
        .collect();
    let currency = table::currency(chosen.iter().map(|(_, p)| &p.offering.fee));
    let columns = [
        table::Column::text("RULE"),
        table::Column::text("BLOCK"),
        table::Column::whole("AZ"),
        // Whole: the start is what a person says yes to, read at a glance (at 80 columns the
        // block wraps between its words instead).
        table::Column::whole("START (UTC)"),
        table::Column::text("LENGTH"),
        table::Column::number(table::in_currency("FEE", &currency)),
        table::Column::number(format!("{currency}/ACCEL-H")),
    ];
    let rows: Vec<Vec<String>> = chosen
        .iter()
        .map(|(r, p)| {
            let o = &p.offering;
            vec![
                r.id.clone(),
                match &o.ultraservers {
                    Some(u) => format!("{u} ({})", o.instance_type),
                    None => format!("{} x {}", o.instance_count, o.instance_type),
                },
                o.availability_zone.clone(),
                table::when(o.start),
                o.length_text(),
                table::money(&o.fee),
                format!("{:.4}", p.per_accelerator_hour.per_unit.round_dp(4)),
            ]
        })
        .collect();
    let blocks = table::render(&columns, &rows, table::Layout { wide: false, ..output.layout() });
    let money = crate::money_plan::money(store, &chosen, &settings.stack.budgets(), now).await?;
    Ok(format!(
        "A live scan of stack {} buys {} block(s) now, as of AWS's clock at {}:\n\n{blocks}\n\n{money}\n\n\
         A Capacity Block purchase cannot be cancelled or refunded. The scan asks EC2 again and buys only these \
         blocks at these fees: a rule whose block is gone or repriced buys nothing (exit 2).",
        safe(&settings.stack.name),
        rows.len(),
        now.format("%Y-%m-%d %H:%M UTC"),
    ))
}

/// The scan's report: as data (`-o json|yaml`) or for a person.
fn show(report: &ScanReport, settings: &ScanSettings, output: &OutputArgs, at: RunTime) -> CliResult {
    if output.data(report)? {
        return Ok(());
    }
    if at.is_look() && at.view() == at.clock() && settings.stack.mode == Mode::Live {
        println!("the plan (a look: nothing settled, bought, stored or announced); what the rules would choose now:");
    } else if at.is_look() && at.view() == at.clock() {
        println!("a dry run from the CLI: nothing settled, stored or announced; what the rules would choose now:");
    } else if report.replay {
        println!(
            "replay of {} (the clock is at {}): nothing settled, stored or announced; what the rules would choose then:",
            table::when_utc(report.now),
            table::when_utc(at.clock())
        );
    }
    println!(
        "scan at {}: {} rule(s), {} question(s), {} answered this run, {} offering(s) seen, {} price observation(s) stored, stack mode {}",
        table::when_utc(report.now),
        report.rules,
        report.queries,
        report.answered,
        report.offerings_seen,
        report.observations_written,
        settings.stack.mode.as_str()
    );
    for (r, q) in &report.regions {
        println!(
            "  {r}: {} question(s), {} asked, {} answered, {} carried over; every question is asked within {} scan(s)",
            q.questions, q.planned, q.answered, q.carried_over, q.full_cycle_runs
        );
    }
    for x in &report.quota_zero {
        println!("  {x}: EC2 refuses every search: the Capacity Block quota looks like 0 (alerted once)");
    }
    for x in &report.not_sold {
        println!("  {x}: not sold as Capacity Blocks there (asked again tomorrow)");
    }
    for r in &report.unsupported_regions {
        println!("  {r}: does not sell Capacity Blocks");
    }
    for (r, e) in &report.failed_regions {
        println!("  {r}: FAILED this scan: {}", safe(&e.to_string()));
    }
    if !report.skipped_rules.is_empty() {
        println!(
            "  SKIPPED rule(s) {}: the scan's questions would pass {}; disable or narrow some rules",
            report.skipped_rules.join(", "),
            capblock_shared::app::scan::MAX_QUESTIONS_PER_SCAN
        );
    }
    for s in &report.settled {
        println!("  settled: {}", safe(&settled(s)));
    }
    for o in &report.outcomes {
        print_outcome(o, output);
    }
    println!("\nnotices published: {}", report.notices.published);
    Ok(())
}

/// One rule's outcome: what it was asked and saw, the cheapest offering, the decision (with the
/// chosen offering as a table) and what was done.
fn print_outcome(o: &RuleOutcome, output: &OutputArgs) {
    println!(
        "\nrule {} (mode {}): {} of {} question(s) answered, {} offering(s), {} eligible",
        o.rule_id,
        o.mode.as_str(),
        o.questions_answered,
        o.questions,
        o.offerings_seen,
        o.eligible
    );
    match &o.cheapest {
        Some(p) => println!(
            "  cheapest seen: {} per accelerator-hour ({} x {} in {}, from {}), threshold {}: {}",
            p.per_accelerator_hour,
            p.offering.instance_count,
            p.offering.instance_type,
            p.offering.availability_zone,
            table::when_utc(p.offering.start),
            o.threshold,
            if p.per_accelerator_hour.per_unit <= o.threshold { "within it" } else { "above it" }
        ),
        None if o.questions_answered > 0 => println!("  cheapest seen: no offering answered its questions"),
        None => {}
    }
    match (&o.chosen, &o.passed_over) {
        (None, Some(why)) => println!("  decision: none: the cheapest was passed over: {why}"),
        (None, None) => println!("  decision: {}", undecided(o.questions_answered, o.questions)),
        (Some(p), _) => {
            println!(
                "  decision: {} ({} per accelerator-hour, {})",
                p.offering.id, p.per_accelerator_hour, p.offering.fee
            );
            // The decision line names the whole id: the narrow table's short id (`buy`'s,
            // for what `offerings` showed) is left out, the columns are the offering's.
            let mut columns = table::offering_columns(&p.offering.fee.currency().to_string());
            columns.remove(0);
            let layout = output.layout();
            // Indented under its rule: four columns narrower.
            let layout = table::Layout { width: layout.width.map(|w| w.saturating_sub(4)), ..layout };
            let mut rows = table::offering_rows(std::slice::from_ref(p));
            rows.iter_mut().for_each(|r| drop(r.remove(0)));
            println!("{}", indent(&table::render(&columns, &rows, layout)));
        }
    }
    if let Some(action) = &o.action {
        println!("  action: {}", safe(&said(action)));
    }
}

/// Why nothing was chosen, in words: only what was asked this run can have failed the rule.
fn undecided(answered: usize, questions: usize) -> String {
    match (answered, questions) {
        (0, _) => "none: no question of the rule was answered this run (not asked this run, or refused), so \
                   nothing was judged"
            .to_string(),
        (a, q) if a < q => format!(
            "nothing meets the rule in the {a} of {q} question(s) answered; the other {} were not asked this run",
            q - a
        ),
        _ => "nothing meets the rule".to_string(),
    }
}

/// What the rule's action came to, in words.
fn said(action: &Outcome) -> String {
    match action {
        Outcome::WouldBuy { offering_id, first_time } => format!(
            "dry run: would buy {offering_id}{}",
            if *first_time { " (announced in Slack)" } else { " (announced before)" }
        ),
        Outcome::Bought { offering_id, reservation_id, more } if more.is_empty() => {
            format!("bought {offering_id}: reservation {reservation_id}")
        }
        Outcome::Bought { offering_id, reservation_id, more } => {
            format!("bought {offering_id}: reservation {reservation_id} and {}", more.join(", "))
        }
        Outcome::Skipped { reason } => format!("not bought: {reason}"),
        Outcome::AlreadyTried { offering_id } => format!("{offering_id} was tried before: never sent twice"),
        Outcome::AwaitingApproval { offering_id, intent, first_time } => format!(
            "waiting for approval of {offering_id} ({}capblock approve {intent})",
            if *first_time { "asked in Slack; " } else { "" }
        ),
        Outcome::Refused { offering_id, reason } => format!("EC2 refused {offering_id}: {reason}; budget released"),
        Outcome::GivenBack { offering_id, reason } => {
            format!("{offering_id} given back, a later scan may buy it: {reason}")
        }
        Outcome::Unknown { intent, reason } => {
            format!("outcome unknown ({reason}): the next scan settles intent {intent} by tag")
        }
        Outcome::Replayed { offering_id } => format!("replay: would choose {offering_id}"),
        Outcome::OffPlan { offering_id, reason } => {
            format!("not bought: the run would take {offering_id}, not the block in the plan ({reason})")
        }
    }
}

/// What reconciliation settled, in words.
fn settled(s: &Settled) -> String {
    match s {
        Settled::Adopted { intent, reservation_id } => format!("intent {intent} bought reservation {reservation_id}"),
        Settled::Rejected { intent, reason } => format!("intent {intent} was not bought: {reason}"),
        Settled::GivenBack { intent, reason } => format!("intent {intent} never sent, fee released: {reason}"),
        Settled::StillOpen { intent, reason } => format!("intent {intent} still open: {reason}"),
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::undecided;

    /// "Nothing meets the rule" only about what was asked: unasked questions are said as such.
    #[test]
    fn nothing_chosen_says_what_was_not_asked() {
        assert_eq!(undecided(3, 3), "nothing meets the rule");
        assert!(undecided(1, 3).contains("in the 1 of 3 question(s) answered; the other 2 were not asked this run"));
        let none = undecided(0, 4);
        assert!(none.starts_with("none: no question") && !none.contains("meets"), "{none}");
    }
}
