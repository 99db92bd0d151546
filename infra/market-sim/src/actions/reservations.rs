//! DescribeCapacityReservations and the CapacityReservation XML shape (shared with purchase).

use chrono::{DateTime, Utc};

use super::filters::{check_names, matches_all};
use super::{Ctx, authorize, dry_run};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::reservations::Reservation;
use crate::scenario::{Behaviour, CountsBeforeStart};
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::{Xml, timestamp};
use crate::world::World;

pub const RESERVATION_NOT_FOUND: &str = "InvalidCapacityReservationId.NotFound";
pub const RESERVATION_MALFORMED: &str = "InvalidCapacityReservationId.Malformed";

/// The tags EC2 puts on a Capacity Block reservation: the instance count it will have (EC2 User
/// Guide, "View Capacity Blocks") and its kind (AWS ParallelCluster's fixtures of a block).
pub const REQUESTED_QUANTITY_TAG: &str = "aws:ec2capacityreservation:incrementalRequestedQuantity";
pub const RESERVATION_TYPE_TAG: &str = "aws:ec2capacityreservation:capacityReservationType";

/// Every reservation here is a Capacity Block (`reservationType`, the `reservation-type` filter).
pub const RESERVATION_TYPE: &str = "capacity-block";

const FILTERS: &[&str] = &[
    "reservation-type",
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

/// The reservation's tags as EC2 shows them: with `counts_before_start = "zero"` EC2's two
/// `aws:` tags first (on the reservation from its purchase on, as in ParallelCluster's fixtures
/// of an active block), then the buyer's.
pub fn shown_tags(r: &Reservation, b: &Behaviour) -> Vec<(String, String)> {
    let ec2 = match b.counts_before_start {
        CountsBeforeStart::Zero => vec![
            (REQUESTED_QUANTITY_TAG.to_string(), r.instance_count.to_string()),
            (RESERVATION_TYPE_TAG.to_string(), RESERVATION_TYPE.to_string()),
        ],
        CountsBeforeStart::Full => Vec::new(),
    };
    ec2.into_iter().chain(r.tags.iter().cloned()).collect()
}

/// (`totalInstanceCount`, `availableInstanceCount`) at `now`: both 0 before the start with
/// `counts_before_start = "zero"` ("Before a Capacity Block reservation begins, the available
/// capacity appears as zero"), the real ones from the start on.
pub fn shown_counts(r: &Reservation, state: &str, b: &Behaviour, now: DateTime<Utc>) -> (u32, u32) {
    if b.counts_before_start == CountsBeforeStart::Zero && now < r.start {
        (0, 0)
    } else {
        (r.instance_count, r.available_instance_count(state, now))
    }
}

/// The members of CapacityReservation, in model order.
pub fn write_reservation(x: &mut Xml, r: &Reservation, w: &World, now: DateTime<Utc>) {
    let state = r.state(now, &w.extensions);
    let (total, available) = shown_counts(r, &state, &w.behaviour, now);
    let account = &w.scenario.account_id;
    let shown = |member: &str| !r.omitted.iter().any(|m| m == member);
    let leaves = [
        ("capacityReservationId", r.id.clone()),
        ("ownerId", account.clone()),
        ("capacityReservationArn", arn(&r.region, account, &r.id)),
        ("instanceType", r.instance_type.clone()),
        ("instancePlatform", r.instance_platform.clone()),
        ("availabilityZone", r.availability_zone.clone()),
        ("tenancy", "default".into()),
        ("totalInstanceCount", total.to_string()),
        ("availableInstanceCount", available.to_string()),
        ("ebsOptimized", "true".into()),
        ("ephemeralStorage", "false".into()),
        ("state", state),
        ("startDate", timestamp(r.start)),
        ("endDate", timestamp(r.end(now, &w.extensions))),
        ("endDateType", "limited".into()),
        ("instanceMatchCriteria", "targeted".into()),
        ("createDate", timestamp(r.created)),
    ];
    for (member, text) in leaves.iter().filter(|(m, _)| shown(m)) {
        x.leaf(member, text);
    }
    if shown("tagSet") {
        x.tags("tagSet", &shown_tags(r, &w.behaviour));
    }
    for (member, text) in [("reservationType", RESERVATION_TYPE), ("capacityBlockId", r.capacity_block_id.as_str())] {
        if shown(member) {
            x.leaf(member, text);
        }
    }
}

/// A reservation that DescribeCapacityReservations still knows in this region.
pub fn visible<'w>(w: &'w World, region: &str, id: &str, now: DateTime<Utc>) -> Result<&'w Reservation, ApiError> {
    if !id.starts_with("cr-") {
        return Err(ApiError::client(RESERVATION_MALFORMED, format!("Invalid id: \"{id}\"")));
    }
    w.reservation(id).filter(|r| r.region == region && w.shows(r, now)).ok_or_else(|| {
        ApiError::client(RESERVATION_NOT_FOUND, format!("The capacity reservation ID '{id}' does not exist"))
    })
}

