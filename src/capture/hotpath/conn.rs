//! One kept HTTP/1.1 connection, read and written by the request's own task: the request
//! head and body go out in one vectored write, the response is read into the connection's
//! buffer and its head and body framing undone there ([`wire`](super::wire)), so the reads
//! that frame events are the task's own and no bytes pass through another task or channel.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::pacer::Pacer;
use super::timed_stream::{IoStamps, TimedStream, peer_has_closed};
use super::wire::{self, BodyError, Framing, Head, HeadError};

/// A server that closes a kept connection within this long after a complete response closes
/// after every response (llama.cpp's server does, ~0.05 ms after it); a later close is an idle
/// keep-alive timeout (vLLM's is 5 s).
pub(super) const CLOSE_AFTER_RESPONSE: Duration = Duration::from_secs(1);

/// The read buffer's size: a read takes up to this much (an SSE chat chunk is ~150-400 bytes;
/// a read after a wake may hold a period's worth of them).
const READ_BUFFER: usize = 16 << 10;

/// One kept HTTP/1.1 connection to a replica.
pub(super) struct Connection {
    stream: TimedStream,
    pub(super) stamps: Arc<IoStamps>,
    /// The socket, for the reset check after a failure.
    pub(super) fd: std::os::fd::RawFd,
    /// How long the TCP connect took: a round trip, the scale of a reset's delay.
    pub(super) connect_time: Duration,
    /// When this connection last finished a complete response.
    pub(super) last_response_end: Option<Instant>,
    /// Bytes read and not yet taken: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    /// The server's end of stream was read.
    eof: bool,
}

/// Why a response head did not come.
pub(super) enum HeadFailure {
    /// Not HTTP, or a head too large.
    Protocol(HeadError),
    /// The connection ended or failed before a complete head.
    Closed(String),
}

/// What one step of reading a body gave.
pub(super) enum BodyStep {
    /// Some bytes were read (perhaps no payload among them); ask again.
    More,
    /// The body is complete.
    End,
}

/// Why a body could not be read to its end.
pub(super) enum BodyFailure {
    Framing(BodyError),
    Io(io::Error),
}

impl BodyFailure {
    pub(super) fn text(&self) -> String {
        match self {
            Self::Framing(e) => e.to_string(),
            Self::Io(e) => format!("reading the response failed: {e}"),
        }
    }
}

impl Connection {
    pub(super) fn open(
        stream: TcpStream,
        connect_time: Duration,
        pacer: &Pacer,
    ) -> io::Result<Self> {
        // Out of the runtime's reactor (still non-blocking): the pacer wakes its reads.
        let inner = stream.into_std()?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&inner);
        let registration = pacer.register(fd)?;
        let stamps = Arc::new(IoStamps::default());
        Ok(Self {
            stream: TimedStream {
                registration,
                inner,
                stamps: stamps.clone(),
                drained: false,
            },
            stamps,
            fd,
            connect_time,
            last_response_end: None,
            buf: Vec::with_capacity(READ_BUFFER),
            pos: 0,
            eof: false,
        })
    }

    /// Whether the server closed this connection soon after a complete response (within
    /// [`CLOSE_AFTER_RESPONSE`]) rather than after sitting idle (a keep-alive timeout).
    pub(super) fn closed_after_response(&self) -> bool {
        self.last_response_end
            .is_some_and(|t| t.elapsed() < CLOSE_AFTER_RESPONSE)
    }

    /// Whether the connection can take another request: nothing unread is left from the last
    /// response and the socket shows no close (or stray bytes) from the server.
    pub(super) fn is_usable(&self) -> bool {
        !self.spent() && !peer_has_closed(self.fd)
    }

    /// Whether bytes beyond the response were read, or the server's end of stream: either
    /// way the connection cannot carry another request.
    pub(super) fn spent(&self) -> bool {
        self.eof || self.pos < self.buf.len()
    }

    /// Write the request head and body, all of it (the socket notes each write's time).
    pub(super) async fn write_request(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let total = head.len() + body.len();
        let mut written = 0;
        while written < total {
            let n = std::future::poll_fn(|cx| {
                let slices = if written < head.len() {
                    [io::IoSlice::new(&head[written..]), io::IoSlice::new(body)]
                } else {
                    [
                        io::IoSlice::new(&body[written - head.len()..]),
                        io::IoSlice::new(&[]),
                    ]
                };
                Pin::new(&mut self.stream).poll_write_vectored(cx, &slices)
            })
            .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            written += n;
        }
        Ok(())
    }

    /// One read into the buffer's free space: the bytes read, 0 at the server's end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.eof {
            return Poll::Ready(Ok(0));
        }
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 && self.buf.capacity() - self.buf.len() < READ_BUFFER / 4 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        if self.buf.capacity() - self.buf.len() < READ_BUFFER / 4 {
            self.buf.reserve(READ_BUFFER);
        }
        let len = self.buf.len();
        let mut rb = ReadBuf::uninit(self.buf.spare_capacity_mut());
        ready!(Pin::new(&mut self.stream).poll_read(cx, &mut rb))?;
        let n = rb.filled().len();
        // SAFETY: the read initialised the first `n` bytes of the spare capacity.
        unsafe { self.buf.set_len(len + n) };
        self.eof = n == 0;
        Poll::Ready(Ok(n))
    }

    /// Read until a final (non-1xx) response head is complete, and take it from the buffer.
    pub(super) fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Head, HeadFailure>> {
        loop {
            if self.pos < self.buf.len() {
                match wire::parse_head(&self.buf[self.pos..]) {
                    Ok(Some((head, n))) => {
                        self.pos += n;
                        return Poll::Ready(match head.status {
                            101 => Err(HeadFailure::Protocol(HeadError(
                                "the server switched protocols (101)".into(),
                            ))),
                            // An interim response: the final one follows.
                            100..=199 => continue,
                            _ => Ok(head),
                        });
                    }
                    Ok(None) => {}
                    Err(e) => return Poll::Ready(Err(HeadFailure::Protocol(e))),
                }
            }
            let partial = self.pos < self.buf.len();
            match ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    return Poll::Ready(Err(HeadFailure::Closed(if partial {
                        "the connection closed in the middle of the response head".into()
                    } else {
                        "the connection closed before a response".into()
                    })));
                }
                Ok(_) => {}
                Err(e) => {
                    return Poll::Ready(Err(HeadFailure::Closed(format!(
                        "reading the response failed: {e}"
                    ))));
                }
            }
        }
    }

    /// One step of a body: decode what is buffered, or else read once and decode that, handing
    /// each run of payload to `payload`. Reads at most once, so what is framed after it carries
    /// that read's arrival time.
    pub(super) fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
        framing: &mut Framing,
        payload: &mut impl FnMut(&[u8]),
    ) -> Poll<Result<BodyStep, BodyFailure>> {
        if framing.is_done() {
            return Poll::Ready(Ok(BodyStep::End));
        }
        if self.pos == self.buf.len() {
            match ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    return Poll::Ready(match framing.at_eof() {
                        Ok(()) => Ok(BodyStep::End),
                        Err(e) => Err(BodyFailure::Framing(e)),
                    });
                }
                Ok(_) => {}
                Err(e) => return Poll::Ready(Err(BodyFailure::Io(e))),
            }
        }
        let n = framing
            .decode(&self.buf[self.pos..], payload)
            .map_err(BodyFailure::Framing)?;
        self.pos += n;
        Poll::Ready(Ok(if framing.is_done() {
            BodyStep::End
        } else {
            BodyStep::More
        }))
    }
}
