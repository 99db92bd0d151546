//! A progress bar for market searches, drawn on stderr only when stdout is a terminal (piped
//! or `--json` output stays clean).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bar for `done` of `total` questions, `width` characters wide.
pub fn bar(done: usize, total: usize, width: usize) -> String {
    let filled = (done * width).checked_div(total).unwrap_or(width).min(width);
    format!("[{}{}] {done}/{total} questions", "#".repeat(filled), ".".repeat(width - filled))
}

/// Redraws the bar each time a question has its final answer (retries are not answers).
pub struct Progress {
    done: AtomicUsize,
    total: usize,
    show: bool,
}

impl Progress {
    pub fn new(total: usize, json: bool) -> Self {
        Progress { done: AtomicUsize::new(0), total, show: !json && std::io::stdout().is_terminal() }
    }

    /// One more question answered.
    pub fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.show {
            eprint!("\r{}", bar(done, self.total, 30));
            let _ = std::io::stderr().flush();
        }
    }

    /// Clears the bar before the results are printed.
    pub fn finish(&self) {
        if self.show {
            eprint!("\r{}\r", " ".repeat(60));
        }
    }
}

/// The seconds a wait has lasted, redrawn every second on stderr (when stdout is a terminal)
/// until dropped: for a wait whose steps the command cannot see (a scan's asking).
pub struct Ticker {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Ticker {
    /// Starts `what` (e.g. "scanning"), which takes at most `most`.
    pub fn start(what: &str, most: std::time::Duration, json: bool) -> Ticker {
        if json || !std::io::stdout().is_terminal() {
            return Ticker { task: None };
        }
        let what = what.to_string();
        let task = tokio::spawn(async move {
            let started = std::time::Instant::now();
            loop {
                eprint!("\r{what}: {:.0} s (at most {:.0} s)", started.elapsed().as_secs_f64(), most.as_secs_f64());
                let _ = std::io::stderr().flush();
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
        Ticker { task: Some(task) }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            eprint!("\r{}\r", " ".repeat(60));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bar;

    #[test]
    fn draws_the_fraction_done() {
        assert_eq!(bar(0, 4, 8), "[........] 0/4 questions");
        assert_eq!(bar(1, 4, 8), "[##......] 1/4 questions");
        assert_eq!(bar(4, 4, 8), "[########] 4/4 questions");
        assert_eq!(bar(0, 0, 4), "[####] 0/0 questions");
    }
}
