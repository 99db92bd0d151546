//! Budgets and purchase intents: the bookkeeping that makes buying safe.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::ids::is_team_name;
use super::money::Money;
use super::offering::Offering;
use super::rule::Rule;

/// A calendar month in UTC, the unit budgets are counted in ("2026-12").
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Period(String);

impl Period {
    /// The budget month a run's money falls in: the UTC month of `clock`, the functions' clock
    /// (`RunTime::clock`: the Lambda's time, or the moment a person's `--time` replays). Every
    /// charge, limit and report of "this month" is counted in it; never the month of EC2's
    /// clock or of a block's dates, so two runs at one moment always charge one month.
    pub fn budget_month(clock: DateTime<Utc>) -> Period {
        Period::of(clock)
    }

    /// The calendar month (UTC) `t` falls in, for any moment: a block's start, a month to
    /// report. The month a run charges is [`Period::budget_month`].
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
    /// A team's budget, shared by every rule that names the team (`team = "..."`).
    Team(String),
}

impl BudgetOwner {
    pub fn key(&self) -> String {
        match self {
            BudgetOwner::Account => "ACCOUNT".into(),
            BudgetOwner::Rule(id) => format!("RULE#{id}"),
            BudgetOwner::Team(name) => format!("TEAM#{name}"),
        }
    }
}

/// The stack's team budgets as its `TeamBudgets` parameter writes them: `team=amount` pairs
/// in USD a month, separated by commas (`ml-research=20000,vision=5000`); empty for none.
/// Every problem is named; a team given twice is one (which amount was meant is not ours to
/// guess).
pub fn parse_team_budgets(text: &str) -> Result<BTreeMap<String, Money>, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((team, amount)) = pair.split_once('=') else {
            return Err(format!("{pair:?} is not team=amount (for example ml-research=20000)"));
        };
        let (team, amount) = (team.trim(), amount.trim());
        if !is_team_name(team) {
            return Err(format!("team {team:?} must be 1-64 characters of a-z, 0-9, '-' or '_'"));
        }
        let money = Money::parse(amount, "USD")
            .ok()
            .filter(|m| m.amount() > rust_decimal::Decimal::ZERO)
            .ok_or_else(|| format!("{amount:?} is not a monthly amount in USD for team {team}"))?;
        if out.insert(team.to_string(), money).is_some() {
            return Err(format!("team {team} is given twice"));
        }
    }
    Ok(out)
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
    /// The approval this purchase consumes, when a person approved it: the reservation
    /// consumes it in the same transaction, so one approval buys once, whatever id EC2 gives
    /// the block in the answer bought from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approved>,
    /// The request whose approval this purchase consumes (`domain::request::Decision`), in the
    /// reservation's transaction: one approved request buys once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<crate::domain::ids::RequestKey>,
}

/// What a person approved, as a purchase consumes it: the approval's record (by the offering
/// id `capblock approve` named) and the approved block (`Offering::block_key`: rule's region,
/// zone, type, count, start, end and fee, not the id of the moment, which EC2 may rename in
/// every answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approved {
    pub offering_id: String,
    pub block: String,
}

impl Approved {
    /// What approving the decision `approval` (a stored approval record) consumes.
    pub fn of(approval: &Intent) -> Approved {
        Approved { offering_id: approval.offering.id.clone(), block: approval.offering.block_key() }
    }
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
            period: Period::budget_month(now),
            charges,
            approval: None,
            request: None,
        }
    }
}

/// The stack-wide budgets every purchase and extension also draws on (the stack's settings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackBudgets {
    /// The account's monthly cap; None: counted, not capped.
    pub account: Option<Money>,
    /// Each team's monthly cap, by team name.
    pub teams: BTreeMap<String, Money>,
}

