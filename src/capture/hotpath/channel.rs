//! The event channel between the hot path and the writer thread: the raw events and request
//! outcomes it carries, a bounded channel that counts (then waits out) a full queue and never
//! drops an event, and the writer's batched drain.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

/// How a request ended: the artifact's own vocabulary. The hot path decides all of it but
/// `aborted` and `stream_error`, which the writer reads from the parsed events.
pub use crate::artifact::Outcome;

/// One framed SSE event as received: the writer parses `data` later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent {
    pub request_index: u32,
    /// 0-based position in the request's stream, counting every event including `[DONE]`.
    pub seq: u32,
    /// `CLOCK_MONOTONIC` nanoseconds when the event was framed.
    pub t_ns: i64,
    /// The `event:` name, if any.
    pub event: Option<Box<str>>,
    /// The `data:` payload, the bytes as received.
    pub data: Box<[u8]>,
}

/// What happened to one request (a row of requests.parquet, before the writer adds the
/// prompt and run columns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOutcome {
    pub request_index: u32,
    pub replica: u32,
    /// When the schedule meant the request to go.
    pub t_intended_ns: i64,
    /// When the worker began on it (before any connect).
    pub t_start_ns: i64,
    /// When the write that completed the request bytes returned; `None` if nothing was written.
    pub t_sent_ns: Option<i64>,
    /// When the first response bytes were read; `None` if none came.
    pub t_first_byte_ns: Option<i64>,
    /// When the outcome was settled.
    pub t_done_ns: i64,
    pub http_status: Option<u16>,
    pub outcome: Outcome,
    /// For HTTP errors the server's error body (at most [`ERROR_BODY_LIMIT`] bytes); otherwise
    /// what went wrong.
    pub error: Option<String>,
    /// SSE events sent to the writer for this request.
    pub events: u32,
    /// Whether the request opened a new connection (its latency then includes the connect).
    pub new_connection: bool,
    /// Whether it was sent a second time because the first attempt provably never reached the
    /// server (see `Worker::execute`).
    pub resent: bool,
}

/// The sending side of the event channel, one clone per worker.
#[derive(Debug, Clone)]
pub struct EventSink {
    pub(super) tx: mpsc::Sender<RawEvent>,
    pub(super) full: Arc<AtomicU64>,
}

/// The writer's side of the event channel.
#[derive(Debug)]
pub struct EventReceiver {
    pub(super) rx: mpsc::Receiver<RawEvent>,
    pub(super) full: Arc<AtomicU64>,
}

/// The writer has gone away: nothing more can be recorded, the run must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event writer has stopped; events can no longer be recorded")]
pub struct SinkClosed;

/// A bounded event channel holding at most `capacity` events (at least 1).
pub fn event_channel(capacity: usize) -> (EventSink, EventReceiver) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let full = Arc::new(AtomicU64::new(0));
    (
        EventSink {
            tx,
            full: full.clone(),
        },
        EventReceiver { rx, full },
    )
}

impl EventSink {
    /// Hand an event on. A full channel is counted, then waited on: no event is dropped.
    #[inline]
    pub async fn send(&self, event: RawEvent) -> Result<(), SinkClosed> {
        match self.tx.try_send(event) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(event)) => {
                self.full.fetch_add(1, Ordering::Relaxed);
                self.tx.send(event).await.map_err(|_| SinkClosed)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(SinkClosed),
        }
    }

    /// How many events found the channel full (and had to wait).
    pub fn channel_full_count(&self) -> u64 {
        self.full.load(Ordering::Relaxed)
    }
}

impl EventReceiver {
    /// The next event, blocking the calling (writer) thread; `None` once every sink is dropped
    /// and the channel is drained. Must not be called from inside an async runtime.
    pub fn blocking_recv(&mut self) -> Option<RawEvent> {
        self.rx.blocking_recv()
    }

    /// The next event if one is waiting, without blocking.
    pub fn try_recv(&mut self) -> Option<RawEvent> {
        self.rx.try_recv().ok()
    }

    /// Move up to `max` waiting events into `buf` without blocking. This is how the writer
    /// should read: drain, encode, sleep some milliseconds, repeat. A receiver that instead
    /// blocks per event makes every send on the hot path wake a sleeping thread (a futex call,
    /// measured at several µs per event; see `hot_path_cpu_per_event`).
    pub fn drain_into(&mut self, buf: &mut Vec<RawEvent>, max: usize) -> Drained {
        let mut n = 0;
        while n < max {
            match self.rx.try_recv() {
                Ok(e) => {
                    buf.push(e);
                    n += 1;
                }
                Err(mpsc::error::TryRecvError::Empty) => return Drained::Open(n),
                Err(mpsc::error::TryRecvError::Disconnected) => return Drained::Closed(n),
            }
        }
        Drained::Open(n)
    }

    /// The next event, for an async consumer.
    pub async fn recv(&mut self) -> Option<RawEvent> {
        self.rx.recv().await
    }

    /// How many events found the channel full (and had to wait).
    pub fn channel_full_count(&self) -> u64 {
        self.full.load(Ordering::Relaxed)
    }
}

/// What [`EventReceiver::drain_into`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// This many events were moved; more may come.
    Open(usize),
    /// This many events were moved, and every sink is gone: the channel is finished.
    Closed(usize),
}
