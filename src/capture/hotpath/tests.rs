//! End-to-end tests of the hot path over real loopback sockets, against a scripted server that
//! writes canned HTTP responses in deliberately split pieces.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::workload::request::{ApiKey, PreparedRequest};

/// One step of a scripted reply.
#[derive(Clone)]
enum Step {
    /// Write these bytes and flush (Nagle is off: each write leaves as its own segment).
    Write(Vec<u8>),
    /// Wait this many milliseconds.
    Pause(u64),
    /// Close the connection.
    Close,
    /// Half-close: send the FIN (`shutdown(SHUT_WR)`) and keep reading until the client
    /// closes, as a server ending a close-delimited body does.
    Shutdown,
}

use Step::*;

#[derive(Default)]
struct Log {
    connections: u32,
    /// Each request as read: head and body.
    requests: Vec<String>,
}

/// A server answering successive requests (on any connection) with successive scripts.
async fn scripted(replies: Vec<Vec<Step>>) -> (SocketAddr, Arc<Mutex<Log>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(Mutex::new(Log::default()));
    let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
    let server_log = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            sock.set_nodelay(true).unwrap();
            server_log.lock().unwrap().connections += 1;
            let log = server_log.clone();
            let replies = replies.clone();
            tokio::spawn(async move {
                loop {
                    let Some(request) = read_request(&mut sock).await else {
                        return;
                    };
                    log.lock().unwrap().requests.push(request);
                    let Some(steps) = replies.lock().unwrap().pop_front() else {
                        return;
                    };
                    for step in steps {
                        match step {
                            Write(b) => {
                                if sock.write_all(&b).await.is_err() {
                                    return;
                                }
                                let _ = sock.flush().await;
                            }
                            Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                            Close => return,
                            Shutdown => {
                                if sock.shutdown().await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, log)
}

/// Read one request (head + content-length body); `None` at end of stream.
async fn read_request(sock: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return Some(String::from_utf8_lossy(&got[..end + 4 + len]).into_owned());
            }
        }
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
const LAST_CHUNK: &str = "0\r\n\r\n";

/// One HTTP chunk carrying `s`.
fn chunk(s: &str) -> Vec<u8> {
    format!("{:x}\r\n{s}\r\n", s.len()).into_bytes()
}

/// `bytes` written in `parts` roughly equal pieces with a pause between them, so the client
/// reads them separately.
fn pieces(bytes: &[u8], parts: usize) -> Vec<Step> {
    let size = bytes.len().div_ceil(parts).max(1);
    let mut steps = Vec::new();
    for p in bytes.chunks(size) {
        steps.push(Write(p.to_vec()));
        steps.push(Pause(3));
    }
    steps
}

fn w(s: &str) -> Step {
    Write(s.as_bytes().to_vec())
}

fn prepared(api: Api, index: u32, body: &str) -> PreparedRequest {
    PreparedRequest {
        request_index: index,
        api,
        body: Bytes::from(body.to_owned()),
        request_id: HeaderValue::from_str(&format!("run1-{index}")).unwrap(),
        canary: None,
        prompt_sha256: String::new(),
        prompt_chars: 0,
        filler_units: 0,
    }
}

fn quick_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        total: Duration::from_secs(20),
    }
}

struct Rig {
    worker: Worker,
    rx: EventReceiver,
    log: Arc<Mutex<Log>>,
}

async fn rig(replies: Vec<Vec<Step>>, timeouts: Timeouts) -> Rig {
    let (addr, log) = scripted(replies).await;
    let (sink, rx) = event_channel(1024);
    let ep = Arc::new(Endpoint::parse(3, &format!("http://{addr}")).unwrap());
    let key = ApiKey::new("sk-test-key");
    Rig {
        worker: Worker::new(ep, timeouts, Some(&key), sink).unwrap(),
        rx,
        log,
    }
}

impl Rig {
    async fn run(&mut self, api: Api, index: u32) -> (RequestOutcome, Vec<RawEvent>) {
        let t_intended = monotonic_ns();
        let out = self
            .worker
            .execute(
                &prepared(api, index, "{\"x\":1}"),
                t_intended,
                &Cancel::new(),
            )
            .await
            .unwrap();
        let mut events = Vec::new();
        while let Some(e) = self.rx.try_recv() {
            events.push(e);
        }
        (out, events)
    }
}

/// The recorded times are in causal order.
fn assert_ordered(out: &RequestOutcome, events: &[RawEvent]) {
    assert!(out.t_intended_ns <= out.t_start_ns, "{out:?}");
    let sent = out.t_sent_ns.expect("request written");
    assert!(out.t_start_ns <= sent, "{out:?}");
    let first = out.t_first_byte_ns.expect("response read");
    assert!(sent <= first, "t_sent {sent} after t_first_byte {first}");
    let mut t = first;
    for e in events {
        assert!(t <= e.t_ns, "event {} at {} before {t}", e.seq, e.t_ns);
        t = e.t_ns;
    }
    assert!(t <= out.t_done_ns);
}

fn datas(events: &[RawEvent]) -> Vec<&str> {
    events
        .iter()
        .map(|e| std::str::from_utf8(&e.data).expect("UTF-8 test stream"))
        .collect()
}

const E_ROLE: &str =
    "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n";
const E_CANARY: &str =
    "data: {\"choices\":[{\"delta\":{\"content\":\"ANV-0123456789ab\"}}]}\r\n\r\n";
const E_HELLO: &str = "data: {\"choices\":[{\"delta\":{\"content\":\" Hello\"}}]}\n\n";
const E_USAGE: &str =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n";
const E_DONE: &str = "data: [DONE]\n\n";

fn chat_stream() -> Vec<Step> {
    let mut s = vec![Pause(5), w(SSE_HEAD)];
    // The role chunk written in three pieces (one split inside the chunk-size line's CRLF).
    s.extend(pieces(&chunk(E_ROLE), 3));
    // A CRLF event followed by a keep-alive comment in one HTTP chunk.
    s.push(Write(chunk(&format!("{E_CANARY}: keep-alive\n\n"))));
    s.push(Pause(3));
    // One event split across two HTTP chunks.
    s.push(Write(chunk(&E_HELLO[..17])));
    s.push(Pause(3));
    s.push(Write(chunk(&E_HELLO[17..])));
    s.push(Pause(3));
    // Two events in one HTTP chunk, then the last chunk.
    s.push(Write(chunk(&format!("{E_USAGE}{E_DONE}"))));
    s.push(w(LAST_CHUNK));
    s
}

#[tokio::test]
async fn streams_events_in_order_with_causal_timestamps() {
    let mut r = rig(vec![chat_stream()], quick_timeouts()).await;
    let (out, events) = r.run(Api::Chat, 7).await;
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert_eq!(out.http_status, Some(200));
    assert_eq!(out.error, None);
    assert_eq!(out.replica, 3);
    assert_eq!(out.events, 5);
    assert!(out.new_connection);
    assert_eq!(
        datas(&events),
        vec![
            E_ROLE[6..E_ROLE.len() - 2].to_string(),
            E_CANARY[6..E_CANARY.len() - 4].to_string(),
            E_HELLO[6..E_HELLO.len() - 2].to_string(),
            E_USAGE[6..E_USAGE.len() - 2].to_string(),
            "[DONE]".to_string(),
        ]
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u32);
        assert_eq!(e.request_index, 7);
        assert_eq!(e.event, None);
    }
    assert_ordered(&out, &events);
    // The server took at least 5 ms between reading the request and answering.
    assert!(out.t_first_byte_ns.unwrap() - out.t_sent_ns.unwrap() >= 4_000_000);

    let log = r.log.lock().unwrap();
    let req = &log.requests[0];
    assert!(
        req.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{req}"
    );
    assert!(req.contains("x-request-id: run1-7\r\n"));
    assert!(req.contains("authorization: Bearer sk-test-key\r\n"));
    assert!(req.contains("content-type: application/json\r\n"));
    assert!(req.contains("content-length: 7\r\n"));
    assert!(req.ends_with("\r\n\r\n{\"x\":1}"));
}

#[tokio::test]
async fn an_event_written_byte_by_byte_is_one_event() {
    let mut steps = vec![w(SSE_HEAD)];
    for b in chunk(E_HELLO) {
        steps.push(Write(vec![b]));
        steps.push(Pause(1));
    }
    steps.push(Write(chunk(E_DONE)));
    steps.push(w(LAST_CHUNK));
    let mut r = rig(vec![steps], quick_timeouts()).await;
    let (out, events) = r.run(Api::Completions, 0).await;
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert_eq!(
        datas(&events),
        vec![&E_HELLO[6..E_HELLO.len() - 2], "[DONE]"]
    );
    assert_ordered(&out, &events);
    // The event is stamped when its last byte arrived, well after the first byte.
    assert!(events[0].t_ns - out.t_first_byte_ns.unwrap() >= 50_000_000);
}

#[tokio::test]
async fn the_connection_is_reused_and_reopened_after_the_server_closes_it() {
    let mut closing = chat_stream();
    closing.push(Close);
    let mut r = rig(
        vec![chat_stream(), closing, chat_stream()],
        quick_timeouts(),
    )
    .await;
    let (a, _) = r.run(Api::Chat, 0).await;
    let (b, _) = r.run(Api::Chat, 1).await;
    // Give the close time to arrive before the third request.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (c, events) = r.run(Api::Chat, 2).await;
    for o in [&a, &b, &c] {
        assert_eq!(o.outcome, Outcome::Ok, "{o:?}");
    }
    assert!(a.new_connection);
    assert!(
        !b.new_connection,
        "second request must reuse the connection"
    );
    assert!(c.new_connection, "third request needs a new connection");
    assert_eq!(r.worker.connections_opened(), 2);
    assert_eq!(r.log.lock().unwrap().connections, 2);
    assert_eq!(events.len(), 5);
    assert_ordered(&c, &events);
}

/// A server that closes 30 ms after its response, without reading what arrived meanwhile
/// (the request sat unread in its socket, so the close answers with a reset and no FIN
/// first): that request could have been read as far as the client can tell, so it stays a
/// failure and is not sent again; the worker then gives every later request its own
/// connection, and those succeed.
#[tokio::test]
async fn a_close_racing_a_reused_connection_is_a_failure_and_later_requests_get_fresh_ones() {
    let mut closing = chat_stream();
    closing.push(Pause(30));
    closing.push(Close);
    let mut r = rig(
        vec![closing, chat_stream(), chat_stream(), chat_stream()],
        quick_timeouts(),
    )
    .await;
    let (a, _) = r.run(Api::Chat, 0).await;
    assert_eq!(a.outcome, Outcome::Ok, "{a:?}");
    let (b, _) = r.run(Api::Chat, 1).await;
    assert_eq!(b.outcome, Outcome::Disconnected, "{b:?}");
    assert!(
        !b.resent,
        "a request the server could have read is not sent again: {b:?}"
    );
    assert!(!b.new_connection);
    for i in 2..4 {
        let (c, _) = r.run(Api::Chat, i).await;
        assert_eq!(c.outcome, Outcome::Ok, "{c:?}");
        assert!(c.new_connection, "request {i} gets its own connection");
        assert!(!c.resent);
    }
    assert_eq!(r.log.lock().unwrap().connections, 3);
}

/// A worker told the server closes after each stream opens a connection per request and
/// never races the close.
#[tokio::test]
async fn fresh_connections_are_opened_for_every_request_when_asked() {
    let closing = || {
        let mut s = chat_stream();
        s.push(Close);
        s
    };
    let (addr, log) = scripted(vec![closing(), closing(), closing()]).await;
    let (sink, _rx) = event_channel(1024);
    let ep = Arc::new(Endpoint::parse(0, &format!("http://{addr}")).unwrap());
    let mut worker = Worker::new(ep, quick_timeouts(), None, sink)
        .unwrap()
        .with_fresh_connections(true);
    for i in 0..3 {
        let out = worker
            .execute(
                &prepared(Api::Chat, i, "{}"),
                monotonic_ns(),
                &Cancel::new(),
            )
            .await
            .unwrap();
        assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
        assert!(out.new_connection && !out.resent, "{out:?}");
    }
    assert_eq!(log.lock().unwrap().connections, 3);
}

#[tokio::test]
async fn http_error_keeps_the_servers_error_body() {
    let body = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#;
    let resp = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let big = "x".repeat(100_000);
    let big_resp = format!(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n{big}",
        big.len()
    );
    let mut r = rig(
        vec![
            pieces(resp.as_bytes(), 4),
            vec![Write(big_resp.into_bytes())],
            chat_stream(),
        ],
        quick_timeouts(),
    )
    .await;
    let (out, events) = r.run(Api::Chat, 4).await;
    assert_eq!(out.outcome, Outcome::HttpError);
    assert_eq!(out.http_status, Some(400));
    assert_eq!(out.error.as_deref(), Some(body));
    assert_eq!(out.events, 0);
    assert!(events.is_empty());
    assert_ordered(&out, &events);

    let (out, _) = r.run(Api::Chat, 5).await;
    assert_eq!(out.outcome, Outcome::HttpError);
    assert_eq!(out.http_status, Some(500));
    let err = out.error.unwrap();
    assert!(
        err.len() < ERROR_BODY_LIMIT + 32 && err.ends_with("(truncated)"),
        "{}",
        err.len()
    );

    // The truncated body left the connection unusable; the next request reconnects and works.
    let (out, _) = r.run(Api::Chat, 6).await;
    assert_eq!(out.outcome, Outcome::Ok);
    assert!(out.new_connection);
}

#[tokio::test]
async fn a_connection_closed_mid_stream_is_disconnected() {
    let steps = vec![
        w(SSE_HEAD),
        Write(chunk(E_ROLE)),
        Pause(3),
        Write(chunk(E_HELLO)),
        Pause(3),
        Close,
    ];
    let mut r = rig(vec![steps], quick_timeouts()).await;
    let (out, events) = r.run(Api::Chat, 9).await;
    assert_eq!(out.outcome, Outcome::Disconnected, "{out:?}");
    assert_eq!(out.events, 2);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].seq, 1);
    assert!(out.error.is_some());
    assert_ordered(&out, &events);
}

