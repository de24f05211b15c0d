//! `anvil-sim`: an OpenAI-compatible LLM server with a known timing model and fault
//! injection — the ground truth for anvil's tests, sample data, demo and benchmarks.
//!
//! Endpoints (per replica): `POST /v1/chat/completions`, `/v1/completions`, `/v1/responses`
//! (streaming SSE or one JSON body), `POST /tokenize`, `GET /v1/models`, `/metrics`
//! (vLLM metric names), `/health`, and the engines' prefix-cache resets ([`reset`]: vLLM's
//! `POST /reset_prefix_cache` with `--dev-mode`, SGLang's `/flush_cache`). Each replica has
//! its own scheduler, prefix cache (a capacity in tokens, LRU eviction) and metrics, and
//! listens on its own port.
//!
//! Modules, by job, data flowing one way per request:
//! [`config`] (the profiles and the checked [`Config`]; the flags are `crate::app::sim`) ·
//! [`server`] (HTTP, routing) → [`api`] (request bodies) →
//! [`faults`] (per-request draw) → [`reply`] (what is said, over [`tokenizer`]) →
//! [`render`] (pre-rendered SSE bytes, spec-decode steps) → [`engine`] (timing model on
//! one timer thread) → [`body`] (write timestamps) → [`truth`] (CSV + lag report).
//! [`cache`] is the per-replica prefix cache and [`reset`] its reset endpoints, [`metrics`]
//! the Prometheus set,
//! [`realtime`] the scheduling knobs.
//!
//! The tokenizer, the chat template, the timing model and every fault's wire behaviour are
//! documented in their modules and in `anvil-sim --help`.
//!
//! ```text
//! anvil-sim --port 0 --profile fast                      # tests: free ports, fast timing
//! anvil-sim --replicas 2 --profile spec-k8 --truth t.csv # a DP2 speculative arm with ground truth
//! anvil-sim --fault disconnect=0.05 --fault stall=0.01 --stall-ms 3000
//! ```
//!
//! Precision: the timer thread, SCHED_FIFO (timer 60 > HTTP workers 50 > reply planners
//! 10 > everything else) and pre-rendered bytes keep write lag (actual write − deadline)
//! p99 in the low hundreds of microseconds at 256 streams × 50 tok/s on two cores;
//! `benches/sim_lag.rs` measures it, and every run prints it on exit.

pub mod api;
pub mod body;
pub mod cache;
pub mod config;
pub mod dcgm;
pub mod engine;
pub mod faults;
pub mod metrics;
pub mod power;
pub use crate::realtime;
pub mod render;
pub mod reply;
pub mod reset;
pub mod server;
pub mod tokenizer;
pub mod truth;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use crate::notice::Notices;

pub use config::{Config, ConfigError};

use engine::{Engine, ReplicaShared};
use server::{ReplicaCtx, ServerState};
use truth::Truth;

/// Told the replicas' listening addresses, once.
pub type Listening = Box<dyn FnOnce(&[std::net::SocketAddr]) -> anyhow::Result<()> + Send>;

/// Where a simulator run by [`run`] reports: `listening` gets the replicas' addresses once
/// every replica listens; `notices` what the operator should know (the scheduling it got,
/// the profile, failed accepts, and at the end the timer-lag and write-lag reports).
pub struct Console {
    pub notices: Notices,
    pub listening: Listening,
}

/// Run the simulator until SIGINT or SIGTERM; then flush, sync and close the truth file
/// (flushed every second meanwhile, see [`truth`]) and report the lag.
pub fn run(cfg: Config, console: Console) -> anyhow::Result<()> {
    run_until(cfg, Stop::Signal(console))
}

