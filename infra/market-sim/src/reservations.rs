//! Bought blocks and their extensions, with states computed lazily from the sim clock
//! (nothing is stored per tick, so moving the clock backwards or forwards is always consistent).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use crate::scenario::{HealthStep, PaymentOutcome, StoppingInUsage, UsageStep};

/// Payment must go through within 12 h of purchase...
pub const PAYMENT_WINDOW_HOURS: i64 = 12;
/// ...and by 5 minutes before the block starts, whichever comes first.
pub const PAYMENT_CUTOFF_BEFORE_START_MINUTES: i64 = 5;
/// An extension: by 35 minutes before the block's scheduled end (the extension's start), EC2
/// User Guide, "Extend a Capacity Block".
pub const EXTENSION_CUTOFF_BEFORE_END_MINUTES: i64 = 35;

#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    pub outcome: PaymentOutcome,
    pub delay_hours: f64,
    /// Set by POST /_sim/payment: a "fail" then happens at `delay_hours` rather than at the
    /// deadline.
    pub explicit: bool,
}

impl Payment {
    pub fn paid_up_front() -> Self {
        Self { outcome: PaymentOutcome::Succeed, delay_hours: 0.0, explicit: false }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    Paid(DateTime<Utc>),
    Failed(DateTime<Utc>),
}

impl Settlement {
    pub fn at(self) -> DateTime<Utc> {
        match self {
            Settlement::Paid(t) | Settlement::Failed(t) => t,
        }
    }
}

fn hours(h: f64) -> Duration {
    Duration::milliseconds((h * 3_600_000.0).round() as i64)
}

/// When and how a purchase made at `purchased` for something starting at `start` settles.
pub fn settle(purchased: DateTime<Utc>, start: DateTime<Utc>, p: &Payment) -> Settlement {
    settle_by(purchased, start, PAYMENT_CUTOFF_BEFORE_START_MINUTES, p)
}

/// `settle` with the cutoff before `start` in minutes (5 for blocks, 35 for extensions).
pub fn settle_by(purchased: DateTime<Utc>, start: DateTime<Utc>, cutoff_minutes: i64, p: &Payment) -> Settlement {
    let deadline = (purchased + Duration::hours(PAYMENT_WINDOW_HOURS))
        .min(start - Duration::minutes(cutoff_minutes))
        .max(purchased);
    let at = purchased + hours(p.delay_hours);
    match p.outcome {
        PaymentOutcome::Succeed if at <= deadline => Settlement::Paid(at),
        PaymentOutcome::Fail if p.explicit => Settlement::Failed(at.min(deadline)),
        _ => Settlement::Failed(deadline),
    }
}

/// How long gone blocks stay visible (`expired_visible_days`, `failed_payment_visible_minutes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    pub expired_days: i64,
    pub failed_minutes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub id: String,
    pub region: String,
    pub availability_zone: String,
    pub instance_type: String,
    pub instance_platform: String,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    /// End as bought; extensions that paid move the effective end (see `end`).
    pub original_end: DateTime<Utc>,
    pub created: DateTime<Utc>,
    pub tags: Vec<(String, String)>,
    pub upfront_fee: Decimal,
    pub currency: String,
    /// None for reservations injected through the control API ("bought in the console").
    pub offering_id: Option<String>,
    pub payment: Payment,
    /// Injected through POST /_sim/reservations: already paid, unless a payment override is set.
    pub injected: bool,
    pub state_override: Option<String>,
    /// Members of CapacityReservation that DescribeCapacityReservations leaves out when it
    /// describes this one (`POST /_sim/reservations/omit`): every member is optional in the API
    /// model, so a client must survive any of them missing.
    pub omitted: Vec<String>,
    /// The Capacity Block this reservation belongs to (DescribeCapacityBlocks).
    pub capacity_block_id: String,
    /// Set when the block is one EC2 UltraServer.
    pub ultraserver_type: Option<String>,
    /// Health steps from the market line (relative to the start)...
    pub health_steps: Vec<HealthStep>,
    /// ...unless POST /_sim/blocks/health set the health explicitly.
    pub health_override: Option<Health>,
    /// How many instances run, from the market line (relative to the start; none: all)...
    pub usage_steps: Vec<UsageStep>,
    /// ...unless POST /_sim/blocks/usage set it explicitly.
    pub usage_override: Option<u32>,
    /// Instances other accounts run in the block through a RAM share, by account
    /// (POST /_sim/blocks/usage with `account_id`): not the owner's to list, but they take
    /// their places like the owner's.
    pub consumers: BTreeMap<String, u32>,
    /// Instances stopped through POST /_sim/blocks/usage that still hold their places while
    /// EC2 stops them (stopping, shutting-down): see `stopping_minutes`.
    pub stopping: Vec<Stopping>,
}

