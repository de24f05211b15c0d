//! Arrow schemas of the four artifact tables, with each column's type, unit and meaning.
//!
//! The column lists below are the contract the SQL in `queries/` is written against; the same
//! descriptions are in `docs/artifact.md` (a test checks that every column is documented
//! there). Every Parquet file carries [`SCHEMA_VERSION`] under the key-value metadata key
//! [`META_SCHEMA_VERSION`] and its table name under [`META_TABLE`]. All times are `Int64`
//! nanoseconds since the run's monotonic origin (`run.json` → `clock`); all integers are
//! `Int64` so SQL arithmetic never mixes signedness or overflows.

use std::sync::{Arc, OnceLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// Version of the table layout, stored in every Parquet file of an artifact.
pub const SCHEMA_VERSION: &str = "anvil-artifact/3";
/// Every layout the reader opens: this one, and `anvil-artifact/2`, which lacks the
/// [`Column::optional`] columns `/3` added (a query reads them as NULL there).
pub const READABLE_VERSIONS: [&str; 2] = ["anvil-artifact/2", SCHEMA_VERSION];
/// Parquet key-value metadata key holding [`SCHEMA_VERSION`].
pub const META_SCHEMA_VERSION: &str = "anvil.schema_version";
/// Parquet key-value metadata key holding the table name (`requests`, `events`, `scrapes`).
pub const META_TABLE: &str = "anvil.table";
/// Parquet key-value metadata key holding the run id (convenience for tools that read one
/// file without its `run.json`).
pub const META_RUN_ID: &str = "anvil.run_id";

/// One of the four tables of an artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// One row per request.
    Requests,
    /// One row per streamed SSE event.
    Events,
    /// One row per Prometheus sample.
    Scrapes,
    /// One row per GPU per telemetry reading (power, clocks, temperature, energy), and one
    /// per failed reading. Added in `anvil-artifact/3`: an artifact recorded before it lacks
    /// the file, which reads as an empty table ([`Table::optional`]).
    Telemetry,
}

impl Table {
    /// All tables, in the order they are written.
    pub const ALL: [Table; 4] = [
        Table::Requests,
        Table::Events,
        Table::Scrapes,
        Table::Telemetry,
    ];

    /// Whether an artifact may lack the table's file (one recorded before the table
    /// existed); it then reads as an empty table.
    pub fn optional(self) -> bool {
        self == Table::Telemetry
    }

    /// Table name (`requests`, …), also the `anvil.table` metadata value.
    pub fn name(self) -> &'static str {
        match self {
            Table::Requests => "requests",
            Table::Events => "events",
            Table::Scrapes => "scrapes",
            Table::Telemetry => "telemetry",
        }
    }

    /// Final file name in the artifact folder, e.g. `events.parquet`.
    pub fn file_name(self) -> &'static str {
        match self {
            Table::Requests => "requests.parquet",
            Table::Events => "events.parquet",
            Table::Scrapes => "scrapes.parquet",
            Table::Telemetry => "telemetry.parquet",
        }
    }

    /// Folder of part files written while the run goes, e.g. `events.parts`.
    pub fn parts_dir_name(self) -> &'static str {
        match self {
            Table::Requests => "requests.parts",
            Table::Events => "events.parts",
            Table::Scrapes => "scrapes.parts",
            Table::Telemetry => "telemetry.parts",
        }
    }

    /// The table's documented columns.
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Requests => REQUESTS_COLUMNS,
            Table::Events => EVENTS_COLUMNS,
            Table::Scrapes => SCRAPES_COLUMNS,
            Table::Telemetry => TELEMETRY_COLUMNS,
        }
    }

    /// The table's Arrow schema.
    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Requests => requests_schema(),
            Table::Events => events_schema(),
            Table::Scrapes => scrapes_schema(),
            Table::Telemetry => telemetry_schema(),
        }
    }
}