/// A rule names a team the stack has no budget for: it may not spend (a team's rules are
/// capped together, and a typo in `team` must not make a rule spend outside its team's cap).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {rule} names team {team:?}, which has no budget in this stack (add it to the stack's TeamBudgets)")]
pub struct NoTeamBudget {
    pub rule: String,
    pub team: String,
}

/// The budgets a purchase draws on in `period`: the rule's, its team's when it names one, and
/// always the account's (capped by the stack's account budget when there is one, counted in any
/// case). The ledger charges them all in one transaction, conditional on every limit.
pub fn charges_for(rule: &Rule, stack: &StackBudgets, period: &Period) -> Result<Vec<BudgetCharge>, NoTeamBudget> {
    let mut charges = vec![BudgetCharge {
        owner: BudgetOwner::Rule(rule.id.clone()),
        period: period.clone(),
        limit: Some(rule.monthly_budget),
        max_purchases: Some(rule.max_purchases_per_month),
    }];
    if let Some(team) = &rule.team {
        let limit = stack.teams.get(team).ok_or_else(|| NoTeamBudget { rule: rule.id.clone(), team: team.clone() })?;
        charges.push(BudgetCharge {
            owner: BudgetOwner::Team(team.clone()),
            period: period.clone(),
            limit: Some(*limit),
            max_purchases: None,
        });
    }
    charges.push(BudgetCharge {
        owner: BudgetOwner::Account,
        period: period.clone(),
        limit: stack.account,
        max_purchases: None,
    });
    Ok(charges)
}

/// Why a budget refuses a charge: its purchase count is at its monthly maximum, or the fee
/// would take its committed amount past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeRefusal {
    PurchaseLimit,
    OverBudget,
}

/// The one budget condition: what a charge of a fee asks of one budget's item before it adds
/// the fee (and a purchase). Stated as bounds on what the item holds, because that is all a
/// conditional write can say (DynamoDB's conditions compare, they cannot add): the in-memory
/// ledger evaluates it (`check`), the DynamoDB adapter renders it as its condition expression
/// and values, and `admits` (the person's confirmation, the protocol model) asks it too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeCondition {
    /// `committed <= max_committed` before the charge, that is `limit - fee`: after it,
    /// `committed <= limit`. None: no cap, the fee is only counted.
    pub max_committed: Option<Decimal>,
    /// `purchases < max_purchases` before the charge (a purchase against a rule's monthly
    /// maximum); None: not capped, or not a purchase (an extension spends money only).
    pub max_purchases: Option<u32>,
}

impl BudgetCharge {
    /// The condition charging `fee` (a purchase when `purchase`) puts on this budget; refused
    /// outright when no item could admit it: a purchase limit of 0, a fee that alone passes the
    /// limit, or a fee in another currency than the limit.
    pub fn condition(&self, fee: Money, purchase: bool) -> Result<ChargeCondition, ChargeRefusal> {
        let max_purchases = self.max_purchases.filter(|_| purchase);
        if max_purchases == Some(0) {
            return Err(ChargeRefusal::PurchaseLimit);
        }
        let max_committed = match self.limit {
            None => None,
            Some(limit) if limit.currency() != fee.currency() => return Err(ChargeRefusal::OverBudget),
            Some(limit) => match limit.amount().checked_sub(fee.amount()).filter(|h| *h >= Decimal::ZERO) {
                Some(h) => Some(h),
                None => return Err(ChargeRefusal::OverBudget),
            },
        };
        Ok(ChargeCondition { max_committed, max_purchases })
    }
}

impl ChargeCondition {
    /// Whether an item holding `usage` (None: not written yet, nothing committed) admits the
    /// charge; a refusal names the purchase limit first, as the adapter reads it back.
    pub fn check(&self, usage: Option<&BudgetUsage>) -> Result<(), ChargeRefusal> {
        let (committed, purchases) = usage.map_or((Decimal::ZERO, 0), |u| (u.committed.amount(), u.purchases));
        self.check_held(committed, purchases)
    }

