//! Which deployed stack the CLI acts on, and its table: `--stack NAME` (or CAPBLOCK_STACK_NAME)
//! reads the table from the stack's CloudFormation outputs; otherwise the chosen profile's
//! `stack` (`--profile NAME` or CAPBLOCK_PROFILE: a `[profile.NAME]` table of the config file);
//! otherwise CAPBLOCK_TABLE names the table itself; otherwise `stack` in the config file
//! (`$CAPBLOCK_CONFIG`, else `$XDG_CONFIG_HOME/capblock/config.toml`, else
//! `~/.config/capblock/config.toml`). A profile also names the AWS region and the AWS profile
//! to act with (`context::sdk`). The mode, budgets and topics the CLI acts with come from the
//! table (the stack's stored settings), never from the shell.

use std::path::PathBuf;
use std::sync::OnceLock;

use aws_sdk_cloudformation::error::{DisplayErrorContext, ProvideErrorMetadata};
use serde::Deserialize;

/// Why the stack's table was not found: context.rs turns each into its exit code.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// The named stack does not exist (exit 3).
    #[error("{0}")]
    NotFound(String),
    /// The config file is wrong (exit 2).
    #[error("{0}")]
    Invalid(String),
    /// CloudFormation failed, or nothing names a stack (exit 1).
    #[error("{0}")]
    Failed(String),
}

/// The stack named on the command line (`--stack`, or CAPBLOCK_STACK_NAME through clap).
static NAMED: OnceLock<Option<String>> = OnceLock::new();
/// The table, once found (a command may open the store more than once).
static TABLE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
/// The named stack's parameters, read with its outputs (`None`: a table was named, not a stack).
static DEPLOYED: OnceLock<Deployed> = OnceLock::new();

/// A deployed stack as CloudFormation describes it: its name and its parameters. The settings
/// the functions store in the table come from these parameters; the table's item is writable by
/// anyone who may write the table, CloudFormation's parameters only by whoever may deploy. So a
/// purchase from the CLI checks one against the other (`settings_match`).
#[derive(Debug, Clone)]
pub struct Deployed {
    pub name: String,
    pub parameters: std::collections::BTreeMap<String, String>,
}

/// The named stack's parameters, once its table was looked up (`table`); `None` when the table
/// was named directly (CAPBLOCK_TABLE), so no stack can vouch for its settings.
pub fn deployed() -> Option<&'static Deployed> {
    DEPLOYED.get()
}

/// Whether the stack's stored settings say what its parameters say (Mode, AccountMonthlyBudget,
/// TeamBudgets); `Err` says what differs, both sides, in words.
pub fn settings_match(
    stored: &capblock_shared::domain::stack::StackSettings,
    deployed: &Deployed,
) -> Result<(), String> {
    use capblock_shared::domain::money::Money;
    let param = |k: &str| deployed.parameters.get(k).map(String::as_str).unwrap_or_default();
    let mut differ = Vec::new();
    let mode = param("Mode");
    let mode = if mode.is_empty() { "dry-run" } else { mode };
    if mode != stored.mode.as_str() {
        differ.push(format!("mode: the table says {}, the stack's Mode parameter {mode}", stored.mode.as_str()));
    }
    let cap = param("AccountMonthlyBudget");
    let deployed_cap = match cap {
        "" | "0" => Ok(None),
        v => Money::parse(v, "USD").map(Some).map_err(|e| e.to_string()),
    };
    match deployed_cap {
        Ok(c) if c.map(|m| m.amount().normalize()) == stored.account_budget.map(|m| m.amount().normalize()) => {}
        Ok(_) | Err(_) => differ.push(format!(
            "account cap: the table says {}, the stack's AccountMonthlyBudget parameter {cap:?}",
            stored.account_budget.map_or("none".to_string(), |m| m.to_string())
        )),
    }
    let teams = param("TeamBudgets");
    let deployed_teams = capblock_shared::domain::budget::parse_team_budgets(teams);
    let same_teams = deployed_teams.as_ref().is_ok_and(|d| {
        d.len() == stored.team_budgets.len()
            && d.iter().all(|(t, m)| {
                stored.team_budgets.get(t).is_some_and(|s| s.amount().normalize() == m.amount().normalize())
            })
    });
    if !same_teams {
        let said: Vec<String> = stored.team_budgets.iter().map(|(t, m)| format!("{t}={}", m.amount())).collect();
        differ.push(format!(
            "team budgets: the table says {:?}, the stack's TeamBudgets parameter {teams:?}",
            said.join(",")
        ));
    }
    if differ.is_empty() { Ok(()) } else { Err(differ.join("; ")) }
}

