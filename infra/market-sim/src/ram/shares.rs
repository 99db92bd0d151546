//! CreateResourceShare, GetResourceShares, DeleteResourceShare, TagResource and UntagResource.

use serde::Deserialize;
use serde_json::{Value, json};

use super::associations::admit_new;
use super::{
    Ctx, INVALID_STATE, TAG_LIMIT, TAG_POLICY, fingerprint, invalid, listing_lag, next_token_error, page_size, parse,
    remember, replay, share_index, share_json, token_of,
};
use crate::resource_shares::ResourceShare;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::world::World;

/// RAM's tag limit per resource share (AWS tagging's usual 50).
const MAX_TAGS: usize = 50;

#[derive(Deserialize)]
struct TagIn {
    key: Option<String>,
    value: Option<String>,
}

/// Tags as RAM takes them: a key of 1 to 128 characters not starting `aws:` (reserved:
/// TagPolicyViolationException, "the specified tag key is a reserved word"), a value of at most
/// 256 (absent: empty), at most 50 on a share (TagLimitExceededException).
fn tags_of(tags: Vec<TagIn>) -> Result<Vec<(String, String)>, ApiError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for t in tags {
        let key = t.key.filter(|k| !k.is_empty()).ok_or_else(|| invalid("A tag key must be present and not empty."))?;
        if key.chars().count() > 128 {
            return Err(invalid(format!("The tag key {key} is longer than 128 characters.")));
        }
        if key.to_ascii_lowercase().starts_with("aws:") {
            return Err(ApiError::client(
                TAG_POLICY,
                format!("The tag key {key} is a reserved word and can't be used."),
            ));
        }
        let value = t.value.unwrap_or_default();
        if value.chars().count() > 256 {
            return Err(invalid(format!("The value of tag {key} is longer than 256 characters.")));
        }
        out.retain(|(k, _)| *k != key);
        out.push((key, value));
    }
    Ok(out)
}

