//! `anvil campaign run`: the run plan executed through the managed path.
//!
//! 1. The starting service is fingerprinted (started from its launch command when the file
//!    gives one, then stopped; only checked when it names endpoints).
//! 2. Stage by stage in the plan's execution order, each arm: launched (one process per
//!    replica, logs beside its artifacts), waited for until ready, each of its cells recorded
//!    through the caller's `record` (the `anvil-capture run` code path, from the command line
//!    [`CampaignFile::plan`] prints), the cell's artifact checked against the plan's stop
//!    rules, then stopped.
//! 3. The starting service is restored through the same path, fingerprinted again, compared,
//!    and `restoration.json` written; it is left running.
//!
//! Every step is a line of the journal ([`super::journal`]) before the next begins. Failures
//! are evidence: an arm that does not become ready, a server that dies during a cell, one that
//! cannot be stopped are journaled and the next arm runs; a stop rule that fires, or an
//! interrupt (the caller's flag: SIGINT, SIGTERM or SIGHUP at the edge; the cell in flight is
//! not cut by the runner), ends the arms; the starting service is restored in every case,
//! also when an error ends them. `--resume` keeps every cell whose complete
//! artifact has the cell's workload fingerprint, moves any other attempt into `.superseded/`
//! (kept, not searched), stops servers an earlier runner left behind, and records the rest.

mod capacity;
mod cells;
mod restore;
mod service;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::CampaignFile;
use super::journal::{self, JOURNAL, Journal};
use crate::artifact::restoration::ServiceFingerprint;
use crate::capture::RunSummary;
use crate::capture::request::RunRequest;
use crate::notice::Notices;

/// The restore stage's evidence file when the plan names none, written in the campaign
/// folder.
pub const RESTORATION_JSON: &str = "restoration.json";

/// The file the plan's restore stage names as its evidence (what the rules look for), else
/// [`RESTORATION_JSON`].
fn restoration_file(plan: &crate::manifest::RunPlan) -> String {
    plan.stages_in_order()
        .into_iter()
        .find(|s| s.stage == crate::rules::stop::RESTORE_STAGE)
        .and_then(|s| s.evidence.clone())
        .unwrap_or_else(|| RESTORATION_JSON.to_owned())
}

/// Where superseded attempts are kept in the campaign folder (hidden: not searched).
pub const SUPERSEDED: &str = ".superseded";

/// The folder (below the campaign folder) of the starting service's logs.
pub const STARTING_SERVICE_DIR: &str = "starting-service";

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub file: PathBuf,
    pub out: PathBuf,
    pub resume: bool,
    /// Stop the restored starting service once it is checked (else it is left running).
    pub stop_after_restore: bool,
}

/// What the caller provides: where notices go, how one cell is recorded in this process
/// (as `anvil-capture run` records it), and the interrupt flag (set on SIGINT).
pub struct CampaignHooks<'a> {
    pub notices: Notices,
    pub record: &'a mut dyn FnMut(&RunRequest) -> anyhow::Result<RunSummary>,
    pub interrupted: Arc<AtomicBool>,
}

/// How a campaign run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignSummary {
    /// `OUT/<campaign_id>`: the artifacts, the journal, `restoration.json`.
    pub folder: PathBuf,
    pub journal: PathBuf,
    pub restoration: PathBuf,
    pub manifest: PathBuf,
    pub plan: PathBuf,
    pub cells: usize,
    pub recorded: usize,
    /// Cells already recorded (with `--resume`).
    pub skipped: usize,
    /// What did not go as planned, one line each (not ready, died, not recorded, …).
    pub failures: Vec<String>,
    /// The stop rule that ended the arms.
    pub stop_rule: Option<String>,
    pub interrupted: bool,
    /// The restoration's verdict line, and whether it passed.
    pub restoration_verdict: String,
    pub restored: bool,
    /// Each capacity search's verdict, `arm: verdict` (also in `capacity.json`).
    pub capacity: Vec<String>,
}

/// Why a campaign could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// The campaign file, its documents or `--out` are wrong: nothing was started.
    #[error("{0}")]
    BadInput(String),
    /// Something failed that is not the input's fault (a file not writable, the starting
    /// service not starting).
    #[error("{0}")]
    Failed(String),
}

