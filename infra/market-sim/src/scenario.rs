//! The scenario file (TOML): the market on offer, the fault behaviour and the clock start.
//! See README.md for the format. Everything has a default so `""` is a valid (empty) market.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize};

use crate::accounts::{self, AccountCfg};
use crate::instance_types;
use crate::organization::Organization;
use crate::sellable::valid_duration_days;
use crate::wire::query::parse_timestamp;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default)]
    pub clock: ClockCfg,
    #[serde(default)]
    pub behaviour: Behaviour,
    #[serde(default)]
    pub regions: Vec<RegionCfg>,
    #[serde(default)]
    pub market: Vec<MarketLine>,
    /// How long an expired (or payment-failed) reservation stays visible to
    /// DescribeCapacityReservations before it answers NotFound.
    #[serde(default = "default_visible_days")]
    pub expired_visible_days: i64,
    #[serde(default = "default_account")]
    pub account_id: String,
    /// The AWS Organization the account is in: whom RAM lets it share Capacity Blocks with.
    #[serde(default)]
    pub organization: Organization,
    /// Other accounts' Capacity Block quotas of 0 (`accounts.rs`): an account not listed has
    /// every quota.
    #[serde(default)]
    pub accounts: Vec<AccountCfg>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockCfg {
    /// Sim time at start; default: real time at load, truncated to the minute.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub start: Option<DateTime<Utc>>,
    /// When true sim time also flows with real time; default false (frozen, moved only by
    /// POST /_sim/clock) so tests are deterministic.
    #[serde(default)]
    pub ticking: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentOutcome {
    Succeed,
    Fail,
    Never,
}

/// Where a market line's zones are: Availability Zones, or Local Zones (returned only to
/// accounts that opted in, or with AllAvailabilityZones=true).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZoneType {
    #[default]
    AvailabilityZone,
    LocalZone,
}

impl ZoneType {
    /// The offering's `zoneType` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AvailabilityZone => "availability-zone",
            Self::LocalZone => "local-zone",
        }
    }
}

/// What DescribeCapacityReservations shows of a Capacity Block before it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CountsBeforeStart {
    /// `totalInstanceCount` and `availableInstanceCount` 0 until the start, the count in the
    /// tag `aws:ec2capacityreservation:incrementalRequestedQuantity` (EC2 User Guide, "View
    /// Capacity Blocks").
    #[default]
    Zero,
    /// The full count from the purchase on, no `aws:` tags (the simulator's earlier reading).
    Full,
}

/// Whether DescribeCapacityBlockOfferings repeats an offering's id from answer to answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferingIds {
    /// One id per offering (region, type, count, duration, zone, start, price step).
    #[default]
    Stable,
    /// Every answer mints fresh ids, each purchasable for `offering_id_ttl_secs`.
    PerAnswer,
}

/// Whether an offering id is the market's or the asking account's: what an id that a member
/// account of the organization was shown means to the simulated account. The record (the EC2
/// API reference for DescribeCapacityBlockOfferings and PurchaseCapacityBlock, the EC2 User
/// Guide's "Capacity Blocks") does not say, so both readings are playable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferingIdsAcrossAccounts {
    /// An offering's id is the market's: the same whoever asks, and the simulated account may buy
    /// an id any account was shown (the simulator's behaviour before the setting).
    #[default]
    Shared,
    /// An account other than the simulated one is shown ids of its own, derived from the offering
    /// and the account; the simulated account buying one of them is answered
    /// InvalidCapacityBlockOfferingIdNotFound.
    PerAccount,
}

impl OfferingIdsAcrossAccounts {
    const KEY: &'static str = "offering_ids_across_accounts";
}

/// Only the two names, with an error that names the key and both values (a JSON body's error
/// would not say which key it is about).
impl<'de> Deserialize<'de> for OfferingIdsAcrossAccounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = OfferingIdsAcrossAccounts;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{} to be \"shared\" or \"per_account\"", OfferingIdsAcrossAccounts::KEY)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "shared" => Ok(OfferingIdsAcrossAccounts::Shared),
                    "per_account" => Ok(OfferingIdsAcrossAccounts::PerAccount),
                    other => Err(E::custom(format!(
                        "{} must be \"shared\" or \"per_account\", got {other:?}",
                        OfferingIdsAcrossAccounts::KEY
                    ))),
                }
            }
        }
        d.deserialize_str(V)
    }
}

/// How RAM refuses a Capacity Block it cannot share (a block neither scheduled nor active, an
/// UltraServer block, an account with a limited billing history, a principal outside the
/// organization): the record says they cannot be shared, not how the refusal shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RamRefusal {
    /// The share is created, the association goes ASSOCIATING and then FAILED with a
    /// statusMessage, as RAM's asynchronous associations can: the client must read them.
    #[default]
    FailedAssociation,
    /// CreateResourceShare / AssociateResourceShare answer an error and change nothing.
    Error,
}

/// What DescribeCapacityBlockStatus's `totalUnavailableCapacity` counts, block and reservation
/// alike: the record says both (botocore's EC2 model, CapacityBlockStatus: "unavailable for use
/// due to a system status check failure"; CapacityReservationStatus: "The used capacity ... in
/// use by resources that are running"), and `totalCapacity` is "the combined amount of Available
/// and Unavailable capacity" in both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnavailableMeans {
    /// Only the instances taken out (the health steps' `unavailable`); `totalAvailableCapacity`
    /// stays the launchable rest, so while instances run the total is more than the two.
    Failed,
    /// Every instance in use: the running ones plus the ones taken out, available the rest, so
    /// the total is always the two. The harsher for a client: one that reads the count as
    /// failures sees every running instance as failed.
    #[default]
    InUse,
}

/// Whether GetCapacityReservationUsage's `usedInstanceCount` counts an instance that is still
/// stopping (or shutting down) and so still holds its place: the record is silent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppingInUsage {
    /// Counted in its account's use until its place is free: total = available + used + failed
    /// throughout.
    #[default]
    Counted,
    /// Left out as soon as it stops running, while its place stays taken: for those minutes the
    /// place is neither available nor used, as a failed one is (the harsher reading for a client
    /// that tells failures by what is not in use).
    NotCounted,
}

/// Which limit DescribeCapacityBlockExtensionOfferings counts against: the record is silent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtensionOfferingsLimit {
    /// The describe limit of DescribeCapacityBlockOfferings (per account and region): the same
    /// bucket, refused with its code (the harsher reading).
    #[default]
    Shared,
    /// A bucket of its own per account and region, of the describe limit's size, refused with
    /// RequestLimitExceeded.
    Own,
    /// No limit beyond the API's general throttling.
    None,
}

/// How DescribeCapacityBlockOfferings takes an UltraServer search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UltraserverSearch {
    /// InstanceType (the UltraServer's) is required beside UltraserverType/UltraserverCount, as
    /// the API model says: without it MissingParameter.
    #[default]
    InstanceTypeRequired,
    /// UltraserverType/UltraserverCount alone; with InstanceType InvalidParameterCombination
    /// (the simulator's earlier reading).
    UltraserverOnly,
}

/// Whether DescribeCapacityBlockOfferings takes `InstanceTypePreferences`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceTypePreferences {
    /// Up to 10 types a question, as the API model says since 2026-11-17.
    #[default]
    Accepted,
    /// The parameter is refused with UnknownParameter, as EC2 refuses a parameter it does not
    /// know: a region (or an endpoint) the new model has not reached yet.
    Unknown,
}

/// Which one-type questions (the legacy `InstanceType`) a segmented offering answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentedForOneType {
    /// None: segmented offerings answer `InstanceTypePreferences` questions only.
    #[default]
    Never,
    /// Those naming the type of its first segment (its top-level `instanceType`): the answer
    /// a client that knows no segments reads as one block.
    FirstSegment,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    pub rate_per_sec: f64,
    pub burst: u32,
}

/// DescribeCapacityBlockOfferings' own limit per account and region: a token bucket of `burst`
/// calls, refilled with one token every `refill_secs` seconds (real time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DescribeLimit {
    pub burst: u32,
    pub refill_secs: f64,
}

impl Default for DescribeLimit {
    /// A burst of about 2 and one call every 2-4 s: the harsher end, 4 s.
    fn default() -> Self {
        Self { burst: 2, refill_secs: 4.0 }
    }
}

/// Another caller of DescribeCapacityBlockOfferings in the account (a person in the console, a
/// notebook, another tool): `calls` calls spread evenly over `over_secs` (0: all at once), the
/// first at the start of each period of `every_secs`, the first period starting `offset_secs`
/// after its schedule did. It spends from the same describe-limit bucket as capblock, in every
/// region, and a call that finds the bucket empty is refused (and counted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtherCaller {
    pub name: String,
    pub calls: u32,
    #[serde(default)]
    pub over_secs: f64,
    pub every_secs: f64,
    #[serde(default)]
    pub offset_secs: f64,
}

