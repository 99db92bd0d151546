//! Progress on stderr for the waits a person sits through (indicatif), drawn only when stdout is
//! a terminal: piped or `--json` output stays clean, and nothing is drawn into a log.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether a person is watching: stdout a terminal, and not asked for JSON.
fn watched(json: bool) -> bool {
    !json && std::io::stdout().is_terminal()
}

fn bar(len: Option<u64>, template: &str, json: bool) -> ProgressBar {
    if !watched(json) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    // The templates are constants: one that does not parse is a bug, caught by the tests.
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(with_durations(style));
    bar
}

/// `{elapsed}` and `{eta}` in capblock's one duration style (`domain::duration`), not
/// indicatif's own.
fn with_durations(style: ProgressStyle) -> ProgressStyle {
    use capblock_shared::domain::duration::compact_std;
    style.with_key("elapsed", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = w.write_str(&compact_std(s.elapsed()));
    })
}

/// The fewest answers an estimate of the time left is made from: the first answers come in a
/// burst (the describe pace's first tokens), and an estimate from one or two said "about 0s
/// left" while the wait went on.
const SAMPLES: u64 = 3;

/// The estimate of the time left, said the same from one redraw to the next: the whole wait's
/// length is projected at each answer from the average pace so far, smoothed with the previous
/// projection (one fast or slow answer moves it a little), and the time left counts down to it
/// between answers. Past the projection, or within a second of it, the wait is `finishing`, never
/// "about 0s left". A pure function of the answers and the time: the tests give it the clock.
#[derive(Debug, Default)]
struct Estimate {
    /// The answers the projection was last made at.
    done: u64,
    /// The whole wait's projected length, once there are `SAMPLES` answers.
    total: Option<Duration>,
}

impl Estimate {
    /// What is said with `done` of `total` answered after `elapsed`.
    fn said(&mut self, done: u64, total: u64, elapsed: Duration) -> String {
        if done >= total {
            return "done".into();
        }
        if done < SAMPLES {
            return "estimating the time left".into();
        }
        if done != self.done {
            // `done >= SAMPLES > 0` here.
            let projected = elapsed.mul_f64(total as f64 / done as f64);
            self.total = Some(match self.total {
                Some(before) => before.mul_f64(0.7) + projected.mul_f64(0.3),
                None => projected,
            });
            self.done = done;
        }
        match self.total.map(|t| t.saturating_sub(elapsed)) {
            Some(left) if left >= Duration::from_secs(1) => format!("about {} left", say_left(left)),
            _ => "finishing".into(),
        }
    }
}

/// The time left, rounded up to 5 seconds (a minute past 10 minutes): a count that ticks every
/// redraw reads as more precise than the estimate is.
fn say_left(left: Duration) -> String {
    let step = if left > Duration::from_secs(600) { 60 } else { 5 };
    let secs = left.as_secs().div_ceil(step) * step;
    capblock_shared::domain::duration::compact_std(Duration::from_secs(secs))
}

/// `style` with `{left}`: the time left as `Estimate` says it.
fn with_estimate(style: ProgressStyle) -> ProgressStyle {
    let estimate = std::sync::Arc::new(std::sync::Mutex::new(Estimate::default()));
    style.with_key("left", move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let said = match estimate.lock() {
            Ok(mut e) => e.said(s.pos(), s.len().unwrap_or(0), s.elapsed()),
            Err(_) => String::new(),
        };
        let _ = w.write_str(&said);
    })
}

/// The questions of a market search, one tick per final answer (retries are not answers), with
/// the time taken and an estimate of the time left.
pub struct Progress(ProgressBar);

/// `offerings`' bar: questions answered of all, elapsed, and the estimate left.
const QUESTIONS: &str = "[{bar:30}] {pos}/{len} questions, {elapsed} ({left})";

impl Progress {
    pub fn new(total: usize, json: bool) -> Self {
        let bar = bar(Some(total as u64), QUESTIONS, json);
        bar.set_style(with_estimate(with_durations(
            ProgressStyle::with_template(QUESTIONS).unwrap_or_else(|_| ProgressStyle::default_bar()),
        )));
        // Drawn from the first second, and its clock moves while a single question waits.
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(250));
        }
        Progress(bar)
    }

    /// A line on stderr, in any format: above the bar when one is drawn, so neither is torn.
    pub fn say(&self, line: &str) {
        self.0.suspend(|| eprintln!("{}", crate::table::safe(line)));
    }

    /// One more question answered.
    pub fn tick(&self) {
        self.0.inc(1);
    }

    /// Clears the bar before the results are printed.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// A wait whose steps the command cannot see (a scan's asking): a spinner with the time so far
/// and the most it takes, until dropped.
pub struct Ticker(ProgressBar);

const WAITING: &str = "{spinner} {msg}: {elapsed}";

impl Ticker {
    /// Starts `what` (e.g. "scanning"), which takes at most `most`.
    pub fn start(what: &str, most: Duration, json: bool) -> Ticker {
        let t = bar(None, WAITING, json);
        t.set_message(format!("{what} (at most {})", capblock_shared::domain::duration::compact_std(most)));
        t.enable_steady_tick(Duration::from_millis(250));
        Ticker(t)
    }
}

impl Ticker {
    /// Starts `what`, whose length nobody knows in advance: the time so far only.
    pub fn waiting(what: &str, json: bool) -> Ticker {
        let t = bar(None, WAITING, json);
        t.set_message(what.to_string());
        t.enable_steady_tick(Duration::from_millis(250));
        Ticker(t)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse() {
        for t in [QUESTIONS, WAITING] {
            assert!(ProgressStyle::with_template(t).is_ok(), "{t}");
        }
    }

    /// The time left as a person watching 10 questions sees it, on a simulated clock: nothing
    /// until 3 answers, then a count that only goes down between answers, moves little at an
    /// answer, and says `finishing` (never "about 0s left") once the wait outlasts it.
    #[test]
    fn the_time_left_waits_for_answers_counts_down_and_never_says_0s() {
        let at = |s: u64| Duration::from_secs(s);
        let mut e = Estimate::default();
        // The first answers come at once: no estimate from them.
        assert_eq!(e.said(0, 10, at(0)), "estimating the time left");
        assert_eq!(e.said(2, 10, at(1)), "estimating the time left");
        // 3 answers in 30 s: 100 s in all, 70 s left, counting down between answers.
        assert_eq!(e.said(3, 10, at(30)), "about 1m 10s left");
        assert_eq!(e.said(3, 10, at(50)), "about 50s left");
        // A slow answer moves the projection a little (0.7 x 100 + 0.3 x 137.5 = 111.25 s).
        assert_eq!(e.said(4, 10, at(55)), "about 1m left");
        assert_eq!(e.said(4, 10, at(110)), "about 5s left");
        // The wait goes on past the projection: finishing, not "about 0s left".
        assert_eq!(e.said(4, 10, at(111)), "finishing");
        assert_eq!(e.said(4, 10, at(200)), "finishing");
        assert_eq!(e.said(10, 10, at(210)), "done");
        // Rounded up to 5 s, and to the minute past 10 minutes.
        assert_eq!(say_left(at(1)), "5s");
        assert_eq!(say_left(at(601)), "11m");
    }

    #[test]
    fn json_output_draws_nothing() {
        assert!(Progress::new(3, true).0.is_hidden());
        assert!(Ticker::start("scanning", Duration::from_secs(5), true).0.is_hidden());
    }
}
