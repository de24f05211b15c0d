//! A [`RunRequest`] (what was asked, typed) → a checked [`RunConfig`]: the manifest loaded,
//! the cell chosen, URLs parsed, durations in units, the API key read from its variable, the
//! shard resolved against the scheduler's environment, the output folder checked.
//! Every refusal names the flag at fault and why ([`ConfigError`]); nothing here touches the
//! network.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::endpoint::{Endpoint, MetricsTarget, metrics_target};
pub use super::request::{
    ArmRequest, CpuPlacement, LoadRequest, RUNTIME_KEY, RepeatRequest, RunRequest, ShardRequest,
    Timeouts,
};
use crate::artifact::{self, ArmConfig};
use crate::manifest::{Thinking, WorkloadManifest};
use crate::workload::cells::{Cell, CellQuery};
use crate::workload::request::{Api, ApiKey};

pub use super::error::ConfigError;
use super::error::flag;

pub use crate::artifact::{Arrivals, Schedule};

/// A checked `run` configuration.
#[derive(Debug)]
pub struct RunConfig {
    pub manifest: WorkloadManifest,
    pub cell: Cell,
    pub off_manifest: bool,
    pub arm: artifact::Arm,
    /// Whether `--set runtime=...` named the runtime (otherwise it comes from the server).
    pub runtime_given: bool,
    pub endpoints: Vec<Endpoint>,
    pub metrics: Vec<MetricsTarget>,
    /// The GPU telemetry sources and how often they are read.
    pub telemetry: super::telemetry::sampler::Telemetry,
    pub model: Option<String>,
    pub api: Api,
    pub api_key: Option<ApiKey>,
    /// Removes the key's value from everything the capture writes.
    pub redactor: artifact::Redactor,
    pub schedule: Schedule,
    /// The start ramp (`--ramp`; see `artifact::Workload::ramp_s`).
    pub ramp: Option<Duration>,
    /// The search this run is a probe of (`--probe`; see `artifact::Workload::probe`).
    pub probe: Option<String>,
    pub warmup: u64,
    pub timeouts: super::hotpath::Timeouts,
    pub quiet: bool,
    /// Run the hot-path threads SCHED_FIFO when permitted.
    pub realtime: bool,
    /// Where the hot path's worker and the writer run (`--cpu`).
    pub cpu: CpuPlacement,
    pub thinking_disabled: bool,
    /// Leave the thinking switch out of every request (`--no-thinking-switch`).
    pub omit_thinking_switch: bool,
    /// The cell id with the API's, the schedule's, the ramp's and the probe's suffixes
    /// (`Api::cell_id_suffix`, `Schedule::cell_id_suffix`, …): `run.json` `cell_id` and the
    /// artifact's folder name.
    pub cell_id: String,
    /// Which repeat of the cell this run is.
    pub repeat: artifact::Repeat,
    /// The shard of a multi-host run this process is, if it is one.
    pub shard: Option<ShardPlan>,
    /// The servers' prefix caches: reset before the run, salt off for a warm cell.
    pub cache: crate::capture::request::CacheRequest,
    /// The artifact folder: `out/<campaign_id>/<arm>/<cell_id>`, or, for a cell recorded
    /// more than once, `…/<cell_id>/repeat-<k>`.
    pub artifact_dir: PathBuf,
    /// The command line with secrets removed.
    pub command_line: Vec<String>,
}

/// One shard of a run driven from several client hosts.
#[derive(Debug, Clone)]
pub struct ShardPlan {
    pub spec: crate::workload::shard::ShardSpec,
    /// The published instant of the first wave, UTC ns since the epoch.
    pub start_at_utc_ns: i128,
    /// How late the shard may release its first wave and still run.
    pub margin: Duration,
    /// The run group's id: every shard's `run_id`.
    pub run_group: String,
}

/// How late a shard may start by default: 1 s, far beyond a synchronised clock's error and
/// the scheduling noise of a wait, far below a wave's length.
pub const DEFAULT_START_MARGIN: Duration = Duration::from_secs(1);

/// The process environment, for [`RunConfig::from_request`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn seconds(name: &'static str, v: Option<f64>, default: Duration) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(flag(name, s, "must be a positive number of seconds")),
    }
}

