//! A rule file as written (`RuleSpec`), before validation: its TOML read with every unknown key
//! named at once (and the closest known one when it looks like a misspelling), and a validated
//! rule written back as a file (`Rule::to_spec`).

use super::*;

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
    pub(super) fn to_decimal(&self) -> Result<Decimal, String> {
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
    pub(super) fn to_instant(&self) -> Result<DateTime<Utc>, String> {
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

fn default_drought_days() -> i64 {
    i64::from(DEFAULT_DROUGHT_DAYS)
}

fn is_default_drought_days(d: &i64) -> bool {
    *d == default_drought_days()
}

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
pub(super) fn with_suggestion(message: &str) -> String {
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
pub(super) fn known_keys() -> Vec<String> {
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
pub(super) fn unknown_keys(text: &str) -> Vec<String> {
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