#[tokio::test]
async fn a_stream_ending_cleanly_without_done_is_disconnected() {
    let steps = vec![w(SSE_HEAD), Write(chunk(E_HELLO)), w(LAST_CHUNK)];
    let mut r = rig(vec![steps, chat_stream()], quick_timeouts()).await;
    let (out, events) = r.run(Api::Chat, 1).await;
    assert_eq!(out.outcome, Outcome::Disconnected);
    assert!(out.error.as_deref().unwrap().contains("[DONE]"), "{out:?}");
    assert_eq!(events.len(), 1);
    // The body ended properly, so the connection is still good.
    let (out, _) = r.run(Api::Chat, 2).await;
    assert_eq!(out.outcome, Outcome::Ok);
    assert!(!out.new_connection);
}

#[tokio::test]
async fn responses_streams_end_with_response_completed() {
    let created = "event: response.created\ndata: {\"type\":\"response.created\"}\n\n";
    let delta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n";
    let completed = "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n";
    let full = vec![
        w(SSE_HEAD),
        Write(chunk(created)),
        Pause(2),
        Write(chunk(delta)),
        Pause(2),
        Write(chunk(completed)),
        w(LAST_CHUNK),
    ];
    let cut = vec![
        w(SSE_HEAD),
        Write(chunk(created)),
        Write(chunk(delta)),
        w(LAST_CHUNK),
    ];
    let mut r = rig(vec![full, cut], quick_timeouts()).await;
    let (out, events) = r.run(Api::Responses, 0).await;
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert_eq!(
        events
            .iter()
            .map(|e| e.event.as_deref().unwrap())
            .collect::<Vec<_>>(),
        vec![
            "response.created",
            "response.output_text.delta",
            "response.completed"
        ]
    );
    assert_ordered(&out, &events);
    assert!(r.log.lock().unwrap().requests[0].starts_with("POST /v1/responses "));

    let (out, _) = r.run(Api::Responses, 1).await;
    assert_eq!(out.outcome, Outcome::Disconnected);
    assert!(out.error.unwrap().contains("response.completed"));
}

