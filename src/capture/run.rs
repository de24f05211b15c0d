//! `anvil-capture run`: one cell against one or more replicas, from a checked
//! [`RunConfig`] to a finished artifact, as a sequence of steps over one [`Run`] state:
//!
//! 1. [`servers`]: each replica's `GET /v1/models` must answer (model name, server info);
//!    `GET /version` is read when present; one streamed one-token request per replica shows
//!    whether the server closes connections after a streamed response
//!    (`server_info.connection_after_stream`). Bad input (nothing written) otherwise.
//! 2. [`Run::calibration`]: which token count to trust (the server's tokenizer in its
//!    dialect, checked against a probe's usage, or probes; [`super::calibrate`]); a context
//!    target the fixed prompt already exceeds is bad input, nothing written.
//! 3. [`Run::create_artifact`]: `run.json` with status `running` and its `calibration`
//!    record; then [`Run::watch_interrupts`] and [`Run::size_fillers`] (every request's
//!    filler sized, probes recorded as `calibration` rows, with a separate salt so the
//!    measured prompts stay uncached).
//! 4. [`Run::prepare`]: request bodies serialised ([`crate::workload`]); [`Run::start_writer`]
//!    starts the writer thread.
//! 5. [`Run::drive`]: `before` scrapes; the warm-up and the measured requests
//!    ([`super::schedule`]), `during` scrapes every second; `after` scrapes.
//! 6. SIGINT: no new requests; those in flight get [`GRACE`] to finish, then are cancelled;
//!    measured requests never sent are recorded as `cancelled`; the artifact is finalised as
//!    `interrupted`. A second SIGINT leaves at once ([`RunHooks::abort`]), leaving parts that
//!    `recover` merges.
//! 7. [`Run::finish`]: the status, its reason, the final `run.json`, the quick look.
//!
//! No request is retried, except one that provably never reached the server, sent once more
//! and marked `resent` (see [`super::hotpath`]); every failure is a row with its outcome and
//! the run goes on. A run that cannot be measured (calibration impossible, the writer gone)
//! is recorded as `failed` with why; the caller decides what that means for the process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use rand::Rng;
use serde_json::Value;

use super::calibrate::{CalibrateError, Calibrator};
use super::config::{CpuPlacement, RunConfig};
use super::error::CaptureError;
use super::hotpath::{Cancel, EventSink, event_channel};
use super::preflight::{ServerFacts, connection_checks, preflight};
use super::recorder::{Msg, Progress, Recorded, Recorder, RequestMeta, RunMeta};
use super::sidecar::Sidecars;
use super::{schedule, summary};
use crate::artifact::{self, ArtifactWriter, Clock, Counts, RunJson, Status, Tool, Topology};
use crate::clock::{Origin, monotonic_ns};
use crate::notice::Notices;
use crate::workload::functional;
use crate::workload::prompt::PromptBuilder;
use crate::workload::request::{Api, PreparedRequest, RequestOptions};
use crate::workload::trace::replay::Density;

/// The salt of a warm cell's prompts (`--warm-cache`): the same in every run.
pub const WARM_SALT: &str = "warm";

/// How long requests in flight may finish after the first SIGINT before they are cancelled.
pub const GRACE: Duration = Duration::from_secs(10);
/// Event channel capacity (events), between the hot path and the writer thread.
pub const CHANNEL_CAPACITY: usize = 64 * 1024;

/// A recorded run: where, how it ended, and what to show.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The artifact folder.
    pub dir: std::path::PathBuf,
    /// Its final status.
    pub status: Status,
    /// Why the run did not complete, redacted.
    pub reason: Option<String>,
    /// The quick look (empty when the run was quiet).
    pub quick_look: String,
}

/// What a run tells its caller while it runs, and how it leaves at once on a second SIGINT
/// (the parts on disk stay recoverable).
#[derive(Debug, Clone)]
pub struct RunHooks {
    pub notices: Notices,
    /// Called after the notice of a second SIGINT; ends the process.
    pub abort: fn() -> !,
    /// Whether SIGTERM stops the run as a first SIGINT does (a recorder in its own process,
    /// stopped by a scheduler); `false` where the process's owner handles SIGTERM itself
    /// (`anvil campaign run` lets the cell in flight complete).
    pub sigterm: bool,
}

