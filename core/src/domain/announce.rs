//! What capblock tells people about purchases. Pure functions from domain facts to messages, one
//! file per family of messages; what several families share (the time style, a tracked block's
//! lines and message shape) is here.

use chrono::{DateTime, Utc};

use super::block::Block;
use super::message_kind::MessageKind;
use super::slack::SlackMessage;
// The tests' names beside the messages' own: what the messages are built from.
#[cfg(test)]
use super::{budget::Intent, decision::Priced, money::Money, rule::Mode};

mod budgets;
mod extension;
mod idle;
mod market;
mod moments;
mod payment;
mod purchase;
mod requests;
mod states;

pub use budgets::{month_summary, team_unbudgeted};
pub use extension::{
    end_moved_back, extended, extension_decided, extension_overdue, extension_recommitted, extension_released,
};
pub use idle::{idle, idle_over};
pub use market::{member_account_failed, member_quota_zero, not_sold, quota_zero};
pub use moments::checkpoint;
pub use payment::{
    fee_kept, fee_kept_unshown, held_again, over_limit_held, payment_failed, payment_succeeded, payment_warning,
};
pub use purchase::{approval_needed, outcome_unknown, purchase_rejected, purchased, unreadable_reservation, would_buy};
pub use requests::request_step;
pub use states::{active, anomaly, duplicate_purchase, ec2_state, expired, health, released, scheduled, tracking};

/// An instant as every message prints it.
fn when(t: DateTime<Utc>) -> String {
    t.format("%a %Y-%m-%d %H:%M UTC").to_string()
}

/// A tracked block in one message's lines: what, where, its reservation and its times.
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

/// A message in a tracked block's thread, keyed and tagged by its kind.
fn tracked(
    b: &Block,
    kind: MessageKind,
    title: String,
    description: String,
    next_steps: Vec<String>,
    summary: String,
) -> SlackMessage {
    SlackMessage {
        id: kind.message_id(&b.reservation_id, None),
        title,
        description,
        next_steps,
        keywords: vec!["capblock".into(), kind.event_type().into(), b.region.to_string(), b.instance_type.to_string()],
        thread_id: b.reservation_id.clone(),
        summary,
        event_type: kind.event_type().into(),
        related_resources: b.arn.iter().cloned().collect(),
    }
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
            extension_overdue(&b, "cbe-1", fee, "no word"),
            extension_recommitted(&b, "cbe-1", fee, "payment-succeeded"),
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
