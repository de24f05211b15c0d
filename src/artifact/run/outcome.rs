//! How a run and each request ended: the run's status, a request's outcome and kind, and
//! the counts `run.json` keeps of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// Rows of `telemetry`; absent in a run recorded before the table existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<u64>,
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
