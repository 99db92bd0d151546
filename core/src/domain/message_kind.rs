//! The kinds of message capblock tells a person about a purchase, the market or the month, each
//! with its two names held in one place: its outbox key (the start of the key a notice is sent
//! once under, and the suffix of the Slack message's id after the thread's `#`) and the
//! `event_type` the message carries. A writer names the kind, never the texts, so the key an
//! announcement is written under and the key the outbox dedups on cannot drift apart.
//!
//! A tracked block's messages (payment, states, extensions, idle time) are sent in its thread
//! under its reservation id, a hand-off action's under the action's key (`action-<what>`); the
//! market's moves in a rule's thread. A reminder's `event_type` (and workloads' `kind`) adds its
//! lead (`reminder-30m`).

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
    /// EC2 took a tracked block's payment.
    PaymentSucceeded,
    /// A tracked block's payment is still pending near its deadline (once per warning point).
    PaymentWarning,
    /// EC2 failed a tracked block's payment.
    PaymentFailed,
    /// A failed part's purchase keeps its fee (once per part, or `unshown-part`).
    FeeKept,
    /// EC2 holds a block the ledger had as final, or more blocks than a rule allows.
    LedgerMismatch,
    /// A block capblock sees scheduled without having watched its payment.
    Scheduled,
    /// The block is active (the tracker and on-capacity-event share the key).
    Delivered,
    /// The block ended.
    Expired,
    /// EC2 cancelled or failed the block.
    Released,
    /// EC2 reports something capblock cannot place.
    Anomaly,
    /// EC2 reports a state off a block's path.
    Ec2State,
    /// An active block's health changed.
    Health,
    /// Part of an active block is paid and idle, or runs again.
    Idle,
    /// A reservation capblock did not record is now tracked.
    Tracking,
    /// A reservation carries the tag of a purchase it is not part of.
    DuplicatePurchase,
    /// An extension was paid: the block ends later.
    Extended,
    /// EC2 reports an earlier end than capblock had.
    EndMovedBack,
    /// capblock bought an extension (payment pending).
    ExtensionBought,
    /// A dry-run or approval rule would have extended the block.
    WouldExtend,
    /// An extension was refused or never paid.
    ExtensionReleased,
    /// An extension is past its payment deadline without EC2's word.
    ExtensionOverdue,
    /// An extension capblock had released is held by EC2 after all.
    ExtensionRecommitted,
    /// A hand-off action ran (or, in dry-run, would have).
    ActionDone,
    /// A hand-off action failed and is retried.
    ActionFailed,
    /// A hand-off action failed past the block's end and is dropped.
    ActionGivenUp,
    /// A hand-off action's group launches outside the block.
    ActionWarning,
    /// A hand-off command ran on some instances and failed on others.
    ActionResult,
    /// capblock's reminder before the termination time (its `event_type` gains `-<N>m`).
    Reminder,
    /// EC2's own expiration warning.
    AwsExpirationWarning,
    /// EC2's interruption warning of one instance.
    Interruption,
    /// The price level of a rule's market stepped and held.
    MarketStep,
    /// No offering at a rule's threshold for its `drought_days`.
    Drought,
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
    pub const ALL: [MessageKind; 51] = [
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
        MessageKind::PaymentSucceeded,
        MessageKind::PaymentWarning,
        MessageKind::PaymentFailed,
        MessageKind::FeeKept,
        MessageKind::LedgerMismatch,
        MessageKind::Scheduled,
        MessageKind::Delivered,
        MessageKind::Expired,
        MessageKind::Released,
        MessageKind::Anomaly,
        MessageKind::Ec2State,
        MessageKind::Health,
        MessageKind::Idle,
        MessageKind::Tracking,
        MessageKind::DuplicatePurchase,
        MessageKind::Extended,
        MessageKind::EndMovedBack,
        MessageKind::ExtensionBought,
        MessageKind::WouldExtend,
        MessageKind::ExtensionReleased,
        MessageKind::ExtensionOverdue,
        MessageKind::ExtensionRecommitted,
        MessageKind::ActionDone,
        MessageKind::ActionFailed,
        MessageKind::ActionGivenUp,
        MessageKind::ActionWarning,
        MessageKind::ActionResult,
        MessageKind::Reminder,
        MessageKind::AwsExpirationWarning,
        MessageKind::Interruption,
        MessageKind::MarketStep,
        MessageKind::Drought,
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
            MessageKind::PaymentSucceeded => "payment-succeeded",
            MessageKind::PaymentWarning => "payment-warning",
            MessageKind::PaymentFailed => "payment-failed",
            MessageKind::FeeKept => "fee-kept",
            MessageKind::LedgerMismatch => "ledger-mismatch",
            MessageKind::Scheduled => "scheduled",
            MessageKind::Delivered => "delivered",
            MessageKind::Expired => "expired",
            MessageKind::Released => "released",
            MessageKind::Anomaly => "anomaly",
            MessageKind::Ec2State => "ec2-state",
            MessageKind::Health => "health",
            MessageKind::Idle => "idle",
            MessageKind::Tracking => "tracking",
            MessageKind::DuplicatePurchase => "duplicate-purchase",
            MessageKind::Extended => "extended",
            MessageKind::EndMovedBack => "end-moved-back",
            MessageKind::ExtensionBought => "extension-bought",
            MessageKind::WouldExtend => "would-extend",
            MessageKind::ExtensionReleased => "extension-released",
            MessageKind::ExtensionOverdue => "extension-overdue",
            MessageKind::ExtensionRecommitted => "extension-recommitted",
            MessageKind::ActionDone => "done",
            MessageKind::ActionFailed => "failed",
            MessageKind::ActionGivenUp => "given-up",
            MessageKind::ActionWarning => "warning",
            MessageKind::ActionResult => "result",
            MessageKind::Reminder => "reminder",
            MessageKind::AwsExpirationWarning => "aws-expiration-warning",
            MessageKind::Interruption => "interruption",
            MessageKind::MarketStep => "market-step",
            MessageKind::Drought => "drought",
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
            MessageKind::ActionDone => "action-done",
            MessageKind::ActionFailed => "action-failed",
            MessageKind::ActionGivenUp => "action-given-up",
            MessageKind::ActionWarning => "action-warning",
            MessageKind::ActionResult => "action-result",
            MessageKind::Interruption => "instance-interruption",
            MessageKind::MarketStep => "market-stepped",
            other => other.key(),
        }
    }

    /// Whether the kind is told about a hand-off action: its key follows the action's.
    fn after_detail(self) -> bool {
        matches!(
            self,
            MessageKind::ActionDone
                | MessageKind::ActionFailed
                | MessageKind::ActionGivenUp
                | MessageKind::ActionWarning
                | MessageKind::ActionResult
        )
    }

    /// The key, with `detail` after a `-` when the kind is told once per detail (a family, an
    /// account, a month), or, for a hand-off action's kinds, after the action's key (`detail`).
    pub fn key_with(self, detail: Option<&str>) -> String {
        match detail {
            Some(d) if self.after_detail() => format!("{d}-{}", self.key()),
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

    /// docs/notifications.md's Messages section.
    fn messages_section() -> &'static str {
        let doc = include_str!("../../../docs/notifications.md");
        let messages = doc.split("## Messages").nth(1).expect("a Messages section");
        messages.split("\n## ").next().unwrap_or_default()
    }

    /// The first word of the first cell of each row of the Messages table: a key, or its pattern.
    fn documented_keys() -> Vec<&'static str> {
        messages_section()
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(" |").next())
            .map(|cell| cell.split_whitespace().next().unwrap_or_default())
            .collect()
    }

    /// Whether the table names `kind`: a row's key is its key, or its key told once per detail
    /// (`key-<detail>`), or a row says the kind's `event_type` (kinds told under another key).
    fn names(documented: &[&str], kind: MessageKind) -> bool {
        let key = kind.key();
        documented.iter().any(|d| *d == key || d.strip_prefix(key).is_some_and(|rest| rest.starts_with('-')))
            || messages_section().contains(&format!("`event_type` `{}`", kind.event_type()))
    }

    #[test]
    fn the_notifications_page_names_every_kind() {
        let documented = documented_keys();
        let missing: Vec<&str> =
            MessageKind::ALL.into_iter().filter(|&k| !names(&documented, k)).map(MessageKind::key).collect();
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
    /// Each kind's key and `event_type` as stored items and subscribers know them: a key changed
    /// sends a pending notice twice, an `event_type` changed breaks a subscriber's filter.
    #[test]
    fn each_kinds_strings_are_pinned() {
        let pinned = [
            (MessageKind::Purchased, "purchased", "purchased"),
            (MessageKind::WouldBuy, "would-buy", "would-buy"),
            (MessageKind::ApprovalNeeded, "approval", "approval-needed"),
            (MessageKind::PurchaseRejected, "rejected", "purchase-rejected"),
            (MessageKind::OutcomeUnknown, "outcome-unknown", "outcome-unknown"),
            (MessageKind::UnreadableReservation, "unreadable-reservation", "unreadable-reservation"),
            (MessageKind::QuotaZero, "quota-zero", "quota-zero"),
            (MessageKind::MemberQuotaZero, "member-quota", "member-quota-zero"),
            (MessageKind::WatchAccountFailed, "watch-failed", "watch-account-failed"),
            (MessageKind::NotSold, "not-sold", "not-sold"),
            (MessageKind::TeamUnbudgeted, "team-unbudgeted", "team-unbudgeted"),
            (MessageKind::MonthSummary, "summary", "month-summary"),
            (MessageKind::PaymentSucceeded, "payment-succeeded", "payment-succeeded"),
            (MessageKind::PaymentWarning, "payment-warning", "payment-warning"),
            (MessageKind::PaymentFailed, "payment-failed", "payment-failed"),
            (MessageKind::FeeKept, "fee-kept", "fee-kept"),
            (MessageKind::LedgerMismatch, "ledger-mismatch", "ledger-mismatch"),
            (MessageKind::Scheduled, "scheduled", "scheduled"),
            (MessageKind::Delivered, "delivered", "delivered"),
            (MessageKind::Expired, "expired", "expired"),
            (MessageKind::Released, "released", "released"),
            (MessageKind::Anomaly, "anomaly", "anomaly"),
            (MessageKind::Ec2State, "ec2-state", "ec2-state"),
            (MessageKind::Health, "health", "health"),
            (MessageKind::Idle, "idle", "idle"),
            (MessageKind::Tracking, "tracking", "tracking"),
            (MessageKind::DuplicatePurchase, "duplicate-purchase", "duplicate-purchase"),
            (MessageKind::Extended, "extended", "extended"),
            (MessageKind::EndMovedBack, "end-moved-back", "end-moved-back"),
            (MessageKind::ExtensionBought, "extension-bought", "extension-bought"),
            (MessageKind::WouldExtend, "would-extend", "would-extend"),
            (MessageKind::ExtensionReleased, "extension-released", "extension-released"),
            (MessageKind::ExtensionOverdue, "extension-overdue", "extension-overdue"),
            (MessageKind::ExtensionRecommitted, "extension-recommitted", "extension-recommitted"),
            (MessageKind::ActionDone, "done", "action-done"),
            (MessageKind::ActionFailed, "failed", "action-failed"),
            (MessageKind::ActionGivenUp, "given-up", "action-given-up"),
            (MessageKind::ActionWarning, "warning", "action-warning"),
            (MessageKind::ActionResult, "result", "action-result"),
            (MessageKind::Reminder, "reminder", "reminder"),
            (MessageKind::AwsExpirationWarning, "aws-expiration-warning", "aws-expiration-warning"),
            (MessageKind::Interruption, "interruption", "instance-interruption"),
            (MessageKind::MarketStep, "market-step", "market-stepped"),
            (MessageKind::Drought, "drought", "drought"),
            (MessageKind::RequestFiled, "request-filed", "request-filed"),
            (MessageKind::RequestApproved, "request-approved", "request-approved"),
            (MessageKind::RequestRejected, "request-rejected", "request-rejected"),
            (MessageKind::RequestCancelled, "request-cancelled", "request-cancelled"),
            (MessageKind::RequestBought, "request-bought", "request-bought"),
            (MessageKind::RequestExpired, "request-expired", "request-expired"),
            (MessageKind::RequestRefused, "request-refused", "request-refused"),
        ];
        assert_eq!(pinned.len(), MessageKind::ALL.len(), "every kind is pinned");
        for (kind, key, event_type) in pinned {
            assert_eq!((kind.key(), kind.event_type()), (key, event_type), "{kind:?}");
        }
        assert_eq!(MessageKind::Idle.message_id("cr-1", None), "cr-1#idle");
        assert_eq!(MessageKind::QuotaZero.message_id("market-us-east-1", Some("p5")), "market-us-east-1#quota-zero-p5");
        assert_eq!(
            MessageKind::ActionDone.message_id("cr-1", Some("action-scale-up-trainers")),
            "cr-1#action-scale-up-trainers-done"
        );
        assert_eq!(
            MessageKind::ExtensionBought.outbox_key(Some("cbe-1")).unwrap().to_string(),
            "extension-bought-cbe-1"
        );
    }
}
