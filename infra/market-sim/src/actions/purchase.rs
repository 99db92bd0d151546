//! PurchaseCapacityBlock. Like the real API it has no ClientToken: every successful call buys.

use super::reservations::write_reservation;
use super::{Ctx, Output, dry_run, require_supported};
use crate::market;
use crate::reservations::{Payment, Reservation};
use crate::rng::stable_id;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

/// CapacityReservationInstancePlatform values from the EC2 model.
pub const PLATFORMS: &[&str] = &[
    "Linux/UNIX",
    "Red Hat Enterprise Linux",
    "SUSE Linux",
    "Windows",
    "Windows with SQL Server",
    "Windows with SQL Server Enterprise",
    "Windows with SQL Server Standard",
    "Windows with SQL Server Web",
    "Linux with SQL Server Standard",
    "Linux with SQL Server Web",
    "Linux with SQL Server Enterprise",
    "RHEL with SQL Server Standard",
    "RHEL with SQL Server Enterprise",
    "RHEL with SQL Server Web",
    "RHEL with HA",
    "RHEL with HA and SQL Server Standard",
    "RHEL with HA and SQL Server Enterprise",
    "Ubuntu Pro",
];

pub const OFFERING_NOT_FOUND: &str = "InvalidCapacityBlockOfferingId.NotFound";

/// Tags from TagSpecification.N, which must target `capacity-reservation`.
pub fn tags_for_reservation(p: &Params) -> Result<Vec<(String, String)>, ApiError> {
    let mut tags = Vec::new();
    for spec in p.tag_specs() {
        match spec.resource_type.as_deref() {
            Some("capacity-reservation") => {}
            Some(other) => {
                return Err(ApiError::invalid_value(format!(
                    "'{other}' is not a valid taggable resource type for this operation."
                )));
            }
            None => return Err(ApiError::missing("TagSpecification.N.ResourceType")),
        }
        for (k, v) in spec.tags {
            if k.is_empty() || k.len() > 128 || v.len() > 256 {
                return Err(ApiError::client(
                    "InvalidParameterValue",
                    format!("Tag key/value too long or empty: '{k}'"),
                ));
            }
            if k.to_ascii_lowercase().starts_with("aws:") {
                return Err(ApiError::client(
                    "InvalidParameterValue",
                    "Tag keys starting with 'aws:' are reserved for internal use",
                ));
            }
            tags.retain(|(existing, _): &(String, String)| *existing != k);
            tags.push((k, v));
        }
    }
    if tags.len() > 50 {
        return Err(ApiError::client("TagLimitExceeded", "A resource can have at most 50 tags."));
    }
    Ok(tags)
}

pub fn purchase(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<Output, ApiError> {
    require_supported(w, ctx)?;
    let offering_id = p.require("CapacityBlockOfferingId")?.to_string();
    let platform = p.require("InstancePlatform")?.to_string();
    if !PLATFORMS.contains(&platform.as_str()) {
        return Err(ApiError::invalid_value(format!("Value ({platform}) for parameter InstancePlatform is invalid.")));
    }
    let tags = tags_for_reservation(p)?;
    // The offering must be on offer right now, at the current price step.
    let offering =
        market::find_offering(&w.scenario, ctx.region, &offering_id, ctx.now, w.behaviour.same_day_offerings)
            .ok_or_else(|| {
                ApiError::client(
                    OFFERING_NOT_FOUND,
                    format!("The Capacity Block offering ID '{offering_id}' does not exist or is no longer available."),
                )
            })?;
    dry_run(p)?;

    let id = w.new_id("cr-");
    let res = Reservation {
        id,
        region: ctx.region.to_string(),
        availability_zone: offering.availability_zone.clone(),
        instance_type: offering.instance_type.clone(),
        instance_platform: platform,
        instance_count: offering.instance_count,
        start: offering.start,
        original_end: offering.end,
        created: ctx.now,
        tags,
        upfront_fee: offering.upfront_fee,
        currency: offering.currency.clone(),
        offering_id: Some(offering.id.clone()),
        payment: Payment {
            outcome: offering.payment.unwrap_or(w.behaviour.payment),
            delay_hours: w.behaviour.payment_delay_hours,
            explicit: false,
        },
        injected: false,
        state_override: None,
    };
    tracing::info!(reservation = %res.id, offering = %offering.id, fee = %res.upfront_fee, "capacity block purchased");

    let mut x = Xml::new();
    x.open("capacityReservation");
    write_reservation(&mut x, &res, w, ctx.now);
    x.close("capacityReservation");
    let state = res.state(ctx.now, &w.extensions);
    x.set("capacityBlockSet", std::slice::from_ref(&res), |x, r| {
        x.leaf("capacityBlockId", block_id(&r.id))
            .leaf("availabilityZone", &r.availability_zone)
            // A list of plain strings: the value goes directly inside <item>.
            .set("capacityReservationIdSet", std::slice::from_ref(&r.id), |x, id| {
                x.text(id);
            })
            .time("startDate", r.start)
            .time("endDate", r.original_end)
            .time("createDate", r.created)
            .leaf("state", &state)
            .tags("tagSet", &r.tags);
    });
    w.reservations.push(res);

    let drop_response = w.behaviour.drop_purchase_response;
    if drop_response {
        w.faults.dropped_purchase_responses += 1;
    }
    Ok(Output { body: x.into_string(), drop_response })
}

/// The block id of a reservation (distinct from the `cb-` offering id it was bought from).
pub fn block_id(reservation_id: &str) -> String {
    stable_id("cb-", &format!("block|{reservation_id}"))
}
