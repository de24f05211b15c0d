//! `anvil`: one match over the subcommands ([`run`]); each handler opens what its
//! arguments name, calls the library, writes the result and says how it ended ([`Exit`]).

pub mod args;
#[cfg(feature = "analysis")]
pub mod campaign;
#[cfg(feature = "analysis")]
pub mod check;
#[cfg(feature = "analysis")]
pub mod compare;
#[cfg(feature = "analysis")]
pub mod demo;
#[cfg(feature = "analysis")]
pub mod report;
#[cfg(feature = "analysis")]
pub mod sql;
#[cfg(feature = "analysis")]
pub mod summary;
pub mod validate;
#[cfg(feature = "analysis")]
pub mod verify;

pub use args::{Cli, Command};

use crate::app::Exit;

/// Run one subcommand.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Sim { args } => {
            use clap::Parser;
            let argv = std::iter::once("anvil-sim".to_owned()).chain(args);
            match crate::app::sim::Args::try_parse_from(argv) {
                Ok(a) => crate::app::sim::run(a),
                Err(e) if !e.use_stderr() => {
                    crate::app::output::stdout(&e.to_string(), "the simulator's help")?;
                    Ok(Exit::Ok)
                }
                Err(e) => Err(crate::app::AppError::wrap(
                    Exit::BadInput,
                    anyhow::anyhow!("sim: {e}"),
                )),
            }
        }
        #[cfg(feature = "analysis")]
        Command::Sql(args) => sql::run(&args),
        #[cfg(feature = "analysis")]
        Command::Summary(args) => summary::run(&args),
        #[cfg(feature = "analysis")]
        Command::Verify(args) => verify::run(&args),
        #[cfg(feature = "analysis")]
        Command::Compare(args) => compare::run(&args),
        #[cfg(feature = "analysis")]
        Command::Check(args) => check::run(&args),
        #[cfg(feature = "analysis")]
        Command::Report(args) => report::run(&args),
        #[cfg(feature = "analysis")]
        Command::Demo(args) => demo::run(&args),
        #[cfg(feature = "analysis")]
        Command::Campaign(command) => campaign::run(&command),
    }
}

#[cfg(feature = "analysis")]
pub use session::{json, load_documents, open_session, open_session_materialized, runtime};

#[cfg(feature = "analysis")]
mod session {
    use std::path::{Path, PathBuf};

    use anyhow::Context;

    use crate::manifest::{RunPlan, WorkloadManifest};
    use crate::query::{AnvilSession, QueryError};

    /// A runtime for the DataFusion work of one command.
    pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(crate::app::STACK_BYTES)
            .build()
            .context("starting the async runtime")
    }

    /// Open the artifacts beneath `data`, saying on standard error when there are none.
    pub async fn open_session(command: &str, data: &[PathBuf]) -> Result<AnvilSession, QueryError> {
        let session = AnvilSession::open(data).await?;
        say_if_empty(command, data, &session);
        Ok(session)
    }

    /// [`open_session`] with the per-request views computed once and kept in memory, for
    /// the commands that run many queries over them.
    pub async fn open_session_materialized(
        command: &str,
        data: &[PathBuf],
    ) -> Result<AnvilSession, QueryError> {
        let session = AnvilSession::open_materialized(data).await?;
        say_if_empty(command, data, &session);
        Ok(session)
    }

    fn say_if_empty(command: &str, data: &[PathBuf], session: &AnvilSession) {
        if session.artifacts().is_empty() {
            let dirs: Vec<String> = data.iter().map(|d| d.display().to_string()).collect();
            eprintln!(
                "anvil {command}: no artifact (a folder holding run.json) under {}; the tables are empty",
                dirs.join(", ")
            );
        }
    }

    /// The manifest and the plan named by `--manifest` and `--plan`, and how messages name
    /// them.
    pub fn load_documents(
        manifest: &Path,
        plan: &Path,
    ) -> anyhow::Result<(WorkloadManifest, RunPlan, [String; 2])> {
        let names = [
            format!("--manifest {}", manifest.display()),
            format!("--plan {}", plan.display()),
        ];
        let m = WorkloadManifest::load(manifest).with_context(|| names[0].clone())?;
        let p = RunPlan::load(plan).with_context(|| names[1].clone())?;
        Ok((m, p, names))
    }

    /// `value` as pretty JSON with a final newline.
    pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<String> {
        let mut text = serde_json::to_string_pretty(value).context("encoding JSON")?;
        text.push('\n');
        Ok(text)
    }
}
