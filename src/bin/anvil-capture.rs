//! `anvil-capture`: record one manifest cell against one or more endpoints into an artifact
//! folder, list a manifest's cells, or recover a killed run. See `anvil-capture --help` and
//! the `anvil::capture` module docs.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = anvil::capture::cli::Cli::parse();
    match anvil::cli::guarded("anvil-capture", move || anvil::capture::cli::run(cli, argv)) {
        Ok(code) => ExitCode::from(code),
        Err(e) if anvil::cli::is_broken_pipe(&e) => ExitCode::from(anvil::exit::OK),
        Err(e) => {
            eprintln!("anvil-capture: {e:#}");
            ExitCode::from(anvil::exit::CAPTURE_FAILED)
        }
    }
}
