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

/// One run's statistics of a metric over one window, in the metric's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub stats: Stats,
}

/// One arm's figures of a metric over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmMetric {
    pub arm: String,
    pub window: Window,
    /// One entry per run of the arm (percentiles are per run).
    pub runs: Vec<RunSummary>,
    /// Count, mean and sd over all the arm's requests (pooled across runs).
    pub pooled: Option<Moments>,
    /// Student t 95% interval of the pooled mean.
    pub pooled_ci: Option<Interval>,
}

/// Paired differences by request index (arm − reference).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Paired {
    /// Mean paired difference with its t interval over `pairs` requests.
    Interval { pairs: usize, interval: Interval },
    /// Why no paired interval is shown.
    NotPaired { reason: String },
}

/// A difference of one percentile (arm − reference) with its interval, or why it has none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum PercentileComparison {
    /// One run each: the seeded bootstrap (paired by request index where the arms are).
    Bootstrap(Bootstrap),
    /// Repeats on both sides: the difference of the mean per-run percentiles with Welch's
    /// interval, runs as the sample.
    AcrossRuns {
        runs: (usize, usize),
        interval: Interval,
    },
    /// No interval: the reason (an unbounded percentile interval, no values).
    NoInterval {
        estimate: Option<f64>,
        reason: String,
    },
}

impl PercentileComparison {
    /// The difference itself.
    pub fn estimate(&self) -> Option<f64> {
        match self {
            PercentileComparison::Bootstrap(b) => Some(b.estimate),
            PercentileComparison::AcrossRuns { interval, .. } => Some(interval.estimate),
            PercentileComparison::NoInterval { estimate, .. } => *estimate,
        }
    }

    /// The interval's ends, when there is one.
    pub fn interval(&self) -> Option<(f64, f64)> {
        match self {
            PercentileComparison::Bootstrap(b) => Some((b.low, b.high)),
            PercentileComparison::AcrossRuns { interval, .. } => {
                Some((interval.low, interval.high))
            }
            PercentileComparison::NoInterval { .. } => None,
        }
    }

    /// Which interval it is, in words.
    pub fn method(&self) -> String {
        match self {
            PercentileComparison::Bootstrap(b) if b.paired => {
                format!("paired bootstrap, {} resamples", b.resamples)
            }
            PercentileComparison::Bootstrap(b) => {
                format!("bootstrap, {} resamples", b.resamples)
            }
            PercentileComparison::AcrossRuns { runs, .. } => {
                format!("t across runs ({} vs {})", runs.0, runs.1)
            }
            PercentileComparison::NoInterval { reason, .. } => reason.clone(),
        }
    }
}

/// A percentile's difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PercentileDifference {
    pub percentile: Percentile,
    pub comparison: PercentileComparison,
}

/// An arm against its reference on one metric over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDifference {
    pub arm: String,
    pub reference: String,
    pub window: Window,
    /// Mean of the arm − mean of the reference, in the metric's unit: the pooled means, or
    /// the means of the runs' means when both arms have repeats.
    pub difference: Option<f64>,
    /// Mean of the arm / mean of the reference, the same means.
    pub ratio: Option<f64>,
    /// Welch 95% interval of the mean difference: over the requests when an arm has one
    /// run, over the runs' means when both arms have repeats (see `welch_runs`).
    pub welch: Option<Interval>,
    /// `(reference runs, arm runs)` when the Welch interval takes runs as the sample (both
    /// arms have repeats, so run-to-run variation is in it); `None` when it takes requests.
    pub welch_runs: Option<(usize, usize)>,
    pub paired: Paired,
    /// p50 and the tail that hurts (p95, p99 or p5, p1).
    pub percentiles: Vec<PercentileDifference>,
}

impl MetricDifference {
    /// What the Welch interval is over, in words.
    pub fn welch_method(&self) -> String {
        match self.welch_runs {
            Some((b, a)) => format!("across runs ({a} vs {b})"),
            None => "over requests".to_owned(),
        }
    }
}

/// Every arm on one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: MetricId,
    /// Per arm and window, arms in comparison order, `all` first.
    pub arms: Vec<ArmMetric>,
    /// One per arm with a reference and window.
    pub differences: Vec<MetricDifference>,
}

impl MetricComparison {
    /// The figures of `arm` over `window`.
    pub fn arm(&self, arm: &str, window: Window) -> Option<&ArmMetric> {
        self.arms
            .iter()
            .find(|a| a.arm == arm && a.window == window)
    }

    /// The difference of `arm` to its reference over `window`.
    pub fn difference(&self, arm: &str, window: Window) -> Option<&MetricDifference> {
        self.differences
            .iter()
            .find(|d| d.arm == arm && d.window == window)
    }
}

/// What to print when an arm has one run: throughput has no run-to-run uncertainty.
pub const SINGLE_RUN: &str = "single run: no run-to-run uncertainty; record ≥ 3 repeats";

/// An arm's aggregate output throughput, tokens per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ThroughputEstimate {
    /// One run: the figure stands alone.
    SingleRun { run_id: String, output_tps: f64 },
    /// Several runs: mean across runs with its t interval (runs − 1 degrees of freedom).
    Repeats {
        runs: usize,
        mean: f64,
        sd: Option<f64>,
        interval: Option<Interval>,
    },
    /// No run of the arm recorded a throughput.
    Missing,
}

impl ThroughputEstimate {
    /// The label a report prints beside the figure.
    pub fn label(&self) -> String {
        match self {
            ThroughputEstimate::SingleRun { .. } => SINGLE_RUN.to_owned(),
            ThroughputEstimate::Repeats { runs, .. } => {
                format!("{runs} runs, 95% CI across runs")
            }
            ThroughputEstimate::Missing => "not recorded".to_owned(),
        }
    }

    /// The central figure, tokens per second.
    pub fn value(&self) -> Option<f64> {
        match self {
            ThroughputEstimate::SingleRun { output_tps, .. } => Some(*output_tps),
            ThroughputEstimate::Repeats { mean, .. } => Some(*mean),
            ThroughputEstimate::Missing => None,
        }
    }

    /// The interval across runs, when there are repeats.
    pub fn interval(&self) -> Option<Interval> {
        match self {
            ThroughputEstimate::Repeats { interval, .. } => *interval,
            _ => None,
        }
    }
}

