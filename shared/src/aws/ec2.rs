//! The EC2 market adapter: Capacity Block offerings, purchases, reservations and instance
//! types, one SDK client per region (built lazily from the same shared configuration).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_config::retry::RetryConfig;
use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationInstancePlatform, Filter, ResourceType, Tag, TagSpecification,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use chrono::{DateTime, TimeZone, Utc};

use crate::domain::block::Reservation;
use crate::domain::extension::{ExtensionOffer, ExtensionReceipt};
use crate::domain::health::{BlockHealth, Interconnect};
use crate::domain::lifecycle::Observed;
use crate::domain::money::Money;
use crate::domain::names::{InstanceType, Region};
use crate::domain::offering::{Offering, RawOffering};
use crate::ports::{
    BlockKinds, BlockStatusSource, CapacityBlockFacts, DESCRIBE_LIMIT, ExtensionHistory, ExtensionMarket,
    ExtensionRecord, InstanceTypeSource, MarketError, OfferingQuery, OfferingSource, Purchase, PurchaseOutcome,
    PurchaseRequest, Purchaser, REQUEST_LIMIT, ReservationSource, Tagged, Unreadable,
};

/// The IAM actions each port of this adapter needs: a function's role allows exactly those of
/// the ports it declares in `AWS_PORTS`. infra/deploy/crosscheck checks that every SDK call here
/// has its action in this table and that nothing in it is uncalled (ARCHITECTURE.md, "Where a
/// change goes": a new AWS call).
pub const ACTIONS: &[(&str, &[&str])] = &[
    ("OfferingSource", &["ec2:DescribeCapacityBlockOfferings"]),
    ("InstanceTypeSource", &["ec2:DescribeInstanceTypes"]),
    // The purchase carries tags (TagSpecification): EC2 applies them with CreateTags.
    ("Purchaser", &["ec2:PurchaseCapacityBlock", "ec2:CreateTags"]),
    ("ReservationSource", &["ec2:DescribeCapacityReservations"]),
    ("ReservationLookup", &["ec2:DescribeCapacityReservations"]),
    ("ExtensionMarket", &["ec2:DescribeCapacityBlockExtensionOfferings", "ec2:PurchaseCapacityBlockExtension"]),
    ("InstanceSource", &["ec2:DescribeInstances"]),
    ("BlockKinds", &["ec2:DescribeCapacityBlocks"]),
    ("BlockStatusSource", &["ec2:DescribeCapacityBlockStatus"]),
    ("ExtensionHistory", &["ec2:DescribeCapacityBlockExtensionHistory"]),
];

/// Describe calls other than the offerings fan-out (which makes one attempt per call and paces
/// itself): the SDK's adaptive retry, so the tracker slows to what EC2 allows instead of failing.
const DESCRIBE_MAX_ATTEMPTS: u32 = 8;

pub struct Ec2Market {
    base: SdkConfig,
    clients: Mutex<HashMap<Region, RegionClients>>,
}

/// One region's clients, built once and shared by every call.
#[derive(Clone)]
struct RegionClients {
    /// Describe calls the SDK may retry (adaptive mode).
    retrying: Client,
    /// One attempt per call, never retried by the SDK: the purchases (no idempotency token) and
    /// the offerings fan-out (paced and retried by `app::fan_out`). A client of its own rather
    /// than a per-call override, which rebuilds the call's configuration every time.
    once: Client,
}

pub(crate) fn to_chrono(t: &aws_smithy_types::DateTime) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(t.secs(), t.subsec_nanos()).single()
}

pub(crate) fn to_smithy(t: DateTime<Utc>) -> aws_smithy_types::DateTime {
    aws_smithy_types::DateTime::from_secs(t.timestamp())
}

