//! `anvil-sim` end to end: the real binary on loopback, real HTTP, one process per test.

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{SIM as BIN, Sim};

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

struct Resp {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: String,
}

fn post(url: &str, body: &Value) -> Resp {
    post_with_id(url, body, None)
}

fn post_with_id(url: &str, body: &Value, id: Option<&str>) -> Resp {
    let mut req = agent().post(url).header("content-type", "application/json");
    if let Some(id) = id {
        req = req.header("x-request-id", id);
    }
    let r = req.send(body.to_string()).unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.into_body().read_to_string().unwrap();
    Resp {
        status,
        headers,
        body,
    }
}

pub(super) fn get(url: &str) -> String {
    agent()
        .get(url)
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap()
}

/// One SSE event as the client saw it.
#[derive(Debug, Clone)]
pub(super) struct Sse {
    event: Option<String>,
    data: String,
    /// CLOCK_MONOTONIC ns when the client had parsed it.
    t_ns: i64,
}

/// Stream a POST and collect its events; `Err` carries what arrived before a broken stream.
pub(super) fn stream(url: &str, body: &Value, id: Option<&str>) -> Result<Vec<Sse>, Vec<Sse>> {
    let mut req = agent().post(url).header("content-type", "application/json");
    if let Some(id) = id {
        req = req.header("x-request-id", id);
    }
    let r = req.send(body.to_string()).unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut rd = BufReader::new(r.into_body().into_reader());
    let mut out = Vec::new();
    let (mut event, mut data) = (None, None::<String>);
    let mut line = String::new();
    loop {
        line.clear();
        match rd.read_line(&mut line) {
            Ok(0) => return Ok(out),
            Ok(_) => {}
            Err(_) => return Err(out),
        }
        let l = line.trim_end_matches(['\n', '\r']);
        if l.is_empty() {
            if let Some(d) = data.take() {
                out.push(Sse {
                    event: event.take(),
                    data: d,
                    t_ns: anvil::clock::monotonic_ns(),
                });
            }
        } else if let Some(e) = l.strip_prefix("event: ") {
            event = Some(e.to_string());
        } else if let Some(d) = l.strip_prefix("data: ") {
            data = Some(d.to_string());
        }
    }
}

pub(super) fn chat(content: &str, extra: Value) -> Value {
    let mut v = json!({"model": "anvil-sim", "messages": [{"role": "user", "content": content}],
                       "stream": true, "stream_options": {"include_usage": true}});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

pub(super) fn parsed(events: &[Sse]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| serde_json::from_str(&e.data).unwrap_or_else(|err| panic!("{err}: {}", e.data)))
        .collect()
}

fn content_of(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

pub(super) fn usage_of(chunks: &[Value]) -> Value {
    chunks
        .iter()
        .find(|c| c.get("usage").is_some_and(|u| !u.is_null()))
        .map(|c| c["usage"].clone())
        .unwrap_or(Value::Null)
}

pub(super) fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| {
            l.starts_with(name)
                && (l[name.len()..].starts_with('{') || l[name.len()..].starts_with(' '))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in metrics:\n{text}"))
}

const CANARY: &str = "ANV-0123456789ab";

#[test]
fn streaming_chat_has_role_content_usage_and_done() {
    let sim = Sim::start(&[]);
    let ev = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat(
            &format!("Marker {CANARY}. Write about 12 words."),
            json!({}),
        ),
        Some("run-7"),
    )
    .unwrap();
    assert_eq!(ev.last().unwrap().data, "[DONE]");
    let chunks = parsed(&ev);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let text = content_of(&chunks);
    assert!(text.starts_with(CANARY), "{text}");
    assert_eq!(
        text[CANARY.len()..].split_whitespace().count(),
        12,
        "{text}"
    );
    let usage = usage_of(&chunks);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(usage["completion_tokens"], 5 + 12);
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["prompt_tokens"].as_u64().unwrap() + 17)
    );
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, vec![&json!("stop")]);

    // The response echoes x-request-id.
    let r = post_with_id(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("hi", json!({"stream": false})),
        Some("abc-1"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.headers.get("x-request-id").unwrap(), "abc-1");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() > 0);
}

