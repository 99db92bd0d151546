//! The actors' steps and the faults, as stateright's `Model`.
//!
//! Each buyer's run is the live path of `app::purchase::Buyer::live`, one port call a step:
//! decide (read the guard, the held blocks and the budgets: `held_refusal`), reserve (one
//! transaction: intent, guard, every charge), re-check, mark Sent, call PurchaseCapacityBlock,
//! write the answer (`failed_purchase`). The tracker settles open intents (`app::reconcile`:
//! look up by tag, then write what `settle_step` says) and moves blocks (`app::track`: observe,
//! release a failed payment's fee when `part_still_held` finds no part held, store the move).
//! EC2 lists new reservations late, garbles them, takes or fails payments (of a whole purchase,
//! or of one UltraServer part while another stays held), and drops failed ones. Time moves in
//! 5-minute ticks (across the graces) and in 12-hour jumps (across payment deadlines).

use std::collections::BTreeMap;

use capblock_core::app::purchase::{FailedPurchase, failed_purchase, held_refusal};
use capblock_core::app::reconcile::{SettleStep, settle_step};
use capblock_core::app::track::{PartSeen, kept_fee_hold, part_still_held};
use capblock_core::domain::block::purchases_held_at;
use capblock_core::domain::budget::{
    BudgetCharge, BudgetOwner, BudgetUsage, IntentState, Period, ReleasedHold, StackBudgets, admits, charges_for,
};
use capblock_core::domain::catalog::AcceleratorCatalog;
use capblock_core::domain::decision::{Headroom, Priced, check, room};
use capblock_core::domain::lifecycle::{BlockState, Transition};
use capblock_core::domain::request::{Request, TeamApproval};
use capblock_core::domain::rule::Rule;
use capblock_core::domain::run_time::RunTime;
use capblock_core::domain::settlement::{Judgement, Shown, held_after_close_of, judge, may_release};
use capblock_core::ports::{MarketError, REQUEST_LIMIT};
use stateright::{Model, Property};

use crate::sabotage::Sabotage;
use crate::world::{
    Actor, Answer, Ec2State, Left, Looked, Minute, Notice, Res, Shape, Step, StoredIntent, Usage, Who, World, at,
    block, intent, key, offering_index, offering_of, reservation_id, rule, rule_id, rule_of, stack, usd,
};

/// What must hold in every reachable state: the model's own properties (stateright's
/// `Model::properties`), so they live inside it.
pub mod properties;
/// A person's request: the scan's reading of it, the lead's decision, the requester's cancel.
mod requests;

/// How far the checker looks: the actors and the faults it may combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Rules (1 or 2): each has its budget and guard, and every one draws on the account's.
    pub rules: u8,
    /// Overlapping scheduled scans, each one run, for the rules in turn.
    pub scans: u8,
    /// `capblock buy` runs.
    pub hands: u8,
    /// A dry-run replay of another moment.
    pub replay: bool,
    /// People's `capblock intents release` runs.
    pub releases: u8,
    /// Offerings on sale (the rule may buy any).
    pub offerings: u8,
    /// Reservations one purchase makes (UltraServers).
    pub parts: u8,
    /// The purchase is of a segmented offering: its `parts` (two) are its segments, each of its
    /// own type, zone and fee, the fee their sum.
    pub segments: bool,
    /// Each rule's monthly budget, in USD (each fee is `world::FEE`).
    pub limit: i64,
    /// The account's monthly budget, in USD.
    pub account_limit: i64,
    /// The rule's limit of blocks held at once (it counts a purchase's parts).
    pub max_held: u32,
    /// Scans asking for a person's request (rule 1 is then the request's one-shot rule,
    /// `Request::as_rule`, and rule 0 shares the team's budget with it); 0: no request.
    pub request_scans: u8,
    /// The lead's decisions on the request (two: approved twice, or approved and rejected).
    pub leads: u8,
    /// The requester's cancels.
    pub cancels: u8,
    /// The team's monthly budget, in USD (with a request).
    pub team_limit: i64,
    pub left: Left,
}

impl Bounds {
    /// The bound `make test` checks (a minute or less on the 2-core machine).
    pub fn bounded() -> Bounds {
        Bounds {
            rules: 1,
            scans: 2,
            hands: 0,
            replay: true,
            releases: 0,
            offerings: 2,
            parts: 1,
            segments: false,
            // Room for two purchases: the limit of one block held is what stops a second.
            limit: 1200,
            account_limit: 1200,
            max_held: 1,
            request_scans: 0,
            leads: 0,
            cancels: 0,
            team_limit: 0,
            left: Left {
                ticks: 4,
                jumps: 1,
                crashes: 1,
                lost: 1,
                throttled: 1,
                refused: 0,
                recheck_failures: 0,
                unreadable: 1,
                payment_failures: 1,
                stale: 0,
            },
        }
    }

    /// UltraServers: purchases of two parts each, whose payment may fail (in `make test`).
    pub fn ultraservers() -> Bounds {
        Bounds { scans: 1, ..Bounds::deep_ultraservers() }
    }

    /// A segmented purchase (in `make test`): its two segments, of two types in two zones at
    /// fees of their own, bought as two reservations of one purchase whose payments may end
    /// apart; one scan, one rule, as `ultraservers`.
    pub fn segments() -> Bounds {
        Bounds { segments: true, ..Bounds::ultraservers() }
    }

    /// `make verify`'s segments: two scans at once.
    pub fn deep_segments() -> Bounds {
        Bounds { segments: true, ..Bounds::deep_ultraservers() }
    }

    /// `make verify`'s UltraServers: two scans at once.
    pub fn deep_ultraservers() -> Bounds {
        Bounds {
            replay: false,
            parts: 2,
            left: Left { ticks: 1, jumps: 1, crashes: 1, lost: 1, payment_failures: 1, ..Left::default() },
            ..Bounds::bounded()
        }
    }