    /// `check` of an item holding `committed` and `purchases`.
    pub fn check_held(&self, committed: Decimal, purchases: u32) -> Result<(), ChargeRefusal> {
        if self.max_purchases.is_some_and(|max| purchases >= max) {
            return Err(ChargeRefusal::PurchaseLimit);
        }
        if self.max_committed.is_some_and(|max| committed > max) {
            return Err(ChargeRefusal::OverBudget);
        }
        Ok(())
    }
}

/// Whether the budget `charge` names may commit `fee` more as a purchase, having committed
/// `usage` (`None`: nothing yet this period): the limit is never passed, and a rule's purchase
/// count stays within its monthly maximum. The condition the ledger's write states, asked of
/// a usage read (`ChargeCondition`).
pub fn admits(charge: &BudgetCharge, usage: Option<&BudgetUsage>, fee: Money) -> bool {
    charge.condition(fee, true).and_then(|c| c.check(usage)).is_ok()
}

/// One budget a purchase draws on, as the person asked to confirm it reads it: what it holds
/// now (committed: spent plus purchases still settling), what it would hold after the fee, its
/// limit, and whether the fee fits (the ledger decides again, atomically, when it charges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetAfter {
    pub owner: BudgetOwner,
    pub before: Decimal,
    pub after: Decimal,
    /// None: counted, not capped (an account without `AccountMonthlyBudget`).
    pub limit: Option<Decimal>,
    pub fits: bool,
}

impl BudgetAfter {
    /// What is left under the limit after the fee (negative: over it); None without a limit.
    pub fn left_after(&self) -> Option<Decimal> {
        self.limit.map(|l| l - self.after)
    }
}

/// Each of `charges` before and after `fee`, given each budget's usage this period (`usages`
/// in the same order; `None`: nothing yet).
pub fn headroom(charges: &[BudgetCharge], usages: &[Option<BudgetUsage>], fee: Money) -> Vec<BudgetAfter> {
    charges
        .iter()
        .zip(usages)
        .map(|(c, u)| {
            let before = u.as_ref().map_or(Decimal::ZERO, |u| u.committed.amount());
            BudgetAfter {
                owner: c.owner.clone(),
                before,
                after: before + fee.amount(),
                limit: c.limit.map(|l| l.amount()),
                fits: admits(c, u.as_ref(), fee),
            }
        })
        .collect()
}

// How long an open intent may stay open before its outcome is decided without EC2's answer.
/// A Reserved intent older than this was abandoned before PurchaseCapacityBlock was sent (Sent
/// is written before the call): its fee goes back.
pub const RESERVED_GRACE: Duration = Duration::minutes(5);
/// A Sent intent with no tagged reservation after this long is put before a person: its fee
/// stays committed (EC2 may list a reservation late), never released on this timer.
pub const SENT_GRACE: Duration = Duration::minutes(15);
/// The youngest a sent intent may be when a person releases its fee (`capblock intents
/// release`). EC2 lists a purchase's reservation late (its API is eventually consistent, and
/// how late is not published): capblock's tests play listings up to 16 minutes late, past
/// `SENT_GRACE`. Nothing listed a minute after sending says nothing, so a release waits an hour,
/// four times the grace; a purchase EC2 lists later still keeps counting against the rule's
/// `max_blocks_held` until its start (`ReleasedHold`).
pub const RELEASE_MIN_AGE: Duration = Duration::hours(1);

/// A purchase EC2 may hold although the table has no held block of it, kept on the rule's
/// guard so it counts against the rule's `max_blocks_held` and a later scan cannot buy a second
/// block while the first may yet appear. Two kinds:
/// - a purchase a person released (EC2 listed nothing tagged with it), until the offering's
///   start (`of`);
/// - a purchase of several parts (UltraServers) whose fee the tracker kept when one part failed
///   its payment while another may be held but has no held block yet (EC2 has not shown it, or
///   shows it before it is adopted), until the offering's end (`kept`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReleasedHold {
    /// The purchase's intent id.
    pub intent: String,
    /// Past it the purchase no longer counts: see the two kinds above.
    pub until: DateTime<Utc>,
}

