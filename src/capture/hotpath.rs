//! The hot path: send one request on a kept HTTP/1.1 connection, timestamp what comes back,
//! and hand each framed SSE event to the writer through a bounded channel.
//!
//! Timestamps (all raw `CLOCK_MONOTONIC` nanoseconds):
//!
//! - `t_sent_ns`: when the socket write that completed the request bytes returned. The socket
//!   is wrapped in [`TimedStream`], which notes the time of every write; the last write before
//!   the first response byte is the one that finished the request. This is the "request start"
//!   that TTFT counts from, not the moment the client meant to send: a client that starts its
//!   timer and then waits for its own event loop to write overstates TTFT.
//! - `t_first_byte_ns`: when the first read of response bytes returned.
//! - each [`RawEvent`]'s `t_ns`: when the event was framed, right after the read that completed
//!   it, in the same task (the connection is driven inside the request's own task, so no hop
//!   between tasks sits between the read and the timestamp).
//! - `t_done_ns`: when the outcome was settled (normally the end of the response body).
//!
//! What the hot path does per event: frame it, read the clock, move the event name and data
//! into a [`RawEvent`], `try_send` it. No JSON parsing, no encoding, no blocking I/O. When the
//! channel is full the event is counted ([`EventSink::channel_full_count`]) and then awaited
//! into the channel: a slow writer shows up as a count, never as lost events.
//!
//! Timeouts ([`Timeouts`]) each end a request with their own [`Outcome`]; there are no automatic
//! retries. The one exception is a request that provably never reached the server, which is
//! sent once more on a fresh connection and marked `resent`: hyper reports it never written
//! (a kept connection had just closed), the socket showed the server's close before the
//! request's first byte was written, or the server's FIN came before any response byte and a
//! reset then answered the request's bytes (its socket was closed when they arrived). A
//! failure after the server could have read the request stays a failure: a bare reset, which
//! an abortive close after reading also gives, is one.
//!
//! A connection is reused only when the last response was read to its end, did not say
//! `Connection: close`, and the socket shows no close by the server just before the next
//! request's first write. A worker that once finds the server closing a kept connection
//! soon after a response (llama.cpp's server closes after every streamed response while
//! announcing keep-alive) opens a fresh connection for each later request instead of racing
//! that close; a close after an idle spell (a keep-alive timeout) changes nothing.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyDataStream, BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::endpoint::{Endpoint, EndpointError};
use super::sse::{SseError, SseStream};
use crate::clock::monotonic_ns;
use crate::workload::request::{Api, ApiKey, PreparedRequest, RequestError};

/// The longest server error body kept in a request's error text.
pub const ERROR_BODY_LIMIT: usize = 4096;

/// Per-request time limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a TCP connection (only when the worker has no live one).
    pub connect: Duration,
    /// From sending the request to its first SSE event (or, for an error status, the response
    /// head). It spans queueing and prefill: raise it for long contexts.
    pub first_byte: Duration,
    /// Longest gap between two SSE events after the first.
    pub idle: Duration,
    /// The whole request, connect included.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(300),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(1800),
        }
    }
}

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

// ---------------------------------------------------------------------------------------------
// Event channel
// ---------------------------------------------------------------------------------------------

/// The sending side of the event channel, one clone per worker.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: mpsc::Sender<RawEvent>,
    full: Arc<AtomicU64>,
}

