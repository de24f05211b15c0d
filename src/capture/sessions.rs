//! Driving a session workload: `concurrency` lanes per replica, each a worker that runs
//! whole sessions one turn after another, so a session's turns go to one replica (whose
//! prefix cache holds its history), as a router with session affinity would send them.
//!
//! - **Closed loop**: lane k starts session k at the barrier's release (the first wave is
//!   the first `concurrency × replicas` sessions' first turns); a lane whose session ended
//!   takes the next session.
//! - **Open loop**: a dispatcher releases session s at its planned arrival
//!   (`SessionPlan::arrivals_ns`); the next free lane takes it, a session released while
//!   every lane is busy waits in the client (its first turn's `t_released_ns −
//!   t_intended_ns`).
//!
//! A later turn's body needs the reply before it. The writer thread, which parses every
//! event anyway, hands each session turn's reply (content, reasoning, usage, end time) to
//! the **conversation thread** here once the turn's outcome is known; that thread appends it
//! to the session's history ([`Conversation::next_turn`]), serialises the next turn's body,
//! tells the writer what to record of it ([`Msg::Turn`]), and hands it to the lane waiting
//! on the session. The lane waits out the think time, due from the reply's last byte, and
//! sends: the turn's `t_intended_ns` is that due time, so a late build shows as client-side
//! lateness. The socket side neither parses nor serialises.
//!
//! A turn that fails ends its session: its later turns are recorded as `cancelled`, never
//! sent, saying which turn failed ([`Msg::SessionCut`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Barrier, oneshot};

use super::hotpath::{Cancel, Worker};
use super::recorder::{Msg, RequestMeta, TurnReply};
use super::schedule::{self, Drive};
use crate::artifact::{Outcome, RequestKind, SessionTurn};
use crate::clock::monotonic_ns;
use crate::workload::prompt::PromptBuilder;
use crate::workload::request::{self, PreparedRequest, RequestOptions};
use crate::workload::session::{Conversation, SessionCell, SessionPlan};

/// What builds a session workload's later turns.
pub struct Conversations {
    pub cell: SessionCell,
    /// The measured prompts' builder.
    pub builder: PromptBuilder,
    pub opts: RequestOptions,
    pub run_id: String,
    /// Each session's first turn's filler size (its calibration).
    pub first_units: Vec<u32>,
}

/// A later turn, ready to go when due.
struct NextTurn {
    prepared: PreparedRequest,
    /// The reply before it ended plus the think time (`CLOCK_MONOTONIC`, ns).
    t_due_ns: i64,
}

/// Lanes waiting for the turn after request index i (`None`: the session ends).
type Waiting = Arc<Mutex<HashMap<u32, oneshot::Sender<Option<NextTurn>>>>>;

