//! Where and how a run was recorded: the calibration of its prompts, the topology and
//! endpoints it drove, the clock anchor and the tool's version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::{Origin, format_utc_ns, parse_utc};

/// How a run's prompt lengths were calibrated (`run.json` → `calibration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// `tokenize` (the server's tokenizer endpoints), `probe` (one-token requests reading
    /// `usage`, recorded as `calibration` rows) or `none` (the cell has no prompt-token
    /// target, e.g. `functional`).
    pub method: CalibrationMethod,
    /// The tokenizer dialect used (`vllm`, `llama.cpp`) when `method` is `tokenize`.
    pub dialect: Option<String>,
    /// The replica whose server counted the tokens.
    pub replica: u32,
    /// The check before use: the tokenizer's count of one prompt, and the server's
    /// `usage.prompt_tokens` for the same prompt (a probe); they must be equal for the
    /// tokenizer to be used.
    pub tokenize_tokens: Option<u64>,
    pub usage_prompt_tokens: Option<u64>,
    /// Why the method was chosen when it was not the first choice (no usable tokenizer
    /// endpoint, a count that disagreed with usage).
    pub note: Option<String>,
    /// A prefix-group cell's shared prefixes as calibrated: each group's size in filler words
    /// and the tokens it counted (the declared `shared_tokens` within the calibration
    /// tolerance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_prefix: Option<GroupPrefixSize>,
    /// A trace replay's block density: `units_per_block` filler words counted
    /// `block_tokens` tokens (a block of the trace's size), and the prompt without blocks
    /// (its instruction and template) `overhead_tokens`; each row's prompt is sized from
    /// them, its realised tokens read back from usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_density: Option<TraceDensity>,
}

/// How many filler words make a trace block, as calibration counted them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceDensity {
    pub units_per_block: u32,
    pub block_tokens: u32,
    /// What a block of `units_per_block` words counted, on average over the blocks
    /// counted together.
    pub block_counted: u64,
    pub overhead_tokens: u64,
}

/// The calibrated size of every prefix group's shared prefix, group by group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupPrefixSize {
    /// Filler words of group `g`'s prefix.
    pub units: Vec<u32>,
    /// The tokens they counted.
    pub tokens: Vec<u64>,
}

/// Which token-count oracle sized the prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationMethod {
    Tokenize,
    Probe,
    None,
}

impl Calibration {
    /// No calibration: the cell has no prompt-token target.
    pub fn none() -> Self {
        Self {
            method: CalibrationMethod::None,
            dialect: None,
            replica: 0,
            tokenize_tokens: None,
            usage_prompt_tokens: None,
            note: None,
            group_prefix: None,
            trace_density: None,
        }
    }
}

/// The arm's serving topology: one endpoint per replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Number of replicas the requests were spread over (equals `endpoints.len()`).
    pub replica_count: u32,
    /// One entry per replica, in replica index order.
    pub endpoints: Vec<Endpoint>,
}

/// One replica's endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Replica index (0-based), the `replica` column of the tables.
    pub replica: u32,
    /// Base URL requests were sent to, without credentials.
    pub url: String,
    /// Model name sent in requests.
    pub model: String,
    /// What the server said about itself (e.g. `server_version`, `/v1/models` owner).
    pub server_info: BTreeMap<String, serde_json::Value>,
    /// Prometheus `/metrics` URL scraped for this replica, if any.
    pub metrics_url: Option<String>,
}

/// The run's clock anchor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    /// Absolute `CLOCK_MONOTONIC` nanoseconds at t = 0 (joins with simulator truth files).
    pub monotonic_origin_ns: i64,
    /// UTC wall-clock time at t = 0, RFC 3339 with nanoseconds.
    pub utc_origin: String,
}

impl Clock {
    /// The anchor of `origin`.
    pub fn from_origin(origin: &Origin) -> Self {
        Self {
            monotonic_origin_ns: origin.monotonic_ns,
            utc_origin: format_utc_ns(origin.utc_unix_ns),
        }
    }

    /// UTC nanoseconds since the Unix epoch of a run-relative time `t_ns`, if the anchor parses.
    pub fn utc_unix_ns_at(&self, t_ns: i64) -> Option<i128> {
        parse_utc(&self.utc_origin).map(|origin| origin + i128::from(t_ns))
    }
}

/// The recording tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// e.g. `anvil-capture`.
    pub name: String,
    /// Its version, e.g. `0.1.0`.
    pub version: String,
}

impl Tool {
    /// This crate as the tool, under binary name `name`.
    pub fn this(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}