    /// Budgets: two rules, one scan each, each rule's budget with room for two purchases and the
    /// account's with room for one, so the account's budget is what stops a second purchase
    /// (in `make test`).
    pub fn budgets() -> Bounds {
        Bounds {
            rules: 2,
            replay: false,
            account_limit: 1000,
            left: Left { ticks: 2, jumps: 1, crashes: 1, lost: 1, payment_failures: 1, ..Left::default() },
            ..Bounds::bounded()
        }
    }

    /// A person's `capblock intents release` beside two scans (in `make test`): a purchase whose
    /// answer was lost, EC2 not listing it for 12 hours and more; the person releases its fee,
    /// EC2 lists it after all.
    pub fn release() -> Bounds {
        Bounds {
            replay: false,
            releases: 1,
            left: Left { ticks: 1, jumps: 1, crashes: 1, lost: 1, ..Left::default() },
            ..Bounds::bounded()
        }
    }

    /// Stale reads (in `make test`): two scans, a lost answer and a failed
    /// payment, EC2's answers missing a listed reservation for a while, across the graces and
    /// the 12-hour step.
    pub fn stale() -> Bounds {
        Bounds {
            replay: false,
            left: Left { ticks: 2, jumps: 1, lost: 1, payment_failures: 1, stale: 1, ..Left::default() },
            ..Bounds::bounded()
        }
    }

    /// A person's request beside a rule (in `make test`): a scan for the rule and two for the
    /// request, the lead deciding twice, the requester cancelling; the team's budget, which
    /// the rule and the request share, has room for one purchase, the account's for three.
    pub fn requests() -> Bounds {
        Bounds {
            rules: 2,
            scans: 1,
            replay: false,
            account_limit: 1800,
            request_scans: 2,
            leads: 2,
            cancels: 1,
            team_limit: 1000,
            left: Left { ticks: 1, jumps: 0, crashes: 1, lost: 1, ..Left::default() },
            ..Bounds::bounded()
        }
    }

    /// `make verify`'s requests: the 12-hour step and a failed payment besides (a request's
    /// purchase whose payment fails is not bought again: its approval stays consumed).
    pub fn deep_requests() -> Bounds {
        let requests = Bounds::requests();
        Bounds { left: Left { jumps: 1, payment_failures: 1, ..requests.left }, ..requests }
    }

    /// `make verify`: a scan and `capblock buy` (which may outlive a tick, as a scheduled run
    /// cannot) at once, with every fault.
    pub fn deep() -> Bounds {
        let bounded = Bounds::bounded();
        Bounds { scans: 1, hands: 1, left: Left { refused: 1, recheck_failures: 1, ..bounded.left }, ..bounded }
    }
}

/// The protocol under `bounds`, with `sabotage` put back (None: the code as it is).
#[derive(Clone, Debug)]
pub struct Protocol {
    pub bounds: Bounds,
    pub sabotage: Option<Sabotage>,
    /// A second bug put back beside `sabotage`, one in the model's own ledger writes (`and`):
    /// where two guards stand in line, each is shown by taking both away.
    pub also: Option<Sabotage>,
    /// The rules, parsed once (`world::rule`), and the stack's budgets.
    pub rules: Vec<Rule>,
    pub stack: StackBudgets,
    /// The person's request whose one-shot rule is rule 1 (`Bounds::request_scans`), and the
    /// teams' approval settings it is judged by.
    pub request: Option<Request>,
    pub teams: BTreeMap<String, TeamApproval>,
}

/// One move of one actor, of EC2 or of time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Actor `a` takes its next step; `choice` picks among its outcomes (an offering, EC2's answer).
    Act {
        a: u8,
        choice: u8,
    },
    /// Actor `a` dies where it is (a Lambda timeout or crash, a person's Ctrl-C).
    Crash {
        a: u8,
    },
    /// The tracker asks EC2 by tag for intent `o`'s reservations.
    Look {
        o: u8,
    },
    /// The tracker writes what its look means.
    Settle,
    /// The tracker dies between its look and its write.
    TrackerCrash,
    /// The tracker observes reservation `r`'s block and stores what it means; `crash`: it dies
    /// between releasing the fee and storing the move.
    Track {
        r: u8,
        crash: bool,
    },
    /// The tracker adopts reservation `r`, a part of a bought purchase the table lacks.
    Adopt {
        r: u8,
    },
    List {
        r: u8,
    },
    /// A stale read: EC2's answers miss listed reservation `r` until it is listed again.
    Unlist {
        r: u8,
    },
    Garble {
        r: u8,
    },
    Mend {
        r: u8,
    },
    Pay {
        o: u8,
    },
    FailPayment {
        o: u8,
    },
    /// EC2 fails the payment of reservation `r` alone: one part of an UltraServer purchase,
    /// while another may still be paid.
    FailPart {
        r: u8,
    },
    Drop {
        r: u8,
    },
    Tick,
    Jump,
}

/// A purchase action's minutes per tick: across `RESERVED_GRACE` (5 min) in one, `SENT_GRACE`
/// (15 min) in three.
const TICK: Minute = 5;
/// Across every payment deadline (12 hours at most).
const JUMP: Minute = 12 * 60;
/// How far off the clock the replay looks.
const REPLAY_AHEAD: i64 = 120;

