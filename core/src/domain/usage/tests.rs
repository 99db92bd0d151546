use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use super::*;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// 8 x p5 for two days from 2026-12-03 11:30, 8 accelerators each (termination 30 min early).
fn span() -> Span {
    let start = t("2026-12-03T11:30:00Z");
    let end = start + Duration::days(2);
    Span { start, end, termination: end - Duration::minutes(30), instances: 8, accelerators_per_instance: Some(8) }
}

fn usd(s: &str) -> Money {
    Money::parse(s, "USD").unwrap()
}

/// Samples every `every` minutes from `from` to `to` (inclusive), `running(at)` instances running
/// of 8, none unavailable; every piece of news with the sample's time.
fn run(
    mut u: Usage,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    every: i64,
    alert_after: u32,
    running: impl Fn(DateTime<Utc>) -> u32,
) -> (Usage, Vec<(DateTime<Utc>, IdleNews)>) {
    let b = span();
    let mut news = Vec::new();
    let mut at = from;
    while at <= to {
        let r = running(at);
        let (next, n) = u.sample(&b, &Reading { at, instances: 8, available: 8 - r, failed: 0 }, alert_after);
        news.extend(n.map(|n| (at, n)));
        u = next;
        at += Duration::minutes(every);
    }
    (u, news)
}

#[test]
fn three_of_eight_idle_for_two_hours_alert_once_and_recover_once() {
    let b = span();
    let idle_from = b.start + Duration::hours(1);
    let idle_to = b.start + Duration::hours(3);
    let running = |at: DateTime<Utc>| if at >= idle_from && at < idle_to { 5 } else { 8 };
    let (u, news) = run(Usage::default(), b.start + Duration::minutes(5), b.start + Duration::hours(6), 5, 60, running);
    assert_eq!(news.len(), 2, "{news:#?}");
    // Alert at an hour of idleness: 3 instances x 60 minutes so far.
    assert_eq!(news[0].0, idle_from + Duration::hours(1));
    assert_eq!(news[0].1, IdleNews::Idle { number: 1, idle: 3, since: idle_from, idle_instance_minutes: 180 });
    assert_eq!(news[0].1.milestone(), "idle-1");
    // Recovered when all run again: 3 x 120 minutes in all.
    assert_eq!(news[1].0, idle_to);
    assert_eq!(
        news[1].1,
        IdleNews::Recovered { number: 1, since: idle_from, until: idle_to, idle_instance_minutes: 360 }
    );
    assert_eq!(news[1].1.milestone(), "idle-1-over");
    assert_eq!((u.idle_instance_minutes, u.alerts, u.episode.clone()), (360, 1, None));
    // The money: 360 of 8 x 2,880 paid instance-minutes of a 36,864 USD block = 576.00 USD.
    assert_eq!(idle_cost(&b, Some(usd("36864")), 360), Some(usd("576.00")));
    assert_eq!(idle_cost(&b, Some(usd("36864")), 180), Some(usd("288.00")));
    assert_eq!(idle_cost(&b, None, 180), None);
}

#[test]
fn a_second_episode_is_alert_two_and_a_short_one_says_nothing() {
    let b = span();
    let h = |n: i64| b.start + Duration::hours(n);
    // Idle 2h-4h (alerted), 5h-5h30 (too short), 8h-10h (alerted again).
    let running = move |at: DateTime<Utc>| {
        let idle = (at >= h(2) && at < h(4))
            || (at >= h(5) && at < h(5) + Duration::minutes(30))
            || (at >= h(8) && at < h(10));
        if idle { 6 } else { 8 }
    };
    let (_, news) = run(Usage::default(), b.start + Duration::minutes(5), h(12), 5, 60, running);
    let names: Vec<String> = news.iter().map(|(_, n)| n.milestone()).collect();
    assert_eq!(names, ["idle-1", "idle-1-over", "idle-2", "idle-2-over"]);
}

