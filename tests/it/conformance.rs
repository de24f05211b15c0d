//! The wire parsers against the ecosystem's own test suites: every vector of
//! `../shared/conformance/` (SSE framing from web-platform-tests and seven client libraries,
//! real OpenAI-format streams recorded by openai-python, openai-node, vercel/ai and codex,
//! Prometheus text 0.0.4 and OpenMetrics 1.0 exposition cases), read in place, never copied
//! into the project.
//!
//! The folder is found at `ANVIL_CONFORMANCE_DIR`, else beside the clone
//! (`../shared/conformance`); where it is missing each test is skipped and named in the
//! test command's closing list (`ANVIL_REQUIRE_CONFORMANCE=1`, set by `.ci/run`, makes that
//! a failure). Where anvil deliberately reads a case differently from the suite, the
//! difference is stated case by case in the test's list of known differences, and a listed
//! difference that no longer occurs fails the test as well.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::common::{Recording, Sim, small_manifest, sql_rows};
use super::misbehaving::{close_gently, is_measured, read_request};
use super::skip;

/// The conformance folder, or `None` after recording the skip of `test`.
fn folder(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("ANVIL_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance"));
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    skip::skipped(
        test,
        &skip::CONFORMANCE,
        &format!("{} does not exist", dir.display()),
    );
    None
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn b64(v: &Value) -> Vec<u8> {
    STANDARD.decode(v.as_str().unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------
// SSE framing

/// Frame `parts` (the body split where a suite splits it) with the capture's framer: each
/// event's (type, data), the spec's default type `message` as `None`.
fn frame(parts: &[Vec<u8>]) -> Vec<(Option<String>, String)> {
    let mut framer = anvil::capture::sse::Framer::new();
    let mut out = Vec::new();
    for part in parts {
        framer.push(part);
        while let Some(event) = framer.next_event::<std::convert::Infallible>() {
            let event = event.unwrap();
            out.push((
                event.event.map(String::from),
                String::from_utf8_lossy(&event.data).into_owned(),
            ));
        }
    }
    out
}

/// Every SSE vector, whole, in the suite's own chunks and byte by byte, dispatches exactly
/// the events the WHATWG algorithm does (type and data; anvil keeps neither `id` nor
/// `retry`, which no OpenAI-compatible server uses for a completion stream).
#[test]
fn sse_framing_agrees_with_whatwg_on_every_vector() {
    let Some(dir) = folder("conformance::sse_framing_agrees_with_whatwg_on_every_vector") else {
        return;
    };
    let cases = jsonl(&dir.join("sse/cases.jsonl"));
    assert!(cases.len() >= 118, "{} SSE cases", cases.len());
    let mut wrong = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let body = b64(&case["body_b64"]);
        let expected: Vec<(Option<String>, String)> = case["expected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                // The event type buffer: unset, empty and `message` all dispatch `message`.
                let ty = e["event"]
                    .as_str()
                    .filter(|t| !t.is_empty() && *t != "message");
                (
                    ty.map(str::to_owned),
                    e["data"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let mut splits = vec![("whole", vec![body.clone()])];
        if let Some(chunks) = case["chunks_b64"].as_array() {
            splits.push(("suite's chunks", chunks.iter().map(b64).collect()));
        }
        splits.push(("byte by byte", body.iter().map(|b| vec![*b]).collect()));
        for (how, parts) in splits {
            let got = frame(&parts);
            if got != expected {
                wrong.push(format!(
                    "{name} ({how}): got {got:?}, expected {expected:?}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} SSE vectors differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// OpenAI-format streams, recorded black-box by anvil-capture

/// A loopback server in front of `sim` that answers each measured request (64-token
/// ceiling, streamed) with the next body of `bodies`, as an HTTP/1.1 response with its length
/// that closes its connection; everything else (model list, calibration, the connection check) goes to
/// the simulator.
fn replay(sim: &Sim, bodies: Vec<Vec<u8>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = sim.ports[0];
    let queue = Arc::new(Mutex::new(VecDeque::from(bodies)));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let queue = queue.clone();
            std::thread::spawn(move || answer(client, upstream, &queue));
        }
    });
    port
}

fn answer(mut client: std::net::TcpStream, upstream: u16, queue: &Mutex<VecDeque<Vec<u8>>>) {
    let Some((head, body)) = read_request(&mut client) else {
        return;
    };
    if is_measured(&body) {
        let body = queue.lock().unwrap().pop_front().unwrap_or_default();
        let _ = client.write_all(
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len()).as_bytes(),
        );
        let _ = client.write_all(&body);
        let _ = client.flush();
        close_gently(&mut client);
        return;
    }
    let Ok(mut server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    let mut answer = Vec::new();
    if server.write_all(head.as_bytes()).is_ok()
        && server.write_all(b"\r\n\r\n").is_ok()
        && server.write_all(&body).is_ok()
    {
        let _ = std::io::Read::read_to_end(&mut server, &mut answer);
    }
    let _ = client.write_all(&answer);
    close_gently(&mut client);
}

/// What anvil recorded for one measured request, as the views read it.
#[derive(Debug, Default, Clone, PartialEq)]
struct Recorded {
    outcome: String,
    content: String,
    reasoning: String,
    finish_reason: Option<String>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    tool_calls: Option<Value>,
    parse_errors: i64,
}

/// Record one request per body with `--api api` at concurrency 1 (so the k-th measured
/// request gets the k-th body); the rows in request order.
fn record(api: &str, bodies: Vec<Vec<u8>>) -> Vec<Recorded> {
    let n = bodies.len();
    let sim = Sim::start(&["--seed", "5"]);
    let port = replay(&sim, bodies);
    let out = tempfile::tempdir().unwrap().keep();
    let manifest = small_manifest(&out, |_| {});
    let url = format!("http://127.0.0.1:{port}");
    let o = Recording::cell(&manifest, &out, 1, n as u32)
        .args(&["--api", api])
        .arm("replay")
        .endpoint(&url)
        .args(&["--timeout-first-byte", "5", "--timeout-idle", "2"])
        .run();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "anvil-capture --api {api} failed: {stderr}"
    );
    let dir = PathBuf::from(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .expect("artifact path"),
    );
    let rows = sql_rows(
        &dir,
        "SELECT t.request_index, t.outcome, t.content, t.finish_reason, \
                t.usage_prompt_tokens, t.usage_completion_tokens, t.parse_errors, \
                coalesce(e.reasoning, '') AS reasoning, e.calls \
         FROM request_timing t \
         LEFT JOIN (SELECT request_index, ordered_concat(reasoning_delta, seq) AS reasoning, \
                           tool_calls(array_agg(tool_call_delta ORDER BY seq)) AS calls \
                    FROM events GROUP BY request_index) e \
           ON e.request_index = t.request_index \
         WHERE t.kind = 'measured' ORDER BY t.t_sent_ns",
    );
    assert_eq!(rows.len(), n, "{rows:?}");
    rows.iter()
        .map(|r| Recorded {
            outcome: r["outcome"].as_str().unwrap().to_owned(),
            content: r["content"].as_str().unwrap_or("").to_owned(),
            reasoning: r["reasoning"].as_str().unwrap_or("").to_owned(),
            finish_reason: r["finish_reason"].as_str().map(str::to_owned),
            prompt_tokens: r["usage_prompt_tokens"].as_i64(),
            completion_tokens: r["usage_completion_tokens"].as_i64(),
            tool_calls: r["calls"]
                .as_str()
                .map(|s| serde_json::from_str(s).unwrap_or(Value::String(s.to_owned()))),
            parse_errors: r["parse_errors"].as_i64().unwrap(),
        })
        .collect()
}

/// What the suite's index says anvil should record for one stream.
fn expected_of(record: &Value) -> Recorded {
    let e = &record["expected"];
    let usage = &e["usage"];
    let kind = e["kind"].as_str().unwrap();
    if kind == "responses" {
        let r = &e["responses"];
        let status = r["final_status"].as_str();
        // The last response.completed's usage, where the stream has one.
        let last = r["usages"]
            .as_array()
            .and_then(|u| u.last())
            .map(|u| u["usage"].clone())
            .unwrap_or(Value::Null);
        return Recorded {
            outcome: match status {
                Some("completed") => "ok",
                Some("incomplete") => "truncated",
                Some(_) => "stream_error",
                None => "disconnected",
            }
            .to_owned(),
            content: r["output_text"].as_str().unwrap_or("").to_owned(),
            reasoning: r["reasoning_text"]
                .as_str()
                .or(r["reasoning_summary_text"].as_str())
                .unwrap_or("")
                .to_owned(),
            finish_reason: status.map(str::to_owned),
            prompt_tokens: last["input_tokens"].as_i64(),
            completion_tokens: last["output_tokens"].as_i64(),
            tool_calls: None,
            parse_errors: 0,
        };
    }
    let choice = &e["choices"]["0"];
    let calls = choice["tool_calls"].as_array().map(|calls| {
        Value::Array(
            calls
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "id": c["id"], "name": c["name"], "arguments": c["arguments"],
                    })
                })
                .collect(),
        )
    });
    let finish = choice["finish_reason"].as_str();
    Recorded {
        // A reply cut by its token ceiling (`length`) is a complete stream: `ok`.
        outcome: "ok".to_owned(),
        content: choice["content"].as_str().unwrap_or("").to_owned(),
        reasoning: choice["reasoning_content"]
            .as_str()
            .or(choice["reasoning"].as_str())
            .unwrap_or("")
            .to_owned(),
        finish_reason: finish.map(str::to_owned),
        prompt_tokens: usage["prompt_tokens"].as_i64(),
        completion_tokens: usage["completion_tokens"].as_i64(),
        tool_calls: calls,
        parse_errors: 0,
    }
}

/// The assembled tool calls as `{id, name, arguments}` (what the suites compare).
fn calls_of(v: &Option<Value>) -> Option<Value> {
    let calls = v.as_ref()?.as_array()?;
    if calls.is_empty() {
        return None;
    }
    Some(Value::Array(
        calls
            .iter()
            .map(|c| {
                serde_json::json!({
                    "id": c["id"], "name": c["name"], "arguments": c["arguments"],
                })
            })
            .collect(),
    ))
}

/// Where anvil records a stream differently from what the suite computed, and why: (`file:
/// field`, reason). Each must occur, so a fixed one is removed from here.
const OPENAI_DIFFERENCES: &[(&str, &str)] = &[
    (
        "openai-python__test_parse_pydantic_model_multiple_choices.sse: parse_errors",
        "n = 3: anvil asks for one choice and records choice 0; each chunk of choices 1 and 2 \
         is flagged (parse_error, which fires the parser-corruption stop rule) instead of \
         mixing three replies into one text",
    ),
    (
        "vercel-ai__responses-reasoning-encrypted.sse: usage",
        "the recording concatenates the four responses of a multi-step client into one body, \
         which no server sends for one request; anvil reports the stream's largest usage count \
         (a server sending usage on every chunk sends growing counts), the suite the last one",
    ),
    (
        "vercel-ai__responses-parallel-tool-call.sse: parse_errors",
        "its response.created and response.completed payloads are not valid JSON (cut short \
         in the recording): anvil flags both events",
    ),
    (
        "vercel-ai__responses-parallel-tool-call.sse: outcome",
        "the suite reads no final status from the unparseable response.completed; anvil ends \
         the stream on that event's type (ok) and flags the event as a parse error",
    ),
];

/// Every recorded stream of the suites, served to `anvil-capture` on loopback as the
/// server's answer: outcome, content, reasoning, finish reason, usage, assembled tool calls
/// and parse errors agree with what the stream carries, or the difference is listed in
/// [`OPENAI_DIFFERENCES`].
#[test]
fn openai_streams_are_recorded_as_the_suites_read_them() {
    let Some(dir) = folder("conformance::openai_streams_are_recorded_as_the_suites_read_them")
    else {
        return;
    };
    let index = jsonl(&dir.join("openai/index.jsonl"));
    assert!(index.len() >= 36, "{} OpenAI streams", index.len());
    let mut by_api: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for record in &index {
        let api = match record["expected"]["kind"].as_str().unwrap() {
            "chat.completions" => "chat",
            "completions" => "completions",
            "responses" => "responses",
            other => panic!("unknown kind {other}"),
        };
        by_api.entry(api).or_default().push(record);
    }
    let mut found: Vec<(String, String)> = Vec::new();
    let mut compared = 0;
    for (api, records) in &by_api {
        let bodies = records
            .iter()
            .map(|r| std::fs::read(dir.join("openai").join(r["file"].as_str().unwrap())).unwrap())
            .collect();
        let got = record(api, bodies);
        for (record, got) in records.iter().zip(got) {
            let file = record["file"].as_str().unwrap().to_owned();
            let want = expected_of(record);
            compared += 1;
            let mut differ = |field: &'static str, g: String, w: String| {
                if g != w {
                    found.push((format!("{file}: {field}"), format!("got {g}, expected {w}")));
                }
            };
            differ("outcome", got.outcome.clone(), want.outcome.clone());
            differ(
                "content",
                format!("{:?}", got.content),
                format!("{:?}", want.content),
            );
            differ(
                "reasoning",
                format!("{:?}", got.reasoning),
                format!("{:?}", want.reasoning),
            );
            differ(
                "finish_reason",
                format!("{:?}", got.finish_reason),
                format!("{:?}", want.finish_reason),
            );
            differ(
                "usage",
                format!("{:?}/{:?}", got.prompt_tokens, got.completion_tokens),
                format!("{:?}/{:?}", want.prompt_tokens, want.completion_tokens),
            );
            if *api != "responses" {
                differ(
                    "tool_calls",
                    format!("{:?}", calls_of(&got.tool_calls)),
                    format!("{:?}", want.tool_calls),
                );
            }
            differ(
                "parse_errors",
                got.parse_errors.to_string(),
                want.parse_errors.to_string(),
            );
        }
    }
    assert_eq!(compared, index.len());
    check_differences("OpenAI streams", &found, OPENAI_DIFFERENCES);
}

// ---------------------------------------------------------------------------------------
// Prometheus text 0.0.4 and OpenMetrics 1.0

/// A sample as the suites write one: name, labels, value (NaN equal to NaN) and timestamp.
#[derive(Debug, Clone, PartialEq)]
struct Suite {
    name: String,
    labels: BTreeMap<String, String>,
    value: String,
    timestamp: Option<String>,
}

fn value_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        format!("{v:?}")
    }
}

