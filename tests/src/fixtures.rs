//! Builders the integration tests share: simulator scenarios, rules, offerings, the environment
//! of a capblock binary and a test rig (simulator + moto + scanner and tracker settings + a
//! clock that moves with the simulator's). A test that answers EC2's calls itself puts the
//! rig's adapter behind `capblock_shared::memory::Hooked`. Each test still states its own
//! numbers; these only spell them out.

use std::sync::Mutex;

use capblock_shared::app::handoff::ActionRunner;
use capblock_shared::app::purchase::Outcome;
use capblock_shared::app::scan::{ScanReport, ScanSettings, Scanner};
use capblock_shared::app::track::{TrackReport, TrackSettings, Tracker};
use capblock_shared::aws::accounts::AssumedAccounts;
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::dynamo::DynamoStore;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::eks::Eks;
use capblock_shared::aws::eventbridge::Delivery;
use capblock_shared::aws::ram::Ram;
use capblock_shared::aws::resource_groups::ResourceGroups;
use capblock_shared::aws::ssm::Ssm;
use capblock_shared::domain::block::{Block, Reservation};
use capblock_shared::domain::catalog::AcceleratorCatalog;
use capblock_shared::domain::money::Money;
use capblock_shared::domain::offering::{self, Offering};
use capblock_shared::domain::rule::{Mode, Rule};
use capblock_shared::domain::stack::StackSettings;
use capblock_shared::domain::tags::RULE_TAG;
use capblock_shared::memory::MemoryReminders;
use capblock_shared::ports::{BlockStore, RuleStore};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use crate::{Aws, Published, Sim, assert_slack_schema};

/// The instant most tests start at (the simulator's clock and the rules' `now`).
pub const T0: &str = "2026-12-01T00:00:00Z";

/// [`T0`] as a time.
pub fn t0() -> DateTime<Utc> {
    T0.parse().unwrap()
}

/// A USD amount written as text ("1700").
pub fn usd(amount: &str) -> Money {
    Money::usd(amount.parse().unwrap()).unwrap()
}

fn toml_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