/// A documented column.
#[derive(Debug, Clone)]
pub struct Column {
    /// Column name.
    pub name: &'static str,
    /// Arrow type.
    pub data_type: DataType,
    /// Whether NULL may appear.
    pub nullable: bool,
    /// Unit (`ns`, `tokens`, `chars`, …) or `-`.
    pub unit: &'static str,
    /// What the column means.
    pub doc: &'static str,
    /// Added in `anvil-artifact/3`: a file may lack it (one written as `/2`); it is nullable
    /// and reads as NULL there.
    pub optional: bool,
}

const fn col(
    name: &'static str,
    data_type: DataType,
    nullable: bool,
    unit: &'static str,
    doc: &'static str,
) -> Column {
    Column {
        name,
        data_type,
        nullable,
        unit,
        doc,
        optional: false,
    }
}

/// A nullable column added in `anvil-artifact/3`, which a `/2` file lacks.
const fn col3(
    name: &'static str,
    data_type: DataType,
    unit: &'static str,
    doc: &'static str,
) -> Column {
    let mut c = col(name, data_type, true, unit, doc);
    c.optional = true;
    c
}

use DataType::{Boolean, Float64, Int64, Utf8};

/// The request a row belongs to, described as `doc`.
const fn request_index(doc: &'static str) -> Column {
    col("request_index", Int64, false, "-", doc)
}

/// The first column of every table: the run it belongs to.
const RUN_ID: Column = col("run_id", Utf8, false, "-", "Run id (run.json `run_id`).");

