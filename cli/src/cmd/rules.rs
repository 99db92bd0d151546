//! `capblock rules`: validate, store, list, show, enable, disable and delete purchase rules.

use capblock_shared::app::handoff::{launch_gaps, unknown_groups, unknown_nodegroups};
use capblock_shared::aws::autoscaling::AutoScaling;
use capblock_shared::aws::ec2::Ec2Market;
use capblock_shared::aws::eks::Eks;
use capblock_shared::domain::rule::Rule;
use capblock_shared::ports::RuleStore;
use clap::Subcommand;

use crate::context::{CliError, CliResult, load_rule, plain, sdk, store};
use crate::table;

#[derive(Subcommand)]
pub enum RulesCommand {
    /// Check rule files and print every problem with its field; exit 2 if any is invalid.
    /// Offline: with --check-aws, the Auto Scaling groups `scale_group` actions name and the EKS
    /// node groups `scale_nodegroup` actions name must also exist in each of the rule's regions
    /// (asked of AWS with your credentials).
    Validate {
        #[arg(required = true)]
        files: Vec<String>,
        /// Also ask AWS whether the Auto Scaling groups and EKS node groups the actions name exist.
        #[arg(long)]
        check_aws: bool,
        /// Accepted for scripts written before: validation is offline unless --check-aws.
        #[arg(long, hide = true)]
        offline: bool,
    },
    /// Validate and store rule files (creates or replaces, with a version check).
    Put {
        /// The rule files (TOML); none is stored unless all are valid.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// List stored rules.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show a stored rule as the TOML file `rules put` takes (edit it and put it back).
    Show {
        id: String,
        /// The same fields as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Enable a stored rule.
    Enable { id: String },
    /// Disable a stored rule (the scan skips it).
    Disable { id: String },
    /// Delete a stored rule. Only the rule goes: its blocks are still tracked to their end, its
    /// purchase intents settled and its budgets kept (a rule put again under the same id finds
    /// this month's spending and purchases as they were). To stop it for a while, `disable` it.
    Delete { id: String },
}

fn no_rule(id: &str) -> CliError {
    CliError::NotFound(format!("no rule {id:?}"))
}

pub async fn run(cmd: RulesCommand) -> CliResult {
    match cmd {
        RulesCommand::Validate { files, check_aws, .. } => validate(&files, check_aws).await,
        RulesCommand::Put { files } => put(&files).await,
        RulesCommand::List { json } => list(json).await,
        RulesCommand::Show { id, json } => {
            let s = store().await?.get_rule(&id).await?.ok_or_else(|| no_rule(&id))?;
            // The rule as the file `rules put` takes: edit it and put it back.
            let spec = s.rule.to_spec();
            if json {
                println!("{}", serde_json::to_string_pretty(&spec)?);
            } else {
                let text = toml::to_string(&spec).map_err(|e| CliError::failed(format!("rule {id} as TOML: {e}")))?;
                // Not `table::safe`: that escapes line breaks, and the TOML writer already escapes
                // every control character inside strings.
                println!("# rule {id}, stored version {} (capblock rules put FILE replaces it)", s.version);
                print!("{text}");
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
        let loaded = match load_rule(f, now) {
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

/// All files are validated before any is stored: a bad one stores none.
async fn put(files: &[String]) -> CliResult {
    let now = crate::context::clock_now().await?;
    let rules: Vec<Rule> = files.iter().map(|f| load_rule(f, now)).collect::<Result<_, _>>()?;
    let store = store().await?;
    // The teams the stack budgets, as its functions stored them (None: not stored yet).
    let teams = crate::context::stored_settings(&store).await?.map(|s| s.stack.team_budgets);
    for r in rules {
        let current = store.get_rule(&r.id).await?;
        let v = store.put_rule(&r, Some(current.map(|c| c.version).unwrap_or(0))).await?;
        println!(
            "stored rule {:?} (version {v}, mode {}, {})",
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
    }
    Ok(())
}

async fn list(json: bool) -> CliResult {
    let list = store().await?.list_rules().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            let r = &s.rule;
            vec![
                r.id.clone(),
                if r.enabled { "yes" } else { "no" }.into(),
                r.mode.as_str().into(),
                // Instance types, or the UltraServer types of an UltraServer rule.
                r.instance_types
                    .iter()
                    .map(|t| t.to_string())
                    .chain(r.ultraserver_types.iter().map(|u| u.to_string()))
                    .collect::<Vec<_>>()
                    .join(","),
                r.regions.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","),
                format!("{}", r.max_price_per_accelerator_hour),
                table::money(&r.monthly_budget),
                s.version.to_string(),
            ]
        })
        .collect();
    println!(
        "{}",
        table::render(
            &["ID", "ENABLED", "MODE", "TYPES", "REGIONS", "MAX $/ACCEL-H", "BUDGET/MONTH", "VERSION"],
            &rows
        )
    );
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
