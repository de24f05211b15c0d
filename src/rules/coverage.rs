//! Plan coverage: each stage's arms mapped to artifacts by arm name, which arms have
//! evidence, and whether each stage's `selected` / `rejected` claim is supported by the
//! recorded figures.
//!
//! A claim is read clause by clause (clauses split at `;`). A clause names an arm when it
//! contains the arm's whole name, a word of the arm's name no other arm of the stage has
//! (`K8` → `RadixArk DFlash2 K8`), or a configuration value only that arm has (`DP2` → the
//! arm whose config says `topology=DP2`). It names a metric by its words: `TTFT` (lower is
//! better: mean TTFT), `throughput` or `output` (higher is better: aggregate output
//! throughput). A clause naming exactly one arm and one metric is checked against the
//! stage's arms on every performance workload (functional checks excluded) they all ran; anything else is reported as "claim could
//! not be matched to recorded arms" rather than guessed.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::artifact::run::Status;
use crate::manifest::{RunPlan, Stage};

use super::headline::FUNCTIONAL_CLASS;
use super::input::{Artifact, MetricId, num};

/// The figure a claim is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClaimMetric {
    /// Aggregate output throughput, tokens per second; higher is better.
    AggregateThroughput,
    /// Mean TTFT, milliseconds; lower is better.
    Ttft,
}

impl ClaimMetric {
    fn name(self) -> &'static str {
        match self {
            ClaimMetric::AggregateThroughput => "aggregate throughput",
            ClaimMetric::Ttft => "mean TTFT",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            ClaimMetric::AggregateThroughput => "tok/s",
            ClaimMetric::Ttft => "ms",
        }
    }

    /// The best-ranked word: `highest`, `lowest`.
    fn best(self) -> &'static str {
        match self {
            ClaimMetric::AggregateThroughput => "highest",
            ClaimMetric::Ttft => "lowest",
        }
    }

    fn better(self, a: f64, b: f64) -> bool {
        match self {
            ClaimMetric::AggregateThroughput => a > b,
            ClaimMetric::Ttft => a < b,
        }
    }

    /// The metric a clause names, if any.
    pub fn from_words(clause: &str) -> Option<Self> {
        let lower = clause.to_lowercase();
        if lower.contains("ttft") {
            Some(ClaimMetric::Ttft)
        } else if lower.contains("throughput") || lower.contains("output") {
            Some(ClaimMetric::AggregateThroughput)
        } else {
            None
        }
    }
}

/// Whether the evidence supports a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClaimVerdict {
    Supported,
    /// The recorded figures contradict the claim.
    NotSupported,
    /// Some of the stage's arms have no figures to check the claim against.
    MissingEvidence,
    /// The claim could not be mapped to one recorded arm and one metric.
    Unmatched,
}

impl std::fmt::Display for ClaimVerdict {
    /// The verdict's name as `check` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClaimVerdict::Supported => "Supported",
            ClaimVerdict::NotSupported => "NotSupported",
            ClaimVerdict::MissingEvidence => "MissingEvidence",
            ClaimVerdict::Unmatched => "Unmatched",
        })
    }
}

/// One clause of a `selected` or `rejected` claim, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimCheck {
    /// The clause as the plan writes it.
    pub clause: String,
    pub verdict: ClaimVerdict,
    pub reason: String,
}

/// One arm of a stage and its artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArmEvidence {
    pub arm: String,
    /// Run ids of the arm's artifacts; empty when it has none.
    pub run_ids: Vec<String>,
}

/// One stage's coverage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageCoverage {
    pub order: u64,
    pub stage: String,
    pub status: String,
    pub arms: Vec<ArmEvidence>,
    /// Arms of the stage with no artifact.
    pub without_evidence: Vec<String>,
    pub selected: Vec<ClaimCheck>,
    pub rejected: Vec<ClaimCheck>,
}

/// The whole plan's coverage, with the plan's promotion flag and open gates as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanCoverage {
    pub stages: Vec<StageCoverage>,
    pub promotion_authorized: bool,
    pub post_campaign_open_gates: Vec<String>,
}

impl PlanCoverage {
    /// Every claim check of every stage.
    pub fn claims(&self) -> impl Iterator<Item = &ClaimCheck> {
        self.stages
            .iter()
            .flat_map(|s| s.selected.iter().chain(&s.rejected))
    }
}