/// Columns of `requests.parquet`: one row per request, written when the request ends.
pub static REQUESTS_COLUMNS: &[Column] = &[
    RUN_ID,
    request_index(
        "0-based index of the request within the run, unique across kinds; joins `events.request_index`.",
    ),
    col(
        "kind",
        Utf8,
        false,
        "-",
        "`measured`, `warmup` or `calibration`; only `measured` rows enter statistics.",
    ),
    col(
        "check",
        Utf8,
        true,
        "-",
        "Functional check this request belongs to (`coding`, `structured_json`, `tools` or `responses`), NULL for performance requests.",
    ),
    col(
        "replica",
        Int64,
        false,
        "-",
        "Replica index (run.json `topology.endpoints[replica]`).",
    ),
    col("endpoint", Utf8, false, "-", "URL the request was sent to."),
    col(
        "api",
        Utf8,
        false,
        "-",
        "`chat`, `completions` or `responses`.",
    ),
    col("model", Utf8, false, "-", "Model name sent in the request."),
    col(
        "canary",
        Utf8,
        true,
        "-",
        "The canary (`ANV-` + 12 hex) the reply must echo; NULL when the cell has no canaries.",
    ),
    col(
        "prompt_sha256",
        Utf8,
        false,
        "-",
        "Lowercase hex SHA-256 of the prompt text (the user message or the completion prompt).",
    ),
    col(
        "prompt_chars",
        Int64,
        false,
        "chars",
        "Prompt length in Unicode scalar values.",
    ),
    col(
        "prompt_tokens_target",
        Int64,
        false,
        "tokens",
        "Prompt token target of the cell.",
    ),
    col(
        "prompt_tokens_calibrated",
        Int64,
        true,
        "tokens",
        "The client's estimate of this prompt's tokens from calibration; the server's count is `events.usage_prompt_tokens`.",
    ),
    col(
        "max_tokens",
        Int64,
        true,
        "tokens",
        "Token ceiling sent (`max_tokens` / `max_output_tokens`); NULL if none was sent.",
    ),
    col(
        "request_body",
        Utf8,
        true,
        "-",
        "The exact JSON body sent; NULL if the recorder was told not to keep bodies.",
    ),
    col(
        "t_intended_ns",
        Int64,
        false,
        "ns",
        "When the schedule meant the request to start. `t_sent_ns - t_intended_ns` is client-side queueing.",
    ),
    col(
        "t_sent_ns",
        Int64,
        true,
        "ns",
        "When the request bytes were written to the socket: the request start of TTFT and E2E. NULL if never sent (connect failed).",
    ),
    col(
        "t_first_byte_ns",
        Int64,
        true,
        "ns",
        "When the first response bytes (status line) arrived: the kernel's receive time of the first read; NULL if none.",
    ),
    col(
        "t_done_ns",
        Int64,
        false,
        "ns",
        "When the request ended: stream completion (last byte), error or cancellation.",
    ),
    col(
        "http_status",
        Int64,
        true,
        "-",
        "HTTP status code; NULL if no response head arrived.",
    ),
    col(
        "outcome",
        Utf8,
        false,
        "-",
        "`ok`, `http_error`, `timeout_connect`, `connect_error`, `timeout_first_byte`, `timeout_idle`, `timeout_total`, `disconnected`, `protocol_error`, `cancelled`, `aborted` (the stream ended but its finish reason says the server did not complete the generation: `abort`, `error`, a Responses status `failed` or `cancelled`) or `stream_error` (the server reported an error inside the stream; its message is in `error`).",
    ),
    col(
        "error",
        Utf8,
        true,
        "-",
        "Error text for non-ok outcomes, including the server's error body; NULL when ok.",
    ),
    col(
        "events",
        Int64,
        false,
        "events",
        "Number of rows this request has in `events`.",
    ),
    col(
        "new_connection",
        Boolean,
        false,
        "-",
        "Whether the request opened a TCP connection (its send then waited for the connect); false when it went on a kept connection.",
    ),
    col(
        "resent",
        Boolean,
        false,
        "-",
        "True when the request was sent a second time, on a fresh connection, because the first attempt provably never reached the server: the kept connection had been closed by the server before any request byte was written, or the server's close (its FIN) came before any response byte and a reset then answered the request's bytes (its socket was already closed when they arrived). Never set for a failure the server could have seen: a bare reset, which an abortive close after reading also gives, stays a failure.",
    ),
    col3(
        "session_id",
        Int64,
        "-",
        "The session a request of a session workload belongs to (0-based within the run; `run.json` → `workload.sessions`); NULL outside sessions. (anvil-artifact/3)",
    ),
    col3(
        "turn",
        Int64,
        "-",
        "0-based turn of the request within its session: turn k carries the session's k earlier user messages and the assistant's actual replies to them; NULL outside sessions. (anvil-artifact/3)",
    ),
    col3(
        "history_tokens",
        Int64,
        "tokens",
        "Tokens of conversation the turn carries before its own new message: the previous turn's usage prompt tokens plus completion tokens (the chat template's few framing tokens of the reply aside; its reasoning tokens counted even when the history leaves the reasoning out); 0 for a first turn; NULL outside sessions, or when the previous turn's stream reported no usage. (anvil-artifact/3)",
    ),
    col3(
        "ignore_eos",
        Boolean,
        "-",
        "Whether the body asked the server to generate all of `max_tokens` (`ignore_eos`: a trace row's reply length); NULL for a request whose body was never built and in `/2` artifacts. (anvil-artifact/3)",
    ),
    col3(
        "t_released_ns",
        Int64,
        "ns",
        "When a free worker took the request off the schedule (the dispatcher had released it at `t_intended_ns` or, in a closed loop and a session's later turns, it was due then): `t_released_ns - t_intended_ns` is what the in-flight cap held it back, `t_sent_ns - t_released_ns` the client's own lateness in sending it (the connect included). NULL when no worker took it up (never released) and in `/2` artifacts. (anvil-artifact/3)",
    ),
];

