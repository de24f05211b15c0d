//! Value types shared by the workload manifest and the run plan: positive counts and the
//! closed vocabularies (thinking, prompt cache mode, metrics, statistics, percentile method)
//! that are refused with a message listing what is known.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A whole number greater than zero: a token count, a concurrency level, a request count, a
/// stage order. Zero, negatives and fractions are refused when the document is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Positive(NonZeroU64);

impl Positive {
    /// `None` for zero.
    pub fn new(value: u64) -> Option<Self> {
        NonZeroU64::new(value).map(Positive)
    }

    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for Positive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Positive {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.get())
    }
}

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PositiveVisitor;

        impl Visitor<'_> for PositiveVisitor {
            type Value = Positive;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer")
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Positive, E> {
                Positive::new(value)
                    .ok_or_else(|| E::custom("expected a positive integer, found 0"))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Positive, E> {
                match u64::try_from(value) {
                    Ok(value) => self.visit_u64(value),
                    Err(_) => Err(E::custom(format!(
                        "expected a positive integer, found {value}"
                    ))),
                }
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Positive, E> {
                Err(E::custom(format!(
                    "expected a positive integer, found {value:?}"
                )))
            }
        }

        deserializer.deserialize_u64(PositiveVisitor)
    }
}

/// The message for a word outside a closed vocabulary.
fn unknown_word(what: &str, found: &str, known: &[&str]) -> String {
    let known: Vec<String> = known.iter().map(|word| format!("\"{word}\"")).collect();
    format!("unknown {what} \"{found}\"; known: {}", known.join(", "))
}

/// A closed vocabulary written as strings in the documents: `as_str`, `Display`, `FromStr`
/// and serde all use the document's own words.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $( $(#[$variant_meta:meta])* $variant:ident => $word:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// Every known value, in the order the schema lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word the documents use.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                match text {
                    $( $word => Ok($name::$variant), )+
                    other => Err(unknown_word($what, other, &[$($word),+])),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(de::Error::custom)
            }
        }
    };
}

vocabulary! {
    /// Whether the model is asked to think (emit reasoning) before answering.
    pub enum Thinking ("thinking mode") {
        Disabled => "disabled",
        Enabled => "enabled",
    }
}

vocabulary! {
    /// How prompts relate to the server's prefix cache: `unique` prompts defeat it (each
    /// request gets its own random prefix), `shared` prompts reuse one prefix.
    pub enum PromptCacheMode ("prompt cache mode") {
        Unique => "unique",
        Shared => "shared",
    }
}

vocabulary! {
    /// How percentiles are computed. Only nearest rank: the value at rank ⌈p·n⌉ of the sorted
    /// values.
    pub enum PercentileMethod ("percentile method") {
        NearestRank => "nearest rank",
    }
}

vocabulary! {
    /// A metric a campaign reports; each has a definition in the manifest's
    /// `timing_definitions` and a query in `queries/`.
    pub enum Metric ("metric") {
        TimeToFirstOutputMs => "time_to_first_output_ms",
        EffectivePrefillTokensPerSecond => "effective_prefill_tokens_per_second",
        PerRequestDecodeTokensPerSecond => "per_request_decode_tokens_per_second",
        AggregateOutputTokensPerSecond => "aggregate_output_tokens_per_second",
        TimePerOutputTokenMs => "time_per_output_token_ms",
        MeanInterTokenLatencyMs => "mean_inter_token_latency_ms",
        EndToEndMs => "end_to_end_ms",
        PromptAndCompletionUsageTokens => "prompt_and_completion_usage_tokens",
        RequestCanaryCorrectness => "request_canary_correctness",
        DraftAcceptanceCounters => "draft_acceptance_counters",
    }
}

/// One statistic of a metric's distribution, as named in `statistics.distribution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Statistic {
    Mean,
    StandardDeviation,
    /// Student t interval with n−1 degrees of freedom.
    ConfidenceInterval95ForMean,
    Min,
    /// `pNN`: the nearest-rank percentile, 1 to 100.
    Percentile(u8),
    Max,
}

impl Statistic {
    pub const MEAN: &'static str = "mean";
    pub const STANDARD_DEVIATION: &'static str = "standard deviation";
    pub const CONFIDENCE_INTERVAL_95_FOR_MEAN: &'static str =
        "95 percent confidence interval for mean";
    pub const MIN: &'static str = "min";
    pub const MAX: &'static str = "max";

    /// The words the documents use (`p95` for a percentile).
    pub fn name(self) -> String {
        match self {
            Statistic::Mean => Self::MEAN.to_owned(),
            Statistic::StandardDeviation => Self::STANDARD_DEVIATION.to_owned(),
            Statistic::ConfidenceInterval95ForMean => {
                Self::CONFIDENCE_INTERVAL_95_FOR_MEAN.to_owned()
            }
            Statistic::Min => Self::MIN.to_owned(),
            Statistic::Percentile(p) => format!("p{p}"),
            Statistic::Max => Self::MAX.to_owned(),
        }
    }
}

impl fmt::Display for Statistic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Statistic {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            Self::MEAN => return Ok(Statistic::Mean),
            Self::STANDARD_DEVIATION => return Ok(Statistic::StandardDeviation),
            Self::CONFIDENCE_INTERVAL_95_FOR_MEAN => {
                return Ok(Statistic::ConfidenceInterval95ForMean);
            }
            Self::MIN => return Ok(Statistic::Min),
            Self::MAX => return Ok(Statistic::Max),
            _ => {}
        }
        // `p95`; written without leading zeros so the name reads back the same.
        if let Some(digits) = text.strip_prefix('p')
            && let Ok(p) = digits.parse::<u8>()
            && (1..=100).contains(&p)
            && digits == p.to_string()
        {
            return Ok(Statistic::Percentile(p));
        }
        Err(format!(
            "unknown statistic \"{text}\"; known: \"{}\", \"{}\", \"{}\", \"{}\", \"{}\" and \
             percentiles \"p1\" to \"p100\"",
            Self::MEAN,
            Self::STANDARD_DEVIATION,
            Self::CONFIDENCE_INTERVAL_95_FOR_MEAN,
            Self::MIN,
            Self::MAX
        ))
    }
}

impl Serialize for Statistic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Statistic {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_refuses_zero_negative_and_fractions() {
        let message = |json: &str| {
            serde_json::from_str::<Positive>(json)
                .unwrap_err()
                .to_string()
        };
        assert!(message("0").starts_with("expected a positive integer, found 0"));
        assert!(message("-4").starts_with("expected a positive integer, found -4"));
        assert!(message("8.0").starts_with("expected a positive integer, found 8.0"));
        assert_eq!(serde_json::from_str::<Positive>("8").unwrap().get(), 8);
    }

    #[test]
    fn statistic_names_read_back_the_same() {
        for name in [
            "mean",
            "p1",
            "p50",
            "p99",
            "p100",
            "95 percent confidence interval for mean",
        ] {
            assert_eq!(name.parse::<Statistic>().unwrap().name(), name);
        }
        for bad in ["p0", "p101", "p050", "median", "p", "p-5"] {
            assert!(bad.parse::<Statistic>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn vocabulary_lists_known_words_when_refusing() {
        let error = "maybe".parse::<Thinking>().unwrap_err();
        assert_eq!(
            error,
            "unknown thinking mode \"maybe\"; known: \"disabled\", \"enabled\""
        );
        assert_eq!(
            "shared".parse::<PromptCacheMode>(),
            Ok(PromptCacheMode::Shared)
        );
    }
}
