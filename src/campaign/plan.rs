//! The campaign's plan: the arm × cell (× repeat) matrix in the run plan's execution order,
//! each cell a [`RunRequest`] with what the data folder already holds for it, and the probes
//! of a capacity search, planned as the search goes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::file::{Arm, CampaignFile};
use super::search;
use crate::capture::request::{ArmRequest, CellRequest, RepeatRequest, RunRequest};
use crate::manifest::{RunPlan, WorkloadManifest};
use crate::workload::cells;

/// Whether a cell's artifact is already in the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellState {
    /// A complete artifact with the cell's workload fingerprint.
    Recorded,
    /// An artifact is there but cannot stand for the cell: why.
    Unusable(String),
    /// No artifact yet.
    Missing,
}

impl std::fmt::Display for CellState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellState::Recorded => f.write_str("recorded"),
            CellState::Unusable(why) => write!(f, "to record again: {why}"),
            CellState::Missing => f.write_str("missing"),
        }
    }
}

/// One arm × cell (× repeat) of the campaign, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    pub stage: String,
    pub arm: String,
    pub cell_id: String,
    /// Which repeat of the cell (1 of 1 when the cell is recorded once).
    pub repeat: crate::artifact::Repeat,
    /// Where its artifact goes: `OUT/<campaign_id>/<arm>/<cell_id>`, and `…/repeat-<k>` for a
    /// cell recorded more than once.
    pub dir: PathBuf,
    pub state: CellState,
    /// What records it (the arm's ports standing for its replicas' `{port}`).
    pub request: RunRequest,
    /// How many local shard processes record it (1: one process).
    pub shards: u32,
}

impl PlannedCell {
    /// The cell as messages and the journal name it: its id, and `<id>/repeat-<k>` for a
    /// repeat of a cell recorded more than once.
    pub fn name(&self) -> String {
        if self.repeat.of > 1 {
            format!(
                "{}/{}",
                self.cell_id,
                crate::artifact::repeat_folder(self.repeat.index)
            )
        } else {
            self.cell_id.clone()
        }
    }
}

impl CampaignFile {
    /// The arm × cell matrix in the plan's execution order (stage by stage, arms as the stage
    /// lists them), with what `out` already holds for each cell and the command that records
    /// it. `file` is the campaign file (its manifest is named relative to it). Nothing is
    /// started.
    pub fn plan(
        &self,
        file: &Path,
        manifest: &WorkloadManifest,
        plan: &RunPlan,
        out: &Path,
    ) -> Vec<PlannedCell> {
        let arms = self.all_arms();
        let all_cells = self.cells(file, manifest);
        let (manifest_path, _) = self.documents(file);
        let mut planned = Vec::new();
        for stage in plan.stages_in_order() {
            for name in stage.arms.iter().flatten() {
                let Some(arm) = arms.iter().find(|a| &a.arm == name) else {
                    continue;
                };
                let chosen = all_cells.iter().filter(|c| {
                    arm.cells.classes.contains(&c.class) || arm.cells.ids.contains(&c.id())
                });
                for cell in chosen {
                    let cell_id = cell.id();
                    let cell_dir = out.join(&self.campaign_id).join(&arm.arm).join(&cell_id);
                    let expected = cell
                        .workload(
                            manifest,
                            crate::artifact::Api::Chat,
                            cell.schedule(),
                            None,
                            false,
                        )
                        .fingerprint();
                    let of = arm.cells.repeats.of(&cell_id, &cell.class).max(1);
                    for index in 1..=of {
                        let repeat = crate::artifact::Repeat { index, of };
                        let dir = if of > 1 {
                            cell_dir.join(crate::artifact::repeat_folder(index))
                        } else {
                            cell_dir.clone()
                        };
                        let mut request = cell_request(
                            &manifest_path,
                            &stage.stage,
                            arm,
                            &self.defaults,
                            cell,
                            out,
                        );
                        request.cell.workloads = self.workloads_file(file, &cell.class);
                        if of > 1 {
                            request.repeat = Some(RepeatRequest {
                                of,
                                index: Some(index),
                            });
                        }
                        let shards = if cell.class == cells::FUNCTIONAL {
                            1
                        } else {
                            arm.cells.shard_count().max(1)
                        };
                        planned.push(PlannedCell {
                            stage: stage.stage.clone(),
                            arm: arm.arm.clone(),
                            state: recorded_state_of(&dir, &expected, shards),
                            request,
                            shards,
                            cell_id: cell_id.clone(),
                            repeat,
                            dir,
                        });
                    }
                }
            }
        }
        planned
    }
}