/// Records the stack the command line named; call once, before any command runs.
pub fn name(stack: Option<String>) {
    let _ = NAMED.set(stack.filter(|s| !s.is_empty()));
}

/// The config file's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The stack to act on when neither --stack, a profile nor CAPBLOCK_TABLE says.
    stack: Option<String>,
    /// The named profiles: `[profile.prod]`.
    #[serde(default)]
    profile: std::collections::BTreeMap<String, Profile>,
}

/// A named profile of the config file (`[profile.NAME]`), chosen by `--profile NAME` or
/// CAPBLOCK_PROFILE: the stack to act on, and the AWS region and AWS profile to act with.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub stack: Option<String>,
    pub region: Option<String>,
    pub aws_profile: Option<String>,
}

/// The profile the command line chose (`None`: none was).
static PROFILE: OnceLock<Option<Profile>> = OnceLock::new();

/// Reads the profile `--profile` (or CAPBLOCK_PROFILE) names from the config file; call once,
/// before any command runs. A profile the file lacks is an error naming the file and the
/// profiles it has.
pub fn choose_profile(name: Option<String>) -> Result<(), StackError> {
    let chosen = match name.filter(|n| !n.is_empty()) {
        None => None,
        Some(name) => {
            let path = config_path().ok_or_else(|| {
                StackError::Invalid(format!("profile {name:?}: no config file (set HOME or CAPBLOCK_CONFIG)"))
            })?;
            Some(pick(read_config(&path)?.as_ref(), &path, &name)?)
        }
    };
    let _ = PROFILE.set(chosen);
    Ok(())
}

/// The chosen profile, if any.
pub fn profile() -> Option<&'static Profile> {
    PROFILE.get().and_then(Option::as_ref)
}

/// Profile `name` of the config file at `path` (`None`: there is no file).
fn pick(config: Option<&Config>, path: &std::path::Path, name: &str) -> Result<Profile, StackError> {
    let Some(config) = config else {
        return Err(StackError::Invalid(format!(
            "profile {name:?}: there is no config file {} (write a [profile.{name}] table there with stack, \
             region and aws_profile)",
            path.display()
        )));
    };
    config.profile.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = config.profile.keys().map(String::as_str).collect();
        StackError::Invalid(format!(
            "profile {name:?} is not in {}: {}",
            path.display(),
            if known.is_empty() {
                format!("it has no profile (add a [profile.{name}] table with stack, region and aws_profile)")
            } else {
                format!("its profiles are {}", known.join(", "))
            }
        ))
    })
}

fn config_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("CAPBLOCK_CONFIG")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("capblock/config.toml")))
        .or_else(|| var("HOME").map(|h| h.join(".config/capblock/config.toml")))
}

fn config() -> Result<Config, StackError> {
    let Some(path) = config_path() else { return Ok(Config::default()) };
    Ok(read_config(&path)?.unwrap_or_default())
}

/// The most of a config file read: a few stacks and profiles take a few hundred bytes, so a
/// larger file is a mistake (a wrong CAPBLOCK_CONFIG, a device) and is refused, never read whole.
const CONFIG_MAX_BYTES: u64 = 1024 * 1024;

/// The config file at `path`; `None` when there is none.
fn read_config(path: &std::path::Path) -> Result<Option<Config>, StackError> {
    let failed = |e: std::io::Error| StackError::Failed(format!("{}: {e}", path.display()));
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, CONFIG_MAX_BYTES + 1), &mut text).map_err(failed)?;
    if text.len() as u64 > CONFIG_MAX_BYTES {
        return Err(StackError::Invalid(format!(
            "{}: the config file is larger than 1 MiB; it names a stack and profiles in a few lines (is \
             CAPBLOCK_CONFIG the right file?)",
            path.display()
        )));
    }
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| StackError::Invalid(format!("{}: {}", path.display(), e.to_string().trim())))
}

/// Where the table comes from, in order of precedence.
enum Target {
    Stack(String),
    Table(String),
}

