//! The reservation group orders: the block's reservation put in the rule's capacity
//! reservation group (created when missing), and taken out at the end.

use super::{ActionRunner, Tried, reservation_arn};
use crate::domain::handoff::{Planned, ReservationPool};
use crate::domain::tags::STACK_TAG;
use crate::ports::{ActionError, Membership};

impl ActionRunner<'_> {
    /// Puts the block's reservation in the group, creating the group when missing.
    pub(super) async fn group_reservation(&self, p: &Planned, group: &str) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let arn = reservation_arn(p, "GroupResources")?;
        let tags = [(STACK_TAG, p.target.stack.as_str())];
        let pool = ReservationPool::of(&p.target.block);
        let created = self.reservation_groups.ensure_group(&region, group, &pool, &tags).await?;
        let change = self.reservation_groups.add(&region, group, &arn).await?;
        let made = if created { format!("Created the group `{group}`. ") } else { String::new() };
        let pending = if change == Membership::Pending { " (AWS Resource Groups finishes it)" } else { "" };
        Ok(Tried::Done(format!(
            "{made}`{group}` holds `{}`{pending}: launches that target the group land in the block.",
            p.target.block.reservation_id
        )))
    }

    /// Takes the block's reservation out of the group (a group gone is nothing to do).
    pub(super) async fn ungroup_reservation(&self, p: &Planned, group: &str) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let arn = reservation_arn(p, "UngroupResources")?;
        Ok(Tried::Done(match self.reservation_groups.remove(&region, group, &arn).await? {
            Membership::NoGroup => format!("The group `{group}` is gone: nothing to take out."),
            Membership::Pending => {
                format!("`{group}` lets go of `{}` (AWS Resource Groups finishes it).", p.target.block.reservation_id)
            }
            Membership::Changed => {
                format!("`{group}` no longer holds `{}`.", p.target.block.reservation_id)
            }
        }))
    }
}
