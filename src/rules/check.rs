//! The overall verdict of `anvil check`: every advance rule per arm, every stage's
//! comparisons, every stop rule, plan coverage, and the campaign's [`Outcome`].
//!
//! [`Outcome::Holds`]: every advance rule holds (or does not apply), no claim is contradicted
//! and no stop rule fired; [`Outcome::StopRuleFired`] / [`Outcome::RuleFailed`]: a stop rule
//! fired, or recorded evidence contradicts an advance rule or a stage's claim;
//! [`Outcome::Incomplete`]: nothing fired or failed but evidence is missing (an advance rule
//! not run, a plan arm without artifacts). A claim the evidence cannot test is information,
//! not missing evidence; so is an advance rule asking for a quantity anvil does not record,
//! which the outcome names ("every measurable rule holds; 1 not testable: …"). Bad input is the caller's to report before the rules run; the edge
//! maps outcomes to exit codes.

use serde::Serialize;

use crate::manifest::RunPlan;

use super::advance::{AdvanceRule, Verdict, canaries, completion, functional, performance_claim};
use super::coverage::{ClaimVerdict, Evidence, PlanCoverage, plan_coverage};
use super::headline::HeadlineSelection;
use super::input::Artifact;
use super::stage::{StageComparison, headline_comparison, stage_comparisons};
use super::stop::{EvidenceFiles, RestoreEvidence, StopFinding, restore_evidence, stop_rules};
use super::topology::{self, TopologyAssessment};

/// One arm's advance-rule verdicts, in the plan's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmAdvance {
    pub arm: String,
    pub rules: Vec<(AdvanceRule, Verdict)>,
}

/// The campaign's state. Shown by its [`Outcome::label`] (`Display`) in `check`, the
/// report and the Markdown alike; named in JSON by [`Outcome::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every advance rule holds and no stop rule fired.
    Holds,
    /// At least one stop rule fired.
    StopRuleFired,
    /// No stop rule fired, but the evidence contradicts an advance rule or a claim.
    RuleFailed,
    /// Nothing failed, but evidence is missing.
    Incomplete,
}

impl Outcome {
    /// The outcome in words, wherever a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::StopRuleFired => "stop rule fired",
            Outcome::RuleFailed => "rule failed",
            Outcome::Incomplete => "incomplete",
        }
    }

    /// Its machine name, as JSON writes it.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::StopRuleFired => "stop_rule_fired",
            Outcome::RuleFailed => "rule_failed",
            Outcome::Incomplete => "incomplete",
        }
    }

    /// Whether a stop rule fired or a rule failed.
    pub fn failed(self) -> bool {
        matches!(self, Outcome::StopRuleFired | Outcome::RuleFailed)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Everything `anvil check` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    pub arms: Vec<ArmAdvance>,
    /// Every stage's comparisons: each arm against its one-variable control, per workload.
    pub stages: Vec<StageComparison>,
    /// Topology comparisons, one per stage comparison holding arms one topology apart.
    pub topology: Vec<TopologyAssessment>,
    pub stops: Vec<StopFinding>,
    /// What each restore stage's evidence shows.
    pub restore: Vec<RestoreEvidence>,
    pub coverage: PlanCoverage,
    pub outcome: Outcome,
    /// Why, one line per cause.
    pub reasons: Vec<String>,
    /// The advance rules no recording could satisfy (a quantity anvil does not record), one
    /// line each: `arm: "rule": why`.
    pub not_testable: Vec<String>,
    /// Each manifest control mapped to the comparisons that realise it, its method, or why
    /// neither.
    pub controls: Vec<super::controls::ControlCoverage>,
    /// The smallest difference that matters, as a share of the reference's figure, the
    /// comparisons were read with.
    pub min_effect: f64,
    /// The same, named figure by figure where the campaign file does.
    pub min_effect_by: std::collections::BTreeMap<String, f64>,
    /// The share of requests that must attain the SLOs the comparisons were read with.
    pub slo_target: f64,
}

