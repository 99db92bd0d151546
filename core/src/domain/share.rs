//! Sharing a rule's blocks with the accounts that use them (`share_with`): who may be named, the
//! RAM resource share capblock keeps for each block, and what RAM's answer about it means.
//!
//! EC2 shares a Capacity Block through AWS RAM, inside the Organization only, once the block is
//! `scheduled` or `active`; UltraServer Capacity Blocks cannot be shared (EC2 user guide, "Share
//! Capacity Blocks"). The owner pays; consumers launch into it as if they owned it. capblock
//! keeps one resource share per block, tagged with the stack, the rule and the reservation. Its ARN
//! is recorded from CreateResourceShare's answer ([`ShareAttempts`]) and read back by later runs,
//! since RAM's listing may not show a new share for a while; a run that died before recording it
//! sends the same client token again ([`share_client_token`]) and gets the same share back. The
//! tags find a share made before its ARN was recorded.
//!
//! RAM associates a share's resource and principals asynchronously (each association goes
//! `ASSOCIATING`, then `ASSOCIATED` or `FAILED` with a message), and whether it refuses a block it
//! cannot share at once or through a failed association is not published: [`judge`] reads both.
//!
//! Pure: no I/O.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::outbox_key::OutboxKey;
use super::tags::{RULE_TAG, STACK_TAG};

/// The tag naming the reservation a resource share shares (one share per block).
pub const RESERVATION_TAG: &str = "capblock:reservation";

/// The most principals one rule may name: a share per block carries them all, and a list this
/// long is better written as an OU or the Organization.
pub const MAX_SHARE_PRINCIPALS: usize = 20;

/// Who a block may be shared with, as RAM names principals inside an Organization.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SharePrincipal {
    /// A 12-digit account id.
    Account(String),
    /// `arn:aws:organizations::<management account>:organization/o-...`: every account of it.
    Organization(String),
    /// `arn:aws:organizations::<management account>:ou/o-.../ou-...`: every account under it.
    Unit(String),
}

impl SharePrincipal {
    /// Reads one entry of `share_with`; the error says what would be accepted.
    pub fn parse(s: &str) -> Result<SharePrincipal, String> {
        let s = s.trim();
        if is_account(s) {
            return Ok(SharePrincipal::Account(s.to_string()));
        }
        let refused = || {
            format!(
                "{s:?} is not an account id (12 digits), an organization ARN \
                 (arn:aws:organizations::<account>:organization/o-...) or an OU ARN \
                 (arn:aws:organizations::<account>:ou/o-.../ou-...): EC2 shares blocks only inside the Organization"
            )
        };
        let rest = ["arn:aws:", "arn:aws-cn:", "arn:aws-us-gov:"]
            .iter()
            .find_map(|p| s.strip_prefix(p))
            .and_then(|r| r.strip_prefix("organizations::"))
            .ok_or_else(refused)?;
        let (account, resource) = rest.split_once(':').ok_or_else(refused)?;
        if !is_account(account) {
            return Err(refused());
        }
        let parts: Vec<&str> = resource.split('/').collect();
        match parts.as_slice() {
            ["organization", org] if is_org_id(org) => Ok(SharePrincipal::Organization(s.to_string())),
            ["ou", org, ou] if is_org_id(org) && is_ou_id(ou) => Ok(SharePrincipal::Unit(s.to_string())),
            _ => Err(refused()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            SharePrincipal::Account(s) | SharePrincipal::Organization(s) | SharePrincipal::Unit(s) => s,
        }
    }

    /// How a person reads it in a message.
    pub fn describe(&self) -> String {
        match self {
            SharePrincipal::Account(a) => format!("account {a}"),
            SharePrincipal::Organization(arn) => {
                format!("the whole Organization {}", arn.rsplit('/').next().unwrap_or(arn))
            }
            SharePrincipal::Unit(arn) => format!("OU {}", arn.rsplit('/').next().unwrap_or(arn)),
        }
    }
}

impl TryFrom<String> for SharePrincipal {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        SharePrincipal::parse(&s)
    }
}

impl From<SharePrincipal> for String {
    fn from(p: SharePrincipal) -> String {
        p.as_str().to_string()
    }
}

fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `o-` then 10-32 lowercase letters or digits (Organizations' id pattern).
fn is_org_id(s: &str) -> bool {
    s.strip_prefix("o-").is_some_and(|r| {
        (10..=32).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

/// `ou-` then 4-32 lowercase letters or digits, `-`, then 8-32 more (Organizations' pattern).
fn is_ou_id(s: &str) -> bool {
    let ok = |p: &str, lo: usize| {
        (lo..=32).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    s.strip_prefix("ou-").and_then(|r| r.split_once('-')).is_some_and(|(a, b)| ok(a, 4) && ok(b, 8))
}

/// The name of the resource share capblock keeps for a block: the stack's and the reservation's,
/// so a person finds it in the RAM console.
pub fn share_name(stack: &str, reservation_id: &str) -> String {
    format!("capblock-{stack}-{reservation_id}")
}

/// The tags of a block's resource share: whose it is, and which block it shares (how a retry
/// finds it).
pub fn share_tags<'a>(stack: &'a str, rule_id: &'a str, reservation_id: &'a str) -> [(&'static str, &'a str); 3] {
    [(STACK_TAG, stack), (RULE_TAG, rule_id), (RESERVATION_TAG, reservation_id)]
}

/// An association's state, as RAM reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Association {
    Associating,
    Associated,
    Failed,
    Disassociating,
    Disassociated,
}

impl Association {
    /// RAM's word for it; None for one this release does not know.
    pub fn parse(s: &str) -> Option<Association> {
        Some(match s {
            "ASSOCIATING" => Association::Associating,
            "ASSOCIATED" => Association::Associated,
            "FAILED" => Association::Failed,
            "DISASSOCIATING" => Association::Disassociating,
            "DISASSOCIATED" => Association::Disassociated,
            _ => return None,
        })
    }
}

/// One association of a share: the reservation, or a principal, and where RAM has got with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Associated {
    /// The reservation's ARN or the principal, as RAM names it.
    pub entity: String,
    pub status: Association,
    /// RAM's reason, for a failed association.
    pub message: Option<String>,
}

/// What RAM says of a block's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareView {
    pub arn: String,
    /// The reservation's association; None when RAM lists none for it.
    pub resource: Option<Associated>,
    pub principals: Vec<Associated>,
}

/// What a block's share has come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// The reservation is shared: with `with` (principals RAM associated), and not with
    /// `refused` (principals RAM failed, with its reason).
    Done { with: Vec<String>, refused: Vec<(String, String)> },
    /// RAM is still associating the reservation or a principal: look again later.
    Pending,
    /// RAM could not share the reservation (or no principal at all): the share is no use, and
    /// its reason is RAM's.
    Failed(String),
}

/// Reads RAM's answer about a block's share (pure).
pub fn judge(view: &ShareView) -> Shared {
    let reason = |a: &Associated| a.message.clone().unwrap_or_else(|| "RAM gave no reason".to_string());
    let Some(resource) = &view.resource else {
        return Shared::Failed("RAM lists no reservation in the share".to_string());
    };
    match resource.status {
        Association::Associated => {}
        Association::Associating => return Shared::Pending,
        Association::Failed => return Shared::Failed(reason(resource)),
        Association::Disassociating | Association::Disassociated => {
            return Shared::Failed("RAM took the reservation out of the share".to_string());
        }
    }
    if view.principals.iter().any(|p| p.status == Association::Associating) {
        return Shared::Pending;
    }
    let with: Vec<String> =
        view.principals.iter().filter(|p| p.status == Association::Associated).map(|p| p.entity.clone()).collect();
    let refused: Vec<(String, String)> = view
        .principals
        .iter()
        .filter(|p| p.status != Association::Associated)
        .map(|p| (p.entity.clone(), reason(p)))
        .collect();
    if with.is_empty() {
        let why = refused.iter().map(|(p, r)| format!("{p}: {r}")).collect::<Vec<_>>().join("; ");
        return Shared::Failed(if why.is_empty() { "RAM lists no principal in the share".into() } else { why });
    }
    Shared::Done { with, refused }
}

/// The longest client token capblock sends RAM. RAM's model sets no length or alphabet for
/// `clientToken` (a string; InvalidClientTokenException when RAM finds one not valid) and
/// recommends a UUID (36 characters); EC2 takes idempotency tokens of up to 64 ASCII characters.
/// capblock keeps within the stricter: at most 64 of `a-z`, `0-9` and `-`.
pub const MAX_CLIENT_TOKEN: usize = 64;

