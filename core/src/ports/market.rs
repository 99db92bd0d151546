//! The market: EC2's Capacity Block calls (offerings, purchases, reservations, extensions,
//! block facts) and the single lookups checkpoint notices need.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::block::Reservation;
use crate::domain::extension::{ExtensionOffer, ExtensionReceipt};
use crate::domain::health::{CapacityStatus, ReservationUsage};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::lifecycle::Observed;
use crate::domain::offering::Offering;
use crate::domain::ultraserver::{SearchForm, UltraServers};

/// Errors from the market, sorted by what they mean for money.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarketError {
    /// EC2 said no and did nothing (4xx). For a purchase: definitely not bought.
    #[error("EC2 rejected {operation} in {region}: {code}: {message}")]
    Rejected { operation: &'static str, region: String, code: String, message: String },
    /// Throttled: RequestLimitExceeded (EC2's per-API token bucket), or
    /// CapacityBlockDescribeLimitExceeded (the low limit of DescribeCapacityBlockOfferings per
    /// account and region, which no SDK retry mode classes as throttling). Nothing was done.
    #[error("EC2 throttled {operation} in {region} ({code})")]
    Throttled { operation: &'static str, region: String, code: &'static str },
    /// The region does not sell this instance type as Capacity Blocks (InvalidParameterValue
    /// "... not supported for Capacity Blocks"). Nothing was done.
    #[error("{region} does not sell this as Capacity Blocks: {message}")]
    NotSold { operation: &'static str, region: String, message: String },
    /// The region does not sell Capacity Blocks (InvalidAction / UnsupportedOperation).
    #[error("{region} does not support {operation}")]
    Unsupported { operation: &'static str, region: String },
    /// Timeout, connection failure or 5xx: EC2 may or may not have acted. For a purchase this
    /// means "maybe bought": only reconciliation by tag may resolve it.
    #[error("{operation} in {region} has an unknown outcome: {message}")]
    Unknown { operation: &'static str, region: String, message: String },
    /// EC2 answered with something we could not use.
    #[error("{operation} in {region} returned an unusable response: {message}")]
    BadResponse { operation: &'static str, region: String, message: String },
}

/// EC2's code for an offering id it no longer takes (the EC2 API reference's error codes):
/// ask again, the block may be on sale under a new id.
pub const OFFERING_ID_EXPIRED: &str = "InvalidCapacityBlockOfferingIdExpired";

/// EC2's codes for a throttled call, as `MarketError::Throttled` carries them.
pub const REQUEST_LIMIT: &str = "RequestLimitExceeded";
pub const DESCRIBE_LIMIT: &str = "CapacityBlockDescribeLimitExceeded";

impl MarketError {
    /// EC2's error code, when it refused with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            MarketError::Rejected { code, .. } => Some(code),
            MarketError::Throttled { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the call certainly had no effect.
    pub fn had_no_effect(&self) -> bool {
        matches!(
            self,
            MarketError::Rejected { .. }
                | MarketError::Throttled { .. }
                | MarketError::Unsupported { .. }
                | MarketError::NotSold { .. }
        )
    }
}

/// One DescribeCapacityBlockOfferings question.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OfferingQuery {
    pub region: Region,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    /// Set for an UltraServer search: EC2 is asked with UltraserverType + UltraserverCount, and
    /// `instance_type` / `instance_count` are the UltraServers' own (never sent).
    pub ultraservers: Option<UltraServers>,
    pub duration_hours: u32,
    pub start_from: DateTime<Utc>,
    pub start_to: DateTime<Utc>,
    /// Other instance types asked in the same question (EC2's `InstanceTypePreferences`, up to
    /// 10 types in all with `instance_type`; empty for a question of one type): offerings of
    /// any of them, and segmented offerings of them together.
    pub also_types: Vec<InstanceType>,
}

impl OfferingQuery {
    /// Every instance type the question asks for: `instance_type`, then `also_types`.
    pub fn types(&self) -> Vec<&InstanceType> {
        std::iter::once(&self.instance_type).chain(&self.also_types).collect()
    }
}

#[async_trait]
pub trait OfferingSource: Send + Sync {
    /// All offerings for the query, every page followed. Rows that fail to parse are logged and
    /// skipped; the call fails only when EC2 does.
    async fn offerings(&self, query: &OfferingQuery) -> Result<Vec<Offering>, MarketError>;

    /// The form this source asks UltraServer searches in, in `region`, when it has one
    /// (learned from EC2's answers or started at by [`OfferingSource::start_search_form`]);
    /// `None` for a source with a single form.
    fn search_form(&self, _region: &Region) -> Option<SearchForm> {
        None
    }

    /// Starts `region`'s UltraServer searches in `form`, the one an earlier run learned (kept
    /// in the region's market memory). A source with a single form ignores it.
    fn start_search_form(&self, _region: &Region, _form: SearchForm) {}
}

/// A member account that lends the watch its own describe limit: its id and a market client
/// signed with its read-only watch role (`member.yaml`: `capblock-watch-<stack>`, which may call
/// DescribeCapacityBlockOfferings and nothing else). Purchases never go through it.
pub struct MemberMarket {
    pub account: String,
    pub market: Box<dyn OfferingSource>,
}

#[async_trait]
pub trait InstanceTypeSource: Send + Sync {
    /// Accelerators per instance (GPUs or Neuron devices) for each type EC2 knows.
    async fn accelerators(
        &self,
        region: &Region,
        types: &[InstanceType],
    ) -> Result<Vec<(InstanceType, u32)>, MarketError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurchaseRequest {
    pub offering: Offering,
    pub instance_platform: String,
    pub tags: BTreeMap<String, String>,
    pub dry_run: bool,
}

/// What one PurchaseCapacityBlock created. A purchase may make several reservations: one per
/// UltraServer, one per segment of a segmented offering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purchase {
    /// The reservation the answer describes in full (CapacityReservation).
    pub reservation: Reservation,
    /// The other reservations the answer names (by id only, in its CapacityBlocks and its
    /// CapacityReservations): tagged like the first, they are adopted by the tracker as parts
    /// of the same purchase.
    pub more: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PurchaseOutcome {
    Bought(Box<Purchase>),
    /// DryRun: EC2 would have accepted the request.
    WouldSucceed,
}

#[async_trait]
pub trait Purchaser: Send + Sync {
    /// Sends PurchaseCapacityBlock exactly once: the adapter must not retry it.
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError>;
}

/// A reservation EC2 listed that capblock cannot read: a field it relies on is missing or
/// malformed. It is never dropped silently: one carrying a purchase's tag may be that purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// Its id, when EC2 gave one.
    pub id: Option<String>,
    pub reason: String,
}

/// The capacity blocks carrying a tag: those capblock read, and those it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tagged {
    pub reservations: Vec<Reservation>,
    pub unreadable: Vec<Unreadable>,
}

#[async_trait]
pub trait ReservationSource: Send + Sync {
    /// Capacity-block reservations carrying `tag_key` = `tag_value`, with any that carry it but
    /// cannot be read.
    async fn reservations_tagged(&self, region: &Region, tag_key: &str, tag_value: &str)
    -> Result<Tagged, MarketError>;

    /// What EC2 says about each id; ids EC2 no longer knows come back as `Observed::NotFound`,
    /// ids it describes in a way that cannot be read as `Observed::Unreadable` (never as gone).
    async fn observe(&self, region: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError>;

    /// Every capacity-block reservation of the region, tagged or not (for adopting blocks
    /// bought outside capblock). Other reservation types are left out.
    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError>;
}

#[async_trait]
pub trait ExtensionMarket: Send + Sync {
    /// The extensions EC2 sells now for the block, for exactly `duration_hours`.
    async fn extension_offerings(
        &self,
        region: &Region,
        reservation_id: &str,
        duration_hours: u32,
    ) -> Result<Vec<ExtensionOffer>, MarketError>;

    /// Sends PurchaseCapacityBlockExtension exactly once: the adapter must not retry it (the API
    /// has no ClientToken either).
    async fn purchase_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<ExtensionReceipt, MarketError>;
    /// PurchaseCapacityBlockExtension with DryRun=true, as purchases are checked in a dry run:
    /// Ok when EC2 answers DryRunOperation (the call would have been allowed), nothing bought.
    async fn check_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<(), MarketError>;
}

/// A block as DescribeCapacityBlocks describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityBlockFacts {
    pub capacity_block_id: String,
    /// Set for an UltraServer's block (the type as EC2 names it).
    pub ultraserver_type: Option<String>,
    pub state: String,
    pub reservation_ids: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

/// The kind of a block (UltraServer or instances), which only DescribeCapacityBlocks tells.
#[async_trait]
pub trait BlockKinds: Send + Sync {
    /// The blocks with these ids (at most a page of 1000 per call, every page followed); ids
    /// EC2 does not know are left out.
    async fn capacity_blocks_by_id(
        &self,
        region: &Region,
        ids: &[String],
    ) -> Result<Vec<CapacityBlockFacts>, MarketError>;
}

/// DescribeCapacityBlockStatus: interconnect health and capacity of blocks that have some.
#[async_trait]
pub trait BlockStatusSource: Send + Sync {
    /// The status of each block of `ids` that EC2 reports one for, as EC2 counts it (what its
    /// unavailable count means is `domain::health`'s to judge). A block without a status yet
    /// (scheduled) or any more is left out rather than failing the others.
    async fn block_status(&self, region: &Region, ids: &[String]) -> Result<Vec<CapacityStatus>, MarketError>;

    /// GetCapacityReservationUsage: reservation `id`'s counts and the instances each account has
    /// in it, the owner's and those of every account the block is shared with (all pages).
    async fn reservation_usage(&self, region: &Region, id: &str) -> Result<ReservationUsage, MarketError>;
}

/// One entry of DescribeCapacityBlockExtensionHistory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionRecord {
    pub reservation_id: String,
    pub offering_id: String,
    /// payment-pending, payment-failed or payment-succeeded (or what EC2 adds later).
    pub status: String,
    pub end: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait ExtensionHistory: Send + Sync {
    /// Every extension EC2 recorded for these reservations.
    async fn extension_history(
        &self,
        region: &Region,
        reservation_ids: &[String],
    ) -> Result<Vec<ExtensionRecord>, MarketError>;
}

#[async_trait]
pub trait InstanceSource: Send + Sync {
    /// Ids of the instances running (or starting) in a capacity reservation now: DescribeInstances
    /// filtered by `capacity-reservation-id`.
    async fn instances_in(&self, region: &Region, reservation_id: &str) -> Result<Vec<String>, MarketError>;
    /// The capacity reservation an instance runs in; `None` when EC2 does not know the instance
    /// or it runs outside any reservation.
    async fn reservation_of(&self, region: &Region, instance_id: &str) -> Result<Option<String>, MarketError>;
}

#[async_trait]
pub trait ReservationLookup: Send + Sync {
    /// One reservation by id, whatever its type or tags (e.g. a block bought by hand);
    /// `None` when EC2 does not know it.
    async fn reservation(&self, region: &Region, id: &str) -> Result<Option<Reservation>, MarketError>;
}

#[async_trait]
pub trait QuotaSource: Send + Sync {
    /// The account's Capacity Block quota for an instance family in `region` as Service Quotas
    /// states it ("Concurrent TRN2 Capacity Blocks per account"), when it can be read: `None`
    /// when Service Quotas names no such quota, the role may not ask, or the call fails. Only a
    /// confirmation: a quota of 0 is still concluded from EC2's refusals when this is `None`.
    async fn capacity_block_quota(&self, region: &Region, family: &str) -> Option<u32>;
}
