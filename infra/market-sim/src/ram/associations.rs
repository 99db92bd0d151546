//! What RAM lets the account share, and GetResourceShareAssociations, AssociateResourceShare and
//! DisassociateResourceShare.
//!
//! The record (EC2 User Guide, "Share Capacity Blocks"): only a Capacity Block the account owns,
//! `active` or `scheduled`, not an UltraServer's, shared within its AWS Organization, by an
//! account without a limited billing history. How a refusal shows is not recorded: under
//! `ram_refusal = "error"` the call fails and changes nothing, under `"failed_association"` the
//! association is made and goes FAILED with the reason as its statusMessage.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Ctx, INVALID_PARAMETER, INVALID_STATE, MALFORMED_ARN, NOT_PERMITTED, UNKNOWN_RESOURCE, association_json,
    fingerprint, invalid, next_token_error, page_size, parse, remember, replay, share_index, shown, token_of,
};
use crate::organization::Principal;
use crate::pagination::paginate;
use crate::reservations::Reservation;
use crate::resource_shares::{Association, AssociationType, ResourceShare};
use crate::scenario::RamRefusal;
use crate::wire::error::ApiError;
use crate::world::World;

/// RAM's message for a resource it shares within the organization only, given a principal
/// outside it (hashicorp/terraform-provider-aws#7769 and #46542; the code was
/// OperationNotPermittedException in 2019 and is InvalidParameterException in the later report).
pub const ORG_ONLY: &str = "The resource you are attempting to share can only be shared within your AWS Organization. \
     This error may also occur if you have not enabled sharing with your AWS organization, or that onboarding process is still in progress.";

/// The association statuses of the model (ResourceShareAssociationStatus).
const STATUSES: &[&str] =
    &["ASSOCIATING", "ASSOCIATED", "FAILED", "DISASSOCIATING", "DISASSOCIATED", "SUSPENDED", "SUSPENDING", "RESTORING"];

/// Why one association cannot be made, and the code it fails the call with under "error".
struct Refusal {
    code: &'static str,
    message: String,
}

/// The reservation a resource ARN names, if the simulator holds it for the account in this
/// region and DescribeCapacityReservations still shows it.
fn reservation<'w>(w: &'w World, ctx: &Ctx<'_>, arn: &str) -> Result<&'w Reservation, ApiError> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    if parts.len() != 6 || parts[0] != "arn" || parts[1].is_empty() || parts[2].is_empty() || parts[5].is_empty() {
        return Err(ApiError::client(
            MALFORMED_ARN,
            format!("The specified resource ARN {arn} is not valid. Verify the ARN and try again."),
        ));
    }
    let Some(id) = parts[5].strip_prefix("capacity-reservation/").filter(|_| parts[2] == "ec2") else {
        return Err(ApiError::client(
            UNKNOWN_RESOURCE,
            format!("Resource {arn} could not be found: the simulator shares EC2 capacity reservations only."),
        ));
    };
    // Another region's reservation, another account's (the simulator holds none shared with the
    // account, so none to re-share), one never bought or long gone: RAM finds none of them.
    let not_found = || ApiError::client(UNKNOWN_RESOURCE, format!("Resource {arn} could not be found."));
    if parts[3] != ctx.region || parts[4] != ctx.owner {
        return Err(not_found());
    }
    w.reservation(id).filter(|r| r.region == ctx.region && w.shows(r, ctx.now)).ok_or_else(not_found)
}

/// Why a Capacity Block cannot be shared now, if it cannot (the simulator's messages).
fn block_refusal(w: &World, r: &Reservation, ctx: &Ctx<'_>) -> Option<Refusal> {
    let refuse = |message: String| Some(Refusal { code: NOT_PERMITTED, message });
    if w.organization.limited_billing_history {
        return refuse(format!(
            "Capacity Block sharing is not available to accounts that have a limited billing history: {} cannot be shared.",
            r.id
        ));
    }
    if let Some(u) = &r.ultraserver_type {
        return refuse(format!(
            "You cannot share Capacity Blocks for EC2 UltraServers: {} is a {u} Capacity Block.",
            r.id
        ));
    }
    let state = r.state(ctx.now, &w.extensions);
    if state != "active" && state != "scheduled" {
        return refuse(format!(
            "Capacity Block {} is {state}: only Capacity Blocks that are active or scheduled can be shared.",
            r.id
        ));
    }
    None
}

fn dedup(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if !out.contains(i) {
            out.push(i.clone());
        }
    }
    out
}