/// Evaluate every rule. `evidence` holds the data folder's evidence files (for the restore
/// stage); `selection` defines the headline workload (the comparisons' gate).
pub fn check(
    plan: &RunPlan,
    selection: &HeadlineSelection,
    artifacts: &[Artifact],
    evidence: &EvidenceFiles,
) -> CheckReport {
    // Arms in first-seen order.
    let mut by_arm: Vec<(&str, Vec<&Artifact>)> = Vec::new();
    for artifact in artifacts {
        match by_arm
            .iter_mut()
            .find(|(arm, _)| *arm == artifact.facts.arm)
        {
            Some((_, runs)) => runs.push(artifact),
            None => by_arm.push((artifact.facts.arm.as_str(), vec![artifact])),
        }
    }

    // Every stage's comparisons; rule 5 over those holding arms one topology apart.
    let mut stages = stage_comparisons(artifacts, selection, plan, None);
    let mut headline = headline_comparison(artifacts, selection, plan);
    for c in stages
        .iter_mut()
        .filter_map(|s| s.result.as_mut().ok())
        .chain(headline.as_mut().and_then(|h| h.as_mut().ok()))
    {
        Reading::of(evidence).apply(c);
    }
    let read = Reading::of(evidence);
    let topology: Vec<TopologyAssessment> = stages
        .iter()
        .filter_map(|s| topology::topology(s, artifacts))
        .collect();

    let arms: Vec<ArmAdvance> = by_arm
        .iter()
        .map(|(arm, runs)| {
            let rows: Vec<Verdict> = topology
                .iter()
                .flat_map(|t| &t.rows)
                .filter(|row| row.arm == *arm)
                .map(|row| row.verdict.clone())
                .collect();
            let topology_verdict = if rows.is_empty() {
                Verdict::NotApplicable(
                    "no comparison holds it one topology apart from another arm".to_owned(),
                )
            } else {
                rows.into_iter().fold(Verdict::Pass, worst)
            };
            ArmAdvance {
                arm: (*arm).to_owned(),
                rules: vec![
                    (AdvanceRule::Completion, completion(runs)),
                    (AdvanceRule::Canaries, canaries(runs)),
                    (AdvanceRule::Functional, functional(runs)),
                    (AdvanceRule::PerformanceClaim, performance_claim(runs)),
                    (AdvanceRule::Topology, topology_verdict),
                ],
            }
        })
        .collect();

    let stops = stop_rules(artifacts, plan, evidence);
    let controls = super::controls::map_controls(
        &evidence.manifest_controls,
        &evidence.declared_controls,
        &evidence.aliases,
        artifacts,
    );
    let coverage = plan_coverage(
        plan,
        Evidence {
            artifacts,
            stages: &stages,
            headline: headline.as_ref().and_then(|h| h.as_ref().ok()),
            capacity: &evidence.capacity,
            aliases: &evidence.aliases,
            claims: &evidence.declared_claims,
        },
    );

    let mut failed = Vec::new();
    let mut missing = Vec::new();
    let mut not_testable = Vec::new();
    if artifacts.is_empty() {
        missing.push("no artifacts".to_owned());
    }
    for arm in &arms {
        for (rule, verdict) in &arm.rules {
            let text = plan
                .advance_rules
                .get(rule.index())
                .map_or("advance rule", String::as_str);
            match verdict {
                Verdict::Pass | Verdict::NotApplicable(_) => {}
                Verdict::NotTestable(reason) => {
                    not_testable.push(format!("{}: \"{text}\": {reason}", arm.arm))
                }
                Verdict::Fail(reason) => {
                    failed.push(format!("{}: \"{text}\" failed: {reason}", arm.arm))
                }
                Verdict::NotRun(reason) => {
                    missing.push(format!("{}: \"{text}\" not run: {reason}", arm.arm))
                }
            }
        }
    }
    for stage in &coverage.stages {
        if !stage.without_evidence.is_empty() {
            missing.push(format!(
                "stage {} {}: no artifacts for {}",
                stage.order,
                stage.stage,
                stage.without_evidence.join(", ")
            ));
        }
        for claim in stage.selected.iter().chain(&stage.rejected) {
            // Not testable is information, not missing evidence: the arms without
            // artifacts are counted above.
            if claim.verdict == ClaimVerdict::Contradicted {
                failed.push(format!(
                    "stage {} {}: \"{}\" contradicted: {}",
                    stage.order, stage.stage, claim.clause, claim.reason
                ));
            }
        }
    }
    let (outcome, reasons) = if !stops.is_empty() {
        let mut reasons: Vec<String> = stops.iter().map(|s| s.reason.clone()).collect();
        reasons.extend(failed);
        reasons.extend(missing);
        (Outcome::StopRuleFired, reasons)
    } else if !failed.is_empty() {
        failed.extend(missing);
        (Outcome::RuleFailed, failed)
    } else if !missing.is_empty() {
        (Outcome::Incomplete, missing)
    } else {
        let holds = if not_testable.is_empty() {
            "every advance rule holds and no stop rule fired".to_owned()
        } else {
            format!(
                "every measurable advance rule holds and no stop rule fired; {} not testable: {}",
                not_testable.len(),
                not_testable.join("; ")
            )
        };
        (Outcome::Holds, vec![holds])
    };
    CheckReport {
        arms,
        stages,
        topology,
        restore: restore_evidence(plan, evidence),
        stops,
        coverage,
        outcome,
        reasons,
        not_testable,
        controls,
        min_effect: read.min_effect,
        min_effect_by: read.min_effect_by,
        slo_target: read.slo_target,
    }
}

