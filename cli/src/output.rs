//! How a command prints what it found: `-o table` (the default: the narrow columns, wrapped to
//! the terminal), `-o wide` (every column, a row per line), `-o json` or `-o yaml` (the same
//! data, every field). `--json` is `-o json`, kept for the scripts written before `-o`.

use serde::Serialize;

use crate::context::CliError;
use crate::table::Layout;

/// The formats `-o` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// The narrow columns, wrapped to the terminal's width (whole rows on a pipe).
    #[default]
    Table,
    /// Every column, a row per line, never wrapped.
    Wide,
    /// Every field, as JSON.
    Json,
    /// Every field, as YAML.
    Yaml,
}

/// `-o FORMAT` and `--json`, for every command that prints data.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// How to print it: table (the narrow columns, wrapped to the terminal), wide (every column),
    /// json or yaml (every field).
    #[arg(long, short = 'o', value_enum, default_value_t, value_name = "FORMAT")]
    output: Format,
    /// The same as `-o json`.
    #[arg(long, conflicts_with = "output")]
    json: bool,
}

impl OutputArgs {
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.output }
    }

    /// JSON or YAML: data for a program, so stdout carries nothing else (progress stays off).
    pub fn is_data(&self) -> bool {
        matches!(self.format(), Format::Json | Format::Yaml)
    }

    /// How a table is laid out on stdout (`table::Layout::detect`).
    pub fn layout(&self) -> Layout {
        Layout::detect(self.format() == Format::Wide)
    }

    /// Prints `value` when the format is data (JSON, YAML) and says so; `false`: a table is
    /// asked for, and the command prints its own.
    pub fn data<T: Serialize + ?Sized>(&self, value: &T) -> Result<bool, CliError> {
        match self.format() {
            Format::Table | Format::Wide => Ok(false),
            format => {
                println!("{}", encode(format, value)?);
                Ok(true)
            }
        }
    }
}

/// `value` as JSON (pretty) or YAML; a table format is JSON too (callers ask only for data).
fn encode<T: Serialize + ?Sized>(format: Format, value: &T) -> Result<String, CliError> {
    match format {
        Format::Yaml => serde_norway::to_string(value)
            .map(|s| s.trim_end().to_string())
            .map_err(|e| CliError::failed(format!("writing YAML: {e}"))),
        _ => Ok(serde_json::to_string_pretty(value)?),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        out: OutputArgs,
    }

    fn parse(args: &[&str]) -> Result<Format, clap::Error> {
        Cmd::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.out.format())
    }

    #[test]
    fn dash_o_chooses_and_json_is_an_alias() {
        assert_eq!(parse(&[]).unwrap(), Format::Table);
        assert_eq!(parse(&["-o", "wide"]).unwrap(), Format::Wide);
        assert_eq!(parse(&["--output", "yaml"]).unwrap(), Format::Yaml);
        assert_eq!(parse(&["-o", "json"]).unwrap(), Format::Json);
        assert_eq!(parse(&["--json"]).unwrap(), Format::Json);
        assert!(parse(&["-o", "xml"]).is_err());
        assert!(parse(&["--json", "-o", "yaml"]).is_err(), "two formats at once are a usage error");
        let wide = Cmd::try_parse_from(["x", "-o", "wide"]).unwrap().out;
        assert!(wide.layout().wide && wide.layout().width.is_none() && !wide.is_data());
        assert!(Cmd::try_parse_from(["x", "-o", "yaml"]).unwrap().out.is_data());
    }

    #[test]
    fn yaml_and_json_carry_the_same_fields() {
        let value = serde_json::json!({"rule": "p5-weekly", "fee": "576.00", "regions": ["us-east-1"]});
        let yaml = encode(Format::Yaml, &value).unwrap();
        // Key order follows serde_json's map, which another crate in the build may switch to
        // insertion order (`preserve_order`): the lines are compared, not their order.
        let mut lines: Vec<&str> = yaml.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["- us-east-1", "fee: '576.00'", "regions:", "rule: p5-weekly"]);
        let back: serde_json::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(back, value);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&encode(Format::Json, &value).unwrap()).unwrap(), value);
    }
}
