//! `anvil worker --listen ADDR`: a worker of the distributed SQL engine
//! ([`crate::query::distributed`]).

use super::args::WorkerArgs;
use crate::app::{AppError, Exit};

/// What `anvil worker` and `anvil sql --workers` say in a build without the engine.
#[cfg_attr(feature = "distributed", allow(dead_code))]
pub const NOT_BUILT: &str = "needs the distributed SQL engine, which this build of anvil lacks; \
     build it with `cargo build --release --features distributed` \
     (or `cargo install --path . --features distributed`)";

/// Serve until stopped; bad input (exit 2) when the address cannot be bound.
#[cfg(not(feature = "distributed"))]
pub fn run(_: &WorkerArgs) -> anyhow::Result<Exit> {
    Err(AppError::wrap(
        Exit::BadInput,
        anyhow::anyhow!("`anvil worker` {NOT_BUILT}"),
    ))
}

/// Serve until stopped; bad input (exit 2) when the address cannot be bound.
#[cfg(feature = "distributed")]
pub fn run(args: &WorkerArgs) -> anyhow::Result<Exit> {
    let rt = super::runtime()?;
    rt.block_on(async {
        let (listener, addr) = crate::query::distributed::bind(&args.listen)
            .await
            .map_err(|e| AppError::wrap(Exit::BadInput, anyhow::anyhow!(e)))?;
        crate::app::output::stdout(
            &format!("anvil worker listening on http://{addr}\n"),
            "the worker's address",
        )?;
        crate::query::distributed::serve(listener)
            .await
            .map_err(|e| AppError::wrap(Exit::Failed, anyhow::anyhow!(e)))?;
        anyhow::Ok(Exit::Ok)
    })
}
