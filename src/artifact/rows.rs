//! Typed rows of the four tables and their conversion to Arrow record batches.
//!
//! The recorder fills these plain structs on its writer thread; [`ArtifactWriter`] buffers
//! them and turns each buffer into one `RecordBatch` per part file. The `run_id` column is
//! not in the rows: the writer fills it from `run.json`.
//!
//! [`ArtifactWriter`]: super::ArtifactWriter

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow_schema::ArrowError;

use super::event::{ParsedEvent, parse_event, parse_event_text};
use super::run::{Api, Outcome, RequestKind};
use super::schema::{events_schema, requests_schema, scrapes_schema, telemetry_schema};
use super::telemetry::Field;

/// One request, written when it ends. Times are ns since the run origin.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    pub request_index: u32,
    pub kind: RequestKind,
    /// Functional check name, `None` for performance requests.
    pub check: Option<String>,
    pub replica: u32,
    pub endpoint: String,
    pub api: Api,
    pub model: String,
    pub canary: Option<String>,
    /// Lowercase hex SHA-256 of the prompt text.
    pub prompt_sha256: String,
    pub prompt_chars: u64,
    pub prompt_tokens_target: u64,
    pub prompt_tokens_calibrated: Option<u64>,
    pub max_tokens: Option<u32>,
    /// The exact JSON body sent.
    pub request_body: Option<String>,
    pub t_intended_ns: i64,
    pub t_sent_ns: Option<i64>,
    pub t_first_byte_ns: Option<i64>,
    pub t_done_ns: i64,
    pub http_status: Option<u16>,
    pub outcome: Outcome,
    pub error: Option<String>,
    /// Rows this request has in `events`.
    pub events: u32,
    /// Whether the request opened a TCP connection.
    pub new_connection: bool,
    /// Whether it was sent a second time because the first attempt never reached the server.
    pub resent: bool,
    /// The session turn it is (session workloads only).
    pub session: Option<SessionTurn>,
    /// Whether the body asked `ignore_eos`; `None` when no body was built.
    pub ignore_eos: Option<bool>,
    /// When a free worker took it off the schedule; `None` when never sent.
    pub t_released_ns: Option<i64>,
}

/// Where a request of a session workload stands in its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTurn {
    pub session_id: u32,
    pub turn: u32,
    /// The previous turn's usage prompt + completion tokens (0 for a first turn); `None`
    /// when it reported no usage.
    pub history_tokens: Option<u64>,
}

/// One streamed SSE event: the raw payload plus the columns parsed from it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub request_index: u32,
    /// 0-based position within its response.
    pub seq: u32,
    /// Receive time, ns since the run origin.
    pub t_ns: i64,
    /// SSE `event:` name.
    pub event: Option<String>,
    /// Raw `data:` payload (invalid UTF-8 is replaced by U+FFFD and flagged in `parse_error`).
    pub data: String,
    pub parsed: ParsedEvent,
}

impl EventRow {
    /// Build a row from what the hot path captured, parsing `data` (writer-thread work).
    pub fn from_raw(
        request_index: u32,
        seq: u32,
        t_ns: i64,
        event: Option<&str>,
        data: &[u8],
    ) -> Self {
        Self::from_owned(
            request_index,
            seq,
            t_ns,
            event.map(str::to_owned),
            data.to_vec(),
        )
    }

    /// [`from_raw`](Self::from_raw) taking the hot path's buffers: valid UTF-8 (every
    /// well-formed stream) becomes the `data` column's text without a copy.
    pub fn from_owned(
        request_index: u32,
        seq: u32,
        t_ns: i64,
        event: Option<String>,
        data: Vec<u8>,
    ) -> Self {
        let (parsed, data) = match String::from_utf8(data) {
            Ok(text) => (parse_event_text(event.as_deref(), &text), text),
            Err(e) => (
                parse_event(event.as_deref(), e.as_bytes()),
                String::from_utf8_lossy(e.as_bytes()).into_owned(),
            ),
        };
        Self {
            request_index,
            seq,
            t_ns,
            event,
            data,
            parsed,
        }
    }
}