/// Record the run `cfg` describes.
pub fn run(cfg: RunConfig, hooks: RunHooks) -> Result<RunSummary, CaptureError> {
    let realtime = cfg.realtime;
    // The CPU the worker and the writer share (see `CpuPlacement`), decided once, here.
    let mut cfg = cfg;
    cfg.cpu = cfg
        .cpu
        .resolve()
        .map_or(CpuPlacement::Any, CpuPlacement::Cpu);
    let cpu = cfg.cpu.resolve();
    // A long run's resident set stays flat only with the mmap threshold fixed (see `memory`).
    crate::memory::fix_mmap_threshold();
    // One worker thread runs every request task and the pacer (the run's steps run on this
    // thread, in `block_on`): the pacer's look wakes the tasks on the thread it runs on, so
    // no other worker is woken to steal them. Measured (BENCHMARKS.md, recorder fidelity):
    // a second worker added about 0.5 s of CPU to 132k events, most of it parking and
    // unparking. The hot path per event is a few µs, so one thread carries tens of
    // thousands of events a second.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("anvil-capture")
        .on_thread_start(move || {
            // Best effort, both: a CPU taken away meanwhile, or no privilege for SCHED_FIFO,
            // leaves the run on ordinary placement and scheduling.
            if let Some(cpu) = cpu {
                let _ = crate::realtime::pin_to(cpu);
            }
            if realtime {
                crate::realtime::tight_timer_slack();
                let _ = crate::realtime::fifo(crate::realtime::CAPTURE_PRIORITY);
            }
        })
        .enable_all()
        .build()
        .map_err(|e| CaptureError::Failed(format!("starting the async runtime: {e}")))?;
    let summary = rt.block_on(run_steps(&cfg, hooks));
    rt.shutdown_timeout(Duration::from_millis(200));
    summary
}

/// The steps, in order (see the module documentation).
async fn run_steps(cfg: &RunConfig, hooks: RunHooks) -> Result<RunSummary, CaptureError> {
    let auth = cfg
        .api_key
        .as_ref()
        .map(|k| k.header_value())
        .transpose()
        .map_err(|e| CaptureError::BadInput(format!("--api-key-env: {e}")))?;
    let mut servers = servers(cfg, auth.as_ref(), &hooks.notices).await?;
    let (msgs, msgs_rx) = std::sync::mpsc::channel::<Msg>();
    let mut run = Run::new(cfg, hooks, auth, msgs);
    let (builder, opts) = run.what_to_send(&servers.model);
    let closes_after_stream = connection_checks(
        cfg,
        &opts,
        run.auth.as_ref(),
        &mut servers.facts,
        &run.hooks.notices,
    )
    .await?;
    let calibrator = run.calibration(&builder, &opts).await?;
    let writer = run.create_artifact(&servers, &opts, &calibrator)?;
    run.watch_interrupts();
    let calibrations = run.size_fillers(calibrator.as_ref()).await;
    // A prefix-group cell's prompts carry the shared prefixes calibration sized.
    let builder = calibrator
        .as_ref()
        .map_or(builder.clone(), |c| c.builder().clone());
    let density = calibrator.as_ref().and_then(|c| c.trace_density());
    // The calibrator holds a sender of the writer's messages: the writer ends only when
    // every sender is gone.
    drop(calibrator);
    let (prepared, metas) = run.prepare(&builder, &opts, &calibrations, density);
    // A session workload's later turns are built from the replies as they come.
    let (turn_replies, sessions) = match &cfg.cell.sessions {
        Some(cell) => {
            let (tx, rx) = std::sync::mpsc::channel();
            let conversations = super::sessions::Conversations {
                cell: cell.clone(),
                builder: builder.clone(),
                opts: opts.clone(),
                run_id: run.run_id.clone(),
                first_units: cell
                    .plan
                    .first_index
                    .iter()
                    .map(|i| calibrations.get(*i as usize).map_or(0, |c| c.filler_units))
                    .collect(),
            };
            (Some(tx), Some((conversations, rx)))
        }
        None => (None, None),
    };
    let (sink, writer_thread) =
        run.start_writer(writer, msgs_rx, metas, &servers.model, turn_replies)?;
    if cfg.cache.reset && run.failed.is_none() && !run.stop.is_cancelled() {
        let owner = servers.facts[0]
            .info
            .get("models.owned_by")
            .and_then(Value::as_str)
            .map(str::to_owned);
        run.reset_caches(&opts, owner.as_deref()).await;
    }
    if run.failed.is_none() && prepared.len() == run.requests() as usize {
        run.drive(&closes_after_stream, Arc::new(prepared), &sink, sessions)
            .await;
    }
    run.finish(sink, writer_thread).await
}

