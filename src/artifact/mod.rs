//! The artifact: the contract between capture and analysis.
//!
//! One artifact is one cell run of one arm, a folder `<out>/<campaign_id>/<arm>/<cell_id>/`
//! holding `run.json` ([`RunJson`], `anvil-serving.capture-run/v2`) and three Parquet tables
//! (`requests`, `events`, `scrapes`; columns in [`schema`], layout version
//! [`SCHEMA_VERSION`]). The recorder writes it while the run goes with [`ArtifactWriter`];
//! a killed run is made valid again with [`recover`]; [`validate_dir`] and [`open_table`]
//! check it before analysis. The analyst's view of the contract is `docs/artifact.md`.
//!
//! This module depends on arrow and parquet only (no DataFusion, no polars): the recorder
//! links it.
//!
//! How a recorder uses it (the hot path only timestamps bytes and sends them through a
//! channel; this runs on the writer thread):
//!
//! ```no_run
//! use anvil::artifact::{ArtifactWriter, EventRow, RunJson, Status};
//! # fn header() -> RunJson { unimplemented!() }
//! # fn received() -> Vec<(u32, u32, i64, Option<String>, Vec<u8>)> { Vec::new() }
//! # fn main() -> Result<(), anvil::artifact::ArtifactError> {
//! let run: RunJson = header(); // status is set to `running` by create
//! let dir = std::path::Path::new("out/campaign/K12/headline-4k-c8");
//! let mut writer = ArtifactWriter::create(dir, run.clone())?;
//! for (request_index, seq, t_ns, event_name, data) in received() {
//!     writer.push_event(EventRow::from_raw(request_index, seq, t_ns, event_name.as_deref(), &data))?;
//!     writer.flush_if_due()?; // also call it on channel receive timeouts
//! }
//! let mut done = run;
//! done.status = Status::Complete;
//! writer.finish(done)?; // merges parts, writes the final run.json
//! # Ok(()) }
//! ```

pub mod canary;
pub mod capacity;
mod columns;
pub mod error;
pub mod event;
pub mod files;
pub mod fingerprint;
pub mod gpus;
pub mod merge;
pub mod reader;
pub mod recover;
pub mod redact;
pub mod restoration;
pub mod rows;
pub mod run;
pub mod schema;
pub mod shard;
pub mod telemetry;
pub mod testing;
pub mod writer;

use std::path::{Path, PathBuf};

pub use error::ArtifactError;
pub use event::{ParsedEvent, parse_event};
pub use reader::{OpenedTable, open_table, read_pages, validate, validate_deep};
pub use recover::{RecoverReport, recover};
pub use redact::{REDACTED, Redactor};
pub use rows::{
    EventRow, RequestRow, ScrapePhase, ScrapeRow, SessionTurn, TelemetryGpu, TelemetryRow,
    prompt_sha256,
};
pub use run::{
    Api, Arm, ArmConfig, Arrivals, CacheHygiene, CacheReset, Calibration, CalibrationMethod, Clock,
    Counts, Endpoint, Outcome, PROMPT_CACHE_GROUPS, PrefixGroupsRecord, Repeat, RequestKind,
    RunJson, SCHEMA, Schedule, SessionsRecord, Status, Tool, Topology, TraceRecord, WARM_CACHE,
    Workload, is_secret_name, ramp_cell_id_suffix, redact_args, redact_url, repeat_folder,
};
pub use schema::{SCHEMA_VERSION, Table, events_schema, requests_schema, scrapes_schema};
pub use writer::{ArtifactWriter, WriterOptions};

/// File name of the run document inside an artifact folder.
pub const RUN_JSON: &str = "run.json";

/// The conventional folder of one artifact: `<out>/<campaign_id>/<arm>/<cell_id>`. Each of
/// the three must be a [`path_component`]; the error names which one and why.
pub fn artifact_dir(
    out: &Path,
    campaign_id: &str,
    arm: &str,
    cell_id: &str,
) -> Result<PathBuf, String> {
    for (what, value) in [
        ("campaign_id", campaign_id),
        ("arm", arm),
        ("cell id", cell_id),
    ] {
        path_component(value).map_err(|why| format!("{what} `{}` {why}", value.escape_debug()))?;
    }
    Ok(out.join(campaign_id).join(arm).join(cell_id))
}

/// The longest identifier that may become a folder name, in bytes.
pub const MAX_PATH_COMPONENT: usize = 128;

/// The one check of an identifier that becomes a path component (campaign id, arm, cell id):
/// it must name one folder inside the output directory, so no separators, no `.`/`..`, no
/// leading dot (hidden folders are not searched), no control characters, at most
/// [`MAX_PATH_COMPONENT`] bytes. `Err` says what is wrong (to follow the identifier's name).
pub fn path_component(value: &str) -> Result<(), &'static str> {
    if value.trim().is_empty() {
        return Err("is empty: it names a folder");
    }
    if value.contains(['/', '\\']) {
        return Err("contains a path separator (`/` or `\\`): it names one folder");
    }
    if value.starts_with('.') {
        return Err("starts with `.`: it names a folder, which must not be `.`, `..` or hidden");
    }
    if value.chars().any(char::is_control) {
        return Err("contains a control character: it names a folder");
    }
    if value.len() > MAX_PATH_COMPONENT {
        return Err("is longer than 128 bytes: it names a folder");
    }
    Ok(())
}

/// The files of a finished artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactPaths {
    pub dir: PathBuf,
    pub run_json: PathBuf,
    pub requests: PathBuf,
    pub events: PathBuf,
    pub scrapes: PathBuf,
}

impl ArtifactPaths {
    /// The paths inside artifact folder `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            run_json: dir.join(RUN_JSON),
            requests: dir.join(Table::Requests.file_name()),
            events: dir.join(Table::Events.file_name()),
            scrapes: dir.join(Table::Scrapes.file_name()),
        }
    }
}

/// What `anvil validate` reports for a valid artifact folder.
#[derive(Debug, Clone)]
pub struct ArtifactSummary {
    pub campaign_id: String,
    pub arm: String,
    pub cell_id: String,
    pub status: String,
    /// Rows of `requests` (all kinds).
    pub requests: u64,
    pub events: u64,
    pub scrapes: u64,
    pub run_id: String,
    pub workload_fingerprint: String,
    pub status_reason: Option<String>,
    /// Rows of `requests` with `kind = 'measured'`.
    pub requests_measured: u64,
    /// Measured requests with outcome `ok`.
    pub succeeded: u64,
}

/// Check an artifact folder (run.json + the three Parquet tables) and summarise it; the error
/// names the file, the field or column, and what to do. See [`validate`] for the typed error.
pub fn validate_dir(dir: &Path) -> Result<ArtifactSummary, String> {
    validate_deep(dir).map_err(|e| e.to_string())
}
