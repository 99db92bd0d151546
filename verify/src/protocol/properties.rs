//! What must hold in every state the checker reaches. stateright takes plain `fn`s.

use capblock_core::domain::budget::IntentState;
use stateright::Property;

use crate::protocol::Protocol;
use crate::world::{FEE, Notice, StoredIntent, World, rule_of};

pub const ONE_PURCHASE_PER_INTENT: &str = "at most one PurchaseCapacityBlock that bought, per intent";
pub const HELD_WITHIN_RULE: &str = "EC2 never holds more of the rule's purchases than it may hold";
pub const WITHIN_LIMITS: &str = "no budget commits past its limit";
pub const EC2_WITHIN_COMMITTED: &str = "what EC2 holds is always committed in every budget";
pub const LEDGER_ADDS_UP: &str = "each budget commits exactly the fees of open and unreleased purchases";
pub const ANNOUNCED_AT_MOST_ONCE: &str = "every announcement at most once";
pub const SETTLED_BY_THE_RUNS_THAT_FOLLOW: &str =
    "every purchase is on the books and announced once the runs that follow have run";

pub fn all() -> Vec<Property<Protocol>> {
    vec![
        Property::always(ONE_PURCHASE_PER_INTENT, |_, w: &World| w.ec2.purchases.values().all(|n| *n <= 1)),
        // A purchase of UltraServers is one block to the rule, however many parts it has.
        Property::always(HELD_WITHIN_RULE, |m: &Protocol, w: &World| {
            m.rules.iter().enumerate().all(|(ri, rule)| held_by(w, ri).len() <= rule.max_blocks_held as usize)
        }),
        // A fee committed again for a purchase a person released (EC2 listed it after all) is
        // not a decision to spend: EC2 took the money, and the books say so past any limit.
        Property::always(WITHIN_LIMITS, |m: &Protocol, w: &World| {
            (0..m.rules.len()).all(|ri| w.store.rules[ri].committed - recommitted(w, Some(ri)) <= m.bounds.limit)
                && w.store.account.committed - recommitted(w, None) <= m.bounds.account_limit
        }),
        // Except a purchase a person released while EC2 had not listed it: their judgement
        // against EC2's, which the tracker corrects once EC2 lists it (the runs that follow).
        Property::always(EC2_WITHIN_COMMITTED, |m: &Protocol, w: &World| {
            let counted = |k: &u8| !released(w, *k);
            let each = (0..m.rules.len()).all(|ri| {
                FEE * held_by(w, ri).iter().filter(|k| counted(k)).count() as i64 <= w.store.rules[ri].committed
            });
            each && FEE * w.ec2.held_purchases().iter().filter(|k| counted(k)).count() as i64
                <= w.store.account.committed
        }),
        Property::always(LEDGER_ADDS_UP, |m: &Protocol, w: &World| {
            let owed = |ri: Option<usize>| {
                let counted = |k: &u8, i: &StoredIntent| {
                    ri.is_none_or(|ri| rule_of(*k) == ri)
                        && (i.state.is_open() || (i.state == IntentState::Bought && !i.fee_released))
                };
                FEE * w.store.intents.iter().filter(|(k, i)| counted(k, i)).count() as i64
            };
            (0..m.rules.len()).all(|ri| w.store.rules[ri].committed == owed(Some(ri)))
                && w.store.account.committed == owed(None)
        }),
        Property::always(ANNOUNCED_AT_MOST_ONCE, |_, w: &World| w.store.notices.values().all(|n| *n <= 1)),
        Property::always(SETTLED_BY_THE_RUNS_THAT_FOLLOW, settled_by_the_runs_that_follow),
    ]
}

/// Whether intent `k` is one a person released that is still closed (`Rejected`).
fn released(w: &World, k: u8) -> bool {
    w.store.intents.get(&k).is_some_and(|i| i.released_by_person && i.state == IntentState::Rejected)
}

/// The fees committed again (rule `ri`'s, or every rule's) for purchases a person released
/// that EC2 listed after all.
fn recommitted(w: &World, ri: Option<usize>) -> i64 {
    let again = |k: &u8, i: &StoredIntent| {
        ri.is_none_or(|ri| rule_of(*k) == ri)
            && i.released_by_person
            && i.state == IntentState::Bought
            && !i.fee_released
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