/// A close-delimited event stream: `connection: close`, no content-length and no
/// transfer-encoding, so only the server's FIN ends the body.
const SSE_HEAD_CLOSE_DELIMITED: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// Run one chat request against `steps` (a close-delimited stream) with a 10 s idle timeout:
/// the body must end at the server's FIN, long before that.
async fn close_delimited_chat_ends_at_the_fin(steps: Vec<Step>) {
    let t = Timeouts {
        idle: Duration::from_secs(10),
        total: Duration::from_secs(30),
        ..quick_timeouts()
    };
    let mut r = rig(vec![steps, chat_stream()], t).await;
    let began = std::time::Instant::now();
    let (out, events) = r.run(Api::Chat, 0).await;
    let took = began.elapsed();
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert!(
        took < Duration::from_secs(2),
        "the request ended {took:?} after it started: the FIN was not seen"
    );
    assert_eq!(
        datas(&events),
        vec![
            &E_ROLE[6..E_ROLE.len() - 2],
            &E_HELLO[6..E_HELLO.len() - 2],
            "[DONE]"
        ]
    );
    assert_ordered(&out, &events);
    // The last bytes' arrival, not the moment the end of stream was read.
    assert_eq!(out.t_done_ns, events[2].t_ns);
    // The server said it closes: the next request gets its own connection.
    let (out, _) = r.run(Api::Chat, 1).await;
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert!(out.new_connection);
}

