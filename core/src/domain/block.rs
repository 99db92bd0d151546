//! A Capacity Block as capblock holds it (`Block`), and a capacity reservation as EC2 reports it
//! (`Reservation`). Every view the messages and notices need is read from `Block` itself, so a
//! tracked block exists once.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::budget::{Intent, Period, ReleasedHold};
use super::health::{BlockHealth, HealthWatch};
use super::ids::{InstanceType, Region};
use super::lifecycle::{BlockState, LISTING_GRACE, Observed, Transition, payment_deadline, step, termination_time};
use super::money::{Money, Rate};
use super::offering::Offering;
use super::tags::RULE_TAG;
use super::usage::{Span, Usage};

/// A capacity reservation as DescribeCapacityReservations reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub id: String,
    pub arn: Option<String>,
    pub region: Region,
    pub availability_zone: String,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub state: String,
    pub reservation_type: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// CapacityBlockId: the block DescribeCapacityBlocks and DescribeCapacityBlockStatus know
    /// it by (an UltraServer's block, or a group of instances).
    #[serde(default)]
    pub capacity_block_id: Option<String>,
}

impl Reservation {
    pub fn is_capacity_block(&self) -> bool {
        self.reservation_type.as_deref() == Some("capacity-block")
    }
}

/// A block capblock tracks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub reservation_id: String,
    pub region: Region,
    pub availability_zone: String,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub state: BlockState,
    /// None for blocks adopted from the account whose price capblock never saw.
    pub fee: Option<Money>,
    pub accelerators_per_instance: Option<u32>,
    pub purchased_at: DateTime<Utc>,
    pub payment_deadline: Option<DateTime<Utc>>,
    pub rule_id: Option<String>,
    pub intent_id: Option<String>,
    pub ultraserver: bool,
    pub arn: Option<String>,
    /// Budget period the fee was charged to.
    pub period: Option<Period>,
    pub version: u64,
    /// EC2's CapacityBlockId (None in records written before capblock read it).
    #[serde(default)]
    pub capacity_block_id: Option<String>,
    /// The last health capblock announced (None: nothing announced yet), and how many health
    /// changes it announced: the outbox milestone of the next one.
    #[serde(default)]
    pub health: Option<BlockHealth>,
    #[serde(default)]
    pub health_changes: u32,
    /// A rise in failures held back because instances still stopping could explain it
    /// (`domain::health::settle`): when it was first seen.
    #[serde(default)]
    pub health_watch: Option<HealthWatch>,
    /// What the tracker's samples say its instances were used for (`domain::usage`).
    #[serde(default)]
    pub usage: Usage,
}

impl Block {
    /// A block for a reservation capblock did not record: what EC2 says of it, nothing more.
    /// `tagged`: the reservation carries this stack's tags, so it counts against its rule.
    pub fn adopted(r: &Reservation, tagged: bool, now: DateTime<Utc>) -> Block {
        Block {
            reservation_id: r.id.clone(),
            region: r.region.clone(),
            availability_zone: r.availability_zone.clone(),
            instance_type: r.instance_type.clone(),
            instance_count: r.instance_count,
            start: r.start,
            end: r.end,
            state: BlockState::from_ec2(&r.state).unwrap_or(BlockState::PaymentPending),
            fee: None,
            accelerators_per_instance: None,
            // Unknown: the payment deadline cannot be computed, so no payment warnings.
            purchased_at: now.min(r.start),
            payment_deadline: None,
            rule_id: if tagged { r.tags.get(RULE_TAG).cloned() } else { None },
            intent_id: None,
            ultraserver: false,
            arn: r.arn.clone(),
            period: None,
            version: 1,
            capacity_block_id: r.capacity_block_id.clone(),
            health: None,
            health_changes: 0,
            health_watch: None,
            usage: Usage::default(),
        }
    }

    /// The block a purchase intent bought: what EC2 says of the reservation, plus what the
    /// intent knows that EC2 does not (fee, accelerators, budget period, payment deadline).
    pub fn bought(intent: &Intent, r: &Reservation, now: DateTime<Utc>) -> Block {
        let purchased_at = intent.sent_at.unwrap_or(now);
        let instance_count = bought_count(intent, r);
        Block {
            instance_count,
            fee: Some(share_of_fee(intent, r, instance_count)),
            accelerators_per_instance: Some(intent.accelerators_per_instance),
            purchased_at,
            payment_deadline: Some(payment_deadline(purchased_at, r.start)),
            rule_id: Some(intent.rule_id.clone()),
            intent_id: Some(intent.id.clone()),
            ultraserver: intent.offering.ultraserver,
            period: Some(intent.period.clone()),
            ..Block::adopted(r, false, now)
        }
    }

