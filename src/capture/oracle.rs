//! Token-count oracles for prompt calibration: what the server says a prompt costs.
//!
//! - [`TokenizeOracle`]: the server's own tokenizer endpoints, in one of the
//!   [`TokenizeDialect`]s: vLLM's `POST /tokenize` with `{"model","messages"}` (chat, so the
//!   chat template is applied) or `{"model","prompt"}`, answering `{"count": N}`; llama.cpp's
//!   `POST /apply-template` then `POST /tokenize {"content"}`, answering `{"tokens": [...]}`.
//!   Chat and Responses prompts are counted through the chat template (servers turn a
//!   Responses `input` into a user message), completions prompts as raw text.
//! - [`ProbeOracle`]: the check of the tokenizer's count, and the count itself for servers
//!   without a usable tokenizer endpoint: a non-streaming request of the cell's own
//!   API with a one-token ceiling, reading `usage.prompt_tokens` (`usage.input_tokens` for the
//!   Responses API). A probe puts the prompt into the server's prefix cache, so calibrate a
//!   `unique` cell with a different salt than the run's (`PromptBuilder::with_salt`).
//!
//! Both run before the measured run, on their own short-lived connection; neither is on the
//! hot path.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

use super::endpoint::Endpoint;
use super::http::body_summary;
use crate::workload::prompt::{ChatMessage, PromptContent};
use crate::workload::request::{self, Api, ApiKey, RequestOptions};

/// Largest oracle response read (a `/tokenize` answer lists every token id).
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Why a token count could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    #[error(transparent)]
    Endpoint(#[from] super::endpoint::EndpointError),
    #[error("{url}: {detail}")]
    Http { url: String, detail: String },
    #[error("{url}: timed out after {after_ms} ms")]
    Timeout { url: String, after_ms: u128 },
    /// `body` is [`body_summary`]'s one line.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: unexpected answer ({detail}): {body}")]
    Answer {
        url: String,
        detail: String,
        body: String,
    },
    #[error("preparing the probe request: {0}")]
    Request(#[from] request::RequestError),
}

/// POST a JSON body on a fresh connection and read the whole answer.
async fn post_json(
    endpoint: &Endpoint,
    uri: Uri,
    body: Vec<u8>,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<(u16, Bytes), OracleError> {
    let url = format!("{}{}", endpoint.url.trim_end_matches('/'), uri.path());
    let exchange = async {
        let stream = endpoint.connect(timeout).await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let conn = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::HOST, endpoint.host_header())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json");
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: format!("reading the answer: {e}"),
            })?
            .to_bytes();
        conn.abort();
        Ok((status, bytes))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(OracleError::Timeout {
            url,
            after_ms: timeout.as_millis(),
        }),
    }
}

fn parse_answer(url: &str, status: u16, body: &[u8]) -> Result<Value, OracleError> {
    if !(200..300).contains(&status) {
        return Err(OracleError::Status {
            url: url.to_owned(),
            status,
            body: body_summary(body),
        });
    }
    serde_json::from_slice(body).map_err(|e| OracleError::Answer {
        url: url.to_owned(),
        detail: format!("not JSON: {e}"),
        body: body_summary(body),
    })
}

/// How a server's tokenizer endpoints count a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizeDialect {
    /// vLLM (and SGLang): `POST /tokenize` with `{"model", "messages"}` (the chat template
    /// applied) or `{"model", "prompt"}`, answering `{"count": N, "tokens": [...]}`.
    Vllm,
    /// llama.cpp's `llama-server`: `POST /apply-template {"messages"}` → `{"prompt"}` (the
    /// chat template applied as the server will), then `POST /tokenize {"content",
    /// "add_special", "parse_special": true}` → `{"tokens": [...]}`. Its `/tokenize` reads only
    /// `content`: any other body is answered `{"tokens": []}`.
    LlamaCpp,
}

impl TokenizeDialect {
    /// Every dialect, in the order they are tried.
    pub const ALL: [TokenizeDialect; 2] = [Self::Vllm, Self::LlamaCpp];

    /// `vllm` or `llama.cpp`, as run.json records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::LlamaCpp => "llama.cpp",
        }
    }
}

