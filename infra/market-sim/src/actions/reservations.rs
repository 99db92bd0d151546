//! DescribeCapacityReservations and the CapacityReservation XML shape (shared with purchase).

use chrono::{DateTime, Utc};

use super::filters::{check_names, matches_all};
use super::{Ctx, dry_run};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::reservations::Reservation;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

pub const RESERVATION_NOT_FOUND: &str = "InvalidCapacityReservationId.NotFound";
pub const RESERVATION_MALFORMED: &str = "InvalidCapacityReservationId.Malformed";

const FILTERS: &[&str] = &[
    "tag:",
    "tag-key",
    "state",
    "instance-type",
    "availability-zone",
    "instance-platform",
    "tenancy",
    "owner-id",
    "end-date-type",
    "instance-match-criteria",
];

pub fn arn(region: &str, account: &str, id: &str) -> String {
    format!("arn:aws:ec2:{region}:{account}:capacity-reservation/{id}")
}

/// The members of CapacityReservation, in model order.
pub fn write_reservation(x: &mut Xml, r: &Reservation, w: &World, now: DateTime<Utc>) {
    let state = r.state(now, &w.extensions);
    let account = &w.scenario.account_id;
    x.leaf("capacityReservationId", &r.id)
        .leaf("ownerId", account)
        .leaf("capacityReservationArn", arn(&r.region, account, &r.id))
        .leaf("instanceType", &r.instance_type)
        .leaf("instancePlatform", &r.instance_platform)
        .leaf("availabilityZone", &r.availability_zone)
        .leaf("tenancy", "default")
        .num("totalInstanceCount", r.instance_count)
        .num("availableInstanceCount", r.available_instance_count(&state, now))
        .leaf("ebsOptimized", "true")
        .leaf("ephemeralStorage", "false")
        .leaf("state", &state)
        .time("startDate", r.start)
        .time("endDate", r.end(now, &w.extensions))
        .leaf("endDateType", "limited")
        .leaf("instanceMatchCriteria", "targeted")
        .time("createDate", r.created)
        .tags("tagSet", &r.tags)
        .leaf("reservationType", "capacity-block")
        .leaf("capacityBlockId", &r.capacity_block_id);
}

/// A reservation that DescribeCapacityReservations still knows in this region.
pub fn visible<'w>(w: &'w World, region: &str, id: &str, now: DateTime<Utc>) -> Result<&'w Reservation, ApiError> {
    if !id.starts_with("cr-") {
        return Err(ApiError::client(RESERVATION_MALFORMED, format!("Invalid id: \"{id}\"")));
    }
    w.reservation(id)
        .filter(|r| r.region == region && r.visible(now, &w.extensions, w.scenario.expired_visible_days))
        .ok_or_else(|| {
            ApiError::client(RESERVATION_NOT_FOUND, format!("The capacity reservation ID '{id}' does not exist"))
        })
}

pub fn describe(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    let ids = p.list("CapacityReservationId");
    let filters = p.filters();
    check_names(&filters, FILTERS)?;
    let size = page_size(p, 1, 1000)?;
    dry_run(p)?;
    for id in &ids {
        visible(w, ctx.region, id, ctx.now)?;
    }
    let now = ctx.now;
    let mut items: Vec<&Reservation> = w
        .reservations
        .iter()
        .filter(|r| r.region == ctx.region && r.visible(now, &w.extensions, w.scenario.expired_visible_days))
        .filter(|r| ids.is_empty() || ids.contains(&r.id))
        .filter(|r| {
            let state = r.state(now, &w.extensions);
            matches_all(&filters, &r.tags, |name| {
                Some(match name {
                    "state" => state.clone(),
                    "instance-type" => r.instance_type.clone(),
                    "availability-zone" => r.availability_zone.clone(),
                    "instance-platform" => r.instance_platform.clone(),
                    "tenancy" => "default".into(),
                    "owner-id" => w.scenario.account_id.clone(),
                    "end-date-type" => "limited".into(),
                    "instance-match-criteria" => "targeted".into(),
                    _ => return None,
                })
            })
        })
        .collect();
    items.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;

    let mut x = Xml::new();
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    x.set("capacityReservationSet", &page, |x, r| write_reservation(x, r, w, now));
    Ok(x.into_string())
}
