//! The one error of a run: nothing recorded because of what was given, or a run that could
//! not be carried out or finished.

use std::path::PathBuf;

use super::endpoint::EndpointError;
use crate::manifest::ManifestError;
use crate::workload::cells::CellError;

/// Why `run` arguments were refused. Each message is whole (the flag, the file or value,
/// what is wrong): the wrapped errors are not sources, so an error chain prints each once.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--manifest: {0}")]
    Manifest(ManifestError),
    #[error("--workloads: {0}")]
    Workloads(ManifestError),
    #[error(transparent)]
    Cell(#[from] CellError),
    #[error("--endpoint: {0}")]
    Endpoint(EndpointError),
    #[error("--metrics-url: {0}")]
    MetricsUrl(EndpointError),
    #[error("{flag} `{value}`: {reason}")]
    Flag {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("--out `{}`: {reason}", path.display())]
    Out { path: PathBuf, reason: String },
}

impl From<ManifestError> for ConfigError {
    fn from(e: ManifestError) -> Self {
        ConfigError::Manifest(e)
    }
}

pub(crate) fn flag(
    flag: &'static str,
    value: impl ToString,
    reason: impl Into<String>,
) -> ConfigError {
    ConfigError::Flag {
        flag,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Why a run could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Nothing was recorded: what was given cannot be run as asked (an endpoint unreachable
    /// or refusing the key, no model named, a context the fixed prompt already exceeds, an
    /// output folder that cannot be created).
    #[error("{0}")]
    BadInput(String),
    /// The run could not be carried out or finished (the runtime, the writer thread, the
    /// artifact's final write); what was recorded stays in its folder.
    #[error("{0}")]
    Failed(String),
}

impl CaptureError {
    /// Whether nothing was recorded because of what was given.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, CaptureError::BadInput(_))
    }
}
