//! `anvil summary`: the statistics of every artifact, as a text table per artifact or the
//! flat rows as CSV or JSON.

use std::io::Write;

use anyhow::Context;

use super::args::SummaryArgs;
use super::{open_session, resolve_slos, runtime};
use crate::app::Exit;
use crate::app::output::Sink;
use crate::gather::summary::{self, SUMMARY_SQL};
use crate::query::{Format, write_result};

/// `anvil summary`: the statistics of every artifact from `cell_stats`; a text table per
/// artifact, or the flat rows of [`SUMMARY_SQL`] as CSV or JSON.
pub fn run(args: &SummaryArgs) -> anyhow::Result<Exit> {
    let data = super::resolve_data(&args.data.data)?;
    let slos = resolve_slos("summary", &args.slo, &data)?;
    let rt = runtime()?;
    rt.block_on(async {
        let session = open_session("summary", &data, &slos).await?;
        let mut out = Sink::open(None)?;
        match Format::from(args.format) {
            Format::Table => {
                let summary = summary::read(&session).await?;
                out.write_all(
                    crate::query::output::printable(&crate::report::summary::render(&summary))
                        .as_bytes(),
                )
                .context("writing the summary")?;
            }
            format => {
                let rows = session.query(SUMMARY_SQL).await?;
                write_result(&mut out, format, &rows)?;
            }
        }
        out.finish().context("writing the summary")?;
        Ok(Exit::Ok)
    })
}
