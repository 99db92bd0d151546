//! Block health: what DescribeCapacityBlockStatus says about a block that is scheduled or
//! active (its interconnect and how many of its instances failed), and when that is worth
//! telling someone. Pure: the tracker feeds observations in and announces the changes.
//!
//! A change is announced once (Slack and the workloads topic, kind `health`), and so is the
//! recovery. `insufficient-data` alone is not a problem: EC2 reports it while it has nothing to
//! measure (e.g. right after the start).
//!
//! What `TotalUnavailableCapacity` counts is not settled by the record: EC2's model says of the
//! block's "unavailable for use due to a system status check failure", of each reservation's
//! "the used capacity ... in use by resources that are running", and of both that the total is
//! "the combined amount of Available and Unavailable capacity", available being what "can be
//! launched". Read as failures, the second reading makes every running instance a failed one.
//! So failures are judged by [`StatusCounts::failed`] under both: an answer whose available and
//! unavailable add up to less than the total counts the running instances in neither, and its
//! unavailable ones are failures; otherwise the running ones may be among them, and only what
//! exceeds the instances in use counts as failed. Work is never taken for a failure.
//!
//! The instances in use are every account's ([`ReservationUsage`], GetCapacityReservationUsage),
//! not the ones the owner's DescribeInstances lists: a block shared through AWS RAM runs the
//! instances of the accounts it is shared with, which the owner does not see, and an instance
//! that stops holds its place for minutes after it stopped running. Either, left out, would
//! read as failed capacity.
//!
//! Whether GetCapacityReservationUsage counts an instance that is still stopping is not settled
//! either (the simulator's `stopping_in_usage` plays both). If it does not, the stopping
//! instance's place is, for those minutes, in neither the available count nor any account's use:
//! exactly what a failure under a running instance looks like. The counts cannot tell the two
//! apart; only time can, as a stopping instance's place comes back and a failed one's does not.
//! So a rise in failures read from an answer that counts work ([`settle`]) is announced once it
//! has lasted [`STOPPING_SETTLE`], longer than stopping takes; a fall (a recovery) and the
//! interconnect are announced at once, and so is every failure under the reading where the
//! unavailable count is failures alone. The price is a failure under that one reading announced
//! up to a quarter of an hour late, against an alert to every workload each time an instance
//! stops.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// CapacityBlockInterconnectStatus, plus whatever EC2 may add later (kept as its text, and
/// treated as a problem: a status capblock cannot judge is one to look at).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interconnect {
    Ok,
    Impaired,
    InsufficientData,
    Other(String),
}

impl Interconnect {
    pub fn from_ec2(s: &str) -> Interconnect {
        match s {
            "ok" => Interconnect::Ok,
            "impaired" => Interconnect::Impaired,
            "insufficient-data" => Interconnect::InsufficientData,
            other => Interconnect::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Interconnect::Ok => "ok",
            Interconnect::Impaired => "impaired",
            Interconnect::InsufficientData => "insufficient-data",
            Interconnect::Other(s) => s,
        }
    }

    fn is_problem(&self) -> bool {
        matches!(self, Interconnect::Impaired | Interconnect::Other(_))
    }
}

impl std::fmt::Display for Interconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One level's counts of a DescribeCapacityBlockStatus answer: the block's, or one of its
/// reservations'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusCounts {
    /// TotalCapacity.
    pub total: u32,
    /// TotalAvailableCapacity: what can still be launched.
    pub available: u32,
    /// TotalUnavailableCapacity: failures, or failures and running instances (see the module).
    pub unavailable: u32,
}

impl StatusCounts {
    /// Whether the unavailable count may hold running instances, so that the instances running
    /// in the reservation must be counted to tell the failures: some are unavailable, and the
    /// answer does not leave the running ones out (available and unavailable make the total).
    pub fn may_count_work(&self) -> bool {
        self.unavailable > 0 && self.available.saturating_add(self.unavailable) >= self.total
    }

