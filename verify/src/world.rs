//! The model's state, kept small and hashable (the checker stores every state it reaches),
//! and the core's own types built from it when a step needs a judgement.

use std::collections::{BTreeMap, BTreeSet};

use capblock_core::domain::block::{Block, Reservation};
use capblock_core::domain::budget::{Intent, IntentState, ReleasedHold, StackBudgets, charges_for};
use capblock_core::domain::lifecycle::{BlockState, Observed};
use capblock_core::domain::money::Money;
use capblock_core::domain::offering::{Offering, OfferingSegment};
use capblock_core::domain::request::{Request, RequestTerms, TeamApproval};
use capblock_core::domain::rule::Rule;
use capblock_core::domain::tags::INTENT_TAG;
use chrono::{DateTime, Duration, TimeZone, Utc};

/// The fee of every offering in the model, in USD.
pub const FEE: i64 = 600;
const REGION: &str = "us-east-1";

/// An intent's key: its rule and its offering (an intent's id is the pair), in one byte.
pub fn key(rule: u8, offering: u8) -> u8 {
    rule * 8 + offering
}

/// The rule of intent key `k`.
pub fn rule_of(k: u8) -> usize {
    usize::from(k / 8)
}

/// The offering of intent key `k`.
pub fn offering_index(k: u8) -> u8 {
    k % 8
}

/// Rule `i`'s id.
pub fn rule_id(i: usize) -> String {
    format!("rule-{i}")
}

/// Minutes since `t0`, the model's clock (the functions' clock: every run reads it).
pub type Minute = u16;

/// The model's first instant. Fixed: the model is about order, not about the calendar.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).single().unwrap_or_default()
}

pub fn at(m: Minute) -> DateTime<Utc> {
    t0() + Duration::minutes(i64::from(m))
}

/// Who acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Who {
    /// A scheduled scan (two may overlap: a slow run and the next schedule, or a Lambda retry).
    Scan,
    /// `capblock buy` by a person, on AWS's clock.
    Hand,
    /// A dry-run replay of another moment (an asked time two hours off the clock).
    Replay,
    /// A person's `capblock intents release` of a sent intent EC2 lists nothing for: look, then
    /// write (`Ledger::release_by_person`), on AWS's clock.
    Release,
    /// A team's lead deciding the person's request (`capblock requests approve|reject`): the
    /// decision written once (`RequestStore::decide_request`); a second one is refused.
    Lead,
    /// The requester cancelling their request (`capblock requests cancel`).
    Requester,
}

/// Where an actor is in its run: the step it takes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    Start,
    /// Decided to buy offering `o`, having read the rule's guard at `seq`; for a request's
    /// one-shot rule, `closed` says the request was not open to buying when the scan read it
    /// (cancelled, not approved, or its approval consumed), as the model sees it.
    Decided {
        o: u8,
        seq: u8,
        closed: bool,
    },
    /// The intent is reserved (budgets charged, guard taken); the offering is re-checked next.
    Reserved {
        o: u8,
    },
    /// The re-check confirmed it; the intent is marked Sent next.
    Checked {
        o: u8,
    },
    /// Marked Sent; PurchaseCapacityBlock is called next.
    Sent {
        o: u8,
    },
    /// EC2's answer came back (or did not); the store is written next.
    Answered {
        o: u8,
        answer: Answer,
    },
    Done,
}

/// What came back from PurchaseCapacityBlock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Bought, with the purchase's reservations named.
    Bought,
    /// No answer (timeout, 5xx, a dropped connection); EC2 bought it.
    LostAfterBuying,
    /// No answer; EC2 did nothing.
    LostBeforeBuying,
    /// RequestLimitExceeded: EC2 did nothing.
    Throttled,
    /// A 4xx refusal (InsufficientInstanceCapacity): EC2 did nothing.
    Refused,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Actor {
    pub who: Who,
    /// The rule it buys for (a replay looks at every intent).
    pub rule: u8,
    pub step: Step,
}

