//! Which arm each arm is compared with, and which artifacts are compared together: each
//! plan stage's comparisons are one-variable pairs on each performance workload the stage
//! recorded (one fingerprint), every arm against its **control**, the arm of the same stage
//! (or, where the stage has none, an earlier stage's selected arm) that differs from it in
//! exactly one configuration key.
//!
//! Within a stage, each pair of arms that differ in exactly one key is an edge; its direction
//! (which arm is the reference) is, in order: the arm whose value of that key is the campaign
//! default (the status quo: `spec_depth = 0`, `topology = TP1`) when exactly one of them holds
//! it; else the arm with more one-variable neighbours (the sweep's centre: K12 for a depth
//! sweep and a chunk sweep run at K12); else the arm the plan names first. An arm's control is
//! its reference with the most neighbours (then the plan's first); an arm that is nobody's
//! treatment is one of the stage's controls and has none.
//!
//! The headline comparison puts every headline artifact side by side, each arm still against
//! its own stage's control.

use std::collections::BTreeMap;

use super::compare::{Comparison, References, compare_artifacts};
use super::control::control;
use super::headline::{ClassKind, FUNCTIONAL_CLASS, HeadlineSelection, classify};
use super::input::Artifact;
use super::naming::named_arms;
use super::refusal::Refusal;
use crate::artifact::run::Status;
use crate::manifest::RunPlan;

/// One stage's comparison on one workload (or its refusal).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageComparison {
    /// The plan stage, e.g. `matched topology`.
    pub stage: String,
    /// The workload in words, e.g. `headline: 4096 tokens, C8 per replica`.
    pub workload: String,
    pub fingerprint: String,
    pub result: Result<Comparison, Refusal>,
}

impl StageComparison {
    /// `stage: workload`, the comparison's name.
    pub fn name(&self) -> String {
        format!("{}: {}", self.stage, self.workload)
    }
}

/// Position of `arm` in the plan's execution order (arms the plan does not name last).
pub fn plan_rank(plan: &RunPlan, arm: &str) -> usize {
    plan.stages_in_order()
        .iter()
        .flat_map(|stage| stage.arms())
        .position(|a| a == arm)
        .unwrap_or(usize::MAX)
}

/// The plan stage an artifact's arm belongs to: the stage whose arms name it, else the
/// stage its `run.json` records.
pub fn stage_of(plan: &RunPlan, artifact: &Artifact) -> String {
    plan.stages_in_order()
        .iter()
        .find(|stage| stage.arms().contains(&artifact.facts.arm))
        .map_or_else(|| artifact.facts.stage.clone(), |stage| stage.stage.clone())
}

/// One arm of a group: its name and a representative run.
fn distinct_arms<'a>(plan: &RunPlan, group: &[&'a Artifact]) -> Vec<&'a Artifact> {
    let mut arms: Vec<&Artifact> = Vec::new();
    for a in group {
        if !arms.iter().any(|b| b.facts.arm == a.facts.arm) {
            arms.push(a);
        }
    }
    arms.sort_by_key(|a| plan_rank(plan, &a.facts.arm));
    arms
}

/// Each arm of `group` (artifacts of one workload) with its control among `group` (see the
/// module documentation), in plan order.
pub fn stage_controls(plan: &RunPlan, group: &[&Artifact]) -> Vec<(String, Option<String>)> {
    let arms = distinct_arms(plan, group);
    let configs: Vec<_> = arms.iter().map(|a| a.facts.effective_config()).collect();
    let n = arms.len();
    // One-variable edges, with the key that differs.
    let mut key_of: BTreeMap<(usize, usize), String> = BTreeMap::new();
    for i in 0..n {
        for j in i + 1..n {
            if let super::control::Control::OneVariable { key, .. } =
                control(&configs[i], &configs[j])
            {
                key_of.insert((i, j), key);
            }
        }
    }
    let neighbours = |i: usize| key_of.keys().filter(|(a, b)| *a == i || *b == i).count();
    let default_of = |key: &str| arms.iter().find_map(|a| a.facts.defaults.get(key));
    // The reference of the edge (i, j), i < j (plan order).
    let reference = |i: usize, j: usize, key: &str| -> usize {
        if let Some(default) = default_of(key) {
            let holds = |k: usize| configs[k].get(key) == Some(default);
            match (holds(i), holds(j)) {
                (true, false) => return i,
                (false, true) => return j,
                _ => {}
            }
        }
        if neighbours(j) > neighbours(i) { j } else { i }
    };
    (0..n)
        .map(|a| {
            let control = key_of
                .iter()
                .filter_map(|(&(i, j), key)| {
                    let other = if i == a {
                        j
                    } else if j == a {
                        i
                    } else {
                        return None;
                    };
                    (reference(i, j, key) == other).then_some(other)
                })
                .max_by_key(|&r| (neighbours(r), std::cmp::Reverse(r)))
                .map(|r| arms[r].facts.arm.clone());
            (arms[a].facts.arm.clone(), control)
        })
        .collect()
}

