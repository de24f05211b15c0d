//! The `anvil` command line: clap structs holding what was typed, and [`run`], which carries
//! out one subcommand and returns the process exit code (see [`crate::exit`]).

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::exit;
use crate::validate;

/// Exit codes, as printed at the end of `--help`.
fn exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  every input is valid\n  \
         {}  bad input: a malformed or unknown document, artifact, path or flag",
        exit::OK,
        exit::BAD_INPUT
    )
}

/// anvil: evidence toolkit for LLM-serving benchmark campaigns.
#[derive(Debug, Parser)]
#[command(name = "anvil", version, after_help = exit_codes_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check workload manifests, run plans and artifact folders.
    ///
    /// A FILE is a workload manifest or run plan, chosen by its `schema` field. A DIR holding
    /// `run.json` is an artifact folder; any other DIR is searched recursively for both, and
    /// holding neither is an error. One line is printed per input, naming what it is and
    /// `ok`, or the file and JSON path of each problem.
    #[command(after_help = exit_codes_help())]
    Validate(ValidateArgs),
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Documents, artifact folders, or directories to search.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
}

/// Run one subcommand; the result is the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Validate(args) => run_validate(&args),
    }
}

fn run_validate(args: &ValidateArgs) -> anyhow::Result<u8> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut invalid = 0usize;
    for path in &args.paths {
        for finding in validate::validate_path(path) {
            writeln!(out, "{finding}").context("writing to standard output")?;
            if !finding.is_valid() {
                invalid += 1;
            }
        }
    }
    out.flush().context("writing to standard output")?;
    if invalid == 0 {
        Ok(exit::OK)
    } else {
        let inputs = if invalid == 1 {
            "input is"
        } else {
            "inputs are"
        };
        eprintln!("anvil validate: {invalid} {inputs} not valid");
        Ok(exit::BAD_INPUT)
    }
}