fn classify<E>(operation: &'static str, region: &Region, e: SdkError<E, HttpResponse>) -> MarketError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let region = region.to_string();
    let code = e.code().unwrap_or_default().to_string();
    let message = e.message().unwrap_or_default().to_string();
    match &e {
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            match code.as_str() {
                "RequestLimitExceeded" | "Throttling" | "ThrottlingException" => {
                    MarketError::Throttled { operation, region, code: REQUEST_LIMIT }
                }
                // The describe limit of DescribeCapacityBlockOfferings (and a Capacity Block
                // quota of 0, which answers the same code on every call). Neither botocore nor
                // the Rust SDK class it as throttling, but nothing was done: it is one.
                DESCRIBE_LIMIT => MarketError::Throttled { operation, region, code: DESCRIBE_LIMIT },
                "InvalidParameterValue"
                    if message.to_ascii_lowercase().contains("not supported for capacity block") =>
                {
                    MarketError::NotSold { operation, region, message }
                }
                "InvalidAction" | "UnsupportedOperation" => MarketError::Unsupported { operation, region },
                _ if status >= 500 => {
                    MarketError::Unknown { operation, region, message: format!("HTTP {status} {code}: {message}") }
                }
                _ => MarketError::Rejected { operation, region, code, message },
            }
        }
        // Nothing left the process.
        SdkError::ConstructionFailure(_) => MarketError::Rejected {
            operation,
            region,
            code: "ConstructionFailure".into(),
            message: DisplayErrorContext(&e).to_string(),
        },
        // Timeouts, connection failures and unreadable answers: the request may have arrived.
        _ => MarketError::Unknown { operation, region, message: DisplayErrorContext(&e).to_string() },
    }
}

impl Ec2Market {
    /// `base` is the shared SDK configuration (credentials, endpoint overrides, timeouts).
    pub fn new(base: SdkConfig) -> Self {
        Ec2Market { base, clients: Mutex::new(HashMap::new()) }
    }

    fn clients(&self, region: &Region) -> RegionClients {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients
            .entry(region.clone())
            .or_insert_with(|| {
                let conf = aws_sdk_ec2::config::Builder::from(&self.base)
                    .region(aws_sdk_ec2::config::Region::new(region.to_string()));
                RegionClients {
                    retrying: Client::from_conf(
                        conf.clone()
                            .retry_config(RetryConfig::adaptive().with_max_attempts(DESCRIBE_MAX_ATTEMPTS))
                            .build(),
                    ),
                    once: Client::from_conf(conf.retry_config(RetryConfig::disabled()).build()),
                }
            })
            .clone()
    }

    fn client(&self, region: &Region) -> Client {
        self.clients(region).retrying
    }

    fn once(&self, region: &Region) -> Client {
        self.clients(region).once
    }
}

impl Ec2Market {
    /// Every page of DescribeCapacityReservations (optionally filtered), capacity blocks only:
    /// the API has no reservation-type filter, so the type is checked here. A reservation of
    /// another type is left out (PurchaseCapacityBlock makes none); one that cannot be read
    /// (its type missing included) is returned as unreadable, never dropped.
    async fn capacity_block_pages(&self, region: &Region, filter: Option<Filter>) -> Result<Tagged, MarketError> {
        const OP: &str = "DescribeCapacityReservations";
        let mut pages = self
            .client(region)
            .describe_capacity_reservations()
            .set_filters(filter.map(|f| vec![f]))
            .into_paginator()
            .send();
        let mut out = Tagged::default();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(OP, region, e))?;
            for raw in page.capacity_reservations() {
                let read = reservation(region, raw).and_then(|r| match r.reservation_type {
                    None => Err(format!("reservation {} has no ReservationType", r.id)),
                    Some(_) => Ok(r),
                });
                match read {
                    Ok(r) if r.is_capacity_block() => out.reservations.push(r),
                    Ok(_) => {}
                    Err(reason) => out
                        .unreadable
                        .push(Unreadable { id: raw.capacity_reservation_id().map(str::to_string), reason }),
                }
            }
        }
        Ok(out)
    }
}

/// Converts a reservation from the SDK shape; `None` when a field we rely on is missing.
fn reservation(region: &Region, r: &CapacityReservation) -> Result<Reservation, String> {
    let id = r.capacity_reservation_id().ok_or("reservation without an id")?.to_string();
    let missing = |f: &str| format!("reservation {id} has no {f}");
    Ok(Reservation {
        arn: r.capacity_reservation_arn().map(str::to_string),
        region: region.clone(),
        availability_zone: r.availability_zone().unwrap_or_default().to_string(),
        instance_type: r
            .instance_type()
            .ok_or_else(|| missing("InstanceType"))?
            .parse()
            .map_err(|e: crate::domain::names::NameError| e.to_string())?,
        instance_count: r
            .total_instance_count()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| missing("TotalInstanceCount"))?,
        start: r.start_date().and_then(to_chrono).ok_or_else(|| missing("StartDate"))?,
        end: r.end_date().and_then(to_chrono).ok_or_else(|| missing("EndDate"))?,
        state: r.state().map(|s| s.as_str().to_string()).ok_or_else(|| missing("State"))?,
        reservation_type: r.reservation_type().map(|t| t.as_str().to_string()),
        tags: tag_map(r.tags()),
        capacity_block_id: r.capacity_block_id().map(str::to_string),
        id,
    })
}

