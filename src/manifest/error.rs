//! Errors from loading a workload manifest or run plan: every message names the file and,
//! for a bad field, its JSON path (`file: selection.concurrency[2]: expected a positive
//! integer, found -4`).

use std::fmt;
use std::path::PathBuf;

/// One problem with one field of a document, found while loading or validating it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON path of the field, e.g. `selection.concurrency[2]`; `document` for the whole file.
    pub field: String,
    /// What is wrong with it, e.g. `expected a positive integer, found -4`.
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why a workload manifest or run plan could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read at all.
    #[error("{}: cannot read: {cause}", file.display())]
    Read {
        file: PathBuf,
        cause: std::io::Error,
    },
    /// The file is not JSON.
    #[error("{}: invalid JSON at line {line}, column {column}: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The file is JSON but breaks the schema: one or more fields are wrong. Displayed as one
    /// `file: field: message` line per problem.
    #[error("{}", ProblemLines { file, problems })]
    Invalid {
        file: PathBuf,
        problems: Vec<Problem>,
    },
}

impl ManifestError {
    pub(crate) fn invalid(file: &std::path::Path, problems: Vec<Problem>) -> Self {
        ManifestError::Invalid {
            file: file.to_path_buf(),
            problems,
        }
    }

    pub(crate) fn field(
        file: &std::path::Path,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::invalid(file, vec![Problem::new(field, message)])
    }

    /// The file the error is about.
    pub fn file(&self) -> &std::path::Path {
        match self {
            ManifestError::Read { file, .. }
            | ManifestError::Syntax { file, .. }
            | ManifestError::Invalid { file, .. } => file,
        }
    }

    /// The field problems, empty for a read or syntax error.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ManifestError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

struct ProblemLines<'a> {
    file: &'a PathBuf,
    problems: &'a [Problem],
}

impl fmt::Display for ProblemLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {problem}", self.file.display())?;
        }
        Ok(())
    }
}
