//! The percentiles anvil reports and the distribution-free 95% interval of each: for the
//! nearest-rank percentile p of n values, [X(l), X(u)] with l the largest index such that
//! BinomCDF(l − 1; n, p) ≤ 0.025 and u the smallest such that BinomCDF(u − 1; n, p) ≥ 0.975
//! (B ~ Binomial(n, p) counts the values below the true p-quantile; W. J. Conover, "Practical
//! Nonparametric Statistics", 3rd ed., 1999, §3.2, the confidence interval for a quantile;
//! Hahn & Meeker, "Statistical Intervals", 1991, §5.2). Coverage is at least 95% whatever the
//! distribution. Where l < 1 or u > n that side has no order statistic: it is unbounded
//! (`None`), and with few values a high percentile has no upper bound at all (at n = 16, p99's
//! interval is [X(15), ∞)).

use serde::Serialize;
use statrs::distribution::{Binomial, DiscreteCDF};

use super::quantile::Probability;

/// The percentiles every statistics row carries, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Percentile {
    P1,
    P5,
    P25,
    P50,
    P75,
    P90,
    P95,
    P99,
}

impl Percentile {
    /// Every percentile, in column order.
    pub const ALL: [Percentile; 8] = [
        Percentile::P1,
        Percentile::P5,
        Percentile::P25,
        Percentile::P50,
        Percentile::P75,
        Percentile::P90,
        Percentile::P95,
        Percentile::P99,
    ];

    /// Its probability, 0.01 … 0.99.
    pub const fn p(self) -> f64 {
        match self {
            Percentile::P1 => 0.01,
            Percentile::P5 => 0.05,
            Percentile::P25 => 0.25,
            Percentile::P50 => 0.50,
            Percentile::P75 => 0.75,
            Percentile::P90 => 0.90,
            Percentile::P95 => 0.95,
            Percentile::P99 => 0.99,
        }
    }

    pub(crate) const fn probability(self) -> Probability {
        Probability::of(self.p())
    }

    /// Its column (`p1` … `p99`) in `cell_stats`.
    pub const fn column(self) -> &'static str {
        match self {
            Percentile::P1 => "p1",
            Percentile::P5 => "p5",
            Percentile::P25 => "p25",
            Percentile::P50 => "p50",
            Percentile::P75 => "p75",
            Percentile::P90 => "p90",
            Percentile::P95 => "p95",
            Percentile::P99 => "p99",
        }
    }

    /// The columns of its interval's ends in `cell_stats` (`p99_ci_low`, `p99_ci_high`).
    pub const fn interval_columns(self) -> [&'static str; 2] {
        match self {
            Percentile::P1 => ["p1_ci_low", "p1_ci_high"],
            Percentile::P5 => ["p5_ci_low", "p5_ci_high"],
            Percentile::P25 => ["p25_ci_low", "p25_ci_high"],
            Percentile::P50 => ["p50_ci_low", "p50_ci_high"],
            Percentile::P75 => ["p75_ci_low", "p75_ci_high"],
            Percentile::P90 => ["p90_ci_low", "p90_ci_high"],
            Percentile::P95 => ["p95_ci_low", "p95_ci_high"],
            Percentile::P99 => ["p99_ci_low", "p99_ci_high"],
        }
    }

    /// The percentile of a column name (`p99` → P99).
    pub fn from_column(column: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.column() == column)
    }
}

impl std::fmt::Display for Percentile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.column())
    }
}

/// Lower and upper tail probability of the two-sided 95% interval.
const TAIL: f64 = 0.025;

/// The 1-based ranks [l, u] of the 95% interval of the nearest-rank p-percentile of n values;
/// `None` for a side with no order statistic (l < 1 or u > n), which is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RankInterval {
    pub low: Option<usize>,
    pub high: Option<usize>,
}

/// The ranks of the 95% interval of the nearest-rank percentile `p` of `n` values (see the
/// module documentation). Both sides unbounded for n = 0. Remembered per (n, p): every
/// statistics row asks for the same few.
pub fn rank_interval(n: usize, p: Probability) -> RankInterval {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static KNOWN: OnceLock<Mutex<HashMap<(usize, u64), RankInterval>>> = OnceLock::new();
    let known = KNOWN.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (n, p.get().to_bits());
    if let Some(r) = known.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *r;
    }
    let r = compute_rank_interval(n, p);
    let mut known = known.lock().unwrap_or_else(|e| e.into_inner());
    // Bounded: a session asks for a few hundred distinct n at most.
    if known.len() > 100_000 {
        known.clear();
    }
    known.insert(key, r);
    r
}

