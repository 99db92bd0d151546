//! AWS RAM for capacity reservations, in RAM's restJson1 protocol: `POST /createresourceshare`
//! and the like with a JSON body (DeleteResourceShare: `DELETE /deleteresourceshare?..`), JSON
//! answers with timestamps in epoch seconds, errors as the HTTP status, an `x-amzn-ErrorType`
//! header naming the code and a `{"message": ..}` body (botocore's RAM model, 2018-01-04). moto,
//! which serves capblock's other AWS services locally, refuses capacity-reservation ARNs ("You
//! cannot share the selected resource type") and knows no Capacity Block states, so the
//! simulator serves RAM itself for the reservations it holds.

mod associations;
mod shares;

use chrono::{DateTime, Duration, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::resource_shares::{Association, ResourceShare};
use crate::rng::stable_hash;
use crate::scenario::{MAX_RAM_ASSOCIATION_DELAY_SECS, MAX_RAM_LISTING_LAG_SECS};
use crate::wire::error::ApiError;
use crate::world::World;

pub const UNKNOWN_RESOURCE: &str = "UnknownResourceException";
pub const INVALID_PARAMETER: &str = "InvalidParameterException";
pub const MALFORMED_ARN: &str = "MalformedArnException";
pub const NOT_PERMITTED: &str = "OperationNotPermittedException";
pub const IDEMPOTENT_MISMATCH: &str = "IdempotentParameterMismatchException";
pub const INVALID_STATE: &str = "InvalidStateTransitionException";
pub const INVALID_NEXT_TOKEN: &str = "InvalidNextTokenException";
pub const TAG_POLICY: &str = "TagPolicyViolationException";
pub const TAG_LIMIT: &str = "TagLimitExceededException";
pub const UNKNOWN_OPERATION: &str = "UnknownOperationException";

/// The operations served, by method and path (the model's `http` of each).
pub const OPERATIONS: &[(&str, &str, &str)] = &[
    ("POST", "/createresourceshare", "CreateResourceShare"),
    ("POST", "/getresourceshares", "GetResourceShares"),
    ("DELETE", "/deleteresourceshare", "DeleteResourceShare"),
    ("POST", "/getresourceshareassociations", "GetResourceShareAssociations"),
    ("POST", "/associateresourceshare", "AssociateResourceShare"),
    ("POST", "/disassociateresourceshare", "DisassociateResourceShare"),
    ("POST", "/tagresource", "TagResource"),
    ("POST", "/untagresource", "UntagResource"),
];

/// One answer: 200 with `body`, or an error (`error_type` for the `x-amzn-ErrorType` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub error_type: Option<String>,
    pub body: String,
}

impl Reply {
    fn error(e: &ApiError) -> Self {
        Self { status: e.status, error_type: Some(e.code.clone()), body: json!({ "message": e.message }).to_string() }
    }
}

/// What every operation knows of its call.
pub struct Ctx<'a> {
    pub region: &'a str,
    pub now: DateTime<Utc>,
    /// The simulated account: every share's owner.
    pub owner: String,
}

/// Serves one RAM request. Each call is counted in `calls` as `ram:Operation`; EC2's injected
/// faults (`[behaviour]` throttle, 5xx, timeouts, latency) do not apply to RAM.
pub fn handle(w: &mut World, region: &str, method: &str, path: &str, query: &str, body: &[u8]) -> Reply {
    let path = path.trim_end_matches('/');
    let Some((_, _, op)) = OPERATIONS.iter().find(|(m, p, _)| *m == method && *p == path) else {
        let e = ApiError::new(404, UNKNOWN_OPERATION, format!("The simulator serves no RAM operation {method} {path}"));
        return Reply::error(&e);
    };
    w.count_call(region, &format!("ram:{op}"));
    let ctx = Ctx { region, now: w.now(), owner: w.scenario.account_id.clone() };
    let result = match *op {
        "CreateResourceShare" => shares::create(w, &ctx, body),
        "GetResourceShares" => shares::get(w, &ctx, body),
        "DeleteResourceShare" => shares::delete(w, &ctx, query),
        "TagResource" => shares::tag(w, &ctx, body),
        "UntagResource" => shares::untag(w, &ctx, body),
        "GetResourceShareAssociations" => associations::get(w, &ctx, body),
        "AssociateResourceShare" => associations::associate(w, &ctx, body),
        _ => associations::disassociate(w, &ctx, body),
    };
    match result {
        Ok(body) => {
            tracing::info!(%region, op, "ram call ok");
            Reply { status: 200, error_type: None, body }
        }
        Err(e) => {
            tracing::info!(%region, op, code = %e.code, "ram call failed");
            Reply::error(&e)
        }
    }
}

