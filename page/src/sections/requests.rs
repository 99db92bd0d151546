//! Section 2: people's requests for capacity (`capblock request`): the open ones (waiting for an
//! approver, or approved and looked for) and the closed ones (bought, expired, rejected,
//! cancelled, refused), newest first, each with who filed it and why, and how many more there
//! are than the page lists.

use capblock_core::app::team_page::{PageRequest, PageRequests, SHOWN_REQUESTS, TeamData};
use capblock_core::domain::request::{AUTO_APPROVER, RequestState};

use super::{section, time};
use crate::html::{empty, esc, table};

/// The request's state as a coloured word (the refused ones red, as a failed payment is).
fn state(r: &PageRequest) -> String {
    let word = r.state.as_ref().map_or("refused", RequestState::as_str);
    format!("<span class=\"state r-{word}\">{word}</span>")
}

/// Who filed it: the Slack handle they gave, and always the AWS identity it is stored under.
fn who(r: &PageRequest) -> String {
    let q = &r.request;
    match &q.terms.slack {
        Some(h) => esc(&format!("{h} ({})", q.requester)),
        None => esc(&q.requester),
    }
}

/// What it asks for: count and types, length, regions, team, and its cap.
fn what(r: &PageRequest) -> String {
    let t = &r.request.terms;
    let types: Vec<String> = t.instance_types.iter().map(|i| i.to_string()).collect();
    let regions: Vec<String> = t.regions.iter().map(|i| i.to_string()).collect();
    esc(&format!(
        "{} × {} for {} day(s) in {}, team {}; at most {} per accelerator-hour ({} in all)",
        t.instance_count,
        types.join(" or "),
        t.days,
        regions.join(", "),
        t.team,
        t.max_price_per_accelerator_hour,
        t.max_fee()
    ))
}

/// The window the block must fit in.
fn window(r: &PageRequest) -> String {
    let t = &r.request.terms;
    format!("from {} to {}", time(t.earliest_start), time(t.latest_end))
}

/// What an open request waits for: whose approval, or the scan's block.
fn next(r: &PageRequest, d: &PageRequests) -> String {
    let t = &r.request.terms;
    let id = esc(&r.request.id);
    match (&r.state, d.teams.get(&t.team)) {
        (Ok(RequestState::Approved), _) => {
            let by = r.decision.as_ref().map_or(String::new(), |x| x.by.clone());
            let by =
                if by == AUTO_APPROVER { "within the team's automatic limit".to_string() } else { format!("by {by}") };
            format!(
                "Approved {}; the scan buys the first block under the cap that starts by {}.",
                esc(&by),
                time(t.latest_start())
            )
        }
        (_, None) => esc(&format!("Team {} takes no requests: the stack's TeamApprovals names no such team.", t.team)),
        (_, Some(team)) if team.approves_on_its_own(t) => {
            esc(&format!("Within the team's automatic limit ({}): the next scan approves it.", team.auto_up_to))
        }
        (_, Some(team)) if team.approvers.is_empty() => {
            esc(&format!("Over the team's automatic limit ({}) and the team names no approver.", team.auto_up_to))
        }
        (_, Some(team)) => format!(
            "Waits for an approver of team {}: {}. <code>capblock requests approve {id}</code>",
            esc(&t.team),
            esc(&team.approvers.join(", "))
        ),
    }
}