pub use super::release::MAX_SCHEDULE_S;

/// A folder name under the output root ([`artifact::path_component`]).
fn path_component(name: &'static str, v: &str) -> Result<(), ConfigError> {
    artifact::path_component(v).map_err(|why| flag(name, v, why))
}

/// The default metrics URL of a replica: its origin + `/metrics`.
fn default_metrics_url(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("http://{authority}/metrics")
}

impl RunConfig {
    /// Check `request` against the manifest, the output folder and the environment (`env`
    /// reads variables: the API key, the shard index of `--shard auto`).
    pub fn from_request(
        request: RunRequest,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let a = &request;
        let cpu = check_cpu(a.host.cpu.unwrap_or(CpuPlacement::Start))?;
        let manifest = WorkloadManifest::load(&a.manifest)?;
        let declared = match &a.cell.workloads {
            Some(file) => {
                crate::workload::declared::load_section(file).map_err(ConfigError::Workloads)?
            }
            None => Vec::new(),
        };
        let chosen = crate::workload::declared::choose_among(
            &manifest,
            &declared,
            a.cell
                .workloads
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or(Path::new(".")),
            &CellQuery {
                class: a.cell.class.clone(),
                context: a.cell.context,
                concurrency: a.cell.concurrency,
                requests: a.cell.requests,
                rate: a.load.rate,
                off_manifest: a.cell.off_manifest,
            },
        )?;
        let cell = chosen.cell;
        check_cell(&cell)?;
        if a.load.warmup > 100_000 {
            return Err(flag("--warmup", a.load.warmup, "at most 100000"));
        }
        path_component("--arm", &a.arm.name)?;
        let repeat = repeat_of(a.repeat)?;
        let endpoints = a
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, u)| Endpoint::parse(i as u32, u))
            .collect::<Result<Vec<_>, _>>()
            .map_err(ConfigError::Endpoint)?;
        let metrics = metrics_targets(a)?;
        let api_key = api_key(a.api_key_env.as_deref(), env)?;
        let command_line = artifact::redact_args(
            &a.to_argv(),
            &api_key.as_deref().map(|k| vec![k]).unwrap_or_default(),
        );
        // The key's value is kept out of everything written, whatever the server echoes;
        // configuration values under secret-like keys (`--set hf_token=…`) too.
        let redactor = artifact::Redactor::new(api_key.as_slice());
        let arm = arm_of(&a.arm, a.arm_config(), &redactor)?;
        let api_key = api_key.map(ApiKey::new);
        if let Some(k) = &api_key {
            k.header_value().map_err(|_| {
                flag(
                    "--api-key-env",
                    a.api_key_env.as_deref().unwrap_or_default(),
                    "the key holds characters that cannot go in an HTTP header",
                )
            })?;
        }
        let (schedule, ramp) = super::release::schedule_for(a, &cell)?;
        if cell.class == crate::workload::cells::FUNCTIONAL {
            check_functional(a, &cell, schedule)?;
        } else if cell.trace.is_none() {
            check_prompt_fits(&manifest, &cell, a.api)?;
            if let Some(g) = cell.groups
                && g.shared_tokens + crate::workload::declared::MIN_OWN_TOKENS > cell.context
            {
                return Err(flag(
                    "--context",
                    cell.context,
                    format!(
                        "class `{}` shares {} prompt tokens per group: give a context of at \
                         least {} tokens",
                        cell.class,
                        g.shared_tokens,
                        g.shared_tokens + crate::workload::declared::MIN_OWN_TOKENS
                    ),
                ));
            }
        }
        let timeouts = timeouts_of(&a.timeouts)?;
        if a.cache.reset && a.shard.is_some() {
            return Err(flag(
                "--reset-cache",
                "",
                "a run from several client hosts cannot reset the caches from each: reset \
                 them before the run group starts",
            ));
        }
        if let Some(t) = a.cache.reset_timeout_s
            && (!a.cache.reset || !t.is_finite() || t <= 0.0 || t > 3600.0)
        {
            return Err(flag(
                "--reset-timeout",
                t,
                "give above 0 and at most 3600 seconds, with --reset-cache",
            ));
        }
        check_probe(a.probe.as_deref())?;
        let cell_id = format!(
            "{}{}{}{}{}",
            cell.id(),
            a.api.cell_id_suffix(),
            schedule.cell_id_suffix(),
            artifact::ramp_cell_id_suffix(ramp.map(|r| r.as_secs_f64())),
            artifact::run::probe_cell_id_suffix(a.probe.as_deref())
        );
        let cell_dir = artifact::artifact_dir(&a.out, &manifest.campaign_id, &a.arm.name, &cell_id)
            .map_err(|why| flag("--manifest", a.manifest.display(), why))?;
        let shard = match &a.shard {
            None => None,
            Some(s) => Some(shard_plan(
                s,
                env,
                &ShardOf {
                    campaign_id: &manifest.campaign_id,
                    arm: &a.arm.name,
                    cell: &cell,
                    cell_id: &cell_id,
                    repeat,
                    repeat_index_given: a.repeat.is_some_and(|r| r.index.is_some()),
                    replicas: endpoints.len(),
                },
            )?),
        };
        let artifact_dir = artifact_dir_of(&a.out, &cell_dir, repeat, shard.as_ref())?;
        if let Some(m) = &a.model
            && (m.is_empty() || m.contains(['"', '\n']))
        {
            return Err(flag("--model", m, "must be a non-empty model name"));
        }
        Ok(Self {
            thinking_disabled: manifest.selection.thinking == Thinking::Disabled,
            omit_thinking_switch: a.host.no_thinking_switch,
            runtime_given: a.arm.runtime.is_some(),
            manifest,
            cell,
            off_manifest: chosen.off_manifest,
            arm,
            endpoints,
            metrics,
            telemetry: super::telemetry::sampler::declared(&a.telemetry)?,
            model: a.model.clone(),
            api: a.api,
            api_key,
            redactor,
            schedule,
            ramp,
            probe: a.probe.clone(),
            warmup: a.load.warmup,
            timeouts,
            quiet: a.host.quiet,
            realtime: !a.host.no_realtime,
            cpu,
            cell_id,
            repeat,
            shard,
            cache: a.cache,
            artifact_dir,
            command_line,
        })
    }
}

