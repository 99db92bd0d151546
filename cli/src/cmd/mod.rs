//! The commands, one file each. This module holds only the command line's shape and the
//! dispatch; each command's arguments and work live in its own file, and what they share in
//! `crate::context`.

mod approvals;
mod approve;
mod backtest;
mod blocks;
mod buy;
mod docs;
mod history;
mod intents;
mod offerings;
mod page;
mod preflight;
mod rates;
mod report;
mod request;
mod requests;
mod rules;
mod scan;
mod status;

use clap::{Parser, Subcommand};

use crate::context::CliResult;

#[derive(Parser)]
#[command(
    name = "capblock",
    version,
    about = "Operate capblock: search the Capacity Blocks market, manage purchase rules, run a scan.",
    long_about = "Operate capblock: search the EC2 Capacity Blocks market, manage purchase rules and run a \
scan by hand.\n\nIt uses the standard AWS configuration (profile, region, credentials) and the same \
endpoint settings as the functions: AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_DYNAMODB, ... point it at a \
local stack (see `infra/local/stack.sh env`). Commands that use the stack's table find it by \
--stack NAME (the stack's outputs), or CAPBLOCK_TABLE.\n\n\
Exit codes: 0 success, 1 AWS or store failure, 2 bad input (usage, invalid rule), 3 nothing found.",
    after_help = "Examples:\n  capblock --stack capblock status\n  capblock offerings --types p5.48xlarge --counts 1,2 --days 1-7 --regions us-east-1,us-west-2\n  \
capblock rules validate infra/examples/rules/p5-weekly.toml\n  capblock rules put infra/examples/rules/*.toml\n  \
capblock rules delete p5-weekly\n  \
capblock scan --time 2026-12-03T00:00:00Z\n  capblock blocks --all\n  \
capblock history --region us-west-2 --type p5.48xlarge --chart prices.svg --rule infra/examples/rules/p5-weekly.toml\n  \
capblock backtest --rule infra/examples/rules/p5-weekly.toml\n  capblock approvals\n  capblock approve p5-weekly/cb-0123456789abcdef0\n  \
capblock request --type p5.48xlarge --count 2 --days 3 --region us-east-2 --from 2026-12-10 --until 2026-12-20 \
--max-price 4.10 --team research --reason \"paper deadline\"\n  capblock requests approve rq-7f3a2c9b01de\n  \
capblock buy cb-0123456789abcdef0 --rule p5-weekly\n  \
capblock status\n  capblock report --month 2026-12\n  capblock page --out team.html --open\n  capblock preflight\n  capblock intents list\n  \
capblock --profile prod status -o json\n  capblock completions bash > ~/.local/share/bash-completion/completions/capblock\n  \
capblock man > ~/.local/share/man/man1/capblock.1"
)]
pub struct Cli {
    /// The deployed stack to act on (the name `sam deploy` used).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "CAPBLOCK_STACK_NAME",
        value_name = "NAME",
        long_help = "The deployed stack to act on (the name `sam deploy` used): its table comes from the \
stack's CloudFormation outputs, its mode, budgets and topics from the table. Default: CAPBLOCK_STACK_NAME, \
else the profile's `stack` (--profile), else the table CAPBLOCK_TABLE names, else `stack = \"NAME\"` in the \
config file (CAPBLOCK_CONFIG, else ~/.config/capblock/config.toml)."
    )]
    stack: Option<String>,
    /// A named profile of the config file: its stack, region and AWS profile.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "CAPBLOCK_PROFILE",
        value_name = "NAME",
        long_help = "A named profile of the config file (CAPBLOCK_CONFIG, else ~/.config/capblock/config.toml), \
a table `[profile.NAME]` with any of `stack`, `region` and `aws_profile`: the stack to act on (--stack still \
wins), the AWS region and the AWS profile (of ~/.aws/config) to act with, over AWS_REGION and AWS_PROFILE. \
A profile the file does not have is an error that names the file and the profiles it has."
    )]
    profile: Option<String>,
    /// Also show times in the local time zone (TZ), after the UTC time.
    #[arg(long, global = true, help_heading = "Global options")]
    tz: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Search the market now: every region x type x count x duration, cheapest per accelerator-hour first.
    Offerings(offerings::OfferingsArgs),
    /// Validate, store and list purchase rules (TOML files; see docs/rules.md).
    #[command(
        subcommand,
        after_help = "Examples:\n  capblock rules validate infra/examples/rules/*.toml\n  \
capblock rules put infra/examples/rules/p5-weekly.toml\n  capblock rules list\n  \
capblock rules show p5-weekly > p5-weekly.toml   # edit it, then put it back:\n  \
capblock rules put p5-weekly.toml                 # shows what changed\n  \
capblock rules show p5-weekly | capblock rules put -\n  capblock rules disable p5-weekly\n  \
capblock rules delete p5-weekly"
    )]
    Rules(rules::RulesCommand),
    /// Run one scan-and-buy pass exactly as the scan-offerings function does, and print it.
    Scan(scan::ScanArgs),
    /// List blocks: state, payment deadline, start, end, time left, next reminder.
    Blocks(blocks::BlocksArgs),
    /// Price history from the observations every scan stores; optionally an SVG chart.
    History(history::HistoryArgs),
    /// Replay a rule over a price history: what it would have bought, when, at what price.
    Backtest(backtest::BacktestArgs),
    /// List the decisions approval-mode rules are waiting on, with the intent `approve` takes.
    Approvals(approvals::ApprovalsArgs),
    /// Buy a decision an approval-mode rule is waiting on (re-checks the offering first).
    Approve(approve::ApproveArgs),
    /// Buy one offering `capblock offerings` showed, for a rule (its budgets and limits; asks first).
    Buy(buy::BuyArgs),
    /// One screen: mode, rules, open blocks, this month's spend, the last scan, the dashboard.
    Status(status::StatusArgs),
    /// A month's spend per rule and team beside its budget, and what the blocks were used for.
    Report(report::ReportArgs),
    /// Write the team page: one HTML file with the calendar, budgets, prices, approvals, use, market.
    Page(page::PageArgs),
    /// Check the stack in its account before switching it to live: settings, alerts, market, blocks.
    Preflight(preflight::PreflightArgs),
    /// Purchases whose outcome is open; release one whose answer was lost and that EC2 does not hold.
    #[command(subcommand)]
    Intents(intents::IntentsCommand),
    /// Ask for capacity: file a request under your AWS identity; says what it would cost first.
    Request(request::RequestArgs),
    /// People's requests: list, show, approve (typed yes), reject, cancel.
    #[command(
        subcommand,
        after_help = "Examples:\n  capblock requests list\n  capblock requests show rq-7f3a2c9b01de\n  \
capblock requests approve rq-7f3a2c9b01de\n  capblock requests reject rq-7f3a2c9b01de --reason \"over the quarter's plan\"\n  \
capblock requests cancel rq-7f3a2c9b01de"
    )]
    Requests(requests::RequestsCommand),
    /// The list rates rules are judged by: published, and those AWS announced ahead.
    #[command(subcommand)]
    Rates(rates::RatesCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(docs::CompletionsArgs),
    /// Print capblock's manual page (roff) to stdout.
    Man(docs::ManArgs),
}