/// How a closed request ended: its block and fee, the cheapest offering seen, the reason.
fn outcome(r: &PageRequest) -> String {
    match &r.state {
        Ok(RequestState::Bought { intent }) if r.blocks.is_empty() => {
            esc(&format!("Purchase {intent} consumed its approval; its block is not tracked yet."))
        }
        Ok(RequestState::Bought { .. }) => {
            let each: Vec<String> = r
                .blocks
                .iter()
                .map(|b| {
                    let fee = b.fee.map_or("fee not known yet".to_string(), |f| f.to_string());
                    format!("{} ({} × {} in {}, {fee})", b.reservation_id, b.instance_count, b.instance_type, b.region)
                })
                .collect();
            format!("Bought {} from {}.", esc(&each.join("; ")), time(r.blocks[0].start))
        }
        Ok(RequestState::Expired) => match &r.cheapest {
            Some(o) => {
                let rate = o.offering.price_per_accelerator_hour(o.accelerators_per_instance).map(|x| x.display());
                format!(
                    "Its window closed unbought. The cheapest offering seen: {} per accelerator-hour, {} at {}.",
                    esc(&rate.unwrap_or_default()),
                    esc(&format!(
                        "{} × {} in {}",
                        o.offering.instance_count, o.offering.instance_type, o.offering.region
                    )),
                    time(o.seen_at)
                )
            }
            None => "Its window closed unbought; no offering was seen for it.".to_string(),
        },
        Ok(RequestState::Rejected { reason }) => {
            let by = r.decision.as_ref().map_or(String::new(), |x| format!(" by {}", x.by));
            esc(&format!("Rejected{by}: {reason}"))
        }
        Ok(RequestState::Cancelled) => match r.request.cancelled_at {
            Some(at) => format!("Cancelled by its requester at {}.", time(at)),
            None => "Cancelled by its requester.".to_string(),
        },
        Ok(_) => String::new(),
        Err(why) => esc(&format!("The scan refuses its item and buys nothing for it: {why}")),
    }
}

/// "and N more" under a list cut at `SHOWN_REQUESTS`.
fn more(shown: usize, all: usize) -> String {
    if all > shown {
        format!(
            "<p class=\"summary\">The newest {shown} of {all} are listed; <code>capblock requests list</code> lists them all.</p>"
        )
    } else {
        String::new()
    }
}

/// Section 2: Requests: open ones first (whose approval they wait for), then closed ones (how
/// each ended), each list the newest `SHOWN_REQUESTS`.
pub fn requests(d: &TeamData) -> String {
    let q = &d.requests;
    let c = &q.counts;
    if c.open() + c.closed() == 0 {
        return section("requests", "Requests", &empty("No requests. Researchers file them with `capblock request`."));
    }
    let mut body = format!(
        "<p class=\"summary\">{} open ({} waiting for approval, {} approved and looked for); {} bought, {} expired, \
{} rejected, {} cancelled{}. Filed with <code>capblock request</code>; approving in a terminal prints the plan and \
asks before it approves.</p>",
        c.open(),
        c.filed,
        c.approved,
        c.bought,
        c.expired,
        c.rejected,
        c.cancelled,
        if c.refused > 0 { format!(", {} refused", c.refused) } else { String::new() },
    );
    body.push_str("<h3>Open</h3>");
    if q.open.is_empty() {
        body.push_str(&empty("No request waits for a decision or a block."));
    } else {
        let rows: Vec<Vec<String>> = q.open.iter().map(|r| row(r, Some(window(r)), next(r, q))).collect();
        let headers = ["filed", "request", "who", "what", "window", "why", "state", "waits for"];
        body.push_str(&table("Open requests, newest first", &headers, &rows));
        body.push_str(&more(q.open.len().min(SHOWN_REQUESTS), c.open()));
    }
    body.push_str("<h3>Closed</h3>");
    if q.closed.is_empty() {
        body.push_str(&empty("No request bought, expired, rejected or cancelled yet."));
    } else {
        let rows: Vec<Vec<String>> = q.closed.iter().map(|r| row(r, None, outcome(r))).collect();
        let headers = ["filed", "request", "who", "what", "why", "state", "outcome"];
        body.push_str(&table("Closed requests, newest first", &headers, &rows));
        body.push_str(&more(q.closed.len().min(SHOWN_REQUESTS), c.closed()));
    }
    section("requests", "Requests", &body)
}

/// A request's cells: when, which, who, what, its window (open ones), why, its state, and
/// `last` (what an open one waits for, how a closed one ended).
fn row(r: &PageRequest, window: Option<String>, last: String) -> Vec<String> {
    let mut cells = vec![time(r.request.filed_at), esc(&r.request.id), who(r), what(r)];
    cells.extend(window);
    cells.extend([esc(&r.request.terms.reason), state(r), last]);
    cells
}
