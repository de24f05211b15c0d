//! The writer thread: drains the hot path's event channel in batches, parses each event
//! (`EventRow::from_raw`), turns request outcomes into `requests` rows, takes scrape rows,
//! and keeps [`ArtifactWriter`] rolling part files. It also keeps what the quick look and the
//! progress line need (per request: first content time and usage), so nothing is read back.
//!
//! It polls rather than blocks (drain, then sleep [`IDLE_SLEEP`] when idle): a receiver
//! blocked per event would make every send on the hot path wake it (see
//! `EventReceiver::drain_into`).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use super::hotpath::{Drained, EventReceiver, RawEvent, RequestOutcome};
use super::summary::RequestFacts;
use crate::artifact::{
    self, ArtifactError, ArtifactWriter, EventRow, RequestKind, RequestRow, ScrapeRow,
};
use crate::clock::Origin;

/// What the writer stores about a request besides its outcome (fixed before the run).
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub kind: RequestKind,
    pub replica_hint: u32,
    pub canary: Option<String>,
    pub prompt_sha256: String,
    pub prompt_chars: u64,
    pub prompt_tokens_calibrated: Option<u64>,
    /// The serialised body as sent (shared with the prepared request); `None` if the request
    /// was never prepared.
    pub request_body: Option<bytes::Bytes>,
    /// The functional check the request belongs to (`check` column); `None` otherwise.
    pub check: Option<&'static str>,
    /// The request's API when it differs from the run's (functional runs mix them).
    pub api: Option<artifact::Api>,
    /// What this request asked for when it differs from the run's (a trace row's prompt
    /// length and reply length): (prompt token target, max_tokens).
    pub asked: Option<(u64, u32)>,
    /// Whether the body asks `ignore_eos` (`None`: no body built).
    pub ignore_eos: Option<bool>,
    /// The session turn it is (a session workload's).
    pub session: Option<artifact::SessionTurn>,
}

/// Everything fixed about the run's requests, indexed by request index.
#[derive(Debug)]
pub struct RunMeta {
    pub requests: Vec<RequestMeta>,
    /// `endpoints[replica]`: the URL recorded in the `endpoint` column.
    pub endpoints: Vec<String>,
    pub api: artifact::Api,
    pub model: String,
    pub prompt_tokens_target: u64,
    pub max_tokens: Option<u32>,
    /// A shard of a multi-host run sends (and accounts for) only its own indices: (index,
    /// count).
    pub shard: Option<(u32, u32)>,
    /// Secrets removed from event data, error texts and scrape labels before they are written.
    pub redactor: artifact::Redactor,
}

/// A message to the writer thread besides events.
#[derive(Debug)]
pub enum Msg {
    /// A request of the run ended.
    Outcome(RequestOutcome),
    /// A ready row (calibration probes).
    Row(Box<RequestRow>),
    Scrapes(Vec<ScrapeRow>),
    /// One telemetry reading's rows.
    Telemetry(Vec<crate::artifact::TelemetryRow>),
    /// What the telemetry sources gave (run.json `telemetry`), after their last reading.
    TelemetrySummary(Vec<crate::artifact::telemetry::TelemetrySource>),
    /// Record every measured request that has no row yet as `cancelled`, never sent.
    CancelRest {
        t_ns: i64,
        reason: String,
    },
    /// A session's later turn was built: what to record of it (sent before the turn is).
    Turn {
        index: u32,
        meta: Box<RequestMeta>,
    },
    /// A session stopped at a failed turn: its turns `from..end` are never sent.
    SessionCut {
        from: u32,
        end: u32,
        t_ns: i64,
        reason: String,
    },
}

/// A session turn's reply, handed from the writer thread to the conversations
/// (`super::sessions`) once its outcome is known.
#[derive(Debug, Clone)]
pub struct TurnReply {
    pub index: u32,
    /// The outcome the row records (`ok` only when the stream completed normally).
    pub outcome: artifact::Outcome,
    pub reply: crate::workload::session::Reply,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// Reasoning tokens among the completion tokens, where the usage counts them.
    pub reasoning_tokens: Option<i64>,
    /// When the reply ended (`CLOCK_MONOTONIC`, ns).
    pub t_done_ns: i64,
}

/// Progress line settings.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub enabled: bool,
    pub measured: u64,
}

