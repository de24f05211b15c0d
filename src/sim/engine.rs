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
//!   step also pays for one prefill chunk (without chunking: waits for the prefill to end);
//! - a finite KV pool of `kv_pool_tokens` (0: unbounded): a running sequence holds its whole
//!   prompt plus the tokens generated so far. A waiting sequence is admitted only when its
//!   KV fits (first come, first served: the head of the queue blocks the rest, as vLLM's
//!   scheduler does); when a decode step finds the pool full, the most recently admitted
//!   running sequence is preempted (vLLM's recompute preemption): its KV is freed, it goes
//!   back to the front of the queue, and on readmission it prefills its prompt and what it
//!   had generated again before its next token. A lone sequence is never preempted (it may
//!   overfill the pool). Each preemption counts in `vllm:num_preemptions` and writes a
//!   `preempt` truth row; `vllm:kv_cache_usage_perc` is the pool's used share;
//! - with `--dcgm`, the replica's GPUs run at a clock factor its power and thermal model sets
//!   ([`super::dcgm`]): every step and prefill takes 1 / factor as long (without it the
//!   factor is 1 and nothing changes).

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
use super::power::Activity;
use super::truth::{LagHistogram, Record, TruthSink};
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
    pub request_id: Arc<str>,
    pub replica: usize,
    /// When the request reaches the engine, parsed and planned (CLOCK_MONOTONIC ns): the
    /// deadline of its first events and the earliest start of its prefill.
    pub t_arrival_ns: i64,
    /// Uncached prompt tokens.
    pub prefill_tokens: u32,
    /// The whole prompt, cached or not: what the sequence holds in the KV pool at admission.
    pub prompt_tokens: u32,
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
    /// What it decoded and prefilled, and the clock factor its GPUs run at (`dcgm`).
    pub activity: Activity,
    /// The canaries of the last [`SEEN_CANARIES`] prompts served, newest last (the
    /// `cache-leak` fault draws from them).
    seen_canaries: Mutex<std::collections::VecDeque<String>>,
}

/// How many prompts' canaries a replica remembers.
const SEEN_CANARIES: usize = 256;

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
            activity: Activity::default(),
            seen_canaries: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Remember that a prompt ending in canary `own` was served; with `leak`, first the
    /// newest canary served before that `prompt_text` does not hold (another conversation's).
    pub fn seen_canary(&self, own: Option<&str>, prompt_text: &str, leak: bool) -> Option<String> {
        let mut seen = lock(&self.seen_canaries);
        let leaked = leak
            .then(|| {
                seen.iter()
                    .rev()
                    .find(|c| Some(c.as_str()) != own && !prompt_text.contains(c.as_str()))
                    .cloned()
            })
            .flatten();
        if let Some(c) = own {
            if seen.len() == SEEN_CANARIES {
                seen.pop_front();
            }
            seen.push_back(c.to_owned());
        }
        leaked
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
    /// `timings` holds each replica's timing, in replica order; `kv_pool_tokens` each
    /// replica's KV pool (0: unbounded); preemptions go to `truth`.
    pub fn start(
        timings: Vec<Timing>,
        replicas: Vec<Arc<ReplicaShared>>,
        kv_pool_tokens: u64,
        truth: TruthSink,
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
                        kv_capacity: kv_pool_tokens,
                        kv_used: 0,
                    })
                    .collect();
                let mut s = Sched {
                    reps,
                    shared: replicas,
                    seqs: HashMap::new(),
                    heap: BinaryHeap::new(),
                    next_id: 0,
                    admissions: 0,
                    truth,
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
    request_id: Arc<str>,
    replica: usize,
    events: Vec<Event>,
    next: usize,
    tx: UnboundedSender<Push>,
    prefill_tokens: u32,
    rng: u64,
    admitted: bool,
    /// When the request reached the engine (admission never precedes it).
    arrival: i64,
    /// Tokens it holds in the KV pool while running: prompt + generated so far.
    kv_tokens: u64,
    /// Admission order on its replica (the most recent is preempted first).
    admitted_as: u64,
    /// Bumped at each preemption: heap entries of an earlier epoch are stale.
    epoch: u32,
    /// Preempted: readmission prefills `kv_tokens` again.
    recompute: bool,
}

