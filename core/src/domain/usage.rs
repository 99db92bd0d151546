//! What a block's instances were used for: the tracker's samples of how many run, the used
//! instance-hours they add up to, and the idle-but-paid episodes worth telling a person about.
//!
//! A Capacity Block is paid in full up front, so an instance of it that does not run is money
//! burnt. EC2 says how many instances of a reservation could still be launched
//! (DescribeCapacityReservations' `AvailableInstanceCount`, which the tracker reads for every
//! open block on each run anyway, so sampling costs no extra call and no extra share of the
//! account's describe limit): "Launching an instance into a Capacity Block reduces the available
//! capacity by the number of instances launched". What runs is what was launched, less the
//! instances that failed, as the health check judged them (`domain::health`, never a running
//! instance); never DescribeCapacityBlockStatus' raw unavailable count, which may count every
//! running instance too. It counts the instances of every account the block is shared with,
//! which DescribeInstances in the owner's account would not see, so the samples need no
//! GetCapacityReservationUsage of their own. They lean on the health check's failed count,
//! though, and that one does need it: under the reading where running instances count as
//! unavailable, a shared block's other accounts' instances (and ones still stopping) would
//! otherwise read as failed, and the samples would count them neither used nor idle. The
//! health check takes every account's instances from GetCapacityReservationUsage
//! (`app::health`), so they count here as used. An instance still stopping holds its place for
//! a few minutes and is counted as running until it frees it: at most that long late, like the
//! samples' own interval.
//!
//! Samples are coarse: each sample's running count stands for the time since the previous
//! sample (the first, for the time since the start), so a change in what runs is placed up to one
//! tracker interval late (5 minutes at the default rate): at most that interval times the change,
//! per change, in instance-minutes.
//!
//! The first and last hour of a block are excepted from idle alerts: instances boot and jobs
//! start in the first, and checkpoint and stop before EC2's termination in the last. Idle time is
//! counted only from an hour after the start to an hour before the end, and an episode already
//! under way at the first hour's end counts from there.
//!
//! Pure: the caller passes every fact, `now` included.

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::money::{Money, Rate};

/// How long after the start and before the end idle instances are expected, not alerted.
pub const QUIET_MINUTES: i64 = 60;
/// The rule's `idle_alert_minutes` when it names none.
pub const DEFAULT_IDLE_ALERT_MINUTES: u32 = 60;

/// The facts of a block its usage is judged against (`Block::span`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// When EC2 begins terminating its instances.
    pub termination: DateTime<Utc>,
    pub instances: u32,
    pub accelerators_per_instance: Option<u32>,
}

/// What the tracker's samples say of a block's use so far, stored with the block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The last sample: when, how many instances ran and how many could have but did not.
    pub sampled_at: Option<DateTime<Utc>>,
    pub running: u32,
    pub idle: u32,
    /// Instance-minutes the samples counted as running, from the start to the last sample (and,
    /// once the block ended, to its termination).
    pub used_instance_minutes: u64,
    /// Idle instance-minutes counted (outside the first and last hour), over the block's life.
    pub idle_instance_minutes: u64,
    /// The idle episode under way, if any.
    pub episode: Option<IdleEpisode>,
    /// Episodes alerted so far: the next alert is number `alerts + 1` (its outbox milestone).
    pub alerts: u32,
}

/// A stretch of samples with idle instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleEpisode {
    /// When the idle time began counting (never before the first hour's end).
    pub since: DateTime<Utc>,
    /// Idle instance-minutes counted in this episode.
    pub idle_instance_minutes: u64,
    /// The alert's number once alerted (the episode is told about once, and its end once).
    pub alerted: Option<u32>,
}

/// What one sample tells a person, at most one per sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdleNews {
    /// Part of the block has been idle for `idle_alert_minutes` or more: alert `number`.
    Idle { number: u32, idle: u32, since: DateTime<Utc>, idle_instance_minutes: u64 },
    /// An alerted episode is over: every instance runs again.
    Recovered { number: u32, since: DateTime<Utc>, until: DateTime<Utc>, idle_instance_minutes: u64 },
}