impl Model for Protocol {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let b = &self.bounds;
        let mut actors = Vec::new();
        let rules = b.rules.clamp(1, 2);
        let scans_rules = if self.request.is_some() { 1 } else { rules };
        actors.extend((0..b.scans).map(|i| Actor { who: Who::Scan, rule: i % scans_rules, step: Step::Start }));
        actors.extend((0..b.request_scans).map(|_| Actor { who: Who::Scan, rule: 1, step: Step::Start }));
        actors.extend((0..b.leads).map(|_| Actor { who: Who::Lead, rule: 1, step: Step::Start }));
        actors.extend((0..b.cancels).map(|_| Actor { who: Who::Requester, rule: 1, step: Step::Start }));
        actors.extend((0..b.hands).map(|_| Actor { who: Who::Hand, rule: 0, step: Step::Start }));
        if b.replay {
            actors.push(Actor { who: Who::Replay, rule: 0, step: Step::Start });
        }
        actors.extend((0..b.releases).map(|_| Actor { who: Who::Release, rule: 0, step: Step::Start }));
        let teamed = [0, 1].map(|i| self.rules.get(i).is_some_and(|r| r.team.is_some()));
        vec![World {
            teamed,
            minute: 0,
            left: b.left,
            actors,
            tracker: Default::default(),
            store: Default::default(),
            ec2: Default::default(),
        }]
    }

    fn actions(&self, w: &World, out: &mut Vec<Action>) {
        for (a, actor) in w.actors.iter().enumerate() {
            let a = a as u8;
            match actor.step {
                Step::Done => continue,
                Step::Start if actor.who == Who::Lead => (0..2).for_each(|choice| out.push(Action::Act { a, choice })),
                Step::Start if actor.who == Who::Requester => out.push(Action::Act { a, choice: 0 }),
                Step::Start => (0..self.bounds.offerings.max(1)).for_each(|choice| out.push(Action::Act { a, choice })),
                Step::Reserved { .. } => (0..2).for_each(|choice| out.push(Action::Act { a, choice })),
                Step::Sent { .. } => (0..5).for_each(|choice| out.push(Action::Act { a, choice })),
                _ => out.push(Action::Act { a, choice: 0 }),
            }
            if actor.step != Step::Start && w.left.crashes > 0 {
                out.push(Action::Crash { a });
            }
        }
        match &w.tracker.looked {
            Some(_) => {
                out.push(Action::Settle);
                if w.left.crashes > 0 {
                    out.push(Action::TrackerCrash);
                }
            }
            None => w.store.intents.keys().for_each(|o| out.push(Action::Look { o: *o })),
        }
        for r in w.store.blocks.keys() {
            out.push(Action::Track { r: *r, crash: false });
            if w.left.crashes > 0 {
                out.push(Action::Track { r: *r, crash: true });
            }
        }
        for r in 0..w.ec2.reservations.len() as u8 {
            out.extend([
                Action::Adopt { r },
                Action::List { r },
                Action::Unlist { r },
                Action::Garble { r },
                Action::Mend { r },
                Action::Drop { r },
            ]);
            if self.parts() > 1 {
                out.push(Action::FailPart { r });
            }
        }
        for o in w.ec2.purchases.keys() {
            out.extend([Action::Pay { o: *o }, Action::FailPayment { o: *o }]);
        }
        out.extend([Action::Tick, Action::Jump]);
    }

    fn next_state(&self, w: &World, action: Action) -> Option<World> {
        let mut n = w.clone();
        let changed = match action {
            Action::Act { a, choice } => self.act(&mut n, a as usize, choice),
            Action::Crash { a } => spend(&mut n.left.crashes) && set(&mut n.actors[a as usize].step, Step::Done),
            Action::Look { o } => self.look(&mut n, o),
            Action::Settle => self.settle(&mut n),
            Action::TrackerCrash => spend(&mut n.left.crashes) && n.tracker.looked.take().is_some(),
            Action::Track { r, crash } => self.track(&mut n, r, crash),
            Action::Adopt { r } => self.adopt(&mut n, r),
            Action::List { r } => {
                let res = &mut n.ec2.reservations[r as usize];
                !res.dropped && set(&mut res.listed, true)
            }
            Action::Unlist { r } => {
                let res = &n.ec2.reservations[r as usize];
                res.listed && !res.dropped && spend(&mut n.left.stale) && {
                    set(&mut n.ec2.reservations[r as usize].listed, false)
                }
            }
            Action::Garble { r } => {
                n.ec2.reservations[r as usize].listed && spend(&mut n.left.unreadable) && {
                    set(&mut n.ec2.reservations[r as usize].readable, false)
                }
            }
            Action::Mend { r } => set(&mut n.ec2.reservations[r as usize].readable, true),
            Action::Pay { o } => pay(&mut n, o, Ec2State::Active),
            Action::FailPayment { o } => {
                n.left.payment_failures > 0
                    && pay(&mut n, o, Ec2State::PaymentFailed)
                    && spend(&mut n.left.payment_failures)
            }
            Action::FailPart { r } => {
                let res = &mut n.ec2.reservations[r as usize];
                n.left.payment_failures > 0
                    && res.state == Ec2State::PaymentPending
                    && set(&mut res.state, Ec2State::PaymentFailed)
                    && spend(&mut n.left.payment_failures)
            }
            Action::Drop { r } => {
                let res = &mut n.ec2.reservations[r as usize];
                res.state == Ec2State::PaymentFailed && set(&mut res.dropped, true)
            }
            // A scheduled run lasts 90 s at most (the template's Timeout), the tracker's 60 s: five
            // minutes on, a scan mid-run and the tracker's look are gone. A person's command
            // (`capblock buy`) may wait that long.
            Action::Tick => {
                spend(&mut n.left.ticks) && {
                    n.minute += TICK;
                    for actor in n.actors.iter_mut().filter(|a| a.who == Who::Scan && a.step != Step::Start) {
                        actor.step = Step::Done;
                    }
                    n.tracker.looked = None;
                    true
                }
            }
            // Twelve hours pass between runs, not inside one. EC2 may still not list a
            // reservation it sold when they have passed (the record publishes no bound on the
            // listing lag: `infra/market-sim/README.md`), so a jump crosses every payment
            // deadline with or without it listed.
            Action::Jump => {
                let between_runs = w.actors.iter().all(|a| matches!(a.step, Step::Start | Step::Done));
                between_runs && spend(&mut n.left.jumps) && {
                    n.minute += JUMP;
                    n.tracker.looked = None;
                    true
                }
            }
        };
        changed.then_some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}

