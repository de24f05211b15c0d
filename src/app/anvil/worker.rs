//! `anvil worker --listen ADDR`: a worker of the distributed SQL engine
//! ([`crate::query::distributed`]).

use super::args::WorkerArgs;
use crate::app::{AppError, Exit, output};

/// Serve until stopped; bad input (exit 2) when the address cannot be bound.
pub fn run(args: &WorkerArgs) -> anyhow::Result<Exit> {
    let rt = super::runtime()?;
    rt.block_on(async {
        let (listener, addr) = crate::query::distributed::bind(&args.listen)
            .await
            .map_err(|e| AppError::wrap(Exit::BadInput, anyhow::anyhow!(e)))?;
        output::stdout(
            &format!("anvil worker listening on http://{addr}\n"),
            "the worker's address",
        )?;
        crate::query::distributed::serve(listener)
            .await
            .map_err(|e| AppError::wrap(Exit::Failed, anyhow::anyhow!(e)))?;
        anyhow::Ok(Exit::Ok)
    })
}