/// `--cpu N` must be a CPU this process may run on.
fn check_cpu(cpu: CpuPlacement) -> Result<CpuPlacement, ConfigError> {
    if let CpuPlacement::Cpu(n) = cpu {
        let allowed = crate::realtime::allowed_cpus();
        if !allowed.contains(&n) {
            let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
            return Err(flag(
                "--cpu",
                n,
                format!(
                    "not among the CPUs this process may use ({}); name one of them, or `any`",
                    list.join(", ")
                ),
            ));
        }
    }
    Ok(cpu)
}

/// The chosen cell's numbers within what a run can record.
fn check_cell(cell: &Cell) -> Result<(), ConfigError> {
    if cell.concurrency == 0 {
        return Err(flag("--concurrency", 0, "must be at least 1"));
    }
    if cell.requests == 0 || cell.requests > u64::from(u32::MAX / 2) {
        return Err(flag(
            "--requests",
            cell.requests,
            "must be between 1 and 2^31",
        ));
    }
    if cell.context == 0 {
        return Err(flag("--context", 0, "must be at least 1 token"));
    }
    if cell.context > crate::manifest::MAX_PROMPT_TOKEN_TARGET {
        return Err(flag(
            "--context",
            cell.context,
            format!(
                "at most {} tokens (2^24): no served model reads a prompt that long",
                crate::manifest::MAX_PROMPT_TOKEN_TARGET
            ),
        ));
    }
    Ok(())
}