#[test]
fn max_tokens_cuts_with_finish_length_and_replies_are_seeded() {
    let sim = Sim::start(&["--seed", "42"]);
    let body = chat("Tell a story.", json!({"stream": false, "max_tokens": 7}));
    let a: Value =
        serde_json::from_str(&post(&format!("{}/v1/chat/completions", sim.url(0)), &body).body)
            .unwrap();
    let b: Value =
        serde_json::from_str(&post(&format!("{}/v1/chat/completions", sim.url(0)), &body).body)
            .unwrap();
    assert_eq!(a["choices"][0]["finish_reason"], "length");
    assert_eq!(a["usage"]["completion_tokens"], 7);
    assert_eq!(
        a["choices"][0]["message"]["content"],
        b["choices"][0]["message"]["content"]
    );
    drop(sim);
    let other = Sim::start(&["--seed", "43"]);
    let c: Value =
        serde_json::from_str(&post(&format!("{}/v1/chat/completions", other.url(0)), &body).body)
            .unwrap();
    assert_ne!(
        a["choices"][0]["message"]["content"],
        c["choices"][0]["message"]["content"]
    );
}

#[test]
fn speculative_k8_puts_at_least_two_tokens_per_chunk() {
    let sim = Sim::start(&["--spec-depth", "8", "--spec-accept", "0.7"]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let handles: Vec<_> = (0..5)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let (mut tokens, mut chunks) = (0u64, 0u64);
                for i in 0..10 {
                    let ev = stream(
                        &url,
                        &chat(&format!("req {t}-{i}: write about 220 words"), json!({})),
                        None,
                    )
                    .unwrap();
                    let c = parsed(&ev);
                    chunks += c
                        .iter()
                        .filter(|c| {
                            c["choices"][0]["delta"]["content"]
                                .as_str()
                                .is_some_and(|s| !s.is_empty())
                        })
                        .count() as u64;
                    let u = usage_of(&c)["completion_tokens"].as_u64().unwrap();
                    assert!(u >= 200);
                    tokens += u;
                }
                (tokens, chunks)
            })
        })
        .collect();
    let (tokens, chunks) = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let ratio = tokens as f64 / chunks as f64;
    assert!(
        ratio >= 2.0,
        "{tokens} tokens over {chunks} content chunks = {ratio}"
    );
    let m = get(&format!("{}/metrics", sim.url(0)));
    let drafts = metric(&m, "vllm:spec_decode_num_drafts_total");
    assert!(drafts > 0.0);
    assert_eq!(
        metric(&m, "vllm:spec_decode_num_draft_tokens_total"),
        drafts * 8.0
    );
    let accepted = metric(&m, "vllm:spec_decode_num_accepted_tokens_total");
    assert!(
        accepted > drafts,
        "mean acceptance length should exceed 1 at P=0.7"
    );
}

#[test]
fn tokenize_count_equals_usage_prompt_tokens() {
    let sim = Sim::start(&[]);
    let messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": format!("Hello, world! {CANARY} and some-more text 12345678")},
    ]);
    let t: Value = serde_json::from_str(
        &post(
            &format!("{}/tokenize", sim.url(0)),
            &json!({"model": "anvil-sim", "messages": messages}),
        )
        .body,
    )
    .unwrap();
    let count = t["count"].as_u64().unwrap();
    assert_eq!(t["tokens"].as_array().unwrap().len() as u64, count);
    assert!(t["max_model_len"].as_u64().unwrap() > count);
    let ev = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &json!({"messages": messages, "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 5}),
        None,
    )
    .unwrap();
    assert_eq!(
        usage_of(&parsed(&ev))["prompt_tokens"].as_u64(),
        Some(count)
    );
    let p: Value = serde_json::from_str(
        &post(
            &format!("{}/tokenize", sim.url(0)),
            &json!({"prompt": "abcdefgh ij"}),
        )
        .body,
    )
    .unwrap();
    assert_eq!(p["count"], 3);
}