#[tokio::test]
async fn a_close_delimited_stream_ends_at_the_fin_that_follows_its_last_event() {
    close_delimited_chat_ends_at_the_fin(vec![
        w(SSE_HEAD_CLOSE_DELIMITED),
        Pause(3),
        w(E_ROLE),
        Pause(3),
        w(E_HELLO),
        Pause(3),
        w(E_DONE),
        Shutdown,
    ])
    .await;
}

#[tokio::test]
async fn a_close_delimited_stream_written_at_once_with_its_fin_ends() {
    let whole = format!("{SSE_HEAD_CLOSE_DELIMITED}{E_ROLE}{E_HELLO}{E_DONE}");
    close_delimited_chat_ends_at_the_fin(vec![Write(whole.into_bytes()), Shutdown]).await;
}

#[tokio::test]
async fn a_close_delimited_stream_ends_at_a_late_fin() {
    close_delimited_chat_ends_at_the_fin(vec![
        w(SSE_HEAD_CLOSE_DELIMITED),
        Pause(3),
        w(E_ROLE),
        Pause(3),
        w(E_HELLO),
        Pause(3),
        w(E_DONE),
        Pause(50),
        Shutdown,
    ])
    .await;
}

#[tokio::test]
async fn a_stalled_stream_times_out_idle() {
    let steps = vec![w(SSE_HEAD), Write(chunk(E_ROLE)), Pause(3_000)];
    let t = Timeouts {
        idle: Duration::from_millis(200),
        ..quick_timeouts()
    };
    let mut r = rig(vec![steps], t).await;
    let (out, events) = r.run(Api::Chat, 0).await;
    assert_eq!(out.outcome, Outcome::TimeoutIdle, "{out:?}");
    assert_eq!(events.len(), 1);
    assert_ordered(&out, &events);
    let gap = out.t_done_ns - events[0].t_ns;
    assert!((200_000_000..1_000_000_000).contains(&gap), "gap {gap} ns");
}

