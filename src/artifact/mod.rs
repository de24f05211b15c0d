//! The artifact contract between capture and analysis (work in progress on this branch).

pub mod canary;

use std::path::Path;

/// What `anvil validate` reports for a valid artifact folder.
#[derive(Debug, Clone)]
pub struct ArtifactSummary {
    pub campaign_id: String,
    pub arm: String,
    pub cell_id: String,
    pub status: String,
    pub requests: u64,
    pub events: u64,
    pub scrapes: u64,
}

/// Check an artifact folder (run.json + the three Parquet tables) and summarise it.
pub fn validate_dir(dir: &Path) -> Result<ArtifactSummary, String> {
    Err(format!("{}: artifact validation is not built yet", dir.display()))
}