/// One caller whose IAM policies do not allow one EC2 action: calls of `action` signed with
/// `access_key` (the access key id of the SigV4 credential) are refused with
/// UnauthorizedOperation in `regions`, or in every region when the list is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IamDenial {
    pub access_key: String,
    pub action: String,
    #[serde(default)]
    pub regions: Vec<String>,
}

impl IamDenial {
    pub fn denies(&self, access_key: &str, action: &str, region: &str) -> bool {
        self.access_key == access_key
            && self.action == action
            && (self.regions.is_empty() || self.regions.iter().any(|r| r == region))
    }
}

/// At most this many calls in one period of one caller...
/// `stopping_minutes` when the scenario names none: the user guide's "several minutes" of
/// stopping or shutting-down, read as five (a reading: the record gives no number).
pub const DEFAULT_STOPPING_MINUTES: u32 = 5;
/// ...and at most an hour: past that a "few minutes" would be something else.
pub const MAX_STOPPING_MINUTES: u32 = 60;
pub const MAX_OTHER_CALLS_PER_PERIOD: u32 = 10_000;
/// ...and this many calls a second from all of them together, on average: every call is played
/// one by one (in every region with a bucket), and the people of an account call far slower.
pub const MAX_OTHER_CALLS_PER_SEC: f64 = 100.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Behaviour {
    pub latency_ms: u64,
    pub error_5xx_rate: f64,
    pub timeout_rate: f64,
    pub timeout_secs: u64,
    pub throttle: Option<Throttle>,
    /// Fraction of calls answered RequestLimitExceeded at random, on top of the token bucket:
    /// a throttling storm whose size does not depend on how fast the client machine is.
    pub throttle_rate: f64,
    pub payment: PaymentOutcome,
    /// Minutes from a purchase (block or extension) to its payment going through, when the
    /// outcome is `succeed`. EC2: payments take minutes (the Terraform provider waits at most
    /// 40 for `payment-pending` to end), up to 12 hours.
    pub payment_delay_minutes: f64,
    /// The older key, in hours: when given it wins over `payment_delay_minutes`.
    pub payment_delay_hours: Option<f64>,
    /// How long a payment-failed block stays visible to DescribeCapacityReservations and
    /// DescribeCapacityBlocks after it failed: the model keeps failed requests 60 minutes.
    pub failed_payment_visible_minutes: u64,
    pub down_regions: Vec<String>,
    pub drop_purchase_response: bool,
    /// Calls of these actions wait in the network, before EC2 receives them (not counted, not
    /// done), until `POST /_sim/release` delivers or loses them: how a test decides an
    /// interleaving (the caller killed while its call is in flight) instead of racing a sleep.
    /// Nothing in EC2 corresponds to it; empty by default.
    pub hold_actions: Vec<String>,
    /// With `hold_actions`: only the calls of these accounts are held (the caller's account as
    /// the describe limit resolves it; the simulated account's id for its own keys), so a test
    /// can let one account's lane run while the others wait. Empty: every caller's.
    pub hold_accounts: Vec<String>,
    /// Seconds of sim time after a purchase before DescribeCapacityReservations (and
    /// DescribeCapacityBlocks) list the reservation it made; 0: at once (the default). The EC2
    /// API is eventually consistent and how long a new reservation takes to be listed is not
    /// published: each reading is a setting.
    pub listing_lag_secs: u64,
    /// Seconds a purchase's reservation, once listed, is missing again from
    /// DescribeCapacityReservations (and DescribeCapacityBlocks, and a lookup by its id), from
    /// `STALE_AFTER_SECS` after it was first listed; 0: never (the default). The EC2 API is
    /// eventually consistent ("the result of an API command ... might not be immediately visible
    /// to all subsequent commands"): a later read served by a replica that has not seen the
    /// purchase yet is a stale read, and how long one can last is not published.
    pub stale_listing_secs: u64,
    /// DescribeCapacityReservations lists every reservation twice (a read of a listing changing
    /// under it); false: once (the default). The record is silent on duplicates in one answer:
    /// a client that counts reservations must not count one twice.
    pub listed_twice: bool,
    /// PurchaseCapacityBlockExtension is recorded (the extension exists and settles as usual),
    /// its response never sent: the buyer cannot tell whether it went through.
    pub drop_extension_purchase_response: bool,
    /// DescribeCapacityBlockOfferings answers at most this many offerings, the cheapest per
    /// accelerator-hour (0 = no cap). EC2 returns "up to 6".
    pub max_offerings_per_answer: u32,
    /// Also offer blocks starting about 30 minutes from now with the closest-match durations
    /// (ending at 11:30 UTC, one slightly shorter and one slightly longer than asked).
    pub same_day_offerings: bool,
    /// On by default; `false` (TOML) or `null` / `false` (JSON) turns it off, `true` is the
    /// default limit.
    #[serde(deserialize_with = "de_describe_limit")]
    pub describe_limit: Option<DescribeLimit>,
    /// Other callers in the account (a person in the console) spend this many tokens a minute
    /// from the same describe-limit bucket, steadily.
    pub describe_limit_other_callers_per_min: f64,
    /// Other callers making discrete calls on a pattern, each of which can be refused.
    pub describe_limit_others: Vec<OtherCaller>,
    /// Instance counts of a block before its start: "zero" (EC2's) or "full".
    pub counts_before_start: CountsBeforeStart,
    /// Offering ids: "stable" or "per_answer" (fresh ids in every answer).
    pub offering_ids: OfferingIds,
    /// With "per_answer", an id is purchasable while younger than this (sim time), then
    /// answers InvalidCapacityBlockOfferingIdExpired.
    pub offering_id_ttl_secs: u64,
    /// Offering ids across accounts: "shared" (the market's, whoever asks) or "per_account" (an
    /// account other than the simulated one is shown ids of its own, which the simulated account
    /// cannot buy).
    pub offering_ids_across_accounts: OfferingIdsAcrossAccounts,
    /// UltraServer searches: "instance_type_required" or "ultraserver_only".
    pub ultraserver_search: UltraserverSearch,
    /// `InstanceTypePreferences` (up to 10 types a question): "accepted" (the API model since
    /// 2026-11-17) or "unknown" (a region not yet serving it: UnknownParameter).
    pub instance_type_preferences: InstanceTypePreferences,
    /// Whether a one-type question (the legacy `InstanceType`) is answered segmented
    /// offerings: "never" or "first_segment" (when the type is the first segment's).
    pub segmented_for_one_type: SegmentedForOneType,
    /// Which limit extension offering questions count against: "shared", "own" or "none".
    pub extension_offerings_limit: ExtensionOfferingsLimit,
    /// Actions refused to a caller (UnauthorizedOperation), as its IAM policies would.
    pub iam_denials: Vec<IamDenial>,
    /// The account of a caller, by access key id (12 digits): whose describe limit its
    /// DescribeCapacityBlockOfferings calls spend. A key not listed is resolved through STS
    /// (`--sts-endpoint`, temporary keys only) or is the simulated account's.
    pub caller_accounts: BTreeMap<String, String>,
    /// RAM: a Capacity Block that cannot be shared, "failed_association" or "error".
    pub ram_refusal: RamRefusal,
    /// DescribeCapacityBlockStatus's unavailable count: "failed" or "in_use".
    pub unavailable_means: UnavailableMeans,
    /// Minutes an instance stopped through `POST /_sim/blocks/usage` keeps its place (EC2's
    /// stopping or shutting-down: "several minutes") before it counts as available again.
    pub stopping_minutes: u32,
    /// Whether GetCapacityReservationUsage counts a stopping instance: "counted" or
    /// "not_counted".
    pub stopping_in_usage: StoppingInUsage,
    /// RAM: seconds of sim time an association stays ASSOCIATING (and a disassociation
    /// DISASSOCIATING) before it is done.
    pub ram_association_delay_secs: u64,
    /// RAM: seconds of sim time a new resource share is missing from GetResourceShares after
    /// CreateResourceShare made it (eventual consistency; 0: listed at once).
    pub ram_listing_lag_secs: u64,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            error_5xx_rate: 0.0,
            timeout_rate: 0.0,
            timeout_secs: 30,
            throttle: None,
            throttle_rate: 0.0,
            payment: PaymentOutcome::Succeed,
            payment_delay_minutes: 5.0,
            payment_delay_hours: None,
            failed_payment_visible_minutes: 60,
            down_regions: Vec::new(),
            drop_purchase_response: false,
            hold_actions: Vec::new(),
            hold_accounts: Vec::new(),
            listing_lag_secs: 0,
            stale_listing_secs: 0,
            listed_twice: false,
            drop_extension_purchase_response: false,
            max_offerings_per_answer: 6,
            same_day_offerings: true,
            describe_limit: Some(DescribeLimit::default()),
            describe_limit_other_callers_per_min: 0.0,
            describe_limit_others: Vec::new(),
            counts_before_start: CountsBeforeStart::Zero,
            offering_ids: OfferingIds::Stable,
            offering_id_ttl_secs: 300,
            offering_ids_across_accounts: OfferingIdsAcrossAccounts::Shared,
            ultraserver_search: UltraserverSearch::InstanceTypeRequired,
            instance_type_preferences: InstanceTypePreferences::Accepted,
            segmented_for_one_type: SegmentedForOneType::Never,
            extension_offerings_limit: ExtensionOfferingsLimit::Shared,
            iam_denials: Vec::new(),
            caller_accounts: BTreeMap::new(),
            ram_refusal: RamRefusal::FailedAssociation,
            unavailable_means: UnavailableMeans::InUse,
            stopping_minutes: DEFAULT_STOPPING_MINUTES,
            stopping_in_usage: StoppingInUsage::Counted,
            ram_association_delay_secs: 10,
            ram_listing_lag_secs: DEFAULT_RAM_LISTING_LAG_SECS,
        }
    }
}

