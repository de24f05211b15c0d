//! `anvil-capture run`: one cell against one or more replicas, from a checked
//! [`RunConfig`] to a finished artifact.
//!
//! 1. Preflight (bad input, exit 2, nothing written): each replica's `GET /v1/models` must
//!    answer (model name, server info); `GET /version` is read when present; one streamed
//!    one-token request per replica shows whether the server closes connections after a
//!    streamed response (`server_info.connection_after_stream`).
//! 2. Calibration's detection ([`super::calibrate`]): which token count to trust (the
//!    server's tokenizer in its dialect, checked against a probe's usage, or probes), and a
//!    context target the fixed prompt already exceeds refused (exit 2, nothing written).
//! 3. The artifact is created (`run.json` with status `running`, its `calibration` record),
//!    then every request's filler is sized (probes recorded as `calibration` rows, with a
//!    separate salt so the measured prompts stay uncached).
//! 4. Requests are prepared (bodies serialised) and the writer thread starts.
//! 5. `before` scrapes; each worker (C per replica) opens its connection and runs the warm-up
//!    requests (closed loop); then every worker and the dispatcher wait at one barrier and the
//!    measured requests start together on every replica: closed loop (workers pull the next
//!    index from one shared counter) or open loop (a dispatcher releases index i at its
//!    intended time, constant or exponential gaps; the next free worker of any replica takes
//!    it, so client-side queueing shows as `t_sent_ns - t_intended_ns`). `during` scrapes run
//!    every second; `after` scrapes follow the last request.
//! 6. SIGINT: no new requests; those in flight get [`GRACE`] to finish, then are cancelled;
//!    measured requests never sent are recorded as `cancelled`; the artifact is finalised as
//!    `interrupted`. A second SIGINT exits at once, leaving parts that `recover` merges.
//!
//! No request is retried, except one that provably never reached the server, sent once more
//! and marked `resent` (see [`super::hotpath`]); every failure is a row with its outcome and
//! the run goes on. A run that cannot be measured (calibration impossible, the writer gone)
//! exits 5.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::sync::Barrier;

use super::calibrate::{CalibrateError, Calibrator};
use super::config::{RunConfig, Schedule};
use super::endpoint::Endpoint;
use super::functional;
use super::hotpath::{self, Cancel, EventSink, Worker, event_channel};
use super::prompt::{PromptBuilder, PromptContent};
use super::recorder::{Msg, Progress, Recorder, RequestMeta, RunMeta};
use super::request::{self, Api, PreparedRequest, RequestOptions};
use super::scrape;
use super::summary;
use crate::artifact::{
    self, ArtifactWriter, Clock, Counts, RequestKind, RunJson, ScrapePhase, Status, Tool, Topology,
    Workload,
};
use crate::clock::{Origin, monotonic_ns};
use crate::notice::Notices;

/// How long requests in flight may finish after the first SIGINT before they are cancelled.
pub const GRACE: Duration = Duration::from_secs(10);
/// Event channel capacity (events), between the hot path and the writer thread.
pub const CHANNEL_CAPACITY: usize = 64 * 1024;
use super::http::SIDE_TIMEOUT;

/// Why a run could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Nothing was recorded: what was given cannot be run as asked (an endpoint unreachable
    /// or refusing the key, no model named, a context the fixed prompt already exceeds, an
    /// output folder that cannot be created).
    #[error("{0}")]
    BadInput(String),
    /// The run could not be carried out or finished (the runtime, the writer thread, the
    /// artifact's final write); what was recorded stays in its folder.
    #[error("{0}")]
    Failed(String),
}

impl CaptureError {
    /// Whether nothing was recorded because of what was given.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, CaptureError::BadInput(_))
    }
}

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
}

/// Record the run `cfg` describes.
pub fn run(cfg: RunConfig, hooks: RunHooks) -> Result<RunSummary, CaptureError> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4);
    let realtime = cfg.realtime;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("anvil-capture")
        .on_thread_start(move || {
            // Best effort: without the privilege the run goes on with ordinary scheduling.
            if realtime {
                crate::realtime::tight_timer_slack();
                let _ = crate::realtime::fifo(crate::realtime::CAPTURE_PRIORITY);
            }
        })
        .enable_all()
        .build()
        .map_err(|e| CaptureError::Failed(format!("starting the async runtime: {e}")))?;
    let summary = rt.block_on(run_async(cfg, hooks));
    rt.shutdown_timeout(Duration::from_millis(200));
    summary
}