/// Phase of a scrape relative to the measured requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScrapePhase {
    /// Before the first request was sent.
    Before,
    /// While requests were in flight.
    During,
    /// After the last request ended.
    After,
}

impl ScrapePhase {
    /// The value of the `phase` column.
    pub fn as_str(self) -> &'static str {
        match self {
            ScrapePhase::Before => "before",
            ScrapePhase::During => "during",
            ScrapePhase::After => "after",
        }
    }
}

/// One Prometheus sample from one replica's `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeRow {
    pub replica: u32,
    pub t_ns: i64,
    pub phase: ScrapePhase,
    pub metric: String,
    /// Canonical label text (see [`super::schema::canonical_labels`]).
    pub labels: String,
    /// The family's `# TYPE` (`counter`, `gauge`, …), empty when none was given.
    pub metric_type: String,
    pub value: f64,
}

fn run_id_column(run_id: &str, len: usize) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
        run_id, len,
    )))
}

fn strings<'a>(it: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(it))
}

fn opt_strings<'a>(it: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(it.collect::<StringArray>())
}

fn ints(it: impl Iterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(it))
}

fn bools(it: impl Iterator<Item = bool>) -> ArrayRef {
    Arc::new(BooleanArray::from_iter(it.map(Some)))
}

fn opt_ints(it: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(it.collect::<Int64Array>())
}

/// `requests` rows as one batch with the [`requests_schema`].
pub fn requests_batch(run_id: &str, rows: &[RequestRow]) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> = vec![
        run_id_column(run_id, rows.len()),
        ints(rows.iter().map(|r| i64::from(r.request_index))),
        strings(rows.iter().map(|r| r.kind.as_str())),
        opt_strings(rows.iter().map(|r| r.check.as_deref())),
        ints(rows.iter().map(|r| i64::from(r.replica))),
        strings(rows.iter().map(|r| r.endpoint.as_str())),
        strings(rows.iter().map(|r| r.api.as_str())),
        strings(rows.iter().map(|r| r.model.as_str())),
        opt_strings(rows.iter().map(|r| r.canary.as_deref())),
        strings(rows.iter().map(|r| r.prompt_sha256.as_str())),
        ints(rows.iter().map(|r| to_i64(r.prompt_chars))),
        ints(rows.iter().map(|r| to_i64(r.prompt_tokens_target))),
        opt_ints(rows.iter().map(|r| r.prompt_tokens_calibrated.map(to_i64))),
        opt_ints(rows.iter().map(|r| r.max_tokens.map(i64::from))),
        opt_strings(rows.iter().map(|r| r.request_body.as_deref())),
        ints(rows.iter().map(|r| r.t_intended_ns)),
        opt_ints(rows.iter().map(|r| r.t_sent_ns)),
        opt_ints(rows.iter().map(|r| r.t_first_byte_ns)),
        ints(rows.iter().map(|r| r.t_done_ns)),
        opt_ints(rows.iter().map(|r| r.http_status.map(i64::from))),
        strings(rows.iter().map(|r| r.outcome.as_str())),
        opt_strings(rows.iter().map(|r| r.error.as_deref())),
        ints(rows.iter().map(|r| i64::from(r.events))),
        bools(rows.iter().map(|r| r.new_connection)),
        bools(rows.iter().map(|r| r.resent)),
        opt_ints(
            rows.iter()
                .map(|r| r.session.map(|s| i64::from(s.session_id))),
        ),
        opt_ints(rows.iter().map(|r| r.session.map(|s| i64::from(s.turn)))),
        opt_ints(
            rows.iter()
                .map(|r| r.session.and_then(|s| s.history_tokens).map(to_i64)),
        ),
        Arc::new(rows.iter().map(|r| r.ignore_eos).collect::<BooleanArray>()),
        opt_ints(rows.iter().map(|r| r.t_released_ns)),
    ];
    RecordBatch::try_new(requests_schema(), columns)
}

