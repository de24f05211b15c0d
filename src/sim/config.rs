//! What `anvil-sim` runs with: the profile table (named timing presets) and the checked
//! [`Config`] the server takes; the command line that builds it is `crate::app::sim`.

use std::path::PathBuf;

use super::faults::FaultRates;

/// A named timing preset. Explicit flags override any of its values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub what: &'static str,
    pub timing: Timing,
}

/// The single-GPU target-only baseline the other profiles vary.
const BASE: Timing = Timing {
    prefill_tps: 8000.0,
    decode_tps: 60.0,
    max_batch: 64,
    batch_cost: 0.02,
    spec_depth: 0,
    spec_accept: 0.0,
    chunked_prefill: 2048,
};

/// A second runtime (different kernels, MTP heads instead of a draft model).
const MTP: Timing = Timing {
    prefill_tps: 7000.0,
    decode_tps: 55.0,
    ..BASE
};

const fn profile(name: &'static str, what: &'static str, timing: Timing) -> Profile {
    Profile { name, what, timing }
}

const fn spec(name: &'static str, what: &'static str, k: u32, p: f64) -> Profile {
    let timing = Timing {
        spec_depth: k,
        spec_accept: p,
        ..BASE
    };
    profile(name, what, timing)
}

const fn chunked(name: &'static str, what: &'static str, chunk: u32) -> Profile {
    let timing = Timing {
        chunked_prefill: chunk,
        ..BASE
    };
    profile(name, what, timing)
}

/// Every profile, in the order `--help` lists them.
pub const PROFILES: &[Profile] = &[
    profile("default", "target-only baseline, one GPU", BASE),
    profile(
        "fast",
        "for tests: fast timing",
        Timing {
            prefill_tps: 400_000.0,
            decode_tps: 2000.0,
            max_batch: 256,
            batch_cost: 0.001,
            chunked_prefill: 0,
            ..BASE
        },
    ),
    profile(
        "slow",
        "a small, slow server",
        Timing {
            prefill_tps: 1000.0,
            decode_tps: 15.0,
            max_batch: 8,
            chunked_prefill: 0,
            ..BASE
        },
    ),
    profile("no-spec", "target-only arm", BASE),
    spec("spec-k4", "speculative, 4 drafts", 4, 0.75),
    spec("spec-k8", "speculative, 8 drafts", 8, 0.7),
    spec("spec-k12", "speculative, 12 drafts", 12, 0.65),
    spec("spec-k16", "speculative, 16 drafts", 16, 0.6),
    chunked("chunked-1024", "chunked prefill 1024", 1024),
    chunked("chunked-2048", "chunked prefill 2048", 2048),
    chunked("chunked-8192", "chunked prefill 8192", 8192),
    profile("tp1", "TP1 (the default numbers)", BASE),
    profile(
        "tp2",
        "TP2: faster per replica",
        Timing {
            prefill_tps: 14000.0,
            decode_tps: 95.0,
            max_batch: 128,
            ..BASE
        },
    ),
    profile(
        "mtp1",
        "second runtime, 1 MTP draft",
        Timing {
            spec_depth: 1,
            spec_accept: 0.9,
            ..MTP
        },
    ),
    profile(
        "mtp2",
        "second runtime, 2 MTP drafts",
        Timing {
            spec_depth: 2,
            spec_accept: 0.85,
            ..MTP
        },
    ),
];

/// Look up a profile by name.
pub fn find_profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Timing parameters of one replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Prefill throughput (uncached prompt tokens per second).
    pub prefill_tps: f64,
    /// Decode rate of one sequence running alone (steps per second).
    pub decode_tps: f64,
    /// Maximum running sequences; more wait in a FIFO queue.
    pub max_batch: usize,
    /// Extra step cost per running sequence, as a fraction of the single-sequence step.
    pub batch_cost: f64,
    /// Speculative drafts proposed per step (0 = off).
    pub spec_depth: u32,
    /// Probability that each draft is accepted (until the first rejection).
    pub spec_accept: f64,
    /// Chunked-prefill chunk size in tokens (0 = whole prompt in one step).
    pub chunked_prefill: u32,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub replicas: usize,
    pub profile: &'static str,
    pub seed: u64,
    pub timing: Timing,
    pub faults: FaultRates,
    pub stall_ms: u64,
    /// Close each connection after its streamed response (`--close-after-stream`).
    pub close_after_stream: bool,
    pub truth: Option<PathBuf>,
    /// Served model name.
    pub model: String,
    /// Whether unknown model names are refused.
    pub strict_model: bool,
    pub max_model_len: u32,
    pub mean_words: u32,
    pub realtime: bool,
    pub spin_us: u32,
    pub http_threads: usize,
}

/// A flag that does not hold.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown profile `{0}`; valid profiles: {1}")]
    UnknownProfile(String, String),
    #[error("--fault `{0}`: expected KIND=RATE, e.g. disconnect=0.1")]
    FaultSyntax(String),
    #[error("--fault `{0}`: unknown fault kind; valid kinds: {1}")]
    UnknownFault(String, String),
    #[error("{flag} = {value}: must be {rule}")]
    OutOfRange {
        flag: &'static str,
        value: String,
        rule: &'static str,
    },
}
