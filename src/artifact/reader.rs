//! Opening artifact tables and validating a whole artifact folder.
//!
//! [`open_table`] tells a truncated file (writer killed), a file that is not Parquet, a
//! Parquet file not written by anvil, and one of another schema version apart, and says what
//! to do in each case. [`validate`] checks `run.json` (schema, fields, fingerprint), each
//! table's metadata and columns, and that the tables agree with the counts in `run.json`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::ParquetMetaData;

use super::error::{ArtifactError, Result};
use super::run::{Counts, Outcome, RequestKind, RunJson, Status};
use super::schema::{
    META_RUN_ID, META_SCHEMA_VERSION, META_TABLE, READABLE_VERSIONS, SCHEMA_VERSION, Table,
};
use super::{ArtifactSummary, RUN_JSON};

const PARQUET_MAGIC: &[u8; 4] = b"PAR1";

/// An opened, checked artifact table.
pub struct OpenedTable {
    /// The file.
    pub path: PathBuf,
    /// Which table it holds (from its `anvil.table` metadata).
    pub table: Table,
    /// Row count from the footer.
    pub num_rows: u64,
    /// The `anvil.run_id` metadata, if present.
    pub run_id: Option<String>,
    builder: ParquetRecordBatchReaderBuilder<File>,
}

impl std::fmt::Debug for OpenedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedTable")
            .field("path", &self.path)
            .field("table", &self.table)
            .field("num_rows", &self.num_rows)
            .field("run_id", &self.run_id)
            .finish()
    }
}

impl OpenedTable {
    /// Whether the file belongs to run `run_id` ([`check_run`]).
    pub fn check_run(&self, run_id: &str) -> Result<()> {
        check_run(
            &self.path,
            self.builder.metadata(),
            self.run_id.as_deref(),
            run_id,
        )
    }

    /// A reader over all columns.
    pub fn reader(self) -> Result<ParquetRecordBatchReader> {
        let path = self.path;
        self.builder
            .build()
            .map_err(|source| ArtifactError::Parquet { path, source })
    }

    /// A reader over the named columns only (in the file's column order).
    pub fn reader_with_columns(self, columns: &[&str]) -> Result<ParquetRecordBatchReader> {
        let mut indices = Vec::with_capacity(columns.len());
        for name in columns {
            let idx = self
                .builder
                .schema()
                .index_of(name)
                .map_err(|_| ArtifactError::Column {
                    path: self.path.clone(),
                    column: (*name).to_owned(),
                    problem: "not in this table".to_owned(),
                })?;
            indices.push(idx);
        }
        let mask = ProjectionMask::roots(self.builder.parquet_schema(), indices);
        let path = self.path;
        self.builder
            .with_projection(mask)
            .build()
            .map_err(|source| ArtifactError::Parquet { path, source })
    }
}