#[test]
fn two_replicas_have_their_own_ports_and_metrics() {
    let sim = Sim::start(&["--replicas", "2"]);
    assert_eq!(sim.ports.len(), 2);
    assert_ne!(sim.ports[0], sim.ports[1]);
    let gen0 = |m: &str| metric(m, "vllm:generation_tokens_total");
    let before = (
        gen0(&get(&format!("{}/metrics", sim.url(0)))),
        gen0(&get(&format!("{}/metrics", sim.url(1)))),
    );
    stream(
        &format!("{}/v1/chat/completions", sim.url(1)),
        &chat("about 9 words", json!({})),
        None,
    )
    .unwrap();
    let after = (
        gen0(&get(&format!("{}/metrics", sim.url(0)))),
        gen0(&get(&format!("{}/metrics", sim.url(1)))),
    );
    assert_eq!(after.0, before.0);
    assert_eq!(after.1, before.1 + 9.0);
}

#[test]
fn truth_file_has_one_row_per_event_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truth.csv");
    let p = path.to_str().unwrap();
    // Realtime on: the path the benchmark and campaigns use.
    let sim = Sim::start_raw(&["--port", "0", "--profile", "fast", "--truth", p]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let mut seen = Vec::new();
    for i in 0..3 {
        let id = format!("run-{i}");
        let ev = stream(
            &url,
            &chat(&format!("{i} about 20 words"), json!({})),
            Some(&id),
        )
        .unwrap();
        seen.push((id, ev));
    }
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("lag: events"), "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("request_id,replica,seq,tokens,kind,t_deadline_ns,t_write_ns")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for (id, ev) in &seen {
        let read: Vec<_> = rows
            .iter()
            .filter(|r| r[0] == id && r[4] == "request_read")
            .collect();
        assert_eq!(read.len(), 1, "{id}");
        let t_read: i64 = read[0][6].parse().unwrap();
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r[0] == id && !r[2].is_empty())
            .collect();
        assert_eq!(mine.len(), ev.len(), "{id}: one row per SSE event");
        let mut prev = t_read;
        let mut tokens = 0;
        for (i, (r, e)) in mine.iter().zip(ev).enumerate() {
            assert_eq!(r[2], i.to_string());
            let (d, w): (i64, i64) = (r[5].parse().unwrap(), r[6].parse().unwrap());
            assert!(w >= prev, "write times are monotonic");
            assert!(w >= d, "never written before its deadline");
            assert!(e.t_ns >= w, "the client sees an event after it was written");
            prev = w;
            tokens += r[3].parse::<u64>().unwrap();
        }
        assert_eq!(mine[0][4], "role");
        assert_eq!(mine[mine.len() - 2][4], "usage");
        assert_eq!(mine[mine.len() - 1][4], "done");
        let usage = usage_of(&parsed(ev));
        assert_eq!(Some(tokens), usage["completion_tokens"].as_u64());
    }
}

#[test]
fn canary_echo_json_schema_and_tools() {
    let sim = Sim::start(&[]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "required": ["marker", "items", "score", "verdict", "detail"],
        "properties": {
            "marker": {"type": "string"},
            "items": {"type": "array", "minItems": 3, "items": {"type": "integer", "minimum": 1, "maximum": 5}},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "verdict": {"enum": ["pass", "fail"]},
            "ok": {"type": "boolean"},
            "detail": {"type": "object", "required": ["why"], "properties": {"why": {"type": "string"}}}
        }
    });
    let ev = stream(
        &url,
        &chat(
            &format!("{CANARY} answer in JSON"),
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
        ),
        None,
    )
    .unwrap();
    let chunks = parsed(&ev);
    let text = content_of(&chunks);
    let content_chunks = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count();
    assert!(content_chunks > 5, "streamed in pieces");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(jsonschema::is_valid(&schema, &v), "{v}");
    assert_eq!(v["marker"], CANARY);

    let params = json!({"type": "object", "required": ["city", "days"],
                        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}});
    let tools =
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": params}}]);
    let ev = stream(
        &url,
        &chat(&format!("{CANARY} weather?"), json!({"tools": tools})),
        None,
    )
    .unwrap();
    let chunks = parsed(&ev);
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert!(calls.len() > 3, "arguments split over several chunks");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(calls[0]["type"], "function");
    assert!(calls[0]["id"].as_str().is_some_and(|s| !s.is_empty()));
    let args: String = calls
        .iter()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    let a: Value = serde_json::from_str(&args).unwrap();
    assert!(jsonschema::is_valid(&params, &a), "{a}");
    assert_eq!(a["city"], CANARY);
    let finish: Vec<_> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, vec!["tool_calls"]);
    let u = usage_of(&chunks)["completion_tokens"].as_u64().unwrap();
    assert!(u > calls.len() as u64 - 1);

    // tool_choice "none": a plain reply.
    let ev = stream(
        &url,
        &chat("hi", json!({"tools": tools, "tool_choice": "none"})),
        None,
    )
    .unwrap();
    assert!(!content_of(&parsed(&ev)).is_empty());
}