/// A simulator running on a thread of this process (`anvil demo`): its replicas' base URLs,
/// and [`InProcess::stop`] to end it.
pub struct InProcess {
    /// `http://127.0.0.1:PORT`, one per replica, in replica order.
    pub urls: Vec<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl InProcess {
    /// Stop serving and wait for the simulator's threads to end.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => anyhow::bail!("the in-process simulator's thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Start the simulator on a thread of this process with ordinary scheduling (whatever
/// `cfg.realtime` says: real-time priority would be inherited by the caller's threads) and
/// return once every replica listens. Nothing is printed.
pub fn start_in_process(mut cfg: Config) -> anyhow::Result<InProcess> {
    cfg.realtime = false;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("anvil-sim".to_owned())
        .spawn(move || {
            run_until(
                cfg,
                Stop::InProcess {
                    stop: stop_rx,
                    ready: ready_tx,
                },
            )
        })
        .context("starting the simulator's thread")?;
    match ready_rx.recv() {
        Ok(addrs) => Ok(InProcess {
            urls: addrs
                .iter()
                .map(|a: &std::net::SocketAddr| format!("http://{a}"))
                .collect(),
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
        // The thread ended before listening: its result says why.
        Err(_) => match thread.join() {
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => anyhow::bail!("the simulator ended before listening"),
            Err(_) => anyhow::bail!("the simulator's thread panicked"),
        },
    }
}

/// What ends a run.
enum Stop {
    /// SIGINT or SIGTERM; listening addresses and the lag report go to the console.
    Signal(Console),
    /// The sender is dropped or fires; addresses go to `ready`, nothing is printed.
    InProcess {
        stop: tokio::sync::oneshot::Receiver<()>,
        ready: std::sync::mpsc::Sender<Vec<std::net::SocketAddr>>,
    },
}

fn run_until(cfg: Config, stop: Stop) -> anyhow::Result<()> {
    let notices = match &stop {
        Stop::Signal(console) => console.notices.clone(),
        Stop::InProcess { .. } => Notices::silent(),
    };
    if let Stop::Signal(_) = stop {
        realtime::tight_timer_slack();
        if cfg.realtime
            && let Err(e) = realtime::fifo(realtime::FIFO_PRIORITY)
        {
            notices.say(&format!(
                "anvil-sim: SCHED_FIFO not permitted ({e}); running with ordinary scheduling"
            ));
        }
    }
    let truth = Truth::start(
        cfg.truth.as_deref(),
        cfg.run_speed
            .seed
            .is_some()
            .then(|| format!("anvil-sim {}", cfg.run_speed.describe())),
    )?;
    let replicas: Vec<Arc<ReplicaShared>> = (0..cfg.replicas)
        .map(|i| Arc::new(ReplicaShared::new(i, &cfg.model, cfg.prefix_cache_tokens)))
        .collect();
    let engine = Engine::start(
        (0..cfg.replicas)
            .map(|i| cfg.run_speed.timing(&cfg.timing, i))
            .collect(),
        replicas.clone(),
        cfg.kv_pool_tokens,
        truth.sink(),
        cfg.spin_us as i64 * 1000,
        cfg.realtime && realtime::is_fifo(),
    )
    .context("starting the timer thread")?;
    let fleet = match cfg.gpus.clone() {
        Some(setup) => {
            let prefill_tps = (0..cfg.replicas)
                .map(|i| cfg.run_speed.timing(&cfg.timing, i).prefill_tps)
                .collect();
            Some(dcgm::Fleet::start(setup, replicas.clone(), prefill_tps)?)
        }
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.http_threads)
        .max_blocking_threads(4)
        .thread_name("anvil-sim-http")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let state = Arc::new(ServerState {
        cfg: cfg.clone(),
        engine: engine.handle(),
        truth: truth.sink(),
        inflight: Arc::new(Mutex::new(HashMap::new())),
        next_key: AtomicU64::new(0),
        notices: notices.clone(),
        dcgm: fleet.as_ref().map(dcgm::Fleet::exporter),
    });
    let result = rt.block_on(serve(state, replicas, stop));
    rt.shutdown_timeout(Duration::from_millis(200));
    let timer = engine.shutdown();
    if let Some(fleet) = fleet {
        fleet.stop().context("finishing the GPU truth file")?;
    }
    let hist = truth.finish().context("finishing the truth file")?;
    notices.say(&timer.report_as("timer lag"));
    notices.say(&hist.report());
    result
}

async fn serve(
    state: Arc<ServerState>,
    replicas: Vec<Arc<ReplicaShared>>,
    stop: Stop,
) -> anyhow::Result<()> {
    let listeners = server::bind(&state.cfg).await?;
    let addrs = listeners
        .iter()
        .map(tokio::net::TcpListener::local_addr)
        .collect::<std::io::Result<Vec<_>>>()
        .context("reading a listener's address")?;
    let c = &state.cfg;
    for (l, rep) in listeners.into_iter().zip(replicas) {
        let ctx = Arc::new(ReplicaCtx {
            server: state.clone(),
            rep,
            requests: AtomicU64::new(0),
            generations: AtomicU64::new(0),
        });
        tokio::spawn(server::serve_replica(l, ctx));
    }
    match stop {
        Stop::InProcess { stop, ready } => {
            let _ = ready.send(addrs);
            let _ = stop.await;
        }
        Stop::Signal(console) => {
            // Both handlers are in place before anyone is told where to connect: a SIGINT
            // or SIGTERM from then on is a clean shutdown, never the default death.
            let signal = |kind: tokio::signal::unix::SignalKind, name: &str| {
                tokio::signal::unix::signal(kind)
                    .with_context(|| format!("installing the {name} handler"))
            };
            let mut int = signal(tokio::signal::unix::SignalKind::interrupt(), "SIGINT")?;
            let mut term = signal(tokio::signal::unix::SignalKind::terminate(), "SIGTERM")?;
            (console.listening)(&addrs)?;
            console.notices.say(&format!(
                "anvil-sim: profile {}, prefill {} tok/s, decode {} tok/s, batch {}, spec {}@{}, chunk {}, seed {}, {}",
                c.profile,
                c.timing.prefill_tps,
                c.timing.decode_tps,
                c.timing.max_batch,
                c.timing.spec_depth,
                c.timing.spec_accept,
                c.timing.chunked_prefill,
                c.seed,
                c.run_speed.describe()
            ));
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
    }
    Ok(())
}