/// A throughput difference to the reference (arm − reference, tokens per second).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputDifference {
    pub estimate: f64,
    /// Welch's interval with runs as the sample, when both arms have repeats.
    pub interval: Option<Interval>,
    /// Why there is no interval, when there is none.
    pub no_interval: Option<String>,
}

/// A multi-GPU arm's throughput against the matched single-GPU arm: aggregate ÷ (GPUs ×
/// that arm's aggregate).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Efficiency {
    /// The single-GPU arm.
    pub against: String,
    pub value: f64,
}

/// An arm's aggregate throughput over one window, with its per-GPU and per-replica figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmThroughput {
    pub arm: String,
    pub window: Window,
    pub estimate: ThroughputEstimate,
    pub gpus: Option<Gpus>,
    /// The estimate ÷ GPUs.
    pub per_gpu: Option<f64>,
    /// Requests in flight at once (concurrency per replica × replicas).
    pub in_flight: u64,
    pub reference: Option<String>,
    /// This arm's throughput / its reference's.
    pub ratio_to_reference: Option<f64>,
    pub difference: Option<ThroughputDifference>,
    /// Per GPU, against the matched single-GPU arm (multi-GPU arms only).
    pub scaling_efficiency: Option<Efficiency>,
    /// Per-replica throughput of each run (the `all` window), by run id.
    pub per_replica: Vec<(String, Vec<ReplicaThroughput>)>,
}

/// An arm's attainment of the SLOs in force and its goodput over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmGoodput {
    pub arm: String,
    pub window: Window,
    pub runs: usize,
    /// Requests that succeeded and met every SLO, all runs together.
    pub attained: u64,
    /// Measured requests, all runs together.
    pub requests: u64,
    /// attained / requests with its exact (Clopper–Pearson) 95% interval, the runs' requests
    /// pooled.
    pub share: Option<crate::stats::Proportion>,
    /// Goodput in output tokens/s: a single run's, or the mean across runs with its t
    /// interval.
    pub goodput_tps: ThroughputEstimate,
    /// Goodput in requests/s, the same way.
    pub goodput_rps: ThroughputEstimate,
    /// goodput_tps ÷ the arm's GPUs.
    pub per_gpu: Option<f64>,
    pub reference: Option<String>,
    /// goodput_tps − the reference's, Welch's interval across runs when both have repeats.
    pub difference: Option<ThroughputDifference>,
}

/// Spec-decode figures of one run, passed through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSpecDecode {
    pub arm: String,
    pub run_id: String,
    pub replicas: Vec<SpecDecode>,
}

/// Whether two arms realized the same output lengths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum OutputLength {
    Comparable,
    /// Throughput is not comparable as it stands; the reason gives the figures.
    NotComparable {
        warning: String,
    },
}

/// An arm's control verdict against its reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlVerdict {
    pub arm: String,
    pub reference: String,
    pub control: Control,
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
    /// Every warning a reader must see beside the figures.
    pub warnings: Vec<String>,
}

