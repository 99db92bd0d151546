//! `capblock rules`: validate, store, list, show, enable, disable and delete purchase rules.

use capblock_shared::app::handoff::{launch_gaps, unknown_groups, unknown_nodegroups};
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::eks::Eks;
use capblock_shared::domain::list_price;
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::RuleStore;
use clap::Subcommand;

use crate::context::{CliError, CliResult, load_rule, plain, sdk, store};
use crate::output::OutputArgs;
use crate::table::{self, Column};

#[derive(Subcommand)]
pub enum RulesCommand {
    /// Check rule files and print every problem with its field; exit 2 if any is invalid.
    /// Offline: with --check-aws, the Auto Scaling groups `scale_group` actions name and the EKS
    /// node groups `scale_nodegroup` actions name must also exist in each of the rule's regions
    /// (asked of AWS with your credentials).
    #[command(after_help = "Examples:\n  capblock rules validate infra/examples/rules/*.toml\n  \
capblock rules validate infra/examples/invalid-rule.toml   # every problem, with its field\n  \
capblock rules validate --check-aws p5-weekly.toml        # the groups its actions name exist\n  \
capblock rules show p5-weekly | capblock rules validate -\n\n\
A valid rule may still be said with warnings: a threshold below today's list price, a max_total_fee \
below one block at the threshold or the list. Offline, the list is the published table; `rules put` \
and preflight also read the rates announced in the stack (`capblock rates`).\n\
Exit codes: 0 every file valid, 1 AWS failure (--check-aws), 2 a file invalid.")]
    Validate {
        /// The rule files (TOML); `-` reads one from stdin.
        #[arg(required = true)]
        files: Vec<String>,
        /// Also ask AWS whether the Auto Scaling groups and EKS node groups the actions name exist.
        #[arg(long)]
        check_aws: bool,
        /// Accepted for scripts written before: validation is offline unless --check-aws.
        #[arg(long, hide = true)]
        offline: bool,
    },
    /// Validate and store rule files (creates or replaces, with a version check): a rule stored
    /// already is said unchanged, or its changes are shown as a diff.
    #[command(after_help = "Examples:\n  capblock rules put infra/examples/rules/*.toml\n  \
capblock rules show p5-weekly > p5.toml && $EDITOR p5.toml && capblock rules put p5.toml\n  \
capblock rules show p5-weekly | sed 's/^enabled = true/enabled = false/' | capblock rules put -\n\n\
Exit codes: 0 stored (or unchanged), 1 store failure, 2 an invalid file (none is stored).")]
    Put {
        /// The rule files (TOML); `-` reads one from stdin. None is stored unless all are valid.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// List stored rules.
    #[command(
        after_help = "Examples:\n  capblock rules list\n  capblock rules list -o wide   # enabled, mode and version apart\n  \
capblock rules list -o json | jq -r '.[].rule.id'"
    )]
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show a stored rule as the TOML file `rules put` takes (edit it and put it back); `-o json`
    /// or `-o yaml` print the same fields.
    #[command(after_help = "Examples:\n  capblock rules show p5-weekly\n  \
capblock rules show p5-weekly > p5-weekly.toml   # edit it, then: capblock rules put p5-weekly.toml\n  \
capblock rules show p5-weekly -o json")]
    Show {
        id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Enable a stored rule.
    #[command(after_help = "Examples:\n  capblock rules enable p5-weekly")]
    Enable { id: String },
    /// Disable a stored rule (the scan skips it).
    #[command(after_help = "Examples:\n  capblock rules disable p5-weekly\n\n\
Its blocks are still tracked and its budgets kept; `capblock rules enable` starts it again.")]
    Disable { id: String },
    /// Delete a stored rule. Only the rule goes: its blocks are still tracked to their end, its
    /// purchase intents settled and its budgets kept (a rule put again under the same id finds
    /// this month's spending and purchases as they were). To stop it for a while, `disable` it.
    #[command(
        after_help = "Examples:\n  capblock rules show p5-weekly > p5-weekly.toml   # keep it, to put it back\n  \
capblock rules delete p5-weekly"
    )]
    Delete { id: String },
}

fn no_rule(id: &str) -> CliError {
    CliError::NotFound(format!("no rule {id:?}"))
}

pub async fn run(cmd: RulesCommand) -> CliResult {
    match cmd {
        RulesCommand::Validate { files, check_aws, .. } => validate(&files, check_aws).await,
        RulesCommand::Put { files } => put(&files).await,
        RulesCommand::List { output } => list(&output).await,
        RulesCommand::Show { id, output } => {
            let s = store().await?.get_rule(&id).await?.ok_or_else(|| no_rule(&id))?;
            // The rule as the file `rules put` takes: edit it and put it back.
            let spec = s.rule.to_spec();
            if !output.data(&spec)? {
                // Not `table::safe`: that escapes line breaks, and the TOML writer already escapes
                // every control character inside strings.
                println!("# rule {id}, stored version {} (capblock rules put FILE replaces it)", s.version);
                print!("{}", rule_toml(&s.rule)?);
            }
            Ok(())
        }
        RulesCommand::Enable { id } => set_enabled(&id, true).await,
        RulesCommand::Disable { id } => set_enabled(&id, false).await,
        RulesCommand::Delete { id } => {
            if store().await?.delete_rule(&id).await? {
                println!("deleted rule {id:?}; its blocks, intents and budgets are kept");
                Ok(())
            } else {
                Err(no_rule(&id))
            }
        }
    }
}