/// An association takes at most a day to settle: any longer is a bug in a scenario.
pub const MAX_RAM_ASSOCIATION_DELAY_SECS: u64 = 24 * 3600;

/// A new share is listed a minute after it was made, by default: how long the Terraform AWS
/// provider keeps asking GetResourceShares for a share CreateResourceShare just returned
/// (`resourceSharePropagationTimeout`), the record's closest word on RAM's listing.
pub const DEFAULT_RAM_LISTING_LAG_SECS: u64 = 60;

/// A new share is listed within a day: any longer is a bug in a scenario.
pub const MAX_RAM_LISTING_LAG_SECS: u64 = 24 * 3600;

/// Offering ids live at most as long as offerings are sold ahead: 8 weeks.
pub const MAX_OFFERING_ID_TTL_SECS: u64 = 56 * 24 * 3600;

impl Behaviour {
    /// Whether an `iam_denials` entry refuses `action` to the caller `access_key` in `region`.
    pub fn denies(&self, access_key: &str, action: &str, region: &str) -> bool {
        self.iam_denials.iter().any(|d| d.denies(access_key, action, region))
    }

    /// The account `caller_accounts` gives the access key id `access_key`, if it lists it.
    pub fn caller_account(&self, access_key: &str) -> Option<&str> {
        self.caller_accounts.get(access_key).map(String::as_str)
    }

    /// The payment delay in hours: `payment_delay_hours` when given, else the minutes.
    pub fn payment_delay(&self) -> f64 {
        self.payment_delay_hours.unwrap_or(self.payment_delay_minutes / 60.0)
    }

    pub fn validate(&self) -> Result<(), String> {
        for (name, r) in [
            ("error_5xx_rate", self.error_5xx_rate),
            ("timeout_rate", self.timeout_rate),
            ("throttle_rate", self.throttle_rate),
        ] {
            if !(0.0..=1.0).contains(&r) {
                return Err(format!("{name} must be within 0..=1, got {r}"));
            }
        }
        if !(self.payment_delay_minutes >= 0.0 && self.payment_delay_minutes.is_finite()) {
            return Err(format!("payment_delay_minutes must be >= 0, got {}", self.payment_delay_minutes));
        }
        if let Some(h) = self.payment_delay_hours
            && !(h >= 0.0 && h.is_finite())
        {
            return Err(format!("payment_delay_hours must be >= 0, got {h}"));
        }
        if let Some(t) = &self.throttle
            && (t.rate_per_sec.is_nan() || t.rate_per_sec <= 0.0 || t.burst == 0)
        {
            return Err("throttle needs rate_per_sec > 0 and burst >= 1".into());
        }
        if let Some(l) = &self.describe_limit
            && (l.burst == 0 || !(l.refill_secs > 0.0 && l.refill_secs.is_finite()))
        {
            return Err(format!(
                "describe_limit needs burst >= 1 and refill_secs > 0, got burst {} and refill_secs {}",
                l.burst, l.refill_secs
            ));
        }
        if self.offering_id_ttl_secs == 0 || self.offering_id_ttl_secs > MAX_OFFERING_ID_TTL_SECS {
            return Err(format!(
                "offering_id_ttl_secs must be within 1..={MAX_OFFERING_ID_TTL_SECS}, got {}",
                self.offering_id_ttl_secs
            ));
        }
        let others = self.describe_limit_other_callers_per_min;
        if !(others >= 0.0 && others.is_finite()) {
            return Err(format!("describe_limit_other_callers_per_min must be >= 0, got {others}"));
        }
        if self.stopping_minutes > MAX_STOPPING_MINUTES {
            return Err(format!(
                "stopping_minutes must be within 0..={MAX_STOPPING_MINUTES}, got {}",
                self.stopping_minutes
            ));
        }
        if self.ram_association_delay_secs > MAX_RAM_ASSOCIATION_DELAY_SECS {
            return Err(format!(
                "ram_association_delay_secs must be within 0..={MAX_RAM_ASSOCIATION_DELAY_SECS}, got {}",
                self.ram_association_delay_secs
            ));
        }
        if self.ram_listing_lag_secs > MAX_RAM_LISTING_LAG_SECS {
            return Err(format!(
                "ram_listing_lag_secs must be within 0..={MAX_RAM_LISTING_LAG_SECS}, got {}",
                self.ram_listing_lag_secs
            ));
        }
        validate_others(&self.describe_limit_others)?;
        validate_denials(&self.iam_denials)?;
        validate_caller_accounts(&self.caller_accounts)
    }
}

/// Each entry maps a non-empty access key id to an account id of 12 digits.
/// A segmented line: 2 to 10 segments of known types with counts of 1 to 64, the first
/// naming the line's `instance_type`, and no UltraServers.
fn validate_segments(l: &MarketLine, at: &str) -> Result<(), String> {
    if l.segments.is_empty() {
        return Ok(());
    }
    if !(2..=MAX_SEGMENTS).contains(&l.segments.len()) {
        return Err(format!("{at}: segments must be 2 to {MAX_SEGMENTS}"));
    }
    if l.ultraserver_type.is_some() {
        return Err(format!("{at}: segments do not go with ultraserver_type"));
    }
    if l.segments[0].instance_type != l.instance_type {
        return Err(format!("{at}: instance_type must be the first segment's"));
    }
    for seg in &l.segments {
        if instance_types::lookup(&seg.instance_type).is_none() {
            return Err(format!("{at}: segment type {:?} is unknown", seg.instance_type));
        }
        if seg.count == 0 || seg.count > 64 || seg.az.trim().is_empty() {
            return Err(format!("{at}: a segment needs a zone and a count within 1..=64"));
        }
    }
    Ok(())
}

fn validate_caller_accounts(accounts: &BTreeMap<String, String>) -> Result<(), String> {
    for (key, account) in accounts {
        if key.trim().is_empty() {
            return Err("caller_accounts: an access key id must not be empty".into());
        }
        if !crate::organization::is_account(account) {
            return Err(format!("caller_accounts[{key:?}]: account {account:?} must be 12 digits"));
        }
    }
    Ok(())
}

/// A denial must name a caller, an action the simulator answers (any other answers InvalidAction
/// before anyone is asked for permission) and, if any, real region names.
fn validate_denials(denials: &[IamDenial]) -> Result<(), String> {
    for (i, d) in denials.iter().enumerate() {
        if d.access_key.trim().is_empty() {
            return Err(format!("iam_denials[{i}]: access_key must not be empty"));
        }
        if !crate::action_names::ACTIONS.contains(&d.action.as_str()) {
            return Err(format!(
                "iam_denials[{i}] ({}): action {:?} is not one the simulator answers (the API name without \"ec2:\", one of {})",
                d.access_key,
                d.action,
                crate::action_names::ACTIONS.join(", ")
            ));
        }
        if d.regions.iter().any(|r| r.trim().is_empty()) {
            return Err(format!(
                "iam_denials[{i}] ({}): regions entries must be region names, got an empty one",
                d.access_key
            ));
        }
    }
    Ok(())
}

