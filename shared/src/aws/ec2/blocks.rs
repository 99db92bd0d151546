//! The block view: kinds (DescribeCapacityBlocks), health (DescribeCapacityBlockStatus) and
//! extension history, asked in batches of ids.

use super::*;

/// Ids per describe call: well inside EC2's MaxResults (1000) and a short query string.
const IDS_PER_CALL: usize = 100;
/// EC2's answer when a block id it does not know is asked for (the simulator's code, too).
const BLOCK_NOT_FOUND: &str = "InvalidCapacityBlockId.NotFound";
/// DescribeCapacityBlockStatus by id for a block that has no status (scheduled or over).
const NO_STATUS: &str = "IncorrectState";
/// The documented answer for the status of a block not active yet (the EC2 API reference's
/// error codes): one such id is left out, never the region's whole answer.
const PENDING_ACTIVATION: &str = "InvalidCapacityReservationState.PendingActivation";

/// Asks `ask` about `ids` in batches. A batch EC2 refuses because of one id (a code in
/// `per_id`: unknown, or without a status) is asked again one id at a time, and an id refused
/// alone is left out, so one odd block never hides the others.
async fn in_batches<T, F, Fut>(ids: &[String], per_id: &[&str], ask: F) -> Result<Vec<T>, MarketError>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, (Option<String>, MarketError)>>,
{
    let refused_for_one = |code: &Option<String>| code.as_deref().is_some_and(|c| per_id.contains(&c));
    let mut out = Vec::new();
    for batch in ids.chunks(IDS_PER_CALL) {
        match ask(batch.to_vec()).await {
            Ok(v) => out.extend(v),
            Err((code, _)) if refused_for_one(&code) && batch.len() > 1 => {
                for id in batch {
                    match ask(vec![id.clone()]).await {
                        Ok(v) => out.extend(v),
                        Err((code, _)) if refused_for_one(&code) => {}
                        Err((_, e)) => return Err(e),
                    }
                }
            }
            Err((code, _)) if refused_for_one(&code) => {}
            Err((_, e)) => return Err(e),
        }
    }
    Ok(out)
}

/// An SDK error with its code kept, for `in_batches`.
fn coded<E>(operation: &'static str, region: &Region, e: SdkError<E, HttpResponse>) -> (Option<String>, MarketError)
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    (e.code().map(str::to_string), classify(operation, region, e))
}

/// Every item of every page of a paginated describe call, its error kept with its code.
macro_rules! all_items {
    ($op:expr, $region:expr, $request:expr) => {
        $request
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| coded($op, $region, e))
    };
}

/// The block view of one region, read in three calls that answer lists of items.
#[async_trait]
impl BlockKinds for Ec2Market {
    async fn capacity_blocks_by_id(
        &self,
        region: &Region,
        ids: &[String],
    ) -> Result<Vec<CapacityBlockFacts>, MarketError> {
        const OP: &str = "DescribeCapacityBlocks";
        in_batches(ids, &[BLOCK_NOT_FOUND], |batch| async move {
            let blocks = all_items!(
                OP,
                region,
                self.client(region).describe_capacity_blocks().set_capacity_block_ids(Some(batch))
            )?;
            Ok(blocks
                .iter()
                .filter_map(|b| {
                    Some(CapacityBlockFacts {
                        capacity_block_id: b.capacity_block_id()?.to_string(),
                        ultraserver_type: b.ultraserver_type().filter(|t| !t.is_empty()).map(str::to_string),
                        state: b.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                        reservation_ids: b.capacity_reservation_ids().to_vec(),
                        tags: tag_map(b.tags()),
                    })
                })
                .collect())
        })
        .await
    }
}