/// The prompt as the server's chat template sees it: the chat messages of a chat request,
/// the one user message servers make of a Responses `input`; `None` for a completions
/// prompt, which is tokenized as raw text.
fn templated_messages(api: Api, content: &PromptContent) -> Option<Vec<ChatMessage>> {
    match (api, content) {
        (Api::Completions, _) => None,
        (_, PromptContent::Messages(m)) => Some(m.clone()),
        (_, PromptContent::Text(t)) => Some(vec![ChatMessage {
            role: "user",
            content: t.clone(),
        }]),
    }
}

/// Token counts from the server's tokenizer endpoints, in one [`TokenizeDialect`].
#[derive(Debug, Clone)]
pub struct TokenizeOracle {
    pub endpoint: Endpoint,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// The API of the requests being calibrated: chat and Responses prompts are counted
    /// through the chat template, completions prompts as raw text.
    pub api: Api,
    pub dialect: TokenizeDialect,
    /// Extra top-level fields for templated prompts, e.g.
    /// `chat_template_kwargs: {"enable_thinking": false}` so the template matches the run's.
    pub chat_extra: Map<String, Value>,
    pub timeout: Duration,
}

impl TokenizeOracle {
    async fn post(&self, path: &str, body: Value) -> Result<(String, Value, Bytes), OracleError> {
        let uri = self.endpoint.path_uri(path)?;
        let url = format!("{}{}", self.endpoint.url.trim_end_matches('/'), uri.path());
        let auth = self
            .api_key
            .as_ref()
            .map(ApiKey::header_value)
            .transpose()?;
        let payload = serde_json::to_vec(&body).unwrap_or_default();
        let (status, answer) =
            post_json(&self.endpoint, uri, payload, auth.as_ref(), self.timeout).await?;
        let v = parse_answer(&url, status, &answer)?;
        Ok((url, v, answer))
    }

