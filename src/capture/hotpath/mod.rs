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
//! - `t_first_byte_ns`: when the first response bytes arrived: the kernel's receive time of
//!   the newest segment the first read copied (see [`pacer`]).
//! - each [`RawEvent`]'s `t_ns`: the arrival time of the newest bytes read when the event was
//!   framed, right after the read that completed it, in the same task (the connection is
//!   driven inside the request's own task). Never earlier than the event's own bytes; later
//!   only by the gap to other segments the same read copied.
//! - `t_done_ns`: when the last bytes of a complete stream arrived; otherwise when the outcome
//!   was settled.
//!
//! HTTP/1.1 itself is spoken here ([`wire`]): the request goes out in one vectored write, the
//! response is read into the connection's own buffer, and the head is parsed and the chunked
//! framing undone there, in the request's task. No client dispatcher, body channel or
//! per-chunk allocation sits between the socket and the SSE framer.
//!
//! The sockets are not in the runtime's reactor: the [`pacer`] looks at them once per
//! [`pacer::PERIOD`] and wakes the tasks whose sockets received something, so one wake-up of
//! the runtime reads many streams' events instead of one.
//!
//! What the hot path does per event: frame it, take the read's time, move the event name and data
//! into a [`RawEvent`], `try_send` it. No JSON parsing, no encoding, no blocking I/O. When the
//! channel is full the event is counted ([`EventSink::channel_full_count`]) and then awaited
//! into the channel: a slow writer shows up as a count, never as lost events.
//!
//! Timeouts ([`Timeouts`]) each end a request with their own [`Outcome`]; there are no automatic
//! retries. The one exception is a request that provably never reached the server, which is
//! sent once more on a fresh connection and marked `resent`: the socket showed the server's
//! close (or bytes nobody asked for) before the request's first byte was written, or the
//! server's FIN came before any response byte and a reset then answered the request's bytes (its socket was closed when they arrived). A
//! failure after the server could have read the request stays a failure: a bare reset, which
//! an abortive close after reading also gives, is one.
//!
//! A connection is reused only when the last response was read to its end, did not say
//! `Connection: close`, and the socket shows no close by the server just before the next
//! request's first write. A worker that once finds the server closing a kept connection
//! soon after a response (llama.cpp's server closes after every streamed response while
//! announcing keep-alive) opens a fresh connection for each later request instead of racing
//! that close; a close after an idle spell (a keep-alive timeout) changes nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::header::HeaderValue;
use tokio::time::Instant;

use super::endpoint::{Endpoint, EndpointError};
use super::sse::Framer;
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

mod cancel;
mod channel;
mod conn;
pub mod pacer;
pub use pacer::Pacer;
mod timed_stream;
mod wire;

pub use cancel::Cancel;
pub use channel::{
    Drained, EventReceiver, EventSink, Outcome, RawEvent, RequestOutcome, SinkClosed, event_channel,
};
use conn::{BodyFailure, BodyStep, Connection, HeadFailure};
use timed_stream::{IoStamps, socket_reset};
pub use wire::read_response;
use wire::{BodyError, Framing};

