//! What the actions' unit tests share: a world from a scenario's behaviour and market lines,
//! the clock at 2026-12-01 00:00, and the values of a tag in an answer.

use crate::scenario::Scenario;
use crate::world::World;

/// A world at 2026-12-01 00:00 UTC with `behaviour` (the `[behaviour]` lines) and `market` (the
/// `[[market]]` tables).
pub fn world_of(behaviour: &str, market: &str) -> World {
    let text = format!("[clock]\nstart = \"2026-12-01T00:00:00Z\"\n[behaviour]\n{behaviour}\n{market}");
    World::new(Scenario::parse(&text).expect("a test scenario"))
}

/// The values of every `<tag>` in an answer, in order.
pub fn values(body: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    body.split(&open).skip(1).filter_map(|rest| rest.split_once("</").map(|(v, _)| v.to_string())).collect()
}