/// The writer's side of the event channel.
#[derive(Debug)]
pub struct EventReceiver {
    rx: mpsc::Receiver<RawEvent>,
    full: Arc<AtomicU64>,
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
    /// should read: drain, encode, sleep a millisecond or two, repeat. A receiver that instead
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

// ---------------------------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------------------------

/// A run-wide cancellation signal (e.g. on SIGINT): requests in flight end as `cancelled`.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<CancelInner>);

#[derive(Debug, Default)]
struct CancelInner {
    flag: AtomicBool,
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancel every request holding this signal.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Resolves once [`Cancel::cancel`] has been called (immediately if it already was).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Timestamped socket
// ---------------------------------------------------------------------------------------------

/// Write and read times of the current request on one connection (0 = not yet), and what the
/// socket said about a server that went away without answering.
#[derive(Debug, Default)]
struct IoStamps {
    last_write_ns: AtomicI64,
    first_read_ns: AtomicI64,
    /// `last_write_ns` as it was at the first read: the write that completed the request.
    sent_at_first_read_ns: AtomicI64,
    /// Set by [`IoStamps::arm`]: the next write is the request's first, check the socket first.
    check_before_write: AtomicBool,
    /// The server had closed the connection (end of stream, or bytes nobody asked for) before
    /// the request's first byte was written: nothing was sent.
    closed_before_write: AtomicBool,
    /// The connection ended (the server's FIN) before any response byte.
    eof_before_response: AtomicBool,
    /// After that end of stream, a reset answered the request's bytes: the server's socket
    /// was already closed when they arrived (a host that receives data for a closed socket
    /// answers with a reset, RFC 793 3.4, RFC 1122 4.2.2.13), so its application never read
    /// them. A reset without the FIN before it proves nothing: an abortive close after
    /// reading looks the same.
    reset_after_eof: AtomicBool,
}

impl IoStamps {
    fn arm(&self) {
        self.last_write_ns.store(0, Ordering::Relaxed);
        self.first_read_ns.store(0, Ordering::Relaxed);
        self.sent_at_first_read_ns.store(0, Ordering::Relaxed);
        self.check_before_write.store(true, Ordering::Relaxed);
        self.closed_before_write.store(false, Ordering::Relaxed);
        self.eof_before_response.store(false, Ordering::Relaxed);
        self.reset_after_eof.store(false, Ordering::Relaxed);
    }

    /// Whether the current request provably never reached the server: nothing was written,
    /// or the server had closed its side before the request's bytes arrived (its FIN, then a
    /// reset answering those bytes), and no response byte came.
    fn never_reached_server(&self) -> bool {
        self.first_read_ns.load(Ordering::Relaxed) == 0
            && (self.closed_before_write.load(Ordering::Relaxed)
                || self.reset_after_eof.load(Ordering::Relaxed))
    }

    fn sent(&self) -> Option<i64> {
        let t = if self.first_read_ns.load(Ordering::Relaxed) != 0 {
            self.sent_at_first_read_ns.load(Ordering::Relaxed)
        } else {
            self.last_write_ns.load(Ordering::Relaxed)
        };
        (t != 0).then_some(t)
    }

    fn first_byte(&self) -> Option<i64> {
        let t = self.first_read_ns.load(Ordering::Relaxed);
        (t != 0).then_some(t)
    }
}

/// A TCP stream that notes the `CLOCK_MONOTONIC` time of each completed write and of the first
/// read after [`IoStamps::arm`], refuses to write a request onto a connection the server has
/// already closed, and notes a reset that answered an unread request.
struct TimedStream {
    inner: TcpStream,
    stamps: Arc<IoStamps>,
}

/// What a non-blocking look at an idle connection's receive queue found.
fn peer_has_closed(fd: std::os::fd::RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: recv(2) into one valid byte, non-blocking, leaving the data queued (MSG_PEEK).
    let r = unsafe {
        libc::recv(
            fd,
            (&raw mut byte).cast::<libc::c_void>(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match r {
        // End of stream: the server closed its side. Bytes on an idle connection are not an
        // answer to anything we sent (e.g. a 408 before closing): the connection is done too.
        0.. => true,
        _ => !matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN | libc::EINTR)
        ),
    }
}

/// The socket's pending error: `EPIPE` or `ECONNRESET` once a reset has arrived.
fn socket_reset(fd: std::os::fd::RawFd) -> bool {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt(2) into a c_int of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&raw mut err).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    r == 0 && matches!(err, libc::EPIPE | libc::ECONNRESET)
}

impl TimedStream {
    /// Before the first byte of a request: a connection the server has already closed gets
    /// nothing written (the request is then provably unsent and may go on a fresh one).
    fn check_before_first_write(&self) -> io::Result<()> {
        let s = &self.stamps;
        if s.check_before_write.swap(false, Ordering::Relaxed)
            && peer_has_closed(std::os::fd::AsRawFd::as_raw_fd(&self.inner))
        {
            s.closed_before_write.store(true, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server had closed the kept connection before the request was written",
            ));
        }
        Ok(())
    }

