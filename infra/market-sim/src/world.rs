//! Everything the simulator knows, behind one Mutex in the server. Never held across an await.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use chrono::{DateTime, Utc};

use crate::clock::SimClock;
use crate::faults::{Fault, FaultCounts, TokenBucket};
use crate::reservations::{Extension, Reservation};
use crate::rng::SplitMix64;
use crate::scenario::{Behaviour, Scenario};

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
    buckets: HashMap<String, TokenBucket>,
    /// Throttling is about real request rates, so buckets run on real (monotonic) time.
    epoch: Instant,
}

impl World {
    pub fn new(scenario: Scenario) -> Self {
        let seed = scenario.seed;
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
            buckets: HashMap::new(),
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

    pub fn set_behaviour(&mut self, b: Behaviour) {
        if b.throttle != self.behaviour.throttle {
            // New limits start from a full bucket.
            self.buckets.clear();
        }
        self.behaviour = b;
    }

    pub fn reservation(&self, id: &str) -> Option<&Reservation> {
        self.reservations.iter().find(|r| r.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Throttle;

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