impl CampaignFile {
    /// What kind of class `class` is: a declared session or trace class, else one-shot
    /// requests (the manifest's classes and prefix groups).
    pub fn class_kind(&self, class: &str) -> search::ClassKind {
        match crate::workload::declared::find(&self.workloads, class) {
            Some(d) if d.trace.is_some() => search::ClassKind::Trace,
            Some(d) => match &d.session {
                Some(spec) => search::ClassKind::Sessions {
                    sessions: spec.sessions,
                    turns: spec.turn_bounds().1,
                    open: spec.rate_per_s.is_some(),
                },
                None => search::ClassKind::Requests,
            },
            None => search::ClassKind::Requests,
        }
    }

    /// The campaign file itself when `class` is declared in its `workloads` section (what
    /// `anvil-capture run --workloads` reads it from); `None` for the manifest's classes.
    fn workloads_file(&self, file: &Path, class: &str) -> Option<PathBuf> {
        crate::workload::declared::find(&self.workloads, class).map(|_| file.to_owned())
    }

    /// Run `repeat` of the probe of `arm`'s capacity search at `load`: its artifact folder,
    /// what `out` already holds there, and the `anvil-capture run` command that records it
    /// (the search's class and context off the manifest's lists, `--probe capacity`, the load
    /// as `--concurrency` or `--rate`, `--repeat` when the bracket's sides are repeated). A
    /// session class's probe measures its declared sessions, the load being sessions in
    /// flight per replica or sessions arriving per second.
    #[allow(clippy::too_many_arguments)]
    pub fn probe(
        &self,
        file: &Path,
        manifest: &WorkloadManifest,
        stage: &str,
        arm: &Arm,
        search: &search::CapacitySearch,
        load: f64,
        repeat: u32,
        out: &Path,
    ) -> Result<PlannedCell, String> {
        let (manifest_path, _) = self.documents(file);
        let concurrency = match search.vary {
            search::Vary::Concurrency => load as u32,
            search::Vary::Rate => search.concurrency.unwrap_or(1),
        };
        let sessions = matches!(
            self.class_kind(&search.class),
            search::ClassKind::Sessions { .. }
        );
        let rate = (search.vary == search::Vary::Rate).then_some(load);
        let chosen = crate::workload::declared::choose_among(
            manifest,
            &self.workloads,
            file.parent().unwrap_or(Path::new(".")),
            &cells::CellQuery {
                class: search.class.clone(),
                context: Some(search.context),
                concurrency: Some(concurrency),
                // A session class measures its declared sessions.
                requests: (!sessions).then(|| search.probe_requests(load, arm.replicas())),
                rate,
                off_manifest: true,
            },
        )
        .map_err(|e| e.to_string())?;
        let cell = chosen.cell;
        let schedule = match (search.vary, sessions) {
            // Sessions arrive as the class plans them (at the probe's rate: Poisson).
            (_, true) => cell.schedule(),
            (search::Vary::Concurrency, false) => crate::artifact::Schedule::Closed,
            (search::Vary::Rate, false) => crate::artifact::Schedule::Open {
                rate_per_s: load,
                arrivals: crate::artifact::Arrivals::Constant,
            },
        };
        let mut workload = cell.workload(
            manifest,
            crate::artifact::Api::Chat,
            schedule,
            None,
            chosen.off_manifest,
        );
        workload.probe = Some(search::PROBE.to_owned());
        let cell_id = format!(
            "{}{}{}",
            cell.id(),
            schedule.cell_id_suffix(),
            crate::artifact::run::probe_cell_id_suffix(Some(search::PROBE))
        );
        let cell_dir = crate::artifact::artifact_dir(out, &self.campaign_id, &arm.arm, &cell_id)?;
        let of = search.repeats.max(1);
        let dir = if of > 1 {
            cell_dir.join(crate::artifact::repeat_folder(repeat))
        } else {
            cell_dir
        };
        let mut request = cell_request(&manifest_path, stage, arm, &self.defaults, &cell, out);
        request.cell.off_manifest = chosen.off_manifest;
        request.cell.workloads = self.workloads_file(file, &cell.class);
        request.probe = Some(search::PROBE.to_owned());
        if search.vary == search::Vary::Rate {
            request.load.rate = Some(load);
        }
        if of > 1 {
            request.repeat = Some(RepeatRequest {
                of,
                index: Some(repeat),
            });
        }
        Ok(PlannedCell {
            stage: stage.to_owned(),
            arm: arm.arm.clone(),
            state: recorded_state(&dir, &workload.fingerprint()),
            request,
            shards: 1,
            cell_id,
            repeat: crate::artifact::Repeat { index: repeat, of },
            dir,
        })
    }
}

