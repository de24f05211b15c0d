//! One named arm against its sweep on one comparison: each difference to an arm one key
//! apart (Welch's interval of the means; at each arm's capacity where the two were offered
//! different load and both were searched), the verdict those differences give, and the
//! reason in words, differences shown as arm − other in the metric's unit.

use super::*;

/// Whether `arm` has two or more runs in comparison `c`.
fn repeated(c: &Comparison, arm: &str) -> bool {
    c.metrics
        .first()
        .and_then(|m| m.arm(arm, Window::All))
        .is_some_and(|a| a.runs.len() >= 2)
}

/// How `arm` compares with `other` on `metric` in comparison `c`: (arm's text, other's
/// text, the difference arm − other oriented so that positive is better for `arm`, its 95%
/// interval when both sides have a spread, whether runs are the interval's sample).
pub(super) fn pairwise(
    c: &Comparison,
    metric: ClaimMetric,
    arm: &str,
    other: &str,
) -> Option<(String, String, f64, Option<Interval>, bool)> {
    let across_runs = repeated(c, arm) && repeated(c, other);
    let (a, am, at) = metric.estimate(c, arm, across_runs)?;
    let (b, bm, bt) = metric.estimate(c, other, across_runs)?;
    let sign = if metric.higher_is_better() { 1.0 } else { -1.0 };
    let interval = am
        .zip(bm)
        .and_then(|(am, bm)| welch_interval(bm, am))
        .map(|i| Interval {
            estimate: sign * i.estimate,
            low: (sign * i.low).min(sign * i.high),
            high: (sign * i.low).max(sign * i.high),
            df: i.df,
        });
    Some((at, bt, sign * (a - b), interval, across_runs))
}

/// The verdict of `arm` against `others` on one comparison: supported when better than each
/// with an interval excluding zero, contradicted when one is better by such an interval, not
/// testable otherwise; with the figures.
pub(super) fn against_sweep(
    c: &Comparison,
    metric: ClaimMetric,
    arm: &str,
    others: &[String],
    rejection: bool,
    capacity: &[CapacityResult],
    holm: &Holm,
) -> (ClaimVerdict, String) {
    let mut better_than_all = true;
    let mut beaten = Vec::new();
    let mut worse_than_some = false;
    let mut untestable = Vec::new();
    let mut parts = Vec::new();
    let mut own = None;
    let mut across_runs = true;
    let (mut ahead, mut behind) = (Vec::new(), Vec::new());
    let mut unequal_load = Vec::new();
    let mut at_capacity_parts = 0;
    for other in others {
        let judged = match c.load_differs(arm, other, metric.basis()) {
            None => pairwise(c, metric, arm, other),
            Some(why) => match at_capacity(capacity, metric, arm, other) {
                Some(result) => {
                    at_capacity_parts += 1;
                    Some(result)
                }
                None => {
                    better_than_all = false;
                    unequal_load.push(why);
                    continue;
                }
            },
        };
        let Some((at, bt, d, interval, runs)) = judged else {
            untestable.push(format!("{other} has no {} recorded", metric.name()));
            better_than_all = false;
            continue;
        };
        across_runs &= runs;
        if d > 0.0 {
            ahead.push(other.as_str());
        } else if d < 0.0 {
            behind.push(other.as_str());
        }
        own.get_or_insert(at);
        // Shown as arm − other in the metric's unit (the sign convention of every table),
        // with the word that says which way is better.
        let raw = |v: f64| if metric.higher_is_better() { v } else { -v };
        let unit = metric.unit();
        let side = interval.map(|i| holm.side(&i));
        let shown = match (interval, side) {
            (Some(i), Some(side)) => {
                let (low, high) = (raw(i.low).min(raw(i.high)), raw(i.low).max(raw(i.high)));
                let word = match side {
                    Resolved::Better => "better",
                    Resolved::Worse => "worse",
                    Resolved::Unresolved => "not resolved",
                };
                format!(
                    "{other} {bt} ({} [{}, {}] {unit}, {word})",
                    signed(raw(d)),
                    signed(low),
                    signed(high)
                )
            }
            _ => format!(
                "{other} {bt} ({} {unit}, no interval: single runs)",
                signed(raw(d))
            ),
        };
        parts.push(shown);
        match side {
            Some(Resolved::Better) => {}
            Some(Resolved::Worse) => {
                better_than_all = false;
                worse_than_some = true;
                beaten.push(other.clone());
            }
            Some(Resolved::Unresolved) => better_than_all = false,
            None => {
                better_than_all = false;
                untestable.push(format!("{other}: single runs, no run-to-run uncertainty"));
            }
        }
    }
    let figures = if at_capacity_parts > 0 {
        format!(
            "{} judged at each arm's capacity (the arms were offered different load here; capacity.json: goodput under the SLOs at the largest load meeting them, aggregate between arms on as many GPUs, per GPU otherwise), {arm} vs {} (differences with {})",
            metric.name(),
            parts.join(", "),
            metric.interval_method(across_runs)
        )
    } else {
        format!(
            "{} over all requests, {arm} {} {} vs {} (differences with {})",
            metric.name(),
            own.unwrap_or_else(|| "n/a".to_owned()),
            metric.unit(),
            parts.join(", "),
            metric.interval_method(across_runs)
        )
    };
    let (supported, contradicted) = if rejection {
        (worse_than_some, better_than_all)
    } else {
        (better_than_all, worse_than_some)
    };
    let verdict = if contradicted {
        ClaimVerdict::Contradicted
    } else if supported {
        ClaimVerdict::Supported
    } else if untestable.is_empty() && unequal_load.is_empty() && !parts.is_empty() {
        ClaimVerdict::NotResolved
    } else {
        ClaimVerdict::NotTestable
    };
    let why = match verdict {
        ClaimVerdict::Supported if rejection => format!(
            "{} better by a 95% interval excluding zero, Holm-corrected",
            beaten.join(", ")
        ),
        ClaimVerdict::Supported => {
            "better than each by a 95% interval excluding zero, Holm-corrected".to_owned()
        }
        ClaimVerdict::Contradicted if rejection => {
            "better than each by a 95% interval excluding zero, Holm-corrected".to_owned()
        }
        ClaimVerdict::Contradicted => format!(
            "{} better by a 95% interval excluding zero, Holm-corrected",
            beaten.join(", ")
        ),
        ClaimVerdict::NotTestable if !unequal_load.is_empty() && parts.is_empty() => {
            return (
                ClaimVerdict::NotTestable,
                format!(
                    "{} not testable at equal load: {}; a capacity search compares them at equal load (capacity per GPU under the SLOs)",
                    metric.name(),
                    unequal_load.join("; ")
                ),
            );
        }
        ClaimVerdict::NotResolved => format!(
            "the differences are within their 95% intervals or not significant after Holm's correction; {}; more runs would resolve it",
            leaning(arm, &ahead, &behind)
        ),
        ClaimVerdict::NotTestable | ClaimVerdict::NotRead => {
            untestable.extend(
                unequal_load
                    .iter()
                    .map(|w| format!("not at equal load: {w}")),
            );
            let why = if untestable.is_empty() {
                "the differences are within their 95% intervals".to_owned()
            } else {
                untestable.join("; ")
            };
            format!("{why}; {}", leaning(arm, &ahead, &behind))
        }
    };
    (verdict, format!("{figures}: {why}"))
}

