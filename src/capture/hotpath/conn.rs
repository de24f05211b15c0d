//! One HTTP/1.1 connection driven inside the request's own task: hyper's connection future
//! polled beside the exchange, so the reads that frame events are the task's own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::pacer::Pacer;
use super::timed_stream::{IoStamps, TimedStream};

/// A server that closes a kept connection within this long after a complete response closes
/// after every response (llama.cpp's server does, ~0.05 ms after it); a later close is an idle
/// keep-alive timeout (vLLM's is 5 s).
pub(super) const CLOSE_AFTER_RESPONSE: Duration = Duration::from_secs(1);

pub(super) type Body = Full<Bytes>;
pub(super) type HyperConnection = http1::Connection<TokioIo<TimedStream>, Body>;

/// The hyper connection future, polled inside the request's task rather than spawned.
pub(super) struct Driver {
    pub(super) conn: Pin<Box<HyperConnection>>,
    /// Set once the connection future has finished (closed or failed).
    pub(super) ended: Option<Result<(), String>>,
}

impl Driver {
    #[inline]
    pub(super) fn poll_once(&mut self, cx: &mut Context<'_>) {
        if self.ended.is_none()
            && let Poll::Ready(r) = self.conn.as_mut().poll(cx)
        {
            self.ended = Some(r.map_err(|e| e.to_string()));
        }
    }
}

/// Why a connection could not be set up after its TCP connect.
#[derive(Debug, thiserror::Error)]
pub(super) enum OpenError {
    #[error("setting up the socket: {0}")]
    Socket(std::io::Error),
    #[error(transparent)]
    Http(hyper::Error),
}

/// One kept HTTP/1.1 connection to a replica.
pub(super) struct Connection {
    pub(super) sender: http1::SendRequest<Body>,
    pub(super) driver: Driver,
    pub(super) stamps: Arc<IoStamps>,
    /// The socket, for the reset check after a failure (open while `driver` lives).
    pub(super) fd: std::os::fd::RawFd,
    /// How long the TCP connect took: a round trip, the scale of a reset's delay.
    pub(super) connect_time: Duration,
    /// When this connection last finished a complete response.
    pub(super) last_response_end: Option<Instant>,
}

impl Connection {
    pub(super) async fn open(
        stream: TcpStream,
        connect_time: Duration,
        pacer: &Pacer,
    ) -> Result<Self, OpenError> {
        // Out of the runtime's reactor (still non-blocking): the pacer wakes its reads.
        let inner = stream.into_std().map_err(OpenError::Socket)?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&inner);
        let registration = pacer.register(fd).map_err(OpenError::Socket)?;
        let stamps = Arc::new(IoStamps::default());
        let io = TokioIo::new(TimedStream {
            registration,
            inner,
            stamps: stamps.clone(),
            drained: false,
        });
        let (sender, conn) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(OpenError::Http)?;
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
    pub(super) fn closed_after_response(&self) -> bool {
        self.last_response_end
            .is_some_and(|t| t.elapsed() < CLOSE_AFTER_RESPONSE)
    }

    /// Whether the connection can take another request: lets the connection notice a close
    /// by the server first.
    pub(super) async fn is_usable(&mut self) -> bool {
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
pub(super) const MAX_ROUNDS: u32 = 8;

/// The waker handed to the connection and the request inside [`drive`]. A wake that arrives
/// while they are being polled (the request handing a request to the connection, the connection
/// handing body bytes to the request) only marks another round as needed; other wakes go to the
/// task. This keeps a whole exchange of wakes inside one task poll, with no reschedule.
#[derive(Default)]
pub(super) struct Relay {
    pub(super) woken: AtomicBool,
    pub(super) polling: AtomicBool,
    pub(super) task: std::sync::Mutex<Option<std::task::Waker>>,
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
pub(super) async fn drive<F: Future>(driver: &mut Driver, fut: F) -> F::Output {
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