/// Every file is checked and reported, good or bad, before the exit code says whether any failed.
async fn validate(files: &[String], check_aws: bool) -> CliResult {
    let mut bad = 0;
    let mut clients: Option<(AutoScaling, Eks, Ec2Market)> = None;
    let now = crate::context::clock_now().await?;
    for f in files {
        let mut warnings = Vec::new();
        let loaded = match load(f, now) {
            Ok(r) if check_aws => {
                let (groups, nodegroups, ec2) = match &clients {
                    Some(c) => c,
                    None => {
                        let sdk = sdk().await;
                        clients.insert((AutoScaling::new(sdk.clone()), Eks::new(sdk.clone()), Ec2Market::new(sdk)))
                    }
                };
                // A group that would launch nothing into the block is worth knowing, not a
                // broken rule: it is said, and the file still passes.
                match launch_gaps(groups, ec2, &r, crate::stack::stack_name().as_deref()).await {
                    Ok(gaps) => warnings = gaps,
                    Err(e) => warnings.push((
                        "actions".to_string(),
                        format!("the groups' launch templates could not be checked: {}", plain(&e.to_string())),
                    )),
                }
                // One file's failed check is that file's: every other file is still reported.
                let unchecked = |what: &str, e: &dyn std::fmt::Display| {
                    vec![(
                        "actions".to_string(),
                        format!(
                            "the {what} could not be checked: {}; without --check-aws this is skipped",
                            plain(&e.to_string())
                        ),
                    )]
                };
                let mut problems = match unknown_groups(groups, &r).await {
                    Ok(p) => p,
                    Err(e) => unchecked("Auto Scaling groups", &e),
                };
                problems.extend(match unknown_nodegroups(nodegroups, &r).await {
                    Ok(p) => p,
                    Err(e) => unchecked("EKS node groups", &e),
                });
                if problems.is_empty() {
                    Ok(r)
                } else {
                    let lines: Vec<String> = problems.iter().map(|(field, p)| format!("  - {field}: {p}")).collect();
                    Err(CliError::InvalidRule(format!(
                        "{f}: rule {:?} has {} problem(s):\n{}",
                        r.id,
                        problems.len(),
                        lines.join("\n")
                    )))
                }
            }
            other => other,
        };
        if let Ok(r) = &loaded {
            warnings.extend(below_list(r, now));
        }
        match loaded {
            Ok(r) => {
                println!(
                    "{f}: ok (rule {:?}, mode {}, {} question(s) per scan)",
                    r.id,
                    r.mode.as_str(),
                    r.regions.len() * r.asks().len() * r.durations_days.len()
                );
                for (field, w) in &warnings {
                    println!("  warning: {field}: {w}");
                }
            }
            Err(e) => {
                bad += 1;
                println!("{}", crate::table::safe_lines(&e.to_string()));
            }
        }
    }
    if bad > 0 { Err(CliError::InvalidFiles(bad)) } else { Ok(()) }
}

/// A warning per type of `rule` whose published list rate at `now` is above the threshold, and
/// one when `max_total_fee` is below the least block it accepts at its threshold or the list.
fn below_list(rule: &Rule, now: chrono::DateTime<chrono::Utc>) -> Vec<(String, String)> {
    let below = list_price::below_list(rule, now);
    let said = list_price::says(&below, rule.max_price_per_accelerator_hour);
    let mut warnings: Vec<(String, String)> =
        said.into_iter().map(|w| ("max_price_per_accelerator_hour".to_string(), w)).collect();
    // The cap below one block at the rule's own threshold is said first: it, not the threshold,
    // sets the price the rule buys at; below one at the list only is said otherwise.
    if let Some(w) = rule.fee_cap_below_threshold().or_else(|| list_price::fee_cap_below_list(rule, now)) {
        warnings.push(("max_total_fee".to_string(), w));
    }
    warnings
}

/// A rule as the TOML file `rules put` takes.
fn rule_toml(rule: &Rule) -> Result<String, CliError> {
    toml::to_string(&rule.to_spec()).map_err(|e| CliError::failed(format!("rule {} as TOML: {e}", rule.id)))
}

/// What `rules put` reads: `-` is stdin (once), anything else a file.
fn read_rules(files: &[String], now: chrono::DateTime<chrono::Utc>) -> Result<Vec<Rule>, CliError> {
    if files.iter().filter(|f| *f == "-").count() > 1 {
        return Err(CliError::Invalid("`-` (stdin) can be given once".into()));
    }
    files.iter().map(|f| load(f, now)).collect()
}