/// Drive the warm-up requests `warm` one-shot, then every session; `Some(why)` when the run
/// did not issue what it said it would.
pub(super) async fn drive(
    d: &Drive<'_>,
    conversations: Conversations,
    replies: Receiver<TurnReply>,
    warm: std::ops::Range<u32>,
) -> Option<String> {
    let cfg = d.cfg;
    let plan = conversations.cell.plan.clone();
    let workers = match schedule::workers(
        cfg,
        d.closes_after_stream,
        d.sink,
        cfg.cell.concurrency,
        |_| true,
    ) {
        Ok(w) => w,
        Err(why) => return Some(why),
    };
    let waiting: Waiting = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let builder = {
        let (waiting, done, msgs) = (waiting.clone(), done.clone(), d.msgs.clone());
        let replicas = cfg.endpoints.len() as u32;
        match std::thread::Builder::new()
            .name("anvil-sessions".into())
            .spawn(move || {
                // Serialising bodies is batch work: never real-time, whoever spawned us.
                crate::realtime::ordinary_priority();
                converse(conversations, replies, msgs, waiting, done, replicas)
            }) {
            Ok(t) => t,
            Err(e) => return Some(format!("starting the conversation thread: {e}")),
        }
    };
    let lanes = workers.len() as u32;
    let sessions = plan.turns.len() as u32;
    let barrier = Arc::new(Barrier::new(workers.len() + 1));
    // When the barrier released the sessions (the first wave's intended time): the last
    // party to arrive stores it before it waits, so every party reads it after the release.
    let release_ns = Arc::new(AtomicI64::new(0));
    let parties = workers.len() as u32 + 1;
    let arrived = Arc::new(AtomicU32::new(0));
    let arrive = {
        let (arrived, release_ns) = (arrived.clone(), release_ns.clone());
        move || {
            if arrived.fetch_add(1, Ordering::SeqCst) + 1 == parties {
                release_ns.store(monotonic_ns(), Ordering::SeqCst);
            }
        }
    };
    let warm_next = Arc::new(AtomicU32::new(warm.start));
    let next_session = Arc::new(AtomicU32::new(lanes));
    let open = plan.arrivals_ns.is_some();
    let (open_tx, open_rx) = tokio::sync::mpsc::unbounded_channel::<(u32, i64)>();
    let open_rx = Arc::new(tokio::sync::Mutex::new(open_rx));
    let sink_failed = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for (position, mut worker) in workers {
        let (plan, waiting, barrier, release_ns) = (
            plan.clone(),
            waiting.clone(),
            barrier.clone(),
            release_ns.clone(),
        );
        let (warm_next, next_session, open_rx) =
            (warm_next.clone(), next_session.clone(), open_rx.clone());
        let (prepared, msgs) = (d.prepared.clone(), d.msgs.clone());
        let (stop, cancel, sink_failed) = (d.stop.clone(), d.cancel.clone(), sink_failed.clone());
        let warm_end = warm.end;
        let arrive = arrive.clone();
        tasks.spawn(async move {
            let lane = Lane {
                plan: &plan,
                prepared: &prepared,
                waiting: &waiting,
                msgs: &msgs,
                stop: &stop,
                cancel: &cancel,
            };
            worker.preconnect().await;
            let mut ok = true;
            while ok && !stop.is_cancelled() {
                let idx = warm_next.fetch_add(1, Ordering::Relaxed);
                if idx >= warm_end {
                    break;
                }
                ok = schedule::send_one(
                    &mut worker,
                    &prepared[idx as usize],
                    monotonic_ns(),
                    &cancel,
                    &msgs,
                )
                .await;
            }
            arrive();
            barrier.wait().await;
            if open {
                while ok {
                    let next = {
                        let mut rx = open_rx.lock().await;
                        tokio::select! {
                            biased;
                            () = stop.cancelled() => None,
                            v = rx.recv() => v,
                        }
                    };
                    let Some((s, t)) = next.filter(|_| !stop.is_cancelled()) else {
                        break;
                    };
                    ok = lane.session(&mut worker, s, t).await;
                }
            } else {
                let mut s = position as u32;
                let mut t = release_ns.load(Ordering::SeqCst);
                while ok && s < sessions && !stop.is_cancelled() {
                    ok = lane.session(&mut worker, s, t).await;
                    s = next_session.fetch_add(1, Ordering::Relaxed);
                    t = monotonic_ns();
                }
            }
            if !ok {
                sink_failed.store(true, Ordering::SeqCst);
                stop.cancel();
                cancel.cancel();
            }
        });
    }
    // Every lane warmed up and waiting: the release.
    arrive();
    barrier.wait().await;
    if let Some(arrivals) = plan.arrivals_ns.clone() {
        let stop = d.stop.clone();
        let start = monotonic_ns();
        tasks.spawn(async move {
            for (s, at) in arrivals.iter().enumerate() {
                let intended = start.saturating_add(*at);
                let wait =
                    Duration::from_nanos(intended.saturating_sub(monotonic_ns()).max(0) as u64);
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                if open_tx.send((s as u32, intended)).is_err() {
                    return;
                }
            }
        });
    } else {
        drop(open_tx);
    }
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined
            && failure.is_none()
        {
            failure = Some(format!("a capture task stopped: {e}"));
            d.stop.cancel();
            d.cancel.cancel();
        }
    }
    done.store(true, Ordering::SeqCst);
    // The conversation thread holds a sender of the writer's messages: it must be gone
    // before the writer can end.
    if tokio::task::spawn_blocking(move || builder.join().is_err())
        .await
        .unwrap_or(true)
    {
        failure.get_or_insert("the conversation thread stopped".to_owned());
    }
    if sink_failed.load(Ordering::SeqCst) {
        failure.get_or_insert("the event writer stopped during the run".to_owned());
    }
    failure
}

