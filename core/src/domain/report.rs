//! The month's cost truth per rule and team: what was bought and extended, what it cost, and
//! what of it was used (`capblock report`, the monthly summary).
//!
//! Money columns are the budgets' own: a rule's `spent` for a month is the fees of the blocks
//! charged to that month (payment failed: given back, so not counted) plus the extensions whose
//! payment was charged to it, exactly what the rule's budget item counts as spent. The hours
//! columns are about the blocks charged to the month, over their whole life (extensions
//! included, whenever paid): paid accelerator-hours, used ones from the tracker's samples
//! (`domain::usage`), and the use and the price per used accelerator-hour over the same hours:
//! a block still running (or not started) counts the hours elapsed up to its last sample and
//! that share of its cost, so a block half-way through is not priced at its whole fee over half
//! its use.
//!
//! Pure: the caller passes every block and its extensions.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;

use super::block::Block;
use super::budget::{BudgetOwner, Period};
use super::extension::{ExtensionIntent, ExtensionState};
use super::lifecycle::BlockState;
use super::money::{Money, Rate};
use super::usage;

/// The rule tag that named a rule's team before rules had a `team` of their own (still read,
/// for rules written then).
pub const TEAM_TAG: &str = "team";

/// The team a rule's spend belongs to: its `team`, else its `team` tag.
pub fn team_of(rule: &super::rule::Rule) -> Option<&str> {
    rule.team.as_deref().or_else(|| rule.tags.get(TEAM_TAG).map(String::as_str))
}

/// One rule's month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleMonth {
    pub rule: String,
    /// The rule's team (`team_of`); `-` when it has none.
    pub team: String,
    /// Blocks charged to the month (UltraServer purchases count each reservation).
    pub blocks: u32,
    /// Of those, still running or not started (their use is not final).
    pub open_blocks: u32,
    pub fees: Money,
    /// Extensions whose payment was charged to the month (of any block of the rule).
    pub extensions: Money,
    /// fees + extensions: the rule's budget's `spent` for the month.
    pub spent: Money,
    pub paid_accelerator_hours: Decimal,
    /// Of the paid hours, those elapsed: a finished block's all, an open one's up to its last
    /// sample (none before it). What the use and the price per used hour are counted over.
    pub elapsed_accelerator_hours: Decimal,
    pub used_accelerator_hours: Decimal,
    /// Used over elapsed, percent; None when no paid hour has elapsed.
    pub utilization_percent: Option<Decimal>,
    /// The cost of the elapsed hours (a finished block's whole cost, an open one's elapsed share)
    /// over the used accelerator-hours; None when none were used.
    pub per_used_accelerator_hour: Option<Rate>,
    /// Blocks never sampled running (adopted before usage was tracked, or never active).
    pub unsampled_blocks: u32,
    /// Of `blocks`, those whose fee capblock never knew (bought by hand, adopted by the rule's
    /// tag): counted in the month of their start with their hours, never in the fees, and left
    /// out of the price per used accelerator-hour.
    pub unpriced_blocks: u32,
}

/// Each rule's month, by rule id: the rules with blocks or extensions charged to it. `teams`:
/// each rule's team (rules gone from the store keep their blocks, team `-`).
pub fn month(
    period: &Period,
    blocks: &[(Block, Vec<ExtensionIntent>)],
    teams: &BTreeMap<String, String>,
) -> Vec<RuleMonth> {
    let mut rows: BTreeMap<String, Acc> = BTreeMap::new();
    for (b, extensions) in blocks {
        let Some(rule) = &b.rule_id else { continue };
        for x in extensions.iter().filter(|x| x.state == ExtensionState::Paid) {
            let charged_here =
                x.charges.iter().any(|c| &c.period == period && c.owner == BudgetOwner::Rule(rule.clone()));
            if charged_here {
                rows.entry(rule.clone()).or_default().extensions.push(x.offer.fee);
            }
        }
        // A block whose fee capblock knows is charged to its purchase's month; one it adopted
        // (fee unknown) belongs to the month it starts in, for its hours.
        let month = match b.fee {
            Some(_) => b.period.clone(),
            None => Some(Period::of(b.start)),
        };
        if month.as_ref() != Some(period) || b.state == BlockState::PaymentFailed {
            continue;
        }
        let acc = rows.entry(rule.clone()).or_default();
        acc.blocks += 1;
        if !b.state.is_final() {
            acc.open_blocks += 1;
        }
        acc.count(b, extensions);
        if !b.usage.is_known() {
            acc.unsampled += 1;
        }
    }
    rows.into_iter()
        .map(|(rule, acc)| {
            let currency = acc.fees.iter().chain(&acc.extensions).next().map(Money::currency);
            let sum = |v: &[Money]| {
                let zero = Money::zero(currency.unwrap_or_else(|| "USD".parse().expect("USD is a currency")));
                v.iter().try_fold(zero, |t, m| t.checked_add(m)).unwrap_or(zero)
            };
            let (fees, extensions, cost) = (sum(&acc.fees), sum(&acc.extensions), sum(&acc.cost));
            RuleMonth {
                team: teams.get(&rule).cloned().unwrap_or_else(|| "-".into()),
                rule,
                blocks: acc.blocks,
                open_blocks: acc.open_blocks,
                spent: fees.checked_add(&extensions).unwrap_or(fees),
                fees,
                extensions,
                paid_accelerator_hours: acc.paid,
                elapsed_accelerator_hours: acc.elapsed,
                used_accelerator_hours: acc.used,
                utilization_percent: (!acc.elapsed.is_zero())
                    .then(|| (acc.used * Decimal::from(100) / acc.elapsed).round_dp(2)),
                per_used_accelerator_hour: if acc.priced_used.is_zero() { None } else { cost.per(acc.priced_used) },
                unsampled_blocks: acc.unsampled,
                unpriced_blocks: acc.unpriced,
            }
        })
        .collect()
}

