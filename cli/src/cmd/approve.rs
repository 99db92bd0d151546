//! `capblock approve`: buy a decision an approval-mode rule is waiting on.

use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::rule::Mode;
use capblock_shared::domain::run_time::RunTime;
use capblock_shared::ports::{Ledger, RuleStore};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::context::{
    CliError, CliResult, bought, confirm_typed, hand_buyer, purchase_now, sdk, settings_to_buy, store,
};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock approve p5-weekly/cb-0123456789abcdef0\n  \
capblock approve p5-weekly/cb-0123456789abcdef0 --time 2026-12-03T01:00:00Z   # a simulated market's time\n\n\
Rules in mode = \"approval\" do not buy: the scan stores its decision and posts \"approval needed\" in \
Slack with the intent to approve. This command buys only in a live stack (its mode and account \
budget as the stack's functions stored them in the table), for a rule still enabled and in approval \
mode, within the approval's validity (24h from when it was asked, never past the offering's start). \
It re-reads the offering, refuses if it is gone or its price rose above the rule's threshold, and \
otherwise buys it through the same exactly-once path as the \
scan (budgets reserved first, one PurchaseCapacityBlock, reconciliation by tag if the answer is lost).\n\
First it prints the plan on stderr: the block, its fee and price per accelerator-hour against the \
rule's threshold, each budget it is charged to (rule, team, account) now and after the fee, and that a \
purchase cannot be cancelled. On a terminal it then asks for `yes` typed in full (--yes for scripts; \
without a terminal and without --yes nothing is bought).\n\
Exit codes: 0 bought, 1 AWS or store failure (or an unknown outcome, settled by the next scan), \
2 refused (the stack's settings unreadable or not live, the rule disabled or not in approval mode, \
the approval expired, offering gone, price rose, a limit or budget), 3 no such rule or decision.")]
pub struct ApproveArgs {
    /// The intent from the Slack message: <rule-id>/<offering-id>.
    intent: String,
    /// The clock's time, for a check only: approving buys, so it runs on the clock (the wall
    /// clock, or CAPBLOCK_SIMULATED_CLOCK_URL's) and a --time more than 5 minutes off it is refused.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// Buy without asking (scripts): on a terminal, approve asks first.
    #[arg(long)]
    yes: bool,
}

pub async fn run(a: ApproveArgs) -> CliResult {
    let Some((rule_id, offering_id)) = a.intent.split_once('/') else {
        return Err(CliError::Invalid(format!(
            "{:?} is not an intent: expected <rule-id>/<offering-id>, as in the Slack message",
            a.intent
        )));
    };
    // Approving buys: AWS's clock decides the budget month (refused when this machine's is
    // off), never `--time`.
    let sdk = sdk().await;
    let now = purchase_now(&sdk).await?;
    RunTime::for_stack(now, a.time, true).map_err(|e| CliError::Invalid(format!("--time: {e}")))?;
    let store = store().await?;
    let rule = store.get_rule(rule_id).await?.ok_or_else(|| CliError::NotFound(format!("no rule {rule_id:?}")))?.rule;
    let intent = store.get_approval(rule_id, offering_id).await?.ok_or_else(|| {
        CliError::NotFound(format!("no decision awaiting approval for rule {rule_id:?} and offering {offering_id:?}"))
    })?;
    // The stack's name, account budget and alerts topic as its functions stored them, in a live
    // stack only: never a variable of the shell.
    let stored = settings_to_buy(&store, Mode::Live).await?;
    // The plan first (the price per accelerator-hour from the accelerators the decision was
    // priced with), every budget before and after the fee, then a typed `yes`.
    let mut catalog = AcceleratorCatalog::new();
    catalog.learn(intent.offering.instance_type.clone(), intent.accelerators_per_instance);
    let priced = Priced::new(intent.offering.clone(), &catalog)
        .ok_or_else(|| CliError::Refused("the decision records no accelerators for its instance type".into()))?;
    let plan = crate::money_plan::plan(&store, &rule, &stored.stack.budgets(), &priced, now).await?;
    eprintln!("{plan}\nThe offering is looked at again first; a price above the rule's threshold is refused.");
    confirm_typed("", a.yes)?;
    let now = purchase_now(&sdk).await?;
    let market = Ec2Market::new(sdk.clone());
    let decided = hand_buyer(&market, &store, &stored).approve(&rule, &intent, stored.stack.mode, now).await?;
    bought(decided, &store, &sdk, &stored, now).await
}
