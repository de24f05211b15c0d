//! What `anvil-sim` runs with: the profile table (named timing presets) and the checked
//! [`Config`] the server takes; the command line that builds it is `crate::app::sim`.

use std::path::PathBuf;

use super::faults::FaultRates;

/// Each replica's KV pool unless `--kv-pool-tokens` says otherwise: 4,194,304 tokens, beyond
/// what any profile's `max_batch` of long prompts fills, so only a declared pool preempts.
pub const DEFAULT_KV_POOL_TOKENS: u64 = 1 << 22;

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

/// The default coefficient of variation of the per-run speed factor (`--run-cv`).
pub const DEFAULT_RUN_CV: f64 = 0.03;

/// How fast this run is beside the profile: real servers differ from launch to launch (clock
/// boost, placement, thermal state), so two runs of one configuration never give the same
/// throughput. With `--run-seed TEXT`, each replica draws a factor from a log-normal
/// distribution of mean 1 and coefficient of variation `cv`, seeded by the text and the
/// replica's index; its prefill and decode rates are multiplied by it, so aggregate
/// throughput varies across runs with that coefficient of variation. Without a seed every
/// factor is 1 (the profile's numbers exactly).
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpeed {
    pub seed: Option<String>,
    pub cv: f64,
    /// One factor per replica.
    pub factors: Vec<f64>,
}

impl RunSpeed {
    /// The factors of `replicas` replicas drawn from `seed` with coefficient of variation `cv`.
    pub fn draw(seed: Option<&str>, cv: f64, replicas: usize) -> RunSpeed {
        use rand::SeedableRng;
        use rand_distr::{Distribution, LogNormal};
        let factors = (0..replicas)
            .map(|i| match (seed, LogNormal::from_mean_cv(1.0, cv)) {
                (Some(text), Ok(dist)) if cv > 0.0 => {
                    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                    for b in text.bytes().chain((i as u64).to_le_bytes()) {
                        h ^= u64::from(b);
                        h = h.wrapping_mul(0x0000_0100_0000_01b3);
                    }
                    dist.sample(&mut rand::rngs::StdRng::seed_from_u64(h))
                }
                _ => 1.0,
            })
            .collect();
        RunSpeed {
            seed: seed.map(str::to_owned),
            cv,
            factors,
        }
    }

    /// Replica `i`'s timing: `base` with its prefill and decode rates times its factor.
    pub fn timing(&self, base: &Timing, i: usize) -> Timing {
        let f = self.factors.get(i).copied().unwrap_or(1.0);
        Timing {
            prefill_tps: base.prefill_tps * f,
            decode_tps: base.decode_tps * f,
            ..*base
        }
    }

    /// One line saying it: `speed factor 0.9731 (--run-seed "tp1-2-0", cv 0.03)`, per replica.
    pub fn describe(&self) -> String {
        let factors: Vec<String> = self.factors.iter().map(|f| format!("{f:.4}")).collect();
        match &self.seed {
            Some(seed) => format!(
                "run speed factor {} (--run-seed {seed:?}, cv {})",
                factors.join(" "),
                self.cv
            ),
            None => "run speed factor 1 (no --run-seed)".to_owned(),
        }
    }
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub replicas: usize,
    pub profile: &'static str,
    pub seed: u64,
    /// The profile's timing (with the flags' overrides and `--speed`), before the run speed.
    pub timing: Timing,
    /// This run's speed factor per replica (`--run-seed`).
    pub run_speed: RunSpeed,
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
    /// Each replica's prefix-cache capacity in tokens (0: caching off).
    pub prefix_cache_tokens: u64,
    /// Each replica's KV pool in tokens (0: unbounded); full, it preempts (see `engine`).
    pub kv_pool_tokens: u64,
    /// vLLM's development endpoints mounted (`--dev-mode`): `POST /reset_prefix_cache`.
    pub dev_mode: bool,
    /// The GPUs' power model and DCGM exporter (`--dcgm`); `None`: no GPUs simulated, the
    /// clocks never change.
    pub gpus: Option<super::power::GpuSetup>,
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