/// Each caller's pattern must be playable, its name its own (the counts are kept by name), and
/// all of them together slow enough to be played call by call.
fn validate_others(others: &[OtherCaller]) -> Result<(), String> {
    let mut per_sec = 0.0;
    for (i, c) in others.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(format!("describe_limit_others[{i}]: name must not be empty"));
        }
        let at = format!("describe_limit_others[{i}] ({})", c.name);
        if let Some(j) = others[..i].iter().position(|o| o.name == c.name) {
            return Err(format!("{at}: the name is already taken by describe_limit_others[{j}]"));
        }
        if !(1..=MAX_OTHER_CALLS_PER_PERIOD).contains(&c.calls) {
            return Err(format!("{at}: calls must be within 1..={MAX_OTHER_CALLS_PER_PERIOD}, got {}", c.calls));
        }
        if !(c.every_secs > 0.0 && c.every_secs.is_finite()) {
            return Err(format!("{at}: every_secs must be > 0, got {}", c.every_secs));
        }
        // Spread over more than the period, one period's calls would run into the next one's.
        if !(c.over_secs >= 0.0 && c.over_secs <= c.every_secs) {
            return Err(format!(
                "{at}: over_secs must be within 0..=every_secs ({}), got {}",
                c.every_secs, c.over_secs
            ));
        }
        if !(c.offset_secs >= 0.0 && c.offset_secs.is_finite()) {
            return Err(format!("{at}: offset_secs must be >= 0, got {}", c.offset_secs));
        }
        per_sec += f64::from(c.calls) / c.every_secs;
    }
    if per_sec > MAX_OTHER_CALLS_PER_SEC {
        return Err(format!(
            "describe_limit_others: together the callers make {per_sec} calls a second, more than {MAX_OTHER_CALLS_PER_SEC}"
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionCfg {
    pub name: String,
    #[serde(default = "yes")]
    pub supported: bool,
    #[serde(default)]
    pub down: bool,
    /// Instance families (the part of a type before the first '.', e.g. "trn2") whose Capacity
    /// Block quota is 0 here: DescribeCapacityBlockOfferings for them answers
    /// CapacityBlockDescribeLimitExceeded on every call.
    #[serde(default)]
    pub zero_quota_families: Vec<String>,
    /// Instance types sold as Capacity Blocks here. Absent: exactly the types of this region's
    /// market lines.
    #[serde(default)]
    pub sells: Option<Vec<String>>,
    /// Local Zones the account has opted into: their offerings come back without
    /// AllAvailabilityZones=true.
    #[serde(default)]
    pub opted_in_zones: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceStep {
    #[serde(deserialize_with = "de_time")]
    pub from: DateTime<Utc>,
    #[serde(deserialize_with = "de_decimal")]
    pub usd_per_accelerator_hour: Decimal,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarketLine {
    pub region: String,
    pub instance_type: String,
    /// Default: `[REGION + "a"]`.
    #[serde(default)]
    pub azs: Vec<String>,
    #[serde(default = "one")]
    pub counts: Vec<u32>,
    #[serde(default = "one")]
    pub durations_days: Vec<u32>,
    #[serde(default = "one")]
    pub start_days: Vec<u32>,
    /// Step function of sim time, sorted by `from`; the line is not offered before the first step.
    pub price: Vec<PriceStep>,
    #[serde(default, deserialize_with = "de_opt_decimal")]
    pub extension_usd_per_accelerator_hour: Option<Decimal>,
    #[serde(default)]
    pub payment: Option<PaymentOutcome>,
    #[serde(default = "usd")]
    pub currency: String,
    /// "availability-zone" (default) or "local-zone" (e.g. the Dallas Local Zone us-east-1-dfw-2a).
    #[serde(default)]
    pub zone_type: ZoneType,
    /// An UltraServer line (e.g. "u-p6e-gb200x72"): sells whole UltraServers of `instance_type`
    /// (which must be the UltraServer's), found only with `UltraserverType` or with no type at
    /// all; `counts` is not used, `ultraserver_counts` says how many UltraServers.
    #[serde(default)]
    pub ultraserver_type: Option<String>,
    /// UltraServer counts offered (default [1]); only with `ultraserver_type`.
    #[serde(default)]
    pub ultraserver_counts: Vec<u32>,
    /// Health changes of every block bought from this line, relative to its start (see
    /// README, "Block health").
    #[serde(default)]
    pub health: Vec<HealthStep>,
    /// How many instances of every block bought from this line run, relative to its start (see
    /// README, "Instances running in a block"). None: every available instance runs.
    #[serde(default)]
    pub usage: Vec<UsageStep>,
    /// A segmented line (2 to 10 segments): one offering per start, made of these blocks, each
    /// with its own zone, type and count, bought as one reservation per segment (README,
    /// "Segmented offerings"). `instance_type` must be the first segment's; `azs`, `counts` and
    /// `ultraserver_type` are not used.
    #[serde(default)]
    pub segments: Vec<SegmentSpec>,
}

/// One segment of a segmented line: `count` instances of `instance_type` in `az`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentSpec {
    pub instance_type: String,
    pub az: String,
    pub count: u32,
}

/// At most 10 segments an offering (the API model's `CapacityBlockOfferingSegments`).
pub const MAX_SEGMENTS: usize = 10;

/// From `after_start_hours` after a block's start on, its interconnect status and how many of
/// its instances are unavailable (until the next step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthStep {
    pub after_start_hours: f64,
    #[serde(default = "interconnect_ok")]
    pub interconnect: String,
    #[serde(default)]
    pub unavailable: u32,
}

/// From `after_start_hours` after a block's start on, `running` of its instances run (capped at
/// the instances not unavailable), until the next step; the others are idle: paid for, and
/// counted in `availableInstanceCount`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageStep {
    pub after_start_hours: f64,
    pub running: u32,
}

/// CapacityBlockInterconnectStatus values of the EC2 model.
pub const INTERCONNECT_STATUSES: &[&str] = &["ok", "impaired", "insufficient-data"];

fn interconnect_ok() -> String {
    "ok".into()
}

impl MarketLine {
    /// The UltraServer counts this line offers (none for an instance line).
    pub fn ultraserver_counts(&self) -> Vec<u32> {
        match (&self.ultraserver_type, self.ultraserver_counts.is_empty()) {
            (None, _) => Vec::new(),
            (Some(_), true) => vec![1],
            (Some(_), false) => self.ultraserver_counts.clone(),
        }
    }
}

fn default_seed() -> u64 {
    1
}
fn default_visible_days() -> i64 {
    60
}
fn default_account() -> String {
    "111122223333".into()
}
fn yes() -> bool {
    true
}
fn one() -> Vec<u32> {
    vec![1]
}
fn usd() -> String {
    "USD".into()
}

impl Scenario {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| format!("scenario: {e}"))?;
        s.normalise();
        s.validate()?;
        Ok(s)
    }

    fn normalise(&mut self) {
        for line in &mut self.market {
            if line.azs.is_empty() {
                line.azs.push(format!("{}a", line.region));
            }
            line.price.sort_by_key(|p| p.from);
        }
        // `down = true` in [[regions]] is the same switch as behaviour.down_regions.
        for r in &self.regions {
            if r.down && !self.behaviour.down_regions.contains(&r.name) {
                self.behaviour.down_regions.push(r.name.clone());
            }
        }
    }

    fn validate(&self) -> Result<(), String> {
        self.behaviour.validate()?;
        self.organization.validate(&self.account_id)?;
        accounts::validate(&self.accounts, &self.account_id, is_family)?;
        for (i, r) in self.regions.iter().enumerate() {
            let at = format!("regions[{i}] ({})", r.name);
            if let Some(f) = r.zero_quota_families.iter().find(|f| !is_family(f)) {
                return Err(format!(
                    "{at}: zero_quota_families entry {f:?} is not an instance family (the part of a type before the '.', e.g. \"trn2\")"
                ));
            }
            if r.opted_in_zones.iter().any(|z| z.trim().is_empty()) {
                return Err(format!("{at}: opted_in_zones entries must be zone names, got an empty one"));
            }
            if let Some(t) = r
                .sells
                .iter()
                .flatten()
                .find(|t| instance_types::lookup(t).is_none() && instance_types::ultraserver(t).is_none())
            {
                return Err(format!("{at}: sells {t:?}, which is not in the built-in instance type table"));
            }
        }
        for (i, l) in self.market.iter().enumerate() {
            let at = format!("market[{i}] ({} {})", l.region, l.instance_type);
            if instance_types::lookup(&l.instance_type).is_none() {
                return Err(format!("{at}: unknown instance type (no accelerator count to price it)"));
            }
            if l.price.is_empty() {
                return Err(format!("{at}: needs at least one price step"));
            }
            match &l.ultraserver_type {
                Some(u) => {
                    let info = instance_types::ultraserver(u)
                        .ok_or_else(|| format!("{at}: unknown ultraserver_type {u:?}"))?;
                    if info.instance_type != l.instance_type {
                        return Err(format!("{at}: {u} is made of {}", info.instance_type));
                    }
                    if l.ultraserver_counts.iter().any(|&c| c == 0 || c > 16) {
                        return Err(format!("{at}: ultraserver_counts must be within 1..=16"));
                    }
                }
                None if !l.ultraserver_counts.is_empty() => {
                    return Err(format!("{at}: ultraserver_counts needs ultraserver_type"));
                }
                None => {}
            }
            validate_segments(l, &at)?;
            for h in &l.health {
                if !(h.after_start_hours >= 0.0 && h.after_start_hours.is_finite()) {
                    return Err(format!("{at}: health after_start_hours must be >= 0"));
                }
                if !INTERCONNECT_STATUSES.contains(&h.interconnect.as_str()) {
                    return Err(format!("{at}: health interconnect must be one of {INTERCONNECT_STATUSES:?}"));
                }
            }
            if l.usage.iter().any(|u| !(u.after_start_hours >= 0.0 && u.after_start_hours.is_finite())) {
                return Err(format!("{at}: usage after_start_hours must be >= 0"));
            }
            if l.counts.iter().any(|&c| c == 0 || c > 64) {
                return Err(format!("{at}: counts must be within 1..=64"));
            }
            if let Some(d) = l.durations_days.iter().find(|&&d| !valid_duration_days(i64::from(d))) {
                return Err(format!("{at}: duration {d} days is not sold (1-14 days, then 7-day steps to 182)"));
            }
            if l.start_days.iter().any(|&d| d > 56) {
                return Err(format!("{at}: start_days must be <= 56 (8 weeks)"));
            }
            if l.price.iter().any(|p| p.usd_per_accelerator_hour <= Decimal::ZERO) {
                return Err(format!("{at}: prices must be positive"));
            }
            let product = l.ultraserver_type.as_ref().unwrap_or(&l.instance_type);
            if let Some(sold) = self.region(&l.region).and_then(|r| r.sells.as_ref())
                && !sold.contains(product)
            {
                return Err(format!("{at}: the region's sells list does not include {product}"));
            }
        }
        Ok(())
    }

    pub fn region(&self, name: &str) -> Option<&RegionCfg> {
        self.regions.iter().find(|r| r.name == name)
    }

    /// Capacity-block actions are refused (UnsupportedOperation) only in regions listed with
    /// `supported = false`; unlisted regions are supported and simply have no market lines.
    pub fn supports(&self, region: &str) -> bool {
        self.region(region).is_none_or(|r| r.supported)
    }

    /// Whether `region` sells `instance_type` as Capacity Blocks: the region's `sells` list if it
    /// has one, else exactly the types of its market lines (the harsher reading); never a type
    /// missing from the built-in table.
    pub fn sells(&self, region: &str, instance_type: &str) -> bool {
        instance_types::lookup(instance_type).is_some()
            && self.sold(region, instance_type, |l| {
                (l.instance_type == instance_type && l.ultraserver_type.is_none())
                    || l.segments.iter().any(|s| s.instance_type == instance_type)
            })
    }

    /// Whether `region` sells the UltraServer type `ultraserver_type` as Capacity Blocks: the
    /// `sells` list if the region has one, else the UltraServer lines of the region.
    pub fn sells_ultraserver(&self, region: &str, ultraserver_type: &str) -> bool {
        instance_types::ultraserver(ultraserver_type).is_some()
            && self.sold(region, ultraserver_type, |l| l.ultraserver_type.as_deref() == Some(ultraserver_type))
    }

    /// `name` is in the region's `sells` list if it has one, else some market line of the
    /// region is `of_kind`.
    fn sold(&self, region: &str, name: &str, of_kind: impl Fn(&MarketLine) -> bool) -> bool {
        match self.region(region).and_then(|r| r.sells.as_ref()) {
            Some(sold) => sold.iter().any(|t| t == name),
            None => self.market.iter().any(|l| l.region == region && of_kind(l)),
        }
    }

    /// Whether the account has opted into the Local Zone `zone` of `region`.
    pub fn opted_in(&self, region: &str, zone: &str) -> bool {
        self.region(region).is_some_and(|r| r.opted_in_zones.iter().any(|z| z == zone))
    }

    /// Whether the account's Capacity Block quota for this type's family is 0 in `region`.
    pub fn zero_quota(&self, region: &str, instance_type: &str) -> bool {
        let family = instance_family(instance_type);
        self.region(region).is_some_and(|r| r.zero_quota_families.iter().any(|f| f.eq_ignore_ascii_case(family)))
    }

    /// Whether `account`'s Capacity Block quota for this type's family is 0 in `region`: the
    /// simulated account's by `[[regions]] zero_quota_families`, another account's by its
    /// `[[accounts]]` entry (none: every quota).
    pub fn zero_quota_of(&self, account: &str, region: &str, instance_type: &str) -> bool {
        if account == self.account_id {
            return self.zero_quota(region, instance_type);
        }
        accounts::zero_quota(&self.accounts, account, region, instance_family(instance_type))
    }
}