/// The associations a call asks for, checked: malformed or unknown resources and principals
/// fail the call whatever the reading; so does a principal outside the organization of a share
/// that does not allow external principals (RAM's own check, recorded as synchronous). What the
/// Capacity Block rules refuse fails the call under "error", or is made to fail under
/// "failed_association". `share` is the share they join, None for a new one.
fn admit(
    w: &World,
    ctx: &Ctx<'_>,
    share: Option<&ResourceShare>,
    allow_external: bool,
    resource_arns: &[String],
    principals: &[String],
) -> Result<Vec<Association>, ApiError> {
    let mut out = Vec::new();
    let mut refusals: Vec<Option<Refusal>> = Vec::new();
    for arn in dedup(resource_arns) {
        let r = reservation(w, ctx, &arn)?;
        refusals.push(block_refusal(w, r, ctx));
        out.push(new(AssociationType::Resource, arn, ctx, false, Some(r.id.clone())));
    }
    for p in dedup(principals) {
        let parsed = Principal::parse(&p)
            .ok_or_else(|| invalid(format!("Principal ID {p} is malformed. Verify the ID and try again.")))?;
        let external = !w.organization.contains(&ctx.owner, &parsed)?;
        if external && !allow_external {
            return Err(invalid(format!(
                "The resource share does not allow external principals: {p} is outside your AWS Organization."
            )));
        }
        refusals.push(None);
        out.push(new(AssociationType::Principal, p, ctx, external, None));
    }
    // Capacity Blocks are shared within the organization only: an outside principal is refused
    // in a share that holds one (or gets one in the same call: the blocks stay shared with the
    // organization's principals), and a block in a share that has an outside principal.
    let now = ctx.now;
    let holds_block =
        !resource_arns.is_empty() || share.is_some_and(|s| s.in_force(AssociationType::Resource, now).next().is_some());
    let has_external = share.is_some_and(|s| s.in_force(AssociationType::Principal, now).any(|a| a.external));
    for (a, refusal) in out.iter().zip(refusals.iter_mut()) {
        let org_only = match a.kind {
            AssociationType::Principal => a.external && holds_block,
            AssociationType::Resource => has_external,
        };
        if refusal.is_none() && org_only {
            *refusal = Some(Refusal { code: INVALID_PARAMETER, message: ORG_ONLY.to_string() });
        }
    }
    match w.behaviour.ram_refusal {
        RamRefusal::Error => {
            if let Some(r) = refusals.iter().flatten().next() {
                return Err(ApiError::client(r.code, r.message.clone()));
            }
        }
        RamRefusal::FailedAssociation => {
            for (a, r) in out.iter_mut().zip(refusals) {
                a.refusal = r.map(|r| r.message);
            }
        }
    }
    Ok(out)
}

fn new(
    kind: AssociationType,
    entity: String,
    ctx: &Ctx<'_>,
    external: bool,
    reservation_id: Option<String>,
) -> Association {
    Association { kind, entity, created: ctx.now, refusal: None, external, removed: None, reservation_id }
}