/// What a replica said about itself before the run.
#[derive(Debug, Default)]
struct ServerFacts {
    models: Vec<String>,
    info: BTreeMap<String, Value>,
}

async fn preflight(
    ep: &Endpoint,
    auth: Option<&hyper::header::HeaderValue>,
    redactor: &artifact::Redactor,
) -> Result<ServerFacts, String> {
    let mut facts = ServerFacts::default();
    match super::http::get(ep, "/v1/models", auth, SIDE_TIMEOUT).await {
        Err(e) if e.is_unreachable() => {
            return Err(format!("--endpoint `{}`: unreachable: {e}", ep.url));
        }
        Err(e) => {
            return Err(format!(
                "--endpoint `{}`: GET /v1/models failed: {e}",
                ep.url
            ));
        }
        Ok((status, body)) if (200..300).contains(&status) => {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if let Some(data) = v.get("data").and_then(Value::as_array) {
                for (i, m) in data.iter().enumerate() {
                    if let Some(id) = m.get("id").and_then(Value::as_str) {
                        facts.models.push(id.to_owned());
                    }
                    if i == 0 {
                        for key in ["owned_by", "created", "max_model_len", "root"] {
                            if let Some(x) = m.get(key) {
                                facts.info.insert(format!("models.{key}"), x.clone());
                            }
                        }
                    }
                }
            }
        }
        Ok((status, body)) if status == 401 || status == 403 => {
            let said = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            let what = if auth.is_some() {
                "refused the API key sent (--api-key-env)"
            } else {
                "wants an API key: name the environment variable holding it with --api-key-env"
            };
            return Err(format!(
                "--endpoint `{}`: GET /v1/models answered {status} ({}): the server {what}",
                ep.url,
                redactor.text(said.trim())
            ));
        }
        Ok((status, _)) => {
            facts
                .info
                .insert("models.status".into(), Value::from(status));
        }
    }
    if let Ok((status, body)) = super::http::get(ep, "/version", auth, SIDE_TIMEOUT).await
        && (200..300).contains(&status)
        && let Ok(v) = serde_json::from_slice::<Value>(&body)
        && let Some(version) = v.get("version")
    {
        facts.info.insert("server_version".into(), version.clone());
    }
    Ok(facts)
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

async fn run_async(cfg: RunConfig, hooks: RunHooks) -> Result<RunSummary, CaptureError> {
    let notices = &hooks.notices;
    let auth = cfg
        .api_key
        .as_ref()
        .map(|k| k.header_value())
        .transpose()
        .map_err(|e| CaptureError::BadInput(format!("--api-key-env: {e}")))?;
    // 1. Preflight.
    let mut facts = Vec::new();
    for ep in &cfg.endpoints {
        match preflight(ep, auth.as_ref(), &cfg.redactor).await {
            Ok(f) => facts.push(f),
            Err(msg) => return Err(CaptureError::BadInput(cfg.redactor.text(&msg).into_owned())),
        }
    }
    let model = match cfg
        .model
        .clone()
        .or_else(|| facts[0].models.first().cloned())
    {
        Some(m) => m,
        None => {
            return Err(CaptureError::BadInput(format!(
                "--model: not given, and `{}` /v1/models lists no model{}; name the model with --model",
                cfg.endpoints[0].url,
                facts[0]
                    .info
                    .get("models.status")
                    .map(|s| format!(" (it answered HTTP {s})"))
                    .unwrap_or_default()
            )));
        }
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

    // 2. What to send, and how its prompts are counted (nothing written yet).
    let origin = Origin::now();
    let run_id = format!("{}-{}", compact_utc(origin.utc_unix_ns), random_hex(4));
    let salt = random_hex(8);
    let cell = &cfg.cell;
    let sel = &cfg.manifest.selection;
    let n = cell.requests as u32;
    let w = cfg.warmup as u32;
    let spec = cell.prompt_spec(sel.random_prefix_seed, &salt, cfg.api.prompt_form());
    let builder = PromptBuilder::new(spec);
    let opts = RequestOptions {
        api: cfg.api,
        model: model.clone(),
        max_tokens: Some(cell.max_tokens),
        thinking_disabled: cfg.thinking_disabled,
        omit_thinking_kwarg: cfg.omit_thinking_switch,
    };
    // Whether each replica closes connections after a streamed response: then its workers
    // open a fresh connection per request instead of racing the close.
    let closes_after_stream =
        connection_checks(&cfg, &opts, auth.as_ref(), &mut facts, notices).await?;
    let (msgs, msgs_rx) = std::sync::mpsc::channel::<Msg>();
    // Why the run failed, if it did (set once, first cause wins).
    let mut failed: Option<String> = None;
    // Functional requests have no prompt-token target: nothing to calibrate.
    let functional_run = cell.class == super::cells::FUNCTIONAL;
    let calibrator = if functional_run {
        None
    } else {
        let detected = Calibrator::detect(&cfg, &builder, &opts, n + w, &msgs, &origin).await;
        if let Ok(c) = &detected
            && let Some(note) = &c.record.note
        {
            notices.say(&format!(
                "anvil-capture: warning: `{}`: {}; calibrating with max_tokens:1 probes (recorded as calibration rows)",
                cfg.endpoints[0].url,
                cfg.redactor.text(note)
            ));
        }
        match detected {
            Ok(c) => match c.check_reachable().await {
                Ok(()) => Some(c),
                Err(e @ CalibrateError::BelowOverhead { .. }) => {
                    return Err(CaptureError::BadInput(
                        cfg.redactor.text(&e.to_string()).into_owned(),
                    ));
                }
                Err(e) => {
                    failed = Some(format!("calibration failed: {e}"));
                    Some(c)
                }
            },
            Err(e) => {
                failed = Some(format!("calibration failed: {e}"));
                None
            }
        }
    };
    let calibration_record = match (&calibrator, functional_run) {
        (Some(c), _) => c.record.clone(),
        (None, true) => artifact::Calibration::none(),
        (None, false) => artifact::Calibration {
            method: artifact::CalibrationMethod::Probe,
            note: failed.clone(),
            ..artifact::Calibration::none()
        },
    };
    // The APIs the run sends to (the map keeps each once).
    let apis: Vec<Api> = if functional_run {
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

    // 3. The artifact.
    let workload = Workload {
        class: cell.class.clone(),
        prompt_tokens_target: cell.context,
        concurrency_per_replica: cell.concurrency,
        total_requests: cell.requests,
        response_words: cell.reply.words(),
        max_tokens: cell.max_tokens,
        prompt_cache_mode: cell.cache_mode.as_str().to_owned(),
        canaries: cell.canaries,
        seed: sel.random_prefix_seed,
        thinking: sel.thinking.as_str().to_owned(),
        api: cfg.api,
        schedule: cfg.schedule,
        off_manifest: cfg.off_manifest,
    };
    let endpoints_json: Vec<artifact::Endpoint> = cfg
        .endpoints
        .iter()
        .zip(&facts)
        .zip(&cfg.metrics)
        .map(|((ep, f), m)| artifact::Endpoint {
            replica: ep.replica,
            url: artifact::redact_url(&ep.url),
            model: model.clone(),
            server_info: f.info.clone(),
            metrics_url: Some(artifact::redact_url(&m.url)),
        })
        .collect();
    let header = RunJson {
        schema: artifact::SCHEMA.to_owned(),
        campaign_id: cfg.manifest.campaign_id.clone(),
        arm,
        cell_id: cfg.cell_id.clone(),
        run_id: run_id.clone(),
        workload_fingerprint: workload.fingerprint(),
        workload,
        topology: Topology {
            replica_count: cfg.endpoints.len() as u32,
            endpoints: endpoints_json,
        },
        calibration: calibration_record,
        thinking_switch,
        prompt_salt: salt.clone(),
        clock: Clock::from_origin(&origin),
        started_utc: artifact::run::format_utc_ns(origin.utc_unix_ns),
        ended_utc: None,
        tool: Tool::this("anvil-capture"),
        command_line: cfg.command_line.clone(),
        status: Status::Running,
        status_reason: None,
        counts: Counts::default(),
    };
    let header = header.redacted(&cfg.redactor);
    let writer = ArtifactWriter::create(&cfg.artifact_dir, header)
        .map_err(|e| CaptureError::BadInput(format!("--out: {e}")))?;

    // SIGINT: stop issuing, grace, cancel; a second one exits at once.
    let stop = Cancel::new();
    let cancel = Cancel::new();
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let (stop, cancel, interrupted) = (stop.clone(), cancel.clone(), interrupted.clone());
        let dir = cfg.artifact_dir.clone();
        let hooks = hooks.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_err() {
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
                r = tokio::signal::ctrl_c() => if r.is_ok() { exit_now(&dir, &hooks) },
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                exit_now(&dir, &hooks);
            }
        });
    }

    // Calibration of every request's filler.
    let calibrations = match calibrator.as_ref().filter(|_| failed.is_none()) {
        None => Ok(Vec::new()),
        Some(c) => tokio::select! {
            biased;
            () = stop.cancelled() => Err("interrupted during calibration".to_owned()),
            r = c.calibrate_all(n + w) => r.map_err(|e| e.to_string()),
        },
    };
    let calibrations = match calibrations {
        Ok(c) => c,
        Err(_) if interrupted.load(Ordering::SeqCst) => Vec::new(),
        Err(e) => {
            failed.get_or_insert(format!("calibration failed: {e}"));
            Vec::new()
        }
    };
    if let Some(f) = &failed {
        notices.say(&format!("anvil-capture: {}", cfg.redactor.text(f)));
    }

    // 4. Prepared requests and the writer thread.
    let replicas = cfg.endpoints.len() as u32;
    let mut prepared: Vec<PreparedRequest> = Vec::with_capacity(calibrations.len());
    let mut metas: Vec<RequestMeta> = Vec::with_capacity((n + w) as usize);
    for idx in 0..(n + w) {
        if functional_run {
            match functional::prepare(&opts, &run_id, idx, n, builder.canary(idx)) {
                Ok((check, p)) => {
                    metas.push(RequestMeta {
                        kind: RequestKind::Measured,
                        replica_hint: idx % replicas,
                        canary: p.canary.clone(),
                        prompt_sha256: p.prompt_sha256.clone(),
                        prompt_chars: p.prompt_chars,
                        prompt_tokens_calibrated: None,
                        request_body: Some(p.body.clone()),
                        check: Some(check.name()),
                        api: Some(check.api()),
                    });
                    prepared.push(p);
                }
                Err(e) => {
                    failed.get_or_insert(format!("preparing requests: {e}"));
                }
            }
            continue;
        }
        let units = calibrations.get(idx as usize).map(|c| c.filler_units);
        let prompt = builder.build(idx, units.unwrap_or(0));
        metas.push(RequestMeta {
            kind: if idx < n {
                RequestKind::Measured
            } else {
                RequestKind::Warmup
            },
            replica_hint: idx % replicas,
            canary: prompt.canary.clone(),
            prompt_sha256: prompt.sha256.clone(),
            prompt_chars: prompt.chars,
            prompt_tokens_calibrated: calibrations.get(idx as usize).map(|c| c.prompt_tokens),
            request_body: None,
            check: None,
            api: None,
        });
        if units.is_some() {
            match request::prepare(&opts, &run_id, &prompt) {
                Ok(p) => {
                    // The body is shared with the prepared request, not copied.
                    if let Some(m) = metas.last_mut() {
                        m.request_body = Some(p.body.clone());
                    }
                    prepared.push(p);
                }
                Err(e) => {
                    failed.get_or_insert(format!("preparing requests: {e}"));
                }
            }
        }
    }
    let prepared = Arc::new(prepared);
    let meta = Arc::new(RunMeta {
        requests: metas,
        endpoints: cfg
            .endpoints
            .iter()
            .map(|e| artifact::redact_url(&e.url))
            .collect(),
        api: cfg.api,
        model: model.clone(),
        prompt_tokens_target: cell.context,
        max_tokens: Some(cell.max_tokens),
        redactor: cfg.redactor.clone(),
    });
    let (sink, events_rx) = event_channel(CHANNEL_CAPACITY);
    let recorder = Recorder::new(
        writer,
        events_rx,
        msgs_rx,
        meta,
        origin,
        Progress {
            enabled: !cfg.quiet,
            measured: cell.requests,
        },
    );
    let writer_thread = std::thread::Builder::new()
        .name("anvil-writer".into())
        .spawn(move || {
            // Parsing and encoding are batch work: never real-time, whoever spawned us.
            crate::realtime::ordinary_priority();
            recorder.run()
        })
        .map_err(|e| CaptureError::Failed(format!("starting the writer thread: {e}")))?;

    // 5. Drive.
    if failed.is_none() && prepared.len() == (n + w) as usize {
        let scraping = Cancel::new();
        let scrape_enabled = Arc::new(
            cfg.metrics
                .iter()
                .map(|_| AtomicBool::new(true))
                .collect::<Vec<_>>(),
        );
        scrape_targets(
            &cfg.metrics,
            &auth,
            &scrape_enabled,
            ScrapePhase::Before,
            &msgs,
            &origin,
            (true, notices),
        )
        .await;
        let scraper = {
            let cfg_metrics = cfg.metrics.clone();
            let (auth, enabled, msgs, scraping, notices) = (
                auth.clone(),
                scrape_enabled.clone(),
                msgs.clone(),
                scraping.clone(),
                notices.clone(),
            );
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                tick.tick().await;
                loop {
                    tokio::select! {
                        () = scraping.cancelled() => break,
                        _ = tick.tick() => {}
                    }
                    scrape_targets(
                        &cfg_metrics,
                        &auth,
                        &enabled,
                        ScrapePhase::During,
                        &msgs,
                        &origin,
                        (false, &notices),
                    )
                    .await;
                }
            })
        };
        let drive_failed = match functional::phases(n).filter(|_| functional_run) {
            // A functional run: each check's requests at the check's own concurrency, one
            // check after another.
            Some(phases) => {
                let mut drive_failed = None;
                for phase in phases {
                    if drive_failed.is_some() || stop.is_cancelled() {
                        break;
                    }
                    drive_failed = drive(
                        &cfg,
                        &closes_after_stream,
                        prepared.clone(),
                        phase.concurrency,
                        phase.start..phase.end,
                        0..0,
                        &sink,
                        &msgs,
                        &stop,
                        &cancel,
                    )
                    .await;
                }
                drive_failed
            }
            None => {
                drive(
                    &cfg,
                    &closes_after_stream,
                    prepared.clone(),
                    cfg.cell.concurrency,
                    0..n,
                    n..n + w,
                    &sink,
                    &msgs,
                    &stop,
                    &cancel,
                )
                .await
            }
        };
        scraping.cancel();
        let _ = scraper.await;
        scrape_targets(
            &cfg.metrics,
            &auth,
            &scrape_enabled,
            ScrapePhase::After,
            &msgs,
            &origin,
            (false, notices),
        )
        .await;
        if let Some(why) = drive_failed {
            failed.get_or_insert(why);
        }
    }
    let reason = if interrupted.load(Ordering::SeqCst) {
        "the run was interrupted (SIGINT) before it was issued".to_owned()
    } else if let Some(f) = &failed {
        format!("the run failed before it was issued ({f})")
    } else {
        "the run ended before it was issued".to_owned()
    };
    let _ = msgs.send(Msg::CancelRest {
        t_ns: monotonic_ns(),
        reason,
    });
    drop(msgs);
    drop(sink);
    let recorded = tokio::task::spawn_blocking(move || writer_thread.join())
        .await
        .map_err(|e| CaptureError::Failed(format!("waiting for the writer thread: {e}")))?
        .map_err(|_| CaptureError::Failed("the writer thread panicked".to_owned()))?;

    // 6. Finish.
    let channel_full = recorded.channel_full;
    let mut final_run = recorded.writer.run().clone();
    final_run.counts.channel_full = channel_full;
    let (status, reason) = if let Some(e) = &recorded.error {
        (
            Status::Failed,
            Some(format!("writing the artifact failed: {e}")),
        )
    } else if let Some(f) = &failed {
        (Status::Failed, Some(f.clone()))
    } else if interrupted.load(Ordering::SeqCst) {
        (
            Status::Interrupted,
            Some(format!(
                "interrupted by SIGINT: no new requests were sent; requests in flight had {} s to finish, then were cancelled; measured requests never sent are recorded as cancelled",
                GRACE.as_secs()
            )),
        )
    } else {
        (Status::Complete, None)
    };
    final_run.status = status;
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
    if !recorded.off_target.is_empty() {
        let tol = super::prompt::tolerance(cell.context);
        notices.say(&format!(
            "anvil-capture: warning: {} measured requests report prompt tokens outside {} ± {tol} (e.g. request {} used {})",
            recorded.off_target.len(),
            cell.context,
            recorded.off_target[0].0,
            recorded.off_target[0].1
        ));
    }
    let quick_look = if cfg.quiet {
        String::new()
    } else {
        summary::quick_look(&recorded.facts, channel_full)
    };
    Ok(RunSummary {
        dir: paths.dir,
        status,
        reason,
        quick_look,
    })
}

