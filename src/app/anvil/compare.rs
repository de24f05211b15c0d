//! `anvil compare`: each stage's arms against their one-variable controls, or a matched set
//! of artifacts against one baseline arm, or the refusal the campaign's rules give.

use super::args::{CompareArgs, RulesFormat};
use super::{json, open_session_materialized, runtime};
use crate::app::{AppError, Exit, output};
use crate::gather::rules_input::{read_artifacts, read_tradeoff};
use crate::query::output::printable;
use crate::report::markdown::escape;
use crate::report::table::TextFormat;
use crate::report::text;
use crate::rules::input::TradeoffPoint;
use crate::slo::Slos;
use std::path::PathBuf;

use crate::manifest::RunPlan;
use crate::rules::control::control;
use crate::rules::stage::{stage_controls, stage_of};
use crate::rules::{self};

/// `anvil compare`: exit 0 compared, 3 refused, 2 bad input.
pub fn run(args: &CompareArgs) -> anyhow::Result<Exit> {
    let super::Evidence {
        data,
        docs,
        selection,
        slos,
    } = super::evidence(
        "compare",
        &args.evidence,
        &args.evidence.folders(&args.artifacts),
    )?;
    let rt = runtime()?;
    let (artifacts, session_dirs, locations, tradeoff) = rt.block_on(async {
        let session = open_session_materialized("compare", &data, &slos).await?;
        let dirs: Vec<(PathBuf, String)> = session
            .artifacts()
            .iter()
            .map(|source| (source.dir.clone(), source.run.arm.name.clone()))
            .collect();
        let locations: Vec<String> = session
            .artifacts()
            .iter()
            .map(|source| source.location.clone())
            .collect();
        let caches: Vec<(String, String, String)> = session
            .artifacts()
            .iter()
            .map(|source| {
                (
                    source.run.arm.name.clone(),
                    source.run.run_id.clone(),
                    cache_state(&source.run),
                )
            })
            .collect();
        anyhow::Ok((
            (read_artifacts(&session).await?, caches),
            dirs,
            locations,
            read_tradeoff(&session).await?,
        ))
    })?;
    let (artifacts, caches) = artifacts;
    let extras = Extras {
        slos: &slos,
        tradeoff: &tradeoff,
        caches: &caches,
    };
    if let Some(empty) = folder_without_artifact(&args.artifacts, &session_dirs) {
        return Err(AppError::wrap(
            Exit::BadInput,
            anyhow::anyhow!(
                "{}: no artifact (a folder holding run.json) at or beneath it; give an artifact folder or a data folder that holds some",
                empty.display()
            ),
        ));
    }
    if artifacts.is_empty() {
        anyhow::bail!("no artifact (a folder holding run.json) under the ARTIFACT_DIRs given");
    }
    docs.one_campaign(&artifacts)?;
    let ([_, p], plan) = (docs.names, docs.plan);
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
    // Artifacts of several plan stages and workloads (a campaign), with no baseline named,
    // are compared stage by stage: each stage's arms against their controls, workload by
    // workload.
    let stages_recorded: std::collections::BTreeSet<String> =
        artifacts.iter().map(|a| stage_of(&plan, a)).collect();
    let workloads: std::collections::BTreeSet<&str> = artifacts
        .iter()
        .map(|a| a.facts.fingerprint.as_str())
        .collect();
    // Artifact folders named one by one are compared as given: a refusal then names what
    // differs between them, rather than a stage-by-stage reading finding nothing to compare.
    let one_by_one = !args.artifacts.is_empty()
        && args.evidence.data.is_empty()
        && args.artifacts.iter().all(|named| {
            let named = named.to_string_lossy();
            let named = named.trim_end_matches('/');
            locations.iter().any(|l| l.trim_end_matches('/') == named)
        });
    let by_stage =
        !one_by_one && args.baseline.is_none() && stages_recorded.len() > 1 && workloads.len() > 1;
    if args.stage.is_some() || by_stage {
        let mut stages =
            rules::stage_comparisons(&artifacts, &selection, &plan, args.stage.as_deref());
        // Read as the campaign file beside the data says (its min_effect and slo_target).
        let reading =
            rules::check::Reading::of(&crate::gather::evidence::evidence_files(&plan, &data)?);
        for c in stages.iter_mut().filter_map(|s| s.result.as_mut().ok()) {
            reading.apply(c);
        }
        let text = match args.format {
            RulesFormat::Json => json(&extras.json(serde_json::json!({
                "stages": stages_json(&stages)
            })))?,
            RulesFormat::Table => printable(&extras.text(
                text::stage_comparisons(&stages, TextFormat::Text),
                TextFormat::Text,
            ))
            .into_owned(),
            RulesFormat::Md => extras.text(
                text::stage_comparisons(&stages, TextFormat::Markdown),
                TextFormat::Markdown,
            ),
        };
        output::stdout(&text, "the comparison")?;
        // Nothing compared is no success: a script reading the exit code must not take it
        // for one.
        let refused = stages.iter().all(|s| s.result.is_err());
        return Ok(if refused { Exit::Refused } else { Exit::Ok });
    }
    let references = match &args.baseline {
        Some(baseline) => rules::References::Baseline(baseline.clone()),
        None => set_controls(&plan, &artifacts, &data, &session_dirs),
    };
    match rules::compare_artifacts(&artifacts, &[], &references, &selection, &plan) {
        Ok(comparison) => {
            let text = match args.format {
                RulesFormat::Json => json(&extras.json(serde_json::to_value(&comparison)?))?,
                RulesFormat::Table => printable(&extras.text(
                    text::comparison(&comparison, TextFormat::Text),
                    TextFormat::Text,
                ))
                .into_owned(),
                RulesFormat::Md => extras.text(
                    text::comparison(&comparison, TextFormat::Markdown),
                    TextFormat::Markdown,
                ),
            };
            output::stdout(&text, "the comparison")?;
            Ok(Exit::Ok)
        }
        Err(refusal) => {
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

/// What every comparison output carries beside the comparisons: the SLOs in force and the
/// throughput-per-GPU against throughput-per-user trade-off with its Pareto frontier.
struct Extras<'a> {
    slos: &'a Slos,
    tradeoff: &'a [TradeoffPoint],
    /// Per run: (arm, run id, what was done about the prefix cache before it).
    caches: &'a [(String, String, String)],
}

/// What was done about the servers' prefix caches before `run`: `reset`, `reset not
/// available`, `reset failed`, `no reset` (salted: nothing of another run cached), or `warm
/// (salt off)`.
fn cache_state(run: &crate::artifact::RunJson) -> String {
    let Some(h) = &run.cache_hygiene else {
        return "no reset".to_owned();
    };
    if !h.salted {
        return "warm (salt off)".to_owned();
    }
    let outcomes: std::collections::BTreeSet<&str> =
        h.resets.iter().map(|r| r.outcome.as_str()).collect();
    match outcomes.iter().next() {
        None => "no reset".to_owned(),
        Some(_) if outcomes.len() > 1 => "reset on some replicas".to_owned(),
        Some(&"reset") => "reset".to_owned(),
        Some(&"not_available") => "reset not available".to_owned(),
        Some(o) => format!("reset {o}"),
    }
}

impl Extras<'_> {
    /// When the runs differ in what was done about the cache (salted all: a difference in
    /// reset is shown, never refused), one line saying how; `None` when they agree.
    fn cache_note(&self) -> Option<String> {
        let states: std::collections::BTreeSet<&str> =
            self.caches.iter().map(|(_, _, s)| s.as_str()).collect();
        (states.len() > 1).then(|| {
            let mut by_state: std::collections::BTreeMap<&str, Vec<String>> =
                std::collections::BTreeMap::new();
            for (arm, run, state) in self.caches {
                by_state
                    .entry(state.as_str())
                    .or_default()
                    .push(format!("{arm} ({run})"));
            }
            let parts: Vec<String> = by_state
                .iter()
                .map(|(state, runs)| format!("{state}: {}", runs.join(", ")))
                .collect();
            format!(
                "Prefix cache before the runs differs (every run's prompts are its own, so \
                 none found another's; a reset also empties what the server held before): {}\n",
                parts.join("; ")
            )
        })
    }
}

impl Extras<'_> {
    /// `value` (a JSON object) with `slos`, `frontier` (per performance workload and window,
    /// the arms on it) and `tradeoff` (every point of those workloads).
    fn json(&self, value: serde_json::Value) -> serde_json::Value {
        let mut value = value;
        let frontier: Vec<serde_json::Value> = crate::report::sections::slo::frontier_arms(self.tradeoff)
            .into_iter()
            .map(|(group, window, arms)| {
                serde_json::json!({"frontier_group": group, "window": window, "arms": arms})
            })
            .collect();
        let points: Vec<&TradeoffPoint> = self
            .tradeoff
            .iter()
            .filter(|p| crate::report::sections::slo::performance_group(&p.frontier_group))
            .collect();
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "slos".into(),
                serde_json::json!({
                    "slos": self.slos.to_json(),
                    "source": self.slos.source.column(),
                }),
            );
            object.insert("frontier".into(), serde_json::Value::Array(frontier));
            object.insert(
                "cache".into(),
                self.caches
                    .iter()
                    .map(|(arm, run, state)| {
                        serde_json::json!({"arm": arm, "run_id": run, "before_run": state})
                    })
                    .collect(),
            );
            object.insert(
                "tradeoff".into(),
                serde_json::to_value(points).unwrap_or_default(),
            );
        }
        value
    }

    /// `body` with the SLOs in force first and the trade-off after it.
    fn text(&self, body: String, format: TextFormat) -> String {
        let slos = if self.slos.is_empty() {
            "SLOs: none given (--slo 'ttft_ms<=2000', or a campaign file's `slo` section): no attainment or goodput\n".to_owned()
        } else {
            format!("SLOs: {} (from {})\n", self.slos.text(), self.slos.source)
        };
        let slos = match format {
            TextFormat::Markdown => format!("{}\n", escape(slos.trim_end())),
            TextFormat::Text => slos,
        };
        let cache = self
            .cache_note()
            .map_or_else(String::new, |note| match format {
                TextFormat::Markdown => format!("{}\n\n", escape(note.trim_end())),
                TextFormat::Text => note,
            });
        format!(
            "{slos}{cache}{body}\n{}",
            text::frontier(self.tradeoff, format)
        )
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

/// The first local folder among the explicit `given` arguments that holds none of the
/// artifacts the session found (`found`: each artifact's folder), so it is named rather than
/// silently counted as nothing.
fn folder_without_artifact<'a>(
    given: &'a [PathBuf],
    found: &[(PathBuf, String)],
) -> Option<&'a PathBuf> {
    let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let found: Vec<PathBuf> = found.iter().map(|(dir, _)| canonical(dir)).collect();
    given.iter().filter(|g| g.is_dir()).find(|g| {
        let g = canonical(g);
        !found.iter().any(|dir| dir.starts_with(&g))
    })
}
