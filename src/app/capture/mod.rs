//! `anvil-capture`: the command line (`cells`, `run`, `recover`) as clap parses it, and
//! [`run`], which maps `run`'s flags into a [`RunRequest`] (the parsed arguments stay here;
//! the request is the library's plain type), has it checked ([`RunConfig::from_request`]),
//! records the cell and says how it ended.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::output::{self, Sink};
use super::{AppError, Exit};
use crate::artifact::Status;
use crate::capture::config::{self, RunConfig};
#[cfg(test)]
use crate::capture::config::{ConfigError, Schedule};
use crate::capture::request::{
    Api, ArmRequest, CellRequest, CpuPlacement, HostOptions, LoadRequest, RepeatRequest,
    RunRequest, ShardArg, ShardRequest, Timeouts, parse_pair,
};
use crate::manifest::WorkloadManifest;
use crate::workload::cells;

fn exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}    the run completed (failed requests are recorded, not fatal)\n  \
         {}    bad input: a malformed manifest, flag, URL, output folder or unreachable endpoint;\n       \
         nothing was written\n  \
         {}    the run could not be measured: calibration failed against the server, or the\n       \
         recorder failed while running (the artifact is marked `failed` and says why)\n  \
         {}  interrupted by SIGINT or SIGTERM (the artifact is finalised as `interrupted`)",
        Exit::Ok.code(),
        Exit::BadInput.code(),
        Exit::Failed.code(),
        Exit::Interrupted.code()
    )
}

/// The `--no-realtime` help, naming the priority the code actually uses.
fn realtime_help() -> String {
    format!(
        "Keep ordinary scheduling. By default the threads that read the sockets and stamp \
         events run SCHED_FIFO (priority {}) when the system permits, so that other work on \
         the client machine cannot delay a timestamp; the writer thread stays ordinary.",
        crate::realtime::CAPTURE_PRIORITY
    )
}

/// anvil-capture: record one cell of a workload manifest against one or more endpoints.
#[derive(Debug, Parser)]
#[command(name = "anvil-capture", version, after_help = exit_codes_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every cell the manifest defines, one per line, tab-separated, with a stable id.
    Cells(CellsArgs),
    /// Record one cell: drive the endpoints and write one artifact folder.
    ///
    /// The artifact goes to OUT/<campaign_id>/<arm>/<cell_id>/ and its path is the last line
    /// of standard output. Progress and the quick-look summary go to standard error.
    #[command(after_help = exit_codes_help())]
    Run(Box<RunArgs>),
    /// Turn what a killed run left in DIR into a valid artifact marked `interrupted`.
    Recover(RecoverArgs),
    /// Read the GPUs' telemetry for a while and hold each GPU's energy counter against its
    /// power integrated over the same time: within 5% passes (exit 0), outside fails (1).
    #[command(name = "gpu-check")]
    GpuCheck(super::gpu_check::GpuCheckArgs),
}

