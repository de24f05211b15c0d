//! Scheduling the measured requests: one worker per (concurrency slot, replica), a barrier
//! that releases them together after the warm-up, and either a closed loop (each worker
//! takes the next index when it is free) or an open loop (a dispatcher releases index i at
//! its intended time, constant or exponential gaps, to the next free worker of any replica,
//! so client-side queueing shows as `t_sent_ns - t_intended_ns`).
//!
//! The first wave is the first W = concurrency × replicas measured requests. In closed loop
//! worker k (in slot order across replicas) sends index `start + k` as its first request, at
//! the barrier's release, or with `--ramp R` at release + k·R/W; that is its intended time,
//! so a worker that starts late shows as client-side queueing. Later requests take the next
//! index when their worker is free. In open loop a ramp makes the release rate rise linearly
//! from 0 to the rate over R ([`ramped_offset_s`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use rand::SeedableRng;
use tokio::sync::Barrier;

use super::config::{RunConfig, Schedule};
use super::endpoint::Endpoint;
use super::hotpath::{self, Cancel, EventSink, Worker};
use super::recorder::Msg;
use crate::clock::monotonic_ns;
use crate::workload::request::PreparedRequest;

/// The measured requests' queue.
enum Queue {
    /// Closed loop: the next index is taken when a worker is free (every `step`-th: a
    /// shard's).
    Closed {
        next: AtomicU64,
        end: u64,
        step: u64,
    },
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
            Queue::Closed { next, end, step } => {
                let i = next.fetch_add(*step, Ordering::Relaxed);
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

/// What every phase of a run's requests is driven with.
pub struct Drive<'a> {
    pub cfg: &'a RunConfig,
    /// Per replica: open a fresh connection per request (the server closes them).
    pub closes_after_stream: &'a [bool],
    pub prepared: &'a Arc<Vec<PreparedRequest>>,
    /// Events to the writer thread.
    pub sink: &'a EventSink,
    /// Request outcomes to the writer thread.
    pub msgs: &'a Sender<Msg>,
    /// No new requests.
    pub stop: &'a Cancel,
    /// Requests in flight cancelled.
    pub cancel: &'a Cancel,
    /// A shard's published start: the `CLOCK_MONOTONIC` instant its first wave is due
    /// (the run's t = 0), and how late it may be and still run.
    pub start_at: Option<(i64, Duration)>,
    /// How late the first wave was released after `start_at` (ns), once it was.
    pub late_ns: &'a std::sync::atomic::AtomicI64,
}

impl Drive<'_> {
    /// Run the `warm` requests, then the `measured` ones, `concurrency` at a time on every
    /// replica; `Some(why)` when the run did not issue what it said it would (the writer
    /// went away, a task stopped).
    pub async fn run(
        &self,
        concurrency: u32,
        measured: std::ops::Range<u32>,
        warm: std::ops::Range<u32>,
    ) -> Option<String> {
        drive(self, concurrency, measured, warm).await
    }
}

