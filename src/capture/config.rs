//! Raw `run` arguments ([`RunRequest`], what was typed, as plain values) → a checked
//! [`RunConfig`]: the manifest loaded, the cell chosen, URLs
//! parsed, durations in units, the API key read from its variable, the output folder checked.
//! Every refusal names the flag at fault and why ([`ConfigError`]); nothing here touches the
//! network.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::endpoint::{Endpoint, EndpointError};
use super::hotpath::Timeouts;
use crate::artifact::{self, ArmConfig};
use crate::manifest::{ManifestError, Thinking, WorkloadManifest};
use crate::workload::cells::{self, Cell, CellError, CellQuery};
use crate::workload::request::{Api, ApiKey};

/// Why `run` arguments were refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Cell(#[from] CellError),
    #[error("--endpoint: {0}")]
    Endpoint(#[source] EndpointError),
    #[error("--metrics-url: {0}")]
    MetricsUrl(#[source] EndpointError),
    #[error("{flag} `{value}`: {reason}")]
    Flag {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("--out `{}`: {reason}", path.display())]
    Out { path: PathBuf, reason: String },
}

fn flag(flag: &'static str, value: impl ToString, reason: impl Into<String>) -> ConfigError {
    ConfigError::Flag {
        flag,
        value: value.to_string(),
        reason: reason.into(),
    }
}

pub use crate::artifact::{Arrivals, Schedule};

/// Where one replica's Prometheus metrics are read.
#[derive(Debug, Clone)]
pub struct MetricsTarget {
    /// The URL as given or derived (for run.json and messages).
    pub url: String,
    /// Host and port to connect to.
    pub server: Endpoint,
    /// Request target, e.g. `/metrics`.
    pub path: String,
}

/// What `anvil-capture run` was given, unchecked: one field per flag (see
/// `anvil-capture run --help` for each one's meaning). Built by the command line
/// (`crate::app::capture`) and by in-process callers such as the demo.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub manifest: PathBuf,
    pub class: String,
    pub context: Option<u64>,
    pub concurrency: Option<u32>,
    pub requests: Option<u64>,
    pub off_manifest: bool,
    pub arm: String,
    pub stage: Option<String>,
    /// `KEY=VALUE`, order kept.
    pub set: Vec<String>,
    /// The campaign's defaults, `KEY=VALUE`, all recorded: inherited for the keys `set` does
    /// not declare.
    pub defaults: Vec<String>,
    /// Record the cell this many times (`--repeat`), each run in its own folder.
    pub repeat: Option<u32>,
    /// Record only this repeat (1-based) of the `repeat` (`--repeat-index`).
    pub repeat_index: Option<u32>,
    /// `--shard I/N | auto/N | auto`: this process is one shard of a multi-host run.
    pub shard: Option<String>,
    /// `--start-at`: the published UTC instant every shard releases its first wave at.
    pub start_at: Option<String>,
    /// `--start-margin`: seconds a shard may be late and still run.
    pub start_margin: Option<f64>,
    /// `--run-group`: the run group's id (default: derived alike by every shard).
    pub run_group: Option<String>,
    pub endpoints: Vec<String>,
    pub model: Option<String>,
    /// `chat`, `responses` or `completions`.
    pub api: String,
    pub api_key_env: Option<String>,
    pub rate: Option<f64>,
    pub poisson: bool,
    /// Seconds over which the load starts (`--ramp`).
    pub ramp: Option<f64>,
    /// The search this run is a probe of (`--probe`).
    pub probe: Option<String>,
    pub warmup: u64,
    pub metrics_urls: Vec<String>,
    pub timeout_first_byte: Option<f64>,
    pub timeout_idle: Option<f64>,
    pub timeout_total: Option<f64>,
    pub quiet: bool,
    pub no_thinking_switch: bool,
    pub no_realtime: bool,
    /// `--cpu`; `None` is the default, [`CpuPlacement::Start`].
    pub cpu: Option<CpuPlacement>,
    pub out: PathBuf,
}

