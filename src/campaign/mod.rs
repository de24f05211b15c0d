//! The campaign file (`anvil-serving.benchmark-campaign/v1`): how each arm of the run plan is
//! served and which cells are recorded against it, beside the workload manifest and the run
//! plan it names.
//!
//! Per arm (named as the plan spells it): a launch command (argv, environment, working
//! directory; `{port}` and `{replica}` are replaced per replica in the argv and the
//! environment's values, e.g. `CUDA_VISIBLE_DEVICES={replica}`), the replicas' ports, a
//! readiness check (`GET /health` or `/v1/models` until 200, with a timeout), a stop method
//! (SIGTERM or SIGINT, a grace period, then SIGKILL), the arm's configuration keys (what
//! `anvil-capture run --set` records) and runtime, and the cells to record (by class or by
//! cell id); or, instead of a launch command, the endpoints of servers already running. The
//! starting service is described the same way, with what shows it is restored.
//!
//! A sweep is an arm template and a list of values for one configuration key: it expands into
//! one arm per value (`{value}` replaced in the arm's name, its argv and its environment),
//! each differing from the others in exactly that key, so the one-variable control rule holds
//! by construction.
//!
//! [`CampaignFile::problems`] checks what the file states on its own;
//! [`CampaignFile::check_against`] checks it against its manifest and plan (every arm in the
//! plan, every cell in the manifest).

pub mod fingerprint;
pub mod journal;
#[cfg(feature = "analysis")]
pub mod runner;
pub mod search;
pub mod shards;
pub mod supervise;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::capture::request::{ArmRequest, CellRequest, RepeatRequest, RunRequest};
use crate::manifest::{ManifestError, Problem, RunPlan, WorkloadManifest};
use crate::workload::cells;

/// The campaign file's schema.
pub const CAMPAIGN_SCHEMA: &str = "anvil-serving.benchmark-campaign/v1";

/// Its schema family (any version), how `anvil validate` recognises one it cannot read.
pub const CAMPAIGN_SCHEMA_FAMILY: &str = "anvil-serving.benchmark-campaign/";

/// The placeholders a launch command may hold.
pub const PLACEHOLDERS: [&str; 3] = ["{port}", "{replica}", "{value}"];

/// A campaign file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    pub schema: String,
    pub campaign_id: String,
    /// The workload manifest, relative to the campaign file's folder.
    pub manifest: PathBuf,
    /// The run plan, relative to the campaign file's folder.
    pub plan: PathBuf,
    /// The service running before the campaign, restored after it.
    pub starting_service: StartingService,
    /// The arms, in any order (the plan's execution order decides when each runs).
    #[serde(default)]
    pub arms: Vec<Arm>,
    /// Arm templates expanded into one arm per value.
    #[serde(default)]
    pub sweeps: Vec<Sweep>,
    /// Configuration every arm inherits for the keys it does not declare (`torch_compile:
    /// off`), recorded in full in run.json `arm.defaults` (`--default`): a key one arm declares
    /// and the other inherits is compared like any other, one neither records stays unknown,
    /// and a default value marks the control side of a one-variable pair.
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    /// The campaign's service-level objectives (`"slo": ["ttft_ms<=2000", "tpot_ms<=50"]`),
    /// written as `--slo` takes them: the SLOs `anvil sql`, `summary`, `compare`, `check` and
    /// `report` apply to this campaign's data when no `--slo` is given, and that a capacity
    /// search meets by default.
    #[serde(default)]
    pub slo: Vec<String>,
}

/// How one arm is served and what is recorded against it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// The arm's name as the run plan spells it.
    pub arm: String,
    #[serde(flatten)]
    pub service: Service,
    /// The cells to record against it.
    #[serde(default)]
    pub cells: Cells,
    /// A capacity search to run against it, beside (or instead of) its cells.
    #[serde(default)]
    pub search: Option<search::CapacitySearch>,
}

/// A server (or servers already running) for one arm or for the starting service.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// How to start it; absent when `endpoints` name servers already running.
    #[serde(default)]
    pub launch: Option<Launch>,
    /// Base URLs of servers already running (one per replica), instead of `launch`.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// The port of each replica a launch starts (`{port}` in its argv), in replica order.
    #[serde(default)]
    pub ports: Vec<u16>,
    #[serde(default)]
    pub readiness: Readiness,
    #[serde(default)]
    pub stop: StopMethod,
    /// The arm's configuration keys, recorded in run.json (`--set`).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The runtime, e.g. `vllm 0.11.0` (recorded as `--set runtime=…`).
    pub runtime: String,
}