/// What the replicas said before the run: each one's facts, the model to send, and the arm
/// with its runtime (from `--set runtime=…`, else from the server).
struct Servers {
    facts: Vec<ServerFacts>,
    model: String,
    arm: artifact::Arm,
}

/// Step 1: every replica's facts; the model (`--model`, else the first the first replica
/// lists); the runtime when `--set` did not name it.
async fn servers(
    cfg: &RunConfig,
    auth: Option<&hyper::header::HeaderValue>,
    notices: &Notices,
) -> Result<Servers, CaptureError> {
    let mut facts = Vec::new();
    for ep in &cfg.endpoints {
        match preflight(ep, auth, &cfg.redactor).await {
            Ok(f) => facts.push(f),
            Err(msg) => return Err(CaptureError::BadInput(cfg.redactor.text(&msg).into_owned())),
        }
    }
    let Some(model) = cfg
        .model
        .clone()
        .or_else(|| facts[0].models.first().cloned())
    else {
        return Err(CaptureError::BadInput(format!(
            "--model: not given, and `{}` /v1/models lists no model{}; name the model with --model",
            cfg.endpoints[0].url,
            facts[0]
                .info
                .get("models.status")
                .map(|s| format!(" (it answered HTTP {s})"))
                .unwrap_or_default()
        )));
    };
    for (ep, f) in cfg.endpoints.iter().zip(&facts) {
        if !f.models.is_empty() && !f.models.contains(&model) {
            notices.say(&format!(
                "anvil-capture: warning: `{}` does not list model `{model}` (it lists {})",
                ep.url,
                f.models.join(", ")
            ));
        }
    }
    let mut arm = cfg.arm.clone();
    if !cfg.runtime_given {
        let info = &facts[0].info;
        let owner = info.get("models.owned_by").and_then(Value::as_str);
        let version = info.get("server_version").and_then(Value::as_str);
        arm.runtime = match (owner, version) {
            (Some(o), Some(v)) => format!("{o} {v}"),
            (Some(o), None) => o.to_owned(),
            (None, Some(v)) => format!("unknown {v}"),
            (None, None) => "unknown".to_owned(),
        };
    }
    Ok(Servers { facts, model, arm })
}

/// One run's state from preflight to finish.
struct Run<'c> {
    cfg: &'c RunConfig,
    hooks: RunHooks,
    auth: Option<hyper::header::HeaderValue>,
    /// The run's clock origin: every `t_*_ns` is relative to it.
    origin: Origin,
    run_id: String,
    /// The salt of the measured prompts (calibration probes use another).
    salt: String,
    /// Rows and scrapes to the writer thread.
    msgs: Sender<Msg>,
    /// SIGINT: no new requests.
    stop: Cancel,
    /// SIGINT plus [`GRACE`]: requests in flight are cancelled.
    cancel: Cancel,
    interrupted: Arc<AtomicBool>,
    /// Why the run failed, if it did (set once, first cause wins): the artifact says so.
    failed: Option<String>,
    /// A shard: how late its first wave was released after the published instant (ns).
    late_ns: Arc<std::sync::atomic::AtomicI64>,
    /// What `--reset-cache` did, per replica (run.json `cache_hygiene.resets`).
    resets: Vec<artifact::CacheReset>,
}

