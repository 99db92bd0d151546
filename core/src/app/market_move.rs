//! The market-move check in a scan (why there: `domain::market_move`): for each rule with a
//! region due this run, the stored history of its regions and types is read back, the notes it
//! is due are judged by `domain::market_move`, and each is enqueued once in the rule's thread
//! (`rule-<id>`) under its outbox key; the scan's flush sends them. A history that cannot be
//! read is logged and looked at again next hour: a note late is better than a scan failed.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::outbox::alert_notice;
use crate::domain::backtest::Sample;
use crate::domain::ids::{InstanceType, Region};
use crate::domain::market_move::{Note, drought_prefix, lookback, notes, types_of};
use crate::domain::market_note;
use crate::domain::outbox_key::OutboxKey;
use crate::domain::rule::Rule;
use crate::ports::{ObservationStore, Outbox, StoreError};

/// Checks `rules` whose regions include one of `due`, as of `now`; returns the notes enqueued
/// anew this run (`rule#milestone`).
pub async fn check<S: ObservationStore + Outbox + ?Sized>(
    store: &S,
    rules: &[Rule],
    due: &BTreeSet<Region>,
    now: DateTime<Utc>,
) -> Result<Vec<String>, StoreError> {
    let checked: Vec<&Rule> = rules.iter().filter(|r| r.enabled && r.regions.iter().any(|g| due.contains(g))).collect();
    let Some(back) = checked.iter().map(|r| lookback(r)).max() else {
        return Ok(Vec::new());
    };
    // Each market's history once, however many rules share it.
    let mut history: BTreeMap<(Region, InstanceType), Vec<Sample>> = BTreeMap::new();
    let mut unread: BTreeSet<(Region, InstanceType)> = BTreeSet::new();
    for rule in &checked {
        for key in markets(rule) {
            if history.contains_key(&key) || unread.contains(&key) {
                continue;
            }
            match store.history(&key.0, &key.1, now - back, now).await {
                Ok(found) => {
                    history.insert(key, found.into_iter().map(Sample::from).collect());
                }
                Err(e) => {
                    tracing::warn!(event = "market_history_unread", region = %key.0, instance_type = %key.1, error = %e,
                        "market moves not checked for this market this run");
                    unread.insert(key);
                }
            }
        }
    }
    let mut told_now = Vec::new();
    for rule in checked {
        let keys = markets(rule);
        if keys.iter().any(|k| unread.contains(k)) {
            continue;
        }
        let samples: Vec<Sample> = keys.iter().filter_map(|k| history.get(k)).flatten().cloned().collect();
        let thread = market_note::thread(&rule.id);
        let told: Vec<DateTime<Utc>> = store
            .records(&thread, &drought_prefix(rule.max_price_per_accelerator_hour))
            .await?
            .into_iter()
            .map(|n| n.created_at)
            .collect();
        for note in notes(rule, &samples, &told, now) {
            let milestone = note.milestone();
            let msg = match &note {
                Note::Stepped { market, step, threshold } => {
                    market_note::stepped(&rule.id, &milestone, market, step, *threshold)
                }
                Note::Drought(d) => market_note::drought(&rule.id, &milestone, d),
            };
            if store.enqueue(&alert_notice(&thread, &OutboxKey::notice(milestone.as_str())?, &msg, now)).await? {
                tracing::warn!(event = "market_moved", rule = %rule.id, %milestone, "announced");
                told_now.push(format!("{}#{milestone}", rule.id));
            }
        }
    }
    Ok(told_now)
}

/// The markets a rule buys in: each of its regions with each of its instance types.
fn markets(rule: &Rule) -> Vec<(Region, InstanceType)> {
    rule.regions.iter().flat_map(|g| types_of(rule).into_iter().map(move |t| (g.clone(), t))).collect()
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};
    use rust_decimal_macros::dec;

    use super::*;
    use crate::domain::money::Money;
    use crate::memory::MemoryTable;
    use crate::ports::{Observation, Topic};

    fn at(d: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 7, 1, 0, 0, 0).unwrap() + Duration::days(d)
    }

    fn observation(d: i64, h: i64, price: rust_decimal::Decimal) -> Observation {
        let seen = at(d) + Duration::hours(h);
        let start = at(d + 2) + Duration::minutes(11 * 60 + 30);
        let fee = Money::parse(&(price * dec!(192)).to_string(), "USD").unwrap();
        let offering = crate::domain::offering::example(&format!("cb-{d}-{h}"), "us-east-1", start, fee);
        Observation { offering, accelerators_per_instance: 8, seen_at: seen }
    }

    /// 1 x p5.48xlarge for a day in us-east-1, up to 2.50 per accelerator-hour.
    fn rule() -> Rule {
        crate::domain::market_move::tests::rule(&["us-east-1"], &["p5.48xlarge"], "2.50", "")
    }

    /// 2.40 (under the threshold) for 10 days, then +20 % (2.88): a step, then a drought.
    #[tokio::test]
    async fn a_step_and_a_drought_are_enqueued_once_in_the_rules_thread() {
        let store = MemoryTable::default();
        let mut obs = Vec::new();
        for d in 0..22 {
            for h in [1, 13] {
                obs.push(observation(d, h, if d < 10 { dec!(2.40) } else { dec!(2.88) }));
            }
        }
        store.record(&obs).await.unwrap();
        let rules = [rule()];
        let due: BTreeSet<Region> = ["us-east-1".parse().unwrap()].into();
        let first = check(&store, &rules, &due, at(21) + Duration::hours(20)).await.unwrap();
        assert_eq!(first, vec!["mm#market-step-us-east-1-p5.48xlarge-2026-07-11", "mm#drought-2.5-2026-07-11"]);
        let pending = store.pending().await.unwrap();
        assert_eq!(pending.len(), 2);
        assert!(pending.iter().all(|n| n.thread == "rule-mm" && n.topic == Topic::Alerts));
        let step = pending.iter().find(|n| n.milestone.starts_with("market-step-")).unwrap();
        let body: serde_json::Value = serde_json::from_str(&step.message.body).unwrap();
        assert!(body["content"]["title"].as_str().unwrap().contains("+20.0%"), "{body}");
        // The next runs, hours and days later: nothing new.
        for later in [Duration::hours(1), Duration::days(3)] {
            let again = check(&store, &rules, &due, at(21) + Duration::hours(20) + later).await.unwrap();
            assert!(again.is_empty(), "{again:?}");
        }
        // A region not due this run: not checked at all.
        let store = MemoryTable::default();
        store.record(&obs).await.unwrap();
        assert!(check(&store, &rules, &BTreeSet::new(), at(21)).await.unwrap().is_empty());
    }
}