#[tokio::test]
async fn the_idle_timeout_restarts_at_every_event() {
    // Five events 120 ms apart with a 200 ms idle limit: never idle for too long.
    let mut steps = vec![w(SSE_HEAD)];
    for _ in 0..5 {
        steps.push(Write(chunk(E_HELLO)));
        steps.push(Pause(120));
    }
    steps.push(Write(chunk(E_DONE)));
    steps.push(w(LAST_CHUNK));
    let t = Timeouts {
        idle: Duration::from_millis(200),
        ..quick_timeouts()
    };
    let mut r = rig(vec![steps], t).await;
    let (out, events) = r.run(Api::Chat, 0).await;
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert_eq!(events.len(), 6);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_on_first_byte() {
    let t = Timeouts {
        first_byte: Duration::from_millis(200),
        ..quick_timeouts()
    };
    let mut r = rig(vec![vec![Pause(3_000)]], t).await;
    let (out, events) = r.run(Api::Chat, 0).await;
    assert_eq!(out.outcome, Outcome::TimeoutFirstByte, "{out:?}");
    assert!(events.is_empty());
    assert!(out.t_sent_ns.is_some(), "the request was written");
    assert_eq!(out.t_first_byte_ns, None);
    assert_eq!(out.http_status, None);
    assert!(out.t_done_ns - out.t_sent_ns.unwrap() >= 190_000_000);
}

#[tokio::test]
async fn headers_without_events_time_out_on_first_byte() {
    let t = Timeouts {
        first_byte: Duration::from_millis(200),
        ..quick_timeouts()
    };
    let mut r = rig(vec![vec![w(SSE_HEAD), Pause(3_000)]], t).await;
    let (out, _) = r.run(Api::Chat, 0).await;
    assert_eq!(out.outcome, Outcome::TimeoutFirstByte, "{out:?}");
    assert_eq!(out.http_status, Some(200));
    assert!(out.t_first_byte_ns.is_some());
}

#[tokio::test]
async fn the_total_timeout_bounds_a_slow_stream() {
    let mut steps = vec![w(SSE_HEAD)];
    for _ in 0..50 {
        steps.push(Write(chunk(E_HELLO)));
        steps.push(Pause(20));
    }
    let t = Timeouts {
        total: Duration::from_millis(300),
        ..quick_timeouts()
    };
    let mut r = rig(vec![steps], t).await;
    let (out, events) = r.run(Api::Chat, 0).await;
    assert_eq!(out.outcome, Outcome::TimeoutTotal, "{out:?}");
    assert!(!events.is_empty());
    let took = out.t_done_ns - out.t_start_ns;
    assert!((300_000_000..800_000_000).contains(&took), "{took}");
}

#[tokio::test]
async fn refused_connections_are_connect_errors() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let (sink, _rx) = event_channel(8);
    let ep = Arc::new(Endpoint::parse(0, &format!("http://{addr}")).unwrap());
    let mut worker = Worker::new(ep, quick_timeouts(), None, sink).unwrap();
    let out = worker
        .execute(
            &prepared(Api::Chat, 0, "{}"),
            monotonic_ns(),
            &Cancel::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::ConnectError, "{out:?}");
    assert_eq!(out.t_sent_ns, None);
    assert!(out.error.unwrap().contains(&addr.to_string()));
}

