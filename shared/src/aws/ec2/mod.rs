//! The EC2 market adapter: Capacity Block offerings, purchases, reservations and instance
//! types, one SDK client per region (built lazily from the same shared configuration).
//!
//! This file holds the client, the error classification and the `ACTIONS` table; each port's
//! calls are in a file of their own: `offerings`, `purchase`, `reservations`, `extensions`,
//! `blocks`; `ahead_of_sdk` the fields EC2 has and the SDK does not yet.

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
use crate::domain::health::{CapacityStatus, Interconnect, ReservationUsage, StatusCounts};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::lifecycle::Observed;
use crate::domain::money::Money;
use crate::domain::offering::{Offering, RawOffering};
use crate::domain::tags::REQUESTED_QUANTITY_TAG;
use crate::domain::ultraserver::SearchForm;
use crate::ports::{
    BlockKinds, BlockStatusSource, CapacityBlockFacts, DESCRIBE_LIMIT, ExtensionHistory, ExtensionMarket,
    ExtensionRecord, InstanceTypeSource, MarketError, OfferingQuery, OfferingSource, Purchase, PurchaseOutcome,
    PurchaseRequest, Purchaser, QuotaSource, REQUEST_LIMIT, ReservationSource, Tagged, Unreadable,
};

mod ahead_of_sdk;
pub mod aws_clock;
mod blocks;
mod extensions;
mod launch_templates;
mod offerings;
mod purchase;
mod quotas;
mod reservations;

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
    // The block's status, and the instances each account has in it (its health check).
    ("BlockStatusSource", &["ec2:DescribeCapacityBlockStatus", "ec2:GetCapacityReservationUsage"]),
    ("ExtensionHistory", &["ec2:DescribeCapacityBlockExtensionHistory"]),
    // `rules validate --check-aws` (the operator's credentials; no function has this port).
    ("LaunchTemplates", &["ec2:DescribeLaunchTemplateVersions"]),
    // A quota of 0 confirmed (or ruled out) by Service Quotas where the role may read it.
    ("QuotaSource", &["servicequotas:ListAWSDefaultServiceQuotas", "servicequotas:GetServiceQuota"]),
];

/// Describe calls other than the offering questions (the scan's paced asker and the tracker's
/// extension questions make one attempt per call and pace themselves): the SDK's adaptive
/// retry, so the tracker slows to what EC2 allows instead of failing.
const DESCRIBE_MAX_ATTEMPTS: u32 = 8;

pub struct Ec2Market {
    base: SdkConfig,
    clients: Mutex<HashMap<Region, RegionClients>>,
    /// The UltraServer search form each region's EC2 took last (`SearchForm`), started from
    /// the market memory by each scan.
    search_forms: Mutex<HashMap<Region, SearchForm>>,
    /// The regions whose EC2 refused `InstanceTypePreferences` (UnknownParameter): asked one
    /// type per call from then on, for this client's life.
    legacy_regions: Mutex<std::collections::HashSet<Region>>,
}

/// One region's clients, built once and shared by every call.
#[derive(Clone)]
struct RegionClients {
    /// Describe calls the SDK may retry (adaptive mode).
    retrying: Client,
    /// One attempt per call, never retried by the SDK: the purchases (no idempotency token) and
    /// the offering questions (paced and retried by `app::paced_asker`). A client of its own rather
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
                // "... is not supported for Capacity Blocks" in this region, however EC2 words the
                // rest: public clients match "not supported" alone.
                "InvalidParameterValue" if message.to_ascii_lowercase().contains("not supported") => {
                    MarketError::NotSold { operation, region, message }
                }
                "InvalidAction" | "UnsupportedOperation" => MarketError::Unsupported { operation, region },
                _ if status >= 500 => {
                    MarketError::Unknown { operation, region, message: format!("HTTP {status} {code}: {message}") }
                }
                // EC2 names every refusal with a code. An answer without one (a proxy's HTML
                // page, a truncated body) is not EC2's word that nothing was bought: a purchase
                // it answers stays unknown, so its fee is never freed on it.
                "" => MarketError::Unknown {
                    operation,
                    region,
                    message: format!("HTTP {status} with no EC2 error code: {message}"),
                },
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
        Ec2Market {
            base,
            clients: Mutex::new(HashMap::new()),
            search_forms: Mutex::new(HashMap::new()),
            legacy_regions: Mutex::default(),
        }
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

/// What a lookup makes of a readable reservation whose type is not `capacity-block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OtherTypes {
    /// Left out: the lookup asked for the region's blocks, and PurchaseCapacityBlock makes none
    /// of another type.
    Skip,
    /// Unreadable, with its type named: the lookup is by capblock's tag, and a reservation
    /// carrying it may be a purchase EC2 types oddly, which must never be invisible.
    Unreadable,
}

