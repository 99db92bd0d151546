//! The team page: one self-contained HTML file rendered from `TeamData` (what
//! `capblock_core::app::team_page::gather` read from the table). Pure: no I/O, no clock (the data
//! carries its `now`), no request leaves the page (inline CSS and SVG, no script, and a
//! Content-Security-Policy that forbids any).

pub mod chart;
mod html;
mod sections;

use capblock_core::app::team_page::TeamData;

use html::esc;

/// The page's policy: nothing may be fetched (no script, font, image or stylesheet from
/// anywhere), only its own inline styles and data: images. A browser that opens the file then
/// blocks any request and reports it on its console, which the browser test reads.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

const STYLE: &str = include_str!("page.css");

/// The whole team page as one HTML file.
pub fn render(data: &TeamData) -> String {
    let stack = data.stack.as_deref().unwrap_or("capblock");
    let when = data.now.format("%Y-%m-%d %H:%M UTC");
    let mut s = String::with_capacity(64 * 1024);
    s.push_str(&format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"color-scheme\" content=\"light dark\">\
<title>{} capacity blocks, {when}</title><style>{STYLE}</style></head><body>\
<header><h1>{} capacity blocks</h1><p>As the table held it at <time datetime=\"{}\">{when}</time>; \
budget month {}. Times in UTC.</p><nav aria-label=\"Sections\"><a href=\"#glance\">At a glance</a> <a href=\"#approvals\">Approvals</a> \
<a href=\"#requests\">Requests</a> <a href=\"#calendar\">Calendar</a> <a href=\"#budgets\">Budgets</a> <a href=\"#prices\">Prices</a> \
<a href=\"#use\">Use</a> <a href=\"#market\">Market</a></nav></header><main>",
        esc(stack),
        esc(stack),
        data.now.to_rfc3339(),
        esc(data.period.as_str()),
    ));
    // What a lead asks first, then what waits for a person (decisions, people's requests): all
    // before any chart.
    s.push_str(&sections::summary(data));
    s.push_str(&sections::approvals(data));
    s.push_str(&sections::requests(data));
    s.push_str(&sections::calendar(data));
    s.push_str(&sections::budgets(data));
    s.push_str(&sections::prices(data));
    s.push_str(&sections::usage(data));
    s.push_str(&sections::market(data));
    s.push_str(
        "</main><footer><p>Written by capblock. Read-only: buying stays behind \
<code>capblock</code>'s confirmations and IAM.</p></footer></body></html>\n",
    );
    s
}

#[cfg(test)]
mod fixture;
#[cfg(test)]
mod tests;