#[tokio::test]
async fn cancelling_ends_requests_in_flight() {
    let mut r = rig(
        vec![vec![w(SSE_HEAD), Write(chunk(E_ROLE)), Pause(5_000)]],
        quick_timeouts(),
    )
    .await;
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        c.cancel();
    });
    let out = r
        .worker
        .execute(&prepared(Api::Chat, 0, "{}"), monotonic_ns(), &cancel)
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Cancelled, "{out:?}");
    assert_eq!(out.events, 1);
    // Already cancelled: nothing is sent.
    let out = r
        .worker
        .execute(&prepared(Api::Chat, 1, "{}"), monotonic_ns(), &cancel)
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Cancelled);
    assert_eq!(out.t_sent_ns, None);
    assert_eq!(r.log.lock().unwrap().requests.len(), 1);
}

#[tokio::test]
async fn garbage_and_wrong_content_types_are_protocol_errors() {
    let json = "{\"choices\":[]}";
    let not_sse = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{json}",
        json.len()
    );
    let mut r = rig(
        vec![
            vec![w("HELLO THERE\r\n\r\n")],
            vec![Write(not_sse.into_bytes())],
        ],
        quick_timeouts(),
    )
    .await;
    let (out, _) = r.run(Api::Chat, 0).await;
    assert_eq!(out.outcome, Outcome::ProtocolError, "{out:?}");
    let (out, _) = r.run(Api::Chat, 1).await;
    assert_eq!(out.outcome, Outcome::ProtocolError, "{out:?}");
    assert!(out.error.unwrap().contains("application/json"));
}

#[tokio::test]
async fn a_full_channel_is_counted_and_no_event_is_lost() {
    let mut steps = vec![w(SSE_HEAD)];
    let mut body = String::new();
    for _ in 0..40 {
        body.push_str(E_HELLO);
    }
    body.push_str(E_DONE);
    steps.push(Write(chunk(&body)));
    steps.push(w(LAST_CHUNK));
    let (addr, _log) = scripted(vec![steps]).await;
    let (sink, mut rx) = event_channel(2);
    let ep = Arc::new(Endpoint::parse(0, &format!("http://{addr}")).unwrap());
    let mut worker = Worker::new(ep, quick_timeouts(), None, sink.clone()).unwrap();
    // A slow writer: starts late, then drains.
    let reader = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut n = Vec::new();
        while let Some(e) = rx.recv().await {
            n.push(e.seq);
        }
        (n, rx.channel_full_count())
    });
    let out = worker
        .execute(
            &prepared(Api::Chat, 0, "{}"),
            monotonic_ns(),
            &Cancel::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Ok);
    assert_eq!(out.events, 41);
    drop(worker);
    drop(sink);
    let (seqs, full) = reader.await.unwrap();
    assert_eq!(seqs, (0..41).collect::<Vec<u32>>());
    assert!(full >= 1, "the full channel must be counted");
}

#[tokio::test]
async fn a_stopped_writer_stops_the_request() {
    let (addr, _log) = scripted(vec![chat_stream()]).await;
    let (sink, rx) = event_channel(8);
    drop(rx);
    let ep = Arc::new(Endpoint::parse(0, &format!("http://{addr}")).unwrap());
    let mut worker = Worker::new(ep, quick_timeouts(), None, sink).unwrap();
    let r = worker
        .execute(
            &prepared(Api::Chat, 0, "{}"),
            monotonic_ns(),
            &Cancel::new(),
        )
        .await;
    assert_eq!(r.unwrap_err(), SinkClosed);
}

#[test]
fn outcome_names_are_distinct_snake_case() {
    let names: std::collections::HashSet<_> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
    assert_eq!(names.len(), Outcome::ALL.len());
    for n in names {
        assert!(
            n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{n}"
        );
    }
}

#[test]
fn worker_debug_redacts_the_api_key() {
    let (sink, _rx) = event_channel(1);
    let ep = Arc::new(Endpoint::parse(0, "http://127.0.0.1:9").unwrap());
    let w = Worker::new(
        ep,
        Timeouts::default(),
        Some(&ApiKey::new("sk-secret")),
        sink,
    )
    .unwrap();
    let s = format!("{w:?}");
    assert!(!s.contains("sk-secret") && s.contains("<redacted>"), "{s}");
}

