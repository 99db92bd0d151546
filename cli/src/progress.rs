//! A progress bar for market searches, drawn on stderr only when stdout is a terminal (piped
//! or `--json` output stays clean).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use capblock_shared::domain::offering::Offering;
use capblock_shared::ports::{MarketError, OfferingQuery, OfferingSource};

/// The bar for `done` of `total` questions, `width` characters wide.
pub fn bar(done: usize, total: usize, width: usize) -> String {
    let filled = (done * width).checked_div(total).unwrap_or(width).min(width);
    format!("[{}{}] {done}/{total} questions", "#".repeat(filled), ".".repeat(width - filled))
}

/// Wraps a market and redraws the bar after each answered question.
pub struct WithProgress<'a, M: ?Sized> {
    inner: &'a M,
    done: AtomicUsize,
    total: usize,
    show: bool,
}

impl<'a, M: ?Sized> WithProgress<'a, M> {
    pub fn new(inner: &'a M, total: usize, json: bool) -> Self {
        WithProgress { inner, done: AtomicUsize::new(0), total, show: !json && std::io::stdout().is_terminal() }
    }

    /// Clears the bar before the results are printed.
    pub fn finish(&self) {
        if self.show {
            eprint!("\r{}\r", " ".repeat(60));
        }
    }
}

#[async_trait]
impl<M: OfferingSource + ?Sized> OfferingSource for WithProgress<'_, M> {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        let answer = self.inner.offerings(q).await;
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.show {
            eprint!("\r{}", bar(done, self.total, 30));
            let _ = std::io::stderr().flush();
        }
        answer
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
