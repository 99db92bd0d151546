//! `capblock-verify`: the purchase protocol's model checked to a bound, with the figures, and
//! the path to any state that breaks a property.

use std::process::ExitCode;
use std::time::Instant;

use capblock_verify::{Bounds, Protocol, Sabotage};
use stateright::{Checker, HasDiscoveries, Model};

const HELP: &str = "capblock-verify: checks capblock's purchase protocol exhaustively (stateright)

usage: capblock-verify [--bound NAME] [--sabotage NAME] [--threads N] [--seconds N]

  --bound      how far to look: bounded (make test: two scans, a replay, two offerings, and
               one of each fault), ultraservers (make test: purchases of two parts whose
               payment may fail), budgets (make test: two rules whose account has room for
               one purchase), deep (make verify: a scan and capblock buy with every fault)
               deep-ultraservers (make verify: two scans of two-part purchases) and release
               (make test: a person's `capblock intents release` beside two scans), stale
               (make test: EC2's answers missing a listed reservation for a while), requests
               (make test: a person's request beside a rule, approved twice, cancelled),
               deep-requests (make verify: with a 12-hour step and a failed payment),
               segments (make test: purchases of a segmented offering's two segments) and
               deep-segments (make verify: two scans of them)
  --sabotage   put a known protocol bug back and show the path the checker finds to it:
               release-sent-on-timer, charge-after-purchase, settle-on-replayed-clock,
               release-per-part, gone-as-failed, give-back-unknown-answers, ignore-held-blocks,
               unlisted-part-failed, kept-fee-not-held, closed-intent-held-uncharged,
               release-without-hold, request-state-unchecked, approval-not-consumed,
               cancel-unchecked-at-reserve, segment-paid-alone
  --threads    checker threads (default 1: the path printed is then a shortest one)
  --seconds    stop after this long (the figures then cover part of the bound only)

Exit status: 0 when every property holds in every state within the bound, 1 when one breaks
(its shortest path is printed), 2 for a usage error.";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    // One thread by default: the first broken state it meets is a shallowest one, so the path
    // printed is a shortest one (threads racing may each record theirs).
    let (mut bounds, mut name, mut sabotage, mut threads) = (Bounds::bounded(), "bounded", None, 1);
    let mut seconds = None;
    while let Some(arg) = args.next() {
        let value = |args: &mut dyn Iterator<Item = String>| args.next().unwrap_or_default();
        match arg.as_str() {
            "--bound" => {
                let v = value(&mut args);
                match bound(&v) {
                    Some(b) => (bounds, name) = b,
                    None => return usage(&format!("unknown bound {v:?}")),
                }
            }
            "--sabotage" => {
                let v = value(&mut args);
                match Sabotage::parse(&v) {
                    Some(s) => sabotage = Some(s),
                    None => return usage(&format!("unknown sabotage {v:?}")),
                }
            }
            "--seconds" => match value(&mut args).parse::<u64>() {
                Ok(n) if n > 0 => seconds = Some(std::time::Duration::from_secs(n)),
                _ => return usage("--seconds takes a number above 0"),
            },
            "--threads" => match value(&mut args).parse() {
                Ok(n) if n > 0 => threads = n,
                _ => return usage("--threads takes a number above 0"),
            },
            "-h" | "--help" => {
                println!("{HELP}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    let mut model = Protocol::new(bounds);
    if let Some(s) = sabotage {
        model = model.with(s);
    }
    let properties: Vec<&str> = model.properties().iter().map(|p| p.name).collect();
    let started = Instant::now();
    let mut builder = model.checker().threads(threads);
    if let Some(limit) = seconds {
        builder = builder.timeout(limit);
    }
    // Stop at the first state that breaks a property: breadth first, its path is a shortest
    // one (a checker that went on would report the last such state it met instead).
    let checker = builder.finish_when(HasDiscoveries::AnyFailures).spawn_bfs().join();
    let secs = started.elapsed().as_secs_f64();
    let partial = if checker.is_done() { "" } else { " (stopped by --seconds: not exhaustive)" };
    println!(
        "bound {name}{}: {} states ({} distinct), depth {}, {secs:.1} s{partial}",
        sabotage.map(|s| format!(" with {}", s.name())).unwrap_or_default(),
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth()
    );
    let broken_any = properties.iter().any(|p| checker.discovery(p).is_some());
    let mut broken = false;
    for p in properties {
        match checker.discovery(p) {
            None if broken_any => println!("  -       {p} (not looked at past the first break)"),
            None => println!("  holds   {p}"),
            Some(path) => {
                broken = true;
                println!("  BROKEN  {p}\n    shortest path:");
                for (state, action) in path.into_vec() {
                    if let Some(a) = action {
                        println!("      {}", checker.model().describe(&state, &a));
                    }
                }
            }
        }
    }
    if broken { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// The bound `--bound` names, with its name as printed.
fn bound(name: &str) -> Option<(Bounds, &'static str)> {
    Some(match name {
        "bounded" => (Bounds::bounded(), "bounded"),
        "ultraservers" => (Bounds::ultraservers(), "ultraservers"),
        "budgets" => (Bounds::budgets(), "budgets"),
        "deep" => (Bounds::deep(), "deep"),
        "deep-ultraservers" => (Bounds::deep_ultraservers(), "deep-ultraservers"),
        "segments" => (Bounds::segments(), "segments"),
        "deep-segments" => (Bounds::deep_segments(), "deep-segments"),
        "release" => (Bounds::release(), "release"),
        "stale" => (Bounds::stale(), "stale"),
        "requests" => (Bounds::requests(), "requests"),
        "deep-requests" => (Bounds::deep_requests(), "deep-requests"),
        _ => return None,
    })
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("capblock-verify: {problem}\n\n{HELP}");
    ExitCode::from(2)
}
