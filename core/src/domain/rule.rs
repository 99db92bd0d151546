//! Purchase rules: what to buy, where, when and at what price. Operators write them as TOML;
//! `RuleSpec::validate` turns a file into a `Rule` or into the full list of what is wrong
//! with it, each problem named by its field.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::actions::{self, Action, ActionLimits, ActionSpec};
use super::ids::{InstanceType, Region, is_team_name, prefix};
use super::lifecycle::termination_lead;
use super::money::{Currency, Money};
use super::offering::Offering;
use super::share::{MAX_SHARE_PRINCIPALS, SharePrincipal};
use super::ultraserver::{self, UltraServerType, UltraServers};
use super::usage::DEFAULT_IDLE_ALERT_MINUTES;

/// How far ahead EC2 sells Capacity Blocks.
pub const MAX_START_AHEAD: Duration = Duration::weeks(8);
pub const MAX_INSTANCES_PER_BLOCK: u32 = 64;
const MAX_TAGS: usize = 40;
/// Questions one rule may ask per scan (regions x types x counts x durations). EC2 answers a
/// few a minute per region, so a rule past this would take hours to ask each question once
/// and crowd out the others (the scan has a total bound too, `app::scan::MAX_QUESTIONS_PER_SCAN`).
pub const MAX_QUESTIONS_PER_RULE: usize = 256;
/// Distinct regions one rule may name. Each region is visited on its own (clients, memory,
/// instance types, paced questions), so a rule of many cheap questions over many regions would
/// outgrow a scan's time and memory (the scan has a total bound too,
/// `app::scan::MAX_REGIONS_PER_SCAN`).
pub const MAX_REGIONS_PER_RULE: usize = 16;
/// A description is a note for people, not a document: the item must stay far below
/// DynamoDB's 400 KB.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Sane maximums for a rule's own limits; a rule goes past them only with `unlimited = true`,
/// so a typo (an extra zero) cannot lift a limit that guards money.
pub const MAX_PURCHASES_PER_MONTH: u32 = 10;
pub const MAX_BLOCKS_HELD: u32 = 10;
/// In the rule's currency.
pub const MAX_MONTHLY_BUDGET: u32 = 1_000_000;
/// The bounds of every amount a rule sets, in its currency, `unlimited` or not: the smallest
/// unit of a price (a threshold of 1e-28 made every ratio to it overflow), and amounts far
/// past any Capacity Block (the dearest sell for tens of dollars per accelerator-hour).
pub const MIN_AMOUNT: Decimal = Decimal::from_parts(1, 0, 0, false, 2); // 0.01
pub const MAX_PRICE_PER_ACCELERATOR_HOUR: u32 = 10_000;
pub const MAX_AMOUNT: u64 = 1_000_000_000_000;
/// EC2's tag rules: keys 1-128 and values 0-256 Unicode characters, of letters, digits, spaces
/// and these.
const TAG_KEY_CHARS: usize = 128;
const TAG_VALUE_CHARS: usize = 256;
const TAG_PUNCTUATION: &str = "_.:/=+-@";
/// Key prefixes that are not the rule's to set (compared without case): EC2 reserves `aws:`,
/// and capblock's own tags decide what a reservation belongs to.
const RESERVED_TAG_PREFIXES: [&str; 2] = ["aws:", "capblock:"];

/// What the scan may do for a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Decide and announce, call PurchaseCapacityBlock with DryRun: nothing is bought.
    #[default]
    DryRun,
    /// Buy for real.
    Live,
    /// Decide, store the decision and ask a person in Slack: `capblock approve <intent>` buys it.
    Approval,
}

impl Mode {
    /// The stricter of the stack's and the rule's modes: a rule can be live only in a live stack.
    /// Approval in a live stack means "ask"; in a dry-run stack it stays a dry run.
    pub fn and(self, other: Mode) -> Mode {
        match (self, other) {
            (Mode::DryRun, _) | (_, Mode::DryRun) => Mode::DryRun,
            (Mode::Live, Mode::Live) => Mode::Live,
            _ => Mode::Approval,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::DryRun => "dry-run",
            Mode::Live => "live",
            Mode::Approval => "approval",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dry-run" => Ok(Mode::DryRun),
            "live" => Ok(Mode::Live),
            "approval" => Ok(Mode::Approval),
            other => Err(format!("unknown mode {other:?}: expected \"dry-run\", \"live\" or \"approval\"")),
        }
    }
}

/// An amount as written in TOML: a string ("3.10", exact) or a number (3.10, read through its
/// shortest decimal form so 3.1 stays 3.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AmountText {
    Text(String),
    Int(i64),
    Float(f64),
}

impl AmountText {
    fn to_decimal(&self) -> Result<Decimal, String> {
        let text = match self {
            AmountText::Text(s) => s.trim().to_string(),
            AmountText::Int(i) => i.to_string(),
            AmountText::Float(f) if f.is_finite() => f.to_string(),
            AmountText::Float(f) => return Err(format!("{f} is not a finite number")),
        };
        Decimal::from_str_exact(&text).map_err(|_| format!("{text:?} is not a decimal number"))
    }
}

/// An instant as written in TOML: a TOML datetime (`2026-12-05T11:30:00Z`) or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InstantText {
    Toml(toml::value::Datetime),
    Text(String),
}

impl InstantText {
    fn to_instant(&self) -> Result<DateTime<Utc>, String> {
        let text = match self {
            InstantText::Toml(d) => d.to_string(),
            InstantText::Text(s) => s.clone(),
        };
        DateTime::parse_from_rfc3339(&text)
            .map(|d| d.with_timezone(&Utc))
            .map_err(|_| format!("{text:?} is not an RFC 3339 instant with a zone, e.g. 2026-12-05T11:30:00Z"))
    }
}

/// When the block may start: either relative to the scan (`earliest_in_days`,
/// `latest_in_days`) or absolute (`earliest`, `latest`), not both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartWindowSpec {
    pub earliest_in_days: Option<i64>,
    pub latest_in_days: Option<i64>,
    pub earliest: Option<InstantText>,
    pub latest: Option<InstantText>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendSpec {
    pub max_price_per_accelerator_hour: AmountText,
    pub max_days: u32,
    #[serde(default = "default_decide_hours")]
    pub decide_hours_before_end: u32,
}