    #[inline]
    fn wrote(&self, r: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = r
            && *n > 0
        {
            self.stamps
                .last_write_ns
                .store(monotonic_ns(), Ordering::Relaxed);
        }
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let s = &self.stamps;
        // End of stream before any response byte, after the request was written: the server
        // closed. A reset that answered the request's bytes is then left pending on the
        // socket (it may also arrive a round trip later: see `never_reached_server`).
        if let Poll::Ready(Ok(())) = r
            && buf.filled().len() == before
            && s.first_read_ns.load(Ordering::Relaxed) == 0
            && s.last_write_ns.load(Ordering::Relaxed) != 0
        {
            s.eof_before_response.store(true, Ordering::Relaxed);
            if socket_reset(std::os::fd::AsRawFd::as_raw_fd(&self.inner)) {
                s.reset_after_eof.store(true, Ordering::Relaxed);
            }
        }
        if let Poll::Ready(Ok(())) = r
            && buf.filled().len() > before
            && self.stamps.first_read_ns.load(Ordering::Relaxed) == 0
        {
            let now = monotonic_ns();
            let s = &self.stamps;
            s.sent_at_first_read_ns
                .store(s.last_write_ns.load(Ordering::Relaxed), Ordering::Relaxed);
            s.first_read_ns.store(now, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Err(e) = self.check_before_first_write() {
            return Poll::Ready(Err(e));
        }
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Err(e) = self.check_before_first_write() {
            return Poll::Ready(Err(e));
        }
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

// ---------------------------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------------------------

type Body = Full<Bytes>;
type HyperConnection = http1::Connection<TokioIo<TimedStream>, Body>;

/// The hyper connection future, polled inside the request's task rather than spawned.
struct Driver {
    conn: Pin<Box<HyperConnection>>,
    /// Set once the connection future has finished (closed or failed).
    ended: Option<Result<(), String>>,
}

impl Driver {
    #[inline]
    fn poll_once(&mut self, cx: &mut Context<'_>) {
        if self.ended.is_none()
            && let Poll::Ready(r) = self.conn.as_mut().poll(cx)
        {
            self.ended = Some(r.map_err(|e| e.to_string()));
        }
    }
}

/// One kept HTTP/1.1 connection to a replica.
struct Connection {
    sender: http1::SendRequest<Body>,
    driver: Driver,
    stamps: Arc<IoStamps>,
    /// The socket, for the reset check after a failure (open while `driver` lives).
    fd: std::os::fd::RawFd,
    /// How long the TCP connect took: a round trip, the scale of a reset's delay.
    connect_time: Duration,
    /// When this connection last finished a complete response.
    last_response_end: Option<Instant>,
}

impl Connection {
    async fn open(stream: TcpStream, connect_time: Duration) -> Result<Self, hyper::Error> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        let stamps = Arc::new(IoStamps::default());
        let io = TokioIo::new(TimedStream {
            inner: stream,
            stamps: stamps.clone(),
        });
        let (sender, conn) = http1::Builder::new().handshake(io).await?;
        Ok(Self {
            sender,
            driver: Driver {
                conn: Box::pin(conn),
                ended: None,
            },
            stamps,
            fd,
            connect_time,
            last_response_end: None,
        })
    }

    /// Whether the server closed this connection soon after a complete response (within
    /// [`CLOSE_AFTER_RESPONSE`]) rather than after sitting idle (a keep-alive timeout).
    fn closed_after_response(&self) -> bool {
        self.last_response_end
            .is_some_and(|t| t.elapsed() < CLOSE_AFTER_RESPONSE)
    }

    /// Whether the connection can take another request: lets the connection notice a close
    /// by the server first.
    async fn is_usable(&mut self) -> bool {
        std::future::poll_fn(|cx| {
            self.driver.poll_once(cx);
            Poll::Ready(
                self.driver.ended.is_none()
                    && matches!(self.sender.poll_ready(cx), Poll::Ready(Ok(()))),
            )
        })
        .await
    }
}

/// Most consecutive polls of the connection and the request within one wake before yielding to
/// other tasks.
const MAX_ROUNDS: u32 = 8;

/// The waker handed to the connection and the request inside [`drive`]. A wake that arrives
/// while they are being polled (the request handing a request to the connection, the connection
/// handing body bytes to the request) only marks another round as needed; other wakes go to the
/// task. This keeps a whole exchange of wakes inside one task poll, with no reschedule.
#[derive(Default)]
struct Relay {
    woken: AtomicBool,
    polling: AtomicBool,
    task: std::sync::Mutex<Option<std::task::Waker>>,
}

impl std::task::Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Paired with the poller's store of `polling` then load of `woken` (both SeqCst): at
        // least one side sees the other, so a wake is never lost.
        self.woken.store(true, Ordering::SeqCst);
        if !self.polling.load(Ordering::SeqCst) {
            let task = self.task.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = task.as_ref() {
                w.wake_by_ref();
            }
        }
    }
}

/// Run `fut` while driving the connection in the same task: on each wake, poll the connection
/// (socket I/O) then the request, again while either woke the other, so a request handed to the
/// connection is written, and bytes the connection read are framed and timestamped, within the
/// same wake.
async fn drive<F: Future>(driver: &mut Driver, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let relay = Arc::new(Relay::default());
    let waker = std::task::Waker::from(relay.clone());
    std::future::poll_fn(|cx| {
        {
            let mut task = relay.task.lock().unwrap_or_else(|e| e.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let mut inner = Context::from_waker(&waker);
        for _ in 0..MAX_ROUNDS {
            relay.polling.store(true, Ordering::SeqCst);
            relay.woken.store(false, Ordering::SeqCst);
            driver.poll_once(&mut inner);
            let r = fut.as_mut().poll(&mut inner);
            relay.polling.store(false, Ordering::SeqCst);
            if r.is_ready() {
                return r;
            }
            if !relay.woken.load(Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        // Still busy (or out of tokio's cooperative budget): let other tasks run, then resume.
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------------------------

/// Sends requests one after another to one replica on one kept connection (reconnecting when
/// the server closed it or a request ended abnormally). A run has one worker per concurrency
/// slot per replica.
pub struct Worker {
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    auth: Option<HeaderValue>,
    sink: EventSink,
    conn: Option<Connection>,
    connections_opened: u64,
    /// The server was seen closing a kept connection after a complete response (llama.cpp's
    /// server does so after every streamed response while announcing keep-alive): from then
    /// on each request gets a fresh connection instead of racing the server's close.
    server_closes_kept: bool,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("endpoint", &self.endpoint.url)
            .field("replica", &self.endpoint.replica)
            .field("timeouts", &self.timeouts)
            .field("authorization", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("connected", &self.conn.is_some())
            .field("connections_opened", &self.connections_opened)
            .field("server_closes_kept", &self.server_closes_kept)
            .finish()
    }
}

/// How one attempt at the exchange ended.
enum Exchange {
    Done {
        outcome: Outcome,
        error: Option<String>,
        /// The response was read to its end: the connection may carry the next request.
        reusable: bool,
    },
    /// hyper did not write the request (the kept connection had just closed).
    NotSent(Box<Request<Body>>, String),
}

fn done(outcome: Outcome, error: Option<String>, reusable: bool) -> Exchange {
    Exchange::Done {
        outcome,
        error,
        reusable,
    }
}

impl Worker {
    pub fn new(
        endpoint: Arc<Endpoint>,
        timeouts: Timeouts,
        api_key: Option<&ApiKey>,
        sink: EventSink,
    ) -> Result<Self, RequestError> {
        Ok(Self {
            endpoint,
            timeouts,
            auth: api_key.map(ApiKey::header_value).transpose()?,
            sink,
            conn: None,
            connections_opened: 0,
            server_closes_kept: false,
        })
    }

    /// Open a fresh connection for every request after a complete response (for a server
    /// known to close after each streamed response; see `http::closes_after_stream`).
    pub fn with_fresh_connections(mut self, fresh: bool) -> Self {
        self.server_closes_kept = fresh;
        self
    }

    /// Open the worker's connection now if it has none, so that the first request of a
    /// synchronised start does not pay for the connect. A failure is not reported here: the
    /// next [`execute`](Self::execute) connects again and records what happens.
    pub async fn preconnect(&mut self) {
        if self.conn.is_some() {
            return;
        }
        let t0 = Instant::now();
        if let Ok(stream) = self.endpoint.connect(self.timeouts.connect).await
            && let Ok(c) = Connection::open(stream, t0.elapsed()).await
        {
            self.conn = Some(c);
            self.connections_opened += 1;
        }
    }

    /// TCP connections this worker has opened so far.
    pub fn connections_opened(&self) -> u64 {
        self.connections_opened
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn build_request(&self, req: &PreparedRequest) -> Request<Body> {
        let mut r = Request::new(Full::new(req.body.clone()));
        *r.method_mut() = Method::POST;
        *r.uri_mut() = self.endpoint.uri(req.api).clone();
        let h = r.headers_mut();
        h.insert(header::HOST, self.endpoint.host_header().clone());
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert("x-request-id", req.request_id.clone());
        if let Some(a) = &self.auth {
            h.insert(header::AUTHORIZATION, a.clone());
        }
        r
    }

    /// Send `req` (meant to go at `t_intended_ns`), stream its events into the sink and say how
    /// it ended. Only a stopped writer is an error: every request-level failure is an
    /// [`Outcome`].
    pub async fn execute(
        &mut self,
        req: &PreparedRequest,
        t_intended_ns: i64,
        cancel: &Cancel,
    ) -> Result<RequestOutcome, SinkClosed> {
        let t_start_ns = monotonic_ns();
        let start = Instant::now();
        let total_deadline = start + self.timeouts.total;
        let mut out = RequestOutcome {
            request_index: req.request_index,
            replica: self.endpoint.replica,
            t_intended_ns,
            t_start_ns,
            t_sent_ns: None,
            t_first_byte_ns: None,
            t_done_ns: t_start_ns,
            http_status: None,
            outcome: Outcome::Ok,
            error: None,
            events: 0,
            new_connection: false,
            resent: false,
        };
        let finish = |mut out: RequestOutcome, outcome: Outcome, error: Option<String>| {
            out.outcome = outcome;
            out.error = error;
            out.t_done_ns = monotonic_ns();
            Ok(out)
        };
        if cancel.is_cancelled() {
            return finish(out, Outcome::Cancelled, None);
        }
        if let Some(c) = self.conn.as_mut()
            && !c.is_usable().await
        {
            // A close right after a response (not an idle keep-alive timeout): this server
            // closes after every response; give each later request its own connection.
            self.server_closes_kept |= c.closed_after_response();
            self.conn = None;
        }

        let mut request = self.build_request(req);
        let mut resent = false;
        loop {
            if self.conn.is_none() {
                let remaining = total_deadline.saturating_duration_since(Instant::now());
                let budget = self.timeouts.connect.min(remaining);
                let t_connect = Instant::now();
                let connected = tokio::select! {
                    biased;
                    () = cancel.cancelled() => return finish(out, Outcome::Cancelled, None),
                    r = self.endpoint.connect(budget) => r,
                };
                let stream = match connected {
                    Ok(s) => s,
                    Err(e @ EndpointError::ConnectTimeout { .. }) => {
                        let outcome = if budget < self.timeouts.connect {
                            Outcome::TimeoutTotal
                        } else {
                            Outcome::TimeoutConnect
                        };
                        return finish(out, outcome, Some(e.to_string()));
                    }
                    Err(e) => return finish(out, Outcome::ConnectError, Some(e.to_string())),
                };
                match Connection::open(stream, t_connect.elapsed()).await {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => return finish(out, Outcome::ConnectError, Some(e.to_string())),
                }
                self.connections_opened += 1;
                out.new_connection = true;
            }
            let Some(conn) = self.conn.as_mut() else {
                continue;
            };
            conn.stamps.arm();
            let first_deadline = (Instant::now() + self.timeouts.first_byte).min(total_deadline);
            let clock = Clock {
                start,
                t_start_ns,
                first_deadline,
                total_deadline,
                idle: self.timeouts.idle,
            };
            let closed_after_response = conn.closed_after_response();
            let Connection {
                sender,
                driver,
                stamps,
                fd,
                connect_time,
                ..
            } = conn;
            let (fd, connect_time) = (*fd, *connect_time);
            let result = drive(
                driver,
                exchange(
                    sender, request, req.api, &self.sink, cancel, &clock, &mut out,
                ),
            )
            .await;
            out.t_sent_ns = stamps.sent();
            out.t_first_byte_ns = stamps.first_byte();
            let stamps = stamps.clone();
            let ended = driver.ended.is_some();
            match result? {
                Exchange::Done {
                    outcome,
                    error,
                    reusable,
                } => {
                    let t_done_ns = monotonic_ns();
                    if outcome == Outcome::Disconnected
                        && !resent
                        && never_reached_server(&stamps, fd, connect_time).await
                    {
                        // Provably unsent or unread: send it once more on a fresh connection.
                        self.conn = None;
                        self.server_closes_kept |= closed_after_response;
                        resent = true;
                        out.resent = true;
                        out.http_status = None;
                        request = self.build_request(req);
                        continue;
                    }
                    // A kept connection that ended, soon after a response, with nothing of
                    // this request's answer read: the server closes after each response (the
                    // request itself stays a failure: it may have been read).
                    if outcome == Outcome::Disconnected && stamps.first_byte().is_none() {
                        self.server_closes_kept |= closed_after_response;
                    }
                    if !reusable || ended || (self.server_closes_kept && outcome == Outcome::Ok) {
                        self.conn = None;
                    } else if let Some(c) = self.conn.as_mut() {
                        c.last_response_end = Some(Instant::now());
                    }
                    out.outcome = outcome;
                    out.error = error;
                    out.t_done_ns = t_done_ns;
                    return Ok(out);
                }
                Exchange::NotSent(r, why) => {
                    self.conn = None;
                    if resent {
                        return finish(out, Outcome::Disconnected, Some(why));
                    }
                    // The kept connection closed under us before hyper took the request: the
                    // server never saw it, so send it on a fresh connection.
                    self.server_closes_kept |= closed_after_response;
                    resent = true;
                    out.resent = true;
                    request = *r;
                }
            }
        }
    }
}

/// After a request failed with no response: whether it provably never reached the server
/// (see [`IoStamps::never_reached_server`]). A reset answering request bytes sent after the
/// server's FIN can trail that end of stream by a round trip: the socket is asked again for
/// up to three connect times (at least [`RESET_WAIT`]).
async fn never_reached_server(
    stamps: &IoStamps,
    fd: std::os::fd::RawFd,
    connect_time: Duration,
) -> bool {
    if stamps.first_byte().is_some() {
        return false;
    }
    if stamps.never_reached_server() {
        return true;
    }
    if !stamps.eof_before_response.load(Ordering::Relaxed) {
        return false;
    }
    let until = Instant::now() + RESET_WAIT.max(connect_time * 3);
    loop {
        if socket_reset(fd) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// How long a failed request's socket is watched, at least, for the reset that proves it went
/// unread.
const RESET_WAIT: Duration = Duration::from_millis(20);

/// A server that closes a kept connection within this long after a complete response closes
/// after every response (llama.cpp's server does, ~0.05 ms after it); a later close is an idle
/// keep-alive timeout (vLLM's is 5 s).
const CLOSE_AFTER_RESPONSE: Duration = Duration::from_secs(1);

/// The deadlines of one request, and the pairing of its tokio `Instant` start with its
/// `CLOCK_MONOTONIC` start (the same clock on Linux).
struct Clock {
    start: Instant,
    t_start_ns: i64,
    first_deadline: Instant,
    total_deadline: Instant,
    idle: Duration,
}

impl Clock {
    fn instant_of(&self, t_ns: i64) -> Instant {
        self.start + Duration::from_nanos(t_ns.saturating_sub(self.t_start_ns).max(0) as u64)
    }

    /// The outcome of the deadline `at`: the total timeout if that is what it was.
    fn timeout(&self, at: Instant, otherwise: Outcome) -> Outcome {
        if at >= self.total_deadline {
            Outcome::TimeoutTotal
        } else {
            otherwise
        }
    }
}

fn classify_hyper(e: &hyper::Error) -> Outcome {
    if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() {
        Outcome::ProtocolError
    } else {
        Outcome::Disconnected
    }
}

/// Error text for a hyper error, with its sources.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}

/// Send the request and read its response. Runs inside [`drive`].
async fn exchange(
    sender: &mut http1::SendRequest<Body>,
    request: Request<Body>,
    api: Api,
    sink: &EventSink,
    cancel: &Cancel,
    clock: &Clock,
    out: &mut RequestOutcome,
) -> Result<Exchange, SinkClosed> {
    let mut cancelled = std::pin::pin!(cancel.cancelled());
    let timer = tokio::time::sleep_until(clock.first_deadline);
    let mut timer = std::pin::pin!(timer);

    let response = tokio::select! {
        biased;
        r = sender.try_send_request(request) => r,
        () = &mut timer => {
            let outcome = clock.timeout(clock.first_deadline, Outcome::TimeoutFirstByte);
            return Ok(done(outcome, Some("no response head before the deadline".into()), false));
        }
        () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
    };
    let response = match response {
        Ok(r) => r,
        Err(mut e) => {
            let text = error_chain(e.error());
            return Ok(match e.take_message() {
                Some(req) => Exchange::NotSent(Box::new(req), text),
                None => done(classify_hyper(e.error()), Some(text), false),
            });
        }
    };
    let status = response.status();
    out.http_status = Some(status.as_u16());
    // A server that says it will close gets no second request on this connection.
    let closing = response
        .headers()
        .get_all(header::CONNECTION)
        .iter()
        .any(|v| {
            v.to_str()
                .is_ok_and(|v| v.to_ascii_lowercase().contains("close"))
        });

    if !status.is_success() {
        // Read the server's error body, bounded by size and by the idle and total deadlines.
        let deadline = (Instant::now() + clock.idle).min(clock.total_deadline);
        timer.as_mut().reset(deadline);
        let (text, complete) = tokio::select! {
            biased;
            r = read_excerpt(response.into_body(), ERROR_BODY_LIMIT) => r,
            () = &mut timer => (String::from("(error body not received before the deadline)"), false),
            () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
        };
        return Ok(done(Outcome::HttpError, Some(text), complete));
    }

    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.is_empty()
        && !content_type
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
    {
        let content_type = content_type.to_owned();
        let deadline = (Instant::now() + clock.idle).min(clock.total_deadline);
        timer.as_mut().reset(deadline);
        let (text, complete) = tokio::select! {
            biased;
            r = read_excerpt(response.into_body(), ERROR_BODY_LIMIT) => r,
            () = &mut timer => (String::new(), false),
            () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
        };
        return Ok(done(
            Outcome::ProtocolError,
            Some(format!(
                "expected an event stream, got content-type `{content_type}`: {text}"
            )),
            complete,
        ));
    }

    let mut events = SseStream::new(BodyDataStream::new(response.into_body()));
    let mut last_event_ns: Option<i64> = None;
    let mut terminal = false;
    loop {
        tokio::select! {
            biased;
            item = std::future::poll_fn(|cx| events.poll_event(cx)) => match item {
                Some(Ok(ev)) => {
                    let t_ns = monotonic_ns();
                    terminal |= api.is_terminal(ev.event.as_deref(), &ev.data);
                    let raw = RawEvent {
                        request_index: out.request_index,
                        seq: out.events,
                        t_ns,
                        event: ev.event,
                        data: ev.data,
                    };
                    out.events += 1;
                    if last_event_ns.is_none() {
                        // From now on the idle timeout applies.
                        timer
                            .as_mut()
                            .reset((clock.instant_of(t_ns) + clock.idle).min(clock.total_deadline));
                    }
                    last_event_ns = Some(t_ns);
                    sink.send(raw).await?;
                }
                Some(Err(SseError::Transport(e))) => {
                    let text = error_chain(&e);
                    return Ok(if terminal {
                        // Everything arrived; only the connection's end was untidy.
                        done(Outcome::Ok, None, false)
                    } else {
                        done(classify_hyper(&e), Some(text), false)
                    });
                }
                Some(Err(e)) => return Ok(done(Outcome::ProtocolError, Some(e.to_string()), false)),
                None => {
                    return Ok(if terminal {
                        done(Outcome::Ok, None, !closing)
                    } else {
                        let expected = match api {
                            Api::Chat | Api::Completions => "data: [DONE]",
                            Api::Responses => "a response.completed, response.incomplete or response.failed event",
                        };
                        done(
                            Outcome::Disconnected,
                            Some(format!(
                                "the stream ended after {} events without {expected}",
                                out.events
                            )),
                            true,
                        )
                    });
                }
            },
            () = &mut timer => {
                let now = Instant::now();
                let fired = timer.deadline();
                let Some(last) = last_event_ns else {
                    let outcome = clock.timeout(fired, Outcome::TimeoutFirstByte);
                    return Ok(done(outcome, Some("no event before the deadline".into()), false));
                };
                let idle_deadline = (clock.instant_of(last) + clock.idle).min(clock.total_deadline);
                if now >= idle_deadline {
                    if terminal {
                        return Ok(done(Outcome::Ok, None, false));
                    }
                    let outcome = clock.timeout(idle_deadline, Outcome::TimeoutIdle);
                    let gap_ms = (monotonic_ns() - last) / 1_000_000;
                    return Ok(done(
                        outcome,
                        Some(format!("no event for {gap_ms} ms after event {}", out.events - 1)),
                        false,
                    ));
                }
                timer.as_mut().reset(idle_deadline);
            }
            () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
        }
    }
}

/// Read at most `limit` bytes of a body as (lossy) text; `true` if the body ended within it.
async fn read_excerpt(mut body: Incoming, limit: usize) -> (String, bool) {
    let mut buf = Vec::new();
    let mut complete = false;
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = limit.saturating_sub(buf.len());
                    buf.extend_from_slice(&data[..data.len().min(room)]);
                    if data.len() > room {
                        break;
                    }
                }
            }
            Some(Err(_)) => break,
            None => {
                complete = true;
                break;
            }
        }
    }
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if !complete && buf.len() >= limit {
        text.push_str(" …(truncated)");
    }
    (text, complete)
}

#[cfg(test)]
mod tests;