/// The global options, given once on `capblock --help`: each subcommand's page names them in one
/// line instead of repeating their 15 lines.
const GLOBALS: [&str; 3] = ["stack", "profile", "tz"];

/// The command line as `--help` shows it: the global options described on the top page only,
/// hidden from every other (a line there points to the top page), and each example too long for
/// the help's width continued on lines of its own, indented, with a `\` where the shell reads on
/// (`wrap_examples`). Completions and manual pages are made from `Cli` itself.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let width = help_width();
    let globals: Vec<String> = GLOBALS
        .iter()
        .filter_map(|g| cmd.get_arguments().find(|a| a.get_id() == *g))
        .map(|a| describe(a, width))
        .collect();
    // Hidden before the command is built: each subcommand's copy of a global option is made
    // from this one, hidden too.
    for g in GLOBALS {
        cmd = cmd.mut_arg(g, |a| a.hide(true));
    }
    let after = cmd.get_after_help().map(ToString::to_string).unwrap_or_default();
    cmd = cmd.after_help(format!(
        "{}\n\nGlobal options (before or after the command):\n{}",
        wrap_examples(&after, width),
        globals.join("\n")
    ));
    let subcommands: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in subcommands {
        cmd = cmd.mut_subcommand(name, |s| on_a_subcommand_page(s, width));
    }
    cmd
}