/// How the campaign file beside the data says comparisons are read: its `min_effect` (one
/// share, or one per figure) and its `slo_target`, defaults where it says nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub min_effect: f64,
    pub min_effect_by: std::collections::BTreeMap<String, f64>,
    pub slo_target: f64,
}

impl Reading {
    pub fn of(evidence: &EvidenceFiles) -> Reading {
        let declared = evidence.min_effect.as_ref();
        Reading {
            min_effect: declared
                .and_then(super::effect::MinEffect::default_share)
                .unwrap_or(super::effect::DEFAULT_MIN_EFFECT_SHARE),
            min_effect_by: declared
                .map(super::effect::MinEffect::by_metric)
                .unwrap_or_default(),
            slo_target: evidence
                .slo_target
                .unwrap_or(crate::slo::DEFAULT_SLO_TARGET),
        }
    }

    /// Set `c` to be read so.
    pub fn apply(&self, c: &mut super::Comparison) {
        c.min_effect = self.min_effect;
        c.min_effect_by = self.min_effect_by.clone();
        c.slo_target = self.slo_target;
    }
}

/// The worse of two verdicts: a failure over missing evidence over a quantity not recorded
/// over a pass.
fn worst(a: Verdict, b: Verdict) -> Verdict {
    match (a, b) {
        (Verdict::Fail(x), _) | (_, Verdict::Fail(x)) => Verdict::Fail(x),
        (Verdict::NotRun(x), _) | (_, Verdict::NotRun(x)) => Verdict::NotRun(x),
        (Verdict::NotTestable(x), _) | (_, Verdict::NotTestable(x)) => Verdict::NotTestable(x),
        (Verdict::NotApplicable(x), Verdict::NotApplicable(_)) => Verdict::NotApplicable(x),
        _ => Verdict::Pass,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{plan, repeated_topology_stage, topology_stage};
    use super::super::stop::StopKind;
    use super::*;

    /// The seed plan reduced to its `matched topology` and `restore` stages.
    fn topology_plan() -> RunPlan {
        let mut plan = plan();
        plan.execution_order
            .retain(|s| s.stage == "matched topology" || s.stage == "restore");
        plan
    }

    #[test]
    fn clean_evidence_holds_with_exit_zero() {
        let report = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &repeated_topology_stage(1900.0),
            &EvidenceFiles::names(&["restoration.json"]),
        );
        // The winner's communication overhead is a quantity anvil does not record: the rule
        // is not testable, named in the outcome, and nothing is missing.
        assert_eq!(report.outcome, Outcome::Holds);
        assert_eq!(report.reasons.len(), 1, "{:?}", report.reasons);
        assert!(
            report.reasons[0].starts_with(
                "every measurable advance rule holds and no stop rule fired; 1 not testable: \
                 two independent TP1 replicas: \"topology winner must account for both \
                 throughput and communication overhead\": two independent TP1 replicas wins on \
                 throughput but its communication overhead is not measured"
            ),
            "{:?}",
            report.reasons
        );
        assert_eq!(report.not_testable.len(), 1);
        assert_eq!(
            report.topology[0].winner.as_deref(),
            Some("two independent TP1 replicas")
        );
        assert!(report.arms.iter().all(|arm| arm.rules.len() == 5));
    }

    #[test]
    fn functional_runs_do_not_enter_the_topology_comparison() {
        let mut artifacts = repeated_topology_stage(1900.0);
        for index in 0..3 {
            let mut functional = artifacts[index].clone();
            functional.facts.run_id = format!("{}-functional", functional.facts.run_id);
            functional.facts.workload.class = "functional".to_owned();
            functional.facts.workload.canaries = false;
            functional.facts.fingerprint = functional.facts.workload.fingerprint();
            functional.figures.aggregate_output_tps = None;
            artifacts.push(functional);
        }
        let report = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &artifacts,
            &EvidenceFiles::names(&["restoration.json"]),
        );
        assert_eq!(report.topology.len(), 1);
        assert_eq!(report.outcome, Outcome::Holds, "{:?}", report.reasons);
    }

    #[test]
    fn contamination_is_a_stop_with_exit_one() {
        let mut artifacts = repeated_topology_stage(1900.0);
        artifacts[1].figures.canaries[12].foreign = vec!["ANV-00000000abcd".to_owned()];
        let report = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &artifacts,
            &EvidenceFiles::names(&["restoration.json"]),
        );
        assert_eq!(report.outcome, Outcome::StopRuleFired);
        assert!(report.outcome.failed(), "{:?}", report.outcome);
        assert_eq!(report.stops[0].kind, StopKind::Contamination);
        assert_eq!(
            report.reasons,
            [
                "run r-tp2-0: cross-request contamination: request 12 returned ANV-00000000abcd",
                "TP2: \"every unique request returns its own canary and no other canary\" \
                 failed: run r-tp2-0: request 12 returned canary markers other than its own: ANV-00000000abcd",
            ]
        );
    }

    #[test]
    fn missing_restore_evidence_is_a_stop() {
        let report = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &repeated_topology_stage(1900.0),
            &EvidenceFiles::names(&["run.json"]),
        );
        assert!(report.outcome.failed(), "{:?}", report.outcome);
        assert_eq!(
            report.reasons,
            ["stage 6 restore: evidence file restoration.json is missing from the data folder"]
        );
    }

    #[test]
    fn functional_not_run_is_incomplete_with_exit_four() {
        let mut artifacts = repeated_topology_stage(1900.0);
        for run in artifacts.iter_mut().filter(|a| a.facts.arm == "TP1") {
            run.figures.functional.clear();
        }
        let report = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &artifacts,
            &EvidenceFiles::names(&["restoration.json"]),
        );
        assert_eq!(report.outcome, Outcome::Incomplete);
        assert_eq!(report.outcome, Outcome::Incomplete);
        assert_eq!(
            report.reasons,
            [
                "TP1: \"strict structured JSON, tools, and Responses pass\" not run: \
              no functional results for this arm"
            ]
        );
    }

    #[test]
    fn contradicted_selection_fails_with_exit_one() {
        // Three runs of each arm at one load, TP2 (1500 ± 10) ahead of the selected DP2
        // (1400 ± 10).
        let artifacts = super::super::fixtures::at_equal_load(repeated_topology_stage(1400.0));
        let report = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &artifacts,
            &EvidenceFiles::names(&["restoration.json"]),
        );
        assert_eq!(report.outcome, Outcome::RuleFailed);
        assert!(report.outcome.failed(), "{:?}", report.outcome);
        assert!(
            report.reasons.iter().any(|r| r.starts_with(
                "stage 3 matched topology: \"DP2 for aggregate throughput\" contradicted: \
                 selection contradicted"
            )),
            "{:?}",
            report.reasons
        );
        // Single runs decide nothing: the same figures once each leave the claim untested
        // and establish no topology winner, so the check is incomplete, not failed.
        let single = check(
            &topology_plan(),
            &super::super::fixtures::selection(),
            &topology_stage(1400.0),
            &EvidenceFiles::names(&["restoration.json"]),
        );
        assert_eq!(single.outcome, Outcome::Incomplete, "{:?}", single.reasons);
        assert!(
            single
                .reasons
                .iter()
                .all(|r| r.contains("not run: no topology winner established")),
            "{:?}",
            single.reasons
        );
    }

    #[test]
    fn the_seed_plan_with_only_topology_evidence_is_incomplete() {
        let report = check(
            &plan(),
            &super::super::fixtures::selection(),
            &topology_stage(1900.0),
            &EvidenceFiles::names(&["restoration.json"]),
        );
        assert_eq!(report.outcome, Outcome::Incomplete);
        assert!(
            report.reasons.contains(
                &"stage 1 baseline: no artifacts for Inferact target-only, Inferact DFlash2 K8"
                    .to_owned()
            ),
            "{:?}",
            report.reasons
        );
        assert!(
            check(
                &plan(),
                &super::super::fixtures::selection(),
                &[],
                &EvidenceFiles::default()
            )
            .outcome
            .failed()
        );
    }

    #[test]
    fn hostile_figures_do_not_panic() {
        use super::super::compare::{References, compare};
        use super::super::headline::Scope;
        use super::super::input::{MetricId, RequestValue, Stats};
        use super::super::matching::match_artifacts;
        use crate::artifact::run::Outcome as RequestOutcome;

        let mut artifacts = topology_stage(f64::NAN);
        let hostile = Stats {
            n: u64::MAX,
            mean: Some(f64::NAN),
            sd: Some(f64::INFINITY),
            p50: Some(f64::MAX),
            ..Stats::default()
        };
        for artifact in &mut artifacts {
            let figures = &mut artifact.figures;
            figures.metrics.insert(MetricId::TtftMs, hostile);
            figures.per_request.insert(
                MetricId::TtftMs,
                vec![RequestValue {
                    request_index: 0,
                    value: f64::NAN,
                }],
            );
            figures.requests.measured = u64::MAX;
            figures
                .requests
                .failed
                .insert(RequestOutcome::Cancelled, u64::MAX);
            figures
                .requests
                .failed
                .insert(RequestOutcome::HttpError, u64::MAX);
            figures.finish_reasons.insert("length".to_owned(), u64::MAX);
            figures.completion_tokens_p50 = Some(f64::INFINITY);
        }
        artifacts[0].facts.config = [("topology", "TP99999999999")].into_iter().collect();
        let report = check(
            &plan(),
            &super::super::fixtures::selection(),
            &artifacts,
            &EvidenceFiles::default(),
        );
        assert!(report.outcome.failed(), "{:?}", report.outcome);
        let set = match_artifacts(&artifacts).unwrap();
        let comparison = compare(
            &set,
            &References::Baseline("TP1".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        assert_eq!(comparison.metrics[0].differences[0].welch, None);
    }
}
