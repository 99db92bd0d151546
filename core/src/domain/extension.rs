//! Extensions of a block: what EC2 offers and answers, capblock's record of one it decided,
//! the choice among offers, the decision window, and how an open record is settled. Pure: the
//! tracker (`app/extend.rs`) brings the offers, the stored records and `now`.

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::block::Block;
use super::budget::{BudgetCharge, RESERVED_GRACE, SENT_GRACE};
use super::lifecycle::{BlockState, extension_payment_deadline};
use super::money::{Money, Rate};
use super::rule::Extend;

/// EC2 sells extensions until 1 hour before the end.
pub const LAST_EXTENSION_BEFORE_END: Duration = Duration::hours(1);

/// One DescribeCapacityBlockExtensionOfferings answer row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionOffer {
    pub id: String,
    pub reservation_id: String,
    pub duration_hours: u32,
    /// The block's current end: where the extension starts.
    pub start: DateTime<Utc>,
    /// The block's end once the extension is paid.
    pub end: DateTime<Utc>,
    pub fee: Money,
}

/// What PurchaseCapacityBlockExtension answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionReceipt {
    pub offering_id: String,
    pub reservation_id: String,
    /// payment-pending, payment-succeeded or payment-failed.
    pub status: String,
    pub end: Option<DateTime<Utc>>,
}

/// The states of an extension intent. Like purchases, `Sent` is never sent again: an unknown
/// outcome is settled by watching the block's end date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExtensionState {
    /// Budget reserved, PurchaseCapacityBlockExtension not sent yet.
    Reserved,
    /// Sent; EC2's answer was lost.
    Sent,
    /// EC2 accepted it; payment pending.
    Bought,
    /// The end moved: paid.
    Paid,
    /// Refused by EC2, abandoned before sending, or never paid: nothing charged.
    Released,
}

impl ExtensionState {
    pub fn is_open(self) -> bool {
        matches!(self, ExtensionState::Reserved | ExtensionState::Sent | ExtensionState::Bought)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionState::Reserved => "reserved",
            ExtensionState::Sent => "sent",
            ExtensionState::Bought => "bought",
            ExtensionState::Paid => "paid",
            ExtensionState::Released => "released",
        }
    }
}

/// The record written before PurchaseCapacityBlockExtension is sent, keyed by (block,
/// extension offering) so two runs deciding the same extension collide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionIntent {
    pub reservation_id: String,
    pub rule_id: String,
    pub offer: ExtensionOffer,
    pub state: ExtensionState,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub charges: Vec<BudgetCharge>,
}

impl ExtensionIntent {
    pub fn id(&self) -> String {
        format!("{}/{}", self.reservation_id, self.offer.id)
    }
}

/// The cheapest offer per accelerator-hour at or under `max_rate` whose fee fits `headroom`.
pub fn choose(
    offers: &[ExtensionOffer],
    instance_count: u32,
    accelerators_per_instance: u32,
    max_rate: Decimal,
    headroom: Money,
) -> Option<(ExtensionOffer, Rate)> {
    offers
        .iter()
        .filter(|o| o.fee.currency() == headroom.currency() && o.fee.amount() <= headroom.amount())
        .filter_map(|o| {
            let units = Decimal::from(instance_count)
                .checked_mul(Decimal::from(accelerators_per_instance))?
                .checked_mul(Decimal::from(o.duration_hours))?;
            Some((o.clone(), o.fee.per(units)?))
        })
        .filter(|(_, r)| r.per_unit <= max_rate)
        .min_by(|a, b| a.1.per_unit.cmp(&b.1.per_unit).then(a.0.duration_hours.cmp(&b.0.duration_hours)))
}

/// At most this many extension lengths are asked for one block in one run. EC2 sells one
/// length per DescribeCapacityBlockExtensionOfferings question (1 to 14 days, then weeks to 26),
/// so asking every length up to a rule's `max_days` is up to 26 questions per block on every
/// tracker run of its decision window; whether they count against the describe limit the scan
/// lives on is not published. Three per run keeps a block's questions within a few of the
/// scan's paced gaps, and a decision window of hours holds dozens of runs, so every length is
/// still asked many times before the block ends.
pub const LENGTHS_PER_RUN: usize = 3;

/// The extension lengths (days) to ask for in this run, shortest first, out of every sellable
/// length up to `left_days`: the shortest always (`choose` prefers it among equal rates, and it
/// commits least), and the rest of [`LENGTHS_PER_RUN`] from a window over the longer lengths
/// that moves with the run's minute, so that runs in turn cover them all. No memory is kept:
/// the window's start is a mix of the minute, so runs at any schedule (every 5 minutes, every
/// minute) reach every start rather than the same few residues.
pub fn lengths_to_ask(left_days: u32, now: DateTime<Utc>) -> Vec<u32> {
    let sellable: Vec<u32> =
        (1..=left_days.min(182)).filter(|d| super::rule::is_sellable_duration_days(i64::from(*d))).collect();
    if sellable.len() <= LENGTHS_PER_RUN {
        return sellable;
    }
    let longer = &sellable[1..];
    let start = (mix(now.timestamp().div_euclid(60) as u64) % longer.len() as u64) as usize;
    let mut asked: Vec<u32> = std::iter::once(sellable[0])
        .chain((0..LENGTHS_PER_RUN - 1).map(|i| longer[(start + i) % longer.len()]))
        .collect();
    asked.sort_unstable();
    asked
}