fn toml_numbers(items: &[u32]) -> String {
    let numbers: Vec<String> = items.iter().map(u32::to_string).collect();
    format!("[{}]", numbers.join(", "))
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A market-simulator scenario (the TOML `Sim::start` reads), built from its seed and start
/// clock, a `[behaviour]` table and any number of one-instance, one-day p5.48xlarge market
/// lines.
///
/// The simulator behaves like EC2 by default: its describe limit (a burst of 2, one call per
/// 4 s), at most 6 offerings per answer and same-day closest-match offerings. Tests about
/// something else turn off the describe limit and the same-day offerings (they would slow them
/// down, or win on their earlier start); [`ScenarioToml::real_market`] keeps them, for the
/// tests about exactly that.
#[derive(Debug, Clone)]
pub struct ScenarioToml {
    head: String,
    behaviour: Vec<String>,
    lines: String,
}

impl ScenarioToml {
    /// Nothing on sale yet: the `seed` and the simulator's start `clock`.
    pub fn new(seed: u64, clock: &str) -> Self {
        ScenarioToml {
            head: format!("seed = {seed}\n[clock]\nstart = \"{clock}\"\n"),
            behaviour: vec!["describe_limit = false".into(), "same_day_offerings = false".into()],
            lines: String::new(),
        }
    }

    /// EC2's describe limit and same-day closest matches, as the simulator has them by default.
    pub fn real_market(mut self) -> Self {
        self.behaviour.retain(|b| !b.starts_with("describe_limit") && !b.starts_with("same_day_offerings"));
        self
    }

    /// A `[behaviour]` key (`key = value` in TOML), replacing the same key if set.
    pub fn behaviour(mut self, setting: &str) -> Self {
        let key = |s: &str| s.split('=').next().unwrap_or_default().trim().to_string();
        self.behaviour.retain(|b| key(b) != key(setting));
        self.behaviour.push(setting.to_string());
        self
    }

    /// Every payment ends as `payment` ("succeed", "never", ...), after `delay_hours` when given
    /// (the simulator's default otherwise).
    pub fn payment(mut self, payment: &str, delay_hours: Option<u32>) -> Self {
        self.behaviour.push(format!("payment = \"{payment}\""));
        if let Some(h) = delay_hours {
            self.behaviour.push(format!("payment_delay_hours = {h}"));
        }
        self
    }

    /// `[behaviour] counts_before_start`: "zero" (the simulator's default, EC2's: a block shows 0
    /// instances until its start, its count in the `aws:ec2capacityreservation:*` tags) or "full".
    pub fn counts_before_start(self, reading: &str) -> Self {
        self.behaviour(&format!("counts_before_start = \"{reading}\""))
    }

    /// `[behaviour] offering_ids`: "stable" (the default) or "per_answer" (every answer mints fresh
    /// ids, purchasable for `offering_id_ttl_secs`).
    pub fn offering_ids(self, reading: &str) -> Self {
        self.behaviour(&format!("offering_ids = \"{reading}\""))
    }

    /// `[behaviour] offering_id_ttl_secs` (default 300): how long a "per_answer" id is purchasable.
    pub fn offering_id_ttl_secs(self, secs: u64) -> Self {
        self.behaviour(&format!("offering_id_ttl_secs = {secs}"))
    }

    /// `[behaviour] ultraserver_search`: "instance_type_required" (the default) or
    /// "ultraserver_only".
    pub fn ultraserver_search(self, reading: &str) -> Self {
        self.behaviour(&format!("ultraserver_search = \"{reading}\""))
    }

    /// `[behaviour] failed_payment_visible_minutes` (default 60): how long a payment-failed block
    /// stays visible after it failed.
    pub fn failed_payment_visible_minutes(self, minutes: u32) -> Self {
        self.behaviour(&format!("failed_payment_visible_minutes = {minutes}"))
    }

    /// `[behaviour] payment_delay_minutes` (default 5). It replaces a `payment_delay_hours` set
    /// before (through [`ScenarioToml::payment`]), which would otherwise win.
    pub fn payment_delay_minutes(mut self, minutes: u32) -> Self {
        self.behaviour.retain(|b| !b.starts_with("payment_delay_hours"));
        self.behaviour(&format!("payment_delay_minutes = {minutes}"))
    }

    /// Raw TOML appended after the market lines (e.g. `[[regions]]` tables).
    pub fn raw(mut self, toml: &str) -> Self {
        self.lines.push_str(toml);
        self.lines.push('\n');
        self
    }

    /// A market line: 1 x p5.48xlarge for one day in `region` (one AZ, `{region}a`), starting
    /// `start_days` days after the clock, at `usd_per_accelerator_hour` since 2026-11-01.
    pub fn p5(self, region: &str, start_days: &[u32], usd_per_accelerator_hour: &str) -> Self {
        self.p5_priced(region, start_days, &[("2026-11-01T00:00:00Z", usd_per_accelerator_hour)])
    }

    /// [`ScenarioToml::p5`] with its price stepping: `(from, usd_per_accelerator_hour)` pairs.
    pub fn p5_priced(self, region: &str, start_days: &[u32], prices: &[(&str, &str)]) -> Self {
        self.p5_line(region, &[1], start_days, prices)
    }

    /// [`ScenarioToml::p5`] of `counts` instances per block.
    pub fn p5_counts(self, region: &str, counts: &[u32], start_days: &[u32], usd_per_accelerator_hour: &str) -> Self {
        self.p5_line(region, counts, start_days, &[("2026-11-01T00:00:00Z", usd_per_accelerator_hour)])
    }

    fn p5_line(mut self, region: &str, counts: &[u32], start_days: &[u32], prices: &[(&str, &str)]) -> Self {
        let steps: Vec<String> = prices
            .iter()
            .map(|(from, p)| format!("{{ from = \"{from}\", usd_per_accelerator_hour = \"{p}\" }}"))
            .collect();
        self.lines.push_str(&format!(
            r#"[[market]]
region = "{region}"
instance_type = "p5.48xlarge"
azs = ["{region}a"]
counts = {}
durations_days = [1]
start_days = {}
price = [ {} ]
"#,
            toml_numbers(counts),
            toml_numbers(start_days),
            steps.join(", ")
        ));
        self
    }

    /// A market line of u-trn2x64 UltraServers (4 x trn2u.48xlarge, 64 chips) in `region` (AZ
    /// `{region}a`), `counts` of them per block, for one day from `start_days` after the clock, at
    /// `usd_per_accelerator_hour` since 2026-11-01.
    pub fn trn2_ultra(
        mut self,
        region: &str,
        counts: &[u32],
        start_days: &[u32],
        usd_per_accelerator_hour: &str,
    ) -> Self {
        self.lines.push_str(&format!(
            r#"[[market]]
region = "{region}"
instance_type = "trn2u.48xlarge"
ultraserver_type = "u-trn2x64"
ultraserver_counts = {}
azs = ["{region}a"]
durations_days = [1]
start_days = {}
price = [ {{ from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "{usd_per_accelerator_hour}" }} ]
"#,
            toml_numbers(counts),
            toml_numbers(start_days)
        ));
        self
    }

    /// The extension price of the last market line, when given (none is sold otherwise).
    pub fn extension_price(mut self, usd_per_accelerator_hour: Option<&str>) -> Self {
        if let Some(p) = usd_per_accelerator_hour {
            self.lines.push_str(&format!("extension_usd_per_accelerator_hour = \"{p}\"\n"));
        }
        self
    }

    pub fn build(self) -> String {
        format!("{}[behaviour]\n{}\n{}", self.head, self.behaviour.join("\n"), self.lines)
    }
}

/// A rule's TOML file. [`RuleToml::p5`] starts from a live rule for 1 x p5.48xlarge for one
/// day in us-east-1 at up to 3.00 per accelerator-hour, 5000 a month, starting 1 to 10 days
/// out; optional limits are left out unless set.
#[derive(Debug, Clone)]
pub struct RuleToml {
    id: String,
    mode: String,
    regions: Vec<String>,
    instance_types: Vec<String>,
    instance_counts: Vec<u32>,
    durations_days: Vec<u32>,
    max_price: String,
    monthly_budget: String,
    max_blocks_held: Option<u32>,
    max_purchases_per_month: Option<u32>,
    window: (i64, i64),
    extra: String,
}

impl RuleToml {
    /// A live rule `id` for `counts` u-trn2x64 UltraServers (no instance types) at 2.00 per
    /// chip-hour, budget 10,000: what `ScenarioToml::trn2_ultra` sells.
    pub fn trn2_ultra(id: &str, counts: &[u32]) -> Self {
        RuleToml::p5(id)
            .instance_types(&[])
            .instance_counts(&[])
            .max_price("2.00")
            .budget("10000")
            .extra(&format!("ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = {}", toml_numbers(counts)))
    }

    pub fn p5(id: &str) -> Self {
        RuleToml {
            id: id.into(),
            mode: "live".into(),
            regions: owned(&["us-east-1"]),
            instance_types: owned(&["p5.48xlarge"]),
            instance_counts: vec![1],
            durations_days: vec![1],
            max_price: "3.00".into(),
            monthly_budget: "5000".into(),
            max_blocks_held: None,
            max_purchases_per_month: None,
            window: (1, 10),
            extra: String::new(),
        }
    }

    /// "live", "dry-run" or "approval".
    pub fn mode(self, mode: &str) -> Self {
        RuleToml { mode: mode.into(), ..self }
    }

    pub fn regions(self, regions: &[&str]) -> Self {
        RuleToml { regions: owned(regions), ..self }
    }

    pub fn instance_types(self, types: &[&str]) -> Self {
        RuleToml { instance_types: owned(types), ..self }
    }

    pub fn instance_counts(self, counts: &[u32]) -> Self {
        RuleToml { instance_counts: counts.to_vec(), ..self }
    }

    pub fn durations_days(self, days: &[u32]) -> Self {
        RuleToml { durations_days: days.to_vec(), ..self }
    }

    /// `max_price_per_accelerator_hour`, as written.
    pub fn max_price(self, price: &str) -> Self {
        RuleToml { max_price: price.into(), ..self }
    }

    pub fn budget(self, monthly_budget: &str) -> Self {
        RuleToml { monthly_budget: monthly_budget.into(), ..self }
    }

    pub fn max_blocks_held(self, held: u32) -> Self {
        RuleToml { max_blocks_held: Some(held), ..self }
    }

    pub fn max_purchases_per_month(self, purchases: u32) -> Self {
        RuleToml { max_purchases_per_month: Some(purchases), ..self }
    }

    /// `start_window`: from `earliest` to `latest` days out.
    pub fn window(self, earliest: i64, latest: i64) -> Self {
        RuleToml { window: (earliest, latest), ..self }
    }

    /// Lines written after the rest (`tags = ...`, an `[extend]` table, ...).
    pub fn extra(self, lines: &str) -> Self {
        RuleToml { extra: lines.into(), ..self }
    }

    pub fn toml(&self) -> String {
        let mut t = format!(
            "id = \"{}\"\nmode = \"{}\"\nregions = {}\ninstance_types = {}\ninstance_counts = {}\n\
             durations_days = {}\nmax_price_per_accelerator_hour = \"{}\"\nmonthly_budget = \"{}\"\n",
            self.id,
            self.mode,
            toml_strings(&self.regions),
            toml_strings(&self.instance_types),
            toml_numbers(&self.instance_counts),
            toml_numbers(&self.durations_days),
            self.max_price,
            self.monthly_budget,
        );
        if let Some(n) = self.max_blocks_held {
            t.push_str(&format!("max_blocks_held = {n}\n"));
        }
        if let Some(n) = self.max_purchases_per_month {
            t.push_str(&format!("max_purchases_per_month = {n}\n"));
        }
        let (earliest, latest) = self.window;
        t.push_str(&format!("start_window = {{ earliest_in_days = {earliest}, latest_in_days = {latest} }}\n"));
        if !self.extra.is_empty() {
            t.push_str(&self.extra);
            t.push('\n');
        }
        t
    }

    /// The rule as validated at `now`; panics if it is invalid.
    pub fn rule(&self, now: DateTime<Utc>) -> Rule {
        Rule::from_toml(&self.toml(), now).unwrap_or_else(|e| panic!("{e}: {}", self.toml()))
    }
}

/// An offering of 1 x p5.48xlarge (8 GPUs) in `region` (AZ `{region}a`) for the day from
/// `start`, for `fee` USD in all.
pub fn p5_offering(region: &str, id: &str, start: DateTime<Utc>, fee: Decimal) -> Offering {
    offering::example(id, region, start, Money::parse(&fee.to_string(), "USD").unwrap())
}

/// The environment a capblock binary (a function or the CLI) needs to run as stack `stack`
/// against this test's simulator (EC2) and moto resources (table, alerts topic).
pub fn binary_env(sim: &Sim, aws: &Aws, stack: &str) -> Vec<(String, String)> {
    // The binaries run on the simulator's clock, as a deployed stack runs on the wall clock.
    let clock = format!("{}/_sim/clock", sim.url.trim_end_matches('/'));
    [
        ("AWS_ENDPOINT_URL_EC2", sim.url.as_str()),
        ("AWS_ENDPOINT_URL_RAM", sim.url.as_str()),
        ("CAPBLOCK_SIMULATED_CLOCK_URL", clock.as_str()),
        ("CAPBLOCK_TABLE", aws.table.as_str()),
        ("CAPBLOCK_ALERTS_TOPIC_ARN", aws.alerts_topic.as_str()),
        ("CAPBLOCK_STACK", stack),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Each alert's `eventType`, in order, after checking every alert against the Slack schema.
pub fn event_types(alerts: &[Published]) -> Vec<String> {
    alerts
        .iter()
        .map(|a| {
            assert_slack_schema(&a.body);
            a.body["metadata"]["eventType"].as_str().unwrap().to_string()
        })
        .collect()
}

/// What a scan or track test runs on: its own simulator and moto resources, the EC2 adapter on
/// that simulator, a store, a notifier, the accelerator catalog the scanner fills, recorded
/// reminders, the scanner's and the tracker's settings, and the test's clock, which
/// [`Rig::advance_minutes`] moves together with the simulator's.
pub struct Rig {
    pub sim: Sim,
    pub aws: Aws,
    pub market: Ec2Market,
    pub store: DynamoStore,
    pub notifier: Delivery,
    /// The hand-off's SSM, Auto Scaling, Resource Groups and EKS, on moto.
    pub ssm: Ssm,
    pub groups: AutoScaling,
    pub reservation_groups: ResourceGroups,
    /// AWS RAM, served by the simulator (moto refuses capacity reservations).
    pub shares: Ram,
    /// Member accounts' hand-off roles, assumed through moto's STS.
    pub accounts: AssumedAccounts,
    pub nodegroups: Eks,
    pub catalog: Mutex<AcceleratorCatalog>,
    pub reminders: MemoryReminders,
    pub scan: ScanSettings,
    pub track: TrackSettings,
    clock: Mutex<DateTime<Utc>>,
}

impl Rig {
    /// A simulator on `scenario` whose adapter uses `timeouts`, fresh moto resources named after
    /// `name`, and the test clock at `clock`. It scans and tracks as live stack `stack` with no
    /// account budget, 4 concurrent queries per region, payment warnings 6 h and 1 h before the
    /// deadline, only this stack's untracked blocks adopted and no regions besides the rules';
    /// a test changes `scan` and `track` as it needs.
    pub async fn start(
        name: &str,
        scenario: &str,
        timeouts: aws_config::timeout::TimeoutConfig,
        clock: DateTime<Utc>,
        stack: &str,
    ) -> Rig {
        let sim = Sim::start(scenario).await;
        let market = Ec2Market::new(sim.sdk(timeouts.clone()).await);
        let shares = Ram::new(sim.sdk(timeouts).await);
        let aws = Aws::fresh(name).await;
        Rig {
            store: aws.store(),
            notifier: aws.notifier(),
            ssm: Ssm::new(aws.sdk.clone()),
            groups: AutoScaling::new(aws.sdk.clone()),
            reservation_groups: ResourceGroups::new(aws.sdk.clone()),
            nodegroups: Eks::new(aws.sdk.clone()),
            shares,
            accounts: AssumedAccounts::new(aws.sdk.clone(), stack),
            sim,
            aws,
            market,
            catalog: Mutex::new(AcceleratorCatalog::new()),
            reminders: MemoryReminders::default(),
            scan: ScanSettings {
                stack: StackSettings {
                    name: stack.into(),
                    mode: Mode::Live,
                    account_budget: None,
                    team_budgets: Default::default(),
                },
                describe: fast_describe(),
                settles: true,
            },
            track: TrackSettings {
                stack: StackSettings {
                    name: stack.into(),
                    mode: Mode::Live,
                    account_budget: None,
                    team_budgets: Default::default(),
                },
                payment_warning_hours: vec![6, 1],
                adopt_untagged: false,
                regions: vec![],
            },
            clock: Mutex::new(clock),
        }
    }

    /// [`Rig::start`] with quick timeouts, at `clock` (RFC 3339), its scan pacing itself on a
    /// sped-up describe limit (one call per 100 ms at half of it, 3 s of asking a run): for a
    /// simulator whose describe limit is sped up the same way.
    pub async fn paced(name: &str, scenario: &str, clock: &str, stack: &str) -> Rig {
        let at = clock.parse().expect("an RFC 3339 clock");
        let mut h = Rig::start(name, scenario, crate::quick_timeouts(), at, stack).await;
        h.scan.describe = capblock_shared::domain::plan::DescribeBudget::for_refill(
            std::time::Duration::from_millis(100),
            0.5,
            std::time::Duration::from_secs(3),
        );
        h
    }

    pub fn now(&self) -> DateTime<Utc> {
        *self.clock.lock().unwrap()
    }

    /// Moves the simulator's clock and the test's together.
    pub async fn advance_minutes(&self, minutes: i64) {
        self.sim.advance_secs(minutes * 60).await;
        *self.clock.lock().unwrap() += Duration::minutes(minutes);
    }

    pub async fn advance_hours(&self, hours: i64) {
        self.sim.advance_hours(hours).await;
        *self.clock.lock().unwrap() += Duration::hours(hours);
    }

    pub async fn put_rules(&self, rules: &[Rule]) {
        for r in rules {
            self.store.put_rule(r, None).await.unwrap();
        }
    }

    /// A scan on this rig's store and catalog with `market` and `notifier` (the rig's own or a
    /// test's stand-ins).
    pub fn scanner<'a, M: ?Sized, N: ?Sized>(
        &'a self,
        market: &'a M,
        notifier: &'a N,
        settings: &'a ScanSettings,
    ) -> Scanner<'a, M, DynamoStore, N> {
        Scanner { market, store: &self.store, notifier, catalog: &self.catalog, settings, members: &[] }
    }

    /// A scan on this rig's own market, store, notifier and settings that asks through `members`,
    /// member accounts lending their describe limits.
    pub fn with_members<'a>(
        &'a self,
        members: &'a [capblock_shared::ports::MemberMarket],
    ) -> Scanner<'a, Ec2Market, DynamoStore, Delivery> {
        Scanner { members, ..self.scanner(&self.market, &self.notifier, &self.scan) }
    }

    /// The hand-off's actions on moto, the block's instances from the simulator.
    pub fn action_runner(&self) -> ActionRunner<'_> {
        ActionRunner {
            parameters: &self.ssm,
            groups: &self.groups,
            commands: &self.ssm,
            instances: &self.market,
            reservation_groups: &self.reservation_groups,
            nodegroups: &self.nodegroups,
            shares: &self.shares,
            accounts: Some(&self.accounts),
        }
    }

    /// A tracker run on this rig's market and store with `notifier` and `reminders`, its
    /// hand-off actions on [`Rig::action_runner`].
    pub fn tracker<'a, N: ?Sized, R: ?Sized>(
        &'a self,
        notifier: &'a N,
        reminders: &'a R,
        settings: &'a TrackSettings,
    ) -> Tracker<'a, Ec2Market, DynamoStore, N, R> {
        Tracker {
            market: &self.market,
            store: &self.store,
            notifier,
            reminders,
            settings,
            action_runner: Some(self.action_runner()),
        }
    }

    /// One scan now with the rig's own market, notifier and settings; it must succeed.
    pub async fn scan(&self) -> ScanReport {
        self.scanner(&self.market, &self.notifier, &self.scan).run(self.now()).await.unwrap()
    }

    /// One tracker run now with `settings` and the rig's own notifier and recorded reminders;
    /// it must succeed with no errors and no failed region.
    pub async fn track_with(&self, settings: &TrackSettings) -> TrackReport {
        let report = self.tracker(&self.notifier, &self.reminders, settings).run(self.now()).await.unwrap();
        assert!(report.errors.is_empty() && report.failed_regions.is_empty(), "{report:#?}");
        report
    }

    /// [`Rig::track_with`] the rig's own tracker settings.
    pub async fn track(&self) -> TrackReport {
        self.track_with(&self.track).await
    }

    /// Stores `rule`, buys one block for it through a scan and returns its reservation id; the
    /// purchase alert, the only one, is drained.
    pub async fn buy(&self, rule: &Rule) -> String {
        self.put_rules(std::slice::from_ref(rule)).await;
        let report = self.scan().await;
        let Some(Outcome::Bought { reservation_id, .. }) = report.outcomes[0].action.clone() else {
            panic!("{report:#?}")
        };
        let alerts = self.aws.alerts().await;
        assert_eq!(event_types(&alerts), ["purchased"]);
        reservation_id
    }

    /// The stored block `id`, which must exist.
    pub async fn block(&self, id: &str) -> Block {
        self.store.get_block(id).await.unwrap().unwrap()
    }
}