/// CPU the hot path spends per event (run with `--ignored --nocapture`).
///
/// A blocking server thread streams chat chunks, one HTTP chunk per event, to `streams`
/// connections: every `interval` it writes one event to each stream, in 16 staggered groups
/// (a batched server's decode steps, spread over the interval). The client's workers run on a
/// current-thread runtime on this thread, whose CPU time is measured: socket reads, the
/// chunked decoding, SSE framing, the clock and the channel send. A writer thread drains the
/// channel either by blocking per event or by polling every 2 ms.
fn hot_path_bench(streams: usize, events: usize, interval: Duration, polling: bool) -> Bench {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::Builder::new().name("bench-server".into()).spawn(move || {
        let event = "data: {\"id\":\"chatcmpl-5f0c\",\"object\":\"chat.completion.chunk\",\"created\":1764460800,\"model\":\"qwen3.8-27b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
        let c = chunk(event);
        let mut socks = Vec::new();
        let mut buf = [0u8; 4096];
        for _ in 0..streams {
            let (mut s, _) = listener.accept().unwrap();
            s.set_nodelay(true).unwrap();
            let _ = s.read(&mut buf).unwrap();
            s.write_all(SSE_HEAD.as_bytes()).unwrap();
            socks.push(s);
        }
        let groups = 16.min(streams);
        let per_group = streams.div_ceil(groups);
        let start = std::time::Instant::now();
        for tick in 0..events {
            for (g, group) in socks.chunks_mut(per_group).enumerate() {
                let at = interval * tick as u32 + interval * g as u32 / groups as u32;
                if let Some(wait) = at.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
                for s in group.iter_mut() {
                    s.write_all(&c).unwrap();
                }
            }
        }
        for s in &mut socks {
            s.write_all(&chunk(E_DONE)).unwrap();
            s.write_all(LAST_CHUNK.as_bytes()).unwrap();
        }
        for s in &mut socks {
            let _ = s.read(&mut buf);
        }
    }).unwrap();
    let (sink, mut rx) = event_channel(64 * 1024);
    let drain = std::thread::Builder::new()
        .name("bench-writer".into())
        .spawn(move || {
            let mut n = 0usize;
            if polling {
                let mut buf = Vec::with_capacity(8192);
                loop {
                    buf.clear();
                    match rx.drain_into(&mut buf, 8192) {
                        Drained::Open(k) => {
                            n += k;
                            if k < 8192 {
                                std::thread::sleep(Duration::from_millis(2));
                            }
                        }
                        Drained::Closed(k) => {
                            n += k;
                            break;
                        }
                    }
                }
            } else {
                while rx.blocking_recv().is_some() {
                    n += 1;
                }
            }
            (n, rx.channel_full_count())
        })
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ep = Arc::new(Endpoint::parse(0, &format!("http://{addr}")).unwrap());
    let cpu0 = crate::capture::sse::tests::thread_cpu_ns();
    let wall0 = monotonic_ns();
    let outcomes = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let pacer = super::Pacer::start().unwrap();
        for i in 0..streams {
            let mut worker = Worker::new(ep.clone(), quick_timeouts(), None, sink.clone())
                .unwrap()
                .with_pacer(pacer.clone());
            set.spawn(async move {
                worker
                    .execute(
                        &prepared(Api::Chat, i as u32, "{}"),
                        monotonic_ns(),
                        &Cancel::new(),
                    )
                    .await
                    .unwrap()
            });
        }
        set.join_all().await
    });
    let cpu = crate::capture::sse::tests::thread_cpu_ns() - cpu0;
    let wall = monotonic_ns() - wall0;
    drop(sink);
    let (received, full) = drain.join().unwrap();
    server.join().unwrap();
    assert!(outcomes.iter().all(|o| o.outcome == Outcome::Ok));
    let total = streams * (events + 1);
    assert_eq!(received, total);
    Bench {
        cpu_ns: cpu as f64 / total as f64,
        rate: total as f64 / (wall as f64 / 1e9),
        full,
    }
}

struct Bench {
    cpu_ns: f64,
    rate: f64,
    full: u64,
}

#[allow(clippy::print_stdout)] // an ignored measurement prints its figures
#[test]
#[ignore = "measurement, prints its figures"]
fn hot_path_cpu_per_event() {
    let only = std::env::var("ANVIL_BENCH_ONLY").ok();
    for (streams, events, interval) in [
        (1, 10_000, Duration::from_micros(100)),
        (256, 100, Duration::from_millis(20)),
    ] {
        for polling in [false, true] {
            if only
                .as_deref()
                .is_some_and(|o| o != format!("{streams}-{polling}"))
            {
                continue;
            }
            let b = hot_path_bench(streams, events, interval, polling);
            println!(
                "hot path, {streams} stream(s) at {:.0} events/s, writer {}: {:.0} ns CPU/event; \
                 channel full {} times",
                b.rate,
                if polling {
                    "polling every 2 ms"
                } else {
                    "blocking per event"
                },
                b.cpu_ns,
                b.full
            );
        }
    }
}