/// Whether the table at `path` (footer `metadata`, `anvil.run_id` metadata `meta_run_id`)
/// belongs to run `run_id`: the metadata when present, and every row's `run_id` from the
/// footer statistics of the column (the rows of another run copied in would widen its
/// min/max). `Err` names the file.
pub fn check_run(
    path: &Path,
    metadata: &ParquetMetaData,
    meta_run_id: Option<&str>,
    run_id: &str,
) -> Result<()> {
    use parquet::file::statistics::Statistics;
    if let Some(id) = meta_run_id.filter(|id| *id != run_id) {
        return Err(ArtifactError::Inconsistent {
            path: path.to_owned(),
            problem: format!(
                "metadata `{META_RUN_ID}` is `{id}` but run.json `run_id` is `{run_id}`: files of different runs were mixed"
            ),
        });
    }
    for group in metadata.row_groups() {
        let Some(chunk) = group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == "run_id")
        else {
            continue;
        };
        let range = match chunk.statistics() {
            Some(Statistics::ByteArray(s)) => s
                .min_opt()
                .zip(s.max_opt())
                .map(|(a, b)| (a.data().to_vec(), b.data().to_vec())),
            _ => None,
        };
        match range {
            Some((min, max)) if min == run_id.as_bytes() && max == run_id.as_bytes() => {}
            Some((min, max)) => {
                return Err(ArtifactError::Inconsistent {
                    path: path.to_owned(),
                    problem: format!(
                        "column `run_id` holds `{}`..`{}` but run.json `run_id` is `{run_id}`: \
                         rows of different runs were mixed",
                        String::from_utf8_lossy(&min),
                        String::from_utf8_lossy(&max)
                    ),
                });
            }
            None => {
                return Err(ArtifactError::Column {
                    path: path.to_owned(),
                    column: "run_id".to_owned(),
                    problem: "has no statistics in the footer; anvil-capture writes them, so \
                              the file was rewritten by something else: re-record the run"
                        .to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// The artifact folder a table file belongs to (the parent of a `*.parts` folder for parts).
fn artifact_dir_of(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new("."));
    if parent.extension().is_some_and(|e| e == "parts") {
        parent.parent().unwrap_or(parent).to_owned()
    } else {
        parent.to_owned()
    }
}

/// Open an artifact table (a final `*.parquet` or a part file) and check that it is a
/// complete Parquet file written by anvil with [`SCHEMA_VERSION`] and the expected columns.
pub fn open_table(path: &Path) -> Result<OpenedTable> {
    let mut file = File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ArtifactError::Missing {
            path: path.to_owned(),
            hint: "an artifact table written by anvil-capture was expected here".to_owned(),
        },
        _ => ArtifactError::io(path, "cannot open", e),
    })?;
    let file_len = check_magic(&mut file, path)?;
    // The Arrow schema comes from the Parquet schema alone, not from the embedded
    // `ARROW:schema` flatbuffer: decoding a damaged one panics in arrow-ipc (found by the
    // fuzz target `artifact_reader`), and DataFusion skips it by default too.
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder =
        ParquetRecordBatchReaderBuilder::try_new_with_options(file, options).map_err(|e| {
            ArtifactError::TruncatedParquet {
                path: path.to_owned(),
                dir: artifact_dir_of(path),
                detail: e.to_string(),
            }
        })?;
    let facts = check_footer(path, builder.metadata(), builder.schema(), file_len)?;
    Ok(OpenedTable {
        path: path.to_owned(),
        table: facts.table,
        num_rows: facts.num_rows,
        run_id: facts.run_id,
        builder,
    })
}

/// What a table's footer says, once checked.
#[derive(Debug, Clone)]
pub struct TableFacts {
    pub table: Table,
    pub num_rows: u64,
    /// The `anvil.run_id` metadata, if present.
    pub run_id: Option<String>,
}

/// The checks of a table's footer, wherever its bytes are (a file, an object): every column
/// chunk inside the `file_len` bytes, the schema version, the table its metadata names (and
/// the one its file name names), and the columns.
pub fn check_footer(
    path: &Path,
    metadata: &ParquetMetaData,
    schema: &arrow_schema::SchemaRef,
    file_len: u64,
) -> Result<TableFacts> {
    check_chunks(path, metadata, file_len)?;
    let kv: BTreeMap<String, Option<String>> = metadata
        .file_metadata()
        .key_value_metadata()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect()
        })
        .unwrap_or_default();
    let version = kv.get(META_SCHEMA_VERSION).cloned().flatten();
    match version.as_deref() {
        None => {
            return Err(ArtifactError::NotAnvilTable {
                path: path.to_owned(),
                key: META_SCHEMA_VERSION,
                expected: SCHEMA_VERSION,
            });
        }
        Some(v) if !READABLE_VERSIONS.contains(&v) => {
            return Err(ArtifactError::TableMetadata {
                path: path.to_owned(),
                key: META_SCHEMA_VERSION,
                found: v.to_owned(),
                expected: SCHEMA_VERSION.to_owned(),
                hint: "this anvil reads anvil-artifact/2 and /3: read it with the anvil version that wrote it, or re-record the run",
            });
        }
        Some(_) => {}
    }
    let table_name = kv.get(META_TABLE).cloned().flatten().unwrap_or_default();
    let Some(table) = Table::ALL.into_iter().find(|t| t.name() == table_name) else {
        return Err(ArtifactError::TableMetadata {
            path: path.to_owned(),
            key: META_TABLE,
            found: table_name,
            expected: "requests, events, scrapes or telemetry".to_owned(),
            hint: "the file was not written by anvil-capture",
        });
    };
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(by_name) = Table::ALL.into_iter().find(|t| t.file_name() == file_name)
        && by_name != table
    {
        return Err(ArtifactError::TableMetadata {
            path: path.to_owned(),
            key: META_TABLE,
            found: table.name().to_owned(),
            expected: by_name.name().to_owned(),
            hint: "the file was renamed or copied into the wrong place",
        });
    }
    check_columns(path, table, schema)?;
    let num_rows = u64::try_from(metadata.file_metadata().num_rows()).unwrap_or(0);
    Ok(TableFacts {
        table,
        num_rows,
        run_id: kv.get(META_RUN_ID).cloned().flatten(),
    })
}

