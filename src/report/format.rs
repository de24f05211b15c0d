//! The one number policy of anvil's human-facing text — the report, `compare`, `check` and
//! `summary` — so one figure reads the same everywhere: three significant figures (at most
//! three decimals), thousands separated, a true minus sign on differences, `×` on ratios,
//! `n/a` for a figure that is absent or not a finite number. Machine formats (`--format
//! json|csv`) carry full precision instead.

use crate::rules::compare::{MetricDifference, ThroughputDifference};
use crate::stats::{Percentile, Stats};

/// Placeholder for a figure that is absent or not a finite number.
pub const NA: &str = "n/a";

/// A figure with three significant figures (at most three decimals), thousands separated,
/// a true minus sign: `1,523`, `87.4`, `0.412`, `−4.10`; `n/a` when absent or not finite.
pub fn fmt_num(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) => crate::figure::sig3(v),
    }
}

/// A count with thousands separated: `2,568`.
pub fn fmt_count(n: u64) -> String {
    crate::figure::group_thousands(&n.to_string())
}

/// A figure with its unit: `1,523 tok/s`, `87.4 ms`.
pub fn fmt_unit(value: Option<f64>, unit: &str) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        v => format!("{} {unit}", fmt_num(v)),
    }
}

/// A signed difference: `+12.3`, `−4.10` (true minus sign), `0`.
pub fn fmt_diff(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) if v > 0.0 => format!("+{}", fmt_num(Some(v))),
        Some(v) if v < 0.0 => format!("−{}", fmt_num(Some(-v))),
        Some(_) => "0".to_owned(),
    }
}

/// A throughput difference with its interval across runs, or why it has none:
/// `+12.3 [−4.10, +28.7]`, `+12.3 (single runs: no CI)`.
pub fn fmt_throughput_difference(d: &ThroughputDifference) -> String {
    match d.interval {
        Some(i) => format!(
            "{} [{}, {}]",
            fmt_diff(Some(d.estimate)),
            fmt_diff(Some(i.low)),
            fmt_diff(Some(i.high))
        ),
        None => format!(
            "{} ({})",
            fmt_diff(Some(d.estimate)),
            d.no_interval.as_deref().unwrap_or("no CI")
        ),
    }
}

/// A mean difference's Welch interval, saying when runs are its sample: `[−12.8, −7.21]`,
/// `[−12.8, −7.21] across runs (3 vs 3)`.
pub fn fmt_welch(d: &MetricDifference) -> String {
    match (d.welch, d.welch_runs) {
        (None, _) => NA.to_owned(),
        (Some(w), None) => fmt_interval(Some(w.low), Some(w.high)),
        (Some(w), Some(_)) => format!(
            "{} {}",
            fmt_interval(Some(w.low), Some(w.high)),
            d.welch_method()
        ),
    }
}

/// A ratio: `×1.23`.
pub fn fmt_ratio(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) => format!("×{v:.2}"),
    }
}

/// A fraction 0–1 as a percentage: `73.4%`.
pub fn fmt_percent(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) => {
            // Three significant figures as everywhere: 98.9%, but 100% (not 100.0%).
            let text = if (v * 100.0).abs() >= 99.95 {
                format!("{:.0}%", v * 100.0)
            } else {
                format!("{:.1}%", v * 100.0)
            };
            match text.strip_prefix('-') {
                Some(rest) if rest.chars().all(|c| "0.%".contains(c)) => rest.to_owned(),
                Some(rest) => format!("−{rest}"),
                None => text,
            }
        }
    }
}

/// A share with its exact interval and counts: `97.0% [91.5%, 99.4%] (97 of 100)`.
pub fn fmt_share(p: Option<&crate::stats::Proportion>) -> String {
    match p {
        None => NA.to_owned(),
        Some(p) => format!(
            "{} [{}, {}] ({} of {})",
            fmt_percent(Some(p.share)),
            fmt_percent(Some(p.low)),
            fmt_percent(Some(p.high)),
            p.k,
            p.n
        ),
    }
}

/// A run-level estimate as (runs, figure): `1`, `355`; `3`, `355 [352, 358]`; `0`, `n/a`.
pub fn fmt_estimate(e: &crate::rules::ThroughputEstimate) -> (String, String) {
    use crate::rules::ThroughputEstimate;
    match e {
        ThroughputEstimate::SingleRun { output_tps, .. } => {
            ("1".to_owned(), fmt_num(Some(*output_tps)))
        }
        ThroughputEstimate::Repeats {
            runs,
            mean,
            interval,
            ..
        } => (
            runs.to_string(),
            format!(
                "{} {}",
                fmt_num(Some(*mean)),
                interval.map_or_else(
                    || NA.to_owned(),
                    |i| fmt_interval(Some(i.low), Some(i.high))
                )
            ),
        ),
        ThroughputEstimate::Missing => ("0".to_owned(), NA.to_owned()),
    }
}

/// An interval: `[81.2, 93.6]`; `n/a` unless both ends are finite.
pub fn fmt_interval(low: Option<f64>, high: Option<f64>) -> String {
    match (
        low.filter(|v| v.is_finite()),
        high.filter(|v| v.is_finite()),
    ) {
        (Some(l), Some(h)) => format!("[{}, {}]", fmt_num(Some(l)), fmt_num(Some(h))),
        _ => NA.to_owned(),
    }
}

/// A percentile's interval, either side possibly unbounded (too few values for that side):
/// `[1,080, 3,619]`, `[2,594, ∞)`, `(−∞, 38.2]`, `(−∞, ∞)`.
pub fn fmt_bounds(low: Option<f64>, high: Option<f64>) -> String {
    let (l, h) = (
        low.filter(|v| v.is_finite()),
        high.filter(|v| v.is_finite()),
    );
    format!(
        "{}{}, {}{}",
        if l.is_some() { "[" } else { "(" },
        l.map_or_else(|| "−∞".to_owned(), |l| fmt_num(Some(l))),
        h.map_or_else(|| "∞".to_owned(), |h| fmt_num(Some(h))),
        if h.is_some() { "]" } else { ")" },
    )
}

/// The mean of one statistics row with its Student t 95% interval: `801 [685, 917]`.
pub fn fmt_mean(stats: &Stats) -> String {
    format!(
        "{} {}",
        fmt_num(stats.mean),
        fmt_interval(stats.ci95_low, stats.ci95_high)
    )
}

/// A percentile of one statistics row with its 95% interval, `p99 3,639 [2,594, ∞)` when
/// `named`, else `3,639 [2,594, ∞)`; `n/a` over no values.
pub fn fmt_percentile(stats: &Stats, q: Percentile, named: bool) -> String {
    if stats.n == 0 {
        return NA.to_owned();
    }
    let b = stats.interval(q);
    let value = fmt_num(stats.percentile(q));
    let value = if named { format!("{q} {value}") } else { value };
    format!("{value} {}", fmt_bounds(b.low, b.high))
}

/// A signed difference with its interval, `+12.3 [−4.0, +20.1]`, or with why it has none:
/// `+12.3 (no CI: n = 16 is too few …)`.
pub fn fmt_diff_interval(estimate: Option<f64>, interval: Option<(f64, f64)>, why: &str) -> String {
    match interval {
        Some((low, high)) => format!(
            "{} [{}, {}]",
            fmt_diff(estimate),
            fmt_diff(Some(low)),
            fmt_diff(Some(high))
        ),
        None => format!("{} (no CI: {why})", fmt_diff(estimate)),
    }
}