/// The arm as run.json records it: each key once, `runtime` only from `--set`, the
/// defaults' keys configuration keys, secret values redacted.
fn arm_of(
    request: &ArmRequest,
    config: Vec<(String, String)>,
    redactor: &artifact::Redactor,
) -> Result<artifact::Arm, ConfigError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (k, v) in config {
        if pairs.iter().any(|(e, _)| *e == k) {
            return Err(flag(
                "--set",
                format!("{k}={v}"),
                format!("key `{k}` is set twice"),
            ));
        }
        pairs.push((k, v));
    }
    let mut defaults: Vec<(String, String)> = Vec::new();
    for (k, v) in &request.defaults {
        if k.is_empty() || k == RUNTIME_KEY {
            return Err(flag(
                "--default",
                format!("{k}={v}"),
                "the key must be a configuration key (not empty, not runtime)",
            ));
        }
        if defaults.iter().any(|(e, _)| e == k) {
            return Err(flag(
                "--default",
                format!("{k}={v}"),
                format!("key `{k}` is given twice"),
            ));
        }
        // Every default is recorded, also for a key the arm declares (which it does not
        // inherit): the campaign's status quo tells which side of a control is the control.
        defaults.push((k.clone(), v.clone()));
    }
    for (key, value) in pairs.iter_mut() {
        if artifact::is_secret_name(key) {
            *value = artifact::REDACTED.to_owned();
        } else {
            redactor.in_place(value);
        }
    }
    Ok(artifact::Arm {
        name: request.name.clone(),
        stage: request.stage.clone().unwrap_or_default(),
        runtime: request.runtime.clone().unwrap_or_default(),
        config: ArmConfig(pairs),
        defaults: ArmConfig(defaults),
    })
}

/// Which repeat of how many.
fn repeat_of(repeat: Option<RepeatRequest>) -> Result<artifact::Repeat, ConfigError> {
    let Some(RepeatRequest { of, index }) = repeat else {
        return Ok(artifact::Repeat::default());
    };
    if of == 0 || of > 1000 {
        return Err(flag("--repeat", of, "must be between 1 and 1000"));
    }
    match index {
        None => Ok(artifact::Repeat { index: 1, of }),
        Some(k) if k == 0 || k > of => Err(flag(
            "--repeat-index",
            k,
            format!("must be between 1 and --repeat ({of})"),
        )),
        Some(k) => Ok(artifact::Repeat { index: k, of }),
    }
}

/// Each replica's metrics target: given one per endpoint, or each endpoint's origin +
/// `/metrics`.
fn metrics_targets(a: &RunRequest) -> Result<Vec<MetricsTarget>, ConfigError> {
    let urls: Vec<String> = match a.metrics_urls.len() {
        0 => a.endpoints.iter().map(|u| default_metrics_url(u)).collect(),
        n if n == a.endpoints.len() => a.metrics_urls.clone(),
        n => {
            return Err(flag(
                "--metrics-url",
                n,
                format!(
                    "give one per --endpoint ({} endpoints, {n} metrics URLs)",
                    a.endpoints.len()
                ),
            ));
        }
    };
    urls.iter()
        .enumerate()
        .map(|(i, u)| metrics_target(i as u32, u))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ConfigError::MetricsUrl)
}

/// The API key from the variable `--api-key-env` names.
fn api_key(
    var: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    let Some(var) = var else { return Ok(None) };
    match env(var) {
        Some(k) if !k.is_empty() => Ok(Some(k)),
        _ => Err(flag(
            "--api-key-env",
            var,
            "that environment variable is not set (or empty)",
        )),
    }
}

/// The functional checks choose their own APIs and concurrency (see `functional`).
fn check_functional(a: &RunRequest, cell: &Cell, schedule: Schedule) -> Result<(), ConfigError> {
    if !cell.requests.is_multiple_of(4) {
        return Err(flag(
            "--requests",
            cell.requests,
            "a functional run splits its requests evenly over its four checks: give a multiple of 4",
        ));
    }
    if a.api != Api::Chat {
        return Err(flag(
            "--api",
            a.api.as_str(),
            "a functional run sends each check to its own API (chat, and responses for the Responses check); leave --api out",
        ));
    }
    if a.load.warmup > 0 {
        return Err(flag(
            "--warmup",
            a.load.warmup,
            "a functional run has no warm-up requests",
        ));
    }
    if let Some(r) = a.load.ramp {
        return Err(flag(
            "--ramp",
            r,
            "a functional run starts its checks at once",
        ));
    }
    if !matches!(schedule, Schedule::Closed) {
        return Err(flag(
            "--rate",
            a.load.rate.unwrap_or_default(),
            "a functional run is closed loop",
        ));
    }
    if let Some(s) = &a.shard {
        return Err(flag(
            "--shard",
            s.shard,
            "the functional checks run one check after another, some one request at a time: \
             record them from one host",
        ));
    }
    Ok(())
}

