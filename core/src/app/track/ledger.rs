//! The tracker's ledger check (`domain::ledger_check`), run in every region it reconciles:
//! a block the ledger has as final that EC2 holds is held again (its fee committed again, once),
//! and a rule EC2 shows holding more purchases than its `max_blocks_held` is told once. Each
//! finding logs `ledger_mismatch` (the stack's `ledger-mismatch` alarm) on every run it holds.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{Moved, TrackError, TrackReport, Tracker, TrackerMarket, TrackerStore, rebuys};
use crate::domain::announce;
use crate::domain::block::{Block, Reservation};
use crate::domain::ledger_check::held_per_rule;
use crate::domain::lifecycle::BlockState;
use crate::domain::rule::Rule;
use crate::domain::tags::RULE_TAG;
use crate::ports::{Notifier, Reminders, StoreError};

impl<M: TrackerMarket + ?Sized, S: TrackerStore + ?Sized, N: Notifier + ?Sized, R: Reminders + ?Sized>
    Tracker<'_, M, S, N, R>
{
    /// `b`, stored final, is listed by EC2 as `r` in held state `to`: its fee committed again
    /// (once: the intent's release mark decides), announced once, its reminders synced, and
    /// the block stored in EC2's state, back in the open blocks.
    pub(super) async fn hold_again(
        &self,
        b: &Block,
        r: &Reservation,
        to: BlockState,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<(), TrackError> {
        tracing::error!(event = "ledger_mismatch", reservation = %b.reservation_id, stored = %b.state, ec2 = %r.state,
            "EC2 holds a block the ledger has as final; tracked again, its fee committed again");
        report.ledger_mismatches.push(format!("{}#{}->{}", b.reservation_id, b.state, r.state));
        if let (Some(rule_id), Some(intent_id)) = (&b.rule_id, &b.intent_id) {
            match self.store.get_intent(rule_id, intent_id).await? {
                Some(intent) => {
                    if self.store.recommit_released_fee(b, &intent, rebuys(b, rules)).await? {
                        tracing::warn!(event = "budget_recommitted", reservation = %b.reservation_id, intent = %intent_id, fee = %intent.offering.fee,
                            "EC2 holds the block: its fee counts in the budgets again");
                        report.recommitted_budgets.push(b.reservation_id.clone());
                    }
                }
                None => tracing::error!(event = "intent_missing", reservation = %b.reservation_id, intent = %intent_id,
                    "cannot commit again the fee of a block EC2 holds"),
            }
        }
        let next = Block { state: to, end: r.end, ..b.clone() };
        let milestone = format!("held-again-{}", r.state);
        self.enqueue(&next, &milestone, &announce::held_again(&next, b.state.as_str(), &r.state), now).await?;
        if matches!(to, BlockState::Scheduled | BlockState::Active) {
            self.reminders.sync(&next, now).await?;
        }
        match self.store.update_block(&next, b.version).await {
            Ok(()) => {
                report.moved.push(Moved { reservation_id: b.reservation_id.clone(), from: b.state, to, end: r.end });
                Ok(())
            }
            // Another run held it again first: it did the same steps.
            Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Rules whose tagged reservations EC2 holds number more purchases than their
    /// `max_blocks_held`: logged every run, told once per (reservation, count).
    pub(super) async fn check_held_per_rule(
        &self,
        listed: &[Reservation],
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<(), StoreError> {
        for (rule_id, held) in held_per_rule(listed) {
            let Some(rule) = rules.get(&rule_id) else { continue };
            if held <= rule.max_blocks_held as usize {
                continue;
            }
            tracing::error!(event = "ledger_mismatch", rule = %rule_id, held, limit = rule.max_blocks_held,
                "EC2 holds more of this rule's purchases than its max_blocks_held");
            report.ledger_mismatches.push(format!("{rule_id}#held-{held}-of-{}", rule.max_blocks_held));
            // The newest of them carries the message, in its own thread.
            let Some(r) = listed.iter().filter(|r| r.tags.get(RULE_TAG) == Some(&rule_id)).max_by_key(|r| r.start)
            else {
                continue;
            };
            let b = match self.store.get_block(&r.id).await? {
                Some(b) => b,
                None => Block::adopted(r, true, now),
            };
            let msg = announce::over_limit_held(&b, &rule_id, held, rule.max_blocks_held);
            self.enqueue(&b, &format!("over-limit-{held}"), &msg, now).await?;
        }
        Ok(())
    }
}