/// Per replica, whether it closes the connection after a streamed response: one streamed
/// one-token request each (`http::closes_after_stream`), the finding recorded in its server
/// info (`connection_after_stream`: `closed`, `kept`, or `unknown` with why).
async fn connection_checks(
    cfg: &RunConfig,
    opts: &RequestOptions,
    auth: Option<&hyper::header::HeaderValue>,
    facts: &mut [ServerFacts],
    notices: &Notices,
) -> Result<Vec<bool>, CaptureError> {
    let content = match cfg.api.prompt_form() {
        super::prompt::PromptForm::Messages => {
            PromptContent::Messages(vec![super::prompt::ChatMessage {
                role: "user",
                content: "Reply with one word.".into(),
            }])
        }
        super::prompt::PromptForm::Text => PromptContent::Text("Reply with one word.".into()),
    };
    let body = request::body_json(opts, 0, &content, true, Some(1))
        .map_err(|e| CaptureError::Failed(format!("the connection check's request: {e}")))?;
    let body = bytes::Bytes::from(body);
    let mut out = Vec::with_capacity(cfg.endpoints.len());
    for (ep, f) in cfg.endpoints.iter().zip(facts.iter_mut()) {
        let (closes, finding) = match super::http::closes_after_stream(
            ep,
            ep.uri(cfg.api).clone(),
            body.clone(),
            auth,
            super::calibrate::side_timeout(cfg),
        )
        .await
        {
            Ok(true) => (true, "closed".to_owned()),
            Ok(false) => (false, "kept".to_owned()),
            Err(e) => {
                notices.say(&format!(
                    "anvil-capture: warning: `{}`: the connection check failed ({e}); connections will be reused until the server is seen closing one",
                    ep.url
                ));
                (false, format!("unknown: the check failed ({e})"))
            }
        };
        f.info
            .insert("connection_after_stream".into(), Value::from(finding));
        out.push(closes);
    }
    Ok(out)
}

