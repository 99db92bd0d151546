//! The Slack text of `market_move`'s notes, in the rule's thread (`rule-<id>`): what moved, and
//! what to do about it. Kept apart from `announce` so each kind of message has one home.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use super::market_move::{Drought, Market, Step};
use super::message_kind::MessageKind;
use super::slack::SlackMessage;

fn when(t: DateTime<Utc>) -> String {
    t.format("%a %Y-%m-%d %H:%M UTC").to_string()
}

/// A price per accelerator-hour as people write it: at least the cents, at most four decimals.
fn rate(d: Decimal) -> String {
    let r = d.round_dp(4).normalize();
    if r.scale() < 2 { format!("{r:.2}") } else { r.to_string() }
}

/// The thread a rule's notes go to.
pub fn thread(rule_id: &str) -> String {
    format!("rule-{rule_id}")
}

/// The steps a person takes to try a threshold on the stored history before putting it.
fn try_threshold(rule_id: &str, price: &str, from: &str) -> String {
    format!(
        "Try a threshold on the stored history first: `capblock rules show {rule_id} > {rule_id}.toml`, set `max_price_per_accelerator_hour = \"{price}\"` in it, `capblock backtest --rule {rule_id}.toml --from {from}`, then `capblock rules put {rule_id}.toml` (a higher threshold spends more per block: check `max_total_fee` and `monthly_budget` too)."
    )
}

/// The price level of one of the rule's markets stepped: old and new level, from when.
pub fn stepped(rule_id: &str, milestone: &str, market: &Market, step: &Step, threshold: Decimal) -> SlackMessage {
    let pct = format!("{:.1}", step.percent().abs());
    let (dir, sign) = if step.new > step.old { ("rose", "+") } else { ("fell", "-") };
    let day = step.day.format("%Y-%m-%d").to_string();
    let (old, new, limit) = (rate(step.old), rate(step.new), rate(threshold));
    let against = if threshold < step.new {
        format!(
            "The rule's threshold, {limit} per accelerator-hour, is under the new level: at it, the rule buys only what is offered below this market's usual price."
        )
    } else {
        format!("The rule's threshold, {limit} per accelerator-hour, is at or above the new level.")
    };
    let mut next_steps = Vec::new();
    if threshold < step.new {
        next_steps
            .push(format!("If the rule should keep buying {}, raise its threshold towards {new}.", market.describe()));
        next_steps.push(try_threshold(rule_id, &new, &day));
    } else {
        next_steps.push("Nothing to do for this rule; a lower threshold would now buy cheaper, less often.".into());
    }
    SlackMessage {
        id: format!("{}#{milestone}", thread(rule_id)),
        title: format!("Capacity Block prices {dir} {sign}{pct}% for {}", market.describe()),
        description: format!(
            "The price level of {} (the cheapest offering of each day) {dir} from {old} to {new} per accelerator-hour ({sign}{pct}%) on {day}, and has held since: not one offering, a sustained change. {against}",
            market.describe(),
        ),
        next_steps,
        keywords: vec![
            "capblock".into(),
            MessageKind::MarketStep.event_type().into(),
            market.region.to_string(),
            market.instance_type.to_string(),
        ],
        thread_id: thread(rule_id),
        summary: format!("{} {dir} {sign}{pct}% on {day}", market.describe()),
        event_type: MessageKind::MarketStep.event_type().into(),
        related_resources: vec![],
    }
}

