//! What capblock tells people about purchases. Pure functions from domain facts to messages.

use chrono::{DateTime, Utc};

use super::budget::Intent;
use super::decision::Priced;
use super::lifecycle::payment_deadline;
use super::rule::Mode;
use super::slack::SlackMessage;

fn when(t: DateTime<Utc>) -> String {
    t.format("%a %Y-%m-%d %H:%M UTC").to_string()
}

fn days(hours: u32) -> String {
    match hours {
        24 => "1 day".into(),
        h if h % 24 == 0 => format!("{} days", h / 24),
        h => format!("{h} hours"),
    }
}

fn what(p: &Priced) -> String {
    let o = &p.offering;
    format!(
        "*{} x {}* in {} ({}), {}\n• Start: {}\n• End: {}\n• Total fee: {}\n• Price: {} per accelerator-hour ({} per instance-hour)",
        o.instance_count,
        o.instance_type,
        o.region,
        o.availability_zone,
        days(o.duration_hours),
        when(o.start),
        when(o.end),
        o.fee,
        p.per_accelerator_hour.display(),
        p.per_instance_hour.display(),
    )
}

fn keywords(p: &Priced, extra: &str) -> Vec<String> {
    vec![
        "capblock".into(),
        extra.into(),
        p.offering.region.to_string(),
        p.offering.instance_type.to_string(),
    ]
}

/// A block was bought: what, where, when, how much, and the payment deadline.
pub fn purchased(rule_id: &str, p: &Priced, reservation_id: &str, arn: Option<&str>, bought_at: DateTime<Utc>) -> SlackMessage {
    let deadline = payment_deadline(bought_at, p.offering.start);
    SlackMessage {
        id: format!("{reservation_id}#purchased"),
        title: format!("Capacity Block bought: {} x {}", p.offering.instance_count, p.offering.instance_type),
        description: format!(
            "Rule `{rule_id}` bought reservation `{reservation_id}`.\n{}\n• Payment deadline: {} (the block is released if payment has not gone through by then)",
            what(p),
            when(deadline)
        ),
        next_steps: vec![
            "capblock tracks the payment and posts here when it succeeds or fails.".into(),
            format!("Launch into it from the start with MarketType=capacity-block and CapacityReservationId={reservation_id}."),
        ],
        keywords: keywords(p, "purchase"),
        thread_id: reservation_id.to_string(),
        summary: format!("Bought {} x {} for {}", p.offering.instance_count, p.offering.instance_type, p.offering.fee),
        event_type: "purchased".into(),
        related_resources: arn.map(str::to_string).into_iter().collect(),
    }
}

/// A dry-run rule (or a dry-run stack) found an offering it would buy.
pub fn would_buy(rule_id: &str, p: &Priced, intent: &Intent, stack_mode: Mode, rule_mode: Mode) -> SlackMessage {
    let why = match (stack_mode, rule_mode) {
        (Mode::DryRun, _) => "the stack is in dry-run mode (deploy with Mode=live to buy)",
        _ => "the rule is in dry-run mode (set mode = \"live\" in the rule to buy)",
    };
    SlackMessage {
        id: format!("{}#would-buy", intent.id),
        title: format!("Would buy (dry run): {} x {}", p.offering.instance_count, p.offering.instance_type),
        description: format!(
            "Rule `{rule_id}` found an offering that meets it, but nothing was bought: {why}.\n{}\n• Payment deadline if bought now: {}",
            what(p),
            when(payment_deadline(intent.created_at, p.offering.start))
        ),
        next_steps: vec![format!("Offering {} was checked with a DryRun purchase request.", p.offering.id)],
        keywords: keywords(p, "dry-run"),
        thread_id: intent.id.clone(),
        summary: format!("Would buy {} x {} for {}", p.offering.instance_count, p.offering.instance_type, p.offering.fee),
        event_type: "would-buy".into(),
        related_resources: vec![],
    }
}

/// EC2 refused a purchase: nothing was bought and the budget was released.
pub fn purchase_rejected(rule_id: &str, p: &Priced, intent: &Intent, reason: &str) -> SlackMessage {
    SlackMessage {
        id: format!("{}#rejected", intent.id),
        title: format!("Purchase refused: {} x {}", p.offering.instance_count, p.offering.instance_type),
        description: format!(
            "Rule `{rule_id}` tried to buy offering `{}` and nothing was bought: {reason}\n{}",
            p.offering.id,
            what(p)
        ),
        next_steps: vec!["The reserved budget was released; the next scan looks again.".into()],
        keywords: keywords(p, "purchase-failed"),
        thread_id: intent.id.clone(),
        summary: format!("Purchase refused: {reason}"),
        event_type: "purchase-rejected".into(),
        related_resources: vec![],
    }
}