impl IdleNews {
    /// The outbox milestone: each alert and each recovery once.
    pub fn milestone(&self) -> String {
        match self {
            IdleNews::Idle { number, .. } => format!("idle-{number}"),
            IdleNews::Recovered { number, .. } => format!("idle-{number}-over"),
        }
    }

    pub fn idle_instance_minutes(&self) -> u64 {
        match self {
            IdleNews::Idle { idle_instance_minutes, .. } | IdleNews::Recovered { idle_instance_minutes, .. } => {
                *idle_instance_minutes
            }
        }
    }
}

/// One reading of an active block: its instances, how many could still be launched
/// (`available`, EC2's AvailableInstanceCount) and how many failed (`failed`: the health
/// check's judgement, `BlockHealth::unavailable`, never EC2's raw unavailable count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub at: DateTime<Utc>,
    pub instances: u32,
    pub available: u32,
    pub failed: u32,
}

impl Reading {
    pub fn idle(&self) -> u32 {
        self.available.min(self.instances)
    }

    /// The instances launched (not available) that did not fail.
    pub fn running(&self) -> u32 {
        self.instances.saturating_sub(self.available).saturating_sub(self.failed)
    }
}

fn minutes(from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    u64::try_from((to - from).num_minutes()).unwrap_or(0)
}

/// The window in which idle instances count: from an hour after the start to an hour before the
/// end (never past the termination).
pub fn counting_window(b: &Span) -> (DateTime<Utc>, DateTime<Utc>) {
    let quiet = Duration::minutes(QUIET_MINUTES);
    (b.start + quiet, (b.end - quiet).min(b.termination))
}

impl Usage {
    /// The usage after sample `s` of block `b`, and what to tell of it. `alert_after`: the rule's
    /// `idle_alert_minutes` (0: never alert). A sample older than the last one changes nothing.
    ///
    /// Each count holds from its sample to the next (the first sample's also back to the start,
    /// as nothing earlier is known): an episode begins at the first sample that sees idle
    /// instances in the counting window, so "idle for an hour" means seen idle an hour apart.
    pub fn sample(&self, b: &Span, s: &Reading, alert_after: u32) -> (Usage, Option<IdleNews>) {
        if self.sampled_at.is_some_and(|t| s.at <= t) || s.at < b.start {
            return (self.clone(), None);
        }
        let running_before = if self.sampled_at.is_some() { self.running } else { s.running() };
        let mut next = self.counted_to(b, s.at, running_before);
        next.running = s.running();
        let (open, close) = counting_window(b);
        // The idle time since the previous sample, inside the counting window, at its count.
        let from = self.sampled_at.unwrap_or(b.start).max(open);
        let to = s.at.min(close);
        let counted = if to > from { u64::from(self.idle) * minutes(from, to) } else { 0 };
        next.idle_instance_minutes += counted;
        if let Some(e) = next.episode.as_mut() {
            e.idle_instance_minutes += counted;
        }
        let idle = s.idle();
        next.idle = idle;
        let mut news = None;
        if idle == 0 {
            if let Some(e) = next.episode.take()
                && let Some(number) = e.alerted
            {
                news = Some(IdleNews::Recovered {
                    number,
                    since: e.since,
                    until: s.at,
                    idle_instance_minutes: e.idle_instance_minutes,
                });
            }
            return (next, news);
        }
        if s.at < open || s.at >= close {
            // Idle in the first or last hour is expected: not alerted. An episode under way in
            // the last hour stays open; the end-of-block line tells the rest.
            return (next, None);
        }
        let e = next.episode.get_or_insert(IdleEpisode {
            // Idle at the previous sample already (in the first hour): counted from the opening.
            since: if self.idle > 0 { from } else { s.at },
            idle_instance_minutes: counted,
            alerted: None,
        });
        if e.alerted.is_none() && alert_after > 0 && minutes(e.since, s.at) >= u64::from(alert_after) {
            let number = self.alerts + 1;
            e.alerted = Some(number);
            news =
                Some(IdleNews::Idle { number, idle, since: e.since, idle_instance_minutes: e.idle_instance_minutes });
            next.alerts = number;
        }
        (next, news)
    }

