//! A comparison the campaign's rules forbid, refused with its reason (the edge exits with
//! "refused" for it).

use std::fmt;

use serde::Serialize;

/// One field whose values differ between two artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldDifference {
    /// Run id of the artifact compared against the first one.
    pub run_id: String,
    /// Field name, e.g. `concurrency_per_replica`, `status`.
    pub field: String,
    /// Value in the first artifact.
    pub first: String,
    /// Value in this artifact.
    pub other: String,
}

impl fmt::Display for FieldDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} vs {}", self.field, self.first, self.other)
    }
}

/// Why a refusal happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RefusalKind {
    /// The artifacts are not matched (fingerprint, status or API differ, or too few).
    NotMatched,
    /// The headline comparison rule forbids putting these side by side.
    HeadlineRule,
    /// Screens compare only within the same screen.
    AcrossScreens,
    /// The baseline arm is not in the matched set.
    NoBaseline,
}

/// A refused comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    /// What was refused and why, for a reviewer.
    pub reason: String,
    /// The fields that differ, when the refusal is about differing artifacts.
    pub differences: Vec<FieldDifference>,
    /// The run plan rule the refusal enforces, quoted as the plan writes it.
    pub rule: Option<String>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused: {}", self.reason)?;
        if let Some(rule) = &self.rule {
            write!(f, "\nrule: \"{rule}\"")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}