fn default_decide_hours() -> u32 {
    48
}
fn default_platform() -> String {
    "Linux/UNIX".into()
}
fn default_currency() -> String {
    "USD".into()
}
fn default_one() -> u32 {
    1
}
fn default_true() -> bool {
    true
}

/// A rule file as written, before validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default)]
    pub mode: Mode,
    pub regions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_types: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_counts: Vec<i64>,
    /// Instead of instance types and counts: UltraServer types (`u-p6e-gb200x72`, ...) and
    /// how many of them one block holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ultraserver_types: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ultraserver_counts: Vec<i64>,
    pub durations_days: Vec<i64>,
    pub start_window: StartWindowSpec,
    pub max_price_per_accelerator_hour: AmountText,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_fee: Option<AmountText>,
    pub monthly_budget: AmountText,
    #[serde(default = "default_currency")]
    pub currency: String,
    #[serde(default = "default_platform")]
    pub instance_platform: String,
    #[serde(default = "default_one")]
    pub max_blocks_held: u32,
    #[serde(default = "default_one")]
    pub max_purchases_per_month: u32,
    #[serde(default)]
    pub rebuy_on_payment_failure: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend: Option<ExtendSpec>,
    #[serde(default = "default_duration_tolerance")]
    pub duration_tolerance_hours: i64,
    #[serde(default)]
    pub local_zones: bool,
    /// Accept regions outside `KNOWN_REGIONS` (one launched after this release).
    #[serde(default)]
    pub allow_unknown_regions: bool,
    /// Lift the sane maximums of `max_purchases_per_month`, `max_blocks_held` and
    /// `monthly_budget`.
    #[serde(default)]
    pub unlimited: bool,
    /// Hand-off actions (`[[actions]]`): see `domain::handoff`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionSpec>,
    /// Minutes part of an active block may stay idle (paid, nothing running) before capblock
    /// says so; 0 never says (`domain::usage`).
    #[serde(default = "default_idle_alert", skip_serializing_if = "is_default_idle_alert")]
    pub idle_alert_minutes: i64,
    /// Days a rule may see offerings, none at or under its threshold, before capblock says so
    /// once in its thread (`domain::market_move`); 0 never says.
    #[serde(default = "default_drought_days", skip_serializing_if = "is_default_drought_days")]
    pub drought_days: i64,
    /// The team whose monthly budget (the stack's `TeamBudgets`) the rule's spend also draws on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Who the rule's blocks are shared with through AWS RAM once EC2 has them scheduled:
    /// account ids, OU ARNs or the Organization's ARN (`domain::share`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub share_with: Vec<String>,
    /// The account (one `share_with` reaches) where the rule's hand-off actions run, through its
    /// member stack's hand-off role; none: in this account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_account: Option<String>,
}

fn default_idle_alert() -> i64 {
    i64::from(DEFAULT_IDLE_ALERT_MINUTES)
}

fn is_default_idle_alert(m: &i64) -> bool {
    *m == default_idle_alert()
}

fn default_idle_alert_u32() -> u32 {
    DEFAULT_IDLE_ALERT_MINUTES
}

fn default_drought_days() -> i64 {
    i64::from(DEFAULT_DROUGHT_DAYS)
}

fn is_default_drought_days(d: &i64) -> bool {
    *d == default_drought_days()
}

fn default_drought_days_u32() -> u32 {
    DEFAULT_DROUGHT_DAYS
}

/// A week: offerings come and go daily, so a week with none at the threshold is a market that
/// moved away from the rule rather than a quiet spell.
pub const DEFAULT_DROUGHT_DAYS: u32 = 7;

/// The longest `drought_days`: the history the check reads back is bounded by it.
pub const MAX_DROUGHT_DAYS: i64 = 60;

/// The longest `idle_alert_minutes`: a week, longer than most blocks.
pub const MAX_IDLE_ALERT_MINUTES: i64 = 7 * 24 * 60;

/// How far a same-day closest match may be from the asked duration by default: blocks end at
/// 11:30 UTC, so a block starting today at 04:55 and asked for a day comes as 6 h 35 min or
/// 30 h 35 min. Twelve hours takes the nearer one whatever the time of day, never both.
pub const DEFAULT_DURATION_TOLERANCE_HOURS: u32 = 12;

fn default_duration_tolerance() -> i64 {
    i64::from(DEFAULT_DURATION_TOLERANCE_HOURS)
}

/// One problem in a rule, named by its field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleProblem {
    pub field: String,
    pub message: String,
}

impl fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error("rule file is not valid TOML for a rule: {0}")]
    Syntax(String),
    #[error("rule {id:?} has {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid { id: String, problems: Vec<RuleProblem> },
}

/// A parser's "unknown field `X`, expected one of `a`, `b`, ..." with the closest known key
/// named, when one is close enough to be a misspelling ("did you mean `b`?").
fn with_suggestion(message: &str) -> String {
    let Some((_, rest)) = message.split_once("unknown field `") else { return message.to_string() };
    let Some((unknown, rest)) = rest.split_once('`') else { return message.to_string() };
    let Some((_, expected)) = rest.split_once("expected one of ") else { return message.to_string() };
    let known =
        expected.split(',').filter_map(|k| k.trim().trim_start_matches("or ").strip_prefix('`')?.split('`').next());
    let closest = known.map(|k| (strsim::levenshtein(unknown, k), k)).min();
    match closest {
        Some((d, k)) if d <= 2.max(unknown.len() / 4) => format!("{message} (did you mean `{k}`?)"),
        _ => message.to_string(),
    }
}

/// The top-level keys a rule file may have, as the parser itself lists them (so this list cannot
/// drift from `RuleSpec`'s fields): its "unknown field" message for a key no rule has.
fn known_keys() -> Vec<String> {
    let Err(e) = toml::from_str::<RuleSpec>("capblock_no_such_key = 0\n") else { return Vec::new() };
    let message = e.to_string();
    let Some((_, expected)) = message.split_once("expected one of ") else { return Vec::new() };
    expected
        .split(',')
        .filter_map(|k| k.trim().trim_start_matches("or ").strip_prefix('`')?.split('`').next().map(str::to_string))
        .collect()
}