#[test]
fn reasoning_deltas_only_when_thinking_is_enabled() {
    let sim = Sim::start(&[]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let reasoning = |extra: Value| {
        let c = parsed(&stream(&url, &chat("about 5 words", extra), None).unwrap());
        let r: Vec<&str> = c
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["reasoning_content"].as_str())
            .collect();
        (r.len(), usage_of(&c)["completion_tokens"].as_u64().unwrap())
    };
    let (on, tokens_on) = reasoning(json!({"chat_template_kwargs": {"enable_thinking": true}}));
    assert!(on > 0);
    assert_eq!(
        tokens_on,
        5 + on as u64,
        "reasoning counts in completion tokens"
    );
    assert_eq!(
        reasoning(json!({"chat_template_kwargs": {"enable_thinking": false}})),
        (0, 5)
    );
    assert_eq!(reasoning(json!({})), (0, 5));
}

#[test]
fn prefix_cache_hits_repeated_prompts_only() {
    let sim = Sim::start(&[]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let long = "shared system prompt words ".repeat(40);
    let cached = |text: String| {
        let c = parsed(&stream(&url, &chat(&text, json!({"max_tokens": 3})), None).unwrap());
        usage_of(&c)["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(cached(long.clone()), 0);
    let hit = cached(long.clone());
    assert!(hit > 0 && hit % 16 == 0, "{hit}");
    assert_eq!(cached(format!("unique-1 {long}")), 0);
    assert_eq!(cached(format!("unique-2 {long}")), 0);
}

#[test]
fn completions_and_responses_stream() {
    let sim = Sim::start(&[]);
    let ev = stream(
        &format!("{}/v1/completions", sim.url(0)),
        &json!({"prompt": format!("{CANARY} about 6 words"), "stream": true,
                "stream_options": {"include_usage": true}}),
        None,
    )
    .unwrap();
    let c = parsed(&ev);
    let text: String = c
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert!(text.starts_with(CANARY));
    assert_eq!(usage_of(&c)["completion_tokens"], 5 + 6);
    assert_eq!(ev.last().unwrap().data, "[DONE]");

    let ev = stream(
        &format!("{}/v1/responses", sim.url(0)),
        &json!({"input": format!("{CANARY} about 6 words"), "stream": true}),
        None,
    )
    .unwrap();
    let names: Vec<&str> = ev.iter().filter_map(|e| e.event.as_deref()).collect();
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    let deltas: String = ev
        .iter()
        .filter(|e| e.event.as_deref() == Some("response.output_text.delta"))
        .map(|e| {
            serde_json::from_str::<Value>(&e.data).unwrap()["delta"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let done: Value = serde_json::from_str(&ev.last().unwrap().data).unwrap();
    let usage = &done["response"]["usage"];
    assert_eq!(usage["output_tokens"], 11);
    assert!(usage["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        deltas.as_str()
    );

    // Non-streaming forms of both.
    let r: Value = serde_json::from_str(
        &post(
            &format!("{}/v1/completions", sim.url(0)),
            &json!({"prompt": "about 4 words"}),
        )
        .body,
    )
    .unwrap();
    assert_eq!(r["object"], "text_completion");
    assert_eq!(r["usage"]["completion_tokens"], 4);
    let r: Value = serde_json::from_str(
        &post(
            &format!("{}/v1/responses", sim.url(0)),
            &json!({"input": "about 4 words"}),
        )
        .body,
    )
    .unwrap();
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["usage"]["output_tokens"], 4);
}

#[test]
fn bad_requests_get_openai_errors() {
    let sim = Sim::start(&["--model", "served-model"]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let raw = |body: &str| {
        let r = agent()
            .post(&url)
            .header("content-type", "application/json")
            .send(body.to_string())
            .unwrap();
        let status = r.status().as_u16();
        (
            status,
            serde_json::from_str::<Value>(&r.into_body().read_to_string().unwrap()).unwrap(),
        )
    };
    for (body, param) in [
        ("{not json", Value::Null),
        ("[1,2]", Value::Null),
        (r#"{"model":"served-model"}"#, json!("messages")),
        (
            r#"{"model":"other","messages":[{"role":"user","content":"x"}]}"#,
            json!("model"),
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}"#,
            json!("max_tokens"),
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":999999999}"#,
            json!("max_tokens"),
        ),
        (r#"{"messages":"x"}"#, json!("messages")),
    ] {
        let (status, v) = raw(body);
        assert_eq!(status, 400, "{body}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["param"], param, "{body}");
    }
    let r = post(
        &format!("{}/v1/completions", sim.url(0)),
        &json!({"model": "served-model"}),
    );
    assert_eq!(r.status, 400);
    let r = post(&format!("{}/v1/responses", sim.url(0)), &json!({}));
    assert_eq!(r.status, 400);
    let r = agent()
        .get(&format!("{}/v2/nothing", sim.url(0)))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = serde_json::from_str(&r.into_body().read_to_string().unwrap()).unwrap();
    assert!(v["error"]["message"].is_string());
    let models: Value = serde_json::from_str(&get(&format!("{}/v1/models", sim.url(0)))).unwrap();
    assert_eq!(models["data"][0]["id"], "served-model");
    // Still alive after all that.
    assert_eq!(
        post(
            &url,
            &chat("x", json!({"model": "served-model", "stream": false}))
        )
        .status,
        200
    );
}

#[test]
fn help_lists_profiles_and_faults_and_bad_flags_exit_2() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "default",
        "fast",
        "slow",
        "no-spec",
        "spec-k4",
        "spec-k8",
        "spec-k12",
        "spec-k16",
        "mtp2",
        "tp2",
        "contaminate",
        "disconnect",
        "http500",
        "http429",
        "malformed",
        "stall",
        "no-usage",
        "bad-json",
        "restart",
        "Tokenizer",
    ] {
        assert!(help.contains(word), "--help lacks {word}");
    }
    for args in [
        &["--profile", "nope"][..],
        &["--fault", "nope=0.5"],
        &["--fault", "stall=2"],
        &["--spec-accept", "1.5"],
        &["--no-such-flag"],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.is_empty());
        if args[0] == "--profile" {
            assert!(err.contains("spec-k8"), "lists valid profiles: {err}");
        }
        if args.get(1) == Some(&"nope=0.5") {
            assert!(err.contains("contaminate"), "lists valid kinds: {err}");
        }
    }
}

/// `--help` is where the fault kinds are listed: every kind the `--fault` parser accepts
/// (`FaultKind::ALL`, which `FaultKind::parse` searches) has one line of its own that fits 80
/// columns, and every exit code the binary uses is explained.
#[test]
fn help_gives_every_fault_kind_one_line_and_every_exit_code() {
    use anvil::sim::faults::FaultKind;
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for kind in FaultKind::ALL {
        assert_eq!(FaultKind::parse(kind.name()), Some(kind));
        let lines: Vec<&str> = help
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(kind.name()))
            .collect();
        assert_eq!(lines.len(), 1, "{}: {lines:?}", kind.name());
        assert!(
            lines[0].len() < 80 && lines[0].trim() != kind.name(),
            "{}: {:?}",
            kind.name(),
            lines[0]
        );
    }
    let codes: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Exit codes:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let explained = |code: &str, words: &str| {
        codes
            .iter()
            .any(|l| l.split_whitespace().next() == Some(code) && l.contains(words) && l.len() < 80)
    };
    assert!(explained("0", "SIGINT or SIGTERM"), "{codes:?}");
    assert!(explained("2", "bad flag"), "{codes:?}");
    assert!(
        explained("5", "could not serve: its port is taken"),
        "{codes:?}"
    );
    assert_eq!(codes.len(), 3, "{codes:?}");
    assert!(help.contains("SIGKILL"), "--help says what a SIGKILL loses");
}

/// A port another process holds: exit 5 ("could not serve"), naming the address.
#[test]
fn a_taken_port_exits_5_naming_it() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN)
        .args(["--host", "127.0.0.1", "--port", &port, "--no-realtime"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{err}"
    );
}

/// The truth file keeps the rows of a streamed request whichever way the simulator is
/// stopped: SIGINT (Ctrl-C) and SIGTERM (`kill`) flush and close it, exit 0; SIGKILL
/// flushes nothing, but rows older than a second were flushed already.
#[test]
fn the_truth_file_keeps_its_rows_after_sigint_sigterm_and_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    for (signal, name) in [
        (libc::SIGINT, "sigint"),
        (libc::SIGTERM, "sigterm"),
        (libc::SIGKILL, "sigkill"),
    ] {
        let path = dir.path().join(format!("{name}.csv"));
        let sim = Sim::start(&["--truth", path.to_str().unwrap()]);
        let id = format!("{name}-1");
        let events = stream(
            &format!("{}/v1/chat/completions", sim.url(0)),
            &chat("about 20 words", json!({})),
            Some(&id),
        )
        .unwrap();
        if signal == libc::SIGKILL {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let (code, err) = sim.signal(signal);
        if signal == libc::SIGKILL {
            assert_eq!(code, None, "{name}: killed");
        } else {
            assert_eq!(code, Some(0), "{name}: {err}");
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{name}: {}: {e}", path.display()));
        assert!(
            text.starts_with("request_id,replica,seq,tokens,kind,t_deadline_ns,t_write_ns\n"),
            "{name}: {text}"
        );
        assert!(text.ends_with('\n'), "{name}: whole rows only");
        let rows = |kind: &str| {
            text.lines()
                .filter(|l| l.starts_with(&format!("{id},")) && l.contains(kind))
                .count()
        };
        assert_eq!(rows(",request_read,"), 1, "{name}: {text}");
        assert_eq!(
            truth_rows(&text, &id).len(),
            events.len(),
            "{name}: one row per SSE event: {text}"
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.starts_with('.')),
            "{name}: no temporary file left: {names:?}"
        );
    }
}

// ---- faults, each at rate 1 ----

fn fault_sim(kind: &str, extra: &[&str]) -> Sim {
    let f = format!("{kind}=1");
    let mut args = vec!["--fault", f.as_str()];
    args.extend_from_slice(extra);
    Sim::start(&args)
}

#[test]
fn fault_contaminate_leaks_another_canary() {
    let sim = fault_sim("contaminate", &[]);
    let c = parsed(
        &stream(
            &format!("{}/v1/chat/completions", sim.url(0)),
            &chat(&format!("{CANARY} about 5 words"), json!({})),
            None,
        )
        .unwrap(),
    );
    let text = content_of(&c);
    let found = anvil::artifact::canary::find_all(&text);
    assert_eq!(found[0], CANARY);
    assert!(found.iter().any(|f| *f != CANARY), "{text}");
}

#[test]
fn fault_disconnect_closes_mid_stream_without_done() {
    let sim = fault_sim("disconnect", &[]);
    match stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("about 30 words", json!({})),
        None,
    ) {
        Ok(ev) | Err(ev) => {
            assert!(ev.iter().all(|e| e.data != "[DONE]"));
            assert!(
                !content_of(&parsed(&ev)).is_empty(),
                "some content before the cut"
            );
        }
    }
    // An incomplete chunked body is an error for the client.
    assert!(
        stream(
            &format!("{}/v1/chat/completions", sim.url(0)),
            &chat("about 30 words", json!({})),
            None
        )
        .is_err()
    );
}

#[test]
fn fault_http500_and_http429() {
    let sim = fault_sim("http500", &[]);
    let r = post(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("x", json!({})),
    );
    assert_eq!(r.status, 500);
    assert!(serde_json::from_str::<Value>(&r.body).unwrap()["error"]["message"].is_string());
    drop(sim);
    let sim = fault_sim("http429", &[]);
    let r = post(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("x", json!({})),
    );
    assert_eq!(r.status, 429);
    assert_eq!(r.headers.get("retry-after").unwrap(), "1");
    assert!(serde_json::from_str::<Value>(&r.body).unwrap()["error"].is_object());
}

#[test]
fn fault_malformed_inserts_one_bad_line_and_continues() {
    let sim = fault_sim("malformed", &[]);
    let ev = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("about 20 words", json!({})),
        None,
    )
    .unwrap();
    let bad: Vec<_> = ev
        .iter()
        .filter(|e| e.data != "[DONE]" && serde_json::from_str::<Value>(&e.data).is_err())
        .collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(ev.last().unwrap().data, "[DONE]");
    let good: Vec<Value> = ev
        .iter()
        .filter_map(|e| serde_json::from_str(&e.data).ok())
        .collect();
    assert_eq!(content_of(&good).split_whitespace().count(), 20);
}

#[test]
fn fault_stall_holds_the_stream_silent() {
    let sim = fault_sim("stall", &["--stall-ms", "400"]);
    let t0 = Instant::now();
    let ev = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("about 20 words", json!({})),
        None,
    )
    .unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(400));
    let max_gap = ev.windows(2).map(|w| w[1].t_ns - w[0].t_ns).max().unwrap();
    assert!(max_gap >= 390_000_000, "largest gap {max_gap} ns");
    assert_eq!(ev.last().unwrap().data, "[DONE]");
}

