//! DescribeCapacityBlockExtensionOfferings and PurchaseCapacityBlockExtension.

use super::blocks::write_extension;
use super::reservations::visible;
use super::{Ctx, Output, authorize, dry_run, require_supported};
use crate::market::{self, ExtensionBase, ExtensionOffering};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::reservations::{Extension, Payment};
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

pub const EXTENSION_OFFERING_NOT_FOUND: &str = "InvalidCapacityBlockExtensionOfferingId.NotFound";

/// The extension offering of `hours` for a reservation, if it may be extended now: it is
/// scheduled or active, has no extension still waiting for payment, and is within 56 days to
/// 1 hour of its end.
fn offering_for(
    w: &World,
    reservation_id: &str,
    hours: i64,
    ctx: &Ctx<'_>,
) -> Result<Option<ExtensionOffering>, ApiError> {
    let r = visible(w, ctx.region, reservation_id, ctx.now)?;
    let state = r.state(ctx.now, &w.extensions);
    if state != "scheduled" && state != "active" {
        return Ok(None);
    }
    if w.extensions.iter().any(|e| e.reservation_id == r.id && e.status(ctx.now) == "payment-pending") {
        return Ok(None);
    }
    let base = ExtensionBase {
        reservation_id: &r.id,
        region: &r.region,
        instance_type: &r.instance_type,
        availability_zone: &r.availability_zone,
        instance_count: r.instance_count,
        start: r.start,
        current_end: r.end(ctx.now, &w.extensions),
    };
    Ok(market::extension_offering(&w.scenario, &base, hours, ctx.now))
}