/// One intent as the table holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoredIntent {
    pub state: IntentState,
    pub created: Minute,
    pub sent: Option<Minute>,
    /// The purchase's reservations (indices into `Ec2::reservations`), once recorded.
    pub parts: Vec<u8>,
    pub fee_released: bool,
    /// A person released it (`capblock intents release`): their judgement against EC2's
    /// listing, which the tracker corrects when EC2 lists the purchase after all.
    pub released_by_person: bool,
    /// Reserved by a scan that read its request closed to buying (`Step::Decided`'s `closed`).
    pub read_closed: bool,
    /// Reserved while its request's item was cancelled (whatever the scan had read).
    pub reserved_cancelled: bool,
}

/// A budget's row for the month.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    pub committed: i64,
    pub spent: i64,
    pub purchases: u32,
}

/// An alert or announcement, by what it says of which purchase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Notice {
    Purchased(u8),
    Rejected(u8),
    OutcomeUnknown(u8),
    Unreadable(u8),
    PaymentFailed(u8),
    /// EC2 holds a purchase whose intent was closed unbought: recorded bought, fee back.
    HeldAfterClose(u8),
}

/// The DynamoDB table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// By key (`key`: an intent's id is (rule, offering)).
    pub intents: BTreeMap<u8, StoredIntent>,
    /// Each rule's guard: its open intent, and the sequence a reservation must have read.
    pub guards: [Option<u8>; 2],
    pub seqs: [u8; 2],
    /// Each rule's budget, and the account's, which every rule also draws on.
    pub rules: [Usage; 2],
    pub account: Usage,
    /// Each rule's guard's holds (`RuleGuard::released`): here, the kept fees' holds the
    /// tracker writes (`track::kept_fee_hold`).
    pub holds: [Vec<ReleasedHold>; 2],
    /// Block items by reservation.
    pub blocks: BTreeMap<u8, BlockState>,
    /// The outbox: each notice and how many times a write put it there.
    pub notices: BTreeMap<Notice, u8>,
    /// The team's budget, which the rules of `World::teamed` draw on.
    pub team: Usage,
    /// The person's request (rule 1's, when the bound has one): its item and its decision.
    pub request: RequestRow,
}

/// A request's item and decision as the table holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestRow {
    /// The requester cancelled it (the item's `cancelled_at`).
    pub cancelled: bool,
    /// The decision: approved (true) or rejected, once.
    pub approved: Option<bool>,
    /// The intent (its key) whose reservation consumed the approval.
    pub consumed_by: Option<u8>,
}

/// A reservation's state in EC2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ec2State {
    PaymentPending,
    Active,
    PaymentFailed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Res {
    /// The intent (its key) whose purchase made it: the intent tag it carries.
    pub o: u8,
    /// DescribeCapacityReservations lists it (EC2 is eventually consistent: a new reservation
    /// is listed when it is listed).
    pub listed: bool,
    /// Listed with every member capblock needs (every member is optional in the API).
    pub readable: bool,
    pub state: Ec2State,
    /// No longer listed after its failed payment (one reading of the record).
    pub dropped: bool,
}

/// EC2: what it holds, and how many purchases it made under each intent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ec2 {
    pub reservations: Vec<Res>,
    /// Purchases EC2 made, by intent (offering).
    pub purchases: BTreeMap<u8, u8>,
}

impl Ec2 {
    pub fn parts_of(&self, o: u8) -> Vec<u8> {
        (0..self.reservations.len() as u8).filter(|r| self.reservations[*r as usize].o == o).collect()
    }

    /// Purchases EC2 may still hold a block of: one of their parts has not failed its payment.
    pub fn held_purchases(&self) -> BTreeSet<u8> {
        self.reservations.iter().filter(|r| r.state != Ec2State::PaymentFailed).map(|r| r.o).collect()
    }

