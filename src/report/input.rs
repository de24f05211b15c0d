//! What the report is built from: [`ReportInput`], the rules' results beside the query
//! layer's per-request and time-series data the rules do not carry (request timings, queue
//! gauges, client queueing, server timings, tokens per chunk, evidence snippets), filled by
//! `crate::gather::report_input`.

use serde::Serialize;

use crate::manifest::{RunPlan, WorkloadManifest};
use crate::rules::check::CheckReport;
use crate::rules::compare::Comparison;
use crate::rules::input::Artifact;
use crate::rules::refusal::Refusal;

/// One measured request's timing, from the query layer (seconds since the run's start).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestTiming {
    pub run_id: String,
    pub replica: u32,
    pub request_index: i64,
    pub start_s: f64,
    pub first_token_s: Option<f64>,
    pub end_s: f64,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    /// Usage prompt tokens.
    pub prompt_tokens: Option<f64>,
    pub effective_prefill_tps: Option<f64>,
    /// One of the run's first wave (the `request_timeline` view's `first_wave`).
    pub first_wave: bool,
}

/// One `/metrics` scrape of a replica's scheduler gauges (the `server_queue` view).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueSample {
    pub replica: u32,
    /// Seconds since the run's start.
    pub t_s: f64,
    /// Requests waiting (vLLM `num_requests_waiting`, SGLang `num_queue_reqs`, llama.cpp
    /// `requests_deferred`).
    pub waiting: f64,
    /// Requests being processed (`num_requests_running`, `num_running_reqs`,
    /// `requests_processing`).
    pub running: f64,
}

/// A run's scrapes: how many, and the queue samples among them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunQueue {
    pub run_id: String,
    /// Scrapes recorded (all replicas).
    pub scrapes: i64,
    /// Distinct metric names they carried.
    pub metrics: i64,
    /// The runtime whose queue gauge names matched, when one did.
    pub runtime: Option<String>,
    pub samples: Vec<QueueSample>,
}

/// Client-side queueing of one run (the `client_queueing` view).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ClientQueue {
    pub run_id: String,
    /// `closed`, `constant` or `poisson`.
    pub schedule: String,
    pub rate_per_s: Option<f64>,
    #[serde(default)]
    pub requests: i64,
    #[serde(default)]
    pub queued_over_1ms: i64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// What requests waited inside the server before their first token, as the client observes
/// it (the `prefill_wait` view), over one run and window.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PrefillWait {
    pub run_id: String,
    /// `all` or `first_wave`.
    pub window: String,
    #[serde(default)]
    pub requests: i64,
    #[serde(default)]
    pub waited: i64,
    pub wait_max_ms: Option<f64>,
}

/// What the server reported about its own timings, over one run's measured requests (the
/// `server_timings` view, aggregated).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ServerTimings {
    pub run_id: String,
    /// Measured requests whose stream carried the server's timings.
    #[serde(default)]
    pub requests: i64,
    pub prefill_p50_ms: Option<f64>,
    /// TTFT minus the server's prefill time: queued or batched, plus transport.
    pub queue_p50_ms: Option<f64>,
    pub queue_max_ms: Option<f64>,
    /// anvil's generation time minus the server's decode time.
    pub generation_diff_p50_ms: Option<f64>,
    pub generation_diff_max_abs_ms: Option<f64>,
    /// Requests whose usage completion tokens differ from the server's generated count.
    #[serde(default)]
    pub token_mismatches: i64,
}

/// Usage completion tokens per streamed content chunk of one run and replica (speculative
/// decoding puts several tokens in one chunk).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokensPerChunk {
    pub run_id: String,
    pub replica: u32,
    pub tokens_per_chunk: f64,
}

/// A piece of a model's reply shown as evidence (e.g. a reply that carried a foreign
/// canary).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputSnippet {
    pub run_id: String,
    pub request_index: i64,
    pub text: String,
}

/// What `run.json` says about a run beyond the rules' facts: times and servers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    pub run_id: String,
    pub started_utc: String,
    pub ended_utc: Option<String>,
    /// `replica: server_version` style lines from the endpoints' server info.
    pub servers: Vec<String>,
    /// The run's cell id (`run.json` `cell_id`).
    pub cell_id: String,
    /// Each endpoint's model owner as its `/v1/models` said (`models.owned_by`): the
    /// simulator says `anvil-sim`.
    pub owners: Vec<String>,
}

pub use crate::rules::stage::StageComparison as ScreenResult;

