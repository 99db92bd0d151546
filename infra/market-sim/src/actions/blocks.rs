//! The block-level view: DescribeCapacityBlocks, DescribeCapacityBlockStatus and
//! DescribeCapacityBlockExtensionHistory (the CapacityBlock XML shape is shared with purchase).

use chrono::{DateTime, Utc};

use super::filters::{check_names, matches_all};
use super::reservations::visible;
use super::{Ctx, dry_run};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::reservations::{Extension, Reservation};
use crate::scenario::UnavailableMeans;
use crate::wire::error::ApiError;
use crate::wire::query::Filter;
use crate::wire::query::Params;
use crate::wire::xml::{Xml, timestamp};
use crate::world::World;

/// Not in EC2's public error list; the code other emulators use for the same case.
pub const BLOCK_NOT_FOUND: &str = "InvalidCapacityBlockId.NotFound";
/// DescribeCapacityBlockStatus for a block not active yet (EC2 API error list).
pub const PENDING_ACTIVATION: &str = "InvalidCapacityReservationState.PendingActivation";
/// ...and for one that has no status any more (the simulator's choice, undocumented).
pub const NO_STATUS: &str = "IncorrectState";

const BLOCK_FILTERS: &[&str] = &[
    "capacity-block-id",
    "ultraserver-type",
    "availability-zone",
    "start-date",
    "end-date",
    "create-date",
    "state",
    "tag:",
    "tag-key",
];
const STATUS_FILTERS: &[&str] = &["interconnect-status"];
const HISTORY_FILTERS: &[&str] = &[
    "availability-zone",
    "availability-zone-id",
    "capacity-block-extension-offering-id",
    "capacity-block-extension-status",
    "capacity-reservation-id",
    "instance-type",
];

/// The availability zone id of a zone name (`use1-az1` for `us-east-1a`): stable, made up.
fn zone_id(az: &str) -> String {
    let letter = az.chars().last().map_or(1, |c| (c as u32).saturating_sub('a' as u32) + 1);
    let region: String = az.split('-').filter_map(|p| p.chars().next()).collect();
    format!("{region}-az{letter}")
}

/// The members of CapacityBlock, in model order. A block is one reservation here (see purchase).
pub fn write_block(x: &mut Xml, r: &Reservation, w: &World, now: DateTime<Utc>) {
    x.leaf("capacityBlockId", &r.capacity_block_id);
    if let Some(u) = &r.ultraserver_type {
        x.leaf("ultraserverType", u);
    }
    x.leaf("availabilityZone", &r.availability_zone)
        .leaf("availabilityZoneId", zone_id(&r.availability_zone))
        // A list of plain strings: the value goes directly inside <item>.
        .set("capacityReservationIdSet", std::slice::from_ref(&r.id), |x, id| {
            x.text(id);
        })
        .time("startDate", r.start)
        .time("endDate", r.end(now, &w.extensions))
        .time("createDate", r.created)
        .leaf("state", r.block_state(now, &w.extensions))
        .tags("tagSet", &r.tags);
}

/// The reservations of the region whose blocks are still visible, in creation order.
fn blocks<'w>(w: &'w World, region: &str, now: DateTime<Utc>) -> Vec<&'w Reservation> {
    let mut v: Vec<&Reservation> = w.reservations.iter().filter(|r| r.region == region && w.shows(r, now)).collect();
    v.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    v
}

fn block_by_id<'w>(all: &[&'w Reservation], id: &str) -> Result<&'w Reservation, ApiError> {
    all.iter()
        .find(|r| r.capacity_block_id == id)
        .copied()
        .ok_or_else(|| ApiError::client(BLOCK_NOT_FOUND, format!("The Capacity Block ID '{id}' does not exist")))
}

/// What both block calls read first: the ids asked for, the filters (each name one of
/// `allowed`), the page size (1-1000), DryRun, and the region's blocks.
struct BlockQuery<'w> {
    ids: Vec<String>,
    filters: Vec<Filter>,
    size: usize,
    all: Vec<&'w Reservation>,
}

