//! What the market said of a region (scan-offerings): a family EC2 refuses every search for, an
//! instance type a region does not sell, a member account that does not lend its describe limit.

use chrono::{DateTime, Utc};

use super::when;
use crate::domain::message_kind::MessageKind;
use crate::domain::plan::Refusals;
use crate::domain::slack::SlackMessage;

/// EC2 refused every search for a family with CapacityBlockDescribeLimitExceeded, even paced,
/// over several runs: the account's Capacity Block quota for it is most likely 0.
pub fn quota_zero(region: &str, family: &str, refused: &Refusals, now: DateTime<Utc>) -> SlackMessage {
    let upper = family.to_ascii_uppercase();
    SlackMessage {
        id: MessageKind::QuotaZero.message_id(&format!("market-{region}"), Some(family)),
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
        event_type: MessageKind::QuotaZero.event_type().into(),
        related_resources: vec![],
    }
}

/// A region does not sell an instance type as Capacity Blocks (InvalidParameterValue).
pub fn not_sold(region: &str, instance_type: &str, ec2_says: &str, rules: &[String]) -> SlackMessage {
    SlackMessage {
        id: MessageKind::NotSold.message_id(&format!("market-{region}"), Some(instance_type)),
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
        event_type: MessageKind::NotSold.event_type().into(),
        related_resources: vec![],
    }
}

/// A member account lending the watch its describe limit did not answer (its watch role
/// missing or refused): the other accounts asked its questions, more slowly.
pub fn member_account_failed(account: &str, error: &str, stack: &str) -> SlackMessage {
    SlackMessage {
        id: MessageKind::WatchAccountFailed.message_id("market-watch", Some(account)),
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
        event_type: MessageKind::WatchAccountFailed.event_type().into(),
        related_resources: vec![],
    }
}

/// A member account lending the watch its describe limit was refused on every call of a family
/// in a region: its Capacity Block quota of the family is 0 (the published default) or someone
/// in it spends its limit. It lends nothing for that family; the other accounts ask instead.
pub fn member_quota_zero(account: &str, region: &str, family: &str, refused: u32) -> SlackMessage {
    let upper = family.to_ascii_uppercase();
    SlackMessage {
        id: MessageKind::MemberQuotaZero.message_id(&format!("market-{region}"), Some(&format!("{account}-{family}"))),
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
        event_type: MessageKind::MemberQuotaZero.event_type().into(),
        related_resources: vec![],
    }
}
