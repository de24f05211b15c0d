//! `run.json` → `cache_hygiene` (capture-run/v4): what was done about the servers' prefix
//! caches before the measured requests, so a reader knows whether the run started cold.
//!
//! Every run salts its prompts (`prompt_salt`), so nothing another run left in a cache can
//! serve it; a cell measured warm on purpose turns the salt off (`salted: false`, and the
//! workload's `cache: "warm"`, which the matching rule compares). A run asked to reset the
//! caches (`anvil-capture run --reset-cache`) records, per replica, how: the engine's
//! endpoint, the attempts while the server was busy, and the probe that verifies it (a
//! prompt sent twice before the reset, cached the second time, and once after, cached no
//! more).

use serde::{Deserialize, Serialize};

/// What was done about the prefix caches before the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheHygiene {
    /// Whether the run's salt made its prompts its own (false: a warm cell on purpose).
    pub salted: bool,
    /// Each replica's reset before the `before` scrape; empty when none was asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resets: Vec<CacheReset>,
}

/// One replica's cache reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheReset {
    pub replica: u32,
    /// `reset`; `not_available` (no reset endpoint answered: vLLM mounts its only with
    /// `VLLM_SERVER_DEV_MODE=1` and answers 404 without it); `failed` (the server stayed busy
    /// past the timeout, or answered with an error).
    pub outcome: String,
    /// The endpoint that reset it, e.g. `POST /reset_prefix_cache`, `POST /flush_cache`,
    /// `POST /slots/{id}?action=erase` (every slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Requests to the reset endpoint (more than one while the server was busy).
    pub attempts: u32,
    /// From the first attempt to the last answer, ms.
    pub waited_ms: f64,
    /// The probe prompt's cached tokens when sent again before the reset; absent when the
    /// server reports no cached tokens (usage `prompt_tokens_details.cached_tokens`,
    /// llama.cpp `timings.cache_n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cached_before: Option<u64>,
    /// The same prompt's cached tokens after the reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cached_after: Option<u64>,
    /// Cached before and not after (fewer than one 16-token block); absent when the server
    /// reported no cached tokens or the reset did not happen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// What went wrong, or what the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
