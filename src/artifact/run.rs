//! `run.json` (`anvil-serving.capture-run/v3`): who ran what, when, against what, which
//! repeat of its cell it is, and how it ended. Version 2 files (no repeat, no inherited
//! defaults) are read as the one run of their cell.
//!
//! The workload section is what makes two artifacts comparable and is hashed into the
//! workload fingerprint; the arm and its topology (replica count, endpoints) are recorded
//! beside it but stay out of the fingerprint, so TP1, TP2 and DP2 arms running the same cell
//! match. Secrets never reach this file: the command line goes through [`redact_args`] and
//! endpoint URLs through [`redact_url`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::{ArtifactError, Result};
use super::fingerprint;
use crate::clock::Origin;

/// The `schema` value of every `run.json` this version writes.
pub const SCHEMA: &str = "anvil-serving.capture-run/v3";

/// The earlier version this version still reads: a cell's one run, no inherited defaults.
pub const SCHEMA_V2: &str = "anvil-serving.capture-run/v2";

/// The contents of `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunJson {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The campaign this run belongs to (the manifest's `campaign_id`).
    pub campaign_id: String,
    /// The arm (server configuration) that was measured.
    pub arm: Arm,
    /// The manifest cell this run executed, e.g. `headline-4k-c8`.
    pub cell_id: String,
    /// Unique id of this run (also the `run_id` column of every table).
    pub run_id: String,
    /// Which of its cell's repeats this run is (`1 of 1` for a cell recorded once).
    #[serde(default)]
    pub repeat: Repeat,
    /// Which shard of its run group this artifact is, when the run was driven from several
    /// client hosts (absent for a run from one host). Not part of the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::Shard>,
    /// What was asked of the server; hashed into `workload_fingerprint`.
    pub workload: Workload,
    /// `sha256:` + hex of the canonical JSON of `workload` (see [`fingerprint`]).
    pub workload_fingerprint: String,
    /// Where the requests went: the arm's replicas. Not part of the workload.
    pub topology: Topology,
    /// How prompt lengths were calibrated: which oracle counted the tokens, and how it was
    /// checked against the server's own usage.
    pub calibration: Calibration,
    /// Per API the run sent, the thinking switch that went with its requests (the JSON
    /// fields added to each body, e.g. `{"chat_template_kwargs": {"enable_thinking":
    /// false}}`), or `null` where nothing was sent (completions prompts have no chat
    /// template).
    pub thinking_switch: BTreeMap<String, Option<serde_json::Value>>,
    /// Per-run salt mixed into prompts and canaries so runs never share a prompt cache.
    /// Never part of the fingerprint.
    pub prompt_salt: String,
    /// The run's time origin: every `*_ns` column is nanoseconds since it.
    pub clock: Clock,
    /// UTC time the run started (RFC 3339).
    pub started_utc: String,
    /// UTC time the run ended (RFC 3339); absent while running.
    pub ended_utc: Option<String>,
    /// The program that recorded the run.
    pub tool: Tool,
    /// The command line, with secrets removed by [`redact_args`].
    pub command_line: Vec<String>,
    /// How the run ended.
    pub status: Status,
    /// Why the run ended this way (required for `interrupted` and `failed`).
    pub status_reason: Option<String>,
    /// Row and outcome counts.
    pub counts: Counts,
}

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
        }
    }
}

/// Which repeat of its cell a run is: `index` of `of` (1-based). Repeats of one cell share
/// the workload fingerprint and the arm's configuration; each has its own folder
/// (docs/artifact.md "Repeats").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    pub index: u32,
    pub of: u32,
}

impl Default for Repeat {
    fn default() -> Self {
        Self { index: 1, of: 1 }
    }
}

/// The folder of repeat `index` inside its cell's folder, when the cell is recorded more than
/// once: `repeat-<index>`.
pub fn repeat_folder(index: u32) -> String {
    format!("repeat-{index}")
}

/// The measured arm: one server configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Arm name as the run plan spells it, e.g. `K12`, `TP2`.
    pub name: String,
    /// Run-plan stage, e.g. `SGLang optimization`.
    pub stage: String,
    /// Serving runtime, e.g. `sglang 0.6.1`, `vllm 0.27.1`, `llama.cpp b6000`.
    pub runtime: String,
    /// The arm's configuration, in the order given (a one-variable control differs from
    /// its control in exactly one key).
    pub config: ArmConfig,
    /// The campaign's defaults, every key: the arm inherits those it does not declare
    /// (`torch_compile` unset means the campaign's default, e.g. `off`); a declared key's
    /// default says which value is the campaign's status quo.
    #[serde(default)]
    pub defaults: ArmConfig,
}