    /// The block as DescribeCapacityBlocks describes its kind: an UltraServer's instances are
    /// terminated 60 minutes before the end, not 30.
    pub fn with_kind(self, ultraserver: bool) -> Block {
        Block { ultraserver: self.ultraserver || ultraserver, ..self }
    }

    /// The same block ending at `end` (an extension EC2 confirmed, not yet stored).
    pub fn with_end(&self, end: DateTime<Utc>) -> Block {
        Block { end, ..self.clone() }
    }

    /// What an observation means for this block (`lifecycle::step`), and one case only the
    /// block's own facts decide: a block bought less than `LISTING_GRACE` ago that EC2 does not
    /// list yet stays as it is, quietly (EC2 lists a new reservation when it lists it).
    ///
    /// A missing block never moves to payment-failed, whatever its payment deadline: only EC2's
    /// word `payment-failed` frees a fee. A paid block listed late (same-day blocks' deadline is
    /// minutes after the purchase) would otherwise be booked failed, its fee freed and bought
    /// again while EC2 holds both.
    pub fn transition(&self, observed: &Observed, now: DateTime<Utc>) -> Transition {
        if *observed == Observed::NotFound
            && !self.state.is_final()
            && now < self.end
            && now - self.purchased_at < LISTING_GRACE
        {
            return Transition::Stay;
        }
        // The bug put back (`sabotage`): the old vanished-payment rule, a pending block EC2 does
        // not list past its payment deadline booked payment-failed.
        let gone_past_deadline = *observed == Observed::NotFound
            && self.state == BlockState::PaymentPending
            && self.payment_deadline.is_some_and(|d| now >= d);
        if gone_past_deadline && crate::sabotage::on(crate::sabotage::Bug::GoneAsFailed) {
            return Transition::Move { to: BlockState::PaymentFailed, end: self.end };
        }
        step(self.state, self.end, observed, now)
    }

    /// What the block's usage is judged against.
    pub fn span(&self) -> Span {
        Span {
            start: self.start,
            end: self.end,
            termination: self.termination_time(),
            instances: self.instance_count,
            accelerators_per_instance: self.accelerators_per_instance,
        }
    }

    /// When EC2 begins terminating the block's instances: when unsaved work is lost.
    pub fn termination_time(&self) -> DateTime<Utc> {
        termination_time(self.end, self.ultraserver)
    }

    /// `total` per accelerator-hour over the block's whole life (extensions included); None
    /// when the accelerator count is unknown (an adopted block).
    pub fn per_accelerator_hour(&self, total: Money) -> Option<Rate> {
        // Checked: a stored block's counts and dates are not re-parsed.
        let minutes = Decimal::from((self.end - self.start).num_minutes());
        let accel = Decimal::from(u64::from(self.accelerators_per_instance?) * u64::from(self.instance_count));
        total.per(accel.checked_mul(minutes)?.checked_div(Decimal::from(60))?)
    }
}

/// The instances of one reservation of the intent's purchase: what EC2 shows, or, while it
/// shows none (before the block starts and without the requested-quantity tag), the offering's
/// instances shared evenly by the purchase's parts (one per UltraServer).
fn bought_count(intent: &Intent, r: &Reservation) -> u32 {
    if r.instance_count > 0 {
        return r.instance_count;
    }
    let parts = u32::try_from(intent.parts.len()).unwrap_or(u32::MAX).max(1);
    (intent.offering.instance_count / parts).max(1)
}

/// The part of the intent's fee one reservation of its purchase carries: all of it when the
/// purchase made one reservation; when it made several (one per UltraServer), each its share
/// by instances, so a block's price per accelerator-hour stays true.
fn share_of_fee(intent: &Intent, r: &Reservation, mine: u32) -> Money {
    // A segment's reservation carries its segment's own fee (segments differ in price).
    if let Some(s) = intent.offering.segment_of(&r.instance_type, &r.availability_zone, mine) {
        return s.fee;
    }
    let all = intent.offering.instance_count;
    if mine == 0 || mine >= all {
        return intent.offering.fee;
    }
    let fee = intent.offering.fee;
    // mine < all, so the share is below the fee: only a stored fee past Decimal's range could
    // overflow, and then the whole fee is the answer.
    let share = fee.amount().checked_mul(Decimal::from(mine)).and_then(|f| f.checked_div(Decimal::from(all)));
    share.and_then(|s| Money::new(s.round_dp(2), fee.currency()).ok()).unwrap_or(fee)
}

