//! Errors of the query layer: what went wrong, where, and what to do.

use std::path::PathBuf;

use datafusion::error::DataFusionError;

/// An error opening artifacts, building the session, or running a statement.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("--data {}: {problem}", dir.display())]
    DataDir { dir: PathBuf, problem: String },

    #[error("{}: {message}", dir.display())]
    Artifact { dir: PathBuf, message: String },

    #[error(
        "{dirs}: no artifact (a folder holding run.json) at or beneath it; record one with \
         `anvil-capture run` or `anvil campaign run`, or name the folder that holds them"
    )]
    NoArtifact { dirs: String },

    #[error(
        "run `{run_id}` appears twice: {} and {}; each artifact needs its own run id (pass one of them with --data)",
        first.display(),
        second.display()
    )]
    DuplicateRun {
        run_id: String,
        first: PathBuf,
        second: PathBuf,
    },

    #[error("{}: {path} is not valid UTF-8; move the artifact to a UTF-8 path", dir.display())]
    Path { dir: PathBuf, path: String },

    #[error("building table `{table}`: {source}")]
    Register {
        table: &'static str,
        #[source]
        source: DataFusionError,
    },

    #[error("queries/{file}: {}", datafusion_message(source))]
    View {
        file: &'static str,
        #[source]
        source: DataFusionError,
    },

    #[error("{message}{}", hint.as_deref().map(|h| format!("\nhint: {h}")).unwrap_or_default())]
    Sql {
        message: String,
        hint: Option<String>,
    },

    #[error(
        "refused: {what} writes or changes state, and anvil sql is read-only by default\nhint: pass --allow-write to run it"
    )]
    WriteRefused { what: String },

    #[error("{}", datafusion_message(.0))]
    DataFusion(#[from] DataFusionError),

    #[error("{context}: {source}")]
    Output {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// A DataFusion error; one raised reading Parquet or Arrow data (a table damaged after it was
/// validated, say a data page) says what to do.
fn datafusion_message(e: &DataFusionError) -> String {
    match reading_hint(e) {
        Some(hint) => format!("{e}\nhint: {hint}"),
        None => e.to_string(),
    }
}

/// What to do about an error raised while reading an artifact's Parquet data: the footer
/// checks made on opening passed, so a data page is damaged.
pub(crate) fn reading_hint(e: &DataFusionError) -> Option<String> {
    use datafusion::arrow::error::ArrowError;
    let reading = match e.find_root() {
        DataFusionError::ParquetError(_) | DataFusionError::IoError(_) => true,
        DataFusionError::ArrowError(a, _) => {
            matches!(**a, ArrowError::ParquetError(_) | ArrowError::IoError(..))
        }
        _ => false,
    };
    reading.then(|| {
        "an artifact table could not be read: `anvil validate` on the --data folder decodes \
         every page and names each damaged file; re-record that run, or run `anvil-capture \
         recover` on it if it was killed"
            .to_owned()
    })
}