/// Ordered `key = value` configuration of an arm, written as a JSON object whose key order
/// is kept. Duplicate keys are refused when reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArmConfig(pub Vec<(String, String)>);

impl ArmConfig {
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The pairs in their recorded order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Keys whose values differ between `self` and `other` (a key set in only one counts),
    /// sorted.
    pub fn differing_keys(&self, other: &ArmConfig) -> Vec<String> {
        let a: BTreeMap<&str, &str> = self.iter().collect();
        let b: BTreeMap<&str, &str> = other.iter().collect();
        let mut keys: Vec<String> = a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .map(|k| (*k).to_owned())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ArmConfig {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl Serialize for ArmConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ArmConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ArmConfig;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of configuration keys to string values")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<ArmConfig, A::Error> {
                let mut pairs: Vec<(String, String)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    if pairs.iter().any(|(existing, _)| *existing == k) {
                        return Err(de::Error::custom(format!("duplicate key `{k}`")));
                    }
                    pairs.push((k, v));
                }
                Ok(ArmConfig(pairs))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The API a cell drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/chat/completions`.
    #[default]
    Chat,
    /// `POST /v1/completions` (legacy).
    Completions,
    /// `POST /v1/responses`.
    Responses,
}

impl Api {
    /// The name used in `run.json` and in the `api` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
        }
    }

    /// Parse that name (also the manifest's and the command line's spelling).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat" => Some(Self::Chat),
            "completions" => Some(Self::Completions),
            "responses" => Some(Self::Responses),
            _ => None,
        }
    }

    /// The cell-id suffix that keeps runs of a cell on different APIs apart, before the
    /// schedule's: empty for chat (the manifest's cells, so their ids are unchanged),
    /// `.responses` and `.completions` otherwise.
    pub fn cell_id_suffix(self) -> &'static str {
        match self {
            Api::Chat => "",
            Api::Completions => ".completions",
            Api::Responses => ".responses",
        }
    }

    /// What a report adds to a workload's description so a run on another API than chat is
    /// never read as a chat run: `, Responses API`, `, legacy completions API`; nothing for
    /// chat (the manifest's own API).
    pub fn note(self) -> &'static str {
        match self {
            Api::Chat => "",
            Api::Completions => ", legacy completions API",
            Api::Responses => ", Responses API",
        }
    }
}

/// The workload of one cell: everything that must be equal for two runs to be compared.
/// Hashed into the workload fingerprint; topology and salt are deliberately not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Workload class id from the manifest, e.g. `headline-sustained-output`.
    pub class: String,
    /// Target prompt length in tokens (actual prompt token target), e.g. 4096.
    pub prompt_tokens_target: u64,
    /// Concurrent in-flight requests per replica.
    pub concurrency_per_replica: u32,
    /// Measured requests in the cell (warmup and calibration excluded), all replicas together.
    pub total_requests: u64,
    /// Words the prompt asks the model to write; `null` for natural-completion cells.
    pub response_words: Option<u32>,
    /// `max_tokens` (token ceiling) sent with every request.
    pub max_tokens: u32,
    /// Prompt cache mode from the manifest, e.g. `unique`.
    pub prompt_cache_mode: String,
    /// Whether every request carries a unique canary it must echo.
    pub canaries: bool,
    /// Random prefix seed from the manifest.
    pub seed: u64,
    /// Thinking mode, e.g. `disabled`.
    pub thinking: String,
    /// API driven.
    pub api: Api,
    /// How requests were issued: closed loop (a fixed number in flight) or open loop (at a
    /// rate). Open and closed loop load a server differently, so the schedule is part of
    /// what must match.
    pub schedule: Schedule,
    /// The start ramp, seconds (`--ramp`). Closed loop: the slots' first requests started
    /// evenly over it from the barrier's release (slot k of W at k·ramp/W, its intended
    /// time); open loop: the release rate rose linearly from 0 to `rate_per_s` over it.
    /// Absent: every slot released at once, an open loop at full rate from its first release.
    /// A ramp loads the server differently at the start, so it is part of what must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_s: Option<f64>,
    /// True when the cell was not taken from the manifest (an ad-hoc run).
    pub off_manifest: bool,
    /// The search this run is a probe of (`capacity`: a load tried by `anvil campaign run`'s
    /// capacity search); absent for every other run. Part of the fingerprint, so a probe
    /// never matches a manifest cell's run at the same load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

/// How a run issued its measured requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Schedule {
    /// `concurrency_per_replica` requests in flight on every replica, each sent as soon as
    /// the previous one on its slot ended.
    Closed,
    /// Requests released at `rate_per_s` (all replicas together), each taken by the next free
    /// slot; a request released while every slot is busy waits in the client, which shows
    /// as `t_sent_ns - t_intended_ns`.
    Open {
        /// Mean release rate, requests per second.
        rate_per_s: f64,
        /// `constant` gaps of 1 / rate, or `poisson` (exponential gaps of mean 1 / rate).
        arrivals: Arrivals,
    },
}

/// Gaps between the releases of an open-loop schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    Constant,
    Poisson,
}

/// The cell-id suffix of a start ramp (`.ramp2.5` for 2.5 s; empty without one), after the
/// schedule's: ramped and unramped runs of a cell never share a folder.
pub fn ramp_cell_id_suffix(ramp_s: Option<f64>) -> String {
    ramp_s.map(|r| format!(".ramp{r}")).unwrap_or_default()
}

/// The cell-id suffix of a probe of a search (`.probe-capacity`); empty for other runs.
pub fn probe_cell_id_suffix(probe: Option<&str>) -> String {
    probe.map(|p| format!(".probe-{p}")).unwrap_or_default()
}

impl Schedule {
    /// The cell-id suffix that keeps open- and closed-loop artifacts of a cell apart:
    /// empty for closed loop, `.rate2.5` / `.poisson2.5` for open loop at 2.5 requests/s.
    pub fn cell_id_suffix(&self) -> String {
        match self {
            Schedule::Closed => String::new(),
            Schedule::Open {
                rate_per_s,
                arrivals: Arrivals::Constant,
            } => format!(".rate{rate_per_s}"),
            Schedule::Open {
                rate_per_s,
                arrivals: Arrivals::Poisson,
            } => format!(".poisson{rate_per_s}"),
        }
    }

    /// `closed`, `constant` or `poisson` (the `schedule` column of `runs`).
    pub fn kind(&self) -> &'static str {
        match self {
            Schedule::Closed => "closed",
            Schedule::Open {
                arrivals: Arrivals::Constant,
                ..
            } => "constant",
            Schedule::Open {
                arrivals: Arrivals::Poisson,
                ..
            } => "poisson",
        }
    }

    /// The open-loop rate, requests per second.
    pub fn rate_per_s(&self) -> Option<f64> {
        match self {
            Schedule::Closed => None,
            Schedule::Open { rate_per_s, .. } => Some(*rate_per_s),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Closed => f.write_str("closed loop"),
            Schedule::Open {
                rate_per_s,
                arrivals,
            } => write!(
                f,
                "open loop at {rate_per_s} requests/s ({})",
                match arrivals {
                    Arrivals::Constant => "constant gaps",
                    Arrivals::Poisson => "Poisson arrivals",
                }
            ),
        }
    }
}

impl Workload {
    /// This workload's fingerprint (`sha256:…`).
    pub fn fingerprint(&self) -> String {
        // Serialising a struct of plain fields to a JSON value cannot fail.
        fingerprint::fingerprint(self)
            .unwrap_or_else(|e| format!("{}unserialisable:{e}", fingerprint::PREFIX))
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

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Written at start; a `run.json` still `running` after the recorder exited means it
    /// was killed: run `anvil-capture recover`.
    Running,
    /// Every request was sent and finished (successfully or not).
    Complete,
    /// The run stopped early (signal, kill, recovery of a killed run).
    Interrupted,
    /// The recorder gave up (e.g. endpoint unreachable, stop rule during the run).
    Failed,
}

impl Status {
    /// The name written in `run.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Complete => "complete",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }
}

