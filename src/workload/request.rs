//! Request bodies for the three OpenAI-compatible streaming APIs, serialised to `Bytes` before
//! the run so the hot path only writes them.
//!
//! | api | path | prompt field | length field |
//! |---|---|---|---|
//! | `chat` | `/v1/chat/completions` | `messages` | `max_tokens` |
//! | `completions` | `/v1/completions` | `prompt` | `max_tokens` |
//! | `responses` | `/v1/responses` | `input` | `max_output_tokens` |
//!
//! Chat and completions ask for `stream_options.include_usage` so the final chunk carries the
//! usage token counts every metric is computed from. Sampling is greedy (`temperature: 0`).

use std::fmt;

use bytes::Bytes;
use hyper::header::HeaderValue;
use serde::Serialize;

use super::prompt::{ChatMessage, Prompt, PromptContent, PromptForm};

/// Which API a cell drives: the artifact's own type; what capture needs of it is here.
pub use crate::artifact::Api;

impl Api {
    /// The request path below the server root.
    pub fn path(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Completions => "/v1/completions",
            Self::Responses => "/v1/responses",
        }
    }

    /// How prompts for this API are shaped.
    pub fn prompt_form(self) -> PromptForm {
        match self {
            Self::Chat => PromptForm::Messages,
            Self::Completions | Self::Responses => PromptForm::Text,
        }
    }

    /// The SSE event that ends a complete stream: `data: [DONE]` for chat and completions;
    /// for the Responses API the final `response.completed`, `response.incomplete` (cut by
    /// `max_output_tokens`) or `response.failed` event (the writer then reads its status and
    /// error), named by the SSE `event:` line or, where the stream sends none (openai-node's
    /// mock server, the vercel/ai recordings), by the payload's top-level-looking `"type"`
    /// member, found by a byte scan: no JSON is parsed on the hot path.
    pub fn is_terminal(self, event: Option<&str>, data: &[u8]) -> bool {
        match self {
            Self::Chat | Self::Completions => data == b"[DONE]",
            Self::Responses => match event {
                Some(name) => RESPONSES_TERMINAL.contains(&name),
                None => json_type_is_terminal(data),
            },
        }
    }
}

/// The Responses API events that end a stream.
const RESPONSES_TERMINAL: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// Whether `data` holds a `"type"` member whose value is one of [`RESPONSES_TERMINAL`]
/// (`"type" : "response.completed"`, blanks allowed around the colon). The key's quotes are
/// unescaped, so a `\"type\"` inside a string value never matches; nested objects of these
/// payloads carry other types (`message`, `function_call`), never a `response.*` one.
fn json_type_is_terminal(data: &[u8]) -> bool {
    const KEY: &[u8] = b"\"type\"";
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let mut from = 0;
    while let Some(at) = data[from..].windows(KEY.len()).position(|w| w == KEY) {
        let after = from + at + KEY.len();
        let rest = &data[after..];
        let rest = &rest[rest.iter().take_while(|b| blank(b)).count()..];
        if let Some(value) = rest.strip_prefix(b":") {
            let value = &value[value.iter().take_while(|b| blank(b)).count()..];
            if RESPONSES_TERMINAL.iter().any(|name| {
                value.len() > name.len() + 1
                    && value[0] == b'"'
                    && &value[1..=name.len()] == name.as_bytes()
                    && value[name.len() + 1] == b'"'
            }) {
                return true;
            }
        }
        from = after;
    }
    false
}

/// What every request of a cell shares.
#[derive(Debug, Clone)]
pub struct RequestOptions {
    pub api: Api,
    /// The served model name.
    pub model: String,
    /// Token ceiling (`max_tokens`, or `max_output_tokens` for Responses); `None` leaves the
    /// server's default.
    pub max_tokens: Option<u32>,
    /// The manifest's `thinking: disabled`.
    pub thinking_disabled: bool,
    /// Leave out `chat_template_kwargs.enable_thinking` (for servers that reject unknown fields
    /// or models without the switch).
    pub omit_thinking_kwarg: bool,
}

