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

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http_body_util::{BodyDataStream, BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request};
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

mod cancel;
mod channel;
mod conn;
pub mod pacer;
pub use pacer::Pacer;
mod timed_stream;

pub use cancel::Cancel;
pub use channel::{
    Drained, EventReceiver, EventSink, Outcome, RawEvent, RequestOutcome, SinkClosed, event_channel,
};
use conn::{Body, Connection, drive};
use timed_stream::{IoStamps, socket_reset};

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
            && let Ok(c) = Connection::open(stream, t0.elapsed(), &pacer).await
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
                let opened = match self.pacer() {
                    Ok(p) => Connection::open(stream, t_connect.elapsed(), &p).await,
                    Err(e) => Err(conn::OpenError::Socket(e)),
                };
                match opened {
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
                    sender,
                    request,
                    req.api,
                    Recording {
                        sink: &self.sink,
                        stamps,
                    },
                    cancel,
                    &clock,
                    &mut out,
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
                    // A complete stream ended when its last bytes arrived; anything else when
                    // it was settled here.
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

/// Where a response's events go, and where their arrival times come from.
struct Recording<'a> {
    sink: &'a EventSink,
    stamps: &'a IoStamps,
}

/// Send the request and read its response. Runs inside [`drive`].
async fn exchange(
    sender: &mut http1::SendRequest<Body>,
    request: Request<Body>,
    api: Api,
    Recording { sink, stamps }: Recording<'_>,
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
                    // The arrival of the newest bytes read: never before this event's own.
                    let t_ns = stamps.last_read();
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
