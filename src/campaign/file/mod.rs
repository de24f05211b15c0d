//! The campaign file's schema (`anvil-serving.benchmark-campaign/v1`): arms, services
//! (launch command or endpoints, ports, readiness, stop method, configuration and runtime),
//! the cells to record, sweeps, the starting service, defaults and SLOs; loading it, and
//! (`checks.rs`) what it states wrongly on its own ([`CampaignFile::problems`]) or against
//! its manifest and plan ([`CampaignFile::check_against`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod checks;

use super::search;
use crate::manifest::{ManifestError, RunPlan, WorkloadManifest};
use crate::workload::cells;

/// The campaign file's schema.
pub const CAMPAIGN_SCHEMA: &str = "anvil-serving.benchmark-campaign/v1";

/// Its schema family (any version), how `anvil validate` recognises one it cannot read.
pub const CAMPAIGN_SCHEMA_FAMILY: &str = "anvil-serving.benchmark-campaign/";

/// The placeholders a launch command may hold.
/// `{port}` and `{replica}` differ per replica, `{repeat}` per launch (the repeat it records:
/// an arm whose command holds it is launched once per repeat), `{value}` per sweep value.
pub const PLACEHOLDERS: [&str; 4] = ["{port}", "{replica}", "{repeat}", "{value}"];

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
    /// search meets by default. Per workload class, a map: `{"default": [...],
    /// "context-curve": ["ttft_ms<=20000", ...]}` (a class's list replaces the default).
    #[serde(default)]
    pub slo: crate::slo::SloSpec,
    /// The share of requests that must attain the SLOs for a point to stand on the
    /// trade-off frontier (default 0.9).
    #[serde(default = "default_slo_target")]
    pub slo_target: f64,
    /// The decision's objective and its priority; the report's first screen recommends by
    /// it.
    #[serde(default)]
    pub objective: Option<crate::rules::recommend::DeclaredObjective>,
    /// Words of the plan's claims and controls mapped to recorded settings, e.g.
    /// `{"Mamba96": "mamba=extra_buffer96"}`: how `check` reads plan text that names no arm.
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// The manifest's controls mapped to settings (`{text, key, values}`) or to a method
    /// (`{text, method}`); a control not mapped here is inferred from its words.
    #[serde(default)]
    pub controls: Vec<crate::rules::controls::DeclaredControl>,
    /// The plan's claims mapped to a comparator, metric and statistic (`{stage, text,
    /// against, metric, statistic}`); a claim not mapped here is read from its words.
    #[serde(default)]
    pub claims: Vec<crate::rules::coverage::DeclaredClaim>,
    /// The smallest difference that matters, as a share of the reference's figure (default
    /// 0.02): a resolved difference smaller than it is negligible, neither better nor worse.
    #[serde(default)]
    pub min_effect: Option<crate::rules::effect::MinEffect>,
    /// The order of repeated cells within a stage ([`Order`]): interleaved across arms (the
    /// default) or blocked.
    #[serde(default)]
    pub order: Order,
    /// Warm-up requests sent to every launch of an arm launched once per repeat before its
    /// first measured cell (`anvil-capture run --warmup`; recorded as `warmup` rows). Absent:
    /// one wave of that cell (its concurrency times its replicas).
    #[serde(default)]
    pub warmup_requests: Option<u64>,
    /// Workload classes declared beside the manifest (prefix groups), each naming the
    /// plan's open gate it serves; arms list them in `cells.classes` like the manifest's.
    #[serde(default)]
    pub workloads: Vec<crate::workload::declared::DeclaredWorkload>,
}

/// In what order a stage's repeated cells are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Round by round across the stage's arms: every arm's first repeat (with its cells
    /// recorded once), then every arm's second, … (A B C A B C). Each arm is launched once per
    /// round, so drift of the machine over time falls on every arm alike instead of on the
    /// arm recorded last.
    #[default]
    Interleaved,
    /// Each arm's repeats back to back in one launch (A A A B B B): fewer cold starts, but
    /// drift over time is confounded with the arm. Said in the report.
    Blocked,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Interleaved => "interleaved",
            Order::Blocked => "blocked",
        }
    }
}

/// The most warm-up requests a launch may be given.
pub const MAX_WARMUP_REQUESTS: u64 = 100_000;

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