/// How a request ended (`outcome` column of `requests`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// HTTP 2xx and the stream ended normally.
    Ok,
    /// Non-2xx HTTP status (body in `error`).
    HttpError,
    /// No TCP connection within the connect timeout.
    TimeoutConnect,
    /// The TCP connection was refused or failed.
    ConnectError,
    /// No first byte within the first-byte timeout.
    TimeoutFirstByte,
    /// The stream went silent longer than the idle timeout.
    TimeoutIdle,
    /// The whole request exceeded the total timeout.
    TimeoutTotal,
    /// The connection closed before the stream ended.
    Disconnected,
    /// The response was not a valid SSE stream.
    ProtocolError,
    /// The recorder cancelled the request (run interrupted).
    Cancelled,
    /// The stream ended normally but its finish reason says the server did not complete the
    /// generation (`abort`, `error`, a Responses status `failed` or `cancelled`: anything but
    /// [`NORMAL_FINISH_REASONS`]). Decided by the writer from the parsed events.
    Aborted,
    /// The server reported an error inside the stream (`data: {"error": ...}`, a Responses
    /// `error` or `response.failed` event), whether or not the stream then ended cleanly; the
    /// server's message is in `error`. Decided by the writer from the parsed events.
    StreamError,
}

/// Finish reasons (and Responses final statuses) of a generation the server completed:
/// stopped, cut by the token ceiling, ended in a tool call, or filtered, in the spellings of
/// the OpenAI APIs and of servers that differ (TGI's `eos_token` and `stop_sequence` mean
/// stop). Any other finish reason on an otherwise complete stream (vLLM's `abort`, `error`,
/// a Responses status `failed` or `cancelled`) makes the request [`Outcome::Aborted`].
pub const NORMAL_FINISH_REASONS: &[&str] = &[
    "stop",
    "length",
    "tool_calls",
    "function_call",
    "content_filter",
    "eos_token",
    "stop_sequence",
    "completed",
    "incomplete",
    "max_output_tokens",
];

