//! Everything the simulator knows, behind one Mutex in the server. Never held across an await.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::clock::SimClock;
use crate::describe_limit::{CallCounts, DescribeBucket, DescribeCall};
use crate::faults::{Fault, FaultCounts, TokenBucket};
use crate::launch_templates::LaunchTemplate;
use crate::organization::Organization;
use crate::reservations::{Extension, Reservation, Visibility};
use crate::resource_shares::ResourceShare;
use crate::rng::{SplitMix64, stable_id};
use crate::scenario::{Behaviour, ExtensionOfferingsLimit, Scenario};
use crate::wire::error::ApiError;

/// An offering id one answer handed out: what it stands for, where, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintedId {
    pub region: String,
    /// The offering's stable id (see `market::offerings`).
    pub offering_id: String,
    pub at: DateTime<Utc>,
}

/// `GET /_sim/describe/calls` keeps this many of the last DescribeCapacityBlockOfferings calls.
pub const MAX_DESCRIBE_CALLS: usize = 20_000;

pub struct World {
    pub scenario: Scenario,
    pub behaviour: Behaviour,
    pub clock: SimClock,
    pub reservations: Vec<Reservation>,
    pub extensions: Vec<Extension>,
    /// Launch templates of every region, in creation order.
    pub launch_templates: Vec<LaunchTemplate>,
    /// RAM resource shares of every region, in creation order (deleted ones stay, DELETED).
    pub resource_shares: Vec<ResourceShare>,
    /// The scenario's organization, changed by POST /_sim/ram/organization.
    pub organization: Organization,
    /// Answers of calls made with a `ClientToken`, by (region, action, token): the fingerprint
    /// of the call's parameters and the answer's body, given again to the same call.
    pub client_tokens: HashMap<(String, String, String), (u64, String)>,
    pub calls: BTreeMap<String, u64>,
    pub calls_by_region: BTreeMap<String, BTreeMap<String, u64>>,
    pub faults: FaultCounts,
    /// Separate streams so that fault coin-flips and request ids never shift resource ids.
    ids: SplitMix64,
    request_ids: SplitMix64,
    fault_rng: SplitMix64,
    /// Offering ids minted by answers under `offering_ids = "per_answer"`, by id.
    minted: HashMap<String, MintedId>,
    offer_ids: SplitMix64,
    /// Offering ids shown to an account other than the simulated one under
    /// `offering_ids_across_accounts = "per_account"` (derived, or minted under "per_answer"),
    /// with that account. They are its own: the simulated account cannot buy them, whatever the
    /// setting is later.
    other_account_ids: HashMap<String, String>,
    /// The opaque part of UnauthorizedOperation messages: a stream of its own, so that denials
    /// never shift ids.
    denials: SplitMix64,
    /// Launch template ids: a stream of their own, so that templates never shift other ids.
    template_ids: SplitMix64,
    /// Resource share ids and RAM's generated client tokens: a stream of their own too.
    share_ids: SplitMix64,
    buckets: HashMap<String, TokenBucket>,
    /// DescribeCapacityBlockOfferings' describe limit, one bucket per region: from the load on
    /// for the regions the scenario names (so that the other callers' counts show there), and
    /// from its first call for any other region...
    describe_buckets: BTreeMap<String, DescribeBucket>,
    /// ...which starts as a copy of this one: the state every region not asked yet is in (full
    /// when the limit was set, spent since by the other callers). While the limit is off the
    /// buckets are left as they were (nothing is played) and restarted when it comes back on.
    describe_fresh: DescribeBucket,
    /// The describe limit of every other account (a member account of the organization whose
    /// role a caller assumed), by (account, region): created full on first use, with the same
    /// limit but no other callers and no drain (those are people of the simulated account). A
    /// new limit empties the map, which is the same as filling every bucket: a full bucket
    /// without a drain stays full until it is spent.
    member_buckets: HashMap<(String, String), TokenBucket>,
    /// Under `extension_offerings_limit = "own"`: the extension offering questions' own bucket
    /// per (account, region), created full, of the describe limit's size.
    extension_buckets: HashMap<(String, String), TokenBucket>,
    /// DescribeCapacityBlockOfferings calls that reached the describe limit, by account.
    describe_by_account: BTreeMap<String, CallCounts>,
    /// The last `MAX_DESCRIBE_CALLS` of them, oldest first, and how many older ones were let go.
    describe_calls: VecDeque<DescribeCall>,
    describe_calls_dropped: u64,
    /// Throttling is about real request rates, so buckets run on real (monotonic) time.
    epoch: Instant,
}