impl<'c> Run<'c> {
    fn new(
        cfg: &'c RunConfig,
        hooks: RunHooks,
        auth: Option<hyper::header::HeaderValue>,
        msgs: Sender<Msg>,
    ) -> Self {
        let now = Origin::now();
        let (origin, run_id, salt) = match &cfg.shard {
            // A shard: t = 0 is the published instant as this host's clock reads it, so the
            // shards' times share one timeline; the run id and the salt are the group's.
            Some(plan) => {
                let ahead = i64::try_from(plan.start_at_utc_ns - now.utc_unix_ns).unwrap_or(0);
                let origin = Origin {
                    monotonic_ns: now.monotonic_ns.saturating_add(ahead),
                    utc_unix_ns: plan.start_at_utc_ns,
                };
                let salt = crate::workload::shard::prompt_salt(&plan.run_group);
                (origin, plan.run_group.clone(), salt)
            }
            None => (
                now,
                format!("{}-{}", compact_utc(now.utc_unix_ns), random_hex(4)),
                random_hex(8),
            ),
        };
        // A warm cell on purpose: every run of the cell sends the same prompts.
        let salt = if cfg.cache.warm {
            WARM_SALT.to_owned()
        } else {
            salt
        };
        Self {
            cfg,
            hooks,
            auth,
            run_id,
            salt,
            origin,
            late_ns: Arc::new(std::sync::atomic::AtomicI64::new(0)),
            msgs,
            stop: Cancel::new(),
            cancel: Cancel::new(),
            interrupted: Arc::new(AtomicBool::new(false)),
            failed: None,
            resets: Vec::new(),
        }
    }

    /// `--reset-cache`: every replica's prefix cache emptied and verified before the run; a
    /// replica that stayed busy or refused fails the run (nothing measured is sent).
    async fn reset_caches(&mut self, opts: &RequestOptions, owner: Option<&str>) {
        let (resets, failure) = super::cache_reset::reset_replicas(&super::cache_reset::Replicas {
            cfg: self.cfg,
            auth: self.auth.as_ref(),
            opts,
            owner,
            salt: &self.salt,
            stop: &self.stop,
            notices: &self.hooks.notices,
        })
        .await;
        self.resets = resets;
        if let Some(why) = failure {
            self.fail(why);
        }
    }

    /// Measured requests.
    fn measured(&self) -> u32 {
        self.cfg.cell.requests as u32
    }

    /// Measured and warm-up requests.
    fn requests(&self) -> u32 {
        self.measured() + self.cfg.warmup as u32
    }

    /// Whether the cell is the functional checks (nothing to calibrate: no token target).
    fn functional(&self) -> bool {
        self.cfg.cell.class == crate::workload::cells::FUNCTIONAL
    }

    /// Note why the run failed, unless an earlier cause was noted.
    fn fail(&mut self, why: String) {
        self.failed.get_or_insert(why);
    }

    /// The prompts and the request options of the cell.
    fn what_to_send(&self, model: &str) -> (PromptBuilder, RequestOptions) {
        let cfg = self.cfg;
        let cell = &cfg.cell;
        let spec = cell.prompt_spec(
            cfg.manifest.selection.random_prefix_seed,
            &self.salt,
            cfg.api.prompt_form(),
        );
        let opts = RequestOptions {
            api: cfg.api,
            model: model.to_owned(),
            max_tokens: Some(cell.max_tokens),
            thinking_disabled: cfg.thinking_disabled,
            omit_thinking_kwarg: cfg.omit_thinking_switch,
        };
        (PromptBuilder::new(spec), opts)
    }

