//! The items the store contract's cases write, public so that the adapter's own cases in
//! `tests/tests/integration/store.rs` build the same ones: a live rule, an offering in
//! us-east-1, its intent and charges, the block it bought, a notice, all at one fixed moment.

use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::domain::block::Block;
use crate::domain::budget::{BudgetCharge, Intent, Period, StackBudgets, charges_for};
use crate::domain::lifecycle::BlockState;
use crate::domain::money::Money;
use crate::domain::offering::{Offering, RawOffering};
use crate::domain::request::{Request, RequestTerms};
use crate::domain::rule::Rule;
use crate::ports::{Message, Notice, Topic};

/// The fixed moment every item is written at.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap()
}

/// `amount` US dollars.
pub fn usd(amount: &str) -> Money {
    Money::parse(amount, "USD").expect("an amount")
}

/// A live rule for one p5.48xlarge for a day in us-east-1: `budget` a month, two purchases.
pub fn rule(id: &str, budget: &str) -> Rule {
    let text = format!(
        "id = \"{id}\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\ninstance_counts = [1]\n\
         durations_days = [1]\nmax_price_per_accelerator_hour = \"5\"\nmonthly_budget = \"{budget}\"\n\
         max_purchases_per_month = 2\nstart_window = {{ earliest_in_days = 0, latest_in_days = 14 }}\n"
    );
    Rule::from_toml(&text, now()).expect("a valid rule")
}

/// One p5.48xlarge in us-east-1a for the day from 2026-12-03 11:30 UTC, at `fee` USD.
pub fn offering(id: &str, fee: &str) -> Offering {
    let start = Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap();
    let raw = day_offering(id, "p5.48xlarge", 1, "us-east-1a", start, fee);
    Offering::parse(&"us-east-1".parse().expect("a region"), raw).expect("a valid offering")
}

/// EC2's description of an offering of `count` x `instance_type` in `zone` for the day from
/// `start`, at `fee` USD in all (no UltraServers: set them on the answer).
pub fn day_offering(
    id: &str,
    instance_type: &str,
    count: i32,
    zone: &str,
    start: DateTime<Utc>,
    fee: &str,
) -> RawOffering {
    RawOffering {
        offering_id: Some(id.into()),
        instance_type: Some(instance_type.into()),
        availability_zone: Some(zone.into()),
        instance_count: Some(count),
        start_date: Some(start),
        end_date: Some(start + Duration::days(1)),
        duration_hours: Some(24),
        duration_minutes: Some(0),
        upfront_fee: Some(fee.into()),
        currency_code: Some("USD".into()),
        ultraserver_type: None,
        ultraserver_count: None,
        zone_type: None,
        segments: Vec::new(),
    }
}

/// The rule's charges, with the account capped at `account` when given.
pub fn charges(rule: &Rule, account: Option<&str>) -> Vec<BudgetCharge> {
    let budgets = StackBudgets { account: account.map(usd), teams: Default::default() };
    charges_for(rule, &budgets, &Period::budget_month(now())).expect("no team")
}

/// `rule`'s intent for the offering `offering_id` at `fee`, its charges as [`charges`].
pub fn intent(rule: &Rule, offering_id: &str, fee: &str, account: Option<&str>) -> Intent {
    Intent::new(&rule.id, offering(offering_id, fee), 8, charges(rule, account), now())
}

/// The block `intent` bought as reservation `id`, payment pending.
pub fn block_for(intent: &Intent, id: &str) -> Block {
    Block {
        reservation_id: id.into(),
        region: intent.offering.region.clone(),
        availability_zone: "us-east-1a".into(),
        instance_type: intent.offering.instance_type.clone(),
        instance_count: 1,
        start: intent.offering.start,
        end: intent.offering.end,
        state: BlockState::PaymentPending,
        fee: Some(intent.offering.fee),
        accelerators_per_instance: Some(8),
        purchased_at: now(),
        payment_deadline: None,
        rule_id: Some(intent.rule_id.clone()),
        intent_id: Some(intent.id.clone()),
        ultraserver: false,
        arn: None,
        period: Some(intent.period.clone()),
        version: 1,
        capacity_block_id: None,
        health: None,
        health_changes: 0,
        health_watch: None,
        usage: Default::default(),
    }
}

/// An alert in `thread` for the outbox key `milestone`.
pub fn notice(thread: &str, milestone: &str) -> Notice {
    Notice {
        thread: thread.into(),
        milestone: crate::domain::outbox_key::OutboxKey::parse(milestone).expect("a key"),
        topic: Topic::Alerts,
        message: Message { body: "{}".into(), attributes: Default::default() },
        created_at: now(),
    }
}

/// A request by `requester` for one p5.48xlarge for a day in us-east-1, the week ahead.
pub fn request(id: &str, requester: &str) -> Request {
    Request {
        id: id.into(),
        requester: requester.into(),
        filed_at: now(),
        terms: RequestTerms {
            instance_types: vec!["p5.48xlarge".parse().expect("a type")],
            instance_count: 1,
            days: 1,
            regions: vec!["us-east-1".parse().expect("a region")],
            earliest_start: now(),
            latest_end: now() + Duration::days(7),
            max_price_per_accelerator_hour: usd("5"),
            team: "research".into(),
            reason: "a contract case".into(),
            slack: None,
        },
        cancelled_at: None,
    }
}
