//! `anvil compare`: each stage's arms against their one-variable controls, or a matched set
//! of artifacts against one baseline arm, or the refusal the campaign's rules give.

use super::args::{CompareArgs, RulesFormat};
use super::{json, load_documents, open_session_materialized, runtime};
use crate::app::{AppError, Exit, output};
use crate::gather::rules_input::read_artifacts;
use crate::query::output::printable;
use crate::report::markdown::escape;
use crate::report::table::TextFormat;
use crate::report::text;
use std::path::PathBuf;

use crate::manifest::RunPlan;
use crate::rules::control::control;
use crate::rules::stage::{stage_controls, stage_of};
use crate::rules::{self, HeadlineSelection};

/// `anvil compare`: exit 0 compared, 3 refused, 2 bad input.
pub fn run(args: &CompareArgs) -> anyhow::Result<Exit> {
    let (manifest, plan, [m, p]) = load_documents(&args.manifest, &args.plan)?;
    let selection = HeadlineSelection::from_manifest(&manifest)
        .map_err(|e| AppError::wrap(Exit::BadInput, anyhow::anyhow!("{m}: {e}")))?;
    let rt = runtime()?;
    let (artifacts, session_dirs) = rt.block_on(async {
        let session = open_session_materialized("compare", &args.artifacts).await?;
        let dirs: Vec<(PathBuf, String)> = session
            .artifacts()
            .iter()
            .map(|source| (source.dir.clone(), source.run.arm.name.clone()))
            .collect();
        anyhow::Ok((read_artifacts(&session).await?, dirs))
    })?;
    if artifacts.is_empty() {
        anyhow::bail!("no artifact (a folder holding run.json) under the ARTIFACT_DIRs given");
    }
    rules::one_campaign(&manifest, &plan, [&m, &p], &artifacts)?;
    if let Some(stage) = &args.stage {
        let known =
            plan.stage(stage).is_some() || artifacts.iter().any(|a| stage_of(&plan, a) == *stage);
        if !known {
            let names: Vec<&str> = plan
                .stages_in_order()
                .iter()
                .map(|s| s.stage.as_str())
                .collect();
            return Err(AppError::wrap(
                Exit::BadInput,
                anyhow::anyhow!(
                    "--stage {stage:?}: {p} has no such stage (stages: {})",
                    names.join(", ")
                ),
            ));
        }
    }
    if args.stage.is_some() {
        let stages = rules::stage_comparisons(&artifacts, &selection, &plan, args.stage.as_deref());
        let text = match args.format {
            RulesFormat::Json => json(&stages_json(&stages))?,
            RulesFormat::Table => {
                printable(&text::stage_comparisons(&stages, TextFormat::Text)).into_owned()
            }
            RulesFormat::Md => text::stage_comparisons(&stages, TextFormat::Markdown),
        };
        output::stdout(&text, "the comparison")?;
        let refused = !stages.is_empty() && stages.iter().all(|s| s.result.is_err());
        return Ok(if refused { Exit::Refused } else { Exit::Ok });
    }
    let references = match &args.baseline {
        Some(baseline) => rules::References::Baseline(baseline.clone()),
        None => set_controls(&plan, &artifacts, &args.artifacts, &session_dirs),
    };
    match rules::compare_artifacts(&artifacts, &[], &references, &selection, &plan) {
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
            let workloads: std::collections::BTreeSet<&str> = artifacts
                .iter()
                .map(|a| a.facts.fingerprint.as_str())
                .collect();
            let hint = (workloads.len() > 1 && args.baseline.is_none()).then(|| {
                let stages: Vec<&str> = plan
                    .stages_in_order()
                    .iter()
                    .filter(|s| !s.arms().is_empty())
                    .map(|s| s.stage.as_str())
                    .collect();
                format!(
                    "hint: these artifacts hold {} workloads; compare one plan stage's arms, \
                     workload by workload, with --stage NAME (stages: {})\n",
                    workloads.len(),
                    stages.join(", ")
                )
            });
            let text = match args.format {
                RulesFormat::Json => json(&refusal)?,
                RulesFormat::Md => text::refusal(&refusal)
                    .lines()
                    .map(|l| format!("{}\n", escape(l)))
                    .collect(),
                RulesFormat::Table => printable(&text::refusal(&refusal)).into_owned(),
            };
            let text = match (&hint, args.format) {
                (Some(hint), RulesFormat::Table | RulesFormat::Md) => text + hint,
                _ => text,
            };
            output::stdout(&text, "the refusal")?;
            Ok(Exit::Refused)
        }
    }
}

/// Each arm of the artifacts given against its one-variable control among them; an arm one
/// key apart from no other (nothing recorded says how it differs) against the arm of the
/// first ARTIFACT_DIR, so that the control verdict says why the comparison is not one.
fn set_controls(
    plan: &RunPlan,
    artifacts: &[rules::Artifact],
    given: &[PathBuf],
    dirs: &[(PathBuf, String)],
) -> rules::References {
    let group: Vec<&rules::Artifact> = artifacts.iter().collect();
    let mut controls = stage_controls(plan, &group);
    let first_arm = given
        .iter()
        .find_map(|dir| dirs.iter().find(|(d, _)| d.starts_with(dir)))
        .map(|(_, arm)| arm.clone());
    let isolated = |arm: &str| {
        let config = |a: &rules::Artifact| a.facts.effective_config();
        let Some(own) = artifacts.iter().find(|a| a.facts.arm == arm) else {
            return false;
        };
        !artifacts
            .iter()
            .any(|b| b.facts.arm != arm && control(&config(b), &config(own)).holds())
    };
    if let Some(first) = first_arm {
        for (arm, reference) in controls.iter_mut() {
            if reference.is_none() && *arm != first && isolated(arm) {
                *reference = Some(first.clone());
            }
        }
    }
    rules::References::Controls {
        stage: None,
        controls,
    }
}

/// The stage comparisons as JSON: each stage, workload and fingerprint with its comparison
/// or refusal.
fn stages_json(stages: &[rules::StageComparison]) -> serde_json::Value {
    serde_json::Value::Array(
        stages
            .iter()
            .map(|s| {
                let (key, value) = match &s.result {
                    Ok(c) => ("comparison", serde_json::to_value(c)),
                    Err(r) => ("refusal", serde_json::to_value(r)),
                };
                serde_json::json!({
                    "stage": s.stage,
                    "workload": s.workload,
                    "fingerprint": s.fingerprint,
                    key: value.unwrap_or(serde_json::Value::Null),
                })
            })
            .collect(),
    )
}