    /// The usage with `running` instances counted from the last sample (or the start) up to
    /// `at`, never past the block's termination, as of a sample at `at`.
    fn counted_to(&self, b: &Span, at: DateTime<Utc>, running: u32) -> Usage {
        let from = self.sampled_at.unwrap_or(b.start).max(b.start);
        let to = at.min(b.termination);
        let mut next = self.clone();
        if to > from {
            next.used_instance_minutes += u64::from(running) * minutes(from, to);
        }
        next.sampled_at = Some(at);
        next
    }

    /// The usage once the block ended at `at` (its end, or earlier when EC2 released it): the
    /// last sample's count held until then (never past the termination), and no episode left
    /// open.
    pub fn closed(&self, b: &Span, at: DateTime<Utc>) -> Usage {
        let mut next = match self.sampled_at {
            Some(t) if t < b.termination.min(at) => self.counted_to(b, b.termination.min(at), self.running),
            _ => self.clone(),
        };
        next.episode = None;
        next
    }

    /// Whether any sample was taken: a block never seen active has no usage to tell.
    pub fn is_known(&self) -> bool {
        self.sampled_at.is_some()
    }
}

/// A block's paid and used instance-hours and what the used ones cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Utilization {
    /// Instance-hours paid for: instances x the block's whole life (extensions included).
    pub paid_instance_hours: Decimal,
    pub used_instance_hours: Decimal,
    /// Used over paid, in percent (two decimals). A block used to its termination reaches
    /// (life - 30 min) / life: EC2 terminates the instances 30 minutes (60 for UltraServers)
    /// before the end, and that half hour is paid too.
    pub percent: Decimal,
    pub paid_accelerator_hours: Option<Decimal>,
    pub used_accelerator_hours: Option<Decimal>,
    /// `total` per used accelerator-hour; None when nothing ran, or the fee or the accelerator
    /// count is unknown.
    pub per_used_accelerator_hour: Option<Rate>,
}

/// What block `b` with usage `u` was used for, against `total` paid (fee and extensions).
pub fn utilization(b: &Span, u: &Usage, total: Option<Money>) -> Utilization {
    let life_minutes = Decimal::from(minutes(b.start, b.end));
    let sixty = Decimal::from(60);
    let paid = (Decimal::from(b.instances) * life_minutes / sixty).round_dp(2);
    let used = (Decimal::from(u.used_instance_minutes) / sixty).round_dp(2);
    let percent = if paid.is_zero() { Decimal::ZERO } else { (used * Decimal::from(100) / paid).round_dp(2) };
    let accel = b.accelerators_per_instance.map(Decimal::from);
    let used_accel = accel.map(|a| (a * Decimal::from(u.used_instance_minutes) / sixty).round_dp(2));
    Utilization {
        paid_instance_hours: paid,
        used_instance_hours: used,
        percent,
        paid_accelerator_hours: accel.map(|a| (a * paid).round_dp(2)),
        used_accelerator_hours: used_accel,
        per_used_accelerator_hour: total.zip(used_accel).and_then(|(t, h)| if h.is_zero() { None } else { t.per(h) }),
    }
}

/// Used over paid instance-time from the start to the last sample (never past the
/// termination), in percent to two decimals; None before the first sample.
pub fn utilization_so_far(b: &Span, u: &Usage) -> Option<Decimal> {
    let to = u.sampled_at?.min(b.termination);
    let paid = Decimal::from(b.instances) * Decimal::from(minutes(b.start, to));
    if paid.is_zero() {
        return None;
    }
    Some((Decimal::from(u.used_instance_minutes) * Decimal::from(100) / paid).round_dp(2))
}

/// What `idle_instance_minutes` of block `b` cost at the block's own price per instance-hour
/// (`total` paid over its instances and life), to the cent; None when the fee is unknown.
pub fn idle_cost(b: &Span, total: Option<Money>, idle_instance_minutes: u64) -> Option<Money> {
    let total = total?;
    let paid_minutes = Decimal::from(b.instances).checked_mul(Decimal::from(minutes(b.start, b.end)))?;
    if paid_minutes.is_zero() {
        return None;
    }
    let cost = total.amount().checked_mul(Decimal::from(idle_instance_minutes))?.checked_div(paid_minutes)?;
    Money::new(cost.round_dp(2), total.currency()).ok()
}

#[cfg(test)]
mod tests;
