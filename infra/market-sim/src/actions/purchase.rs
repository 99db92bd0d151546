//! PurchaseCapacityBlock. Like the real API it has no ClientToken: every successful call buys.

use rust_decimal::{Decimal, RoundingStrategy};

use super::blocks::write_block;
use super::reservations::write_reservation;
use super::{Ctx, Output, authorize, dry_run, require_supported};
use crate::market;
use crate::reservations::{Payment, Reservation};
use crate::rng::stable_id;
use crate::scenario::OfferingIds;
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

/// The documented codes (EC2 API error list; no dot in these).
pub const OFFERING_NOT_FOUND: &str = "InvalidCapacityBlockOfferingIdNotFound";
pub const OFFERING_EXPIRED: &str = "InvalidCapacityBlockOfferingIdExpired";
pub const OFFERING_MALFORMED: &str = "InvalidCapacityBlockOfferingIdMalformed";

/// The shape of EC2's ids: `cb-` and 8 or 17 hex digits.
fn well_formed(id: &str) -> bool {
    id.strip_prefix("cb-").is_some_and(|hex| matches!(hex.len(), 8 | 17) && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The offering a purchase names, if it may be bought now. An id an answer showed another
/// account as its own (`offering_ids_across_accounts = "per_account"`) is not found. An id an
/// answer minted (`offering_ids = "per_answer"`) stands for its offering while younger than
/// `offering_id_ttl_secs`, then is expired; a stable id is purchasable only under "stable".
/// Either way the offering must still be on offer, at the current price step (otherwise
/// NotFound, as always).
fn offering_named(w: &World, ctx: &Ctx<'_>, id: &str) -> Result<market::Offering, ApiError> {
    if !well_formed(id) {
        return Err(ApiError::client(
            OFFERING_MALFORMED,
            format!("The Capacity Block offering ID '{id}' is malformed."),
        ));
    }
    let not_found = || {
        ApiError::client(
            OFFERING_NOT_FOUND,
            format!("The Capacity Block offering ID '{id}' cannot be found for this account."),
        )
    };
    // An id shown to another account as its own ("per_account"): that account's, not found for
    // this one (the simulated account, who makes every purchase), whatever the setting is now.
    if let Some(account) = w.shown_to_other_account(id) {
        tracing::info!(offering = id, account, "an offering id shown to another account is not found for this one");
        return Err(not_found());
    }
    let stable = match w.minted(id) {
        Some(m) if m.region != ctx.region => return Err(not_found()),
        Some(m) => {
            let ttl = i64::try_from(w.behaviour.offering_id_ttl_secs).unwrap_or(i64::MAX);
            if ctx.now.signed_duration_since(m.at).num_milliseconds() >= ttl.saturating_mul(1000) {
                return Err(ApiError::client(
                    OFFERING_EXPIRED,
                    format!("The Capacity Block offering ID '{id}' is no longer available."),
                ));
            }
            m.offering_id.as_str()
        }
        None if w.behaviour.offering_ids == OfferingIds::PerAnswer => return Err(not_found()),
        None => id,
    };
    market::find_offering(&w.scenario, ctx.region, stable, ctx.now, w.behaviour.same_day_offerings)
        .ok_or_else(not_found)
}

/// Tags from TagSpecification.N, which must target `capacity-reservation`.
pub fn tags_for_reservation(p: &Params) -> Result<Vec<(String, String)>, ApiError> {
    tags_for(p, "capacity-reservation")
}

/// Tags from TagSpecification.N, which must target `resource_type`.
pub fn tags_for(p: &Params, resource_type: &str) -> Result<Vec<(String, String)>, ApiError> {
    let mut tags = Vec::new();
    for spec in p.tag_specs() {
        match spec.resource_type.as_deref() {
            Some(t) if t == resource_type => {}
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
    authorize(w, ctx)?;
    let offering_id = p.require("CapacityBlockOfferingId")?.to_string();
    let platform = p.require("InstancePlatform")?.to_string();
    if !PLATFORMS.contains(&platform.as_str()) {
        return Err(ApiError::invalid_value(format!("Value ({platform}) for parameter InstancePlatform is invalid.")));
    }
    let tags = tags_for_reservation(p)?;
    let offering = offering_named(w, ctx, &offering_id)?;
    dry_run(p)?;

    let bought = reservations_of(w, ctx, &offering, &offering_id, &platform, &tags);
    for res in &bought {
        tracing::info!(reservation = %res.id, offering = %offering.id, fee = %res.upfront_fee, "capacity block purchased");
    }

    let mut x = Xml::new();
    x.open("capacityReservation");
    write_reservation(&mut x, &bought[0], w, ctx.now);
    x.close("capacityReservation");
    x.set("capacityBlockSet", &bought, |x, r| write_block(x, r, w, ctx.now));
    // Every reservation in full (the API model's `CapacityReservations`, since 2026-11-17): one
    // per segment of a segmented offering, one per UltraServer, else the one.
    x.set("capacityReservationSet", &bought, |x, r| write_reservation(x, r, w, ctx.now));
    w.reservations.extend(bought);

    let drop_response = w.behaviour.drop_purchase_response;
    if drop_response {
        w.faults.dropped_purchase_responses += 1;
    }
    Ok(Output { body: x.into_string(), drop_response })
}

/// The reservations a purchase makes, each tagged with the purchase's tags. One capacity block
/// (and reservation) per purchase, except UltraServers: EC2 documents that "for Trn2u
/// instances, a capacity block ID refers to an EC2 UltraServer", so a purchase of N
/// UltraServers makes N blocks, each one reservation of one UltraServer's instances (the
/// harsher reading: a client must read every block of the answer), the fee split evenly, the
/// cents left over to the first. A segmented offering makes one per segment ("a separate
/// Capacity Reservation is created for each segment", the API model), each with its segment's
/// zone, type, count and fee.
fn reservations_of(
    w: &mut World,
    ctx: &Ctx<'_>,
    offering: &market::Offering,
    offering_id: &str,
    platform: &str,
    tags: &[(String, String)],
) -> Vec<Reservation> {
    let parts: Vec<(String, String, u32, Decimal)> = if offering.segments.is_empty() {
        let (n, each) = match &offering.ultraserver {
            Some(u) => (u.count, u.instances_each),
            None => (1, offering.instance_count),
        };
        let share = (offering.upfront_fee / Decimal::from(n)).round_dp_with_strategy(2, RoundingStrategy::ToZero);
        (0..n)
            .map(|part| {
                let mut fee = if part == 0 { offering.upfront_fee - share * Decimal::from(n - 1) } else { share };
                fee.rescale(2);
                (offering.availability_zone.clone(), offering.instance_type.clone(), each, fee)
            })
            .collect()
    } else {
        offering
            .segments
            .iter()
            .map(|s| (s.availability_zone.clone(), s.instance_type.clone(), s.instance_count, s.upfront_fee))
            .collect()
    };
    parts
        .into_iter()
        .map(|(availability_zone, instance_type, instance_count, upfront_fee)| {
            let id = w.new_id("cr-");
            Reservation {
                capacity_block_id: block_id(&id),
                id,
                region: ctx.region.to_string(),
                availability_zone,
                instance_type,
                instance_platform: platform.to_string(),
                instance_count,
                start: offering.start,
                original_end: offering.end,
                created: ctx.now,
                tags: tags.to_vec(),
                upfront_fee,
                currency: offering.currency.clone(),
                // The id the buyer named (a minted one under "per_answer").
                offering_id: Some(offering_id.to_string()),
                payment: Payment {
                    outcome: offering.payment.unwrap_or(w.behaviour.payment),
                    delay_hours: w.behaviour.payment_delay(),
                    explicit: false,
                },
                injected: false,
                state_override: None,
                omitted: Vec::new(),
                ultraserver_type: offering.ultraserver.as_ref().map(|u| u.ultraserver_type.clone()),
                health_steps: offering.health.clone(),
                health_override: None,
                usage_steps: offering.usage.clone(),
                usage_override: None,
                consumers: Default::default(),
                stopping: vec![],
            }
        })
        .collect()
}

/// The block id of a reservation (distinct from the `cb-` offering id it was bought from).
pub fn block_id(reservation_id: &str) -> String {
    stable_id("cb-", &format!("block|{reservation_id}"))
}