impl Outcome {
    /// Every outcome, in column-value order.
    pub const ALL: [Outcome; 12] = [
        Outcome::Ok,
        Outcome::HttpError,
        Outcome::TimeoutConnect,
        Outcome::ConnectError,
        Outcome::TimeoutFirstByte,
        Outcome::TimeoutIdle,
        Outcome::TimeoutTotal,
        Outcome::Disconnected,
        Outcome::ProtocolError,
        Outcome::Cancelled,
        Outcome::Aborted,
        Outcome::StreamError,
    ];

    /// The value written in the `outcome` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::HttpError => "http_error",
            Outcome::TimeoutConnect => "timeout_connect",
            Outcome::ConnectError => "connect_error",
            Outcome::TimeoutFirstByte => "timeout_first_byte",
            Outcome::TimeoutIdle => "timeout_idle",
            Outcome::TimeoutTotal => "timeout_total",
            Outcome::Disconnected => "disconnected",
            Outcome::ProtocolError => "protocol_error",
            Outcome::Cancelled => "cancelled",
            Outcome::Aborted => "aborted",
            Outcome::StreamError => "stream_error",
        }
    }

    /// Parse a column value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// Why a request was sent (`kind` column of `requests`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// Counts toward the cell's statistics.
    Measured,
    /// Warms the server before measuring; excluded from statistics.
    Warmup,
    /// Calibrates the prompt length in tokens; excluded from statistics.
    Calibration,
}

impl RequestKind {
    /// Every kind.
    pub const ALL: [RequestKind; 3] = [
        RequestKind::Measured,
        RequestKind::Warmup,
        RequestKind::Calibration,
    ];

    /// The value written in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Measured => "measured",
            RequestKind::Warmup => "warmup",
            RequestKind::Calibration => "calibration",
        }
    }

    /// Parse a column value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Row and outcome counts of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Rows of `requests` with `kind = 'measured'`.
    pub requests_measured: u64,
    /// Rows of `requests` with `kind = 'warmup'`.
    pub requests_warmup: u64,
    /// Rows of `requests` with `kind = 'calibration'`.
    pub requests_calibration: u64,
    /// Measured requests with outcome `ok`.
    pub succeeded: u64,
    /// Measured requests that did not succeed, by outcome (`http_error`, `timeout_idle`, …).
    pub failed: BTreeMap<Outcome, u64>,
    /// Rows of `events`.
    pub events: u64,
    /// Rows of `scrapes`.
    pub scrapes: u64,
    /// Times the capture hot path found the writer channel full and had to wait.
    pub channel_full: u64,
}

