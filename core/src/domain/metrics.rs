//! The operator's metrics, as CloudWatch embedded metric format (EMF) documents: JSON log lines
//! CloudWatch Logs turns into metrics, so a function publishes them without an API call (and
//! without the IAM, latency and failure mode of PutMetricData).
//!
//! Pure: a `Batch` is filled through one typed method per thing measured (a metric cannot be
//! given the wrong dimensions) and rendered at the time it is given; the functions' edge
//! (`lambda::emit`) writes the lines. The catalogue, `ALL`, is what the dashboard may name.
//!
//! Every metric is in namespace `capblock` with a `Stack` dimension first, so two stacks in one
//! account never mix. Money is in the rule's currency (USD), as a plain number (EMF has no
//! currency unit); hours likewise (CloudWatch's time units stop at seconds).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde_json::{Map, Value, json};

use super::ids::{InstanceType, Region};

pub const NAMESPACE: &str = "capblock";
/// The dimension every metric carries first.
pub const STACK: &str = "Stack";

/// CloudWatch's unit names (the subset capblock uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Percent,
    Seconds,
    /// Dollars and hours: CloudWatch has no unit for either.
    None,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Percent => "Percent",
            Unit::Seconds => "Seconds",
            Unit::None => "None",
        }
    }
}

/// One metric capblock emits: its name, unit and the dimensions after `Stack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
    pub dimensions: &'static [&'static str],
}

const fn metric(name: &'static str, unit: Unit, dimensions: &'static [&'static str]) -> Metric {
    Metric { name, unit, dimensions }
}

// From scans. The price per accelerator-hour is keyed by region and instance type; UltraServer
// offerings, once capblock buys them, add their own dimension set here (`Region`,
// `UltraServerType`) through a method beside `Batch::price`, leaving these series unchanged.
pub const PRICE_PER_ACCELERATOR_HOUR: Metric =
    metric("PricePerAcceleratorHour", Unit::None, &["Region", "InstanceType"]);
pub const ULTRASERVER_PRICE_PER_ACCELERATOR_HOUR: Metric =
    metric("UltraServerPricePerAcceleratorHour", Unit::None, &["Region", "UltraServerType"]);
pub const MAX_PRICE_PER_ACCELERATOR_HOUR: Metric = metric("MaxPricePerAcceleratorHour", Unit::None, &["Rule"]);
pub const QUESTIONS_ASKED: Metric = metric("QuestionsAsked", Unit::Count, &["Region"]);
pub const QUESTIONS_ANSWERED: Metric = metric("QuestionsAnswered", Unit::Count, &["Region"]);
pub const QUESTIONS_THROTTLED: Metric = metric("QuestionsThrottled", Unit::Count, &["Region"]);
pub const QUESTIONS_CARRIED_OVER: Metric = metric("QuestionsCarriedOver", Unit::Count, &["Region"]);
pub const DESCRIBE_BUDGET_USED: Metric = metric("DescribeBudgetUsed", Unit::Percent, &["Region"]);
// How well each region is covered, as a scan leaves it (`plan::Coverage`); the metrics keep
// the names the dashboard and the alarms know.
pub const WATCH_QUESTIONS: Metric = metric("WatchQuestions", Unit::Count, &["Region"]);
pub const WATCH_CYCLE_SECONDS: Metric = metric("WatchCycleSeconds", Unit::Seconds, &["Region"]);
pub const WATCH_MEDIAN_AGE_SECONDS: Metric = metric("WatchMedianAgeSeconds", Unit::Seconds, &["Region"]);
pub const WATCH_PACE_SECONDS: Metric = metric("WatchPaceSeconds", Unit::Seconds, &["Region"]);
pub const WATCH_CONTENDED: Metric = metric("WatchContended", Unit::Count, &["Region"]);
// From the tracker.
pub const BLOCKS: Metric = metric("Blocks", Unit::Count, &["State"]);
pub const BUDGET_COMMITTED: Metric = metric("BudgetCommitted", Unit::None, &["Budget"]);
pub const BUDGET_SPENT: Metric = metric("BudgetSpent", Unit::None, &["Budget"]);
pub const BUDGET_LIMIT: Metric = metric("BudgetLimit", Unit::None, &["Budget"]);
pub const HOURS_TO_PAYMENT_DEADLINE: Metric = metric("HoursToPaymentDeadline", Unit::None, &[]);
pub const HOURS_TO_TERMINATION: Metric = metric("HoursToTermination", Unit::None, &[]);
// Each active block: what its instances are used for (`domain::usage`) and its health.
pub const IDLE_INSTANCES: Metric = metric("IdleInstances", Unit::Count, &["Reservation"]);
pub const IDLE_COST: Metric = metric("IdleCost", Unit::None, &["Reservation"]);
pub const UTILIZATION: Metric = metric("Utilization", Unit::Percent, &["Reservation"]);
pub const UNAVAILABLE_INSTANCES: Metric = metric("UnavailableInstances", Unit::Count, &["Reservation"]);
// From every function.
pub const ERRORS: Metric = metric("Errors", Unit::Count, &["Function", "Kind"]);

/// Every metric capblock emits.
pub const ALL: &[Metric] = &[
    PRICE_PER_ACCELERATOR_HOUR,
    ULTRASERVER_PRICE_PER_ACCELERATOR_HOUR,
    MAX_PRICE_PER_ACCELERATOR_HOUR,
    QUESTIONS_ASKED,
    QUESTIONS_ANSWERED,
    QUESTIONS_THROTTLED,
    QUESTIONS_CARRIED_OVER,
    DESCRIBE_BUDGET_USED,
    WATCH_QUESTIONS,
    WATCH_CYCLE_SECONDS,
    WATCH_MEDIAN_AGE_SECONDS,
    WATCH_PACE_SECONDS,
    WATCH_CONTENDED,
    BLOCKS,
    BUDGET_COMMITTED,
    BUDGET_SPENT,
    BUDGET_LIMIT,
    HOURS_TO_PAYMENT_DEADLINE,
    HOURS_TO_TERMINATION,
    IDLE_INSTANCES,
    IDLE_COST,
    UTILIZATION,
    UNAVAILABLE_INSTANCES,
    ERRORS,
];

/// The `Budget` dimension's value for the account-wide budget (a rule's is its id).
pub const ACCOUNT_BUDGET: &str = "account";

/// The `Budget` dimension's value for a team's budget: `team:<name>` (a rule id has no colon,
/// so a team never reads as a rule of the same name).
pub fn team_budget(team: &str) -> String {
    format!("team:{team}")
}

/// How a scan used one region's questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Questions {
    /// Calls sent (a throttled question asked again counts again).
    pub asked: usize,
    pub answered: usize,
    /// Calls EC2 throttled.
    pub throttled: usize,
    pub carried_over: usize,
    /// The calls the describe budget allowed this run.
    pub allowed: usize,
}