/// A second SIGINT: leave at once; the parts on disk stay recoverable.
fn exit_now(dir: &std::path::Path, hooks: &RunHooks) -> ! {
    hooks.notices.say(&format!(
        "\nanvil-capture: interrupted again: stopping now; run `anvil-capture recover {}` to finalise what was recorded",
        dir.display()
    ));
    (hooks.abort)()
}

/// Scrape every enabled replica once; a replica whose metrics are missing on the `first`
/// round is warned about and not scraped again, a later failure is warned about.
async fn scrape_targets(
    targets: &[super::config::MetricsTarget],
    auth: &Option<hyper::header::HeaderValue>,
    enabled: &[AtomicBool],
    phase: ScrapePhase,
    msgs: &Sender<Msg>,
    origin: &Origin,
    (first, notices): (bool, &Notices),
) {
    for (i, target) in targets.iter().enumerate() {
        if !enabled[i].load(Ordering::Relaxed) {
            continue;
        }
        match scrape::scrape(target, auth.as_ref(), SIDE_TIMEOUT).await {
            Ok(samples) => {
                let t = origin.elapsed_ns();
                let _ = msgs.send(Msg::Scrapes(scrape::rows(
                    target.server.replica,
                    t,
                    phase,
                    samples,
                )));
            }
            Err(e) => {
                if first {
                    notices.say(&format!(
                        "anvil-capture: warning: replica {}: no metrics ({e}); its scrapes will be empty",
                        target.server.replica
                    ));
                    enabled[i].store(false, Ordering::Relaxed);
                } else {
                    notices.say(&format!(
                        "anvil-capture: warning: replica {}: scrape failed ({e})",
                        target.server.replica
                    ));
                }
            }
        }
    }
}