/// What the writer thread hands back.
#[derive(Debug)]
pub struct Recorded {
    pub writer: ArtifactWriter,
    /// The first write error, if any (the run then ends as `failed`).
    pub error: Option<ArtifactError>,
    /// Per-request facts for the quick look, indexed by request index.
    pub facts: Vec<RequestFacts>,
    /// Prompt-token usage outside the calibration tolerance (request index, usage, the
    /// request's target).
    pub off_target: Vec<(u32, i64, u64)>,
    /// Times the hot path found the event channel full.
    pub channel_full: u64,
    /// run.json `telemetry`, when sources were read.
    pub telemetry: Option<Vec<crate::artifact::telemetry::TelemetrySource>>,
}

/// What one parsed event of a request, received at `t`, tells about the request.
fn note_event(f: &mut RequestFacts, parsed: &artifact::ParsedEvent, t: i64) {
    if f.first_content_ns.is_none()
        && parsed
            .content_delta
            .as_deref()
            .is_some_and(|c| !c.is_empty())
    {
        f.first_content_ns = Some(t);
    }
    if let Some(n) = parsed.usage_completion_tokens {
        f.completion_tokens = Some(n);
    }
    if let Some(p) = parsed.usage_prompt_tokens {
        f.prompt_tokens = Some(p);
    }
    if let Some(r) = parsed.usage_reasoning_tokens {
        f.reasoning_tokens = Some(r);
    }
    if let Some(r) = &parsed.finish_reason {
        f.finish_reason = Some(r.clone());
    }
    if f.stream_error.is_none()
        && let Some(e) = &parsed.stream_error
    {
        f.stream_error = Some(e.clone());
    }
}

/// The writer thread's state.
pub struct Recorder {
    writer: ArtifactWriter,
    events: EventReceiver,
    msgs: Receiver<Msg>,
    meta: Arc<RunMeta>,
    origin: Origin,
    progress: Progress,
    /// Indexed by request index, one per request of `meta` from the start: no map node is
    /// allocated per request as the run goes, and each event finds its request by index.
    facts: Vec<RequestFacts>,
    off_target: Vec<(u32, i64, u64)>,
    error: Option<ArtifactError>,
    /// A session workload's later turns, as they were built (overriding `meta.requests`).
    turns: std::collections::HashMap<u32, RequestMeta>,
    /// A session workload: each turn's reply text so far, and where replies go.
    sessions: Option<SessionReplies>,
    /// What the telemetry sources gave, once they are done.
    telemetry: Option<Vec<crate::artifact::telemetry::TelemetrySource>>,
}

/// What the writer keeps of a session workload's replies.
struct SessionReplies {
    to: std::sync::mpsc::Sender<TurnReply>,
    /// By request index: the content and reasoning received so far.
    text: std::collections::HashMap<u32, crate::workload::session::Reply>,
}

/// Events moved per drain.
const BATCH: usize = 8192;

/// How long the writer sleeps after a drain that found less than a [`BATCH`]. Each wake-up
/// costs the thread a context switch whatever it then finds, so the period sets most of the
/// writer's fixed cost; the events meanwhile wait in the channel (about 130 at 256 streams,
/// against its 64 Ki), and their times were taken on the hot path. Measured at 256 streams x
/// 768 requests of 128 tokens, four alternating runs each (BENCHMARKS.md, 2026-12-04,
/// afternoon): 2 ms gave 1.7 µs of writer CPU per event in every run, 10 ms 1.4-1.5 µs.
const IDLE_SLEEP: Duration = Duration::from_millis(10);

impl Recorder {
    /// The writer thread for the run `meta` describes, timed from `origin`: it drains
    /// `events` and `msgs` into `writer` and reports to `progress`.
    pub fn new(
        meta: Arc<RunMeta>,
        origin: Origin,
        events: EventReceiver,
        msgs: Receiver<Msg>,
        writer: ArtifactWriter,
        progress: Progress,
    ) -> Self {
        Self {
            facts: vec![RequestFacts::default(); meta.requests.len()],
            writer,
            events,
            msgs,
            meta,
            origin,
            progress,
            off_target: Vec::new(),
            error: None,
            turns: std::collections::HashMap::new(),
            sessions: None,
            telemetry: None,
        }
    }

    /// A session workload's writer: every session turn's reply goes to `to` when its outcome
    /// is known, and a message wakes the writer at once (a later turn waits on it).
    pub fn with_turn_replies(mut self, to: std::sync::mpsc::Sender<TurnReply>) -> Self {
        self.sessions = Some(SessionReplies {
            to,
            text: std::collections::HashMap::new(),
        });
        self
    }

