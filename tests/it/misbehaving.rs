//! Misbehaving servers on loopback: a proxy in front of a real `anvil-sim` passes every
//! request through (model list, calibration, the connection check, /metrics) except the
//! measured ones (the cell's 64-token ceiling), which it answers itself, badly: silence, a
//! JSON body where a stream belongs, broken chunked framing, an error event mid-stream, the
//! caller's bearer token echoed back, invalid UTF-8 split across two writes, a Responses
//! stream that ends `completed` far short of the words asked (vLLM's abort). Each case
//! asserts the outcome class the recorder gives every measured request, and that nothing
//! recorded holds the token.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::common::{Recording, Sim, small_manifest, sql_rows};

/// The API key the captures send (through `--api-key-env`).
const KEY: &str = "sk-anvil-test-0123456789abcdef";

/// How the proxy answers a measured request: the raw bytes written, with a pause between
/// pieces (`None`: read until the client gives up, never answering).
type Script = fn(&str) -> Option<Vec<Vec<u8>>>;

/// Start the proxy for `sim` answering measured requests with `script` (given the request's
/// `Authorization` header value); returns its port. It lives as long as the test process.
fn proxy(sim: &Sim, script: Script) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = sim.ports[0];
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            std::thread::spawn(move || serve(client, upstream, script));
        }
    });
    port
}

/// One request per connection: read it, answer or forward it, close.
fn serve(mut client: TcpStream, upstream: u16, script: Script) {
    let Some((head, body)) = read_request(&mut client) else {
        return;
    };
    if is_measured(&body) {
        let auth = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("authorization: ")
                    .or_else(|| l.strip_prefix("Authorization: "))
            })
            .unwrap_or("")
            .to_owned();
        match script(&auth) {
            Some(pieces) => {
                for piece in pieces {
                    if client.write_all(&piece).is_err() {
                        return;
                    }
                    let _ = client.flush();
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
            None => {
                // Silence: hold the connection until the client closes it.
                let mut sink = [0u8; 64];
                let _ = client.set_read_timeout(Some(Duration::from_secs(20)));
                while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
            }
        }
        close_gently(&mut client);
        return;
    }
    // Forward with `Connection: close`, relay the whole answer, close.
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    let forwarded = server
        .write_all(head.as_bytes())
        .and_then(|()| server.write_all(b"\r\n\r\n"))
        .and_then(|()| server.write_all(&body));
    if forwarded.is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer);
    let _ = client.write_all(&answer);
    close_gently(&mut client);
}

/// Half-close, then read until the client closes: closing with unread bytes would send a
/// reset, which can destroy the answer before the client has read it.
pub(super) fn close_gently(client: &mut TcpStream) {
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(Duration::from_secs(5)));
    let mut sink = [0u8; 256];
    while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
}

/// Whether a request body is one of the quick manifest's measured requests (streamed, with
/// its 64-token ceiling) rather than calibration, a probe or a metrics scrape.
pub(super) fn is_measured(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    text.contains("\"stream\":true")
        && (text.contains("\"max_tokens\":64") || text.contains("\"max_output_tokens\":64"))
}

/// The request head (without the blank line) and its `Content-Length` body.
pub(super) fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

fn sse_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec()
}

fn chunk(text: &str) -> Vec<u8> {
    format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n")
        .into_bytes()
}

/// Capture 4 measured requests at C1 through the proxy on `port`, with `extra` arguments
/// (`--api responses`); the artifact folder and what the capture said on stderr.
fn capture(port: u16, out: &Path, extra: &[&str]) -> (PathBuf, String) {
    let manifest = small_manifest(out, |_| {});
    let url = format!("http://127.0.0.1:{port}");
    let o = Recording::cell(&manifest, out, 1, 4)
        .arm("K4")
        .endpoint(&url)
        .args(&["--api-key-env", "ANVIL_TEST_KEY"])
        .args(&["--timeout-first-byte", "2", "--timeout-idle", "2"])
        .args(extra)
        .env("ANVIL_TEST_KEY", KEY)
        .run();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains(KEY) && !stdout.contains(KEY),
        "the key was printed: {stderr}"
    );
    assert!(o.status.success(), "anvil-capture failed: {stderr}");
    (
        PathBuf::from(stdout.lines().last().expect("artifact path on stdout")),
        stderr.into_owned(),
    )
}

/// The measured requests' outcomes and errors, in request order.
fn outcomes(dir: &Path) -> Vec<(String, String)> {
    sql_rows(
        dir,
        "SELECT outcome, coalesce(error, '') AS error FROM requests \
         WHERE kind = 'measured' ORDER BY request_index",
    )
    .iter()
    .map(|r| {
        (
            r["outcome"].as_str().unwrap().to_owned(),
            r["error"].as_str().unwrap().to_owned(),
        )
    })
    .collect()
}

/// Nothing in the artifact's files holds the key.
fn assert_key_absent(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
                "{} holds the API key",
                path.display()
            );
        }
    }
}

fn check(script: Script, expect: impl Fn(&str, &str) -> bool, what: &str) -> PathBuf {
    check_with(script, &[], expect, what).0
}

