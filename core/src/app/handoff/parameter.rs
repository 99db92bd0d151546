//! The parameter orders: publish a block's parameter, and clear it at the block's end.

use super::{ActionRunner, Tried};
use crate::domain::handoff::Planned;
use crate::ports::ActionError;

impl ActionRunner<'_> {
    /// Sets the parameter to the block's value (set, not added to: a retry sets the same).
    pub(super) async fn publish_parameter(&self, p: &Planned, name: &str, value: &str) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        self.parameters.put_parameter(&region, name, value).await?;
        Ok(Tried::Done(format!("`{name}` = `{value}`")))
    }

    /// Deletes the parameter only while it still names this block: another block of the rule may
    /// have published since.
    pub(super) async fn clear_parameter(&self, p: &Planned, name: &str) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let current = self.parameters.parameter(&region, name).await?;
        let names_this_block =
            current.as_deref().and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok()).is_some_and(|v| {
                v.get("reservation_id").and_then(|r| r.as_str()) == Some(p.target.block.reservation_id.as_str())
            });
        if names_this_block {
            self.parameters.delete_parameter(&region, name).await?;
            Ok(Tried::Done(format!("`{name}` deleted.")))
        } else {
            // Another block of the rule published since (or it is gone): not ours to clear.
            Ok(Tried::Done(format!("`{name}` no longer names this block; left as it is.")))
        }
    }
}
