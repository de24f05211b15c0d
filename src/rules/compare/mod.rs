//! The comparison of a [`MatchedSet`]: each arm against its **reference** — the arm its
//! stage's one-variable control names ([`References::Controls`], the default), or one
//! baseline a user names ([`References::Baseline`]) — over both windows (`all` and
//! `after_first_wave`).
//!
//! Per metric and window: each arm's per-run statistics and pooled mean; each arm's
//! difference to its reference with Welch's 95% interval of the mean difference (over
//! requests, or over the runs' means when both arms have repeats), the paired interval by
//! request index where the arms are paired (one run each, as many requests in flight), and
//! for p50 and the tail that hurts a difference of percentiles with its interval (a seeded
//! bootstrap when each arm is one run — paired where the arms are paired, the primary
//! interval then, because request i's shared prompt body, target length and schedule place
//! cancel; a t interval across runs when each arm has repeats; none where an arm's own
//! interval for that percentile is unbounded, in any of its runs). Aggregate
//! throughput per arm and window (a single run, or the mean across repeats with its t
//! interval over runs), per GPU, against the reference (ratio, and Welch's interval across
//! runs when both have repeats), and the scaling efficiency of a multi-GPU arm against the
//! matched single-GPU arm. Then spec-decode figures, the one-variable control verdicts and
//! the output-length realization warnings.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::manifest::RunPlan;

use super::control::{Control, control};
use super::headline::{Comparand, HeadlineSelection, Scope, gate};
use super::input::{Artifact, Gpus, MetricId, ReplicaThroughput, SpecDecode, Window, num};
use super::matching::{MatchedSet, match_artifacts};
use super::refusal::{Refusal, RefusalKind};
use crate::stats::{
    Bootstrap, BootstrapDesign, Interval, Moments, Percentile, Sample, Stats, bounded_from,
    mean_interval, paired_interval, percentile_differences, rank_interval, welch_interval,
};

mod latency;
mod output;
mod result;
mod throughput;

use self::latency::{arm_metric, difference};
pub use self::output::output_length_realization;
pub use self::result::*;
use self::throughput::{goodput, throughput};

/// Relative difference of completion-token medians above which output lengths differ.
pub const MEDIAN_TOLERANCE: f64 = 0.10;
/// Difference of a finish reason's share (0 to 1) above which finish-reason mixes differ.
pub const FINISH_SHARE_TOLERANCE: f64 = 0.05;

/// Whom each arm of a comparison is compared with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum References {
    /// Every other arm against this one (`anvil compare --baseline ARM`).
    Baseline(String),
    /// Each arm against its stage's one-variable control; `None` for an arm that is itself
    /// a control or has no arm differing from it in exactly one key.
    Controls {
        /// The stage, when the comparison is one stage's.
        stage: Option<String>,
        controls: Vec<(String, Option<String>)>,
    },
}

impl References {
    /// The reference of `arm`, if it has one.
    pub fn of(&self, arm: &str) -> Option<&str> {
        match self {
            References::Baseline(baseline) => (baseline != arm).then_some(baseline.as_str()),
            References::Controls { controls, .. } => controls
                .iter()
                .find(|(a, _)| a == arm)
                .and_then(|(_, r)| r.as_deref()),
        }
    }

    /// How the references were chosen, for a heading.
    pub fn describe(&self) -> String {
        match self {
            References::Baseline(baseline) => format!("every arm against baseline {baseline}"),
            References::Controls {
                stage: Some(stage), ..
            } => {
                format!("stage {stage}: each arm against its one-variable control")
            }
            References::Controls { stage: None, .. } => {
                "each arm against its stage's one-variable control".to_owned()
            }
        }
    }
}

/// The comparison of a matched set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// What the comparison is, e.g. `within-screen selection only`.
    pub label: String,
    pub fingerprint: String,
    pub references: References,
    /// Arms in comparison order.
    pub arms: Vec<String>,
    pub metrics: Vec<MetricComparison>,
    /// Per arm and window, `all` first.
    pub throughput: Vec<ArmThroughput>,
    /// Attainment and goodput per arm and window, `all` first; empty with no SLO given.
    pub goodput: Vec<ArmGoodput>,
    pub spec_decode: Vec<ArmSpecDecode>,
    /// Control verdict of each arm with a reference.
    pub controls: Vec<ControlVerdict>,
    /// Output-length realization of each arm with a reference: (arm, reference, verdict).
    pub output_length: Vec<(String, String, OutputLength)>,
    /// The cold-start burst of each arm with a first wave, in arm order.
    pub burst: Vec<ArmBurst>,
    /// The smallest difference that matters, as a share of the reference's figure (the
    /// campaign's `min_effect`, 2% by default): a resolved difference under it is
    /// negligible.
    pub min_effect: f64,
    /// The smallest effect named figure by figure (`ttft_ms`, `output_tps`, …: the
    /// campaign's `min_effect` as a map), where it differs from `min_effect`.
    pub min_effect_by: BTreeMap<String, f64>,
    /// The share of requests that must attain the SLOs (the campaign's `slo_target`, 90%
    /// by default): an arm at or above it attains.
    pub slo_target: f64,
    /// Each arm's realized output lengths, in arm order: what the output-length guard
    /// compares between any two arms ([`Comparison::output_differs`]).
    #[serde(skip)]
    pub outputs: Vec<(String, self::output::OutputProfile)>,
    /// The load each arm was offered, in arm order (see [`super::load`]).
    pub loads: Vec<super::load::ArmLoad>,
    /// Every warning a reader must see beside the figures.
    pub warnings: Vec<String>,
}

