//! The campaign file's schema (`anvil-serving.benchmark-campaign/v1`) and what it states
//! wrongly on its own ([`CampaignFile::problems`]) or against its manifest and plan
//! ([`CampaignFile::check_against`]): arms, services (launch command or endpoints, ports,
//! readiness, stop method, configuration and runtime), the cells to record, sweeps, the
//! starting service, defaults and SLOs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::search;
use crate::manifest::{ManifestError, Problem, RunPlan, WorkloadManifest};
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
        if self
            .warmup_requests
            .is_some_and(|n| n > MAX_WARMUP_REQUESTS)
        {
            out.push(Problem::new(
                "warmup_requests",
                format!("must be at most {MAX_WARMUP_REQUESTS}"),
            ));
        }
        if let Some(o) = &self.objective
            && (o.priority.is_empty() || o.text.trim().is_empty())
        {
            out.push(Problem::new(
                "objective",
                "give the objective in words (`text`) and at least one criterion (`priority`, e.g. [\"capacity_per_gpu\", \"tpot_p50\"])",
            ));
        }
        for (word, to) in &self.aliases {
            let ok = to
                .split_once('=')
                .is_some_and(|(k, v)| !k.trim().is_empty() && !v.trim().is_empty());
            if !ok || word.trim().is_empty() {
                out.push(Problem::new(
                    format!("aliases.{word}"),
                    format!("`{to}` is not a setting: map a word to key=value, e.g. \"mamba=extra_buffer96\""),
                ));
            }
        }
        let arms: Vec<String> = self.all_arms().iter().map(|a| a.arm.clone()).collect();
        let arms: Vec<&str> = arms.iter().map(String::as_str).collect();
        for (i, claim) in self.claims.iter().enumerate() {
            for (field, what) in claim.problems(&arms) {
                out.push(Problem::new(format!("claims[{i}].{field}"), what));
            }
        }
        for (key, what) in self.min_effect.iter().flat_map(|m| m.problems()) {
            let at = if key.is_empty() {
                "min_effect".to_owned()
            } else {
                format!("min_effect.{key}")
            };
            out.push(Problem::new(at, what));
        }
        if !(self.slo_target > 0.0 && self.slo_target <= 1.0) {
            out.push(Problem::new(
                "slo_target",
                format!(
                    "{} is not a share of requests: give one in (0, 1], e.g. 0.9",
                    self.slo_target
                ),
            ));
        }
        for (i, arm) in self.arms.iter().enumerate() {
            arm_problems(&format!("arms[{i}]"), arm, &mut out);
        }
        for (i, arm) in self.all_arms().iter().enumerate() {
            if let Some(search) = &arm.search {
                let replicas = arm.replicas();
                out.extend(search.problems(
                    &format!("arm `{}` (arm {}): search", arm.arm, i + 1),
                    replicas,
                    &self.slo,
                    self.class_kind(&search.class),
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

        out.extend(crate::workload::declared::section_problems(
            &self.workloads,
            &[],
        ));
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
    pub fn check_against(
        &self,
        file: &Path,
        manifest: &WorkloadManifest,
        plan: &RunPlan,
    ) -> Vec<Problem> {
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
        let manifest_classes: Vec<&str> = manifest
            .workload_classes
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        for p in crate::workload::declared::section_problems(&self.workloads, &manifest_classes) {
            if p.message.contains("is a class of the manifest") {
                out.push(p);
            }
        }
        let base = file.parent().unwrap_or(Path::new("."));
        for (i, w) in self.workloads.iter().enumerate() {
            if let Err(why) = w.cell(manifest, base) {
                out.push(Problem::new(format!("workloads[{i}].trace"), why));
            }
            if !plan.post_campaign_open_gates.contains(&w.gate) {
                out.push(Problem::new(
                    format!("workloads[{i}].gate"),
                    format!(
                        "`{}` is not an open gate of the run plan; its gates are {}",
                        w.gate,
                        quoted(&plan.post_campaign_open_gates)
                    ),
                ));
            }
        }
        // A declared class stands beside the manifest's wherever an arm names a class.
        let classes: Vec<&str> = manifest_classes
            .iter()
            .copied()
            .chain(self.workloads.iter().map(|w| w.class.as_str()))
            .collect();
        let ids: Vec<String> = self.cells(file, manifest).iter().map(|c| c.id()).collect();
        // Every request of a one-shot class is turn 0: a list it is judged by with no bound
        // for turn 0 would let every request that succeeds attain.
        let one_shot = |class: &str| {
            !matches!(
                self.class_kind(class),
                super::search::ClassKind::Sessions { .. }
            )
        };
        let bounds_turn_0 = |slos: &[crate::slo::Slo]| {
            slos.is_empty() || slos.iter().any(|s| s.turns.holds_turn(0))
        };
        let default_users = classes
            .iter()
            .any(|c| one_shot(c) && !self.slo.classes.contains_key(*c));
        if default_users && !bounds_turn_0(&self.slo.default) {
            out.push(Problem::new(
                "slo.default",
                "every bound is scoped to later turns, but classes without a list of their own \
                 are one-shot (every request is turn 0): give a bound for turn 0 (unscoped, or \
                 `turn 0: ...`)"
                    .to_owned(),
            ));
        }
        for (class, slos) in &self.slo.classes {
            if one_shot(class) && !bounds_turn_0(slos) {
                out.push(Problem::new(
                    format!("slo.{class}"),
                    format!(
                        "every bound is scoped to later turns, but `{class}` is not a session \
                         class (every request is turn 0): give a bound for turn 0"
                    ),
                ));
            }
        }
        for class in self.slo.classes.keys() {
            if class == cells::FUNCTIONAL {
                out.push(Problem::new(
                    format!("slo.{class}"),
                    "functional cells count in no attainment or goodput (they check tools and \
                     formats): remove the key"
                        .to_owned(),
                ));
            } else if !classes.contains(&class.as_str()) {
                out.push(Problem::new(
                    format!("slo.{class}"),
                    format!(
                        "`{class}` is not a workload class of the manifest; its classes are {}",
                        quoted(&classes.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>())
                    ),
                ));
            }
        }
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
                            "`{what}` is neither a cell id nor a workload class of the manifest or the `workloads` section"
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
                            "`{what}` is neither a cell id nor a workload class of the manifest or the `workloads` section"
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
                        "`{}` is not a workload class of the manifest or the `workloads` section ({})",
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
                            "`{class}` is not a workload class of the manifest or the `workloads` section ({})",
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
