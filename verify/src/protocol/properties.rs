//! What must hold in every state the checker reaches. stateright takes plain `fn`s.

use capblock_core::domain::budget::IntentState;
use stateright::Property;

use rust_decimal::Decimal;

use crate::protocol::Protocol;
use crate::world::{FEE, Notice, StoredIntent, TEAM, World, rule_of};

pub const ONE_PURCHASE_PER_INTENT: &str = "at most one PurchaseCapacityBlock that bought, per intent";
pub const HELD_WITHIN_RULE: &str = "EC2 never holds more of the rule's purchases than it may hold";
pub const WITHIN_LIMITS: &str = "no budget commits past its limit";
pub const EC2_WITHIN_COMMITTED: &str = "what EC2 holds is always committed in every budget";
pub const LEDGER_ADDS_UP: &str = "each budget commits exactly the fees of open and unreleased purchases";
pub const ANNOUNCED_AT_MOST_ONCE: &str = "every announcement at most once";
pub const SETTLED_BY_THE_RUNS_THAT_FOLLOW: &str =
    "every purchase is on the books and announced once the runs that follow have run";
pub const REQUEST_BOUGHT_ONCE: &str = "a person's request is bought at most once";
pub const APPROVAL_CONSUMED_ONCE: &str = "a request's approval is consumed once, by the one purchase it makes";
pub const CLOSED_REQUEST_NOT_BOUGHT: &str = "a request read cancelled, unapproved or already bought is never reserved";
pub const CANCELLED_REQUEST_NOT_RESERVED: &str = "a request cancelled before its reservation is never reserved";

pub fn all() -> Vec<Property<Protocol>> {
    vec![
        Property::always(ONE_PURCHASE_PER_INTENT, |_, w: &World| w.ec2.purchases.values().all(|n| *n <= 1)),
        // A purchase of UltraServers is one block to the rule, however many parts it has.
        Property::always(HELD_WITHIN_RULE, |m: &Protocol, w: &World| {
            m.rules.iter().enumerate().all(|(ri, rule)| held_by(w, ri).len() <= rule.max_blocks_held as usize)
        }),
        // A fee committed again for a purchase a person released (EC2 listed it after all) is
        // not a decision to spend: EC2 took the money, and the books say so past any limit.
        // Each rule's own limit (a request's: the most fee its approval allows), the team's
        // (which rules and requests share) and the account's.
        Property::always(WITHIN_LIMITS, |m: &Protocol, w: &World| {
            let within = |committed: i64, limit: Decimal| Decimal::from(committed) <= limit;
            (0..m.rules.len()).all(|ri| {
                within(w.store.rules[ri].committed - recommitted(w, |r| r == ri), m.rules[ri].monthly_budget.amount())
            }) && w.store.account.committed - recommitted(w, |_| true) <= m.bounds.account_limit
                && m.stack.teams.get(TEAM).is_none_or(|limit| {
                    within(w.store.team.committed - recommitted(w, |r| w.teamed[r]), limit.amount())
                })
        }),
        // Except a purchase a person released while EC2 had not listed it: their judgement
        // against EC2's, which the tracker corrects once EC2 lists it (the runs that follow).
        Property::always(EC2_WITHIN_COMMITTED, |m: &Protocol, w: &World| {
            let counted = |k: &u8| !released(w, *k);
            let each = (0..m.rules.len()).all(|ri| {
                FEE * held_by(w, ri).iter().filter(|k| counted(k)).count() as i64 <= w.store.rules[ri].committed
            });
            let team = w.ec2.held_purchases().iter().filter(|k| w.teamed[rule_of(**k)] && counted(k)).count() as i64;
            each && FEE * w.ec2.held_purchases().iter().filter(|k| counted(k)).count() as i64
                <= w.store.account.committed
                && FEE * team <= w.store.team.committed
        }),
        Property::always(LEDGER_ADDS_UP, |m: &Protocol, w: &World| {
            let owed = |ri: Option<usize>| {
                let counted = |k: &u8, i: &StoredIntent| {
                    ri.is_none_or(|ri| rule_of(*k) == ri)
                        && (i.state.is_open() || (i.state == IntentState::Bought && !i.fee_released))
                };
                FEE * w.store.intents.iter().filter(|(k, i)| counted(k, i)).count() as i64
            };
            let team = FEE
                * w.store
                    .intents
                    .iter()
                    .filter(|(k, i)| {
                        w.teamed[rule_of(**k)]
                            && (i.state.is_open() || (i.state == IntentState::Bought && !i.fee_released))
                    })
                    .count() as i64;
            (0..m.rules.len()).all(|ri| w.store.rules[ri].committed == owed(Some(ri)))
                && w.store.account.committed == owed(None)
                && w.store.team.committed == team
        }),
        Property::always(ANNOUNCED_AT_MOST_ONCE, |_, w: &World| w.store.notices.values().all(|n| *n <= 1)),
        Property::always(SETTLED_BY_THE_RUNS_THAT_FOLLOW, settled_by_the_runs_that_follow),
        // A person's request (rule 1's, when the bound has one).
        Property::always(REQUEST_BOUGHT_ONCE, |m: &Protocol, w: &World| {
            m.request.is_none()
                || w.ec2.purchases.iter().filter(|(k, _)| rule_of(**k) == 1).map(|(_, n)| *n).sum::<u8>() <= 1
        }),
        Property::always(APPROVAL_CONSUMED_ONCE, approval_consumed_once),
        Property::always(CLOSED_REQUEST_NOT_BOUGHT, |_, w: &World| w.store.intents.values().all(|i| !i.read_closed)),
        Property::always(CANCELLED_REQUEST_NOT_RESERVED, |_, w: &World| {
            w.store.intents.values().all(|i| !i.reserved_cancelled)
        }),
    ]
}

