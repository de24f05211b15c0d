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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::journal::{self, JOURNAL, Journal};
use super::supervise::{self, Launched, NotReady, Stopped};
use super::{CampaignFile, CellState, PlannedCell, Service, search};
use crate::artifact::restoration::{
    RESTORATION_SCHEMA, Restoration, RestorationCheck, ServiceFingerprint,
};
use crate::artifact::{Status, redact_args};
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
            "slo": runner.campaign.slo,
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

    /// Launch `service` for `who` (its logs in `log_dir`), journaled. `None` when it could
    /// not start (journaled as failed).
    fn launch(
        &mut self,
        who: &str,
        service: &Service,
        log_dir: &Path,
    ) -> Result<Option<(u32, Launched)>, CampaignError> {
        let Some(launch) = &service.launch else {
            return Ok(Some((0, Launched::default())));
        };
        self.launches += 1;
        let id = self.launches;
        let secrets = launch_secrets(service);
        match supervise::launch(launch, &service.ports, &self.base, log_dir, who, &secrets) {
            Ok(launched) => {
                let replicas: Vec<Value> = launched
                    .replicas
                    .iter()
                    .map(|r| {
                        json!({
                            "replica": r.index,
                            "port": r.port,
                            "pid": r.pid,
                            "start_ticks": r.start_ticks,
                            "argv": redact_args(&r.argv, &secrets),
                            "log": r.log.display().to_string(),
                        })
                    })
                    .collect();
                self.log(
                    "launched",
                    json!({
                        "launch": id, "who": who, "replicas": replicas,
                        "boot_id": supervise::boot_id(),
                        "env": launch.env.keys().collect::<Vec<_>>(),
                    }),
                )?;
                Ok(Some((id, launched)))
            }
            Err(why) => {
                self.log("failed", json!({"who": who, "what": "launch", "why": why}))?;
                self.fail(format!("{who}: not launched: {why}"));
                Ok(None)
            }
        }
    }

    /// The base URLs of a service: its launched replicas, or the endpoints it names.
    fn urls(service: &Service, launched: &Launched) -> Vec<String> {
        if service.launch.is_some() {
            launched.urls()
        } else {
            service.endpoints.clone()
        }
    }

    fn wait_ready(
        &mut self,
        who: &str,
        service: &Service,
        launched: &mut Launched,
        interrupted: &AtomicBool,
    ) -> Result<Result<f64, NotReady>, CampaignError> {
        let urls = Self::urls(service, launched);
        self.say(&format!(
            "{who}: waiting for {} on {} (up to {} s)",
            service.readiness.path,
            urls.join(", "),
            service.readiness.timeout_s
        ));
        let managed = service.launch.is_some().then_some(launched);
        let ready =
            supervise::wait_ready(&self.rt, &urls, &service.readiness, managed, interrupted);
        match &ready {
            Ok(s) => self.log("ready", json!({"who": who, "after_s": s, "urls": urls}))?,
            Err(NotReady::Interrupted) => {}
            Err(why) => {
                self.log("not_ready", json!({"who": who, "why": why.to_string()}))?;
            }
        }
        Ok(ready)
    }

    /// Stop what `launch` started, journaled; a replica that could not be stopped is a failure.
    fn stop(
        &mut self,
        who: &str,
        id: u32,
        service: &Service,
        launched: &mut Launched,
    ) -> Result<Vec<Stopped>, CampaignError> {
        if launched.replicas.is_empty() {
            return Ok(Vec::new());
        }
        let stopped = launched.stop(&service.stop);
        let each: Vec<Value> = stopped
            .iter()
            .map(|s| {
                json!({
                    "replica": s.replica, "pid": s.pid, "status": s.status,
                    "killed": s.killed, "not_stopped": s.not_stopped, "after_s": s.seconds,
                })
            })
            .collect();
        self.log(
            "stopped",
            json!({"launch": id, "who": who, "signal": service.stop.signal, "replicas": each}),
        )?;
        for s in stopped.iter().filter(|s| s.not_stopped) {
            self.fail(format!(
                "{who}: replica {} (pid {}) could not be stopped: {}",
                s.replica, s.pid, s.status
            ));
        }
        Ok(stopped)
    }

    /// Servers an earlier runner launched and never stopped (it was killed, or it left the
    /// restored service running): each replica whose process is still the one launched (same
    /// pid, start time and boot) is stopped, SIGTERM then SIGKILL.
    fn stop_orphans(&mut self, earlier: &[Value]) -> Result<(), CampaignError> {
        use std::time::{Duration, Instant};
        let boot = supervise::boot_id();
        let mut candidates: Vec<(Value, Value)> = Vec::new();
        for line in earlier.iter().filter(|l| journal::step(l) == "launched") {
            if line["boot_id"].as_str() != boot.as_deref() {
                continue;
            }
            for r in line["replicas"].as_array().into_iter().flatten() {
                candidates.push((line.clone(), r.clone()));
            }
        }
        for (line, r) in candidates {
            let (Some(pid), Some(ticks)) = (
                r["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
                r["start_ticks"].as_u64(),
            ) else {
                continue;
            };
            if supervise::start_ticks(pid) != Some(ticks) {
                continue;
            }
            self.say(&format!(
                "stopping pid {pid} ({}), left running by an earlier run of this campaign",
                line["who"].as_str().unwrap_or("a server")
            ));
            let gone = |until: Instant| loop {
                if supervise::start_ticks(pid) != Some(ticks) && !supervise::group_exists(pid) {
                    return true;
                }
                if Instant::now() >= until {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            supervise::signal_group(pid, libc::SIGTERM);
            let killed = !gone(Instant::now() + Duration::from_secs(30));
            if killed {
                supervise::signal_group(pid, libc::SIGKILL);
                gone(Instant::now() + Duration::from_secs(5));
            }
            self.log(
                "orphan_stopped",
                json!({"who": line["who"], "pid": pid, "launch": line["launch"], "killed": killed}),
            )?;
        }
        Ok(())
    }

    /// The starting service's fingerprint at `urls`, journaled as `of`.
    fn fingerprint(
        &mut self,
        urls: &[String],
        of: &str,
    ) -> Result<ServiceFingerprint, CampaignError> {
        let starting = &self.campaign.starting_service;
        let fp = self.rt.block_on(super::fingerprint::take(
            urls,
            &starting.model,
            configuration(&starting.service),
        ));
        self.log("fingerprint", json!({"of": of, "fingerprint": fp}))?;
        Ok(fp)
    }

    /// Step 1: the starting service's fingerprint, journaled. A managed service is started
    /// for it and stopped after; one that does not start or answer stops the campaign before
    /// anything is recorded (its restoration could not be shown).
    fn fingerprint_starting_service(&mut self) -> Result<ServiceFingerprint, CampaignError> {
        let service = self.campaign.starting_service.service.clone();
        let who = "starting service";
        let log_dir = self.folder.join(STARTING_SERVICE_DIR);
        let Some((id, mut launched)) = self.launch(who, &service, &log_dir)? else {
            return Err(CampaignError::Failed(format!(
                "the starting service could not be started ({}); nothing was recorded",
                self.summary.failures.last().cloned().unwrap_or_default()
            )));
        };
        let never = AtomicBool::new(false);
        let ready = self.wait_ready(who, &service, &mut launched, &never)?;
        if let Err(why) = ready {
            self.stop(who, id, &service, &mut launched)?;
            return Err(CampaignError::Failed(format!(
                "the starting service did not become ready: {why}; its log is in {}; nothing was recorded",
                log_dir.display()
            )));
        }
        let urls = Self::urls(&service, &launched);
        let fp = self.fingerprint(&urls, "starting service before")?;
        let model = self.campaign.starting_service.model.clone();
        if fp.models.is_empty() || !fp.models.iter().all(|m| m.contains(&model)) {
            self.stop(who, id, &service, &mut launched)?;
            return Err(CampaignError::BadInput(format!(
                "starting_service.model: the starting service does not list `{model}` (GET /v1/models per replica: {:?}); name the model it serves, or its restoration could never be shown; nothing was recorded",
                fp.models
            )));
        }
        self.say(&format!(
            "starting service fingerprinted: models {:?}, version {}",
            fp.models,
            fp.server_version.as_deref().unwrap_or("not said")
        ));
        self.stop(who, id, &service, &mut launched)?;
        Ok(fp)
    }

    /// Step 2: every arm in the plan's execution order.
    fn run_arms(
        &mut self,
        cells: &[PlannedCell],
        plan: &crate::manifest::RunPlan,
    ) -> Result<(), CampaignError> {
        let arms = self.campaign.all_arms();
        let stages: Vec<&str> = plan
            .execution_order
            .iter()
            .map(|s| s.stage.as_str())
            .collect();
        // Stage by stage, the arms with cells to record or a capacity search to run.
        let mut order: Vec<(&str, &str)> = Vec::new();
        for stage in plan.stages_in_order() {
            for name in stage.arms.iter().flatten() {
                let has_cells = cells
                    .iter()
                    .any(|c| c.stage == stage.stage && c.arm == *name);
                let searches = arms.iter().any(|a| a.arm == *name && a.search.is_some());
                let first = !order.iter().any(|(_, a)| a == name);
                if (has_cells || (searches && first))
                    && !order.contains(&(stage.stage.as_str(), name.as_str()))
                {
                    order.push((stage.stage.as_str(), name.as_str()));
                }
            }
        }
        let total_arms = order.len();
        let mut cell_no = 0;
        for (arm_no, (stage, arm_name)) in order.iter().enumerate() {
            if self.interrupted() || self.summary.stop_rule.is_some() {
                break;
            }
            let Some(arm) = arms.iter().find(|a| a.arm == *arm_name) else {
                continue;
            };
            let mine: Vec<&PlannedCell> = cells
                .iter()
                .filter(|c| c.stage == *stage && c.arm == *arm_name)
                .collect();
            let stage_no = stages.iter().position(|s| s == stage).map_or(0, |i| i + 1);
            let who = format!("arm {arm_name}");
            self.say(&format!(
                "stage {stage_no}/{} {stage}, arm {}/{total_arms} {arm_name}: {} cells",
                stages.len(),
                arm_no + 1,
                mine.len()
            ));
            let mut todo = Vec::new();
            for c in &mine {
                match &c.state {
                    CellState::Recorded => {
                        cell_no += 1;
                        self.summary.skipped += 1;
                        self.log(
                            "skipped",
                            json!({"arm": c.arm, "cell": c.name(), "why": "a complete artifact with the cell's workload fingerprint is there"}),
                        )?;
                    }
                    CellState::Unusable(why) => {
                        self.supersede(c, why)?;
                        todo.push(*c);
                    }
                    CellState::Missing => todo.push(*c),
                }
            }
            // The search, replayed from the probes already recorded: done, or what is next.
            let first_of_arm = order.iter().position(|(_, a)| a == arm_name) == Some(arm_no);
            let mut search = match (&arm.search, first_of_arm) {
                (Some(spec), true) => Some(self.search_from_disk(stage, arm, spec)?),
                _ => None,
            };
            let search_pending = search.as_ref().is_some_and(|s| s.pending);
            if todo.is_empty() && !search_pending {
                continue;
            }
            let log_dir = self.folder.join(&arm.arm);
            let Some((id, mut launched)) = self.launch(&who, &arm.service, &log_dir)? else {
                for c in &todo {
                    self.not_recorded(c, "its server was not launched")?;
                }
                continue;
            };
            let ready =
                self.wait_ready(&who, &arm.service, &mut launched, &self.interrupted.clone())?;
            if let Err(why) = ready {
                if why != NotReady::Interrupted {
                    self.fail(format!("{who}: {why}; its log is in {}", log_dir.display()));
                    for c in &todo {
                        self.not_recorded(c, "its server did not become ready")?;
                    }
                }
                self.stop(&who, id, &arm.service, &mut launched)?;
                continue;
            }
            for (k, c) in todo.iter().enumerate() {
                if self.interrupted() {
                    break;
                }
                cell_no += 1;
                self.say(&format!(
                    "[{cell_no}/{}] {arm_name}: cell {}",
                    self.summary.cells,
                    c.name()
                ));
                self.record(c)?;
                if self.deaths(&who, &mut launched, "cell", &c.name())? {
                    for rest in &todo[k + 1..] {
                        self.not_recorded(rest, "its server died during an earlier cell")?;
                    }
                    break;
                }
                if self.summary.stop_rule.is_some() {
                    break;
                }
            }
            if let (Some(spec), Some(state)) = (&arm.search, search.as_mut())
                && state.pending
                && launched.exited().is_empty()
            {
                self.run_search(stage, arm, spec, state, &mut launched, &who)?;
            }
            self.stop(&who, id, &arm.service, &mut launched)?;
        }
        Ok(())
    }

    /// Journal and report every replica of `launched` that exited during the `what` (`cell`
    /// or `probe`) `name`; whether any did.
    fn deaths(
        &mut self,
        who: &str,
        launched: &mut Launched,
        what: &str,
        name: &str,
    ) -> Result<bool, CampaignError> {
        let died = launched.exited();
        for (replica, pid, status) in &died {
            self.log(
                "died",
                json!({"who": who, "replica": replica, "pid": pid, "status": status, "during": name}),
            )?;
            self.fail(format!(
                "{who}: replica {replica} (pid {pid}) {status} during {what} {name}"
            ));
        }
        Ok(!died.is_empty())
    }

    /// Move an attempt that cannot stand for its cell into `.superseded/` (kept, journaled).
    fn supersede(&mut self, c: &PlannedCell, why: &str) -> Result<(), CampaignError> {
        let stamp = crate::clock::utc_now().replace(':', "");
        let to = self
            .folder
            .join(SUPERSEDED)
            .join(&c.arm)
            .join(format!("{}.{stamp}", c.name().replace('/', ".")));
        let moved = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::rename(&c.dir, &to));
        if let Err(e) = moved {
            return Err(CampaignError::Failed(format!(
                "cannot move {} aside to {}: {e}",
                c.dir.display(),
                to.display()
            )));
        }
        self.say(&format!(
            "{} {}: the earlier attempt ({why}) is kept in {}",
            c.arm,
            c.name(),
            to.display()
        ));
        self.log(
            "superseded",
            json!({"arm": c.arm, "cell": c.name(), "why": why, "kept_in": to.display().to_string()}),
        )
    }

    fn not_recorded(&mut self, c: &PlannedCell, why: &str) -> Result<(), CampaignError> {
        self.log(
            "not_recorded",
            json!({"arm": c.arm, "cell": c.name(), "why": why}),
        )?;
        self.summary
            .failures
            .push(format!("{} {}: not recorded: {why}", c.arm, c.name()));
        Ok(())
    }

    /// Record one cell (in this process, or as its local shard processes) and check its
    /// artifact against the plan's stop rules.
    fn record(&mut self, c: &PlannedCell) -> Result<(), CampaignError> {
        let command = c.request.to_argv();
        let mut line = json!({"arm": c.arm, "cell": c.name(), "dir": c.dir.display().to_string(), "command": command});
        let started = std::time::Instant::now();
        let outcome = if c.shards > 1 {
            let shards = super::shards::requests(
                &c.request,
                c.shards,
                &super::shards::start_instant(),
                &crate::realtime::allowed_cpus(),
            );
            line["shards"] = json!(shards.iter().map(RunRequest::to_argv).collect::<Vec<_>>());
            self.log("recording", line)?;
            super::shards::record(&shards, &self.notices).map_err(|e| anyhow::anyhow!(e))
        } else {
            self.log("recording", line)?;
            self.say(&format!("  {}", crate::shell::join(&command)));
            (self.record)(&c.request)
        };
        match outcome {
            Err(e) => {
                self.log(
                    "failed",
                    json!({"arm": c.arm, "cell": c.name(), "what": "record", "why": format!("{e:#}")}),
                )?;
                self.fail(format!("{} {}: not recorded: {e:#}", c.arm, c.name()));
            }
            Ok(done) => {
                self.log(
                    "recorded",
                    json!({"arm": c.arm, "cell": c.name(), "dir": done.dir.display().to_string(), "status": done.status.as_str(), "reason": done.reason}),
                )?;
                self.say(&format!(
                    "  {} in {:.1} s: {}{}",
                    done.status.as_str(),
                    started.elapsed().as_secs_f64(),
                    done.dir.display(),
                    match (&done.status, &done.reason) {
                        (Status::Complete, _) | (_, None) => String::new(),
                        (_, Some(reason)) => format!(" ({reason})"),
                    }
                ));
                if done.status == Status::Complete {
                    self.summary.recorded += 1;
                } else {
                    self.summary.failures.push(format!(
                        "{} {}: recorded as {}{}",
                        c.arm,
                        c.name(),
                        done.status.as_str(),
                        done.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                    ));
                }
                if done.status != Status::Interrupted && !self.interrupted.load(Ordering::SeqCst) {
                    self.check_stop_rules(c, &done.dir)?;
                }
            }
        }
        Ok(())
    }
}

/// A capacity search in progress: what its probes observed so far (in the order recorded)
/// and whether it still needs a probe recorded.
struct SearchState {
    slos: crate::slo::Slos,
    seen: Vec<search::Observation>,
    pending: bool,
}

/// The exact 95% interval the search judges a load by.
fn exact_interval(k: u64, n: u64) -> (f64, f64) {
    crate::stats::clopper_pearson(k, n).map_or((0.0, 1.0), |p| (p.low, p.high))
}

impl Runner<'_> {
    /// Replay `arm`'s search from the probes `out` already holds (each read once, journaled
    /// as reused); when that ends the search, its result is written.
    fn search_from_disk(
        &mut self,
        stage: &str,
        arm: &super::Arm,
        spec: &search::CapacitySearch,
    ) -> Result<SearchState, CampaignError> {
        let texts = spec.slos(&self.campaign.slo).to_vec();
        let slos = crate::slo::Slos::parse_all(
            &texts,
            crate::slo::SloSource::Campaign(self.file.display().to_string()),
        )
        .map_err(|e| CampaignError::BadInput(format!("arm {}: search.slo: {e}", arm.arm)))?;
        let mut state = SearchState {
            slos,
            seen: Vec::new(),
            pending: false,
        };
        self.log(
            "search_started",
            json!({"arm": arm.arm, "vary": spec.vary, "min": spec.min, "max": spec.max,
                   "target": spec.target, "window": spec.window.as_str(), "slo": texts,
                   "requests": spec.requests, "repeats": spec.repeats}),
        )?;
        loop {
            match search::next_step(spec, &state.seen, &exact_interval) {
                search::Step::Done(bracket) => {
                    self.finish_search(arm, spec, &state, Ok(bracket))?;
                    return Ok(state);
                }
                search::Step::Probe { load, repeat } => {
                    let planned = self.probe_cell(stage, arm, spec, load, repeat)?;
                    if planned.state != CellState::Recorded {
                        state.pending = true;
                        return Ok(state);
                    }
                    match self.observe(&planned, spec, &state.slos, load, repeat) {
                        Ok(o) => {
                            self.log_probe(&arm.arm, &o, spec, true)?;
                            state.seen.push(o);
                        }
                        Err(why) => {
                            self.supersede(&planned, &why)?;
                            state.pending = true;
                            return Ok(state);
                        }
                    }
                }
            }
        }
    }

    /// Record the search's probes with the arm's server up until its bracket is found, the
    /// server dies, a stop rule fires or the run is interrupted.
    fn run_search(
        &mut self,
        stage: &str,
        arm: &super::Arm,
        spec: &search::CapacitySearch,
        state: &mut SearchState,
        launched: &mut Launched,
        who: &str,
    ) -> Result<(), CampaignError> {
        loop {
            if self.interrupted() || self.summary.stop_rule.is_some() {
                return self.finish_search(arm, spec, state, Err("interrupted".to_owned()));
            }
            let (load, repeat) = match search::next_step(spec, &state.seen, &exact_interval) {
                search::Step::Done(bracket) => {
                    return self.finish_search(arm, spec, state, Ok(bracket));
                }
                search::Step::Probe { load, repeat } => (load, repeat),
            };
            let planned = self.probe_cell(stage, arm, spec, load, repeat)?;
            if let CellState::Unusable(why) = &planned.state {
                self.supersede(&planned, why)?;
            }
            self.say(&format!(
                "{} capacity search: {} {load}, run {repeat}",
                arm.arm,
                match spec.vary {
                    search::Vary::Concurrency => "concurrency",
                    search::Vary::Rate => "rate",
                }
            ));
            self.summary.cells += 1;
            if planned.state != CellState::Recorded {
                self.record(&planned)?;
            }
            if self.deaths(who, launched, "probe", &planned.name())? {
                return self.finish_search(arm, spec, state, Err("its server died".to_owned()));
            }
            match self.observe(&planned, spec, &state.slos, load, repeat) {
                Ok(o) => {
                    self.log_probe(&arm.arm, &o, spec, false)?;
                    state.seen.push(o);
                }
                Err(why) => {
                    return self.finish_search(
                        arm,
                        spec,
                        state,
                        Err(format!("probe {} was not recorded: {why}", planned.name())),
                    );
                }
            }
        }
    }

    fn probe_cell(
        &self,
        stage: &str,
        arm: &super::Arm,
        spec: &search::CapacitySearch,
        load: f64,
        repeat: u32,
    ) -> Result<PlannedCell, CampaignError> {
        self.campaign
            .probe(
                &self.file,
                &self.manifest,
                stage,
                arm,
                spec,
                load,
                repeat,
                &self.out,
            )
            .map_err(|e| CampaignError::BadInput(format!("arm {}: search: {e}", arm.arm)))
    }

    /// A probe's attainment over the search's window, read from its complete artifact as
    /// `anvil sql` reads the `goodput` view.
    fn observe(
        &self,
        planned: &PlannedCell,
        spec: &search::CapacitySearch,
        slos: &crate::slo::Slos,
        load: f64,
        repeat: u32,
    ) -> Result<search::Observation, String> {
        let dir = &planned.dir;
        let run = crate::artifact::RunJson::read(&dir.join(crate::artifact::RUN_JSON))
            .map_err(|e| format!("its run.json cannot be read ({e})"))?;
        if run.status != Status::Complete {
            return Err(format!("its status is {}", run.status.as_str()));
        }
        let sql = format!(
            "SELECT requests, attained FROM goodput WHERE window = '{}'",
            spec.window.as_str()
        );
        let rows = self
            .rt
            .block_on(async {
                let session =
                    crate::query::AnvilSession::open_with(&[dir.to_owned()], slos, false).await?;
                let r = session.query(&sql).await?;
                Ok::<_, crate::query::QueryError>((
                    crate::query::rows::column_f64(&r, "requests")?,
                    crate::query::rows::column_f64(&r, "attained")?,
                ))
            })
            .map_err(|e| format!("its attainment could not be read ({e})"))?;
        let (Some(Some(requests)), Some(Some(attained))) = (rows.0.first(), rows.1.first()) else {
            return Err("it has no measured request in the window".to_owned());
        };
        Ok(search::Observation {
            load,
            repeat,
            run_id: run.run_id,
            dir: dir.clone(),
            attained: *attained as u64,
            requests: *requests as u64,
        })
    }

    fn log_probe(
        &mut self,
        arm: &str,
        o: &search::Observation,
        spec: &search::CapacitySearch,
        reused: bool,
    ) -> Result<(), CampaignError> {
        let (low, high) = exact_interval(o.attained, o.requests);
        let share = o.attained as f64 / o.requests.max(1) as f64;
        self.log(
            "search_probe",
            json!({"arm": arm, "load": o.load, "repeat": o.repeat, "dir": o.dir.display().to_string(),
                   "run_id": o.run_id, "attained": o.attained, "requests": o.requests,
                   "share": share, "low": low, "high": high,
                   "meets_target": share >= spec.target, "reused": reused}),
        )?;
        self.say(&format!(
            "  {arm}: load {}: {} of {} attained ({:.1}% [{:.1}%, {:.1}%]){}",
            o.load,
            o.attained,
            o.requests,
            share * 100.0,
            low * 100.0,
            high * 100.0,
            if reused { ", recorded earlier" } else { "" }
        ));
        Ok(())
    }

    /// Journal the search's end and write its result into `capacity.json` (other arms'
    /// results kept).
    fn finish_search(
        &mut self,
        arm: &super::Arm,
        spec: &search::CapacitySearch,
        state: &SearchState,
        ended: Result<search::Bracket, String>,
    ) -> Result<(), CampaignError> {
        let texts: Vec<String> = state.slos.slos.iter().map(|s| s.to_string()).collect();
        let result = search::result(&arm.arm, spec, &texts, state.seen.clone(), ended);
        self.log(
            "search_done",
            json!({"arm": arm.arm, "status": result.status, "capacity": result.capacity,
                   "verdict": result.verdict}),
        )?;
        self.say(&format!("{} capacity search: {}", arm.arm, result.verdict));
        let path = self.folder.join(CAPACITY_JSON);
        // Other arms' results are kept; a file that cannot be read is replaced (the
        // journal holds every probe it described).
        let mut doc = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| Capacity::parse(&t).ok())
            .unwrap_or_else(|| Capacity::new(&self.campaign.campaign_id));
        doc.upsert(result.clone());
        crate::outfile::write_file(&path, doc.to_json().as_bytes())
            .map_err(|e| CampaignError::Failed(e.to_string()))?;
        self.summary
            .capacity
            .push(format!("{}: {}", arm.arm, result.verdict));
        Ok(())
    }
}