impl Comparison {
    /// The throughput of `arm` over `window`.
    pub fn throughput(&self, arm: &str, window: Window) -> Option<&ArmThroughput> {
        self.throughput
            .iter()
            .find(|t| t.arm == arm && t.window == window)
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

fn arm_metric(arm: &str, runs: &[&Artifact], metric: MetricId, window: Window) -> ArmMetric {
    let mut summaries = Vec::new();
    let mut parts = Vec::new();
    for run in runs {
        let stats = run
            .figures
            .stats(window, metric)
            .copied()
            .unwrap_or_default();
        summaries.push(RunSummary {
            run_id: run.facts.run_id.clone(),
            stats,
        });
        if let (Some(mean), Some(sd)) = (stats.mean, stats.sd)
            && let Ok(moments) = Moments::new(stats.n, mean, sd)
        {
            parts.push(moments);
        }
    }
    // Pool only when every run contributed; a partial pool would silently drop runs.
    let pooled = (parts.len() == runs.len())
        .then(|| Moments::pooled(&parts))
        .flatten();
    ArmMetric {
        arm: arm.to_owned(),
        window,
        runs: summaries,
        pooled_ci: pooled.and_then(mean_interval),
        pooled,
    }
}

fn difference(
    base: &ArmMetric,
    this: &ArmMetric,
    base_runs: &[&Artifact],
    runs: &[&Artifact],
    metric: MetricId,
) -> MetricDifference {
    let pair = base.pooled.zip(this.pooled);
    let difference = pair.map(|(b, a)| a.mean() - b.mean());
    let ratio = pair
        .filter(|(b, _)| b.mean() != 0.0)
        .map(|(b, a)| a.mean() / b.mean());
    // With repeats on both sides the runs are the sample: requests of one run share its
    // conditions, so a request-level interval would leave run-to-run variation out.
    let run_means = |arm: &ArmMetric| {
        let means: Vec<f64> = arm.runs.iter().filter_map(|r| r.stats.mean).collect();
        (arm.runs.len() >= 2 && means.len() == arm.runs.len())
            .then(|| Sample::new(means).ok()?.moments())
            .flatten()
    };
    let (welch, welch_runs, difference, ratio) = if base.runs.len() >= 2 && this.runs.len() >= 2 {
        // The figures the interval is about: the means of the runs' means.
        let means = run_means(base).zip(run_means(this));
        (
            means.and_then(|(b, a)| welch_interval(b, a)),
            Some((base.runs.len(), this.runs.len())),
            means.map(|(b, a)| a.mean() - b.mean()),
            means
                .filter(|(b, _)| b.mean() != 0.0)
                .map(|(b, a)| a.mean() / b.mean()),
        )
    } else {
        (
            pair.and_then(|(b, a)| welch_interval(b, a)),
            None,
            difference,
            ratio,
        )
    };
    let window = this.window;
    MetricDifference {
        arm: this.arm.clone(),
        reference: base.arm.clone(),
        window,
        difference,
        ratio,
        welch,
        welch_runs,
        paired: paired(base_runs, runs, metric, window),
        percentiles: percentile_differences_of(base, this, base_runs, runs, metric),
    }
}

/// The values of `metric` over `window` of each request index, when the arm is one run.
fn by_index(runs: &[&Artifact], metric: MetricId, window: Window) -> Option<BTreeMap<i64, f64>> {
    let [run] = runs else { return None };
    Some(
        run.figures
            .values(window, metric)
            .into_iter()
            .map(|v| (v.request_index, v.value))
            .collect(),
    )
}

/// Why request i of one arm is not the partner of request i of the other, when it is not:
/// the arms must be one run each and keep as many requests in flight, so that request i of
/// both carried the same prompt body and target length (the cell's, by workload
/// fingerprint; only the per-run unique prefix differs) and was sent at the same place in
/// the schedule.
fn unpaired_reason(base_runs: &[&Artifact], runs: &[&Artifact]) -> Option<String> {
    let ([base], [run]) = (base_runs, runs) else {
        return Some("paired differences need exactly one run per arm".to_owned());
    };
    let (b, a) = (base.facts.in_flight(), run.facts.in_flight());
    (a != b).then(|| {
        format!(
            "{a} vs {b} requests in flight: request i holds a different place in each \
             schedule"
        )
    })
}

/// The (reference, arm) values of the request indices both arms have, when each arm is one
/// run (see [`unpaired_reason`]). A request one arm lacks (failed, or in that arm's first
/// wave but not the other's) leaves its pair out.
fn common_pairs(a: &BTreeMap<i64, f64>, b: &BTreeMap<i64, f64>) -> Vec<(f64, f64)> {
    a.iter()
        .filter_map(|(index, x)| b.get(index).map(|y| (*x, *y)))
        .collect()
}

/// Paired differences (arm − reference) when each arm has one run, over the request indices
/// both recorded.
fn paired(base_runs: &[&Artifact], runs: &[&Artifact], metric: MetricId, window: Window) -> Paired {
    let not = |reason: &str| Paired::NotPaired {
        reason: reason.to_owned(),
    };
    if let Some(reason) = unpaired_reason(base_runs, runs) {
        return not(&reason);
    }
    let (Some(a), Some(b)) = (
        by_index(base_runs, metric, window),
        by_index(runs, metric, window),
    ) else {
        return not("paired differences need exactly one run per arm");
    };
    let counted = |runs: &[&Artifact]| {
        runs.iter()
            .filter_map(|run| run.figures.stats(window, metric))
            .map(|s| s.n)
            .sum::<u64>()
    };
    if counted(base_runs) == 0 || counted(runs) == 0 {
        return not("no values in this window");
    }
    if a.is_empty() || b.is_empty() {
        return not("per-request values not recorded");
    }
    let pairs = common_pairs(&a, &b);
    if pairs.is_empty() {
        return not("the arms share no request index");
    }
    let differences: Vec<f64> = pairs.iter().map(|(base, arm)| arm - base).collect();
    match Sample::new(differences) {
        Ok(sample) => match paired_interval(&sample) {
            Some(interval) => Paired::Interval {
                pairs: sample.len(),
                interval,
            },
            None => not("fewer than two paired requests"),
        },
        Err(error) => not(&format!("per-request values unusable: {error}")),
    }
}

/// The differences of p50 and the tail that hurts: a bootstrap when each arm is one run
/// (paired when [`unpaired_reason`] finds none and their request indices agree), Welch over
/// the runs' percentiles when both have repeats; none where an arm's own interval for the
/// percentile is unbounded (in any of its runs, with repeats). The estimate with repeats is
/// the difference of the means of the runs' percentiles.
fn percentile_differences_of(
    base: &ArmMetric,
    this: &ArmMetric,
    base_runs: &[&Artifact],
    runs: &[&Artifact],
    metric: MetricId,
) -> Vec<PercentileDifference> {
    let [mild, far] = metric.tails();
    let wanted = [Percentile::P50, mild, far];
    let window = this.window;
    // One run's percentile, or the mean of every run's.
    let point = |arm: &ArmMetric, q: Percentile| {
        let values: Vec<f64> = arm
            .runs
            .iter()
            .filter_map(|r| r.stats.percentile(q))
            .collect();
        (!values.is_empty() && values.len() == arm.runs.len())
            .then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let no_interval = |q: Percentile, reason: String| PercentileDifference {
        percentile: q,
        comparison: PercentileComparison::NoInterval {
            estimate: point(this, q).zip(point(base, q)).map(|(a, b)| a - b),
            reason,
        },
    };
    let bounded = |q: Percentile, n: usize| {
        let r = rank_interval(n, q.probability());
        r.low.is_some() && r.high.is_some()
    };
    let too_few = |q: Percentile, n: u64| {
        format!(
            "n = {n} is too few for a bounded {q} (needs {})",
            bounded_from(q.probability())
        )
    };
    // Repeats on both sides: runs are the sample, each run's percentile bounded.
    if base.runs.len() >= 2 && this.runs.len() >= 2 {
        return wanted
            .into_iter()
            .map(|q| {
                let unbounded = base
                    .runs
                    .iter()
                    .chain(&this.runs)
                    .find(|r| !bounded(q, usize::try_from(r.stats.n).unwrap_or(usize::MAX)));
                if let Some(run) = unbounded {
                    return no_interval(
                        q,
                        format!("run {}: {}", run.run_id, too_few(q, run.stats.n)),
                    );
                }
                let moments = |arm: &ArmMetric| {
                    let values: Vec<f64> = arm
                        .runs
                        .iter()
                        .filter_map(|r| r.stats.percentile(q))
                        .collect();
                    (values.len() == arm.runs.len())
                        .then(|| Sample::new(values).ok()?.moments())
                        .flatten()
                };
                match moments(base)
                    .zip(moments(this))
                    .and_then(|(b, a)| welch_interval(b, a))
                {
                    Some(interval) => PercentileDifference {
                        percentile: q,
                        comparison: PercentileComparison::AcrossRuns {
                            runs: (base.runs.len(), this.runs.len()),
                            interval,
                        },
                    },
                    None => no_interval(q, "a run without this percentile".to_owned()),
                }
            })
            .collect();
    }
    let (Some(a), Some(b)) = (
        by_index(base_runs, metric, window),
        by_index(runs, metric, window),
    ) else {
        return wanted
            .into_iter()
            .map(|q| {
                no_interval(
                    q,
                    "repeats on one side only: no interval for a difference of percentiles"
                        .to_owned(),
                )
            })
            .collect();
    };
    let mut out: Vec<PercentileDifference> = Vec::new();
    let mut bootstrapped = Vec::new();
    for q in wanted {
        let n = a.len().min(b.len());
        if n == 0 {
            out.push(no_interval(q, "no values in this window".to_owned()));
        } else if !bounded(q, a.len()) || !bounded(q, b.len()) {
            out.push(no_interval(q, too_few(q, n as u64)));
        } else {
            bootstrapped.push(q);
        }
    }
    if !bootstrapped.is_empty() {
        let ps: Vec<_> = bootstrapped.iter().map(|q| q.probability()).collect();
        // Paired when request i is the same request in both arms and their indices agree.
        let results = if unpaired_reason(base_runs, runs).is_none() && a.keys().eq(b.keys()) {
            let pairs = common_pairs(&a, &b);
            percentile_differences(BootstrapDesign::Paired(&pairs), &ps)
        } else {
            let (av, bv): (Vec<f64>, Vec<f64>) =
                (a.into_values().collect(), b.into_values().collect());
            percentile_differences(
                BootstrapDesign::Independent {
                    baseline: &av,
                    arm: &bv,
                },
                &ps,
            )
        };
        match results {
            Some(results) => {
                for (q, result) in bootstrapped.into_iter().zip(results) {
                    out.push(PercentileDifference {
                        percentile: q,
                        comparison: PercentileComparison::Bootstrap(result),
                    });
                }
            }
            None => {
                for q in bootstrapped {
                    out.push(no_interval(q, "per-request values unusable".to_owned()));
                }
            }
        }
    }
    out.sort_by_key(|d| wanted.iter().position(|q| *q == d.percentile));
    out
}

/// Each arm's throughput over both windows, against its reference and, for a multi-GPU
/// arm, against the matched single-GPU arm.
fn throughput(set: &MatchedSet<'_>, arms: &[&str], references: &References) -> Vec<ArmThroughput> {
    let gpus = |arm: &str| set.arm(arm).first().and_then(|r| r.facts.gpus());
    // The single-GPU arm a multi-GPU arm is measured against: one differing from it in one
    // key (its topology), its reference first.
    let single_gpu = |arm: &str| -> Option<&str> {
        let runs = set.arm(arm);
        let config = runs.first()?.facts.effective_config();
        let matched = |other: &&str| {
            gpus(other).is_some_and(|g| g.count == 1)
                && set
                    .arm(other)
                    .first()
                    .is_some_and(|o| control(&o.facts.effective_config(), &config).holds())
        };
        references
            .of(arm)
            .filter(|r| matched(r))
            .or_else(|| arms.iter().copied().find(|other| matched(other)))
    };
    let mut out = Vec::new();
    for window in Window::ALL {
        for arm in arms {
            let runs = set.arm(arm);
            let estimate = estimate(&runs, window);
            let arm_gpus = gpus(arm);
            let reference = references.of(arm).filter(|r| arms.contains(r));
            let reference_runs = reference.map(|r| set.arm(r)).unwrap_or_default();
            let reference_estimate = reference.map(|_| self::estimate(&reference_runs, window));
            let ratio = estimate
                .value()
                .zip(reference_estimate.as_ref().and_then(|e| e.value()))
                .filter(|(_, b)| *b != 0.0)
                .map(|(a, b)| a / b);
            let difference = reference_estimate.as_ref().and_then(|r| {
                run_difference(
                    &estimate,
                    r,
                    &runs,
                    &reference_runs,
                    &|run| run.figures.output_tps(window),
                    "runs without a throughput: no CI",
                )
            });
            let scaling_efficiency = arm_gpus.filter(|g| g.count > 1).and_then(|g| {
                let against = single_gpu(arm)?;
                let base = self::estimate(&set.arm(against), window).value()?;
                let value = estimate.value()? / (f64::from(g.count) * base);
                value.is_finite().then(|| Efficiency {
                    against: against.to_owned(),
                    value,
                })
            });
            out.push(ArmThroughput {
                arm: (*arm).to_owned(),
                window,
                per_gpu: estimate
                    .value()
                    .zip(arm_gpus)
                    .map(|(v, g)| v / f64::from(g.count)),
                gpus: arm_gpus,
                in_flight: runs.first().map_or(0, |r| r.facts.in_flight()),
                reference: reference.map(str::to_owned),
                ratio_to_reference: ratio,
                difference,
                scaling_efficiency,
                estimate,
                per_replica: runs
                    .iter()
                    .map(|run| {
                        (
                            run.facts.run_id.clone(),
                            run.figures.aggregate_output_tps_per_replica.clone(),
                        )
                    })
                    .collect(),
            });
        }
    }
    out
}

/// One run-level figure of a run (its throughput over a window, its goodput, …).
type RunFigure<'f> = &'f dyn Fn(&Artifact) -> Option<f64>;

/// `arm − reference` of a run-level figure, with Welch's interval across runs when both
/// sides have repeats (else why there is none; `missing` when both have repeats but a run
/// lacks the figure).
fn run_difference(
    estimate: &ThroughputEstimate,
    reference: &ThroughputEstimate,
    runs: &[&Artifact],
    reference_runs: &[&Artifact],
    figure: RunFigure<'_>,
    missing: &str,
) -> Option<ThroughputDifference> {
    let (a, b) = estimate.value().zip(reference.value())?;
    let interval = run_moments_of(reference_runs, figure)
        .zip(run_moments_of(runs, figure))
        .and_then(|(b, a)| welch_interval(b, a));
    let repeats = |runs: &[&Artifact]| runs.len() >= 2;
    let no_interval = interval.is_none().then(|| {
        match (repeats(reference_runs), repeats(runs)) {
            (false, false) => "single runs: no CI",
            (true, true) => missing,
            _ => "repeats on one side only: no CI",
        }
        .to_owned()
    });
    Some(ThroughputDifference {
        estimate: a - b,
        interval,
        no_interval,
    })
}

/// Each arm's attainment of the SLOs in force and its goodput over both windows, against
/// its reference; empty when no run has goodput figures (no SLO given).
fn goodput(set: &MatchedSet<'_>, arms: &[&str], references: &References) -> Vec<ArmGoodput> {
    if set.members().iter().all(|m| m.figures.goodput.is_empty()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for window in Window::ALL {
        let tps = move |run: &Artifact| run.figures.goodput(window).and_then(|g| g.goodput_tps);
        let rps = move |run: &Artifact| run.figures.goodput(window).and_then(|g| g.goodput_rps);
        for arm in arms {
            let runs = set.arm(arm);
            let (attained, requests) = runs
                .iter()
                .filter_map(|r| r.figures.goodput(window))
                .fold((0u64, 0u64), |(k, n), g| (k + g.attained, n + g.requests));
            let goodput_tps = estimate_of(&runs, &tps);
            let gpus = runs.first().and_then(|r| r.facts.gpus());
            let reference = references.of(arm).filter(|r| arms.contains(r));
            let difference = reference.and_then(|r| {
                let reference_runs = set.arm(r);
                run_difference(
                    &goodput_tps,
                    &estimate_of(&reference_runs, &tps),
                    &runs,
                    &reference_runs,
                    &tps,
                    "runs without goodput: no CI",
                )
            });
            out.push(ArmGoodput {
                arm: (*arm).to_owned(),
                window,
                runs: runs.len(),
                attained,
                requests,
                share: crate::stats::clopper_pearson(attained, requests),
                per_gpu: goodput_tps
                    .value()
                    .zip(gpus)
                    .map(|(v, g)| v / f64::from(g.count)),
                goodput_rps: estimate_of(&runs, &rps),
                goodput_tps,
                reference: reference.map(str::to_owned),
                difference,
            });
        }
    }
    out
}

/// The runs' values of `figure`, every run having one.
fn run_values_of(runs: &[&Artifact], figure: RunFigure<'_>) -> Option<Vec<(String, f64)>> {
    let values: Vec<(String, f64)> = runs
        .iter()
        .filter_map(|run| figure(run).map(|v| (run.facts.run_id.clone(), v)))
        .collect();
    (!values.is_empty() && values.len() == runs.len()).then_some(values)
}

/// Count, mean and sd of the runs' values of `figure` (two or more runs).
fn run_moments_of(runs: &[&Artifact], figure: RunFigure<'_>) -> Option<Moments> {
    let values = run_values_of(runs, figure)?;
    Sample::new(values.into_iter().map(|(_, v)| v).collect())
        .ok()?
        .moments()
}

fn estimate(runs: &[&Artifact], window: Window) -> ThroughputEstimate {
    estimate_of(runs, &|run| run.figures.output_tps(window))
}

/// A run-level figure of an arm: the one run's value, or the mean across its runs with the
/// t interval (runs − 1 degrees of freedom).
fn estimate_of(runs: &[&Artifact], figure: RunFigure<'_>) -> ThroughputEstimate {
    let Some(values) = run_values_of(runs, figure) else {
        return ThroughputEstimate::Missing;
    };
    match values.as_slice() {
        [(run_id, tps)] => ThroughputEstimate::SingleRun {
            run_id: run_id.clone(),
            output_tps: *tps,
        },
        _ => match Sample::new(values.iter().map(|(_, tps)| *tps).collect()) {
            Ok(sample) => ThroughputEstimate::Repeats {
                runs: sample.len(),
                mean: sample.mean(),
                sd: sample.sd(),
                interval: sample.moments().and_then(mean_interval),
            },
            Err(_) => ThroughputEstimate::Missing,
        },
    }
}

/// Median of the runs' completion-token medians and summed finish-reason counts of an arm.
fn output_profile(runs: &[&Artifact]) -> (Option<f64>, BTreeMap<String, u64>) {
    let mut medians: Vec<f64> = runs
        .iter()
        .filter_map(|run| run.figures.completion_tokens_p50)
        .filter(|median| median.is_finite())
        .collect();
    let median = if medians.len() != runs.len() || medians.is_empty() {
        None
    } else {
        // Nearest rank, as every percentile anvil reports.
        Sample::new(std::mem::take(&mut medians))
            .ok()
            .map(|mut s| s.nearest_rank(Percentile::P50.probability()))
    };
    let mut reasons = BTreeMap::new();
    for run in runs {
        for (reason, count) in &run.figures.finish_reasons {
            let total = reasons.entry(reason.clone()).or_insert(0u64);
            *total = total.saturating_add(*count);
        }
    }
    (median, reasons)
}
fn shares(counts: &BTreeMap<String, u64>) -> BTreeMap<&str, f64> {
    let total: u64 = counts.values().fold(0, |sum, n| sum.saturating_add(*n));
    counts
        .iter()
        .map(|(reason, count)| {
            let share = if total == 0 {
                0.0
            } else {
                *count as f64 / total as f64
            };
            (reason.as_str(), share)
        })
        .collect()
}

fn describe_mix(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "none recorded".to_owned();
    }
    shares(counts)
        .iter()
        .map(|(reason, share)| format!("{reason} {}%", num(share * 100.0)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Output-length realization of `arm` against `baseline` (its reference): the completion-token
/// medians must be within [`MEDIAN_TOLERANCE`] of the reference's and no finish reason's
/// share may differ by more than [`FINISH_SHARE_TOLERANCE`]; otherwise aggregate throughput
/// is not comparable as it stands (an arm that writes shorter replies finishes sooner). The
/// warning names the arm first and gives its figures first, as the heading `arm vs
/// reference` reads.
pub fn output_length_realization(
    baseline: &str,
    base_runs: &[&Artifact],
    arm: &str,
    runs: &[&Artifact],
) -> OutputLength {
    let (base_median, base_mix) = output_profile(base_runs);
    let (median, mix) = output_profile(runs);
    let mut problems = Vec::new();
    match (base_median, median) {
        (Some(b), Some(a)) if b > 0.0 => {
            let change = (a - b) / b;
            if change.abs() > MEDIAN_TOLERANCE {
                let sign = if change > 0.0 { "+" } else { "−" };
                problems.push(format!(
                    "completion tokens p50 {} vs {} ({sign}{}%)",
                    num(a),
                    num(b),
                    num((change * 100.0).abs())
                ));
            }
        }
        _ => problems.push("completion-token medians not recorded for both arms".to_owned()),
    }
    let (base_shares, shares_now) = (shares(&base_mix), shares(&mix));
    let reasons: BTreeSet<&str> = base_shares
        .keys()
        .chain(shares_now.keys())
        .copied()
        .collect();
    let mix_differs = base_mix.is_empty()
        || mix.is_empty()
        || reasons.iter().any(|reason| {
            let b = base_shares.get(reason).copied().unwrap_or(0.0);
            let a = shares_now.get(reason).copied().unwrap_or(0.0);
            (a - b).abs() > FINISH_SHARE_TOLERANCE
        });
    if mix_differs {
        problems.push(format!(
            "finish reasons {} vs {}",
            describe_mix(&mix),
            describe_mix(&base_mix)
        ));
    }
    if problems.is_empty() {
        OutputLength::Comparable
    } else {
        OutputLength::NotComparable {
            warning: format!(
                "{arm} vs {baseline}: output-length realization differs ({}); throughput is not comparable as it stands",
                problems.join("; ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{
        artifact, full_stats, per_request, plan, screen_workload, selection,
    };
    use super::super::matching::match_artifacts;
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    /// Give `a` 100 requests whose TTFT is `value(request index)`, and their statistics.
    fn with_ttft(a: &mut Artifact, value: impl Fn(i64) -> f64) {
        let values = per_request(100, &value);
        let mut sample = Sample::new(values.iter().map(|v| v.value).collect()).unwrap();
        a.figures.per_request.insert(MetricId::TtftMs, values);
        a.figures
            .metrics
            .insert(MetricId::TtftMs, sample.describe());
    }

    #[test]
    fn welch_and_paired_differences_against_the_baseline() {
        let mut base = artifact("r-k8", "K8", &[("spec_k", "8")], 1000.0);
        let mut k12 = artifact("r-k12", "K12", &[("spec_k", "12")], 1100.0);
        k12.figures
            .metrics
            .insert(MetricId::TtftMs, full_stats(100, 90.0, 10.0));
        base.figures
            .per_request
            .insert(MetricId::TtftMs, per_request(5, |i| 100.0 + i as f64));
        // Differences 1, 2, 3, 4, 5 → paired interval (1.036757, 4.963243) (see stats tests).
        k12.figures.per_request.insert(
            MetricId::TtftMs,
            per_request(5, |i| 100.0 + 2.0 * i as f64 + 1.0),
        );
        let artifacts = [base, k12];
        let set = match_artifacts(&artifacts).unwrap();
        let comparison = compare(
            &set,
            &References::Baseline("K8".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        assert_eq!(
            comparison.label,
            "headline: matched sustained-output artifacts"
        );
        let ttft = &comparison.metrics[0];
        assert_eq!(ttft.metric, MetricId::TtftMs);
        assert_eq!(
            ttft.arm("K12", Window::All).unwrap().runs[0].stats.p99,
            Some(110.0)
        );
        let diff = &ttft.differences[0];
        assert_eq!(diff.arm, "K12");
        assert_eq!(diff.difference, Some(-10.0));
        assert_eq!(diff.ratio, Some(0.9));
        // n = 100 each, sd 10 each: se = √(100/100 + 100/100) = 1.414214,
        // df = 4 / (1/99 + 1/99) = 198, t(0.975, 198) = 1.97202 (tables):
        // −10 ± 2.78885 → (−12.78885, −7.21115).
        let welch = diff.welch.unwrap();
        assert!(close(welch.df, 198.0, 1e-9), "{welch:?}");
        assert!(close(welch.low, -12.78885, 1e-4), "{welch:?}");
        assert!(close(welch.high, -7.21115, 1e-4), "{welch:?}");
        match &diff.paired {
            Paired::Interval { pairs, interval } => {
                assert_eq!(*pairs, 5);
                assert!(close(interval.estimate, 3.0, 1e-12));
                assert!(close(interval.low, 1.036757, 1e-5));
            }
            other => panic!("{other:?}"),
        }
        // Other metrics have no per-request values.
        assert_eq!(
            comparison.metrics[1].differences[0].paired,
            Paired::NotPaired {
                reason: "per-request values not recorded".to_owned()
            }
        );
        assert_eq!(comparison.throughput[0].estimate.label(), SINGLE_RUN);
        assert_eq!(
            comparison.controls[0].control.reason(),
            "one variable: spec_k = 8 vs 12"
        );
        assert!(comparison.warnings.is_empty(), "{:?}", comparison.warnings);
        // Five values bound no side of p50's interval (it needs 6): no percentile CI.
        let p50 = &diff.percentiles[0];
        assert_eq!(p50.percentile, Percentile::P50);
        assert_eq!(
            p50.comparison,
            PercentileComparison::NoInterval {
                estimate: Some(-10.0),
                reason: "n = 5 is too few for a bounded p50 (needs 6)".to_owned()
            }
        );
    }

    #[test]
    fn percentile_differences_are_bootstrapped_paired_where_the_requests_agree() {
        // 100 requests each, the arm 5 ms slower on every request: the paired bootstrap of
        // p50 and p95 is exactly +5; p99 of 100 values has no bounded interval.
        let mut base = artifact("r-a", "A", &[("k", "1")], 1.0);
        let mut arm = artifact("r-b", "B", &[("k", "2")], 1.0);
        let value = |i: i64| 100.0 + ((i * 37) % 100) as f64;
        with_ttft(&mut base, value);
        with_ttft(&mut arm, |i| value(i) + 5.0);
        let artifacts = [base, arm];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("A".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        let d = comparison.metrics[0].difference("B", Window::All).unwrap();
        let [p50, p95, p99] = [&d.percentiles[0], &d.percentiles[1], &d.percentiles[2]];
        for (p, q) in [(p50, Percentile::P50), (p95, Percentile::P95)] {
            assert_eq!(p.percentile, q);
            match &p.comparison {
                PercentileComparison::Bootstrap(b) => {
                    assert!(b.paired);
                    assert_eq!((b.estimate, b.low, b.high), (5.0, 5.0, 5.0));
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            p99.comparison.method(),
            "n = 100 is too few for a bounded p99 (needs 368)"
        );
        assert_eq!(p99.comparison.estimate(), Some(5.0));
    }

    #[test]
    fn paired_differences_use_the_requests_both_arms_have() {
        let mut base = artifact("r-a", "A", &[("k", "1")], 1.0);
        let mut other = artifact("r-b", "B", &[("k", "2")], 1.0);
        base.figures
            .per_request
            .insert(MetricId::E2eMs, per_request(5, |i| i as f64));
        other
            .figures
            .per_request
            .insert(MetricId::E2eMs, per_request(4, |i| i as f64));
        let artifacts = [base, other];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("A".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        // Request 4 only the reference has: four pairs, each difference 0.
        match &comparison.metrics[5].differences[0].paired {
            Paired::Interval { pairs, interval } => {
                assert_eq!(*pairs, 4);
                assert_eq!((interval.low, interval.high), (0.0, 0.0));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn arms_at_different_loads_are_not_paired() {
        // DP2 keeps 16 requests in flight, TP1 8: request i is elsewhere in each schedule.
        let mut base = artifact("r-a", "TP1", &[("topology", "TP1")], 1.0);
        let mut dp2 = artifact("r-b", "DP2", &[("topology", "DP2")], 1.0);
        dp2.facts.replica_count = 2;
        let value = |i: i64| 100.0 + ((i * 37) % 100) as f64;
        with_ttft(&mut base, value);
        with_ttft(&mut dp2, value);
        let artifacts = [base, dp2];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("TP1".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        let d = comparison.metrics[0]
            .difference("DP2", Window::All)
            .unwrap();
        assert_eq!(
            d.paired,
            Paired::NotPaired {
                reason: "16 vs 8 requests in flight: request i holds a different place in each \
                         schedule"
                    .to_owned()
            }
        );
        match &d.percentiles[0].comparison {
            PercentileComparison::Bootstrap(b) => assert!(!b.paired),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn repeated_runs_give_a_throughput_interval_across_runs() {
        let artifacts = [
            artifact("r-a1", "A", &[("k", "1")], 1000.0),
            artifact("r-a2", "A", &[("k", "1")], 1100.0),
            artifact("r-a3", "A", &[("k", "1")], 1200.0),
            artifact("r-b", "B", &[("k", "2")], 900.0),
        ];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("A".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        let a = &comparison.throughput[0];
        assert_eq!(a.estimate.label(), "3 runs, 95% CI across runs");
        // Mean 1100, sd 100, se 57.735027, t(0.975, 2) = 4.302653: ± 248.414 →
        // (851.586, 1348.414).
        match &a.estimate {
            ThroughputEstimate::Repeats {
                runs,
                mean,
                interval: Some(ci),
                ..
            } => {
                assert_eq!((*runs, *mean), (3, 1100.0));
                assert!(close(ci.low, 851.586, 1e-3), "{ci:?}");
                assert!(close(ci.high, 1348.414, 1e-3), "{ci:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(comparison.throughput[1].estimate.label(), SINGLE_RUN);
        // Repeats on one side only: a difference without an interval across runs.
        let b = comparison.throughput("B", Window::All).unwrap();
        assert_eq!(b.reference.as_deref(), Some("A"));
        assert_eq!(
            b.difference
                .as_ref()
                .map(|d| (d.estimate, d.interval, d.no_interval.as_deref())),
            Some((-200.0, None, Some("repeats on one side only: no CI")))
        );
        // The percentiles' point estimates stay (B's p50 − the mean of A's three p50s).
        let p50 = &comparison.metrics[0].differences[0].percentiles[0];
        assert_eq!(p50.comparison.estimate(), Some(0.0));
        assert!(
            p50.comparison
                .method()
                .starts_with("repeats on one side only")
        );
        // Paired differences are not taken across repeats.
        assert_eq!(
            comparison.metrics[0].differences[0].paired,
            Paired::NotPaired {
                reason: "paired differences need exactly one run per arm".to_owned()
            }
        );
    }

    #[test]
    fn topology_arms_get_per_gpu_figures_and_efficiency_against_the_single_gpu_arm() {
        // TP1 at 1000, 1010, 990; TP2 at 1700, 1690, 1710; DP2 (two replicas) at 1960 once.
        let mut artifacts = vec![
            artifact("t1a", "TP1", &[("topology", "TP1")], 1000.0),
            artifact("t1b", "TP1", &[("topology", "TP1")], 1010.0),
            artifact("t1c", "TP1", &[("topology", "TP1")], 990.0),
            artifact("t2a", "TP2", &[("topology", "TP2")], 1700.0),
            artifact("t2b", "TP2", &[("topology", "TP2")], 1690.0),
            artifact("t2c", "TP2", &[("topology", "TP2"), ("gpus", "2")], 1710.0),
            artifact("d2", "DP2", &[("topology", "DP2")], 1960.0),
        ];
        artifacts[6].facts.replica_count = 2;
        // The recorded `gpus` key is derived: it is no second variable, and no other config.
        artifacts[5].facts.config = [("topology", "TP2")].into_iter().collect();
        let references = References::Controls {
            stage: Some("matched topology".to_owned()),
            controls: vec![
                ("TP1".to_owned(), None),
                ("TP2".to_owned(), Some("TP1".to_owned())),
                ("DP2".to_owned(), Some("TP1".to_owned())),
            ],
        };
        let c = compare(
            &match_artifacts(&artifacts).unwrap(),
            &references,
            Scope::Headline,
        )
        .unwrap();
        let tp2 = c.throughput("TP2", Window::All).unwrap();
        assert_eq!(
            tp2.gpus,
            Some(Gpus {
                count: 2,
                derived: true
            })
        );
        assert_eq!(tp2.per_gpu, Some(850.0));
        assert_eq!(tp2.in_flight, 8);
        let e = tp2.scaling_efficiency.as_ref().unwrap();
        assert_eq!(e.against, "TP1");
        assert!(close(e.value, 1700.0 / 2000.0, 1e-12), "{e:?}");
        // Both arms repeated: Welch across runs. Means 1000 and 1700, sd 10 each, n 3:
        // se = √(100/3 + 100/3) = 8.164966, df = 4, t = 2.776445: 700 ± 22.6697.
        let d = tp2.difference.as_ref().unwrap();
        assert_eq!(d.estimate, 700.0);
        let ci = d.interval.unwrap();
        assert!(
            close(ci.low, 677.3303, 1e-3) && close(ci.high, 722.6697, 1e-3),
            "{ci:?}"
        );
        let dp2 = c.throughput("DP2", Window::All).unwrap();
        assert_eq!((dp2.in_flight, dp2.per_gpu), (16, Some(980.0)));
        assert!(close(
            dp2.scaling_efficiency.as_ref().unwrap().value,
            0.98,
            1e-12
        ));
        assert_eq!(dp2.difference.as_ref().unwrap().interval, None);
        assert_eq!(
            c.throughput("TP1", Window::All).unwrap().scaling_efficiency,
            None
        );
        assert_eq!(c.references.of("TP1"), None);
        // Percentiles of repeated arms are compared across runs.
        let p50 = &c.metrics[0]
            .difference("TP2", Window::All)
            .unwrap()
            .percentiles[0];
        assert!(
            matches!(
                p50.comparison,
                PercentileComparison::AcrossRuns { runs: (3, 3), .. }
            ),
            "{p50:?}"
        );
        // p99 of each run's 100 requests is unbounded: no interval across runs either.
        let p99 = &c.metrics[0]
            .difference("TP2", Window::All)
            .unwrap()
            .percentiles[2];
        assert_eq!(
            p99.comparison.method(),
            "run t1a: n = 100 is too few for a bounded p99 (needs 368)"
        );
        // Means compared across runs, runs the sample: equal runs, a zero-width interval.
        let ttft = c.metrics[0].difference("TP2", Window::All).unwrap();
        assert_eq!(ttft.welch_runs, Some((3, 3)));
        assert_eq!(ttft.welch_method(), "across runs (3 vs 3)");
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn output_length_mismatch_warns_that_throughput_is_not_comparable() {
        let base = artifact("r-a", "A", &[("k", "1")], 1000.0);
        let mut long = artifact("r-b", "B", &[("k", "2")], 1300.0);
        long.figures.completion_tokens_p50 = Some(410.0);
        long.figures.finish_reasons = [("stop".to_owned(), 60), ("length".to_owned(), 40)]
            .into_iter()
            .collect();
        let artifacts = [base, long];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("A".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        let warning = "B vs A: output-length realization differs (completion tokens p50 410 vs \
                       340 (+20.6%); finish reasons length 40%, stop 60% vs stop 100%); \
                       throughput is not comparable as it stands";
        assert_eq!(comparison.warnings, [warning]);
        assert_eq!(
            comparison.output_length[0].2,
            OutputLength::NotComparable {
                warning: warning.to_owned()
            }
        );
    }

    #[test]
    fn equal_output_lengths_within_tolerance_are_comparable() {
        let base = artifact("r-a", "A", &[("k", "1")], 1000.0);
        let mut near = artifact("r-b", "B", &[("k", "2")], 1010.0);
        near.figures.completion_tokens_p50 = Some(360.0); // +5.9%
        near.figures.finish_reasons = [("stop".to_owned(), 97), ("length".to_owned(), 3)]
            .into_iter()
            .collect();
        let artifacts = [base, near];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("A".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        assert_eq!(comparison.output_length[0].2, OutputLength::Comparable);
    }

    #[test]
    fn compare_artifacts_gates_then_matches_then_compares() {
        let plan = plan();
        let selection = selection();
        let artifacts = [
            artifact("r-a", "A", &[("k", "1")], 1000.0),
            artifact("r-b", "B", &[("k", "2")], 1100.0),
        ];
        let comparison = compare_artifacts(
            &artifacts,
            &[],
            &References::Baseline("A".to_owned()),
            &selection,
            &plan,
        )
        .unwrap();
        assert_eq!(
            comparison.label,
            "headline: matched sustained-output artifacts"
        );
        let refusal = compare_artifacts(
            &artifacts,
            &["vendor blog"],
            &References::Baseline("A".to_owned()),
            &selection,
            &plan,
        )
        .unwrap_err();
        assert_eq!(
            refusal.rule.as_deref(),
            Some(plan.headline_comparison_rule.as_str())
        );
        let mut screens = artifacts.clone();
        for screen in &mut screens {
            screen.facts.workload = screen_workload();
            screen.facts.fingerprint = screen.facts.workload.fingerprint();
        }
        let comparison = compare_artifacts(
            &screens,
            &[],
            &References::Baseline("A".to_owned()),
            &selection,
            &plan,
        )
        .unwrap();
        assert_eq!(comparison.label, "within-screen selection only");
    }

    #[test]
    fn repeats_with_different_configs_are_warned() {
        let artifacts = [
            artifact("r-a1", "A", &[("k", "1")], 1000.0),
            artifact("r-a2", "A", &[("k", "3")], 1000.0),
            artifact("r-b", "B", &[("k", "2")], 1000.0),
        ];
        let comparison = compare(
            &match_artifacts(&artifacts).unwrap(),
            &References::Baseline("A".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        assert_eq!(
            comparison.warnings,
            [
                "A: runs r-a1 and r-a2 record different configurations (one variable: k = 1 vs 3); \
                 they are not repeats of one cell"
            ]
        );
    }

    #[test]
    fn confounded_arm_is_warned_and_missing_baseline_refused() {
        let artifacts = [
            artifact("r-a", "A", &[("spec_k", "8"), ("chunk", "2048")], 1.0),
            artifact("r-b", "B", &[("spec_k", "12"), ("chunk", "1024")], 1.0),
        ];
        let set = match_artifacts(&artifacts).unwrap();
        let comparison =
            compare(&set, &References::Baseline("A".to_owned()), Scope::Headline).unwrap();
        assert_eq!(
            comparison.warnings,
            ["B vs A: confounded: differs in chunk, spec_k"]
        );
        let refusal =
            compare(&set, &References::Baseline("C".to_owned()), Scope::Headline).unwrap_err();
        assert_eq!(
            refusal.reason,
            "baseline arm C is not in the matched set (arms: A, B)"
        );
    }
}
