//! The JSON control API under /_sim/: inspect state, move the clock, change behaviour, reset the
//! scenario, steer payments and inject reservations. Faults never apply here.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::reservations::{Extension, Payment, Reservation, Stopping};
use crate::resource_shares::AssociationType;
use crate::scenario::{Behaviour, PaymentOutcome, Scenario, StoppingInUsage};
use crate::wire::query::parse_timestamp;
use crate::world::World;

pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

fn ok(v: Value) -> Reply {
    Reply { status: 200, content_type: "application/json", body: v.to_string() }
}

fn bad(status: u16, msg: impl Into<String>) -> Reply {
    Reply { status, content_type: "application/json", body: json!({ "error": msg.into() }).to_string() }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Routes one control request. `world` is locked by the caller for the duration.
pub fn handle(world: &mut World, method: &str, path: &str, body: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(body);
    let result = match (method, path.trim_end_matches('/')) {
        ("GET", "/_sim/health") => {
            return Reply { status: 200, content_type: "text/plain", body: "ok".into() };
        }
        ("GET", "/_sim/state") => {
            // The other callers are played lazily: bring their counts up to now first.
            world.settle_describe_limit();
            Ok(state(world))
        }
        ("GET", "/_sim/behaviour") => Ok(json!(world.behaviour)),
        // The simulated "now", for capblock's simulated time source (CAPBLOCK_SIMULATED_CLOCK_URL).
        ("GET", "/_sim/clock") => Ok(json!({ "now": rfc3339(world.now()) })),
        ("POST", "/_sim/clock") => clock(world, &text),
        ("POST", "/_sim/behaviour") => behaviour(world, &text),
        ("POST", "/_sim/scenario") => Scenario::parse(&text).map(|s| {
            *world = World::new(s);
            tracing::info!(now = %world.now(), "scenario reset");
            json!({ "now": rfc3339(world.now()) })
        }),
        ("POST", "/_sim/payment") => payment(world, &text),
        ("POST", "/_sim/reservations") => inject(world, &text),
        ("POST", "/_sim/reservations/state") => set_state(world, &text),
        ("POST", "/_sim/reservations/omit") => omit(world, &text),
        ("POST", "/_sim/blocks/health") => set_health(world, &text),
        ("POST", "/_sim/blocks/usage") => set_usage(world, &text),
        ("GET", "/_sim/ram/shares") => Ok(crate::ram::shares_state(world)),
        ("GET", "/_sim/ram/organization") => Ok(json!(world.organization)),
        ("POST", "/_sim/ram/organization") => organization(world, &text),
        ("GET", "/_sim/describe/calls") => Ok(describe_calls(world)),
        ("POST", "/_sim/describe/calls") => clear_describe_calls(world, &text),
        (_, p)
            if matches!(
                p,
                "/_sim/reservations/state"
                    | "/_sim/reservations/omit"
                    | "/_sim/blocks/health"
                    | "/_sim/blocks/usage"
                    | "/_sim/health"
                    | "/_sim/state"
                    | "/_sim/clock"
                    | "/_sim/behaviour"
                    | "/_sim/scenario"
                    | "/_sim/payment"
                    | "/_sim/reservations"
                    | "/_sim/ram/shares"
                    | "/_sim/ram/organization"
                    | "/_sim/describe/calls"
            ) =>
        {
            return bad(405, format!("method {method} not allowed on {p}"));
        }
        _ => return bad(404, format!("no control endpoint {path}")),
    };
    match result {
        Ok(v) => ok(v),
        Err(e) => bad(400, e),
    }
}

fn parse_json<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| format!("bad JSON body: {e}"))
}

fn reservation_json(w: &World, r: &Reservation) -> Value {
    let now = w.now();
    let state = r.state(now, &w.extensions);
    let tags: BTreeMap<&str, &str> = r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    json!({
        "reservation_id": r.id,
        "offering_id": r.offering_id,
        "region": r.region,
        "availability_zone": r.availability_zone,
        "instance_type": r.instance_type,
        "instance_platform": r.instance_platform,
        "instance_count": r.instance_count,
        "start": rfc3339(r.start),
        "end": rfc3339(r.end(now, &w.extensions)),
        "original_end": rfc3339(r.original_end),
        "upfront_fee": r.upfront_fee.to_string(),
        "currency": r.currency,
        "tags": tags,
        "state": state,
        "purchased_at": rfc3339(r.created),
        "injected": r.injected,
        "capacity_block_id": r.capacity_block_id,
        "block_state": r.block_state(now, &w.extensions),
        "ultraserver_type": r.ultraserver_type,
        "interconnect": r.health(now).interconnect,
        "unavailable": r.health(now).unavailable,
        "running": r.running(&state, now),
        "available": r.available_instance_count(&state, now),
        "stopping": r.stopping_count(now),
        "accounts": usage_json(r, &w.scenario.account_id, &state, w.behaviour.stopping_in_usage, now),
    })
}

fn extension_json(w: &World, e: &Extension) -> Value {
    json!({
        "offering_id": e.offering_id,
        "reservation_id": e.reservation_id,
        "duration_hours": e.duration_hours,
        "purchased_at": rfc3339(e.purchased),
        "start": rfc3339(e.start),
        "end": rfc3339(e.end),
        "upfront_fee": e.upfront_fee.to_string(),
        "currency": e.currency,
        "status": e.status(w.now()),
    })
}

fn state(w: &World) -> Value {
    json!({
        "now": rfc3339(w.now()),
        "purchases": w.reservations.iter().filter(|r| !r.injected).map(|r| reservation_json(w, r)).collect::<Vec<_>>(),
        "reservations": w.reservations.iter().map(|r| reservation_json(w, r)).collect::<Vec<_>>(),
        "extensions": w.extensions.iter().map(|e| extension_json(w, e)).collect::<Vec<_>>(),
        "launch_templates": w.launch_templates.iter().map(|t| t.to_json()).collect::<Vec<_>>(),
        "calls": w.calls,
        "calls_by_region": w.calls_by_region,
        "faults_injected": w.faults,
        "offering_ids_minted": w.minted_count(),
        "offering_ids_other_accounts": w.other_account_ids_count(),
        "describe_limit_others": w.others_report(),
        "describe_calls_by_account": w.describe_calls_by_account(),
        "behaviour": w.behaviour,
    })
}

/// The DescribeCapacityBlockOfferings calls that reached the describe limit, oldest first (the
/// last `MAX_DESCRIBE_CALLS`), and how many older ones were let go since the last clear.
fn describe_calls(w: &World) -> Value {
    let (calls, dropped) = w.describe_calls();
    json!({ "calls": calls, "dropped": dropped })
}