/// Complete performance artifacts (functional checks carry no performance claim).
/// An artifact a stage comparison reads: complete, not a functional check, and not a capacity
/// search's probe (a search's evidence, read by its own ranking: two arms probed at the same
/// load are points of two searches, not a stage's comparison).
fn performance(artifact: &Artifact) -> bool {
    artifact.facts.status == Status::Complete
        && artifact.facts.workload.class != FUNCTIONAL_CLASS
        && artifact.facts.workload.probe.is_none()
}

/// The workload in words, with the API when it is not chat (the manifest's cells are chat).
fn describe_workload(artifact: &Artifact, selection: &HeadlineSelection) -> String {
    let w = &artifact.facts.workload;
    let class = if classify(&artifact.facts, selection).kind == ClassKind::Headline {
        "headline".to_owned()
    } else {
        w.class.clone()
    };
    format!(
        "{class}, {} tokens, C{} per replica{}",
        w.prompt_tokens_target,
        w.concurrency_per_replica,
        w.api.note()
    )
}

/// Every stage's comparisons (or only `only`'s): per stage in plan order, per performance
/// workload on which two or more of its arms were recorded, each arm against its control.
/// An arm without a control in its stage is compared with an earlier stage's selected arm
/// recorded on the same workload that differs from it in exactly one key, when there is one.
pub fn stage_comparisons(
    artifacts: &[Artifact],
    selection: &HeadlineSelection,
    plan: &RunPlan,
    only: Option<&str>,
) -> Vec<StageComparison> {
    let stages: Vec<String> = {
        let mut names: Vec<String> = plan
            .stages_in_order()
            .iter()
            .map(|s| s.stage.clone())
            .collect();
        for a in artifacts {
            let stage = stage_of(plan, a);
            if !names.contains(&stage) {
                names.push(stage);
            }
        }
        names
    };
    let mut out = Vec::new();
    for (order, stage) in stages.iter().enumerate() {
        if only.is_some_and(|o| o != stage) {
            continue;
        }
        let mut by_workload: BTreeMap<&str, Vec<&Artifact>> = BTreeMap::new();
        for a in artifacts
            .iter()
            .filter(|a| performance(a) && stage_of(plan, a) == *stage)
        {
            by_workload
                .entry(a.facts.fingerprint.as_str())
                .or_default()
                .push(a);
        }
        for (fingerprint, mut group) in by_workload {
            let mut controls = stage_controls(plan, &group);
            // Arms one key apart from no other arm of the stage: against an earlier
            // stage's selected arm one key apart, when there is one.
            let isolated: Vec<String> = distinct_arms(plan, &group)
                .iter()
                .filter(|a| {
                    let config = a.facts.effective_config();
                    !group.iter().any(|b| {
                        b.facts.arm != a.facts.arm
                            && control(&b.facts.effective_config(), &config).holds()
                    })
                })
                .map(|a| a.facts.arm.clone())
                .collect();
            if !isolated.is_empty() {
                for earlier in earlier_selected(plan, order, artifacts, &group) {
                    let config = earlier.facts.effective_config();
                    let mut used = false;
                    for (arm, control_arm) in controls.iter_mut() {
                        let own = group.iter().find(|a| a.facts.arm == *arm);
                        if control_arm.is_none()
                            && isolated.contains(arm)
                            && own.is_some_and(|own| {
                                control(&config, &own.facts.effective_config()).holds()
                            })
                        {
                            *control_arm = Some(earlier.facts.arm.clone());
                            used = true;
                        }
                    }
                    if used {
                        group.extend(artifacts.iter().filter(|a| {
                            a.facts.arm == earlier.facts.arm
                                && a.facts.fingerprint == fingerprint
                                && performance(a)
                        }));
                        controls.insert(0, (earlier.facts.arm.clone(), None));
                    }
                }
            }
            if distinct_arms(plan, &group).len() < 2 {
                continue;
            }
            group.sort_by_key(|a| plan_rank(plan, &a.facts.arm));
            let members: Vec<Artifact> = group.iter().map(|a| (*a).clone()).collect();
            let references = References::Controls {
                stage: Some(stage.clone()),
                controls,
            };
            out.push(StageComparison {
                stage: stage.clone(),
                workload: describe_workload(group[0], selection),
                fingerprint: fingerprint.to_owned(),
                result: compare_artifacts(&members, &[], &references, selection, plan),
            });
        }
    }
    out
}

