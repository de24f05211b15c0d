//! Statistics, pure math with no I/O: one [`Sample`] (non-empty, every value finite), the
//! quantiles (nearest rank, Student t), the percentiles and their distribution-free
//! intervals, the seeded bootstrap of a difference of percentiles, the intervals the rules
//! report (the mean's, Welch's for a difference of means, the paired one), a proportion's
//! exact Clopper–Pearson interval, Holm's correction over many differences, and the one row
//! of statistics every table shows ([`Stats`], named by [`STATISTICS`]).
//!
//! Used by the SQL functions `nearest_rank`, `nearest_rank_ci_low`, `nearest_rank_ci_high`,
//! `ci95_low` and `ci95_high` (registered in `crate::query`) and by the rules. The
//! independent recomputation of `anvil verify` writes its math out again on purpose and
//! takes only the names from here.
//!
//! Invariant: a [`Sample`] holds at least one value and no NaN or infinity, so every
//! estimate below is defined and finite-valued; what still needs n ≥ 2 (standard deviation,
//! intervals) is an `Option`. A non-finite value is refused where the sample is built: an
//! infinite figure is a broken definition upstream, never a statistic to report.

pub mod bootstrap;
pub mod error;
pub mod interval;
pub mod multiplicity;
pub mod percentile;
pub mod proportion;
pub mod quantile;
pub mod row;
pub mod sample;

pub use bootstrap::{Bootstrap, BootstrapDesign, percentile_difference, percentile_differences};
pub use error::SampleError;
pub use interval::{paired_interval, welch_interval};
pub use multiplicity::{holm_cutoff, runs_to_resolve};
pub use percentile::{Percentile, PercentileInterval, RankInterval, bounded_from, rank_interval};
pub use proportion::{Proportion, clopper_pearson, min_requests_to_resolve};
pub use quantile::{LEVEL, Probability, nearest_rank_index, t_quantile};
pub use row::{Bounds, INTERVAL_COLUMNS, STATISTICS, Stats};
pub use sample::{Interval, Moments, Sample, mean_interval};
