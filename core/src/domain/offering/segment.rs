//! Segmented offerings (EC2 API model since 2026-11-17: `CapacityBlockOfferingSegments`): one
//! offering made of up to 10 blocks, each with its own zone, instance type, count and fee,
//! bought in one purchase that makes a reservation per segment. capblock reads one as a single
//! offering of all its instances: one fee (the sum of the segments'), one price per
//! accelerator-hour over every segment, and a rule's limits applied to each segment.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Offering, OfferingError};
use crate::domain::ids::InstanceType;
use crate::domain::money::Money;

/// The API model's limit: up to 10 segments an offering.
pub const MAX_SEGMENTS: usize = 10;

/// A segment as EC2 describes it, before any of it is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawSegment {
    pub instance_type: Option<String>,
    pub availability_zone: Option<String>,
    pub instance_count: Option<i32>,
    pub start_date: Option<DateTime<Utc>>,
    pub end_date: Option<DateTime<Utc>>,
    pub upfront_fee: Option<String>,
    pub currency_code: Option<String>,
    /// "availability-zone" or "local-zone".
    pub zone_type: Option<String>,
}

/// One block of a segmented offering, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferingSegment {
    pub availability_zone: String,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub fee: Money,
    #[serde(default)]
    pub local_zone: bool,
}

/// `offering` with its segments read: the total of their instances, the sum of their fees (which
/// must be the offering's own fee, when EC2 gives one that differs the offering is not read: its
/// price is not known), its type and zone the first segment's, in a Local Zone when any segment
/// is. A segment on another schedule than the offering's is not read either: capblock prices,
/// tracks and reminds a purchase on one schedule (the model allows each segment its own).
pub(super) fn with_segments(mut offering: Offering, raw: Vec<RawSegment>) -> Result<Offering, OfferingError> {
    if raw.is_empty() {
        return Ok(offering);
    }
    let id = offering.id.clone();
    let bad = |index: usize, problem: String| OfferingError::Segment { id: id.clone(), index: index + 1, problem };
    if raw.len() > MAX_SEGMENTS {
        return Err(bad(MAX_SEGMENTS, format!("{} segments, more than the {MAX_SEGMENTS} EC2 allows", raw.len())));
    }
    if offering.ultraserver {
        return Err(bad(0, "an UltraServer offering in segments is not one capblock can read".into()));
    }
    let mut segments = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let seg = read(&offering, r).map_err(|problem| bad(i, problem))?;
        segments.push(seg);
    }
    let mut total = 0u32;
    let mut sum = Money::zero(offering.fee.currency());
    for (i, s) in segments.iter().enumerate() {
        total = total.checked_add(s.instance_count).ok_or_else(|| bad(i, "too many instances".into()))?;
        sum = sum.checked_add(&s.fee).map_err(|e| bad(i, e.to_string()))?;
    }
    if sum.amount() != offering.fee.amount() {
        return Err(bad(0, format!("the segments' fees add up to {sum}, the offering's is {}", offering.fee)));
    }
    let first = &segments[0];
    offering.instance_type = first.instance_type.clone();
    offering.availability_zone = first.availability_zone.clone();
    offering.instance_count = total;
    offering.local_zone |= segments.iter().any(|s| s.local_zone);
    offering.segments = segments;
    Ok(offering)
}

fn read(offering: &Offering, r: RawSegment) -> Result<OfferingSegment, String> {
    let instance_type: InstanceType =
        r.instance_type.as_deref().ok_or("no InstanceType")?.parse().map_err(|e| format!("{e}"))?;
    let availability_zone = r.availability_zone.filter(|z| !z.is_empty()).ok_or("no AvailabilityZone")?;
    let count = r.instance_count.ok_or("no InstanceCount")?;
    let instance_count =
        u32::try_from(count).ok().filter(|n| (1..=256).contains(n)).ok_or(format!("InstanceCount {count}"))?;
    let (start, end) = (r.start_date.unwrap_or(offering.start), r.end_date.unwrap_or(offering.end));
    if (start, end) != (offering.start, offering.end) {
        return Err(format!("its schedule ({start} to {end}) is not the offering's"));
    }
    let currency = r.currency_code.unwrap_or_else(|| offering.fee.currency().to_string());
    let fee = Money::parse(r.upfront_fee.as_deref().ok_or("no UpfrontFee")?, &currency).map_err(|e| e.to_string())?;
    if fee.currency() != offering.fee.currency() {
        return Err(format!("priced in {}, the offering in {}", fee.currency(), offering.fee.currency()));
    }
    Ok(OfferingSegment {
        availability_zone,
        instance_type,
        instance_count,
        fee,
        local_zone: r.zone_type.as_deref() == Some("local-zone"),
    })
}