/// Columns of `events.parquet`: one row per SSE event, in arrival order per request.
pub static EVENTS_COLUMNS: &[Column] = &[
    RUN_ID,
    request_index("Request the event belongs to (`requests.request_index`)."),
    col(
        "seq",
        Int64,
        false,
        "-",
        "0-based position of the event within its response; every event counts, `[DONE]` included.",
    ),
    col(
        "t_ns",
        Int64,
        false,
        "ns",
        "When the event's bytes arrived: the kernel's receive time of the newest TCP segment read when the client framed it (never before its own last byte).",
    ),
    col(
        "event",
        Utf8,
        true,
        "-",
        "SSE `event:` name (e.g. `response.output_text.delta`); NULL when the event had none.",
    ),
    col(
        "data",
        Utf8,
        false,
        "-",
        "The raw SSE `data:` payload exactly as received (multi-line data joined with `\\n`; invalid UTF-8 replaced by U+FFFD and flagged in `parse_error`); re-parse it to derive new columns.",
    ),
    col(
        "content_delta",
        Utf8,
        true,
        "-",
        "Output text in this event (`choices[0].delta.content`, `choices[0].text`, `response.output_text.delta`); may be empty; NULL when absent.",
    ),
    col(
        "reasoning_delta",
        Utf8,
        true,
        "-",
        "Reasoning text (`delta.reasoning_content` / `delta.reasoning`, Responses reasoning deltas); does not count for TTFT.",
    ),
    col(
        "tool_call_delta",
        Utf8,
        true,
        "-",
        "Tool-call fragment as compact JSON (`delta.tool_calls`, or the Responses function-call event).",
    ),
    col(
        "finish_reason",
        Utf8,
        true,
        "-",
        "`choices[0].finish_reason` (`stop`, `length`, `tool_calls`, …) or the Responses final status.",
    ),
    col(
        "usage_prompt_tokens",
        Int64,
        true,
        "tokens",
        "Server-reported prompt tokens (`usage.prompt_tokens` / `usage.input_tokens`), on the event that carries usage.",
    ),
    col(
        "usage_completion_tokens",
        Int64,
        true,
        "tokens",
        "Server-reported completion tokens (`usage.completion_tokens` / `usage.output_tokens`).",
    ),
    col(
        "usage_cached_tokens",
        Int64,
        true,
        "tokens",
        "Server-reported prompt tokens served from cache (`prompt_tokens_details.cached_tokens` / `input_tokens_details.cached_tokens`).",
    ),
    col(
        "stream_error",
        Utf8,
        true,
        "-",
        "Error reported inside the stream (`error.message` of an error chunk, Responses `error` / `response.failed`).",
    ),
    col(
        "done",
        Boolean,
        false,
        "-",
        "True for the `[DONE]` sentinel.",
    ),
    col(
        "parse_error",
        Utf8,
        true,
        "-",
        "Why `data` could not be parsed (invalid JSON, not an object, invalid UTF-8); NULL when it parsed.",
    ),
];

/// Columns of `scrapes.parquet`: one row per Prometheus sample.
pub static SCRAPES_COLUMNS: &[Column] = &[
    RUN_ID,
    col(
        "replica",
        Int64,
        false,
        "-",
        "Replica whose `/metrics` was scraped.",
    ),
    col(
        "t_ns",
        Int64,
        false,
        "ns",
        "When the scrape response was received.",
    ),
    col(
        "phase",
        Utf8,
        false,
        "-",
        "`before` (prior to the first request), `during` or `after` (after the last request ended).",
    ),
    col(
        "metric",
        Utf8,
        false,
        "-",
        "Metric name as exposed, with any `_total`/`_bucket` suffix.",
    ),
    col(
        "labels",
        Utf8,
        false,
        "-",
        "Labels as canonical text `k1=\"v1\",k2=\"v2\"`, keys sorted; empty string when none.",
    ),
    col(
        "metric_type",
        Utf8,
        false,
        "-",
        "The family's `# TYPE`: `counter`, `gauge`, `histogram`, `summary`, `untyped`, ..., or '' when the exposition gave none. Counters (and histogram/summary `_count`, `_bucket`) never decrease: a decrease is a restart.",
    ),
    col("value", Float64, false, "-", "Sample value."),
];

