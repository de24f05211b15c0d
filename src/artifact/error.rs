//! Errors of the artifact layer: every message names the file (and field or column) and says
//! what to do about it, so `anvil validate` and `anvil-capture recover` can print them as is.

use std::path::PathBuf;

/// Anything that can go wrong writing, reading, validating or recovering an artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// A file system operation failed.
    #[error("{}: {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        /// What was being done, e.g. "cannot create directory".
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// A required file of the artifact is absent.
    #[error("{}: missing; {hint}", path.display())]
    Missing { path: PathBuf, hint: String },

    /// The file does not start with the Parquet magic bytes.
    #[error(
        "{}: not a Parquet file ({detail}); an artifact table must be written by anvil-capture",
        path.display()
    )]
    NotParquet { path: PathBuf, detail: String },

    /// The file starts like Parquet but has no readable footer: the writer was killed mid-file.
    #[error(
        "{}: not a complete Parquet file (no footer: {detail}); if this run was killed, run `anvil-capture recover {}`",
        path.display(),
        dir.display()
    )]
    TruncatedParquet {
        path: PathBuf,
        /// The artifact folder to pass to `recover`.
        dir: PathBuf,
        detail: String,
    },

    /// The Parquet file lacks the `anvil.schema_version` key: it was not written by anvil.
    #[error(
        "{}: not an anvil artifact table: Parquet key-value metadata `{key}` is missing (expected `{expected}`); write artifacts with anvil-capture",
        path.display()
    )]
    NotAnvilTable {
        path: PathBuf,
        key: &'static str,
        expected: &'static str,
    },

    /// The Parquet file was written for another artifact schema version or another table.
    #[error(
        "{}: metadata `{key}` is `{found}`, expected `{expected}`; {hint}",
        path.display()
    )]
    TableMetadata {
        path: PathBuf,
        key: &'static str,
        found: String,
        expected: String,
        hint: &'static str,
    },

    /// A column is missing, has the wrong type, or is not part of the contract.
    #[error("{}: column `{column}`: {problem}", path.display())]
    Column {
        path: PathBuf,
        column: String,
        problem: String,
    },

    /// `run.json` is malformed, has an unknown schema, or fails a consistency check.
    #[error("{}: field `{field}`: {problem}", path.display())]
    RunJson {
        path: PathBuf,
        field: String,
        problem: String,
    },

    /// The stored workload fingerprint does not match the workload section.
    #[error(
        "{}: field `workload_fingerprint` is `{stored}` but the `workload` section hashes to `{computed}`; the workload was edited after recording or the file is damaged: re-record the cell",
        path.display()
    )]
    Fingerprint {
        path: PathBuf,
        stored: String,
        computed: String,
    },

    /// A table's content disagrees with `run.json` (counts, run id).
    #[error("{}: {problem}", path.display())]
    Inconsistent { path: PathBuf, problem: String },

    /// A batch handed to the writer does not match the table's schema.
    #[error("{table} batch does not match the artifact schema: {problem}")]
    BatchSchema {
        table: &'static str,
        problem: String,
    },

    /// The Parquet or Arrow library reported an error for this file.
    #[error("{}: {source}", path.display())]
    Parquet {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },

    /// The Parquet decoder stopped on this file's data pages (a panic inside it, contained).
    #[error(
        "{}: its data pages are damaged (the Parquet decoder stopped on them: {detail}); re-record the run",
        path.display()
    )]
    DamagedPages { path: PathBuf, detail: String },

    /// An Arrow error while building or reading batches of this file.
    #[error("{}: {source}", path.display())]
    Arrow {
        path: PathBuf,
        #[source]
        source: arrow_schema::ArrowError,
    },

    /// Another live process holds the artifact's writer lock.
    #[error(
        "{}: a recorder is still writing this artifact ({holder}); stop it first, or wait for it to finish",
        path.display()
    )]
    Locked { path: PathBuf, holder: String },

    /// `recover` found nothing it could turn into an artifact.
    #[error("{}: cannot recover: {problem}", path.display())]
    Unrecoverable { path: PathBuf, problem: String },
}

impl ArtifactError {
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        action: &'static str,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            path: path.into(),
            action,
            source,
        }
    }

    pub(crate) fn run_json(
        path: impl Into<PathBuf>,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Self::RunJson {
            path: path.into(),
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// Result alias of the artifact layer.
pub type Result<T, E = ArtifactError> = std::result::Result<T, E>;