#[test]
fn idle_in_the_first_and_last_hour_is_not_alerted_and_zero_turns_alerts_off() {
    let b = span();
    // Everything idle from the start: counted from the first hour's end only.
    let (u, news) = run(Usage::default(), b.start + Duration::minutes(5), b.start + Duration::hours(2), 5, 60, |_| 0);
    assert_eq!(news.len(), 1);
    match &news[0].1 {
        IdleNews::Idle { since, idle, .. } => {
            assert_eq!((*since, *idle), (b.start + Duration::hours(1), 8));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(news[0].0, b.start + Duration::hours(2));
    assert_eq!(u.idle_instance_minutes, 8 * 60);
    // Idle only in the last hour: nothing said, nothing counted.
    let last = b.end - Duration::minutes(60);
    let (u, news) =
        run(Usage::default(), last - Duration::minutes(30), b.end, 5, 60, |at| if at >= last { 0 } else { 8 });
    assert!(news.is_empty(), "{news:?}");
    assert_eq!(u.idle_instance_minutes, 0);
    // idle_alert_minutes = 0: counted, never alerted.
    let (u, news) = run(Usage::default(), b.start + Duration::minutes(5), b.start + Duration::hours(6), 5, 0, |_| 4);
    assert!(news.is_empty());
    assert!(u.idle_instance_minutes > 0);
}

#[test]
fn used_hours_and_utilization_add_up_and_a_late_sample_changes_nothing() {
    let b = span();
    // 6 of 8 run the whole block, sampled every 5 minutes.
    let (u, _) = run(Usage::default(), b.start + Duration::minutes(5), b.end, 5, 60, |_| 6);
    let closed = u.closed(&b, b.end);
    // To the termination: 6 x (48 h - 30 min) = 285 instance-hours.
    assert_eq!(closed.used_instance_minutes, 6 * (48 * 60 - 30));
    let x = utilization(&b, &closed, Some(usd("36864")));
    assert_eq!(x.paid_instance_hours, Decimal::from(384));
    assert_eq!(x.used_instance_hours, Decimal::from(285));
    assert_eq!(x.percent, "74.22".parse::<Decimal>().unwrap());
    assert_eq!(x.used_accelerator_hours, Some(Decimal::from(2280)));
    // 36,864 / 2,280 = 16.168421... per used accelerator-hour.
    assert_eq!(x.per_used_accelerator_hour.unwrap().display(), "16.1684 USD");
    // A sample at or before the last one is ignored.
    let again = u.sample(&b, &Reading { at: b.start, instances: 8, available: 0, failed: 0 }, 60);
    assert_eq!(again, (u.clone(), None));
    // Closing twice counts nothing twice.
    assert_eq!(closed.closed(&b, b.end), closed);
    // Released a day in: counted to then, not to the termination.
    let (early, _) = run(Usage::default(), b.start + Duration::minutes(5), b.start + Duration::hours(24), 5, 60, |_| 6);
    let released = early.closed(&b, b.start + Duration::hours(24));
    assert_eq!(released.used_instance_minutes, 6 * 24 * 60);
}

#[test]
fn unavailable_instances_are_neither_idle_nor_used() {
    let s = Reading { at: t("2026-12-03T13:00:00Z"), instances: 8, available: 1, failed: 2 };
    assert_eq!((s.running(), s.idle()), (5, 1));
    let over = Reading { at: t("2026-12-03T13:00:00Z"), instances: 8, available: 9, failed: 2 };
    assert_eq!((over.running(), over.idle()), (0, 8));
}

/// The failures the health check judges from one DescribeCapacityBlockStatus answer of 8
/// instances, `failed` failed and `running` running, counted as EC2 would under each reading
/// (`in_use`: running ones unavailable too), with the instances seen running.
fn judged_failed(in_use: bool, failed: u32, running: u32) -> u32 {
    let available = 8 - failed - running;
    let unavailable = if in_use { failed + running } else { failed };
    let c = crate::domain::health::StatusCounts { total: 8, available, unavailable };
    c.failed(Some(running)).unwrap()
}

#[test]
fn a_block_at_work_is_used_under_each_reading_of_the_unavailable_count() {
    let b = span();
    for in_use in [false, true] {
        // Every instance runs, none failed: all used, none idle, 100 % so far.
        let failed = judged_failed(in_use, 0, 8);
        assert_eq!(failed, 0, "in_use {in_use}");
        let at = b.start + Duration::hours(2);
        let s = Reading { at, instances: 8, available: 0, failed };
        assert_eq!((s.running(), s.idle()), (8, 0), "in_use {in_use}");
        let (u, news) = Usage::default().sample(&b, &s, 60);
        assert_eq!(news, None);
        assert_eq!(u.used_instance_minutes, 8 * 120);
        assert_eq!(utilization_so_far(&b, &u), Some(Decimal::from(100)), "in_use {in_use}");
        // 2 failed, 5 of the other 6 run: 5 running, 1 idle, the 2 neither.
        let failed = judged_failed(in_use, 2, 5);
        assert_eq!(failed, 2, "in_use {in_use}");
        let s = Reading { at, instances: 8, available: 1, failed };
        assert_eq!((s.running(), s.idle()), (5, 1), "in_use {in_use}");
    }
}

#[test]
fn nothing_sampled_means_nothing_known_and_no_price() {
    let b = span();
    let u = Usage::default();
    assert!(!u.is_known());
    let x = utilization(&b, &u.closed(&b, b.end), Some(usd("100")));
    assert_eq!((x.used_instance_hours, x.per_used_accelerator_hour), (Decimal::ZERO, None));
}