/// Everything the report is built from.
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    pub data_folder: &'a str,
    /// The workload manifest's path, as given (for the commands the report suggests).
    pub manifest_file: &'a str,
    pub generated_utc: &'a str,
    pub tool_version: &'a str,
    pub plan: &'a RunPlan,
    pub manifest: &'a WorkloadManifest,
    pub check: &'a CheckReport,
    pub artifacts: &'a [Artifact],
    /// The headline comparison, its refusal, or `None` when none was attempted.
    pub headline: Option<Result<&'a Comparison, &'a Refusal>>,
    pub screens: &'a [ScreenResult],
    pub runs: &'a [RunInfo],
    pub requests: &'a [RequestTiming],
    pub queues: &'a [RunQueue],
    /// The queue gauges anvil reads, per runtime (from `server_metric_names`), for the note
    /// on a run whose scrapes carry none.
    pub known_queue_gauges: &'a str,
    pub client_queues: &'a [ClientQueue],
    /// What requests waited in the server before their first token, client-observed.
    pub prefill_waits: &'a [PrefillWait],
    pub server_timings: &'a [ServerTimings],
    pub tokens_per_chunk: &'a [TokensPerChunk],
    pub snippets: &'a [OutputSnippet],
    /// Metric definitions `(name, text)` from the SQL files' header comments.
    pub definitions: &'a [(String, String)],
    /// The exit code `anvil check` gives for [`ReportInput::check`]'s outcome, stated
    /// beside it.
    pub check_exit_code: u8,
    /// The SLOs in force with where they came from; empty when none was given.
    pub slos: &'a str,
    /// The throughput-per-GPU against throughput-per-user points (the `tradeoff` view).
    pub tradeoff: &'a [crate::rules::input::TradeoffPoint],
    /// Each capacity search's result found beside the data (`capacity.json`).
    pub capacity: &'a [CapacityFound],
    /// Acceptance per draft position of every run that exported it.
    pub spec_positions: &'a [SpecPosition],
    /// The cells the campaign file beside the data plans, when one was found.
    pub planned: Option<&'a PlannedCells>,
    /// Sessions' figures by turn, the prefix cache and the KV pool, per run.
    pub cache: &'a CacheFigures,
}

/// What the query layer says of sessions, the prefix cache and the KV pool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheFigures {
    /// `turn_stats`, by run and turn.
    pub turns: Vec<TurnFigures>,
    /// `prefix_cache`, by run and replica.
    pub replicas: Vec<CacheReplica>,
    /// `kv_cache_timeline` during the runs: (run, replica, t_s, kv usage).
    pub kv: Vec<(String, u32, f64, f64)>,
    /// `session_goodput` after the first wave (the decision window), by run; empty with no
    /// SLO given.
    pub sessions: Vec<SessionAttainment>,
}

/// One session run's attainment after its first wave (the `session_goodput` view).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct SessionAttainment {
    pub run_id: String,
    pub sessions: i64,
    pub attained: i64,
    pub attained_share: Option<f64>,
    pub share_ci95_low: Option<f64>,
    pub share_ci95_high: Option<f64>,
    pub goodput_sps: Option<f64>,
}

/// One turn index of one session run (the `turn_stats` view).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct TurnFigures {
    pub run_id: String,
    pub turn: i64,
    pub sessions: i64,
    pub ok: i64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p90_ms: Option<f64>,
    pub cached_share: Option<f64>,
    pub history_tokens_mean: Option<f64>,
    pub contaminated: i64,
}

/// One replica of one run's prefix cache (the `prefix_cache` view).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct CacheReplica {
    pub run_id: String,
    pub replica: i64,
    pub server_source: Option<String>,
    pub server_hit_rate: Option<f64>,
    pub client_cached_share: Option<f64>,
    pub disagreement: Option<f64>,
    pub kv_usage_mean: Option<f64>,
    pub kv_usage_max: Option<f64>,
    pub preemptions: Option<f64>,
}

/// One arm's capacity search as `capacity.json` states it, and the file it was read from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CapacityFound {
    #[serde(flatten)]
    pub search: crate::artifact::capacity::CapacityResult,
    pub file: String,
}

/// One acceptance figure per draft position (the `spec_decode_positions` view).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecPosition {
    pub run_id: String,
    pub replica: u32,
    /// 0-based draft position.
    pub position: u32,
    /// How often a draft step got that far: accepted at the position / drafts.
    pub acceptance_rate: f64,
}

/// The cells a campaign file plans, when one was found beside the data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCells {
    /// The campaign file, as given.
    pub file: String,
    /// The `--out` folder the campaign records into (the data folder's parent).
    pub out: String,
    /// `(stage, arm, cell id)`, repeats once.
    pub cells: Vec<(String, String, String)>,
    /// The decision's objective the campaign file declares, if any.
    pub objective: Option<crate::rules::recommend::DeclaredObjective>,
    /// The order repeats were recorded in (`interleaved` or `blocked`).
    pub order: String,
}
