//! Per-request metrics of two arms compared: each arm's statistics over its runs, the
//! difference of means (Welch, or over runs' means with repeats), the paired interval by
//! request index, and differences of percentiles (bootstrap, paired where the arms are).

use super::*;

pub(super) fn arm_metric(
    arm: &str,
    runs: &[&Artifact],
    metric: MetricId,
    window: Window,
) -> ArmMetric {
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

pub(super) fn difference(
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
pub(super) fn by_index(
    runs: &[&Artifact],
    metric: MetricId,
    window: Window,
) -> Option<BTreeMap<i64, f64>> {
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
pub(super) fn unpaired_reason(base_runs: &[&Artifact], runs: &[&Artifact]) -> Option<String> {
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
pub(super) fn common_pairs(a: &BTreeMap<i64, f64>, b: &BTreeMap<i64, f64>) -> Vec<(f64, f64)> {
    a.iter()
        .filter_map(|(index, x)| b.get(index).map(|y| (*x, *y)))
        .collect()
}

/// Paired differences (arm − reference) when each arm has one run, over the request indices
/// both recorded.
pub(super) fn paired(
    base_runs: &[&Artifact],
    runs: &[&Artifact],
    metric: MetricId,
    window: Window,
) -> Paired {
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
pub(super) fn percentile_differences_of(
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
