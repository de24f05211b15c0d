//! The comparison of a [`MatchedSet`] against a baseline arm: per metric the summary
//! statistics of each arm, each arm's difference and ratio to the baseline with Welch's 95%
//! interval of the mean difference, paired differences by request index, aggregate
//! throughput (a single run, or an interval across repeats), spec-decode figures, the
//! one-variable control verdict, and the output-length realization warning.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::manifest::RunPlan;

use super::control::{Control, control};
use super::headline::{Comparand, HeadlineSelection, Scope, gate};
use super::input::{Artifact, MetricId, ReplicaThroughput, SpecDecode, num};
use super::matching::{MatchedSet, match_artifacts};
use super::refusal::{Refusal, RefusalKind};
use crate::stats::{Interval, Moments, Sample, mean_interval, paired_interval, welch_interval};

/// Relative difference of completion-token medians above which output lengths differ.
pub const MEDIAN_TOLERANCE: f64 = 0.10;
/// Difference of a finish reason's share (0 to 1) above which finish-reason mixes differ.
pub const FINISH_SHARE_TOLERANCE: f64 = 0.05;

/// One run's summary of a metric, in the metric's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub n: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    /// Student t 95% interval of the mean, as the query layer computed it.
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
}

/// One arm's figures of a metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmMetric {
    pub arm: String,
    /// One entry per run of the arm (percentiles cannot be pooled across runs).
    pub runs: Vec<RunSummary>,
    /// Count, mean and sd over all the arm's requests (pooled across runs).
    pub pooled: Option<Moments>,
    /// Student t 95% interval of the pooled mean.
    pub pooled_ci: Option<Interval>,
}

/// Paired differences by request index (arm − baseline).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Paired {
    /// Mean paired difference with its t interval over `pairs` requests.
    Interval { pairs: usize, interval: Interval },
    /// Why no paired interval is shown.
    NotPaired { reason: String },
}

/// An arm against the baseline on one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDifference {
    pub arm: String,
    /// Pooled mean of the arm − pooled mean of the baseline, in the metric's unit.
    pub difference: Option<f64>,
    /// Pooled mean of the arm / pooled mean of the baseline.
    pub ratio: Option<f64>,
    /// Welch 95% interval of the mean difference.
    pub welch: Option<Interval>,
    pub paired: Paired,
}

/// Every arm on one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: MetricId,
    pub arms: Vec<ArmMetric>,
    /// One per non-baseline arm.
    pub differences: Vec<MetricDifference>,
}

/// An arm's aggregate output throughput, tokens per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ThroughputEstimate {
    /// One run: the figure stands alone.
    SingleRun { run_id: String, output_tps: f64 },
    /// Several runs: mean across runs with its t interval (runs as the sample).
    Repeats {
        runs: usize,
        mean: f64,
        interval: Option<Interval>,
    },
    /// No run of the arm recorded a throughput.
    Missing,
}

