//! Capacity Block offerings and their prices.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::money::{Money, MoneyError, Rate};
use super::names::{InstanceType, NameError, Region};

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
    pub upfront_fee: Option<String>,
    pub currency_code: Option<String>,
    pub ultraserver_type: Option<String>,
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
    Name { id: String, source: NameError },
    #[error("offering {id}: end {end} is not after start {start}")]
    EndBeforeStart { id: String, start: DateTime<Utc>, end: DateTime<Utc> },
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
    pub duration_hours: u32,
    pub fee: Money,
    /// UltraServer offerings lose their instances 60 minutes before the end, not 30.
    pub ultraserver: bool,
}

impl Offering {
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
        // EC2 sends the duration; when it does not, the dates tell it.
        let hours = match raw.duration_hours {
            Some(h) => h,
            None => i32::try_from((end - start).num_hours()).unwrap_or(0),
        };
        let duration_hours = u32::try_from(hours).ok().filter(|h| (1..=182 * 24).contains(h)).ok_or_else(|| {
            OfferingError::OutOfRange { id: id.clone(), field: "CapacityBlockDurationHours", value: hours.to_string() }
        })?;
        let fee_text = raw.upfront_fee.ok_or_else(|| missing("UpfrontFee"))?;
        let currency = raw.currency_code.ok_or_else(|| missing("CurrencyCode"))?;
        let fee = Money::parse(&fee_text, &currency).map_err(|source| OfferingError::Fee { id: id.clone(), source })?;
        Ok(Offering {
            id,
            region: region.clone(),
            availability_zone,
            instance_type,
            instance_count,
            start,
            end,
            duration_hours,
            fee,
            ultraserver: raw.ultraserver_type.is_some_and(|t| !t.is_empty()),
        })
    }

    pub fn instance_hours(&self) -> Decimal {
        Decimal::from(self.instance_count) * Decimal::from(self.duration_hours)
    }

    pub fn price_per_instance_hour(&self) -> Rate {
        self.fee.per(self.instance_hours()).expect("count and hours are at least 1")
    }

    /// `UpfrontFee / (count x accelerators per instance x hours)`; `None` for a zero count.
    pub fn price_per_accelerator_hour(&self, accelerators_per_instance: u32) -> Option<Rate> {
        self.fee.per(self.instance_hours() * Decimal::from(accelerators_per_instance))
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
            upfront_fee: Some(fee.into()),
            currency_code: Some(currency.into()),
            ultraserver_type: None,
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
        assert_eq!(Offering::parse(&region(), r).unwrap().duration_hours, 48);
    }
}