    /// The instances out of use through failure, given `running`, those in use in the
    /// reservation by every account ([`ReservationUsage::in_use`]). `None` when the answer may count work and `running` is
    /// unknown: nothing can be concluded then. Never more than the unavailable count, never
    /// negative, and never a running instance.
    pub fn failed(&self, running: Option<u32>) -> Option<u32> {
        if !self.may_count_work() {
            return Some(self.unavailable);
        }
        running.map(|r| self.unavailable.saturating_sub(r))
    }
}

/// One DescribeCapacityBlockStatus entry: the block's interconnect, its counts, and each of its
/// reservations' counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityStatus {
    pub capacity_block_id: String,
    pub interconnect: Interconnect,
    pub block: StatusCounts,
    /// CapacityReservationStatuses, by reservation id.
    pub reservations: Vec<(String, StatusCounts)>,
}

impl CapacityStatus {
    /// The counts of reservation `id`: its own entry, else the block's when the block is that
    /// one reservation (or EC2 listed none). `None` for a reservation of a larger block that EC2
    /// did not list: the block's counts would mix in its other reservations' instances.
    pub fn counts_of(&self, id: &str) -> Option<StatusCounts> {
        match self.reservations.iter().find(|(r, _)| r == id) {
            Some((_, c)) => Some(*c),
            None if self.reservations.len() <= 1 => Some(self.block),
            None => None,
        }
    }

    /// The health of reservation `id` with `running` instances seen running in it (see
    /// [`StatusCounts::failed`]); `None` when the answer cannot tell its failures.
    pub fn health_of(&self, id: &str, running: Option<u32>) -> Option<BlockHealth> {
        let c = self.counts_of(id)?;
        Some(BlockHealth { interconnect: self.interconnect.clone(), total: c.total, unavailable: c.failed(running)? })
    }
}

/// GetCapacityReservationUsage: a reservation's counts and the instances each account has in
/// it, the owner's and those of every account using the block through a share (which the
/// owner's DescribeInstances does not list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationUsage {
    pub reservation_id: String,
    /// TotalInstanceCount.
    pub total: u32,
    /// AvailableInstanceCount: what can still be launched.
    pub available: u32,
    /// The reservation's state, as EC2 names it.
    pub state: String,
    /// InstanceUsages: each account and its UsedInstanceCount, as EC2 listed them.
    pub accounts: Vec<(String, u32)>,
}

impl ReservationUsage {
    /// The instances of every account in the reservation: the ones to take off an unavailable
    /// count that may hold work ([`StatusCounts::failed`]).
    pub fn in_use(&self) -> u32 {
        self.accounts.iter().fold(0u32, |n, (_, used)| n.saturating_add(*used))
    }
}

/// A block's health as capblock judged it from DescribeCapacityBlockStatus (and the instances
/// running in it), stored with the block and carried in its health notices and events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockHealth {
    pub interconnect: Interconnect,
    /// Instances in the reservation (its TotalCapacity).
    pub total: u32,
    /// Instances out of use through failure (`StatusCounts::failed`): never a running one.
    pub unavailable: u32,
}

impl BlockHealth {
    /// The problems a person should look at; empty when the block is healthy.
    pub fn problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.interconnect.is_problem() {
            v.push(format!("interconnect {}", self.interconnect));
        }
        if self.unavailable > 0 {
            v.push(format!("{} of {} instances unavailable", self.unavailable, self.total));
        }
        v
    }

    pub fn is_healthy(&self) -> bool {
        self.problems().is_empty()
    }
}

/// How long a rise in failures read from an answer that counts work must last before it is
/// announced: longer than an instance takes to stop (the user guide's "several minutes"; the
/// simulator plays 5 by default), three runs of the tracker at its default 5-minute rate.
pub const STOPPING_SETTLE: Duration = Duration::minutes(15);

/// A rise in failures not announced yet, because instances that stop could explain it: when it
/// was first seen. Kept with the block, so that the tracker's next runs (other invocations) know
/// how long it has lasted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthWatch {
    pub since: DateTime<Utc>,
}

