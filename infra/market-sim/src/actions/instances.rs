//! DescribeInstanceTypes (built-in table) and DescribeInstances (the running instances of
//! active blocks).

use super::filters::{check_names, matches_all};
use super::{Ctx, authorize, dry_run};
use crate::instance_types::{self, Accelerator, InstanceTypeInfo};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::reservations::Reservation;
use crate::rng::stable_id;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

pub fn describe_instance_types(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
    let names = p.list("InstanceType");
    let size = page_size(p, 5, 100)?;
    dry_run(p)?;
    let unknown: Vec<&str> = names.iter().map(String::as_str).filter(|n| instance_types::lookup(n).is_none()).collect();
    if !unknown.is_empty() {
        return Err(ApiError::client(
            "InvalidInstanceType",
            format!("The following supplied instance types do not exist: [{}]", unknown.join(", ")),
        ));
    }
    let items: Vec<&InstanceTypeInfo> = if names.is_empty() {
        instance_types::TABLE.iter().collect()
    } else {
        instance_types::TABLE.iter().filter(|t| names.iter().any(|n| n == t.name)).collect()
    };
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    let mut x = Xml::new();
    x.set("instanceTypeSet", &page, |x, t| write_instance_type(x, t));
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

fn write_instance_type(x: &mut Xml, t: &InstanceTypeInfo) {
    x.leaf("instanceType", t.name)
        .leaf("currentGeneration", "true")
        .open("vCpuInfo")
        .num("defaultVCpus", t.vcpus)
        .close("vCpuInfo")
        .open("memoryInfo")
        .num("sizeInMiB", t.memory_mib)
        .close("memoryInfo");
    let n = t.accelerator_count;
    match t.accelerator {
        Accelerator::Gpu { name, manufacturer, memory_mib } => {
            x.open("gpuInfo").set("gpus", &[()], |x, _| {
                x.leaf("name", name)
                    .leaf("manufacturer", manufacturer)
                    .num("count", n)
                    .open("memoryInfo")
                    .num("sizeInMiB", memory_mib)
                    .close("memoryInfo");
            });
            x.num("totalGpuMemoryInMiB", memory_mib * u64::from(n)).close("gpuInfo");
        }
        Accelerator::Neuron { name, core_count, core_version, memory_mib } => {
            x.open("neuronInfo").set("neuronDevices", &[()], |x, _| {
                x.num("count", n)
                    .leaf("name", name)
                    .open("coreInfo")
                    .num("count", core_count)
                    .num("version", core_version)
                    .close("coreInfo")
                    .open("memoryInfo")
                    .num("sizeInMiB", memory_mib)
                    .close("memoryInfo");
            });
            x.num("totalNeuronDeviceMemoryInMiB", memory_mib * u64::from(n)).close("neuronInfo");
        }
    }
}

const INSTANCE_FILTERS: &[&str] = &[
    "capacity-reservation-id",
    "instance-id",
    "instance-type",
    "instance-state-name",
    "availability-zone",
    "tag:",
    "tag-key",
];

pub fn instance_id(reservation_id: &str, index: u32) -> String {
    stable_id("i-", &format!("{reservation_id}/{index}"))
}

pub fn describe_instances(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
    let w: &World = w;
    let ids = p.list("InstanceId");
    let filters = p.filters();
    check_names(&filters, INSTANCE_FILTERS)?;
    let size = page_size(p, 5, 1000)?;
    dry_run(p)?;

    // One EC2 "reservation" (launch) per active capacity block; instances carry no tags.
    let mut groups: Vec<(&Reservation, Vec<String>)> = Vec::new();
    for r in w.reservations.iter().filter(|r| r.region == ctx.region) {
        let state = r.state(ctx.now, &w.extensions);
        // Instances taken out of the block (unavailable capacity) are gone.
        let instances: Vec<String> = (0..r.running(&state, ctx.now))
            .map(|i| instance_id(&r.id, i))
            .filter(|iid| ids.is_empty() || ids.contains(iid))
            .filter(|iid| {
                matches_all(&filters, &[], |name| {
                    Some(match name {
                        "capacity-reservation-id" => r.id.clone(),
                        "instance-id" => iid.clone(),
                        "instance-type" => r.instance_type.clone(),
                        "instance-state-name" => "running".into(),
                        "availability-zone" => r.availability_zone.clone(),
                        _ => return None,
                    })
                })
            })
            .collect();
        if !instances.is_empty() {
            groups.push((r, instances));
        }
    }
    for id in &ids {
        if !groups.iter().any(|(_, v)| v.contains(id)) && filters.is_empty() {
            return Err(ApiError::client(
                "InvalidInstanceID.NotFound",
                format!("The instance ID '{id}' does not exist"),
            ));
        }
    }
    let (page, next) = paginate(&groups, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;

    let account = &w.scenario.account_id;
    let mut x = Xml::new();
    x.set("reservationSet", &page, |x, (r, instances)| {
        x.leaf("reservationId", stable_id("r-", &r.id)).leaf("ownerId", account).set(
            "instancesSet",
            instances,
            |x, iid| {
                x.leaf("instanceId", iid)
                    .open("instanceState")
                    .num("code", 16)
                    .leaf("name", "running")
                    .close("instanceState")
                    .leaf("instanceType", &r.instance_type)
                    .time("launchTime", r.start)
                    .open("placement")
                    .leaf("availabilityZone", &r.availability_zone)
                    .leaf("tenancy", "default")
                    .close("placement")
                    .leaf("instanceLifecycle", "capacity-block")
                    .leaf("capacityReservationId", &r.id);
            },
        );
    });
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}
