//! `capblock intents`: the purchases whose outcome is still open, and a person's release of one
//! whose answer was lost and that EC2 does not hold.
//!
//! capblock never releases a sent purchase's fee on a timer (a reservation EC2 lists late
//! would be bought twice): past the grace it holds the fee, blocks the rule and tells a person.
//! This is that person's way out, after looking in EC2: the release is refused for an intent
//! sent less than `RELEASE_MIN_AGE` ago (on AWS's clock), and while EC2 lists anything carrying
//! the intent's tag, asked before the typed `yes` and again right before the write. A released
//! purchase still counts against its rule's `max_blocks_held` until its start (`ReleasedHold`),
//! so a block EC2 lists later still is never joined by a second.

use capblock_shared::domain::budget::{Intent, IntentState};
use capblock_shared::domain::settlement;
use capblock_shared::domain::tags::INTENT_TAG;
use capblock_shared::ports::{Ledger, ReservationSource};
use clap::{Args, Subcommand};

use crate::context::{CliError, CliResult, confirm_typed, purchase_now, sdk, store};
use crate::output::OutputArgs;
use crate::table::{self, Column, safe};

#[derive(Subcommand)]
pub enum IntentsCommand {
    /// List the purchases whose outcome is still open (reserved, or sent and not yet seen in EC2).
    #[command(after_help = "Examples:\n  capblock intents list\n  capblock intents list -o json\n\n\
An intent open for more than a few minutes is a purchase whose answer was lost: the next scan \
records it when EC2 lists it; `capblock intents release` gives its fee back when EC2 holds nothing.")]
    List(ListArgs),
    /// Release the fee of a sent purchase EC2 does not hold, after looking in EC2 yourself.
    #[command(after_help = "Examples:\n  capblock intents release p5-weekly/cb-0123456789abcdef0\n\n\
A purchase whose answer was lost stays open, its fee committed and its rule blocked, until EC2 lists a \
reservation carrying its `capblock:intent` tag (then the next scan records it as bought) or a person \
releases it here. Look in EC2 first:\n  aws ec2 describe-capacity-reservations --region REGION \
--filters Name=tag:capblock:intent,Values=INTENT\n\
This command asks EC2 the same, before it asks you and again right before it writes, and refuses while \
anything carries the tag (the next scan records the purchase as bought). It refuses an intent sent less \
than an hour ago (AWS's clock): EC2 lists a purchase late, and the refusal says from when it may be \
released. A released fee goes back to every budget it was charged to, and the rule may buy again, but \
the purchase still counts against the rule's max_blocks_held until the block's start: if EC2 did buy \
it after all, it is tracked (and announced) as an uncharged purchase, and no second block is bought \
beside it.\n\
Exit codes: 0 released, 1 AWS or store failure, 2 refused (sent less than an hour ago, EC2 lists the \
tag, the intent is not sent, not confirmed), 3 no such open intent.")]
    Release(ReleaseArgs),
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct ReleaseArgs {
    /// The intent, as the Slack message names it: <rule-id>/<offering-id>.
    intent: String,
    /// Release without asking (scripts): on a terminal, it asks for a typed `yes` first.
    #[arg(long)]
    yes: bool,
}

impl IntentsCommand {
    /// A release gives a fee back to its budgets: it says which stack it acts on.
    pub fn moves_money(&self) -> bool {
        matches!(self, IntentsCommand::Release(_))
    }
}

pub async fn run(c: IntentsCommand) -> CliResult {
    match c {
        IntentsCommand::List(a) => list(a).await,
        IntentsCommand::Release(a) => release(a).await,
    }
}

async fn list(a: ListArgs) -> CliResult {
    let store = store().await?;
    let open = store.open_intents().await?;
    if a.output.data(&open)? {
        return Ok(());
    }
    if open.is_empty() {
        println!("no open purchase");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = open
        .iter()
        .map(|i| {
            vec![
                safe(&i.id).into_owned(),
                i.state.as_str().to_string(),
                table::block(&i.offering),
                table::money(&i.offering.fee),
                i.sent_at.map(table::when).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let currency = table::currency(open.iter().map(|i| &i.offering.fee));
    let columns = [
        Column::whole("INTENT"),
        Column::whole("STATE"),
        Column::text("BLOCK"),
        Column::number(table::in_currency("FEE", &currency)),
        Column::text("SENT (UTC)"),
    ];
    println!("{}", table::render(&columns, &rows, a.output.layout()));
    Ok(())
}

async fn release(a: ReleaseArgs) -> CliResult {
    let store = store().await?;
    let intent = open_intent(&store.open_intents().await?, &a.intent)?;
    if intent.state != IntentState::Sent {
        return Err(CliError::Refused(format!(
            "intent {} is {}, not sent: nothing reached EC2 for it, and the next scan gives it back by itself",
            intent.id,
            intent.state.as_str()
        )));
    }
    // Its age on AWS's clock (refused when this machine's is off), never this machine's own.
    let sdk = sdk().await;
    settlement::may_release(&intent, purchase_now(&sdk).await?).map_err(|e| CliError::Refused(e.to_string()))?;
    let market = capblock_shared::aws::ec2::Ec2Market::new(sdk.clone());
    let region = &intent.offering.region;
    ec2_holds_nothing(&market, &intent).await?;
    confirm_typed(
        &format!(
            "EC2 lists no reservation tagged with intent {} in {region} now. Releasing gives its fee of {} back to \
             the budgets and lets rule {} buy again; the purchase still counts against the rule's max_blocks_held \
             until its start ({} UTC), in case EC2 lists it after all.",
            intent.id,
            intent.offering.fee,
            intent.rule_id,
            intent.offering.start.format("%Y-%m-%d %H:%M")
        ),
        a.yes,
    )?;
    // EC2 may have begun listing the purchase while the prompt waited: asked again, at the
    // last moment before the write.
    settlement::may_release(&intent, purchase_now(&sdk).await?).map_err(|e| CliError::Refused(e.to_string()))?;
    ec2_holds_nothing(&market, &intent).await?;
    let reason = "released by a person: EC2 listed no reservation tagged with it";
    store.release_by_person(&intent, reason).await?;
    println!("released intent {}: {} given back to its budgets", intent.id, intent.offering.fee);
    Ok(())
}

/// Refused while EC2 lists anything carrying `intent`'s tag (as settlement asks): the purchase
/// went through, and the functions settle it as bought.
async fn ec2_holds_nothing(market: &impl ReservationSource, intent: &Intent) -> Result<(), CliError> {
    let region = &intent.offering.region;
    let tagged = market.reservations_tagged(region, INTENT_TAG, &intent.id).await.map_err(CliError::failed)?;
    let held: Vec<String> = tagged
        .reservations
        .iter()
        .map(|r| r.id.clone())
        .chain(tagged.unreadable.iter().map(|u| u.id.clone().unwrap_or_else(|| "(no id)".into())))
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    Err(CliError::Refused(format!(
        "EC2 lists reservation(s) {} in {region} tagged with intent {}: the purchase went through; nothing was \
         released, and the next scan or tracker run records it as bought",
        held.join(", "),
        intent.id
    )))
}

/// The open intent `id` names (`<rule-id>/<offering-id>`), or why not.
fn open_intent(open: &[Intent], id: &str) -> Result<Intent, CliError> {
    if !id.contains('/') {
        return Err(CliError::Invalid(format!(
            "{id:?} is not an intent: expected <rule-id>/<offering-id>, as in the Slack message"
        )));
    }
    open.iter()
        .find(|i| i.id == id)
        .cloned()
        .ok_or_else(|| CliError::NotFound(format!("no open purchase intent {id:?} (capblock intents list shows them)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_is_named_as_the_slack_message_names_it() {
        let e = open_intent(&[], "cb-123").unwrap_err();
        assert!(matches!(e, CliError::Invalid(ref m) if m.contains("<rule-id>/<offering-id>")), "{e}");
        let e = open_intent(&[], "p5/cb-123").unwrap_err();
        assert!(matches!(e, CliError::NotFound(ref m) if m.contains("capblock intents list")), "{e}");
    }
}
