//! `capblock completions SHELL` and `capblock man`: a shell's completion script and the manual
//! page, generated from the command line's own definition (clap_complete, clap_mangen), so they
//! cannot drift from it.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::context::{CliError, CliResult};

#[derive(Args)]
#[command(after_help = "Examples:\n  \
capblock completions bash > ~/.local/share/bash-completion/completions/capblock\n  \
capblock completions zsh > ~/.zfunc/_capblock   # fpath+=(~/.zfunc) before compinit\n  \
capblock completions fish > ~/.config/fish/completions/capblock.fish\n\n\
A new shell then completes capblock's commands and options.")]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Args)]
#[command(after_help = "Examples:\n  \
capblock man | man -l -\n  \
capblock man > ~/.local/share/man/man1/capblock.1 && man capblock\n  \
capblock man --dir ~/.local/share/man/man1   # also man capblock-offerings, ...")]
pub struct ManArgs {
    /// Write capblock.1 and a page per command (capblock-offerings.1, capblock-rules-put.1, ...)
    /// into this directory instead of printing capblock.1.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

pub fn completions(a: &CompletionsArgs) -> CliResult {
    print!("{}", completion_script(a.shell)?);
    Ok(())
}

pub fn man(a: &ManArgs) -> CliResult {
    let failed = |e: std::io::Error| CliError::failed(format!("the manual pages: {e}"));
    match &a.dir {
        None => print!("{}", manual()?),
        Some(dir) => {
            clap_mangen::generate_to(super::Cli::command(), dir).map_err(failed)?;
            let mut pages: Vec<String> = std::fs::read_dir(dir)
                .map_err(failed)?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("capblock") && n.ends_with(".1"))
                .collect();
            pages.sort();
            println!("wrote {} manual page(s) to {}: {}", pages.len(), dir.display(), pages.join(", "));
        }
    }
    Ok(())
}

fn completion_script(shell: Shell) -> Result<String, CliError> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut super::Cli::command(), "capblock", &mut out);
    String::from_utf8(out).map_err(|e| CliError::failed(format!("the completion script: {e}")))
}

/// capblock.1: the command, its global options, a line per command and the examples.
fn manual() -> Result<String, CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(super::Cli::command())
        .render(&mut out)
        .map_err(|e| CliError::failed(format!("the manual page: {e}")))?;
    String::from_utf8(out).map_err(|e| CliError::failed(format!("the manual page: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shell's script names the commands and their options; it is made from the
    /// definition, so a new command shows up without anyone writing it in.
    #[test]
    fn completions_name_every_command() {
        let commands: Vec<String> =
            super::super::Cli::command().get_subcommands().map(|s| s.get_name().to_string()).collect();
        assert!(commands.len() >= 14 && commands.contains(&"offerings".to_string()), "{commands:?}");
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = completion_script(shell).unwrap();
            for c in &commands {
                assert!(script.contains(c.as_str()), "{shell}: {c} missing");
            }
            for option in ["stack", "profile", "output", "types"] {
                // Fish names a long option `-l NAME`.
                let said = if shell == Shell::Fish { format!("-l {option}") } else { format!("--{option}") };
                assert!(script.contains(&said), "{shell}: {said} missing");
            }
        }
        assert!(completion_script(Shell::Bash).unwrap().contains("complete -F"), "a bash completion function");
    }

    /// The manual page is roff with a title, every command named in it, and the options; the
    /// pages written to a directory are one per command.
    #[test]
    fn the_manual_names_every_command_and_its_options() {
        let page = manual().unwrap();
        assert_eq!(page.lines().filter(|l| l.starts_with(".TH ")).count(), 1, "{page}");
        let commands: Vec<String> =
            super::super::Cli::command().get_subcommands().map(|s| s.get_name().to_string()).collect();
        for c in &commands {
            assert!(page.contains(&format!("capblock\\-{}(1)", c.replace('-', "\\-"))), "{c} missing:\n{page}");
        }
        for option in ["\\-\\-stack", "\\-\\-profile"] {
            assert!(page.contains(option), "{option} missing");
        }
        let dir = std::env::temp_dir().join(format!("capblock-man-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        man(&ManArgs { dir: Some(dir.clone()) }).unwrap();
        for c in &commands {
            let p = dir.join(format!("capblock-{c}.1"));
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(text.starts_with(".ie") || text.contains(".TH"), "{text}");
        }
        let put = std::fs::read_to_string(dir.join("capblock-rules-put.1")).unwrap();
        assert!(put.contains("stdin"), "{put}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