/// Takes one of a bounded fault or time: false when none is left.
fn spend(left: &mut u8) -> bool {
    if *left == 0 {
        return false;
    }
    *left -= 1;
    true
}

/// Sets `slot`, telling whether that changed anything.
fn set<T: PartialEq>(slot: &mut T, value: T) -> bool {
    if *slot == value {
        return false;
    }
    *slot = value;
    true
}

/// EC2 takes (or fails) the payment of every part of intent `o`'s purchase still waiting.
fn pay(w: &mut World, o: u8, to: Ec2State) -> bool {
    let mut changed = false;
    for r in w.ec2.reservations.iter_mut().filter(|r| r.o == o && r.state == Ec2State::PaymentPending) {
        r.state = to;
        changed = true;
    }
    changed
}

fn usage_of(u: &Usage) -> BudgetUsage {
    BudgetUsage { committed: usd(u.committed), spent: usd(u.spent), purchases: u.purchases }
}

impl Protocol {
    /// The protocol as the code is: every bug switch of the core turned off (the switches are
    /// process-wide: a process checks one protocol at a time).
    pub fn new(bounds: Bounds) -> Protocol {
        capblock_core::sabotage::put_back(None);
        let mut rules: Vec<Rule> = (0..usize::from(bounds.rules.clamp(1, 2)))
            .map(|i| {
                rule(i, Shape { parts: bounds.parts.max(1), segmented: bounds.segments }, bounds.limit, bounds.max_held)
            })
            .collect();
        let request = (bounds.request_scans > 0).then(crate::world::request);
        if let Some(r) = &request {
            // Rule 0 shares the request's team; rule 1 is the request's own one-shot rule.
            rules[0].team = Some(crate::world::TEAM.into());
            rules.truncate(1);
            rules.push(r.as_rule());
        }
        Protocol {
            bounds,
            sabotage: None,
            also: None,
            rules,
            stack: stack(bounds.account_limit, bounds.team_limit),
            request,
            teams: crate::world::team_approvals(),
        }
    }

    /// With `sabotage` put back: in the core's own code when it is a bug of the core's
    /// (`Sabotage::bug`, switched on for the whole process), in the model's steps otherwise.
    pub fn with(self, sabotage: Sabotage) -> Protocol {
        capblock_core::sabotage::put_back(sabotage.bug());
        Protocol { sabotage: Some(sabotage), ..self }
    }

    /// `sabotage` put back beside the one `with` put back: a bug in the model's own ledger
    /// writes (no core switch), for a bug another guard stands behind.
    pub fn and(self, sabotage: Sabotage) -> Protocol {
        assert!(sabotage.bug().is_none(), "{} is the core's: put it back with `with`", sabotage.name());
        Protocol { also: Some(sabotage), ..self }
    }

    /// One step of a path, in words, from the state it was taken in.
    pub fn describe(&self, w: &World, action: &Action) -> String {
        let t = format!("t+{:>4} min", w.minute);
        let name = |k: u8| format!("{}/cb-{}", rule_id(rule_of(k)), offering_index(k));
        let actor = |a: u8| {
            let who = match w.actors[a as usize].who {
                Who::Scan => "scan",
                Who::Hand => "capblock buy",
                Who::Replay => "dry-run replay",
                Who::Release => "capblock intents release",
                Who::Lead => "the lead",
                Who::Requester => "the requester",
            };
            format!("{who} #{a}")
        };
        let what = match action {
            Action::Act { a, choice } => {
                let does = match (w.actors[*a as usize].who, w.actors[*a as usize].step) {
                    (Who::Replay, _) => {
                        format!("judges intent {} on its run time", name(key(w.actors[*a as usize].rule, *choice)))
                    }
                    (Who::Release, Step::Start) => format!(
                        "finds {} sent an hour ago or more, EC2 listing nothing tagged with it",
                        name(key(w.actors[*a as usize].rule, *choice))
                    ),
                    (Who::Release, Step::Checked { o }) => format!("releases {}'s fee", name(o)),
                    (Who::Lead, _) if *choice == 0 => "approves the request".into(),
                    (Who::Lead, _) => "rejects the request".into(),
                    (Who::Requester, _) => "cancels the request".into(),
                    (_, Step::Start) => format!("decides on {}", name(key(w.actors[*a as usize].rule, *choice))),
                    (_, Step::Decided { o, .. }) => format!("reserves the budgets for {}", name(o)),
                    (_, Step::Reserved { o }) if *choice == 0 => format!("re-checks {}: still on sale", name(o)),
                    (_, Step::Reserved { o }) => format!("re-checks {}: changed, gives it back", name(o)),
                    (_, Step::Checked { o }) => format!("marks {} Sent", name(o)),
                    (_, Step::Sent { o }) => {
                        let answer =
                            ["bought", "bought, answer lost", "answer lost, nothing bought", "throttled", "refused"];
                        format!("calls PurchaseCapacityBlock for {}: {}", name(o), answer[usize::from(*choice).min(4)])
                    }
                    (_, Step::Answered { o, answer }) => format!("writes the answer for {} ({answer:?})", name(o)),
                    (_, Step::Done) => "is done".into(),
                };
                format!("{} {does}", actor(*a))
            }
            Action::Crash { a } => format!("{} crashes", actor(*a)),
            Action::Look { o } => format!("tracker asks EC2 for reservations tagged with intent {}", name(*o)),
            Action::Settle => "tracker writes what the look means".into(),
            Action::TrackerCrash => "tracker crashes".into(),
            Action::Track { r, crash: false } => format!("tracker observes cr-{r} and stores its move"),
            Action::Track { r, crash: true } => format!("tracker observes cr-{r}, releases what it releases, crashes"),
            Action::Adopt { r } => format!("tracker adopts cr-{r}"),
            Action::List { r } => format!("EC2 lists cr-{r}"),
            Action::Unlist { r } => format!("EC2's answers miss cr-{r} (a stale read)"),
            Action::Garble { r } => format!("EC2 describes cr-{r} without a member capblock needs"),
            Action::Mend { r } => format!("EC2 describes cr-{r} in full again"),
            Action::Pay { o } => format!("EC2 takes the payment for {}", name(*o)),
            Action::FailPayment { o } => format!("EC2 fails the payment for {}", name(*o)),
            Action::FailPart { r } => format!("EC2 fails the payment of cr-{r} alone"),
            Action::Drop { r } => format!("EC2 stops listing cr-{r} (payment failed)"),
            Action::Tick => format!("{TICK} minutes pass"),
            Action::Jump => "12 hours pass".into(),
        };
        format!("{t}  {what}")
    }