/// What `dir` holds for a cell recorded as `shards` shard processes: each shard's folder as
/// [`recorded_state`] judges one run; the cell is recorded when every shard is.
fn recorded_state_of(dir: &Path, expected: &str, shards: u32) -> CellState {
    if shards <= 1 {
        return recorded_state(dir, expected);
    }
    let states: Vec<(u32, CellState)> = (0..shards)
        .map(|i| {
            (
                i,
                recorded_state(&dir.join(format!("shard-{i}-of-{shards}")), expected),
            )
        })
        .collect();
    if states.iter().all(|(_, s)| *s == CellState::Missing) {
        return CellState::Missing;
    }
    match states.into_iter().find(|(_, s)| *s != CellState::Recorded) {
        None => CellState::Recorded,
        Some((i, CellState::Missing)) => {
            CellState::Unusable(format!("shard {i}/{shards} was not recorded"))
        }
        Some((i, CellState::Unusable(why))) => {
            CellState::Unusable(format!("shard {i}/{shards}: {why}"))
        }
        Some((_, CellState::Recorded)) => CellState::Recorded,
    }
}

/// What `dir` holds for a cell whose workload fingerprint is `expected`.
fn recorded_state(dir: &Path, expected: &str) -> CellState {
    let run_json = dir.join(crate::artifact::RUN_JSON);
    if !run_json.exists() {
        return CellState::Missing;
    }
    match crate::artifact::RunJson::read(&run_json) {
        Err(e) => CellState::Unusable(format!("its run.json cannot be read ({e})")),
        Ok(run) if run.workload_fingerprint != expected => CellState::Unusable(format!(
            "its workload fingerprint {} is not the cell's {expected}",
            run.workload_fingerprint
        )),
        Ok(run) if run.status != crate::artifact::Status::Complete => {
            CellState::Unusable(format!("its status is {}", run.status.as_str()))
        }
        Ok(_) => CellState::Recorded,
    }
}

/// What records one cell of `arm`, with the campaign's `defaults` for the keys the arm does
/// not declare.
fn cell_request(
    manifest: &Path,
    stage: &str,
    arm: &Arm,
    defaults: &BTreeMap<String, String>,
    cell: &cells::Cell,
    out: &Path,
) -> RunRequest {
    let endpoints: Vec<String> = if arm.service.launch.is_some() {
        arm.service
            .ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    } else {
        arm.service.endpoints.clone()
    };
    RunRequest {
        manifest: manifest.to_owned(),
        cell: CellRequest {
            class: cell.class.clone(),
            context: Some(cell.context),
            concurrency: Some(cell.concurrency),
            requests: Some(cell.requests),
            off_manifest: false,
            workloads: None,
        },
        arm: ArmRequest {
            name: arm.arm.clone(),
            stage: Some(stage.to_owned()),
            config: arm.service.config.clone().into_iter().collect(),
            defaults: defaults.clone().into_iter().collect(),
            runtime: Some(arm.service.runtime.clone()),
        },
        endpoints,
        timeouts: arm
            .cells
            .timeouts
            .get(&cell.id())
            .or_else(|| arm.cells.timeouts.get(&cell.class))
            .copied()
            .unwrap_or_default(),
        out: out.to_owned(),
        cache: crate::capture::request::CacheRequest {
            reset: arm.cells.resets(cell),
            ..Default::default()
        },
        telemetry: arm.service.telemetry_request(),
        ..RunRequest::default()
    }
}
