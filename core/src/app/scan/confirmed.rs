//! A person's yes to a live scan's plan: the only blocks, at the only fees, its run may buy.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::ScanReport;
use crate::app::purchase::Outcome;
use crate::domain::offering::Offering;
use crate::domain::rule::Mode;

/// What a person said yes to before a live scan from the CLI: per rule, the one block its plan
/// showed (a look at the same moment: `RunTime::look`). The run that follows asks EC2 again,
/// and the market may have moved meanwhile; a live rule then buys only its planned block, the
/// same block (region, zone, type, count, UltraServers, start and end) at the same fee, and
/// otherwise nothing (`Outcome::OffPlan`). So the person never pays for a block, or a fee, they
/// did not see; a rule with nothing planned buys nothing. The purchase path's own re-checks
/// (the budgets reserved in one transaction, the offering asked of EC2 again at that fee) hold
/// as in every run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confirmed {
    blocks: BTreeMap<String, Offering>,
    /// The live rules the plan left out, each with why (`Outcome::Skipped`: the rule holds its
    /// `max_blocks_held`, made its purchases this month, has a purchase open, a budget has no
    /// room): what the plan says of them, and what the run says if it is asked to buy for one.
    left_out: BTreeMap<String, String>,
}

impl Confirmed {
    /// The plan a look's report holds: each live rule's chosen block it would buy
    /// (`Outcome::Replayed`), by rule id.
    pub fn from_report(report: &ScanReport) -> Confirmed {
        let blocks = report
            .outcomes
            .iter()
            .filter(|o| o.mode == Mode::Live && matches!(o.action, Some(Outcome::Replayed { .. })))
            .filter_map(|o| Some((o.rule_id.clone(), o.chosen.as_ref()?.offering.clone())))
            .collect();
        let left_out = report
            .outcomes
            .iter()
            .filter(|o| o.mode == Mode::Live)
            .filter_map(|o| match &o.action {
                Some(Outcome::Skipped { reason }) => Some((o.rule_id.clone(), reason.clone())),
                _ => None,
            })
            .collect();
        Confirmed { blocks, left_out }
    }

    /// The live rules the plan left out, and why, by rule id.
    pub fn left_out(&self) -> &BTreeMap<String, String> {
        &self.left_out
    }

    /// The planned blocks, by rule id.
    pub fn blocks(&self) -> &BTreeMap<String, Offering> {
        &self.blocks
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether `rule_id` may buy `o` under the plan, else why not: each field of the block that
    /// differs from the planned one, with both values (the offering's id may differ: EC2 may
    /// name a block anew in each answer).
    pub fn admits(&self, rule_id: &str, o: &Offering) -> Result<(), String> {
        let Some(planned) = self.blocks.get(rule_id) else {
            return Err(match self.left_out.get(rule_id) {
                Some(why) => format!("the plan left rule {rule_id} out: {why}"),
                None => format!("the plan had nothing to buy for rule {rule_id}"),
            });
        };
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
        let us = |u: Option<crate::domain::ultraserver::UltraServers>| u.map_or("none".to_string(), |u| u.to_string());
        let same = |a: &String, b: &String| a == b;
        let fields = [
            ("region", o.region.to_string(), planned.region.to_string(), same),
            ("availability zone", o.availability_zone.clone(), planned.availability_zone.clone(), same),
            ("instance type", o.instance_type.to_string(), planned.instance_type.to_string(), same),
            ("instance count", o.instance_count.to_string(), planned.instance_count.to_string(), same),
            ("UltraServers", us(o.ultraservers), us(planned.ultraservers), same),
            ("start", at(o.start), at(planned.start), same),
            ("end", at(o.end), at(planned.end), same),
        ];
        let mut differ: Vec<String> = fields
            .iter()
            .filter(|(_, now, plan, eq)| !eq(now, plan))
            .map(|(field, now, plan, _)| format!("{field} {now} now, {plan} in the plan"))
            .collect();
        // Exactly, not as shown: a fee a fraction of a cent higher is another fee.
        if o.fee.amount() != planned.fee.amount() || o.fee.currency() != planned.fee.currency() {
            let exact = |m: &crate::domain::money::Money| format!("{} {}", m.amount().normalize(), m.currency());
            differ.push(format!("fee {} now, {} in the plan", exact(&o.fee), exact(&planned.fee)));
        }
        if differ.is_empty() { Ok(()) } else { Err(differ.join("; ")) }
    }
}
