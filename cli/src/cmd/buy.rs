//! `capblock buy`: buy one offering `capblock offerings` showed, for a rule, through the scan's
//! exactly-once path and budgets.

use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::decision::Priced;
use capblock_shared::domain::rule::Mode;
use capblock_shared::ports::{InstanceTypeSource, RuleStore, SeenOfferings};
use clap::Args;

use crate::context::{
    CliError, CliResult, bought, confirm_typed, hand_buyer, purchase_now, sdk, settings_to_buy, store,
};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock offerings --types p5.48xlarge --regions us-east-1 --days 7\n  \
capblock buy cb-01234567 --rule p5-weekly\n\n\
Buys an offering `capblock offerings` showed in the last hour (it remembers what it showed, in the \
stack's table), named by its id or the short id the table printed (a prefix of the id), charged to a rule: the rule's budget, limits and tags, and the account's cap. Only in a \
live stack (its mode and account budget as the stack's functions stored them), for an enabled rule \
not in dry-run, and only an offering the rule could have bought itself (its regions, types, counts, \
durations, start window, threshold and max_total_fee). Then as a scan buys: the budgets reserved in \
one transaction, the offering asked of EC2 again (by id, or by what it is: EC2 may name a block anew \
in each answer) and refused if it is gone or its fee changed, one PurchaseCapacityBlock, and \
reconciliation by tag if the answer is lost. A purchase cannot be cancelled.\n\
First it prints the plan on stderr: the block, its fee and price per accelerator-hour against the \
rule's threshold, each budget it is charged to (rule, team, account) now and after the fee, and that a \
purchase cannot be cancelled. On a terminal it then asks for `yes` typed in full (--yes for scripts; \
without a terminal and without --yes nothing is bought).\n\
Exit codes: 0 bought, 1 AWS or store failure (or an unknown outcome, settled by the next scan), \
2 refused (not live, the rule disabled, in dry-run or not matching, the offering gone or changed, a \
limit or budget), 3 no such rule, or an offering not shown in the last hour.")]
pub struct BuyArgs {
    /// The offering's id as `capblock offerings` printed it: the short id of its table (cb- and
    /// 8 characters) or the whole one (`-o wide`, `-o json`).
    offering_id: String,
    /// The rule to buy it for: its budget, limits and tags apply.
    #[arg(long)]
    rule: String,
    /// Buy without asking (scripts): on a terminal, buy asks first.
    #[arg(long)]
    yes: bool,
}

pub async fn run(a: BuyArgs) -> CliResult {
    // Buying: AWS's clock decides the budget month and the start window (refused when this
    // machine's is off).
    let sdk = sdk().await;
    let now = purchase_now(&sdk).await?;
    let store = store().await?;
    // The stack's name, account budget and alerts topic as its functions stored them, in a live
    // stack with an account cap only: never a variable of the shell. Asked first: a stack that
    // cannot buy makes every other answer moot.
    let stored = settings_to_buy(&store, Mode::Live).await?;
    let rule = store.get_rule(&a.rule).await?.ok_or_else(|| CliError::NotFound(format!("no rule {:?}", a.rule)))?.rule;
    let seen = seen(&store, &a.offering_id, now).await?;
    let market = Ec2Market::new(sdk.clone());
    let mut catalog = AcceleratorCatalog::new();
    for (t, n) in market.accelerators(&seen.region, std::slice::from_ref(&seen.instance_type)).await? {
        catalog.learn(t, n);
    }
    let priced = Priced::new(seen, &catalog).ok_or_else(|| {
        CliError::Refused("EC2 did not say how many accelerators the offering's instance type has".into())
    })?;
    // Refused before the person is asked: a question whose yes could only be refused wastes it.
    if let Some(why) = capblock_shared::app::purchase::hand_refusal(&rule, &priced, stored.stack.mode, now) {
        return Err(CliError::Refused(why));
    }
    // The plan first, every budget before and after the fee, then a typed `yes`.
    let plan = crate::money_plan::plan(&store, &rule, &stored.stack.budgets(), &priced, now).await?;
    eprintln!("{plan}");
    confirm_typed("", a.yes)?;
    // AWS's clock again: the person may have taken minutes to answer.
    let now = purchase_now(&sdk).await?;
    let decided = hand_buyer(&market, &store, &stored).buy_by_hand(&rule, priced, stored.stack.mode, now).await?;
    bought(decided, &store, &sdk, &stored, now).await
}

/// The offering `id` names among those `capblock offerings` showed in the last hour: the one
/// with that id, else the one whose id starts with it (the table's short id); several are
/// named back, for the person to give more of the id.
async fn seen(
    store: &impl SeenOfferings,
    id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<capblock_shared::domain::offering::Offering, CliError> {
    if let Some(o) = store.seen_offering(id, now).await? {
        return Ok(o);
    }
    let mut found = if id.chars().count() >= crate::table::SHORT_ID {
        store.seen_offerings_starting(id, now).await?
    } else {
        vec![]
    };
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(CliError::NotFound(format!(
            "offering {:?} was not shown by `capblock offerings` in the last hour: search again and buy from what it \
             shows",
            crate::table::safe(id)
        ))),
        _ => {
            let ids: Vec<&str> = found.iter().map(|o| o.id.as_str()).collect();
            Err(CliError::Invalid(format!(
                "{:?} starts {} offerings' ids shown in the last hour ({}): give more of the id",
                crate::table::safe(id),
                ids.len(),
                ids.join(", ")
            )))
        }
    }
}