pub fn describe(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
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
        .filter(|r| r.region == ctx.region && w.shows(r, now))
        .filter(|r| ids.is_empty() || ids.contains(&r.id))
        .filter(|r| {
            let state = r.state(now, &w.extensions);
            matches_all(&filters, &shown_tags(r, &w.behaviour), |name| {
                Some(match name {
                    "reservation-type" => RESERVATION_TYPE.into(),
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
    // `listed_twice`: each reservation twice, side by side, as a read of a changing listing.
    if w.behaviour.listed_twice {
        items = items.into_iter().flat_map(|r| [r, r]).collect();
    }
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;

    let mut x = Xml::new();
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    x.set("capacityReservationSet", &page, |x, r| write_reservation(x, r, w, now));
    Ok(x.into_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::dispatch;
    use crate::actions::test_support::{values, world_of};

    const REGION: &str = "us-east-1";

    /// One p5.48xlarge line (1 instance, a day from 12-02 11:30), the clock at 12-01 00:00.
    fn world(behaviour: &str) -> World {
        world_of(
            &format!("describe_limit = false\nsame_day_offerings = false\n{behaviour}"),
            r#"
                [[market]]
                region = "us-east-1"
                instance_type = "p5.48xlarge"
                price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "3.00" } ]
                "#,
        )
    }

    fn call(w: &mut World, action: &str, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
        dispatch(w, REGION, action, &Params::from_pairs(pairs)).map(|o| o.body)
    }

    /// Buys the first offering; the reservation id.
    fn buy(w: &mut World) -> String {
        let offers = call(w, "DescribeCapacityBlockOfferings", &[("CapacityDurationHours", "24")]).unwrap();
        let id = values(&offers, "capacityBlockOfferingId").remove(0);
        let body =
            call(w, "PurchaseCapacityBlock", &[("CapacityBlockOfferingId", &id), ("InstancePlatform", "Linux/UNIX")])
                .unwrap();
        values(&body, "capacityReservationId").remove(0)
    }

    fn state(w: &mut World, id: &str) -> Result<String, ApiError> {
        let body = call(w, "DescribeCapacityReservations", &[("CapacityReservationId.1", id)])?;
        Ok(values(&body, "state").remove(0))
    }

    /// (total, available, tags) of the (first) reservation of an answer.
    fn counts_and_tags(body: &str) -> (String, String, Vec<String>) {
        // A purchase's answer goes on with the blocks, which carry the buyer's tags too.
        let body = body.split("<capacityBlockSet>").next().unwrap_or(body);
        (
            values(body, "totalInstanceCount").remove(0),
            values(body, "availableInstanceCount").remove(0),
            values(body, "key").into_iter().zip(values(body, "value")).map(|(k, v)| format!("{k}={v}")).collect(),
        )
    }

    /// Under `stale_listing_secs` a listed reservation is missing again from a minute after it
    /// was first listed, for that long, by id too; under `listed_twice` every answer lists it twice.
    #[test]
    fn a_stale_read_misses_a_listed_reservation_and_listed_twice_doubles_it() {
        let mut w = world("stale_listing_secs = 600\nlisted_twice = true");
        let id = buy(&mut w);
        let listed =
            |w: &mut World| values(&call(w, "DescribeCapacityReservations", &[]).unwrap(), "capacityReservationId");
        assert_eq!(listed(&mut w), vec![id.clone(), id.clone()], "listed twice at once");
        w.clock.advance(60);
        assert!(listed(&mut w).is_empty(), "a stale read from a minute on");
        assert_eq!(state(&mut w, &id).unwrap_err().code, "InvalidCapacityReservationId.NotFound", "by id too");
        w.clock.advance(599);
        assert!(listed(&mut w).is_empty());
        w.clock.advance(1);
        assert_eq!(listed(&mut w), vec![id.clone(), id.clone()], "listed again after 600 s");
        let mut once = world("");
        let id = buy(&mut once);
        once.clock.advance(3600);
        assert_eq!(listed(&mut once), vec![id], "the defaults: listed once, all along");
    }

    #[test]
    fn counts_are_zero_before_the_start_and_the_count_is_in_ec2s_tag() {
        let mut w = world("");
        let offers = call(&mut w, "DescribeCapacityBlockOfferings", &[("CapacityDurationHours", "24")]).unwrap();
        let id = values(&offers, "capacityBlockOfferingId").remove(0);
        let bought = call(
            &mut w,
            "PurchaseCapacityBlock",
            &[
                ("CapacityBlockOfferingId", &id),
                ("InstancePlatform", "Linux/UNIX"),
                ("TagSpecification.1.ResourceType", "capacity-reservation"),
                ("TagSpecification.1.Tag.1.Key", "team"),
                ("TagSpecification.1.Tag.1.Value", "ml"),
            ],
        )
        .unwrap();
        let tags = vec![
            format!("{REQUESTED_QUANTITY_TAG}=1"),
            format!("{RESERVATION_TYPE_TAG}=capacity-block"),
            "team=ml".to_string(),
        ];
        // The purchase's answer already shows 0 / 0.
        assert_eq!(counts_and_tags(&bought), ("0".into(), "0".into(), tags.clone()));
        let rid = values(&bought, "capacityReservationId").remove(0);
        let describe = |w: &mut World| call(w, "DescribeCapacityReservations", &[("CapacityReservationId.1", &rid)]);
        w.clock.advance(3600);
        assert_eq!(counts_and_tags(&describe(&mut w).unwrap()), ("0".into(), "0".into(), tags.clone()), "scheduled");
        // From the start on the real count (every instance running); the tags stay.
        let start = w.reservation(&rid).unwrap().start;
        w.clock.set(start - chrono::Duration::seconds(1));
        assert_eq!(counts_and_tags(&describe(&mut w).unwrap()).0, "0");
        w.clock.set(start);
        assert_eq!(counts_and_tags(&describe(&mut w).unwrap()), ("1".into(), "0".into(), tags.clone()));
        // The tags filter like any other; nobody else may set an aws: tag.
        let by_tag = call(
            &mut w,
            "DescribeCapacityReservations",
            &[("Filter.1.Name", &format!("tag:{REQUESTED_QUANTITY_TAG}")), ("Filter.1.Value.1", "1")],
        )
        .unwrap();
        assert_eq!(values(&by_tag, "capacityReservationId"), vec![rid.clone()]);
        let e = call(
            &mut w,
            "PurchaseCapacityBlock",
            &[
                ("CapacityBlockOfferingId", &id),
                ("InstancePlatform", "Linux/UNIX"),
                ("TagSpecification.1.ResourceType", "capacity-reservation"),
                ("TagSpecification.1.Tag.1.Key", REQUESTED_QUANTITY_TAG),
                ("TagSpecification.1.Tag.1.Value", "64"),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");

        // "full": today's reading, the full count from the purchase on and no aws: tags.
        w.behaviour.counts_before_start = CountsBeforeStart::Full;
        w.clock.set(start - chrono::Duration::hours(1));
        assert_eq!(counts_and_tags(&describe(&mut w).unwrap()), ("1".into(), "1".into(), vec!["team=ml".to_string()]));
    }

    #[test]
    fn an_active_block_with_3_of_8_idle_shows_them_available_and_runs_5() {
        // Stopped instances free their places at once here (the control's tests play the wait).
        let mut w = world_of(
            "describe_limit = false\nsame_day_offerings = false\npayment_delay_minutes = 0\nstopping_minutes = 0",
            r#"
                [[market]]
                region = "us-east-1"
                instance_type = "p5.48xlarge"
                counts = [8]
                price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "3.00" } ]
                usage = [ { after_start_hours = 1.0, running = 5 } ]
                "#,
        );
        let rid = buy(&mut w);
        assert_eq!(w.reservation(&rid).unwrap().usage_steps.len(), 1, "the purchase copies the line's steps");
        let start = w.reservation(&rid).unwrap().start;
        let describe = |w: &mut World| {
            let body = call(w, "DescribeCapacityReservations", &[("CapacityReservationId.1", &rid)]).unwrap();
            (values(&body, "totalInstanceCount").remove(0), values(&body, "availableInstanceCount").remove(0))
        };
        let running = |w: &mut World| {
            let body = call(
                w,
                "DescribeInstances",
                &[("Filter.1.Name", "capacity-reservation-id"), ("Filter.1.Value.1", &rid)],
            )
            .unwrap();
            values(&body, "instanceId").len()
        };
        let idle = |w: &mut World| {
            let body = call(w, "DescribeCapacityBlockStatus", &[]).unwrap();
            values(&body, "totalAvailableCapacity")
        };
        // Before the start: as before (counts_before_start = "zero"), nothing running.
        w.clock.set(start - chrono::Duration::minutes(1));
        assert_eq!((describe(&mut w), running(&mut w)), ((String::from("0"), String::from("0")), 0));
        // Active, before the step: every instance runs.
        w.clock.set(start);
        assert_eq!((describe(&mut w), running(&mut w)), (("8".into(), "0".into()), 8));
        // An hour in: 5 run, 3 are idle, and the remaining capacity says so.
        w.clock.set(start + chrono::Duration::hours(1));
        assert_eq!((describe(&mut w), running(&mut w)), (("8".into(), "3".into()), 5));
        assert_eq!(idle(&mut w), vec!["3", "3"], "DescribeCapacityBlockStatus agrees");
        // The control endpoint overrides it; clear goes back to the step.
        let set = |w: &mut World, body: String| {
            let r = crate::control::handle(w, "POST", "/_sim/blocks/usage", body.as_bytes());
            assert_eq!(r.status, 200, "{}", r.body);
        };
        set(&mut w, format!(r#"{{"reservation_id":"{rid}","running":1}}"#));
        assert_eq!((describe(&mut w), running(&mut w)), (("8".into(), "7".into()), 1));
        set(&mut w, format!(r#"{{"reservation_id":"{rid}","clear":true}}"#));
        assert_eq!((describe(&mut w), running(&mut w)), (("8".into(), "3".into()), 5));
        // After the end: expired, nothing running or available, as before.
        w.clock.set(w.reservation(&rid).unwrap().original_end);
        assert_eq!((describe(&mut w), running(&mut w)), (("8".into(), "0".into()), 0));
    }

    #[test]
    fn the_reservation_type_filter_is_accepted() {
        let mut w = world("");
        let rid = buy(&mut w);
        let with = |w: &mut World, value: &str| {
            let body = call(
                w,
                "DescribeCapacityReservations",
                &[("Filter.1.Name", "reservation-type"), ("Filter.1.Value.1", value)],
            )
            .unwrap();
            values(&body, "capacityReservationId")
        };
        assert_eq!(with(&mut w, "capacity-block"), vec![rid.clone()]);
        assert_eq!(with(&mut w, "capacity-*"), vec![rid]);
        assert!(with(&mut w, "default").is_empty(), "no On-Demand Capacity Reservations here");
    }

    #[test]
    fn payments_go_through_five_minutes_after_the_purchase_by_default() {
        let mut w = world("");
        let id = buy(&mut w);
        w.clock.advance(4 * 60 + 59);
        assert_eq!(state(&mut w, &id).unwrap(), "payment-pending");
        w.clock.advance(1);
        assert_eq!(state(&mut w, &id).unwrap(), "scheduled");
        // The old key, when given, wins.
        let mut w = world("payment_delay_hours = 3\npayment_delay_minutes = 1");
        let id = buy(&mut w);
        w.clock.advance(3 * 3600 - 1);
        assert_eq!(state(&mut w, &id).unwrap(), "payment-pending");
        w.clock.advance(1);
        assert_eq!(state(&mut w, &id).unwrap(), "scheduled");
    }

    #[test]
    fn a_failed_payment_vanishes_failed_payment_visible_minutes_after_it_failed() {
        // Fails at the deadline, purchase + 12 h (the start is 35.5 h away).
        let mut w = world("payment = \"fail\"");
        let id = buy(&mut w);
        let block = w.reservation(&id).unwrap().capacity_block_id.clone();
        w.clock.advance(12 * 3600);
        assert_eq!(state(&mut w, &id).unwrap(), "payment-failed");
        w.clock.advance(59 * 60);
        assert_eq!(state(&mut w, &id).unwrap(), "payment-failed");
        let blocks = call(&mut w, "DescribeCapacityBlocks", &[]).unwrap();
        assert_eq!(values(&blocks, "capacityBlockId"), vec![block.clone()]);
        // 60 minutes after failing: gone from both calls, by id and in listings.
        w.clock.advance(60);
        assert_eq!(state(&mut w, &id).unwrap_err().code, RESERVATION_NOT_FOUND);
        let all = call(&mut w, "DescribeCapacityReservations", &[]).unwrap();
        assert!(values(&all, "capacityReservationId").is_empty(), "{all}");
        assert!(values(&call(&mut w, "DescribeCapacityBlocks", &[]).unwrap(), "capacityBlockId").is_empty());
        let e = call(&mut w, "DescribeCapacityBlocks", &[("CapacityBlockId.1", &block)]).unwrap_err();
        assert_eq!(e.code, "InvalidCapacityBlockId.NotFound");
        // A longer setting keeps it; expired blocks keep expired_visible_days.
        w.behaviour.failed_payment_visible_minutes = 24 * 60;
        assert_eq!(state(&mut w, &id).unwrap(), "payment-failed");
    }
}