struct Rep {
    timing: Timing,
    running: usize,
    waiting: VecDeque<u64>,
    /// When the prefill lane is free again.
    prefill_free_at: i64,
    /// KV pool size in tokens (0: unbounded) and what running sequences hold of it.
    kv_capacity: u64,
    kv_used: u64,
}

impl Rep {
    /// Whether a sequence holding `kv` tokens can start running now.
    fn fits(&self, kv: u64) -> bool {
        self.running < self.timing.max_batch
            && (self.kv_capacity == 0 || self.running == 0 || self.kv_used + kv <= self.kv_capacity)
    }
}

struct Sched {
    reps: Vec<Rep>,
    shared: Vec<Arc<ReplicaShared>>,
    seqs: HashMap<u64, Seq>,
    /// (deadline, seq id, seq epoch).
    heap: BinaryHeap<Reverse<(i64, u64, u32)>>,
    next_id: u64,
    /// Admissions so far, all replicas (orders `Seq::admitted_as`).
    admissions: u64,
    truth: TruthSink,
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
            while let Some(&Reverse((d, id, epoch))) = self.heap.peek() {
                if d > now {
                    break;
                }
                self.heap.pop();
                if self.seqs.get(&id).is_some_and(|s| s.epoch == epoch) {
                    self.fire(id, d);
                }
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
                Some(&Reverse((d, _, _))) => {
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
                request_id: job.request_id,
                replica: job.replica.min(self.reps.len().saturating_sub(1)),
                events: job.events,
                next: 0,
                tx: job.tx,
                prefill_tokens: job.prefill_tokens,
                rng: job.jitter_seed,
                admitted: false,
                arrival: t,
                kv_tokens: u64::from(job.prompt_tokens),
                admitted_as: 0,
                epoch: 0,
                recompute: false,
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
        let (rep, epoch) = (seq.replica, seq.epoch);
        match gate {
            Gate::Arrival | Gate::Same => self.heap.push(Reverse((d + delay, id, epoch))),
            Gate::FirstToken if !seq.admitted => {
                let r = &self.reps[rep];
                if r.waiting.is_empty() && r.fits(seq.kv_tokens) {
                    self.admit(id, d);
                } else {
                    self.reps[rep].waiting.push_back(id);
                    self.update_gauges(rep);
                }
            }
            Gate::FirstToken | Gate::Step => {
                let r = &self.reps[rep];
                // Clocks lowered by the GPUs' power limit or heat stretch every step.
                let clock = self.shared[rep].activity.clock();
                let mut cost = step_ns(&r.timing, r.running)
                    * (1.0 + 0.06 * (next_unit(&mut seq.rng) - 0.5))
                    / clock;
                if r.prefill_free_at > d {
                    let left = (r.prefill_free_at - d) as f64;
                    cost += if r.timing.chunked_prefill == 0 {
                        left
                    } else {
                        left.min(r.timing.chunked_prefill as f64 / r.timing.prefill_tps * 1e9)
                    };
                }
                self.heap
                    .push(Reverse((d + cost as i64 + delay, id, epoch)));
            }
        }
    }

    fn admit(&mut self, id: u64, t: i64) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        seq.admitted = true;
        seq.admitted_as = self.admissions;
        self.admissions += 1;
        let t = t.max(seq.arrival);
        let delay = seq.events.get(seq.next).map_or(0, |e| e.delay_ns);
        // After a preemption the prompt and every generated token are prefilled again.
        let prefill = if seq.recompute {
            u32::try_from(seq.kv_tokens).unwrap_or(u32::MAX)
        } else {
            seq.prefill_tokens
        };
        let r = &mut self.reps[seq.replica];
        r.running += 1;
        r.kv_used += seq.kv_tokens;
        // The lane is busy for the prefill compute only; the per-chunk step overhead delays
        // this sequence's first token but is shared with other sequences' steps.
        let start = t.max(r.prefill_free_at);
        let activity = &self.shared[seq.replica].activity;
        activity.prefilled(prefill);
        let clock = activity.clock();
        let compute = (prefill_compute_ns(&r.timing, prefill) / clock) as i64;
        r.prefill_free_at = start + compute;
        let end = start + (prefill_ns(&r.timing, prefill) / clock) as i64;
        self.heap.push(Reverse((end + delay, id, seq.epoch)));
        let rep = seq.replica;
        self.update_gauges(rep);
    }