impl RequestOptions {
    /// The thinking switch sent with `api`'s requests when the manifest disables thinking:
    /// `chat_template_kwargs: {"enable_thinking": false}` on the APIs whose prompt goes
    /// through the server's chat template (chat, and Responses, which servers turn into chat
    /// messages); nothing on completions, whose raw prompt has no template. `None` also when
    /// thinking is not disabled or the switch is left out.
    pub fn thinking_kwargs(&self, api: Api) -> Option<serde_json::Value> {
        (self.thinking_disabled && !self.omit_thinking_kwarg && api != Api::Completions)
            .then(|| serde_json::json!({"enable_thinking": false}))
    }
}

/// An API key. Its `Debug` and `Display` never show the key; it is sent only as a sensitive
/// `Authorization: Bearer` header.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The `Authorization` header value, marked sensitive (hyper and any header dump skip it).
    pub fn header_value(&self) -> Result<HeaderValue, RequestError> {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", self.0))
            .map_err(|_| RequestError::BadApiKey)?;
        v.set_sensitive(true);
        Ok(v)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Why a request could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(
        "request {request_index}: the {api} API takes a {expected:?} prompt, the prompt was built as {got:?}"
    )]
    FormMismatch {
        request_index: u32,
        api: &'static str,
        expected: PromptForm,
        got: PromptForm,
    },
    #[error("run id `{run_id}` cannot be used in an x-request-id header (use visible ASCII)")]
    BadRunId { run_id: String },
    #[error("the API key contains characters that cannot go in an HTTP header")]
    BadApiKey,
    #[error("request {request_index}: serialising the body failed: {source}")]
    Serialise {
        request_index: u32,
        #[source]
        source: serde_json::Error,
    },
}

/// One request, ready for the hot path.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    pub request_index: u32,
    pub api: Api,
    /// The JSON body, serialised.
    pub body: Bytes,
    /// `x-request-id: <run_id>-<request_index>`.
    pub request_id: HeaderValue,
    pub canary: Option<String>,
    pub prompt_sha256: String,
    pub prompt_chars: u64,
    pub filler_units: u32,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// What the chat and completions bodies share after the prompt: streaming, the token
/// ceiling and greedy sampling.
#[derive(Serialize)]
struct Generation {
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// vLLM's, SGLang's and llama.cpp's `ignore_eos`: generate until `max_tokens`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    ignore_eos: bool,
    temperature: f64,
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    #[serde(flatten)]
    generation: Generation,
    #[serde(skip_serializing_if = "Option::is_none")]
    chat_template_kwargs: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct CompletionsBody<'a> {
    model: &'a str,
    prompt: &'a str,
    #[serde(flatten)]
    generation: Generation,
}

#[derive(Serialize)]
struct ResponsesBody<'a> {
    model: &'a str,
    input: &'a str,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    temperature: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    chat_template_kwargs: Option<serde_json::Value>,
}

/// Serialise a body for `content`. `stream: false` with `max_tokens` overridden is the
/// calibration probe (see `crate::capture::oracle::ProbeOracle`).
pub fn body_json(
    opts: &RequestOptions,
    request_index: u32,
    content: &PromptContent,
    stream: bool,
    max_tokens: Option<u32>,
    ignore_eos: bool,
) -> Result<Vec<u8>, RequestError> {
    let expected = opts.api.prompt_form();
    let got = match content {
        PromptContent::Messages(_) => PromptForm::Messages,
        PromptContent::Text(_) => PromptForm::Text,
    };
    let mismatch = || RequestError::FormMismatch {
        request_index,
        api: opts.api.as_str(),
        expected,
        got,
    };
    let generation = || Generation {
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens,
        ignore_eos,
        temperature: 0.0,
    };
    let ser = |r: serde_json::Result<Vec<u8>>| {
        r.map_err(|source| RequestError::Serialise {
            request_index,
            source,
        })
    };
    match (opts.api, content) {
        (Api::Chat, PromptContent::Messages(messages)) => ser(serde_json::to_vec(&ChatBody {
            model: &opts.model,
            messages,
            generation: generation(),
            chat_template_kwargs: opts.thinking_kwargs(Api::Chat),
        })),
        (Api::Completions, PromptContent::Text(prompt)) => {
            ser(serde_json::to_vec(&CompletionsBody {
                model: &opts.model,
                prompt,
                generation: generation(),
            }))
        }
        (Api::Responses, PromptContent::Text(input)) => ser(serde_json::to_vec(&ResponsesBody {
            model: &opts.model,
            input,
            stream,
            max_output_tokens: max_tokens,
            temperature: 0.0,
            chat_template_kwargs: opts.thinking_kwargs(Api::Responses),
        })),
        _ => Err(mismatch()),
    }
}