/// The client token of CreateResourceShare for attempt `attempt` at sharing a block: the same
/// for the same stack, block and attempt, so a run that dies after RAM made the share (before
/// capblock recorded its ARN) gets the same share back on its retry, whatever RAM's listing
/// shows then. A new attempt (after RAM could not use the last share, which capblock deleted)
/// gets a new token: the old one would answer the deleted share again. No clock in it.
pub fn share_client_token(stack: &str, reservation_id: &str, attempt: u32) -> String {
    // The stack as 8 hex digits of its SHA-256: two stacks sharing one block in one account
    // (a stack made again under another name) never send one token with other parameters
    // (IdempotentParameterMismatch), and a long stack name cannot make the token too long.
    let digest = Sha256::digest(stack.as_bytes());
    let stack: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // EC2's ids are `cr-` and 17 hex digits; anything else is cut to fit.
    let rid: String = reservation_id
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(32)
        .collect();
    format!("capblock-{stack}-{rid}-{attempt}")
}

/// The outbox record (in the block's thread) of the ARN CreateResourceShare returned for
/// attempt `attempt` of the share order `key`: written right after the call, before anything
/// else, so every later run reads the share by its ARN instead of looking for it in RAM's
/// listing (which may not show a new share yet).
pub fn share_arn_record(key: &OutboxKey, attempt: u32) -> OutboxKey {
    key.then(format!("{ARN_RECORD}{attempt}"))
}

/// The outbox record of an attempt whose share RAM could not use: written before capblock
/// deletes that share, so the next run makes its next attempt (a new token, a new share).
pub fn share_dropped_record(key: &OutboxKey, attempt: u32) -> OutboxKey {
    key.then(format!("{DROPPED_RECORD}{attempt}"))
}

/// The steps of a share order's records, after its key: `ram-arn-<n>` and `ram-dropped-<n>`.
const ARN_RECORD: &str = "ram-arn-";
const DROPPED_RECORD: &str = "ram-dropped-";

/// The prefix of every record of the share order `key`'s attempts.
pub fn share_records_prefix(key: &OutboxKey) -> String {
    key.prefix("ram-")
}

/// What capblock recorded of a block's attempts at sharing it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareAttempts {
    /// The attempt a share is made under now: one past the last one dropped (0 at first).
    pub attempt: u32,
    /// The current attempt's share, when CreateResourceShare's answer was recorded.
    pub arn: Option<String>,
    /// Every recorded share not dropped: the ones to delete at the block's end.
    pub kept: Vec<String>,
}

impl ShareAttempts {
    /// Reads the records of the share order `key` as `(milestone, body)` pairs; records of other
    /// orders are passed over.
    pub fn read<'a>(key: &OutboxKey, records: impl IntoIterator<Item = (&'a OutboxKey, &'a str)>) -> ShareAttempts {
        let mut arns: Vec<(u32, String)> = Vec::new();
        let mut dropped: Vec<u32> = Vec::new();
        let number = |s: &str| s.parse::<u32>().ok();
        for (milestone, body) in records {
            if let Some(n) = milestone.after(key, ARN_RECORD).and_then(number) {
                arns.push((n, body.to_string()));
            } else if let Some(n) = milestone.after(key, DROPPED_RECORD).and_then(number) {
                dropped.push(n);
            }
        }
        let attempt = dropped.iter().max().map_or(0, |n| n.saturating_add(1));
        let arn = arns.iter().find(|(n, _)| *n == attempt).map(|(_, a)| a.clone());
        arns.sort();
        let kept = arns.into_iter().filter(|(n, _)| !dropped.contains(n)).map(|(_, a)| a).collect();
        ShareAttempts { attempt, arn, kept }
    }
}

#[cfg(test)]
mod tests;

/// The member accounts that get a copy of each event of a rule's blocks on their default bus:
/// the accounts `share_with` names, and the `handoff_account`. An OU or the Organization is not
/// expanded (RAM answers them as principals, not accounts): name the accounts to give them the
/// events.
pub fn event_consumers(share_with: &[SharePrincipal], handoff_account: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let named = share_with.iter().filter_map(|p| match p {
        SharePrincipal::Account(a) => Some(a.as_str()),
        _ => None,
    });
    for a in named.chain(handoff_account) {
        if !out.iter().any(|o| o == a) {
            out.push(a.to_string());
        }
    }
    out
}