    /// Reservation `r`'s state as EC2 names it.
    pub fn state_name(&self, r: u8) -> &'static str {
        match self.reservations[r as usize].state {
            Ec2State::PaymentPending => "payment-pending",
            Ec2State::Active => "scheduled",
            Ec2State::PaymentFailed => "payment-failed",
        }
    }

    /// What DescribeCapacityReservations says of reservation `r`.
    pub fn observe(&self, r: u8) -> Observed {
        let res = &self.reservations[r as usize];
        if !res.listed || res.dropped {
            return Observed::NotFound;
        }
        if !res.readable {
            return Observed::Unreadable("no State member".into());
        }
        Observed::Found {
            state: self.state_name(r).into(),
            end: offering(res.o).end,
            capacity_block_id: None,
            instance_count: 1,
            available: None,
        }
    }
}

/// The tracker's place in its run: an intent it asked EC2 about, with the answer, at the
/// minute it asked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tracker {
    pub looked: Option<Looked>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Looked {
    pub o: u8,
    pub minute: Minute,
    /// Readable reservations carrying the intent's tag.
    pub tagged: Vec<u8>,
    /// Whether unreadable ones carry it too.
    pub unreadable: bool,
}

/// What is left of each fault and of time: the bounds that keep the state space finite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Left {
    pub ticks: u8,
    pub jumps: u8,
    pub crashes: u8,
    pub lost: u8,
    pub throttled: u8,
    pub refused: u8,
    pub recheck_failures: u8,
    pub unreadable: u8,
    pub payment_failures: u8,
    /// Stale reads: a listed reservation missing again from EC2's answers for a while.
    pub stale: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    /// Which rules draw on the team's budget (fixed for a model: no state of its own).
    pub teamed: [bool; 2],
    pub minute: Minute,
    pub left: Left,
    pub actors: Vec<Actor>,
    pub tracker: Tracker,
    pub store: Store,
    pub ec2: Ec2,
}

/// What one purchase of the model makes: `parts` reservations of one instance each, the
/// parts of an UltraServer purchase or, `segmented`, the segments of a segmented offering (each
/// its own type, zone and fee).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub parts: u8,
    pub segmented: bool,
}

impl Shape {
    /// One block.
    pub const ONE: Shape = Shape { parts: 1, segmented: false };
}

/// The types of a segmented offering's segments in turn, and their zones.
const SEGMENT_TYPES: [&str; 2] = ["p5.48xlarge", "p5en.48xlarge"];
const SEGMENT_ZONES: [&str; 2] = ["a", "b"];
/// The segments' fees in turn: they differ, and add up to `FEE`.
const SEGMENT_FEES: [i64; 2] = [360, 240];

/// Rule `i` of the model: one block of 1 x p5.48xlarge per UltraServer part (of p5.48xlarge
/// or p5en.48xlarge for segments), `limit` USD a month, at most `max_held` blocks held, two
/// purchases a month, bought again after a failed payment.
pub fn rule(i: usize, shape: Shape, limit: i64, max_held: u32) -> Rule {
    let id = rule_id(i);
    let parts = shape.parts;
    let types = if shape.segmented { "\"p5.48xlarge\", \"p5en.48xlarge\"" } else { "\"p5.48xlarge\"" };
    let text = format!(
        "id = \"{id}\"\nmode = \"live\"\nregions = [\"{REGION}\"]\ninstance_types = [{types}]\n\
         instance_counts = [{parts}]\ndurations_days = [1]\nmax_price_per_accelerator_hour = \"5.00\"\n\
         monthly_budget = \"{limit}\"\nmax_blocks_held = {max_held}\nmax_purchases_per_month = 2\n\
         rebuy_on_payment_failure = true\nstart_window = {{ earliest_in_days = 1, latest_in_days = 10 }}\n"
    );
    // The text is the model's own constant: a rule the core refuses is a model bug.
    Rule::from_toml(&text, t0()).unwrap_or_else(|e| panic!("the model's rule is invalid: {e}"))
}