/// Map the plan's stages to artifacts and check their claims.
pub fn plan_coverage(plan: &RunPlan, artifacts: &[Artifact]) -> PlanCoverage {
    let stages = plan
        .stages_in_order()
        .into_iter()
        .map(|stage| stage_coverage(stage, artifacts))
        .collect();
    PlanCoverage {
        stages,
        promotion_authorized: plan.promotion_authorized,
        post_campaign_open_gates: plan.post_campaign_open_gates.clone(),
    }
}

fn stage_coverage(stage: &Stage, artifacts: &[Artifact]) -> StageCoverage {
    let arms: Vec<ArmEvidence> = stage
        .arms()
        .iter()
        .map(|arm| ArmEvidence {
            arm: arm.clone(),
            run_ids: artifacts
                .iter()
                .filter(|a| a.facts.arm == *arm)
                .map(|a| a.facts.run_id.clone())
                .collect(),
        })
        .collect();
    let without_evidence = arms
        .iter()
        .filter(|a| a.run_ids.is_empty())
        .map(|a| a.arm.clone())
        .collect();
    let selected_metric = stage
        .selected
        .as_deref()
        .and_then(|claim| claim.split(';').find_map(ClaimMetric::from_words));
    let check = |claim: Option<&str>, rejection: bool| -> Vec<ClaimCheck> {
        claim
            .map(|claim| {
                claim
                    .split(';')
                    .map(str::trim)
                    .filter(|clause| !clause.is_empty())
                    .map(|clause| {
                        let metric = ClaimMetric::from_words(clause).or(if rejection {
                            selected_metric
                        } else {
                            None
                        });
                        check_clause(clause, metric, rejection, stage, artifacts)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    StageCoverage {
        order: stage.order.get(),
        stage: stage.stage.clone(),
        status: stage.status.clone(),
        selected: check(stage.selected.as_deref(), false),
        rejected: check(stage.rejected.as_deref(), true),
        arms,
        without_evidence,
    }
}

/// Words of a text: split at whitespace, commas, semicolons and parentheses.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The stage's arms a clause names (see the module documentation).
fn named_arms<'s>(clause: &str, stage: &'s Stage, artifacts: &[Artifact]) -> Vec<&'s str> {
    let clause_words = words(clause);
    let arms = stage.arms();
    let contains_name = |name: &str| {
        let name_words = words(name);
        !name_words.is_empty()
            && clause_words
                .windows(name_words.len())
                .any(|window| window == name_words.as_slice())
    };
    let config_values = |arm: &str| -> BTreeSet<String> {
        artifacts
            .iter()
            .filter(|a| a.facts.arm == arm)
            .flat_map(|a| a.facts.config.iter().map(|(_, v)| v.to_owned()))
            .collect()
    };
    let values: Vec<BTreeSet<String>> = arms.iter().map(|arm| config_values(arm)).collect();
    arms.iter()
        .enumerate()
        .filter(|(index, arm)| {
            if contains_name(arm) {
                return true;
            }
            let others =
                |f: &dyn Fn(usize) -> bool| (0..arms.len()).filter(|other| other != index).any(f);
            let unique_name_word = words(arm).into_iter().any(|word| {
                clause_words.contains(&word)
                    && !others(&|other| words(&arms[other]).contains(&word))
            });
            let unique_value = values[*index].iter().any(|value| {
                clause_words.contains(&value.as_str())
                    && !others(&|other| values[other].contains(value))
            });
            unique_name_word || unique_value
        })
        .map(|(_, arm)| arm.as_str())
        .collect()
}

/// The value of `metric` for one arm's complete runs of one workload (mean across runs).
fn arm_value(runs: &[&Artifact], metric: ClaimMetric) -> Option<f64> {
    let values: Vec<f64> = runs
        .iter()
        .filter_map(|run| match metric {
            ClaimMetric::AggregateThroughput => run.figures.aggregate_output_tps,
            ClaimMetric::Ttft => run
                .figures
                .metrics
                .get(&MetricId::TtftMs)
                .and_then(|stats| stats.mean),
        })
        .filter(|v| v.is_finite())
        .collect();
    (!values.is_empty() && values.len() == runs.len())
        .then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn check_clause(
    clause: &str,
    metric: Option<ClaimMetric>,
    rejection: bool,
    stage: &Stage,
    artifacts: &[Artifact],
) -> ClaimCheck {
    let result = |verdict, reason: String| ClaimCheck {
        clause: clause.to_owned(),
        verdict,
        reason,
    };
    let unmatched = |detail: String| {
        result(
            ClaimVerdict::Unmatched,
            format!("claim could not be matched to recorded arms: {detail}"),
        )
    };
    let named = named_arms(clause, stage, artifacts);
    let arm = match named.as_slice() {
        [arm] => *arm,
        [] => return unmatched(format!("\"{clause}\" names none of the stage's arms")),
        several => {
            return unmatched(format!(
                "\"{clause}\" names several arms ({})",
                several.join(", ")
            ));
        }
    };
    let Some(metric) = metric else {
        return unmatched(format!("\"{clause}\" names no metric"));
    };
    let what = if rejection { "rejection" } else { "selection" };
    let not_supported = |detail: String| {
        result(
            ClaimVerdict::NotSupported,
            format!("{what} not supported by the recorded evidence: {detail}"),
        )
    };
    let no_evidence = |detail: String| {
        result(
            ClaimVerdict::MissingEvidence,
            format!("{what} not supported by the recorded evidence: {detail}"),
        )
    };
    let arms = stage.arms();
    let complete = |name: &str| -> Vec<&Artifact> {
        artifacts
            .iter()
            .filter(|a| {
                a.facts.arm == name
                    && a.facts.status == Status::Complete
                    && a.facts.workload.class != FUNCTIONAL_CLASS
            })
            .collect()
    };
    let missing: Vec<&str> = arms
        .iter()
        .filter(|name| complete(name).is_empty())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return no_evidence(format!(
            "no complete performance artifact for {}",
            missing.join(", ")
        ));
    }
    // Workloads every arm of the stage ran.
    let mut common: Option<BTreeSet<&str>> = None;
    for name in arms {
        let prints: BTreeSet<&str> = complete(name)
            .iter()
            .map(|a| a.facts.fingerprint.as_str())
            .collect();
        common = Some(match common {
            None => prints,
            Some(so_far) => so_far.intersection(&prints).copied().collect(),
        });
    }
    let common = common.unwrap_or_default();
    if common.is_empty() {
        return no_evidence("the stage's arms share no matched workload".to_owned());
    }
    let mut explanations = Vec::new();
    let mut holds = true;
    for fingerprint in common {
        let mut values = Vec::new();
        for name in arms {
            let runs: Vec<&Artifact> = complete(name)
                .into_iter()
                .filter(|a| a.facts.fingerprint == fingerprint)
                .collect();
            match arm_value(&runs, metric) {
                Some(value) => values.push((name.as_str(), value)),
                None => {
                    return no_evidence(format!("{name} has no {} recorded", metric.name()));
                }
            }
        }
        let best = values.iter().copied().reduce(|best, next| {
            if metric.better(next.1, best.1) {
                next
            } else {
                best
            }
        });
        let Some((best_arm, best_value)) = best else {
            return no_evidence("no figures recorded".to_owned());
        };
        // Ties are not a win: the named arm must be strictly better than every other.
        let wins = best_arm == arm
            && values
                .iter()
                .all(|(name, value)| *name == arm || metric.better(best_value, *value));
        let listed = values
            .iter()
            .map(|(name, value)| format!("{name} {}", num(*value)))
            .collect::<Vec<_>>()
            .join(", ");
        explanations.push(format!(
            "{} has the {} {} ({listed} {})",
            if wins { arm } else { best_arm },
            metric.best(),
            metric.name(),
            metric.unit()
        ));
        holds &= if rejection { !wins } else { wins };
    }
    let explanation = explanations.join("; ");
    if holds {
        result(ClaimVerdict::Supported, explanation)
    } else {
        not_supported(explanation)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{artifact, full_stats, plan, topology_stage};
    use super::*;

    fn stage<'a>(coverage: &'a PlanCoverage, name: &str) -> &'a StageCoverage {
        coverage.stages.iter().find(|s| s.stage == name).unwrap()
    }

    #[test]
    fn dp2_selection_is_supported_when_it_has_the_highest_throughput() {
        let coverage = plan_coverage(&plan(), &topology_stage(1900.0));
        let topology = stage(&coverage, "matched topology");
        assert!(topology.without_evidence.is_empty());
        assert_eq!(
            topology.selected,
            [ClaimCheck {
                clause: "DP2 for aggregate throughput".to_owned(),
                verdict: ClaimVerdict::Supported,
                reason: "two independent TP1 replicas has the highest aggregate throughput \
                         (TP1 1000, TP2 1500, two independent TP1 replicas 1900 tok/s)"
                    .to_owned(),
            }]
        );
        assert_eq!(topology.rejected[0].verdict, ClaimVerdict::Supported);
        assert!(!coverage.promotion_authorized);
        assert_eq!(coverage.post_campaign_open_gates.len(), 6);
        assert_eq!(
            stage(&coverage, "baseline").without_evidence,
            ["Inferact target-only", "Inferact DFlash2 K8"]
        );
    }

    #[test]
    fn dp2_selection_is_not_supported_when_tp2_is_faster() {
        let coverage = plan_coverage(&plan(), &topology_stage(1400.0));
        let topology = stage(&coverage, "matched topology");
        let expected = "TP2 has the highest aggregate throughput \
                        (TP1 1000, TP2 1500, two independent TP1 replicas 1400 tok/s)";
        assert_eq!(topology.selected[0].verdict, ClaimVerdict::NotSupported);
        assert_eq!(
            topology.selected[0].reason,
            format!("selection not supported by the recorded evidence: {expected}")
        );
        assert_eq!(
            topology.rejected[0].reason,
            format!("rejection not supported by the recorded evidence: {expected}")
        );
    }

    #[test]
    fn missing_arm_evidence_does_not_support_a_selection() {
        let mut artifacts = topology_stage(1900.0);
        artifacts.remove(0);
        let coverage = plan_coverage(&plan(), &artifacts);
        let topology = stage(&coverage, "matched topology");
        assert_eq!(topology.without_evidence, ["TP1"]);
        assert_eq!(topology.selected[0].verdict, ClaimVerdict::MissingEvidence);
        assert_eq!(
            topology.selected[0].reason,
            "selection not supported by the recorded evidence: no complete performance artifact for TP1"
        );
    }

    #[test]
    fn lower_ttft_claim_maps_k8_to_its_arm() {
        let ttft = |run: &str, arm: &str, config: &[(&str, &str)], mean: f64| {
            let mut a = artifact(run, arm, config, 1000.0);
            a.figures
                .metrics
                .insert(MetricId::TtftMs, full_stats(100, mean, 5.0));
            a
        };
        let artifacts = [
            ttft("r1", "RadixArk target-only", &[("spec", "none")], 120.0),
            ttft(
                "r2",
                "RadixArk DFlash2 K8",
                &[("spec", "dflash2"), ("k", "8")],
                90.0,
            ),
            ttft(
                "r3",
                "RadixArk DFlash2 K12 chunk1K",
                &[("spec", "dflash2"), ("k", "12")],
                100.0,
            ),
        ];
        let coverage = plan_coverage(&plan(), &artifacts);
        let checkpoint = stage(&coverage, "target checkpoint");
        assert_eq!(
            checkpoint.selected,
            [ClaimCheck {
                clause: "K8 as lower-TTFT tradeoff".to_owned(),
                verdict: ClaimVerdict::Supported,
                reason: "RadixArk DFlash2 K8 has the lowest mean TTFT (RadixArk target-only 120, \
                         RadixArk DFlash2 K8 90, RadixArk DFlash2 K12 chunk1K 100 ms)"
                    .to_owned(),
            }]
        );
    }

    #[test]
    fn claims_that_cannot_be_mapped_are_said_so() {
        let coverage = plan_coverage(&plan(), &[]);
        let screen = stage(&coverage, "SGLang optimization");
        assert_eq!(screen.selected[0].verdict, ClaimVerdict::Unmatched);
        assert_eq!(
            screen.selected[0].reason,
            "claim could not be matched to recorded arms: \"K12 chunk1K extra_buffer Mamba96\" \
             names several arms (K12, chunk1K)"
        );
        let runtime = stage(&coverage, "alternate runtime");
        let reasons: Vec<&str> = runtime.selected.iter().map(|c| c.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "claim could not be matched to recorded arms: \"MTP2 within vLLM\" names no metric",
                "claim could not be matched to recorded arms: \"SGLang remains faster for \
                 sustained output\" names none of the stage's arms",
            ]
        );
    }
}