/// Every page of DescribeCapacityReservations under `filters`. The type is checked here too,
/// whatever the filters: one that cannot be read (its type missing included) is returned as
/// unreadable, never dropped; one of another type as `others` says.
async fn capacity_block_pages(
    client: &Client,
    region: &Region,
    filters: Vec<Filter>,
    others: OtherTypes,
) -> Result<Tagged, MarketError> {
    const OP: &str = "DescribeCapacityReservations";
    let mut pages = client
        .describe_capacity_reservations()
        .set_filters((!filters.is_empty()).then_some(filters))
        .into_paginator()
        .send();
    let mut out = Tagged::default();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(OP, region, e))?;
        for raw in page.capacity_reservations() {
            match typed_reservation(region, raw, others) {
                Ok(Some(r)) => out.reservations.push(r),
                Ok(None) => {}
                Err(reason) => {
                    out.unreadable.push(Unreadable { id: raw.capacity_reservation_id().map(str::to_string), reason })
                }
            }
        }
    }
    Ok(out)
}

/// One described reservation: a block, `None` for one of another type left out, or why it
/// cannot be taken as either.
fn typed_reservation(
    region: &Region,
    raw: &CapacityReservation,
    others: OtherTypes,
) -> Result<Option<Reservation>, String> {
    let r = reservation(region, raw)?;
    match r.reservation_type.as_deref() {
        None => Err(format!("reservation {} has no ReservationType", r.id)),
        Some(_) if r.is_capacity_block() => Ok(Some(r)),
        Some(_) if others == OtherTypes::Skip => Ok(None),
        Some(other) => {
            tracing::error!(event = "reservation_not_capacity_block", %region, reservation = %r.id, reservation_type = other,
                "a reservation carries capblock's tag but EC2 types it as no Capacity Block; held as unreadable");
            Err(format!(
                "reservation {} carries capblock's tag but its ReservationType is {other}, not capacity-block",
                r.id
            ))
        }
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
            .map_err(|e: crate::domain::ids::IdError| e.to_string())?,
        instance_count: instance_count(r).ok_or_else(|| missing("TotalInstanceCount"))?,
        start: r.start_date().and_then(to_chrono).ok_or_else(|| missing("StartDate"))?,
        end: r.end_date().and_then(to_chrono).ok_or_else(|| missing("EndDate"))?,
        state: r.state().map(|s| s.as_str().to_string()).ok_or_else(|| missing("State"))?,
        reservation_type: r.reservation_type().map(|t| t.as_str().to_string()),
        tags: tag_map(r.tags()),
        capacity_block_id: r.capacity_block_id().map(str::to_string),
        id,
    })
}

/// A reservation's instances. Before a Capacity Block starts EC2 shows its counts as 0 (the EC2
/// user guide, "View Capacity Blocks": "Before a Capacity Block reservation begins, the
/// available capacity appears as zero") and keeps the bought count in the
/// `incrementalRequestedQuantity` tag: that tag while the count is 0. `None`: no count at all.
fn instance_count(r: &CapacityReservation) -> Option<u32> {
    let total = r.total_instance_count().and_then(|n| u32::try_from(n).ok());
    let tagged = || {
        r.tags().iter().find(|t| t.key() == Some(REQUESTED_QUANTITY_TAG)).and_then(|t| t.value()?.trim().parse().ok())
    };
    match total {
        Some(0) | None => tagged().or(total),
        n => n,
    }
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

/// Operation timeouts for every client: a call that hangs must fail in time for the Lambda to
/// record what it knows.
pub fn timeouts() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(40))
        .build()
}

fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

/// `classify` over the answers the SDK gives: which mean "nothing bought" (a purchase's fee may
/// go back) and which leave it unknown. Each shape is built with `SdkError`'s constructors as
/// the SDK's orchestrator builds it: EC2 models no error of its own, so every service error is
/// the operation's generic one carrying the code and message parsed from EC2's XML body (none
/// when the body could not be parsed), beside the raw HTTP response.
#[cfg(test)]
mod tests {
    use aws_sdk_ec2::error::ErrorMetadata;
    use aws_sdk_ec2::operation::purchase_capacity_block::PurchaseCapacityBlockError;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;

    use super::*;
    use crate::app::purchase::{FailedPurchase, failed_purchase};
    use crate::ports::OFFERING_ID_EXPIRED;

    const OP: &str = "PurchaseCapacityBlock";

    fn east() -> Region {
        "us-east-1".parse().expect("a region")
    }

    fn raw(status: u16, body: &str) -> HttpResponse {
        Response::new(StatusCode::try_from(status).expect("a status"), SdkBody::from(body.to_string()))
    }