/// `events` rows as one batch with the [`events_schema`].
pub fn events_batch(run_id: &str, rows: &[EventRow]) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> = vec![
        run_id_column(run_id, rows.len()),
        ints(rows.iter().map(|r| i64::from(r.request_index))),
        ints(rows.iter().map(|r| i64::from(r.seq))),
        ints(rows.iter().map(|r| r.t_ns)),
        opt_strings(rows.iter().map(|r| r.event.as_deref())),
        strings(rows.iter().map(|r| r.data.as_str())),
        opt_strings(rows.iter().map(|r| r.parsed.content_delta.as_deref())),
        opt_strings(rows.iter().map(|r| r.parsed.reasoning_delta.as_deref())),
        opt_strings(rows.iter().map(|r| r.parsed.tool_call_delta.as_deref())),
        opt_strings(rows.iter().map(|r| r.parsed.finish_reason.as_deref())),
        opt_ints(rows.iter().map(|r| r.parsed.usage_prompt_tokens)),
        opt_ints(rows.iter().map(|r| r.parsed.usage_completion_tokens)),
        opt_ints(rows.iter().map(|r| r.parsed.usage_cached_tokens)),
        opt_strings(rows.iter().map(|r| r.parsed.stream_error.as_deref())),
        bools(rows.iter().map(|r| r.parsed.done)),
        opt_strings(rows.iter().map(|r| r.parsed.parse_error.as_deref())),
    ];
    RecordBatch::try_new(events_schema(), columns)
}

/// `scrapes` rows as one batch with the [`scrapes_schema`].
pub fn scrapes_batch(run_id: &str, rows: &[ScrapeRow]) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> = vec![
        run_id_column(run_id, rows.len()),
        ints(rows.iter().map(|r| i64::from(r.replica))),
        ints(rows.iter().map(|r| r.t_ns)),
        strings(rows.iter().map(|r| r.phase.as_str())),
        strings(rows.iter().map(|r| r.metric.as_str())),
        strings(rows.iter().map(|r| r.labels.as_str())),
        strings(rows.iter().map(|r| r.metric_type.as_str())),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.value))),
    ];
    RecordBatch::try_new(scrapes_schema(), columns)
}

/// One GPU's values in one telemetry reading.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TelemetryGpu {
    pub index: u32,
    pub uuid: Option<String>,
    pub model: Option<String>,
    pub host: Option<String>,
    /// Whether it belongs to the arm.
    pub arm_gpu: bool,
    /// One value per [`Field::ALL`], in that order; `None` where the source gives none.
    pub values: [Option<f64>; Field::ALL.len()],
    /// Fields the source reported as unavailable for it.
    pub unavailable: Vec<Field>,
    pub source_time: Option<String>,
}

impl TelemetryGpu {
    /// The value of `field`, if the reading has one.
    pub fn get(&self, field: Field) -> Option<f64> {
        let at = Field::ALL.iter().position(|f| *f == field)?;
        self.values[at]
    }

    /// Set the value of `field`.
    pub fn set(&mut self, field: Field, value: f64) {
        if let Some(at) = Field::ALL.iter().position(|f| *f == field) {
            self.values[at] = Some(value);
        }
    }
}

/// One `telemetry` row: a GPU's values in a reading, or a reading that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryRow {
    /// `dcgm`, `nvidia-smi` or `nvml`.
    pub source: &'static str,
    /// The exporter's URL, or the local host.
    pub endpoint: String,
    /// When the reading was received, ns since the run origin.
    pub t_ns: i64,
    pub phase: ScrapePhase,
    /// `Err(why)`: the reading failed.
    pub reading: Result<TelemetryGpu, String>,
}

