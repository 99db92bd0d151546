//! What the workflows' unit tests are about: a rule, an offering, an intent whose answer was
//! lost, the reservation EC2 made for it. They run over the in-memory adapters
//! (`crate::memory`); the local-stack tests in `tests/` run the same workflows on moto and the
//! simulator.

use chrono::{DateTime, TimeZone, Utc};

use crate::domain::block::Reservation;
use crate::domain::budget::{Intent, IntentState, Period};
use crate::domain::money::Money;
use crate::domain::offering::Offering;
use crate::domain::rule::Rule;
use crate::domain::tags::INTENT_TAG;

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

/// A rule for 1 x p5.48xlarge for a day in us-east-1, up to 3.00 per GPU-hour, 600 a month.
pub fn rule(id: &str, mode: &str) -> Rule {
    let text = format!(
        "id = \"{id}\"\nmode = \"{mode}\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1]\ndurations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"600\"\nmax_purchases_per_month = 1\n"
    );
    Rule::from_toml(&text, t0()).unwrap()
}

/// 1 x p5.48xlarge (8 GPUs) in us-east-1a for the day from `start`, 480 USD (2.50 per GPU-hour).
pub fn offering(id: &str, start: DateTime<Utc>) -> Offering {
    crate::domain::offering::example(id, "us-east-1", start, Money::parse("480", "USD").unwrap())
}

/// `rule`'s intent for `offering`, sent to EC2 at `sent_at` (its answer lost).
pub fn sent_intent(rule: &Rule, offering: Offering, sent_at: DateTime<Utc>) -> Intent {
    let charges = crate::domain::budget::charges_for(rule, &Default::default(), &Period::of(sent_at))
        .expect("a fake rule names no team");
    let mut i = Intent::new(&rule.id, offering, 8, charges, sent_at);
    i.state = IntentState::Sent;
    i.sent_at = Some(sent_at);
    i
}

/// The reservation EC2 made for `intent`, carrying its tag.
pub fn reservation_of(intent: &Intent, id: &str) -> Reservation {
    let o = &intent.offering;
    Reservation {
        id: id.into(),
        arn: None,
        region: o.region.clone(),
        availability_zone: o.availability_zone.clone(),
        instance_type: o.instance_type.clone(),
        instance_count: o.instance_count,
        start: o.start,
        end: o.end,
        state: "scheduled".into(),
        reservation_type: Some("capacity-block".into()),
        tags: [(INTENT_TAG.to_string(), intent.id.clone())].into(),
        capacity_block_id: None,
    }
}
