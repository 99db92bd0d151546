//! Section 5: how the blocks are used: the active blocks' idle instances, and the month's report.

use capblock_core::app::team_page::{PageBlock, TeamData};
use capblock_core::domain::extension::ExtensionState;
use capblock_core::domain::lifecycle::BlockState;
use capblock_core::domain::money::Money;
use capblock_core::domain::usage;

use super::{lane, section, time};
use crate::html::{empty, esc, table};

/// Section 5: Use: each active block's idle instances, idle cost and utilization (the tracker's samples,
/// `domain::usage`), and the month's report with the effective price per used accelerator-hour.
pub fn usage(d: &TeamData) -> String {
    let active: Vec<&PageBlock> = d.blocks.iter().filter(|b| b.block.state == BlockState::Active).collect();
    let mut body = String::from("<h3>Active blocks</h3>");
    if active.is_empty() {
        body.push_str(&empty("No active blocks."));
    } else {
        let rows: Vec<Vec<String>> = active
            .iter()
            .map(|b| {
                let bl = &b.block;
                let span = bl.span();
                let known = bl.usage.is_known();
                let idle_cost = usage::idle_cost(&span, total(b), bl.usage.idle_instance_minutes);
                let util = usage::utilization_so_far(&span, &bl.usage);
                vec![
                    esc(&lane(b)),
                    format!("<code>{}</code>", esc(&bl.reservation_id)),
                    esc(&format!("{} × {}", bl.instance_count, bl.instance_type)),
                    if known {
                        format!("{} of {}", bl.usage.idle, bl.instance_count)
                    } else {
                        "not sampled yet".into()
                    },
                    esc(&idle_cost.map(|m| m.to_string()).unwrap_or_else(|| "-".into())),
                    esc(&util.map(|u| format!("{}%", u.round_dp(1))).unwrap_or_else(|| "-".into())),
                    bl.usage.sampled_at.map(time).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        body.push_str(&table(
            "Active blocks",
            &["team / rule", "block", "what", "idle instances", "idle cost so far", "utilization", "last sample"],
            &rows,
        ));
    }
    body.push_str(&format!("<h3>Month {}</h3>", esc(&d.month.month)));
    body.push_str(&left_out(&d.month.skipped));
    if d.month.rules.is_empty() {
        body.push_str(&empty("Nothing bought or extended this month."));
    } else {
        let rows: Vec<Vec<String>> = d
            .month
            .rules
            .iter()
            .map(|r| {
                let m = &r.month;
                vec![
                    esc(&m.rule),
                    esc(&m.team),
                    m.blocks.to_string(),
                    esc(&m.spent.to_string()),
                    esc(&r.budget_limit.map(|l| l.to_string()).unwrap_or_else(|| "-".into())),
                    m.paid_accelerator_hours.round_dp(1).to_string(),
                    m.used_accelerator_hours.round_dp(1).to_string(),
                    esc(&m.utilization_percent.map(|u| format!("{u}%")).unwrap_or_else(|| "-".into())),
                    esc(&m.per_used_accelerator_hour.map(|r| r.display()).unwrap_or_else(|| "-".into())),
                ]
            })
            .collect();
        body.push_str(&table(
            "The month per rule (capblock report)",
            &[
                "rule",
                "team",
                "blocks",
                "spent",
                "budget",
                "paid accelerator-h",
                "used accelerator-h",
                "utilization",
                "per used accelerator-hour",
            ],
            &rows,
        ));
    }
    section("use", "Use", &body)
}

/// What a block cost in all: its fee and its paid extensions (None: an adopted block).
fn total(b: &PageBlock) -> Option<Money> {
    let paid = b.extensions.iter().filter(|x| x.state == ExtensionState::Paid).map(|x| x.offer.fee);
    paid.fold(b.block.fee, |t, fee| t.and_then(|t| t.checked_add(&fee).ok()))
}

/// What the store held but could not be read (a corrupt extension item): said, never silently
/// missing from the month's sums.
fn left_out(skipped: &[String]) -> String {
    skipped.iter().map(|note| format!("<p class=\"summary\">Left out: {}</p>", esc(note))).collect()
}