/// The reservations carrying one intent's tag, told apart: the purchase's own and any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The purchase's reservations, the one it is recorded by first.
    pub parts: Vec<Reservation>,
    /// Reservations beyond the purchase: a second purchase for one decision (or a hand-made
    /// tag). Recorded, never charged as a part, always alarmed.
    pub duplicates: Vec<Reservation>,
}

/// How many purchases `blocks` hold against a rule's `max_blocks_held`: a purchase of N
/// UltraServers is one block to the rule (its N reservations are tracked as N items, adopted
/// one by one), so the held items count once per intent; an item with no intent (adopted
/// from the account) counts alone.
pub fn purchases_held<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> usize {
    purchases_held_at(blocks, &[], DateTime::<Utc>::MIN_UTC)
}

/// `purchases_held`, and the purchases a person released that still count at `now`
/// (`ReleasedHold`): EC2 may list such a purchase late, and a second block would be bought
/// while it does. A released purchase EC2 did list (tracked as a block of its intent) counts once.
pub fn purchases_held_at<'a>(
    blocks: impl IntoIterator<Item = &'a Block>,
    released: &'a [ReleasedHold],
    now: DateTime<Utc>,
) -> usize {
    let mut intents: std::collections::BTreeSet<&str> =
        released.iter().filter(|h| h.counts_at(now)).map(|h| h.intent.as_str()).collect();
    let mut alone = 0;
    for b in blocks.into_iter().filter(|b| b.state.is_held()) {
        match &b.intent_id {
            Some(id) => {
                intents.insert(id.as_str());
            }
            None => alone += 1,
        }
    }
    intents.len() + alone
}

/// What a family's Capacity Block quota in a region counts as taken, as the store says it
/// (`quota_held`): the quota is in vCPUs ("Concurrent P5 Capacity Blocks per account").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaHeld {
    /// The vCPUs of the blocks held and the purchases in flight whose type's vCPUs are known.
    pub vcpus: u32,
    /// How many blocks and purchases in flight count.
    pub blocks: usize,
    /// How many of them are of a type whose vCPUs are not known here (not in `vcpus`).
    pub unknown: usize,
}

/// The vCPUs `family`'s quota in `region` counts as taken: every block held there (payment
/// pending, scheduled or active: EC2 holds it whether or not it has started) and every purchase
/// in flight (an open intent, whose block may not be tracked yet; one tracked as a block counts
/// once), each its instances times its type's published vCPUs (`catalog::vcpus_of`).
pub fn quota_held<'a>(
    blocks: impl IntoIterator<Item = &'a Block>,
    intents: impl IntoIterator<Item = &'a Intent>,
    region: &Region,
    family: &str,
) -> QuotaHeld {
    let mut held = QuotaHeld::default();
    let mut tracked = std::collections::BTreeSet::new();
    let mut count = |ty: &InstanceType, instances: u32| {
        held.blocks += 1;
        match super::catalog::vcpus_of(ty.as_str()) {
            Some(per) => held.vcpus = held.vcpus.saturating_add(per.saturating_mul(instances)),
            None => held.unknown += 1,
        }
    };
    let ours = |r: &Region, ty: &InstanceType| r == region && super::plan::family(ty.as_str()) == family;
    for b in blocks.into_iter().filter(|b| b.state.is_held() && ours(&b.region, &b.instance_type)) {
        tracked.extend(b.intent_id.as_deref());
        count(&b.instance_type, b.instance_count);
    }
    for i in intents.into_iter().filter(|i| i.state.is_open() && !tracked.contains(i.id.as_str())) {
        if ours(&i.offering.region, &i.offering.instance_type) {
            count(&i.offering.instance_type, i.offering.instance_count);
        }
    }
    held
}

