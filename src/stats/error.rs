//! Why numbers cannot be a statistic's input.

/// Why numbers cannot be a [`Sample`] or [`Moments`], or a probability was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    #[error("a sample needs at least one value")]
    Empty,
    #[error(
        "value {index} is not a finite number ({value}); NaN and infinities have no rank and no mean"
    )]
    NotFinite { index: usize, value: f64 },
    #[error("an interval needs at least two values, found {0}")]
    TooFew(u64),
    #[error("the standard deviation must be finite and non-negative, found {0}")]
    BadSpread(f64),
    #[error("percentile p = {p} is outside (0, 1]; nearest rank needs 0 < p <= 1")]
    Probability { p: f64 },
}