pub fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::client(INVALID_PARAMETER, message)
}

/// The model's MaxResults bounds; without it, one page of the most.
const MAX_PAGE: i64 = 500;

/// A list call's page size: its MaxResults within the model's bounds, or the most.
fn page_size(max_results: Option<i64>) -> Result<usize, ApiError> {
    match max_results {
        None => Ok(MAX_PAGE as usize),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n as usize),
        Some(n) => Err(invalid(format!("maxResults must be between 1 and {MAX_PAGE}, got {n}."))),
    }
}

/// RAM's code for a token that is garbage or from another request.
fn next_token_error(e: ApiError) -> ApiError {
    ApiError::client(INVALID_NEXT_TOKEN, e.message)
}

/// The request body as `T`, and as JSON for the client-token fingerprint. An empty body is `{}`.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<(T, Value), ApiError> {
    let text = String::from_utf8_lossy(body);
    let text = if text.trim().is_empty() { "{}" } else { text.as_ref() };
    let raw: Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("The request body is not valid JSON: {e}")))?;
    let req = serde_json::from_value(raw.clone())
        .map_err(|e| invalid(format!("The request body does not fit the operation's input: {e}")))?;
    Ok((req, raw))
}

/// Keys sorted at every level, so that the same parameters in another order match.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys.iter().map(|k| format!("{}:{}", json!(k), canonical(&m[*k]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The fingerprint of a call's parameters without the ones named in `except`.
fn fingerprint(op: &str, raw: &Value, except: &[&str]) -> u64 {
    let mut v = raw.clone();
    if let Value::Object(m) = &mut v {
        m.retain(|k, _| !except.contains(&k.as_str()));
    }
    stable_hash(&format!("{op}|{}", canonical(&v)))
}

/// A client token's earlier answer, when the same parameters come again with it; RAM's
/// IdempotentParameterMismatchException when others do ("If you retry the operation with the same
/// ClientToken, but with different parameters, the retry fails").
fn replay(w: &World, ctx: &Ctx<'_>, op: &str, token: Option<&str>, fp: u64) -> Result<Option<String>, ApiError> {
    let Some(token) = token else { return Ok(None) };
    match w.client_tokens.get(&(ctx.region.to_string(), format!("ram:{op}"), token.to_string())) {
        Some((seen, body)) if *seen == fp => Ok(Some(body.clone())),
        Some(_) => Err(ApiError::client(
            IDEMPOTENT_MISMATCH,
            format!("The client token {token} was already used with other parameters for {op}."),
        )),
        None => Ok(None),
    }
}

/// The token the answer carries: the caller's, else one RAM generates ("If you don't provide
/// this value, then AWS generates a random one for you").
fn token_of(w: &mut World, given: Option<&str>) -> String {
    given.map_or_else(|| w.new_share_uuid(), str::to_string)
}

fn remember(w: &mut World, ctx: &Ctx<'_>, op: &str, token: &str, fp: u64, body: &str) {
    w.client_tokens.insert((ctx.region.to_string(), format!("ram:{op}"), token.to_string()), (fp, body.to_string()));
}

