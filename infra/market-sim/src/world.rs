//! Everything the simulator knows, behind one Mutex in the server. Never held across an await.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use chrono::{DateTime, Utc};

use crate::clock::SimClock;
use crate::faults::{Fault, FaultCounts, TokenBucket};
use crate::reservations::{Extension, Reservation, Visibility};
use crate::rng::SplitMix64;
use crate::scenario::{Behaviour, Scenario};

/// An offering id one answer handed out: what it stands for, where, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintedId {
    pub region: String,
    /// The offering's stable id (see `market::offerings`).
    pub offering_id: String,
    pub at: DateTime<Utc>,
}

pub struct World {
    pub scenario: Scenario,
    pub behaviour: Behaviour,
    pub clock: SimClock,
    pub reservations: Vec<Reservation>,
    pub extensions: Vec<Extension>,
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
    buckets: HashMap<String, TokenBucket>,
    /// DescribeCapacityBlockOfferings' describe limit, one bucket per region...
    describe_buckets: HashMap<String, TokenBucket>,
    /// ...each starting as a copy of this one: the state every region not asked yet is in
    /// (full when the limit was set, drained since by the other callers). None: no limit.
    describe_fresh: Option<TokenBucket>,
    /// Throttling is about real request rates, so buckets run on real (monotonic) time.
    epoch: Instant,
}