fn compute_rank_interval(n: usize, p: Probability) -> RankInterval {
    let unbounded = RankInterval {
        low: None,
        high: None,
    };
    if n == 0 {
        return unbounded;
    }
    let p = p.get();
    if p >= 1.0 {
        // Every value is at or below the 100th percentile: B = n surely.
        return RankInterval {
            low: Some(n),
            high: None,
        };
    }
    let Ok(binomial) = Binomial::new(p, n as u64) else {
        return unbounded;
    };
    // F(k) = P(B ≤ k) for k = -1 … n (F(-1) = 0, F(n) = 1), non-decreasing in k.
    let cdf = |k: usize| -> f64 {
        match k.checked_sub(1) {
            None => 0.0,
            Some(k) => binomial.cdf(k as u64),
        }
    };
    // l = the largest i in 0..=n with F(i − 1) ≤ 0.025 (i = 0 always qualifies).
    let low = last_true(0, n, |i| cdf(i) <= TAIL);
    // u = the smallest i in 1..=n+1 with F(i − 1) ≥ 0.975 (i = n + 1 always qualifies).
    let high = first_true(1, n + 1, |i| cdf(i) >= 1.0 - TAIL);
    RankInterval {
        low: (low >= 1).then_some(low),
        high: (high <= n).then_some(high),
    }
}