/// A telemetry value column of `field`, in its unit.
const fn telemetry_value(name: &'static str, unit: &'static str, doc: &'static str) -> Column {
    col3(name, Float64, unit, doc)
}

/// Columns of `telemetry.parquet`: one row per GPU per reading of a telemetry source (the
/// GPU's fields NULL where the source does not give them), and one row per failed reading
/// (`gpu` NULL, `error` set): a gap the figures over it call partial.
pub static TELEMETRY_COLUMNS: &[Column] = &[
    RUN_ID,
    col(
        "source",
        Utf8,
        false,
        "-",
        "What was read: `dcgm` (a DCGM exporter's `/metrics`), `nvidia-smi` or `nvml`.",
    ),
    col(
        "endpoint",
        Utf8,
        false,
        "-",
        "The exporter's URL, or the host a local source (`nvidia-smi`, `nvml`) ran on.",
    ),
    col(
        "t_ns",
        Int64,
        false,
        "ns",
        "When the reading was received, on the run's clock (a remote source's values may be up to its update interval older).",
    ),
    col(
        "phase",
        Utf8,
        false,
        "-",
        "`before` (prior to the first request: idle), `during` or `after` (after the last request ended).",
    ),
    col3(
        "gpu",
        Int64,
        "-",
        "The GPU's index as the source numbers it; NULL on a failed reading.",
    ),
    col3(
        "uuid",
        Utf8,
        "-",
        "The GPU's UUID (`GPU-…`), where the source gives it.",
    ),
    col3(
        "model",
        Utf8,
        "-",
        "The GPU's model name (DCGM `modelName`, nvidia-smi `name`).",
    ),
    col3(
        "host",
        Utf8,
        "-",
        "The GPU's host (DCGM `Hostname`; a local source's host).",
    ),
    col3(
        "arm_gpu",
        Boolean,
        "-",
        "Whether the GPU belongs to the arm (declared, or every GPU of a local source when none is declared); the node's other GPUs are recorded and not counted.",
    ),
    telemetry_value("power_w", "W", "Power draw."),
    telemetry_value(
        "energy_mj",
        "mJ",
        "Energy consumed since the driver loaded (a counter: a fall is a reset).",
    ),
    telemetry_value("sm_clock_mhz", "MHz", "SM clock."),
    telemetry_value("mem_clock_mhz", "MHz", "Memory clock."),
    telemetry_value("max_sm_clock_mhz", "MHz", "The SM clock's maximum."),
    telemetry_value("gpu_temp_c", "°C", "GPU temperature."),
    telemetry_value("mem_temp_c", "°C", "Memory temperature."),
    telemetry_value("gpu_util_pct", "%", "GPU utilisation."),
    telemetry_value("fb_used_mib", "MiB", "Framebuffer memory used."),
    telemetry_value("power_limit_w", "W", "The enforced power limit."),
    telemetry_value(
        "slowdown_temp_c",
        "°C",
        "The temperature at which the GPU slows down.",
    ),
    col3(
        "clock_event_reasons",
        Int64,
        "-",
        "NVML's clock-event (throttle) reasons bitmask: 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake, 0x1 idle.",
    ),
    telemetry_value(
        "power_violation_ns",
        "ns",
        "Time throttled by the power limit so far (a counter).",
    ),
    telemetry_value(
        "thermal_violation_ns",
        "ns",
        "Time throttled by temperature so far (a counter).",
    ),
    col3(
        "unavailable",
        Utf8,
        "-",
        "Fields the source reported as unavailable for this GPU (`[N/A]`, `[Not Supported]`), comma-separated; NULL when none.",
    ),
    col3(
        "source_time",
        Utf8,
        "-",
        "The source's own time stamp as it wrote it, where it gives one.",
    ),
    col3(
        "error",
        Utf8,
        "-",
        "Why the reading failed (no answer, HTTP status, unreadable text); NULL on a GPU's row.",
    ),
];

