//! The intervals the rules report, all at [`super::LEVEL`]: the Student t interval of a mean
//! (`mean_interval`, beside the `Moments` it takes in `sample.rs`),
//! Welch's interval for a difference of two means, and the paired t interval; over
//! [`Moments`] (n ≥ 2, finite mean, finite non-negative standard deviation), so no function
//! here can be handed a value it cannot use.

use super::quantile::t_quantile;
#[cfg(test)]
use super::sample::SampleError;
use super::sample::{Interval, Moments, Sample, mean_interval};

/// Welch's interval for the difference of means `b − a` of two independent samples with
/// possibly unequal variances (B. L. Welch, "The generalization of 'Student's' problem when
/// several different population variances are involved", Biometrika 34, 1947; NIST/SEMATECH
/// e-Handbook §1.3.5.3):
///
/// se = √(s_a²/n_a + s_b²/n_b),
/// df = se⁴ / ((s_a²/n_a)² / (n_a − 1) + (s_b²/n_b)² / (n_b − 1))   (Welch–Satterthwaite),
/// interval = (m_b − m_a) ± t(0.975, df) · se.
///
/// When both standard deviations are zero the difference is known exactly: the interval has
/// zero width and df is n_a + n_b − 2.
pub fn welch_interval(a: Moments, b: Moments) -> Option<Interval> {
    let va = a.sd() * a.sd() / a.n() as f64;
    let vb = b.sd() * b.sd() / b.n() as f64;
    let se2 = va + vb;
    let estimate = b.mean() - a.mean();
    if se2 == 0.0 {
        return Some(Interval {
            estimate,
            low: estimate,
            high: estimate,
            df: (a.n() as f64) + (b.n() as f64) - 2.0,
        });
    }
    let df = se2 * se2 / (va * va / (a.n() - 1) as f64 + vb * vb / (b.n() - 1) as f64);
    let half = t_quantile(df)? * se2.sqrt();
    Some(Interval {
        estimate,
        low: estimate - half,
        high: estimate + half,
        df,
    })
}

/// The paired t interval of the mean difference: the Student interval of the differences
/// dᵢ = bᵢ − aᵢ, d̄ ± t(0.975, n − 1) · s_d / √n. `None` for fewer than two pairs.
pub fn paired_interval(differences: &Sample) -> Option<Interval> {
    mean_interval(differences.moments()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn sample_refuses_empty_and_nan() {
        assert_eq!(Sample::new(vec![]), Err(SampleError::Empty));
        assert_eq!(
            Sample::new(vec![1.0, f64::INFINITY]),
            Err(SampleError::NotFinite {
                index: 1,
                value: f64::INFINITY
            })
        );
        assert!(matches!(
            Sample::new(vec![f64::NAN]),
            Err(SampleError::NotFinite { index: 0, .. })
        ));
        assert_eq!(Moments::new(1, 1.0, 0.0), Err(SampleError::TooFew(1)));
        assert_eq!(
            Moments::new(3, 1.0, -1.0),
            Err(SampleError::BadSpread(-1.0))
        );
    }

    #[test]
    fn t_quantile_matches_tables() {
        // Two-sided 95% critical values from standard t tables.
        assert!(close(t_quantile(1.0).unwrap(), 12.706, 1e-3));
        assert!(close(t_quantile(4.0).unwrap(), 2.776, 1e-3));
        assert!(close(t_quantile(30.0).unwrap(), 2.042, 1e-3));
        assert_eq!(t_quantile(0.0), None);
        assert_eq!(t_quantile(f64::NAN), None);
    }

    #[test]
    fn welch_interval_matches_a_hand_computed_example() {
        // a = {10, 12, 14}: mean 12, s² = 4.  b = {20, 24, 28, 32}: mean 26, s² = 80/3.
        // s_a²/n_a = 4/3, s_b²/n_b = 20/3, se² = 8, se = 2.828427.
        // df = 64 / ((4/3)²/2 + (20/3)²/3) = 64 / (0.888889 + 14.814815) = 4.075472.
        // t(0.975, 4.075472) = 2.7563 (tables: 2.7764 at df 4, 2.5706 at df 5; linear in
        // 1/df gives 2.757). Interval: 14 ± 2.7563 · 2.828427 = 14 ± 7.7960 → (6.204, 21.796).
        let a = Sample::new(vec![10.0, 12.0, 14.0])
            .unwrap()
            .moments()
            .unwrap();
        let b = Sample::new(vec![20.0, 24.0, 28.0, 32.0])
            .unwrap()
            .moments()
            .unwrap();
        let ci = welch_interval(a, b).unwrap();
        assert_eq!(ci.estimate, 14.0);
        assert!(close(ci.df, 4.075472, 1e-5), "{ci:?}");
        assert!(close(ci.low, 6.204, 1e-3), "{ci:?}");
        assert!(close(ci.high, 21.796, 1e-3), "{ci:?}");
    }

    #[test]
    fn welch_interval_of_constant_samples_has_zero_width() {
        let a = Moments::new(5, 3.0, 0.0).unwrap();
        let b = Moments::new(5, 4.0, 0.0).unwrap();
        let ci = welch_interval(a, b).unwrap();
        assert_eq!((ci.estimate, ci.low, ci.high, ci.df), (1.0, 1.0, 1.0, 8.0));
    }

    #[test]
    fn paired_interval_matches_a_hand_computed_example() {
        // d = {1, 2, 3, 4, 5}: mean 3, s = √2.5 = 1.581139, se = 0.707107,
        // t(0.975, 4) = 2.776445: 3 ± 1.963243 → (1.036757, 4.963243).
        let d = Sample::new(vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let ci = paired_interval(&d).unwrap();
        assert!(close(ci.low, 1.036757, 1e-5), "{ci:?}");
        assert!(close(ci.high, 4.963243, 1e-5), "{ci:?}");
        assert_eq!(paired_interval(&Sample::new(vec![1.0]).unwrap()), None);
    }

    #[test]
    fn pooled_moments_equal_the_moments_of_the_union() {
        let a = Sample::new(vec![10.0, 12.0, 14.0]).unwrap();
        let b = Sample::new(vec![20.0, 24.0, 28.0, 32.0]).unwrap();
        let union = Sample::new([a.values(), b.values()].concat()).unwrap();
        let pooled = Moments::pooled(&[a.moments().unwrap(), b.moments().unwrap()]).unwrap();
        let direct = union.moments().unwrap();
        assert_eq!(pooled.n(), direct.n());
        assert!(close(pooled.mean(), direct.mean(), 1e-12));
        assert!(close(pooled.sd(), direct.sd(), 1e-12));
    }
}