pub fn usd(amount: i64) -> Money {
    Money::usd(amount.into()).unwrap_or_else(|e| panic!("the model's amount {amount} is invalid: {e}"))
}

/// The stack's budgets: the account capped at `limit`, and the team's at `team` (0: no team).
pub fn stack(limit: i64, team: i64) -> StackBudgets {
    let teams = if team > 0 { BTreeMap::from([(TEAM.to_string(), usd(team))]) } else { BTreeMap::new() };
    StackBudgets { account: Some(usd(limit)), teams }
}

/// The team the model's request, and the rule beside it, belong to.
pub const TEAM: &str = "research";
/// The lead who approves the team's requests (the team's `TeamApproval`).
pub const LEAD: &str = "arn:aws:iam::123456789012:role/research-lead";

/// The model's person's request: a day of one p5.48xlarge in the offerings' window, at most 5
/// USD per accelerator-hour (a most fee of 960 USD: one offering's `FEE` fits), for the team.
pub fn request() -> Request {
    let terms = RequestTerms {
        instance_types: vec!["p5.48xlarge".parse().unwrap_or_else(|e| panic!("{e}"))],
        instance_count: 1,
        days: 1,
        regions: vec![REGION.parse().unwrap_or_else(|e| panic!("{e}"))],
        earliest_start: t0() + Duration::days(1),
        latest_end: t0() + Duration::days(11),
        max_price_per_accelerator_hour: usd(5),
        team: TEAM.into(),
        reason: "the model's request".into(),
        slack: None,
    };
    let r = Request { id: "rq-1".into(), requester: "AIDAALICE".into(), filed_at: t0(), terms, cancelled_at: None };
    // The request is the model's own constant: one the core refuses is a model bug.
    if let Some(problem) = r.problems().first() {
        panic!("the model's request is invalid: {problem}");
    }
    r
}

/// The team's approval settings: nothing approved on its own (the automatic limit is below the
/// request's most fee), `LEAD` approves.
pub fn team_approvals() -> BTreeMap<String, TeamApproval> {
    BTreeMap::from([(TEAM.to_string(), TeamApproval { auto_up_to: usd(500), approvers: vec![LEAD.into()] })])
}

/// Offering `o` (or intent key `o`'s offering): a day of `parts` x p5.48xlarge starting `o + 2`
/// days after `t0`, for `FEE`; segmented, its two segments. Built once per (o, shape): the
/// checker asks for it at nearly every step.
pub fn offering_of(o: u8, shape: Shape) -> Offering {
    let o = offering_index(o);
    let parts = shape.parts;
    if shape.segmented {
        static SEGMENTED: std::sync::OnceLock<Vec<Offering>> = std::sync::OnceLock::new();
        let built = SEGMENTED.get_or_init(|| (0..8u8).map(build_segmented).collect());
        return built.get(usize::from(o)).cloned().unwrap_or_else(|| build_segmented(o));
    }
    static BUILT: std::sync::OnceLock<Vec<Offering>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| (0..8u8).flat_map(|o| (1..=4u8).map(move |p| build_offering(o, p))).collect());
    match built.get(usize::from(o) * 4 + usize::from(parts.max(1)) - 1) {
        Some(offering) if parts <= 4 => offering.clone(),
        _ => build_offering(o, parts),
    }
}

/// Offering `o` in segments: 1 x p5.48xlarge in zone a and 1 x p5en.48xlarge in zone b (as
/// many accelerators each), at fees of their own that add up to `FEE`; its top level the first
/// segment's, its instances theirs together (as the core reads one).
fn build_segmented(o: u8) -> Offering {
    let segments: Vec<OfferingSegment> = (0..SEGMENT_TYPES.len())
        .map(|k| OfferingSegment {
            availability_zone: format!("{REGION}{}", SEGMENT_ZONES[k]),
            instance_type: SEGMENT_TYPES[k].parse().unwrap_or_else(|e| panic!("{e}")),
            instance_count: 1,
            fee: usd(SEGMENT_FEES[k]),
            local_zone: false,
        })
        .collect();
    debug_assert_eq!(SEGMENT_FEES.iter().sum::<i64>(), FEE);
    Offering { instance_count: segments.len() as u32, segments, ..build_offering(o, SEGMENT_TYPES.len() as u8) }
}

