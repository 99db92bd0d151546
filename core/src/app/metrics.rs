//! What the scan and the tracker report, as CloudWatch metrics (`domain::metrics` builds the
//! EMF documents; the functions print them). Every metric the dashboard draws comes from here
//! or from `lambda::report` (errors).

use super::scan::ScanReport;
use super::track::TrackReport;
use crate::domain::metrics::{Batch, CoverageFigures, Questions};

/// Prices seen against each rule's threshold, and how each region's questions went.
pub fn of_scan(r: &ScanReport, stack: &str) -> Batch {
    let mut b = Batch::new(stack, r.now);
    for p in &r.prices {
        match &p.ultraserver_type {
            Some(kind) => b.ultraserver_price(&p.region, kind, p.per_accelerator_hour),
            None => b.price(&p.region, &p.instance_type, p.per_accelerator_hour),
        }
    }
    for (rule, max) in &r.thresholds {
        b.threshold(rule, *max);
    }
    for (region, q) in &r.regions {
        let Ok(region) = region.parse() else { continue };
        b.questions(
            &region,
            Questions {
                asked: q.asked,
                answered: q.answered,
                throttled: q.throttled,
                carried_over: q.carried_over,
                allowed: q.allowed,
            },
        );
        // Only regions this run asked: an overlapping run's are its own to report.
        if q.asked > 0 {
            b.coverage(
                &region,
                CoverageFigures {
                    questions: q.questions,
                    cycle_secs: q.age_max_secs,
                    median_age_secs: q.age_p50_secs,
                    pace_ms: q.pace_ms,
                    contended: q.contended,
                },
            );
        }
    }
    b
}

/// Blocks by state, this month's budgets and the next deadlines. Empty when the run did not
/// get as far as reading them.
pub fn of_track(r: &TrackReport, stack: &str) -> Option<Batch> {
    let h = &r.holdings;
    let mut b = Batch::new(stack, h.now?);
    for (state, n) in &h.by_state {
        b.blocks(state, *n);
    }
    for line in &h.budgets {
        b.budget(&line.owner, line.committed.amount(), line.spent.amount(), line.limit.amount());
    }
    if let Some(t) = h.next_payment_deadline {
        b.hours_to_payment_deadline(t);
    }
    if let Some(t) = h.next_termination {
        b.hours_to_termination(t);
    }
    for u in &h.in_use {
        b.block_use(&u.reservation_id, u.idle, u.idle_cost.map(|c| c.amount()), u.utilization_percent, u.unavailable);
    }
    Some(b)
}
