//! Which arm the others are read against, and which artifacts are compared together: the
//! headline comparison (every artifact of the headline workload, against the plan's first
//! arm) and one within-screen comparison per optimization screen (artifacts of one stage
//! and one workload fingerprint, against the sweep's centre).

use std::collections::BTreeMap;

use super::control::control;
use super::headline::{ClassKind, classify};
use super::{Artifact, Comparison, HeadlineSelection, Refusal};
use crate::manifest::RunPlan;

/// A screen's comparison (or its refusal).
#[derive(Debug, Clone, PartialEq)]
pub struct ScreenResult {
    /// The screen, e.g. the plan stage `SGLang optimization`.
    pub name: String,
    pub result: Result<Comparison, Refusal>,
}

/// The headline comparison's baseline: the first of the plan's arms (in execution order)
/// that the group holds, else the group's first arm.
pub fn plan_first_arm(plan: &RunPlan, group: &[Artifact]) -> String {
    plan.execution_order
        .iter()
        .flat_map(|stage| stage.arms.iter().flatten())
        .find(|arm| group.iter().any(|a| &a.facts.arm == *arm))
        .cloned()
        .unwrap_or_else(|| group[0].facts.arm.clone())
}

/// A screen's baseline: of the group's arms, the one that the
/// most other arms differ from in exactly one configuration key (so a sweep is read against
/// its centre, e.g. K12 for a depth sweep and a chunk sweep run at K12); ties go to the
/// arm the plan names first, then to the first recorded.
pub fn sweep_centre_arm(plan: &RunPlan, group: &[Artifact]) -> String {
    let plan_rank = |arm: &str| {
        plan.execution_order
            .iter()
            .flat_map(|stage| stage.arms.iter().flatten())
            .position(|a| a == arm)
            .unwrap_or(usize::MAX)
    };
    let mut arms: Vec<&Artifact> = Vec::new();
    for a in group {
        if !arms.iter().any(|b| b.facts.arm == a.facts.arm) {
            arms.push(a);
        }
    }
    let one_variable = |base: &Artifact| {
        arms.iter()
            .filter(|a| control(&base.facts.config, &a.facts.config).holds())
            .count()
    };
    arms.iter()
        .enumerate()
        .max_by_key(|(i, a)| {
            (
                one_variable(a),
                std::cmp::Reverse(plan_rank(&a.facts.arm)),
                std::cmp::Reverse(*i),
            )
        })
        .map_or_else(String::new, |(_, a)| a.facts.arm.clone())
}

/// The rules' comparisons for the report: the headline comparison over every artifact
/// whose workload is the headline selection, and one within-screen comparison per
/// optimization screen (artifacts of one stage and one fingerprint).
pub fn comparisons(
    artifacts: &[Artifact],
    selection: &HeadlineSelection,
    plan: &RunPlan,
) -> (Option<Result<Comparison, Refusal>>, Vec<ScreenResult>) {
    let headline: Vec<Artifact> = artifacts
        .iter()
        .filter(|a| classify(&a.facts, selection).kind == ClassKind::Headline)
        .cloned()
        .collect();
    let headline = (!headline.is_empty()).then(|| {
        let baseline = plan_first_arm(plan, &headline);
        super::compare_artifacts(&headline, &[], &baseline, selection, plan)
    });
    let mut screens: BTreeMap<(usize, String, String), Vec<Artifact>> = BTreeMap::new();
    for a in artifacts {
        if classify(&a.facts, selection).kind != ClassKind::OptimizationScreen {
            continue;
        }
        let order = plan
            .execution_order
            .iter()
            .position(|s| s.stage == a.facts.stage)
            .unwrap_or(usize::MAX);
        screens
            .entry((order, a.facts.stage.clone(), a.facts.fingerprint.clone()))
            .or_default()
            .push(a.clone());
    }
    let screens = screens
        .into_iter()
        .map(|((_, stage, _), group)| {
            let w = &group[0].facts.workload;
            let name = format!(
                "{stage}: {} tokens, C{} per replica",
                w.prompt_tokens_target, w.concurrency_per_replica
            );
            let baseline = sweep_centre_arm(plan, &group);
            ScreenResult {
                name,
                result: super::compare_artifacts(&group, &[], &baseline, selection, plan),
            }
        })
        .collect();
    (headline, screens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::fixtures::{artifact, plan, screen_workload, selection};

    /// An optimization-screen artifact of `arm` in the plan's `SGLang optimization` stage.
    fn screen(run_id: &str, arm: &str, depth: &str, chunk: &str) -> Artifact {
        let mut a = artifact(
            run_id,
            arm,
            &[("spec_depth", depth), ("chunked_prefill", chunk)],
            100.0,
        );
        a.facts.stage = "SGLang optimization".to_owned();
        a.facts.workload = screen_workload();
        a.facts.fingerprint = a.facts.workload.fingerprint();
        a
    }

    #[test]
    fn the_headline_baseline_is_the_plans_first_arm_the_group_holds() {
        let group = [
            artifact("r-k8", "Inferact DFlash2 K8", &[("spec_depth", "8")], 100.0),
            artifact("r-t", "Inferact target-only", &[("spec_depth", "0")], 90.0),
        ];
        assert_eq!(plan_first_arm(&plan(), &group), "Inferact target-only");
        // Arms the plan does not name: the group's first.
        let unnamed = [
            artifact("r-x", "X", &[], 1.0),
            artifact("r-y", "Y", &[], 1.0),
        ];
        assert_eq!(plan_first_arm(&plan(), &unnamed), "X");
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
        assert_eq!(sweep_centre_arm(&plan(), &group), "K12");
        let mut reversed = group.to_vec();
        reversed.reverse();
        assert_eq!(sweep_centre_arm(&plan(), &reversed), "K12");
    }

    #[test]
    fn a_tie_goes_to_the_arm_the_plan_names_first() {
        // K16 and K4 differ from each other in one key: each is one arm's one-variable base.
        let group = [
            screen("r1", "K16", "16", "2048"),
            screen("r2", "K4", "4", "2048"),
        ];
        assert_eq!(sweep_centre_arm(&plan(), &group), "K4");
    }

    #[test]
    fn comparisons_split_the_headline_from_each_screen() {
        let headline = [
            artifact("r-t", "Inferact target-only", &[("spec_depth", "0")], 90.0),
            artifact("r-k8", "Inferact DFlash2 K8", &[("spec_depth", "8")], 100.0),
        ];
        let screens = [
            screen("r1", "K4", "4", "2048"),
            screen("r2", "K12", "12", "2048"),
        ];
        let all: Vec<Artifact> = headline.iter().chain(&screens).cloned().collect();
        let (head, screens) = comparisons(&all, &selection(), &plan());
        let head = head.expect("a headline comparison").expect("not refused");
        assert_eq!(head.baseline, "Inferact target-only");
        assert_eq!(screens.len(), 1, "{screens:?}");
        assert_eq!(
            screens[0].name,
            "SGLang optimization: 4096 tokens, C4 per replica"
        );
        let screen = screens[0].result.as_ref().expect("not refused");
        assert_eq!(screen.baseline, "K4");
        // No headline artifact: no headline comparison attempted.
        let (head, _) = comparisons(&all[2..], &selection(), &plan());
        assert!(head.is_none());
    }
}
