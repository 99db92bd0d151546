//! PurchaseCapacityBlock: sent once, with SDK retries off (it has no idempotency token).

use super::ahead_of_sdk::{self, AheadOfSdk};
use super::*;

#[async_trait]
impl Purchaser for Ec2Market {
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError> {
        const OP: &str = "PurchaseCapacityBlock";
        let region = &req.offering.region;
        let tags = TagSpecification::builder()
            .resource_type(ResourceType::CapacityReservation)
            .set_tags(Some(req.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()))
            .build();
        // No ClientToken exists for this call: a retry could buy a second block. One attempt;
        // an unknown outcome is settled by reconciliation (tag lookup), never by resending.
        // The raw answer is kept for its reservation list, which the SDK does not read yet.
        let ahead = AheadOfSdk::default();
        let result = self
            .once(region)
            .purchase_capacity_block()
            .capacity_block_offering_id(&req.offering.id)
            .instance_platform(CapacityReservationInstancePlatform::from(req.instance_platform.as_str()))
            .tag_specifications(tags)
            .dry_run(req.dry_run)
            .customize()
            .interceptor(ahead.clone())
            .send()
            .await;
        match result {
            Ok(out) => {
                let r = out.capacity_reservation().ok_or_else(|| MarketError::Unknown {
                    operation: OP,
                    region: region.to_string(),
                    message: "EC2 answered without a CapacityReservation".into(),
                })?;
                // Every reservation the answer names: the first in full, the others (one per
                // UltraServer, one per segment) by id in its CapacityBlocks and in its
                // CapacityReservations (read ahead of the SDK), each once.
                let listed = ahead.body().map(|b| ahead_of_sdk::reservation_ids(&b)).unwrap_or_default();
                let mut more: Vec<String> = Vec::new();
                for id in out.capacity_blocks().iter().flat_map(|b| b.capacity_reservation_ids()).chain(&listed) {
                    if Some(id.as_str()) != r.capacity_reservation_id() && !more.contains(id) {
                        more.push(id.clone());
                    }
                }
                reservation(region, r)
                    .map(|reservation| PurchaseOutcome::Bought(Box::new(Purchase { reservation, more })))
                    // It was bought; we just cannot read it: reconciliation will find it by tag.
                    .map_err(|message| MarketError::Unknown { operation: OP, region: region.to_string(), message })
            }
            Err(e) if req.dry_run && e.code() == Some("DryRunOperation") => Ok(PurchaseOutcome::WouldSucceed),
            Err(e) => Err(classify(OP, region, e)),
        }
    }
}