/// The prompt's fixed part (prefix, system text, instruction) costs at least one token per
/// word: a target below it can never be met.
fn check_prompt_fits(
    manifest: &WorkloadManifest,
    cell: &Cell,
    api: Api,
) -> Result<(), ConfigError> {
    let fixed = crate::workload::prompt::PromptBuilder::new(cell.prompt_spec(
        manifest.selection.random_prefix_seed,
        "",
        api.prompt_form(),
    ))
    .build(0, 0)
    .content
    .words();
    if cell.context < fixed {
        return Err(flag(
            "--context",
            cell.context,
            format!(
                "the prompt's fixed part (unique prefix, system text, instruction) is already {fixed} words, \
                 at least {fixed} tokens on any tokenizer: give a context of at least {fixed} tokens"
            ),
        ));
    }
    Ok(())
}

fn timeouts_of(t: &Timeouts) -> Result<super::hotpath::Timeouts, ConfigError> {
    let d = super::hotpath::Timeouts::default();
    Ok(super::hotpath::Timeouts {
        connect: d.connect,
        first_byte: seconds("--timeout-first-byte", t.first_byte_s, d.first_byte)?,
        idle: seconds("--timeout-idle", t.idle_s, d.idle)?,
        total: seconds("--timeout-total", t.total_s, d.total)?,
    })
}

/// A probe's search name: lowercase letters, digits and `-`.
fn check_probe(probe: Option<&str>) -> Result<(), ConfigError> {
    if let Some(probe) = probe
        && (probe.is_empty()
            || !probe
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    {
        return Err(flag(
            "--probe",
            probe,
            "must be a search name of lowercase letters, digits and `-` (e.g. capacity)",
        ));
    }
    Ok(())
}

/// What a shard's plan is derived from besides its flags.
struct ShardOf<'a> {
    campaign_id: &'a str,
    arm: &'a str,
    cell: &'a Cell,
    cell_id: &'a str,
    repeat: artifact::Repeat,
    repeat_index_given: bool,
    replicas: usize,
}

/// The shard this process is, its published instant within reach, its workers an even share.
fn shard_plan(
    s: &ShardRequest,
    env: &dyn Fn(&str) -> Option<String>,
    of: &ShardOf<'_>,
) -> Result<ShardPlan, ConfigError> {
    let spec = s
        .shard
        .resolve(env)
        .map_err(|why| flag("--shard", s.shard, why))?;
    let t = &s.start_at;
    let at = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .map_err(|e| {
            flag(
                "--start-at",
                t,
                format!("expected RFC 3339 UTC, e.g. 2026-12-03T15:00:00Z ({e})"),
            )
        })?;
    if of.repeat.of > 1 && !of.repeat_index_given {
        return Err(flag(
            "--shard",
            s.shard,
            "with --repeat N give --repeat-index K: each repeat of a sharded cell is its own run \
             group with its own --start-at",
        ));
    }
    let workers = u64::from(of.cell.concurrency) * of.replicas as u64;
    if !workers.is_multiple_of(u64::from(spec.of)) {
        return Err(flag(
            "--shard",
            s.shard,
            format!(
                "the cell's {workers} workers (concurrency {} × {} replicas) must split evenly \
                 over {} shards, so that every shard drives as many and the shards together \
                 keep the cell's concurrency",
                of.cell.concurrency, of.replicas, spec.of
            ),
        ));
    }
    let margin = seconds("--start-margin", s.start_margin, DEFAULT_START_MARGIN)?;
    let start_at_utc_ns = at.unix_timestamp_nanos();
    let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
    let ahead_s = (start_at_utc_ns - now) as f64 / 1e9;
    if ahead_s < -margin.as_secs_f64() {
        return Err(flag(
            "--start-at",
            t,
            format!(
                "is {:.1} s in the past by this host's clock: publish an instant far enough \
                 ahead for every shard to get ready",
                -ahead_s
            ),
        ));
    }
    if ahead_s > 86_400.0 {
        return Err(flag("--start-at", t, "is more than a day ahead"));
    }
    let run_group = match &s.run_group {
        Some(g) => {
            path_component("--run-group", g)?;
            g.clone()
        }
        None => crate::workload::shard::run_group(
            of.campaign_id,
            of.arm,
            of.cell_id,
            of.repeat.index,
            spec.of,
            start_at_utc_ns,
        ),
    };
    Ok(ShardPlan {
        spec,
        start_at_utc_ns,
        margin,
        run_group,
    })
}