/// The largest i in `from..=to` for which `holds(i)`, given that `holds` is true at `from`
/// and, once false, stays false (binary search).
fn last_true(from: usize, to: usize, holds: impl Fn(usize) -> bool) -> usize {
    let (mut good, mut bad) = (from, to + 1);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if holds(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    good
}

/// The smallest i in `from..=to` for which `holds(i)`, given that `holds` is true at `to` and,
/// once true, stays true.
fn first_true(from: usize, to: usize, holds: impl Fn(usize) -> bool) -> usize {
    let (mut bad, mut good) = (from.wrapping_sub(1), to);
    // `bad` starts one below `from` (never evaluated).
    while good.wrapping_sub(bad) > 1 {
        let mid = bad.wrapping_add(good.wrapping_sub(bad) / 2);
        if holds(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    good
}

/// The fewest values for which the 95% interval of the percentile `p` is bounded on both
/// sides: the high side needs P(B = n) = pⁿ ≤ 0.025 and the low side P(B = 0) = (1 − p)ⁿ ≤
/// 0.025, so n ≥ ln 0.025 / ln max(p, 1 − p) (368 for p99 and p1, 72 for p95 and p5, 6 for
/// p50).
pub fn bounded_from(p: Probability) -> usize {
    let p = p.get();
    let worst = p.max(1.0 - p);
    if worst >= 1.0 {
        return usize::MAX;
    }
    let n = (TAIL.ln() / worst.ln()).ceil() as usize;
    // Guard the floating-point edge: step to the first n the ranks say is bounded.
    (n.saturating_sub(1)..)
        .find(|&n| {
            let r = rank_interval(n, Probability::of(p));
            r.low.is_some() && r.high.is_some()
        })
        .unwrap_or(n)
}

/// A percentile with its 95% interval, in the values' unit; `None` for an unbounded side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PercentileInterval {
    pub estimate: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (n, p, l, u) with 0 for an unbounded low side and n + 1 for an unbounded high side,
    /// computed independently with exact rational arithmetic (Python `fractions`: every
    /// Binomial(n, p) CDF term summed exactly, the ranks read off by the definition).
    const TABLE: &[(usize, f64, usize, usize)] = &[
        (1, 0.01, 0, 1),
        (1, 0.5, 0, 2),
        (1, 0.99, 1, 2),
        (2, 0.5, 0, 3),
        (2, 0.9, 1, 3),
        (5, 0.5, 0, 6),
        (5, 0.95, 4, 6),
        (10, 0.05, 0, 3),
        (10, 0.5, 2, 9),
        (10, 0.99, 9, 11),
        (16, 0.01, 0, 2),
        (16, 0.05, 0, 4),
        (16, 0.25, 1, 9),
        (16, 0.5, 4, 13),
        (16, 0.75, 8, 16),
        (16, 0.9, 12, 17),
        (16, 0.95, 13, 17),
        (16, 0.99, 15, 17),
        (20, 0.01, 0, 2),
        (20, 0.05, 0, 4),
        (20, 0.5, 6, 15),
        (20, 0.95, 17, 21),
        (20, 0.99, 19, 21),
        (50, 0.01, 0, 3),
        (50, 0.05, 0, 7),
        (50, 0.25, 7, 20),
        (50, 0.5, 18, 33),
        (50, 0.75, 31, 44),
        (50, 0.9, 41, 50),
        (50, 0.95, 44, 51),
        (50, 0.99, 48, 51),
        (100, 0.01, 0, 4),
        (100, 0.05, 1, 11),
        (100, 0.25, 17, 35),
        (100, 0.5, 40, 61),
        (100, 0.75, 66, 84),
        (100, 0.9, 84, 96),
        (100, 0.95, 90, 100),
        (100, 0.99, 97, 101),
        (1000, 0.01, 4, 18),
        (1000, 0.05, 37, 65),
        (1000, 0.25, 223, 278),
        (1000, 0.5, 469, 532),
        (1000, 0.75, 723, 778),
        (1000, 0.9, 881, 919),
        (1000, 0.95, 936, 964),
        (1000, 0.99, 983, 997),
    ];

    #[test]
    fn ranks_match_an_exact_table() {
        for &(n, p, l, u) in TABLE {
            let got = rank_interval(n, Probability::new(p).unwrap());
            let want = RankInterval {
                low: (l >= 1).then_some(l),
                high: (u <= n).then_some(u),
            };
            assert_eq!(got, want, "n = {n}, p = {p}");
        }
    }

    #[test]
    fn the_interval_holds_the_estimate_and_widens_as_n_falls() {
        for n in [3usize, 16, 100, 1000, 40_000] {
            for q in Percentile::ALL {
                let r = rank_interval(n, q.probability());
                let rank = super::super::quantile::nearest_rank_index(q.p(), n) + 1;
                assert!(
                    r.low.is_none_or(|l| l <= rank),
                    "n {n} {q}: {r:?} vs {rank}"
                );
                assert!(
                    r.high.is_none_or(|u| u >= rank),
                    "n {n} {q}: {r:?} vs {rank}"
                );
            }
        }
        // n = 16 is too few for a bounded p99 or p1.
        let p99 = rank_interval(16, Percentile::P99.probability());
        assert_eq!((p99.low, p99.high), (Some(15), None));
        assert_eq!(rank_interval(16, Percentile::P1.probability()).low, None);
        assert_eq!(
            rank_interval(0, Percentile::P50.probability()),
            RankInterval {
                low: None,
                high: None
            }
        );
        assert_eq!(
            rank_interval(7, Probability::new(1.0).unwrap()),
            RankInterval {
                low: Some(7),
                high: None
            }
        );
    }

    #[test]
    fn bounded_from_is_the_first_n_with_both_ends() {
        for q in Percentile::ALL {
            let n = bounded_from(q.probability());
            let at = rank_interval(n, q.probability());
            let before = rank_interval(n - 1, q.probability());
            assert!(at.low.is_some() && at.high.is_some(), "{q} at {n}");
            assert!(
                before.low.is_none() || before.high.is_none(),
                "{q} at {}",
                n - 1
            );
        }
        assert_eq!(bounded_from(Percentile::P99.probability()), 368);
        assert_eq!(bounded_from(Percentile::P1.probability()), 368);
        assert_eq!(bounded_from(Percentile::P95.probability()), 72);
        assert_eq!(bounded_from(Percentile::P50.probability()), 6);
    }

    #[test]
    fn columns_round_trip() {
        for q in Percentile::ALL {
            assert_eq!(Percentile::from_column(q.column()), Some(q));
            assert!(q.interval_columns()[0].starts_with(q.column()));
        }
        assert_eq!(Percentile::from_column("p42"), None);
    }
}
