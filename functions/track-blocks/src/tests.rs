//! The handler called as Lambda calls it (`LambdaEvent::new(payload, Context::default())`, as
//! lambda_runtime's examples test a handler), through the function's one edge, on ports in
//! memory and a fixed clock: a bought block EC2 shows active moves to active, one whose payment
//! failed gives its fee back, the monthly schedule's run sends the past month's summary, the
//! team page is published (people's requests on it judged by the stack's TeamApprovals), the
//! hand-off actions run in the account each rule names, and a body that is not JSON is refused
//! by name.

use std::sync::Arc;

use capblock_shared::app::publish::{PAGE_KEY, PageReport};
use capblock_shared::app::track::{TrackReport, TrackSettings};
use capblock_shared::aws::clock::TimeSource;
use capblock_shared::config::Targets;
use capblock_shared::domain::block::{Block, Reservation};
use capblock_shared::domain::budget::{Intent, IntentState, Period, charges_for};
use capblock_shared::domain::lifecycle::BlockState;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::offering;
use capblock_shared::domain::rule::{Mode, Rule};
use capblock_shared::domain::stack::StackSettings;
use capblock_shared::domain::tags::INTENT_TAG;
use capblock_shared::lambda::{Context, Edge, EdgeConfig, Lambda, LambdaEvent, Payload, Ports, Reply};
use capblock_shared::memory::{MemoryEc2, MemoryNotifier, MemoryPages, MemoryReminders, MemoryTable};
use capblock_shared::ports::{BlockStore, PagePublisher, ReadClock};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};

use super::{AWS_PORTS, App, Handoff, OwnPorts};

/// The run's clock: a fixed instant, never the calendar's (two hours into December 2026).
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 2, 0, 0).unwrap()
}

fn stack() -> StackSettings {
    StackSettings {
        name: "capblock-test".into(),
        mode: Mode::Live,
        account_budget: None,
        team_budgets: Default::default(),
    }
}

/// A live rule for 1 x p5.48xlarge for a day in us-east-1, 600 a month.
fn rule(id: &str) -> Rule {
    rule_with(id, "")
}

/// `rule` with more of the rule file after it (`extra`: actions, a member account).
fn rule_with(id: &str, extra: &str) -> Rule {
    let text = format!(
        "id = \"{id}\"\nmode = \"live\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1]\ndurations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"600\"\nmax_purchases_per_month = 1\n{extra}"
    );
    Rule::from_toml(&text, now() - Duration::days(1)).unwrap()
}

/// `rule`'s purchase of a day's block from an hour ago, bought yesterday for 480: the intent,
/// the block capblock stored (as EC2 listed it then, `then`) and its reservation as EC2 lists
/// it now (`state`).
fn bought(rule: &Rule, reservation_id: &str, then: &str, state: &str) -> (Intent, Block, Reservation) {
    let start = now() - Duration::hours(1);
    let offering =
        offering::example(&format!("cb-{}", rule.id), "us-east-1", start, Money::parse("480", "USD").unwrap());
    let sent_at = now() - Duration::days(1);
    let charges = charges_for(rule, &Default::default(), &Period::of(sent_at)).unwrap();
    let mut intent = Intent::new(&rule.id, offering.clone(), 8, charges, sent_at);
    intent.state = IntentState::Bought;
    intent.sent_at = Some(sent_at);
    let mut r = Reservation {
        id: reservation_id.into(),
        arn: Some(format!("arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{reservation_id}")),
        region: offering.region.clone(),
        availability_zone: offering.availability_zone.clone(),
        instance_type: offering.instance_type.clone(),
        instance_count: 1,
        start: offering.start,
        end: offering.end,
        state: then.into(),
        reservation_type: Some("capacity-block".into()),
        tags: [(INTENT_TAG.to_string(), intent.id.clone())].into(),
        capacity_block_id: None,
    };
    let block = Block::bought(&intent, &r, sent_at);
    r.state = state.into();
    (intent, block, r)
}

/// The function on the memory table, EC2, topics, schedules and bucket, as `build` makes it on
/// AWS (no hand-off services: the rules here name no actions).
struct Function {
    lambda: Lambda<App>,
    table: Arc<MemoryTable>,
    notifier: Arc<MemoryNotifier>,
    pages: Arc<MemoryPages>,
}