/// An integer parameter as EC2 takes it (a 32-bit int). A value past it is refused here and
/// never sent: `as i32` would wrap 4294967295 into -1.
fn int_param(operation: &'static str, region: &Region, name: &str, value: u32) -> Result<i32, MarketError> {
    i32::try_from(value).map_err(|_| MarketError::Rejected {
        operation,
        region: region.to_string(),
        code: "InvalidParameterValue".into(),
        message: format!("{name} {value} is out of range (not sent)"),
    })
}

#[async_trait]
impl OfferingSource for Ec2Market {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        const OP: &str = "DescribeCapacityBlockOfferings";
        let hours = int_param(OP, &q.region, "CapacityDurationHours", q.duration_hours)?;
        // An UltraServer search names the UltraServers only: EC2 refuses UltraserverType with
        // InstanceType or InstanceCount.
        let (instance_type, count, ultraserver_type, ultraserver_count) = match &q.ultraservers {
            Some(u) => {
                (None, None, Some(u.kind.as_str()), Some(int_param(OP, &q.region, "UltraserverCount", u.count)?))
            }
            None => (
                Some(q.instance_type.as_str()),
                Some(int_param(OP, &q.region, "InstanceCount", q.instance_count)?),
                None,
                None,
            ),
        };
        let mut out = Vec::new();
        let mut next_token: Option<String> = None;
        loop {
            // One attempt: the scan's fan-out paces and retries this read per region
            // (app::fan_out), which the SDK's per-call backoff cannot do.
            let page = self
                .once(&q.region)
                .describe_capacity_block_offerings()
                .capacity_duration_hours(hours)
                .set_instance_type(instance_type.map(str::to_string))
                .set_instance_count(count)
                .set_ultraserver_type(ultraserver_type.map(str::to_string))
                .set_ultraserver_count(ultraserver_count)
                .start_date_range(to_smithy(q.start_from))
                // EndDateRange bounds the end of the block: the latest start plus its duration,
                // plus the day a same-day closest match may run longer than asked.
                .end_date_range(to_smithy(
                    q.start_to
                        .checked_add_signed(
                            chrono::Duration::hours(i64::from(q.duration_hours)) + chrono::Duration::days(1),
                        )
                        .unwrap_or(DateTime::<Utc>::MAX_UTC),
                ))
                // Offerings in Local Zones (P6e-GB200 in Dallas) come back only when asked for;
                // the decision then takes them only for rules that allow them.
                .all_availability_zones(true)
                .max_results(100)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|e| classify(OP, &q.region, e))?;
            for o in page.capacity_block_offerings() {
                let raw = RawOffering {
                    offering_id: o.capacity_block_offering_id().map(str::to_string),
                    instance_type: o.instance_type().map(str::to_string),
                    availability_zone: o.availability_zone().map(str::to_string),
                    instance_count: o.instance_count(),
                    start_date: o.start_date().and_then(to_chrono),
                    end_date: o.end_date().and_then(to_chrono),
                    duration_hours: o.capacity_block_duration_hours(),
                    duration_minutes: o.capacity_block_duration_minutes(),
                    zone_type: o.zone_type().map(str::to_string),
                    upfront_fee: o.upfront_fee().map(str::to_string),
                    currency_code: o.currency_code().map(str::to_string),
                    ultraserver_type: o.ultraserver_type().map(str::to_string),
                    ultraserver_count: o.ultraserver_count(),
                };
                match Offering::parse(&q.region, raw) {
                    Ok(offering) => out.push(offering),
                    Err(e) => {
                        tracing::warn!(region = %q.region, error = %e, "skipping an offering EC2 described badly")
                    }
                }
            }
            match page.next_token() {
                Some(token) if !token.is_empty() => next_token = Some(token.to_string()),
                _ => return Ok(out),
            }
        }
    }
}

