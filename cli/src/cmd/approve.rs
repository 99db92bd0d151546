//! `capblock approve`: buy a decision an approval-mode rule is waiting on.

use capblock_shared::app::outbox::flush;
use capblock_shared::app::purchase::{Action, Buyer};
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::sns::SnsNotifier;
use capblock_shared::domain::decision::Priced;
use capblock_shared::ports::{Ledger, OfferingQuery, OfferingSource, RuleStore};
use chrono::{DateTime, Duration, Utc};
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
    let now = run_now(a.time, true).await?;
    let store = store().await?;
    let rule = store.get_rule(rule_id).await?.ok_or_else(|| CliError::NotFound(format!("no rule {rule_id:?}")))?.rule;
    let intent = store.get_approval(rule_id, offering_id).await?.ok_or_else(|| {
        CliError::NotFound(format!("no decision awaiting approval for rule {rule_id:?} and offering {offering_id:?}"))
    })?;
    let o = &intent.offering;
    let sdk = sdk().await;
    let market = Ec2Market::new(sdk.clone());
    let q = OfferingQuery {
        region: o.region.clone(),
        instance_type: o.instance_type.clone(),
        instance_count: o.instance_count,
        // The question that found it: a same-day closest match (30 h 35 min) was found by a
        // one-day question, and EC2 only takes whole days here.
        duration_hours: rule.matching_days(o.total_minutes()).map_or(o.duration_hours, |d| d * 24),
        start_from: o.start - Duration::minutes(1),
        start_to: o.start + Duration::minutes(1),
    };
    let fresh = market.offerings(&q).await?.into_iter().find(|x| x.id == o.id);
    let Some(fresh) = fresh else {
        return Err(CliError::Refused(format!("offering {} is no longer on sale", o.id)));
    };
    let acc = intent.accelerators_per_instance;
    let (Some(per_acc), Some(was)) = (fresh.price_per_accelerator_hour(acc), o.price_per_accelerator_hour(acc)) else {
        return Err(CliError::Failed(format!("offering {} has no price per accelerator-hour", o.id)));
    };
    if per_acc.per_unit > rule.max_price_per_accelerator_hour {
        return Err(CliError::Refused(format!(
            "the price is {} per accelerator-hour (was {} when decided), above rule {}'s threshold {}",
            per_acc, was, rule.id, rule.max_price_per_accelerator_hour
        )));
    }
    let priced = Priced {
        per_instance_hour: fresh.price_per_instance_hour(),
        per_accelerator_hour: per_acc,
        accelerators_per_instance: acc,
        offering: fresh,
    };
    let buyer = Buyer {
        market: &market,
        store: &store,
        stack: &a.stack,
        account_budget,
        recheck_pause: std::time::Duration::from_secs(4),
    };
    let action = buyer.live(&rule, &priced, now).await?;
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