    fn parts(&self) -> u8 {
        self.bounds.parts.max(1)
    }

    /// What one purchase makes.
    fn shape(&self) -> Shape {
        Shape { parts: self.parts(), segmented: self.bounds.segments }
    }

    fn on(&self, s: Sabotage) -> bool {
        self.sabotage == Some(s) || self.also == Some(s)
    }

    /// The run time an actor's step runs at: the functions' clock; a replay's view is two hours
    /// off it.
    fn run_time(&self, w: &World, who: Who) -> RunTime {
        let clock = at(w.minute);
        match who {
            Who::Replay => RunTime::asked(clock, Some(clock + chrono::Duration::minutes(REPLAY_AHEAD))),
            Who::Scan | Who::Hand | Who::Release | Who::Lead | Who::Requester => RunTime::from(clock),
        }
    }

    fn act(&self, w: &mut World, a: usize, choice: u8) -> bool {
        let (who, step, rule) = (w.actors[a].who, w.actors[a].step, w.actors[a].rule);
        let next = match (who, step) {
            (Who::Replay, Step::Start) => self.replay(w, key(rule, choice)),
            (Who::Release, Step::Start) => self.look_before_release(w, key(rule, choice)),
            (Who::Release, Step::Checked { o }) => self.release(w, o),
            (Who::Release, _) => None,
            (Who::Lead, Step::Start) => self.lead_decides(w, choice == 0),
            (Who::Requester, Step::Start) => self.requester_cancels(w),
            (Who::Lead | Who::Requester, _) => None,
            (_, Step::Start) => self.decide(w, key(rule, choice)),
            (_, Step::Decided { o, seq, closed }) => self.reserve(w, o, seq, closed),
            (_, Step::Reserved { o }) => self.recheck(w, o, choice),
            (_, Step::Checked { o }) => self.mark_sent(w, o),
            (_, Step::Sent { o }) => self.call(w, o, choice),
            (_, Step::Answered { o, answer }) => self.record(w, o, answer),
            (_, Step::Done) => None,
        };
        match next {
            Some(step) => {
                w.actors[a].step = step;
                true
            }
            None => false,
        }
    }

    /// A scan's (or a person's) decision to buy offering `o`: the rule's guard, its held blocks
    /// and its budgets as read now, judged by the core's `decision::check`.
    fn decide(&self, w: &World, o: u8) -> Option<Step> {
        let ri = rule_of(o);
        let rule = &self.rules[ri];
        // A request's one-shot rule is asked only when the scan's reading of the request says
        // so (`requests::check_request`); `closed` is the model's own word on the request then.
        let closed = match (ri, &self.request) {
            (1, Some(_)) => match self.read_request(w) {
                Some(closed) => closed,
                None => return Some(Step::Done),
            },
            _ => false,
        };
        if w.store.guards[ri].is_some() || w.store.intents.contains_key(&o) {
            return Some(Step::Done);
        }
        let blocks: Vec<_> = w
            .store
            .blocks
            .keys()
            .filter(|r| rule_of(w.ec2.reservations[usize::from(**r)].o) == ri)
            .filter_map(|r| block(&self.rules, &self.stack, w, *r, self.shape()))
            .collect();
        // The buyer's own refusal (`Buyer::no_room`), on the blocks as the store holds them.
        if held_refusal(rule, Ok(purchases_held_at(&blocks, &w.store.holds[ri], at(w.minute)))).is_some() {
            return Some(Step::Done);
        }
        let now = at(w.minute);
        let account = self.stack.account.unwrap_or(rule.monthly_budget);
        let team = match &rule.team {
            Some(t) => {
                self.stack.teams.get(t).map_or(rule.monthly_budget, |limit| room(*limit, usd(w.store.team.committed)))
            }
            None => rule.monthly_budget,
        };
        let headroom = room(rule.monthly_budget, usd(w.store.rules[ri].committed))
            .amount()
            .min(room(account, usd(w.store.account.committed)).amount())
            .min(team.amount());
        let priced = Priced::new(offering_of(o, self.shape()), &AcceleratorCatalog::new())?;
        match check(rule, &priced, Headroom(usd(headroom.try_into().unwrap_or(0))), now) {
            None => Some(Step::Decided { o, seq: w.store.seqs[ri], closed }),
            Some(_) => Some(Step::Done),
        }
    }

