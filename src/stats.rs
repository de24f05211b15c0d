//! Descriptive statistics of a sample: the pure math behind the SQL functions `nearest_rank`,
//! `ci95_low` and `ci95_high` (registered in [`crate::query`]) and the manifest's
//! `statistics` section (mean, standard deviation, 95% CI for the mean, nearest-rank
//! percentiles).
//!
//! A [`Sample`] cannot be empty and cannot hold NaN, so every estimate below is defined;
//! the only remaining partial case (standard deviation and CI need n ≥ 2) is an `Option`.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Why a sample or a probability was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("a sample needs at least one value")]
    Empty,
    #[error("value {index} of the sample is NaN; NaN has no rank and no mean")]
    NaN { index: usize },
    #[error("percentile p = {p} is outside (0, 1]; nearest rank needs 0 < p <= 1")]
    Probability { p: f64 },
}

/// A non-empty sample of values, none NaN. The values are not kept sorted: a percentile
/// selects its rank in linear time ([`slice::select_nth_unstable_by`]), which reorders them.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    values: Vec<f64>,
}

impl Sample {
    /// Check `values`: at least one, none NaN.
    pub fn new(values: Vec<f64>) -> Result<Self, StatsError> {
        if values.is_empty() {
            return Err(StatsError::Empty);
        }
        if let Some(index) = values.iter().position(|v| v.is_nan()) {
            return Err(StatsError::NaN { index });
        }
        Ok(Self { values })
    }

    /// Number of values, n ≥ 1.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false: a sample is never empty (kept for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn min(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn max(&self) -> f64 {
        self.values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// Arithmetic mean, Σx / n.
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.len() as f64
    }

    /// Sample standard deviation with Bessel's correction, √(Σ(x − x̄)² / (n − 1)) (the
    /// two-pass formula); `None` for n = 1.
    pub fn sd(&self) -> Option<f64> {
        let n = self.len();
        if n < 2 {
            return None;
        }
        let mean = self.mean();
        let ss: f64 = self.values.iter().map(|x| (x - mean) * (x - mean)).sum();
        Some((ss / (n - 1) as f64).sqrt())
    }

    /// Percentile by nearest rank: the value at 1-based rank ⌈p·n⌉ of the sorted values
    /// (Hyndman & Fan 1996 definition 1, inverse of the empirical CDF; the manifest's
    /// `percentile_method: nearest rank`). Selection, not a sort: O(n), and it reorders the
    /// values (which changes no other statistic).
    pub fn nearest_rank(&mut self, p: Probability) -> f64 {
        let index = nearest_rank_index(p.0, self.len());
        *self.values.select_nth_unstable_by(index, f64::total_cmp).1
    }

    /// 95% confidence interval for the mean, x̄ ± t(0.975, n − 1) · s / √n, with the
    /// Student t quantile (Student 1908; e.g. NIST/SEMATECH e-Handbook §7.2.2.1);
    /// `None` for n = 1.
    pub fn ci95(&self) -> Option<(f64, f64)> {
        let n = self.len();
        let sd = self.sd()?;
        let t = t_quantile_975(n - 1)?;
        let half = t * sd / (n as f64).sqrt();
        let mean = self.mean();
        Some((mean - half, mean + half))
    }

    /// Every statistic the manifest asks for.
    pub fn describe(&mut self) -> Estimate {
        let ci = self.ci95();
        let mut q = |p| self.nearest_rank(Probability(p));
        let (p25, p50, p75, p90, p95, p99) = (q(0.25), q(0.50), q(0.75), q(0.90), q(0.95), q(0.99));
        Estimate {
            n: self.len(),
            mean: self.mean(),
            sd: self.sd(),
            ci95_low: ci.map(|c| c.0),
            ci95_high: ci.map(|c| c.1),
            min: self.min(),
            p25,
            p50,
            p75,
            p90,
            p95,
            p99,
            max: self.max(),
        }
    }
}

/// The 0.975 quantile of Student's t distribution with `df` degrees of freedom (`None` for
/// df = 0). statrs inverts the regularised incomplete beta function.
pub fn t_quantile_975(df: usize) -> Option<f64> {
    if df == 0 {
        return None;
    }
    StudentsT::new(0.0, 1.0, df as f64)
        .ok()
        .map(|t| t.inverse_cdf(0.975))
}

/// 0-based index of the nearest-rank value for p in (0, 1] over n ≥ 1 sorted values:
/// ⌈p·n⌉ − 1. A product p·n within 1e-9 (relative) of an integer counts as that integer, so
/// a decimal p such as 0.07 (0.07 × 100 = 7.000000000000001 in binary floating point) gives
/// rank 7 as written, not 8.
pub fn nearest_rank_index(p: f64, n: usize) -> usize {
    let x = p * n as f64;
    let nearest = x.round();
    let rank = if (x - nearest).abs() <= 1e-9 * x.max(1.0) {
        nearest
    } else {
        x.ceil()
    };
    // p > 0 gives rank ≥ 1; the clamp keeps float edge cases inside the sample.
    (rank as usize).clamp(1, n.max(1)) - 1
}

/// A probability p with 0 < p ≤ 1, the argument of [`Sample::nearest_rank`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Probability(f64);

impl Probability {
    pub fn new(p: f64) -> Result<Self, StatsError> {
        if p > 0.0 && p <= 1.0 {
            Ok(Self(p))
        } else {
            Err(StatsError::Probability { p })
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// The manifest's statistics of one sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    pub sd: Option<f64>,
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    pub min: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: f64) -> Probability {
        Probability::new(v).unwrap()
    }

    #[test]
    fn refuses_empty_and_nan_samples_and_bad_probabilities() {
        assert_eq!(Sample::new(vec![]), Err(StatsError::Empty));
        assert_eq!(
            Sample::new(vec![1.0, f64::NAN]),
            Err(StatsError::NaN { index: 1 })
        );
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
        let t9 = t_quantile_975(9).unwrap();
        assert!((t9 - 2.262_157_162_8).abs() < 1e-9, "{t9}");
        assert_eq!(t_quantile_975(0), None);
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
        assert_eq!((e.n, e.mean, e.min, e.max), (2, 3.0, 2.0, 4.0));
        assert_eq!((e.p25, e.p50, e.p75, e.p99), (2.0, 2.0, 4.0, 4.0));
        assert!(e.ci95_low.unwrap() < 3.0 && e.ci95_high.unwrap() > 3.0);
    }
}
