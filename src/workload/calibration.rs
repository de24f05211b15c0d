//! Calibration: the filler size at which one request's prompt reaches its context target,
//! found with a token-count oracle (the server's tokenizer or a probe request). The search is
//! a secant step inside a shrinking bracket, so a 4K target typically takes three or four
//! counts; an unreachable target is an error, never a loop.

use super::prompt::{PromptBuilder, PromptContent};

/// How close calibration must get: max(1% of the target, 8 tokens).
pub fn tolerance(target_tokens: u64) -> u64 {
    target_tokens.div_ceil(100).max(8)
}

/// The result of calibrating one request's filler size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    pub filler_units: u32,
    /// Prompt tokens the oracle reported at `filler_units`.
    pub prompt_tokens: u64,
    pub target_tokens: u64,
    /// Oracle calls spent.
    pub oracle_calls: u32,
}

/// Why calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error(
        "request {request_index}: the prompt without filler is already {overhead_tokens} tokens, \
         above the target {target_tokens} (+{tolerance}); raise the context target"
    )]
    TargetBelowOverhead {
        request_index: u32,
        overhead_tokens: u64,
        target_tokens: u64,
        tolerance: u64,
    },
    #[error(
        "request {request_index}: no filler size reaches {target_tokens} ± {tolerance} tokens: \
         {below_units} words give {below_tokens} tokens and {above_units} words give \
         {above_tokens}; check the token-count oracle"
    )]
    Unreachable {
        request_index: u32,
        target_tokens: u64,
        tolerance: u64,
        below_units: u32,
        below_tokens: u64,
        above_units: u32,
        above_tokens: u64,
    },
    #[error(
        "request {request_index}: {max_units} words give only {tokens} tokens, below the target \
         {target_tokens}; the target exceeds the calibration limit"
    )]
    TooLarge {
        request_index: u32,
        target_tokens: u64,
        max_units: u32,
        tokens: u64,
    },
    #[error(
        "request {request_index}: no filler size within {tolerance} tokens of {target_tokens} \
         after {calls} token counts (closest: {closest_units} words, {closest_tokens} tokens); \
         the oracle's counts are not monotone in the prompt length"
    )]
    NotConverged {
        request_index: u32,
        target_tokens: u64,
        tolerance: u64,
        calls: u32,
        closest_units: u32,
        closest_tokens: u64,
    },
    #[error("request {request_index}: token count failed after {calls} calls: {source}")]
    Oracle {
        request_index: u32,
        calls: u32,
        /// The token counter's own error (the oracle's; this module does not know its type).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Most oracle calls one calibration may spend before giving up.
pub const MAX_ORACLE_CALLS: u32 = 40;
/// Largest filler calibration will try (about 5M tokens, beyond any context window).
pub const MAX_FILLER_UNITS: u32 = 4_000_000;

/// Find the filler size of `request_index` whose prompt is within [`tolerance`] of
/// `target_tokens` according to `oracle` (a token count of the prompt as it would be sent).
///
/// The count is treated as monotone in the filler size: a secant step inside a bracket that
/// shrinks every call (falling back to bisection when the secant stalls), so a 4K target
/// typically takes three or four calls. A target that no size can hit (the count jumps over
/// the window), one below the fixed overhead, or one beyond [`MAX_FILLER_UNITS`] is an error,
/// never a loop.
pub async fn calibrate<F, E>(
    builder: &PromptBuilder,
    request_index: u32,
    target_tokens: u64,
    oracle: F,
) -> Result<Calibration, CalibrationError>
where
    F: AsyncFnMut(&PromptContent) -> Result<u64, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    calibrate_from(builder, request_index, target_tokens, None, oracle).await
}

/// [`calibrate`], trying `hint` words first (e.g. the size found for the previous request:
/// every request's filler has about the same token density, so the hint usually lands inside
/// the tolerance and one count settles it). A miss costs that one count, then the search runs
/// as without a hint.
pub async fn calibrate_from<F, E>(
    builder: &PromptBuilder,
    request_index: u32,
    target_tokens: u64,
    hint: Option<u32>,
    oracle: F,
) -> Result<Calibration, CalibrationError>
where
    F: AsyncFnMut(&PromptContent) -> Result<u64, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    search_units(
        |units| builder.build(request_index, units).content,
        request_index,
        target_tokens,
        hint,
        oracle,
    )
    .await
}

