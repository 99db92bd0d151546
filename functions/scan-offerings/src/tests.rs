//! The handler called as Lambda calls it (`LambdaEvent::new(payload, Context::default())`, as
//! lambda_runtime's examples test a handler), through the function's one edge, on ports in
//! memory and a fixed clock: a tick buys a rule's offering once, a second tick buys nothing, and
//! a payload that is not a tick is refused by name with nothing bought.

use std::sync::Arc;

use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::scan::{ScanReport, ScanSettings};
use capblock_shared::aws::clock::TimeSource;
use capblock_shared::config::Targets;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::offering::{self, Offering};
use capblock_shared::domain::plan::DescribeBudget;
use capblock_shared::domain::rule::{Mode, Rule};
use capblock_shared::domain::stack::StackSettings;
use capblock_shared::lambda::{Context, Edge, EdgeConfig, Lambda, LambdaEvent, Payload, Ports, Reply};
use capblock_shared::memory::{MemoryEc2, MemoryNotifier, MemoryTable};
use capblock_shared::ports::{ReadClock, SettingsStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};

use super::{AWS_PORTS, App};

/// The run's clock: a fixed instant, never the calendar's.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

fn stack() -> StackSettings {
    StackSettings {
        name: "capblock-test".into(),
        mode: Mode::Live,
        account_budget: None,
        team_budgets: Default::default(),
    }
}

/// A live rule for 1 x p5.48xlarge for a day in us-east-1, up to 3.00 per GPU-hour, one
/// purchase a month.
fn rule() -> Rule {
    let text = "id = \"east\"\nmode = \"live\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1]\ndurations_days = [1]\nstart_window = { earliest_in_days = 1, latest_in_days = 14 }\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"600\"\nmax_purchases_per_month = 1\n";
    Rule::from_toml(text, t0()).unwrap()
}

/// 1 x p5.48xlarge (8 GPUs) in us-east-1a for the day two days ahead, 480 USD (2.50 per GPU-hour).
fn offering() -> Offering {
    offering::example("cb-east", "us-east-1", t0() + Duration::days(2), Money::parse("480", "USD").unwrap())
}

/// The function on the memory table, EC2 and topics, as `build` makes it on AWS.
struct Function {
    lambda: Lambda<App>,
    table: Arc<MemoryTable>,
    ec2: Arc<MemoryEc2>,
}

fn function() -> Function {
    let table = Arc::new(MemoryTable::default().with_rules([rule()]));
    let ec2 = Arc::new(MemoryEc2::default().with_offerings([offering()]));
    ec2.set_now(t0());
    let ports =
        Ports::memory(ec2.clone(), table.clone(), Arc::new(MemoryNotifier::default()), Arc::new(ReadClock(t0())));
    let config = EdgeConfig {
        stack: stack().name,
        keep_settings: Some(stack()),
        targets: Targets { table: "capblock".into(), alerts_topic: "alerts".into(), event_bus: "capblock".into() },
        workloads_topic: None,
        schedule_group: None,
        time: TimeSource::Wall,
    };
    // Asked without pause: the paced asker's waits are on tokio's clock, paused in these tests.
    let describe =
        DescribeBudget::for_refill(std::time::Duration::from_millis(1), 1.0, std::time::Duration::from_secs(1));
    let settings = ScanSettings { stack: stack(), describe, settles: true };
    let lambda =
        Lambda { edge: Edge::on("scan-offerings", AWS_PORTS, config, ports), handler: App::new(settings, vec![]) };
    Function { lambda, table, ec2 }
}

fn event(payload: Value) -> LambdaEvent<Payload> {
    LambdaEvent::new(Payload::Json(payload), Context::default())
}

async fn run(f: &Function, payload: Value) -> ScanReport {
    match f.lambda.handle(event(payload)).await {
        Ok(Reply::Run(report)) => report,
        other => panic!("a tick is a run: {other:?}"),
    }
}

fn actions(report: &ScanReport) -> Vec<Option<Outcome>> {
    report.outcomes.iter().map(|o| o.action.clone()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_tick_buys_the_rules_offering_once_and_a_second_tick_buys_nothing() {
    let f = function();
    let first = run(&f, json!({"source": "capblock.schedule"})).await;
    assert_eq!((first.rules, first.replay, first.now), (1, false, t0()), "{first:?}");
    assert!(
        matches!(&actions(&first)[..], [Some(Outcome::Bought { offering_id, .. })] if offering_id == "cb-east"),
        "{:?}",
        actions(&first)
    );
    assert_eq!(f.ec2.purchases_made(), 1);
    // The edge kept the stack's settings for the CLI before the run.
    assert_eq!(f.table.stored_settings().await.unwrap().expect("settings stored").stack, stack());

    let second = run(&f, json!({"source": "capblock.schedule"})).await;
    assert!(!matches!(&actions(&second)[..], [Some(Outcome::Bought { .. })]), "{:?}", actions(&second));
    assert_eq!(f.ec2.purchases_made(), 1, "never bought twice");
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_is_not_a_tick_is_refused_by_name_and_buys_nothing() {
    let f = function();
    let refused = [
        (json!(["2026-12-01T00:00:00Z"]), "the payload must be a JSON object, not an array"),
        (json!({"source": "capblock.schedule", "time": "yesterday"}), "bad input: "),
        // Preflight's role check tries the role on AWS: ports in memory have none to try.
        (json!({"source": "capblock.preflight", "asks": []}), "tries this function's IAM role on AWS"),
    ];
    for (payload, says) in refused {
        let e = f.lambda.handle(event(payload.clone())).await.unwrap_err();
        assert_eq!(e.error_type, "capblock.BadInput", "{payload}: {e:?}");
        assert!(e.error_message.contains(says), "{payload}: {e:?}");
    }
    assert_eq!(f.ec2.purchases_made(), 0);
}