impl World {
    pub fn new(scenario: Scenario) -> Self {
        let seed = scenario.seed;
        let describe_fresh = fresh_describe_bucket(&scenario.behaviour, 0.0);
        let describe_buckets = regions_named(&scenario).into_iter().map(|r| (r, describe_fresh.clone())).collect();
        Self {
            clock: SimClock::new(scenario.clock.start, scenario.clock.ticking),
            behaviour: scenario.behaviour.clone(),
            organization: scenario.organization.clone(),
            scenario,
            reservations: Vec::new(),
            extensions: Vec::new(),
            launch_templates: Vec::new(),
            resource_shares: Vec::new(),
            client_tokens: HashMap::new(),
            calls: BTreeMap::new(),
            calls_by_region: BTreeMap::new(),
            faults: FaultCounts::default(),
            ids: SplitMix64::new(seed),
            request_ids: SplitMix64::new(seed ^ 0x5245_5155_4553_5431),
            fault_rng: SplitMix64::new(seed ^ 0x4641_554c_5453_2121),
            minted: HashMap::new(),
            offer_ids: SplitMix64::new(seed ^ 0x4f46_4645_5249_4e47),
            other_account_ids: HashMap::new(),
            denials: SplitMix64::new(seed ^ 0x4445_4e49_4544_2121),
            template_ids: SplitMix64::new(seed ^ 0x4c41_554e_4348_5454),
            share_ids: SplitMix64::new(seed ^ 0x5241_4d53_4841_5245),
            buckets: HashMap::new(),
            describe_buckets,
            describe_fresh,
            member_buckets: HashMap::new(),
            extension_buckets: HashMap::new(),
            describe_by_account: BTreeMap::new(),
            describe_calls: VecDeque::new(),
            describe_calls_dropped: 0,
            epoch: Instant::now(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn new_id(&mut self, prefix: &str) -> String {
        loop {
            let id = self.ids.resource_id(prefix);
            if !self.reservations.iter().any(|r| r.id == id) {
                return id;
            }
        }
    }

    /// A fresh launch template id, `lt-` + 17 hex digits.
    pub fn new_launch_template_id(&mut self) -> String {
        loop {
            let id = self.template_ids.resource_id("lt-");
            if !self.launch_templates.iter().any(|t| t.id == id) {
                return id;
            }
        }
    }

    /// A fresh UUID for a resource share's ARN or a client token RAM generates.
    pub fn new_share_uuid(&mut self) -> String {
        self.share_ids.uuid()
    }

    /// A fresh id for the offering `offering_id` of `region`, handed out at `now`; to `other_account`
    /// when it is shown to an account other than the simulated one as that account's own (see
    /// [`Self::shown_to_other_account`]).
    pub fn mint_offering_id(
        &mut self,
        region: &str,
        offering_id: &str,
        other_account: Option<&str>,
        now: DateTime<Utc>,
    ) -> String {
        loop {
            let id = self.offer_ids.resource_id("cb-");
            if !self.minted.contains_key(&id) && id != offering_id && !self.other_account_ids.contains_key(&id) {
                let m = MintedId { region: region.to_string(), offering_id: offering_id.to_string(), at: now };
                self.minted.insert(id.clone(), m);
                if let Some(account) = other_account {
                    self.other_account_ids.insert(id.clone(), account.to_string());
                }
                return id;
            }
        }
    }

    /// The id `account` (an account other than the simulated one) is shown for the offering whose
    /// stable id is `offering_id`, under `offering_ids_across_accounts = "per_account"` with
    /// stable ids: derived from both, so the same in every answer to that account (and after a
    /// restart), another account's differs, and never the offering's own id.
    pub fn account_offering_id(&mut self, account: &str, offering_id: &str) -> String {
        let mut key = format!("account|{account}|{offering_id}");
        loop {
            let id = stable_id("cb-", &key);
            if id != offering_id {
                self.other_account_ids.insert(id.clone(), account.to_string());
                return id;
            }
            key.push('+');
        }
    }

    /// The account other than the simulated one whose own offering id `id` is, if an answer
    /// showed it to one as such (under `offering_ids_across_accounts = "per_account"`).
    pub fn shown_to_other_account(&self, id: &str) -> Option<&str> {
        self.other_account_ids.get(id).map(String::as_str)
    }

    /// How many offering ids answers have shown to other accounts as their own.
    pub fn other_account_ids_count(&self) -> usize {
        self.other_account_ids.len()
    }

    /// The offering behind an id an answer minted, if one did.
    pub fn minted(&self, id: &str) -> Option<&MintedId> {
        self.minted.get(id)
    }

    /// How many offering ids answers have minted.
    pub fn minted_count(&self) -> usize {
        self.minted.len()
    }

    /// An "Encoded authorization failure message" for one refusal: opaque (EC2's can only be
    /// decoded by STS), here 128 characters of the URL-safe base64 alphabet EC2's are written in.
    pub fn encoded_authorization_failure(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        (0..128).map(|_| ALPHABET[(self.denials.next_u64() % 64) as usize] as char).collect()
    }

    pub fn request_id(&mut self) -> String {
        self.request_ids.uuid()
    }

    /// Counts the call and decides whether a fault replaces it. Order: region down, throttle
    /// (token bucket, then random), random hang, random 500.
    pub fn admit(&mut self, region: &str, action: &str) -> Option<Fault> {
        let action = if action.is_empty() { "(none)" } else { action };
        self.count_call(region, action);

        if self.behaviour.down_regions.iter().any(|r| r == region) {
            self.faults.region_down += 1;
            return Some(Fault::Hang);
        }
        if let Some(t) = self.behaviour.throttle {
            let now = self.epoch.elapsed().as_secs_f64();
            let bucket = self
                .buckets
                .entry(region.to_string())
                .or_insert_with(|| TokenBucket::new(t.rate_per_sec, t.burst, now));
            if !bucket.try_take(now) {
                self.faults.throttled += 1;
                return Some(Fault::Throttled);
            }
        }
        if self.fault_rng.chance(self.behaviour.throttle_rate) {
            self.faults.throttled += 1;
            return Some(Fault::Throttled);
        }
        if self.fault_rng.chance(self.behaviour.timeout_rate) {
            self.faults.timeouts += 1;
            return Some(Fault::Hang);
        }
        if self.fault_rng.chance(self.behaviour.error_5xx_rate) {
            self.faults.error_5xx += 1;
            return Some(Fault::InternalError);
        }
        None
    }

    /// Counts one call of `action` in `calls` and `calls_by_region`.
    pub fn count_call(&mut self, region: &str, action: &str) {
        *self.calls.entry(action.to_string()).or_default() += 1;
        *self.calls_by_region.entry(region.to_string()).or_default().entry(action.to_string()).or_default() += 1;
    }

    /// Seconds of real (monotonic) time since the scenario's load: the describe limit's clock.
    fn real_secs(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// DescribeCapacityBlockOfferings' own limit, per account and region: takes a token from
    /// `account`'s bucket in `region` (the simulated account's is shared with its other callers),
    /// or counts a refusal. Every call is counted by account, served or not.
    pub fn take_describe_token(&mut self, account: &str, region: &str) -> bool {
        let now = self.real_secs();
        self.take_describe_token_at(account, region, now)
    }

    /// `take_describe_token` at `now` (real seconds since the load), for tests.
    pub fn take_describe_token_at(&mut self, account: &str, region: &str, now: f64) -> bool {
        let served = self.describe_token_at(account, region, now);
        self.describe_by_account.entry(account.to_string()).or_default().record(served);
        if !served {
            self.faults.describe_limited += 1;
            *self.faults.describe_limited_by_account.entry(account.to_string()).or_default() += 1;
        }
        served
    }

    fn describe_token_at(&mut self, account: &str, region: &str, now: f64) -> bool {
        let Some(limit) = self.behaviour.describe_limit else {
            return true;
        };
        if account == self.scenario.account_id {
            let fresh = &self.describe_fresh;
            return self.describe_buckets.entry(region.to_string()).or_insert_with(|| fresh.clone()).try_take(now);
        }
        self.member_buckets
            .entry((account.to_string(), region.to_string()))
            .or_insert_with(|| TokenBucket::new(1.0 / limit.refill_secs, limit.burst, now))
            .try_take(now)
    }

    /// Whether an extension offering question of `account` in `region` is served by the
    /// limit `extension_offerings_limit` names: `Err` is the refusal.
    pub fn take_extension_token(&mut self, account: &str, region: &str) -> Result<(), ApiError> {
        match self.behaviour.extension_offerings_limit {
            ExtensionOfferingsLimit::None => Ok(()),
            ExtensionOfferingsLimit::Shared => {
                if self.take_describe_token(account, region) {
                    Ok(())
                } else {
                    Err(ApiError::describe_limit())
                }
            }
            ExtensionOfferingsLimit::Own => {
                let Some(limit) = self.behaviour.describe_limit else {
                    return Ok(());
                };
                let now = self.real_secs();
                let served = self
                    .extension_buckets
                    .entry((account.to_string(), region.to_string()))
                    .or_insert_with(|| TokenBucket::new(1.0 / limit.refill_secs, limit.burst, now))
                    .try_take(now);
                if served {
                    Ok(())
                } else {
                    self.faults.extension_offerings_limited += 1;
                    Err(ApiError::throttled())
                }
            }
        }
    }

    /// The DescribeCapacityBlockOfferings calls that reached the describe limit, by account.
    pub fn describe_calls_by_account(&self) -> &BTreeMap<String, CallCounts> {
        &self.describe_by_account
    }

    /// Records one DescribeCapacityBlockOfferings call that reached the describe limit; the
    /// oldest goes once there are `MAX_DESCRIBE_CALLS`.
    pub fn log_describe_call(&mut self, call: DescribeCall) {
        if self.describe_calls.len() == MAX_DESCRIBE_CALLS {
            self.describe_calls.pop_front();
            self.describe_calls_dropped += 1;
        }
        self.describe_calls.push_back(call);
    }

    /// The calls kept, oldest first, and how many older ones were let go since the last clear.
    pub fn describe_calls(&self) -> (&VecDeque<DescribeCall>, u64) {
        (&self.describe_calls, self.describe_calls_dropped)
    }

    /// Forgets the calls kept; returns how many there were.
    pub fn clear_describe_calls(&mut self) -> usize {
        let n = self.describe_calls.len();
        self.describe_calls.clear();
        self.describe_calls_dropped = 0;
        n
    }

    /// Plays the other callers' calls due by now in every bucket, so that their counts are
    /// current (GET /_sim/state). Exact at any moment: it changes nothing that follows.
    pub fn settle_describe_limit(&mut self) {
        let now = self.real_secs();
        self.settle_describe_limit_at(now);
    }

    pub fn settle_describe_limit_at(&mut self, now: f64) {
        if self.behaviour.describe_limit.is_some() {
            self.describe_buckets_mut().for_each(|b| b.settle(now));
        }
    }

    /// Every region's bucket and the one regions not asked yet copy.
    fn describe_buckets_mut(&mut self) -> impl Iterator<Item = &mut DescribeBucket> {
        self.describe_buckets.values_mut().chain(std::iter::once(&mut self.describe_fresh))
    }

    /// The other callers' calls and refusals so far (as last settled), by region and by caller.
    pub fn others_report(&self) -> OthersReport {
        let mut r = OthersReport::default();
        for (region, bucket) in &self.describe_buckets {
            let counts = bucket.counts();
            r.calls += counts.calls;
            r.refused += counts.refused;
            r.by_region.insert(region.clone(), counts);
            for (name, c) in bucket.by_caller() {
                r.by_caller.entry(name.clone()).or_default().add(*c);
            }
        }
        r
    }

    pub fn set_behaviour(&mut self, b: Behaviour) {
        let now = self.real_secs();
        self.set_behaviour_at(b, now);
    }

    /// `set_behaviour` at `now` (real seconds since the load), for tests.
    pub fn set_behaviour_at(&mut self, b: Behaviour, now: f64) {
        if b.throttle != self.behaviour.throttle {
            // New limits start from a full bucket.
            self.buckets.clear();
        }
        self.change_describe_limit(&b, now);
        self.behaviour = b;
    }

    /// A new limit starts every bucket full, every account's; a new steady drain changes pace
    /// from now on (what was spent stays spent); new discrete callers start their schedules now
    /// (both the simulated account's only). Turned off, the buckets are left as they are; turned
    /// back on, they restart full with the callers' schedules from now.
    fn change_describe_limit(&mut self, b: &Behaviour, now: f64) {
        let old = &self.behaviour;
        let (was, drain) = (old.describe_limit, b.describe_limit_other_callers_per_min / 60.0);
        let new_drain = b.describe_limit_other_callers_per_min != old.describe_limit_other_callers_per_min;
        let new_callers = b.describe_limit_others != old.describe_limit_others;
        match (was, b.describe_limit) {
            (_, None) => self.settle_describe_limit_at(now),
            (None, Some(l)) => {
                self.member_buckets.clear();
                self.extension_buckets.clear();
                self.describe_buckets_mut().for_each(|k| k.restart(l, drain, &b.describe_limit_others, now))
            }
            (Some(was), Some(l)) => {
                if was != l {
                    self.member_buckets.clear();
                    self.extension_buckets.clear();
                }
                for bucket in self.describe_buckets_mut() {
                    if was != l {
                        bucket.set_limit(l, drain, now);
                    } else if new_drain {
                        bucket.set_drain(drain, now);
                    }
                    if new_callers {
                        bucket.set_callers(&b.describe_limit_others, now);
                    }
                }
            }
        }
    }

    pub fn reservation(&self, id: &str) -> Option<&Reservation> {
        self.reservations.iter().find(|r| r.id == id)
    }

    /// Whether EC2 still shows `r` at `now` (expired and payment-failed blocks vanish).
    pub fn shows(&self, r: &Reservation, now: DateTime<Utc>) -> bool {
        // A purchase's reservation is listed `listing_lag_secs` after it was made (eventual
        // consistency); one "bought in the console" before the scenario's moment already is.
        let lag = chrono::Duration::seconds(i64::try_from(self.behaviour.listing_lag_secs).unwrap_or(i64::MAX / 2));
        if !r.injected && now < r.created + lag {
            return false;
        }
        // A stale read under `stale_listing_secs`: missing again for a while once listed.
        if !r.injected && self.behaviour.stale_listing_secs > 0 {
            let from = r.created + lag + chrono::Duration::seconds(STALE_AFTER_SECS);
            let stale =
                chrono::Duration::seconds(i64::try_from(self.behaviour.stale_listing_secs).unwrap_or(i64::MAX / 4));
            if now >= from && now < from + stale {
                return false;
            }
        }
        let v = Visibility {
            expired_days: self.scenario.expired_visible_days,
            failed_minutes: self.behaviour.failed_payment_visible_minutes,
        };
        r.visible(now, &self.extensions, v)
    }
}

/// How long after a reservation is first listed a stale read (`stale_listing_secs`) begins:
/// the simulator's choice, a minute, so a client has seen it listed before it goes missing.
pub const STALE_AFTER_SECS: i64 = 60;

/// A full describe-limit bucket at `now`, the other callers' schedules starting then. With the
/// limit off it is never played, and restarted when the limit comes on.
fn fresh_describe_bucket(b: &Behaviour, now: f64) -> DescribeBucket {
    let limit = b.describe_limit.unwrap_or_default();
    DescribeBucket::new(limit, b.describe_limit_other_callers_per_min / 60.0, &b.describe_limit_others, now)
}

/// The regions a scenario names where DescribeCapacityBlockOfferings can be called: its
/// `[[regions]]` that are supported and the regions of its `[[market]]` lines.
fn regions_named(s: &Scenario) -> BTreeSet<String> {
    let listed = s.regions.iter().map(|r| r.name.clone());
    listed.chain(s.market.iter().map(|l| l.region.clone())).filter(|r| s.supports(r)).collect()
}

/// The other callers' calls and refusals (`describe_limit_others` in GET /_sim/state): in total,
/// by region (every region with a bucket), and by caller name (over every region).
#[derive(Debug, Default, Serialize)]
pub struct OthersReport {
    pub calls: u64,
    pub refused: u64,
    pub by_region: BTreeMap<String, CallCounts>,
    pub by_caller: BTreeMap<String, CallCounts>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DescribeLimit, Throttle};

    /// The simulated account (the scenario's default `account_id`).
    const SIM: &str = "111122223333";

    #[test]
    fn admit_counts_and_throttles_per_region() {
        let mut w = World::new(Scenario::parse("").unwrap());
        let mut b = w.behaviour.clone();
        b.throttle = Some(Throttle { rate_per_sec: 0.001, burst: 2 });
        w.set_behaviour(b);
        assert_eq!(w.admit("us-east-1", "A"), None);
        assert_eq!(w.admit("us-east-1", "A"), None);
        assert_eq!(w.admit("us-east-1", "A"), Some(Fault::Throttled));
        // Another region has its own bucket.
        assert_eq!(w.admit("us-west-2", "B"), None);
        assert_eq!(w.calls["A"], 3);
        assert_eq!(w.calls_by_region["us-west-2"]["B"], 1);
        assert_eq!(w.faults.throttled, 1);
    }

    #[test]
    fn describe_limit_per_region_and_its_changes() {
        // Default: burst 2, one token every 4 s.
        let mut w = World::new(Scenario::parse("").unwrap());
        assert!(w.take_describe_token(SIM, "us-east-1"));
        assert!(w.take_describe_token(SIM, "us-east-1"));
        assert!(!w.take_describe_token(SIM, "us-east-1"));
        assert!(w.take_describe_token(SIM, "us-west-2"), "another region has its own bucket");
        assert_eq!(w.faults.describe_limited, 1);
        // A new limit starts full; off means never refused.
        let mut b = w.behaviour.clone();
        b.describe_limit = Some(DescribeLimit { burst: 1, refill_secs: 3600.0 });
        w.set_behaviour(b.clone());
        assert!(w.take_describe_token(SIM, "us-east-1"));
        assert!(!w.take_describe_token(SIM, "us-east-1"));
        b.describe_limit = None;
        w.set_behaviour(b);
        assert!((0..10).all(|_| w.take_describe_token(SIM, "us-east-1")));
        assert_eq!(w.faults.describe_limited, 2);
    }

    #[test]
    fn other_callers_spend_the_describe_limit_even_in_regions_not_asked_yet() {
        // 6000 a minute = 100 tokens/s: 50 ms empty a bucket of 2 (the refill gives 0.0125).
        let mut w = World::new(Scenario::parse("[behaviour]\ndescribe_limit_other_callers_per_min = 6000.0").unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!w.take_describe_token(SIM, "us-east-1"));
        assert!(!w.take_describe_token(SIM, "eu-west-1"));
        assert_eq!(w.faults.describe_limited, 2);
        // Slowing the others does not give back what they spent.
        let mut b = w.behaviour.clone();
        b.describe_limit_other_callers_per_min = 0.0;
        w.set_behaviour(b);
        assert!(!w.take_describe_token(SIM, "us-east-1"));
        // Without others the default bucket serves its burst.
        let mut quiet = World::new(Scenario::parse("").unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(quiet.take_describe_token(SIM, "us-east-1"));
        assert!(quiet.take_describe_token(SIM, "us-east-1"));
    }

    const A: &str = "444455556666";
    const B: &str = "777788889999";

    #[test]
    fn each_account_has_its_own_describe_limit_per_region() {
        // Burst 2, a token an hour.
        let mut w =
            World::new(Scenario::parse("[behaviour]\ndescribe_limit = { burst = 2, refill_secs = 3600.0 }").unwrap());
        assert!(w.take_describe_token_at(A, "us-east-1", 0.0));
        assert!(w.take_describe_token_at(A, "us-east-1", 0.0));
        assert!(!w.take_describe_token_at(A, "us-east-1", 1.0), "A's burst is spent");
        assert!(w.take_describe_token_at(B, "us-east-1", 1.0), "B has a bucket of its own, full");
        assert!(w.take_describe_token_at(B, "us-east-1", 1.0));
        assert!(!w.take_describe_token_at(B, "us-east-1", 1.0), "of the same size");
        assert!(w.take_describe_token_at(A, "us-west-2", 1.0), "A has another one in another region");
        assert!(w.take_describe_token_at(SIM, "us-east-1", 1.0), "the simulated account's is untouched");
        assert!(w.take_describe_token_at(A, "us-east-1", 3600.0), "refilled like any: a token an hour");
        assert!(!w.take_describe_token_at(A, "us-east-1", 3600.0));
        assert_eq!(w.faults.describe_limited, 3, "every account's refusals");
        assert_eq!(w.faults.describe_limited_by_account, BTreeMap::from([(A.to_string(), 2), (B.to_string(), 1)]));
        let by = w.describe_calls_by_account();
        assert_eq!(by.keys().collect::<Vec<_>>(), [SIM, A, B]);
        assert_eq!(
            (by[A], by[B], by[SIM]),
            (
                CallCounts { calls: 6, refused: 2 },
                CallCounts { calls: 3, refused: 1 },
                CallCounts { calls: 1, refused: 0 }
            )
        );
        // Off: every call is served, and still counted.
        let mut b = w.behaviour.clone();
        b.describe_limit = None;
        w.set_behaviour_at(b, 3601.0);
        assert!((0..5).all(|_| w.take_describe_token_at(A, "us-east-1", 3602.0)));
        assert_eq!(w.describe_calls_by_account()[A], CallCounts { calls: 11, refused: 2 });
    }

    #[test]
    fn the_simulated_accounts_other_callers_spend_only_its_buckets() {
        // The simulated account's people: a steady 100 tokens a second and a script calling
        // three times every 10 s, against a burst of 2 refilled hourly.
        let mut w = others_world(
            "describe_limit = { burst = 2, refill_secs = 3600.0 }\n\
             describe_limit_other_callers_per_min = 6000.0\n\
             describe_limit_others = [{ name = \"script\", calls = 3, every_secs = 10 }]",
        );
        assert!(w.take_describe_token_at(B, "us-west-2", 0.0), "B's bucket is made at 0 s");
        // 100 s later the simulated account's bucket is empty, B has its second token.
        assert!(!w.take_describe_token_at(SIM, "us-west-2", 100.0));
        assert!(w.take_describe_token_at(B, "us-west-2", 100.0), "neither the drain nor the script touched it");
        assert!(!w.take_describe_token_at(B, "us-west-2", 100.0), "its own limit holds");
        assert!(w.take_describe_token_at(A, "us-east-1", 100.0), "a region not asked before: full");
        assert!(w.take_describe_token_at(A, "us-east-1", 100.0));
        // The script played its 33 calls (0, 10, ..., 100 s) in the simulated account's buckets
        // only: the regions it names and us-east-1, asked by A, is not one of them.
        let r = w.others_report();
        assert_eq!(r.by_region.keys().collect::<Vec<_>>(), ["us-west-2"]);
        assert_eq!(r.by_caller["script"].calls, 33);
    }

    #[test]
    fn a_new_describe_limit_fills_every_accounts_buckets() {
        let mut w =
            World::new(Scenario::parse("[behaviour]\ndescribe_limit = { burst = 1, refill_secs = 3600.0 }").unwrap());
        assert!(w.take_describe_token_at(B, "us-east-1", 0.0));
        assert!(!w.take_describe_token_at(B, "us-east-1", 1.0));
        // Another key changed, the limit the same: B stays spent.
        let mut b = w.behaviour.clone();
        b.latency_ms = 1;
        w.set_behaviour_at(b.clone(), 2.0);
        assert!(!w.take_describe_token_at(B, "us-east-1", 3.0));
        // A burst of 3: full at once.
        b.describe_limit = Some(DescribeLimit { burst: 3, refill_secs: 3600.0 });
        w.set_behaviour_at(b.clone(), 4.0);
        assert!((0..3).all(|_| w.take_describe_token_at(B, "us-east-1", 5.0)));
        assert!(!w.take_describe_token_at(B, "us-east-1", 5.0));
        // Off, then on again: full.
        let limit = b.describe_limit.take();
        w.set_behaviour_at(b.clone(), 6.0);
        b.describe_limit = limit;
        w.set_behaviour_at(b, 8.0);
        assert!((0..3).all(|_| w.take_describe_token_at(B, "us-east-1", 9.0)));
        assert!(!w.take_describe_token_at(B, "us-east-1", 9.0));
    }

    #[test]
    fn the_call_log_keeps_the_last_calls_until_cleared() {
        let mut w = World::new(Scenario::parse("").unwrap());
        let call = |hours: usize| DescribeCall {
            account: SIM.into(),
            region: "us-east-1".into(),
            instance_type: None,
            instance_types: Vec::new(),
            ultraserver_type: None,
            count: None,
            duration_hours: Some(hours as i64),
            start_range: None,
            end_range: None,
            served: true,
        };
        for i in 0..MAX_DESCRIBE_CALLS + 2 {
            w.log_describe_call(call(i));
        }
        let (calls, dropped) = w.describe_calls();
        assert_eq!((calls.len(), dropped), (MAX_DESCRIBE_CALLS, 2));
        assert_eq!(calls.front().unwrap().duration_hours, Some(2), "the two oldest went");
        assert_eq!(calls.back().unwrap().duration_hours, Some(MAX_DESCRIBE_CALLS as i64 + 1));
        assert_eq!(w.clear_describe_calls(), MAX_DESCRIBE_CALLS);
        assert_eq!((w.describe_calls().0.len(), w.describe_calls().1), (0, 0));
    }

    fn others_world(behaviour: &str) -> World {
        let regions = "[[regions]]\nname = \"us-west-2\"\n[[regions]]\nname = \"eu-north-1\"\nsupported = false";
        World::new(Scenario::parse(&format!("[behaviour]\n{behaviour}\n{regions}")).unwrap())
    }

    #[test]
    fn discrete_other_callers_play_in_every_region_and_are_counted() {
        // Burst 2, an hour per token; a script makes 3 calls at load, then every hour.
        let mut w = others_world(
            "describe_limit = { burst = 2, refill_secs = 3600.0 }\n\
             describe_limit_others = [{ name = \"script\", calls = 3, every_secs = 3600 }]",
        );
        // capblock's first call in us-east-1 (a region the scenario does not name) comes after
        // the script's: its bucket was played from the load on, like every region's.
        assert!(!w.take_describe_token_at(SIM, "us-east-1", 1.0));
        assert_eq!(w.faults.describe_limited, 1, "capblock's refusal, not the script's");
        w.settle_describe_limit_at(2.0);
        let r = w.others_report();
        // Named (us-west-2, supported) and asked (us-east-1); never the unsupported eu-north-1.
        assert_eq!(r.by_region.keys().collect::<Vec<_>>(), ["us-east-1", "us-west-2"]);
        assert_eq!(r.by_region["us-west-2"], CallCounts { calls: 3, refused: 1 });
        assert_eq!(r.by_region["us-east-1"], CallCounts { calls: 3, refused: 1 });
        assert_eq!((r.calls, r.refused), (6, 2));
        assert_eq!(r.by_caller["script"], CallCounts { calls: 6, refused: 2 });
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["by_region"]["us-west-2"], serde_json::json!({"calls": 3, "refused": 1}));
        // The next hour, in both.
        w.settle_describe_limit_at(3600.0);
        assert_eq!(w.others_report().by_region["us-west-2"], CallCounts { calls: 6, refused: 3 });
        assert_eq!(w.others_report().calls, 12);
    }

    #[test]
    fn changing_the_others_restarts_their_schedules_and_keeps_the_counts() {
        let mut w = others_world(
            "describe_limit = { burst = 1, refill_secs = 3600.0 }\n\
             describe_limit_others = [{ name = \"notebook\", calls = 1, every_secs = 20 }]",
        );
        w.settle_describe_limit_at(50.0);
        assert_eq!(w.others_report().by_caller["notebook"], CallCounts { calls: 3, refused: 2 });
        // A console from 55 s on: the notebook stops, its counts stay; the console's first
        // calls come at 55 s, not at 0.
        let mut b = w.behaviour.clone();
        b.describe_limit_others = Scenario::parse(
            "[behaviour]\ndescribe_limit_others = [{ name = \"console\", calls = 2, every_secs = 100 }]",
        )
        .unwrap()
        .behaviour
        .describe_limit_others;
        w.set_behaviour_at(b.clone(), 55.0);
        w.settle_describe_limit_at(54.9 + 100.0);
        let r = w.others_report();
        assert_eq!(r.by_region["us-west-2"], CallCounts { calls: 5, refused: 4 });
        assert_eq!(r.by_caller["console"], CallCounts { calls: 2, refused: 2 });
        // Posting the same callers again changes nothing (the schedule is not restarted).
        w.set_behaviour_at(b.clone(), 154.95);
        w.settle_describe_limit_at(155.0);
        assert_eq!(w.others_report().by_caller["console"], CallCounts { calls: 4, refused: 4 });
        // Off: nothing is played; on again: full, the console's schedule from then.
        let mut off = b.clone();
        off.describe_limit = None;
        w.set_behaviour_at(off, 200.0);
        w.settle_describe_limit_at(5000.0);
        assert!(w.take_describe_token_at(SIM, "us-west-2", 5000.0));
        assert_eq!(w.others_report().by_caller["console"], CallCounts { calls: 4, refused: 4 });
        w.set_behaviour_at(b, 6000.0);
        w.settle_describe_limit_at(6000.0);
        assert_eq!(
            w.others_report().by_caller["console"],
            CallCounts { calls: 6, refused: 5 },
            "one region: us-west-2"
        );
        // us-west-2: the notebook's 3 (2 refused), the console's 4 refused, 2 at 6000 s (1 served).
        assert_eq!(w.others_report().by_region["us-west-2"], CallCounts { calls: 9, refused: 7 });
        // A new scenario resets every count.
        let w = others_world("");
        assert_eq!((w.others_report().calls, w.others_report().refused), (0, 0));
    }

    #[test]
    fn down_regions_and_certain_faults() {
        let mut w =
            World::new(Scenario::parse("[behaviour]\ndown_regions = [\"eu-west-1\"]\nerror_5xx_rate = 1.0").unwrap());
        assert_eq!(w.admit("eu-west-1", "A"), Some(Fault::Hang));
        assert_eq!(w.admit("us-east-1", "A"), Some(Fault::InternalError));
        assert_eq!(w.faults.region_down, 1);
        assert_eq!(w.faults.error_5xx, 1);
    }

    #[test]
    fn random_throttling_takes_its_fraction_of_calls() {
        let mut all = World::new(Scenario::parse("[behaviour]\nthrottle_rate = 1.0").unwrap());
        assert_eq!(all.admit("us-east-1", "A"), Some(Fault::Throttled));
        let mut some = World::new(Scenario::parse("seed = 4\n[behaviour]\nthrottle_rate = 0.3").unwrap());
        let throttled = (0..1000).filter(|_| some.admit("us-east-1", "A") == Some(Fault::Throttled)).count();
        assert!((240..=360).contains(&throttled), "{throttled} of 1000");
        assert_eq!(some.faults.throttled, throttled as u64);
        assert!(Scenario::parse("[behaviour]\nthrottle_rate = 1.5").is_err());
    }

    #[test]
    fn ids_are_reproducible_per_seed() {
        let mut a = World::new(Scenario::parse("seed = 9").unwrap());
        let mut b = World::new(Scenario::parse("seed = 9").unwrap());
        let _ = a.request_id();
        assert_eq!(a.new_id("cr-"), b.new_id("cr-"));
    }
}
