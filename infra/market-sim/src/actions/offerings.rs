//! DescribeCapacityBlockOfferings.

use super::{Ctx, dry_run, positive_u32, require_supported};
use crate::market::{self, Offering, OfferingQuery};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

pub fn describe(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    require_supported(w, ctx)?;
    let hours = p.int("CapacityDurationHours")?.ok_or_else(|| ApiError::missing("CapacityDurationHours"))?;
    let duration_days = market::duration_days_from_hours(hours, "CapacityDurationHours")?;
    let instance_count = positive_u32(p, "InstanceCount", 64)?;
    let start_range = p.timestamp("StartDateRange")?;
    let end_range = p.timestamp("EndDateRange")?;
    if let (Some(s), Some(e)) = (start_range, end_range)
        && e <= s
    {
        return Err(ApiError::invalid_value("EndDateRange must be later than StartDateRange."));
    }
    let size = page_size(p, 1, 1000)?;
    p.bool("AllAvailabilityZones")?;
    dry_run(p)?;

    let q = OfferingQuery {
        region: ctx.region.to_string(),
        duration_days,
        instance_type: p.get("InstanceType").filter(|s| !s.is_empty()).map(str::to_string),
        instance_count,
        start_range,
        end_range,
    };
    let all = market::offerings(&w.scenario, &q, ctx.now);
    let (page, next) = paginate(&all, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;

    let mut x = Xml::new();
    x.set("capacityBlockOfferingSet", &page, write_offering);
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

fn write_offering(x: &mut Xml, o: &Offering) {
    x.leaf("capacityBlockOfferingId", &o.id)
        .leaf("instanceType", &o.instance_type)
        .leaf("availabilityZone", &o.availability_zone)
        .num("instanceCount", o.instance_count)
        .time("startDate", o.start)
        .time("endDate", o.end)
        .num("capacityBlockDurationHours", o.duration_hours)
        .leaf("upfrontFee", o.upfront_fee.to_string())
        .leaf("currencyCode", &o.currency)
        .leaf("tenancy", "default")
        .num("capacityBlockDurationMinutes", 0);
}