impl Comparison {
    /// Why `a`'s and `b`'s realized output lengths are too far apart for a throughput or
    /// goodput verdict between them (the output-length guard), or `None` when they are
    /// comparable or either is unknown.
    pub fn output_differs(&self, a: &str, b: &str) -> Option<String> {
        let profile = |arm: &str| self.outputs.iter().find(|(x, _)| x == arm).map(|(_, p)| p);
        match self::output::profiles_compared(b, profile(b)?, a, profile(a)?) {
            OutputLength::Comparable => None,
            OutputLength::NotComparable { warning } => Some(warning),
        }
    }

    /// The smallest effect that matters on `figure` (a metric's column, `output_tps` or
    /// `goodput_tps`), as a share of the reference's figure.
    pub fn min_effect_for(&self, figure: &str) -> f64 {
        self.min_effect_by
            .get(figure)
            .copied()
            .unwrap_or(self.min_effect)
    }

    /// The throughput of `arm` over `window`.
    pub fn throughput(&self, arm: &str, window: Window) -> Option<&ArmThroughput> {
        self.throughput
            .iter()
            .find(|t| t.arm == arm && t.window == window)
    }

    /// The load `arm` was offered.
    pub fn load(&self, arm: &str) -> Option<&super::load::ArmLoad> {
        self.loads.iter().find(|l| l.arm == arm)
    }

    /// Why `a` and `b` were not offered equal load on `basis` (both loads named); `None`
    /// when it is equal or a load is unknown.
    pub fn load_differs(&self, a: &str, b: &str, basis: super::load::LoadBasis) -> Option<String> {
        self.load(a)?.differs(self.load(b)?, basis)
    }

    /// The one baseline, when every arm is compared with the same arm.
    pub fn baseline(&self) -> Option<&str> {
        match &self.references {
            References::Baseline(b) => Some(b),
            References::Controls { .. } => None,
        }
    }
}