/// `count` instances of `account` that stopped running and hold their places until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopping {
    pub account: String,
    pub count: u32,
    pub until: DateTime<Utc>,
}

/// What DescribeCapacityBlockStatus reports beyond the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub interconnect: String,
    pub unavailable: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Extension {
    pub offering_id: String,
    pub reservation_id: String,
    pub duration_hours: i64,
    pub purchased: DateTime<Utc>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub upfront_fee: Decimal,
    pub currency: String,
    pub payment: Payment,
}

impl Extension {
    pub fn status(&self, now: DateTime<Utc>) -> &'static str {
        match settle_by(self.purchased, self.start, EXTENSION_CUTOFF_BEFORE_END_MINUTES, &self.payment) {
            s if now < s.at() => "payment-pending",
            Settlement::Paid(_) => "payment-succeeded",
            Settlement::Failed(_) => "payment-failed",
        }
    }
}

impl Reservation {
    /// Effective end: the bought end, moved by every extension whose payment has gone through.
    pub fn end(&self, now: DateTime<Utc>, exts: &[Extension]) -> DateTime<Utc> {
        exts.iter()
            .filter(|e| e.reservation_id == self.id && e.status(now) == "payment-succeeded")
            .map(|e| e.end)
            .fold(self.original_end, DateTime::max)
    }

    pub fn settlement(&self) -> Settlement {
        if self.injected && !self.payment.explicit {
            Settlement::Paid(DateTime::<Utc>::MIN_UTC)
        } else {
            settle(self.created, self.start, &self.payment)
        }
    }

    pub fn state(&self, now: DateTime<Utc>, exts: &[Extension]) -> String {
        if let Some(s) = &self.state_override {
            return s.clone();
        }
        match self.settlement() {
            s if now < s.at() => "payment-pending".into(),
            Settlement::Failed(_) => "payment-failed".into(),
            Settlement::Paid(_) if now < self.start => "scheduled".into(),
            Settlement::Paid(_) if now < self.end(now, exts) => "active".into(),
            Settlement::Paid(_) => "expired".into(),
        }
    }

    /// Whether DescribeCapacityReservations (and DescribeCapacityBlocks) still know the block:
    /// an expired one disappears `v.expired_days` after its end, a payment-failed one
    /// `v.failed_minutes` after it failed.
    pub fn visible(&self, now: DateTime<Utc>, exts: &[Extension], v: Visibility) -> bool {
        match self.state(now, exts).as_str() {
            "expired" => now < self.end(now, exts) + Duration::days(v.expired_days),
            "payment-failed" => i64::try_from(v.failed_minutes)
                .ok()
                .and_then(Duration::try_minutes)
                .and_then(|d| self.settlement().at().checked_add_signed(d))
                .is_none_or(|gone| now < gone),
            _ => true,
        }
    }

    /// The remaining capacity ("the number of instances that can be launched"): before the start
    /// every instance not unavailable; in an active block the idle ones (neither unavailable nor
    /// held by an instance of any account, running or stopping); otherwise none.
    pub fn available_instance_count(&self, state: &str, now: DateTime<Utc>) -> u32 {
        let present = self.instance_count.saturating_sub(self.health(now).unavailable);
        match state {
            "payment-pending" | "scheduled" => present,
            "active" => present.saturating_sub(self.in_use(state, now)),
            _ => 0,
        }
    }