/// Each top-level key of `text` no rule has, in the file's order, with its line and the closest
/// known key when it looks like a misspelling. Empty when the text does not parse as TOML (the
/// parser's own error says where) or every key is known.
fn unknown_keys(text: &str) -> Vec<String> {
    let Ok(table) = toml::de::DeTable::parse(text) else { return Vec::new() };
    let known = known_keys();
    if known.is_empty() {
        return Vec::new();
    }
    let mut unknown: Vec<(usize, String)> = table
        .get_ref()
        .keys()
        .filter(|k| !known.iter().any(|n| n == k.get_ref().as_ref()))
        .map(|k| {
            let key: &str = k.get_ref().as_ref();
            let line = text[..k.span().start.min(text.len())].matches('\n').count() + 1;
            let closest = known.iter().map(|n| (strsim::levenshtein(key, n), n)).min();
            let hint = match closest {
                Some((d, n)) if d <= 2.max(key.len() / 4) => format!(" (did you mean `{n}`?)"),
                _ => String::new(),
            };
            (k.span().start, format!("unknown field `{key}` at line {line}{hint}"))
        })
        .collect();
    unknown.sort();
    unknown.into_iter().map(|(_, m)| m).collect()
}

/// Duration steps EC2 sells: 1-day steps to 14 days, then 7-day steps to 182 days.
pub fn is_sellable_duration_days(days: i64) -> bool {
    (1..=14).contains(&days) || (days > 14 && days <= 182 && days % 7 == 0)
}

const PLATFORMS: &[&str] = &[
    "Linux/UNIX",
    "Red Hat Enterprise Linux",
    "SUSE Linux",
    "Windows",
    "Ubuntu Pro",
    "Linux with SQL Server Standard",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartWindow {
    Relative { earliest: Duration, latest: Duration },
    Absolute { earliest: DateTime<Utc>, latest: DateTime<Utc> },
}

impl StartWindow {
    /// The instants a block may start between, as seen at `now`; never earlier than `now`
    /// and never past what EC2 sells.
    pub fn resolve(&self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        // Saturating: `now` comes from outside, and the end of time is not worth a panic.
        let plus = |d: Duration| now.checked_add_signed(d).unwrap_or(DateTime::<Utc>::MAX_UTC);
        let (a, b) = match self {
            StartWindow::Relative { earliest, latest } => (plus(*earliest), plus(*latest)),
            StartWindow::Absolute { earliest, latest } => (*earliest, *latest),
        };
        (a.max(now), b.min(plus(MAX_START_AHEAD)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extend {
    pub max_price_per_accelerator_hour: Decimal,
    pub max_days: u32,
    pub decide_hours_before_end: u32,
}

/// A validated rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    pub description: String,
    pub enabled: bool,
    pub mode: Mode,
    pub regions: Vec<Region>,
    /// Empty for a rule that asks for UltraServers.
    pub instance_types: Vec<InstanceType>,
    pub instance_counts: Vec<u32>,
    /// Empty for a rule that asks for instances.
    #[serde(default)]
    pub ultraserver_types: Vec<UltraServerType>,
    #[serde(default)]
    pub ultraserver_counts: Vec<u32>,
    pub durations_days: Vec<u32>,
    pub start_window: StartWindow,
    pub currency: Currency,
    pub max_price_per_accelerator_hour: Decimal,
    pub max_total_fee: Option<Money>,
    pub monthly_budget: Money,
    pub instance_platform: String,
    pub max_blocks_held: u32,
    pub max_purchases_per_month: u32,
    pub rebuy_on_payment_failure: bool,
    pub tags: BTreeMap<String, String>,
    pub extend: Option<Extend>,
    /// A block may be this many hours shorter or longer than a duration the rule asks for
    /// (EC2's closest matches for blocks starting the same day).
    #[serde(default = "default_tolerance_u32")]
    pub duration_tolerance_hours: u32,
    /// Whether offerings in Local Zones may be bought.
    #[serde(default)]
    pub local_zones: bool,
    /// Kept so `rules show` tells why a region or a limit past the usual was accepted.
    #[serde(default)]
    pub allow_unknown_regions: bool,
    #[serde(default)]
    pub unlimited: bool,
    /// What to do for the workloads at points of each block's life (stored rules without the
    /// key have none).
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Stored rules without the key alert after the default hour.
    #[serde(default = "default_idle_alert_u32")]
    pub idle_alert_minutes: u32,
    /// See `RuleSpec::drought_days`; 0 never says.
    #[serde(default = "default_drought_days_u32")]
    pub drought_days: u32,
    /// Stored rules without the key belong to no team.
    #[serde(default)]
    pub team: Option<String>,
    /// Stored rules without the key share nothing.
    #[serde(default)]
    pub share_with: Vec<SharePrincipal>,
    /// Stored rules without the key act in this account.
    #[serde(default)]
    pub handoff_account: Option<String>,
}

fn default_tolerance_u32() -> u32 {
    DEFAULT_DURATION_TOLERANCE_HOURS
}

impl RuleSpec {
    pub fn from_toml(text: &str) -> Result<RuleSpec, RuleError> {
        // Every unknown key at once, in the file's order: the parser stops at the first one,
        // and a person fixing a file one run at a time would run it once per typo.
        let unknown = unknown_keys(text);
        match unknown.len() {
            0 => {}
            1 => return Err(RuleError::Syntax(unknown[0].clone())),
            n => return Err(RuleError::Syntax(format!("{n} unknown keys:\n  - {}", unknown.join("\n  - ")))),
        }
        toml::from_str(text).map_err(|e| RuleError::Syntax(with_suggestion(e.to_string().trim())))
    }

    /// Checks every field and reports every problem at once; `now` anchors absolute windows.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<Rule, RuleError> {
        let mut p = Problems::default();
        p.id_and_description(self);
        let regions = p.regions(self);
        let (instance_types, instance_counts, ultraserver_types, ultraserver_counts) = p.what_to_buy(self);
        let durations_days = p.durations(self);

        // Counted over the valid, distinct entries, so the problem is not repeated for a
        // list that is wrong anyway.
        p.question_bound([
            regions.len(),
            instance_types.len().max(ultraserver_types.len()),
            instance_counts.len().max(ultraserver_counts.len()),
            durations_days.len(),
        ]);

        let start_window = p.start_window(&self.start_window, now);

        let (currency, max_price, max_total_fee, budget) = p.money(self);
        p.platform_and_limits(self);
        p.tags(&self.tags);
        let extend = self.extend.as_ref().map(|x| p.extend(x, Decimal::from(MAX_PRICE_PER_ACCELERATOR_HOUR)));
        p.alert_and_tolerance(self);
        let actions = p.actions(self, &durations_days, &instance_counts, &ultraserver_types, &ultraserver_counts);
        p.team(self.team.as_deref());
        let share_with = p.share_with(&self.share_with, !ultraserver_types.is_empty());
        p.handoff_account(self.handoff_account.as_deref(), &self.share_with, &share_with);

        if !p.0.is_empty() {
            return Err(RuleError::Invalid { id: self.id.clone(), problems: p.0 });
        }
        let money = |d: Decimal| Money::new(d, currency).expect("checked within MIN_AMOUNT..=MAX_AMOUNT above");
        let rule = Rule {
            id: self.id.clone(),
            description: self.description.clone(),
            enabled: self.enabled,
            mode: self.mode,
            regions,
            instance_types,
            instance_counts,
            ultraserver_types,
            ultraserver_counts,
            durations_days,
            start_window,
            currency,
            max_price_per_accelerator_hour: max_price,
            max_total_fee: max_total_fee.map(money),
            monthly_budget: money(budget),
            instance_platform: self.instance_platform.clone(),
            max_blocks_held: self.max_blocks_held,
            max_purchases_per_month: self.max_purchases_per_month,
            rebuy_on_payment_failure: self.rebuy_on_payment_failure,
            tags: self.tags.clone(),
            extend,
            duration_tolerance_hours: self.duration_tolerance_hours as u32,
            local_zones: self.local_zones,
            allow_unknown_regions: self.allow_unknown_regions,
            unlimited: self.unlimited,
            actions,
            idle_alert_minutes: u32::try_from(self.idle_alert_minutes).unwrap_or(DEFAULT_IDLE_ALERT_MINUTES),
            drought_days: u32::try_from(self.drought_days).unwrap_or(DEFAULT_DROUGHT_DAYS),
            team: self.team.clone(),
            share_with,
            handoff_account: self.handoff_account.clone(),
        };
        // Judged on the valid rule: what it could buy is known only once every field is.
        match never_buys(&rule) {
            Some(problem) => Err(RuleError::Invalid { id: rule.id, problems: vec![problem] }),
            None => Ok(rule),
        }
    }
}

/// The least a block a rule accepts could cost, and the block: the rule's smallest (type,
/// count), for its shortest duration less `duration_tolerance_hours` (EC2's closest matches),
/// at `catalog::PRICE_FLOOR_PER_ACCELERATOR_HOUR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeastFee {
    pub fee: Decimal,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub accelerators: u32,
    pub hours: u32,
}

impl Rule {
    /// [`LeastFee`] over the (type, count)s the built-in accelerator table knows (a type it does
    /// not know proves nothing: it is left out), `None` when it knows none of them or the rule
    /// is not priced in USD (the floor is in USD).
    pub fn least_fee(&self) -> Option<LeastFee> {
        if self.currency != Currency::USD {
            return None;
        }
        let catalog = super::catalog::AcceleratorCatalog::new();
        let days = self.durations_days.iter().copied().min()?;
        let hours = (days * 24).saturating_sub(self.duration_tolerance_hours).max(1);
        self.asks()
            .into_iter()
            .filter_map(|a| {
                let accelerators = catalog.accelerators(&a.instance_type)?;
                let units = u64::from(hours) * u64::from(a.instance_count) * u64::from(accelerators);
                Some(LeastFee {
                    fee: Decimal::from(units) * super::catalog::PRICE_FLOOR_PER_ACCELERATOR_HOUR,
                    instance_type: a.instance_type,
                    instance_count: a.instance_count,
                    accelerators,
                    hours,
                })
            })
            .min_by_key(|l| l.fee)
    }
}

impl Rule {
    /// When `max_total_fee` is below what the least block this rule accepts costs at its own
    /// threshold, that in words: the cap, not the threshold, then sets the price it buys at (a
    /// valid rule, but one that waits for a price its threshold does not say). `None` when the
    /// cap is above, absent, or the accelerators are not known (`least_fee`).
    pub fn fee_cap_below_threshold(&self) -> Option<String> {
        let max = self.max_total_fee?;
        let least = self.least_fee()?;
        let units =
            Decimal::from(u64::from(least.hours) * u64::from(least.instance_count) * u64::from(least.accelerators));
        let at_threshold = units * self.max_price_per_accelerator_hour;
        if max.amount() >= at_threshold {
            return None;
        }
        let cur = self.currency;
        let round = |d: Decimal| d.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::ToZero);
        Some(format!(
            "{max} is below one block at the threshold: the least block this rule accepts ({} x {}, {} \
             accelerators each, for {}) costs {:.2} {cur} at {} {cur} per accelerator-hour, so it buys only at \
             {:.2} {cur} per accelerator-hour or less; raise max_total_fee to at least {:.2} or lower the threshold",
            least.instance_count,
            least.instance_type,
            least.accelerators,
            super::duration::compact(Duration::hours(i64::from(least.hours))),
            at_threshold.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::AwayFromZero),
            self.max_price_per_accelerator_hour.normalize(),
            round(max.amount() / units),
            at_threshold.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::AwayFromZero),
        ))
    }
}

