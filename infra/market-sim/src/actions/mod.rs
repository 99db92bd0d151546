//! EC2 actions. Each handler checks that the region has the feature (capacity-block actions),
//! asks [`authorize`] whether the caller may call it, validates its parameters, applies DryRun,
//! reads or changes the world and returns the XML body that goes inside `<{Action}Response>`.

mod blocks;
mod extensions;
mod filters;
mod instances;
mod launch_templates;
mod offerings;
mod purchase;
mod reservations;
#[cfg(test)]
mod segment_tests;
#[cfg(test)]
mod test_support;
mod usage;

use chrono::{DateTime, Utc};

pub use purchase::block_id;

use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::world::World;

/// The answer of a successful action.
#[derive(Debug)]
pub struct Output {
    pub body: String,
    /// The action took effect but its response must never be sent (see
    /// `drop_purchase_response` and `drop_extension_purchase_response`).
    pub drop_response: bool,
}

impl From<String> for Output {
    fn from(body: String) -> Self {
        Self { body, drop_response: false }
    }
}

pub struct Ctx<'a> {
    pub region: &'a str,
    /// The access key id the call was signed with; `None` for an unsigned call (never refused).
    pub caller: Option<&'a str>,
    /// The caller's account as the server resolved it from its credentials (`caller_accounts`,
    /// or STS for temporary keys); `None`: by `caller_accounts` here, else the simulated
    /// account. Only DescribeCapacityBlockOfferings reads it (whose describe limit it spends).
    pub account: Option<&'a str>,
    pub action: &'a str,
    pub now: DateTime<Utc>,
}

pub use crate::action_names::ACTIONS;

/// One call by an unsigned caller (whom no `iam_denials` entry names).
pub fn dispatch(w: &mut World, region: &str, action: &str, p: &Params) -> Result<Output, ApiError> {
    dispatch_as(w, region, None, action, p)
}

/// One call signed with the access key id `caller`.
pub fn dispatch_as(
    w: &mut World,
    region: &str,
    caller: Option<&str>,
    action: &str,
    p: &Params,
) -> Result<Output, ApiError> {
    dispatch_for(w, region, caller, None, action, p)
}

/// One call signed with the access key id `caller`, of `account` when the server resolved it.
pub fn dispatch_for(
    w: &mut World,
    region: &str,
    caller: Option<&str>,
    account: Option<&str>,
    action: &str,
    p: &Params,
) -> Result<Output, ApiError> {
    let ctx = Ctx { region, caller, account, action, now: w.now() };
    match action {
        "" => Err(ApiError::client("MissingAction", "The request must contain the parameter Action")),
        "DescribeCapacityBlockOfferings" => offerings::describe(w, &ctx, p).map(Output::from),
        "PurchaseCapacityBlock" => purchase::purchase(w, &ctx, p),
        "DescribeCapacityReservations" => reservations::describe(w, &ctx, p).map(Output::from),
        "DescribeCapacityBlockExtensionOfferings" => extensions::describe_offerings(w, &ctx, p).map(Output::from),
        "PurchaseCapacityBlockExtension" => extensions::purchase(w, &ctx, p),
        "DescribeInstanceTypes" => instances::describe_instance_types(w, &ctx, p).map(Output::from),
        "DescribeInstances" => instances::describe_instances(w, &ctx, p).map(Output::from),
        "GetCapacityReservationUsage" => usage::get(w, &ctx, p).map(Output::from),
        "DescribeCapacityBlocks" => guarded(w, &ctx, p, blocks::describe_blocks),
        "DescribeCapacityBlockStatus" => guarded(w, &ctx, p, blocks::describe_status),
        "DescribeCapacityBlockExtensionHistory" => guarded(w, &ctx, p, blocks::describe_extension_history),
        "CreateLaunchTemplate" => launch_templates::create(w, &ctx, p).map(Output::from),
        "CreateLaunchTemplateVersion" => launch_templates::create_version(w, &ctx, p).map(Output::from),
        "DescribeLaunchTemplateVersions" => launch_templates::describe_versions(w, &ctx, p).map(Output::from),
        other => {
            Err(ApiError::client("InvalidAction", format!("The action {other} is not valid for this web service.")))
        }
    }
}

