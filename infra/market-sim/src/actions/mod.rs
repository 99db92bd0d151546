//! EC2 actions. Each handler validates its parameters, applies DryRun, reads or changes the
//! world and returns the XML body that goes inside `<{Action}Response>`.

mod blocks;
mod extensions;
mod filters;
mod instances;
mod offerings;
mod purchase;
mod reservations;
#[cfg(test)]
mod test_support;

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
    pub action: &'a str,
    pub now: DateTime<Utc>,
}

/// The actions this simulator implements, all others answer InvalidAction.
pub const ACTIONS: &[&str] = &[
    "DescribeCapacityBlockOfferings",
    "PurchaseCapacityBlock",
    "DescribeCapacityReservations",
    "DescribeCapacityBlockExtensionOfferings",
    "PurchaseCapacityBlockExtension",
    "DescribeInstanceTypes",
    "DescribeInstances",
    "DescribeCapacityBlocks",
    "DescribeCapacityBlockStatus",
    "DescribeCapacityBlockExtensionHistory",
];

pub fn dispatch(w: &mut World, region: &str, action: &str, p: &Params) -> Result<Output, ApiError> {
    let ctx = Ctx { region, action, now: w.now() };
    match action {
        "" => Err(ApiError::client("MissingAction", "The request must contain the parameter Action")),
        "DescribeCapacityBlockOfferings" => offerings::describe(w, &ctx, p).map(Output::from),
        "PurchaseCapacityBlock" => purchase::purchase(w, &ctx, p),
        "DescribeCapacityReservations" => reservations::describe(w, &ctx, p).map(Output::from),
        "DescribeCapacityBlockExtensionOfferings" => extensions::describe_offerings(w, &ctx, p).map(Output::from),
        "PurchaseCapacityBlockExtension" => extensions::purchase(w, &ctx, p),
        "DescribeInstanceTypes" => instances::describe_instance_types(w, &ctx, p).map(Output::from),
        "DescribeInstances" => instances::describe_instances(w, &ctx, p).map(Output::from),
        "DescribeCapacityBlocks" => guarded(w, &ctx, p, blocks::describe_blocks),
        "DescribeCapacityBlockStatus" => guarded(w, &ctx, p, blocks::describe_status),
        "DescribeCapacityBlockExtensionHistory" => guarded(w, &ctx, p, blocks::describe_extension_history),
        other => {
            Err(ApiError::client("InvalidAction", format!("The action {other} is not valid for this web service.")))
        }
    }
}

/// A capacity-block action that only reads: refused where the region does not support them.
fn guarded(
    w: &mut World,
    ctx: &Ctx<'_>,
    p: &Params,
    f: fn(&mut World, &Ctx<'_>, &Params) -> Result<String, ApiError>,
) -> Result<Output, ApiError> {
    require_supported(w, ctx)?;
    f(w, ctx, p).map(Output::from)
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