/// A launch command.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The program and its arguments, one process per replica.
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory, relative to the campaign file's folder.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// When a launched server counts as ready.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Readiness {
    /// `/health` or `/v1/models`, polled until it answers 200.
    #[serde(default = "Readiness::default_path")]
    pub path: String,
    /// Seconds before a server that is not ready is recorded as failed to start.
    #[serde(default = "Readiness::default_timeout")]
    pub timeout_s: f64,
}

impl Readiness {
    fn default_path() -> String {
        "/v1/models".to_owned()
    }

    fn default_timeout() -> f64 {
        600.0
    }
}

impl Default for Readiness {
    fn default() -> Self {
        Self {
            path: Self::default_path(),
            timeout_s: Self::default_timeout(),
        }
    }
}

/// How a launched server is stopped: the signal, then SIGKILL after the grace period.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopMethod {
    /// `SIGTERM` or `SIGINT`.
    #[serde(default = "StopMethod::default_signal")]
    pub signal: String,
    #[serde(default = "StopMethod::default_grace")]
    pub grace_s: f64,
}

impl StopMethod {
    fn default_signal() -> String {
        "SIGTERM".to_owned()
    }

    fn default_grace() -> f64 {
        30.0
    }
}

impl Default for StopMethod {
    fn default() -> Self {
        Self {
            signal: Self::default_signal(),
            grace_s: Self::default_grace(),
        }
    }
}

/// Which cells of the manifest to record: every cell of the listed classes, and the listed
/// cell ids (as `anvil-capture cells` prints them), each `repeats` times.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cells {
    #[serde(default)]
    pub classes: Vec<String>,
    #[serde(default)]
    pub ids: Vec<String>,
    /// How many runs of each cell (`anvil-capture run --repeat`): one count for every cell of
    /// the arm, or counts by cell id or class (others once).
    #[serde(default)]
    pub repeats: Repeats,
    /// The recorder's timeouts for some cells, by cell id or workload class (`anvil-capture
    /// run --timeout-first-byte/--timeout-idle/--timeout-total`): a stress cell whose
    /// queued requests wait longer than the defaults for their prefill.
    #[serde(default)]
    pub timeouts: BTreeMap<String, Timeouts>,
    /// Record each cell (but the functional checks) as this many shard processes on this
    /// machine, one run from several clients (`anvil-capture run --shard I/N --start-at`,
    /// one published instant a few seconds ahead): for tests and small setups of what
    /// `deploy/` runs across hosts. 1 (the default) records from one process.
    #[serde(default)]
    pub shards: Option<u32>,
}

impl Cells {
    /// How many shard processes record each cell: `shards`, else 1.
    pub fn shard_count(&self) -> u32 {
        self.shards.unwrap_or(1)
    }
}

/// The most local shard processes a cell may be recorded as.
pub const MAX_LOCAL_SHARDS: u32 = 64;

pub use crate::capture::request::Timeouts;

/// How many times cells are recorded.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Repeats {
    /// Every cell this many times.
    All(u32),
    /// By cell id or workload class; a cell named by neither once.
    PerCell(BTreeMap<String, u32>),
}

impl Default for Repeats {
    fn default() -> Self {
        Repeats::All(1)
    }
}

impl Repeats {
    /// The most repeats a cell may have.
    pub const MAX: u32 = 1000;

    /// The runs of the cell `id` of `class`.
    pub fn of(&self, id: &str, class: &str) -> u32 {
        match self {
            Repeats::All(n) => *n,
            Repeats::PerCell(by) => by.get(id).or_else(|| by.get(class)).copied().unwrap_or(1),
        }
    }

    /// Every count with what it applies to, for the checks.
    fn counts(&self) -> Vec<(String, u32)> {
        match self {
            Repeats::All(n) => vec![("(every cell)".to_owned(), *n)],
            Repeats::PerCell(by) => by.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }
}

/// The starting service and what shows it is restored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartingService {
    #[serde(flatten)]
    pub service: Service,
    /// The model the restored service must list (`/v1/models`).
    pub model: String,
}

/// An arm template and the values of one configuration key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// The configuration key the sweep varies.
    pub key: String,
    /// Its values, one arm each.
    pub values: Vec<String>,
    /// The template: `{value}` in its arm name, argv and environment is each value.
    pub template: Arm,
}