fn block_query<'w>(w: &'w World, ctx: &Ctx<'_>, p: &Params, allowed: &[&str]) -> Result<BlockQuery<'w>, ApiError> {
    let filters = p.filters();
    check_names(&filters, allowed)?;
    let size = page_size(p, 1, 1000)?;
    dry_run(p)?;
    Ok(BlockQuery { ids: p.list("CapacityBlockId"), filters, size, all: blocks(w, ctx.region, ctx.now) })
}

pub fn describe_blocks(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    let now = ctx.now;
    let BlockQuery { ids, filters, size, all } = block_query(w, ctx, p, BLOCK_FILTERS)?;
    for id in &ids {
        block_by_id(&all, id)?;
    }
    let items: Vec<&Reservation> = all
        .into_iter()
        .filter(|r| ids.is_empty() || ids.contains(&r.capacity_block_id))
        .filter(|r| {
            matches_all(&filters, &r.tags, |name| {
                Some(match name {
                    "capacity-block-id" => r.capacity_block_id.clone(),
                    // The documented values are the kind, not the UltraServer type.
                    "ultraserver-type" => {
                        if r.ultraserver_type.is_some() { "ultraservers" } else { "instances" }.into()
                    }
                    "availability-zone" => r.availability_zone.clone(),
                    "start-date" => timestamp(r.start),
                    "end-date" => timestamp(r.end(now, &w.extensions)),
                    "create-date" => timestamp(r.created),
                    "state" => r.block_state(now, &w.extensions),
                    _ => return None,
                })
            })
        })
        .collect();
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    let mut x = Xml::new();
    x.set("capacityBlockSet", &page, |x, r| write_block(x, r, w, now));
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

/// Blocks that have a status to report: active ones (instances running or taken out) and
/// ones EC2 marked unavailable.
fn has_status(r: &Reservation, w: &World, now: DateTime<Utc>) -> bool {
    matches!(r.state(now, &w.extensions).as_str(), "active" | "unavailable")
}

/// `totalUnavailableCapacity` under the setting's reading of the record (block and reservation
/// alike: the simulator's blocks have one reservation each): the instances taken out, or those
/// plus every place an instance holds (every account's running ones, and the stopping ones).
fn unavailable_count(r: &Reservation, state: &str, now: DateTime<Utc>, means: UnavailableMeans) -> u32 {
    let failed = r.health(now).unavailable;
    match means {
        UnavailableMeans::Failed => failed,
        UnavailableMeans::InUse => (failed + r.in_use(state, now)).min(r.instance_count),
    }
}

pub fn describe_status(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    let now = ctx.now;
    let BlockQuery { ids, filters, size, all } = block_query(w, ctx, p, STATUS_FILTERS)?;
    // Asked by id, a block that has no status yet (payment-pending, scheduled) answers EC2's
    // documented InvalidCapacityReservationState.PendingActivation ("Your Capacity Block is not
    // active yet."); one that has none any more (expired, payment-failed, ...) IncorrectState (the
    // simulator's choice: EC2 documents no code for it). Either fails the whole call (a reading:
    // EC2 does not say whether the other ids are answered). Without ids the answer simply holds
    // the blocks that have a status.
    for id in &ids {
        let r = block_by_id(&all, id)?;
        if !has_status(r, w, now) {
            let state = r.block_state(now, &w.extensions);
            return Err(if matches!(state.as_str(), "payment-pending" | "scheduled") {
                ApiError::client(PENDING_ACTIVATION, format!("Your Capacity Block '{id}' is not active yet."))
            } else {
                ApiError::client(NO_STATUS, format!("The Capacity Block '{id}' is in state {state} and has no status."))
            });
        }
    }
    let items: Vec<&Reservation> = all
        .into_iter()
        .filter(|r| has_status(r, w, now))
        .filter(|r| ids.is_empty() || ids.contains(&r.capacity_block_id))
        .filter(|r| {
            let h = r.health(now);
            matches_all(&filters, &[], |name| (name == "interconnect-status").then(|| h.interconnect.clone()))
        })
        .collect();
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    let mut x = Xml::new();
    let means = w.behaviour.unavailable_means;
    x.set("capacityBlockStatusSet", &page, |x, r| {
        let h = r.health(now);
        let state = r.state(now, &w.extensions);
        let available = r.available_instance_count(&state, now);
        let unavailable = unavailable_count(r, &state, now, means);
        x.leaf("capacityBlockId", &r.capacity_block_id)
            .leaf("interconnectStatus", &h.interconnect)
            .num("totalCapacity", r.instance_count)
            .num("totalAvailableCapacity", available)
            .num("totalUnavailableCapacity", unavailable)
            .set("capacityReservationStatusSet", std::slice::from_ref(r), |x, r| {
                x.leaf("capacityReservationId", &r.id)
                    .num("totalCapacity", r.instance_count)
                    .num("totalAvailableCapacity", available)
                    .num("totalUnavailableCapacity", unavailable);
            });
    });
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

/// The members of CapacityBlockExtension, in model order (shared with the extension purchase).
pub fn write_extension(x: &mut Xml, e: &Extension, r: &Reservation, now: DateTime<Utc>) {
    x.leaf("capacityReservationId", &e.reservation_id)
        .leaf("instanceType", &r.instance_type)
        .num("instanceCount", r.instance_count)
        .leaf("availabilityZone", &r.availability_zone)
        .leaf("availabilityZoneId", zone_id(&r.availability_zone))
        .leaf("capacityBlockExtensionOfferingId", &e.offering_id)
        .num("capacityBlockExtensionDurationHours", e.duration_hours)
        .leaf("capacityBlockExtensionStatus", e.status(now))
        .time("capacityBlockExtensionPurchaseDate", e.purchased)
        .time("capacityBlockExtensionStartDate", e.start)
        .time("capacityBlockExtensionEndDate", e.end)
        .leaf("upfrontFee", e.upfront_fee.to_string())
        .leaf("currencyCode", &e.currency);
}

pub fn describe_extension_history(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    let ids = p.list("CapacityReservationId");
    let filters = p.filters();
    check_names(&filters, HISTORY_FILTERS)?;
    let size = page_size(p, 1, 1000)?;
    dry_run(p)?;
    let now = ctx.now;
    for id in &ids {
        visible(w, ctx.region, id, now)?;
    }
    let mut items: Vec<(&Extension, &Reservation)> = w
        .extensions
        .iter()
        .filter(|e| ids.is_empty() || ids.contains(&e.reservation_id))
        .filter_map(|e| {
            let r = w.reservation(&e.reservation_id)?;
            (r.region == ctx.region && w.shows(r, now)).then_some((e, r))
        })
        .filter(|(e, r)| {
            matches_all(&filters, &[], |name| {
                Some(match name {
                    "availability-zone" => r.availability_zone.clone(),
                    "availability-zone-id" => zone_id(&r.availability_zone),
                    "capacity-block-extension-offering-id" => e.offering_id.clone(),
                    "capacity-block-extension-status" => e.status(now).into(),
                    "capacity-reservation-id" => e.reservation_id.clone(),
                    "instance-type" => r.instance_type.clone(),
                    _ => return None,
                })
            })
        })
        .collect();
    items.sort_by(|a, b| (a.0.purchased, &a.0.offering_id).cmp(&(b.0.purchased, &b.0.offering_id)));
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    let mut x = Xml::new();
    x.set("capacityBlockExtensionSet", &page, |x, (e, r)| write_extension(x, e, r, now));
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::dispatch;
    use crate::actions::test_support::values;
    use crate::control::handle;
    use crate::scenario::Scenario;
    use serde_json::Value;

    const REGION: &str = "us-east-1";

    /// A market selling u-trn2x64 UltraServers (1 or 2) and p5.48xlarge, clock 2026-12-01 00:00.
    fn world() -> World {
        let mut w = World::new(Scenario::parse(include_str!("../../tests/scenarios/ultra-world.toml")).unwrap());
        w.clock.set(w.now());
        w
    }

    fn call(w: &mut World, action: &str, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
        dispatch(w, REGION, action, &Params::from_pairs(pairs)).map(|o| o.body)
    }

    fn buy(w: &mut World, pairs: &[(&str, &str)]) -> String {
        let mut q = vec![("CapacityDurationHours", "24")];
        q.extend_from_slice(pairs);
        let offers = call(w, "DescribeCapacityBlockOfferings", &q).unwrap();
        let id = values(&offers, "capacityBlockOfferingId").remove(0);
        call(w, "PurchaseCapacityBlock", &[("CapacityBlockOfferingId", &id), ("InstancePlatform", "Linux/UNIX")])
            .unwrap()
    }

    /// u-trn2x64 UltraServers are 4 x trn2u.48xlarge.
    const TRN2U: (&str, &str) = ("InstanceType", "trn2u.48xlarge");

    fn offerings(w: &mut World, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
        let mut q = vec![("CapacityDurationHours", "24")];
        q.extend_from_slice(pairs);
        call(w, "DescribeCapacityBlockOfferings", &q)
    }

    #[test]
    fn ultraserver_offerings_are_searched_with_their_instance_type_by_default() {
        let mut w = world();
        let body = offerings(&mut w, &[TRN2U, ("UltraserverType", "u-trn2x64"), ("UltraserverCount", "2")]).unwrap();
        assert_eq!(values(&body, "ultraserverType"), vec!["u-trn2x64"]);
        assert_eq!(values(&body, "ultraserverCount"), vec!["2"]);
        assert_eq!(values(&body, "instanceType"), vec!["trn2u.48xlarge"]);
        assert_eq!(values(&body, "instanceCount"), vec!["8"], "2 UltraServers of 4 instances");
        // 2.00 x 16 chips x 8 instances x 24 h
        assert_eq!(values(&body, "upfrontFee"), vec!["6144.00"]);
        // Without InstanceType: MissingParameter, naming it (UltraserverCount alone too).
        for without in [
            vec![("UltraserverType", "u-trn2x64"), ("UltraserverCount", "2")],
            vec![("UltraserverType", "u-trn2x64")],
            vec![("UltraserverCount", "1")],
        ] {
            let e = offerings(&mut w, &without).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "MissingParameter"), "{without:?}");
            assert!(e.message.contains("InstanceType"), "{}", e.message);
        }
        // An instance search never sees them; a search naming no type does.
        let p5 = offerings(&mut w, &[("InstanceType", "p5.48xlarge")]).unwrap();
        assert!(values(&p5, "ultraserverType").is_empty());
        let any = offerings(&mut w, &[]).unwrap();
        assert_eq!(values(&any, "ultraserverType").len(), 2);
        // Combinations refused under both readings, and an instance type not the UltraServer's.
        for bad in [
            vec![TRN2U, ("UltraserverType", "u-trn2x64"), ("InstanceCount", "4")],
            vec![TRN2U, ("UltraserverCount", "1")],
        ] {
            assert_eq!(offerings(&mut w, &bad).unwrap_err().code, "InvalidParameterCombination", "{bad:?}");
        }
        let e = offerings(&mut w, &[("InstanceType", "p5.48xlarge"), ("UltraserverType", "u-trn2x64")]).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
        assert!(e.message.contains("not the instance type of UltraServer type u-trn2x64"), "{}", e.message);
        let e = offerings(&mut w, &[("InstanceType", "p6e-gb200.36xlarge"), ("UltraserverType", "u-p6e-gb200x72")]);
        assert_eq!(e.unwrap_err().code, "InvalidParameterValue", "not sold here");
        let e = offerings(&mut w, &[TRN2U]).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue", "sold only as UltraServers");
    }

    #[test]
    fn ultraserver_only_names_the_ultraserver_alone() {
        let mut w = world();
        w.behaviour.ultraserver_search = crate::scenario::UltraserverSearch::UltraserverOnly;
        let body = offerings(&mut w, &[("UltraserverType", "u-trn2x64"), ("UltraserverCount", "2")]).unwrap();
        assert_eq!(values(&body, "upfrontFee"), vec!["6144.00"]);
        assert_eq!(values(&body, "instanceType"), vec!["trn2u.48xlarge"]);
        for bad in [
            vec![("UltraserverType", "u-trn2x64"), TRN2U],
            vec![("UltraserverType", "u-trn2x64"), ("InstanceCount", "4")],
            vec![("UltraserverCount", "1")],
        ] {
            let e = offerings(&mut w, &bad).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "InvalidParameterCombination"), "{bad:?}");
        }
        let e = offerings(&mut w, &[("UltraserverType", "u-trn2x64"), TRN2U]).unwrap_err();
        assert_eq!(e.message, "UltraserverType cannot be combined with InstanceType or InstanceCount.");
        let e = offerings(&mut w, &[("UltraserverType", "u-p6e-gb200x72")]).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue", "not sold here");
    }

    #[test]
    fn an_ultraserver_purchase_makes_one_block_per_ultraserver() {
        let mut w = world();
        let body = buy(&mut w, &[TRN2U, ("UltraserverType", "u-trn2x64"), ("UltraserverCount", "2")]);
        // One in the reservation, then two blocks (then each reservation again in full).
        let blocks = values(body.split("<capacityReservationSet>").next().unwrap_or_default(), "capacityBlockId");
        assert_eq!(blocks.len(), 3, "{body}");
        assert_eq!(blocks[0], blocks[1]);
        assert_ne!(blocks[1], blocks[2]);
        assert_eq!(w.reservations.len(), 2);
        assert!(w.reservations.iter().all(|r| r.instance_count == 4));
        // Before the start each part shows 0 instances and its own count in EC2's tag.
        let listed = call(&mut w, "DescribeCapacityReservations", &[]).unwrap();
        assert_eq!(values(&listed, "totalInstanceCount"), vec!["0", "0"]);
        let quantities: Vec<String> = values(&listed, "key")
            .into_iter()
            .zip(values(&listed, "value"))
            .filter(|(k, _)| k == crate::actions::reservations::REQUESTED_QUANTITY_TAG)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(quantities, vec!["4", "4"]);
        let fees: rust_decimal::Decimal = w.reservations.iter().map(|r| r.upfront_fee).sum();
        assert_eq!(fees.to_string(), "6144.00");

        let all = call(&mut w, "DescribeCapacityBlocks", &[]).unwrap();
        assert_eq!(values(&all, "ultraserverType"), vec!["u-trn2x64", "u-trn2x64"]);
        let one = call(&mut w, "DescribeCapacityBlocks", &[("CapacityBlockId.1", &blocks[2])]).unwrap();
        assert_eq!(values(&one, "capacityBlockId"), vec![blocks[2].clone()]);
        let e = call(&mut w, "DescribeCapacityBlocks", &[("CapacityBlockId.1", "cb-00000000000000000")]).unwrap_err();
        assert_eq!(e.code, BLOCK_NOT_FOUND);
        buy(&mut w, &[("InstanceType", "p5.48xlarge")]);
        let kinds = |w: &mut World, v: &str| {
            let b =
                call(w, "DescribeCapacityBlocks", &[("Filter.1.Name", "ultraserver-type"), ("Filter.1.Value.1", v)])
                    .unwrap();
            values(&b, "capacityBlockId").len()
        };
        assert_eq!((kinds(&mut w, "ultraservers"), kinds(&mut w, "instances")), (2, 1));
    }

    #[test]
    fn status_reports_health_for_active_blocks_only() {
        let mut w = world();
        // The counts below are the failed instances alone (`unavailable_means_in_status` reads both).
        w.behaviour.unavailable_means = UnavailableMeans::Failed;
        // Paid a minute after the purchase.
        (w.behaviour.payment_delay_hours, w.behaviour.payment_delay_minutes) = (None, 1.0);
        buy(&mut w, &[TRN2U, ("UltraserverType", "u-trn2x64"), ("UltraserverCount", "1")]);
        let block = w.reservations[0].capacity_block_id.clone();
        // Not active yet (payment-pending, then scheduled): not listed, and asking by id fails
        // with EC2's documented code, naming the block.
        assert!(values(&call(&mut w, "DescribeCapacityBlockStatus", &[]).unwrap(), "capacityBlockId").is_empty());
        for state in ["payment-pending", "scheduled"] {
            assert_eq!(w.reservations[0].state(w.now(), &w.extensions), state);
            let e = call(&mut w, "DescribeCapacityBlockStatus", &[("CapacityBlockId.1", &block)]).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, PENDING_ACTIVATION), "{state}");
            assert_eq!(e.message, format!("Your Capacity Block '{block}' is not active yet."));
            w.clock.advance(60);
        }
        // Active: ok, then the line's step (2 h after the start) impairs it and takes one out.
        w.clock.set(w.reservations[0].start);
        let ok = call(&mut w, "DescribeCapacityBlockStatus", &[("CapacityBlockId.1", &block)]).unwrap();
        assert_eq!(values(&ok, "interconnectStatus"), vec!["ok"]);
        assert_eq!(values(&ok, "totalUnavailableCapacity"), vec!["0", "0"]);
        w.clock.advance(2 * 3600);
        let bad = call(&mut w, "DescribeCapacityBlockStatus", &[]).unwrap();
        assert_eq!(values(&bad, "interconnectStatus"), vec!["impaired"]);
        assert_eq!(values(&bad, "totalCapacity"), vec!["4", "4"]);
        assert_eq!(values(&bad, "totalUnavailableCapacity"), vec!["1", "1"]);
        // The control endpoint overrides it.
        let r = handle(
            &mut w,
            "POST",
            "/_sim/blocks/health",
            format!(r#"{{"capacity_block_id": "{block}", "interconnect": "ok", "unavailable": 0}}"#).as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["interconnect"], "ok");
        let filtered = call(
            &mut w,
            "DescribeCapacityBlockStatus",
            &[("Filter.1.Name", "interconnect-status"), ("Filter.1.Value.1", "impaired")],
        )
        .unwrap();
        assert!(values(&filtered, "capacityBlockId").is_empty());
        // Expired: no status any more, IncorrectState.
        w.clock.set(w.reservations[0].original_end);
        let e = call(&mut w, "DescribeCapacityBlockStatus", &[("CapacityBlockId.1", &block)]).unwrap_err();
        assert_eq!(e.code, NO_STATUS);
    }

    /// The status's three counts at block and reservation level (each `[block, reservation]`):
    /// total, available, unavailable.
    fn status_counts(w: &mut World, block: &str) -> [Vec<String>; 3] {
        let body = call(w, "DescribeCapacityBlockStatus", &[("CapacityBlockId.1", block)]).unwrap();
        ["totalCapacity", "totalAvailableCapacity", "totalUnavailableCapacity"].map(|k| values(&body, k))
    }

    /// A 16 x p5.48xlarge block bought by hand, active, with 2 of its instances taken out and
    /// `running` of the others running.
    fn failing_block(means: UnavailableMeans, running: u32) -> (World, String) {
        let mut w = world();
        w.behaviour.unavailable_means = means;
        // The instances stopped to leave `running` free their places at once here.
        w.behaviour.stopping_minutes = 0;
        let body = r#"{"region": "us-east-1", "instance_type": "p5.48xlarge", "instance_count": 16,
            "start": "2026-11-30T11:30:00Z", "end": "2026-12-02T11:30:00Z"}"#;
        let r = handle(&mut w, "POST", "/_sim/reservations", body.as_bytes());
        assert_eq!(r.status, 200, "{}", r.body);
        let (rid, block) = (w.reservations[0].id.clone(), w.reservations[0].capacity_block_id.clone());
        for body in [
            format!(r#"{{"reservation_id":"{rid}","unavailable":2}}"#),
            format!(r#"{{"reservation_id":"{rid}","running":{running}}}"#),
        ] {
            let path = if body.contains("running") { "/_sim/blocks/usage" } else { "/_sim/blocks/health" };
            let r = handle(&mut w, "POST", path, body.as_bytes());
            assert_eq!(r.status, 200, "{}", r.body);
        }
        (w, block)
    }

    #[test]
    fn unavailable_means_failed_counts_only_the_instances_taken_out() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (mut w, block) = failing_block(UnavailableMeans::Failed, 5);
        let count = w.reservations[0].instance_count;
        let [total, available, unavailable] = status_counts(&mut w, &block);
        let (c, idle) = (count.to_string(), (count - 2 - 5).to_string());
        assert_eq!(total, n(&[&c, &c]));
        assert_eq!(available, n(&[&idle, &idle]), "the launchable rest");
        assert_eq!(unavailable, n(&["2", "2"]), "the running 5 are not counted");
        // Nothing running: the same 2.
        let (mut w, block) = failing_block(UnavailableMeans::Failed, 0);
        assert_eq!(status_counts(&mut w, &block)[2], n(&["2", "2"]));
    }

    #[test]
    fn unavailable_means_in_use_counts_the_running_instances_too() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (mut w, block) = failing_block(UnavailableMeans::InUse, 5);
        let count = w.reservations[0].instance_count;
        let [total, available, unavailable] = status_counts(&mut w, &block);
        let (c, idle) = (count.to_string(), (count - 2 - 5).to_string());
        assert_eq!(total, n(&[&c, &c]));
        assert_eq!(available, n(&[&idle, &idle]));
        assert_eq!(unavailable, n(&["7", "7"]), "5 running + 2 taken out");
        // Total = available + unavailable, as the model says of both levels.
        assert_eq!(count, idle.parse::<u32>().unwrap() + 7);
        // Everything that can run runs, nothing taken out: all of it "unavailable".
        let (mut w, block) = failing_block(UnavailableMeans::InUse, count);
        let rid = w.reservations[0].id.clone();
        let r = handle(
            &mut w,
            "POST",
            "/_sim/blocks/health",
            format!(r#"{{"reservation_id":"{rid}","unavailable":0}}"#).as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let [_, available, unavailable] = status_counts(&mut w, &block);
        assert_eq!((available, unavailable), (n(&["0", "0"]), n(&[&c, &c])));
        // Past its activity nothing runs: the block has no status to report at all.
        w.clock.set(w.reservations[0].original_end);
        assert_eq!(
            call(&mut w, "DescribeCapacityBlockStatus", &[("CapacityBlockId.1", &block)]).unwrap_err().code,
            NO_STATUS
        );
    }

    #[test]
    fn extension_history_lists_each_extension_with_its_payment_status() {
        let mut w = world();
        buy(&mut w, &[("InstanceType", "p5.48xlarge")]);
        let id = w.reservations[0].id.clone();
        w.clock.set(w.reservations[0].start);
        let offers = call(
            &mut w,
            "DescribeCapacityBlockExtensionOfferings",
            &[("CapacityReservationId", &id), ("CapacityBlockExtensionDurationHours", "24")],
        )
        .unwrap();
        let offer = values(&offers, "capacityBlockExtensionOfferingId").remove(0);
        let pairs = [("CapacityBlockExtensionOfferingId", offer.as_str()), ("CapacityReservationId", id.as_str())];
        let mut dry = pairs.to_vec();
        dry.push(("DryRun", "true"));
        assert_eq!(call(&mut w, "PurchaseCapacityBlockExtension", &dry).unwrap_err().code, "DryRunOperation");
        let empty = call(&mut w, "DescribeCapacityBlockExtensionHistory", &[]).unwrap();
        assert!(values(&empty, "capacityReservationId").is_empty(), "a dry run records nothing");
        call(&mut w, "PurchaseCapacityBlockExtension", &pairs).unwrap();
        let h = call(&mut w, "DescribeCapacityBlockExtensionHistory", &[("CapacityReservationId.1", &id)]).unwrap();
        assert_eq!(values(&h, "capacityBlockExtensionStatus"), vec!["payment-succeeded"], "delay 0");
        let none = call(
            &mut w,
            "DescribeCapacityBlockExtensionHistory",
            &[("Filter.1.Name", "capacity-block-extension-status"), ("Filter.1.Value.1", "payment-failed")],
        )
        .unwrap();
        assert!(values(&none, "capacityReservationId").is_empty());
        let e = call(
            &mut w,
            "DescribeCapacityBlockExtensionHistory",
            &[("CapacityReservationId.1", "cr-00000000000000000")],
        );
        assert_eq!(e.unwrap_err().code, "InvalidCapacityReservationId.NotFound");
    }
}
