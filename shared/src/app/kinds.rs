//! A block's kind from EC2: whether it is an UltraServer's (instances terminated 60 minutes
//! before the end, not 30). The reservation does not say; its `CapacityBlockId` leads to
//! DescribeCapacityBlocks, which names the UltraServer type.

use std::collections::{HashMap, HashSet};

use crate::domain::block::Reservation;
use crate::domain::names::Region;
use crate::domain::ultraserver::only_in_ultraservers;
use crate::ports::{BlockKinds, MarketError};

/// The ids (of `reservations`) that are UltraServer blocks, in one batched
/// DescribeCapacityBlocks for all of them: EC2's `UltraserverType` decides. A reservation EC2
/// describes no block for (no CapacityBlockId, or the block not in the answer) is an
/// UltraServer's only if its instance type is sold only inside UltraServers.
pub async fn ultraserver_reservations<M: BlockKinds + ?Sized>(
    market: &M,
    region: &Region,
    reservations: &[&Reservation],
) -> Result<HashSet<String>, MarketError> {
    let mut ids: Vec<String> = reservations.iter().filter_map(|r| r.capacity_block_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let described: HashMap<String, bool> = if ids.is_empty() {
        HashMap::new()
    } else {
        market
            .capacity_blocks_by_id(region, &ids)
            .await?
            .into_iter()
            .map(|b| (b.capacity_block_id, b.ultraserver_type.is_some()))
            .collect()
    };
    Ok(reservations
        .iter()
        .filter(|r| match r.capacity_block_id.as_ref().and_then(|b| described.get(b)) {
            Some(&ultra) => ultra,
            None => only_in_ultraservers(r.instance_type.as_str()).is_some(),
        })
        .map(|r| r.id.clone())
        .collect())
}
