//! Budgets and purchase intents: the bookkeeping that makes buying safe.

use chrono::{DateTime, Datelike, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::money::Money;
use super::offering::Offering;
use super::rule::Rule;

/// A calendar month in UTC, the unit budgets are counted in ("2026-12").
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Period(String);

impl Period {
    pub fn of(t: DateTime<Utc>) -> Period {
        Period(format!("{:04}-{:02}", t.year(), t.month()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A month as people write it ("2026-12"); None for anything else.
    pub fn parse(s: &str) -> Option<Period> {
        let (y, m) = s.split_once('-')?;
        let ok = y.len() == 4 && m.len() == 2 && y.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit());
        let month: u32 = m.parse().ok()?;
        (ok && (1..=12).contains(&month)).then(|| Period(s.to_string()))
    }

    /// The month before this one.
    pub fn previous(&self) -> Period {
        let (y, m) = self.0.split_once('-').unwrap_or(("1970", "01"));
        let (y, m): (i32, u32) = (y.parse().unwrap_or(1970), m.parse().unwrap_or(1));
        if m == 1 { Period(format!("{:04}-12", y - 1)) } else { Period(format!("{y:04}-{:02}", m - 1)) }
    }
}

/// Whose money a budget limits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BudgetOwner {
    Account,
    Rule(String),
}

impl BudgetOwner {
    pub fn key(&self) -> String {
        match self {
            BudgetOwner::Account => "ACCOUNT".into(),
            BudgetOwner::Rule(id) => format!("RULE#{id}"),
        }
    }
}

/// One budget a purchase draws on, with its limit for the period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetCharge {
    pub owner: BudgetOwner,
    pub period: Period,
    /// The most the budget may commit in the period; `None`: no cap, the usage is only counted
    /// (the account's, when the stack has no account budget: so a cap set later sees the spend).
    pub limit: Option<Money>,
    /// For rule budgets: the most purchases the rule may make in the period.
    pub max_purchases: Option<u32>,
}

/// What has been committed against a budget in a period: fees reserved for purchases in
/// flight plus fees spent. `committed <= limit` always.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUsage {
    pub committed: Money,
    pub spent: Money,
    pub purchases: u32,
}

/// The states of a purchase intent. `Sent` means PurchaseCapacityBlock may have reached EC2:
/// it is never sent again; only reconciliation by tag resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntentState {
    Reserved,
    Sent,
    Bought,
    Rejected,
    /// A dry-run decision: nothing was reserved or bought.
    DryRun,
}

impl IntentState {
    pub fn is_open(self) -> bool {
        matches!(self, IntentState::Reserved | IntentState::Sent)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            IntentState::Reserved => "reserved",
            IntentState::Sent => "sent",
            IntentState::Bought => "bought",
            IntentState::Rejected => "rejected",
            IntentState::DryRun => "dry-run",
        }
    }
}

/// The record written before any money moves: which rule buys which offering, for how much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub id: String,
    pub rule_id: String,
    pub offering: Offering,
    pub accelerators_per_instance: u32,
    pub state: IntentState,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub reservation_id: Option<String>,
    /// Every reservation the purchase made (`reservation_id` first), written when it is
    /// recorded: only these are parts of it. Another reservation carrying the intent's tag is
    /// a second purchase. Empty in intents recorded before capblock stored them: their one
    /// part is `reservation_id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
    pub reason: Option<String>,
    /// The month whose budgets hold the fee.
    pub period: Period,
    /// The budgets the fee was charged to, so closing the intent releases exactly those.
    pub charges: Vec<BudgetCharge>,
}

impl Intent {
    /// Intent ids are derived from (rule, offering), so two runs deciding the same purchase
    /// collide on the same key instead of buying twice.
    pub fn id_for(rule_id: &str, offering_id: &str) -> String {
        format!("{rule_id}/{offering_id}")
    }

    /// Whether reservation `id` is one of the purchase's own reservations (see `parts`).
    pub fn is_part(&self, id: &str) -> bool {
        self.parts.iter().any(|p| p == id) || self.reservation_id.as_deref() == Some(id)
    }

    pub fn new(
        rule_id: &str,
        offering: Offering,
        accelerators_per_instance: u32,
        charges: Vec<BudgetCharge>,
        now: DateTime<Utc>,
    ) -> Intent {
        Intent {
            id: Intent::id_for(rule_id, &offering.id),
            rule_id: rule_id.to_string(),
            offering,
            accelerators_per_instance,
            state: IntentState::Reserved,
            created_at: now,
            sent_at: None,
            reservation_id: None,
            parts: Vec::new(),
            reason: None,
            period: Period::of(now),
            charges,
        }
    }
}

/// The budgets a purchase draws on in `period`: the rule's, and always the account's (capped by
/// `account_budget` when there is one, counted in any case).
pub fn charges_for(rule: &Rule, account_budget: Option<Money>, period: &Period) -> Vec<BudgetCharge> {
    vec![
        BudgetCharge {
            owner: BudgetOwner::Rule(rule.id.clone()),
            period: period.clone(),
            limit: Some(rule.monthly_budget),
            max_purchases: Some(rule.max_purchases_per_month),
        },
        BudgetCharge {
            owner: BudgetOwner::Account,
            period: period.clone(),
            limit: account_budget,
            max_purchases: None,
        },
    ]
}

// How long an open intent may stay open before its outcome is decided without EC2's answer.
/// A Reserved intent older than this was abandoned before PurchaseCapacityBlock was sent.
pub const RESERVED_GRACE: Duration = Duration::minutes(5);
/// A Sent intent with no tagged reservation after this long was not bought.
pub const SENT_GRACE: Duration = Duration::minutes(15);

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn periods_are_utc_months() {
        assert_eq!(Period::of(Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap()).as_str(), "2026-12");
        assert_eq!(Period::of(Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()).as_str(), "2027-01");
    }

    #[test]
    fn intent_ids_come_from_rule_and_offering() {
        assert_eq!(Intent::id_for("p5", "cb-1"), "p5/cb-1");
        assert_eq!(BudgetOwner::Rule("p5".into()).key(), "RULE#p5");
        assert!(IntentState::Sent.is_open() && !IntentState::Bought.is_open());
    }

    /// The account's usage is charged on every purchase, cap or no cap: a cap set later must
    /// see what was spent before it.
    #[test]
    fn the_account_is_always_charged() {
        let rule = crate::domain::rule::Rule::from_toml(
            "id = \"p5\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\ninstance_counts = [1]\n\
             durations_days = [1]\nmax_price_per_accelerator_hour = \"3.00\"\nmonthly_budget = \"5000\"\n\
             start_window = { earliest_in_days = 1, latest_in_days = 10 }\n",
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap(),
        )
        .unwrap();
        let period = Period::of(Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap());
        let owners = |cap: Option<Money>| {
            charges_for(&rule, cap, &period).into_iter().map(|c| (c.owner, c.limit)).collect::<Vec<_>>()
        };
        let cap = Money::parse("1000", "USD").unwrap();
        assert_eq!(
            owners(None),
            vec![(BudgetOwner::Rule("p5".into()), Some(rule.monthly_budget)), (BudgetOwner::Account, None)]
        );
        assert_eq!(owners(Some(cap))[1], (BudgetOwner::Account, Some(cap)));
    }
}