/// `max_total_fee` below what any block the rule accepts could cost (`Rule::least_fee`): the
/// rule can never buy anything. Said with the figures and what would work.
fn never_buys(rule: &Rule) -> Option<RuleProblem> {
    let max = rule.max_total_fee?;
    let least = rule.least_fee()?;
    if max.amount() >= least.fee {
        return None;
    }
    let least_fee = least.fee.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::AwayFromZero);
    Some(RuleProblem {
        field: "max_total_fee".into(),
        message: format!(
            "{max} can never buy anything: the least a block this rule accepts could cost is {least_fee} {cur} \
             ({} x {}, {} accelerators each, for {} (the shortest of durations_days less \
             duration_tolerance_hours) at {} {cur} per accelerator-hour, less than any Capacity Block has sold for); \
             set max_total_fee to at least {least_fee}, or leave it out",
            least.instance_count,
            least.instance_type,
            least.accelerators,
            super::duration::compact(Duration::hours(i64::from(least.hours))),
            super::catalog::PRICE_FLOOR_PER_ACCELERATOR_HOUR,
            cur = rule.currency,
        ),
    })
}

impl Rule {
    /// The rule as a rule file says it: `validate` of what this gives is the rule again (with a
    /// relative start window, at any `now`). What `capblock rules show` prints, as TOML or JSON.
    pub fn to_spec(&self) -> RuleSpec {
        let amount = |d: Decimal| AmountText::Text(d.to_string());
        let start_window = match self.start_window {
            StartWindow::Relative { earliest, latest } => StartWindowSpec {
                earliest_in_days: Some(earliest.num_days()),
                latest_in_days: Some(latest.num_days()),
                ..Default::default()
            },
            StartWindow::Absolute { earliest, latest } => StartWindowSpec {
                earliest: Some(InstantText::Text(earliest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))),
                latest: Some(InstantText::Text(latest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))),
                ..Default::default()
            },
        };
        RuleSpec {
            id: self.id.clone(),
            description: self.description.clone(),
            enabled: self.enabled,
            mode: self.mode,
            regions: self.regions.iter().map(|r| r.to_string()).collect(),
            instance_types: self.instance_types.iter().map(|t| t.to_string()).collect(),
            instance_counts: self.instance_counts.iter().map(|&n| i64::from(n)).collect(),
            ultraserver_types: self.ultraserver_types.iter().map(|u| u.as_str().to_string()).collect(),
            ultraserver_counts: self.ultraserver_counts.iter().map(|&n| i64::from(n)).collect(),
            durations_days: self.durations_days.iter().map(|&d| i64::from(d)).collect(),
            start_window,
            max_price_per_accelerator_hour: amount(self.max_price_per_accelerator_hour),
            max_total_fee: self.max_total_fee.map(|m| amount(m.amount())),
            monthly_budget: amount(self.monthly_budget.amount()),
            currency: self.currency.to_string(),
            instance_platform: self.instance_platform.clone(),
            max_blocks_held: self.max_blocks_held,
            max_purchases_per_month: self.max_purchases_per_month,
            rebuy_on_payment_failure: self.rebuy_on_payment_failure,
            tags: self.tags.clone(),
            extend: self.extend.as_ref().map(|x| ExtendSpec {
                max_price_per_accelerator_hour: amount(x.max_price_per_accelerator_hour),
                max_days: x.max_days,
                decide_hours_before_end: x.decide_hours_before_end,
            }),
            duration_tolerance_hours: i64::from(self.duration_tolerance_hours),
            local_zones: self.local_zones,
            allow_unknown_regions: self.allow_unknown_regions,
            unlimited: self.unlimited,
            actions: self.actions.iter().map(ActionSpec::from).collect(),
            idle_alert_minutes: i64::from(self.idle_alert_minutes),
            drought_days: i64::from(self.drought_days),
            team: self.team.clone(),
            share_with: self.share_with.iter().map(|p| p.as_str().to_string()).collect(),
            handoff_account: self.handoff_account.clone(),
        }
    }
}