/// What a lane runs its sessions with.
struct Lane<'a> {
    plan: &'a SessionPlan,
    prepared: &'a [PreparedRequest],
    waiting: &'a Waiting,
    msgs: &'a Sender<Msg>,
    stop: &'a Cancel,
    cancel: &'a Cancel,
}

impl Lane<'_> {
    /// Run session `s`, its first turn due at `t_first_ns`: each turn after the reply
    /// before it and its think time. `false` if the writer is gone.
    async fn session(&self, worker: &mut Worker, s: u32, t_first_ns: i64) -> bool {
        let (first, turns) = (
            self.plan.first_index[s as usize],
            self.plan.turns[s as usize],
        );
        let mut req = self.prepared[first as usize].clone();
        let mut t = t_first_ns;
        for k in 0..turns {
            let index = first + k;
            let next = (k + 1 < turns).then(|| {
                let (tx, rx) = oneshot::channel();
                self.waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(index, tx);
                rx
            });
            if !schedule::send_one(worker, &req, t, self.cancel, self.msgs).await {
                return false;
            }
            let Some(next) = next else {
                break;
            };
            let next = tokio::select! {
                biased;
                () = self.stop.cancelled() => None,
                r = next => r.ok().flatten(),
            };
            let Some(next) = next else {
                break;
            };
            // The runtime's timer fires up to a millisecond late: sleep to 2 ms before the
            // due time, then yield until it, so a think time ends within microseconds.
            let early = next.t_due_ns.saturating_sub(2_000_000);
            let wait = Duration::from_nanos(early.saturating_sub(monotonic_ns()).max(0) as u64);
            if !wait.is_zero() {
                tokio::select! {
                    biased;
                    () = self.stop.cancelled() => {}
                    () = tokio::time::sleep(wait) => {}
                }
            }
            while monotonic_ns() < next.t_due_ns && !self.stop.is_cancelled() {
                tokio::task::yield_now().await;
            }
            if self.stop.is_cancelled() {
                break;
            }
            t = next.t_due_ns;
            req = next.prepared;
        }
        true
    }
}

/// How often the conversation thread looks whether the run's lanes are done.
const DONE_POLL: Duration = Duration::from_millis(20);