/// The artifact folder, checked against what `out` already holds: a run's folder holds its
/// one run or its shards' folders, never both; a cell's its one run or its repeats.
fn artifact_dir_of(
    out: &Path,
    cell_dir: &Path,
    repeat: artifact::Repeat,
    shard: Option<&ShardPlan>,
) -> Result<PathBuf, ConfigError> {
    let run_dir = if repeat.of > 1 {
        cell_dir.join(artifact::run::repeat_folder(repeat.index))
    } else {
        cell_dir.to_owned()
    };
    let has_shards = std::fs::read_dir(&run_dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("shard-"))
    });
    match shard {
        Some(_) if run_dir.join(artifact::RUN_JSON).exists() => {
            return Err(flag(
                "--out",
                out.display(),
                format!(
                    "`{}` holds a run from one host; the shards of a run group go in \
                     shard-<I>-of-<N> folders of a folder of their own: choose another --out",
                    run_dir.display()
                ),
            ));
        }
        None if has_shards => {
            return Err(flag(
                "--out",
                out.display(),
                format!(
                    "`{}` holds the shards of a run group: choose another --out",
                    run_dir.display()
                ),
            ));
        }
        _ => {}
    }
    let artifact_dir = match shard {
        Some(plan) => run_dir.join(plan.spec.folder()),
        None => run_dir,
    };
    check_out(out, &artifact_dir)?;
    check_layout(out, cell_dir, repeat)?;
    Ok(artifact_dir)
}

/// A cell's folder holds either its one run or its repeats' folders, never both: repeats
/// are not recorded into a folder that holds a run, nor a single run beside repeats.
fn check_layout(out: &Path, cell_dir: &Path, repeat: artifact::Repeat) -> Result<(), ConfigError> {
    let bad = |reason: String| ConfigError::Out {
        path: out.to_owned(),
        reason,
    };
    if repeat.of > 1 && cell_dir.join(artifact::RUN_JSON).exists() {
        return Err(bad(format!(
            "`{}` holds a single run of this cell; its repeats go in repeat-<k> folders beside \
             no run: move that run away or choose another output folder",
            cell_dir.display()
        )));
    }
    if repeat.of == 1
        && std::fs::read_dir(cell_dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("repeat-"))
        })
    {
        return Err(bad(format!(
            "`{}` holds repeats of this cell (repeat-<k> folders): record another repeat with \
             --repeat N --repeat-index K, or choose another output folder",
            cell_dir.display()
        )));
    }
    Ok(())
}

/// The output root must be a folder (or not exist yet); the artifact folder must not hold a
/// run already.
fn check_out(out: &Path, dir: &Path) -> Result<(), ConfigError> {
    let bad = |reason: String| ConfigError::Out {
        path: out.to_owned(),
        reason,
    };
    // Walk up: any existing ancestor that is not a folder makes the path unusable.
    let mut p = Some(dir);
    while let Some(cur) = p {
        if cur.exists() {
            if !cur.is_dir() {
                return Err(bad(format!(
                    "`{}` exists and is not a folder; choose another output folder",
                    cur.display()
                )));
            }
            break;
        }
        p = cur.parent();
    }
    if dir.join(artifact::RUN_JSON).exists() {
        return Err(bad(format!(
            "`{}` already holds a run; move it away or choose another output folder",
            dir.display()
        )));
    }
    Ok(())
}