impl Counts {
    /// Total rows of `requests` (all kinds).
    pub fn requests_total(&self) -> u64 {
        self.requests_measured + self.requests_warmup + self.requests_calibration
    }

    /// Measured requests that did not succeed.
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }
}

impl RunJson {
    /// Read and check a `run.json`: refuses unknown schema versions and malformed fields,
    /// naming the file and the field.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ArtifactError::Missing {
                    path: path.to_owned(),
                    hint: "every artifact folder needs the run.json anvil-capture writes at start"
                        .to_owned(),
                }
            } else {
                ArtifactError::io(path, "cannot read", e)
            }
        })?;
        Self::parse(&text, path)
    }

    /// Parse `run.json` text; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let value: serde_json::Value = crate::json::parse_strict(text)
            .map_err(|e| ArtifactError::run_json(path, "(document)", format!("not JSON: {e}")))?;
        match value.get("schema") {
            Some(serde_json::Value::String(s)) if s == SCHEMA || s == SCHEMA_V2 => {}
            Some(serde_json::Value::String(s)) => {
                return Err(ArtifactError::run_json(
                    path,
                    "schema",
                    format!(
                        "unknown schema version `{s}`; this anvil reads `{SCHEMA}` and `{SCHEMA_V2}`: use the anvil version that wrote it"
                    ),
                ));
            }
            Some(_) => {
                return Err(ArtifactError::run_json(
                    path,
                    "schema",
                    format!("must be the string `{SCHEMA}`"),
                ));
            }
            None => {
                return Err(ArtifactError::run_json(
                    path,
                    "schema",
                    format!("missing; expected `{SCHEMA}`"),
                ));
            }
        }
        // Deserialise from the text (not the parsed value) so duplicate keys are seen.
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize::<_, RunJson>(&mut de).map_err(|e| {
            let field = e.path().to_string();
            ArtifactError::run_json(path, field, e.into_inner().to_string())
        })
    }

    /// Check the invariants a finished artifact's `run.json` must hold: the fingerprint
    /// matches the workload, times parse, topology is consistent, status is final.
    pub fn check(&self, path: &Path) -> Result<()> {
        self.check_recorded(path)?;
        self.check_ended(path)
    }

    /// The checks of [`RunJson::check`] that hold while the run is still being recorded:
    /// fingerprint, identifiers, times, topology (not the final status).
    pub fn check_recorded(&self, path: &Path) -> Result<()> {
        let computed = self.workload.fingerprint();
        if self.workload_fingerprint != computed {
            return Err(ArtifactError::Fingerprint {
                path: path.to_owned(),
                stored: self.workload_fingerprint.clone(),
                computed,
            });
        }
        for (field, value) in [
            ("campaign_id", &self.campaign_id),
            ("cell_id", &self.cell_id),
            ("run_id", &self.run_id),
            ("arm.name", &self.arm.name),
            ("tool.name", &self.tool.name),
        ] {
            if value.trim().is_empty() {
                return Err(ArtifactError::run_json(path, field, "must not be empty"));
            }
        }
        if parse_utc(&self.clock.utc_origin).is_none() {
            return Err(ArtifactError::run_json(
                path,
                "clock.utc_origin",
                format!("`{}` is not an RFC 3339 time", self.clock.utc_origin),
            ));
        }
        if parse_utc(&self.started_utc).is_none() {
            return Err(ArtifactError::run_json(
                path,
                "started_utc",
                format!("`{}` is not an RFC 3339 time", self.started_utc),
            ));
        }
        let topo = &self.topology;
        if topo.replica_count as usize != topo.endpoints.len() || topo.replica_count == 0 {
            return Err(ArtifactError::run_json(
                path,
                "topology.replica_count",
                format!(
                    "is {} but {} endpoints are listed (need one endpoint per replica, at least one)",
                    topo.replica_count,
                    topo.endpoints.len()
                ),
            ));
        }
        for (i, ep) in topo.endpoints.iter().enumerate() {
            if ep.replica as usize != i {
                return Err(ArtifactError::run_json(
                    path,
                    format!("topology.endpoints[{i}].replica"),
                    format!("is {} but must equal its position {i}", ep.replica),
                ));
            }
        }
        Ok(())
    }

    /// The final status and its companions (reason, end time).
    fn check_ended(&self, path: &Path) -> Result<()> {
        match self.status {
            Status::Running => {
                return Err(ArtifactError::run_json(
                    path,
                    "status",
                    format!(
                        "is `running`: the recorder did not finish; if it is no longer running, run `anvil-capture recover {}`",
                        path.parent().unwrap_or(path).display()
                    ),
                ));
            }
            Status::Complete => {}
            Status::Interrupted | Status::Failed => {
                if self
                    .status_reason
                    .as_deref()
                    .is_none_or(|r| r.trim().is_empty())
                {
                    return Err(ArtifactError::run_json(
                        path,
                        "status_reason",
                        format!("required when status is `{}`", self.status.as_str()),
                    ));
                }
            }
        }
        match &self.ended_utc {
            Some(t) if parse_utc(t).is_some() => {}
            Some(t) => {
                return Err(ArtifactError::run_json(
                    path,
                    "ended_utc",
                    format!("`{t}` is not an RFC 3339 time"),
                ));
            }
            None => {
                return Err(ArtifactError::run_json(
                    path,
                    "ended_utc",
                    "required once the run has ended",
                ));
            }
        }
        Ok(())
    }

    /// The same run with every secret of `redactor` removed from every string it holds
    /// (server facts, URLs, notes, reasons, configuration), the fingerprint recomputed.
    pub fn redacted(self, redactor: &super::Redactor) -> Self {
        if redactor.is_empty() {
            return self;
        }
        let Ok(mut value) = serde_json::to_value(&self) else {
            return self;
        };
        redactor.json(&mut value);
        match serde_json::from_value::<RunJson>(value) {
            Ok(mut run) => {
                run.workload_fingerprint = run.workload.fingerprint();
                run
            }
            // Replacing text inside strings keeps every field's type; not reached.
            Err(_) => self,
        }
    }

    /// Serialise as pretty JSON (the on-disk form).
    pub fn to_json_pretty(&self) -> String {
        // A struct of strings, numbers and maps with string keys always serialises.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

pub use super::redact::{is_secret_name, redact_args, redact_url};
pub use crate::clock::{format_utc_ns, parse_utc, utc_now};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A complete, valid run.json for tests: the fixture, finished, with a configuration and
    /// the server's facts.
    pub(crate) fn sample_run() -> RunJson {
        let mut run =
            crate::artifact::testing::finished(crate::artifact::testing::run_json("run-0001"));
        run.arm.config = [
            ("speculative_num_steps", "12"),
            ("chunked_prefill_size", "1024"),
        ]
        .into_iter()
        .collect();
        let endpoint = &mut run.topology.endpoints[0];
        endpoint.server_info =
            BTreeMap::from([("server_version".to_owned(), serde_json::json!("0.6.1"))]);
        endpoint.metrics_url = Some("http://127.0.0.1:8000/metrics".to_owned());
        run.prompt_salt = "salt-1".to_owned();
        run
    }

    pub(crate) fn sample_workload() -> Workload {
        crate::artifact::testing::workload()
    }

    #[test]
    fn run_json_round_trips_and_keeps_config_order() {
        let run = sample_run();
        let text = run.to_json_pretty();
        let back = RunJson::parse(&text, Path::new("run.json")).unwrap();
        assert_eq!(back, run);
        let k = text.find("speculative_num_steps").unwrap();
        let c = text.find("chunked_prefill_size").unwrap();
        assert!(k < c, "config order must be kept");
        back.check(Path::new("run.json")).unwrap();
    }

    #[test]
    fn unknown_schema_version_is_refused_naming_file_and_field() {
        let text = sample_run()
            .to_json_pretty()
            .replace(SCHEMA, "anvil-serving.capture-run/v9");
        let err = RunJson::parse(&text, Path::new("/a/run.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/a/run.json"), "{err}");
        assert!(err.contains("field `schema`"), "{err}");
        assert!(err.contains("capture-run/v9"), "{err}");
    }

    #[test]
    fn malformed_field_is_named_with_its_path() {
        let text = sample_run()
            .to_json_pretty()
            .replace("\"max_tokens\": 512", "\"max_tokens\": \"lots\"");
        let err = RunJson::parse(&text, Path::new("run.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("workload.max_tokens"), "{err}");
    }

    #[test]
    fn duplicate_config_keys_are_refused() {
        let text = sample_run()
            .to_json_pretty()
            .replace("\"chunked_prefill_size\"", "\"speculative_num_steps\"");
        let err = RunJson::parse(&text, Path::new("run.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate key"), "{err}");
    }

    #[test]
    fn failed_counts_use_outcome_names() {
        let mut run = sample_run();
        run.counts.failed.insert(Outcome::TimeoutIdle, 2);
        let text = run.to_json_pretty();
        assert!(text.contains("\"timeout_idle\": 2"), "{text}");
        assert_eq!(RunJson::parse(&text, Path::new("r")).unwrap(), run);
    }

    #[test]
    fn workload_fingerprint_ignores_field_order() {
        let a: Workload = serde_json::from_str(
            r#"{"class":"headline-sustained-output","prompt_tokens_target":4096,
                "concurrency_per_replica":8,"total_requests":100,"response_words":256,
                "max_tokens":512,"prompt_cache_mode":"unique","canaries":true,"seed":38027,
                "thinking":"disabled","api":"chat","schedule":{"kind":"closed"},
                "off_manifest":false}"#,
        )
        .unwrap();
        let b: Workload = serde_json::from_str(
            r#"{"off_manifest":false,"schedule":{"kind":"closed"},"api":"chat",
                "thinking":"disabled","seed":38027,
                "canaries":true,"prompt_cache_mode":"unique","max_tokens":512,
                "response_words":256,"total_requests":100,"concurrency_per_replica":8,
                "prompt_tokens_target":4096,"class":"headline-sustained-output"}"#,
        )
        .unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), sample_workload().fingerprint());
    }

    #[test]
    fn workload_fingerprint_changes_with_every_workload_value() {
        let base = sample_workload();
        let f0 = base.fingerprint();
        type Change = Box<dyn Fn(&mut Workload)>;
        let variants: Vec<(&str, Change)> = vec![
            ("class", Box::new(|w| w.class = "context-curve".into())),
            (
                "prompt_tokens_target",
                Box::new(|w| w.prompt_tokens_target = 32768),
            ),
            (
                "concurrency_per_replica",
                Box::new(|w| w.concurrency_per_replica = 4),
            ),
            ("total_requests", Box::new(|w| w.total_requests = 99)),
            ("response_words", Box::new(|w| w.response_words = None)),
            ("response_words", Box::new(|w| w.response_words = Some(255))),
            ("max_tokens", Box::new(|w| w.max_tokens = 1024)),
            (
                "prompt_cache_mode",
                Box::new(|w| w.prompt_cache_mode = "shared".into()),
            ),
            ("canaries", Box::new(|w| w.canaries = false)),
            ("seed", Box::new(|w| w.seed = 1)),
            ("thinking", Box::new(|w| w.thinking = "enabled".into())),
            ("api", Box::new(|w| w.api = Api::Responses)),
            ("off_manifest", Box::new(|w| w.off_manifest = true)),
            ("ramp_s", Box::new(|w| w.ramp_s = Some(2.0))),
        ];
        for (field, change) in variants {
            let mut w = base.clone();
            change(&mut w);
            assert_ne!(
                w.fingerprint(),
                f0,
                "changing {field} must change the fingerprint"
            );
        }
    }

    #[test]
    fn arm_topology_and_salt_stay_out_of_the_fingerprint() {
        let a = sample_run();
        let mut b = sample_run();
        b.arm.name = "TP2".into();
        b.arm.config = [("tp", "2")].into_iter().collect();
        b.topology.replica_count = 2;
        b.topology.endpoints.push(Endpoint {
            replica: 1,
            url: "http://10.0.0.2:8000".into(),
            model: "other".into(),
            server_info: BTreeMap::new(),
            metrics_url: None,
        });
        b.prompt_salt = "different".into();
        assert_eq!(a.workload.fingerprint(), b.workload.fingerprint());
    }

    #[test]
    fn check_catches_edited_workload_and_running_status() {
        let mut run = sample_run();
        run.workload.max_tokens = 1024;
        let err = run.check(Path::new("d/run.json")).unwrap_err().to_string();
        assert!(err.contains("workload_fingerprint"), "{err}");
        let mut run = sample_run();
        run.status = Status::Running;
        let err = run.check(Path::new("d/run.json")).unwrap_err().to_string();
        assert!(err.contains("anvil-capture recover d"), "{err}");
        let mut run = sample_run();
        run.status = Status::Failed;
        let err = run.check(Path::new("d/run.json")).unwrap_err().to_string();
        assert!(err.contains("status_reason"), "{err}");
    }

    #[test]
    fn redact_args_drops_key_values_and_known_secrets() {
        let args = [
            "anvil-capture",
            "--api-key",
            "sk-123",
            "--api-key-file=/k",
            "--endpoint",
            "https://user:pw@host:8000/v1",
            "--header",
            "Authorization: Bearer sk-secret",
            "--concurrency",
            "8",
            "--tokenizer",
            "qwen",
            "--hf-token",
            "hf_abc",
        ];
        let out = redact_args(&args, &["sk-secret"]);
        assert_eq!(
            out,
            vec![
                "anvil-capture",
                "--api-key",
                "<redacted>",
                "--api-key-file=<redacted>",
                "--endpoint",
                "https://<redacted>@host:8000/v1",
                "--header",
                "Authorization: Bearer <redacted>",
                "--concurrency",
                "8",
                "--tokenizer",
                "qwen",
                "--hf-token",
                "<redacted>",
            ]
        );
        let out = redact_args(&["-H", "authorization: bearer sk-x"], &[]);
        assert_eq!(out, vec!["-H", "authorization: bearer <redacted>"]);
        assert!(!out.join(" ").contains("sk-"));
    }

    /// Pins the run.json layout: changing it means a new `SCHEMA`.
    #[test]
    fn run_json_layout_is_pinned_and_documented() {
        assert_eq!(SCHEMA, "anvil-serving.capture-run/v3");
        let v = serde_json::to_value(sample_run()).unwrap();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(
            keys(&v).join(" "),
            "schema campaign_id arm cell_id run_id repeat workload workload_fingerprint topology \
             calibration thinking_switch prompt_salt clock started_utc ended_utc tool command_line \
             status status_reason counts"
        );
        assert_eq!(
            keys(&v["workload"]).join(" "),
            "class prompt_tokens_target concurrency_per_replica total_requests response_words \
             max_tokens prompt_cache_mode canaries seed thinking api schedule off_manifest"
        );
        assert_eq!(
            keys(&v["calibration"]).join(" "),
            "method dialect replica tokenize_tokens usage_prompt_tokens note"
        );
        assert_eq!(
            keys(&v["arm"]).join(" "),
            "name stage runtime config defaults"
        );
        assert_eq!(keys(&v["repeat"]).join(" "), "index of");
        assert_eq!(
            keys(&v["clock"]).join(" "),
            "monotonic_origin_ns utc_origin"
        );
        assert_eq!(
            keys(&v["topology"]["endpoints"][0]).join(" "),
            "replica url model server_info metrics_url"
        );
        assert_eq!(
            keys(&v["counts"]).join(" "),
            "requests_measured requests_warmup requests_calibration succeeded failed events \
             scrapes channel_full"
        );
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/artifact.md"))
            .unwrap();
        for section in [
            &v,
            &v["arm"],
            &v["repeat"],
            &v["workload"],
            &v["counts"],
            &v["clock"],
            &v["calibration"],
            &v["topology"]["endpoints"][0],
        ] {
            for key in keys(section) {
                assert!(
                    doc.contains(&format!("`{key}`")),
                    "docs/artifact.md lacks `{key}`"
                );
            }
        }
    }

    #[test]
    fn a_version_2_run_json_reads_as_the_one_run_of_its_cell() {
        let mut v = serde_json::to_value(sample_run()).unwrap();
        v["schema"] = SCHEMA_V2.into();
        let object = v.as_object_mut().unwrap();
        object.remove("repeat");
        object["arm"].as_object_mut().unwrap().remove("defaults");
        let run = RunJson::parse(&v.to_string(), Path::new("old/run.json")).unwrap();
        assert_eq!(run.repeat, Repeat { index: 1, of: 1 });
        assert!(run.arm.defaults.0.is_empty());
        assert_eq!(run.schema, SCHEMA_V2);
        assert_eq!(repeat_folder(2), "repeat-2");
    }

    #[test]
    fn utc_format_has_nanoseconds_and_parses_back() {
        let s = format_utc_ns(1_700_000_000_123_456_789);
        assert_eq!(s, "2023-11-14T22:13:20.123456789Z");
        assert_eq!(parse_utc(&s), Some(1_700_000_000_123_456_789));
    }
}