/// Run the campaign `opts.file` into `opts.out`.
pub fn run(opts: &RunOptions, hooks: CampaignHooks<'_>) -> Result<CampaignSummary, CampaignError> {
    let bad = |e: &dyn std::fmt::Display| CampaignError::BadInput(e.to_string());
    let (campaign, manifest, plan) = CampaignFile::load_checked(&opts.file).map_err(|e| bad(&e))?;
    let cells = campaign.plan(&opts.file, &manifest, &plan, &opts.out);
    let folder = opts.out.join(&campaign.campaign_id);
    let journal_path = folder.join(JOURNAL);
    let (manifest_path, plan_path) = campaign.documents(&opts.file);
    if !opts.resume {
        let existing: Vec<String> = std::iter::once(journal_path.clone())
            .chain(cells.iter().map(|c| c.dir.clone()))
            .filter(|p| p.exists())
            .take(3)
            .map(|p| p.display().to_string())
            .collect();
        if !existing.is_empty() {
            return Err(CampaignError::BadInput(format!(
                "--out {}: campaign {} was already run there ({}); continue it with --resume (complete cells are kept), or choose another --out",
                opts.out.display(),
                campaign.campaign_id,
                existing.join(", ")
            )));
        }
    }
    std::fs::create_dir_all(&folder)
        .map_err(|e| CampaignError::Failed(format!("cannot create {}: {e}", folder.display())))?;
    let earlier = if opts.resume && journal_path.exists() {
        Journal::read(&journal_path).map_err(CampaignError::Failed)?
    } else {
        Vec::new()
    };
    let journal = Journal::open(&journal_path).map_err(|e| {
        CampaignError::Failed(format!("cannot open {}: {e}", journal_path.display()))
    })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CampaignError::Failed(format!("starting the async runtime: {e}")))?;
    let base = opts.file.parent().unwrap_or(Path::new(".")).to_owned();
    let mut runner = Runner {
        campaign,
        file: opts.file.clone(),
        manifest,
        out: opts.out.clone(),
        record: hooks.record,
        base,
        folder: folder.clone(),
        journal,
        rt,
        notices: hooks.notices,
        interrupted: hooks.interrupted,
        launches: 0,
        stop_after_restore: opts.stop_after_restore,
        summary: CampaignSummary {
            folder: folder.clone(),
            journal: journal_path,
            restoration: folder.join(restoration_file(&plan)),
            manifest: manifest_path,
            plan: plan_path,
            cells: cells.len(),
            recorded: 0,
            skipped: 0,
            failures: Vec::new(),
            stop_rule: None,
            interrupted: false,
            restoration_verdict: String::new(),
            restored: false,
            capacity: Vec::new(),
        },
    };
    runner.log(
        "campaign_started",
        json!({
            "campaign_id": runner.campaign.campaign_id,
            "file": opts.file.display().to_string(),
            "out": opts.out.display().to_string(),
            "resume": opts.resume,
            "cells": cells.len(),
            "arms": runner.campaign.all_arms().len(),
            "slo": runner.campaign.slo.to_json(),
        }),
    )?;
    runner.stop_orphans(&earlier)?;
    let before = match earlier_fingerprint(&earlier) {
        Some(fp) => {
            runner.say("the starting service's fingerprint is the one the journal holds");
            fp
        }
        None => runner.fingerprint_starting_service()?,
    };
    // The starting service is restored whatever ended the arms; an error ending them is
    // returned after the restore.
    let arms = runner.run_arms(&cells, &plan);
    runner.interrupted();
    runner.restore(before)?;
    arms?;
    let s = &runner.summary;
    let ended = json!({
        "recorded": s.recorded,
        "skipped": s.skipped,
        "failures": s.failures,
        "stop_rule": s.stop_rule,
        "interrupted": s.interrupted,
        "restored": s.restored,
    });
    runner.log("campaign_ended", ended)?;
    Ok(runner.summary)
}

/// The last "before" fingerprint an earlier run of this campaign journaled.
fn earlier_fingerprint(lines: &[Value]) -> Option<ServiceFingerprint> {
    lines
        .iter()
        .rev()
        .find(|l| journal::step(l) == "fingerprint" && l["of"] == "starting service before")
        .and_then(|l| serde_json::from_value(l["fingerprint"].clone()).ok())
}

struct Runner<'a> {
    campaign: CampaignFile,
    /// The campaign file, its manifest, and the data folder (for the capacity searches'
    /// probes, planned as the search goes).
    file: PathBuf,
    manifest: crate::manifest::WorkloadManifest,
    out: PathBuf,
    record: &'a mut dyn FnMut(&RunRequest) -> anyhow::Result<RunSummary>,
    base: PathBuf,
    folder: PathBuf,
    journal: Journal,
    rt: tokio::runtime::Runtime,
    notices: Notices,
    interrupted: Arc<AtomicBool>,
    /// Launches so far in this run (names each in the journal).
    launches: u32,
    stop_after_restore: bool,
    summary: CampaignSummary,
}

impl Runner<'_> {
    fn say(&self, line: &str) {
        self.notices.say(&format!("anvil campaign: {line}"));
    }

    fn log(&mut self, step: &str, fields: Value) -> Result<(), CampaignError> {
        self.journal.write(step, fields).map_err(|e| {
            CampaignError::Failed(format!(
                "{}: cannot append: {e}",
                self.journal.path().display()
            ))
        })
    }

    fn fail(&mut self, line: String) {
        self.say(&line);
        self.summary.failures.push(line);
    }

    fn interrupted(&mut self) -> bool {
        let now = self.interrupted.load(Ordering::SeqCst);
        if now && !self.summary.interrupted {
            self.summary.interrupted = true;
            self.say("interrupted: no further cell starts; the server is stopped and the starting service restored");
            let _ = self.log("interrupted", json!({}));
        }
        now
    }
}

#[cfg(test)]
mod tests;
