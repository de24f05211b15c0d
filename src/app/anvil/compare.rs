//! `anvil compare`: a matched set of artifacts against a baseline arm, or the refusal the
//! campaign's rules give.

use super::args::{CompareArgs, RulesFormat};
use super::{json, load_documents, open_session_materialized, runtime};
use crate::app::{AppError, Exit, output};
use crate::gather::rules_input::read_artifacts;
use crate::query::output::printable;
use crate::report::markdown::escape;
use crate::report::table::TextFormat;
use crate::report::text;
use crate::rules::{self, HeadlineSelection};

/// `anvil compare`: exit 0 compared, 3 refused, 2 bad input.
pub fn run(args: &CompareArgs) -> anyhow::Result<Exit> {
    let (manifest, plan, [m, p]) = load_documents(&args.manifest, &args.plan)?;
    let selection = HeadlineSelection::from_manifest(&manifest)
        .map_err(|e| AppError::wrap(Exit::BadInput, anyhow::anyhow!("{m}: {e}")))?;
    let rt = runtime()?;
    let (artifacts, baseline) = rt.block_on(async {
        let session = open_session_materialized("compare", &args.artifacts).await?;
        let artifacts = read_artifacts(&session).await?;
        // Default baseline: the arm of the first artifact named on the command line.
        let baseline = args.baseline.clone().or_else(|| {
            args.artifacts.iter().find_map(|dir| {
                session
                    .artifacts()
                    .iter()
                    .find(|source| source.dir.starts_with(dir))
                    .map(|source| source.run.arm.name.clone())
            })
        });
        anyhow::Ok((artifacts, baseline))
    })?;
    let Some(baseline) = baseline else {
        anyhow::bail!("no artifact (a folder holding run.json) under the ARTIFACT_DIRs given");
    };
    rules::one_campaign(&manifest, &plan, [&m, &p], &artifacts)?;
    match rules::compare_artifacts(&artifacts, &[], &baseline, &selection, &plan) {
        Ok(comparison) => {
            let text = match args.format {
                RulesFormat::Json => json(&comparison)?,
                RulesFormat::Table => {
                    printable(&text::comparison(&comparison, TextFormat::Text)).into_owned()
                }
                RulesFormat::Md => text::comparison(&comparison, TextFormat::Markdown),
            };
            output::stdout(&text, "the comparison")?;
            Ok(Exit::Ok)
        }
        Err(refusal) => {
            let text = match args.format {
                RulesFormat::Json => json(&refusal)?,
                RulesFormat::Md => text::refusal(&refusal)
                    .lines()
                    .map(|l| format!("{}\n", escape(l)))
                    .collect(),
                RulesFormat::Table => printable(&text::refusal(&refusal)).into_owned(),
            };
            output::stdout(&text, "the refusal")?;
            Ok(Exit::Refused)
        }
    }
}
