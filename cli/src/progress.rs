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
    style
        .with_key("elapsed", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&compact_std(s.elapsed()));
        })
        .with_key("eta", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&compact_std(s.eta()));
        })
}

/// The questions of a market search, one tick per final answer (retries are not answers), with
/// the time taken and an estimate of the time left.
pub struct Progress(ProgressBar);

/// `offerings`' bar: questions answered of all, elapsed, and the estimate left.
const QUESTIONS: &str = "[{bar:30}] {pos}/{len} questions, {elapsed} (about {eta} left)";

impl Progress {
    pub fn new(total: usize, json: bool) -> Self {
        let bar = bar(Some(total as u64), QUESTIONS, json);
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

    #[test]
    fn json_output_draws_nothing() {
        assert!(Progress::new(3, true).0.is_hidden());
        assert!(Ticker::start("scanning", Duration::from_secs(5), true).0.is_hidden());
    }
}