/// A capacity-block action that only reads: refused where the region does not support them,
/// then to a caller not allowed to call it.
fn guarded(
    w: &mut World,
    ctx: &Ctx<'_>,
    p: &Params,
    f: fn(&mut World, &Ctx<'_>, &Params) -> Result<String, ApiError>,
) -> Result<Output, ApiError> {
    require_supported(w, ctx)?;
    authorize(w, ctx)?;
    f(w, ctx, p).map(Output::from)
}

/// IAM as the simulator plays it: the behaviour's `iam_denials` refuse an action to a caller
/// (an access key id) in some regions, with EC2's UnauthorizedOperation (HTTP 403). Each handler
/// asks before it looks at its parameters or DryRun (EC2: DryRun "checks whether you have the
/// required permissions"), and DescribeCapacityBlockOfferings only after its describe limit's
/// token is spent. A refusal changes nothing but the `unauthorized` count.
///
/// The message has the shape of EC2's (see README.md, "IAM denials"): the caller is an assumed
/// role named after its key, the purchases name the capacity reservation they would create (the
/// launch template actions the launch template) and carry an encoded authorization failure
/// message (opaque, deterministic per seed), the describe actions name no resource and carry none.
pub fn authorize(w: &mut World, ctx: &Ctx<'_>) -> Result<(), ApiError> {
    let Some(key) = ctx.caller else { return Ok(()) };
    if !w.behaviour.denies(key, ctx.action, ctx.region) {
        return Ok(());
    }
    w.faults.unauthorized += 1;
    let account = w.scenario.account_id.clone();
    let (action, region) = (ctx.action, ctx.region);
    let who = format!(
        "User: arn:aws:sts::{account}:assumed-role/role-{key}/{key} is not authorized to perform: ec2:{action}"
    );
    let why = format!("because no identity-based policy allows the ec2:{action} action");
    let message = if let Some(resource) = denied_resource(action) {
        let encoded = w.encoded_authorization_failure();
        format!(
            "You are not authorized to perform this operation. {who} on resource: arn:aws:ec2:{region}:{account}:{resource} {why}. Encoded authorization failure message: {encoded}"
        )
    } else {
        format!("You are not authorized to perform this operation. {who} {why}")
    };
    Err(ApiError::unauthorized(message))
}

/// The resource a denial of `action` names: what the action creates or changes (a reading, see
/// README.md, "IAM denials"); the describe actions name none.
fn denied_resource(action: &str) -> Option<&'static str> {
    match action {
        "PurchaseCapacityBlock" | "PurchaseCapacityBlockExtension" => Some("capacity-reservation/*"),
        "CreateLaunchTemplate" | "CreateLaunchTemplateVersion" => Some("launch-template/*"),
        _ => None,
    }
}

/// Capacity-block actions are refused in regions the scenario marks unsupported.
fn require_supported(w: &World, ctx: &Ctx<'_>) -> Result<(), ApiError> {
    if w.scenario.supports(ctx.region) { Ok(()) } else { Err(ApiError::unsupported(ctx.region)) }
}

fn dry_run(p: &Params) -> Result<(), ApiError> {
    if p.dry_run()? { Err(ApiError::dry_run()) } else { Ok(()) }
}

