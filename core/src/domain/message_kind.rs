//! The kinds of message capblock tells a person about a purchase, the market or the month, each
//! with its two names held in one place: its outbox key (the start of the key a notice is sent
//! once under, and the suffix of the Slack message's id after the thread's `#`) and the
//! `event_type` the message carries. A writer names the kind, never the texts, so the key an
//! announcement is written under and the key the outbox dedups on cannot drift apart.
//!
//! A block's milestones (`domain::milestone`), the market's moves (`domain::market_note`) and
//! the extensions' notices name their own keys; this enum is the rest.

use std::fmt;

use super::outbox_key::{OutboxKey, OutboxKeyError};

/// One kind of message, listed in docs/notifications.md by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// capblock bought a block.
    Purchased,
    /// A dry-run rule found an offering it would buy.
    WouldBuy,
    /// An approval rule found an offering: a person says yes or no.
    ApprovalNeeded,
    /// EC2 refused a purchase; nothing was bought.
    PurchaseRejected,
    /// A purchase whose answer was lost and which EC2 does not list yet.
    OutcomeUnknown,
    /// EC2 lists a reservation with an open intent's tag that capblock cannot read.
    UnreadableReservation,
    /// EC2 refuses every search for a family: the account's quota for it looks like 0.
    QuotaZero,
    /// The same of a member account lending the watch its describe limit.
    MemberQuotaZero,
    /// A member account's watch role did not answer.
    WatchAccountFailed,
    /// A region does not sell an instance type as Capacity Blocks.
    NotSold,
    /// A rule names a team the stack has no budget for.
    TeamUnbudgeted,
    /// The monthly summary.
    MonthSummary,
    /// A person's request for capacity, first seen by the scan (`domain::request`).
    RequestFiled,
    /// A request approved, by an approver or within its team's automatic limit.
    RequestApproved,
    /// A request an approver rejected.
    RequestRejected,
    /// A request its requester cancelled.
    RequestCancelled,
    /// A request's block bought (its approval consumed by the purchase).
    RequestBought,
    /// A request whose window closed unbought.
    RequestExpired,
    /// A request item refused: malformed, forged, changed since its approval.
    RequestRefused,
}

impl MessageKind {
    /// Every kind, in the order docs/notifications.md lists them.
    pub const ALL: [MessageKind; 19] = [
        MessageKind::Purchased,
        MessageKind::WouldBuy,
        MessageKind::ApprovalNeeded,
        MessageKind::PurchaseRejected,
        MessageKind::OutcomeUnknown,
        MessageKind::UnreadableReservation,
        MessageKind::QuotaZero,
        MessageKind::MemberQuotaZero,
        MessageKind::WatchAccountFailed,
        MessageKind::NotSold,
        MessageKind::TeamUnbudgeted,
        MessageKind::MonthSummary,
        MessageKind::RequestFiled,
        MessageKind::RequestApproved,
        MessageKind::RequestRejected,
        MessageKind::RequestCancelled,
        MessageKind::RequestBought,
        MessageKind::RequestExpired,
        MessageKind::RequestRefused,
    ];

    /// The outbox key (or its start, before a `-<detail>`) and the message id's suffix. Stored:
    /// a key changed here would send a notice pending under the old one a second time.
    pub fn key(self) -> &'static str {
        match self {
            MessageKind::Purchased => "purchased",
            MessageKind::WouldBuy => "would-buy",
            MessageKind::ApprovalNeeded => "approval",
            MessageKind::PurchaseRejected => "rejected",
            MessageKind::OutcomeUnknown => "outcome-unknown",
            MessageKind::UnreadableReservation => "unreadable-reservation",
            MessageKind::QuotaZero => "quota-zero",
            MessageKind::MemberQuotaZero => "member-quota",
            MessageKind::WatchAccountFailed => "watch-failed",
            MessageKind::NotSold => "not-sold",
            MessageKind::TeamUnbudgeted => "team-unbudgeted",
            MessageKind::MonthSummary => "summary",
            MessageKind::RequestFiled => "request-filed",
            MessageKind::RequestApproved => "request-approved",
            MessageKind::RequestRejected => "request-rejected",
            MessageKind::RequestCancelled => "request-cancelled",
            MessageKind::RequestBought => "request-bought",
            MessageKind::RequestExpired => "request-expired",
            MessageKind::RequestRefused => "request-refused",
        }
    }

    /// The message's `event_type`, what Slack filters on.
    pub fn event_type(self) -> &'static str {
        match self {
            MessageKind::ApprovalNeeded => "approval-needed",
            MessageKind::PurchaseRejected => "purchase-rejected",
            MessageKind::MemberQuotaZero => "member-quota-zero",
            MessageKind::WatchAccountFailed => "watch-account-failed",
            MessageKind::MonthSummary => "month-summary",
            other => other.key(),
        }
    }

    /// The key, with `detail` after a `-` when the kind is told once per detail (a family, an
    /// account, a month).
    pub fn key_with(self, detail: Option<&str>) -> String {
        match detail {
            Some(d) => format!("{}-{d}", self.key()),
            None => self.key().to_string(),
        }
    }

    /// The outbox key a notice of this kind is sent once under.
    pub fn outbox_key(self, detail: Option<&str>) -> Result<OutboxKey, OutboxKeyError> {
        OutboxKey::notice(self.key_with(detail))
    }

    /// The Slack message's id: the thread, `#`, the key.
    pub fn message_id(self, thread: &str, detail: Option<&str>) -> String {
        format!("{thread}#{}", self.key_with(detail))
    }
}

impl fmt::Display for MessageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first cell of each row of docs/notifications.md's table of messages.
    fn documented_keys() -> Vec<String> {
        let doc = include_str!("../../../docs/notifications.md");
        let messages = doc.split("## Messages").nth(1).expect("a Messages section");
        let section = messages.split("\n## ").next().unwrap_or_default();
        section
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(" |").next())
            .map(|cell| cell.split_whitespace().next().unwrap_or_default().to_string())
            .collect()
    }

    /// Whether a documented key is `key`, or `key` told once per detail (`key-<detail>`).
    fn names(documented: &str, key: &str) -> bool {
        documented == key || documented.strip_prefix(key).is_some_and(|rest| rest.starts_with('-'))
    }

    #[test]
    fn the_notifications_page_names_every_kind() {
        let documented = documented_keys();
        let missing: Vec<&str> =
            MessageKind::ALL.iter().map(|k| k.key()).filter(|k| !documented.iter().any(|d| names(d, k))).collect();
        assert!(missing.is_empty(), "docs/notifications.md's Messages table does not name {missing:?}");
    }

    #[test]
    fn keys_and_event_types_are_each_one_kinds() {
        let mut keys: Vec<&str> = MessageKind::ALL.iter().map(|k| k.key()).collect();
        let mut events: Vec<&str> = MessageKind::ALL.iter().map(|k| k.event_type()).collect();
        keys.sort();
        keys.dedup();
        events.sort();
        events.dedup();
        assert_eq!((keys.len(), events.len()), (MessageKind::ALL.len(), MessageKind::ALL.len()));
        for k in MessageKind::ALL {
            assert!(k.outbox_key(Some("x")).is_ok(), "{k}: a notice key");
        }
    }
}
