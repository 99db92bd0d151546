//! The page's eight sections (a summary, then seven), each a `<section>` with its pictures and their text alternatives
//! (a table or a sentence), and a plain sentence when it has nothing to show: one file per
//! section, and here the small pieces of text they share.

mod approvals;
mod budgets;
mod calendar;
mod market;
mod prices;
mod requests;
mod summary;
mod usage;

pub use approvals::approvals;
pub use budgets::budgets;
pub use calendar::calendar;
pub use market::market;
pub use prices::prices;
pub use requests::requests;
pub use summary::summary;
pub use usage::usage;

use capblock_core::app::team_page::PageBlock;
use capblock_core::domain::lifecycle::BlockState;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use crate::html::esc;

fn when(t: DateTime<Utc>) -> String {
    t.format("%a %b %d %H:%M").to_string()
}

fn time(t: DateTime<Utc>) -> String {
    format!("<time datetime=\"{}\">{}</time>", t.to_rfc3339(), when(t))
}

fn f(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

fn section(id: &str, title: &str, body: &str) -> String {
    format!("<section id=\"{id}\" aria-labelledby=\"{id}-h\"><h2 id=\"{id}-h\">{}</h2>{body}</section>", esc(title))
}

fn state(s: BlockState) -> String {
    format!("<span class=\"state s-{0}\">{0}</span>", s.as_str())
}

fn lane(b: &PageBlock) -> String {
    format!("{} / {}", b.team.as_deref().unwrap_or("no team"), b.block.rule_id.as_deref().unwrap_or("adopted"))
}