/// Which reservations carrying an intent's tag are its purchase's parts when the purchase's
/// answer (which names them) was lost and EC2 is asked by tag.
///
/// A purchase's reservations hold exactly its offering's instances: an instance purchase makes
/// one reservation of all of them, an UltraServer purchase one per UltraServer (`count` of
/// them). So the parts are the first reservations whose instances fit in the offering's, and
/// the rest are duplicates: for an instance purchase exactly one part, for an UltraServer
/// purchase at most `count`. Which ones are "first" is not knowable from EC2 (the purchases
/// are identical); reservations that match the offering (type, zone, start) come before any
/// that do not, then by id, so every run picks the same ones. Either way the fee is charged
/// once and every extra reservation is alarmed.
pub fn split_by_tag(offering: &Offering, mut found: Vec<Reservation>) -> Split {
    let matches = |r: &Reservation| made_by(offering, r);
    found.sort_by(|a, b| (!matches(a), &a.id).cmp(&(!matches(b), &b.id)));
    let mut held: u64 = 0;
    let mut split = Split { parts: Vec::new(), duplicates: Vec::new() };
    for r in found {
        let instances = places(r.instance_count);
        let fits = held + instances <= u64::from(offering.instance_count);
        // The first is always the purchase: EC2 shows it, so something was bought.
        if split.duplicates.is_empty() && (split.parts.is_empty() || fits) {
            held += instances;
            split.parts.push(r);
        } else {
            split.duplicates.push(r);
        }
    }
    split
}

/// A part a purchase's record names, as EC2 lists it or as the store has its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedPart<'a> {
    pub instance_type: &'a InstanceType,
    pub availability_zone: &'a str,
    pub instance_count: u32,
}

impl<'a> From<&'a Reservation> for NamedPart<'a> {
    fn from(r: &'a Reservation) -> Self {
        NamedPart {
            instance_type: &r.instance_type,
            availability_zone: &r.availability_zone,
            instance_count: r.instance_count,
        }
    }
}

impl<'a> From<&'a Block> for NamedPart<'a> {
    fn from(b: &'a Block) -> Self {
        NamedPart {
            instance_type: &b.instance_type,
            availability_zone: &b.availability_zone,
            instance_count: b.instance_count,
        }
    }
}

/// Whether `r`, carrying the tag of a purchase recorded with the parts `named` but not named
/// itself, is a part EC2 listed only after the purchase was recorded (listings are eventually
/// consistent, each reservation on its own): it is what the offering's purchase makes, a
/// segment no named part is, and its instances fit beside theirs in the offering's. Anything
/// else carrying the tag is a second purchase.
pub fn late_part(offering: &Offering, named: &[NamedPart<'_>], r: &Reservation) -> bool {
    let held: u64 = named.iter().map(|n| places(n.instance_count)).sum();
    let same_segment =
        |n: &NamedPart<'_>| *n.instance_type == r.instance_type && n.availability_zone == r.availability_zone;
    made_by(offering, r)
        && (offering.segments.is_empty() || !named.iter().any(same_segment))
        && held + places(r.instance_count) <= u64::from(offering.instance_count)
}

/// Whether `r` is what `offering`'s purchase makes: one of its types in its zone (a segmented
/// purchase's reservations are its segments, each a type and zone of its own), from its start.
fn made_by(offering: &Offering, r: &Reservation) -> bool {
    offering.blocks().iter().any(|(t, z, _)| r.instance_type == **t && r.availability_zone == *z)
        && r.start == offering.start
}

/// The places a reservation of `instances` takes in its purchase: a reservation of no instances
/// (one described before its start) still takes one, so it cannot make room for more.
fn places(instances: u32) -> u64 {
    u64::from(instances.max(1))
}

/// A scheduled 2 x p5.48xlarge block in us-east-1 from `start` to `end`, bought through rule
/// `p5` two days before its start, for the unit tests of the modules that read blocks.
#[cfg(test)]
pub(crate) fn example(start: DateTime<Utc>, end: DateTime<Utc>) -> Block {
    Block {
        reservation_id: "cr-0123456789abcdef0".into(),
        region: "us-east-1".parse().expect("a valid region"),
        availability_zone: "us-east-1a".into(),
        instance_type: "p5.48xlarge".parse().expect("a valid type"),
        instance_count: 2,
        start,
        end,
        state: BlockState::Scheduled,
        fee: None,
        accelerators_per_instance: Some(8),
        purchased_at: start - chrono::Duration::days(2),
        payment_deadline: None,
        rule_id: Some("p5".into()),
        intent_id: None,
        ultraserver: false,
        arn: None,
        period: None,
        version: 1,
        capacity_block_id: None,
        health: None,
        health_changes: 0,
        health_watch: None,
        usage: Usage::default(),
    }
}

#[cfg(test)]
mod tests;