    /// EC2's error body (the Query protocol's XML), as EC2 sends it.
    fn ec2_error(code: &str, message: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
             <Message>{message}</Message></Error></Errors><RequestID>req-1</RequestID></Response>"
        )
    }

    /// What `classify` makes of a PurchaseCapacityBlock answered `status` with EC2's error
    /// `code` and `message` (`None`: a body the SDK could not parse, so no code).
    fn answered(status: u16, code: Option<&str>, message: &str) -> MarketError {
        let mut meta = ErrorMetadata::builder().message(message);
        if let Some(code) = code {
            meta = meta.code(code).custom("aws_request_id", "req-1");
        }
        let body = code.map_or_else(|| message.to_string(), |c| ec2_error(c, message));
        let e = SdkError::service_error(PurchaseCapacityBlockError::generic(meta.build()), raw(status, &body));
        classify(OP, &east(), e)
    }

    fn built(e: SdkError<PurchaseCapacityBlockError, HttpResponse>) -> MarketError {
        classify(OP, &east(), e)
    }

    #[test]
    fn throttling_codes_mean_nothing_was_bought_and_the_offering_may_be_tried_again() {
        for code in ["RequestLimitExceeded", "Throttling", "ThrottlingException"] {
            let e = answered(400, Some(code), "Request limit exceeded.");
            assert!(matches!(e, MarketError::Throttled { code: REQUEST_LIMIT, .. }), "{code}: {e:?}");
            assert_eq!(failed_purchase(&e), FailedPurchase::GiveBack, "{code}");
        }
        let e = answered(400, Some(DESCRIBE_LIMIT), "Too many offering questions.");
        assert!(matches!(e, MarketError::Throttled { code: DESCRIBE_LIMIT, .. }), "{e:?}");
    }

    #[test]
    fn a_refusal_by_code_means_nothing_was_bought() {
        let e = answered(400, Some("InsufficientInstanceCapacity"), "There is not enough capacity.");
        assert!(matches!(&e, MarketError::Rejected { code, .. } if code == "InsufficientInstanceCapacity"), "{e:?}");
        assert_eq!(failed_purchase(&e), FailedPurchase::Refused);
        let e = answered(400, Some(OFFERING_ID_EXPIRED), "The offering is no longer available.");
        assert_eq!(failed_purchase(&e), FailedPurchase::GiveBack, "{e:?}");
        let e = answered(400, Some("InvalidParameterValue"), "Capacity Blocks are not supported here.");
        assert!(matches!(e, MarketError::NotSold { .. }), "{e:?}");
    }

    /// A 5xx is EC2 failing while it may have acted: never "nothing bought", whatever its code,
    /// and whether or not its body could be parsed; nor is any answer that carries no EC2 code.
    #[test]
    fn server_errors_leave_the_purchase_unknown() {
        let cases = [
            (500, Some("InternalError"), "An internal error has occurred."),
            (503, Some("Unavailable"), "The service is unavailable."),
            (500, Some("Unknown"), ""),
            (500, None, ""),
            (503, None, "<html>Service Unavailable</html>"),
            // Not EC2's word at all: a 4xx with no code (a proxy's page, a truncated body).
            (400, None, "<html>Bad Request</html>"),
            (403, None, ""),
        ];
        for (status, code, message) in cases {
            let e = answered(status, code, message);
            assert!(matches!(e, MarketError::Unknown { .. }), "{status} {code:?}: {e:?}");
            assert!(!e.had_no_effect(), "{status} {code:?}");
            assert_eq!(failed_purchase(&e), FailedPurchase::Unknown, "{status} {code:?}");
        }
    }

    /// A request that was sent and whose answer was lost (a timeout, a broken connection, an
    /// answer that could not be read) may have bought: never "nothing bought".
    #[test]
    fn a_lost_or_unreadable_answer_leaves_the_purchase_unknown() {
        let lost = [
            SdkError::timeout_error("operation timed out after 40 s"),
            SdkError::dispatch_failure(ConnectorError::timeout("read timed out".into())),
            SdkError::dispatch_failure(ConnectorError::io("connection reset by peer".into())),
            SdkError::dispatch_failure(ConnectorError::other("the connector failed".into(), None)),
            SdkError::response_error("the body could not be read", raw(200, "")),
            SdkError::response_error("the body could not be read", raw(500, "")),
        ];
        for e in lost {
            let shown = format!("{e:?}");
            let e = built(e);
            assert!(matches!(e, MarketError::Unknown { .. }), "{shown}: {e:?}");
            assert_eq!(failed_purchase(&e), FailedPurchase::Unknown, "{shown}");
        }
    }

    /// A request the SDK could not build never left the process: nothing was bought.
    #[test]
    fn a_request_never_built_bought_nothing() {
        let e = built(SdkError::construction_failure("missing CapacityBlockOfferingId"));
        assert!(matches!(&e, MarketError::Rejected { code, .. } if code == "ConstructionFailure"), "{e:?}");
        assert_eq!(failed_purchase(&e), FailedPurchase::Refused);
    }
}
