//! A proportion k of n (the share of requests that attained their SLOs) with its exact
//! Clopper–Pearson 95% interval: the set of success probabilities p for which observing k
//! is not in either 2.5% tail of Binomial(n, p). Its bounds are Beta quantiles:
//! low = Beta⁻¹(0.025; k, n − k + 1) (0 when k = 0), high = Beta⁻¹(0.975; k + 1, n − k) (1
//! when k = n). statrs inverts the regularised incomplete beta function.
//!
//! Used by the SQL functions `clopper_pearson_low(k, n)` and `clopper_pearson_high(k, n)`
//! and by the capacity search, which needs to know when a probe is large enough to resolve
//! a target at all ([`min_requests_to_resolve`]).

use serde::Serialize;
use statrs::distribution::{Beta, ContinuousCDF};

/// A share with its exact 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportion {
    /// Successes.
    pub k: u64,
    /// Trials.
    pub n: u64,
    /// k / n.
    pub share: f64,
    /// Clopper–Pearson 95% lower bound.
    pub low: f64,
    /// Clopper–Pearson 95% upper bound.
    pub high: f64,
}

impl Proportion {
    /// k of n with an interval computed elsewhere (the SQL's `clopper_pearson_low/high`);
    /// `None` when n = 0, k > n or a bound is missing.
    pub fn with_bounds(k: u64, n: u64, low: Option<f64>, high: Option<f64>) -> Option<Self> {
        let (low, high) = low.zip(high)?;
        (n > 0 && k <= n).then(|| Proportion {
            k,
            n,
            share: k as f64 / n as f64,
            low,
            high,
        })
    }
}

/// The share k / n with its Clopper–Pearson 95% interval; `None` when n = 0 or k > n.
pub fn clopper_pearson(k: u64, n: u64) -> Option<Proportion> {
    if n == 0 || k > n {
        return None;
    }
    let (kf, nf) = (k as f64, n as f64);
    let low = if k == 0 {
        0.0
    } else {
        Beta::new(kf, nf - kf + 1.0).ok()?.inverse_cdf(0.025)
    };
    let high = if k == n {
        1.0
    } else {
        Beta::new(kf + 1.0, nf - kf).ok()?.inverse_cdf(0.975)
    };
    Some(Proportion {
        k,
        n,
        share: kf / nf,
        low,
        high,
    })
}

/// The fewest requests with which a probe can show attainment above `target` (0 < target
/// < 1) at all: with every request attained the lower bound is 0.025^(1/n), which exceeds
/// the target only from n ≥ ⌈ln 0.025 ÷ ln target⌉ (368 at 0.99, 36 at 0.9). `None` for a
/// target outside (0, 1).
pub fn min_requests_to_resolve(target: f64) -> Option<u64> {
    if !(target > 0.0 && target < 1.0) {
        return None;
    }
    let n = (0.025f64.ln() / target.ln()).ceil();
    // The bound at n must lie strictly above the target; step past an exact tie.
    let mut n = n.max(1.0) as u64;
    while 0.025f64.powf(1.0 / n as f64) <= target {
        n += 1;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
    }

    #[test]
    fn the_all_or_nothing_bounds_have_closed_forms() {
        // k = n: low = 0.025^(1/n); k = 0: high = 1 - 0.025^(1/n).
        for n in [1u64, 2, 10, 36, 100, 368, 5000] {
            let all = clopper_pearson(n, n).unwrap();
            assert_eq!(all.high, 1.0);
            assert!(
                close(all.low, 0.025f64.powf(1.0 / n as f64)),
                "{n}: {all:?}"
            );
            let none = clopper_pearson(0, n).unwrap();
            assert_eq!(none.low, 0.0);
            assert!(
                close(none.high, 1.0 - 0.025f64.powf(1.0 / n as f64)),
                "{n}: {none:?}"
            );
        }
    }

    #[test]
    fn agrees_with_published_values() {
        // scipy.stats.beta.ppf(0.025, k, n-k+1) and beta.ppf(0.975, k+1, n-k) (R's
        // binom.test gives the same): 7 of 20 in [0.1539092, 0.5921885], 95 of 100 in
        // [0.8871651, 0.9835681].
        let p = clopper_pearson(7, 20).unwrap();
        assert!((p.low - 0.153_909_2).abs() < 5e-7, "{p:?}");
        assert!((p.high - 0.592_188_5).abs() < 5e-7, "{p:?}");
        let p = clopper_pearson(95, 100).unwrap();
        assert!((p.low - 0.887_165_1).abs() < 5e-7, "{p:?}");
        assert!((p.high - 0.983_568_1).abs() < 5e-7, "{p:?}");
        assert_eq!(p.share, 0.95);
    }

    #[test]
    fn nothing_to_estimate_is_none() {
        assert_eq!(clopper_pearson(0, 0), None);
        assert_eq!(clopper_pearson(3, 2), None);
    }

    #[test]
    fn the_smallest_resolving_probe_is_the_one_the_bound_needs() {
        assert_eq!(min_requests_to_resolve(0.99), Some(368));
        assert_eq!(min_requests_to_resolve(0.9), Some(36));
        assert_eq!(min_requests_to_resolve(1.0), None);
        assert_eq!(min_requests_to_resolve(0.0), None);
        for t in [0.5, 0.8, 0.9, 0.95, 0.99, 0.999] {
            let n = min_requests_to_resolve(t).unwrap();
            assert!(clopper_pearson(n, n).unwrap().low > t, "{t}");
            assert!(clopper_pearson(n - 1, n - 1).unwrap().low <= t, "{t}");
        }
    }
}
