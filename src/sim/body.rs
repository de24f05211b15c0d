//! The response body: a whole JSON document, or a stream fed by the timer thread.
//!
//! A streaming body takes the "actual write" `CLOCK_MONOTONIC` timestamp when hyper polls a
//! frame out of it (hyper writes it to the socket right after) and sends the truth record
//! off-thread. An `Abort` from the engine becomes a body error, on which hyper closes the
//! connection without the terminating chunk.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc::UnboundedReceiver;

use super::engine::Push;
use super::truth::{Record, TruthSink};
use crate::clock::monotonic_ns;

/// Canaries of requests whose responses are still open, shared by all replicas (the
/// `contaminate` fault leaks one of them into another reply).
pub type Inflight = Arc<Mutex<HashMap<u64, String>>>;

/// Removes a request's canary from [`Inflight`] when its response body is dropped.
pub struct InflightGuard {
    pub map: Inflight,
    pub key: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

/// The error that makes hyper drop the connection mid-stream.
#[derive(Debug, thiserror::Error)]
#[error("stream aborted by the simulator (fault injection or restart)")]
pub struct Aborted;

/// A streaming response's receiving end.
pub struct StreamState {
    pub rx: UnboundedReceiver<Push>,
    pub request_id: Arc<str>,
    pub replica: u16,
    pub truth: TruthSink,
    pub _inflight: Option<InflightGuard>,
    /// Notified when the stream ends: the connection then closes after this response.
    pub close_after: Option<Arc<tokio::sync::Notify>>,
}

/// Every response body the simulator sends.
pub enum SimBody {
    Full(Option<Bytes>),
    Stream(Box<StreamState>),
}

impl SimBody {
    pub fn full(b: impl Into<Bytes>) -> Self {
        SimBody::Full(Some(b.into()))
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = Aborted;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Aborted>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Stream(s) => match s.rx.poll_recv(cx) {
                Poll::Ready(Some(Push::Data {
                    bytes,
                    deadline_ns,
                    seq,
                    tokens,
                    kind,
                })) => {
                    let t = monotonic_ns();
                    s.truth.send(Record {
                        request_id: s.request_id.clone(),
                        replica: s.replica,
                        seq: Some(seq),
                        tokens,
                        kind,
                        t_deadline_ns: Some(deadline_ns),
                        t_write_ns: t,
                    });
                    Poll::Ready(Some(Ok(Frame::data(bytes))))
                }
                Poll::Ready(Some(Push::Abort)) => Poll::Ready(Some(Err(Aborted))),
                Poll::Ready(None) => {
                    if let Some(close) = &s.close_after {
                        close.notify_one();
                    }
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, SimBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SimBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            SimBody::Full(None) => SizeHint::with_exact(0),
            SimBody::Stream(_) => SizeHint::default(),
        }
    }
}
