//! Rendering a reply into the exact bytes of every SSE event (or the one JSON body), ahead
//! of time, so the timer thread only hands pre-rendered bytes to streams.
//!
//! The reply's tokens are grouped into decode steps first: the first step (the end of
//! prefill) carries one token; with `--spec-depth K --spec-accept P` every later step
//! proposes K drafts, accepts each in turn with probability P until the first rejection,
//! and carries 1 + accepted tokens in ONE chunk. Steps never straddle reasoning, content
//! and tool-call segments. Fault placement ("mid-stream") is the middle step.

use bytes::Bytes;
use rand::{Rng, rngs::StdRng};
use serde_json::{Value, json};

use super::api::Api;
use super::engine::{Action, Event, Gate};
use super::faults::{FaultKind, Faults};
use super::reply::{Finish, Reply};

/// A reply segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seg {
    Reasoning,
    Content,
    ToolHeader,
    ToolArgs,
}

/// One decode step's output.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    seg: Seg,
    text: String,
    tokens: u32,
    /// (draft tokens proposed, drafts accepted) when speculative decoding ran this step.
    spec: Option<(u32, u32)>,
}

/// Accepted drafts of one speculative step.
fn draw_accepted(k: u32, p: f64, rng: &mut StdRng) -> u32 {
    let mut n = 0;
    while n < k && rng.random::<f64>() < p {
        n += 1;
    }
    n
}

fn steps(reply: &Reply, spec_depth: u32, spec_accept: f64, rng: &mut StdRng) -> Vec<Step> {
    let mut segs: Vec<(Seg, Vec<(String, u32)>)> = Vec::new();
    let one = |v: &[String]| v.iter().map(|p| (p.clone(), 1u32)).collect::<Vec<_>>();
    segs.push((Seg::Reasoning, one(&reply.reasoning)));
    segs.push((Seg::Content, one(&reply.content)));
    if let Some(t) = &reply.tool {
        segs.push((Seg::ToolHeader, vec![(String::new(), t.name_tokens)]));
        segs.push((Seg::ToolArgs, one(&t.args)));
    }
    let mut out: Vec<Step> = Vec::new();
    for (seg, units) in segs {
        let mut i = 0;
        while i < units.len() {
            let first = out.is_empty();
            let (want, spec) = if first || spec_depth == 0 {
                (1, None)
            } else {
                let a = draw_accepted(spec_depth, spec_accept, rng);
                (1 + a as usize, Some(spec_depth))
            };
            let take = want.min(units.len() - i);
            let text: String = units[i..i + take].iter().map(|u| u.0.as_str()).collect();
            let tokens = units[i..i + take].iter().map(|u| u.1).sum();
            out.push(Step {
                seg,
                text,
                tokens,
                spec: spec.map(|k| (k, take as u32 - 1)),
            });
            i += take;
        }
    }
    if out.is_empty() {
        out.push(Step {
            seg: Seg::Content,
            text: String::new(),
            tokens: 0,
            spec: None,
        });
    }
    out
}

/// Everything about one response that the rendering needs.
#[derive(Debug, Clone)]
pub struct RenderCtx<'a> {
    pub api: Api,
    pub stream: bool,
    pub include_usage: bool,
    pub id: &'a str,
    pub model: &'a str,
    pub created: u64,
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub faults: Faults,
    pub stall_ns: i64,
    pub spec_depth: u32,
    pub spec_accept: f64,
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn sse_event(name: &str, v: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {v}\n\n"))
}

fn ev(bytes: Bytes, tokens: u32, kind: &'static str, gate: Gate, action: Action) -> Event {
    Event {
        bytes,
        tokens,
        kind,
        seq: 0,
        gate,
        delay_ns: 0,
        action,
        spec_draft_tokens: 0,
        spec_accepted: 0,
        drafts: 0,
    }
}