const TAG_CHARS_ALLOWED: &str = "tags hold only letters, digits, spaces and _ . : / = + - @";

/// EC2's tag alphabet: Unicode letters, digits and spaces, and `_ . : / = + - @`. No line
/// breaks or control characters: a tag ends up in consoles, logs and Slack.
fn tag_char(c: char) -> bool {
    c.is_alphanumeric()
        || TAG_PUNCTUATION.contains(c)
        || (c.is_whitespace() && !c.is_control() && !matches!(c, '\u{2028}' | '\u{2029}'))
}

impl Rule {
    /// The duration (in days) this rule asks for that the block's length matches: exactly, or
    /// within `duration_tolerance_hours` (EC2's closest matches), the nearest one if several.
    pub fn matching_days(&self, block_minutes: u32) -> Option<u32> {
        let tolerance = i64::from(self.duration_tolerance_hours) * 60;
        self.durations_days
            .iter()
            .map(|&d| (d, (i64::from(block_minutes) - i64::from(d) * 24 * 60).abs()))
            .filter(|&(_, off)| off <= tolerance)
            .min_by_key(|&(d, off)| (off, d))
            .map(|(d, _)| d)
    }

    /// What the rule searches for, one entry per (type, count): instances, or UltraServers
    /// (then the instance type and count are the UltraServers' own, as EC2's offerings name them).
    pub fn asks(&self) -> Vec<Ask> {
        let instances = self.instance_types.iter().flat_map(|t| {
            self.instance_counts.iter().map(|&n| Ask {
                instance_type: t.clone(),
                instance_count: n,
                ultraservers: None,
            })
        });
        let ultra = self.ultraserver_types.iter().flat_map(|&kind| {
            self.ultraserver_counts.iter().filter_map(move |&count| {
                let u = UltraServers { kind, count };
                Some(Ask {
                    instance_type: kind.instance_type().ok()?,
                    instance_count: u.instances(),
                    ultraservers: Some(u),
                })
            })
        });
        instances.chain(ultra).collect()
    }

    /// The instance types whose accelerators price the rule's offerings.
    pub fn priced_types(&self) -> Vec<InstanceType> {
        let mut v: Vec<InstanceType> = self.asks().into_iter().map(|a| a.instance_type).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Whether the offering is of a kind and size the rule asks for: an UltraServer offering
    /// for an UltraServer rule (type and count), an instance offering for an instance rule.
    pub fn asks_for(&self, o: &Offering) -> bool {
        match (&o.ultraservers, o.ultraserver) {
            (Some(u), _) => self.ultraserver_types.contains(&u.kind) && self.ultraserver_counts.contains(&u.count),
            // An UltraServer of a type capblock does not know: no rule can name it.
            (None, true) => false,
            (None, false) => {
                self.instance_types.contains(&o.instance_type) && self.instance_counts.contains(&o.instance_count)
            }
        }
    }

    /// Parses and validates a TOML rule file.
    pub fn from_toml(text: &str, now: DateTime<Utc>) -> Result<Rule, RuleError> {
        RuleSpec::from_toml(text)?.validate(now)
    }
}

/// One (type, count) a rule searches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub instance_type: InstanceType,
    pub instance_count: u32,
    /// Set when the search names UltraServers (UltraserverType + UltraserverCount).
    pub ultraservers: Option<UltraServers>,
}

#[derive(Default)]
struct Problems(Vec<RuleProblem>);

type WhatToBuy = (Vec<InstanceType>, Vec<u32>, Vec<UltraServerType>, Vec<u32>);

