//! Capacity Block offerings and their prices.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::ids::{IdError, InstanceType, Region};
use super::money::{Money, MoneyError, Rate};
use super::ultraserver::{UltraServerType, UltraServers};

mod segment;
pub use segment::{OfferingSegment, RawSegment};

/// An offering as EC2 describes it, field by field, before any of it is trusted. The EC2
/// adapter fills this from the SDK's `CapacityBlockOffering`; `Offering::parse` checks it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawOffering {
    pub offering_id: Option<String>,
    pub instance_type: Option<String>,
    pub availability_zone: Option<String>,
    pub instance_count: Option<i32>,
    pub start_date: Option<DateTime<Utc>>,
    pub end_date: Option<DateTime<Utc>>,
    pub duration_hours: Option<i32>,
    /// CapacityBlockDurationMinutes: the minutes past `duration_hours`. Blocks that start the
    /// same day end at 11:30 UTC like every block, so they come as closest matches such as
    /// 6 h 35 min (04:55 to 11:30).
    pub duration_minutes: Option<i32>,
    pub upfront_fee: Option<String>,
    pub currency_code: Option<String>,
    pub ultraserver_type: Option<String>,
    #[serde(default)]
    pub ultraserver_count: Option<i32>,
    /// "availability-zone" or "local-zone".
    pub zone_type: Option<String>,
    /// CapacityBlockOfferingSegments (the API model since 2026-11-17; read ahead of the SDK):
    /// empty for an offering of one block.
    #[serde(default)]
    pub segments: Vec<RawSegment>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OfferingError {
    #[error("offering {id} has no {field}")]
    Missing { id: String, field: &'static str },
    #[error("offering {id}: {field} {value} is out of range")]
    OutOfRange { id: String, field: &'static str, value: String },
    #[error("offering {id}: fee: {source}")]
    Fee { id: String, source: MoneyError },
    #[error("offering {id}: {source}")]
    Name { id: String, source: IdError },
    #[error("offering {id}: end {end} is not after start {start}")]
    EndBeforeStart { id: String, start: DateTime<Utc>, end: DateTime<Utc> },
    #[error("offering {id}: segment {index}: {problem}")]
    Segment { id: String, index: usize, problem: String },
}

/// A validated offering: everything the decision needs, in domain types.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offering {
    pub id: String,
    pub region: Region,
    pub availability_zone: String,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Whole hours of the block; `duration_minutes` holds the rest (0-59).
    pub duration_hours: u32,
    /// Minutes past `duration_hours` (EC2's CapacityBlockDurationMinutes). Absent in records
    /// written before capblock read it: those blocks were whole hours.
    #[serde(default)]
    pub duration_minutes: u32,
    pub fee: Money,
    /// UltraServer offerings lose their instances 60 minutes before the end, not 30.
    pub ultraserver: bool,
    /// Which UltraServers and how many, when EC2 named a type capblock knows (absent in records
    /// written before capblock read it). `ultraserver` holds even for an unknown type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ultraservers: Option<UltraServers>,
    /// In a Local Zone (ZoneType "local-zone"): the account must be opted into the zone to
    /// launch there, so only rules that allow Local Zones buy these.
    #[serde(default)]
    pub local_zone: bool,
    /// A segmented offering's blocks, each bought as a reservation of its own (one purchase,
    /// one fee: the sum of theirs). Empty for one block. For a segmented offering
    /// `instance_count` is the total of the segments' and `fee` the sum of their fees;
    /// `instance_type` and `availability_zone` are the first segment's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<OfferingSegment>,
}

impl Offering {
    /// The block an offering sells, as text: where, what, how many, when and for how much,
    /// every field exactly (the fee normalized, so 576 and 576.00 are one fee). Records that
    /// must hold once per block whatever id EC2 gives it (a dry run's "would buy", an approval
    /// request) are keyed by it, and `same_block` is its equality.
    pub fn block_key(&self) -> String {
        let mut ultra = self.ultraservers.map_or_else(|| "-".to_string(), |u| u.to_string());
        // A segmented offering is its segments: two with the same first segment differ.
        for s in &self.segments {
            ultra.push_str(&format!("+{}x{}@{}", s.instance_count, s.instance_type, s.availability_zone));
        }
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        format!(
            "{}|{}|{}x{}|{ultra}|{}|{}|{} {}",
            self.region,
            self.availability_zone,
            self.instance_count,
            self.instance_type,
            at(self.start),
            at(self.end),
            self.fee.amount().normalize(),
            self.fee.currency()
        )
    }

    /// Whether `other` offers the same block. Nothing documents that EC2 repeats an offering's
    /// id from one answer to the next (it has an `InvalidCapacityBlockOfferingIdExpired` error),
    /// so an offering seen again is known by what it is, not by its id.
    pub fn same_block(&self, other: &Offering) -> bool {
        self.block_key() == other.block_key()
    }

    pub fn parse(region: &Region, raw: RawOffering) -> Result<Offering, OfferingError> {
        let id = raw.offering_id.clone().unwrap_or_else(|| "<no id>".to_string());
        let missing = |field| OfferingError::Missing { id: id.clone(), field };
        if raw.offering_id.as_deref().is_none_or(str::is_empty) {
            return Err(missing("CapacityBlockOfferingId"));
        }
        let instance_type = raw
            .instance_type
            .as_deref()
            .ok_or_else(|| missing("InstanceType"))?
            .parse()
            .map_err(|source| OfferingError::Name { id: id.clone(), source })?;
        let availability_zone = raw.availability_zone.ok_or_else(|| missing("AvailabilityZone"))?;
        let count = raw.instance_count.ok_or_else(|| missing("InstanceCount"))?;
        let instance_count = u32::try_from(count).ok().filter(|n| (1..=256).contains(n)).ok_or_else(|| {
            OfferingError::OutOfRange { id: id.clone(), field: "InstanceCount", value: count.to_string() }
        })?;
        let start = raw.start_date.ok_or_else(|| missing("StartDate"))?;
        let end = raw.end_date.ok_or_else(|| missing("EndDate"))?;
        if end <= start {
            return Err(OfferingError::EndBeforeStart { id, start, end });
        }
        // EC2 sends the duration in hours plus minutes; when it does not, the dates tell it.
        let from_dates = (end - start).num_minutes();
        let total_minutes = match (raw.duration_hours, raw.duration_minutes) {
            (Some(h), Some(m)) if (0..60).contains(&m) => i64::from(h) * 60 + i64::from(m),
            (Some(_), Some(m)) => {
                return Err(OfferingError::OutOfRange {
                    id: id.clone(),
                    field: "CapacityBlockDurationMinutes",
                    value: m.to_string(),
                });
            }
            // Hours without minutes: the dates carry the minutes if they agree on the hours.
            (Some(h), None) if from_dates / 60 == i64::from(h) => from_dates,
            (Some(h), None) => i64::from(h) * 60,
            (None, _) => from_dates,
        };
        if !(60..=182 * 24 * 60).contains(&total_minutes) {
            return Err(OfferingError::OutOfRange {
                id: id.clone(),
                field: "CapacityBlockDurationHours",
                value: super::duration::minutes(total_minutes),
            });
        }
        let duration_hours = (total_minutes / 60) as u32;
        let duration_minutes = (total_minutes % 60) as u32;
        let fee_text = raw.upfront_fee.ok_or_else(|| missing("UpfrontFee"))?;
        let currency = raw.currency_code.ok_or_else(|| missing("CurrencyCode"))?;
        let fee = Money::parse(&fee_text, &currency).map_err(|source| OfferingError::Fee { id: id.clone(), source })?;
        let ultraserver_type = raw.ultraserver_type.filter(|t| !t.is_empty());
        // A count EC2 left out is taken from the instances: they come in whole UltraServers.
        let ultraservers = ultraserver_type.as_deref().and_then(|t| t.parse::<UltraServerType>().ok()).map(|kind| {
            let from_instances = instance_count / kind.instances().max(1);
            let count = raw.ultraserver_count.and_then(|c| u32::try_from(c).ok()).unwrap_or(from_instances);
            UltraServers { kind, count }
        });
        let offering = Offering {
            id,
            region: region.clone(),
            availability_zone,
            instance_type,
            instance_count,
            start,
            end,
            duration_hours,
            duration_minutes,
            fee,
            ultraserver: ultraserver_type.is_some(),
            ultraservers,
            local_zone: raw.zone_type.as_deref() == Some("local-zone"),
            segments: Vec::new(),
        };
        segment::with_segments(offering, raw.segments)
    }

    /// The block's length in minutes: what EC2 charges for, hours and minutes together.
    pub fn total_minutes(&self) -> u32 {
        // Saturating: a stored record is not re-parsed, and a forged length is not worth a panic.
        self.duration_hours.saturating_mul(60).saturating_add(self.duration_minutes)
    }

    /// The block's length in the one duration style (`duration::compact`), to the minute: "7d", "6h 35m", "1d 6h 35m".
    pub fn length_text(&self) -> String {
        super::duration::minutes(i64::from(self.total_minutes()))
    }

    pub fn instance_hours(&self) -> Decimal {
        // u32 x u32 / 60 is far inside Decimal's range: no overflow to check.
        Decimal::from(u64::from(self.instance_count) * u64::from(self.total_minutes())) / Decimal::from(60)
    }

    /// `Offering::parse` makes count and minutes at least 1 and `Money` bounds the fee, so
    /// there is always a price; a forged stored offering (no instances) gets the highest one,
    /// above every threshold, rather than a panic.
    pub fn price_per_instance_hour(&self) -> Rate {
        self.per_unit_hour(1).unwrap_or(Rate { per_unit: Decimal::MAX, currency: self.fee.currency() })
    }

    /// `UpfrontFee / (count x accelerators per instance x hours)`, hours counted to the minute;
    /// `None` for a zero count.
    pub fn price_per_accelerator_hour(&self, accelerators_per_instance: u32) -> Option<Rate> {
        self.per_unit_hour(accelerators_per_instance)
    }

    /// fee x 60 / unit-minutes: exact for whole-hour blocks, and never rounds a 6 h 35 min
    /// block to 6 or 7 hours. Checked: a stored offering is not re-parsed.
    fn per_unit_hour(&self, units_per_instance: u32) -> Option<Rate> {
        let unit_minutes = Decimal::from(self.instance_count)
            .checked_mul(Decimal::from(units_per_instance))?
            .checked_mul(Decimal::from(self.total_minutes()))?;
        let fee_minutes = self.fee.amount().checked_mul(Decimal::from(60))?;
        Some(Rate { per_unit: fee_minutes.checked_div(unit_minutes)?, currency: self.fee.currency() })
    }
}

/// 1 x p5.48xlarge (8 GPUs) in `{region}a` for the day from `start` at `fee`, for the unit tests
/// of the modules that read offerings and the function crates' handler tests (public for them,
/// as `contract::fixtures` is; nothing in production builds an offering but `Offering::parse`).
pub fn example(id: &str, region: &str, start: DateTime<Utc>, fee: Money) -> Offering {
    Offering {
        id: id.into(),
        region: region.parse().expect("a valid region"),
        availability_zone: format!("{region}a"),
        instance_type: "p5.48xlarge".parse().expect("a valid type"),
        instance_count: 1,
        start,
        end: start + chrono::Duration::days(1),
        duration_hours: 24,
        duration_minutes: 0,
        fee,
        ultraserver: false,
        ultraservers: None,
        local_zone: false,
        segments: Vec::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::TimeZone;
    use rust_decimal_macros::dec;

    pub(crate) fn raw(fee: &str, currency: &str) -> RawOffering {
        RawOffering {
            offering_id: Some("cb-0123456789abcdef0".into()),
            instance_type: Some("p5.48xlarge".into()),
            availability_zone: Some("us-east-1a".into()),
            instance_count: Some(2),
            start_date: Some(Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap()),
            end_date: Some(Utc.with_ymd_and_hms(2026, 12, 5, 11, 30, 0).unwrap()),
            duration_hours: Some(48),
            duration_minutes: Some(0),
            upfront_fee: Some(fee.into()),
            currency_code: Some(currency.into()),
            ultraserver_type: None,
            ultraserver_count: None,
            zone_type: None,
            segments: Vec::new(),
        }
    }

    fn region() -> Region {
        "us-east-1".parse().unwrap()
    }

    #[test]
    fn prices_per_instance_and_accelerator_hour_exactly() {
        // 2 instances x 48 h x 8 GPUs = 768 accelerator-hours.
        let o = Offering::parse(&region(), raw("2304.00", "USD")).unwrap();
        assert_eq!(o.price_per_instance_hour().per_unit, dec!(24));
        assert_eq!(o.price_per_accelerator_hour(8).unwrap().per_unit, dec!(3));
        let odd = Offering::parse(&region(), raw("12345", "USD")).unwrap();
        assert_eq!(odd.price_per_accelerator_hour(8).unwrap().display(), "16.0742 USD");
        let tiny = Offering::parse(&region(), raw("0.10", "USD")).unwrap();
        assert_eq!(tiny.price_per_instance_hour().per_unit, dec!(0.10) / dec!(96));
        assert!(o.price_per_accelerator_hour(0).is_none());
    }

    /// A stored offering is not re-parsed: one forged with no instances, an endless length
    /// and the largest fee is priced (above every threshold) without a panic.
    #[test]
    fn a_forged_stored_offering_is_priced_without_panicking() {
        let o = Offering::parse(&region(), raw("2304.00", "USD")).unwrap();
        let mut forged = serde_json::to_value(&o).unwrap();
        forged["instance_count"] = 0.into();
        forged["duration_hours"] = u32::MAX.into();
        forged["fee"]["amount"] = Money::MAX_AMOUNT.to_string().into();
        let forged: Offering = serde_json::from_value(forged).unwrap();
        assert_eq!(forged.total_minutes(), u32::MAX);
        assert_eq!(forged.price_per_instance_hour().per_unit, Decimal::MAX);
        assert!(forged.price_per_accelerator_hour(u32::MAX).is_none());
        let one = Offering { instance_count: u32::MAX, ..forged };
        assert!(one.price_per_accelerator_hour(u32::MAX).is_some());
    }

    #[test]
    fn non_usd_currency_is_kept() {
        let o = Offering::parse(&region(), raw("1000", "JPY")).unwrap();
        let r = o.price_per_accelerator_hour(8).unwrap();
        assert_eq!(r.currency.as_str(), "JPY");
    }

    #[test]
    fn missing_and_bad_fields_are_named() {
        let mut r = raw("1", "USD");
        r.upfront_fee = None;
        assert_eq!(
            Offering::parse(&region(), r).unwrap_err().to_string(),
            "offering cb-0123456789abcdef0 has no UpfrontFee"
        );
        let mut r = raw("1", "USD");
        r.instance_count = Some(0);
        assert!(matches!(Offering::parse(&region(), r), Err(OfferingError::OutOfRange { field: "InstanceCount", .. })));
        let mut r = raw("1", "USD");
        r.end_date = r.start_date;
        assert!(matches!(Offering::parse(&region(), r), Err(OfferingError::EndBeforeStart { .. })));
        let r = raw("1.0.0", "USD");
        assert!(matches!(Offering::parse(&region(), r), Err(OfferingError::Fee { .. })));
        let mut r = raw("1", "USD");
        r.offering_id = None;
        assert!(matches!(
            Offering::parse(&region(), r),
            Err(OfferingError::Missing { field: "CapacityBlockOfferingId", .. })
        ));
    }

    #[test]
    fn duration_falls_back_to_dates() {
        let mut r = raw("1", "USD");
        r.duration_hours = None;
        r.duration_minutes = None;
        assert_eq!(Offering::parse(&region(), r).unwrap().duration_hours, 48);
    }

    /// A same-day closest match: 04:55 to 11:30 the next day is 30 h 35 min, and its price per
    /// accelerator-hour counts the 35 minutes.
    #[test]
    fn minutes_count_in_the_price() {
        let mut r = raw("1956.00", "USD");
        r.start_date = Some(Utc.with_ymd_and_hms(2026, 12, 3, 4, 55, 0).unwrap());
        r.end_date = Some(Utc.with_ymd_and_hms(2026, 12, 4, 11, 30, 0).unwrap());
        r.instance_count = Some(1);
        r.duration_hours = Some(30);
        r.duration_minutes = Some(35);
        let o = Offering::parse(&region(), r.clone()).unwrap();
        assert_eq!((o.duration_hours, o.duration_minutes, o.total_minutes()), (30, 35, 1835));
        assert_eq!(o.length_text(), "1d 6h 35m", "the block's true length, in the one duration style");
        // 1956 / (8 x 1835 / 60) = 7.9945...; on whole hours it would have been 8.15.
        let per = o.price_per_accelerator_hour(8).unwrap().per_unit;
        assert_eq!(per * Decimal::from(8) * Decimal::from(1835) / Decimal::from(60), dec!(1956));
        assert_eq!(o.price_per_accelerator_hour(8).unwrap().display(), "7.9946 USD");
        // Minutes missing: the dates tell them when they agree on the hours.
        r.duration_minutes = None;
        assert_eq!(Offering::parse(&region(), r.clone()).unwrap().duration_minutes, 35);
        r.duration_minutes = Some(60);
        assert!(matches!(
            Offering::parse(&region(), r).unwrap_err(),
            OfferingError::OutOfRange { field: "CapacityBlockDurationMinutes", .. }
        ));
    }

    /// 2 x u-trn2x64 = 8 trn2u.48xlarge of 16 chips: the price is over all 128 chips.
    #[test]
    fn ultraserver_offerings_know_their_kind_and_count() {
        let mut r = raw("6144.00", "USD");
        r.instance_type = Some("trn2u.48xlarge".into());
        r.instance_count = Some(8);
        r.duration_hours = Some(24);
        r.end_date = Some(Utc.with_ymd_and_hms(2026, 12, 4, 11, 30, 0).unwrap());
        r.ultraserver_type = Some("u-trn2x64".into());
        r.ultraserver_count = Some(2);
        let o = Offering::parse(&region(), r.clone()).unwrap();
        assert!(o.ultraserver);
        assert_eq!(o.ultraservers.map(|u| (u.kind.as_str(), u.count)), Some(("u-trn2x64", 2)));
        assert_eq!(o.price_per_accelerator_hour(16).unwrap().per_unit, dec!(2));
        // No count: the instances tell it. An unknown type: still an UltraServer, kind unknown.
        r.ultraserver_count = None;
        assert_eq!(Offering::parse(&region(), r.clone()).unwrap().ultraservers.map(|u| u.count), Some(2));
        r.ultraserver_type = Some("u-new-kind".into());
        let o = Offering::parse(&region(), r).unwrap();
        assert!(o.ultraserver && o.ultraservers.is_none());
    }

    /// One block, one key, whatever its id or how its fee is written; anything else about it
    /// makes another block.
    #[test]
    fn the_block_key_is_the_block_whatever_its_id() {
        let a = Offering::parse(&region(), raw("576", "USD")).unwrap();
        let b =
            Offering { id: "cb-0000000000000000a".into(), ..Offering::parse(&region(), raw("576.00", "USD")).unwrap() };
        assert!(a.same_block(&b) && a.block_key() == b.block_key(), "{} / {}", a.block_key(), b.block_key());
        for other in [
            Offering { start: a.start + chrono::Duration::days(1), ..a.clone() },
            Offering { instance_count: 1, ..a.clone() },
            Offering { availability_zone: "us-east-1b".into(), ..a.clone() },
            Offering::parse(&region(), raw("576.01", "USD")).unwrap(),
        ] {
            assert!(!a.same_block(&other), "{}", other.block_key());
        }
    }
}