async fn drive(
    d: &Drive<'_>,
    concurrency: u32,
    measured: std::ops::Range<u32>,
    warm: std::ops::Range<u32>,
) -> Option<String> {
    let Drive {
        cfg,
        closes_after_stream,
        prepared,
        sink,
        msgs,
        stop,
        cancel,
        start_at,
        late_ns,
    } = *d;
    let n = measured.end;
    // A shard keeps the workers (and sends the requests) whose position (index) is its own
    // modulo the shard count, so the shards together are the single-host run.
    let (shard, shards) = cfg.shard.as_ref().map_or((0u64, 1u64), |p| {
        (u64::from(p.spec.index), u64::from(p.spec.of))
    });
    let mine = move |i: u64| i % shards == shard;
    // The first index at or after `from` that is this shard's.
    let first_mine = |from: u64| from + (shard + shards - from % shards) % shards;
    let workers = match workers(cfg, closes_after_stream, sink, concurrency, mine) {
        Ok(w) => w,
        Err(why) => return Some(why),
    };
    let endpoints = &cfg.endpoints;
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
                // A shard's intended times count from the published instant, not from its
                // own release: a late shard's lateness shows as client-side queueing.
                let base = start_at.map_or_else(monotonic_ns, |(deadline, _)| deadline);
                release_ns.store(base, Ordering::SeqCst);
            }
        }
    };
    let closed = matches!(cfg.schedule, Schedule::Closed);
    // The first wave is every host's workers together.
    let wave = u64::from(concurrency) * endpoints.len() as u64;
    let ramp_ns = cfg
        .ramp
        .map_or(0, |r| r.as_nanos().min(i64::MAX as u128) as i64);
    let warm = Arc::new(Queue::Closed {
        next: AtomicU64::new(first_mine(u64::from(warm.start))),
        end: u64::from(warm.end),
        step: shards,
    });
    let (open_tx, queue) = match cfg.schedule {
        Schedule::Closed => (
            None,
            // The first wave's indices are the workers' own (see the module documentation).
            Queue::Closed {
                next: AtomicU64::new(first_mine(
                    (u64::from(measured.start) + wave).min(u64::from(measured.end)),
                )),
                end: u64::from(measured.end),
                step: shards,
            },
        ),
        Schedule::Open { .. } | Schedule::Trace => {
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
    for (position, mut worker) in workers {
        let (prepared, barrier, warm, queue, msgs) = (
            prepared.clone(),
            barrier.clone(),
            warm.clone(),
            queue.clone(),
            msgs.clone(),
        );
        let (stop, cancel, sink_failed) = (stop.clone(), cancel.clone(), sink_failed.clone());
        let (arrive, release_ns) = (arrive.clone(), release_ns.clone());
        let measured = measured.clone();
        tasks.spawn(async move {
            worker.preconnect().await;
            let mut ok = true;
            while ok && let Some((idx, t)) = warm.next(&stop).await {
                ok = send_one(&mut worker, &prepared[idx as usize], t, &cancel, &msgs).await;
            }
            arrive();
            barrier.wait().await;
            let first = u64::from(measured.start) + position;
            if ok && closed && first < u64::from(measured.end) {
                let offset = (i128::from(ramp_ns) * position as i128 / wave.max(1) as i128) as i64;
                let t = release_ns.load(Ordering::SeqCst).saturating_add(offset);
                let wait = Duration::from_nanos(t.saturating_sub(monotonic_ns()).max(0) as u64);
                if !wait.is_zero() {
                    tokio::select! {
                        biased;
                        () = stop.cancelled() => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
                if !stop.is_cancelled() {
                    ok = send_one(&mut worker, &prepared[first as usize], t, &cancel, &msgs).await;
                }
            }
            while ok {
                let Some((idx, t)) = queue.next(&stop).await else {
                    break;
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
    if let Some((deadline, margin)) = start_at {
        // A shard: every worker warmed up and waiting, then the published instant.
        while arrived.load(Ordering::SeqCst) + 1 < parties as u64 && !stop.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let late = monotonic_ns().saturating_sub(deadline);
        if late > margin.as_nanos() as i64 && !stop.is_cancelled() {
            late_ns.store(late, Ordering::SeqCst);
            stop.cancel();
            arrive();
            barrier.wait().await;
            while tasks.join_next().await.is_some() {}
            return Some(format!(
                "this shard was ready {:.3} s after --start-at, later than the {:.3} s \
                 --start-margin allows: it sent no measured request (the other shards started \
                 without it; record the run group again with a later --start-at)",
                late as f64 / 1e9,
                margin.as_secs_f64()
            ));
        }
        // Sleep to 2 ms before the instant (the timer's granularity is 1 ms), then yield
        // until it: the release is then within microseconds of the instant.
        let early = deadline.saturating_sub(2_000_000);
        let wait = Duration::from_nanos(early.saturating_sub(monotonic_ns()).max(0) as u64);
        tokio::select! {
            biased;
            () = stop.cancelled() => {}
            () = tokio::time::sleep(wait) => {}
        }
        while monotonic_ns() < deadline && !stop.is_cancelled() {
            tokio::task::yield_now().await;
        }
    }
    arrive();
    barrier.wait().await;
    if let Some((deadline, _)) = start_at {
        late_ns.store(
            monotonic_ns().saturating_sub(deadline).max(0),
            Ordering::SeqCst,
        );
    }
    // A trace's dispatcher releases at the trace's times, an open loop's at its rate.
    let (open_tx, trace_tx) = match cfg.schedule {
        Schedule::Trace => (None, open_tx),
        _ => (open_tx, None),
    };
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
        let ramp_s = cfg.ramp.map_or(0.0, |r| r.as_secs_f64());
        // Every shard's dispatcher starts at the release (the published instant) and keeps
        // its own indices of the one schedule.
        let start = release_ns.load(Ordering::SeqCst);
        let sends = move |i: u32| mine(u64::from(i));
        tasks.spawn(async move {
            dispatch(
                tx, n, rate_per_s, poisson, ramp_s, seed, start, sends, &stop,
            )
            .await;
        });
    }
    if let (Some(tx), Some(trace)) = (trace_tx, &cfg.cell.trace) {
        let stop = stop.clone();
        let offsets = trace.offsets_ns();
        let start = release_ns.load(Ordering::SeqCst);
        let sends = move |i: u32| mine(u64::from(i));
        tasks.spawn_blocking(move || {
            dispatch_at(
                tx,
                &offsets[..n.min(offsets.len() as u32) as usize],
                start,
                sends,
                &stop,
            );
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

/// One worker per (concurrency slot, replica) with its position, built before anything
/// starts, in slot order across replicas, so that the wake-up after the barrier reaches the
/// replicas' first workers one after another rather than one replica's workers first; only
/// the positions `mine` keeps (a shard's). `Err`: why no request could be sent.
pub(super) fn workers(
    cfg: &RunConfig,
    closes_after_stream: &[bool],
    sink: &EventSink,
    concurrency: u32,
    mine: impl Fn(u64) -> bool,
) -> Result<Vec<(u64, Worker)>, String> {
    let endpoints: Vec<Arc<Endpoint>> = cfg.endpoints.iter().cloned().map(Arc::new).collect();
    let mut workers = Vec::with_capacity(endpoints.len() * concurrency as usize);
    // One look at every worker's sockets per period (see `hotpath::pacer`).
    let pacer = hotpath::Pacer::start()
        .map_err(|e| format!("no request could be sent: the socket pacer: {e}"))?;
    let mut position = 0u64;
    for _ in 0..concurrency {
        for ep in &endpoints {
            position += 1;
            if !mine(position - 1) {
                continue;
            }
            // The key was checked with the configuration: an error does not happen, but if
            // it did, no request could be sent.
            let w = Worker::new(ep.clone(), cfg.timeouts, cfg.api_key.as_ref(), sink.clone())
                .map_err(|e| format!("no request could be sent: {e}"))?;
            workers.push((
                position - 1,
                w.with_pacer(pacer.clone()).with_fresh_connections(
                    closes_after_stream
                        .get(ep.replica as usize)
                        .copied()
                        .unwrap_or(false),
                ),
            ));
        }
    }
    Ok(workers)
}

/// Send one request and hand its outcome to the writer; `false` if the writer is gone.
pub(super) async fn send_one(
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

/// When a release due `full_rate_s` seconds after the start at the full rate is due when the
/// rate rises linearly from 0 to full over `ramp_s` seconds: the releases by time t are then
/// rate·t²/(2·ramp) within the ramp and rate·(t − ramp/2) after it.
pub fn ramped_offset_s(full_rate_s: f64, ramp_s: f64) -> f64 {
    if ramp_s <= 0.0 {
        full_rate_s
    } else if full_rate_s <= ramp_s / 2.0 {
        (2.0 * ramp_s * full_rate_s).sqrt()
    } else {
        full_rate_s + ramp_s / 2.0
    }
}

/// Release indices `0..n` at their intended times: `start + i / rate`, or with exponential
/// gaps of mean `1 / rate` (a Poisson process, seeded by the manifest seed); with a ramp,
/// those times stretched by [`ramped_offset_s`]. Only the indices `sends` keeps are
/// released (a shard's), at the times the whole schedule gives them.
#[allow(clippy::too_many_arguments)]
async fn dispatch(
    tx: tokio::sync::mpsc::UnboundedSender<(u32, i64)>,
    n: u32,
    rate: f64,
    poisson: bool,
    ramp_s: f64,
    seed: u64,
    start: i64,
    sends: impl Fn(u32) -> bool,
    stop: &Cancel,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x6f70_656e_6c6f_6f70);
    let exp = rand_distr::Exp::new(rate).ok();
    let mut offset_s = 0.0f64;
    for i in 0..n {
        if !sends(i) {
            offset_s += match (poisson, &exp) {
                (true, Some(e)) => rand_distr::Distribution::sample(e, &mut rng),
                _ => 1.0 / rate,
            };
            continue;
        }
        // (`as` saturates; the configuration bounds the schedule to a day, Poisson gaps may
        // draw a little past it)
        let intended = start.saturating_add((ramped_offset_s(offset_s, ramp_s) * 1e9) as i64);
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

/// How long before a release the trace dispatcher stops sleeping and spins.
const SPIN_NS: i64 = 60_000;

/// Release index `i` at `start + offsets[i]` (a trace's own times, in row order; a row out
/// of time order waits for those before it to be released, then goes at once). Only the
/// indices `sends` keeps are released (a shard's). It runs on a thread of its own, not the
/// runtime's millisecond timer: it sleeps (1 ns timer slack) to [`SPIN_NS`] before each
/// time, in steps of at most 10 ms so a stop is seen, and spins the rest, so a row reaches
/// the channel within microseconds of its time. It runs at ordinary priority: the socket
/// workers (SCHED_FIFO when permitted) take the CPU from its spin whenever they need it.
fn dispatch_at(
    tx: tokio::sync::mpsc::UnboundedSender<(u32, i64)>,
    offsets: &[i64],
    start: i64,
    sends: impl Fn(u32) -> bool,
    stop: &Cancel,
) {
    crate::realtime::ordinary_priority();
    crate::realtime::tight_timer_slack();
    for (i, offset) in offsets.iter().enumerate() {
        let i = i as u32;
        if !sends(i) {
            continue;
        }
        let intended = start.saturating_add(*offset);
        loop {
            if stop.is_cancelled() {
                return;
            }
            let left = intended - monotonic_ns();
            if left <= 0 {
                break;
            }
            if left > SPIN_NS {
                std::thread::sleep(Duration::from_nanos((left - SPIN_NS).min(10_000_000) as u64));
            } else {
                std::hint::spin_loop();
            }
        }
        if tx.send((i, intended)).is_err() {
            return;
        }
    }
}