/// Check the magic bytes at both ends; the file's length.
fn check_magic(file: &mut File, path: &Path) -> Result<u64> {
    let len = file
        .metadata()
        .map_err(|e| ArtifactError::io(path, "cannot stat", e))?
        .len();
    let mut head = [0u8; 4];
    let read_head = file
        .read(&mut head)
        .map_err(|e| ArtifactError::io(path, "cannot read", e))?;
    if read_head == 0 {
        return Err(ArtifactError::TruncatedParquet {
            path: path.to_owned(),
            dir: artifact_dir_of(path),
            detail: "the file is empty".to_owned(),
        });
    }
    if read_head < 4 || &head != PARQUET_MAGIC {
        return Err(ArtifactError::NotParquet {
            path: path.to_owned(),
            detail: "it does not start with the `PAR1` magic bytes".to_owned(),
        });
    }
    let mut tail = [0u8; 4];
    let tail_ok = len >= 12
        && file.seek(SeekFrom::End(-4)).is_ok()
        && file.read_exact(&mut tail).is_ok()
        && &tail == PARQUET_MAGIC;
    if !tail_ok {
        return Err(ArtifactError::TruncatedParquet {
            path: path.to_owned(),
            dir: artifact_dir_of(path),
            detail: format!("{len} bytes, no closing `PAR1` magic"),
        });
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| ArtifactError::io(path, "cannot seek", e))?;
    Ok(len)
}

/// Every column chunk the footer describes must lie inside the file. The Parquet reader
/// trusts these numbers (a negative offset or length is an assertion failure there, a panic),
/// so a damaged footer is refused here, before any reader is built.
fn check_chunks(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
    file_len: u64,
) -> Result<()> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        if group.num_rows() < 0 {
            return Err(damaged(
                path,
                format!("row group {g} has {} rows", group.num_rows()),
            ));
        }
        for (c, chunk) in group.columns().iter().enumerate() {
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or_else(|| chunk.data_page_offset());
            let len = chunk.compressed_size();
            let inside = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(start, len)| start.checked_add(len))
                .is_some_and(|end| end <= file_len);
            if !inside {
                return Err(damaged(
                    path,
                    format!(
                        "row group {g} column {c} claims bytes {start}..+{len} of a {file_len}-byte file"
                    ),
                ));
            }
            check_instants(path, chunk)?;
            check_usage(path, chunk)?;
        }
    }
    Ok(())
}