/// The command line, parsed as `command` shows it.
pub fn parse() -> Cli {
    use clap::FromArgMatches;
    Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit())
}

/// A global option as the top page describes it: its flag, then its help and its variable
/// indented below, wrapped to `width` (clap would start a wrapped line at column 0).
fn describe(a: &clap::Arg, width: usize) -> String {
    let names = a.get_value_names().filter(|_| a.get_action().takes_values());
    let value = names.map(|v| v.iter().map(|n| format!(" <{n}>")).collect::<String>()).unwrap_or_default();
    let help = a.get_long_help().or(a.get_help()).map(ToString::to_string).unwrap_or_default();
    let env = a.get_env().map(|e| format!(" [env: {}]", e.to_string_lossy())).unwrap_or_default();
    let text = crate::table::wrap(&format!("{help}{env}"), width.saturating_sub(8).max(20));
    let body: Vec<String> = text.lines().map(|l| format!("        {l}")).collect();
    format!("  --{}{value}\n{}", a.get_long().unwrap_or_default(), body.join("\n"))
}

/// A subcommand's page (and its own subcommands'): its examples wrapped, a line pointing to the
/// global options.
fn on_a_subcommand_page(mut s: clap::Command, width: usize) -> clap::Command {
    let pointer = "Global options (--stack, --profile, --tz): see `capblock --help`.";
    let after = s.get_after_help().map(|h| format!("{h}\n\n{pointer}")).unwrap_or_else(|| pointer.to_string());
    s = wrap_after_help(s.after_help(after), width);
    let nested: Vec<String> = s.get_subcommands().map(|c| c.get_name().to_string()).collect();
    for name in nested {
        s = s.mut_subcommand(name, |c| on_a_subcommand_page(c, width));
    }
    s
}

fn wrap_after_help(c: clap::Command, width: usize) -> clap::Command {
    match c.get_after_help().map(|h| wrap_examples(&h.to_string(), width)) {
        Some(text) => c.after_help(text),
        None => c,
    }
}

/// The width clap wraps help to (`wrap_help`): the terminal's, else `COLUMNS`, else 100, at
/// most 100.
fn help_width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok());
    terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)).or(columns).unwrap_or(100).min(100)
}