impl ReleasedHold {
    /// The hold a person's release of `intent` leaves: past the offering's start the block, if
    /// EC2 made it, is listed or never was.
    pub fn of(intent: &Intent) -> ReleasedHold {
        ReleasedHold { intent: intent.id.clone(), until: intent.offering.start }
    }

    /// The hold a kept fee leaves (`Tracker`'s failed-payment step): a part of the purchase may
    /// be held until the offering's end, and only EC2's word on each part ends it sooner (the
    /// part, once adopted, counts as a block of the same intent, so the purchase counts once).
    /// It is not a release: the fee stays committed.
    pub fn kept(intent: &Intent) -> ReleasedHold {
        ReleasedHold { intent: intent.id.clone(), until: intent.offering.end }
    }

    /// Whether it still counts at `now` (the clock's).
    pub fn counts_at(&self, now: DateTime<Utc>) -> bool {
        now < self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn headroom_is_each_budget_before_and_after_the_fee() {
        let period = Period::parse("2026-12").unwrap();
        let usd = |s: &str| Money::usd(s.parse().unwrap()).unwrap();
        let charge = |owner, limit: Option<&str>, max| BudgetCharge {
            owner,
            period: period.clone(),
            limit: limit.map(usd),
            max_purchases: max,
        };
        let charges = [
            charge(BudgetOwner::Rule("p5".into()), Some("2000"), Some(2)),
            charge(BudgetOwner::Team("llm".into()), Some("1500"), None),
            charge(BudgetOwner::Account, None, None),
        ];
        let used = BudgetUsage { committed: usd("1000"), spent: usd("400"), purchases: 1 };
        let rows = headroom(&charges, &[Some(used.clone()), Some(used), None], usd("528"));
        let cells: Vec<_> = rows.iter().map(|h| (h.before, h.after, h.left_after(), h.fits)).collect();
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(
            cells,
            [
                (d("1000"), d("1528"), Some(d("472")), true),
                (d("1000"), d("1528"), Some(d("-28")), false),
                (d("0"), d("528"), None, true),
            ]
        );
    }

    #[test]
    fn periods_are_utc_months() {
        assert_eq!(Period::of(Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap()).as_str(), "2026-12");
        assert_eq!(Period::of(Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()).as_str(), "2027-01");
    }

    /// A purchase asked for in the last second of December, of a block starting in January, is
    /// December's money: the month comes from the run's clock, not from the block.
    #[test]
    fn a_run_charges_the_budget_month_of_its_clock() {
        let clock = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap();
        let start = Utc.with_ymd_and_hms(2027, 1, 2, 0, 0, 0).unwrap();
        let o = crate::domain::offering::example("cb-jan", "us-east-1", start, Money::parse("480", "USD").unwrap());
        let i = Intent::new("east", o, 8, vec![], clock);
        assert_eq!(i.period, Period::budget_month(clock));
        assert_eq!(i.period.as_str(), "2026-12");
        assert_eq!(Period::budget_month(clock + Duration::seconds(1)).as_str(), "2027-01");
    }

    #[test]
    fn intent_ids_come_from_rule_and_offering() {
        assert_eq!(Intent::id_for("p5", "cb-1"), "p5/cb-1");
        assert_eq!(BudgetOwner::Rule("p5".into()).key(), "RULE#p5");
        assert!(IntentState::Sent.is_open() && !IntentState::Bought.is_open());
    }

    #[test]
    fn a_budget_admits_a_fee_up_to_its_limit_and_its_purchase_count() {
        let usd = |a: &str| Money::parse(a, "USD").unwrap();
        let charge = |limit: Option<&str>, max| BudgetCharge {
            owner: BudgetOwner::Account,
            period: Period::parse("2026-12").unwrap(),
            limit: limit.map(usd),
            max_purchases: max,
        };
        let used = |committed: &str, purchases| BudgetUsage { committed: usd(committed), spent: usd("0"), purchases };
        assert!(admits(&charge(Some("1000"), None), None, usd("1000")));
        assert!(!admits(&charge(Some("1000"), None), None, usd("1000.01")));
        assert!(admits(&charge(Some("1000"), None), Some(&used("400", 1)), usd("600")));
        assert!(!admits(&charge(Some("1000"), None), Some(&used("400.01", 1)), usd("600")));
        assert!(admits(&charge(None, None), Some(&used("99999", 9)), usd("600")), "counted, not capped");
        assert!(admits(&charge(None, Some(2)), Some(&used("0", 1)), usd("1")));
        assert!(!admits(&charge(None, Some(2)), Some(&used("0", 2)), usd("1")));
        assert!(!admits(&charge(None, Some(0)), None, usd("1")));
    }

    /// The one condition, as bounds a conditional write can state: `committed <= limit - fee`
    /// (so `limit - fee < committed <= limit` is refused: a condition that forgot the fee would
    /// admit it) and `purchases < max` for a purchase only; no item could admit a fee past the
    /// limit alone, one in another currency, or a purchase against a maximum of 0.
    #[test]
    fn a_charge_states_its_condition_as_bounds_on_the_budgets_item() {
        let usd = |a: &str| Money::parse(a, "USD").unwrap();
        let charge = |limit: Option<&str>, max| BudgetCharge {
            owner: BudgetOwner::Rule("p5".into()),
            period: Period::parse("2026-12").unwrap(),
            limit: limit.map(usd),
            max_purchases: max,
        };
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        let cond = charge(Some("1000"), Some(2)).condition(usd("300"), true).unwrap();
        assert_eq!(cond, ChargeCondition { max_committed: Some(d("700")), max_purchases: Some(2) });
        assert_eq!(cond.check_held(d("700"), 1), Ok(()));
        assert_eq!(cond.check_held(d("700.01"), 1), Err(ChargeRefusal::OverBudget), "limit - fee < committed");
        assert_eq!(cond.check_held(d("1000"), 1), Err(ChargeRefusal::OverBudget), "committed <= limit");
        assert_eq!(cond.check_held(d("2000"), 2), Err(ChargeRefusal::PurchaseLimit), "the count named first");
        let extension = charge(Some("1000"), Some(2)).condition(usd("300"), false).unwrap();
        assert_eq!(extension.max_purchases, None, "an extension is no purchase");
        assert_eq!(charge(None, None).condition(usd("300"), true).unwrap().max_committed, None);
        assert_eq!(charge(Some("1000"), None).condition(usd("1000.01"), true), Err(ChargeRefusal::OverBudget));
        let eur = Money::parse("10", "EUR").unwrap();
        assert_eq!(charge(Some("1000"), None).condition(eur, true), Err(ChargeRefusal::OverBudget));
        assert_eq!(charge(None, Some(0)).condition(usd("1"), true), Err(ChargeRefusal::PurchaseLimit));
    }

    /// The name an intent's state is logged and shown by is the one the ledger stores.
    #[test]
    fn an_intents_state_reads_as_it_is_stored() {
        use IntentState::*;
        for s in [Reserved, Sent, Bought, Rejected, DryRun] {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.as_str()));
        }
    }

    /// A purchase's parts are the reservations it recorded; an intent recorded before parts
    /// were stored has one, its `reservation_id`. Any other reservation is not one of them.
    #[test]
    fn only_the_reservations_a_purchase_recorded_are_its_parts() {
        let offering = crate::domain::offering::example(
            "cb-1",
            "us-east-1",
            Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap(),
            Money::parse("3072", "USD").unwrap(),
        );
        let mut intent =
            Intent::new("p5", offering, 8, Vec::new(), Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap());
        assert!(!intent.is_part("cr-a"), "nothing recorded, no part");
        intent.reservation_id = Some("cr-a".into());
        assert!(intent.is_part("cr-a") && !intent.is_part("cr-b"));
        intent.parts = vec!["cr-a".into(), "cr-b".into()];
        assert!(intent.is_part("cr-a") && intent.is_part("cr-b") && !intent.is_part("cr-c"));
    }

    fn rule(extra: &str) -> Rule {
        Rule::from_toml(
            &format!(
                "id = \"p5\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\ninstance_counts = [1]\n\
                 durations_days = [1]\nmax_price_per_accelerator_hour = \"3.00\"\nmonthly_budget = \"5000\"\n\
                 start_window = {{ earliest_in_days = 1, latest_in_days = 10 }}\n{extra}"
            ),
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap(),
        )
        .unwrap()
    }

    fn stack(cap: Option<Money>, teams: &str) -> StackBudgets {
        StackBudgets { account: cap, teams: parse_team_budgets(teams).unwrap() }
    }

    /// The account's usage is charged on every purchase, cap or no cap: a cap set later must
    /// see what was spent before it.
    #[test]
    fn the_account_is_always_charged() {
        let rule = rule("");
        let period = Period::of(Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap());
        let owners = |cap: Option<Money>| {
            charges_for(&rule, &stack(cap, ""), &period)
                .unwrap()
                .into_iter()
                .map(|c| (c.owner, c.limit))
                .collect::<Vec<_>>()
        };
        let cap = Money::parse("1000", "USD").unwrap();
        assert_eq!(
            owners(None),
            vec![(BudgetOwner::Rule("p5".into()), Some(rule.monthly_budget)), (BudgetOwner::Account, None)]
        );
        assert_eq!(owners(Some(cap))[1], (BudgetOwner::Account, Some(cap)));
    }

    /// A rule of a team draws on the team's budget too, in the same charge list (so the same
    /// transaction); a team the stack has no budget for stops the rule, never skips the team.
    #[test]
    fn a_teams_rule_is_charged_to_its_team() {
        let period = Period::of(Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap());
        let teamed = rule("team = \"vision\"\n");
        let usd = |a: &str| Money::parse(a, "USD").unwrap();
        let charges = charges_for(&teamed, &stack(None, "vision=2000, nlp=100"), &period).unwrap();
        let owners: Vec<_> = charges.iter().map(|c| (c.owner.clone(), c.limit)).collect();
        assert_eq!(
            owners,
            vec![
                (BudgetOwner::Rule("p5".into()), Some(usd("5000"))),
                (BudgetOwner::Team("vision".into()), Some(usd("2000"))),
                (BudgetOwner::Account, None),
            ]
        );
        assert_eq!(BudgetOwner::Team("vision".into()).key(), "TEAM#vision");
        let refused = charges_for(&teamed, &stack(None, "nlp=100"), &period).unwrap_err();
        assert_eq!(refused, NoTeamBudget { rule: "p5".into(), team: "vision".into() });
        assert!(refused.to_string().contains("TeamBudgets"), "{refused}");
    }

    #[test]
    fn team_budgets_parse_as_the_parameter_writes_them() {
        let teams = parse_team_budgets(" ml-research=20000 ,vision=5000.50,").unwrap();
        assert_eq!(teams.len(), 2);
        assert_eq!(teams["vision"], Money::parse("5000.50", "USD").unwrap());
        assert_eq!(parse_team_budgets("").unwrap(), BTreeMap::new());
        for (bad, says) in [
            ("vision", "team=amount"),
            ("Vision=10", "a-z"),
            ("vision=ten", "not a monthly amount"),
            ("vision=0", "not a monthly amount"),
            ("vision=-5", "not a monthly amount"),
            ("vision=1,vision=2", "twice"),
        ] {
            let e = parse_team_budgets(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
