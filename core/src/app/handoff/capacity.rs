//! The Auto Scaling order: a group's desired capacity, with a warning when the group cannot
//! launch in the block's zone.

use super::{ActionRunner, Tried};
use crate::domain::handoff::{self, Planned};
use crate::ports::ActionError;

impl ActionRunner<'_> {
    /// Sets the group's desired capacity; on a scale-up, checks (as advice) the zones it launches in.
    pub(super) async fn set_capacity(&self, p: &Planned, group: &str, desired: u32) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        self.groups.set_desired(&region, group, desired).await?;
        let what = format!("`{group}` desired capacity is {desired}.");
        if desired == 0 {
            return Ok(Tried::Done(what));
        }
        // Scaled up: a group that cannot launch in the block's zone is told in the thread.
        // The check is advice: its failure is logged, and the scale-up stands.
        match self.groups.zones(&region, group).await {
            Ok(Some(zones)) => match handoff::zone_warning(p, group, &zones) {
                Some(w) => Ok(Tried::Warned(what, Box::new(w))),
                None => Ok(Tried::Done(what)),
            },
            Ok(None) => Ok(Tried::Done(what)),
            Err(e) => {
                tracing::warn!(event = "group_zones_unread", reservation = %p.target.block.reservation_id, %group, error = %e, "the group's zones not checked");
                Ok(Tried::Done(what))
            }
        }
    }
}