/// A usage column's footer statistics must lie within 0..=[`crate::artifact::event::MAX_USAGE_TOKENS`]
/// (the parser refuses larger counts, so a larger one was written by something else; summed,
/// it would wrap the throughput silently).
fn check_usage(path: &Path, chunk: &parquet::file::metadata::ColumnChunkMetaData) -> Result<()> {
    use parquet::file::statistics::Statistics;
    let name = chunk.column_path().string();
    if !name.starts_with("usage_") {
        return Ok(());
    }
    let max = super::event::MAX_USAGE_TOKENS;
    if let Some(Statistics::Int64(stats)) = chunk.statistics() {
        for value in [stats.min_opt(), stats.max_opt()].into_iter().flatten() {
            if !(0..=max).contains(value) {
                return Err(ArtifactError::Column {
                    path: path.to_owned(),
                    column: name,
                    problem: format!(
                        "holds {value}, outside the 0..={max} tokens a usage count can be; the \
                         artifact was edited or damaged: re-record the run"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The largest magnitude a recorded instant (`t_*ns`, nanoseconds from the run's origin)
/// may have: 2^53 ns, 104 days, exact in a double and far from overflowing a difference.
pub const MAX_INSTANT_NS: i64 = 1 << 53;

/// An instant column's footer statistics must lie within ±[`MAX_INSTANT_NS`]: SQL
/// arithmetic on larger values wraps silently (DataFusion's Int64 `-` does not check).
fn check_instants(path: &Path, chunk: &parquet::file::metadata::ColumnChunkMetaData) -> Result<()> {
    use parquet::file::statistics::Statistics;
    let name = chunk.column_path().string();
    if !(name.starts_with("t_") && name.ends_with("ns")) {
        return Ok(());
    }
    let Some(Statistics::Int64(stats)) = chunk.statistics() else {
        return Err(ArtifactError::Column {
            path: path.to_owned(),
            column: name,
            problem: "has no Int64 statistics in the footer; anvil-capture writes them, so the \
                      file was rewritten by something else: re-record the run"
                .to_owned(),
        });
    };
    for value in [stats.min_opt(), stats.max_opt()].into_iter().flatten() {
        if value.unsigned_abs() > MAX_INSTANT_NS.unsigned_abs() {
            return Err(ArtifactError::Column {
                path: path.to_owned(),
                column: name,
                problem: format!(
                    "holds {value} ns, beyond the ±{MAX_INSTANT_NS} ns (104 days) an instant \
                     from the run's origin can be; the artifact was edited or damaged: \
                     re-record the run"
                ),
            });
        }
    }
    Ok(())
}

fn damaged(path: &Path, detail: String) -> ArtifactError {
    ArtifactError::NotParquet {
        path: path.to_owned(),
        detail: format!("its footer is damaged: {detail}"),
    }
}

fn check_columns(path: &Path, table: Table, found: &arrow_schema::SchemaRef) -> Result<()> {
    for c in table.columns() {
        match found.field_with_name(c.name) {
            // A column `/3` added, absent from a file written as `/2`: read as NULL.
            Err(_) if c.optional => {}
            Err(_) => {
                return Err(ArtifactError::Column {
                    path: path.to_owned(),
                    column: c.name.to_owned(),
                    problem: format!(
                        "missing; {SCHEMA_VERSION} requires it ({}, {})",
                        c.data_type, c.doc
                    ),
                });
            }
            Ok(f) if f.data_type() != &c.data_type => {
                return Err(ArtifactError::Column {
                    path: path.to_owned(),
                    column: c.name.to_owned(),
                    problem: format!(
                        "has type {}, {SCHEMA_VERSION} requires {}",
                        f.data_type(),
                        c.data_type
                    ),
                });
            }
            Ok(_) => {}
        }
    }
    for f in found.fields() {
        if !table.columns().iter().any(|c| c.name == f.name()) {
            return Err(ArtifactError::Column {
                path: path.to_owned(),
                column: f.name().clone(),
                problem: format!(
                    "not part of {SCHEMA_VERSION} table `{}`; the file was modified after recording",
                    table.name()
                ),
            });
        }
    }
    Ok(())
}

/// Request counts as `run.json` states them, computed from `requests` batches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestTally {
    pub measured: u64,
    pub warmup: u64,
    pub calibration: u64,
    /// Measured requests with outcome `ok`.
    pub succeeded: u64,
    /// Measured requests by non-ok outcome.
    pub failed: BTreeMap<Outcome, u64>,
    /// Sum of the `events` column.
    pub events: u64,
    /// Distinct run ids seen.
    pub run_ids: std::collections::BTreeSet<String>,
    /// Largest `t_done_ns`.
    pub max_t_done_ns: Option<i64>,
}

impl RequestTally {
    /// Add one `requests` batch; `path` names the file in messages.
    pub fn add(&mut self, batch: &RecordBatch, path: &Path) -> Result<()> {
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| ArtifactError::Column {
                    path: path.to_owned(),
                    column: name.to_owned(),
                    problem: "missing".to_owned(),
                })
        };
        let kind = col("kind")?.as_string::<i32>();
        let outcome = col("outcome")?.as_string::<i32>();
        let events = col("events")?.as_primitive::<Int64Type>();
        let run_id = col("run_id")?.as_string::<i32>();
        let t_done = col("t_done_ns")?.as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            let k = RequestKind::parse(kind.value(i)).ok_or_else(|| ArtifactError::Column {
                path: path.to_owned(),
                column: "kind".to_owned(),
                problem: format!("unknown value `{}` in row {i}", kind.value(i)),
            })?;
            let o = Outcome::parse(outcome.value(i)).ok_or_else(|| ArtifactError::Column {
                path: path.to_owned(),
                column: "outcome".to_owned(),
                problem: format!("unknown value `{}` in row {i}", outcome.value(i)),
            })?;
            match k {
                RequestKind::Measured => {
                    self.measured += 1;
                    if o == Outcome::Ok {
                        self.succeeded += 1;
                    } else {
                        *self.failed.entry(o).or_default() += 1;
                    }
                }
                RequestKind::Warmup => self.warmup += 1,
                RequestKind::Calibration => self.calibration += 1,
            }
            if !events.is_null(i) {
                self.events += u64::try_from(events.value(i)).unwrap_or(0);
            }
            if !t_done.is_null(i) {
                let t = t_done.value(i);
                self.max_t_done_ns = Some(self.max_t_done_ns.map_or(t, |m| m.max(t)));
            }
            if !self.run_ids.contains(run_id.value(i)) {
                self.run_ids.insert(run_id.value(i).to_owned());
            }
        }
        Ok(())
    }

    /// Copy the request counts into `counts` (events, scrapes and channel_full untouched).
    pub fn apply_to(&self, counts: &mut Counts) {
        counts.requests_measured = self.measured;
        counts.requests_warmup = self.warmup;
        counts.requests_calibration = self.calibration;
        counts.succeeded = self.succeeded;
        counts.failed = self.failed.clone();
    }
}

/// The request indices of the measured rows of a `requests` file.
pub fn measured_indices(path: &Path) -> Result<Vec<u32>> {
    let reader = open_table(path)?.reader_with_columns(&["request_index", "kind"])?;
    let mut out = Vec::new();
    for batch in contained(path, reader) {
        out.extend(measured_indices_of(&batch?));
    }
    Ok(out)
}

/// The request indices of the measured rows of a `requests` batch (one holding the
/// `request_index` and `kind` columns; none otherwise).
pub fn measured_indices_of(batch: &RecordBatch) -> Vec<u32> {
    use arrow_array::types::UInt32Type;
    let (Some(index), Some(kind)) = (
        batch.column_by_name("request_index"),
        batch.column_by_name("kind"),
    ) else {
        return Vec::new();
    };
    let kind = kind.as_string::<i32>();
    let measured = RequestKind::Measured.as_str();
    let rows = (0..batch.num_rows()).filter(|i| kind.value(*i) == measured);
    match index.data_type() {
        arrow_schema::DataType::UInt32 => {
            let index = index.as_primitive::<UInt32Type>();
            rows.map(|i| index.value(i)).collect()
        }
        _ => {
            let index = index.as_primitive::<Int64Type>();
            rows.map(|i| u32::try_from(index.value(i)).unwrap_or(u32::MAX))
                .collect()
        }
    }
}

/// Tally a whole `requests` file.
pub fn tally_requests(path: &Path) -> Result<RequestTally> {
    let reader = open_table(path)?.reader_with_columns(&[
        "run_id",
        "kind",
        "outcome",
        "events",
        "t_done_ns",
    ])?;
    let mut tally = RequestTally::default();
    for batch in contained(path, reader) {
        tally.add(&batch?, path)?;
    }
    Ok(tally)
}

/// The batches of `reader`, each decoded inside `catch_unwind`: the Parquet decoder asserts
/// on some damaged data pages (found by the fuzz target `artifact_reader`), and a damaged
/// file must be an error naming it, never a panic. After an error the iteration ends.
fn contained<'a>(
    path: &'a Path,
    mut reader: ParquetRecordBatchReader,
) -> impl Iterator<Item = Result<RecordBatch>> + 'a {
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next()));
        let item = match next {
            Ok(None) => None,
            Ok(Some(Ok(batch))) => Some(Ok(batch)),
            Ok(Some(Err(source))) => Some(Err(ArtifactError::Arrow {
                path: path.to_owned(),
                source,
            })),
            Err(panic) => Some(Err(ArtifactError::DamagedPages {
                path: path.to_owned(),
                detail: crate::panics::text(&panic)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            })),
        };
        done = !matches!(item, Some(Ok(_)));
        item
    })
}