impl World {
    pub fn new(scenario: Scenario) -> Self {
        let seed = scenario.seed;
        let describe_fresh = fresh_describe_bucket(&scenario.behaviour, 0.0);
        Self {
            clock: SimClock::new(scenario.clock.start, scenario.clock.ticking),
            behaviour: scenario.behaviour.clone(),
            scenario,
            reservations: Vec::new(),
            extensions: Vec::new(),
            calls: BTreeMap::new(),
            calls_by_region: BTreeMap::new(),
            faults: FaultCounts::default(),
            ids: SplitMix64::new(seed),
            request_ids: SplitMix64::new(seed ^ 0x5245_5155_4553_5431),
            fault_rng: SplitMix64::new(seed ^ 0x4641_554c_5453_2121),
            minted: HashMap::new(),
            offer_ids: SplitMix64::new(seed ^ 0x4f46_4645_5249_4e47),
            buckets: HashMap::new(),
            describe_buckets: HashMap::new(),
            describe_fresh,
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

    /// A fresh id for the offering `offering_id` of `region`, handed out at `now`.
    pub fn mint_offering_id(&mut self, region: &str, offering_id: &str, now: DateTime<Utc>) -> String {
        loop {
            let id = self.offer_ids.resource_id("cb-");
            if !self.minted.contains_key(&id) && id != offering_id {
                let m = MintedId { region: region.to_string(), offering_id: offering_id.to_string(), at: now };
                self.minted.insert(id.clone(), m);
                return id;
            }
        }
    }

    /// The offering behind an id an answer minted, if one did.
    pub fn minted(&self, id: &str) -> Option<&MintedId> {
        self.minted.get(id)
    }

    /// How many offering ids answers have minted.
    pub fn minted_count(&self) -> usize {
        self.minted.len()
    }

    pub fn request_id(&mut self) -> String {
        self.request_ids.uuid()
    }

    /// Counts the call and decides whether a fault replaces it. Order: region down, throttle
    /// (token bucket, then random), random hang, random 500.
    pub fn admit(&mut self, region: &str, action: &str) -> Option<Fault> {
        let action = if action.is_empty() { "(none)" } else { action };
        *self.calls.entry(action.to_string()).or_default() += 1;
        *self.calls_by_region.entry(region.to_string()).or_default().entry(action.to_string()).or_default() += 1;

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

    /// DescribeCapacityBlockOfferings' own limit (per account and region, shared with the other
    /// callers of the account): takes a token from the region's bucket, or counts a refusal.
    pub fn take_describe_token(&mut self, region: &str) -> bool {
        let Some(fresh) = &self.describe_fresh else {
            return true;
        };
        let now = self.epoch.elapsed().as_secs_f64();
        let bucket = self.describe_buckets.entry(region.to_string()).or_insert_with(|| fresh.clone());
        if bucket.try_take(now) {
            true
        } else {
            self.faults.describe_limited += 1;
            false
        }
    }

    pub fn set_behaviour(&mut self, b: Behaviour) {
        let now = self.epoch.elapsed().as_secs_f64();
        if b.throttle != self.behaviour.throttle {
            // New limits start from a full bucket.
            self.buckets.clear();
        }
        if b.describe_limit != self.behaviour.describe_limit {
            self.describe_buckets.clear();
            self.describe_fresh = fresh_describe_bucket(&b, now);
        } else if b.describe_limit_other_callers_per_min != self.behaviour.describe_limit_other_callers_per_min {
            // The others change pace from now on; what they spent stays spent.
            let drain = b.describe_limit_other_callers_per_min / 60.0;
            for bucket in self.describe_buckets.values_mut().chain(self.describe_fresh.as_mut()) {
                bucket.set_drain(drain, now);
            }
        }
        self.behaviour = b;
    }

    pub fn reservation(&self, id: &str) -> Option<&Reservation> {
        self.reservations.iter().find(|r| r.id == id)
    }

    /// Whether EC2 still shows `r` at `now` (expired and payment-failed blocks vanish).
    pub fn shows(&self, r: &Reservation, now: DateTime<Utc>) -> bool {
        let v = Visibility {
            expired_days: self.scenario.expired_visible_days,
            failed_minutes: self.behaviour.failed_payment_visible_minutes,
        };
        r.visible(now, &self.extensions, v)
    }
}

/// A full describe-limit bucket at `now`, or None when the limit is off.
fn fresh_describe_bucket(b: &Behaviour, now: f64) -> Option<TokenBucket> {
    b.describe_limit.map(|l| {
        TokenBucket::with_drain(1.0 / l.refill_secs, l.burst, b.describe_limit_other_callers_per_min / 60.0, now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DescribeLimit, Throttle};

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
        assert!(w.take_describe_token("us-east-1"));
        assert!(w.take_describe_token("us-east-1"));
        assert!(!w.take_describe_token("us-east-1"));
        assert!(w.take_describe_token("us-west-2"), "another region has its own bucket");
        assert_eq!(w.faults.describe_limited, 1);
        // A new limit starts full; off means never refused.
        let mut b = w.behaviour.clone();
        b.describe_limit = Some(DescribeLimit { burst: 1, refill_secs: 3600.0 });
        w.set_behaviour(b.clone());
        assert!(w.take_describe_token("us-east-1"));
        assert!(!w.take_describe_token("us-east-1"));
        b.describe_limit = None;
        w.set_behaviour(b);
        assert!((0..10).all(|_| w.take_describe_token("us-east-1")));
        assert_eq!(w.faults.describe_limited, 2);
    }

    #[test]
    fn other_callers_spend_the_describe_limit_even_in_regions_not_asked_yet() {
        // 6000 a minute = 100 tokens/s: 50 ms empty a bucket of 2 (the refill gives 0.0125).
        let mut w = World::new(Scenario::parse("[behaviour]\ndescribe_limit_other_callers_per_min = 6000.0").unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!w.take_describe_token("us-east-1"));
        assert!(!w.take_describe_token("eu-west-1"));
        assert_eq!(w.faults.describe_limited, 2);
        // Slowing the others does not give back what they spent.
        let mut b = w.behaviour.clone();
        b.describe_limit_other_callers_per_min = 0.0;
        w.set_behaviour(b);
        assert!(!w.take_describe_token("us-east-1"));
        // Without others the default bucket serves its burst.
        let mut quiet = World::new(Scenario::parse("").unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(quiet.take_describe_token("us-east-1"));
        assert!(quiet.take_describe_token("us-east-1"));
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
