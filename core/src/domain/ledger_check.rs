//! The ledger checked against EC2 on every tracker run: what a capacity block EC2 lists means
//! for the block capblock stored for it, and which rules EC2 shows holding more purchases than
//! they allow. EC2 is the source of truth for what it holds; the ledger follows it.
//!
//! - A stored block in a final state (payment-failed, released, expired) that EC2 lists in a
//!   held state (payment-pending, scheduled, active) is held again: tracked again, its fee
//!   committed again if it was released, announced, alarmed. A block is final only while EC2
//!   agrees: a payment EC2 reported failed and then took after all is still money spent.
//! - A held reservation the store does not know is adoption's (`app::track`): tagged, it is
//!   tracked (uncharged when it is a second purchase, which is alarmed); untagged, it is nobody's
//!   unless the stack adopts untagged blocks.
//! - A rule whose tagged reservations EC2 holds number more purchases than its
//!   `max_blocks_held` is a mismatch a person looks at (a limit lowered after buying, or a
//!   purchase the ledger did not stop).

use std::collections::{BTreeMap, BTreeSet};

use super::block::{Block, Reservation};
use super::lifecycle::BlockState;
use super::tags::{INTENT_TAG, RULE_TAG};

/// What one listed reservation says of the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerVerdict {
    /// The ledger and EC2 agree, or EC2 lists it in no held state.
    Agrees,
    /// EC2 holds a block the ledger has as final: move it back to `to`, its fee committed again.
    HeldAgain { to: BlockState },
    /// EC2 holds a block the store does not know.
    Unknown,
}

/// What `r`, as EC2 lists it, says of `stored`, the block the store has for its id.
pub fn check(stored: Option<&Block>, r: &Reservation) -> LedgerVerdict {
    let Some(held) = BlockState::from_ec2(&r.state).filter(|s| s.is_held()) else {
        return LedgerVerdict::Agrees;
    };
    match stored {
        None => LedgerVerdict::Unknown,
        Some(b) if b.state.is_final() => LedgerVerdict::HeldAgain { to: held },
        Some(_) => LedgerVerdict::Agrees,
    }
}

/// The purchases EC2 holds per rule, by the reservations' rule tag: counted as a rule's
/// `max_blocks_held` counts them (`block::purchases_held`): once per purchase intent (N
/// UltraServers of one purchase are one), a reservation without an intent tag alone.
pub fn held_per_rule<'a>(listed: impl IntoIterator<Item = &'a Reservation>) -> BTreeMap<String, usize> {
    let mut intents: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut alone: BTreeMap<String, usize> = BTreeMap::new();
    for r in listed {
        if !BlockState::from_ec2(&r.state).is_some_and(BlockState::is_held) {
            continue;
        }
        let Some(rule) = r.tags.get(RULE_TAG) else { continue };
        match r.tags.get(INTENT_TAG) {
            Some(intent) => {
                intents.entry(rule.clone()).or_default().insert(intent);
            }
            None => *alone.entry(rule.clone()).or_default() += 1,
        }
    }
    let mut held: BTreeMap<String, usize> = alone;
    for (rule, ids) in intents {
        *held.entry(rule).or_default() += ids.len();
    }
    held
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn listed(id: &str, state: &str, tags: &[(&str, &str)]) -> Reservation {
        let t = Utc.with_ymd_and_hms(2026, 12, 10, 11, 30, 0).unwrap();
        Reservation {
            id: id.into(),
            arn: None,
            region: "us-east-1".parse().unwrap(),
            availability_zone: "us-east-1a".into(),
            instance_type: "p5.48xlarge".parse().unwrap(),
            instance_count: 1,
            start: t,
            end: t + chrono::Duration::days(1),
            state: state.into(),
            reservation_type: Some("capacity-block".into()),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            capacity_block_id: None,
        }
    }

    #[test]
    fn a_final_block_ec2_holds_is_held_again_and_nothing_else_is() {
        let r = listed("cr-1", "scheduled", &[]);
        let stored = |state| Block { state, ..Block::adopted(&r, true, r.start) };
        for final_state in [BlockState::PaymentFailed, BlockState::Released, BlockState::Expired] {
            assert_eq!(check(Some(&stored(final_state)), &r), LedgerVerdict::HeldAgain { to: BlockState::Scheduled });
        }
        for held in [BlockState::PaymentPending, BlockState::Scheduled, BlockState::Active] {
            assert_eq!(check(Some(&stored(held)), &r), LedgerVerdict::Agrees);
        }
        assert_eq!(check(None, &r), LedgerVerdict::Unknown);
        let failed = listed("cr-1", "payment-failed", &[]);
        assert_eq!(check(Some(&stored(BlockState::PaymentFailed)), &failed), LedgerVerdict::Agrees);
        assert_eq!(check(None, &failed), LedgerVerdict::Agrees, "EC2 holds nothing");
        let unknown_state = listed("cr-1", "assessing", &[]);
        assert_eq!(check(Some(&stored(BlockState::Released)), &unknown_state), LedgerVerdict::Agrees);
    }

    #[test]
    fn held_purchases_count_once_per_intent_per_rule() {
        let rs = [
            listed("cr-1", "active", &[(RULE_TAG, "a"), (INTENT_TAG, "a/cb-1")]),
            listed("cr-2", "active", &[(RULE_TAG, "a"), (INTENT_TAG, "a/cb-1")]),
            listed("cr-3", "payment-pending", &[(RULE_TAG, "a"), (INTENT_TAG, "a/cb-2")]),
            listed("cr-4", "scheduled", &[(RULE_TAG, "a")]),
            listed("cr-5", "payment-failed", &[(RULE_TAG, "a"), (INTENT_TAG, "a/cb-3")]),
            listed("cr-6", "expired", &[(RULE_TAG, "b"), (INTENT_TAG, "b/cb-4")]),
            listed("cr-7", "active", &[]),
        ];
        let held = held_per_rule(&rs);
        assert_eq!(held, BTreeMap::from([("a".to_string(), 3)]));
    }
}
