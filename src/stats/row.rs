//! The one row of statistics every table shows: `cell_stats` computes it in SQL, the
//! rules, `summary`, `compare` and the report read it, `anvil verify` recomputes it; its
//! column names are [`STATISTICS`] and, for the percentiles' 95% intervals,
//! [`INTERVAL_COLUMNS`].

use serde::Serialize;

use super::percentile::Percentile;

/// The point statistics' names, in [`Stats::values`] order after `n`: the columns of the
/// `cell_stats` view.
pub const STATISTICS: [&str; 15] = [
    "n",
    "mean",
    "sd",
    "ci95_low",
    "ci95_high",
    "min",
    "p1",
    "p5",
    "p25",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "max",
];

/// The columns of the percentiles' 95% intervals (`p1_ci_low`, `p1_ci_high`, … `p99_ci_high`),
/// in [`Stats::interval_values`] order.
pub const INTERVAL_COLUMNS: [&str; 16] = {
    let mut out = [""; 16];
    let mut k = 0;
    while k < 8 {
        let [low, high] = Percentile::ALL[k].interval_columns();
        out[2 * k] = low;
        out[2 * k + 1] = high;
        k += 1;
    }
    out
};

/// The ends of a percentile's distribution-free 95% interval; `None` where that side is
/// unbounded (too few values) or was not computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Bounds {
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// One metric's distribution over a run's measured, successful requests of one window, in the
/// metric's unit (see `crate::metric::MetricId`). A statistic is `None` when n is too small for
/// it (sd and CI need n ≥ 2) or the query layer did not compute it.
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
    pub p1: Option<f64>,
    pub p5: Option<f64>,
    pub p25: Option<f64>,
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// The 95% interval of each percentile, in [`Percentile::ALL`] order.
    pub intervals: [Bounds; 8],
}

impl Stats {
    /// Every point statistic but n, in [`STATISTICS`] order (after `n`).
    pub fn values(&self) -> [Option<f64>; 14] {
        [
            self.mean,
            self.sd,
            self.ci95_low,
            self.ci95_high,
            self.min,
            self.p1,
            self.p5,
            self.p25,
            self.p50,
            self.p75,
            self.p90,
            self.p95,
            self.p99,
            self.max,
        ]
    }

    /// The intervals' ends in [`INTERVAL_COLUMNS`] order.
    pub fn interval_values(&self) -> [Option<f64>; 16] {
        std::array::from_fn(|k| {
            let b = self.intervals[k / 2];
            if k % 2 == 0 { b.low } else { b.high }
        })
    }

    /// The row from `n`, the other point statistics in [`STATISTICS`] order (after `n`) and
    /// the intervals' ends in [`INTERVAL_COLUMNS`] order.
    pub fn from_values(n: u64, v: [Option<f64>; 14], intervals: [Option<f64>; 16]) -> Self {
        Self {
            n,
            mean: v[0],
            sd: v[1],
            ci95_low: v[2],
            ci95_high: v[3],
            min: v[4],
            p1: v[5],
            p5: v[6],
            p25: v[7],
            p50: v[8],
            p75: v[9],
            p90: v[10],
            p95: v[11],
            p99: v[12],
            max: v[13],
            intervals: std::array::from_fn(|k| Bounds {
                low: intervals[2 * k],
                high: intervals[2 * k + 1],
            }),
        }
    }

    /// The percentile `q`.
    pub fn percentile(&self, q: Percentile) -> Option<f64> {
        match q {
            Percentile::P1 => self.p1,
            Percentile::P5 => self.p5,
            Percentile::P25 => self.p25,
            Percentile::P50 => self.p50,
            Percentile::P75 => self.p75,
            Percentile::P90 => self.p90,
            Percentile::P95 => self.p95,
            Percentile::P99 => self.p99,
        }
    }

    /// The 95% interval of the percentile `q`.
    pub fn interval(&self, q: Percentile) -> Bounds {
        let k = Percentile::ALL.iter().position(|p| *p == q).unwrap_or(0);
        self.intervals[k]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_in_the_named_order() {
        let v: [Option<f64>; 14] = std::array::from_fn(|i| Some(i as f64));
        let iv: [Option<f64>; 16] = std::array::from_fn(|i| Some(100.0 + i as f64));
        let s = Stats::from_values(7, v, iv);
        assert_eq!(s.values(), v);
        assert_eq!(s.interval_values(), iv);
        assert_eq!(
            (s.n, s.p1, s.p25, s.max),
            (7, Some(5.0), Some(7.0), Some(13.0))
        );
        assert_eq!(STATISTICS[8], "p25");
        for (k, q) in Percentile::ALL.into_iter().enumerate() {
            assert_eq!(STATISTICS[6 + k], q.column());
            assert_eq!(s.percentile(q), v[5 + k]);
            assert_eq!(s.interval(q).low, iv[2 * k]);
        }
        assert_eq!(INTERVAL_COLUMNS[15], "p99_ci_high");
        assert_eq!(s.interval(Percentile::P99).high, Some(115.0));
    }
}
