//! How one tracker run asks EC2 for extension offerings: a few lengths per block
//! (`extension::lengths_to_ask`), spaced in each region by the pace the scan learned there, a
//! bounded number per region, and none more in a region once EC2 throttles one.
//!
//! Why the scan's pace: the record does not say whether DescribeCapacityBlockExtensionOfferings
//! counts against the describe limit of DescribeCapacityBlockOfferings (per account and region,
//! which the scan asks just under). If it does, a burst of extension questions empties the
//! bucket the scan lives on; if it does not, spacing them costs a few seconds. So the tracker
//! behaves as one more gentle caller of the region (the scan's pace already allows for others,
//! `domain::pace`): its first question at once, the next ones a learned gap apart, and within
//! `ASK_FOR` of the run, since the tracker's Lambda has 60 s for everything else too. What is
//! not asked is asked on the next run: a decision window holds dozens of them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::domain::ids::Region;
use crate::domain::pace::{Pace, PaceBounds};
use crate::domain::plan::DescribeBudget;

/// How long one run spends asking for extensions in one region, at most (beyond the first
/// question, which is sent at once).
pub const ASK_FOR: Duration = Duration::from_secs(12);

/// Questions one run may ask in a region at `gap`: the first at once, then one per gap within
/// [`ASK_FOR`].
pub fn questions_at(gap: Duration) -> usize {
    1 + (ASK_FOR.as_secs_f64() / gap.as_secs_f64().max(0.001)).floor() as usize
}

/// Where a region's asking stands in this run.
#[derive(Debug)]
struct Lane {
    gap: Duration,
    /// When the next question may go (`None`: at once).
    next_at: Option<Instant>,
    /// Questions left this run.
    left: usize,
    /// EC2 throttled a question: no more this run.
    throttled: bool,
}

/// Why a question was not asked this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAsked {
    /// The region's questions for this run are used up.
    UsedUp,
    /// EC2 throttled an earlier question in the region this run.
    Throttled,
}

impl NotAsked {
    pub fn reason(self) -> &'static str {
        match self {
            NotAsked::UsedUp => "this run's extension questions in the region are used up; asked on the next run",
            NotAsked::Throttled => "EC2 throttled an extension question in the region this run; asked on the next run",
        }
    }
}

/// One run's extension asking, region by region.
#[derive(Debug)]
pub struct Asking {
    bounds: PaceBounds,
    lanes: Mutex<HashMap<Region, Lane>>,
}

impl Default for Asking {
    fn default() -> Self {
        // The tracker does not carry the scan's pacing parameters: the learned pace is what
        // matters, and the default bounds only keep a forged or stale one sane.
        Asking { bounds: DescribeBudget::default().bounds(), lanes: Mutex::new(HashMap::new()) }
    }
}

impl Asking {
    /// Whether `region` has a lane yet (its pace is read once per run, by the caller).
    pub fn knows(&self, region: &Region) -> bool {
        self.lock().contains_key(region)
    }

    /// Opens `region`'s lane at the pace the scan learned there (`None`: not learned yet, the
    /// starting pace), within the bounds.
    pub fn open(&self, region: &Region, learned: Option<Pace>) {
        let gap = learned.map_or(self.bounds.start, |p| p.within(&self.bounds).gap());
        self.lock().entry(region.clone()).or_insert(Lane {
            gap,
            next_at: None,
            left: questions_at(gap),
            throttled: false,
        });
    }

    /// Waits for the region's next turn and takes it; `Err` when the region asks no more this
    /// run. A region with no lane asks as one with the starting pace.
    pub async fn turn(&self, region: &Region) -> Result<(), NotAsked> {
        if !self.knows(region) {
            self.open(region, None);
        }
        let wait = {
            let mut lanes = self.lock();
            let lane = lanes.get_mut(region).expect("opened above");
            if lane.throttled {
                return Err(NotAsked::Throttled);
            }
            if lane.left == 0 {
                return Err(NotAsked::UsedUp);
            }
            lane.left -= 1;
            let now = Instant::now();
            let at = lane.next_at.map_or(now, |t| t.max(now));
            lane.next_at = Some(at + lane.gap);
            at
        };
        sleep_until(wait).await;
        Ok(())
    }

    /// EC2 throttled a question in `region`: it asks no more this run.
    pub fn throttled(&self, region: &Region) {
        if let Some(lane) = self.lock().get_mut(region) {
            lane.throttled = true;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Region, Lane>> {
        // A poisoned lock only means a panic elsewhere mid-update of plain counters.
        self.lanes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region() -> Region {
        Region::try_from("us-east-1".to_string()).unwrap()
    }

    #[test]
    fn a_region_asks_what_its_pace_fits_in_the_asking_time() {
        assert_eq!(questions_at(Duration::from_secs(4)), 4);
        assert_eq!(questions_at(Duration::from_secs(8)), 2);
        assert_eq!(questions_at(Duration::from_secs(30)), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn questions_are_spaced_by_the_learned_gap_and_bounded() {
        let a = Asking::default();
        a.open(&region(), Some(Pace { gap_ms: 4000, limit_ms: None }));
        let t0 = Instant::now();
        let mut at = Vec::new();
        while a.turn(&region()).await.is_ok() {
            at.push((Instant::now() - t0).as_secs());
        }
        assert_eq!(at, vec![0, 4, 8, 12]);
        assert_eq!(a.turn(&region()).await, Err(NotAsked::UsedUp));
    }

    #[tokio::test(start_paused = true)]
    async fn a_region_without_a_learned_pace_starts_at_the_starting_gap() {
        let a = Asking::default();
        let t0 = Instant::now();
        a.turn(&region()).await.unwrap();
        a.turn(&region()).await.unwrap();
        assert_eq!(Instant::now() - t0, DescribeBudget::default().pace());
        assert_eq!(a.turn(&region()).await, Err(NotAsked::UsedUp), "8 s apart: two fit in 12 s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_region_asks_nothing_more_this_run() {
        let a = Asking::default();
        a.turn(&region()).await.unwrap();
        a.throttled(&region());
        assert_eq!(a.turn(&region()).await, Err(NotAsked::Throttled));
        let other = Region::try_from("eu-west-2".to_string()).unwrap();
        assert!(a.turn(&other).await.is_ok(), "another region asks on");
    }
}