fn seg_kind(seg: Seg) -> &'static str {
    match seg {
        Seg::Reasoning => "reasoning",
        Seg::Content => "content",
        Seg::ToolHeader | Seg::ToolArgs => "tool",
    }
}

fn chat_usage(c: &RenderCtx<'_>, reply: &Reply) -> Value {
    usage(c, reply, "prompt", "completion")
}

fn responses_usage(c: &RenderCtx<'_>, reply: &Reply) -> Value {
    usage(c, reply, "input", "output")
}

/// The usage object with the prompt's and the completion's counts named `{prompt}_tokens`
/// and `{completion}_tokens` (chat and completions: `prompt`, `completion`; Responses:
/// `input`, `output`), the total, the cached prompt tokens and the reasoning tokens.
fn usage(c: &RenderCtx<'_>, reply: &Reply, prompt: &str, completion: &str) -> Value {
    let generated = reply.completion_tokens();
    let mut v = serde_json::Map::new();
    v.insert(format!("{prompt}_tokens"), json!(c.prompt_tokens));
    v.insert(format!("{completion}_tokens"), json!(generated));
    v.insert("total_tokens".into(), json!(c.prompt_tokens + generated));
    v.insert(
        format!("{prompt}_tokens_details"),
        json!({"cached_tokens": c.cached_tokens}),
    );
    v.insert(
        format!("{completion}_tokens_details"),
        json!({"reasoning_tokens": reply.reasoning.len()}),
    );
    Value::Object(v)
}

fn tool_args_text(reply: &Reply) -> String {
    reply
        .tool
        .as_ref()
        .map(|t| t.args.concat())
        .unwrap_or_default()
}

/// The Responses API `response` object.
fn response_object(c: &RenderCtx<'_>, reply: &Reply, done: bool, usage: bool) -> Value {
    response_object_with(c, reply, done, usage, None)
}

/// [`response_object`] with its `status` overridden (the `abort` fault's `cancelled`).
fn response_object_with(
    c: &RenderCtx<'_>,
    reply: &Reply,
    done: bool,
    usage: bool,
    status_override: Option<&str>,
) -> Value {
    let mut output = Vec::new();
    if done {
        if !reply.reasoning.is_empty() {
            output.push(json!({
                "type": "reasoning", "id": format!("rs_{}", c.id),
                "content": [{"type": "reasoning_text", "text": reply.reasoning_text()}],
                "summary": [],
            }));
        }
        if let Some(t) = &reply.tool {
            output.push(json!({
                "type": "function_call", "id": format!("fc_{}", c.id), "call_id": t.id,
                "name": t.name, "arguments": tool_args_text(reply), "status": "completed",
            }));
        } else {
            output.push(json!({
                "type": "message", "id": format!("msg_{}", c.id), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": reply.content_text(), "annotations": []}],
            }));
        }
    }
    let status = match (done, reply.finish) {
        (false, _) => "in_progress",
        (true, Finish::Length) => "incomplete",
        (true, _) => "completed",
    };
    let status = status_override.unwrap_or(status);
    json!({
        "id": format!("resp_{}", c.id), "object": "response", "created_at": c.created,
        "status": status, "model": c.model, "output": output,
        "usage": if usage && done { responses_usage(c, reply) } else { Value::Null },
    })
}