    /// What is recorded of request `index`: its built turn, else the plan's.
    fn request_meta(&self, index: u32) -> Option<&RequestMeta> {
        self.turns
            .get(&index)
            .or_else(|| self.meta.requests.get(index as usize))
    }

    fn keep<T>(&mut self, r: Result<T, ArtifactError>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            self.error = Some(e);
        }
    }

    fn event(&mut self, e: RawEvent) {
        let t = self.origin.offset(e.t_ns);
        let redactor = &self.meta.redactor;
        let row = if redactor.is_empty() {
            // Nothing to remove: the received buffers become the row's text uncopied.
            let name = e.event.map(String::from);
            EventRow::from_owned(e.request_index, e.seq, t, name, e.data.into_vec())
        } else {
            let name = e.event.as_deref().map(|n| redactor.text(n));
            let data = redactor.bytes(&e.data);
            let mut row = EventRow::from_raw(e.request_index, e.seq, t, name.as_deref(), &data);
            row.parsed.redact(redactor);
            row
        };
        // Only the run's own requests have facts (every event the hot path sends is of one).
        if let Some(f) = self.facts.get_mut(e.request_index as usize) {
            note_event(f, &row.parsed, t);
        }
        if let Some(replies) = &mut self.sessions
            && (row.parsed.content_delta.is_some() || row.parsed.reasoning_delta.is_some())
            && self
                .meta
                .requests
                .get(e.request_index as usize)
                .is_some_and(|m| m.session.is_some())
        {
            let r = replies.text.entry(e.request_index).or_default();
            r.content
                .push_str(row.parsed.content_delta.as_deref().unwrap_or(""));
            r.reasoning
                .push_str(row.parsed.reasoning_delta.as_deref().unwrap_or(""));
        }
        if let Some(p) = row.parsed.usage_prompt_tokens {
            let meta = self.meta.requests.get(e.request_index as usize);
            // A trace row asks its own input length; every other request the cell's target.
            let target = meta
                .and_then(|m| m.asked)
                .map_or(self.meta.prompt_tokens_target, |a| a.0);
            let tol = crate::workload::calibration::tolerance(target);
            // Functional requests have no prompt-token target to meet, a session's later
            // turns none but their first turn's.
            let measured = meta.is_some_and(|m| {
                m.kind == RequestKind::Measured
                    && m.check.is_none()
                    && m.session.is_none_or(|s| s.turn == 0)
            });
            if measured && (p.max(0) as u64).abs_diff(target) > tol {
                self.off_target.push((e.request_index, p, target));
            }
        }
        let r = self.writer.push_event(row);
        self.keep(r);
    }

    fn outcome(&mut self, mut o: RequestOutcome) {
        let Some(m) = self.request_meta(o.request_index) else {
            return;
        };
        let kind = m.kind;
        let in_session = m.session.is_some();
        // What the parsed events say beyond the transport: an error the server reported in
        // the stream, or a complete stream whose finish reason says the server gave up.
        let mut outcome = o.outcome;
        let facts = self.facts.get(o.request_index as usize);
        let transport_ended = matches!(
            o.outcome,
            super::hotpath::Outcome::Ok | super::hotpath::Outcome::Disconnected
        );
        if transport_ended && let Some(e) = facts.and_then(|f| f.stream_error.as_deref()) {
            o.error = Some(format!("the server reported an error in the stream: {e}"));
            outcome = artifact::Outcome::StreamError;
        } else if o.outcome == super::hotpath::Outcome::Ok
            && let Some(reason) = facts
                .and_then(|f| f.finish_reason.as_deref())
                .filter(|r| !artifact::run::NORMAL_FINISH_REASONS.contains(r))
        {
            o.error = Some(format!(
                "the server ended the stream with finish reason `{reason}`: the generation was not completed"
            ));
            outcome = artifact::Outcome::Aborted;
        }
        let row = RequestRow {
            t_intended_ns: self.origin.offset(o.t_intended_ns),
            t_sent_ns: o.t_sent_ns.map(|t| self.origin.offset(t)),
            t_first_byte_ns: o.t_first_byte_ns.map(|t| self.origin.offset(t)),
            t_done_ns: self.origin.offset(o.t_done_ns),
            http_status: o.http_status,
            outcome,
            error: o.error.map(|e| self.meta.redactor.text(&e).into_owned()),
            events: o.events,
            new_connection: o.new_connection,
            resent: o.resent,
            t_released_ns: Some(self.origin.offset(o.t_start_ns)),
            ..self.planned_row(o.request_index, o.replica)
        };
        if let Some(f) = self.facts.get_mut(o.request_index as usize) {
            f.kind = Some(kind);
            f.outcome = Some(row.outcome);
            f.t_intended_ns = Some(row.t_intended_ns);
            f.t_sent_ns = row.t_sent_ns;
            f.t_done_ns = Some(row.t_done_ns);
        }
        if in_session && let Some(replies) = &mut self.sessions {
            let facts = self.facts.get(o.request_index as usize);
            // The conversation may have ended (a stop): a reply nobody waits for is dropped.
            let _ = replies.to.send(TurnReply {
                index: o.request_index,
                outcome: row.outcome,
                reply: replies.text.remove(&o.request_index).unwrap_or_default(),
                prompt_tokens: facts.and_then(|f| f.prompt_tokens),
                completion_tokens: facts.and_then(|f| f.completion_tokens),
                reasoning_tokens: facts.and_then(|f| f.reasoning_tokens),
                t_done_ns: o.t_done_ns,
            });
        }
        let r = self.writer.push_request(row);
        self.keep(r);
        // A built turn's record is in its row now.
        self.turns.remove(&o.request_index);
    }

    /// What the plan says of request `index` sent to `replica`: every column of its row but
    /// the times, the status and the outcome (left at their defaults for the caller to set).
    fn planned_row(&self, index: u32, replica: u32) -> RequestRow {
        let m = self
            .request_meta(index)
            .unwrap_or(&self.meta.requests[index as usize]);
        RequestRow {
            request_index: index,
            kind: m.kind,
            check: m.check.map(str::to_owned),
            replica,
            endpoint: self
                .meta
                .endpoints
                .get(replica as usize)
                .cloned()
                .unwrap_or_default(),
            api: m.api.unwrap_or(self.meta.api),
            model: self.meta.model.clone(),
            canary: m.canary.clone(),
            prompt_sha256: m.prompt_sha256.clone(),
            prompt_chars: m.prompt_chars,
            prompt_tokens_target: m.asked.map_or(self.meta.prompt_tokens_target, |a| a.0),
            prompt_tokens_calibrated: m.prompt_tokens_calibrated,
            max_tokens: m.asked.map(|a| a.1).or(self.meta.max_tokens),
            request_body: m
                .request_body
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            t_intended_ns: 0,
            t_sent_ns: None,
            t_first_byte_ns: None,
            t_done_ns: 0,
            http_status: None,
            outcome: artifact::Outcome::Cancelled,
            error: None,
            events: 0,
            new_connection: false,
            resent: false,
            session: m.session,
            ignore_eos: m.ignore_eos,
            t_released_ns: None,
        }
    }

    fn cancel_rest(&mut self, t_ns: i64, reason: &str, among: std::ops::Range<u32>) {
        let t = self.origin.offset(t_ns);
        let missing: Vec<u32> = self
            .meta
            .requests
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                among.contains(&(*i as u32))
                    && m.kind == RequestKind::Measured
                    && self
                        .meta
                        .shard
                        .is_none_or(|(s, n)| crate::artifact::shard::sends(s, n, *i as u32))
                    && self.facts.get(*i).is_none_or(|f| f.outcome.is_none())
            })
            .map(|(i, _)| i as u32)
            .collect();
        for i in missing {
            let m = &self.meta.requests[i as usize];
            let row = RequestRow {
                t_intended_ns: t,
                t_sent_ns: None,
                t_first_byte_ns: None,
                t_done_ns: t,
                http_status: None,
                outcome: artifact::Outcome::Cancelled,
                error: Some(
                    self.meta
                        .redactor
                        .text(&format!("never sent: {reason}"))
                        .into_owned(),
                ),
                events: 0,
                new_connection: false,
                resent: false,
                ..self.planned_row(i, m.replica_hint)
            };
            if let Some(f) = self.facts.get_mut(i as usize) {
                f.kind = Some(m.kind);
                f.outcome = Some(artifact::Outcome::Cancelled);
                f.t_done_ns = Some(t);
            }
            let r = self.writer.push_request(row);
            self.keep(r);
        }
    }

    /// Take one message of the run.
    fn message(&mut self, m: Msg, buf: &mut Vec<RawEvent>, events_open: &mut bool) {
        match m {
            Msg::Outcome(o) => {
                // The request's events were in the channel before its outcome was sent:
                // take them all first, so the outcome sees its finish reason (and a session
                // turn its whole reply).
                if *events_open {
                    *events_open = self.drain_events(buf).1;
                }
                self.outcome(o)
            }
            Msg::Row(mut r) => {
                if let Some(e) = r.error.as_mut() {
                    self.meta.redactor.in_place(e);
                }
                let r = self.writer.push_request(*r);
                self.keep(r);
            }
            Msg::Scrapes(rows) => {
                for mut row in rows {
                    self.meta.redactor.in_place(&mut row.labels);
                    self.meta.redactor.in_place(&mut row.metric);
                    let r = self.writer.push_scrape(row);
                    self.keep(r);
                }
            }
            Msg::Telemetry(rows) => {
                for row in rows {
                    let r = self.writer.push_telemetry(row);
                    self.keep(r);
                }
            }
            Msg::TelemetrySummary(sources) => self.telemetry = Some(sources),
            Msg::CancelRest { t_ns, reason } => self.cancel_rest(t_ns, &reason, 0..u32::MAX),
            Msg::Turn { index, meta } => {
                self.turns.insert(index, *meta);
            }
            Msg::SessionCut {
                from,
                end,
                t_ns,
                reason,
            } => self.cancel_rest(t_ns, &reason, from..end),
        }
    }

    /// Move every event waiting in the channel into the tables: how many, and `false` once
    /// the channel is finished.
    fn drain_events(&mut self, buf: &mut Vec<RawEvent>) -> (usize, bool) {
        let mut moved = 0;
        loop {
            buf.clear();
            let (n, open) = match self.events.drain_into(buf, BATCH) {
                Drained::Open(n) => (n, true),
                Drained::Closed(n) => (n, false),
            };
            moved += n;
            for e in buf.drain(..) {
                self.event(e);
            }
            if !open || n < BATCH {
                return (moved, open);
            }
        }
    }

    /// Run until every event sink and message sender is gone, then hand back the writer.
    pub fn run(mut self) -> Recorded {
        let mut buf: Vec<RawEvent> = Vec::with_capacity(BATCH);
        let mut events_open = true;
        let mut msgs_open = true;
        let show = self.progress.enabled && std::io::stderr().is_terminal();
        let started = Instant::now();
        let mut last_draw = Instant::now();
        while events_open || msgs_open {
            let mut moved = 0;
            if events_open {
                let (n, open) = self.drain_events(&mut buf);
                moved += n;
                events_open = open;
            }
            while msgs_open {
                match self.msgs.try_recv() {
                    Ok(m) => self.message(m, &mut buf, &mut events_open),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => msgs_open = false,
                }
                moved += 1;
            }
            let r = self.writer.flush_if_due();
            self.keep(r);
            if show && last_draw.elapsed() >= Duration::from_millis(250) {
                last_draw = Instant::now();
                self.draw(started.elapsed());
            }
            if moved < BATCH && (events_open || msgs_open) {
                if self.sessions.is_some() && msgs_open {
                    // A session's next turn waits on its reply: a message (its outcome)
                    // wakes the writer at once.
                    match self.msgs.recv_timeout(IDLE_SLEEP) {
                        Ok(m) => self.message(m, &mut buf, &mut events_open),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => msgs_open = false,
                    }
                } else {
                    std::thread::sleep(IDLE_SLEEP);
                }
            }
        }
        if show {
            self.draw(started.elapsed());
            let _ = writeln!(std::io::stderr());
        }
        Recorded {
            writer: self.writer,
            error: self.error,
            facts: self.facts,
            off_target: self.off_target,
            channel_full: self.events.channel_full_count(),
            telemetry: self.telemetry,
        }
    }

    fn draw(&self, elapsed: Duration) {
        let measured: Vec<&RequestFacts> = self
            .facts
            .iter()
            .filter(|f| f.kind == Some(RequestKind::Measured))
            .collect();
        let done = measured.iter().filter(|f| f.outcome.is_some()).count() as u64;
        let failed = measured
            .iter()
            .filter(|f| f.outcome.is_some_and(|o| o != artifact::Outcome::Ok))
            .count();
        let tokens: i64 = self.facts.iter().filter_map(|f| f.completion_tokens).sum();
        let secs = elapsed.as_secs_f64().max(1e-3);
        let total = self.progress.measured.max(1);
        let width = 30usize;
        let filled = ((done as f64 / total as f64) * width as f64).round() as usize;
        let bar: String = "#".repeat(filled.min(width)) + &"-".repeat(width - filled.min(width));
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K[{bar}] {done}/{total} done, {failed} failed, {:.0} output tok/s, {:.0} s",
            tokens as f64 / secs,
            secs
        );
    }
}
