//! Writes the demo story's team page (the unit tests' fixture) to the file named by the first
//! argument: what `make test-page` loads in Chromium and `docs/team-page.png` shows.

#[path = "../src/fixture.rs"]
mod fixture;

fn main() {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: demo_page OUT.html");
        std::process::exit(2);
    };
    let page = capblock_page::render(&fixture::fixture());
    if let Err(e) = std::fs::write(&out, page) {
        eprintln!("{out}: {e}");
        std::process::exit(1);
    }
    println!("demo team page written to {out}");
}