    /// The one reservation transaction: the intent (new), the guard (no open intent, the
    /// sequence read), and every charge the core's `charges_for` names, each `admits`-ed.
    fn reserve(&self, w: &mut World, o: u8, seq: u8, closed: bool) -> Option<Step> {
        if self.on(Sabotage::ChargeAfterPurchase) {
            // The bug: straight to EC2, the budgets charged when the answer is written.
            return Some(Step::Sent { o });
        }
        let ri = rule_of(o);
        let now = at(w.minute);
        let charges = charges_for(&self.rules[ri], &self.stack, &Period::budget_month(now)).ok()?;
        let fits = charges.iter().all(|c| self.admits(w, ri, c));
        if w.store.intents.contains_key(&o) || w.store.guards[ri].is_some() || w.store.seqs[ri] != seq || !fits {
            return Some(Step::Done);
        }
        // A request's purchase checks the request item, filed and not cancelled, and consumes
        // its approval, in the same transaction (`Ledger::reserve`'s `RequestClosed` and
        // `ApprovalUsed`).
        if self.rules[ri].request.is_some() && !self.reserve_request(w, o) {
            return Some(Step::Done);
        }
        let owners: Vec<&BudgetOwner> = charges.iter().map(|c| &c.owner).collect();
        assert!(
            matches!(
                owners.as_slice(),
                [BudgetOwner::Rule(_), BudgetOwner::Account]
                    | [BudgetOwner::Rule(_), BudgetOwner::Team(_), BudgetOwner::Account]
            ),
            "the model keeps a rule's budget, its team's and the account's, not {owners:?}"
        );
        charge(w, o, 1);
        w.store.guards[ri] = Some(o);
        w.store.seqs[ri] += 1;
        let stored = StoredIntent {
            state: IntentState::Reserved,
            created: w.minute,
            sent: None,
            parts: vec![],
            fee_released: false,
            released_by_person: false,
            read_closed: closed,
            reserved_cancelled: self.rules[ri].request.is_some() && w.store.request.cancelled,
        };
        w.store.intents.insert(o, stored);
        Some(Step::Reserved { o })
    }

    fn admits(&self, w: &World, ri: usize, c: &BudgetCharge) -> bool {
        let usage = match c.owner {
            BudgetOwner::Account => usage_of(&w.store.account),
            BudgetOwner::Team(_) => usage_of(&w.store.team),
            _ => usage_of(&w.store.rules[ri]),
        };
        admits(c, Some(&usage), usd(crate::world::FEE))
    }

    /// The re-check: confirmed (`choice` 0), or changed or unanswered (1): given back.
    fn recheck(&self, w: &mut World, o: u8, choice: u8) -> Option<Step> {
        if choice == 0 {
            return Some(Step::Checked { o });
        }
        if !spend(&mut w.left.recheck_failures) {
            return None;
        }
        close(w, o, Close::GiveBack(IntentState::Reserved));
        Some(Step::Done)
    }

    /// `mark_sent`: only a Reserved intent becomes Sent.
    fn mark_sent(&self, w: &mut World, o: u8) -> Option<Step> {
        let minute = w.minute;
        match w.store.intents.get_mut(&o) {
            Some(i) if i.state == IntentState::Reserved => {
                i.state = IntentState::Sent;
                i.sent = Some(minute);
                Some(Step::Sent { o })
            }
            _ => Some(Step::Done),
        }
    }

    /// PurchaseCapacityBlock, once. `choice`: bought and answered, bought and the answer lost,
    /// lost before EC2 acted, throttled, refused.
    fn call(&self, w: &mut World, o: u8, choice: u8) -> Option<Step> {
        let answer = match choice {
            0 => Answer::Bought,
            1 if spend(&mut w.left.lost) => Answer::LostAfterBuying,
            2 if spend(&mut w.left.lost) => Answer::LostBeforeBuying,
            3 if spend(&mut w.left.throttled) => Answer::Throttled,
            4 if spend(&mut w.left.refused) => Answer::Refused,
            _ => return None,
        };
        if matches!(answer, Answer::Bought | Answer::LostAfterBuying) {
            *w.ec2.purchases.entry(o).or_default() += 1;
            for _ in 0..self.parts() {
                let res = Res { o, listed: false, readable: true, state: Ec2State::PaymentPending, dropped: false };
                w.ec2.reservations.push(res);
            }
        }
        Some(Step::Answered { o, answer })
    }

    /// Writes EC2's answer: the purchase recorded, or the error's meaning as the core's
    /// `failed_purchase` decides it.
    fn record(&self, w: &mut World, o: u8, answer: Answer) -> Option<Step> {
        let region = "us-east-1".to_string();
        let error = match answer {
            Answer::Bought => {
                if self.on(Sabotage::ChargeAfterPurchase) {
                    w.store.intents.entry(o).or_insert(StoredIntent {
                        state: IntentState::Sent,
                        created: w.minute,
                        sent: Some(w.minute),
                        parts: vec![],
                        fee_released: false,
                        released_by_person: false,
                        read_closed: false,
                        reserved_cancelled: false,
                    });
                    charge(w, o, 1);
                }
                let parts = w.ec2.parts_of(o);
                let parts = parts[parts.len() - self.parts() as usize..].to_vec();
                record_bought(w, o, parts);
                return Some(Step::Done);
            }
            Answer::LostAfterBuying | Answer::LostBeforeBuying => MarketError::Unknown {
                operation: "PurchaseCapacityBlock",
                region,
                message: "dispatch failure: timed out".into(),
            },
            Answer::Throttled => {
                MarketError::Throttled { operation: "PurchaseCapacityBlock", region, code: REQUEST_LIMIT }
            }
            Answer::Refused => MarketError::Rejected {
                operation: "PurchaseCapacityBlock",
                region,
                code: "InsufficientInstanceCapacity".into(),
                message: "no capacity".into(),
            },
        };
        match failed_purchase(&error) {
            FailedPurchase::GiveBack => close(w, o, Close::GiveBack(IntentState::Sent)),
            FailedPurchase::Refused => close(w, o, Close::Reject),
            FailedPurchase::Unknown => {}
        }
        Some(Step::Done)
    }

    /// A replay settles (and buys) nothing: every open intent is judged on its run time.
    fn replay(&self, w: &mut World, o: u8) -> Option<Step> {
        let mut at = self.run_time(w, Who::Replay);
        if self.on(Sabotage::SettleOnReplayedClock) {
            at = RunTime::from(at.view());
        }
        let stored = w.store.intents.get(&o)?.clone();
        match judge(&intent(&self.rules[rule_of(o)], &self.stack, o, self.shape(), &stored), at, None) {
            Judgement::GiveBack => close(w, o, Close::GiveBack(stored.state)),
            Judgement::NotOnTheClock => return None,
            _ => {}
        }
        Some(Step::Done)
    }

