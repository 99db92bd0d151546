//! Durations as people read them, in one style everywhere capblock prints one (the CLI's
//! tables and sentences, the messages): each unit a number with its letter glued on, the zero
//! units left out, `7d`, `1d 6h 35m`, `3h 12m`, `4m 20s`, `45s`; from an hour up to the minute
//! (a block's length is whole minutes: `6h 35m` and `1d 6h 35m` are EC2's closest matches and are
//! priced from their minutes), under an hour to the second, under ten seconds to the tenth
//! (`2.5s`, a describe pace) and under a second in milliseconds (`800ms`).
//!
//! Why this style: a person compares durations at a glance (a block's length, how long until it
//! starts, a describe pace), largest unit first; the letters keep a table column narrow at 80
//! columns (`1d 6h 35m` against `1 day 6 hours 35 minutes`), and a unit glued to its number is
//! never split from it by a wrapped line. ISO 8601 (`PT26H`) and bare seconds (`93600 s`) are for
//! machines: `-o json` keeps its numbers. What is below the last unit is cut, never rounded up:
//! a duration is never said longer than it is.

use chrono::Duration;

/// `d` in the one style (see the module): `7d`, `1d 6h 35m`, `3h 12m`, `4m 20s`, `45s`, `2.5s`,
/// `800ms`, `0s`; a negative duration with a `-` before it.
pub fn compact(d: Duration) -> String {
    if d < Duration::zero() {
        return format!("-{}", compact(Duration::zero().checked_sub(&d).unwrap_or(Duration::MAX)));
    }
    let ms = d.num_milliseconds();
    let s = ms / 1000;
    let units: Vec<(i64, &str)> = match s {
        3600.. => vec![(s / 86_400, "d"), (s % 86_400 / 3600, "h"), (s % 3600 / 60, "m")],
        60.. => vec![(s / 60, "m"), (s % 60, "s")],
        10.. => return format!("{s}s"),
        1.. if ms % 1000 / 100 == 0 => return format!("{s}s"),
        1.. => return format!("{s}.{}s", ms % 1000 / 100),
        _ if ms > 0 => return format!("{ms}ms"),
        _ => return "0s".into(),
    };
    units.iter().filter(|(n, _)| *n > 0).map(|(n, u)| format!("{n}{u}")).collect::<Vec<_>>().join(" ")
}

/// [`compact`] of a `std` duration (a pace, a wait): the same style.
pub fn compact_std(d: std::time::Duration) -> String {
    compact(Duration::from_std(d).unwrap_or(Duration::MAX))
}

/// [`compact`] of a whole number of minutes (a block's length, a reminder's lead).
pub fn minutes(m: i64) -> String {
    compact(Duration::minutes(m))
}

/// [`compact`] to its two largest units (`2d 11h`, `3h 12m`, `4m 20s`): for a table's countdown
/// ("starts in", "left"), where a row must fit 80 columns and the minutes of a wait days away
/// tell nothing; cut like [`compact`], never rounded up.
pub fn brief(d: Duration) -> String {
    let full = compact(d);
    let mut units = full.split(' ');
    match (units.next(), units.next()) {
        (Some(a), Some(b)) => format!("{a} {b}"),
        _ => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each range in its units, zero units left out, cut (never rounded up), and the edges
    /// between the ranges.
    #[test]
    fn every_duration_reads_in_its_units_largest_first() {
        let cases = [
            (Duration::zero(), "0s"),
            (Duration::milliseconds(800), "800ms"),
            (Duration::milliseconds(1000), "1s"),
            (Duration::milliseconds(2570), "2.5s"),
            (Duration::milliseconds(9990), "9.9s"),
            (Duration::seconds(10), "10s"),
            (Duration::seconds(45), "45s"),
            (Duration::seconds(60), "1m"),
            (Duration::seconds(260), "4m 20s"),
            (Duration::minutes(60), "1h"),
            (Duration::minutes(192), "3h 12m"),
            (Duration::minutes(6 * 60 + 35), "6h 35m"),
            (Duration::hours(24), "1d"),
            (Duration::hours(26), "1d 2h"),
            (Duration::minutes(30 * 60 + 35), "1d 6h 35m"),
            (Duration::seconds(26 * 3600 + 59), "1d 2h"),
            (Duration::minutes(7 * 24 * 60 + 5), "7d 5m"),
            (Duration::days(7), "7d"),
            (Duration::days(182), "182d"),
            (Duration::minutes(-90), "-1h 30m"),
        ];
        for (d, said) in cases {
            assert_eq!(compact(d), said, "{d:?}");
        }
        assert_eq!(compact_std(std::time::Duration::from_millis(2500)), "2.5s");
        assert_eq!(minutes(30), "30m");
        for (d, said) in [
            (Duration::minutes(2 * 24 * 60 + 11 * 60 + 30), "2d 11h"),
            (Duration::minutes(7 * 24 * 60 + 5), "7d 5m"),
            (Duration::minutes(192), "3h 12m"),
            (Duration::seconds(45), "45s"),
        ] {
            assert_eq!(brief(d), said, "{d:?}");
        }
        assert_eq!(compact(Duration::MIN).chars().next(), Some('-'), "the least duration does not overflow");
    }
}