fn function(table: MemoryTable, ec2: MemoryEc2) -> Function {
    let (table, ec2, notifier) = (Arc::new(table), Arc::new(ec2), Arc::new(MemoryNotifier::default()));
    ec2.set_now(now());
    let pages = Arc::new(MemoryPages::default());
    let ports = Ports::memory(ec2, table.clone(), notifier.clone(), Arc::new(ReadClock(now())));
    let config = EdgeConfig {
        stack: stack().name,
        keep_settings: Some(stack()),
        targets: Targets { table: "capblock".into(), alerts_topic: "alerts".into(), event_bus: "capblock".into() },
        workloads_topic: None,
        schedule_group: Some("capblock".into()),
        time: TimeSource::Wall,
    };
    let settings =
        TrackSettings { stack: stack(), payment_warning_hours: vec![6, 1], adopt_untagged: false, regions: vec![] };
    let own = OwnPorts {
        reminders: Arc::new(MemoryReminders::default()),
        pages: Some(pages.clone() as Arc<dyn PagePublisher>),
        handoff: None,
    };
    let handler = App { own, handoff_clusters: vec![], settings, team_approvals: Default::default() };
    Function {
        lambda: Lambda { edge: Edge::on("track-blocks", AWS_PORTS, config, ports), handler },
        table,
        notifier,
        pages,
    }
}

fn event(payload: Payload) -> LambdaEvent<Payload> {
    LambdaEvent::new(payload, Context::default())
}

