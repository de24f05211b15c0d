//! Run-level figures of each arm: aggregate throughput and goodput per window (one run, or
//! the mean across repeats with its t interval), per GPU, against the reference, and the
//! scaling efficiency of a multi-GPU arm.

use super::*;

/// Each arm's throughput over both windows, against its reference and, for a multi-GPU
/// arm, against the matched single-GPU arm.
pub(super) fn throughput(
    set: &MatchedSet<'_>,
    arms: &[&str],
    references: &References,
) -> Vec<ArmThroughput> {
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
pub(super) fn run_difference(
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
pub(super) fn goodput(
    set: &MatchedSet<'_>,
    arms: &[&str],
    references: &References,
) -> Vec<ArmGoodput> {
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
pub(super) fn run_values_of(
    runs: &[&Artifact],
    figure: RunFigure<'_>,
) -> Option<Vec<(String, f64)>> {
    let values: Vec<(String, f64)> = runs
        .iter()
        .filter_map(|run| figure(run).map(|v| (run.facts.run_id.clone(), v)))
        .collect();
    (!values.is_empty() && values.len() == runs.len()).then_some(values)
}

/// Count, mean and sd of the runs' values of `figure` (two or more runs).
pub(super) fn run_moments_of(runs: &[&Artifact], figure: RunFigure<'_>) -> Option<Moments> {
    let values = run_values_of(runs, figure)?;
    Sample::new(values.into_iter().map(|(_, v)| v).collect())
        .ok()?
        .moments()
}

pub(super) fn estimate(runs: &[&Artifact], window: Window) -> ThroughputEstimate {
    estimate_of(runs, &|run| run.figures.output_tps(window))
}

/// A run-level figure of an arm: the one run's value, or the mean across its runs with the
/// t interval (runs − 1 degrees of freedom).
pub(super) fn estimate_of(runs: &[&Artifact], figure: RunFigure<'_>) -> ThroughputEstimate {
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