/// A team's month: its rules' rows added up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TeamMonth {
    pub team: String,
    pub rules: Vec<String>,
    pub blocks: u32,
    pub spent: Money,
    pub paid_accelerator_hours: Decimal,
    /// As `RuleMonth::elapsed_accelerator_hours`: what the use is counted over.
    pub elapsed_accelerator_hours: Decimal,
    pub used_accelerator_hours: Decimal,
    pub utilization_percent: Option<Decimal>,
    /// The team's monthly budget and what its budget counts as spent, when the stack gives the
    /// team one (filled by the caller, which reads the stack and the ledger).
    pub budget: Option<Money>,
    pub budget_spent: Option<Money>,
}

/// The rows by team, teams in name order.
pub fn by_team(rows: &[RuleMonth]) -> Vec<TeamMonth> {
    let mut teams: BTreeMap<&str, TeamMonth> = BTreeMap::new();
    for r in rows {
        let t = teams.entry(r.team.as_str()).or_insert_with(|| TeamMonth {
            team: r.team.clone(),
            rules: Vec::new(),
            blocks: 0,
            spent: Money::zero(r.spent.currency()),
            paid_accelerator_hours: Decimal::ZERO,
            elapsed_accelerator_hours: Decimal::ZERO,
            used_accelerator_hours: Decimal::ZERO,
            utilization_percent: None,
            budget: None,
            budget_spent: None,
        });
        t.rules.push(r.rule.clone());
        t.blocks += r.blocks;
        t.spent = t.spent.checked_add(&r.spent).unwrap_or(t.spent);
        t.paid_accelerator_hours += r.paid_accelerator_hours;
        t.elapsed_accelerator_hours += r.elapsed_accelerator_hours;
        t.used_accelerator_hours += r.used_accelerator_hours;
    }
    teams
        .into_values()
        .map(|mut t| {
            if !t.elapsed_accelerator_hours.is_zero() {
                t.utilization_percent =
                    Some((t.used_accelerator_hours * Decimal::from(100) / t.elapsed_accelerator_hours).round_dp(2));
            }
            t
        })
        .collect()
}

/// Block `b`'s span as far as it has elapsed: whole once it is over (a final state), else up to
/// its last sample (the hours the used ones were counted over), empty before one.
fn elapsed_span(b: &Block) -> usage::Span {
    let whole = b.span();
    if b.state.is_final() {
        return whole;
    }
    let end = b.usage.sampled_at.map_or(whole.start, |at| at.clamp(whole.start, whole.end));
    usage::Span { end, ..whole }
}

fn minutes_of(s: &usage::Span) -> i64 {
    (s.end - s.start).num_minutes().max(0)
}

/// `part` of `whole` minutes of `m`, to the cent (all of it when `whole` is empty).
fn share_of(m: Money, part: i64, whole: i64) -> Money {
    if whole <= 0 || part >= whole {
        return m;
    }
    let amount = (m.amount() * Decimal::from(part) / Decimal::from(whole)).round_dp(2);
    Money::new(amount, m.currency()).unwrap_or(m)
}

impl Acc {
    /// Block `b` of the month (with its extensions): its fee, and its hours and cost over the
    /// same hours elapsed (`elapsed_span`).
    fn count(&mut self, b: &Block, extensions: &[ExtensionIntent]) {
        let whole = b.span();
        let elapsed = elapsed_span(b);
        let share = |m: &Money| share_of(*m, minutes_of(&elapsed), minutes_of(&whole));
        match b.fee {
            Some(fee) => {
                self.fees.push(fee);
                self.cost.push(share(&fee));
                self.cost
                    .extend(extensions.iter().filter(|x| x.state == ExtensionState::Paid).map(|x| share(&x.offer.fee)));
            }
            None => self.unpriced += 1,
        }
        let x = usage::utilization(&whole, &b.usage, None);
        let so_far = usage::utilization(&elapsed, &b.usage, None);
        if let (Some(paid), Some(elapsed), Some(used)) =
            (x.paid_accelerator_hours, so_far.paid_accelerator_hours, x.used_accelerator_hours)
        {
            self.paid += paid;
            self.elapsed += elapsed;
            self.used += used;
            if b.fee.is_some() {
                self.priced_used += used;
            }
        }
    }
}

#[derive(Default)]
struct Acc {
    blocks: u32,
    open_blocks: u32,
    fees: Vec<Money>,
    extensions: Vec<Money>,
    /// The cost of the month's blocks' elapsed hours (fees and every paid extension of theirs,
    /// an open block's in the share of its life elapsed).
    cost: Vec<Money>,
    paid: Decimal,
    elapsed: Decimal,
    used: Decimal,
    /// Used hours of the blocks whose fee is known: the price per used hour's denominator.
    priced_used: Decimal,
    unsampled: u32,
    unpriced: u32,
}

#[cfg(test)]
mod tests;
