//! Many differences at once: the two-sided p-value a t interval implies, Holm's step-down
//! correction over a family of p-values (family-wise error at [`super::LEVEL`]), and the
//! runs per arm a difference of means would need for its interval to exclude zero.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::quantile::t_quantile;
use super::sample::{Interval, Moments};

impl Interval {
    /// The two-sided p-value of "the true value is zero" this t interval implies: its
    /// half-width is t(0.975, df) standard errors, so t = estimate ÷ standard error. `None`
    /// when the interval has no width or degrees of freedom to invert.
    pub fn p_value(&self) -> Option<f64> {
        let q = t_quantile(self.df)?;
        let se = (self.high - self.low) / 2.0 / q;
        if se == 0.0 {
            // Known exactly (both samples constant): zero or not, with certainty.
            return Some(if self.estimate == 0.0 { 1.0 } else { 0.0 });
        }
        if !(se.is_finite() && se > 0.0) {
            return None;
        }
        let t = StudentsT::new(0.0, 1.0, self.df).ok()?;
        Some((2.0 * t.sf((self.estimate / se).abs())).clamp(0.0, 1.0))
    }
}

/// Holm's step-down cut-off for a family of p-values at family-wise level `alpha`: a
/// difference is significant after correction when its p-value is strictly below the value
/// returned. Sorted ascending, the k-th smallest (from 0) is tested against alpha ÷ (m − k);
/// the first that fails stops the descent and is the cut-off (it and everything above stay
/// unresolved). When every one passes the cut-off is infinite; an empty family gives
/// `alpha` (one test, uncorrected).
pub fn holm_cutoff(p_values: &[f64], alpha: f64) -> f64 {
    let mut sorted: Vec<f64> = p_values.iter().copied().filter(|p| p.is_finite()).collect();
    if sorted.is_empty() {
        return alpha;
    }
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len();
    sorted
        .iter()
        .enumerate()
        .find(|(k, p)| **p > alpha / (m - k) as f64)
        .map_or(f64::INFINITY, |(_, p)| *p)
}

/// Runs per arm (equal on both sides, each side's spread as observed) at which Welch's 95%
/// interval of a difference as large as the observed one would exclude zero; `None` when
/// the difference is zero or it would take more than `limit` runs.
pub fn runs_to_resolve(a: Moments, b: Moments, limit: u64) -> Option<u64> {
    let d = (a.mean() - b.mean()).abs();
    if d.is_nan() || d <= 0.0 {
        return None;
    }
    let (va, vb) = (a.sd() * a.sd(), b.sd() * b.sd());
    (2..=limit).find(|&n| {
        let nf = n as f64;
        let se2 = (va + vb) / nf;
        if se2 == 0.0 {
            return true;
        }
        // Welch–Satterthwaite degrees of freedom at n per side.
        let df = se2 * se2 / ((va / nf).powi(2) / (nf - 1.0) + (vb / nf).powi(2) / (nf - 1.0));
        t_quantile(df).is_some_and(|q| q * se2.sqrt() < d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{mean_interval, welch_interval};

    #[test]
    fn a_t_intervals_p_value_is_five_percent_where_it_touches_zero() {
        // An interval whose lower end is exactly zero: t = t(0.975, df), p = 0.05.
        let q = t_quantile(4.0).unwrap();
        let i = Interval {
            estimate: q,
            low: 0.0,
            high: 2.0 * q,
            df: 4.0,
        };
        assert!((i.p_value().unwrap() - 0.05).abs() < 1e-9);
        // Excluding zero ⇔ p < 0.05.
        let m = Moments::new(5, 3.0, 1.0).unwrap();
        let ci = mean_interval(m).unwrap();
        assert_eq!(ci.low > 0.0, ci.p_value().unwrap() < 0.05);
    }

    #[test]
    fn holm_steps_down_and_stops_at_the_first_failure() {
        // m = 4 at 0.05: thresholds 0.0125, 0.01667, 0.025, 0.05.
        let p = [0.01, 0.04, 0.012, 0.03];
        // Sorted 0.01 ≤ 0.0125 ✓, 0.012 ≤ 0.0167 ✓, 0.03 > 0.025 ✗: cut-off 0.03.
        assert_eq!(holm_cutoff(&p, 0.05), 0.03);
        // 0.04 < 0.05 uncorrected, yet not below the cut-off.
        assert!(0.04 >= holm_cutoff(&p, 0.05));
        assert_eq!(holm_cutoff(&[0.001, 0.002], 0.05), f64::INFINITY);
        assert_eq!(holm_cutoff(&[], 0.05), 0.05);
    }

    #[test]
    fn the_runs_that_resolve_a_difference_make_its_interval_exclude_zero() {
        let a = Moments::new(3, 100.0, 6.0).unwrap();
        let b = Moments::new(3, 106.0, 6.0).unwrap();
        assert!(welch_interval(a, b).unwrap().low < 0.0);
        let n = runs_to_resolve(a, b, 1000).unwrap();
        let at = |n| {
            welch_interval(
                Moments::new(n, 100.0, 6.0).unwrap(),
                Moments::new(n, 106.0, 6.0).unwrap(),
            )
            .unwrap()
        };
        assert!(at(n).low > 0.0, "{n} runs resolve it");
        assert!(at(n - 1).low <= 0.0, "{} runs do not", n - 1);
        assert_eq!(runs_to_resolve(a, a, 1000), None);
    }
}