/// A rule file, or `-`: a rule from stdin.
fn load(file: &str, now: chrono::DateTime<chrono::Utc>) -> Result<Rule, CliError> {
    if file == "-" {
        crate::context::parse_rule("(stdin)", &crate::context::read_rule_stdin()?, now)
    } else {
        load_rule(file, now)
    }
}

/// All files are validated before any is stored: a bad one stores none. A rule stored already
/// is said unchanged (and not written again), or its changes are shown as a unified diff of the
/// rule file, stored beside the file's.
async fn put(files: &[String]) -> CliResult {
    let now = crate::context::clock_now().await?;
    let rules = read_rules(files, now)?;
    let store = store().await?;
    // The teams the stack budgets, as its functions stored them (None: not stored yet).
    let teams = crate::context::stored_settings(&store).await?.map(|s| s.stack.team_budgets);
    let book = crate::context::rate_book(&store).await?;
    for r in rules {
        let current = store.get_rule(&r.id).await?;
        if let Some(c) = &current
            && c.rule == r
        {
            println!("rule {:?} unchanged (version {}): nothing stored", r.id, c.version);
            continue;
        }
        if let Some(c) = &current {
            print!("{}", changes(&c.rule, &r)?);
        }
        let v = store.put_rule(&r, Some(current.as_ref().map(|c| c.version).unwrap_or(0))).await?;
        println!(
            "{} rule {:?} (version {v}, mode {}, {})",
            if current.is_some() { "updated" } else { "created" },
            r.id,
            r.mode.as_str(),
            if r.enabled { "enabled" } else { "disabled" }
        );
        if let (Some(team), Some(teams)) = (&r.team, &teams)
            && !teams.contains_key(team)
        {
            eprintln!(
                "  warning: team {team:?} has no budget in this stack's TeamBudgets: the rule buys nothing until it has \
                 one (or correct `team`)"
            );
        }
        // What the stack's list rates (published and announced) say of the rule stored.
        for w in book.warnings(&r, now) {
            eprintln!("  warning: max_price_per_accelerator_hour: {}", crate::table::safe(&w));
        }
    }
    Ok(())
}

/// The stored rule against the new one, as a unified diff of their rule files (what `rules
/// show` prints), made safe for a terminal line by line.
fn changes(stored: &Rule, new: &Rule) -> Result<String, CliError> {
    let (old, new_text) = (rule_toml(stored)?, rule_toml(new)?);
    let diff = similar::TextDiff::from_lines(&old, &new_text);
    let stored_name = format!("rule {} (stored)", stored.id);
    let text = diff.unified_diff().context_radius(2).header(&stored_name, "rule file").to_string();
    Ok(crate::table::safe_lines(&text))
}

async fn list(output: &OutputArgs) -> CliResult {
    let list = store().await?.list_rules().await?;
    if output.data(&list)? {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            let r = &s.rule;
            vec![
                r.id.clone(),
                // The narrow MODE: what the rule does now, `disabled` when it does nothing.
                if r.enabled { r.mode.as_str() } else { "disabled" }.into(),
                if r.enabled { "yes" } else { "no" }.into(),
                r.mode.as_str().into(),
                // Instance types, or the UltraServer types of an UltraServer rule.
                r.instance_types
                    .iter()
                    .map(|t| t.to_string())
                    .chain(r.ultraserver_types.iter().map(|u| u.to_string()))
                    .collect::<Vec<_>>()
                    .join(", "),
                // ", " between items: a cell too long for its column wraps between them.
                r.regions.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
                format!("{:.4}", r.max_price_per_accelerator_hour.round_dp(4)),
                table::money(&r.monthly_budget),
                s.version.to_string(),
            ]
        })
        .collect();
    let currency = table::currency(list.iter().map(|s| &s.rule.monthly_budget));
    // The narrow set fits 80 columns a rule per line (one type, one or two regions): whether it
    // is enabled is said in MODE, which `-o wide` has apart, and the budget's header is short.
    let columns = [
        Column::whole("ID"),
        Column::whole("MODE").narrow(),
        Column::whole("ENABLED").wide(),
        Column::whole("MODE").wide(),
        Column::text("TYPES"),
        Column::text("REGIONS"),
        Column::number(format!("MAX {currency}/ACCEL-H")),
        Column::number(format!("{currency}/MONTH")),
        Column::number("VERSION").wide(),
    ];
    println!("{}", table::render(&columns, &rows, output.layout()));
    Ok(())
}

async fn set_enabled(id: &str, enabled: bool) -> CliResult {
    let store = store().await?;
    let mut s = store.get_rule(id).await?.ok_or_else(|| no_rule(id))?;
    s.rule.enabled = enabled;
    let v = store.put_rule(&s.rule, Some(s.version)).await?;
    println!("rule {id:?} {} (version {v})", if enabled { "enabled" } else { "disabled" });
    Ok(())
}