/// A throughput claim between `arm` and `other`, offered different load in the comparison,
/// judged at each one's capacity: goodput under the SLOs at the passing load of each arm's
/// resolved capacity search, each run one observation (aggregate when both arms use as many
/// GPUs, per GPU otherwise); `None` unless both searches resolved with a capacity and
/// goodput. The shape [`pairwise`] returns: (arm's text, other's text, arm − other oriented
/// better-positive, Welch's interval across runs, true).
fn at_capacity(
    capacity: &[CapacityResult],
    metric: ClaimMetric,
    arm: &str,
    other: &str,
) -> Option<(String, String, f64, Option<Interval>, bool)> {
    if metric != ClaimMetric::AggregateThroughput {
        return None;
    }
    let side = |name: &str| -> Option<(Vec<f64>, u32, f64, &CapacityResult)> {
        let r = capacity.iter().find(|r| r.arm == name)?;
        let load = r.capacity?;
        let passing = r.bracket.as_ref()?.passing.as_ref()?;
        let values: Vec<f64> = passing
            .runs
            .iter()
            .map(|o| o.goodput_tps)
            .collect::<Option<Vec<f64>>>()?;
        (!values.is_empty()).then_some((values, r.gpus?, load, r))
    };
    let (a, a_gpus, _, ar) = side(arm)?;
    let (b, b_gpus, _, br) = side(other)?;
    let per_gpu = a_gpus != b_gpus;
    let scale = |v: Vec<f64>, gpus: u32| -> Vec<f64> {
        if per_gpu {
            v.into_iter().map(|x| x / f64::from(gpus)).collect()
        } else {
            v
        }
    };
    let (a, b) = (scale(a, a_gpus), scale(b, b_gpus));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let moments = |v: &[f64]| Sample::new(v.to_vec()).ok().and_then(|s| s.moments());
    let text = |v: &[f64], r: &CapacityResult| {
        let interval = moments(v)
            .and_then(mean_interval)
            .map(|i| format!(" [{}, {}]", num_short(i.low), num_short(i.high)))
            .unwrap_or_default();
        format!(
            "{}{interval} tok/s{} at {} in flight per GPU ({} runs)",
            num_short(mean(v)),
            if per_gpu { " per GPU" } else { "" },
            r.capacity_per_gpu.map_or_else(|| "?".to_owned(), num_short),
            v.len()
        )
    };
    let interval = moments(&a)
        .zip(moments(&b))
        .and_then(|(am, bm)| welch_interval(bm, am));
    Some((
        format!("at capacity {}", text(&a, ar)),
        format!("at capacity {}", text(&b, br)),
        mean(&a) - mean(&b),
        interval,
        true,
    ))
}

/// Which way the point estimates lean, for an untestable verdict: `the point estimates put
/// K12 ahead of K4 and behind K16`.
fn leaning(arm: &str, ahead: &[&str], behind: &[&str]) -> String {
    let mut sides = Vec::new();
    if !ahead.is_empty() {
        sides.push(format!("ahead of {}", ahead.join(", ")));
    }
    if !behind.is_empty() {
        sides.push(format!("behind {}", behind.join(", ")));
    }
    if sides.is_empty() {
        format!("the point estimates put {arm} level with the rest")
    } else {
        format!("the point estimates put {arm} {}", sides.join(" and "))
    }
}

/// `+12.3`, `−4.1` for a reason text.
pub(super) fn signed(value: f64) -> String {
    if value >= 0.0 {
        format!("+{}", num_short(value))
    } else {
        format!("−{}", num_short(-value))
    }
}