fn target() -> Result<Option<Target>, StackError> {
    if let Some(Some(stack)) = NAMED.get() {
        return Ok(Some(Target::Stack(stack.clone())));
    }
    if let Some(stack) = profile().and_then(|p| p.stack.clone()) {
        return Ok(Some(Target::Stack(stack)));
    }
    if let Some(table) = capblock_shared::config::optional("CAPBLOCK_TABLE") {
        return Ok(Some(Target::Table(table)));
    }
    Ok(config()?.stack.map(Target::Stack))
}

/// The stack's name as the command line, the environment (CAPBLOCK_STACK_NAME through --stack,
/// or the functions' CAPBLOCK_STACK) or the config file names it; None when nothing does.
pub fn stack_name() -> Option<String> {
    if let Some(Some(stack)) = NAMED.get() {
        return Some(stack.clone());
    }
    profile()
        .and_then(|p| p.stack.clone())
        .or_else(|| capblock_shared::config::optional("CAPBLOCK_STACK"))
        .or_else(|| config().ok()?.stack)
}

/// Whether a stack or a table is named at all (commands that only use the store when there is one).
pub fn named() -> bool {
    matches!(target(), Ok(Some(_)))
}

/// The stack's table: from its outputs when a stack is named, else CAPBLOCK_TABLE.
pub async fn table(sdk: &aws_config::SdkConfig) -> Result<String, StackError> {
    TABLE
        .get_or_try_init(|| async {
            match target()? {
                Some(Target::Table(t)) => Ok(t),
                Some(Target::Stack(name)) => table_of_stack(sdk, &name).await,
                None => Err(StackError::Failed(
                    "no stack named: pass --stack NAME (the name you deployed with sam deploy), set CAPBLOCK_STACK_NAME, \
                     or put `stack = \"NAME\"` in ~/.config/capblock/config.toml (CAPBLOCK_TABLE names a table directly)"
                        .to_string(),
                )),
            }
        })
        .await
        .cloned()
}

/// The `TableName` output of stack `name`, said on stderr so the operator sees what is acted on.
async fn table_of_stack(sdk: &aws_config::SdkConfig, name: &str) -> Result<String, StackError> {
    let region = sdk.region().map_or("the default region".to_string(), |r| r.to_string());
    let client = aws_sdk_cloudformation::Client::new(sdk);
    let answer = client.describe_stacks().stack_name(name).send().await.map_err(|e| {
        match (e.code(), e.message()) {
            // CloudFormation answers a missing stack with ValidationError "Stack with id X does not exist".
            (Some("ValidationError"), Some(m)) if m.contains("does not exist") => StackError::NotFound(format!(
                "no stack {name:?} in {region}: check --stack and the region (AWS_REGION or --region of your profile)"
            )),
            (Some(code), m) => {
                StackError::Failed(format!("reading stack {name:?} in {region}: {code}: {}", m.unwrap_or_default()))
            }
            (None, _) => StackError::Failed(format!("reading stack {name:?} in {region}: {}", DisplayErrorContext(&e))),
        }
    })?;
    let stack =
        answer.stacks().first().ok_or_else(|| StackError::NotFound(format!("no stack {name:?} in {region}")))?;
    let status = stack.stack_status().map(|s| s.as_str().to_string()).unwrap_or_default();
    let table = stack
        .outputs()
        .iter()
        .find(|o| o.output_key() == Some("TableName"))
        .and_then(|o| o.output_value())
        .ok_or_else(|| {
            StackError::Failed(format!(
                "stack {name:?} ({status}) has no TableName output: is it a capblock stack, and did its deploy finish?"
            ))
        })?
        .to_string();
    let parameters = stack
        .parameters()
        .iter()
        .filter_map(|p| Some((p.parameter_key()?.to_string(), p.parameter_value().unwrap_or_default().to_string())))
        .collect();
    let _ = DEPLOYED.set(Deployed { name: name.to_string(), parameters });
    Ok(table)
}

#[cfg(test)]
mod tests {
    use capblock_shared::domain::money::Money;
    use capblock_shared::domain::rule::Mode;
    use capblock_shared::domain::stack::StackSettings;

    use super::*;

    fn deployed(mode: &str, cap: &str, teams: &str) -> Deployed {
        let parameters = [("Mode", mode), ("AccountMonthlyBudget", cap), ("TeamBudgets", teams)]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        Deployed { name: "capblock".into(), parameters }
    }