/// Decode every page of an artifact table; its row count. What `anvil validate` adds to the
/// footer checks every reading command makes: a damaged data page is found here, named.
pub fn read_pages(path: &Path) -> Result<u64> {
    let reader = open_table(path)?.reader()?;
    let mut rows = 0u64;
    for batch in contained(path, reader) {
        rows += batch?.num_rows() as u64;
    }
    Ok(rows)
}

/// [`validate`], then decode every page of the events, scrapes and telemetry tables (requests are
/// decoded by the counts check already): `anvil validate`'s full check.
pub fn validate_deep(dir: &Path) -> Result<ArtifactSummary> {
    let summary = validate(dir)?;
    for table in [Table::Events, Table::Scrapes, Table::Telemetry] {
        let path = dir.join(table.file_name());
        // An artifact recorded before the telemetry table has none (`validate` said so).
        if path.exists() || !table.optional() {
            read_pages(&path)?;
        }
    }
    Ok(summary)
}

/// Validate an artifact folder: `run.json` (schema, fields, fingerprint, final status), the
/// three tables (complete Parquet, schema version, columns, run id), and the counts.
pub fn validate(dir: &Path) -> Result<ArtifactSummary> {
    let run_path = dir.join(RUN_JSON);
    let run = RunJson::read(&run_path)?;
    run.check(&run_path)?;

    let mut rows = BTreeMap::new();
    for table in Table::ALL {
        let path = dir.join(table.file_name());
        if !path.exists() && table.optional() && !dir.join(table.parts_dir_name()).exists() {
            // Recorded before the table existed.
            continue;
        }
        if !path.exists() {
            let parts = dir.join(table.parts_dir_name());
            let hint = if parts.exists() {
                format!(
                    "its parts are still in {}: run `anvil-capture recover {}`",
                    parts.display(),
                    dir.display()
                )
            } else {
                "every artifact has requests.parquet, events.parquet and scrapes.parquet (and, recorded since telemetry, telemetry.parquet)".to_owned()
            };
            return Err(ArtifactError::Missing { path, hint });
        }
        let opened = open_table(&path)?;
        opened.check_run(&run.run_id)?;
        rows.insert(table.name(), opened.num_rows);
    }

    let requests_path = dir.join(Table::Requests.file_name());
    let tally = tally_requests(&requests_path)?;
    let paths = Table::ALL.map(|t| dir.join(t.file_name()));
    check_counts(run, &run_path, &rows, &tally, &paths)
}