fn default_slo_target() -> f64 {
    crate::slo::DEFAULT_SLO_TARGET
}

impl Arm {
    /// Its replicas: one per port it launches, or per endpoint already running.
    pub fn replicas(&self) -> usize {
        self.service.ports.len().max(self.service.endpoints.len())
    }

    /// The GPUs it uses, read from its configuration with the campaign's `defaults` for the
    /// keys it does not declare (its `gpus` key, else its topology).
    pub fn gpus(&self, defaults: &BTreeMap<String, String>) -> Option<crate::artifact::gpus::Gpus> {
        crate::artifact::gpus::gpus(|key| {
            self.service
                .config
                .get(key)
                .or_else(|| defaults.get(key))
                .map(String::as_str)
        })
    }

    /// Whether the arm is launched once per repeat: it has `repeats` (> 1) of some cell, and
    /// its command holds `{repeat}` or the campaign interleaves repeats.
    pub fn launched_per_repeat(&self, order: Order, repeats: u32) -> bool {
        let uses = self
            .service
            .launch
            .iter()
            .flat_map(|l| l.argv.iter().chain(l.env.values()))
            .any(|a| a.contains("{repeat}"));
        repeats > 1 && (uses || order == Order::Interleaved)
    }
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
    /// The GPU telemetry its runs read (`--telemetry`).
    #[serde(default)]
    pub telemetry: Vec<TelemetryDecl>,
}

/// A GPU telemetry source an arm's runs read (`anvil-capture run --telemetry`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryDecl {
    /// `dcgm=URL` (a DCGM exporter) or `nvidia-smi`; in a launched service's URL `{port}`
    /// stands for each replica's port (one source per replica: each replica process's own
    /// exporter, as `anvil-sim --dcgm` serves it).
    pub source: String,
    /// The arm's GPUs as the source numbers them; absent: every GPU it reports.
    #[serde(default)]
    pub gpus: Option<Vec<u32>>,
    /// The source's update interval, s (a DCGM exporter's `-c` in seconds).
    #[serde(default)]
    pub interval_s: Option<f64>,
}

impl Service {
    /// The `--telemetry` flags of its runs: each source, `{port}` expanded per replica.
    pub fn telemetry_request(&self) -> crate::capture::request::TelemetryRequest {
        let mut t = crate::capture::request::TelemetryRequest::default();
        for d in &self.telemetry {
            let sources: Vec<String> = if d.source.contains("{port}") {
                self.ports
                    .iter()
                    .map(|p| d.source.replace("{port}", &p.to_string()))
                    .collect()
            } else {
                vec![d.source.clone()]
            };
            for source in sources {
                t.sources.push(source);
                if let Some(gpus) = &d.gpus {
                    let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
                    t.gpus.push(list.join(","));
                }
                t.intervals_s.extend(d.interval_s);
            }
        }
        t
    }
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
    /// Reset each replica's prefix cache before each of the arm's cells, as `anvil-capture
    /// run --reset-cache` does: by cell id or class, or `"all"`; a server that stays busy
    /// fails the cell, and the journal says why.
    #[serde(default)]
    pub reset_cache: Vec<String>,
}

impl Cells {
    /// Whether `cell`'s prefix cache is reset before it is recorded.
    pub fn resets(&self, cell: &crate::workload::cells::Cell) -> bool {
        self.reset_cache
            .iter()
            .any(|k| k == "all" || *k == cell.id() || *k == cell.class)
    }

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
        let problems = campaign.check_against(path, &manifest, &plan);
        if problems.is_empty() {
            Ok((campaign, manifest, plan))
        } else {
            Err(ManifestError::invalid(path, problems))
        }
    }

    /// Every cell the campaign can record: the manifest's, then one per declared class (a
    /// trace read from beside `file`; one that cannot be read is left out here and named by
    /// [`CampaignFile::check_against`]).
    pub fn cells(&self, file: &Path, manifest: &WorkloadManifest) -> Vec<cells::Cell> {
        let mut all = cells::cells(manifest);
        let base = file.parent().unwrap_or(Path::new("."));
        all.extend(
            self.workloads
                .iter()
                .filter_map(|w| w.cell(manifest, base).ok()),
        );
        all
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
}