fn check_tag_count(n: usize) -> Result<(), ApiError> {
    if n > MAX_TAGS {
        return Err(ApiError::client(
            TAG_LIMIT,
            format!("A resource share can have at most {MAX_TAGS} tags, got {n}."),
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateReq {
    name: Option<String>,
    #[serde(default)]
    resource_arns: Vec<String>,
    #[serde(default)]
    principals: Vec<String>,
    #[serde(default)]
    tags: Vec<TagIn>,
    allow_external_principals: Option<bool>,
    client_token: Option<String>,
    #[serde(default)]
    permission_arns: Vec<String>,
    #[serde(default)]
    sources: Vec<String>,
    resource_share_configuration: Option<Value>,
}

/// CreateResourceShare: a share ACTIVE at once, its associations ASSOCIATING (see
/// `associations::admit` for what is refused and how).
pub fn create(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, raw): (CreateReq, Value) = parse(body)?;
    let fp = fingerprint("CreateResourceShare", &raw, &["clientToken"]);
    if let Some(done) = replay(w, ctx, "CreateResourceShare", req.client_token.as_deref(), fp)? {
        return Ok(done);
    }
    let name = req.name.filter(|n| !n.trim().is_empty()).ok_or_else(|| invalid("name is required."))?;
    // What the simulator does not model is refused rather than ignored: a client relying on it
    // would be told nothing otherwise.
    if !req.permission_arns.is_empty() {
        return Err(invalid(
            "permissionArns is not modelled by the simulator: RAM attaches each resource type's default permission.",
        ));
    }
    if !req.sources.is_empty() || req.resource_share_configuration.is_some() {
        return Err(invalid("sources and resourceShareConfiguration are not modelled by the simulator."));
    }
    let tags = tags_of(req.tags)?;
    check_tag_count(tags.len())?;
    // "The default value is true."
    let allow_external = req.allow_external_principals.unwrap_or(true);
    let associations = admit_new(w, ctx, allow_external, &req.resource_arns, &req.principals)?;
    let share = ResourceShare {
        arn: format!("arn:aws:ram:{}:{}:resource-share/{}", ctx.region, ctx.owner, w.new_share_uuid()),
        name,
        region: ctx.region.to_string(),
        owner: ctx.owner.clone(),
        allow_external_principals: allow_external,
        tags,
        created: ctx.now,
        updated: ctx.now,
        deleted: None,
        associations,
    };
    let token = token_of(w, req.client_token.as_deref());
    let out = json!({ "resourceShare": share_json(&share, ctx.now), "clientToken": token }).to_string();
    tracing::info!(arn = %share.arn, associations = share.associations.len(), "resource share created");
    w.resource_shares.push(share);
    remember(w, ctx, "CreateResourceShare", &token, fp, &out);
    Ok(out)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TagFilter {
    tag_key: Option<String>,
    #[serde(default)]
    tag_values: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetReq {
    #[serde(default)]
    resource_share_arns: Vec<String>,
    resource_share_status: Option<String>,
    resource_owner: Option<String>,
    name: Option<String>,
    #[serde(default)]
    tag_filters: Vec<TagFilter>,
    next_token: Option<String>,
    max_results: Option<i64>,
    permission_arn: Option<String>,
    permission_version: Option<i64>,
}

/// ResourceShareStatus of the model.
const SHARE_STATUSES: &[&str] = &["PENDING", "ACTIVE", "FAILED", "DELETING", "DELETED"];

/// GetResourceShares. `SELF`: the account's shares of the region, deleted ones included (DELETED),
/// in creation order; `OTHER-ACCOUNTS`: none (nobody shares with the simulated account). A share
/// matches every tag filter given: a tag with its key, and one of its values if it lists any. A
/// share made less than `ram_listing_lag_secs` ago is not listed yet, asked for by its ARN or not
/// (eventual consistency; its associations are, by its ARN).
pub fn get(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, raw): (GetReq, Value) = parse(body)?;
    let mine = match req.resource_owner.as_deref() {
        Some("SELF") => true,
        Some("OTHER-ACCOUNTS") => false,
        other => {
            return Err(invalid(format!(
                "{} is not a valid resource owner. Specify either SELF or OTHER-ACCOUNTS and try again.",
                other.unwrap_or("(none)")
            )));
        }
    };
    if let Some(s) = req.resource_share_status.as_deref().filter(|s| !SHARE_STATUSES.contains(s)) {
        return Err(invalid(format!("{s} is not a valid resource share status.")));
    }
    if req.permission_arn.is_some() || req.permission_version.is_some() {
        return Err(invalid("permissionArn and permissionVersion are not modelled by the simulator."));
    }
    if req.tag_filters.iter().any(|f| f.tag_key.as_deref().is_none_or(str::is_empty)) {
        return Err(invalid("Every tag filter needs a tagKey."));
    }
    let size = page_size(req.max_results)?;
    for arn in &req.resource_share_arns {
        share_index(w, ctx, arn)?;
    }
    let now = ctx.now;
    let lag = listing_lag(w);
    let items: Vec<Value> = w
        .resource_shares
        .iter()
        .filter(|s| mine && s.region == ctx.region)
        .filter(|s| now >= s.created + lag)
        .filter(|s| req.resource_share_arns.is_empty() || req.resource_share_arns.contains(&s.arn))
        .filter(|s| req.resource_share_status.as_deref().is_none_or(|st| st == s.status(now)))
        .filter(|s| req.name.as_deref().is_none_or(|n| n == s.name))
        .filter(|s| {
            req.tag_filters.iter().all(|f| {
                s.tags.iter().any(|(k, v)| {
                    Some(k.as_str()) == f.tag_key.as_deref() && (f.tag_values.is_empty() || f.tag_values.contains(v))
                })
            })
        })
        .map(|s| share_json(s, now))
        .collect();
    let fp = fingerprint("GetResourceShares", &raw, &["nextToken", "maxResults"]);
    let (page, next) =
        crate::pagination::paginate(&items, size, req.next_token.as_deref(), fp).map_err(next_token_error)?;
    let mut out = json!({ "resourceShares": page });
    if let (Some(t), Value::Object(m)) = (next, &mut out) {
        m.insert("nextToken".into(), json!(t));
    }
    Ok(out.to_string())
}

/// DeleteResourceShare (`DELETE /deleteresourceshare?resourceShareArn=..&clientToken=..`): the
/// share is DELETED at once, its associations in force DISASSOCIATING and then DISASSOCIATED.
/// Deleting it again without the same client token is InvalidStateTransitionException.
pub fn delete(w: &mut World, ctx: &Ctx<'_>, query: &str) -> Result<String, ApiError> {
    let q = Params::parse(query);
    let arn =
        q.get("resourceShareArn").filter(|a| !a.is_empty()).ok_or_else(|| invalid("resourceShareArn is required."))?;
    let token = q.get("clientToken").filter(|t| !t.is_empty());
    let raw = json!({ "resourceShareArn": arn });
    let fp = fingerprint("DeleteResourceShare", &raw, &[]);
    if let Some(done) = replay(w, ctx, "DeleteResourceShare", token, fp)? {
        return Ok(done);
    }
    let i = share_index(w, ctx, arn)?;
    let now = ctx.now;
    let share = &mut w.resource_shares[i];
    if share.status(now) == "DELETED" {
        return Err(ApiError::client(INVALID_STATE, format!("The resource share {arn} is already deleted.")));
    }
    share.deleted = Some(now);
    share.updated = now;
    for a in share.associations.iter_mut().filter(|a| a.in_force(now)) {
        a.removed = Some(now);
    }
    let token = token_of(w, token);
    let out = json!({ "returnValue": true, "clientToken": token }).to_string();
    remember(w, ctx, "DeleteResourceShare", &token, fp, &out);
    Ok(out)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TagReq {
    resource_share_arn: Option<String>,
    resource_arn: Option<String>,
    tags: Option<Vec<TagIn>>,
    tag_keys: Option<Vec<String>>,
}

/// The share a tag call names: resourceShareArn; the managed permissions' resourceArn is not
/// modelled.
fn tagged_share(w: &World, ctx: &Ctx<'_>, req: &TagReq) -> Result<usize, ApiError> {
    if req.resource_arn.is_some() {
        return Err(invalid("Tagging managed permissions (resourceArn) is not modelled by the simulator."));
    }
    let arn = req.resource_share_arn.as_deref().ok_or_else(|| invalid("Specify resourceShareArn."))?;
    share_index(w, ctx, arn)
}

/// TagResource: adds tags to a share, a key given again taking its new value.
pub fn tag(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, _): (TagReq, Value) = parse(body)?;
    let i = tagged_share(w, ctx, &req)?;
    let new = tags_of(req.tags.ok_or_else(|| invalid("tags is required."))?)?;
    let mut tags = w.resource_shares[i].tags.clone();
    for (k, v) in new {
        match tags.iter_mut().find(|(key, _)| *key == k) {
            Some(t) => t.1 = v,
            None => tags.push((k, v)),
        }
    }
    check_tag_count(tags.len())?;
    w.resource_shares[i].tags = tags;
    Ok("{}".into())
}

/// UntagResource: removes the keys named (a key the share does not have is no error).
pub fn untag(w: &mut World, ctx: &Ctx<'_>, body: &[u8]) -> Result<String, ApiError> {
    let (req, _): (TagReq, Value) = parse(body)?;
    let i = tagged_share(w, ctx, &req)?;
    let keys = req.tag_keys.ok_or_else(|| invalid("tagKeys is required."))?;
    w.resource_shares[i].tags.retain(|(k, _)| !keys.contains(k));
    Ok("{}".into())
}