    /// Prompt tokens of `content` as the server would count them. A count of 0 for a
    /// non-empty prompt is an error (llama.cpp answers `{"tokens": []}` to a body it does not
    /// read): the caller must not mistake it for a count.
    pub async fn count(&self, content: &PromptContent) -> Result<u64, OracleError> {
        let messages = templated_messages(self.api, content);
        let (url, v, answer) = match (self.dialect, &messages, content) {
            (TokenizeDialect::Vllm, Some(m), _) => {
                let mut body = Map::new();
                body.insert("model".into(), json!(self.model));
                body.insert("messages".into(), json!(m));
                body.extend(self.chat_extra.clone());
                self.post("/tokenize", Value::Object(body)).await?
            }
            (TokenizeDialect::Vllm, None, _) => {
                let text = match content {
                    PromptContent::Text(t) => t.clone(),
                    PromptContent::Messages(m) => m
                        .iter()
                        .map(|m| m.content.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                self.post("/tokenize", json!({"model": self.model, "prompt": text}))
                    .await?
            }
            (TokenizeDialect::LlamaCpp, Some(m), _) => {
                let mut body = Map::new();
                body.insert("messages".into(), json!(m));
                body.extend(self.chat_extra.clone());
                let (url, v, answer) = self.post("/apply-template", Value::Object(body)).await?;
                let Some(prompt) = v.get("prompt").and_then(Value::as_str) else {
                    return Err(OracleError::Answer {
                        url,
                        detail: "no `prompt` string".into(),
                        body: body_summary(&answer),
                    });
                };
                self.post(
                    "/tokenize",
                    json!({"content": prompt, "add_special": false, "parse_special": true}),
                )
                .await?
            }
            (TokenizeDialect::LlamaCpp, None, PromptContent::Text(t)) => {
                self.post(
                    "/tokenize",
                    json!({"content": t, "add_special": true, "parse_special": true}),
                )
                .await?
            }
            (TokenizeDialect::LlamaCpp, None, PromptContent::Messages(_)) => {
                return Err(OracleError::Answer {
                    url: self.endpoint.url.clone(),
                    detail: "a completions prompt must be text".into(),
                    body: String::new(),
                });
            }
        };
        let n = if let Some(n) = v.get("count").and_then(Value::as_u64) {
            n
        } else if let Some(tokens) = v.get("tokens").and_then(Value::as_array) {
            tokens.len() as u64
        } else {
            return Err(OracleError::Answer {
                url,
                detail: "no `count` number or `tokens` array".into(),
                body: body_summary(&answer),
            });
        };
        if n == 0 && content.chars() > 0 {
            return Err(OracleError::Answer {
                url,
                detail: format!(
                    "0 tokens for a prompt of {} characters: the server did not read this request ({} dialect)",
                    content.chars(),
                    self.dialect.as_str()
                ),
                body: body_summary(&answer),
            });
        }
        Ok(n)
    }
}

/// Token counts from a one-token, non-streaming request of the cell's API.
#[derive(Debug, Clone)]
pub struct ProbeOracle {
    pub endpoint: Endpoint,
    pub options: RequestOptions,
    pub api_key: Option<ApiKey>,
    pub timeout: Duration,
}

impl ProbeOracle {
    /// Prompt tokens of `content` from the probe's `usage`.
    pub async fn count(&self, content: &PromptContent) -> Result<u64, OracleError> {
        let body = request::body_json(&self.options, 0, content, false, Some(1))?;
        let uri = self.endpoint.uri(self.options.api).clone();
        let url = format!("{}{}", self.endpoint.url.trim_end_matches('/'), uri.path());
        let auth = self
            .api_key
            .as_ref()
            .map(ApiKey::header_value)
            .transpose()?;
        let (status, answer) =
            post_json(&self.endpoint, uri, body, auth.as_ref(), self.timeout).await?;
        let v = parse_answer(&url, status, &answer)?;
        let field = match self.options.api {
            Api::Chat | Api::Completions => "prompt_tokens",
            Api::Responses => "input_tokens",
        };
        v.get("usage")
            .and_then(|u| u.get(field))
            .and_then(Value::as_u64)
            .ok_or_else(|| OracleError::Answer {
                url,
                detail: format!("no `usage.{field}` number"),
                body: body_summary(&answer),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A scripted HTTP server: answers the i-th connection's request with `answers[i]`, and
    /// hands back the requests it read, in order.
    async fn scripted(
        answers: Vec<(u16, &'static str)>,
    ) -> (Endpoint, tokio::task::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let h = tokio::spawn(async move {
            let mut requests = Vec::new();
            for (status, body) in answers {
                let (mut s, _) = l.accept().await.unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = s.read(&mut buf).await.unwrap();
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len || n == 0 {
                            break;
                        }
                    }
                }
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                s.write_all(resp.as_bytes()).await.unwrap();
                requests.push(String::from_utf8_lossy(&got).into_owned());
            }
            requests
        });
        (Endpoint::parse(0, &format!("http://{addr}")).unwrap(), h)
    }

    /// [`scripted`] with one answer.
    async fn one_shot(
        status: u16,
        body: &'static str,
    ) -> (Endpoint, tokio::task::JoinHandle<String>) {
        let (ep, h) = scripted(vec![(status, body)]).await;
        (ep, tokio::spawn(async move { h.await.unwrap().remove(0) }))
    }

    fn oracle(ep: Endpoint, api: Api, dialect: TokenizeDialect) -> TokenizeOracle {
        TokenizeOracle {
            endpoint: ep,
            model: "m".into(),
            api_key: None,
            api,
            dialect,
            chat_extra: Map::new(),
            timeout: Duration::from_secs(5),
        }
    }

    fn chat() -> PromptContent {
        PromptContent::Messages(vec![ChatMessage {
            role: "user",
            content: "hello there".into(),
        }])
    }

    #[tokio::test]
    async fn vllm_dialect_posts_messages_and_reads_count() {
        let (ep, server) = one_shot(200, r#"{"count":17,"max_model_len":4096}"#).await;
        let mut o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        o.api_key = Some(ApiKey::new("sk-x"));
        o.chat_extra.insert(
            "chat_template_kwargs".into(),
            json!({"enable_thinking": false}),
        );
        assert_eq!(o.count(&chat()).await.unwrap(), 17);
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /tokenize HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("authorization: Bearer sk-x"));
        assert!(req.contains(r#""messages":[{"role":"user","content":"hello there"}]"#));
        assert!(req.contains(r#""chat_template_kwargs":{"enable_thinking":false}"#));

        // Completions: the raw prompt.
        let (ep, server) = one_shot(200, r#"{"count":3,"tokens":[1,2,3]}"#).await;
        let o = oracle(ep, Api::Completions, TokenizeDialect::Vllm);
        assert_eq!(
            o.count(&PromptContent::Text("a b c".into())).await.unwrap(),
            3
        );
        assert!(server.await.unwrap().contains(r#""prompt":"a b c""#));

        // Responses: counted as the user message the server's chat template will see.
        let (ep, server) = one_shot(200, r#"{"count":9}"#).await;
        let o = oracle(ep, Api::Responses, TokenizeDialect::Vllm);
        assert_eq!(
            o.count(&PromptContent::Text("a b c".into())).await.unwrap(),
            9
        );
        assert!(
            server
                .await
                .unwrap()
                .contains(r#""messages":[{"role":"user","content":"a b c"}]"#)
        );
    }

    #[tokio::test]
    async fn llama_cpp_dialect_applies_the_template_then_tokenizes_its_prompt() {
        let (ep, server) = scripted(vec![
            (
                200,
                r#"{"prompt":"<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n"}"#,
            ),
            (200, r#"{"tokens":[1,2,3,4,5,6,7]}"#),
        ])
        .await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::LlamaCpp);
        assert_eq!(o.count(&chat()).await.unwrap(), 7);
        let reqs = server.await.unwrap();
        assert!(reqs[0].starts_with("POST /apply-template "), "{}", reqs[0]);
        assert!(reqs[0].contains(r#""messages":[{"role":"user","content":"hello there"}]"#));
        assert!(reqs[1].starts_with("POST /tokenize "), "{}", reqs[1]);
        assert!(
            reqs[1].contains(r#""content":"<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n","add_special":false,"parse_special":true"#),
            "{}",
            reqs[1]
        );

        // Completions: the text itself, with the special tokens the server adds.
        let (ep, server) = one_shot(200, r#"{"tokens":[1,2]}"#).await;
        let o = oracle(ep, Api::Completions, TokenizeDialect::LlamaCpp);
        assert_eq!(
            o.count(&PromptContent::Text("a b".into())).await.unwrap(),
            2
        );
        assert!(
            server
                .await
                .unwrap()
                .contains(r#""content":"a b","add_special":true,"parse_special":true"#)
        );
    }

    /// llama.cpp answers a body it does not read with `{"tokens": []}`: that is no count.
    #[tokio::test]
    async fn zero_tokens_for_a_non_empty_prompt_is_an_error() {
        let (ep, _server) = one_shot(200, r#"{"tokens":[]}"#).await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        let err = o.count(&chat()).await.unwrap_err();
        assert!(matches!(err, OracleError::Answer { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("0 tokens for a prompt of 11 characters"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn tokenize_oracle_reports_http_errors() {
        let (ep, _server) = one_shot(404, r#"{"detail":"Not Found"}"#).await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        let err = o.count(&chat()).await.unwrap_err();
        assert!(
            matches!(err, OracleError::Status { status: 404, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("/tokenize"));
    }

    #[tokio::test]
    async fn probe_oracle_reads_usage() {
        let (ep, server) = one_shot(
            200,
            r#"{"choices":[{"message":{"content":"A"}}],"usage":{"prompt_tokens":4099,"completion_tokens":1}}"#,
        )
        .await;
        let o = ProbeOracle {
            endpoint: ep,
            options: RequestOptions {
                api: Api::Chat,
                model: "m".into(),
                max_tokens: Some(512),
                thinking_disabled: true,
                omit_thinking_kwarg: false,
            },
            api_key: None,
            timeout: Duration::from_secs(5),
        };
        assert_eq!(o.count(&chat()).await.unwrap(), 4099);
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /v1/chat/completions "));
        assert!(req.contains(r#""stream":false"#));
        assert!(req.contains(r#""max_tokens":1"#));

        let (ep, _server) = one_shot(200, r#"{"usage":{"input_tokens":12}}"#).await;
        let mut o = o.clone();
        o.endpoint = ep;
        o.options.api = Api::Responses;
        assert_eq!(
            o.count(&PromptContent::Text("hi".into())).await.unwrap(),
            12
        );

        let (ep, _server) = one_shot(200, r#"{"choices":[]}"#).await;
        o.endpoint = ep;
        let err = o
            .count(&PromptContent::Text("hi".into()))
            .await
            .unwrap_err();
        assert!(matches!(err, OracleError::Answer { .. }), "{err}");
    }

    #[tokio::test]
    async fn oracle_times_out_on_a_silent_server() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _hold = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(s);
        });
        let mut o = oracle(
            Endpoint::parse(0, &format!("http://{addr}")).unwrap(),
            Api::Chat,
            TokenizeDialect::Vllm,
        );
        o.timeout = Duration::from_millis(200);
        let err = o.count(&chat()).await.unwrap_err();
        assert!(matches!(err, OracleError::Timeout { .. }), "{err}");
    }
}