/// The request's approval names its one live purchase intent, or none is live and it is open.
fn approval_consumed_once(m: &Protocol, w: &World) -> bool {
    // A purchase EC2 refused bought nothing and gave the approval back.
    let of_request: Vec<u8> = w
        .store
        .intents
        .iter()
        .filter(|(k, i)| rule_of(**k) == 1 && i.state != IntentState::Rejected)
        .map(|(k, _)| *k)
        .collect();
    let consumed = w.store.request.consumed_by;
    m.request.is_none()
        || match of_request.as_slice() {
            [] => consumed.is_none(),
            [k] => consumed == Some(*k),
            _ => false,
        }
}

/// Whether intent `k` is one a person released that is still closed (`Rejected`).
fn released(w: &World, k: u8) -> bool {
    w.store.intents.get(&k).is_some_and(|i| i.released_by_person && i.state == IntentState::Rejected)
}

/// The fees committed again (the rules' `of` says) for purchases a person released that EC2
/// listed after all.
fn recommitted(w: &World, of: impl Fn(usize) -> bool) -> i64 {
    let again = |k: &u8, i: &StoredIntent| {
        of(rule_of(*k)) && i.released_by_person && i.state == IntentState::Bought && !i.fee_released
    };
    FEE * w.store.intents.iter().filter(|(k, i)| again(k, i)).count() as i64
}

/// The purchases of rule `ri` EC2 may still hold a block of.
fn held_by(w: &World, ri: usize) -> Vec<u8> {
    w.ec2.held_purchases().into_iter().filter(|k| rule_of(*k) == ri).collect()
}

/// "At least once, with the runs that follow": from this state, once EC2 lists what it
/// bought readably and the tracker runs without faults, every purchase EC2 made is recorded
/// as bought (its fee spent), announced once, and every part tracked.
fn settled_by_the_runs_that_follow(m: &Protocol, w: &World) -> bool {
    if settled(w) {
        return true;
    }
    let mut w = w.clone();
    w.tracker.looked = None;
    for r in &mut w.ec2.reservations {
        r.listed |= !r.dropped;
        r.readable = true;
    }
    // Settling records a purchase (and its first part); adopting tracks the other parts.
    for _ in 0..2 {
        let intents: Vec<u8> = w.store.intents.keys().copied().collect();
        for o in intents {
            if m.look(&mut w, o) {
                m.settle(&mut w);
            }
        }
        for r in 0..w.ec2.reservations.len() as u8 {
            m.adopt(&mut w, r);
        }
    }
    settled(&w)
}

fn settled(w: &World) -> bool {
    w.ec2.purchases.keys().all(|o| {
        let parts = w.ec2.parts_of(*o);
        let intent = w.store.intents.get(o);
        if parts.iter().all(|r| w.ec2.reservations[*r as usize].dropped) {
            // EC2 failed its payment and no longer lists it before capblock saw it: nothing is
            // held, and the intent stays before a person with its fee committed, or was
            // recorded before.
            return intent.is_some_and(|i| {
                i.state == IntentState::Bought || i.state == IntentState::Sent || i.released_by_person
            });
        }
        let bought = intent.is_some_and(|i| i.state == IntentState::Bought);
        let tracked = parts.iter().all(|r| w.ec2.reservations[*r as usize].dropped || w.store.blocks.contains_key(r));
        // Announced once: as bought, or (a person released it first) as held after all.
        let told = w.store.notices.get(&Notice::Purchased(*o)) == Some(&1)
            || (intent.is_some_and(|i| i.released_by_person)
                && w.store.notices.get(&Notice::HeldAfterClose(*o)) == Some(&1));
        bought && tracked && told
    })
}
