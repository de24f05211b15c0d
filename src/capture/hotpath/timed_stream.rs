//! The timestamped socket: a TCP stream, woken by the [pacer](super::pacer) rather than the
//! runtime's reactor, that notes the time of every write, the kernel's receive time of every
//! read, and what the socket says about a server that went away.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::pacer::{Direction, Received, Registration, recv_stamped};
use crate::clock::monotonic_ns;

/// Write and read times of the current request on one connection (0 = not yet), and what the
/// socket said about a server that went away without answering.
#[derive(Debug, Default)]
pub(super) struct IoStamps {
    pub(super) last_write_ns: AtomicI64,
    /// Arrival (kernel receive time) of the first bytes read for the current request.
    pub(super) first_read_ns: AtomicI64,
    /// Arrival of the newest bytes read on this connection: the time of every event framed
    /// from what has been read so far.
    pub(super) last_read_ns: AtomicI64,
    /// `last_write_ns` as it was at the first read: the write that completed the request.
    pub(super) sent_at_first_read_ns: AtomicI64,
    /// Set by [`IoStamps::arm`]: the next write is the request's first, check the socket first.
    pub(super) check_before_write: AtomicBool,
    /// The server had closed the connection (end of stream, or bytes nobody asked for) before
    /// the request's first byte was written: nothing was sent.
    pub(super) closed_before_write: AtomicBool,
    /// The connection ended (the server's FIN) before any response byte.
    pub(super) eof_before_response: AtomicBool,
    /// After that end of stream, a reset answered the request's bytes: the server's socket
    /// was already closed when they arrived (a host that receives data for a closed socket
    /// answers with a reset, RFC 793 3.4, RFC 1122 4.2.2.13), so its application never read
    /// them. A reset without the FIN before it proves nothing: an abortive close after
    /// reading looks the same.
    pub(super) reset_after_eof: AtomicBool,
}

impl IoStamps {
    pub(super) fn arm(&self) {
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
    pub(super) fn never_reached_server(&self) -> bool {
        self.first_read_ns.load(Ordering::Relaxed) == 0
            && (self.closed_before_write.load(Ordering::Relaxed)
                || self.reset_after_eof.load(Ordering::Relaxed))
    }

    /// When the write that completed the request returned. The clock is read after the write
    /// call, so a thread preempted right after it would note a time later than the response's
    /// arrival (on loopback the server can answer within that gap); the answer's arrival
    /// bounds the write's completion, so the time is never later than the first byte.
    pub(super) fn sent(&self) -> Option<i64> {
        let first = self.first_read_ns.load(Ordering::Relaxed);
        let t = if first != 0 {
            self.sent_at_first_read_ns
                .load(Ordering::Relaxed)
                .min(first)
        } else {
            self.last_write_ns.load(Ordering::Relaxed)
        };
        (t != 0).then_some(t)
    }

    /// When the newest bytes read arrived (0 before any read).
    #[inline]
    pub(super) fn last_read(&self) -> i64 {
        self.last_read_ns.load(Ordering::Relaxed)
    }

    pub(super) fn first_byte(&self) -> Option<i64> {
        let t = self.first_read_ns.load(Ordering::Relaxed);
        (t != 0).then_some(t)
    }
}

/// A TCP stream that notes the `CLOCK_MONOTONIC` time of each completed write and the
/// arrival time of every read, refuses to write a request onto a connection the server has
/// already closed, and notes a reset that answered an unread request.
pub(super) struct TimedStream {
    /// Declared before `inner`: leaves the pacer's set while the descriptor is still open.
    pub(super) registration: Registration,
    /// Non-blocking, outside the runtime's reactor.
    pub(super) inner: std::net::TcpStream,
    pub(super) stamps: Arc<IoStamps>,
    /// The last read took less than it was offered: the receive queue was empty, and bytes
    /// arriving since raise an (edge-triggered) readiness the pacer will report. The next read
    /// then waits for that instead of asking the socket (one syscall less per event), unless
    /// the pacer has seen the server's FIN, which a short read does not show and which may
    /// have raised its edge already (see [`Registration::park`]).
    pub(super) drained: bool,
}

/// What a non-blocking look at an idle connection's receive queue found.
pub(super) fn peer_has_closed(fd: std::os::fd::RawFd) -> bool {
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
pub(super) fn socket_reset(fd: std::os::fd::RawFd) -> bool {
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
    pub(super) fn check_before_first_write(&self) -> io::Result<()> {
        let s = &self.stamps;
        if s.check_before_write.swap(false, Ordering::Relaxed)
            && peer_has_closed(self.inner.as_raw_fd())
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
    pub(super) fn wrote(&self, r: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = r
            && *n > 0
        {
            self.stamps
                .last_write_ns
                .store(monotonic_ns(), Ordering::Relaxed);
        }
    }
}

impl TimedStream {
    /// One non-blocking read into `buf`, parking on the pacer when nothing is there.
    fn read_paced(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if std::mem::take(&mut self.drained) && self.registration.park(Direction::Read, cx.waker())
        {
            return Poll::Pending;
        }
        loop {
            let offered = buf.remaining();
            // SAFETY: recvmsg only writes into the unfilled part, which is then marked
            // initialised for exactly the bytes received.
            let received = unsafe {
                let dst = buf.unfilled_mut();
                recv_stamped(self.inner.as_raw_fd(), dst.as_mut_ptr().cast(), dst.len())
            };
            match received {
                Ok(Received::Bytes { n, arrived_ns }) => {
                    // SAFETY: recvmsg wrote `n` bytes at the start of the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    self.drained = n > 0 && n < offered;
                    if n > 0 {
                        let t = arrived_ns.unwrap_or_else(|| {
                            self.registration.timestamps_missing();
                            monotonic_ns()
                        });
                        self.stamps.last_read_ns.store(t, Ordering::Relaxed);
                    }
                    return Poll::Ready(Ok(()));
                }
                Ok(Received::WouldBlock) => {
                    if self.registration.park(Direction::Read, cx.waker()) {
                        return Poll::Pending;
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// One non-blocking write, parking on the pacer when the socket is full.
    fn write_paced(
        &mut self,
        cx: &mut Context<'_>,
        write: impl Fn(&mut std::net::TcpStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            match write(&mut self.inner) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.registration.park(Direction::Write, cx.waker()) {
                        return Poll::Pending;
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
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
        let r = self.read_paced(cx, buf);
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
            if socket_reset(self.inner.as_raw_fd()) {
                s.reset_after_eof.store(true, Ordering::Relaxed);
            }
        }
        if let Poll::Ready(Ok(())) = r
            && buf.filled().len() > before
            && s.first_read_ns.load(Ordering::Relaxed) == 0
        {
            s.sent_at_first_read_ns
                .store(s.last_write_ns.load(Ordering::Relaxed), Ordering::Relaxed);
            s.first_read_ns
                .store(s.last_read_ns.load(Ordering::Relaxed), Ordering::Relaxed);
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
        let r = self.write_paced(cx, |s| s.write(buf));
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
        let r = self.write_paced(cx, |s| s.write_vectored(bufs));
        self.wrote(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(match self.inner.shutdown(std::net::Shutdown::Write) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Err(e),
            _ => Ok(()),
        })
    }
}
