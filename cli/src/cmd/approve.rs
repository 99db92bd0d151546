//! `capblock approve`: buy a decision an approval-mode rule is waiting on.

use capblock_shared::app::outbox::flush;
use capblock_shared::app::purchase::{Action, Approval, Buyer};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::ports::{Ledger, RuleStore};
use chrono::{DateTime, Utc};
use clap::Args;

use crate::context::{CliError, CliResult, account_budget, run_now, sdk, store};

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock approve p5-weekly/cb-0123456789abcdef0\n  \
capblock approve p5-weekly/cb-0123456789abcdef0 --time 2026-12-03T01:00:00Z   # a simulated market's time\n\n\
Rules in mode = \"approval\" do not buy: the scan stores its decision and posts \"approval needed\" in \
Slack with the intent to approve. This command re-reads the offering, refuses if it is gone or its \
price rose above the rule's threshold, and otherwise buys it through the same exactly-once path as the \
scan (budgets reserved first, one PurchaseCapacityBlock, reconciliation by tag if the answer is lost).\n\
Exit codes: 0 bought, 1 AWS or store failure (or an unknown outcome, settled by the next scan), \
2 refused (offering gone, price rose, a limit or budget), 3 no such rule or decision.")]
pub struct ApproveArgs {
    /// The intent from the Slack message: <rule-id>/<offering-id>.
    intent: String,
    /// The clock's time, for a check only: approving buys, so it runs on the clock (the wall
    /// clock, or CAPBLOCK_SIMULATED_CLOCK_URL's) and a --time more than 5 minutes off it is refused.
    #[arg(long)]
    time: Option<DateTime<Utc>>,
    /// The stack name written to the purchase's capblock:stack tag.
    #[arg(long, env = "CAPBLOCK_STACK", default_value = "capblock")]
    stack: String,
    /// Account-wide monthly budget in USD (0: none).
    #[arg(long, env = "CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", default_value = "0")]
    account_budget: String,
}

pub async fn run(a: ApproveArgs) -> CliResult {
    let Some((rule_id, offering_id)) = a.intent.split_once('/') else {
        return Err(CliError::Invalid(format!(
            "{:?} is not an intent: expected <rule-id>/<offering-id>, as in the Slack message",
            a.intent
        )));
    };
    let account_budget = account_budget(&a.account_budget)?;
    // Approving buys: the clock decides the budget month, never `--time`.
    let now = run_now(a.time, true).await?.clock();
    let store = store().await?;
    let rule = store.get_rule(rule_id).await?.ok_or_else(|| CliError::NotFound(format!("no rule {rule_id:?}")))?.rule;
    let intent = store.get_approval(rule_id, offering_id).await?.ok_or_else(|| {
        CliError::NotFound(format!("no decision awaiting approval for rule {rule_id:?} and offering {offering_id:?}"))
    })?;
    let sdk = sdk().await;
    let market = Ec2Market::new(sdk.clone());
    let buyer = Buyer {
        market: &market,
        store: &store,
        stack: &a.stack,
        account_budget,
        recheck_pause: std::time::Duration::from_secs(4),
    };
    let (priced, action) = match buyer.approve(&rule, &intent, now).await? {
        Approval::Refused(why) => return Err(CliError::Refused(why)),
        Approval::Unanswered(e) => return Err(e.into()),
        Approval::Decided { priced, action } => (*priced, action),
    };
    if let Ok(topic) = std::env::var("CAPBLOCK_ALERTS_TOPIC_ARN") {
        let notifier = SnsNotifier::new(aws_sdk_sns::Client::new(&sdk), topic, None);
        if let Err(e) = flush(&store, &notifier, now).await {
            eprintln!("warning: notices not published yet (the next scan publishes them): {e}");
        }
    }
    match action {
        Action::Bought { reservation_id, .. } => {
            println!(
                "bought {} x {} in {} for {} ({} per accelerator-hour): reservation {reservation_id}",
                priced.offering.instance_count,
                priced.offering.instance_type,
                priced.offering.availability_zone,
                priced.offering.fee,
                priced.per_accelerator_hour
            );
            Ok(())
        }
        Action::Refused { reason, .. } | Action::Skipped { reason } => Err(CliError::Refused(reason)),
        Action::Unknown { intent, reason } => Err(CliError::Unknown { intent, reason }),
        other => Err(CliError::Failed(format!("unexpected outcome {other:?}"))),
    }
}
