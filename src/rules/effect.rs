//! Magnitude beside significance: how a difference between an arm and its reference reads
//! once its size is weighed. A difference whose 95% interval excludes zero but whose size is
//! under the smallest effect that matters (by default 2% of the reference's figure) is
//! **negligible**, neither better nor worse; only a resolved difference at least that large
//! is better or worse.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The smallest difference that matters, as a share of the reference's figure, where the
/// campaign states none.
pub const DEFAULT_MIN_EFFECT_SHARE: f64 = 0.02;

/// The figures a campaign's `min_effect` may name one by one: the per-request metrics
/// (`ttft_ms`, `tpot_ms`, …), `output_tps` (aggregate throughput, also per GPU) and
/// `goodput_tps`; `default` for every other.
pub const MIN_EFFECT_KEYS: [&str; 9] = [
    "default",
    "ttft_ms",
    "effective_prefill_tps",
    "decode_tps",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "output_tps",
    "goodput_tps",
];

/// The campaign's `min_effect`: one share for every figure (`0.02`), or one per figure
/// (`{"default": 0.02, "ttft_ms": 0.05}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MinEffect {
    Share(f64),
    PerMetric(BTreeMap<String, f64>),
}

impl MinEffect {
    /// The share for every figure not named (`default`).
    pub fn default_share(&self) -> Option<f64> {
        match self {
            MinEffect::Share(s) => Some(*s),
            MinEffect::PerMetric(m) => m.get("default").copied(),
        }
    }

    /// The shares named figure by figure (not `default`).
    pub fn by_metric(&self) -> BTreeMap<String, f64> {
        match self {
            MinEffect::Share(_) => BTreeMap::new(),
            MinEffect::PerMetric(m) => m
                .iter()
                .filter(|(k, _)| *k != "default")
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }

    /// What is wrong with it, each as (key, what to write instead).
    pub fn problems(&self) -> Vec<(String, String)> {
        let share_ok = |m: f64| m > 0.0 && m < 1.0;
        match self {
            MinEffect::Share(m) if !share_ok(*m) => vec![(
                String::new(),
                format!("{m} is not a share of the reference's figure: give one in (0, 1), e.g. 0.02"),
            )],
            MinEffect::Share(_) => Vec::new(),
            MinEffect::PerMetric(map) => map
                .iter()
                .filter_map(|(k, m)| {
                    if !MIN_EFFECT_KEYS.contains(&k.as_str()) {
                        Some((
                            k.clone(),
                            format!("`{k}` names no figure: write one of {}", MIN_EFFECT_KEYS.join(", ")),
                        ))
                    } else if !share_ok(*m) {
                        Some((
                            k.clone(),
                            format!("{m} is not a share of the reference's figure: give one in (0, 1), e.g. 0.02"),
                        ))
                    } else {
                        None
                    }
                })
                .collect(),
        }
    }
}

/// How a difference reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Resolved, at least the smallest effect that matters, in the better direction.
    Better,
    /// Resolved, at least the smallest effect that matters, in the worse direction.
    Worse,
    /// Resolved but smaller than the smallest effect that matters.
    Negligible,
    /// The interval includes zero.
    NotResolved,
    /// No interval to judge by.
    NoInterval,
}

impl Effect {
    /// `difference` (arm − reference) with its 95% `interval`, against the reference's own
    /// figure `reference` (the base of the smallest effect; without it no difference is
    /// called negligible), on a metric where `higher_is_better` or not.
    pub fn of(
        difference: f64,
        interval: Option<(f64, f64)>,
        reference: Option<f64>,
        higher_is_better: bool,
    ) -> Effect {
        Self::with_share(
            difference,
            interval,
            reference,
            higher_is_better,
            DEFAULT_MIN_EFFECT_SHARE,
        )
    }

    /// [`Effect::of`] with the smallest effect that matters at `share` of the reference's
    /// figure (the campaign's `min_effect`).
    pub fn with_share(
        difference: f64,
        interval: Option<(f64, f64)>,
        reference: Option<f64>,
        higher_is_better: bool,
        share: f64,
    ) -> Effect {
        let Some((low, high)) = interval else {
            return Effect::NoInterval;
        };
        if low <= 0.0 && high >= 0.0 {
            return Effect::NotResolved;
        }
        let smallest = reference
            .filter(|r| r.is_finite() && *r != 0.0)
            .map(|r| share * r.abs());
        if smallest.is_some_and(|s| difference.abs() < s) {
            return Effect::Negligible;
        }
        if (difference > 0.0) == higher_is_better {
            Effect::Better
        } else {
            Effect::Worse
        }
    }

    /// The reading in words.
    pub fn label(self) -> &'static str {
        match self {
            Effect::Better => "better",
            Effect::Worse => "worse",
            Effect::Negligible => "negligible",
            Effect::NotResolved => "not resolved",
            Effect::NoInterval => "no interval",
        }
    }

    /// Whether it counts as a difference at all (better or worse).
    pub fn matters(self) -> bool {
        matches!(self, Effect::Better | Effect::Worse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolved_difference_under_two_percent_of_the_reference_is_negligible() {
        // TTFT p50 +6.87 ms on a 570 ms control: resolved, 1.2%: negligible.
        assert_eq!(
            Effect::of(6.87, Some((3.0, 10.7)), Some(570.0), false),
            Effect::Negligible
        );
        // +1,466 ms on 1,653 ms: worse.
        assert_eq!(
            Effect::of(1466.0, Some((1200.0, 1700.0)), Some(1653.0), false),
            Effect::Worse
        );
        assert_eq!(
            Effect::of(88.2, Some((82.0, 94.4)), Some(559.0), true),
            Effect::Better
        );
        assert_eq!(
            Effect::of(5.0, Some((-1.0, 9.0)), Some(100.0), true),
            Effect::NotResolved
        );
        assert_eq!(Effect::of(5.0, None, Some(100.0), true), Effect::NoInterval);
        // Without the reference's figure nothing is called negligible.
        assert_eq!(
            Effect::of(0.001, Some((0.0005, 0.0015)), None, true),
            Effect::Better
        );
        assert!(Effect::Worse.matters() && !Effect::Negligible.matters());
    }
}
