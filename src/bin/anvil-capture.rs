//! `anvil-capture`: record one manifest cell against one or more endpoints into an artifact
//! folder, list a manifest's cells, or recover a killed run. See `anvil-capture --help` and
//! the `anvil::capture` module docs.

use clap::Parser;

use anvil::app::{self, Exit};

fn main() -> std::process::ExitCode {
    let cli = app::capture::Cli::parse();
    app::main("anvil-capture", Exit::Failed, move || {
        app::capture::run(cli)
    })
}
