//! Reservations: those carrying a tag (settling a lost purchase answer), what EC2 shows of
//! a block now, one reservation by id, and the instances in a reservation.

use super::*;

#[async_trait]
impl ReservationSource for Ec2Market {
    async fn reservations_tagged(&self, region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> {
        tagged_reservations(&self.client(region), region, key, value).await
    }

    async fn observe(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError> {
        const OP: &str = "DescribeCapacityReservations";
        let mut out = Vec::new();
        for batch in ids.chunks(100) {
            let result = self
                .client(region)
                .describe_capacity_reservations()
                .set_capacity_reservation_ids(Some(batch.to_vec()))
                .send()
                .await;
            match result {
                Ok(page) => {
                    let found: HashMap<String, Observed> = page
                        .capacity_reservations()
                        .iter()
                        .filter_map(|raw| {
                            // One EC2 describes but capblock cannot read is not "not found": that
                            // would read a paid block as vanished (and free its fee).
                            let id = raw.capacity_reservation_id()?.to_string();
                            let observed = match reservation(region, raw) {
                                Ok(r) => Observed::Found {
                                    state: r.state,
                                    end: r.end,
                                    capacity_block_id: r.capacity_block_id,
                                    instance_count: r.instance_count,
                                    available: raw.available_instance_count().and_then(|n| u32::try_from(n).ok()),
                                },
                                Err(e) => Observed::Unreadable(e),
                            };
                            Some((id, observed))
                        })
                        .collect();
                    out.extend(
                        batch.iter().map(|id| (id.clone(), found.get(id).cloned().unwrap_or(Observed::NotFound))),
                    );
                }
                // One unknown id fails the whole call: ask one by one to find which.
                Err(e) if e.code() == Some("InvalidCapacityReservationId.NotFound") && batch.len() > 1 => {
                    for id in batch {
                        out.extend(self.observe(region, std::slice::from_ref(id)).await?);
                    }
                }
                Err(e) if e.code() == Some("InvalidCapacityReservationId.NotFound") => {
                    out.push((batch[0].clone(), Observed::NotFound));
                }
                Err(e) => return Err(classify(OP, region, e)),
            }
        }
        Ok(out)
    }

    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError> {
        // The user guide's CLI example filters by `reservation-type`: only the region's
        // Capacity Blocks come back, not every reservation of the account.
        let blocks = Filter::builder().name("reservation-type").values("capacity-block").build();
        let all = capacity_block_pages(&self.client(region), region, vec![blocks], OtherTypes::Skip).await?;
        for u in &all.unreadable {
            tracing::warn!(%region, reservation = ?u.id, error = %u.reason, "skipping a reservation EC2 described badly");
        }
        Ok(all.reservations)
    }
}

/// The reservations carrying `key` = `value`. By tag only: a reservation carrying the tag is
/// seen whatever EC2 says its type is, so one it cannot type, or types as no Capacity Block, is
/// held (unreadable, its reason named), never missed: a purchase is never invisible to
/// reconciliation.
async fn tagged_reservations(client: &Client, region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> {
    let by_tag = Filter::builder().name(format!("tag:{key}")).values(value).build();
    capacity_block_pages(client, region, vec![by_tag], OtherTypes::Unreadable).await
}

#[async_trait]
impl crate::ports::InstanceSource for Ec2Market {
    async fn instances_in(&self, region: &Region, reservation_id: &str) -> Result<Vec<String>, MarketError> {
        const OP: &str = "DescribeInstances";
        let mut pages = self
            .client(region)
            .describe_instances()
            .filters(Filter::builder().name("capacity-reservation-id").values(reservation_id).build())
            // Stopping or terminated instances hold no work to checkpoint.
            .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(OP, region, e))?;
            for r in page.reservations() {
                out.extend(r.instances().iter().filter_map(|i| i.instance_id().map(str::to_string)));
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn reservation_of(&self, region: &Region, instance_id: &str) -> Result<Option<String>, MarketError> {
        const OP: &str = "DescribeInstances";
        match self.client(region).describe_instances().instance_ids(instance_id).send().await {
            Ok(out) => Ok(out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter(|i| i.instance_id() == Some(instance_id))
                .find_map(|i| i.capacity_reservation_id().map(str::to_string))),
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Ok(None),
            Err(e) => Err(classify(OP, region, e)),
        }
    }
}

#[async_trait]
impl crate::ports::ReservationLookup for Ec2Market {
    async fn reservation(&self, region: &Region, id: &str) -> Result<Option<Reservation>, MarketError> {
        const OP: &str = "DescribeCapacityReservations";
        match self.client(region).describe_capacity_reservations().capacity_reservation_ids(id).send().await {
            Ok(out) => match out.capacity_reservations().iter().find(|r| r.capacity_reservation_id() == Some(id)) {
                None => Ok(None),
                Some(r) => reservation(region, r).map(Some).map_err(|message| MarketError::BadResponse {
                    operation: OP,
                    region: region.to_string(),
                    message,
                }),
            },
            // Expired long ago, or never in this region.
            Err(e) if e.code() == Some("InvalidCapacityReservationId.NotFound") => Ok(None),
            Err(e) => Err(classify(OP, region, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{CapacityReservationState, CapacityReservationType};

    use super::*;

    fn described(id: &str, kind: Option<CapacityReservationType>) -> CapacityReservation {
        let at = |s: i64| aws_smithy_types::DateTime::from_secs(s);
        CapacityReservation::builder()
            .capacity_reservation_id(id)
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-1a")
            .total_instance_count(1)
            .start_date(at(1_800_000_000))
            .end_date(at(1_800_086_400))
            .state(CapacityReservationState::Scheduled)
            .set_reservation_type(kind)
            .tags(Tag::builder().key("capblock:intent").value("r/cb-1").build())
            .build()
    }

    /// What a lookup makes of each reservation DescribeCapacityReservations returns.
    fn sorted(others: OtherTypes) -> Vec<(&'static str, Result<bool, String>)> {
        let east: Region = "us-east-1".parse().unwrap();
        [
            ("cr-block", Some(CapacityReservationType::CapacityBlock)),
            ("cr-default", Some(CapacityReservationType::Default)),
            ("cr-new", Some(CapacityReservationType::from("interruptible"))),
            ("cr-untyped", None),
        ]
        .into_iter()
        .map(|(id, kind)| (id, typed_reservation(&east, &described(id, kind), others).map(|r| r.is_some())))
        .collect()
    }

    /// A reservation carrying capblock's tag is never dropped for its type: one EC2 types as no
    /// Capacity Block (or does not type) is unreadable with its reason, so reconciliation holds
    /// the intent rather than read the purchase as absent.
    #[test]
    fn a_tagged_reservation_of_another_type_is_unreadable_not_dropped() {
        let read = sorted(OtherTypes::Unreadable);
        assert_eq!(read[0], ("cr-block", Ok(true)));
        let reason = |i: usize| read[i].1.clone().expect_err(read[i].0);
        assert_eq!(
            reason(1),
            "reservation cr-default carries capblock's tag but its ReservationType is default, not capacity-block"
        );
        assert!(reason(2).contains("ReservationType is interruptible"), "{}", reason(2));
        assert_eq!(reason(3), "reservation cr-untyped has no ReservationType");
    }

    /// The region's blocks (adopting those bought outside capblock) leave other types out; one
    /// EC2 does not type stays unreadable.
    #[test]
    fn the_regions_blocks_leave_other_types_out() {
        let read = sorted(OtherTypes::Skip);
        assert_eq!(read[..3], [("cr-block", Ok(true)), ("cr-default", Ok(false)), ("cr-new", Ok(false))]);
        assert!(read[3].1.is_err());
    }
}
