//! Request bodies of the OpenAI-compatible endpoints, parsed into one endpoint-neutral
//! [`GenRequest`], and the OpenAI-style error every bad request gets instead of a crash.

use serde_json::{Value, json};

use super::tokenizer::{self, Message};

/// Which generation endpoint a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completions,
    Responses,
}

/// An OpenAI-style error: `{"error":{"message","type","param","code"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: Option<&'static str>,
}

impl ApiError {
    /// HTTP 400 `invalid_request_error`.
    pub fn bad(message: impl Into<String>, param: Option<&'static str>) -> Self {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
        }
    }

    pub fn new(
        status: u16,
        kind: &'static str,
        code: Option<&'static str>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
            .to_string()
    }
}

/// A function the client offered.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub parameters: Value,
}

/// A generation request, whatever endpoint it came from.
#[derive(Debug, Clone)]
pub struct GenRequest {
    pub api: Api,
    pub model: Option<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub max_tokens: Option<u32>,
    /// vLLM's (and llama.cpp's) `ignore_eos`: generate until `max_tokens`.
    pub ignore_eos: bool,
    /// vLLM's `min_tokens`: no end of sequence before this many tokens.
    pub min_tokens: u32,
    /// Prompt token ids (template applied for chat and Responses).
    pub prompt_ids: Vec<u32>,
    /// All prompt text the client wrote (canary and word-count lookups).
    pub prompt_text: String,
    pub thinking: bool,
    /// `response_format` json_schema's schema.
    pub json_schema: Option<Value>,
    /// Offered tools (empty when `tool_choice` is "none").
    pub tools: Vec<Tool>,
    /// A forced tool name (`tool_choice` naming a function).
    pub forced_tool: Option<String>,
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("request body is not valid JSON: {e}"), None))?;
    if !v.is_object() {
        return Err(ApiError::bad("request body must be a JSON object", None));
    }
    Ok(v)
}

/// Text of a message `content`: a string, or an array of parts with `text`.
fn content_text(v: &Value, param: &'static str) -> Result<String, ApiError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut s = String::new();
            for p in parts {
                match p {
                    Value::String(t) => s.push_str(t),
                    Value::Object(o) => {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            s.push_str(t);
                        }
                    }
                    _ => {
                        return Err(ApiError::bad(
                            "content parts must be objects with `text`",
                            Some(param),
                        ));
                    }
                }
            }
            Ok(s)
        }
        _ => Err(ApiError::bad(
            "content must be a string or an array of parts",
            Some(param),
        )),
    }
}

fn parse_messages(v: &Value, param: &'static str) -> Result<Vec<Message>, ApiError> {
    let arr = v.as_array().ok_or_else(|| {
        ApiError::bad(
            format!("`{param}` must be an array of messages"),
            Some(param),
        )
    })?;
    let mut out = Vec::with_capacity(arr.len());
    for m in arr {
        let o = m
            .as_object()
            .ok_or_else(|| ApiError::bad("each message must be an object", Some(param)))?;
        let role = o
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user")
            .to_string();
        let mut content = content_text(o.get("content").unwrap_or(&Value::Null), param)?;
        if let Some(calls) = o.get("tool_calls") {
            content.push_str(&calls.to_string());
        }
        out.push(Message { role, content });
    }
    Ok(out)
}

fn opt_bool(o: &serde_json::Map<String, Value>, key: &'static str) -> Result<bool, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad(
            format!("`{key}` must be a boolean"),
            Some(key),
        )),
    }
}

fn max_tokens(
    o: &serde_json::Map<String, Value>,
    keys: &[&'static str],
) -> Result<Option<u32>, ApiError> {
    token_count(o, keys, 1)
}

/// The first of `keys` present: an integer from `least` to 2^32 - 1 (`max_tokens` from 1;
/// vLLM's `min_tokens` from 0, its default).
fn token_count(
    o: &serde_json::Map<String, Value>,
    keys: &[&'static str],
    least: u64,
) -> Result<Option<u32>, ApiError> {
    for &k in keys {
        match o.get(k) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                let n = v
                    .as_u64()
                    .filter(|n| *n >= least && *n <= u32::MAX as u64)
                    .ok_or_else(|| {
                        ApiError::bad(
                            format!("`{k}` must be an integer of at least {least}, got {v}"),
                            Some(k),
                        )
                    })?;
                return Ok(Some(n as u32));
            }
        }
    }
    Ok(None)
}

