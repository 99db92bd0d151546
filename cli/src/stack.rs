//! Which deployed stack the CLI acts on, and its table: `--stack NAME` (or CAPBLOCK_STACK_NAME)
//! reads the table from the stack's CloudFormation outputs; otherwise CAPBLOCK_TABLE names the
//! table itself; otherwise `stack` in the config file (`$CAPBLOCK_CONFIG`, else
//! `$XDG_CONFIG_HOME/capblock/config.toml`, else `~/.config/capblock/config.toml`). The mode,
//! budgets and topics the CLI acts with come from the table (the stack's stored settings), never
//! from the shell.

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

/// Records the stack the command line named; call once, before any command runs.
pub fn name(stack: Option<String>) {
    let _ = NAMED.set(stack.filter(|s| !s.is_empty()));
}

/// The config file's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The stack to act on when neither --stack nor CAPBLOCK_TABLE says.
    stack: Option<String>,
}

fn config_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("CAPBLOCK_CONFIG")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("capblock/config.toml")))
        .or_else(|| var("HOME").map(|h| h.join(".config/capblock/config.toml")))
}

fn config() -> Result<Config, StackError> {
    let Some(path) = config_path() else { return Ok(Config::default()) };
    match std::fs::read_to_string(&path) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| StackError::Invalid(format!("{}: {}", path.display(), e.to_string().trim()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
        Err(e) => Err(StackError::Failed(format!("{}: {e}", path.display()))),
    }
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
    capblock_shared::config::optional("CAPBLOCK_STACK").or_else(|| config().ok()?.stack)
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
    eprintln!("stack {name} ({status}) in {region}: table {table}");
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_names_a_stack_and_nothing_else() {
        let c: Config = toml::from_str("stack = \"capblock-prod\"").unwrap();
        assert_eq!(c.stack.as_deref(), Some("capblock-prod"));
        assert!(toml::from_str::<Config>("stak = \"x\"").is_err(), "a misspelt key is an error, not ignored");
    }
}
