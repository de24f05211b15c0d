//! The one error of a run: nothing recorded because of what was given, or a run that could
//! not be carried out or finished.

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