/// The counts `run.json` states against the tables: the requests tallied from
/// `requests.parquet`, the rows of each table (by name), and, for a complete run, every event
/// accounted to its request. `paths` (in [`Table::ALL`] order) and `run_path` name the files
/// in messages. The artifact's summary when everything agrees.
pub fn check_counts(
    run: RunJson,
    run_path: &Path,
    rows: &BTreeMap<&'static str, u64>,
    tally: &RequestTally,
    paths: &[PathBuf; 4],
) -> Result<ArtifactSummary> {
    let requests_path = paths[Table::Requests as usize].clone();
    if let Some(other) = tally.run_ids.iter().find(|id| **id != run.run_id) {
        return Err(ArtifactError::Inconsistent {
            path: requests_path,
            problem: format!(
                "column `run_id` holds `{other}` but run.json `run_id` is `{}`",
                run.run_id
            ),
        });
    }
    let c = &run.counts;
    let expect = |what: &str, stated: u64, found: u64, path: &Path| {
        if stated == found {
            Ok(())
        } else {
            Err(ArtifactError::Inconsistent {
                path: path.to_owned(),
                problem: format!(
                    "run.json counts.{what} is {stated} but the table has {found}; the artifact is damaged or was edited: re-record or re-run recover"
                ),
            })
        }
    };
    expect(
        "requests_measured",
        c.requests_measured,
        tally.measured,
        &requests_path,
    )?;
    expect(
        "requests_warmup",
        c.requests_warmup,
        tally.warmup,
        &requests_path,
    )?;
    expect(
        "requests_calibration",
        c.requests_calibration,
        tally.calibration,
        &requests_path,
    )?;
    expect("succeeded", c.succeeded, tally.succeeded, &requests_path)?;
    for o in Outcome::ALL.into_iter().filter(|o| *o != Outcome::Ok) {
        let stated = c.failed.get(&o).copied().unwrap_or(0);
        let found = tally.failed.get(&o).copied().unwrap_or(0);
        expect(
            &format!("failed.{}", o.as_str()),
            stated,
            found,
            &requests_path,
        )?;
    }
    if c.failed.contains_key(&Outcome::Ok) {
        return Err(ArtifactError::run_json(
            run_path,
            "counts.failed.ok",
            "`ok` is not a failure outcome",
        ));
    }
    let events_path = paths[Table::Events as usize].clone();
    let event_rows = rows.get("events").copied().unwrap_or(0);
    expect("events", c.events, event_rows, &events_path)?;
    let scrapes_path = paths[Table::Scrapes as usize].clone();
    expect(
        "scrapes",
        c.scrapes,
        rows.get("scrapes").copied().unwrap_or(0),
        &scrapes_path,
    )?;
    if let Some(stated) = c.telemetry {
        let path = &paths[Table::Telemetry as usize];
        let found = rows.get("telemetry").copied().unwrap_or(0);
        expect("telemetry", stated, found, path)?;
    }
    // A complete run has every event accounted to its request; an interrupted or failed one
    // may hold events of requests that were in flight when it stopped.
    if run.status == Status::Complete && tally.events != event_rows {
        return Err(ArtifactError::Inconsistent {
            path: events_path,
            problem: format!(
                "has {event_rows} rows but the `events` column of requests.parquet sums to {}; the artifact is damaged",
                tally.events
            ),
        });
    }

    Ok(ArtifactSummary {
        campaign_id: run.campaign_id,
        arm: run.arm.name,
        cell_id: run.cell_id,
        status: run.status.as_str().to_owned(),
        requests: rows.get("requests").copied().unwrap_or(0),
        events: event_rows,
        scrapes: rows.get("scrapes").copied().unwrap_or(0),
        run_id: run.run_id,
        workload_fingerprint: run.workload_fingerprint,
        status_reason: run.status_reason,
        requests_measured: tally.measured,
        succeeded: tally.succeeded,
    })
}

/// Read every row of a table into memory (small tables and tests only).
pub fn read_all(path: &Path) -> Result<Vec<RecordBatch>> {
    contained(path, open_table(path)?.reader()?).collect()
}