impl ThroughputEstimate {
    /// The label a report prints beside the figure.
    pub fn label(&self) -> String {
        match self {
            ThroughputEstimate::SingleRun { .. } => "single run".to_owned(),
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
}

/// An arm's aggregate throughput with its per-replica figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmThroughput {
    pub arm: String,
    pub estimate: ThroughputEstimate,
    /// This arm's throughput / the baseline's (1 for the baseline itself).
    pub ratio_to_baseline: Option<f64>,
    /// Per-replica throughput of each run, by run id.
    pub per_replica: Vec<(String, Vec<ReplicaThroughput>)>,
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

/// The comparison of a matched set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// What the comparison is, e.g. `within-screen selection only`.
    pub label: String,
    pub fingerprint: String,
    pub baseline: String,
    /// Arms in first-seen order (the baseline included).
    pub arms: Vec<String>,
    pub metrics: Vec<MetricComparison>,
    pub throughput: Vec<ArmThroughput>,
    pub spec_decode: Vec<ArmSpecDecode>,
    /// Control verdict of each non-baseline arm against the baseline.
    pub controls: Vec<(String, Control)>,
    /// Output-length realization of each non-baseline arm against the baseline.
    pub output_length: Vec<(String, OutputLength)>,
    /// Every warning a reader must see beside the figures.
    pub warnings: Vec<String>,
}

/// Compare the arms of a matched set with `baseline`, labelled with the `scope` the
/// headline rule granted. Refused when the baseline arm is not in the set.
pub fn compare(set: &MatchedSet<'_>, baseline: &str, scope: Scope) -> Result<Comparison, Refusal> {
    let arms = set.arms();
    if !arms.contains(&baseline) {
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
    let base_runs = set.arm(baseline);
    let others: Vec<&str> = arms
        .iter()
        .copied()
        .filter(|arm| *arm != baseline)
        .collect();

    let metrics = MetricId::ALL
        .into_iter()
        .map(|metric| {
            let summaries: Vec<ArmMetric> = arms
                .iter()
                .map(|arm| arm_metric(arm, &set.arm(arm), metric))
                .collect();
            let base = summaries.iter().find(|s| s.arm == baseline);
            let differences = others
                .iter()
                .filter_map(|arm| {
                    let this = summaries.iter().find(|s| s.arm == *arm)?;
                    Some(difference(base, this, &base_runs, &set.arm(arm), metric))
                })
                .collect();
            MetricComparison {
                metric,
                arms: summaries,
                differences,
            }
        })
        .collect();

    let mut throughput: Vec<ArmThroughput> = arms
        .iter()
        .map(|arm| arm_throughput(arm, &set.arm(arm)))
        .collect();
    let base_tps = throughput
        .iter()
        .find(|t| t.arm == baseline)
        .and_then(|t| t.estimate.value())
        .filter(|tps| *tps != 0.0);
    for arm in &mut throughput {
        arm.ratio_to_baseline = arm.estimate.value().zip(base_tps).map(|(a, b)| a / b);
    }
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
            .find(|run| run.facts.config != runs[0].facts.config)
        {
            warnings.push(format!(
                "{arm}: runs {} and {} record different configurations ({})",
                runs[0].facts.run_id,
                odd.facts.run_id,
                control(&runs[0].facts.config, &odd.facts.config).reason()
            ));
        }
    }
    for member in set.members() {
        warnings.extend(member.figures.usage_gap(&member.facts.run_id));
    }
    let mut controls = Vec::new();
    let mut output_length = Vec::new();
    for arm in &others {
        let runs = set.arm(arm);
        let verdict = control(&base_runs[0].facts.config, &runs[0].facts.config);
        if !verdict.holds() {
            warnings.push(format!("{arm} vs {baseline}: {}", verdict.reason()));
        }
        controls.push(((*arm).to_owned(), verdict));
        let realization = output_length_realization(baseline, &base_runs, arm, &runs);
        if let OutputLength::NotComparable { warning } = &realization {
            warnings.push(warning.clone());
        }
        output_length.push(((*arm).to_owned(), realization));
    }

    Ok(Comparison {
        label: scope.label().to_owned(),
        fingerprint: set.fingerprint().to_owned(),
        baseline: baseline.to_owned(),
        arms: arms.iter().map(|arm| (*arm).to_owned()).collect(),
        metrics,
        throughput,
        spec_decode,
        controls,
        output_length,
        warnings,
    })
}

/// What `anvil compare` runs: the headline comparison rule over the artifacts and any
/// external figures, then the matching check, then the comparison with `baseline`. Every
/// refusal carries its reason.
pub fn compare_artifacts(
    artifacts: &[Artifact],
    external_sources: &[&str],
    baseline: &str,
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
    compare(&set, baseline, scope)
}

fn arm_metric(arm: &str, runs: &[&Artifact], metric: MetricId) -> ArmMetric {
    let mut summaries = Vec::new();
    let mut parts = Vec::new();
    for run in runs {
        let stats = run
            .figures
            .metrics
            .get(&metric)
            .copied()
            .unwrap_or_default();
        summaries.push(RunSummary {
            run_id: run.facts.run_id.clone(),
            n: stats.n,
            mean: stats.mean,
            p50: stats.p50,
            p95: stats.p95,
            p99: stats.p99,
            ci95_low: stats.ci95_low,
            ci95_high: stats.ci95_high,
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
        runs: summaries,
        pooled_ci: pooled.and_then(mean_interval),
        pooled,
    }
}

fn difference(
    base: Option<&ArmMetric>,
    this: &ArmMetric,
    base_runs: &[&Artifact],
    runs: &[&Artifact],
    metric: MetricId,
) -> MetricDifference {
    let pair = base.and_then(|b| b.pooled).zip(this.pooled);
    let difference = pair.map(|(b, a)| a.mean() - b.mean());
    let ratio = pair
        .filter(|(b, _)| b.mean() != 0.0)
        .map(|(b, a)| a.mean() / b.mean());
    let welch = pair.and_then(|(b, a)| welch_interval(b, a));
    MetricDifference {
        arm: this.arm.clone(),
        difference,
        ratio,
        welch,
        paired: paired(base_runs, runs, metric),
    }
}

/// Paired differences (arm − baseline) when each arm has one run and both recorded values
/// for the same request indices.
fn paired(base_runs: &[&Artifact], runs: &[&Artifact], metric: MetricId) -> Paired {
    let not = |reason: &str| Paired::NotPaired {
        reason: reason.to_owned(),
    };
    let ([base], [this]) = (base_runs, runs) else {
        return not("paired differences need exactly one run per arm");
    };
    let (Some(a), Some(b)) = (
        base.figures.per_request.get(&metric),
        this.figures.per_request.get(&metric),
    ) else {
        return not("per-request values not recorded");
    };
    let a: BTreeMap<i64, f64> = a.iter().map(|v| (v.request_index, v.value)).collect();
    let b: BTreeMap<i64, f64> = b.iter().map(|v| (v.request_index, v.value)).collect();
    if a.keys().collect::<BTreeSet<_>>() != b.keys().collect::<BTreeSet<_>>() {
        return not("the arms' request indices differ");
    }
    let differences: Vec<f64> = a.iter().map(|(index, base)| b[index] - base).collect();
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

fn arm_throughput(arm: &str, runs: &[&Artifact]) -> ArmThroughput {
    let values: Vec<(String, f64)> = runs
        .iter()
        .filter_map(|run| {
            run.figures
                .aggregate_output_tps
                .map(|tps| (run.facts.run_id.clone(), tps))
        })
        .collect();
    let estimate = match values.as_slice() {
        [] => ThroughputEstimate::Missing,
        [(run_id, tps)] if runs.len() == 1 => ThroughputEstimate::SingleRun {
            run_id: run_id.clone(),
            output_tps: *tps,
        },
        _ if values.len() != runs.len() => ThroughputEstimate::Missing,
        _ => match Sample::new(values.iter().map(|(_, tps)| *tps).collect()) {
            Ok(sample) => ThroughputEstimate::Repeats {
                runs: sample.len(),
                mean: sample.mean(),
                interval: sample.moments().and_then(mean_interval),
            },
            Err(_) => ThroughputEstimate::Missing,
        },
    };
    ArmThroughput {
        arm: arm.to_owned(),
        estimate,
        ratio_to_baseline: None,
        per_replica: runs
            .iter()
            .map(|run| {
                (
                    run.facts.run_id.clone(),
                    run.figures.aggregate_output_tps_per_replica.clone(),
                )
            })
            .collect(),
    }
}

/// Median of the runs' completion-token medians and summed finish-reason counts of an arm.
fn output_profile(runs: &[&Artifact]) -> (Option<f64>, BTreeMap<String, u64>) {
    let mut medians: Vec<f64> = runs
        .iter()
        .filter_map(|run| run.figures.completion_tokens_p50)
        .filter(|median| median.is_finite())
        .collect();
    medians.sort_by(f64::total_cmp);
    let median = if medians.len() != runs.len() || medians.is_empty() {
        None
    } else if medians.len() % 2 == 1 {
        Some(medians[medians.len() / 2])
    } else {
        Some((medians[medians.len() / 2 - 1] + medians[medians.len() / 2]) / 2.0)
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

/// Output-length realization of `arm` against `baseline`: the completion-token medians must
/// be within [`MEDIAN_TOLERANCE`] of the baseline's and no finish reason's share may differ
/// by more than [`FINISH_SHARE_TOLERANCE`]; otherwise aggregate throughput is not comparable
/// as it stands (an arm that writes shorter replies finishes sooner).
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
                let sign = if change > 0.0 { "+" } else { "" };
                problems.push(format!(
                    "completion tokens p50 {} vs {} ({sign}{}%)",
                    num(b),
                    num(a),
                    num(change * 100.0)
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
            describe_mix(&base_mix),
            describe_mix(&mix)
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
        let comparison = compare(&set, "K8", Scope::Headline).unwrap();
        assert_eq!(
            comparison.label,
            "headline: matched sustained-output artifacts"
        );
        let ttft = &comparison.metrics[0];
        assert_eq!(ttft.metric, MetricId::TtftMs);
        assert_eq!(ttft.arms[1].runs[0].p99, Some(110.0));
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
        assert_eq!(comparison.throughput[0].estimate.label(), "single run");
        assert_eq!(
            comparison.controls[0].1.reason(),
            "one variable: spec_k = 8 vs 12"
        );
        assert!(comparison.warnings.is_empty(), "{:?}", comparison.warnings);
    }

    #[test]
    fn paired_differences_need_the_same_request_indices() {
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
        let comparison =
            compare(&match_artifacts(&artifacts).unwrap(), "A", Scope::Headline).unwrap();
        assert_eq!(
            comparison.metrics[5].differences[0].paired,
            Paired::NotPaired {
                reason: "the arms' request indices differ".to_owned()
            }
        );
    }

    #[test]
    fn repeated_runs_give_a_throughput_interval_across_runs() {
        let artifacts = [
            artifact("r-a1", "A", &[("k", "1")], 1000.0),
            artifact("r-a2", "A", &[("k", "1")], 1100.0),
            artifact("r-a3", "A", &[("k", "1")], 1200.0),
            artifact("r-b", "B", &[("k", "2")], 900.0),
        ];
        let comparison =
            compare(&match_artifacts(&artifacts).unwrap(), "A", Scope::Headline).unwrap();
        let a = &comparison.throughput[0];
        assert_eq!(a.estimate.label(), "3 runs, 95% CI across runs");
        // Mean 1100, sd 100, se 57.735027, t(0.975, 2) = 4.302653: ± 248.414 →
        // (851.586, 1348.414).
        match &a.estimate {
            ThroughputEstimate::Repeats {
                runs,
                mean,
                interval: Some(ci),
            } => {
                assert_eq!((*runs, *mean), (3, 1100.0));
                assert!(close(ci.low, 851.586, 1e-3), "{ci:?}");
                assert!(close(ci.high, 1348.414, 1e-3), "{ci:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(comparison.throughput[1].estimate.label(), "single run");
        // Paired differences are not taken across repeats.
        assert_eq!(
            comparison.metrics[0].differences[0].paired,
            Paired::NotPaired {
                reason: "paired differences need exactly one run per arm".to_owned()
            }
        );
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
        let comparison =
            compare(&match_artifacts(&artifacts).unwrap(), "A", Scope::Headline).unwrap();
        let warning = "B vs A: output-length realization differs (completion tokens p50 340 vs \
                       410 (+20.588%); finish reasons stop 100% vs length 40%, stop 60%); \
                       throughput is not comparable as it stands";
        assert_eq!(comparison.warnings, [warning]);
        assert_eq!(
            comparison.output_length[0].1,
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
        let comparison =
            compare(&match_artifacts(&artifacts).unwrap(), "A", Scope::Headline).unwrap();
        assert_eq!(comparison.output_length[0].1, OutputLength::Comparable);
    }

    #[test]
    fn compare_artifacts_gates_then_matches_then_compares() {
        let plan = plan();
        let selection = selection();
        let artifacts = [
            artifact("r-a", "A", &[("k", "1")], 1000.0),
            artifact("r-b", "B", &[("k", "2")], 1100.0),
        ];
        let comparison = compare_artifacts(&artifacts, &[], "A", &selection, &plan).unwrap();
        assert_eq!(
            comparison.label,
            "headline: matched sustained-output artifacts"
        );
        let refusal =
            compare_artifacts(&artifacts, &["vendor blog"], "A", &selection, &plan).unwrap_err();
        assert_eq!(
            refusal.rule.as_deref(),
            Some(plan.headline_comparison_rule.as_str())
        );
        let mut screens = artifacts.clone();
        for screen in &mut screens {
            screen.facts.workload = screen_workload();
            screen.facts.fingerprint = screen.facts.workload.fingerprint();
        }
        let comparison = compare_artifacts(&screens, &[], "A", &selection, &plan).unwrap();
        assert_eq!(comparison.label, "within-screen selection only");
    }

    #[test]
    fn repeats_with_different_configs_are_warned() {
        let artifacts = [
            artifact("r-a1", "A", &[("k", "1")], 1000.0),
            artifact("r-a2", "A", &[("k", "3")], 1000.0),
            artifact("r-b", "B", &[("k", "2")], 1000.0),
        ];
        let comparison =
            compare(&match_artifacts(&artifacts).unwrap(), "A", Scope::Headline).unwrap();
        assert_eq!(
            comparison.warnings,
            ["A: runs r-a1 and r-a2 record different configurations (one variable: k = 1 vs 3)"]
        );
    }

    #[test]
    fn confounded_arm_is_warned_and_missing_baseline_refused() {
        let artifacts = [
            artifact("r-a", "A", &[("spec_k", "8"), ("chunk", "2048")], 1.0),
            artifact("r-b", "B", &[("spec_k", "12"), ("chunk", "1024")], 1.0),
        ];
        let set = match_artifacts(&artifacts).unwrap();
        let comparison = compare(&set, "A", Scope::Headline).unwrap();
        assert_eq!(
            comparison.warnings,
            ["B vs A: confounded: differs in chunk, spec_k"]
        );
        let refusal = compare(&set, "C", Scope::Headline).unwrap_err();
        assert_eq!(
            refusal.reason,
            "baseline arm C is not in the matched set (arms: A, B)"
        );
    }
}
