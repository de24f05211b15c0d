//! `anvil-sim`: OpenAI-compatible simulator with a known timing model and fault injection.
//! See `anvil-sim --help` and the `anvil::sim` module docs.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = anvil::sim::Args::parse();
    let cfg = match anvil::sim::Config::from_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("anvil-sim: {e:#}");
            return ExitCode::from(anvil::exit::BAD_INPUT);
        }
    };
    match anvil::cli::guarded("anvil-sim", move || anvil::sim::run(cfg).map(|()| 0)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("anvil-sim: {e:#}");
            ExitCode::from(anvil::exit::SERVE_FAILED)
        }
    }
}