/// Sends requests one after another to one replica on one kept connection (reconnecting when
/// the server closed it or a request ended abnormally). A run has one worker per concurrency
/// slot per replica.
pub struct Worker {
    endpoint: Arc<Endpoint>,
    timeouts: Timeouts,
    auth: Option<HeaderValue>,
    sink: EventSink,
    conn: Option<Connection>,
    /// Wakes this worker's socket reads; shared by a run's workers (`with_pacer`), else
    /// started with the first connection.
    pacer: Option<Pacer>,
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
struct Exchange {
    outcome: Outcome,
    error: Option<String>,
    /// The response was read to its end: the connection may carry the next request.
    reusable: bool,
}

fn done(outcome: Outcome, error: Option<String>, reusable: bool) -> Exchange {
    Exchange {
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
            pacer: None,
            connections_opened: 0,
            server_closes_kept: false,
        })
    }

    /// Share `pacer` (one per run: one look at the sockets per period for all its workers).
    pub fn with_pacer(mut self, pacer: Pacer) -> Self {
        self.pacer = Some(pacer);
        self
    }

    /// The worker's pacer (a clone), started now if it has none.
    fn pacer(&mut self) -> std::io::Result<Pacer> {
        if let Some(p) = &self.pacer {
            return Ok(p.clone());
        }
        let p = Pacer::start()?;
        self.pacer = Some(p.clone());
        Ok(p)
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
        let Ok(pacer) = self.pacer() else {
            return;
        };
        if let Ok(stream) = self.endpoint.connect(self.timeouts.connect).await
            && let Ok(c) = Connection::open(stream, t0.elapsed(), &pacer)
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

    /// The request head of `req` (its body follows it as is).
    fn request_head(&self, req: &PreparedRequest) -> Vec<u8> {
        wire::request_head(
            self.endpoint.uri(req.api).path(),
            self.endpoint.host_header().as_bytes(),
            req.request_id.as_bytes(),
            self.auth.as_ref().map(HeaderValue::as_bytes),
            req.body.len(),
        )
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
        if let Some(c) = self.conn.as_ref()
            && !c.is_usable()
        {
            // A close right after a response (not an idle keep-alive timeout): this server
            // closes after every response; give each later request its own connection.
            self.server_closes_kept |= c.closed_after_response();
            self.conn = None;
        }

        let request = self.request_head(req);
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
                let opened = self
                    .pacer()
                    .and_then(|p| Connection::open(stream, t_connect.elapsed(), &p));
                match opened {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => {
                        let text = format!("setting up the socket: {e}");
                        return finish(out, Outcome::ConnectError, Some(text));
                    }
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
            let stamps = conn.stamps.clone();
            let (fd, connect_time) = (conn.fd, conn.connect_time);
            let Exchange {
                outcome,
                error,
                reusable,
            } = exchange(
                conn,
                Outgoing {
                    head: &request,
                    body: &req.body,
                    api: req.api,
                },
                &self.sink,
                cancel,
                &clock,
                &mut out,
            )
            .await?;
            let spent = conn.spent();
            out.t_sent_ns = stamps.sent();
            out.t_first_byte_ns = stamps.first_byte();
            // A complete stream ended when its last bytes arrived; anything else when it was
            // settled here.
            let t_done_ns = match stamps.last_read() {
                t if outcome == Outcome::Ok && t > 0 => t,
                _ => monotonic_ns(),
            };
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
                continue;
            }
            // A kept connection that ended, soon after a response, with nothing of this
            // request's answer read: the server closes after each response (the request itself
            // stays a failure: it may have been read).
            if outcome == Outcome::Disconnected && stamps.first_byte().is_none() {
                self.server_closes_kept |= closed_after_response;
            }
            if !reusable || spent || (self.server_closes_kept && outcome == Outcome::Ok) {
                self.conn = None;
            } else if let Some(c) = self.conn.as_mut() {
                c.last_response_end = Some(Instant::now());
            }
            out.outcome = outcome;
            out.error = error;
            out.t_done_ns = t_done_ns;
            return Ok(out);
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

/// What one attempt sends: the request head and body, and the API that says how its stream ends.
struct Outgoing<'a> {
    head: &'a [u8],
    body: &'a [u8],
    api: Api,
}

/// Send the request and read its response on `conn`.
async fn exchange(
    conn: &mut Connection,
    Outgoing {
        head: request_head,
        body,
        api,
    }: Outgoing<'_>,
    sink: &EventSink,
    cancel: &Cancel,
    clock: &Clock,
    out: &mut RequestOutcome,
) -> Result<Exchange, SinkClosed> {
    let mut cancelled = std::pin::pin!(cancel.cancelled());
    let timer = tokio::time::sleep_until(clock.first_deadline);
    let mut timer = std::pin::pin!(timer);

    let written = tokio::select! {
        biased;
        r = conn.write_request(request_head, body) => r,
        () = &mut timer => {
            let outcome = clock.timeout(clock.first_deadline, Outcome::TimeoutFirstByte);
            return Ok(done(outcome, Some("the request could not be written before the deadline".into()), false));
        }
        () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
    };
    if let Err(e) = written {
        return Ok(done(
            Outcome::Disconnected,
            Some(format!("writing the request failed: {e}")),
            false,
        ));
    }
    let head = tokio::select! {
        biased;
        r = std::future::poll_fn(|cx| conn.poll_head(cx)) => r,
        () = &mut timer => {
            let outcome = clock.timeout(clock.first_deadline, Outcome::TimeoutFirstByte);
            return Ok(done(outcome, Some("no response head before the deadline".into()), false));
        }
        () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
    };
    let head = match head {
        Ok(h) => h,
        Err(HeadFailure::Protocol(e)) => {
            return Ok(done(Outcome::ProtocolError, Some(e.to_string()), false));
        }
        Err(HeadFailure::Closed(text)) => {
            return Ok(done(Outcome::Disconnected, Some(text), false));
        }
    };
    out.http_status = Some(head.status);
    // A server that says it will close gets no second request on this connection.
    let closing = head.closing;
    let mut framing = head.framing;

    let content_type = head.content_type.as_deref().unwrap_or("");
    let not_sse = !content_type.is_empty()
        && !content_type
            .to_ascii_lowercase()
            .starts_with("text/event-stream");
    let ok_status = (200..300).contains(&head.status);
    if !ok_status || not_sse {
        // Read the body as text, bounded by size and by the idle and total deadlines.
        let deadline = (Instant::now() + clock.idle).min(clock.total_deadline);
        timer.as_mut().reset(deadline);
        let late = if ok_status {
            ""
        } else {
            "(error body not received before the deadline)"
        };
        let (text, complete) = tokio::select! {
            biased;
            r = read_excerpt(conn, &mut framing, ERROR_BODY_LIMIT) => r,
            () = &mut timer => (late.to_owned(), false),
            () = &mut cancelled => return Ok(done(Outcome::Cancelled, None, false)),
        };
        let reusable = complete && !closing;
        return Ok(if ok_status {
            done(
                Outcome::ProtocolError,
                Some(format!(
                    "expected an event stream, got content-type `{content_type}`: {text}"
                )),
                reusable,
            )
        } else {
            done(Outcome::HttpError, Some(text), reusable)
        });
    }

    let mut framer = Framer::new();
    let mut last_event_ns: Option<i64> = None;
    let mut terminal = false;
    let mut ended = false;
    loop {
        // Every event the bytes read so far complete, stamped with the newest read's arrival.
        while let Some(ev) = framer.next_event::<std::convert::Infallible>() {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => return Ok(done(Outcome::ProtocolError, Some(e.to_string()), false)),
            };
            // The arrival of the newest bytes read: never before this event's own.
            let t_ns = conn.stamps.last_read();
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
        if ended {
            // An unfinished line or event at the end is discarded, per the SSE rules.
            return Ok(if terminal {
                done(Outcome::Ok, None, !closing)
            } else {
                let expected = match api {
                    Api::Chat | Api::Completions => "data: [DONE]",
                    Api::Responses => {
                        "a response.completed, response.incomplete or response.failed event"
                    }
                };
                done(
                    Outcome::Disconnected,
                    Some(format!(
                        "the stream ended after {} events without {expected}",
                        out.events
                    )),
                    !closing,
                )
            });
        }
        tokio::select! {
            biased;
            step = std::future::poll_fn(|cx| {
                conn.poll_body(cx, &mut framing, &mut |p: &[u8]| framer.push(p))
            }) => match step {
                Ok(BodyStep::More) => {}
                Ok(BodyStep::End) => ended = true,
                Err(e) => {
                    return Ok(if terminal {
                        // Everything arrived; only the connection's end was untidy.
                        done(Outcome::Ok, None, false)
                    } else {
                        let outcome = match e {
                            BodyFailure::Framing(BodyError::Framing(_)) => Outcome::ProtocolError,
                            _ => Outcome::Disconnected,
                        };
                        done(outcome, Some(e.text()), false)
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
async fn read_excerpt(
    conn: &mut Connection,
    framing: &mut Framing,
    limit: usize,
) -> (String, bool) {
    let mut buf = Vec::new();
    let mut over = false;
    let complete = loop {
        let step = std::future::poll_fn(|cx| {
            conn.poll_body(cx, framing, &mut |p: &[u8]| {
                let room = limit.saturating_sub(buf.len());
                buf.extend_from_slice(&p[..p.len().min(room)]);
                over |= p.len() > room;
            })
        })
        .await;
        match step {
            Ok(BodyStep::End) => break !over,
            Ok(BodyStep::More) if !over => {}
            Ok(BodyStep::More) | Err(_) => break false,
        }
    };
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if over {
        text.push_str(" …(truncated)");
    }
    (text, complete)
}

#[cfg(test)]
mod tests;
