//! The appendix: metric definitions, the plan's text, and each run's servers and times.

use crate::manifest::RunPlan;
use crate::rules::input::Artifact;

use crate::report::format::NA;
use crate::report::input::*;
use crate::report::view::*;

/// Section 12: metric definitions and the runs' environment.
pub fn appendix_view(
    plan: &RunPlan,
    definitions: &[(String, String)],
    artifacts: &[Artifact],
    runs: &[RunInfo],
) -> AppendixView {
    AppendixView {
        definitions: definitions
            .iter()
            .map(|(name, text)| DefinitionView {
                name: name.clone(),
                text: text.clone(),
            })
            .collect(),
        runs: {
            let mut ordered: Vec<&Artifact> = artifacts.iter().collect();
            ordered.sort_by_key(|a| {
                (
                    crate::rules::stage::plan_rank(plan, &a.facts.arm),
                    a.facts.run_id.clone(),
                )
            });
            ordered
        }
        .into_iter()
        .map(|a| {
            let info = runs.iter().find(|r| r.run_id == a.facts.run_id);
            RunView {
                run_id: a.facts.run_id.clone(),
                arm: a.facts.arm.clone(),
                stage: a.facts.stage.clone(),
                class: format!("{}{}", a.facts.workload.class, a.facts.workload.api.note()),
                runtime: a.facts.runtime.clone(),
                config: a
                    .facts
                    .config
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                status: a.facts.status.as_str().to_owned(),
                started_utc: info.map_or_else(|| NA.to_owned(), |i| i.started_utc.clone()),
                ended_utc: info
                    .and_then(|i| i.ended_utc.clone())
                    .unwrap_or_else(|| NA.to_owned()),
                servers: info.map_or_else(String::new, |i| i.servers.join("; ")),
            }
        })
        .collect(),
    }
}