pub fn describe_offerings(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    require_supported(w, ctx)?;
    // Whether these questions spend the describe limit of DescribeCapacityBlockOfferings, a
    // bucket of their own or none is not published: `extension_offerings_limit` plays each. As
    // there, the token is spent before anything else is looked at.
    let account = super::offerings::caller_account(w, ctx);
    w.take_extension_token(&account, ctx.region)?;
    authorize(w, ctx)?;
    let reservation_id = p.require("CapacityReservationId")?;
    let hours = p
        .int("CapacityBlockExtensionDurationHours")?
        .ok_or_else(|| ApiError::missing("CapacityBlockExtensionDurationHours"))?;
    market::duration_days_from_hours(hours, "CapacityBlockExtensionDurationHours")?;
    let size = page_size(p, 1, 100)?;
    dry_run(p)?;
    let all: Vec<ExtensionOffering> = offering_for(w, reservation_id, hours, ctx)?.into_iter().collect();
    let (page, next) = paginate(&all, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;

    let mut x = Xml::new();
    x.set("capacityBlockExtensionOfferingSet", &page, |x, o| {
        x.leaf("capacityBlockExtensionOfferingId", &o.id)
            .leaf("instanceType", &o.instance_type)
            .num("instanceCount", o.instance_count)
            .leaf("availabilityZone", &o.availability_zone)
            .time("startDate", o.start_date)
            .time("capacityBlockExtensionStartDate", o.extension_start)
            .time("capacityBlockExtensionEndDate", o.extension_end)
            .num("capacityBlockExtensionDurationHours", o.duration_hours)
            .leaf("upfrontFee", o.upfront_fee.to_string())
            .leaf("currencyCode", &o.currency)
            .leaf("tenancy", "default");
    });
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

pub fn purchase(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<Output, ApiError> {
    require_supported(w, ctx)?;
    authorize(w, ctx)?;
    let offering_id = p.require("CapacityBlockExtensionOfferingId")?.to_string();
    let reservation_id = p.require("CapacityReservationId")?.to_string();
    visible(w, ctx.region, &reservation_id, ctx.now)?;
    let mut found = None;
    for hours in market::all_durations_hours() {
        if let Some(o) = offering_for(w, &reservation_id, hours, ctx)?
            && o.id == offering_id
        {
            found = Some(o);
            break;
        }
    }
    let o = found.ok_or_else(|| {
        ApiError::client(
            EXTENSION_OFFERING_NOT_FOUND,
            format!("The Capacity Block extension offering ID '{offering_id}' does not exist or is no longer available for {reservation_id}."),
        )
    })?;
    dry_run(p)?;

    let ext = Extension {
        offering_id: o.id.clone(),
        reservation_id: reservation_id.clone(),
        duration_hours: o.duration_hours,
        purchased: ctx.now,
        start: o.extension_start,
        end: o.extension_end,
        upfront_fee: o.upfront_fee,
        currency: o.currency.clone(),
        payment: Payment {
            outcome: o.payment.unwrap_or(w.behaviour.payment),
            delay_hours: w.behaviour.payment_delay(),
            explicit: false,
        },
    };
    tracing::info!(reservation = %reservation_id, offering = %o.id, hours = o.duration_hours, "capacity block extension purchased");
    let mut x = Xml::new();
    if let Some(r) = w.reservation(&reservation_id) {
        x.set("capacityBlockExtensionSet", std::slice::from_ref(&ext), |x, e| write_extension(x, e, r, ctx.now));
    }
    w.extensions.push(ext);

    let drop_response = w.behaviour.drop_extension_purchase_response;
    if drop_response {
        w.faults.dropped_extension_purchase_responses += 1;
    }
    Ok(Output { body: x.into_string(), drop_response })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{Output, dispatch};
    use crate::control::handle;
    use crate::scenario::Scenario;
    use serde_json::Value;

    const REGION: &str = "us-east-1";

    /// A market selling p5.48xlarge extensions and one active block "bought in the console"
    /// (ends 12-02 11:30, the clock at 12-01 00:00: inside the extension window).
    fn world(behaviour: &str) -> (World, String) {
        let mut w = World::new(
            Scenario::parse(
                r#"
                [clock]
                start = "2026-12-01T00:00:00Z"
                [[market]]
                region = "us-east-1"
                instance_type = "p5.48xlarge"
                price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "3.00" } ]
                extension_usd_per_accelerator_hour = "2.50"
                "#,
            )
            .unwrap(),
        );
        let r = handle(
            &mut w,
            "POST",
            "/_sim/reservations",
            br#"{"instance_type": "p5.48xlarge", "instance_count": 1, "start": "2026-11-30T11:30:00Z", "end": "2026-12-02T11:30:00Z"}"#,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let id = serde_json::from_str::<Value>(&r.body).unwrap()["reservation_id"].as_str().unwrap().to_string();
        let r = handle(&mut w, "POST", "/_sim/behaviour", behaviour.as_bytes());
        assert_eq!(r.status, 200, "{}", r.body);
        (w, id)
    }

    fn purchase(w: &mut World, id: &str, dry_run: bool) -> Result<Output, ApiError> {
        let ctx = Ctx {
            region: REGION,
            caller: None,
            account: None,
            action: "DescribeCapacityBlockExtensionOfferings",
            now: w.now(),
        };
        let offer = offering_for(w, id, 24, &ctx).unwrap().expect("the block may be extended");
        let mut pairs = vec![("CapacityBlockExtensionOfferingId", offer.id.as_str()), ("CapacityReservationId", id)];
        if dry_run {
            pairs.push(("DryRun", "true"));
        }
        dispatch(w, REGION, "PurchaseCapacityBlockExtension", &Params::from_pairs(&pairs))
    }

    fn faults(w: &mut World) -> Value {
        let r = handle(w, "GET", "/_sim/state", b"");
        serde_json::from_str::<Value>(&r.body).unwrap()["faults_injected"].clone()
    }

    #[test]
    fn extension_purchases_are_answered_unless_told_to_drop_them() {
        // Dropping block purchases' answers leaves extension purchases alone.
        let (mut w, id) = world(r#"{"drop_purchase_response": true}"#);
        let out = purchase(&mut w, &id, false).unwrap();
        assert!(!out.drop_response);
        assert!(out.body.contains("<capacityBlockExtensionStatus>payment-pending</capacityBlockExtensionStatus>"));
        assert_eq!(w.extensions.len(), 1);
        assert_eq!(faults(&mut w)["dropped_extension_purchase_responses"], 0);
    }

    #[test]
    fn a_dropped_extension_purchase_is_recorded_and_settles_like_any_other() {
        let (mut w, id) = world(r#"{"drop_extension_purchase_response": true}"#);
        // A dry run checks and records nothing, so there is no answer to drop.
        assert_eq!(purchase(&mut w, &id, true).unwrap_err().code, "DryRunOperation");
        assert!(w.extensions.is_empty());

        let out = purchase(&mut w, &id, false).unwrap();
        assert!(out.drop_response, "the answer must never be sent");
        assert_eq!(w.extensions.len(), 1, "EC2 took the purchase all the same");
        assert_eq!(faults(&mut w)["dropped_extension_purchase_responses"], 1);
        assert_eq!(faults(&mut w)["dropped_purchase_responses"], 0);
        // Its payment goes through after the usual delay and moves the end.
        let old_end = w.reservation(&id).unwrap().original_end;
        assert_eq!(w.reservation(&id).unwrap().end(w.now(), &w.extensions), old_end);
        w.clock.advance(3 * 3600);
        assert_eq!(w.extensions[0].status(w.now()), "payment-succeeded");
        assert_eq!(w.reservation(&id).unwrap().end(w.now(), &w.extensions), old_end + chrono::Duration::hours(24));
    }

    fn ask_extension(w: &mut World, id: &str) -> Result<Output, ApiError> {
        let pairs = [("CapacityReservationId", id), ("CapacityBlockExtensionDurationHours", "24")];
        dispatch(w, REGION, "DescribeCapacityBlockExtensionOfferings", &Params::from_pairs(&pairs))
    }

    fn ask_offerings(w: &mut World) -> Result<Output, ApiError> {
        let pairs = [("InstanceType", "p5.48xlarge"), ("InstanceCount", "1"), ("CapacityDurationHours", "24")];
        dispatch(w, REGION, "DescribeCapacityBlockOfferings", &Params::from_pairs(&pairs))
    }

    #[test]
    fn extension_questions_spend_the_limit_each_reading_names() {
        let limit = r#""describe_limit": {"burst": 2, "refill_secs": 3600.0}"#;
        // The default is the harsher reading: the describe limit's own bucket and code.
        let (mut w, id) = world(&format!("{{{limit}}}"));
        assert_eq!(w.behaviour.extension_offerings_limit, crate::scenario::ExtensionOfferingsLimit::Shared);
        assert!(ask_extension(&mut w, &id).is_ok());
        assert!(ask_extension(&mut w, &id).is_ok());
        assert_eq!(ask_extension(&mut w, &id).unwrap_err().code, "CapacityBlockDescribeLimitExceeded");
        assert_eq!(ask_offerings(&mut w).unwrap_err().code, "CapacityBlockDescribeLimitExceeded", "one bucket");
        assert_eq!(faults(&mut w)["describe_limited"], 2);

        let (mut w, id) = world(&format!(r#"{{{limit}, "extension_offerings_limit": "own"}}"#));
        assert!(ask_extension(&mut w, &id).is_ok());
        assert!(ask_extension(&mut w, &id).is_ok());
        assert_eq!(ask_extension(&mut w, &id).unwrap_err().code, "RequestLimitExceeded");
        assert!(ask_offerings(&mut w).is_ok(), "the describe limit is untouched");
        assert_eq!(faults(&mut w)["extension_offerings_limited"], 1);

        let (mut w, id) = world(&format!(r#"{{{limit}, "extension_offerings_limit": "none"}}"#));
        for _ in 0..5 {
            assert!(ask_extension(&mut w, &id).is_ok());
        }
        assert!(ask_offerings(&mut w).is_ok());

        let r = handle(&mut w, "POST", "/_sim/behaviour", br#"{"extension_offerings_limit": "separate"}"#);
        assert_eq!(r.status, 400, "{}", r.body);
    }
}