#[test]
fn fault_no_usage_omits_usage() {
    let sim = fault_sim("no-usage", &[]);
    let ev = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("about 5 words", json!({})),
        None,
    )
    .unwrap();
    assert!(usage_of(&parsed(&ev)).is_null());
    assert_eq!(ev.last().unwrap().data, "[DONE]");
    let r: Value = serde_json::from_str(
        &post(
            &format!("{}/v1/chat/completions", sim.url(0)),
            &chat("x", json!({"stream": false})),
        )
        .body,
    )
    .unwrap();
    assert!(r.get("usage").is_none());
}

#[test]
fn fault_bad_json_breaks_structured_output() {
    let sim = fault_sim("bad-json", &[]);
    let schema =
        json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}});
    let ev = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat(
            "json",
            json!({"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}),
        ),
        None,
    )
    .unwrap();
    let text = content_of(&parsed(&ev));
    assert!(!text.is_empty());
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
}

#[test]
fn fault_restart_drops_streams_and_changes_start_time() {
    let sim = fault_sim("restart", &[]);
    let start = |s: &str| metric(s, "process_start_time_seconds");
    let before = get(&format!("{}/metrics", sim.url(0)));
    let r = stream(
        &format!("{}/v1/chat/completions", sim.url(0)),
        &chat("about 40 words", json!({})),
        None,
    );
    let ev = match r {
        Ok(ev) | Err(ev) => ev,
    };
    assert!(ev.iter().all(|e| e.data != "[DONE]"));
    let after = get(&format!("{}/metrics", sim.url(0)));
    assert!(start(&after) > start(&before), "{before}\n{after}");
    assert!(
        metric(&after, "vllm:prompt_tokens_total") == 0.0,
        "counters reset"
    );
}

