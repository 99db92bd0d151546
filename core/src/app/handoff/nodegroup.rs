//! The EKS node group orders: scaled up for the block (what it was recorded first), and put
//! back at the end as far as nobody changed it since.

use chrono::{DateTime, Utc};

use super::{ActionRunner, Tried, record};
use crate::domain::handoff::{self, NodegroupScaled, Planned, nodegroup_record};
use crate::ports::{ActionError, Outbox};

impl ActionRunner<'_> {
    /// Scales the node group up for the block, recording its scaling before it changes.
    pub(super) async fn scale_nodegroup<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        (cluster, nodegroup): (&str, &str),
        (desired, min, max): (u32, Option<u32>, Option<u32>),
        now: DateTime<Utc>,
    ) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let scaled = match self.nodegroup_scaled(outbox, p, cluster, nodegroup).await? {
            Some(recorded) => recorded,
            None => {
                let before =
                    self.nodegroups.scaling(&region, cluster, nodegroup).await?.ok_or_else(|| ActionError {
                        operation: "DescribeNodegroup",
                        region: region.to_string(),
                        message: format!("no node group {nodegroup:?} in EKS cluster {cluster:?}"),
                    })?;
                let set = handoff::scaled_up(before, desired, min, max).map_err(|message| ActionError {
                    operation: "UpdateNodegroupConfig",
                    region: region.to_string(),
                    message,
                })?;
                // Recorded before it changes: a retry after a lost answer, and the end,
                // find what it was before capblock touched it.
                let record_key = nodegroup_record(cluster, nodegroup);
                let scaled = NodegroupScaled { before, set };
                let thread = &p.target.block.reservation_id;
                let new = outbox.put_record(&record(thread, record_key, &scaled, now)).await.map_err(|e| {
                    ActionError { operation: "the table", region: region.to_string(), message: e.to_string() }
                })?;
                if new {
                    scaled
                } else {
                    // Another run recorded it first: its record is what it was.
                    self.nodegroup_scaled(outbox, p, cluster, nodegroup).await?.unwrap_or(scaled)
                }
            }
        };
        let update = self.nodegroups.set_scaling(&region, cluster, nodegroup, &scaled.set).await?;
        Ok(Tried::Done(format!(
            "Node group `{nodegroup}` of cluster `{cluster}`: {} (was {}); EKS update {update}.",
            scaled.set, scaled.before
        )))
    }

    /// Puts back what capblock changed when it scaled the node group up, field by field.
    pub(super) async fn restore_nodegroup<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        cluster: &str,
        nodegroup: &str,
    ) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let Some(recorded) = self.nodegroup_scaled(outbox, p, cluster, nodegroup).await? else {
            return Ok(Tried::Done(format!("capblock did not scale `{nodegroup}` up for this block: left as it is.")));
        };
        let Some(current) = self.nodegroups.scaling(&region, cluster, nodegroup).await? else {
            return Ok(Tried::Done(format!(
                "No node group `{nodegroup}` in cluster `{cluster}` any more: nothing to put back."
            )));
        };
        let back = handoff::restored(&recorded, current);
        if back.to == current {
            // Put back already (an extension's second end), or by an overlapping block.
            return Ok(Tried::Done(format!(
                "Node group `{nodegroup}` of cluster `{cluster}` is at {current} already: nothing to put back."
            )));
        }
        let kept: Vec<String> =
            back.kept.iter().map(|(name, set, now)| format!("{name} is {now} (capblock set {set})")).collect();
        let kept = if kept.is_empty() {
            String::new()
        } else {
            format!(" Changed since capblock scaled it up, so left as it is: {}.", kept.join(", "))
        };
        let update = self.nodegroups.set_scaling(&region, cluster, nodegroup, &back.to).await?;
        Ok(Tried::Done(format!(
            "Node group `{nodegroup}` of cluster `{cluster}`: {} (was {current}); EKS update {update}.{kept}",
            back.to
        )))
    }

    /// What capblock recorded when it scaled the node group up for this block, if it did.
    pub(super) async fn nodegroup_scaled<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        cluster: &str,
        nodegroup: &str,
    ) -> Result<Option<NodegroupScaled>, ActionError> {
        let fail = |message: String| ActionError {
            operation: "the table",
            region: p.target.block.region.to_string(),
            message,
        };
        let key = nodegroup_record(cluster, nodegroup);
        let records = outbox.records(&p.target.block.reservation_id, &key).await.map_err(|e| fail(e.to_string()))?;
        // The prefix may match another node group's record: only this one's milestone counts.
        match records.into_iter().find(|r| r.milestone == key) {
            None => Ok(None),
            Some(r) => serde_json::from_str(&r.message.body).map(Some).map_err(|e| fail(format!("{key}: {e}"))),
        }
    }
}
