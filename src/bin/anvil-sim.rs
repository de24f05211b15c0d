//! `anvil-sim`: OpenAI-compatible simulator with a known timing model and fault injection.
//! See `anvil-sim --help` and the `anvil::sim` module docs.

use clap::Parser;

use anvil::app::{self, Exit};

fn main() -> std::process::ExitCode {
    let args = app::sim::Args::parse();
    app::main("anvil-sim", Exit::Failed, move || app::sim::run(args))
}