fn parse_tools(
    o: &serde_json::Map<String, Value>,
) -> Result<(Vec<Tool>, Option<String>), ApiError> {
    let Some(tools) = o.get("tools").filter(|v| !v.is_null()) else {
        return Ok((Vec::new(), None));
    };
    let arr = tools
        .as_array()
        .ok_or_else(|| ApiError::bad("`tools` must be an array", Some("tools")))?;
    let mut out = Vec::new();
    for t in arr {
        // Chat format nests under `function`; Responses format is flat.
        let f = t.get("function").unwrap_or(t);
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad("each tool needs a function `name`", Some("tools")))?;
        let parameters = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        out.push(Tool {
            name: name.to_string(),
            parameters,
        });
    }
    let mut forced = None;
    match o.get("tool_choice") {
        Some(Value::String(s)) if s == "none" => return Ok((Vec::new(), None)),
        Some(Value::Object(c)) => {
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| c.get("name"))
                .and_then(Value::as_str);
            if let Some(n) = name {
                if !out.iter().any(|t| t.name == n) {
                    return Err(ApiError::bad(
                        format!("tool_choice names unknown tool `{n}`"),
                        Some("tool_choice"),
                    ));
                }
                forced = Some(n.to_string());
            }
        }
        _ => {}
    }
    Ok((out, forced))
}

fn parse_json_schema(format: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(f) = format.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match f.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            // Chat: {"json_schema": {"schema": …}}; Responses `text.format`: {"schema": …}.
            let schema = f
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .or_else(|| f.get("schema"))
                .ok_or_else(|| {
                    ApiError::bad(
                        "json_schema format needs a `schema`",
                        Some("response_format"),
                    )
                })?;
            if !schema.is_object() && !schema.is_boolean() {
                return Err(ApiError::bad(
                    "json_schema `schema` must be an object",
                    Some("response_format"),
                ));
            }
            Ok(Some(schema.clone()))
        }
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("text") | None => Ok(None),
        Some(other) => Err(ApiError::bad(
            format!("unknown response_format type `{other}`"),
            Some("response_format"),
        )),
    }
}

