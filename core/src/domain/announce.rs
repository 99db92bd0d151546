//! What capblock tells people about purchases. Pure functions from domain facts to messages.

use chrono::{DateTime, Utc};

use super::block::Block;
use super::budget::{Intent, StackBudgets};
use super::checkpoint::{CheckpointMilestone, minutes_left};
use super::decision::Priced;
use super::duration;
use super::health::HealthChange;
use super::lifecycle::payment_deadline;
use super::money::Money;
use super::plan::Refusals;
use super::rule::Mode;
use super::slack::SlackMessage;
use super::usage;

fn when(t: DateTime<Utc>) -> String {
    t.format("%a %Y-%m-%d %H:%M UTC").to_string()
}

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
fn size(o: &super::offering::Offering) -> String {
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
        id: format!("{reservation_id}#purchased"),
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
        summary: format!(
            "Would buy {} x {} for {}",
            p.offering.instance_count, p.offering.instance_type, p.offering.fee
        ),
        event_type: "would-buy".into(),
        related_resources: vec![],
    }
}

/// An approval-mode rule found an offering it would buy: a person decides.
pub fn approval_needed(rule_id: &str, p: &Priced, intent: &Intent) -> SlackMessage {
    SlackMessage {
        id: format!("{}#approval", intent.id),
        title: format!("Approval needed: {} x {}", p.offering.instance_count, p.offering.instance_type),
        description: format!(
            "Rule `{rule_id}` found an offering that meets it and is in approval mode: nothing is bought until someone approves.\n{}\n• Approval valid until: {}\n• Payment deadline if bought now: {}",
            what(p),
            when(super::approval::expires_at(intent)),
            when(payment_deadline(intent.created_at, p.offering.start))
        ),
        next_steps: vec![
            format!("approval needed: run `capblock approve {}` before {}", intent.id, when(super::approval::expires_at(intent))),
            "capblock re-reads the offering first and refuses if it is gone or its price rose above the rule's threshold.".into(),
        ],
        keywords: keywords(p, "approval"),
        thread_id: intent.id.clone(),
        summary: format!(
            "Approval needed: {} x {} for {}",
            p.offering.instance_count, p.offering.instance_type, p.offering.fee
        ),
        event_type: "approval-needed".into(),
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

// ---------------------------------------------------------------------------------------------
// What the market said of a region (scan-offerings)
// ---------------------------------------------------------------------------------------------

/// EC2 refused every search for a family with CapacityBlockDescribeLimitExceeded, even paced,
/// over several runs: the account's Capacity Block quota for it is most likely 0.
pub fn quota_zero(region: &str, family: &str, refused: &Refusals, now: DateTime<Utc>) -> SlackMessage {
    let upper = family.to_ascii_uppercase();
    SlackMessage {
        id: format!("market-{region}#quota-zero-{family}"),
        title: format!("No Capacity Block quota for {family} in {region}?"),
        description: format!(
            "Between {} and {}, over {} scans, EC2 refused {} searches in a row for `{family}` Capacity Blocks in {region} with `CapacityBlockDescribeLimitExceeded`, each sent after waiting for EC2's limit to refill, and none succeeded. That is what EC2 answers on every call when the account's Capacity Block quota for the family is 0. It is also what anyone in the account calling DescribeCapacityBlockOfferings often enough would cause: capblock has not confirmed the quota itself.",
            when(refused.first_at),
            when(now),
            refused.runs,
            refused.count,
        ),
        next_steps: vec![
            format!(
                "In Service Quotas (Amazon Elastic Compute Cloud), check \"Concurrent {upper} Capacity Blocks per account\" in {region} (not its \"per organization\" twin) and request an increase, in vCPUs (192 is one trn2.48xlarge or one p5.48xlarge); if it is not 0, look in CloudTrail for who calls DescribeCapacityBlockOfferings in {region}."
            ),
            format!(
                "capblock asks one {family} question in {region} each scan; nothing is bought there until one succeeds, and the first that does ends this."
            ),
        ],
        keywords: vec!["capblock".into(), "quota".into(), region.to_string(), family.to_string()],
        thread_id: format!("market-{region}"),
        summary: format!("Capacity Block quota for {family} in {region} looks like 0"),
        event_type: "quota-zero".into(),
        related_resources: vec![],
    }
}

/// The month's summary (the first day of the next month): each rule's spend and use, each
/// team's, and the account's count. Thread `report-<month>`.
pub fn month_summary(
    month: &str,
    rules: &[super::report::RuleMonth],
    teams: &[super::report::TeamMonth],
    account_spent: Option<Money>,
) -> SlackMessage {
    let pct = |p: Option<rust_decimal::Decimal>| p.map_or("-".to_string(), |p| format!("{:.1}%", p.round_dp(1)));
    let (title, description) = if rules.is_empty() {
        (format!("{month}: nothing bought or extended"), format!("No block was charged to {month}."))
    } else {
        let blocks: u32 = rules.iter().map(|r| r.blocks).sum();
        let spent = rules.iter().skip(1).try_fold(rules[0].spent, |t, r| t.checked_add(&r.spent).ok());
        let mut lines: Vec<String> = rules
            .iter()
            .map(|r| {
                let price = r
                    .per_used_accelerator_hour
                    .map_or(String::new(), |p| format!(", {} per used accelerator-hour", p.display()));
                let unpriced = match r.unpriced_blocks {
                    0 => String::new(),
                    n => format!(", {n} of them adopted with no fee known"),
                };
                format!(
                    "• `{}` ({}): {} block(s){unpriced}, {} spent ({} fees + {} extensions), {:.1} of {:.1} accelerator-hours used ({}){price}",
                    r.rule,
                    r.team,
                    r.blocks,
                    r.spent,
                    r.fees,
                    r.extensions,
                    r.used_accelerator_hours.round_dp(1),
                    r.paid_accelerator_hours.round_dp(1),
                    pct(r.utilization_percent)
                )
            })
            .collect();
        lines.extend(teams.iter().map(|t| {
            let budget = t.budget.map_or(String::new(), |b| format!(" (budget {b})"));
            format!("• team {}: {} spent{budget}, {} used", t.team, t.spent, pct(t.utilization_percent))
        }));
        if let Some(a) = account_spent {
            lines.push(format!("• account budget: {a} spent"));
        }
        (
            format!(
                "{month}: {blocks} block(s), {} spent",
                spent.map_or_else(|| "several currencies".to_string(), |s| s.to_string())
            ),
            lines.join("\n"),
        )
    };
    SlackMessage {
        id: format!("report-{month}#summary"),
        title,
        description,
        next_steps: vec![format!("`capblock report --month {month} --csv` for a spreadsheet or a FinOps tool.")],
        keywords: vec!["capblock".into(), "report".into(), month.to_string()],
        thread_id: format!("report-{month}"),
        summary: format!("capblock's month {month}"),
        event_type: "month-summary".into(),
        related_resources: vec![],
    }
}

/// A rule names a team the stack has no budget for: it buys nothing until the team has one.
pub fn team_unbudgeted(rule_id: &str, team: &str, budgets: &StackBudgets) -> SlackMessage {
    let known = if budgets.teams.is_empty() {
        "This stack has no team budgets.".to_string()
    } else {
        format!(
            "Teams with a budget: {}.",
            budgets.teams.iter().map(|(t, m)| format!("`{t}` ({m} a month)")).collect::<Vec<_>>().join(", ")
        )
    };
    SlackMessage {
        id: format!("rule-{rule_id}#team-unbudgeted-{team}"),
        title: format!("Rule {rule_id} buys nothing: team {team} has no budget"),
        description: format!(
            "Rule `{rule_id}` names team `{team}`, and this stack's TeamBudgets give it none, so the rule is left out of every scan (a team's rules are capped together; spending outside that cap is what a typo in `team` would do). {known}"
        ),
        next_steps: vec![format!(
            "Add `{team}=<monthly USD>` to the stack's TeamBudgets parameter, or correct `team` in the rule (`capblock rules put`)."
        )],
        keywords: vec!["capblock".into(), "team-unbudgeted".into(), rule_id.to_string(), team.to_string()],
        thread_id: format!("rule-{rule_id}"),
        summary: format!("rule {rule_id}: team {team} has no budget"),
        event_type: "team-unbudgeted".into(),
        related_resources: vec![],
    }
}

/// A region does not sell an instance type as Capacity Blocks (InvalidParameterValue).
pub fn not_sold(region: &str, instance_type: &str, ec2_says: &str, rules: &[String]) -> SlackMessage {
    SlackMessage {
        id: format!("market-{region}#not-sold-{instance_type}"),
        title: format!("{instance_type} is not sold as Capacity Blocks in {region}"),
        description: format!(
            "EC2 answered a search for `{instance_type}` in {region}: {ec2_says}\nRules asking for it there: {}.",
            rules.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")
        ),
        next_steps: vec![format!(
            "Remove {region} or {instance_type} from those rules, or leave it: capblock asks again once a day and says nothing more."
        )],
        keywords: vec!["capblock".into(), "not-sold".into(), region.to_string(), instance_type.to_string()],
        thread_id: format!("market-{region}"),
        summary: format!("{instance_type} not sold as Capacity Blocks in {region}"),
        event_type: "not-sold".into(),
        related_resources: vec![],
    }
}

/// A member account lending the watch its describe limit did not answer (its watch role
/// missing or refused): the other accounts asked its questions, more slowly.
pub fn watch_account_failed(account: &str, error: &str, stack: &str) -> SlackMessage {
    SlackMessage {
        id: format!("market-watch#failed-{account}"),
        title: format!("Account {account} is not helping watch the market"),
        description: format!(
            "capblock asks part of its market questions from member account {account}, through its \
             read-only role `capblock-watch-{stack}`. That failed: {error}\nThe other accounts asked its \
             questions this run, so the market is watched more slowly, not less completely."
        ),
        next_steps: vec![
            format!(
                "Check that the member stack is deployed in {account} (`member.yaml`, parameter `CapacityStackName` = `{stack}`)."
            ),
            "Run `capblock preflight`: it assumes each watch role and names what refuses.".into(),
            format!("Or remove {account} from the stack's `WatchAccounts` parameter."),
        ],
        keywords: vec!["capblock".into(), "watch".into(), account.to_string()],
        thread_id: "market-watch".into(),
        summary: format!("member account {account} is not helping watch the market"),
        event_type: "watch-account-failed".into(),
        related_resources: vec![],
    }
}

/// A member account lending the watch its describe limit was refused on every call of a family
/// in a region: its Capacity Block quota of the family is 0 (the published default) or someone
/// in it spends its limit. It lends nothing for that family; the other accounts ask instead.
pub fn member_quota_zero(account: &str, region: &str, family: &str, refused: u32) -> SlackMessage {
    let upper = family.to_ascii_uppercase();
    SlackMessage {
        id: format!("market-{region}#member-quota-{account}-{family}"),
        title: format!("Account {account} lends no {family} searches in {region}"),
        description: format!(
            "capblock asks part of its market questions from member account {account} (`WatchAccounts`). \
             EC2 refused its {refused} `{family}` searches in {region} with `CapacityBlockDescribeLimitExceeded` \
             and answered none: the member's Capacity Block quota for `{family}` is 0 there (every account \
             starts at 0), or someone in that account spends its describe limit. The other accounts ask \
             its questions, so the market is watched more slowly, not less completely; {account} is asked \
             one `{family}` question a scan until one is answered."
        ),
        next_steps: vec![
            format!(
                "In account {account}, Service Quotas (Amazon Elastic Compute Cloud): request \"Concurrent {upper} \
                 Capacity Blocks per account\" in {region}, in vCPUs; members need the quota to lend their limit."
            ),
            format!("Or remove {account} from the stack's `WatchAccounts` parameter."),
            "`capblock preflight` asks each member and says which answer.".into(),
        ],
        keywords: vec!["capblock".into(), "watch".into(), "quota".into(), account.to_string(), family.to_string()],
        thread_id: format!("market-{region}"),
        summary: format!("member account {account}: {family} quota 0 or busy in {region}"),
        event_type: "member-quota-zero".into(),
        related_resources: vec![],
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoint moments of a block (on-capacity-event)
// ---------------------------------------------------------------------------------------------

fn block_line(f: &Block) -> String {
    format!(
        "*{} x {}* in {} (`{}`)\n• End: {}\n• Instances terminated from: {}",
        f.instance_count,
        f.instance_type,
        f.region,
        f.reservation_id,
        when(f.end),
        when(f.termination_time())
    )
}

fn checkpoint_keywords(f: &Block, extra: &str) -> Vec<String> {
    vec!["capblock".to_string(), extra.to_string(), f.region.to_string(), f.instance_type.to_string()]
}

/// A checkpoint moment of a block: delivered, capblock's reminder, AWS's expiration warning or
/// one instance's interruption warning. `instances` are the ids running in the block now.
pub fn checkpoint(
    f: &Block,
    milestone: &CheckpointMilestone,
    instances: &[String],
    now: DateTime<Utc>,
) -> SlackMessage {
    let left = minutes_left(f.termination_time(), now);
    let running = match instances.len() {
        0 => "No instance is running in it.".to_string(),
        1 => format!("1 instance running: {}.", instances[0]),
        n => format!("{n} instances running."),
    };
    let (title, summary, steps) = match milestone {
        CheckpointMilestone::Delivered => (
            format!("Capacity Block active: {}", f.reservation_id),
            "The block is active: its instances can run now".to_string(),
            vec![
                format!("Launch with MarketType=capacity-block and CapacityReservationId={}.", f.reservation_id),
                "capblock reminds this thread (and the workloads topic) before the instances are terminated.".into(),
            ],
        ),
        CheckpointMilestone::Reminder { lead_minutes, .. } => (
            format!(
                "Checkpoint reminder: {} ends in {}",
                f.reservation_id,
                duration::minutes(i64::from(*lead_minutes))
            ),
            format!("{} until the instances are terminated", duration::minutes(left)),
            vec![
                "Checkpoint training state to durable storage now.".into(),
                "Extend the block (PurchaseCapacityBlockExtension) if the work needs longer.".into(),
            ],
        ),
        CheckpointMilestone::AwsExpirationWarning => (
            format!("AWS expiration warning: {}", f.reservation_id),
            format!("AWS warns the block ends soon: {} until the instances are terminated", duration::minutes(left)),
            vec!["Save checkpoints now: the instances are terminated at the time above.".into()],
        ),
        CheckpointMilestone::Interruption { instance_id } => (
            format!("Instance interruption: {instance_id}"),
            format!("{instance_id} in {} is about to be terminated", f.reservation_id),
            vec![format!("Work on {instance_id} not yet saved will be lost.")],
        ),
    };
    SlackMessage {
        id: format!("{}#{}", f.reservation_id, milestone.key()),
        title,
        description: format!("{}\n• Time left: {}\n{running}", block_line(f), duration::minutes(left)),
        next_steps: steps,
        keywords: checkpoint_keywords(f, &milestone.kind()),
        thread_id: f.reservation_id.clone(),
        summary,
        event_type: milestone.kind(),
        related_resources: f.arn.iter().cloned().collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// The life of a tracked block (track-blocks)
// ---------------------------------------------------------------------------------------------

fn tracked_line(b: &Block) -> String {
    format!(
        "*{} x {}* in {} ({}), reservation `{}`\n• Start: {}\n• End: {}\n• Instances terminated from: {}",
        b.instance_count,
        b.instance_type,
        b.region,
        b.availability_zone,
        b.reservation_id,
        when(b.start),
        when(b.end),
        when(b.termination_time()),
    )
}

fn tracked(
    b: &Block,
    event: &str,
    title: String,
    description: String,
    next_steps: Vec<String>,
    summary: String,
) -> SlackMessage {
    SlackMessage {
        id: format!("{}#{event}", b.reservation_id),
        title,
        description,
        next_steps,
        keywords: vec!["capblock".into(), event.into(), b.region.to_string(), b.instance_type.to_string()],
        thread_id: b.reservation_id.clone(),
        summary,
        event_type: event.into(),
        related_resources: b.arn.iter().cloned().collect(),
    }
}

fn launch_hints(b: &Block) -> Vec<String> {
    vec![
        format!(
            "aws ec2 run-instances --region {} --instance-type {} --count {} --instance-market-options MarketType=capacity-block --capacity-reservation-specification 'CapacityReservationTarget={{CapacityReservationId={}}}' ...",
            b.region, b.instance_type, b.instance_count, b.reservation_id
        ),
        format!(
            "Karpenter: in the EC2NodeClass set capacityReservationSelectorTerms: [{{id: {}}}] and allow karpenter.sh/capacity-type: reserved in the NodePool (nodes drain 40 minutes before the end).",
            b.reservation_id
        ),
    ]
}

/// How long from `from` to `to` (none once past), in the one duration style.
fn left(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    duration::compact((to - from).max(chrono::Duration::zero()))
}

/// Payment went through: the block is scheduled (or already running).
pub fn payment_succeeded(b: &Block) -> SlackMessage {
    tracked(
        b,
        "payment-succeeded",
        format!("Payment succeeded: {} x {}", b.instance_count, b.instance_type),
        format!("The fee for `{}` is paid; the block is scheduled.\n{}", b.reservation_id, tracked_line(b)),
        vec![
            format!("Instances can launch into it from {}; capblock posts here when it is active.", when(b.start)),
            format!("Use MarketType=capacity-block and CapacityReservationId={}.", b.reservation_id),
        ],
        format!("Paid; scheduled {} to {}", when(b.start), when(b.end)),
    )
}

/// A block capblock sees scheduled without having watched its payment.
pub fn scheduled(b: &Block) -> SlackMessage {
    tracked(
        b,
        "scheduled",
        format!("Capacity Block scheduled: {} x {}", b.instance_count, b.instance_type),
        format!("Reservation `{}` is scheduled.\n{}", b.reservation_id, tracked_line(b)),
        vec![format!("Instances can launch into it from {}.", when(b.start))],
        format!("Scheduled {} to {}", when(b.start), when(b.end)),
    )
}

/// The block is active: how to launch into it.
pub fn active(b: &Block) -> SlackMessage {
    tracked(
        b,
        super::milestone::DELIVERED,
        format!("Capacity Block active: {} x {}", b.instance_count, b.instance_type),
        format!("Reservation `{}` is active: its instances can run now.\n{}", b.reservation_id, tracked_line(b)),
        launch_hints(b),
        format!("Active until {}", when(b.end)),
    )
}

/// The block ended: what it cost. `total_fee` includes paid extensions; `per_accelerator_hour`
/// is None when capblock does not know the fee or the accelerator count.
pub fn expired(b: &Block, total_fee: Option<Money>, per_accelerator_hour: Option<super::money::Rate>) -> SlackMessage {
    let cost = match (total_fee, per_accelerator_hour) {
        (Some(f), Some(r)) => format!("• Total fee: {f}\n• Price: {} per accelerator-hour", r.display()),
        (Some(f), None) => format!("• Total fee: {f}"),
        _ => "• Fee: unknown to capblock (the block was bought outside it)".into(),
    };
    let used = used_line(b, total_fee);
    tracked(
        b,
        "expired",
        format!("Capacity Block ended: {} x {}", b.instance_count, b.instance_type),
        format!("Reservation `{}` has expired.\n{}\n{cost}{used}", b.reservation_id, tracked_line(b)),
        vec!["Nothing to do: capblock stops tracking this block.".into()],
        match total_fee {
            Some(f) => format!("Ended; cost {f}"),
            None => "Ended".into(),
        },
    )
}

/// The end-of-block line of what was used (empty when capblock never sampled the block active):
/// paid and used instance-hours, utilization, and the price per used accelerator-hour.
fn used_line(b: &Block, total_fee: Option<Money>) -> String {
    if !b.usage.is_known() {
        return String::new();
    }
    let x = usage::utilization(&b.span(), &b.usage, total_fee);
    let price =
        x.per_used_accelerator_hour.map_or(String::new(), |r| format!(": {} per used accelerator-hour", r.display()));
    format!(
        "\n• Used: {} of {} instance-hours paid ({}%){price}",
        x.used_instance_hours.normalize(),
        x.paid_instance_hours.normalize(),
        x.percent.normalize()
    )
}

/// Part of an active block has been idle (paid, nothing running) for the rule's
/// `idle_alert_minutes`: how many instances, since when, and what the idle time has cost so far
/// at the block's own price (`cost`: None when capblock never knew the fee).
pub fn idle(
    b: &Block,
    idle: u32,
    since: DateTime<Utc>,
    idle_instance_minutes: u64,
    cost: Option<Money>,
    now: DateTime<Utc>,
) -> SlackMessage {
    let minutes = (now - since).num_minutes();
    let cost_line = match cost {
        Some(c) => format!(
            "At the block's price that idle time has cost {c} so far ({} instance-hours).",
            hours(idle_instance_minutes)
        ),
        None => format!(
            "{} instance-hours idle so far (the block's fee is unknown to capblock).",
            hours(idle_instance_minutes)
        ),
    };
    tracked(
        b,
        "idle",
        format!("Paid but idle: {idle} of {} instances for {}", b.instance_count, duration::minutes(minutes)),
        format!(
            "{idle} of the block's {} instances have run nothing since {} ({}).\n{cost_line}\n{}",
            b.instance_count,
            when(since),
            duration::minutes(minutes),
            tracked_line(b)
        ),
        vec![
            "Start work on the idle instances (they are paid for until the end), or hand them to a team that can use them.".into(),
            "capblock says once more when every instance runs again.".into(),
        ],
        format!("{}: {idle} of {} instances idle for {}", b.reservation_id, b.instance_count, duration::minutes(minutes)),
    )
}

/// An idle episode alerted before is over: every instance runs again.
pub fn idle_over(
    b: &Block,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    idle_instance_minutes: u64,
    cost: Option<Money>,
) -> SlackMessage {
    let cost_line = match cost {
        Some(c) => format!(", which cost {c} at the block's price"),
        None => " (the block's fee is unknown to capblock)".to_string(),
    };
    tracked(
        b,
        "idle",
        "Every instance of the block runs again".to_string(),
        format!(
            "Idle from {} to {} ({}): {} instance-hours paid and unused{cost_line}.\n{}",
            when(since),
            when(until),
            duration::minutes((until - since).num_minutes()),
            hours(idle_instance_minutes),
            tracked_line(b)
        ),
        vec!["Nothing to do.".into()],
        format!("{}: every instance runs again", b.reservation_id),
    )
}

/// Instance-minutes as hours, to a tenth.
fn hours(instance_minutes: u64) -> String {
    // Rounded first: Decimal's `{:.1}` cuts digits off rather than rounding them.
    format!("{:.1}", (rust_decimal::Decimal::from(instance_minutes) / rust_decimal::Decimal::from(60)).round_dp(1))
}

/// Payment is still pending `point_hours` (or less) before the deadline.
pub fn payment_warning(
    b: &Block,
    deadline: DateTime<Utc>,
    point_hours: u32,
    rebuy: bool,
    now: DateTime<Utc>,
) -> SlackMessage {
    tracked(
        b,
        "payment-warning",
        format!("Payment still pending: {} left for `{}`", left(now, deadline), b.reservation_id),
        format!(
            "EC2 has not taken payment for this block yet (warning point: {} before the deadline).\n{}\n• Payment deadline: {} ({} from now)",
            duration::compact(chrono::Duration::hours(i64::from(point_hours))),
            tracked_line(b),
            when(deadline),
            left(now, deadline)
        ),
        vec![
            "Check the account's payment method (Billing console) if this is unexpected.".into(),
            format!(
                "If payment has not gone through by {}, EC2 releases the block (payment-failed) and capblock frees its budget{}.",
                when(deadline),
                if rebuy { "; the rule then buys a replacement" } else { "" }
            ),
        ],
        format!("Payment pending; deadline {}", when(deadline)),
    )
}

/// Payment failed: the block is gone and its budget released. `seen_at` is when the tracker saw
/// EC2 report `payment-failed`: before the deadline EC2 failed the payment early; at or after
/// it the payment had not gone through by then (EC2 does not say which happened).
pub fn payment_failed(b: &Block, rebuy: bool, seen_at: DateTime<Utc>) -> SlackMessage {
    let what = match b.payment_deadline {
        Some(d) if seen_at < d => format!("EC2 failed the payment before its deadline ({})", when(d)),
        Some(d) => format!("EC2 did not take payment by the deadline ({})", when(d)),
        None => "EC2 reports the payment as failed".to_string(),
    };
    // A purchase of UltraServers is one fee for all its parts: it goes back once EC2 shows every
    // part payment-failed, which this part alone does not say.
    let released = if b.ultraserver {
        "The purchase's fee goes back to the budgets once EC2 shows every UltraServer of it payment-failed"
    } else {
        "The fee was released from the budgets"
    };
    let next = if rebuy {
        format!("{released}; the rule may buy a replacement on its next scan.")
    } else {
        format!("{released}. The rule does not rebuy (rebuy_on_payment_failure = false).")
    };
    tracked(
        b,
        "payment-failed",
        format!("Payment failed: {} x {} released", b.instance_count, b.instance_type),
        format!("{what}; reservation `{}` is released and nothing was charged.\n{}", b.reservation_id, tracked_line(b)),
        vec![next, "Check the account's payment method (Billing console).".into()],
        "Payment failed; block released".into(),
    )
}

/// A part of a purchase failed its payment while EC2 may still hold `part`, another of the same
/// purchase (one fee for all): the fee stays committed, and a person is told what to look at.
pub fn fee_kept(b: &Block, part: &str) -> SlackMessage {
    tracked(
        b,
        "fee-kept",
        format!("Fee kept: `{part}` of the same purchase is not shown failed"),
        format!(
            "EC2 failed the payment for `{}`, but does not show `{part}`, another UltraServer of the same purchase, \
             as payment-failed (it may be waiting, paid, or not listed yet). The purchase's one fee stays committed \
             in the budgets until EC2 shows every part failed.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec![format!("Look at `{part}` in the EC2 console (Capacity Reservations); capblock keeps looking every run.")],
        "Payment failed; fee kept while a part may be held".into(),
    )
}

/// EC2 cancelled or failed the block.
pub fn released(b: &Block, ec2_state: &str) -> SlackMessage {
    tracked(
        b,
        "released",
        format!("Capacity Block released: {} x {}", b.instance_count, b.instance_type),
        format!(
            "EC2 reports reservation `{}` as {ec2_state}: it will not be delivered.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec!["capblock stops tracking this block.".into()],
        format!("Released ({ec2_state})"),
    )
}

/// EC2 reports something capblock cannot place.
pub fn anomaly(b: &Block, what: &str) -> SlackMessage {
    tracked(
        b,
        "anomaly",
        format!("Check this block: `{}`", b.reservation_id),
        format!("{what}\n{}", tracked_line(b)),
        vec!["capblock keeps tracking it; look at the reservation in the EC2 console.".into()],
        "Unexpected state from EC2".into(),
    )
}

/// EC2 reports a state that is not on a block's path: what it means, and what to look at.
pub fn ec2_state(b: &Block, state: &str) -> SlackMessage {
    let meaning = match state {
        "unavailable" => "EC2 reports the block unavailable: its capacity cannot be used right now.",
        "cancelling" => "EC2 is cancelling the block.",
        "delayed" => "EC2 reports the block delayed: its capacity is not delivered yet.",
        "assessing" => "EC2 is assessing the block.",
        _ => "EC2 reports a state capblock does not know.",
    };
    tracked(
        b,
        "ec2-state",
        format!("Check this block: EC2 reports it `{state}`"),
        format!("{meaning}\n{}", tracked_line(b)),
        vec![
            "Look at the reservation in the EC2 console; capblock keeps tracking it and says so again if the state changes.".into(),
        ],
        format!("{} is {state}", b.reservation_id),
    )
}

/// DescribeCapacityBlockStatus reports a change of the block's health: new problems, or the
/// recovery from those announced before.
pub fn health(b: &Block, change: &HealthChange) -> SlackMessage {
    let h = change.health();
    let (title, steps) = match change {
        HealthChange::Degraded { .. } => (
            format!("Check this block: {}", change.summary()),
            vec![
                "Look at the block in the EC2 console (Capacity Blocks, status); jobs may need to move to the instances still available.".into(),
                "capblock says so again when the health changes, and when it recovers.".into(),
            ],
        ),
        HealthChange::Recovered { .. } => (
            "Block healthy again".to_string(),
            vec!["Nothing to do: the problems announced before are gone.".into()],
        ),
    };
    let available = h.total.saturating_sub(h.unavailable);
    tracked(
        b,
        "health",
        title,
        format!(
            "EC2 reports interconnect `{}`, {available} of {} instances available.\n{}",
            h.interconnect,
            h.total,
            tracked_line(b)
        ),
        steps,
        format!("{}: {}", b.reservation_id, change.summary()),
    )
}

/// A reservation capblock did not record is now tracked.
pub fn tracking(b: &Block, state: &str, tagged: bool) -> SlackMessage {
    let why = if tagged {
        "It carries this stack's `capblock:stack` tag but was missing from capblock's store."
    } else {
        "It was bought outside capblock (adopt_untagged is on)."
    };
    tracked(
        b,
        "tracking",
        format!("Now tracking: {} x {}", b.instance_count, b.instance_type),
        format!("{why} State: {state}.\n{}", tracked_line(b)),
        vec!["capblock posts its state changes and reminders in this thread.".into()],
        format!("Tracking {}", b.reservation_id),
    )
}

/// A reservation carries the tag of an intent whose purchase is recorded, but is not one of
/// that purchase's reservations: EC2 sold a second block for one decision (or someone tagged
/// one by hand). It is tracked; its fee is in no budget.
pub fn duplicate_purchase(b: &Block, state: &str, intent_id: &str) -> SlackMessage {
    tracked(
        b,
        "duplicate-purchase",
        format!("Second purchase for one decision: {} x {}", b.instance_count, b.instance_type),
        format!(
            "Reservation `{}` carries the `capblock:intent` tag `{intent_id}`, whose purchase is already recorded, but is not one of that purchase's reservations. EC2 may have sold two blocks for one decision. State: {state}.\n{}",
            b.reservation_id,
            tracked_line(b)
        ),
        vec![
            format!("In the EC2 console, look up the reservations tagged `capblock:intent` = `{intent_id}`."),
            "capblock tracks this block, but its fee is charged to no budget: correct the budgets by hand if it was bought.".into(),
        ],
        format!("Second purchase for intent {intent_id}: {}", b.reservation_id),
    )
}

/// EC2 lists a reservation carrying an open intent's tag that capblock cannot read: it may be
/// the purchase, so the intent stays open with its fee committed until a person looks.
/// A purchase sent whose answer was lost and which EC2 still does not list by its tag: held,
/// for a person to look in EC2 (`app::reconcile`).
pub fn outcome_unknown(intent: &Intent, sent_at: DateTime<Utc>) -> SlackMessage {
    let o = &intent.offering;
    SlackMessage {
        id: format!("{}#outcome-unknown", intent.id),
        title: format!("Purchase outcome unknown: {} x {}", o.instance_count, o.instance_type),
        description: format!(
            "Rule `{}` sent a purchase of offering `{}` ({}) in {} at {} and its answer was lost. EC2 lists no reservation tagged `capblock:intent` = `{}` yet. EC2 may list a new reservation late, so its absence is not taken as proof that nothing was bought.",
            intent.rule_id,
            o.id,
            o.fee,
            o.region,
            sent_at.format("%Y-%m-%d %H:%M UTC"),
            intent.id
        ),
        next_steps: vec![
            "The fee stays committed to its budgets and the rule buys nothing more until this is settled; capblock looks for the reservation on every run and records it as bought when EC2 shows it.".into(),
            format!(
                "Look in EC2: `aws ec2 describe-capacity-reservations --region {} --filters Name=tag:capblock:intent,Values={}`.",
                o.region, intent.id
            ),
            format!(
                "If EC2 holds no such reservation (and bills none), release the fee: `capblock intents release {}`.",
                intent.id
            ),
        ],
        keywords: vec!["capblock".into(), "outcome-unknown".into(), o.region.to_string(), o.instance_type.to_string()],
        thread_id: intent.id.clone(),
        summary: format!("Purchase outcome unknown for intent {}", intent.id),
        event_type: "outcome-unknown".into(),
        related_resources: vec![],
    }
}

pub fn unreadable_reservation(intent: &Intent, ids: &[&str], reasons: &[&str]) -> SlackMessage {
    let o = &intent.offering;
    SlackMessage {
        id: format!("{}#unreadable-reservation", intent.id),
        title: format!("Purchase outcome unclear: {} x {}", o.instance_count, o.instance_type),
        description: format!(
            "Rule `{}` sent a purchase of offering `{}` in {} and its answer was lost. EC2 lists reservations carrying its `capblock:intent` tag `{}` that capblock cannot read: {} ({}).",
            intent.rule_id,
            o.id,
            o.region,
            intent.id,
            ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", "),
            reasons.join("; ")
        ),
        next_steps: vec![
            "The purchase's fee stays committed to its budgets and the rule buys nothing more while it is open.".into(),
            format!("In the EC2 console, look up the reservations tagged `capblock:intent` = `{}`.", intent.id),
        ],
        keywords: vec![
            "capblock".into(),
            "unreadable-reservation".into(),
            o.region.to_string(),
            o.instance_type.to_string(),
        ],
        thread_id: intent.id.clone(),
        summary: format!("Unreadable reservations for intent {}", intent.id),
        event_type: "unreadable-reservation".into(),
        related_resources: vec![],
    }
}

/// An extension was paid: the block ends later.
pub fn extended(b: &Block, old_end: DateTime<Utc>, fee: Option<super::money::Money>) -> SlackMessage {
    tracked(
        b,
        "extended",
        format!("Capacity Block extended to {}", when(b.end)),
        format!(
            "Reservation `{}` now ends at {} (was {}){}.\n{}",
            b.reservation_id,
            when(b.end),
            when(old_end),
            fee.map(|f| format!("; extension fee {f}")).unwrap_or_default(),
            tracked_line(b)
        ),
        vec!["Checkpoint reminders moved to the new end.".into()],
        format!("Extended to {}", when(b.end)),
    )
}

/// EC2 now reports an earlier end than capblock had (an extension it showed as paid was undone):
/// the block ends at the earlier time, and the reminders follow it.
pub fn end_moved_back(b: &Block, old_end: DateTime<Utc>) -> SlackMessage {
    tracked(
        b,
        "end-moved-back",
        format!("Check this block: `{}` now ends earlier, at {}", b.reservation_id, when(b.end)),
        format!(
            "EC2 reports that reservation `{}` ends at {}, not at {} as it did before: the extension is not in force.\n{}",
            b.reservation_id,
            when(b.end),
            when(old_end),
            tracked_line(b)
        ),
        vec![
            "Checkpoint reminders moved to the earlier end; plan for the instances to stop then.".into(),
            "Look at the block's extensions in the EC2 console (describe-capacity-block-extension-history).".into(),
        ],
        format!("End moved back to {}", when(b.end)),
    )
}

/// An extension was bought (payment pending) or, in dry-run, would have been.
pub fn extension_decided(
    b: &Block,
    offering_id: &str,
    new_end: DateTime<Utc>,
    fee: super::money::Money,
    rate: super::money::Rate,
    mode: Mode,
) -> SlackMessage {
    let (event, title, step) = match mode {
        Mode::Live => (
            "extension-bought",
            format!("Extension bought: `{}`", b.reservation_id),
            "The end moves once EC2 takes payment; capblock posts here when it does.".to_string(),
        ),
        Mode::DryRun => (
            "would-extend",
            format!("Would extend (dry run): `{}`", b.reservation_id),
            "Nothing was bought: the stack or the rule is in dry-run mode.".to_string(),
        ),
        // Approval is asked for purchases only: an extension is decided near the block's end,
        // when nobody may be there to approve it in time.
        Mode::Approval => (
            "would-extend",
            format!("Would extend (approval mode): `{}`", b.reservation_id),
            "Nothing was bought: capblock does not extend blocks of rules in approval mode. \
             Extend it in the EC2 console, or set the rule's mode to \"live\" to let capblock extend."
                .to_string(),
        ),
    };
    tracked(
        b,
        event,
        title,
        format!(
            "Extension offering `{offering_id}` to {}: fee {fee}, {} per accelerator-hour.\n{}",
            when(new_end),
            rate.display(),
            tracked_line(b)
        ),
        vec![step],
        format!("Extension to {} for {fee}", when(new_end)),
    )
}

/// An extension was refused or never paid: the end stays, the fee is released.
pub fn extension_released(b: &Block, offering_id: &str, reason: &str) -> SlackMessage {
    tracked(
        b,
        "extension-released",
        format!("Extension not made: `{}`", b.reservation_id),
        format!(
            "Extension `{offering_id}` did not go through: {reason}. The block still ends at {}.\n{}",
            when(b.end),
            tracked_line(b)
        ),
        vec!["Its fee was released from the budgets.".into()],
        "Extension not made".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn idle_texts_say_how_long_how_many_and_what_it_cost() {
        let b = crate::domain::block::example(t(3, 11, 30), t(4, 11, 30));
        let usd = |a: &str| Money::parse(a, "USD").unwrap();
        let alert = idle(&b, 1, t(3, 12, 30), 60, Some(usd("23.12")), t(3, 13, 30));
        assert_eq!(alert.title, "Paid but idle: 1 of 2 instances for 1h");
        assert!(alert.description.contains("has cost 23.12 USD so far (1.0 instance-hours)"), "{}", alert.description);
        let over = idle_over(&b, t(3, 12, 30), t(4, 1, 0), 750, None);
        assert!(
            over.description
                .contains("(12h 30m): 12.5 instance-hours paid and unused (the block's fee is unknown to capblock)."),
            "{}",
            over.description
        );
    }

    fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap()
    }

    /// Bought Tue 12-01 00:00 for Thu 12-03 11:30: payment deadline Tue 12-01 12:00.
    fn block(deadline: Option<DateTime<Utc>>) -> Block {
        Block { payment_deadline: deadline, ..super::super::block::example(t(3, 11, 30), t(4, 11, 30)) }
    }

    #[test]
    fn payment_failed_says_whether_ec2_failed_it_early_or_it_was_not_paid_by_the_deadline() {
        let b = block(Some(t(1, 12, 0)));
        // EC2 reported payment-failed two hours after the purchase, well before the deadline.
        let early = payment_failed(&b, false, t(1, 2, 0));
        assert!(
            early
                .description
                .starts_with("EC2 failed the payment before its deadline (Tue 2026-12-01 12:00 UTC); reservation `cr-0123456789abcdef0` is released"),
            "{}",
            early.description
        );
        assert!(!early.description.contains("did not take payment"), "{}", early.description);
        // Seen at (or after) the deadline: it had not gone through by then.
        for seen in [t(1, 12, 0), t(1, 15, 0)] {
            let late = payment_failed(&b, true, seen);
            assert!(
                late.description
                    .starts_with("EC2 did not take payment by the deadline (Tue 2026-12-01 12:00 UTC); reservation `cr-0123456789abcdef0` is released"),
                "{}",
                late.description
            );
            assert!(!late.description.contains("before its deadline"), "{}", late.description);
            assert!(late.next_steps[0].contains("may buy a replacement"), "{:?}", late.next_steps);
        }
        // The rest of the message does not depend on the case.
        assert_eq!(early.title, "Payment failed: 2 x p5.48xlarge released");
        assert_eq!(early.id, "cr-0123456789abcdef0#payment-failed");
        assert_eq!(early.title, payment_failed(&b, false, t(1, 12, 0)).title);
        // An UltraServer's part does not say the purchase's one fee went back: its last part does.
        let ultra = payment_failed(&b.clone().with_kind(true), true, t(1, 12, 0));
        assert!(
            ultra.next_steps[0]
                .starts_with("The purchase's fee goes back to the budgets once EC2 shows every UltraServer"),
            "{:?}",
            ultra.next_steps
        );
        assert!(!ultra.next_steps[0].contains("was released"), "{:?}", ultra.next_steps);
        // An adopted block has no known deadline: neither claim is made.
        let adopted = payment_failed(&block(None), false, t(1, 2, 0));
        assert!(adopted.description.starts_with("EC2 reports the payment as failed;"), "{}", adopted.description);
    }

    /// The approval request says until when it may be approved (a day after it was asked, or
    /// the offering's start if sooner), in the description and in the command to run.
    #[test]
    fn approval_needed_says_until_when_it_is_valid() {
        let o = super::super::offering::Offering::parse(
            &"us-east-1".parse().unwrap(),
            super::super::offering::tests::raw("2304.00", "USD"),
        )
        .unwrap();
        let p = Priced {
            per_instance_hour: o.price_per_instance_hour(),
            per_accelerator_hour: o.price_per_accelerator_hour(8).unwrap(),
            accelerators_per_instance: 8,
            offering: o.clone(),
        };
        let asked = Intent::new("p5", o, 8, vec![], t(1, 9, 15));
        let m = approval_needed("p5", &p, &asked);
        assert!(m.description.contains("• Approval valid until: Wed 2026-12-02 09:15 UTC"), "{}", m.description);
        assert_eq!(
            m.next_steps[0],
            "approval needed: run `capblock approve p5/cb-0123456789abcdef0` before Wed 2026-12-02 09:15 UTC"
        );
        // Asked late: the offering's start (Thu 11:30) ends it.
        let late = approval_needed("p5", &p, &Intent { created_at: t(2, 20, 0), ..asked });
        assert!(late.description.contains("• Approval valid until: Thu 2026-12-03 11:30 UTC"), "{}", late.description);
    }

    /// `slack::to_json` escapes `& < >` in every text; capblock's own texts use none of them,
    /// so its markdown reaches Slack unchanged.
    #[test]
    fn capblocks_own_texts_need_no_escaping() {
        let b = block(Some(t(1, 12, 0)));
        let fee = super::super::money::Money::usd(rust_decimal::Decimal::from(480)).unwrap();
        let rate = super::super::money::Rate { per_unit: rust_decimal::Decimal::new(25, 1), currency: fee.currency() };
        let messages = [
            payment_succeeded(&b),
            scheduled(&b),
            active(&b),
            expired(&b, Some(fee), Some(rate)),
            expired(&b, None, None),
            payment_warning(&b, t(1, 12, 0), 6, true, t(1, 6, 0)),
            payment_failed(&b, true, t(1, 2, 0)),
            released(&b, "cancelled"),
            anomaly(&b, "not found"),
            tracking(&b, "scheduled", true),
            tracking(&b, "active", false),
            duplicate_purchase(&b, "scheduled", "p5/cb-1"),
            extended(&b, t(3, 11, 30), Some(fee)),
            end_moved_back(&b, t(5, 11, 30)),
            extension_decided(&b, "cbe-1", t(5, 11, 30), fee, rate, Mode::Live),
            extension_decided(&b, "cbe-1", t(5, 11, 30), fee, rate, Mode::Approval),
            extension_released(&b, "cbe-1", "refused"),
            quota_zero(
                "us-east-1",
                "trn2",
                &super::super::plan::Refusals { count: 6, first_at: t(1, 0, 0), runs: 2 },
                t(1, 0, 40),
            ),
            not_sold("us-west-1", "p4d.24xlarge", "not supported", &["a".into()]),
        ];
        for m in &messages {
            let texts = [&m.title, &m.description, &m.summary].into_iter().chain(&m.next_steps).chain(&m.keywords);
            for text in texts {
                assert!(!text.contains(['&', '<', '>']), "{}: {text}", m.event_type);
            }
        }
    }

    #[test]
    fn a_not_live_extension_says_why_nothing_was_bought() {
        let b = block(Some(t(1, 12, 0)));
        let fee = super::super::money::Money::usd(rust_decimal::Decimal::from(480)).unwrap();
        let rate = super::super::money::Rate { per_unit: rust_decimal::Decimal::new(25, 1), currency: fee.currency() };
        let msg = |mode| extension_decided(&b, "cbe-1", t(5, 11, 30), fee, rate, mode);
        let dry = msg(Mode::DryRun);
        assert_eq!(
            (dry.event_type.as_str(), dry.title.as_str()),
            ("would-extend", "Would extend (dry run): `cr-0123456789abcdef0`")
        );
        assert!(dry.next_steps[0].contains("dry-run mode"), "{:?}", dry.next_steps);
        let approval = msg(Mode::Approval);
        assert_eq!(approval.event_type, "would-extend");
        assert_eq!(approval.title, "Would extend (approval mode): `cr-0123456789abcdef0`");
        assert!(approval.next_steps[0].contains("approval mode") && !approval.next_steps[0].contains("dry-run"));
        let live = msg(Mode::Live);
        assert_eq!(
            (live.event_type.as_str(), live.title.as_str()),
            ("extension-bought", "Extension bought: `cr-0123456789abcdef0`")
        );
    }
}