impl Offering {
    /// The blocks a purchase of this offering makes, as (type, zone, instances): its segments,
    /// or the offering itself.
    pub fn blocks(&self) -> Vec<(&InstanceType, &str, u32)> {
        if self.segments.is_empty() {
            return vec![(&self.instance_type, self.availability_zone.as_str(), self.instance_count)];
        }
        self.segments.iter().map(|s| (&s.instance_type, s.availability_zone.as_str(), s.instance_count)).collect()
    }

    /// The segment a reservation of this offering's purchase is, by its type, zone and count;
    /// `None` for an offering of one block or a reservation that is none of them.
    pub fn segment_of(&self, instance_type: &InstanceType, zone: &str, count: u32) -> Option<&OfferingSegment> {
        self.segments
            .iter()
            .find(|s| s.instance_type == *instance_type && s.availability_zone == zone && s.instance_count == count)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};
    use rust_decimal_macros::dec;

    use super::*;
    use crate::domain::catalog::AcceleratorCatalog;
    use crate::domain::decision::{Headroom, PassedOver, decide};
    use crate::domain::offering::RawOffering;
    use crate::domain::rule::Rule;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
    }

    fn start() -> DateTime<Utc> {
        now() + Duration::days(2) + Duration::minutes(11 * 60 + 30)
    }

    fn seg(instance_type: &str, zone: &str, count: i32, fee: &str) -> RawSegment {
        RawSegment {
            instance_type: Some(instance_type.into()),
            availability_zone: Some(zone.into()),
            instance_count: Some(count),
            start_date: Some(start()),
            end_date: Some(start() + Duration::days(1)),
            upfront_fee: Some(fee.into()),
            currency_code: Some("USD".into()),
            zone_type: Some("availability-zone".into()),
        }
    }

    /// 2 p5 in us-east-1a and 1 p5en in us-east-1b for a day at 2.50 USD per GPU-hour: 960 and
    /// 480, 1440 in all, as EC2 describes it (the top level the first segment's, the fee the
    /// total).
    fn raw(segments: Vec<RawSegment>) -> RawOffering {
        RawOffering {
            offering_id: Some("cb-0123456789abcdef0".into()),
            instance_type: Some("p5.48xlarge".into()),
            availability_zone: Some("us-east-1a".into()),
            instance_count: Some(2),
            start_date: Some(start()),
            end_date: Some(start() + Duration::days(1)),
            duration_hours: Some(24),
            duration_minutes: Some(0),
            upfront_fee: Some("1440.00".into()),
            currency_code: Some("USD".into()),
            zone_type: Some("availability-zone".into()),
            segments,
            ..RawOffering::default()
        }
    }

    fn two() -> Vec<RawSegment> {
        vec![seg("p5.48xlarge", "us-east-1a", 2, "960.00"), seg("p5en.48xlarge", "us-east-1b", 1, "480.00")]
    }

    fn parse(raw: RawOffering) -> Result<Offering, OfferingError> {
        Offering::parse(&"us-east-1".parse().unwrap(), raw)
    }

    fn rule(types: &str, counts: &str) -> Rule {
        let text = format!(
            "id = \"r\"\nregions = [\"us-east-1\"]\ninstance_types = {types}\ninstance_counts = {counts}\n\
             durations_days = [1]\nmax_price_per_accelerator_hour = \"3.00\"\nmonthly_budget = \"10000\"\n\
             start_window = {{ earliest_in_days = 1, latest_in_days = 10 }}\n"
        );
        Rule::from_toml(&text, now()).unwrap()
    }

    fn headroom() -> Headroom {
        Headroom(Money::usd(dec!(10000)).unwrap())
    }

    #[test]
    fn a_segmented_offering_is_all_its_instances_at_one_fee() {
        let o = parse(raw(two())).unwrap();
        assert_eq!((o.instance_count, o.fee.amount(), o.segments.len()), (3, dec!(1440.00), 2));
        // 1440 over 3 instances x 8 GPUs x 24 h: 2.50, not the 7.50 of the top level alone.
        assert_eq!(o.price_per_accelerator_hour(8).unwrap().per_unit, dec!(2.5));
        assert_ne!(o.block_key(), parse(raw(vec![])).unwrap().block_key(), "its segments are part of the block");
        let blocks: Vec<_> = o.blocks().into_iter().map(|(t, z, n)| format!("{n}x{t}@{z}")).collect();
        assert_eq!(blocks, ["2xp5.48xlarge@us-east-1a", "1xp5en.48xlarge@us-east-1b"]);
    }

    #[test]
    fn a_segmented_offering_capblock_cannot_price_is_not_read() {
        let mut r = raw(two());
        r.upfront_fee = Some("960.00".into());
        let e = parse(r).unwrap_err().to_string();
        assert!(e.contains("the segments' fees add up to 1440.00 USD, the offering's is 960.00 USD"), "{e}");
        let mut later = two();
        later[1].start_date = Some(start() + Duration::days(1));
        later[1].end_date = Some(start() + Duration::days(2));
        let e = parse(raw(later)).unwrap_err().to_string();
        assert!(e.contains("segment 2: its schedule"), "{e}");
        let mut unnamed = two();
        unnamed[1].instance_type = None;
        assert!(parse(raw(unnamed)).unwrap_err().to_string().contains("segment 2: no InstanceType"));
        let eleven = (0..11).map(|_| seg("p5.48xlarge", "us-east-1a", 1, "1.00")).collect();
        assert!(parse(raw(eleven)).unwrap_err().to_string().contains("more than the 10"));
    }

    #[test]
    fn a_rule_buys_a_segmented_offering_only_when_every_segment_is_its_own() {
        let cat = AcceleratorCatalog::new();
        let o = parse(raw(two())).unwrap();
        let both = rule("[\"p5.48xlarge\", \"p5en.48xlarge\"]", "[3]");
        let d = decide(&both, std::slice::from_ref(&o), &cat, headroom(), now());
        assert_eq!(d.chosen.map(|p| p.per_accelerator_hour.per_unit), Some(dec!(2.5)));
        // One segment of a type the rule does not name, or a total it does not ask for.
        for other in [rule("[\"p5.48xlarge\"]", "[3]"), rule("[\"p5.48xlarge\", \"p5en.48xlarge\"]", "[2]")] {
            let d = decide(&other, std::slice::from_ref(&o), &cat, headroom(), now());
            assert_eq!(d.passed_over, vec![(o.id.clone(), PassedOver::NotInRule)]);
        }
        // One segment in a Local Zone: only for a rule that allows them.
        let mut local = two();
        local[1].zone_type = Some("local-zone".into());
        let lz = parse(raw(local)).unwrap();
        let d = decide(&both, std::slice::from_ref(&lz), &cat, headroom(), now());
        assert_eq!(d.passed_over, vec![(lz.id.clone(), PassedOver::LocalZone)]);
    }

    #[test]
    fn segments_of_different_accelerator_counts_are_not_priced() {
        let mut cat = AcceleratorCatalog::new();
        cat.learn("p5en.48xlarge".parse().unwrap(), 16);
        let o = parse(raw(two())).unwrap();
        let d = decide(
            &rule("[\"p5.48xlarge\", \"p5en.48xlarge\"]", "[3]"),
            std::slice::from_ref(&o),
            &cat,
            headroom(),
            now(),
        );
        assert_eq!(d.passed_over, vec![(o.id, PassedOver::UnknownAccelerators)]);
    }
}