/// The instance family: the part of the type before the first '.' ("trn2" for "trn2.48xlarge").
pub fn instance_family(instance_type: &str) -> &str {
    instance_type.split('.').next().unwrap_or(instance_type)
}

fn is_family(f: &str) -> bool {
    !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// A timestamp given as a TOML datetime or as an RFC 3339 string.
fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let v = toml::Value::deserialize(d)?;
    let text = match v {
        toml::Value::String(s) => s,
        toml::Value::Datetime(dt) => dt.to_string(),
        other => {
            return Err(serde::de::Error::custom(format!("expected a timestamp, got {other}")));
        }
    };
    parse_timestamp(&text).ok_or_else(|| serde::de::Error::custom(format!("bad timestamp {text:?}")))
}

/// `describe_limit`: a table `{ burst, refill_secs }` (either may be left out), `false` or
/// `null` (off), or `true` (the default limit).
fn de_describe_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DescribeLimit>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<DescribeLimit>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("{ burst, refill_secs }, false or null (off), or true (the default limit)")
        }
        fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Self::Value, E> {
            Ok(on.then(DescribeLimit::default))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            de_describe_limit(d)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            DescribeLimit::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    d.deserialize_any(V)
}

fn de_opt_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    de_time(d).map(Some)
}

/// A decimal given as a string (exact, preferred) or a TOML number.
fn de_decimal<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
    let v = toml::Value::deserialize(d)?;
    let text = match v {
        toml::Value::String(s) => s,
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        other => {
            return Err(serde::de::Error::custom(format!("expected a decimal, got {other}")));
        }
    };
    Decimal::from_str(text.trim()).map_err(|e| serde::de::Error::custom(format!("bad decimal {text:?}: {e}")))
}