/// The suite's expected samples; `ts_key` is `timestamp_ms` or `timestamp_s`.
fn suite_samples(expected: &Value, ts_key: &str) -> Vec<Suite> {
    expected
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Suite {
            name: s["name"].as_str().unwrap().to_owned(),
            labels: s["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect(),
            value: match &s["value"] {
                Value::String(v) => v.clone(),
                v => value_text(v.as_f64().unwrap()),
            },
            timestamp: match &s[ts_key] {
                Value::Null => None,
                Value::String(t) => Some(value_text(t.parse().unwrap())),
                t => Some(value_text(t.as_f64().unwrap())),
            },
        })
        .collect()
}

/// What anvil's reader makes of `text`, in the suites' form, and its count of bad lines.
fn anvil_samples(body: &[u8]) -> (Vec<Suite>, usize) {
    let e = anvil::capture::exposition::read_bytes(body);
    let samples = e
        .samples
        .into_iter()
        .map(|s| Suite {
            name: s.name,
            labels: s.labels.into_iter().collect(),
            value: value_text(s.value),
            timestamp: s.timestamp.map(value_text),
        })
        .collect();
    (samples, e.bad_lines)
}

/// A sample not invented: its name and each label name and value occur in the text as
/// written (escaped the way the text escapes them).
fn occurs_in(sample: &Suite, text: &str) -> bool {
    let escaped = |s: &str| {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let written = |s: &str| text.contains(s) || text.contains(&escaped(s));
    written(&sample.name)
        && sample
            .labels
            .iter()
            .all(|(k, v)| written(k) && (v.is_empty() || written(v) || text.contains(v.as_str())))
}

/// The case's bytes, and its text for the invention check (invalid bytes replaced).
fn case_body(case: &Value) -> (Vec<u8>, String) {
    match case["text"].as_str() {
        Some(t) => (t.as_bytes().to_vec(), t.to_owned()),
        None => {
            let bytes = b64(&case["text_b64"]);
            let text = String::from_utf8_lossy(&bytes).into_owned();
            (bytes, text)
        }
    }
}

/// One exposition case read by anvil: its samples and bad-line count. A case that must
/// parse (`must_parse`) is compared exactly with the suite's `expected` (timestamps under
/// `ts_key`); a case that must fail is checked for invented series. What is wrong goes to
/// `wrong` as (case, how).
fn read_case(
    case: &Value,
    must_parse: bool,
    ts_key: &str,
    wrong: &mut Vec<(String, String)>,
) -> (Vec<Suite>, usize) {
    let name = case["name"].as_str().unwrap().to_owned();
    let (body, text) = case_body(case);
    let (got, bad) = anvil_samples(&body);
    if must_parse {
        let want = suite_samples(&case["expected"], ts_key);
        if got != want || bad != 0 {
            wrong.push((
                name,
                format!("{bad} bad lines; got {got:?}\nexpected {want:?}"),
            ));
        }
    } else if let Some(invented) = got.iter().find(|s| !occurs_in(s, &text)) {
        wrong.push((name, format!("invented {invented:?}")));
    }
    (got, bad)
}

/// Where anvil reads a Prometheus case differently from the suite, and why (case name,
/// reason). Each must occur.
const PROMETHEUS_DIFFERENCES: &[(&str, &str)] = &[];

/// Every case of the Prometheus text suite (promparse, expfmt, client_python, the format's
/// documentation and the vLLM, SGLang and llama.cpp samples): a case that must parse is read
/// with exactly the suite's samples and no bad line; a case that must fail invents no series,
/// and where a line-by-line reader finds the fault anvil counts the bad line, where only a
/// stricter, whole-document parser rejects it (a `# TYPE` after its samples, a second `# HELP`,
/// `le="bla"`) anvil keeps what a line-by-line reader keeps.
#[test]
fn prometheus_text_is_read_as_the_suites_read_it() {
    let test = "conformance::prometheus_text_is_read_as_the_suites_read_it";
    let Some((dir, cases)) = suite(test, "prometheus/cases.jsonl", 148) else {
        return;
    };
    let mut wrong: Vec<(String, String)> = Vec::new();
    let (mut good, mut must_fail, mut flagged) = (0, 0, 0);
    for case in &cases {
        let name = case["name"].as_str().unwrap().to_owned();
        let must_parse = case["error"] == Value::Bool(false);
        let (got, bad) = read_case(case, must_parse, "timestamp_ms", &mut wrong);
        if must_parse {
            good += 1;
            continue;
        }
        must_fail += 1;
        if case["lenient_reader"] == "ok" {
            let want = suite_samples(&case["lenient_expected"], "timestamp_ms");
            if got != want {
                wrong.push((name, format!("got {got:?}\nlenient reader {want:?}")));
            }
        } else if bad == 0 {
            wrong.push((name, format!("no bad line counted; read {got:?}")));
        } else {
            flagged += 1;
        }
    }
    check_differences("Prometheus", &wrong, PROMETHEUS_DIFFERENCES);
    eprintln!(
        "Prometheus text: {good} cases that must parse read exactly; {flagged} of {must_fail} \
         that must fail have their bad line counted, the rest are only rejected by whole-document checks"
    );

    // The real-world expositions are cases of the suite as well; each reads without a bad line.
    for entry in std::fs::read_dir(dir.join("prometheus/realworld")).unwrap() {
        let path = entry.unwrap().path();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let text = doc["text"].as_str().unwrap();
        assert!(
            cases.iter().any(|c| c["text"].as_str() == Some(text)),
            "{} is not among the suite's cases",
            path.display()
        );
        let e = anvil::capture::exposition::read(text);
        assert_eq!(e.bad_lines, 0, "{}: {:?}", path.display(), e.first_error);
        assert!(!e.samples.is_empty(), "{}", path.display());
    }
}

/// Where anvil reads an OpenMetrics case differently from the suite, and why.
const OPENMETRICS_DIFFERENCES: &[(&str, &str)] = &[];

/// Every case of the official OpenMetrics 1.0 parser suite: the 44 that must parse are read
/// with client_python's samples (timestamps in seconds; exemplars are not samples); the 167
/// that must fail invent no series (most are rules about a whole family, such as a counter
/// without `_total` or buckets out of order, which a recorder does not enforce).
#[test]
fn openmetrics_is_read_as_the_suite_reads_it() {
    let test = "conformance::openmetrics_is_read_as_the_suite_reads_it";
    let Some((_, cases)) = suite(test, "prometheus/openmetrics_cases.jsonl", 211) else {
        return;
    };
    let mut wrong: Vec<(String, String)> = Vec::new();
    let (mut good, mut must_fail, mut flagged) = (0, 0, 0);
    for case in &cases {
        let must_parse = case["should_parse"] == Value::Bool(true);
        let (_, bad) = read_case(case, must_parse, "timestamp_s", &mut wrong);
        if must_parse {
            good += 1;
        } else {
            must_fail += 1;
            flagged += usize::from(bad > 0);
        }
    }
    check_differences("OpenMetrics", &wrong, OPENMETRICS_DIFFERENCES);
    eprintln!(
        "OpenMetrics: {good} cases that must parse read exactly; {must_fail} that must fail \
         invent nothing ({flagged} with a bad line counted)"
    );
}

/// The vectors' folder and the cases of its `file` (at least `at_least` of them); `None`,
/// said by `test`, where the vectors are not here.
fn suite(test: &str, file: &str, at_least: usize) -> Option<(PathBuf, Vec<Value>)> {
    let dir = folder(test)?;
    let cases = jsonl(&dir.join(file));
    assert!(cases.len() >= at_least, "{file}: {} cases", cases.len());
    Some((dir, cases))
}

/// `wrong` (case, how) holds exactly the cases `stated` lists.
fn check_differences(suite: &str, wrong: &[(String, String)], stated: &[(&str, &str)]) {
    let unexplained: Vec<String> = wrong
        .iter()
        .filter(|(name, _)| !stated.iter().any(|(s, _)| s == name))
        .map(|(name, how)| format!("{name}: {how}"))
        .collect();
    let gone: Vec<&str> = stated
        .iter()
        .filter(|(s, _)| !wrong.iter().any(|(name, _)| name == s))
        .map(|(s, _)| *s)
        .collect();
    assert!(
        unexplained.is_empty() && gone.is_empty(),
        "{suite}: {} cases read differently and not stated:\n{}\nstated differences that no longer occur: {gone:?}",
        unexplained.len(),
        unexplained.join("\n")
    );
}