impl Sweep {
    /// One arm per value, the key set to the value in each.
    pub fn expand(&self) -> Vec<Arm> {
        self.values
            .iter()
            .map(|value| {
                let put = |s: &String| s.replace("{value}", value);
                let mut arm = self.template.clone();
                arm.arm = put(&arm.arm);
                if let Some(launch) = &mut arm.service.launch {
                    launch.argv = launch.argv.iter().map(put).collect();
                    launch.env = launch
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), put(v)))
                        .collect();
                }
                arm.service.config.insert(self.key.clone(), value.clone());
                arm
            })
            .collect()
    }
}

impl CampaignFile {
    /// Read and check a campaign file on its own ([`CampaignFile::problems`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ManifestError> {
        crate::manifest::load_typed(path.as_ref(), CAMPAIGN_SCHEMA, CampaignFile::problems)
    }

    /// Read a campaign file, its manifest and its plan, and check the three together.
    pub fn load_checked(
        path: impl AsRef<Path>,
    ) -> Result<(Self, WorkloadManifest, RunPlan), ManifestError> {
        let path = path.as_ref();
        let campaign = Self::load(path)?;
        let (manifest_path, plan_path) = campaign.documents(path);
        let manifest = WorkloadManifest::load(&manifest_path)?;
        let plan = RunPlan::load(&plan_path)?;
        let problems = campaign.check_against(&manifest, &plan);
        if problems.is_empty() {
            Ok((campaign, manifest, plan))
        } else {
            Err(ManifestError::invalid(path, problems))
        }
    }

    /// The arms and every sweep's arms, in file order.
    pub fn all_arms(&self) -> Vec<Arm> {
        let mut arms = self.arms.clone();
        for sweep in &self.sweeps {
            arms.extend(sweep.expand());
        }
        arms
    }

    /// The manifest's and the plan's paths, resolved against the campaign file's folder.
    pub fn documents(&self, file: &Path) -> (PathBuf, PathBuf) {
        let dir = file.parent().unwrap_or(Path::new("."));
        (dir.join(&self.manifest), dir.join(&self.plan))
    }

    /// What the file states wrongly on its own.
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.campaign_id.trim().is_empty() {
            out.push(Problem::new("campaign_id", "must not be empty"));
        }
        service_problems("starting_service", &self.starting_service.service, &mut out);
        for key in self.defaults.keys() {
            if key.trim().is_empty() || key == "runtime" {
                out.push(Problem::new(
                    format!("defaults.{key}"),
                    "a default is a configuration key (not empty, not runtime)",
                ));
            }
        }
        if self.starting_service.model.trim().is_empty() {
            out.push(Problem::new("starting_service.model", "must not be empty"));
        }
        for (i, arm) in self.arms.iter().enumerate() {
            arm_problems(&format!("arms[{i}]"), arm, &mut out);
        }
        for (i, arm) in self.all_arms().iter().enumerate() {
            if let Some(search) = &arm.search {
                let replicas = arm.service.ports.len().max(arm.service.endpoints.len());
                out.extend(search.problems(
                    &format!("arm `{}` (arm {}): search", arm.arm, i + 1),
                    replicas,
                    &self.slo,
                ));
            }
        }
        for (i, sweep) in self.sweeps.iter().enumerate() {
            let at = format!("sweeps[{i}]");
            if sweep.values.len() < 2 {
                out.push(Problem::new(
                    format!("{at}.values"),
                    "a sweep needs at least two values",
                ));
            }
            if !sweep.template.arm.contains("{value}") {
                out.push(Problem::new(
                    format!("{at}.template.arm"),
                    "must hold `{value}`, so each value names its own arm (e.g. `K{value}`)",
                ));
            }
            if sweep.template.service.config.contains_key(&sweep.key) {
                out.push(Problem::new(
                    format!("{at}.template.config.{}", sweep.key),
                    "is the key the sweep sets: leave it out of the template",
                ));
            }
            arm_problems(&format!("{at}.template"), &sweep.template, &mut out);
        }
        for (i, sweep) in self.sweeps.iter().enumerate() {
            for arm in sweep.expand() {
                if let Err(why) = crate::artifact::path_component(&arm.arm) {
                    out.push(Problem::new(
                        format!("sweeps[{i}].values"),
                        format!("arm `{}` {why}", arm.arm),
                    ));
                }
            }
        }
        #[cfg(feature = "analysis")]
        if let Err(e) =
            crate::slo::Slos::parse_all(&self.slo, crate::slo::SloSource::Campaign(String::new()))
        {
            out.push(Problem::new("slo", e.to_string()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for arm in self.all_arms() {
            if !seen.insert(arm.arm.clone()) {
                out.push(Problem::new(
                    "arms",
                    format!(
                        "arm `{}` is defined twice (an arm or a sweep value)",
                        arm.arm
                    ),
                ));
            }
        }
        out
    }

    /// What does not hold against the manifest and the plan the file names: every arm must
    /// be an arm of the plan (named as the plan spells it), every cell class and cell id one
    /// the manifest defines, and the campaign ids must agree.
    pub fn check_against(&self, manifest: &WorkloadManifest, plan: &RunPlan) -> Vec<Problem> {
        let mut out = Vec::new();
        let arms = self.all_arms();
        if manifest.campaign_id != self.campaign_id || plan.campaign_id != self.campaign_id {
            out.push(Problem::new(
                "campaign_id",
                format!(
                    "`{}`, but the manifest is campaign `{}` and the plan `{}`",
                    self.campaign_id, manifest.campaign_id, plan.campaign_id
                ),
            ));
        }
        let plan_arms: Vec<&String> = plan
            .execution_order
            .iter()
            .flat_map(|stage| stage.arms.iter().flatten())
            .collect();
        let unknown: Vec<String> = arms
            .iter()
            .map(|a| a.arm.clone())
            .filter(|a| !plan_arms.contains(&a))
            .collect();
        if !unknown.is_empty() {
            out.push(Problem::new(
                "arms",
                format!(
                    "not arms of the run plan: {}; the plan's arms are {}",
                    quoted(&unknown),
                    quoted(&plan_arms.iter().map(|a| (*a).clone()).collect::<Vec<_>>())
                ),
            ));
        }
        let classes: Vec<&str> = manifest
            .workload_classes
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let ids: Vec<String> = cells::cells(manifest).iter().map(|c| c.id()).collect();
        for arm in &arms {
            for (what, n) in arm.cells.repeats.counts() {
                if n == 0 || n > Repeats::MAX {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.repeats", arm.arm),
                        format!("{what}: {n} runs; give 1 to {}", Repeats::MAX),
                    ));
                }
                if what != "(every cell)"
                    && !ids.contains(&what)
                    && !classes.contains(&what.as_str())
                {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.repeats", arm.arm),
                        format!(
                            "`{what}` is neither a cell id nor a workload class of the manifest"
                        ),
                    ));
                }
            }
            if let Some(n) = arm
                .cells
                .shards
                .filter(|n| *n == 0 || *n > MAX_LOCAL_SHARDS)
            {
                out.push(Problem::new(
                    format!("arm `{}`: cells.shards", arm.arm),
                    format!("{n} shard processes; give 1 to {MAX_LOCAL_SHARDS}"),
                ));
            }
            for (what, t) in &arm.cells.timeouts {
                if !ids.contains(what) && !classes.contains(&what.as_str()) {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.timeouts", arm.arm),
                        format!(
                            "`{what}` is neither a cell id nor a workload class of the manifest"
                        ),
                    ));
                }
                for why in t.problems() {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.timeouts.{what}", arm.arm),
                        why,
                    ));
                }
            }
            if let Some(search) = &arm.search
                && !classes.contains(&search.class.as_str())
            {
                out.push(Problem::new(
                    format!("arm `{}`: search.class", arm.arm),
                    format!(
                        "`{}` is not a workload class of the manifest ({})",
                        search.class,
                        classes.join(", ")
                    ),
                ));
            }
            for class in &arm.cells.classes {
                if !classes.contains(&class.as_str()) {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.classes", arm.arm),
                        format!(
                            "`{class}` is not a workload class of the manifest ({})",
                            classes.join(", ")
                        ),
                    ));
                }
            }
            for id in &arm.cells.ids {
                if !ids.contains(id) {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.ids", arm.arm),
                        format!("`{id}` is not a cell of the manifest (`anvil-capture cells` lists them)"),
                    ));
                }
            }
        }
        out
    }
}

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
        let all_cells = cells::cells(manifest);
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
                            crate::artifact::Schedule::Closed,
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
    /// Run `repeat` of the probe of `arm`'s capacity search at `load`: its artifact folder,
    /// what `out` already holds there, and the `anvil-capture run` command that records it
    /// (the search's class and context off the manifest's lists, `--probe capacity`, the load
    /// as `--concurrency` or `--rate`, `--repeat` when the bracket's sides are repeated).
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
        let chosen = cells::choose(
            manifest,
            &cells::CellQuery {
                class: search.class.clone(),
                context: Some(search.context),
                concurrency: Some(concurrency),
                requests: Some(search.requests),
                off_manifest: true,
            },
        )
        .map_err(|e| e.to_string())?;
        let cell = chosen.cell;
        let schedule = match search.vary {
            search::Vary::Concurrency => crate::artifact::Schedule::Closed,
            search::Vary::Rate => crate::artifact::Schedule::Open {
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
        ..RunRequest::default()
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn arm_problems(at: &str, arm: &Arm, out: &mut Vec<Problem>) {
    if let Err(why) = crate::artifact::path_component(&arm.arm.replace("{value}", "0")) {
        out.push(Problem::new(
            format!("{at}.arm"),
            format!("`{}` {why}", arm.arm),
        ));
    }
    if arm.cells.classes.is_empty() && arm.cells.ids.is_empty() && arm.search.is_none() {
        out.push(Problem::new(
            format!("{at}.cells"),
            "names no cell: list `classes` or `ids`, or ask for a `search`",
        ));
    }
    service_problems(at, &arm.service, out);
}

fn service_problems(at: &str, service: &Service, out: &mut Vec<Problem>) {
    match (&service.launch, service.endpoints.is_empty()) {
        (None, true) => out.push(Problem::new(
            at,
            "needs a `launch` command or the `endpoints` of servers already running",
        )),
        (Some(_), false) => out.push(Problem::new(
            at,
            "has both `launch` and `endpoints`: a launched server's endpoints come from `ports`",
        )),
        _ => {}
    }
    if let Some(launch) = &service.launch {
        if launch.argv.is_empty() {
            out.push(Problem::new(
                format!("{at}.launch.argv"),
                "must name a program",
            ));
        }
        if service.ports.is_empty() {
            out.push(Problem::new(
                format!("{at}.ports"),
                "a launched service needs one port per replica",
            ));
        }
        for (k, arg) in launch.argv.iter().enumerate() {
            for placeholder in unknown_placeholders(arg) {
                out.push(Problem::new(
                    format!("{at}.launch.argv[{k}]"),
                    format!(
                        "unknown placeholder `{placeholder}`; known: {}",
                        PLACEHOLDERS.join(", ")
                    ),
                ));
            }
        }
    }
    for (k, url) in service.endpoints.iter().enumerate() {
        if let Err(e) = crate::capture::endpoint::Endpoint::parse(0, url) {
            out.push(Problem::new(
                format!("{at}.endpoints[{k}]"),
                format!("`{url}`: {e}"),
            ));
        }
    }
    if !matches!(service.readiness.path.as_str(), "/health" | "/v1/models") {
        out.push(Problem::new(
            format!("{at}.readiness.path"),
            format!(
                "`{}`: expected /health or /v1/models",
                service.readiness.path
            ),
        ));
    }
    let seconds = |v: f64| v.is_finite() && v > 0.0 && v <= 86_400.0;
    if !seconds(service.readiness.timeout_s) {
        out.push(Problem::new(
            format!("{at}.readiness.timeout_s"),
            "must be a positive number of seconds, at most a day",
        ));
    }
    if !matches!(service.stop.signal.as_str(), "SIGTERM" | "SIGINT") {
        out.push(Problem::new(
            format!("{at}.stop.signal"),
            format!("`{}`: expected SIGTERM or SIGINT", service.stop.signal),
        ));
    }
    if !(service.stop.grace_s.is_finite() && (0.0..=3600.0).contains(&service.stop.grace_s)) {
        out.push(Problem::new(
            format!("{at}.stop.grace_s"),
            "must be between 0 and 3600 seconds",
        ));
    }
    if service.runtime.trim().is_empty() {
        out.push(Problem::new(format!("{at}.runtime"), "must not be empty"));
    }
}

/// The `{…}` groups of `arg` that are not known placeholders.
fn unknown_placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let group = &rest[start..start + len + 1];
        if !PLACEHOLDERS.contains(&group) {
            out.push(group.to_owned());
        }
        rest = &rest[start + len + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = include_str!("../../sample-data/workload-manifest.json");
    const PLAN: &str = include_str!("../../sample-data/run-plan.json");

    /// A campaign of the seeds: one launched arm, a depth sweep, a starting service running.
    fn campaign_json(extra_arm: &str) -> String {
        format!(
            r#"{{
  "schema": "anvil-serving.benchmark-campaign/v1",
  "campaign_id": "2026-09-04-qwen38-27b-pro6000-possibility",
  "manifest": "workload-manifest.json",
  "plan": "run-plan.json",
  "starting_service": {{
    "endpoints": ["http://127.0.0.1:8000"], "runtime": "sglang 0.6.1", "model": "qwen"
  }},
  "arms": [
    {{
      "arm": "{extra_arm}",
      "launch": {{ "argv": ["anvil-sim", "--port", "{{port}}", "--profile", "no-spec"] }},
      "ports": [8101],
      "config": {{ "spec_depth": "0" }},
      "runtime": "sglang (anvil-sim)",
      "cells": {{ "classes": ["headline-sustained-output", "functional"] }}
    }}
  ],
  "sweeps": [
    {{
      "key": "spec_depth",
      "values": ["4", "12", "16"],
      "template": {{
        "arm": "K{{value}}",
        "launch": {{ "argv": ["anvil-sim", "--port", "{{port}}", "--profile", "spec-k{{value}}"] }},
        "ports": [8102],
        "config": {{ "chunked_prefill": "2048" }},
        "runtime": "sglang (anvil-sim)",
        "cells": {{ "classes": ["optimization-screen"] }}
      }}
    }}
  ]
}}"#
        )
    }

    fn write_campaign(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("workload-manifest.json"), MANIFEST).unwrap();
        std::fs::write(dir.path().join("run-plan.json"), PLAN).unwrap();
        let file = dir.path().join("campaign.json");
        std::fs::write(&file, text).unwrap();
        (dir, file)
    }

    #[test]
    fn a_sweep_expands_into_one_variable_arms() {
        let (_dir, file) = write_campaign(&campaign_json("Inferact target-only"));
        let (campaign, _, _) = CampaignFile::load_checked(&file).unwrap();
        let arms = campaign.all_arms();
        let names: Vec<&str> = arms.iter().map(|a| a.arm.as_str()).collect();
        assert_eq!(names, ["Inferact target-only", "K4", "K12", "K16"]);
        let k12 = &arms[2];
        assert_eq!(
            k12.service.launch.as_ref().unwrap().argv,
            ["anvil-sim", "--port", "{port}", "--profile", "spec-k12"]
        );
        // Every pair of sweep arms differs in exactly the swept key.
        for (a, b) in [(&arms[1], &arms[2]), (&arms[2], &arms[3])] {
            let differing: Vec<&String> = a
                .service
                .config
                .iter()
                .filter(|(k, v)| b.service.config.get(*k) != Some(v))
                .map(|(k, _)| k)
                .collect();
            assert_eq!(differing, ["spec_depth"]);
        }
    }

    #[test]
    fn arms_the_plan_does_not_name_are_refused_by_name() {
        let (_dir, file) = write_campaign(&campaign_json("K99 turbo"));
        let err = CampaignFile::load_checked(&file).unwrap_err().to_string();
        assert!(
            err.contains("not arms of the run plan: `K99 turbo`"),
            "{err}"
        );
        assert!(
            err.contains("`Inferact target-only`"),
            "lists the plan's arms: {err}"
        );
    }

    #[test]
    fn what_the_file_states_wrongly_is_named_by_field() {
        let text = campaign_json("Inferact target-only")
            .replace("\"{port}\", \"--profile\", \"no-spec\"", "\"{prot}\"")
            .replace("\"ports\": [8101],", "")
            .replace("\"K{value}\"", "\"K\"");
        let (_dir, file) = write_campaign(&text);
        let err = CampaignFile::load(&file).unwrap_err().to_string();
        assert!(
            err.contains("arms[0].launch.argv[2]") && err.contains("`{prot}`"),
            "{err}"
        );
        assert!(err.contains("arms[0].ports"), "{err}");
        assert!(err.contains("sweeps[0].template.arm"), "{err}");
        // An unknown field is refused with its path, a duplicate key with its name.
        let (_dir, file) = write_campaign(&campaign_json("x").replace("\"sweeps\"", "\"sweep\""));
        let err = CampaignFile::load(&file).unwrap_err().to_string();
        assert!(err.contains("sweep"), "{err}");
        // Inside an arm too (its service fields are flattened into it).
        let misspelt =
            campaign_json("Inferact target-only").replace("\"ports\": [8101]", "\"prots\": [8101]");
        let (_dir, file) = write_campaign(&misspelt);
        let err = CampaignFile::load(&file).unwrap_err().to_string();
        assert!(err.contains("prots"), "{err}");
    }

    #[test]
    fn timeouts_reach_the_named_cells_commands_and_bad_ones_are_named() {
        let text = campaign_json("Inferact target-only").replace(
            r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
            r#""cells": { "classes": ["headline-sustained-output", "functional"],
                         "timeouts": { "headline-sustained-output": { "idle_s": 180, "first_byte_s": 240 } } }"#,
        );
        let (dir, file) = write_campaign(&text);
        let (campaign, manifest, plan) = CampaignFile::load_checked(&file).unwrap();
        let cells = campaign.plan(&file, &manifest, &plan, &dir.path().join("out"));
        for c in cells.iter().filter(|c| c.arm == "Inferact target-only") {
            let line = c.request.to_argv().join(" ");
            let headline = c.cell_id.starts_with("headline-sustained-output");
            assert_eq!(
                line.contains("--timeout-first-byte 240 --timeout-idle 180"),
                headline,
                "{line}"
            );
        }
        let bad = campaign_json("Inferact target-only").replace(
            r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
            r#""cells": { "classes": ["functional"],
                         "timeouts": { "no-such-class": { "idle_s": 0 } } }"#,
        );
        let (_dir, file) = write_campaign(&bad);
        let err = CampaignFile::load_checked(&file).unwrap_err().to_string();
        assert!(
            err.contains("cells.timeouts") && err.contains("`no-such-class` is neither"),
            "{err}"
        );
        assert!(
            err.contains("idle_s: 0 is not a positive number of seconds"),
            "{err}"
        );
    }

    #[test]
    fn repeats_plan_one_folder_and_command_per_run_and_defaults_are_inherited() {
        let text = campaign_json("Inferact target-only")
            .replace(
                r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
                r#""cells": { "classes": ["headline-sustained-output", "functional"],
                             "repeats": { "headline-sustained-output": 3 } }"#,
            )
            .replace(
                r#""plan": "run-plan.json","#,
                r#""plan": "run-plan.json", "defaults": { "spec_depth": "9", "torch_compile": "off" },"#,
            );
        let (dir, file) = write_campaign(&text);
        let (campaign, manifest, plan) = CampaignFile::load_checked(&file).unwrap();
        let out = dir.path().join("out");
        let cells = campaign.plan(&file, &manifest, &plan, &out);
        let target: Vec<&PlannedCell> = cells
            .iter()
            .filter(|c| c.arm == "Inferact target-only")
            .collect();
        let names: Vec<String> = target.iter().map(|c| c.name()).collect();
        let headline = "headline-sustained-output.ctx4096.c8.n100";
        assert_eq!(
            &names[..3],
            [1, 2, 3].map(|k| format!("{headline}/repeat-{k}"))
        );
        assert!(
            names[3..].iter().all(|n| !n.contains("repeat")),
            "{names:?}"
        );
        assert_eq!(
            target[1].dir,
            out.join(&campaign.campaign_id)
                .join("Inferact target-only")
                .join(headline)
                .join("repeat-2")
        );
        let command = target[1].request.to_argv().join(" ");
        assert!(
            command.ends_with("--repeat 3 --repeat-index 2"),
            "{command}"
        );
        // Every default goes with the command; the arm declares spec_depth, so it inherits
        // only torch_compile (run.json records both defaults).
        assert!(command.contains("--set spec_depth=0"), "{command}");
        assert!(command.contains("--default torch_compile=off"), "{command}");
        assert!(command.contains("--default spec_depth=9"), "{command}");
        // Counts out of range and names that are neither cell nor class are refused.
        let bad = text.replace(r#""headline-sustained-output": 3"#, r#""no-such-cell": 0"#);
        let (_dir, file) = write_campaign(&bad);
        let err = CampaignFile::load_checked(&file).unwrap_err().to_string();
        assert!(
            err.contains("cells.repeats") && err.contains("no-such-cell: 0 runs"),
            "{err}"
        );
        assert!(
            err.contains("is neither a cell id nor a workload class"),
            "{err}"
        );
    }
}