/// How well one region is covered after a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoverageFigures {
    /// Distinct questions the rules ask of the region.
    pub questions: usize,
    /// The longest and the median time since each question was last answered, seconds.
    pub cycle_secs: u64,
    pub median_age_secs: u64,
    /// The learned gap between two calls, milliseconds.
    pub pace_ms: u64,
    /// Refusals capblock's own pace does not explain: an estimate of others' calls refused
    /// while capblock asked.
    pub contended: usize,
}

/// A group's key: the dimension names after Stack, and their values.
type GroupKey = (Vec<&'static str>, Vec<String>);

/// Metrics measured at one instant for one stack. Samples with the same dimension values go
/// into one document, as EMF intends.
#[derive(Debug, Clone)]
pub struct Batch {
    stack: String,
    at: DateTime<Utc>,
    /// Each group's metrics and values, in the order they were put.
    groups: BTreeMap<GroupKey, Vec<(Metric, f64)>>,
}

impl Batch {
    pub fn new(stack: &str, at: DateTime<Utc>) -> Batch {
        Batch { stack: stack.to_string(), at, groups: BTreeMap::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// `values` are the metric's dimension values, in its order: only the typed methods below
    /// call this, so their count always matches. A value that is not a finite number (EMF
    /// cannot carry it) or an empty dimension value is left out.
    fn put(&mut self, m: Metric, values: &[&str], value: f64) {
        if !value.is_finite() || values.len() != m.dimensions.len() || values.iter().any(|v| v.trim().is_empty()) {
            return;
        }
        let key = (m.dimensions.to_vec(), values.iter().map(|v| v.to_string()).collect());
        let group = self.groups.entry(key).or_default();
        group.retain(|(g, _)| g.name != m.name);
        group.push((m, value));
    }

    fn money(m: Metric, v: Decimal) -> (Metric, f64) {
        (m, v.to_f64().unwrap_or(f64::NAN))
    }

    /// The cheapest price per accelerator-hour a scan saw for one region and instance type.
    pub fn price(&mut self, region: &Region, instance_type: &InstanceType, per_accelerator_hour: Decimal) {
        let (m, v) = Batch::money(PRICE_PER_ACCELERATOR_HOUR, per_accelerator_hour);
        self.put(m, &[region.as_str(), instance_type.as_str()], v);
    }

    /// A rule's threshold, drawn against the prices.
    /// An UltraServer offering's price, over every accelerator of every UltraServer in it.
    pub fn ultraserver_price(&mut self, region: &Region, ultraserver_type: &str, per_accelerator_hour: Decimal) {
        let (m, v) = Batch::money(ULTRASERVER_PRICE_PER_ACCELERATOR_HOUR, per_accelerator_hour);
        self.put(m, &[region.as_str(), ultraserver_type], v);
    }

    pub fn threshold(&mut self, rule: &str, max_per_accelerator_hour: Decimal) {
        let (m, v) = Batch::money(MAX_PRICE_PER_ACCELERATOR_HOUR, max_per_accelerator_hour);
        self.put(m, &[rule], v);
    }

    /// A scan's questions to one region, and the share of its describe budget they used.
    pub fn questions(&mut self, region: &Region, q: Questions) {
        let r = [region.as_str()];
        self.put(QUESTIONS_ASKED, &r, q.asked as f64);
        self.put(QUESTIONS_ANSWERED, &r, q.answered as f64);
        self.put(QUESTIONS_THROTTLED, &r, q.throttled as f64);
        self.put(QUESTIONS_CARRIED_OVER, &r, q.carried_over as f64);
        if q.allowed > 0 {
            self.put(DESCRIBE_BUDGET_USED, &r, 100.0 * q.asked as f64 / q.allowed as f64);
        }
    }

    /// How well one region is covered.
    pub fn coverage(&mut self, region: &Region, w: CoverageFigures) {
        let r = [region.as_str()];
        self.put(WATCH_QUESTIONS, &r, w.questions as f64);
        self.put(WATCH_CYCLE_SECONDS, &r, w.cycle_secs as f64);
        self.put(WATCH_MEDIAN_AGE_SECONDS, &r, w.median_age_secs as f64);
        if w.pace_ms > 0 {
            self.put(WATCH_PACE_SECONDS, &r, w.pace_ms as f64 / 1000.0);
        }
        self.put(WATCH_CONTENDED, &r, w.contended as f64);
    }

    /// How many blocks are in `state` (a `BlockState` name).
    pub fn blocks(&mut self, state: &str, count: usize) {
        self.put(BLOCKS, &[state], count as f64);
    }

    /// One budget this month: a rule's (its id), a team's (`team_budget`) or the account's
    /// (`ACCOUNT_BUDGET`).
    pub fn budget(&mut self, owner: &str, committed: Decimal, spent: Decimal, limit: Decimal) {
        for (m, v) in [
            Batch::money(BUDGET_COMMITTED, committed),
            Batch::money(BUDGET_SPENT, spent),
            Batch::money(BUDGET_LIMIT, limit),
        ] {
            self.put(m, &[owner], v);
        }
    }

    /// Hours from now to the next payment deadline of a block waiting for payment.
    pub fn hours_to_payment_deadline(&mut self, deadline: DateTime<Utc>) {
        self.put(HOURS_TO_PAYMENT_DEADLINE, &[], hours(deadline - self.at));
    }

    /// Hours from now to the next termination time of a held block.
    pub fn hours_to_termination(&mut self, termination: DateTime<Utc>) {
        self.put(HOURS_TO_TERMINATION, &[], hours(termination - self.at));
    }

    /// One active block's use: instances idle now, what its idle time cost so far (None: fee
    /// unknown), used over paid instance-time so far (None: not sampled yet), and instances EC2
    /// took out of it.
    pub fn block_use(
        &mut self,
        reservation: &str,
        idle: u32,
        idle_cost: Option<Decimal>,
        utilization_percent: Option<Decimal>,
        unavailable: u32,
    ) {
        self.put(IDLE_INSTANCES, &[reservation], f64::from(idle));
        if let Some(c) = idle_cost {
            let (m, v) = Batch::money(IDLE_COST, c);
            self.put(m, &[reservation], v);
        }
        if let Some(u) = utilization_percent {
            self.put(UTILIZATION, &[reservation], u.to_f64().unwrap_or(0.0));
        }
        self.put(UNAVAILABLE_INSTANCES, &[reservation], f64::from(unavailable));
    }

    /// One failed invocation of `function`, by error kind (`FunctionError::kind`).
    pub fn error(&mut self, function: &str, kind: &str) {
        self.errors(function, kind, 1);
    }

    /// `count` failures of one kind (items skipped in one run).
    pub fn errors(&mut self, function: &str, kind: &str, count: u64) {
        self.put(ERRORS, &[function, kind], count as f64);
    }

    /// The EMF documents, one per group of dimension values.
    pub fn documents(&self) -> Vec<Value> {
        self.groups
            .iter()
            .map(|((names, values), metrics)| {
                let mut dims = vec![STACK];
                dims.extend(names.iter().copied());
                let mut doc = Map::new();
                doc.insert(
                    "_aws".into(),
                    json!({
                        "Timestamp": self.at.timestamp_millis(),
                        "CloudWatchMetrics": [{
                            "Namespace": NAMESPACE,
                            "Dimensions": [dims],
                            "Metrics": metrics
                                .iter()
                                .map(|(m, _)| json!({"Name": m.name, "Unit": m.unit.as_str()}))
                                .collect::<Vec<_>>(),
                        }],
                    }),
                );
                doc.insert(STACK.into(), Value::from(self.stack.clone()));
                for (n, v) in names.iter().zip(values) {
                    doc.insert((*n).into(), Value::from(v.clone()));
                }
                for (m, v) in metrics {
                    doc.insert(m.name.into(), json!(v));
                }
                Value::Object(doc)
            })
            .collect()
    }

    /// The documents as log lines, one JSON object each.
    pub fn lines(&self) -> Vec<String> {
        self.documents().iter().map(Value::to_string).collect()
    }
}

fn hours(d: chrono::Duration) -> f64 {
    d.num_seconds() as f64 / 3600.0
}

#[cfg(test)]
mod tests;