/// The rule has seen offerings for its `drought_days` and none at or under its threshold.
pub fn drought(rule_id: &str, milestone: &str, d: &Drought) -> SlackMessage {
    let o = &d.cheapest_offering;
    let bought = match d.would_have_bought.as_slice() {
        [] => format!(
            "At {} (the cheapest seen, rounded up to the cent) the rule would still have bought nothing in that time: its start window, budget or limits ruled the offerings out.",
            rate(d.tried)
        ),
        all => {
            let first = &all[0];
            let total = all.iter().skip(1).try_fold(first.fee, |t, b| t.checked_add(&b.fee).ok());
            format!(
                "At {} (the cheapest seen, rounded up to the cent) the rule would have bought {} block(s) in that time, with its budget and limits, for {} in all: the first {} x {} in {} from {}, seen {}, at {} per accelerator-hour.",
                rate(d.tried),
                all.len(),
                total.map_or_else(|| "several currencies".to_string(), |t| t.to_string()),
                first.offering.instance_count,
                first.offering.instance_type,
                first.offering.region,
                when(first.offering.start),
                when(first.at),
                first.per_accelerator_hour.display(),
            )
        }
    };
    let last = d.last_under.map_or_else(
        || "in all the history capblock keeps for the check".to_string(),
        |t| format!("since {}", when(t)),
    );
    SlackMessage {
        id: format!("{}#{milestone}", thread(rule_id)),
        title: format!("Rule {rule_id} has bought nothing for {} days: every offering is over its threshold", d.days),
        description: format!(
            "Rule `{rule_id}` saw {} offering(s) it asks for from {} on, none at or under its threshold of {} per accelerator-hour ({last}). The cheapest was {} x {} in {} at {} per accelerator-hour ({}). {bought}",
            d.seen,
            when(d.since),
            rate(d.threshold),
            o.instance_count,
            o.instance_type,
            o.region,
            rate(d.cheapest),
            o.fee,
        ),
        next_steps: vec![
            "Capacity Block prices stepped up in 2026; if this market is the new normal, the rule's threshold is what keeps it from buying.".into(),
            try_threshold(rule_id, &rate(d.tried), &d.since.format("%Y-%m-%d").to_string()),
            "Or leave it: capblock says this once, and again only after the rule has seen an offering at its threshold and gone dry again.".into(),
        ],
        keywords: vec!["capblock".into(), MessageKind::Drought.event_type().into(), rule_id.to_string()],
        thread_id: thread(rule_id),
        summary: format!("rule {rule_id}: nothing at its threshold for {} days", d.days),
        event_type: MessageKind::Drought.event_type().into(),
        related_resources: vec![],
    }
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, TimeZone};
    use rust_decimal_macros::dec;

    use super::*;
    use crate::domain::money::Money;
    use crate::domain::offering::example;

    fn market() -> Market {
        Market {
            region: "eu-north-1".parse().unwrap(),
            instance_type: "p5.48xlarge".parse().unwrap(),
            ultraserver_type: None,
        }
    }

    #[test]
    fn a_fall_says_so_and_asks_nothing_of_a_rule_above_the_new_level() {
        let step = Step { day: NaiveDate::from_ymd_opt(2026, 7, 3).unwrap(), old: dec!(4.5), new: dec!(3.6) };
        let m = stepped("r1", "market-step-x", &market(), &step, dec!(3.80));
        assert_eq!(m.title, "Capacity Block prices fell -20.0% for p5.48xlarge in eu-north-1");
        assert!(
            m.description.contains("fell from 4.50 to 3.60 per accelerator-hour (-20.0%) on 2026-07-03"),
            "{}",
            m.description
        );
        assert!(m.description.contains("3.80 per accelerator-hour, is at or above the new level"), "{}", m.description);
        assert_eq!(m.next_steps.len(), 1);
        assert_eq!((m.thread_id.as_str(), m.id.as_str()), ("rule-r1", "rule-r1#market-step-x"));
    }

    #[test]
    fn a_drought_that_would_still_have_bought_nothing_says_why() {
        let since = Utc.with_ymd_and_hms(2026, 7, 1, 0, 0, 0).unwrap();
        let offering = example("cb-1", "us-east-1", since, Money::usd(dec!(691.20)).unwrap());
        let d = Drought {
            threshold: dec!(3.2),
            since,
            last_under: None,
            days: 9,
            seen: 40,
            cheapest: dec!(3.6),
            cheapest_offering: offering,
            tried: dec!(3.6),
            would_have_bought: vec![],
        };
        let m = drought("r1", "drought-3.2-2026-07-01", &d);
        assert_eq!(m.title, "Rule r1 has bought nothing for 9 days: every offering is over its threshold");
        assert!(m.description.contains("none at or under its threshold of 3.20"), "{}", m.description);
        assert!(m.description.contains("would still have bought nothing"), "{}", m.description);
        assert!(m.next_steps[1].contains("max_price_per_accelerator_hour = \"3.60\""), "{:?}", m.next_steps);
        assert!(m.next_steps[1].contains("--from 2026-07-01"), "{:?}", m.next_steps);
    }
}