/// A describe budget for tests that are not about EC2's describe limit: calls 10 ms apart, up
/// to 5 s of asking. Their scenarios lift the simulator's limit (see [`ScenarioToml::new`]).
pub fn fast_describe() -> capblock_shared::domain::plan::DescribeBudget {
    capblock_shared::domain::plan::DescribeBudget::for_refill(
        std::time::Duration::from_millis(10),
        1.0,
        std::time::Duration::from_secs(5),
    )
}

/// capblock's record of an example block: 2 x p5.48xlarge in us-east-2, 12-03 to 12-10 11:30,
/// scheduled, bought by rule `train`. Built as the tracker adopts EC2's reservation of it (the
/// rule from its tag), with the 8 accelerators a p5.48xlarge has.
pub fn example_block(reservation_id: &str) -> Block {
    let reservation = Reservation {
        id: reservation_id.to_string(),
        arn: Some(format!("arn:aws:ec2:us-east-2:111122223333:capacity-reservation/{reservation_id}")),
        region: "us-east-2".parse().unwrap(),
        availability_zone: "us-east-2a".into(),
        instance_type: "p5.48xlarge".parse().unwrap(),
        instance_count: 2,
        start: "2026-12-03T11:30:00Z".parse().unwrap(),
        end: "2026-12-10T11:30:00Z".parse().unwrap(),
        state: "scheduled".into(),
        reservation_type: Some("capacity-block".into()),
        tags: [(RULE_TAG.to_string(), "train".to_string())].into(),
        capacity_block_id: None,
    };
    let purchased_at = "2026-12-01T09:00:00Z".parse().unwrap();
    Block { accelerators_per_instance: Some(8), ..Block::adopted(&reservation, true, purchased_at) }
}
