//! `capblock page`: the team page (`capblock-page`) written to a file from what the table holds
//! now, and opened in a browser on `--open`.

use capblock_shared::app::team_page::gather;
use clap::Args;

use crate::context::{CliError, CliResult, clock_now, store, team_approvals};
use crate::progress::Ticker;

#[derive(Args)]
#[command(after_help = "Examples:\n  capblock page                       # writes team.html here\n  \
capblock page --out /tmp/team.html --open\n  capblock --profile prod page --out prod-team.html\n\n\
One self-contained HTML file: the calendar of blocks 8 weeks ahead, budgets burning down, price \
history per rule with what capblock bought, approvals waiting (with the `capblock approve` line to \
copy), people's requests (open and closed, who filed each and why), use and the month's report, and \
the market over the last 90 days. It makes no request: \
open it from disk, mail it, or put it in a bucket. It is read-only: nothing is bought from it.\n\
Exit codes: 0 written, 1 store failure or the file could not be written.")]
pub struct PageArgs {
    /// Where to write the page.
    #[arg(long, default_value = "team.html", value_name = "FILE")]
    out: String,
    /// Open the page with the system's opener (xdg-open, open, start) once written.
    #[arg(long)]
    open: bool,
}

pub async fn run(a: PageArgs) -> CliResult {
    let now = clock_now().await?;
    let store = store().await?;
    // The blocks are a table scan and every rule's prices a query: on a big table this takes a
    // few seconds, said on stderr once it has taken two.
    let teams = team_approvals()?;
    let work = gather(&store, now, &teams);
    tokio::pin!(work);
    let data = tokio::select! {
        r = &mut work => r?,
        () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {
            let _ticker = Ticker::waiting("reading the table for the page", false);
            work.await?
        }
    };
    for note in &data.month.skipped {
        eprintln!("note: {note}");
    }
    let html = capblock_page::render(&data);
    std::fs::write(&a.out, &html).map_err(|e| CliError::Failed(format!("{}: {e}", a.out)))?;
    eprintln!("team page written to {} ({} KB)", a.out, html.len().div_ceil(1024));
    if a.open {
        open(&a.out);
    }
    Ok(())
}

/// The system's way to open a file in its default browser, if this machine has one.
fn opener() -> Option<(&'static str, &'static [&'static str])> {
    if cfg!(target_os = "macos") {
        Some(("open", &[]))
    } else if cfg!(windows) {
        Some(("cmd", &["/C", "start", ""]))
    } else if cfg!(unix) {
        Some(("xdg-open", &[]))
    } else {
        None
    }
}

/// Opens `path`; a machine without an opener (a server, a container) is told how to look at it.
fn open(path: &str) {
    let Some((program, args)) = opener() else {
        eprintln!("no way to open a browser on this system: open {path} yourself");
        return;
    };
    match std::process::Command::new(program).args(args).arg(path).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("{program} could not open {path} ({s}): open it in a browser yourself"),
        Err(e) => eprintln!("cannot run {program} ({e}): no browser here? Copy {path} to a machine with one"),
    }
}