#[async_trait]
impl InstanceTypeSource for Ec2Market {
    async fn accelerators(
        &self,
        region: &Region,
        types: &[InstanceType],
    ) -> Result<Vec<(InstanceType, u32)>, MarketError> {
        const OP: &str = "DescribeInstanceTypes";
        let mut req = self.client(region).describe_instance_types();
        for t in types {
            req = req.instance_types(aws_sdk_ec2::types::InstanceType::from(t.as_str()));
        }
        let out = req.send().await.map_err(|e| classify(OP, region, e))?;
        Ok(out
            .instance_types()
            .iter()
            .filter_map(|info| {
                let name: InstanceType = info.instance_type()?.as_str().parse().ok()?;
                let gpus: i32 = info.gpu_info().map(|g| g.gpus().iter().filter_map(|d| d.count()).sum()).unwrap_or(0);
                let neuron: i32 =
                    info.neuron_info().map(|n| n.neuron_devices().iter().filter_map(|d| d.count()).sum()).unwrap_or(0);
                Some((name, u32::try_from(gpus.max(neuron)).unwrap_or(0)))
            })
            .collect())
    }
}

#[async_trait]
impl Purchaser for Ec2Market {
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError> {
        const OP: &str = "PurchaseCapacityBlock";
        let region = &req.offering.region;
        let tags = TagSpecification::builder()
            .resource_type(ResourceType::CapacityReservation)
            .set_tags(Some(req.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()))
            .build();
        // No ClientToken exists for this call: a retry could buy a second block. One attempt;
        // an unknown outcome is settled by reconciliation (tag lookup), never by resending.
        let result = self
            .once(region)
            .purchase_capacity_block()
            .capacity_block_offering_id(&req.offering.id)
            .instance_platform(CapacityReservationInstancePlatform::from(req.instance_platform.as_str()))
            .tag_specifications(tags)
            .dry_run(req.dry_run)
            .send()
            .await;
        match result {
            Ok(out) => {
                let r = out.capacity_reservation().ok_or_else(|| MarketError::Unknown {
                    operation: OP,
                    region: region.to_string(),
                    message: "EC2 answered without a CapacityReservation".into(),
                })?;
                // Every reservation the answer names: the first in full, the others (one per
                // UltraServer) by id in its CapacityBlocks.
                let more: Vec<String> = out
                    .capacity_blocks()
                    .iter()
                    .flat_map(|b| b.capacity_reservation_ids())
                    .filter(|id| Some(id.as_str()) != r.capacity_reservation_id())
                    .cloned()
                    .collect();
                reservation(region, r)
                    .map(|reservation| PurchaseOutcome::Bought(Box::new(Purchase { reservation, more })))
                    // It was bought; we just cannot read it: reconciliation will find it by tag.
                    .map_err(|message| MarketError::Unknown { operation: OP, region: region.to_string(), message })
            }
            Err(e) if req.dry_run && e.code() == Some("DryRunOperation") => Ok(PurchaseOutcome::WouldSucceed),
            Err(e) => Err(classify(OP, region, e)),
        }
    }
}