/// SplitMix64's finaliser: consecutive minutes land on unrelated windows.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether the block is in its rule's decision window at `now`.
pub fn in_window(b: &Block, x: &Extend, now: DateTime<Utc>) -> bool {
    matches!(b.state, BlockState::Scheduled | BlockState::Active)
        && now >= b.end - Duration::hours(i64::from(x.decide_hours_before_end))
        && now <= b.end - LAST_EXTENSION_BEFORE_END
}

/// Extension days already paid for the block: `max_days` bounds them in total, so a cheap
/// market cannot keep a block alive forever.
pub fn paid_days(history: &[ExtensionIntent]) -> u32 {
    // Saturating: stored records are not re-parsed, and a forged length is not worth a panic.
    history
        .iter()
        .filter(|e| e.state == ExtensionState::Paid)
        .fold(0u32, |days, e| days.saturating_add(e.offer.duration_hours / 24))
}

/// What becomes of an open extension record in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// The block's end moved to the extension's end: paid.
    Paid,
    /// Closed without a charge, for this reason: EC2 said it failed, or it was never sent.
    Release(&'static str),
    /// EC2 was not asked about the block this run (its region failed, or it showed the block
    /// off its path or not at all): the stored end may be stale. Decided when the end is known.
    Unobserved,
    /// Past its payment deadline (or its block ended) and EC2 has not said it failed: the fee
    /// stays committed, since absence is no evidence that EC2 does not hold it, and a person is
    /// told.
    Overdue,
    /// Still within its payment window.
    Wait,
}

/// Settles `x` from what the block's end says, when EC2's extension history has no word on it.
/// `observed`: EC2 showed the block on its path in this run, so `b` holds EC2's end. Only a
/// record never sent is released here: a sent one may be charged whatever the end says until
/// EC2 reports its payment failed (`settlement_with_history`), so past its deadline it is
/// `Overdue`, never released on the timer.
pub fn settlement(x: &ExtensionIntent, b: &Block, observed: bool, now: DateTime<Utc>) -> Settlement {
    let sent_at = x.sent_at.unwrap_or(x.created_at);
    if b.end >= x.offer.end {
        Settlement::Paid
    } else if x.state == ExtensionState::Reserved {
        if now - x.created_at >= RESERVED_GRACE {
            Settlement::Release("abandoned before it was sent")
        } else if b.state.is_final() {
            Settlement::Release("the block ended")
        } else {
            Settlement::Wait
        }
    } else if b.state.is_final() || now >= extension_payment_deadline(sent_at, x.offer.start) + SENT_GRACE {
        Settlement::Overdue
    } else if !observed {
        Settlement::Unobserved
    } else {
        Settlement::Wait
    }
}

/// EC2's word on an extension (DescribeCapacityBlockExtensionHistory), when it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentStatus {
    Pending,
    Failed,
    Succeeded,
}

impl PaymentStatus {
    /// None for a status capblock does not know: the end date decides then.
    pub fn from_ec2(s: &str) -> Option<PaymentStatus> {
        match s {
            "payment-pending" => Some(PaymentStatus::Pending),
            "payment-failed" => Some(PaymentStatus::Failed),
            "payment-succeeded" => Some(PaymentStatus::Succeeded),
            _ => None,
        }
    }

    /// The status as EC2 names it.
    pub fn as_ec2(self) -> &'static str {
        match self {
            PaymentStatus::Pending => "payment-pending",
            PaymentStatus::Failed => "payment-failed",
            PaymentStatus::Succeeded => "payment-succeeded",
        }
    }
}

/// Settles `x` from EC2's payment status when the history has the extension, with the end date
/// as a cross-check: an end that moved is a paid extension whatever the history says (the
/// budget keeps the charge rather than hide one), and a pending payment is waited for even
/// past the deadline (EC2 says when it failed). `payment-failed` is the one status that
/// releases a sent extension's fee. Without a status, `settlement` decides by the end date,
/// which can say paid but never failed.
pub fn settlement_with_history(
    x: &ExtensionIntent,
    b: &Block,
    observed: bool,
    status: Option<PaymentStatus>,
    now: DateTime<Utc>,
) -> Settlement {
    let moved = b.end >= x.offer.end;
    match status {
        Some(PaymentStatus::Succeeded) => Settlement::Paid,
        Some(_) if moved => Settlement::Paid,
        Some(PaymentStatus::Failed) => Settlement::Release("EC2 reports the extension's payment failed"),
        // EC2 holds it, pending: waited for, and past the deadline a person is told.
        Some(PaymentStatus::Pending) => match settlement(x, b, observed, now) {
            Settlement::Overdue => Settlement::Overdue,
            _ => Settlement::Wait,
        },
        None => settlement(x, b, observed, now),
    }
}

/// Whether EC2's word on an extension capblock closed as Released says EC2 holds it after all
/// (pending or paid): its fee is then committed again (`ExtensionLedger::recommit_extension`).
pub fn held_after_release(x: &ExtensionIntent, status: Option<PaymentStatus>) -> bool {
    x.state == ExtensionState::Released && matches!(status, Some(PaymentStatus::Pending | PaymentStatus::Succeeded))
}

/// The history says paid but EC2's end has not moved (as observed this run): worth a warning,
/// since one of the two is wrong or late.
pub fn history_disagrees(x: &ExtensionIntent, b: &Block, observed: bool, status: Option<PaymentStatus>) -> bool {
    observed && status == Some(PaymentStatus::Succeeded) && b.end < x.offer.end
}

#[cfg(test)]
mod tests;