/// A new share's associations (CreateResourceShare).
pub fn admit_new(
    w: &World,
    ctx: &Ctx<'_>,
    allow_external: bool,
    resource_arns: &[String],
    principals: &[String],
) -> Result<Vec<Association>, ApiError> {
    admit(w, ctx, None, allow_external, resource_arns, principals)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetReq {
    association_type: Option<String>,
    #[serde(default)]
    resource_share_arns: Vec<String>,
    resource_arn: Option<String>,
    principal: Option<String>,
    association_status: Option<String>,
    next_token: Option<String>,
    max_results: Option<i64>,
}

/// GetResourceShareAssociations: every share of the region, deleted ones included (their
/// associations DISASSOCIATED), in creation order, each one's associations in the order asked.
pub fn get(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, raw): (GetReq, Value) = parse(body)?;
    let kind = match req.association_type.as_deref() {
        Some("RESOURCE") => AssociationType::Resource,
        Some("PRINCIPAL") => AssociationType::Principal,
        other => {
            return Err(invalid(format!(
                "{} is not a valid association type. Specify either PRINCIPAL or RESOURCE and try again.",
                other.unwrap_or("(none)")
            )));
        }
    };
    if let Some(s) = req.association_status.as_deref().filter(|s| !STATUSES.contains(s)) {
        return Err(invalid(format!("{s} is not a valid association status.")));
    }
    if kind == AssociationType::Principal && req.resource_arn.is_some() {
        return Err(invalid("You cannot specify a resource ARN when the association type is PRINCIPAL."));
    }
    if kind == AssociationType::Resource && req.principal.is_some() {
        return Err(invalid("You cannot specify a principal when the association type is RESOURCE."));
    }
    let size = page_size(req.max_results)?;
    for arn in &req.resource_share_arns {
        share_index(w, ctx, arn)?;
    }
    let entity = req.resource_arn.as_deref().or(req.principal.as_deref());
    let mut items = Vec::new();
    for s in w.resource_shares.iter().filter(|s| s.region == ctx.region) {
        if !req.resource_share_arns.is_empty() && !req.resource_share_arns.contains(&s.arn) {
            continue;
        }
        for a in s.associations.iter().filter(|a| a.kind == kind && entity.is_none_or(|e| e == a.entity)) {
            if req.association_status.as_deref().is_some_and(|st| st != shown(w, a, ctx.now).status) {
                continue;
            }
            items.push(association_json(w, s, a, ctx.now));
        }
    }
    let fp = fingerprint("GetResourceShareAssociations", &raw, &["nextToken", "maxResults"]);
    let (page, next) = paginate(&items, size, req.next_token.as_deref(), fp).map_err(next_token_error)?;
    let mut out = json!({ "resourceShareAssociations": page });
    if let (Some(t), Value::Object(m)) = (next, &mut out) {
        m.insert("nextToken".into(), json!(t));
    }
    Ok(out.to_string())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChangeReq {
    resource_share_arn: Option<String>,
    #[serde(default)]
    resource_arns: Vec<String>,
    #[serde(default)]
    principals: Vec<String>,
    client_token: Option<String>,
    #[serde(default)]
    sources: Vec<String>,
}

/// The share a change names: known, and not deleted (InvalidStateTransitionException, "the
/// requested operation isn't valid for the resource share in its current state").
fn changed_share(w: &World, ctx: &Ctx<'_>, req: &ChangeReq) -> Result<usize, ApiError> {
    let arn = req.resource_share_arn.as_deref().ok_or_else(|| invalid("resourceShareArn is required."))?;
    let i = share_index(w, ctx, arn)?;
    if w.resource_shares[i].status(ctx.now) == "DELETED" {
        return Err(ApiError::client(INVALID_STATE, format!("The resource share {arn} is deleted.")));
    }
    if req.resource_arns.is_empty() && req.principals.is_empty() {
        return Err(invalid("Specify at least one resource ARN or principal."));
    }
    if !req.sources.is_empty() {
        return Err(invalid("sources (service principal source constraints) are not modelled by the simulator."));
    }
    Ok(i)
}

fn answer(w: &World, ctx: &Ctx<'_>, i: usize, entities: &[(AssociationType, String)], token: &str) -> String {
    let s = &w.resource_shares[i];
    let list: Vec<Value> = entities
        .iter()
        .filter_map(|(k, e)| s.associations.iter().rev().find(|a| a.kind == *k && a.entity == *e))
        .map(|a| association_json(w, s, a, ctx.now))
        .collect();
    json!({ "resourceShareAssociations": list, "clientToken": token }).to_string()
}

/// AssociateResourceShare: adds resources and principals to a share. An entity already
/// associated (or associating) stays as it is; one whose association failed or ended is
/// associated anew.
pub fn associate(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, raw): (ChangeReq, Value) = parse(body)?;
    let fp = fingerprint("AssociateResourceShare", &raw, &["clientToken"]);
    if let Some(done) = replay(w, ctx, "AssociateResourceShare", req.client_token.as_deref(), fp)? {
        return Ok(done);
    }
    let i = changed_share(w, ctx, &req)?;
    let now = ctx.now;
    let share = &w.resource_shares[i];
    let fresh: Vec<String> = dedup(&req.resource_arns)
        .into_iter()
        .filter(|e| !share.in_force(AssociationType::Resource, now).any(|a| a.entity == *e))
        .collect();
    let fresh_principals: Vec<String> = dedup(&req.principals)
        .into_iter()
        .filter(|e| !share.in_force(AssociationType::Principal, now).any(|a| a.entity == *e))
        .collect();
    let added = admit(w, ctx, Some(share), share.allow_external_principals, &fresh, &fresh_principals)?;
    let share = &mut w.resource_shares[i];
    share.associations.extend(added);
    share.updated = now;
    let token = token_of(w, req.client_token.as_deref());
    let entities: Vec<(AssociationType, String)> = dedup(&req.resource_arns)
        .into_iter()
        .map(|e| (AssociationType::Resource, e))
        .chain(dedup(&req.principals).into_iter().map(|e| (AssociationType::Principal, e)))
        .collect();
    let out = answer(w, ctx, i, &entities, &token);
    remember(w, ctx, "AssociateResourceShare", &token, fp, &out);
    Ok(out)
}

/// DisassociateResourceShare: the associations named go DISASSOCIATING, then DISASSOCIATED.
/// Naming an entity the share does not have associated is UnknownResourceException.
pub fn disassociate(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, raw): (ChangeReq, Value) = parse(body)?;
    let fp = fingerprint("DisassociateResourceShare", &raw, &["clientToken"]);
    if let Some(done) = replay(w, ctx, "DisassociateResourceShare", req.client_token.as_deref(), fp)? {
        return Ok(done);
    }
    let i = changed_share(w, ctx, &req)?;
    let now = ctx.now;
    let entities: Vec<(AssociationType, String)> = dedup(&req.resource_arns)
        .into_iter()
        .map(|e| (AssociationType::Resource, e))
        .chain(dedup(&req.principals).into_iter().map(|e| (AssociationType::Principal, e)))
        .collect();
    let share = &mut w.resource_shares[i];
    for (kind, e) in &entities {
        if !share.in_force(*kind, now).any(|a| a.entity == *e) {
            return Err(ApiError::client(
                UNKNOWN_RESOURCE,
                format!("{e} is not associated with the resource share {}.", share.arn),
            ));
        }
    }
    for a in share.associations.iter_mut().filter(|a| a.in_force(now) && entities.contains(&(a.kind, a.entity.clone())))
    {
        a.removed = Some(now);
    }
    share.updated = now;
    let token = token_of(w, req.client_token.as_deref());
    let out = answer(w, ctx, i, &entities, &token);
    remember(w, ctx, "DisassociateResourceShare", &token, fp, &out);
    Ok(out)
}