/// What a health check acts on ([`settle`]): the health to judge against the last one announced
/// ([`change`]), and the watch to keep with the block (None: nothing is being waited for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedHealth {
    pub health: BlockHealth,
    pub watch: Option<HealthWatch>,
}

/// Holds back a rise in failures that instances still stopping could explain (see the module):
/// `seen` was read from an answer that counts work (`counts_work`, [`StatusCounts::may_count_work`])
/// and has more failed instances than `announced`. Such a rise is judged as the announced count
/// until it has lasted [`STOPPING_SETTLE`] since `watch` first saw it; anything else is judged as
/// seen, and ends the watch.
pub fn settle(
    announced: Option<&BlockHealth>,
    watch: Option<&HealthWatch>,
    seen: &BlockHealth,
    counts_work: bool,
    now: DateTime<Utc>,
) -> WatchedHealth {
    let before = announced.map_or(0, |h| h.unavailable);
    if !counts_work || seen.unavailable <= before {
        return WatchedHealth { health: seen.clone(), watch: None };
    }
    let since = watch.map_or(now, |w| w.since.min(now));
    if now - since >= STOPPING_SETTLE {
        return WatchedHealth { health: seen.clone(), watch: None };
    }
    WatchedHealth { health: BlockHealth { unavailable: before, ..seen.clone() }, watch: Some(HealthWatch { since }) }
}

/// A change worth announcing, the domain type workloads (and capblock's own events) consume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum HealthChange {
    /// New or different problems.
    Degraded { health: BlockHealth, problems: Vec<String> },
    /// The problems announced before are gone.
    Recovered { health: BlockHealth },
}

impl HealthChange {
    /// The `kind` of the workload notice.
    pub const KIND: &'static str = "health";

    pub fn health(&self) -> &BlockHealth {
        match self {
            HealthChange::Degraded { health, .. } | HealthChange::Recovered { health } => health,
        }
    }

    /// One line for a title: "interconnect impaired; 2 of 16 instances unavailable", or the
    /// recovery.
    pub fn summary(&self) -> String {
        match self {
            HealthChange::Degraded { problems, .. } => problems.join("; "),
            HealthChange::Recovered { health } => {
                format!("healthy again: interconnect {}, all {} instances available", health.interconnect, health.total)
            }
        }
    }
}

/// The outbox milestone of a block's `n`th announced health change: the count makes a problem
/// that comes back after a recovery news again; the problems in it keep a run that died
/// half-way and then saw something else from hiding the new change behind the old one.
pub fn milestone(n: u32, change: &HealthChange) -> String {
    let what: String = change.summary().chars().filter(char::is_ascii_alphanumeric).take(64).collect();
    format!("health-{n}-{what}")
}