/// The non-streaming body.
fn full_body(c: &RenderCtx<'_>, reply: &Reply, usage: bool) -> Value {
    match c.api {
        Api::Chat => {
            let mut msg = json!({"role": "assistant", "content": reply.content_text()});
            if let Some(t) = &reply.tool {
                msg["content"] = Value::Null;
                msg["tool_calls"] = json!([{
                    "id": t.id, "type": "function",
                    "function": {"name": t.name, "arguments": tool_args_text(reply)},
                }]);
            }
            if !reply.reasoning.is_empty() {
                msg["reasoning_content"] = Value::String(reply.reasoning_text());
            }
            let mut v = json!({
                "id": format!("chatcmpl-{}", c.id), "object": "chat.completion", "created": c.created,
                "model": c.model,
                "choices": [{"index": 0, "message": msg, "logprobs": null, "finish_reason": reply.finish.as_str()}],
            });
            if usage {
                v["usage"] = chat_usage(c, reply);
            }
            v
        }
        Api::Completions => {
            let mut v = json!({
                "id": format!("cmpl-{}", c.id), "object": "text_completion", "created": c.created,
                "model": c.model,
                "choices": [{"index": 0, "text": reply.content_text(), "logprobs": null,
                             "finish_reason": reply.finish.as_str()}],
            });
            if usage {
                v["usage"] = chat_usage(c, reply);
            }
            v
        }
        Api::Responses => response_object(c, reply, true, usage),
    }
}

/// One streamed step's bytes.
fn step_bytes(c: &RenderCtx<'_>, reply: &Reply, s: &Step, last: bool, seq: u32) -> Bytes {
    let finish = if last {
        Value::from(reply.finish.as_str())
    } else {
        Value::Null
    };
    match c.api {
        Api::Chat => {
            let delta = match s.seg {
                Seg::Reasoning => json!({"reasoning_content": s.text}),
                Seg::Content => json!({"content": s.text}),
                Seg::ToolHeader => {
                    let t = reply.tool.as_ref();
                    json!({"tool_calls": [{"index": 0, "id": t.map(|t| t.id.as_str()), "type": "function",
                        "function": {"name": t.map(|t| t.name.as_str()), "arguments": ""}}]})
                }
                Seg::ToolArgs => {
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": s.text}}]})
                }
            };
            sse(&json!({
                "id": format!("chatcmpl-{}", c.id), "object": "chat.completion.chunk", "created": c.created,
                "model": c.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            }))
        }
        Api::Completions => sse(&json!({
            "id": format!("cmpl-{}", c.id), "object": "text_completion", "created": c.created, "model": c.model,
            "choices": [{"index": 0, "text": s.text, "logprobs": null, "finish_reason": finish}],
        })),
        Api::Responses => match s.seg {
            Seg::Reasoning => sse_event(
                "response.reasoning_text.delta",
                &json!({"type": "response.reasoning_text.delta", "item_id": format!("rs_{}", c.id),
                        "output_index": 0, "content_index": 0, "delta": s.text, "sequence_number": seq}),
            ),
            Seg::Content => sse_event(
                "response.output_text.delta",
                &json!({"type": "response.output_text.delta", "item_id": format!("msg_{}", c.id),
                        "output_index": if reply.reasoning.is_empty() { 0 } else { 1 },
                        "content_index": 0, "delta": s.text, "sequence_number": seq}),
            ),
            Seg::ToolHeader => {
                let t = reply.tool.as_ref();
                sse_event(
                    "response.output_item.added",
                    &json!({"type": "response.output_item.added",
                            "output_index": if reply.reasoning.is_empty() { 0 } else { 1 },
                            "item": {"type": "function_call", "id": format!("fc_{}", c.id),
                                     "call_id": t.map(|t| t.id.as_str()), "name": t.map(|t| t.name.as_str()),
                                     "arguments": "", "status": "in_progress"},
                            "sequence_number": seq}),
                )
            }
            Seg::ToolArgs => sse_event(
                "response.function_call_arguments.delta",
                &json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{}", c.id),
                        "output_index": if reply.reasoning.is_empty() { 0 } else { 1 },
                        "delta": s.text, "sequence_number": seq}),
            ),
        },
    }
}

