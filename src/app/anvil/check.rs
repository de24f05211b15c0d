//! `anvil check`: the campaign's rules over the artifacts against the run plan.

use std::path::PathBuf;

use super::args::{CheckArgs, RulesFormat};
use super::{json, open_session_materialized, runtime};
use crate::app::{Exit, output};
use crate::gather::evidence::evidence_files;
use crate::gather::rules_input::read_artifacts;
use crate::manifest::RunPlan;
use crate::query::output::printable;
use crate::report::table::TextFormat;
use crate::report::text;
use crate::rules::{self, Artifact, CheckReport, HeadlineSelection};

/// `anvil check`: exit 0 holds, 1 a stop rule fired or evidence contradicts a rule, 4
/// evidence missing, 2 bad input.
pub fn run(args: &CheckArgs) -> anyhow::Result<Exit> {
    let super::Evidence {
        data,
        docs,
        selection,
        slos,
    } = super::evidence("check", &args.evidence, &args.evidence.folders(&[]))?;
    let rt = runtime()?;
    let artifacts = rt.block_on(async {
        let session = open_session_materialized("check", &data, &slos).await?;
        anyhow::Ok(read_artifacts(&session).await?)
    })?;
    docs.one_campaign(&artifacts)?;
    let plan = docs.plan;
    let report = check_data(
        &plan,
        &selection,
        &artifacts,
        &data,
        &docs.manifest.controls,
    )?;
    let text = match args.format {
        RulesFormat::Json => {
            let mut value = serde_json::to_value(&report)?;
            if let Some(object) = value.as_object_mut() {
                object.insert(
                    "slos".into(),
                    serde_json::json!({
                        "slos": slos.to_json(),
                        "source": slos.source.column(),
                        "affects_verdict": false,
                    }),
                );
            }
            json(&value)?
        }
        RulesFormat::Table => printable(&text::check(&report, TextFormat::Text)).into_owned(),
        RulesFormat::Md => text::check(&report, TextFormat::Markdown),
    };
    output::stdout(&text, "the report")?;
    Ok(report.outcome.into())
}

/// The rules' check of `artifacts` against `plan`, the evidence files being every file
/// name beneath the `data` folders.
pub fn check_data(
    plan: &RunPlan,
    selection: &HeadlineSelection,
    artifacts: &[Artifact],
    data: &[PathBuf],
    controls: &[String],
) -> anyhow::Result<CheckReport> {
    let mut evidence = evidence_files(plan, data)?;
    evidence.manifest_controls = controls.to_vec();
    for unread in &evidence.unread {
        eprintln!("anvil: {unread}");
    }
    Ok(rules::check(plan, selection, artifacts, &evidence))
}