async fn run(f: &Function, payload: Value) -> TrackReport {
    match f.lambda.handle(event(Payload::Json(payload))).await {
        Ok(Reply::Run(report)) => report,
        other => panic!("a tick is a run: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_tick_moves_a_paid_block_to_active_and_releases_a_failed_ones_fee() {
    let (east, west) = (rule("east"), rule("west"));
    let (paid, paid_block, paid_now) = bought(&east, "cr-paid", "scheduled", "active");
    let (failed, failed_block, failed_now) = bought(&west, "cr-failed", "payment-pending", "payment-failed");
    let table = MemoryTable::default()
        .with_rules([east, west])
        .with_intents([paid, failed.clone()])
        .with_blocks([paid_block, failed_block]);
    let f = function(table, MemoryEc2::default().with_reservations([paid_now, failed_now]));

    let report = run(&f, json!({"source": "capblock.schedule"})).await;
    assert!(!report.replay);
    let mut moved: Vec<(&str, BlockState)> = report.moved.iter().map(|m| (m.reservation_id.as_str(), m.to)).collect();
    moved.sort_by_key(|(id, _)| *id);
    assert_eq!(moved, [("cr-failed", BlockState::PaymentFailed), ("cr-paid", BlockState::Active)], "{report:?}");
    assert_eq!(report.released_budgets.len(), 1, "{report:?}");
    assert!(f.table.fee_released("west", &failed.offering.id), "the failed payment's fee is given back");
    let active = f.table.get_block("cr-paid").await.unwrap().unwrap();
    assert_eq!(active.state, BlockState::Active);
    assert!(!f.notifier.published().is_empty(), "the milestones were announced");
    // The team page, once for the clock's hour.
    assert!(matches!(report.page, Some(PageReport::Published { .. })), "{:?}", report.page);
    assert_eq!(f.pages.writes(), [PAGE_KEY]);

    // The same tick again: nothing moves, no fee is released twice, the hour's page is written.
    let again = run(&f, json!({"source": "capblock.schedule"})).await;
    assert!(again.moved.is_empty() && again.released_budgets.is_empty(), "{again:?}");
    assert_eq!(again.page, Some(PageReport::AlreadyClaimed { hour: now() }));
    assert_eq!(f.pages.writes(), [PAGE_KEY]);
}

#[tokio::test(start_paused = true)]
async fn the_monthly_schedules_run_sends_the_past_months_summary() {
    let f = function(MemoryTable::default(), MemoryEc2::default());
    let report = run(&f, json!({"source": "capblock.monthly-summary"})).await;
    assert_eq!(report.summary.as_deref(), Some("2026-11"), "{report:?}");
    assert_eq!(report.notices.published, 1, "{report:?}");
    let hourly = run(&f, json!({"source": "capblock.schedule"})).await;
    assert_eq!(hourly.summary, None);
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_is_not_a_tick_is_refused_by_name_and_moves_nothing() {
    let f = function(MemoryTable::default(), MemoryEc2::default());
    // As the runtime reads a body: `Payload`'s own parse, JSON or not.
    let cut = serde_json::from_str::<Payload>("{\"source\": ").unwrap();
    let e = f.lambda.handle(event(cut)).await.unwrap_err();
    assert_eq!(e.error_type, "capblock.BadInput", "{e:?}");
    assert!(e.error_message.contains("the payload is not JSON"), "{e:?}");
    let e = f.lambda.handle(event(Payload::Json(json!(null)))).await.unwrap_err();
    assert_eq!(
        (e.error_type.as_str(), e.error_message.as_str()),
        ("capblock.BadInput", "bad input: the payload must be a JSON object, not null")
    );
    assert!(f.pages.writes().is_empty() && f.notifier.published().is_empty());
}

/// The tracker's page judges people's requests by the stack's TeamApprovals, as the scan does: a
/// lead's approval shows as approved by them; without the settings, as refused.
#[tokio::test(start_paused = true)]
async fn the_pages_requests_are_judged_by_the_stacks_team_approvals() {
    use capblock_shared::domain::request::{
        Request, RequestDecision, RequestTerms, RequestVerdict, parse_team_approvals,
    };
    use capblock_shared::ports::RequestStore;
    const LEAD: &str = "arn:aws:iam::111122223333:role/ResearchLead";
    let request = Request {
        id: "rq-ada1".into(),
        requester: "AROAEXAMPLE:ada".into(),
        filed_at: now() - Duration::hours(1),
        terms: RequestTerms {
            instance_types: vec!["p5.48xlarge".parse().unwrap()],
            instance_count: 1,
            days: 1,
            regions: vec!["us-east-1".parse().unwrap()],
            earliest_start: now() + Duration::days(1),
            latest_end: now() + Duration::days(5),
            max_price_per_accelerator_hour: Money::parse("3", "USD").unwrap(),
            team: "research".into(),
            reason: "the ablation".into(),
            slack: None,
        },
        cancelled_at: None,
    };
    let page = |teams: &str| {
        let request = request.clone();
        let teams = parse_team_approvals(teams).unwrap();
        async move {
            let table = MemoryTable::default();
            table.file_request(&request).await.unwrap();
            let decision = RequestDecision {
                request_id: request.id.clone(),
                requester: request.requester.clone(),
                terms: request.terms.clone(),
                by: LEAD.into(),
                at: now(),
                verdict: RequestVerdict::Approved,
                consumed_by: None,
            };
            table.decide_request(&decision).await.unwrap();
            let mut f = function(table, MemoryEc2::default());
            f.lambda.handler.team_approvals = teams;
            run(&f, json!({"source": "capblock.schedule"})).await;
            f.pages.object(PAGE_KEY).expect("the page")
        }
    };
    let judged = page(&format!("research=0 {LEAD}")).await;
    assert!(judged.contains(&format!("Approved by {LEAD}; the scan buys the first block")), "{judged}");
    let unjudged = page("").await;
    assert!(unjudged.contains("<span class=\"state r-refused\">refused</span>"), "{unjudged}");
}

/// A member account one rule hands its blocks to (`handoff_account`).
const MEMBER: &str = "222222222222";

/// The tick runs the hand-off actions of the blocks it moves: a rule's in this account's sides,
/// and those of a rule with a `handoff_account` in that member's, reached through the member's
/// role (`AccountHands`, in memory here), never in this account's. The block's RAM share, which
/// only its owner can make, stays in this account.
#[tokio::test(start_paused = true)]
async fn a_tick_runs_each_rules_hand_off_actions_in_its_own_account() {
    use capblock_shared::memory::{MemoryAccounts, MemoryHandoff};
    let actions = "[[actions]]\nkind = \"publish_parameter\"\n\
                   [[actions]]\nkind = \"scale_group\"\ngroup = \"trainers\"\ndesired = 1\ndown_lead_minutes = 45\n";
    let (east, west) = (
        rule_with("east", actions),
        rule_with("west", &format!("share_with = [\"{MEMBER}\"]\nhandoff_account = \"{MEMBER}\"\n{actions}")),
    );
    let (east_intent, east_block, east_now) = bought(&east, "cr-east", "scheduled", "active");
    let (west_intent, west_block, west_now) = bought(&west, "cr-west", "scheduled", "active");
    let table = MemoryTable::default()
        .with_rules([east, west])
        .with_intents([east_intent, west_intent])
        .with_blocks([east_block, west_block]);
    let mut f = function(table, MemoryEc2::default().with_reservations([east_now, west_now]));
    let (own, member) = (Arc::new(MemoryHandoff::default()), Arc::new(MemoryHandoff::default()));
    f.lambda.handler.own.handoff = Some(Handoff {
        parameters: own.clone(),
        commands: own.clone(),
        groups: own.clone(),
        reservation_groups: own.clone(),
        nodegroups: own.clone(),
        shares: own.clone(),
        accounts: Arc::new(MemoryAccounts::default().with_member(MEMBER, member.clone())),
    });

    let report = run(&f, json!({"source": "capblock.schedule"})).await;
    assert!(report.handoff.failed.is_empty() && !report.handoff.done.is_empty(), "{report:?}");
    assert_eq!(own.desired(), [("trainers".to_string(), 1)], "east's group, here");
    assert_eq!(member.desired(), [("trainers".to_string(), 1)], "west's group, in the member");
    assert!(own.parameters().keys().any(|k| k.contains("east")), "{:?}", own.parameters());
    assert!(member.parameters().keys().any(|k| k.contains("west")), "{:?}", member.parameters());
    assert!(!own.parameters().keys().any(|k| k.contains("west")), "nothing of west's here");
}