/// [`check`] with more capture arguments; the artifact folder and the capture's stderr.
fn check_with(
    script: Script,
    extra: &[&str],
    expect: impl Fn(&str, &str) -> bool,
    what: &str,
) -> (PathBuf, String) {
    let sim = Sim::start(&["--seed", "3"]);
    let port = proxy(&sim, script);
    let tmp = tempfile::tempdir().unwrap().keep();
    let (dir, stderr) = capture(port, &tmp, extra);
    let found = outcomes(&dir);
    assert_eq!(found.len(), 4, "{found:?}");
    for (outcome, error) in &found {
        assert!(expect(outcome, error), "{what}: got {outcome} ({error})");
    }
    assert_key_absent(&dir);
    (dir, stderr)
}

#[test]
fn a_silent_server_times_out_before_the_first_byte() {
    check(
        |_| None,
        |o, e| o == "timeout_first_byte" && e.contains("before the deadline"),
        "silence",
    );
}

#[test]
fn a_json_body_where_a_stream_belongs_is_a_protocol_error() {
    check(
        |_| {
            let body = r#"{"choices":[{"message":{"content":"hello"}}]}"#;
            Some(vec![format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()])
        },
        |o, e| o == "protocol_error" && e.contains("expected an event stream"),
        "non-SSE 200",
    );
}

#[test]
fn broken_chunked_framing_fails_the_request_with_its_reason() {
    check(
        |_| {
            Some(vec![
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                    .to_vec(),
                b"zz\r\nnot a chunk size\r\n".to_vec(),
            ])
        },
        |o, e| o != "ok" && !e.is_empty(),
        "chunked garbage",
    );
}

#[test]
fn an_error_event_mid_stream_is_a_stream_error() {
    check(
        |_| {
            Some(vec![
                sse_head(),
                chunk("partial"),
                b"data: {\"error\": {\"message\": \"CUDA out of memory\", \"code\": 500}}\n\n"
                    .to_vec(),
            ])
        },
        |o, e| o == "stream_error" && e.contains("CUDA out of memory"),
        "mid-stream error",
    );
}

/// vLLM ends a Responses stream it aborted with status `completed` and no
/// `incomplete_details`: the request stays `ok` (nothing says otherwise), but a reply with
/// fewer output tokens than the words asked is flagged (`request_metrics.short_completion`)
/// and the capture warns.
#[test]
fn a_responses_stream_completed_short_of_the_words_asked_is_flagged() {
    let (dir, stderr) = check_with(
        |_| {
            Some(vec![
                sse_head(),
                b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n".to_vec(),
                b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"cut short\"}\n\n".to_vec(),
                b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":512,\"output_tokens\":3,\"total_tokens\":515}}}\n\n".to_vec(),
            ])
        },
        &["--api", "responses"],
        |o, _| o == "ok",
        "aborted Responses stream",
    );
    assert!(
        stderr.contains(
            "warning: 4 measured Responses requests ended `completed` with fewer output tokens \
             than the 24 words asked (e.g. request 0: 3 tokens)"
        ),
        "{stderr}"
    );
    let rows = sql_rows(
        &dir,
        "SELECT finish_reason, completion_tokens, short_completion FROM request_metrics",
    );
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        assert_eq!(r["finish_reason"], "completed", "{r}");
        assert_eq!(r["short_completion"], true, "{r}");
    }
}

#[test]
fn a_server_echoing_the_bearer_token_leaves_no_trace_of_it() {
    // In a 401 body...
    check(
        |auth| {
            let body = format!(r#"{{"error": "invalid credentials: {auth}"}}"#);
            Some(vec![format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()])
        },
        |o, e| o == "http_error" && e.contains("<redacted>"),
        "401 echo",
    );
    // ...and in the stream itself.
    let dir = check(
        |auth| {
            Some(vec![
                sse_head(),
                chunk(&format!("you sent {auth}")),
                b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":512,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n".to_vec(),
            ])
        },
        |o, _| o == "ok",
        "stream echo",
    );
    let rows = sql_rows(&dir, "SELECT data FROM events WHERE data LIKE '%you sent%'");
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(
            r["data"].as_str().unwrap().contains("Bearer <redacted>"),
            "{r}"
        );
    }
}

#[test]
fn invalid_utf8_split_across_writes_is_kept_and_flagged() {
    let dir = check(
        |_| {
            Some(vec![
                sse_head(),
                chunk("fine"),
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xe2".to_vec(),
                b"\x28\xa1 bytes\"},\"finish_reason\":null}]}\n\n".to_vec(),
                b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":512,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n".to_vec(),
            ])
        },
        |o, _| o == "ok",
        "invalid UTF-8",
    );
    let rows = sql_rows(
        &dir,
        "SELECT request_index, data, parse_error FROM events WHERE parse_error IS NOT NULL \
         ORDER BY request_index",
    );
    assert_eq!(rows.len(), 4, "one flagged event per request: {rows:?}");
    for r in &rows {
        assert!(r["parse_error"].as_str().unwrap().contains("UTF-8"), "{r}");
        assert!(r["data"].as_str().unwrap().contains('\u{fffd}'), "{r}");
    }
}