/// What a new observation means, given the last one capblock acted on (None: never measured).
/// Only a change of the problems counts: the same impairment seen again, or a healthy block
/// seen for the first time, is no news.
pub fn change(previous: Option<&BlockHealth>, now: &BlockHealth) -> Option<HealthChange> {
    let before = previous.map(BlockHealth::problems).unwrap_or_default();
    let after = now.problems();
    if before == after {
        return None;
    }
    if after.is_empty() {
        Some(HealthChange::Recovered { health: now.clone() })
    } else {
        Some(HealthChange::Degraded { health: now.clone(), problems: after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(interconnect: &str, unavailable: u32) -> BlockHealth {
        BlockHealth { interconnect: Interconnect::from_ec2(interconnect), total: 16, unavailable }
    }

    #[test]
    fn problems_read_like_the_messages() {
        assert!(h("ok", 0).is_healthy());
        assert!(h("insufficient-data", 0).is_healthy(), "nothing measured yet is not a problem");
        assert_eq!(h("impaired", 0).problems(), vec!["interconnect impaired"]);
        assert_eq!(h("ok", 2).problems(), vec!["2 of 16 instances unavailable"]);
        assert_eq!(h("degraded-later", 0).problems(), vec!["interconnect degraded-later"], "unknown is a problem");
    }

    #[test]
    fn only_changes_are_news() {
        // First sight: healthy is no news, a problem is.
        assert_eq!(change(None, &h("ok", 0)), None);
        let d = change(None, &h("impaired", 0)).unwrap();
        assert_eq!(d.summary(), "interconnect impaired");
        // The same again: nothing; counts moving: news; insufficient-data alone: no change.
        assert_eq!(change(Some(&h("impaired", 0)), &h("impaired", 0)), None);
        assert_eq!(change(Some(&h("ok", 0)), &h("insufficient-data", 0)), None);
        let more = change(Some(&h("impaired", 0)), &h("impaired", 2)).unwrap();
        assert_eq!(more.summary(), "interconnect impaired; 2 of 16 instances unavailable");
        // Recovery once.
        let r = change(Some(&h("impaired", 2)), &h("ok", 0)).unwrap();
        assert!(matches!(r, HealthChange::Recovered { .. }));
        assert_eq!(r.summary(), "healthy again: interconnect ok, all 16 instances available");
        assert_eq!(change(Some(&h("ok", 0)), &h("ok", 0)), None);
    }

    fn counts(total: u32, available: u32, unavailable: u32) -> StatusCounts {
        StatusCounts { total, available, unavailable }
    }

    /// 16 instances, 2 failed, `running` of the other 14 running, as EC2 would count them under
    /// each reading: `in_use` counts the running ones unavailable too.
    fn answer(in_use: bool, running: u32) -> StatusCounts {
        let failed = 2;
        let available = 16 - failed - running;
        counts(16, available, if in_use { failed + running } else { failed })
    }

    #[test]
    fn failures_read_as_failures_under_the_failed_reading() {
        for running in [0, 5, 14] {
            let c = answer(false, running);
            assert_eq!(c.failed(Some(running)), Some(2), "running {running}");
            assert_eq!(c.failed(Some(0)), Some(2), "running {running}");
        }
        // Running instances hide no failure: the answer leaves them out of both counts.
        assert!(!answer(false, 5).may_count_work());
        assert_eq!(answer(false, 14).failed(None), Some(2), "no need to count what runs");
        // Nothing failed, whatever runs.
        assert_eq!(counts(16, 4, 0).failed(None), Some(0));
    }

    #[test]
    fn running_instances_are_not_failures_under_the_in_use_reading() {
        for running in [0, 5, 14] {
            let c = answer(true, running);
            assert_eq!(c.failed(Some(running)), Some(2), "running {running}");
        }
        // The whole block at work, nothing failed: 16 "unavailable", 0 failed.
        let busy = counts(16, 0, 16);
        assert!(busy.may_count_work());
        assert_eq!(busy.failed(Some(16)), Some(0));
        assert_eq!(busy.failed(None), None, "without the running count nothing is concluded");
        // Never negative: more seen running than counted (an instance started between calls).
        assert_eq!(counts(16, 6, 10).failed(Some(12)), Some(0));
    }

    #[test]
    fn every_account_s_instances_are_work_under_each_reading() {
        let usage = ReservationUsage {
            reservation_id: "cr-a".into(),
            total: 16,
            available: 5,
            state: "active".into(),
            accounts: vec![("111122223333".into(), 3), ("111111111111".into(), 6)],
        };
        assert_eq!(usage.in_use(), 9, "the owner's 3 and the member's 6");
        // in_use: 2 failed and the 9 at work in two accounts are unavailable.
        let in_use = counts(16, 5, 11);
        assert_eq!(in_use.failed(Some(usage.in_use())), Some(2));
        assert_eq!(in_use.failed(Some(3)), Some(8), "the owner's own alone takes the member's 6 for failures");
        // failed: only the 2; what runs is in neither count.
        assert!(!counts(16, 5, 2).may_count_work());
        assert_eq!(counts(16, 5, 2).failed(Some(usage.in_use())), Some(2));
        // Never overflows, whatever EC2 sums to.
        let huge = ReservationUsage { accounts: vec![("a".into(), u32::MAX), ("b".into(), 1)], ..usage };
        assert_eq!(huge.in_use(), u32::MAX);
    }

    #[test]
    fn the_reservation_s_counts_are_judged() {
        let status = CapacityStatus {
            capacity_block_id: "cb-1".into(),
            interconnect: Interconnect::Ok,
            block: counts(8, 0, 8),
            reservations: vec![("cr-a".into(), counts(4, 0, 4)), ("cr-b".into(), counts(4, 0, 4))],
        };
        // cr-a: 4 in use, 3 of them running: 1 failed (of cr-a's 4, not the block's 8).
        let h = status.health_of("cr-a", Some(3)).unwrap();
        assert_eq!((h.total, h.unavailable), (4, 1));
        assert_eq!(h.problems(), vec!["1 of 4 instances unavailable"]);
        assert_eq!(status.health_of("cr-c", Some(0)), None, "a reservation EC2 did not list");
        // A block of one reservation listed without its reservations: the block's counts.
        let one = CapacityStatus { reservations: vec![], ..status.clone() };
        assert_eq!(one.health_of("cr-a", Some(8)).unwrap().unavailable, 0);
        assert_eq!(one.health_of("cr-a", None), None);
    }

    fn at(minute: i64) -> DateTime<Utc> {
        "2026-12-03T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::minutes(minute)
    }

    #[test]
    fn a_rise_that_stopping_could_explain_waits_for_the_settle() {
        let ok = h("ok", 0);
        // First seen at 12:00 from an answer that counts work: judged as nothing failed yet.
        let s = settle(Some(&ok), None, &h("ok", 2), true, at(0));
        assert_eq!((s.health.unavailable, s.watch), (0, Some(HealthWatch { since: at(0) })));
        assert_eq!(change(Some(&ok), &s.health), None, "no news while it may be instances stopping");
        // Still there at 12:10: still held, since 12:00.
        let s = settle(Some(&ok), s.watch.as_ref(), &h("ok", 2), true, at(10));
        assert_eq!((s.health.unavailable, s.watch), (0, Some(HealthWatch { since: at(0) })));
        // At 12:15 it has lasted the settle: announced, the watch ends.
        let s = settle(Some(&ok), s.watch.as_ref(), &h("ok", 2), true, at(15));
        assert_eq!((s.health.unavailable, s.watch), (2, None));
        assert_eq!(change(Some(&ok), &s.health).unwrap().summary(), "2 of 16 instances unavailable");
    }

    #[test]
    fn places_that_come_back_end_the_watch_and_the_rest_is_at_once() {
        let ok = h("ok", 0);
        let watch = HealthWatch { since: at(0) };
        // Gone by 12:05 (the instances stopped): judged as seen, the watch ends, no news.
        let s = settle(Some(&ok), Some(&watch), &h("ok", 0), true, at(5));
        assert_eq!((s.health.clone(), s.watch), (ok.clone(), None));
        assert_eq!(change(Some(&ok), &s.health), None);
        // Under the reading where unavailable is failures alone: announced at once.
        let s = settle(Some(&ok), None, &h("ok", 2), false, at(0));
        assert_eq!((s.health.unavailable, s.watch), (2, None));
        // A recovery is at once, and so is the interconnect beside a held rise.
        let two = h("ok", 2);
        assert_eq!(settle(Some(&two), None, &h("ok", 1), true, at(0)).health.unavailable, 1);
        let s = settle(Some(&two), None, &h("impaired", 3), true, at(0));
        assert_eq!((s.health.unavailable, s.watch.is_some()), (2, true));
        assert_eq!(
            change(Some(&two), &s.health).unwrap().summary(),
            "interconnect impaired; 2 of 16 instances unavailable"
        );
        // Nothing announced yet: the rise is from zero.
        assert_eq!(settle(None, None, &h("ok", 1), true, at(0)).health.unavailable, 0);
    }

    #[test]
    fn milestones() {
        let d = change(None, &h("impaired", 2)).unwrap();
        assert_eq!(milestone(1, &d), "health-1-interconnectimpaired2of16instancesunavailable");
        assert_ne!(milestone(1, &d), milestone(3, &d), "the same problem after a recovery is news again");
    }
}