/// restJson1's default timestamp format: epoch seconds, milliseconds as the fraction.
fn epoch(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

/// A resource share ARN of this region, as RAM reads it: malformed (MalformedArnException, with
/// the message RAM gives, hashicorp/terraform-provider-aws#40360), or unknown here.
fn share_index(w: &World, ctx: &Ctx<'_>, arn: &str) -> Result<usize, ApiError> {
    let well_formed = arn
        .strip_prefix("arn:aws:ram:")
        .and_then(|r| r.split_once(":resource-share/"))
        .is_some_and(|(scope, id)| scope.contains(':') && !id.is_empty());
    if !well_formed {
        return Err(ApiError::client(
            MALFORMED_ARN,
            "The specified resource share ARN is not valid. Verify the ARN and try again.",
        ));
    }
    w.resource_shares
        .iter()
        .position(|s| s.arn == arn && s.region == ctx.region)
        .ok_or_else(|| ApiError::client(UNKNOWN_RESOURCE, format!("ResourceShare {arn} could not be found.")))
}

/// How long a new share stays out of GetResourceShares.
fn listing_lag(w: &World) -> Duration {
    Duration::seconds(w.behaviour.ram_listing_lag_secs.min(MAX_RAM_LISTING_LAG_SECS) as i64)
}

/// How long RAM takes to associate or disassociate.
fn delay(w: &World) -> Duration {
    Duration::seconds(w.behaviour.ram_association_delay_secs.min(MAX_RAM_ASSOCIATION_DELAY_SECS) as i64)
}

/// When the Capacity Block behind a resource association ended, if it has by `now`: at its end
/// once expired; at `now` in a state that ends it otherwise (cancelled, failed, payment-failed,
/// set through the control API), whose time the simulator does not keep.
fn block_ended(w: &World, reservation_id: Option<&str>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let r = w.reservation(reservation_id?)?;
    match r.state(now, &w.extensions).as_str() {
        "expired" => Some(r.end(now, &w.extensions)),
        "cancelled" | "failed" | "payment-failed" => Some(now),
        _ => None,
    }
}

fn shown(w: &World, a: &Association, now: DateTime<Utc>) -> crate::resource_shares::Shown {
    a.shown(now, delay(w), block_ended(w, a.reservation_id.as_deref(), now))
}

/// The ResourceShare structure of the model.
fn share_json(s: &ResourceShare, now: DateTime<Utc>) -> Value {
    json!({
        "resourceShareArn": s.arn,
        "name": s.name,
        "owningAccountId": s.owner,
        "allowExternalPrincipals": s.allow_external_principals,
        "status": s.status(now),
        "tags": s.tags.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect::<Vec<_>>(),
        "creationTime": epoch(s.created),
        "lastUpdatedTime": epoch(s.updated),
        "featureSet": "STANDARD",
    })
}

/// The ResourceShareAssociation structure of the model (`statusMessage` only when there is one).
fn association_json(w: &World, s: &ResourceShare, a: &Association, now: DateTime<Utc>) -> Value {
    let sh = shown(w, a, now);
    let mut v = json!({
        "resourceShareArn": s.arn,
        "resourceShareName": s.name,
        "associatedEntity": a.entity,
        "associationType": a.kind.as_str(),
        "status": sh.status,
        "creationTime": epoch(a.created),
        "lastUpdatedTime": epoch(sh.updated),
        "external": a.external,
    });
    if let (Some(m), Value::Object(map)) = (sh.message, &mut v) {
        map.insert("statusMessage".into(), json!(m));
    }
    v
}

/// Every share of every region with its associations, for GET /_sim/ram/shares.
pub fn shares_state(w: &World) -> Value {
    let now = w.now();
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let shares: Vec<Value> = w
        .resource_shares
        .iter()
        .map(|s| {
            let associations: Vec<Value> = s
                .associations
                .iter()
                .map(|a| {
                    let sh = shown(w, a, now);
                    json!({
                        "association_type": a.kind.as_str(),
                        "associated_entity": a.entity,
                        "status": sh.status,
                        "status_message": sh.message,
                        "external": a.external,
                        "reservation_id": a.reservation_id,
                        "created": rfc(a.created),
                        "last_updated": rfc(sh.updated),
                    })
                })
                .collect();
            json!({
                "resource_share_arn": s.arn,
                "name": s.name,
                "region": s.region,
                "owning_account_id": s.owner,
                "allow_external_principals": s.allow_external_principals,
                "status": s.status(now),
                "tags": s.tags.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
                "created": rfc(s.created),
                "last_updated": rfc(s.updated),
                "associations": associations,
            })
        })
        .collect();
    json!({ "now": rfc(now), "shares": shares })
}

#[cfg(test)]
mod tests;
