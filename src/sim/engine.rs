//! The timing model and the timer thread that keeps it.
//!
//! One dedicated thread owns every replica's scheduler and a binary heap of absolute
//! `CLOCK_MONOTONIC` deadlines. It sleeps on a condition variable until shortly before the
//! next deadline (1 ns timer slack, SCHED_FIFO when permitted), spins the last stretch, and
//! at each deadline hands the pre-rendered bytes of the due event to its stream's channel,
//! which wakes the response body; the body takes the write timestamp when hyper polls the
//! frame out for the socket.
//!
//! Deadlines chain from deadlines, never from wake-up times, so lag does not accumulate.
//! The model, per replica:
//!
//! - at most `max_batch` running sequences; the rest wait FIFO and are admitted as running
//!   ones finish;
//! - prefill is one FIFO lane at `prefill_tps` over uncached tokens; a sequence's first
//!   token is written when its prefill compute is done plus one scheduler step per prefill
//!   chunk (`chunked_prefill`; 0 = the whole prompt in one chunk);
//! - each sequence then steps on its own phase (processor sharing, so writes spread in
//!   time): a step costs `(1 - batch_cost + batch_cost * running) / decode_tps` seconds,
//!   times `1 + 0.03 * spec_depth`, with ±3 % seeded jitter; while a prefill is in flight a
//!   step also pays for one prefill chunk (without chunking: waits for the prefill to end).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;

use super::cache::{Lookup, PrefixCache};
use super::config::Timing;
use super::metrics::ReplicaMetrics;
use super::truth::LagHistogram;
use crate::clock::monotonic_ns;

/// When an event becomes due, relative to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// When the request arrives (role chunk, `response.created`).
    Arrival,
    /// At the end of prefill (the first generated token).
    FirstToken,
    /// One decode step after the previous event.
    Step,
    /// Together with the previous event.
    Same,
}

/// What happens when an event is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Write the bytes.
    Send,
    /// Advance the model without writing (non-streaming replies).
    Silent,
    /// Close the connection mid-stream.
    Abort,
    /// Restart the replica: drop all its streams, cache and counters.
    Restart,
}

/// One pre-rendered event of a response.
#[derive(Debug, Clone)]
pub struct Event {
    pub bytes: Bytes,
    /// Completion tokens in this event.
    pub tokens: u32,
    pub kind: &'static str,
    /// Index of the SSE event within its response.
    pub seq: u32,
    pub gate: Gate,
    /// Extra delay before this event (the `stall` fault).
    pub delay_ns: i64,
    pub action: Action,
    /// 1 when this event's step ran speculative decoding.
    pub drafts: u32,
    pub spec_draft_tokens: u32,
    pub spec_accepted: u32,
}

/// What the timer thread hands to a response body.
#[derive(Debug)]
pub enum Push {
    Data {
        bytes: Bytes,
        deadline_ns: i64,
        seq: u32,
        tokens: u32,
        kind: &'static str,
    },
    /// Close the connection without finishing the response.
    Abort,
}

/// One request handed to the engine.
#[derive(Debug)]
pub struct Job {
    pub replica: usize,
    /// When the request reaches the engine, parsed and planned (CLOCK_MONOTONIC ns): the
    /// deadline of its first events and the earliest start of its prefill.
    pub t_arrival_ns: i64,
    /// Uncached prompt tokens.
    pub prefill_tokens: u32,
    pub events: Vec<Event>,
    pub tx: UnboundedSender<Push>,
    pub jitter_seed: u64,
}