fn thinking(o: &serde_json::Map<String, Value>) -> bool {
    o.get("chat_template_kwargs")
        .and_then(|k| k.get("enable_thinking"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The messages' contents, one per line: the text the simulator's replies draw on.
fn joined_content(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn tools_json(tools: &[Tool], raw: Option<&Value>) -> Option<String> {
    if tools.is_empty() {
        None
    } else {
        raw.map(Value::to_string)
    }
}

/// Parse a generation request body for `api`.
pub fn parse_gen(api: Api, body: &[u8]) -> Result<GenRequest, ApiError> {
    let v = parse_json(body)?;
    let o = v
        .as_object()
        .ok_or_else(|| ApiError::bad("request body must be a JSON object", None))?;
    let model = match o.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::bad("`model` must be a string", Some("model"))),
    };
    let stream = opt_bool(o, "stream")?;
    let include_usage = o
        .get("stream_options")
        .and_then(|s| s.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (tools, forced_tool) = parse_tools(o)?;
    let thinking = thinking(o);
    let ignore_eos = opt_bool(o, "ignore_eos")?;
    let min_tokens = token_count(o, &["min_tokens"], 0)?.unwrap_or(0);
    match api {
        Api::Chat => {
            let msgs = o
                .get("messages")
                .ok_or_else(|| ApiError::bad("`messages` is required", Some("messages")))?;
            let messages = parse_messages(msgs, "messages")?;
            if messages.is_empty() {
                return Err(ApiError::bad(
                    "`messages` must not be empty",
                    Some("messages"),
                ));
            }
            let prompt_ids =
                tokenizer::encode_chat(&messages, tools_json(&tools, o.get("tools")).as_deref());
            Ok(GenRequest {
                api,
                model,
                stream,
                include_usage,
                max_tokens: max_tokens(o, &["max_completion_tokens", "max_tokens"])?,
                ignore_eos,
                min_tokens,
                prompt_ids,
                prompt_text: joined_content(&messages),
                thinking,
                json_schema: parse_json_schema(o.get("response_format"))?,
                tools,
                forced_tool,
            })
        }
        Api::Completions => {
            let prompt = match o.get("prompt") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(a)) if a.iter().all(Value::is_string) && !a.is_empty() => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(""),
                Some(_) => return Err(ApiError::bad("`prompt` must be a string", Some("prompt"))),
                None => return Err(ApiError::bad("`prompt` is required", Some("prompt"))),
            };
            Ok(GenRequest {
                api,
                model,
                stream,
                // Legacy completions put usage in the final chunk when asked.
                include_usage,
                max_tokens: max_tokens(o, &["max_tokens"])?,
                ignore_eos,
                min_tokens,
                prompt_ids: tokenizer::encode(&prompt),
                prompt_text: prompt,
                thinking,
                json_schema: parse_json_schema(o.get("response_format"))?,
                tools: Vec::new(),
                forced_tool: None,
            })
        }
        Api::Responses => {
            let mut messages = Vec::new();
            if let Some(i) = o.get("instructions").and_then(Value::as_str) {
                messages.push(Message {
                    role: "system".into(),
                    content: i.to_string(),
                });
            }
            match o.get("input") {
                Some(Value::String(s)) => messages.push(Message {
                    role: "user".into(),
                    content: s.clone(),
                }),
                Some(a @ Value::Array(_)) => messages.extend(parse_messages(a, "input")?),
                Some(_) => {
                    return Err(ApiError::bad(
                        "`input` must be a string or an array",
                        Some("input"),
                    ));
                }
                None => return Err(ApiError::bad("`input` is required", Some("input"))),
            }
            let prompt_ids =
                tokenizer::encode_chat(&messages, tools_json(&tools, o.get("tools")).as_deref());
            let format = o.get("text").and_then(|t| t.get("format"));
            Ok(GenRequest {
                api,
                model,
                stream,
                include_usage: true,
                max_tokens: max_tokens(o, &["max_output_tokens"])?,
                ignore_eos,
                min_tokens,
                prompt_ids,
                prompt_text: joined_content(&messages),
                thinking,
                json_schema: parse_json_schema(format)?,
                tools,
                forced_tool,
            })
        }
    }
}

/// Parse a `/tokenize` body (vLLM style: `prompt` or `messages`, optional `model`, `tools`).
pub fn parse_tokenize(body: &[u8]) -> Result<(Option<String>, Vec<u32>), ApiError> {
    let v = parse_json(body)?;
    let o = v
        .as_object()
        .ok_or_else(|| ApiError::bad("request body must be a JSON object", None))?;
    let model = o.get("model").and_then(Value::as_str).map(str::to_string);
    if let Some(m) = o.get("messages") {
        let messages = parse_messages(m, "messages")?;
        let (tools, _) = parse_tools(o)?;
        Ok((
            model,
            tokenizer::encode_chat(&messages, tools_json(&tools, o.get("tools")).as_deref()),
        ))
    } else if let Some(p) = o.get("prompt") {
        let p = p
            .as_str()
            .ok_or_else(|| ApiError::bad("`prompt` must be a string", Some("prompt")))?;
        Ok((model, tokenizer::encode(p)))
    } else {
        Err(ApiError::bad(
            "`prompt` or `messages` is required",
            Some("prompt"),
        ))
    }
}

/// The function a prompt asks to be written: "function named `NAME`" → NAME.
pub fn requested_function(text: &str) -> Option<&str> {
    let start = text.find("function named `")? + "function named `".len();
    let name = &text[start..];
    let end = name.find('`')?;
    let name = &name[..end];
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some(name)
}

/// The word count a prompt asks for: "about N words" → N.
pub fn requested_words(text: &str) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find("about ") {
        let start = from + pos + "about ".len();
        let digits: String = lower[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if lower[start + digits.len()..]
            .trim_start()
            .starts_with("word")
            && let Ok(n) = digits.parse::<u32>()
        {
            return Some(n);
        }
        from = start;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_and_rejects_bad_bodies() {
        let r = parse_gen(
            Api::Chat,
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,
                "stream_options":{"include_usage":true},"max_tokens":5}"#,
        )
        .unwrap();
        assert!(r.stream && r.include_usage);
        assert_eq!(r.max_tokens, Some(5));
        assert_eq!(r.prompt_ids.len(), 3 + 1 + 1 + 3);
        assert_eq!(parse_gen(Api::Chat, b"{nope").unwrap_err().status, 400);
        assert_eq!(
            parse_gen(Api::Chat, b"{}").unwrap_err().param,
            Some("messages")
        );
        assert_eq!(
            parse_gen(Api::Completions, b"{}").unwrap_err().param,
            Some("prompt")
        );
        assert_eq!(
            parse_gen(Api::Responses, b"{}").unwrap_err().param,
            Some("input")
        );
        let e = parse_gen(
            Api::Chat,
            br#"{"messages":[{"content":"x"}],"max_tokens":0}"#,
        )
        .unwrap_err();
        assert_eq!(e.param, Some("max_tokens"));
        let e = parse_gen(
            Api::Chat,
            br#"{"messages":[{"content":"x"}],"max_tokens":"7"}"#,
        )
        .unwrap_err();
        assert_eq!(e.param, Some("max_tokens"));
        // vLLM's min_tokens defaults to 0, and 0 is a value a client may send.
        let g = parse_gen(
            Api::Chat,
            br#"{"messages":[{"content":"x"}],"min_tokens":0}"#,
        )
        .unwrap();
        assert_eq!(g.min_tokens, 0);
        let e = parse_gen(
            Api::Chat,
            br#"{"messages":[{"content":"x"}],"min_tokens":-1}"#,
        )
        .unwrap_err();
        assert_eq!(e.param, Some("min_tokens"));
    }

    #[test]
    fn finds_requested_word_counts() {
        assert_eq!(requested_words("Write about 256 words on X"), Some(256));
        assert_eq!(requested_words("about 3 apples, about 12 words"), Some(12));
        assert_eq!(requested_words("tell me about it"), None);
        assert_eq!(
            requested_function("Write a Python function named `word_count` that counts"),
            Some("word_count")
        );
        assert_eq!(requested_function("a function named `1x` or `y`"), None);
        assert_eq!(requested_function("no function here"), None);
    }
}