/// Where the recorder's two busy threads run: the runtime's worker, which reads the sockets
/// and stamps events, and the writer, which parses and encodes them (`--cpu`).
///
/// By default they share one CPU, the one the run starts on: each event's bytes are then
/// written and read in one core's cache, and neither thread is moved between cores.
/// Measured (BENCHMARKS.md, recorder fidelity): 0.7 µs (9%) less CPU per event at 256
/// streams, receive lag unchanged. One CPU carries both up to roughly 150,000 events a second
/// on the benchmark's machine; above that, or with a busy server process on the same CPU,
/// `any` leaves them to the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuPlacement {
    /// Both on the CPU the run starts on.
    Start,
    /// Both on this CPU.
    Cpu(usize),
    /// Wherever the scheduler puts them.
    Any,
}

impl std::str::FromStr for CpuPlacement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "any" => Ok(CpuPlacement::Any),
            "start" => Ok(CpuPlacement::Start),
            n => n
                .parse()
                .map(CpuPlacement::Cpu)
                .map_err(|_| format!("`{n}` is not a CPU number, `start` or `any`")),
        }
    }
}

impl CpuPlacement {
    /// The one CPU both threads go on, deciding `Start` now (call on the thread that starts
    /// the run); `None` for `Any` or a system that does not say where it runs.
    pub fn resolve(self) -> Option<usize> {
        match self {
            CpuPlacement::Start => crate::realtime::current_cpu(),
            CpuPlacement::Cpu(n) => Some(n),
            CpuPlacement::Any => None,
        }
    }
}

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
    pub timeouts: Timeouts,
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

/// The longest an open-loop schedule may take to release its requests, seconds.
pub const MAX_SCHEDULE_S: f64 = 86_400.0;

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

fn metrics_target(replica: u32, url: &str) -> Result<MetricsTarget, EndpointError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| EndpointError::Url {
            url: url.to_owned(),
            reason: "expected a URL starting with http://".into(),
        })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let server = Endpoint::parse(replica, &format!("http://{authority}"))?;
    server.path_uri(path)?;
    Ok(MetricsTarget {
        url: url.to_owned(),
        server,
        path: path.to_owned(),
    })
}