/// `text` with each example line (two spaces, then a command) longer than `width` broken between
/// its words: continued on lines indented by six spaces, each break but one in a comment marked
/// with ` \` so the lines still paste as one command; a quoted argument is never broken. clap
/// wraps what is left (prose) itself, and would have started an example's rest at column 0.
pub fn wrap_examples(text: &str, width: usize) -> String {
    // The examples: the lines after "Examples:" up to the first empty one.
    let mut in_examples = false;
    text.lines()
        .map(|line| {
            in_examples = (in_examples && !line.trim().is_empty()) || line.trim_end() == "Examples:";
            match line.strip_prefix("  ") {
                Some(rest) if in_examples && line.chars().count() > width && !rest.starts_with(' ') => {
                    wrap_example(rest, width)
                }
                _ => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One example, broken as `wrap_examples` says.
fn wrap_example(example: &str, width: usize) -> String {
    let mut lines = vec![String::from("  ")];
    let mut in_comment = false;
    for word in shell_words(example) {
        let last = lines.len() - 1;
        let fresh = lines[last].trim().is_empty();
        // Room for the word and, outside a comment, the ` \` that continues the line.
        let room = width.saturating_sub(if in_comment { 0 } else { 2 });
        if !fresh && lines[last].chars().count() + 1 + word.chars().count() > room {
            if !in_comment {
                lines[last].push_str(" \\");
            }
            lines.push(String::from("      "));
        } else if !fresh {
            lines[last].push(' ');
        }
        in_comment |= word.starts_with('#');
        let at = lines.len() - 1;
        lines[at].push_str(&word);
    }
    lines.join("\n")
}

/// `example`'s words between spaces, a quoted span ('...' or "...") kept in one word.
fn shell_words(example: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    for c in example.chars() {
        match (quote, c) {
            (None, ' ') => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                continue;
            }
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
        word.push(c);
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

pub async fn run(cli: Cli) -> CliResult {
    crate::stack::name(cli.stack);
    crate::table::show_local_time(cli.tz);
    // The generated documents need no config file (nor a good one).
    if !matches!(cli.command, Command::Completions(_) | Command::Man(_)) {
        crate::stack::choose_profile(cli.profile)?;
    }
    let money = match &cli.command {
        Command::Scan(_) | Command::Buy(_) | Command::Approve(_) => true,
        Command::Intents(c) => c.moves_money(),
        Command::Requests(requests::RequestsCommand::Approve(_)) => true,
        _ => false,
    };
    if money {
        crate::context::moves_money();
    }
    match cli.command {
        Command::Offerings(a) => offerings::run(a).await,
        Command::Rules(r) => rules::run(r).await,
        Command::Scan(a) => scan::run(a).await,
        Command::Blocks(a) => blocks::run(a).await,
        Command::History(a) => history::run(a).await,
        Command::Backtest(a) => backtest::run(a).await,
        Command::Approvals(a) => approvals::run(a).await,
        Command::Approve(a) => approve::run(a).await,
        Command::Buy(a) => buy::run(a).await,
        Command::Status(a) => status::run(a).await,
        Command::Report(a) => report::run(a).await,
        Command::Page(a) => page::run(a).await,
        Command::Preflight(a) => preflight::run(a).await,
        Command::Intents(c) => intents::run(c).await,
        Command::Request(a) => request::run(a).await,
        Command::Requests(c) => requests::run(c).await,
        Command::Rates(c) => rates::run(c).await,
        Command::Completions(a) => docs::completions(&a),
        Command::Man(a) => docs::man(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::EXIT_INVALID;

    /// An example too long for the help's width goes on indented lines that paste as one
    /// command; a quoted argument stays whole; a comment is continued without a `\`.
    #[test]
    fn a_long_example_is_continued_indented() {
        let text = "Examples:\n  capblock offerings --types p5.48xlarge --regions us-east-1 -o json | jq -r '.offerings[0].offering.id'\n  capblock blocks\nProse stays as it is, clap wraps it.";
        let wrapped = wrap_examples(text, 60);
        assert_eq!(
            wrapped,
            "Examples:\n  capblock offerings --types p5.48xlarge --regions \\\n      us-east-1 -o json | jq -r \\\n      '.offerings[0].offering.id'\n  capblock blocks\nProse stays as it is, clap wraps it."
        );
        let comment =
            "Examples:\n  capblock blocks --time 2026-12-10T00:00:00Z   # as seen at a simulated market's time";
        assert_eq!(
            wrap_examples(comment, 60),
            "Examples:\n  capblock blocks --time 2026-12-10T00:00:00Z # as seen at a\n      simulated market's time"
        );
    }

    /// Bad offerings arguments are usage errors (exit 2, clap's code), named, before any call.
    #[test]
    fn bad_offerings_arguments_are_usage_errors() {
        let args = |extra: &[&str]| {
            let mut v = vec!["capblock", "offerings", "--types", "p5.48xlarge", "--regions", "us-east-1"];
            v.extend_from_slice(extra);
            Cli::try_parse_from(v)
        };
        assert!(args(&["--counts", "1,64", "--days", "1-7"]).is_ok());
        for (bad, named) in [
            (vec!["--counts", "4294967295"], "--counts"),
            (vec!["--counts", "0"], "--counts"),
            (vec!["--counts", "65"], "--counts"),
            (vec!["--days", "x"], "--days"),
            (vec!["--days", "0-3"], "--days"),
            (vec!["--days", "15"], "--days"),
            (vec!["--regions", "mars"], "--regions"),
            (vec!["--types", "p5"], "--types"),
        ] {
            let Err(e) = args(&bad) else { panic!("{bad:?} accepted") };
            assert_eq!(e.exit_code(), i32::from(EXIT_INVALID), "{bad:?}");
            assert!(e.to_string().contains(named), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