/// Telemetry rows as a `telemetry` batch.
pub fn telemetry_batch(run_id: &str, rows: &[TelemetryRow]) -> Result<RecordBatch, ArrowError> {
    fn gpu(r: &TelemetryRow) -> Option<&TelemetryGpu> {
        r.reading.as_ref().ok()
    }
    let mut columns: Vec<ArrayRef> = vec![
        run_id_column(run_id, rows.len()),
        strings(rows.iter().map(|r| r.source)),
        strings(rows.iter().map(|r| r.endpoint.as_str())),
        ints(rows.iter().map(|r| r.t_ns)),
        strings(rows.iter().map(|r| r.phase.as_str())),
        opt_ints(rows.iter().map(|r| gpu(r).map(|g| i64::from(g.index)))),
        opt_strings(rows.iter().map(|r| gpu(r).and_then(|g| g.uuid.as_deref()))),
        opt_strings(rows.iter().map(|r| gpu(r).and_then(|g| g.model.as_deref()))),
        opt_strings(rows.iter().map(|r| gpu(r).and_then(|g| g.host.as_deref()))),
        Arc::new(
            rows.iter()
                .map(|r| gpu(r).map(|g| g.arm_gpu))
                .collect::<BooleanArray>(),
        ),
    ];
    for field in Field::ALL {
        let values = rows.iter().map(|r| gpu(r).and_then(|g| g.get(field)));
        columns.push(if field == Field::ClockEventReasons {
            // A bitmask: whole, so SQL can test its bits.
            opt_ints(values.map(|v| v.map(|v| v as i64)))
        } else {
            Arc::new(values.collect::<Float64Array>())
        });
    }
    let unavailable: Vec<Option<String>> = rows
        .iter()
        .map(|r| {
            gpu(r).filter(|g| !g.unavailable.is_empty()).map(|g| {
                let names: Vec<&str> = g.unavailable.iter().map(|f| f.as_str()).collect();
                names.join(",")
            })
        })
        .collect();
    columns.push(opt_strings(unavailable.iter().map(Option::as_deref)));
    columns.push(opt_strings(
        rows.iter()
            .map(|r| gpu(r).and_then(|g| g.source_time.as_deref())),
    ));
    columns.push(opt_strings(
        rows.iter()
            .map(|r| r.reading.as_ref().err().map(String::as_str)),
    ));
    RecordBatch::try_new(telemetry_schema(), columns)
}

/// The `prompt_sha256` column value of a prompt: lowercase hex SHA-256 of its UTF-8 text.
pub fn prompt_sha256(prompt: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(prompt.as_bytes()))
}

/// Saturating `u64` → `i64` (counts never approach 2^63).
fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;

    #[test]
    fn rows_from_owned_buffers_equal_rows_from_borrowed_bytes() {
        let cases: [(Option<&str>, &[u8]); 4] = [
            (
                None,
                br#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
            ),
            (
                Some("response.output_text.delta"),
                br#"{"type":"response.output_text.delta","delta":"x"}"#,
            ),
            (None, b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}"),
            (Some("error"), b"CUDA error: out of memory"),
        ];
        for (event, data) in cases {
            assert_eq!(
                EventRow::from_owned(7, 3, 99, event.map(str::to_owned), data.to_vec()),
                EventRow::from_raw(7, 3, 99, event, data),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn event_rows_become_a_batch_with_parsed_columns() {
        let rows = vec![
            EventRow::from_raw(
                3,
                0,
                100,
                None,
                br#"{"choices":[{"delta":{"content":"a"}}]}"#,
            ),
            EventRow::from_raw(3, 1, 200, None, b"[DONE]"),
            EventRow::from_raw(3, 2, 300, Some("x"), &[0xff]),
        ];
        let b = events_batch("r", &rows).unwrap();
        assert_eq!(b.num_rows(), 3);
        let content = b
            .column_by_name("content_delta")
            .unwrap()
            .as_string::<i32>();
        assert_eq!(content.value(0), "a");
        assert!(content.is_null(1));
        let done = b.column_by_name("done").unwrap().as_boolean();
        assert!(!done.value(0) && done.value(1));
        let data = b.column_by_name("data").unwrap().as_string::<i32>();
        assert_eq!(data.value(2), "\u{fffd}");
        assert!(!b.column_by_name("parse_error").unwrap().is_null(2));
        let t = b
            .column_by_name("t_ns")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert_eq!(t.values(), &[100, 200, 300]);
    }

    #[test]
    fn prompt_hash_is_lowercase_hex_sha256() {
        assert_eq!(
            prompt_sha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn empty_row_buffers_make_empty_batches() {
        assert_eq!(requests_batch("r", &[]).unwrap().num_rows(), 0);
        assert_eq!(events_batch("r", &[]).unwrap().num_rows(), 0);
        assert_eq!(scrapes_batch("r", &[]).unwrap().num_rows(), 0);
    }
}
