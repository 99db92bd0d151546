//! The instants one run is for. Money follows the clock: every wait that guards money (the
//! graces of an unknown purchase, payment and extension deadlines), every budget month and
//! every time written to the table is the clock's. People may ask to look at another moment
//! (a dry-run replay or what-if); that moment is the run's view. A run whose view is off the
//! clock is a replay: it reads and reports, and writes nothing.

use chrono::{DateTime, Duration, Utc};

/// A run's clock instant and the instant it shows. Built only through [`RunTime::asked`] (or
/// from a clock instant), so a view within [`RunTime::TOLERANCE`] of the clock is the clock
/// itself and "is this a replay" has one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTime {
    clock: DateTime<Utc>,
    view: DateTime<Utc>,
    /// A person's look (`RunTime::look`): writes nothing even at the clock's moment.
    looking: bool,
}

impl RunTime {
    /// How far an asked time may be from the clock and still be a run at the clock: a schedule
    /// fires on time and a late retry is dropped after 10 minutes (the template's
    /// MaximumEventAgeInSeconds), so further than this is a replay, or a forged payload.
    pub const TOLERANCE: Duration = Duration::minutes(5);

    /// A run at the clock's `clock`, asked to look at `asked` (none: the clock). An asked time
    /// within the tolerance is the clock's: a schedule a minute late runs at the clock.
    pub fn asked(clock: DateTime<Utc>, asked: Option<DateTime<Utc>>) -> RunTime {
        let view = asked.filter(|t| (*t - clock).abs() > Self::TOLERANCE).unwrap_or(clock);
        RunTime { clock, view, looking: false }
    }

    /// The same instants as a person's look (a dry-run `capblock scan`): it reads and reports
    /// what the rules would choose, and, like a replay, writes nothing: no settlement, market
    /// memory, prices, decisions or notices. A person's machine is not the stack's clock.
    pub fn look(self) -> RunTime {
        RunTime { looking: true, ..self }
    }

    /// The clock's instant: what settles, waits, charges and is stored.
    pub fn clock(&self) -> DateTime<Utc> {
        self.clock
    }

    /// The instant the run looks at and reports (the clock's, unless a replay).
    pub fn view(&self) -> DateTime<Utc> {
        self.view
    }

    /// A replay looks at a moment off the clock, a look is a person's: either must write nothing.
    pub fn is_replay(&self) -> bool {
        self.view != self.clock || self.looking
    }

    /// Whether this is a person's look at the clock's moment (`RunTime::look`).
    pub fn is_look(&self) -> bool {
        self.looking
    }
}

/// A live stack's run asked to look at a moment off its clock: refused, since a live run moves
/// money and money follows the clock (a forged or replayed payload).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the run's time {view} is {minutes} minutes from the clock ({clock}); a live stack runs on its clock, never on a payload's time"
)]
pub struct OffTheClock {
    pub view: DateTime<Utc>,
    pub clock: DateTime<Utc>,
    pub minutes: i64,
}

impl RunTime {
    /// The instants of a run of a stack (`live` or not) at the clock's `clock`, asked to look at
    /// `asked`: a live stack refuses a replay; a dry-run stack runs it as one, which shows the
    /// asked moment and writes nothing.
    pub fn for_stack(clock: DateTime<Utc>, asked: Option<DateTime<Utc>>, live: bool) -> Result<RunTime, OffTheClock> {
        let at = RunTime::asked(clock, asked);
        if live && at.is_replay() {
            return Err(OffTheClock { view: at.view, clock, minutes: (at.view - clock).num_minutes() });
        }
        Ok(at)
    }
}

/// A run at the clock (what every scheduled run without a replayed time is).
impl From<DateTime<Utc>> for RunTime {
    fn from(clock: DateTime<Utc>) -> RunTime {
        RunTime { clock, view: clock, looking: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_off_the_clock_is_a_replay_and_a_time_near_it_is_the_clock() {
        let clock: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().unwrap();
        let at = RunTime::asked(clock, None);
        assert_eq!((at.clock(), at.view(), at.is_replay()), (clock, clock, false));
        let late = RunTime::asked(clock, Some(clock - Duration::minutes(5)));
        assert_eq!((late.view(), late.is_replay()), (clock, false), "within the tolerance: the clock");
        let hour = clock + Duration::hours(1);
        let replay = RunTime::asked(clock, Some(hour));
        assert_eq!((replay.clock(), replay.view(), replay.is_replay()), (clock, hour, true));
        let back = RunTime::asked(clock, Some(clock - Duration::minutes(6)));
        assert!(back.is_replay());
        assert_eq!(RunTime::from(clock), at);
        // A person's look at the clock's moment writes nothing either.
        let look = at.look();
        assert_eq!((look.clock(), look.view(), look.is_replay(), look.is_look()), (clock, clock, true, true));
        assert!(!at.is_look());
    }

    /// A live stack takes its clock's time, whatever a payload says: a tick a month back is
    /// refused, a schedule a minute late runs at the clock's time.
    #[test]
    fn live_runs_never_take_the_payloads_time() {
        let clock: DateTime<Utc> = "2026-12-20T10:00:00Z".parse().unwrap();
        let month_back: DateTime<Utc> = "2026-11-20T10:00:00Z".parse().unwrap();
        let e = RunTime::for_stack(clock, Some(month_back), true).unwrap_err();
        assert!(e.to_string().contains("a live stack runs on its clock"), "{e}");
        assert_eq!(e.minutes, -30 * 24 * 60);
        let late = RunTime::for_stack(clock, Some(clock - Duration::minutes(1)), true).unwrap();
        assert_eq!(late, RunTime::from(clock));
        assert_eq!(RunTime::for_stack(clock, None, true).unwrap(), RunTime::from(clock));
        assert!(RunTime::for_stack(clock, Some(clock + Duration::minutes(6)), true).is_err());
        // Dry-run: the tick may drive what people read, as a replay; the clock stays the clock's.
        let replay = RunTime::for_stack(clock, Some(month_back), false).unwrap();
        assert_eq!((replay.view(), replay.clock(), replay.is_replay()), (month_back, clock, true));
        assert_eq!(RunTime::for_stack(clock, None, false).unwrap(), RunTime::from(clock));
    }
}
