//! The block lengths EC2 sells (user guide: 1-14 days in 1-day steps, then 7-day steps up to
//! 182 days). Its own module because both the market and the scenario check against it.

/// Durations the market sells: 1-14 days in 1-day steps, then 7-day steps up to 182 days.
pub fn valid_duration_days(days: i64) -> bool {
    (1..=14).contains(&days) || ((21..=182).contains(&days) && days % 7 == 0)
}