#[derive(Debug, Args)]
pub struct CellsArgs {
    /// The workload manifest (anvil-serving.benchmark-workload-manifest/v1).
    #[arg(long, value_name = "FILE")]
    pub manifest: PathBuf,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The artifact folder of the killed run.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// What `run` was given, unchecked.
#[derive(Debug, Args, Clone)]
// A negative number is a value, so `--requests -1` is refused as an invalid count rather than
// reported as a stray argument.
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// The workload manifest (anvil-serving.benchmark-workload-manifest/v1).
    #[arg(long, value_name = "FILE")]
    pub manifest: PathBuf,
    /// Workload class id from the manifest, e.g. headline-sustained-output.
    ///
    /// `functional` runs four checks in one artifact (the `check` column of requests), the
    /// requests split evenly over them (--requests must be a multiple of 4): `coding` (a
    /// named Python function in a fenced block) one at a time, `structured_json` (strict
    /// json_schema with a nested object, an enum, an array and required fields) all of its
    /// share at once, `tools` (four tool definitions behind a long shared system prompt, the
    /// canary as the `ticket` argument) all at once, and `responses` (streamed
    /// /v1/responses) one at a time. The verdicts are computed by `anvil sql`'s
    /// functional_results view.
    #[arg(long, value_name = "CLASS")]
    pub class: String,
    /// A JSON document whose `workloads` section declares classes beside the manifest's,
    /// e.g. the campaign file: `--class` may then name one of them (prefix groups: G groups
    /// of P shared prompt tokens; see the README's "Workloads beside the manifest").
    #[arg(long, value_name = "FILE")]
    pub workloads: Option<PathBuf>,
    /// Prompt token target (must be one of the manifest's for the class).
    #[arg(long, value_name = "TOKENS")]
    pub context: Option<u64>,
    /// Concurrent requests per replica.
    #[arg(long, value_name = "C")]
    pub concurrency: Option<u32>,
    /// Measured requests, all replicas together.
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    /// Allow values outside the manifest's lists; run.json then says `off_manifest: true`.
    #[arg(long)]
    pub off_manifest: bool,
    /// Arm name (a folder level of the artifact path), e.g. K12.
    #[arg(long, value_name = "NAME")]
    pub arm: String,
    /// Run-plan stage of the arm.
    #[arg(long, value_name = "NAME")]
    pub stage: Option<String>,
    /// Arm configuration as KEY=VALUE (repeatable, order kept), e.g. --set spec_depth=12.
    /// `runtime=...` also names the arm's runtime.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub set: Vec<(String, String)>,
    /// A campaign default, e.g. --default torch_compile=off (repeatable; run.json
    /// `arm.defaults`): the arm inherits it for a key it does not --set. One-variable controls
    /// compare declared and inherited keys alike (a key neither side records stays unknown),
    /// and the default value tells which side of a control is the status quo.
    #[arg(long = "default", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub defaults: Vec<(String, String)>,
    /// Record the cell N times, one run after another, each its own artifact in
    /// OUT/<campaign>/<arm>/<cell_id>/repeat-<k>/ (run.json `repeat`: k of N). Repeats give
    /// run-level figures (aggregate throughput, each metric's mean and percentiles) a 95%
    /// interval across runs; at least 3 for one with two degrees of freedom.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// With --repeat N, record only repeat K (1-based): how `anvil campaign run` records each
    /// repeat on its own, journaled and resumable.
    #[arg(long, value_name = "K", requires = "repeat")]
    pub repeat_index: Option<u32>,
    /// This process is one shard of a run driven from several client hosts: I/N (0-based)
    /// sends the cell's requests whose index is I modulo N, with the prompts one host would
    /// send, into OUT/.../<cell_id>/shard-<I>-of-<N>/. auto/N takes I from
    /// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or SLURM_PROCID; auto takes I and N
    /// from SLURM_PROCID and SLURM_NTASKS. The workers (concurrency slots × replicas) are
    /// split the same way, so the shards together keep the cell's concurrency. Needs
    /// --start-at. `anvil summary` and every view read the shards of one run group as one
    /// run, refused until every shard is there.
    #[arg(long, value_name = "I/N", requires = "start_at")]
    pub shard: Option<ShardArg>,
    /// With --shard: the published instant (RFC 3339, e.g. 2026-12-03T15:00:00Z) every shard
    /// releases its first wave at. Each shard gets ready (servers, calibration, warm-up)
    /// before it, waits, and refuses to start later than --start-margin after it; its clock
    /// starts at the instant, so the shards' times share one timeline (each records its
    /// host's clock error in run.json `shard.clock`).
    #[arg(long, value_name = "UTC", requires = "shard")]
    pub start_at: Option<String>,
    /// With --shard: how late (seconds) a shard may release its first wave and still run
    /// [default: 1].
    #[arg(long, value_name = "SECONDS", requires = "shard")]
    pub start_margin: Option<f64>,
    /// With --shard: the run group's id, every shard's run_id [default: derived alike by
    /// every shard from the campaign, arm, cell, repeat, shard count and --start-at].
    #[arg(long, value_name = "ID", requires = "shard")]
    pub run_group: Option<String>,
    /// After the run, upload the artifact beneath URL (s3://, gs://, az://) in the layout
    /// it has under OUT, run.json last (as `anvil push` does). The run is written locally
    /// first; a failed upload leaves it there and says how to push it.
    #[arg(long, value_name = "URL")]
    pub upload: Option<String>,
    /// Base URL of one replica (repeat for each replica), e.g. http://127.0.0.1:8000.
    #[arg(long = "endpoint", value_name = "URL", required = true)]
    pub endpoints: Vec<String>,
    /// Model name to send; default: the first model the first endpoint's /v1/models lists.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// API to drive: chat, responses or completions. Part of the workload fingerprint and,
    /// unless chat, of the cell id (`.responses`, `.completions`).
    #[arg(long, value_name = "API", default_value = "chat", value_parser = parse_api)]
    pub api: Api,
    /// Name of an environment variable holding a bearer token (never written anywhere).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Open loop: release R requests per second (all replicas together) instead of closed
    /// loop; each goes to the next free worker (C per replica), so C caps what is in flight.
    /// A session class (with --off-manifest): R sessions arriving per second (Poisson), at
    /// most C in flight per replica.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// With --rate: exponential (Poisson-process) gaps instead of constant ones.
    #[arg(long, requires = "rate")]
    pub poisson: bool,
    /// Start the load over S seconds instead of at once. Closed loop: the C workers of every
    /// replica start evenly over the span (worker k of W at k·S/W after the release, its
    /// first request's intended time); open loop: the release rate rises linearly from 0
    /// to --rate over it. Part of the workload fingerprint and of the cell id (`.rampS`).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub ramp: Option<f64>,
    /// Mark the run as a probe of a search (`capacity`, as `anvil campaign run`'s capacity
    /// search records its loads): part of the workload fingerprint, so a probe never matches
    /// a manifest cell's run, and of the cell id (`.probe-NAME`).
    #[arg(long, value_name = "NAME")]
    pub probe: Option<String>,
    /// Warm-up requests before the measured ones (recorded with kind `warmup`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,
    /// Prometheus URL of each replica, in replica order (default: the endpoint's origin +
    /// /metrics).
    #[arg(long = "metrics-url", value_name = "URL")]
    pub metrics_urls: Vec<String>,
    /// A GPU telemetry source to read beside the run: `dcgm=URL` (a DCGM exporter's
    /// /metrics, e.g. dcgm=http://gpu-host:9400/metrics), `nvidia-smi` or `nvml` (this host). Read
    /// before the first request (idle), every --telemetry-every seconds, and after the last;
    /// rows in telemetry.parquet. Repeat for several sources.
    #[arg(long = "telemetry", value_name = "SOURCE")]
    pub telemetry: Vec<String>,
    /// The arm's GPUs of each --telemetry source, as it numbers them (`0,1` for TP2); one
    /// per source in order, or one for all. Without it every GPU a source reports counts.
    #[arg(long = "telemetry-gpus", value_name = "LIST")]
    pub telemetry_gpus: Vec<String>,
    /// How often each source updates its values, s (a DCGM exporter's `-c` in seconds;
    /// 30 by default there): one per source, or one for all. Without it the views infer it.
    #[arg(long = "telemetry-interval", value_name = "S")]
    pub telemetry_interval: Vec<f64>,
    /// Seconds between telemetry readings during the run (default 1).
    #[arg(long, value_name = "S")]
    pub telemetry_every: Option<f64>,
    /// Seconds from sending a request to its first event (covers queueing and prefill).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub timeout_first_byte: Option<f64>,
    /// Longest silence between two events, in seconds.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub timeout_idle: Option<f64>,
    /// Longest request, in seconds.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub timeout_total: Option<f64>,
    /// Reset every replica's prefix cache before the run's `before` scrape, when it is idle
    /// (vLLM `POST /reset_prefix_cache`, mounted only with VLLM_SERVER_DEV_MODE=1; SGLang
    /// `POST /flush_cache`; llama.cpp `POST /slots/{id}?action=erase` for every slot, which
    /// llama-server answers only when started with `--slot-save-path`), and
    /// verify it with a probe prompt cached before and not after. run.json `cache_hygiene`
    /// records what was done.
    #[arg(long)]
    pub reset_cache: bool,
    /// With --reset-cache: how long to retry a server that refuses as busy, seconds (default
    /// 30); past it the run fails, its measured requests never sent.
    #[arg(long, value_name = "S")]
    pub reset_timeout: Option<f64>,
    /// Measure a warm cache on purpose: the prompts carry no per-run salt, so a run finds
    /// what an earlier run of the cell left in the cache. run.json workload `cache: "warm"`:
    /// a warm run is never matched with a cold one.
    #[arg(long)]
    pub warm_cache: bool,
    /// No progress bar and no quick-look summary.
    #[arg(long)]
    pub quiet: bool,
    /// Send no thinking switch. By default, when the manifest disables thinking, chat and
    /// Responses requests carry `chat_template_kwargs: {"enable_thinking": false}`; a server
    /// that refuses unknown request fields needs it left out. run.json `thinking_switch`
    /// records what was sent.
    #[arg(long)]
    pub no_thinking_switch: bool,
    /// Keep ordinary scheduling (see `realtime_help` for the default).
    #[arg(long, help = realtime_help())]
    pub no_realtime: bool,
    /// The CPU the recorder's socket reader and its writer share: a CPU number, `start` (the
    /// default: the CPU the run starts on) or `any` (leave them to the scheduler, e.g. above
    /// about 150,000 events a second, or beside a busy server process on the same machine).
    /// Sharing one core keeps each event's bytes in that core's cache.
    #[arg(long, value_name = "N|start|any")]
    pub cpu: Option<CpuPlacement>,
    /// Output root folder.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `--api`: chat, responses or completions.
fn parse_api(text: &str) -> Result<Api, String> {
    Api::parse(text).ok_or_else(|| format!("`{text}`: expected chat, responses or completions"))
}

impl From<RunArgs> for RunRequest {
    fn from(a: RunArgs) -> Self {
        let (runtime, config): (Vec<_>, Vec<_>) = a
            .set
            .into_iter()
            .partition(|(k, _)| k == crate::capture::config::RUNTIME_KEY);
        // A runtime given twice is refused by the check of the configuration (`set twice`).
        let mut runtime = runtime.into_iter().map(|(_, v)| v);
        let first = runtime.next();
        let mut config = config;
        config.extend(runtime.map(|v| (crate::capture::config::RUNTIME_KEY.to_owned(), v)));
        RunRequest {
            manifest: a.manifest,
            cell: CellRequest {
                class: a.class,
                context: a.context,
                concurrency: a.concurrency,
                requests: a.requests,
                off_manifest: a.off_manifest,
                workloads: a.workloads,
            },
            arm: ArmRequest {
                name: a.arm,
                stage: a.stage,
                config,
                defaults: a.defaults,
                runtime: first,
            },
            endpoints: a.endpoints,
            metrics_urls: a.metrics_urls,
            telemetry: crate::capture::request::TelemetryRequest {
                sources: a.telemetry,
                gpus: a.telemetry_gpus,
                intervals_s: a.telemetry_interval,
                every_s: a.telemetry_every,
            },
            model: a.model,
            api: a.api,
            api_key_env: a.api_key_env,
            load: LoadRequest {
                rate: a.rate,
                poisson: a.poisson,
                ramp: a.ramp,
                warmup: a.warmup,
            },
            timeouts: Timeouts {
                first_byte_s: a.timeout_first_byte,
                idle_s: a.timeout_idle,
                total_s: a.timeout_total,
            },
            repeat: a.repeat.map(|of| RepeatRequest {
                of,
                index: a.repeat_index,
            }),
            shard: a.shard.map(|shard| ShardRequest {
                shard,
                start_at: a.start_at.unwrap_or_default(),
                start_margin: a.start_margin,
                run_group: a.run_group,
            }),
            probe: a.probe,
            out: a.out,
            host: HostOptions {
                quiet: a.quiet,
                no_thinking_switch: a.no_thinking_switch,
                no_realtime: a.no_realtime,
                cpu: a.cpu,
            },
            cache: crate::capture::request::CacheRequest {
                reset: a.reset_cache,
                reset_timeout_s: a.reset_timeout,
                warm: a.warm_cache,
            },
        }
    }
}

/// Carry out one subcommand. `argv` is the full command line, recorded (redacted) in
/// run.json.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Cells(a) => run_cells(&a),
        Command::Run(a) => {
            let upload = check_upload(a.upload.as_deref())?;
            let request: RunRequest = (*a).into();
            // `--repeat N` alone records every repeat; each is checked before the first
            // starts, so a folder that already holds one is refused up front.
            let each: Vec<RunRequest> = match request.repeat {
                Some(RepeatRequest { of, index: None }) if of > 1 => (1..=of)
                    .map(|k| RunRequest {
                        repeat: Some(RepeatRequest { of, index: Some(k) }),
                        ..request.clone()
                    })
                    .collect(),
                _ => vec![request.clone()],
            };
            let configs = each
                .into_iter()
                .map(|r| {
                    RunConfig::from_request(r, &config::process_env)
                        .map_err(|e| AppError::wrap(Exit::BadInput, e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = request.out.clone();
            let mut exit = Exit::Ok;
            for cfg in configs {
                let dir = cfg.artifact_dir.clone();
                exit = record(cfg)?;
                if let Some(url) = &upload {
                    upload_artifact(&dir, &out, url)?;
                }
                if exit != Exit::Ok {
                    // An interrupted or failed repeat ends the series: what was recorded stays.
                    break;
                }
            }
            Ok(exit)
        }
        Command::Recover(a) => recover(&a),
        Command::GpuCheck(a) => super::gpu_check::gpu_check(&a),
    }
}

/// `--upload URL` checked before anything is recorded: a URL this build can write to.
fn check_upload(url: Option<&str>) -> anyhow::Result<Option<String>> {
    let Some(url) = url else {
        return Ok(None);
    };
    match crate::location::Location::parse(std::path::Path::new(url)) {
        #[cfg(feature = "object-store")]
        Ok(crate::location::Location::Remote(_)) => Ok(Some(url.to_owned())),
        Ok(_) => Err(AppError::wrap(
            Exit::BadInput,
            anyhow::anyhow!(
                "--upload {url}: not an object-store URL: give s3://BUCKET/PREFIX, \
                 gs://BUCKET/PREFIX or az://CONTAINER/PREFIX"
            ),
        )),
        Err(e) => Err(AppError::wrap(
            Exit::BadInput,
            anyhow::anyhow!("--upload {e}"),
        )),
    }
}

/// Upload the recorded artifact `dir` beneath `url`, in the layout it has beneath `out`.
/// A failed upload keeps the local artifact and says how to push it (exit 5).
#[cfg_attr(not(feature = "object-store"), allow(clippy::unnecessary_wraps))]
fn upload_artifact(dir: &std::path::Path, out: &std::path::Path, url: &str) -> anyhow::Result<()> {
    #[cfg(feature = "object-store")]
    {
        let relative = dir.strip_prefix(out).unwrap_or(dir);
        let mut dest = url.trim_end_matches('/').to_owned();
        for part in relative.components() {
            dest.push('/');
            dest.push_str(&part.as_os_str().to_string_lossy());
        }
        let pushed = crate::location::Remote::open(&dest).and_then(|remote| {
            crate::location::block_on(crate::location::push(dir, &dest, &remote))
        });
        match pushed {
            Ok(p) => {
                eprintln!(
                    "anvil-capture: uploaded {} file(s), {:.1} MB to {}",
                    p.files,
                    p.bytes as f64 / 1e6,
                    p.url
                );
                Ok(())
            }
            Err(e) => Err(AppError::wrap(
                Exit::Failed,
                anyhow::anyhow!(
                    "--upload: {e}\nthe artifact is kept at {}: upload it with `anvil push {} {dest}`",
                    dir.display(),
                    dir.display()
                ),
            )),
        }
    }
    #[cfg(not(feature = "object-store"))]
    {
        let _ = (dir, out, url);
        Ok(())
    }
}

/// Record one checked cell: progress and the quick look on standard error, the artifact's
/// folder as the last line of standard output.
pub fn record(cfg: RunConfig) -> anyhow::Result<Exit> {
    let quiet = cfg.quiet;
    let summary = crate::capture::run(cfg, hooks()).map_err(capture_error)?;
    if !quiet {
        eprint!("{}", summary.quick_look);
    }
    if let Some(reason) = &summary.reason {
        eprintln!("anvil-capture: run {}: {reason}", summary.status.as_str());
    }
    output::stdout(
        &format!("{}\n", summary.dir.display()),
        "the artifact's path",
    )?;
    Ok(status_exit(summary.status))
}

/// A run's notices on standard error; a second SIGINT ends the process as interrupted.
pub fn hooks() -> crate::capture::RunHooks {
    crate::capture::RunHooks {
        notices: super::stderr_notices(),
        abort: || std::process::exit(i32::from(Exit::Interrupted.code())),
        sigterm: true,
    }
}

/// Record one cell of the campaign in this process, as `anvil-capture run` records it.
pub fn record_request(
    request: &RunRequest,
    hooks: crate::capture::RunHooks,
) -> anyhow::Result<crate::capture::RunSummary> {
    let cfg = RunConfig::from_request(request.clone(), &config::process_env)
        .map_err(|e| AppError::wrap(Exit::BadInput, anyhow::anyhow!("{e}")))?;
    crate::capture::run(cfg, hooks).map_err(capture_error)
}

/// How a recorded run's status ends the process.
pub fn status_exit(status: Status) -> Exit {
    match status {
        Status::Complete => Exit::Ok,
        Status::Interrupted => Exit::Interrupted,
        Status::Failed | Status::Running => Exit::Failed,
    }
}

/// A capture error with its exit class: bad input when nothing was recorded because of what
/// was given, a failure otherwise.
pub fn capture_error(e: crate::capture::CaptureError) -> anyhow::Error {
    let exit = if e.is_bad_input() {
        Exit::BadInput
    } else {
        Exit::Failed
    };
    AppError::wrap(exit, e)
}

fn recover(a: &RecoverArgs) -> anyhow::Result<Exit> {
    let report = crate::artifact::recover(&a.dir)
        .map_err(|e| AppError::wrap(Exit::BadInput, anyhow::anyhow!("recover: {e}")))?;
    for note in &report.notes {
        eprintln!("anvil-capture recover: {note}");
    }
    for (table, merged) in &report.tables {
        eprintln!(
            "anvil-capture recover: {}: {} rows from {} parts",
            table.name(),
            merged.rows,
            merged.parts
        );
    }
    eprintln!(
        "anvil-capture recover: status {} -> {}",
        report.status_before.as_str(),
        report.status_after.as_str()
    );
    output::stdout(
        &format!("{}\n", report.dir.display()),
        "the artifact's path",
    )?;
    Ok(Exit::Ok)
}

fn run_cells(a: &CellsArgs) -> anyhow::Result<Exit> {
    let manifest =
        WorkloadManifest::load(&a.manifest).map_err(|e| AppError::wrap(Exit::BadInput, e))?;
    let mut out = Sink::open(None)?;
    writeln!(out, "{}", cells::TABLE_HEADER)?;
    for cell in cells::cells(&manifest) {
        writeln!(out, "{cell}")?;
    }
    out.finish()?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests;