    /// The tracker asks EC2 by tag for intent `o` (only a Sent one is asked; a Reserved one is
    /// judged on its age alone, in `settle`).
    pub(crate) fn look(&self, w: &mut World, o: u8) -> bool {
        let Some(stored) = w.store.intents.get(&o) else { return false };
        if !stored.state.is_open() {
            return false;
        }
        let listed: Vec<u8> = w
            .ec2
            .parts_of(o)
            .into_iter()
            .filter(|r| {
                let res = &w.ec2.reservations[*r as usize];
                res.listed && !res.dropped
            })
            .collect();
        let (tagged, garbled): (Vec<u8>, Vec<u8>) =
            listed.into_iter().partition(|r| w.ec2.reservations[*r as usize].readable);
        w.tracker.looked = Some(Looked { o, minute: w.minute, tagged, unreadable: !garbled.is_empty() });
        true
    }

    /// What the look means, by the settlement's own `reconcile::settle_step`, written.
    pub(crate) fn settle(&self, w: &mut World) -> bool {
        let Some(looked) = w.tracker.looked.take() else { return false };
        let o = looked.o;
        let Some(stored) = w.store.intents.get(&o).cloned() else { return true };
        let at = RunTime::from(crate::world::at(looked.minute));
        let i = intent(&self.rules[rule_of(o)], &self.stack, o, self.shape(), &stored);
        let shown = if !looked.tagged.is_empty() {
            Shown::Tagged
        } else if looked.unreadable {
            Shown::Unreadable
        } else {
            Shown::Nothing
        };
        // The settlement's own step (`reconcile::settle_step`), written as `carry_out` writes it.
        let step = match settle_step(&i, at, None) {
            SettleStep::LookUp => settle_step(&i, at, Some(shown)),
            step => step,
        };
        match step {
            SettleStep::GiveBack(_) => close(w, o, Close::GiveBack(stored.state)),
            SettleStep::Adopt => record_bought(w, o, looked.tagged),
            SettleStep::HoldForAPerson => enqueue(w, Notice::OutcomeUnknown(o)),
            SettleStep::HoldUnreadable => enqueue(w, Notice::Unreadable(o)),
            SettleStep::LookUp | SettleStep::StillOpen(_) => {}
        }
        true
    }

    /// The tracker adopts a listed, readable part of a bought purchase the table lacks
    /// (`app::track` adopts by the stack's tag; the intent's parts say whose it is).
    pub(crate) fn adopt(&self, w: &mut World, r: u8) -> bool {
        let res = &w.ec2.reservations[r as usize];
        if !res.listed || res.dropped || !res.readable || w.store.blocks.contains_key(&r) {
            return false;
        }
        let o = res.o;
        let Some(state) = w.store.intents.get(&o).map(|i| i.state) else { return false };
        // A purchase whose intent was closed unbought, EC2 holding it after all: recorded
        // bought with this part, its fee committed again with no limit, a person told
        // (`Tracker::hold_after_close`, on the core's `held_after_close_of`).
        if held_after_close_of(state, w.ec2.state_name(r)) {
            if let Some(i) = w.store.intents.get_mut(&o) {
                i.state = IntentState::Bought;
                i.parts = vec![r];
            }
            charge(w, o, 1);
            w.store.rules[rule_of(o)].spent += crate::world::FEE;
            w.store.account.spent += crate::world::FEE;
            enqueue(w, Notice::HeldAfterClose(o));
            return w.store.blocks.insert(r, BlockState::PaymentPending).is_none();
        }
        state == IntentState::Bought && w.store.blocks.insert(r, BlockState::PaymentPending).is_none()
    }

    /// A person's look before `capblock intents release` of intent `o`: it is sent, sent at
    /// least `RELEASE_MIN_AGE` ago on the clock (`settlement::may_release`), and EC2 lists no
    /// reservation tagged with it (an unreadable one is listed too).
    fn look_before_release(&self, w: &World, o: u8) -> Option<Step> {
        let stored = w.store.intents.get(&o).filter(|i| i.state == IntentState::Sent)?;
        let i = intent(&self.rules[rule_of(o)], &self.stack, o, self.shape(), stored);
        may_release(&i, at(w.minute)).ok()?;
        let listed = w.ec2.reservations.iter().any(|r| r.o == o && r.listed && !r.dropped);
        (!listed).then_some(Step::Checked { o })
    }

    /// `Ledger::release_by_person`, conditional on the intent still being sent: the fee off
    /// every budget, the guard freed, and the purchase kept on the guard (`ReleasedHold::of`) so
    /// it counts against `max_blocks_held` until its start.
    fn release(&self, w: &mut World, o: u8) -> Option<Step> {
        let Some(stored) = w.store.intents.get(&o).filter(|i| i.state == IntentState::Sent).cloned() else {
            return Some(Step::Done);
        };
        let hold = ReleasedHold::of(&intent(&self.rules[rule_of(o)], &self.stack, o, self.shape(), &stored));
        if let Some(i) = w.store.intents.get_mut(&o) {
            i.state = IntentState::Rejected;
            i.released_by_person = true;
        }
        charge(w, o, -1);
        if w.store.guards[rule_of(o)] == Some(o) {
            w.store.guards[rule_of(o)] = None;
        }
        if !self.on(Sabotage::ReleaseWithoutHold) {
            add_hold(w, o, hold);
        }
        Some(Step::Done)
    }