impl Problems {
    /// The rule's `id` and `description`.
    fn id_and_description(&mut self, spec: &RuleSpec) {
        let id = &spec.id;
        if id.is_empty()
            || id.len() > 64
            || !id.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
        {
            self.add("id", "must be 1-64 characters of a-z, 0-9, '-' or '_'");
        }
        if spec.description.chars().count() > MAX_DESCRIPTION_CHARS {
            self.add(
                "description",
                &format!("is {} characters long; at most {MAX_DESCRIPTION_CHARS}", spec.description.chars().count()),
            );
        }
    }

    /// `durations_days`: durations EC2 sells.
    fn durations(&mut self, spec: &RuleSpec) -> Vec<u32> {
        self.list("durations_days", &spec.durations_days, |&d| {
            if is_sellable_duration_days(d) {
                Ok(d as u32)
            } else {
                Err(format!("{d} days is not a duration EC2 sells (1-14 days, then multiples of 7 up to 182)"))
            }
        })
    }

    /// The rule's money: its currency, price cap, fee cap and monthly budget (amounts within
    /// their bounds; a budget over `MAX_MONTHLY_BUDGET` only when `unlimited`; a fee cap the
    /// budget leaves room for).
    fn money(&mut self, spec: &RuleSpec) -> (Currency, Decimal, Option<Decimal>, Decimal) {
        let currency = spec.currency.parse::<Currency>().unwrap_or_else(|e| {
            self.add("currency", &e.to_string());
            Currency::USD
        });
        let price_max = Decimal::from(MAX_PRICE_PER_ACCELERATOR_HOUR);
        let max_price = self.amount("max_price_per_accelerator_hour", &spec.max_price_per_accelerator_hour, price_max);
        let max_total_fee = spec.max_total_fee.as_ref().map(|a| self.amount("max_total_fee", a, MAX_AMOUNT.into()));
        let budget = self.amount("monthly_budget", &spec.monthly_budget, MAX_AMOUNT.into());
        if !spec.unlimited && budget > Decimal::from(MAX_MONTHLY_BUDGET) {
            self.add(
                "monthly_budget",
                &format!("{budget} is more than {MAX_MONTHLY_BUDGET}; set unlimited = true if you mean it"),
            );
        }
        if let Some(fee) = max_total_fee
            && fee > budget
            && budget > Decimal::ZERO
        {
            self.add("max_total_fee", "is larger than monthly_budget, so it can never apply");
        }
        (currency, max_price, max_total_fee, budget)
    }

    /// `instance_platform`, `max_blocks_held` and `max_purchases_per_month`.
    fn platform_and_limits(&mut self, spec: &RuleSpec) {
        if !PLATFORMS.contains(&spec.instance_platform.as_str()) {
            self.add(
                "instance_platform",
                &format!("{:?} is not one of {}", spec.instance_platform, PLATFORMS.join(", ")),
            );
        }
        self.limit("max_blocks_held", spec.max_blocks_held, MAX_BLOCKS_HELD, spec.unlimited);
        self.limit("max_purchases_per_month", spec.max_purchases_per_month, MAX_PURCHASES_PER_MONTH, spec.unlimited);
    }

    /// `idle_alert_minutes` and `duration_tolerance_hours`.
    fn alert_and_tolerance(&mut self, spec: &RuleSpec) {
        if !(0..=MAX_IDLE_ALERT_MINUTES).contains(&spec.idle_alert_minutes) {
            self.add(
                "idle_alert_minutes",
                &format!("must be between 0 (never alert) and {MAX_IDLE_ALERT_MINUTES} minutes"),
            );
        }
        if !(0..=MAX_DROUGHT_DAYS).contains(&spec.drought_days) {
            self.add("drought_days", &format!("must be between 0 (never say) and {MAX_DROUGHT_DAYS} days"));
        }
        if !(0..24).contains(&spec.duration_tolerance_hours) {
            self.add("duration_tolerance_hours", "must be between 0 and 23 hours");
        }
    }

    /// `team`: a name the stack's TeamBudgets can hold.
    fn team(&mut self, team: Option<&str>) {
        if let Some(team) = team
            && !is_team_name(team)
        {
            self.add("team", "must be 1-64 characters of a-z, 0-9, '-' or '_', as the stack's TeamBudgets names it");
        }
    }

    fn add(&mut self, field: &str, message: &str) {
        self.0.push(RuleProblem { field: field.to_string(), message: message.to_string() });
    }

    /// Where the hand-off actions run: an account the block is shared with. Named accounts are
    /// checked against `share_with`; an OU or the Organization may hold any member, which only
    /// the Organization knows (the role's trust policy refuses one outside it).
    fn handoff_account(&mut self, account: Option<&str>, written: &[String], shared: &[SharePrincipal]) {
        let Some(account) = account else { return };
        if SharePrincipal::parse(account).ok().is_none_or(|p| !matches!(p, SharePrincipal::Account(_))) {
            self.add("handoff_account", "must be a 12-digit account id");
            return;
        }
        if written.is_empty() {
            self.add(
                "handoff_account",
                "needs share_with: the hand-off runs where the block is shared (name the account there)",
            );
            return;
        }
        let reaches = shared.iter().any(|p| match p {
            SharePrincipal::Account(a) => a == account,
            SharePrincipal::Organization(_) | SharePrincipal::Unit(_) => true,
        });
        if !shared.is_empty() && !reaches {
            self.add("handoff_account", &format!("{account} is not one share_with shares the block with"));
        }
    }

