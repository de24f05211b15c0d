//! Quantiles: the nearest-rank percentile's index (the manifest's `percentile_method:
//! nearest rank`) and Student's t quantile of the 95% intervals.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::error::SampleError;

/// Confidence level of every interval anvil reports.
pub const LEVEL: f64 = 0.95;

/// The upper quantile a two-sided [`LEVEL`] interval uses: 0.975, written out so that the
/// SQL functions and the rules invert the same probability.
const UPPER: f64 = 0.975;

/// The 0.975 quantile of Student's t with `df` degrees of freedom (the half-width factor of
/// a two-sided 95% interval); `None` when `df` is not a positive finite number. statrs
/// inverts the regularised incomplete beta function.
pub fn t_quantile(df: f64) -> Option<f64> {
    if !(df.is_finite() && df > 0.0) {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    let q = t.inverse_cdf(UPPER);
    q.is_finite().then_some(q)
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
    pub fn new(p: f64) -> Result<Self, SampleError> {
        if p > 0.0 && p <= 1.0 {
            Ok(Self(p))
        } else {
            Err(SampleError::Probability { p })
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// A probability written in the code (0.25, 0.99, …), known to lie in (0, 1].
    pub(crate) const fn of(p: f64) -> Self {
        Self(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantile_matches_tables() {
        // Two-sided 95% critical values from standard t tables; t(0.975, 9) = 2.2621571628.
        assert!((t_quantile(1.0).unwrap() - 12.706).abs() < 1e-3);
        assert!((t_quantile(4.0).unwrap() - 2.776).abs() < 1e-3);
        assert!((t_quantile(30.0).unwrap() - 2.042).abs() < 1e-3);
        assert!((t_quantile(9.0).unwrap() - 2.262_157_162_8).abs() < 1e-9);
        assert_eq!(t_quantile(0.0), None);
        assert_eq!(t_quantile(f64::NAN), None);
    }

    #[test]
    fn probabilities_outside_zero_to_one_are_refused() {
        for bad in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(Probability::new(bad).is_err(), "{bad}");
        }
        assert!(Probability::new(1.0).is_ok());
    }
}