fn build_offering(o: u8, parts: u8) -> Offering {
    let start = t0() + Duration::days(2 + i64::from(o));
    Offering {
        id: format!("cb-{o}"),
        region: REGION.parse().unwrap_or_else(|e| panic!("{e}")),
        availability_zone: format!("{REGION}a"),
        instance_type: "p5.48xlarge".parse().unwrap_or_else(|e| panic!("{e}")),
        instance_count: u32::from(parts),
        start,
        end: start + Duration::days(1),
        duration_hours: 24,
        duration_minutes: 0,
        fee: usd(FEE),
        // Parts as separate reservations of one purchase (what an UltraServer purchase makes);
        // the UltraServer kind itself changes nothing the model looks at.
        ultraserver: false,
        ultraservers: None,
        local_zone: false,
        segments: Vec::new(),
    }
}

fn offering(o: u8) -> Offering {
    offering_of(o, Shape::ONE)
}

/// The core's `Intent` for a stored one.
pub fn intent(rule: &Rule, stack: &StackBudgets, o: u8, shape: Shape, stored: &StoredIntent) -> Intent {
    let created = at(stored.created);
    let charges = charges_for(rule, stack, &capblock_core::domain::budget::Period::budget_month(created))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut i = Intent::new(&rule.id, offering_of(o, shape), 8, charges, created);
    i.state = stored.state;
    i.sent_at = stored.sent.map(at);
    i.parts = stored.parts.iter().map(|r| reservation_id(*r)).collect();
    i.reservation_id = i.parts.first().cloned();
    i
}

pub fn reservation_id(r: u8) -> String {
    format!("cr-{r}")
}

/// The core's `Reservation` for EC2's reservation `r`, bought for `rule`: of a segmented
/// offering, the segment it is (its purchase's reservations are its segments in turn).
pub fn reservation(rule: &Rule, ec2: &Ec2, r: u8, shape: Shape) -> Reservation {
    let res = &ec2.reservations[r as usize];
    let o = offering_of(res.o, shape);
    let (zone, instance_type) = match o.segments.as_slice() {
        [] => (o.availability_zone.clone(), o.instance_type.clone()),
        segments => {
            let nth = ec2.parts_of(res.o).iter().position(|p| *p == r).unwrap_or(0) % segments.len();
            (segments[nth].availability_zone.clone(), segments[nth].instance_type.clone())
        }
    };
    Reservation {
        id: reservation_id(r),
        arn: None,
        region: o.region.clone(),
        availability_zone: zone,
        instance_type,
        instance_count: 1,
        start: o.start,
        end: o.end,
        state: "payment-pending".into(),
        reservation_type: Some("capacity-block".into()),
        tags: BTreeMap::from([(INTENT_TAG.to_string(), format!("{}/{}", rule.id, o.id))]),
        capacity_block_id: None,
    }
}

/// The core's `Block` for the block item of reservation `r`, bought by intent `o`.
pub fn block(rules: &[Rule], stack: &StackBudgets, w: &World, r: u8, shape: Shape) -> Option<Block> {
    let o = w.ec2.reservations[r as usize].o;
    let stored = w.store.intents.get(&o)?;
    let rule = rules.get(rule_of(o))?;
    let mut b =
        Block::bought(&intent(rule, stack, o, shape, stored), &reservation(rule, &w.ec2, r, shape), at(w.minute));
    b.state = *w.store.blocks.get(&r)?;
    Some(b)
}