#[async_trait]
impl ReservationSource for Ec2Market {
    async fn reservations_tagged(&self, region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> {
        self.capacity_block_pages(region, Some(Filter::builder().name(format!("tag:{key}")).values(value).build()))
            .await
    }

    async fn observe(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError> {
        const OP: &str = "DescribeCapacityReservations";
        let mut out = Vec::new();
        for batch in ids.chunks(100) {
            let result = self
                .client(region)
                .describe_capacity_reservations()
                .set_capacity_reservation_ids(Some(batch.to_vec()))
                .send()
                .await;
            match result {
                Ok(page) => {
                    let found: HashMap<String, Observed> = page
                        .capacity_reservations()
                        .iter()
                        .filter_map(|r| {
                            let r = reservation(region, r).ok()?;
                            Some((
                                r.id.clone(),
                                Observed::Found { state: r.state, end: r.end, capacity_block_id: r.capacity_block_id },
                            ))
                        })
                        .collect();
                    out.extend(
                        batch.iter().map(|id| (id.clone(), found.get(id).cloned().unwrap_or(Observed::NotFound))),
                    );
                }
                // One unknown id fails the whole call: ask one by one to find which.
                Err(e) if e.code() == Some("InvalidCapacityReservationId.NotFound") && batch.len() > 1 => {
                    for id in batch {
                        out.extend(self.observe(region, std::slice::from_ref(id)).await?);
                    }
                }
                Err(e) if e.code() == Some("InvalidCapacityReservationId.NotFound") => {
                    out.push((batch[0].clone(), Observed::NotFound));
                }
                Err(e) => return Err(classify(OP, region, e)),
            }
        }
        Ok(out)
    }

    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError> {
        let all = self.capacity_block_pages(region, None).await?;
        for u in &all.unreadable {
            tracing::warn!(%region, reservation = ?u.id, error = %u.reason, "skipping a reservation EC2 described badly");
        }
        Ok(all.reservations)
    }
}

#[async_trait]
impl ExtensionMarket for Ec2Market {
    async fn extension_offerings(
        &self,
        region: &Region,
        reservation_id: &str,
        duration_hours: u32,
    ) -> Result<Vec<ExtensionOffer>, MarketError> {
        const OP: &str = "DescribeCapacityBlockExtensionOfferings";
        let hours = int_param(OP, region, "CapacityBlockExtensionDurationHours", duration_hours)?;
        let mut pages = self
            .client(region)
            .describe_capacity_block_extension_offerings()
            .capacity_reservation_id(reservation_id)
            .capacity_block_extension_duration_hours(hours)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(OP, region, e))?;
            for o in page.capacity_block_extension_offerings() {
                let parsed = (|| {
                    let id = o.capacity_block_extension_offering_id().ok_or("no offering id")?;
                    let fee = o.upfront_fee().ok_or("no UpfrontFee")?;
                    let fee = Money::parse(fee, o.currency_code().unwrap_or("USD")).map_err(|_| "a bad UpfrontFee")?;
                    Ok::<_, &str>(ExtensionOffer {
                        id: id.to_string(),
                        reservation_id: reservation_id.to_string(),
                        duration_hours: o
                            .capacity_block_extension_duration_hours()
                            .and_then(|h| u32::try_from(h).ok())
                            .unwrap_or(duration_hours),
                        start: o.capacity_block_extension_start_date().and_then(to_chrono).ok_or("no start date")?,
                        end: o.capacity_block_extension_end_date().and_then(to_chrono).ok_or("no end date")?,
                        fee,
                    })
                })();
                match parsed {
                    Ok(x) => out.push(x),
                    Err(e) => {
                        tracing::warn!(%region, reservation = reservation_id, error = e, "skipping an extension offering EC2 described badly")
                    }
                }
            }
        }
        Ok(out)
    }

    async fn check_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<(), MarketError> {
        // DryRun buys nothing; still one attempt, like the real call.
        match self.extension_purchase(region, offering_id, reservation_id, true).await {
            Err(e) if e.code() == Some("DryRunOperation") => Ok(()),
            Err(e) => Err(classify(EXTENSION_OP, region, e)),
            // EC2 never answers a dry run with success; if it did, something was bought.
            Ok(_) => Err(MarketError::Unknown {
                operation: EXTENSION_OP,
                region: region.to_string(),
                message: "EC2 answered a DryRun extension purchase with success".into(),
            }),
        }
    }

    async fn purchase_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<ExtensionReceipt, MarketError> {
        // No ClientToken here either: one attempt; an unknown outcome is settled by watching
        // the block's end date, never by resending.
        match self.extension_purchase(region, offering_id, reservation_id, false).await {
            Ok(out) => {
                let x = out.capacity_block_extensions().first();
                Ok(ExtensionReceipt {
                    offering_id: offering_id.to_string(),
                    reservation_id: reservation_id.to_string(),
                    status: x
                        .and_then(|x| x.capacity_block_extension_status())
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|| "payment-pending".into()),
                    end: x.and_then(|x| x.capacity_block_extension_end_date()).and_then(to_chrono),
                })
            }
            Err(e) => Err(classify(EXTENSION_OP, region, e)),
        }
    }
}