/// The arms earlier stages selected (named by their `selected` claims), recorded on the
/// workload of `group` and not in it.
fn earlier_selected<'a>(
    plan: &RunPlan,
    order: usize,
    artifacts: &'a [Artifact],
    group: &[&Artifact],
) -> Vec<&'a Artifact> {
    let Some(fingerprint) = group.first().map(|a| a.facts.fingerprint.as_str()) else {
        return Vec::new();
    };
    let stages = plan.stages_in_order();
    let mut out: Vec<&Artifact> = Vec::new();
    for stage in stages.iter().take(order) {
        let Some(selected) = stage.selected.as_deref() else {
            continue;
        };
        for arm in named_arms(selected, stage, artifacts) {
            if group.iter().any(|a| a.facts.arm == arm) || out.iter().any(|a| a.facts.arm == arm) {
                continue;
            }
            if let Some(a) = artifacts.iter().find(|a| {
                a.facts.arm == arm && a.facts.fingerprint == fingerprint && performance(a)
            }) {
                out.push(a);
            }
        }
    }
    out
}

/// Every headline artifact side by side, each arm against its own stage's control among the
/// headline artifacts; `None` without headline artifacts.
pub fn headline_comparison(
    artifacts: &[Artifact],
    selection: &HeadlineSelection,
    plan: &RunPlan,
) -> Option<Result<Comparison, Refusal>> {
    let mut headline: Vec<Artifact> = artifacts
        .iter()
        .filter(|a| classify(&a.facts, selection).kind == ClassKind::Headline)
        .cloned()
        .collect();
    if headline.is_empty() {
        return None;
    }
    headline.sort_by_key(|a| plan_rank(plan, &a.facts.arm));
    let mut by_stage: BTreeMap<String, Vec<&Artifact>> = BTreeMap::new();
    for a in &headline {
        by_stage.entry(stage_of(plan, a)).or_default().push(a);
    }
    let mut controls: Vec<(String, Option<String>)> = by_stage
        .values()
        .flat_map(|group| stage_controls(plan, group))
        .collect();
    controls.sort_by_key(|(arm, _)| plan_rank(plan, arm));
    let references = References::Controls {
        stage: None,
        controls,
    };
    Some(compare_artifacts(
        &headline,
        &[],
        &references,
        selection,
        plan,
    ))
}

