//! The one row of statistics every table shows: `cell_stats` computes it in SQL, the
//! rules, `summary`, `compare` and the report read it, `anvil verify` recomputes it; its
//! column names are [`STATISTICS`].

use serde::Serialize;

/// The statistics' names, in [`Stats`] field order: the columns of the `cell_stats` view.
pub const STATISTICS: [&str; 13] = [
    "n",
    "mean",
    "sd",
    "ci95_low",
    "ci95_high",
    "min",
    "p25",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "max",
];

/// One metric's distribution over a run's measured, successful requests, in the metric's
/// unit (see `crate::rules::MetricId`). A statistic is `None` when n is too small for it (sd and CI
/// need n ≥ 2) or the query layer did not compute it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Requests the statistics are over.
    pub n: u64,
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1).
    pub sd: Option<f64>,
    /// Lower end of the Student t 95% confidence interval of the mean.
    pub ci95_low: Option<f64>,
    /// Upper end of the Student t 95% confidence interval of the mean.
    pub ci95_high: Option<f64>,
    pub min: Option<f64>,
    /// Nearest-rank percentiles.
    pub p25: Option<f64>,
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Stats {
    /// Every statistic but n, in [`STATISTICS`] order (after `n`).
    pub fn values(&self) -> [Option<f64>; 12] {
        [
            self.mean,
            self.sd,
            self.ci95_low,
            self.ci95_high,
            self.min,
            self.p25,
            self.p50,
            self.p75,
            self.p90,
            self.p95,
            self.p99,
            self.max,
        ]
    }

    /// The row from `n` and the other statistics in [`STATISTICS`] order (after `n`).
    pub fn from_values(n: u64, v: [Option<f64>; 12]) -> Self {
        let [
            mean,
            sd,
            ci95_low,
            ci95_high,
            min,
            p25,
            p50,
            p75,
            p90,
            p95,
            p99,
            max,
        ] = v;
        Self {
            n,
            mean,
            sd,
            ci95_low,
            ci95_high,
            min,
            p25,
            p50,
            p75,
            p90,
            p95,
            p99,
            max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_in_the_named_order() {
        let v: [Option<f64>; 12] = std::array::from_fn(|i| Some(i as f64));
        let s = Stats::from_values(7, v);
        assert_eq!(s.values(), v);
        assert_eq!((s.n, s.p25, s.max), (7, Some(5.0), Some(11.0)));
        assert_eq!(STATISTICS[6], "p25");
    }
}