/// The size in filler words at which `make(units)` counts `target_tokens` (within
/// [`tolerance`]): the search behind [`calibrate_from`], for any content whose count grows
/// with its filler (e.g. a prefix group's shared prefix alone). `request_index` names the
/// request in errors.
pub async fn search_units<M, F, E>(
    make: M,
    request_index: u32,
    target_tokens: u64,
    hint: Option<u32>,
    mut oracle: F,
) -> Result<Calibration, CalibrationError>
where
    M: Fn(u32) -> PromptContent,
    F: AsyncFnMut(&PromptContent) -> Result<u64, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tol = tolerance(target_tokens);
    let within = |tokens: u64| tokens.abs_diff(target_tokens) <= tol;
    let mut calls = 0u32;
    let mut closest = (0u32, 0u64);
    macro_rules! count {
        ($units:expr) => {{
            let units: u32 = $units;
            let content = make(units);
            calls += 1;
            let tokens = oracle(&content)
                .await
                .map_err(|source| CalibrationError::Oracle {
                    request_index,
                    calls,
                    source: source.into(),
                })?;
            if calls == 1 || tokens.abs_diff(target_tokens) < closest.1.abs_diff(target_tokens) {
                closest = (units, tokens);
            }
            tokens
        }};
    }
    let done = |units: u32, tokens: u64, calls: u32| Calibration {
        filler_units: units,
        prompt_tokens: tokens,
        target_tokens,
        oracle_calls: calls,
    };

    if let Some(units) = hint.filter(|u| *u > 0 && *u <= MAX_FILLER_UNITS) {
        let tokens = count!(units);
        if within(tokens) {
            return Ok(done(units, tokens, calls));
        }
    }
    let overhead = count!(0);
    if within(overhead) {
        return Ok(done(0, overhead, calls));
    }
    if overhead > target_tokens {
        return Err(CalibrationError::TargetBelowOverhead {
            request_index,
            overhead_tokens: overhead,
            target_tokens,
            tolerance: tol,
        });
    }
    // Bracket: `lo` is below the window, `hi` (once found) above it.
    let mut lo = (0u32, overhead);
    let mut hi: Option<(u32, u64)> = None;
    // First guess: English filler runs about 1.3 tokens per word.
    let mut guess = ((target_tokens - overhead) as f64 / 1.3).round();
    let mut last_side_low: Option<bool> = None;
    let mut same_side_moves = 0u32;
    loop {
        let upper = hi.map_or(MAX_FILLER_UNITS, |h| h.0 - 1);
        let units = (guess.max(0.0) as u64).clamp(u64::from(lo.0) + 1, u64::from(upper)) as u32;
        let tokens = count!(units);
        if within(tokens) {
            return Ok(done(units, tokens, calls));
        }
        let moved_low = tokens < target_tokens;
        if moved_low {
            lo = (units, tokens);
        } else {
            hi = Some((units, tokens));
        }
        same_side_moves = if last_side_low == Some(moved_low) {
            same_side_moves + 1
        } else {
            0
        };
        last_side_low = Some(moved_low);
        match hi {
            Some(h) if h.0 <= lo.0 + 1 => {
                return Err(CalibrationError::Unreachable {
                    request_index,
                    target_tokens,
                    tolerance: tol,
                    below_units: lo.0,
                    below_tokens: lo.1,
                    above_units: h.0,
                    above_tokens: h.1,
                });
            }
            None if lo.0 >= MAX_FILLER_UNITS => {
                return Err(CalibrationError::TooLarge {
                    request_index,
                    target_tokens,
                    max_units: MAX_FILLER_UNITS,
                    tokens: lo.1,
                });
            }
            _ => {}
        }
        if calls >= MAX_ORACLE_CALLS {
            return Err(CalibrationError::NotConverged {
                request_index,
                target_tokens,
                tolerance: tol,
                calls,
                closest_units: closest.0,
                closest_tokens: closest.1,
            });
        }
        guess = match hi {
            // Secant inside the bracket; bisect when one end has moved twice in a row (the
            // secant is creeping) or the counts are not increasing.
            Some(h) if h.1 > lo.1 && same_side_moves < 2 => {
                let slope = (h.1 - lo.1) as f64 / f64::from(h.0 - lo.0);
                f64::from(lo.0) + (target_tokens - lo.1) as f64 / slope
            }
            Some(h) => (f64::from(lo.0) + f64::from(h.0)) / 2.0,
            // No upper end yet: extrapolate the slope from the overhead point, overshooting
            // slightly so the next count likely brackets the target.
            None => {
                let slope = if lo.1 > overhead && lo.0 > 0 {
                    (lo.1 - overhead) as f64 / f64::from(lo.0)
                } else {
                    0.0
                };
                if slope > 0.0 {
                    f64::from(lo.0) + (target_tokens - lo.1) as f64 / slope * 1.02 + 1.0
                } else {
                    f64::from(lo.0) * 2.0 + 1.0
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::oracle::OracleError;
    use crate::workload::prompt::tests::spec;
    use crate::workload::prompt::{PromptCacheMode, PromptForm};

    /// A deterministic stand-in tokenizer: each whitespace-separated word costs one token per
    /// started 4 characters, plus 4 tokens of template per chat message.
    fn toy_tokens(content: &PromptContent) -> u64 {
        let words = |s: &str| -> u64 {
            s.split_whitespace()
                .map(|w| w.len().div_ceil(4) as u64)
                .sum()
        };
        match content {
            PromptContent::Messages(m) => m.iter().map(|m| 4 + words(&m.content)).sum(),
            PromptContent::Text(t) => words(t),
        }
    }

    #[tokio::test]
    async fn calibration_hits_targets_with_few_calls() {
        for form in [PromptForm::Messages, PromptForm::Text] {
            let b = PromptBuilder::new(spec(PromptCacheMode::Unique, form));
            for target in [200u64, 512, 4096, 32768, 131072] {
                for index in [0u32, 41] {
                    let c = calibrate::<_, OracleError>(
                        &b,
                        index,
                        target,
                        async |p: &PromptContent| Ok(toy_tokens(p)),
                    )
                    .await
                    .unwrap();
                    let actual = toy_tokens(&b.build(index, c.filler_units).content);
                    assert_eq!(actual, c.prompt_tokens);
                    assert!(
                        actual.abs_diff(target) <= tolerance(target),
                        "{form:?} target {target}: {actual}"
                    );
                    assert!(c.oracle_calls <= 8, "{target}: {} calls", c.oracle_calls);
                }
            }
        }
    }

    #[tokio::test]
    async fn a_good_hint_settles_calibration_in_one_count_and_a_bad_one_still_converges() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let first =
            calibrate::<_, OracleError>(&b, 0, 4096, async |p: &PromptContent| Ok(toy_tokens(p)))
                .await
                .unwrap();
        let next = calibrate_from::<_, OracleError>(
            &b,
            1,
            4096,
            Some(first.filler_units),
            async |p: &PromptContent| Ok(toy_tokens(p)),
        )
        .await
        .unwrap();
        assert_eq!(next.oracle_calls, 1);
        assert!(next.prompt_tokens.abs_diff(4096) <= tolerance(4096));
        let far =
            calibrate_from::<_, OracleError>(&b, 2, 4096, Some(5), async |p: &PromptContent| {
                Ok(toy_tokens(p))
            })
            .await
            .unwrap();
        assert!(far.prompt_tokens.abs_diff(4096) <= tolerance(4096));
    }

    #[tokio::test]
    async fn calibration_refuses_unreachable_targets() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Text));
        // The count jumps by 1000 tokens past 4000: the 4096 ± 41 window falls in the gap.
        let jumpy = async |p: &PromptContent| {
            let t = toy_tokens(p);
            Ok(if t < 4000 { t } else { t + 1000 })
        };
        let err = calibrate::<_, OracleError>(&b, 0, 4096, jumpy)
            .await
            .unwrap_err();
        assert!(matches!(err, CalibrationError::Unreachable { .. }), "{err}");

        let err =
            calibrate::<_, OracleError>(&b, 0, 10, async |p: &PromptContent| Ok(toy_tokens(p)))
                .await
                .unwrap_err();
        assert!(
            matches!(err, CalibrationError::TargetBelowOverhead { .. }),
            "{err}"
        );

        // The count never grows: no size reaches the target.
        let flat = async |_: &PromptContent| Ok(100u64);
        let err = calibrate::<_, OracleError>(&b, 0, 4096, flat)
            .await
            .unwrap_err();
        assert!(matches!(err, CalibrationError::TooLarge { .. }), "{err}");

        // The count jumps around: give up after MAX_ORACLE_CALLS, never loop.
        let mut n = 0u64;
        let noisy = async |_: &PromptContent| {
            n += 1;
            Ok(if n.is_multiple_of(2) { 9000 } else { 50 })
        };
        let err = calibrate::<_, OracleError>(&b, 0, 4096, noisy)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                CalibrationError::NotConverged { .. } | CalibrationError::Unreachable { .. }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn calibration_reports_oracle_failure() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Text));
        let err = calibrate::<_, OracleError>(&b, 3, 4096, async |_: &PromptContent| {
            Err(OracleError::Status {
                url: "http://127.0.0.1:1/tokenize".into(),
                status: 404,
                body: "not found".into(),
            })
        })
        .await
        .unwrap_err();
        assert!(matches!(err, CalibrationError::Oracle { calls: 1, .. }));
        assert!(err.to_string().contains("request 3"));
    }
}