/// The driver spawns workers on a multi-thread runtime: their futures must be `Send`.
#[test]
fn worker_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (sink, _rx) = event_channel(1);
    let ep = Arc::new(Endpoint::parse(0, "http://127.0.0.1:9").unwrap());
    let mut w = Worker::new(ep, Timeouts::default(), None, sink).unwrap();
    let req = prepared(Api::Chat, 0, "{}");
    let cancel = Cancel::new();
    let fut = w.execute(&req, 0, &cancel);
    assert_send(&fut);
}

/// A task that reads late still records when the bytes arrived: the events are stamped with
/// the kernel's receive time, not with the moment the (here deliberately blocked) runtime
/// thread got round to reading them.
#[test]
fn events_read_late_are_stamped_with_their_arrival() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The server, on its own thread: the request, then two events 40 ms apart, each write's
    // time noted just before it.
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_nodelay(true).unwrap();
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        while !got.windows(7).any(|w| w == b"{\"x\":1}") {
            let n = sock.read(&mut buf).unwrap();
            assert!(n > 0, "the request never came");
            got.extend_from_slice(&buf[..n]);
        }
        let mut written = Vec::new();
        sock.write_all(SSE_HEAD.as_bytes()).unwrap();
        for e in [E_HELLO, E_DONE] {
            std::thread::sleep(Duration::from_millis(40));
            written.push(monotonic_ns());
            sock.write_all(&chunk(e)).unwrap();
        }
        sock.write_all(LAST_CHUNK.as_bytes()).unwrap();
        written
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (out, events, late_ms) = rt.block_on(async {
        let (sink, mut rx) = event_channel(16);
        let ep = Arc::new(Endpoint::parse(0, &format!("http://{addr}")).unwrap());
        let mut worker = Worker::new(ep, quick_timeouts(), None, sink).unwrap();
        let request = tokio::spawn(async move {
            worker
                .execute(
                    &prepared(Api::Chat, 0, "{\"x\":1}"),
                    monotonic_ns(),
                    &Cancel::new(),
                )
                .await
                .unwrap()
        });
        // Hog the only runtime thread in 25 ms spells, so reads happen late.
        let mut events = Vec::new();
        let mut late_ms = Vec::new();
        while !request.is_finished() {
            std::thread::sleep(Duration::from_millis(25));
            tokio::task::yield_now().await;
            while let Some(e) = rx.try_recv() {
                late_ms.push((monotonic_ns() - e.t_ns) / 1_000_000);
                events.push(e);
            }
        }
        let out = request.await.unwrap();
        while let Some(e) = rx.try_recv() {
            late_ms.push((monotonic_ns() - e.t_ns) / 1_000_000);
            events.push(e);
        }
        (out, events, late_ms)
    });
    let written = server.join().unwrap();
    assert_eq!(out.outcome, Outcome::Ok, "{out:?}");
    assert_ordered(&out, &events);
    assert_eq!(events.len(), 2, "{events:?}");
    for (e, w) in events.iter().zip(&written) {
        let lag_us = (e.t_ns - w) / 1000;
        assert!(
            (0..3_000).contains(&lag_us),
            "event {} stamped {lag_us} µs after its write (reads were up to {late_ms:?} ms late)",
            e.seq
        );
    }
    assert!(
        late_ms.iter().any(|&l| l >= 5),
        "the runtime was meant to read late: {late_ms:?} ms"
    );
}

/// The write system calls a thread of this process has made so far (`syscw` of its
/// `/proc` io file: `write`, `writev` and the like, not socket sends).
fn thread_write_calls(tid: libc::pid_t) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/self/task/{tid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The pacer's tick must not wake the runtime's own thread again: tokio's timer driver writes
/// its eventfd when a timer is armed earlier than every other it holds, which a single
/// re-armed interval always is (one write and one wasted park per tick). On the recorder's
/// runtime (one worker), a second of ticking with a socket in the set makes (nearly) no
/// write calls on the worker.
#[test]
fn the_pacer_tick_does_not_wake_its_own_thread() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let _server = listener.accept().unwrap();
    let (writes, ticks) = rt.block_on(async {
        let pacer = Pacer::start().unwrap();
        let tid = tokio::spawn(async {
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        })
        .await
        .unwrap();
        let _registration = pacer.register(client.as_raw_fd()).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (w0, t0) = (thread_write_calls(tid), std::time::Instant::now());
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let writes = thread_write_calls(tid) - w0;
        (writes, t0.elapsed().as_nanos() / pacer::PERIOD.as_nanos())
    });
    // The fault this catches is one write per tick (about `ticks` writes); a loaded machine
    // adds some from elsewhere (69 in 1,000 periods seen with two builds beside it), so the
    // bound is a quarter of the ticks, not a twentieth.
    assert!(
        writes * 4 < ticks as u64,
        "{writes} write calls on the runtime's thread in {ticks} pacer periods"
    );
}
