//! One sample of finite values and its descriptive statistics (the manifest's
//! `statistics` section: mean, standard deviation, 95% CI of the mean, nearest-rank
//! percentiles).

use serde::Serialize;

pub use super::error::SampleError;
use super::percentile::{Percentile, PercentileInterval, rank_interval};
use super::quantile::{Probability, nearest_rank_index, t_quantile};
use super::row::{Bounds, Stats};

/// A non-empty sample of finite values. The values are not kept sorted: a percentile
/// selects its rank in linear time ([`slice::select_nth_unstable_by`]), which reorders them
/// (and changes no other statistic).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample(Vec<f64>);

impl Sample {
    /// The values, refused when empty or when any is NaN or infinite.
    pub fn new(values: Vec<f64>) -> Result<Self, SampleError> {
        if values.is_empty() {
            return Err(SampleError::Empty);
        }
        if let Some((index, value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(SampleError::NotFinite {
                index,
                value: *value,
            });
        }
        Ok(Self(values))
    }

    pub fn values(&self) -> &[f64] {
        &self.0
    }

    /// Number of values, n ≥ 1.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a sample is never empty (kept for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn min(&self) -> f64 {
        self.0.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn max(&self) -> f64 {
        self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    /// Arithmetic mean, Σx / n.
    pub fn mean(&self) -> f64 {
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }

    /// Sample standard deviation with Bessel's correction, √(Σ(x − x̄)² / (n − 1)) (the
    /// two-pass formula); `None` for n = 1.
    pub fn sd(&self) -> Option<f64> {
        let n = self.0.len();
        if n < 2 {
            return None;
        }
        let mean = self.mean();
        let ss: f64 = self.0.iter().map(|v| (v - mean) * (v - mean)).sum();
        Some((ss / (n - 1) as f64).sqrt())
    }

    /// Count, mean and standard deviation; `None` for a single value (or values so large
    /// that their mean or spread is not finite).
    pub fn moments(&self) -> Option<Moments> {
        Moments::new(self.0.len() as u64, self.mean(), self.sd()?).ok()
    }

    /// Percentile by nearest rank: the value at 1-based rank ⌈p·n⌉ of the sorted values
    /// (Hyndman & Fan 1996 definition 1, inverse of the empirical CDF; the manifest's
    /// `percentile_method: nearest rank`). Selection, not a sort: O(n).
    pub fn nearest_rank(&mut self, p: Probability) -> f64 {
        let index = nearest_rank_index(p.get(), self.len());
        *self.0.select_nth_unstable_by(index, f64::total_cmp).1
    }

    /// The `rank`-th smallest value (1-based, 1 ≤ rank ≤ n).
    fn order_statistic(&mut self, rank: usize) -> f64 {
        *self.0.select_nth_unstable_by(rank - 1, f64::total_cmp).1
    }

    /// The nearest-rank percentile `p` with its distribution-free 95% interval
    /// ([`super::percentile`]); an unbounded side is `None`.
    pub fn percentile_interval(&mut self, p: Probability) -> PercentileInterval {
        let ranks = rank_interval(self.len(), p);
        PercentileInterval {
            estimate: self.nearest_rank(p),
            low: ranks.low.map(|l| self.order_statistic(l)),
            high: ranks.high.map(|u| self.order_statistic(u)),
        }
    }

    /// Every percentile of [`Percentile::ALL`] with its interval, from one sort of the
    /// values (which it leaves sorted): what one statistics row needs at once.
    pub fn percentile_intervals(&mut self) -> [PercentileInterval; 8] {
        self.0.sort_unstable_by(f64::total_cmp);
        let n = self.len();
        let sorted = &self.0;
        Percentile::ALL.map(|q| {
            let ranks = rank_interval(n, q.probability());
            PercentileInterval {
                estimate: sorted[nearest_rank_index(q.p(), n)],
                low: ranks.low.map(|l| sorted[l - 1]),
                high: ranks.high.map(|u| sorted[u - 1]),
            }
        })
    }

    /// 95% confidence interval for the mean, x̄ ± t(0.975, n − 1) · s / √n, with the
    /// Student t quantile (Student 1908; e.g. NIST/SEMATECH e-Handbook §7.2.2.1);
    /// `None` for n = 1.
    pub fn ci95(&self) -> Option<(f64, f64)> {
        mean_interval(self.moments()?).map(|i| (i.low, i.high))
    }

    /// Every statistic the manifest asks for, as the one statistics row.
    pub fn describe(&mut self) -> Stats {
        let ci = self.ci95();
        let intervals = self.percentile_intervals();
        let point = |q: Percentile| Some(intervals[q as usize].estimate);
        Stats {
            n: self.len() as u64,
            mean: Some(self.mean()),
            sd: self.sd(),
            ci95_low: ci.map(|c| c.0),
            ci95_high: ci.map(|c| c.1),
            min: Some(self.min()),
            p1: point(Percentile::P1),
            p5: point(Percentile::P5),
            p25: point(Percentile::P25),
            p50: point(Percentile::P50),
            p75: point(Percentile::P75),
            p90: point(Percentile::P90),
            p95: point(Percentile::P95),
            p99: point(Percentile::P99),
            max: Some(self.max()),
            intervals: intervals.map(|i| Bounds {
                low: i.low,
                high: i.high,
            }),
        }
    }
}

/// Count, mean and sample standard deviation of a sample of at least two values: what the
/// query layer's per-metric statistics carry, and all Welch's interval needs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Moments {
    n: u64,
    mean: f64,
    sd: f64,
}

impl Moments {
    pub fn new(n: u64, mean: f64, sd: f64) -> Result<Self, SampleError> {
        if n < 2 {
            return Err(SampleError::TooFew(n));
        }
        if !mean.is_finite() {
            return Err(SampleError::NotFinite {
                index: 0,
                value: mean,
            });
        }
        if !sd.is_finite() || sd < 0.0 {
            return Err(SampleError::BadSpread(sd));
        }
        Ok(Self { n, mean, sd })
    }

    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    pub fn sd(&self) -> f64 {
        self.sd
    }