/// Prepare the streaming request of `prompt` for run `run_id`.
pub fn prepare(
    opts: &RequestOptions,
    run_id: &str,
    prompt: &Prompt,
) -> Result<PreparedRequest, RequestError> {
    prepare_asking(opts, run_id, prompt, opts.max_tokens, false)
}

/// The place of a request whose body is built during the run (a session's later turn,
/// which needs the reply before it): its index, id and canary, and no body. Never sent.
pub fn placeholder(
    opts: &RequestOptions,
    run_id: &str,
    request_index: u32,
    canary: Option<String>,
) -> Result<PreparedRequest, RequestError> {
    let request_id = HeaderValue::from_str(&format!("{run_id}-{request_index}")).map_err(|_| {
        RequestError::BadRunId {
            run_id: run_id.to_owned(),
        }
    })?;
    Ok(PreparedRequest {
        request_index,
        api: opts.api,
        body: Bytes::new(),
        request_id,
        canary,
        prompt_sha256: String::new(),
        prompt_chars: 0,
        filler_units: 0,
    })
}

/// [`prepare`] with this request's own ceiling, and `ignore_eos` to have the server generate
/// all of it (a trace row's reply length; the Responses API takes no `ignore_eos`).
pub fn prepare_asking(
    opts: &RequestOptions,
    run_id: &str,
    prompt: &Prompt,
    max_tokens: Option<u32>,
    ignore_eos: bool,
) -> Result<PreparedRequest, RequestError> {
    let body = body_json(
        opts,
        prompt.request_index,
        &prompt.content,
        true,
        max_tokens,
        ignore_eos,
    )?;
    let request_id =
        HeaderValue::from_str(&format!("{run_id}-{}", prompt.request_index)).map_err(|_| {
            RequestError::BadRunId {
                run_id: run_id.to_owned(),
            }
        })?;
    Ok(PreparedRequest {
        request_index: prompt.request_index,
        api: opts.api,
        body: Bytes::from(body),
        request_id,
        canary: prompt.canary.clone(),
        prompt_sha256: prompt.sha256.clone(),
        prompt_chars: prompt.chars,
        filler_units: prompt.filler_units,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::prompt::{PromptBuilder, PromptCacheMode, PromptSpec, ResponseLength};
    use serde_json::{Value, json};

    fn prompt(api: Api) -> Prompt {
        PromptBuilder::new(PromptSpec {
            seed: 38027,
            run_salt: "r1".into(),
            workload_class: "headline-sustained-output".into(),
            context_target: 4096,
            cache_mode: PromptCacheMode::Unique,
            response_length: ResponseLength::AboutWords(256),
            canaries: true,
            form: api.prompt_form(),
            groups: None,
        })
        .build(12, 40)
    }

    fn opts(api: Api) -> RequestOptions {
        RequestOptions {
            api,
            model: "qwen3.8-27b".into(),
            max_tokens: Some(512),
            thinking_disabled: true,
            omit_thinking_kwarg: false,
        }
    }

    #[test]
    fn chat_body() {
        let p = prompt(Api::Chat);
        let r = prepare(&opts(Api::Chat), "run7", &p).unwrap();
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["model"], "qwen3.8-27b");
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"], json!({"include_usage": true}));
        assert_eq!(v["max_tokens"], 512);
        assert_eq!(v["temperature"], 0.0);
        assert_eq!(v["chat_template_kwargs"], json!({"enable_thinking": false}));
        assert_eq!(v["messages"][0]["role"], "system");
        assert_eq!(r.request_id, "run7-12");
        // The prompt hash covers the exact `messages` bytes in the body.
        let body = std::str::from_utf8(&r.body).unwrap();
        let sent = String::from_utf8(p.content.sent_bytes()).unwrap();
        assert!(body.contains(&format!("\"messages\":{sent},")));
        assert_eq!(r.prompt_sha256, p.sha256);
        assert_eq!(r.canary, p.canary);

        let mut o = opts(Api::Chat);
        o.omit_thinking_kwarg = true;
        let v: Value = serde_json::from_slice(&prepare(&o, "run7", &p).unwrap().body).unwrap();
        assert!(v.get("chat_template_kwargs").is_none());
        o.omit_thinking_kwarg = false;
        o.thinking_disabled = false;
        let v: Value = serde_json::from_slice(&prepare(&o, "run7", &p).unwrap().body).unwrap();
        assert!(v.get("chat_template_kwargs").is_none());
    }

    #[test]
    fn completions_and_responses_bodies() {
        let p = prompt(Api::Completions);
        let PromptContent::Text(text) = &p.content else {
            panic!()
        };
        let v: Value =
            serde_json::from_slice(&prepare(&opts(Api::Completions), "r", &p).unwrap().body)
                .unwrap();
        assert_eq!(v["prompt"], text.as_str());
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["max_tokens"], 512);
        assert!(v.get("chat_template_kwargs").is_none());

        let v: Value =
            serde_json::from_slice(&prepare(&opts(Api::Responses), "r", &p).unwrap().body).unwrap();
        assert_eq!(v["input"], text.as_str());
        assert_eq!(v["stream"], true);
        assert_eq!(v["max_output_tokens"], 512);
        assert!(v.get("max_tokens").is_none());
        assert!(v.get("stream_options").is_none());
        // Servers apply the chat template to Responses input: the thinking switch goes too.
        assert_eq!(v["chat_template_kwargs"], json!({"enable_thinking": false}));
    }

    #[test]
    fn mismatched_prompt_and_bad_run_id_are_errors() {
        let err = prepare(&opts(Api::Completions), "r", &prompt(Api::Chat)).unwrap_err();
        assert!(matches!(err, RequestError::FormMismatch { .. }), "{err}");
        let err = prepare(&opts(Api::Chat), "run\nid", &prompt(Api::Chat)).unwrap_err();
        assert!(matches!(err, RequestError::BadRunId { .. }), "{err}");
    }

    #[test]
    fn api_key_is_never_shown() {
        let k = ApiKey::new("sk-secret-123");
        assert!(!format!("{k:?}").contains("secret"));
        assert!(!format!("{k}").contains("secret"));
        let h = k.header_value().unwrap();
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("secret"));
        assert!(ApiKey::new("bad\nkey").header_value().is_err());
    }

    #[test]
    fn terminal_events() {
        assert!(Api::Chat.is_terminal(None, b"[DONE]"));
        assert!(!Api::Chat.is_terminal(None, b"{\"choices\":[]}"));
        assert!(Api::Responses.is_terminal(Some("response.completed"), b"{}"));
        assert!(!Api::Responses.is_terminal(None, b"[DONE]"));
        // No `event:` line: the payload's type decides.
        assert!(Api::Responses.is_terminal(
            None,
            br#"{"response":{"status":"completed"},"type":"response.completed"}"#
        ));
        assert!(Api::Responses.is_terminal(None, br#"{"type" : "response.failed"}"#));
        assert!(!Api::Responses.is_terminal(
            None,
            br#"{"type":"response.output_text.delta","delta":"\"type\":\"response.completed\""}"#
        ));
        assert!(!Api::Responses.is_terminal(None, br#"{"type":"response.completed_extra"}"#));
        assert!(!Api::Responses.is_terminal(
            Some("response.output_text.delta"),
            br#"{"type":"response.completed"}"#
        ));
    }
}