    /// Who the rule's blocks are shared with: each a principal RAM takes inside an
    /// Organization, none twice, at most `MAX_SHARE_PRINCIPALS`; never for UltraServers, which
    /// EC2 does not share.
    fn share_with(&mut self, entries: &[String], ultraserver: bool) -> Vec<SharePrincipal> {
        if entries.is_empty() {
            return Vec::new();
        }
        if ultraserver {
            self.add(
                "share_with",
                "EC2 cannot share UltraServer Capacity Blocks (only instance Capacity Blocks can be shared through AWS RAM): \
                 drop share_with, or buy instances with this rule",
            );
            return Vec::new();
        }
        if entries.len() > MAX_SHARE_PRINCIPALS {
            self.add(
                "share_with",
                &format!(
                    "names {} principals; at most {MAX_SHARE_PRINCIPALS} (name an OU or the Organization instead)",
                    entries.len()
                ),
            );
        }
        let mut out: Vec<SharePrincipal> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            match SharePrincipal::parse(e) {
                Ok(p) if out.contains(&p) => self.add(&format!("share_with[{i}]"), &format!("{e:?} is named twice")),
                Ok(p) => out.push(p),
                Err(why) => self.add(&format!("share_with[{i}]"), &why),
            }
        }
        out
    }

    /// The rule's regions: each known (or unknown ones allowed), at most `MAX_REGIONS_PER_RULE`.
    fn regions(&mut self, spec: &RuleSpec) -> Vec<Region> {
        let regions = self.list("regions", &spec.regions, |s| {
            let region = s.parse::<Region>().map_err(|e| e.to_string())?;
            if region.is_known() || spec.allow_unknown_regions {
                Ok(region)
            } else {
                Err(format!(
                    "{s:?} is not a region capblock knows; if AWS opened it recently, set allow_unknown_regions = true"
                ))
            }
        });
        if regions.len() > MAX_REGIONS_PER_RULE {
            self.add(
                "regions",
                &format!(
                    "lists {} regions; at most {MAX_REGIONS_PER_RULE}: split it into several rules",
                    regions.len()
                ),
            );
        }
        regions
    }

    /// The questions a rule asks each scan (regions x types x counts x durations), bounded.
    fn question_bound(&mut self, questions: [usize; 4]) {
        let total = questions.iter().fold(1usize, |a, &n| a.saturating_mul(n));
        if total > MAX_QUESTIONS_PER_RULE {
            self.add(
                "regions x instance_types x instance_counts x durations_days",
                &format!(
                    "the rule asks {total} questions per scan ({} x {} x {} x {}); at most {MAX_QUESTIONS_PER_RULE}: \
                     split it into several rules or ask for fewer",
                    questions[0], questions[1], questions[2], questions[3]
                ),
            );
        }
    }

    /// EC2's tag rules, and capblock's own tags' room and prefixes.
    fn tags(&mut self, tags: &BTreeMap<String, String>) {
        if tags.len() > MAX_TAGS - 3 {
            self.add("tags", &format!("at most {} tags (capblock adds 3 of its own)", MAX_TAGS - 3));
        }
        for (k, v) in tags {
            let field = format!("tags.{}", prefix(&k.escape_debug().to_string()));
            let n = k.chars().count();
            if n == 0 || n > TAG_KEY_CHARS {
                self.add(&field, &format!("key must be 1-{TAG_KEY_CHARS} characters"));
            }
            if let Some(c) = k.chars().find(|&c| !tag_char(c)) {
                self.add(&field, &format!("key has {c:?}: {TAG_CHARS_ALLOWED}"));
            }
            let reserved = |p: &str| k.get(..p.len()).is_some_and(|start| start.eq_ignore_ascii_case(p));
            if let Some(taken) = RESERVED_TAG_PREFIXES.into_iter().find(|p| reserved(p)) {
                self.add(&field, &format!("keys starting with {taken:?} (in any case) are reserved"));
            }
            if v.chars().count() > TAG_VALUE_CHARS {
                self.add(&field, &format!("value must be at most {TAG_VALUE_CHARS} characters"));
            }
            if let Some(c) = v.chars().find(|&c| !tag_char(c)) {
                self.add(&field, &format!("value has {c:?}: {TAG_CHARS_ALLOWED}"));
            }
        }
    }

    /// Auto-extension: its price threshold, a length EC2 sells, when to decide.
    fn extend(&mut self, x: &ExtendSpec, price_max: Decimal) -> Extend {
        let price = self.amount("extend.max_price_per_accelerator_hour", &x.max_price_per_accelerator_hour, price_max);
        if !(1..=182).contains(&x.max_days) || !is_sellable_duration_days(i64::from(x.max_days)) {
            self.add("extend.max_days", "must be a duration EC2 sells (1-14 days, then multiples of 7 up to 182)");
        }
        if !(1..=56 * 24).contains(&x.decide_hours_before_end) {
            self.add("extend.decide_hours_before_end", "must be between 1 and 1344 hours (56 days)");
        }
        Extend {
            max_price_per_accelerator_hour: price,
            max_days: x.max_days,
            decide_hours_before_end: x.decide_hours_before_end,
        }
    }

    /// The hand-off actions, judged against the shortest block the rule may buy and its size.
    fn actions(
        &mut self,
        spec: &RuleSpec,
        durations_days: &[u32],
        instance_counts: &[u32],
        ultraserver_types: &[UltraServerType],
        ultraserver_counts: &[u32],
    ) -> Vec<Action> {
        // A lead is judged against the shortest block the rule may buy: its shortest duration
        // less the tolerance (EC2's closest matches may be that much shorter).
        let shortest_days = durations_days.iter().copied().min().unwrap_or(1);
        // An UltraServer rule's blocks hold all the instances of their UltraServers, and EC2
        // terminates them 60 minutes before the end, not 30.
        let ultra = !ultraserver_types.is_empty();
        let ultra_instances = ultraserver_types
            .iter()
            .flat_map(|&kind| ultraserver_counts.iter().map(move |&count| UltraServers { kind, count }.instances()));
        let limits = ActionLimits {
            shortest_block_minutes: i64::from(shortest_days) * 24 * 60
                - spec.duration_tolerance_hours.clamp(0, 23) * 60,
            termination_lead_minutes: termination_lead(ultra).num_minutes(),
            max_instances: instance_counts.iter().copied().chain(ultra_instances).max().unwrap_or(1),
            ultraserver_instance_types: ultraserver_types
                .iter()
                .filter_map(|k| k.instance_type().ok())
                .map(|t| t.to_string())
                .collect(),
            in_member_account: spec.handoff_account.is_some(),
        };
        let (actions, action_problems) = actions::validate(&spec.actions, &limits);
        for (field, message) in action_problems {
            self.add(&field, &message);
        }
        actions
    }

    /// Validates each element; the list must be non-empty and free of repeats.
    fn list<T, U: PartialEq>(&mut self, field: &str, items: &[T], check: impl Fn(&T) -> Result<U, String>) -> Vec<U> {
        if items.is_empty() {
            self.add(field, "must list at least one value");
        }
        let mut out: Vec<U> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match check(item) {
                Ok(v) if out.contains(&v) => self.add(&format!("{field}[{i}]"), "is listed twice"),
                Ok(v) => out.push(v),
                Err(msg) => self.add(&format!("{field}[{i}]"), &msg),
            }
        }
        out
    }

    /// Instance types and counts, or UltraServer types and counts: never both, since EC2
    /// refuses a search that names UltraserverType with InstanceType or InstanceCount
    /// (InvalidParameterCombination), and instance types sold only inside UltraServers are
    /// refused as instances.
    fn what_to_buy(&mut self, spec: &RuleSpec) -> WhatToBuy {
        let ultra = !spec.ultraserver_types.is_empty() || !spec.ultraserver_counts.is_empty();
        let instances = !spec.instance_types.is_empty() || !spec.instance_counts.is_empty();
        if ultra && instances {
            self.add(
                "ultraserver_types",
                "a rule asks for instances (instance_types, instance_counts) or for UltraServers \
                 (ultraserver_types, ultraserver_counts), not both: EC2 refuses UltraserverType with InstanceType or \
                 InstanceCount",
            );
            return Default::default();
        }
        if ultra {
            let kinds = self.list("ultraserver_types", &spec.ultraserver_types, |s| {
                s.parse::<UltraServerType>().map_err(|e| e.to_string())
            });
            let counts = self.list("ultraserver_counts", &spec.ultraserver_counts, |&n| {
                u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=ultraserver::MAX_COUNT).contains(n))
                    .ok_or_else(|| format!("{n} is not between 1 and {} UltraServers", ultraserver::MAX_COUNT))
            });
            for &kind in &kinds {
                for (i, &count) in counts.iter().enumerate() {
                    if let Some(why) = ultraserver::count_problem(kind, count) {
                        self.add(&format!("ultraserver_counts[{i}]"), &why);
                    }
                }
            }
            return (Vec::new(), Vec::new(), kinds, counts);
        }
        let types = self.list("instance_types", &spec.instance_types, |s| {
            let t = s.parse::<InstanceType>().map_err(|e| e.to_string())?;
            match ultraserver::only_in_ultraservers(t.as_str()) {
                Some(u) => Err(format!(
                    "{s} is sold only inside UltraServers: ask with ultraserver_types = [\"{u}\"] and ultraserver_counts"
                )),
                None => Ok(t),
            }
        });
        let counts = self.list("instance_counts", &spec.instance_counts, |&n| {
            u32::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_INSTANCES_PER_BLOCK).contains(n))
                .ok_or_else(|| format!("{n} is not between 1 and {MAX_INSTANCES_PER_BLOCK} instances"))
        });
        (types, counts, Vec::new(), Vec::new())
    }

    fn start_window(&mut self, w: &StartWindowSpec, now: DateTime<Utc>) -> StartWindow {
        let fallback = StartWindow::Relative { earliest: Duration::zero(), latest: MAX_START_AHEAD };
        let relative = w.earliest_in_days.is_some() || w.latest_in_days.is_some();
        let absolute = w.earliest.is_some() || w.latest.is_some();
        match (relative, absolute) {
            (true, true) => {
                self.add("start_window", "give either earliest_in_days/latest_in_days or earliest/latest, not both");
                fallback
            }
            (false, false) => {
                self.add("start_window", "needs earliest_in_days and latest_in_days (or earliest and latest)");
                fallback
            }
            (true, false) => {
                let (Some(e), Some(l)) = (w.earliest_in_days, w.latest_in_days) else {
                    self.add("start_window", "needs both earliest_in_days and latest_in_days");
                    return fallback;
                };
                let ahead = MAX_START_AHEAD.num_days();
                if e < 0 {
                    self.add("start_window.earliest_in_days", "must not be negative");
                }
                if e > ahead {
                    self.add(
                        "start_window.earliest_in_days",
                        &format!("{e} days is beyond the 8 weeks (56 days) EC2 sells ahead"),
                    );
                }
                if l <= e {
                    self.add("start_window.latest_in_days", "must be after earliest_in_days");
                }
                if l > ahead {
                    self.add(
                        "start_window.latest_in_days",
                        &format!("{l} days is beyond the 8 weeks (56 days) EC2 sells ahead"),
                    );
                }
                // Checked: days near i64::MAX are not a Duration (reported above, not a panic).
                match (Duration::try_days(e), Duration::try_days(l)) {
                    (Some(earliest), Some(latest)) => StartWindow::Relative { earliest, latest },
                    _ => fallback,
                }
            }
            (false, true) => {
                let (Some(e), Some(l)) = (&w.earliest, &w.latest) else {
                    self.add("start_window", "needs both earliest and latest");
                    return fallback;
                };
                let mut instant = |field: &str, t: &InstantText| t.to_instant().map_err(|m| self.add(field, &m)).ok();
                let (Some(earliest), Some(latest)) =
                    (instant("start_window.earliest", e), instant("start_window.latest", l))
                else {
                    return fallback;
                };
                if latest <= earliest {
                    self.add("start_window.latest", "must be after earliest");
                }
                if latest <= now {
                    self.add("start_window.latest", "is in the past");
                }
                if now.checked_add_signed(MAX_START_AHEAD).is_some_and(|limit| earliest > limit) {
                    self.add("start_window.earliest", "is beyond the 8 weeks EC2 sells ahead");
                }
                StartWindow::Absolute { earliest, latest }
            }
        }
    }

    /// A limit of at least 1, and at most `max` unless the rule says `unlimited = true`.
    fn limit(&mut self, field: &str, value: u32, max: u32, unlimited: bool) {
        if value == 0 {
            self.add(field, "must be at least 1");
        } else if value > max && !unlimited {
            self.add(field, &format!("{value} is more than {max}; set unlimited = true if you mean it"));
        }
    }

    /// An amount within `MIN_AMOUNT..=max`.
    fn amount(&mut self, field: &str, amount: &AmountText, max: Decimal) -> Decimal {
        match amount.to_decimal() {
            Ok(d) if (MIN_AMOUNT..=max).contains(&d) => d,
            Ok(d) if d <= Decimal::ZERO => {
                self.add(field, &format!("must be greater than zero (got {d})"));
                Decimal::ZERO
            }
            Ok(d) if d < MIN_AMOUNT => {
                self.add(field, &format!("must be at least {MIN_AMOUNT} (got {d})"));
                Decimal::ZERO
            }
            Ok(d) => {
                self.add(field, &format!("must be at most {max} (got {d})"));
                Decimal::ZERO
            }
            Err(e) => {
                self.add(field, &e);
                Decimal::ZERO
            }
        }
    }
}

#[cfg(test)]
mod tests;