    /// Step 2: detect how prompts are counted. A context the fixed prompt already exceeds is
    /// bad input; any other calibration failure is recorded and the run ends `failed`.
    async fn calibration<'a>(
        &mut self,
        builder: &PromptBuilder,
        opts: &'a RequestOptions,
    ) -> Result<Option<Calibrator<'a>>, CaptureError>
    where
        'c: 'a,
    {
        if self.functional() {
            return Ok(None);
        }
        let (cfg, rows) = (self.cfg, self.requests());
        let detected =
            Calibrator::detect(cfg, builder, opts, rows, self.msgs.clone(), self.origin).await;
        let c = match detected {
            Ok(c) => c,
            Err(e) => {
                self.fail(format!("calibration failed: {e}"));
                return Ok(None);
            }
        };
        if let Some(note) = &c.record.note {
            self.hooks.notices.say(&format!(
                "anvil-capture: warning: `{}`: {}; calibrating with max_tokens:1 probes (recorded as calibration rows)",
                cfg.endpoints[0].url,
                cfg.redactor.text(note)
            ));
        }
        match c.check_reachable().await {
            Ok(()) => {}
            Err(e @ CalibrateError::BelowOverhead { .. }) => {
                return Err(CaptureError::BadInput(
                    cfg.redactor.text(&e.to_string()).into_owned(),
                ));
            }
            Err(e) => {
                self.fail(format!("calibration failed: {e}"));
            }
        }
        Ok(Some(c))
    }

    /// Step 3: `run.json` (status `running`) and the artifact's writer.
    fn create_artifact(
        &self,
        servers: &Servers,
        opts: &RequestOptions,
        calibrator: &Option<Calibrator<'_>>,
    ) -> Result<ArtifactWriter, CaptureError> {
        let cfg = self.cfg;
        let cell = &cfg.cell;
        let calibration = match (calibrator, self.functional()) {
            (Some(c), _) => c.record.clone(),
            (None, true) => artifact::Calibration::none(),
            (None, false) => artifact::Calibration {
                method: artifact::CalibrationMethod::Probe,
                note: self.failed.clone(),
                ..artifact::Calibration::none()
            },
        };
        // The APIs the run sends to (the map keeps each once).
        let apis: Vec<Api> = if self.functional() {
            functional::Check::ALL.iter().map(|c| c.api()).collect()
        } else {
            vec![cfg.api]
        };
        let thinking_switch = apis
            .iter()
            .map(|api| {
                (
                    api.as_str().to_owned(),
                    opts.thinking_kwargs(*api)
                        .map(|k| serde_json::json!({ "chat_template_kwargs": k })),
                )
            })
            .collect();
        let mut workload = cell.workload(
            &cfg.manifest,
            cfg.api,
            cfg.schedule,
            cfg.ramp.map(|r| r.as_secs_f64()),
            cfg.off_manifest,
        );
        workload.probe = cfg.probe.clone();
        workload.cache = cfg.cache.warm.then(|| artifact::WARM_CACHE.to_owned());
        let endpoints = cfg
            .endpoints
            .iter()
            .zip(&servers.facts)
            .zip(&cfg.metrics)
            .map(|((ep, f), m)| artifact::Endpoint {
                replica: ep.replica,
                url: artifact::redact_url(&ep.url),
                model: servers.model.clone(),
                server_info: f.info.clone(),
                metrics_url: Some(artifact::redact_url(&m.url)),
            })
            .collect();
        let header = RunJson {
            schema: artifact::SCHEMA.to_owned(),
            campaign_id: cfg.manifest.campaign_id.clone(),
            arm: servers.arm.clone(),
            cell_id: cfg.cell_id.clone(),
            run_id: self.run_id.clone(),
            repeat: cfg.repeat,
            shard: cfg.shard.as_ref().map(|plan| artifact::shard::Shard {
                index: plan.spec.index,
                of: plan.spec.of,
                start_at_utc: artifact::run::format_utc_ns(plan.start_at_utc_ns),
                started_late_ms: 0.0,
                start_margin_ms: plan.margin.as_secs_f64() * 1e3,
                host: super::host_clock::host_name(),
                clock: super::host_clock::read(),
            }),
            workload_fingerprint: workload.fingerprint(),
            workload,
            topology: Topology {
                replica_count: cfg.endpoints.len() as u32,
                endpoints,
            },
            calibration,
            thinking_switch,
            prompt_salt: self.salt.clone(),
            clock: Clock::from_origin(&self.origin),
            started_utc: artifact::run::format_utc_ns(self.origin.utc_unix_ns),
            ended_utc: None,
            tool: Tool::this("anvil-capture"),
            command_line: cfg.command_line.clone(),
            status: Status::Running,
            status_reason: None,
            counts: Counts::default(),
            cache_hygiene: Some(artifact::CacheHygiene {
                salted: !cfg.cache.warm,
                resets: Vec::new(),
            }),
            // Only the shard that reads the sources (shard 0) declares them.
            telemetry: super::telemetry::sampler::declared_summary(&cfg.telemetry)
                .filter(|_| cfg.shard.as_ref().is_none_or(|p| p.spec.index == 0)),
        };
        ArtifactWriter::create(&cfg.artifact_dir, header.redacted(&cfg.redactor))
            .map_err(|e| CaptureError::BadInput(format!("--out: {e}")))
    }

    /// SIGINT: stop issuing, grace, cancel; a second one leaves at once.
    fn watch_interrupts(&self) {
        let (stop, cancel, interrupted) = (
            self.stop.clone(),
            self.cancel.clone(),
            self.interrupted.clone(),
        );
        let dir = self.cfg.artifact_dir.clone();
        let hooks = self.hooks.clone();
        tokio::spawn(async move {
            // SIGTERM is how a scheduler stops a pod or a task (Kubernetes, Slurm): the same
            // as a first SIGINT.
            let mut term = if hooks.sigterm {
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok()
            } else {
                None
            };
            let terminated = async {
                match term.as_mut() {
                    Some(t) => t.recv().await.is_some(),
                    None => std::future::pending().await,
                }
            };
            let signalled = tokio::select! {
                r = tokio::signal::ctrl_c() => r.is_ok(),
                t = terminated => t,
            };
            if !signalled {
                return;
            }
            interrupted.store(true, Ordering::SeqCst);
            stop.cancel();
            hooks.notices.say(&format!(
                "\nanvil-capture: interrupted: no new requests; requests in flight have {} s to finish (interrupt again to stop at once)",
                GRACE.as_secs()
            ));
            tokio::select! {
                () = tokio::time::sleep(GRACE) => cancel.cancel(),
                r = tokio::signal::ctrl_c() => if r.is_ok() { leave_now(&dir, &hooks) },
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                leave_now(&dir, &hooks);
            }
        });
    }

    /// Size every request's filler (nothing when calibration failed or was interrupted).
    async fn size_fillers(
        &mut self,
        calibrator: Option<&Calibrator<'_>>,
    ) -> Vec<crate::workload::calibration::Calibration> {
        let calibrations = match calibrator.filter(|_| self.failed.is_none()) {
            None => Ok(Vec::new()),
            Some(c) => tokio::select! {
                biased;
                () = self.stop.cancelled() => Err("interrupted during calibration".to_owned()),
                r = c.calibrate_all(self.requests()) => r.map_err(|e| e.to_string()),
            },
        };
        let calibrations = match calibrations {
            Ok(c) => c,
            Err(_) if self.interrupted.load(Ordering::SeqCst) => Vec::new(),
            Err(e) => {
                self.fail(format!("calibration failed: {e}"));
                Vec::new()
            }
        };
        // Why the run failed is said once, by whoever shows the finished run's status and
        // reason (`anvil-capture run`'s last line of stderr, the campaign's line per cell).
        calibrations
    }

    /// Step 4: every request's body and what the writer records about it.
    fn prepare(
        &mut self,
        builder: &PromptBuilder,
        opts: &RequestOptions,
        calibrations: &[crate::workload::calibration::Calibration],
        density: Option<Density>,
    ) -> (Vec<PreparedRequest>, Vec<RequestMeta>) {
        let made = super::prepare::requests(&super::prepare::Inputs {
            cfg: self.cfg,
            run_id: &self.run_id,
            functional: self.functional(),
            warmup: self.cfg.warmup as u32,
            builder,
            opts,
            calibrations,
            density,
        });
        if let Some(why) = made.failed {
            self.fail(why);
        }
        (made.prepared, made.metas)
    }

    /// The writer thread, fed by the hot path's event channel and the run's messages.
    fn start_writer(
        &self,
        writer: ArtifactWriter,
        msgs: Receiver<Msg>,
        requests: Vec<RequestMeta>,
        model: &str,
        turn_replies: Option<std::sync::mpsc::Sender<super::recorder::TurnReply>>,
    ) -> Result<(EventSink, std::thread::JoinHandle<Recorded>), CaptureError> {
        let cfg = self.cfg;
        let meta = Arc::new(RunMeta {
            requests,
            endpoints: cfg
                .endpoints
                .iter()
                .map(|e| artifact::redact_url(&e.url))
                .collect(),
            api: cfg.api,
            model: model.to_owned(),
            prompt_tokens_target: cfg.cell.context,
            max_tokens: Some(cfg.cell.max_tokens),
            redactor: cfg.redactor.clone(),
            shard: cfg.shard.as_ref().map(|p| (p.spec.index, p.spec.of)),
        });
        let (sink, events) = event_channel(CHANNEL_CAPACITY);
        let progress = Progress {
            enabled: !cfg.quiet,
            measured: match &cfg.shard {
                Some(p) => (0..cfg.cell.requests)
                    .filter(|i| p.spec.sends(*i as u32))
                    .count() as u64,
                None => cfg.cell.requests,
            },
        };
        let mut recorder = Recorder::new(meta, self.origin, events, msgs, writer, progress);
        if let Some(to) = turn_replies {
            recorder = recorder.with_turn_replies(to);
        }
        let cpu = cfg.cpu.resolve();
        let thread = std::thread::Builder::new()
            .name("anvil-writer".into())
            .spawn(move || {
                // Parsing and encoding are batch work: never real-time, whoever spawned us.
                crate::realtime::ordinary_priority();
                // Beside the hot path's worker: the events it hands over stay in one cache.
                if let Some(cpu) = cpu {
                    let _ = crate::realtime::pin_to(cpu);
                }
                recorder.run()
            })
            .map_err(|e| CaptureError::Failed(format!("starting the writer thread: {e}")))?;
        Ok((sink, thread))
    }

    /// Step 5: scrape before, drive the requests while scraping every second, scrape after.
    async fn drive(
        &mut self,
        closes_after_stream: &[bool],
        prepared: Arc<Vec<PreparedRequest>>,
        sink: &EventSink,
        sessions: Option<(
            super::sessions::Conversations,
            Receiver<super::recorder::TurnReply>,
        )>,
    ) {
        let cfg = self.cfg;
        let sidecars = Sidecars::new(
            cfg,
            self.auth.clone(),
            &self.msgs,
            self.origin,
            &self.hooks.notices,
        );
        let running = sidecars.before().await;
        let n = self.measured();
        let drive = schedule::Drive {
            cfg,
            closes_after_stream,
            prepared: &prepared,
            sink,
            msgs: &self.msgs,
            stop: &self.stop,
            cancel: &self.cancel,
            start_at: cfg
                .shard
                .as_ref()
                .map(|plan| (self.origin.monotonic_ns, plan.margin)),
            late_ns: &self.late_ns,
        };
        let failure = match functional::phases(n).filter(|_| self.functional()) {
            // The functional checks: each check's requests at its own concurrency, one check
            // after another.
            Some(phases) => {
                let mut failure = None;
                for phase in phases {
                    if failure.is_some() || self.stop.is_cancelled() {
                        break;
                    }
                    failure = drive
                        .run(phase.concurrency, phase.start..phase.end, 0..0)
                        .await;
                }
                failure
            }
            None => match sessions {
                Some((conversations, replies)) => {
                    super::sessions::drive(&drive, conversations, replies, n..self.requests()).await
                }
                None => {
                    drive
                        .run(cfg.cell.concurrency, 0..n, n..self.requests())
                        .await
                }
            },
        };
        sidecars.after(running).await;
        if let Some(why) = failure {
            self.fail(why);
        }
    }

    /// Step 7: requests never sent recorded as cancelled, the writer joined, the status and
    /// its reason decided, `run.json` finalised.
    async fn finish(
        self,
        sink: EventSink,
        writer_thread: std::thread::JoinHandle<Recorded>,
    ) -> Result<RunSummary, CaptureError> {
        let cfg = self.cfg;
        let interrupted = self.interrupted.load(Ordering::SeqCst);
        let reason = if interrupted {
            "the run was interrupted (SIGINT or SIGTERM) before it was issued".to_owned()
        } else if let Some(f) = &self.failed {
            format!("the run failed before it was issued ({f})")
        } else {
            "the run ended before it was issued".to_owned()
        };
        let _ = self.msgs.send(Msg::CancelRest {
            t_ns: monotonic_ns(),
            reason,
        });
        drop(self.msgs);
        drop(sink);
        let recorded = tokio::task::spawn_blocking(move || writer_thread.join())
            .await
            .map_err(|e| CaptureError::Failed(format!("waiting for the writer thread: {e}")))?
            .map_err(|_| CaptureError::Failed("the writer thread panicked".to_owned()))?;

        let channel_full = recorded.channel_full;
        let mut final_run = recorded.writer.run().clone();
        if recorded.telemetry.is_some() {
            final_run.telemetry = recorded.telemetry;
        }
        if let Some(h) = final_run.cache_hygiene.as_mut() {
            h.resets = self.resets.clone();
        }
        final_run.counts.channel_full = channel_full;
        let (status, reason) = if let Some(e) = &recorded.error {
            (
                Status::Failed,
                Some(format!("writing the artifact failed: {e}")),
            )
        } else if let Some(f) = &self.failed {
            (Status::Failed, Some(f.clone()))
        } else if interrupted {
            (
                Status::Interrupted,
                Some(format!(
                    "interrupted by SIGINT or SIGTERM: no new requests were sent; requests in flight had {} s to finish, then were cancelled; measured requests never sent are recorded as cancelled",
                    GRACE.as_secs()
                )),
            )
        } else {
            (Status::Complete, None)
        };
        final_run.status = status;
        if let Some(shard) = &mut final_run.shard {
            shard.started_late_ms = self.late_ns.load(Ordering::SeqCst) as f64 / 1e6;
        }
        let reason = reason.map(|r| cfg.redactor.text(&r).into_owned());
        final_run.status_reason = reason.clone();
        final_run.ended_utc = None;
        let final_run = final_run.redacted(&cfg.redactor);
        let paths = recorded.writer.finish(final_run).map_err(|e| {
            CaptureError::Failed(format!(
                "finishing the artifact failed: {e}; run `anvil-capture recover {}`",
                cfg.artifact_dir.display()
            ))
        })?;
        if let Some((request, used, target)) = recorded.off_target.first() {
            let tol = crate::workload::calibration::tolerance(*target);
            self.hooks.notices.say(&format!(
                "anvil-capture: warning: {} measured requests report prompt tokens outside their target ± the calibration tolerance (e.g. request {request} used {used} of {target} ± {tol})",
                recorded.off_target.len(),
            ));
        }
        if cfg.api == Api::Responses
            && let Some(words) = cfg.cell.reply.words()
        {
            let short = summary::short_completions(&recorded.facts, words);
            if let Some((request, tokens)) = short.first() {
                self.hooks.notices.say(&format!(
                    "anvil-capture: warning: {} measured Responses requests ended `completed` with fewer output tokens than the {words} words asked (e.g. request {request}: {tokens} tokens); \
                     vLLM ends a Responses stream it aborted this way, so they may have been cut short: see request_metrics.short_completion",
                    short.len()
                ));
            }
        }
        let quick_look = if cfg.quiet {
            String::new()
        } else {
            let functional = cfg.cell.class == crate::workload::cells::FUNCTIONAL;
            // Open loop without a ramp has no first wave (docs/artifact.md "Windows"): its
            // requests start at their own intended times, never together.
            let open_unramped =
                !matches!(cfg.schedule, crate::artifact::Schedule::Closed) && cfg.ramp.is_none();
            let wave = summary::FirstWave {
                // A session workload's first wave is not its first indices (they are
                // session-major): the views show it apart, the quick look does not.
                requests: if functional || open_unramped || cfg.cell.sessions.is_some() {
                    0
                } else {
                    cfg.cell.concurrency as usize * cfg.endpoints.len()
                },
                ramp_s: cfg.ramp.map(|r| r.as_secs_f64()),
            };
            summary::quick_look(&recorded.facts, wave, channel_full)
        };
        Ok(RunSummary {
            dir: paths.dir,
            status,
            reason,
            quick_look,
        })
    }
}

/// A second SIGINT: leave at once; the parts on disk stay recoverable.
fn leave_now(dir: &std::path::Path, hooks: &RunHooks) -> ! {
    hooks.notices.say(&format!(
        "\nanvil-capture: interrupted again: stopping now; run `anvil-capture recover {}` to finalise what was recorded",
        dir.display()
    ));
    (hooks.abort)()
}

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

fn compact_utc(utc_unix_ns: i128) -> String {
    let fmt = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    time::OffsetDateTime::from_unix_timestamp_nanos(utc_unix_ns)
        .ok()
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_else(|| "19700101T000000Z".to_owned())
}