    /// The interconnect status and unavailable instances at `now`: the explicit override, else
    /// the last health step reached (counted from the start), else ok with everything there.
    pub fn health(&self, now: DateTime<Utc>) -> Health {
        if let Some(h) = &self.health_override {
            return h.clone();
        }
        self.health_steps
            .iter()
            .filter(|h| self.start + hours(h.after_start_hours) <= now)
            .max_by(|a, b| a.after_start_hours.total_cmp(&b.after_start_hours))
            .map(|h| Health {
                interconnect: h.interconnect.clone(),
                unavailable: h.unavailable.min(self.instance_count),
            })
            .unwrap_or(Health { interconnect: "ok".into(), unavailable: 0 })
    }

    /// How many instances the block's user runs at `now`: the explicit override, else the last
    /// usage step reached (counted from the start), else None (every instance there).
    pub fn usage(&self, now: DateTime<Utc>) -> Option<u32> {
        self.usage_override.or_else(|| {
            self.usage_steps
                .iter()
                .filter(|u| self.start + hours(u.after_start_hours) <= now)
                .max_by(|a, b| a.after_start_hours.total_cmp(&b.after_start_hours))
                .map(|u| u.running)
        })
    }

    /// The owner's running instances of an active block: its usage, capped at the instances
    /// neither unavailable nor held by another account or a stopping instance (all of those
    /// without usage); none in any other state.
    pub fn running(&self, state: &str, now: DateTime<Utc>) -> u32 {
        if state != "active" {
            return 0;
        }
        let held = self.stopping_count(now) + self.consumers_running(state, now).iter().map(|(_, n)| n).sum::<u32>();
        let free = self.present(now).saturating_sub(held);
        self.usage(now).map_or(free, |n| n.min(free))
    }

    /// Instances neither unavailable nor gone: the places instances may take.
    fn present(&self, now: DateTime<Utc>) -> u32 {
        self.instance_count.saturating_sub(self.health(now).unavailable)
    }

    /// The places still held by instances that stopped running, at `now` (capped at the
    /// instances there).
    pub fn stopping_count(&self, now: DateTime<Utc>) -> u32 {
        let n: u32 = self.stopping.iter().filter(|s| now < s.until).map(|s| s.count).sum();
        n.min(self.present(now))
    }

    /// The other accounts' running instances of an active block, by account: each as set,
    /// capped in account order at the places left by the stopping ones; none in any other state.
    pub fn consumers_running(&self, state: &str, now: DateTime<Utc>) -> Vec<(String, u32)> {
        if state != "active" {
            return Vec::new();
        }
        let mut free = self.present(now).saturating_sub(self.stopping_count(now));
        self.consumers
            .iter()
            .map(|(a, n)| {
                let n = (*n).min(free);
                free -= n;
                (a.clone(), n)
            })
            .collect()
    }

    /// Every place held by an instance of an active block: the owner's and the other accounts'
    /// running ones, and the stopping ones.
    pub fn in_use(&self, state: &str, now: DateTime<Utc>) -> u32 {
        if state != "active" {
            return 0;
        }
        let others: u32 = self.consumers_running(state, now).iter().map(|(_, n)| n).sum();
        (self.running(state, now) + others + self.stopping_count(now)).min(self.present(now))
    }

    /// GetCapacityReservationUsage's `instanceUsageSet`: the owner's instances, then each other
    /// account's that has some, each counting its running ones and, under
    /// `StoppingInUsage::Counted`, its stopping ones (they hold their places: a reading).
    pub fn usage_by_account(
        &self,
        owner: &str,
        state: &str,
        stopping: StoppingInUsage,
        now: DateTime<Utc>,
    ) -> Vec<(String, u32)> {
        let stopping_of = |account: &str| -> u32 {
            if state != "active" || stopping == StoppingInUsage::NotCounted {
                return 0;
            }
            self.stopping.iter().filter(|s| now < s.until && s.account == account).map(|s| s.count).sum()
        };
        let mut out = vec![(owner.to_string(), self.running(state, now) + stopping_of(owner))];
        let mut others: BTreeMap<String, u32> = self.consumers_running(state, now).into_iter().collect();
        for s in self.stopping.iter().filter(|s| s.account != owner) {
            others.entry(s.account.clone()).or_default();
        }
        for (a, n) in others {
            let used = n + stopping_of(&a);
            if used > 0 {
                out.push((a, used));
            }
        }
        out
    }