#[test]
fn fault_tool_kinds_and_responses_malformed() {
    let tools = json!([{"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}}}}]);
    let call = |sim: &Sim| {
        let c = parsed(
            &stream(
                &format!("{}/v1/chat/completions", sim.url(0)),
                &chat(&format!("{CANARY} go"), json!({"tools": tools})),
                None,
            )
            .unwrap(),
        );
        let calls: Vec<Value> = c
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0).cloned())
            .collect();
        let args: String = calls
            .iter()
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        (
            calls[0]["function"]["name"].as_str().unwrap().to_string(),
            args,
        )
    };
    let sim = fault_sim("wrong-tool", &[]);
    assert_ne!(call(&sim).0, "lookup");
    drop(sim);
    let sim = fault_sim("tool-contaminate", &[]);
    let (name, args) = call(&sim);
    assert_eq!(name, "lookup");
    let found = anvil::artifact::canary::find_all(&args);
    assert!(
        found.contains(&CANARY) && found.iter().any(|f| *f != CANARY),
        "{args}"
    );
    drop(sim);
    let sim = fault_sim("responses-malformed", &[]);
    let ev = stream(
        &format!("{}/v1/responses", sim.url(0)),
        &json!({"input": "about 10 words", "stream": true}),
        None,
    )
    .unwrap();
    let bad = ev
        .iter()
        .filter(|e| serde_json::from_str::<Value>(&e.data).is_err())
        .count();
    assert_eq!(bad, 1);
    assert_eq!(
        ev.last().unwrap().event.as_deref(),
        Some("response.completed")
    );
}

/// Truth rows of one request id: (kind, tokens, deadline ns), in seq order.
fn truth_rows(text: &str, id: &str) -> Vec<(String, u64, i64)> {
    text.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        // Event rows only: `request_read` and the cache's rows have no seq.
        .filter(|r| r[0] == id && !r[2].is_empty())
        .map(|r| {
            (
                r[4].to_string(),
                r[3].parse().unwrap(),
                r[5].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn deadlines_follow_the_timing_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truth.csv");
    let sim = Sim::start(&[
        "--decode-tps",
        "100",
        "--prefill-tps",
        "10000",
        "--batch-cost",
        "0",
        "--max-batch",
        "1",
        "--truth",
        path.to_str().unwrap(),
    ]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let prompt = "word ".repeat(500);
    let prompt_tokens = {
        let t: Value = serde_json::from_str(
            &post(
                &format!("{}/tokenize", sim.url(0)),
                &json!({"messages": [{"role": "user", "content": format!("{prompt} about 10 words")}]}),
            )
            .body,
        )
        .unwrap();
        t["count"].as_u64().unwrap()
    };
    // Two concurrent requests on one batch slot: the second waits for the first.
    let handles: Vec<_> = ["a", "b"]
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let (url, prompt) = (url.clone(), prompt.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30 * i as u64));
                stream(
                    &url,
                    &chat(&format!("{prompt} about 10 words"), json!({})),
                    Some(id),
                )
                .unwrap()
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    let a = truth_rows(&text, "a");
    let b = truth_rows(&text, "b");
    let content = |rows: &[(String, u64, i64)]| {
        rows.iter()
            .filter(|r| r.0 == "content")
            .map(|r| r.2)
            .collect::<Vec<_>>()
    };
    let (ca, cb) = (content(&a), content(&b));
    assert_eq!(ca.len(), 10);
    // Prefill: prompt / 10000 tok/s + one 10 ms scheduler step.
    let ttft = (ca[0] - a[0].2) as f64 / 1e6;
    let want = prompt_tokens as f64 / 10.0 + 10.0;
    assert!((ttft - want).abs() < 0.5, "ttft {ttft} ms, model {want} ms");
    // Decode: one step per 10 ms at one running sequence, ±3 % jitter.
    for w in ca.windows(2) {
        let gap = (w[1] - w[0]) as f64 / 1e6;
        assert!((9.69..=10.31).contains(&gap), "step {gap} ms");
    }
    // b waited for a's batch slot: its first token comes after a's last event.
    assert!(
        cb[0] > a.last().unwrap().2,
        "b was admitted only when a finished"
    );
}

/// `--run-seed` draws the run's speed factor: printed at start, on the truth file's first
/// line, and applied to the decode steps the timer keeps.
#[test]
fn the_run_speed_factor_is_stated_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truth.csv");
    let sim = Sim::start(&[
        "--decode-tps",
        "100",
        "--batch-cost",
        "0",
        "--run-seed",
        "tp1-2-0",
        "--run-cv",
        "0.2",
        "--truth",
        path.to_str().unwrap(),
    ]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    stream(&url, &chat("hello, about 12 words", json!({})), Some("a")).unwrap();
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    let first = text.lines().next().unwrap();
    let factor: f64 = first
        .strip_prefix("# anvil-sim run speed factor ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("first line: {first}"));
    assert!(first.contains("--run-seed \"tp1-2-0\", cv 0.2"), "{first}");
    assert_eq!(text.lines().nth(1), Some(anvil::sim::truth::HEADER));
    assert!(
        err.contains(&format!("run speed factor {factor:.4}")),
        "{err}"
    );
    assert!(
        (factor - 1.0).abs() > 0.001,
        "a drawn factor, not 1: {factor}"
    );
    let steps: Vec<i64> = truth_rows(&text, "a")
        .into_iter()
        .filter(|r| r.0 == "content")
        .map(|r| r.2)
        .collect();
    let step = 10.0 / factor;
    for w in steps.windows(2) {
        let gap = (w[1] - w[0]) as f64 / 1e6;
        assert!(
            (gap - step).abs() <= step * 0.031,
            "step {gap} ms, model {step} ms at factor {factor}"
        );
    }
}