fn positive_u32(p: &Params, name: &str, max: i64) -> Result<Option<u32>, ApiError> {
    match p.int(name)? {
        None => Ok(None),
        Some(n) if (1..=max).contains(&n) => Ok(Some(n as u32)),
        Some(n) => Err(ApiError::invalid_value(format!(
            "Value ({n}) for parameter {name} is invalid. Expected a value between 1 and {max}."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{values, world_of};
    use super::*;

    const SCAN: &str = "ASIASCANOFFERINGS";
    const TRACK: &str = "ASIATRACKBLOCKS";
    const DESCRIBE: &str = "DescribeCapacityBlockOfferings";
    const PURCHASE: &str = "PurchaseCapacityBlock";

    /// p5.48xlarge sold in three regions; SCAN may not purchase in us-east-1 and us-west-2, TRACK
    /// may not search anywhere. The describe limit is off unless a test is about it.
    fn world(behaviour: &str) -> World {
        let line = |region: &str| {
            format!(
                "[[market]]\nregion = \"{region}\"\ninstance_type = \"p5.48xlarge\"\n\
                 price = [ {{ from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"4.10\" }} ]\n"
            )
        };
        let denials = format!(
            "iam_denials = [ {{ access_key = \"{SCAN}\", action = \"{PURCHASE}\", regions = [\"us-east-1\", \"us-west-2\"] }},\n\
                             {{ access_key = \"{TRACK}\", action = \"{DESCRIBE}\" }} ]"
        );
        let market = ["us-east-1", "us-west-2", "eu-west-1"].map(line).concat();
        world_of(&format!("{denials}\n{behaviour}"), &market)
    }

    fn call(
        w: &mut World,
        region: &str,
        caller: Option<&str>,
        action: &str,
        pairs: &[(&str, &str)],
    ) -> Result<String, ApiError> {
        dispatch_as(w, region, caller, action, &Params::from_pairs(pairs)).map(|o| o.body)
    }

    /// An offering id of `region`, found by an allowed caller.
    fn offering(w: &mut World, region: &str) -> String {
        let body = call(w, region, None, DESCRIBE, &[("CapacityDurationHours", "24")]).unwrap();
        values(&body, "capacityBlockOfferingId").swap_remove(0)
    }

    fn buy(w: &mut World, region: &str, caller: Option<&str>, extra: &[(&str, &str)]) -> Result<String, ApiError> {
        let id = offering(w, region);
        let mut pairs = vec![("CapacityBlockOfferingId", id.as_str()), ("InstancePlatform", "Linux/UNIX")];
        pairs.extend_from_slice(extra);
        call(w, region, caller, PURCHASE, &pairs)
    }

    #[test]
    fn a_denied_action_is_refused_to_its_key_in_its_regions_only() {
        let mut w = world("describe_limit = false");
        for region in ["us-east-1", "us-west-2"] {
            let e = buy(&mut w, region, Some(SCAN), &[]).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (403, "UnauthorizedOperation"), "{region}");
            assert!(e.message.contains("capacity-reservation/* because"), "{}", e.message);
        }
        // Refused: nothing bought.
        assert!(w.reservations.is_empty());
        assert_eq!(w.faults.unauthorized, 2);
        // The same key elsewhere, another key, an unsigned call, and the key's other actions.
        buy(&mut w, "eu-west-1", Some(SCAN), &[]).expect("a region the denial does not list");
        buy(&mut w, "us-east-1", Some(TRACK), &[]).expect("another key");
        buy(&mut w, "us-west-2", None, &[]).expect("an unsigned call");
        assert_eq!(w.reservations.len(), 3);
        call(&mut w, "us-east-1", Some(SCAN), DESCRIBE, &[("CapacityDurationHours", "24")]).expect("another action");
        call(&mut w, "us-east-1", Some(SCAN), "DescribeCapacityReservations", &[]).expect("another action");
        // TRACK's denial names no region: every region, a region no scenario line names included.
        for region in ["us-east-1", "eu-west-1", "ap-south-2"] {
            let e = call(&mut w, region, Some(TRACK), DESCRIBE, &[("CapacityDurationHours", "24")]).unwrap_err();
            assert_eq!(e.code, "UnauthorizedOperation", "{region}");
        }
        assert_eq!(w.faults.unauthorized, 5);
    }

    #[test]
    fn the_message_has_ec2s_shape() {
        let mut w = world("describe_limit = false");
        let e = buy(&mut w, "us-west-2", Some(SCAN), &[]).unwrap_err();
        let (head, encoded) = e.message.split_once(". Encoded authorization failure message: ").expect(&e.message);
        assert_eq!(
            head,
            "You are not authorized to perform this operation. User: arn:aws:sts::111122223333:assumed-role/\
             role-ASIASCANOFFERINGS/ASIASCANOFFERINGS is not authorized to perform: ec2:PurchaseCapacityBlock on \
             resource: arn:aws:ec2:us-west-2:111122223333:capacity-reservation/* because no identity-based policy \
             allows the ec2:PurchaseCapacityBlock action"
        );
        assert_eq!(encoded.len(), 128);
        assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{encoded}");
        // Opaque, but fresh for each refusal and the same for the same seed.
        let again = buy(&mut w, "us-west-2", Some(SCAN), &[]).unwrap_err();
        assert_ne!(again.message, e.message);
        assert_eq!(buy(&mut world("describe_limit = false"), "us-west-2", Some(SCAN), &[]).unwrap_err(), e);
        // A describe action names no resource and carries no encoded message.
        let e = call(&mut w, "eu-west-1", Some(TRACK), DESCRIBE, &[]).unwrap_err();
        assert_eq!(
            e.message,
            "You are not authorized to perform this operation. User: arn:aws:sts::111122223333:assumed-role/\
             role-ASIATRACKBLOCKS/ASIATRACKBLOCKS is not authorized to perform: ec2:DescribeCapacityBlockOfferings \
             because no identity-based policy allows the ec2:DescribeCapacityBlockOfferings action"
        );
        let xml = e.to_xml("rid");
        assert!(xml.contains("<Code>UnauthorizedOperation</Code><Message>You are not authorized"), "{xml}");
    }

    #[test]
    fn dry_run_checks_the_permission_before_anything_else() {
        let mut w = world("describe_limit = false");
        let dry = [("DryRun", "true")];
        let e = buy(&mut w, "us-east-1", Some(SCAN), &dry).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (403, "UnauthorizedOperation"));
        let e = buy(&mut w, "us-east-1", Some(TRACK), &dry).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (412, "DryRunOperation"));
        assert!(w.reservations.is_empty());
        // Before the parameters too: a denied caller learns nothing about them.
        let bad = [("CapacityBlockOfferingId", "nonsense"), ("DryRun", "maybe")];
        assert_eq!(call(&mut w, "us-east-1", Some(SCAN), PURCHASE, &bad).unwrap_err().code, "UnauthorizedOperation");
        assert_eq!(call(&mut w, "us-east-1", Some(TRACK), PURCHASE, &bad).unwrap_err().code, "MissingParameter");
        let e = call(&mut w, "us-east-1", Some(TRACK), DESCRIBE, &[("DryRun", "true")]).unwrap_err();
        assert_eq!(e.code, "UnauthorizedOperation", "a DryRun search without its required duration");
        let e = call(&mut w, "us-east-1", Some(SCAN), DESCRIBE, &[("CapacityDurationHours", "24"), ("DryRun", "true")]);
        assert_eq!(e.unwrap_err().code, "DryRunOperation");
    }

    #[test]
    fn every_action_can_be_denied_and_an_unsupported_region_says_so_first() {
        let denials: Vec<String> = ACTIONS
            .iter()
            .map(|a| format!("{{ access_key = \"K\", action = \"{a}\", regions = [\"us-east-1\", \"eu-north-1\"] }}"))
            .collect();
        let regions = "[[regions]]\nname = \"eu-north-1\"\nsupported = false";
        let mut w = world_of(&format!("describe_limit = false\niam_denials = [{}]", denials.join(", ")), regions);
        for action in ACTIONS {
            let e = call(&mut w, "us-east-1", Some("K"), action, &[]).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (403, "UnauthorizedOperation"), "{action}");
            assert!(e.message.contains(&format!("ec2:{action} ")), "{action}: {}", e.message);
            let resource = match denied_resource(action) {
                Some(r) => format!("on resource: arn:aws:ec2:us-east-1:111122223333:{r} because"),
                None => format!("ec2:{action} because"),
            };
            assert!(e.message.contains(&resource), "{action}: {}", e.message);
            assert_eq!(
                e.message.contains("Encoded authorization failure message"),
                action.starts_with(['P', 'C']),
                "{action}"
            );
        }
        assert_eq!(w.faults.unauthorized, ACTIONS.len() as u64);
        // Where the region has no Capacity Blocks, their actions do not exist to be authorized.
        for action in [DESCRIBE, PURCHASE, "DescribeCapacityBlocks", "PurchaseCapacityBlockExtension"] {
            assert_eq!(call(&mut w, "eu-north-1", Some("K"), action, &[]).unwrap_err().code, "UnsupportedOperation");
        }
        assert_eq!(
            call(&mut w, "eu-north-1", Some("K"), "DescribeInstances", &[]).unwrap_err().code,
            "UnauthorizedOperation"
        );
        // An unknown action is unknown to everyone.
        assert_eq!(call(&mut w, "us-east-1", Some("K"), "RunInstances", &[]).unwrap_err().code, "InvalidAction");
    }

    #[test]
    fn a_denied_search_spends_its_describe_token_and_a_limited_one_stays_limited() {
        // Burst 1, an hour per token: one search, then refusals.
        let mut w = world("describe_limit = { burst = 1, refill_secs = 3600.0 }");
        let search = [("CapacityDurationHours", "24")];
        let e = call(&mut w, "us-east-1", Some(TRACK), DESCRIBE, &search).unwrap_err();
        assert_eq!(e.code, "UnauthorizedOperation", "the bucket had a token");
        // The denied call was answered: it took the token, so the next caller is limited...
        let e = call(&mut w, "us-east-1", Some(SCAN), DESCRIBE, &search).unwrap_err();
        assert_eq!(e.code, "CapacityBlockDescribeLimitExceeded");
        // ...and so is the denied caller, whose refusal by the limit comes first.
        let e = call(&mut w, "us-east-1", Some(TRACK), DESCRIBE, &search).unwrap_err();
        assert_eq!(e.code, "CapacityBlockDescribeLimitExceeded");
        assert_eq!((w.faults.unauthorized, w.faults.describe_limited), (1, 2));
        // Another region has its own bucket.
        call(&mut w, "us-west-2", Some(SCAN), DESCRIBE, &search).expect("a token in us-west-2");
    }
}