fn de_opt_decimal<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
    de_decimal(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The behaviour a scenario of `text` under `[behaviour]` parses to.
    fn b(text: &str) -> Result<Behaviour, String> {
        Scenario::parse(&format!("[behaviour]\n{text}")).map(|s| s.behaviour)
    }

    #[test]
    fn parses_the_example() {
        let s = Scenario::parse(include_str!("../examples/basic.toml")).unwrap();
        assert!(!s.market.is_empty());
        assert!(s.clock.start.is_some());
    }

    #[test]
    fn the_describe_limit_examples_play_the_readings() {
        let limit = |text: &str| Scenario::parse(text).unwrap().behaviour.describe_limit.unwrap();
        let paced_4s = limit(include_str!("../examples/describe-limit-4s.toml"));
        assert_eq!(paced_4s, DescribeLimit::default(), "the default reading");
        assert_eq!(
            limit(include_str!("../examples/describe-limit-burst-10.toml")),
            DescribeLimit { burst: 10, refill_secs: 6.667 }
        );
        assert_eq!(
            limit(include_str!("../examples/describe-limit-2s.toml")),
            DescribeLimit { burst: 2, refill_secs: 2.0 }
        );
        let others = Scenario::parse(include_str!("../examples/describe-limit-others.toml")).unwrap();
        assert_eq!(others.behaviour.describe_limit, Some(DescribeLimit::default()));
        let names: Vec<_> = others.behaviour.describe_limit_others.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["console", "notebook"]);
    }

    #[test]
    fn empty_is_valid_and_defaults_apply() {
        let s = Scenario::parse("").unwrap();
        assert_eq!(s.expired_visible_days, 60);
        assert_eq!(s.behaviour.timeout_secs, 30);
        assert_eq!(s.behaviour.payment, PaymentOutcome::Succeed);
        assert!(s.supports("anywhere-1"));
    }

    #[test]
    fn accepts_toml_datetimes_and_numbers() {
        let s = Scenario::parse(
            r#"
            [clock]
            start = 2026-12-01T00:00:00Z
            [[regions]]
            name = "eu-north-1"
            supported = false
            down = true
            [[market]]
            region = "us-east-1"
            instance_type = "p5.48xlarge"
            price = [ { from = 2026-12-01T00:00:00Z, usd_per_accelerator_hour = 4.1 } ]
            "#,
        )
        .unwrap();
        assert_eq!(s.market[0].price[0].usd_per_accelerator_hour.to_string(), "4.1");
        assert_eq!(s.market[0].azs, vec!["us-east-1a"]);
        assert!(!s.supports("eu-north-1"));
        assert_eq!(s.behaviour.down_regions, vec!["eu-north-1"]);
    }

    #[test]
    fn rejects_bad_lines() {
        let base = |extra: &str| {
            format!(
                "[[market]]\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\nprice = [{{ from = \"2026-12-01T00:00:00Z\", usd_per_accelerator_hour = \"1\" }}]\n{extra}"
            )
        };
        assert!(Scenario::parse(&base("")).is_ok());
        assert!(Scenario::parse(&base("durations_days = [15]")).is_err());
        assert!(Scenario::parse(&base("counts = [0]")).is_err());
        assert!(Scenario::parse(&base("bogus = 1")).is_err());
        assert!(Scenario::parse(&base("start_days = [57]")).is_err());
        assert!(Scenario::parse("[behaviour]\ntimeout_rate = 2.0").is_err());
    }

    #[test]
    fn what_a_region_sells_and_zero_quota_families() {
        let s = Scenario::parse(
            r#"
            [[regions]]
            name = "us-west-2"
            sells = ["p5.48xlarge", "p4d.24xlarge"]
            zero_quota_families = ["trn2", "P6-B200"]
            [[market]]
            region = "us-east-1"
            instance_type = "p5.48xlarge"
            price = [ { from = "2026-12-01T00:00:00Z", usd_per_accelerator_hour = "1" } ]
            [[market]]
            region = "us-west-2"
            instance_type = "p4d.24xlarge"
            price = [ { from = "2026-12-01T00:00:00Z", usd_per_accelerator_hour = "1" } ]
            "#,
        )
        .unwrap();
        // No sells list: exactly the region's lines.
        assert!(s.sells("us-east-1", "p5.48xlarge"));
        assert!(!s.sells("us-east-1", "p4d.24xlarge"));
        assert!(!s.sells("eu-west-1", "p5.48xlarge"));
        // A sells list: its types, with or without a line.
        assert!(s.sells("us-west-2", "p5.48xlarge"));
        assert!(s.sells("us-west-2", "p4d.24xlarge"));
        assert!(!s.sells("us-west-2", "p5e.48xlarge"));
        assert!(!s.sells("us-west-2", "m9.fake"));
        // Families, case-insensitively, in their region only.
        assert_eq!(instance_family("p6-b200.48xlarge"), "p6-b200");
        assert!(s.zero_quota("us-west-2", "trn2.48xlarge"));
        assert!(s.zero_quota("us-west-2", "trn2.3xlarge"));
        assert!(s.zero_quota("us-west-2", "p6-b200.48xlarge"));
        assert!(!s.zero_quota("us-west-2", "trn1.32xlarge"));
        assert!(!s.zero_quota("us-east-1", "trn2.48xlarge"));

        let region = |extra: &str| Scenario::parse(&format!("[[regions]]\nname = \"us-west-2\"\n{extra}"));
        assert!(region("sells = []").is_ok());
        let e = region("sells = [\"m9.fake\"]").unwrap_err();
        assert!(e.contains("regions[0] (us-west-2): sells \"m9.fake\""), "{e}");
        let e = region("zero_quota_families = [\"trn2.48xlarge\"]").unwrap_err();
        assert!(e.contains("is not an instance family"), "{e}");
        assert!(region("zero_quota_families = [\"\"]").is_err());
        assert!(region("zero_quota_families = \"trn2\"").is_err());
        // A line for a type its region's sells list leaves out contradicts it.
        let e = region(
            "sells = [\"p5.48xlarge\"]\n[[market]]\nregion = \"us-west-2\"\ninstance_type = \"p4d.24xlarge\"\nprice = [{ from = \"2026-12-01T00:00:00Z\", usd_per_accelerator_hour = \"1\" }]",
        )
        .unwrap_err();
        assert!(e.contains("sells list does not include p4d.24xlarge"), "{e}");
    }

    #[test]
    fn zone_types_and_opted_in_zones() {
        let line = |extra: &str| {
            Scenario::parse(&format!(
                "[[regions]]\nname = \"us-east-1\"\nopted_in_zones = [\"us-east-1-dfw-2a\"]\n[[market]]\nregion = \"us-east-1\"\ninstance_type = \"p6-b200.48xlarge\"\nprice = [{{ from = \"2026-12-01T00:00:00Z\", usd_per_accelerator_hour = \"1\" }}]\n{extra}"
            ))
        };
        assert_eq!(line("").unwrap().market[0].zone_type, ZoneType::AvailabilityZone);
        let s = line("zone_type = \"local-zone\"\nazs = [\"us-east-1-dfw-2a\"]").unwrap();
        assert_eq!(s.market[0].zone_type, ZoneType::LocalZone);
        assert_eq!(s.market[0].zone_type.as_str(), "local-zone");
        assert!(s.opted_in("us-east-1", "us-east-1-dfw-2a"));
        assert!(!s.opted_in("us-east-1", "us-east-1-mia-2a"));
        assert!(!s.opted_in("us-west-2", "us-east-1-dfw-2a"));
        let e = line("zone_type = \"wavelength-zone\"").unwrap_err();
        assert!(e.contains("local-zone"), "{e}");
        assert!(Scenario::parse("[[regions]]\nname = \"x\"\nopted_in_zones = [\"\"]").is_err());
    }

    #[test]
    fn answer_shape_keys_default_from_the_evidence() {
        let b = Scenario::parse("").unwrap().behaviour;
        assert_eq!((b.max_offerings_per_answer, b.same_day_offerings), (6, true));
        let b = Scenario::parse("[behaviour]\nmax_offerings_per_answer = 0\nsame_day_offerings = false").unwrap();
        assert_eq!((b.behaviour.max_offerings_per_answer, b.behaviour.same_day_offerings), (0, false));
        for bad in ["max_offerings_per_answer = -1", "max_offerings_per_answer = 2.5", "same_day_offerings = \"yes\""] {
            let e = Scenario::parse(&format!("[behaviour]\n{bad}")).unwrap_err();
            assert!(e.starts_with("scenario: "), "{bad}: {e}");
        }
    }

    #[test]
    fn payment_delay_in_minutes_by_default_and_hours_when_given() {
        let d = b("").unwrap();
        assert_eq!((d.payment_delay_minutes, d.payment_delay_hours), (5.0, None));
        assert_eq!(d.payment_delay(), 5.0 / 60.0, "5 minutes");
        assert_eq!(b("payment_delay_minutes = 40").unwrap().payment_delay(), 40.0 / 60.0);
        assert_eq!(b("payment_delay_hours = 3").unwrap().payment_delay(), 3.0);
        // An explicit payment_delay_hours wins over the minutes.
        assert_eq!(b("payment_delay_hours = 3\npayment_delay_minutes = 10").unwrap().payment_delay(), 3.0);
        assert_eq!(b("payment_delay_hours = 0.0").unwrap().payment_delay(), 0.0);
        for bad in [
            "payment_delay_minutes = -1",
            "payment_delay_minutes = nan",
            "payment_delay_minutes = \"5\"",
            "payment_delay_hours = -0.5",
            "payment_delay_hours = inf",
        ] {
            assert!(b(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_before_start_readings() {
        assert_eq!(b("").unwrap().counts_before_start, CountsBeforeStart::Zero);
        assert_eq!(b("counts_before_start = \"zero\"").unwrap().counts_before_start, CountsBeforeStart::Zero);
        assert_eq!(b("counts_before_start = \"full\"").unwrap().counts_before_start, CountsBeforeStart::Full);
        for bad in ["counts_before_start = \"Zero\"", "counts_before_start = \"none\"", "counts_before_start = 0"] {
            assert!(b(bad).is_err(), "{bad}");
        }
        let json = serde_json::to_value(b("counts_before_start = \"full\"").unwrap()).unwrap();
        assert_eq!(json["counts_before_start"], "full");
    }

    #[test]
    fn stopping_minutes_default_and_bounds() {
        assert_eq!(b("").unwrap().stopping_minutes, DEFAULT_STOPPING_MINUTES);
        assert_eq!(b("stopping_minutes = 0").unwrap().stopping_minutes, 0);
        assert_eq!(b("stopping_minutes = 60").unwrap().stopping_minutes, 60);
        assert!(b("stopping_minutes = 61").unwrap_err().contains("stopping_minutes must be within 0..=60"));
        for bad in ["stopping_minutes = -1", "stopping_minutes = 2.5", "stopping_minutes = \"5\""] {
            assert!(b(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn stopping_in_usage_readings() {
        assert_eq!(b("").unwrap().stopping_in_usage, StoppingInUsage::Counted);
        assert_eq!(b("stopping_in_usage = \"not_counted\"").unwrap().stopping_in_usage, StoppingInUsage::NotCounted);
        assert_eq!(b("stopping_in_usage = \"counted\"").unwrap().stopping_in_usage, StoppingInUsage::Counted);
        for bad in ["stopping_in_usage = \"not-counted\"", "stopping_in_usage = true"] {
            assert!(b(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unavailable_means_readings() {
        assert_eq!(b("").unwrap().unavailable_means, UnavailableMeans::InUse);
        assert_eq!(b("unavailable_means = \"failed\"").unwrap().unavailable_means, UnavailableMeans::Failed);
        assert_eq!(b("unavailable_means = \"in_use\"").unwrap().unavailable_means, UnavailableMeans::InUse);
        for bad in ["unavailable_means = \"in-use\"", "unavailable_means = \"used\"", "unavailable_means = 1"] {
            assert!(b(bad).is_err(), "{bad}");
        }
        let json = serde_json::to_value(b("unavailable_means = \"failed\"").unwrap()).unwrap();
        assert_eq!(json["unavailable_means"], "failed");
    }

    #[test]
    fn offering_id_readings() {
        let d = b("").unwrap();
        assert_eq!((d.offering_ids, d.offering_id_ttl_secs), (OfferingIds::Stable, 300));
        let p = b("offering_ids = \"per_answer\"\noffering_id_ttl_secs = 60").unwrap();
        assert_eq!((p.offering_ids, p.offering_id_ttl_secs), (OfferingIds::PerAnswer, 60));
        assert_eq!(serde_json::to_value(&p).unwrap()["offering_ids"], "per_answer");
        for bad in [
            "offering_ids = \"per-answer\"",
            "offering_ids = true",
            "offering_id_ttl_secs = 0",
            "offering_id_ttl_secs = -5",
            "offering_id_ttl_secs = 4838401",
        ] {
            assert!(b(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn offering_ids_across_accounts_readings() {
        assert_eq!(b("").unwrap().offering_ids_across_accounts, OfferingIdsAcrossAccounts::Shared);
        let shared = b("offering_ids_across_accounts = \"shared\"").unwrap();
        assert_eq!(shared.offering_ids_across_accounts, OfferingIdsAcrossAccounts::Shared);
        let per = b("offering_ids_across_accounts = \"per_account\"\noffering_ids = \"per_answer\"").unwrap();
        assert_eq!(
            (per.offering_ids_across_accounts, per.offering_ids),
            (OfferingIdsAcrossAccounts::PerAccount, OfferingIds::PerAnswer)
        );
        let json = serde_json::to_value(&per).unwrap();
        assert_eq!(json["offering_ids_across_accounts"], "per_account");
        assert_eq!(serde_json::to_value(&shared).unwrap()["offering_ids_across_accounts"], "shared");
        // What it serializes to reads back (the control API merges over the serialized behaviour).
        assert_eq!(serde_json::from_value::<Behaviour>(json).unwrap(), per);
        for bad in ["per-account", "PerAccount", "Shared", "per_answer", ""] {
            let e = b(&format!("offering_ids_across_accounts = {bad:?}")).unwrap_err();
            assert!(
                e.contains(&format!("offering_ids_across_accounts must be \"shared\" or \"per_account\", got {bad:?}")),
                "{bad}: {e}"
            );
        }
        for bad in ["offering_ids_across_accounts = true", "offering_ids_across_accounts = 1"] {
            let e = b(bad).unwrap_err();
            assert!(e.contains("offering_ids_across_accounts to be \"shared\" or \"per_account\""), "{bad}: {e}");
        }
    }

    #[test]
    fn ultraserver_search_readings() {
        assert_eq!(b("").unwrap().ultraserver_search, UltraserverSearch::InstanceTypeRequired);
        let only = b("ultraserver_search = \"ultraserver_only\"").unwrap();
        assert_eq!(only.ultraserver_search, UltraserverSearch::UltraserverOnly);
        assert_eq!(serde_json::to_value(&only).unwrap()["ultraserver_search"], "ultraserver_only");
        assert!(b("ultraserver_search = \"instance_type_required\"").is_ok());
        for bad in ["ultraserver_search = \"required\"", "ultraserver_search = false"] {
            assert!(b(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn failed_payments_stay_visible_an_hour_by_default() {
        assert_eq!(b("").unwrap().failed_payment_visible_minutes, 60);
        assert_eq!(b("failed_payment_visible_minutes = 0").unwrap().failed_payment_visible_minutes, 0);
        assert_eq!(b("failed_payment_visible_minutes = 86400").unwrap().failed_payment_visible_minutes, 86400);
        for bad in ["failed_payment_visible_minutes = -1", "failed_payment_visible_minutes = 1.5"] {
            assert!(b(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn describe_limit_spellings() {
        let limit = |text: &str| Scenario::parse(&format!("[behaviour]\n{text}")).map(|s| s.behaviour.describe_limit);
        assert_eq!(limit("").unwrap(), Some(DescribeLimit { burst: 2, refill_secs: 4.0 }), "on by default");
        assert_eq!(limit("describe_limit = false").unwrap(), None);
        assert_eq!(limit("describe_limit = true").unwrap(), Some(DescribeLimit::default()));
        assert_eq!(
            limit("describe_limit = { burst = 3, refill_secs = 2.5 }").unwrap(),
            Some(DescribeLimit { burst: 3, refill_secs: 2.5 })
        );
        assert_eq!(
            limit("describe_limit = { burst = 5 }").unwrap(),
            Some(DescribeLimit { burst: 5, refill_secs: 4.0 })
        );
        for bad in [
            "describe_limit = { burst = 0 }",
            "describe_limit = { refill_secs = 0.0 }",
            "describe_limit = { refill_secs = -1.0 }",
            "describe_limit = { burst = 2, every = 3 }",
            "describe_limit = \"off\"",
            "describe_limit = 4",
            "describe_limit_other_callers_per_min = -1.0",
            "describe_limit_other_callers_per_min = nan",
        ] {
            assert!(limit(bad).is_err(), "{bad}");
        }
        let e = limit("describe_limit = \"off\"").unwrap_err();
        assert!(e.contains("false or null (off)"), "{e}");
        let e = limit("describe_limit = { burst = 0 }").unwrap_err();
        assert!(e.contains("describe_limit needs burst >= 1"), "{e}");
        let s = Scenario::parse("[behaviour]\ndescribe_limit_other_callers_per_min = 1.5").unwrap();
        assert_eq!(s.behaviour.describe_limit_other_callers_per_min, 1.5);
    }

    #[test]
    fn describe_limit_others_parse_with_their_defaults() {
        let others = |text: &str| {
            Scenario::parse(&format!("[behaviour]\ndescribe_limit_others = {text}"))
                .map(|s| s.behaviour.describe_limit_others)
        };
        assert!(Scenario::parse("").unwrap().behaviour.describe_limit_others.is_empty(), "none by default");
        let o = others(
            r#"[ { name = "console", calls = 10, over_secs = 120, every_secs = 1800 },
                 { name = "notebook", calls = 1, every_secs = 20, offset_secs = 5.5 } ]"#,
        )
        .unwrap();
        assert_eq!(
            o,
            [
                OtherCaller {
                    name: "console".into(),
                    calls: 10,
                    over_secs: 120.0,
                    every_secs: 1800.0,
                    offset_secs: 0.0
                },
                OtherCaller { name: "notebook".into(), calls: 1, over_secs: 0.0, every_secs: 20.0, offset_secs: 5.5 },
            ]
        );
        let json = serde_json::to_value(
            Scenario::parse("[behaviour]\ndescribe_limit_others = [{ name = \"n\", calls = 1, every_secs = 20 }]")
                .unwrap()
                .behaviour,
        )
        .unwrap();
        assert_eq!(
            json["describe_limit_others"],
            serde_json::json!([{"name": "n", "calls": 1, "over_secs": 0.0, "every_secs": 20.0, "offset_secs": 0.0}])
        );
    }

    #[test]
    fn iam_denials_parse_and_are_validated() {
        let denials = |text: &str| {
            Scenario::parse(&format!("[behaviour]\niam_denials = {text}")).map(|s| s.behaviour.iam_denials)
        };
        assert!(Scenario::parse("").unwrap().behaviour.iam_denials.is_empty(), "none by default");
        let d = denials(
            r#"[ { access_key = "ASIASCAN", action = "PurchaseCapacityBlock", regions = ["us-east-1", "us-west-2"] },
                 { access_key = "ASIATRACK", action = "DescribeCapacityBlockOfferings" } ]"#,
        )
        .unwrap();
        assert_eq!(
            d,
            [
                IamDenial {
                    access_key: "ASIASCAN".into(),
                    action: "PurchaseCapacityBlock".into(),
                    regions: vec!["us-east-1".into(), "us-west-2".into()]
                },
                IamDenial {
                    access_key: "ASIATRACK".into(),
                    action: "DescribeCapacityBlockOfferings".into(),
                    regions: vec![]
                },
            ]
        );
        let b = Behaviour { iam_denials: d, ..Behaviour::default() };
        assert!(b.denies("ASIASCAN", "PurchaseCapacityBlock", "us-west-2"));
        assert!(!b.denies("ASIASCAN", "PurchaseCapacityBlock", "eu-west-1"), "a region not listed");
        assert!(!b.denies("ASIASCAN", "DescribeCapacityBlockOfferings", "us-east-1"), "another action");
        assert!(!b.denies("ASIAOTHER", "PurchaseCapacityBlock", "us-east-1"), "another key");
        assert!(b.denies("ASIATRACK", "DescribeCapacityBlockOfferings", "ap-south-2"), "no regions: all");
        assert_eq!(
            serde_json::to_value(&b).unwrap()["iam_denials"][1],
            serde_json::json!({"access_key": "ASIATRACK", "action": "DescribeCapacityBlockOfferings", "regions": []})
        );
        for (bad, want) in [
            (
                r#"[{ access_key = " ", action = "PurchaseCapacityBlock" }]"#,
                "iam_denials[0]: access_key must not be empty",
            ),
            (
                r#"[{ access_key = "K", action = "ec2:PurchaseCapacityBlock" }]"#,
                "iam_denials[0] (K): action \"ec2:PurchaseCapacityBlock\" is not one the simulator answers",
            ),
            (r#"[{ access_key = "K", action = "RunInstances" }]"#, "is not one the simulator answers"),
            (
                r#"[{ access_key = "K", action = "PurchaseCapacityBlock", regions = [""] }]"#,
                "regions entries must be region names",
            ),
            (
                r#"[{ access_key = "K", action = "PurchaseCapacityBlock", region = "us-east-1" }]"#,
                "unknown field `region`",
            ),
            (r#"[{ action = "PurchaseCapacityBlock" }]"#, "missing field `access_key`"),
            (r#"[{ access_key = "K", action = "PurchaseCapacityBlock", regions = "us-east-1" }]"#, "scenario: "),
            (r#"{ access_key = "K", action = "PurchaseCapacityBlock" }"#, "scenario: "),
        ] {
            let e = denials(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e:?} should say {want:?}");
        }
    }

    #[test]
    fn caller_accounts_parse_and_are_validated() {
        let accounts = |text: &str| {
            Scenario::parse(&format!("[behaviour]\ncaller_accounts = {text}")).map(|s| s.behaviour.caller_accounts)
        };
        assert!(Scenario::parse("").unwrap().behaviour.caller_accounts.is_empty(), "none by default");
        let a = accounts(r#"{ "AKIAEXAMPLE1" = "444455556666", ASIAMEMBER = "777788889999" }"#).unwrap();
        assert_eq!(a["AKIAEXAMPLE1"], "444455556666");
        assert_eq!(a["ASIAMEMBER"], "777788889999");
        let json = serde_json::to_value(Behaviour { caller_accounts: a, ..Behaviour::default() }).unwrap();
        assert_eq!(
            json["caller_accounts"],
            serde_json::json!({"AKIAEXAMPLE1": "444455556666", "ASIAMEMBER": "777788889999"})
        );
        for (bad, want) in [
            (r#"{ K = "44445555666" }"#, r#"caller_accounts["K"]: account "44445555666" must be 12 digits"#),
            (r#"{ K = "4444555566667" }"#, "must be 12 digits"),
            (r#"{ K = "44445555666a" }"#, r#"account "44445555666a" must be 12 digits"#),
            (r#"{ K = "" }"#, "must be 12 digits"),
            (r#"{ " " = "444455556666" }"#, "caller_accounts: an access key id must not be empty"),
            (r#"{ K = 444455556666 }"#, "scenario: "),
            (r#"[ "444455556666" ]"#, "scenario: "),
        ] {
            let e = accounts(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e:?} should say {want:?}");
        }
    }

    #[test]
    fn usage_steps_parse_and_are_validated() {
        let line = |usage: &str| {
            format!(
                "[[market]]\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\n\
                 price = [ {{ from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"3.00\" }} ]\n{usage}"
            )
        };
        let s = Scenario::parse(&line(
            "usage = [ { after_start_hours = 1.0, running = 5 }, { after_start_hours = 2.5, running = 0 } ]",
        ))
        .unwrap();
        assert_eq!(
            s.market[0].usage,
            vec![UsageStep { after_start_hours: 1.0, running: 5 }, UsageStep { after_start_hours: 2.5, running: 0 }]
        );
        assert!(Scenario::parse(&line("")).unwrap().market[0].usage.is_empty(), "absent: every instance runs");
        for (bad, want) in [
            ("usage = [ { after_start_hours = -1.0, running = 5 } ]", "usage after_start_hours must be >= 0"),
            ("usage = [ { after_start_hours = nan, running = 5 } ]", "usage after_start_hours must be >= 0"),
            ("usage = [ { after_start_hours = 1.0, running = -1 } ]", "scenario: "),
            ("usage = [ { after_start_hours = 1.0 } ]", "missing field `running`"),
            ("usage = [ { after_start_hours = 1.0, running = 1, idle = 2 } ]", "unknown field `idle`"),
        ] {
            let e = Scenario::parse(&line(bad)).unwrap_err();
            assert!(e.contains(want), "{bad}: {e:?} should say {want:?}");
        }
    }

    #[test]
    fn describe_limit_others_are_validated_by_name() {
        let err = |text: &str| {
            Scenario::parse(&format!("[behaviour]\ndescribe_limit_others = [{text}]")).map(|_| ()).unwrap_err()
        };
        let one = |extra: &str| err(&format!("{{ name = \"console\", calls = 1, every_secs = 20{extra} }}"));
        let cases = [
            (err("{ name = \" \", calls = 1, every_secs = 20 }"), "describe_limit_others[0]: name must not be empty"),
            (
                err("{ name = \"a\", calls = 1, every_secs = 20 }, { name = \"a\", calls = 2, every_secs = 60 }"),
                "describe_limit_others[1] (a): the name is already taken by describe_limit_others[0]",
            ),
            (
                err("{ name = \"console\", calls = 0, every_secs = 20 }"),
                "describe_limit_others[0] (console): calls must be within 1..=10000, got 0",
            ),
            (
                err("{ name = \"console\", calls = 10001, every_secs = 1e9 }"),
                "calls must be within 1..=10000, got 10001",
            ),
            (
                err("{ name = \"console\", calls = 1, every_secs = 0 }"),
                "describe_limit_others[0] (console): every_secs must be > 0, got 0",
            ),
            (err("{ name = \"console\", calls = 1, every_secs = -20 }"), "every_secs must be > 0, got -20"),
            (err("{ name = \"console\", calls = 1, every_secs = nan }"), "every_secs must be > 0, got NaN"),
            (err("{ name = \"console\", calls = 1, every_secs = inf }"), "every_secs must be > 0, got inf"),
            (
                one(", over_secs = 21"),
                "describe_limit_others[0] (console): over_secs must be within 0..=every_secs (20), got 21",
            ),
            (one(", over_secs = -1"), "over_secs must be within 0..=every_secs (20), got -1"),
            (one(", offset_secs = -1"), "describe_limit_others[0] (console): offset_secs must be >= 0, got -1"),
            (one(", offset_secs = inf"), "offset_secs must be >= 0, got inf"),
            (
                err("{ name = \"a\", calls = 50, every_secs = 1 }, { name = \"b\", calls = 51, every_secs = 1 }"),
                "describe_limit_others: together the callers make 101 calls a second, more than 100",
            ),
            // serde's own: the unknown key, a missing key, the wrong type.
            (one(", evry_secs = 2"), "unknown field `evry_secs`"),
            (err("{ name = \"console\", calls = 1 }"), "missing field `every_secs`"),
            (err("{ name = \"console\", calls = -1, every_secs = 20 }"), "scenario: "),
        ];
        for (e, want) in cases {
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
        assert!(Scenario::parse("[behaviour]\ndescribe_limit_others = \"console\"").is_err());
        // Exactly 100 a second together is allowed, and so is over_secs = every_secs.
        let ok = "[behaviour]\ndescribe_limit_others = [{ name = \"a\", calls = 100, over_secs = 1, every_secs = 1 }]";
        assert!(Scenario::parse(ok).is_ok());
    }
}
