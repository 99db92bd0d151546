//! A block's kind from EC2: whether it is an UltraServer's (instances terminated 60 minutes
//! before the end, not 30). The reservation does not say; its `CapacityBlockId` leads to
//! DescribeCapacityBlocks, which names the UltraServer type.

use std::collections::HashSet;

use crate::domain::block::Reservation;
use crate::domain::names::Region;
use crate::domain::ultraserver::only_in_ultraservers;
use crate::ports::{BlockKinds, MarketError};

/// The ids (of `reservations`) that are UltraServer blocks, in one batched
/// DescribeCapacityBlocks for all of them. A reservation without a CapacityBlockId is an
/// UltraServer's only if its instance type is sold only inside UltraServers.
pub async fn ultraserver_reservations<M: BlockKinds + ?Sized>(
    market: &M,
    region: &Region,
    reservations: &[&Reservation],
) -> Result<HashSet<String>, MarketError> {
    let mut ids: Vec<String> = reservations.iter().filter_map(|r| r.capacity_block_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let ultra_blocks: HashSet<String> = if ids.is_empty() {
        HashSet::new()
    } else {
        market
            .capacity_blocks_by_id(region, &ids)
            .await?
            .into_iter()
            .filter(|b| b.ultraserver_type.is_some())
            .map(|b| b.capacity_block_id)
            .collect()
    };
    Ok(reservations
        .iter()
        .filter(|r| {
            r.capacity_block_id.as_ref().is_some_and(|b| ultra_blocks.contains(b))
                || only_in_ultraservers(r.instance_type.as_str()).is_some()
        })
        .map(|r| r.id.clone())
        .collect())
}