/// The measured requests' queue.
enum Queue {
    /// Closed loop: the next index is taken when a worker is free.
    Closed { next: AtomicU64, end: u64 },
    /// Open loop: indices released by the dispatcher at their intended times.
    Open {
        rx: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<(u32, i64)>>,
    },
}

impl Queue {
    /// The next (request index, intended send time), or `None` when done or stopped.
    async fn next(&self, stop: &Cancel) -> Option<(u32, i64)> {
        if stop.is_cancelled() {
            return None;
        }
        match self {
            Queue::Closed { next, end } => {
                let i = next.fetch_add(1, Ordering::Relaxed);
                (i < *end).then(|| (i as u32, monotonic_ns()))
            }
            Queue::Open { rx } => {
                let mut rx = rx.lock().await;
                let item = tokio::select! {
                    biased;
                    () = stop.cancelled() => None,
                    v = rx.recv() => v,
                };
                item.filter(|_| !stop.is_cancelled())
            }
        }
    }
}

/// Run the warm-up then the measured requests on every replica; returns whether the event
/// writer went away (the run must then end as failed).
#[allow(clippy::too_many_arguments)]
async fn drive(
    cfg: &RunConfig,
    closes_after_stream: &[bool],
    prepared: Arc<Vec<PreparedRequest>>,
    concurrency: u32,
    measured: std::ops::Range<u32>,
    warm: std::ops::Range<u32>,
    sink: &EventSink,
    msgs: &Sender<Msg>,
    stop: &Cancel,
    cancel: &Cancel,
) -> Option<String> {
    let n = measured.end;
    // One worker per (concurrency slot, replica), built before anything starts, in slot
    // order across replicas, so that the wake-up after the barrier reaches the replicas' first
    // workers one after another rather than one replica's workers first.
    let endpoints: Vec<Arc<Endpoint>> = cfg.endpoints.iter().cloned().map(Arc::new).collect();
    let mut workers = Vec::with_capacity(endpoints.len() * concurrency as usize);
    for _ in 0..concurrency {
        for ep in &endpoints {
            match Worker::new(ep.clone(), cfg.timeouts, cfg.api_key.as_ref(), sink.clone()) {
                Ok(w) => workers.push(
                    w.with_fresh_connections(
                        closes_after_stream
                            .get(ep.replica as usize)
                            .copied()
                            .unwrap_or(false),
                    ),
                ),
                // The key was checked with the configuration: this does not happen, but if it
                // did, no request could be sent.
                Err(e) => return Some(format!("no request could be sent: {e}")),
            }
        }
    }
    let barrier = Arc::new(Barrier::new(workers.len() + 1));
    // When the barrier released the measured requests: the intended time of a closed loop's
    // first wave, so a worker that starts late shows as client-side queueing. The last party
    // to arrive stores it before it waits, so every party reads it after the release.
    let parties = workers.len() + 1;
    let arrived = Arc::new(AtomicU64::new(0));
    let release_ns = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let arrive = {
        let (arrived, release_ns) = (arrived.clone(), release_ns.clone());
        move || {
            if arrived.fetch_add(1, Ordering::SeqCst) + 1 == parties as u64 {
                release_ns.store(monotonic_ns(), Ordering::SeqCst);
            }
        }
    };
    let closed = matches!(cfg.schedule, Schedule::Closed);
    let warm = Arc::new(Queue::Closed {
        next: AtomicU64::new(u64::from(warm.start)),
        end: u64::from(warm.end),
    });
    let (open_tx, queue) = match cfg.schedule {
        Schedule::Closed => (
            None,
            Queue::Closed {
                next: AtomicU64::new(u64::from(measured.start)),
                end: u64::from(measured.end),
            },
        ),
        Schedule::Open { .. } => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            (
                Some(tx),
                Queue::Open {
                    rx: tokio::sync::Mutex::new(rx),
                },
            )
        }
    };
    let queue = Arc::new(queue);
    let sink_failed = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for mut worker in workers {
        let (prepared, barrier, warm, queue, msgs) = (
            prepared.clone(),
            barrier.clone(),
            warm.clone(),
            queue.clone(),
            msgs.clone(),
        );
        let (stop, cancel, sink_failed) = (stop.clone(), cancel.clone(), sink_failed.clone());
        let (arrive, release_ns) = (arrive.clone(), release_ns.clone());
        tasks.spawn(async move {
            worker.preconnect().await;
            let mut ok = true;
            while ok && let Some((idx, t)) = warm.next(&stop).await {
                ok = send_one(&mut worker, &prepared[idx as usize], t, &cancel, &msgs).await;
            }
            arrive();
            barrier.wait().await;
            let mut first = closed;
            while ok {
                let Some((idx, t)) = queue.next(&stop).await else {
                    break;
                };
                let t = if std::mem::take(&mut first) {
                    release_ns.load(Ordering::SeqCst)
                } else {
                    t
                };
                ok = send_one(&mut worker, &prepared[idx as usize], t, &cancel, &msgs).await;
            }
            if !ok {
                sink_failed.store(true, Ordering::SeqCst);
                stop.cancel();
                cancel.cancel();
            }
        });
    }
    arrive();
    barrier.wait().await;
    if let (
        Some(tx),
        Schedule::Open {
            rate_per_s,
            arrivals,
        },
    ) = (open_tx, cfg.schedule)
    {
        let poisson = arrivals == super::config::Arrivals::Poisson;
        let stop = stop.clone();
        let seed = cfg.manifest.selection.random_prefix_seed;
        tasks.spawn(async move {
            dispatch(tx, n, rate_per_s, poisson, seed, &stop).await;
        });
    }
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined
            && failure.is_none()
        {
            // A worker or the scheduler stopped: the run did not issue what it said it would.
            failure = Some(format!("a capture task stopped: {e}"));
            stop.cancel();
            cancel.cancel();
        }
    }
    if sink_failed.load(Ordering::SeqCst) {
        failure.get_or_insert("the event writer stopped during the run".to_owned());
    }
    failure
}