fn build_schema(columns: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(c.name, c.data_type.clone(), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

/// Schema of `requests.parquet` (see [`REQUESTS_COLUMNS`]).
pub fn requests_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| build_schema(REQUESTS_COLUMNS)).clone()
}

/// Schema of `events.parquet` (see [`EVENTS_COLUMNS`]).
pub fn events_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| build_schema(EVENTS_COLUMNS)).clone()
}

/// Schema of `scrapes.parquet` (see [`SCRAPES_COLUMNS`]).
pub fn scrapes_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| build_schema(SCRAPES_COLUMNS)).clone()
}

/// Schema of `telemetry.parquet` (see [`TELEMETRY_COLUMNS`]).
pub fn telemetry_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| build_schema(TELEMETRY_COLUMNS)).clone()
}

/// Canonical label text: `k="v"` pairs sorted by key, joined by `,`, with `\`, `"` and
/// newline escaped as in the Prometheus text format.
pub fn canonical_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut pairs: Vec<(&str, &str)> = labels.into_iter().collect();
    pairs.sort();
    let mut out = String::new();
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        for ch in v.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the contract: changing a column list must come with a new SCHEMA_VERSION.
    #[test]
    fn schema_version_and_columns_are_pinned() {
        assert_eq!(SCHEMA_VERSION, "anvil-artifact/3");
        let names = |t: Table| {
            t.schema()
                .fields()
                .iter()
                .map(|f| {
                    format!(
                        "{}:{}{}",
                        f.name(),
                        f.data_type(),
                        if f.is_nullable() { "?" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            names(Table::Requests),
            "run_id:Utf8 request_index:Int64 kind:Utf8 check:Utf8? replica:Int64 endpoint:Utf8 \
             api:Utf8 model:Utf8 canary:Utf8? prompt_sha256:Utf8 prompt_chars:Int64 \
             prompt_tokens_target:Int64 prompt_tokens_calibrated:Int64? max_tokens:Int64? \
             request_body:Utf8? t_intended_ns:Int64 t_sent_ns:Int64? t_first_byte_ns:Int64? \
             t_done_ns:Int64 http_status:Int64? outcome:Utf8 error:Utf8? events:Int64 \
             new_connection:Boolean resent:Boolean session_id:Int64? turn:Int64? \
             history_tokens:Int64? ignore_eos:Boolean? t_released_ns:Int64?"
        );
        assert_eq!(
            names(Table::Events),
            "run_id:Utf8 request_index:Int64 seq:Int64 t_ns:Int64 event:Utf8? data:Utf8 \
             content_delta:Utf8? reasoning_delta:Utf8? tool_call_delta:Utf8? finish_reason:Utf8? \
             usage_prompt_tokens:Int64? usage_completion_tokens:Int64? usage_cached_tokens:Int64? \
             stream_error:Utf8? done:Boolean parse_error:Utf8?"
        );
        assert_eq!(
            names(Table::Scrapes),
            "run_id:Utf8 replica:Int64 t_ns:Int64 phase:Utf8 metric:Utf8 labels:Utf8 metric_type:Utf8 \
             value:Float64"
        );
    }

    #[test]
    fn every_column_is_documented_in_docs_artifact_md() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/artifact.md"))
            .expect("docs/artifact.md exists");
        assert!(doc.contains(SCHEMA_VERSION));
        for table in Table::ALL {
            for c in table.columns() {
                assert!(
                    doc.contains(&format!("| `{}` |", c.name)),
                    "docs/artifact.md lacks a row for {}.{}",
                    table.name(),
                    c.name
                );
            }
        }
    }

    #[test]
    fn labels_are_sorted_and_escaped() {
        assert_eq!(
            canonical_labels([("model", "q\"x"), ("engine", "0")]),
            r#"engine="0",model="q\"x""#
        );
        assert_eq!(canonical_labels([]), "");
    }
}