    /// The state of the Capacity Block (CapacityBlockResourceState has fewer values than
    /// CapacityReservationState): an override the block enum knows shows through; one it does
    /// not (assessing, delayed, cancelling, pending, unsupported) leaves the lifecycle state.
    pub fn block_state(&self, now: DateTime<Utc>, exts: &[Extension]) -> String {
        const BLOCK_STATES: &[&str] = &[
            "active",
            "expired",
            "unavailable",
            "cancelled",
            "failed",
            "scheduled",
            "payment-pending",
            "payment-failed",
        ];
        match &self.state_override {
            Some(s) if BLOCK_STATES.contains(&s.as_str()) => s.clone(),
            _ => Reservation { state_override: None, ..self.clone() }.state(now, exts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
    }

    fn res(payment: Payment) -> Reservation {
        Reservation {
            id: "cr-1".into(),
            region: "us-east-1".into(),
            availability_zone: "us-east-1a".into(),
            instance_type: "p5.48xlarge".into(),
            instance_platform: "Linux/UNIX".into(),
            instance_count: 2,
            start: Utc.with_ymd_and_hms(2026, 12, 2, 11, 30, 0).unwrap(),
            original_end: Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap(),
            created: t0(),
            tags: vec![],
            upfront_fee: Decimal::ONE,
            currency: "USD".into(),
            offering_id: Some("cb-x".into()),
            payment,
            injected: false,
            state_override: None,
            omitted: vec![],
            capacity_block_id: "cb-b".into(),
            ultraserver_type: None,
            health_steps: vec![],
            health_override: None,
            usage_steps: vec![],
            usage_override: None,
            consumers: BTreeMap::new(),
            stopping: vec![],
        }
    }

    fn pay(outcome: PaymentOutcome, delay_hours: f64, explicit: bool) -> Payment {
        Payment { outcome, delay_hours, explicit }
    }

    #[test]
    fn happy_lifecycle() {
        let r = res(pay(PaymentOutcome::Succeed, 3.0, false));
        let st = |h: i64| r.state(t0() + Duration::hours(h), &[]);
        assert_eq!(st(0), "payment-pending");
        assert_eq!(r.state(t0() + Duration::minutes(179), &[]), "payment-pending");
        assert_eq!(st(3), "scheduled");
        assert_eq!(r.state(r.start, &[]), "active");
        assert_eq!(r.state(r.original_end, &[]), "expired");
        let v = Visibility { expired_days: 60, failed_minutes: 60 };
        assert!(r.visible(r.original_end + Duration::days(59), &[], v));
        assert!(!r.visible(r.original_end + Duration::days(60), &[], v));
    }

    #[test]
    fn payment_failures() {
        // fail / never: at min(purchase + 12 h, start - 5 min) = purchase + 12 h here.
        for o in [PaymentOutcome::Fail, PaymentOutcome::Never] {
            let r = res(pay(o, 3.0, false));
            assert_eq!(r.state(t0() + Duration::hours(11), &[]), "payment-pending");
            assert_eq!(r.state(t0() + Duration::hours(12), &[]), "payment-failed");
            assert_eq!(r.state(r.start + Duration::days(3), &[]), "payment-failed");
        }
        // A delay past the deadline fails at the deadline.
        let r = res(pay(PaymentOutcome::Succeed, 13.0, false));
        assert_eq!(r.state(t0() + Duration::hours(12), &[]), "payment-failed");
        // Start close by: the deadline is start - 5 min.
        let mut r = res(pay(PaymentOutcome::Never, 3.0, false));
        r.start = t0() + Duration::hours(2);
        assert_eq!(settle(r.created, r.start, &r.payment), Settlement::Failed(t0() + Duration::minutes(115)));
        // Explicit fail happens at its own time.
        let r = res(pay(PaymentOutcome::Fail, 1.0, true));
        assert_eq!(r.state(t0() + Duration::hours(1), &[]), "payment-failed");
        // Failed blocks vanish `failed_minutes` after failing (the model keeps failed requests
        // 60 minutes); expired ones keep their days.
        let v = |failed_minutes| Visibility { expired_days: 60, failed_minutes };
        let failed = t0() + Duration::hours(1);
        assert!(r.visible(failed + Duration::minutes(59), &[], v(60)));
        assert!(!r.visible(failed + Duration::minutes(60), &[], v(60)));
        assert!(r.visible(failed + Duration::days(59), &[], v(60 * 24 * 60)));
        assert!(!r.visible(failed, &[], v(0)), "0: gone the moment it fails");
        assert!(r.visible(failed - Duration::seconds(1), &[], v(0)), "still payment-pending");
    }

    #[test]
    fn override_and_injected() {
        let mut r = res(Payment::paid_up_front());
        r.injected = true;
        r.created = r.start + Duration::days(5);
        assert_eq!(r.state(r.start - Duration::hours(1), &[]), "scheduled");
        assert_eq!(r.state(r.start, &[]), "active");
        r.state_override = Some("unavailable".into());
        assert_eq!(r.state(t0(), &[]), "unavailable");
        assert_eq!(r.block_state(t0(), &[]), "unavailable");
        // A reservation state the block enum lacks leaves the block's lifecycle state.
        r.state_override = Some("assessing".into());
        assert_eq!(r.state(r.start, &[]), "assessing");
        assert_eq!(r.block_state(r.start, &[]), "active");
    }

    #[test]
    fn health_follows_its_steps_and_the_override() {
        let mut r = res(Payment::paid_up_front());
        r.injected = true;
        r.instance_count = 4;
        r.health_steps = vec![
            HealthStep { after_start_hours: 2.0, interconnect: "impaired".into(), unavailable: 9 },
            HealthStep { after_start_hours: 1.0, interconnect: "ok".into(), unavailable: 1 },
        ];
        let h = |r: &Reservation, m: i64| r.health(r.start + Duration::minutes(m));
        assert_eq!(h(&r, 59), Health { interconnect: "ok".into(), unavailable: 0 });
        assert_eq!(h(&r, 60), Health { interconnect: "ok".into(), unavailable: 1 });
        // Capped at the block's size.
        assert_eq!(h(&r, 120), Health { interconnect: "impaired".into(), unavailable: 4 });
        assert_eq!(r.running("active", r.start + Duration::minutes(60)), 3);
        assert_eq!(r.available_instance_count("scheduled", r.start + Duration::minutes(60)), 3);
        r.health_override = Some(Health { interconnect: "insufficient-data".into(), unavailable: 0 });
        assert_eq!(h(&r, 120).interconnect, "insufficient-data");
        assert_eq!(r.running("active", r.start + Duration::minutes(120)), 4);
    }

    #[test]
    fn usage_steps_are_reached_over_time() {
        let mut r = res(Payment::paid_up_front());
        r.injected = true;
        r.instance_count = 8;
        // Out of order on purpose: the last step reached holds.
        r.usage_steps = vec![
            UsageStep { after_start_hours: 6.0, running: 8 },
            UsageStep { after_start_hours: 1.0, running: 5 },
            UsageStep { after_start_hours: 3.0, running: 0 },
        ];
        let start = r.start;
        let at = |m: i64| start + Duration::minutes(m);
        // (running, available) of the active block at m minutes after the start.
        let counts =
            |r: &Reservation, m: i64| (r.running("active", at(m)), r.available_instance_count("active", at(m)));
        assert_eq!(counts(&r, 0), (8, 0), "before the first step every instance runs");
        assert_eq!(counts(&r, 59), (8, 0));
        assert_eq!(counts(&r, 60), (5, 3));
        assert_eq!(counts(&r, 179), (5, 3));
        assert_eq!(counts(&r, 180), (0, 8), "all idle: all available");
        assert_eq!(counts(&r, 360), (8, 0));
        assert_eq!(r.state(at(60), &[]), "active");
        // Before the start and after the end nothing changes: the steps are about the active block.
        assert_eq!(r.running("scheduled", at(-60)), 0);
        assert_eq!(r.available_instance_count("scheduled", at(-60)), 8);
        assert_eq!((r.running("expired", at(180)), r.available_instance_count("expired", at(180))), (0, 0));
        // More than the block holds runs the block.
        r.usage_steps = vec![UsageStep { after_start_hours: 0.0, running: 99 }];
        assert_eq!(counts(&r, 0), (8, 0));
    }

    #[test]
    fn running_is_capped_by_unavailable_instances() {
        let mut r = res(Payment::paid_up_front());
        r.injected = true;
        r.instance_count = 8;
        r.usage_steps = vec![UsageStep { after_start_hours: 0.0, running: 5 }];
        r.health_steps = vec![
            HealthStep { after_start_hours: 1.0, interconnect: "ok".into(), unavailable: 2 },
            HealthStep { after_start_hours: 2.0, interconnect: "impaired".into(), unavailable: 6 },
        ];
        let start = r.start;
        let at = |m: i64| start + Duration::minutes(m);
        let counts =
            |r: &Reservation, m: i64| (r.running("active", at(m)), r.available_instance_count("active", at(m)));
        assert_eq!(counts(&r, 0), (5, 3), "8 there, 5 running, 3 idle");
        assert_eq!(counts(&r, 60), (5, 1), "6 there: 5 running, 1 idle");
        assert_eq!(counts(&r, 120), (2, 0), "2 there: both run, never below 0 available");
        // Without usage every instance there runs, as before.
        r.usage_steps.clear();
        assert_eq!(counts(&r, 60), (6, 0));
    }

    #[test]
    fn the_usage_override_wins_over_the_steps_until_cleared() {
        let mut r = res(Payment::paid_up_front());
        r.injected = true;
        r.instance_count = 8;
        r.usage_steps = vec![UsageStep { after_start_hours: 1.0, running: 5 }];
        let later = r.start + Duration::hours(2);
        r.usage_override = Some(2);
        assert_eq!(r.usage(r.start), Some(2), "before the first step too");
        assert_eq!((r.running("active", later), r.available_instance_count("active", later)), (2, 6));
        r.usage_override = Some(0);
        assert_eq!((r.running("active", later), r.available_instance_count("active", later)), (0, 8));
        r.usage_override = None;
        assert_eq!((r.running("active", later), r.available_instance_count("active", later)), (5, 3));
        assert_eq!(r.usage(r.start), None);
    }

    #[test]
    fn extensions_move_the_end_once_paid() {
        let r = res(pay(PaymentOutcome::Succeed, 0.0, false));
        let bought = r.original_end - Duration::hours(5);
        let ext = |outcome| Extension {
            offering_id: "cbe-1".into(),
            reservation_id: "cr-1".into(),
            duration_hours: 48,
            purchased: bought,
            start: r.original_end,
            end: r.original_end + Duration::hours(48),
            upfront_fee: Decimal::ONE,
            currency: "USD".into(),
            payment: pay(outcome, 3.0, false),
        };
        let ok = [ext(PaymentOutcome::Succeed)];
        assert_eq!(ok[0].status(bought), "payment-pending");
        assert_eq!(r.end(bought, &ok), r.original_end);
        assert_eq!(ok[0].status(bought + Duration::hours(3)), "payment-succeeded");
        assert_eq!(r.end(bought + Duration::hours(3), &ok), r.original_end + Duration::hours(48));
        assert_eq!(r.state(r.original_end + Duration::hours(1), &ok), "active");
        let bad = [ext(PaymentOutcome::Fail)];
        // Deadline: min(bought + 12 h, ext start - 35 min) = end - 35 min.
        assert_eq!(bad[0].status(r.original_end - Duration::minutes(36)), "payment-pending");
        assert_eq!(bad[0].status(r.original_end - Duration::minutes(35)), "payment-failed");
        assert_eq!(r.end(r.original_end, &bad), r.original_end);
        assert_eq!(r.state(r.original_end, &bad), "expired");
    }
}