/// Send one request and hand its outcome to the writer; `false` if the writer is gone.
async fn send_one(
    worker: &mut Worker,
    req: &PreparedRequest,
    t_intended_ns: i64,
    cancel: &Cancel,
    msgs: &Sender<Msg>,
) -> bool {
    match worker.execute(req, t_intended_ns, cancel).await {
        Ok(o) => msgs.send(Msg::Outcome(o)).is_ok(),
        Err(hotpath::SinkClosed) => false,
    }
}

/// Release indices `0..n` at their intended times: `start + i / rate`, or with exponential
/// gaps of mean `1 / rate` (a Poisson process, seeded by the manifest seed).
async fn dispatch(
    tx: tokio::sync::mpsc::UnboundedSender<(u32, i64)>,
    n: u32,
    rate: f64,
    poisson: bool,
    seed: u64,
    stop: &Cancel,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x6f70_656e_6c6f_6f70);
    let exp = rand_distr::Exp::new(rate).ok();
    let start = monotonic_ns();
    let mut offset_s = 0.0f64;
    for i in 0..n {
        // (`as` saturates; the configuration bounds the schedule to a day, Poisson gaps may
        // draw a little past it)
        let intended = start.saturating_add((offset_s * 1e9) as i64);
        let wait = Duration::from_nanos(intended.saturating_sub(monotonic_ns()).max(0) as u64);
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        if tx.send((i, intended)).is_err() {
            return;
        }
        offset_s += match (poisson, &exp) {
            (true, Some(e)) => rand_distr::Distribution::sample(e, &mut rng),
            _ => 1.0 / rate,
        };
    }
}