#[async_trait]
impl BlockStatusSource for Ec2Market {
    async fn block_status(&self, region: &Region, ids: &[String]) -> Result<Vec<CapacityStatus>, MarketError> {
        const OP: &str = "DescribeCapacityBlockStatus";
        // A block without a status (it moved since the store said active) fails the whole call.
        in_batches(ids, &[NO_STATUS, PENDING_ACTIVATION, BLOCK_NOT_FOUND], |batch| async move {
            let statuses = all_items!(
                OP,
                region,
                self.client(region).describe_capacity_block_status().set_capacity_block_ids(Some(batch))
            )?;
            let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            Ok(statuses
                .iter()
                .filter_map(|s| {
                    Some(CapacityStatus {
                        capacity_block_id: s.capacity_block_id()?.to_string(),
                        // No status at all is "nothing measured", not a problem.
                        interconnect: s
                            .interconnect_status()
                            .map_or(Interconnect::InsufficientData, |i| Interconnect::from_ec2(i.as_str())),
                        block: StatusCounts {
                            total: count(s.total_capacity()),
                            available: count(s.total_available_capacity()),
                            unavailable: count(s.total_unavailable_capacity()),
                        },
                        reservations: s
                            .capacity_reservation_statuses()
                            .iter()
                            .filter_map(|r| {
                                let counts = StatusCounts {
                                    total: count(r.total_capacity()),
                                    available: count(r.total_available_capacity()),
                                    unavailable: count(r.total_unavailable_capacity()),
                                };
                                Some((r.capacity_reservation_id()?.to_string(), counts))
                            })
                            .collect(),
                    })
                })
                .collect())
        })
        .await
    }

    async fn reservation_usage(&self, region: &Region, id: &str) -> Result<ReservationUsage, MarketError> {
        const OP: &str = "GetCapacityReservationUsage";
        let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        let mut usage: Option<ReservationUsage> = None;
        let mut token: Option<String> = None;
        // The SDK has no paginator for this call: follow NextToken, keeping the first page's
        // counts and every page's accounts.
        loop {
            let page = self
                .client(region)
                .get_capacity_reservation_usage()
                .capacity_reservation_id(id)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| classify(OP, region, e))?;
            // An account listed without its count is unreadable, not 0: taken as 0, its
            // instances would read as failed capacity.
            let accounts = page
                .instance_usages()
                .iter()
                .map(|u| match (u.account_id(), u.used_instance_count().and_then(|n| u32::try_from(n).ok())) {
                    (Some(a), Some(n)) => Ok((a.to_string(), n)),
                    _ => Err(MarketError::BadResponse {
                        operation: OP,
                        region: region.to_string(),
                        message: format!("an InstanceUsage of {id} without its account or count"),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            match usage.as_mut() {
                Some(u) => u.accounts.extend(accounts),
                None => {
                    usage = Some(ReservationUsage {
                        reservation_id: page.capacity_reservation_id().unwrap_or(id).to_string(),
                        total: count(page.total_instance_count()),
                        available: count(page.available_instance_count()),
                        state: page.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                        accounts,
                    })
                }
            }
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => break,
            }
        }
        usage.ok_or_else(|| MarketError::BadResponse {
            operation: OP,
            region: region.to_string(),
            message: "no answer".into(),
        })
    }
}

#[async_trait]
impl ExtensionHistory for Ec2Market {
    async fn extension_history(&self, region: &Region, ids: &[String]) -> Result<Vec<ExtensionRecord>, MarketError> {
        const OP: &str = "DescribeCapacityBlockExtensionHistory";
        in_batches(ids, &["InvalidCapacityReservationId.NotFound"], |batch| async move {
            let history = all_items!(
                OP,
                region,
                self.client(region)
                    .describe_capacity_block_extension_history()
                    .set_capacity_reservation_ids(Some(batch))
            )?;
            Ok(history
                .iter()
                .filter_map(|x| {
                    Some(ExtensionRecord {
                        reservation_id: x.capacity_reservation_id()?.to_string(),
                        offering_id: x.capacity_block_extension_offering_id()?.to_string(),
                        status: x.capacity_block_extension_status()?.as_str().to_string(),
                        end: x.capacity_block_extension_end_date().and_then(to_chrono),
                    })
                })
                .collect())
        })
        .await
    }
}
