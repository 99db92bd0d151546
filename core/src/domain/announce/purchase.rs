//! A rule's purchases in Slack: bought, would buy (dry run), approval needed, refused, and the
//! purchases whose outcome EC2 has not shown yet (held open by `app::reconcile`).

use chrono::{DateTime, Utc};

use super::when;
use crate::domain::approval;
use crate::domain::budget::Intent;
use crate::domain::decision::Priced;
use crate::domain::lifecycle::payment_deadline;
use crate::domain::message_kind::MessageKind;
use crate::domain::offering::Offering;
use crate::domain::rule::Mode;
use crate::domain::slack::SlackMessage;

fn what(p: &Priced) -> String {
    let o = &p.offering;
    format!(
        "*{} x {}* in {} ({}), {}\n• Start: {}\n• End: {}\n• Total fee: {}\n• Price: {} per accelerator-hour ({} per instance-hour)",
        o.instance_count,
        o.instance_type,
        o.region,
        o.availability_zone,
        o.length_text(),
        when(o.start),
        when(o.end),
        o.fee,
        p.per_accelerator_hour.display(),
        p.per_instance_hour.display(),
    )
}

fn keywords(p: &Priced, extra: &str) -> Vec<String> {
    vec!["capblock".into(), extra.into(), p.offering.region.to_string(), p.offering.instance_type.to_string()]
}

/// "2 x p5.48xlarge", or for UltraServers "2 x u-trn2x64 (8 x trn2u.48xlarge)".
fn size(o: &Offering) -> String {
    match &o.ultraservers {
        Some(u) => format!("{u} ({} x {})", o.instance_count, o.instance_type),
        None => format!("{} x {}", o.instance_count, o.instance_type),
    }
}

/// A block was bought: what, where, when, how much, and the payment deadline.
pub fn purchased(
    rule_id: &str,
    p: &Priced,
    reservation_id: &str,
    arn: Option<&str>,
    bought_at: DateTime<Utc>,
) -> SlackMessage {
    let deadline = payment_deadline(bought_at, p.offering.start);
    SlackMessage {
        id: MessageKind::Purchased.message_id(reservation_id, None),
        title: format!("Capacity Block bought: {}", size(&p.offering)),
        description: format!(
            "Rule `{rule_id}` bought reservation `{reservation_id}`.\n{}\n• Payment deadline: {} (the block is released if payment has not gone through by then)",
            what(p),
            when(deadline)
        ),
        next_steps: vec![
            "capblock tracks the payment and posts here when it succeeds or fails.".into(),
            format!(
                "Launch into it from the start with MarketType=capacity-block and CapacityReservationId={reservation_id}."
            ),
        ],
        keywords: keywords(p, "purchase"),
        thread_id: reservation_id.to_string(),
        summary: format!("Bought {} for {}", size(&p.offering), p.offering.fee),
        event_type: MessageKind::Purchased.event_type().into(),
        related_resources: arn.map(str::to_string).into_iter().collect(),
    }
}

/// A message in an intent's thread about the offering it was made for: `kind`'s id and event
/// type, `title` before the offering's size, `keyword` among the usual keywords. What it says
/// (description, next steps, summary) is the caller's.
fn on_intent(kind: MessageKind, p: &Priced, intent: &Intent, title: &str, keyword: &str) -> SlackMessage {
    SlackMessage {
        id: kind.message_id(&intent.id, None),
        title: format!("{title}: {} x {}", p.offering.instance_count, p.offering.instance_type),
        description: String::new(),
        next_steps: vec![],
        keywords: keywords(p, keyword),
        thread_id: intent.id.clone(),
        summary: String::new(),
        event_type: kind.event_type().into(),
        related_resources: vec![],
    }
}

/// A dry-run rule (or a dry-run stack) found an offering it would buy.
pub fn would_buy(rule_id: &str, p: &Priced, intent: &Intent, stack_mode: Mode, rule_mode: Mode) -> SlackMessage {
    let why = match (stack_mode, rule_mode) {
        (Mode::DryRun, _) => "the stack is in dry-run mode (deploy with Mode=live to buy)",
        _ => "the rule is in dry-run mode (set mode = \"live\" in the rule to buy)",
    };
    SlackMessage {
        description: format!(
            "Rule `{rule_id}` found an offering that meets it, but nothing was bought: {why}.\n{}\n• Payment deadline if bought now: {}",
            what(p),
            when(payment_deadline(intent.created_at, p.offering.start))
        ),
        next_steps: vec![format!("Offering {} was checked with a DryRun purchase request.", p.offering.id)],
        summary: format!(
            "Would buy {} x {} for {}",
            p.offering.instance_count, p.offering.instance_type, p.offering.fee
        ),
        ..on_intent(MessageKind::WouldBuy, p, intent, "Would buy (dry run)", "dry-run")
    }
}

