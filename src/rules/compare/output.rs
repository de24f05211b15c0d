//! Output-length realization: whether the arms' replies reached comparable lengths and
//! finished for comparable reasons, before their throughputs are put side by side.

use super::*;

/// What an arm's replies amounted to: the median of its runs' completion-token medians,
/// the mean of their means and of their totals, and its summed finish-reason counts.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputProfile {
    pub median: Option<f64>,
    pub mean: Option<f64>,
    pub total: Option<f64>,
    pub reasons: BTreeMap<String, u64>,
}

/// The mean of one figure over every run, `None` unless every run has it finite.
fn over_runs(runs: &[&Artifact], pick: impl Fn(&Artifact) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = runs
        .iter()
        .filter_map(|run| pick(run))
        .filter(|v| v.is_finite())
        .collect();
    (values.len() == runs.len() && !values.is_empty())
        .then(|| values.iter().sum::<f64>() / values.len() as f64)
}

pub(super) fn output_profile(runs: &[&Artifact]) -> OutputProfile {
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
    OutputProfile {
        median,
        mean: over_runs(runs, |r| r.figures.completion_tokens_mean),
        total: over_runs(runs, |r| r.figures.completion_tokens_total),
        reasons,
    }
}
pub(super) fn shares(counts: &BTreeMap<String, u64>) -> BTreeMap<&str, f64> {
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

pub(super) fn describe_mix(counts: &BTreeMap<String, u64>) -> String {
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
/// medians, means and totals per run must each be within [`MEDIAN_TOLERANCE`] of the
/// reference's and no finish reason's
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
    profiles_compared(
        baseline,
        &output_profile(base_runs),
        arm,
        &output_profile(runs),
    )
}

/// [`output_length_realization`] on two arms' profiles.
pub(super) fn profiles_compared(
    baseline: &str,
    base: &OutputProfile,
    arm: &str,
    now: &OutputProfile,
) -> OutputLength {
    let (base_mix, mix) = (&base.reasons, &now.reasons);
    let mut problems = Vec::new();
    match (base.median, now.median) {
        (Some(b), Some(_)) if b > 0.0 => {}
        _ => problems.push("completion-token medians not recorded for both arms".to_owned()),
    }
    // The median, the mean and the run's total each: a long tail of replies moves the
    // tokens a throughput counts without moving the median.
    for (what, b, a) in [
        ("p50", base.median, now.median),
        ("mean", base.mean, now.mean),
        ("total per run", base.total, now.total),
    ] {
        if let (Some(b), Some(a)) = (b, a)
            && b > 0.0
        {
            let change = (a - b) / b;
            if change.abs() > MEDIAN_TOLERANCE {
                let sign = if change > 0.0 { "+" } else { "−" };
                problems.push(format!(
                    "completion tokens {what} {} vs {} ({sign}{}%)",
                    crate::figure::sig3(a),
                    crate::figure::sig3(b),
                    num((change * 100.0).abs())
                ));
            }
        }
    }
    let (base_shares, shares_now) = (shares(base_mix), shares(mix));
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
            describe_mix(mix),
            describe_mix(base_mix)
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