/// The conversation thread: each session turn's reply in, the next turn out.
fn converse(
    c: Conversations,
    replies: Receiver<TurnReply>,
    msgs: Sender<Msg>,
    waiting: Waiting,
    done: Arc<AtomicBool>,
    replicas: u32,
) {
    // However this thread ends, no lane waits on it any more: each waiting lane's receiver
    // then sees its sender gone and ends its session.
    struct Release(Waiting);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }
    let _release = Release(waiting.clone());
    let plan = c.cell.plan.clone();
    let spec = &c.cell.spec;
    let mut open: HashMap<u32, Conversation> = HashMap::new();
    loop {
        let r = match replies.recv_timeout(DONE_POLL) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) if done.load(Ordering::SeqCst) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let Some((s, turn)) = plan.turn_of(r.index) else {
            continue;
        };
        let waiter = waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&r.index);
        let (first, turns) = (plan.first_index[s as usize], plan.turns[s as usize]);
        if turn + 1 >= turns {
            open.remove(&s);
            continue;
        }
        let cut = |why: String| {
            let _ = msgs.send(Msg::SessionCut {
                from: r.index + 1,
                end: first + turns,
                t_ns: monotonic_ns(),
                reason: why,
            });
        };
        if r.outcome == Outcome::Cancelled {
            // The run is stopping: the session's later turns are the run's never-sent
            // requests, not casualties of a failed turn.
            open.remove(&s);
            if let Some(w) = waiter {
                let _ = w.send(None);
            }
            continue;
        }
        if r.outcome != Outcome::Ok {
            open.remove(&s);
            cut(format!(
                "turn {turn} of session {s} ended `{}`, and a session stops at its first failed turn",
                r.outcome.as_str()
            ));
            if let Some(w) = waiter {
                let _ = w.send(None);
            }
            continue;
        }
        let conversation = open.entry(s).or_insert_with(|| {
            Conversation::open(
                &c.builder
                    .build(first, c.first_units.get(s as usize).copied().unwrap_or(0)),
            )
        });
        let index = r.index + 1;
        let prompt = conversation.next_turn(
            &c.builder,
            &r.reply,
            spec.keep_reasoning,
            index,
            turn + 1,
            spec.turn_words,
            spec.tool_turn(turn + 1),
        );
        let prepared = match request::prepare(&c.opts, &c.run_id, &prompt) {
            Ok(p) => p,
            Err(e) => {
                open.remove(&s);
                cut(format!("building turn {} of session {s}: {e}", turn + 1));
                if let Some(w) = waiter {
                    let _ = w.send(None);
                }
                continue;
            }
        };
        let meta = RequestMeta {
            kind: RequestKind::Measured,
            replica_hint: index % replicas.max(1),
            canary: prompt.canary.clone(),
            prompt_sha256: prompt.sha256.clone(),
            prompt_chars: prompt.chars,
            prompt_tokens_calibrated: None,
            request_body: Some(prepared.body.clone()),
            check: None,
            api: None,
            asked: None,
            ignore_eos: Some(false),
            session: Some(SessionTurn {
                session_id: s,
                turn: turn + 1,
                history_tokens: history_tokens(&r, spec.keep_reasoning),
            }),
        };
        if msgs
            .send(Msg::Turn {
                index,
                meta: Box::new(meta),
            })
            .is_err()
        {
            return;
        }
        let due = r
            .t_done_ns
            .saturating_add(plan.think_ns.get(index as usize).copied().unwrap_or(0));
        if let Some(w) = waiter {
            let _ = w.send(Some(NextTurn {
                prepared,
                t_due_ns: due,
            }));
        }
    }
}

/// The conversation the next turn carries before its new message, in tokens: the reply's
/// prompt and completion tokens, less the reasoning tokens the history does not carry (all
/// of them unless `keep_reasoning`; kept, only what was streamed can be resent: reasoning
/// the server counted but never streamed is never in the history). Unknown (`None`) without
/// usage, or when the reply streamed reasoning that the history drops and the usage does not
/// count.
fn history_tokens(r: &TurnReply, keep_reasoning: bool) -> Option<u64> {
    let (prompt, completion) = r.prompt_tokens.zip(r.completion_tokens)?;
    let dropped = if keep_reasoning && !r.reply.reasoning.is_empty() {
        0
    } else if r.reply.reasoning.is_empty() {
        r.reasoning_tokens.unwrap_or(0)
    } else {
        r.reasoning_tokens?
    };
    Some((prompt + completion - dropped).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(reasoning: &str, reasoning_tokens: Option<i64>) -> TurnReply {
        TurnReply {
            index: 0,
            outcome: crate::artifact::Outcome::Ok,
            reply: crate::workload::session::Reply {
                content: "an answer".into(),
                reasoning: reasoning.into(),
            },
            prompt_tokens: Some(500),
            completion_tokens: Some(120),
            reasoning_tokens,
            t_done_ns: 0,
        }
    }

    #[test]
    fn the_history_counts_the_reasoning_only_when_it_is_resent() {
        assert_eq!(history_tokens(&reply("", None), false), Some(620));
        assert_eq!(
            history_tokens(&reply("thinking", Some(80)), false),
            Some(540)
        );
        assert_eq!(
            history_tokens(&reply("thinking", Some(80)), true),
            Some(620)
        );
        // Reasoning dropped from the history but not counted by the usage: unknown.
        assert_eq!(history_tokens(&reply("thinking", None), false), None);
        assert_eq!(history_tokens(&reply("thinking", None), true), Some(620));
        // Hidden reasoning (counted, never streamed) is never resent.
        assert_eq!(history_tokens(&reply("", Some(80)), false), Some(540));
        assert_eq!(history_tokens(&reply("", Some(80)), true), Some(540));
        let mut none = reply("", None);
        none.completion_tokens = None;
        assert_eq!(history_tokens(&none, false), None);
    }
}
