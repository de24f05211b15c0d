//! `anvil verify`: recompute every figure with polars and compare it with the SQL.

use std::io::Write;

use anyhow::Context;

use super::args::VerifyArgs;
use super::{open_session, resolve_slos, runtime};
use crate::app::Exit;
use crate::app::output::Sink;

/// `anvil verify`: recompute with polars, compare with the SQL, print the largest relative
/// difference per metric; exit 1 when one exceeds [`crate::verify::TOLERANCE`].
pub fn run(args: &VerifyArgs) -> anyhow::Result<Exit> {
    use crate::verify;

    let data = super::resolve_data(&args.data.data)?;
    let slos = resolve_slos("verify", &args.slo, &data)?;
    let rt = runtime()?;
    rt.block_on(async {
        let session = open_session("verify", &data, &slos).await?;
        let mut recomputed = Vec::with_capacity(session.artifacts().len());
        for artifact in session.artifacts() {
            let artifact = &artifact.localized()?;
            // polars reads the files itself; a panic there (a damaged table that passed the
            // footer checks) is an error naming the artifact, not an abort.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let bounds = verify::Bound::of_class(&slos, &artifact.run.workload.class);
                verify::recompute(artifact, &bounds)
            }))
            .map_err(|_| {
                anyhow::anyhow!(
                    "{}: polars could not read the tables (it stopped on them); the artifact is \
                     damaged: re-record the run",
                    artifact.location
                )
            })?
            .with_context(|| format!("{}: recomputing with polars", artifact.location))?;
            recomputed.push(r);
        }
        let mut differences = verify::compare(&session, &recomputed).await?;
        let searches: Vec<crate::artifact::capacity::CapacityResult> =
            super::capacity_beside("verify", &data)
                .into_iter()
                .map(|c| c.search)
                .collect();
        differences.extend(verify::capacity(&recomputed, &searches));
        let mut out = Sink::open(None)?;
        for d in &differences {
            writeln!(out, "{d}").context("writing the result")?;
        }
        let failing = differences.iter().filter(|d| !d.within_tolerance()).count();
        if failing == 0 {
            writeln!(
                out,
                "verify: {} artifact(s): SQL and polars agree within {:e} relative",
                recomputed.len(),
                verify::TOLERANCE
            )
            .context("writing the result")?;
            out.finish().context("writing the result")?;
            Ok(Exit::Ok)
        } else {
            out.finish().context("writing the result")?;
            eprintln!(
                "anvil verify: {failing} figure famil{} differ by more than {:e} relative",
                if failing == 1 { "y" } else { "ies" },
                verify::TOLERANCE
            );
            Ok(Exit::RuleFailed)
        }
    })
}