/// Replica state shared between the HTTP side and the engine.
#[derive(Debug)]
pub struct ReplicaShared {
    pub index: usize,
    pub model: String,
    metrics: Mutex<Arc<ReplicaMetrics>>,
    pub cache: Mutex<PrefixCache>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ReplicaShared {
    /// Replica `index` serving `model`, its prefix cache holding at most `cache_tokens`.
    pub fn new(index: usize, model: &str, cache_tokens: u64) -> Self {
        ReplicaShared {
            index,
            model: model.to_string(),
            metrics: Mutex::new(ReplicaMetrics::new(model, 0.0)),
            cache: Mutex::new(PrefixCache::with_capacity(cache_tokens)),
        }
    }

    /// The current metrics set (replaced on restart).
    pub fn metrics(&self) -> Arc<ReplicaMetrics> {
        lock(&self.metrics).clone()
    }

    /// Look a prompt up in the prefix cache (and remember it).
    pub fn prefix_lookup(&self, ids: &[u32]) -> Lookup {
        lock(&self.cache).lookup_and_insert(ids)
    }

    /// Empty the prefix cache (a reset endpoint); returns the tokens dropped.
    pub fn reset_prefix_cache(&self) -> u64 {
        lock(&self.cache).reset()
    }

    fn restart(&self) {
        lock(&self.cache).reset();
        let mut m = lock(&self.metrics);
        let next = ReplicaMetrics::new(&self.model, m.start_time_seconds() + 0.001);
        *m = next;
    }
}

struct Inbox {
    jobs: Vec<Job>,
    shutdown: bool,
}

struct EngineShared {
    inbox: Mutex<Inbox>,
    cv: Condvar,
}

/// Submits requests to the timer thread.
#[derive(Clone)]
pub struct EngineHandle(Arc<EngineShared>);

impl EngineHandle {
    /// Hand a request to the engine.
    pub fn submit(&self, job: Job) {
        lock(&self.0.inbox).jobs.push(job);
        self.0.cv.notify_one();
    }
}

/// Owns the timer thread.
pub struct Engine {
    shared: Arc<EngineShared>,
    thread: Option<JoinHandle<LagHistogram>>,
}

impl Engine {
    /// Start the timer thread. `spin_ns`: how long before a deadline it stops sleeping
    /// and spins; `realtime`: try SCHED_FIFO above the HTTP workers.
    /// `timings` holds each replica's timing, in replica order.
    pub fn start(
        timings: Vec<Timing>,
        replicas: Vec<Arc<ReplicaShared>>,
        spin_ns: i64,
        realtime: bool,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(EngineShared {
            inbox: Mutex::new(Inbox {
                jobs: Vec::new(),
                shutdown: false,
            }),
            cv: Condvar::new(),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("anvil-sim-timer".into())
            .spawn(move || {
                super::realtime::tight_timer_slack();
                if realtime {
                    let _ = super::realtime::fifo(super::realtime::TIMER_PRIORITY);
                }
                let reps = timings
                    .into_iter()
                    .map(|timing| Rep {
                        timing,
                        running: 0,
                        waiting: VecDeque::new(),
                        prefill_free_at: 0,
                    })
                    .collect();
                let mut s = Sched {
                    reps,
                    shared: replicas,
                    seqs: HashMap::new(),
                    heap: BinaryHeap::new(),
                    next_id: 0,
                    fire_lag: LagHistogram::default(),
                };
                s.run(&s2, spin_ns);
                s.fire_lag
            })?;
        Ok(Engine {
            shared,
            thread: Some(thread),
        })
    }

    /// A cloneable handle for submitting requests.
    pub fn handle(&self) -> EngineHandle {
        EngineHandle(self.shared.clone())
    }

    /// Stop the timer thread (open streams end where they are); returns its own firing
    /// lag (hand-over to the stream − deadline), the timer's share of the write lag.
    pub fn shutdown(mut self) -> LagHistogram {
        lock(&self.shared.inbox).shutdown = true;
        self.shared.cv.notify_one();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

struct Seq {
    replica: usize,
    events: Vec<Event>,
    next: usize,
    tx: UnboundedSender<Push>,
    prefill_tokens: u32,
    rng: u64,
    admitted: bool,
    /// When the request reached the engine (admission never precedes it).
    arrival: i64,
}

struct Rep {
    timing: Timing,
    running: usize,
    waiting: VecDeque<u64>,
    /// When the prefill lane is free again.
    prefill_free_at: i64,
}

struct Sched {
    reps: Vec<Rep>,
    shared: Vec<Arc<ReplicaShared>>,
    seqs: HashMap<u64, Seq>,
    heap: BinaryHeap<Reverse<(i64, u64)>>,
    next_id: u64,
    /// Hand-over time − deadline of every event sent.
    fire_lag: LagHistogram,
}

/// SplitMix64 step: a uniform in [0, 1).
fn next_unit(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Step cost in ns of one sequence's decode step with `running` sequences (no jitter).
pub fn step_ns(t: &Timing, running: usize) -> f64 {
    let unit = 1e9 / t.decode_tps;
    unit * ((1.0 - t.batch_cost) + t.batch_cost * running.max(1) as f64)
        * (1.0 + 0.03 * t.spec_depth as f64)
}

/// Prefill compute in ns of `tokens` uncached tokens (what occupies the prefill lane).
pub fn prefill_compute_ns(t: &Timing, tokens: u32) -> f64 {
    tokens as f64 / t.prefill_tps * 1e9
}

/// Time in ns from prefill start to the first token: compute plus one scheduler step per
/// prefill chunk.
pub fn prefill_ns(t: &Timing, tokens: u32) -> f64 {
    let chunks = if t.chunked_prefill == 0 {
        1
    } else {
        tokens.div_ceil(t.chunked_prefill).max(1)
    };
    let step_overhead = 1e9 / t.decode_tps * (1.0 - t.batch_cost);
    prefill_compute_ns(t, tokens) + chunks as f64 * step_overhead
}

impl Sched {
    fn run(&mut self, shared: &EngineShared, spin_ns: i64) {
        let mut jobs = Vec::new();
        loop {
            {
                let mut g = lock(&shared.inbox);
                if g.shutdown {
                    return;
                }
                std::mem::swap(&mut g.jobs, &mut jobs);
            }
            for j in jobs.drain(..) {
                self.arrive(j);
            }
            let now = monotonic_ns();
            let mut fired = false;
            while let Some(&Reverse((d, id))) = self.heap.peek() {
                if d > now {
                    break;
                }
                self.heap.pop();
                self.fire(id, d);
                fired = true;
            }
            if fired {
                continue;
            }
            match self.heap.peek() {
                None => {
                    let g = lock(&shared.inbox);
                    if g.jobs.is_empty() && !g.shutdown {
                        let _ = shared.cv.wait_timeout(g, Duration::from_millis(100));
                    }
                }
                Some(&Reverse((d, _))) => {
                    let sleep = d - now - spin_ns;
                    if sleep > 0 {
                        let g = lock(&shared.inbox);
                        if g.jobs.is_empty() && !g.shutdown {
                            let _ = shared
                                .cv
                                .wait_timeout(g, Duration::from_nanos(sleep as u64));
                        }
                    } else {
                        while monotonic_ns() < d {
                            std::hint::spin_loop();
                        }
                    }
                }
            }
        }
    }

    fn arrive(&mut self, job: Job) {
        let id = self.next_id;
        self.next_id += 1;
        let t = job.t_arrival_ns;
        self.seqs.insert(
            id,
            Seq {
                replica: job.replica.min(self.reps.len().saturating_sub(1)),
                events: job.events,
                next: 0,
                tx: job.tx,
                prefill_tokens: job.prefill_tokens,
                rng: job.jitter_seed,
                admitted: false,
                arrival: t,
            },
        );
        self.schedule_next(id, t);
    }

    /// Schedule the seq's next event, the previous one having happened at `d`.
    fn schedule_next(&mut self, id: u64, d: i64) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        let Some(ev) = seq.events.get(seq.next) else {
            self.finish(id, d, true);
            return;
        };
        let (gate, delay) = (ev.gate, ev.delay_ns);
        let rep = seq.replica;
        match gate {
            Gate::Arrival | Gate::Same => self.heap.push(Reverse((d + delay, id))),
            Gate::FirstToken if !seq.admitted => {
                if self.reps[rep].running < self.reps[rep].timing.max_batch {
                    self.admit(id, d);
                } else {
                    self.reps[rep].waiting.push_back(id);
                    self.update_gauges(rep);
                }
            }
            Gate::FirstToken | Gate::Step => {
                let r = &self.reps[rep];
                let mut cost =
                    step_ns(&r.timing, r.running) * (1.0 + 0.06 * (next_unit(&mut seq.rng) - 0.5));
                if r.prefill_free_at > d {
                    let left = (r.prefill_free_at - d) as f64;
                    cost += if r.timing.chunked_prefill == 0 {
                        left
                    } else {
                        left.min(r.timing.chunked_prefill as f64 / r.timing.prefill_tps * 1e9)
                    };
                }
                self.heap.push(Reverse((d + cost as i64 + delay, id)));
            }
        }
    }

    fn admit(&mut self, id: u64, t: i64) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        seq.admitted = true;
        let t = t.max(seq.arrival);
        let delay = seq.events.get(seq.next).map_or(0, |e| e.delay_ns);
        let r = &mut self.reps[seq.replica];
        r.running += 1;
        // The lane is busy for the prefill compute only; the per-chunk step overhead delays
        // this sequence's first token but is shared with other sequences' steps.
        let start = t.max(r.prefill_free_at);
        let compute = prefill_compute_ns(&r.timing, seq.prefill_tokens) as i64;
        r.prefill_free_at = start + compute;
        let end = start + prefill_ns(&r.timing, seq.prefill_tokens) as i64;
        self.heap.push(Reverse((end + delay, id)));
        let rep = seq.replica;
        self.update_gauges(rep);
    }

    fn update_gauges(&self, rep: usize) {
        let m = self.shared[rep].metrics();
        m.running.set(self.reps[rep].running as i64);
        m.waiting.set(self.reps[rep].waiting.len() as i64);
    }

    /// The seq's next event is due at `d`.
    fn fire(&mut self, id: u64, d: i64) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        if seq.tx.is_closed() {
            // The client went away: free its slot.
            self.finish(id, d, false);
            return;
        }
        let Some(ev) = seq.events.get(seq.next) else {
            self.finish(id, d, true);
            return;
        };
        let rep = seq.replica;
        if ev.tokens > 0 || ev.drafts > 0 {
            let m = self.shared[rep].metrics();
            m.generation_tokens.inc_by(ev.tokens as u64);
            if ev.drafts > 0 {
                m.num_drafts.inc_by(ev.drafts as u64);
                m.num_draft_tokens.inc_by(ev.spec_draft_tokens as u64);
                m.num_accepted_tokens.inc_by(ev.spec_accepted as u64);
                m.count_accepted_positions(ev.spec_accepted);
            }
        }
        match ev.action {
            Action::Send => {
                let push = Push::Data {
                    bytes: ev.bytes.clone(),
                    deadline_ns: d,
                    seq: ev.seq,
                    tokens: ev.tokens,
                    kind: ev.kind,
                };
                if seq.tx.send(push).is_err() {
                    self.finish(id, d, false);
                    return;
                }
                self.fire_lag.record(monotonic_ns() - d);
            }
            Action::Silent => {}
            Action::Abort => {
                let _ = seq.tx.send(Push::Abort);
                self.finish(id, d, false);
                return;
            }
            Action::Restart => {
                self.restart(rep, d);
                return;
            }
        }
        seq.next += 1;
        self.schedule_next(id, d);
    }

    /// Remove a seq (its stream ends when the sender drops) and admit waiting ones at `d`.
    fn finish(&mut self, id: u64, d: i64, success: bool) {
        let Some(seq) = self.seqs.remove(&id) else {
            return;
        };
        let rep = seq.replica;
        if seq.admitted {
            self.reps[rep].running = self.reps[rep].running.saturating_sub(1);
            if success {
                self.shared[rep].metrics().request_success.inc();
            }
        } else {
            self.reps[rep].waiting.retain(|w| *w != id);
        }
        while self.reps[rep].running < self.reps[rep].timing.max_batch {
            let Some(w) = self.reps[rep].waiting.pop_front() else {
                break;
            };
            match self.seqs.get(&w) {
                // Its client left while it waited: drop it without running it.
                Some(s) if s.tx.is_closed() => {
                    self.seqs.remove(&w);
                }
                Some(_) => self.admit(w, d),
                None => {}
            }
        }
        self.update_gauges(rep);
    }

    /// Restart replica `rep`: reset its cache and counters, then drop all its streams
    /// (in that order, so a client that sees its stream cut also sees the new start time).
    fn restart(&mut self, rep: usize, d: i64) {
        self.shared[rep].restart();
        let ids: Vec<u64> = self
            .seqs
            .iter()
            .filter(|(_, s)| s.replica == rep)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(s) = self.seqs.remove(&id) {
                let _ = s.tx.send(Push::Abort);
            }
        }
        let r = &mut self.reps[rep];
        r.running = 0;
        r.waiting.clear();
        r.prefill_free_at = d;
        self.update_gauges(rep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            prefill_tps: 1000.0,
            decode_tps: 50.0,
            max_batch: 4,
            batch_cost: 0.1,
            spec_depth: 0,
            spec_accept: 0.0,
            chunked_prefill: 0,
        }
    }

    #[test]
    fn step_rate_at_one_sequence_is_decode_tps() {
        let t = timing();
        assert!((step_ns(&t, 1) - 20e6).abs() < 1.0);
        assert!(step_ns(&t, 4) > step_ns(&t, 1));
        let k8 = Timing { spec_depth: 8, ..t };
        assert!((step_ns(&k8, 1) / step_ns(&t, 1) - 1.24).abs() < 1e-9);
    }

    #[test]
    fn smaller_prefill_chunks_cost_more_steps() {
        let t = timing();
        let c1 = Timing {
            chunked_prefill: 1024,
            ..t
        };
        let c8 = Timing {
            chunked_prefill: 8192,
            ..t
        };
        assert!(prefill_ns(&c1, 8192) > prefill_ns(&c8, 8192));
        assert!((prefill_ns(&t, 1000) - (1e9 + 18e6)).abs() < 1.0);
    }
}