/// The rules' comparisons for the report: the headline comparison and every stage's.
pub fn comparisons(
    artifacts: &[Artifact],
    selection: &HeadlineSelection,
    plan: &RunPlan,
) -> (Option<Result<Comparison, Refusal>>, Vec<StageComparison>) {
    (
        headline_comparison(artifacts, selection, plan),
        stage_comparisons(artifacts, selection, plan, None),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::run::ArmConfig;
    use crate::rules::fixtures::{
        artifact, plan, screen_artifact as screen, selection, topology_stage,
    };

    fn controls_of(group: &[Artifact]) -> Vec<(String, Option<String>)> {
        stage_controls(&plan(), &group.iter().collect::<Vec<_>>())
    }

    fn pair(arm: &str, control: Option<&str>) -> (String, Option<String>) {
        (arm.to_owned(), control.map(str::to_owned))
    }

    #[test]
    fn a_sweep_is_read_against_its_centre_whatever_the_recording_order() {
        let group = [
            screen("r1", "K4", "4", "2048"),
            screen("r2", "K16", "16", "2048"),
            screen("r3", "chunk1K", "12", "1024"),
            screen("r4", "chunk8K", "12", "8192"),
            screen("r5", "K12", "12", "2048"),
        ];
        let expected = vec![
            pair("K4", Some("K12")),
            pair("K12", None),
            pair("K16", Some("K12")),
            pair("chunk1K", Some("K12")),
            pair("chunk8K", Some("K12")),
        ];
        assert_eq!(controls_of(&group), expected);
        let mut reversed = group.to_vec();
        reversed.reverse();
        assert_eq!(controls_of(&reversed), expected);
    }

    #[test]
    fn topology_arms_are_read_against_tp1() {
        assert_eq!(
            controls_of(&topology_stage(1900.0)),
            [
                pair("TP1", None),
                pair("TP2", Some("TP1")),
                pair("two independent TP1 replicas", Some("TP1")),
            ]
        );
    }

    #[test]
    fn the_campaign_default_decides_which_side_is_the_control() {
        // Two arms one key apart: without defaults the plan's first arm is the reference;
        // with spec_depth's default 0, the no-spec arm is, whatever the plan's order.
        let mtp = |run: &str, arm: &str, depth: &str| {
            let mut a = artifact(run, arm, &[("spec", "mtp"), ("spec_depth", depth)], 1.0);
            a.facts.stage = "alternate runtime".to_owned();
            a
        };
        let group = [
            mtp("r1", "kelnei vLLM 0.27.1 MTP2", "2"),
            mtp("r2", "matched no-spec", "0"),
        ];
        assert_eq!(
            controls_of(&group),
            [
                pair("kelnei vLLM 0.27.1 MTP2", None),
                pair("matched no-spec", Some("kelnei vLLM 0.27.1 MTP2")),
            ]
        );
        let defaults: ArmConfig = [("spec_depth", "0"), ("topology", "TP1")]
            .into_iter()
            .collect();
        let with_defaults: Vec<Artifact> = group
            .iter()
            .cloned()
            .map(|mut a| {
                a.facts.defaults = defaults.clone();
                a
            })
            .collect();
        assert_eq!(
            controls_of(&with_defaults),
            [
                pair("kelnei vLLM 0.27.1 MTP2", Some("matched no-spec")),
                pair("matched no-spec", None),
            ]
        );
    }

    #[test]
    fn stage_comparisons_pair_each_arm_with_its_control() {
        let mut all = topology_stage(1900.0);
        all.extend([
            screen("r1", "K4", "4", "2048"),
            screen("r2", "K12", "12", "2048"),
        ]);
        let stages = stage_comparisons(&all, &selection(), &plan(), None);
        let names: Vec<String> = stages.iter().map(StageComparison::name).collect();
        assert_eq!(
            names,
            [
                "SGLang optimization: optimization-screen, 4096 tokens, C4 per replica",
                "matched topology: headline, 4096 tokens, C8 per replica",
            ]
        );
        let topology = stages[1].result.as_ref().expect("not refused");
        assert_eq!(topology.references.of("TP2"), Some("TP1"));
        assert_eq!(
            topology.references.of("two independent TP1 replicas"),
            Some("TP1")
        );
        assert_eq!(topology.references.of("TP1"), None);
        let only = stage_comparisons(&all, &selection(), &plan(), Some("matched topology"));
        assert_eq!(only.len(), 1);
        // The headline comparison: each arm still against its own stage's control.
        let head = headline_comparison(&all, &selection(), &plan())
            .expect("headline artifacts")
            .expect("not refused");
        assert_eq!(head.arms.len(), 3);
        assert_eq!(head.references.of("TP2"), Some("TP1"));
        assert!(headline_comparison(&all[3..], &selection(), &plan()).is_none());
    }

    /// The same screen recorded over chat and over the Responses API is two workloads, the
    /// second named with its API.
    #[test]
    fn a_screen_on_the_responses_api_is_its_own_comparison_named_so() {
        let mut all = vec![
            screen("r1", "K4", "4", "2048"),
            screen("r2", "K12", "12", "2048"),
        ];
        for (id, arm, k) in [("r3", "K4", "4"), ("r4", "K12", "12")] {
            let mut a = screen(id, arm, k, "2048");
            a.facts.workload.api = crate::artifact::Api::Responses;
            a.facts.fingerprint = a.facts.workload.fingerprint();
            all.push(a);
        }
        let mut names: Vec<String> = stage_comparisons(&all, &selection(), &plan(), None)
            .iter()
            .map(StageComparison::name)
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "SGLang optimization: optimization-screen, 4096 tokens, C4 per replica",
                "SGLang optimization: optimization-screen, 4096 tokens, C4 per replica, \
                 Responses API",
            ]
        );
    }
}