impl RunConfig {
    /// Check `a`; `argv` is the command line to record (redacted here), `env` reads
    /// environment variables (the API key).
    pub fn from_request(
        a: RunRequest,
        argv: Vec<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let cpu = a.cpu.unwrap_or(CpuPlacement::Start);
        if let CpuPlacement::Cpu(n) = cpu {
            let allowed = crate::realtime::allowed_cpus();
            if !allowed.contains(&n) {
                let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
                return Err(flag(
                    "--cpu",
                    n,
                    format!(
                        "not among the CPUs this process may use ({}); name one of them, or \
                         `any`",
                        list.join(", ")
                    ),
                ));
            }
        }
        let manifest = WorkloadManifest::load(&a.manifest)?;
        let chosen = cells::choose(
            &manifest,
            &CellQuery {
                class: a.class.clone(),
                context: a.context,
                concurrency: a.concurrency,
                requests: a.requests,
                off_manifest: a.off_manifest,
            },
        )?;
        let cell = chosen.cell;
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
        if a.warmup > 100_000 {
            return Err(flag("--warmup", a.warmup, "at most 100000"));
        }
        path_component("--arm", &a.arm)?;

        let mut pairs: Vec<(String, String)> = Vec::new();
        for s in &a.set {
            let Some((k, v)) = s.split_once('=') else {
                return Err(flag("--set", s, "expected KEY=VALUE"));
            };
            let k = k.trim();
            if k.is_empty() {
                return Err(flag("--set", s, "the key is empty"));
            }
            if pairs.iter().any(|(e, _)| e == k) {
                return Err(flag("--set", s, format!("key `{k}` is set twice")));
            }
            pairs.push((k.to_owned(), v.to_owned()));
        }
        let mut defaults: Vec<(String, String)> = Vec::new();
        for s in &a.defaults {
            let Some((k, v)) = s.split_once('=') else {
                return Err(flag("--default", s, "expected KEY=VALUE"));
            };
            let k = k.trim();
            if k.is_empty() || k == "runtime" {
                return Err(flag(
                    "--default",
                    s,
                    "the key must be a configuration key (not empty, not runtime)",
                ));
            }
            if defaults.iter().any(|(e, _)| e == k) {
                return Err(flag("--default", s, format!("key `{k}` is given twice")));
            }
            // Every default is recorded, also for a key the arm declares (which it does not
            // inherit): the campaign's status quo tells which side of a control is the control.
            defaults.push((k.to_owned(), v.to_owned()));
        }
        let repeat = match (a.repeat, a.repeat_index) {
            (None, None) => artifact::Repeat::default(),
            (None, Some(k)) => {
                return Err(flag(
                    "--repeat-index",
                    k,
                    "needs --repeat N (the repeat count)",
                ));
            }
            (Some(n), _) if n == 0 || n > 1000 => {
                return Err(flag("--repeat", n, "must be between 1 and 1000"));
            }
            (Some(n), None) => artifact::Repeat { index: 1, of: n },
            (Some(n), Some(k)) if k == 0 || k > n => {
                return Err(flag(
                    "--repeat-index",
                    k,
                    format!("must be between 1 and --repeat ({n})"),
                ));
            }
            (Some(n), Some(k)) => artifact::Repeat { index: k, of: n },
        };
        let runtime = pairs
            .iter()
            .find(|(k, _)| k == "runtime")
            .map(|(_, v)| v.clone());
        let arm = artifact::Arm {
            name: a.arm.clone(),
            stage: a.stage.clone().unwrap_or_default(),
            runtime: runtime.clone().unwrap_or_default(),
            config: ArmConfig(pairs),
            defaults: ArmConfig(defaults),
        };

        let endpoints = a
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, u)| Endpoint::parse(i as u32, u))
            .collect::<Result<Vec<_>, _>>()
            .map_err(ConfigError::Endpoint)?;
        let metrics_urls: Vec<String> = match a.metrics_urls.len() {
            0 => a.endpoints.iter().map(|u| default_metrics_url(u)).collect(),
            n if n == endpoints.len() => a.metrics_urls.clone(),
            n => {
                return Err(flag(
                    "--metrics-url",
                    n,
                    format!(
                        "give one per --endpoint ({} endpoints, {n} metrics URLs)",
                        endpoints.len()
                    ),
                ));
            }
        };
        let metrics = metrics_urls
            .iter()
            .enumerate()
            .map(|(i, u)| metrics_target(i as u32, u))
            .collect::<Result<Vec<_>, _>>()
            .map_err(ConfigError::MetricsUrl)?;

        let api = Api::parse(&a.api)
            .ok_or_else(|| flag("--api", &a.api, "expected chat, responses or completions"))?;
        let api_key = match &a.api_key_env {
            None => None,
            Some(var) => match env(var) {
                Some(k) if !k.is_empty() => Some(k),
                _ => {
                    return Err(flag(
                        "--api-key-env",
                        var,
                        "that environment variable is not set (or empty)",
                    ));
                }
            },
        };
        let command_line = artifact::redact_args(
            &argv,
            &api_key.as_deref().map(|k| vec![k]).unwrap_or_default(),
        );
        // The key's value is kept out of everything written, whatever the server echoes;
        // configuration values under secret-like keys (`--set hf_token=…`) too.
        let redactor = artifact::Redactor::new(api_key.as_slice());
        let mut arm = arm;
        for (key, value) in arm.config.0.iter_mut() {
            if artifact::is_secret_name(key) {
                *value = artifact::REDACTED.to_owned();
            } else {
                redactor.in_place(value);
            }
        }
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

        let schedule = match a.rate {
            None => Schedule::Closed,
            Some(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Schedule::Open {
                rate_per_s: r,
                arrivals: if a.poisson {
                    Arrivals::Poisson
                } else {
                    Arrivals::Constant
                },
            },
            Some(r) => {
                return Err(flag(
                    "--rate",
                    r,
                    "must be a positive number of requests per second",
                ));
            }
        };
        let ramp = match a.ramp {
            None => None,
            Some(r) if r.is_finite() && r > 0.0 && r <= MAX_SCHEDULE_S => {
                Some(Duration::from_secs_f64(r))
            }
            Some(r) => {
                return Err(flag(
                    "--ramp",
                    r,
                    format!(
                        "must be a positive number of seconds, at most {MAX_SCHEDULE_S:.0} (a day)"
                    ),
                ));
            }
        };
        if let Some(rate) = schedule.rate_per_s() {
            // A ramp stretches the schedule by half its length (`schedule::ramped_offset_s`).
            let span_s = cell.requests.saturating_sub(1) as f64 / rate
                + ramp.map_or(0.0, |r| r.as_secs_f64() / 2.0);
            if span_s > MAX_SCHEDULE_S {
                return Err(flag(
                    "--rate",
                    rate,
                    format!(
                        "releases the {} requests over {span_s:.0} s; a schedule may span at most \
                         {MAX_SCHEDULE_S:.0} s (a day): give a higher rate or fewer requests",
                        cell.requests
                    ),
                ));
            }
        }
        if cell.class == crate::workload::cells::FUNCTIONAL {
            // The functional checks choose their own APIs and concurrency (see `functional`).
            if cell.requests % 4 != 0 {
                return Err(flag(
                    "--requests",
                    cell.requests,
                    "a functional run splits its requests evenly over its four checks: give a multiple of 4",
                ));
            }
            if api != Api::Chat {
                return Err(flag(
                    "--api",
                    &a.api,
                    "a functional run sends each check to its own API (chat, and responses for the Responses check); leave --api out",
                ));
            }
            if a.warmup > 0 {
                return Err(flag(
                    "--warmup",
                    a.warmup,
                    "a functional run has no warm-up requests",
                ));
            }
            if let Some(r) = a.ramp {
                return Err(flag(
                    "--ramp",
                    r,
                    "a functional run starts its checks at once",
                ));
            }
            if !matches!(schedule, Schedule::Closed) {
                return Err(flag(
                    "--rate",
                    a.rate.unwrap_or_default(),
                    "a functional run is closed loop",
                ));
            }
        }
        let d = Timeouts::default();
        let timeouts = Timeouts {
            connect: d.connect,
            first_byte: seconds("--timeout-first-byte", a.timeout_first_byte, d.first_byte)?,
            idle: seconds("--timeout-idle", a.timeout_idle, d.idle)?,
            total: seconds("--timeout-total", a.timeout_total, d.total)?,
        };

        if cell.class != crate::workload::cells::FUNCTIONAL {
            // The prompt's fixed part (prefix, system text, instruction) costs at least one
            // token per word: a target below it can never be met.
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
        }
        if a.poisson && a.rate.is_none() {
            return Err(flag(
                "--poisson",
                "",
                "needs --rate (Poisson arrivals at that mean rate)",
            ));
        }
        if let Some(probe) = &a.probe
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
        let cell_id = format!(
            "{}{}{}{}{}",
            cell.id(),
            api.cell_id_suffix(),
            schedule.cell_id_suffix(),
            artifact::ramp_cell_id_suffix(ramp.map(|r| r.as_secs_f64())),
            artifact::run::probe_cell_id_suffix(a.probe.as_deref())
        );
        let cell_dir = artifact::artifact_dir(&a.out, &manifest.campaign_id, &a.arm, &cell_id)
            .map_err(|why| flag("--manifest", a.manifest.display(), why))?;
        let shard = match (&a.shard, &a.start_at) {
            (None, None) => {
                if a.run_group.is_some() || a.start_margin.is_some() {
                    return Err(flag(
                        "--run-group",
                        a.run_group.as_deref().unwrap_or("--start-margin"),
                        "only for a sharded run: give --shard and --start-at",
                    ));
                }
                None
            }
            (Some(s), None) => {
                return Err(flag(
                    "--shard",
                    s,
                    "needs --start-at UTC: the instant every shard releases its first wave at",
                ));
            }
            (None, Some(t)) => {
                return Err(flag(
                    "--start-at",
                    t,
                    "only for a sharded run: give --shard",
                ));
            }
            (Some(s), Some(t)) => {
                let spec = crate::workload::shard::ShardSpec::parse(s, env)
                    .map_err(|why| flag("--shard", s, why))?;
                let at =
                    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                        .map_err(|e| {
                            flag(
                                "--start-at",
                                t,
                                format!("expected RFC 3339 UTC, e.g. 2026-12-03T15:00:00Z ({e})"),
                            )
                        })?;
                if repeat.of > 1 && a.repeat_index.is_none() {
                    return Err(flag(
                        "--shard",
                        s,
                        "with --repeat N give --repeat-index K: each repeat of a sharded cell is \
                         its own run group with its own --start-at",
                    ));
                }
                if cell.class == crate::workload::cells::FUNCTIONAL {
                    return Err(flag(
                        "--shard",
                        s,
                        "the functional checks run one check after another, some one request at \
                         a time: record them from one host",
                    ));
                }
                let workers = u64::from(cell.concurrency) * endpoints.len() as u64;
                if !workers.is_multiple_of(u64::from(spec.of)) {
                    return Err(flag(
                        "--shard",
                        s,
                        format!(
                            "the cell's {workers} workers (concurrency {} × {} replicas) must \
                             split evenly over {} shards, so that every shard drives as many and \
                             the shards together keep the cell's concurrency",
                            cell.concurrency,
                            endpoints.len(),
                            spec.of
                        ),
                    ));
                }
                let margin = seconds("--start-margin", a.start_margin, DEFAULT_START_MARGIN)?;
                let start_at_utc_ns = at.unix_timestamp_nanos();
                let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
                let ahead_s = (start_at_utc_ns - now) as f64 / 1e9;
                if ahead_s < -margin.as_secs_f64() {
                    return Err(flag(
                        "--start-at",
                        t,
                        format!(
                            "is {:.1} s in the past by this host's clock: publish an instant \
                             far enough ahead for every shard to get ready",
                            -ahead_s
                        ),
                    ));
                }
                if ahead_s > 86_400.0 {
                    return Err(flag("--start-at", t, "is more than a day ahead"));
                }
                let run_group = match &a.run_group {
                    Some(g) => {
                        path_component("--run-group", g)?;
                        g.clone()
                    }
                    None => crate::workload::shard::run_group(
                        &manifest.campaign_id,
                        &a.arm,
                        &cell_id,
                        repeat.index,
                        spec.of,
                        start_at_utc_ns,
                    ),
                };
                Some(ShardPlan {
                    spec,
                    start_at_utc_ns,
                    margin,
                    run_group,
                })
            }
        };
        let run_dir = if repeat.of > 1 {
            cell_dir.join(artifact::run::repeat_folder(repeat.index))
        } else {
            cell_dir.clone()
        };
        // A run's folder holds its one run or its shards' folders, never both.
        let has_shards = std::fs::read_dir(&run_dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        });
        match &shard {
            Some(_) if run_dir.join(artifact::RUN_JSON).exists() => {
                return Err(flag(
                    "--out",
                    a.out.display(),
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
                    a.out.display(),
                    format!(
                        "`{}` holds the shards of a run group: choose another --out",
                        run_dir.display()
                    ),
                ));
            }
            _ => {}
        }
        let artifact_dir = match &shard {
            Some(plan) => run_dir.join(plan.spec.folder()),
            None => run_dir,
        };
        check_out(&a.out, &artifact_dir)?;
        check_layout(&a.out, &cell_dir, repeat)?;
        if let Some(m) = &a.model
            && (m.is_empty() || m.contains(['"', '\n']))
        {
            return Err(flag("--model", m, "must be a non-empty model name"));
        }
        Ok(Self {
            thinking_disabled: manifest.selection.thinking == Thinking::Disabled,
            omit_thinking_switch: a.no_thinking_switch,
            manifest,
            cell,
            off_manifest: chosen.off_manifest,
            arm,
            runtime_given: runtime.is_some(),
            endpoints,
            metrics,
            model: a.model,
            api,
            api_key,
            redactor,
            schedule,
            ramp,
            probe: a.probe.clone(),
            warmup: a.warmup,
            timeouts,
            quiet: a.quiet,
            realtime: !a.no_realtime,
            cpu,
            cell_id,
            repeat,
            shard,
            artifact_dir,
            command_line,
        })
    }
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