/// `{}` forgets the calls kept (the counts by account stay: only a scenario resets them).
fn clear_describe_calls(w: &mut World, text: &str) -> Result<Value, String> {
    match parse_json::<Value>(text)? {
        Value::Object(m) if m.is_empty() => Ok(json!({ "cleared": w.clear_describe_calls() })),
        _ => Err("body must be {}".into()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockReq {
    advance_secs: Option<i64>,
    set: Option<String>,
}

fn clock(w: &mut World, text: &str) -> Result<Value, String> {
    let req: ClockReq = parse_json(text)?;
    match (req.advance_secs, req.set) {
        (Some(s), None) => w.clock.advance(s),
        (None, Some(t)) => w.clock.set(parse_timestamp(&t).ok_or_else(|| format!("bad timestamp {t:?}"))?),
        _ => return Err("give exactly one of advance_secs or set".into()),
    }
    Ok(json!({ "now": rfc3339(w.now()) }))
}

/// Partial update: the body's keys are merged over the current behaviour (JSON merge, `null`
/// clears `throttle`). A body giving `payment_delay_minutes` without `payment_delay_hours`
/// clears the hours, so that the minutes it gives take effect.
fn behaviour(w: &mut World, text: &str) -> Result<Value, String> {
    let patch: Value = parse_json(text)?;
    let Value::Object(patch) = patch else {
        return Err("body must be a JSON object".into());
    };
    let mut current = serde_json::to_value(&w.behaviour).map_err(|e| e.to_string())?;
    if let Value::Object(map) = &mut current {
        if patch.contains_key("payment_delay_minutes") && !patch.contains_key("payment_delay_hours") {
            map.insert("payment_delay_hours".into(), Value::Null);
        }
        for (k, v) in patch {
            if !map.contains_key(&k) {
                return Err(format!("unknown behaviour field {k:?}"));
            }
            map.insert(k, v);
        }
    }
    let b: Behaviour = serde_json::from_value(current).map_err(|e| format!("bad behaviour: {e}"))?;
    b.validate()?;
    w.set_behaviour(b);
    tracing::info!(behaviour = ?w.behaviour, "behaviour changed");
    Ok(json!(w.behaviour))
}

/// Partial update of the organization RAM shares within, like the behaviour's: the body's keys
/// replace the current ones (`accounts` and `ous` whole). Shares already made keep their
/// associations; the next calls see the new organization.
fn organization(w: &mut World, text: &str) -> Result<Value, String> {
    let patch: Value = parse_json(text)?;
    let Value::Object(patch) = patch else {
        return Err("body must be a JSON object".into());
    };
    let mut current = serde_json::to_value(&w.organization).map_err(|e| e.to_string())?;
    if let Value::Object(map) = &mut current {
        for (k, v) in patch {
            if !map.contains_key(&k) {
                return Err(format!("unknown organization field {k:?}"));
            }
            map.insert(k, v);
        }
    }
    let o: crate::organization::Organization =
        serde_json::from_value(current).map_err(|e| format!("bad organization: {e}"))?;
    o.validate(&w.scenario.account_id)?;
    w.organization = o;
    tracing::info!(organization = ?w.organization, "organization changed");
    Ok(json!(w.organization))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PaymentReq {
    reservation_id: String,
    /// Target one extension of the reservation instead of the reservation itself.
    extension_offering_id: Option<String>,
    outcome: PaymentOutcome,
    after_hours: Option<f64>,
}

/// Overrides how one purchase settles. `after_hours` counts from the purchase time (default: the
/// behaviour's payment delay); the 12 h / start - 5 min deadline still applies.
fn payment(w: &mut World, text: &str) -> Result<Value, String> {
    let req: PaymentReq = parse_json(text)?;
    let delay = req.after_hours.unwrap_or(w.behaviour.payment_delay());
    if !(delay >= 0.0 && delay.is_finite()) {
        return Err("after_hours must be >= 0".into());
    }
    let p = Payment { outcome: req.outcome, delay_hours: delay, explicit: true };
    let now = w.now();
    if let Some(ext_id) = req.extension_offering_id {
        let e = w
            .extensions
            .iter_mut()
            .rev()
            .find(|e| e.reservation_id == req.reservation_id && e.offering_id == ext_id)
            .ok_or_else(|| format!("no extension {ext_id} on {}", req.reservation_id))?;
        e.payment = p;
        let status = e.status(now);
        return Ok(json!({ "reservation_id": req.reservation_id, "extension_offering_id": ext_id, "status": status }));
    }
    let r = reservation_mut(w, &req.reservation_id)?;
    r.payment = p;
    let id = r.id.clone();
    let state = w.reservation(&id).map(|r| r.state(now, &w.extensions));
    Ok(json!({ "reservation_id": id, "state": state }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectReq {
    #[serde(default = "default_region")]
    region: String,
    instance_type: String,
    instance_count: u32,
    availability_zone: Option<String>,
    start: String,
    end: String,
    #[serde(default)]
    upfront_fee: Option<String>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    instance_platform: Option<String>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    state_override: Option<String>,
    /// A block of one UltraServer of this type: `instance_type` and `instance_count` must be
    /// the UltraServer's.
    #[serde(default)]
    ultraserver_type: Option<String>,
}

fn default_region() -> String {
    crate::wire::region::DEFAULT_REGION.to_string()
}

/// A reservation "bought by hand in the console": already paid, state follows the clock.
fn inject(w: &mut World, text: &str) -> Result<Value, String> {
    let req: InjectReq = parse_json(text)?;
    let start = parse_timestamp(&req.start).ok_or("bad start")?;
    let end = parse_timestamp(&req.end).ok_or("bad end")?;
    if end <= start {
        return Err("end must be after start".into());
    }
    if req.instance_count == 0 {
        return Err("instance_count must be >= 1".into());
    }
    // EC2 sets its aws: tags itself (see counts_before_start); nobody else can.
    if let Some(k) = req.tags.keys().find(|k| k.to_ascii_lowercase().starts_with("aws:")) {
        return Err(format!("tag {k:?}: keys starting with aws: are EC2's own"));
    }
    if let Some(u) = &req.ultraserver_type {
        let info = crate::instance_types::ultraserver(u).ok_or_else(|| format!("unknown ultraserver_type {u:?}"))?;
        if info.instance_type != req.instance_type || info.instances != req.instance_count {
            return Err(format!("one {u} is {} x {}", info.instances, info.instance_type));
        }
    }
    let fee = match req.upfront_fee.as_deref() {
        Some(f) => f.parse::<Decimal>().map_err(|e| format!("bad upfront_fee: {e}"))?,
        None => Decimal::ZERO,
    };
    let mut fee = fee;
    fee.rescale(2);
    let id = w.new_id("cr-");
    let r = Reservation {
        id: id.clone(),
        availability_zone: req.availability_zone.unwrap_or_else(|| format!("{}a", req.region)),
        region: req.region,
        instance_type: req.instance_type,
        instance_platform: req.instance_platform.unwrap_or_else(|| "Linux/UNIX".into()),
        instance_count: req.instance_count,
        start,
        original_end: end,
        created: w.now(),
        tags: req.tags.into_iter().collect(),
        upfront_fee: fee,
        currency: req.currency.unwrap_or_else(|| "USD".into()),
        offering_id: None,
        payment: Payment::paid_up_front(),
        injected: true,
        state_override: req.state_override,
        omitted: Vec::new(),
        capacity_block_id: crate::actions::block_id(&id),
        ultraserver_type: req.ultraserver_type,
        health_steps: Vec::new(),
        health_override: None,
        usage_steps: Vec::new(),
        usage_override: None,
        consumers: Default::default(),
        stopping: vec![],
    };
    w.reservations.push(r);
    let state = w.reservation(&id).map(|r| r.state(w.now(), &w.extensions));
    Ok(json!({ "reservation_id": id, "state": state }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateReq {
    reservation_id: String,
    /// Any non-empty string (a state the client does not know included); null goes back to
    /// the lifecycle.
    state: Option<String>,
}

/// The reservation `id` names, to change; or why not.
fn reservation_mut<'w>(w: &'w mut World, id: &str) -> Result<&'w mut crate::reservations::Reservation, String> {
    w.reservations.iter_mut().find(|r| r.id == id).ok_or_else(|| format!("no reservation {id}"))
}

/// The reservation a control request names by its reservation id or its capacity block id.
fn block_named<'w>(
    w: &'w mut World,
    reservation_id: Option<&str>,
    capacity_block_id: Option<&str>,
) -> Result<&'w mut crate::reservations::Reservation, String> {
    w.reservations
        .iter_mut()
        .find(|r| reservation_id == Some(r.id.as_str()) || capacity_block_id == Some(r.capacity_block_id.as_str()))
        .ok_or_else(|| "name an existing reservation_id or capacity_block_id".to_string())
}

/// Puts a reservation in a state EC2 may set on its own (unavailable, cancelling, delayed,
/// assessing, ...), or back to the one the clock gives it.
fn set_state(w: &mut World, text: &str) -> Result<Value, String> {
    let req: StateReq = parse_json(text)?;
    if req.state.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err("state must be a non-empty string or null".into());
    }
    let now = w.now();
    let r = reservation_mut(w, &req.reservation_id)?;
    r.state_override = req.state;
    let r = r.clone();
    Ok(
        json!({ "reservation_id": r.id, "state": r.state(now, &w.extensions), "block_state": r.block_state(now, &w.extensions) }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OmitReq {
    reservation_id: String,
    /// CapacityReservation members (as EC2's XML names them: `state`, `endDate`, ...); empty:
    /// all shown again.
    members: Vec<String>,
}

/// Which members DescribeCapacityReservations leaves out of a reservation's description.
fn omit(w: &mut World, text: &str) -> Result<Value, String> {
    const MEMBERS: &[&str] = &[
        "capacityReservationId",
        "ownerId",
        "capacityReservationArn",
        "instanceType",
        "instancePlatform",
        "availabilityZone",
        "tenancy",
        "totalInstanceCount",
        "availableInstanceCount",
        "ebsOptimized",
        "ephemeralStorage",
        "state",
        "startDate",
        "endDate",
        "endDateType",
        "instanceMatchCriteria",
        "createDate",
        "tagSet",
        "reservationType",
        "capacityBlockId",
    ];
    let req: OmitReq = parse_json(text)?;
    if let Some(m) = req.members.iter().find(|m| !MEMBERS.contains(&m.as_str())) {
        return Err(format!("{m:?} is not a member the simulator writes ({})", MEMBERS.join(", ")));
    }
    let r = reservation_mut(w, &req.reservation_id)?;
    r.omitted = req.members;
    Ok(json!({ "reservation_id": r.id, "omitted": r.omitted }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthReq {
    reservation_id: Option<String>,
    capacity_block_id: Option<String>,
    interconnect: Option<String>,
    unavailable: Option<u32>,
    /// true: back to the market line's health steps.
    #[serde(default)]
    clear: bool,
}

/// Impairs a block's interconnect and/or takes instances out of it (DescribeCapacityBlockStatus,
/// DescribeInstances and availableInstanceCount follow). Unset fields keep their value.
fn set_health(w: &mut World, text: &str) -> Result<Value, String> {
    let req: HealthReq = parse_json(text)?;
    if let Some(i) = &req.interconnect
        && !crate::scenario::INTERCONNECT_STATUSES.contains(&i.as_str())
    {
        return Err(format!("interconnect must be one of {:?}", crate::scenario::INTERCONNECT_STATUSES));
    }
    let now = w.now();
    let r = block_named(w, req.reservation_id.as_deref(), req.capacity_block_id.as_deref())?;
    if req.clear {
        r.health_override = None;
    } else {
        let mut h = r.health(now);
        if let Some(i) = req.interconnect {
            h.interconnect = i;
        }
        if let Some(n) = req.unavailable {
            if n > r.instance_count {
                return Err(format!("unavailable {n} > the block's {} instances", r.instance_count));
            }
            h.unavailable = n;
        }
        r.health_override = Some(h);
    }
    let h = r.health(now);
    Ok(json!({
        "reservation_id": r.id,
        "capacity_block_id": r.capacity_block_id,
        "interconnect": h.interconnect,
        "unavailable": h.unavailable,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageReq {
    reservation_id: Option<String>,
    capacity_block_id: Option<String>,
    /// Another account that runs instances in the block through a RAM share (absent: the
    /// owner's instances).
    account_id: Option<String>,
    running: Option<u32>,
    /// true: the owner's back to the market line's usage steps; another account's to none.
    #[serde(default)]
    clear: bool,
}

/// Sets how many of a block's instances run, the owner's (DescribeInstances lists them) or,
/// with `account_id`, another account's through the block's RAM share (DescribeInstances does
/// not); availableInstanceCount, the status's counts and GetCapacityReservationUsage follow
/// while it is active. With `clear` the owner's return to the line's usage steps, another
/// account's to none. Instances that stop keep their places for `stopping_minutes`.
fn set_usage(w: &mut World, text: &str) -> Result<Value, String> {
    let req: UsageReq = parse_json(text)?;
    let running = match (req.running, req.clear) {
        (Some(_), true) => return Err("give running or clear, not both".into()),
        (None, false) => return Err("give running (instances) or \"clear\": true".into()),
        (n, _) => n,
    };
    let now = w.now();
    let owner = w.scenario.account_id.clone();
    let account = req.account_id.clone().filter(|a| *a != owner);
    if let Some(a) = &account
        && !crate::organization::is_account(a)
    {
        return Err(format!("account_id {a} is not 12 digits"));
    }
    let shared = {
        let r = block_named(w, req.reservation_id.as_deref(), req.capacity_block_id.as_deref())?;
        let id = r.id.clone();
        w.resource_shares.iter().filter(|s| s.status(now) == "ACTIVE").any(|s| {
            s.in_force(AssociationType::Resource, now).any(|a| a.reservation_id.as_deref() == Some(id.as_str()))
        })
    };
    if let Some(a) = &account
        && !shared
    {
        return Err(format!("account {a} cannot run instances in a block that is not shared through RAM"));
    }
    let stop_for = Duration::minutes(i64::from(w.behaviour.stopping_minutes));
    let exts = w.extensions.clone();
    let r = block_named(w, req.reservation_id.as_deref(), req.capacity_block_id.as_deref())?;
    if let Some(n) = running
        && n > r.instance_count
    {
        return Err(format!("running {n} > the block's {} instances", r.instance_count));
    }
    let state = r.state(now, &exts);
    let of = |r: &Reservation| match &account {
        None => r.running(&state, now),
        Some(a) => r.consumers_running(&state, now).into_iter().find(|(x, _)| x == a).map_or(0, |(_, n)| n),
    };
    let before = of(r);
    match (&account, running) {
        (None, n) => r.usage_override = n,
        (Some(a), Some(n)) if n > 0 => {
            r.consumers.insert(a.clone(), n);
        }
        (Some(a), _) => {
            r.consumers.remove(a);
        }
    }
    let after = of(r);
    if after < before && stop_for > Duration::zero() {
        let who = account.clone().unwrap_or(owner);
        r.stopping.push(Stopping { account: who, count: before - after, until: now + stop_for });
    }
    let r = r.clone();
    Ok(json!({
        "reservation_id": r.id,
        "capacity_block_id": r.capacity_block_id,
        "account_id": account,
        "state": state,
        "usage": r.usage(now),
        "running": r.running(&state, now),
        "available": r.available_instance_count(&state, now),
        "stopping": r.stopping_count(now),
        "accounts": usage_json(&r, &w.scenario.account_id, &state, w.behaviour.stopping_in_usage, now),
    }))
}

/// GetCapacityReservationUsage's accounts of a reservation, as a map.
fn usage_json(r: &Reservation, owner: &str, state: &str, stopping: StoppingInUsage, now: DateTime<Utc>) -> Value {
    let m: BTreeMap<String, u32> = r.usage_by_account(owner, state, stopping, now).into_iter().collect();
    json!(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simulated account (the scenario's default `account_id`).
    const SIM: &str = "111122223333";

    fn world() -> World {
        World::new(Scenario::parse("[clock]\nstart = \"2026-12-01T00:00:00Z\"").unwrap())
    }

    fn call(w: &mut World, m: &str, p: &str, body: &str) -> (u16, Value) {
        let r = handle(w, m, p, body.as_bytes());
        (r.status, serde_json::from_str(&r.body).unwrap_or(Value::String(r.body)))
    }

    #[test]
    fn clock_and_behaviour() {
        let mut w = world();
        let (s, v) = call(&mut w, "POST", "/_sim/clock", r#"{"advance_secs": 3600}"#);
        assert_eq!(s, 200);
        assert_eq!(v["now"], "2026-12-01T01:00:00Z");
        let (_, v) = call(&mut w, "POST", "/_sim/clock", r#"{"set": "2026-12-05T00:00:00Z"}"#);
        assert_eq!(v["now"], "2026-12-05T00:00:00Z");
        assert_eq!(call(&mut w, "GET", "/_sim/clock", "").1["now"], "2026-12-05T00:00:00Z");
        assert_eq!(call(&mut w, "POST", "/_sim/clock", "{}").0, 400);
        let (s, v) = call(
            &mut w,
            "POST",
            "/_sim/behaviour",
            r#"{"latency_ms": 5, "throttle": {"rate_per_sec": 1, "burst": 2}}"#,
        );
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["latency_ms"], 5);
        assert_eq!(w.behaviour.throttle.unwrap().burst, 2);
        let (_, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"throttle": null}"#);
        assert_eq!(v["throttle"], Value::Null);
        assert_eq!(w.behaviour.latency_ms, 5);
        assert_eq!(call(&mut w, "POST", "/_sim/behaviour", r#"{"nope": 1}"#).0, 400);
        assert_eq!(call(&mut w, "POST", "/_sim/behaviour", r#"{"error_5xx_rate": 3}"#).0, 400);
        assert_eq!(call(&mut w, "GET", "/_sim/nothing", "").0, 404);
        assert_eq!(call(&mut w, "GET", "/_sim/health", "").1, "ok");
    }

    #[test]
    fn the_payment_delay_through_the_behaviour_endpoint() {
        let mut w = world();
        let (_, v) = call(&mut w, "GET", "/_sim/behaviour", "");
        assert_eq!((&v["payment_delay_minutes"], &v["payment_delay_hours"]), (&json!(5.0), &Value::Null));
        // The hours win while set...
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"payment_delay_hours": 3}"#);
        assert_eq!((s, &v["payment_delay_hours"]), (200, &json!(3.0)));
        assert_eq!(w.behaviour.payment_delay(), 3.0);
        call(&mut w, "POST", "/_sim/behaviour", r#"{"latency_ms": 1}"#);
        assert_eq!(w.behaviour.payment_delay(), 3.0, "another key leaves them");
        // ...until a body gives the minutes alone: they take effect.
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"payment_delay_minutes": 20}"#);
        assert_eq!((s, &v["payment_delay_hours"]), (200, &Value::Null));
        assert_eq!(w.behaviour.payment_delay(), 20.0 / 60.0);
        // Both in one body: the hours win, as in a scenario.
        call(&mut w, "POST", "/_sim/behaviour", r#"{"payment_delay_minutes": 7, "payment_delay_hours": 1}"#);
        assert_eq!(w.behaviour.payment_delay(), 1.0);
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"failed_payment_visible_minutes": 5}"#);
        assert_eq!((s, &v["failed_payment_visible_minutes"]), (200, &json!(5)));
        for bad in [
            r#"{"payment_delay_minutes": -1}"#,
            r#"{"payment_delay_hours": -1}"#,
            r#"{"failed_payment_visible_minutes": -1}"#,
            r#"{"failed_payment_visible_minutes": "1h"}"#,
        ] {
            assert_eq!(call(&mut w, "POST", "/_sim/behaviour", bad).0, 400, "{bad}");
        }
    }

    #[test]
    fn offering_ids_across_accounts_through_the_behaviour_endpoint() {
        let mut w = world();
        assert_eq!(call(&mut w, "GET", "/_sim/behaviour", "").1["offering_ids_across_accounts"], "shared");
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"offering_ids_across_accounts": "per_account"}"#);
        assert_eq!((s, &v["offering_ids_across_accounts"]), (200, &json!("per_account")));
        assert_eq!(w.behaviour.offering_ids_across_accounts, crate::scenario::OfferingIdsAcrossAccounts::PerAccount);
        // Another key leaves it; the state shows it and the count of ids shown to other accounts.
        call(&mut w, "POST", "/_sim/behaviour", r#"{"offering_ids": "per_answer"}"#);
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["behaviour"]["offering_ids_across_accounts"], "per_account");
        assert_eq!(st["offering_ids_other_accounts"], 0);
        for (bad, says) in [
            (
                r#"{"offering_ids_across_accounts": "per-account"}"#,
                r#"must be "shared" or "per_account", got "per-account""#,
            ),
            (r#"{"offering_ids_across_accounts": "Shared"}"#, r#"must be "shared" or "per_account", got "Shared""#),
            (
                r#"{"offering_ids_across_accounts": null}"#,
                r#"offering_ids_across_accounts to be "shared" or "per_account""#,
            ),
            (
                r#"{"offering_ids_across_accounts": true}"#,
                r#"offering_ids_across_accounts to be "shared" or "per_account""#,
            ),
        ] {
            let (s, v) = call(&mut w, "POST", "/_sim/behaviour", bad);
            assert_eq!(s, 400, "{bad}");
            let error = v["error"].as_str().unwrap_or_default();
            assert!(error.contains(says), "{bad}: {error}");
        }
        assert_eq!(
            w.behaviour.offering_ids_across_accounts,
            crate::scenario::OfferingIdsAcrossAccounts::PerAccount,
            "a refused change changes nothing"
        );
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"offering_ids_across_accounts": "shared"}"#);
        assert_eq!((s, &v["offering_ids_across_accounts"]), (200, &json!("shared")));
    }

    #[test]
    fn describe_limit_through_the_behaviour_endpoint() {
        let mut w = world();
        let (_, v) = call(&mut w, "GET", "/_sim/behaviour", "");
        assert_eq!(v["describe_limit"], json!({"burst": 2, "refill_secs": 4.0}));
        assert_eq!(v["describe_limit_other_callers_per_min"], 0.0);
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"describe_limit": null}"#);
        assert_eq!((s, &v["describe_limit"]), (200, &Value::Null));
        assert!((0..5).all(|_| w.take_describe_token(SIM, "us-east-1")));
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"describe_limit": {"burst": 1}}"#);
        assert_eq!((s, &v["describe_limit"]), (200, &json!({"burst": 1, "refill_secs": 4.0})));
        assert!(w.take_describe_token(SIM, "us-east-1"));
        assert!(!w.take_describe_token(SIM, "us-east-1"));
        let (_, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"describe_limit": false}"#);
        assert_eq!(v["describe_limit"], Value::Null);
        let (_, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"describe_limit": true}"#);
        assert_eq!(v["describe_limit"], json!({"burst": 2, "refill_secs": 4.0}));
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"describe_limit_other_callers_per_min": 12.5}"#);
        assert_eq!((s, &v["describe_limit_other_callers_per_min"]), (200, &json!(12.5)));
        for bad in [
            r#"{"describe_limit": {"burst": 0}}"#,
            r#"{"describe_limit": {"refill_secs": -4}}"#,
            r#"{"describe_limit": "off"}"#,
            r#"{"describe_limit_other_callers_per_min": -1}"#,
        ] {
            assert_eq!(call(&mut w, "POST", "/_sim/behaviour", bad).0, 400, "{bad}");
        }
        assert_eq!(w.behaviour.describe_limit_other_callers_per_min, 12.5, "a refused change changes nothing");
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["faults_injected"]["describe_limited"], 1);
        assert_eq!(st["faults_injected"]["quota_zero"], 0);
    }

    #[test]
    fn iam_denials_through_the_behaviour_endpoint_and_their_count_in_the_state() {
        use crate::actions::dispatch_as;
        use crate::wire::query::Params;
        let mut w = world();
        assert_eq!(call(&mut w, "GET", "/_sim/behaviour", "").1["iam_denials"], json!([]));
        let denial =
            json!({"access_key": "ASIASCAN", "action": "DescribeCapacityReservations", "regions": ["us-west-2"]});
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", &json!({"iam_denials": [denial.clone()]}).to_string());
        assert_eq!((s, &v["iam_denials"]), (200, &json!([denial])));
        let describe = |w: &mut World, region: &str| {
            dispatch_as(w, region, Some("ASIASCAN"), "DescribeCapacityReservations", &Params::default())
        };
        assert_eq!(describe(&mut w, "us-west-2").unwrap_err().code, "UnauthorizedOperation");
        assert!(describe(&mut w, "us-east-1").is_ok());
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["faults_injected"]["unauthorized"], 1);
        // Regions may be left out (every region); a bad entry changes nothing.
        let all = r#"{"iam_denials": [{"access_key": "ASIASCAN", "action": "DescribeCapacityReservations"}]}"#;
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", all);
        assert_eq!((s, &v["iam_denials"][0]["regions"]), (200, &json!([])));
        assert_eq!(describe(&mut w, "us-east-1").unwrap_err().code, "UnauthorizedOperation");
        for bad in [
            r#"{"iam_denials": [{"access_key": "", "action": "PurchaseCapacityBlock"}]}"#,
            r#"{"iam_denials": [{"access_key": "K", "action": "Purchase"}]}"#,
            r#"{"iam_denials": [{"access_key": "K", "action": "PurchaseCapacityBlock", "region": "us-east-1"}]}"#,
            r#"{"iam_denials": {"access_key": "K", "action": "PurchaseCapacityBlock"}}"#,
            r#"{"iam_denials": null}"#,
        ] {
            assert_eq!(call(&mut w, "POST", "/_sim/behaviour", bad).0, 400, "{bad}");
        }
        assert_eq!(w.behaviour.iam_denials.len(), 1, "a refused change changes nothing");
        // An empty list lifts them.
        let (s, _) = call(&mut w, "POST", "/_sim/behaviour", r#"{"iam_denials": []}"#);
        assert_eq!(s, 200);
        assert!(describe(&mut w, "us-west-2").is_ok());
    }

    #[test]
    fn describe_limit_others_through_the_behaviour_endpoint_and_their_counts_in_the_state() {
        let mut w = world();
        let (_, v) = call(&mut w, "GET", "/_sim/behaviour", "");
        assert_eq!(v["describe_limit_others"], json!([]));
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["describe_limit_others"], json!({"calls": 0, "refused": 0, "by_region": {}, "by_caller": {}}));
        // A burst of 2 that refills in an hour; a script's 3 calls at once, now and hourly.
        let body = r#"{"describe_limit": {"burst": 2, "refill_secs": 3600},
                       "describe_limit_others": [{"name": "script", "calls": 3, "every_secs": 3600}]}"#;
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", body);
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            v["describe_limit_others"],
            json!([{"name": "script", "calls": 3, "over_secs": 0.0, "every_secs": 3600.0, "offset_secs": 0.0}])
        );
        // capblock's first call in us-east-1 finds the script's calls played before it.
        assert!(!w.take_describe_token(SIM, "us-east-1"));
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        let others = &st["describe_limit_others"];
        assert_eq!((&others["calls"], &others["refused"]), (&json!(3), &json!(1)));
        assert_eq!(others["by_region"], json!({"us-east-1": {"calls": 3, "refused": 1}}));
        assert_eq!(others["by_caller"], json!({"script": {"calls": 3, "refused": 1}}));
        assert_eq!(st["faults_injected"]["describe_limited"], 1, "only capblock's refusal");
        assert_eq!(st["behaviour"]["describe_limit_others"][0]["name"], "script");
        // A new pattern starts now: the notebook's first call at once (refused, the bucket is
        // empty); the script's counts stay.
        let (s, _) = call(
            &mut w,
            "POST",
            "/_sim/behaviour",
            r#"{"describe_limit_others": [{"name": "notebook", "calls": 1, "every_secs": 3600, "offset_secs": 0}]}"#,
        );
        assert_eq!(s, 200);
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        let others = &st["describe_limit_others"];
        assert_eq!(
            others["by_caller"],
            json!({"notebook": {"calls": 1, "refused": 1}, "script": {"calls": 3, "refused": 1}})
        );
        assert_eq!((&others["calls"], &others["refused"]), (&json!(4), &json!(2)));
        for (bad, says) in [
            (r#"{"describe_limit_others": [{"name": "", "calls": 1, "every_secs": 20}]}"#, "name must not be empty"),
            (r#"{"describe_limit_others": [{"name": "a", "calls": 0, "every_secs": 20}]}"#, "calls must be within"),
            (
                r#"{"describe_limit_others": [{"name": "a", "calls": 1, "every_secs": 20, "over_secs": 30}]}"#,
                "over_secs",
            ),
            (r#"{"describe_limit_others": [{"name": "a", "calls": 1}]}"#, "missing field `every_secs`"),
            (r#"{"describe_limit_others": [{"name": "a", "calls": 1, "every_secs": 1, "x": 1}]}"#, "unknown field `x`"),
            (r#"{"describe_limit_others": {"name": "a", "calls": 1, "every_secs": 20}}"#, "bad behaviour"),
            (r#"{"describe_limit_others": null}"#, "bad behaviour"),
        ] {
            let (s, v) = call(&mut w, "POST", "/_sim/behaviour", bad);
            assert_eq!(s, 400, "{bad}");
            assert!(v["error"].as_str().unwrap().contains(says), "{bad}: {v}");
        }
        assert_eq!(w.behaviour.describe_limit_others[0].name, "notebook", "a refused change changes nothing");
        // [] removes them; a new scenario resets the counts.
        let (_, v) = call(&mut w, "POST", "/_sim/behaviour", r#"{"describe_limit_others": []}"#);
        assert_eq!(v["describe_limit_others"], json!([]));
        call(&mut w, "POST", "/_sim/scenario", "");
        assert_eq!(call(&mut w, "GET", "/_sim/state", "").1["describe_limit_others"]["calls"], 0);
    }

    #[test]
    fn caller_accounts_the_counts_by_account_and_the_call_log() {
        use crate::actions::dispatch_as;
        use crate::wire::query::Params;
        const MEMBER: &str = "444455556666";
        let mut w = world();
        let body = format!(
            r#"{{"caller_accounts": {{"AKIAMEMBER": "{MEMBER}"}}, "describe_limit": {{"burst": 2, "refill_secs": 3600}}}}"#
        );
        let (s, v) = call(&mut w, "POST", "/_sim/behaviour", &body);
        assert_eq!((s, &v["caller_accounts"]), (200, &json!({"AKIAMEMBER": MEMBER})), "{v}");
        for (bad, says) in [
            (r#"{"caller_accounts": {"AKIAMEMBER": "4444-5555-66"}}"#, r#"account "4444-5555-66" must be 12 digits"#),
            (r#"{"caller_accounts": {"AKIAMEMBER": "44445555666"}}"#, "must be 12 digits"),
            (r#"{"caller_accounts": {"": "444455556666"}}"#, "an access key id must not be empty"),
            (r#"{"caller_accounts": {"AKIAMEMBER": 444455556666}}"#, "bad behaviour"),
            (r#"{"caller_accounts": null}"#, "bad behaviour"),
        ] {
            let (s, v) = call(&mut w, "POST", "/_sim/behaviour", bad);
            assert_eq!(s, 400, "{bad}");
            assert!(v["error"].as_str().unwrap().contains(says), "{bad}: {v}");
        }
        assert_eq!(w.behaviour.caller_account("AKIAMEMBER"), Some(MEMBER), "a refused change changes nothing");
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["describe_calls_by_account"], json!({}));
        assert_eq!(call(&mut w, "GET", "/_sim/describe/calls", "").1, json!({"calls": [], "dropped": 0}));
        // The member's three calls (its burst of 2, then refused), the simulated account's one.
        let p = Params::from_pairs(&[("CapacityDurationHours", "24"), ("InstanceType", "p5.48xlarge")]);
        for key in [Some("AKIAMEMBER"), None, Some("AKIAMEMBER"), Some("AKIAMEMBER")] {
            let _ = dispatch_as(&mut w, "us-west-2", key, "DescribeCapacityBlockOfferings", &p);
        }
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(
            st["describe_calls_by_account"],
            json!({SIM: {"calls": 1, "refused": 0}, MEMBER: {"calls": 3, "refused": 1}})
        );
        assert_eq!(st["faults_injected"]["describe_limited"], 1);
        assert_eq!(st["faults_injected"]["describe_limited_by_account"], json!({MEMBER: 1}));
        let (s, v) = call(&mut w, "GET", "/_sim/describe/calls", "");
        assert_eq!((s, &v["dropped"]), (200, &json!(0)));
        assert_eq!(
            v["calls"][0],
            json!({"account": MEMBER, "region": "us-west-2", "instance_type": "p5.48xlarge", "ultraserver_type": null,
                   "count": null, "duration_hours": 24, "start_range": null, "end_range": null, "served": true})
        );
        let who: Vec<(&str, bool)> = v["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["account"].as_str().unwrap(), c["served"].as_bool().unwrap()))
            .collect();
        assert_eq!(who, [(MEMBER, true), (SIM, true), (MEMBER, true), (MEMBER, false)]);
        // Cleared by {} only; the counts stay.
        for bad in ["", "[]", r#"{"all": true}"#, "null"] {
            assert_eq!(call(&mut w, "POST", "/_sim/describe/calls", bad).0, 400, "{bad:?}");
        }
        assert_eq!(call(&mut w, "POST", "/_sim/describe/calls", "{}").1, json!({"cleared": 4}));
        assert_eq!(call(&mut w, "GET", "/_sim/describe/calls", "").1, json!({"calls": [], "dropped": 0}));
        assert_eq!(call(&mut w, "GET", "/_sim/state", "").1["describe_calls_by_account"][MEMBER]["calls"], 3);
        assert_eq!(call(&mut w, "DELETE", "/_sim/describe/calls", "").0, 405);
        // A new scenario clears the log and the counts (and the mapping with the behaviour).
        let _ = dispatch_as(&mut w, "us-west-2", Some("AKIAMEMBER"), "DescribeCapacityBlockOfferings", &p);
        assert_eq!(call(&mut w, "GET", "/_sim/describe/calls", "").1["calls"].as_array().unwrap().len(), 1);
        assert_eq!(call(&mut w, "POST", "/_sim/scenario", "").0, 200);
        assert_eq!(call(&mut w, "GET", "/_sim/describe/calls", "").1, json!({"calls": [], "dropped": 0}));
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["describe_calls_by_account"], json!({}));
        assert_eq!(st["faults_injected"]["describe_limited_by_account"], json!({}));
        assert_eq!(st["behaviour"]["caller_accounts"], json!({}));
    }

    #[test]
    fn usage_through_the_control_endpoint_and_its_clear() {
        use crate::scenario::UsageStep;
        let mut w = world();
        // Stopped instances free their places at once here (the stopping time has its own test).
        w.behaviour.stopping_minutes = 0;
        let (s, v) = call(
            &mut w,
            "POST",
            "/_sim/reservations",
            r#"{"instance_type":"p5.48xlarge","instance_count":8,"start":"2026-11-30T11:30:00Z","end":"2026-12-02T11:30:00Z"}"#,
        );
        assert_eq!((s, &v["state"]), (200, &json!("active")), "{v}");
        let id = v["reservation_id"].as_str().unwrap().to_string();
        let block = w.reservations[0].capacity_block_id.clone();
        // As if its line said: 5 running from the start on (an injected block has no line).
        w.reservations[0].usage_steps = vec![UsageStep { after_start_hours: 0.0, running: 5 }];
        let counts = |v: &Value| (v["usage"].clone(), v["running"].clone(), v["available"].clone());
        let (s, v) = call(&mut w, "POST", "/_sim/blocks/usage", &format!(r#"{{"reservation_id":"{id}","running":2}}"#));
        assert_eq!(s, 200, "{v}");
        assert_eq!((&v["reservation_id"], &v["capacity_block_id"]), (&json!(id), &json!(block)));
        assert_eq!(counts(&v), (json!(2), json!(2), json!(6)));
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!((&st["reservations"][0]["running"], &st["reservations"][0]["available"]), (&json!(2), &json!(6)));
        // By block id; capped by the unavailable instances.
        call(&mut w, "POST", "/_sim/blocks/health", &format!(r#"{{"capacity_block_id":"{block}","unavailable":7}}"#));
        let (s, v) =
            call(&mut w, "POST", "/_sim/blocks/usage", &format!(r#"{{"capacity_block_id":"{block}","running":8}}"#));
        assert_eq!((s, counts(&v)), (200, (json!(8), json!(1), json!(0))));
        call(&mut w, "POST", "/_sim/blocks/health", &format!(r#"{{"capacity_block_id":"{block}","clear":true}}"#));
        // Clear: back to the steps.
        let (s, v) =
            call(&mut w, "POST", "/_sim/blocks/usage", &format!(r#"{{"reservation_id":"{id}","clear":true}}"#));
        assert_eq!((s, counts(&v)), (200, (json!(5), json!(5), json!(3))));
        for (bad, says) in [
            (format!(r#"{{"reservation_id":"{id}"}}"#), "give running"),
            (format!(r#"{{"reservation_id":"{id}","running":1,"clear":true}}"#), "not both"),
            (format!(r#"{{"reservation_id":"{id}","running":9}}"#), "running 9 > the block's 8"),
            (format!(r#"{{"reservation_id":"{id}","running":-1}}"#), "bad JSON"),
            (format!(r#"{{"reservation_id":"{id}","runing":1}}"#), "unknown field"),
            (r#"{"reservation_id":"cr-nope","running":1}"#.to_string(), "name an existing"),
        ] {
            let (s, v) = call(&mut w, "POST", "/_sim/blocks/usage", &bad);
            assert_eq!(s, 400, "{bad}");
            assert!(v["error"].as_str().unwrap().contains(says), "{bad}: {v}");
        }
        assert_eq!(w.reservations[0].usage_override, None, "a refused change changes nothing");
        assert_eq!(call(&mut w, "GET", "/_sim/blocks/usage", "").0, 405);
    }

    /// An active 8-instance block injected, shared through RAM when `shared`; its id.
    fn active_block(w: &mut World, shared: bool) -> String {
        use crate::resource_shares::{Association, ResourceShare};
        let (_, v) = call(
            w,
            "POST",
            "/_sim/reservations",
            r#"{"instance_type":"p5.48xlarge","instance_count":8,"start":"2026-11-30T11:30:00Z","end":"2026-12-02T11:30:00Z"}"#,
        );
        let id = v["reservation_id"].as_str().unwrap().to_string();
        let now = w.now();
        if shared {
            let association = |kind, entity: &str, reservation_id: Option<String>| Association {
                kind,
                entity: entity.to_string(),
                created: now,
                refusal: None,
                external: false,
                removed: None,
                reservation_id,
            };
            w.resource_shares.push(ResourceShare {
                arn: "arn:aws:ram:us-east-1:111122223333:resource-share/s".into(),
                name: "s".into(),
                region: "us-east-1".into(),
                owner: SIM.into(),
                allow_external_principals: false,
                tags: vec![],
                created: now,
                updated: now,
                deleted: None,
                associations: vec![
                    association(
                        AssociationType::Resource,
                        &format!("arn:aws:ec2:us-east-1:{SIM}:capacity-reservation/{id}"),
                        Some(id.clone()),
                    ),
                    association(AssociationType::Principal, "111111111111", None),
                ],
            });
        }
        id
    }

    /// GetCapacityReservationUsage's (available, [(account, used)]) of `id`, and the status's
    /// unavailable count, and the instances DescribeInstances lists.
    fn seen(w: &mut World, id: &str) -> (u32, Vec<(String, u32)>, u32, usize) {
        use crate::actions::dispatch;
        use crate::wire::query::Params;
        let tags = |body: &str, tag: &str| -> Vec<String> {
            let open = format!("<{tag}>");
            body.split(&open).skip(1).filter_map(|r| r.split_once("</").map(|(v, _)| v.to_string())).collect()
        };
        let body = dispatch(
            w,
            "us-east-1",
            "GetCapacityReservationUsage",
            &Params::from_pairs(&[("CapacityReservationId", id)]),
        )
        .unwrap()
        .body;
        let available = tags(&body, "availableInstanceCount")[0].parse().unwrap();
        let used = tags(&body, "accountId")
            .into_iter()
            .zip(tags(&body, "usedInstanceCount").iter().map(|n| n.parse().unwrap()))
            .collect();
        let block = w.reservations[0].capacity_block_id.clone();
        let status = dispatch(
            w,
            "us-east-1",
            "DescribeCapacityBlockStatus",
            &Params::from_pairs(&[("CapacityBlockId.1", &block)]),
        )
        .unwrap()
        .body;
        let unavailable = tags(&status, "totalUnavailableCapacity")[0].parse().unwrap();
        let instances = dispatch(w, "us-east-1", "DescribeInstances", &Params::from_pairs(&[])).unwrap().body;
        (available, used, unavailable, tags(&instances, "instanceId").len())
    }

    #[test]
    fn another_account_s_instances_take_places_the_owner_does_not_see() {
        let mut w = world();
        let unshared = active_block(&mut w, false);
        let body =
            |id: &str, a: &str, n: u32| format!(r#"{{"reservation_id":"{id}","account_id":"{a}","running":{n}}}"#);
        let (s, v) = call(&mut w, "POST", "/_sim/blocks/usage", &body(&unshared, "111111111111", 3));
        assert_eq!(s, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains("not shared through RAM"), "{v}");
        assert!(w.reservations[0].consumers.is_empty(), "refused: nothing changed");
        w.reservations.clear();
        let id = active_block(&mut w, true);
        let (s, v) = call(&mut w, "POST", "/_sim/blocks/usage", &body(&id, "1111", 3));
        assert_eq!(s, 400, "{v}");
        // The owner runs 2 (before the other account came, every instance ran: stopped at once
        // here), the member 3 through the share: 3 places left.
        w.behaviour.stopping_minutes = 0;
        call(&mut w, "POST", "/_sim/blocks/usage", &format!(r#"{{"reservation_id":"{id}","running":2}}"#));
        let (s, v) = call(&mut w, "POST", "/_sim/blocks/usage", &body(&id, "111111111111", 3));
        assert_eq!((s, &v["running"], &v["available"]), (200, &json!(2), &json!(3)), "{v}");
        assert_eq!(v["accounts"], json!({SIM: 2, "111111111111": 3}));
        let owner_and_member = vec![(SIM.to_string(), 2), ("111111111111".to_string(), 3)];
        // Under in_use (the default) the status counts all 5 unavailable; the owner lists 2.
        assert_eq!(seen(&mut w, &id), (3, owner_and_member.clone(), 5, 2));
        w.behaviour.unavailable_means = crate::scenario::UnavailableMeans::Failed;
        assert_eq!(seen(&mut w, &id), (3, owner_and_member, 0, 2));
        w.behaviour.unavailable_means = crate::scenario::UnavailableMeans::InUse;
        // The member stops 2 of its 3: their places stay taken for stopping_minutes, then free.
        w.behaviour.stopping_minutes = 5;
        let (_, v) = call(&mut w, "POST", "/_sim/blocks/usage", &body(&id, "111111111111", 1));
        assert_eq!((&v["available"], &v["stopping"]), (&json!(3), &json!(2)), "{v}");
        let stopping = vec![(SIM.to_string(), 2), ("111111111111".to_string(), 3)];
        assert_eq!(seen(&mut w, &id), (3, stopping, 5, 2), "1 running and 2 stopping");
        // The other reading: the 2 stopping still hold their places, but no account counts them.
        w.behaviour.stopping_in_usage = StoppingInUsage::NotCounted;
        let running_only = vec![(SIM.to_string(), 2), ("111111111111".to_string(), 1)];
        assert_eq!(seen(&mut w, &id), (3, running_only, 5, 2), "not_counted: 2 places in no account's use");
        w.behaviour.stopping_in_usage = StoppingInUsage::Counted;
        call(&mut w, "POST", "/_sim/clock", r#"{"advance_secs": 299}"#);
        assert_eq!(seen(&mut w, &id).0, 3, "still stopping a second before");
        call(&mut w, "POST", "/_sim/clock", r#"{"advance_secs": 1}"#);
        let stopped = vec![(SIM.to_string(), 2), ("111111111111".to_string(), 1)];
        assert_eq!(seen(&mut w, &id), (5, stopped, 3, 2));
        // Cleared: the member uses nothing (listed no more once its stopping ones are gone).
        let (s, v) = call(
            &mut w,
            "POST",
            "/_sim/blocks/usage",
            &format!(r#"{{"reservation_id":"{id}","account_id":"111111111111","clear":true}}"#),
        );
        assert_eq!((s, &v["stopping"]), (200, &json!(1)), "{v}");
        call(&mut w, "POST", "/_sim/clock", r#"{"advance_secs": 300}"#);
        assert_eq!(seen(&mut w, &id), (6, vec![(SIM.to_string(), 2)], 2, 2));
    }

    #[test]
    fn inject_and_state() {
        let mut w = world();
        let (s, v) = call(
            &mut w,
            "POST",
            "/_sim/reservations",
            r#"{"instance_type":"p5.48xlarge","instance_count":2,"start":"2026-11-30T11:30:00Z","end":"2026-12-02T11:30:00Z","tags":{"a":"b"},"upfront_fee":"10"}"#,
        );
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["state"], "active");
        let (_, st) = call(&mut w, "GET", "/_sim/state", "");
        assert_eq!(st["purchases"].as_array().unwrap().len(), 0);
        let r = &st["reservations"][0];
        assert_eq!(r["tags"]["a"], "b");
        assert_eq!(r["upfront_fee"], "10.00");
        assert_eq!(st["faults_injected"]["throttled"], 0);
        let id = v["reservation_id"].as_str().unwrap();
        let (s, v) = call(
            &mut w,
            "POST",
            "/_sim/payment",
            &format!(r#"{{"reservation_id":"{id}","outcome":"fail","after_hours":0}}"#),
        );
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["state"], "payment-failed");
        // EC2's own tags cannot be injected.
        let (s, v) = call(
            &mut w,
            "POST",
            "/_sim/reservations",
            r#"{"instance_type":"p5.48xlarge","instance_count":1,"start":"2026-12-02T11:30:00Z","end":"2026-12-03T11:30:00Z","tags":{"AWS:x":"1"}}"#,
        );
        assert_eq!(s, 400, "{v}");
        assert_eq!(call(&mut w, "POST", "/_sim/scenario", "bogus = ").0, 400);
        assert_eq!(call(&mut w, "POST", "/_sim/scenario", "").0, 200);
        assert!(w.reservations.is_empty());
    }
}