use crate::artifact::capacity::{CAPACITY_JSON, Capacity};

impl Runner<'_> {
    /// The plan's stop rules over the cell's artifact (read as `anvil check` reads it); the
    /// first that fires ends the arms.
    fn check_stop_rules(&mut self, c: &PlannedCell, dir: &Path) -> Result<(), CampaignError> {
        let has_shards = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        });
        if !dir.join(crate::artifact::RUN_JSON).exists() && !has_shards {
            return Ok(());
        }
        let read = self.rt.block_on(async {
            let session = crate::query::AnvilSession::open(&[dir.to_owned()]).await?;
            crate::gather::rules_input::read_artifacts(&session).await
        });
        let artifacts = match read {
            Ok(a) => a,
            Err(e) => {
                self.fail(format!(
                    "{} {}: the artifact could not be checked against the stop rules: {e}",
                    c.arm,
                    c.name()
                ));
                return Ok(());
            }
        };
        let findings: Vec<_> = artifacts
            .iter()
            .flat_map(crate::rules::stop::artifact_stop_rules)
            .collect();
        for f in &findings {
            self.log(
                "stop_rule",
                json!({"arm": c.arm, "cell": c.name(), "rule": f.kind.to_string(), "reason": f.reason}),
            )?;
        }
        if let Some(first) = findings.first() {
            let line = format!("STOP {}: {}", first.kind, first.reason);
            self.say(&format!(
                "{line}; no further arm runs, the starting service is restored"
            ));
            self.summary.stop_rule = Some(line);
        }
        Ok(())
    }

    /// Step 3: bring the starting service back through the managed path, fingerprint it,
    /// compare, write `restoration.json`, leave it running.
    fn restore(&mut self, before: ServiceFingerprint) -> Result<(), CampaignError> {
        let service = self.campaign.starting_service.service.clone();
        let model = self.campaign.starting_service.model.clone();
        let who = "starting service";
        let started_at = crate::clock::utc_now();
        self.say("restoring the starting service");
        self.log("restore_started", json!({}))?;
        let mut checks = Vec::new();
        let mut ready_at = None;
        let mut after = None;
        let log_dir = self.folder.join(STARTING_SERVICE_DIR);
        let launched = self.launch(who, &service, &log_dir)?;
        let mut pids = Vec::new();
        let mut argv = Vec::new();
        let mut urls = service.endpoints.clone();
        match launched {
            None => checks.push(RestorationCheck {
                check: "launch".to_owned(),
                passed: false,
                expected: Value::from("the launch command starts"),
                observed: Value::from(self.summary.failures.last().cloned().unwrap_or_default()),
                detail: "the starting service's launch command did not start".to_owned(),
            }),
            Some((id, mut launched)) => {
                urls = Self::urls(&service, &launched);
                let secrets = launch_secrets(&service);
                argv = launched
                    .replicas
                    .iter()
                    .map(|r| redact_args(&r.argv, &secrets))
                    .collect();
                // Restoring is not interrupted: it is what an interrupt leads to.
                let never = AtomicBool::new(false);
                let ready = self.wait_ready(who, &service, &mut launched, &never)?;
                checks.push(RestorationCheck {
                    check: "ready".to_owned(),
                    passed: ready.is_ok(),
                    expected: Value::from(format!("{} answers 200", service.readiness.path)),
                    observed: Value::from(match &ready {
                        Ok(s) => format!("ready after {s:.1} s"),
                        Err(why) => why.to_string(),
                    }),
                    detail: match &ready {
                        Ok(s) => format!("{} answered 200 after {s:.1} s", service.readiness.path),
                        Err(why) => why.to_string(),
                    },
                });
                if ready.is_ok() {
                    ready_at = Some(crate::clock::utc_now());
                    let fp = self.fingerprint(&urls, "starting service restored")?;
                    checks.extend(super::fingerprint::compare(&before, &fp, &model));
                    after = Some(fp);
                }
                pids = launched.replicas.iter().map(|r| r.pid).collect();
                if self.stop_after_restore {
                    self.stop(who, id, &service, &mut launched)?;
                } else {
                    pids = launched.leave_running();
                    if !pids.is_empty() {
                        self.log("left_running", json!({"who": who, "pids": pids}))?;
                    }
                }
            }
        }
        let restored = !checks.is_empty() && checks.iter().all(|c| c.passed);
        let doc = Restoration {
            schema: RESTORATION_SCHEMA.to_owned(),
            campaign_id: self.campaign.campaign_id.clone(),
            restored,
            managed_path: if service.launch.is_some() {
                "launch".to_owned()
            } else {
                "endpoints".to_owned()
            },
            argv,
            endpoints: urls,
            pids,
            started_at,
            ready_at,
            finished_at: crate::clock::utc_now(),
            before: Some(before),
            after,
            checks,
        };
        let mut text = serde_json::to_string_pretty(&doc)
            .map_err(|e| CampaignError::Failed(format!("encoding restoration.json: {e}")))?;
        text.push('\n');
        let path = self.summary.restoration.clone();
        crate::outfile::write_file(&path, text.as_bytes())
            .map_err(|e| CampaignError::Failed(format!("{}: {e}", path.display())))?;
        let verdict = doc.verdict();
        self.log(
            if restored { "restored" } else { "not_restored" },
            json!({"verdict": verdict, "file": path.display().to_string()}),
        )?;
        self.say(&format!("starting service {verdict}; {}", path.display()));
        self.summary.restoration_verdict = verdict;
        self.summary.restored = restored;
        Ok(())
    }
}

/// The values of a launch's secret-named environment variables (`HF_TOKEN`, `API_KEY`, …):
/// removed wherever its command line is written.
fn launch_secrets(service: &Service) -> Vec<&str> {
    service
        .launch
        .iter()
        .flat_map(|l| &l.env)
        .filter(|(k, _)| crate::artifact::is_secret_name(k))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The configuration keys a service declares, its runtime among them.
fn configuration(service: &Service) -> BTreeMap<String, String> {
    let mut keys = service.config.clone();
    keys.insert("runtime".to_owned(), service.runtime.clone());
    keys
}
