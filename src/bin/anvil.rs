//! `anvil`: validate, query, compare, check and report on benchmark artifacts.

use clap::Parser;

use anvil::app::{self, Exit};

fn main() -> std::process::ExitCode {
    let cli = app::anvil::Cli::parse();
    app::main("anvil", Exit::BadInput, move || app::anvil::run(cli))
}
