//! `anvil`: validate, query, compare, check and report on benchmark artifacts.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = anvil::cli::Cli::parse();
    match anvil::cli::guarded("anvil", move || anvil::cli::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(error) if anvil::cli::is_broken_pipe(&error) => ExitCode::from(anvil::exit::OK),
        Err(error) => {
            eprintln!("anvil: {error:#}");
            ExitCode::from(anvil::exit::BAD_INPUT)
        }
    }
}
