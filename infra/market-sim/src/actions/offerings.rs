//! DescribeCapacityBlockOfferings.

use super::{Ctx, authorize, dry_run, positive_u32, require_supported};
use crate::describe_limit::DescribeCall;
use crate::instance_types;
use crate::market::{self, Offering, OfferingQuery};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::scenario::{
    InstanceTypePreferences, OfferingIds, OfferingIdsAcrossAccounts, SegmentedForOneType, UltraserverSearch,
};
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

pub fn describe(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    require_supported(w, ctx)?;
    // The limit is per account and region: the caller's account, as resolved from its
    // credentials, spends its own (see `World::take_describe_token`).
    let account = caller_account(w, ctx);
    let simulated = account == w.scenario.account_id;
    let instance_type = p.get("InstanceType").filter(|s| !s.is_empty()).map(str::to_string);
    let ultraserver_type = p.get("UltraserverType").filter(|s| !s.is_empty()).map(str::to_string);
    let preferences = p.list("InstanceTypePreferences");
    // A family whose Capacity Block quota is 0 gets the describe limit's code on every call,
    // however slowly it asks; it spends no token. An UltraServer search counts against the
    // family of the UltraServer's instances. The quotas are the caller's account's: the
    // simulated account's by region, another account's by its `[[accounts]]` entry.
    // A preference list is refused if any of its families is (the harsher reading: the record
    // does not say how a list meets a quota of 0).
    let family_of = instance_type
        .clone()
        .or_else(|| ultraserver_type.as_deref().and_then(instance_types::ultraserver).map(|u| u.instance_type.into()));
    if family_of.iter().chain(&preferences).any(|t| w.scenario.zero_quota_of(&account, ctx.region, t)) {
        w.faults.quota_zero += 1;
        *w.faults.quota_zero_by_account.entry(account.clone()).or_default() += 1;
        return Err(ApiError::describe_limit());
    }
    // The describe limit is spent before anything else is looked at: invalid and DryRun calls
    // spend their token too (the harsher reading). Every call that gets here is logged.
    let served = w.take_describe_token(&account, ctx.region);
    w.log_describe_call(logged_call(account.clone(), ctx.region, p, served));
    if !served {
        return Err(ApiError::describe_limit());
    }
    // Only then the caller's permission: a call refused by the limit stays refused by it, and a
    // denied call was answered, so it spent its token.
    authorize(w, ctx)?;
    check_preferences(w, &preferences, instance_type.as_deref(), ultraserver_type.as_deref())?;
    // For an UltraServer search a one-type list names the type as InstanceType would.
    let named_type = instance_type.as_deref().or(preferences.first().map(String::as_str));
    let hours = p.int("CapacityDurationHours")?.ok_or_else(|| ApiError::missing("CapacityDurationHours"))?;
    let duration_days = market::duration_days_from_hours(hours, "CapacityDurationHours")?;
    let (instance_count, ultraserver_count) = ultraserver_search_counts(w, p, named_type, ultraserver_type.as_deref())?;
    let start_range = p.timestamp("StartDateRange")?;
    let end_range = p.timestamp("EndDateRange")?;
    if let (Some(s), Some(e)) = (start_range, end_range)
        && e <= s
    {
        return Err(ApiError::invalid_value("EndDateRange must be later than StartDateRange."));
    }
    let size = page_size(p, 1, 1000)?;
    let all_zones = p.bool("AllAvailabilityZones")?.unwrap_or(false);
    check_sold(w, ctx, ultraserver_type.as_deref(), named_type.filter(|_| preferences.len() <= 1))?;
    dry_run(p)?;

    let q = OfferingQuery {
        region: ctx.region.to_string(),
        duration_days,
        instance_type,
        instance_count,
        start_range,
        end_range,
        same_day: w.behaviour.same_day_offerings,
        all_zones,
        ultraserver_type,
        ultraserver_count,
        instance_types: preferences,
        segmented_for_one_type: w.behaviour.segmented_for_one_type == SegmentedForOneType::FirstSegment,
    };
    let all = market::recommend(market::offerings(&w.scenario, &q, ctx.now), w.behaviour.max_offerings_per_answer);
    let (mut page, next) = paginate(&all, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    ids_for_caller(w, ctx, &account, simulated, &mut page);

    let mut x = Xml::new();
    x.set("capacityBlockOfferingSet", &page, write_offering);
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

/// The API model's limit on `InstanceTypePreferences`: up to 10 instance types a question.
pub const MAX_PREFERENCES: usize = 10;

/// `InstanceTypePreferences.N` as the API model gives it (since 2026-11-17): up to 10 instance
/// types, instead of the legacy `InstanceType`; a region under `instance_type_preferences =
/// "unknown"` refuses it as EC2 refuses a parameter it does not know.
fn check_preferences(
    w: &World,
    preferences: &[String],
    instance_type: Option<&str>,
    ultraserver_type: Option<&str>,
) -> Result<(), ApiError> {
    if preferences.is_empty() {
        return Ok(());
    }
    if w.behaviour.instance_type_preferences == InstanceTypePreferences::Unknown {
        return Err(ApiError::client("UnknownParameter", "The parameter InstanceTypePreferences is not recognized"));
    }
    // The model says "either this or the legacy InstanceType": both at once is refused, as EC2
    // refuses other mixed parameters; an UltraServer has one instance type.
    if instance_type.is_some() {
        return Err(ApiError::client(
            "InvalidParameterCombination",
            "InstanceTypePreferences cannot be combined with InstanceType.",
        ));
    }
    if ultraserver_type.is_some() && preferences.len() > 1 {
        return Err(ApiError::client(
            "InvalidParameterCombination",
            "UltraserverType takes one instance type in InstanceTypePreferences.",
        ));
    }
    if preferences.len() > MAX_PREFERENCES {
        return Err(ApiError::invalid_value(format!(
            "InstanceTypePreferences takes at most {MAX_PREFERENCES} instance types, got {}.",
            preferences.len()
        )));
    }
    if let Some(t) = preferences.iter().find(|t| instance_types::lookup(t).is_none()) {
        return Err(ApiError::invalid_value(format!(
            "The instance type '{t}' in InstanceTypePreferences is not valid."
        )));
    }
    Ok(())
}

/// The call's `InstanceCount` and `UltraserverCount`, and the parameters of an UltraServer
/// search judged as the simulator's `ultraserver_search` setting reads them (the comment below
/// says why each is refused).
fn ultraserver_search_counts(
    w: &World,
    p: &Params,
    instance_type: Option<&str>,
    ultraserver_type: Option<&str>,
) -> Result<(Option<u32>, Option<u32>), ApiError> {
    // An UltraServer search: the API model says InstanceType (or InstanceTypePreferences) is
    // required, so with "instance_type_required" one without it is refused and one naming the
    // UltraServer's instance type is answered; with "ultraserver_only" (the earlier reading) the
    // UltraServer is named alone and InstanceType beside it is refused. Either way InstanceCount
    // does not go with UltraserverType (an UltraServer's size is fixed) and a count of
    // UltraServers without their type means nothing: EC2 documents neither, the simulator
    // refuses both, as EC2 refuses other mixed parameters.
    let instance_count = positive_u32(p, "InstanceCount", 64)?;
    let ultraserver_count = positive_u32(p, "UltraserverCount", 64)?;
    let ultra_search = ultraserver_type.is_some() || ultraserver_count.is_some();
    match w.behaviour.ultraserver_search {
        UltraserverSearch::InstanceTypeRequired => {
            if ultra_search && instance_type.is_none() {
                return Err(ApiError::missing("InstanceType"));
            }
            if ultraserver_type.is_some() && instance_count.is_some() {
                return Err(ApiError::client(
                    "InvalidParameterCombination",
                    "UltraserverType cannot be combined with InstanceCount.",
                ));
            }
        }
        UltraserverSearch::UltraserverOnly => {
            if ultraserver_type.is_some() && (instance_type.is_some() || instance_count.is_some()) {
                return Err(ApiError::client(
                    "InvalidParameterCombination",
                    "UltraserverType cannot be combined with InstanceType or InstanceCount.",
                ));
            }
        }
    }
    if ultraserver_count.is_some() && ultraserver_type.is_none() {
        return Err(ApiError::client("InvalidParameterCombination", "UltraserverCount requires UltraserverType."));
    }
    Ok((instance_count, ultraserver_count))
}

/// A named type the region sells: an UltraServer type, its instance type beside it, or an
/// instance type alone.
fn check_sold(
    w: &World,
    ctx: &Ctx<'_>,
    ultraserver_type: Option<&str>,
    instance_type: Option<&str>,
) -> Result<(), ApiError> {
    match (ultraserver_type, instance_type) {
        (Some(u), _) if !w.scenario.sells_ultraserver(ctx.region, u) => {
            return Err(ApiError::invalid_value(format!(
                "The UltraServer type '{u}' is not supported for Capacity Blocks in '{}'. Specify a compatible UltraServer type and try again.",
                ctx.region
            )));
        }
        // Beside UltraserverType the instance type must be the UltraServer's (the simulator's
        // reading: EC2 does not document another combination).
        (Some(u), Some(t)) => {
            let of = instance_types::ultraserver(u).map(|i| i.instance_type);
            if of != Some(t) {
                return Err(ApiError::invalid_value(format!(
                    "The instance type {t} is not the instance type of UltraServer type {u} ({}).",
                    of.unwrap_or("unknown")
                )));
            }
        }
        (None, Some(t)) if !w.scenario.sells(ctx.region, t) => {
            return Err(ApiError::invalid_value(not_sold_message(t, ctx.region)));
        }
        _ => {}
    }
    Ok(())
}

/// The offering ids the caller is shown: minted per answer, or the account's own under
/// "per_account" (see the comment within).
fn ids_for_caller(w: &mut World, ctx: &Ctx<'_>, account: &str, simulated: bool, page: &mut [Offering]) {
    // Under "per_account" an account other than the simulated one is shown ids of its own (the
    // same offerings, in the same order): derived from the offering and the account, or minted
    // for it under "per_answer". The simulated account cannot buy them.
    let other_account = (!simulated
        && w.behaviour.offering_ids_across_accounts == OfferingIdsAcrossAccounts::PerAccount)
        .then_some(account);
    if w.behaviour.offering_ids == OfferingIds::PerAnswer {
        for o in page.iter_mut() {
            o.id = w.mint_offering_id(ctx.region, &o.id, other_account, ctx.now);
        }
    } else if let Some(account) = other_account {
        for o in page.iter_mut() {
            o.id = w.account_offering_id(account, &o.id);
        }
    }
}

/// Whose describe limit a call spends: the account the server resolved from the caller's
/// credentials, else the one `caller_accounts` gives its access key id, else the simulated
/// account (unsigned calls, long-term keys, keys nobody knows).
pub(super) fn caller_account(w: &World, ctx: &Ctx<'_>) -> String {
    ctx.account
        .or_else(|| ctx.caller.and_then(|k| w.behaviour.caller_account(k)))
        .unwrap_or(&w.scenario.account_id)
        .to_string()
}

/// The call as `GET /_sim/describe/calls` lists it: its parameters as given (it has not been
/// validated yet), a count or duration that is not a whole number as null.
fn logged_call(account: String, region: &str, p: &Params, served: bool) -> DescribeCall {
    let text = |name: &str| p.get(name).filter(|s| !s.is_empty()).map(str::to_string);
    DescribeCall {
        account,
        region: region.to_string(),
        instance_type: text("InstanceType"),
        instance_types: p.list("InstanceTypePreferences"),
        ultraserver_type: text("UltraserverType"),
        count: text("InstanceCount").or_else(|| text("UltraserverCount")).and_then(|s| s.trim().parse().ok()),
        duration_hours: p.get("CapacityDurationHours").and_then(|s| s.trim().parse().ok()),
        start_range: text("StartDateRange"),
        end_range: text("EndDateRange"),
        served,
    }
}

/// EC2's answer for a type a region does not sell as Capacity Blocks, as a public client's test
/// records it from a live account; public clients match its "not supported for Capacity Blocks".
pub fn not_sold_message(instance_type: &str, region: &str) -> String {
    format!(
        "The instance type '{instance_type}' is not supported for Capacity Blocks in '{region}'. Specify a compatible instance type and try again."
    )
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
        .leaf("tenancy", "default");
    if let Some(u) = &o.ultraserver {
        x.leaf("ultraserverType", &u.ultraserver_type).num("ultraserverCount", u.count);
    }
    x.num("capacityBlockDurationMinutes", o.duration_minutes).leaf("zoneType", o.zone_type.as_str());
    if !o.segments.is_empty() {
        x.set("capacityBlockOfferingSegmentSet", &o.segments, |x, s| write_segment(x, o, s));
    }
}

/// A segment as the API model's `CapacityBlockOfferingSegment`: every segment of the
/// simulator's offerings shares the offering's schedule and zone type.
fn write_segment(x: &mut Xml, o: &Offering, s: &market::Segment) {
    x.leaf("instanceType", &s.instance_type)
        .leaf("availabilityZone", &s.availability_zone)
        .num("instanceCount", s.instance_count)
        .time("startDate", o.start)
        .time("endDate", o.end)
        .num("capacityBlockDurationHours", o.duration_hours)
        .num("capacityBlockDurationMinutes", o.duration_minutes)
        .leaf("upfrontFee", s.upfront_fee.to_string())
        .leaf("currencyCode", &o.currency)
        .leaf("zoneType", o.zone_type.as_str());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::test_support::{values, world_of};
    use crate::actions::{dispatch, dispatch_as};
    use crate::describe_limit::CallCounts;
    use crate::scenario::Scenario;

    const ACTION: &str = "DescribeCapacityBlockOfferings";

    /// us-east-1 sells p5.48xlarge: 4 starts x 2 zones x 2 counts = 16 one-day offerings. The
    /// describe limit is off unless a test is about it.
    fn world(behaviour: &str) -> World {
        limited_world(&format!("describe_limit = false\n{behaviour}"))
    }

    fn limited_world(behaviour: &str) -> World {
        let market = "[[market]]\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\n\
            azs = [\"us-east-1a\", \"us-east-1b\"]\ncounts = [1, 2]\nstart_days = [1, 2, 3, 4]\n\
            price = [ { from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"4.10\" } ]";
        world_of(behaviour, market)
    }

    fn call(w: &mut World, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
        let mut all = vec![("Action", ACTION)];
        all.extend_from_slice(pairs);
        dispatch(w, "us-east-1", ACTION, &Params::from_pairs(&all)).map(|o| o.body)
    }

    #[test]
    fn the_answer_is_capped_before_it_is_paginated() {
        let mut w = world("max_offerings_per_answer = 0\nsame_day_offerings = false");
        let all = values(&call(&mut w, &[("CapacityDurationHours", "24")]).unwrap(), "capacityBlockOfferingId");
        assert_eq!(all.len(), 16);

        let mut w = world("same_day_offerings = false");
        assert_eq!(w.behaviour.max_offerings_per_answer, 6, "the default cap");
        let capped = values(&call(&mut w, &[("CapacityDurationHours", "24")]).unwrap(), "capacityBlockOfferingId");
        assert_eq!(capped, all[..6].to_vec(), "the six cheapest, in order");
        // Pages of 4 run over the capped list only: 4 + 2, then no token.
        let first = call(&mut w, &[("CapacityDurationHours", "24"), ("MaxResults", "4")]).unwrap();
        assert_eq!(values(&first, "capacityBlockOfferingId"), all[..4].to_vec());
        let token = values(&first, "nextToken").pop().expect("a second page");
        let second =
            call(&mut w, &[("CapacityDurationHours", "24"), ("MaxResults", "4"), ("NextToken", &token)]).unwrap();
        assert_eq!(values(&second, "capacityBlockOfferingId"), all[4..6].to_vec());
        assert!(values(&second, "nextToken").is_empty());
    }

    #[test]
    fn the_describe_limit_refuses_past_the_burst_counting_dry_runs_and_bad_calls() {
        let mut w = limited_world("describe_limit = { burst = 3, refill_secs = 3600.0 }");
        assert!(call(&mut w, &[("CapacityDurationHours", "24")]).is_ok());
        let dry = call(&mut w, &[("CapacityDurationHours", "24"), ("DryRun", "true")]).unwrap_err();
        assert_eq!(dry.code, "DryRunOperation");
        let bad = call(&mut w, &[("CapacityDurationHours", "36")]).unwrap_err();
        assert_eq!(bad.code, "InvalidParameterValue");
        let e = call(&mut w, &[("CapacityDurationHours", "24")]).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (400, "CapacityBlockDescribeLimitExceeded"));
        assert_eq!(e.message, "You've reached the limit for this account.");
        assert_eq!(w.faults.describe_limited, 1);
        // Only DescribeCapacityBlockOfferings spends from it.
        let other = Params::from_pairs(&[("Action", "DescribeCapacityReservations")]);
        assert!(dispatch(&mut w, "us-east-1", "DescribeCapacityReservations", &other).is_ok());
        // Another region of the same account has its own bucket.
        let p = Params::from_pairs(&[("CapacityDurationHours", "24")]);
        assert!(dispatch(&mut w, "us-west-2", ACTION, &p).is_ok());
    }

    #[test]
    fn other_callers_in_the_account_can_leave_capblock_nothing() {
        // A person searched twice in the console at load: the burst of 2 is theirs.
        let mut w = limited_world(
            "describe_limit = { burst = 2, refill_secs = 3600.0 }\n\
             describe_limit_others = [{ name = \"console\", calls = 2, every_secs = 3600 }]",
        );
        let e = call(&mut w, &[("CapacityDurationHours", "24")]).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (400, "CapacityBlockDescribeLimitExceeded"));
        assert_eq!(w.faults.describe_limited, 1);
        let others = w.others_report();
        assert_eq!((others.calls, others.refused), (2, 0), "the console's calls were served");
    }

    #[test]
    fn a_zero_quota_family_is_refused_on_every_call_without_spending_tokens() {
        let mut w = limited_world("describe_limit = { burst = 1, refill_secs = 3600.0 }");
        w.scenario.regions.push(
            Scenario::parse("[[regions]]\nname = \"us-east-1\"\nzero_quota_families = [\"p5\"]").unwrap().regions[0]
                .clone(),
        );
        for _ in 0..5 {
            let e = call(&mut w, &[("CapacityDurationHours", "24"), ("InstanceType", "p5.48xlarge")]).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "CapacityBlockDescribeLimitExceeded"));
            assert_eq!(e.message, ApiError::describe_limit().message, "the same message as the rate limit");
        }
        assert_eq!((w.faults.quota_zero, w.faults.describe_limited), (5, 0));
        // The one token is still there: a search without that family is answered...
        assert!(call(&mut w, &[("CapacityDurationHours", "24")]).is_ok());
        // ...and the next is refused by the rate limit, counted as such.
        assert_eq!(
            call(&mut w, &[("CapacityDurationHours", "24")]).unwrap_err().code,
            "CapacityBlockDescribeLimitExceeded"
        );
        assert_eq!((w.faults.quota_zero, w.faults.describe_limited), (5, 1));
    }

    const SIM: &str = "111122223333";
    const MEMBER: &str = "444455556666";

    fn zero_quota_p5(w: &mut World) {
        let regions = "[[regions]]\nname = \"us-east-1\"\nzero_quota_families = [\"p5\"]";
        w.scenario.regions.push(Scenario::parse(regions).unwrap().regions[0].clone());
    }

    #[test]
    fn a_member_account_spends_its_own_limit_and_is_not_refused_for_the_accounts_quota_0() {
        let mut w = limited_world(&format!(
            "describe_limit = {{ burst = 1, refill_secs = 3600.0 }}\ncaller_accounts = {{ AKIAMEMBER = \"{MEMBER}\" }}"
        ));
        zero_quota_p5(&mut w);
        let p5 = Params::from_pairs(&[("CapacityDurationHours", "24"), ("InstanceType", "p5.48xlarge")]);
        // The simulated account (an unsigned call, a key not listed) has quota 0 for p5.
        for key in [None, Some("AKIAOTHER")] {
            let e = dispatch_as(&mut w, "us-east-1", key, ACTION, &p5).unwrap_err();
            assert_eq!(e.code, "CapacityBlockDescribeLimitExceeded");
        }
        assert_eq!((w.faults.quota_zero, w.faults.describe_limited), (2, 0));
        // The member account is answered, from a bucket of its own (burst 1)...
        let body = dispatch_as(&mut w, "us-east-1", Some("AKIAMEMBER"), ACTION, &p5).unwrap().body;
        assert_eq!(values(&body, "instanceType")[0], "p5.48xlarge", "{body}");
        let e = dispatch_as(&mut w, "us-east-1", Some("AKIAMEMBER"), ACTION, &p5).unwrap_err();
        assert_eq!(e.code, "CapacityBlockDescribeLimitExceeded");
        assert_eq!((w.faults.quota_zero, w.faults.describe_limited), (2, 1));
        // ...and the simulated account's one token is still there (the server's resolution, an
        // account in the context, counts like the key's entry).
        let any = Params::from_pairs(&[("CapacityDurationHours", "24")]);
        assert!(dispatch_as(&mut w, "us-east-1", Some("AKIAOTHER"), ACTION, &any).is_ok());
        let by_server = crate::actions::dispatch_for(&mut w, "us-east-1", None, Some(MEMBER), ACTION, &any);
        assert_eq!(by_server.unwrap_err().code, "CapacityBlockDescribeLimitExceeded", "the member's bucket is empty");
        // Quota-0 refusals never reached the limit: they are not counted by account.
        let by = w.describe_calls_by_account();
        assert_eq!(by[MEMBER], CallCounts { calls: 3, refused: 2 });
        assert_eq!(by[SIM], CallCounts { calls: 1, refused: 0 });
        assert_eq!(w.faults.describe_limited_by_account, std::collections::BTreeMap::from([(MEMBER.to_string(), 2)]));
    }

    #[test]
    fn a_member_account_with_a_quota_of_0_is_refused_for_it_and_the_simulated_account_is_not() {
        let mut w = limited_world(&format!(
            "describe_limit = {{ burst = 1, refill_secs = 3600.0 }}\ncaller_accounts = {{ AKIAMEMBER = \"{MEMBER}\" }}"
        ));
        let accounts =
            format!("[[accounts]]\nid = \"{MEMBER}\"\nzero_quota_families = [\"P5\"]\nregions = [\"us-east-1\"]");
        w.scenario.accounts = Scenario::parse(&accounts).unwrap().accounts;
        let p5 = Params::from_pairs(&[("CapacityDurationHours", "24"), ("InstanceType", "p5.48xlarge")]);
        // The member: refused on every call, however many, and no token spent...
        for _ in 0..4 {
            let e = dispatch_as(&mut w, "us-east-1", Some("AKIAMEMBER"), ACTION, &p5).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "CapacityBlockDescribeLimitExceeded"));
            assert_eq!(e.message, ApiError::describe_limit().message, "the same message as the rate limit");
        }
        let by = std::collections::BTreeMap::from([(MEMBER.to_string(), 4)]);
        assert_eq!((w.faults.quota_zero, &w.faults.quota_zero_by_account, w.faults.describe_limited), (4, &by, 0));
        // ...a search without the family spends its one token...
        let any = Params::from_pairs(&[("CapacityDurationHours", "24")]);
        assert!(dispatch_as(&mut w, "us-east-1", Some("AKIAMEMBER"), ACTION, &any).is_ok());
        // ...and the simulated account is answered for p5: the quota is the member's.
        let body = dispatch_as(&mut w, "us-east-1", None, ACTION, &p5).unwrap().body;
        assert_eq!(values(&body, "instanceType")[0], "p5.48xlarge", "{body}");
        assert_eq!(w.faults.quota_zero, 4);
    }

    #[test]
    fn every_call_that_reaches_the_limit_is_logged_as_given() {
        let mut w = limited_world("describe_limit = { burst = 2, refill_secs = 3600.0 }");
        let off = "[[regions]]\nname = \"eu-north-1\"\nsupported = false";
        w.scenario.regions.push(Scenario::parse(off).unwrap().regions[0].clone());
        let p = Params::from_pairs(&[("CapacityDurationHours", "24")]);
        assert_eq!(dispatch(&mut w, "eu-north-1", ACTION, &p).unwrap_err().code, "UnsupportedOperation");
        assert!(w.describe_calls().0.is_empty(), "a region without the feature never reaches the limit");
        call(
            &mut w,
            &[
                ("CapacityDurationHours", "48"),
                ("InstanceType", "p5.48xlarge"),
                ("InstanceCount", "2"),
                ("StartDateRange", "2026-12-02T00:00:00Z"),
                ("EndDateRange", "2026-12-09T00:00:00Z"),
            ],
        )
        .unwrap();
        // Invalid: no duration, an UltraServer search without its instance type, a count of
        // UltraServers (InstanceCount empty = absent).
        let bad = [("InstanceCount", ""), ("UltraserverType", "u-p6e-gb200x72"), ("UltraserverCount", "3")];
        assert_eq!(call(&mut w, &bad).unwrap_err().code, "MissingParameter");
        let refused = [("CapacityDurationHours", "x"), ("InstanceCount", "two")];
        assert_eq!(call(&mut w, &refused).unwrap_err().code, "CapacityBlockDescribeLimitExceeded");
        let (calls, dropped) = w.describe_calls();
        assert_eq!(dropped, 0);
        assert_eq!(
            serde_json::to_value(calls).unwrap(),
            serde_json::json!([
                {"account": SIM, "region": "us-east-1", "instance_type": "p5.48xlarge", "ultraserver_type": null,
                 "count": 2, "duration_hours": 48, "start_range": "2026-12-02T00:00:00Z",
                 "end_range": "2026-12-09T00:00:00Z", "served": true},
                {"account": SIM, "region": "us-east-1", "instance_type": null, "ultraserver_type": "u-p6e-gb200x72",
                 "count": 3, "duration_hours": null, "start_range": null, "end_range": null, "served": true},
                {"account": SIM, "region": "us-east-1", "instance_type": null, "ultraserver_type": null,
                 "count": null, "duration_hours": null, "start_range": null, "end_range": null, "served": false},
            ])
        );
    }

    #[test]
    fn an_unsold_instance_type_is_an_invalid_parameter() {
        let mut w = world("");
        for t in ["p4d.24xlarge", "m9.fake"] {
            let e = call(&mut w, &[("CapacityDurationHours", "24"), ("InstanceType", t)]).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "InvalidParameterValue"));
            assert_eq!(
                e.message,
                format!(
                    "The instance type '{t}' is not supported for Capacity Blocks in 'us-east-1'. Specify a compatible instance type and try again."
                )
            );
            assert!(e.message.contains("not supported"), "what public clients match");
            // Parameter validation comes before DryRun.
            let dry = call(&mut w, &[("CapacityDurationHours", "24"), ("InstanceType", t), ("DryRun", "true")]);
            assert_eq!(dry.unwrap_err().code, "InvalidParameterValue");
        }
        // Sold here (its line), and a request without InstanceType is not checked.
        assert!(call(&mut w, &[("CapacityDurationHours", "24"), ("InstanceType", "p5.48xlarge")]).is_ok());
        assert!(call(&mut w, &[("CapacityDurationHours", "24")]).is_ok());
        // Another region with no line for it does not sell it.
        let p = Params::from_pairs(&[("CapacityDurationHours", "24"), ("InstanceType", "p5.48xlarge")]);
        assert_eq!(dispatch(&mut w, "us-west-2", ACTION, &p).unwrap_err().code, "InvalidParameterValue");
        // A sells list may name a type without a line: sold, nothing on offer.
        w.scenario.regions.push(
            Scenario::parse("[[regions]]\nname = \"us-west-2\"\nsells = [\"p5.48xlarge\"]").unwrap().regions[0].clone(),
        );
        let body = dispatch(&mut w, "us-west-2", ACTION, &p).unwrap().body;
        assert!(values(&body, "capacityBlockOfferingId").is_empty());
    }

    #[test]
    fn local_zone_offerings_come_back_with_all_availability_zones_and_are_purchasable() {
        let mut w = world("");
        let line = Scenario::parse(
            r#"
            [[market]]
            region = "us-east-1"
            instance_type = "p6-b200.48xlarge"
            zone_type = "local-zone"
            azs = ["us-east-1-dfw-2a"]
            price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "3.00" } ]
            "#,
        )
        .unwrap();
        w.scenario.market.extend(line.market);
        let ask = [("CapacityDurationHours", "24"), ("InstanceType", "p6-b200.48xlarge")];
        let body = call(&mut w, &ask).unwrap();
        assert!(values(&body, "capacityBlockOfferingId").is_empty(), "not opted in: {body}");
        let body = call(&mut w, &[ask[0], ask[1], ("AllAvailabilityZones", "true")]).unwrap();
        // 11:30 tomorrow, and the two same-day blocks.
        assert_eq!(values(&body, "availabilityZone"), vec!["us-east-1-dfw-2a"; 3]);
        assert_eq!(values(&body, "zoneType"), vec!["local-zone"; 3]);
        assert!(call(&mut w, &[ask[0], ask[1], ("AllAvailabilityZones", "false")]).unwrap().find("<item>").is_none());
        assert_eq!(
            call(&mut w, &[ask[0], ("AllAvailabilityZones", "maybe")]).unwrap_err().code,
            "InvalidParameterValue"
        );
        // Every offering says its zone type.
        let body = call(&mut w, &[ask[0]]).unwrap();
        assert_eq!(values(&body, "zoneType").len(), values(&body, "capacityBlockOfferingId").len());
        assert!(values(&body, "zoneType").iter().all(|z| z == "availability-zone"));
        // Bought by id without AllAvailabilityZones.
        let body = call(&mut w, &[ask[0], ask[1], ("AllAvailabilityZones", "true")]).unwrap();
        let id = values(&body, "capacityBlockOfferingId")[0].clone();
        let p = Params::from_pairs(&[("CapacityBlockOfferingId", &id), ("InstancePlatform", "Linux/UNIX")]);
        dispatch(&mut w, "us-east-1", "PurchaseCapacityBlock", &p).unwrap();
        assert_eq!(w.reservations[0].availability_zone, "us-east-1-dfw-2a");
    }

    #[test]
    fn whole_day_offerings_write_zero_minutes() {
        let mut w = world("same_day_offerings = false");
        let body = call(&mut w, &[("CapacityDurationHours", "48"), ("InstanceCount", "1")]).unwrap();
        assert!(values(&body, "capacityBlockDurationHours").is_empty(), "p5 line sells only 1 day");
        let body = call(&mut w, &[("CapacityDurationHours", "24"), ("InstanceCount", "1")]).unwrap();
        assert_eq!(values(&body, "capacityBlockDurationHours"), vec!["24"; 6]);
        assert_eq!(values(&body, "capacityBlockDurationMinutes"), vec!["0"; 6]);
    }

    #[test]
    fn a_same_day_offering_is_answered_with_its_minutes_and_can_be_bought() {
        let mut w = world("");
        assert!(w.behaviour.same_day_offerings, "on by default");
        w.clock.set(chrono::DateTime::parse_from_rfc3339("2026-12-01T04:25:00Z").unwrap().to_utc());
        // The cheapest six: all 4.10, so the earliest starts first: the four 04:55 blocks.
        let body = call(&mut w, &[("CapacityDurationHours", "24")]).unwrap();
        let starts = values(&body, "startDate");
        assert_eq!(starts[..4], ["2026-12-01T04:55:00.000Z"; 4]);
        let hours = values(&body, "capacityBlockDurationHours");
        let minutes = values(&body, "capacityBlockDurationMinutes");
        let ends = values(&body, "endDate");
        // The shorter (to 11:30 today) and the longer (to 11:30 tomorrow) of zone a, count 1;
        // they tie on start, zone and count, so the offering id orders them.
        let short = (0..2).find(|&i| ends[i] == "2026-12-01T11:30:00.000Z").expect("the shorter block");
        let long = 1 - short;
        assert_eq!(ends[long], "2026-12-02T11:30:00.000Z");
        assert_eq!((hours[short].as_str(), minutes[short].as_str()), ("6", "35"), "04:55 -> 11:30");
        assert_eq!((hours[long].as_str(), minutes[long].as_str()), ("30", "35"));
        let ids = values(&body, "capacityBlockOfferingId");
        assert!(ids[0] < ids[1], "ties are ordered by id");
        assert_eq!(values(&body, "upfrontFee")[short], "215.93");
        let id = ids[short].clone();

        let p = Params::from_pairs(&[("CapacityBlockOfferingId", &id), ("InstancePlatform", "Linux/UNIX")]);
        let out = dispatch(&mut w, "us-east-1", "PurchaseCapacityBlock", &p).unwrap();
        assert!(out.body.contains("<startDate>2026-12-01T04:55:00.000Z</startDate>"), "{}", out.body);
        assert!(out.body.contains("<endDate>2026-12-01T11:30:00.000Z</endDate>"), "{}", out.body);
        let r = &w.reservations[0];
        assert_eq!((r.offering_id.as_deref(), r.upfront_fee.to_string()), (Some(id.as_str()), "215.93".into()));

        // With same-day offerings off they are neither answered nor purchasable.
        w.behaviour.same_day_offerings = false;
        let body = call(&mut w, &[("CapacityDurationHours", "24")]).unwrap();
        assert!(!values(&body, "startDate").iter().any(|s| s.starts_with("2026-12-01")));
        let err = dispatch(&mut w, "us-east-1", "PurchaseCapacityBlock", &p).unwrap_err();
        assert_eq!(err.code, "InvalidCapacityBlockOfferingIdNotFound");
    }

    fn purchase(w: &mut World, region: &str, id: &str) -> Result<String, ApiError> {
        let p = Params::from_pairs(&[("CapacityBlockOfferingId", id), ("InstancePlatform", "Linux/UNIX")]);
        dispatch(w, region, "PurchaseCapacityBlock", &p).map(|o| o.body)
    }

    #[test]
    fn offering_ids_are_stable_by_default_and_the_documented_codes_refuse_the_rest() {
        let mut w = world("same_day_offerings = false");
        let ask = [("CapacityDurationHours", "24"), ("InstanceCount", "1")];
        let first = values(&call(&mut w, &ask).unwrap(), "capacityBlockOfferingId");
        assert_eq!(values(&call(&mut w, &ask).unwrap(), "capacityBlockOfferingId"), first, "the same ids again");
        // Hours later, the same ids are still purchasable (no expiry under "stable").
        w.clock.advance(6 * 3600);
        assert!(purchase(&mut w, "us-east-1", &first[0]).is_ok());
        for (id, code) in [
            ("cb-0123456789abcdef0", "InvalidCapacityBlockOfferingIdNotFound"),
            ("cb-01234567", "InvalidCapacityBlockOfferingIdNotFound"),
            ("cb-xyz", "InvalidCapacityBlockOfferingIdMalformed"),
            ("cb-0123456789abcdef", "InvalidCapacityBlockOfferingIdMalformed"),
            ("cr-0123456789abcdef0", "InvalidCapacityBlockOfferingIdMalformed"),
            ("offering", "InvalidCapacityBlockOfferingIdMalformed"),
        ] {
            let e = purchase(&mut w, "us-east-1", id).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, code), "{id}");
            assert!(e.message.contains(id), "{}", e.message);
        }
        // Another region's id is not found here.
        assert_eq!(
            purchase(&mut w, "us-west-2", &first[1]).unwrap_err().code,
            "InvalidCapacityBlockOfferingIdNotFound"
        );
        assert_eq!(w.minted_count(), 0, "nothing minted under stable");
    }

    #[test]
    fn per_answer_ids_are_fresh_in_every_answer_and_expire_after_their_ttl() {
        let mut w = world("same_day_offerings = false\noffering_ids = \"per_answer\"\noffering_id_ttl_secs = 300");
        let ask = [("CapacityDurationHours", "24"), ("InstanceCount", "1")];
        let a = call(&mut w, &ask).unwrap();
        let b = call(&mut w, &ask).unwrap();
        let (ids_a, ids_b) = (values(&a, "capacityBlockOfferingId"), values(&b, "capacityBlockOfferingId"));
        // The same offerings, in the same order, under new ids.
        assert_eq!(ids_a.len(), 6);
        for tag in ["startDate", "availabilityZone", "upfrontFee", "instanceCount"] {
            assert_eq!(values(&a, tag), values(&b, tag), "{tag}");
        }
        assert!(ids_a.iter().all(|id| !ids_b.contains(id) && id.len() == 20 && id.starts_with("cb-")));
        assert_eq!(w.minted_count(), 12);
        // Pages mint for what they hold.
        let page = call(&mut w, &[ask[0], ask[1], ("MaxResults", "4")]).unwrap();
        assert_eq!(values(&page, "capacityBlockOfferingId").len(), 4);
        assert_eq!(w.minted_count(), 16);
        // A DryRun answer mints nothing.
        assert_eq!(call(&mut w, &[ask[0], ("DryRun", "true")]).unwrap_err().code, "DryRunOperation");
        assert_eq!(w.minted_count(), 16);

        // An id of an earlier answer is purchasable while younger than the TTL (sim time)...
        w.clock.advance(299);
        let body = purchase(&mut w, "us-east-1", &ids_a[0]).unwrap();
        assert!(body.contains("<totalInstanceCount>0</totalInstanceCount>"), "{body}");
        let r = w.reservations.last().unwrap();
        assert_eq!(r.offering_id.as_deref(), Some(ids_a[0].as_str()), "recorded as the id named");
        assert_eq!(r.start.to_rfc3339(), "2026-12-02T11:30:00+00:00");
        // ...and expired from then on (a DryRun too), while a fresh answer's ids work.
        w.clock.advance(1);
        for dry in ["false", "true"] {
            let p = Params::from_pairs(&[
                ("CapacityBlockOfferingId", &ids_a[1]),
                ("InstancePlatform", "Linux/UNIX"),
                ("DryRun", dry),
            ]);
            let e = dispatch(&mut w, "us-east-1", "PurchaseCapacityBlock", &p).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "InvalidCapacityBlockOfferingIdExpired"), "DryRun={dry}");
            assert_eq!(e.message, format!("The Capacity Block offering ID '{}' is no longer available.", ids_a[1]));
        }
        assert_eq!(w.reservations.len(), 1);
        let fresh = values(&call(&mut w, &ask).unwrap(), "capacityBlockOfferingId");
        assert!(purchase(&mut w, "us-east-1", &fresh[1]).is_ok());
        // Never minted: not found, a stable id included; another region's: not found.
        let stable = w.minted(&fresh[2]).unwrap().offering_id.clone();
        for id in [stable.as_str(), "cb-0123456789abcdef0"] {
            assert_eq!(purchase(&mut w, "us-east-1", id).unwrap_err().code, "InvalidCapacityBlockOfferingIdNotFound");
        }
        assert_eq!(
            purchase(&mut w, "us-west-2", &fresh[2]).unwrap_err().code,
            "InvalidCapacityBlockOfferingIdNotFound"
        );
        assert_eq!(purchase(&mut w, "us-east-1", "cb-?").unwrap_err().code, "InvalidCapacityBlockOfferingIdMalformed");
        // A young id whose offering is no longer on offer (its start came too close): not found.
        let late = values(&call(&mut w, &ask).unwrap(), "capacityBlockOfferingId");
        let m = w.minted(&late[0]).unwrap().clone();
        let o = crate::market::find_offering(&w.scenario, "us-east-1", &m.offering_id, w.now(), false).unwrap();
        w.behaviour.offering_id_ttl_secs = 10 * 24 * 3600;
        w.clock.set(o.start - chrono::Duration::minutes(29));
        assert_eq!(purchase(&mut w, "us-east-1", &late[0]).unwrap_err().code, "InvalidCapacityBlockOfferingIdNotFound");
        // Back to "stable": minted ids keep their meaning, stable ids work again.
        w.clock.set(m.at);
        w.behaviour.offering_ids = OfferingIds::Stable;
        assert!(purchase(&mut w, "us-east-1", &late[1]).is_ok());
        assert!(purchase(&mut w, "us-east-1", &stable).is_ok());
    }

    const OTHER_MEMBER: &str = "777788889999";

    /// A world where AKIAMEMBER is MEMBER's key, AKIAOTHER OTHER_MEMBER's and AKIASIM a key of the
    /// simulated account itself; whole-day offerings only.
    fn accounts_world(behaviour: &str) -> World {
        world(&format!(
            "same_day_offerings = false\n\
             caller_accounts = {{ AKIAMEMBER = \"{MEMBER}\", AKIAOTHER = \"{OTHER_MEMBER}\", AKIASIM = \"{SIM}\" }}\n\
             {behaviour}"
        ))
    }

    const ASK: [(&str, &str); 2] = [("CapacityDurationHours", "24"), ("InstanceCount", "1")];

    /// The answer to ASK for the caller signing with `key` (None: unsigned, the simulated account).
    fn ask_as(w: &mut World, key: Option<&str>) -> String {
        dispatch_as(w, "us-east-1", key, ACTION, &Params::from_pairs(&ASK)).unwrap().body
    }

    fn ids_as(w: &mut World, key: Option<&str>) -> Vec<String> {
        values(&ask_as(w, key), "capacityBlockOfferingId")
    }

    fn ec2_shaped(id: &str) -> bool {
        id.len() == 20
            && id.starts_with("cb-")
            && id[3..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    }

    #[test]
    fn under_shared_ids_a_member_account_sees_are_the_simulated_accounts_and_buy() {
        let mut w = accounts_world("");
        assert_eq!(w.behaviour.offering_ids_across_accounts, OfferingIdsAcrossAccounts::Shared, "the default");
        let own = ids_as(&mut w, None);
        assert_eq!(own.len(), 6);
        assert_eq!(ids_as(&mut w, Some("AKIAMEMBER")), own, "the market's ids, whoever asks");
        assert_eq!(ids_as(&mut w, Some("AKIAOTHER")), own);
        assert_eq!(w.describe_calls_by_account()[MEMBER].calls, 1, "the member was resolved as itself");
        // The simulated account buys what the member was shown.
        let member = ids_as(&mut w, Some("AKIAMEMBER"));
        purchase(&mut w, "us-east-1", &member[2]).expect("a member's id is the market's");
        assert_eq!(w.reservations.len(), 1);
        assert_eq!(w.reservations[0].offering_id.as_deref(), Some(member[2].as_str()));
        assert_eq!(w.other_account_ids_count(), 0);
    }

    #[test]
    fn under_per_account_a_member_account_sees_ids_of_its_own_that_the_simulated_account_cannot_buy() {
        let mut w = accounts_world("offering_ids_across_accounts = \"per_account\"");
        let own_body = ask_as(&mut w, None);
        let own = values(&own_body, "capacityBlockOfferingId");
        let member_body = ask_as(&mut w, Some("AKIAMEMBER"));
        let member = values(&member_body, "capacityBlockOfferingId");
        // The same offerings in the same order, each under an id of the member's.
        for tag in ["startDate", "endDate", "availabilityZone", "upfrontFee", "instanceCount"] {
            assert_eq!(values(&member_body, tag), values(&own_body, tag), "{tag}");
        }
        assert_eq!(member.len(), 6);
        assert!(member.iter().all(|id| ec2_shaped(id) && !own.contains(id)), "{member:?} vs {own:?}");
        let distinct: std::collections::BTreeSet<_> = member.iter().collect();
        assert_eq!(distinct.len(), 6);
        // Stable for the account: asked again, through the server's resolution (the account in
        // the context), and in a new world (derived, not drawn from a stream).
        assert_eq!(ids_as(&mut w, Some("AKIAMEMBER")), member);
        let by_server =
            crate::actions::dispatch_for(&mut w, "us-east-1", None, Some(MEMBER), ACTION, &Params::from_pairs(&ASK));
        assert_eq!(values(&by_server.unwrap().body, "capacityBlockOfferingId"), member);
        let mut again = accounts_world("offering_ids_across_accounts = \"per_account\"");
        assert_eq!(ids_as(&mut again, Some("AKIAMEMBER")), member);
        // Another account has ids of its own again; a key of the simulated account gets its ids.
        let other = ids_as(&mut w, Some("AKIAOTHER"));
        assert!(other.iter().all(|id| ec2_shaped(id) && !own.contains(id) && !member.contains(id)), "{other:?}");
        assert_eq!(ids_as(&mut w, Some("AKIASIM")), own);
        assert_eq!(ids_as(&mut w, Some("AKIANOTLISTED")), own);
        assert_eq!(w.other_account_ids_count(), 12);
        assert_eq!(w.shown_to_other_account(&member[0]), Some(MEMBER));

        // The simulated account buying a member's id: not found, DryRun included, nothing made.
        for dry in ["false", "true"] {
            let p = Params::from_pairs(&[
                ("CapacityBlockOfferingId", &member[0]),
                ("InstancePlatform", "Linux/UNIX"),
                ("DryRun", dry),
            ]);
            let e = dispatch(&mut w, "us-east-1", "PurchaseCapacityBlock", &p).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (400, "InvalidCapacityBlockOfferingIdNotFound"), "DryRun={dry}");
            assert_eq!(
                e.message,
                format!("The Capacity Block offering ID '{}' cannot be found for this account.", member[0])
            );
        }
        for id in other.iter().chain(&member) {
            assert_eq!(purchase(&mut w, "us-east-1", id).unwrap_err().code, "InvalidCapacityBlockOfferingIdNotFound");
        }
        assert!(w.reservations.is_empty(), "nothing bought");
        // Its own ids still buy, the one the member was shown under another id included.
        purchase(&mut w, "us-east-1", &own[0]).expect("the simulated account's own id");
        assert_eq!(w.reservations.len(), 1);
        assert_eq!(w.reservations[0].offering_id.as_deref(), Some(own[0].as_str()));
        // Back to "shared": the member is shown the market's ids, which buy; what it was shown as
        // its own stays its own.
        w.behaviour.offering_ids_across_accounts = OfferingIdsAcrossAccounts::Shared;
        assert_eq!(ids_as(&mut w, Some("AKIAMEMBER")), own);
        assert_eq!(
            purchase(&mut w, "us-east-1", &member[1]).unwrap_err().code,
            "InvalidCapacityBlockOfferingIdNotFound"
        );
        assert!(purchase(&mut w, "us-east-1", &own[1]).is_ok());
    }

    #[test]
    fn per_account_composes_with_per_answer_ids() {
        let mut w = accounts_world(
            "offering_ids = \"per_answer\"\noffering_id_ttl_secs = 300\noffering_ids_across_accounts = \"per_account\"",
        );
        let own = ids_as(&mut w, None);
        let member_body = ask_as(&mut w, Some("AKIAMEMBER"));
        let member = values(&member_body, "capacityBlockOfferingId");
        let member_again = ids_as(&mut w, Some("AKIAMEMBER"));
        // Fresh ids in every answer, the member's as well; all minted, the member's its own.
        assert_eq!((own.len(), member.len()), (6, 6));
        assert!(member.iter().chain(&member_again).all(|id| ec2_shaped(id) && !own.contains(id)));
        assert!(member.iter().all(|id| !member_again.contains(id)), "per answer");
        assert_eq!(w.minted_count(), 18);
        assert_eq!(w.other_account_ids_count(), 12);
        // The same offerings as the simulated account's answer.
        for (m, o) in member.iter().zip(&own) {
            assert_eq!(w.minted(m).unwrap().offering_id, w.minted(o).unwrap().offering_id);
        }
        // Young, on offer, minted: still not the simulated account's to buy.
        let e = purchase(&mut w, "us-east-1", &member[0]).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (400, "InvalidCapacityBlockOfferingIdNotFound"));
        assert_eq!(
            e.message,
            format!("The Capacity Block offering ID '{}' cannot be found for this account.", member[0])
        );
        // Past the TTL too: not found (never ...Expired, it was never this account's).
        w.clock.advance(300);
        assert_eq!(
            purchase(&mut w, "us-east-1", &member[1]).unwrap_err().code,
            "InvalidCapacityBlockOfferingIdNotFound"
        );
        assert!(w.reservations.is_empty());
        // The simulated account's own minted ids behave as before: expired now, a fresh one buys.
        assert_eq!(purchase(&mut w, "us-east-1", &own[0]).unwrap_err().code, "InvalidCapacityBlockOfferingIdExpired");
        let fresh = ids_as(&mut w, Some("AKIASIM"));
        assert!(w.shown_to_other_account(&fresh[0]).is_none());
        purchase(&mut w, "us-east-1", &fresh[0]).expect("the simulated account's fresh id");
        assert_eq!(w.reservations.len(), 1);

        // per_answer with "shared": a member's minted ids are the market's and buy.
        let mut w = accounts_world("offering_ids = \"per_answer\"");
        let member = ids_as(&mut w, Some("AKIAMEMBER"));
        assert_eq!(w.other_account_ids_count(), 0);
        purchase(&mut w, "us-east-1", &member[0]).expect("shared: a member's minted id buys");
        assert_eq!(w.reservations[0].offering_id.as_deref(), Some(member[0].as_str()));
    }
}
