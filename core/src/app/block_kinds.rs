//! A block's kind from EC2: whether it is an UltraServer's (instances terminated 60 minutes
//! before the end, not 30). The reservation does not say; its `CapacityBlockId` leads to
//! DescribeCapacityBlocks, which names the UltraServer type.

use std::collections::{HashMap, HashSet};

use crate::domain::block::{Block, Reservation};
use crate::domain::ids::Region;
use crate::domain::lifecycle::Observed;
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
    let described = described(market, region, reservations.iter().filter_map(|r| r.capacity_block_id.clone())).await?;
    Ok(reservations
        .iter()
        .filter(|r| match r.capacity_block_id.as_ref().and_then(|b| described.get(b)) {
            Some(&ultra) => ultra,
            None => only_in_ultraservers(r.instance_type.as_str()).is_some(),
        })
        .map(|r| r.id.clone())
        .collect())
}

/// Block id -> whether DescribeCapacityBlocks names an UltraServer type for it, in one batched
/// call for all of `ids`.
async fn described<M: BlockKinds + ?Sized>(
    market: &M,
    region: &Region,
    ids: impl Iterator<Item = String>,
) -> Result<HashMap<String, bool>, MarketError> {
    let mut ids: Vec<String> = ids.collect();
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(market
        .capacity_blocks_by_id(region, &ids)
        .await?
        .into_iter()
        .map(|b| (b.capacity_block_id, b.ultraserver_type.is_some()))
        .collect())
}

/// Blocks stored before capblock kept their CapacityBlockId, as they should be now: the id EC2
/// reported this run and the kind DescribeCapacityBlocks gives it (an UltraServer adopted back
/// then was taken as instances). Only blocks that change are returned.
pub async fn backfill<M: BlockKinds + ?Sized>(
    market: &M,
    region: &Region,
    blocks: &[Block],
    observed: &HashMap<String, Observed>,
) -> Result<Vec<Block>, MarketError> {
    let found = |b: &Block| match observed.get(&b.reservation_id) {
        Some(Observed::Found { capacity_block_id: Some(id), .. }) if b.capacity_block_id.is_none() => Some(id.clone()),
        _ => None,
    };
    let missing: Vec<(&Block, String)> = blocks.iter().filter_map(|b| Some((b, found(b)?))).collect();
    let kinds = described(market, region, missing.iter().map(|(_, id)| id.clone())).await?;
    Ok(missing
        .into_iter()
        .map(|(b, id)| {
            let ultra = kinds.get(&id).copied().unwrap_or(false);
            Block { capacity_block_id: Some(id), ..b.clone() }.with_kind(ultra)
        })
        .collect())
}