/// Render every event of one response, in order, with its gate and action.
pub fn render(c: &RenderCtx<'_>, reply: &Reply, rng: &mut StdRng) -> Vec<Event> {
    let steps = steps(reply, c.spec_depth, c.spec_accept, rng);
    let f = c.faults;
    let usage = !f.has(FaultKind::NoUsage);
    let mid = steps.len() / 2;
    let mut out: Vec<Event> = Vec::with_capacity(steps.len() + 4);

    if c.stream {
        match c.api {
            Api::Chat => out.push(ev(
                sse(&json!({
                    "id": format!("chatcmpl-{}", c.id), "object": "chat.completion.chunk", "created": c.created,
                    "model": c.model,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
                                 "finish_reason": null}],
                })),
                0,
                "role",
                Gate::Arrival,
                Action::Send,
            )),
            Api::Responses => out.push(ev(
                sse_event(
                    "response.created",
                    &json!({"type": "response.created", "response": response_object(c, reply, false, false),
                            "sequence_number": 0}),
                ),
                0,
                "created",
                Gate::Arrival,
                Action::Send,
            )),
            Api::Completions => {}
        }
    }
    let mut responses_malformed_done = false;
    let mut aborted = false;
    for (i, s) in steps.iter().enumerate() {
        let gate = if i == 0 { Gate::FirstToken } else { Gate::Step };
        let last = i + 1 == steps.len();
        let (bytes, action) = if !c.stream {
            (Bytes::new(), Action::Silent)
        } else if c.api == Api::Responses
            && f.has(FaultKind::ResponsesMalformed)
            && s.seg == Seg::Content
            && i >= mid
            && !responses_malformed_done
        {
            responses_malformed_done = true;
            (
                Bytes::from(format!(
                    "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":{}\n\n",
                    json!(s.text)
                )),
                Action::Send,
            )
        } else {
            (
                step_bytes(c, reply, s, last, out.len() as u32),
                Action::Send,
            )
        };
        let mut e = ev(bytes, s.tokens, seg_kind(s.seg), gate, action);
        if let Some((k, a)) = s.spec {
            e.drafts = 1;
            e.spec_draft_tokens = k;
            e.spec_accepted = a;
        }
        if i == mid && i > 0 && f.has(FaultKind::Stall) {
            e.delay_ns = c.stall_ns;
        }
        out.push(e);
        if i == mid {
            if c.stream && f.has(FaultKind::Malformed) {
                let bad = match c.api {
                    Api::Responses => "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\n\n".to_string(),
                    _ => format!(
                        "data: {{\"id\":\"{}\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\n\n",
                        c.id
                    ),
                };
                out.push(ev(
                    Bytes::from(bad),
                    0,
                    "malformed",
                    Gate::Same,
                    Action::Send,
                ));
            }
            if f.has(FaultKind::Restart) {
                out.push(ev(Bytes::new(), 0, "restart", Gate::Same, Action::Restart));
                break;
            }
            if f.has(FaultKind::Disconnect) {
                out.push(ev(Bytes::new(), 0, "disconnect", Gate::Same, Action::Abort));
                break;
            }
            if c.stream && f.has(FaultKind::StreamError) {
                let message = "CUDA error: an illegal memory access was encountered";
                let bytes = match c.api {
                    Api::Responses => sse_event(
                        "error",
                        &json!({"type": "error", "code": "server_error", "message": message,
                                "sequence_number": out.len()}),
                    ),
                    _ => sse(&json!({"error": {"code": 500, "message": message,
                                               "type": "server_error"}})),
                };
                out.push(ev(bytes, 0, "stream-error", Gate::Same, Action::Send));
                // The stream then ends without its terminal event.
                return number(out);
            }
            if c.stream && f.has(FaultKind::Abort) && c.api != Api::Responses {
                let chunk = if c.api == Api::Chat {
                    json!({"id": format!("chatcmpl-{}", c.id), "object": "chat.completion.chunk",
                           "created": c.created, "model": c.model,
                           "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "abort"}]})
                } else {
                    json!({"id": format!("cmpl-{}", c.id), "object": "text_completion",
                           "created": c.created, "model": c.model,
                           "choices": [{"index": 0, "text": "", "logprobs": null, "finish_reason": "abort"}]})
                };
                out.push(ev(sse(&chunk), 0, "abort", Gate::Same, Action::Send));
                aborted = true;
                break;
            }
            if c.stream && f.has(FaultKind::Abort) {
                aborted = true;
                break;
            }
        }
    }
    if matches!(out.last(), Some(e) if matches!(e.action, Action::Abort | Action::Restart)) {
        return number(out);
    }
    if c.stream {
        match c.api {
            Api::Chat | Api::Completions => {
                if c.include_usage && usage && !aborted {
                    let usage_v = chat_usage(c, reply);
                    let obj = if c.api == Api::Chat {
                        "chat.completion.chunk"
                    } else {
                        "text_completion"
                    };
                    let prefix = if c.api == Api::Chat {
                        "chatcmpl"
                    } else {
                        "cmpl"
                    };
                    out.push(ev(
                        sse(&json!({"id": format!("{prefix}-{}", c.id), "object": obj, "created": c.created,
                                    "model": c.model, "choices": [], "usage": usage_v})),
                        0,
                        "usage",
                        Gate::Same,
                        Action::Send,
                    ));
                }
                out.push(ev(
                    Bytes::from_static(b"data: [DONE]\n\n"),
                    0,
                    "done",
                    Gate::Same,
                    Action::Send,
                ));
            }
            Api::Responses => {
                let seq = out.len();
                out.push(ev(
                    sse_event(
                        "response.completed",
                        &json!({"type": "response.completed",
                                "response": response_object_with(c, reply, true, usage && !aborted,
                                                                 aborted.then_some("cancelled")),
                                "sequence_number": seq}),
                    ),
                    0,
                    "completed",
                    Gate::Same,
                    Action::Send,
                ));
            }
        }
    } else {
        out.push(ev(
            Bytes::from(full_body(c, reply, usage).to_string()),
            0,
            "body",
            Gate::Same,
            Action::Send,
        ));
    }
    number(out)
}

/// Number the events that are written (the truth file's `seq`).
fn number(mut out: Vec<Event>) -> Vec<Event> {
    let mut n = 0;
    for e in &mut out {
        e.seq = n;
        if matches!(e.action, Action::Send) {
            n += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::reply::ToolCall;
    use rand::SeedableRng;

    fn reply(n: usize) -> Reply {
        Reply {
            reasoning: Vec::new(),
            content: (0..n).map(|_| " the".to_string()).collect(),
            tool: None,
            finish: Finish::Stop,
        }
    }

    #[test]
    fn speculative_steps_carry_several_tokens() {
        let mut rng = StdRng::seed_from_u64(3);
        let s = steps(&reply(2000), 8, 0.7, &mut rng);
        let tokens: u32 = s.iter().map(|s| s.tokens).sum();
        assert_eq!(tokens, 2000);
        assert!(tokens as f64 / s.len() as f64 > 2.5, "{}", s.len());
        assert_eq!(s[0].tokens, 1);
        assert!(
            s.iter()
                .skip(1)
                .all(|s| s.spec.is_some_and(|(k, a)| k == 8 && a + 1 == s.tokens))
        );
    }

    #[test]
    fn steps_do_not_straddle_segments() {
        let mut rng = StdRng::seed_from_u64(3);
        let r = Reply {
            reasoning: vec!["a".into(), " b".into()],
            content: vec![],
            tool: Some(ToolCall {
                id: "c".into(),
                name: "f".into(),
                name_tokens: 1,
                args: vec!["{".into(), "}".into()],
            }),
            finish: Finish::ToolCalls,
        };
        let s = steps(&r, 16, 1.0, &mut rng);
        let segs: Vec<Seg> = s.iter().map(|s| s.seg).collect();
        assert_eq!(
            segs,
            vec![
                Seg::Reasoning,
                Seg::Reasoning,
                Seg::ToolHeader,
                Seg::ToolArgs
            ]
        );
    }
}
