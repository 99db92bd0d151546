//! What the workflows' unit tests are about: a rule, an offering, an intent whose answer was
//! lost, the reservation EC2 made for it. They run over the in-memory adapters
//! (`crate::memory`); the local-stack tests in `tests/` run the same workflows on moto and the
//! simulator.

use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};

use crate::app::scan::{ScanSettings, Scanner};
use crate::app::track::{TrackSettings, Tracker};
use crate::domain::block::Reservation;
use crate::domain::budget::{Intent, IntentState, Period};
use crate::domain::catalog::AcceleratorCatalog;
use crate::domain::money::Money;
use crate::domain::offering::Offering;
use crate::domain::plan::DescribeBudget;
use crate::domain::rule::{Mode, Rule};
use crate::domain::stack::StackSettings;
use crate::domain::tags::INTENT_TAG;
use crate::memory::{MemoryNotifier, MemoryReminders};

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
    let charges = crate::domain::budget::charges_for(rule, &Default::default(), &Period::budget_month(sent_at))
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

/// The tracker's settings of a stack `capblock-test` in `mode`: no payment warnings, no
/// adoption of untagged reservations, every region of the rules.
pub fn track_settings(mode: Mode) -> TrackSettings {
    TrackSettings { stack: stack_settings(mode), payment_warning_hours: vec![], adopt_untagged: false, regions: vec![] }
}

/// The notices and reminders a test's tracker writes to, read back by the test.
#[derive(Default)]
pub struct Outputs {
    pub notifier: MemoryNotifier,
    pub reminders: MemoryReminders,
}

/// A tracker over `market` and `store` writing to `out`, running no hand-off actions.
pub fn tracker<'a, M: ?Sized, S: ?Sized>(
    market: &'a M,
    store: &'a S,
    out: &'a Outputs,
    settings: &'a TrackSettings,
) -> Tracker<'a, M, S, MemoryNotifier, MemoryReminders> {
    Tracker { market, store, notifier: &out.notifier, reminders: &out.reminders, settings, action_runner: None }
}

/// A stack `capblock-test` in `mode` with no account or team budget.
pub fn stack_settings(mode: Mode) -> StackSettings {
    StackSettings { name: "capblock-test".into(), mode, account_budget: None, team_budgets: Default::default() }
}

/// The scanner's settings of a stack `capblock-test` in `mode`: EC2 asked at a 1 ms pace, and
/// the scan settles open purchases.
pub fn scan_settings(mode: Mode) -> ScanSettings {
    ScanSettings {
        stack: stack_settings(mode),
        describe: DescribeBudget::for_refill(
            std::time::Duration::from_millis(1),
            1.0,
            std::time::Duration::from_secs(1),
        ),
        settles: true,
    }
}

/// What a test's scanner writes to beside the store: its notices and its accelerator catalog.
#[derive(Default)]
pub struct ScanOutputs {
    pub notifier: MemoryNotifier,
    pub catalog: Mutex<AcceleratorCatalog>,
}

/// A scanner over `market` and `store` writing to `out`, asking with no member account.
pub fn scanner<'a, M: ?Sized, S: ?Sized>(
    market: &'a M,
    store: &'a S,
    out: &'a ScanOutputs,
    settings: &'a ScanSettings,
) -> Scanner<'a, M, S, MemoryNotifier> {
    Scanner { market, store, notifier: &out.notifier, catalog: &out.catalog, settings, members: &[] }
}

/// The `event` of every log line written while `work` runs, in order, with its output: how a
/// test asserts a line an alarm's metric filter counts (`duplicate_purchase`, say). The lines
/// are caught on this thread, so `work` runs on a current-thread runtime (`#[tokio::test]`).
pub async fn logged_events<F: Future>(work: F) -> (F::Output, Vec<String>) {
    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, SubscriberExt};

    struct Events(Arc<Mutex<Vec<String>>>);
    struct EventField(Option<String>);
    impl Visit for EventField {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "event" {
                self.0 = Some(value.to_string());
            }
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "event" && self.0.is_none() {
                self.0 = Some(format!("{value:?}"));
            }
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut field = EventField(None);
            event.record(&mut field);
            if let Some(name) = field.0 {
                self.0.lock().unwrap_or_else(|p| p.into_inner()).push(name);
            }
        }
    }

    let seen = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Events(seen.clone()));
    let output = {
        let _on_this_thread = tracing::subscriber::set_default(subscriber);
        // A log line's callsite caches whether any subscriber wants it; one first reached by
        // another test's thread while no subscriber was set can still hold "never" here (a race
        // in tracing's cache between threads). Asking every callsite again with this one set
        // makes each line reach it.
        tracing::callsite::rebuild_interest_cache();
        work.await
    };
    let events = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (output, events)
}
