//! `anvil validate`: one line per input ([`crate::validate::Finding`]), and bad input when
//! any is not valid.

use std::io::Write;

use anyhow::Context;

use super::args::ValidateArgs;
use crate::app::Exit;
use crate::app::output::Sink;
use crate::validate;

/// `anvil validate`: exit 0 when every input is valid, 2 otherwise.
pub fn run(args: &ValidateArgs) -> anyhow::Result<Exit> {
    let mut out = Sink::open(None)?;
    let mut invalid = 0usize;
    for path in &args.paths {
        for finding in validate::validate_path(path) {
            writeln!(out, "{finding}").context("writing to standard output")?;
            if !finding.is_valid() {
                invalid += 1;
            }
        }
    }
    out.finish().context("writing to standard output")?;
    if invalid == 0 {
        return Ok(Exit::Ok);
    }
    let inputs = if invalid == 1 {
        "input is"
    } else {
        "inputs are"
    };
    eprintln!("anvil validate: {invalid} {inputs} not valid");
    Ok(Exit::BadInput)
}
