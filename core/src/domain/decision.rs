//! The purchase decision: of the offerings seen for a rule, which one (if any) to buy.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::catalog::AcceleratorCatalog;
use super::money::{Money, Rate};
use super::offering::Offering;
use super::rule::Rule;

/// An offering with its price worked out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Priced {
    pub offering: Offering,
    pub accelerators_per_instance: u32,
    pub per_accelerator_hour: Rate,
    pub per_instance_hour: Rate,
}

impl Priced {
    /// A segmented offering is priced over all its segments, which must carry the same
    /// accelerators per instance (the intent keeps one count for the purchase); one that mixes
    /// counts is not priced, so never bought.
    pub fn new(offering: Offering, catalog: &AcceleratorCatalog) -> Option<Priced> {
        let accelerators = catalog.accelerators(&offering.instance_type)?;
        for s in &offering.segments {
            if catalog.accelerators(&s.instance_type)? != accelerators {
                return None;
            }
        }
        Some(Priced {
            per_accelerator_hour: offering.price_per_accelerator_hour(accelerators)?,
            per_instance_hour: offering.price_per_instance_hour(),
            accelerators_per_instance: accelerators,
            offering,
        })
    }
}

/// Why an offering was passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "reason")]
pub enum PassedOver {
    NotInRule,
    /// In a Local Zone, and the rule does not set `local_zones = true`.
    LocalZone,
    UnknownAccelerators,
    OtherCurrency,
    AboveThreshold,
    AboveMaxTotalFee,
    OutsideStartWindow,
    OverBudget,
}

impl PassedOver {
    /// Why, in words, for a person (`capblock buy`).
    pub fn says(&self) -> &'static str {
        match self {
            PassedOver::NotInRule => "it is not what the rule asks for (region, type, count or duration)",
            PassedOver::LocalZone => "it is in a Local Zone and the rule does not set local_zones = true",
            PassedOver::UnknownAccelerators => "its accelerators per instance are unknown",
            PassedOver::OtherCurrency => "it is priced in another currency than the rule's",
            PassedOver::AboveThreshold => "its price per accelerator-hour is above the rule's threshold",
            PassedOver::AboveMaxTotalFee => "its fee is above the rule's max_total_fee",
            PassedOver::OutsideStartWindow => "it starts outside the rule's start window",
            PassedOver::OverBudget => "its fee is more than the budgets have room for",
        }
    }
}

/// What a rule may still spend this period: the smaller of its own and the account's room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headroom(pub Money);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub chosen: Option<Priced>,
    pub eligible: usize,
    pub passed_over: Vec<(String, PassedOver)>,
    /// Every eligible offering, best first (`chosen` is the first): the runners-up for when
    /// the best one was already tried.
    #[serde(skip)]
    pub ranked: Vec<Priced>,
    /// The cheapest offering priced, eligible or not: how far the market is from the rule.
    #[serde(skip)]
    pub cheapest: Option<Priced>,
}

/// Why the offering might not suit the rule, or `None` when it does.
pub fn check(rule: &Rule, p: &Priced, headroom: Headroom, now: DateTime<Utc>) -> Option<PassedOver> {
    let o = &p.offering;
    if !rule.regions.contains(&o.region) || !rule.asks_for(o) || rule.matching_days(o.total_minutes()).is_none() {
        return Some(PassedOver::NotInRule);
    }
    if o.local_zone && !rule.local_zones {
        return Some(PassedOver::LocalZone);
    }
    if o.fee.currency() != rule.currency {
        return Some(PassedOver::OtherCurrency);
    }
    if p.per_accelerator_hour.per_unit > rule.max_price_per_accelerator_hour {
        return Some(PassedOver::AboveThreshold);
    }
    if rule.max_total_fee.is_some_and(|m| o.fee.amount() > m.amount()) {
        return Some(PassedOver::AboveMaxTotalFee);
    }
    let (earliest, latest) = rule.start_window.resolve(now);
    if o.start < earliest || o.start > latest {
        return Some(PassedOver::OutsideStartWindow);
    }
    if o.fee.amount() > headroom.0.amount() || headroom.0.currency() != o.fee.currency() {
        return Some(PassedOver::OverBudget);
    }
    None
}

/// Cheapest per accelerator-hour wins; ties go to the earliest start, then the offering id so
/// the same market always gives the same answer.
pub fn better(a: &Priced, b: &Priced) -> Ordering {
    a.per_accelerator_hour
        .per_unit
        .cmp(&b.per_accelerator_hour.per_unit)
        .then(a.offering.start.cmp(&b.offering.start))
        .then(a.offering.fee.amount().cmp(&b.offering.fee.amount()))
        .then(a.offering.id.cmp(&b.offering.id))
}

/// Picks the offering to buy for `rule` among `offerings`.
pub fn decide(
    rule: &Rule,
    offerings: &[Offering],
    catalog: &AcceleratorCatalog,
    headroom: Headroom,
    now: DateTime<Utc>,
) -> Decision {
    let mut eligible: Vec<Priced> = Vec::new();
    let mut passed_over = Vec::new();
    let mut cheapest: Option<Priced> = None;
    for o in offerings {
        let Some(p) = Priced::new(o.clone(), catalog) else {
            passed_over.push((o.id.clone(), PassedOver::UnknownAccelerators));
            continue;
        };
        // The first of equals, as `min_by` keeps.
        if cheapest.as_ref().is_none_or(|c| better(&p, c) == Ordering::Less) {
            cheapest = Some(p.clone());
        }
        match check(rule, &p, headroom, now) {
            Some(why) => passed_over.push((o.id.clone(), why)),
            None => eligible.push(p),
        }
    }
    eligible.sort_by(better);
    eligible.dedup_by(|a, b| a.offering.id == b.offering.id);
    Decision { eligible: eligible.len(), chosen: eligible.first().cloned(), passed_over, ranked: eligible, cheapest }
}

/// Room left under a limit once `committed` is taken out; never negative.
pub fn room(limit: Money, committed: Money) -> Money {
    // Both are non-negative and bounded (`Money`), so the difference is in range; checked all
    // the same, and an impossible answer is no room at all.
    let left = limit.amount().checked_sub(committed.amount()).unwrap_or(Decimal::ZERO).max(Decimal::ZERO);
    Money::new(left, limit.currency()).unwrap_or(Money::zero(limit.currency()))
}

#[cfg(test)]
mod tests;