    /// One block observed and its move stored (`Tracker::track_block` / `apply_move`): a move to
    /// payment-failed first gives the purchase's fee back when the tracker's own
    /// `part_still_held` finds no part held, once per purchase; then the block's new state is
    /// stored.
    pub(crate) fn track(&self, w: &mut World, r: u8, crash: bool) -> bool {
        let Some(b) = block(&self.rules, &self.stack, w, r, self.shape()) else { return false };
        let observed = w.ec2.observe(r);
        let now = at(w.minute);
        let transition = b.transition(&observed, now);
        let Transition::Move { to, .. } = transition else { return false };
        if crash && !spend(&mut w.left.crashes) {
            return false;
        }
        let o = w.ec2.reservations[r as usize].o;
        if to == BlockState::PaymentFailed {
            enqueue(w, Notice::PaymentFailed(r));
            // The tracker's own judgement (`track::part_still_held`) on what it would read of
            // the other parts: each one's block, and EC2's word on it.
            let mut kept = None;
            let others_failed = match w.store.intents.get(&o) {
                Some(stored) => {
                    let i = intent(&self.rules[rule_of(o)], &self.stack, o, self.shape(), stored);
                    kept = kept_fee_hold(&i);
                    let others: Vec<PartSeen> = stored
                        .parts
                        .iter()
                        .filter(|p| **p != r)
                        .map(|p| PartSeen {
                            id: reservation_id(*p),
                            stored: w.store.blocks.get(p).copied(),
                            instances: w.store.blocks.get(p).map(|_| 1),
                            seen: Some(w.ec2.observe(*p)),
                        })
                        .collect();
                    part_still_held(&b, &i, &others).is_none()
                }
                None => true,
            };
            if others_failed || self.on(Sabotage::ReleasePerPart) {
                release_failed(w, o, self.on(Sabotage::ReleasePerPart));
            }
            // The fee kept: the hold the tracker leaves on the rule's guard (`Ledger::add_hold`,
            // idempotent), written before the move is stored, as production does.
            if let (false, Some(hold)) = (others_failed, kept) {
                add_hold(w, o, hold);
            }
        }
        if !crash {
            w.store.blocks.insert(r, to);
        }
        true
    }
}

/// Charges (`sign` 1) or releases (-1) the fee on the two budgets every intent of the model
/// draws on (what `charges_for` names for a rule without a team: the rule's and the account's;
/// `reserve` checks it), and the rule's purchase count with it.
fn charge(w: &mut World, o: u8, sign: i64) {
    let rule = &mut w.store.rules[rule_of(o)];
    rule.committed += sign * crate::world::FEE;
    rule.purchases = rule.purchases.saturating_add_signed(sign as i32);
    w.store.account.committed += sign * crate::world::FEE;
    if w.teamed[rule_of(o)] {
        w.store.team.committed += sign * crate::world::FEE;
    }
}

/// How an open intent closes.
enum Close {
    /// Deleted (the offering free to try again), conditional on the state its closer read, as
    /// the ledger's delete is: an intent another actor moved on since is not given back.
    GiveBack(IntentState),
    /// Rejected by EC2: kept as tried, conditional on being open.
    Reject,
}

/// Closes an intent: its fee goes back and its rule's guard opens, in one transaction.
fn close(w: &mut World, o: u8, how: Close) {
    let Some(i) = w.store.intents.get(&o) else { return };
    let applies = match how {
        Close::GiveBack(expected) => i.state == expected && i.state.is_open(),
        Close::Reject => i.state.is_open(),
    };
    if !applies {
        return;
    }
    charge(w, o, -1);
    match how {
        Close::GiveBack(_) => {
            w.store.intents.remove(&o);
            // Nothing was bought on the request's approval: it may buy again
            // (`Ledger::record_given_back`).
            if w.store.request.consumed_by == Some(o) {
                w.store.request.consumed_by = None;
            }
        }
        Close::Reject => {
            if let Some(i) = w.store.intents.get_mut(&o) {
                i.state = IntentState::Rejected;
            }
            // EC2 bought nothing on the request's approval (`Ledger::record_rejected`).
            if w.store.request.consumed_by == Some(o) {
                w.store.request.consumed_by = None;
            }
            enqueue(w, Notice::Rejected(o));
        }
    }
    if w.store.guards[rule_of(o)] == Some(o) {
        w.store.guards[rule_of(o)] = None;
    }
}

/// `record_bought`: the intent Bought with its parts, the first part's block, the purchase
/// announced, the fee spent, the guard open; conditional on the intent still being open.
fn record_bought(w: &mut World, o: u8, parts: Vec<u8>) {
    let Some(i) = w.store.intents.get_mut(&o) else { return };
    if !i.state.is_open() || parts.is_empty() {
        return;
    }
    i.state = IntentState::Bought;
    i.parts = parts.clone();
    w.store.blocks.insert(parts[0], BlockState::PaymentPending);
    w.store.rules[rule_of(o)].spent += crate::world::FEE;
    w.store.account.spent += crate::world::FEE;
    announce(w, Notice::Purchased(o));
    if w.store.guards[rule_of(o)] == Some(o) {
        w.store.guards[rule_of(o)] = None;
    }
}

/// `release_failed_block`: once per purchase (the intent's mark), the fee off every budget and
/// the month's purchase given back (the rule buys again after a failed payment).
fn release_failed(w: &mut World, o: u8, per_part: bool) {
    let Some(i) = w.store.intents.get_mut(&o) else { return };
    if i.fee_released && !per_part {
        return;
    }
    i.fee_released = true;
    charge(w, o, -1);
    w.store.rules[rule_of(o)].spent -= crate::world::FEE;
    w.store.account.spent -= crate::world::FEE;
}

/// `Ledger::add_hold` (and a person's release's own hold): `hold` on intent `o`'s rule's guard,
/// once however often it is written.
fn add_hold(w: &mut World, o: u8, hold: ReleasedHold) {
    let holds = &mut w.store.holds[rule_of(o)];
    if !holds.contains(&hold) {
        holds.push(hold);
    }
}

/// A conditional put of a notice alone (the outbox's `enqueue`): written once, whoever
/// writes it, whatever the runs.
fn enqueue(w: &mut World, n: Notice) {
    w.store.notices.entry(n).or_insert(1);
}

/// A notice written inside a transaction that commits (a purchase recorded): counted at each
/// commit, so a protocol that could record one purchase twice shows it.
fn announce(w: &mut World, n: Notice) {
    *w.store.notices.entry(n).or_default() += 1;
}
