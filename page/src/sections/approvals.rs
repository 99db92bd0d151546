//! Section 1: the approvals waiting for a person.

use capblock_core::app::team_page::TeamData;
use capblock_core::domain::approval;
use capblock_core::domain::duration::compact;

use super::{section, when};
use crate::html::{empty, esc, table};

/// Section 1: Approvals waiting: what, its price and fee, how long it may still be approved, and the
/// command to run (no button: buying stays behind the CLI's confirmation and IAM).
pub fn approvals(d: &TeamData) -> String {
    if d.approvals.is_empty() {
        return section("approvals", "Approvals waiting", &empty("No approvals waiting."));
    }
    let rows: Vec<Vec<String>> = d
        .approvals
        .iter()
        .map(|a| {
            let o = &a.offering;
            let rate = o
                .price_per_accelerator_hour(a.accelerators_per_instance)
                .map(|r| r.display())
                .unwrap_or_else(|| "-".into());
            vec![
                esc(&a.rule_id),
                esc(&format!(
                    "{} × {} in {}, {} from {}",
                    o.instance_count,
                    o.instance_type,
                    o.availability_zone,
                    o.length_text(),
                    when(o.start)
                )),
                esc(&rate),
                esc(&o.fee.to_string()),
                esc(&compact(approval::expires_at(a) - d.now)),
                format!("<code>capblock approve {}/{}</code>", esc(&a.rule_id), esc(&o.id)),
            ]
        })
        .collect();
    section(
        "approvals",
        "Approvals waiting",
        &format!(
            "<p class=\"summary\">{} decision(s) wait for a person. Approve in a terminal with the line shown: it prints the plan and asks before it buys.</p>{}",
            d.approvals.len(),
            table(
                "Approvals waiting",
                &["rule", "what", "per accelerator-hour", "fee", "expires in", "to approve"],
                &rows
            )
        ),
    )
}