    /// A table item that says live with a cap of 50,000 while the stack was deployed dry-run
    /// with 1,000 is named field by field; equal settings (50000 and 50000.00 alike) pass.
    #[test]
    fn stored_settings_must_say_what_the_stacks_parameters_say() {
        let usd = |a: &str| Money::parse(a, "USD").unwrap();
        let stored = StackSettings {
            name: "capblock".into(),
            mode: Mode::Live,
            account_budget: Some(usd("50000")),
            team_budgets: [("research".to_string(), usd("2000"))].into(),
        };
        assert_eq!(settings_match(&stored, &deployed("live", "50000.00", "research=2000")), Ok(()));
        let forged = settings_match(&stored, &deployed("dry-run", "1000", "")).unwrap_err();
        assert!(forged.contains("the stack's Mode parameter dry-run"), "{forged}");
        assert!(forged.contains("AccountMonthlyBudget parameter \"1000\""), "{forged}");
        assert!(forged.contains("TeamBudgets parameter \"\""), "{forged}");
        let uncapped = StackSettings { account_budget: None, team_budgets: Default::default(), ..stored };
        assert_eq!(settings_match(&uncapped, &deployed("live", "0", "")), Ok(()));
    }

    /// A config file past 1 MiB is refused with a clear error, read no further than the bound.
    #[test]
    fn a_config_file_past_the_bound_is_refused() {
        let dir = std::env::temp_dir().join(format!("capblock-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        let line = "# a comment line of the config file\n";
        let big = line.repeat((CONFIG_MAX_BYTES as usize).div_ceil(line.len()) + 1);
        std::fs::write(&path, format!("stack = \"capblock\"\n{big}")).unwrap();
        let e = read_config(&path).unwrap_err().to_string();
        assert!(e.contains("larger than 1 MiB"), "{e}");
        std::fs::write(&path, "stack = \"capblock\"\n").unwrap();
        assert_eq!(read_config(&path).unwrap().unwrap().stack.as_deref(), Some("capblock"));
        assert!(read_config(&dir.join("absent.toml")).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_config_file_names_a_stack_and_profiles_and_nothing_else() {
        let c: Config = toml::from_str("stack = \"capblock-prod\"").unwrap();
        assert_eq!(c.stack.as_deref(), Some("capblock-prod"));
        assert!(toml::from_str::<Config>("stak = \"x\"").is_err(), "a misspelt key is an error, not ignored");
        let text = "stack = \"capblock-dev\"\n\n[profile.prod]\nstack = \"capblock\"\nregion = \"us-west-2\"\n\
                    aws_profile = \"prod-admin\"\n\n[profile.sim]\nregion = \"us-east-1\"\n";
        let c: Config = toml::from_str(text).unwrap();
        assert_eq!(c.stack.as_deref(), Some("capblock-dev"));
        let path = std::path::Path::new("/home/op/.config/capblock/config.toml");
        let prod = pick(Some(&c), path, "prod").unwrap();
        assert_eq!(
            prod,
            Profile {
                stack: Some("capblock".into()),
                region: Some("us-west-2".into()),
                aws_profile: Some("prod-admin".into())
            }
        );
        assert_eq!(pick(Some(&c), path, "sim").unwrap().stack, None, "a profile may name only some");
        let typo = toml::from_str::<Config>("[profile.prod]\nstak = \"x\"\n").unwrap_err().to_string();
        assert!(typo.contains("stak"), "{typo}");
    }

    /// A profile the file lacks names the file and the profiles it has (exit 2).
    #[test]
    fn a_missing_profile_names_the_file_and_the_profiles_it_has() {
        let c: Config = toml::from_str("[profile.prod]\nstack = \"a\"\n[profile.dev]\nstack = \"b\"\n").unwrap();
        let path = std::path::Path::new("/etc/capblock.toml");
        let e = pick(Some(&c), path, "staging").unwrap_err();
        assert!(matches!(e, StackError::Invalid(_)), "{e:?}");
        assert_eq!(e.to_string(), "profile \"staging\" is not in /etc/capblock.toml: its profiles are dev, prod");
        let none = pick(Some(&Config::default()), path, "prod").unwrap_err().to_string();
        assert!(none.contains("it has no profile") && none.contains("[profile.prod]"), "{none}");
        let no_file = pick(None, path, "prod").unwrap_err().to_string();
        assert!(no_file.contains("there is no config file /etc/capblock.toml"), "{no_file}");
    }
}