/// Compare the arms of a matched set, each with its reference, labelled with the `scope`
/// the headline rule granted. Refused when a named baseline is not in the set.
pub fn compare(
    set: &MatchedSet<'_>,
    references: &References,
    scope: Scope,
) -> Result<Comparison, Refusal> {
    let arms = set.arms();
    if let References::Baseline(baseline) = references
        && !arms.contains(&baseline.as_str())
    {
        return Err(Refusal {
            kind: RefusalKind::NoBaseline,
            reason: format!(
                "baseline arm {baseline} is not in the matched set (arms: {})",
                arms.join(", ")
            ),
            differences: Vec::new(),
            rule: None,
        });
    }
    // Each arm with a reference in the set, in arm order.
    let pairs: Vec<(&str, &str)> = arms
        .iter()
        .filter_map(|arm| {
            let reference = references.of(arm)?;
            arms.iter().find(|a| **a == reference).map(|r| (*arm, *r))
        })
        .collect();

    let metrics = MetricId::ALL
        .into_iter()
        .map(|metric| {
            let summaries: Vec<ArmMetric> = arms
                .iter()
                .flat_map(|arm| {
                    Window::ALL.map(|window| arm_metric(arm, &set.arm(arm), metric, window))
                })
                .collect();
            let differences = pairs
                .iter()
                .flat_map(|(arm, reference)| {
                    let summaries = &summaries;
                    Window::ALL.into_iter().filter_map(move |window| {
                        let find = |name: &str| {
                            summaries
                                .iter()
                                .find(|s| s.arm == name && s.window == window)
                        };
                        Some(difference(
                            find(reference)?,
                            find(arm)?,
                            &set.arm(reference),
                            &set.arm(arm),
                            metric,
                        ))
                    })
                })
                .collect();
            MetricComparison {
                metric,
                arms: summaries,
                differences,
            }
        })
        .collect();

    let throughput = throughput(set, &arms, references);
    let goodput = goodput(set, &arms, references);
    let spec_decode = set
        .members()
        .iter()
        .filter(|member| !member.figures.spec_decode.is_empty())
        .map(|member| ArmSpecDecode {
            arm: member.facts.arm.clone(),
            run_id: member.facts.run_id.clone(),
            replicas: member.figures.spec_decode.clone(),
        })
        .collect();

    let mut warnings = Vec::new();
    for arm in &arms {
        let runs = set.arm(arm);
        if let Some(odd) = runs
            .iter()
            .find(|run| run.facts.effective_config() != runs[0].facts.effective_config())
        {
            warnings.push(format!(
                "{arm}: runs {} and {} record different configurations ({}); they are not \
                 repeats of one cell",
                runs[0].facts.run_id,
                odd.facts.run_id,
                control(
                    &runs[0].facts.effective_config(),
                    &odd.facts.effective_config()
                )
                .reason()
            ));
        }
    }
    for member in set.members() {
        warnings.extend(member.figures.usage_gap(&member.facts.run_id));
        warnings.extend(member.figures.throttle_note(&member.facts.run_id));
    }
    let mut controls = Vec::new();
    let mut output_length = Vec::new();
    for (arm, reference) in &pairs {
        let (runs, base_runs) = (set.arm(arm), set.arm(reference));
        let verdict = control(
            &base_runs[0].facts.effective_config(),
            &runs[0].facts.effective_config(),
        );
        if !verdict.holds() {
            warnings.push(format!("{arm} vs {reference}: {}", verdict.reason()));
        }
        controls.push(ControlVerdict {
            arm: (*arm).to_owned(),
            reference: (*reference).to_owned(),
            control: verdict,
        });
        let realization = output_length_realization(reference, &base_runs, arm, &runs);
        if let OutputLength::NotComparable { warning } = &realization {
            warnings.push(warning.clone());
        }
        output_length.push(((*arm).to_owned(), (*reference).to_owned(), realization));
    }

    Ok(Comparison {
        label: scope.label().to_owned(),
        fingerprint: set.fingerprint().to_owned(),
        references: references.clone(),
        arms: arms.iter().map(|arm| (*arm).to_owned()).collect(),
        metrics,
        throughput,
        goodput,
        spec_decode,
        controls,
        output_length,
        min_effect: super::effect::DEFAULT_MIN_EFFECT_SHARE,
        min_effect_by: BTreeMap::new(),
        slo_target: crate::slo::DEFAULT_SLO_TARGET,
        burst: arms
            .iter()
            .filter_map(|arm| {
                let runs = set.arm(arm);
                let worst: Vec<f64> = runs
                    .iter()
                    .filter_map(|run| {
                        let f = &run.figures;
                        f.per_request
                            .get(&MetricId::TtftMs)?
                            .iter()
                            .filter(|v| f.first_wave.contains(&v.request_index))
                            .map(|v| v.value)
                            .reduce(f64::max)
                    })
                    .collect();
                let size = runs.first().map_or(0, |r| r.figures.first_wave.len());
                let makespan_ms = runs
                    .iter()
                    .filter_map(|run| run.figures.first_wave_makespan_ms)
                    .collect();
                (size > 0).then(|| ArmBurst {
                    arm: (*arm).to_owned(),
                    size,
                    worst_ttft_ms: worst,
                    makespan_ms,
                })
            })
            .collect(),
        outputs: arms
            .iter()
            .map(|arm| {
                (
                    (*arm).to_owned(),
                    self::output::output_profile(&set.arm(arm)),
                )
            })
            .collect(),
        loads: arms
            .iter()
            .filter_map(|arm| super::load::ArmLoad::of(arm, &set.arm(arm)))
            .collect(),
        warnings,
    })
}

/// What `anvil compare` runs: the headline comparison rule over the artifacts and any
/// external figures, then the matching check, then the comparison with `references`. Every
/// refusal carries its reason.
pub fn compare_artifacts(
    artifacts: &[Artifact],
    external_sources: &[&str],
    references: &References,
    selection: &HeadlineSelection,
    plan: &RunPlan,
) -> Result<Comparison, Refusal> {
    let comparands: Vec<Comparand<'_>> = artifacts
        .iter()
        .map(|artifact| Comparand::Artifact(&artifact.facts))
        .chain(
            external_sources
                .iter()
                .map(|source| Comparand::External { source }),
        )
        .collect();
    let scope = gate(&comparands, selection, plan)?;
    let set = match_artifacts(artifacts)?;
    compare(&set, references, scope)
}

#[cfg(test)]
mod tests;