/// An approval-mode rule found an offering it would buy: a person decides.
pub fn approval_needed(rule_id: &str, p: &Priced, intent: &Intent) -> SlackMessage {
    SlackMessage {
        description: format!(
            "Rule `{rule_id}` found an offering that meets it and is in approval mode: nothing is bought until someone approves.\n{}\n• Approval valid until: {}\n• Payment deadline if bought now: {}",
            what(p),
            when(approval::expires_at(intent)),
            when(payment_deadline(intent.created_at, p.offering.start))
        ),
        next_steps: vec![
            format!("approval needed: run `capblock approve {}` before {}", intent.id, when(approval::expires_at(intent))),
            "capblock re-reads the offering first and refuses if it is gone or its price rose above the rule's threshold.".into(),
        ],
        summary: format!(
            "Approval needed: {} x {} for {}",
            p.offering.instance_count, p.offering.instance_type, p.offering.fee
        ),
        ..on_intent(MessageKind::ApprovalNeeded, p, intent, "Approval needed", "approval")
    }
}

/// EC2 refused a purchase: nothing was bought and the budget was released.
pub fn purchase_rejected(rule_id: &str, p: &Priced, intent: &Intent, reason: &str) -> SlackMessage {
    SlackMessage {
        description: format!(
            "Rule `{rule_id}` tried to buy offering `{}` and nothing was bought: {reason}\n{}",
            p.offering.id,
            what(p)
        ),
        next_steps: vec!["The reserved budget was released; the next scan looks again.".into()],
        summary: format!("Purchase refused: {reason}"),
        ..on_intent(MessageKind::PurchaseRejected, p, intent, "Purchase refused", "purchase-failed")
    }
}

/// A message about a purchase sent whose answer was lost and is not settled yet, in the
/// intent's thread: `title` names what is unknown, `lost` what EC2 shows since.
fn unsettled(kind: MessageKind, intent: &Intent, title: &str, lost: String, next_steps: Vec<String>) -> SlackMessage {
    let o = &intent.offering;
    SlackMessage {
        id: kind.message_id(&intent.id, None),
        title: format!("{title}: {} x {}", o.instance_count, o.instance_type),
        description: format!(
            "Rule `{}` sent a purchase of offering `{}` ({}) in {} and its answer was lost. {lost}",
            intent.rule_id, o.id, o.fee, o.region
        ),
        next_steps,
        keywords: vec!["capblock".into(), kind.key().into(), o.region.to_string(), o.instance_type.to_string()],
        thread_id: intent.id.clone(),
        summary: format!("{title} for intent {}", intent.id),
        event_type: kind.event_type().into(),
        related_resources: vec![],
    }
}

/// A purchase sent whose answer was lost and which EC2 still does not list by its tag: held,
/// for a person to look in EC2 (`app::reconcile`).
pub fn outcome_unknown(intent: &Intent, sent_at: DateTime<Utc>) -> SlackMessage {
    let region = &intent.offering.region;
    let lost = format!(
        "It was sent at {}. EC2 lists no reservation tagged `capblock:intent` = `{}` yet. EC2 may list a new reservation late, so its absence is not taken as proof that nothing was bought.",
        sent_at.format("%Y-%m-%d %H:%M UTC"),
        intent.id
    );
    let next_steps = vec![
        "The fee stays committed to its budgets and the rule buys nothing more until this is settled; capblock looks for the reservation on every run and records it as bought when EC2 shows it.".into(),
        format!(
            "Look in EC2: `aws ec2 describe-capacity-reservations --region {region} --filters Name=tag:capblock:intent,Values={}`.",
            intent.id
        ),
        format!(
            "If EC2 holds no such reservation (and bills none), release the fee: `capblock intents release {}`.",
            intent.id
        ),
    ];
    unsettled(MessageKind::OutcomeUnknown, intent, "Purchase outcome unknown", lost, next_steps)
}

/// EC2 lists a reservation carrying an open intent's tag that capblock cannot read: it may be
/// the purchase, so the intent stays open with its fee committed until a person looks.
pub fn unreadable_reservation(intent: &Intent, ids: &[&str], reasons: &[&str]) -> SlackMessage {
    let lost = format!(
        "EC2 lists reservations carrying its `capblock:intent` tag `{}` that capblock cannot read: {} ({}).",
        intent.id,
        ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", "),
        reasons.join("; ")
    );
    let next_steps = vec![
        "The purchase's fee stays committed to its budgets and the rule buys nothing more while it is open.".into(),
        format!("In the EC2 console, look up the reservations tagged `capblock:intent` = `{}`.", intent.id),
    ];
    unsettled(MessageKind::UnreadableReservation, intent, "Purchase outcome unclear", lost, next_steps)
}
