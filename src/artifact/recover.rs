//! The recovery of a killed run: whatever complete parts it left merged into a valid
//! artifact marked `interrupted`, its counts recomputed from the tables.

use std::path::{Path, PathBuf};

use super::RUN_JSON;
use super::error::{ArtifactError, Result};
use super::files::{default_compression, release_lock, take_lock, write_run_json};
use super::merge::{MergeOutcome, merge_parts};
use super::run::{Counts, RunJson, Status, format_utc_ns};
use super::schema::Table;

/// What [`recover`] did.
#[derive(Debug, Clone)]
pub struct RecoverReport {
    /// The artifact folder.
    pub dir: PathBuf,
    /// Status found in `run.json` before recovery.
    pub status_before: Status,
    /// Status after recovery (`interrupted` unless the run had already finished).
    pub status_after: Status,
    /// Per table: parts merged, rows, skipped parts.
    pub tables: Vec<(Table, MergeOutcome)>,
    /// Human-readable notes (skipped parts, what was left alone).
    pub notes: Vec<String>,
}

impl RecoverReport {
    /// Rows recovered in `table`.
    pub fn rows(&self, table: Table) -> u64 {
        self.tables
            .iter()
            .find(|(t, _)| *t == table)
            .map_or(0, |(_, m)| m.rows)
    }
}

/// Turn what a killed recorder left in `dir` into a valid artifact marked `interrupted`:
/// merge every complete part of each table (skipping incomplete ones with a note), recompute
/// the counts from the tables, and rewrite `run.json`. A run that already finished is left
/// as it is (only stray parts are cleaned up).
pub fn recover(dir: &Path) -> Result<RecoverReport> {
    let run_path = dir.join(RUN_JSON);
    let mut run = RunJson::read(&run_path).map_err(|e| match e {
        ArtifactError::Missing { path, .. } => ArtifactError::Unrecoverable {
            path,
            problem: "no run.json: this folder was not started by anvil-capture, or the run died before writing anything".to_owned(),
        },
        other => other,
    })?;
    let lock = take_lock(dir)?;
    let status_before = run.status;
    let mut report = RecoverReport {
        dir: dir.to_owned(),
        status_before,
        status_after: status_before,
        tables: Vec::new(),
        notes: Vec::new(),
    };
    let mut max_t: Option<i64> = None;
    for table in Table::ALL {
        let merged = merge_parts(dir, table, &run.run_id, default_compression(), true)?;
        report.notes.extend(merged.skipped.iter().cloned());
        if let Some(m) = merged.max_t_ns {
            max_t = Some(max_t.map_or(m, |x| x.max(m)));
        }
        report.tables.push((table, merged));
    }
    if status_before != Status::Running {
        report.notes.push(format!(
            "run.json already has status `{}`: left unchanged",
            status_before.as_str()
        ));
        release_lock(dir, lock)?;
        return Ok(report);
    }

    let requests_path = dir.join(Table::Requests.file_name());
    let tally = super::reader::tally_requests(&requests_path)?;
    let mut counts = Counts {
        channel_full: run.counts.channel_full,
        ..Counts::default()
    };
    tally.apply_to(&mut counts);
    counts.events = report.rows(Table::Events);
    counts.scrapes = report.rows(Table::Scrapes);
    counts.telemetry = Some(report.rows(Table::Telemetry));
    run.counts = counts;
    run.status = Status::Interrupted;
    run.status_reason = Some(
        "the recorder stopped without finishing (killed or crashed); recovered by `anvil-capture recover`: rows of the last ~1 s before the stop may be missing, and requests in flight have events but no requests row"
            .to_owned(),
    );
    run.ended_utc = Some(
        max_t
            .and_then(|t| run.clock.utc_unix_ns_at(t))
            .map(format_utc_ns)
            .unwrap_or_else(|| run.started_utc.clone()),
    );
    write_run_json(dir, &run)?;
    release_lock(dir, lock)?;
    report.status_after = Status::Interrupted;
    Ok(report)
}