    /// The moments of the union of several samples, from each one's moments alone:
    /// N = Σnᵢ, m = Σnᵢmᵢ / N, s² = (Σ(nᵢ − 1)sᵢ² + Σnᵢ(mᵢ − m)²) / (N − 1)
    /// (the exact decomposition of the total sum of squares into within- and between-sample
    /// parts). `None` for an empty list.
    pub fn pooled(parts: &[Moments]) -> Option<Moments> {
        let n: u64 = parts.iter().fold(0, |n, p| n.saturating_add(p.n));
        if parts.is_empty() || n < 2 {
            return None;
        }
        let mean = parts.iter().map(|p| p.n as f64 * p.mean).sum::<f64>() / n as f64;
        let within: f64 = parts.iter().map(|p| (p.n - 1) as f64 * p.sd * p.sd).sum();
        let between: f64 = parts
            .iter()
            .map(|p| p.n as f64 * (p.mean - mean) * (p.mean - mean))
            .sum();
        Moments::new(n, mean, ((within + between) / (n - 1) as f64).sqrt()).ok()
    }
}

/// A two-sided interval at [`super::LEVEL`] around an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// Degrees of freedom of the t quantile used.
    pub df: f64,
}

/// Student t interval of a mean: m ± t(0.975, n − 1) · s / √n.
pub fn mean_interval(m: Moments) -> Option<Interval> {
    let df = (m.n() - 1) as f64;
    let half = t_quantile(df)? * m.sd() / (m.n() as f64).sqrt();
    Some(Interval {
        estimate: m.mean(),
        low: m.mean() - half,
        high: m.mean() + half,
        df,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: f64) -> Probability {
        Probability::new(v).unwrap()
    }

    #[test]
    fn refuses_empty_and_nan_samples_and_bad_probabilities() {
        assert_eq!(Sample::new(vec![]), Err(SampleError::Empty));
        assert!(matches!(
            Sample::new(vec![1.0, f64::NAN]),
            Err(SampleError::NotFinite { index: 1, .. })
        ));
        assert!(matches!(
            Sample::new(vec![f64::NEG_INFINITY]),
            Err(SampleError::NotFinite { index: 0, .. })
        ));
        for bad in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(Probability::new(bad).is_err(), "{bad}");
        }
        assert!(Probability::new(1.0).is_ok());
    }

    #[test]
    fn nearest_rank_of_one_value_is_that_value() {
        let mut s = Sample::new(vec![7.5]).unwrap();
        for q in [0.01, 0.25, 0.5, 0.99, 1.0] {
            assert_eq!(s.nearest_rank(p(q)), 7.5);
        }
        assert_eq!(s.sd(), None);
        assert_eq!(s.ci95(), None);
    }

    #[test]
    fn nearest_rank_of_two_values_switches_above_the_middle() {
        let mut s = Sample::new(vec![20.0, 10.0]).unwrap();
        // ⌈0.5·2⌉ = 1 → 10; ⌈0.51·2⌉ = 2 → 20.
        assert_eq!(s.nearest_rank(p(0.5)), 10.0);
        assert_eq!(s.nearest_rank(p(0.51)), 20.0);
        assert_eq!(s.nearest_rank(p(0.25)), 10.0);
        assert_eq!(s.nearest_rank(p(1.0)), 20.0);
    }

    #[test]
    fn nearest_rank_over_one_hundred_values() {
        // Values 1..=100 shuffled: rank k holds k.
        let values: Vec<f64> = (0..100).map(|i| f64::from((i * 37) % 100 + 1)).collect();
        let mut s = Sample::new(values).unwrap();
        assert_eq!(s.nearest_rank(p(0.5)), 50.0);
        assert_eq!(s.nearest_rank(p(0.99)), 99.0);
        assert_eq!(s.nearest_rank(p(0.25)), 25.0);
        assert_eq!(s.nearest_rank(p(0.901)), 91.0);
        assert_eq!(s.nearest_rank(p(1.0)), 100.0);
        // 0.07 × 100 is 7.000000000000001 in binary: still rank 7.
        assert_eq!(s.nearest_rank(p(0.07)), 7.0);
        assert_eq!(s.nearest_rank(p(0.001)), 1.0);
    }

    #[test]
    fn nearest_rank_with_ties_returns_the_tied_value() {
        let mut s = Sample::new(vec![3.0, 1.0, 3.0, 3.0, 9.0]).unwrap();
        // sorted 1 3 3 3 9: ranks 2..=4 are 3.
        assert_eq!(s.nearest_rank(p(0.3)), 3.0);
        assert_eq!(s.nearest_rank(p(0.8)), 3.0);
        assert_eq!(s.nearest_rank(p(0.81)), 9.0);
        assert_eq!(s.nearest_rank(p(0.2)), 1.0);
    }

    #[test]
    fn ci95_uses_the_student_t_quantile() {
        // t(0.975, 9) from a t-table: 2.2621571628.
        let t9 = super::super::quantile::t_quantile(9.0).unwrap();
        assert!((t9 - 2.262_157_162_8).abs() < 1e-9, "{t9}");
        assert_eq!(super::super::quantile::t_quantile(0.0), None);
        // 1..=10: mean 5.5, sd = √(82.5/9).
        let s = Sample::new((1..=10).map(f64::from).collect()).unwrap();
        let sd = (82.5_f64 / 9.0).sqrt();
        assert!((s.sd().unwrap() - sd).abs() < 1e-12);
        let half = 2.262_157_162_8 * sd / 10f64.sqrt();
        let (lo, hi) = s.ci95().unwrap();
        assert!((lo - (5.5 - half)).abs() < 1e-9, "{lo}");
        assert!((hi - (5.5 + half)).abs() < 1e-9, "{hi}");
    }

    #[test]
    fn describe_fills_every_statistic() {
        let e = Sample::new(vec![4.0, 2.0]).unwrap().describe();
        assert_eq!(
            (e.n, e.mean, e.min, e.max),
            (2, Some(3.0), Some(2.0), Some(4.0))
        );
        assert_eq!(
            (e.p25, e.p50, e.p75, e.p99),
            (Some(2.0), Some(2.0), Some(4.0), Some(4.0))
        );
        assert!(e.ci95_low.unwrap() < 3.0 && e.ci95_high.unwrap() > 3.0);
    }
}