    fn update_gauges(&self, rep: usize) {
        let m = self.shared[rep].metrics();
        let r = &self.reps[rep];
        m.running.set(r.running as i64);
        m.waiting.set(r.waiting.len() as i64);
        if r.kv_capacity > 0 {
            m.kv_cache_usage
                .set(r.kv_used as f64 / r.kv_capacity as f64);
        }
    }

    /// Make room in the pool for `tokens` more of running seq `id`'s KV at `d`, preempting
    /// the most recently admitted sequences as needed; false when `id` itself was preempted
    /// (its event is not sent now but after its readmission).
    fn grow(&mut self, id: u64, tokens: u32, d: i64) -> bool {
        let Some(rep) = self.seqs.get(&id).map(|s| s.replica) else {
            return false;
        };
        let tokens = u64::from(tokens);
        loop {
            let r = &self.reps[rep];
            if r.kv_capacity == 0 || r.running <= 1 || r.kv_used + tokens <= r.kv_capacity {
                break;
            }
            let victim = self
                .seqs
                .iter()
                .filter(|(_, s)| s.replica == rep && s.admitted)
                .max_by_key(|(_, s)| s.admitted_as)
                .map(|(v, _)| *v);
            let Some(victim) = victim else {
                break;
            };
            self.preempt(victim, d);
            if victim == id {
                return false;
            }
        }
        if let Some(seq) = self.seqs.get_mut(&id) {
            seq.kv_tokens += tokens;
            self.reps[rep].kv_used += tokens;
        }
        self.update_gauges(rep);
        true
    }

    /// Preempt running seq `id` at `d`: free its KV, queue it first, count and record it.
    fn preempt(&mut self, id: u64, d: i64) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        seq.admitted = false;
        seq.recompute = true;
        seq.epoch = seq.epoch.wrapping_add(1);
        let rep = seq.replica;
        let r = &mut self.reps[rep];
        r.running = r.running.saturating_sub(1);
        r.kv_used = r.kv_used.saturating_sub(seq.kv_tokens);
        r.waiting.push_front(id);
        self.shared[rep].metrics().num_preemptions.inc();
        self.truth.send(Record::mark(
            seq.request_id.clone(),
            rep,
            "preempt",
            u32::try_from(seq.kv_tokens).unwrap_or(u32::MAX),
            d,
        ));
        self.update_gauges(rep);
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
        let (rep, tokens, admitted) = (seq.replica, ev.tokens, seq.admitted);
        if tokens > 0 && admitted && !self.grow(id, tokens, d) {
            return;
        }
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        let Some(ev) = seq.events.get(seq.next) else {
            return;
        };
        if ev.tokens > 0 || ev.drafts > 0 {
            self.shared[rep].activity.decoded(ev.tokens);
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
            let r = &mut self.reps[rep];
            r.running = r.running.saturating_sub(1);
            r.kv_used = r.kv_used.saturating_sub(seq.kv_tokens);
            if success {
                self.shared[rep].metrics().request_success.inc();
            }
        } else {
            self.reps[rep].waiting.retain(|w| *w != id);
        }
        while let Some(&w) = self.reps[rep].waiting.front() {
            match self.seqs.get(&w) {
                // Its client left while it waited: drop it without running it.
                Some(s) if s.tx.is_closed() => {
                    self.reps[rep].waiting.pop_front();
                    self.seqs.remove(&w);
                }
                Some(s) if self.reps[rep].fits(s.kv_tokens) => {
                    self.reps[rep].waiting.pop_front();
                    self.admit(w, d);
                }
                Some(_) => break,
                None => {
                    self.reps[rep].waiting.pop_front();
                }
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
        r.kv_used = 0;
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
