//! GetCapacityReservationUsage: a reservation's counts and the instances each account has in
//! it, the owner's and those of every account that uses the block through a RAM share
//! (README, "Instances running in a block"). DescribeInstances shows only the owner's.

use super::reservations::{shown_counts, visible};
use super::{Ctx, authorize, dry_run};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

pub fn get(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
    let id = p.require("CapacityReservationId")?.to_string();
    // The API model's range for MaxResults: 1 to 1000.
    let size = page_size(p, 1, 1000)?;
    dry_run(p)?;
    let now = ctx.now;
    let w: &World = w;
    let r = visible(w, ctx.region, &id, now)?;
    let state = r.state(now, &w.extensions);
    let (total, available) = shown_counts(r, &state, &w.behaviour, now);
    let accounts = r.usage_by_account(&w.scenario.account_id, &state, w.behaviour.stopping_in_usage, now);
    let (page, next) = paginate(&accounts, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    let mut x = Xml::new();
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    x.leaf("capacityReservationId", &r.id)
        .leaf("instanceType", &r.instance_type)
        .num("totalInstanceCount", total)
        .num("availableInstanceCount", available)
        .leaf("state", &state)
        .set("instanceUsageSet", &page, |x, (account, used)| {
            x.leaf("accountId", account).num("usedInstanceCount", *used);
        });
    Ok(x.into_string())
}