const EXTENSION_OP: &str = "PurchaseCapacityBlockExtension";

impl Ec2Market {
    /// PurchaseCapacityBlockExtension, sent once (no retry: it has no idempotency token).
    async fn extension_purchase(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
        dry_run: bool,
    ) -> Result<
        aws_sdk_ec2::operation::purchase_capacity_block_extension::PurchaseCapacityBlockExtensionOutput,
        SdkError<aws_sdk_ec2::operation::purchase_capacity_block_extension::PurchaseCapacityBlockExtensionError>,
    > {
        self.once(region)
            .purchase_capacity_block_extension()
            .capacity_block_extension_offering_id(offering_id)
            .capacity_reservation_id(reservation_id)
            .dry_run(dry_run)
            .send()
            .await
    }
}

/// Operation timeouts for every client: a call that hangs must fail in time for the Lambda to
/// record what it knows.
pub fn timeouts() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(40))
        .build()
}

// ---------------------------------------------------------------------------------------------
// Instances in a reservation, and single reservations by id (checkpoint notices)
// ---------------------------------------------------------------------------------------------

#[async_trait]
impl crate::ports::InstanceSource for Ec2Market {
    async fn instances_in(&self, region: &Region, reservation_id: &str) -> Result<Vec<String>, MarketError> {
        const OP: &str = "DescribeInstances";
        let mut pages = self
            .client(region)
            .describe_instances()
            .filters(Filter::builder().name("capacity-reservation-id").values(reservation_id).build())
            // Stopping or terminated instances hold no work to checkpoint.
            .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(OP, region, e))?;
            for r in page.reservations() {
                out.extend(r.instances().iter().filter_map(|i| i.instance_id().map(str::to_string)));
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn reservation_of(&self, region: &Region, instance_id: &str) -> Result<Option<String>, MarketError> {
        const OP: &str = "DescribeInstances";
        match self.client(region).describe_instances().instance_ids(instance_id).send().await {
            Ok(out) => Ok(out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter(|i| i.instance_id() == Some(instance_id))
                .find_map(|i| i.capacity_reservation_id().map(str::to_string))),
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Ok(None),
            Err(e) => Err(classify(OP, region, e)),
        }
    }
}

#[async_trait]
impl crate::ports::ReservationLookup for Ec2Market {
    async fn reservation(&self, region: &Region, id: &str) -> Result<Option<Reservation>, MarketError> {
        const OP: &str = "DescribeCapacityReservations";
        match self.client(region).describe_capacity_reservations().capacity_reservation_ids(id).send().await {
            Ok(out) => match out.capacity_reservations().iter().find(|r| r.capacity_reservation_id() == Some(id)) {
                None => Ok(None),
                Some(r) => reservation(region, r).map(Some).map_err(|message| MarketError::BadResponse {
                    operation: OP,
                    region: region.to_string(),
                    message,
                }),
            },
            // Expired long ago, or never in this region.
            Err(e) if e.code() == Some("InvalidCapacityReservationId.NotFound") => Ok(None),
            Err(e) => Err(classify(OP, region, e)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The block view: kinds, health, extension history
// ---------------------------------------------------------------------------------------------

/// Ids per describe call: well inside EC2's MaxResults (1000) and a short query string.
const IDS_PER_CALL: usize = 100;
/// EC2's answer when a block id it does not know is asked for (the simulator's code, too).
const BLOCK_NOT_FOUND: &str = "InvalidCapacityBlockId.NotFound";
/// DescribeCapacityBlockStatus by id for a block that has no status (scheduled or over).
const NO_STATUS: &str = "IncorrectState";

/// Asks `ask` about `ids` in batches. A batch EC2 refuses because of one id (a code in
/// `per_id`: unknown, or without a status) is asked again one id at a time, and an id refused
/// alone is left out, so one odd block never hides the others.
async fn in_batches<T, F, Fut>(ids: &[String], per_id: &[&str], ask: F) -> Result<Vec<T>, MarketError>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, (Option<String>, MarketError)>>,
{
    let refused_for_one = |code: &Option<String>| code.as_deref().is_some_and(|c| per_id.contains(&c));
    let mut out = Vec::new();
    for batch in ids.chunks(IDS_PER_CALL) {
        match ask(batch.to_vec()).await {
            Ok(v) => out.extend(v),
            Err((code, _)) if refused_for_one(&code) && batch.len() > 1 => {
                for id in batch {
                    match ask(vec![id.clone()]).await {
                        Ok(v) => out.extend(v),
                        Err((code, _)) if refused_for_one(&code) => {}
                        Err((_, e)) => return Err(e),
                    }
                }
            }
            Err((code, _)) if refused_for_one(&code) => {}
            Err((_, e)) => return Err(e),
        }
    }
    Ok(out)
}

/// An SDK error with its code kept, for `in_batches`.
fn coded<E>(operation: &'static str, region: &Region, e: SdkError<E, HttpResponse>) -> (Option<String>, MarketError)
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    (e.code().map(str::to_string), classify(operation, region, e))
}

fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

/// Every item of every page of a paginated describe call, its error kept with its code.
macro_rules! all_items {
    ($op:expr, $region:expr, $request:expr) => {
        $request
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| coded($op, $region, e))
    };
}

/// The block view of one region, read in three calls that answer lists of items.
#[async_trait]
impl BlockKinds for Ec2Market {
    async fn capacity_blocks_by_id(
        &self,
        region: &Region,
        ids: &[String],
    ) -> Result<Vec<CapacityBlockFacts>, MarketError> {
        const OP: &str = "DescribeCapacityBlocks";
        in_batches(ids, &[BLOCK_NOT_FOUND], |batch| async move {
            let blocks = all_items!(
                OP,
                region,
                self.client(region).describe_capacity_blocks().set_capacity_block_ids(Some(batch))
            )?;
            Ok(blocks
                .iter()
                .filter_map(|b| {
                    Some(CapacityBlockFacts {
                        capacity_block_id: b.capacity_block_id()?.to_string(),
                        ultraserver_type: b.ultraserver_type().filter(|t| !t.is_empty()).map(str::to_string),
                        state: b.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                        reservation_ids: b.capacity_reservation_ids().to_vec(),
                        tags: tag_map(b.tags()),
                    })
                })
                .collect())
        })
        .await
    }
}

#[async_trait]
impl BlockStatusSource for Ec2Market {
    async fn block_status(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, BlockHealth)>, MarketError> {
        const OP: &str = "DescribeCapacityBlockStatus";
        // A block without a status (it moved since the store said active) fails the whole call.
        in_batches(ids, &[NO_STATUS, BLOCK_NOT_FOUND], |batch| async move {
            let statuses = all_items!(
                OP,
                region,
                self.client(region).describe_capacity_block_status().set_capacity_block_ids(Some(batch))
            )?;
            let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            Ok(statuses
                .iter()
                .filter_map(|s| {
                    let health = BlockHealth {
                        // No status at all is "nothing measured", not a problem.
                        interconnect: s
                            .interconnect_status()
                            .map_or(Interconnect::InsufficientData, |i| Interconnect::from_ec2(i.as_str())),
                        total: count(s.total_capacity()),
                        unavailable: count(s.total_unavailable_capacity()),
                    };
                    Some((s.capacity_block_id()?.to_string(), health))
                })
                .collect())
        })
        .await
    }
}

#[async_trait]
impl ExtensionHistory for Ec2Market {
    async fn extension_history(&self, region: &Region, ids: &[String]) -> Result<Vec<ExtensionRecord>, MarketError> {
        const OP: &str = "DescribeCapacityBlockExtensionHistory";
        in_batches(ids, &["InvalidCapacityReservationId.NotFound"], |batch| async move {
            let history = all_items!(
                OP,
                region,
                self.client(region)
                    .describe_capacity_block_extension_history()
                    .set_capacity_reservation_ids(Some(batch))
            )?;
            Ok(history
                .iter()
                .filter_map(|x| {
                    Some(ExtensionRecord {
                        reservation_id: x.capacity_reservation_id()?.to_string(),
                        offering_id: x.capacity_block_extension_offering_id()?.to_string(),
                        status: x.capacity_block_extension_status()?.as_str().to_string(),
                        end: x.capacity_block_extension_end_date().and_then(to_chrono),
                    })
                })
                .collect())
        })
        .await
    }
}
